/*
 * ring_info.c
 *		Showing a ring: its points in order, each node's exact share of the
 *		keys and of their copies, and each zone's.
 *
 * These build the ring afresh from the catalog (with label indexes, which the
 * routing cache does not keep), so they also serve to validate a change
 * before it commits.
 */
#include "postgres.h"

#include "funcapi.h"
#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/numeric.h"

#include "routing/topology_cache.h"
#include "types/ringtoken.h"

/* An exact unsigned 128-bit count as numeric. */
static Datum
u128_numeric(rs_u128 value)
{
	char		buf[48];
	int			pos = sizeof(buf) - 1;

	buf[pos] = '\0';
	do
	{
		buf[--pos] = (char) ('0' + (int) (value % 10));
		value /= 10;
	} while (value > 0);
	return DirectFunctionCall3(numeric_in, CStringGetDatum(buf + pos),
							   ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1));
}

/* Load a ring for display; ERROR if it has no nodes. */
static rs_ring *
load_for_display(text *ring_name, int options)
{
	return topology_build_ring(topology_read_ring_spec(text_to_cstring(ring_name)), options);
}

PG_FUNCTION_INFO_V1(ringshard_validate_ring);

/* validate_ring(ring): build the ring as the catalog now says; its point count. */
Datum
ringshard_validate_ring(PG_FUNCTION_ARGS)
{
	rs_ring    *ring = load_for_display(PG_GETARG_TEXT_PP(0), 0);
	int32		npoints = ring ? (int32) ring->npoints : 0;

	rs_ring_free(ring);
	PG_RETURN_INT32(npoints);
}

PG_FUNCTION_INFO_V1(ringshard_ring_points);

/* ring_points(ring): every point in ring order: token, node, label index. */
Datum
ringshard_ring_points(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	rs_ring    *ring;

	InitMaterializedSRF(fcinfo, 0);
	ring = load_for_display(PG_GETARG_TEXT_PP(0), RS_RING_KEEP_LABELS);
	if (ring == NULL)
		PG_RETURN_VOID();
	PG_TRY();
	{
		Datum	   *names = palloc(sizeof(Datum) * ring->nnodes);

		for (uint32 n = 0; n < ring->nnodes; n++)
			names[n] = PointerGetDatum(cstring_to_text_with_len(ring->names[n], (int) ring->name_lens[n]));
		for (uint32 p = 0; p < ring->npoints; p++)
		{
			Datum		values[3];
			bool		nulls[3] = {false, false, false};

			values[0] = RingTokenGetDatum(rs_ring_token(ring, p));
			values[1] = names[rs_ring_point_owner(ring, p)];
			values[2] = Int32GetDatum((int32) ring->labels[p]);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	}
	PG_FINALLY();
	{
		rs_ring_free(ring);
	}
	PG_END_TRY();
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(ringshard_ring_balance);

/*
 * ring_balance(ring): per node its weight, points, the exact number of tokens
 * it owns, that as a share of the ring, its ideal share (weight over total
 * weight: 1/N when weights are equal) and the ratio of the two; its zone,
 * whether its points are explicit tokens, and at the ring's replication
 * factor the tokens it holds a copy of, as a share of all copies
 * (min(R, N) per key), and that share over the ideal.
 */
Datum
ringshard_ring_balance(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	RingSpec   *spec;
	rs_ring    *ring;

	InitMaterializedSRF(fcinfo, 0);
	spec = topology_read_ring_spec(text_to_cstring(PG_GETARG_TEXT_PP(0)));
	ring = topology_build_ring(spec, 0);
	if (ring == NULL)
		PG_RETURN_VOID();
	PG_TRY();
	{
		rs_u128    *owned = palloc(sizeof(rs_u128) * ring->nnodes);
		rs_u128    *held = palloc(sizeof(rs_u128) * ring->nnodes);
		double		space = (double) rs_ring_space(ring);
		double		copies = (double) Min((uint32) spec->replication_factor, ring->nnodes);
		double		total_weight = 0;

		rs_ring_ownership(ring, owned);
		(void) rs_ring_replicated_ownership(ring, (uint32) spec->replication_factor, held, NULL, NULL);
		for (uint32 n = 0; n < ring->nnodes; n++)
			total_weight += ring->weights[n];
		for (uint32 n = 0; n < ring->nnodes; n++)
		{
			Datum		values[12];
			bool		nulls[12] = {false};
			double		share = (double) owned[n] / space;
			double		ideal = ring->weights[n] / total_weight;
			double		copy_share = (double) held[n] / (space * copies);
			const char *zone = rs_ring_zone_name(ring, n);

			values[0] = PointerGetDatum(cstring_to_text_with_len(ring->names[n], (int) ring->name_lens[n]));
			values[1] = Float8GetDatum(ring->weights[n]);
			values[2] = Int32GetDatum((int32) ring->node_points[n]);
			values[3] = u128_numeric(owned[n]);
			values[4] = Float8GetDatum(share);
			values[5] = Float8GetDatum(ideal);
			values[6] = Float8GetDatum(share / ideal);
			if (zone)
				values[7] = CStringGetTextDatum(zone);
			else
				nulls[7] = true;
			values[8] = BoolGetDatum(ring->explicit_tokens[n] != 0);
			values[9] = u128_numeric(held[n]);
			values[10] = Float8GetDatum(copy_share);
			values[11] = Float8GetDatum(copy_share / ideal);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	}
	PG_FINALLY();
	{
		rs_ring_free(ring);
	}
	PG_END_TRY();
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(ringshard_ring_zones);

/*
 * ring_zones(ring): per zone (a node without one is a zone of its own, with
 * zone NULL) its nodes, points, share of the keys owned, share of all copies
 * at the ring's replication factor, and the fewest and most copies of one
 * key it holds.
 */
Datum
ringshard_ring_zones(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	RingSpec   *spec;
	rs_ring    *ring;

	InitMaterializedSRF(fcinfo, 0);
	spec = topology_read_ring_spec(text_to_cstring(PG_GETARG_TEXT_PP(0)));
	ring = topology_build_ring(spec, 0);
	if (ring == NULL)
		PG_RETURN_VOID();
	PG_TRY();
	{
		rs_u128    *owned = palloc(sizeof(rs_u128) * ring->nnodes);
		rs_u128    *held = palloc(sizeof(rs_u128) * ring->nnodes);
		uint32	   *zone_min = palloc(sizeof(uint32) * ring->nzones);
		uint32	   *zone_max = palloc(sizeof(uint32) * ring->nzones);
		double		space = (double) rs_ring_space(ring);
		double		copies = (double) Min((uint32) spec->replication_factor, ring->nnodes);
		rs_status	status;

		rs_ring_ownership(ring, owned);
		status = rs_ring_replicated_ownership(ring, (uint32) spec->replication_factor, held,
											  zone_min, zone_max);
		if (status != RS_OK)
			ringshard_report_core_error(status, "cannot compute copies per zone");
		/* named zones in name order, then the nodes without one, in name order */
		for (uint32 z = 0; z < ring->nzones; z++)
		{
			Datum		values[7];
			bool		nulls[7] = {false};
			Datum	   *names = palloc(sizeof(Datum) * ring->nnodes);
			int			nnames = 0;
			int32		points = 0;
			rs_u128		zone_owned = 0;
			rs_u128		zone_held = 0;

			for (uint32 n = 0; n < ring->nnodes; n++)
				if (rs_ring_zone_of(ring, n) == z)
				{
					names[nnames++] = PointerGetDatum(cstring_to_text_with_len(ring->names[n],
																			   (int) ring->name_lens[n]));
					points += (int32) ring->node_points[n];
					zone_owned += owned[n];
					zone_held += held[n];
				}
			if (ring->zoned && z < ring->nnamed_zones)
				values[0] = CStringGetTextDatum(ring->zone_names[z]);
			else
				nulls[0] = true;
			values[1] = PointerGetDatum(construct_array(names, nnames, TEXTOID, -1, false, TYPALIGN_INT));
			values[2] = Int32GetDatum(points);
			values[3] = Float8GetDatum((double) zone_owned / space);
			values[4] = Float8GetDatum((double) zone_held / (space * copies));
			values[5] = Int32GetDatum((int32) zone_min[z]);
			values[6] = Int32GetDatum((int32) zone_max[z]);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	}
	PG_FINALLY();
	{
		rs_ring_free(ring);
	}
	PG_END_TRY();
	PG_RETURN_VOID();
}

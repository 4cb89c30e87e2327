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

/*
 * Load a ring for display (NULL if it has no nodes); its spec from the
 * catalog into *spec_out unless that is NULL.
 */
static rs_ring *
load_for_display(text *ring_name, int options, RingSpec **spec_out)
{
	RingSpec   *spec = topology_read_ring_spec(text_to_cstring(ring_name));

	if (spec_out)
		*spec_out = spec;
	return topology_build_ring(spec, options);
}

/* A node's name as a text Datum. */
static Datum
node_name_datum(const rs_ring *ring, uint32 node)
{
	return PointerGetDatum(cstring_to_text_with_len(ring->names[node],
													(int) ring->name_lens[node]));
}

/*
 * What ring_balance and ring_zones divide: the tokens each node owns and
 * holds a copy of (held is left for the caller to fill, with or without the
 * per-zone extremes), the tokens in the ring, and the copies of each key.
 */
typedef struct ring_shares
{
	rs_u128    *owned;
	rs_u128    *held;
	double		space;
	double		copies;
} ring_shares;

static void
ring_shares_init(ring_shares *shares, const rs_ring *ring, int replication_factor)
{
	shares->owned = palloc(sizeof(rs_u128) * ring->nnodes);
	shares->held = palloc(sizeof(rs_u128) * ring->nnodes);
	shares->space = (double) rs_ring_space(ring);
	shares->copies = (double) Min((uint32) replication_factor, ring->nnodes);
	rs_ring_ownership(ring, shares->owned);
}

/* Adds the rows of one display of a ring (see show_ring_rows). */
typedef void (*ring_rows_fn) (ReturnSetInfo *rsinfo, const rs_ring *ring,
							  const RingSpec *spec);

/*
 * The frame the set-returning displays share: load the ring the first
 * argument names, let add_rows fill the result, and free the ring however
 * that ends.  No rows when the ring has no nodes.
 */
static Datum
show_ring_rows(FunctionCallInfo fcinfo, int options, ring_rows_fn add_rows)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	RingSpec   *spec;
	rs_ring    *ring;

	InitMaterializedSRF(fcinfo, 0);
	ring = load_for_display(PG_GETARG_TEXT_PP(0), options, &spec);
	if (ring == NULL)
		PG_RETURN_VOID();
	PG_TRY();
	{
		add_rows(rsinfo, ring, spec);
	}
	PG_FINALLY();
	{
		rs_ring_free(ring);
	}
	PG_END_TRY();
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(ringshard_validate_ring);

/* validate_ring(ring): build the ring as the catalog now says; its point count. */
Datum
ringshard_validate_ring(PG_FUNCTION_ARGS)
{
	rs_ring    *ring = load_for_display(PG_GETARG_TEXT_PP(0), 0, NULL);
	int32		npoints = ring ? (int32) ring->npoints : 0;

	rs_ring_free(ring);
	PG_RETURN_INT32(npoints);
}

/* The rows of ring_points(ring) (see below). */
static void
ring_points_rows(ReturnSetInfo *rsinfo, const rs_ring *ring, const RingSpec *spec)
{
	Datum	   *names = palloc(sizeof(Datum) * ring->nnodes);

	for (uint32 n = 0; n < ring->nnodes; n++)
		names[n] = node_name_datum(ring, n);
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

PG_FUNCTION_INFO_V1(ringshard_ring_points);

/* ring_points(ring): every point in ring order: token, node, label index. */
Datum
ringshard_ring_points(PG_FUNCTION_ARGS)
{
	return show_ring_rows(fcinfo, RS_RING_KEEP_LABELS, ring_points_rows);
}

/* The rows of ring_balance(ring) (see below). */
static void
ring_balance_rows(ReturnSetInfo *rsinfo, const rs_ring *ring, const RingSpec *spec)
{
	ring_shares shares;
	double		total_weight = 0;

	ring_shares_init(&shares, ring, spec->replication_factor);
	(void) rs_ring_replicated_ownership(ring, (uint32) spec->replication_factor, shares.held, NULL, NULL);
	for (uint32 n = 0; n < ring->nnodes; n++)
		total_weight += ring->weights[n];
	for (uint32 n = 0; n < ring->nnodes; n++)
	{
		Datum		values[12];
		bool		nulls[12] = {false};
		double		share = (double) shares.owned[n] / shares.space;
		double		ideal = ring->weights[n] / total_weight;
		double		copy_share = (double) shares.held[n] / (shares.space * shares.copies);
		const char *zone = rs_ring_zone_name(ring, n);

		values[0] = node_name_datum(ring, n);
		values[1] = Float8GetDatum(ring->weights[n]);
		values[2] = Int32GetDatum((int32) ring->node_points[n]);
		values[3] = u128_numeric(shares.owned[n]);
		values[4] = Float8GetDatum(share);
		values[5] = Float8GetDatum(ideal);
		values[6] = Float8GetDatum(share / ideal);
		if (zone)
			values[7] = CStringGetTextDatum(zone);
		else
			nulls[7] = true;
		values[8] = BoolGetDatum(ring->explicit_tokens[n] != 0);
		values[9] = u128_numeric(shares.held[n]);
		values[10] = Float8GetDatum(copy_share);
		values[11] = Float8GetDatum(copy_share / ideal);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
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
	return show_ring_rows(fcinfo, 0, ring_balance_rows);
}

/* The rows of ring_zones(ring) (see below). */
static void
ring_zones_rows(ReturnSetInfo *rsinfo, const rs_ring *ring, const RingSpec *spec)
{
	ring_shares shares;
	uint32	   *zone_min = palloc(sizeof(uint32) * ring->nzones);
	uint32	   *zone_max = palloc(sizeof(uint32) * ring->nzones);
	rs_status	status;

	ring_shares_init(&shares, ring, spec->replication_factor);
	status = rs_ring_replicated_ownership(ring, (uint32) spec->replication_factor, shares.held,
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
				names[nnames++] = node_name_datum(ring, n);
				points += (int32) ring->node_points[n];
				zone_owned += shares.owned[n];
				zone_held += shares.held[n];
			}
		if (ring->zoned && z < ring->nnamed_zones)
			values[0] = CStringGetTextDatum(ring->zone_names[z]);
		else
			nulls[0] = true;
		values[1] = PointerGetDatum(construct_array(names, nnames, TEXTOID, -1, false, TYPALIGN_INT));
		values[2] = Int32GetDatum(points);
		values[3] = Float8GetDatum((double) zone_owned / shares.space);
		values[4] = Float8GetDatum((double) zone_held / (shares.space * shares.copies));
		values[5] = Int32GetDatum((int32) zone_min[z]);
		values[6] = Int32GetDatum((int32) zone_max[z]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
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
	return show_ring_rows(fcinfo, 0, ring_zones_rows);
}

/*
 * ring_info.c
 *		Showing a ring: its points in order, and each node's exact share.
 *
 * These build the ring afresh from the catalog (with label indexes, which the
 * routing cache does not keep), so they also serve to validate a change
 * before it commits.
 */
#include "postgres.h"

#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/numeric.h"

#include "ringtoken.h"
#include "topology_cache.h"

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
 * weight: 1/N when weights are equal) and the ratio of the two.
 */
Datum
ringshard_ring_balance(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	rs_ring    *ring;

	InitMaterializedSRF(fcinfo, 0);
	ring = load_for_display(PG_GETARG_TEXT_PP(0), 0);
	if (ring == NULL)
		PG_RETURN_VOID();
	PG_TRY();
	{
		rs_u128    *owned = palloc(sizeof(rs_u128) * ring->nnodes);
		double		space = (double) rs_ring_space(ring);
		double		total_weight = 0;

		rs_ring_ownership(ring, owned);
		for (uint32 n = 0; n < ring->nnodes; n++)
			total_weight += ring->weights[n];
		for (uint32 n = 0; n < ring->nnodes; n++)
		{
			Datum		values[7];
			bool		nulls[7] = {false};
			double		share = (double) owned[n] / space;
			double		ideal = ring->weights[n] / total_weight;

			values[0] = PointerGetDatum(cstring_to_text_with_len(ring->names[n], (int) ring->name_lens[n]));
			values[1] = Float8GetDatum(ring->weights[n]);
			values[2] = Int32GetDatum((int32) ring->node_points[n]);
			values[3] = u128_numeric(owned[n]);
			values[4] = Float8GetDatum(share);
			values[5] = Float8GetDatum(ideal);
			values[6] = Float8GetDatum(share / ideal);
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

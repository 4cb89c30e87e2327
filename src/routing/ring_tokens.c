/*
 * ring_tokens.c
 *		allocate_tokens: explicit tokens for a node (docs/routing.md §8),
 *		chosen by the core's allocation (rs_ring_alloc.h) on a ring as the
 *		catalog has it now.  Nothing is written: set_node_tokens and
 *		add_node(..., tokens => n) store what it returns.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "routing/ring_tokens.h"
#include "rs_ring_alloc.h"
#include "types/ringtoken.h"

/* Allocate count tokens for node on the ring a spec describes (see ring_tokens.h). */
uint64 *
ring_tokens_allocate(const RingSpec *spec, const char *node, const char *zone,
					 double weight, int32 count)
{
	rs_ring_member member;
	uint64	   *tokens;
	long		bad = -1;
	rs_status	status;

	if (spec->algorithm != RS_RING_MURMUR3)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("ring \"%s\" is a ketama ring, which places points as libketama does", spec->name),
				 errhint("Explicit tokens are for murmur3 rings.")));
	if (count < 1 || count > (int32) RS_RING_MAX_TOKENS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("token count %d is outside 1..%u", count, RS_RING_MAX_TOKENS),
				 errhint("16 tokens per node keep every node within a few per cent of its share.")));
	if (node[0] == '\0' || strlen(node) > RS_RING_MAX_NAME)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid node name \"%s\"", node),
				 errdetail("A node name is not empty and at most %d bytes.", RS_RING_MAX_NAME)));
	memset(&member, 0, sizeof(member));
	member.name = node;
	member.name_len = strlen(node);
	member.weight = weight;
	if (zone != NULL)
	{
		member.zone = zone;
		member.zone_len = strlen(zone);
	}
	tokens = palloc(sizeof(uint64) * count);
	status = rs_ring_allocate_tokens(spec->members, (size_t) spec->nmembers, (uint32) spec->vnodes,
									 (uint32) spec->replication_factor, &member, (uint32) count,
									 tokens, &bad);
	if (status == RS_ERR_TOO_MANY_POINTS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("cannot allocate %d tokens for node \"%s\" on ring \"%s\"", count, node, spec->name),
				 errdetail("A ring holds at most %u points.", RS_RING_MAX_POINTS)));
	if (status != RS_OK && bad >= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cannot allocate tokens on ring \"%s\": %s", spec->name, rs_status_text(status)),
				 errdetail("The offending node is \"%s\".", spec->members[bad].name)));
	if (status != RS_OK)
		ringshard_report_core_error(status, psprintf("cannot allocate tokens for node \"%s\"", node));
	return tokens;
}

/* A ringtoken[] of count tokens; type is ringtoken's oid. */
ArrayType *
ring_tokens_array(const uint64 *tokens, int count, Oid type)
{
	Datum	   *elems = palloc(sizeof(Datum) * Max(count, 1));

	for (int i = 0; i < count; i++)
		elems[i] = RingTokenGetDatum(tokens[i]);
	return construct_array(elems, count, type, 8, true, TYPALIGN_DOUBLE);
}

PG_FUNCTION_INFO_V1(ringshard_allocate_tokens);

/*
 * allocate_tokens(node, count, ring): count tokens for the node, chosen as if
 * it held no points yet, for its zone and weight on the ring if it is a
 * member (else no zone, weight 1).
 */
Datum
ringshard_allocate_tokens(PG_FUNCTION_ARGS)
{
	char	   *node = text_to_cstring(PG_GETARG_TEXT_PP(0));
	int32		count = PG_GETARG_INT32(1);
	RingSpec   *spec = topology_read_ring_spec(text_to_cstring(PG_GETARG_TEXT_PP(2)));
	const char *zone = NULL;
	double		weight = 1;
	uint64	   *tokens;

	for (int i = 0; i < spec->nmembers; i++)
		if (strcmp(spec->members[i].name, node) == 0)
		{
			zone = spec->members[i].zone;
			weight = spec->members[i].weight;
		}
	tokens = ring_tokens_allocate(spec, node, zone, weight, count);
	PG_RETURN_ARRAYTYPE_P(ring_tokens_array(tokens, count,
											get_element_type(get_fn_expr_rettype(fcinfo->flinfo))));
}

/*
 * previews.c
 *		What a topology change would move, before it is made: exact owner and
 *		copy changes per token range, the proposed placement of single keys
 *		(for row-level plans), and the scheme comparison.  Changes: a node
 *		added (with a weight, a zone, explicit or allocated tokens), removed,
 *		reweighted, moved to another zone, or given explicit tokens.  Nothing
 *		here writes to the catalog.
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "utils/array.h"
#include "utils/builtins.h"

#include "routing/ring_tokens.h"
#include "routing/topology_cache.h"
#include "rs_ring_diff.h"
#include "rs_schemes.h"
#include "types/key_bytes.h"
#include "types/ringtoken.h"

/* The kinds of change a preview can describe. */
typedef enum ProposedChangeKind
{
	CHANGE_ADD,
	CHANGE_REMOVE,
	CHANGE_SET_WEIGHT,
	CHANGE_SET_ZONE,
	CHANGE_SET_TOKENS
} ProposedChangeKind;

/*
 * A change as the previews take it: the node, and what the kind uses of the
 * rest.  add: weight, zone (NULL: none), tokens (NULL: labelled vnodes) or
 * token_count (> 0: as many allocated tokens, as add_node(..., tokens => n)
 * chooses them); set_weight: weight; set_zone: zone (NULL clears it);
 * set_tokens: tokens (NULL: back to labelled vnodes).
 */
typedef struct ProposedChange
{
	ProposedChangeKind kind;
	const char *node;
	double		weight;
	const char *zone;
	const uint64 *tokens;
	uint32		ntokens;
	int32		token_count;
} ProposedChange;

#define CHANGE_HINT "Use 'add', 'remove', 'set_weight', 'set_zone' or 'set_tokens'."

/* Parse 'add', 'remove', 'set_weight', 'set_zone' or 'set_tokens'. */
static ProposedChangeKind
parse_change(const char *change)
{
	if (strcmp(change, "add") == 0)
		return CHANGE_ADD;
	if (strcmp(change, "remove") == 0)
		return CHANGE_REMOVE;
	if (strcmp(change, "set_weight") == 0)
		return CHANGE_SET_WEIGHT;
	if (strcmp(change, "set_zone") == 0)
		return CHANGE_SET_ZONE;
	if (strcmp(change, "set_tokens") == 0)
		return CHANGE_SET_TOKENS;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("unknown topology change \"%s\"", change),
			 errhint(CHANGE_HINT)));
}

/*
 * Whether one of the first n arguments is NULL.  preview_change and
 * proposed_replicas are not strict (their options may be NULL), and answer
 * nothing for a NULL among their first arguments: both check them here.
 */
static bool
leading_arg_is_null(FunctionCallInfo fcinfo, int n, const char *function)
{
	if (PG_NARGS() < n)
		elog(ERROR, "%s takes at least %d arguments", function, n);
	for (int i = 0; i < n; i++)
		if (PG_ARGISNULL(i))
			return true;
	return false;
}

/*
 * The change given by SQL arguments: change at position first, then node and
 * weight, then zone, tokens and token_count from position rest (each may be
 * past the last argument).  Change and node must not be NULL, nor the weight
 * of 'add' and 'set_weight'.
 */
static ProposedChange
change_from_args(FunctionCallInfo fcinfo, int first, int rest)
{
	ProposedChange change;

	memset(&change, 0, sizeof(change));
	if (PG_ARGISNULL(first) || PG_ARGISNULL(first + 1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("the change and the node must not be null"),
				 errhint(CHANGE_HINT)));
	change.kind = parse_change(text_to_cstring(PG_GETARG_TEXT_PP(first)));
	change.node = text_to_cstring(PG_GETARG_TEXT_PP(first + 1));
	change.weight = PG_ARGISNULL(first + 2) ? 0 : PG_GETARG_FLOAT8(first + 2);
	if (PG_ARGISNULL(first + 2) && (change.kind == CHANGE_ADD || change.kind == CHANGE_SET_WEIGHT))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("the weight of a change \"%s\" must not be null",
						change.kind == CHANGE_ADD ? "add" : "set_weight")));
	if (PG_NARGS() > rest && !PG_ARGISNULL(rest))
		change.zone = text_to_cstring(PG_GETARG_TEXT_PP(rest));
	if (PG_NARGS() > rest + 1 && !PG_ARGISNULL(rest + 1))
		change.tokens = topology_token_array(PG_GETARG_ARRAYTYPE_P(rest + 1), &change.ntokens);
	if (PG_NARGS() > rest + 2 && !PG_ARGISNULL(rest + 2))
		change.token_count = PG_GETARG_INT32(rest + 2);
	if (change.zone != NULL && (change.zone[0] == '\0' || strlen(change.zone) > RS_RING_MAX_NAME))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 change.zone[0] == '\0' ? errmsg("a zone must not be empty") :
				 errmsg("a zone of %zu bytes is too long", strlen(change.zone)),
				 errdetail("A zone is a name of 1 to %d bytes.", RS_RING_MAX_NAME),
				 errhint("Give NULL for no zone (the node is then a zone of its own).")));
	if (change.tokens != NULL && change.token_count != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("give either tokens or a token count, not both")));
	if (change.token_count != 0 && change.kind != CHANGE_ADD)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a token count is for a change \"add\""),
				 errhint("For set_tokens, give the tokens: ringshard.allocate_tokens(node, count, ring) chooses them.")));
	return change;
}

/* A short text that identifies a change, for caching what was built for it. */
static char *
change_signature(const char *ring, const ProposedChange *change)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, "%d|%s|%.17g|%s|%d|%d", (int) change->kind, change->node, change->weight,
					 change->zone ? change->zone : "", change->zone != NULL, change->token_count);
	if (change->tokens)
		for (uint32 i = 0; i < change->ntokens; i++)
			appendStringInfo(&buf, ",%llu", (unsigned long long) change->tokens[i]);
	else
		appendStringInfoString(&buf, "|labelled");
	appendStringInfo(&buf, "|%s", ring);
	return buf.data;
}

/* Index of a member by name, or -1. */
static int
member_index(const RingSpec *spec, const char *node)
{
	for (int i = 0; i < spec->nmembers; i++)
		if (strcmp(spec->members[i].name, node) == 0)
			return i;
	return -1;
}

/* Zones and tokens are murmur3's (§7, §8). */
static void
check_murmur3(const RingSpec *spec, const char *what)
{
	if (spec->algorithm != RS_RING_MURMUR3)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("ring \"%s\" is a ketama ring: it has no %s", spec->name, what),
				 errhint("Zones and explicit tokens are for murmur3 rings.")));
}

/* The spec after a change; the input is not modified. */
static RingSpec *
apply_change(const RingSpec *current, const ProposedChange *change)
{
	RingSpec   *proposed = palloc(sizeof(RingSpec));
	int			index = member_index(current, change->node);
	double		weight = change->weight;

	*proposed = *current;
	proposed->members = palloc0(sizeof(rs_ring_member) * (current->nmembers + 1));
	proposed->node_up = palloc(sizeof(bool) * (current->nmembers + 1));
	memcpy(proposed->members, current->members, sizeof(rs_ring_member) * current->nmembers);
	memcpy(proposed->node_up, current->node_up, sizeof(bool) * current->nmembers);

	if ((change->kind == CHANGE_ADD || change->kind == CHANGE_SET_WEIGHT) &&
		!(weight > 0 && isfinite(weight)))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("weight %g is not a finite number greater than zero", weight)));
	if (change->zone != NULL && (change->kind == CHANGE_ADD || change->kind == CHANGE_SET_ZONE))
		check_murmur3(current, "zones");
	if ((change->tokens != NULL || change->token_count != 0) &&
		(change->kind == CHANGE_ADD || change->kind == CHANGE_SET_TOKENS))
		check_murmur3(current, "explicit tokens");
	switch (change->kind)
	{
		case CHANGE_ADD:
			{
				rs_ring_member *m = &proposed->members[proposed->nmembers];

				if (change->node[0] == '\0')
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("invalid node name \"\"")));
				if (index >= 0)
					ereport(ERROR,
							(errcode(ERRCODE_DUPLICATE_OBJECT),
							 errmsg("node \"%s\" is already on ring \"%s\"", change->node, current->name)));
				m->name = pstrdup(change->node);
				m->name_len = strlen(change->node);
				m->weight = weight;
				if (change->zone)
				{
					m->zone = change->zone;
					m->zone_len = strlen(change->zone);
				}
				m->tokens = change->tokens;
				m->ntokens = change->ntokens;
				proposed->node_up[proposed->nmembers] = true;
				proposed->nmembers++;
				/* allocated as add_node allocates them: the member with its zone and weight first */
				if (change->token_count != 0)
				{
					m->tokens = ring_tokens_allocate(proposed, change->node, change->zone, weight,
													 change->token_count);
					m->ntokens = (uint32) change->token_count;
				}
			}
			break;
		case CHANGE_REMOVE:
		case CHANGE_SET_WEIGHT:
		case CHANGE_SET_ZONE:
		case CHANGE_SET_TOKENS:
			if (index < 0)
				ereport(ERROR,
						(errcode(ERRCODE_UNDEFINED_OBJECT),
						 errmsg("node \"%s\" is not on ring \"%s\"", change->node, current->name)));
			if (change->kind == CHANGE_SET_WEIGHT)
				proposed->members[index].weight = weight;
			else if (change->kind == CHANGE_SET_ZONE)
			{
				proposed->members[index].zone = change->zone;
				proposed->members[index].zone_len = change->zone ? strlen(change->zone) : 0;
			}
			else if (change->kind == CHANGE_SET_TOKENS)
			{
				proposed->members[index].tokens = change->tokens;
				proposed->members[index].ntokens = change->ntokens;
			}
			else
			{
				memmove(&proposed->members[index], &proposed->members[index + 1],
						sizeof(rs_ring_member) * (proposed->nmembers - index - 1));
				memmove(&proposed->node_up[index], &proposed->node_up[index + 1],
						sizeof(bool) * (proposed->nmembers - index - 1));
				proposed->nmembers--;
			}
			break;
	}
	return proposed;
}

/* A span of tokens as a fraction of the ring. */
static double
span_fraction(rs_u128 span, const rs_ring *ring)
{
	return (double) span / (double) rs_ring_space(ring);
}

/*
 * Emit one row of a preview of ranges: two texts (the range's old and new
 * owner, or a node and whether it gains or loses a copy), the range and its
 * share of the ring.  Owner moves and copy changes are both such rows.
 */
static void
emit_range_row(ReturnSetInfo *rsinfo, const char *first, const char *second,
			   uint64 range_start, uint64 range_end, double fraction)
{
	Datum		values[5];
	bool		nulls[5] = {false, false, false, false, false};

	values[0] = CStringGetTextDatum(first);
	values[1] = CStringGetTextDatum(second);
	values[2] = RingTokenGetDatum(range_start);
	values[3] = RingTokenGetDatum(range_end);
	values[4] = Float8GetDatum(fraction);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/* Emit owner moves from old to new; either ring may be NULL (no nodes). */
static void
emit_owner_moves(FunctionCallInfo fcinfo, rs_ring *old_ring, rs_ring *new_ring)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	rs_owner_move *moves = NULL;
	size_t		nmoves = 0;
	rs_status	status;

	if (old_ring == NULL || new_ring == NULL)
	{
		/* From or to no nodes at all: the whole ring changes hands, per node. */
		rs_ring    *ring = old_ring ? old_ring : new_ring;
		rs_u128    *owned;

		if (ring == NULL)
			return;
		owned = palloc(sizeof(rs_u128) * ring->nnodes);
		rs_ring_ownership(ring, owned);
		for (uint32 n = 0; n < ring->nnodes; n++)
		{
			Datum		values[5];
			bool		nulls[5] = {old_ring == NULL, new_ring == NULL, true, true, false};
			Datum		name = CStringGetTextDatum(ring->names[n]);

			values[0] = name;
			values[1] = name;
			values[4] = Float8GetDatum(span_fraction(owned[n], ring));
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
		return;
	}

	status = rs_ring_owner_moves(old_ring, new_ring, &moves, &nmoves);
	if (status != RS_OK)
		ringshard_report_core_error(status, "cannot compute the moves");
	for (size_t i = 0; i < nmoves; i++)
		emit_range_row(rsinfo, moves[i].from_node, moves[i].to_node, moves[i].range_start,
					   moves[i].range_end, span_fraction(moves[i].span, old_ring));
	free(moves);
}

/* Emit copy changes from old to new replica sets. */
static void
emit_copy_changes(FunctionCallInfo fcinfo, rs_ring *old_ring, rs_ring *new_ring, int replicas)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	rs_copy_change *changes = NULL;
	size_t		nchanges = 0;
	rs_status	status;

	if (old_ring == NULL || new_ring == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("a copy preview needs nodes on the ring before and after the change"),
				 errhint("Use the owner preview to see a ring go from or to no nodes.")));
	status = rs_ring_copy_changes(old_ring, (uint32) replicas, new_ring, (uint32) replicas,
								  &changes, &nchanges);
	if (status != RS_OK)
		ringshard_report_core_error(status, "cannot compute the copy changes");
	for (size_t i = 0; i < nchanges; i++)
		emit_range_row(rsinfo, changes[i].node, changes[i].gains ? "gains" : "loses", changes[i].range_start,
					   changes[i].range_end, span_fraction(changes[i].span, old_ring));
	free(changes);
}

PG_FUNCTION_INFO_V1(ringshard_preview_change);

/*
 * preview_change(ring, change, node, weight, copies, zone, tokens,
 * token_count): the ranges whose owner (copies = false) or replica set
 * (copies = true) a change would alter.
 */
Datum
ringshard_preview_change(PG_FUNCTION_ARGS)
{
	char	   *ring_name;
	ProposedChange change;
	bool		copies;
	RingSpec   *current;
	RingSpec   *proposed;
	rs_ring    *old_ring = NULL;
	rs_ring    *new_ring = NULL;

	InitMaterializedSRF(fcinfo, 0);
	/* NULL ring, change, node, weight or copies: no rows (the options may be NULL) */
	if (leading_arg_is_null(fcinfo, 5, "preview_change"))
		PG_RETURN_VOID();
	ring_name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	copies = PG_GETARG_BOOL(4);
	change = change_from_args(fcinfo, 1, 5);
	current = topology_read_ring_spec(ring_name);
	proposed = apply_change(current, &change);
	PG_TRY();
	{
		old_ring = topology_build_ring(current, 0);
		new_ring = topology_build_ring(proposed, 0);
		if (copies)
			emit_copy_changes(fcinfo, old_ring, new_ring, current->replication_factor);
		else
			emit_owner_moves(fcinfo, old_ring, new_ring);
	}
	PG_FINALLY();
	{
		rs_ring_free(old_ring);
		rs_ring_free(new_ring);
	}
	PG_END_TRY();
	PG_RETURN_VOID();
}

/* A proposed ring kept by a call site while the topology is unchanged. */
typedef struct ProposedRingState
{
	uint64		generation;
	char	   *signature;		/* ring, change, node, weight it was built for */
	rs_ring    *ring;
	int			replication_factor;
	Datum	   *node_texts;
	KeyEncoder	key;
} ProposedRingState;

/* Free a call site's proposed ring when its memory context goes away. */
static void
free_proposed_ring(void *arg)
{
	ProposedRingState *state = arg;

	rs_ring_free(state->ring);
	state->ring = NULL;
}

PG_FUNCTION_INFO_V1(ringshard_proposed_replicas);

/*
 * proposed_replicas(key, ring, change, node, weight, zone, tokens,
 * token_count): the key's replica set, owner first, on the ring as it would
 * be after the change.
 */
Datum
ringshard_proposed_replicas(PG_FUNCTION_ARGS)
{
	ProposedRingState *state = fcinfo->flinfo->fn_extra;
	char	   *ring_name;
	ProposedChange change;
	char	   *signature;
	char		buf[KEY_BYTES_BUFSIZE];
	size_t		len;
	const char *bytes;
	uint16	   *nodes;
	uint32		count = 0;
	Datum	   *elems;
	rs_status	status;

	/* NULL key, ring, change, node or weight: NULL (the options may be NULL) */
	if (leading_arg_is_null(fcinfo, 5, "proposed_replicas"))
		PG_RETURN_NULL();
	ring_name = text_to_cstring(PG_GETARG_TEXT_PP(1));
	change = change_from_args(fcinfo, 2, 5);
	signature = change_signature(ring_name, &change);
	if (state == NULL)
	{
		MemoryContextCallback *callback;

		state = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(ProposedRingState));
		key_encoder_init(&state->key, get_fn_expr_argtype(fcinfo->flinfo, 0), fcinfo->flinfo->fn_mcxt);
		callback = MemoryContextAlloc(fcinfo->flinfo->fn_mcxt, sizeof(MemoryContextCallback));
		callback->func = free_proposed_ring;
		callback->arg = state;
		MemoryContextRegisterResetCallback(fcinfo->flinfo->fn_mcxt, callback);
		fcinfo->flinfo->fn_extra = state;
	}
	if (state->generation != topology_cache_generation || state->signature == NULL ||
		strcmp(state->signature, signature) != 0)
	{
		RingSpec   *current = topology_read_ring_spec(ring_name);
		RingSpec   *proposed = apply_change(current, &change);
		rs_ring    *ring = topology_build_ring(proposed, 0);

		rs_ring_free(state->ring);
		state->ring = ring;
		state->replication_factor = proposed->replication_factor;
		state->signature = MemoryContextStrdup(fcinfo->flinfo->fn_mcxt, signature);
		state->generation = topology_cache_generation;
		if (ring)
		{
			state->node_texts = MemoryContextAlloc(fcinfo->flinfo->fn_mcxt, sizeof(Datum) * ring->nnodes);
			for (uint32 i = 0; i < ring->nnodes; i++)
			{
				MemoryContext old = MemoryContextSwitchTo(fcinfo->flinfo->fn_mcxt);

				state->node_texts[i] = CStringGetTextDatum(ring->names[i]);
				MemoryContextSwitchTo(old);
			}
		}
	}
	if (state->ring == NULL)
		PG_RETURN_NULL();

	bytes = key_encoder_bytes(&state->key, PG_GETARG_DATUM(0), buf, &len);
	nodes = palloc(sizeof(uint16) * state->replication_factor);
	status = rs_ring_replicas(state->ring, rs_ring_key_hash(state->ring, bytes, len),
							  (uint32) state->replication_factor, nodes, &count);
	if (status != RS_OK)
		ringshard_report_core_error(status, "cannot compute replicas");
	elems = palloc(sizeof(Datum) * Max(count, 1));
	for (uint32 i = 0; i < count; i++)
		elems[i] = state->node_texts[nodes[i]];
	PG_RETURN_ARRAYTYPE_P(construct_array(elems, (int) count, TEXTOID, -1, false, TYPALIGN_INT));
}

PG_FUNCTION_INFO_V1(ringshard_compare_schemes);

/* compare_schemes(from_nodes, to_nodes, keys, vnodes): moved fraction and balance per scheme. */
Datum
ringshard_compare_schemes(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int32		from_nodes = PG_GETARG_INT32(0);
	int32		to_nodes = PG_GETARG_INT32(1);
	int32		keys = PG_GETARG_INT32(2);
	int32		vnodes = PG_GETARG_INT32(3);
	rs_scheme_result results[RS_SCHEME_COUNT];
	rs_status	status;

	InitMaterializedSRF(fcinfo, 0);
	if (from_nodes < 1 || to_nodes < 1 || from_nodes > 1000 || to_nodes > 1000 ||
		keys < 1 || keys > 1000000 || vnodes < 1 || vnodes > 4096)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("compare_schemes(%d, %d, %d, %d) is outside the supported sizes",
						from_nodes, to_nodes, keys, vnodes),
				 errhint("Nodes 1..1000, keys 1..1000000, vnodes 1..4096: at most a few seconds of work, which cannot be cancelled.")));
	status = rs_compare_schemes((uint32) from_nodes, (uint32) to_nodes, (uint32) keys,
								(uint32) vnodes, results);
	if (status != RS_OK)
		ringshard_report_core_error(status, "cannot compare schemes");
	for (int s = 0; s < RS_SCHEME_COUNT; s++)
	{
		Datum		values[5];
		bool		nulls[5] = {false, false, false, false, false};

		values[0] = CStringGetTextDatum(results[s].scheme);
		values[1] = Float8GetDatum(results[s].moved_fraction);
		values[2] = Float8GetDatum(results[s].ideal_fraction);
		values[3] = Float8GetDatum(results[s].max_over_mean);
		values[4] = Float8GetDatum(results[s].stddev_share);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	PG_RETURN_VOID();
}

/*
 * The members of a placement snapshot (a JSON array of {node, weight, zone,
 * tokens}, as ringshard_internal.placement_snapshot records them; zone and
 * tokens are absent from snapshots taken before 1.2, and mean none).
 */
static void
snapshot_members(Datum members_json, RingSpec *spec)
{
	Oid			argtypes[1] = {JSONOID};
	Datum		values[1] = {members_json};
	MemoryContext caller = CurrentMemoryContext;

	SPI_connect();
	if (SPI_execute_with_args("SELECT x OPERATOR(pg_catalog.->>) 'node', "
							  "(x OPERATOR(pg_catalog.->>) 'weight')::pg_catalog.float8, "
							  "x OPERATOR(pg_catalog.->>) 'zone', "
							  "CASE WHEN pg_catalog.json_typeof(x OPERATOR(pg_catalog.->) 'tokens') "
							  "OPERATOR(pg_catalog.=) 'array' THEN ARRAY(SELECT t::pg_catalog.ringtoken "
							  "FROM pg_catalog.json_array_elements_text(x OPERATOR(pg_catalog.->) 'tokens') t) END "
							  "FROM pg_catalog.json_array_elements($1) x",
							  1, argtypes, values, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "cannot read the members of a placement snapshot");
	spec->nmembers = (int) SPI_processed;
	spec->members = MemoryContextAllocZero(caller, sizeof(rs_ring_member) * (spec->nmembers + 1));
	for (int i = 0; i < spec->nmembers; i++)
	{
		HeapTuple	tuple = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		Datum		value = SPI_getbinval(tuple, desc, 1, &isnull);
		rs_ring_member *m = &spec->members[i];

		if (isnull)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("a placement snapshot names a member without a node")));
		m->name = MemoryContextStrdup(caller, TextDatumGetCString(value));
		m->name_len = strlen(m->name);
		value = SPI_getbinval(tuple, desc, 2, &isnull);
		m->weight = isnull ? 1 : DatumGetFloat8(value);
		value = SPI_getbinval(tuple, desc, 3, &isnull);
		if (!isnull)
		{
			m->zone = MemoryContextStrdup(caller, TextDatumGetCString(value));
			m->zone_len = strlen(m->zone);
		}
		value = SPI_getbinval(tuple, desc, 4, &isnull);
		if (!isnull)
		{
			MemoryContext old = MemoryContextSwitchTo(caller);

			m->tokens = topology_token_array(DatumGetArrayTypeP(value), &m->ntokens);
			MemoryContextSwitchTo(old);
		}
	}
	SPI_finish();
}

/*
 * The steps from the ring as it was (previous) to the ring as it is
 * (current), as rows: range, fraction, old and new replica sets.
 */
static void
emit_move_plan(FunctionCallInfo fcinfo, RingSpec *previous, RingSpec *current, int32 old_replicas)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	rs_ring    *old_ring = NULL;
	rs_ring    *new_ring = NULL;
	rs_move_step *steps = NULL;
	size_t		nsteps = 0;

	PG_TRY();
	{
		rs_status	status;

		old_ring = topology_build_ring(previous, 0);
		new_ring = topology_build_ring(current, 0);
		if (old_ring == NULL || new_ring == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("a move needs nodes on the ring before and after the change")));
		status = rs_ring_move_steps(old_ring, (uint32) old_replicas, new_ring,
									(uint32) current->replication_factor, &steps, &nsteps);
		if (status != RS_OK)
			ringshard_report_core_error(status, "cannot plan the move");
		for (size_t i = 0; i < nsteps; i++)
		{
			Datum		values[5];
			bool		vnulls[5] = {false, false, false, false, false};
			Datum	   *olds = palloc(sizeof(Datum) * Max(steps[i].nold, 1));
			Datum	   *news = palloc(sizeof(Datum) * Max(steps[i].nnew, 1));

			for (uint32 j = 0; j < steps[i].nold; j++)
				olds[j] = CStringGetTextDatum(steps[i].old_nodes[j]);
			for (uint32 j = 0; j < steps[i].nnew; j++)
				news[j] = CStringGetTextDatum(steps[i].new_nodes[j]);
			values[0] = RingTokenGetDatum(steps[i].range_start);
			values[1] = RingTokenGetDatum(steps[i].range_end);
			values[2] = Float8GetDatum(span_fraction(steps[i].span, new_ring));
			values[3] = PointerGetDatum(construct_array(olds, (int) steps[i].nold, TEXTOID, -1, false, TYPALIGN_INT));
			values[4] = PointerGetDatum(construct_array(news, (int) steps[i].nnew, TEXTOID, -1, false, TYPALIGN_INT));
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, vnulls);
		}
	}
	PG_FINALLY();
	{
		free(steps);
		rs_ring_free(old_ring);
		rs_ring_free(new_ring);
	}
	PG_END_TRY();
}

PG_FUNCTION_INFO_V1(ringshard_ring_move_plan_members);

/*
 * ring_move_plan(old_members, old_vnodes, old_replicas, ring): the token
 * ranges whose replica set differs between the ring as it was (its members
 * as a placement snapshot records them, with zones and tokens) and the ring
 * as the catalog has it now, with both sets.
 */
Datum
ringshard_ring_move_plan_members(PG_FUNCTION_ARGS)
{
	Datum		old_members = PG_GETARG_DATUM(0);
	int32		old_vnodes = PG_GETARG_INT32(1);
	int32		old_replicas = PG_GETARG_INT32(2);
	RingSpec   *current;
	RingSpec	previous;

	InitMaterializedSRF(fcinfo, 0);
	current = topology_read_ring_spec(text_to_cstring(PG_GETARG_TEXT_PP(3)));
	previous = *current;
	previous.vnodes = old_vnodes;
	previous.replication_factor = old_replicas;
	snapshot_members(old_members, &previous);
	emit_move_plan(fcinfo, &previous, current, old_replicas);
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(ringshard_ring_move_plan);

/*
 * ring_move_plan(old_nodes, old_weights, old_vnodes, old_replicas, ring), the
 * signature of 1.0 and 1.1 (members as names and weights, labelled vnodes,
 * no zones), kept for their SQL objects until ALTER EXTENSION UPDATE: the
 * library of an update is installed before the update runs.
 */
Datum
ringshard_ring_move_plan(PG_FUNCTION_ARGS)
{
	ArrayType  *old_nodes = PG_GETARG_ARRAYTYPE_P(0);
	ArrayType  *old_weights = PG_GETARG_ARRAYTYPE_P(1);
	int32		old_vnodes = PG_GETARG_INT32(2);
	int32		old_replicas = PG_GETARG_INT32(3);
	RingSpec   *current;
	RingSpec	previous;
	Datum	   *names;
	Datum	   *weights;
	bool	   *nulls;
	int			nnames;
	int			nweights;

	InitMaterializedSRF(fcinfo, 0);
	current = topology_read_ring_spec(text_to_cstring(PG_GETARG_TEXT_PP(4)));
	previous = *current;
	deconstruct_array(old_nodes, TEXTOID, -1, false, TYPALIGN_INT, &names, &nulls, &nnames);
	deconstruct_array(old_weights, FLOAT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &weights, &nulls, &nweights);
	if (nnames != nweights)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("old_nodes and old_weights must have the same length")));
	previous.vnodes = old_vnodes;
	previous.replication_factor = old_replicas;
	previous.nmembers = nnames;
	previous.members = palloc0(sizeof(rs_ring_member) * (nnames + 1));
	for (int i = 0; i < nnames; i++)
	{
		previous.members[i].name = TextDatumGetCString(names[i]);
		previous.members[i].name_len = strlen(previous.members[i].name);
		previous.members[i].weight = DatumGetFloat8(weights[i]);
	}
	emit_move_plan(fcinfo, &previous, current, old_replicas);
	PG_RETURN_VOID();
}

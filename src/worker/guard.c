/*
 * guard.c
 *		What runs on a worker for the coordinator: reads_here(), which makes a
 *		fan-out read each row once, and the trigger that refuses rows this
 *		node does not hold under its topology.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/typcache.h"

#include "annotated_tables.h"

/* Whether a node name (a text datum) equals a C string. */
static bool
node_name_is(Datum node_text, const char *name)
{
	text	   *t = DatumGetTextPP(node_text);

	return strlen(name) == VARSIZE_ANY_EXHDR(t) &&
		memcmp(name, VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t)) == 0;
}

/* What a reads_here() call site or the trigger keeps between rows. */
typedef struct WorkerState
{
	TablePlacement placement;
	uint64		generation;
	char	   *local_node;
	int64		topology_version;
	char	  **excluded;
	int			nexcluded;
	ArrayType  *excluded_array;	/* the argument the list was read from */
} WorkerState;

/* This server's node name and topology version from ringshard.cluster_state. */
static void
read_cluster_state(WorkerState *state, MemoryContext mcxt)
{
	bool		isnull;

	state->local_node = NULL;
	state->topology_version = 0;
	SPI_connect();
	if (SPI_execute("SELECT local_node, topology_version FROM ringshard.cluster_state", true, 1) == SPI_OK_SELECT &&
		SPI_processed == 1)
	{
		char	   *value = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
		Datum		version = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);

		if (value)
			state->local_node = MemoryContextStrdup(mcxt, value);
		if (!isnull)
			state->topology_version = DatumGetInt64(version);
	}
	SPI_finish();
}

static bool
node_excluded(Datum node_text, char **excluded, int nexcluded)
{
	for (int e = 0; e < nexcluded; e++)
		if (node_name_is(node_text, excluded[e]))
			return true;
	return false;
}

PG_FUNCTION_INFO_V1(ringshard_reads_here);

/*
 * reads_here(row, excluded, version): on a worker, whether this node is the
 * first of the row's replicas outside the excluded nodes, so that a fan-out
 * reads each row exactly once.  The coordinator passes its topology version:
 * a node that holds another one would answer for the wrong rows, so that is
 * an error (NULL skips the check).
 */
Datum
ringshard_reads_here(PG_FUNCTION_ARGS)
{
	HeapTupleHeader row;
	ArrayType  *excluded;
	Oid			type_oid;
	WorkerState *state = fcinfo->flinfo->fn_extra;
	TupleDesc	desc;
	HeapTupleData tuple;
	Datum	   *nodes;
	int			count;
	bool		here = false;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_NULL();
	row = PG_GETARG_HEAPTUPLEHEADER(0);
	excluded = PG_GETARG_ARRAYTYPE_P(1);
	type_oid = HeapTupleHeaderGetTypeId(row);
	desc = lookup_rowtype_tupdesc(type_oid, HeapTupleHeaderGetTypMod(row));
	if (state == NULL)
		state = fcinfo->flinfo->fn_extra = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(WorkerState));
	if (state->generation != topology_cache_generation || state->placement.row_type != type_oid)
	{
		table_placement_load(&state->placement, get_typ_typrelid(type_oid), desc, fcinfo->flinfo->fn_mcxt);
		state->placement.row_type = type_oid;
		read_cluster_state(state, fcinfo->flinfo->fn_mcxt);
		state->generation = topology_cache_generation;
	}
	if (PG_NARGS() > 2 && !PG_ARGISNULL(2) && PG_GETARG_INT64(2) != state->topology_version)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("node \"%s\" holds topology version " INT64_FORMAT ", the coordinator " INT64_FORMAT,
						state->local_node ? state->local_node : "?", state->topology_version, PG_GETARG_INT64(2)),
				 errhint("Run ringshard.sync_topology() on the coordinator.")));
	if (state->excluded_array == NULL || VARSIZE(state->excluded_array) != VARSIZE(excluded) ||
		memcmp(state->excluded_array, excluded, VARSIZE(excluded)) != 0)
	{
		MemoryContext old = MemoryContextSwitchTo(fcinfo->flinfo->fn_mcxt);
		Datum	   *values;
		bool	   *nulls;

		state->excluded_array = (ArrayType *) palloc(VARSIZE(excluded));
		memcpy(state->excluded_array, excluded, VARSIZE(excluded));
		deconstruct_array(excluded, TEXTOID, -1, false, TYPALIGN_INT, &values, &nulls, &state->nexcluded);
		state->excluded = palloc(sizeof(char *) * Max(state->nexcluded, 1));
		for (int i = 0; i < state->nexcluded; i++)
			state->excluded[i] = nulls[i] ? "" : TextDatumGetCString(values[i]);
		MemoryContextSwitchTo(old);
	}
	if (state->local_node == NULL)
	{
		ReleaseTupleDesc(desc);
		PG_RETURN_BOOL(false);
	}

	row_as_tuple(row, &tuple);
	if (table_placement_place(&state->placement, &tuple, desc, false, &nodes, &count))
	{
		for (int i = 0; i < count; i++)
		{
			if (node_excluded(nodes[i], state->excluded, state->nexcluded))
				continue;
			here = node_name_is(nodes[i], state->local_node);
			break;
		}
	}
	ReleaseTupleDesc(desc);
	PG_RETURN_BOOL(here);
}

PG_FUNCTION_INFO_V1(ringshard_reject_misrouted_rows);

/*
 * Trigger on a worker's distributed table: a row this node does not hold
 * under the topology it was given is an error, so a misrouted write fails
 * loudly instead of hiding data.
 */
Datum
ringshard_reject_misrouted_rows(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	Relation	rel;
	HeapTuple	row;
	WorkerState *state;
	Datum	   *nodes;
	int			count;
	StringInfoData holders;

	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_FOR_ROW(trigdata->tg_event) ||
		!TRIGGER_FIRED_BEFORE(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("ringshard.reject_misrouted_rows() must be a BEFORE row trigger")));
	rel = trigdata->tg_relation;
	row = TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event) ? trigdata->tg_newtuple : trigdata->tg_trigtuple;

	state = fcinfo->flinfo->fn_extra;
	if (state == NULL)
		state = fcinfo->flinfo->fn_extra = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(WorkerState));
	if (state->generation != topology_cache_generation ||
		!table_placement_is_current(&state->placement, RelationGetRelid(rel)))
	{
		table_placement_load(&state->placement, RelationGetRelid(rel), RelationGetDescr(rel), fcinfo->flinfo->fn_mcxt);
		read_cluster_state(state, fcinfo->flinfo->fn_mcxt);
		state->generation = topology_cache_generation;
	}
	if (state->local_node == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("this server is not a ringshard worker"),
				 errhint("Run ringshard.sync_topology() on the coordinator.")));
	if (!table_placement_place(&state->placement, row, RelationGetDescr(rel), false, &nodes, &count))
		ereport(ERROR,
				(errcode(ERRCODE_NOT_NULL_VIOLATION),
				 errmsg("a row of distributed table %s needs a sharding key", RelationGetRelationName(rel))));
	initStringInfo(&holders);
	for (int i = 0; i < count; i++)
	{
		if (node_name_is(nodes[i], state->local_node))
			return PointerGetDatum(row);
		appendStringInfo(&holders, "%s%s", i ? ", " : "", TextDatumGetCString(nodes[i]));
	}
	ereport(ERROR,
			(errcode(ERRCODE_CHECK_VIOLATION),
			 errmsg("row of table %s does not belong on node \"%s\"", RelationGetRelationName(rel), state->local_node),
			 errdetail("Under the topology this node holds, its nodes are %s.", holders.data),
			 errhint("Write through the coordinator, which sends each row to its replicas.")));
}

/*
 * upper_scan.c
 *		Executing the work the nodes do above a fan-out (see upper.h).
 *
 * The query goes to every node at once, inside the remote transaction, and
 * each answer comes back whole: it is small, one row per group or the
 * node's top rows, and a plain query (not a cursor) lets a node aggregate
 * with parallel workers.  Partial aggregates are then combined group by
 * group in a hash table keyed by the GROUP BY columns (with their types'
 * equality, as the nodes grouped them); top rows are merged by the sort
 * keys and cut to the LIMIT after skipping the OFFSET.
 *
 * Top rows of a table with several copies of each row are checked late:
 * instead of testing every row for being its own (reads_here, which costs
 * far more than reading the row), a node sorts all its copies by the
 * query's order, ties broken by the sharding key (and keyspace column), and
 * tests only its first limit + offset rows, on a row rebuilt from the key
 * (reads_here reads nothing else); we merge the rows that are their node's
 * own in the same order.  That loses no row: the rows a node holds that
 * precede a row in this order are some of all the rows that precede it, so
 * a row among the first limit + offset of the table is among the first
 * limit + offset of each node that holds it, its reader included; rows that
 * tie with it in this order have its key, so the same nodes and reader.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "commands/explain.h"
#include "common/int.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/rel.h"
#include "utils/sortsupport.h"
#include "utils/typcache.h"

#include "fdw/deparse.h"
#include "fdw/fdw.h"
#include "fdw/node_analysis.h"
#include "fdw/upper.h"
#include "remote/connection.h"
#include "remote/values.h"
#include "routing/placement.h"

/* One pushed-down aggregate, as the coordinator combines it. */
typedef struct UpperAggregate
{
	RsCombineKind kind;
	int			column;			/* remote column of its partial result (averages: the sum; the count follows) */
	int			output;			/* its column in the scan tuple */
	RemoteCodec codec;			/* how the partial result is read */
	int16		typlen;
	bool		typbyval;
	FmgrInfo	addition;		/* sums and averages: adds two partial sums */
	SortSupportData order;		/* min and max: the first partial in this order wins */
} UpperAggregate;

/* One aggregate's combined state in one group. */
typedef struct Combined
{
	Datum		value;			/* the sum (also of an average), the min or the max so far */
	bool		isnull;			/* no partial value yet */
	int64		count;			/* the count (also of an average) */
} Combined;

/* What one node answered. */
typedef struct NodeAnswer
{
	RemoteConnection *conn;		/* NULL: the node is left out */
	PGresult   *result;
	int			next;			/* top rows: the next row to return */
	bool		has_head;		/* top rows: head holds row next's sort values */
	RsMergeRow	head;
} NodeAnswer;

typedef struct UpperScanState
{
	RsScanPlan *plan;			/* what planning decided (plan_state.h) */
	Oid			relid;
	Oid			userid;
	TablePlacement placement;
	bool		explain_only;
	List	   *param_exprs;
	List	   *param_states;
	ExprState  *limit_state;
	ExprState  *offset_state;

	TupleDesc	scan_desc;		/* the scan tuple (fdw_scan_tlist) */
	int			ncolumns_read;	/* columns of an answer that are decoded: the scan's, then the key's */
	RemoteCodec *codecs;		/* per column read: answers come back as text (remote/values.h) */

	/* aggregates */
	bool		aggregating;
	int			ngroups;		/* GROUP BY columns, first in the answers and the scan tuple */
	int			ncolumns;		/* columns of an answer */
	int			naggregates;
	UpperAggregate *aggregates;
	AttrNumber *key_columns;
	Oid		   *group_collations;
	Oid		   *eqfuncoids;
	FmgrInfo   *hashfunctions;
	TupleTableSlot *key_slot;	/* a group key read from an answer */
	TupleTableSlot *group_slot; /* a group key stored in the hash table */
	TupleHashTable groups;
	TupleHashIterator group_iter;
	Combined   *ungrouped;		/* without GROUP BY: the one group */
	bool		ungrouped_done;

	/* top rows */
	int			nsort;			/* the query's sort keys, then the key columns that break ties */
	int			ntiebreak;
	SortSupport sortkeys;
	int		   *sort_columns;	/* 0-based answer column of each sort key */
	bool		late;			/* this run checks the top rows late: answers carry the key and a flag */
	int			nmerge;			/* sort keys the merge compares in this run */
	int			mine_column;	/* late check: the column saying whether the row is the node's own */
	int64		limit;			/* -1: no limit */
	int64		offset;
	int64		returned;
	int64		skipped;
	int			next_answer;	/* without an order: the answer being returned */

	int			nanswers;
	NodeAnswer *answers;
	NodeAnalyses *analysis;		/* EXPLAIN ANALYZE: by placement node, else NULL */
	bool		started;
	MemoryContext run_cxt;		/* one run of the scan: answers, groups */
	MemoryContext group_cxt;	/* the hash table's entries (in run_cxt, made again each run) */
	MemoryContext temp_cxt;		/* one answer row while it is combined */
	MemoryContext row_cxt;		/* the row being returned */
} UpperScanState;

void
rsupper_begin_scan(ForeignScanState *node, int eflags)
{
	ForeignScan *plan = (ForeignScan *) node->ss.ps.plan;
	EState	   *estate = node->ss.ps.state;
	UpperScanState *state = palloc0(sizeof(UpperScanState));
	/* the table is the one relation under the scan (setrefs.c keeps fs_relids right, not fdw_private) */
	Index		rtindex = bms_next_member(plan->fs_relids, -1);
	RangeTblEntry *rte = exec_rt_fetch(rtindex, estate);
	Relation	rel;
	RsScanPlan *splan = rsfdw_scan_plan_from_private(plan->fdw_private);
	ListCell   *lc;
	int			i;

	node->fdw_state = state;
	state->plan = splan;
	state->relid = splan->relid;
	state->aggregating = splan->aggregating;
	state->explain_only = (eflags & EXEC_FLAG_EXPLAIN_ONLY) != 0;

	/* Remote work runs as the role that reads: a view's owner through a view. */
	state->userid = OidIsValid(rte->checkAsUser) ? rte->checkAsUser : GetUserId();

	/* One statement, one topology: the placement is taken now and kept. */
	rel = ExecGetRangeTableRelation(estate, rtindex);
	table_placement_load(&state->placement, state->relid, RelationGetDescr(rel), estate->es_query_cxt);

	/* Parameters of the SQL, then LIMIT and OFFSET. */
	i = 0;
	foreach(lc, plan->fdw_exprs)
	{
		ExprState  *es = ExecInitExpr(lfirst(lc), (PlanState *) node);

		i++;
		if (i <= splan->nparams)
		{
			state->param_exprs = lappend(state->param_exprs, lfirst(lc));
			state->param_states = lappend(state->param_states, es);
		}
		else if (i == splan->limit_index)
			state->limit_state = es;
		else if (i == splan->offset_index)
			state->offset_state = es;
	}

	/*
	 * Answers arrive as text: the input function of each scan column, and,
	 * for the late check, of the key columns that follow them.
	 */
	state->scan_desc = node->ss.ss_ScanTupleSlot->tts_tupleDescriptor;
	state->ntiebreak = splan->late ? list_length(splan->tiebreak) : 0;
	state->ncolumns_read = state->scan_desc->natts + state->ntiebreak;
	state->codecs = palloc0(sizeof(RemoteCodec) * Max(state->ncolumns_read, 1));
	for (i = 0; i < state->ncolumns_read; i++)
	{
		Form_pg_attribute attr;

		if (i < state->scan_desc->natts)
			attr = TupleDescAttr(state->scan_desc, i);
		else
			attr = TupleDescAttr(RelationGetDescr(rel), list_nth_int(splan->tiebreak, i - state->scan_desc->natts) - 1);
		remote_codec_init(&state->codecs[i], attr->atttypid, attr->atttypmod, false);
	}
	state->mine_column = state->ncolumns_read;

	/* Aggregates: how each one combines, and how groups are told apart. */
	state->ngroups = splan->ngroups;
	state->ncolumns = state->ngroups;
	state->naggregates = splan->naggregates;
	state->aggregates = palloc0(sizeof(UpperAggregate) * Max(state->naggregates, 1));
	for (i = 0; i < splan->naggregates; i++)
	{
		RsAggregatePlan *description = &splan->aggregates[i];
		UpperAggregate *agg = &state->aggregates[i];

		agg->kind = description->kind;
		agg->column = description->column;
		agg->output = description->output;
		remote_codec_init(&agg->codec, description->partial_type, -1, false);
		get_typlenbyval(description->partial_type, &agg->typlen, &agg->typbyval);
		if (agg->kind == RS_COMBINE_MIN_MAX)
		{
			agg->order.ssup_cxt = CurrentMemoryContext;
			agg->order.ssup_collation = description->collation;
			agg->order.ssup_nulls_first = false;
			PrepareSortSupportFromOrderingOp(description->function, &agg->order);
		}
		else if (agg->kind != RS_COMBINE_COUNT)
			fmgr_info(description->function, &agg->addition);
		state->ncolumns += (agg->kind == RS_COMBINE_AVG_NUMERIC || agg->kind == RS_COMBINE_AVG_FLOAT8 ||
							agg->kind == RS_COMBINE_AVG_INTERVAL) ? 2 : 1;
	}
	if (state->ngroups > 0)
	{
		Oid		   *eqops = palloc(sizeof(Oid) * state->ngroups);
		TupleDesc	key_desc = CreateTemplateTupleDesc(state->ngroups);

		state->key_columns = palloc(sizeof(AttrNumber) * state->ngroups);
		state->group_collations = palloc(sizeof(Oid) * state->ngroups);
		for (i = 0; i < state->ngroups; i++)
		{
			eqops[i] = splan->groups[i].equality_operator;
			state->group_collations[i] = splan->groups[i].collation;
			state->key_columns[i] = i + 1;
			TupleDescCopyEntry(key_desc, i + 1, state->scan_desc, i + 1);
		}
		execTuplesHashPrepare(state->ngroups, eqops, &state->eqfuncoids, &state->hashfunctions);
		state->key_slot = ExecInitExtraTupleSlot(estate, key_desc, &TTSOpsVirtual);
		state->group_slot = ExecInitExtraTupleSlot(estate, key_desc, &TTSOpsMinimalTuple);
	}

	/*
	 * Top rows: comparators for the merge, by the query's sort keys, then
	 * (late check) by the key columns in their default order, as the nodes
	 * broke ties.
	 */
	state->nsort = splan->nsort;
	if (state->nsort > 0)
	{
		int			nkeys = state->nsort + state->ntiebreak;

		state->sortkeys = palloc0(sizeof(SortSupportData) * nkeys);
		state->sort_columns = palloc(sizeof(int) * nkeys);
		rsfdw_prepare_sort_keys(splan->sort, state->nsort, state->sortkeys, state->sort_columns);
		for (i = 0; i < state->ntiebreak; i++)
		{
			Form_pg_attribute attr = TupleDescAttr(RelationGetDescr(rel), list_nth_int(splan->tiebreak, i) - 1);
			SortSupport ssup = &state->sortkeys[state->nsort + i];

			state->sort_columns[state->nsort + i] = state->scan_desc->natts + i;
			ssup->ssup_cxt = CurrentMemoryContext;
			ssup->ssup_collation = attr->attcollation;
			ssup->ssup_nulls_first = false;
			PrepareSortSupportFromOrderingOp(lookup_type_cache(attr->atttypid, TYPECACHE_LT_OPR)->lt_opr, ssup);
		}
	}

	state->run_cxt = AllocSetContextCreate(estate->es_query_cxt, "ringshard upper scan", ALLOCSET_DEFAULT_SIZES);
	state->temp_cxt = AllocSetContextCreate(estate->es_query_cxt, "ringshard upper combine",
											ALLOCSET_SMALL_SIZES);
	state->row_cxt = AllocSetContextCreate(estate->es_query_cxt, "ringshard upper row", ALLOCSET_SMALL_SIZES);
}

/*
 * The answers are libpq results, outside any memory context: a run that
 * ends clears them; one that fails leaves them to the remote layer, which
 * clears what an aborted (sub)transaction still holds.
 */
static void
clear_answers(UpperScanState *state)
{

	for (int i = 0; i < state->nanswers; i++)
	{
		remote_result_free(state->answers[i].result);
		state->answers[i].result = NULL;
	}
	state->nanswers = 0;
	state->answers = NULL;
}

/* A new group's combined states: nothing seen yet. */
static Combined *
new_combined(UpperScanState *state, MemoryContext cxt)
{
	Combined   *combined = MemoryContextAllocZero(cxt, sizeof(Combined) * Max(state->naggregates, 1));

	for (int i = 0; i < state->naggregates; i++)
		combined[i].isnull = true;
	return combined;
}

/* Keep a value as a group's combined value, in the group's memory. */
static void
keep_value(UpperAggregate *agg, Combined *combined, Datum value, MemoryContext cxt)
{
	MemoryContext old = MemoryContextSwitchTo(cxt);
	Datum		copy = datumCopy(value, agg->typbyval, agg->typlen);

	MemoryContextSwitchTo(old);
	if (!combined->isnull && !agg->typbyval)
		pfree(DatumGetPointer(combined->value));
	combined->value = copy;
	combined->isnull = false;
}

/* Add a node's count (never NULL) to a group's. */
static void
add_count(RemoteConnection *conn, Combined *combined, PGresult *res, int row, int column)
{
	int64		count = remote_int64_value(conn, res, row, column, "an aggregate");

	if (pg_add_s64_overflow(combined->count, count, &combined->count))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("bigint out of range")));
}

/* Combine one node's partial result of an aggregate into a group's state. */
static void
combine_partial(RemoteConnection *conn, UpperAggregate *agg, Combined *combined, PGresult *res, int row,
				MemoryContext cxt)
{
	Datum		value;

	if (agg->kind == RS_COMBINE_COUNT)
	{
		add_count(conn, combined, res, row, agg->column);
		return;
	}
	if (agg->kind == RS_COMBINE_AVG_NUMERIC || agg->kind == RS_COMBINE_AVG_FLOAT8 ||
		agg->kind == RS_COMBINE_AVG_INTERVAL)
		add_count(conn, combined, res, row, agg->column + 1);
	if (PQgetisnull(res, row, agg->column))
		return;					/* no value in this group on that node */
	value = remote_codec_decode(&agg->codec, PQgetvalue(res, row, agg->column), PQgetlength(res, row, agg->column),
								conn->node);
	if (combined->isnull)
		keep_value(agg, combined, value, cxt);
	else if (agg->kind == RS_COMBINE_MIN_MAX)
	{
		if (ApplySortComparator(value, false, combined->value, false, &agg->order) < 0)
			keep_value(agg, combined, value, cxt);
	}
	else
		keep_value(agg, combined, FunctionCall2Coll(&agg->addition, InvalidOid, combined->value, value), cxt);
}

/* Combine every node's answer, group by group; the answers are then dropped. */
static void
combine_answers(ForeignScanState *node, UpperScanState *state)
{
	state->group_cxt = AllocSetContextCreate(state->run_cxt, "ringshard upper groups", ALLOCSET_DEFAULT_SIZES);
	if (state->ngroups > 0)
		state->groups = BuildTupleHashTableExt(&node->ss.ps, state->key_slot->tts_tupleDescriptor,
											   state->ngroups, state->key_columns, state->eqfuncoids,
											   state->hashfunctions, state->group_collations, 256,
											   sizeof(Combined) * state->naggregates, state->run_cxt,
											   state->group_cxt, state->temp_cxt, false);
	else
		state->ungrouped = new_combined(state, state->run_cxt);

	for (int i = 0; i < state->nanswers; i++)
	{
		NodeAnswer *answer = &state->answers[i];
		PGresult   *res = answer->result;
		int			nrows;

		if (res == NULL)
			continue;
		/* without GROUP BY a node's aggregate is one row, even over no rows */
		remote_expect_rows(answer->conn, res, state->ncolumns, state->ngroups > 0 ? 0 : 1,
						   state->ngroups > 0 ? -1 : 1, "an aggregate");
		remote_expect_formats(answer->conn, res, 0, NULL, "an aggregate");
		nrows = PQntuples(res);
		for (int row = 0; row < nrows; row++)
		{
			MemoryContext old;
			Combined   *combined;
			MemoryContext keep_cxt;

			CHECK_FOR_INTERRUPTS();
			MemoryContextReset(state->temp_cxt);
			old = MemoryContextSwitchTo(state->temp_cxt);
			if (state->ngroups > 0)
			{
				TupleTableSlot *key = state->key_slot;
				TupleHashEntry entry;
				bool		isnew;

				ExecClearTuple(key);
				for (int k = 0; k < state->ngroups; k++)
				{
					key->tts_isnull[k] = PQgetisnull(res, row, k);
					key->tts_values[k] = key->tts_isnull[k] ? (Datum) 0
						: remote_codec_decode(&state->codecs[k], PQgetvalue(res, row, k), PQgetlength(res, row, k),
											  answer->conn->node);
				}
				ExecStoreVirtualTuple(key);
				entry = LookupTupleHashEntry(state->groups, key, &isnew, NULL);
				if (isnew)
					entry->additional = new_combined(state, state->group_cxt);
				combined = entry->additional;
				keep_cxt = state->group_cxt;
			}
			else
			{
				combined = state->ungrouped;
				keep_cxt = state->run_cxt;
			}
			for (int a = 0; a < state->naggregates; a++)
				combine_partial(answer->conn, &state->aggregates[a], &combined[a], res, row, keep_cxt);
			MemoryContextSwitchTo(old);
		}
		remote_result_free(res);
		answer->result = NULL;
	}
	MemoryContextReset(state->temp_cxt);
	if (state->groups)
		ResetTupleHashIterator(state->groups, &state->group_iter);
}

/* Evaluate LIMIT or OFFSET as the Limit node would: NULL means none, negative is an error. */
static int64
limit_value(ExprState *expr, ExprContext *econtext, bool is_offset)
{
	bool		isnull;
	Datum		value;
	int64		n;

	if (expr == NULL)
		return is_offset ? 0 : -1;
	value = ExecEvalExprSwitchContext(expr, econtext, &isnull);
	if (isnull)
		return is_offset ? 0 : -1;
	n = DatumGetInt64(value);
	if (n < 0)
		ereport(ERROR,
				(is_offset ? errcode(ERRCODE_INVALID_ROW_COUNT_IN_RESULT_OFFSET_CLAUSE)
				 : errcode(ERRCODE_INVALID_ROW_COUNT_IN_LIMIT_CLAUSE),
				 errmsg(is_offset ? "OFFSET must not be negative" : "LIMIT must not be negative")));
	return n;
}

/* Send the query to every node at once and take the answers. */
static void
start_run(ForeignScanState *node)
{
	UpperScanState *state = node->fdw_state;
	ExprContext *econtext = node->ss.ps.ps_ExprContext;
	MemoryContext old = MemoryContextSwitchTo(state->run_cxt);
	RsScanSQL  *sql;
	char	   *limit_clause = "";
	char	  **filters;
	char	   *statement;
	RemoteConnection **conns;
	RemoteConnection **sent;
	const void **owners;
	RemoteResult *out;
	int		   *which;
	int			nsent = 0;
	int			nnodes = placement_node_count(&state->placement);
	int			limit_rows = -1;

	state->started = true;
	state->returned = 0;
	state->skipped = 0;
	state->next_answer = 0;
	state->ungrouped_done = false;
	state->groups = NULL;
	state->ungrouped = NULL;

	if (!state->aggregating)
	{
		int64		rows;

		/* the Limit node evaluates the offset first */
		state->offset = limit_value(state->offset_state, econtext, true);
		state->limit = limit_value(state->limit_state, econtext, false);
		if (state->limit == 0)
		{
			/* as the Limit node, read nothing at all */
			MemoryContextSwitchTo(old);
			return;
		}
		if (state->limit > 0 && !pg_add_s64_overflow(state->limit, state->offset, &rows))
		{
			limit_clause = psprintf(" LIMIT " INT64_FORMAT, rows);
			limit_rows = rows > INT_MAX ? -1 : (int) rows;
		}
	}
	sql = rsfdw_scan_sql(state->plan, rsfdw_eval_params(state->param_states, state->param_exprs, econtext));

	state->analysis = node_analysis_start_run(state->analysis, &node->ss.ps, nnodes);
	conns = rsfdw_fanout_connect(&state->placement, state->userid, get_rel_name(state->relid), &filters);
	state->late = false;
	for (int i = 0; i < nnodes; i++)
		state->late |= state->plan->late != NULL && filters[i][0] != '\0' && limit_clause[0] != '\0';
	state->nmerge = state->nsort + (state->late ? state->ntiebreak : 0);
	state->answers = palloc0(sizeof(NodeAnswer) * Max(nnodes, 1));
	state->nanswers = nnodes;
	sent = palloc(sizeof(RemoteConnection *) * Max(nnodes, 1));
	owners = palloc(sizeof(void *) * Max(nnodes, 1));
	out = palloc0(sizeof(RemoteResult) * Max(nnodes, 1));
	which = palloc(sizeof(int) * Max(nnodes, 1));
	for (int i = 0; i < nnodes; i++)
	{
		NodeAnswer *answer = &state->answers[i];

		if (conns[i] == NULL)
			continue;
		answer->conn = conns[i];
		statement = rsfdw_upper_sql(state->plan, sql, filters[i], limit_clause, state->late);
		remote_send(answer->conn, statement, true, answer);
		if (answer->conn->link != LINK_BUSY)
			ereport(ERROR,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("lost the connection to node \"%s\"", answer->conn->node),
					 errdetail_internal("%s", answer->conn->last_error ? answer->conn->last_error : "")));
		sent[nsent] = answer->conn;
		owners[nsent] = answer;
		which[nsent++] = i;
	}
	remote_receive_owned(sent, owners, nsent, out, 0, 0);

	/* every answer is kept before any is judged, so that none is left behind by an error */
	for (int j = 0; j < nsent; j++)
		state->answers[which[j]].result = out[j].result;
	for (int j = 0; j < nsent; j++)
	{
		NodeAnswer *answer = &state->answers[which[j]];

		if (out[j].lost)
			ereport(ERROR,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("lost the connection to node \"%s\" during a read of table %s",
							answer->conn->node, get_rel_name(state->relid)),
					 errdetail_internal("%s", answer->conn->last_error ? answer->conn->last_error : "")));
		if (!out[j].ok)
			remote_report_error(ERROR, answer->conn, answer->result, NULL);
		if (!state->aggregating)
		{
			/* the top rows: the scan's columns (then, late, the key columns and the flag), at most the LIMIT */
			remote_expect_rows(answer->conn, answer->result,
							   state->late ? state->ncolumns_read + 1 : Max(state->scan_desc->natts, 1), 0,
							   limit_rows, "a read of the top rows");
			remote_expect_formats(answer->conn, answer->result, 0, NULL, "a read of the top rows");
		}
	}
	for (int j = 0; j < nsent; j++)
		node_analysis_add_at(state->analysis, which[j], PQntuples(out[j].result), out[j].elapsed_ms);
	if (state->aggregating)
		combine_answers(node, state);
	MemoryContextSwitchTo(old);
}

/* Fill the scan slot with a group's key and its aggregates' combined values. */
static void
store_group(UpperScanState *state, TupleTableSlot *slot, MinimalTuple key, Combined *combined)
{
	MemoryContext old;

	MemoryContextReset(state->row_cxt);
	old = MemoryContextSwitchTo(state->row_cxt);
	ExecClearTuple(slot);
	memset(slot->tts_isnull, true, sizeof(bool) * state->scan_desc->natts);
	if (key)
	{
		ExecStoreMinimalTuple(key, state->group_slot, false);
		slot_getallattrs(state->group_slot);
		for (int k = 0; k < state->ngroups; k++)
		{
			slot->tts_values[k] = state->group_slot->tts_values[k];
			slot->tts_isnull[k] = state->group_slot->tts_isnull[k];
		}
	}
	for (int a = 0; a < state->naggregates; a++)
	{
		UpperAggregate *agg = &state->aggregates[a];
		Combined   *c = &combined[a];
		Datum	   *value = &slot->tts_values[agg->output];
		bool	   *isnull = &slot->tts_isnull[agg->output];

		/* PostgreSQL's final functions: no value (or no row) gives NULL, except for count */
		*isnull = false;
		switch (agg->kind)
		{
			case RS_COMBINE_COUNT:
				*value = Int64GetDatum(c->count);
				break;
			case RS_COMBINE_SUM:
			case RS_COMBINE_MIN_MAX:
				*value = c->value;
				*isnull = c->isnull;
				break;
			case RS_COMBINE_AVG_NUMERIC:
				if ((*isnull = c->isnull || c->count == 0))
					break;
				*value = DirectFunctionCall2(numeric_div, c->value, NumericGetDatum(int64_to_numeric(c->count)));
				break;
			case RS_COMBINE_AVG_FLOAT8:
				if ((*isnull = c->isnull || c->count == 0))
					break;
				*value = Float8GetDatum(DatumGetFloat8(c->value) / (float8) c->count);
				break;
			case RS_COMBINE_AVG_INTERVAL:
				if ((*isnull = c->isnull || c->count == 0))
					break;
				*value = DirectFunctionCall2(interval_div, c->value, Float8GetDatum((float8) c->count));
				break;
		}
	}
	MemoryContextSwitchTo(old);
	ExecStoreVirtualTuple(slot);
}

static bool
answer_has_row(NodeAnswer *answer)
{
	return answer->result != NULL && answer->next < PQntuples(answer->result);
}

/* Late check: pass over the rows of an answer that are another node's. */
static bool
answer_has_own_row(UpperScanState *state, NodeAnswer *answer)
{
	while (state->late && answer_has_row(answer) &&
		   strcmp(remote_text_value(answer->conn, answer->result, answer->next, state->mine_column,
									"a read of the top rows"), "t") != 0)
	{
		answer->next++;
		answer->has_head = false;
	}
	return answer_has_row(answer);
}

/* Decode a column of an answer's current row. */
static Datum
answer_value(UpperScanState *state, NodeAnswer *answer, int column, bool *isnull)
{
	*isnull = PQgetisnull(answer->result, answer->next, column);
	if (*isnull)
		return (Datum) 0;
	return remote_codec_decode(&state->codecs[column], PQgetvalue(answer->result, answer->next, column),
							   PQgetlength(answer->result, answer->next, column), answer->conn->node);
}

/* Merge: decode the sort values of an answer's current row. */
static void
load_head(UpperScanState *state, NodeAnswer *answer)
{
	MemoryContext old = rsfdw_merge_row_start(&answer->head, state->run_cxt, "ringshard upper merge row",
											  state->nmerge);

	for (int k = 0; k < state->nmerge; k++)
		answer->head.values[k] = answer_value(state, answer, state->sort_columns[k], &answer->head.nulls[k]);
	MemoryContextSwitchTo(old);
	answer->has_head = true;
}

/* The next of the top rows: merged in order (or one answer after another), after the offset, up to the limit. */
static TupleTableSlot *
next_top_row(UpperScanState *state, TupleTableSlot *slot)
{
	for (;;)
	{
		NodeAnswer *best = NULL;
		MemoryContext old;

		if (state->limit >= 0 && state->returned >= state->limit)
			return ExecClearTuple(slot);
		if (state->nsort == 0)
		{
			while (state->next_answer < state->nanswers &&
				   !answer_has_own_row(state, &state->answers[state->next_answer]))
				state->next_answer++;
			if (state->next_answer >= state->nanswers)
				return ExecClearTuple(slot);
			best = &state->answers[state->next_answer];
		}
		else
		{
			for (int i = 0; i < state->nanswers; i++)
			{
				NodeAnswer *answer = &state->answers[i];

				if (!answer_has_own_row(state, answer))
					continue;
				if (!answer->has_head)
					load_head(state, answer);
				if (best == NULL ||
					rsfdw_merge_row_compare(&answer->head, &best->head, state->nmerge, state->sortkeys) < 0)
					best = answer;
			}
			if (best == NULL)
				return ExecClearTuple(slot);
		}
		if (state->skipped < state->offset)
		{
			state->skipped++;
			best->next++;
			best->has_head = false;
			continue;
		}
		MemoryContextReset(state->row_cxt);
		old = MemoryContextSwitchTo(state->row_cxt);
		ExecClearTuple(slot);
		for (int j = 0; j < state->scan_desc->natts; j++)
			slot->tts_values[j] = answer_value(state, best, j, &slot->tts_isnull[j]);
		MemoryContextSwitchTo(old);
		ExecStoreVirtualTuple(slot);
		best->next++;
		best->has_head = false;
		state->returned++;
		return slot;
	}
}

TupleTableSlot *
rsupper_iterate_scan(ForeignScanState *node)
{
	UpperScanState *state = node->fdw_state;
	TupleTableSlot *slot = node->ss.ss_ScanTupleSlot;

	if (!state->started)
		start_run(node);
	if (!state->aggregating)
		return next_top_row(state, slot);
	if (state->ngroups == 0)
	{
		/* an aggregate without GROUP BY has one row, even over no rows at all */
		if (state->ungrouped_done)
			return ExecClearTuple(slot);
		state->ungrouped_done = true;
		store_group(state, slot, NULL, state->ungrouped);
		return slot;
	}
	{
		TupleHashEntry entry = ScanTupleHashTable(state->groups, &state->group_iter);

		if (entry == NULL)
			return ExecClearTuple(slot);
		store_group(state, slot, entry->firstTuple, entry->additional);
		return slot;
	}
}

/* End a run: nothing of ours stays in flight, the answers and groups go. */
static void
finish_run(UpperScanState *state)
{
	for (int i = 0; i < state->nanswers; i++)
	{
		RemoteConnection *conn = state->answers[i].conn;

		if (conn && conn->link != LINK_BROKEN && conn->link != LINK_CLOSED)
			remote_forget_owner(conn, &state->answers[i]);
	}
	if (state->group_slot)
		ExecClearTuple(state->group_slot);	/* it points into the groups' memory */
	clear_answers(state);
	MemoryContextReset(state->run_cxt);
	state->groups = NULL;
	state->ungrouped = NULL;
	state->started = false;
}

void
rsupper_rescan(ForeignScanState *node)
{
	UpperScanState *state = node->fdw_state;

	if (!state->started)
		return;
	if (node->ss.ps.chgParam == NULL)
	{
		/* the same parameters: the same answers, returned again */
		state->returned = 0;
		state->skipped = 0;
		state->next_answer = 0;
		state->ungrouped_done = false;
		for (int i = 0; i < state->nanswers; i++)
		{
			state->answers[i].next = 0;
			state->answers[i].has_head = false;
		}
		if (state->groups)
			ResetTupleHashIterator(state->groups, &state->group_iter);
		return;
	}
	finish_run(state);
}

void
rsupper_end_scan(ForeignScanState *node)
{
	UpperScanState *state = node->fdw_state;

	/* a run to finish, unless the statement was only explained */
	if (state != NULL && !state->explain_only && state->started)
		finish_run(state);
}

void
rsupper_explain_scan(ForeignScanState *node, ExplainState *es)
{
	UpperScanState *state = node->fdw_state;
	RsScanPlan *plan = state->plan;
	bool		late;

	ExplainPropertyText("Relations", plan->relations, es);
	ExplainPropertyText("Nodes", rsfdw_explain_nodes(&state->placement), es);
	/* with several copies of each row, top rows are checked late (unless the LIMIT turns out NULL) */
	late = plan->late != NULL && !placement_single_copy(&state->placement);
	ExplainPropertyText("Pushed down", late ? psprintf("%s; each node picks its own rows among its top rows",
													   plan->pushed) : plan->pushed, es);
	if (es->verbose)
	{
		RsScanSQL  *sql = rsfdw_scan_sql(plan, NULL);
		char	   *filter = "";

		if (late)
			filter = psprintf(" AND %s", rsfdw_reads_here_sql(&state->placement, "$excluded", "$topology_version"));
		else if (!placement_single_copy(&state->placement))
			filter = psprintf(" AND %s", rsfdw_reads_here_sql(&state->placement, "$excluded", "$topology_version"));
		ExplainPropertyText("Remote SQL", rsfdw_upper_sql(plan, sql, filter, plan->limit_sql, late), es);
	}
	/* EXPLAIN ANALYZE: each node's rows (groups, partial aggregates or top rows) and when they came */
	node_analysis_explain(state->analysis, &state->placement, "row", "rows", es);
}

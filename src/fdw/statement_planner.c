/*
 * statement_planner.c
 *		A planner hook for what the foreign-data wrapper's callbacks see too
 *		late: INSERT ... ON CONFLICT on a distributed table, router
 *		statements (a SELECT fixed to one key sent whole: router.c) and
 *		aggregates over colocated tables split between the nodes and the
 *		coordinator (fanout_aggregate.c).
 *
 * PostgreSQL looks for the arbiter index of ON CONFLICT on the
 * coordinator's foreign table, which has none (the nodes have the unique
 * indexes), and fails with 42P10 before the wrapper can say anything.  So
 * the hook takes the conflict clause out of the statement before planning,
 * checks that the nodes can evaluate every part of it as we would, and
 * builds its SQL (deparse.c); the statement is then planned as a plain
 * INSERT, whose rows the wrapper sends to their replicas one by one with
 * the clause (modify.c, "Upserts").  Each node resolves the conflict with
 * its own unique index, which always includes the sharding key
 * (commands/ddl.c): a conflict is the same row on every replica.
 */
#include "postgres.h"

#include "access/table.h"
#include "nodes/parsenodes.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "optimizer/planner.h"
#include "parser/parsetree.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "commands/ddl.h"
#include "fdw/deparse.h"
#include "fdw/fdw.h"
#include "routing/annotated_tables.h"

static planner_hook_type previous_planner_hook = NULL;

/* The statement being planned whose conflict clause was taken out, and the clause as the nodes get it. */
static Query *upsert_query = NULL;
static List *upsert_private = NIL;

static bool
is_distributed_target(Query *parse, Oid *relid)
{
	RangeTblEntry *rte;

	if (parse->commandType != CMD_INSERT || parse->resultRelation <= 0)
		return false;
	rte = rt_fetch(parse->resultRelation, parse->rtable);
	*relid = rte->relid;
	return rte->relkind == RELKIND_FOREIGN_TABLE && is_distributed_table(rte->relid);
}

static void
refuse_upsert(Oid relid, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("this INSERT ... ON CONFLICT on distributed table %s cannot be sent to its nodes",
					get_rel_name(relid)),
			 errdetail("%s", detail),
			 errhint("Write the conflict target as columns of the table, and the new values and conditions with "
					 "built-in immutable functions of the table's columns, EXCLUDED, constants, parameters and "
					 "stable functions of those.")));
}

static void
check_upsert_expr(Oid relid, Index varno, OnConflictExpr *oc, Node *expr, const char *where)
{
	const char *reason;

	if (expr == NULL)
		return;
	reason = rsfdw_upsert_unshippable_reason(relid, varno, oc->exclRelIndex, (Expr *) expr);
	if (reason)
		refuse_upsert(relid, psprintf("It uses %s in %s.", reason, where));
}

/*
 * Check the conflict clause of an upsert on distributed table relid, fold
 * its constants, and build its SQL for the nodes: the wrapper's private
 * list for the ModifyTable (modify.c): the clause's template, the
 * expressions of its holes, and for DO UPDATE the conflict target's
 * columns.
 */
static List *
plan_upsert(Query *parse, Oid relid)
{
	OnConflictExpr *oc = parse->onConflict;
	Index		varno = parse->resultRelation;
	Relation	rel = table_open(relid, NoLock);
	TablePlacement placement;
	List	   *params = NIL;
	List	   *pieces;
	List	   *arbiter = NIL;
	ListCell   *lc;

	table_placement_load_without_moves(&placement, relid, RelationGetDescr(rel), CurrentMemoryContext);
	table_close(rel, NoLock);

	if (oc->constraint != InvalidOid)
		refuse_upsert(relid, "It names its conflict target by constraint (ON CONFLICT ON CONSTRAINT).");
	foreach(lc, oc->arbiterElems)
	{
		InferenceElem *elem = lfirst_node(InferenceElem, lc);

		if (!IsA(elem->expr, Var) || ((Var *) elem->expr)->varno != varno || ((Var *) elem->expr)->varattno <= 0)
			refuse_upsert(relid, "Its conflict target has an expression (only columns are sent).");
		if (OidIsValid(elem->infercollid) || OidIsValid(elem->inferopclass))
			refuse_upsert(relid, "Its conflict target names a collation or an operator class.");
	}
	oc->arbiterWhere = eval_const_expressions(NULL, oc->arbiterWhere);
	oc->onConflictWhere = eval_const_expressions(NULL, oc->onConflictWhere);
	check_upsert_expr(relid, varno, oc, oc->arbiterWhere, "the WHERE clause of its conflict target");
	check_upsert_expr(relid, varno, oc, oc->onConflictWhere, "the WHERE clause of DO UPDATE");
	foreach(lc, oc->onConflictSet)
	{
		TargetEntry *te = lfirst_node(TargetEntry, lc);

		if (te->resjunk)
			continue;
		if (te->resno == placement.key_attnum ||
			(placement.keyspace_attnum > 0 && te->resno == placement.keyspace_attnum))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("INSERT ... ON CONFLICT DO UPDATE cannot change the sharding key of distributed table %s",
							get_rel_name(relid)),
					 errdetail("Column \"%s\" decides which nodes hold the row.", get_attname(relid, te->resno, false)),
					 errhint("Delete the row and insert it with its new key.")));
		te->expr = (Expr *) eval_const_expressions(NULL, (Node *) te->expr);
		check_upsert_expr(relid, varno, oc, (Node *) te->expr,
						  psprintf("its new value of column \"%s\"", get_attname(relid, te->resno, false)));
	}
	pieces = rsfdw_deparse_on_conflict(oc, relid, varno, &params);
	/* DO UPDATE: the conflict target's columns, to catch a row written twice (modify.c) */
	foreach(lc, oc->arbiterElems)
		if (oc->action == ONCONFLICT_UPDATE)
			arbiter = lappend_int(arbiter, ((Var *) lfirst_node(InferenceElem, lc)->expr)->varattno);
	return list_make3(pieces, params, arbiter);
}

List *
rsfdw_upsert_private(PlannerInfo *root, Index resultRelation)
{
	if (upsert_query == NULL || root->parse != upsert_query || resultRelation != upsert_query->resultRelation)
		return NIL;
	return upsert_private;
}

/* A data-modifying WITH cannot upsert a distributed table: its clause would reach planning unchecked. */
static void
refuse_upsert_in_with(Query *parse)
{
	ListCell   *lc;

	foreach(lc, parse->cteList)
	{
		CommonTableExpr *cte = lfirst_node(CommonTableExpr, lc);
		Query	   *q = (Query *) cte->ctequery;
		Oid			relid;

		if (IsA(q, Query) && q->onConflict != NULL && is_distributed_target(q, &relid))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("INSERT ... ON CONFLICT on distributed table %s is not supported inside WITH",
							get_rel_name(relid)),
					 errhint("Run the upsert as a statement of its own (RETURNING gives its rows).")));
	}
}

static PlannedStmt *
ringshard_planner(Query *parse, const char *query_string, int cursor_options, ParamListInfo bound_params)
{
	/* planning may plan other statements (a function folded here): each keeps its own */
	Query	   *saved_query = upsert_query;
	List	   *saved_private = upsert_private;
	PlannedStmt *result;
	Oid			relid;
	Query	   *router_original = NULL;
	Query	   *aggregate_original = NULL;

	refuse_upsert_in_with(parse);
	/* an UPDATE or DELETE that reads other tables, all fixed to one key, goes whole to the key's replicas */
	if (rsfdw_router_write_candidate(parse))
	{
		result = rsfdw_plan_router_write(parse);
		if (result)
			return result;
	}
	/* planning scribbles on the statement: a router statement is deparsed from a copy */
	if (rsfdw_router_candidate(parse, cursor_options))
	{
		router_original = copyObject(parse);
		/* the router scribbles on its copy: an aggregate keeps another for fanout_aggregate.c */
		if (parse->hasAggs || parse->distinctClause != NIL)
			aggregate_original = copyObject(parse);
	}
	upsert_query = NULL;
	upsert_private = NIL;
	if (parse->onConflict != NULL && is_distributed_target(parse, &relid))
	{
		upsert_private = plan_upsert(parse, relid);
		upsert_query = parse;
		parse->onConflict = NULL;
	}
	PG_TRY();
	{
		if (previous_planner_hook)
			result = previous_planner_hook(parse, query_string, cursor_options, bound_params);
		else
			result = standard_planner(parse, query_string, cursor_options, bound_params);
	}
	PG_FINALLY();
	{
		upsert_query = saved_query;
		upsert_private = saved_private;
	}
	PG_END_TRY();
	if (router_original)
	{
		Plan	   *usual = result->planTree;

		result = rsfdw_plan_router(router_original, result);
		/* grouped by other than the key, or one total: the nodes' groups combined here */
		if (aggregate_original && result->planTree == usual)
			result = rsfdw_plan_fanout_aggregate(aggregate_original, result, query_string, cursor_options,
												 bound_params);
	}
	return result;
}

void
rsfdw_statement_planner_init(void)
{
	previous_planner_hook = planner_hook;
	planner_hook = ringshard_planner;
	rsfdw_router_init();
}

/*
 * fanout_aggregate.c
 *		Aggregates over a join of colocated tables, grouped by anything:
 *		each node aggregates the rows of the keys it serves, the coordinator
 *		combines the groups.
 *
 * A fan-out router statement (router.c) goes whole to every node only when
 * its top level never combines rows of two keys.  A statement such as
 *
 *		SELECT c.region, count(*), sum(o.cents)
 *		  FROM customers c JOIN orders o ON o.customer_id = c.id
 *		 GROUP BY c.region HAVING count(*) > 10 ORDER BY 3 DESC LIMIT 5
 *
 * does: a region's rows come from every node.  Its join still runs where
 * the rows are, as for the key's groups, if the aggregation is split the
 * way PostgreSQL splits a parallel one: the nodes get the partial
 * statement
 *
 *		SELECT c.region, count(*), sum(o.cents) FROM ... WHERE reads_here(c.id)
 *		 GROUP BY c.region
 *
 * (one row per group and node), and here an Agg above the router combines
 * the groups and computes the statement's own target list, HAVING, ORDER BY
 * and LIMIT from them: the workers send groups, not the tables' rows.
 *
 * Combining a node's result needs an aggregate whose result is its own
 * partial: count (summed, as bigint), sum (summed again: sum(int4)'s bigint
 * through sum(bigint) back to bigint, sum(bigint)'s numeric through
 * sum(numeric), float, money and interval sums as they are) and min and max
 * (themselves) of PostgreSQL's own, and avg of integers and numeric (the
 * nodes' sums and counts, divided here), without DISTINCT or ORDER BY
 * inside; FILTER is the node's.  Any other aggregate, DISTINCT, window functions,
 * grouping sets, a sublink in the target list or HAVING, or a column that
 * is neither grouped nor aggregated keeps the usual plan (each table read
 * on its own, joined here), as does every statement the partial one of
 * would not go whole to the nodes (router.c decides, as for any fan-out).
 *
 * A DISTINCT without aggregates over such a join is combined the same way:
 * each node returns its distinct rows, and the Agg here (grouping by every
 * column, no aggregate) makes them distinct across nodes.
 *
 * The partial statement is planned as usual too: that plan sits below the
 * router, as for every router statement, and runs when the nodes cannot
 * answer it (a table moving); it returns the same columns (complete
 * aggregates of each group, which combine to themselves).
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_aggregate.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/clauses.h"
#include "optimizer/optimizer.h"
#include "optimizer/planner.h"
#include "parser/parse_agg.h"
#include "parser/parse_func.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "fdw/fdw.h"

/* How a node's aggregate is combined here. */
typedef struct CombineRule
{
	Oid			aggfnoid;		/* the combining aggregate, over the node's results */
	Oid			result_type;	/* its result */
	bool		to_bigint;		/* its numeric result cast back to bigint (count, sum of integers) */
	bool		zero_if_null;	/* count: 0, not NULL, when no node had a row */
} CombineRule;

/* What the rewriting of the statement's target list and HAVING collects and needs. */
typedef struct FanoutAggregate
{
	List	   *group_exprs;	/* the GROUP BY expressions, in order: the partial columns 1..n */
	List	   *aggrefs;		/* the distinct aggregates: the partial columns n+1.. */
	List	   *combined;		/* for each, its combining expression over its column */
	bool		failed;
} FanoutAggregate;

/* Whether an aggregate is PostgreSQL's own of this name. */
static bool
is_builtin_aggregate(Oid aggfnoid, const char *name)
{
	char	   *fname = get_func_name(aggfnoid);

	return fname != NULL && strcmp(fname, name) == 0 && get_func_namespace(aggfnoid) == PG_CATALOG_NAMESPACE;
}

/* pg_catalog's aggregate name(argtype), or InvalidOid. */
static Oid
builtin_aggregate(const char *name, Oid argtype)
{
	Oid			fn = LookupFuncName(list_make2(makeString("pg_catalog"), makeString(pstrdup(name))), 1, &argtype, true);

	return OidIsValid(fn) && get_func_prokind(fn) == PROKIND_AGGREGATE ? fn : InvalidOid;
}

/*
 * Whether the nodes' results of an aggregate can be combined at all: a
 * plain one of this level, without DISTINCT or ORDER BY inside (a value on
 * two nodes would count twice).
 */
static bool
is_plain_aggregate(Aggref *aggref)
{
	return aggref->aggdistinct == NIL && aggref->aggorder == NIL && aggref->aggdirectargs == NIL &&
		aggref->aggkind == AGGKIND_NORMAL && aggref->agglevelsup == 0 && !aggref->aggvariadic;
}

/* How the nodes' results of an aggregate combine here; false when they do not. */
static bool
combine_rule(Aggref *aggref, CombineRule *rule)
{
	Oid			partial = aggref->aggtype;

	memset(rule, 0, sizeof(*rule));
	if (!is_plain_aggregate(aggref))
		return false;
	if (is_builtin_aggregate(aggref->aggfnoid, "count"))
	{
		rule->aggfnoid = F_SUM_INT8;
		rule->to_bigint = rule->zero_if_null = true;
	}
	else if (is_builtin_aggregate(aggref->aggfnoid, "sum"))
		rule->aggfnoid = builtin_aggregate("sum", partial);
	else if (is_builtin_aggregate(aggref->aggfnoid, "min") || is_builtin_aggregate(aggref->aggfnoid, "max"))
	{
		/* min and max of a type return that type: the same aggregate again */
		if (list_length(aggref->aggargtypes) != 1 || linitial_oid(aggref->aggargtypes) != partial)
			return false;
		rule->aggfnoid = aggref->aggfnoid;
	}
	if (!OidIsValid(rule->aggfnoid))
		return false;
	rule->result_type = get_func_rettype(rule->aggfnoid);
	if (rule->result_type == aggref->aggtype)
		return true;
	/* sum(int2/int4) and count are bigint; their sums are numeric, and fit bigint again */
	if (aggref->aggtype == INT8OID && rule->result_type == NUMERICOID)
	{
		rule->to_bigint = true;
		return true;
	}
	return false;
}

/*
 * avg of integers or numeric: the nodes' sums and counts, added up here as
 * numeric and divided as PostgreSQL's own avg divides its total by its
 * count (numeric_div), so the result is the same to the last digit.  Fills
 * the two partial aggregates and their rules; false for another avg.
 */
static bool
split_average(Aggref *aggref, Aggref **sum, CombineRule *sum_rule, Aggref **count, CombineRule *count_rule)
{
	Oid			argtype;

	if (!is_plain_aggregate(aggref) || !is_builtin_aggregate(aggref->aggfnoid, "avg") ||
		list_length(aggref->aggargtypes) != 1 || aggref->aggtype != NUMERICOID)
		return false;
	argtype = linitial_oid(aggref->aggargtypes);
	if (argtype != INT2OID && argtype != INT4OID && argtype != INT8OID && argtype != NUMERICOID)
		return false;
	*sum = copyObject(aggref);
	(*sum)->aggfnoid = builtin_aggregate("sum", argtype);
	(*sum)->aggtype = get_func_rettype((*sum)->aggfnoid);
	(*sum)->aggtranstype = InvalidOid;	/* the partial statement's planning resolves it */
	*count = copyObject(aggref);
	(*count)->aggfnoid = F_COUNT_ANY;
	(*count)->aggtype = INT8OID;
	(*count)->aggtranstype = InvalidOid;
	memset(sum_rule, 0, sizeof(*sum_rule));
	memset(count_rule, 0, sizeof(*count_rule));
	sum_rule->aggfnoid = builtin_aggregate("sum", (*sum)->aggtype);
	sum_rule->result_type = NUMERICOID;
	count_rule->aggfnoid = F_SUM_INT8;
	count_rule->result_type = NUMERICOID;
	return OidIsValid(sum_rule->aggfnoid) && get_func_rettype(sum_rule->aggfnoid) == NUMERICOID;
}

/*
 * The combining expression of one partial aggregate: the rule's aggregate
 * over the node's column, cast.  aggno numbers the Agg's aggregates densely
 * from 0 (the executor keeps one state per number).
 */
static Expr *
combining_expression(Aggref *aggref, CombineRule *rule, AttrNumber column, int aggno)
{
	Aggref	   *combine = makeNode(Aggref);
	Oid			partial = aggref->aggtype;
	Var		   *var = makeVar(OUTER_VAR, column, partial, exprTypmod((Node *) aggref), aggref->aggcollid, 0);
	HeapTuple	tuple;
	Expr	   *result;

	combine->aggfnoid = rule->aggfnoid;
	combine->aggtype = rule->result_type;
	/* min and max compare in the statement's collation, as the nodes did */
	combine->aggcollid = rule->aggfnoid == aggref->aggfnoid ? aggref->aggcollid : InvalidOid;
	combine->inputcollid = rule->aggfnoid == aggref->aggfnoid ? aggref->inputcollid : InvalidOid;
	combine->aggargtypes = list_make1_oid(partial);
	combine->args = list_make1(makeTargetEntry((Expr *) var, 1, NULL, false));
	combine->aggkind = AGGKIND_NORMAL;
	combine->aggsplit = AGGSPLIT_SIMPLE;
	combine->aggno = combine->aggtransno = aggno;
	combine->location = -1;
	tuple = SearchSysCache1(AGGFNOID, ObjectIdGetDatum(rule->aggfnoid));
	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for aggregate %u", rule->aggfnoid);
	combine->aggtranstype = resolve_aggregate_transtype(rule->aggfnoid,
														((Form_pg_aggregate) GETSTRUCT(tuple))->aggtranstype,
														&partial, 1);
	ReleaseSysCache(tuple);
	result = (Expr *) combine;
	if (rule->to_bigint)
		result = (Expr *) makeFuncExpr(F_INT8_NUMERIC, INT8OID, list_make1(result), InvalidOid, InvalidOid,
									   COERCE_EXPLICIT_CAST);
	if (rule->zero_if_null)
	{
		CoalesceExpr *coalesce = makeNode(CoalesceExpr);

		coalesce->coalescetype = INT8OID;
		coalesce->args = list_make2(result, makeConst(INT8OID, -1, InvalidOid, sizeof(int64), Int64GetDatum(0),
													  false, FLOAT8PASSBYVAL));
		coalesce->location = -1;
		result = (Expr *) coalesce;
	}
	return result;
}

/*
 * The statement's aggregates, each once, from its target list and HAVING;
 * false when something there cannot be combined here (a sublink, GROUPING).
 */
static bool
collect_aggregates(Query *original, FanoutAggregate *fa)
{
	List	   *found;
	ListCell   *lc;

	if (contain_subplans((Node *) original->targetList) || contain_subplans(original->havingQual))
		return false;
	found = pull_var_clause((Node *) list_make2(original->targetList, original->havingQual),
							PVC_INCLUDE_AGGREGATES | PVC_INCLUDE_WINDOWFUNCS | PVC_INCLUDE_PLACEHOLDERS);
	foreach(lc, found)
	{
		Node	   *node = lfirst(lc);

		if (IsA(node, Aggref))
			fa->aggrefs = list_append_unique(fa->aggrefs, node);
		else if (!IsA(node, Var))
			return false;
	}
	return fa->aggrefs != NIL;
}

/*
 * An expression of the statement's target list or HAVING as the Agg here
 * computes it: GROUP BY expressions become the partial columns, aggregates
 * their combining expressions; any other column fails.
 */
static Node *
combined_mutator(Node *node, FanoutAggregate *fa)
{
	ListCell   *lc;
	int			i = 0;

	if (node == NULL)
		return NULL;
	foreach(lc, fa->group_exprs)
	{
		i++;
		if (equal(node, lfirst(lc)))
			return (Node *) makeVar(OUTER_VAR, i, exprType(node), exprTypmod(node), exprCollation(node), 0);
	}
	if (IsA(node, Aggref))
	{
		i = 0;
		foreach(lc, fa->aggrefs)
		{
			if (equal(node, lfirst(lc)))
				return copyObject(list_nth(fa->combined, i));
			i++;
		}
		fa->failed = true;
		return node;
	}
	if (IsA(node, Var) || IsA(node, SubLink))
	{
		fa->failed = true;		/* a column neither grouped nor aggregated (a key's dependents) */
		return node;
	}
	return expression_tree_mutator(node, combined_mutator, (void *) fa);
}

/* Fill a new plan node's costs and size from the one below it. */
static void
stack_plan(Plan *plan, Plan *below, double rows, int *next_plan_node_id)
{
	plan->lefttree = below;
	plan->startup_cost = below->total_cost;
	plan->total_cost = below->total_cost + rows * cpu_operator_cost;
	plan->plan_rows = rows;
	plan->plan_width = below->plan_width;
	plan->parallel_safe = false;
	plan->plan_node_id = (*next_plan_node_id)++;
}

/*
 * The statement's ORDER BY over the Agg's target list (positions are its
 * resnos, junk included: the top drops them), and its LIMIT, for
 * rsfdw_add_fanout_top; false when a sort key has no sort operator.
 */
static bool
fill_top(Query *original, Plan *agg, Limit *usual_limit, FanoutTop *top)
{
	int			n = Max(list_length(original->sortClause), 1);
	ListCell   *lc;

	memset(top, 0, sizeof(*top));
	top->limit = usual_limit;
	top->sort_columns = palloc0(sizeof(AttrNumber) * n);
	top->sort_operators = palloc0(sizeof(Oid) * n);
	top->collations = palloc0(sizeof(Oid) * n);
	top->nulls_first = palloc0(sizeof(bool) * n);
	foreach(lc, original->sortClause)
	{
		SortGroupClause *sgc = lfirst_node(SortGroupClause, lc);
		TargetEntry *tle = get_sortgroupclause_tle(sgc, agg->targetlist);

		if (!OidIsValid(sgc->sortop))
			return false;
		top->sort_columns[top->nsort] = tle->resno;
		top->collations[top->nsort] = exprCollation((Node *) tle->expr);
		top->sort_operators[top->nsort] = sgc->sortop;
		top->nulls_first[top->nsort] = sgc->nulls_first;
		top->nsort++;
	}
	return true;
}

/*
 * The clauses the nodes' rows are combined by here: GROUP BY, or the
 * columns of a DISTINCT without aggregates (the nodes' distinct rows are
 * made distinct again).
 */
static List *
combining_clauses(Query *original)
{
	return original->distinctClause != NIL ? original->distinctClause : original->groupClause;
}

/*
 * The partial statement's target list: the GROUP BY expressions, then each
 * aggregate as the nodes compute it (an average as a sum and a count), and
 * in fa the combining expression of each; false when an aggregate does not
 * combine.
 */
static bool
partial_columns(Query *original, FanoutAggregate *fa, List **partial_tlist)
{
	ListCell   *lc;
	int			ngroups;

	foreach(lc, combining_clauses(original))
	{
		SortGroupClause *sgc = lfirst_node(SortGroupClause, lc);
		TargetEntry *tle = get_sortgroupclause_tle(sgc, original->targetList);

		if (!sgc->hashable)
			return false;		/* combined in a hash table by the type's equality */
		fa->group_exprs = lappend(fa->group_exprs, tle->expr);
		tle = flatCopyTargetEntry(tle);
		tle->resno = list_length(*partial_tlist) + 1;
		tle->resjunk = false;	/* a group the statement does not return is still a column of the nodes' */
		*partial_tlist = lappend(*partial_tlist, tle);
	}
	ngroups = list_length(fa->group_exprs);
	foreach(lc, fa->aggrefs)
	{
		Aggref	   *aggref = lfirst(lc);
		Aggref	   *partials[2] = {aggref, NULL};
		CombineRule rules[2];
		Expr	   *combined[2];
		int			n = 1;

		if (split_average(aggref, &partials[0], &rules[0], &partials[1], &rules[1]))
			n = 2;
		else if (!combine_rule(aggref, &rules[0]))
			return false;
		for (int k = 0; k < n; k++)
		{
			/* the column's number among the partial columns, and its aggregate's among the Agg's */
			int			column = list_length(*partial_tlist) + 1;

			combined[k] = combining_expression(partials[k], &rules[k], column, column - ngroups - 1);
			*partial_tlist = lappend(*partial_tlist, makeTargetEntry((Expr *) copyObject(partials[k]), column,
																	 psprintf("partial_%d", column), false));
		}
		fa->combined = lappend(fa->combined,
							   n == 1 ? combined[0] :
							   (Expr *) makeFuncExpr(F_NUMERIC_DIV, NUMERICOID, list_make2(combined[0], combined[1]),
													 InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL));
	}
	return true;
}

/* The aggregate numbers (aggno) in use in an expression, a bit each. */
static bool
aggnos_in_use(Node *node, Bitmapset **used)
{
	if (node == NULL)
		return false;
	if (IsA(node, Aggref))
	{
		*used = bms_add_member(*used, ((Aggref *) node)->aggno);
		return false;
	}
	return expression_tree_walker(node, aggnos_in_use, (void *) used);
}

/* Number the aggregates by their rank among those in use (see renumber_aggregates). */
static bool
renumber_walker(Node *node, Bitmapset **used)
{
	if (node == NULL)
		return false;
	if (IsA(node, Aggref))
	{
		Aggref	   *aggref = (Aggref *) node;

		aggref->aggno = aggref->aggtransno = bms_member_index(*used, aggref->aggno);
		return false;
	}
	return expression_tree_walker(node, renumber_walker, (void *) used);
}

/*
 * Planning the Agg's expressions may fold an aggregate away (coalesce(1,
 * count(*))); the executor keeps one state per number up to the highest,
 * and a number left unused would be a state never set up: number the
 * aggregates left densely from 0 again.
 */
static void
renumber_aggregates(Agg *agg)
{
	Bitmapset  *used = NULL;

	(void) aggnos_in_use((Node *) agg->plan.targetlist, &used);
	(void) aggnos_in_use((Node *) agg->plan.qual, &used);
	(void) renumber_walker((Node *) agg->plan.targetlist, &used);
	(void) renumber_walker((Node *) agg->plan.qual, &used);
}

/*
 * The Agg that combines the nodes' groups (the router's rows) and computes
 * the statement's target list and HAVING from them; NULL when the statement
 * reads a column neither grouped nor aggregated.
 */
static Agg *
combining_agg(Query *original, FanoutAggregate *fa, Plan *router, double groups, int *next_id)
{
	Agg		   *agg = makeNode(Agg);
	ListCell   *lc;
	int			i = 0;

	foreach(lc, original->targetList)
	{
		TargetEntry *tle = flatCopyTargetEntry(lfirst(lc));

		tle->expr = (Expr *) combined_mutator((Node *) copyObject(tle->expr), fa);
		agg->plan.targetlist = lappend(agg->plan.targetlist, tle);
	}
	if (original->havingQual != NULL)
		agg->plan.qual = make_ands_implicit((Expr *) combined_mutator(copyObject(original->havingQual), fa));
	if (fa->failed)
		return NULL;

	/*
	 * The expressions are the parser's: planned now as the planner plans
	 * its own (default arguments filled in, operators' functions looked up,
	 * constants folded), or a call that relies on a default argument would
	 * reach its function with too few.
	 */
	foreach(lc, agg->plan.targetlist)
		((TargetEntry *) lfirst(lc))->expr = expression_planner(((TargetEntry *) lfirst(lc))->expr);
	agg->plan.qual = (List *) expression_planner((Expr *) agg->plan.qual);
	renumber_aggregates(agg);
	agg->aggstrategy = fa->group_exprs != NIL ? AGG_HASHED : AGG_PLAIN;
	agg->aggsplit = AGGSPLIT_SIMPLE;
	agg->numCols = list_length(fa->group_exprs);
	agg->grpColIdx = palloc0(sizeof(AttrNumber) * Max(agg->numCols, 1));
	agg->grpOperators = palloc0(sizeof(Oid) * Max(agg->numCols, 1));
	agg->grpCollations = palloc0(sizeof(Oid) * Max(agg->numCols, 1));
	foreach(lc, combining_clauses(original))
	{
		agg->grpColIdx[i] = i + 1;
		agg->grpOperators[i] = lfirst_node(SortGroupClause, lc)->eqop;
		agg->grpCollations[i] = exprCollation((Node *) list_nth(fa->group_exprs, i));
		i++;
	}
	agg->numGroups = (long) Min(groups, (double) LONG_MAX);
	stack_plan(&agg->plan, router, groups, next_id);
	return agg;
}

/*
 * Plan an aggregate statement over colocated tables as a partial one the
 * nodes run and an Agg here that combines it (see the top of the file);
 * `original` is a copy of the statement taken before planning, `planned`
 * its usual plan, returned as it is when this does not apply.
 */
PlannedStmt *
rsfdw_plan_fanout_aggregate(Query *original, PlannedStmt *planned, const char *query_string, int cursor_options,
							ParamListInfo bound_params)
{
	FanoutAggregate fa = {NIL, NIL, NIL, false};
	List	   *partial_tlist = NIL;
	Query	   *partial;
	PlannedStmt *partial_planned;
	Plan	   *usual_top = planned->planTree;
	Limit	   *usual_limit = NULL;
	Plan	   *top;
	FanoutTop	fanout_top;
	int			next_id;

	if (original->hasWindowFuncs || original->hasTargetSRFs || original->groupingSets != NIL ||
		original->setOperations != NULL || original->limitOption == LIMIT_OPTION_WITH_TIES ||
		original->rowMarks != NIL || original->hasDistinctOn)
		return planned;
	/* aggregates, or a DISTINCT of plain columns and expressions */
	if (original->hasAggs ? original->distinctClause != NIL :
		original->distinctClause == NIL || original->groupClause != NIL || original->havingQual != NULL)
		return planned;
	/* one table's aggregates go to the nodes with its scan already (upper.c) */
	if (rsfdw_count_distributed_tables(original) < 2)
		return planned;
	if ((original->hasAggs && !collect_aggregates(original, &fa)) || !partial_columns(original, &fa, &partial_tlist))
		return planned;
	if (original->limitCount != NULL || original->limitOffset != NULL)
	{
		/* the usual plan's Limit, its expressions planned (and reading no initplan of that plan) */
		if (!IsA(usual_top, Limit) || planned->subplans != NIL)
			return planned;
		usual_limit = (Limit *) usual_top;
		usual_top = usual_top->lefttree;
	}

	/* the partial statement: the groups and aggregates (or the distinct rows), nothing on top */
	partial = copyObject(original);
	partial->targetList = partial_tlist;
	partial->havingQual = NULL;
	partial->sortClause = NIL;
	partial->limitCount = NULL;
	partial->limitOffset = NULL;
	partial->limitOption = LIMIT_OPTION_DEFAULT;
	if (!rsfdw_router_candidate(partial, cursor_options))
		return planned;
	partial_planned = standard_planner(copyObject(partial), query_string, cursor_options, bound_params);
	if (!rsfdw_plan_partial_router(partial, partial_planned))
		return planned;

	/* the Agg here, then the statement's ORDER BY and LIMIT */
	next_id = rsfdw_highest_plan_node_id(partial_planned) + 1;
	top = (Plan *) combining_agg(original, &fa, partial_planned->planTree, Max(usual_top->plan_rows, 1), &next_id);
	if (top == NULL)
		return planned;
	if (!fill_top(original, top, usual_limit, &fanout_top))
		return planned;
	top = rsfdw_add_fanout_top(top, &fanout_top, &next_id);
	partial_planned->planTree = top;
	return partial_planned;
}

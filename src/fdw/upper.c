/*
 * upper.c
 *		Planning the work the nodes do above a fan-out scan: aggregates, and
 *		ORDER BY ... LIMIT (see upper.h).
 *
 * Only a fan-out whose WHERE clause the nodes evaluate whole (no condition
 * left for the coordinator) is pushed further: a condition evaluated here
 * would have to see every row first.  A router scan is not pushed either:
 * it reads the rows of a few keys from one replica each, a small read that
 * aggregating or limiting here costs nothing, while a pushed-down query
 * would have to repeat the router's per-key failover.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/transam.h"
#include "catalog/pg_aggregate.h"
#include "catalog/pg_type.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/clauses.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/planmain.h"
#include "optimizer/tlist.h"
#include "parser/parsetree.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/ruleutils.h"
#include "utils/selfuncs.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

#include "fdw/deparse.h"
#include "fdw/fdw.h"
#include "fdw/upper.h"

/* Costs, in planner.c's units: a round trip to every node, then what comes back. */
#define RS_FANOUT_STARTUP	100.0
#define RS_ROW_TRANSFER_COST 0.01

/* What planning knows of an upper relation the nodes work for (RelOptInfo.fdw_private). */
typedef struct RsUpperInfo
{
	UpperRelationKind stage;
	RelOptInfo *base;			/* the fan-out scan of the distributed table */

	/* UPPERREL_GROUP_AGG */
	List	   *scan_tlist;		/* GROUP BY expressions, then the pushed aggregates */
	List	   *group_clauses;	/* the SortGroupClause of each GROUP BY expression */
	List	   *having;			/* conditions on the combined groups, evaluated here */

	/* UPPERREL_ORDERED, UPPERREL_FINAL */
	List	   *pathkeys;		/* the order the nodes sort in (NIL: none) */
	List	   *sort_members;	/* for each pathkey, the EquivalenceMember the nodes sort by */
	Node	   *limit_count;	/* UPPERREL_FINAL: LIMIT and OFFSET, NULL if absent */
	Node	   *limit_offset;
} RsUpperInfo;

/* An upper relation's RsUpperInfo, for this stage over this fan-out scan, the rest to fill. */
static RsUpperInfo *
make_upper_info(RelOptInfo *rel, UpperRelationKind stage, RelOptInfo *base)
{
	RsUpperInfo *upper = palloc0(sizeof(RsUpperInfo));

	upper->stage = stage;
	upper->base = base;
	rel->fdw_private = upper;
	return upper;
}

/* The distributed table's scan, if the nodes can do the work above it. */
static RsRelInfo *
pushable_scan(PlannerInfo *root, RelOptInfo *rel)
{
	RsRelInfo  *info;

	if (rel->reloptkind != RELOPT_BASEREL || rel->fdw_private == NULL || IS_DUMMY_REL(rel))
		return NULL;
	info = rel->fdw_private;
	if (info->is_upper || info->key_clause != NULL || info->local_conds != NIL)
		return NULL;
	if (!bms_is_empty(rel->lateral_relids) || root->parse->commandType != CMD_SELECT ||
		root->parse->rowMarks != NIL)
		return NULL;
	return info;
}

/* Whether the nodes compute an expression of the table's columns exactly as we would. */
static bool
expr_pushable(PlannerInfo *root, RelOptInfo *base, Node *expr)
{
	return rsfdw_is_shippable(root, base, (Expr *) expr);
}

/* How an aggregate is combined, by its function; 0 for aggregates that are not pushed. */
static RsCombineKind
aggregate_kind(Oid aggfnoid)
{
	switch (aggfnoid)
	{
		case F_COUNT_:
		case F_COUNT_ANY:
			return RS_COMBINE_COUNT;
		case F_SUM_INT2:
		case F_SUM_INT4:
		case F_SUM_INT8:
		case F_SUM_NUMERIC:
		case F_SUM_FLOAT4:
		case F_SUM_FLOAT8:
		case F_SUM_INTERVAL:
		case F_SUM_MONEY:
			return RS_COMBINE_SUM;
		case F_AVG_INT2:
		case F_AVG_INT4:
		case F_AVG_INT8:
		case F_AVG_NUMERIC:
			return RS_COMBINE_AVG_NUMERIC;
		case F_AVG_FLOAT4:
		case F_AVG_FLOAT8:
			return RS_COMBINE_AVG_FLOAT8;
		case F_AVG_INTERVAL:
			return RS_COMBINE_AVG_INTERVAL;
		case F_MIN_INT2:
		case F_MIN_INT4:
		case F_MIN_INT8:
		case F_MIN_OID:
		case F_MIN_FLOAT4:
		case F_MIN_FLOAT8:
		case F_MIN_NUMERIC:
		case F_MIN_MONEY:
		case F_MIN_DATE:
		case F_MIN_TIME:
		case F_MIN_TIMETZ:
		case F_MIN_TIMESTAMP:
		case F_MIN_TIMESTAMPTZ:
		case F_MIN_INTERVAL:
		case F_MIN_TEXT:
		case F_MIN_BPCHAR:
		case F_MIN_ANYARRAY:
		case F_MIN_ANYENUM:
		case F_MIN_INET:
		case F_MIN_PG_LSN:
		case F_MIN_XID8:
		case F_MAX_INT2:
		case F_MAX_INT4:
		case F_MAX_INT8:
		case F_MAX_OID:
		case F_MAX_FLOAT4:
		case F_MAX_FLOAT8:
		case F_MAX_NUMERIC:
		case F_MAX_MONEY:
		case F_MAX_DATE:
		case F_MAX_TIME:
		case F_MAX_TIMETZ:
		case F_MAX_TIMESTAMP:
		case F_MAX_TIMESTAMPTZ:
		case F_MAX_INTERVAL:
		case F_MAX_TEXT:
		case F_MAX_BPCHAR:
		case F_MAX_ANYARRAY:
		case F_MAX_ANYENUM:
		case F_MAX_INET:
		case F_MAX_PG_LSN:
		case F_MAX_XID8:
			return RS_COMBINE_MIN_MAX;
		default:
			return 0;
	}
}

/* The addition that totals a sum's partial results (of the sum's own type). */
static Oid
sum_addition(Oid aggfnoid)
{
	switch (aggfnoid)
	{
		case F_SUM_INT2:
		case F_SUM_INT4:
			return F_INT8PL;
		case F_SUM_INT8:
		case F_SUM_NUMERIC:
			return F_NUMERIC_ADD;
		case F_SUM_FLOAT4:
			return F_FLOAT4PL;
		case F_SUM_FLOAT8:
			return F_FLOAT8PL;
		case F_SUM_INTERVAL:
			return F_INTERVAL_PL;
		case F_SUM_MONEY:
			return F_CASH_PL;
		default:
			elog(ERROR, "ringshard: no addition for aggregate %u", aggfnoid);
	}
	return InvalidOid;
}

/* The sort operator of min or max: its result is the first partial result in that order. */
static Oid
aggregate_sort_operator(Oid aggfnoid)
{
	HeapTuple	tuple = SearchSysCache1(AGGFNOID, ObjectIdGetDatum(aggfnoid));
	Oid			sortop;

	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for aggregate %u", aggfnoid);
	sortop = ((Form_pg_aggregate) GETSTRUCT(tuple))->aggsortop;
	ReleaseSysCache(tuple);
	return sortop;
}

/*
 * Whether the nodes can compute an aggregate's partial results: a plain
 * call of one of the built-in aggregates we know how to combine, without
 * DISTINCT or ORDER BY, over expressions (and a FILTER) they compute as we
 * would.
 */
static bool
pushable_aggregate(PlannerInfo *root, RelOptInfo *base, Aggref *aggref)
{
	RsCombineKind kind = aggregate_kind(aggref->aggfnoid);
	ListCell   *lc;

	if (kind == 0 || aggref->aggfnoid >= FirstGenbkiObjectId || aggref->agglevelsup != 0 ||
		aggref->aggkind != AGGKIND_NORMAL || aggref->aggsplit != AGGSPLIT_SIMPLE ||
		aggref->aggdistinct != NIL || aggref->aggorder != NIL || aggref->aggvariadic)
		return false;
	foreach(lc, aggref->args)
	{
		TargetEntry *tle = lfirst_node(TargetEntry, lc);

		if (tle->resjunk || !expr_pushable(root, base, (Node *) tle->expr))
			return false;
	}
	if (aggref->aggfilter && !expr_pushable(root, base, (Node *) aggref->aggfilter))
		return false;
	if (kind == RS_COMBINE_MIN_MAX)
	{
		/* the nodes compare in the argument's own collation; so must the combining */
		if (list_length(aggref->args) != 1 || !OidIsValid(aggregate_sort_operator(aggref->aggfnoid)) ||
			aggref->inputcollid != exprCollation((Node *) linitial_node(TargetEntry, aggref->args)->expr))
			return false;
	}
	return true;
}

/* While checking the target and HAVING of a grouped query. */
typedef struct GroupingCheck
{
	PlannerInfo *root;
	RelOptInfo *base;
	List	   *group_exprs;	/* GROUP BY expressions the nodes return */
	List	   *aggregates;		/* Aggrefs the nodes compute, each once */
} GroupingCheck;

/*
 * Whether an expression over the groups needs something the nodes do not
 * return: every column must be inside a GROUP BY expression or a pushed
 * aggregate; what lies around them is evaluated here on the combined
 * groups.  Subqueries are left to a local aggregate.
 */
static bool
needs_more_walker(Node *node, GroupingCheck *check)
{
	if (node == NULL)
		return false;
	if (list_member(check->group_exprs, node))
		return false;
	if (IsA(node, Aggref))
	{
		if (!pushable_aggregate(check->root, check->base, (Aggref *) node))
			return true;
		if (!list_member(check->aggregates, node))
			check->aggregates = lappend(check->aggregates, node);
		return false;
	}
	if (IsA(node, Var) || IsA(node, PlaceHolderVar) || IsA(node, SubLink) || IsA(node, SubPlan) ||
		IsA(node, AlternativeSubPlan) || IsA(node, GroupingFunc) || IsA(node, WindowFunc))
		return true;
	return expression_tree_walker(node, needs_more_walker, (void *) check);
}

/* UPPERREL_GROUP_AGG: the nodes aggregate, we combine. */
static void
add_grouping_path(PlannerInfo *root, RelOptInfo *input_rel, RelOptInfo *grouped_rel, GroupPathExtraData *extra)
{
	Query	   *parse = root->parse;
	PathTarget *target = grouped_rel->reltarget;
	GroupingCheck check;
	RsUpperInfo *upper;
	List	   *scan_tlist = NIL;
	List	   *group_clauses = NIL;
	List	   *having = NIL;
	ListCell   *lc;
	double		groups;
	Cost		startup;
	Cost		total;
	int			i;

	/*
	 * HAVING alone (no aggregate, no GROUP BY) is a gating condition: nothing
	 * to push.  Partitionwise aggregation (enable_partitionwise_aggregate) is
	 * fine when it is complete (this table, a partition, is grouped whole);
	 * a partial one wants partial results, which this path does not make.
	 */
	if ((parse->groupClause == NIL && !parse->hasAggs) || parse->groupingSets != NIL || extra == NULL ||
		extra->patype == PARTITIONWISE_AGGREGATE_PARTIAL)
		return;
	if (pushable_scan(root, input_rel) == NULL)
		return;

	memset(&check, 0, sizeof(check));
	check.root = root;
	check.base = input_rel;

	/* The GROUP BY expressions: the nodes group by them and return them first. */
	i = 0;
	foreach(lc, target->exprs)
	{
		Expr	   *expr = lfirst(lc);
		Index		sgref = get_pathtarget_sortgroupref(target, i);
		SortGroupClause *clause;
		TargetEntry *tle;

		i++;
		if (sgref == 0 || (clause = get_sortgroupref_clause_noerr(sgref, parse->groupClause)) == NULL)
			continue;
		/*
		 * Groups are merged here in a hash table.  A bare parameter would
		 * be a scan column that setrefs.c confuses with the parameter
		 * values evaluated at the start of the scan.
		 */
		if (!clause->hashable || !OidIsValid(clause->eqop) || IsA(expr, Param) ||
			!expr_pushable(root, input_rel, (Node *) expr))
			return;
		tle = makeTargetEntry(expr, list_length(scan_tlist) + 1, NULL, false);
		tle->ressortgroupref = sgref;
		scan_tlist = lappend(scan_tlist, tle);
		group_clauses = lappend(group_clauses, clause);
		check.group_exprs = lappend(check.group_exprs, expr);
	}
	if (list_length(group_clauses) != list_length(parse->groupClause))
		return;					/* a GROUP BY entry the target does not carry */

	/* Everything else is computed here from the GROUP BY columns and the combined aggregates. */
	i = 0;
	foreach(lc, target->exprs)
	{
		Index		sgref = get_pathtarget_sortgroupref(target, i);

		i++;
		if (sgref != 0 && get_sortgroupref_clause_noerr(sgref, parse->groupClause) != NULL)
			continue;
		if (needs_more_walker(lfirst(lc), &check))
			return;
	}
	foreach(lc, (List *) extra->havingQual)
	{
		if (needs_more_walker(lfirst(lc), &check))
			return;
		having = lappend(having, lfirst(lc));
	}
	foreach(lc, check.aggregates)
		scan_tlist = lappend(scan_tlist, makeTargetEntry(lfirst(lc), list_length(scan_tlist) + 1, NULL, false));

	upper = make_upper_info(grouped_rel, UPPERREL_GROUP_AGG, input_rel);
	upper->scan_tlist = scan_tlist;
	upper->group_clauses = group_clauses;
	upper->having = having;

	/*
	 * The nodes read the rows in parallel and send one row per group: far
	 * cheaper than bringing every row here, which is the point.
	 */
	groups = check.group_exprs == NIL ? 1.0
		: estimate_num_groups(root, check.group_exprs, input_rel->rows, NULL, NULL);
	startup = RS_FANOUT_STARTUP + input_rel->rows * cpu_operator_cost * 0.5;
	total = startup + groups * (cpu_tuple_cost + RS_ROW_TRANSFER_COST +
								list_length(check.aggregates) * cpu_operator_cost);
	add_path(grouped_rel, (Path *) create_foreign_upper_path(root, grouped_rel, target, groups, startup, total,
															NIL, NULL, NIL));
}

/*
 * The expression a node sorts by for a pathkey: one of the table's
 * expressions it computes as we do, sorted by its type's default btree
 * operator class (which the SQL ORDER BY uses) in its own collation.
 */
static EquivalenceMember *
sort_member(PlannerInfo *root, RelOptInfo *rel, PathKey *pathkey)
{
	EquivalenceClass *ec = pathkey->pk_eclass;
	ListCell   *lc;

	if (ec->ec_has_volatile || pathkey->pk_opfamily >= FirstGenbkiObjectId ||
		(pathkey->pk_strategy != BTLessStrategyNumber && pathkey->pk_strategy != BTGreaterStrategyNumber))
		return NULL;
	foreach(lc, ec->ec_members)
	{
		EquivalenceMember *em = lfirst(lc);
		Expr	   *expr = em->em_expr;

		if (em->em_is_child || em->em_is_const || !bms_equal(em->em_relids, rel->relids))
			continue;
		if (lookup_type_cache(exprType((Node *) expr), TYPECACHE_BTREE_OPFAMILY)->btree_opf != pathkey->pk_opfamily ||
			exprCollation((Node *) expr) != ec->ec_collation)
			continue;
		if (expr_pushable(root, rel, (Node *) expr))
			return em;
	}
	return NULL;
}

/* UPPERREL_ORDERED: remember the order the nodes can sort in, for the LIMIT (no path of its own). */
static void
note_ordered(PlannerInfo *root, RelOptInfo *input_rel, RelOptInfo *ordered_rel)
{
	RsUpperInfo *upper;
	List	   *sort_members = NIL;
	ListCell   *lc;

	if (pushable_scan(root, input_rel) == NULL)
		return;
	foreach(lc, root->sort_pathkeys)
	{
		EquivalenceMember *em = sort_member(root, input_rel, lfirst(lc));

		if (em == NULL)
			return;
		sort_members = lappend(sort_members, em);
	}
	upper = make_upper_info(ordered_rel, UPPERREL_ORDERED, input_rel);
	upper->pathkeys = root->sort_pathkeys;
	upper->sort_members = sort_members;
}

/* A LIMIT or OFFSET the scan can evaluate once when it starts, as the Limit node would. */
static bool
limit_expression_ok(Node *expr)
{
	return expr == NULL ||
		(!contain_var_clause(expr) && !contain_volatile_functions(expr) && !contain_subplans(expr) &&
		 !contain_agg_clause(expr) && !contain_window_function(expr));
}

/*
 * UPPERREL_FINAL: each node returns its first limit + offset rows (in the
 * query's order, if it has one) and we merge them.
 */
static void
add_final_path(PlannerInfo *root, RelOptInfo *input_rel, RelOptInfo *final_rel, FinalPathExtraData *extra)
{
	Query	   *parse = root->parse;
	PathTarget *target = root->upper_targets[UPPERREL_FINAL];
	RelOptInfo *base = input_rel;
	List	   *pathkeys = NIL;
	List	   *sort_members = NIL;
	List	   *scan_tlist = NIL;
	List	   *vars;
	ListCell   *lc;
	RsUpperInfo *upper;
	double		rows;
	Cost		startup;

	if (extra == NULL || !extra->limit_needed || parse->commandType != CMD_SELECT || parse->rowMarks != NIL ||
		parse->hasTargetSRFs || parse->limitOption == LIMIT_OPTION_WITH_TIES)
		return;
	if (IS_UPPER_REL(input_rel))
	{
		RsUpperInfo *ordered = input_rel->fdw_private;

		/* a grouped, distinct or windowed input cannot be cut on the nodes */
		if (ordered == NULL || ordered->stage != UPPERREL_ORDERED)
			return;
		base = ordered->base;
		pathkeys = ordered->pathkeys;
		sort_members = ordered->sort_members;
	}
	if (pushable_scan(root, base) == NULL)
		return;

	/*
	 * Each node's top rows come back as one answer: without a LIMIT (only
	 * an OFFSET), or with one the planner knows to exceed
	 * ringshard.fetch_size, the streaming merge of the plain scan is better.
	 */
	if (parse->limitCount == NULL || extra->count_est == 0 ||
		(extra->count_est > 0 && extra->count_est + Max(extra->offset_est, 0) > ringshard_fetch_size))
		return;
	if (!limit_expression_ok(parse->limitCount) || !limit_expression_ok(parse->limitOffset))
		return;

	/*
	 * The nodes return the sort expressions, for the merge, and the columns
	 * the rest of the target needs (whole rows and system columns differ
	 * from copy to copy).
	 */
	if (contain_subplans((Node *) target->exprs))
		return;
	foreach(lc, sort_members)
	{
		Expr	   *expr = ((EquivalenceMember *) lfirst(lc))->em_expr;

		if (!tlist_member(expr, scan_tlist))
			scan_tlist = lappend(scan_tlist, makeTargetEntry(expr, list_length(scan_tlist) + 1, NULL, false));
	}
	vars = NIL;
	foreach(lc, target->exprs)
		if (!tlist_member(lfirst(lc), scan_tlist))
			vars = list_concat(vars, pull_var_clause(lfirst(lc), PVC_RECURSE_PLACEHOLDERS));
	foreach(lc, vars)
	{
		Var		   *var = lfirst(lc);

		if (!IsA(var, Var) || var->varno != base->relid || var->varattno <= 0 || var->varlevelsup != 0)
			return;
		if (!tlist_member((Expr *) var, scan_tlist))
			scan_tlist = lappend(scan_tlist, makeTargetEntry((Expr *) var, list_length(scan_tlist) + 1, NULL, false));
	}

	upper = make_upper_info(final_rel, UPPERREL_FINAL, base);
	upper->scan_tlist = scan_tlist;
	upper->pathkeys = pathkeys;
	upper->sort_members = sort_members;
	upper->limit_count = parse->limitCount;
	upper->limit_offset = parse->limitOffset;

	/*
	 * Cheaper than a Limit over the plain scan, whose first FETCH has every
	 * node read and send a whole batch of rows.  A LIMIT not known yet is
	 * taken to keep a tenth of the rows, as the planner takes it.
	 */
	rows = extra->count_est > 0 ? Min((double) extra->count_est, base->rows) : clamp_row_est(base->rows * 0.10);
	startup = RS_FANOUT_STARTUP * 0.9;
	add_path(final_rel, (Path *) create_foreign_upper_path(root, final_rel, target, rows, startup,
														  startup + rows * (cpu_tuple_cost + RS_ROW_TRANSFER_COST),
														  pathkeys, NULL, NIL));
}

void
rsGetForeignUpperPaths(PlannerInfo *root, UpperRelationKind stage, RelOptInfo *input_rel,
					   RelOptInfo *output_rel, void *extra)
{
	if (output_rel->fdw_private != NULL)
		return;					/* considered already */
	switch (stage)
	{
		case UPPERREL_GROUP_AGG:
			add_grouping_path(root, input_rel, output_rel, (GroupPathExtraData *) extra);
			break;
		case UPPERREL_ORDERED:
			note_ordered(root, input_rel, output_rel);
			break;
		case UPPERREL_FINAL:
			add_final_path(root, input_rel, output_rel, (FinalPathExtraData *) extra);
			break;
		default:
			break;
	}
}

/* An expression's SQL as EXPLAIN shows it. */
static char *
expr_text(PlannerInfo *root, RelOptInfo *base, Expr *expr, List **params)
{
	DeparseContext ctx;

	rsfdw_deparse_init(&ctx, root, base, base->relid, params);
	rsfdw_append_expr(&ctx, expr);
	return rsfdw_template_text(rsfdw_deparse_finish(&ctx), NULL);
}

/* A LIMIT or OFFSET value as EXPLAIN shows it. */
static char *
limit_text(Node *expr)
{
	if (IsA(expr, Const))
		return ((Const *) expr)->constisnull ? "ALL"
			: psprintf(INT64_FORMAT, DatumGetInt64(((Const *) expr)->constvalue));
	return deparse_expression(expr, NIL, false, false);
}

/* Append a partial aggregate's call: name(argument) FILTER (WHERE ...). */
static void
append_partial_call(DeparseContext *ctx, const char *name, Aggref *aggref, const char *argument_cast)
{
	rsfdw_append(ctx, "pg_catalog.");
	rsfdw_append(ctx, name);
	rsfdw_append(ctx, "(");
	if (aggref->aggstar)
		rsfdw_append(ctx, "*");
	else
	{
		Expr	   *arg = linitial_node(TargetEntry, aggref->args)->expr;

		if (argument_cast)
			rsfdw_append(ctx, "(");
		rsfdw_append_expr(ctx, arg);
		if (argument_cast)
		{
			rsfdw_append(ctx, ")::");
			rsfdw_append(ctx, argument_cast);
		}
	}
	rsfdw_append(ctx, ")");
	if (aggref->aggfilter)
	{
		rsfdw_append(ctx, " FILTER (WHERE ");
		rsfdw_append_expr(ctx, aggref->aggfilter);
		rsfdw_append(ctx, ")");
	}
}

/*
 * An average's partial results, two columns: its sum, then its count.
 * Returns the function that adds two sums, and sets the sum's type.
 */
static Oid
append_avg_partials(DeparseContext *ctx, Aggref *aggref, RsCombineKind kind, Oid *sum_type)
{
	/* PostgreSQL divides the numeric sum by the numeric count */
	bool		numeric = kind == RS_COMBINE_AVG_NUMERIC;

	if (numeric)
		rsfdw_append(ctx, "(");
	/* float4 values too are summed as float8 */
	append_partial_call(ctx, "sum", aggref, aggref->aggfnoid == F_AVG_FLOAT4 ? "pg_catalog.float8" : NULL);
	rsfdw_append(ctx, numeric ? ")::pg_catalog.numeric, " : ", ");
	append_partial_call(ctx, "count", aggref, NULL);
	if (numeric)
	{
		*sum_type = NUMERICOID;
		return F_NUMERIC_ADD;
	}
	if (kind == RS_COMBINE_AVG_FLOAT8)
	{
		*sum_type = FLOAT8OID;
		return F_FLOAT8PL;
	}
	*sum_type = INTERVALOID;
	return F_INTERVAL_PL;
}

/*
 * The pieces of the late check of top rows (see upper_scan.c): each node
 * sorts all its copies of rows, ties broken by the sharding key (and the
 * keyspace column), and checks only its top rows for being its own.  NIL
 * when a key column has no default sort order.
 */
static void
late_check_sql(PlannerInfo *root, RsUpperInfo *upper, RsRelInfo *info, Oid relid, List **tiebreak,
			   RsLateCheck **late_check)
{
	StringInfoData inner_select;
	StringInfoData inner_order;
	StringInfoData outer;
	StringInfoData row;
	int			ncolumns = list_length(upper->scan_tlist);
	AttrNumber	keys[2] = {info->key_attnum, info->keyspace_attnum};
	ListCell   *lc;

	*tiebreak = NIL;
	*late_check = NULL;
	for (int i = 0; i < 2; i++)
		if (keys[i] > 0)
		{
			if (!OidIsValid(lookup_type_cache(get_atttype(relid, keys[i]), TYPECACHE_LT_OPR)->lt_opr))
			{
				*tiebreak = NIL;
				return;
			}
			*tiebreak = lappend_int(*tiebreak, keys[i]);
		}

	/*
	 * The key columns of a top row are named as the table names them, so
	 * that the filter of the fan-out (which reads t.<key>) applies to them.
	 */
	initStringInfo(&inner_select);
	initStringInfo(&inner_order);
	initStringInfo(&outer);
	initStringInfo(&row);
	appendStringInfoString(&row, "(SELECT ");
	appendStringInfoString(&outer, " s(");
	for (int i = 1; i <= ncolumns; i++)
		appendStringInfo(&outer, "c%d, ", i);
	foreach(lc, *tiebreak)
	{
		char	   *column = rsfdw_column_name(relid, lfirst_int(lc));
		int			n = foreach_current_index(lc) + 1;

		appendStringInfo(&inner_select, ", t.%s", column);
		appendStringInfo(&inner_order, ", t.%s", column);
		appendStringInfo(&outer, "%srs_key%d", n > 1 ? ", " : "", n);
		appendStringInfo(&row, "%ss.rs_key%d AS %s", n > 1 ? ", " : "", n, column);
	}
	appendStringInfoChar(&row, ')');
	appendStringInfoString(&outer, ") ORDER BY ");
	foreach(lc, upper->pathkeys)
	{
		PathKey    *pk = lfirst(lc);
		Expr	   *expr = ((EquivalenceMember *) list_nth(upper->sort_members, foreach_current_index(lc)))->em_expr;

		appendStringInfo(&outer, "%d%s%s, ", tlist_member(expr, upper->scan_tlist)->resno,
						 pk->pk_strategy == BTLessStrategyNumber ? " ASC" : " DESC",
						 pk->pk_nulls_first ? " NULLS FIRST" : " NULLS LAST");
	}
	foreach(lc, *tiebreak)
		appendStringInfo(&outer, "%s%d", foreach_current_index(lc) ? ", " : "", ncolumns + 1 + foreach_current_index(lc));
	*late_check = palloc(sizeof(RsLateCheck));
	(*late_check)->inner_select = inner_select.data;
	(*late_check)->inner_order = inner_order.data;
	(*late_check)->outer = outer.data;
	(*late_check)->row = row.data;
}

ForeignScan *
rsupper_get_plan(PlannerInfo *root, RelOptInfo *upperrel, ForeignPath *best_path, List *tlist,
				 List *scan_clauses, Plan *outer_plan)
{
	RsUpperInfo *upper = upperrel->fdw_private;
	RelOptInfo *base = upper->base;
	RsRelInfo  *info = base->fdw_private;
	Oid			relid = planner_rt_fetch(base->relid, root)->relid;
	List	   *params = NIL;
	List	   *remote_exprs = NIL;
	List	   *fdw_exprs;
	List	   *qual = NIL;
	StringInfoData pushed;
	ListCell   *lc;
	DeparseContext ctx;
	RsScanPlan *plan = palloc0(sizeof(RsScanPlan));

	initStringInfo(&pushed);

	/*
	 * FROM and WHERE: every condition of the scan, constant ones included
	 * (no gating Result is made above an upper relation's scan).
	 */
	foreach(lc, info->remote_conds)
		remote_exprs = lappend(remote_exprs, lfirst_node(RestrictInfo, lc)->clause);
	rsfdw_deparse_from_where(root, base, relid, remote_exprs, &params, plan);
	plan->relid = relid;
	plan->kind = RS_SCAN_FANOUT;
	plan->upper = true;
	plan->aggregating = upper->stage == UPPERREL_GROUP_AGG;

	rsfdw_deparse_init(&ctx, root, base, base->relid, &params);
	if (upper->stage == UPPERREL_GROUP_AGG)
	{
		int			ngroups = list_length(upper->group_clauses);
		int			column = 0;
		StringInfoData names;
		StringInfoData grouped_by;

		plan->ngroups = ngroups;
		plan->groups = palloc0(sizeof(RsGroupKey) * Max(ngroups, 1));
		plan->aggregates = palloc0(sizeof(RsAggregatePlan) * Max(list_length(upper->scan_tlist), 1));

		initStringInfo(&names);
		initStringInfo(&grouped_by);
		/* SELECT: the GROUP BY expressions, then the partial results of each aggregate */
		foreach(lc, upper->scan_tlist)
		{
			TargetEntry *tle = lfirst_node(TargetEntry, lc);
			int			output = foreach_current_index(lc);

			if (column > 0)
				rsfdw_append(&ctx, ", ");
			if (output < ngroups)
			{
				SortGroupClause *clause = list_nth(upper->group_clauses, output);

				rsfdw_append_expr(&ctx, tle->expr);
				plan->groups[output].equality_operator = clause->eqop;
				plan->groups[output].collation = exprCollation((Node *) tle->expr);
				plan->retrieved = lappend_int(plan->retrieved, output + 1);
				appendStringInfo(&grouped_by, "%s%s", output > 0 ? ", " : "",
								 expr_text(root, base, tle->expr, &params));
				column++;
			}
			else
			{
				Aggref	   *aggref = castNode(Aggref, tle->expr);
				RsCombineKind kind = aggregate_kind(aggref->aggfnoid);
				char	   *name = get_func_name(aggref->aggfnoid);
				Oid			partial_type = aggref->aggtype;
				Oid			function = InvalidOid;

				appendStringInfo(&names, "%s%s", names.len ? ", " : "", name);
				switch (kind)
				{
					case RS_COMBINE_COUNT:
						append_partial_call(&ctx, "count", aggref, NULL);
						partial_type = INT8OID;
						break;
					case RS_COMBINE_SUM:
						append_partial_call(&ctx, "sum", aggref, NULL);
						function = sum_addition(aggref->aggfnoid);
						break;
					case RS_COMBINE_MIN_MAX:
						append_partial_call(&ctx, name, aggref, NULL);
						function = aggregate_sort_operator(aggref->aggfnoid);
						break;
					case RS_COMBINE_AVG_NUMERIC:
					case RS_COMBINE_AVG_FLOAT8:
					case RS_COMBINE_AVG_INTERVAL:
						function = append_avg_partials(&ctx, aggref, kind, &partial_type);
						break;
				}
				{
					RsAggregatePlan *a = &plan->aggregates[plan->naggregates++];

					a->kind = kind;
					a->column = column;
					a->output = output;
					a->partial_type = partial_type;
					a->function = function;
					a->collation = aggref->inputcollid;
				}
				column += (kind == RS_COMBINE_AVG_NUMERIC || kind == RS_COMBINE_AVG_FLOAT8 ||
						   kind == RS_COMBINE_AVG_INTERVAL) ? 2 : 1;
			}
		}
		if (column == 0)
			rsfdw_append(&ctx, "NULL");
		plan->select_tmpl = rsfdw_deparse_finish(&ctx);

		/* GROUP BY the select list's first columns */
		rsfdw_deparse_init(&ctx, root, base, base->relid, &params);
		for (int i = 0; i < ngroups; i++)
			rsfdw_append(&ctx, psprintf("%s%d", i == 0 ? " GROUP BY " : ", ", i + 1));
		plan->tail_tmpl = rsfdw_deparse_finish(&ctx);

		appendStringInfo(&pushed, "aggregates (%s)", names.len ? names.data : "none");
		if (ngroups > 0)
			appendStringInfo(&pushed, " grouped by %s", grouped_by.data);
		appendStringInfoString(&pushed, ", combined here");
		plan->relations = psprintf("Aggregate on %s", rsfdw_relation_name(relid));
		qual = upper->having;
	}
	else
	{
		StringInfoData order_by;
		char	   *node_limit;

		/* SELECT: the columns and sort expressions the merge and the target need */
		foreach(lc, upper->scan_tlist)
		{
			if (foreach_current_index(lc) > 0)
				rsfdw_append(&ctx, ", ");
			rsfdw_append_expr(&ctx, lfirst_node(TargetEntry, lc)->expr);
			plan->retrieved = lappend_int(plan->retrieved, foreach_current_index(lc) + 1);
		}
		if (upper->scan_tlist == NIL)
			rsfdw_append(&ctx, "NULL");
		plan->select_tmpl = rsfdw_deparse_finish(&ctx);
		plan->nsort = list_length(upper->pathkeys);
		plan->sort = palloc0(sizeof(RsSortKey) * Max(plan->nsort, 1));

		/* ORDER BY; the LIMIT (limit + offset) is added when the scan starts */
		initStringInfo(&order_by);
		rsfdw_deparse_init(&ctx, root, base, base->relid, &params);
		foreach(lc, upper->pathkeys)
		{
			PathKey    *pk = lfirst(lc);
			EquivalenceMember *em = list_nth(upper->sort_members, foreach_current_index(lc));
			Expr	   *expr = em->em_expr;
			/* the operator family's own type: anyenum, anyarray for polymorphic classes */
			Oid			type = em->em_datatype;
			Oid			sortop = get_opfamily_member(pk->pk_opfamily, type, type, pk->pk_strategy);
			const char *direction = pk->pk_strategy == BTLessStrategyNumber ? " ASC" : " DESC";
			const char *nulls = pk->pk_nulls_first ? " NULLS FIRST" : " NULLS LAST";

			if (!OidIsValid(sortop))
				elog(ERROR, "ringshard: no sort operator for type %u in operator family %u", type,
					 pk->pk_opfamily);
			rsfdw_append(&ctx, foreach_current_index(lc) == 0 ? " ORDER BY " : ", ");
			rsfdw_append_expr(&ctx, expr);
			rsfdw_append(&ctx, direction);
			rsfdw_append(&ctx, nulls);
			appendStringInfo(&order_by, "%s%s%s%s", order_by.len ? ", " : "",
							 expr_text(root, base, expr, &params), direction, nulls);
			{
				RsSortKey  *key = &plan->sort[foreach_current_index(lc)];

				key->column = tlist_member(expr, upper->scan_tlist)->resno;
				key->sort_operator = sortop;
				key->collation = pk->pk_eclass->ec_collation;
				key->nulls_first = pk->pk_nulls_first;
			}
		}
		plan->tail_tmpl = rsfdw_deparse_finish(&ctx);

		/* each node returns limit + offset rows */
		if (upper->limit_offset == NULL)
			node_limit = limit_text(upper->limit_count);
		else if (IsA(upper->limit_count, Const) && IsA(upper->limit_offset, Const) &&
				 !((Const *) upper->limit_count)->constisnull && !((Const *) upper->limit_offset)->constisnull &&
				 DatumGetInt64(((Const *) upper->limit_count)->constvalue) >= 0 &&
				 DatumGetInt64(((Const *) upper->limit_offset)->constvalue) >= 0)
			node_limit = psprintf(INT64_FORMAT, DatumGetInt64(((Const *) upper->limit_count)->constvalue) +
								  DatumGetInt64(((Const *) upper->limit_offset)->constvalue));
		else
			node_limit = psprintf("%s + %s", limit_text(upper->limit_count), limit_text(upper->limit_offset));
		plan->limit_sql = psprintf(" LIMIT %s", node_limit);
		if (upper->pathkeys != NIL)
			late_check_sql(root, upper, info, relid, &plan->tiebreak, &plan->late);
		if (order_by.len)
			appendStringInfo(&pushed, "ORDER BY %s ", order_by.data);
		appendStringInfo(&pushed, "LIMIT %s", node_limit);
		appendStringInfoString(&pushed, order_by.len ? " on each node, merged here" : " on each node");
		if (upper->limit_offset)
			appendStringInfo(&pushed, "; OFFSET %s here", limit_text(upper->limit_offset));
		plan->relations = rsfdw_relation_name(relid);
	}
	plan->pushed = pushed.data;

	/* fdw_exprs: template parameters, then LIMIT and OFFSET */
	plan->nparams = list_length(params);
	fdw_exprs = list_copy(params);
	if (upper->limit_count)
	{
		fdw_exprs = lappend(fdw_exprs, upper->limit_count);
		plan->limit_index = list_length(fdw_exprs);
	}
	if (upper->limit_offset)
	{
		fdw_exprs = lappend(fdw_exprs, upper->limit_offset);
		plan->offset_index = list_length(fdw_exprs);
	}
	return make_foreignscan(tlist, qual, 0, fdw_exprs, rsfdw_scan_plan_to_private(plan), upper->scan_tlist, NIL,
							outer_plan);
}

/*
 * router.c
 *		Router statements: a SELECT whose every distributed table is fixed to
 *		one key goes whole to one node that holds those rows.
 *
 * A query such as
 *
 *		WITH recent AS (SELECT * FROM orders WHERE customer_id = 42 ...)
 *		SELECT c.name, r.total, rank() OVER (ORDER BY r.total)
 *		  FROM customers c JOIN recent r ON r.customer_id = c.id
 *		 WHERE c.id = 42 AND NOT EXISTS (SELECT 1 FROM refunds f WHERE f.customer_id = c.id)
 *
 * reads, of each table, only the rows of one key (42).  Any node that is a
 * healthy replica of that key for every table holds all of them, so the
 * node can run the statement as it is and its answer is the answer: one
 * round trip instead of a scan per table joined here.  Citus calls this the
 * router planner.  Which keys the tables are fixed to is decided here, from
 * the statement's equalities: key = constant or parameter, key = the key of
 * a table already fixed (in WHERE or an inner join's ON; an outer join's ON
 * fixes its nullable side only), key = an outer query's fixed key
 * (correlated subqueries).  Tables on different rings or maps, or keys of
 * different values, are fine: what counts is a node holding every table's
 * rows of its key.
 *
 * The statement is planned as usual too, and that plan sits below the
 * router node: when no single node holds everything (a replica down, a key
 * whose rows are moving), execution runs it instead, so the answer never
 * depends on where the rows happen to be.  Only what the nodes evaluate as
 * we would goes whole: built-in immutable functions and operators, built-in
 * types, collations the node derives (deparse.c); a stable function such as
 * now() would be the node's own, so such statements take the usual plan.
 * The SQL is PostgreSQL's own deparsing of the statement (deparse.c), with
 * every name qualified and every literal printed under the pinned
 * transmission settings; parameters travel as text with their types.
 */
#include "postgres.h"

#include "access/relation.h"
#include "access/xact.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_type.h"
#include "commands/explain.h"
#include "common/int.h"
#include "common/pg_prng.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/extensible.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/clauses.h"
#include "optimizer/optimizer.h"
#include "optimizer/prep.h"
#include "parser/parse_func.h"
#include "parser/parsetree.h"
#include "rewrite/rewriteManip.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/typcache.h"

#include "fdw/write_locks.h"

#include "commands/ddl.h"
#include "fdw/deparse.h"
#include "fdw/fdw.h"
#include "fdw/node_analysis.h"
#include "remote/connection.h"
#include "remote/transaction.h"
#include "remote/values.h"
#include "routing/hot_keys.h"
#include "routing/placement.h"

/* A distributed table of the statement (one range table entry) and the key value it is fixed to. */
typedef struct RoutedTable
{
	Index		rti;
	Oid			relid;
	AttrNumber	key_attnum;
	Oid			key_type;
	Oid			key_eqop;
	Oid			check_as_user;	/* a view's owner, or InvalidOid: the current user */
	Expr	   *value;			/* of key_type, no columns: constants and parameters */
	bool		subquery_column;	/* not a table: an output column (key_attnum) of a subquery in FROM */
	bool		everywhere;		/* a reference table: every node holds every row, no key need be fixed */
	Query	   *query;			/* the query level whose range table entry rti it is */
} RoutedTable;

/* One query level of the statement, for correlated references. */
typedef struct QueryLevel
{
	Query	   *query;
	struct QueryLevel *outer;
	List	   *tables;			/* RoutedTables */
} QueryLevel;

typedef struct RouterAnalysis
{
	List	   *tables;			/* every RoutedTable of every level */
	bool		failed;
	/* a fan-out: the table of the top level every other is tied to, by this marker for its key */
	Index		tie_rti;
	Expr	   *tie_marker;
} RouterAnalysis;

/* A clause that may fix keys, with the range table entries it may fix. */
typedef struct FixingClause
{
	Expr	   *clause;
	Relids		fixes;			/* the range table entries it may fix ... */
	bool		any;			/* ... or any of the level (WHERE) */
} FixingClause;

/* What the walk over one query level's subqueries carries. */
typedef struct SubqueryWalk
{
	QueryLevel *level;
	RouterAnalysis *analysis;
} SubqueryWalk;

static void analyze_level(Query *query, QueryLevel *outer, List *seeds, RouterAnalysis *analysis);
static bool subquery_walker(Node *node, SubqueryWalk *walk);
static void highest_plan_node_id(Plan *plan, int *highest);
static bool collect_relations_walker(Node *node, void *context);
static bool collect_functions_walker(Node *node, List **funcs);
static bool count_distributed_walker(Node *node, void *context);
static bool has_name(List *names, const char *name);
static bool has_name_array(char **names, int n, const char *name);
struct RouterScanState;
static bool route_fanout(struct RouterScanState *state);
static List *key_holders(TablePlacement *placement, Datum key, bool *moving, List **down);
static void take_fanout_batch(struct RouterScanState *state, int j, struct RemoteResult *out);
static int	count_distributed_tables(Node *node, Relids *top);

/* Strip relabelings and implicit casts. */
static Node *
strip_casts(Node *node)
{
	return strip_implicit_coercions(node);
}

/* The table (or subquery column) of this level whose key is column attnum of entry rti. */
static RoutedTable *
level_key(QueryLevel *level, Index rti, AttrNumber attnum)
{
	ListCell   *lc;

	foreach(lc, level->tables)
	{
		RoutedTable *t = lfirst(lc);

		if (t->rti == rti && t->key_attnum == attnum)
			return t;
	}
	return NULL;
}

/* A column as the table column it stands for (through join aliases), at its own level. */
static Var *
underlying_column(QueryLevel *level, Var *var)
{
	for (int depth = 0; depth < 16; depth++)
	{
		RangeTblEntry *rte;
		Node	   *alias;

		if (var->varlevelsup != 0 || var->varno <= 0 || var->varno > list_length(level->query->rtable))
			return var;
		rte = rt_fetch(var->varno, level->query->rtable);
		if (rte->rtekind != RTE_JOIN || var->varattno <= 0 || var->varattno > list_length(rte->joinaliasvars))
			return var;
		alias = strip_casts(list_nth(rte->joinaliasvars, var->varattno - 1));
		if (alias == NULL || !IsA(alias, Var))
			return var;
		var = (Var *) alias;
	}
	return var;
}

/* The RoutedTable whose key column this expression is (at this level or an outer one), or NULL. */
static RoutedTable *
key_column_table(QueryLevel *level, Node *node, int *levelsup)
{
	QueryLevel *at = level;
	RoutedTable *table;
	Var			column;
	Var		   *var;

	node = strip_casts(node);
	if (node == NULL || !IsA(node, Var))
		return NULL;
	for (Index up = 0; up < ((Var *) node)->varlevelsup; up++)
	{
		at = at->outer;
		if (at == NULL)
			return NULL;
	}
	column = *(Var *) node;
	column.varlevelsup = 0;
	var = underlying_column(at, &column);
	table = level_key(at, var->varno, var->varattno);
	*levelsup = (int) ((Var *) node)->varlevelsup;
	return table;
}

/* Whether an expression (without sublinks) has a column of any query level. */
static bool
contains_column(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, Var))
		return true;
	return expression_tree_walker(node, contains_column, context);
}

/* A value both sides know before the statement runs: constants, parameters, casts of them. */
static bool
is_closed_value(Node *node)
{
	/* no sublink first: the other walkers do not descend into queries */
	return node != NULL && !checkExprHasSubLink(node) && !contains_column(node, NULL) &&
		!contain_volatile_functions(node) && !contain_agg_clause(node) && !contain_window_function(node) &&
		!expression_returns_set(node);
}

/*
 * Collect the clauses of a join tree that may fix keys, with what each may
 * fix: WHERE any table of the level; an inner join's ON both its sides; a
 * LEFT JOIN's only its right side (its left rows all come out), a RIGHT
 * JOIN's only its left, a FULL JOIN's neither.  A join nested on an outer
 * join's side restricts its own rows still: those are the rows that side
 * contributes.
 */
static void
collect_clauses(Node *jtnode, List **out)
{
	ListCell   *lc;

	if (jtnode == NULL || IsA(jtnode, RangeTblRef))
		return;
	if (IsA(jtnode, FromExpr))
	{
		FromExpr   *f = (FromExpr *) jtnode;

		foreach(lc, make_ands_implicit((Expr *) f->quals))
		{
			FixingClause *fc = palloc0(sizeof(FixingClause));

			fc->clause = lfirst(lc);
			fc->any = true;
			*out = lappend(*out, fc);
		}
		foreach(lc, f->fromlist)
			collect_clauses(lfirst(lc), out);
		return;
	}
	if (IsA(jtnode, JoinExpr))
	{
		JoinExpr   *j = (JoinExpr *) jtnode;
		Relids		on_fixes = NULL;

		switch (j->jointype)
		{
			case JOIN_INNER:
				on_fixes = bms_union(get_relids_in_jointree(j->larg, false), get_relids_in_jointree(j->rarg, false));
				break;
			case JOIN_LEFT:
				on_fixes = get_relids_in_jointree(j->rarg, false);
				break;
			case JOIN_RIGHT:
				on_fixes = get_relids_in_jointree(j->larg, false);
				break;
			default:
				break;
		}
		if (on_fixes != NULL)
			foreach(lc, make_ands_implicit((Expr *) j->quals))
			{
				FixingClause *fc = palloc0(sizeof(FixingClause));

				fc->clause = lfirst(lc);
				fc->fixes = on_fixes;
				*out = lappend(*out, fc);
			}
		collect_clauses(j->larg, out);
		collect_clauses(j->rarg, out);
	}
}

static bool
may_fix(FixingClause *fc, Index rti)
{
	return fc->any || bms_is_member((int) rti, fc->fixes);
}

/*
 * One side of an equality is a key of this level's table, the other a
 * value or a key already fixed: fix it.  Returns whether it fixed one.
 */
static bool
fix_by(QueryLevel *level, FixingClause *fc, Node *target, Node *other, bool target_on_left, Oid opno)
{
	int			levelsup = 0;
	RoutedTable *table = key_column_table(level, target, &levelsup);
	RoutedTable *source;
	Oid			value_type;
	Expr	   *value;

	if (table == NULL || levelsup != 0 || table->value != NULL || !may_fix(fc, table->rti))
		return false;
	if (!rsfdw_is_key_equality(opno, table->key_eqop, table->key_type, target_on_left, &value_type))
		return false;
	if (is_closed_value(other))
		value = (Expr *) other;
	else
	{
		int			other_levelsup = 0;

		source = key_column_table(level, other, &other_levelsup);
		if (source == NULL || source->value == NULL || source->key_type != value_type)
			return false;
		value = source->value;
	}
	table->value = rsfdw_value_as_key(value, value_type, table->key_type, false);
	return true;
}

/*
 * A subquery in FROM whose output rows are its input rows filtered, joined
 * and projected (a view, a derived table): a condition on an output column
 * that is a table's key restricts that table's rows.  Not so through
 * grouping, DISTINCT, LIMIT, window functions or set operations, which
 * read rows the condition does not keep.
 */
static bool
is_simple_subquery(Query *query)
{
	return query->commandType == CMD_SELECT && !query->hasAggs && !query->hasWindowFuncs &&
		!query->hasTargetSRFs && query->groupClause == NIL && query->groupingSets == NIL &&
		query->havingQual == NULL && query->distinctClause == NIL && query->limitCount == NULL &&
		query->limitOffset == NULL && query->setOperations == NULL;
}

/* The output columns of this level's simple subqueries in FROM, to be fixed like keys. */
static void
add_subquery_columns(QueryLevel *level)
{
	ListCell   *lc;
	Index		rti = 0;

	foreach(lc, level->query->rtable)
	{
		RangeTblEntry *rte = lfirst(lc);
		ListCell   *lt;

		rti++;
		if (rte->rtekind != RTE_SUBQUERY || rte->lateral || !is_simple_subquery(rte->subquery))
			continue;
		foreach(lt, rte->subquery->targetList)
		{
			TargetEntry *tle = lfirst(lt);
			RoutedTable *column;
			Node	   *expr = strip_casts((Node *) tle->expr);

			if (tle->resjunk || expr == NULL || !IsA(expr, Var))
				continue;
			column = palloc0(sizeof(RoutedTable));
			column->rti = rti;
			column->query = level->query;
			column->key_attnum = tle->resno;
			column->key_type = exprType((Node *) tle->expr);
			column->key_eqop = lookup_type_cache(column->key_type, TYPECACHE_EQ_OPR)->eq_opr;
			column->subquery_column = true;
			if (OidIsValid(column->key_eqop))
				level->tables = lappend(level->tables, column);
		}
	}
}

/*
 * The subquery's tables fixed by the outer query's conditions on its output
 * columns (seeds: the outer level's fixed subquery columns of this rti).
 */
static void
apply_seeds(QueryLevel *level, List *seeds)
{
	ListCell   *lc;

	foreach(lc, seeds)
	{
		RoutedTable *seed = lfirst(lc);
		TargetEntry *tle = get_tle_by_resno(level->query->targetList, seed->key_attnum);
		int			levelsup = 0;
		RoutedTable *table;

		if (tle == NULL || exprType((Node *) tle->expr) != seed->key_type)
			continue;
		table = key_column_table(level, (Node *) tle->expr, &levelsup);
		if (table == NULL || levelsup != 0 || table->value != NULL || table->key_type != seed->key_type)
			continue;
		table->value = seed->value;
	}
}

/* Fix this level's tables from its clauses, then analyze the queries below it. */
static void
analyze_level(Query *query, QueryLevel *outer, List *seeds, RouterAnalysis *analysis)
{
	QueryLevel	level = {query, outer, NIL};
	List	   *clauses = NIL;
	ListCell   *lc;
	Index		rti = 0;
	bool		changed;

	foreach(lc, query->rtable)
	{
		RangeTblEntry *rte = lfirst(lc);

		rti++;
		if (rte->rtekind != RTE_RELATION)
			continue;
		if (rte->relkind == RELKIND_VIEW && !rte->inFromCl)
			continue;			/* a view's own entry, kept for its privileges: the view is a subquery */
		if (rte->relkind == RELKIND_FOREIGN_TABLE && is_distributed_table(rte->relid))
		{
			RoutedTable *table = palloc0(sizeof(RoutedTable));
			AttrNumber	keyspace_attnum;

			/* a child table's rows are not in the nodes' table (relhassubclass may outlive the children) */
			if (rte->inh && has_subclass(rte->relid) && find_inheritance_children(rte->relid, NoLock) != NIL)
			{
				analysis->failed = true;
				return;
			}

			table->rti = rti;
			table->query = query;
			table->relid = rte->relid;
			table->check_as_user = rte->checkAsUser;
			table->everywhere = rsfdw_table_on_every_node(rte->relid);
			rsfdw_table_info(rte->relid, &table->key_attnum, &table->key_type, &keyspace_attnum);
			table->key_eqop = lookup_type_cache(table->key_type, TYPECACHE_EQ_OPR)->eq_opr;
			if (keyspace_attnum > 0 || !OidIsValid(table->key_eqop))
			{
				analysis->failed = true;	/* a keyspace column: the key alone does not place a row */
				return;
			}
			level.tables = lappend(level.tables, table);
		}
		else
		{
			analysis->failed = true;	/* a local table: not on the nodes */
			return;
		}
	}
	apply_seeds(&level, seeds);
	add_subquery_columns(&level);
	if (outer == NULL && analysis->tie_marker != NULL)
	{
		/* a fan-out: the driving table's key is the one every other table's must equal */
		RoutedTable *driver = NULL;

		foreach(lc, level.tables)
			if (((RoutedTable *) lfirst(lc))->rti == analysis->tie_rti &&
				!((RoutedTable *) lfirst(lc))->subquery_column)
				driver = lfirst(lc);
		if (driver == NULL)
		{
			analysis->failed = true;
			return;
		}
		driver->value = analysis->tie_marker;
	}

	collect_clauses((Node *) query->jointree, &clauses);
	do
	{
		changed = false;
		foreach(lc, clauses)
		{
			FixingClause *fc = lfirst(lc);
			OpExpr	   *op;

			if (!IsA(fc->clause, OpExpr) || list_length(((OpExpr *) fc->clause)->args) != 2)
				continue;
			op = (OpExpr *) fc->clause;
			if (fix_by(&level, fc, linitial(op->args), lsecond(op->args), true, op->opno) ||
				fix_by(&level, fc, lsecond(op->args), linitial(op->args), false, op->opno))
				changed = true;
		}
	} while (changed);

	foreach(lc, level.tables)
	{
		RoutedTable *table = lfirst(lc);

		if (table->subquery_column)
			continue;
		if (table->value == NULL && !table->everywhere)
		{
			analysis->failed = true;
			return;
		}
		analysis->tables = lappend(analysis->tables, table);
	}

	/*
	 * The queries below this level: subqueries in FROM (with what this
	 * level's conditions fix of their output), then those in functions and
	 * VALUES of FROM, in WITH, and sublinks anywhere.
	 */
	{
		SubqueryWalk walk = {&level, analysis};

		rti = 0;
		foreach(lc, query->rtable)
		{
			RangeTblEntry *rte = lfirst(lc);
			List	   *subquery_seeds = NIL;
			ListCell   *lt;

			rti++;
			if (analysis->failed)
				return;
			switch (rte->rtekind)
			{
				case RTE_SUBQUERY:
					foreach(lt, level.tables)
					{
						RoutedTable *column = lfirst(lt);

						if (column->subquery_column && column->rti == rti && column->value != NULL)
							subquery_seeds = lappend(subquery_seeds, column);
					}
					analyze_level(rte->subquery, &level, subquery_seeds, analysis);
					break;
				case RTE_FUNCTION:
					(void) subquery_walker((Node *) rte->functions, &walk);
					break;
				case RTE_VALUES:
					(void) subquery_walker((Node *) rte->values_lists, &walk);
					break;
				default:
					break;
			}
		}
		if (!analysis->failed)
			(void) query_tree_walker(query, subquery_walker, &walk, QTW_IGNORE_RANGE_TABLE);
	}
}

/* Walks one query level's expressions and analyzes each query right below it. */
static bool
subquery_walker(Node *node, SubqueryWalk *walk)
{
	if (node == NULL || walk->analysis->failed)
		return walk->analysis->failed;
	if (IsA(node, Query))
	{
		analyze_level((Query *) node, walk->level, NIL, walk->analysis);
		return walk->analysis->failed;
	}
	return expression_tree_walker(node, subquery_walker, (void *) walk);
}

/* Whether a range table, at any depth, holds a distributed table. */
static bool
has_distributed_walker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, Query))
	{
		ListCell   *lc;

		foreach(lc, ((Query *) node)->rtable)
		{
			RangeTblEntry *rte = lfirst(lc);

			if (rte->rtekind == RTE_RELATION && rte->relkind == RELKIND_FOREIGN_TABLE &&
				is_distributed_table(rte->relid))
				return true;
		}
		return query_tree_walker((Query *) node, has_distributed_walker, context, 0);
	}
	return expression_tree_walker(node, has_distributed_walker, context);
}

/*
 * Whether the statement may be a router statement: a SELECT (not a
 * scrollable cursor: the router returns rows forwards only) of distributed
 * tables whose parts all ship.  Cheap checks first: most statements are not.
 */
bool
rsfdw_router_candidate(Query *parse, int cursor_options)
{
	ListCell   *lc;

	if (!ringshard_router_statements || parse->commandType != CMD_SELECT || parse->utilityStmt != NULL ||
		(cursor_options & CURSOR_OPT_SCROLL) || parse->rowMarks != NIL)
		return false;
	if (!has_distributed_walker((Node *) parse, NULL))
		return false;
	/* the output must be readable here from its text: no anonymous records */
	foreach(lc, parse->targetList)
	{
		TargetEntry *tle = lfirst(lc);
		Oid			type = exprType((Node *) tle->expr);

		if (tle->resjunk)
			continue;
		if (type_is_rowtype(type) || get_typtype(type) == TYPTYPE_PSEUDO ||
			(type_is_array(type) && type_is_rowtype(get_element_type(type))))
			return false;
	}
	return rsfdw_query_unshippable_reason(parse) == NULL;
}

/*
 * custom_private: [0] node SQL, [1] the original ids of its parameters,
 * [2] relids, [3] output attnums of the plan below, [4] the role to read as
 * (InvalidOid: the current user)
 */
static CustomScanMethods router_scan_methods;

/*
 * Fan-out router statements: a SELECT whose distributed tables are all on
 * one ring and all tied by key equalities to one driving table of the top
 * level (joins on the key, correlated subqueries on the key; reference
 * tables anywhere) goes whole to every node, each computing it over the keys
 * it serves: the driving table filtered by reads_here, as a fan-out of one
 * table is.  Every other table's rows join only rows of the driver's key,
 * which all sit on the node that serves it, so the nodes' answers together
 * are the answer, if the top level never combines rows of two keys: no
 * aggregate unless grouped by the key, no DISTINCT, window function or set
 * operation.  ORDER BY and LIMIT are the exception that is cheap to keep:
 * each node sorts its rows and keeps its first LIMIT + OFFSET, and a Sort
 * and a Limit here, above the router, take the first of them all
 * (top_of_fanout).
 */

/* The leftmost table of a join tree not on the nullable side of an outer join, or 0. */
static Index
driving_table(Node *jtnode)
{
	if (jtnode == NULL)
		return 0;
	if (IsA(jtnode, RangeTblRef))
		return ((RangeTblRef *) jtnode)->rtindex;
	if (IsA(jtnode, FromExpr))
		return ((FromExpr *) jtnode)->fromlist != NIL ? driving_table(linitial(((FromExpr *) jtnode)->fromlist)) : 0;
	if (IsA(jtnode, JoinExpr))
	{
		JoinExpr   *j = (JoinExpr *) jtnode;

		switch (j->jointype)
		{
			case JOIN_INNER:
			case JOIN_LEFT:
				return driving_table(j->larg);
			case JOIN_RIGHT:
				return driving_table(j->rarg);
			default:
				return 0;
		}
	}
	return 0;
}

/* Whether the top level keeps the rows of each key apart (see above). */
static bool
keeps_keys_apart(Query *query)
{
	return query->commandType == CMD_SELECT && !query->hasWindowFuncs && !query->hasTargetSRFs &&
		query->distinctClause == NIL && query->limitOption != LIMIT_OPTION_WITH_TIES &&
		query->setOperations == NULL && query->groupingSets == NIL &&
		(query->groupClause != NIL || (!query->hasAggs && query->havingQual == NULL));
}

/*
 * Whether GROUP BY has the driving table's key.  Not another tied table's:
 * on the nullable side of an outer join it is NULL for the driver's rows
 * without a match, a group each node would return once.
 */
static bool
groups_by_tied_key(Query *query, RouterAnalysis *analysis)
{
	QueryLevel	level = {query, NULL, NIL};
	ListCell   *lc;

	foreach(lc, analysis->tables)
		if (((RoutedTable *) lfirst(lc))->query == query)
			level.tables = lappend(level.tables, lfirst(lc));
	foreach(lc, query->groupClause)
	{
		SortGroupClause *sgc = lfirst_node(SortGroupClause, lc);
		TargetEntry *tle = get_sortgroupclause_tle(sgc, query->targetList);
		int			levelsup = 0;
		RoutedTable *table = key_column_table(&level, (Node *) tle->expr, &levelsup);

		if (table && levelsup == 0 && table->value == analysis->tie_marker && table->rti == analysis->tie_rti)
			return true;
	}
	return false;
}

/*
 * The partial statement of a fan-out aggregate (fanout_aggregate.c) keeps
 * no key apart: its groups and aggregates (or its distinct rows) are
 * combined above the router.
 * It has nothing on top that the combining would have to come first for.
 */
static bool
is_partial_aggregate(Query *query)
{
	return query->commandType == CMD_SELECT && !query->hasWindowFuncs && !query->hasTargetSRFs &&
		!query->hasDistinctOn && query->setOperations == NULL && query->groupingSets == NIL &&
		query->havingQual == NULL && query->sortClause == NIL && query->limitCount == NULL &&
		query->limitOffset == NULL;
}

/*
 * Whether the statement is a fan-out router statement: its analysis (with
 * the driving table's key tied) in *analysis, every table tied or a
 * reference table, all tied tables on one ring.  combined_here: the
 * statement is the partial one of a fan-out aggregate, whose rows of
 * different keys are combined above the router.
 */
static bool
analyze_fanout(Query *query, RouterAnalysis *analysis, bool combined_here)
{
	char	   *ring = NULL;
	ListCell   *lc;
	Index		driver = driving_table((Node *) query->jointree);

	if (driver == 0 || !(combined_here ? is_partial_aggregate(query) : keeps_keys_apart(query)))
		return false;
	memset(analysis, 0, sizeof(*analysis));
	analysis->tie_rti = driver;
	analysis->tie_marker = (Expr *) makeNullConst(BOOLOID, -1, InvalidOid);
	analyze_level(query, NULL, NIL, analysis);
	if (analysis->failed || analysis->tables == NIL)
		return false;
	foreach(lc, analysis->tables)
	{
		RoutedTable *table = lfirst(lc);
		char	   *table_ring;

		if (table->everywhere)
			continue;			/* a reference table: every node has all of it, tied or not */
		if (table->value != analysis->tie_marker)
			return false;		/* fixed to a value: its rows are not on every node */
		table_ring = rsfdw_table_ring(table->relid);
		if (table_ring == NULL || (ring != NULL && strcmp(ring, table_ring) != 0))
			return false;		/* a map, or another ring: the same key is elsewhere */
		ring = table_ring;
	}
	if (!combined_here && query->groupClause != NIL && !groups_by_tied_key(query, analysis))
		return false;
	return true;
}

/* The reads_here filter of the driving table, added to the top level's WHERE; parameters -1 (excluded) and -2 (version). */
static void
add_fanout_filter(Query *query, RoutedTable *driver)
{
	Oid			argtypes[4] = {REGCLASSOID, ANYOID, TEXTARRAYOID, INT8OID};
	Oid			funcid = LookupFuncName(list_make2(makeString("ringshard_worker"), makeString("reads_here")), 4,
										argtypes, false);
	Param	   *excluded = makeNode(Param);
	Param	   *version = makeNode(Param);
	FuncExpr   *filter;
	Relation	rel = relation_open(driver->relid, NoLock);
	Form_pg_attribute key = TupleDescAttr(RelationGetDescr(rel), driver->key_attnum - 1);

	excluded->paramkind = PARAM_EXTERN;
	excluded->paramid = -1;
	excluded->paramtype = TEXTARRAYOID;
	excluded->paramtypmod = -1;
	excluded->location = -1;
	version->paramkind = PARAM_EXTERN;
	version->paramid = -2;
	version->paramtype = INT8OID;
	version->paramtypmod = -1;
	version->location = -1;
	filter = makeFuncExpr(funcid, BOOLOID,
						  list_make4(makeConst(REGCLASSOID, -1, InvalidOid, sizeof(Oid), ObjectIdGetDatum(driver->relid),
											   false, true),
									 makeVar(driver->rti, driver->key_attnum, key->atttypid, key->atttypmod,
											 key->attcollation, 0),
									 excluded, version),
						  InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL);
	relation_close(rel, NoLock);
	query->jointree->quals = (Node *) make_and_qual(query->jointree->quals, (Node *) filter);
}

/*
 * A fan-out's ORDER BY and LIMIT.  The usual plan ends in a Limit (if the
 * statement has one) above the rest: that rest becomes the plan below the
 * router (its fallback), and the Limit goes above, so OFFSET applies once
 * on either path.  A sort key the statement does not return (a junk
 * column) is returned by the nodes too, and dropped at the top: its
 * position among the router's columns in sort_columns like any other.
 * False: the statement keeps the usual plan.
 */
/* Whether the router returns a column of the plan below: the statement's, or a sort key it does not return. */
static bool
router_returns(TargetEntry *tle, FanoutTop *top)
{
	return !tle->resjunk || bms_is_member(tle->resno, top->returned_junk);
}

static bool
top_of_fanout(Query *query, Plan **below, FanoutTop *top)
{
	ListCell   *lc;
	int			i = 0;

	memset(top, 0, sizeof(*top));
	if (query->limitCount != NULL || query->limitOffset != NULL)
	{
		if (!IsA(*below, Limit) || (*below)->lefttree == NULL)
			return false;
		top->limit = (Limit *) *below;
		*below = (*below)->lefttree;
	}
	/* the sort keys the statement does not return: the nodes' statement returns them */
	foreach(lc, query->sortClause)
	{
		TargetEntry *tle = get_sortgroupclause_tle(lfirst_node(SortGroupClause, lc), query->targetList);

		if (tle->resjunk)
		{
			tle->resjunk = false;
			top->returned_junk = bms_add_member(top->returned_junk, tle->resno);
		}
	}
	top->nsort = list_length(query->sortClause);
	top->sort_columns = palloc0(sizeof(AttrNumber) * Max(top->nsort, 1));
	top->sort_operators = palloc0(sizeof(Oid) * Max(top->nsort, 1));
	top->collations = palloc0(sizeof(Oid) * Max(top->nsort, 1));
	top->nulls_first = palloc0(sizeof(bool) * Max(top->nsort, 1));
	foreach(lc, query->sortClause)
	{
		SortGroupClause *sgc = lfirst_node(SortGroupClause, lc);
		ListCell   *tc;
		int			position = 0;

		foreach(tc, (*below)->targetlist)
		{
			TargetEntry *tle = lfirst(tc);

			if (!router_returns(tle, top))
				continue;
			position++;
			if (tle->ressortgroupref == sgc->tleSortGroupRef)
			{
				top->sort_columns[i] = position;
				top->collations[i] = exprCollation((Node *) tle->expr);
				break;
			}
		}
		if (top->sort_columns[i] == 0 || !OidIsValid(sgc->sortop))
			return false;		/* sorted by what the plan below does not compute */
		top->sort_operators[i] = sgc->sortop;
		top->nulls_first[i] = sgc->nulls_first;
		i++;
	}

	/* each node: its first LIMIT + OFFSET rows, in the statement's order */
	if (query->limitOffset != NULL)
	{
		Const	   *count;
		Const	   *offset;
		int64		sum;

		/* the parser's casts to bigint are folded only by the planner */
		if (query->limitCount != NULL)
			query->limitCount = eval_const_expressions(NULL, query->limitCount);
		query->limitOffset = eval_const_expressions(NULL, query->limitOffset);
		count = (Const *) query->limitCount;
		offset = (Const *) query->limitOffset;

		if (count != NULL && IsA(count, Const) && IsA(offset, Const) && !count->constisnull &&
			!offset->constisnull && count->consttype == INT8OID && offset->consttype == INT8OID &&
			!pg_add_s64_overflow(DatumGetInt64(count->constvalue), DatumGetInt64(offset->constvalue), &sum))
			query->limitCount = (Node *) makeConst(INT8OID, -1, InvalidOid, sizeof(int64), Int64GetDatum(sum),
												   false, FLOAT8PASSBYVAL);
		else if (count != NULL)
			query->limitCount = (Node *) makeFuncExpr(F_INT8PL, INT8OID,
													  list_make2(query->limitCount, query->limitOffset),
													  InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL);
		query->limitOffset = NULL;
	}
	return true;
}

/*
 * A target list that passes on every column of the plan below as it is
 * (junk stays junk, sort references stay): for the nodes stacked above a
 * router (here and fanout_aggregate.c).
 */
List *
rsfdw_pass_through_tlist(List *below_tlist)
{
	List	   *tlist = NIL;
	ListCell   *lc;

	foreach(lc, below_tlist)
	{
		TargetEntry *tle = lfirst(lc);
		Var		   *var = makeVar(OUTER_VAR, tle->resno, exprType((Node *) tle->expr),
								  exprTypmod((Node *) tle->expr), exprCollation((Node *) tle->expr), 0);
		TargetEntry *passed = makeTargetEntry((Expr *) var, tle->resno, tle->resname, tle->resjunk);

		passed->ressortgroupref = tle->ressortgroupref;
		tlist = lappend(tlist, passed);
	}
	return tlist;
}

/* The Sort and Limit above a fan-out router (or its Agg: fanout_aggregate.c); returns the new top of the plan. */
Plan *
rsfdw_add_fanout_top(Plan *router, FanoutTop *top, int *next_plan_node_id)
{
	Plan	   *plan = router;

	if (top->nsort > 0)
	{
		Sort	   *sort = makeNode(Sort);

		sort->plan.targetlist = rsfdw_pass_through_tlist(plan->targetlist);
		sort->plan.lefttree = plan;
		sort->plan.startup_cost = plan->total_cost;
		sort->plan.total_cost = plan->total_cost;
		sort->plan.plan_rows = plan->plan_rows;
		sort->plan.plan_width = plan->plan_width;
		sort->plan.plan_node_id = (*next_plan_node_id)++;
		sort->numCols = top->nsort;
		sort->sortColIdx = top->sort_columns;
		sort->sortOperators = top->sort_operators;
		sort->collations = top->collations;
		sort->nullsFirst = top->nulls_first;
		plan = (Plan *) sort;
	}
	if (top->limit != NULL)
	{
		Limit	   *limit = makeNode(Limit);

		limit->plan.targetlist = rsfdw_pass_through_tlist(plan->targetlist);
		limit->plan.lefttree = plan;
		limit->plan.startup_cost = plan->startup_cost;
		limit->plan.total_cost = plan->total_cost;
		limit->plan.plan_rows = top->limit->plan.plan_rows;
		limit->plan.plan_width = plan->plan_width;
		limit->plan.plan_node_id = (*next_plan_node_id)++;
		limit->limitOffset = top->limit->limitOffset;
		limit->limitCount = top->limit->limitCount;
		limit->limitOption = top->limit->limitOption;
		plan = (Plan *) limit;
	}
	return plan;
}

static PlannedStmt *plan_router(Query *original, PlannedStmt *planned, bool combined_here);

/*
 * Wrap the planned statement in a router node when every distributed table
 * of the statement (planned as `original`, a copy taken before planning) is
 * fixed to one key, or tied to one driving table's key (a fan-out); else
 * return it as it is.
 */
PlannedStmt *
rsfdw_plan_router(Query *original, PlannedStmt *planned)
{
	return plan_router(original, planned, false);
}

/*
 * The same for the partial statement of a fan-out aggregate
 * (fanout_aggregate.c), whose rows the caller combines above the router:
 * whether its plan's top is now the router.
 */
bool
rsfdw_plan_partial_router(Query *partial, PlannedStmt *planned)
{
	Plan	   *before = planned->planTree;

	return plan_router(partial, planned, true)->planTree != before;
}

/* How many distributed tables a statement reads, at every level. */
int
rsfdw_count_distributed_tables(Query *query)
{
	return count_distributed_tables((Node *) query, NULL);
}

/* rsfdw_highest_plan_node_id: the highest plan_node_id of a statement's plans (its new nodes go above). */
int
rsfdw_highest_plan_node_id(PlannedStmt *planned)
{
	int			highest = -1;
	ListCell   *lc;

	highest_plan_node_id(planned->planTree, &highest);
	foreach(lc, planned->subplans)
		highest_plan_node_id(lfirst(lc), &highest);
	return highest;
}

static PlannedStmt *
plan_router(Query *original, PlannedStmt *planned, bool combined_here)
{
	RouterAnalysis analysis = {NIL, false};
	CustomScan *router;
	Plan	   *below = planned->planTree;
	List	   *relids = NIL;
	List	   *values = NIL;
	List	   *param_ids;
	List	   *computed;
	List	   *output_attnums = NIL;
	List	   *scan_tlist = NIL;
	List	   *tlist = NIL;
	ListCell   *lc;
	char	   *sql;
	int			driver = -1;	/* a fan-out: the driving table's index in relids */
	FanoutTop	fanout_top = {0};

	/* a statement the usual plan already sends whole, in one scan, gains nothing */
	if (IsA(below, ForeignScan) && planned->subplans == NIL)
		return planned;
	analyze_level(original, NULL, NIL, &analysis);
	if (analysis.failed && !analyze_fanout(original, &analysis, combined_here))
		return planned;
	if (analysis.tables == NIL)
		return planned;
	foreach(lc, analysis.tables)
	{
		RoutedTable *table = lfirst(lc);

		/*
		 * The node is asked as one role: the one each table would be read
		 * as (a view's owner for the tables in the view).  Tables read as
		 * different roles take the usual plan.
		 */
		if (table->check_as_user != ((RoutedTable *) linitial(analysis.tables))->check_as_user)
			return planned;
		if (analysis.tie_marker != NULL && table->value == analysis.tie_marker)
		{
			if (table->query == original && table->rti == analysis.tie_rti)
				driver = list_length(relids);
			relids = lappend_oid(relids, table->relid);
			values = lappend(values, NULL);		/* a fan-out: every key */
			continue;
		}
		relids = lappend_oid(relids, table->relid);
		values = lappend(values, table->value);
	}
	if (analysis.tie_marker != NULL)
	{
		if (driver < 0)
			return planned;
		if (!top_of_fanout(original, &below, &fanout_top))
			return planned;
		add_fanout_filter(original, list_nth(analysis.tables, driver));
	}
	sql = rsfdw_router_sql_text(original, &param_ids, &computed);

	/*
	 * the rows the statement returns: the plan's target list without its
	 * junk columns, but for the sort keys the top sorts by (then dropped)
	 */
	foreach(lc, below->targetlist)
	{
		TargetEntry *tle = lfirst(lc);
		Var		   *from_below;
		Var		   *from_scan;

		if (!router_returns(tle, &fanout_top))
			continue;
		output_attnums = lappend_int(output_attnums, tle->resno);
		from_below = makeVar(OUTER_VAR, tle->resno, exprType((Node *) tle->expr), exprTypmod((Node *) tle->expr),
							 exprCollation((Node *) tle->expr), 0);
		scan_tlist = lappend(scan_tlist, makeTargetEntry((Expr *) from_below, list_length(scan_tlist) + 1,
														 tle->resname, false));
		from_scan = makeVar(INDEX_VAR, list_length(scan_tlist), from_below->vartype, from_below->vartypmod,
							from_below->varcollid, 0);
		tlist = lappend(tlist, makeTargetEntry((Expr *) from_scan, list_length(tlist) + 1, tle->resname,
											   tle->resjunk));
	}

	router = makeNode(CustomScan);
	router->scan.plan.targetlist = tlist;
	router->scan.plan.lefttree = below;
	router->scan.plan.startup_cost = below->startup_cost;
	router->scan.plan.total_cost = below->total_cost;
	router->scan.plan.plan_rows = below->plan_rows;
	router->scan.plan.plan_width = below->plan_width;
	router->scan.plan.parallel_safe = false;
	router->scan.scanrelid = 0;
	router->custom_scan_tlist = scan_tlist;
	/* the keys' values, then the values computed here for the node's parameters */
	router->custom_exprs = list_concat(values, computed);
	router->custom_private = list_make5(makeString(sql), param_ids, relids, output_attnums,
										list_make1_oid(((RoutedTable *) linitial(analysis.tables))->check_as_user));
	{
		List	   *funcs = NIL;

		(void) query_tree_walker(original, collect_functions_walker, (void *) &funcs, 0);
		router->custom_private = lappend(router->custom_private, funcs);
	}
	router->custom_private = lappend(router->custom_private, list_make1_int(driver));
	router->methods = &router_scan_methods;

	/* plan_node_id: unique in the statement; the new top takes one past the highest */
	{
		int			highest = -1;

		highest_plan_node_id(below, &highest);
		foreach(lc, planned->subplans)
			highest_plan_node_id(lfirst(lc), &highest);
		router->scan.plan.plan_node_id = highest + 1;
		highest += 2;
		planned->planTree = rsfdw_add_fanout_top((Plan *) router, &fanout_top, &highest);
	}
	return planned;
}

/* The highest plan_node_id in a plan tree. */
static void
highest_plan_node_id(Plan *plan, int *highest)
{
	ListCell   *lc;

	if (plan == NULL)
		return;
	*highest = Max(*highest, plan->plan_node_id);
	highest_plan_node_id(plan->lefttree, highest);
	highest_plan_node_id(plan->righttree, highest);
	switch (nodeTag(plan))
	{
		case T_Append:
			foreach(lc, ((Append *) plan)->appendplans)
				highest_plan_node_id(lfirst(lc), highest);
			break;
		case T_MergeAppend:
			foreach(lc, ((MergeAppend *) plan)->mergeplans)
				highest_plan_node_id(lfirst(lc), highest);
			break;
		case T_BitmapAnd:
			foreach(lc, ((BitmapAnd *) plan)->bitmapplans)
				highest_plan_node_id(lfirst(lc), highest);
			break;
		case T_BitmapOr:
			foreach(lc, ((BitmapOr *) plan)->bitmapplans)
				highest_plan_node_id(lfirst(lc), highest);
			break;
		case T_SubqueryScan:
			highest_plan_node_id(((SubqueryScan *) plan)->subplan, highest);
			break;
		case T_CustomScan:
			foreach(lc, ((CustomScan *) plan)->custom_plans)
				highest_plan_node_id(lfirst(lc), highest);
			break;
		default:
			break;
	}
}

/* Execution */

typedef struct RouterScanState
{
	CustomScanState css;
	char	   *sql;
	List	   *param_ids;
	List	   *relids;
	List	   *output_attnums;
	Oid			userid;
	List	   *value_states;
	List	   *computed_states;	/* values computed here for the node's parameters */
	char	  **nodes;			/* the nodes that hold every table's rows of its key, healthy ones */
	int			nnodes;
	bool		routed;			/* nodes were worked out (not in a plain EXPLAIN with unknown values) */
	/* the tables' keys, noted as hot keys once a node answers (a fallback's scans note their own) */
	TablePlacement *noted_placements;
	Datum	   *noted_keys;
	int			nnoted;
	bool		fallback;		/* no node holds them all: the plan below runs */
	int			eflags;
	RemoteCodec *codecs;
	Oid		   *output_types;	/* of the node's answer's columns */
	PGresult   *result;
	int			next;
	const char *answered_by;
	double		answer_ms;		/* from sending the statement to its answer */
	/* a fan-out: the driving table (index in relids), every node's answer, the one being returned */
	int			driver;
	PGresult  **results;		/* each node's current batch */
	char	  **answered;
	RemoteConnection **streams;	/* each node's link, its cursor open */
	bool	   *exhausted;		/* its cursor has returned its last row */
	char		cursor[32];
	int			nresults;
	int			current;
	NodeAnalyses *analysis;		/* EXPLAIN ANALYZE of a fan-out: by answer, else NULL */
} RouterScanState;

static int
compare_names(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

/* Node names for EXPLAIN, in name order (reads spread over them in random order). */
static char *
sorted_node_names(char **nodes, int n)
{
	char	  **sorted = palloc(sizeof(char *) * Max(n, 1));
	StringInfoData buf;

	memcpy(sorted, nodes, sizeof(char *) * n);
	qsort(sorted, n, sizeof(char *), compare_names);
	initStringInfo(&buf);
	for (int i = 0; i < n; i++)
		appendStringInfo(&buf, "%s%s", i ? ", " : "", sorted[i]);
	return buf.data;
}

/*
 * The healthy nodes of a reference table (every node holds every row), or
 * NIL with *usable false when the table is not laid out so now: its ring
 * has more nodes than copies, or a node that joined has not got its copy yet.
 */
static List *
every_node_holders(TablePlacement *placement, bool *usable, List **down)
{
	List	   *up = NIL;

	*usable = placement->ring != NULL && placement->ring->replication_factor >= placement_node_count(placement) &&
		!placement_is_moving(placement);
	if (!*usable)
		return NIL;
	for (int i = 0; i < placement_node_count(placement); i++)
	{
		if (placement_node_up(placement, i))
			up = lappend(up, placement_node_name(placement, i));
		else if (down)
			*down = lappend(*down, placement_node_name(placement, i));
	}
	return up;
}

/*
 * The healthy nodes that hold every table's rows of its key: for each
 * table its key's replicas (where rows are moving, the old replicas that
 * still hold them), intersected.  False when some key's rows cannot be
 * placed (they are on nodes that left): the plan below says why.
 */
static bool
route(RouterScanState *state, EState *estate)
{
	ExprContext *econtext = state->css.ss.ps.ps_ExprContext;
	ListCell   *lr;
	ListCell   *lv;
	List	   *common = NIL;
	bool		first = true;

	/* the keys are noted as hot keys only if a node here answers: a fallback's scans note their own */
	TablePlacement *noted_placements = palloc(sizeof(TablePlacement) * Max(list_length(state->relids), 1));
	Datum	   *noted_keys = palloc(sizeof(Datum) * Max(list_length(state->relids), 1));
	int			nnoted = 0;

	forboth(lr, state->relids, lv, state->value_states)
	{
		Relation	rel = relation_open(lfirst_oid(lr), AccessShareLock);
		TablePlacement placement;
		bool		moving;
		bool		isnull = false;
		Datum		key = lfirst(lv) ? ExecEvalExpr(lfirst(lv), econtext, &isnull) : (Datum) 0;
		List	   *holders = NIL;

		if (lfirst(lv) == NULL)
		{
			/* a reference table, no key fixed: its healthy nodes, if it is on every node now */
			bool		usable;

			table_placement_load(&placement, RelationGetRelid(rel), RelationGetDescr(rel), CurrentMemoryContext);
			holders = every_node_holders(&placement, &usable, NULL);
			relation_close(rel, AccessShareLock);
			if (!usable)
				return false;
			goto intersect;
		}
		if (isnull)
		{
			/* key = NULL: no row of this table takes part, any node will do */
			relation_close(rel, AccessShareLock);
			continue;
		}
		table_placement_load(&placement, RelationGetRelid(rel), RelationGetDescr(rel), CurrentMemoryContext);
		holders = key_holders(&placement, key, &moving, NULL);
		if (!(state->eflags & EXEC_FLAG_EXPLAIN_ONLY) && hot_keys_tracking())
		{
			noted_placements[nnoted] = placement;
			noted_keys[nnoted++] = key;
		}
		relation_close(rel, AccessShareLock);
intersect:
		if (first)
			common = holders;
		else
		{
			List	   *kept = NIL;
			ListCell   *lc;
			ListCell   *lh;

			foreach(lc, common)
				foreach(lh, holders)
					if (strcmp(lfirst(lc), lfirst(lh)) == 0)
					{
						kept = lappend(kept, lfirst(lc));
						break;
					}
			common = kept;
		}
		first = false;
		if (common == NIL)
			return false;
	}
	if (first)
		return false;			/* every key NULL: the plan below answers (with no rows) */
	state->nnodes = list_length(common);
	state->nodes = palloc(sizeof(char *) * state->nnodes);
	for (int i = 0; i < state->nnodes; i++)
		state->nodes[i] = list_nth(common, i);
	state->noted_placements = noted_placements;
	state->noted_keys = noted_keys;
	state->nnoted = nnoted;
	return true;
}

/* Note the routed keys as hot keys, once: a node answered the statement. */
static void
note_routed_keys(RouterScanState *state)
{
	for (int i = 0; i < state->nnoted; i++)
		hot_keys_note_key(&state->noted_placements[i], state->noted_keys[i], NULL, HOT_KEY_READ);
	state->nnoted = 0;
}

/* Whether the node's parameters include the statement's own (not only values computed here). */
static bool
uses_statement_params(List *param_ids)
{
	ListCell   *lc;

	foreach(lc, param_ids)
		if (lfirst_int(lc) > 0)
			return true;		/* 0: computed here; -1, -2: a fan-out's filter, known when it runs */
	return false;
}

/* As ExecInitFunc would: the current user may call every function of the statement. */
static void
check_functions(List *funcs)
{
	ListCell   *lc;

	foreach(lc, funcs)
	{
		AclResult	aclresult = pg_proc_aclcheck(lfirst_oid(lc), GetUserId(), ACL_EXECUTE);

		if (aclresult != ACLCHECK_OK)
			aclcheck_error(aclresult, OBJECT_FUNCTION, get_func_name(lfirst_oid(lc)));
	}
}

/* Initialize the usual plan below, once (it opens no connection until it runs). */
static void
start_plan_below(RouterScanState *state)
{
	EState	   *estate = state->css.ss.ps.state;
	MemoryContext old;

	if (outerPlanState(state) != NULL)
		return;
	old = MemoryContextSwitchTo(estate->es_query_cxt);
	outerPlanState(state) = ExecInitNode(outerPlan(state->css.ss.ps.plan), estate,
										 state->eflags);
	MemoryContextSwitchTo(old);
}

static void
router_begin(CustomScanState *node, EState *estate, int eflags)
{
	RouterScanState *state = (RouterScanState *) node;
	CustomScan *plan = (CustomScan *) node->ss.ps.plan;
	ListCell   *lc;

	state->sql = strVal(linitial(plan->custom_private));
	state->param_ids = lsecond(plan->custom_private);
	state->relids = lthird(plan->custom_private);
	state->output_attnums = lfourth(plan->custom_private);
	state->driver = linitial_int((List *) list_nth(plan->custom_private, 6));
	state->userid = linitial_oid((List *) list_nth(plan->custom_private, 4));
	if (!OidIsValid(state->userid))
		state->userid = GetUserId();
	foreach(lc, plan->custom_exprs)
	{
		ExprState  *expr = ExecInitExpr(lfirst(lc), &node->ss.ps);

		if (foreach_current_index(lc) < list_length(state->relids))
			state->value_states = lappend(state->value_states, expr);
		else
			state->computed_states = lappend(state->computed_states, expr);
	}
	state->codecs = remote_codecs_for_desc(node->ss.ss_ScanTupleSlot->tts_tupleDescriptor, false, NULL);
	state->output_types = palloc(sizeof(Oid) * Max(node->ss.ss_ScanTupleSlot->tts_tupleDescriptor->natts, 1));
	for (int i = 0; i < node->ss.ss_ScanTupleSlot->tts_tupleDescriptor->natts; i++)
		state->output_types[i] = TupleDescAttr(node->ss.ss_ScanTupleSlot->tts_tupleDescriptor, i)->atttypid;

	/* a plain EXPLAIN of a generic plan has no parameter values: no route then */
	state->routed = !(eflags & EXEC_FLAG_EXPLAIN_ONLY) || estate->es_param_list_info != NULL ||
		!uses_statement_params(state->param_ids);
	check_functions((List *) list_nth(plan->custom_private, 5));
	state->eflags = eflags;		/* before routing: a plain EXPLAIN notes no hot key */
	/* a plan cached before ringshard.router_statements was turned off runs table by table too */
	if (!ringshard_router_statements)
	{
		state->routed = true;
		state->fallback = true;
	}
	else if (state->routed)
		state->fallback = state->driver >= 0 ? !route_fanout(state) : !route(state, estate);
	/* the plan below, for EXPLAIN and when no node holds every row */
	if (state->fallback || (eflags & EXEC_FLAG_EXPLAIN_ONLY))
		start_plan_below(state);
	/*
	 * Spread reads over the nodes that can answer; in a transaction that
	 * keeps one snapshot, keep their order (the key's): a key is read on one
	 * replica every time, the one a fan-out reads it on (route_key in
	 * scan.c says why).
	 */
	if (!IsolationUsesXactSnapshot())
		for (int i = state->nnodes - 1; i > 0; i--)
		{
			int			j = (int) pg_prng_uint64_range(&pg_global_prng_state, 0, i);
			char	   *t = state->nodes[i];

			state->nodes[i] = state->nodes[j];
			state->nodes[j] = t;
		}
}

/*
 * The node's parameters: text, printed under the pinned settings, of the
 * statement's own parameters and of the values computed here (id 0); with
 * preparable, false if one of their types may not be prepared on a node.
 */
static const char **
param_texts(List *param_ids, List *computed_states, ExprContext *econtext, const char *excluded,
			const char *version, bool *preparable)
{
	ParamListInfo params = econtext->ecxt_param_list_info;
	const char **texts = palloc0(sizeof(char *) * Max(list_length(param_ids), 1));
	ListCell   *next_computed = list_head(computed_states);
	int			i = 0;
	ListCell   *lc;

	foreach(lc, param_ids)
	{
		int			id = lfirst_int(lc);

		if (id == -1 || id == -2)
		{
			/* a fan-out's filter: the nodes left out, the topology version */
			texts[i++] = id == -1 ? excluded : version;
			continue;
		}
		if (id == 0)
		{
			ExprState  *expr = lfirst(next_computed);
			bool		isnull;
			Datum		value = ExecEvalExpr(expr, econtext, &isnull);

			next_computed = lnext(computed_states, next_computed);
			texts[i++] = isnull ? NULL : remote_value_text(exprType((Node *) expr->expr), value, true);
			if (preparable && !remote_type_preparable(exprType((Node *) expr->expr)))
				*preparable = false;
		}
		else
		{
			ParamExternData storage;
			ParamExternData *param;

			if (params == NULL || id <= 0 || id > params->numParams)
				elog(ERROR, "no value for parameter $%d", id);
			param = params->paramFetch ? params->paramFetch(params, id, false, &storage) : &params->params[id - 1];
			texts[i++] = param->isnull ? NULL : remote_value_text(param->ptype, param->value, true);
			if (preparable && !remote_type_preparable(param->ptype))
				*preparable = false;
		}
	}
	return texts;
}

/* Send the statement to a node that can answer and keep its rows; the next node if one cannot be reached. */
static void
run_on_node(RouterScanState *state, EState *estate)
{
	bool		preparable = true;
	const char **params = param_texts(state->param_ids, state->computed_states, state->css.ss.ps.ps_ExprContext,
									  NULL, NULL, &preparable);
	Oid			userid = state->userid;
	int			nfields = list_length(state->output_attnums);

	for (int i = 0; i < state->nnodes; i++)
	{
		RemoteConnection *conn = remote_connection(state->nodes[i], userid);
		bool		in_transaction;
		RemoteResult out;
		const void *owner = state;

		remote_connect_all(&conn, 1, true);
		if (conn->link != LINK_IDLE && conn->link != LINK_BUSY)
			continue;
		in_transaction = IsTransactionBlock() || conn->xact != RXACT_NONE;
		/*
		 * Prepared on the node once per connection, where no remote
		 * transaction must be opened first, and its parameters' types allow
		 */
		if (preparable && remote_can_send_prepared(conn, in_transaction))
			remote_send_prepared(conn, state->sql, list_length(state->param_ids), params, state);
		else
			remote_send_params(conn, state->sql, list_length(state->param_ids), params, in_transaction, state);
		if (!remote_owner_pending(conn, state))
			continue;			/* the link failed while sending */
		remote_receive_owned(&conn, &owner, 1, &out, 0, 0);
		if (out.lost)
			continue;			/* nothing came back: the next node answers */
		if (!out.ok)
			remote_report_error(ERROR, conn, out.result, state->sql);
		remote_expect_rows(conn, out.result, nfields, 0, -1, "a router statement");
		remote_expect_formats(conn, out.result, 0, state->output_types, "a router statement");
		state->result = out.result;
		state->answered_by = state->nodes[i];
		state->answer_ms = out.elapsed_ms;
		return;
	}
	/* none could be reached: the plan below reads each table from its replicas (and says what fails) */
	state->fallback = true;
}

/*
 * A fan-out: the nodes of the driving table's ring that can answer (up, its
 * reference tables' copies there, nothing moving), or false: the plan
 * below then reads table by table.
 */
static bool
route_fanout(RouterScanState *state)
{
	TablePlacement driver;
	ListCell   *lc;
	List	   *nodes = NIL;

	foreach(lc, state->relids)
	{
		Relation	rel = relation_open(lfirst_oid(lc), AccessShareLock);
		TablePlacement placement;

		table_placement_load(&placement, RelationGetRelid(rel), RelationGetDescr(rel), CurrentMemoryContext);
		relation_close(rel, AccessShareLock);
		if (placement_is_moving(&placement))
			return false;		/* rows not where the ring puts them yet */
		if (foreach_current_index(lc) == state->driver)
			driver = placement;
	}
	for (int i = 0; i < placement_node_count(&driver); i++)
		if (placement_node_up(&driver, i))
			nodes = lappend(nodes, placement_node_name(&driver, i));
	/* every node asked must hold a copy of each reference table */
	foreach(lc, state->relids)
	{
		Relation	rel;
		TablePlacement placement;
		bool		usable;
		List	   *holders;
		ListCell   *ln;

		if (foreach_current_index(lc) == state->driver)
			continue;
		rel = relation_open(lfirst_oid(lc), AccessShareLock);
		table_placement_load(&placement, RelationGetRelid(rel), RelationGetDescr(rel), CurrentMemoryContext);
		relation_close(rel, AccessShareLock);
		if (placement.ring == NULL || (driver.ring != NULL && strcmp(placement.ring->name, driver.ring->name) == 0))
			continue;			/* a table tied to the driver, on its ring */
		holders = every_node_holders(&placement, &usable, NULL);
		if (!usable)
			return false;
		foreach(ln, nodes)
			if (!has_name(holders, lfirst(ln)))
				return false;
	}
	state->nnodes = list_length(nodes);
	state->nodes = palloc(sizeof(char *) * Max(state->nnodes, 1));
	foreach(lc, nodes)
		state->nodes[foreach_current_index(lc)] = lfirst(lc);
	return state->nnodes > 0;
}

/* A node's batch of a fan-out: checked, kept; its cursor done when it has fewer rows than asked. */
static void
take_fanout_batch(RouterScanState *state, int j, RemoteResult *out)
{
	RemoteConnection *conn = state->streams[j];

	if (out->lost)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("lost the connection to node \"%s\" during a router statement", conn->node),
				 errdetail_internal("%s", conn->last_error ? conn->last_error : "")));
	if (!out->ok)
		remote_report_error(ERROR, conn, out->result, state->sql);
	remote_expect_rows(conn, out->result, list_length(state->output_attnums), 0, ringshard_fetch_size,
					   "a router statement");
	remote_expect_formats(conn, out->result, 0, state->output_types, "a router statement");
	remote_result_free(state->results[j]);
	state->results[j] = out->result;
	state->exhausted[j] = PQntuples(out->result) < ringshard_fetch_size;
	node_analysis_add(state->analysis, j, PQntuples(out->result));
}

/* The next batch of node j's cursor, waited for. */
static void
fetch_fanout_batch(RouterScanState *state, int j)
{
	RemoteResult out;
	const void *owner = state;

	remote_send(state->streams[j], rsfdw_fetch_sql(state->cursor, ringshard_fetch_size), true, state);
	remote_receive_owned(&state->streams[j], &owner, 1, &out, 0, 0);
	take_fanout_batch(state, j, &out);
}

/*
 * A fan-out: every node that can answer runs the statement over the keys
 * it serves (each key on its first replica not left out); their answers
 * are kept, to be returned one after the other.  A node that cannot be
 * reached is left out when the others still serve every key; else, or if
 * one is lost before it answers, the plan below runs.
 */
static void
run_fanout(RouterScanState *state)
{
	Relation	rel = relation_open(list_nth_oid(state->relids, state->driver), AccessShareLock);
	TablePlacement placement;
	int			nnodes;
	bool	   *excluded;
	RemoteConnection **conns;
	RemoteConnection **asked;
	const void **owners;
	RemoteResult *out;
	char	  **names;
	int			n = 0;
	StringInfoData left_out;
	const char **params;
	NodeAnalyses *analysis;

	table_placement_load(&placement, RelationGetRelid(rel), RelationGetDescr(rel), CurrentMemoryContext);
	relation_close(rel, AccessShareLock);
	nnodes = placement_node_count(&placement);
	excluded = palloc0(sizeof(bool) * Max(nnodes, 1));
	conns = palloc0(sizeof(RemoteConnection *) * Max(nnodes, 1));
	asked = palloc0(sizeof(RemoteConnection *) * Max(nnodes, 1));
	owners = palloc(sizeof(void *) * Max(nnodes, 1));
	out = palloc0(sizeof(RemoteResult) * Max(nnodes, 1));
	names = palloc(sizeof(char *) * Max(nnodes, 1));
	for (int i = 0; i < nnodes; i++)
	{
		excluded[i] = !placement_node_up(&placement, i) || !has_name_array(state->nodes, state->nnodes,
																		   placement_node_name(&placement, i));
		if (!excluded[i])
			conns[n++] = remote_connection(placement_node_name(&placement, i), state->userid);
	}
	remote_connect_all(conns, n, true);
	n = 0;
	for (int i = 0, c = 0; i < nnodes; i++)
	{
		if (excluded[i])
			continue;
		if (conns[c]->link != LINK_IDLE && conns[c]->link != LINK_BUSY)
			excluded[i] = true;
		else
		{
			asked[n] = conns[c];
			names[n++] = placement_node_name(&placement, i);
		}
		c++;
	}
	if (!placement_covered(&placement, excluded))
	{
		state->fallback = true;	/* some keys on no node that can answer: the plan below says so */
		return;
	}
	/* the nodes left out, as the text[] value reads_here takes */
	initStringInfo(&left_out);
	appendStringInfoChar(&left_out, '{');
	for (int i = 0; i < nnodes; i++)
	{
		if (!excluded[i])
			continue;
		if (left_out.len > 1)
			appendStringInfoChar(&left_out, ',');
		appendStringInfoChar(&left_out, '"');
		for (const char *ch = placement_node_name(&placement, i); *ch; ch++)
		{
			if (*ch == '"' || *ch == '\\')
				appendStringInfoChar(&left_out, '\\');
			appendStringInfoChar(&left_out, *ch);
		}
		appendStringInfoChar(&left_out, '"');
	}
	appendStringInfoChar(&left_out, '}');
	params = param_texts(state->param_ids, state->computed_states, state->css.ss.ps.ps_ExprContext, left_out.data,
						 psprintf(INT64_FORMAT, rsfdw_coordinator_topology_version()), NULL);
	/*
	 * A cursor on each node, in its remote transaction, fetched in batches
	 * of ringshard.fetch_size as the rows are returned (the answer may be
	 * large): first the DECLARE everywhere at once, then the first batch
	 * everywhere at once.
	 */
	/*
	 * EXPLAIN ANALYZE: by answer, so made for this run's nodes (a rescan may
	 * ask others), and kept only with their names below: a run that falls
	 * back keeps the last run's names and analyses together.
	 */
	analysis = node_analysis_start_run(NULL, &state->css.ss.ps, n);
	{
		static uint32 cursor_number = 0;
		char	   *declare;

		snprintf(state->cursor, sizeof(state->cursor), "rs_router_%u", ++cursor_number);
		declare = psprintf("DECLARE %s NO SCROLL CURSOR FOR %s", state->cursor, state->sql);
		for (int j = 0; j < n; j++)
		{
			remote_send_params(asked[j], declare, list_length(state->param_ids), params, true, state);
			owners[j] = state;
		}
		remote_receive_owned(asked, owners, n, out, 0, 0);
		for (int j = 0; j < n; j++)
			if (out[j].lost)
			{
				for (int k = 0; k < n; k++)
					if (!out[k].lost && out[k].result)
						remote_result_free(out[k].result);
				state->fallback = true;	/* nothing returned yet: the plan below answers */
				return;
			}
		for (int j = 0; j < n; j++)
		{
			(void) remote_answer(asked[j], &out[j], declare, "a router statement");
			remote_expect_command(asked[j], out[j].result, "DECLARE CURSOR", -1, "a router statement");
			remote_result_free(out[j].result);
		}
	}
	state->streams = asked;
	state->answered = names;
	state->analysis = analysis;
	state->nresults = n;
	state->results = palloc0(sizeof(PGresult *) * Max(n, 1));
	state->exhausted = palloc0(sizeof(bool) * Max(n, 1));
	for (int j = 0; j < n; j++)
		remote_send(asked[j], rsfdw_fetch_sql(state->cursor, ringshard_fetch_size), true, state);
	remote_receive_owned(asked, owners, n, out, 0, 0);
	for (int j = 0; j < n; j++)
		take_fanout_batch(state, j, &out[j]);
	state->current = 0;
	state->result = n > 0 ? state->results[0] : NULL;
	state->answered_by = n > 0 ? names[0] : NULL;
}

static TupleTableSlot *
router_exec(CustomScanState *node)
{
	RouterScanState *state = (RouterScanState *) node;
	TupleTableSlot *slot = node->ss.ss_ScanTupleSlot;
	int			natts = slot->tts_tupleDescriptor->natts;

	CHECK_FOR_INTERRUPTS();
	ExecClearTuple(slot);
	if (state->fallback)
	{
		TupleTableSlot *below = ExecProcNode(outerPlanState(node));
		ListCell   *lc;
		int			i = 0;

		if (TupIsNull(below))
			return slot;
		slot_getallattrs(below);
		foreach(lc, state->output_attnums)
		{
			slot->tts_values[i] = below->tts_values[lfirst_int(lc) - 1];
			slot->tts_isnull[i] = below->tts_isnull[lfirst_int(lc) - 1];
			i++;
		}
		return ExecStoreVirtualTuple(slot);
	}
	if (state->result == NULL && state->nresults == 0)
	{
		if (state->driver >= 0)
			run_fanout(state);
		else
		{
			run_on_node(state, node->ss.ps.state);
			if (!state->fallback)
				note_routed_keys(state);
		}
		if (state->fallback)
		{
			start_plan_below(state);
			return router_exec(node);
		}
		if (state->result == NULL)
			return slot;
	}
	/* a fan-out: this node's next batch, or the next node's, once these rows are returned */
	while (state->streams != NULL && state->next >= PQntuples(state->result))
	{
		if (!state->exhausted[state->current])
			fetch_fanout_batch(state, state->current);
		else if (state->current + 1 < state->nresults)
			state->current++;
		else
			break;
		state->result = state->results[state->current];
		state->answered_by = state->answered[state->current];
		state->next = 0;
	}
	if (state->next >= PQntuples(state->result))
		return slot;
	for (int j = 0; j < natts; j++)
	{
		int			row = state->next;

		slot->tts_isnull[j] = PQgetisnull(state->result, row, j);
		slot->tts_values[j] = slot->tts_isnull[j] ? (Datum) 0
			: remote_codec_decode(&state->codecs[j], PQgetvalue(state->result, row, j),
								  PQgetlength(state->result, row, j), state->answered_by);
	}
	state->next++;
	return ExecStoreVirtualTuple(slot);
}

/* Free the nodes' answers. */
static void
free_answers(RouterScanState *state)
{
	if (state->streams != NULL)
	{
		/* a fan-out's cursors: closed where still open (they end with the remote transactions anyway) */
		for (int i = 0; i < state->nresults; i++)
		{
			RemoteConnection *conn = state->streams[i];

			remote_result_free(state->results[i]);
			if (conn->link == LINK_BROKEN || conn->link == LINK_CLOSED)
				continue;
			remote_forget_owner(conn, state);
			if (!state->exhausted[i] && conn->link == LINK_IDLE && conn->xact == RXACT_OPEN)
			{
				remote_send(conn, rsfdw_close_sql(state->cursor), true, state);
				remote_forget_owner(conn, state);
			}
		}
		state->streams = NULL;
	}
	else if (state->nresults > 0)
	{
		for (int i = 0; i < state->nresults; i++)
			remote_result_free(state->results[i]);
	}
	else if (state->result)
		remote_result_free(state->result);
	state->result = NULL;
	state->nresults = 0;
	state->current = 0;
	state->next = 0;
}

static void
router_end(CustomScanState *node)
{
	RouterScanState *state = (RouterScanState *) node;

	if (outerPlanState(node))
		ExecEndNode(outerPlanState(node));
	free_answers(state);
}

static void
router_rescan(CustomScanState *node)
{
	RouterScanState *state = (RouterScanState *) node;

	/* the parameters may have changed: ask again */
	if (outerPlanState(node))
		ExecReScan(outerPlanState(node));
	state->fallback = !ringshard_router_statements;
	if (state->routed && !state->fallback)
		state->fallback = state->driver >= 0 ? !route_fanout(state) : !route(state, node->ss.ps.state);
	if (state->fallback)
		start_plan_below(state);
	free_answers(state);
}

static void
router_explain(CustomScanState *node, List *ancestors, ExplainState *es)
{
	RouterScanState *state = (RouterScanState *) node;

	ExplainPropertyText("Router", state->driver >= 0
						? psprintf("the whole statement to every node, each for the keys of table %s it serves",
								   get_rel_name(list_nth_oid(state->relids, state->driver)))
						: "the whole statement to one healthy node holding every table's rows of its key", es);
	if (state->routed && !state->fallback)
		ExplainPropertyText("Nodes", sorted_node_names(state->nodes, state->nnodes), es);
	else if (state->routed)
		ExplainPropertyText("Nodes", "none holds every row: the plan below runs", es);
	if (es->verbose)
		ExplainPropertyText("Remote SQL", state->sql, es);
	if (es->analyze && state->driver >= 0 && state->answered != NULL)
	{
		StringInfoData buf;

		initStringInfo(&buf);
		for (int i = 0; i < state->nresults; i++)
			appendStringInfo(&buf, "%s%s", i ? ", " : "", state->answered[i]);
		ExplainPropertyText("Answered by", buf.data, es);
		/* each node's rows and when its batches came */
		node_analysis_explain_named(state->analysis, state->answered, "row", "rows", es);
	}
	else if (es->analyze && state->answered_by)
		ExplainPropertyText("Answered by", psprintf("%s, %d row%s in %.3f ms", state->answered_by,
													PQntuples(state->result), PQntuples(state->result) == 1 ? "" : "s",
													state->answer_ms), es);
}

static CustomExecMethods router_exec_methods = {
	.CustomName = "ringshard router",
	.BeginCustomScan = router_begin,
	.ExecCustomScan = router_exec,
	.EndCustomScan = router_end,
	.ReScanCustomScan = router_rescan,
	.ExplainCustomScan = router_explain,
};

static Node *
router_create_scan_state(CustomScan *plan)
{
	RouterScanState *state = (RouterScanState *) newNode(sizeof(RouterScanState), T_CustomScanState);

	state->css.methods = &router_exec_methods;
	return (Node *) state;
}

static CustomScanMethods router_scan_methods = {
	.CustomName = "ringshard router",
	.CreateCustomScanState = router_create_scan_state,
};

/*
 * Router writes: an UPDATE or DELETE of a distributed table that reads other
 * tables (UPDATE ... FROM, DELETE ... USING, subqueries, WITH), every table
 * fixed to one key.  It runs whole on every replica of the target's key,
 * in the transaction's remote transactions (so it commits with the rest, in
 * two phases), after the key's write lock; the replicas must agree on what
 * they changed.  Each replica must hold the rows the statement reads too:
 * the tables must be colocated on those nodes, every one of them up, and
 * the key's rows not moving.  Otherwise the statement fails, with why; the
 * table-by-table path cannot run such a statement either.  A write of one
 * table alone keeps that path (with its queue for nodes that are down).
 */

static CustomScanMethods router_write_methods;

/* Whether an UPDATE or DELETE reads more than its target: other tables, subqueries, WITH. */
bool
rsfdw_router_write_candidate(Query *parse)
{
	RangeTblEntry *target;
	Relation	rel;
	bool		triggers;
	bool		reads_more;
	ListCell   *lc;
	AttrNumber	key_attnum;
	Oid			key_type;
	AttrNumber	keyspace_attnum;

	if (!ringshard_router_statements || parse->utilityStmt != NULL ||
		(parse->commandType != CMD_UPDATE && parse->commandType != CMD_DELETE) || parse->resultRelation <= 0)
		return false;
	target = rt_fetch(parse->resultRelation, parse->rtable);
	if (target->rtekind != RTE_RELATION || target->relkind != RELKIND_FOREIGN_TABLE ||
		!is_distributed_table(target->relid))
		return false;
	/* another table read: a distributed table other than the target, at any depth (a view's own entry is none) */
	{
		Relids		other = NULL;
		int			n = count_distributed_tables((Node *) parse, &other);

		reads_more = n > 1 || (n == 1 && !bms_is_member(parse->resultRelation, other));
	}
	if (!reads_more)
		return false;
	/* triggers of the coordinator's table would not fire */
	rel = relation_open(target->relid, NoLock);
	triggers = rel->trigdesc != NULL;
	relation_close(rel, NoLock);
	if (triggers)
		return false;
	/* a new key moves the row to other nodes: the table-by-table path refuses it */
	rsfdw_table_info(target->relid, &key_attnum, &key_type, &keyspace_attnum);
	foreach(lc, parse->targetList)
	{
		TargetEntry *tle = lfirst(lc);

		if (!tle->resjunk && (tle->resno == key_attnum || tle->resno == keyspace_attnum))
			return false;
	}
	/* RETURNING comes back as text: no anonymous records */
	foreach(lc, parse->returningList)
	{
		Oid			type = exprType((Node *) ((TargetEntry *) lfirst(lc))->expr);

		if (type_is_rowtype(type) || get_typtype(type) == TYPTYPE_PSEUDO)
			return false;
	}
	return rsfdw_query_unshippable_reason(parse) == NULL;
}

/*
 * The functions a statement calls (operators' and aggregates' too), at any
 * depth: a router write has no plan below to check their EXECUTE privilege
 * as PostgreSQL does when it initializes expressions, so it checks them.
 */
static bool
collect_functions_walker(Node *node, List **funcs)
{
	if (node == NULL)
		return false;
	if (IsA(node, Query))
		return query_tree_walker((Query *) node, collect_functions_walker, (void *) funcs, 0);
	switch (nodeTag(node))
	{
		case T_FuncExpr:
			*funcs = list_append_unique_oid(*funcs, ((FuncExpr *) node)->funcid);
			break;
		case T_OpExpr:
		case T_DistinctExpr:
		case T_NullIfExpr:
			set_opfuncid((OpExpr *) node);
			*funcs = list_append_unique_oid(*funcs, ((OpExpr *) node)->opfuncid);
			break;
		case T_ScalarArrayOpExpr:
			set_sa_opfuncid((ScalarArrayOpExpr *) node);
			*funcs = list_append_unique_oid(*funcs, ((ScalarArrayOpExpr *) node)->opfuncid);
			break;
		case T_Aggref:
			*funcs = list_append_unique_oid(*funcs, ((Aggref *) node)->aggfnoid);
			break;
		case T_WindowFunc:
			*funcs = list_append_unique_oid(*funcs, ((WindowFunc *) node)->winfnoid);
			break;
		default:
			break;
	}
	return expression_tree_walker(node, collect_functions_walker, (void *) funcs);
}

/*
 * How many range table entries of distributed tables the statement has, at
 * any depth; *top gets those of its own level.
 */
static int
count_distributed_tables(Node *node, Relids *top)
{
	int			n = 0;
	ListCell   *lc;
	Query	   *query = (Query *) node;

	foreach(lc, query->rtable)
	{
		RangeTblEntry *rte = lfirst(lc);

		if (rte->rtekind == RTE_RELATION && rte->relkind == RELKIND_FOREIGN_TABLE && is_distributed_table(rte->relid))
		{
			n++;
			if (top)
				*top = bms_add_member(*top, foreach_current_index(lc) + 1);
		}
	}
	(void) query_tree_walker(query, count_distributed_walker, (void *) &n, 0);
	return n;
}

static bool
count_distributed_walker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, Query))
	{
		*(int *) context += count_distributed_tables(node, NULL);
		return false;
	}
	return expression_tree_walker(node, count_distributed_walker, context);
}

/* Every relation of every query level, for the executor's privilege checks and locks. */
static void
collect_relations(Query *query, List **rtable, List **relids)
{
	ListCell   *lc;

	foreach(lc, query->rtable)
	{
		RangeTblEntry *rte = lfirst(lc);

		if (rte->rtekind == RTE_RELATION)
		{
			*rtable = lappend(*rtable, copyObject(rte));
			*relids = list_append_unique_oid(*relids, rte->relid);
		}
	}
	(void) query_tree_walker(query, collect_relations_walker, (void *) list_make2(rtable, relids), 0);
}

static bool
collect_relations_walker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, Query))
	{
		collect_relations((Query *) node, (List **) linitial((List *) context), (List **) lsecond((List *) context));
		return false;
	}
	return expression_tree_walker(node, collect_relations_walker, context);
}

/*
 * The planned statement of a router write, or NULL when some table is not
 * fixed to one key (the usual planner then says what it cannot do).
 */
PlannedStmt *
rsfdw_plan_router_write(Query *parse)
{
	RouterAnalysis analysis = {NIL, false};
	PlannedStmt *stmt;
	CustomScan *router;
	List	   *relids = NIL;
	List	   *values = NIL;
	List	   *param_ids;
	List	   *computed;
	List	   *scan_tlist = NIL;
	List	   *tlist = NIL;
	List	   *rtable = NIL;
	List	   *locked = NIL;
	List	   *hidden_types = NIL;
	int			target = -1;
	Oid			as_user;
	ListCell   *lc;
	char	   *sql;

	analyze_level(parse, NULL, NIL, &analysis);
	if (analysis.failed || analysis.tables == NIL)
		return NULL;
	as_user = ((RoutedTable *) linitial(analysis.tables))->check_as_user;
	foreach(lc, analysis.tables)
	{
		RoutedTable *table = lfirst(lc);

		if (table->check_as_user != as_user)
			return NULL;
		if (table->query == parse && table->rti == (Index) parse->resultRelation)
			target = list_length(relids);
		relids = lappend_oid(relids, table->relid);
		values = lappend(values, table->value);
	}
	if (target < 0)
		return NULL;

	/*
	 * The nodes also return every row they changed, whole (after the
	 * statement's own RETURNING): replicas that changed different rows, or
	 * the same rows differently, are an error, not a commit.  That happens
	 * when they hold different rows, when the statement's result depends on
	 * the node (an UPDATE ... FROM that matches a row several times, an order
	 * the statement does not fix) or when each replica saw the other tables
	 * at another moment.
	 */
	{
		Query	   *sent = copyObject(parse);
		Relation	rel = relation_open(list_nth_oid(relids, target), NoLock);
		TupleDesc	desc = RelationGetDescr(rel);

		for (int i = 0; i < desc->natts; i++)
		{
			Form_pg_attribute attr = TupleDescAttr(desc, i);

			if (attr->attisdropped)
				continue;
			sent->returningList = lappend(sent->returningList,
										  makeTargetEntry((Expr *) makeVar(parse->resultRelation, attr->attnum,
																		   attr->atttypid, attr->atttypmod,
																		   attr->attcollation, 0),
														  list_length(sent->returningList) + 1,
														  pstrdup(NameStr(attr->attname)), false));
			hidden_types = lappend_oid(hidden_types, attr->atttypid);
		}
		relation_close(rel, NoLock);
		sql = rsfdw_router_sql_text(sent, &param_ids, &computed);
	}

	/* RETURNING: what the nodes return, as they return it */
	foreach(lc, parse->returningList)
	{
		TargetEntry *tle = lfirst(lc);
		Node	   *expr = (Node *) tle->expr;
		Var		   *from_scan;

		scan_tlist = lappend(scan_tlist, makeTargetEntry((Expr *) copyObject(expr), list_length(scan_tlist) + 1,
														 tle->resname, false));
		from_scan = makeVar(INDEX_VAR, list_length(scan_tlist), exprType(expr), exprTypmod(expr),
							exprCollation(expr), 0);
		tlist = lappend(tlist, makeTargetEntry((Expr *) from_scan, list_length(tlist) + 1, tle->resname, false));
	}

	router = makeNode(CustomScan);
	router->scan.plan.targetlist = tlist;
	router->scan.plan.plan_rows = 1;
	router->scan.plan.startup_cost = 25.0;
	router->scan.plan.total_cost = 25.0;
	router->scan.scanrelid = 0;
	router->custom_scan_tlist = scan_tlist;
	/* the keys' values, then the values computed here for the node's parameters */
	router->custom_exprs = list_concat(values, computed);
	router->custom_private = list_make5(makeString(sql), param_ids, relids, list_make1_int(target),
										list_make1_oid(as_user));
	{
		List	   *funcs = NIL;

		(void) query_tree_walker(parse, collect_functions_walker, (void *) &funcs, 0);
		router->custom_private = lappend(router->custom_private, funcs);
	}
	router->custom_private = lappend(router->custom_private, hidden_types);
	router->methods = &router_write_methods;

	/*
	 * The range table: the statement's own entries first, as they are (so
	 * that EXPLAIN names RETURNING's columns), then every relation of the
	 * queries below, for the executor's privilege checks and a cached plan's
	 * locks.
	 */
	rtable = copyObject(parse->rtable);
	foreach(lc, rtable)
		if (((RangeTblEntry *) lfirst(lc))->rtekind == RTE_RELATION)
			locked = list_append_unique_oid(locked, ((RangeTblEntry *) lfirst(lc))->relid);
	(void) query_tree_walker(parse, collect_relations_walker, (void *) list_make2(&rtable, &locked), 0);

	stmt = makeNode(PlannedStmt);
	stmt->commandType = parse->commandType;
	stmt->queryId = parse->queryId;
	stmt->hasReturning = parse->returningList != NIL;
	stmt->canSetTag = parse->canSetTag;
	stmt->planTree = (Plan *) router;
	stmt->rtable = rtable;
	stmt->relationOids = locked;
	stmt->stmt_location = parse->stmt_location;
	stmt->stmt_len = parse->stmt_len;
	return stmt;
}

typedef struct RouterWriteState
{
	CustomScanState css;
	char	   *sql;
	List	   *param_ids;
	List	   *relids;
	int			target;
	Oid			userid;
	List	   *value_states;
	List	   *computed_states;	/* values computed here for the node's parameters */
	char	  **nodes;			/* the target key's replicas: all of them take the statement */
	int			nnodes;
	uint32		lock_slot;
	bool		lock_table;		/* a reference table's rows, any of them: the table's write lock */
	bool		moving;			/* the key's rows are not copied yet: nodes is its old replicas */
	bool		routed;
	bool		nothing;		/* the target's key is NULL: no row can match */
	const char *why_not;		/* EXPLAIN only: why it would fail now */
	int			nreturning;		/* the statement's RETURNING columns, before the changed rows' own */
	int			nanswer;		/* all the columns the nodes answer */
	Oid		   *answer_types;
	RemoteCodec *codecs;
	PGresult   *result;			/* the first replica's RETURNING rows */
	int			next;
	bool		done;
} RouterWriteState;

/* The replicas (names) of a table's key that are up, the old ones where its rows are moving. */
static List *
key_holders(TablePlacement *placement, Datum key, bool *moving, List **down)
{
	uint16		replicas[PLACEMENT_MAX_REPLICAS];
	int			n = placement_key_replicas(placement, key, (Datum) 0, replicas);
	List	   *up = NIL;

	*moving = false;
	if (placement_is_moving(placement))
	{
		int			move = placement_key_move(placement, key, (Datum) 0);

		if (move >= 0)
		{
			*moving = true;
			n = placement_move_old_replicas(placement, move, replicas);
		}
	}
	for (int i = 0; i < n; i++)
	{
		if (placement_node_up(placement, replicas[i]))
			up = lappend(up, placement_node_name(placement, replicas[i]));
		else if (down)
			*down = lappend(*down, placement_node_name(placement, replicas[i]));
	}
	return up;
}

static bool
has_name_array(char **names, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (strcmp(names[i], name) == 0)
			return true;
	return false;
}

static bool
has_name(List *names, const char *name)
{
	ListCell   *lc;

	foreach(lc, names)
		if (strcmp(lfirst(lc), name) == 0)
			return true;
	return false;
}

/*
 * Where the write goes: every replica of the target's key, each holding the
 * rows the statement reads of the other tables.  An ERROR (or, under a
 * plain EXPLAIN, why_not) when that cannot be.  note_keys: count the keys
 * for ringshard.stat_hot_keys (the run's routing does, not the begin's).
 */
static void
route_write(RouterWriteState *state, bool explain_only, bool note_keys)
{
	ExprContext *econtext = state->css.ss.ps.ps_ExprContext;
	List	   *targets = NIL;
	char	   *target_name = get_rel_name(list_nth_oid(state->relids, state->target));
	ListCell   *lr;
	ListCell   *lv;
	int			pass;

	state->moving = false;
	/* the target first, then each other table against it */
	for (pass = 0; pass < 2; pass++)
		forboth(lr, state->relids, lv, state->value_states)
		{
			int			i = foreach_current_index(lr);
			Relation	rel;
			TablePlacement placement;
			bool		isnull;
			bool		moving;
			List	   *down = NIL;
			List	   *holders;
			Datum		key;
			ListCell   *lt;

			if ((pass == 0) != (i == state->target))
				continue;
			isnull = false;
			key = lfirst(lv) ? ExecEvalExpr(lfirst(lv), econtext, &isnull) : (Datum) 0;
			if (isnull)
			{
				if (i == state->target)
				{
					state->nothing = true;	/* key = NULL: no row of the target matches */
					return;
				}
				continue;
			}
			rel = relation_open(lfirst_oid(lr), AccessShareLock);
			table_placement_load(&placement, RelationGetRelid(rel), RelationGetDescr(rel), CurrentMemoryContext);
			if (lfirst(lv) == NULL)
			{
				/* a reference table, no key fixed: all its rows, on every node */
				bool		usable;

				holders = every_node_holders(&placement, &usable, &down);
				moving = !usable;
				if (i == state->target)
					state->lock_table = true;
			}
			else
			{
				holders = key_holders(&placement, key, &moving, &down);
				if (note_keys)
					hot_keys_note_key(&placement, key, NULL, i == state->target ? HOT_KEY_WRITE : HOT_KEY_READ);
			}
			/*
			 * A key whose rows are not copied yet is written where they are,
			 * as a write of one table is (docs/design.md, "Moving rows"): on
			 * its old replicas, each of which must then hold the other
			 * tables' rows too (checked below).  The rebalance's copy waits
			 * for this transaction (the table's lock), and a write that
			 * waited for the copy routes by its new state.  Not where the
			 * node the copy reads is no node of the placement (it left the
			 * ring and has no address), nor for a reference table's every
			 * row.
			 */
			if (i == state->target && moving && lfirst(lv) != NULL)
			{
				int			move = placement_key_move(&placement, key, (Datum) 0);

				if (move >= 0 && placement_move_writable(&placement, move))
				{
					moving = false;
					state->moving = true;
				}
			}
			if (i == state->target)
			{
				if (moving)
				{
					state->why_not = psprintf("the rows of this key of table %s are moving", target_name);
					if (!explain_only)
						ereport(ERROR,
								(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
								 errmsg("the rows of this key of table %s are not on their nodes yet", target_name),
								 errdetail("An UPDATE or DELETE that reads other tables runs whole on every replica "
										   "of the key; this key's rows wait for a rebalance."),
								 errhint("Move them with CALL ringshard.rebalance('%s').", target_name)));
				}
				else if (down != NIL)
				{
					state->why_not = psprintf("node \"%s\" is down", (char *) linitial(down));
					if (!explain_only)
						ereport(ERROR,
								(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
								 errmsg("node \"%s\", a replica of the key of table %s, is down", (char *) linitial(down),
										target_name),
								 errdetail("An UPDATE or DELETE that reads other tables runs whole on every replica of the "
										   "key at once; it is not queued for a replica that is down."),
								 errhint("Retry once the node is back (see ringshard.node_health()).")));
				}
				targets = holders;
				state->lock_slot = placement_key_lock_slot(&placement, key, (Datum) 0);
			}
			else
				foreach(lt, targets)
					if (!has_name(holders, lfirst(lt)))
					{
						state->why_not = psprintf("node \"%s\" does not hold the rows of table %s it reads",
												  (char *) lfirst(lt), RelationGetRelationName(rel));
						if (!explain_only)
							ereport(ERROR,
									(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
									 errmsg("this %s of distributed table %s cannot run on the nodes of its key: "
											"node \"%s\" does not hold the rows of table %s it reads",
											state->css.ss.ps.state->es_plannedstmt->commandType == CMD_UPDATE ? "UPDATE" : "DELETE",
											target_name, (char *) lfirst(lt), RelationGetRelationName(rel)),
									 errdetail("It runs whole on every replica of the key, which must hold the rows it "
											   "reads of the other tables: tables on the same ring, keys of the same "
											   "replicas, every replica up."),
									 errhint("Select the rows to change first, then change them by key.")));
						break;
					}
			relation_close(rel, AccessShareLock);
		}
	state->nnodes = list_length(targets);
	state->nodes = palloc(sizeof(char *) * Max(state->nnodes, 1));
	foreach(lr, targets)
		state->nodes[foreach_current_index(lr)] = lfirst(lr);
	state->routed = true;
}

static void
router_write_begin(CustomScanState *node, EState *estate, int eflags)
{
	RouterWriteState *state = (RouterWriteState *) node;
	CustomScan *plan = (CustomScan *) node->ss.ps.plan;
	ListCell   *lc;
	bool		explain_only = (eflags & EXEC_FLAG_EXPLAIN_ONLY) != 0;

	state->sql = strVal(linitial(plan->custom_private));
	state->param_ids = lsecond(plan->custom_private);
	state->relids = lthird(plan->custom_private);
	state->target = linitial_int((List *) lfourth(plan->custom_private));
	state->userid = linitial_oid((List *) list_nth(plan->custom_private, 4));
	if (!OidIsValid(state->userid))
		state->userid = GetUserId();
	check_functions((List *) list_nth(plan->custom_private, 5));
	foreach(lc, plan->custom_exprs)
	{
		ExprState  *expr = ExecInitExpr(lfirst(lc), &node->ss.ps);

		if (foreach_current_index(lc) < list_length(state->relids))
			state->value_states = lappend(state->value_states, expr);
		else
			state->computed_states = lappend(state->computed_states, expr);
	}
	state->codecs = remote_codecs_for_desc(node->ss.ss_ScanTupleSlot->tts_tupleDescriptor, false, NULL);
	{
		TupleDesc	desc = node->ss.ss_ScanTupleSlot->tts_tupleDescriptor;
		List	   *hidden = (List *) list_nth(plan->custom_private, 6);

		state->nreturning = desc->natts;
		state->nanswer = desc->natts + list_length(hidden);
		state->answer_types = palloc(sizeof(Oid) * Max(state->nanswer, 1));
		for (int i = 0; i < desc->natts; i++)
			state->answer_types[i] = TupleDescAttr(desc, i)->atttypid;
		foreach(lc, hidden)
			state->answer_types[desc->natts + foreach_current_index(lc)] = lfirst_oid(lc);
	}
	if (!explain_only || estate->es_param_list_info != NULL || !uses_statement_params(state->param_ids))
		route_write(state, explain_only, false);	/* the run routes again, and notes its keys */
}

/* A result's rows as sorted texts, to compare two replicas' RETURNING. */
static char **
sorted_rows(PGresult *res)
{
	int			n = PQntuples(res);
	char	  **rows = palloc(sizeof(char *) * Max(n, 1));

	for (int r = 0; r < n; r++)
	{
		StringInfoData buf;

		/* each field as its length (-1: NULL) and its bytes: no value can pass for another */
		initStringInfo(&buf);
		for (int c = 0; c < PQnfields(res); c++)
		{
			if (PQgetisnull(res, r, c))
				appendStringInfoString(&buf, "-1:");
			else
			{
				appendStringInfo(&buf, "%d:", PQgetlength(res, r, c));
				appendBinaryStringInfo(&buf, PQgetvalue(res, r, c), PQgetlength(res, r, c));
			}
		}
		rows[r] = buf.data;
	}
	qsort(rows, n, sizeof(char *), compare_names);
	return rows;
}

/* Every replica changed the same rows: the same count and, with RETURNING, the same rows. */
static void
check_write_agrees(RouterWriteState *state, RemoteConnection **conns, RemoteResult *out, int n)
{
	const char *target_name = get_rel_name(list_nth_oid(state->relids, state->target));
	char	  **first = sorted_rows(out[0].result);

	for (int j = 1; j < n; j++)
	{
		bool		same = PQntuples(out[0].result) == PQntuples(out[j].result);

		if (same)
		{
			char	  **other = sorted_rows(out[j].result);

			for (int r = 0; same && r < PQntuples(out[0].result); r++)
				same = strcmp(first[r], other[r]) == 0;
		}
		if (!same)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("replicas \"%s\" and \"%s\" of table %s would change different rows", conns[0]->node,
							conns[j]->node, target_name),
					 errdetail("Node \"%s\" would change %d rows, node \"%s\" %d%s.  Either the replicas hold different "
							   "rows, or the statement's result depends on the node: an UPDATE ... FROM that matches a "
							   "row several times, an order or a LIMIT the statement does not fix, other tables read "
							   "at different moments.", conns[0]->node, PQntuples(out[0].result), conns[j]->node,
							   PQntuples(out[j].result),
							   PQntuples(out[0].result) == PQntuples(out[j].result) ? ", with other values" : ""),
					 errhint("Nothing was changed.  Make the statement's result one (a key for every join, an ORDER "
							 "BY for every LIMIT); compare the replicas with ringshard.verify_table().")));
	}
}

/* Send the statement to every replica at once, in the transaction, and check what they did. */
static void
run_write(RouterWriteState *state, EState *estate)
{
	const char **params = param_texts(state->param_ids, state->computed_states, state->css.ss.ps.ps_ExprContext,
									  NULL, NULL, NULL);
	RemoteConnection **conns = palloc(sizeof(RemoteConnection *) * Max(state->nnodes, 1));
	const void **owners = palloc(sizeof(void *) * Max(state->nnodes, 1));
	RemoteResult *out = palloc0(sizeof(RemoteResult) * Max(state->nnodes, 1));
	const char *tag = estate->es_plannedstmt->commandType == CMD_UPDATE ? "UPDATE" : "DELETE";
	const char *what = psprintf("a %s of table %s", tag, get_rel_name(list_nth_oid(state->relids, state->target)));

	/* writers of one key queue here, before any replica (write_locks.c) */
	if (state->lock_table)
		rsfdw_lock_table_for_write(list_nth_oid(state->relids, state->target));
	else
		rsfdw_lock_key_for_write(list_nth_oid(state->relids, state->target), state->lock_slot);
	/* under the lock, the replicas as they are now (a node may have gone down meanwhile) */
	route_write(state, false, true);
	if (state->nothing || state->nnodes == 0)
		return;
	conns = repalloc(conns, sizeof(RemoteConnection *) * Max(state->nnodes, 1));
	owners = repalloc(owners, sizeof(void *) * Max(state->nnodes, 1));
	out = repalloc(out, sizeof(RemoteResult) * Max(state->nnodes, 1));
	for (int i = 0; i < state->nnodes; i++)
	{
		conns[i] = remote_connection(state->nodes[i], state->userid);
		owners[i] = state;
	}
	remote_connect_all(conns, state->nnodes, false);
	for (int i = 0; i < state->nnodes; i++)
	{
		if (state->moving)
			remote_take_moving_rows(conns[i]);
		remote_note_write(conns[i]);
		remote_send_params(conns[i], state->sql, list_length(state->param_ids), params, true, state);
	}
	remote_receive_owned(conns, owners, state->nnodes, out, 0, 0);
	for (int i = 0; i < state->nnodes; i++)
	{
		(void) remote_answer(conns[i], &out[i], state->sql, what);
		/* the RETURNING rows, then each changed row whole: one row per row changed */
		remote_expect_rows(conns[i], out[i].result, state->nanswer, 0, -1, what);
		remote_expect_formats(conns[i], out[i].result, 0, state->answer_types, what);
		if (strncmp(PQcmdStatus(out[i].result), tag, strlen(tag)) != 0 ||
			strtoll(PQcmdTuples(out[i].result), NULL, 10) != PQntuples(out[i].result))
		{
			remote_set_error(conns[i], psprintf("answered \"%s\" with %d rows to %s", PQcmdStatus(out[i].result),
												PQntuples(out[i].result), what));
			ereport(ERROR,
					(errcode(ERRCODE_PROTOCOL_VIOLATION),
					 errmsg("node \"%s\" answered \"%s\" with %d rows to %s", conns[i]->node,
							PQcmdStatus(out[i].result), PQntuples(out[i].result), what)));
		}
	}
	check_write_agrees(state, conns, out, state->nnodes);
	estate->es_processed += PQntuples(out[0].result);
	state->result = out[0].result;
	for (int i = 1; i < state->nnodes; i++)
		remote_result_free(out[i].result);
}

static TupleTableSlot *
router_write_exec(CustomScanState *node)
{
	RouterWriteState *state = (RouterWriteState *) node;
	TupleTableSlot *slot = node->ss.ss_ScanTupleSlot;

	CHECK_FOR_INTERRUPTS();
	ExecClearTuple(slot);
	if (!state->done)
	{
		state->done = true;
		if (!state->nothing && state->nnodes > 0)
			run_write(state, node->ss.ps.state);
	}
	/* the changed rows' own columns after RETURNING's are for the check only */
	if (state->result == NULL || state->nreturning == 0 || state->next >= PQntuples(state->result))
		return slot;
	for (int j = 0; j < slot->tts_tupleDescriptor->natts; j++)
	{
		slot->tts_isnull[j] = PQgetisnull(state->result, state->next, j);
		slot->tts_values[j] = slot->tts_isnull[j] ? (Datum) 0
			: remote_codec_decode(&state->codecs[j], PQgetvalue(state->result, state->next, j),
								  PQgetlength(state->result, state->next, j), state->nodes[0]);
	}
	state->next++;
	return ExecStoreVirtualTuple(slot);
}

static void
router_write_end(CustomScanState *node)
{
	RouterWriteState *state = (RouterWriteState *) node;

	if (state->result)
		remote_result_free(state->result);
	state->result = NULL;
}

static void
router_write_rescan(CustomScanState *node)
{
	/* a write runs once */
}

static void
router_write_explain(CustomScanState *node, List *ancestors, ExplainState *es)
{
	RouterWriteState *state = (RouterWriteState *) node;

	ExplainPropertyText("Router", "the whole statement to every replica of its key, in one atomic commit", es);
	if (state->nothing)
		ExplainPropertyText("Nodes", "none (the key is NULL)", es);
	else if (state->why_not)
		ExplainPropertyText("Nodes", psprintf("none now: %s", state->why_not), es);
	else if (state->routed)
		ExplainPropertyText("Nodes", sorted_node_names(state->nodes, state->nnodes), es);
	if (es->verbose)
		ExplainPropertyText("Remote SQL", state->sql, es);
}

static CustomExecMethods router_write_exec_methods = {
	.CustomName = "ringshard router write",
	.BeginCustomScan = router_write_begin,
	.ExecCustomScan = router_write_exec,
	.EndCustomScan = router_write_end,
	.ReScanCustomScan = router_write_rescan,
	.ExplainCustomScan = router_write_explain,
};

static Node *
router_write_create_state(CustomScan *plan)
{
	RouterWriteState *state = (RouterWriteState *) newNode(sizeof(RouterWriteState), T_CustomScanState);

	state->css.methods = &router_write_exec_methods;
	return (Node *) state;
}

static CustomScanMethods router_write_methods = {
	.CustomName = "ringshard router write",
	.CreateCustomScanState = router_write_create_state,
};

void
rsfdw_router_init(void)
{
	RegisterCustomScanMethods(&router_scan_methods);
	RegisterCustomScanMethods(&router_write_methods);
}

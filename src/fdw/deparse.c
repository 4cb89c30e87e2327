/*
 * deparse.c
 *		Shippable expressions and their SQL (see deparse.h).
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/transam.h"
#include "catalog/namespace.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "executor/executor.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/clauses.h"
#include "optimizer/optimizer.h"
#include "parser/parsetree.h"
#include "nodes/parsenodes.h"
#include "rewrite/rewriteManip.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/ruleutils.h"
#include "utils/syscache.h"

#include "fdw/deparse.h"
#include "remote/connection.h"
#include "remote/values.h"
#include "routing/placement.h"

/* Built in: part of every PostgreSQL, so the node has the same object. */
static bool
is_builtin(Oid oid)
{
	return oid < FirstGenbkiObjectId;
}

typedef struct ShipContext
{
	PlannerInfo *root;
	RelOptInfo *rel;
	Index		varno;
	Index		excluded_varno; /* an upsert's EXCLUDED row (its columns are the table's), or 0 */
	Oid			relid;
	bool		whole_query;	/* a router statement: columns of any table, subqueries, aggregates */
	Query	   *top_write;		/* ... that is this UPDATE or DELETE */
	const char *reason;			/* why the first part that does not ship does not */
} ShipContext;

/*
 * A value known when the statement starts: an expression of constants,
 * parameters and stable functions (now(), current_date, a stable function of
 * a parameter) with no column of any table and nothing volatile.  It is
 * evaluated once, here, and sent as a typed literal in a parameter hole:
 * every node, and every copy of a row, gets the same value.
 */
static bool
column_or_sublink_walker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	/* a CASE's or a domain check's placeholder stands for a value computed in place, like a column */
	if (IsA(node, Var) || IsA(node, CaseTestExpr) || IsA(node, CoerceToDomainValue) ||
		(IsA(node, Param) && ((Param *) node)->paramkind == PARAM_SUBLINK))
		return true;
	return expression_tree_walker(node, column_or_sublink_walker, context);
}

static bool
is_value_hole(Node *node)
{
	if (node == NULL)
		return false;
	switch (nodeTag(node))
	{
		case T_Const:
		case T_Param:
		case T_List:
		case T_Query:
		case T_TargetEntry:
		case T_FromExpr:
		case T_JoinExpr:
		case T_RangeTblRef:
		case T_RangeTblFunction:
		case T_CommonTableExpr:
		case T_SetOperationStmt:
		case T_SortGroupClause:
		case T_CaseWhen:
			return false;
		default:
			break;
	}
	/* no sublink first: the other walkers do not descend into queries; no column of an outer query either */
	if (checkExprHasSubLink(node) || column_or_sublink_walker(node, NULL))
		return false;
	return !contain_volatile_functions(node) && !contain_subplans(node) &&
		!contain_agg_clause(node) && !contain_window_function(node) && !expression_returns_set(node);
}

/* A type the node surely has: built in, or the type of one of the table's columns (or its array). */
static bool
type_is_shippable(Oid typid, ShipContext *ctx)
{
	Relation	rel;
	bool		found = false;

	if (is_builtin(typid))
		return true;
	if (!OidIsValid(ctx->relid))
		return false;
	rel = RelationIdGetRelation(ctx->relid);
	if (rel == NULL)
		return false;
	for (int i = 0; i < RelationGetDescr(rel)->natts && !found; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(RelationGetDescr(rel), i);

		found = !attr->attisdropped && (attr->atttypid == typid || get_array_type(attr->atttypid) == typid);
	}
	RelationClose(rel);
	return found;
}

/*
 * Output functions that PostgreSQL marks immutable although their text
 * depends on a setting (extra_float_digits, bytea_output): a cast through
 * text of such a type gives another text on the node, whose session pins
 * those settings, than here under the session's own.
 */
static bool
output_depends_on_settings(Oid output)
{
	switch (output)
	{
		case F_FLOAT4OUT:
		case F_FLOAT8OUT:
		case F_BYTEAOUT:
		case F_POINT_OUT:
		case F_LSEG_OUT:
		case F_LINE_OUT:
		case F_PATH_OUT:
		case F_BOX_OUT:
		case F_POLY_OUT:
		case F_CIRCLE_OUT:
		case F_CASH_OUT:
			return true;
		default:
			return false;
	}
}

/* A function the node evaluates exactly as we do: built in and immutable. */
static bool
function_is_shippable(Oid funcid)
{
	return is_builtin(funcid) && func_volatile(funcid) == PROVOLATILE_IMMUTABLE;
}

/*
 * Collations.  Deparsed SQL names no collation: the node derives each one
 * from the columns (the node's table has the same column collations) and
 * the types of literals and parameters, by the parser's rules, in which the
 * default collation yields to any other.  An expression ships only if every
 * collation in it is the one the node derives there: a COLLATE clause that
 * changes a collation, or an operator comparing in another collation than
 * its arguments carry, would compare, sort or group differently on the
 * node, so it is evaluated here.  The database default collation is assumed
 * to be the same on every node, as postgres_fdw assumes of its servers.
 */
typedef struct CollationState
{
	Oid			derived;		/* the non-default collation derived so far, or InvalidOid */
	bool		conflict;		/* two different non-default collations met */
	bool		unsaid;			/* some collation is not the one the node derives */
} CollationState;

static bool query_collations_said(Query *query);

/*
 * The nodes of a query's structure (its target list, join tree, functions
 * in FROM, WITH, set operations): nothing of their own to send or check,
 * only their members.
 */
static bool
is_query_structure(Node *node)
{
	switch (nodeTag(node))
	{
		case T_TargetEntry:
		case T_FromExpr:
		case T_JoinExpr:
		case T_RangeTblFunction:
		case T_CommonTableExpr:
		case T_SetOperationStmt:
			return true;
		default:
			return false;
	}
}

/* Fold the collation a sub-expression ends with into its parent's state. */
static void
collation_fold(CollationState *parent, Oid collid)
{
	if (!OidIsValid(collid) || collid == DEFAULT_COLLATION_OID)
		return;
	if (!OidIsValid(parent->derived))
		parent->derived = collid;
	else if (parent->derived != collid)
		parent->conflict = true;
}

/* The collation an expression ends with, as the node derives it, or unsaid. */
static bool
collation_walker(Node *node, CollationState *state)
{
	CollationState inner = {InvalidOid, false, false};
	Oid			input;
	Oid			output;

	if (node == NULL)
		return false;
	if (IsA(node, Query))
	{
		/* a subquery of a router statement: checked on its own, its result folds nothing */
		if (!query_collations_said((Query *) node))
		{
			state->unsaid = true;
			return true;
		}
		return false;
	}
	if (IsA(node, RangeTblRef) || IsA(node, SortGroupClause))
		return false;
	/* no collation of their own: their members fold into the parent */
	if (IsA(node, List) || is_query_structure(node))
		return expression_tree_walker(node, collation_walker, (void *) state);
	if (is_value_hole(node))
		goto literal;			/* sent as a typed literal */
	switch (nodeTag(node))
	{
		case T_Var:
			collation_fold(state, ((Var *) node)->varcollid);
			return false;
		case T_Const:
		case T_Param:
		literal:
			/* a literal or parameter carries its type's collation, unless COLLATE was folded into it */
			output = exprCollation(node);
			if (OidIsValid(output) && output != get_typcollation(exprType(node)))
			{
				state->unsaid = true;
				return true;
			}
			collation_fold(state, output);
			return false;
		default:
			break;
	}
	if (expression_tree_walker(node, collation_walker, (void *) &inner) || inner.unsaid)
	{
		state->unsaid = true;
		return true;
	}

	/* the collation the operation works in must be the one its arguments give */
	input = exprInputCollation(node);
	if (OidIsValid(input) &&
		!(inner.conflict ? false :
		  OidIsValid(inner.derived) ? input == inner.derived : input == DEFAULT_COLLATION_OID))
	{
		state->unsaid = true;
		return true;
	}

	/* and the collation of its result the one the node gives it */
	output = exprCollation(node);
	if (OidIsValid(output) &&
		!(OidIsValid(inner.derived) && !inner.conflict ? output == inner.derived :
		  output == DEFAULT_COLLATION_OID || output == get_typcollation(exprType(node))))
	{
		state->unsaid = true;
		return true;
	}
	collation_fold(state, output);
	return false;
}

static bool
collations_said(Node *expr)
{
	CollationState state = {InvalidOid, false, false};

	return !collation_walker(expr, &state) && !state.unsaid;
}

/* Each part of a query (its target list, conditions, subqueries) on its own. */
static bool
query_collation_walker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, Query))
		return query_tree_walker((Query *) node, query_collation_walker, context, 0);
	return !collations_said(node);
}

static bool
query_collations_said(Query *query)
{
	return !query_tree_walker(query, query_collation_walker, NULL, 0);
}

/* Refuse a part, saying why (the first reason is the one a message names). */
static bool
refuse_part(ShipContext *ctx, const char *reason)
{
	if (ctx->reason == NULL)
		ctx->reason = reason;
	return true;
}

/* A function's name for a message. */
static char *
function_description(Oid funcid)
{
	char	   *name = get_func_name(funcid);

	if (!is_builtin(funcid))
		return psprintf("function %s() (not built in)", name ? name : "?");
	return psprintf("function %s() (not immutable)", name ? name : "?");
}

static const char *query_unshippable_part(Query *query, ShipContext *ctx);

/*
 * Aggregates a node computes as we do.  Others are immutable too, yet some
 * print values inside (jsonb_object_agg renders a timestamptz in the
 * session's TimeZone): only these go whole.
 */
static bool
aggregate_is_shippable(Oid aggfnoid)
{
	static const char *const names[] = {"count", "sum", "avg", "min", "max", "bool_and", "bool_or", "every",
		"bit_and", "bit_or", "bit_xor", "array_agg", "string_agg", "stddev", "stddev_pop", "stddev_samp",
	"variance", "var_pop", "var_samp"};
	char	   *name;

	if (!function_is_shippable(aggfnoid) || get_func_namespace(aggfnoid) != PG_CATALOG_NAMESPACE)
		return false;
	name = get_func_name(aggfnoid);
	for (int i = 0; name && i < lengthof(names); i++)
		if (strcmp(name, names[i]) == 0)
			return true;
	return false;
}

/* Expression nodes whose result type exprType() gives (not CASE's WHEN, lists, join trees, ...). */
static bool
has_value_type(Node *node)
{
	switch (nodeTag(node))
	{
		case T_Const:
		case T_FuncExpr:
		case T_OpExpr:
		case T_DistinctExpr:
		case T_NullIfExpr:
		case T_RelabelType:
		case T_CoerceViaIO:
		case T_ArrayCoerceExpr:
		case T_CaseExpr:
		case T_CoalesceExpr:
		case T_MinMaxExpr:
		case T_ArrayExpr:
		case T_SubLink:
		case T_SQLValueFunction:
		case T_CollateExpr:
			return true;
		default:
			return false;
	}
}

static bool
ship_walker(Node *node, ShipContext *ctx)
{
	if (node == NULL)
		return false;
	if (ctx->whole_query)
	{
		const char *why;

		if (is_query_structure(node))
			return expression_tree_walker(node, ship_walker, (void *) ctx);
		switch (nodeTag(node))
		{
			case T_Query:
				why = query_unshippable_part((Query *) node, ctx);
				return why ? refuse_part(ctx, why) : false;
			case T_Var:
				if (((Var *) node)->varattno <= 0)
					return refuse_part(ctx, "a system column or a whole row");
				if (remote_type_is_object_reference(((Var *) node)->vartype))
					return refuse_part(ctx, "an object identifier (regclass, ...), which means another object on a node");
				return false;
			case T_Param:
				if (((Param *) node)->paramkind != PARAM_EXTERN && ((Param *) node)->paramkind != PARAM_SUBLINK)
					return refuse_part(ctx, "a parameter of a sublink");
				if (remote_type_is_object_reference(((Param *) node)->paramtype))
					return refuse_part(ctx, "an object identifier (regclass, ...), which means another object on a node");
				if (!is_builtin(((Param *) node)->paramtype))
					return refuse_part(ctx, "a parameter of a type the nodes may not have");
				return false;
			case T_RangeTblRef:
				return false;
			case T_SubLink:
			case T_GroupingFunc:
				return expression_tree_walker(node, ship_walker, (void *) ctx);
			case T_SortGroupClause:
				if (!is_builtin(((SortGroupClause *) node)->eqop) || !is_builtin(((SortGroupClause *) node)->sortop))
					return refuse_part(ctx, "an ordering or grouping by an operator that is not built in");
				return false;
			case T_Aggref:
				if (!aggregate_is_shippable(((Aggref *) node)->aggfnoid) || ((Aggref *) node)->aggdirectargs != NIL)
					return refuse_part(ctx, psprintf("aggregate %s() (only count, sum, avg, min, max, bool_and, "
													 "bool_or, bit_and, bit_or, array_agg, string_agg, stddev and "
													 "variance are sent)", get_func_name(((Aggref *) node)->aggfnoid)));
				return expression_tree_walker(node, ship_walker, (void *) ctx);
			case T_WindowFunc:
				if (((WindowFunc *) node)->winagg ? !aggregate_is_shippable(((WindowFunc *) node)->winfnoid)
					: !function_is_shippable(((WindowFunc *) node)->winfnoid))
					return refuse_part(ctx, psprintf("window %s", function_description(((WindowFunc *) node)->winfnoid)));
				return expression_tree_walker(node, ship_walker, (void *) ctx);
			default:
				break;			/* the rest as for one table */
		}
		if (has_value_type(node) && remote_type_is_object_reference(exprType(node)))
			return refuse_part(ctx, "an object identifier (regclass, ...), which means another object on a node");
		/* an immutable expression of constants ships as it is; a stable one is a value sent */
		if (is_value_hole(node) && !contain_mutable_functions(node))
			goto walk_as_expression;
	}
	if (is_value_hole(node))
	{
		/* evaluated here once, sent as a value */
		if (!type_is_shippable(exprType(node), ctx))
			return refuse_part(ctx, psprintf("a value of type %s, which the nodes may not have",
											 format_type_be(exprType(node))));
		return false;
	}
walk_as_expression:
	switch (nodeTag(node))
	{
		case T_Var:
			{
				Var		   *var = (Var *) node;

				/* a column of the scanned table; system columns differ per copy */
				if ((var->varno != ctx->varno && (ctx->excluded_varno == 0 || var->varno != ctx->excluded_varno)) ||
					var->varlevelsup != 0)
					return refuse_part(ctx, "a column of another table");
				if (var->varattno <= 0)
					return refuse_part(ctx, "a system column (each copy of a row has its own)");
				return false;
			}
		case T_Const:
			if (!type_is_shippable(((Const *) node)->consttype, ctx))
				return refuse_part(ctx, psprintf("a constant of type %s, which the nodes may not have",
												 format_type_be(((Const *) node)->consttype)));
			return false;
		case T_Param:
			{
				Param	   *param = (Param *) node;

				if (param->paramkind != PARAM_EXTERN && param->paramkind != PARAM_EXEC)
					return refuse_part(ctx, "a parameter of a sublink");
				if (!type_is_shippable(param->paramtype, ctx))
					return refuse_part(ctx, "a parameter of a type the nodes may not have");
				return false;
			}
		case T_OpExpr:
		case T_DistinctExpr:
		case T_NullIfExpr:
			{
				OpExpr	   *op = (OpExpr *) node;

				set_opfuncid(op);
				if (!is_builtin(op->opno))
					return refuse_part(ctx, psprintf("operator %s (not built in)", get_opname(op->opno)));
				if (!function_is_shippable(op->opfuncid))
					return refuse_part(ctx, psprintf("operator %s (not immutable: its result depends on the session's settings)", get_opname(op->opno)));
				break;
			}
		case T_ScalarArrayOpExpr:
			{
				ScalarArrayOpExpr *op = (ScalarArrayOpExpr *) node;

				set_sa_opfuncid(op);
				if (!is_builtin(op->opno) || !function_is_shippable(op->opfuncid))
					return refuse_part(ctx, psprintf("operator %s (not built in and immutable)", get_opname(op->opno)));
				break;
			}
		case T_FuncExpr:
			{
				FuncExpr   *func = (FuncExpr *) node;

				if (!function_is_shippable(func->funcid))
					return refuse_part(ctx, function_description(func->funcid));
				break;
			}
		case T_RelabelType:
		case T_ArrayExpr:
			/* the type a cast makes, or an array's */
			if (!type_is_shippable(exprType(node), ctx))
				return refuse_part(ctx, IsA(node, RelabelType) ? "a cast to a type the nodes may not have"
								   : "an array of a type the nodes may not have");
			break;
		case T_CaseExpr:
			{
				CaseExpr   *c = (CaseExpr *) node;
				ListCell   *lc;

				/*
				 * CASE x WHEN v THEN ...: each WHEN is "CaseTestExpr = v"; only
				 * that form is sent (as "WHEN v"), its test walked alone.
				 */
				if (c->arg)
				{
					if (ship_walker((Node *) c->arg, ctx))
						return true;
					foreach(lc, c->args)
					{
						CaseWhen   *when = lfirst(lc);
						Node	   *test = (Node *) when->expr;

						if (!IsA(test, OpExpr) || list_length(((OpExpr *) test)->args) != 2 ||
							!IsA(strip_implicit_coercions(linitial(((OpExpr *) test)->args)), CaseTestExpr))
							return refuse_part(ctx, "a CASE whose WHEN clauses are not plain values");
						set_opfuncid((OpExpr *) test);
						if (!is_builtin(((OpExpr *) test)->opno) || !function_is_shippable(((OpExpr *) test)->opfuncid))
							return refuse_part(ctx, "a CASE comparing with an operator that is not built in and immutable");
						if (ship_walker(lsecond(((OpExpr *) test)->args), ctx) || ship_walker((Node *) when->result, ctx))
							return true;
					}
					return ship_walker((Node *) c->defresult, ctx);
				}
				break;
			}
		case T_CaseWhen:
		case T_CoalesceExpr:
			break;
		case T_MinMaxExpr:
			if (!is_builtin(((MinMaxExpr *) node)->minmaxtype))
				return refuse_part(ctx, "GREATEST or LEAST of a type that is not built in");
			break;
		case T_CoerceViaIO:
			{
				/* a cast through text, e.g. integer to text: when both I/O functions are immutable */
				CoerceViaIO *c = (CoerceViaIO *) node;
				Oid			argtype = exprType((Node *) c->arg);
				Oid			output;
				Oid			input;
				Oid			ioparam;
				bool		varlena;

				if (!is_builtin(argtype) || !is_builtin(c->resulttype))
					return refuse_part(ctx, "a cast through text of a type that is not built in");
				getTypeOutputInfo(argtype, &output, &varlena);
				getTypeInputInfo(c->resulttype, &input, &ioparam);
				if (func_volatile(output) != PROVOLATILE_IMMUTABLE || func_volatile(input) != PROVOLATILE_IMMUTABLE ||
					output_depends_on_settings(output))
					return refuse_part(ctx, psprintf("a cast of %s to %s, whose text depends on the session's settings",
													 format_type_be(argtype), format_type_be(c->resulttype)));
				break;
			}
		case T_BoolExpr:
		case T_NullTest:
		case T_BooleanTest:
		case T_List:
			break;
		case T_SubPlan:
		case T_AlternativeSubPlan:
		case T_SubLink:
			return refuse_part(ctx, "a subquery");
		case T_Aggref:
		case T_WindowFunc:
			return refuse_part(ctx, "an aggregate or window function");
		default:
			/* anything else is evaluated here */
			return refuse_part(ctx, psprintf("an expression of kind %d that is not sent to nodes", (int) nodeTag(node)));
	}
	return expression_tree_walker(node, ship_walker, (void *) ctx);
}

bool
rsfdw_is_shippable(PlannerInfo *root, RelOptInfo *rel, Expr *expr)
{
	return rsfdw_unshippable_reason(root, rel, expr) == NULL;
}

static const char *
unshippable_reason(ShipContext *ctx, Expr *expr)
{
	/* volatile expressions never ship (the node would evaluate them once per copy) */
	if (contain_volatile_functions((Node *) expr))
		return "a volatile function (each node, and each copy of a row, would get its own value)";
	if (ship_walker((Node *) expr, ctx))
		return ctx->reason ? ctx->reason : "a part that is not sent to nodes";
	if (!collations_said((Node *) expr))
		return "a collation the nodes would not derive (a COLLATE clause, or an operator comparing in another collation)";
	return NULL;
}

const char *
rsfdw_unshippable_reason(PlannerInfo *root, RelOptInfo *rel, Expr *expr)
{
	ShipContext ctx;

	memset(&ctx, 0, sizeof(ctx));
	ctx.root = root;
	ctx.rel = rel;
	ctx.varno = rel->relid;
	ctx.relid = rel->relid > 0 ? planner_rt_fetch(rel->relid, root)->relid : InvalidOid;
	return unshippable_reason(&ctx, expr);
}

const char *
rsfdw_upsert_unshippable_reason(Oid relid, Index varno, Index excluded_varno, Expr *expr)
{
	ShipContext ctx;

	memset(&ctx, 0, sizeof(ctx));
	ctx.varno = varno;
	ctx.excluded_varno = excluded_varno;
	ctx.relid = relid;
	return unshippable_reason(&ctx, expr);
}

/* Whether a sort or grouping list uses built-in operators only. */
static bool
sort_groups_built_in(List *clauses)
{
	ListCell   *lc;

	foreach(lc, clauses)
	{
		SortGroupClause *sgc = lfirst_node(SortGroupClause, lc);

		if (!is_builtin(sgc->eqop) || !is_builtin(sgc->sortop))
			return false;
	}
	return true;
}

/*
 * Why a query level of a router statement cannot be sent whole, or NULL:
 * it must be a plain SELECT of distributed tables (checked by the router),
 * functions, VALUES and subqueries, with every expression built in and
 * immutable (the node evaluates all of it: now() there is another time).
 */
static const char *
query_unshippable_part(Query *query, ShipContext *ctx)
{
	ListCell   *lc;

	if (query->utilityStmt != NULL ||
		(query->commandType != CMD_SELECT && !(query == ctx->top_write &&
											   (query->commandType == CMD_UPDATE || query->commandType == CMD_DELETE))))
		return "a statement that writes";
	if (query->rowMarks != NIL || query->hasForUpdate)
		return "FOR UPDATE or FOR SHARE";
	if (query->hasModifyingCTE)
		return "a WITH that writes";
	foreach(lc, query->rtable)
	{
		RangeTblEntry *rte = lfirst(lc);

		if (rte->securityQuals != NIL)
			return "a table with row security";
		if (rte->rtekind == RTE_SUBQUERY && rte->security_barrier)
			return "a security barrier view (the node would not keep its conditions first)";
		if (rte->rtekind == RTE_TABLEFUNC || rte->rtekind == RTE_NAMEDTUPLESTORE)
			return "a table function";
		if (rte->rtekind == RTE_FUNCTION && rte->funcordinality)
			return "WITH ORDINALITY";
	}
	if (!sort_groups_built_in(query->sortClause) || !sort_groups_built_in(query->groupClause) ||
		!sort_groups_built_in(query->distinctClause))
		return "an ordering or grouping by an operator that is not built in";
	foreach(lc, query->windowClause)
	{
		WindowClause *wc = lfirst_node(WindowClause, lc);

		if (!sort_groups_built_in(wc->partitionClause) || !sort_groups_built_in(wc->orderClause) ||
			wc->startOffset != NULL || wc->endOffset != NULL)
			return "a window frame with an offset, or an ordering by an operator that is not built in";
	}
	if (query_tree_walker(query, ship_walker, (void *) ctx, 0))
		return ctx->reason ? ctx->reason : "a part that is not sent to nodes";
	return NULL;
}

/*
 * Why a whole SELECT, UPDATE or DELETE (a router statement, fdw/router.c)
 * cannot be sent to a node as it is, or NULL.  Volatile and stable functions stay here (the
 * node would give its own now()), as do types the nodes may not have.
 */
const char *
rsfdw_query_unshippable_reason(Query *query)
{
	ShipContext ctx;
	const char *why;

	memset(&ctx, 0, sizeof(ctx));
	ctx.whole_query = true;
	ctx.top_write = query->commandType == CMD_SELECT ? NULL : query;
	if (contain_volatile_functions((Node *) query))
		return "a volatile function";
	why = query_unshippable_part(query, &ctx);
	if (why)
		return why;
	if (!query_collations_said(query))
		return "a collation the nodes would not derive";
	return NULL;
}

char *
rsfdw_relation_name(Oid relid)
{
	char	   *relname = get_rel_name(relid);
	char	   *nspname = get_namespace_name(get_rel_namespace(relid));

	if (relname == NULL || nspname == NULL)
		elog(ERROR, "cache lookup failed for relation %u", relid);
	return quote_qualified_identifier(nspname, relname);
}

char *
rsfdw_type_name(Oid typid, int32 typmod)
{
	return format_type_extended(typid, typmod, FORMAT_TYPE_TYPEMOD_GIVEN | FORMAT_TYPE_FORCE_QUALIFY);
}

char *
rsfdw_column_name(Oid relid, AttrNumber attnum)
{
	return (char *) quote_identifier(get_attname(relid, attnum, false));
}

/* A typed literal; the caller has pinned the transmission settings. */
static void
append_literal_pinned(StringInfo buf, Datum value, bool isnull, Oid typid, int32 typmod)
{
	if (isnull)
		appendStringInfo(buf, "NULL::%s", rsfdw_type_name(typid, typmod));
	else
		appendStringInfo(buf, "%s::%s", quote_literal_cstr(remote_value_text(typid, value, false)),
						 rsfdw_type_name(typid, typmod));
}

void
rsfdw_append_literal(StringInfo buf, Datum value, bool isnull, Oid typid, int32 typmod)
{
	int			level = remote_transmission_begin(!isnull && remote_type_involves_money(typid));

	append_literal_pinned(buf, value, isnull, typid, typmod);
	remote_transmission_end(level);
}

void
rsfdw_append_literal_array(StringInfo buf, const Datum *values, int n, Oid typid)
{
	int			level = remote_transmission_begin(remote_type_involves_money(typid));

	appendStringInfoString(buf, "ARRAY[");
	for (int i = 0; i < n; i++)
	{
		if (i > 0)
			appendStringInfoString(buf, ", ");
		append_literal_pinned(buf, values[i], false, typid, -1);
	}
	appendStringInfo(buf, "]::%s[]", rsfdw_type_name(typid, -1));
	remote_transmission_end(level);
}

void
rsfdw_deparse_init(DeparseContext *ctx, PlannerInfo *root, RelOptInfo *rel, Index varno, List **params)
{
	memset(ctx, 0, sizeof(*ctx));
	ctx->root = root;
	ctx->scanrel = rel;
	ctx->varno = varno;
	ctx->params = params;
	initStringInfo(&ctx->current);
}

void
rsfdw_append(DeparseContext *ctx, const char *text)
{
	appendStringInfoString(&ctx->current, text);
}

/* Close the current text piece and add a hole for a parameter expression. */
static void
add_param_hole(DeparseContext *ctx, Expr *expr)
{
	int			index = 0;
	ListCell   *lc = NULL;

	/*
	 * The same expression is the same hole; but a constant made a hole has
	 * one of its own, so that a prepared text does not depend on which of a
	 * statement's constants happen to be equal ("SET a = 1, b = 1" and
	 * "SET a = 1, b = 2" are one text).
	 */
	if (!(ctx->consts_as_holes && IsA(expr, Const)))
		foreach(lc, *ctx->params)
		{
			index++;
			if (equal(lfirst(lc), expr))
				break;
		}
	if (lc == NULL)
	{
		*ctx->params = lappend(*ctx->params, expr);
		index = list_length(*ctx->params);
	}
	if (ctx->current.len > 0)
		ctx->pieces = lappend(ctx->pieces, makeString(pstrdup(ctx->current.data)));
	resetStringInfo(&ctx->current);
	ctx->pieces = lappend(ctx->pieces, makeInteger(index));
}

List *
rsfdw_deparse_finish(DeparseContext *ctx)
{
	if (ctx->current.len > 0)
		ctx->pieces = lappend(ctx->pieces, makeString(pstrdup(ctx->current.data)));
	resetStringInfo(&ctx->current);
	return ctx->pieces;
}

/* An operator's name for SQL: plain in pg_catalog, OPERATOR(schema.op) elsewhere. */
/* An operator's name as SQL: qualified unless it is in pg_catalog. */
static char *
operator_name(Oid opno)
{
	HeapTuple	tuple = SearchSysCache1(OPEROID, ObjectIdGetDatum(opno));
	Form_pg_operator form;
	char	   *name;

	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for operator %u", opno);
	form = (Form_pg_operator) GETSTRUCT(tuple);
	if (form->oprnamespace == PG_CATALOG_NAMESPACE)
		name = pstrdup(NameStr(form->oprname));
	else
		name = psprintf("OPERATOR(%s.%s)",
						quote_identifier(get_namespace_name(form->oprnamespace)), NameStr(form->oprname));
	ReleaseSysCache(tuple);
	return name;
}

/* A two-argument form: before, the first argument, between, the second, after. */
static void
append_binary(DeparseContext *ctx, const char *before, List *args, const char *between, const char *after)
{
	rsfdw_append(ctx, before);
	rsfdw_append_expr(ctx, linitial(args));
	rsfdw_append(ctx, between);
	rsfdw_append_expr(ctx, lsecond(args));
	rsfdw_append(ctx, after);
}

static void
append_args(DeparseContext *ctx, List *args, bool variadic)
{
	ListCell   *lc;
	bool		first = true;

	foreach(lc, args)
	{
		if (!first)
			rsfdw_append(ctx, ", ");
		if (variadic && lnext(args, lc) == NULL)
			rsfdw_append(ctx, "VARIADIC ");
		rsfdw_append_expr(ctx, lfirst(lc));
		first = false;
	}
}

void
rsfdw_append_expr(DeparseContext *ctx, Expr *expr)
{
	if (expr == NULL)
		return;
	if (is_value_hole((Node *) expr))
	{
		/* evaluated here when the statement runs, sent as a value */
		add_param_hole(ctx, expr);
		return;
	}
	switch (nodeTag(expr))
	{
		case T_Var:
			{
				Var		   *var = (Var *) expr;
				bool		excluded = ctx->excluded_varno != 0 && var->varno == ctx->excluded_varno;
				Oid			relid = ctx->root ? planner_rt_fetch(var->varno, ctx->root)->relid : ctx->relid;

				appendStringInfo(&ctx->current, "%s.%s", excluded ? "excluded" : "t",
								 rsfdw_column_name(relid, var->varattno));
				break;
			}
		case T_Const:
			{
				Const	   *c = (Const *) expr;

				/*
				 * For a text prepared on the nodes, a constant is a hole like
				 * a parameter ($n::type, its literal an argument): a
				 * simple-protocol client's statements that differ only in
				 * their constants are then one prepared statement.
				 */
				if (ctx->consts_as_holes && !c->constisnull && remote_type_preparable(c->consttype) &&
					get_typtype(c->consttype) != TYPTYPE_PSEUDO)
					add_param_hole(ctx, expr);
				else
					rsfdw_append_literal(&ctx->current, c->constvalue, c->constisnull, c->consttype,
										 c->consttypmod);
				break;
			}
		case T_Param:
			add_param_hole(ctx, expr);
			break;
		case T_OpExpr:
			{
				OpExpr	   *op = (OpExpr *) expr;
				char	   *name = operator_name(op->opno);

				if (list_length(op->args) == 2)
					append_binary(ctx, "(", op->args, psprintf(" %s ", name), ")");
				else
				{
					appendStringInfo(&ctx->current, "(%s ", name);
					rsfdw_append_expr(ctx, linitial(op->args));
					rsfdw_append(ctx, ")");
				}
				break;
			}
		case T_DistinctExpr:
			append_binary(ctx, "(", ((OpExpr *) expr)->args, " IS DISTINCT FROM ", ")");
			break;
		case T_NullIfExpr:
			append_binary(ctx, "NULLIF(", ((OpExpr *) expr)->args, ", ", ")");
			break;
		case T_ScalarArrayOpExpr:
			{
				ScalarArrayOpExpr *op = (ScalarArrayOpExpr *) expr;

				append_binary(ctx, "(", op->args,
							  psprintf(" %s %s (", operator_name(op->opno), op->useOr ? "ANY" : "ALL"), "))");
				break;
			}
		case T_FuncExpr:
			{
				FuncExpr   *func = (FuncExpr *) expr;

				if (func->funcformat == COERCE_IMPLICIT_CAST)
				{
					rsfdw_append_expr(ctx, linitial(func->args));
					break;
				}
				if (func->funcformat == COERCE_EXPLICIT_CAST)
				{
					int32		typmod;

					(void) exprIsLengthCoercion((Node *) expr, &typmod);
					rsfdw_append(ctx, "(");
					rsfdw_append_expr(ctx, linitial(func->args));
					appendStringInfo(&ctx->current, ")::%s", rsfdw_type_name(func->funcresulttype, typmod));
					break;
				}
				appendStringInfo(&ctx->current, "%s(",
								 quote_qualified_identifier(get_namespace_name(get_func_namespace(func->funcid)),
															get_func_name(func->funcid)));
				append_args(ctx, func->args, func->funcvariadic);
				rsfdw_append(ctx, ")");
				break;
			}
		case T_RelabelType:
			{
				RelabelType *r = (RelabelType *) expr;

				if (r->relabelformat == COERCE_IMPLICIT_CAST)
					rsfdw_append_expr(ctx, r->arg);
				else
				{
					rsfdw_append(ctx, "(");
					rsfdw_append_expr(ctx, r->arg);
					appendStringInfo(&ctx->current, ")::%s", rsfdw_type_name(r->resulttype, r->resulttypmod));
				}
				break;
			}
		case T_CoerceViaIO:
			{
				CoerceViaIO *c = (CoerceViaIO *) expr;

				rsfdw_append(ctx, "(");
				rsfdw_append_expr(ctx, c->arg);
				appendStringInfo(&ctx->current, ")::%s", rsfdw_type_name(c->resulttype, -1));
				break;
			}
		case T_ArrayExpr:
			{
				ArrayExpr  *a = (ArrayExpr *) expr;

				rsfdw_append(ctx, "ARRAY[");
				append_args(ctx, a->elements, false);
				appendStringInfo(&ctx->current, "]::%s", rsfdw_type_name(a->array_typeid, -1));
				break;
			}
		case T_BoolExpr:
			{
				BoolExpr   *b = (BoolExpr *) expr;
				ListCell   *lc;
				bool		first = true;

				if (b->boolop == NOT_EXPR)
				{
					rsfdw_append(ctx, "(NOT ");
					rsfdw_append_expr(ctx, linitial(b->args));
					rsfdw_append(ctx, ")");
					break;
				}
				rsfdw_append(ctx, "(");
				foreach(lc, b->args)
				{
					if (!first)
						rsfdw_append(ctx, b->boolop == AND_EXPR ? " AND " : " OR ");
					rsfdw_append_expr(ctx, lfirst(lc));
					first = false;
				}
				rsfdw_append(ctx, ")");
				break;
			}
		case T_NullTest:
			{
				NullTest   *n = (NullTest *) expr;

				rsfdw_append(ctx, "(");
				rsfdw_append_expr(ctx, n->arg);
				rsfdw_append(ctx, n->nulltesttype == IS_NULL ? " IS NULL)" : " IS NOT NULL)");
				break;
			}
		case T_BooleanTest:
			{
				BooleanTest *b = (BooleanTest *) expr;
				static const char *const tests[] = {" IS TRUE)", " IS NOT TRUE)", " IS FALSE)",
				" IS NOT FALSE)", " IS UNKNOWN)", " IS NOT UNKNOWN)"};

				rsfdw_append(ctx, "(");
				rsfdw_append_expr(ctx, b->arg);
				rsfdw_append(ctx, tests[b->booltesttype]);
				break;
			}
		case T_List:
			{
				ListCell   *lc;
				bool		first = true;

				foreach(lc, (List *) expr)
				{
					if (!first)
						rsfdw_append(ctx, " AND ");
					rsfdw_append_expr(ctx, lfirst(lc));
					first = false;
				}
				break;
			}
		case T_CaseExpr:
			{
				CaseExpr   *c = (CaseExpr *) expr;
				ListCell   *lc;

				rsfdw_append(ctx, "(CASE");
				if (c->arg)
				{
					rsfdw_append(ctx, " ");
					rsfdw_append_expr(ctx, c->arg);
				}
				foreach(lc, c->args)
				{
					CaseWhen   *when = lfirst(lc);

					rsfdw_append(ctx, " WHEN ");
					/* CASE x WHEN v: the test is "CaseTestExpr = v", only v is written */
					rsfdw_append_expr(ctx, c->arg ? lsecond(((OpExpr *) when->expr)->args) : when->expr);
					rsfdw_append(ctx, " THEN ");
					rsfdw_append_expr(ctx, when->result);
				}
				if (c->defresult)
				{
					rsfdw_append(ctx, " ELSE ");
					rsfdw_append_expr(ctx, c->defresult);
				}
				rsfdw_append(ctx, " END)");
				break;
			}
		case T_CoalesceExpr:
			rsfdw_append(ctx, "COALESCE(");
			append_args(ctx, ((CoalesceExpr *) expr)->args, false);
			rsfdw_append(ctx, ")");
			break;
		case T_MinMaxExpr:
			rsfdw_append(ctx, ((MinMaxExpr *) expr)->op == IS_GREATEST ? "GREATEST(" : "LEAST(");
			append_args(ctx, ((MinMaxExpr *) expr)->args, false);
			rsfdw_append(ctx, ")");
			break;
		default:
			elog(ERROR, "ringshard: cannot send an expression of node type %d to a node", (int) nodeTag(expr));
	}
}

RsParamValues *
rsfdw_eval_params(List *param_states, List *param_exprs, ExprContext *econtext)
{
	RsParamValues *params = palloc0(sizeof(RsParamValues));
	int			n = list_length(param_exprs);
	ListCell   *lc;

	params->n = n;
	params->values = palloc0(sizeof(Datum) * Max(n, 1));
	params->nulls = palloc0(sizeof(bool) * Max(n, 1));
	params->types = palloc0(sizeof(Oid) * Max(n, 1));
	params->typmods = palloc0(sizeof(int32) * Max(n, 1));
	/* evaluated as the user's expressions, under the user's settings; printed pinned (rsfdw_template_text) */
	foreach(lc, param_exprs)
	{
		int			i = foreach_current_index(lc);

		params->types[i] = exprType(lfirst(lc));
		params->typmods[i] = exprTypmod(lfirst(lc));
		params->values[i] = ExecEvalExpr(list_nth(param_states, i), econtext, &params->nulls[i]);
		params->money |= remote_type_involves_money(params->types[i]);
	}
	return params;
}

/*
 * The one loop over a template's pieces.  A hole is printed as its
 * parameter's literal (params, no numbers), as $n (no params: EXPLAIN), or,
 * for a statement prepared on a node (numbers), as $n::type, n given out in
 * order of first use (numbers[], shared by the templates of one statement)
 * and the literal appended to arguments the first time.  The caller pins
 * the transmission settings.
 */
static void
append_template(StringInfo buf, List *pieces, RsParamValues *params, int *numbers, int *nparams,
				StringInfo arguments)
{
	ListCell   *lc;

	foreach(lc, pieces)
	{
		Node	   *piece = lfirst(lc);
		int			index;

		if (IsA(piece, String))
		{
			appendStringInfoString(buf, strVal(piece));
			continue;
		}
		index = intVal(piece) - 1;
		if (params == NULL)
		{
			appendStringInfo(buf, "$%d", index + 1);
			continue;
		}
		if (index < 0 || index >= params->n)
			elog(ERROR, "ringshard: template parameter %d of %d", index + 1, params->n);
		if (numbers == NULL)
		{
			append_literal_pinned(buf, params->values[index], params->nulls[index], params->types[index],
								  params->typmods[index]);
			continue;
		}
		if (numbers[index] == 0)
		{
			numbers[index] = ++(*nparams);
			appendStringInfoString(arguments, *nparams > 1 ? ", " : "(");
			append_literal_pinned(arguments, params->values[index], params->nulls[index], params->types[index],
								  params->typmods[index]);
		}
		appendStringInfo(buf, "$%d::%s", numbers[index],
						 rsfdw_type_name(params->types[index], params->typmods[index]));
	}
}

char *
rsfdw_template_text(List *pieces, RsParamValues *params)
{
	StringInfoData buf;
	int			level = params ? remote_transmission_begin(params->money) : 0;

	initStringInfo(&buf);
	append_template(&buf, pieces, params, NULL, NULL, NULL);
	if (params)
		remote_transmission_end(level);
	return buf.data;
}

/* ----- Scans ----- */

RsScanSQL *
rsfdw_scan_sql(const RsScanPlan *plan, RsParamValues *params)
{
	RsScanSQL  *sql = palloc(sizeof(RsScanSQL));

	sql->select = rsfdw_template_text(plan->select_tmpl, params);
	sql->from = rsfdw_template_text(plan->from_tmpl, params);
	sql->where = rsfdw_template_text(plan->where_tmpl, params);
	sql->tail = rsfdw_template_text(plan->tail_tmpl, params);
	return sql;
}

void
rsfdw_deparse_scan(PlannerInfo *root, RelOptInfo *rel, Oid relid, List *remote_exprs, List *sort_exprs,
				   List *sort_directions, List **params, RsScanPlan *plan)
{
	DeparseContext ctx;
	ListCell   *lc;
	ListCell   *dir;

	/* SELECT: the columns execution reads, by attnum */
	rsfdw_deparse_init(&ctx, root, rel, rel->relid, params);
	if (plan->retrieved == NIL)
		rsfdw_append(&ctx, "NULL");
	foreach(lc, plan->retrieved)
	{
		rsfdw_append(&ctx, foreach_current_index(lc) > 0 ? ", t." : "t.");
		rsfdw_append(&ctx, rsfdw_column_name(relid, lfirst_int(lc)));
	}
	plan->select_tmpl = rsfdw_deparse_finish(&ctx);
	rsfdw_deparse_from_where(root, rel, relid, remote_exprs, params, plan);

	/* ORDER BY: the sort keys, each "expr" with "ASC|DESC NULLS FIRST|LAST" */
	rsfdw_deparse_init(&ctx, root, rel, rel->relid, params);
	forboth(lc, sort_exprs, dir, sort_directions)
	{
		rsfdw_append(&ctx, foreach_current_index(lc) == 0 ? " ORDER BY " : ", ");
		rsfdw_append_expr(&ctx, lfirst(lc));
		rsfdw_append(&ctx, strVal(lfirst(dir)));
	}
	plan->tail_tmpl = rsfdw_deparse_finish(&ctx);
}

void
rsfdw_deparse_from_where(PlannerInfo *root, RelOptInfo *rel, Oid relid, List *remote_exprs, List **params,
						 RsScanPlan *plan)
{
	DeparseContext ctx;

	rsfdw_deparse_init(&ctx, root, rel, rel->relid, params);
	rsfdw_append(&ctx, " FROM ");
	rsfdw_append(&ctx, rsfdw_relation_name(relid));
	rsfdw_append(&ctx, " t");
	plan->from_tmpl = rsfdw_deparse_finish(&ctx);

	rsfdw_deparse_init(&ctx, root, rel, rel->relid, params);
	rsfdw_append(&ctx, " WHERE ");
	if (remote_exprs)
		rsfdw_append_expr(&ctx, (Expr *) remote_exprs);
	else
		rsfdw_append(&ctx, "true");
	plan->where_tmpl = rsfdw_deparse_finish(&ctx);
}

char *
rsfdw_router_sql(const RsScanSQL *sql, const char *key_column, Oid key_type, const Datum *keys, int nkeys)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, "SELECT %s%s%s AND t.%s ", sql->select, sql->from, sql->where, key_column);
	if (nkeys == 1)
	{
		appendStringInfoString(&buf, "OPERATOR(pg_catalog.=) ");
		rsfdw_append_literal(&buf, keys[0], false, key_type, -1);
	}
	else
	{
		appendStringInfoString(&buf, "OPERATOR(pg_catalog.=) ANY (");
		rsfdw_append_literal_array(&buf, keys, nkeys, key_type);
		appendStringInfoChar(&buf, ')');
	}
	appendStringInfoString(&buf, sql->tail);
	return buf.data;
}

char *
rsfdw_router_sql_param(const RsScanSQL *sql, const char *key_column, Oid key_type, bool array)
{
	return array
		? psprintf("SELECT %s%s%s AND t.%s OPERATOR(pg_catalog.=) ANY ($1::%s)%s", sql->select, sql->from,
				   sql->where, key_column, rsfdw_type_name(get_array_type(key_type), -1), sql->tail)
		: psprintf("SELECT %s%s%s AND t.%s OPERATOR(pg_catalog.=) $1::%s%s", sql->select, sql->from, sql->where,
				   key_column, rsfdw_type_name(key_type, -1), sql->tail);
}

char *
rsfdw_router_param_text(Oid key_type, const Datum *keys, int nkeys)
{
	int16		typlen;
	bool		typbyval;
	char		typalign;

	if (nkeys == 1)
		return remote_value_text(key_type, keys[0], true);
	get_typlenbyvalalign(key_type, &typlen, &typbyval, &typalign);
	return remote_value_text(get_array_type(key_type),
							 PointerGetDatum(construct_array((Datum *) keys, nkeys, key_type, typlen, typbyval, typalign)),
							 true);
}

char *
rsfdw_fanout_sql(const char *cursor, bool binary, const RsScanSQL *sql, const char *filter, int fetch_size)
{
	return psprintf("DECLARE %s %sNO SCROLL CURSOR FOR SELECT %s%s%s%s%s; FETCH %d FROM %s", cursor,
					binary ? "BINARY " : "", sql->select, sql->from, sql->where, filter, sql->tail, fetch_size,
					cursor);
}

char *
rsfdw_fetch_sql(const char *cursor, int fetch_size)
{
	return psprintf("FETCH %d FROM %s", fetch_size, cursor);
}

char *
rsfdw_close_sql(const char *cursor)
{
	return psprintf("CLOSE %s", cursor);
}

/* A call of ringshard_worker.<function>(table, key [, keyspace], excluded, version) for the rows (alias t). */
static char *
key_function_sql(const char *function, TablePlacement *placement, const char *excluded, const char *version)
{
	char	   *table = rsfdw_relation_name(placement->relid);

	if (placement->keyspace_attnum > 0)
		return psprintf("ringshard_worker.%s(%s::pg_catalog.regclass, t.%s, t.%s, %s, %s)", function,
						quote_literal_cstr(table), quote_identifier(placement->key_column),
						quote_identifier(placement->keyspace_column), excluded, version);
	return psprintf("ringshard_worker.%s(%s::pg_catalog.regclass, t.%s, %s, %s)", function,
					quote_literal_cstr(table), quote_identifier(placement->key_column), excluded, version);
}

char *
rsfdw_reads_here_sql(TablePlacement *placement, const char *excluded, const char *version)
{
	return key_function_sql("reads_here", placement, excluded, version);
}

char *
rsfdw_replica_slot_sql(TablePlacement *placement, const char *excluded, const char *version)
{
	return key_function_sql("replica_slot", placement, excluded, version);
}

char *
rsfdw_excluded_nodes_sql(TablePlacement *placement, const bool *excluded)
{
	int			n = placement_node_count(placement);
	StringInfoData names;
	bool		first = true;

	/* the excluded nodes as a text[] literal */
	initStringInfo(&names);
	appendStringInfoChar(&names, '{');
	for (int i = 0; i < n; i++)
	{
		if (!excluded[i])
			continue;
		if (!first)
			appendStringInfoChar(&names, ',');
		appendStringInfoChar(&names, '"');
		for (const char *c = placement_node_name(placement, i); *c; c++)
		{
			if (*c == '"' || *c == '\\')
				appendStringInfoChar(&names, '\\');
			appendStringInfoChar(&names, *c);
		}
		appendStringInfoChar(&names, '"');
		first = false;
	}
	appendStringInfoChar(&names, '}');
	return psprintf("%s::pg_catalog.text[]", quote_literal_cstr(names.data));
}

char *
rsfdw_fanout_filter(TablePlacement *placement, const bool *excluded, int64 topology_version)
{
	return psprintf(" AND %s", rsfdw_reads_here_sql(placement, rsfdw_excluded_nodes_sql(placement, excluded),
												   psprintf("%lld::pg_catalog.int8", (long long) topology_version)));
}

/* The moves (all, or those node serves) as the argument a node tests its rows' positions with. */
static char *
moves_sql(TablePlacement *placement, const int *serves, int node)
{
	const MovingRanges *m = &placement->moving;
	StringInfoData list;

	initStringInfo(&list);
	for (int i = 0; i < m->count; i++)
	{
		if (serves && serves[i] != node)
			continue;
		if (placement->ring)
		{
			/* (start, end] as inclusive bounds; a range past the top in two */
			if (m->start[i] < m->end[i])
				appendStringInfo(&list, "%s" UINT64_FORMAT "," UINT64_FORMAT, list.len ? "," : "",
								 m->start[i] + 1, m->end[i]);
			else
			{
				if (m->start[i] < PG_UINT64_MAX)
					appendStringInfo(&list, "%s" UINT64_FORMAT "," UINT64_FORMAT, list.len ? "," : "",
									 m->start[i] + 1, PG_UINT64_MAX);
				appendStringInfo(&list, "%s0," UINT64_FORMAT, list.len ? "," : "", m->end[i]);
			}
		}
		else
			for (int p = m->first_partition[i]; p <= m->last_partition[i]; p++)
				appendStringInfo(&list, "%s%d", list.len ? "," : "", p);
	}
	if (list.len == 0)
		return NULL;
	if (placement->ring)
	{
		/* token_in_ranges wants its pairs sorted: the wrapped halves go in order */
		uint64	   *bounds;
		int			n = 0;
		char	   *tok;
		char	   *save;
		StringInfoData sorted;

		bounds = palloc(sizeof(uint64) * (m->count * 4 + 2));
		for (tok = strtok_r(list.data, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
			bounds[n++] = strtoull(tok, NULL, 10);
		/* pairs: insertion sort by low bound (few pairs are out of order) */
		for (int a = 2; a < n; a += 2)
			for (int b = a; b >= 2 && bounds[b - 2] > bounds[b]; b -= 2)
			{
				uint64		lo = bounds[b];
				uint64		hi = bounds[b + 1];

				bounds[b] = bounds[b - 2];
				bounds[b + 1] = bounds[b - 1];
				bounds[b - 2] = lo;
				bounds[b - 1] = hi;
			}
		initStringInfo(&sorted);
		for (int a = 0; a < n; a++)
			appendStringInfo(&sorted, "%s" UINT64_FORMAT, a ? "," : "", bounds[a]);
		return psprintf("ringshard_worker.token_in_ranges(%s, '{%s}'::pg_catalog.ringtoken[])",
						m->position_sql, sorted.data);
	}
	return psprintf("%s OPERATOR(pg_catalog.=) ANY ('{%s}'::pg_catalog.int4[])", m->position_sql, list.data);
}

char *
rsfdw_moving_fanout_filter(TablePlacement *placement, const char *base, const int *serves, int node)
{
	char	   *all = moves_sql(placement, NULL, -1);
	char	   *mine = moves_sql(placement, serves, node);
	const char *first = base[0] ? base + strlen(" AND ") : "true";

	if (mine == NULL)
		return psprintf(" AND (%s) AND NOT %s", first, all);
	return psprintf(" AND (((%s) AND NOT %s) OR %s)", first, all, mine);
}

char *
rsfdw_upper_sql(const RsScanPlan *plan, const RsScanSQL *sql, const char *filter, const char *limit_clause,
				bool late)
{
	if (late)
		return psprintf("SELECT s.*, EXISTS (SELECT FROM %s t WHERE true%s) FROM (SELECT %s%s%s%s%s%s%s)%s",
						plan->late->row, filter, sql->select, plan->late->inner_select, sql->from, sql->where,
						sql->tail, plan->late->inner_order, limit_clause, plan->late->outer);
	return psprintf("SELECT %s%s%s%s%s%s", sql->select, sql->from, sql->where, filter, sql->tail, limit_clause);
}

/* ----- Writes ----- */

char *
rsfdw_insert_values_sql(const char *table, const char *columns, const char *values)
{
	return psprintf("INSERT INTO %s (%s) VALUES %s", table, columns, values);
}

/*
 * The same INSERT, checked on the node: the node's transaction fails there
 * unless it stored exactly `rows` rows (ringshard_worker.expect_stored_rows),
 * so a PREPARE TRANSACTION or COMMIT sent after it in the same string runs
 * only when it did.  Its answer is one row: the count.
 */
char *
rsfdw_insert_values_checked_sql(const char *table, const char *columns, const char *values, int64 rows)
{
	return psprintf("WITH rs_stored AS (INSERT INTO %s (%s) VALUES %s RETURNING 1) "
					"SELECT ringshard_worker.expect_stored_rows(pg_catalog.count(*), " INT64_FORMAT ") FROM rs_stored",
					table, columns, values, rows);
}

/*
 * An upsert's conflict clause for the nodes, alias t for the table and
 * excluded for the proposed row, as a template (its values known when the
 * statement starts are holes): ON CONFLICT [(columns) [WHERE ...]] DO
 * NOTHING | DO UPDATE SET ... [WHERE ...].  The caller has checked that
 * every expression ships (rsfdw_upsert_unshippable_reason) and that the
 * conflict target names plain columns.
 */
List *
rsfdw_deparse_on_conflict(OnConflictExpr *oc, Oid relid, Index varno, List **params)
{
	DeparseContext ctx;
	ListCell   *lc;

	rsfdw_deparse_init(&ctx, NULL, NULL, varno, params);
	ctx.relid = relid;
	ctx.excluded_varno = oc->exclRelIndex;
	rsfdw_append(&ctx, " ON CONFLICT");
	if (oc->arbiterElems != NIL)
	{
		rsfdw_append(&ctx, " (");
		foreach(lc, oc->arbiterElems)
		{
			InferenceElem *elem = lfirst_node(InferenceElem, lc);

			if (!IsA(elem->expr, Var))
				elog(ERROR, "ringshard: a conflict target that is not a column");
			if (foreach_current_index(lc) > 0)
				rsfdw_append(&ctx, ", ");
			rsfdw_append(&ctx, rsfdw_column_name(relid, ((Var *) elem->expr)->varattno));
		}
		rsfdw_append(&ctx, ")");
		if (oc->arbiterWhere)
		{
			rsfdw_append(&ctx, " WHERE ");
			rsfdw_append_expr(&ctx, (Expr *) oc->arbiterWhere);
		}
	}
	if (oc->action == ONCONFLICT_NOTHING)
		rsfdw_append(&ctx, " DO NOTHING");
	else
	{
		bool		first = true;

		rsfdw_append(&ctx, " DO UPDATE SET ");
		foreach(lc, oc->onConflictSet)
		{
			TargetEntry *te = lfirst_node(TargetEntry, lc);

			if (te->resjunk)
				continue;
			if (!first)
				rsfdw_append(&ctx, ", ");
			first = false;
			rsfdw_append(&ctx, rsfdw_column_name(relid, te->resno));
			rsfdw_append(&ctx, " = ");
			rsfdw_append_expr(&ctx, te->expr);
		}
		if (oc->onConflictWhere)
		{
			rsfdw_append(&ctx, " WHERE ");
			rsfdw_append_expr(&ctx, (Expr *) oc->onConflictWhere);
		}
	}
	return rsfdw_deparse_finish(&ctx);
}

char *
rsfdw_upsert_sql(const char *table, const char *columns, const char *values, const char *on_conflict,
				 bool returning)
{
	return psprintf("INSERT INTO %s AS t (%s) VALUES %s%s%s%s", table, columns, values, on_conflict,
					returning ? " RETURNING " : "", returning ? columns : "");
}

char *
rsfdw_copy_from_sql(const char *table, const char *columns, bool binary)
{
	return psprintf("COPY %s (%s) FROM STDIN%s", table, columns, binary ? " (FORMAT binary)" : "");
}

char *
rsfdw_column_list(Relation rel)
{
	TupleDesc	desc = RelationGetDescr(rel);
	StringInfoData columns;

	initStringInfo(&columns);
	for (int i = 0; i < desc->natts; i++)
		if (!TupleDescAttr(desc, i)->attisdropped)
			appendStringInfo(&columns, "%s%s", columns.len ? ", " : "",
							 quote_identifier(NameStr(TupleDescAttr(desc, i)->attname)));
	return columns.data;
}

const char *
rsfdw_locking_clause(int strength, bool nowait)
{
	const char *clause;

	switch ((LockClauseStrength) strength)
	{
		case LCS_FORKEYSHARE:
			clause = " FOR KEY SHARE";
			break;
		case LCS_FORSHARE:
			clause = " FOR SHARE";
			break;
		case LCS_FORNOKEYUPDATE:
			clause = " FOR NO KEY UPDATE";
			break;
		case LCS_FORUPDATE:
			clause = " FOR UPDATE";
			break;
		default:
			return "";
	}
	return nowait ? psprintf("%s NOWAIT", clause) : clause;
}

char *
rsfdw_step_copy_out_sql(Oid relid, const char *columns, const char *condition, bool binary)
{
	return psprintf("COPY (SELECT %s FROM %s t WHERE %s) TO STDOUT%s", columns, rsfdw_relation_name(relid),
					condition, binary ? " (FORMAT binary)" : "");
}

char *
rsfdw_step_copy_in_sql(Oid relid, const char *columns, bool binary)
{
	return psprintf("COPY %s (%s) FROM STDIN%s", rsfdw_relation_name(relid), columns,
					binary ? " (FORMAT binary)" : "");
}

char *
rsfdw_rehome_condition(bool shared)
{
	if (shared)
		return pstrdup("($1::pg_catalog.text OPERATOR(pg_catalog.=) ANY (pg_catalog.replicas_of(t))"
					   " AND pg_catalog.cardinality(pg_catalog.replicas_of(t)) OPERATOR(pg_catalog.>) 1)");
	return pstrdup("NOT ($1::pg_catalog.text OPERATOR(pg_catalog.=) ANY (pg_catalog.replicas_of(t)))");
}

/*
 * A digest of a row t: SHA-256 of its text form, the columns named in the
 * coordinator's order (so a node's physical column order does not matter).
 * Node sessions pin every setting text forms depend on (remote/values.h),
 * and textsend gives the bytes in the link's encoding, so two nodes digest
 * identical rows alike whatever their own encodings.
 */
static char *
row_digest_sql(Relation rel, const char *alias)
{
	TupleDesc	desc = RelationGetDescr(rel);
	StringInfoData sql;
	bool		first = true;

	initStringInfo(&sql);
	appendStringInfoString(&sql, "pg_catalog.encode(pg_catalog.sha256(pg_catalog.textsend(ROW(");
	for (int i = 0; i < desc->natts; i++)
	{
		if (TupleDescAttr(desc, i)->attisdropped)
			continue;
		appendStringInfo(&sql, "%s%s.%s", first ? "" : ", ", alias, quote_identifier(NameStr(TupleDescAttr(desc, i)->attname)));
		first = false;
	}
	appendStringInfoString(&sql, ")::pg_catalog.text)), 'hex')");
	return sql.data;
}

/*
 * The page's positions first (the condition needs only the routing of each
 * row), then its rows by position: the digest is computed for the page's
 * rows only.  Step 2 takes the next positions in order (its rows stay, so
 * the next page must start after them all); step 1 takes the first rows
 * the scan of the positions after $2 finds, and stops there (its rows are
 * deleted; rehome_rows ends with a pass from the start).
 */
char *
rsfdw_rehome_page_sql(Relation rel, const char *key_column, bool shared, int batch_size)
{
	char	   *relation = rsfdw_relation_name(RelationGetRelid(rel));

	return psprintf("SELECT s.ctid::pg_catalog.text, s.%s::pg_catalog.text, %s, r.node"
					" FROM %s s, pg_catalog.unnest(pg_catalog.replicas_of(s)) r(node)"
					" WHERE s.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT t.ctid FROM %s t"
					" WHERE %s AND t.ctid OPERATOR(pg_catalog.>) $2::pg_catalog.tid%s LIMIT %d))"
					" ORDER BY s.ctid",
					quote_identifier(key_column), row_digest_sql(rel, "s"), relation, relation,
					rsfdw_rehome_condition(shared), shared ? " ORDER BY t.ctid" : "", batch_size);
}

/*
 * One lookup by key per row asked (LATERAL ... LIMIT 1 keeps it a lookup:
 * as a semi-join, a target the planner thinks empty was hashed whole, its
 * every row digested, for every batch).
 */
char *
rsfdw_rehome_present_sql(Relation rel, const char *key_column, Oid key_type)
{
	return psprintf("SELECT c.position FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.text[]),"
					" pg_catalog.unnest($2::pg_catalog.text[])) WITH ORDINALITY c(row_key, row_digest, position),"
					" LATERAL (SELECT FROM %s t WHERE t.%s OPERATOR(pg_catalog.=) c.row_key::%s"
					" AND %s OPERATOR(pg_catalog.=) c.row_digest LIMIT 1) held",
					rsfdw_relation_name(RelationGetRelid(rel)), quote_identifier(key_column),
					rsfdw_type_name(key_type, -1), row_digest_sql(rel, "t"));
}

char *
rsfdw_rehome_delete_sql(Relation rel, char **ctids, char **digests, int n)
{
	StringInfoData sql;

	/*
	 * Each position with its own digest: after a concurrent update the
	 * recheck follows the row to its new version, whose position then
	 * differs (a TID scan's recheck does not test the position list).
	 */
	initStringInfo(&sql);
	appendStringInfo(&sql, "DELETE FROM %s t WHERE %s AND (t.ctid::pg_catalog.text OPERATOR(pg_catalog.||) ' ' "
					 "OPERATOR(pg_catalog.||) %s) OPERATOR(pg_catalog.=) ANY ('{",
					 rsfdw_relation_name(RelationGetRelid(rel)), rsfdw_ctid_condition(ctids, n), row_digest_sql(rel, "t"));
	for (int i = 0; i < n; i++)
		appendStringInfo(&sql, "%s\"%s %s\"", i ? "," : "", ctids[i], digests[i]);
	appendStringInfo(&sql, "}'::pg_catalog.text[]) AND %s", rsfdw_rehome_condition(false));
	return sql.data;
}

char *
rsfdw_ctid_condition(char **ctids, int n)
{
	StringInfoData sql;

	initStringInfo(&sql);
	appendStringInfoString(&sql, "t.ctid OPERATOR(pg_catalog.=) ANY ('{");
	for (int i = 0; i < n; i++)
		appendStringInfo(&sql, "%s\"%s\"", i ? "," : "", ctids[i]);
	appendStringInfoString(&sql, "}'::pg_catalog.tid[])");
	return sql.data;
}

char *
rsfdw_truncate_sql(Oid relid, bool cascade)
{
	return psprintf("TRUNCATE %s%s", rsfdw_relation_name(relid), cascade ? " CASCADE" : "");
}

char *
rsfdw_key_filter_sql(const char *key_column, Oid key_type, const Datum *keys, int nkeys)
{
	StringInfoData buf;

	if (nkeys == 0)
		return " AND false";
	initStringInfo(&buf);
	appendStringInfo(&buf, " AND t.%s OPERATOR(pg_catalog.=) ANY (", key_column);
	rsfdw_append_literal_array(&buf, keys, nkeys, key_type);
	appendStringInfoChar(&buf, ')');
	return buf.data;
}

char *
rsfdw_direct_modify_sql(const RsDirectPlan *plan, const char *statement, const char *where, const char *key_filter,
						const char *counts, const char *slots)
{
	StringInfoData sql;
	ListCell   *lc;

	/*
	 * Each row counts once, on the node where counts is true (its first
	 * replica); slots (replica_slot(), or NULL) says which replica of the row
	 * this node is, and the answer ends with a row per slot and how many
	 * rows this node changed in it: rows whose first column is NULL (and, for
	 * RETURNING, whose flag is NULL).
	 */
	initStringInfo(&sql);
	if (plan->has_returning)
	{
		/*
		 * The CTE's columns named by position: a column of the table may be
		 * called rs_counts.  The rows returned: flag, NULL, the columns, NULL;
		 * then the slots: NULL, slot, NULLs, count.
		 */
		int			ncolumns = list_length(plan->returning);

		appendStringInfoString(&sql, "WITH m (rs_counts, rs_slot");
		for (int i = 1; i <= ncolumns; i++)
			appendStringInfo(&sql, ", rs_c%d", i);
		appendStringInfo(&sql, ") AS (%s%s%s RETURNING %s, %s", statement, where, key_filter, counts,
						 slots ? slots : "NULL::pg_catalog.int4");
		foreach(lc, plan->returning)
			appendStringInfo(&sql, ", t.%s", rsfdw_column_name(plan->relid, lfirst_int(lc)));
		appendStringInfoString(&sql, ") SELECT rs_counts, NULL::pg_catalog.int4");
		for (int i = 1; i <= ncolumns; i++)
			appendStringInfo(&sql, ", rs_c%d", i);
		appendStringInfoString(&sql, ", NULL::pg_catalog.int8 FROM m WHERE rs_counts UNION ALL SELECT NULL, rs_slot");
		for (int i = 1; i <= ncolumns; i++)
			appendStringInfoString(&sql, ", NULL");
		appendStringInfoString(&sql, ", pg_catalog.count(*) FROM m WHERE rs_slot IS NOT NULL GROUP BY rs_slot");
	}
	else
		/* the rows the statement counts and the rows this node changed (stat_nodes); then the slots */
		appendStringInfo(&sql, "WITH m AS (%s%s%s RETURNING %s AS rs_counts, %s AS rs_slot)"
						 " SELECT NULL::pg_catalog.int4, pg_catalog.count(*) FILTER (WHERE rs_counts),"
						 " pg_catalog.count(*) FROM m"
						 " UNION ALL SELECT rs_slot, pg_catalog.count(*), NULL FROM m"
						 " WHERE rs_slot IS NOT NULL GROUP BY rs_slot",
						 statement, where, key_filter, counts, slots ? slots : "NULL::pg_catalog.int4");
	return sql.data;
}

bool
rsfdw_direct_modify_prepared(const RsDirectPlan *plan, RsParamValues *params, const char *key_column, Oid key_type,
							 const Datum *keys, int nkeys, const char *counts, const char *slots, char **sql,
							 int *nparams, char **arguments)
{
	StringInfoData args;
	int		   *numbers;
	int			level;
	StringInfoData statement;
	StringInfoData where;
	char	   *key_filter;

	if (nkeys == 0 || !remote_type_preparable(key_type))
		return false;
	for (int i = 0; i < params->n; i++)
		if (!remote_type_preparable(params->types[i]))
			return false;
	numbers = palloc0(sizeof(int) * Max(params->n, 1));
	*nparams = 0;
	initStringInfo(&args);
	level = remote_transmission_begin(params->money || remote_type_involves_money(key_type));
	initStringInfo(&statement);
	append_template(&statement, plan->statement_prepared_tmpl != NIL ? plan->statement_prepared_tmpl
					: plan->statement_tmpl, params, numbers, nparams, &args);
	initStringInfo(&where);
	append_template(&where, plan->where_tmpl, params, numbers, nparams, &args);
	remote_transmission_end(level);
	/* the keys: one array, the last parameter */
	key_filter = psprintf(" AND t.%s OPERATOR(pg_catalog.=) ANY ($%d::%s[])", key_column, ++(*nparams),
						  rsfdw_type_name(key_type, -1));
	appendStringInfoString(&args, *nparams > 1 ? ", " : "(");
	rsfdw_append_literal_array(&args, keys, nkeys, key_type);
	appendStringInfoChar(&args, ')');
	*sql = rsfdw_direct_modify_sql(plan, statement.data, where.data, key_filter, counts, slots);
	*arguments = args.data;
	return true;
}

/* ----- DDL for the nodes ----- */

/* The prefix, then (name = 'value', ...), of storage or operator-class options; nothing when there are none. */
static void
append_definition_options(StringInfo buf, const char *prefix, List *options)
{
	ListCell   *lc;

	if (options == NIL)
		return;
	appendStringInfoString(buf, prefix);
	appendStringInfoChar(buf, '(');
	foreach(lc, options)
	{
		DefElem    *d = lfirst(lc);

		if (foreach_current_index(lc) > 0)
			appendStringInfoString(buf, ", ");
		if (d->defnamespace)
			appendStringInfo(buf, "%s.", quote_identifier(d->defnamespace));
		appendStringInfoString(buf, quote_identifier(d->defname));
		if (d->arg)
			appendStringInfo(buf, " = %s", quote_literal_cstr(defGetString(d)));
	}
	appendStringInfoChar(buf, ')');
}

/* A list of column names (String nodes), quoted. */
static void
append_name_list(StringInfo buf, List *names)
{
	ListCell   *lc;

	foreach(lc, names)
		appendStringInfo(buf, "%s%s", foreach_current_index(lc) ? ", " : "", quote_identifier(strVal(lfirst(lc))));
}

char *
rsfdw_deparse_unique_constraint(const char *table, const char *name, Constraint *con)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, "ALTER TABLE %s ADD CONSTRAINT %s %s%s (", table, quote_identifier(name),
					 con->contype == CONSTR_PRIMARY ? "PRIMARY KEY" : "UNIQUE",
					 con->contype == CONSTR_UNIQUE && con->nulls_not_distinct ? " NULLS NOT DISTINCT" : "");
	append_name_list(&buf, con->keys);
	appendStringInfoChar(&buf, ')');
	if (con->including)
	{
		appendStringInfoString(&buf, " INCLUDE (");
		append_name_list(&buf, con->including);
		appendStringInfoChar(&buf, ')');
	}
	append_definition_options(&buf, " WITH ", con->options);
	if (con->indexspace)
		appendStringInfo(&buf, " USING INDEX TABLESPACE %s", quote_identifier(con->indexspace));
	if (con->deferrable)
		appendStringInfoString(&buf, " DEFERRABLE");
	if (con->initdeferred)
		appendStringInfoString(&buf, " INITIALLY DEFERRED");
	return buf.data;
}

char *
rsfdw_deparse_create_index(IndexStmt *stmt, Oid relid, const char *table, const char *name)
{
	StringInfoData buf;
	List	   *context = deparse_context_for(get_rel_name(relid), relid);
	ListCell   *lc;

	initStringInfo(&buf);
	appendStringInfo(&buf, "CREATE %sINDEX %s%s ON %s USING %s (", stmt->unique ? "UNIQUE " : "",
					 stmt->if_not_exists ? "IF NOT EXISTS " : "", quote_identifier(name), table,
					 quote_identifier(stmt->accessMethod));
	foreach(lc, stmt->indexParams)
	{
		IndexElem  *elem = lfirst(lc);

		if (foreach_current_index(lc) > 0)
			appendStringInfoString(&buf, ", ");
		if (elem->name)
			appendStringInfoString(&buf, quote_identifier(elem->name));
		else
			appendStringInfo(&buf, "(%s)", deparse_expression(elem->expr, context, false, false));
		if (elem->collation)
			appendStringInfo(&buf, " COLLATE %s", NameListToQuotedString(elem->collation));
		if (elem->opclass)
			appendStringInfo(&buf, " %s", NameListToQuotedString(elem->opclass));
		append_definition_options(&buf, "", elem->opclassopts);
		if (elem->ordering == SORTBY_DESC)
			appendStringInfoString(&buf, " DESC");
		if (elem->nulls_ordering == SORTBY_NULLS_FIRST)
			appendStringInfoString(&buf, " NULLS FIRST");
		else if (elem->nulls_ordering == SORTBY_NULLS_LAST)
			appendStringInfoString(&buf, " NULLS LAST");
	}
	appendStringInfoChar(&buf, ')');
	if (stmt->indexIncludingParams)
	{
		appendStringInfoString(&buf, " INCLUDE (");
		foreach(lc, stmt->indexIncludingParams)
			appendStringInfo(&buf, "%s%s", foreach_current_index(lc) ? ", " : "",
							 quote_identifier(((IndexElem *) lfirst(lc))->name));
		appendStringInfoChar(&buf, ')');
	}
	if (stmt->nulls_not_distinct)
		appendStringInfoString(&buf, " NULLS NOT DISTINCT");
	append_definition_options(&buf, " WITH ", stmt->options);
	if (stmt->tableSpace)
		appendStringInfo(&buf, " TABLESPACE %s", quote_identifier(stmt->tableSpace));
	if (stmt->whereClause)
		appendStringInfo(&buf, " WHERE %s", deparse_expression(stmt->whereClause, context, false, false));
	return buf.data;
}

char *
rsfdw_deparse_column_type(Oid relid, AttrNumber attnum)
{
	Oid			typid;
	int32		typmod;
	Oid			collid;
	char	   *sql;

	get_atttypetypmodcoll(relid, attnum, &typid, &typmod, &collid);
	sql = format_type_extended(typid, typmod, FORMAT_TYPE_TYPEMOD_GIVEN | FORMAT_TYPE_FORCE_QUALIFY);
	/* the column's collation, which decides its order and equality on the node too */
	if (OidIsValid(collid))
	{
		HeapTuple	tuple = SearchSysCache1(COLLOID, ObjectIdGetDatum(collid));
		Form_pg_collation form;

		if (!HeapTupleIsValid(tuple))
			elog(ERROR, "cache lookup failed for collation %u", collid);
		form = (Form_pg_collation) GETSTRUCT(tuple);
		sql = psprintf("%s COLLATE %s", sql,
					   quote_qualified_identifier(get_namespace_name(form->collnamespace), NameStr(form->collname)));
		ReleaseSysCache(tuple);
	}
	return sql;
}

/* Parameters of the node's statement: $n renumbered from 1 in order of use, each with an explicit cast. */
typedef struct ParamRenumbering
{
	List	   *original_ids;	/* of the node's $1, $2, ...: the statement's, or 0 for a value computed here */
	List	   *computed;		/* the expressions of those computed here, in order */
} ParamRenumbering;

static Node *
renumber_params_mutator(Node *node, ParamRenumbering *ctx)
{
	if (node == NULL)
		return NULL;
	if (IsA(node, Query))
		return (Node *) query_tree_mutator((Query *) node, renumber_params_mutator, ctx, 0);
	if (is_value_hole(node) && contain_mutable_functions(node))
	{
		/* now(), current_date, a stable function of a parameter: evaluated here once, sent as a parameter */
		Param	   *param = makeNode(Param);

		ctx->original_ids = lappend_int(ctx->original_ids, 0);
		ctx->computed = lappend(ctx->computed, copyObject(node));
		param->paramkind = PARAM_EXTERN;
		param->paramid = list_length(ctx->original_ids);
		param->paramtype = exprType(node);
		param->paramtypmod = exprTypmod(node);
		param->paramcollid = exprCollation(node);
		param->location = -1;
		return (Node *) makeRelabelType((Expr *) param, param->paramtype, param->paramtypmod, param->paramcollid,
										COERCE_EXPLICIT_CAST);
	}
	if (IsA(node, Param) && ((Param *) node)->paramkind == PARAM_EXTERN)
	{
		Param	   *param = (Param *) copyObject(node);
		int			position = -1;
		ListCell   *lc;

		foreach(lc, ctx->original_ids)
			if (lfirst_int(lc) == param->paramid)
				position = foreach_current_index(lc);
		if (position < 0)
		{
			ctx->original_ids = lappend_int(ctx->original_ids, param->paramid);
			position = list_length(ctx->original_ids) - 1;
		}
		param->paramid = position + 1;
		/* $1::type: the node must not infer another type from the context */
		return (Node *) makeRelabelType((Expr *) param, param->paramtype, param->paramtypmod, param->paramcollid,
										COERCE_EXPLICIT_CAST);
	}
	return expression_tree_mutator(node, renumber_params_mutator, ctx);
}

/*
 * ruleutils indents its output over many lines: one line reads better in
 * EXPLAIN and in the node's log.  Runs of white space outside literals and
 * quoted names become one space (inside quotes, '' and "" toggle twice).
 */
static char *
one_line(const char *sql)
{
	StringInfoData buf;
	char		quote = 0;
	bool		space = false;

	initStringInfo(&buf);
	for (const char *p = sql; *p; p++)
	{
		if (quote == 0 && (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r'))
		{
			space = buf.len > 0;
			continue;
		}
		if (space)
			appendStringInfoChar(&buf, ' ');
		space = false;
		if (quote == 0 && (*p == '\'' || *p == '"'))
			quote = *p;
		else if (quote != 0 && *p == quote)
			quote = 0;
		appendStringInfoChar(&buf, *p);
	}
	return buf.data;
}

/* Whether a name is a column of one of the query level's range table entries. */
static bool
names_a_column(Query *query, const char *name)
{
	ListCell   *lc;

	foreach(lc, query->rtable)
	{
		RangeTblEntry *rte = lfirst(lc);
		ListCell   *cc;

		if (rte->eref == NULL)
			continue;
		foreach(cc, rte->eref->colnames)
			if (strcmp(strVal(lfirst(cc)), name) == 0)
				return true;
	}
	return false;
}

/*
 * A SELECT's output names as the node gets them.  ORDER BY reads a bare name
 * as an output column first, and with one relation at the top PostgreSQL's
 * deparsing prints a sort key such as c.id bare: in SELECT c.name AS id ...
 * ORDER BY c.id the node would sort by the name.  So an output named like a
 * column of the top level, but not that column itself, is renamed (to
 * column<n>, a name no relation of the level has): the coordinator reads a
 * node's columns by position, never by name.  Set operations sort by their
 * output names and keep them.
 */
static void
rename_outputs_named_like_columns(Query *query)
{
	ListCell   *lc;

	if (query->commandType != CMD_SELECT || query->setOperations != NULL)
		return;
	foreach(lc, query->targetList)
	{
		TargetEntry *tle = lfirst(lc);
		Var		   *var = (Var *) tle->expr;
		int			n = tle->resno;

		if (tle->resjunk || tle->resname == NULL || !names_a_column(query, tle->resname))
			continue;
		if (IsA(var, Var) && var->varlevelsup == 0 && var->varattno > 0 &&
			strcmp(get_rte_attribute_name(rt_fetch(var->varno, query->rtable), var->varattno), tle->resname) == 0)
			continue;			/* the column itself: the bare name means it either way */
		do
			tle->resname = psprintf("column%d", n++);
		while (names_a_column(query, tle->resname));
	}
}

/*
 * A router statement (fdw/router.c) as a node runs it: PostgreSQL's own
 * deparsing of the whole query, with every name qualified (search_path is
 * pg_catalog meanwhile), literals printed under the pinned transmission
 * settings, and the parameters it uses renumbered $1..$n, each with an
 * explicit cast; *param_ids are their numbers in the statement.  A value
 * known when the statement starts (now(), current_setting(...)) becomes a
 * parameter too, its id 0 and its expression in *computed: the node gets the
 * coordinator's value, as a write of one table does.
 */
char *
rsfdw_router_sql_text(Query *query, List **param_ids, List **computed)
{
	ParamRenumbering ctx = {NIL, NIL};
	Query	   *copy = query_tree_mutator(copyObject(query), renumber_params_mutator, &ctx, 0);
	int			transmission = remote_transmission_begin(true);
	int			nest = NewGUCNestLevel();
	char	   *sql;

	rename_outputs_named_like_columns(copy);

	(void) set_config_option("search_path", "pg_catalog", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0,
							 false);
	sql = one_line(pg_get_querydef(copy, false));
	AtEOXact_GUC(true, nest);
	remote_transmission_end(transmission);
	*param_ids = ctx.original_ids;
	*computed = ctx.computed;
	return sql;
}

/*
 * planner.c
 *		Planning scans of distributed tables (see fdw.h).
 *
 * The WHERE clause is split three ways: a condition that fixes the sharding
 * key to values known at execution (constants, parameters, stable
 * expressions) makes a router scan; conditions the nodes can evaluate are
 * sent; the rest is evaluated here.  A sort order made of the table's
 * columns is sent too and the sorted streams are merged here, so ORDER BY
 * never needs a local sort of every row.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "access/stratnum.h"
#include "catalog/pg_opfamily.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/clauses.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/paths.h"
#include "optimizer/planmain.h"
#include "optimizer/prep.h"
#include "optimizer/restrictinfo.h"
#include "optimizer/tlist.h"
#include "parser/parse_coerce.h"
#include "parser/parsetree.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/typcache.h"

#include "fdw/deparse.h"
#include "fdw/fdw.h"
#include "fdw/upper.h"

/* Costs: a round trip to the nodes dominates small queries. */
#define RS_ROUNDTRIP_COST	25.0
#define RS_FANOUT_STARTUP	100.0
#define RS_ROW_TRANSFER_COST 0.01

/* Strip implicit relabelings (varchar = text compares texts). */
static Node *
strip_relabel(Node *node)
{
	while (node && IsA(node, RelabelType))
		node = (Node *) ((RelabelType *) node)->arg;
	return node;
}

/* A value known once execution starts: no column of any table, nothing volatile. */
static bool
is_execution_constant(Node *node)
{
	return !contain_var_clause(node) && !contain_volatile_functions(node) &&
		!contain_agg_clause(node) && !contain_window_function(node) && !contain_subplans(node);
}

static bool
is_column(Node *node, Index varno, AttrNumber attnum)
{
	node = strip_relabel(node);
	return node && IsA(node, Var) && ((Var *) node)->varno == varno && ((Var *) node)->varattno == attnum &&
		((Var *) node)->varlevelsup == 0;
}

/*
 * A join clause column = outer expression: the outer side becomes a
 * parameter of a nested loop's inner scan (createplan replaces its Vars).
 */
static bool
match_join_equality(PlannerInfo *root, Expr *clause, Index varno, AttrNumber attnum, Oid eqop, Expr **value)
{
	OpExpr	   *op;
	Node	   *other;

	if (!IsA(clause, OpExpr) || ((OpExpr *) clause)->opno != eqop || list_length(((OpExpr *) clause)->args) != 2)
		return false;
	op = (OpExpr *) clause;
	if (is_column(linitial(op->args), varno, attnum))
		other = lsecond(op->args);
	else if (is_column(lsecond(op->args), varno, attnum))
		other = linitial(op->args);
	else
		return false;
	if (contain_volatile_functions(other) || contain_subplans(other) ||
		bms_is_member(varno, pull_varnos(root, other)))
		return false;
	*value = (Expr *) other;
	return true;
}

/*
 * A narrower integer type whose values all convert exactly to the key's:
 * bigint_key = 5 compares int8 with int4 (the literal's type), and the value
 * routes as the int8 it equals.  Wider values are not converted (an int4 key
 * compared with 5000000000 matches no row; the conversion would fail).
 */
static bool
widens_to_key(Oid value_type, Oid key_type)
{
	if (key_type == INT8OID)
		return value_type == INT4OID || value_type == INT2OID;
	if (key_type == INT4OID)
		return value_type == INT2OID;
	return false;
}

/*
 * Whether opno is the equality of the key's type or, for integer keys, the
 * integer operator family's equality of the key and a narrower integer type
 * (in either order); *value_type is then the other side's type.
 */
bool
rsfdw_is_key_equality(Oid opno, Oid eqop, Oid key_type, bool key_on_left, Oid *value_type)
{
	Oid			left;
	Oid			right;
	Oid			other;

	if (opno == eqop)
	{
		*value_type = key_type;
		return true;
	}
	op_input_types(opno, &left, &right);
	if ((key_on_left ? left : right) != key_type)
		return false;
	other = key_on_left ? right : left;
	if (!widens_to_key(other, key_type) ||
		get_opfamily_member(INTEGER_BTREE_FAM_OID, left, right, BTEqualStrategyNumber) != opno)
		return false;
	*value_type = other;
	return true;
}

/* The value as the key's type (a no-op when it already is). */
Expr *
rsfdw_value_as_key(Expr *value, Oid value_type, Oid key_type, bool is_array)
{
	Node	   *coerced;
	Oid			from = is_array ? get_array_type(value_type) : value_type;
	Oid			to = is_array ? get_array_type(key_type) : key_type;

	if (value_type == key_type)
		return value;
	coerced = coerce_to_target_type(NULL, (Node *) value, from, to, -1, COERCION_IMPLICIT,
									COERCE_IMPLICIT_CAST, -1);
	if (coerced == NULL)
		elog(ERROR, "no conversion from type %u to the key type %u", from, to);
	return (Expr *) eval_const_expressions(NULL, coerced);
}

/*
 * column = value, value = column, or column = ANY (array value), with the
 * column type's own equality (so that equal values have equal key bytes) or,
 * for an integer key, with a narrower integer value (converted to the key's
 * type: *value is then of the key's type).
 */
static bool
match_equality(Expr *clause, Index varno, AttrNumber attnum, Oid eqop, Oid key_type, Expr **value,
			   bool *is_array)
{
	Oid			value_type;

	if (IsA(clause, OpExpr))
	{
		OpExpr	   *op = (OpExpr *) clause;
		Node	   *left;
		Node	   *right;

		if (list_length(op->args) != 2)
			return false;
		left = linitial(op->args);
		right = lsecond(op->args);
		if (is_column(left, varno, attnum) && is_execution_constant(right) &&
			rsfdw_is_key_equality(op->opno, eqop, key_type, true, &value_type))
			*value = (Expr *) right;
		else if (is_column(right, varno, attnum) && is_execution_constant(left) &&
				 rsfdw_is_key_equality(op->opno, eqop, key_type, false, &value_type))
			*value = (Expr *) left;
		else
			return false;
		*is_array = false;
		*value = rsfdw_value_as_key(*value, value_type, key_type, false);
		return true;
	}
	if (IsA(clause, ScalarArrayOpExpr))
	{
		ScalarArrayOpExpr *op = (ScalarArrayOpExpr *) clause;

		if (!op->useOr || list_length(op->args) != 2 ||
			!is_column(linitial(op->args), varno, attnum) || !is_execution_constant(lsecond(op->args)) ||
			!rsfdw_is_key_equality(op->opno, eqop, key_type, true, &value_type))
			return false;
		*value = rsfdw_value_as_key(lsecond(op->args), value_type, key_type, true);
		*is_array = true;
		return true;
	}
	return false;
}

void
rsGetForeignRelSize(PlannerInfo *root, RelOptInfo *baserel, Oid foreigntableid)
{
	RsRelInfo  *info = palloc0(sizeof(RsRelInfo));
	Oid			key_eqop;
	Oid			keyspace_eqop = InvalidOid;
	ListCell   *lc;
	Selectivity selectivity;
	double		tuples;

	info->relid = foreigntableid;
	rsfdw_table_info(foreigntableid, &info->key_attnum, &info->key_type, &info->keyspace_attnum);
	key_eqop = lookup_type_cache(info->key_type, TYPECACHE_EQ_OPR)->eq_opr;
	if (info->keyspace_attnum > 0)
		keyspace_eqop = lookup_type_cache(get_atttype(foreigntableid, info->keyspace_attnum),
										  TYPECACHE_EQ_OPR)->eq_opr;

	foreach(lc, baserel->baserestrictinfo)
	{
		RestrictInfo *rinfo = lfirst(lc);
		Expr	   *value;
		bool		is_array;

		if (info->key_clause == NULL && OidIsValid(key_eqop) &&
			match_equality(rinfo->clause, baserel->relid, info->key_attnum, key_eqop, info->key_type, &value,
						   &is_array))
		{
			info->key_clause = rinfo;
			info->key_values = value;
			info->key_is_array = is_array;
			continue;
		}
		if (info->keyspace_attnum > 0 && info->keyspace_value == NULL && OidIsValid(keyspace_eqop) &&
			match_equality(rinfo->clause, baserel->relid, info->keyspace_attnum, keyspace_eqop,
						   get_atttype(foreigntableid, info->keyspace_attnum), &value, &is_array) &&
			!is_array)
			info->keyspace_value = value;
		if (rsfdw_is_shippable(root, baserel, rinfo->clause))
			info->remote_conds = lappend(info->remote_conds, rinfo);
		else
			info->local_conds = lappend(info->local_conds, rinfo);
	}
	/* A map whose keyspace is a column routes by key only when the keyspace is fixed too. */
	if (info->key_clause && info->keyspace_attnum > 0 && info->keyspace_value == NULL)
	{
		if (rsfdw_is_shippable(root, baserel, info->key_clause->clause))
			info->remote_conds = lappend(info->remote_conds, info->key_clause);
		else
			info->local_conds = lappend(info->local_conds, info->key_clause);
		info->key_clause = NULL;
	}
	baserel->fdw_private = info;

	/* Row estimates: ANALYZE's count if there is one, else a modest guess. */
	tuples = baserel->tuples > 0 ? baserel->tuples : 1000.0;
	selectivity = clauselist_selectivity(root, baserel->baserestrictinfo, baserel->relid, JOIN_INNER, NULL);
	baserel->rows = clamp_row_est(tuples * selectivity);
	if (baserel->tuples <= 0)
		baserel->tuples = tuples;
}

/*
 * The column a pathkey sorts by, if the nodes can sort by it the same way:
 * with the type's default built-in operator family, in the column's own
 * collation (ORDER BY name COLLATE "C" on a column of another collation is
 * sorted here).  *sortop, if given, is the operator the merge compares
 * with, looked up by the member's declared type (anyenum, anyarray, ...).
 */
static Var *
pathkey_column(PlannerInfo *root, RelOptInfo *rel, PathKey *pathkey, Oid *sortop)
{
	EquivalenceClass *ec = pathkey->pk_eclass;
	ListCell   *lc;

	if (ec->ec_has_volatile || pathkey->pk_strategy == 0)
		return NULL;
	foreach(lc, ec->ec_members)
	{
		EquivalenceMember *em = lfirst(lc);
		Node	   *expr = strip_relabel((Node *) em->em_expr);
		Oid			typid;
		Oid			operator;
		TypeCacheEntry *tce;

		if (em->em_is_child || !IsA(expr, Var) || ((Var *) expr)->varno != rel->relid ||
			((Var *) expr)->varattno <= 0 || ((Var *) expr)->varlevelsup != 0)
			continue;
		/* the node must sort with the same operator family: the type's default one, built in */
		typid = ((Var *) expr)->vartype;
		tce = lookup_type_cache(typid, TYPECACHE_BTREE_OPFAMILY);
		if (tce->btree_opf != pathkey->pk_opfamily || pathkey->pk_opfamily >= FirstGenbkiObjectId)
			return NULL;
		if (ec->ec_collation != ((Var *) expr)->varcollid)
			return NULL;
		operator = get_opfamily_member(pathkey->pk_opfamily, em->em_datatype, em->em_datatype,
									   pathkey->pk_strategy);
		if (!OidIsValid(operator))
			return NULL;
		if (sortop)
			*sortop = operator;
		return (Var *) expr;
	}
	return NULL;
}

/* The longest prefix of the query's sort order that the nodes can produce. */
static List *
useful_pathkeys(PlannerInfo *root, RelOptInfo *rel)
{
	List	   *keys = NIL;
	ListCell   *lc;

	foreach(lc, root->query_pathkeys)
	{
		PathKey    *pk = lfirst(lc);

		if (pathkey_column(root, rel, pk, NULL) == NULL)
			return NIL;			/* all or nothing: a partial order does not help a Sort above */
		keys = lappend(keys, pk);
	}
	return keys;
}

/* An equivalence-class member that is the sharding key column of this rel. */
static bool
ec_member_is_key(PlannerInfo *root, RelOptInfo *rel, EquivalenceClass *ec, EquivalenceMember *em, void *arg)
{
	RsRelInfo  *info = arg;

	return is_column((Node *) em->em_expr, rel->relid, info->key_attnum);
}

/*
 * Joins by key (local_table.nik = faces.nik): a path parameterized by the
 * other side, so that a nested loop routes each outer row's key to one
 * replica instead of reading the whole table.
 */
static void
add_key_parameterized_paths(PlannerInfo *root, RelOptInfo *baserel, RsRelInfo *info)
{
	List	   *clauses;
	ListCell   *lc;

	if (info->key_clause != NULL || info->keyspace_attnum > 0)
		return;
	clauses = generate_implied_equalities_for_column(root, baserel, ec_member_is_key, info,
													 baserel->lateral_referencers);
	foreach(lc, baserel->joininfo)
	{
		RestrictInfo *rinfo = lfirst(lc);

		if (!rinfo->can_join || !IsA(rinfo->clause, OpExpr))
			continue;
		clauses = lappend(clauses, rinfo);
	}
	foreach(lc, clauses)
	{
		RestrictInfo *rinfo = lfirst(lc);
		Relids		required_outer;
		ParamPathInfo *ppi;
		Oid			eqop = lookup_type_cache(info->key_type, TYPECACHE_EQ_OPR)->eq_opr;
		double		rows;

		if (!OidIsValid(eqop) || !IsA(rinfo->clause, OpExpr) || ((OpExpr *) rinfo->clause)->opno != eqop)
			continue;
		/* the key on our side, the other side from other rels only */
		required_outer = bms_difference(rinfo->clause_relids, baserel->relids);
		if (bms_is_empty(required_outer) || bms_overlap(required_outer, baserel->relids))
			continue;
		{
			OpExpr	   *op = (OpExpr *) rinfo->clause;
			Node	   *other = is_column(linitial(op->args), baserel->relid, info->key_attnum)
				? lsecond(op->args) : is_column(lsecond(op->args), baserel->relid, info->key_attnum)
				? linitial(op->args) : NULL;

			if (other == NULL || contain_volatile_functions(other) || bms_is_member(baserel->relid, pull_varnos(root, other)))
				continue;
		}
		required_outer = bms_union(required_outer, baserel->lateral_relids);
		ppi = get_baserel_parampathinfo(root, baserel, required_outer);
		rows = ppi->ppi_rows;
		add_path(baserel, (Path *) create_foreignscan_path(root, baserel, NULL, rows, RS_ROUNDTRIP_COST,
														   RS_ROUNDTRIP_COST + rows * (cpu_tuple_cost + RS_ROW_TRANSFER_COST),
														   NIL, required_outer, NULL, NIL));
	}
}

void
rsGetForeignPaths(PlannerInfo *root, RelOptInfo *baserel, Oid foreigntableid)
{
	RsRelInfo  *info = baserel->fdw_private;
	double		rows = baserel->rows;
	Cost		startup = info->key_clause ? RS_ROUNDTRIP_COST : RS_FANOUT_STARTUP;
	Cost		run = rows * (cpu_tuple_cost + RS_ROW_TRANSFER_COST) +
		list_length(info->local_conds) * rows * cpu_operator_cost;
	List	   *pathkeys;

	add_path(baserel, (Path *) create_foreignscan_path(root, baserel, NULL, rows, startup, startup + run,
													   NIL, baserel->lateral_relids, NULL, NIL));

	add_key_parameterized_paths(root, baserel, info);

	/* Sorted by the nodes and merged here: a little dearer than unsorted. */
	pathkeys = useful_pathkeys(root, baserel);
	if (pathkeys != NIL)
		add_path(baserel, (Path *) create_foreignscan_path(root, baserel, NULL, rows, startup * 1.05,
														   (startup + run) * 1.05 + rows * cpu_operator_cost,
														   pathkeys, baserel->lateral_relids, NULL, NIL));
}

/* Attribute numbers the scan must fetch: for the target list and the local conditions. */
static List *
retrieved_attributes(PlannerInfo *root, RelOptInfo *rel, List *local_exprs, List *extra_vars)
{
	Bitmapset  *attrs = NULL;
	List	   *retrieved = NIL;
	Relation	relation;
	int			natts;

	pull_varattnos((Node *) rel->reltarget->exprs, rel->relid, &attrs);
	pull_varattnos((Node *) local_exprs, rel->relid, &attrs);
	pull_varattnos((Node *) extra_vars, rel->relid, &attrs);
	relation = table_open(planner_rt_fetch(rel->relid, root)->relid, NoLock);
	natts = RelationGetDescr(relation)->natts;
	for (int attnum = 1; attnum <= natts; attnum++)
	{
		Form_pg_attribute attr = TupleDescAttr(RelationGetDescr(relation), attnum - 1);
		bool		whole_row = bms_is_member(0 - FirstLowInvalidHeapAttributeNumber, attrs);

		if (attr->attisdropped)
			continue;
		if (whole_row || bms_is_member(attnum - FirstLowInvalidHeapAttributeNumber, attrs))
			retrieved = lappend_int(retrieved, attnum);
	}
	table_close(relation, NoLock);
	return retrieved;
}

ForeignScan *
rsGetForeignPlan(PlannerInfo *root, RelOptInfo *foreignrel, Oid foreigntableid,
				 ForeignPath *best_path, List *tlist, List *scan_clauses, Plan *outer_plan)
{
	RsRelInfo  *info = foreignrel->fdw_private;
	List	   *local_exprs = NIL;
	List	   *remote_exprs = NIL;
	List	   *params = NIL;
	List	   *fdw_exprs;
	List	   *sort_vars = NIL;
	List	   *sort_ops = NIL;
	List	   *sort_directions = NIL;
	ListCell   *lc;
	RsScanKind	kind = RS_SCAN_FANOUT;
	RsScanPlan *plan = palloc0(sizeof(RsScanPlan));

	if (IS_UPPER_REL(foreignrel))
		return rsupper_get_plan(root, foreignrel, best_path, tlist, scan_clauses, outer_plan);

	/*
	 * A parameterized path (a join by key): its join clause, with the outer
	 * side turned into a parameter, routes by key like a WHERE clause.
	 */
	{
		RestrictInfo *key_clause = info->key_clause;
		Expr	   *key_values = info->key_values;
		bool		key_is_array = info->key_is_array;
		Oid			eqop = lookup_type_cache(info->key_type, TYPECACHE_EQ_OPR)->eq_opr;

		if (key_clause == NULL && best_path->path.param_info != NULL && OidIsValid(eqop) && info->keyspace_attnum == 0)
		{
			foreach(lc, scan_clauses)
			{
				RestrictInfo *rinfo = lfirst_node(RestrictInfo, lc);

				if (match_join_equality(root, rinfo->clause, foreignrel->relid, info->key_attnum, eqop, &key_values))
				{
					key_clause = rinfo;
					key_is_array = false;
					break;
				}
			}
		}
		if (key_clause != info->key_clause)
		{
			/* this plan only: the rel's info serves its other paths too */
			RsRelInfo  *copy = palloc(sizeof(RsRelInfo));

			memcpy(copy, info, sizeof(RsRelInfo));
			copy->key_clause = key_clause;
			copy->key_values = key_values;
			copy->key_is_array = key_is_array;
			info = copy;
		}
	}

	/* Every scan clause: sent, routed, or evaluated here. */
	foreach(lc, scan_clauses)
	{
		RestrictInfo *rinfo = lfirst_node(RestrictInfo, lc);

		if (rinfo->pseudoconstant)
			continue;
		if (rinfo == info->key_clause)
			continue;
		if (list_member_ptr(info->remote_conds, rinfo))
			remote_exprs = lappend(remote_exprs, rinfo->clause);
		else if (list_member_ptr(info->local_conds, rinfo))
			local_exprs = lappend(local_exprs, rinfo->clause);
		else if (rsfdw_is_shippable(root, foreignrel, rinfo->clause))
			remote_exprs = lappend(remote_exprs, rinfo->clause);
		else
			local_exprs = lappend(local_exprs, rinfo->clause);
	}
	if (info->key_clause)
		kind = info->keyspace_value ? RS_SCAN_ROUTER_KEYSPACE : RS_SCAN_ROUTER;

	foreach(lc, best_path->path.pathkeys)
	{
		Oid			sortop;

		sort_vars = lappend(sort_vars, pathkey_column(root, foreignrel, lfirst(lc), &sortop));
		sort_ops = lappend_oid(sort_ops, sortop);
	}

	/* The remote statement's parts, and how to merge the sorted streams. */
	plan->relid = foreigntableid;
	plan->kind = kind;
	plan->retrieved = retrieved_attributes(root, foreignrel, local_exprs, sort_vars);
	plan->key_attnum = kind != RS_SCAN_FANOUT ? info->key_attnum : 0;
	plan->key_is_array = info->key_is_array;
	plan->nsort = list_length(best_path->path.pathkeys);
	plan->sort = palloc0(sizeof(RsSortKey) * Max(plan->nsort, 1));
	foreach(lc, best_path->path.pathkeys)
	{
		PathKey    *pk = lfirst(lc);
		Var		   *var = list_nth(sort_vars, foreach_current_index(lc));
		RsSortKey  *key = &plan->sort[foreach_current_index(lc)];

		/* the merge compares this result column (1-based) */
		for (int i = 0; i < list_length(plan->retrieved); i++)
			if (list_nth_int(plan->retrieved, i) == var->varattno)
				key->column = i + 1;
		key->sort_operator = list_nth_oid(sort_ops, foreach_current_index(lc));
		key->collation = pk->pk_eclass->ec_collation;
		key->nulls_first = pk->pk_nulls_first;
		sort_directions = lappend(sort_directions,
								  makeString(psprintf("%s%s", pk->pk_strategy == BTLessStrategyNumber ? " ASC" : " DESC",
													  pk->pk_nulls_first ? " NULLS FIRST" : " NULLS LAST")));
	}
	rsfdw_deparse_scan(root, foreignrel, foreigntableid, remote_exprs, sort_vars, sort_directions, &params, plan);

	/*
	 * SELECT ... FOR UPDATE/SHARE of this table: PostgreSQL locks no row of
	 * a foreign table (ROW_MARK_COPY), so the scan does: the keys it reads
	 * (or the whole table, for a fan-out) on the coordinator, where every
	 * writer of a key queues first (write_locks.c), and the rows on the node
	 * it reads them from, whose transaction then fails as PostgreSQL would
	 * at REPEATABLE READ when a row changed since its snapshot.  SKIP LOCKED
	 * would skip rows by what the node alone knows, while the coordinator
	 * queues writers: refused rather than answered wrongly.
	 */
	{
		PlanRowMark *rowmark = get_plan_rowmark(root->rowMarks, foreignrel->relid);

		if (rowmark != NULL && rowmark->strength != LCS_NONE)
		{
			if (rowmark->waitPolicy == LockWaitSkip)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("SKIP LOCKED is not supported on distributed table %s", get_rel_name(foreigntableid)),
						 errdetail("Its rows are locked on the coordinator, key by key, which cannot tell which "
								   "rows another transaction holds."),
						 errhint("Use FOR UPDATE (waiting) or FOR UPDATE NOWAIT.")));
			plan->row_lock = rowmark->strength;
			plan->lock_nowait = rowmark->waitPolicy == LockWaitError;
			plan->tail_tmpl = lappend(plan->tail_tmpl,
									  makeString(pstrdup(rsfdw_locking_clause(plan->row_lock, plan->lock_nowait))));
		}
	}

	/* fdw_exprs: template parameters, then the key values, then the keyspace value */
	plan->nparams = list_length(params);
	fdw_exprs = list_copy(params);
	if (kind != RS_SCAN_FANOUT)
		fdw_exprs = lappend(fdw_exprs, info->key_values);
	if (kind == RS_SCAN_ROUTER_KEYSPACE)
		fdw_exprs = lappend(fdw_exprs, info->keyspace_value);
	return make_foreignscan(tlist, local_exprs, foreignrel->relid, fdw_exprs, rsfdw_scan_plan_to_private(plan),
							NIL, NIL, outer_plan);
}

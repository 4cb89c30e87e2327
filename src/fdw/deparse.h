/*
 * deparse.h
 *		Which expressions a node can evaluate exactly as the coordinator would,
 *		and their SQL (docs/design.md, invariant 5).
 *
 * An expression ships when every function and operator in it is built in
 * and immutable, its collations are the ones the node has for the same
 * columns, and it reads only the scanned table's columns, constants and
 * parameters.  SQL names everything schema-qualified (the node's session
 * has search_path = pg_catalog); constants and parameter values are sent as
 * typed literals.
 */
#ifndef RINGSHARD_FDW_DEPARSE_H
#define RINGSHARD_FDW_DEPARSE_H

#include "postgres.h"

#include "lib/stringinfo.h"
#include "nodes/pathnodes.h"
#include "utils/relcache.h"

/*
 * A piece of remote SQL with holes for parameter values: a List of String
 * nodes (SQL text) and Integer nodes (1-based index into a parameter
 * expression list), filled in at execution time.
 */
typedef struct DeparseContext
{
	PlannerInfo *root;
	RelOptInfo *scanrel;		/* the rel whose Vars are columns of alias t */
	Index		varno;			/* its range table index */
	List	   *tlist;			/* for upper rels: the scan's target list (Vars refer to it) */
	List	   *pieces;			/* String and Integer nodes */
	StringInfoData current;		/* text not yet moved into pieces */
	List	  **params;			/* parameter expressions, shared by a query's contexts */
	Oid			relid;			/* without a planner (root NULL): the table whose columns Vars are */
	Index		excluded_varno; /* an upsert's EXCLUDED row (written excluded.column), or 0 */
	bool		consts_as_holes;	/* constants of built-in types become holes too (a text prepared on nodes) */
} DeparseContext;

/* Whether the expression can be evaluated on a node with the same result. */
extern bool rsfdw_is_shippable(PlannerInfo *root, RelOptInfo *rel, Expr *expr);

/* NULL if it can, else what stops it, for a message ("function random() is volatile", ...). */
extern const char *rsfdw_unshippable_reason(PlannerInfo *root, RelOptInfo *rel, Expr *expr);

/*
 * The same for an upsert's expressions, checked before planning: Vars of
 * varno are the table's columns, Vars of excluded_varno the proposed row's.
 */
extern const char *rsfdw_upsert_unshippable_reason(Oid relid, Index varno, Index excluded_varno, Expr *expr);

extern const char *rsfdw_query_unshippable_reason(Query *query);
extern char *rsfdw_router_sql_text(Query *query, List **param_ids, List **computed);

/* Start a context; params collects the expressions of parameter holes. */
extern void rsfdw_deparse_init(DeparseContext *ctx, PlannerInfo *root, RelOptInfo *rel,
							   Index varno, List **params);

/* Append literal SQL text / an expression / a finished template to the context. */
extern void rsfdw_append(DeparseContext *ctx, const char *text);
extern void rsfdw_append_expr(DeparseContext *ctx, Expr *expr);

/* The template built so far (a List of String and Integer nodes). */
extern List *rsfdw_deparse_finish(DeparseContext *ctx);

/* The quoted, schema-qualified name of a relation / type. */
extern char *rsfdw_relation_name(Oid relid);
extern char *rsfdw_type_name(Oid typid, int32 typmod);

/* A column's quoted name. */
extern char *rsfdw_column_name(Oid relid, AttrNumber attnum);

/*
 * A value as a typed SQL literal, 'text'::schema.type or NULL::schema.type,
 * printed under the pinned transmission settings (remote/values.h): the
 * node reads back exactly the value, whatever the session's DateStyle,
 * IntervalStyle, extra_float_digits or lc_monetary.
 */
extern void rsfdw_append_literal(StringInfo buf, Datum value, bool isnull, Oid typid, int32 typmod);

/* Non-null values of one type as ARRAY['..'::type, ...]::type[], printed the same way. */
extern void rsfdw_append_literal_array(StringInfo buf, const Datum *values, int n, Oid typid);

/* A scan's parameter values, evaluated once per run (under the user's settings). */
typedef struct RsParamValues
{
	int			n;
	Datum	   *values;
	bool	   *nulls;
	Oid		   *types;
	int32	   *typmods;
	bool		money;			/* some parameter's text involves money */
} RsParamValues;

extern RsParamValues *rsfdw_eval_params(List *param_states, List *param_exprs, struct ExprContext *econtext);

/*
 * A template's text: its holes filled with the parameters as literals
 * (printed under pinned settings), or shown as $n when params is NULL
 * (EXPLAIN).  The one routine that turns templates into text.
 */
extern char *rsfdw_template_text(List *pieces, RsParamValues *params);

/*
 * Node-bound SQL.  Every statement a node gets for a distributed table is
 * built here: the scan's parts at planning, the router, fan-out and
 * top-row statements, writes and DDL at execution.
 */
#include "fdw/plan_state.h"

struct TablePlacement;

/* A scan's filled parts: SELECT <select><from><where>[filter]<tail>. */
typedef struct RsScanSQL
{
	char	   *select;
	char	   *from;
	char	   *where;
	char	   *tail;
} RsScanSQL;

/* Planning: a base scan's select list (plan->retrieved), FROM, WHERE and ORDER BY templates. */
extern void rsfdw_deparse_scan(PlannerInfo *root, RelOptInfo *rel, Oid relid, List *remote_exprs,
							   List *sort_exprs, List *sort_directions, List **params, RsScanPlan *plan);
/* ... FROM and WHERE only (upper scans build their own select list and tail). */
extern void rsfdw_deparse_from_where(PlannerInfo *root, RelOptInfo *rel, Oid relid, List *remote_exprs,
									 List **params, RsScanPlan *plan);

/* Execution: the scan's parts with this run's parameters. */
extern RsScanSQL *rsfdw_scan_sql(const RsScanPlan *plan, RsParamValues *params);

/* A router read of some keys (as literals), or with them as parameter $1 (one key, or an array). */
extern char *rsfdw_router_sql(const RsScanSQL *sql, const char *key_column, Oid key_type, const Datum *keys,
							  int nkeys);
extern char *rsfdw_router_sql_param(const RsScanSQL *sql, const char *key_column, Oid key_type, bool array);
extern char *rsfdw_router_param_text(Oid key_type, const Datum *keys, int nkeys);

/* A fan-out's cursor (binary where every column is binary-safe), its FETCH and CLOSE. */
extern char *rsfdw_fanout_sql(const char *cursor, bool binary, const RsScanSQL *sql, const char *filter,
							  int fetch_size);
extern char *rsfdw_fetch_sql(const char *cursor, int fetch_size);
extern char *rsfdw_close_sql(const char *cursor);

/*
 * Moving a step's rows node to node (operations/move_rows.c): the live
 * columns of a table, quoted, in order; a DELETE of the rows (alias t)
 * that match a condition; and the two ends of a COPY of them,
 * binary or text.
 */
extern char *rsfdw_column_list(Relation rel);

/* The locking clause a node's read of a table takes for SELECT ... FOR UPDATE/SHARE (LockClauseStrength). */
extern const char *rsfdw_locking_clause(int strength, bool nowait);
extern char *rsfdw_step_copy_out_sql(Oid relid, const char *columns, const char *condition, bool binary);
extern char *rsfdw_step_copy_in_sql(Oid relid, const char *columns, bool binary);

/*
 * Rehoming rows (rehome_rows(), operations/move_rows.c).  The condition on
 * a node's row t ($1: the node) for the rows it is not a replica of, or
 * (shared) for those it holds with other replicas; a page of those rows
 * after ctid $2 (ctid, key and row digest as text, one row per replica);
 * which of some rows, given by key ($1) and digest ($2), a node holds (their
 * positions); and the condition for the rows at some ctids (validated
 * "(block,offset)" texts).
 */
extern char *rsfdw_rehome_condition(bool shared);
extern char *rsfdw_rehome_page_sql(Relation rel, const char *key_column, bool shared, int batch_size);
extern char *rsfdw_rehome_present_sql(Relation rel, const char *key_column, Oid key_type);
extern char *rsfdw_ctid_condition(char **ctids, int n);
/* Step 1's DELETE of a page ($1: the node): each row only as it was read (its position with its digest), and still not the node's. */
extern char *rsfdw_rehome_delete_sql(Relation rel, char **ctids, char **digests, int n);

/* The call of reads_here() for the rows (alias t) of a table, with these excluded-nodes and version SQL. */
extern char *rsfdw_reads_here_sql(struct TablePlacement *placement, const char *excluded, const char *version);
/* The call of replica_slot() for the rows (alias t): which of each row's replicas the node is. */
extern char *rsfdw_replica_slot_sql(struct TablePlacement *placement, const char *excluded, const char *version);
/* The excluded nodes of a placement as a text[] literal, for reads_here(). */
extern char *rsfdw_excluded_nodes_sql(struct TablePlacement *placement, const bool *excluded);
/* " AND reads_here(...)": each row read once, on its first replica not excluded. */
extern char *rsfdw_fanout_filter(struct TablePlacement *placement, const bool *excluded, int64 topology_version);
/*
 * The same while the table owes moves (docs/design.md, "Moving rows"): for
 * node `node`, the rows it is the first replica of outside the moves, and
 * the rows of the moves it serves (the first old replica of each not
 * excluded); serves[m] is that node's index per move.  base is the filter
 * above, or "" when every row is read.
 */
extern char *rsfdw_moving_fanout_filter(struct TablePlacement *placement, const char *base, const int *serves,
										int node);

/* The nodes' query of an upper scan (aggregates or top rows), plain or with the late check. */
extern char *rsfdw_upper_sql(const RsScanPlan *plan, const RsScanSQL *sql, const char *filter,
							 const char *limit_clause, bool late);

/* Writes. */
extern char *rsfdw_insert_values_sql(const char *table, const char *columns, const char *values);
/* The same INSERT as one statement that fails on the node unless it stored exactly `rows` rows. */
extern char *rsfdw_insert_values_checked_sql(const char *table, const char *columns, const char *values,
											 int64 rows);
struct OnConflictExpr;
extern List *rsfdw_deparse_on_conflict(struct OnConflictExpr *oc, Oid relid, Index varno, List **params);
/* INSERT INTO table AS t (columns) VALUES values on_conflict [RETURNING columns] */
extern char *rsfdw_upsert_sql(const char *table, const char *columns, const char *values, const char *on_conflict,
							  bool returning);
extern char *rsfdw_copy_from_sql(const char *table, const char *columns, bool binary);
extern char *rsfdw_truncate_sql(Oid relid, bool cascade);
extern char *rsfdw_key_filter_sql(const char *key_column, Oid key_type, const Datum *keys, int nkeys);
extern char *rsfdw_direct_modify_sql(const RsDirectPlan *plan, const char *statement, const char *where,
									 const char *key_filter, const char *counts, const char *slots);

/*
 * The same statement, for keys, as the text of a statement prepared on a
 * node (*sql, *nparams) and the arguments of its EXECUTE (*arguments,
 * "(literal, ...)", printed pinned as rsfdw_template_text prints them): each
 * parameter the statement uses as $n::type, numbered in order of first use,
 * the keys' array last.  false, and nothing set, when a type a node would
 * fix by OID is not built in (remote_type_preparable).
 */
extern bool rsfdw_direct_modify_prepared(const RsDirectPlan *plan, RsParamValues *params, const char *key_column,
										 Oid key_type, const Datum *keys, int nkeys, const char *counts,
										 const char *slots, char **sql, int *nparams, char **arguments);

/*
 * DDL for the nodes, from the parse tree of a statement whose node-side
 * part has no local copy to read back (indexes and unique constraints of a
 * foreign table exist on the nodes only): every property that changes
 * answers or constraints is carried (NULLS NOT DISTINCT, INCLUDE, storage
 * and operator-class options, tablespace, DEFERRABLE, partial and
 * expression indexes, collations).
 */
struct Constraint;
struct IndexStmt;
extern char *rsfdw_deparse_unique_constraint(const char *table, const char *name, struct Constraint *con);
extern char *rsfdw_deparse_create_index(struct IndexStmt *stmt, Oid relid, const char *table, const char *name);

/* A column's type as the catalog has it now, with its collation: for ALTER COLUMN ... TYPE on the nodes. */
extern char *rsfdw_deparse_column_type(Oid relid, AttrNumber attnum);

#endif							/* RINGSHARD_FDW_DEPARSE_H */

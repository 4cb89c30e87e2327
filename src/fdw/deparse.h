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
} DeparseContext;

/* Whether the expression can be evaluated on a node with the same result. */
extern bool rsfdw_is_shippable(PlannerInfo *root, RelOptInfo *rel, Expr *expr);

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

/*
 * Fill a template's holes with the values of its parameters, given as
 * ExprStates (evaluated in econtext).
 */
extern char *rsfdw_fill_template(List *pieces, List *param_states, List *param_exprs,
								 struct ExprContext *econtext);

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

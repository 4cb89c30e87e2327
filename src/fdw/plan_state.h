/*
 * plan_state.h
 *		What planning hands to execution for a scan or a statement sent whole:
 *		typed structs, written into a ForeignScan's fdw_private (which must be
 *		a copyable node tree) and read back by one pair of functions each, so
 *		that no other code knows the order of the list.
 */
#ifndef RINGSHARD_FDW_PLAN_STATE_H
#define RINGSHARD_FDW_PLAN_STATE_H

#include "postgres.h"

#include "access/attnum.h"
#include "nodes/pg_list.h"

/* How a scan reaches the nodes. */
typedef enum RsScanKind
{
	RS_SCAN_FANOUT,				/* every node, each row once */
	RS_SCAN_ROUTER,				/* by key: fdw_exprs after the parameters hold the key values */
	RS_SCAN_ROUTER_KEYSPACE		/* the same, with the keyspace value after the key values */
} RsScanKind;

/* One key of the order the nodes sort in, and how the coordinator merges by it. */
typedef struct RsSortKey
{
	int			column;			/* 1-based column of the remote answer */
	Oid			sort_operator;
	Oid			collation;
	bool		nulls_first;
} RsSortKey;

/*
 * How the coordinator combines one pushed-down aggregate: the kind, its
 * partial result's remote column (averages: the sum, the count follows) and
 * output column (both 0-based), the partial type, the function (addition
 * for sums and averages, sort operator for min and max) and collation.
 */
typedef enum RsCombineKind
{
	RS_COMBINE_COUNT = 1,		/* total of the counts */
	RS_COMBINE_SUM,				/* total of the sums, in the sum's own type */
	RS_COMBINE_MIN_MAX,			/* the first partial in the sort operator's order */
	RS_COMBINE_AVG_NUMERIC,		/* numeric total sum / total count (integer and numeric input) */
	RS_COMBINE_AVG_FLOAT8,		/* float8 total sum / total count (float input) */
	RS_COMBINE_AVG_INTERVAL		/* interval total sum / total count */
} RsCombineKind;

typedef struct RsAggregatePlan
{
	RsCombineKind kind;
	int			column;
	int			output;
	Oid			partial_type;
	Oid			function;
	Oid			collation;
} RsAggregatePlan;

/* One GROUP BY column of a pushed-down aggregate: how groups are told apart. */
typedef struct RsGroupKey
{
	Oid			equality_operator;
	Oid			collation;
} RsGroupKey;

/*
 * Top rows of a table with several copies of each row, checked late (see
 * upper_scan.c): the SQL pieces that wrap the nodes' query.
 */
typedef struct RsLateCheck
{
	char	   *inner_select;	/* the key columns after the select list */
	char	   *inner_order;	/* ... and after the ORDER BY */
	char	   *outer;			/* the outer query's alias and order */
	char	   *row;			/* the row rebuilt from the key, for reads_here */
} RsLateCheck;

/*
 * A scan.  Templates are Lists of String (SQL) and Integer (1-based index of
 * a parameter expression in fdw_exprs) nodes, filled at execution.  Its
 * remote statement is SELECT select FROM from WHERE where tail, with, for a
 * fan-out, the reads_here filter added to the WHERE, and for a router scan,
 * the key condition.
 */
typedef struct RsScanPlan
{
	Oid			relid;			/* the distributed table */
	RsScanKind	kind;
	List	   *select_tmpl;
	List	   *from_tmpl;		/* " FROM <table> t" */
	List	   *where_tmpl;		/* " WHERE <conditions>" ("true" when none) */
	List	   *tail_tmpl;		/* GROUP BY / ORDER BY */
	List	   *retrieved;		/* for each remote column, its attnum (base scan) or scan tlist position */
	int			nparams;		/* fdw_exprs that are template parameters (then key, keyspace, LIMIT, OFFSET) */
	AttrNumber	key_attnum;		/* router scans: the sharding key */
	bool		key_is_array;	/* router scans: key = ANY (array) */
	int			nsort;
	RsSortKey  *sort;

	/* upper scans: aggregates or top rows over a fan-out (scanrelid 0) */
	bool		upper;
	bool		aggregating;	/* combined groups; else top rows, merged */
	int			limit_index;	/* 1-based index in fdw_exprs of the LIMIT count (0: none) */
	int			offset_index;	/* ... of the OFFSET (0: none) */
	int			naggregates;
	RsAggregatePlan *aggregates;
	int			ngroups;
	RsGroupKey *groups;
	char	   *pushed;			/* what the nodes do, for EXPLAIN */
	char	   *relations;		/* the relation, for EXPLAIN */
	char	   *limit_sql;		/* the remote LIMIT as EXPLAIN shows it */
	List	   *tiebreak;		/* IntList: attnums of the key (and keyspace) columns; NIL: no late check */
	RsLateCheck *late;			/* NULL: no late check */
	int			row_lock;		/* SELECT ... FOR UPDATE/SHARE of the table: its LockClauseStrength */
	bool		lock_nowait;	/* ... NOWAIT */
} RsScanPlan;

/* An UPDATE or DELETE sent whole to the nodes. */
typedef struct RsDirectPlan
{
	Oid			relid;
	RsScanKind	kind;			/* of the scan it replaces: by key, or every node */
	List	   *statement_tmpl; /* "UPDATE <table> t SET ..." or "DELETE FROM <table> t" */
	List	   *statement_prepared_tmpl;	/* the same with its constants as holes too (NIL: none) */
	List	   *where_tmpl;		/* " WHERE <conditions>" */
	int			nparams;
	AttrNumber	key_attnum;
	bool		key_is_array;
	bool		has_returning;
	List	   *returning;		/* IntList: attnums the RETURNING list reads */
} RsDirectPlan;

extern List *rsfdw_scan_plan_to_private(const RsScanPlan *plan);
extern RsScanPlan *rsfdw_scan_plan_from_private(List *private);
extern List *rsfdw_direct_plan_to_private(const RsDirectPlan *plan);
extern RsDirectPlan *rsfdw_direct_plan_from_private(List *private);

#endif							/* RINGSHARD_FDW_PLAN_STATE_H */

/*
 * upper.h
 *		Work above the scan that the nodes do for us (docs/design.md, Reads):
 *		aggregates and ORDER BY ... LIMIT over a fan-out of a distributed
 *		table.
 *
 * Aggregates: each node aggregates the rows it is the first replica of,
 * grouped by the query's GROUP BY, and the coordinator combines the partial
 * results group by group (count and sum add up, min and max compare, avg
 * divides the total sum by the total count).  ORDER BY ... LIMIT: each node
 * returns its first limit + offset rows in the query's order, and the
 * coordinator merges them and returns the first ones after the offset.
 *
 * What is pushed, over a fan-out whose WHERE clause the nodes evaluate
 * whole (not a router scan, no condition left here), in a SELECT without
 * FOR UPDATE:
 *  - aggregates: count(*), count, sum, min, max and avg of PostgreSQL's own
 *    (by function OID), without DISTINCT or ORDER BY inside, FILTER allowed,
 *    over expressions the nodes compute as we do (built-in immutable, no
 *    collation the SQL would not say); GROUP BY of such expressions whose
 *    equality hashes, no grouping sets.  HAVING and whatever the target
 *    computes from the groups and aggregates are evaluated here, after
 *    combining;
 *  - LIMIT (with OFFSET) of constants, parameters or expressions of them,
 *    with or without ORDER BY: an ORDER BY of such expressions sorted by
 *    their type's default btree class; not WITH TIES, not with window
 *    functions or DISTINCT, and not when the planner knows each node would
 *    return more than ringshard.fetch_size rows (the plain scan streams).
 *
 * Planning (upper.c) makes ForeignPaths of upper relations; their
 * ForeignScans have scanrelid 0 and an fdw_scan_tlist.  Execution
 * (upper_scan.c) sends one query to every node at once and combines the
 * answers, which are small: one row per group, or the top rows.
 */
#ifndef RINGSHARD_FDW_UPPER_H
#define RINGSHARD_FDW_UPPER_H

#include "postgres.h"

#include "foreign/fdwapi.h"
#include "nodes/pathnodes.h"

#include "fdw/fdw.h"

/*
 * ForeignScan.fdw_private of an upper scan: the RsScanPrivate entries (with
 * RS_PRIV_AGGREGATES non-NIL for aggregates; RS_PRIV_SORT, RS_PRIV_LIMIT
 * and RS_PRIV_OFFSET for the top rows), then these.
 */
enum RsUpperPrivate
{
	RS_UPRIV_AGGREGATING = RS_PRIV_COUNT,	/* Integer: 1 for aggregates (combined), 0 for top rows (merged) */
	RS_UPRIV_GROUPS,			/* List of IntLists (equality operator, collation), one per GROUP BY column */
	RS_UPRIV_PUSHED,			/* String: what the nodes do, for EXPLAIN */
	RS_UPRIV_RELATIONS,			/* String: the relation, for EXPLAIN */
	RS_UPRIV_LIMIT_SQL,			/* String: the remote LIMIT as EXPLAIN shows it */
	RS_UPRIV_TIEBREAK,			/* IntList: attnums of the key (and keyspace) columns, NIL: no late check */
	RS_UPRIV_LATE_CHECK,		/* List of 4 Strings: the SQL pieces of the late check (see upper_scan.c) */
	RS_UPRIV_COUNT
};

/*
 * How the coordinator combines one pushed-down aggregate.  Each is an
 * IntList in RS_PRIV_AGGREGATES: (kind, remote column, output column,
 * partial type, function, collation), columns 0-based; function is the
 * addition for sums and averages, the aggregate's sort operator for min
 * and max.  Averages read two remote columns: the sum, then the count.
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

/* upper.c */
extern ForeignScan *rsupper_get_plan(PlannerInfo *root, RelOptInfo *upperrel, ForeignPath *best_path,
									 List *tlist, List *scan_clauses, Plan *outer_plan);

/* upper_scan.c: the scan callbacks for scanrelid 0 (scan.c hands them over) */
extern void rsupper_begin_scan(ForeignScanState *node, int eflags);
extern TupleTableSlot *rsupper_iterate_scan(ForeignScanState *node);
extern void rsupper_rescan(ForeignScanState *node);
extern void rsupper_end_scan(ForeignScanState *node);
extern void rsupper_explain_scan(ForeignScanState *node, struct ExplainState *es);

#endif							/* RINGSHARD_FDW_UPPER_H */

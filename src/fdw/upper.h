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

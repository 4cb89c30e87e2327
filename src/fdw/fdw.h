/*
 * fdw.h
 *		The foreign-data wrapper of distributed tables (docs/design.md).
 *
 * On the coordinator a distributed table is a foreign table of the server
 * ringshard_cluster; its rows live on the nodes of its ring or partition
 * map.  Planning decides between a router scan (the WHERE clause fixes the
 * sharding key: one replica per key) and a fan-out (every node, each row
 * read once), and what the nodes can do for us: filters, sort order, LIMIT,
 * aggregates.  Execution talks to the nodes through src/remote.
 */
#ifndef RINGSHARD_FDW_H
#define RINGSHARD_FDW_H

#include "postgres.h"

#include "foreign/fdwapi.h"
#include "nodes/pathnodes.h"

#include "fdw/plan_state.h"

#include "guc.h"

/* What planning knows of a distributed table (RelOptInfo.fdw_private). */
typedef struct RsRelInfo
{
	Oid			relid;
	AttrNumber	key_attnum;
	Oid			key_type;
	AttrNumber	keyspace_attnum;	/* maps whose keyspace is a column, else 0 */

	List	   *remote_conds;	/* RestrictInfos the nodes evaluate */
	List	   *local_conds;	/* RestrictInfos evaluated here */
	RestrictInfo *key_clause;	/* key = value or key IN (...), routed by value */
	Expr	   *key_values;		/* its value side (an expression or an array) */
	bool		key_is_array;	/* key = ANY (array) */
	Expr	   *keyspace_value;	/* the keyspace column's value, when the map needs one */

	/* upper relations */
	bool		is_upper;		/* an aggregate pushed to the nodes */
	RelOptInfo *base;			/* for an upper rel: the scanned base rel */
	List	   *grouped_tlist;	/* target list of the aggregate query */
	List	   *group_exprs;	/* GROUP BY expressions */
} RsRelInfo;

/* statement_planner.c: the planner hook */
extern void rsfdw_statement_planner_init(void);
/* The upsert clause of the statement being planned, for its ModifyTable (NIL when it has none). */
extern List *rsfdw_upsert_private(PlannerInfo *root, Index resultRelation);

/* planner.c */
/* planner.c: key = value, with the key's own equality or a narrower integer value */
extern bool rsfdw_is_key_equality(Oid opno, Oid eqop, Oid key_type, bool key_on_left, Oid *value_type);
extern Expr *rsfdw_value_as_key(Expr *value, Oid value_type, Oid key_type, bool is_array);

/* router.c: a SELECT fixed to one key on every table, sent whole to one node */
extern bool rsfdw_router_candidate(Query *parse, int cursor_options);
extern PlannedStmt *rsfdw_plan_router(Query *original, PlannedStmt *planned);

/* The ORDER BY and LIMIT a fan-out router, or the Agg above it, gets on top (router.c). */
typedef struct FanoutTop
{
	Limit	   *limit;			/* the usual plan's Limit, or NULL */
	int			nsort;
	AttrNumber *sort_columns;	/* positions in the router's output (1-based) */
	Oid		   *sort_operators;
	Oid		   *collations;
	bool	   *nulls_first;
	Bitmapset  *returned_junk;	/* resnos of junk sort keys the nodes return */
} FanoutTop;
extern Plan *rsfdw_add_fanout_top(Plan *below, FanoutTop *top, int *next_plan_node_id);
extern bool rsfdw_plan_partial_router(Query *partial, PlannedStmt *planned);
extern int	rsfdw_highest_plan_node_id(PlannedStmt *planned);
extern int	rsfdw_count_distributed_tables(Query *query);
extern List *rsfdw_pass_through_tlist(List *below_tlist);

/* fanout_aggregate.c */
extern PlannedStmt *rsfdw_plan_fanout_aggregate(Query *original, PlannedStmt *planned, const char *query_string,
												int cursor_options, ParamListInfo bound_params);
extern bool rsfdw_router_write_candidate(Query *parse);
extern PlannedStmt *rsfdw_plan_router_write(Query *parse);
extern void rsfdw_router_init(void);

extern void rsGetForeignRelSize(PlannerInfo *root, RelOptInfo *baserel, Oid foreigntableid);
extern void rsGetForeignPaths(PlannerInfo *root, RelOptInfo *baserel, Oid foreigntableid);
extern ForeignScan *rsGetForeignPlan(PlannerInfo *root, RelOptInfo *foreignrel, Oid foreigntableid,
									 ForeignPath *best_path, List *tlist, List *scan_clauses,
									 Plan *outer_plan);

/* upper.c (aggregates, ORDER BY ... LIMIT; see upper.h) */
extern void rsGetForeignUpperPaths(PlannerInfo *root, UpperRelationKind stage,
								   RelOptInfo *input_rel, RelOptInfo *output_rel, void *extra);

/* scan.c */
extern void rsBeginForeignScan(ForeignScanState *node, int eflags);
extern TupleTableSlot *rsIterateForeignScan(ForeignScanState *node);
extern void rsReScanForeignScan(ForeignScanState *node);
extern void rsEndForeignScan(ForeignScanState *node);
extern void rsExplainForeignScan(ForeignScanState *node, struct ExplainState *es);

/*
 * Connect to the nodes of a fan-out read of a table: per node index its
 * connection, or NULL when the node is left out (down or unreachable).
 * *filter is the condition (on alias t) that makes each node return each
 * row only if it is the row's first remaining replica ("" when every row has
 * one copy and no node is left out).  A range without a reachable replica
 * is an ERROR, or a WARNING with ringshard.allow_partial_reads.
 */
struct TablePlacement;
struct RemoteConnection;
/* The call of reads_here() for the rows (alias t) of a table, with these excluded-nodes and version SQL. */
extern char *rsfdw_reads_here_sql(struct TablePlacement *placement, const char *excluded, const char *version);

/*
 * EXPLAIN: the replicas of the key values of a router scan or statement sent
 * whole, when they are constants (fdw_exprs[nparams], then the keyspace);
 * NULL otherwise.
 */
extern char *rsfdw_constant_key_replicas(struct TablePlacement *placement, ForeignScan *plan, int nparams,
										 bool with_keyspace);

/*
 * Connect to the nodes of a fan-out read: filters[i] is what node i adds to
 * its WHERE clause so that every row is read once.
 */
extern struct RemoteConnection **rsfdw_fanout_connect(struct TablePlacement *placement, Oid userid,
													  const char *table, char ***filters);

/* The parameters, key value and keyspace value of a scan's fdw_exprs, prepared for execution (scan.c). */
extern void rsfdw_init_fdw_exprs(List *fdw_exprs, int nparams, PlanState *parent, List **param_exprs,
								 List **param_states, ExprState **key_state, ExprState **keyspace_state);

/* The comparators of a scan's sort keys, and the 0-based answer column of each (scan.c). */
struct RsSortKey;
struct SortSupportData;
extern void rsfdw_prepare_sort_keys(const struct RsSortKey *keys, int nkeys, struct SortSupportData *sortkeys,
									int *sort_columns);

/* EXPLAIN: the nodes of a placement, those down marked so (scan.c). */
extern char *rsfdw_explain_nodes(struct TablePlacement *placement);

/*
 * Merging the sorted answers of several nodes: the sort values of one
 * answer's current row (scan.c).  Start decodes the next row's values in the
 * row's own context (made in parent at the first row, with the arrays, and
 * named cxt_name, a constant string): it returns the context to go back to.
 */
typedef struct RsMergeRow
{
	MemoryContext cxt;
	Datum	   *values;
	bool	   *nulls;
} RsMergeRow;

extern MemoryContext rsfdw_merge_row_start(RsMergeRow *row, MemoryContext parent, const char *cxt_name, int nkeys);
extern int	rsfdw_merge_row_compare(const RsMergeRow *a, const RsMergeRow *b, int nkeys,
									struct SortSupportData *sortkeys);

/* modify.c */
extern void rsAddForeignUpdateTargets(PlannerInfo *root, Index rtindex, RangeTblEntry *target_rte,
									  Relation target_relation);
extern List *rsPlanForeignModify(PlannerInfo *root, ModifyTable *plan, Index resultRelation, int subplan_index);
extern void rsBeginForeignModify(ModifyTableState *mtstate, ResultRelInfo *rinfo, List *fdw_private,
								 int subplan_index, int eflags);
extern TupleTableSlot *rsExecForeignInsert(EState *estate, ResultRelInfo *rinfo, TupleTableSlot *slot,
										   TupleTableSlot *planSlot);
extern TupleTableSlot **rsExecForeignBatchInsert(EState *estate, ResultRelInfo *rinfo, TupleTableSlot **slots,
												 TupleTableSlot **planSlots, int *numSlots);
extern int	rsGetForeignModifyBatchSize(ResultRelInfo *rinfo);
extern TupleTableSlot *rsExecForeignUpdateOrDelete(EState *estate, ResultRelInfo *rinfo, TupleTableSlot *slot,
											   TupleTableSlot *planSlot);
extern void rsEndForeignModify(EState *estate, ResultRelInfo *rinfo);
extern void rsBeginForeignInsert(ModifyTableState *mtstate, ResultRelInfo *rinfo);
extern void rsEndForeignInsert(EState *estate, ResultRelInfo *rinfo);
extern int	rsIsForeignRelUpdatable(Relation rel);
extern bool rsPlanDirectModify(PlannerInfo *root, ModifyTable *plan, Index resultRelation, int subplan_index);
extern void rsBeginDirectModify(ForeignScanState *node, int eflags);
extern TupleTableSlot *rsIterateDirectModify(ForeignScanState *node);
extern void rsEndDirectModify(ForeignScanState *node);
extern void rsExplainDirectModify(ForeignScanState *node, struct ExplainState *es);
extern void rsExplainForeignModify(ModifyTableState *mtstate, ResultRelInfo *rinfo, List *fdw_private,
								   int subplan_index, struct ExplainState *es);
extern void rsExecForeignTruncate(List *rels, DropBehavior behavior, bool restart_seqs);

/* The annotation of a distributed table for planning; ERROR if it has none. */
extern void rsfdw_table_info(Oid relid, AttrNumber *key_attnum, Oid *key_type, AttrNumber *keyspace_attnum);
extern bool rsfdw_table_on_every_node(Oid relid);
extern char *rsfdw_table_ring(Oid relid);
extern int64 rsfdw_coordinator_topology_version(void);

#endif							/* RINGSHARD_FDW_H */

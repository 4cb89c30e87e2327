/*
 * node_analysis.h
 *		EXPLAIN ANALYZE per node: what each node of a scan, an aggregate
 *		pushed down or a write sent whole returned or changed, in how many
 *		answers, and when they came (as postgres_fdw shows the remote side,
 *		and Citus each task).
 *
 * A plan node makes one when the executor instruments it (ANALYZE), starts
 * it at each run, adds each answer as it is read, and prints it from its
 * Explain callback: "Node w1: 42 rows in 1 batch, first after 0.8 ms, last
 * after 0.8 ms".  Times are from the start of the run (the last run's),
 * rows are every run's.
 */
#ifndef RINGSHARD_NODE_ANALYSIS_H
#define RINGSHARD_NODE_ANALYSIS_H

#include "postgres.h"

#include "commands/explain.h"
#include "nodes/execnodes.h"
#include "portability/instr_time.h"

#include "routing/placement.h"

typedef struct NodeAnalysis
{
	int64		rows;
	int64		batches;
	double		first_ms;		/* the first answer came after this long, -1 before it */
	double		last_ms;		/* the last one */
} NodeAnalysis;

typedef struct NodeAnalyses
{
	int			nnodes;			/* by node index of the placement */
	int			runs;
	instr_time	run_started;
	NodeAnalysis *nodes;
} NodeAnalyses;

/*
 * At the start of a run: NULL when the plan node is not instrumented, else
 * the analyses (made on the first run, in the query's context) with this
 * run's clock started.
 */
extern NodeAnalyses *node_analysis_start_run(NodeAnalyses *analyses, PlanState *ps, int nnodes);

/* An answer of node (a placement index) with rows rows, arrived now; a NULL analyses does nothing. */
extern void node_analysis_add(NodeAnalyses *analyses, int node, int64 rows);

/* The same for an answer that came elapsed_ms after the run started. */
extern void node_analysis_add_at(NodeAnalyses *analyses, int node, int64 rows, double elapsed_ms);

/*
 * One "Node <name>" property per node that answered, named as the
 * placement names its node indexes; row_word and rows_word say what was
 * counted ("row", "rows"; "row changed", "rows changed").
 */
extern void node_analysis_explain(const NodeAnalyses *analyses, const TablePlacement *placement,
								  const char *row_word, const char *rows_word, ExplainState *es);

/* The same where the analyses are indexed by answer, names[i] naming the node of answer i. */
extern void node_analysis_explain_named(const NodeAnalyses *analyses, char *const *names,
										const char *row_word, const char *rows_word, ExplainState *es);

#endif							/* RINGSHARD_NODE_ANALYSIS_H */

/*
 * node_analysis.c
 *		EXPLAIN ANALYZE per node (node_analysis.h).
 */
#include "postgres.h"

#include "fdw/node_analysis.h"

NodeAnalyses *
node_analysis_start_run(NodeAnalyses *analyses, PlanState *ps, int nnodes)
{
	if (analyses == NULL)
	{
		/* EXPLAIN ANALYZE instruments the plan node after its Begin callback, so look at each run */
		if (ps->instrument == NULL)
			return NULL;
		analyses = MemoryContextAllocZero(ps->state->es_query_cxt, sizeof(NodeAnalyses));
		analyses->nnodes = nnodes;
		analyses->nodes = MemoryContextAllocZero(ps->state->es_query_cxt, sizeof(NodeAnalysis) * Max(nnodes, 1));
	}
	analyses->runs++;
	INSTR_TIME_SET_CURRENT(analyses->run_started);
	for (int i = 0; i < analyses->nnodes; i++)
		analyses->nodes[i].first_ms = -1;
	return analyses;
}

void
node_analysis_add_at(NodeAnalyses *analyses, int node, int64 rows, double elapsed_ms)
{
	NodeAnalysis *a;

	if (analyses == NULL || node < 0 || node >= analyses->nnodes)
		return;
	a = &analyses->nodes[node];
	a->rows += rows;
	a->batches++;
	a->last_ms = elapsed_ms;
	if (a->first_ms < 0)
		a->first_ms = elapsed_ms;
}

void
node_analysis_add(NodeAnalyses *analyses, int node, int64 rows)
{
	instr_time	now;

	if (analyses == NULL)
		return;
	INSTR_TIME_SET_CURRENT(now);
	INSTR_TIME_SUBTRACT(now, analyses->run_started);
	node_analysis_add_at(analyses, node, rows, INSTR_TIME_GET_MILLISEC(now));
}

static void
explain_one(const NodeAnalyses *analyses, int i, const char *name, const char *row_word, const char *rows_word,
			ExplainState *es)
{
	const NodeAnalysis *a = &analyses->nodes[i];
	char	   *counts;

	if (a->batches == 0)
		return;
	counts = psprintf(INT64_FORMAT " %s in " INT64_FORMAT " batch%s", a->rows, a->rows == 1 ? row_word : rows_word,
					  a->batches, a->batches == 1 ? "" : "es");
	ExplainPropertyText(psprintf("Node %s", name),
						es->timing
						? psprintf("%s, first after %.3f ms, last after %.3f ms%s", counts,
								   Max(a->first_ms, 0), a->last_ms,
								   analyses->runs > 1 ? psprintf(" (rows of all %d runs, times of the last)", analyses->runs) : "")
						: counts,
						es);
}

void
node_analysis_explain(const NodeAnalyses *analyses, const TablePlacement *placement,
					  const char *row_word, const char *rows_word, ExplainState *es)
{
	if (!es->analyze || analyses == NULL)
		return;
	for (int i = 0; i < analyses->nnodes; i++)
		explain_one(analyses, i, placement_node_name(placement, i), row_word, rows_word, es);
}

void
node_analysis_explain_named(const NodeAnalyses *analyses, char *const *names,
							const char *row_word, const char *rows_word, ExplainState *es)
{
	if (!es->analyze || analyses == NULL || names == NULL)
		return;
	for (int i = 0; i < analyses->nnodes; i++)
		if (analyses->nodes[i].batches > 0)
			explain_one(analyses, i, names[i], row_word, rows_word, es);
}

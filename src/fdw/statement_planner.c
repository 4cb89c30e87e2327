/*
 * statement_planner.c
 *		A planner hook for what the foreign-data wrapper's callbacks see too
 *		late: a statement on a distributed table that PostgreSQL's own
 *		planner would reject with a misleading error.
 *
 * INSERT ... ON CONFLICT on a foreign table makes PostgreSQL look for the
 * arbiter index on the coordinator's foreign table, which has none (the
 * nodes have the unique indexes), and fail with 42P10 before the wrapper
 * can say anything.  The hook says what is and is not supported instead.
 */
#include "postgres.h"

#include "nodes/parsenodes.h"
#include "optimizer/planner.h"
#include "parser/parsetree.h"
#include "utils/lsyscache.h"

#include "commands/ddl.h"
#include "fdw/fdw.h"

static planner_hook_type previous_planner_hook = NULL;

static PlannedStmt *
ringshard_planner(Query *parse, const char *query_string, int cursor_options, ParamListInfo bound_params)
{
	if (parse->commandType == CMD_INSERT && parse->onConflict != NULL && parse->resultRelation > 0)
	{
		RangeTblEntry *rte = rt_fetch(parse->resultRelation, parse->rtable);

		if (rte->relkind == RELKIND_FOREIGN_TABLE && is_distributed_table(rte->relid))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("INSERT ... ON CONFLICT is not supported on distributed table %s", get_rel_name(rte->relid)),
					 errdetail("Unique constraints are enforced by the nodes: a duplicate fails with SQLSTATE 23505."),
					 errhint("Insert, and update the row when the insert fails with 23505, in a savepoint.")));
	}
	if (previous_planner_hook)
		return previous_planner_hook(parse, query_string, cursor_options, bound_params);
	return standard_planner(parse, query_string, cursor_options, bound_params);
}

void
rsfdw_statement_planner_init(void)
{
	previous_planner_hook = planner_hook;
	planner_hook = ringshard_planner;
}

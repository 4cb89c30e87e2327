/*
 * ringshard.c
 *		The module's entry point: what the library sets up when it is
 *		loaded.  Everything else lives in a folder by role (docs/design.md).
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/guc.h"

#include "admin/admin_errors.h"
#include "admin/version.h"
#include "bgworker/watchdog.h"
#include "commands/ddl.h"
#include "fdw/fdw.h"
#include "guc.h"
#include "operations/progress.h"
#include "remote/connection.h"
#include "remote/queue.h"
#include "remote/stats.h"
#include "remote/transaction.h"
#include "routing/hot_keys.h"
#include "routing/topology_cache.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

/*
 * Load-time set-up: cache invalidation hooks, clean administration errors,
 * cluster settings, the shared memory of the node statistics, hot keys
 * and operation progress, the watchdog.
 */
void
_PG_init(void)
{
	ringshard_define_settings();
	topology_cache_init();
	admin_errors_init();
	remote_connection_init();
	remote_stats_init();
	hot_keys_init();
	operation_progress_init();
	remote_transaction_init();
	rsfdw_ddl_init();
	rsfdw_statement_planner_init();
	watchdog_init();
}

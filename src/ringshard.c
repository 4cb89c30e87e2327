/*
 * ringshard.c
 *		The module's entry point: what the library sets up when it is
 *		loaded.  Everything else lives in a folder by role (docs/design.md).
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/guc.h"

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

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/*
 * The shared memory of the node statistics, the hot keys and the operations
 * in progress, in this order (that of their tranches' ids).
 */
static const ShmemArea *const shmem_areas[] = {
	&remote_stats_shmem_area,
	&hot_keys_shmem_area,
	&operation_progress_shmem_area,
};

static void
ringshard_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	for (int i = 0; i < lengthof(shmem_areas); i++)
	{
		RequestAddinShmemSpace(MAXALIGN(shmem_areas[i]->size));
		RequestNamedLWLockTranche(shmem_areas[i]->tranche, shmem_areas[i]->nlocks);
	}
}

static void
ringshard_shmem_startup(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	for (int i = 0; i < lengthof(shmem_areas); i++)
	{
		const ShmemArea *a = shmem_areas[i];
		bool		found;
		void	   *area = ShmemInitStruct(a->name, a->size, &found);

		if (found)
			a->attach(area, NULL);
		else
		{
			memset(area, 0, a->size);
			a->attach(area, GetNamedLWLockTranche(a->tranche));
		}
	}
	LWLockRelease(AddinShmemInitLock);
}

/*
 * Load-time set-up: cache invalidation hooks, cluster settings, the shared
 * memory of the node statistics, hot keys and operation progress, the
 * watchdog.
 */
void
_PG_init(void)
{
	ringshard_define_settings();
	topology_cache_init();
	remote_connection_init();
	if (process_shared_preload_libraries_in_progress)
	{
		prev_shmem_request_hook = shmem_request_hook;
		shmem_request_hook = ringshard_shmem_request;
		prev_shmem_startup_hook = shmem_startup_hook;
		shmem_startup_hook = ringshard_shmem_startup;
	}
	remote_transaction_init();
	rsfdw_ddl_init();
	rsfdw_statement_planner_init();
	watchdog_init();
}

/*
 * watchdog.c
 *		The health watchdog: a background worker that, every
 *		ringshard.watchdog_interval, probes the nodes, marks them up or down
 *		and replays each returning node's queued writes (as the FREMIS-N
 *		coordinator's watchdog does).  It runs
 *		ringshard.watchdog_tick() in its own transaction (which also resolves
 *		prepared transactions a crash left in doubt), so a crash at any point
 *		leaves the queue and the nodes consistent.
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/snapmgr.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"

#include "bgworker/watchdog.h"
#include "guc.h"


PGDLLEXPORT void ringshard_watchdog_main(Datum arg);

/*
 * Settings, and the worker itself when preloaded.  The database and role are
 * reloadable: a worker is always registered with the preloaded library, and
 * waits idle while no database is set; when either setting changes it exits
 * and the postmaster starts it again (a session's database and role are
 * fixed when it starts).  So ALTER SYSTEM SET ringshard.watchdog_database
 * and a reload start it, with no second restart.
 */
void
watchdog_init(void)
{
	BackgroundWorker worker;

	if (!process_shared_preload_libraries_in_progress)
		return;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = 5;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "ringshard");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "ringshard_watchdog_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "ringshard watchdog");
	snprintf(worker.bgw_type, BGW_MAXLEN, "ringshard watchdog");
	RegisterBackgroundWorker(&worker);
}

/* A setting of the worker's, as a string ("" when unset). */
static const char *
setting(const char *value)
{
	return value ? value : "";
}

/* Take a configuration reload; exit (to be started again) when the database or role changed. */
static void
reload_settings(const char *started_database, const char *started_role)
{
	if (!ConfigReloadPending)
		return;
	ConfigReloadPending = false;
	ProcessConfigFile(PGC_SIGHUP);
	if (strcmp(setting(ringshard_watchdog_database), started_database) != 0 ||
		strcmp(setting(ringshard_watchdog_role), started_role) != 0)
	{
		elog(LOG, "ringshard watchdog restarts to serve database \"%s\" as role \"%s\"",
			 setting(ringshard_watchdog_database), ringshard_watchdog_role && ringshard_watchdog_role[0] ? ringshard_watchdog_role : "(bootstrap superuser)");
		proc_exit(1);
	}
}

/*
 * One round, in its own transaction: the query when the extension is
 * installed.  False if it is not.
 */
static bool
watchdog_round(const char *activity, const char *query)
{
	bool		installed;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	/*
	 * READ COMMITTED whatever default_transaction_isolation says: a node's
	 * hand-over counts its queue after taking the queue lock, and must see
	 * every write committed before it.
	 */
	XactIsoLevel = XACT_READ_COMMITTED;
	/*
	 * A node that stops answering in the middle of a delivery must not stop
	 * the watchdog for good: a round is cancelled after 10 minutes (the next
	 * one carries on where it stopped).
	 */
	enable_timeout_after(STATEMENT_TIMEOUT, 10 * 60 * 1000);
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, activity);
	installed = SPI_execute("SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'ringshard'",
							true, 1) == SPI_OK_SELECT && SPI_processed == 1;
	if (installed && SPI_execute(query, false, 0) != SPI_OK_SELECT)
		elog(WARNING, "%s failed", activity);
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	disable_timeout(STATEMENT_TIMEOUT, false);
	pgstat_report_activity(STATE_IDLE, NULL);
	return installed;
}

/* The worker's main loop. */
void
ringshard_watchdog_main(Datum arg)
{
	char	   *started_database;
	char	   *started_role;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	started_database = pstrdup(setting(ringshard_watchdog_database));
	started_role = pstrdup(setting(ringshard_watchdog_role));

	/* No database to serve: wait for one (a reload that sets it restarts the worker). */
	while (started_database[0] == '\0')
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_EXIT_ON_PM_DEATH, -1L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		reload_settings(started_database, started_role);
	}

	BackgroundWorkerInitializeConnection(started_database, started_role[0] ? started_role : NULL, 0);
	elog(LOG, "ringshard watchdog started for database \"%s\"%s%s", started_database,
		 started_role[0] ? " as role " : "", started_role);

	for (;;)
	{
		TimestampTz last_round = GetCurrentTimestamp();
		long		wait_ms = ringshard_watchdog_interval_ms;

		/*
		 * Wait out the interval since the last round.  A configuration
		 * reload wakes the worker early: it takes the new settings (a new
		 * interval counts from the last round) and waits on, so that a
		 * reload never runs an extra round.
		 */
		while (wait_ms > 0)
		{
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 wait_ms, PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
			reload_settings(started_database, started_role);
			wait_ms = ringshard_watchdog_interval_ms -
				(long) ((GetCurrentTimestamp() - last_round) / 1000);
		}
		if (watchdog_round("ringshard watchdog round", "SELECT * FROM ringshard.watchdog_tick()"))
			(void) watchdog_round("ringshard watchdog recovery",
								  "SELECT * FROM ringshard.recover_prepared_transactions()");
	}
}

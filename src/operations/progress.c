/*
 * progress.c
 *		Progress of long operations in shared memory (progress.h), and the
 *		SQL functions that report and read it.
 *
 * OPERATION_SLOTS slots, each owned by one backend (its pid) while it runs
 * an operation; the owner writes its slot under the lock, a reader copies
 * every slot under it.  Writes are rare (a page or batch of rows at a
 * time), so one lock does.
 */
#include "postgres.h"

#include "access/xact.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "operations/progress.h"

#define OPERATION_SLOTS 64
#define COMMAND_BYTES 32
#define PHASE_BYTES 128

typedef struct OperationSlot
{
	int			pid;			/* 0: free */
	Oid			dbid;
	Oid			relid;
	char		command[COMMAND_BYTES];
	char		phase[PHASE_BYTES];
	int64		done;
	int64		in_flight;		/* rows of the batch under way, not committed yet */
	int64		total;
	TimestampTz started;
	TimestampTz updated;
} OperationSlot;

typedef struct OperationsShared
{
	LWLock	   *lock;
	OperationSlot slots[OPERATION_SLOTS];
} OperationsShared;

static OperationsShared *shared = NULL;
static int	my_slot = -1;		/* this backend's slot, or -1 */
static bool callbacks_registered = false;

static void
progress_attach(void *area, LWLockPadded *new_locks)
{
	shared = area;
	if (new_locks != NULL)
		shared->lock = &new_locks->lock;
}

const ShmemArea operation_progress_shmem_area = {
	"ringshard operation progress", sizeof(OperationsShared), "ringshard_progress", 1, progress_attach
};

void
operation_progress_done(void)
{
	if (shared == NULL || my_slot < 0)
		return;
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	if (shared->slots[my_slot].pid == MyProcPid)
		shared->slots[my_slot].pid = 0;
	LWLockRelease(shared->lock);
	my_slot = -1;
}

/* An operation ends with an error as it ends at all: its slot is free (the next report takes one again). */
static void
progress_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
		operation_progress_done();
}

static void
progress_exit_callback(int code, Datum arg)
{
	operation_progress_done();
}

void
operation_progress_report(const char *command, Oid relid, const char *phase, int64 done, int64 total)
{
	TimestampTz now = GetCurrentTimestamp();
	OperationSlot *s;

	if (shared == NULL)
		return;
	if (!callbacks_registered)
	{
		RegisterXactCallback(progress_xact_callback, NULL);
		before_shmem_exit(progress_exit_callback, (Datum) 0);
		callbacks_registered = true;
	}
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	if (my_slot >= 0 && shared->slots[my_slot].pid != MyProcPid)
		my_slot = -1;
	for (int i = 0; my_slot < 0 && i < OPERATION_SLOTS; i++)
		if (shared->slots[i].pid == 0)
		{
			my_slot = i;
			memset(&shared->slots[i], 0, sizeof(OperationSlot));
			shared->slots[i].pid = MyProcPid;
			shared->slots[i].started = now;
		}
	if (my_slot >= 0)
	{
		s = &shared->slots[my_slot];
		/* another table or command: another operation, which starts now */
		if (s->relid != relid || strncmp(s->command, command, COMMAND_BYTES) != 0)
			s->started = now;
		s->dbid = MyDatabaseId;
		s->relid = relid;
		strlcpy(s->command, command, COMMAND_BYTES);
		strlcpy(s->phase, phase ? phase : "", PHASE_BYTES);
		s->done = done;
		s->in_flight = 0;
		s->total = total;
		s->updated = now;
	}
	LWLockRelease(shared->lock);
	/* all slots taken: this operation is not shown, and goes on */
}

void
operation_progress_in_flight(const char *command, Oid relid, int64 rows)
{
	if (shared == NULL || my_slot < 0)
		return;
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	if (shared->slots[my_slot].pid == MyProcPid && shared->slots[my_slot].relid == relid &&
		strncmp(shared->slots[my_slot].command, command, COMMAND_BYTES) == 0)
	{
		shared->slots[my_slot].in_flight = rows;
		shared->slots[my_slot].updated = GetCurrentTimestamp();
	}
	LWLockRelease(shared->lock);
}

PG_FUNCTION_INFO_V1(ringshard_progress_report);

/* progress_report(command, table, phase, done, total): operation_progress_report from SQL. */
Datum
ringshard_progress_report(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_VOID();
	operation_progress_report(text_to_cstring(PG_GETARG_TEXT_PP(0)), PG_GETARG_OID(1),
							  PG_ARGISNULL(2) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(2)),
							  PG_ARGISNULL(3) ? 0 : PG_GETARG_INT64(3), PG_ARGISNULL(4) ? -1 : PG_GETARG_INT64(4));
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(ringshard_progress_done);

Datum
ringshard_progress_done(PG_FUNCTION_ARGS)
{
	operation_progress_done();
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(ringshard_operation_progress);

/* operation_progress(): one row per operation running in this database. */
Datum
ringshard_operation_progress(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	OperationSlot *copy;

	if (shared == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("ringshard's operation progress is not available"),
				 errdetail("It lives in shared memory, which only a library loaded at server start can have."),
				 errhint("Add ringshard to shared_preload_libraries and restart the server.")));
	InitMaterializedSRF(fcinfo, 0);
	copy = palloc(sizeof(shared->slots));
	LWLockAcquire(shared->lock, LW_SHARED);
	memcpy(copy, shared->slots, sizeof(shared->slots));
	LWLockRelease(shared->lock);
	for (int i = 0; i < OPERATION_SLOTS; i++)
	{
		OperationSlot *s = &copy[i];
		Datum		values[8];
		bool		nulls[8] = {0};

		if (s->pid == 0 || s->dbid != MyDatabaseId)
			continue;
		values[0] = Int32GetDatum(s->pid);
		values[1] = CStringGetTextDatum(s->command);
		values[2] = ObjectIdGetDatum(s->relid);
		values[3] = CStringGetTextDatum(s->phase);
		/*
		 * A batch under way counts as it goes, as pg_stat_progress_copy
		 * counts a COPY's rows; it is complete only once reported (after its
		 * commit and what follows it, the deletes of a rebalance's last batch).
		 */
		if (s->in_flight > 0 && s->total > 0)
			values[4] = Int64GetDatum(Min(s->done + s->in_flight, s->total - 1));
		else
			values[4] = Int64GetDatum(s->done + s->in_flight);
		if (s->total >= 0)
			values[5] = Int64GetDatum(s->total);
		else
			nulls[5] = true;
		values[6] = TimestampTzGetDatum(s->started);
		values[7] = TimestampTzGetDatum(s->updated);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

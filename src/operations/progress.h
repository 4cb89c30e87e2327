/*
 * progress.h
 *		What a long operation of this server's backends has done so far:
 *		ringshard.operation_progress, in the manner of pg_stat_progress_*
 *		(docs/monitoring.md).
 *
 * rebalance(), rehome_rows() and create_distributed_table() run for
 * minutes in transactions of their own, whose catalog rows another session
 * cannot see until they commit; so each backend writes its progress into a
 * slot of shared memory, which any session reads.  A slot is the backend's
 * until the operation ends, its transaction aborts or the backend exits.
 * Without ringshard in shared_preload_libraries nothing is recorded.
 */
#ifndef RINGSHARD_OPERATIONS_PROGRESS_H
#define RINGSHARD_OPERATIONS_PROGRESS_H

#include "postgres.h"

#include "shmem_area.h"

/*
 * Its shared memory, when preloaded: asked for from the library's
 * shmem_request_hook, attached from its shmem_startup_hook (ringshard.c).
 */
extern const ShmemArea operation_progress_shmem_area;

/* This backend's operation on a table: what it is doing now, and how far (total -1: unknown). */
extern void operation_progress_report(const char *command, Oid relid, const char *phase, int64 done, int64 total);

/*
 * Rows of the batch under way so far, on top of the done last reported
 * (which resets them): shown while the batch runs, before it commits.
 * Nothing if this backend reports no such operation.
 */
extern void operation_progress_in_flight(const char *command, Oid relid, int64 rows);

/* The operation has ended: the slot is free again. */
extern void operation_progress_done(void);

#endif							/* RINGSHARD_OPERATIONS_PROGRESS_H */

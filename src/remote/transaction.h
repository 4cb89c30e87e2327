/*
 * transaction.h
 *		Remote transactions that follow the local one, with two-phase commit
 *		of every node that took a write, and the recovery of prepared
 *		transactions that a crash left in doubt (docs/design.md, invariant 3).
 */
#ifndef RINGSHARD_REMOTE_TRANSACTION_H
#define RINGSHARD_REMOTE_TRANSACTION_H

#include "remote/connection.h"

#include "guc.h"

extern void remote_transaction_init(void);

/* The connection took a write in this transaction: it commits in two phases. */
extern void remote_note_write(RemoteConnection *c);

/*
 * Commit the node's part of this transaction now, in one phase, before the
 * local commit; the connection then has no part in the local transaction's
 * end (a later statement there opens a new one).  Only for a part whose
 * work a rollback of the local transaction need not undo (rebalance's copy
 * of a batch: its rows on a node that is not yet their replica).
 */
extern void remote_commit_part_now(RemoteConnection *c);

/*
 * In the PG_CATCH of an internal subtransaction run so that one node's
 * error does not end the statement: the error, copied into cxt (the memory
 * context of the code before the subtransaction), with the error state
 * flushed and the subtransaction rolled back.  The caller then restores its
 * memory context and resource owner, as after any internal subtransaction.
 */
extern ErrorData *remote_rollback_subtransaction(MemoryContext cxt);
extern void remote_rethrow_cancel(ErrorData *edata);

/*
 * Tests only (ringshard.fault_injection, superuser): crash the server with a
 * PANIC, or sleep, at a named point of the commit protocol.
 */
extern void remote_fault_point(const char *point);

#endif							/* RINGSHARD_REMOTE_TRANSACTION_H */

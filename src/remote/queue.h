/*
 * queue.h
 *		Hinted handoff: rows for a replica that is down wait in
 *		ringshard.write_queue, written in the writer's transaction, and are
 *		replayed to the node as the role that wrote them, with that role's
 *		user mapping (docs/design.md, Writes).
 */
#ifndef RINGSHARD_REMOTE_QUEUE_H
#define RINGSHARD_REMOTE_QUEUE_H

#include "postgres.h"

#include "guc.h"

/* Queue a row (a composite datum of the table's type) for a node, in this transaction. */
extern void queue_write(const char *node, Oid relid, Oid writer, Datum row);

/*
 * Queue a statement (an UPDATE, DELETE or TRUNCATE as its other replicas ran
 * it, every value a literal) for a node, in this transaction: replayed in
 * order after the writes queued before it, it changes the node's copy as it
 * changed theirs.
 */
extern void queue_statement(const char *node, Oid relid, Oid writer, const char *sql);

/*
 * Whether a node the cached topology calls down has been marked up since,
 * asked under the node's queue lock (so no hand-over of its queue is half
 * done): a writer that sees it up writes to it directly, else queues.
 */
extern bool queue_node_up_now(const char *node);

/* Forget the queued writes of a table (it was truncated or dropped). */
extern void queue_forget_table(Oid relid);

#endif							/* RINGSHARD_REMOTE_QUEUE_H */

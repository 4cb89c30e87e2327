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

/* Forget the queued writes of a table (it was truncated or dropped). */
extern void queue_forget_table(Oid relid);

#endif							/* RINGSHARD_REMOTE_QUEUE_H */

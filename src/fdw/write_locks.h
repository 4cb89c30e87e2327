/*
 * write_locks.h
 *		Coordinator-side locks of the keys a transaction writes (write_locks.c).
 */
#ifndef RINGSHARD_FDW_WRITE_LOCKS_H
#define RINGSHARD_FDW_WRITE_LOCKS_H

#include "postgres.h"

/* Keys of one table a transaction locks one by one before it locks the table instead. */
#define RINGSHARD_MAX_KEY_LOCKS 64

/* The lock slot of a key, from its canonical bytes (and a map's keyspace bytes, or NULL). */
extern uint32 rsfdw_key_lock_slot(const char *key_bytes, size_t key_len, const char *keyspace_bytes,
								  size_t keyspace_len);

/* Lock one key of a table for writing, to the end of the transaction. */
extern void rsfdw_lock_key_for_write(Oid relid, uint32 slot);

/* The same for several keys, in a fixed order (slots are sorted in place). */
extern void rsfdw_lock_keys_for_write(Oid relid, uint32 *slots, int n);

/* Lock the whole table for writing: a write that may touch any row. */
extern void rsfdw_lock_table_for_write(Oid relid);

/*
 * SELECT ... FOR UPDATE/SHARE: the keys it reads (slots sorted in place), or
 * the whole table, in the mode of a writer (exclusive) or shared by readers
 * that lock (FOR SHARE, FOR KEY SHARE); with nowait, an ERROR (55P03)
 * instead of waiting.
 */
extern void rsfdw_lock_keys_for_rows(Oid relid, uint32 *slots, int n, bool exclusive, bool nowait);
extern void rsfdw_lock_table_for_rows(Oid relid, bool exclusive, bool nowait);

#endif							/* RINGSHARD_FDW_WRITE_LOCKS_H */

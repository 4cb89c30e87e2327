/*
 * hot_keys.h
 *		The most used keys of each distributed table, by reads and by writes,
 *		in periods of ringshard.hot_keys_period (ringshard.stat_hot_keys;
 *		docs/monitoring.md).
 *
 * The coordinator notes each key a statement routes by (a router read or
 * write, a scan or UPDATE/DELETE fixed to keys, each row an INSERT or COPY
 * sends) in a space-saving sketch in shared memory (src/core/rs_topk.h):
 * bounded memory, one short lock per key, no catalog write.  Without
 * ringshard in shared_preload_libraries, or with ringshard.track_hot_keys
 * off, nothing is noted.
 */
#ifndef RINGSHARD_HOT_KEYS_H
#define RINGSHARD_HOT_KEYS_H

#include "postgres.h"

#include "executor/tuptable.h"

#include "routing/annotated_tables.h"
#include "shmem_area.h"

typedef enum HotKeyAccess
{
	HOT_KEY_READ = 0,
	HOT_KEY_WRITE = 1
} HotKeyAccess;

#define HOT_KEY_ACCESS_KINDS 2

/*
 * Its shared memory, when preloaded: asked for from the library's
 * shmem_request_hook, attached from its shmem_startup_hook (ringshard.c).
 */
extern const ShmemArea hot_keys_shmem_area;

/* Whether notes are kept now: shared memory, and the setting on. */
extern bool hot_keys_tracking(void);

/*
 * Note one access to a key of a table (keyspace: the row's keyspace value,
 * for a map whose keyspace is a column; NULL otherwise).  A NULL key is not
 * noted.
 */
extern void hot_keys_note_key(TablePlacement *p, Datum key, const Datum *keyspace, HotKeyAccess access);

/* The same for a list of keys (an IN list): each distinct key once, as a scan reads it. */
extern void hot_keys_note_keys(TablePlacement *p, const Datum *keys, const bool *nulls, int nkeys,
							   const Datum *keyspace, HotKeyAccess access);

/*
 * The same for a key already encoded: its canonical bytes, and those of the
 * keyspace it is hashed with for a partition map (placement.h,
 * PlacementRowKey); a ring's key has none.
 */
extern void hot_keys_note_encoded(TablePlacement *p, const char *bytes, size_t len,
								  const char *keyspace, size_t keyspace_len, HotKeyAccess access);

#endif							/* RINGSHARD_HOT_KEYS_H */

/*
 * write_locks.c
 *		Writers of one key meet on the coordinator, not on its replicas
 *		(docs/design.md, "Concurrent writes").
 *
 * Every write of a distributed table takes, before any node sees it, a
 * lock on the coordinator for each key it writes, held to the end of the
 * transaction: a heavyweight advisory lock on (database, table, 32 bits of
 * the key's token), in ExclusiveLock mode.  Two writers of one key therefore
 * queue here; the second reaches the replicas only after the first has
 * committed (or rolled back) on all of them, so no writer ever holds one
 * replica of a row while it waits for another; and when transactions wait
 * for each other's keys in a cycle, PostgreSQL's own deadlock detector on
 * the coordinator sees the cycle and cancels one with 40P01, as on one
 * server.  A statement that may write any row (an UPDATE or DELETE that is
 * not by key), a COPY FROM, and a transaction that writes more than
 * RINGSHARD_MAX_KEY_LOCKS keys of one table take the table instead (the
 * shared lock table holds a few thousand locks, not a bulk load's keys):
 * they wait for, and hold back, every other writer of the table; readers go
 * on.  The writers' lock of the table is an advisory lock too, (database,
 * table, 0, TABLE_LOCK_CLASS), with the modes of a relation's lock: every
 * writer of keys (and reader of keys FOR UPDATE) holds it in
 * RowExclusiveLock mode, a writer of the table in ExclusiveLock mode.  Not
 * the relation's own lock: every writer already holds that in
 * RowExclusiveLock mode from its statement's start, so two writers of the
 * table asking for ExclusiveLock on it each waited for the other, a
 * deadlock (40P01) between two single statements that one server does not
 * have.  Readers of every row FOR UPDATE or FOR SHARE still take the
 * relation's lock (ExclusiveLock, ShareLock), which every writer's
 * RowExclusiveLock meets, as does a move's batch (src/operations).  Every write conflict on the nodes is
 * so a wait on the coordinator first, where PostgreSQL sees it: no
 * wait-for graph across nodes is needed.  SELECT ... FOR UPDATE and FOR
 * SHARE lock the same keys (or the table) the same way, so that a row
 * locked for an update is one no writer reaches meanwhile.
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "fdw/write_locks.h"
#include "rs_hash.h"

/* What tells ringshard's key locks apart from the advisory locks of users (pg_locks.objsubid). */
#define KEY_LOCK_CLASS 0x5253		/* "RS" */
/* ... and its tables' writer locks */
#define TABLE_LOCK_CLASS 0x5254		/* "RT" */

/* Per table, in this transaction: how many keys are locked, or whether the table is. */
typedef struct TableWriteLocks
{
	Oid			relid;			/* hash key */
	int			nkeys;
	bool		table_locked;
	bool		table_shared;	/* FOR SHARE of every row: the table in ShareLock mode */
	bool		table_joined;	/* a writer of keys: the table in RowExclusiveLock mode */
} TableWriteLocks;

static HTAB *locks_of_transaction = NULL;
static bool callback_registered = false;

static void
forget_locks(XactEvent event, void *arg)
{
	/* the table lived in TopTransactionContext: gone with the transaction */
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT || event == XACT_EVENT_PREPARE ||
		event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_PARALLEL_ABORT)
		locks_of_transaction = NULL;
}

/*
 * A subtransaction that aborts releases the locks it took: what this table
 * says is no longer sure, so it starts again (locking a key again that is
 * still held costs nothing and counts nothing).
 */
static void
forget_locks_of_subtransaction(SubXactEvent event, SubTransactionId my_subid, SubTransactionId parent_subid,
							   void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		locks_of_transaction = NULL;
}

static TableWriteLocks *
table_locks(Oid relid)
{
	bool		found;
	TableWriteLocks *entry;

	if (locks_of_transaction == NULL)
	{
		HASHCTL		ctl;

		if (!callback_registered)
		{
			RegisterXactCallback(forget_locks, NULL);
			RegisterSubXactCallback(forget_locks_of_subtransaction, NULL);
			callback_registered = true;
		}
		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(TableWriteLocks);
		ctl.hcxt = TopTransactionContext;
		locks_of_transaction = hash_create("ringshard write locks", 8, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	entry = hash_search(locks_of_transaction, &relid, HASH_ENTER, &found);
	if (!found)
	{
		entry->nkeys = 0;
		entry->table_locked = false;
		entry->table_shared = false;
		entry->table_joined = false;
	}
	return entry;
}

static void
lock_not_available(Oid relid)
{
	ereport(ERROR,
			(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
			 errmsg("could not obtain lock on row in relation \"%s\"", get_rel_name(relid))));
}

/* The table's writer lock (see the top of this file) in a mode; false if nowait and it is not free. */
static bool
lock_table_tag(Oid relid, LOCKMODE mode, bool nowait)
{
	LOCKTAG		tag;

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, relid, 0, TABLE_LOCK_CLASS);
	return LockAcquire(&tag, mode, false, nowait) != LOCKACQUIRE_NOT_AVAIL;
}

/* A writer of keys (or a reader of keys FOR UPDATE) joins the table's writers. */
static void
join_table_writers(Oid relid, bool nowait)
{
	TableWriteLocks *entry = table_locks(relid);

	if (entry->table_joined || entry->table_locked)
		return;
	if (!lock_table_tag(relid, RowExclusiveLock, nowait))
		lock_not_available(relid);
	entry->table_joined = true;
}


/* A writer of any row: the writers' lock of the table, exclusive. */
static void
lock_table_for_writers(Oid relid)
{
	TableWriteLocks *entry = table_locks(relid);

	if (entry->table_locked)
		return;
	(void) lock_table_tag(relid, ExclusiveLock, false);
	entry->table_locked = true;
}

/* The relation, for a reader of any row: exclusive (FOR UPDATE) or shared (FOR SHARE). */
static void
lock_whole_table(Oid relid, bool exclusive, bool nowait)
{
	TableWriteLocks *entry = table_locks(relid);
	LOCKMODE	mode = exclusive ? ExclusiveLock : ShareLock;

	if (entry->table_locked || (!exclusive && entry->table_shared))
		return;
	if (!nowait)
		LockRelationOid(relid, mode);
	else if (!ConditionalLockRelationOid(relid, mode))
		lock_not_available(relid);
	if (exclusive)
		entry->table_locked = true;
	else
		entry->table_shared = true;
}

/* One key's slot; past RINGSHARD_MAX_KEY_LOCKS keys, the table instead. */
static void
lock_key_slot(Oid relid, uint32 slot, bool exclusive, bool nowait, bool writer)
{
	TableWriteLocks *entry = table_locks(relid);
	LOCKTAG		tag;
	LockAcquireResult result;

	if (entry->table_locked || (!exclusive && entry->table_shared))
		return;
	if (entry->nkeys >= RINGSHARD_MAX_KEY_LOCKS)
	{
		/* a bulk write: the table instead of more keys (the lock table is shared and small) */
		if (writer)
			lock_table_for_writers(relid);
		else
			lock_whole_table(relid, exclusive, nowait);
		return;
	}
	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, relid, slot, KEY_LOCK_CLASS);
	result = LockAcquire(&tag, exclusive ? ExclusiveLock : ShareLock, false, nowait);
	if (result == LOCKACQUIRE_NOT_AVAIL)
		lock_not_available(relid);
	if (result == LOCKACQUIRE_OK)
		entry->nkeys++;
}

static int
compare_slots(const void *a, const void *b)
{
	uint32		x = *(const uint32 *) a;
	uint32		y = *(const uint32 *) b;

	return x < y ? -1 : x > y;
}

/* Several keys' slots, in one order, so that two statements locking the same keys cannot wait for each other. */
static void
lock_key_slots(Oid relid, uint32 *slots, int n, bool exclusive, bool nowait, bool writer)
{
	qsort(slots, n, sizeof(uint32), compare_slots);
	for (int i = 0; i < n; i++)
		if (i == 0 || slots[i] != slots[i - 1])
			lock_key_slot(relid, slots[i], exclusive, nowait, writer);
}

uint32
rsfdw_key_lock_slot(const char *key_bytes, size_t key_len, const char *keyspace_bytes, size_t keyspace_len)
{
	uint64		token = rs_murmur3_token(key_bytes, key_len);

	/* a map's keyspace is part of the key: the same key in two keyspaces is two rows */
	if (keyspace_bytes != NULL)
		token ^= rs_fmix64(rs_murmur3_token(keyspace_bytes, keyspace_len));
	return (uint32) (token >> 32);
}

void
rsfdw_lock_table_for_write(Oid relid)
{
	lock_table_for_writers(relid);
}

void
rsfdw_lock_key_for_write(Oid relid, uint32 slot)
{
	join_table_writers(relid, false);
	lock_key_slot(relid, slot, true, false, true);
}

void
rsfdw_lock_keys_for_write(Oid relid, uint32 *slots, int n)
{
	join_table_writers(relid, false);
	lock_key_slots(relid, slots, n, true, false, true);
}

/*
 * Rows locked by SELECT ... FOR UPDATE/SHARE are locked where writers meet:
 * the key's slot on the coordinator, exclusive as a writer takes it (FOR
 * UPDATE, FOR NO KEY UPDATE) or shared (FOR SHARE, FOR KEY SHARE: writers
 * wait, other such readers do not); the whole table, in the same two
 * modes, for a read of any row.  A lock already held covers a weaker one.
 */
void
rsfdw_lock_table_for_rows(Oid relid, bool exclusive, bool nowait)
{
	lock_whole_table(relid, exclusive, nowait);
}

void
rsfdw_lock_keys_for_rows(Oid relid, uint32 *slots, int n, bool exclusive, bool nowait)
{
	/*
	 * A writer of a key holds the table in RowExclusiveLock mode (from its
	 * statement's start), which a reader of every row FOR SHARE and a move's
	 * batch wait for, and the writers' lock in the same mode, which a writer
	 * of the table waits for: so must a reader FOR UPDATE of a key, or they
	 * would meet only on the node, where no deadlock detector sees both.
	 */
	if (exclusive)
	{
		if (!nowait)
			LockRelationOid(relid, RowExclusiveLock);
		else if (!ConditionalLockRelationOid(relid, RowExclusiveLock))
			lock_not_available(relid);
		join_table_writers(relid, nowait);
	}
	lock_key_slots(relid, slots, n, exclusive, nowait, false);
}

/*
 * hot_keys.c
 *		The hot-key sketches in shared memory (hot_keys.h), and the SQL
 *		functions behind ringshard.stat_hot_keys.
 *
 * One sketch per access kind (read, write) and period, HOT_KEY_PERIODS
 * periods kept in a circle: the period a note falls in is the wall-clock
 * period of ringshard.hot_keys_period that holds now, and a sketch found
 * holding an older period is emptied first.  Beside each counter of the
 * core's space-saving sketch lies what the view shows of its item: the
 * database and table, the key's canonical bytes (docs/routing.md §1) and
 * keyspace as far as they fit, and the key's ring token or partition,
 * written only when the counter is given to a new item.
 *
 * The sketches are shared by every database of the server, so a table
 * whose keys are all colder than the hottest RS_TOPK_MAX_CAPACITY keys of
 * the server in a period may show none: the sketch promises only the keys
 * above 1/256 of the period's accesses of that kind (docs/monitoring.md).
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "fmgr.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "rs_hash.h"
#include "rs_ring.h"
#include "rs_topk.h"

#include "guc.h"
#include "routing/hot_keys.h"
#include "types/key_bytes.h"
#include "types/ringtoken.h"

#define HOT_KEY_PERIODS 4
#define HOT_KEY_BYTES 96		/* keyspace and key bytes kept per item */
#define HOT_KEY_KEYSPACE_BYTES 32	/* of which the keyspace takes at most */

typedef struct HotKeyItem
{
	Oid			dbid;
	Oid			relid;
	uint64		position;		/* the key's ring token, or its partition */
	bool		on_ring;
	bool		key_truncated;	/* the key was longer than kept */
	bool		keyspace_truncated; /* ... the keyspace */
	bool		has_keyspace;
	uint8		keyspace_len;
	uint8		key_len;
	char		bytes[HOT_KEY_BYTES];	/* keyspace, then key */
} HotKeyItem;

typedef struct HotKeySketch
{
	TimestampTz period_start;	/* 0: never used */
	int			period_seconds;
	rs_topk		topk;
	HotKeyItem	items[RS_TOPK_MAX_CAPACITY];
} HotKeySketch;

typedef struct HotKeysShared
{
	LWLockPadded *locks;		/* one per access kind */
	HotKeySketch sketches[HOT_KEY_ACCESS_KINDS][HOT_KEY_PERIODS];
} HotKeysShared;

static HotKeysShared *shared = NULL;

static void
hot_keys_attach(void *area, LWLockPadded *new_locks)
{
	shared = area;
	if (new_locks == NULL)
		return;
	shared->locks = new_locks;
	for (int a = 0; a < HOT_KEY_ACCESS_KINDS; a++)
		for (int p = 0; p < HOT_KEY_PERIODS; p++)
			(void) rs_topk_init(&shared->sketches[a][p].topk, RS_TOPK_MAX_CAPACITY);
}

const ShmemArea hot_keys_shmem_area = {
	"ringshard hot keys", sizeof(HotKeysShared), "ringshard_hot_keys", HOT_KEY_ACCESS_KINDS, hot_keys_attach
};

bool
hot_keys_tracking(void)
{
	return shared != NULL && ringshard_track_hot_keys;
}

/* The start of the period that holds now, and its sketch's place in the circle. */
static TimestampTz
current_period(TimestampTz now, int period_seconds, int *place)
{
	int64		length = (int64) period_seconds * USECS_PER_SEC;
	int64		index = now >= 0 ? now / length : (now - length + 1) / length;

	*place = (int) (((index % HOT_KEY_PERIODS) + HOT_KEY_PERIODS) % HOT_KEY_PERIODS);
	return (TimestampTz) (index * length);
}

/*
 * Back off to the start of a UTF-8 character, so a cut key stays valid
 * text: at most 3 bytes (a character has at most 4), so bytes that are no
 * text (a bytea key) are cut where they reach the room.
 */
static size_t
utf8_cut(const char *bytes, size_t len, size_t room)
{
	size_t		cut = room;

	if (len <= room)
		return len;
	while (cut > 0 && room - cut < 3 && ((unsigned char) bytes[cut] & 0xC0) == 0x80)
		cut--;
	return ((unsigned char) bytes[cut] & 0xC0) == 0x80 ? room : cut;
}

/* The ring token or partition of a key (as shard_for and partition_for give them). */
static uint64
key_position(TablePlacement *p, const char *bytes, size_t len, const char *ks, size_t ks_len, bool *on_ring)
{
	*on_ring = p->ring != NULL;
	if (p->ring)
		return p->ring->ring ? rs_ring_key_hash(p->ring->ring, bytes, len) : 0;
	else
	{
		int			partition = 0;

		/* a failed digest shows as partition 0 rather than failing the statement that noted it */
		if (rs_partition(ks, ks_len, bytes, len, &partition) != RS_OK)
			partition = 0;
		return (uint64) partition;
	}
}

void
hot_keys_note_encoded(TablePlacement *p, const char *bytes, size_t len, const char *ks, size_t ks_len,
					  HotKeyAccess access)
{
	bool		has_keyspace = p->map != NULL;
	uint64		fingerprint;
	int			period_seconds = ringshard_hot_keys_period_s;
	int			place;
	TimestampTz start;
	HotKeySketch *sketch;
	uint32		index;
	int			taken;
	rs_status	status;

	if (!hot_keys_tracking())
		return;
	if (!has_keyspace || ks == NULL)
	{
		/* a ring's key has no keyspace */
		ks = "";
		ks_len = 0;
	}
	fingerprint = rs_topk_fingerprint(((uint64) MyDatabaseId << 32) | p->relid, ks, ks_len, bytes, len);
	start = current_period(GetCurrentTimestamp(), period_seconds, &place);

	LWLockAcquire(&shared->locks[access].lock, LW_EXCLUSIVE);
	sketch = &shared->sketches[access][place];
	if (sketch->period_start != start || sketch->period_seconds != period_seconds)
	{
		/* an older period (or another length) in this place: this period starts empty */
		rs_topk_reset(&sketch->topk);
		sketch->period_start = start;
		sketch->period_seconds = period_seconds;
	}
	status = rs_topk_add(&sketch->topk, fingerprint, 1, &index, &taken);
	if (status == RS_OK && taken)
	{
		HotKeyItem *item = &sketch->items[index];
		bool		keyspace_shown = has_keyspace && p->keyspace_attnum > 0;	/* a constant one is the table's */
		size_t		ks_kept = keyspace_shown ? utf8_cut(ks, ks_len, HOT_KEY_KEYSPACE_BYTES) : 0;
		size_t		key_kept = utf8_cut(bytes, len, HOT_KEY_BYTES - ks_kept);

		item->dbid = MyDatabaseId;
		item->relid = p->relid;
		item->position = key_position(p, bytes, len, ks, ks_len, &item->on_ring);
		item->has_keyspace = keyspace_shown;
		item->keyspace_truncated = keyspace_shown && ks_kept < ks_len;
		item->key_truncated = key_kept < len;
		item->keyspace_len = (uint8) ks_kept;
		item->key_len = (uint8) key_kept;
		memcpy(item->bytes, ks, ks_kept);
		memcpy(item->bytes + ks_kept, bytes, key_kept);
	}
	else if (status != RS_OK)
	{
		/* a count at 2^64: this period's sketch is full of counts, start it again */
		rs_topk_reset(&sketch->topk);
	}
	LWLockRelease(&shared->locks[access].lock);
}

/*
 * The bytes a key of the table is noted with as its keyspace: a partition
 * map's constant, or the keyspace column's value (false if it is not given:
 * not a key this table routes by); none for a ring.
 */
static bool
keyspace_bytes(TablePlacement *p, const Datum *keyspace, char *buf, const char **ks, size_t *ks_len)
{
	*ks = "";
	*ks_len = 0;
	if (p->map == NULL)
		return true;
	if (p->keyspace_attnum <= 0)
	{
		*ks = p->keyspace_bytes;
		*ks_len = p->keyspace_bytes_len;
		return true;
	}
	if (keyspace == NULL)
		return false;
	*ks = key_encoder_bytes(&p->keyspace_key, *keyspace, buf, ks_len);
	return true;
}

void
hot_keys_note_key(TablePlacement *p, Datum key, const Datum *keyspace, HotKeyAccess access)
{
	char		buf[KEY_BYTES_BUFSIZE];
	char		keyspace_buf[KEY_BYTES_BUFSIZE];
	size_t		len;
	size_t		ks_len = 0;
	const char *bytes;
	const char *ks = "";

	if (!hot_keys_tracking() || !keyspace_bytes(p, keyspace, keyspace_buf, &ks, &ks_len))
		return;
	bytes = key_encoder_bytes(&p->key, key, buf, &len);
	hot_keys_note_encoded(p, bytes, len, ks, ks_len, access);
}

void
hot_keys_note_keys(TablePlacement *p, const Datum *keys, const bool *nulls, int nkeys, const Datum *keyspace,
				   HotKeyAccess access)
{
	char		keyspace_buf[KEY_BYTES_BUFSIZE];
	const char *ks = "";
	size_t		ks_len = 0;
	const char **seen;
	size_t	   *seen_len;
	int		   *slots;
	int			nslots = 2;

	if (!hot_keys_tracking() || nkeys <= 0 || !keyspace_bytes(p, keyspace, keyspace_buf, &ks, &ks_len))
		return;

	/*
	 * Each distinct key once: equal keys (1.5 and 1.50, 'c7' and 'c7 ' as
	 * char(n)) have the same canonical bytes, found again in a hash table
	 * of the keys seen (an IN list may hold thousands).
	 */
	while (nslots < 2 * nkeys)
		nslots *= 2;
	seen = palloc0(sizeof(char *) * nkeys);
	seen_len = palloc(sizeof(size_t) * nkeys);
	slots = palloc(sizeof(int) * nslots);
	for (int s = 0; s < nslots; s++)
		slots[s] = -1;
	for (int k = 0; k < nkeys; k++)
	{
		char		buf[KEY_BYTES_BUFSIZE];
		size_t		len;
		const char *bytes;
		uint32		slot;
		bool		again = false;

		if (nulls[k])
			continue;
		bytes = key_encoder_bytes_slow(&p->key, keys[k], buf, &len);
		slot = hash_bytes((const unsigned char *) bytes, (int) len) & (uint32) (nslots - 1);
		for (; slots[slot] >= 0 && !again; slot = (slot + 1) & (uint32) (nslots - 1))
			again = seen_len[slots[slot]] == len && memcmp(seen[slots[slot]], bytes, len) == 0;
		if (again)
			continue;
		seen[k] = pnstrdup(bytes, len);
		seen_len[k] = len;
		slots[slot] = k;
		hot_keys_note_encoded(p, seen[k], len, ks, ks_len, access);
	}
	for (int k = 0; k < nkeys; k++)
		if (seen[k])
			pfree((void *) seen[k]);
	pfree(seen);
	pfree(seen_len);
	pfree(slots);
}

static void
require_shared(void)
{
	if (shared == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("ringshard's hot-key statistics are not available"),
				 errdetail("They live in shared memory, which only a library loaded at server start can have."),
				 errhint("Add ringshard to shared_preload_libraries and restart the server.")));
}

/*
 * Bytes as text the view can show: the canonical bytes of every key type
 * but bytea are UTF-8 text, shown as they are where the database is UTF-8
 * (or they are ASCII); other bytes, non-ASCII text in a database of another
 * encoding, and control characters are shown as \x and hex, as bytea
 * prints.
 */
static Datum
bytes_as_text(const char *bytes, size_t len, bool truncated)
{
	bool		plain = pg_verify_mbstr(PG_UTF8, bytes, (int) len, true);
	StringInfoData buf;

	for (size_t i = 0; plain && i < len; i++)
	{
		unsigned char c = (unsigned char) bytes[i];

		if (c < 0x20 || c == 0x7F || (c >= 0x80 && GetDatabaseEncoding() != PG_UTF8))
			plain = false;
	}
	initStringInfo(&buf);
	if (plain)
		appendBinaryStringInfo(&buf, bytes, (int) len);
	else
	{
		appendStringInfoString(&buf, "\\x");
		for (size_t i = 0; i < len; i++)
			appendStringInfo(&buf, "%02x", (unsigned char) bytes[i]);
	}
	if (truncated)
		appendStringInfoString(&buf, "...");
	return CStringGetTextDatum(buf.data);
}

PG_FUNCTION_INFO_V1(ringshard_stat_hot_key_counts);

/*
 * stat_hot_key_counts(): every item of this database's tables held in the
 * sketches of the periods still kept, with its counts; the view
 * ringshard.stat_hot_keys ranks them.
 */
Datum
ringshard_stat_hot_key_counts(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	TimestampTz now = GetCurrentTimestamp();
	HotKeySketch *copy;

	require_shared();
	InitMaterializedSRF(fcinfo, 0);
	copy = palloc(sizeof(HotKeySketch));
	for (int a = 0; a < HOT_KEY_ACCESS_KINDS; a++)
		for (int p = 0; p < HOT_KEY_PERIODS; p++)
		{
			uint32		order[RS_TOPK_MAX_CAPACITY];
			uint32		n;
			int64		length;

			/* copied under the lock, read after: writers wait for a memcpy only */
			LWLockAcquire(&shared->locks[a].lock, LW_SHARED);
			memcpy(copy, &shared->sketches[a][p], sizeof(HotKeySketch));
			LWLockRelease(&shared->locks[a].lock);
			if (copy->period_start == 0 || copy->period_seconds <= 0)
				continue;
			length = (int64) copy->period_seconds * USECS_PER_SEC;
			/* a place not written for a whole circle holds a period no longer kept */
			if (copy->period_start + length * HOT_KEY_PERIODS <= now)
				continue;
			n = rs_topk_ranked(&copy->topk, order);
			for (uint32 r = 0; r < n; r++)
			{
				const rs_topk_counter *c = &copy->topk.counters[order[r]];
				const HotKeyItem *item = &copy->items[order[r]];
				Datum		values[11];
				bool		nulls[11] = {0};

				if (item->dbid != MyDatabaseId)
					continue;
				values[0] = TimestampTzGetDatum(copy->period_start);
				values[1] = TimestampTzGetDatum(copy->period_start + length);
				values[2] = ObjectIdGetDatum(item->relid);
				values[3] = CStringGetTextDatum(a == HOT_KEY_READ ? "read" : "write");
				values[4] = bytes_as_text(item->bytes + item->keyspace_len, item->key_len, item->key_truncated);
				if (item->has_keyspace)
					values[5] = bytes_as_text(item->bytes, item->keyspace_len, item->keyspace_truncated);
				else
					nulls[5] = true;
				if (item->on_ring)
				{
					values[6] = RingTokenGetDatum(item->position);
					nulls[7] = true;
				}
				else
				{
					nulls[6] = true;
					values[7] = Int32GetDatum((int32) item->position);
				}
				values[8] = Int64GetDatum((int64) Min(c->count, (uint64) PG_INT64_MAX));
				values[9] = Int64GetDatum((int64) Min(c->count - c->error, (uint64) PG_INT64_MAX));
				values[10] = Int64GetDatum((int64) Min(copy->topk.total, (uint64) PG_INT64_MAX));
				tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
			}
		}
	pfree(copy);
	return (Datum) 0;
}

PG_FUNCTION_INFO_V1(ringshard_stat_reset_hot_keys);

/*
 * stat_reset_hot_keys(): empty every period's sketches.  They are shared by
 * the databases of the server, so this resets them all (an administrator's
 * act, as pg_stat_reset_shared is).
 */
Datum
ringshard_stat_reset_hot_keys(PG_FUNCTION_ARGS)
{
	require_shared();
	for (int a = 0; a < HOT_KEY_ACCESS_KINDS; a++)
	{
		LWLockAcquire(&shared->locks[a].lock, LW_EXCLUSIVE);
		for (int p = 0; p < HOT_KEY_PERIODS; p++)
		{
			rs_topk_reset(&shared->sketches[a][p].topk);
			shared->sketches[a][p].period_start = 0;
		}
		LWLockRelease(&shared->locks[a].lock);
	}
	PG_RETURN_VOID();
}

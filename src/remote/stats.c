/*
 * stats.c
 *		Per-node counters of the coordinator's remote work (stats.h), and the
 *		SQL functions that read and reset them.
 *
 * One slot per node of a database, in shared memory sized at start: a
 * bounded number of nodes (NODE_STATS_SLOTS), each slot's name written
 * once under the lock and never moved, so a backend finds its node's slot
 * once per connection and then only adds to atomics.  Round-trip times go
 * into a histogram of quarter-octave buckets, from which the view reads a
 * mean and a 99th percentile (the upper edge of its bucket: at most 19 %
 * high, never low).
 */
#include "postgres.h"

#include <math.h>

#include "access/htup_details.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "guc.h"
#include "remote/stats.h"

#define NODE_STATS_SLOTS 256
#define NODE_NAME_BYTES 1025	/* ringshard.nodes allows 1024 bytes */
#define LATENCY_BUCKETS 112		/* 2^(b/4) µs up to 2^28 µs (4.5 minutes) */

/* The SQLSTATE classes counted on their own; the rest count as "other". */
static const char *const error_classes[] = {
	"08", "22", "23", "25", "40", "42", "53", "54", "55", "57", "58", "XX"
};
#define ERROR_CLASSES (lengthof(error_classes) + 1)

struct NodeStatsSlot
{
	pg_atomic_uint32 in_use;	/* set once dbid and node are written */
	Oid			dbid;
	char		node[NODE_NAME_BYTES];
	pg_atomic_uint64 reset_at;	/* TimestampTz of the last reset (or of the slot's start) */
	pg_atomic_uint64 queries;
	pg_atomic_uint64 round_trips;
	pg_atomic_uint64 latency_us;
	pg_atomic_uint64 rows_read;
	pg_atomic_uint64 rows_written;
	pg_atomic_uint64 bytes_sent;
	pg_atomic_uint64 bytes_received;
	pg_atomic_uint64 node_errors;
	pg_atomic_uint64 links_lost;
	pg_atomic_uint64 malformed;
	pg_atomic_uint64 timeouts;
	pg_atomic_uint64 connects;
	pg_atomic_uint64 errors_by_class[ERROR_CLASSES];
	pg_atomic_uint64 latency_hist[LATENCY_BUCKETS];
	/* gauges (never reset) */
	pg_atomic_uint64 connections_open;
	pg_atomic_uint64 prepared_open;
};

typedef struct NodeStatsShared
{
	LWLock	   *lock;			/* taken to add a slot, and to reset */
	NodeStatsSlot slots[NODE_STATS_SLOTS];
} NodeStatsShared;

static NodeStatsShared *shared = NULL;
static bool slots_full_warned = false;

static void
stats_attach(void *area, LWLockPadded *new_locks)
{
	shared = area;
	if (new_locks == NULL)
		return;
	shared->lock = &new_locks->lock;
	for (int i = 0; i < NODE_STATS_SLOTS; i++)
	{
		pg_atomic_uint64 *first = &shared->slots[i].reset_at;
		pg_atomic_uint64 *last = &shared->slots[i].prepared_open;

		pg_atomic_init_u32(&shared->slots[i].in_use, 0);
		for (pg_atomic_uint64 *a = first; a <= last; a++)
			pg_atomic_init_u64(a, 0);
	}
}

const ShmemArea remote_stats_shmem_area = {
	"ringshard node statistics", sizeof(NodeStatsShared), "ringshard_stats", 1, stats_attach
};

static NodeStatsSlot *
find_slot(Oid dbid, const char *node)
{
	for (int i = 0; i < NODE_STATS_SLOTS; i++)
	{
		NodeStatsSlot *s = &shared->slots[i];

		if (pg_atomic_read_u32(&s->in_use) == 0)
			break;				/* slots are taken in order and never given back */
		if (s->dbid == dbid && strcmp(s->node, node) == 0)
			return s;
	}
	return NULL;
}

NodeStatsSlot *
remote_stats_slot(const char *node)
{
	NodeStatsSlot *s;

	if (shared == NULL || node == NULL || strlen(node) >= NODE_NAME_BYTES)
		return NULL;
	LWLockAcquire(shared->lock, LW_SHARED);
	s = find_slot(MyDatabaseId, node);
	LWLockRelease(shared->lock);
	if (s)
		return s;
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	s = find_slot(MyDatabaseId, node);
	for (int i = 0; s == NULL && i < NODE_STATS_SLOTS; i++)
	{
		NodeStatsSlot *free_slot = &shared->slots[i];

		if (pg_atomic_read_u32(&free_slot->in_use) != 0)
			continue;
		free_slot->dbid = MyDatabaseId;
		strlcpy(free_slot->node, node, NODE_NAME_BYTES);
		pg_atomic_write_u64(&free_slot->reset_at, (uint64) GetCurrentTimestamp());
		pg_write_barrier();
		pg_atomic_write_u32(&free_slot->in_use, 1);
		s = free_slot;
	}
	LWLockRelease(shared->lock);
	if (s == NULL && !slots_full_warned)
	{
		slots_full_warned = true;
		ereport(WARNING,
				(errmsg("node \"%s\" is not counted in ringshard.stat_nodes", node),
				 errdetail("The statistics hold at most %d nodes across all databases.", NODE_STATS_SLOTS)));
	}
	return s;
}

static inline bool
counting(NodeStatsSlot *s)
{
	return s != NULL && ringshard_track_node_stats;
}

void
remote_stats_query_sent(NodeStatsSlot *s, size_t bytes)
{
	if (!counting(s))
		return;
	pg_atomic_fetch_add_u64(&s->queries, 1);
	pg_atomic_fetch_add_u64(&s->bytes_sent, bytes);
}

void
remote_stats_bytes_sent(NodeStatsSlot *s, size_t bytes)
{
	if (counting(s))
		pg_atomic_fetch_add_u64(&s->bytes_sent, bytes);
}

/* The bucket of a round trip: b with 2^(b/4) <= µs < 2^((b+1)/4). */
static int
latency_bucket(double us)
{
	int			b;

	if (us < 1.0)
		return 0;
	b = (int) floor(4.0 * log2(us));
	return Min(Max(b, 0), LATENCY_BUCKETS - 1);
}

void
remote_stats_round_trip(NodeStatsSlot *s, double elapsed_ms)
{
	double		us = Max(elapsed_ms, 0.0) * 1000.0;

	if (!counting(s))
		return;
	pg_atomic_fetch_add_u64(&s->round_trips, 1);
	pg_atomic_fetch_add_u64(&s->latency_us, (uint64) rint(us));
	pg_atomic_fetch_add_u64(&s->latency_hist[latency_bucket(us)], 1);
}

void
remote_stats_received(NodeStatsSlot *s, int64 rows_read, int64 rows_written, size_t bytes)
{
	if (!counting(s))
		return;
	if (rows_read > 0)
		pg_atomic_fetch_add_u64(&s->rows_read, (uint64) rows_read);
	if (rows_written > 0)
		pg_atomic_fetch_add_u64(&s->rows_written, (uint64) rows_written);
	if (bytes > 0)
		pg_atomic_fetch_add_u64(&s->bytes_received, bytes);
}

void
remote_stats_node_error(NodeStatsSlot *s, const char *sqlstate)
{
	int			k = ERROR_CLASSES - 1;

	if (!counting(s))
		return;
	pg_atomic_fetch_add_u64(&s->node_errors, 1);
	for (int i = 0; sqlstate && strlen(sqlstate) == 5 && i < (int) lengthof(error_classes); i++)
		if (strncmp(sqlstate, error_classes[i], 2) == 0)
			k = i;
	pg_atomic_fetch_add_u64(&s->errors_by_class[k], 1);
}

void
remote_stats_failure(NodeStatsSlot *s, RemoteFailureKind kind)
{
	if (!counting(s))
		return;
	switch (kind)
	{
		case REMOTE_FAILURE_LINK_LOST:
			pg_atomic_fetch_add_u64(&s->links_lost, 1);
			break;
		case REMOTE_FAILURE_MALFORMED:
			pg_atomic_fetch_add_u64(&s->malformed, 1);
			break;
		case REMOTE_FAILURE_TIMEOUT:
			pg_atomic_fetch_add_u64(&s->timeouts, 1);
			break;
	}
}

void
remote_stats_connection_opened(NodeStatsSlot *s)
{
	if (s == NULL)
		return;
	pg_atomic_fetch_add_u64(&s->connections_open, 1);
	if (ringshard_track_node_stats)
		pg_atomic_fetch_add_u64(&s->connects, 1);
}

void
remote_stats_connection_closed(NodeStatsSlot *s)
{
	if (s != NULL)
		pg_atomic_fetch_sub_u64(&s->connections_open, 1);
}

void
remote_stats_prepared(NodeStatsSlot *s, bool added)
{
	if (s == NULL)
		return;
	if (added)
		pg_atomic_fetch_add_u64(&s->prepared_open, 1);
	else
		pg_atomic_fetch_sub_u64(&s->prepared_open, 1);
}

static void
require_shared(void)
{
	if (shared == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("ringshard's node statistics are not available"),
				 errdetail("They live in shared memory, which only a library loaded at server start can have."),
				 errhint("Add ringshard to shared_preload_libraries and restart the server.")));
}

/* The round-trip time below which a share `q` of the round trips fall, in ms (bucket upper edge). */
static double
latency_quantile(NodeStatsSlot *s, uint64 total, double q)
{
	uint64		want = (uint64) ceil(q * (double) total);
	uint64		seen = 0;

	for (int b = 0; b < LATENCY_BUCKETS; b++)
	{
		seen += pg_atomic_read_u64(&s->latency_hist[b]);
		if (seen >= want)
			return pow(2.0, (b + 1) / 4.0) / 1000.0;
	}
	return pow(2.0, LATENCY_BUCKETS / 4.0) / 1000.0;
}

static Datum
errors_by_class_json(NodeStatsSlot *s)
{
	StringInfoData buf;
	bool		first = true;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	for (int k = 0; k < (int) ERROR_CLASSES; k++)
	{
		uint64		n = pg_atomic_read_u64(&s->errors_by_class[k]);

		if (n == 0)
			continue;
		appendStringInfo(&buf, "%s\"%s\": " UINT64_FORMAT, first ? "" : ", ",
						 k < (int) lengthof(error_classes) ? error_classes[k] : "other", n);
		first = false;
	}
	appendStringInfoChar(&buf, '}');
	return DirectFunctionCall1(jsonb_in, CStringGetDatum(buf.data));
}

/* x to two decimals (as node_health() gives round trips) */
static double
round_to_hundredths(double x)
{
	return rint(x * 100.0) / 100.0;
}

PG_FUNCTION_INFO_V1(ringshard_stat_node_counters);

/*
 * stat_node_counters(): one row per counted node of this database (the
 * view ringshard.stat_nodes adds the nodes not contacted yet and the
 * queue).
 */
Datum
ringshard_stat_node_counters(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	require_shared();
	InitMaterializedSRF(fcinfo, 0);
	for (int i = 0; i < NODE_STATS_SLOTS; i++)
	{
		NodeStatsSlot *s = &shared->slots[i];
		Datum		values[19];
		bool		nulls[19] = {0};
		uint64		trips;
		int			col = 0;

		if (pg_atomic_read_u32(&s->in_use) == 0)
			break;
		pg_read_barrier();
		if (s->dbid != MyDatabaseId)
			continue;
		trips = pg_atomic_read_u64(&s->round_trips);
		values[col++] = CStringGetTextDatum(s->node);
		values[col++] = Int64GetDatum((int64) pg_atomic_read_u64(&s->queries));
		values[col++] = Int64GetDatum((int64) trips);
		if (trips > 0)
		{
			values[col++] = Float8GetDatum(round_to_hundredths(pg_atomic_read_u64(&s->latency_us) / 1000.0 / trips));
			values[col++] = Float8GetDatum(round_to_hundredths(latency_quantile(s, trips, 0.99)));
		}
		else
		{
			nulls[col++] = true;
			nulls[col++] = true;
		}
		values[col++] = Int64GetDatum((int64) pg_atomic_read_u64(&s->rows_read));
		values[col++] = Int64GetDatum((int64) pg_atomic_read_u64(&s->rows_written));
		values[col++] = Int64GetDatum((int64) pg_atomic_read_u64(&s->bytes_sent));
		values[col++] = Int64GetDatum((int64) pg_atomic_read_u64(&s->bytes_received));
		values[col++] = Int64GetDatum((int64) pg_atomic_read_u64(&s->node_errors));
		values[col++] = errors_by_class_json(s);
		values[col++] = Int64GetDatum((int64) pg_atomic_read_u64(&s->links_lost));
		values[col++] = Int64GetDatum((int64) pg_atomic_read_u64(&s->malformed));
		values[col++] = Int64GetDatum((int64) pg_atomic_read_u64(&s->timeouts));
		values[col++] = Int64GetDatum((int64) pg_atomic_read_u64(&s->connects));
		values[col++] = Int64GetDatum((int64) pg_atomic_read_u64(&s->connections_open));
		values[col++] = Int64GetDatum((int64) pg_atomic_read_u64(&s->prepared_open));
		values[col++] = TimestampTzGetDatum((TimestampTz) pg_atomic_read_u64(&s->reset_at));
		Assert(col == 18);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

PG_FUNCTION_INFO_V1(ringshard_stat_reset);

/*
 * stat_reset(node): zero the counters of one node of this database, or of
 * all of them (NULL); the gauges (connections and prepared transactions
 * open) count what exists, so they stay.
 */
Datum
ringshard_stat_reset(PG_FUNCTION_ARGS)
{
	char	   *node = PG_ARGISNULL(0) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(0));
	TimestampTz now = GetCurrentTimestamp();
	int			reset = 0;

	require_shared();
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < NODE_STATS_SLOTS; i++)
	{
		NodeStatsSlot *s = &shared->slots[i];

		if (pg_atomic_read_u32(&s->in_use) == 0)
			break;
		if (s->dbid != MyDatabaseId || (node && strcmp(s->node, node) != 0))
			continue;
		for (pg_atomic_uint64 *a = &s->queries; a <= &s->latency_hist[LATENCY_BUCKETS - 1]; a++)
			pg_atomic_write_u64(a, 0);
		pg_atomic_write_u64(&s->reset_at, (uint64) now);
		reset++;
	}
	LWLockRelease(shared->lock);
	PG_RETURN_INT32(reset);
}

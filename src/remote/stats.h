/*
 * stats.h
 *		Per-node counters of the coordinator's remote work, in shared memory
 *		(ringshard.stat_nodes; docs/monitoring.md).
 *
 * Every counter is an atomic add on the node's slot, found once per
 * connection: the hot path takes no lock and writes no catalog.  Without
 * ringshard in shared_preload_libraries there is no shared memory for them:
 * the counting functions do nothing and the view says why it is empty.
 */
#ifndef RINGSHARD_REMOTE_STATS_H
#define RINGSHARD_REMOTE_STATS_H

#include "postgres.h"

#include "shmem_area.h"

typedef struct NodeStatsSlot NodeStatsSlot;

/* What went wrong on a link, beyond an error the node answered with. */
typedef enum RemoteFailureKind
{
	REMOTE_FAILURE_LINK_LOST,	/* connect failed, or the connection broke */
	REMOTE_FAILURE_MALFORMED,	/* the node's answer was not what was asked for */
	REMOTE_FAILURE_TIMEOUT		/* no answer within ringshard.node_timeout */
} RemoteFailureKind;

/*
 * Its shared memory, when preloaded: asked for from the library's
 * shmem_request_hook, attached from its shmem_startup_hook (ringshard.c).
 */
extern const ShmemArea remote_stats_shmem_area;

/* The slot of a node of this database, made on first use; NULL if none can be had. */
extern NodeStatsSlot *remote_stats_slot(const char *node);

/* Counting (each a no-op for a NULL slot or with ringshard.track_node_stats off). */
extern void remote_stats_query_sent(NodeStatsSlot *s, size_t bytes);
extern void remote_stats_bytes_sent(NodeStatsSlot *s, size_t bytes);
extern void remote_stats_round_trip(NodeStatsSlot *s, double elapsed_ms);
extern void remote_stats_received(NodeStatsSlot *s, int64 rows_read, int64 rows_written, size_t bytes);
extern void remote_stats_node_error(NodeStatsSlot *s, const char *sqlstate);
extern void remote_stats_failure(NodeStatsSlot *s, RemoteFailureKind kind);

/* Gauges: counted whatever the setting, so they stay balanced. */
extern void remote_stats_connection_opened(NodeStatsSlot *s);
extern void remote_stats_connection_closed(NodeStatsSlot *s);
extern void remote_stats_prepared(NodeStatsSlot *s, bool added);

#endif							/* RINGSHARD_REMOTE_STATS_H */

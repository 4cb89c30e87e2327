/*
 * guc.h
 *		Every setting of ringshard, defined in one place (guc.c).
 */
#ifndef RINGSHARD_GUC_H
#define RINGSHARD_GUC_H

#include "postgres.h"

/* Connections and remote work (src/remote). */
extern int	ringshard_node_timeout_ms;		/* ringshard.node_timeout */
extern int	ringshard_replay_max_attempts;	/* ringshard.replay_max_attempts */
extern bool ringshard_two_phase_commit;		/* ringshard.two_phase_commit */
extern bool ringshard_writes_with_commit;	/* ringshard.writes_with_commit */
extern char *ringshard_fault_injection;		/* ringshard.fault_injection (FAULT_INJECTION builds) */
extern bool ringshard_track_node_stats;		/* ringshard.track_node_stats */
extern bool ringshard_track_hot_keys;		/* ringshard.track_hot_keys */
extern int	ringshard_hot_keys_period_s;	/* ringshard.hot_keys_period, seconds */

/* Distributed tables (src/fdw). */
extern int	ringshard_write_quorum;			/* ringshard.write_quorum */
extern int	ringshard_fetch_size;			/* ringshard.fetch_size */
extern int	ringshard_write_batch_size;		/* ringshard.write_batch_size */
extern bool ringshard_router_statements;	/* ringshard.router_statements */
extern bool ringshard_allow_partial_reads;	/* ringshard.allow_partial_reads */
extern bool ringshard_accept_moving_rows;	/* ringshard.accept_moving_rows */

/* The watchdog (src/bgworker/watchdog.c). */
extern int	ringshard_watchdog_interval_ms; /* ringshard.watchdog_interval */
extern char *ringshard_watchdog_database;	/* ringshard.watchdog_database */
extern char *ringshard_watchdog_role;		/* ringshard.watchdog_role */

/* Rebalancing (read by SQL through current_setting()). */
extern int	ringshard_rebalance_notice_interval_ms;	/* ringshard.rebalance_notice_interval */

/* Define them all and reserve the prefix "ringshard."; from _PG_init. */
extern void ringshard_define_settings(void);

#endif							/* RINGSHARD_GUC_H */

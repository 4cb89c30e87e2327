/*
 * guc.c
 *		Every setting of ringshard (see guc.h).  The prefix is reserved, so a
 *		misspelt ringshard.* setting is an error, not a silent placeholder.
 */
#include "postgres.h"

#include "utils/guc.h"

#include "guc.h"

int			ringshard_node_timeout_ms = 5000;
int			ringshard_replay_max_attempts = 10;
bool		ringshard_two_phase_commit = true;
bool		ringshard_writes_with_commit = true;
char	   *ringshard_fault_injection = NULL;
int			ringshard_write_quorum = 1;
int			ringshard_fetch_size = 2000;
int			ringshard_write_batch_size = 1000;
bool		ringshard_router_statements = true;
bool		ringshard_allow_partial_reads = false;
bool		ringshard_accept_moving_rows = false;
int			ringshard_watchdog_interval_ms = 5000;
char	   *ringshard_watchdog_database = NULL;
char	   *ringshard_watchdog_role = NULL;
int			ringshard_rebalance_notice_interval_ms = 5000;
bool		ringshard_track_node_stats = true;
bool		ringshard_track_hot_keys = true;
int			ringshard_hot_keys_period_s = 60;

void
ringshard_define_settings(void)
{
	DefineCustomIntVariable("ringshard.node_timeout",
							"Milliseconds a node may take to connect, or to answer a control command.",
							"A node that takes longer is counted as failed. Queries of scans and writes "
							"wait as long as they run (statement_timeout and cancel apply).",
							&ringshard_node_timeout_ms, 5000, 10, 3600 * 1000,
							/* a node that misses it is marked down for every role: not one role's choice */
							PGC_SUSET, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("ringshard.replay_max_attempts",
							"Times a node may refuse a queued write before it is set aside in ringshard.dead_letters.",
							"Only refusals count (an SQL error on the node), not a node that cannot be reached.",
							&ringshard_replay_max_attempts, 10, 1, 1000000,
							PGC_SUSET, 0, NULL, NULL, NULL);
	DefineCustomBoolVariable("ringshard.two_phase_commit",
							 "Commits the nodes' parts of a transaction in two phases.",
							 "Off commits them one by one before the local commit, as 1.0 did: a failure "
							 "in between leaves some nodes committed. For measurements only.",
							 &ringshard_two_phase_commit, true, PGC_SUSET, 0, NULL, NULL, NULL);
	DefineCustomBoolVariable("ringshard.writes_with_commit",
							 "Sends the rows of an INSERT that is its own transaction together with the commit.",
							 "The node gets the rows and the PREPARE TRANSACTION (or one-phase COMMIT) in one "
							 "round trip; a node's error still fails the statement. Off sends them first and waits.",
							 &ringshard_writes_with_commit, true, PGC_USERSET, 0, NULL, NULL, NULL);
#ifdef RINGSHARD_FAULT_INJECTION
	DefineCustomStringVariable("ringshard.fault_injection",
							   "Tests only: point=crash or point=sleep:ms in the commit protocol.",
							   "Points: before_prepare, after_first_prepare, after_prepare, after_records, "
							   "after_local_commit, after_first_commit_prepared; rehome_before_copy, rehome_before_delete (a rehome_rows batch after its page, after its copies); "
							   "rebalance_after_target_commit (a rebalance batch once a target committed its copy), rebalance_rows_relayed (a rebalance batch each time it reports rows relayed, every 256).", &ringshard_fault_injection, "",
							   PGC_SUSET, GUC_NOT_IN_SAMPLE | GUC_NO_SHOW_ALL, NULL, NULL, NULL);
#endif
	DefineCustomIntVariable("ringshard.write_quorum",
							"Replicas that must take a routed write for it to succeed.",
							"The others get it queued in ringshard.write_queue and replayed when they return.",
							&ringshard_write_quorum, 1, 1, 64,
							PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("ringshard.fetch_size",
							"Rows a fan-out fetches from a node at a time.",
							NULL, &ringshard_fetch_size, 2000, 1, 1000000,
							PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("ringshard.write_batch_size",
							"Rows of a write sent to a node at a time (one COPY).",
							NULL, &ringshard_write_batch_size, 1000, 1, 1000000,
							PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomBoolVariable("ringshard.router_statements",
							 "Sends a SELECT whose every distributed table is fixed to one key whole to one node that holds those rows.",
							 "Off plans such statements as any other: each table read on its own, joined here.",
							 &ringshard_router_statements, true, PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomBoolVariable("ringshard.allow_partial_reads",
							 "A read of a distributed table that cannot reach every range warns instead of failing.",
							 "The rows of the ranges whose nodes are all down are then missing from the answer.",
							 &ringshard_allow_partial_reads, false, PGC_USERSET, 0, NULL, NULL, NULL);
	DefineCustomBoolVariable("ringshard.accept_moving_rows",
							 "On a worker: take rows this node held before the topology changed and still holds until a rebalance moves them.",
							 "The coordinator sets it, for its transaction, where it writes keys whose rows are not copied yet "
							 "to their old replicas (docs/design.md, \"Moving rows\").",
							 &ringshard_accept_moving_rows, false, PGC_USERSET, GUC_NOT_IN_SAMPLE, NULL, NULL, NULL);
	DefineCustomIntVariable("ringshard.watchdog_interval",
							"Time between two rounds of the health watchdog.",
							NULL, &ringshard_watchdog_interval_ms, 5000, 100, 3600 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomStringVariable("ringshard.watchdog_database",
							   "Database whose ringshard coordinator the health watchdog serves.",
							   "Empty (the default): the watchdog waits idle. Needs shared_preload_libraries.",
							   &ringshard_watchdog_database, "", PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomStringVariable("ringshard.watchdog_role",
							   "Role the health watchdog works as, with that role's user mappings.",
							   "Empty (the default): the bootstrap superuser. A role below superuser must be a "
							   "member of ringshard_admin and have a user mapping with a password for every node.",
							   &ringshard_watchdog_role, "", PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("ringshard.rebalance_notice_interval",
							"Least time between two progress notices of ringshard.rebalance().",
							"A move of many steps reports \"step k of N, rows x of y\" at most this often; 0 reports after every page and step.",
							&ringshard_rebalance_notice_interval_ms, 5000, 0, 3600 * 1000,
							PGC_USERSET, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomBoolVariable("ringshard.track_node_stats",
							 "Counts each node's queries, rows, bytes, errors and round-trip times for ringshard.stat_nodes.",
							 "Needs ringshard in shared_preload_libraries. Open connections and prepared transactions "
							 "are counted whatever this says.",
							 &ringshard_track_node_stats, true, PGC_SUSET, 0, NULL, NULL, NULL);
	DefineCustomBoolVariable("ringshard.track_hot_keys",
							 "Notes the keys statements route by, per table, for ringshard.stat_hot_keys.",
							 "Needs ringshard in shared_preload_libraries. Each key a router read or write, a keyed "
							 "scan, UPDATE or DELETE, or a row of an INSERT or COPY routes by is counted once.",
							 &ringshard_track_hot_keys, true, PGC_SUSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("ringshard.hot_keys_period",
							"Length of one period of ringshard.stat_hot_keys.",
							"The last four periods are kept, each counted from empty; periods are aligned to the clock "
							"(a period of 60 s starts on the minute).",
							&ringshard_hot_keys_period_s, 60, 1, 86400,
							PGC_SIGHUP, GUC_UNIT_S, NULL, NULL, NULL);
	MarkGUCPrefixReserved("ringshard");
}

-- Per-node statistics of the coordinator's remote work, counted in shared
-- memory by every backend of this database (src/remote/stats.c).  They need
-- ringshard in shared_preload_libraries; ringshard.track_node_stats turns the
-- counting off (the gauges of open connections and prepared transactions
-- count whatever it says).

CREATE FUNCTION ringshard_internal.stat_node_counters()
	RETURNS TABLE (node text, queries bigint, round_trips bigint, mean_ms float8, p99_ms float8,
	               rows_read bigint, rows_written bigint, bytes_sent bigint, bytes_received bigint,
	               node_errors bigint, errors_by_class jsonb, links_lost bigint, malformed_answers bigint,
	               timeouts bigint, connects bigint, connections_open bigint, prepared_open bigint,
	               stats_reset timestamptz)
	AS 'MODULE_PATHNAME', 'ringshard_stat_node_counters' LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION ringshard_internal.stat_node_counters() IS
	'the counters behind ringshard.stat_nodes: one row per node of this database that a backend has connected to since the server started';

-- One row per node: what the coordinator asked of it since the last reset,
-- how long it took to answer, how often it failed, and what it holds open
-- now; with the writes queued for it and what the watchdog last saw.
CREATE VIEW ringshard.stat_nodes AS
SELECT n.node_name AS node,
       n.is_up,
       coalesce(c.queries, 0) AS queries,
       coalesce(c.round_trips, 0) AS round_trips,
       c.mean_ms,
       c.p99_ms,
       coalesce(c.rows_read, 0) AS rows_read,
       coalesce(c.rows_written, 0) AS rows_written,
       coalesce(c.bytes_sent, 0) AS bytes_sent,
       coalesce(c.bytes_received, 0) AS bytes_received,
       coalesce(c.node_errors, 0) AS node_errors,
       coalesce(c.errors_by_class, '{}') AS errors_by_class,
       coalesce(c.links_lost, 0) AS links_lost,
       coalesce(c.malformed_answers, 0) AS malformed_answers,
       coalesce(c.timeouts, 0) AS timeouts,
       coalesce(c.connects, 0) AS connects,
       coalesce(c.connections_open, 0) AS connections_open,
       coalesce(c.prepared_open, 0) AS prepared_open,
       (SELECT count(*) FROM ringshard.write_queue q WHERE q.node_name = n.node_name) AS queued_writes,
       st.checked_at AS last_checked,
       st.rtt_ms AS last_rtt_ms,
       c.stats_reset
  FROM ringshard.nodes n
  LEFT JOIN ringshard_internal.stat_node_counters() c ON c.node = n.node_name
  LEFT JOIN ringshard.node_status st ON st.node_name = n.node_name;
COMMENT ON VIEW ringshard.stat_nodes IS
	'per node since the last reset: queries sent and round trips with their mean and 99th-percentile time in ms (the percentile at most 19 % high), rows read and written, bytes, errors the node answered (by SQLSTATE class), links lost, malformed answers, timeouts, connections made; now: connections and prepared transactions open, writes queued; and the watchdog''s last check';

CREATE FUNCTION ringshard.stat_reset(node text DEFAULT NULL) RETURNS integer
	AS 'MODULE_PATHNAME', 'ringshard_stat_reset' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION ringshard.stat_reset(text) IS
	'zeroes the counters of ringshard.stat_nodes for one node of this database, or for all (NULL); returns how many nodes were reset';

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

-- When each node was last marked down and up, whoever marked it (the
-- watchdog, a writer that queued a row for it, mark_node_down/up, or an
-- UPDATE of ringshard.nodes): kept by a trigger on ringshard.nodes.
CREATE TABLE ringshard.node_marks (
	node_name text PRIMARY KEY REFERENCES ringshard.nodes (node_name) ON DELETE CASCADE,
	last_marked_down timestamptz,
	last_marked_up timestamptz
);
COMMENT ON TABLE ringshard.node_marks IS
	'when each node was last marked down and up (by the watchdog, a write that queued a row for it, mark_node_down/up or an UPDATE of nodes)';

CREATE FUNCTION ringshard_internal.note_node_mark() RETURNS trigger
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
BEGIN
	IF NEW.is_up IS DISTINCT FROM OLD.is_up THEN
		INSERT INTO ringshard.node_marks AS m (node_name, last_marked_down, last_marked_up)
		VALUES (NEW.node_name, CASE WHEN NOT NEW.is_up THEN now() END, CASE WHEN NEW.is_up THEN now() END)
		ON CONFLICT (node_name) DO UPDATE
		   SET last_marked_down = CASE WHEN NOT NEW.is_up THEN now() ELSE m.last_marked_down END,
		       last_marked_up = CASE WHEN NEW.is_up THEN now() ELSE m.last_marked_up END;
	END IF;
	RETURN NULL;
END
$$;
COMMENT ON FUNCTION ringshard_internal.note_node_mark() IS
	'trigger on ringshard.nodes: records in node_marks when a node is marked down or up';
CREATE TRIGGER note_node_mark AFTER UPDATE OF is_up ON ringshard.nodes
	FOR EACH ROW EXECUTE FUNCTION ringshard_internal.note_node_mark();

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
       mk.last_marked_down,
       mk.last_marked_up,
       c.stats_reset
  FROM ringshard.nodes n
  LEFT JOIN ringshard_internal.stat_node_counters() c ON c.node = n.node_name
  LEFT JOIN ringshard.node_status st ON st.node_name = n.node_name
  LEFT JOIN ringshard.node_marks mk ON mk.node_name = n.node_name;
COMMENT ON VIEW ringshard.stat_nodes IS
	'per node since the last reset: queries sent and round trips with their mean and 99th-percentile time in ms (the percentile at most 19 % high), rows read and written, bytes, errors the node answered (by SQLSTATE class), links lost, malformed answers, timeouts, connections made; now: connections and prepared transactions open, writes queued; the watchdog''s last check; when the node was last marked down and up';

CREATE FUNCTION ringshard.stat_reset(node text DEFAULT NULL) RETURNS integer
	AS 'MODULE_PATHNAME', 'ringshard_stat_reset' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION ringshard.stat_reset(text) IS
	'zeroes the counters of ringshard.stat_nodes for one node of this database, or for all (NULL); returns how many nodes were reset';

-- The hottest keys of each table, by reads and by writes, in the last four
-- periods of ringshard.hot_keys_period (src/routing/hot_keys.c): noted by
-- the coordinator as statements route by them, into a space-saving sketch
-- of 256 keys per access kind and period, in shared memory shared by the
-- server's databases.  ringshard.track_hot_keys turns the noting off.
CREATE FUNCTION ringshard_internal.stat_hot_key_counts()
	RETURNS TABLE (period_start timestamptz, period_end timestamptz, table_oid oid, access text, key text,
	               keyspace text, token ringtoken, partition integer, count bigint, min_count bigint,
	               period_total bigint)
	AS 'MODULE_PATHNAME', 'ringshard_stat_hot_key_counts' LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION ringshard_internal.stat_hot_key_counts() IS
	'the sketches behind ringshard.stat_hot_keys: every key of this database''s tables they hold, per period and access kind, with its count, the least its true count can be, and the period''s total of that kind on the server';

CREATE VIEW ringshard.stat_hot_keys AS
SELECT h.period_start,
       h.period_end,
       c.oid::regclass AS table_name,
       h.access,
       rank() OVER (PARTITION BY h.period_start, h.table_oid, h.access ORDER BY h.count DESC) AS rank,
       -- the keys are the table's data: shown to whoever may read the table, as pg_stats shows its values
       CASE WHEN pg_catalog.has_table_privilege(c.oid, 'SELECT') THEN h.key END AS key,
       CASE WHEN pg_catalog.has_table_privilege(c.oid, 'SELECT') THEN h.keyspace END AS keyspace,
       h.token,
       h.partition,
       h.count,
       h.min_count,
       round(100.0 * h.count / greatest(h.period_total, 1), 1) AS percent_of_period
  FROM ringshard_internal.stat_hot_key_counts() h
  JOIN pg_catalog.pg_class c ON c.oid = h.table_oid;
COMMENT ON VIEW ringshard.stat_hot_keys IS
	'the hottest keys of each distributed table, by reads and by writes, per period of ringshard.hot_keys_period (the last four): rank within table, period and access; the key (its canonical text, "..." when cut) and keyspace, NULL unless the reader may SELECT from the table; ring token or partition; count (never below the true count), min_count (never above it); percent of all the period''s routed reads or writes on the server';

CREATE FUNCTION ringshard.stat_reset_hot_keys() RETURNS void
	AS 'MODULE_PATHNAME', 'ringshard_stat_reset_hot_keys' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION ringshard.stat_reset_hot_keys() IS
	'empties ringshard.stat_hot_keys: every period''s sketches, which the server''s databases share';

-- Long operations of this database's backends as they run (rebalance,
-- rehome_rows, create_distributed_table), from shared memory
-- (src/operations/progress.c): another session reads how far each is.
CREATE FUNCTION ringshard_internal.progress_report(command text, table_name regclass, phase text, done bigint, total bigint)
	RETURNS void
	AS 'MODULE_PATHNAME', 'ringshard_progress_report' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION ringshard_internal.progress_report(text, regclass, text, bigint, bigint) IS
	'records how far this backend''s operation on a table is (ringshard.operation_progress): phase, rows done, rows in all (NULL: unknown); does nothing without ringshard in shared_preload_libraries';

CREATE FUNCTION ringshard_internal.progress_done() RETURNS void
	AS 'MODULE_PATHNAME', 'ringshard_progress_done' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION ringshard_internal.progress_done() IS
	'this backend''s operation has ended: it leaves ringshard.operation_progress (an error or the backend''s exit does that too)';

CREATE FUNCTION ringshard_internal.operation_progress_rows()
	RETURNS TABLE (pid integer, command text, table_oid oid, phase text, rows_done bigint, rows_total bigint,
	               started_at timestamptz, updated_at timestamptz)
	AS 'MODULE_PATHNAME', 'ringshard_operation_progress' LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION ringshard_internal.operation_progress_rows() IS
	'the slots behind ringshard.operation_progress: one row per operation running in this database';

CREATE VIEW ringshard.operation_progress AS
SELECT o.pid,
       o.command,
       o.table_oid::regclass AS table_name,
       o.phase,
       o.rows_done,
       o.rows_total,
       -- 100 only when every row is done (99.9 short of that, however many rows)
       CASE WHEN o.rows_total > 0
            THEN least(round(100.0 * o.rows_done / o.rows_total, 1), CASE WHEN o.rows_done < o.rows_total THEN 99.9 END)
       END AS percent,
       CASE WHEN o.updated_at > o.started_at
            THEN round(o.rows_done / extract(epoch FROM o.updated_at - o.started_at))::bigint END AS rows_per_second,
       CASE WHEN o.rows_total >= o.rows_done AND o.rows_done > 0 AND o.updated_at > o.started_at
            THEN date_trunc('second', (o.updated_at - o.started_at) * ((o.rows_total - o.rows_done)::float8 / o.rows_done)
                                      + interval '0.5 s') END AS time_left,
       o.started_at,
       o.updated_at
  FROM ringshard_internal.operation_progress_rows() o;
COMMENT ON VIEW ringshard.operation_progress IS
	'one row per rebalance, rehome_rows or create_distributed_table running in this database, as pg_stat_progress_* show theirs: the backend, the table, the phase, rows done and in all, percent, rows per second since it started, time left at that rate (to the second)';

-- What the nodes are running for this coordinator: every node connection
-- names its coordinator and backend in its application_name
-- ("ringshard <coordinator id> <pid>", src/remote/connection.c), so each
-- node's pg_stat_activity, read as the calling role, says which coordinator
-- backend each of its sessions works for.  A node that cannot be asked gets
-- one row with its error.  (A role sees the query text of other roles'
-- sessions on a node only with pg_read_all_stats there, as on one server.)
CREATE FUNCTION ringshard_internal.node_activity()
	RETURNS TABLE (node text, coordinator_pid integer, node_pid integer, node_user name, state text,
	               wait_event_type text, wait_event text, xact_start timestamptz, query_start timestamptz,
	               query text, error text)
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	answer record;
	prefix text := ringshard_internal.node_session_prefix();
BEGIN
	-- Asked outside any transaction: in one that has used the nodes, the
	-- question would run in the node's part of it, and an error would end it.
	IF ringshard_internal.node_transactions_open() THEN
		RAISE EXCEPTION 'ringshard.cluster_activity cannot be read in a transaction that has used the nodes'
			USING ERRCODE = 'active_sql_transaction',
			      HINT = 'Read it in a transaction of its own.';
	END IF;
	FOR answer IN
		SELECT * FROM ringshard.node_execute(ringshard.addressed_nodes(),
			'SELECT COALESCE(pg_catalog.json_agg(pg_catalog.json_build_object('
			'''app'', a.application_name, ''pid'', a.pid, ''usename'', a.usename, ''state'', a.state, '
			'''wait_event_type'', a.wait_event_type, ''wait_event'', a.wait_event, ''xact_start'', a.xact_start, '
			'''query_start'', a.query_start, ''query'', a.query) ORDER BY a.pid), ''[]'') '
			'FROM pg_catalog.pg_stat_activity a '
			'WHERE pg_catalog.starts_with(a.application_name, $1) '
			'AND pg_catalog.substr(a.application_name, pg_catalog.length($1) OPERATOR(pg_catalog.+) 1) OPERATOR(pg_catalog.~) ''^[0-9]{1,9}$'' '
			'AND a.pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid() '
			'AND a.datname OPERATOR(pg_catalog.=) pg_catalog.current_database()',
			ARRAY[prefix], false)
		ORDER BY 1
	LOOP
		IF NOT answer.ok THEN
			RETURN QUERY SELECT answer.node, NULL::integer, NULL::integer, NULL::name, NULL::text, NULL::text, NULL::text,
			                    NULL::timestamptz, NULL::timestamptz, NULL::text, answer.error;
			CONTINUE;
		END IF;
		BEGIN
			RETURN QUERY
				SELECT answer.node, substr(a.app, length(prefix) + 1)::integer, a.pid, a.usename, a.state,
				       a.wait_event_type, a.wait_event, a.xact_start, a.query_start, a.query, NULL::text
				  FROM json_to_recordset(answer.value::json)
				       AS a(app text, pid integer, usename name, state text, wait_event_type text, wait_event text,
				            xact_start timestamptz, query_start timestamptz, query text)
				 WHERE starts_with(a.app, prefix) AND substr(a.app, length(prefix) + 1) ~ '^[0-9]{1,9}$';
		EXCEPTION WHEN OTHERS THEN
			RETURN QUERY SELECT answer.node, NULL::integer, NULL::integer, NULL::name, NULL::text, NULL::text, NULL::text,
			                    NULL::timestamptz, NULL::timestamptz, NULL::text,
			                    format('node "%s" answered with a malformed activity list', answer.node);
		END;
	END LOOP;
END
$$;
CREATE FUNCTION ringshard_internal.node_session_prefix() RETURNS text
	AS 'MODULE_PATHNAME', 'ringshard_node_session_prefix' LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;
COMMENT ON FUNCTION ringshard_internal.node_session_prefix() IS
	'how the application_name of this coordinator''s node connections begins: "ringshard", a tag derived from the coordinator''s id, a space (the backend''s pid follows)';

CREATE FUNCTION ringshard_internal.node_transactions_open() RETURNS boolean
	AS 'MODULE_PATHNAME', 'ringshard_node_transactions_open' LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;
COMMENT ON FUNCTION ringshard_internal.node_transactions_open() IS
	'whether this session has a transaction, or rows held back for one, open on any node';

COMMENT ON FUNCTION ringshard_internal.node_activity() IS
	'the sessions of every node that work for this coordinator (their application_name names it and the backend), read from each node''s pg_stat_activity as the calling role; a node that cannot be asked gives one row with its error';

-- Each coordinator backend beside what its node connections run.
CREATE VIEW ringshard.cluster_activity AS
SELECT a.coordinator_pid,
       c.backend_type AS coordinator_backend_type,
       c.usename AS coordinator_user,
       c.state AS coordinator_state,
       c.query AS coordinator_query,
       a.node,
       a.node_pid,
       a.node_user,
       a.state AS node_state,
       a.wait_event_type AS node_wait_event_type,
       a.wait_event AS node_wait_event,
       a.xact_start AS node_xact_start,
       a.query_start AS node_query_start,
       a.query AS node_query,
       a.error
  FROM ringshard_internal.node_activity() a
  LEFT JOIN pg_catalog.pg_stat_activity c ON c.pid = a.coordinator_pid;
COMMENT ON VIEW ringshard.cluster_activity IS
	'one row per node session working for a backend of this coordinator: the backend (pid, role, state, query) beside the node''s session (pid, role, state, wait event, query), read on each node as the calling role; a node that cannot be asked gives a row with its error';

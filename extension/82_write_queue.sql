-- Queued writes (hinted handoff).  A routed write that reached at least
-- ringshard.write_quorum replicas succeeds; for each replica that missed it
-- the row waits here, in an ordinary WAL-logged table written in the same
-- transaction, until the watchdog (or replay_queue) delivers it.  Delivery
-- is idempotent: the worker records each (coordinator, queue id) it applied
-- in the same statement that inserts the row.

ALTER TABLE ringshard.cluster_state
	ADD COLUMN coordinator_id uuid NOT NULL DEFAULT pg_catalog.gen_random_uuid();

CREATE TABLE ringshard.write_queue (
	id bigserial NOT NULL,
	node_name text NOT NULL,
	table_name regclass NOT NULL,
	payload json NOT NULL,
	queued_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
	attempts integer NOT NULL DEFAULT 0,
	last_error text,
	-- one routed write has one id, queued once per replica that missed it
	PRIMARY KEY (node_name, id)
);
COMMENT ON TABLE ringshard.write_queue IS
	'routed writes a replica missed (or could not confirm), in order, waiting to be replayed to it; the id is the write''s, shared by its replicas';
SELECT pg_catalog.pg_extension_config_dump('ringshard.write_queue', '');
SELECT pg_catalog.pg_extension_config_dump('ringshard.write_queue_id_seq', '');

CREATE VIEW ringshard.write_queue_status AS
SELECT q.node_name AS node, count(*) AS queued, min(q.queued_at) AS oldest,
       pg_catalog.now() - min(q.queued_at) AS oldest_age, max(q.attempts) AS max_attempts,
       (array_agg(q.last_error ORDER BY q.id DESC) FILTER (WHERE q.last_error IS NOT NULL))[1] AS last_error
  FROM ringshard.write_queue q GROUP BY q.node_name;
COMMENT ON VIEW ringshard.write_queue_status IS 'queued writes per node: how many, how old, and the last delivery error';

-- On a worker: the queued writes it has applied, so a replay never applies twice.
CREATE TABLE ringshard.replayed_writes (
	coordinator_id uuid NOT NULL,
	queue_id bigint NOT NULL,
	applied_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
	PRIMARY KEY (coordinator_id, queue_id)
);
COMMENT ON TABLE ringshard.replayed_writes IS 'on a worker: queued writes already applied, by coordinator and queue id';
SELECT pg_catalog.pg_extension_config_dump('ringshard.replayed_writes', '');

-- Deliver up to batch queued writes to one node, oldest first.  Each
-- delivery is one statement on the worker, committed there at once: it both
-- inserts the row and records (coordinator, id), so a delivery repeated after
-- a crash before the queue row's deletion here commits is a no-op.  A write
-- the node refuses stays queued with its error and stops this node's replay
-- (writes are delivered in order); a write whose table is gone is dropped.
-- Returns how many left the queue.
CREATE FUNCTION ringshard.replay_queue(node text, batch integer DEFAULT 1000) RETURNS integer
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
DECLARE
	item ringshard.write_queue;
	origin uuid := (SELECT s.coordinator_id FROM ringshard.cluster_state s);
	outcome record;
	delivered integer := 0;
	columns text;
BEGIN
	IF node IS NULL OR batch IS NULL OR batch < 1 THEN
		RAISE EXCEPTION 'replay_queue needs a node and a positive batch' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	FOR item IN SELECT * FROM ringshard.write_queue q WHERE q.node_name = node ORDER BY q.id LIMIT batch
		FOR UPDATE SKIP LOCKED
	LOOP
		IF NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = item.table_name::oid) THEN
			RAISE WARNING 'dropping queued write % for node "%": its table (oid %) no longer exists',
				item.id, node, item.table_name::oid;
			DELETE FROM ringshard.write_queue q WHERE q.node_name = item.node_name AND q.id = item.id;
			CONTINUE;
		END IF;
		SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum) INTO columns
		  FROM pg_attribute a WHERE a.attrelid = item.table_name AND a.attnum > 0 AND NOT a.attisdropped;
		SELECT * INTO outcome FROM ringshard.node_execute(ARRAY[node], format(
			'WITH first_time AS (INSERT INTO ringshard.replayed_writes (coordinator_id, queue_id)
			                     VALUES ($2::uuid, $3::bigint) ON CONFLICT DO NOTHING RETURNING 1)
			 INSERT INTO %1$s (%2$s) SELECT %2$s FROM pg_catalog.json_populate_record(NULL::%1$s, $1::pg_catalog.json)
			  WHERE EXISTS (SELECT FROM first_time)', item.table_name, columns),
			ARRAY[item.payload::text, origin::text, item.id::text], false);
		IF NOT outcome.ok THEN
			UPDATE ringshard.write_queue q SET attempts = q.attempts + 1, last_error = outcome.error
			 WHERE q.node_name = item.node_name AND q.id = item.id;
			EXIT;
		END IF;
		DELETE FROM ringshard.write_queue q WHERE q.node_name = item.node_name AND q.id = item.id;
		delivered := delivered + 1;
	END LOOP;
	RETURN delivered;
END
$$;
COMMENT ON FUNCTION ringshard.replay_queue(text, integer) IS
	'delivers up to batch queued writes to a node, oldest first, exactly once (idempotent on the worker); a refused write stays queued with its error; returns how many were delivered';

-- Prune replayed_writes on the workers.  A worker keeps (coordinator, write
-- id) for every routed write it applied, so that a repeated delivery is a
-- no-op; a record is needed only while this coordinator may still deliver
-- that write to that worker: while a queue entry for it exists here, or while
-- the transaction that made the write is still open (it may yet queue it).
-- So a record goes when it is older than retention (by the worker's own
-- clock), its id is below the first id queued here for that worker, and no
-- transaction of this database has been open for longer than retention (if
-- one has, nothing is pruned this time).
CREATE FUNCTION ringshard.prune_replayed_writes(retention interval DEFAULT '1 day')
	RETURNS TABLE (node text, pruned bigint, error text)
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
DECLARE
	origin uuid := (SELECT s.coordinator_id FROM ringshard.cluster_state s);
	oldest_open timestamptz;
	target record;
	outcome record;
BEGIN
	IF retention < interval '1 second' THEN
		RAISE EXCEPTION 'retention % is shorter than one second', retention
			USING ERRCODE = 'invalid_parameter_value',
			      HINT = 'Keep records at least as long as the longest transaction that routes writes; the default is one day.';
	END IF;
	-- Other sessions' transaction starts are visible only with these rights.
	IF NOT (pg_has_role('pg_read_all_stats', 'USAGE') OR
	        (SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = current_user)) THEN
		RAISE EXCEPTION 'pruning replayed writes needs to see every open transaction'
			USING ERRCODE = 'insufficient_privilege',
			      DETAIL = 'The open transactions of other roles are hidden from pg_stat_activity without pg_read_all_stats.',
			      HINT = 'GRANT pg_read_all_stats TO the role that prunes, or let the watchdog prune (it does once an hour).';
	END IF;
	SELECT min(a.xact_start) INTO oldest_open FROM pg_stat_activity a
	 WHERE a.datname = current_database() AND a.pid <> pg_backend_pid() AND a.xact_start IS NOT NULL;
	IF oldest_open < now() - retention THEN
		RAISE NOTICE 'nothing pruned: a transaction of this database has been open since %, longer than the retention %',
			oldest_open, retention;
		RETURN;
	END IF;
	FOR target IN
		SELECT n.node_name,
		       (SELECT min(q.id) FROM ringshard.write_queue q WHERE q.node_name = n.node_name) AS first_queued
		  FROM ringshard.nodes n ORDER BY n.node_name
	LOOP
		SELECT * INTO outcome FROM ringshard.node_execute(ARRAY[target.node_name],
			'WITH gone AS (DELETE FROM ringshard.replayed_writes w
			                WHERE w.coordinator_id OPERATOR(pg_catalog.=) $1::pg_catalog.uuid
			                  AND w.queue_id OPERATOR(pg_catalog.<) $2::pg_catalog.int8
			                  AND w.applied_at OPERATOR(pg_catalog.<) (pg_catalog.now() OPERATOR(pg_catalog.-) $3::pg_catalog.interval)
			                RETURNING 1)
			 SELECT pg_catalog.count(*) FROM gone',
			ARRAY[origin::text, coalesce(target.first_queued, 9223372036854775807)::text, retention::text], false);
		node := target.node_name;
		pruned := CASE WHEN outcome.ok THEN outcome.value::bigint END;
		error := outcome.error;
		RETURN NEXT;
	END LOOP;
END
$$;
COMMENT ON FUNCTION ringshard.prune_replayed_writes(interval) IS
	'deletes on every node the replayed-write records of this coordinator that no delivery can need any more (older than retention, below the first queued id, no transaction open longer than retention); per node: how many went, or the error';

-- One round of the health watchdog: probe every node, mark it up or down,
-- and replay the queue of each node that answers.
CREATE FUNCTION ringshard.watchdog_tick(mark_health boolean DEFAULT true, batch integer DEFAULT 1000)
	RETURNS TABLE (node text, reachable boolean, delivered integer, still_queued bigint)
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
DECLARE
	probe record;
BEGIN
	FOR probe IN SELECT h.node, h.reachable FROM ringshard.node_health() h LOOP
		node := probe.node;
		reachable := probe.reachable;
		delivered := 0;
		IF mark_health THEN
			UPDATE ringshard.nodes n SET is_up = probe.reachable
			 WHERE n.node_name = probe.node AND n.is_up IS DISTINCT FROM probe.reachable;
		END IF;
		IF probe.reachable THEN
			-- One node's trouble must not stop the round for the others.
			BEGIN
				delivered := ringshard.replay_queue(probe.node, batch);
			EXCEPTION WHEN OTHERS THEN
				RAISE WARNING 'replaying the queue of node "%" failed: %', probe.node, SQLERRM;
			END;
		END IF;
		still_queued := (SELECT count(*) FROM ringshard.write_queue q WHERE q.node_name = probe.node);
		RETURN NEXT;
	END LOOP;
END
$$;
COMMENT ON FUNCTION ringshard.watchdog_tick(boolean, integer) IS
	'one round of the health watchdog: probes nodes, marks them up or down, replays the queue of each node that answers';

-- Queued writes (hinted handoff).  A write that reached at least
-- ringshard.write_quorum replicas succeeds; for each replica that was down
-- the row waits here, written in the writer's transaction, until the
-- watchdog (or replay_queue) delivers it as the role that wrote it.  Each
-- queued write has a random UUID, unique for all time; its ordinal only
-- keeps the order.  A delivery inserts the row on the node and deletes the
-- queue row in one coordinator transaction, committed on both sides in two
-- phases: it happens exactly once, with no record on the node.

ALTER TABLE ringshard.cluster_state
	ADD COLUMN coordinator_id uuid NOT NULL DEFAULT pg_catalog.gen_random_uuid();

CREATE TABLE ringshard.write_queue (
	write_id uuid NOT NULL,
	ordinal bigserial NOT NULL,
	node_name text NOT NULL,
	table_name regclass NOT NULL,
	writer regrole NOT NULL,
	payload json NOT NULL,
	queued_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
	attempts integer NOT NULL DEFAULT 0,
	last_error text,
	PRIMARY KEY (node_name, write_id)
);
CREATE INDEX ON ringshard.write_queue (node_name, ordinal);
CREATE INDEX ON ringshard.write_queue (table_name);
COMMENT ON TABLE ringshard.write_queue IS
	'rows a replica missed because it was down, waiting to be replayed to it as the role that wrote them';
SELECT pg_catalog.pg_extension_config_dump('ringshard.write_queue', '');
SELECT pg_catalog.pg_extension_config_dump('ringshard.write_queue_ordinal_seq', '');

-- Writes a node refused ringshard.replay_max_attempts times: set aside, with the reason.
CREATE TABLE ringshard.dead_letters (
	write_id uuid NOT NULL,
	node_name text NOT NULL,
	table_name regclass NOT NULL,
	writer regrole NOT NULL,
	payload json NOT NULL,
	queued_at timestamptz NOT NULL,
	attempts integer NOT NULL,
	reason text NOT NULL,
	failed_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
	PRIMARY KEY (node_name, write_id)
);
COMMENT ON TABLE ringshard.dead_letters IS
	'queued writes their node kept refusing, with the last reason; they are not replayed (insert them again by hand once the cause is fixed)';
SELECT pg_catalog.pg_extension_config_dump('ringshard.dead_letters', '');

-- Per node: what waits and how old it is.  An error text may show a row's
-- contents, so each role sees only the errors of its own writes.
CREATE VIEW ringshard.write_queue_status AS
SELECT n.node_name AS node,
       (SELECT count(*) FROM ringshard.write_queue q WHERE q.node_name = n.node_name) AS queued,
       (SELECT min(q.queued_at) FROM ringshard.write_queue q WHERE q.node_name = n.node_name) AS oldest,
       pg_catalog.now() - (SELECT min(q.queued_at) FROM ringshard.write_queue q WHERE q.node_name = n.node_name) AS oldest_age,
       (SELECT max(q.attempts) FROM ringshard.write_queue q WHERE q.node_name = n.node_name) AS max_attempts,
       (SELECT count(*) FROM ringshard.dead_letters d WHERE d.node_name = n.node_name) AS dead_letters,
       (SELECT q.last_error FROM ringshard.write_queue q
         WHERE q.node_name = n.node_name AND q.last_error IS NOT NULL
           AND (pg_catalog.pg_has_role(q.writer, 'MEMBER') OR pg_catalog.pg_has_role('ringshard_admin', 'MEMBER'))
         ORDER BY q.ordinal DESC LIMIT 1) AS last_error
  FROM ringshard.nodes n
 WHERE EXISTS (SELECT FROM ringshard.write_queue q WHERE q.node_name = n.node_name)
    OR EXISTS (SELECT FROM ringshard.dead_letters d WHERE d.node_name = n.node_name);
COMMENT ON VIEW ringshard.write_queue_status IS
	'queued writes per node: how many, how old, refusals, dead letters, and the last refusal of a write of yours';

CREATE FUNCTION ringshard.replay_queue(node text, batch integer DEFAULT 1000) RETURNS integer
	AS 'MODULE_PATHNAME', 'ringshard_replay_queue' LANGUAGE C VOLATILE PARALLEL UNSAFE STRICT;
COMMENT ON FUNCTION ringshard.replay_queue(text, integer) IS
	'delivers up to batch queued writes to a node, oldest first, each as the role that made it, exactly once (it commits with this transaction); a refused write stays queued with its error, and moves to dead_letters after ringshard.replay_max_attempts refusals; returns how many were delivered';

-- One round of the health watchdog: probe every node, mark it up or down,
-- replay the queue of each node that answers, and mark up a node whose queue
-- is delivered.  (The watchdog then resolves prepared transactions a crash
-- left in doubt, in a transaction of its own.)
CREATE FUNCTION ringshard.watchdog_tick(mark_health boolean DEFAULT true, batch integer DEFAULT 1000)
	RETURNS TABLE (node text, reachable boolean, delivered integer, still_queued bigint)
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	probe record;
	was_up boolean;
	now_up boolean;
	dead bigint;
BEGIN
	FOR probe IN SELECT h.node, h.reachable, h.last_error AS error FROM ringshard.node_health() h LOOP
		node := probe.node;
		reachable := probe.reachable;
		delivered := 0;
		IF probe.reachable THEN
			-- One node's trouble must not stop the round for the others.
			BEGIN
				delivered := ringshard.replay_queue(probe.node, batch);
			EXCEPTION WHEN OTHERS THEN
				RAISE WARNING 'replaying the queue of node "%" failed: %', probe.node, SQLERRM;
			END;
		END IF;
		still_queued := (SELECT count(*) FROM ringshard.write_queue q WHERE q.node_name = probe.node);
		IF delivered > 0 THEN
			RAISE LOG 'ringshard: delivered % queued write(s) to node "%", % still queued', delivered, probe.node, still_queued;
		END IF;
		IF mark_health THEN
			-- up: it answers and misses no write (none queued, none set aside as a dead letter)
			dead := (SELECT count(*) FROM ringshard.dead_letters d WHERE d.node_name = probe.node);
			now_up := probe.reachable AND still_queued = 0 AND dead = 0;
			SELECT n.is_up INTO was_up FROM ringshard.nodes n WHERE n.node_name = probe.node;
			IF was_up IS DISTINCT FROM now_up THEN
				UPDATE ringshard.nodes n SET is_up = now_up WHERE n.node_name = probe.node;
				IF now_up THEN
					RAISE LOG 'ringshard: node "%" is marked up', probe.node;
				ELSE
					RAISE LOG 'ringshard: node "%" is marked down: %', probe.node,
						CASE WHEN NOT probe.reachable THEN coalesce(probe.error, 'it does not answer')
						     WHEN dead > 0 THEN format('%s dead letter(s) to deal with', dead)
						     ELSE format('%s queued write(s) to deliver', still_queued) END;
				END IF;
			END IF;
		END IF;
		RETURN NEXT;
	END LOOP;
END
$$;
COMMENT ON FUNCTION ringshard.watchdog_tick(boolean, integer) IS
	'one round of the health watchdog: probes nodes, replays queues, marks nodes up (reachable, nothing queued, no dead letter) or down';

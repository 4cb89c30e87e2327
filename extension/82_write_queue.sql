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
	payload json,
	queued_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
	attempts integer NOT NULL DEFAULT 0,
	last_error text,
	statement text,
	PRIMARY KEY (node_name, write_id),
	CONSTRAINT row_or_statement CHECK ((payload IS NULL) <> (statement IS NULL))
);
CREATE INDEX ON ringshard.write_queue (node_name, ordinal);
CREATE INDEX ON ringshard.write_queue (table_name);
COMMENT ON TABLE ringshard.write_queue IS
	'writes a replica missed because it was down (a row to insert, or an UPDATE, DELETE or TRUNCATE as its other replicas ran it), waiting to be replayed to it in order as the role that wrote them';
SELECT pg_catalog.pg_extension_config_dump('ringshard.write_queue', '');
SELECT pg_catalog.pg_extension_config_dump('ringshard.write_queue_ordinal_seq', '');

-- Writes a node refused ringshard.replay_max_attempts times: set aside, with the reason.
CREATE TABLE ringshard.dead_letters (
	write_id uuid NOT NULL,
	node_name text NOT NULL,
	table_name regclass NOT NULL,
	writer regrole NOT NULL,
	payload json,
	queued_at timestamptz NOT NULL,
	attempts integer NOT NULL,
	reason text NOT NULL,
	failed_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
	statement text,
	PRIMARY KEY (node_name, write_id),
	CONSTRAINT row_or_statement CHECK ((payload IS NULL) <> (statement IS NULL))
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
       -- to a tenth of a second: how long writes wait, not when they were queued
       pg_catalog.make_interval(secs => pg_catalog.round(pg_catalog.date_part('epoch', pg_catalog.now()
           OPERATOR(pg_catalog.-) (SELECT min(q.queued_at) FROM ringshard.write_queue q
                                    WHERE q.node_name = n.node_name))::pg_catalog.numeric, 1)::pg_catalog.float8) AS oldest_age,
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

-- A table's rows move (rebalance, rehome_rows) only once the writes queued
-- for it are delivered: they must land on the nodes they were queued for
-- before those nodes' rows move.  shown: the table as the caller's messages
-- name it.
CREATE FUNCTION ringshard_internal.refuse_queued_writes(table_name regclass, shown text) RETURNS void
	LANGUAGE ringshard_plpgsql STABLE PARALLEL SAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
BEGIN
	IF EXISTS (SELECT FROM ringshard.write_queue q WHERE q.table_name = refuse_queued_writes.table_name) THEN
		RAISE EXCEPTION 'table % has queued writes', shown
			USING ERRCODE = 'object_not_in_prerequisite_state',
			      HINT = 'Let the watchdog deliver them (see ringshard.write_queue_status), or call ringshard.replay_queue().';
	END IF;
END
$$;
COMMENT ON FUNCTION ringshard_internal.refuse_queued_writes(regclass, text) IS
	'raises if writes are queued for the table: its rows move only once they are delivered';

CREATE FUNCTION ringshard.replay_queue(node text, batch integer DEFAULT 1000) RETURNS integer
	AS 'MODULE_PATHNAME', 'ringshard_replay_queue' LANGUAGE C VOLATILE PARALLEL UNSAFE STRICT;
COMMENT ON FUNCTION ringshard.replay_queue(text, integer) IS
	'delivers up to batch queued writes to a node, oldest first, each as the role that made it, exactly once (it commits with this transaction); a refused write stays queued with its error, and moves to dead_letters after ringshard.replay_max_attempts refusals; returns how many were delivered';

-- What the watchdog saw of each node in its last round: whether it answered,
-- primary or standby, the host it reached (of a multi-host address), what it
-- delivered and what is still queued, and since when it has been catching
-- up (answering, with writes still to deliver).  A hot standby of the
-- coordinator reads it too.  Administrators only: hosts are addresses.
CREATE TABLE ringshard.node_status (
	node_name text PRIMARY KEY REFERENCES ringshard.nodes (node_name) ON DELETE CASCADE,
	checked_at timestamptz NOT NULL,
	reachable boolean NOT NULL,
	role text,
	host text,
	rtt_ms float8,
	delivered integer NOT NULL,
	queued bigint NOT NULL,
	catching_up_since timestamptz,
	last_error text
);
COMMENT ON TABLE ringshard.node_status IS
	'per node, the watchdog''s last round: answered or not, primary or standby, host reached, round trip, writes delivered in the round and still queued, catching up since, last error';

-- The parts of this coordinator's committed transactions (those with a
-- transaction record) still prepared on a node: their rows are invisible
-- there until recovery commits them.  (node_value and the records' table are
-- created further on; PL/pgSQL finds them when it runs.)
CREATE FUNCTION ringshard_internal.committed_parts_prepared_on(node text) RETURNS text[]
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	prepared text[];
BEGIN
	prepared := ringshard_internal.node_value(node,
		'SELECT COALESCE(pg_catalog.array_agg(gid), ''{}'') FROM pg_catalog.pg_prepared_xacts
		  WHERE database OPERATOR(pg_catalog.=) pg_catalog.current_database()',
		in_transaction => false, shape => 'text[]')::text[];
	RETURN ARRAY(SELECT r.gid FROM ringshard.transaction_records r
	              WHERE r.node_name = committed_parts_prepared_on.node AND r.gid = ANY (prepared) ORDER BY r.gid);
END
$$;
COMMENT ON FUNCTION ringshard_internal.committed_parts_prepared_on(text) IS
	'the prepared-transaction names of this coordinator''s committed transactions (with a record) still prepared on a node';

-- One round of the health watchdog: probe every node, mark down a node that
-- does not answer, and replay the queue of each node that does.  A node that
-- answers and has at most one batch left is handed over at the end of the
-- round: under its queue lock (taken exclusive, so no write is still on its
-- way to its queue, and new ones wait), the rest is delivered and the node
-- is marked up, once recovery has left no part of a committed transaction
-- prepared there; the writers that waited then write to it directly.  (The
-- watchdog then resolves prepared transactions a crash left in doubt, in a
-- transaction of its own.)
CREATE FUNCTION ringshard.watchdog_tick(mark_health boolean DEFAULT true, batch integer DEFAULT 1000)
	RETURNS TABLE (node text, reachable boolean, delivered integer, still_queued bigint)
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	probe record;
	was_up boolean;
	dead bigint;
	nodes_seen text[] := '{}';
	answers boolean[] := '{}';
	delivered_to integer[] := '{}';
	hand_over boolean[] := '{}';
	got integer;
	handed integer;
	saved_lock_timeout text;
	recovery_error text;
BEGIN
	FOR probe IN SELECT h.node, h.reachable, h.role, h.host, h.rtt_ms, h.last_error AS error
	               FROM ringshard.node_health() h LOOP
		got := 0;
		IF probe.reachable THEN
			-- One node's trouble must not stop the round for the others.
			BEGIN
				-- Recovery on the node again, right before its queue is
				-- replayed: a node that was still starting during the
				-- round's recovery may answer now, with a part of a
				-- committed transaction still prepared there (it was lost
				-- between PREPARE and COMMIT PREPARED), holding its rows'
				-- locks; a queued UPDATE of such a row would wait for it
				-- until the round is cancelled.  A recovery that fails
				-- (the node gone again, a part's role without a mapping)
				-- holds nothing back: the replay goes on as before.
				IF EXISTS (SELECT FROM ringshard.write_queue q WHERE q.node_name = probe.node)
				   AND current_setting('transaction_isolation') NOT IN ('repeatable read', 'serializable') THEN
					SELECT r.error INTO recovery_error
					  FROM ringshard_internal.recover_prepared_transactions_on(ARRAY[probe.node]) r;
					IF recovery_error IS NOT NULL THEN
						RAISE LOG 'ringshard: recovery on node "%" before its queue is replayed failed: %',
							probe.node, recovery_error;
					END IF;
				END IF;
				got := ringshard.replay_queue(probe.node, batch);
			EXCEPTION WHEN OTHERS THEN
				RAISE WARNING 'replaying the queue of node "%" failed: %', probe.node, SQLERRM;
			END;
		END IF;
		still_queued := (SELECT count(*) FROM ringshard.write_queue q WHERE q.node_name = probe.node);
		IF got > 0 THEN
			RAISE LOG 'ringshard: delivered % queued write(s) to node "%", % still queued', got, probe.node, still_queued;
		END IF;
		nodes_seen := nodes_seen || probe.node;
		answers := answers || probe.reachable;
		IF mark_health THEN
			INSERT INTO ringshard.node_status AS st (node_name, checked_at, reachable, role, host, rtt_ms, delivered,
			                                         queued, catching_up_since, last_error)
			VALUES (probe.node, now(), probe.reachable, probe.role, probe.host, probe.rtt_ms, got, still_queued,
			        CASE WHEN probe.reachable AND still_queued > 0 THEN now() END, probe.error)
			ON CONFLICT (node_name) DO UPDATE
			   SET checked_at = excluded.checked_at, reachable = excluded.reachable, role = excluded.role,
			       host = excluded.host, rtt_ms = excluded.rtt_ms, delivered = excluded.delivered,
			       queued = excluded.queued, last_error = excluded.last_error,
			       catching_up_since = CASE WHEN excluded.catching_up_since IS NULL THEN NULL
			                                ELSE coalesce(st.catching_up_since, excluded.catching_up_since) END;
		END IF;
		delivered_to := delivered_to || got;
		hand_over := hand_over || false;
		IF mark_health THEN
			dead := (SELECT count(*) FROM ringshard.dead_letters d WHERE d.node_name = probe.node);
			SELECT n.is_up INTO was_up FROM ringshard.nodes n WHERE n.node_name = probe.node;
			IF NOT probe.reachable OR dead > 0 OR (was_up AND still_queued > 0) THEN
				-- down: it does not answer, or it misses writes
				UPDATE ringshard.nodes n SET is_up = false WHERE n.node_name = probe.node AND n.is_up;
				IF FOUND THEN
					RAISE LOG 'ringshard: node "%" is marked down: %', probe.node,
						CASE WHEN NOT probe.reachable THEN coalesce(probe.error, 'it does not answer')
						     WHEN dead > 0 THEN format('%s dead letter(s) to deal with', dead)
						     ELSE format('%s queued write(s) to deliver', still_queued) END;
				END IF;
			ELSIF NOT was_up AND still_queued <= batch
			      -- a write the node refused is tried once a round, and
			      -- holds back its table's later writes; one whose locks are
			      -- held on the node waits for the next round: nothing to
			      -- hand over (the hand-over would wait on that lock again,
			      -- holding the node's queue lock against every writer)
			      AND NOT EXISTS (SELECT FROM ringshard.write_queue q
			                       WHERE q.node_name = probe.node AND q.last_error IS NOT NULL) THEN
				hand_over[cardinality(hand_over)] := true;
			END IF;
		END IF;
	END LOOP;

	-- The hand-overs, last: the queue lock is held to the end of the round.
	IF true = ANY (hand_over) AND current_setting('transaction_isolation') IN ('repeatable read', 'serializable') THEN
		RAISE WARNING 'nodes are not marked up by a watchdog round in a % transaction', current_setting('transaction_isolation')
			USING HINT = 'Call ringshard.watchdog_tick() in a READ COMMITTED transaction; the watchdog always does.';
		hand_over := array_fill(false, ARRAY[cardinality(hand_over)]);
	END IF;
	saved_lock_timeout := current_setting('lock_timeout');
	FOR i IN 1 .. cardinality(nodes_seen) LOOP
		CONTINUE WHEN NOT hand_over[i];
		BEGIN
			-- Writers that queue for the node hold its queue lock shared to
			-- their end; one that holds it too long makes the hand-over wait
			-- for another round rather than hold back every other writer.
			PERFORM set_config('lock_timeout', '2s', true);
			PERFORM pg_advisory_xact_lock(21070, hashtext(nodes_seen[i]));
			PERFORM set_config('lock_timeout', saved_lock_timeout, true);
			handed := 0;
			FOR pass IN 1 .. 100 LOOP
				got := ringshard.replay_queue(nodes_seen[i], batch);
				handed := handed + got;
				EXIT WHEN got = 0;
			END LOOP;
			delivered_to[i] := delivered_to[i] + handed;
			IF handed > 0 THEN
				RAISE LOG 'ringshard: delivered % queued write(s) to node "%" at its hand-over', handed, nodes_seen[i];
			END IF;
			-- A node that went away between a PREPARE and its COMMIT PREPARED
			-- may have come back after this round's recovery: its part of a
			-- committed (and acknowledged) transaction is still prepared,
			-- its rows invisible there.  Recovery runs on it again here, and
			-- it is marked up only once none is left: else a read that picks
			-- it would miss them.  (A part whose transaction is between its
			-- commit and its COMMIT PREPARED right now waits for the next round.)
			IF NOT EXISTS (SELECT FROM ringshard.write_queue q WHERE q.node_name = nodes_seen[i])
			   AND NOT EXISTS (SELECT FROM ringshard.dead_letters d WHERE d.node_name = nodes_seen[i]) THEN
				PERFORM ringshard_internal.recover_prepared_transactions_on(ARRAY[nodes_seen[i]]);
				IF cardinality(ringshard_internal.committed_parts_prepared_on(nodes_seen[i])) > 0 THEN
					RAISE LOG 'ringshard: node "%" stays down this round: a committed transaction is still prepared there',
						nodes_seen[i];
				ELSE
					UPDATE ringshard.nodes n SET is_up = true WHERE n.node_name = nodes_seen[i] AND NOT n.is_up;
					IF FOUND THEN
						RAISE LOG 'ringshard: node "%" is marked up', nodes_seen[i];
					END IF;
				END IF;
			END IF;
		EXCEPTION
			WHEN lock_not_available THEN
				RAISE LOG 'ringshard: node "%" stays down this round: writers held its queue for over 2 s', nodes_seen[i];
			WHEN OTHERS THEN
				RAISE WARNING 'handing over node "%" failed: %', nodes_seen[i], SQLERRM;
		END;
	END LOOP;

	FOR i IN 1 .. cardinality(nodes_seen) LOOP
		node := nodes_seen[i];
		reachable := answers[i];
		delivered := delivered_to[i];
		still_queued := (SELECT count(*) FROM ringshard.write_queue q WHERE q.node_name = nodes_seen[i]);
		IF mark_health AND hand_over[i] THEN
			UPDATE ringshard.node_status st
			   SET delivered = delivered_to[i], queued = still_queued,
			       catching_up_since = CASE WHEN still_queued > 0 THEN st.catching_up_since END
			 WHERE st.node_name = nodes_seen[i];
		END IF;
		RETURN NEXT;
	END LOOP;
END
$$;
COMMENT ON FUNCTION ringshard.watchdog_tick(boolean, integer) IS
	'one round of the health watchdog: probes nodes, replays queues, marks a node down when it does not answer or misses writes, and up, under its queue lock, once it answers, its queue is delivered and no part of a committed transaction is still prepared there';

-- Rebalancing.  Each distributed table remembers the topology its rows are
-- laid out under (its placement).  After the topology changes, rebalance()
-- moves exactly the rows whose replica set changed, step by step (a step is
-- a token range or a run of partitions with one old and one new replica
-- set): copy from a node that holds them to the nodes that gain them,
-- verify every copied row is there, and only then delete them from the
-- nodes that lose them.  Progress is committed batch by batch, so a crash
-- of the coordinator or of a worker is resumed by calling rebalance() again.

CREATE TABLE ringshard.placements (
	table_name regclass PRIMARY KEY,
	snapshot json NOT NULL,
	placed_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
COMMENT ON TABLE ringshard.placements IS
	'the topology (ring members and weights, or partition assignments) each distributed table''s rows are laid out under';
SELECT pg_catalog.pg_extension_config_dump('ringshard.placements', '');

CREATE TABLE ringshard.rebalance_progress (
	table_name regclass NOT NULL,
	step integer NOT NULL,
	predicate text NOT NULL,
	source text NOT NULL,
	targets text[] NOT NULL,
	deletes text[] NOT NULL,
	fraction float8,
	state text NOT NULL DEFAULT 'pending' CONSTRAINT state_known CHECK (state IN ('pending', 'copied', 'done')),
	rows_total bigint,
	rows_copied bigint NOT NULL DEFAULT 0,
	rows_deleted bigint NOT NULL DEFAULT 0,
	updated_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
	PRIMARY KEY (table_name, step)
);
COMMENT ON TABLE ringshard.rebalance_progress IS 'the steps of an unfinished rebalance and how far each got';
SELECT pg_catalog.pg_extension_config_dump('ringshard.rebalance_progress', '');

CREATE VIEW ringshard.rebalance_status AS
SELECT p.table_name, t.node, count(*) AS steps,
       count(*) FILTER (WHERE p.state = 'done') AS steps_done,
       sum(p.rows_total) AS rows_total, sum(p.rows_copied) AS rows_done,
       max(p.updated_at) AS updated_at
  FROM ringshard.rebalance_progress p, unnest(p.targets) AS t(node)
 GROUP BY p.table_name, t.node;
COMMENT ON VIEW ringshard.rebalance_status IS 'per table and receiving node: steps and rows of the running (or interrupted) rebalance, done against total';

CREATE FUNCTION ringshard.ring_move_plan(old_nodes text[], old_weights float8[], old_vnodes integer,
										 old_replicas integer, ring text)
	RETURNS TABLE (range_start ringtoken, range_end ringtoken, fraction float8, old_nodes text[], new_nodes text[])
	AS 'MODULE_PATHNAME', 'ringshard_ring_move_plan' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard.ring_move_plan(text[], float8[], integer, integer, text) IS
	'token ranges whose replica set differs between a ring as it was (members, weights, vnodes, replicas) and as it is now';

-- The topology a table's rows would be laid out under now.
CREATE FUNCTION ringshard.placement_snapshot(table_name regclass) RETURNS json
	LANGUAGE sql STABLE STRICT SET search_path = pg_catalog, ringshard, pg_temp AS $$
	SELECT CASE WHEN d.ring_name IS NOT NULL THEN
		json_build_object('ring', d.ring_name, 'algorithm', r.algorithm, 'vnodes', r.vnodes,
		                  'replication_factor', r.replication_factor,
		                  'members', (SELECT coalesce(json_agg(json_build_object('node', m.node_name, 'weight', m.weight)
		                                                       ORDER BY m.node_name COLLATE "C"), '[]')
		                                FROM ringshard.ring_members m WHERE m.ring_name = d.ring_name))
	ELSE
		json_build_object('map', d.map_name,
		                  'assignments', (SELECT coalesce(json_agg(json_build_object('node', a.node_name,
		                                                          'start', a.partition_start, 'end', a.partition_end)), '[]')
		                                    FROM ringshard.partition_assignments a WHERE a.map_name = d.map_name))
	END
	  FROM ringshard.distributed_tables d LEFT JOIN ringshard.rings r ON r.ring_name = d.ring_name
	 WHERE d.table_name = placement_snapshot.table_name;
$$;
COMMENT ON FUNCTION ringshard.placement_snapshot(regclass) IS 'the ring or map a table''s rows would be laid out under now, as JSON';

-- Holders of each partition under a map snapshot, and now.
CREATE FUNCTION ringshard.partition_holders_of(snapshot json, map text)
	RETURNS TABLE (partition integer, old_nodes text[], new_nodes text[])
	LANGUAGE sql STABLE SET search_path = pg_catalog, ringshard, pg_temp AS $$
	SELECT p,
	       coalesce((SELECT array_agg(DISTINCT a->>'node' ORDER BY a->>'node')
	                   FROM json_array_elements(snapshot->'assignments') a
	                  WHERE p BETWEEN (a->>'start')::int AND (a->>'end')::int), '{}'),
	       coalesce((SELECT array_agg(DISTINCT x.node_name ORDER BY x.node_name)
	                   FROM ringshard.partition_assignments x
	                  WHERE x.map_name = map AND p BETWEEN x.partition_start AND x.partition_end), '{}')
	  FROM generate_series(0, 255) p;
$$;
COMMENT ON FUNCTION ringshard.partition_holders_of(json, text) IS 'per partition, its holders under a placement snapshot and now';

-- The plan: one row per step, with the SQL predicate that selects its rows.
CREATE FUNCTION ringshard.rebalance_plan(table_name regclass)
	RETURNS TABLE (step integer, predicate text, fraction float8, old_nodes text[], new_nodes text[],
				   source text, targets text[], deletes text[])
	LANGUAGE plpgsql STABLE STRICT SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	annotation ringshard.distributed_tables;
	placed json;
	keyspace_expr text;
BEGIN
	SELECT * INTO annotation FROM ringshard.distributed_tables d WHERE d.table_name = rebalance_plan.table_name;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'table % is not annotated', table_name USING ERRCODE = 'undefined_object';
	END IF;
	SELECT p.snapshot INTO placed FROM ringshard.placements p WHERE p.table_name = rebalance_plan.table_name;
	IF placed IS NULL THEN
		RAISE EXCEPTION 'table % has no recorded placement', table_name
			USING ERRCODE = 'object_not_in_prerequisite_state',
			      HINT = 'ringshard.create_distributed_table() records it when the table is created on the nodes.';
	END IF;
	IF annotation.ring_name IS NOT NULL THEN
		IF (SELECT r.algorithm FROM ringshard.rings r WHERE r.ring_name = annotation.ring_name) <> 'murmur3' THEN
			RAISE EXCEPTION 'rebalance supports murmur3 rings only' USING ERRCODE = 'feature_not_supported';
		END IF;
		RETURN QUERY
		SELECT (row_number() OVER (ORDER BY m.range_start))::integer,
		       CASE WHEN m.range_start < m.range_end
		            THEN format('(pg_catalog.ring_token(t.%1$I) > %2$L::pg_catalog.ringtoken AND pg_catalog.ring_token(t.%1$I) <= %3$L::pg_catalog.ringtoken)',
		                        annotation.key_column, m.range_start, m.range_end)
		            ELSE format('(pg_catalog.ring_token(t.%1$I) > %2$L::pg_catalog.ringtoken OR pg_catalog.ring_token(t.%1$I) <= %3$L::pg_catalog.ringtoken)',
		                        annotation.key_column, m.range_start, m.range_end) END,
		       m.fraction, m.old_nodes, m.new_nodes,
		       -- copy from a node that keeps the rows if there is one: it stays busy anyway
		       coalesce((SELECT o FROM unnest(m.old_nodes) WITH ORDINALITY u(o, i) WHERE o = ANY (m.new_nodes) ORDER BY i LIMIT 1),
		                m.old_nodes[1]),
		       ARRAY(SELECT n FROM unnest(m.new_nodes) n WHERE n <> ALL (m.old_nodes)),
		       ARRAY(SELECT o FROM unnest(m.old_nodes) o WHERE o <> ALL (m.new_nodes))
		  FROM ringshard.ring_move_plan(
		         ARRAY(SELECT x->>'node' FROM json_array_elements(placed->'members') x),
		         ARRAY(SELECT (x->>'weight')::float8 FROM json_array_elements(placed->'members') x),
		         (placed->>'vnodes')::integer, (placed->>'replication_factor')::integer,
		         annotation.ring_name) m;
	ELSE
		keyspace_expr := CASE WHEN annotation.keyspace_column IS NOT NULL
			THEN format('t.%I::pg_catalog.text', annotation.keyspace_column) ELSE quote_literal(annotation.keyspace) END;
		RETURN QUERY
		WITH changed AS (
			SELECT h.partition, h.old_nodes, h.new_nodes,
			       h.partition - row_number() OVER (PARTITION BY h.old_nodes, h.new_nodes ORDER BY h.partition) AS run
			  FROM ringshard.partition_holders_of(placed, annotation.map_name) h
			 WHERE h.old_nodes IS DISTINCT FROM h.new_nodes AND cardinality(h.old_nodes) > 0),
		     runs AS (
			SELECT min(c.partition) AS first_p, max(c.partition) AS last_p, c.old_nodes, c.new_nodes
			  FROM changed c GROUP BY c.old_nodes, c.new_nodes, c.run)
		SELECT (row_number() OVER (ORDER BY r.first_p))::integer,
		       format('(pg_catalog.partition_for(%s, t.%I) BETWEEN %s AND %s)', keyspace_expr, annotation.key_column,
		              r.first_p, r.last_p),
		       (r.last_p - r.first_p + 1) / 256.0::float8, r.old_nodes, r.new_nodes,
		       coalesce((SELECT o FROM unnest(r.old_nodes) o WHERE o = ANY (r.new_nodes) LIMIT 1), r.old_nodes[1]),
		       ARRAY(SELECT n FROM unnest(r.new_nodes) n WHERE n <> ALL (r.old_nodes)),
		       ARRAY(SELECT o FROM unnest(r.old_nodes) o WHERE o <> ALL (r.new_nodes))
		  FROM runs r;
	END IF;
END
$$;
COMMENT ON FUNCTION ringshard.rebalance_plan(regclass) IS
	'the steps of moving a table from its recorded placement to the current topology: rows selected by predicate are copied from source to targets, then deleted from deletes';

-- Run one statement on one node; raise if it fails.
CREATE FUNCTION ringshard.node_value(node text, sql text, params text[] DEFAULT '{}', in_transaction boolean DEFAULT true)
	RETURNS text
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	outcome record;
BEGIN
	SELECT * INTO outcome FROM ringshard.node_execute(ARRAY[node], sql, params, in_transaction);
	IF NOT outcome.ok THEN
		RAISE EXCEPTION 'statement failed on node "%"', node
			USING ERRCODE = 'connection_failure', DETAIL = outcome.error;
	END IF;
	RETURN outcome.value;
END
$$;
COMMENT ON FUNCTION ringshard.node_value(text, text, text[], boolean) IS 'runs one statement on a node and returns its first value, or raises the node''s error';

-- A procedure that commits cannot carry a SET clause: every name in it is
-- schema-qualified or from pg_catalog, which is searched first.
CREATE PROCEDURE ringshard.rebalance(table_name regclass, dry_run boolean DEFAULT false,
									 batch integer DEFAULT 1000, pause_ms integer DEFAULT 0)
	LANGUAGE plpgsql AS $$
DECLARE
	annotation ringshard.distributed_tables;
	columns text;
	item record;
	target text;
	page json;
	page_rows integer;
	last_ctid text;
	missing text;
	total bigint;
	removed bigint;
	steps integer;
BEGIN
	IF table_name IS NULL OR dry_run IS NULL OR batch IS NULL OR batch < 1 OR pause_ms IS NULL OR pause_ms < 0 THEN
		RAISE EXCEPTION 'rebalance needs a table, a positive batch and a pause of at least 0 ms'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	SELECT * INTO annotation FROM ringshard.distributed_tables d WHERE d.table_name = rebalance.table_name;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'table % is not annotated', table_name USING ERRCODE = 'undefined_object';
	END IF;

	IF dry_run THEN
		FOR item IN SELECT * FROM ringshard.rebalance_plan(table_name) ORDER BY step LOOP
			RAISE NOTICE 'step %: % of the keys, from % to %: copy from % to %, then delete from %',
				item.step, round(item.fraction::numeric, 6), item.old_nodes, item.new_nodes,
				item.source, item.targets, item.deletes;
		END LOOP;
		RETURN;
	END IF;

	-- Queued writes are delivered to the nodes they were queued for: they
	-- must land before those nodes' rows move.
	IF EXISTS (SELECT FROM ringshard.write_queue q WHERE q.table_name = rebalance.table_name) THEN
		RAISE EXCEPTION 'table % has queued writes', table_name
			USING ERRCODE = 'object_not_in_prerequisite_state',
			      HINT = 'Let the watchdog deliver them (see ringshard.write_queue_status), or call ringshard.replay_queue().';
	END IF;

	-- A new rebalance records its plan; an interrupted one resumes it.
	IF NOT EXISTS (SELECT FROM ringshard.rebalance_progress p WHERE p.table_name = rebalance.table_name) THEN
		PERFORM ringshard.sync_topology();
		PERFORM ringshard.push_table_definition(table_name);
		INSERT INTO ringshard.rebalance_progress (table_name, step, predicate, source, targets, deletes, fraction)
		SELECT rebalance.table_name, p.step, p.predicate, p.source, p.targets, p.deletes, p.fraction
		  FROM ringshard.rebalance_plan(table_name) p;
		GET DIAGNOSTICS steps = ROW_COUNT;
		RAISE NOTICE 'rebalance of %: % steps', table_name, steps;
		COMMIT;
	ELSE
		RAISE NOTICE 'rebalance of %: resuming at step %', table_name,
			(SELECT min(p.step) FROM ringshard.rebalance_progress p WHERE p.table_name = rebalance.table_name AND p.state <> 'done');
	END IF;

	SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum) INTO columns
	  FROM pg_catalog.pg_attribute a WHERE a.attrelid = table_name AND a.attnum > 0 AND NOT a.attisdropped;

	FOR item IN SELECT * FROM ringshard.rebalance_progress p
	             WHERE p.table_name = rebalance.table_name AND p.state <> 'done' ORDER BY p.step LOOP
		-- Copy: page through the source's rows of this step by ctid; each
		-- page is inserted where missing and checked, in one transaction.
		IF item.state = 'pending' THEN
			total := ringshard.node_value(item.source,
				format('SELECT count(*) FROM %s t WHERE %s', table_name, item.predicate), '{}', false)::bigint;
			UPDATE ringshard.rebalance_progress p SET rows_total = total, rows_copied = 0, updated_at = now()
			 WHERE p.table_name = rebalance.table_name AND p.step = item.step;
			COMMIT;
			last_ctid := '(0,0)';
			LOOP
				page := ringshard.node_value(item.source,
					format('SELECT json_build_object(''rows'', coalesce(json_agg(row_to_json(s) ORDER BY s.row_ctid), ''[]''), ''last'', max(s.row_ctid)::text)
					          FROM (SELECT t.ctid AS row_ctid, %s FROM %s t WHERE %s AND t.ctid > $1::tid ORDER BY t.ctid LIMIT %s) s',
					       (SELECT string_agg('t.' || quote_ident(a.attname), ', ' ORDER BY a.attnum)
					          FROM pg_catalog.pg_attribute a WHERE a.attrelid = table_name AND a.attnum > 0 AND NOT a.attisdropped),
					       table_name, item.predicate, batch),
					ARRAY[last_ctid], false)::json;
				page_rows := json_array_length(page->'rows');
				EXIT WHEN page_rows = 0;
				FOREACH target IN ARRAY item.targets LOOP
					PERFORM ringshard.node_value(target, format(
						'INSERT INTO %1$s (%2$s) SELECT %2$s FROM json_populate_recordset(NULL::%1$s, $1::json) r
						  WHERE NOT EXISTS (SELECT FROM %1$s t WHERE t.%3$I IS NOT DISTINCT FROM r.%3$I
						                       AND (SELECT row(t.*) IS NOT DISTINCT FROM row(r.*)))',
						table_name, columns, annotation.key_column), ARRAY[(page->'rows')::text]);
					missing := ringshard.node_value(target, format(
						'SELECT count(*) FROM json_populate_recordset(NULL::%1$s, $1::json) r
						  WHERE NOT EXISTS (SELECT FROM %1$s t WHERE t.%2$I IS NOT DISTINCT FROM r.%2$I
						                       AND (SELECT row(t.*) IS NOT DISTINCT FROM row(r.*)))',
						table_name, annotation.key_column), ARRAY[(page->'rows')::text]);
					IF missing <> '0' THEN
						RAISE EXCEPTION 'verification failed: % rows of step % are missing on node "%"', missing, item.step, target
							USING ERRCODE = 'data_corrupted';
					END IF;
				END LOOP;
				last_ctid := page->>'last';
				UPDATE ringshard.rebalance_progress p SET rows_copied = p.rows_copied + page_rows, updated_at = now()
				 WHERE p.table_name = rebalance.table_name AND p.step = item.step;
				COMMIT;
				IF pause_ms > 0 THEN
					PERFORM pg_sleep(pause_ms / 1000.0);
				END IF;
			END LOOP;
			UPDATE ringshard.rebalance_progress p SET state = 'copied', updated_at = now()
			 WHERE p.table_name = rebalance.table_name AND p.step = item.step;
			COMMIT;
		END IF;
		-- Delete: every row of the step is on every target now.
		removed := 0;
		FOREACH target IN ARRAY item.deletes LOOP
			removed := removed + ringshard.node_value(target,
				format('WITH gone AS (DELETE FROM %s t WHERE %s RETURNING 1) SELECT count(*) FROM gone', table_name, item.predicate))::bigint;
		END LOOP;
		UPDATE ringshard.rebalance_progress p SET state = 'done', rows_deleted = removed, updated_at = now()
		 WHERE p.table_name = rebalance.table_name AND p.step = item.step;
		RAISE NOTICE 'step % done: % rows copied to %, % deleted from %', item.step,
			(SELECT p.rows_copied FROM ringshard.rebalance_progress p WHERE p.table_name = rebalance.table_name AND p.step = item.step),
			item.targets, removed, item.deletes;
		COMMIT;
	END LOOP;

	-- The table is laid out under the current topology now.
	EXECUTE 'INSERT INTO ringshard.placements (table_name, snapshot) VALUES ($1, ringshard.placement_snapshot($1))
	         ON CONFLICT (table_name) DO UPDATE SET snapshot = EXCLUDED.snapshot, placed_at = pg_catalog.now()'
		USING table_name;
	RAISE NOTICE 'rebalance of % complete: % rows copied', table_name,
		(SELECT coalesce(sum(p.rows_copied), 0) FROM ringshard.rebalance_progress p WHERE p.table_name = rebalance.table_name);
	DELETE FROM ringshard.rebalance_progress p WHERE p.table_name = rebalance.table_name;
	COMMIT;
END
$$;
COMMENT ON PROCEDURE ringshard.rebalance(regclass, boolean, integer, integer) IS
	'moves the rows whose replica set changed since the table was placed: copy, verify, delete, in committed batches; resumable; dry_run prints the plan';

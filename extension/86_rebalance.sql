-- Rebalancing.  Each distributed table remembers the topology its rows are
-- laid out under (its placement).  After the topology changes, rebalance()
-- moves exactly the rows whose replica set changed, step by step (a step is
-- a token range or a run of partitions with one old and one new replica
-- set): copy from a node that holds them to the nodes that gain them,
-- verify every copied row is there, and only then delete them from the
-- nodes that lose them.  Progress is committed batch by batch (a batch: steps
-- with the same nodes, moved by one COPY per target), so a crash
-- of the coordinator or of a worker is resumed by calling rebalance() again.

CREATE TABLE ringshard.placements (
	table_name regclass PRIMARY KEY,
	snapshot json NOT NULL,
	placed_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
COMMENT ON TABLE ringshard.placements IS
	'the topology (ring members with weights, zones and tokens, or partition assignments) each distributed table''s rows are laid out under';
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
	started_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
	bytes_total bigint,
	PRIMARY KEY (table_name, step)
);
COMMENT ON TABLE ringshard.rebalance_progress IS 'the steps of an unfinished rebalance and how far each got';
SELECT pg_catalog.pg_extension_config_dump('ringshard.rebalance_progress', '');

-- What a table's rows may be read from and written to depends on its
-- placement and on which of its moves are copied (moving_ranges below):
-- their changes reach every backend as a topology change does.
CREATE TRIGGER invalidate_topology_cache AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
	ON ringshard.placements FOR EACH STATEMENT EXECUTE FUNCTION ringshard_internal.invalidate_topology_cache();
CREATE TRIGGER invalidate_topology_cache AFTER DELETE OR TRUNCATE
	ON ringshard.rebalance_progress FOR EACH STATEMENT EXECUTE FUNCTION ringshard_internal.invalidate_topology_cache();
CREATE TRIGGER invalidate_topology_cache_on_state AFTER UPDATE OF state
	ON ringshard.rebalance_progress FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state)
	EXECUTE FUNCTION ringshard_internal.invalidate_topology_cache();

-- One row per table with an unfinished rebalance.  Every step's rows are
-- counted on its source when the rebalance starts, so rows_total is the
-- whole plan from the first step on, and percent is rows_done against it
-- (steps, when nothing is left to copy); it reads 100 only once every step,
-- deletes included, is done.
CREATE VIEW ringshard.rebalance_status AS
SELECT p.table_name,
       count(*) AS steps,
       count(*) FILTER (WHERE p.state = 'done') AS steps_done,
       coalesce(sum(p.rows_total), 0)::bigint AS rows_total,
       sum(p.rows_copied)::bigint AS rows_done,
       least(round(CASE WHEN coalesce(sum(p.rows_total), 0) > 0
                        THEN 100.0 * sum(p.rows_copied) / sum(p.rows_total)
                        ELSE 100.0 * count(*) FILTER (WHERE p.state = 'done') / count(*) END, 1),
             CASE WHEN count(*) FILTER (WHERE p.state <> 'done') > 0 THEN 99.9 END) AS percent,
       max(p.updated_at) AS updated_at,
       -- copying while a step has rows left to copy, then deleting the
       -- moved rows from the nodes that left their replica sets
       CASE WHEN count(*) FILTER (WHERE p.state = 'pending') > 0 THEN 'copying'
            WHEN count(*) FILTER (WHERE p.state = 'copied') > 0 THEN 'deleting'
            ELSE 'done' END AS phase,
       min(p.started_at) AS started_at,
       -- the rate since the move started (an interrupted move's pause included)
       round(sum(p.rows_copied) / nullif(extract(epoch FROM max(p.updated_at) - min(p.started_at)), 0))::bigint
         AS rows_per_second,
       -- the rows left at that rate, to the second
       CASE WHEN sum(p.rows_copied) > 0 AND max(p.updated_at) > min(p.started_at)
            THEN make_interval(secs => round(greatest(coalesce(sum(p.rows_total), 0) - sum(p.rows_copied), 0)
                                             * extract(epoch FROM max(p.updated_at) - min(p.started_at))
                                             / sum(p.rows_copied))) END AS time_left
  FROM ringshard.rebalance_progress p
 GROUP BY p.table_name;
COMMENT ON VIEW ringshard.rebalance_status IS
	'per table with a running (or interrupted) rebalance: steps, steps done, rows of the whole plan, rows copied so far, percent done, phase (copying, deleting), rows copied per second since the start, and the time left at that rate';

CREATE FUNCTION ringshard_internal.ring_move_plan(old_members json, old_vnodes integer,
										 old_replicas integer, ring text)
	RETURNS TABLE (range_start ringtoken, range_end ringtoken, fraction float8, old_nodes text[], new_nodes text[])
	AS 'MODULE_PATHNAME', 'ringshard_ring_move_plan_members' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard_internal.ring_move_plan(json, integer, integer, text) IS
	'token ranges whose replica set differs between a ring as it was (a placement snapshot''s members with weights, zones and tokens, vnodes, replicas) and as it is now';

-- The topology a table's rows would be laid out under now.
CREATE FUNCTION ringshard_internal.placement_snapshot(table_name regclass) RETURNS json
	LANGUAGE ringshard_sql STABLE PARALLEL UNSAFE STRICT SET search_path = pg_catalog, ringshard, pg_temp AS $$
	SELECT CASE WHEN d.ring_name IS NOT NULL THEN
		json_build_object('ring', d.ring_name, 'algorithm', r.algorithm, 'vnodes', r.vnodes,
		                  'replication_factor', r.replication_factor,
		                  'members', (SELECT coalesce(json_agg(json_build_object('node', m.node_name, 'weight', m.weight,
		                                                                         'zone', m.zone, 'tokens', m.tokens)
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
COMMENT ON FUNCTION ringshard_internal.placement_snapshot(regclass) IS 'the ring or map a table''s rows would be laid out under now, as JSON';

-- A table's annotation, read the same way by every function below that
-- starts from it (the plan, the moves it still owes, the checks of its
-- steps): its row of ringshard.distributed_tables, NULL if it has none.
CREATE FUNCTION ringshard_internal.table_annotation(table_name regclass) RETURNS ringshard.distributed_tables
	LANGUAGE ringshard_sql STABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
	SELECT * FROM ringshard.distributed_tables d WHERE d.table_name = table_annotation.table_name;
$$;
COMMENT ON FUNCTION ringshard_internal.table_annotation(regclass) IS 'a table''s row of ringshard.distributed_tables, NULL if it is not annotated';

-- Holders of each partition under a map snapshot, and now.
CREATE FUNCTION ringshard_internal.partition_holders_of(snapshot json, map text)
	RETURNS TABLE (partition integer, old_nodes text[], new_nodes text[])
	LANGUAGE ringshard_sql STABLE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
	SELECT p,
	       coalesce((SELECT array_agg(DISTINCT a->>'node' ORDER BY a->>'node')
	                   FROM json_array_elements(snapshot->'assignments') a
	                  WHERE p BETWEEN (a->>'start')::int AND (a->>'end')::int), '{}'),
	       coalesce((SELECT array_agg(DISTINCT x.node_name ORDER BY x.node_name)
	                   FROM ringshard.partition_assignments x
	                  WHERE x.map_name = map AND p BETWEEN x.partition_start AND x.partition_end), '{}')
	  FROM generate_series(0, 255) p;
$$;
COMMENT ON FUNCTION ringshard_internal.partition_holders_of(json, text) IS 'per partition, its holders under a placement snapshot and now';

-- The SQL predicate of a step: the rows of a token range of a ring, or of a
-- run of partitions of a map.  Built here only, from the annotation and the
-- numbers (identifiers and literals quoted), and rebuilt to check a recorded
-- step before any node runs it (checked_step_predicate below).
CREATE FUNCTION ringshard_internal.ring_step_predicate(key_column name, range_start ringtoken, range_end ringtoken)
	RETURNS text
	LANGUAGE ringshard_sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
	SELECT CASE WHEN range_start OPERATOR(pg_catalog.<) range_end
	            THEN pg_catalog.format('(pg_catalog.ring_token(t.%1$I) > %2$L::pg_catalog.ringtoken AND pg_catalog.ring_token(t.%1$I) <= %3$L::pg_catalog.ringtoken)',
	                                   key_column, range_start, range_end)
	            ELSE pg_catalog.format('(pg_catalog.ring_token(t.%1$I) > %2$L::pg_catalog.ringtoken OR pg_catalog.ring_token(t.%1$I) <= %3$L::pg_catalog.ringtoken)',
	                                   key_column, range_start, range_end) END;
$$;
COMMENT ON FUNCTION ringshard_internal.ring_step_predicate(name, ringtoken, ringtoken) IS
	'rebalance: the SQL condition for the rows of a ring''s token range (start, end], wrapping past the top';

-- The (start, end] of a ring step's predicate as ring_step_predicate writes
-- it for the key column, as the texts of the two numbers (checked by the
-- caller): by position, not by a regular expression, which cost a tenth of
-- a millisecond per step, and every step is checked at every batch.
CREATE FUNCTION ringshard_internal.ring_step_range(key_column name, predicate text)
	RETURNS text[]
	LANGUAGE ringshard_sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
	SELECT ARRAY[pg_catalog.split_part(pg_catalog.substr(predicate,
	                 pg_catalog.length(pg_catalog.format('(pg_catalog.ring_token(t.%I) > ''', key_column)) + 1), '''', 1),
	             pg_catalog.split_part(predicate, '''', -2)];
$$;
COMMENT ON FUNCTION ringshard_internal.ring_step_range(name, text) IS
	'rebalance: the start and end tokens (as text) of a ring step''s condition, read by position';

-- A keyspace column routes by its canonical bytes (docs/routing.md §1), as
-- the nodes place rows: its text form would differ for numeric, boolean and
-- other non-text types.
CREATE FUNCTION ringshard_internal.partition_step_predicate(table_name regclass, first_partition integer,
															 last_partition integer)
	RETURNS text
	LANGUAGE ringshard_sql STABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
	SELECT pg_catalog.format('(pg_catalog.partition_for(%s, t.%I) BETWEEN %s AND %s)',
	       CASE WHEN d.keyspace_column IS NULL THEN pg_catalog.quote_literal(d.keyspace)
	            WHEN (SELECT pg_catalog.format_type(a.atttypid, NULL) FROM pg_catalog.pg_attribute a
	                   WHERE a.attrelid OPERATOR(pg_catalog.=) d.table_name AND a.attnum OPERATOR(pg_catalog.=) d.keyspace_attnum)
	                 IN ('text', 'character varying')
	            THEN pg_catalog.format('t.%I::pg_catalog.text', d.keyspace_column)
	            ELSE pg_catalog.format('pg_catalog.convert_from(ringshard.key_bytes(t.%I), ''UTF8'')', d.keyspace_column) END,
	       d.key_column, first_partition, last_partition)
	  FROM ringshard.distributed_tables d WHERE d.table_name OPERATOR(pg_catalog.=) partition_step_predicate.table_name;
$$;
COMMENT ON FUNCTION ringshard_internal.partition_step_predicate(regclass, integer, integer) IS
	'rebalance: the SQL condition for the rows of a table in the partitions first..last of its map';

-- Recorded steps' predicates, checked: each must be exactly what the two
-- functions above build for this table.  rebalance_progress is the
-- administrators' to read and clear; what runs on the nodes (with the rights
-- of whoever calls rebalance) must not be text someone wrote there.  A
-- batch's steps are checked in one call: the table's annotation is read
-- once (a move of a few thousand steps checks each of them at every batch).
CREATE FUNCTION ringshard_internal.checked_step_predicates(table_name regclass, predicates text[])
	RETURNS text[]
	LANGUAGE ringshard_plpgsql STABLE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	annotation ringshard.distributed_tables := ringshard_internal.table_annotation(table_name);
	numbers text[];
	rebuilt text;
	predicate text;
BEGIN
	FOREACH predicate IN ARRAY coalesce(predicates, '{}') LOOP
		rebuilt := NULL;
		IF annotation.ring_name IS NOT NULL THEN
			numbers := ringshard_internal.ring_step_range(annotation.key_column, predicate);
			IF numbers[1] ~ '^[0-9]{1,20}$' AND numbers[2] ~ '^[0-9]{1,20}$' THEN
				rebuilt := ringshard_internal.ring_step_predicate(annotation.key_column, numbers[1]::ringtoken, numbers[2]::ringtoken);
			END IF;
		ELSIF annotation.map_name IS NOT NULL THEN
			numbers := regexp_match(predicate, ' BETWEEN ([0-9]{1,3}) AND ([0-9]{1,3})\)$');
			IF numbers IS NOT NULL THEN
				rebuilt := ringshard_internal.partition_step_predicate(table_name, numbers[1]::integer, numbers[2]::integer);
			END IF;
		END IF;
		IF rebuilt IS DISTINCT FROM predicate THEN
			RAISE EXCEPTION 'a recorded rebalance step of % was not made by ringshard', table_name
				USING ERRCODE = 'data_corrupted',
				      DETAIL = format('Its condition is: %s', predicate),
				      HINT = 'Delete the table''s rows from ringshard.rebalance_progress and call rebalance again.';
		END IF;
	END LOOP;
	RETURN predicates;
END
$$;
COMMENT ON FUNCTION ringshard_internal.checked_step_predicates(regclass, text[]) IS
	'rebalance: recorded steps'' conditions, if each is exactly what ringshard builds for the table; else an error';

-- One step's predicate, checked.
CREATE FUNCTION ringshard_internal.checked_step_predicate(table_name regclass, predicate text)
	RETURNS text
	LANGUAGE ringshard_sql STABLE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
	SELECT (ringshard_internal.checked_step_predicates(table_name, ARRAY[predicate]))[1];
$$;
COMMENT ON FUNCTION ringshard_internal.checked_step_predicate(regclass, text) IS
	'rebalance: a recorded step''s condition, if it is exactly what ringshard builds for the table; else an error';

-- The moves a table still owes: the token ranges (of a ring) or partitions
-- (of a map) whose replica set under the table's recorded placement differs
-- from the current topology's, and whose rebalance step has not copied
-- them yet (no step recorded, or one still pending).  Until a range is
-- copied, its rows are complete only on its old replicas: the coordinator
-- reads its keys there and refuses writes to them (a write to the new
-- replicas would be lost, or undone, by the copy), docs/design.md "Moving
-- rows".  Empty for a table laid out under the current topology.
CREATE FUNCTION ringshard_internal.moving_ranges(table_name regclass)
	RETURNS TABLE (range_start ringtoken, range_end ringtoken, first_partition integer, last_partition integer,
				   old_nodes text[], new_nodes text[])
	LANGUAGE ringshard_plpgsql STABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	annotation ringshard.distributed_tables := ringshard_internal.table_annotation(table_name);
	placed json;
BEGIN
	SELECT p.snapshot INTO placed FROM ringshard.placements p WHERE p.table_name = moving_ranges.table_name;
	IF NOT FOUND OR placed IS NULL OR annotation.table_name IS NULL
	   OR placed::text = ringshard_internal.placement_snapshot(table_name)::text THEN
		RETURN;
	END IF;
	IF annotation.ring_name IS NOT NULL THEN
		IF (SELECT r.algorithm FROM ringshard.rings r WHERE r.ring_name = annotation.ring_name) <> 'murmur3'
		   OR placed->'members' IS NULL THEN
			RETURN;
		END IF;
		RETURN QUERY
		SELECT m.range_start, m.range_end, NULL::integer, NULL::integer, m.old_nodes, m.new_nodes
		  FROM ringshard_internal.ring_move_plan(placed->'members', (placed->>'vnodes')::integer,
		                                         (placed->>'replication_factor')::integer, annotation.ring_name) m
		 WHERE cardinality(m.old_nodes) > 0
		   AND NOT EXISTS (SELECT FROM ringshard.rebalance_progress q
		                    WHERE q.table_name = moving_ranges.table_name AND q.state <> 'pending'
		                      AND q.predicate = ringshard_internal.ring_step_predicate(annotation.key_column,
		                                                                               m.range_start, m.range_end))
		 ORDER BY m.range_start;
	ELSIF placed->'assignments' IS NOT NULL THEN
		RETURN QUERY
		SELECT NULL::ringtoken, NULL::ringtoken, h.partition, h.partition, h.old_nodes, h.new_nodes
		  FROM ringshard_internal.partition_holders_of(placed, annotation.map_name) h
		 WHERE h.old_nodes IS DISTINCT FROM h.new_nodes AND cardinality(h.old_nodes) > 0
		   AND NOT EXISTS (SELECT FROM ringshard.rebalance_progress q,
		                          LATERAL regexp_match(q.predicate, ' BETWEEN ([0-9]{1,3}) AND ([0-9]{1,3})\)$') b
		                    WHERE q.table_name = moving_ranges.table_name AND q.state <> 'pending'
		                      AND h.partition BETWEEN b[1]::integer AND b[2]::integer)
		 ORDER BY h.partition;
	END IF;
END
$$;
COMMENT ON FUNCTION ringshard_internal.moving_ranges(regclass) IS
	'the token ranges or partitions of a table whose replica set changed since it was placed and whose rows are not copied yet, with their old and new replicas';

-- The plan: one row per step, with the SQL predicate that selects its rows.
CREATE FUNCTION ringshard.rebalance_plan(table_name regclass)
	RETURNS TABLE (step integer, predicate text, fraction float8, old_nodes text[], new_nodes text[],
				   source text, targets text[], deletes text[])
	LANGUAGE ringshard_plpgsql STABLE PARALLEL UNSAFE STRICT SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	annotation ringshard.distributed_tables := ringshard_internal.table_annotation(table_name);
	placed json;
BEGIN
	IF annotation.table_name IS NULL THEN
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
		       ringshard_internal.ring_step_predicate(annotation.key_column, m.range_start, m.range_end),
		       m.fraction, m.old_nodes, m.new_nodes,
		       -- copy from a node that keeps the rows if there is one: it stays busy anyway;
		       -- targets and deletes in name order, so that steps to and from the same nodes batch together
		       coalesce((SELECT o FROM unnest(m.old_nodes) WITH ORDINALITY u(o, i) WHERE o = ANY (m.new_nodes) ORDER BY i LIMIT 1),
		                m.old_nodes[1]),
		       ARRAY(SELECT n FROM unnest(m.new_nodes) n WHERE n <> ALL (m.old_nodes) ORDER BY n COLLATE "C"),
		       ARRAY(SELECT o FROM unnest(m.old_nodes) o WHERE o <> ALL (m.new_nodes) ORDER BY o COLLATE "C")
		  FROM ringshard_internal.ring_move_plan(placed->'members',
		         (placed->>'vnodes')::integer, (placed->>'replication_factor')::integer,
		         annotation.ring_name) m;
	ELSE
		RETURN QUERY
		WITH changed AS (
			SELECT h.partition, h.old_nodes, h.new_nodes,
			       h.partition - row_number() OVER (PARTITION BY h.old_nodes, h.new_nodes ORDER BY h.partition) AS run
			  FROM ringshard_internal.partition_holders_of(placed, annotation.map_name) h
			 WHERE h.old_nodes IS DISTINCT FROM h.new_nodes AND cardinality(h.old_nodes) > 0),
		     runs AS (
			SELECT min(c.partition) AS first_p, max(c.partition) AS last_p, c.old_nodes, c.new_nodes
			  FROM changed c GROUP BY c.old_nodes, c.new_nodes, c.run)
		SELECT (row_number() OVER (ORDER BY r.first_p))::integer,
		       ringshard_internal.partition_step_predicate(rebalance_plan.table_name, r.first_p, r.last_p),
		       (r.last_p - r.first_p + 1) / 256.0::float8, r.old_nodes, r.new_nodes,
		       coalesce((SELECT o FROM unnest(r.old_nodes) o WHERE o = ANY (r.new_nodes) LIMIT 1), r.old_nodes[1]),
		       ARRAY(SELECT n FROM unnest(r.new_nodes) n WHERE n <> ALL (r.old_nodes) ORDER BY n COLLATE "C"),
		       ARRAY(SELECT o FROM unnest(r.old_nodes) o WHERE o <> ALL (r.new_nodes) ORDER BY o COLLATE "C")
		  FROM runs r;
	END IF;
END
$$;
COMMENT ON FUNCTION ringshard.rebalance_plan(regclass) IS
	'the steps of moving a table from its recorded placement to the current topology: rows selected by predicate are copied from source to targets, then deleted from deletes';

-- Run one statement on one node; raise if it fails, or if its value is not
-- of the type (shape) the caller reads it as: a node that answers otherwise
-- is no node of ours, and the error names it.
CREATE FUNCTION ringshard_internal.node_value(node text, sql text, params text[] DEFAULT '{}',
                                              in_transaction boolean DEFAULT true, shape regtype DEFAULT NULL)
	RETURNS text
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	outcome record;
	readable boolean := true;
BEGIN
	SELECT * INTO outcome FROM ringshard.node_execute(ARRAY[node], sql, params, in_transaction);
	IF NOT outcome.ok THEN
		RAISE EXCEPTION 'statement failed on node "%"', node
			USING ERRCODE = 'connection_failure', DETAIL = outcome.error;
	END IF;
	IF shape IS NOT NULL THEN
		BEGIN
			EXECUTE format('SELECT $1::%s', shape) USING outcome.value;
		EXCEPTION WHEN data_exception THEN
			readable := false;
		END;
		IF outcome.value IS NULL OR NOT readable THEN
			RAISE EXCEPTION 'node "%" answered with a malformed value', node
				USING ERRCODE = 'protocol_violation',
				      DETAIL = format('%s where a value of type %s was expected.',
				                      coalesce(quote_literal(left(outcome.value, 40)), 'nothing'), shape),
				      HINT = 'Check that the address is that of a PostgreSQL server with ringshard installed.';
		END IF;
	END IF;
	RETURN outcome.value;
END
$$;
COMMENT ON FUNCTION ringshard_internal.node_value(text, text, text[], boolean, regtype) IS 'runs one statement on a node and returns its first value, or raises the node''s error (also when the value is not of the type shape)';

-- Whether a placement snapshot (placement_snapshot) lays rows out on a
-- node: a member of its ring, or assigned partitions of its map.
CREATE FUNCTION ringshard_internal.placement_holds(placed json, node text) RETURNS boolean
	LANGUAGE ringshard_sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
	SELECT EXISTS (SELECT FROM json_array_elements(coalesce(placed->'members', placed->'assignments')) x
	                WHERE x->>'node' = node);
$$;
COMMENT ON FUNCTION ringshard_internal.placement_holds(json, text) IS
	'whether a placement snapshot lays rows out on the node (a member of its ring, or assigned partitions of its map)';

-- One node's answer to node_execute or node_execute_each, checked: its
-- error raised naming the node, a value that is no count of rows refused;
-- the count (NULL only where null_ok).
CREATE FUNCTION ringshard_internal.node_count_answer(node text, ok boolean, value text, error text, null_ok boolean)
	RETURNS bigint
	LANGUAGE ringshard_plpgsql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
BEGIN
	IF NOT ok THEN
		RAISE EXCEPTION 'statement failed on node "%"', node USING ERRCODE = 'connection_failure', DETAIL = error;
	END IF;
	IF value IS NULL AND null_ok THEN
		RETURN NULL;
	END IF;
	IF value IS NULL OR value !~ '^[0-9]{1,18}$' THEN
		RAISE EXCEPTION 'node "%" answered with a malformed value', node
			USING ERRCODE = 'protocol_violation',
			      DETAIL = format('%s where a count of rows was expected.', coalesce(quote_literal(left(value, 40)), 'nothing'));
	END IF;
	RETURN value::bigint;
END
$$;
COMMENT ON FUNCTION ringshard_internal.node_count_answer(text, boolean, text, text, boolean) IS
	'one node''s answer to node_execute(_each) checked: its error raised (08006), a value that is no count refused (08P01); the count, NULL only where null_ok';

-- A statement of its own on each node, all at once, in this transaction
-- (src/admin/node_commands.c): a rebalance clears its targets, and deletes
-- the rows that left their nodes, on every node in parallel.
CREATE FUNCTION ringshard_internal.node_execute_each(nodes text[], statements text[])
	RETURNS TABLE (node text, ok boolean, value text, error text, elapsed_ms float8)
	AS 'MODULE_PATHNAME', 'ringshard_node_execute_each' LANGUAGE C VOLATILE PARALLEL UNSAFE STRICT;
COMMENT ON FUNCTION ringshard_internal.node_execute_each(text[], text[]) IS
	'runs the i-th statement on the i-th node, all in parallel, as the calling role; each node''s part commits with this transaction, in two phases';

-- node_execute_each, then every node's answer checked (node_count_answer);
-- the sum of the counts.
CREATE FUNCTION ringshard_internal.node_counts_each(nodes text[], statements text[]) RETURNS bigint
	LANGUAGE ringshard_sql VOLATILE STRICT PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
	SELECT coalesce(sum(ringshard_internal.node_count_answer(n.node, n.ok, n.value, n.error, false)), 0)::bigint
	  FROM ringshard_internal.node_execute_each(nodes, statements) n;
$$;
COMMENT ON FUNCTION ringshard_internal.node_counts_each(text[], text[]) IS
	'runs the i-th statement on the i-th node, all in parallel, in this transaction; raises a node''s error, or a value that is no count of rows; the sum of the counts';

-- Every node a plan names must still be known, with an address: its rows are
-- copied from it, to it, or deleted there.  A node that leaves its last ring
-- or map is kept until the rebalance that drains it (forget_unused_nodes);
-- this catches a catalog where one was deleted anyway, before anything moves.
CREATE FUNCTION ringshard_internal.check_rebalance_nodes(table_name regclass, nodes text[]) RETURNS void
	LANGUAGE ringshard_plpgsql STABLE PARALLEL SAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	missing text;
	unaddressed text;
BEGIN
	SELECT min(x.node) FILTER (WHERE n.node_name IS NULL), min(x.node) FILTER (WHERE n.node_name IS NOT NULL AND n.server_name IS NULL)
	  INTO missing, unaddressed
	  FROM (SELECT DISTINCT u.node FROM unnest(nodes) u(node)) x
	  LEFT JOIN ringshard.nodes n ON n.node_name = x.node;
	IF missing IS NOT NULL THEN
		RAISE EXCEPTION 'rebalance of % needs node "%", which is not in ringshard.nodes', ringshard.qualified_name(table_name), missing
			USING ERRCODE = 'object_not_in_prerequisite_state',
			      DETAIL = 'The table''s rows are laid out on it: the plan copies rows from it or deletes rows there.',
			      HINT = 'Add the node back with its address (ringshard.add_node(node, address, ring), then remove_node), then rebalance; a node leaving a ring is kept until the rebalance that moves its rows.';
	END IF;
	IF unaddressed IS NOT NULL THEN
		RAISE EXCEPTION 'rebalance of % needs node "%", which has no address', ringshard.qualified_name(table_name), unaddressed
			USING ERRCODE = 'object_not_in_prerequisite_state',
			      HINT = 'Give it one with ringshard.set_node_address().';
	END IF;
END
$$;
COMMENT ON FUNCTION ringshard_internal.check_rebalance_nodes(regclass, text[]) IS
	'raises unless every node a rebalance plan names is in ringshard.nodes with an address';

-- The token ranges of ring steps as the inclusive pairs ringshard_worker's
-- token_in_ranges and token_range_of take: each step's (start, end] as
-- [start + 1, end], a range past the top as two; per step (given with its
-- recorded predicate, which is checked first).  Pairs of distinct steps of
-- one plan do not overlap.
CREATE FUNCTION ringshard_internal.step_token_bounds(table_name regclass, steps integer[], predicates text[])
	RETURNS TABLE (step integer, lo numeric, hi numeric)
	LANGUAGE ringshard_plpgsql STABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	key_column name;
	checked text[] := ringshard_internal.checked_step_predicates(table_name, predicates);
	range_text text[];
	range_start numeric;
	range_end numeric;
BEGIN
	SELECT d.key_column INTO key_column FROM ringshard.distributed_tables d
	 WHERE d.table_name OPERATOR(pg_catalog.=) step_token_bounds.table_name;
	FOR i IN 1 .. coalesce(cardinality(steps), 0) LOOP
		range_text := ringshard_internal.ring_step_range(key_column, checked[i]);
		CONTINUE WHEN range_text IS NULL OR range_text[1] !~ '^[0-9]{1,20}$' OR range_text[2] !~ '^[0-9]{1,20}$';
		range_start := range_text[1]::numeric;
		range_end := range_text[2]::numeric;
		step := steps[i];
		IF range_start < range_end THEN
			lo := range_start + 1;
			hi := range_end;
			RETURN NEXT;
			CONTINUE;
		END IF;
		-- past the top: two pairs
		IF range_start < 18446744073709551615 THEN
			lo := range_start + 1;
			hi := 18446744073709551615;
			RETURN NEXT;
		END IF;
		lo := 0;
		hi := range_end;
		RETURN NEXT;
	END LOOP;
END
$$;
COMMENT ON FUNCTION ringshard_internal.step_token_bounds(regclass, integer[], text[]) IS
	'rebalance(): ring steps'' token ranges as the inclusive (low, high) pairs of token_in_ranges and token_range_of, each step''s predicate checked';

-- The rows each step will copy, counted on the step's source: for a ring,
-- one scan of each source for all its steps; for a map, one scan of the
-- source per 100 steps (one count per step, each with its predicate).
CREATE FUNCTION ringshard_internal.count_plan_rows(table_name regclass, plan_steps integer[], plan_sources text[],
										  plan_predicates text[])
	RETURNS TABLE (step integer, rows bigint, bytes bigint)
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	chunk record;
	answered record;
	counts bigint[];
	key_column name;
	all_steps integer[];
	all_bounds text;
BEGIN
	SELECT d.key_column INTO key_column FROM ringshard.distributed_tables d
	 WHERE d.table_name = count_plan_rows.table_name AND d.ring_name IS NOT NULL;
	IF key_column IS NOT NULL THEN
		-- A ring: every source scans its rows once, all at the same time (one
		-- statement, node_execute in parallel), one hash per row placed in the
		-- steps' token ranges (token_range_of); of each source's counts the
		-- steps it is the source of are kept (it holds copies of others too).
		-- Hash grouping: the planner guesses as many ranges as keys and would
		-- sort every row (spilling to disk); there are at most as many as steps.
		-- No JIT: its compiling costs more than it saves on one scan.
		SELECT array_agg(b.step ORDER BY b.lo),
		       '{' || string_agg(b.lo::text || ',' || b.hi::text, ',' ORDER BY b.lo) || '}'
		  INTO all_steps, all_bounds
		  FROM ringshard_internal.step_token_bounds(table_name, plan_steps, plan_predicates) b;
		IF all_steps IS NULL THEN
			RETURN;
		END IF;
		FOR answered IN
			SELECT * FROM ringshard.node_execute(
				ARRAY(SELECT DISTINCT u.source FROM unnest(plan_sources) u(source) ORDER BY 1),
				format('SET LOCAL enable_sort = off; SET LOCAL jit = off; '
				       'SELECT COALESCE(pg_catalog.string_agg(x.i || '':'' || x.c || '':'' || x.b, '',''), '''') FROM '
				       '(SELECT ringshard_worker.token_range_of(pg_catalog.ring_token(t.%I), %L::pg_catalog.ringtoken[]) AS i, '
				       'pg_catalog.count(*) AS c, pg_catalog.sum(pg_catalog.pg_column_size(t.*)) AS b '
				       'FROM %s t GROUP BY 1) x WHERE x.i IS NOT NULL',
				       key_column, all_bounds, ringshard.qualified_name(table_name)),
				'{}', false) n
			ORDER BY n.node
		LOOP
			IF NOT answered.ok THEN
				RAISE EXCEPTION 'statement failed on node "%"', answered.node
					USING ERRCODE = 'connection_failure', DETAIL = answered.error;
			END IF;
			IF answered.value IS NULL OR answered.value !~ '^([0-9]{1,9}:[0-9]{1,18}:[0-9]{1,18}(,|$))*$' THEN
				RAISE EXCEPTION 'node "%" answered a count of rows with a malformed value', answered.node
					USING ERRCODE = 'protocol_violation',
					      DETAIL = format('%s where triples of numbers were expected.',
					                      coalesce(quote_literal(left(answered.value, 40)), 'nothing'));
			END IF;
			RETURN QUERY
			SELECT st.step, coalesce(sum(split_part(a, ':', 2)::bigint), 0)::bigint,
			       coalesce(sum(split_part(a, ':', 3)::numeric), 0)::bigint
			  FROM unnest(all_steps) WITH ORDINALITY st(step, i)
			  JOIN unnest(plan_steps, plan_sources) mine(step, source)
			    ON mine.step = st.step AND mine.source = answered.node
			  LEFT JOIN unnest(string_to_array(nullif(answered.value, ''), ',')) a ON split_part(a, ':', 1)::integer = st.i
			 GROUP BY st.step;
		END LOOP;
		RETURN;
	END IF;
	FOR chunk IN
		SELECT u.source, array_agg(u.step ORDER BY u.step) AS steps, array_agg(u.predicate ORDER BY u.step) AS predicates
		  FROM (SELECT x.step, x.source, x.predicate,
		               (row_number() OVER (PARTITION BY x.source ORDER BY x.step) - 1) / 100 AS part
		          FROM unnest(plan_steps, plan_sources, plan_predicates) x(step, source, predicate)) u
		 GROUP BY u.source, u.part ORDER BY u.source, u.part
	LOOP
		-- per step its rows, then their bytes
		counts := ringshard_internal.node_value(chunk.source,
			format('SELECT ARRAY[%s] FROM %s t',
			       (SELECT string_agg(format('pg_catalog.count(*) FILTER (WHERE %1$s), '
			                                 'COALESCE(pg_catalog.sum(pg_catalog.pg_column_size(t.*)) FILTER (WHERE %1$s), 0)',
			                                 ringshard_internal.checked_step_predicate(table_name, p.predicate)), ', ' ORDER BY p.i)
			          FROM unnest(chunk.predicates) WITH ORDINALITY p(predicate, i)),
			       ringshard.qualified_name(table_name)),
			'{}', false, 'bigint[]')::bigint[];
		IF cardinality(counts) IS DISTINCT FROM 2 * cardinality(chunk.steps) THEN
			RAISE EXCEPTION 'node "%" answered a count of rows with a malformed value', chunk.source
				USING ERRCODE = 'protocol_violation',
				      DETAIL = format('%s numbers where %s were expected.', coalesce(cardinality(counts), 0), 2 * cardinality(chunk.steps));
		END IF;
		RETURN QUERY SELECT c.step, counts[2 * c.i - 1], counts[2 * c.i]
		               FROM unnest(chunk.steps) WITH ORDINALITY c(step, i);
	END LOOP;
END
$$;
COMMENT ON FUNCTION ringshard_internal.count_plan_rows(regclass, integer[], text[], text[]) IS
	'for each step of a plan (step numbers, sources, predicates), the rows it will copy and their bytes (pg_column_size of each row), counted on its source';

-- A table's plan with every step's rows to copy: for a table with an
-- unfinished rebalance, the recorded steps and their counts; otherwise the
-- steps from its placement to the current topology, counted on their
-- sources now (after checking that every node they name can be reached).
-- A JSON array of {step, source, targets, deletes, rows, bytes}.
CREATE FUNCTION ringshard_internal.rebalance_counted_plan(table_name regclass) RETURNS json
	LANGUAGE ringshard_plpgsql VOLATILE STRICT PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	planned json;
BEGIN
	IF EXISTS (SELECT FROM ringshard.rebalance_progress p WHERE p.table_name = rebalance_counted_plan.table_name) THEN
		SELECT json_agg(json_build_object('step', p.step, 'source', p.source, 'targets', p.targets,
		                                  'deletes', p.deletes, 'rows', coalesce(p.rows_total, 0),
		                                  'bytes', coalesce(p.bytes_total, 0)) ORDER BY p.step)
		  INTO planned
		  FROM ringshard.rebalance_progress p WHERE p.table_name = rebalance_counted_plan.table_name;
		RETURN coalesce(planned, '[]');
	END IF;
	SELECT json_agg(json_build_object('step', p.step, 'source', p.source, 'targets', p.targets,
	                                  'deletes', p.deletes, 'predicate', p.predicate) ORDER BY p.step)
	  INTO planned
	  FROM ringshard.rebalance_plan(table_name) p;
	planned := coalesce(planned, '[]');
	PERFORM ringshard_internal.check_rebalance_nodes(table_name,
		ARRAY(SELECT x.node FROM json_array_elements(planned) s,
		             LATERAL (SELECT s->>'source' UNION ALL SELECT json_array_elements_text(s->'targets')
		                      UNION ALL SELECT json_array_elements_text(s->'deletes')) x(node)));
	SELECT coalesce(json_agg(json_build_object('step', (s->>'step')::integer, 'source', s->'source', 'targets', s->'targets',
	                                           'deletes', s->'deletes', 'rows', c.rows, 'bytes', c.bytes) ORDER BY c.step), '[]')
	  INTO planned
	  FROM json_array_elements(planned) s
	  JOIN ringshard_internal.count_plan_rows(table_name,
	         ARRAY(SELECT (x->>'step')::integer FROM json_array_elements(planned) x),
	         ARRAY(SELECT x->>'source' FROM json_array_elements(planned) x),
	         ARRAY(SELECT x->>'predicate' FROM json_array_elements(planned) x)) c ON c.step = (s->>'step')::integer;
	RETURN planned;
END
$$;
COMMENT ON FUNCTION ringshard_internal.rebalance_counted_plan(regclass) IS
	'a table''s rebalance steps (recorded, or from its placement to the current topology) with the rows each copies and their bytes, counted on its source, as JSON';

-- Steps, rows and bytes per (source, target) pair of a counted plan.
CREATE FUNCTION ringshard_internal.summarize_rebalance(planned json)
	RETURNS TABLE (from_node text, to_node text, steps integer, rows bigint, share_pct numeric, bytes bigint, size text)
	LANGUAGE ringshard_sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
	SELECT s.source, s.target, count(*)::integer, sum(s.rows)::bigint,
	       round(100 * sum(s.rows) / nullif(sum(sum(s.rows)) OVER (), 0), 1),
	       sum(s.bytes)::bigint, pg_size_pretty(sum(s.bytes))
	  FROM (SELECT x->>'source' AS source, t.target, (x->>'rows')::bigint AS rows,
	               coalesce((x->>'bytes')::bigint, 0) AS bytes
	          FROM json_array_elements(planned) x, json_array_elements_text(x->'targets') t(target)) s
	 GROUP BY s.source, s.target ORDER BY s.source COLLATE "C", s.target COLLATE "C";
$$;
COMMENT ON FUNCTION ringshard_internal.summarize_rebalance(json) IS
	'per (source, target) pair of a counted rebalance plan: steps, rows to copy, share of the copies in per cent, their bytes (pg_column_size of the rows) and that size for reading';

-- The plan in a few lines.
CREATE FUNCTION ringshard.rebalance_plan_summary(table_name regclass)
	RETURNS TABLE (from_node text, to_node text, steps integer, rows bigint, share_pct numeric, bytes bigint, size text)
	LANGUAGE ringshard_sql VOLATILE STRICT PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
	SELECT * FROM ringshard_internal.summarize_rebalance(ringshard_internal.rebalance_counted_plan(table_name));
$$;
COMMENT ON FUNCTION ringshard.rebalance_plan_summary(regclass) IS
	'a table''s rebalance plan per (source, target) pair: steps, rows to copy (counted on the sources), share of the copies in per cent, and their size (bytes, and as pg_size_pretty gives it); the recorded plan while a rebalance is unfinished';

-- A title with the plan's steps and rows, then its summary as a small
-- table, for a NOTICE: psql prints a notice as its text, so the columns are
-- aligned here as psql aligns a result (names left, numbers right).
CREATE FUNCTION ringshard_internal.rebalance_summary_text(table_name regclass, title text) RETURNS text
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	planned json := ringshard_internal.rebalance_counted_plan(table_name);
	heading text;
	body text;
BEGIN
	SELECT format('%s: %s steps, %s rows to copy (%s)', title, count(*), coalesce(sum((x->>'rows')::bigint), 0),
	              pg_size_pretty(coalesce(sum((x->>'bytes')::bigint), 0)))
	  INTO heading FROM json_array_elements(planned) x;
	WITH s AS (SELECT r.from_node, r.to_node, r.steps::text AS steps, r.rows::text AS rows, coalesce(r.share_pct::text, '') AS share,
	                  coalesce(r.size, '') AS size
	             FROM ringshard_internal.summarize_rebalance(planned) r),
	     w AS (SELECT greatest(9, max(length(s.from_node))) AS f, greatest(7, max(length(s.to_node))) AS t,
	                  greatest(5, max(length(s.steps))) AS st, greatest(4, max(length(s.rows))) AS r,
	                  greatest(9, max(length(s.share))) AS sh, greatest(4, max(length(s.size))) AS sz FROM s)
	SELECT format(' %s | %s | %s | %s | %s | %s', rpad('from_node', w.f), rpad('to_node', w.t), rpad('steps', w.st),
	              rpad('rows', w.r), rpad('share_pct', w.sh), rpad('size', w.sz)) || E'\n' ||
	       format('-%s-+-%s-+-%s-+-%s-+-%s-+-%s-', repeat('-', w.f), repeat('-', w.t), repeat('-', w.st), repeat('-', w.r),
	              repeat('-', w.sh), repeat('-', w.sz)) || E'\n' ||
	       string_agg(format(' %s | %s | %s | %s | %s | %s', rpad(s.from_node, w.f), rpad(s.to_node, w.t), lpad(s.steps, w.st),
	                         lpad(s.rows, w.r), lpad(s.share, w.sh), lpad(s.size, w.sz)), E'\n'
	                  ORDER BY s.from_node COLLATE "C", s.to_node COLLATE "C")
	  INTO body
	  FROM s, w GROUP BY w.f, w.t, w.st, w.r, w.sh, w.sz;
	RETURN heading || coalesce(E'\n' || body, '');
END
$$;
COMMENT ON FUNCTION ringshard_internal.rebalance_summary_text(regclass, text) IS
	'the title with the plan''s steps and rows to copy, then rebalance_plan_summary() as an aligned text table (for notices)';

-- The first transaction of rebalance(): check the arguments; a dry run
-- prints the plan's summary and returns false.  A new move pushes the
-- topology, creates the table on new nodes, records the plan with every
-- step's rows counted on its source, and prints the summary; an interrupted
-- one says where it resumes.  Returns true when the caller should commit
-- and move.
CREATE FUNCTION ringshard_internal.rebalance_begin(table_name regclass, dry_run boolean, batch integer, pause_ms integer)
	RETURNS boolean
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	qualified text;
	status ringshard.rebalance_status;
BEGIN
	IF table_name IS NULL OR dry_run IS NULL OR batch IS NULL OR batch < 1 OR pause_ms IS NULL OR pause_ms < 0 THEN
		RAISE EXCEPTION 'rebalance needs a table, a positive batch and a pause of at least 0 ms'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF NOT EXISTS (SELECT FROM ringshard.distributed_tables d WHERE d.table_name = rebalance_begin.table_name) THEN
		RAISE EXCEPTION 'table % is not annotated', table_name USING ERRCODE = 'undefined_object';
	END IF;
	-- each batch runs in a transaction of its own, and runs recovery on its
	-- targets before it deletes (rebalance_finish_steps), which must see
	-- what commits while it runs
	IF NOT dry_run AND current_setting('default_transaction_isolation') <> 'read committed' THEN
		RAISE EXCEPTION 'rebalance runs its batches at isolation level READ COMMITTED, not %',
			upper(current_setting('default_transaction_isolation'))
			USING ERRCODE = 'active_sql_transaction',
			      HINT = 'SET default_transaction_isolation = ''read committed'' in the session, then call rebalance.';
	END IF;
	qualified := ringshard.qualified_name(table_name);

	IF dry_run THEN
		RAISE NOTICE '%', ringshard_internal.rebalance_summary_text(table_name,
			format('rebalance plan of %s (dry run, nothing changed)', qualified))
			USING HINT = format('ringshard.rebalance_plan(%L) lists the steps, ringshard.rebalance_plan_summary(%L) gives this table as rows.',
			                    qualified, qualified);
		RETURN false;
	END IF;

	-- one move of a table at a time, from here to rebalance_finish (across its commits)
	PERFORM ringshard_internal.hold_table_move(table_name);

	-- Queued writes are delivered to the nodes they were queued for: they
	-- must land before those nodes' rows move.
	PERFORM ringshard_internal.refuse_queued_writes(table_name, table_name::text);

	IF EXISTS (SELECT FROM ringshard.rebalance_progress p WHERE p.table_name = rebalance_begin.table_name) THEN
		-- The interrupted move may have left parts of its last transactions
		-- prepared on its nodes (a crash between a commit and its COMMIT
		-- PREPARED): recovery finishes them first, so that a batch it deleted
		-- is gone and one it copied is there before the move goes on.
		PERFORM ringshard_internal.recover_prepared_transactions_on(ARRAY(
			SELECT DISTINCT x.node FROM ringshard.rebalance_progress p, unnest(ARRAY[p.source] || p.targets || p.deletes) x(node)
			 WHERE p.table_name = rebalance_begin.table_name));
		-- Steps recorded before their rows were counted (by an older version) are counted now.
		UPDATE ringshard.rebalance_progress p SET rows_total = c.rows, bytes_total = c.bytes
		  FROM ringshard_internal.count_plan_rows(rebalance_begin.table_name,
		         ARRAY(SELECT q.step FROM ringshard.rebalance_progress q WHERE q.table_name = rebalance_begin.table_name AND q.rows_total IS NULL ORDER BY q.step),
		         ARRAY(SELECT q.source FROM ringshard.rebalance_progress q WHERE q.table_name = rebalance_begin.table_name AND q.rows_total IS NULL ORDER BY q.step),
		         ARRAY(SELECT q.predicate FROM ringshard.rebalance_progress q WHERE q.table_name = rebalance_begin.table_name AND q.rows_total IS NULL ORDER BY q.step)) c
		 WHERE p.table_name = rebalance_begin.table_name AND p.step = c.step;
		SELECT * INTO status FROM ringshard.rebalance_status s WHERE s.table_name = rebalance_begin.table_name;
		RAISE NOTICE 'rebalance of %: resuming at step % of %, rows % of % copied', qualified,
			(SELECT coalesce(min(p.step) FILTER (WHERE p.state = 'pending'), min(p.step)) FROM ringshard.rebalance_progress p
			  WHERE p.table_name = rebalance_begin.table_name AND p.state <> 'done'),
			status.steps, status.rows_done, status.rows_total;
		PERFORM ringshard_internal.rebalance_clear_targets(table_name);
		RETURN true;
	END IF;

	-- A new move: check the plan can run before anything changes.
	PERFORM ringshard_internal.check_rebalance_nodes(table_name,
		ARRAY(SELECT x.node FROM ringshard.rebalance_plan(table_name) p, unnest(ARRAY[p.source] || p.targets || p.deletes) x(node)));
	PERFORM ringshard.sync_topology();
	PERFORM ringshard.push_table_definition(table_name);
	INSERT INTO ringshard.rebalance_progress (table_name, step, predicate, source, targets, deletes, fraction)
	SELECT rebalance_begin.table_name, p.step, p.predicate, p.source, p.targets, p.deletes, p.fraction
	  FROM ringshard.rebalance_plan(table_name) p;
	UPDATE ringshard.rebalance_progress p SET rows_total = c.rows, bytes_total = c.bytes
	  FROM ringshard_internal.count_plan_rows(rebalance_begin.table_name,
	         ARRAY(SELECT q.step FROM ringshard.rebalance_progress q WHERE q.table_name = rebalance_begin.table_name ORDER BY q.step),
	         ARRAY(SELECT q.source FROM ringshard.rebalance_progress q WHERE q.table_name = rebalance_begin.table_name ORDER BY q.step),
	         ARRAY(SELECT q.predicate FROM ringshard.rebalance_progress q WHERE q.table_name = rebalance_begin.table_name ORDER BY q.step)) c
	 WHERE p.table_name = rebalance_begin.table_name AND p.step = c.step;
	RAISE NOTICE '%', ringshard_internal.rebalance_summary_text(table_name, format('rebalance of %s', qualified));
	PERFORM ringshard_internal.rebalance_clear_targets(table_name);
	RETURN true;
END
$$;
COMMENT ON FUNCTION ringshard_internal.rebalance_begin(regclass, boolean, integer, integer) IS
	'rebalance(): checks; a dry run prints the plan summary; a new move pushes the topology, records the plan with its rows counted on the sources; a move (new or resumed) clears its targets of the rows still to be copied to them; returns whether to move';

-- The steps still to do, in order.
CREATE FUNCTION ringshard_internal.rebalance_unfinished_steps(table_name regclass) RETURNS integer[]
	LANGUAGE ringshard_sql STABLE PARALLEL SAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
	SELECT coalesce(array_agg(p.step ORDER BY p.step), '{}') FROM ringshard.rebalance_progress p
	 WHERE p.table_name = rebalance_unfinished_steps.table_name AND p.state <> 'done';
$$;
COMMENT ON FUNCTION ringshard_internal.rebalance_unfinished_steps(regclass) IS 'rebalance(): the steps not done yet, in order';

-- The data path: rows node to node by COPY (src/operations/move_rows.c).
CREATE FUNCTION ringshard_internal.copy_step_rows(table_name regclass, source text, targets text[], condition text)
	RETURNS bigint
	AS 'MODULE_PATHNAME', 'ringshard_copy_step_rows' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION ringshard_internal.copy_step_rows(regclass, text, text[], text) IS
	'rebalance(): the rows of a table matching a condition, copied from source onto every target by COPY, node to node, each target''s copy committed there before this returns; the rows each target got';

-- One move of a table at a time (src/operations/move_rows.c): a session
-- hold from rebalance_begin to rebalance_finish, across the move's commits.
CREATE FUNCTION ringshard_internal.hold_table_move(table_name regclass) RETURNS void
	AS 'MODULE_PATHNAME', 'ringshard_hold_table_move' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION ringshard_internal.hold_table_move(regclass) IS
	'rebalance(): this session moves the table''s rows; another session''s rebalance of it fails (55006) until this one ends or its session does';
CREATE FUNCTION ringshard_internal.release_table_move(table_name regclass) RETURNS void
	AS 'MODULE_PATHNAME', 'ringshard_release_table_move' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION ringshard_internal.release_table_move(regclass) IS
	'rebalance(): the end of this session''s move of the table (hold_table_move)';

-- A move goes on only once no part of a committed transaction (one with a
-- record) is still prepared on these nodes after recovery; else it stops
-- with "rebalance of <table> cannot confirm that <what>", and the hint
-- begins with what it left done.  Such a part's rows are invisible there (a
-- copy's) or still visible (a delete's) until recovery commits it: its
-- COMMIT PREPARED was not confirmed, because the node, or this server, went
-- away in between.  Recovery runs on the nodes before each look (its own
-- errors aside: a part of someone else's may fail there); a part that was
-- prepared at the first look and still is at the last (about 2 s later) is
-- in doubt.  A writer's part between its commit and its COMMIT PREPARED is
-- not there long.  (The record of a part is kept until recovery has seen it
-- committed.)
CREATE FUNCTION ringshard_internal.confirm_no_parts_in_doubt(table_name regclass, nodes text[], what text, done text)
	RETURNS void
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	node text;
	seen text[];
	stuck text[];
	in_doubt text;
BEGIN
	FOR attempt IN 1 .. 5 LOOP
		PERFORM ringshard_internal.recover_prepared_transactions_on(nodes);
		seen := '{}';
		FOREACH node IN ARRAY nodes LOOP
			seen := seen || ARRAY(SELECT node || ' ' || g FROM unnest(ringshard_internal.committed_parts_prepared_on(node)) g);
		END LOOP;
		stuck := CASE WHEN attempt = 1 THEN seen ELSE ARRAY(SELECT unnest(stuck) INTERSECT SELECT unnest(seen)) END;
		EXIT WHEN cardinality(stuck) = 0;
		IF attempt < 5 THEN
			PERFORM pg_sleep(0.2 * attempt);
		END IF;
	END LOOP;
	in_doubt := (SELECT string_agg(DISTINCT format('"%s"', split_part(x, ' ', 1)), ', ') FROM unnest(stuck) x);
	IF in_doubt IS NOT NULL THEN
		RAISE EXCEPTION 'rebalance of % cannot confirm that %', table_name, what
			USING ERRCODE = 'object_not_in_prerequisite_state',
			      DETAIL = format('Committed transactions are still prepared on node %s, and recovery did not finish them.', in_doubt),
			      HINT = done || '  See ringshard.recover_prepared_transactions(); call rebalance again once it '
			             'finishes them: it resumes.';
	END IF;
END
$$;
COMMENT ON FUNCTION ringshard_internal.confirm_no_parts_in_doubt(regclass, text[], text, text) IS
	'rebalance(): fails (55000) if, after recovery, a part of a committed transaction stays prepared on one of the nodes';

-- Before the first batch of a move (new or resumed): on every target, the
-- rows of the steps still to be copied to it are deleted, one statement per
-- target, on all the targets at once.  A target is not among the old
-- replicas of what it gains, so no write through the coordinator puts those
-- rows there before their copy (and verify_table and repair_table refuse a
-- table with a move unfinished; one move of a table runs at a time:
-- hold_table_move): what it holds of them is left from an older layout, or
-- from a copy whose batch failed: a copy commits on its targets before its
-- batch is marked copied (copy_step_rows), so a batch that fails after that
-- leaves its rows there with its steps pending.  So each batch's copy finds
-- its rows absent, and a target is scanned once per call, not per batch.
-- The clearing commits with the first transaction of the move;
-- rebalance_confirm_cleared checks in the next that no target still holds it
-- prepared.
CREATE FUNCTION ringshard_internal.rebalance_clear_targets(table_name regclass) RETURNS bigint
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	targets text[];
	statements text[];
BEGIN
	SELECT coalesce(array_agg(x.node ORDER BY x.node), '{}'),
	       coalesce(array_agg(format('WITH gone AS (DELETE FROM %s t WHERE %s RETURNING 1) SELECT pg_catalog.count(*) FROM gone',
	                                 ringshard.qualified_name(table_name), ringshard_internal.steps_condition(table_name, x.steps))
	                          ORDER BY x.node), '{}')
	  INTO targets, statements
	  FROM (SELECT t.node, array_agg(p.step ORDER BY p.step) AS steps
	          FROM ringshard.rebalance_progress p, unnest(p.targets) t(node)
	         WHERE p.table_name = rebalance_clear_targets.table_name AND p.state = 'pending'
	         GROUP BY t.node) x;
	RETURN ringshard_internal.node_counts_each(targets, statements);
END
$$;
COMMENT ON FUNCTION ringshard_internal.rebalance_clear_targets(regclass) IS
	'rebalance(): deletes on every target the rows of the steps still to be copied to it (left from an older layout), one statement per target, all at once, before the first batch; the rows deleted';

-- After the transaction that cleared the targets (rebalance_clear_targets):
-- its part on a target whose COMMIT PREPARED was not confirmed would still
-- hold the old rows there, visible, and the rows being copied would wait on
-- it (a unique key) or be read beside them once copied.
CREATE FUNCTION ringshard_internal.rebalance_confirm_cleared(table_name regclass) RETURNS void
	LANGUAGE ringshard_sql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
	SELECT ringshard_internal.confirm_no_parts_in_doubt(table_name,
		ARRAY(SELECT DISTINCT t.node FROM ringshard.rebalance_progress p, unnest(p.targets) t(node)
		       WHERE p.table_name = rebalance_confirm_cleared.table_name AND p.state = 'pending' ORDER BY 1),
		'its targets are cleared', 'Nothing was copied.');
$$;
COMMENT ON FUNCTION ringshard_internal.rebalance_confirm_cleared(regclass) IS
	'rebalance(): after the clearing of the targets, fails if a part of it is still prepared on a target after recovery';

-- The rows of several recorded steps of a table as one condition on a
-- node's row t, evaluated once per row: for a ring, their token ranges as
-- the inclusive pairs of ringshard_worker.token_in_ranges (one hash per
-- row, a binary search); for a map, the partition in a list.  Every step's
-- recorded predicate is checked first (checked_step_predicate).
CREATE FUNCTION ringshard_internal.steps_condition(table_name regclass, steps integer[]) RETURNS text
	LANGUAGE ringshard_plpgsql STABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	annotation ringshard.distributed_tables := ringshard_internal.table_annotation(table_name);
	recorded integer[];
	predicates text[];
	bounds text;
	partitions text;
BEGIN
	SELECT array_agg(p.step ORDER BY p.step), array_agg(p.predicate ORDER BY p.step) INTO recorded, predicates
	  FROM ringshard.rebalance_progress p
	 WHERE p.table_name = steps_condition.table_name AND p.step = ANY (steps);
	IF predicates IS NULL OR cardinality(predicates) <> cardinality(steps) THEN
		RAISE EXCEPTION 'rebalance of % has no steps %', table_name, steps USING ERRCODE = 'undefined_object';
	END IF;
	IF annotation.ring_name IS NOT NULL THEN
		-- (step_token_bounds checks each predicate)
		SELECT string_agg(b.lo::text || ',' || b.hi::text, ',' ORDER BY b.lo) INTO bounds
		  FROM ringshard_internal.step_token_bounds(steps_condition.table_name, recorded, predicates) b;
		RETURN format('ringshard_worker.token_in_ranges(pg_catalog.ring_token(t.%I), %L::pg_catalog.ringtoken[])',
		              annotation.key_column, '{' || bounds || '}');
	END IF;
	predicates := ringshard_internal.checked_step_predicates(steps_condition.table_name, predicates);
	SELECT string_agg(g::text, ',' ORDER BY g) INTO partitions
	  FROM unnest(predicates) p,
	       LATERAL regexp_match(p, ' BETWEEN ([0-9]{1,3}) AND ([0-9]{1,3})\)$') m,
	       LATERAL generate_series(m[1]::integer, m[2]::integer) g;
	RETURN format('%s OPERATOR(pg_catalog.=) ANY (%L::pg_catalog.int4[])',
	              regexp_replace(predicates[1], '^\((.*) BETWEEN [0-9]{1,3} AND [0-9]{1,3}\)$', '\1'),
	              '{' || partitions || '}');
END
$$;
COMMENT ON FUNCTION ringshard_internal.steps_condition(regclass, integer[]) IS
	'rebalance(): the rows of several recorded steps of a table as one condition on a node''s row t (token ranges for a ring, a partition list for a map), each step''s predicate checked';

-- The unfinished steps in batches moved together: steps that share a
-- source, targets and nodes to delete from, in order, up to about batch
-- rows each (as counted on the sources when the move began), at least one
-- step each.  Batches that leave the same nodes come one after another, so
-- that their rows are deleted there together soon after the last of them
-- is copied (rebalance_finish_steps).
CREATE FUNCTION ringshard_internal.rebalance_batches(table_name regclass, batch integer) RETURNS SETOF integer[]
	LANGUAGE ringshard_plpgsql STABLE PARALLEL SAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	item record;
	current integer[] := '{}';
	current_rows bigint := 0;
	current_group text;
BEGIN
	FOR item IN
		SELECT p.step, p.deletes::text || '<' || p.source || '>' || p.targets::text AS grp, coalesce(p.rows_total, 0) AS rows
		  FROM ringshard.rebalance_progress p
		 WHERE p.table_name = rebalance_batches.table_name AND p.state <> 'done'
		 ORDER BY p.deletes::text, p.source, p.targets::text, p.step
	LOOP
		IF cardinality(current) > 0 AND (item.grp IS DISTINCT FROM current_group OR current_rows + item.rows > batch) THEN
			RETURN NEXT current;
			current := '{}';
			current_rows := 0;
		END IF;
		current := current || item.step;
		current_rows := current_rows + item.rows;
		current_group := item.grp;
	END LOOP;
	IF cardinality(current) > 0 THEN
		RETURN NEXT current;
	END IF;
END
$$;
COMMENT ON FUNCTION ringshard_internal.rebalance_batches(regclass, integer) IS
	'rebalance(): the unfinished steps in batches moved together: the same source, targets and deletes, up to about batch rows each, those that leave the same nodes one after another';

-- Copy the pending steps of a batch in one transaction: their rows from
-- the source onto the targets (which hold none of them:
-- rebalance_clear_targets), one scan of the source for all of them, checked
-- by the counts of both ends; the steps marked copied in the same
-- transaction, from which on their keys route to their new replicas
-- (moving_ranges).  The copy holds the table against writers (not readers)
-- until the targets commit.
CREATE FUNCTION ringshard_internal.rebalance_copy_steps(table_name regclass, steps integer[]) RETURNS bigint
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	pending integer[];
	source text;
	targets text[];
	counted bigint;
	copied bigint := 0;
BEGIN
	SELECT array_agg(p.step ORDER BY p.step), min(p.source), min(p.targets::text)::text[], coalesce(sum(p.rows_total), 0)
	  INTO pending, source, targets, counted
	  FROM ringshard.rebalance_progress p
	 WHERE p.table_name = rebalance_copy_steps.table_name AND p.step = ANY (steps) AND p.state = 'pending';
	IF pending IS NULL THEN
		RETURN 0;
	END IF;
	IF (SELECT count(DISTINCT (p.source, p.targets)) FROM ringshard.rebalance_progress p
	     WHERE p.table_name = rebalance_copy_steps.table_name AND p.step = ANY (pending)) > 1 THEN
		RAISE EXCEPTION 'steps copied together must share their source and targets' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	-- a write queued for one of them would be replayed after the copy read or replaced its rows
	IF EXISTS (SELECT FROM ringshard.write_queue q
	            WHERE q.table_name = rebalance_copy_steps.table_name AND q.node_name = ANY (source || targets)) THEN
		RAISE EXCEPTION 'writes of % are queued for node "%"', table_name,
			(SELECT min(q.node_name) FROM ringshard.write_queue q
			  WHERE q.table_name = rebalance_copy_steps.table_name AND q.node_name = ANY (source || targets))
			USING ERRCODE = 'object_not_in_prerequisite_state',
			      DETAIL = 'The node was down; its queue is replayed before rows are copied from or to it.',
			      HINT = 'Call rebalance again once ringshard.write_queue_status shows the queue delivered.';
	END IF;
	IF cardinality(targets) > 0 THEN
		copied := ringshard_internal.copy_step_rows(table_name, source, targets,
		                                            ringshard_internal.steps_condition(table_name, pending));
	END IF;
	-- each step counts the rows counted on its source when the move began;
	-- the first also what the copy found beyond them (rows written since)
	UPDATE ringshard.rebalance_progress p
	   SET rows_copied = coalesce(p.rows_total, 0) + CASE WHEN p.step = pending[1] THEN copied - counted ELSE 0 END,
	       rows_total = coalesce(p.rows_total, 0) + CASE WHEN p.step = pending[1] THEN copied - counted ELSE 0 END,
	       state = 'copied', updated_at = now()
	 WHERE p.table_name = rebalance_copy_steps.table_name AND p.step = ANY (pending) AND p.state = 'pending';
	RETURN copied;
END
$$;
COMMENT ON FUNCTION ringshard_internal.rebalance_copy_steps(regclass, integer[]) IS
	'rebalance(): copies a batch''s pending steps (one source and targets) by one COPY per target, checks them there and marks them copied; the rows copied';

CREATE FUNCTION ringshard_internal.wait_for_readers(table_name regclass) RETURNS void
	AS 'MODULE_PATHNAME', 'ringshard_wait_for_readers' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION ringshard_internal.wait_for_readers(regclass) IS
	'rebalance(): waits until every transaction holding a lock on the table now has ended (statements that may still route by a batch''s state before its copy), without blocking new ones';

-- The statements of rebalance_finish_steps, one per node in order, each
-- answering the rows it removed: on a node to truncate (truncatable, with
-- the rows counted there, kept) TRUNCATE, which waits at most 5 s for its
-- lock; on the others the delete of the steps' rows.
CREATE FUNCTION ringshard_internal.rebalance_delete_statements(table_name regclass, steps integer[], nodes text[],
                                                               truncatable text[], kept bigint[])
	RETURNS text[]
	LANGUAGE ringshard_sql STABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
	SELECT coalesce(array_agg(CASE WHEN x.n = ANY (truncatable)
	                               THEN format('SET LOCAL lock_timeout = ''5s''; TRUNCATE %s; SELECT %s::pg_catalog.int8',
	                                           q.qualified, kept[array_position(truncatable, x.n)])
	                               ELSE format('WITH gone AS (DELETE FROM %s t WHERE %s RETURNING 1) SELECT pg_catalog.count(*) FROM gone',
	                                           q.qualified, q.condition)
	                          END ORDER BY x.i), '{}')
	  FROM (SELECT ringshard.qualified_name(table_name) AS qualified,
	               ringshard_internal.steps_condition(table_name, steps) AS condition) q,
	       LATERAL unnest(nodes) WITH ORDINALITY x(n, i);
$$;
COMMENT ON FUNCTION ringshard_internal.rebalance_delete_statements(regclass, integer[], text[], text[], bigint[]) IS
	'rebalance(): per node in order, the statement that removes the steps'' rows there (TRUNCATE on the nodes to truncate, with the rows counted there; else a delete of the steps'' rows), each answering the rows it removed';

-- Delete the copied steps' rows from the nodes that left their replica
-- sets, once the last batch that leaves those nodes is copied: on each of
-- them one statement for all those steps, on all of them at once (a scan of
-- a node for every batch would cost scans of the whole table per batch),
-- after one wait for readers.  Every row of the steps is on every target
-- now; until the delete, the copies left behind are on no replica the
-- coordinator reads or writes (the steps are copied: their keys route to
-- their new replicas).  A node the table leaves altogether (in none of the
-- ring's members or the map's assignments it is laid out on now: a node
-- removed), once no batch still to copy reads from it or leaves it, has its
-- table there emptied whole by TRUNCATE (its space freed at once) when that
-- is sure to remove the move's rows only (see the probe below); else, and
-- when a lock there is not free within 5 s, the steps' rows are deleted
-- there as anywhere.  A batch whose nodes still owe batches to copy returns
-- at once.
CREATE FUNCTION ringshard_internal.rebalance_finish_steps(table_name regclass, steps integer[]) RETURNS void
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	qualified text := ringshard.qualified_name(table_name);
	copied integer[];
	left_nodes text[];
	targets text[];
	placed json;
	departed text[];
	truncatable text[] := '{}';
	kept bigint[] := '{}';
	failure text;
	failure_detail text;
	answered record;
	removed bigint;
BEGIN
	SELECT array_agg(p.step ORDER BY p.step), min(p.deletes::text)::text[] INTO copied, left_nodes
	  FROM ringshard.rebalance_progress p
	 WHERE p.table_name = rebalance_finish_steps.table_name AND p.step = ANY (steps) AND p.state = 'copied';
	IF copied IS NULL THEN
		RETURN;
	END IF;
	IF (SELECT count(DISTINCT p.deletes) FROM ringshard.rebalance_progress p
	     WHERE p.table_name = rebalance_finish_steps.table_name AND p.step = ANY (copied)) > 1 THEN
		RAISE EXCEPTION 'steps finished together must share the nodes they leave' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	-- a later batch leaves the same nodes: their rows are deleted with its own
	IF EXISTS (SELECT FROM ringshard.rebalance_progress p
	            WHERE p.table_name = rebalance_finish_steps.table_name AND p.state = 'pending'
	              AND p.deletes = left_nodes) THEN
		RETURN;
	END IF;
	-- ... and this one deletes those of the batches before it too
	copied := ARRAY(SELECT p.step FROM ringshard.rebalance_progress p
	                 WHERE p.table_name = rebalance_finish_steps.table_name AND p.state = 'copied'
	                   AND p.deletes = left_nodes
	                 ORDER BY p.step);
	-- a statement that began before the copy committed may still read these rows there
	PERFORM ringshard_internal.wait_for_readers(table_name);
	-- The copy is committed here, but its parts on the targets may still be
	-- prepared (confirm_no_parts_in_doubt): those rows are invisible on the targets
	-- until recovery commits them, so deleting them where they left would
	-- leave them nowhere to be read.
	targets := ARRAY(SELECT DISTINCT unnest(p.targets) FROM ringshard.rebalance_progress p
	                  WHERE p.table_name = rebalance_finish_steps.table_name AND p.step = ANY (copied) ORDER BY 1);
	PERFORM ringshard_internal.confirm_no_parts_in_doubt(table_name, targets,
		format('steps %s are committed on their new replicas', copied), 'Nothing was deleted.');
	-- Of the nodes left, those the table leaves altogether, once no batch
	-- still to copy reads from them or leaves them.
	placed := ringshard_internal.placement_snapshot(table_name);
	departed := ARRAY(SELECT n FROM unnest(left_nodes) n
	                   WHERE NOT ringshard_internal.placement_holds(placed, n)
	                     AND NOT EXISTS (SELECT FROM ringshard.rebalance_progress p
	                                      WHERE p.table_name = rebalance_finish_steps.table_name AND p.state = 'pending'
	                                        AND (p.source = n OR n = ANY (p.deletes)))
	                   ORDER BY 1);
	IF cardinality(departed) > 0 THEN
		-- An earlier batch's delete still prepared there would hold the
		-- truncate back: recovery tries to finish it first (else the
		-- truncate's lock times out, and the rows are deleted instead).
		PERFORM ringshard_internal.recover_prepared_transactions_on(departed);
		BEGIN
			-- Its table there may be truncated when it is a plain table
			-- without children or row security, the role may truncate it, no
			-- foreign key refers to it, and every row of it belongs to a step
			-- that left the node (a row outside them, one verify_table calls
			-- misplaced, is no row of the move: it stays).  The table is held
			-- against writers first, so that what is counted is what the
			-- truncate removes.  The answer is its rows, or NULL.
			FOR answered IN
				SELECT * FROM ringshard_internal.node_execute_each(departed, ARRAY(
					SELECT format('SET LOCAL lock_timeout = ''5s''; LOCK TABLE %1$s IN EXCLUSIVE MODE; '
					              'SELECT CASE WHEN c.relkind OPERATOR(pg_catalog.=) ''r'' AND NOT c.relrowsecurity '
					              'AND NOT EXISTS (SELECT FROM pg_catalog.pg_inherits i WHERE i.inhparent OPERATOR(pg_catalog.=) c.oid) '
					              'AND pg_catalog.has_table_privilege(c.oid, ''TRUNCATE'') '
					              'AND NOT EXISTS (SELECT FROM pg_catalog.pg_constraint f WHERE f.confrelid OPERATOR(pg_catalog.=) c.oid '
					              'AND f.contype OPERATOR(pg_catalog.=) ''f'') '
					              'THEN (SELECT CASE WHEN pg_catalog.count(*) FILTER (WHERE (%2$s) IS NOT TRUE) OPERATOR(pg_catalog.=) 0 '
					              'THEN pg_catalog.count(*) END FROM %1$s t) END '
					              'FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) %1$L::pg_catalog.regclass',
					              qualified, ringshard_internal.steps_condition(table_name, ARRAY(
					                SELECT p.step FROM ringshard.rebalance_progress p
					                 WHERE p.table_name = rebalance_finish_steps.table_name AND d = ANY (p.deletes)
					                 ORDER BY p.step)))
					  FROM unnest(departed) WITH ORDINALITY x(d, i) ORDER BY x.i)) n
				ORDER BY n.node
			LOOP
				IF ringshard_internal.node_count_answer(answered.node, answered.ok, answered.value, answered.error, true) IS NOT NULL THEN
					truncatable := truncatable || answered.node;
					kept := kept || answered.value::bigint;
				END IF;
			END LOOP;
			IF cardinality(truncatable) > 0 THEN
				removed := ringshard_internal.node_counts_each(left_nodes,
					ringshard_internal.rebalance_delete_statements(table_name, copied, left_nodes, truncatable, kept));
			END IF;
		EXCEPTION WHEN connection_failure THEN
			-- A node's table was not free within 5 s (a reader, a dump or a
			-- vacuum there) or the node failed: every node's part of the
			-- attempt is rolled back to its savepoint, and the rows of the
			-- move are deleted as anywhere, below (a node that fails fails
			-- again there).
			GET STACKED DIAGNOSTICS failure = MESSAGE_TEXT, failure_detail = PG_EXCEPTION_DETAIL;
			RAISE NOTICE 'rebalance of %: the rows of steps % are deleted from node %, not truncated there', qualified,
				copied, array_to_string(departed, ', ')
				USING DETAIL = failure || coalesce(': ' || nullif(failure_detail, ''), '');
			removed := NULL;
		END;
	END IF;
	IF removed IS NULL THEN
		removed := ringshard_internal.node_counts_each(left_nodes,
			ringshard_internal.rebalance_delete_statements(table_name, copied, left_nodes, '{}', '{}'));
	END IF;
	UPDATE ringshard.rebalance_progress p
	   SET state = 'done', rows_deleted = CASE WHEN p.step = copied[1] THEN removed ELSE 0 END, updated_at = now()
	 WHERE p.table_name = rebalance_finish_steps.table_name AND p.step = ANY (copied);
END
$$;
COMMENT ON FUNCTION ringshard_internal.rebalance_finish_steps(regclass, integer[]) IS
	'rebalance(): once no batch that leaves the same nodes is left to copy, deletes the copied steps'' rows from the nodes that left their replica sets (one statement per node for all of them, all nodes at once; a node the table leaves altogether emptied by TRUNCATE when every row there is one of the move''s and the role may) and marks them done';

-- A progress line, at most every ringshard.rebalance_notice_interval, after
-- a batch: a move of hundreds of steps says how far it is (steps copied, rows
-- copied) without a line per step, and never says the same thing twice.
-- Returns when the last line was printed, and that line.
CREATE FUNCTION ringshard_internal.rebalance_report_progress(table_name regclass, step integer, last_notice timestamptz,
															 last_line text, OUT printed_at timestamptz, OUT line text)
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	status ringshard.rebalance_status;
	-- the steps copied: their rows are where they belong (those they left are
	-- deleted with the last batch that leaves the same nodes)
	steps_copied bigint;
BEGIN
	printed_at := last_notice;
	line := last_line;
	-- after every batch: ringshard.operation_progress, which other sessions read
	SELECT * INTO status FROM ringshard.rebalance_status s WHERE s.table_name = rebalance_report_progress.table_name;
	IF status.table_name IS NULL THEN
		RETURN;			-- nothing to move, or nothing left
	END IF;
	SELECT count(*) INTO steps_copied FROM ringshard.rebalance_progress p
	 WHERE p.table_name = rebalance_report_progress.table_name AND p.state <> 'pending';
	PERFORM ringshard_internal.progress_report('rebalance', table_name,
		format('step %s of %s (%s)', steps_copied, status.steps, status.phase), status.rows_done, status.rows_total);
	IF clock_timestamp() < last_notice + coalesce(current_setting('ringshard.rebalance_notice_interval', true), '5s')::interval THEN
		RETURN;
	END IF;
	IF format('step %s of %s, rows %s of %s (%s %%)', steps_copied, status.steps, status.rows_done, status.rows_total,
	          status.percent) IS NOT DISTINCT FROM last_line THEN
		RETURN;
	END IF;
	line := format('step %s of %s, rows %s of %s (%s %%)', steps_copied, status.steps, status.rows_done, status.rows_total,
	               status.percent);
	-- the rate and the time left are said, not compared: a line says something new only with new rows
	RAISE NOTICE 'rebalance of %: %', ringshard.qualified_name(table_name), line ||
		CASE WHEN status.rows_per_second > 0 AND status.time_left IS NOT NULL
		     THEN format(', %s rows/s, about %s left', status.rows_per_second, status.time_left) ELSE '' END;
	printed_at := clock_timestamp();
END
$$;
COMMENT ON FUNCTION ringshard_internal.rebalance_report_progress(regclass, integer, timestamptz, text) IS
	'rebalance(): a NOTICE "step k of N, rows x of y" if ringshard.rebalance_notice_interval has passed since the last and it says something new; returns the time and text of the last';

-- The last transaction of rebalance(): the table is laid out under the
-- current topology now.  Nodes kept only for its rows are forgotten.
CREATE FUNCTION ringshard_internal.rebalance_finish(table_name regclass) RETURNS void
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	totals record;
	known text[] := ARRAY(SELECT n.node_name FROM ringshard.nodes n);
	forgotten text;
	placed json := ringshard_internal.placement_snapshot(table_name);
BEGIN
	-- a copy left behind on a node that may be a replica again later must not outlive the move's record
	IF EXISTS (SELECT FROM ringshard.rebalance_progress p
	            WHERE p.table_name = rebalance_finish.table_name AND p.state <> 'done') THEN
		RAISE EXCEPTION 'rebalance of % has steps not done: %', table_name,
			(SELECT array_agg(p.step ORDER BY p.step) FROM ringshard.rebalance_progress p
			  WHERE p.table_name = rebalance_finish.table_name AND p.state <> 'done')
			USING ERRCODE = 'internal_error', HINT = 'Call rebalance again: it resumes.';
	END IF;
	-- A delete whose COMMIT PREPARED was not confirmed leaves its rows
	-- visible where they left; once the move's record is gone a fan-out at
	-- R = 1 reads every node of the table unfiltered and would count them
	-- twice.  (A node the table leaves altogether is read no more.)
	PERFORM ringshard_internal.confirm_no_parts_in_doubt(table_name, ARRAY(
		SELECT DISTINCT d.node FROM ringshard.rebalance_progress p, unnest(p.deletes) d(node)
		 WHERE p.table_name = rebalance_finish.table_name
		   AND ringshard_internal.placement_holds(placed, d.node)
		 ORDER BY 1),
		'its deletes are committed on the nodes the rows left', 'The rows are on their new replicas.');
	-- A delete or truncate on a node the table leaves altogether whose
	-- COMMIT PREPARED was not confirmed holds its locks there until recovery
	-- finishes it: recovery runs there once more while the node is known (a
	-- node it cannot reach is left as it is; its rows are read no more).
	PERFORM ringshard_internal.recover_prepared_transactions_on(ARRAY(
		SELECT DISTINCT d.node FROM ringshard.rebalance_progress p, unnest(p.deletes) d(node)
		 WHERE p.table_name = rebalance_finish.table_name
		   AND NOT ringshard_internal.placement_holds(placed, d.node)
		 ORDER BY 1));
	SELECT count(*) AS steps, coalesce(sum(p.rows_copied), 0) AS copied, coalesce(sum(p.rows_deleted), 0) AS deleted
	  INTO totals FROM ringshard.rebalance_progress p WHERE p.table_name = rebalance_finish.table_name;
	INSERT INTO ringshard.placements (table_name, snapshot) VALUES (table_name, placed)
	    ON CONFLICT ON CONSTRAINT placements_pkey DO UPDATE SET snapshot = EXCLUDED.snapshot, placed_at = now();
	DELETE FROM ringshard.rebalance_progress p WHERE p.table_name = rebalance_finish.table_name;
	PERFORM ringshard_internal.forget_unused_nodes();
	PERFORM ringshard_internal.release_table_move(table_name);
	SELECT string_agg(format('"%s"', k.node_name), ', ' ORDER BY k.node_name COLLATE "C") INTO forgotten
	  FROM unnest(known) k(node_name)
	 WHERE NOT EXISTS (SELECT FROM ringshard.nodes n WHERE n.node_name = k.node_name);
	RAISE NOTICE 'rebalance of % complete: % steps, % rows copied, % deleted%', ringshard.qualified_name(table_name),
		totals.steps, totals.copied, totals.deleted,
		CASE WHEN forgotten IS NOT NULL
		     THEN format('; forgotten, in no ring or map and holding no table''s rows any more: %s', forgotten) ELSE '' END;
END
$$;
COMMENT ON FUNCTION ringshard_internal.rebalance_finish(regclass) IS
	'rebalance(): records the table''s new placement, clears its progress and forgets the nodes nothing needs any more';

-- The move.  A procedure that commits cannot carry a SET clause (a COMMIT
-- would have to undo it), so this body looks nothing up on the caller's
-- search_path: every function is schema-qualified, types are pg_catalog's,
-- the two comparisons name pg_catalog's operators, and all the work (and
-- every relation) is in the helper functions above, which pin search_path.
CREATE PROCEDURE ringshard.rebalance(table_name regclass, dry_run boolean DEFAULT false,
									 batch integer DEFAULT 50000, pause_ms integer DEFAULT 0)
	LANGUAGE plpgsql AS $$
DECLARE
	steps pg_catalog.int4[];
	last_notice pg_catalog.timestamptz;
	last_line pg_catalog.text;
BEGIN
	IF NOT ringshard_internal.rebalance_begin(table_name, dry_run, batch, pause_ms) THEN
		RETURN;
	END IF;
	COMMIT;
	PERFORM ringshard_internal.rebalance_confirm_cleared(table_name);
	-- on ringshard.operation_progress from the start: the first batch's rows count as they are copied
	SELECT * INTO last_notice, last_line
	  FROM ringshard_internal.rebalance_report_progress(table_name, NULL, pg_catalog.clock_timestamp(), NULL);
	-- Batches of steps that share a source, targets and the nodes they
	-- leave: copied in one transaction (one COPY per target for all of
	-- them); after the last batch that leaves some nodes, the rows of all
	-- of those are deleted there in another.  (A FOR loop over a query may
	-- commit: its rows are read first.)
	FOR steps IN SELECT b FROM ringshard_internal.rebalance_batches(table_name, batch) b LOOP
		PERFORM ringshard_internal.rebalance_copy_steps(table_name, steps);
		COMMIT;
		PERFORM ringshard_internal.rebalance_finish_steps(table_name, steps);
		COMMIT;
		SELECT * INTO last_notice, last_line
		  FROM ringshard_internal.rebalance_report_progress(table_name, steps[1], last_notice, last_line);
		IF pause_ms OPERATOR(pg_catalog.>) 0 THEN
			PERFORM pg_catalog.pg_sleep(pause_ms OPERATOR(pg_catalog./) 1000.0);
		END IF;
	END LOOP;
	PERFORM ringshard_internal.rebalance_finish(table_name);
	COMMIT;
	PERFORM ringshard_internal.progress_done();
END
$$;
COMMENT ON PROCEDURE ringshard.rebalance(regclass, boolean, integer, integer) IS
	'moves the rows whose replica set changed since the table was placed: batches of steps with the same nodes, each copied by one COPY per target node to node and verified, committed; once the last batch that leaves some nodes is copied, the rows of all of them deleted there, on all of them at once (a node the table leaves altogether emptied by TRUNCATE where allowed); one move of a table at a time; resumable; prints the plan summary first and progress every ringshard.rebalance_notice_interval; dry_run prints the summary only';

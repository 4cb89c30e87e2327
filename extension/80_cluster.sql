-- Cluster mode.  The coordinator keeps the topology; workers are ordinary
-- PostgreSQL servers with this extension, a copy of the topology (pushed by
-- sync_topology, with a version number) and their own name, so that each
-- worker can refuse rows that are not its own.

CREATE TABLE ringshard.cluster_state (
	singleton boolean PRIMARY KEY DEFAULT true CONSTRAINT one_row CHECK (singleton),
	local_node text,
	topology_version bigint NOT NULL DEFAULT 0
);
INSERT INTO ringshard.cluster_state DEFAULT VALUES;
COMMENT ON TABLE ringshard.cluster_state IS
	'this server''s role: on a worker its node name; everywhere the version of the topology it holds';
CREATE TRIGGER invalidate_topology_cache AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
	ON ringshard.cluster_state FOR EACH STATEMENT EXECUTE FUNCTION ringshard.invalidate_topology_cache();
-- A restored row updates the one CREATE EXTENSION made.
CREATE FUNCTION ringshard.merge_cluster_state() RETURNS trigger
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
BEGIN
	IF EXISTS (SELECT FROM ringshard.cluster_state) THEN
		UPDATE ringshard.cluster_state SET (local_node, topology_version) = (NEW.local_node, NEW.topology_version);
		-- columns added by later pieces of the script are restored too
		UPDATE ringshard.cluster_state s SET change_counter = (to_jsonb(NEW)->>'change_counter')::bigint
		 WHERE to_jsonb(NEW) ? 'change_counter';
		UPDATE ringshard.cluster_state s SET coordinator_id = (to_jsonb(NEW)->>'coordinator_id')::uuid
		 WHERE to_jsonb(NEW) ? 'coordinator_id';
		RETURN NULL;
	END IF;
	RETURN NEW;
END
$$;
COMMENT ON FUNCTION ringshard.merge_cluster_state() IS 'trigger: a restored cluster_state row updates the existing one';
CREATE TRIGGER merge_cluster_state BEFORE INSERT ON ringshard.cluster_state
	FOR EACH ROW EXECUTE FUNCTION ringshard.merge_cluster_state();
SELECT pg_catalog.pg_extension_config_dump('ringshard.cluster_state', '');

CREATE FUNCTION ringshard.node_execute(nodes text[], sql text, params text[] DEFAULT '{}',
									   in_transaction boolean DEFAULT true)
	RETURNS TABLE (node text, ok boolean, value text, error text, elapsed_ms float8)
	AS 'MODULE_PATHNAME', 'ringshard_node_execute' LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION ringshard.node_execute(text[], text, text[], boolean) IS
	'runs one statement on several nodes in parallel (libpq, asynchronous), inside remote transactions that commit with this one unless in_transaction is false';

CREATE FUNCTION ringshard.node_health()
	RETURNS TABLE (node text, reachable boolean, rtt_ms float8, server_version text,
				   database_size bigint, connections integer, last_error text)
	AS 'MODULE_PATHNAME', 'ringshard_node_health' LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION ringshard.node_health() IS
	'probes every node in parallel: reachable, round trip, server version, database size, connections, last error; a dead node costs at most ringshard.node_timeout';

CREATE FUNCTION ringshard.addressed_nodes() RETURNS text[]
	AS 'MODULE_PATHNAME', 'ringshard_addressed_nodes' LANGUAGE C STABLE STRICT;
COMMENT ON FUNCTION ringshard.addressed_nodes() IS 'the nodes that have an address (the addresses themselves stay hidden)';

CREATE FUNCTION ringshard.node_table_rows(table_name regclass)
	RETURNS TABLE (node text, rows bigint, error text)
	AS 'MODULE_PATHNAME', 'ringshard_node_table_rows' LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION ringshard.node_table_rows(regclass) IS
	'rows of a distributed table on each node (copies included): the seed''s loaded-vectors per node';

-- The topology as JSON, for workers.  Addresses stay on the coordinator.
CREATE FUNCTION ringshard.topology_snapshot() RETURNS json
	LANGUAGE sql STABLE SET search_path = pg_catalog, ringshard AS $$
	SELECT json_build_object(
		'rings', (SELECT coalesce(json_agg(r), '[]') FROM ringshard.rings r),
		'nodes', (SELECT coalesce(json_agg(json_build_object('node_name', n.node_name, 'is_up', n.is_up)), '[]') FROM ringshard.nodes n),
		'ring_members', (SELECT coalesce(json_agg(m), '[]') FROM ringshard.ring_members m),
		'partition_maps', (SELECT coalesce(json_agg(p), '[]') FROM ringshard.partition_maps p),
		'partition_assignments', (SELECT coalesce(json_agg(a), '[]') FROM ringshard.partition_assignments a));
$$;
COMMENT ON FUNCTION ringshard.topology_snapshot() IS 'rings, nodes (without addresses), members, maps and assignments as JSON';

-- On a worker: replace the topology with the coordinator's, if newer.
CREATE FUNCTION ringshard.apply_topology(topology json, local_node text, version bigint) RETURNS bigint
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
DECLARE
	held bigint;
BEGIN
	IF topology IS NULL OR local_node IS NULL OR version IS NULL THEN
		RAISE EXCEPTION 'topology, local node and version must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF json_typeof(topology) <> 'object'
	   OR EXISTS (SELECT FROM unnest(ARRAY['rings', 'nodes', 'ring_members', 'partition_maps', 'partition_assignments']) k
	               WHERE json_typeof(topology -> k) IS DISTINCT FROM 'array') THEN
		RAISE EXCEPTION 'a topology is a JSON object with the arrays rings, nodes, ring_members, partition_maps and partition_assignments'
			USING ERRCODE = 'invalid_parameter_value', HINT = 'It comes from ringshard.topology_snapshot() on the coordinator.';
	END IF;
	SELECT s.topology_version INTO held FROM ringshard.cluster_state s FOR UPDATE;
	IF version <= held THEN
		RAISE EXCEPTION 'topology version % is not newer than version % held here', version, held
			USING ERRCODE = 'object_not_in_prerequisite_state',
			      HINT = 'Another coordinator session synced first; sync again.';
	END IF;
	INSERT INTO ringshard.rings SELECT * FROM json_populate_recordset(NULL::ringshard.rings, topology->'rings')
		ON CONFLICT (ring_name) DO UPDATE SET algorithm = EXCLUDED.algorithm, vnodes = EXCLUDED.vnodes,
		                                      replication_factor = EXCLUDED.replication_factor;
	INSERT INTO ringshard.partition_maps SELECT * FROM json_populate_recordset(NULL::ringshard.partition_maps, topology->'partition_maps')
		ON CONFLICT DO NOTHING;
	INSERT INTO ringshard.nodes (node_name, is_up)
	SELECT n.node_name, n.is_up FROM json_populate_recordset(NULL::ringshard.nodes, topology->'nodes') n
		ON CONFLICT (node_name) DO UPDATE SET is_up = EXCLUDED.is_up;
	DELETE FROM ringshard.ring_members;
	INSERT INTO ringshard.ring_members SELECT * FROM json_populate_recordset(NULL::ringshard.ring_members, topology->'ring_members');
	DELETE FROM ringshard.partition_assignments;
	INSERT INTO ringshard.partition_assignments
	SELECT * FROM json_populate_recordset(NULL::ringshard.partition_assignments, topology->'partition_assignments');
	DELETE FROM ringshard.rings r
	 WHERE r.ring_name NOT IN (SELECT x.ring_name FROM json_populate_recordset(NULL::ringshard.rings, topology->'rings') x);
	DELETE FROM ringshard.partition_maps p
	 WHERE p.map_name NOT IN (SELECT x.map_name FROM json_populate_recordset(NULL::ringshard.partition_maps, topology->'partition_maps') x);
	DELETE FROM ringshard.nodes n
	 WHERE n.node_name NOT IN (SELECT x.node_name FROM json_populate_recordset(NULL::ringshard.nodes, topology->'nodes') x);
	UPDATE ringshard.cluster_state SET local_node = apply_topology.local_node, topology_version = version;
	RETURN version;
END
$$;
COMMENT ON FUNCTION ringshard.apply_topology(json, text, bigint) IS
	'on a worker: takes the coordinator''s topology and this worker''s node name, refusing a version not newer than the one held';

CREATE FUNCTION ringshard.sync_topology() RETURNS TABLE (node text, version bigint)
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
DECLARE
	snapshot json := ringshard.topology_snapshot();
	target text;
	new_version bigint;
	outcome record;
BEGIN
	UPDATE ringshard.cluster_state SET topology_version = topology_version + 1
	RETURNING topology_version INTO new_version;
	FOR target IN SELECT n.node_name FROM ringshard.nodes n WHERE n.address IS NOT NULL ORDER BY n.node_name COLLATE "C" LOOP
		SELECT * INTO outcome FROM ringshard.node_execute(ARRAY[target],
			'SELECT ringshard.apply_topology($1::json, $2, $3::bigint)',
			ARRAY[snapshot::text, target, new_version::text]);
		IF NOT outcome.ok THEN
			RAISE EXCEPTION 'could not sync the topology to node "%"', target
				USING ERRCODE = 'connection_failure', DETAIL = outcome.error,
				      HINT = 'Nothing was changed anywhere; fix the node and sync again.';
		END IF;
		node := target;
		version := new_version;
		RETURN NEXT;
	END LOOP;
END
$$;
COMMENT ON FUNCTION ringshard.sync_topology() IS
	'pushes the topology, with a new version number, to every node with an address, all or nothing (the remote transactions commit with this one)';

-- On a worker: whether this node is the chosen reader of a row: the first
-- of its replicas not excluded by the coordinator.
CREATE FUNCTION ringshard.reads_here(row_value record, excluded text[]) RETURNS boolean
	AS 'MODULE_PATHNAME', 'ringshard_reads_here' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard.reads_here(record, text[]) IS
	'on a worker: true if this node is the first replica of the row outside the excluded nodes (so a fan-out reads each row once)';

-- On a worker: refuse rows this node does not hold under its topology.
CREATE FUNCTION ringshard.reject_misrouted_rows() RETURNS trigger
	AS 'MODULE_PATHNAME', 'ringshard_reject_misrouted_rows' LANGUAGE C;
COMMENT ON FUNCTION ringshard.reject_misrouted_rows() IS
	'trigger on a worker''s distributed table: a row this node does not hold under its topology is an error';

-- On a worker: take a distributed table's definition and annotation.
CREATE FUNCTION ringshard.adopt_distributed_table(table_name text, columns json, key_column name,
												  ring text, map text, keyspace text, keyspace_column name)
	RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
DECLARE
	relid regclass := to_regclass(table_name);
	mismatch text;
BEGIN
	IF relid IS NULL THEN
		EXECUTE format('CREATE TABLE %s (%s)', table_name,
			(SELECT string_agg(format('%I %s', c->>'name', c->>'type'), ', ') FROM json_array_elements(columns) c));
		relid := to_regclass(table_name);
	ELSE
		SELECT string_agg(format('%s %s', coalesce(want.name, have.name), coalesce(want.type, '(missing)')), ', ') INTO mismatch
		  FROM (SELECT c->>'name' AS name, c->>'type' AS type FROM json_array_elements(columns) c) want
		  FULL JOIN (SELECT a.attname::text AS name, format_type(a.atttypid, a.atttypmod) AS type
		               FROM pg_attribute a WHERE a.attrelid = relid AND a.attnum > 0 AND NOT a.attisdropped) have
		    ON have.name = want.name AND have.type = want.type
		 WHERE want.name IS NULL OR have.name IS NULL;
		IF mismatch IS NOT NULL THEN
			RAISE EXCEPTION 'table % on this node does not match the coordinator''s definition', table_name
				USING ERRCODE = 'datatype_mismatch', DETAIL = format('Differing columns: %s.', mismatch);
		END IF;
	END IF;
	DELETE FROM ringshard.distributed_tables d WHERE d.table_name = relid;
	INSERT INTO ringshard.distributed_tables (table_name, key_column, key_attnum, ring_name, map_name, keyspace, keyspace_column)
	VALUES (relid, key_column, 0, nullif(ring, ''), nullif(map, ''), nullif(keyspace, ''), nullif(keyspace_column, ''));
	IF EXISTS (SELECT FROM pg_trigger t WHERE t.tgrelid = relid AND t.tgname = 'ringshard_reject_misrouted_rows') THEN
		EXECUTE format('DROP TRIGGER ringshard_reject_misrouted_rows ON %s', relid);
	END IF;
	EXECUTE format('CREATE TRIGGER ringshard_reject_misrouted_rows BEFORE INSERT OR UPDATE ON %s
	                FOR EACH ROW EXECUTE FUNCTION ringshard.reject_misrouted_rows()', relid);
END
$$;
COMMENT ON FUNCTION ringshard.adopt_distributed_table(text, json, name, text, text, text, name) IS
	'on a worker: creates the table (or checks that its columns match) and annotates it, with the trigger that refuses misrouted rows';

-- Create (or check) a distributed table on every node with an address.
CREATE FUNCTION ringshard.push_table_definition(table_name regclass) RETURNS TABLE (node text, ok boolean)
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
DECLARE
	annotation ringshard.distributed_tables;
	columns json;
	target text;
	outcome record;
BEGIN
	SELECT * INTO annotation FROM ringshard.distributed_tables d WHERE d.table_name = push_table_definition.table_name;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'table % is not annotated', table_name
			USING ERRCODE = 'undefined_object',
			      HINT = 'Annotate it first with ringshard.distribute_table() or ringshard.distribute_table_by_partition().';
	END IF;
	SELECT json_agg(json_build_object('name', a.attname, 'type', format_type(a.atttypid, a.atttypmod)) ORDER BY a.attnum)
	  INTO columns
	  FROM pg_attribute a WHERE a.attrelid = table_name AND a.attnum > 0 AND NOT a.attisdropped;
	FOR target IN SELECT n.node_name FROM ringshard.nodes n WHERE n.address IS NOT NULL ORDER BY n.node_name COLLATE "C" LOOP
		SELECT * INTO outcome FROM ringshard.node_execute(ARRAY[target],
			'SELECT ringshard.adopt_distributed_table($1, $2::json, $3, $4, $5, $6, $7)',
			ARRAY[table_name::text, columns::text, annotation.key_column::text,
			      coalesce(annotation.ring_name, ''), coalesce(annotation.map_name, ''),
			      coalesce(annotation.keyspace, ''), coalesce(annotation.keyspace_column::text, '')]);
		IF NOT outcome.ok THEN
			RAISE EXCEPTION 'could not create table % on node "%"', table_name, target
				USING ERRCODE = 'connection_failure', DETAIL = outcome.error;
		END IF;
		node := target;
		ok := true;
		RETURN NEXT;
	END LOOP;
END
$$;
COMMENT ON FUNCTION ringshard.push_table_definition(regclass) IS
	'creates an annotated table on every node with an address, or checks that its definition there matches';

CREATE FUNCTION ringshard.create_distributed_table(table_name regclass) RETURNS TABLE (node text, ok boolean)
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
BEGIN
	RETURN QUERY SELECT * FROM ringshard.push_table_definition(table_name);
	IF EXISTS (SELECT FROM pg_trigger t WHERE t.tgrelid = table_name AND t.tgname = 'ringshard_route_write') THEN
		EXECUTE format('DROP TRIGGER ringshard_route_write ON %s', table_name);
	END IF;
	EXECUTE format('CREATE TRIGGER ringshard_route_write BEFORE INSERT ON %s
	                FOR EACH ROW EXECUTE FUNCTION ringshard.route_write()', table_name);
	-- Rows are laid out under the current topology from now on.
	EXECUTE 'INSERT INTO ringshard.placements (table_name, snapshot) VALUES ($1, ringshard.placement_snapshot($1))
	         ON CONFLICT (table_name) DO UPDATE SET snapshot = EXCLUDED.snapshot, placed_at = pg_catalog.now()'
		USING table_name;
END
$$;
COMMENT ON FUNCTION ringshard.create_distributed_table(regclass) IS
	'creates an annotated table on every node (or checks its definition there), and routes inserts into it on this coordinator to the replicas';

CREATE FUNCTION ringshard.route_write() RETURNS trigger
	AS 'MODULE_PATHNAME', 'ringshard_route_write' LANGUAGE C;
COMMENT ON FUNCTION ringshard.route_write() IS
	'trigger on a coordinator''s distributed table: sends each inserted row to all of its replicas, stores nothing locally';

CREATE FUNCTION ringshard.cluster_get(row_type anyelement, key text, keyspace text DEFAULT NULL)
	RETURNS SETOF anyelement
	AS 'MODULE_PATHNAME', 'ringshard_cluster_get' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION ringshard.cluster_get(anyelement, text, text) IS
	'rows of a distributed table with this key (pass NULL::table), read from one healthy replica at random, failing over to the next';

CREATE FUNCTION ringshard.cluster_fanout(row_type anyelement, where_clause text DEFAULT NULL,
										 score_column name DEFAULT NULL, k integer DEFAULT NULL,
										 allow_partial boolean DEFAULT false)
	RETURNS SETOF anyelement
	AS 'MODULE_PATHNAME', 'ringshard_cluster_fanout' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION ringshard.cluster_fanout(anyelement, text, name, integer, boolean) IS
	'runs a filter on every node in parallel, each range read once; with score_column and k, each node returns its top k and they are merged by score descending; allow_partial accepts missing nodes';

CREATE FUNCTION ringshard.last_fanout_missing() RETURNS text[]
	AS 'MODULE_PATHNAME', 'ringshard_last_fanout_missing' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION ringshard.last_fanout_missing() IS 'the nodes the session''s last fan-out could not read';

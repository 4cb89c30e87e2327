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
	ON ringshard.cluster_state FOR EACH STATEMENT EXECUTE FUNCTION ringshard_internal.invalidate_topology_cache();
-- A restored row updates the one CREATE EXTENSION made.
CREATE FUNCTION ringshard_internal.merge_cluster_state() RETURNS trigger
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
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
COMMENT ON FUNCTION ringshard_internal.merge_cluster_state() IS 'trigger: a restored cluster_state row updates the existing one';
CREATE TRIGGER merge_cluster_state BEFORE INSERT ON ringshard.cluster_state
	FOR EACH ROW EXECUTE FUNCTION ringshard_internal.merge_cluster_state();
SELECT pg_catalog.pg_extension_config_dump('ringshard.cluster_state', '');

CREATE FUNCTION ringshard.node_execute(nodes text[], sql text, params text[] DEFAULT '{}',
									   in_transaction boolean DEFAULT true)
	RETURNS TABLE (node text, ok boolean, value text, error text, elapsed_ms float8)
	AS 'MODULE_PATHNAME', 'ringshard_node_execute' LANGUAGE C VOLATILE PARALLEL UNSAFE STRICT;
COMMENT ON FUNCTION ringshard.node_execute(text[], text, text[], boolean) IS
	'runs one statement on several nodes in parallel, as the calling role; in the transaction, the nodes'' parts commit with this one in two phases';

CREATE FUNCTION ringshard.node_health()
	RETURNS TABLE (node text, reachable boolean, rtt_ms float8, server_version text,
				   database_size text, database_bytes bigint, connections integer, two_phase_commit boolean, role text, host text,
				   last_error text)
	AS 'MODULE_PATHNAME', 'ringshard_node_health_with_role' LANGUAGE C VOLATILE PARALLEL UNSAFE STRICT;
COMMENT ON FUNCTION ringshard.node_health() IS
	'probes every node in parallel as the calling role: reachable, round trip, version, database size (as pg_size_pretty shows it, and in bytes), connections, whether it takes two-phase commits, primary or standby, the host reached (of a multi-host address), the role''s last error there';

CREATE FUNCTION ringshard.addressed_nodes() RETURNS text[]
	AS 'MODULE_PATHNAME', 'ringshard_addressed_nodes' LANGUAGE C STABLE PARALLEL UNSAFE STRICT;
COMMENT ON FUNCTION ringshard.addressed_nodes() IS 'the nodes that have an address (a foreign server)';

CREATE FUNCTION ringshard.node_table_rows(table_name regclass)
	RETURNS TABLE (node text, rows bigint, error text)
	AS 'MODULE_PATHNAME', 'ringshard_node_table_rows' LANGUAGE C VOLATILE PARALLEL UNSAFE STRICT;
COMMENT ON FUNCTION ringshard.node_table_rows(regclass) IS
	'rows of a distributed table on each node (copies included), counted as the calling role';

-- The topology as JSON, for workers.  Addresses stay on the coordinator.
CREATE FUNCTION ringshard_internal.topology_snapshot() RETURNS json
	LANGUAGE ringshard_sql STABLE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
	SELECT json_build_object(
		'rings', (SELECT coalesce(json_agg(r), '[]') FROM ringshard.rings r),
		'nodes', (SELECT coalesce(json_agg(json_build_object('node_name', n.node_name, 'is_up', n.is_up)), '[]') FROM ringshard.nodes n),
		'ring_members', (SELECT coalesce(json_agg(m), '[]') FROM ringshard.ring_members m),
		'partition_maps', (SELECT coalesce(json_agg(p), '[]') FROM ringshard.partition_maps p),
		'partition_assignments', (SELECT coalesce(json_agg(a), '[]') FROM ringshard.partition_assignments a));
$$;
COMMENT ON FUNCTION ringshard_internal.topology_snapshot() IS 'rings, nodes (without addresses), members, maps and assignments as JSON';

-- On a worker: replace the topology with the coordinator's, if newer.
CREATE FUNCTION ringshard_worker.apply_topology(topology json, local_node text, version bigint) RETURNS bigint
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
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
			USING ERRCODE = 'invalid_parameter_value', HINT = 'It comes from ringshard_internal.topology_snapshot() on the coordinator.';
	END IF;
	SELECT s.topology_version INTO held FROM ringshard.cluster_state s FOR UPDATE;
	-- The coordinator serializes its syncs; an equal version is a retry of one
	-- that did not commit there, so taking it again converges.
	IF version < held THEN
		RAISE EXCEPTION 'topology version % is older than version % held here', version, held
			USING ERRCODE = 'object_not_in_prerequisite_state',
			      HINT = 'This node was synced by a coordinator with a newer topology.';
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
COMMENT ON FUNCTION ringshard_worker.apply_topology(json, text, bigint) IS
	'on a worker: takes the coordinator''s topology and this worker''s node name, refusing a version older than the one held (an equal one is a retry)';

CREATE FUNCTION ringshard.sync_topology() RETURNS TABLE (node text, version bigint)
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	snapshot json := ringshard_internal.topology_snapshot();
	targets text[] := ringshard.addressed_nodes();
	new_version bigint;
	failed record;
	missing record;
	skipped text[] := '{}';
BEGIN
	-- every node must be able to take part in two-phase commit: say so now, not at the first write
	SELECT * INTO failed FROM ringshard.node_execute(targets,
		'SELECT pg_catalog.current_setting(''max_prepared_transactions'')::pg_catalog.int4', '{}', false) x
	 WHERE CASE WHEN NOT x.ok THEN true
	            WHEN x.value ~ '^[0-9]{1,9}$' THEN x.value::integer = 0
	            ELSE true END	-- an answer that is no count is no node of ours
	 LIMIT 1;
	IF FOUND THEN
		RAISE EXCEPTION 'node "%" cannot take the topology', failed.node
			USING ERRCODE = CASE WHEN NOT failed.ok THEN 'connection_failure'
			                     WHEN failed.value ~ '^[0-9]{1,9}$' THEN 'object_not_in_prerequisite_state'
			                     ELSE 'protocol_violation' END,
			      DETAIL = coalesce(failed.error,
			                        CASE WHEN failed.value ~ '^[0-9]{1,9}$' THEN 'Its max_prepared_transactions is 0.'
			                             ELSE format('It answered %s to a question about max_prepared_transactions.',
			                                         coalesce(quote_literal(left(failed.value, 40)), 'nothing')) END),
			      HINT = CASE WHEN failed.ok THEN 'Set max_prepared_transactions on every node and restart it.'
			                  ELSE 'Nothing was changed anywhere; fix the node and sync again.' END;
	END IF;
	UPDATE ringshard.cluster_state SET topology_version = topology_version + 1
	RETURNING topology_version INTO new_version;
	-- each node's part commits with this transaction, in two phases
	FOREACH node IN ARRAY targets LOOP
		SELECT * INTO failed FROM ringshard.node_execute(ARRAY[node],
			'SELECT ringshard_worker.apply_topology($1::pg_catalog.json, $2, $3::pg_catalog.int8)',
			ARRAY[snapshot::text, node, new_version::text]) x;
		IF NOT failed.ok THEN
			RAISE EXCEPTION 'could not sync the topology to node "%"', node
				USING ERRCODE = 'connection_failure', DETAIL = failed.error,
				      HINT = 'Nothing was changed anywhere; fix the node and sync again.';
		END IF;
		-- apply_topology answers the version it now holds: anything else is no node of ours
		IF failed.value IS DISTINCT FROM new_version::text THEN
			RAISE EXCEPTION 'node "%" did not confirm topology version %', node, new_version
				USING ERRCODE = 'protocol_violation',
				      DETAIL = format('It answered %s.', coalesce(quote_literal(left(failed.value, 40)), 'nothing')),
				      HINT = 'Nothing was changed anywhere; check that the address is that of a PostgreSQL server with ringshard installed.';
		END IF;
		version := new_version;
		RETURN NEXT;
	END LOOP;
	-- A node that joined a ring or map gets its distributed tables now, with
	-- this transaction: a write routed to it before the rebalance finds the
	-- table instead of failing.  A node's table belongs to the role that
	-- distributes it, so only the caller's own tables are pushed; the others
	-- are named, with the command their owner runs.
	FOR missing IN
		-- its owner exactly: a node's table belongs to the role that
		-- distributes it (a member, even a superuser, would create it as
		-- itself, or be refused a table another role owns there)
		SELECT d.table_name, c.relowner OPERATOR(pg_catalog.=) (SELECT r.oid FROM pg_catalog.pg_roles r
		                                                        WHERE r.rolname OPERATOR(pg_catalog.=) current_user) AS own
		  FROM ringshard.distributed_tables d JOIN pg_catalog.pg_class c ON c.oid = d.table_name::pg_catalog.oid
		 WHERE c.relkind = 'f'
		 ORDER BY d.table_name::pg_catalog.oid
	LOOP
		IF missing.own THEN
			PERFORM ringshard.push_table_definition(missing.table_name);
		ELSE
			skipped := skipped || ringshard.qualified_name(missing.table_name);
		END IF;
	END LOOP;
	IF cardinality(skipped) > 0 THEN
		RAISE NOTICE 'the definitions of % distributed table(s) of other roles were not pushed: %',
			cardinality(skipped), array_to_string(skipped, ', ')
			USING HINT = 'A node that lacks one gets it from SELECT ringshard.push_table_definition(''<table>''); run by its owner, or from CALL ringshard.rebalance(''<table>'').';
	END IF;
END
$$;
COMMENT ON FUNCTION ringshard.sync_topology() IS
	'pushes the topology, with a new version number, to every node with an address, and creates the distributed tables on nodes that lack them: all or nothing (two-phase commit)';

-- On a worker: whether this node is the chosen reader of a row: the first
-- of its replicas not excluded by the coordinator.
CREATE FUNCTION ringshard_worker.reads_here(table_name regclass, key "any", excluded text[], topology_version bigint)
	RETURNS boolean
	AS 'MODULE_PATHNAME', 'ringshard_reads_here_by_key' LANGUAGE C STABLE PARALLEL SAFE;
CREATE FUNCTION ringshard_worker.reads_here(table_name regclass, key "any", keyspace "any", excluded text[],
									 topology_version bigint)
	RETURNS boolean
	AS 'MODULE_PATHNAME', 'ringshard_reads_here_by_key' LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION ringshard_worker.reads_here(regclass, "any", text[], bigint) IS
	'on a worker: true if this node is the first replica of the key outside the excluded nodes (so a fan-out reads each row once); errors if the node holds another topology version (NULL: no check)';
COMMENT ON FUNCTION ringshard_worker.reads_here(regclass, "any", "any", text[], bigint) IS
	'the same for a table placed by a partition map whose keyspace is a column';

-- On a worker: which of a row's replicas this node is, so that the
-- coordinator can tell that a change reached the same rows on every replica.
CREATE FUNCTION ringshard_worker.replica_slot(table_name regclass, key "any", excluded text[], topology_version bigint)
	RETURNS integer
	AS 'MODULE_PATHNAME', 'ringshard_replica_slot_by_key' LANGUAGE C STABLE PARALLEL SAFE;
CREATE FUNCTION ringshard_worker.replica_slot(table_name regclass, key "any", keyspace "any", excluded text[],
									   topology_version bigint)
	RETURNS integer
	AS 'MODULE_PATHNAME', 'ringshard_replica_slot_by_key' LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION ringshard_worker.replica_slot(regclass, "any", text[], bigint) IS
	'on a worker: 100 times the number of the key''s replicas outside the excluded nodes plus this node''s rank among them (0 first), NULL if it is not one; errors if the node holds another topology version (NULL: no check)';
COMMENT ON FUNCTION ringshard_worker.replica_slot(regclass, "any", "any", text[], bigint) IS
	'the same for a table placed by a partition map whose keyspace is a column';

-- On a worker: whether a ring token lies in one of the ranges (pairs of
-- inclusive bounds, sorted) a fan-out gives: the rows this node serves.
CREATE FUNCTION ringshard_worker.token_in_ranges(token ringtoken, ranges ringtoken[]) RETURNS boolean
	AS 'MODULE_PATHNAME', 'ringshard_token_in_ranges' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard_worker.token_in_ranges(ringtoken, ringtoken[]) IS
	'on a worker: true if low <= token <= high for one of the (low, high) pairs of ranges, which are sorted and do not overlap; a fan-out''s filter for the rows a node serves';

-- On a worker: which of the ranges a ring token lies in, for counting the
-- rows of many rebalance steps in one scan.
CREATE FUNCTION ringshard_worker.token_range_of(token ringtoken, ranges ringtoken[]) RETURNS integer
	AS 'MODULE_PATHNAME', 'ringshard_token_range_of' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard_worker.token_range_of(ringtoken, ringtoken[]) IS
	'on a worker: the number (from 1) of the (low, high) pair of ranges, sorted and not overlapping, that holds the token, or NULL; rebalance counts many steps'' rows in one scan with it';

-- On a worker: refuse rows this node does not hold under its topology.
CREATE FUNCTION ringshard_worker.reject_misrouted_rows() RETURNS trigger
	AS 'MODULE_PATHNAME', 'ringshard_reject_misrouted_rows' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION ringshard_worker.reject_misrouted_rows() IS
	'trigger on a worker''s distributed table: a row this node does not hold under its topology is an error';

-- On a worker: the rows of a write sent with the commit were all stored,
-- else the node's transaction fails before its PREPARE or COMMIT runs.
CREATE FUNCTION ringshard_worker.expect_stored_rows(stored bigint, expected bigint) RETURNS bigint
	AS 'MODULE_PATHNAME', 'ringshard_expect_stored_rows' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION ringshard_worker.expect_stored_rows(bigint, bigint) IS
	'on a worker: the stored count if it equals the expected one, else an error; the coordinator sends it with the last rows of an autocommit INSERT, so a node that stored other rows fails before the commit that follows in the same string';

-- On a worker: take a distributed table's definition and annotation.  The
-- table is created from the coordinator's SQL (with its constraints and
-- indexes) if it does not exist yet; it runs as the calling role.
CREATE FUNCTION ringshard_internal.adopt_distributed_table(table_name text, create_sql text, extra_sql text[],
												  key_column name, ring text, map text, keyspace text,
												  keyspace_column name)
	RETURNS void
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	relid regclass := to_regclass(table_name);
	statement text;
	me oid := (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) current_user);
	schema_owner oid;
	schema_name text := (pg_catalog.parse_ident(table_name))[1];
BEGIN
	-- Created only if missing: CREATE SCHEMA IF NOT EXISTS would need the
	-- right to create schemas even when the schema is there.
	IF pg_catalog.to_regnamespace(pg_catalog.quote_ident(schema_name)) IS NULL THEN
		EXECUTE pg_catalog.format('CREATE SCHEMA %I', schema_name);
	END IF;
	-- The schema the coordinator's SQL created or found: its owner may drop
	-- or replace what is in it, so it must be trusted: this role, a
	-- superuser, or the database owner's public schema.
	SELECT n.nspowner INTO schema_owner FROM pg_catalog.pg_namespace n
	 WHERE n.oid OPERATOR(pg_catalog.=) (SELECT c.relnamespace FROM pg_catalog.pg_class c
	                                      WHERE c.oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass(table_name))
	    OR (relid IS NULL AND n.nspname OPERATOR(pg_catalog.=) schema_name);
	IF schema_owner IS NOT NULL AND schema_owner OPERATOR(pg_catalog.<>) me
	   AND NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.oid OPERATOR(pg_catalog.=) schema_owner)
	   AND NOT (schema_owner OPERATOR(pg_catalog.=) 'pg_database_owner'::pg_catalog.regrole
	            AND (SELECT d.datdba OPERATOR(pg_catalog.=) me OR r.rolsuper
	                   FROM pg_catalog.pg_database d JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) d.datdba
	                  WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())) THEN
		RAISE EXCEPTION 'schema of % on this node belongs to role %, which is not trusted with a distributed table', table_name,
			(SELECT r.rolname FROM pg_catalog.pg_roles r WHERE r.oid OPERATOR(pg_catalog.=) schema_owner)
			USING ERRCODE = 'insufficient_privilege',
			      DETAIL = 'Its owner could drop or replace the table that other roles write through the coordinator.',
			      HINT = 'Use a schema owned by the role that distributes the table, or by a superuser.';
	END IF;
	IF relid IS NULL THEN
		EXECUTE create_sql;
		FOREACH statement IN ARRAY coalesce(extra_sql, '{}') LOOP
			EXECUTE statement;
		END LOOP;
		relid := to_regclass(table_name);
	ELSE
		-- A table already there is adopted only if it is this role's own plain
		-- table with nothing of anybody else's on it: another role's triggers,
		-- rules or policies would run with the rights of every role that
		-- writes through the coordinator.
		IF (SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) relid) OPERATOR(pg_catalog.<>) me
		   OR (SELECT c.relkind FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) relid) OPERATOR(pg_catalog.<>) 'r' THEN
			RAISE EXCEPTION 'table % exists on this node and is not a table of role %', table_name, current_user
				USING ERRCODE = 'insufficient_privilege',
				      DETAIL = 'A distributed table on a node belongs to the role that distributes it.',
				      HINT = 'Drop or rename the node''s table (its owner or a superuser may), then try again.';
		END IF;
		IF EXISTS (SELECT FROM pg_catalog.pg_trigger t WHERE t.tgrelid OPERATOR(pg_catalog.=) relid AND NOT t.tgisinternal
		                                                 AND t.tgname OPERATOR(pg_catalog.<>) 'ringshard_reject_misrouted_rows')
		   OR EXISTS (SELECT FROM pg_catalog.pg_rewrite w WHERE w.ev_class OPERATOR(pg_catalog.=) relid)
		   OR EXISTS (SELECT FROM pg_catalog.pg_policy p WHERE p.polrelid OPERATOR(pg_catalog.=) relid) THEN
			RAISE EXCEPTION 'table % exists on this node with triggers, rules or policies of its own', table_name
				USING ERRCODE = 'object_not_in_prerequisite_state',
				      DETAIL = 'They would run for every write the coordinator sends.',
				      HINT = 'Drop them on the node, or drop the node''s table, then try again.';
		END IF;
	END IF;
	-- The ring or map comes with the topology the coordinator pushes.
	IF nullif(ring, '') IS NOT NULL AND NOT EXISTS (SELECT FROM ringshard.rings r WHERE r.ring_name = ring) THEN
		RAISE EXCEPTION 'this node does not know ring "%" yet', ring
			USING ERRCODE = 'object_not_in_prerequisite_state',
			      DETAIL = 'The ring was created on the coordinator after its topology was last pushed to the nodes.',
			      HINT = 'Run SELECT * FROM ringshard.sync_topology(); on the coordinator, then distribute the table again.';
	END IF;
	IF nullif(map, '') IS NOT NULL AND NOT EXISTS (SELECT FROM ringshard.partition_maps m WHERE m.map_name = map) THEN
		RAISE EXCEPTION 'this node does not know partition map "%" yet', map
			USING ERRCODE = 'object_not_in_prerequisite_state',
			      DETAIL = 'The map was created on the coordinator after its topology was last pushed to the nodes.',
			      HINT = 'Run SELECT * FROM ringshard.sync_topology(); on the coordinator, then distribute the table again.';
	END IF;
	DELETE FROM ringshard.distributed_tables d WHERE d.table_name = relid;
	INSERT INTO ringshard.distributed_tables (table_name, key_column, key_attnum, ring_name, map_name, keyspace, keyspace_column)
	VALUES (relid, key_column, 0, nullif(ring, ''), nullif(map, ''), nullif(keyspace, ''), nullif(keyspace_column, ''));
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_trigger t WHERE t.tgrelid = relid AND t.tgname = 'ringshard_reject_misrouted_rows') THEN
		EXECUTE format('CREATE TRIGGER ringshard_reject_misrouted_rows BEFORE INSERT OR UPDATE ON %s
		                FOR EACH ROW EXECUTE FUNCTION ringshard_worker.reject_misrouted_rows()', relid);
	END IF;
END
$$;
COMMENT ON FUNCTION ringshard_internal.adopt_distributed_table(text, text, text[], name, text, text, text, name) IS
	'on a worker: creates a distributed table (if missing) from the coordinator''s SQL and annotates it, with the trigger that refuses misrouted rows';

CREATE FUNCTION ringshard.push_table_definition(table_name regclass) RETURNS text
	AS 'MODULE_PATHNAME', 'ringshard_push_table_definition' LANGUAGE C VOLATILE PARALLEL UNSAFE STRICT;
COMMENT ON FUNCTION ringshard.push_table_definition(regclass) IS
	'creates a distributed table, with its constraints and indexes, on every node with an address that lacks it';

CREATE FUNCTION ringshard.create_distributed_table(table_name regclass) RETURNS bigint
	AS 'MODULE_PATHNAME', 'ringshard_create_distributed_table' LANGUAGE C VOLATILE PARALLEL UNSAFE STRICT;
COMMENT ON FUNCTION ringshard.create_distributed_table(regclass) IS
	'makes an annotated table a distributed table: creates it on every node, moves its rows to their replicas, and replaces it by a foreign table of the same name; returns the rows moved';

-- A reference table: a copy on every node (the ring "reference", whose every
-- key has as many copies as it has nodes), so that a join with it runs on
-- the node that holds the other tables' rows.  Writes reach every copy in the
-- transaction's atomic commit, reads one copy; a node that joins any ring
-- joins this one too (add_node) and gets the copies with its rebalance.
CREATE FUNCTION ringshard.create_reference_table(table_name regclass) RETURNS text
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	key name;
	moved bigint;
	copies integer;
	shown text := table_name::text;	-- the table is replaced by a foreign table of that name
BEGIN
	IF table_name IS NULL THEN
		RAISE EXCEPTION 'table must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	-- the first column of the primary key places each row for reads by key
	SELECT a.attname INTO key
	  FROM pg_catalog.pg_index i
	  JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
	 WHERE i.indrelid = table_name AND i.indisprimary;
	IF key IS NULL THEN
		RAISE EXCEPTION 'table % has no primary key', table_name
			USING ERRCODE = 'invalid_table_definition',
			      HINT = 'A reference table needs one: its first column spreads reads by key over the copies.';
	END IF;
	IF NOT EXISTS (SELECT FROM ringshard.rings r WHERE r.ring_name = 'reference') THEN
		PERFORM ringshard.create_ring('reference', replication_factor => 64);
	END IF;
	-- every node with an address holds a copy
	PERFORM ringshard.add_node(n.node_name, ring => 'reference')
	   FROM ringshard.nodes n
	  WHERE n.server_name IS NOT NULL
	    AND NOT EXISTS (SELECT FROM ringshard.ring_members m WHERE m.ring_name = 'reference' AND m.node_name = n.node_name)
	  ORDER BY n.node_name;
	SELECT count(*) INTO copies FROM ringshard.ring_members m WHERE m.ring_name = 'reference';
	IF copies = 0 THEN
		RAISE EXCEPTION 'there are no nodes to hold table %', table_name
			USING ERRCODE = 'object_not_in_prerequisite_state',
			      HINT = 'Add nodes with ringshard.add_node(node, address, ring).';
	END IF;
	PERFORM ringshard.sync_topology();
	PERFORM ringshard.distribute_table(table_name, key, 'reference');
	moved := ringshard.create_distributed_table(table_name);
	RETURN format('table %s is a reference table: a copy of its %s rows on each of %s nodes', shown, moved, copies);
END
$$;
COMMENT ON FUNCTION ringshard.create_reference_table(regclass) IS
	'makes a table a reference table: a copy on every node (ring "reference"), written on all copies in one atomic commit, read from one; joins with it run on the nodes';

-- DDL on a distributed table goes through the library's ProcessUtility hook,
-- which sends it to the nodes; in a session where the library was not loaded
-- yet, this refuses the command instead of changing the coordinator alone.
CREATE FUNCTION ringshard_internal.ddl_guard() RETURNS event_trigger
	AS 'MODULE_PATHNAME', 'ringshard_ddl_guard' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION ringshard_internal.ddl_guard() IS
	'event trigger: refuses DDL on a distributed table that would miss the nodes (library not loaded at the command''s start)';
CREATE EVENT TRIGGER ringshard_ddl_guard ON ddl_command_start
	WHEN TAG IN ('ALTER TABLE', 'ALTER FOREIGN TABLE', 'CREATE INDEX', 'DROP TABLE', 'DROP FOREIGN TABLE')
	EXECUTE FUNCTION ringshard_internal.ddl_guard();

-- A node's server options say where the coordinator sends every role's
-- password.  Its owner (ringshard_admin) may change them, but not while other
-- roles have user mappings for it: that would send their credentials
-- wherever the owner chose.  Only a superuser may.
CREATE FUNCTION ringshard_internal.guard_node_servers() RETURNS event_trigger
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	changed record;
	me oid := (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) current_user);
BEGIN
	IF (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.oid OPERATOR(pg_catalog.=) me) THEN
		RETURN;
	END IF;
	FOR changed IN
		SELECT s.srvname, (SELECT pg_catalog.string_agg(m.usename::pg_catalog.text, ', ' ORDER BY m.usename)
		                     FROM pg_catalog.pg_user_mappings m
		                    WHERE m.srvid OPERATOR(pg_catalog.=) s.oid AND m.umuser IS DISTINCT FROM me) AS others
		  FROM pg_catalog.pg_event_trigger_ddl_commands() c
		  JOIN pg_catalog.pg_foreign_server s ON s.oid OPERATOR(pg_catalog.=) c.objid
		  JOIN pg_catalog.pg_foreign_data_wrapper w ON w.oid OPERATOR(pg_catalog.=) s.srvfdw
		 WHERE c.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_foreign_server'::pg_catalog.regclass
		   AND w.fdwname OPERATOR(pg_catalog.=) 'ringshard'
	LOOP
		IF changed.others IS NOT NULL THEN
			RAISE EXCEPTION 'only a superuser may change node server "%" while other roles have user mappings for it', changed.srvname
				USING ERRCODE = 'insufficient_privilege',
				      DETAIL = format('Roles with a user mapping for it: %s. Their passwords go where the server''s options say.', changed.others),
				      HINT = 'Ask a superuser to change it, or drop those user mappings first.';
		END IF;
	END LOOP;
END
$$;
COMMENT ON FUNCTION ringshard_internal.guard_node_servers() IS
	'event trigger: refuses a change of a node''s server by a role below superuser while other roles have user mappings for it';
CREATE EVENT TRIGGER ringshard_guard_node_servers ON ddl_command_end
	WHEN TAG IN ('ALTER SERVER')
	EXECUTE FUNCTION ringshard_internal.guard_node_servers();

-- cluster_get and cluster_fanout of 1.0: plain queries of the distributed table now.
CREATE FUNCTION ringshard.cluster_get(row_type anyelement, key text, keyspace text DEFAULT NULL)
	RETURNS SETOF anyelement
	LANGUAGE ringshard_plpgsql STABLE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	relid regclass := pg_catalog.pg_typeof(row_type)::text::regclass;
	annotation ringshard.distributed_tables;
BEGIN
	IF key IS NULL THEN
		RAISE EXCEPTION 'a key must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	SELECT * INTO annotation FROM ringshard.distributed_tables d WHERE d.table_name = relid;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'table % is not a distributed table', relid USING ERRCODE = 'undefined_object';
	END IF;
	IF annotation.keyspace_column IS NOT NULL AND keyspace IS NULL THEN
		RAISE EXCEPTION 'table % takes its keyspace from column "%": pass the keyspace', relid, annotation.keyspace_column
			USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF annotation.keyspace_column IS NOT NULL THEN
		RETURN QUERY EXECUTE format('SELECT * FROM %s WHERE %I = $1::%s AND %I = $2::%s', relid,
			annotation.key_column, (SELECT pg_catalog.format_type(a.atttypid, a.atttypmod) FROM pg_catalog.pg_attribute a
			                         WHERE a.attrelid = relid AND a.attname = annotation.key_column),
			annotation.keyspace_column, (SELECT pg_catalog.format_type(a.atttypid, a.atttypmod) FROM pg_catalog.pg_attribute a
			                              WHERE a.attrelid = relid AND a.attname = annotation.keyspace_column))
			USING key, keyspace;
	ELSE
		RETURN QUERY EXECUTE format('SELECT * FROM %s WHERE %I = $1::%s', relid, annotation.key_column,
			(SELECT pg_catalog.format_type(a.atttypid, a.atttypmod) FROM pg_catalog.pg_attribute a
			  WHERE a.attrelid = relid AND a.attname = annotation.key_column))
			USING key;
	END IF;
END
$$;
COMMENT ON FUNCTION ringshard.cluster_get(anyelement, text, text) IS
	'rows of a distributed table with this key (pass NULL::table): SELECT * FROM table WHERE key = $1, read from one healthy replica';

CREATE FUNCTION ringshard.cluster_fanout(row_type anyelement, where_clause text DEFAULT NULL,
										 score_column name DEFAULT NULL, k integer DEFAULT NULL,
										 allow_partial boolean DEFAULT false)
	RETURNS SETOF anyelement
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	relid regclass := pg_catalog.pg_typeof(row_type)::text::regclass;
	previous text := coalesce(pg_catalog.current_setting('ringshard.allow_partial_reads', true), 'off');
BEGIN
	IF k IS NOT NULL AND k < 1 THEN
		RAISE EXCEPTION 'k must be positive, got %', k USING ERRCODE = 'invalid_parameter_value';
	END IF;
	PERFORM pg_catalog.set_config('ringshard.allow_partial_reads', allow_partial::text, true);
	RETURN QUERY EXECUTE format('SELECT * FROM %s t WHERE (%s)%s%s', relid, coalesce(where_clause, 'true'),
		CASE WHEN score_column IS NOT NULL THEN format(' ORDER BY t.%I DESC NULLS LAST', score_column) ELSE '' END,
		CASE WHEN k IS NOT NULL THEN format(' LIMIT %s', k) ELSE '' END);
	PERFORM pg_catalog.set_config('ringshard.allow_partial_reads', previous, true);
END
$$;
COMMENT ON FUNCTION ringshard.cluster_fanout(anyelement, text, name, integer, boolean) IS
	'SELECT * FROM table WHERE where_clause [ORDER BY score_column DESC LIMIT k], read from every node in parallel; allow_partial accepts missing nodes (ringshard.allow_partial_reads)';

CREATE FUNCTION ringshard.last_fanout_missing() RETURNS text[]
	AS 'MODULE_PATHNAME', 'ringshard_last_fanout_missing' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION ringshard.last_fanout_missing() IS 'the nodes the session''s last fan-out read could not reach';

-- Two-phase commit: one record per node that prepared its part of a
-- committed coordinator transaction.  Recovery commits the parts that have a
-- record and rolls back the others (docs/design.md).
CREATE TABLE ringshard.transaction_records (
	gid text PRIMARY KEY,
	node_name text NOT NULL,
	recorded_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
CREATE INDEX ON ringshard.transaction_records (node_name);
COMMENT ON TABLE ringshard.transaction_records IS
	'the prepared parts of committed coordinator transactions, until recovery finds them committed on their node';

CREATE FUNCTION ringshard.recover_prepared_transactions()
	RETURNS TABLE (node text, committed integer, rolled_back integer, in_progress integer, error text)
	AS 'MODULE_PATHNAME', 'ringshard_recover_prepared_transactions' LANGUAGE C VOLATILE PARALLEL UNSAFE STRICT;
COMMENT ON FUNCTION ringshard.recover_prepared_transactions() IS
	'on every node, commits this coordinator''s prepared transactions that have a record and rolls back the others whose coordinator transaction ended; the watchdog runs it every round';
CREATE FUNCTION ringshard_internal.recover_prepared_transactions_on(nodes text[])
	RETURNS TABLE (node text, committed integer, rolled_back integer, in_progress integer, error text)
	AS 'MODULE_PATHNAME', 'ringshard_recover_prepared_transactions' LANGUAGE C VOLATILE PARALLEL UNSAFE STRICT;
COMMENT ON FUNCTION ringshard_internal.recover_prepared_transactions_on(text[]) IS
	'recover_prepared_transactions() on these nodes only (a rebalance runs it on a batch''s new replicas before it deletes the batch''s rows where they left)';

-- Proof that a table's replicas hold the same rows, and their repair (src/admin/verify.c).
CREATE FUNCTION ringshard.verify_table(table_name regclass)
	RETURNS TABLE (node text, range text, problem text, rows bigint, sample_keys text[], reference text)
	AS 'MODULE_PATHNAME', 'ringshard_verify_table' LANGUAGE C VOLATILE PARALLEL UNSAFE STRICT;
COMMENT ON FUNCTION ringshard.verify_table(regclass) IS
	'compares every replica of a distributed table by digests computed on the nodes: per node and range, rows missing, extra or differing against the reference copy, and rows on a node that is no replica of them; no row when all agree';
CREATE FUNCTION ringshard.repair_table(table_name regclass, source_node text DEFAULT NULL)
	RETURNS TABLE (node text, range text, source text, deleted bigint, copied bigint)
	AS 'MODULE_PATHNAME', 'ringshard_repair_table' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION ringshard.repair_table(regclass, text) IS
	'brings every replica whose rows differ back to the reference copy (the named source node, else the copy most replicas hold), node to node by COPY, in this transaction';

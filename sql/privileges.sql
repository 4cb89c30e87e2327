-- Every file starts from a fresh extension: the suite shares one database.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS ringshard CASCADE;
CREATE EXTENSION ringshard;
RESET client_min_messages;
--
-- privileges: anyone may route; only ringshard_admin may change topology
--
\set SHOW_CONTEXT never

-- The SQLSTATE and message of the error a statement raises, or 'ok'.
CREATE FUNCTION pg_temp.err(stmt text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	state text;
	msg text;
BEGIN
	EXECUTE stmt;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
	RETURN state || ': ' || msg;
END
$$;

-- Roles are cluster-wide: start from none (a failed earlier run may have left them).
SET client_min_messages = warning;
DO $$
DECLARE
	r text;
BEGIN
	FOREACH r IN ARRAY ARRAY['regress_ringshard_reader', 'regress_ringshard_admin'] LOOP
		IF EXISTS (SELECT FROM pg_roles WHERE rolname = r) THEN
			EXECUTE format('DROP OWNED BY %I', r);
			EXECUTE format('DROP ROLE %I', r);
		END IF;
	END LOOP;
END
$$;
RESET client_min_messages;
CREATE ROLE regress_ringshard_reader;
CREATE ROLE regress_ringshard_admin IN ROLE ringshard_admin;
SELECT r.rolname, pg_has_role(r.rolname, 'ringshard_admin', 'USAGE') AS is_admin
FROM pg_roles r WHERE r.rolname LIKE 'regress_ringshard_%' ORDER BY 1;

-- A topology to route on (set up by the superuser).
SELECT ringshard.set_replication_factor('default', 2);
SELECT ringshard.add_node('node-1', 'node1.example:5432');
SELECT ringshard.add_node('node-2', 'host=node2.example port=5432 dbname=app');
SELECT ringshard.add_node('node-3');
-- credentials are user mappings: only their role (and the server's owner) reads them
CREATE USER MAPPING FOR regress_ringshard_admin SERVER "node-1" OPTIONS (user 'app', password 'S3cr3t');
SELECT ringshard.assign_partitions('node-1', 0, 127);
SELECT ringshard.assign_partitions('node-2', 128, 255);
CREATE TABLE routed (id bigint);
INSERT INTO routed SELECT g FROM generate_series(1, 50) g;
SELECT ringshard.distribute_table('routed', 'id');
GRANT SELECT ON routed TO regress_ringshard_reader, regress_ringshard_admin;
-- Each role gets a schema of its own to create tables in.
CREATE SCHEMA reader_space AUTHORIZATION regress_ringshard_reader;
CREATE SCHEMA admin_space AUTHORIZATION regress_ringshard_admin;

--
-- A role without ringshard_admin may route ...
--
SET ROLE regress_ringshard_reader;
SELECT shard_for('key-1') IS NOT NULL AS shard_for,
       cardinality(replicas_for('key-1')) AS replicas_for,
       read_node_for('key-1') = ANY (replicas_for('key-1')) AS read_node_for,
       partition_for('faces', 'face-001') AS partition_for,
       nodes_for('faces', 'face-001') AS nodes_for,
       ring_token('a') AS ring_token;
SELECT shard_for(42::bigint) = shard_for('42') AS bigint_key, replicas_for('k', 'default', 3) IS NOT NULL AS replicas_n;
SELECT node, weight, points FROM ringshard.ring_balance() ORDER BY node COLLATE "C";
SELECT count(*) AS points FROM ringshard.ring_points();
SELECT ringshard.validate_ring('default') AS points;
SELECT * FROM ringshard.check_partition_map();
SELECT ringshard.partition_nodes(28) AS partition_28;
SELECT count(*) AS rows, count(*) FILTER (WHERE shard_of(r) IS DISTINCT FROM shard_for(r.id)) AS disagreements,
       count(*) FILTER (WHERE replicas_of(r) IS DISTINCT FROM replicas_for(r.id)) AS replica_disagreements
FROM routed r;
SELECT sum(rows_owned) AS owned, sum(rows_held) AS held FROM ringshard.table_balance_report('routed');
SELECT node, points, share_pct, ideal_pct FROM ringshard.ring_balance_report();
SELECT * FROM ringshard.annotated_tables;
SELECT ring_name, algorithm, vnodes, replication_factor FROM ringshard.rings;
SELECT ring_name, node_name, weight FROM ringshard.ring_members ORDER BY node_name COLLATE "C";
SELECT map_name, node_name, partition_start, partition_end FROM ringshard.partition_assignments ORDER BY partition_start;
-- ... and read node names, servers and health.  An address is its server's
-- options, which PostgreSQL shows every role (as for postgres_fdw); the
-- password of another role's user mapping stays hidden.
SELECT node_name, server_name, is_up FROM ringshard.nodes ORDER BY node_name COLLATE "C";
SELECT srvname, usename, umoptions FROM pg_catalog.pg_user_mappings WHERE srvname = 'node-1';
SELECT count(*) AS mapping_rows_readable FROM pg_catalog.pg_user_mapping;

--
-- ... but not change topology
--
SELECT ringshard.add_node('node-4');
SELECT label, pg_temp.err(stmt) AS error
FROM (VALUES
	('add_node',                      $$SELECT ringshard.add_node('node-4')$$),
	('remove_node',                   $$SELECT ringshard.remove_node('node-1')$$),
	('create_ring',                   $$SELECT ringshard.create_ring('mine')$$),
	('drop_ring',                     $$SELECT ringshard.drop_ring('default')$$),
	('set_replication_factor',        $$SELECT ringshard.set_replication_factor('default', 1)$$),
	('set_node_weight',               $$SELECT ringshard.set_node_weight('node-1', 5)$$),
	('set_node_address',              $$SELECT ringshard.set_node_address('node-3', 'evil.example:5432')$$),
	('mark_node_down',                $$SELECT ringshard.mark_node_down('node-1')$$),
	('mark_node_up',                  $$SELECT ringshard.mark_node_up('node-1')$$),
	('create_partition_map',          $$SELECT ringshard.create_partition_map('mine')$$),
	('drop_partition_map',            $$SELECT ringshard.drop_partition_map('default')$$),
	('assign_partitions',             $$SELECT ringshard.assign_partitions('node-3', 0, 255)$$),
	('unassign_partitions',           $$SELECT ringshard.unassign_partitions('node-1', 0, 127)$$),
	('load_partition_config',         $$SELECT ringshard.load_partition_config('version: "v1"')$$),
	('distribute_table',              $$SELECT ringshard.distribute_table('routed', 'id')$$),
	('distribute_table_by_partition', $$SELECT ringshard.distribute_table_by_partition('routed', 'id', 'k')$$),
	('undistribute_table',            $$SELECT ringshard.undistribute_table('routed')$$),
	('ensure_node (internal)',        $$SELECT ringshard_internal.ensure_node('node-4', NULL)$$),
	('forget_unused_nodes (internal)', $$SELECT ringshard_internal.forget_unused_nodes()$$),
	('lock_ring (internal)',          $$SELECT ringshard_internal.lock_ring('default')$$)
) v(label, stmt);
-- nor write the catalog directly
SELECT label, pg_temp.err(stmt) AS error
FROM (VALUES
	('INSERT rings',               $$INSERT INTO ringshard.rings (ring_name) VALUES ('mine')$$),
	('UPDATE rings',               $$UPDATE ringshard.rings SET replication_factor = 1$$),
	('DELETE rings',               $$DELETE FROM ringshard.rings$$),
	('INSERT nodes',               $$INSERT INTO ringshard.nodes (node_name) VALUES ('node-4')$$),
	('UPDATE nodes',               $$UPDATE ringshard.nodes SET is_up = false$$),
	('DELETE nodes',               $$DELETE FROM ringshard.nodes$$),
	('INSERT ring_members',        $$INSERT INTO ringshard.ring_members VALUES ('default', 'node-3', 100)$$),
	('UPDATE ring_members',        $$UPDATE ringshard.ring_members SET weight = 5$$),
	('DELETE ring_members',        $$DELETE FROM ringshard.ring_members$$),
	('TRUNCATE ring_members',      $$TRUNCATE ringshard.ring_members$$),
	('INSERT partition_maps',      $$INSERT INTO ringshard.partition_maps VALUES ('mine')$$),
	('UPDATE partition_assignments', $$UPDATE ringshard.partition_assignments SET node_name = 'node-3'$$),
	('DELETE partition_assignments', $$DELETE FROM ringshard.partition_assignments$$),
	('INSERT distributed_tables',  $$INSERT INTO ringshard.distributed_tables (table_name, key_column, key_attnum, ring_name) VALUES ('routed', 'id', 1, 'default')$$),
	('DELETE distributed_tables',  $$DELETE FROM ringshard.distributed_tables$$)
) v(label, stmt);
RESET ROLE;
-- nothing changed
SELECT (SELECT count(*) FROM ringshard.nodes) AS nodes,
       (SELECT count(*) FROM ringshard.ring_members) AS members,
       (SELECT count(*) FROM ringshard.rings) AS rings,
       (SELECT count(*) FROM ringshard.partition_maps) AS maps,
       (SELECT count(*) FROM ringshard.partition_assignments) AS assignments,
       (SELECT count(*) FROM ringshard.distributed_tables) AS annotated,
       (SELECT bool_and(is_up) FROM ringshard.nodes) AS all_up,
       (SELECT sum(weight) FROM ringshard.ring_members) AS total_weight;

--
-- A role without ringshard_admin still manages its own tables: the
-- extension's event triggers must not stand in the way of its DDL.
--
SET ROLE regress_ringshard_reader;
CREATE TABLE reader_space.t (id bigint, note text);
INSERT INTO reader_space.t SELECT g, 'n' FROM generate_series(1, 20) g;
SELECT label, pg_temp.err(stmt) AS result
FROM (VALUES
	('RENAME COLUMN', $$ALTER TABLE reader_space.t RENAME COLUMN note TO remark$$),
	('ADD COLUMN',    $$ALTER TABLE reader_space.t ADD COLUMN extra int$$),
	('DROP COLUMN',   $$ALTER TABLE reader_space.t DROP COLUMN extra$$),
	('CREATE TABLE',  $$CREATE TABLE reader_space.scratch (x int)$$),
	('DROP TABLE',    $$DROP TABLE reader_space.scratch$$),
	('TEMP TABLE',    $$CREATE TEMP TABLE reader_temp (x int); DROP TABLE reader_temp$$)
) v(label, stmt);
RESET ROLE;
-- An admin annotates the reader's table; the reader, its owner, renames the
-- key column (the annotation follows) and drops the table (it goes).
SELECT ringshard.distribute_table('reader_space.t', 'id');
SET ROLE regress_ringshard_reader;
SELECT pg_temp.err($$ALTER TABLE reader_space.t RENAME COLUMN id TO account_id$$) AS rename_key;
SELECT key_column FROM ringshard.annotated_tables WHERE table_name = 'reader_space.t'::regclass;
SELECT count(*) AS disagreements FROM reader_space.t t
WHERE shard_of(t) IS DISTINCT FROM shard_for(t.account_id);
SELECT pg_temp.err($$DROP TABLE reader_space.t$$) AS drop_annotated;
SELECT count(*) AS dangling_annotations FROM ringshard.distributed_tables d
WHERE NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = d.table_name);
SELECT count(*) AS reader_tables FROM pg_tables WHERE schemaname = 'reader_space';
RESET ROLE;

--
-- A member of ringshard_admin may change topology
--
SET ROLE regress_ringshard_admin;
SELECT ringshard.create_ring('admin-ring', 32, 2);
SELECT ringshard.add_node('node-4', 'node4.example:5432', 'admin-ring');
SELECT ringshard.add_node('node-5', ring => 'admin-ring', weight => 2);
SELECT ringshard.set_node_weight('node-5', 3, 'admin-ring');
SELECT ringshard.set_node_address('node-5', 'node5.example:5432');
SELECT ringshard.mark_node_down('node-4');
SELECT ringshard.mark_node_up('node-4');
SELECT ringshard.set_replication_factor('admin-ring', 1);
SELECT node, weight, points FROM ringshard.ring_balance('admin-ring') ORDER BY node COLLATE "C";
SELECT node_name, ringshard.server_address(server_name) AS address, is_up FROM ringshard.nodes ORDER BY node_name COLLATE "C";
SELECT ringshard.create_partition_map('admin-map');
SELECT ringshard.load_partition_config($$version: "v1"
nodes:
- address: "node4.example:5432"
  partition_start: 0
  partition_end: 255
$$, 'admin-map');
SELECT nodes_for('faces', 'face-001', 'admin-map');
CREATE TABLE admin_space.orders (order_id bigint);
INSERT INTO admin_space.orders SELECT g FROM generate_series(1, 20) g;
SELECT ringshard.distribute_table('admin_space.orders', 'order_id', 'admin-ring');
SELECT count(*) AS disagreements FROM admin_space.orders o
WHERE shard_of(o) IS DISTINCT FROM shard_for(o.order_id, 'admin-ring');
ALTER TABLE admin_space.orders RENAME COLUMN order_id TO id;
SELECT table_name, key_column, placed_by FROM ringshard.annotated_tables WHERE placed_by = 'admin-ring';
-- direct DML on the catalog is allowed to admins too
UPDATE ringshard.ring_members SET weight = 1 WHERE ring_name = 'admin-ring' AND node_name = 'node-5';
SELECT node, points FROM ringshard.ring_balance('admin-ring') ORDER BY node COLLATE "C";
SELECT ringshard.undistribute_table('admin_space.orders');
DROP TABLE admin_space.orders;
SELECT ringshard.drop_partition_map('admin-map');
SELECT ringshard.drop_ring('admin-ring');
RESET ROLE;
SELECT count(*) AS admin_nodes_left FROM ringshard.nodes WHERE node_name IN ('node-4', 'node-5');

--
-- SECURITY DEFINER functions pin search_path; so does every SQL and
-- PL/pgSQL function of the extension
--
SELECT p.oid::regprocedure AS function, p.proconfig
FROM pg_proc p
JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'ringshard'
WHERE p.prosecdef
ORDER BY p.oid::regprocedure::text COLLATE "C";
SELECT count(*) AS security_definer_without_search_path
FROM pg_proc p
JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'ringshard'
WHERE p.prosecdef
  AND NOT EXISTS (SELECT FROM unnest(p.proconfig) c WHERE c LIKE 'search\_path=%');
-- SQL and PL/pgSQL functions in schema ringshard: none without a search_path,
-- except the rebalance procedure, which commits and so cannot carry SET (every
-- name in it is qualified); it is listed below.
SELECT count(*) > 0 AS some_checked,
       count(*) FILTER (WHERE NOT EXISTS (SELECT FROM unnest(p.proconfig) c WHERE c LIKE 'search\_path=%')) AS without_search_path,
       count(*) FILTER (WHERE NOT EXISTS (SELECT FROM unnest(p.proconfig) c
                                          WHERE c LIKE 'search\_path=pg\_catalog%')) AS search_path_not_pg_catalog_first
FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
WHERE p.pronamespace = 'ringshard'::regnamespace AND l.lanname IN ('sql', 'plpgsql');
SELECT p.oid::regprocedure AS function, p.proconfig
FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
WHERE p.pronamespace = 'ringshard'::regnamespace AND l.lanname IN ('sql', 'plpgsql')
  AND NOT EXISTS (SELECT FROM unnest(p.proconfig) c WHERE c LIKE 'search\_path=%');
-- What PUBLIC may execute in schema ringshard changes no topology: the only
-- volatile functions it may call (besides trigger functions, which cannot be
-- called) are the cluster's reads and health probes, listed exactly.
SELECT count(*) > 0 AS some_executable
FROM pg_proc p
WHERE p.pronamespace = 'ringshard'::regnamespace
  AND has_function_privilege('regress_ringshard_reader', p.oid, 'EXECUTE');
SELECT p.oid::regprocedure AS volatile_executable
FROM pg_proc p
WHERE p.pronamespace = 'ringshard'::regnamespace
  AND has_function_privilege('regress_ringshard_reader', p.oid, 'EXECUTE')
  AND p.provolatile = 'v' AND p.prorettype NOT IN ('trigger'::regtype, 'event_trigger'::regtype)
ORDER BY 1::text;
SET ROLE regress_ringshard_reader;
SELECT pg_temp.err($$SELECT ringshard_internal.invalidate_topology_cache()$$) AS trigger_function_called_directly;
RESET ROLE;
-- The internal helpers' schema is for administrators only; nothing in it is
-- granted to PUBLIC, and a member of ringshard_admin may call them.
SELECT has_schema_privilege('public', 'ringshard_internal', 'USAGE') AS public_uses_internal,
       has_schema_privilege('ringshard_admin', 'ringshard_internal', 'USAGE') AS admin_uses_internal,
       (SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
         WHERE n.nspname = 'ringshard_internal' AND has_function_privilege('public', p.oid, 'EXECUTE')) AS public_functions;
SET ROLE regress_ringshard_reader;
RESET ROLE;

--
-- Clean up
--
SELECT ringshard.undistribute_table('routed');
DROP TABLE routed;
-- the roles' schemas and whatever is left in them
DROP OWNED BY regress_ringshard_reader, regress_ringshard_admin;
DROP ROLE regress_ringshard_reader, regress_ringshard_admin;
SELECT ringshard.remove_node(node_name) FROM ringshard.ring_members WHERE ring_name = 'default';
SELECT ringshard.unassign_partitions('node-1', 0, 127);
SELECT ringshard.unassign_partitions('node-2', 128, 255);
SELECT ringshard.set_replication_factor('default', 1);
SELECT count(*) AS roles_left FROM pg_roles WHERE rolname LIKE 'regress_ringshard_%';
SELECT (SELECT count(*) FROM ringshard.nodes) AS nodes,
       (SELECT count(*) FROM ringshard.ring_members) AS members,
       (SELECT count(*) FROM ringshard.rings) AS rings,
       (SELECT count(*) FROM ringshard.partition_maps) AS maps,
       (SELECT count(*) FROM ringshard.partition_assignments) AS assignments,
       (SELECT count(*) FROM ringshard.distributed_tables) AS annotated;

-- Every function, procedure, table and view of the extension says what it is.
SELECT count(*) AS uncommented_functions
  FROM pg_proc p JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'ringshard'
 WHERE obj_description(p.oid, 'pg_proc') IS NULL;
SELECT count(*) AS uncommented_relations
  FROM pg_class c JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e'
  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'ringshard'
 WHERE c.relkind IN ('r', 'v') AND obj_description(c.oid, 'pg_class') IS NULL;

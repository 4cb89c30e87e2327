-- Every file starts from a fresh extension: the suite shares one database.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS ringshard CASCADE;
CREATE EXTENSION ringshard;
RESET client_min_messages;
--
-- bad_input: hostile and malformed input to every part of the SQL API
--
-- Every bad input must be a clear error with a SQLSTATE (never XX000,
-- "internal error") and must change nothing; routing functions given a NULL
-- return NULL.  Names full of quotes and SQL metacharacters must work as
-- names and never be executed.
\set SHOW_CONTEXT never

-- A fingerprint of the whole topology catalog.
CREATE FUNCTION pg_temp.catalog() RETURNS text
LANGUAGE sql AS $$
SELECT md5(concat_ws(' | ',
	(SELECT string_agg(format('%s/%s/%s/%s', ring_name, algorithm, vnodes, replication_factor), ','
	                   ORDER BY ring_name COLLATE "C") FROM ringshard.rings),
	(SELECT string_agg(format('%s/%s/%s', node_name, ringshard.server_address(server_name), is_up), ','
	                   ORDER BY node_name COLLATE "C") FROM ringshard.nodes),
	(SELECT string_agg(format('%s/%s/%s', ring_name, node_name, weight), ','
	                   ORDER BY ring_name COLLATE "C", node_name COLLATE "C") FROM ringshard.ring_members),
	(SELECT string_agg(map_name, ',' ORDER BY map_name COLLATE "C") FROM ringshard.partition_maps),
	(SELECT string_agg(format('%s/%s/%s/%s', map_name, node_name, partition_start, partition_end), ','
	                   ORDER BY map_name COLLATE "C", node_name COLLATE "C", partition_start)
	   FROM ringshard.partition_assignments),
	(SELECT string_agg(format('%s/%s/%s/%s/%s/%s', table_name, key_column, ring_name, map_name, keyspace,
	                          keyspace_column), ',' ORDER BY table_name::text COLLATE "C")
	   FROM ringshard.distributed_tables),
	(SELECT format('%s/%s', local_node, topology_version) FROM ringshard.cluster_state)))
$$;

-- Every statement tried through pg_temp.err(): the SQLSTATE it raised (NULL
-- if none) and whether it changed the catalog.
CREATE TEMP TABLE tried (stmt text, sqlstate text, message text, changed boolean);

-- Run a statement in a subtransaction that is always rolled back, so that a
-- statement wrongly accepted cannot disturb the cases after it; note whether
-- it changed the catalog before the rollback.  Returns 'ok' or the SQLSTATE
-- and the (start of the) message, flagged when the catalog changed.
CREATE FUNCTION pg_temp.err(q text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	before text := pg_temp.catalog();
	state text;
	msg text;
	changed boolean;
BEGIN
	BEGIN
		BEGIN
			EXECUTE q;
		EXCEPTION WHEN OTHERS THEN
			GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
		END;
		changed := pg_temp.catalog() IS DISTINCT FROM before;
		RAISE SQLSTATE 'RSUND';
	EXCEPTION WHEN SQLSTATE 'RSUND' THEN
		NULL;
	END;
	INSERT INTO tried VALUES (q, state, msg, changed);
	-- messages quote the offending input: keep megabytes out of the output
	RETURN coalesce(state || ': ' || CASE WHEN length(msg) > 110
		THEN left(msg, 100) || '... (' || length(msg) || ' chars)' ELSE msg END, 'ok')
		|| CASE WHEN changed THEN ' [CHANGED THE CATALOG]' ELSE '' END;
END
$$;

-- Whether a statement fails with a clear data exception (class 22) whose
-- message does not say "<NULL>", changing nothing: what a NULL (or a YAML
-- null) must give.
CREATE FUNCTION pg_temp.refused_clearly(q text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
	outcome text := pg_temp.err(q);
BEGIN
	RETURN outcome LIKE '22%' AND outcome NOT LIKE '%<NULL>%' AND outcome NOT LIKE '%[CHANGED THE CATALOG]';
END
$$;

-- Row counts of the catalog, to show what a fingerprint covers.
CREATE FUNCTION pg_temp.catalog_counts() RETURNS text
LANGUAGE sql AS $$
SELECT format('rings %s, nodes %s, members %s, maps %s, assignments %s, annotated %s',
	(SELECT count(*) FROM ringshard.rings), (SELECT count(*) FROM ringshard.nodes),
	(SELECT count(*) FROM ringshard.ring_members), (SELECT count(*) FROM ringshard.partition_maps),
	(SELECT count(*) FROM ringshard.partition_assignments), (SELECT count(*) FROM ringshard.distributed_tables))
$$;

--
-- A topology to attack
--
-- 'default': n1, n2, n3 (weight 2), replication 2; 'mem': ketama; 'empty';
-- 'solo': one node, used by an annotated table.  Maps: 'default' complete,
-- 'pm' used by an annotated table, 'gappy' with gaps.
SELECT ringshard.add_node('n1'), ringshard.add_node('n2'), ringshard.add_node('n3', weight => 2),
       ringshard.set_replication_factor('default', 2),
       ringshard.create_ring('mem', algorithm => 'ketama'),
       ringshard.add_node('m1', '10.0.0.1:11211', 'mem'), ringshard.add_node('m2', '10.0.0.2:11211', 'mem'),
       ringshard.create_ring('empty'),
       ringshard.create_ring('solo'), ringshard.add_node('s1', ring => 'solo');
SELECT ringshard.assign_partitions('n1', 0, 127), ringshard.assign_partitions('n2', 128, 255),
       ringshard.create_partition_map('pm'), ringshard.assign_partitions('n1', 0, 255, 'pm'),
       ringshard.create_partition_map('gappy'), ringshard.assign_partitions('n3', 0, 9, 'gappy');
CREATE TABLE t_solo (id text, v int);
INSERT INTO t_solo SELECT 'k' || g, g FROM generate_series(1, 10) g;
CREATE TABLE t_map (id text, ks text);
SELECT ringshard.distribute_table('t_solo', 'id', 'solo'),
       ringshard.distribute_table_by_partition('t_map', 'id', 'faces', 'pm');
-- an ordinary table that must survive every injection attempt
CREATE TABLE sentinel (x int);
INSERT INTO sentinel VALUES (42);

SELECT pg_temp.catalog_counts();
SELECT pg_temp.catalog() AS catalog_before \gset

--
-- NULL arguments
--
-- Routing and read-only functions are STRICT: a NULL argument routes
-- nowhere and returns NULL (or no rows), on any ring or map.
SELECT label, result IS NULL AS is_null
FROM (VALUES
	('ring_token(NULL::text)',             ring_token(NULL::text)::text),
	('ring_token(NULL::bigint)',           ring_token(NULL::bigint)::text),
	('ring_token(NULL::uuid)',             ring_token(NULL::uuid)::text),
	('shard_for(NULL::text)',              shard_for(NULL::text)),
	('shard_for(NULL::int, ring)',         shard_for(NULL::int, 'default')),
	('shard_for(key, NULL)',               shard_for('k', NULL)),
	('shard_for(NULL) on an empty ring',   shard_for(NULL::text, 'empty')),
	('shard_for(NULL) on an unknown ring', shard_for(NULL::text, 'nope')),
	('replicas_for(NULL::text)',           replicas_for(NULL::text)::text),
	('replicas_for(key, NULL)',            replicas_for('k', NULL)::text),
	('replicas_for(key, ring, NULL)',      replicas_for('k', 'default', NULL)::text),
	('read_node_for(NULL::text)',          read_node_for(NULL::text)),
	('read_node_for(key, NULL)',           read_node_for('k', NULL)),
	('partition_for(NULL, key)',           partition_for(NULL, 'k')::text),
	('partition_for(keyspace, NULL)',      partition_for('ks', NULL::text)::text),
	('nodes_for(NULL, key)',               nodes_for(NULL, 'k')::text),
	('nodes_for(keyspace, NULL)',          nodes_for('ks', NULL::text)::text),
	('nodes_for(keyspace, key, NULL)',     nodes_for('ks', 'k', NULL)::text),
	('nodes_for on a gap, NULL key',       nodes_for('ks', NULL::text, 'gappy')::text),
	('partition_nodes(NULL)',              ringshard.partition_nodes(NULL)::text),
	('partition_nodes(0, NULL)',           ringshard.partition_nodes(0, NULL)::text),
	('shard_of(NULL::t_solo)',             shard_of(NULL::t_solo)),
	('replicas_of(NULL::t_map)',           replicas_of(NULL::t_map)::text),
	('validate_ring(NULL)',                ringshard.validate_ring(NULL)::text),
	('proposed_replicas(NULL, ...)',       ringshard.proposed_replicas(NULL::text, 'default', 'add', 'x')::text),
	('proposed_replicas(key, NULL, ...)',  ringshard.proposed_replicas('k', NULL, 'add', 'x')::text),
	('proposed_replicas(..., NULL change)', ringshard.proposed_replicas('k', 'default', NULL, 'x')::text),
	('address_is_safe(NULL)',              ringshard.address_is_safe(NULL)::text),
	('format_partition_config(NULL, ...)', ringshard.format_partition_config(NULL, '{}', '{}')),
	('NULL::ringtoken',                    NULL::ringtoken::text),
	('ringtoken_in(NULL)',                 ringtoken_in(NULL)::text)
) v(label, result);
SELECT label, rows
FROM (VALUES
	('ring_points(NULL)',              (SELECT count(*) FROM ringshard.ring_points(NULL))),
	('ring_balance(NULL)',             (SELECT count(*) FROM ringshard.ring_balance(NULL))),
	('ring_balance_report(NULL)',      (SELECT count(*) FROM ringshard.ring_balance_report(NULL))),
	('table_balance_report(NULL)',     (SELECT count(*) FROM ringshard.table_balance_report(NULL))),
	('check_partition_map(NULL)',      (SELECT count(*) FROM ringshard.check_partition_map(NULL))),
	('parse_partition_config(NULL)',   (SELECT count(*) FROM ringshard.parse_partition_config(NULL))),
	('preview_partition_config(NULL)', (SELECT count(*) FROM ringshard.preview_partition_config(NULL))),
	('preview_add_node(NULL)',         (SELECT count(*) FROM ringshard.preview_add_node(NULL))),
	('preview_remove_node(n1, NULL)',  (SELECT count(*) FROM ringshard.preview_remove_node('n1', NULL))),
	('preview_set_weight(n1, NULL)',   (SELECT count(*) FROM ringshard.preview_set_weight('n1', NULL))),
	('preview_change(..., NULL)',      (SELECT count(*) FROM ringshard.preview_change('default', 'add', 'x', 1, NULL))),
	('compare_schemes(NULL, 2)',       (SELECT count(*) FROM ringshard.compare_schemes(NULL, 2)))
) v(label, rows);

-- Administration functions refuse a NULL with a data exception (class 22)
-- that names the argument, never "<NULL>", and change nothing.
SELECT label, pg_temp.refused_clearly(stmt) AS refused_clearly
FROM (VALUES
	('create_ring(NULL)',                      $$SELECT ringshard.create_ring(NULL)$$),
	('create_ring(r, NULL vnodes)',            $$SELECT ringshard.create_ring('r', NULL)$$),
	('create_ring(r, 256, NULL replication)',  $$SELECT ringshard.create_ring('r', 256, NULL)$$),
	('create_ring(r, 256, 1, NULL algorithm)', $$SELECT ringshard.create_ring('r', 256, 1, NULL)$$),
	('drop_ring(NULL)',                        $$SELECT ringshard.drop_ring(NULL)$$),
	('set_replication_factor(NULL, 2)',        $$SELECT ringshard.set_replication_factor(NULL, 2)$$),
	('set_replication_factor(default, NULL)',  $$SELECT ringshard.set_replication_factor('default', NULL)$$),
	('add_node(NULL)',                         $$SELECT ringshard.add_node(NULL)$$),
	('add_node(x, NULL, NULL ring)',           $$SELECT ringshard.add_node('x', NULL, NULL)$$),
	('add_node(x, weight NULL)',               $$SELECT ringshard.add_node('x', weight => NULL)$$),
	('remove_node(NULL)',                      $$SELECT ringshard.remove_node(NULL)$$),
	('remove_node(n1, NULL ring)',             $$SELECT ringshard.remove_node('n1', NULL)$$),
	('set_node_weight(NULL, 1)',               $$SELECT ringshard.set_node_weight(NULL, 1)$$),
	('set_node_weight(n1, NULL)',              $$SELECT ringshard.set_node_weight('n1', NULL)$$),
	('set_node_weight(n1, 1, NULL ring)',      $$SELECT ringshard.set_node_weight('n1', 1, NULL)$$),
	('set_node_address(NULL, a)',              $$SELECT ringshard.set_node_address(NULL, 'a.example:5432')$$),
	('mark_node_down(NULL)',                   $$SELECT ringshard.mark_node_down(NULL)$$),
	('mark_node_up(NULL)',                     $$SELECT ringshard.mark_node_up(NULL)$$),
	('create_partition_map(NULL)',             $$SELECT ringshard.create_partition_map(NULL)$$),
	('drop_partition_map(NULL)',               $$SELECT ringshard.drop_partition_map(NULL)$$),
	('assign_partitions(NULL, 0, 1)',          $$SELECT ringshard.assign_partitions(NULL, 0, 1)$$),
	('assign_partitions(n1, NULL, 1)',         $$SELECT ringshard.assign_partitions('n1', NULL, 1)$$),
	('assign_partitions(n1, 0, NULL)',         $$SELECT ringshard.assign_partitions('n1', 0, NULL)$$),
	('assign_partitions(n1, 0, 1, NULL map)',  $$SELECT ringshard.assign_partitions('n1', 0, 1, NULL)$$),
	('unassign_partitions(NULL, 0, 1)',        $$SELECT ringshard.unassign_partitions(NULL, 0, 1)$$),
	('unassign_partitions(n1, NULL, 1)',       $$SELECT ringshard.unassign_partitions('n1', NULL, 1)$$),
	('unassign_partitions(n1, 0, 1, NULL)',    $$SELECT ringshard.unassign_partitions('n1', 0, 1, NULL)$$),
	('load_partition_config(NULL)',            $$SELECT ringshard.load_partition_config(NULL)$$),
	('load_partition_config(NULL, pm)',        $$SELECT ringshard.load_partition_config(NULL, 'pm')$$),
	('load_partition_config(config, NULL)',    $$SELECT ringshard.load_partition_config('version: v1', NULL)$$),
	('distribute_table(NULL, id)',             $$SELECT ringshard.distribute_table(NULL, 'id')$$),
	('distribute_table(sentinel, NULL)',       $$SELECT ringshard.distribute_table('sentinel', NULL)$$),
	('distribute_table(sentinel, x, NULL)',    $$SELECT ringshard.distribute_table('sentinel', 'x', NULL)$$),
	('distribute_table_by_partition(NULL..)',  $$SELECT ringshard.distribute_table_by_partition(NULL, 'id', 'ks')$$),
	('distribute_table_by_partition(.., NULL map)', $$SELECT ringshard.distribute_table_by_partition('t_solo', 'id', 'ks', NULL)$$),
	('undistribute_table(NULL)',               $$SELECT ringshard.undistribute_table(NULL)$$),
	('preview_partition_assignments(NULL..)',  $$SELECT * FROM ringshard.preview_partition_assignments(NULL, '{}', '{}')$$),
	('format_partition_config(NULL element)',  $$SELECT ringshard.format_partition_config(ARRAY[NULL], ARRAY[0], ARRAY[1])$$),
	('apply_topology({}, w, NULL version)',    $$SELECT ringshard_worker.apply_topology('{"rings": []}', 'w', NULL)$$)
) v(label, stmt);

-- apply_topology() with a NULL or malformed topology must not wipe the
-- catalog, even where no annotated table holds a ring in place by its
-- foreign key.
BEGIN;
SELECT ringshard.undistribute_table('t_solo'), ringshard.undistribute_table('t_map');
SELECT label, pg_temp.refused_clearly(stmt) AS refused_clearly
FROM (VALUES
	('apply_topology(NULL, w, 1)',   $$SELECT ringshard_worker.apply_topology(NULL, 'w', 1)$$),
	('apply_topology({}, w, 1)',     $$SELECT ringshard_worker.apply_topology('{}', 'w', 1)$$),
	('apply_topology([1, 2], w, 1)', $$SELECT ringshard_worker.apply_topology('[1, 2]', 'w', 1)$$),
	('apply_topology(5, w, 1)',      $$SELECT ringshard_worker.apply_topology('5', 'w', 1)$$)
) v(label, stmt);
ROLLBACK;

--
-- Empty strings
--
-- An empty key and an empty keyspace are ordinary byte strings (token 0).
SELECT ring_token('') AS empty_key_token, shard_for('') IS NOT NULL AS empty_key_routes,
       partition_for('', '') AS empty_partition, nodes_for('', '') IS NOT NULL AS empty_keyspace_routes;
SELECT stmt, pg_temp.err(stmt) AS error
FROM (VALUES
	($$SELECT shard_for('k', '')$$),
	($$SELECT replicas_for('k', '', 2)$$),
	($$SELECT read_node_for('k', '')$$),
	($$SELECT nodes_for('ks', 'k', '')$$),
	($$SELECT ringshard.partition_nodes(0, '')$$),
	($$SELECT ringshard.validate_ring('')$$),
	($$SELECT ringshard.create_ring('')$$),
	($$SELECT ringshard.drop_ring('')$$),
	($$SELECT ringshard.add_node('')$$),
	($$SELECT ringshard.add_node('x', '')$$),
	($$SELECT ringshard.add_node('x', ring => '')$$),
	($$SELECT ringshard.remove_node('', 'default')$$),
	($$SELECT ringshard.set_node_address('n1', '')$$),
	($$SELECT ringshard.create_partition_map('')$$),
	($$SELECT ringshard.assign_partitions('', 0, 1)$$),
	($$SELECT ringshard.load_partition_config('')$$),
	($$SELECT ringshard.load_partition_config(E'version: v1\nnodes: []', '')$$),
	($$SELECT * FROM ringshard.parse_partition_config('')$$),
	($$SELECT ringshard.distribute_table('', 'id')$$),
	($$SELECT ringshard.distribute_table('sentinel', '')$$),
	($$SELECT ''::ringtoken$$),
	($$SELECT * FROM ringshard.preview_add_node('')$$),
	($$SELECT * FROM ringshard.preview_change('default', '', 'x', 1, false)$$)
) v(stmt);

--
-- Two-megabyte inputs
--
CREATE TEMP TABLE big AS SELECT repeat('x', 2 * 1024 * 1024) AS v;
-- A 2 MB key routes like any other, as text and as bytea alike.
SELECT shard_for(v) = shard_for(v, 'default') AS key_routes,
       cardinality(replicas_for(v)) AS replicas,
       ring_token(v) = ring_token(convert_to(v, 'UTF8')) AS text_and_bytea_agree,
       shard_for(v, 'mem') IN ('m1', 'm2') AS ketama_routes,
       partition_for('ks', v) BETWEEN 0 AND 255 AS partition_in_range,
       partition_for(v, 'k') BETWEEN 0 AND 255 AS big_keyspace_in_range,
       nodes_for('ks', v) IS NOT NULL AS map_routes
FROM big;
-- 2 MB names and documents are refused without echoing them in full.
SELECT label, pg_temp.err(format(stmt, 'big.v')) AS error
FROM (VALUES
	('ring name',          $$SELECT shard_for('k', %s) FROM big$$),
	('map name',           $$SELECT nodes_for('ks', 'k', %s) FROM big$$),
	('create_ring',        $$SELECT ringshard.create_ring(%s) FROM big$$),
	('add_node',           $$SELECT ringshard.add_node(%s) FROM big$$),
	('add_node ring',      $$SELECT ringshard.add_node('x', ring => %s) FROM big$$),
	('create_partition_map', $$SELECT ringshard.create_partition_map(%s) FROM big$$),
	('assign_partitions',  $$SELECT ringshard.assign_partitions(%s, 0, 1) FROM big$$),
	('YAML document',      $$SELECT ringshard.load_partition_config(%s) FROM big$$),
	('YAML address',       $$SELECT ringshard.format_partition_config(ARRAY[%s], ARRAY[0], ARRAY[1]) FROM big$$),
	('ringtoken',          $$SELECT (repeat('9', 2 * 1024 * 1024))::ringtoken FROM big$$)
) v(label, stmt);

--
-- ringtoken: malformed and out-of-range text, numbers and casts
--
SELECT input, pg_temp.err(format('SELECT %L::ringtoken', input)) AS error
FROM (VALUES ('-1'), ('18446744073709551616'), ('0x'), ('abc'), ('0x1FFFFFFFFFFFFFFFF'),
             (' '), ('1.5'), ('1e3'), ('0x-1'), ('--1'), ('+'), ('0xg'), ('1 2'), ('１'),
             ('99999999999999999999999999999999')) v(input);
SELECT stmt, pg_temp.err(stmt) AS error
FROM (VALUES
	($$SELECT (-1)::numeric::ringtoken$$),
	($$SELECT 1.5::ringtoken$$),
	($$SELECT 'NaN'::numeric::ringtoken$$),
	($$SELECT 'Infinity'::numeric::ringtoken$$),
	($$SELECT 18446744073709551616::ringtoken$$)
) v(stmt);
-- The edges themselves are fine.
SELECT '0'::ringtoken AS zero, '-0'::ringtoken AS minus_zero, '18446744073709551615'::ringtoken AS max,
       ' 0xFFFFFFFFFFFFFFFF '::ringtoken AS max_hex, '0x00000000000000000001'::ringtoken AS leading_zeros;

--
-- Partitions outside 0..255
--
SELECT stmt, pg_temp.err(stmt) AS error
FROM (VALUES
	($$SELECT ringshard.partition_nodes(-1)$$),
	($$SELECT ringshard.partition_nodes(256)$$),
	($$SELECT ringshard.partition_nodes(-2147483648)$$),
	($$SELECT ringshard.assign_partitions('n1', -1, 5)$$),
	($$SELECT ringshard.assign_partitions('n1', 0, 256)$$),
	($$SELECT ringshard.assign_partitions('n1', 9, 5)$$),
	($$SELECT ringshard.unassign_partitions('n1', -1, 5)$$),
	($$SELECT ringshard.unassign_partitions('n1', 0, 256)$$),
	($$SELECT ringshard.unassign_partitions('n3', 0, 9)$$),
	($$SELECT ringshard.format_partition_config(ARRAY['a'], ARRAY[-1], ARRAY[5])$$),
	($$SELECT ringshard.format_partition_config(ARRAY['a'], ARRAY[0], ARRAY[256])$$),
	($$SELECT ringshard.format_partition_config(ARRAY['a', 'b'], ARRAY[0], ARRAY[1])$$),
	($$SELECT * FROM ringshard.preview_partition_assignments(ARRAY['a'], ARRAY[-1], ARRAY[3])$$),
	($$SELECT * FROM ringshard.preview_partition_assignments(ARRAY['a'], ARRAY[0], ARRAY[256])$$),
	($$SELECT * FROM ringshard.preview_partition_assignments(ARRAY['a'], ARRAY[0, 1], ARRAY[3])$$),
	($$INSERT INTO ringshard.partition_assignments VALUES ('default', 'n1', 256, 256)$$),
	($$INSERT INTO ringshard.partition_assignments VALUES ('default', 'n1', 5, 4)$$)
) v(stmt);

--
-- Unknown rings, maps, nodes and changes
--
SELECT stmt, pg_temp.err(stmt) AS error
FROM (VALUES
	($$SELECT shard_for('k', 'nope')$$),
	($$SELECT shard_for(42, 'nope')$$),
	($$SELECT replicas_for('k', 'nope', 2)$$),
	($$SELECT read_node_for('k', 'nope')$$),
	($$SELECT nodes_for('ks', 'k', 'nope')$$),
	($$SELECT ringshard.partition_nodes(0, 'nope')$$),
	($$SELECT * FROM ringshard.ring_points('nope')$$),
	($$SELECT * FROM ringshard.ring_balance('nope')$$),
	($$SELECT ringshard.validate_ring('nope')$$),
	($$SELECT * FROM ringshard.ring_balance_report('nope')$$),
	($$SELECT * FROM ringshard.check_partition_map('nope')$$),
	($$SELECT ringshard.partition_config('nope')$$),
	($$SELECT * FROM ringshard.preview_add_node('x', 'nope')$$),
	($$SELECT * FROM ringshard.preview_remove_node('nope')$$),
	($$SELECT * FROM ringshard.preview_set_weight('nope', 2)$$),
	($$SELECT * FROM ringshard.preview_change('default', 'rename', 'n1', 1, false)$$),
	($$SELECT ringshard.proposed_replicas('k', 'nope', 'add', 'x')$$),
	($$SELECT ringshard.proposed_replicas('k', 'default', 'explode', 'x')$$),
	($$SELECT * FROM ringshard.plan_table_moves('t_solo', 'explode', 'x')$$),
	($$SELECT * FROM ringshard.preview_partition_config(E'version: v1\nnodes: []', 'nope')$$),
	($$SELECT ringshard.drop_ring('nope')$$),
	($$SELECT ringshard.set_replication_factor('nope', 2)$$),
	($$SELECT ringshard.add_node('x', ring => 'nope')$$),
	($$SELECT ringshard.remove_node('nope')$$),
	($$SELECT ringshard.remove_node('n1', 'nope')$$),
	($$SELECT ringshard.remove_node('m1')$$),
	($$SELECT ringshard.set_node_weight('nope', 2)$$),
	($$SELECT ringshard.set_node_weight('n1', 2, 'nope')$$),
	($$SELECT ringshard.set_node_address('nope', 'a.example:5432')$$),
	($$SELECT ringshard.mark_node_down('nope')$$),
	($$SELECT ringshard.mark_node_up('nope')$$),
	($$SELECT ringshard.drop_partition_map('nope')$$),
	($$SELECT ringshard.assign_partitions('n1', 0, 1, 'nope')$$),
	($$SELECT ringshard.unassign_partitions('nope', 0, 1)$$),
	($$SELECT ringshard.distribute_table('t_map', 'id', 'nope')$$),
	($$SELECT ringshard.distribute_table('nope', 'id')$$),
	($$SELECT ringshard.distribute_table('sentinel', 'nope')$$),
	($$SELECT ringshard.distribute_table('ringshard.annotated_tables', 'placed_by')$$),
	($$SELECT ringshard.distribute_table_by_partition('t_solo', 'id', 'ks', 'nope')$$),
	($$SELECT ringshard.distribute_table_by_partition('t_solo', 'id', 'ks', 'pm', 'v')$$),
	($$SELECT ringshard.undistribute_table('sentinel')$$),
	($$SELECT shard_of(s) FROM sentinel s$$),
	($$SELECT shard_of(ROW(1, 2))$$),
	($$SELECT * FROM ringshard.table_balance_report('sentinel')$$),
	($$SELECT * FROM ringshard.plan_table_moves('t_map', 'add', 'x')$$),
	($$SELECT * FROM ringshard.suggest_partition_boundaries('t_solo')$$)
) v(stmt);
-- A node that does not exist is reported as unknown, not as lacking an address.
SELECT pg_temp.err($$SELECT * FROM ringshard.node_execute(ARRAY['nope'], 'SELECT 1')$$) LIKE '42704: %'
       AS unknown_node_reported;
-- A statement of its own per node: as many statements as nodes, else 22023
-- before any node is reached; none of either, no row.
SELECT pg_temp.err($$SELECT * FROM ringshard_internal.node_execute_each(ARRAY['nope', 'nope2'], ARRAY['SELECT 1'])$$);
SELECT pg_temp.err($$SELECT * FROM ringshard_internal.node_execute_each(ARRAY['nope'], ARRAY[NULL])$$);
SELECT count(*) AS no_nodes_no_rows FROM ringshard_internal.node_execute_each('{}', '{}');
SELECT ringshard_internal.node_counts_each('{}', '{}') AS no_nodes_no_rows_counted;
SELECT pg_temp.err($$SELECT * FROM ringshard_internal.node_execute_each(ARRAY['nope'], ARRAY['SELECT 1'])$$) LIKE '42704: %'
       AS unknown_node_reported_each;

--
-- State that routing cannot use: empty rings, gaps, nodes all down
--
SELECT ringshard.mark_node_down('s1') AS s1_down;
SELECT stmt, pg_temp.err(stmt) AS error
FROM (VALUES
	($$SELECT shard_for('k', 'empty')$$),
	($$SELECT replicas_for('k', 'empty')$$),
	($$SELECT read_node_for('k', 'solo')$$),
	($$SELECT nodes_for('ks', 'k-1', 'gappy')$$),
	($$SELECT replicas_for('k', 'default', 0)$$),
	($$SELECT replicas_for('k', 'default', -1)$$)
) v(stmt);
SELECT ringshard.mark_node_up('s1') AS s1_up;
-- More replicas than nodes is all the nodes, once each.
SELECT replicas_for('k', 'default', 2147483647) @> ARRAY['n1', 'n2', 'n3'] AS all_nodes,
       cardinality(replicas_for('k', 'default', 2147483647)) AS replicas;

--
-- Duplicates, dependents and limits
--
SELECT stmt, pg_temp.err(stmt) AS error
FROM (VALUES
	($$SELECT ringshard.create_ring('default')$$),
	($$SELECT ringshard.create_ring('mem', algorithm => 'ketama')$$),
	($$SELECT ringshard.add_node('n1')$$),
	($$SELECT ringshard.add_node('m1', '10.0.0.9:11211', 'default')$$),
	($$SELECT ringshard.create_partition_map('pm')$$),
	($$SELECT ringshard.distribute_table('t_solo', 'id', 'default')$$),
	($$SELECT ringshard.distribute_table_by_partition('t_map', 'id', 'ks', 'default')$$),
	($$SELECT * FROM ringshard.preview_add_node('n1')$$),
	($$SELECT ringshard.proposed_replicas('k', 'default', 'add', 'n2')$$),
	($$INSERT INTO ringshard.ring_members VALUES ('default', 'n1', 1)$$),
	($$SELECT ringshard.remove_node('s1', 'solo')$$),
	($$SELECT ringshard.drop_ring('solo')$$),
	($$SELECT ringshard.drop_partition_map('pm')$$),
	($$DELETE FROM ringshard.rings WHERE ring_name = 'solo'$$),
	($$SELECT ringshard.create_ring('r', 0)$$),
	($$SELECT ringshard.create_ring('r', 65537)$$),
	($$SELECT ringshard.create_ring('r', 256, 65)$$),
	($$SELECT ringshard.create_ring('r', 256, 1, 'md5')$$),
	($$SELECT ringshard.create_ring(repeat('r', 1025))$$),
	($$SELECT ringshard.set_replication_factor('default', 0)$$),
	($$SELECT ringshard.add_node('x', weight => 0)$$),
	($$SELECT ringshard.add_node('x', weight => 'NaN')$$),
	($$SELECT ringshard.add_node('x', weight => '-Infinity')$$),
	($$SELECT ringshard.add_node('x', weight => 1e6)$$),
	($$SELECT ringshard.set_node_weight('n1', 1e300)$$),
	($$SELECT * FROM ringshard.preview_set_weight('n1', 1e300)$$),
	($$SELECT * FROM ringshard.compare_schemes(0, 5)$$),
	($$SELECT * FROM ringshard.compare_schemes(1, 2, 10000001)$$),
	($$SELECT ringshard.add_node('x', 'host=a.example password=secret')$$),
	($$SELECT ringshard.add_node('x', 'host=''unterminated')$$),
	($$SELECT ringshard.add_node('x', 'x''); DROP TABLE sentinel; --')$$),
	($$SELECT ringshard_worker.apply_topology('{}', 'w', 0)$$)
) v(stmt);

-- An address is host:port or a connection string that parses: a port that
-- is not a port, or a megabyte-long host, is refused like the rest.
SELECT label, pg_temp.err(format('SELECT ringshard.add_node(%L, %L)', 'x', address)) LIKE '22%' AS refused
FROM (VALUES ('db.example:abc', 'db.example:abc'), ('db.example:99999', 'db.example:99999'),
             ('db.example:-1', 'db.example:-1'),
             ('1 MB host name', repeat('h', 1024 * 1024) || ':5432')) v(label, address);

--
-- YAML partition configs: every bad document is refused, the map untouched
--
CREATE TEMP TABLE docs (label text, doc text);
INSERT INTO docs VALUES
	('wrong version',         E'version: "v2"\nnodes: []'),
	('version as a number',   E'version: 1\nnodes: []'),
	('version as a list',     E'version: [v1]\nnodes: []'),
	('missing version',       E'nodes: []'),
	('missing nodes',         E'version: v1'),
	('nodes as a scalar',     E'version: v1\nnodes: 5'),
	('nodes as a mapping',    E'version: v1\nnodes: {a: 1}'),
	('start as a word',       E'version: v1\nnodes:\n- address: a\n  partition_start: abc\n  partition_end: 1'),
	('start as a fraction',   E'version: v1\nnodes:\n- address: a\n  partition_start: 1.5\n  partition_end: 2'),
	('start as a string',     E'version: v1\nnodes:\n- address: a\n  partition_start: "1"\n  partition_end: 2'),
	('start in hex',          E'version: v1\nnodes:\n- address: a\n  partition_start: 0x10\n  partition_end: 20'),
	('start -1',              E'version: v1\nnodes:\n- address: a\n  partition_start: -1\n  partition_end: 1'),
	('end 256',               E'version: v1\nnodes:\n- address: a\n  partition_start: 0\n  partition_end: 256'),
	('huge start',            E'version: v1\nnodes:\n- address: a\n  partition_start: 99999999999999999999\n  partition_end: 1'),
	('start after end',       E'version: v1\nnodes:\n- address: a\n  partition_start: 9\n  partition_end: 5'),
	('address as a list',     E'version: v1\nnodes:\n- address: [a]\n  partition_start: 0\n  partition_end: 1'),
	('empty address',         E'version: v1\nnodes:\n- address: ""\n  partition_start: 0\n  partition_end: 1'),
	('address with NUL',      E'version: v1\nnodes:\n- address: "a\\0b"\n  partition_start: 0\n  partition_end: 1'),
	('1025-byte address',     E'version: v1\nnodes:\n- address: ' || repeat('a', 1025) || E'\n  partition_start: 0\n  partition_end: 1'),
	('missing address',       E'version: v1\nnodes:\n- partition_start: 0\n  partition_end: 1'),
	('missing end',           E'version: v1\nnodes:\n- address: a\n  partition_start: 0'),
	('duplicate address',     E'version: v1\nnodes:\n- address: a\n  address: b\n  partition_start: 0\n  partition_end: 1'),
	('duplicate version',     E'version: v1\nversion: v1\nnodes: []'),
	('duplicate nodes',       E'version: v1\nnodes: []\nnodes: []'),
	('unknown field',         E'version: v1\nnodes: []\nreplicas: 3'),
	('unknown entry field',   E'version: v1\nnodes:\n- address: a\n  partition_start: 0\n  partition_end: 1\n  weight: 2'),
	('merge key',             E'version: v1\nnodes:\n- <<: {address: a}\n  partition_start: 0\n  partition_end: 1'),
	('alias bomb',            E'version: v1\na: &a [x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b]\nd: [*c, *c, *c, *c, *c, *c, *c, *c]\nnodes: []'),
	('aliased entry',         E'version: v1\nnodes:\n- &e {address: a, partition_start: 0, partition_end: 1}\n- *e'),
	('two documents',         E'version: v1\nnodes: []\n---\nversion: v1\nnodes: []'),
	('a list document',       E'- version: v1'),
	('a scalar document',     E'hello'),
	('only a comment',        E'# nothing'),
	('tab indentation',       E'version: v1\nnodes:\n\t- address: a'),
	('unterminated quote',    E'version: "v1\nnodes: []'),
	('1 MB of brackets',      repeat('[', 1024 * 1024)),
	('deep nesting',          E'version: v1\nnodes: ' || repeat('[', 5000)),
	('a password',            E'version: v1\nnodes:\n- address: "host=a.example password=secret"\n  partition_start: 0\n  partition_end: 255'),
	('just over 1 MB',        E'version: v1\nnodes: []\n#' || repeat('x', 1024 * 1024 - 22)),
	('2 MB',                  E'version: v1\nnodes: []\n#' || repeat('x', 2 * 1024 * 1024));
SELECT label, pg_temp.err(format('SELECT ringshard.load_partition_config(%L, %L)', doc, 'pm')) AS error
FROM docs ORDER BY label COLLATE "C";
-- The largest document allowed is exactly 1 MB.
SELECT count(*) AS entries FROM ringshard.parse_partition_config(E'version: v1\nnodes: []\n#' || repeat('x', 1024 * 1024 - 23));
-- A YAML null is not an address: "address: ~", "address: null" and
-- "address:" are all refused like an empty one (and create no node).
SELECT label, pg_temp.refused_clearly(format('SELECT ringshard.load_partition_config(%L, %L)', doc, 'pm')) AS refused
FROM (VALUES
	('address:',      E'version: v1\nnodes:\n- address:\n  partition_start: 0\n  partition_end: 1'),
	('address: ~',    E'version: v1\nnodes:\n- address: ~\n  partition_start: 0\n  partition_end: 1'),
	('address: null', E'version: v1\nnodes:\n- address: null\n  partition_start: 0\n  partition_end: 1'),
	('address: Null', E'version: v1\nnodes:\n- address: Null\n  partition_start: 0\n  partition_end: 1')
) v(label, doc);
-- 'pm' still has its one range; no node was created by a refused document.
SELECT map_name, node_name, partition_start, partition_end FROM ringshard.partition_assignments
WHERE map_name = 'pm';
SELECT count(*) AS nodes FROM ringshard.nodes;

--
-- Nothing above changed the catalog, and nothing was an internal error
--
SELECT pg_temp.catalog() = :'catalog_before' AS catalog_unchanged, pg_temp.catalog_counts();
SELECT count(*) AS statements_tried,
       count(*) FILTER (WHERE sqlstate = 'XX000') AS internal_errors,
       count(*) FILTER (WHERE changed) AS changed_the_catalog
FROM tried;
SELECT left(stmt, 90) AS stmt, sqlstate, changed FROM tried WHERE sqlstate = 'XX000' OR changed OR sqlstate IS NULL;

--
-- Quotes and SQL metacharacters as names
--
-- Each name is a ring, a node on every such ring, a partition map holding
-- every such node, and parts of table and column names.  They must work as
-- plain names: routing answers them back, and nothing is ever executed.
CREATE TEMP TABLE weird (name text);
INSERT INTO weird VALUES
	($w$x'); DROP TABLE sentinel; --$w$),
	($w$x"); DROP TABLE sentinel; --$w$),
	('"'), ('\'), ('$$'), (''''), ($w$%s %I %L $1$w$), ('a;b'), (E'tab\there');
SELECT count(*) FROM weird, ringshard.create_ring(name, 16, 2) c;
SELECT count(*) FROM weird w1, weird w2, ringshard.add_node(w2.name, ring => w1.name) a;
SELECT count(*) FROM weird, ringshard.create_partition_map(name) c;
SELECT count(*) FROM weird w1, weird w2, ringshard.assign_partitions(w2.name, 0, 255, w1.name) a;
-- Rings built from the same members route alike whatever they are called.
SELECT ringshard.create_ring('plain', 16, 2);
SELECT count(*) FROM weird, ringshard.add_node(name, ring => 'plain') a;
SELECT w.name, count(*) FILTER (WHERE shard_for(k, w.name) = shard_for(k, 'plain')) AS same_owner,
       count(*) FILTER (WHERE replicas_for(k, w.name) = replicas_for(k, 'plain')) AS same_replicas,
       count(*) FILTER (WHERE shard_for(k, w.name) IN (SELECT name FROM weird)) AS answered_a_name,
       count(*) FILTER (WHERE cardinality(nodes_for('ks', k, w.name)) = 9) AS all_holders
FROM weird w, (SELECT 'key-' || g AS k FROM generate_series(1, 50) g) keys
GROUP BY w.name ORDER BY w.name COLLATE "C";
SELECT count(*) AS points FROM weird, ringshard.ring_points(name);
SELECT count(*) AS balance_rows FROM weird, ringshard.ring_balance(name);
SELECT count(*) AS issues FROM weird, ringshard.check_partition_map(name);
SELECT count(*) AS preview_rows FROM weird, ringshard.preview_add_node($n$y'); DROP TABLE sentinel; --$n$, name);
SELECT count(*) AS copy_rows FROM weird, ringshard.preview_remove_node_copies('"', name);
-- partition_config() writes the names as YAML that parses back to them.
SELECT count(*) FILTER (WHERE c.address IN (SELECT name FROM weird)) AS addresses_round_trip
FROM weird w, ringshard.parse_partition_config(ringshard.partition_config(w.name)) c;

-- Annotated tables with such table and column names.
CREATE TABLE "x'); DROP TABLE sentinel; --" ("""" text, "$$" text, "\" int);
INSERT INTO "x'); DROP TABLE sentinel; --" SELECT 'k' || g, 'ks' || g % 3, g FROM generate_series(1, 30) g;
SELECT ringshard.distribute_table($t$"x'); DROP TABLE sentinel; --"$t$, '"', $r$x'); DROP TABLE sentinel; --$r$);
CREATE TABLE "$$;" ("'k" text, "ks'" text);
INSERT INTO "$$;" SELECT 'k' || g, 'ks''' || g % 3 FROM generate_series(1, 30) g;
SELECT ringshard.distribute_table_by_partition('"$$;"', $c$'k$c$, map => '\', keyspace_column => $c$ks'$c$);
SELECT table_name, key_column, placement, placed_by, keyspace, keyspace_column
FROM ringshard.annotated_tables ORDER BY table_name::text COLLATE "C";
SELECT count(*) FILTER (WHERE shard_of(t) = shard_for(t."""", $r$x'); DROP TABLE sentinel; --$r$)) AS shard_of_agrees,
       count(*) FILTER (WHERE replicas_of(t) = replicas_for(t."""", $r$x'); DROP TABLE sentinel; --$r$)) AS replicas_of_agrees
FROM "x'); DROP TABLE sentinel; --" t;
SELECT count(*) FILTER (WHERE replicas_of(t) = nodes_for(t."ks'", t."'k", '\')) AS map_rows_agree
FROM "$$;" t;
SELECT sum(rows_owned) AS rows_owned FROM ringshard.table_balance_report($t$"x'); DROP TABLE sentinel; --"$t$);
SELECT sum(rows_held) AS rows_held FROM ringshard.table_balance_report('"$$;"');
SELECT count(*) > 0 AS some_rows_move
FROM ringshard.plan_table_moves($t$"x'); DROP TABLE sentinel; --"$t$, 'add', $n$y'); DROP TABLE sentinel; --$n$);
SELECT sum(rows) > 0 AS some_rows_move
FROM ringshard.plan_table_summary($t$"x'); DROP TABLE sentinel; --"$t$, 'remove', '"');
SELECT sum(rows) AS rows FROM ringshard.suggest_partition_boundaries('"$$;"');
-- Renaming the key column to another hostile name is followed.
ALTER TABLE "x'); DROP TABLE sentinel; --" RENAME COLUMN """" TO "'; DROP TABLE sentinel; --";
SELECT key_column FROM ringshard.annotated_tables WHERE placed_by = $r$x'); DROP TABLE sentinel; --$r$;
SELECT count(*) AS rows_still_placed FROM "x'); DROP TABLE sentinel; --" t WHERE shard_of(t) IS NOT NULL;
-- Hostile names in error messages are only quoted.
SELECT pg_temp.err($$SELECT ringshard.remove_node('n1', 'x''); DROP TABLE sentinel; --')$$) AS error;
SELECT pg_temp.err($$SELECT ringshard.drop_ring('x''); DROP TABLE sentinel; --')$$) AS error;
SELECT pg_temp.err($$SELECT ringshard.create_ring('%s %I %L $1')$$) AS error;
-- A YAML address naming such a node (which has no address) is that node;
-- one naming no node is refused as an address, never run.
SELECT ringshard.load_partition_config(E'version: v1\nnodes:\n- address: "x\x27); DROP TABLE sentinel; --"\n  partition_start: 0\n  partition_end: 255', '$$');
SELECT map_name, node_name, partition_start, partition_end FROM ringshard.partition_assignments WHERE map_name = '$$';
SELECT pg_temp.err($$SELECT ringshard.load_partition_config(E'version: v1\nnodes:\n- address: "y\x27); DROP TABLE sentinel; --"\n  partition_start: 0\n  partition_end: 255', 'pm')$$) AS error;

-- The sentinel is still there, untouched.
SELECT * FROM sentinel;
SELECT count(*) FILTER (WHERE sqlstate = 'XX000') AS internal_errors FROM tried;

-- Every hostile object can be removed again, leaving the catalog as it was.
DROP TABLE "x'); DROP TABLE sentinel; --", "$$;";
SELECT count(*) FROM weird, ringshard.drop_ring(name) d;
SELECT count(*) FROM weird, ringshard.drop_partition_map(name) d;
SELECT ringshard.drop_ring('plain');
SELECT pg_temp.catalog() = :'catalog_before' AS catalog_as_before, pg_temp.catalog_counts();

-- Leave nothing behind for the suites that follow.
DROP TABLE t_solo, t_map, sentinel;

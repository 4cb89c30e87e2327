-- Every file starts from a fresh extension: the suite shares one database.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS ringshard CASCADE;
CREATE EXTENSION ringshard;
RESET client_min_messages;
-- docs/routing.md §5: the 256 partitions and partition maps.
\set SHOW_CONTEXT never

-- §6 partition vectors
SELECT keyspace, key, partition_for(keyspace, key) AS partition
  FROM (VALUES ('faces', 'face-001'), ('users', '1'), ('ks-1', '3201012345670001'),
               ('default', 'ñandú'), ('', '')) AS v(keyspace, key);

SELECT count(*) AS disagreements
  FROM (VALUES ('faces', 'face-001', 28), ('users', '1', 240), ('ks-1', '3201012345670001', 86),
               ('default', 'ñandú', 115), ('', '', 138)) AS v(keyspace, key, partition)
 WHERE partition_for(keyspace, key) <> partition;

-- keys of other types use their canonical bytes; NULL routes nowhere
SELECT partition_for('users', 1) AS int_key, partition_for('ks-1', 3201012345670001::bigint) AS bigint_key,
       partition_for('users', NULL::text) IS NULL AS null_key, partition_for(NULL, 'x') IS NULL AS null_keyspace;

-- partitions spread evenly: 25,600 keys, every partition used, none far off 100
SELECT count(DISTINCT p) AS partitions_used, min(n) > 50 AS none_starved, max(n) < 160 AS none_hot
  FROM (SELECT partition_for('faces', 'face-' || g) AS p, count(*) OVER (PARTITION BY partition_for('faces', 'face-' || g)) AS n
          FROM generate_series(1, 25600) g) s;

-- the 'default' map exists and is empty: every partition is a gap
SELECT * FROM ringshard.check_partition_map();
SELECT ringshard.partition_nodes(28);
SELECT nodes_for('faces', 'face-001');

-- the FREMIS-N manual's two nodes
SELECT ringshard.assign_partitions('node1', 0, 127);
SELECT ringshard.assign_partitions('node2', 128, 255);
SELECT * FROM ringshard.check_partition_map();
SELECT nodes_for('faces', 'face-001') AS faces_001, nodes_for('users', '1') AS users_1,
       nodes_for('users', '1', 'default') AS users_1_default_map;
SELECT ringshard.partition_nodes(127) AS p127, ringshard.partition_nodes(128) AS p128;

-- the FREMIS-N manual's invalid example: node1 0..100, node2 150..255 (gap 101..149)
SELECT ringshard.create_partition_map('broken');
SELECT ringshard.assign_partitions('node1', 0, 100, 'broken');
SELECT ringshard.assign_partitions('node2', 150, 255, 'broken');
SELECT * FROM ringshard.check_partition_map('broken');
-- a key in the gap is an error naming partition, map and keyspace
SELECT g AS key, partition_for('faces', 'face-' || g) AS partition
  FROM generate_series(1, 400) g
 WHERE partition_for('faces', 'face-' || g) BETWEEN 101 AND 149 LIMIT 1;
SELECT nodes_for('faces', 'face-1', 'broken');

-- replication: a partition held by several nodes goes to all of them
SELECT ringshard.assign_partitions('node3', 0, 63);
SELECT * FROM ringshard.check_partition_map();
SELECT nodes_for('faces', 'face-001') AS replicated;

-- ranges of one node merge; unassigning splits them
SELECT ringshard.assign_partitions('node3', 64, 70);
SELECT ringshard.assign_partitions('node3', 60, 80);
SELECT node_name, partition_start, partition_end FROM ringshard.partition_assignments
 WHERE map_name = 'default' ORDER BY node_name, partition_start;
SELECT ringshard.unassign_partitions('node3', 10, 19);
SELECT node_name, partition_start, partition_end FROM ringshard.partition_assignments
 WHERE map_name = 'default' AND node_name = 'node3' ORDER BY partition_start;
SELECT * FROM ringshard.check_partition_map();
SELECT ringshard.unassign_partitions('node3', 0, 255);
SELECT * FROM ringshard.check_partition_map();
-- node3 is in no map and no ring any more: forgotten
SELECT count(*) AS node3_rows FROM ringshard.nodes WHERE node_name = 'node3';

-- errors: bounds, order, unknown map, unknown holder, bad partition number
SELECT ringshard.assign_partitions('node1', -1, 10);
SELECT ringshard.assign_partitions('node1', 0, 256);
SELECT ringshard.assign_partitions('node1', 20, 10);
SELECT ringshard.assign_partitions('node1', 0, 10, 'no-such-map');
SELECT ringshard.unassign_partitions('node2', 0, 10);
SELECT ringshard.partition_nodes(256);
SELECT ringshard.partition_nodes(0, 'no-such-map');
SELECT nodes_for('faces', 'x', 'no-such-map');
SELECT ringshard.create_partition_map('broken');
SELECT ringshard.create_partition_map('');

-- all or nothing: a failed change leaves the map as it was
BEGIN;
SELECT ringshard.assign_partitions('node4', 0, 255);
SELECT nodes_for('faces', 'face-001') AS inside_transaction;
ROLLBACK;
SELECT nodes_for('faces', 'face-001') AS after_rollback;

-- a node may hold partitions and be on a ring at once
SELECT ringshard.add_node('node1');
SELECT shard_for('x') AS ring_owner, nodes_for('faces', 'face-001') AS map_holders;

-- a map name held in a PL/pgSQL variable routes on the map it names at each
-- call, though PL/pgSQL keeps the expression for the whole transaction
SELECT ringshard.create_partition_map('all_node3');
SELECT ringshard.assign_partitions('node3', 0, 255, 'all_node3');
CREATE FUNCTION holders_in_loop(key text, maps text[]) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE m text; answers text := '';
BEGIN
  FOREACH m IN ARRAY maps LOOP
    answers := answers || m || '=' || nodes_for('faces', key, m)::text || ' ' ||
               ringshard.partition_nodes(partition_for('faces', key), m)::text || '; ';
  END LOOP;
  RETURN answers;
END $$;
SELECT holders_in_loop('face-001', ARRAY['default', 'all_node3', 'default']);
DROP FUNCTION holders_in_loop(text, text[]);
SELECT ringshard.drop_partition_map('all_node3');

SELECT ringshard.drop_partition_map('broken');
SELECT ringshard.drop_partition_map('broken');

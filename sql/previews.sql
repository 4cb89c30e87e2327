-- Every file starts from a fresh extension: the suite shares one database.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS ringshard CASCADE;
CREATE EXTENSION ringshard;
RESET client_min_messages;
-- Previews of topology changes: exact, pure, and equal to what happens.
\set SHOW_CONTEXT never
CREATE SCHEMA previews;
SET search_path = previews, public;

-- A small ring whose ranges can be checked by hand: 2 vnodes per node.
SELECT ringshard.create_ring('tiny', vnodes => 2);
SELECT ringshard.add_node('alpha', ring => 'tiny');
SELECT ringshard.add_node('beta', ring => 'tiny');
SELECT token, node FROM ringshard.ring_points('tiny');
-- the points gamma would add
SELECT 'gamma#vnode#' || i AS label, ring_token('gamma#vnode#' || i) AS token FROM generate_series(0, 1) i ORDER BY 2;
-- each of gamma's points captures (previous point, its token]: two ranges
SELECT * FROM ringshard.preview_add_node('gamma', 'tiny');

-- previews are pure: the catalog and routing do not change
SELECT count(*) AS nodes_on_tiny FROM ringshard.ring_members WHERE ring_name = 'tiny';
SELECT count(*) AS gamma_rows FROM ringshard.nodes WHERE node_name = 'gamma';

-- the moved ranges are exactly gamma's share once it joins
CREATE TEMP TABLE previewed AS SELECT * FROM ringshard.preview_add_node('gamma', 'tiny');
SELECT ringshard.add_node('gamma', ring => 'tiny');
SELECT (SELECT sum(CASE WHEN range_start < range_end THEN range_end::numeric - range_start::numeric
                         ELSE range_end::numeric + 18446744073709551616 - range_start::numeric END) FROM previewed)
       = (SELECT owned_tokens FROM ringshard.ring_balance('tiny') WHERE node = 'gamma') AS exact_share;

-- removing it again moves the same ranges back
SELECT from_node, to_node, range_start, range_end FROM ringshard.preview_remove_node('gamma', 'tiny')
EXCEPT
SELECT to_node, from_node, range_start, range_end FROM previewed;

-- The hash-ring chapter's ring: 3 -> 4 nodes moves about a quarter, all to the new node
SELECT ringshard.add_node('shard-jakarta-01');
SELECT ringshard.add_node('shard-surabaya-02');
SELECT ringshard.add_node('shard-makassar-03');
SELECT count(DISTINCT to_node) AS targets, min(to_node) AS target, round(sum(fraction)::numeric, 4) AS moved
  FROM ringshard.preview_add_node('shard-bandung-04');

-- every key's new owner matches the preview: 20,000 keys checked
CREATE TEMP TABLE moves AS SELECT * FROM ringshard.preview_add_node('shard-bandung-04');
CREATE TEMP TABLE keys AS SELECT 'key-' || g AS k, shard_for('key-' || g) AS before FROM generate_series(1, 20000) g;
SELECT ringshard.add_node('shard-bandung-04');
SELECT count(*) FILTER (WHERE moved_by_preview <> (shard_for(k) <> before)) AS disagreements,
       count(*) FILTER (WHERE shard_for(k) <> before) AS moved
  FROM (SELECT k, before,
               EXISTS (SELECT FROM moves m
                        WHERE CASE WHEN m.range_start < m.range_end
                                   THEN ring_token(k) > m.range_start AND ring_token(k) <= m.range_end
                                   ELSE ring_token(k) > m.range_start OR ring_token(k) <= m.range_end END) AS moved_by_preview
          FROM keys) s;

-- reweighting: keys move only to or from the reweighted node
SELECT bool_and(from_node = 'shard-jakarta-01' OR to_node = 'shard-jakarta-01') AS only_jakarta,
       bool_and(to_node = 'shard-jakarta-01') AS all_towards_it
  FROM ringshard.preview_set_weight('shard-jakarta-01', 2);

-- with replication 2: copies gained and lost when a node joins
SELECT ringshard.set_replication_factor('default', 2);
SELECT node, change, round(sum(fraction)::numeric, 4) AS fraction
  FROM ringshard.preview_add_node_copies('shard-medan-05') GROUP BY node, change ORDER BY node, change;
SELECT round(sum(fraction) FILTER (WHERE change = 'gains')::numeric, 6)
       = round(sum(fraction) FILTER (WHERE change = 'loses')::numeric, 6) AS gains_equal_losses
  FROM ringshard.preview_add_node_copies('shard-medan-05');

-- Row-level plans for an annotated table
CREATE TABLE citizens (nik bigint PRIMARY KEY, name text);
INSERT INTO citizens SELECT 3201012345670000 + g, 'c' || g FROM generate_series(1, 4000) g;
SELECT ringshard.distribute_table('citizens', 'nik');
SELECT * FROM ringshard.plan_table_summary('citizens', 'remove', 'shard-bandung-04');
SELECT count(*) AS rows_with_new_replicas FROM ringshard.plan_table_moves('citizens', 'remove', 'shard-bandung-04');
-- one node leaves: each of those rows gains one node, so one copy each
SELECT sum(rows) = (SELECT count(*) FROM ringshard.plan_table_moves('citizens', 'remove', 'shard-bandung-04')) AS one_copy_per_row
  FROM ringshard.plan_table_summary('citizens', 'remove', 'shard-bandung-04');
-- the plan equals what happens when the node is removed
CREATE TEMP TABLE plan AS SELECT * FROM ringshard.plan_table_moves('citizens', 'remove', 'shard-bandung-04');
CREATE TEMP TABLE placed AS SELECT nik, replicas_of(c) AS before FROM citizens c;
SELECT ringshard.remove_node('shard-bandung-04');
SELECT count(*) AS disagreements
  FROM citizens c JOIN placed p USING (nik) LEFT JOIN plan ON plan.key = c.nik::text
 WHERE replicas_of(c) IS DISTINCT FROM coalesce(plan.to_replicas, p.before);
SELECT * FROM ringshard.plan_table_moves('citizens', 'frobnicate', 'x');
SELECT * FROM ringshard.plan_table_moves('citizens', 'remove', 'no-such-node');
-- a mistyped change is one clean error: no CONTEXT, no internal query, and
-- on an empty table too (it used to return no rows there)
\set SHOW_CONTEXT errors
SELECT * FROM ringshard.plan_table_summary('citizens', 'ad', 'shard-bandung-04');
CREATE TABLE no_citizens (nik bigint PRIMARY KEY);
SELECT ringshard.distribute_table('no_citizens', 'nik');
SELECT * FROM ringshard.plan_table_summary('no_citizens', 'ad', 'shard-bandung-04');
SELECT * FROM ringshard.plan_table_moves('no_citizens', 'ad', 'shard-bandung-04');
-- called from the user's own code, the error keeps the user's context, not ringshard's
DO $$ BEGIN PERFORM * FROM ringshard.plan_table_summary('citizens', 'ad', 'x'); END $$;
\set SHOW_CONTEXT never
SELECT ringshard.undistribute_table('no_citizens');
DROP TABLE no_citizens;
SELECT ringshard.proposed_replicas('key-1'::text, 'default', 'add', 'shard-bandung-04') AS proposed,
       replicas_for('key-1') AS current;
-- a change that changes nothing proposes the current replicas, for every key type
SELECT count(*) FILTER (WHERE ringshard.proposed_replicas(('k' || g)::char(6), 'default', 'set_weight', 'shard-jakarta-01', 1)
                              <> replicas_for(('k' || g)::char(6))) AS char_keys_differing,
       count(*) FILTER (WHERE ringshard.proposed_replicas(g::bigint, 'default', 'set_weight', 'shard-jakarta-01', 1)
                              <> replicas_for(g::bigint)) AS bigint_keys_differing
  FROM generate_series(1, 300) g;

-- Scheme comparison: 3 -> 4 servers, measured
SELECT scheme, round(moved_fraction::numeric, 2) AS moved, ideal_fraction AS ideal,
       max_over_mean < 1.1 AS balanced
  FROM ringshard.compare_schemes(3, 4);
SELECT scheme, round(moved_fraction::numeric, 2) AS moved FROM ringshard.compare_schemes(4, 3, 20000);
SELECT * FROM ringshard.compare_schemes(0, 4);

-- Balance reports.  The three shards on ring default, 256 vnodes each: shares
-- within a few per cent of 1/3 (1/sqrt(256) = 6.25 % is the expected spread).
SELECT * FROM ringshard.ring_balance_report();
SELECT count(*) FILTER (WHERE abs(deviation_pct) < 12.5) AS within_twice_the_spread FROM ringshard.ring_balance_report();
-- 2 vnodes per node are far from even
SELECT * FROM ringshard.ring_balance_report('tiny');
-- a constant sharding key is all skew: every row on one node
CREATE TABLE events (day date, payload text);
INSERT INTO events SELECT '2024-01-01', 'e' || g FROM generate_series(1, 300) g;
SELECT ringshard.distribute_table('events', 'day');
SELECT * FROM ringshard.table_balance_report('events');

-- Partition maps: previews and suggested boundaries
SELECT ringshard.assign_partitions('node1', 0, 127);
SELECT ringshard.assign_partitions('node2', 128, 255);
SELECT * FROM ringshard.preview_partition_assignments('{node1,node2,node3}', '{0,86,171}', '{85,170,255}');
SELECT * FROM ringshard.preview_partition_config($$version: "v1"
nodes:
- {address: node1, partition_start: 0, partition_end: 127}
- {address: node2, partition_start: 128, partition_end: 255}
- {address: node3, partition_start: 0, partition_end: 255}
$$);
SELECT count(*) AS unchanged_rows FROM ringshard.preview_partition_assignments('{node1,node2}', '{0,128}', '{127,255}');
SELECT * FROM ringshard.preview_partition_assignments('{node1}', '{0}', '{300}');
CREATE TABLE faces (keyspace_id text, face_id text);
-- 90 % of the rows in partitions 0..31
INSERT INTO faces SELECT 'faces', 'face-' || g FROM generate_series(1, 20000) g
 WHERE partition_for('faces', 'face-' || g) < 32 OR g % 9 = 0;
SELECT ringshard.distribute_table_by_partition('faces', 'face_id', keyspace_column => 'keyspace_id');
SELECT node, partition_start, partition_end, rows, current_rows FROM ringshard.suggest_partition_boundaries('faces');
-- the suggestion covers 0..255 without gaps and splits rows more evenly
SELECT min(partition_start) = 0 AS from_zero, max(partition_end) = 255 AS to_255,
       sum(partition_end - partition_start + 1) = 256 AS no_gap_no_overlap,
       max(rows)::float8 / avg(rows) < max(current_rows)::float8 / avg(current_rows) AS more_even
  FROM ringshard.suggest_partition_boundaries('faces');
RESET search_path;
DROP SCHEMA previews CASCADE;

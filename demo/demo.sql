-- ringshard demo: routing in SQL, end to end.  The hash-ring chapter's three
-- shards with NIKs (Indonesian national identity numbers) as keys, a fourth
-- shard joining, a node going down, and the FREMIS-N coordinator's
-- 256-partition map.  The cluster walkthrough (demo/cluster.sql) follows.
--   bash demo/run      (installs, builds, starts a throwaway server, runs this)
\set SHOW_CONTEXT never
\pset null '(null)'

CREATE EXTENSION ringshard;

------------------------------------------------------------------------------
-- 1. The hash ring: three shards, 256 vnodes each, replication factor 2
------------------------------------------------------------------------------
-- The built-in ring 'default' exists, empty, with 256 vnodes per unit weight.
SELECT * FROM ringshard.rings;
SELECT ringshard.set_replication_factor('default', 2);
SELECT ringshard.add_node('shard-jakarta-01',  '10.0.1.10:5432');
SELECT ringshard.add_node('shard-surabaya-02', '10.0.2.20:5432');
SELECT ringshard.add_node('shard-makassar-03', '10.0.3.30:5432');
SELECT count(*) AS points FROM ringshard.ring_points();
SELECT * FROM ringshard.ring_points() LIMIT 3;

-- The four NIKs: token, owner (first point clockwise with token >= the key's)
-- and replica set (owner first, then the next distinct node clockwise).
SELECT nik, ring_token(nik) AS token, shard_for(nik) AS owner, replicas_for(nik) AS replicas
  FROM (VALUES ('3201012345670001'), ('3578021122330002'),
               ('7371034455660003'), ('3171059988770004')) AS v(nik);

-- The same NIKs as bigint route by their decimal text: the same answers.
-- Every key routes by its canonical bytes (docs/routing.md §1), which
-- ringshard.key_bytes() shows: equal values route alike whatever their type
-- or spelling, and no session setting changes them.
SELECT nik, ring_token(nik) AS token, shard_for(nik) AS owner, replicas_for(nik) AS replicas,
       shard_for(nik) = shard_for(nik::text) AND replicas_for(nik) = replicas_for(nik::text) AS same_as_text
  FROM (VALUES (3201012345670001::bigint), (3578021122330002),
               (7371034455660003), (3171059988770004)) AS v(nik);

SELECT k AS key, pg_typeof(k) AS type, convert_from(ringshard.key_bytes(k), 'UTF8') AS bytes, ring_token(k) AS token
  FROM (VALUES (3201012345670001::numeric(16,0)), (1.50), ('-0.000'::numeric)) AS v(k);
SELECT convert_from(ringshard.key_bytes('2026-01-31 14:05:00+07'::timestamptz), 'UTF8') AS timestamptz_bytes,
       convert_from(ringshard.key_bytes('ab'::char(5)), 'UTF8') || '|' AS char_bytes;

-- ringtoken is an unsigned 64-bit type: ordered, castable to numeric.
SELECT ring_token('3201012345670001') > ring_token('3578021122330002') AS unsigned_order,
       ring_token('3201012345670001')::numeric / 2^64 AS position_on_ring;

-- How evenly the ring divides the 2^64 tokens (ideal share: 1/N), with the
-- deviation from the ideal in per cent (exact figures: ringshard.ring_balance()).
SELECT * FROM ringshard.ring_balance_report();

------------------------------------------------------------------------------
-- 2. A fourth node joins: what moves?
------------------------------------------------------------------------------
-- 100,000 generated NIK-like keys, with their owner on three nodes and the
-- naive placement hash mod N (same MurmurHash3 token, mod 3).
CREATE TEMP TABLE placement AS
SELECT key, shard_for(key) AS ring_before, ring_token(key)::numeric % 3 AS mod_before
  FROM (SELECT (3201010000000000 + g * 7919)::text AS key FROM generate_series(1, 100000) g) k;

-- Before anything changes: the exact token ranges that would move, computed
-- from the ring's geometry (nothing is changed by a preview).
SELECT from_node, to_node, count(*) AS ranges, round(sum(fraction)::numeric, 4) AS fraction
  FROM ringshard.preview_add_node('shard-bandung-04')
 GROUP BY 1, 2 ORDER BY 1, 2;

SELECT ringshard.add_node('shard-bandung-04', '10.0.4.40:5432');

SELECT count(*) AS keys,
       count(*) FILTER (WHERE shard_for(key) <> ring_before) AS ring_moved,
       round(100.0 * count(*) FILTER (WHERE shard_for(key) <> ring_before) / count(*), 1) AS ring_moved_pct,
       count(*) FILTER (WHERE shard_for(key) <> ring_before
                          AND shard_for(key) <> 'shard-bandung-04') AS ring_moved_elsewhere,
       count(*) FILTER (WHERE ring_token(key)::numeric % 4 <> mod_before) AS mod_moved,
       round(100.0 * count(*) FILTER (WHERE ring_token(key)::numeric % 4 <> mod_before) / count(*), 1) AS mod_moved_pct
  FROM placement;

-- The moved keys came from all three old nodes, and all went to the new one:
-- the fraction moved is the new node's share of the ring (see the report below).
SELECT ring_before AS from_node, count(*) AS keys_to_bandung
  FROM placement WHERE shard_for(key) <> ring_before
 GROUP BY 1 ORDER BY 1;

SELECT * FROM ringshard.ring_balance_report();

-- The same experiment in the core for five placement schemes (keys key-0 ..
-- key-99999, 3 -> 4 nodes): share of keys moved against the ideal 1/4.
SELECT scheme, moved_fraction, ideal_fraction, round(max_over_mean::numeric, 4) AS max_over_mean
  FROM ringshard.compare_schemes(3, 4, 100000);

-- Removing the node again puts every key back where it was.
SELECT ringshard.remove_node('shard-bandung-04');
SELECT count(*) FILTER (WHERE shard_for(key) <> ring_before) AS not_back FROM placement;

------------------------------------------------------------------------------
-- 3. A node goes down: reads go to a healthy replica, ownership stays
------------------------------------------------------------------------------
-- 3201012345670001 is held by {shard-surabaya-02, shard-jakarta-01}; reads
-- pick a random healthy one.
SELECT read_node_for('3201012345670001') AS read_from, count(*) AS reads
  FROM generate_series(1, 1000) GROUP BY 1 ORDER BY 1;

SELECT ringshard.mark_node_down('shard-surabaya-02');
SELECT node_name, is_up FROM ringshard.nodes ORDER BY node_name;
SELECT read_node_for('3201012345670001') AS read_from, count(*) AS reads
  FROM generate_series(1, 1000) GROUP BY 1 ORDER BY 1;
SELECT shard_for('3201012345670001') AS owner_unchanged;

-- With every replica down there is nowhere to read from: an error, not a guess.
SELECT ringshard.mark_node_down('shard-jakarta-01');
\set ON_ERROR_STOP off
SELECT read_node_for('3201012345670001');
\set ON_ERROR_STOP on
SELECT ringshard.mark_node_up('shard-jakarta-01');
SELECT ringshard.mark_node_up('shard-surabaya-02');

------------------------------------------------------------------------------
-- 4. The 256-partition map: the FREMIS-N coordinator's config.yml
------------------------------------------------------------------------------
SELECT ringshard.load_partition_config($$version: "v1"
nodes:
- address: "0.0.0.0:4003"  # node1
  partition_start: 0
  partition_end: 127
- address: "0.0.0.0:4004"  # node2
  partition_start: 128
  partition_end: 255
$$) AS entries;

-- partition = SHA-1("{keyspace_id}-{face_id}"), first 4 bytes as uint32, mod 256
SELECT partition_for('faces', 'face-001') AS partition,
       nodes_for('faces', 'face-001') AS nodes,
       ringshard.partition_nodes(128) AS holders_of_128;
SELECT * FROM ringshard.check_partition_map();  -- no rows: no gap, no overlap
SELECT ringshard.partition_config();

-- The FREMIS-N manual's invalid example: node1 0-100, node2 150-255 (gap 101-149).
SELECT ringshard.load_partition_config($$version: "v1"
nodes:
- address: "0.0.0.0:4003"
  partition_start: 0
  partition_end: 100
- address: "0.0.0.0:4004"
  partition_start: 150
  partition_end: 255
$$, 'broken') AS entries;
SELECT * FROM ringshard.check_partition_map('broken');
SELECT ringshard.partition_config('broken');
-- A key in the gap is an error naming its partition, never a silent fallback.
SELECT face_id, partition_for('faces', face_id) AS partition
  FROM (SELECT 'face-' || g AS face_id FROM generate_series(1, 100) g) f
 WHERE partition_for('faces', face_id) BETWEEN 101 AND 149 LIMIT 1;
\set ON_ERROR_STOP off
SELECT nodes_for('faces', 'face-1', 'broken');
\set ON_ERROR_STOP on
SELECT ringshard.drop_partition_map('broken');

-- A partition held by several nodes is replicated: give partitions 0-127 a
-- second holder.  check_partition_map reports the overlap.
SELECT ringshard.assign_partitions('0.0.0.0:4006', 0, 127);
SELECT * FROM ringshard.check_partition_map();
SELECT nodes_for('faces', 'face-001') AS replicated;
SELECT ringshard.partition_config();

------------------------------------------------------------------------------
-- 5. An annotated table placed by the partition map
------------------------------------------------------------------------------
CREATE TABLE faces (
    keyspace_id text NOT NULL,
    face_id     text NOT NULL,
    enrolled_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (keyspace_id, face_id)
);
SELECT ringshard.distribute_table_by_partition('faces', 'face_id', keyspace_column => 'keyspace_id');
SELECT * FROM ringshard.annotated_tables;

INSERT INTO faces (keyspace_id, face_id)
SELECT ks, 'face-' || lpad(g::text, greatest(3, length(g::text)), '0')
  FROM unnest(ARRAY['faces', 'visitors']) ks, generate_series(1, 5000) g;

SELECT f.keyspace_id, f.face_id, partition_for(f.keyspace_id, f.face_id) AS partition,
       shard_of(f) AS shard, replicas_of(f) AS replicas
  FROM faces f WHERE f.face_id IN ('face-001', 'face-002', 'face-003')
 ORDER BY 1, 2;

-- Rows owned (first holder) and held (with replicas) per node, and each
-- node's share of the rows held against an equal share of the map's nodes.
SELECT * FROM ringshard.table_balance_report('faces');

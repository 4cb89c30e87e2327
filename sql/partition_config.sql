-- Every file starts from a fresh extension: the suite shares one database.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS ringshard CASCADE;
CREATE EXTENSION ringshard;
RESET client_min_messages;
-- The FREMIS-N coordinator's YAML config: load, write back, errors.
\set SHOW_CONTEXT never
SELECT ringshard.load_partition_config($$version: "v1"
nodes:
- address: "0.0.0.0:4003"  # node1
  partition_start: 0
  partition_end: 127
- address: "0.0.0.0:4004"  # node2
  partition_start: 128
  partition_end: 255
$$) AS entries;
SELECT * FROM ringshard.check_partition_map();
SELECT node_name, ringshard.server_address(server_name) AS address FROM ringshard.nodes ORDER BY node_name;
SELECT nodes_for('faces', 'face-001') AS faces_001, nodes_for('users', '1') AS users_1;
SELECT ringshard.partition_config();

-- a round trip is lossless
SELECT ringshard.partition_config() AS fremis_config \gset
SELECT ringshard.load_partition_config(:'fremis_config', 'copy') AS entries;
SELECT ringshard.partition_config('copy') = :'fremis_config' AS lossless,
       (SELECT array_agg(ringshard.partition_nodes(p, 'copy') = ringshard.partition_nodes(p)) @> '{f}'
          FROM generate_series(0, 255) p) AS any_partition_differs;

-- three nodes with a replica and flow style; into a new map
SELECT ringshard.load_partition_config($$version: v1
nodes: [{address: "127.0.0.1:5433", partition_start: 0, partition_end: 85},
        {address: "127.0.0.1:5434", partition_start: 86, partition_end: 170},
        {address: "127.0.0.1:5435", partition_start: 171, partition_end: 255},
        {address: "127.0.0.1:5435", partition_start: 0, partition_end: 85}]
$$, 'three') AS entries;
SELECT * FROM ringshard.check_partition_map('three');
SELECT ringshard.partition_config('three');
SELECT ringshard.partition_nodes(0, 'three');
-- written back and loaded again: the same holders for all 256 partitions
SELECT ringshard.load_partition_config(ringshard.partition_config('three'), 'three-again') AS entries;
SELECT count(*) FILTER (WHERE ringshard.partition_nodes(p, 'three') <> ringshard.partition_nodes(p, 'three-again')) AS differing
  FROM generate_series(0, 255) p;

-- an existing node is found by its address
SELECT ringshard.add_node('worker-1', 'host=127.0.0.1 port=6001');
SELECT ringshard.load_partition_config($$version: "v1"
nodes:
- address: "host=127.0.0.1 port=6001"
  partition_start: 0
  partition_end: 255
$$, 'by-address');
SELECT ringshard.partition_nodes(7, 'by-address');

-- errors name the field and line, and change nothing
SELECT ringshard.partition_config('three') AS before_errors \gset
SELECT ringshard.load_partition_config($$version: "v2"
nodes: []
$$, 'three');
SELECT ringshard.load_partition_config($$version: "v1"
nodes:
- address: "a:1"
  partition_start: 0
  partition_end: 300
$$, 'three');
SELECT ringshard.load_partition_config($$version: "v1"
nodes:
- address: "a:1"
  partition_start: ten
  partition_end: 20
$$, 'three');
SELECT ringshard.load_partition_config($$version: "v1"
nodes:
- address: "a:1"
  partition_start: 30
  partition_end: 20
$$, 'three');
SELECT ringshard.load_partition_config($$version: "v1"
nodes:
- address: "a:1"
  partition_end: 20
$$, 'three');
SELECT ringshard.load_partition_config($$version: "v1"
nodes:
- address: "a:1"
  partition_start: 0
  partition_start: 1
  partition_end: 20
$$, 'three');
SELECT ringshard.load_partition_config($$version: "v1"
nodes:
- address: "a:1"
  partition_start: 0
  partition_end: 20
  weight: 3
$$, 'three');
SELECT ringshard.load_partition_config($$version: "v1"
nodes:
- address: [a, b]
  partition_start: 0
  partition_end: 20
$$, 'three');
SELECT ringshard.load_partition_config($$version: "v1"
nodes:
- address: "host=a password=secret"
  partition_start: 0
  partition_end: 20
$$, 'three');
SELECT ringshard.load_partition_config($$version: "v1"
nodes: [ {address: "a:1", partition_start: 0
$$, 'three');
SELECT ringshard.load_partition_config($$nodes: []$$, 'three');
SELECT ringshard.load_partition_config('', 'three');
-- an alias bomb is refused before it can grow
SELECT ringshard.load_partition_config($$a: &a ["x","x","x","x","x","x","x","x","x"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
$$, 'three');
-- a document over 1 MiB
SELECT ringshard.load_partition_config('version: "v1"' || chr(10) || '# ' || repeat('x', 1100000), 'three');
SELECT ringshard.partition_config('three') = :'before_errors' AS unchanged;
SELECT ringshard.partition_config('no-such-map');

-- A config that leaves partitions to no node loads, with a WARNING naming
-- the gaps as check_partition_map reports them (the FREMIS-N manual's invalid example:
-- node1 0..100, node2 150..255)
SELECT ringshard.load_partition_config($$version: "v1"
nodes:
- address: "0.0.0.0:4003"
  partition_start: 0
  partition_end: 100
- address: "0.0.0.0:4004"
  partition_start: 150
  partition_end: 255
$$, 'gappy') AS entries;
SELECT * FROM ringshard.check_partition_map('gappy');
-- several gaps, one of a single partition
SELECT ringshard.load_partition_config($$version: "v1"
nodes:
- address: "0.0.0.0:4003"
  partition_start: 0
  partition_end: 6
- address: "0.0.0.0:4004"
  partition_start: 8
  partition_end: 200
$$, 'gappy') AS entries;
-- a config without gaps loads without a warning
SELECT ringshard.load_partition_config($$version: "v1"
nodes:
- address: "0.0.0.0:4003"
  partition_start: 0
  partition_end: 255
$$, 'gappy') AS entries;
SELECT ringshard.drop_partition_map('gappy');

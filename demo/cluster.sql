-- ringshard cluster walkthrough: the seed's FREMIS-N cluster (coordinator,
-- two nodes with partitions 0-127 / 128-255, then three nodes).
--   bash demo/run      (runs demo.sql, then this in database "coordinator")
--
-- NOTE: to stay one command on one machine, the "workers" here are three
-- databases (worker1, worker2, worker3) of the same throwaway server as
-- this coordinator database.  Real deployments put each worker on its own
-- PostgreSQL server; the TAP tests (test/t/003_cluster.pl, 005-007) do so,
-- with a separate server per worker.  demo/run has already created the
-- worker databases and run CREATE EXTENSION ringshard in each.
\set SHOW_CONTEXT never
\pset null '(null)'

CREATE EXTENSION ringshard;

------------------------------------------------------------------------------
-- 1. Two workers: the coordinator's config.yml (partitions 0-127 / 128-255)
------------------------------------------------------------------------------
-- A worker's address is a libpq connection string without a password (one
-- with a password is refused: it belongs in the coordinator server's
-- ~/.pgpass or a service file).  On real servers it would look like
-- 'host=10.0.1.10 port=5432 dbname=fremis'; here it is this server's socket
-- directory and port, and the worker's database.
SELECT format('host=%s port=%s dbname=', split_part(current_setting('unix_socket_directories'), ',', 1),
              current_setting('port')) AS server \gset
\set worker1 :server 'worker1'
\set worker2 :server 'worker2'
\set worker3 :server 'worker3'

-- The seed's two-node config, with the workers' addresses.  A node is found
-- by its address, and a new one is named after it.
SELECT ringshard.load_partition_config(format($yaml$version: "v1"
nodes:
- address: "%s"  # node1
  partition_start: 0
  partition_end: 127
- address: "%s"  # node2
  partition_start: 128
  partition_end: 255
$yaml$, :'worker1', :'worker2')) AS entries;
SELECT * FROM ringshard.check_partition_map();  -- no rows: no gap, no overlap
SELECT node_name, partition_start, partition_end
  FROM ringshard.partition_assignments ORDER BY partition_start;

-- Push the topology (without addresses) to every worker, with a version.
SELECT * FROM ringshard.sync_topology();

------------------------------------------------------------------------------
-- 2. A distributed table, placed by partition_for(keyspace_id, face_id)
------------------------------------------------------------------------------
CREATE TABLE faces (
    keyspace_id text,
    face_id     text,
    score       float8,   -- stands in for a recognition similarity
    camera      text
);
SELECT ringshard.distribute_table_by_partition('faces', 'face_id', keyspace_column => 'keyspace_id');
-- Creates the table on every worker (with a trigger there that refuses rows
-- the worker does not hold) and a routing trigger here.
SELECT * FROM ringshard.create_distributed_table('faces');

-- Enrollment through the coordinator: each row goes to every holder of its
-- partition; the coordinator keeps none.
-- ("INSERT 0 0": the rows went to the workers.)
INSERT INTO faces (keyspace_id, face_id, score, camera)
SELECT 'faces', 'face-' || lpad(g::text, 4, '0'), ((g * 7919) % 1000) / 1000.0, 'cam-' || (g % 7)
  FROM generate_series(1, 1000) g;
SELECT count(*) AS rows_kept_on_the_coordinator FROM faces;

-- Where the rows landed (the seed's loaded-vectors per node).
SELECT * FROM ringshard.node_table_rows('faces');
SELECT face_id, partition_for('faces', face_id) AS partition, nodes_for('faces', face_id) AS nodes
  FROM (VALUES ('face-0001'), ('face-0002'), ('face-0003')) AS v(face_id);

-- On a worker: its own node name and the topology version it was given.
-- It refuses a row that is not its own (face-0001 is in partition 143, on
-- worker2): every write goes through the coordinator.
\c worker1
SELECT local_node, topology_version FROM ringshard.cluster_state;
\set ON_ERROR_STOP off
INSERT INTO faces VALUES ('faces', 'face-0001', 0.5, 'written directly');
\set ON_ERROR_STOP on
\c coordinator

------------------------------------------------------------------------------
-- 3. Reads: get by key, and the 1:N fan-out with a top-k merge
------------------------------------------------------------------------------
-- Get by face_id: one healthy holder, failing over to the others.
SELECT * FROM ringshard.cluster_get(NULL::faces, 'face-0003', 'faces');

-- Recognition 1:N: every worker in parallel, each range read once, each
-- worker's top 5 by score merged into the overall top 5.
SELECT * FROM ringshard.cluster_fanout(NULL::faces, NULL, 'score', 5);
-- The same with a filter, run on the workers.
SELECT * FROM ringshard.cluster_fanout(NULL::faces, $$camera = 'cam-3'$$, 'score', 3);
SELECT ringshard.last_fanout_missing() AS missing_nodes;

-- UPDATE and DELETE are not routed: on the coordinator they touch its own
-- (empty) table and nothing on the workers.
UPDATE faces SET score = 0 WHERE face_id = 'face-0003';

-- Monitoring: every worker probed in parallel.
SELECT node, reachable, server_version, connections, last_error FROM ringshard.node_health();

------------------------------------------------------------------------------
-- 4. A worker goes away
------------------------------------------------------------------------------
-- An outage of worker2, simulated: its database refuses new connections and
-- the open ones are closed.
ALTER DATABASE worker2 WITH ALLOW_CONNECTIONS false;
SELECT count(pg_terminate_backend(pid, 5000)) AS connections_closed
  FROM pg_stat_activity WHERE datname = 'worker2' AND application_name = 'ringshard coordinator';
SELECT node, reachable, last_error FROM ringshard.node_health();

-- Partitions 128-255 have no other holder: a fan-out that cannot read every
-- range is an error, unless partial results are allowed (with a warning and
-- the missing nodes listed), as the seed's allow_partial_search.
\set ON_ERROR_STOP off
SELECT count(*) FROM ringshard.cluster_fanout(NULL::faces);
\set ON_ERROR_STOP on
SELECT count(*) AS rows_from_worker1 FROM ringshard.cluster_fanout(NULL::faces, allow_partial => true);
SELECT ringshard.last_fanout_missing() AS missing_nodes;

-- Reads and writes of worker1's partitions go on; a write whose only holder
-- is down fails (fewer than ringshard.write_quorum holders took it).  With a
-- replicated partition it would succeed and be queued for the missing one.
SELECT face_id, score FROM ringshard.cluster_get(NULL::faces, 'face-0003', 'faces');
\set ON_ERROR_STOP off
INSERT INTO faces VALUES ('faces', 'face-2001', 0.5, 'cam-0');
\set ON_ERROR_STOP on
SELECT partition_for('faces', 'face-2001') AS partition_of_face_2001;

ALTER DATABASE worker2 WITH ALLOW_CONNECTIONS true;
SELECT node, reachable FROM ringshard.node_health();

------------------------------------------------------------------------------
-- 5. Growing to three workers (0-85 / 86-170 / 171-255) and rebalancing
------------------------------------------------------------------------------
SELECT format($yaml$version: "v1"
nodes:
- address: "%s"  # node1
  partition_start: 0
  partition_end: 85
- address: "%s"  # node2
  partition_start: 86
  partition_end: 170
- address: "%s"  # node3
  partition_start: 171
  partition_end: 255
$yaml$, :'worker1', :'worker2', :'worker3') AS three_nodes \gset

-- Before anything changes: which partitions would change holders.
SELECT * FROM ringshard.preview_partition_config(:'three_nodes');

SELECT ringshard.load_partition_config(:'three_nodes') AS entries;
SELECT * FROM ringshard.check_partition_map();  -- still no gap, no overlap

-- The plan: one step per run of partitions with new holders.  A dry run
-- prints it and changes nothing.
CALL ringshard.rebalance('faces', dry_run => true);

-- The move: pushes the new topology, then per step copies the rows to their
-- new holders, checks every copied row is there, and only then deletes them
-- from the holders that lost them; committed batch by batch, resumable.
CALL ringshard.rebalance('faces');

SELECT * FROM ringshard.node_table_rows('faces');
SELECT count(*) AS rows_read_once FROM ringshard.cluster_fanout(NULL::faces);
SELECT face_id, nodes_for('faces', face_id) AS nodes_now, camera
  FROM ringshard.cluster_get(NULL::faces, 'face-0003', 'faces');

------------------------------------------------------------------------------
-- 6. Troubleshooting: balance
------------------------------------------------------------------------------
-- table_balance_report and suggest_partition_boundaries count the rows of a
-- table in this database, and the coordinator keeps none: gather the rows
-- (or a sample) into a local table with the same annotation first.
CREATE TEMP TABLE faces_copy AS SELECT * FROM ringshard.cluster_fanout(NULL::faces);
SELECT ringshard.distribute_table_by_partition('faces_copy', 'face_id', keyspace_column => 'keyspace_id');
SELECT * FROM ringshard.table_balance_report('faces_copy');
SELECT * FROM ringshard.suggest_partition_boundaries('faces_copy');

-- Nothing is waiting: no queued writes, no unfinished rebalance.
SELECT * FROM ringshard.write_queue_status;
SELECT * FROM ringshard.rebalance_status;

-- ringshard cluster walkthrough: a coordinator and three workers.  Tables
-- are distributed with create_distributed_table() and then used with plain
-- SQL; then the FREMIS-N partition map grows from two workers to three.
--   bash demo/run      (runs demo.sql, then this in database "coordinator")
--
-- NOTE: to stay one command on one machine, the "workers" here are three
-- databases (worker1, worker2, worker3) of the same throwaway server as
-- this coordinator database.  Real deployments put each worker on its own
-- PostgreSQL server; the TAP tests (test/t/003_cluster.pl and others) do so.
-- demo/run has already created the worker databases and run CREATE
-- EXTENSION ringshard in each.  The server runs with
-- shared_preload_libraries = 'ringshard' (needed on a coordinator) and
-- max_prepared_transactions = 20 (needed on every worker: each transaction
-- that writes on workers commits there in two phases).
\set SHOW_CONTEXT never
\pset null '(null)'

CREATE EXTENSION ringshard;

------------------------------------------------------------------------------
-- 1. Nodes: the three shards of the hash-ring chapter, one per worker
------------------------------------------------------------------------------
-- A node's address is 'host:port' or a libpq connection string without
-- credentials.  On real servers it would look like
-- 'host=10.0.1.10 port=5432 dbname=census'; here it is this server's socket
-- directory and port, and the worker's database.
SELECT format('host=%s port=%s dbname=', split_part(current_setting('unix_socket_directories'), ',', 1),
              current_setting('port')) AS server \gset
\set worker1 :server 'worker1'
\set worker2 :server 'worker2'
\set worker3 :server 'worker3'

SELECT ringshard.set_replication_factor('default', 2);
SELECT ringshard.add_node('shard-jakarta-01',  :'worker1');
SELECT ringshard.add_node('shard-surabaya-02', :'worker2');
SELECT ringshard.add_node('shard-makassar-03', :'worker3');

-- Each node with an address is a foreign server of the foreign-data wrapper
-- ringshard, named after the node; its options are the address.
SELECT s.srvname AS server, w.fdwname AS wrapper, s.srvowner::regrole AS owner
  FROM pg_foreign_server s JOIN pg_foreign_data_wrapper w ON w.oid = s.srvfdw
 WHERE w.fdwname = 'ringshard' ORDER BY 1;

-- Credentials are user mappings, as for postgres_fdw.  This demo runs as a
-- superuser, which connects as itself when it has no mapping.  Any other
-- role needs a mapping with a password for every node it reaches:
--   CREATE USER MAPPING FOR clerk SERVER "shard-jakarta-01"
--     OPTIONS (user 'clerk', password '...');

-- Every node answers and can take two-phase commits.
SELECT node, reachable, two_phase_commit FROM ringshard.node_health() ORDER BY node;

-- Push the topology (without addresses) to every worker, with a version.
SELECT * FROM ringshard.sync_topology();

------------------------------------------------------------------------------
-- 2. A distributed table
------------------------------------------------------------------------------
-- An ordinary table with rows: the four example NIKs and 10,000 generated ones.
CREATE TABLE residents (
    nik      bigint PRIMARY KEY,
    name     text NOT NULL,
    city     text NOT NULL,
    balance  numeric(12,2) NOT NULL DEFAULT 0 CHECK (balance >= 0)
);
CREATE INDEX residents_city ON residents (city);
INSERT INTO residents (nik, name, city, balance) VALUES
    (3201012345670001, 'Siti Rahayu',    'Bogor',    250.00),
    (3578021122330002, 'Agus Setiawan',  'Surabaya', 120.50),
    (7371034455660003, 'Andi Makkasau',  'Makassar',  75.25),
    (3171059988770004, 'Dewi Lestari',   'Jakarta',  980.00);
INSERT INTO residents (nik, name, city, balance)
SELECT 3201010000000000 + g * 7919, 'resident ' || g,
       (ARRAY['Jakarta', 'Surabaya', 'Bandung', 'Makassar', 'Medan'])[g % 5 + 1],
       (g * 37 % 1000) + 0.5
  FROM generate_series(1, 10000) g;

-- Annotate it (the sharding key, the ring), then distribute it: the table is
-- created on every worker (columns, keys, checks, indexes, defaults), its
-- rows move to their replicas, and the local table becomes a foreign table
-- of the same name.
SELECT ringshard.distribute_table('residents', 'nik');
SELECT ringshard.create_distributed_table('residents') AS rows_moved;
\d residents

-- Each row is on its two replicas: 20,008 copies of 10,004 rows.
SELECT * FROM ringshard.node_table_rows('residents');
SELECT * FROM ringshard.table_balance_report('residents');

------------------------------------------------------------------------------
-- 3. Plain SQL: reads
------------------------------------------------------------------------------
-- By key: routed to one healthy replica of the key.
EXPLAIN (COSTS OFF) SELECT * FROM residents WHERE nik = 3201012345670001;
SELECT r.*, replicas_for(r.nik) AS replicas FROM residents r WHERE nik = 3201012345670001;
SELECT nik, name, city FROM residents
 WHERE nik IN (3578021122330002, 7371034455660003, 3171059988770004) ORDER BY nik;

-- Anything else: every worker in parallel, each row read once (on its first
-- healthy replica); the sort is done on the workers and merged here.
EXPLAIN (COSTS OFF, VERBOSE) SELECT nik, name, balance FROM residents ORDER BY balance DESC, nik LIMIT 5;
SELECT nik, name, balance FROM residents ORDER BY balance DESC, nik LIMIT 5;
SELECT count(*) AS residents FROM residents;
SELECT city, count(*) AS residents, sum(balance) AS balance FROM residents GROUP BY city ORDER BY city;

-- Joins with local tables work as with any table.
CREATE TEMP TABLE watchlist (nik bigint);
INSERT INTO watchlist VALUES (3201012345670001), (3171059988770004);
SELECT r.nik, r.name FROM residents r JOIN watchlist w USING (nik) ORDER BY r.nik;

------------------------------------------------------------------------------
-- 4. Plain SQL: writes
------------------------------------------------------------------------------
-- INSERT goes to each row's replicas (batched per node); the coordinator
-- evaluates defaults, so RETURNING shows them.
INSERT INTO residents (nik, name, city) VALUES (3273015500000009, 'Budi Santoso', 'Bandung') RETURNING *;

-- UPDATE and DELETE by key: sent whole to the key's replicas.
EXPLAIN (COSTS OFF) UPDATE residents SET balance = balance + 100 WHERE nik = 3201012345670001;
UPDATE residents SET balance = balance + 100 WHERE nik = 3201012345670001;
DELETE FROM residents WHERE nik = 3273015500000009;

-- By any other predicate: sent to every worker, each row counted once.
UPDATE residents SET city = 'Jakarta Pusat' WHERE city = 'Jakarta' AND balance > 990;
DELETE FROM residents WHERE city = 'Medan' AND balance < 10;
SELECT count(*) AS residents FROM residents;

-- A duplicate key fails on the workers: the error keeps the worker's
-- SQLSTATE (23505, unique_violation) and names the node.
\set ON_ERROR_STOP off
INSERT INTO residents (nik, name, city) VALUES (3201012345670001, 'Siti again', 'Bogor');
\set ON_ERROR_STOP on
\echo SQLSTATE :LAST_ERROR_SQLSTATE

-- A transaction commits on every worker or on none (two-phase commit): the
-- first insert is rolled back with the failed second one.
BEGIN;
INSERT INTO residents (nik, name, city) VALUES (3204012345670010, 'Rina Wati', 'Bandung');
\set ON_ERROR_STOP off
INSERT INTO residents (nik, name, city) VALUES (3578021122330002, 'Agus again', 'Surabaya');
\set ON_ERROR_STOP on
ROLLBACK;
SELECT count(*) AS rows_of_the_failed_transaction FROM residents WHERE nik = 3204012345670010;

-- Moving a row to another key is not an UPDATE: it would change its nodes.
\set ON_ERROR_STOP off
UPDATE residents SET nik = 3201012345670099 WHERE nik = 3201012345670001;
\set ON_ERROR_STOP on

------------------------------------------------------------------------------
-- 5. Schema changes reach every worker in the same transaction
------------------------------------------------------------------------------
ALTER TABLE residents ADD COLUMN phone text;
UPDATE residents SET phone = '+62 812 0000 0001' WHERE nik = 3201012345670001;
SELECT nik, name, phone FROM residents WHERE phone IS NOT NULL;

------------------------------------------------------------------------------
-- 6. Roles and workers
------------------------------------------------------------------------------
-- A role below superuser reaches the workers only with its own user mapping.
CREATE ROLE clerk;
GRANT SELECT ON residents TO clerk;
SET ROLE clerk;
\set ON_ERROR_STOP off
SELECT name FROM residents WHERE nik = 3201012345670001;
\set ON_ERROR_STOP on
RESET ROLE;

-- On a worker: its own node name and the topology version it was given.  It
-- refuses a row it does not hold (7371034455660003 is on shard-makassar-03
-- and shard-surabaya-02): writes go through the coordinator.
\c worker1
SELECT local_node, topology_version FROM ringshard.cluster_state;
\set ON_ERROR_STOP off
INSERT INTO residents (nik, name, city) VALUES (7371034455660003, 'written directly', 'Makassar');
\set ON_ERROR_STOP on
\c coordinator

------------------------------------------------------------------------------
-- 7. A worker goes away
------------------------------------------------------------------------------
-- An outage of worker2 (shard-surabaya-02), simulated: its database refuses
-- new connections.  (This session reconnected above, so it has no open link
-- to it yet.)
ALTER DATABASE worker2 WITH ALLOW_CONNECTIONS false;

-- Reads fail over to the other replica; a fan-out still reads every row once.
SELECT nik, name FROM residents WHERE nik = 3201012345670001;
SELECT count(*) AS residents FROM residents;

-- A write whose replicas include the missing node succeeds on the other one
-- (ringshard.write_quorum is 1) and is queued for the missing one, which is
-- then marked down for reads.
INSERT INTO residents (nik, name, city) VALUES (3201012345670002, 'Rudi Hartono', 'Bogor');
SELECT replicas_for(3201012345670002::bigint) AS replicas;
SELECT node, queued FROM ringshard.write_queue_status;
SELECT node_name, is_up FROM ringshard.nodes ORDER BY node_name;

-- UPDATE and DELETE need every node they touch to be up.
\set ON_ERROR_STOP off
UPDATE residents SET balance = 0 WHERE city = 'Bogor';
\set ON_ERROR_STOP on

-- The worker comes back.  The watchdog (a background worker, when
-- ringshard.watchdog_database names this database) replays the queue every
-- few seconds; here one round is run by hand.
ALTER DATABASE worker2 WITH ALLOW_CONNECTIONS true;
SELECT * FROM ringshard.watchdog_tick();
SELECT node_name, is_up FROM ringshard.nodes ORDER BY node_name;
SELECT * FROM ringshard.node_table_rows('residents');
UPDATE residents SET balance = 0 WHERE city = 'Bogor';

------------------------------------------------------------------------------
-- 8. The FREMIS-N partition map: two workers (partitions 0-127 / 128-255)
------------------------------------------------------------------------------
-- The coordinator's config.yml, with the workers' addresses.  An entry
-- names a node by its address: worker1 and worker2 are the nodes above.
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
SELECT * FROM ringshard.sync_topology();

-- Enrollments, placed by partition_for(keyspace_id, face_id).
CREATE TABLE faces (
    keyspace_id text NOT NULL,
    face_id     text NOT NULL,
    score       float8,   -- stands in for a recognition similarity
    camera      text,
    PRIMARY KEY (keyspace_id, face_id)
);
INSERT INTO faces (keyspace_id, face_id, score, camera)
SELECT 'faces', 'face-' || lpad(g::text, 4, '0'), ((g * 7919) % 1000) / 1000.0, 'cam-' || (g % 7)
  FROM generate_series(1, 1000) g;
SELECT ringshard.distribute_table_by_partition('faces', 'face_id', keyspace_column => 'keyspace_id');
SELECT ringshard.create_distributed_table('faces') AS rows_moved;

-- Where the rows landed (loaded vectors per node).
SELECT * FROM ringshard.node_table_rows('faces');
SELECT face_id, partition_for('faces', face_id) AS partition, nodes_for('faces', face_id) AS nodes
  FROM (VALUES ('face-0001'), ('face-0002'), ('face-0003')) AS v(face_id);

-- Get by key, and the 1:N search: every worker in parallel, the top 5 merged.
SELECT * FROM faces WHERE keyspace_id = 'faces' AND face_id = 'face-0003';
SELECT face_id, score, camera FROM faces ORDER BY score DESC, face_id LIMIT 5;
SELECT face_id, score FROM faces WHERE camera = 'cam-3' ORDER BY score DESC, face_id LIMIT 3;

------------------------------------------------------------------------------
-- 9. Growing to three workers (0-85 / 86-170 / 171-255) and rebalancing
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

-- The plan, summed per pair of nodes; a dry run prints it and changes nothing.
SELECT * FROM ringshard.rebalance_plan_summary('faces');
CALL ringshard.rebalance('faces', dry_run => true);

-- The move: pushes the new topology, then step by step copies the rows to
-- their new holders, checks every copied row is there, and only then
-- deletes them from the holders that lost them; committed batch by batch,
-- resumable after a crash.
SET ringshard.rebalance_notice_interval = 0;  -- progress after every step (default: every 5 s)
CALL ringshard.rebalance('faces');

SELECT * FROM ringshard.node_table_rows('faces');
SELECT count(*) AS rows_read_once FROM faces;
SELECT face_id, nodes_for('faces', face_id) AS nodes_now, camera
  FROM faces WHERE keyspace_id = 'faces' AND face_id = 'face-0003';
SELECT * FROM ringshard.table_balance_report('faces');

-- Nothing is waiting: no queued writes, no unfinished rebalance.
SELECT * FROM ringshard.write_queue_status;
SELECT * FROM ringshard.rebalance_status;

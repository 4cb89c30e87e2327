-- Every file starts from a fresh extension: the suite shares one database.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS ringshard CASCADE;
CREATE EXTENSION ringshard;
RESET client_min_messages;
--
-- annotated_tables: tables annotated with a sharding key, shard_of(row),
-- replicas_of(row), the annotated_tables view and table_balance_report
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

-- The example topology: three shards on ring 'default' (replication 2), and the
-- coordinator config of the face-recognition cluster as map 'default'.
SELECT ringshard.set_replication_factor('default', 2);
SELECT ringshard.add_node('shard-jakarta-01', 'jakarta.example:5432');
SELECT ringshard.add_node('shard-surabaya-02', 'surabaya.example:5432');
SELECT ringshard.add_node('shard-makassar-03', 'makassar.example:5432');
SELECT ringshard.load_partition_config($$version: "v1"
nodes:
- address: "0.0.0.0:4003"
  partition_start: 0
  partition_end: 127
- address: "0.0.0.0:4004"
  partition_start: 128
  partition_end: 255
$$);
SELECT node_name, partition_start, partition_end FROM ringshard.partition_assignments
WHERE map_name = 'default' ORDER BY partition_start;
-- A second ring with one replica, for tables that name their ring.
SELECT ringshard.create_ring('orders', 64, 1);
SELECT ringshard.add_node('orders-1', ring => 'orders');
SELECT ringshard.add_node('orders-2', ring => 'orders');

--
-- Ring placement: bigint, text and uuid keys
--
CREATE TABLE accounts (nik bigint PRIMARY KEY, holder text);
INSERT INTO accounts
SELECT 3201012345670000 + g, 'holder ' || g FROM generate_series(1, 300) g;
INSERT INTO accounts VALUES (3578021122330002, 'example'), (7371034455660003, 'example'), (3171059988770004, 'example');
SELECT ringshard.distribute_table('accounts', 'nik');

CREATE TABLE users (email text, note text);
INSERT INTO users SELECT 'user' || g || '@example.com', 'n' || g FROM generate_series(1, 200) g;
INSERT INTO users VALUES ('key-1', 'example'), ('key-4', 'example'), (NULL, 'no key');
SELECT ringshard.distribute_table('users', 'email');

CREATE TABLE devices (device_id uuid, label text);
INSERT INTO devices
SELECT ('00000000-0000-4000-8000-' || lpad(to_hex(g), 12, '0'))::uuid, 'd' || g FROM generate_series(1, 200) g;
INSERT INTO devices VALUES ('A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', 'upper-case input');
SELECT ringshard.distribute_table('devices', 'device_id', 'orders');

-- shard_of/replicas_of agree with shard_for/replicas_for for every row
SELECT count(*) AS rows,
       count(*) FILTER (WHERE shard_of(a) IS DISTINCT FROM shard_for(a.nik)) AS owner_disagreements,
       count(*) FILTER (WHERE replicas_of(a) IS DISTINCT FROM replicas_for(a.nik)) AS replica_disagreements,
       count(*) FILTER (WHERE shard_of(a) IS DISTINCT FROM shard_for(a.nik::text)) AS text_form_disagreements
FROM accounts a;
SELECT count(*) AS rows,
       count(*) FILTER (WHERE shard_of(u) IS DISTINCT FROM shard_for(u.email)) AS owner_disagreements,
       count(*) FILTER (WHERE replicas_of(u) IS DISTINCT FROM replicas_for(u.email)) AS replica_disagreements
FROM users u;
SELECT count(*) AS rows,
       count(*) FILTER (WHERE shard_of(d) IS DISTINCT FROM shard_for(d.device_id, 'orders')) AS owner_disagreements,
       count(*) FILTER (WHERE replicas_of(d) IS DISTINCT FROM replicas_for(d.device_id, 'orders')) AS replica_disagreements,
       count(*) FILTER (WHERE shard_of(d) IS DISTINCT FROM shard_for(lower(d.device_id::text), 'orders')) AS text_form_disagreements
FROM devices d;
-- a few rows: the example keys place as docs/routing.md §6 says
SELECT nik, shard_of(a), replicas_of(a) FROM accounts a
WHERE nik IN (3201012345670001, 3578021122330002, 7371034455660003, 3171059988770004) ORDER BY nik;
SELECT email, shard_of(u), replicas_of(u) FROM users u WHERE note IN ('example', 'no key') ORDER BY email;
SELECT device_id, shard_of(d), replicas_of(d), ring_token(device_id) = ring_token('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11') AS lowercase_token
FROM devices d WHERE label = 'upper-case input';
-- a partitioned table is annotated once, on its parent
CREATE TABLE events (account bigint, day int) PARTITION BY RANGE (day);
CREATE TABLE events_early PARTITION OF events FOR VALUES FROM (0) TO (50);
CREATE TABLE events_late PARTITION OF events FOR VALUES FROM (50) TO (100);
INSERT INTO events SELECT 3201012345670000 + g, g % 100 FROM generate_series(1, 200) g;
SELECT ringshard.distribute_table('events', 'account');
SELECT count(*) AS rows,
       count(*) FILTER (WHERE replicas_of(e) IS DISTINCT FROM replicas_for(e.account)) AS replica_disagreements
FROM events e;
-- ring placement follows the ring's replication factor
SELECT ringshard.set_replication_factor('default', 3);
SELECT cardinality(replicas_of(a)) AS replicas, count(*) FROM accounts a GROUP BY 1;
SELECT ringshard.set_replication_factor('default', 2);

--
-- Partition placement: a constant keyspace, and a keyspace column
--
CREATE TABLE faces (face_id text, payload int);
INSERT INTO faces SELECT 'face-' || lpad(g::text, 3, '0'), g FROM generate_series(1, 200) g;
INSERT INTO faces VALUES (NULL, 0);
SELECT ringshard.distribute_table_by_partition('faces', 'face_id', 'faces');

-- FREMIS-N: a keyspace_id and a face_id per row
CREATE TABLE enrollments (keyspace_id text, face_id text, enrolled_at int);
INSERT INTO enrollments
SELECT 'ks-' || (g % 4), 'face-' || lpad(g::text, 3, '0'), g FROM generate_series(1, 200) g;
INSERT INTO enrollments VALUES
	('faces', 'face-001', 1001), ('users', '1', 1002), ('ks-1', '3201012345670001', 1003),
	(NULL, 'face-404', 1004), ('ks-1', NULL, 1005);
SELECT ringshard.distribute_table_by_partition('enrollments', 'face_id', keyspace_column => 'keyspace_id');

-- an integer keyspace column and a bigint key: canonical bytes are decimal text
CREATE TABLE tenant_orders (tenant_id int, order_no bigint);
INSERT INTO tenant_orders SELECT g % 7, 3201012345670000 + g FROM generate_series(1, 200) g;
SELECT ringshard.distribute_table_by_partition('tenant_orders', 'order_no', keyspace_column => 'tenant_id');

SELECT count(*) AS rows,
       count(*) FILTER (WHERE replicas_of(f) IS DISTINCT FROM nodes_for('faces', f.face_id)) AS holder_disagreements,
       count(*) FILTER (WHERE shard_of(f) IS DISTINCT FROM (nodes_for('faces', f.face_id))[1]) AS owner_disagreements
FROM faces f;
SELECT count(*) AS rows,
       count(*) FILTER (WHERE replicas_of(e) IS DISTINCT FROM nodes_for(e.keyspace_id, e.face_id)) AS holder_disagreements,
       count(*) FILTER (WHERE shard_of(e) IS DISTINCT FROM (nodes_for(e.keyspace_id, e.face_id))[1]) AS owner_disagreements
FROM enrollments e;
SELECT count(*) AS rows,
       count(*) FILTER (WHERE replicas_of(o) IS DISTINCT FROM nodes_for(o.tenant_id::text, o.order_no)) AS holder_disagreements,
       count(*) FILTER (WHERE replicas_of(o) IS DISTINCT FROM nodes_for(o.tenant_id::text, o.order_no::text)) AS text_form_disagreements
FROM tenant_orders o;
-- a few rows, with the partitions of docs/routing.md §6
SELECT face_id, partition_for('faces', face_id), shard_of(f), replicas_of(f) FROM faces f
WHERE payload IN (0, 1, 2, 200) ORDER BY payload;
SELECT keyspace_id, face_id, partition_for(keyspace_id, face_id), shard_of(e), replicas_of(e)
FROM enrollments e WHERE enrolled_at > 1000 ORDER BY enrolled_at;

-- A partition held by two nodes is replicated: replicas_of lists both, and
-- shard_of gives the first holder.
SELECT ringshard.create_partition_map('replicated');
SELECT ringshard.assign_partitions('rep-a', 0, 255, 'replicated');
SELECT ringshard.assign_partitions('rep-b', 0, 99, 'replicated');
SELECT ringshard.assign_partitions('rep-c', 100, 255, 'replicated');
CREATE TABLE replicated_faces (face_id text);
INSERT INTO replicated_faces SELECT 'face-' || lpad(g::text, 3, '0') FROM generate_series(1, 200) g;
SELECT ringshard.distribute_table_by_partition('replicated_faces', 'face_id', 'faces', 'replicated');
SELECT replicas_of(r), count(*) FROM replicated_faces r GROUP BY 1 ORDER BY replicas_of(r)::text COLLATE "C";
SELECT count(*) FILTER (WHERE replicas_of(r) IS DISTINCT FROM nodes_for('faces', r.face_id, 'replicated')) AS holder_disagreements,
       count(*) FILTER (WHERE shard_of(r) IS DISTINCT FROM (replicas_of(r))[1]) AS owner_not_first_holder
FROM replicated_faces r;

--
-- NULL keys place nowhere; a gap in the map is an error naming the partition
--
SELECT count(*) FILTER (WHERE shard_of(u) IS NULL) AS null_owner,
       count(*) FILTER (WHERE replicas_of(u) IS NULL) AS null_replicas
FROM users u WHERE email IS NULL;
SELECT count(*) FILTER (WHERE shard_of(f) IS NULL) AS null_owner,
       count(*) FILTER (WHERE replicas_of(f) IS NULL) AS null_replicas
FROM faces f WHERE face_id IS NULL;
SELECT keyspace_id, face_id, shard_of(e), replicas_of(e) FROM enrollments e
WHERE keyspace_id IS NULL OR face_id IS NULL ORDER BY enrolled_at;
SELECT ringshard.create_partition_map('gappy');
SELECT ringshard.assign_partitions('gap-low', 0, 27, 'gappy');
SELECT ringshard.assign_partitions('gap-high', 29, 255, 'gappy');
SELECT * FROM ringshard.check_partition_map('gappy');
CREATE TABLE gappy_faces (face_id text);
INSERT INTO gappy_faces VALUES ('face-002'), ('face-001');
SELECT ringshard.distribute_table_by_partition('gappy_faces', 'face_id', 'faces', 'gappy');
SELECT face_id, shard_of(g) FROM gappy_faces g WHERE face_id = 'face-002';
SELECT face_id, shard_of(g) FROM gappy_faces g;
SELECT pg_temp.err($$SELECT replicas_of(g) FROM gappy_faces g$$) AS replicas_of_gap,
       pg_temp.err($$SELECT nodes_for('faces', 'face-001', 'gappy')$$) AS nodes_for_gap;
-- filling the gap makes the row placeable
SELECT ringshard.assign_partitions('gap-low', 28, 28, 'gappy');
SELECT face_id, shard_of(g), replicas_of(g) FROM gappy_faces g ORDER BY face_id;

--
-- The annotated_tables view and table_balance_report
--
SELECT * FROM ringshard.annotated_tables ORDER BY table_name::text COLLATE "C";
-- ring, replication 2: every row is owned once and held twice
SELECT * FROM ringshard.table_balance_report('accounts');
SELECT (SELECT count(*) FROM accounts) AS rows, sum(rows_owned) AS owned, sum(rows_held) AS held,
       sum(share_pct) BETWEEN 99.8 AND 100.2 AS shares_add_up
FROM ringshard.table_balance_report('accounts');
-- the counts are the rows' own placement
SELECT count(*) AS nodes,
       count(*) FILTER (WHERE r.rows_owned = (SELECT count(*) FROM accounts a WHERE shard_of(a) = r.node)
                          AND r.rows_held = (SELECT count(*) FROM accounts a WHERE r.node = ANY (replicas_of(a)))) AS counts_agree
FROM ringshard.table_balance_report('accounts') r;
-- a NULL key is on no node
SELECT (SELECT count(*) FROM users WHERE email IS NOT NULL) AS keyed_rows, sum(rows_owned) AS owned, sum(rows_held) AS held
FROM ringshard.table_balance_report('users');
SELECT node, rows_owned, rows_held, share_pct, ideal_pct FROM ringshard.table_balance_report('enrollments');
SELECT (SELECT count(*) FROM enrollments WHERE keyspace_id IS NOT NULL AND face_id IS NOT NULL) AS placed_rows,
       sum(rows_owned) AS owned, sum(rows_held) AS held
FROM ringshard.table_balance_report('enrollments');
SELECT node, rows_owned, rows_held, share_pct, ideal_pct FROM ringshard.table_balance_report('replicated_faces');
SELECT pg_temp.err($$SELECT * FROM ringshard.table_balance_report('pg_class')$$) AS not_annotated;

--
-- Errors
--
CREATE TABLE plain_table (id int, ks text);
INSERT INTO plain_table VALUES (1, 'k');
CREATE VIEW plain_view AS SELECT * FROM plain_table;
CREATE SEQUENCE plain_sequence;
CREATE MATERIALIZED VIEW plain_matview AS SELECT * FROM plain_table;
SELECT ringshard.distribute_table('plain_table', 'no_such_column');
SELECT ringshard.distribute_table('plain_view', 'id');
SELECT label, pg_temp.err(stmt) AS error
FROM (VALUES
	('unknown column',           $$SELECT ringshard.distribute_table('plain_table', 'no_such_column')$$),
	('system column',            $$SELECT ringshard.distribute_table('plain_table', 'ctid')$$),
	('view',                     $$SELECT ringshard.distribute_table('plain_view', 'id')$$),
	('sequence',                 $$SELECT ringshard.distribute_table('plain_sequence', 'last_value')$$),
	('materialized view',        $$SELECT ringshard.distribute_table('plain_matview', 'id')$$),
	('no such table',            $$SELECT ringshard.distribute_table('no_such_table', 'id')$$),
	('unknown ring',             $$SELECT ringshard.distribute_table('plain_table', 'id', 'no_such_ring')$$),
	('already annotated',        $$SELECT ringshard.distribute_table('accounts', 'nik')$$),
	('already, other kind',      $$SELECT ringshard.distribute_table_by_partition('accounts', 'nik', 'k')$$),
	('already, ring for map',    $$SELECT ringshard.distribute_table('faces', 'face_id')$$),
	('unknown map',              $$SELECT ringshard.distribute_table_by_partition('plain_table', 'id', 'k', 'no_such_map')$$),
	('both keyspaces',           $$SELECT ringshard.distribute_table_by_partition('plain_table', 'id', 'k', keyspace_column => 'ks')$$),
	('neither keyspace',         $$SELECT ringshard.distribute_table_by_partition('plain_table', 'id')$$),
	('unknown keyspace column',  $$SELECT ringshard.distribute_table_by_partition('plain_table', 'id', keyspace_column => 'nope')$$),
	('partition map on a view',  $$SELECT ringshard.distribute_table_by_partition('plain_view', 'id', 'k')$$),
	('NULL key column',          $$SELECT ringshard.distribute_table_by_partition('plain_table', NULL, 'k')$$),
	('undistribute unannotated', $$SELECT ringshard.undistribute_table('plain_table')$$),
	('shard_of unannotated',     $$SELECT shard_of(p) FROM plain_table p$$),
	('shard_of of a view row',   $$SELECT shard_of(v) FROM (SELECT 1 AS id) v$$),
	('shard_of of a ROW()',      $$SELECT shard_of(ROW(1, 'x'))$$)
) v(label, stmt);
SELECT shard_of(p) FROM plain_table p;
-- none of the failures left an annotation behind
SELECT count(*) AS annotations FROM ringshard.distributed_tables
WHERE table_name IN ('plain_table'::regclass, 'plain_view'::regclass, 'plain_sequence'::regclass, 'plain_matview'::regclass);
-- annotate, undistribute, annotate again the other way
SELECT ringshard.distribute_table('plain_table', 'id');
SELECT ringshard.undistribute_table('plain_table');
SELECT ringshard.distribute_table_by_partition('plain_table', 'id', keyspace_column => 'ks');
SELECT id, ks, shard_of(p), nodes_for(ks, id) FROM plain_table p;
SELECT ringshard.undistribute_table('plain_table');
DROP MATERIALIZED VIEW plain_matview;
DROP VIEW plain_view;
DROP SEQUENCE plain_sequence;

--
-- Renames keep the annotation working; drops remove it
--
CREATE TABLE moving (id bigint, keyspace text, payload text);
INSERT INTO moving SELECT g, 'ks-' || (g % 3), 'p' || g FROM generate_series(1, 100) g;
SELECT ringshard.distribute_table('moving', 'id');
CREATE TEMP TABLE moving_before AS SELECT id, shard_of(m) AS owner, replicas_of(m) AS replicas FROM moving m;
ALTER TABLE moving RENAME COLUMN id TO account_id;
SELECT table_name, key_column FROM ringshard.annotated_tables WHERE table_name = 'moving'::regclass;
SELECT count(*) AS changed FROM moving m JOIN moving_before b ON b.id = m.account_id
WHERE shard_of(m) <> b.owner OR replicas_of(m) <> b.replicas;
ALTER TABLE moving RENAME TO moved;
SELECT table_name, key_column FROM ringshard.annotated_tables WHERE table_name = 'moved'::regclass;
SELECT count(*) AS changed FROM moved m JOIN moving_before b ON b.id = m.account_id
WHERE shard_of(m) <> b.owner OR replicas_of(m) <> b.replicas;
-- a new column takes the old name: the annotation stays on the renamed one
ALTER TABLE moved ADD COLUMN id text DEFAULT 'not the key';
SELECT count(*) AS changed FROM moved m JOIN moving_before b ON b.id = m.account_id
WHERE shard_of(m) <> b.owner;
-- dropping another column keeps it
ALTER TABLE moved DROP COLUMN payload;
SELECT count(*) AS changed FROM moved m JOIN moving_before b ON b.id = m.account_id
WHERE shard_of(m) <> b.owner;
-- bigint and text keys have the same canonical bytes: a type change moves nothing
ALTER TABLE moved ALTER COLUMN account_id TYPE text;
SELECT count(*) AS changed FROM moved m JOIN moving_before b ON b.id = m.account_id::bigint
WHERE shard_of(m) <> b.owner OR replicas_of(m) <> b.replicas;
-- the same for a partition-placed table's key and keyspace columns
CREATE TEMP TABLE enrollments_before AS
SELECT enrolled_at, shard_of(e) AS owner, replicas_of(e) AS replicas FROM enrollments e;
ALTER TABLE enrollments RENAME COLUMN keyspace_id TO ks;
ALTER TABLE enrollments RENAME COLUMN face_id TO face;
SELECT table_name, key_column, keyspace_column FROM ringshard.annotated_tables WHERE table_name = 'enrollments'::regclass;
SELECT count(*) AS changed FROM enrollments e JOIN enrollments_before b USING (enrolled_at)
WHERE shard_of(e) IS DISTINCT FROM b.owner OR replicas_of(e) IS DISTINCT FROM b.replicas;
-- dropping the key column, or the keyspace column, removes the annotation
ALTER TABLE moved DROP COLUMN account_id;
SELECT count(*) AS moved_annotations FROM ringshard.annotated_tables WHERE table_name = 'moved'::regclass;
SELECT pg_temp.err($$SELECT shard_of(m) FROM moved m$$) AS shard_of_after_drop;
ALTER TABLE enrollments DROP COLUMN ks;
SELECT count(*) AS enrollments_annotations FROM ringshard.annotated_tables WHERE table_name = 'enrollments'::regclass;
-- dropping the table removes the annotation
SELECT ringshard.distribute_table('moved', 'keyspace');
SELECT table_name, key_column FROM ringshard.annotated_tables WHERE table_name = 'moved'::regclass;
DROP TABLE moved;
SELECT count(*) AS annotations_of_dropped_tables FROM ringshard.distributed_tables d
WHERE NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = d.table_name);
SELECT table_name FROM ringshard.annotated_tables ORDER BY table_name::text COLLATE "C";

-- Rings and maps in use cannot be dropped
SELECT ringshard.drop_ring('orders');
SELECT pg_temp.err($$SELECT ringshard.drop_ring('orders')$$) AS drop_ring,
       pg_temp.err($$SELECT ringshard.drop_partition_map('replicated')$$) AS drop_map,
       pg_temp.err($$SELECT ringshard.drop_partition_map('gappy')$$) AS drop_other_map;
SELECT ring_name FROM ringshard.rings WHERE ring_name = 'orders';
SELECT map_name FROM ringshard.partition_maps WHERE map_name IN ('replicated', 'gappy') ORDER BY 1;

--
-- Names that need quoting, and schema-qualified tables
--
CREATE SCHEMA "Sales Schema";
CREATE TABLE "Sales Schema"."My Table" ("Key Col" text, "Key Space" text, n int);
INSERT INTO "Sales Schema"."My Table" SELECT 'k' || g, 'ks-' || (g % 2), g FROM generate_series(1, 50) g;
CREATE TABLE "My Table" ("Account ""Id""" bigint);
INSERT INTO "My Table" SELECT 3201012345670000 + g FROM generate_series(1, 50) g;
SELECT ringshard.distribute_table('"Sales Schema"."My Table"', 'Key Col', 'orders');
SELECT ringshard.distribute_table('"My Table"', 'Account "Id"');
SELECT * FROM ringshard.annotated_tables WHERE table_name::text LIKE '%My Table%' ORDER BY table_name::text COLLATE "C";
SELECT count(*) AS disagreements FROM "Sales Schema"."My Table" m
WHERE shard_of(m) IS DISTINCT FROM shard_for(m."Key Col", 'orders')
   OR replicas_of(m) IS DISTINCT FROM replicas_for(m."Key Col", 'orders');
SELECT count(*) AS disagreements FROM "My Table" m
WHERE replicas_of(m) IS DISTINCT FROM replicas_for(m."Account ""Id""");
SELECT sum(rows_owned) AS owned, sum(rows_held) AS held FROM ringshard.table_balance_report('"Sales Schema"."My Table"');
SELECT sum(rows_owned) AS owned, sum(rows_held) AS held FROM ringshard.table_balance_report('"My Table"');
SELECT ringshard.undistribute_table('"Sales Schema"."My Table"');
SELECT ringshard.distribute_table_by_partition('"Sales Schema"."My Table"', 'Key Col', keyspace_column => 'Key Space');
SELECT count(*) AS disagreements FROM "Sales Schema"."My Table" m
WHERE replicas_of(m) IS DISTINCT FROM nodes_for(m."Key Space", m."Key Col");
ALTER TABLE "Sales Schema"."My Table" RENAME COLUMN "Key Space" TO "Region ""Code""";
SELECT table_name, key_column, keyspace_column FROM ringshard.annotated_tables
WHERE table_name = '"Sales Schema"."My Table"'::regclass;
SELECT count(*) AS disagreements FROM "Sales Schema"."My Table" m
WHERE replicas_of(m) IS DISTINCT FROM nodes_for(m."Region ""Code""", m."Key Col");
DROP SCHEMA "Sales Schema" CASCADE;
DROP TABLE "My Table";
SELECT table_name FROM ringshard.annotated_tables ORDER BY table_name::text COLLATE "C";
-- The overview lists annotated tables too: their rows are here, routed, so
-- there is no layout on nodes to keep.
SELECT table_name, kind, placed_by, keyspace, copies, nodes, layout FROM ringshard.table_overview
 ORDER BY table_name::text COLLATE "C";

--
-- A ring or map does not change while a table laid out on it has a move
-- under way (a recorded rebalance step): the move keeps the plan it began
-- with.  Once the move's record is gone, the change goes through.
--
SELECT ringshard.create_ring('moving_ring', 16, 1);
SELECT ringshard.add_node('mv1', NULL, 'moving_ring');
CREATE TABLE moving_by_token (k text, v int);
SELECT ringshard.distribute_table('moving_by_token', 'k', 'moving_ring');
SELECT ringshard.create_partition_map('moving_map');
SELECT ringshard.assign_partitions('mv1', 0, 255, 'moving_map');
CREATE TABLE moving_by_partition (k text, v int);
SELECT ringshard.distribute_table_by_partition('moving_by_partition', 'k', 'ks', 'moving_map');
INSERT INTO ringshard.rebalance_progress (table_name, step, predicate, source, targets, deletes)
VALUES ('moving_by_token', 1, 'true', 'mv1', '{}', '{}'), ('moving_by_partition', 1, 'true', 'mv1', '{}', '{}');
SELECT ringshard.add_node('mv2', NULL, 'moving_ring');
SELECT ringshard.set_node_weight('mv1', 2, 'moving_ring');
SELECT ringshard.set_replication_factor('moving_ring', 2);
SELECT ringshard.assign_partitions('mv2', 0, 9, 'moving_map');
SELECT ringshard.unassign_partitions('mv1', 0, 9, 'moving_map');
-- other rings and maps change as usual
SELECT ringshard.create_ring('quiet_ring', 16, 1);
SELECT ringshard.add_node('mv3', NULL, 'quiet_ring');
DELETE FROM ringshard.rebalance_progress WHERE table_name IN ('moving_by_token'::regclass, 'moving_by_partition'::regclass);
SELECT ringshard.add_node('mv2', NULL, 'moving_ring');
SELECT ringshard.assign_partitions('mv2', 0, 9, 'moving_map');
DROP TABLE moving_by_token, moving_by_partition;
SELECT ringshard.remove_node('mv1', 'moving_ring');
SELECT ringshard.remove_node('mv2', 'moving_ring');
SELECT ringshard.remove_node('mv3', 'quiet_ring');
SELECT ringshard.drop_ring('moving_ring');
SELECT ringshard.drop_ring('quiet_ring');
SELECT ringshard.drop_partition_map('moving_map');

--
-- Clean up: the catalog as CREATE EXTENSION left it
--
DROP TABLE accounts, users, devices, events, faces, enrollments, tenant_orders, replicated_faces, gappy_faces, plain_table;
SELECT count(*) AS annotations FROM ringshard.distributed_tables;
SELECT ringshard.drop_ring('orders');
SELECT ringshard.drop_partition_map('replicated');
SELECT ringshard.drop_partition_map('gappy');
SELECT ringshard.load_partition_config($$version: "v1"
nodes: []
$$);
SELECT ringshard.remove_node(node_name) FROM ringshard.ring_members WHERE ring_name = 'default';
SELECT ringshard.set_replication_factor('default', 1);
SELECT * FROM ringshard.rings;
SELECT * FROM ringshard.partition_maps;
SELECT (SELECT count(*) FROM ringshard.nodes) AS nodes,
       (SELECT count(*) FROM ringshard.ring_members) AS members,
       (SELECT count(*) FROM ringshard.partition_assignments) AS assignments,
       (SELECT count(*) FROM ringshard.distributed_tables) AS annotated;

-- Every file starts from a fresh extension: the suite shares one database.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS ringshard CASCADE;
CREATE EXTENSION ringshard;
RESET client_min_messages;
--
-- ring_admin: administration of rings and nodes
--
-- Errors are shown without their PL/pgSQL context (line numbers are not part
-- of the contract); pg_temp.err() shows an error's SQLSTATE and message.
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

-- The full text of the error a statement raises (message, detail, hint), or ''.
CREATE FUNCTION pg_temp.err_text(stmt text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	msg text;
	det text;
	hnt text;
BEGIN
	EXECUTE stmt;
	RETURN '';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
	RETURN concat_ws(' | ', msg, det, hnt);
END
$$;

-- Keys used to observe routing.
CREATE TEMP TABLE keys AS SELECT 'key-' || g AS k FROM generate_series(1, 300) g;

--
-- The built-in ring: 'default', murmur3, 256 vnodes, replication 1, empty
--
SELECT * FROM ringshard.rings;
SELECT count(*) AS members FROM ringshard.ring_members;
SELECT count(*) AS nodes FROM ringshard.nodes;
SELECT ringshard.validate_ring('default') AS points;
SELECT count(*) AS points FROM ringshard.ring_points('default');
SELECT count(*) AS balance_rows FROM ringshard.ring_balance('default');
-- Routing on an empty ring is an error that says so, never NULL.
SELECT shard_for('x');
SELECT pg_temp.err($$SELECT shard_for('x')$$) AS shard_for,
       pg_temp.err($$SELECT replicas_for('x')$$) AS replicas_for,
       pg_temp.err($$SELECT read_node_for('x')$$) AS read_node_for;
SELECT pg_temp.err($$SELECT shard_for(42::bigint, 'default')$$) AS shard_for_bigint;
-- A NULL key routes nowhere, even on an empty ring (the functions are strict).
SELECT shard_for(NULL::text) IS NULL AS null_key;

--
-- create_ring and drop_ring
--
SELECT ringshard.create_ring('orders', 64, 3, 'murmur3');
SELECT ringshard.create_ring('plain');
SELECT ringshard.create_ring('memcached', algorithm => 'ketama');
SELECT ringshard.create_ring('edge-low', 1, 64);
SELECT ringshard.create_ring('edge-high', 65536, 1);
SELECT * FROM ringshard.rings ORDER BY ring_name COLLATE "C";
SELECT ringshard.create_ring('orders');
SELECT label, pg_temp.err(stmt) AS error
FROM (VALUES
	('duplicate',        $$SELECT ringshard.create_ring('orders')$$),
	('bad algorithm',    $$SELECT ringshard.create_ring('r', 256, 1, 'md5')$$),
	('NULL algorithm',   $$SELECT ringshard.create_ring('r', 256, 1, NULL)$$),
	('vnodes 0',         $$SELECT ringshard.create_ring('r', 0)$$),
	('vnodes 65537',     $$SELECT ringshard.create_ring('r', 65537)$$),
	('vnodes NULL',      $$SELECT ringshard.create_ring('r', NULL)$$),
	('replication 0',    $$SELECT ringshard.create_ring('r', 256, 0)$$),
	('replication 65',   $$SELECT ringshard.create_ring('r', 256, 65)$$),
	('replication NULL', $$SELECT ringshard.create_ring('r', 256, NULL)$$),
	('empty name',       $$SELECT ringshard.create_ring('')$$),
	('NULL name',        $$SELECT ringshard.create_ring(NULL)$$),
	('1025-byte name',   $$SELECT ringshard.create_ring(repeat('r', 1025))$$)
) v(label, stmt);
-- A name of exactly 1024 bytes is fine.
SELECT ringshard.create_ring(repeat('r', 1024));
SELECT ringshard.drop_ring(repeat('r', 1024));
-- Nothing was half-created.
SELECT ring_name FROM ringshard.rings ORDER BY ring_name COLLATE "C";
SELECT ringshard.drop_ring('plain');
SELECT ringshard.drop_ring('edge-low');
SELECT ringshard.drop_ring('edge-high');
SELECT ringshard.drop_ring('plain');
SELECT pg_temp.err($$SELECT ringshard.drop_ring('never-existed')$$) AS drop_missing;
SELECT ring_name FROM ringshard.rings ORDER BY ring_name COLLATE "C";

--
-- add_node: with and without address, on several rings and in a partition map
--
SELECT ringshard.add_node('shard-a', 'a.example:5432');
SELECT ringshard.add_node('shard-b', 'host=b.example port=5432 dbname=app');
SELECT ringshard.add_node('shard-c');
-- shard-a joins a second ring without repeating its address, shard-b with the
-- same address, shard-d is new with weight 2.
SELECT ringshard.add_node('shard-a', ring => 'orders');
SELECT ringshard.add_node('shard-b', 'host=b.example port=5432 dbname=app', 'orders');
SELECT ringshard.add_node('shard-d', 'd.example:5432', 'orders', 2);
-- ... and a partition map.
SELECT ringshard.assign_partitions('shard-a', 0, 255);
SELECT node_name, ringshard.server_address(server_name) AS address, is_up FROM ringshard.nodes ORDER BY node_name COLLATE "C";
SELECT ring_name, node_name, weight FROM ringshard.ring_members
ORDER BY ring_name COLLATE "C", node_name COLLATE "C";
SELECT ringshard.validate_ring('default') AS default_points, ringshard.validate_ring('orders') AS orders_points;
SELECT ringshard.add_node('shard-a', ring => 'orders');
SELECT ringshard.add_node('shard-a', 'elsewhere.example:5432', 'memcached');
SELECT label, pg_temp.err(stmt) AS error
FROM (VALUES
	('already a member',     $$SELECT ringshard.add_node('shard-a', ring => 'orders')$$),
	('member, same address', $$SELECT ringshard.add_node('shard-b', 'host=b.example port=5432 dbname=app', 'orders')$$),
	('other address',        $$SELECT ringshard.add_node('shard-a', 'elsewhere.example:5432', 'memcached')$$),
	('unknown ring',         $$SELECT ringshard.add_node('shard-e', ring => 'nope')$$),
	('NULL ring',            $$SELECT ringshard.add_node('shard-e', ring => NULL)$$),
	('weight 0',             $$SELECT ringshard.add_node('shard-e', weight => 0)$$),
	('weight -1',            $$SELECT ringshard.add_node('shard-e', weight => -1)$$),
	('weight NaN',           $$SELECT ringshard.add_node('shard-e', weight => 'NaN')$$),
	('weight Infinity',      $$SELECT ringshard.add_node('shard-e', weight => 'Infinity')$$),
	('weight -Infinity',     $$SELECT ringshard.add_node('shard-e', weight => '-Infinity')$$),
	('weight NULL',          $$SELECT ringshard.add_node('shard-e', weight => NULL)$$),
	('empty node name',      $$SELECT ringshard.add_node('')$$),
	('NULL node name',       $$SELECT ringshard.add_node(NULL)$$),
	('1025-byte node name',  $$SELECT ringshard.add_node(repeat('n', 1025))$$),
	('empty address',        $$SELECT ringshard.add_node('shard-e', '')$$),
	('address with a space', $$SELECT ringshard.add_node('shard-e', 'e.example :5432')$$),
	('unparsable conninfo',  $$SELECT ringshard.add_node('shard-e', 'host=''e.example')$$)
) v(label, stmt);
-- A node that exists without an address cannot silently gain one through
-- add_node; the refusal must say that it has no address (not print "<NULL>").
SELECT e LIKE '42710: %' AS refused, e NOT LIKE '%<NULL>%' AS message_is_clear
FROM pg_temp.err($$SELECT ringshard.add_node('shard-c', 'c.example:5432', 'orders')$$) e;

-- Addresses that carry a password are refused, and the error never shows it.
SELECT ringshard.add_node('leaky', 'host=a.example password=S3cr3t');
SELECT address, e LIKE '22023: a node address may not set %' AS refused,
       position('S3cr3t' IN e) > 0 AS shows_password
FROM (VALUES
	('host=a.example password=S3cr3t'),
	('host=a.example password = S3cr3t'),
	('host=a.example password=''top S3cr3t'''),
	('host=a.example sslpassword=S3cr3t'),
	('postgresql://u:S3cr3t@a.example/db'),
	('postgresql://a.example/db?password=S3cr3t')
) v(address), pg_temp.err(format('SELECT ringshard.add_node(%L, %L)', 'leaky', address)) e;
SELECT address, e LIKE '22023: a node address may not set %' AS refused,
       position('S3cr3t' IN e) > 0 AS shows_password
FROM (VALUES
	('host=c.example password=S3cr3t'),
	('postgresql://u:S3cr3t@c.example/db')
) v(address), pg_temp.err(format('SELECT ringshard.set_node_address(%L, %L)', 'shard-c', address)) e;
SELECT count(*) AS leaky_nodes FROM ringshard.nodes WHERE node_name = 'leaky';
SELECT count(*) AS leaky_servers FROM pg_catalog.pg_foreign_server WHERE srvoptions::text LIKE '%S3cr3t%';

--
-- set_node_address
--
SELECT ringshard.set_node_address('shard-c', 'c.example:5432');
-- now the same address may be repeated when joining another ring
SELECT ringshard.add_node('shard-c', 'c.example:5432', 'orders');
SELECT ringshard.set_node_address('shard-b', 'b2.example:6432');
SELECT node_name, ringshard.server_address(server_name) AS address FROM ringshard.nodes ORDER BY node_name COLLATE "C";
SELECT ringshard.set_node_address('shard-c', NULL);
SELECT node_name, ringshard.server_address(server_name) AS address FROM ringshard.nodes WHERE node_name = 'shard-c';
SELECT pg_temp.err($$SELECT ringshard.set_node_address('no-such-node', 'x.example:5432')$$) AS unknown_node;

--
-- remove_node
--
SELECT pg_temp.err($$SELECT ringshard.remove_node('shard-d')$$) AS not_a_member,
       pg_temp.err($$SELECT ringshard.remove_node('no-such-node')$$) AS unknown_node,
       pg_temp.err($$SELECT ringshard.remove_node('shard-a', 'nope')$$) AS unknown_ring;
-- shard-a leaves 'default' but stays a node: it is on 'orders' and in the map.
SELECT ringshard.remove_node('shard-a');
SELECT ring_name, node_name FROM ringshard.ring_members WHERE node_name = 'shard-a';
SELECT node_name, ringshard.server_address(server_name) AS address FROM ringshard.nodes WHERE node_name = 'shard-a';
SELECT count(*) FILTER (WHERE shard_for(k) = 'shard-a') AS keys_on_removed_node,
       count(DISTINCT shard_for(k)) AS owners
FROM keys;
-- Still in the map after leaving its last ring ...
SELECT ringshard.remove_node('shard-a', 'orders');
SELECT node_name, ringshard.server_address(server_name) AS address FROM ringshard.nodes WHERE node_name = 'shard-a';
-- ... and forgotten once no ring and no map uses it.
SELECT ringshard.unassign_partitions('shard-a', 0, 255);
SELECT count(*) AS shard_a_rows FROM ringshard.nodes WHERE node_name = 'shard-a';

--
-- set_node_weight: points = round(vnodes * weight), at least 1
--
SELECT node, weight, points FROM ringshard.ring_balance('orders') ORDER BY node COLLATE "C";
SELECT ringshard.set_node_weight('shard-d', 0.5, 'orders');
SELECT ringshard.set_node_weight('shard-c', 0.001, 'orders');
SELECT ringshard.set_node_weight('shard-b', 2.5, 'orders');
SELECT node, weight, points FROM ringshard.ring_balance('orders') ORDER BY node COLLATE "C";
SELECT node, count(*) AS points FROM ringshard.ring_points('orders') GROUP BY node ORDER BY node COLLATE "C";
SELECT label, pg_temp.err(stmt) AS error
FROM (VALUES
	('not a member', $$SELECT ringshard.set_node_weight('shard-d', 2)$$),
	('unknown node', $$SELECT ringshard.set_node_weight('no-such-node', 2, 'orders')$$),
	('unknown ring', $$SELECT ringshard.set_node_weight('shard-b', 2, 'nope')$$),
	('weight 0',     $$SELECT ringshard.set_node_weight('shard-b', 0, 'orders')$$),
	('weight -1',    $$SELECT ringshard.set_node_weight('shard-b', -1, 'orders')$$),
	('weight NaN',   $$SELECT ringshard.set_node_weight('shard-b', 'NaN', 'orders')$$),
	('weight Inf',   $$SELECT ringshard.set_node_weight('shard-b', 'Infinity', 'orders')$$)
) v(label, stmt);
SELECT node, weight FROM ringshard.ring_balance('orders') ORDER BY node COLLATE "C";

-- The weighted ring of docs/routing.md §6: a, b weight 1, c weight 2, 4 vnodes, R=3,
-- reached by changing c's weight after the fact.
SELECT ringshard.create_ring('weighted', 4, 3);
SELECT ringshard.add_node(n, ring => 'weighted') FROM (VALUES ('a'), ('b'), ('c')) v(n);
SELECT ringshard.set_node_weight('c', 2, 'weighted');
SELECT node, weight, points FROM ringshard.ring_balance('weighted') ORDER BY node COLLATE "C";
SELECT token, node FROM ringshard.ring_points('weighted');
SELECT k, shard_for(k, 'weighted') AS owner, replicas_for(k, 'weighted') AS replicas
FROM (VALUES ('k1'), ('k2'), ('k3'), ('k4'), ('k5'), ('k6')) v(k);
SELECT ringshard.drop_ring('weighted');

-- A ketama ring (docs/routing.md §6 "Ketama"): 40 labels of 4 points per server,
-- shared by weight: 30, 30 and 60 labels.
SELECT ringshard.add_node(n, ring => 'memcached', weight => w)
FROM (VALUES ('10.0.0.1:11211', 1), ('10.0.0.2:11211', 1), ('10.0.0.3:11211', 2)) v(n, w);
SELECT node, weight, points FROM ringshard.ring_balance('memcached') ORDER BY node COLLATE "C";
SELECT k, shard_for(k, 'memcached') AS owner
FROM (VALUES ('foo'), ('bar'), ('key-1'), ('3201012345670001')) v(k);

--
-- set_replication_factor and replicas_for
--
SELECT ringshard.add_node('shard-a', 'a.example:5432');
SELECT ringshard.set_replication_factor('default', 2);
SELECT replication_factor FROM ringshard.rings WHERE ring_name = 'default';
SELECT cardinality(replicas_for(k)) AS replicas, count(*) AS keys,
       count(*) FILTER (WHERE (replicas_for(k))[1] <> shard_for(k)) AS owner_not_first,
       count(*) FILTER (WHERE cardinality(ARRAY(SELECT DISTINCT unnest(replicas_for(k)))) <> cardinality(replicas_for(k))) AS repeated_nodes
FROM keys GROUP BY 1;
SELECT ringshard.set_replication_factor('default', 3);
SELECT cardinality(replicas_for(k)) AS replicas, count(*) AS keys FROM keys GROUP BY 1;
-- more replicas than nodes: every node, owner first
SELECT ringshard.set_replication_factor('default', 64);
SELECT cardinality(replicas_for(k)) AS replicas, count(*) AS keys,
       count(*) FILTER (WHERE (replicas_for(k))[1] <> shard_for(k)) AS owner_not_first
FROM keys GROUP BY 1;
-- An explicit n overrides the factor; the replica sets nest.
SELECT count(*) FILTER (WHERE replicas_for(k, 'default', 1) <> ARRAY[shard_for(k)]) AS n1_not_owner,
       count(*) FILTER (WHERE replicas_for(k, 'default', 2) <> (replicas_for(k))[1:2]) AS n2_not_prefix,
       count(*) FILTER (WHERE replicas_for(k, 'default', 1000) <> replicas_for(k)) AS n1000_not_all
FROM keys;
-- n above the factor gives n nodes (the COMMENT says n overrides it)
SELECT ringshard.set_replication_factor('default', 2);
SELECT count(*) FILTER (WHERE cardinality(replicas_for(k, 'default', 3)) <> 3) AS n3_not_3_nodes,
       count(*) FILTER (WHERE (replicas_for(k, 'default', 3))[1:2] <> replicas_for(k)) AS n3_not_extending_r
FROM keys;
SELECT obj_description('pg_catalog.replicas_for(text, text, integer)'::regprocedure) AS n_documented;
-- a factor above the node count is kept (nodes may join later), with a
-- warning that the replica sets hold every node until then
SELECT count(*) AS nodes FROM ringshard.ring_members WHERE ring_name = 'default';
SELECT ringshard.set_replication_factor('default', 5);
SELECT replication_factor FROM ringshard.rings WHERE ring_name = 'default';
SELECT cardinality(replicas_for('key-1')) AS replicas;
SELECT pg_temp.err($$SELECT replicas_for('k', 'default', 0)$$) AS n_zero;
SELECT label, pg_temp.err(stmt) AS error
FROM (VALUES
	('replication 0',  $$SELECT ringshard.set_replication_factor('default', 0)$$),
	('replication 65', $$SELECT ringshard.set_replication_factor('default', 65)$$),
	('unknown ring',   $$SELECT ringshard.set_replication_factor('nope', 2)$$)
) v(label, stmt);
SELECT ringshard.set_replication_factor('default', 2);

--
-- mark_node_down / mark_node_up: ownership is unchanged, reads avoid the node
--
CREATE TEMP TABLE placed AS SELECT k, shard_for(k) AS owner, replicas_for(k) AS replicas FROM keys;
SELECT replicas, count(*) AS keys FROM placed GROUP BY replicas ORDER BY replicas::text COLLATE "C";
SELECT ringshard.mark_node_down('shard-b');
SELECT node_name, is_up FROM ringshard.nodes ORDER BY node_name COLLATE "C";
SELECT count(*) FILTER (WHERE shard_for(k) <> owner) AS owner_changed,
       count(*) FILTER (WHERE replicas_for(k) <> replicas) AS replicas_changed
FROM placed;
-- 5 reads of every key: never the down node, always a replica
SELECT count(*) AS reads,
       count(*) FILTER (WHERE r = 'shard-b') AS read_from_down_node,
       count(*) FILTER (WHERE r <> ALL (replicas)) AS read_outside_replicas
FROM (SELECT replicas, read_node_for(k) AS r FROM placed, generate_series(1, 5)) s;
-- keys with shard-b in their set are read from the other replica only
SELECT replicas, array_agg(DISTINCT r ORDER BY r) AS read_from
FROM (SELECT replicas, read_node_for(k) AS r FROM placed, generate_series(1, 5)) s
GROUP BY replicas ORDER BY replicas::text COLLATE "C";
-- every replica down: an error, not a down node
SELECT ringshard.mark_node_down('shard-c');
SELECT read_node_for(k) FROM placed WHERE replicas = '{shard-b,shard-c}' LIMIT 1;
SELECT pg_temp.err(format('SELECT read_node_for(%L)', k)) AS all_replicas_down
FROM placed WHERE replicas = '{shard-c,shard-b}' LIMIT 1;
-- a key with one healthy replica is still readable
SELECT count(*) FILTER (WHERE read_node_for(k) <> 'shard-a') AS bad_reads
FROM placed WHERE 'shard-a' = ANY (replicas);
SELECT pg_temp.err($$SELECT ringshard.mark_node_down('no-such-node')$$) AS down_unknown,
       pg_temp.err($$SELECT ringshard.mark_node_up('no-such-node')$$) AS up_unknown;
SELECT ringshard.mark_node_up('shard-b');
SELECT ringshard.mark_node_up('shard-c');
-- reads spread over both replicas again
SELECT replicas, array_agg(DISTINCT r ORDER BY r) AS read_from
FROM (SELECT replicas, read_node_for(k) AS r FROM placed, generate_series(1, 5)) s
GROUP BY replicas ORDER BY replicas::text COLLATE "C";

--
-- The point cap: at most 4,194,304 points in a ring
--
SELECT ringshard.create_ring('capped', 65536);
-- the refusal names the weight that was asked for, not a rounded one
SELECT pg_temp.err($$SELECT ringshard.add_node('big', ring => 'capped', weight => 64.00001)$$) AS error,
       position('64.00001' IN pg_temp.err_text($$SELECT ringshard.add_node('big', ring => 'capped', weight => 64.00001)$$)) > 0
	   AS names_the_weight;
SELECT ringshard.add_node('big', ring => 'capped');
-- each node alone is under the cap, together they are over it by one point
SELECT pg_temp.err($$SELECT ringshard.add_node('huge', ring => 'capped', weight => 63.00001)$$) AS total_over_cap;
SELECT pg_temp.err($$SELECT ringshard.set_node_weight('big', 65, 'capped')$$) AS weight_over_cap;
SELECT pg_temp.err($$SELECT ringshard.add_node('huge', ring => 'capped', weight => 1e300)$$) AS enormous_weight;
-- the catalog is as it was, and the ring still routes
SELECT ring_name, node_name, weight FROM ringshard.ring_members WHERE ring_name = 'capped';
SELECT count(*) AS huge_nodes FROM ringshard.nodes WHERE node_name = 'huge';
SELECT ringshard.validate_ring('capped') AS points, shard_for('x', 'capped');
SELECT ringshard.drop_ring('capped');

--
-- Transactions: routing follows uncommitted changes and their rollback
--
SELECT ringshard.set_replication_factor('default', 1);
CREATE TEMP TABLE owners AS SELECT k, shard_for(k) AS owner FROM keys;
SELECT owner, count(*) FROM owners GROUP BY owner ORDER BY owner COLLATE "C";
BEGIN;
SELECT ringshard.add_node('shard-e');
-- inside the transaction shard-e owns keys, and only keys moved to it moved
SELECT shard_for(k) AS owner, count(*) FROM keys GROUP BY 1 ORDER BY shard_for(k) COLLATE "C";
SELECT count(*) AS moved_elsewhere FROM owners WHERE shard_for(k) NOT IN (owner, 'shard-e');
ROLLBACK;
SELECT count(*) AS changed_after_rollback FROM owners WHERE shard_for(k) <> owner;
SELECT count(*) AS shard_e_rows FROM ringshard.nodes WHERE node_name = 'shard-e';
BEGIN;
SELECT shard_for('key-1');
SAVEPOINT before_add;
SELECT ringshard.add_node('shard-e');
SELECT count(*) FILTER (WHERE shard_for(k) = 'shard-e') > 0 AS shard_e_owns_keys FROM keys;
ROLLBACK TO SAVEPOINT before_add;
SELECT count(*) AS changed_after_rollback_to FROM owners WHERE shard_for(k) <> owner;
SAVEPOINT before_remove;
SELECT ringshard.remove_node('shard-c');
SELECT count(*) FILTER (WHERE shard_for(k) = 'shard-c') AS keys_on_shard_c,
       count(*) FILTER (WHERE owner <> 'shard-c' AND shard_for(k) <> owner) AS other_keys_moved
FROM owners;
RELEASE SAVEPOINT before_remove;
ROLLBACK;
SELECT count(*) AS changed_after_rollback FROM owners WHERE shard_for(k) <> owner;
-- a failed change inside a transaction leaves routing as it was
BEGIN;
SAVEPOINT s;
SELECT ringshard.add_node('shard-e', weight => 1e9);
ROLLBACK TO SAVEPOINT s;
SELECT count(*) AS changed FROM owners WHERE shard_for(k) <> owner;
COMMIT;

--
-- Direct DML on the catalog is seen by the next statement's routing
--
UPDATE ringshard.ring_members SET weight = 4 WHERE ring_name = 'default' AND node_name = 'shard-b';
SELECT node, weight, points FROM ringshard.ring_balance() ORDER BY node COLLATE "C";
SELECT count(*) FILTER (WHERE owner <> 'shard-b' AND shard_for(k) = 'shard-b') > 0 AS keys_moved_to_b,
       count(*) FILTER (WHERE shard_for(k) NOT IN (owner, 'shard-b')) AS moved_elsewhere
FROM owners;
UPDATE ringshard.ring_members SET weight = 1 WHERE ring_name = 'default' AND node_name = 'shard-b';
SELECT count(*) AS changed FROM owners WHERE shard_for(k) <> owner;
UPDATE ringshard.rings SET replication_factor = 3 WHERE ring_name = 'default';
SELECT cardinality(replicas_for('key-1')) AS replicas;
UPDATE ringshard.rings SET replication_factor = 1 WHERE ring_name = 'default';
UPDATE ringshard.nodes SET is_up = false WHERE node_name = 'shard-a';
SELECT pg_temp.err(format('SELECT read_node_for(%L)', k)) AS read_from_down_owner
FROM owners WHERE owner = 'shard-a' LIMIT 1;
UPDATE ringshard.nodes SET is_up = true WHERE node_name = 'shard-a';
DELETE FROM ringshard.ring_members WHERE ring_name = 'default' AND node_name = 'shard-c';
SELECT count(*) FILTER (WHERE shard_for(k) = 'shard-c') AS keys_on_shard_c FROM owners;
INSERT INTO ringshard.ring_members (ring_name, node_name) VALUES ('default', 'shard-c');
SELECT count(*) AS changed FROM owners WHERE shard_for(k) <> owner;
-- the catalog's own checks still apply to direct DML
UPDATE ringshard.ring_members SET weight = 'NaN' WHERE ring_name = 'default' AND node_name = 'shard-c';
UPDATE ringshard.rings SET vnodes = 0 WHERE ring_name = 'default';
-- a server of the wrapper refuses credentials, whoever creates it
SELECT pg_temp.err($$CREATE SERVER x FOREIGN DATA WRAPPER ringshard OPTIONS (host 'a', password 'p')$$) AS bad_server;
SELECT pg_temp.err($$CREATE SERVER x FOREIGN DATA WRAPPER ringshard OPTIONS (host 'a', passfile '/root/.pgpass')$$) AS bad_server;

--
-- The last node of a ring that an annotated table uses cannot be removed
--
SELECT ringshard.create_ring('solo');
SELECT ringshard.add_node('solo-1', ring => 'solo');
CREATE TABLE solo_data (id bigint);
SELECT ringshard.distribute_table('solo_data', 'id', 'solo');
SELECT ringshard.remove_node('solo-1', 'solo');
SELECT pg_temp.err($$SELECT ringshard.remove_node('solo-1', 'solo')$$) AS remove_last,
       pg_temp.err($$SELECT ringshard.drop_ring('solo')$$) AS drop_ring;
-- with a second node, the first may go; then the second is the last
SELECT ringshard.add_node('solo-2', ring => 'solo');
SELECT ringshard.remove_node('solo-1', 'solo');
SELECT pg_temp.err($$SELECT ringshard.remove_node('solo-2', 'solo')$$) AS remove_last;
SELECT ringshard.undistribute_table('solo_data');
SELECT ringshard.remove_node('solo-2', 'solo');
SELECT ringshard.drop_ring('solo');
DROP TABLE solo_data;
SELECT count(*) AS solo_nodes FROM ringshard.nodes WHERE node_name LIKE 'solo-%';

--
-- Names full of quotes and SQL metacharacters are data, never SQL
--
CREATE TABLE victim (id int);
SELECT ringshard.create_ring($$'; DROP TABLE victim; --$$, 16, 2);
SELECT ringshard.add_node(n, ring => $$'; DROP TABLE victim; --$$)
FROM (VALUES ($$'; DROP TABLE victim; --$$), ('"'), ('\'), ($$Robert'); DROP TABLE victim;--$$),
             ('%s %I %L'), ('$$ $x$')) v(n);
SELECT ringshard.add_node('"');
SELECT ring_name, node_name FROM ringshard.ring_members
WHERE ring_name = $$'; DROP TABLE victim; --$$ ORDER BY node_name COLLATE "C";
SELECT node, points FROM ringshard.ring_balance($$'; DROP TABLE victim; --$$) ORDER BY node COLLATE "C";
SELECT shard_for('key-1', $$'; DROP TABLE victim; --$$), replicas_for('key-1', $$'; DROP TABLE victim; --$$);
SELECT count(DISTINCT shard_for(k, $$'; DROP TABLE victim; --$$)) AS owners FROM keys;
SELECT ringshard.set_node_weight('\', 2, $$'; DROP TABLE victim; --$$);
SELECT ringshard.mark_node_down($$Robert'); DROP TABLE victim;--$$);
SELECT ringshard.mark_node_up($$Robert'); DROP TABLE victim;--$$);
SELECT ringshard.remove_node('%s %I %L', $$'; DROP TABLE victim; --$$);
SELECT pg_temp.err($$SELECT ringshard.create_ring($q$'; DROP TABLE victim; --$q$)$$) AS duplicate;
SELECT pg_temp.err($$SELECT ringshard.remove_node('%s %I %L', $q$'; DROP TABLE victim; --$q$)$$) AS not_a_member;
SELECT ringshard.drop_ring($$'; DROP TABLE victim; --$$);
SELECT ringshard.remove_node('"');
SELECT to_regclass('victim') AS victim_still_there;
SELECT count(*) AS leftover_nodes FROM ringshard.nodes
WHERE node_name NOT IN ('shard-a', 'shard-b', 'shard-c', 'shard-d');
DROP TABLE victim;

--
-- An administration error is one clean error: no CONTEXT lines from the
-- helpers it was raised in (lock_ring, check_weight, ensure_node,
-- check_name, ...), however deep; a caller's own context is kept.
--
\set SHOW_CONTEXT errors
SELECT ringshard.add_node('shard-x', NULL, 'no-such-ring');
SELECT ringshard.add_node('shard-x', NULL, 'default', -1);
SELECT ringshard.add_node('', NULL);
SELECT ringshard.add_node('shard-a', 'elsewhere.example:5432', 'orders');
SELECT ringshard.set_node_weight('shard-a', 0, 'orders');
SELECT ringshard.set_replication_factor('no-such-ring', 2);
SELECT ringshard.remove_node('shard-a', 'no-such-ring');
SELECT ringshard.drop_ring('no-such-ring');
SELECT ringshard.mark_node_down('no-such-node');
SELECT ringshard.create_ring('');
SELECT ringshard.assign_partitions('shard-a', 0, 300);
SELECT ringshard.unassign_partitions('shard-a', 0, 10, 'no-such-map');
CREATE TEMP TABLE unplaced (id bigint);
SELECT ringshard.distribute_table('unplaced', 'id', 'no-such-ring');
DROP TABLE unplaced;
DO $$ BEGIN PERFORM ringshard.add_node('shard-x', NULL, 'no-such-ring'); END $$;
-- routing on a wrong ring, or on a ring without nodes (as 'default' is when
-- the ring argument is forgotten), names the rings there are
SELECT ringshard.create_ring('no-nodes');
SELECT shard_for('key-1', 'no-nodes');
SELECT replicas_for(42, 'no-nodes');
SELECT shard_for('key-1', 'no-such-ring');
SELECT ringshard.drop_ring('no-nodes');
-- a hint, not a listing: ten names at most
SELECT count(*) AS rings FROM (SELECT ringshard.create_ring('many-' || lpad(g::text, 2, '0')) FROM generate_series(1, 12) g) s;
SELECT shard_for('key-1', 'no-such-ring');
SELECT ringshard.drop_ring('no-such-ring');
SELECT count(*) AS dropped FROM (SELECT ringshard.drop_ring('many-' || lpad(g::text, 2, '0')) FROM generate_series(1, 12) g) s;
\set SHOW_CONTEXT never

--
-- The hash-ring chapter's three shards, 256 vnodes each, replication 2 (docs/routing.md §6 "Ring")
--
SELECT ringshard.drop_ring('orders');
SELECT ringshard.drop_ring('memcached');
SELECT ringshard.remove_node(node_name) FROM ringshard.ring_members WHERE ring_name = 'default';
SELECT count(*) AS nodes_left FROM ringshard.nodes;
SELECT ringshard.set_replication_factor('default', 2);
SELECT ringshard.add_node('shard-jakarta-01');
SELECT ringshard.add_node('shard-surabaya-02');
SELECT ringshard.add_node('shard-makassar-03');
SELECT count(*) AS points FROM ringshard.ring_points();
SELECT token, node FROM ringshard.ring_points() LIMIT 3;
CREATE TEMP TABLE chapter_ring (k text, token ringtoken, owner text, replicas text[]);
INSERT INTO chapter_ring VALUES
	('3201012345670001', '15884386775397619189', 'shard-surabaya-02', '{shard-surabaya-02,shard-jakarta-01}'),
	('3578021122330002', '8811238047343097349', 'shard-makassar-03', '{shard-makassar-03,shard-surabaya-02}'),
	('7371034455660003', '14745517588873323327', 'shard-makassar-03', '{shard-makassar-03,shard-surabaya-02}'),
	('3171059988770004', '7138621039917915904', 'shard-makassar-03', '{shard-makassar-03,shard-surabaya-02}'),
	('key-1', '18316859633611270910', 'shard-makassar-03', '{shard-makassar-03,shard-surabaya-02}'),
	('key-2', '15933830083902091493', 'shard-surabaya-02', '{shard-surabaya-02,shard-jakarta-01}'),
	('key-3', '2277932087057949865', 'shard-makassar-03', '{shard-makassar-03,shard-surabaya-02}'),
	('key-4', '5869623425920187448', 'shard-makassar-03', '{shard-makassar-03,shard-jakarta-01}');
SELECT k, ring_token(k) AS token, shard_for(k) AS owner, replicas_for(k) AS replicas FROM chapter_ring;
SELECT count(*) AS mismatches FROM chapter_ring
WHERE ring_token(k) <> token OR shard_for(k) <> owner OR replicas_for(k) <> replicas;
-- the numeric keys route alike as bigint
SELECT count(*) AS bigint_mismatches FROM chapter_ring
WHERE k ~ '^[0-9]+$' AND (shard_for(k::bigint) <> owner OR replicas_for(k::bigint) <> replicas);
-- an owner marked down keeps its keys; reads go to the other replica
SELECT ringshard.mark_node_down('shard-makassar-03');
SELECT k, shard_for(k) AS owner, read_node_for(k) AS read_node FROM chapter_ring WHERE owner = 'shard-makassar-03';
SELECT ringshard.mark_node_up('shard-makassar-03');

-- The backend cache frees what a rebuilt ring or map replaces: 30 topology
-- changes, each followed by lookups in the next transaction, leave the cache's
-- memory where one change left it (each entry has its own memory context,
-- freed with the entry at the end of the transaction that retired it).
CREATE PROCEDURE churn_topology(changes int) LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1..changes LOOP
    PERFORM ringshard.set_node_weight('shard-makassar-03', 1 + (i % 2) * 0.5);
    PERFORM ringshard.assign_partitions('shard-jakarta-01', 0, 255 - (i % 2), 'cache_check');
    COMMIT;
    PERFORM shard_for('k'), replicas_for('k'), nodes_for('ks', 'k', 'cache_check');
    COMMIT;
  END LOOP;
END $$;
CREATE TEMP TABLE cache_memory (phase text, bytes bigint);
SELECT ringshard.create_partition_map('cache_check');
CALL churn_topology(2);
INSERT INTO cache_memory SELECT 'after 2', sum(total_bytes) FROM pg_backend_memory_contexts WHERE name = 'ringshard topology';
CALL churn_topology(30);
INSERT INTO cache_memory SELECT 'after 32', sum(total_bytes) FROM pg_backend_memory_contexts WHERE name = 'ringshard topology';
SELECT (SELECT bytes FROM cache_memory WHERE phase = 'after 32') <=
       (SELECT bytes FROM cache_memory WHERE phase = 'after 2') AS cache_memory_bounded,
       (SELECT count(*) FROM pg_backend_memory_contexts WHERE name = 'ringshard topology') AS cache_contexts;
SELECT ringshard.drop_partition_map('cache_check');
DROP PROCEDURE churn_topology(int);

--
-- Clean up: the catalog as CREATE EXTENSION left it
--
SELECT ringshard.remove_node(node_name) FROM ringshard.ring_members WHERE ring_name = 'default';
SELECT ringshard.set_replication_factor('default', 1);
SELECT * FROM ringshard.rings;
SELECT (SELECT count(*) FROM ringshard.nodes) AS nodes,
       (SELECT count(*) FROM ringshard.ring_members) AS members,
       (SELECT count(*) FROM ringshard.partition_assignments) AS assignments,
       (SELECT count(*) FROM ringshard.distributed_tables) AS annotated;

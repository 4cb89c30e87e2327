--
-- Reference tables (ringshard.create_reference_table): a copy on every
-- node, written on all copies in one atomic commit, read from one; joins of
-- distributed tables with them go whole to a node (router statements), and a
-- node that joins gets its copy with the rebalance.
--
-- The nodes are databases of this server; the coordinator is a database of
-- its own.  The server needs max_prepared_transactions.
--
SET client_min_messages = warning;
CREATE DATABASE reference_coord;
CREATE DATABASE reference_w1;
CREATE DATABASE reference_w2;
CREATE DATABASE reference_w3;
CREATE DATABASE reference_w4;
\c reference_w1
CREATE EXTENSION ringshard;
\c reference_w2
CREATE EXTENSION ringshard;
\c reference_w3
CREATE EXTENSION ringshard;
\c reference_w4
CREATE EXTENSION ringshard;
\c reference_coord
SET client_min_messages = warning;
CREATE EXTENSION ringshard;
LOAD 'ringshard';
SELECT format('host=%s port=%s',
			  coalesce(nullif(split_part(current_setting('unix_socket_directories'), ',', 1), ''), 'localhost'),
			  current_setting('port')) AS server \gset
SELECT ringshard.create_ring('pair', replication_factor => 2);
SELECT ringshard.add_node('w' || i, format('%s dbname=reference_w%s', :'server', i), 'pair') FROM generate_series(1, 3) i;
SELECT count(*) FROM ringshard.sync_topology();

-- Orders by customer on the ring, the sites they were placed at everywhere;
-- local twins of both.
CREATE TABLE sites_local (id int PRIMARY KEY, city text NOT NULL, closed boolean NOT NULL DEFAULT false);
INSERT INTO sites_local SELECT g, 'city ' || g, g % 4 = 0 FROM generate_series(1, 12) g;
CREATE TABLE orders_local (customer_id bigint, id bigint, site_id int, amount numeric(10,2), PRIMARY KEY (customer_id, id));
INSERT INTO orders_local SELECT 1 + g % 40, g, 1 + g % 12, g % 23 FROM generate_series(1, 600) g;
CREATE TABLE sites (LIKE sites_local INCLUDING ALL);
CREATE TABLE orders (LIKE orders_local INCLUDING ALL);
INSERT INTO sites SELECT * FROM sites_local;
INSERT INTO orders SELECT * FROM orders_local;
SELECT ringshard.distribute_table('orders', 'customer_id', 'pair');
SELECT ringshard.create_distributed_table('orders');
SELECT ringshard.create_reference_table('sites');
-- a copy on each node; the ring "reference" has every node
SELECT r.node, r.rows FROM ringshard.node_table_rows('sites') r ORDER BY r.node;
SELECT ring_name, replication_factor FROM ringshard.rings WHERE ring_name = 'reference';
SELECT node_name FROM ringshard.ring_members WHERE ring_name = 'reference' ORDER BY node_name;

CREATE FUNCTION differences(query text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
	dist text[] := '{}';
	twin text[] := '{}';
	r record;
	n bigint;
BEGIN
	-- each query a statement of its own (as the router plans a client's), rows compared as text in any order
	FOR r IN EXECUTE format(query, 'sites', 'orders') LOOP
		dist := dist || r::text;
	END LOOP;
	FOR r IN EXECUTE format(query, 'sites_local', 'orders_local') LOOP
		twin := twin || r::text;
	END LOOP;
	SELECT count(*) INTO n
	  FROM ((SELECT unnest(dist) EXCEPT ALL SELECT unnest(twin)) UNION ALL (SELECT unnest(twin) EXCEPT ALL SELECT unnest(dist))) d;
	RETURN n;
END $$;
CREATE FUNCTION routed(query text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
	line text;
BEGIN
	FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || format(query, 'sites', 'orders') LOOP
		IF line LIKE '%ringshard router%' THEN
			RETURN true;
		END IF;
	END LOOP;
	RETURN false;
END $$;
CREATE TABLE queries (n serial, query text);
INSERT INTO queries (query) VALUES
	-- a customer's orders with their sites: whole on a replica of the customer
	('SELECT o.id, s.city FROM %2$s o JOIN %1$s s ON s.id = o.site_id WHERE o.customer_id = 5'),
	('SELECT s.city, count(*), sum(o.amount) FROM %2$s o JOIN %1$s s ON s.id = o.site_id WHERE o.customer_id = 6 AND NOT s.closed GROUP BY s.city'),
	('SELECT o.id FROM %2$s o WHERE o.customer_id = 7 AND EXISTS (SELECT 1 FROM %1$s s WHERE s.id = o.site_id AND s.closed)'),
	('SELECT s.id, s.city, (SELECT count(*) FROM %2$s o WHERE o.customer_id = 8 AND o.site_id = s.id) FROM %1$s s'),
	-- the reference table alone: any one node
	('SELECT a.city, b.city FROM %1$s a JOIN %1$s b ON b.id = a.id + 1 WHERE a.closed'),
	-- every customer: each node joins the orders of the customers it serves with its copy ...
	('SELECT o.customer_id, s.city, count(*) FROM %2$s o JOIN %1$s s ON s.id = o.site_id GROUP BY o.customer_id, s.city'),
	-- (a reference table joined on the key itself is no different)
	('SELECT o.customer_id, o.id, s.city FROM %2$s o JOIN %1$s s ON s.id = o.customer_id'),
	-- ... and a total by site mixes customers: each node counts the orders of its customers, the counts added up here
	('SELECT s.city, count(*) FROM %2$s o JOIN %1$s s ON s.id = o.site_id GROUP BY s.city');
SELECT n, routed(query), differences(query) FROM queries ORDER BY n;
EXPLAIN (VERBOSE, COSTS OFF) SELECT o.id, s.city FROM orders o JOIN sites s ON s.id = o.site_id WHERE o.customer_id = 5;

-- Writes reach every copy, in one atomic commit; a write that reads the
-- reference table goes whole to the replicas of its key.
INSERT INTO sites VALUES (13, 'city 13', false);
INSERT INTO sites_local VALUES (13, 'city 13', false);
UPDATE sites SET city = 'renamed' WHERE id = 3;
UPDATE sites_local SET city = 'renamed' WHERE id = 3;
BEGIN;
DELETE FROM sites WHERE id = 12;
DELETE FROM sites_local WHERE id = 12;
UPDATE orders o SET amount = 0 FROM sites s WHERE s.id = o.site_id AND s.closed AND o.customer_id = 9;
UPDATE orders_local o SET amount = 0 FROM sites_local s WHERE s.id = o.site_id AND s.closed AND o.customer_id = 9;
COMMIT;
SELECT r.node, r.rows FROM ringshard.node_table_rows('sites') r ORDER BY r.node;
SELECT count(*) AS diverged FROM ringshard.verify_table('sites');
SELECT differences('TABLE %1$s') AS sites, differences('TABLE %2$s') AS orders;

-- A node that joins the ring holds the reference tables too: until its
-- rebalance copies them, reads go table by table (the same answers), then
-- it holds every row.
SELECT ringshard.add_node('w4', format('%s dbname=reference_w4', :'server'), 'pair');
SELECT count(*) FROM ringshard.sync_topology();
SELECT table_name, layout FROM ringshard.table_overview ORDER BY table_name::text COLLATE "C";
SELECT n, routed(query), differences(query) FROM queries ORDER BY n;
CALL ringshard.rebalance('sites');
CALL ringshard.rebalance('orders');
SELECT table_name, layout FROM ringshard.table_overview ORDER BY table_name::text COLLATE "C";
SELECT r.node, r.rows FROM ringshard.node_table_rows('sites') r ORDER BY r.node;
SELECT n, routed(query), differences(query) FROM queries ORDER BY n;
SELECT count(*) AS diverged FROM ringshard.verify_table('sites');

-- A node that leaves its last ring stops holding the reference tables: the
-- same answers and writes meanwhile (its copies are not read nor written),
-- then the rebalances delete its copies and forget it.
SELECT ringshard.remove_node('w1', 'pair');
SELECT ring_name, node_name FROM ringshard.ring_members WHERE node_name = 'w1';
SELECT count(*) FROM ringshard.sync_topology();
SELECT table_name, layout FROM ringshard.table_overview ORDER BY table_name::text COLLATE "C";
SELECT n, routed(query), differences(query) FROM queries ORDER BY n;
INSERT INTO sites VALUES (40, 'Sorong', false);
INSERT INTO sites_local VALUES (40, 'Sorong', false);
UPDATE sites SET closed = true WHERE id = 11;
UPDATE sites_local SET closed = true WHERE id = 11;
SELECT differences('TABLE %1$s') AS sites;
CALL ringshard.rebalance('sites');
CALL ringshard.rebalance('orders');
SELECT node_name FROM ringshard.nodes ORDER BY node_name;
SELECT table_name, layout FROM ringshard.table_overview ORDER BY table_name::text COLLATE "C";
SELECT r.node, r.rows FROM ringshard.node_table_rows('sites') r ORDER BY r.node;
SELECT n, routed(query), differences(query) FROM queries ORDER BY n;
SELECT count(*) AS diverged FROM ringshard.verify_table('sites');
SELECT count(*) AS diverged FROM ringshard.verify_table('orders');

-- What it refuses: a table without a primary key, a role below the administrators.
CREATE TABLE loose (a int, b text);
SELECT ringshard.create_reference_table('loose');
CREATE ROLE regress_reference_user;
SET ROLE regress_reference_user;
SELECT ringshard.create_reference_table('loose');
RESET ROLE;
DROP ROLE regress_reference_user;

\c contrib_regression
DROP DATABASE reference_coord WITH (FORCE);
DROP DATABASE reference_w1 WITH (FORCE);
DROP DATABASE reference_w2 WITH (FORCE);
DROP DATABASE reference_w3 WITH (FORCE);
DROP DATABASE reference_w4 WITH (FORCE);

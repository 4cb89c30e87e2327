--
-- Router statements (src/fdw/router.c): a SELECT whose every distributed
-- table is fixed to one key goes whole to one node holding those rows
-- (joins, aggregates, window functions, CTEs, correlated subqueries), and
-- gives what a local table gives.  When no single healthy node holds them
-- all, the usual plan below the router runs instead.
--
-- The nodes are databases of this server; the coordinator is a database of
-- its own.  The server needs max_prepared_transactions.
--
SET client_min_messages = warning;
CREATE DATABASE router_coord;
CREATE DATABASE router_w1;
CREATE DATABASE router_w2;
CREATE DATABASE router_w3;
\c router_w1
CREATE EXTENSION ringshard;
\c router_w2
CREATE EXTENSION ringshard;
\c router_w3
CREATE EXTENSION ringshard;
\c router_coord
SET client_min_messages = warning;
CREATE EXTENSION ringshard;
LOAD 'ringshard';
SELECT format('host=%s port=%s',
			  coalesce(nullif(split_part(current_setting('unix_socket_directories'), ',', 1), ''), 'localhost'),
			  current_setting('port')) AS server \gset
SELECT ringshard.create_ring('pair', replication_factor => 2);
SELECT ringshard.add_node('w' || i, format('%s dbname=router_w%s', :'server', i), 'pair') FROM generate_series(1, 3) i;
SELECT count(*) FROM ringshard.sync_topology();

-- Customers, their orders and refunds, on one ring by customer, and local twins.
CREATE TABLE customers_local (id bigint PRIMARY KEY, name text NOT NULL, region text, since date);
CREATE TABLE orders_local (customer_id bigint, id bigint, amount numeric(10,2), placed date, PRIMARY KEY (customer_id, id));
CREATE TABLE refunds_local (customer_id bigint, order_id bigint, reason text);
INSERT INTO customers_local
SELECT g, 'customer ' || g, (ARRAY['north', 'south', NULL])[1 + g % 3], date '2024-01-01' + g FROM generate_series(1, 60) g;
INSERT INTO orders_local
SELECT 1 + g % 60, g, (g % 17) * 2.5, date '2024-02-01' + g % 40 FROM generate_series(1, 900) g;
INSERT INTO refunds_local
SELECT 1 + g % 60, g, CASE WHEN g % 2 = 0 THEN E'late\n  again' ELSE 'it''s broken' END FROM generate_series(1, 900, 11) g;
CREATE TABLE customers (LIKE customers_local INCLUDING ALL);
CREATE TABLE orders (LIKE orders_local INCLUDING ALL);
CREATE TABLE refunds (LIKE refunds_local INCLUDING ALL);
SELECT ringshard.distribute_table('customers', 'id', 'pair');
SELECT ringshard.distribute_table('orders', 'customer_id', 'pair');
SELECT ringshard.distribute_table('refunds', 'customer_id', 'pair');
SELECT ringshard.create_distributed_table('customers');
SELECT ringshard.create_distributed_table('orders');
SELECT ringshard.create_distributed_table('refunds');
INSERT INTO customers SELECT * FROM customers_local;
INSERT INTO orders SELECT * FROM orders_local;
INSERT INTO refunds SELECT * FROM refunds_local;

-- A query's rows as text, in the order they come, over the distributed
-- tables (%1$s customers, %2$s orders, %3$s refunds) or over their twins;
-- run as a statement of its own, so the router plans it as a client's.
CREATE FUNCTION answers(query text, twins boolean) RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
	rows text[] := '{}';
	r record;
BEGIN
	FOR r IN EXECUTE CASE WHEN twins THEN format(query, 'customers_local', 'orders_local', 'refunds_local')
						  ELSE format(query, 'customers', 'orders', 'refunds') END LOOP
		rows := rows || r::text;
	END LOOP;
	RETURN rows;
END $$;
-- The query over the distributed tables against the same query over the
-- twins: the rows that differ, in any order.
CREATE FUNCTION differences(query text) RETURNS bigint LANGUAGE sql AS $$
	WITH a AS (SELECT answers(query, false) AS dist, answers(query, true) AS twin)
	SELECT count(*)
	  FROM a, LATERAL ((SELECT unnest(a.dist) EXCEPT ALL SELECT unnest(a.twin))
					   UNION ALL (SELECT unnest(a.twin) EXCEPT ALL SELECT unnest(a.dist))) d;
$$;
-- Whether the query over the distributed tables is planned as a router statement.
CREATE FUNCTION routed(query text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
	line text;
BEGIN
	FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || format(query, 'customers', 'orders', 'refunds') LOOP
		IF line LIKE '%ringshard router%' THEN
			RETURN true;
		END IF;
	END LOOP;
	RETURN false;
END $$;
CREATE TABLE queries (n serial, query text);
INSERT INTO queries (query) VALUES
	-- a join and an aggregate of one customer
	('SELECT c.name, count(*), sum(o.amount) FROM %1$s c JOIN %2$s o ON o.customer_id = c.id WHERE c.id = 7 GROUP BY c.name'),
	-- an integer literal for a bigint key; the key fixed through the join
	('SELECT o.id, o.amount FROM %2$s o JOIN %1$s c ON c.id = o.customer_id WHERE o.customer_id = 8'),
	-- window functions
	('SELECT id, amount, rank() OVER (ORDER BY amount DESC, id), sum(amount) OVER (ORDER BY id) FROM %2$s WHERE customer_id = 9'),
	-- a CTE, and a LEFT JOIN whose ON fixes its nullable side
	('WITH r AS (SELECT * FROM %3$s WHERE customer_id = 10) SELECT o.id, r.reason FROM %2$s o LEFT JOIN r ON r.order_id = o.id WHERE o.customer_id = 10'),
	('SELECT o.id, f.reason FROM %2$s o LEFT JOIN %3$s f ON f.customer_id = o.customer_id AND f.order_id = o.id WHERE o.customer_id = 11'),
	-- correlated subqueries: NOT EXISTS, EXISTS, a scalar subquery
	('SELECT o.id FROM %2$s o WHERE o.customer_id = 12 AND NOT EXISTS (SELECT 1 FROM %3$s f WHERE f.customer_id = o.customer_id AND f.order_id = o.id)'),
	('SELECT c.id, c.name FROM %1$s c WHERE c.id = 13 AND EXISTS (SELECT 1 FROM %2$s o WHERE o.customer_id = c.id AND o.amount > 30)'),
	('SELECT c.name, (SELECT max(amount) FROM %2$s o WHERE o.customer_id = c.id) FROM %1$s c WHERE c.id = 14'),
	-- USING, and the key in the WHERE through the join column
	('SELECT customer_id, count(*) FROM %2$s JOIN %3$s USING (customer_id) WHERE customer_id = 15 GROUP BY customer_id'),
	-- DISTINCT, HAVING, ORDER BY, LIMIT and OFFSET, CASE, COALESCE, string functions
	('SELECT DISTINCT placed FROM %2$s WHERE customer_id = 16'),
	('SELECT placed, count(*) FROM %2$s WHERE customer_id = 17 GROUP BY placed HAVING count(*) > 1'),
	('SELECT * FROM (SELECT id, amount FROM %2$s WHERE customer_id = 18 ORDER BY amount DESC, id LIMIT 4 OFFSET 1) t'),
	('SELECT CASE WHEN amount > 20 THEN ''big'' ELSE ''small'' END, coalesce(upper(c.region), ''none''), length(c.name) FROM %2$s o JOIN %1$s c ON c.id = o.customer_id WHERE c.id = 19'),
	-- a literal with a newline and a quote: one table, sent whole by its own scan already
	('SELECT order_id FROM %3$s WHERE customer_id = 20 AND reason IN (E''late\n  again'', ''it''''s broken'')'),
	-- UNION of two keys: routed where one node holds both
	('SELECT id FROM %1$s WHERE id = 21 UNION ALL SELECT customer_id FROM %2$s WHERE customer_id = 22'),
	-- key = NULL: no rows
	('SELECT count(*) FROM %2$s WHERE customer_id = NULL::bigint'),
	-- not routed, and still the same: two keys, one table (its own scan sends
	-- it whole, now() as a value), a local table, a volatile function; an outer
	-- join ON that does not fix its left side ties it by the key (routed: every
	-- node counts for its keys, the counts added up here)
	('SELECT count(*) FROM %2$s WHERE customer_id IN (23, 24)'),
	('SELECT count(*) FROM %2$s WHERE customer_id = 25 AND placed < now()'),
	('SELECT count(*) FROM %2$s WHERE customer_id = 26 AND id > (SELECT count(*) FROM pg_catalog.pg_am WHERE amname = ''nothing'')'),
	('SELECT count(*) FROM %2$s WHERE customer_id = 27 AND random() >= 0'),
	('SELECT count(*) FROM %2$s o LEFT JOIN %3$s f ON f.customer_id = o.customer_id AND o.customer_id = 28'),
	-- a derived table: the outer condition on its output fixes its tables (routed) ...
	('SELECT * FROM (SELECT o.id, o.customer_id, c.name FROM %2$s o JOIN %1$s c ON c.id = o.customer_id) s WHERE s.customer_id = 38'),
	-- ... but not through grouping or a LIMIT, which read other keys' rows too (not routed)
	('SELECT * FROM (SELECT customer_id, count(*) FROM %2$s GROUP BY customer_id) s WHERE s.customer_id = 39'),
	('SELECT * FROM (SELECT customer_id, id FROM %2$s ORDER BY id LIMIT 100) s WHERE s.customer_id = 40'),
	-- stable functions: evaluated here once, the node gets their values (routed)
	-- (a date compared with now() itself depends on TimeZone: that stays here)
	('SELECT o.id, o.placed < current_date, c.since <= now()::date FROM %2$s o JOIN %1$s c ON c.id = o.customer_id WHERE c.id = 41'),
	('SELECT c.name, count(*) FROM %1$s c JOIN %2$s o ON o.customer_id = c.id WHERE c.id = 42 AND o.placed > (now() - interval ''10 years'')::date GROUP BY c.name'),
	('SELECT count(*) FROM %1$s c JOIN %2$s o ON o.customer_id = c.id WHERE c.id = 43 AND o.placed < now()'),
	-- every key: each table tied to the first by its key, the statement goes to
	-- every node, each for the keys it serves (routed) ...
	('SELECT c.id, c.name, o.id, o.amount FROM %1$s c JOIN %2$s o ON o.customer_id = c.id'),
	('SELECT c.id, count(*), sum(o.amount) FROM %1$s c JOIN %2$s o ON o.customer_id = c.id GROUP BY c.id'),
	('SELECT c.id, count(o.id) FROM %1$s c LEFT JOIN %2$s o ON o.customer_id = c.id AND o.amount > 20 GROUP BY c.id HAVING count(o.id) > 3'),
	('SELECT o.customer_id, o.id FROM %2$s o WHERE NOT EXISTS (SELECT 1 FROM %3$s f WHERE f.customer_id = o.customer_id AND f.order_id = o.id)'),
	('SELECT c.id, o.id FROM %1$s c RIGHT JOIN %2$s o ON o.customer_id = c.id AND c.region = ''north'''),
	-- ... and where rows of several keys meet in groups, grouped by another
	-- column or one total, the nodes' groups are combined here (routed); not
	-- with a join on another column or a FULL JOIN (not routed)
	('SELECT c.region, count(*) FROM %1$s c JOIN %2$s o ON o.customer_id = c.id GROUP BY c.region'),
	('SELECT count(*), sum(o.amount) FROM %1$s c JOIN %2$s o ON o.customer_id = c.id'),
	('SELECT o.id, f.reason FROM %2$s o JOIN %3$s f ON f.order_id = o.id'),
	('SELECT c.id, o.id FROM %1$s c FULL JOIN %2$s o ON o.customer_id = c.id'),
	-- grouped by the nullable side's key: its NULL group comes from each node, combined here (routed)
	('SELECT o.customer_id, count(*) FROM %1$s c LEFT JOIN %2$s o ON o.customer_id = c.id AND o.amount > 40 GROUP BY o.customer_id');
SELECT n, routed(query), differences(query) FROM queries ORDER BY n;

-- Every key, with ORDER BY and LIMIT: each node sorts what it serves and
-- sends its first LIMIT + OFFSET rows; a Sort and a Limit here take the
-- first of them all.  Compared row by row, in order, with the twins (each
-- query run as a statement of its own, so the router plans it).
CREATE FUNCTION ordered_differences(query text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	dist text[] := answers(query, false);
	twin text[] := answers(query, true);
BEGIN
	RETURN CASE WHEN dist = twin THEN 'the same ' || cardinality(dist) || ' rows, in the same order'
		   ELSE 'differ: ' || dist::text || ' against ' || twin::text END;
END $$;
CREATE TABLE ordered_queries (n serial, query text);
INSERT INTO ordered_queries (query) VALUES
	('SELECT c.id, o.id FROM %1$s c JOIN %2$s o ON o.customer_id = c.id ORDER BY o.id LIMIT 5'),
	('SELECT c.id, count(*) AS n, sum(o.amount) FROM %1$s c JOIN %2$s o ON o.customer_id = c.id GROUP BY c.id ORDER BY 3 DESC, c.id LIMIT 5'),
	('SELECT c.id, count(*) AS n, sum(o.amount) FROM %1$s c JOIN %2$s o ON o.customer_id = c.id GROUP BY c.id ORDER BY 3 DESC, c.id LIMIT 4 OFFSET 3'),
	('SELECT c.id, count(*) AS n, sum(o.amount) FROM %1$s c JOIN %2$s o ON o.customer_id = c.id GROUP BY c.id ORDER BY n, c.id DESC OFFSET 55'),
	('SELECT c.id, c.region, o.amount, o.id FROM %1$s c LEFT JOIN %2$s o ON o.customer_id = c.id AND o.amount > 30 ORDER BY c.region NULLS FIRST, o.amount DESC NULLS LAST, o.id, c.id LIMIT 12'),
	('SELECT o.customer_id, o.id FROM %2$s o WHERE EXISTS (SELECT 1 FROM %3$s f WHERE f.customer_id = o.customer_id AND f.order_id = o.id) ORDER BY o.id DESC'),
	('SELECT c.id, o.id FROM %1$s c JOIN %2$s o ON o.customer_id = c.id ORDER BY o.id LIMIT 0'),
	('SELECT c.id, o.id FROM %1$s c JOIN %2$s o ON o.customer_id = c.id ORDER BY o.id LIMIT ALL OFFSET 890'),
	-- sorted by what the statement does not return: the nodes return the sort
	-- keys too, and the top drops them (routed)
	('SELECT c.id, o.id FROM %1$s c JOIN %2$s o ON o.customer_id = c.id ORDER BY o.amount DESC, o.id LIMIT 5'),
	('SELECT o.id FROM %1$s c JOIN %2$s o ON o.customer_id = c.id ORDER BY c.region NULLS FIRST, o.placed DESC, o.amount * 2, o.id LIMIT 7 OFFSET 3'),
	('SELECT c.name FROM %1$s c JOIN %2$s o ON o.customer_id = c.id WHERE o.amount > 30 ORDER BY o.id'),
	-- an output named like a column the statement sorts by: the nodes must sort
	-- by the column (the names they see are renamed), one key or every key
	('SELECT c.name AS id FROM %1$s c WHERE EXISTS (SELECT 1 FROM %2$s o WHERE o.customer_id = c.id) ORDER BY c.id LIMIT 3'),
	('SELECT c.name AS id, c.id AS name FROM %1$s c WHERE EXISTS (SELECT 1 FROM %2$s o WHERE o.customer_id = c.id) ORDER BY c.id LIMIT 3'),
	('SELECT o.amount AS id, o.id AS amount FROM %2$s o WHERE o.customer_id = 18 ORDER BY o.id, o.amount'),
	-- the same with an aggregate: the nodes' groups, sorted here (routed)
	('SELECT c.id FROM %1$s c JOIN %2$s o ON o.customer_id = c.id GROUP BY c.id ORDER BY sum(o.amount) DESC, c.id LIMIT 3'),
	-- DISTINCT (each node's distinct rows, made distinct again here: routed), and
	-- FETCH FIRST ... WITH TIES (not routed)
	('SELECT DISTINCT c.region FROM %1$s c JOIN %2$s o ON o.customer_id = c.id ORDER BY 1'),
	('SELECT c.id, count(*) FROM %1$s c JOIN %2$s o ON o.customer_id = c.id GROUP BY c.id ORDER BY 2 DESC, c.id FETCH FIRST 2 ROWS WITH TIES');
SELECT n, routed(query), ordered_differences(query) FROM ordered_queries ORDER BY n;

-- Grouped by another column than the key, or one total: each node
-- aggregates the rows of the keys it serves, grouped as the statement
-- groups, and an aggregate here combines the nodes' groups (counts and sums
-- add up, min and max compare; a DISTINCT's rows are made distinct again);
-- HAVING, ORDER BY and LIMIT apply here.
-- Each query a statement of its own, compared in order with the twins.
CREATE TABLE combined_queries (n serial, query text);
INSERT INTO combined_queries (query) VALUES
	('SELECT c.region, count(*), sum(o.amount), min(o.placed), max(o.amount), count(o.placed) FROM %1$s c JOIN %2$s o ON o.customer_id = c.id GROUP BY c.region ORDER BY c.region NULLS FIRST'),
	('SELECT count(*), sum(o.amount), min(c.name), max(c.name), max(c.since) FROM %1$s c JOIN %2$s o ON o.customer_id = c.id'),
	('SELECT c.region, count(*) AS n FROM %1$s c JOIN %2$s o ON o.customer_id = c.id GROUP BY c.region HAVING count(*) > 5 AND max(o.amount) > 10 ORDER BY n DESC, 1 LIMIT 2'),
	('SELECT extract(month FROM o.placed) AS m, sum(o.amount) FILTER (WHERE o.amount > 20), count(*) FILTER (WHERE c.region IS NULL) FROM %1$s c JOIN %2$s o ON o.customer_id = c.id GROUP BY 1 ORDER BY 1'),
	-- expressions of groups and aggregates; a group the statement does not return
	('SELECT upper(c.region), count(*) * 2 + 1, sum(o.amount) / count(*) FROM %1$s c JOIN %2$s o ON o.customer_id = c.id GROUP BY c.region, c.since > ''2024-01-01'' ORDER BY 1, 2, 3'),
	-- sum of bigint (numeric) and of integer (bigint) as the twins return them
	('SELECT sum(o.id), sum(o.customer_id::int), sum(o.id::int2), sum(o.customer_id::int) / 7 FROM %1$s c JOIN %2$s o ON o.customer_id = c.id'),
	-- an anti join and a semi join of every key, one total
	('SELECT count(*) FROM %1$s c WHERE NOT EXISTS (SELECT 1 FROM %2$s o WHERE o.customer_id = c.id)'),
	('SELECT c.region, count(*) FROM %1$s c WHERE EXISTS (SELECT 1 FROM %3$s f WHERE f.customer_id = c.id) GROUP BY c.region ORDER BY 1'),
	-- grouped by the nullable side: its NULL group comes from every node, and adds up here
	('SELECT o.customer_id, count(*) FROM %1$s c LEFT JOIN %2$s o ON o.customer_id = c.id AND o.amount > 40 GROUP BY o.customer_id ORDER BY 1 NULLS FIRST'),
	-- sorted by an aggregate it does not return
	('SELECT c.id FROM %1$s c JOIN %2$s o ON o.customer_id = c.id GROUP BY c.id ORDER BY sum(o.amount) DESC, c.id LIMIT 3'),
	-- no rows: no groups; one total of none (0 and NULLs)
	('SELECT c.region, count(*) FROM %1$s c JOIN %2$s o ON o.customer_id = c.id WHERE o.amount > 1000000 GROUP BY c.region'),
	('SELECT count(*), count(o.id), sum(o.amount), max(o.amount) FROM %1$s c JOIN %2$s o ON o.customer_id = c.id WHERE o.amount > 1000000'),
	-- averages of numeric and integers: the nodes' sums and counts, divided here
	('SELECT c.region, avg(o.amount), avg(o.id), avg(o.customer_id::int) FILTER (WHERE o.amount > 20) FROM %1$s c JOIN %2$s o ON o.customer_id = c.id GROUP BY c.region ORDER BY 1'),
	-- an aggregate that planning folds away (the others numbered again)
	('SELECT c.region, coalesce(1, count(*)), sum(o.amount), max(o.id) FROM %1$s c JOIN %2$s o ON o.customer_id = c.id GROUP BY c.region ORDER BY 1'),
	('SELECT c.region FROM %1$s c JOIN %2$s o ON o.customer_id = c.id GROUP BY c.region HAVING (1 = 0 AND count(*) > 1) OR sum(o.amount) > 200 ORDER BY 1'),
	-- a built-in function whose default argument the planner fills in, over a group
	('SELECT normalize(c.region), make_interval(0, 0, 0, count(*)::int) FROM %1$s c JOIN %2$s o ON o.customer_id = c.id GROUP BY c.region ORDER BY 1'),
	-- DISTINCT: each node's distinct rows, made distinct again here
	('SELECT DISTINCT c.region FROM %1$s c JOIN %2$s o ON o.customer_id = c.id ORDER BY 1 NULLS FIRST'),
	('SELECT DISTINCT c.region, extract(year FROM o.placed) FROM %1$s c JOIN %2$s o ON o.customer_id = c.id WHERE o.amount > 10 ORDER BY 2 DESC, 1 LIMIT 3'),
	-- not combined here, the usual plan: DISTINCT ON, avg of a float, DISTINCT inside, an aggregate of another kind
	('SELECT DISTINCT ON (c.region) c.region, o.id FROM %1$s c JOIN %2$s o ON o.customer_id = c.id ORDER BY c.region, o.id'),
	('SELECT c.region, avg(o.amount::float8) FROM %1$s c JOIN %2$s o ON o.customer_id = c.id GROUP BY c.region ORDER BY 1'),
	('SELECT count(DISTINCT c.region) FROM %1$s c JOIN %2$s o ON o.customer_id = c.id'),
	('SELECT avg(DISTINCT CASE WHEN c.id = 1 THEN 10 ELSE 0 END) FROM %1$s c JOIN %2$s o ON o.customer_id = c.id'),
	('SELECT c.region, string_agg(o.id::text, '','' ORDER BY o.id) FROM %1$s c JOIN %2$s o ON o.customer_id = c.id GROUP BY c.region ORDER BY 1');
SELECT n, routed(query), ordered_differences(query) FROM combined_queries ORDER BY n;
EXPLAIN (VERBOSE, COSTS OFF)
SELECT c.region, count(*), sum(o.amount) FROM customers c JOIN orders o ON o.customer_id = c.id
 GROUP BY c.region HAVING count(*) > 5 ORDER BY 3 DESC LIMIT 2;
-- a generic plan: parameters in WHERE, HAVING and LIMIT
SET plan_cache_mode = force_generic_plan;
PREPARE region_totals(numeric, bigint, bigint) AS
SELECT c.region, count(*), sum(o.amount) FROM customers c JOIN orders o ON o.customer_id = c.id
 WHERE o.amount > $1 GROUP BY c.region HAVING count(*) > $2 ORDER BY 1 NULLS FIRST LIMIT $3;
EXECUTE region_totals(10, 1, 3);
SELECT c.region, count(*), sum(o.amount) FROM customers_local c JOIN orders_local o ON o.customer_id = c.id
 WHERE o.amount > 10 GROUP BY c.region HAVING count(*) > 1 ORDER BY 1 NULLS FIRST LIMIT 3;
EXPLAIN (COSTS OFF) EXECUTE region_totals(10, 1, 3);
DEALLOCATE region_totals;
RESET plan_cache_mode;
EXPLAIN (VERBOSE, COSTS OFF)
SELECT c.id, sum(o.amount) FROM customers c JOIN orders o ON o.customer_id = c.id GROUP BY c.id ORDER BY 2 DESC, c.id LIMIT 3 OFFSET 2;
-- LIMIT and OFFSET as parameters (a generic plan): the nodes get LIMIT $1 + $2
SET plan_cache_mode = force_generic_plan;
PREPARE top_customers(bigint, bigint) AS
SELECT c.id, sum(o.amount) FROM customers c JOIN orders o ON o.customer_id = c.id GROUP BY c.id ORDER BY 2 DESC, c.id LIMIT $1 OFFSET $2;
EXECUTE top_customers(3, 2);
EXECUTE top_customers(NULL, 57);
SELECT c.id, sum(o.amount) FROM customers_local c JOIN orders_local o ON o.customer_id = c.id GROUP BY c.id ORDER BY 2 DESC, c.id LIMIT 3 OFFSET 2;
SELECT c.id, sum(o.amount) FROM customers_local c JOIN orders_local o ON o.customer_id = c.id GROUP BY c.id ORDER BY 2 DESC, c.id OFFSET 57;
EXPLAIN (VERBOSE, COSTS OFF) EXECUTE top_customers(3, 2);
DEALLOCATE top_customers;
RESET plan_cache_mode;

-- What EXPLAIN shows: the nodes that can answer, the SQL they get, and the
-- plan that runs if none can; for every key, each node's filter.
EXPLAIN (VERBOSE, COSTS OFF)
SELECT c.id, count(*), sum(o.amount) FROM customers c JOIN orders o ON o.customer_id = c.id GROUP BY c.id;
EXPLAIN (VERBOSE, COSTS OFF)
SELECT c.name, count(*), sum(o.amount) FROM customers c JOIN orders o ON o.customer_id = c.id WHERE c.id = 7 GROUP BY c.name;
SELECT replicas_for(7::bigint, 'pair');
SELECT c.name, count(*), sum(o.amount) FROM customers c JOIN orders o ON o.customer_id = c.id WHERE c.id = 7 GROUP BY c.name;
-- EXPLAIN ANALYZE names the node that answered (either replica: reads spread), its rows and time.
CREATE FUNCTION explained(query text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
	line text;
BEGIN
	FOR line IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || query LOOP
		RETURN NEXT regexp_replace(line, 'Answered by: (w1|w3), (\d+ rows?) in [0-9.]+ ms$', 'Answered by: w1 or w3, \2 in (time) ms');
	END LOOP;
END $$;
SELECT explained('SELECT count(*) FROM orders o JOIN refunds f ON f.customer_id = o.customer_id WHERE o.customer_id = 7');

-- Values are the session's in any DateStyle: the literal is read here, sent as ISO.
SET DateStyle = 'SQL, DMY';
SELECT id, placed FROM orders WHERE customer_id = 3 AND placed = '03/02/2024' ORDER BY id;
SELECT id, placed FROM orders_local WHERE customer_id = 3 AND placed = '03/02/2024' ORDER BY id;
RESET DateStyle;

-- Parameters: prepared, custom and generic plans, each value its own route;
-- a parameter of another type than the key (int4), and NULL.
PREPARE by_customer(int4) AS
	SELECT c.name, count(o.id), sum(o.amount) FROM customers c LEFT JOIN orders o ON o.customer_id = c.id
	 WHERE c.id = $1 GROUP BY c.name;
PREPARE by_customer_local(int4) AS
	SELECT c.name, count(o.id), sum(o.amount) FROM customers_local c LEFT JOIN orders_local o ON o.customer_id = c.id
	 WHERE c.id = $1 GROUP BY c.name;
EXECUTE by_customer(30);
EXECUTE by_customer_local(30);
SET plan_cache_mode = force_generic_plan;
EXPLAIN (VERBOSE, COSTS OFF) EXECUTE by_customer(31);
EXECUTE by_customer(31);
EXECUTE by_customer_local(31);
EXECUTE by_customer(32);
EXECUTE by_customer_local(32);
EXECUTE by_customer(NULL);
PREPARE two_params(bigint, numeric) AS SELECT id FROM orders WHERE customer_id = $1 AND amount > $2 ORDER BY id;
EXECUTE two_params(33, 30);
SELECT id FROM orders_local WHERE customer_id = 33 AND amount > 30 ORDER BY id;
RESET plan_cache_mode;

-- Inside a transaction the node's reads share its snapshot, and see the
-- transaction's own writes.
BEGIN;
INSERT INTO orders VALUES (34, 5000, 99.50, '2024-03-01');
SELECT count(*), sum(amount) FROM orders o JOIN customers c ON c.id = o.customer_id WHERE c.id = 34;
ROLLBACK;
SELECT count(*), sum(amount) FROM orders o JOIN customers c ON c.id = o.customer_id WHERE c.id = 34;
SELECT count(*), sum(amount) FROM orders_local o JOIN customers_local c ON c.id = o.customer_id WHERE c.id = 34;

-- A cursor reads forwards; a scrollable one takes the usual plan.
BEGIN;
DECLARE forwards CURSOR FOR SELECT id FROM orders WHERE customer_id = 35 ORDER BY id;
FETCH 2 FROM forwards;
FETCH 2 FROM forwards;
CLOSE forwards;
DECLARE backwards SCROLL CURSOR FOR SELECT id FROM orders WHERE customer_id = 35 ORDER BY id;
FETCH 2 FROM backwards;
FETCH PRIOR FROM backwards;
COMMIT;

-- Privileges are the coordinator's: a role that may not read refunds is
-- stopped here, before any node is asked.
CREATE ROLE regress_router_reader;
GRANT SELECT ON customers, orders TO regress_router_reader;
SET ROLE regress_router_reader;
SELECT count(*) FROM orders o WHERE customer_id = 36 AND NOT EXISTS (SELECT 1 FROM refunds f WHERE f.customer_id = o.customer_id);
RESET ROLE;
DROP OWNED BY regress_router_reader;
DROP ROLE regress_router_reader;

-- Views: a view of distributed tables is a subquery, routed as one; the
-- nodes are asked as the view's owner, as they are for its tables.  A
-- security barrier view takes the usual plan (its conditions must run first).
CREATE VIEW big_orders AS SELECT customer_id, id, amount FROM orders WHERE amount > 30;
CREATE VIEW big_orders_local AS SELECT customer_id, id, amount FROM orders_local WHERE amount > 30;
CREATE VIEW guarded_orders WITH (security_barrier) AS SELECT customer_id, id, amount FROM orders WHERE amount > 30;
SELECT routed('SELECT count(*), sum(amount) FROM big_orders WHERE customer_id = 37') AS view_routed,
	   routed('SELECT count(*), sum(amount) FROM guarded_orders WHERE customer_id = 37') AS barrier_routed;
SELECT count(*), sum(amount) FROM big_orders WHERE customer_id = 37;
SELECT count(*), sum(amount) FROM big_orders_local WHERE customer_id = 37;
SELECT count(*), sum(amount) FROM guarded_orders WHERE customer_id = 37;
-- a write of one table through a view is a write of one table (queued for a node that is down, ...)
EXPLAIN (COSTS OFF) UPDATE big_orders SET amount = amount WHERE customer_id = 37;
CREATE ROLE regress_router_viewer;
GRANT SELECT ON big_orders TO regress_router_viewer;
SET ROLE regress_router_viewer;
SELECT count(*), sum(amount) FROM big_orders WHERE customer_id = 37;
SELECT count(*) FROM orders WHERE customer_id = 37;
RESET ROLE;
DROP OWNED BY regress_router_viewer;
DROP ROLE regress_router_viewer;

-- What the nodes could read otherwise than we do, or what only the
-- coordinator checks, keeps the usual plan or is checked here: a child
-- table (its rows are not on the nodes), an object identifier (the node's
-- own), an aggregate that prints values inside (in the node's TimeZone).
CREATE TABLE customers_extra (vip boolean) INHERITS (customers);
INSERT INTO customers_extra (id, name, vip) VALUES (53, 'inherited', true);
SELECT routed('SELECT c.id, c.name FROM %1$s c JOIN %2$s o ON o.customer_id = c.id WHERE c.id = 53') AS with_child;
SELECT c.id, c.name FROM customers c WHERE c.id = 53 ORDER BY c.name;
DROP TABLE customers_extra;
SELECT routed('SELECT c.id, c.name FROM %1$s c JOIN %2$s o ON o.customer_id = c.id WHERE c.id = 53') AS child_dropped;
SELECT routed('SELECT c.id FROM %1$s c JOIN %2$s o ON o.customer_id = c.id WHERE c.id = 53 AND ''customers''::regclass IS NOT NULL') AS regclass_constant,
	   routed('SELECT jsonb_object_agg(o.id, o.placed) FROM %2$s o JOIN %1$s c ON c.id = o.customer_id WHERE c.id = 53') AS jsonb_object_agg,
	   routed('SELECT count(*), string_agg(o.id::text, '','' ORDER BY o.id) FROM %2$s o JOIN %1$s c ON c.id = o.customer_id WHERE c.id = 53') AS string_agg;
-- Backslashes mean the same on the node in any session: both sides read
-- SQL with standard_conforming_strings on, whatever the session or the
-- node's own settings say (a node that reads them off cannot be made to
-- run a literal as SQL).
INSERT INTO refunds VALUES (54, 1, 'back\slash'), (54, 2, 'x'' OR true --');
INSERT INTO refunds_local VALUES (54, 1, 'back\slash'), (54, 2, 'x'' OR true --');
SET escape_string_warning = off;
SET standard_conforming_strings = off;
SELECT routed('SELECT f.order_id FROM %3$s f JOIN %2$s o ON o.customer_id = f.customer_id WHERE f.customer_id = 54 AND f.reason = ''back\\slash''') AS routed;
SELECT DISTINCT f.order_id FROM refunds f JOIN orders o ON o.customer_id = f.customer_id WHERE f.customer_id = 54 AND f.reason = 'back\\slash';
SELECT DISTINCT f.order_id FROM refunds_local f JOIN orders_local o ON o.customer_id = f.customer_id WHERE f.customer_id = 54 AND f.reason = 'back\\slash';
RESET standard_conforming_strings;
RESET escape_string_warning;
ALTER DATABASE router_w1 SET standard_conforming_strings = off;
ALTER DATABASE router_w2 SET standard_conforming_strings = off;
ALTER DATABASE router_w3 SET standard_conforming_strings = off;
\c router_coord
SET client_min_messages = warning;
SELECT DISTINCT f.order_id, f.reason FROM refunds f JOIN orders o ON o.customer_id = f.customer_id
 WHERE f.customer_id = 54 AND f.reason IN ('x\', ') OR true --') ORDER BY 1;
SELECT DISTINCT f.order_id, f.reason FROM refunds f JOIN orders o ON o.customer_id = f.customer_id
 WHERE f.customer_id = 54 AND f.reason IN ('back\slash') ORDER BY 1;
ALTER DATABASE router_w1 RESET standard_conforming_strings;
ALTER DATABASE router_w2 RESET standard_conforming_strings;
ALTER DATABASE router_w3 RESET standard_conforming_strings;
\c router_coord
SET client_min_messages = warning;
DELETE FROM refunds WHERE customer_id = 54;
DELETE FROM refunds_local WHERE customer_id = 54;
-- EXECUTE privileges of functions are checked as for any statement.
CREATE ROLE regress_router_caller;
GRANT SELECT, UPDATE ON customers, orders TO regress_router_caller;
BEGIN;
REVOKE EXECUTE ON FUNCTION pg_catalog.md5(text) FROM PUBLIC;
SET LOCAL ROLE regress_router_caller;
SAVEPOINT s;
SELECT md5(c.name) FROM customers c JOIN orders o ON o.customer_id = c.id WHERE c.id = 55 LIMIT 1;
ROLLBACK TO s;
UPDATE customers c SET name = md5(c.name) WHERE c.id = 55 AND EXISTS (SELECT FROM orders o WHERE o.customer_id = c.id);
ROLLBACK;
DROP OWNED BY regress_router_caller;
DROP ROLE regress_router_caller;

-- A node down: the other replica answers.  Two keys whose only healthy
-- replicas differ: no node holds both, the plan below answers.
SELECT k AS lone_key FROM generate_series(1, 60) k
 WHERE replicas_for(k::bigint, 'pair') = ARRAY['w1', 'w2'] ORDER BY k LIMIT 1 \gset
SELECT k AS other_key FROM generate_series(1, 60) k
 WHERE replicas_for(k::bigint, 'pair') IN (ARRAY['w1', 'w3'], ARRAY['w3', 'w1']) ORDER BY k LIMIT 1 \gset
SELECT ringshard.mark_node_down('w1');
EXPLAIN (COSTS OFF) SELECT count(*) FROM orders o JOIN customers c ON c.id = o.customer_id WHERE c.id = :lone_key;
SELECT count(*) = (SELECT count(*) FROM orders_local WHERE customer_id = :lone_key) AS same
  FROM orders o JOIN customers c ON c.id = o.customer_id WHERE c.id = :lone_key;
EXPLAIN (COSTS OFF) SELECT id FROM customers WHERE id = :lone_key UNION ALL SELECT id FROM orders WHERE customer_id = :other_key;
-- every key: the nodes that are up serve the keys of the one that is down
SELECT regexp_replace(line, '[0-9.]+ ms', '(time) ms') AS explained FROM explained(
	'SELECT c.id, count(*) FROM customers c JOIN orders o ON o.customer_id = c.id GROUP BY c.id') line;
SELECT differences('SELECT c.id, count(*), sum(o.amount) FROM %1$s c JOIN %2$s o ON o.customer_id = c.id GROUP BY c.id');
SELECT differences(format('SELECT id FROM %%1$s WHERE id = %s UNION ALL SELECT id FROM %%2$s WHERE customer_id = %s', :lone_key, :other_key));
SELECT n, ordered_differences(query) FROM combined_queries WHERE n <= 3 ORDER BY n;
SELECT ringshard.mark_node_up('w1');

-- A topology change the rows have not followed yet: keys whose rows move
-- are read where they still are, and every answer stays the same.
SELECT ringshard.set_node_weight('w1', 3, 'pair');
SELECT count(*) AS moving_tables FROM ringshard.table_overview WHERE layout <> 'in place';
SELECT n, routed(query), differences(query) FROM queries ORDER BY n;
SELECT n, routed(query), ordered_differences(query) FROM combined_queries ORDER BY n;
SELECT ringshard.set_node_weight('w1', 1, 'pair');

-- Writes that read other tables, every table fixed to one key (UPDATE ...
-- FROM, DELETE ... USING, subqueries, WITH): whole on every replica of the
-- key at once, in one atomic commit; 1.1 refused them.  Each runs on both
-- sides; the row counts and then the tables must be the same.
CREATE FUNCTION write_both(statement text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	distributed bigint;
	local bigint;
BEGIN
	EXECUTE format(statement, 'customers', 'orders', 'refunds');
	GET DIAGNOSTICS distributed = ROW_COUNT;
	EXECUTE format(statement, 'customers_local', 'orders_local', 'refunds_local');
	GET DIAGNOSTICS local = ROW_COUNT;
	RETURN format('%s rows, %s locally', distributed, local);
END $$;
SELECT write_both('UPDATE %2$s o SET amount = o.amount + 1 FROM %1$s c WHERE c.id = o.customer_id AND c.id = 42 AND c.region = ''north''');
SELECT write_both('DELETE FROM %3$s f USING %2$s o WHERE o.customer_id = f.customer_id AND f.customer_id = 43 AND o.id = f.order_id AND o.amount > 20');
SELECT write_both('UPDATE %1$s c SET name = c.name || '' (refunded)'' WHERE c.id = 44 AND EXISTS (SELECT 1 FROM %3$s f WHERE f.customer_id = c.id)');
SELECT write_both('WITH big AS (SELECT id FROM %2$s WHERE customer_id = 45 AND amount > 30) DELETE FROM %2$s o WHERE o.customer_id = 45 AND o.id IN (SELECT id FROM big)');
SELECT write_both('UPDATE %2$s o SET amount = 0 FROM (SELECT id FROM %1$s WHERE region IS NULL) c WHERE c.id = o.customer_id AND o.customer_id = 47');
SELECT routed('UPDATE %2$s o SET amount = o.amount + 1 FROM %1$s c WHERE c.id = o.customer_id AND c.id = 42') AS update_routed,
	   routed('DELETE FROM %3$s f USING %2$s o WHERE o.customer_id = f.customer_id AND f.customer_id = 43') AS delete_routed,
	   routed('UPDATE %2$s SET amount = 1 WHERE customer_id = 42') AS single_table_routed;
EXPLAIN (VERBOSE, COSTS OFF)
UPDATE orders o SET amount = o.amount + 1 FROM customers c WHERE c.id = o.customer_id AND c.id = 42 RETURNING o.id, o.amount;
UPDATE orders o SET amount = o.amount + 1 FROM customers c WHERE c.id = o.customer_id AND c.id = 42 AND o.id = 41
RETURNING o.id, o.amount, c.name;
UPDATE orders_local o SET amount = o.amount + 1 FROM customers_local c WHERE c.id = o.customer_id AND c.id = 42 AND o.id = 41
RETURNING o.id, o.amount, c.name;
-- prepared, a generic plan: each execution its own key
PREPARE pay(bigint, numeric) AS
	UPDATE orders o SET amount = o.amount - $2 FROM customers c WHERE c.id = o.customer_id AND o.customer_id = $1 AND c.since < '2024-03-01';
PREPARE pay_local(bigint, numeric) AS
	UPDATE orders_local o SET amount = o.amount - $2 FROM customers_local c WHERE c.id = o.customer_id AND o.customer_id = $1 AND c.since < '2024-03-01';
SET plan_cache_mode = force_generic_plan;
EXPLAIN (COSTS OFF) EXECUTE pay(48, 0.5);
EXECUTE pay(48, 0.5);
EXECUTE pay_local(48, 0.5);
EXECUTE pay(49, 1.25);
EXECUTE pay_local(49, 1.25);
RESET plan_cache_mode;
-- rolled back: nothing stays
BEGIN;
UPDATE orders o SET amount = 1000 FROM customers c WHERE c.id = o.customer_id AND c.id = 50;
SELECT max(amount) FROM orders WHERE customer_id = 50;
ROLLBACK;
SELECT differences('TABLE %1$s') AS customers, differences('TABLE %2$s') AS orders, differences('TABLE %3$s') AS refunds;
SELECT count(*) AS diverged FROM ringshard.verify_table('orders');
SELECT count(*) AS diverged FROM ringshard.verify_table('customers');
SELECT count(*) AS diverged FROM ringshard.verify_table('refunds');
-- During a topology change: a key whose rows are not copied yet is written
-- whole on its old replicas, where its rows are (the table-by-table path
-- writes there too), and the rebalance then copies the change; a key copied
-- already, on its new ones.  Every key of the table, with the rows of half
-- of them moving.
CREATE TABLE placed_before AS SELECT c AS id, replicas_for(c::bigint, 'pair') AS replicas FROM generate_series(1, 60) c;
SELECT ringshard.set_node_weight('w1', 3, 'pair');
SELECT count(*) FROM ringshard.sync_topology();
SELECT count(*) FILTER (WHERE replicas <> replicas_for(id::bigint, 'pair')) > 10 AS some_keys_move,
       count(*) FILTER (WHERE replicas = replicas_for(id::bigint, 'pair')) > 10 AS some_stay
  FROM placed_before;
SELECT string_agg(write_both(format('UPDATE %%2$s o SET amount = o.amount + 1 FROM %%1$s c WHERE c.id = o.customer_id AND c.id = %s', id)),
                  '; ' ORDER BY id) = string_agg(format('%s rows, %s locally', n, n), '; ' ORDER BY id) AS every_key_written
  FROM placed_before p, LATERAL (SELECT count(*) AS n FROM orders_local o WHERE o.customer_id = p.id) o;
SELECT min(id) AS moving_key FROM placed_before WHERE replicas <> replicas_for(id::bigint, 'pair') \gset
SELECT write_both(format('DELETE FROM %%3$s f USING %%2$s o WHERE o.customer_id = f.customer_id AND f.customer_id = %s'
                         ' AND o.id = f.order_id AND o.amount > 20', :moving_key)) AS moving_key_deleted;
EXPLAIN (COSTS OFF) UPDATE orders o SET amount = o.amount FROM customers c WHERE c.id = o.customer_id AND c.id = :moving_key;
SELECT differences('TABLE %1$s') AS customers, differences('TABLE %2$s') AS orders, differences('TABLE %3$s') AS refunds;
CALL ringshard.rebalance('customers');
CALL ringshard.rebalance('orders');
CALL ringshard.rebalance('refunds');
SELECT differences('TABLE %1$s') AS customers, differences('TABLE %2$s') AS orders, differences('TABLE %3$s') AS refunds;
SELECT count(*) AS diverged FROM ringshard.verify_table('orders');
SELECT count(*) AS diverged FROM ringshard.verify_table('refunds');
-- one table moved, the other not yet: a moving key's replicas do not hold
-- the rows it reads of the other table, and the write says so
SELECT ringshard.set_node_weight('w1', 1, 'pair');
SELECT count(*) FROM ringshard.sync_topology();
CALL ringshard.rebalance('customers');
UPDATE orders o SET amount = o.amount FROM customers c WHERE c.id = o.customer_id AND c.id = :moving_key;
CALL ringshard.rebalance('orders');
CALL ringshard.rebalance('refunds');
DROP TABLE placed_before;

-- now() is the coordinator's, sent as a value: both sides set the same date
SELECT write_both('UPDATE %2$s o SET placed = now() FROM %1$s c WHERE c.id = o.customer_id AND c.id = 46 AND c.since < current_date');
SELECT differences('TABLE %2$s') AS orders;
-- still refused, as the table-by-table path refuses them: no key, a new key
UPDATE orders o SET amount = 0 FROM customers c WHERE c.id = o.customer_id;
UPDATE orders o SET customer_id = 99 FROM customers c WHERE c.id = o.customer_id AND c.id = 46;
-- a read-only transaction, and privileges: the coordinator's
BEGIN READ ONLY;
UPDATE orders o SET amount = 0 FROM customers c WHERE c.id = o.customer_id AND c.id = 46;
ROLLBACK;
CREATE ROLE regress_router_writer;
GRANT SELECT, UPDATE ON orders TO regress_router_writer;
SET ROLE regress_router_writer;
UPDATE orders o SET amount = 0 FROM customers c WHERE c.id = o.customer_id AND c.id = 46;
RESET ROLE;
DROP OWNED BY regress_router_writer;
DROP ROLE regress_router_writer;
-- a table on another ring does not hold the rows on the same nodes
SELECT ringshard.create_ring('solo');
SELECT ringshard.add_node('w' || i, ring => 'solo') FROM generate_series(1, 3) i;
SELECT count(*) FROM ringshard.sync_topology();
CREATE TABLE notes (customer_id bigint, note text);
SELECT ringshard.distribute_table('notes', 'customer_id', 'solo');
SELECT ringshard.create_distributed_table('notes');
INSERT INTO notes VALUES (46, 'vip');
UPDATE orders o SET amount = 0 FROM notes n WHERE n.customer_id = o.customer_id AND o.customer_id = 46;
-- a replica down: refused, nothing changed (no queue for such a write)
SELECT ringshard.mark_node_down('w1');
UPDATE orders o SET amount = 0 FROM customers c WHERE c.id = o.customer_id AND c.id = :lone_key;
SELECT ringshard.mark_node_up('w1');
-- replicas that hold different rows: the statement fails, nothing changes
-- (a row of the key changed behind the coordinator's back, on w2)
\c router_w2
UPDATE orders SET amount = amount + 1000 WHERE customer_id = :lone_key AND id = :lone_key - 1;
\c router_coord
SET client_min_messages = warning;
SELECT replicas_for(:lone_key::bigint, 'pair');
\set VERBOSITY sqlstate
UPDATE orders o SET amount = 0 FROM customers c WHERE c.id = o.customer_id AND c.id = :lone_key AND o.amount > 1000 RETURNING o.id;
DELETE FROM orders o USING customers c WHERE c.id = o.customer_id AND c.id = :lone_key AND o.amount > 1000;
\set VERBOSITY default
UPDATE orders o SET amount = 0 FROM customers c WHERE c.id = o.customer_id AND c.id = :lone_key AND o.amount > 1000 RETURNING o.id;
-- the same rows changed, to other values: the nodes return each changed row whole, and those differ
UPDATE orders o SET amount = o.amount + 1 FROM customers c WHERE c.id = o.customer_id AND c.id = :lone_key AND o.id = :lone_key - 1;
\c router_w2
UPDATE orders SET amount = amount - 1000 WHERE customer_id = :lone_key AND id = :lone_key - 1;
\c router_coord
SET client_min_messages = warning;
SELECT differences('TABLE %2$s') AS orders;

-- Off, the same statements are planned table by table.
SET ringshard.router_statements = off;
SELECT count(*) FILTER (WHERE routed(query)) AS routed, sum(differences(query)) AS differences FROM queries;
RESET ringshard.router_statements;

-- A single-row INSERT reaches each replica as EXECUTE of a statement
-- prepared on the coordinator's link to it, with the row's values: a change
-- of the table's columns is a new statement there, and a table dropped and
-- created again under its name is the one the statement writes.
CREATE TABLE memos (id bigint PRIMARY KEY, body text);
SELECT ringshard.distribute_table('memos', 'id', 'pair');
SELECT ringshard.create_distributed_table('memos');
INSERT INTO memos VALUES (1, 'one');
INSERT INTO memos VALUES (2, 'two');
ALTER FOREIGN TABLE memos ALTER COLUMN body TYPE varchar(20);
INSERT INTO memos VALUES (3, 'three');
INSERT INTO memos VALUES (4, 'four, and more than twenty characters');
ALTER FOREIGN TABLE memos ADD COLUMN n int;
INSERT INTO memos VALUES (5, 'five', 5);
ALTER FOREIGN TABLE memos DROP COLUMN n;
INSERT INTO memos VALUES (6, 'six');
\set VERBOSITY sqlstate
INSERT INTO memos VALUES (1, 'one again');
\set VERBOSITY default
SELECT * FROM memos ORDER BY id;
DROP FOREIGN TABLE memos;
CREATE TABLE memos (id bigint PRIMARY KEY, body text);
SELECT ringshard.distribute_table('memos', 'id', 'pair');
SELECT ringshard.create_distributed_table('memos');
INSERT INTO memos VALUES (7, 'seven');
INSERT INTO memos VALUES (1, 'one, once more');
SELECT * FROM memos ORDER BY id;
SELECT count(*) AS problems FROM ringshard.verify_table('memos');
-- A column of a type of the user's: its OID on a node changes when the type
-- is made again there under its name, so those rows go as literals.
SELECT node, ok, error FROM ringshard.node_execute(ARRAY['w1', 'w2', 'w3'],
	'CREATE TYPE public.mood AS ENUM (''calm'', ''tense'')', '{}', false);
CREATE TYPE mood AS ENUM ('calm', 'tense');
CREATE TABLE moods (id bigint PRIMARY KEY, m mood);
SELECT ringshard.distribute_table('moods', 'id', 'pair');
SELECT ringshard.create_distributed_table('moods');
INSERT INTO moods VALUES (1, 'calm');
INSERT INTO moods VALUES (2, 'tense');
DROP FOREIGN TABLE moods;
SELECT node, ok, error FROM ringshard.node_execute(ARRAY['w1', 'w2', 'w3'],
	'DROP TYPE public.mood; CREATE TYPE public.mood AS ENUM (''calm'', ''tense'')', '{}', false);
CREATE TABLE moods (id bigint PRIMARY KEY, m mood);
SELECT ringshard.distribute_table('moods', 'id', 'pair');
SELECT ringshard.create_distributed_table('moods');
INSERT INTO moods VALUES (1, 'tense');
INSERT INTO moods VALUES (2, 'calm');
SELECT * FROM moods ORDER BY id;
DROP FOREIGN TABLE moods;
-- ... and a read by a key of that type is not prepared on the node either
CREATE TABLE mood_keys (m mood PRIMARY KEY, n int);
SELECT ringshard.distribute_table('mood_keys', 'm', 'pair');
SELECT ringshard.create_distributed_table('mood_keys');
INSERT INTO mood_keys VALUES ('calm', 1), ('tense', 2);
SELECT * FROM mood_keys WHERE m = 'tense';
DROP FOREIGN TABLE mood_keys;
SELECT node, ok, error FROM ringshard.node_execute(ARRAY['w1', 'w2', 'w3'],
	'DROP TYPE public.mood; CREATE TYPE public.mood AS ENUM (''calm'', ''tense'')', '{}', false);
CREATE TABLE mood_keys (m mood PRIMARY KEY, n int);
SELECT ringshard.distribute_table('mood_keys', 'm', 'pair');
SELECT ringshard.create_distributed_table('mood_keys');
INSERT INTO mood_keys VALUES ('calm', 1), ('tense', 2);
SELECT * FROM mood_keys WHERE m = 'tense';

-- A single-row INSERT as EXECUTE carries its values printed under pinned
-- settings, whatever the writer's session shows: read back under the
-- defaults, and the same on both replicas of each row.
CREATE TABLE readings (id bigint PRIMARY KEY, on_day date, took interval, value float8, at timestamptz);
SELECT ringshard.distribute_table('readings', 'id', 'pair');
SELECT ringshard.create_distributed_table('readings');
SET DateStyle = 'SQL, DMY';
SET IntervalStyle = 'sql_standard';
SET extra_float_digits = -3;
SET TimeZone = 'Asia/Jakarta';
INSERT INTO readings VALUES (1, '2024-02-01', '1 day 02:03:04.5', 0.1::float8 + 0.2::float8, '2024-02-01 12:00:00+00');
INSERT INTO readings VALUES (2, '2024-12-31', '-3 months', 1e-300, '2024-12-31 23:59:59.999999+00');
RESET DateStyle;
RESET IntervalStyle;
RESET extra_float_digits;
SET TimeZone = 'UTC';
SELECT id, on_day = CASE id WHEN 1 THEN date '2024-02-01' ELSE date '2024-12-31' END AS day_exact, took, value,
       value = CASE id WHEN 1 THEN 0.1::float8 + 0.2::float8 ELSE 1e-300::float8 END AS value_exact, at
  FROM readings ORDER BY id;
RESET TimeZone;
SELECT count(*) AS problems FROM ringshard.verify_table('readings');
-- A key UPDATE or DELETE whose text a link sent once before goes as EXECUTE
-- of a statement prepared there, the parameters' values its arguments,
-- printed as a literal would be: exact whatever the session's settings.
-- (Three keys at R = 2 on three nodes: some node gets the text twice.)
INSERT INTO readings VALUES (3, '2020-01-01', '1 s', 1, '2020-01-01 00:00:00+00'),
	(4, '2020-01-01', '1 s', 1, '2020-01-01 00:00:00+00'), (5, '2020-01-01', '1 s', 1, '2020-01-01 00:00:00+00');
SET plan_cache_mode = force_generic_plan;
PREPARE set_reading(date, interval, float8, timestamptz, bigint) AS
	UPDATE readings SET on_day = $1, took = $2, value = $3, at = $4 WHERE id = $5;
PREPARE drop_reading(bigint) AS DELETE FROM readings WHERE id = $1;
SET DateStyle = 'SQL, DMY';
SET IntervalStyle = 'sql_standard';
SET extra_float_digits = -3;
SET TimeZone = 'Asia/Jakarta';
EXECUTE set_reading('2024-02-01', '1 day 02:03:04.5', 0.1::float8 + 0.2::float8, '2024-02-01 12:00:00+00', 3);
EXECUTE set_reading('2024-02-01', '1 day 02:03:04.5', 0.1::float8 + 0.2::float8, '2024-02-01 12:00:00+00', 4);
EXECUTE set_reading('2024-02-01', '1 day 02:03:04.5', 0.1::float8 + 0.2::float8, '2024-02-01 12:00:00+00', 5);
EXECUTE drop_reading(1);
EXECUTE drop_reading(2);
RESET DateStyle;
RESET IntervalStyle;
RESET extra_float_digits;
SET TimeZone = 'UTC';
SELECT id, on_day = date '2024-02-01' AS day_exact, took, value, value = 0.1::float8 + 0.2::float8 AS value_exact, at
  FROM readings ORDER BY id;
RESET TimeZone;
RESET plan_cache_mode;
SELECT count(*) AS problems FROM ringshard.verify_table('readings');
-- ... and in subtransactions: a text is prepared only where the node's
-- transaction is as deep as ours (a Parse goes before the savepoints), and
-- a block rolled back takes its UPDATEs back on every replica, prepared or
-- not.
DO $$
BEGIN
	BEGIN
		UPDATE readings SET value = 1 WHERE id = 3;
		UPDATE readings SET value = 1 WHERE id = 3;
		UPDATE readings SET value = 2 WHERE id = 3;
		UPDATE readings SET value = 2 WHERE id = 3;
		RAISE EXCEPTION 'undo the block';
	EXCEPTION WHEN raise_exception THEN
		NULL;
	END;
	BEGIN
		UPDATE readings SET value = 4 WHERE id = 4;
		UPDATE readings SET value = 4 WHERE id = 4;
	END;
	UPDATE readings SET value = 5 WHERE id = 5;
	UPDATE readings SET value = 5 WHERE id = 5;
END
$$;
SELECT id, value FROM readings ORDER BY id;
SELECT count(*) AS problems FROM ringshard.verify_table('readings');

\c contrib_regression
DROP DATABASE router_coord WITH (FORCE);
DROP DATABASE router_w1 WITH (FORCE);
DROP DATABASE router_w2 WITH (FORCE);
DROP DATABASE router_w3 WITH (FORCE);

--
-- Aggregates and ORDER BY ... LIMIT pushed down to the nodes of a fan-out
-- (src/fdw/upper.c, src/fdw/upper_scan.c): what EXPLAIN shows, that every
-- answer is the answer of the same query over a local table holding the
-- same rows, and that the shapes the nodes cannot do are still answered
-- right here.
--
-- The nodes are databases of this server.  The coordinator is a database of
-- its own, so that sync_topology() does not reach for the nodes other suites
-- left in contrib_regression.  The server needs max_prepared_transactions.
--
SET client_min_messages = warning;
CREATE DATABASE pushdown_coord;
CREATE DATABASE pushdown_w1;
CREATE DATABASE pushdown_w2;
CREATE DATABASE pushdown_w3;
\c pushdown_coord
SET client_min_messages = warning;
CREATE EXTENSION ringshard;
SELECT format('host=%s port=%s',
			  coalesce(nullif(split_part(current_setting('unix_socket_directories'), ',', 1), ''), 'localhost'),
			  current_setting('port')) AS server \gset

-- Three nodes; a ring with two copies of each row, one with one copy, and a
-- partition map with two holders of each partition.
SELECT ringshard.create_ring('pair', replication_factor => 2);
SELECT ringshard.create_ring('single');
SELECT ringshard.add_node('w' || i, format('%s dbname=pushdown_w%s', :'server', i), 'pair') FROM generate_series(1, 3) i;
SELECT ringshard.add_node('w' || i, ring => 'single') FROM generate_series(1, 3) i;
SELECT ringshard.create_partition_map('halves');
SELECT ringshard.assign_partitions('w1', 0, 170, 'halves');
SELECT ringshard.assign_partitions('w2', 85, 255, 'halves');
SELECT ringshard.assign_partitions('w3', 0, 84, 'halves');
SELECT ringshard.assign_partitions('w3', 171, 255, 'halves');
SELECT node, ok, error FROM ringshard.node_execute(ARRAY['w1', 'w2', 'w3'], 'CREATE EXTENSION ringshard', '{}', false);
SELECT node, ok, error FROM ringshard.node_execute(ARRAY['w1', 'w2', 'w3'],
	'CREATE TYPE public.mood AS ENUM (''sad'', ''ok'', ''happy'')', '{}', false);
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
SELECT count(*) FROM ringshard.sync_topology();

-- The rows, here: NULLs in most columns, groups spread over every node,
-- float values exactly representable so that their sums do not depend on
-- the order of the additions, numerics of several scales.
CREATE TABLE items_local (
	id int4 PRIMARY KEY, grp text, sub int4, i2 int2, i4 int4, i8 int8, n numeric, f4 float4, f8 float8,
	iv interval, m money, d date, ts timestamptz, tm time, t text, vc varchar(20), arr int4[], mood mood,
	ip inet, b bool);
INSERT INTO items_local
SELECT g,
	   CASE WHEN g % 17 = 0 THEN NULL ELSE 'g' || g % 7 END,
	   g % 5,
	   CASE WHEN g % 11 = 0 THEN NULL ELSE (g % 300 - 150)::int2 END,
	   CASE WHEN g % 13 = 0 THEN NULL ELSE g * 1000 - 200000 END,
	   CASE WHEN g % 19 = 0 THEN NULL ELSE g::int8 * 100000000000 END,
	   CASE WHEN g % 23 = 0 THEN NULL ELSE round(g * 1.37, g % 4) END,
	   CASE WHEN g % 29 = 0 THEN NULL ELSE ((g % 40 - 20) * 0.25)::float4 END,
	   CASE WHEN g % 31 = 0 THEN NULL ELSE (g % 64 - 32) * 0.125::float8 END,
	   CASE WHEN g % 37 = 0 THEN NULL ELSE make_interval(months => g % 3, days => g % 9, mins => g) END,
	   CASE WHEN g % 41 = 0 THEN NULL ELSE (g * 3)::numeric::money END,
	   date '2024-01-01' + g,
	   timestamptz '2024-01-01 00:00:00+00' + g * interval '37 minutes',
	   time '00:00' + g * interval '3 minutes',
	   CASE WHEN g % 43 = 0 THEN NULL ELSE md5(g::text) END,
	   'v' || g % 13,
	   ARRAY[g % 3, g % 5],
	   (ARRAY['sad', 'ok', 'happy']::mood[])[1 + g % 3],
	   ('10.0.' || g % 4 || '.' || g % 250)::inet,
	   g % 2 = 0
  FROM generate_series(1, 400) g;

-- The same rows in four distributed tables (two copies on a ring, one
-- copy, a partition map with a constant keyspace and one whose keyspace is
-- a column) and an empty one.
CREATE TABLE items_pair (LIKE items_local);
SELECT ringshard.distribute_table('items_pair', 'id', 'pair');
SELECT ringshard.create_distributed_table('items_pair');
CREATE TABLE items_single (LIKE items_local);
SELECT ringshard.distribute_table('items_single', 'id', 'single');
SELECT ringshard.create_distributed_table('items_single');
CREATE TABLE items_map (LIKE items_local);
SELECT ringshard.distribute_table_by_partition('items_map', 'id', keyspace => 'items', map => 'halves');
SELECT ringshard.create_distributed_table('items_map');
CREATE TABLE items_keyspaces (LIKE items_local);
SELECT ringshard.distribute_table_by_partition('items_keyspaces', 'id', keyspace_column => 'vc', map => 'halves');
SELECT ringshard.create_distributed_table('items_keyspaces');
CREATE TABLE items_empty (LIKE items_local);
SELECT ringshard.distribute_table('items_empty', 'id', 'pair');
SELECT ringshard.create_distributed_table('items_empty');
INSERT INTO items_pair SELECT * FROM items_local;
INSERT INTO items_single SELECT * FROM items_local;
INSERT INTO items_map SELECT * FROM items_local;
INSERT INTO items_keyspaces SELECT * FROM items_local;
-- every node holds part of each table; the pair ring and the maps hold each row twice
SELECT t.table_name, r.node, r.rows > 0 AS has_rows
  FROM unnest(ARRAY['items_pair', 'items_single', 'items_map', 'items_keyspaces']) t(table_name),
	   ringshard.node_table_rows(t.table_name::regclass) r ORDER BY 1, 2;
SELECT t.table_name, sum(r.rows) AS copies
  FROM unnest(ARRAY['items_pair', 'items_single', 'items_map', 'items_keyspaces']) t(table_name),
	   ringshard.node_table_rows(t.table_name::regclass) r GROUP BY 1 ORDER BY 1;

-- same(query, table, ordered, local table): the query (%s: the table) over
-- a distributed table against the same over a local table: 'pushed' or
-- 'here' (whether the plan has work pushed down to the nodes) if every row
-- is the same, to the character; rows compared in their order when ordered.
CREATE FUNCTION same(query text, tab text, ordered boolean, local_tab text DEFAULT 'items_local') RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	remote text := format(query, tab);
	local text := format(query, local_tab);
	plan text;
	missing bigint;
	extra bigint;
	remote_rows text;
	local_rows text;
BEGIN
	EXECUTE 'EXPLAIN (FORMAT JSON) ' || remote INTO plan;
	IF ordered THEN
		EXECUTE format('SELECT string_agg(r::text, E''\n'') FROM (%s) r', remote) INTO remote_rows;
		EXECUTE format('SELECT string_agg(r::text, E''\n'') FROM (%s) r', local) INTO local_rows;
		IF remote_rows IS DISTINCT FROM local_rows THEN
			RETURN format('DIFFERENT: %s instead of %s', remote_rows, local_rows);
		END IF;
	ELSE
		EXECUTE format('SELECT count(*) FROM (SELECT r::text FROM (%s) r EXCEPT ALL SELECT r::text FROM (%s) r) x',
					   local, remote) INTO missing;
		EXECUTE format('SELECT count(*) FROM (SELECT r::text FROM (%s) r EXCEPT ALL SELECT r::text FROM (%s) r) x',
					   remote, local) INTO extra;
		IF missing > 0 OR extra > 0 THEN
			RETURN format('DIFFERENT: %s rows missing, %s extra', missing, extra);
		END IF;
	END IF;
	RETURN CASE WHEN position('"Pushed down"' IN plan) > 0 THEN 'pushed' ELSE 'here' END;
END
$$;

-- Every query over every layout: the pushed-down shapes ...
CREATE TABLE queries (n serial, ordered boolean, query text);
INSERT INTO queries (ordered, query) VALUES
-- aggregates without GROUP BY
(false, 'SELECT count(*) FROM %s'),
(false, 'SELECT count(*), count(grp), count(i2), sum(i2), sum(i4), sum(i8), sum(n) FROM %s'),
(false, 'SELECT sum(f4), sum(f8), sum(iv), sum(m) FROM %s'),
(false, 'SELECT avg(i2), avg(i4), avg(i8), avg(n), avg(f4), avg(f8), avg(iv) FROM %s'),
(false, 'SELECT min(i2), max(i2), min(i4), max(i8), min(n), max(n), min(f4), max(f8) FROM %s'),
(false, 'SELECT min(t), max(t), min(vc), max(vc), min(d), max(ts), min(tm), max(iv), min(m), max(m) FROM %s'),
(false, 'SELECT min(arr), max(arr), min(mood), max(mood), min(ip), max(ip) FROM %s'),
(false, 'SELECT count(*), sum(i4), avg(f8) FROM %s WHERE sub = 2 AND f8 > 0'),
(false, 'SELECT count(*), count(i4), sum(i4), avg(i4), min(t), max(f8), sum(iv), avg(iv), sum(m) FROM %s WHERE i4 > 1000000000'),
(false, 'SELECT count(*) FILTER (WHERE b), sum(i4) FILTER (WHERE sub < 2), avg(n) FILTER (WHERE grp = ''g3''), max(t) FILTER (WHERE i2 < 0) FROM %s'),
(false, 'SELECT count(*) * 2 + 1, sum(i4) / nullif(count(i4), 0), max(f8) - min(f8), coalesce(sum(i2), 0), avg(n) * 2 FROM %s'),
(false, 'SELECT sum(i4 + sub), avg(abs(f8)), max(length(t)), min(i2 * 2), count(nullif(sub, 0)), sum(f4 * 2), avg(i8 / 3) FROM %s'),
(false, 'SELECT count(*) + (random() * 0)::int FROM %s'),
(false, 'SELECT max(c), min(c), sum(c) FROM (SELECT grp, count(*) c FROM %s GROUP BY grp) s'),
-- GROUP BY
(false, 'SELECT grp, count(*), sum(i4), avg(f8), min(t), max(n), avg(iv) FROM %s GROUP BY grp'),
(false, 'SELECT sub, b, count(*), sum(i8), avg(i2), sum(f4) FROM %s GROUP BY sub, b'),
(false, 'SELECT sub %% 2, count(*) FROM %s GROUP BY sub %% 2'),
(false, 'SELECT (sub + 1) * 10, sum(i4), count(*) - 1 FROM %s GROUP BY sub + 1'),
(false, 'SELECT count(*), sum(f4) FROM %s GROUP BY grp'),
(false, 'SELECT i2 IS NULL, grp, count(*) FROM %s GROUP BY 1, 2'),
(false, 'SELECT d, count(*), min(id) FROM %s GROUP BY d'),
(false, 'SELECT mood, count(*), max(i4), avg(f8) FROM %s GROUP BY mood'),
(false, 'SELECT arr, count(*), sum(n) FROM %s GROUP BY arr'),
(false, 'SELECT ip, count(*) FROM %s GROUP BY ip'),
(false, 'SELECT vc, min(t), max(t) FROM %s GROUP BY vc'),
(false, 'SELECT n, count(*) FROM %s GROUP BY n'),
(false, 'SELECT f8, count(*), sum(i2) FROM %s GROUP BY f8'),
(false, 'SELECT iv, count(*) FROM %s GROUP BY iv'),
(false, 'SELECT tm, ts, count(*) FROM %s GROUP BY tm, ts'),
(false, 'SELECT m, count(*) FROM %s GROUP BY m'),
(false, 'SELECT grp, count(*) FROM %s GROUP BY grp HAVING count(*) > 50 AND sum(i4) > 0'),
(false, 'SELECT grp FROM %s GROUP BY grp HAVING avg(f8) > 0'),
(false, 'SELECT sub, count(*) FROM %s GROUP BY sub HAVING random() >= 0'),
(false, 'SELECT grp, count(*) FROM %s WHERE t > ''a'' GROUP BY grp'),
(false, 'SELECT grp, count(*), sum(i4) FROM %s WHERE i4 > 1000000000 GROUP BY grp'),
(true, 'SELECT grp, count(*) FROM %s GROUP BY grp ORDER BY count(*) DESC, grp LIMIT 3'),
(false, 'SELECT sub FROM %s GROUP BY sub'),
(false, 'SELECT grp, sub, count(*), min(i4), max(i4) FROM %s WHERE b GROUP BY grp, sub HAVING count(*) >= 2'),
(false, 'SELECT count(*) FROM %s HAVING count(*) > 1000'),
(false, 'SELECT DISTINCT count(*) FROM %s GROUP BY sub'),
(true, 'SELECT grp, count(*) FROM %s GROUP BY grp ORDER BY grp NULLS FIRST'),
(false, 'SELECT max(id), min(id) FROM %s'),
(false, 'SELECT count(*), sum(i4) FROM %s WHERE (SELECT true)'),
(false, 'SELECT count(*), sum(i4) FROM %s WHERE (SELECT false)'),
(false, 'SELECT grp, count(*) FROM %s WHERE (SELECT false) GROUP BY grp'),
(false, 'SELECT * FROM (SELECT count(*) FROM %s UNION ALL SELECT sum(i4) FROM %1$s) s'),
-- ORDER BY ... LIMIT, and LIMIT alone
(true, 'SELECT id, f8 FROM %s ORDER BY f8 DESC, id LIMIT 10'),
(true, 'SELECT id, i2 FROM %s ORDER BY i2 NULLS FIRST, id LIMIT 15'),
(true, 'SELECT id, t FROM %s ORDER BY t, id LIMIT 7 OFFSET 5'),
(true, 'SELECT id, n FROM %s ORDER BY n DESC NULLS LAST, id LIMIT 12'),
(true, 'SELECT id, i4 FROM %s ORDER BY abs(i4), id LIMIT 5'),
(true, 'SELECT id FROM %s ORDER BY ts DESC LIMIT 5'),
(true, 'SELECT id * 2, upper(t), length(vc) FROM %s ORDER BY id LIMIT 4'),
(true, 'SELECT * FROM %s ORDER BY id LIMIT 3'),
(true, 'SELECT id FROM %s WHERE grp = ''g2'' ORDER BY id DESC LIMIT 3'),
(true, 'SELECT id FROM %s WHERE sub = 1 ORDER BY id LIMIT 1000'),
(true, 'SELECT id FROM %s ORDER BY id LIMIT 0'),
(true, 'SELECT id FROM %s ORDER BY id LIMIT 5 OFFSET 1000'),
(true, 'SELECT id, mood, arr FROM %s ORDER BY mood DESC, arr, id LIMIT 6'),
(true, 'SELECT id, m FROM %s ORDER BY m NULLS FIRST, id LIMIT 4'),
(true, 'SELECT id, random() >= 0 FROM %s ORDER BY id LIMIT 3'),
(true, 'SELECT sub, b FROM %s ORDER BY sub, b LIMIT 90'),
(true, 'SELECT sub, b FROM %s ORDER BY sub DESC, b LIMIT 45 OFFSET 70'),
(true, 'SELECT grp FROM %s ORDER BY grp NULLS FIRST LIMIT 30'),
(true, 'SELECT mood FROM %s ORDER BY mood LIMIT 140'),
(false, 'SELECT count(*) FROM (SELECT id FROM %s LIMIT 7) s'),
(false, 'SELECT count(*) FROM (SELECT id FROM %s WHERE sub = 3 LIMIT 500 OFFSET 70) s'),
-- ... and the shapes the nodes cannot do
(false, 'SELECT count(DISTINCT grp) FROM %s'),
(false, 'SELECT string_agg(t, '','' ORDER BY t) FROM %s'),
(false, 'SELECT my_sum(i4) FROM %s'),
(false, 'SELECT array_agg(id ORDER BY id) FROM %s'),
(false, 'SELECT count(*) FROM %s WHERE random() >= 0'),
(false, 'SELECT sum(i4 + (random() * 0)::int) FROM %s'),
(false, 'SELECT grp FROM %s GROUP BY grp HAVING count(DISTINCT sub) > 3'),
(false, 'SELECT count(*), sum(i4) FROM %s WHERE id = 42'),
(false, 'SELECT count(*), sum(i4) FROM %s WHERE id IN (1, 2, 3, 5, 8)'),
(false, 'SELECT grp, count(*) FROM %s GROUP BY ROLLUP (grp)'),
(false, 'SELECT 1 FROM %s HAVING 1 > 0'),
(false, 'SELECT count(*) FROM %s WHERE false'),
(false, 'SELECT count(*) FROM %s WHERE ts < now()'),
(false, 'SELECT to_char(d, ''YYYY-MM''), count(*) FROM %s GROUP BY 1'),
(false, 'SELECT min(t COLLATE "C"), max(t COLLATE "C") FROM %s'),
(false, 'SELECT grp COLLATE "C", count(*) FROM %s GROUP BY 1'),
(false, 'SELECT count(*) FROM %s WHERE t > my_stable_text()'),
(false, 'SELECT count(*) FROM (SELECT id FROM %s ORDER BY random() LIMIT 5) s'),
(true, 'SELECT x FROM %s x ORDER BY id LIMIT 3'),
(true, 'SELECT id FROM %s ORDER BY id OFFSET 395'),
(true, 'SELECT id FROM %s ORDER BY id LIMIT NULL OFFSET 396'),
(true, 'SELECT id FROM %s ORDER BY id LIMIT 2500 OFFSET 397'),
(true, 'SELECT id FROM %s ORDER BY t COLLATE "C", id LIMIT 5'),
(true, 'SELECT id, row_number() OVER (ORDER BY id) FROM %s ORDER BY id LIMIT 3'),
(true, 'SELECT DISTINCT sub FROM %s ORDER BY sub LIMIT 2'),
(false, 'SELECT id, sub FROM %s ORDER BY sub FETCH FIRST 3 ROWS WITH TIES'),
(true, 'SELECT id FROM %s WHERE t > my_stable_text() ORDER BY id LIMIT 3');

-- a user-defined aggregate: never sent to a node; a stable function of no
-- column (now(), my_stable_text()): evaluated here once, its value sent
CREATE AGGREGATE my_sum(int4) (sfunc = int4pl, stype = int4);
CREATE FUNCTION my_stable_text() RETURNS text LANGUAGE plpgsql STABLE AS $$ BEGIN RETURN 'c'; END $$;

SELECT n, query, same(query, 'items_pair', ordered) AS pair, same(query, 'items_single', ordered) AS single,
	   same(query, 'items_map', ordered) AS map, same(query, 'items_keyspaces', ordered) AS keyspaces
  FROM queries ORDER BY n;

-- Empty input: count is 0 and the others NULL without GROUP BY, no row with it.
SELECT count(*), count(i4), sum(i4), sum(f8), sum(n), avg(i4), avg(f4), avg(iv), min(t), max(mood) FROM items_empty;
SELECT grp, count(*) FROM items_empty GROUP BY grp;
SELECT id FROM items_empty ORDER BY id LIMIT 3;

-- Infinities and NaN: the combined sums and averages are PostgreSQL's.
CREATE TABLE special_local (id int4, k int4, f4 float4, f8 float8, n numeric);
INSERT INTO special_local
SELECT k * 10 + i, k,
	   CASE WHEN i > 0 THEN '1' ELSE v END::float4, CASE WHEN i > 0 THEN '1' ELSE v END::float8,
	   CASE WHEN i > 0 THEN '1' ELSE v END::numeric
  FROM (VALUES (1, 'Infinity'), (2, '-Infinity'), (3, 'NaN'), (4, '2.5')) s(k, v),
	   generate_series(0, 5) i;
INSERT INTO special_local SELECT 50 + i, 5, v::float4, v::float8, v::numeric
  FROM (VALUES (0, 'Infinity'), (1, '-Infinity'), (2, '3')) s(i, v);
CREATE TABLE special (LIKE special_local);
SELECT ringshard.distribute_table('special', 'id', 'pair');
SELECT ringshard.create_distributed_table('special');
INSERT INTO special SELECT * FROM special_local;
SELECT k, count(DISTINCT r.node) > 1 AS spread
  FROM special_local s, LATERAL (SELECT unnest(replicas_for(s.id, 'pair')) node) r GROUP BY k ORDER BY k;
SELECT same('SELECT k, sum(f4), sum(f8), sum(n), avg(f4), avg(f8), avg(n), min(f8), max(f8), min(n), max(n) FROM %s GROUP BY k',
			'special', false, 'special_local');
SELECT same('SELECT sum(f4), sum(f8), sum(n), avg(f4), avg(f8), avg(n), min(f8), max(f8), min(n), max(n) FROM %s',
			'special', false, 'special_local');
SELECT k, sum(f8), avg(f8), sum(n), avg(n), avg(f4) FROM special GROUP BY k ORDER BY k;

-- A column of a domain type (NOT NULL): the late check of top rows reads
-- only their keys, so the domain has nothing to refuse.
SELECT node, ok, error FROM ringshard.node_execute(ARRAY['w1', 'w2', 'w3'],
	'CREATE DOMAIN public.label AS text NOT NULL CHECK (VALUE <> '''')', '{}', false);
CREATE DOMAIN label AS text NOT NULL CHECK (VALUE <> '');
CREATE TABLE labelled_local (id int4, name label, score int4);
INSERT INTO labelled_local SELECT g, 'l' || g % 7, g % 10 FROM generate_series(1, 60) g;
CREATE TABLE labelled (LIKE labelled_local);
SELECT ringshard.distribute_table('labelled', 'id', 'pair');
SELECT ringshard.create_distributed_table('labelled');
INSERT INTO labelled SELECT * FROM labelled_local;
SELECT same('SELECT name, score FROM %s ORDER BY score DESC, name LIMIT 8', 'labelled', true, 'labelled_local');
SELECT same('SELECT name, count(*), sum(score) FROM %s GROUP BY name', 'labelled', false, 'labelled_local');
EXPLAIN (VERBOSE, COSTS OFF) SELECT name, score FROM labelled ORDER BY score DESC, name LIMIT 8;

-- What EXPLAIN shows.
EXPLAIN (VERBOSE, COSTS OFF) SELECT count(*), sum(i4) FROM items_pair;
EXPLAIN (VERBOSE, COSTS OFF) SELECT count(*), sum(i4) FROM items_single;
EXPLAIN (VERBOSE, COSTS OFF) SELECT count(*), sum(i4) FROM items_map;
EXPLAIN (VERBOSE, COSTS OFF)
SELECT grp, count(*), avg(i4), avg(f4), min(t) FILTER (WHERE b), count(*) * 2 FROM items_pair
 WHERE sub > 0 GROUP BY grp HAVING sum(i8) > 0 AND random() >= 0;
EXPLAIN (VERBOSE, COSTS OFF) SELECT sub + 1, count(*) FROM items_pair GROUP BY sub + 1;
EXPLAIN (VERBOSE, COSTS OFF) SELECT id, f8 FROM items_pair ORDER BY f8 DESC, id LIMIT 10;
EXPLAIN (VERBOSE, COSTS OFF) SELECT id, t FROM items_pair WHERE grp = 'g2' ORDER BY t, id LIMIT 7 OFFSET 5;
EXPLAIN (VERBOSE, COSTS OFF) SELECT id * 2 FROM items_pair ORDER BY abs(i4) DESC LIMIT 3;
EXPLAIN (VERBOSE, COSTS OFF) SELECT id, vc FROM items_keyspaces ORDER BY f4 LIMIT 3;
EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM items_single LIMIT 3;
-- an aggregate of one key goes whole to a replica of the key (a router
-- statement, router.sql); not pushed: a DISTINCT aggregate; pushed: a
-- condition on a stable function of no column, sent as its value
EXPLAIN (COSTS OFF) SELECT count(*) FROM items_pair WHERE id = 42;
EXPLAIN (COSTS OFF) SELECT count(*) FROM items_pair WHERE t > my_stable_text();
EXPLAIN (COSTS OFF) SELECT count(DISTINCT grp) FROM items_pair;

-- Parameters: in the conditions, the LIMIT and the OFFSET of a generic plan.
SET plan_cache_mode = force_generic_plan;
PREPARE agg(int4) AS SELECT sub, count(*), sum(i4) FROM items_pair WHERE sub >= $1 GROUP BY sub ORDER BY sub;
EXPLAIN (VERBOSE, COSTS OFF) EXECUTE agg(3);
EXECUTE agg(3);
SELECT sub, count(*), sum(i4) FROM items_local WHERE sub >= 3 GROUP BY sub ORDER BY sub;
PREPARE top(int8, int8) AS SELECT id, f8 FROM items_pair ORDER BY f8, id LIMIT $1 OFFSET $2;
EXPLAIN (VERBOSE, COSTS OFF) EXECUTE top(4, 2);
EXECUTE top(4, 2);
SELECT id, f8 FROM items_local ORDER BY f8, id LIMIT 4 OFFSET 2;
EXECUTE top(NULL, 398);
EXECUTE top(0, 0);
EXECUTE top(-1, 0);
EXECUTE top(1, -1);
RESET plan_cache_mode;

-- Rescans: with new parameter values the nodes are asked again; without, the answers are returned again.
SELECT g, (SELECT count(*) FROM items_pair WHERE sub = g) AS pair,
	   (SELECT count(*) FROM items_local WHERE sub = g) AS local FROM generate_series(0, 5) g;
SELECT g, (SELECT string_agg(grp || ':' || c, ',' ORDER BY grp) FROM (SELECT grp, count(*) c FROM items_keyspaces WHERE sub = g GROUP BY grp) s) AS keyspaces,
	   (SELECT string_agg(grp || ':' || c, ',' ORDER BY grp) FROM (SELECT grp, count(*) c FROM items_local WHERE sub = g GROUP BY grp) s) AS local
  FROM generate_series(0, 5) g;
SELECT g, (SELECT string_agg(id::text, ',') FROM (SELECT id FROM items_map WHERE sub = g ORDER BY id DESC LIMIT 3) s) AS map,
	   (SELECT string_agg(id::text, ',') FROM (SELECT id FROM items_local WHERE sub = g ORDER BY id DESC LIMIT 3) s) AS local
  FROM generate_series(0, 5) g;
-- (OFFSET 0 keeps the condition on g above the scans, which are rescanned with the same parameters)
EXPLAIN (COSTS OFF)
SELECT g, (SELECT sum(c) FROM (SELECT grp, count(*) c FROM items_pair GROUP BY grp OFFSET 0) s WHERE c > g * 20)
  FROM generate_series(1, 3) g;
SELECT g, (SELECT sum(c) FROM (SELECT grp, count(*) c FROM items_pair GROUP BY grp OFFSET 0) s WHERE c > g * 20) AS pair,
	   (SELECT sum(c) FROM (SELECT grp, count(*) c FROM items_local GROUP BY grp OFFSET 0) s WHERE c > g * 20) AS local
  FROM generate_series(1, 3) g;
SELECT g, (SELECT max(id) FROM (SELECT id FROM items_single ORDER BY id DESC LIMIT 5 OFFSET 0) s WHERE id % 4 = g) AS single,
	   (SELECT max(id) FROM (SELECT id FROM items_local ORDER BY id DESC LIMIT 5 OFFSET 0) s WHERE id % 4 = g) AS local
  FROM generate_series(1, 3) g;

-- A pushed-down query between the batches of a scan on the same connections.
SET ringshard.fetch_size = 5;
SELECT same('SELECT a.id, (SELECT count(*) FROM %1$s b WHERE b.sub = a.sub AND b.id < a.id) FROM %1$s a WHERE a.id <= 40',
			'items_pair', false);
RESET ringshard.fetch_size;

-- Sorted scans without LIMIT: each node sorts, the streams are merged here,
-- also for types whose sort operators belong to polymorphic operator
-- classes (enum, array).
SELECT same('SELECT id, mood FROM %s ORDER BY mood, id', 'items_pair', true);
SELECT same('SELECT id, arr FROM %s ORDER BY arr DESC, id', 'items_pair', true);
EXPLAIN (VERBOSE, COSTS OFF) SELECT id, mood FROM items_pair ORDER BY mood, id;

-- Collations: what a node would derive differently is evaluated here.  A
-- COLLATE clause that changes a column's collation, in a condition or a
-- sort, stays here; a column's own collation, also a non-default one, is
-- the node's too.
SELECT same('SELECT id, t FROM %s ORDER BY t COLLATE "C", id', 'items_pair', true);
EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM items_pair ORDER BY t COLLATE "C", id;
EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM items_pair WHERE t COLLATE "C" > 'm' AND t > 'm';
SELECT same('SELECT id FROM %s WHERE t COLLATE "C" > ''m''', 'items_pair', false);
CREATE TABLE collated_local (id int4, name text COLLATE "POSIX");
INSERT INTO collated_local SELECT g, chr(65 + g % 7) || chr(97 + g % 5) FROM generate_series(1, 50) g;
CREATE TABLE collated (LIKE collated_local INCLUDING ALL);
SELECT ringshard.distribute_table('collated', 'id', 'pair');
SELECT ringshard.create_distributed_table('collated');
INSERT INTO collated SELECT * FROM collated_local;
EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM collated WHERE name > 'Cb' ORDER BY name, id;
EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM collated WHERE name COLLATE "default" > 'Cb';
EXPLAIN (VERBOSE, COSTS OFF) SELECT id FROM collated WHERE upper(name) = 'CB' AND name = ANY (ARRAY['Cb', 'Dc']);
SELECT same('SELECT id, name FROM %s WHERE name > ''Cb'' ORDER BY name, id', 'collated', true, 'collated_local');
SELECT same('SELECT name, count(*) FROM %s GROUP BY name', 'collated', false, 'collated_local');
SELECT same('SELECT id, name FROM %s ORDER BY name COLLATE "default" DESC, id LIMIT 9', 'collated', true, 'collated_local');

-- Inside a transaction, the nodes answer with its writes.
BEGIN;
INSERT INTO items_pair (id, grp, i4) SELECT g, 'new', g FROM generate_series(1001, 1010) g;
SELECT grp, count(*), sum(i4) FROM items_pair WHERE grp = 'new' OR grp IS NULL GROUP BY grp ORDER BY grp;
SELECT id FROM items_pair ORDER BY id DESC LIMIT 2;
ROLLBACK;
SELECT count(*), max(id) FROM items_pair;

-- A node marked down: the pair ring and the map still read every row once, from the other copy.
SELECT ringshard.mark_node_down('w3');
SELECT n, same(query, 'items_pair', ordered) AS pair, same(query, 'items_map', ordered) AS map,
	   same(query, 'items_keyspaces', ordered) AS keyspaces
  FROM queries ORDER BY n;
SELECT count(*) FROM items_single;
SET ringshard.allow_partial_reads = on;
SELECT count(*) BETWEEN 1 AND 399 AS some_rows, sum(i4) IS NOT NULL AS summed FROM items_single;
SELECT count(*) BETWEEN 1 AND 399 AS some_rows FROM (SELECT id FROM items_single ORDER BY id LIMIT 1000) s;
RESET ringshard.allow_partial_reads;
SELECT ringshard.mark_node_up('w3');

-- enable_partitionwise_aggregate (often on for postgres_fdw setups) does not
-- keep aggregates from the nodes: the table is grouped whole.
SET enable_partitionwise_aggregate = on;
EXPLAIN (VERBOSE, COSTS OFF) SELECT count(*), sum(f8) FROM items_pair;
SELECT same('SELECT count(*), sum(i4), grp FROM %s GROUP BY grp', 'items_pair', false);
RESET enable_partitionwise_aggregate;

-- Links to the nodes that died while idle (their backends terminated) are
-- replaced at the next statement: fan-out and router reads see every row.
SELECT count(*) AS rows_before FROM items_pair;
SELECT count(*) > 0 AS terminated FROM (
	SELECT pg_terminate_backend(pid) FROM pg_stat_activity
	 WHERE datname LIKE 'pushdown\_w_' AND backend_type = 'client backend') k;
SELECT pg_sleep(0.3);
SELECT count(*) AS rows_after FROM items_pair;
SELECT id FROM items_pair WHERE id = 7;

-- A ring created after the topology was last pushed: the nodes do not know
-- it yet, and say so; after sync_topology() the table is distributed.
SELECT ringshard.create_ring('late');
SELECT ringshard.add_node('w' || i, ring => 'late') FROM generate_series(1, 2) i;
CREATE TABLE late_items (id int4, v text);
SELECT ringshard.distribute_table('late_items', 'id', 'late');
SELECT ringshard.create_distributed_table('late_items');
SELECT count(*) FROM ringshard.sync_topology();
SELECT ringshard.create_distributed_table('late_items');
INSERT INTO late_items SELECT g, 'v' || g FROM generate_series(1, 20) g;
SELECT count(*), sum(id) FROM late_items;
DROP TABLE late_items;

-- The overview: every annotated table, and its nodes, from the catalog.
SELECT table_name, kind, key_column, placed_by, keyspace, copies, nodes, nodes_down, queued_writes,
       dead_letters, layout, owner = current_user AS mine
  FROM ringshard.table_overview ORDER BY table_name::text COLLATE "C";
SELECT node, is_up, role, weight, key_share_pct, partitions, queued_writes, dead_letters
  FROM ringshard.table_nodes WHERE table_name = 'items_pair'::regclass ORDER BY node;
SELECT node, is_up, role, key_share_pct, partitions FROM ringshard.table_nodes
 WHERE table_name = 'items_map'::regclass ORDER BY node;
SELECT sum(key_share_pct) AS ring_shares FROM ringshard.table_nodes WHERE table_name = 'items_pair'::regclass;
-- A node down shows; a topology change the rows have not followed yet shows.
SELECT ringshard.mark_node_down('w2');
SELECT ringshard.set_node_weight('w1', 2, 'pair');
SELECT table_name, nodes_down, layout FROM ringshard.table_overview
 WHERE table_name IN ('items_pair'::regclass, 'items_single'::regclass, 'items_map'::regclass)
 ORDER BY table_name::text COLLATE "C";
SELECT ringshard.set_node_weight('w1', 1, 'pair');
SELECT ringshard.mark_node_up('w2');
SELECT table_name, nodes_down, layout FROM ringshard.table_overview
 WHERE table_name = 'items_pair'::regclass;
-- Anyone may read it; it shows no addresses.
CREATE ROLE regress_overview_reader;
SET ROLE regress_overview_reader;
SELECT count(*) > 0 AS readable FROM ringshard.table_overview;
SELECT count(*) > 0 AS readable FROM ringshard.table_nodes;
RESET ROLE;
DROP ROLE regress_overview_reader;

-- An integer literal fixes a bigint key: int8 = int4 is the integer
-- family's equality across types, and the value routes as the int8 it
-- equals.  So the lookup goes to the key's replicas only, and so do an
-- UPDATE, a DELETE, = ANY of an int4 array and an int4 parameter (a generic
-- plan too).  An int4 key compared with a bigint beyond its range matches no
-- row, and fails nowhere.
CREATE TABLE wide_keys_local (id int8 PRIMARY KEY, v int4);
INSERT INTO wide_keys_local SELECT g, g FROM generate_series(1, 50) g;
CREATE TABLE wide_keys (LIKE wide_keys_local);
SELECT ringshard.distribute_table('wide_keys', 'id', 'pair');
SELECT ringshard.create_distributed_table('wide_keys');
INSERT INTO wide_keys SELECT * FROM wide_keys_local;
EXPLAIN (COSTS OFF) SELECT v FROM wide_keys WHERE id = 7;
SELECT v FROM wide_keys WHERE id = 7;
EXPLAIN (COSTS OFF) SELECT v FROM wide_keys WHERE 8::int2 = id;
SELECT v FROM wide_keys WHERE 8::int2 = id;
EXPLAIN (COSTS OFF) SELECT v FROM wide_keys WHERE id = ANY ('{3,4,99}'::int4[]);
SELECT v FROM wide_keys WHERE id = ANY ('{3,4,99}'::int4[]) ORDER BY v;
EXPLAIN (COSTS OFF) UPDATE wide_keys SET v = v + 100 WHERE id = 9;
UPDATE wide_keys SET v = v + 100 WHERE id = 9;
UPDATE wide_keys_local SET v = v + 100 WHERE id = 9;
EXPLAIN (COSTS OFF) DELETE FROM wide_keys WHERE id = 10;
DELETE FROM wide_keys WHERE id = 10;
DELETE FROM wide_keys_local WHERE id = 10;
PREPARE wide(int4) AS SELECT v FROM wide_keys WHERE id = $1;
SET plan_cache_mode = force_generic_plan;
EXPLAIN (COSTS OFF) EXECUTE wide(11);
EXECUTE wide(11);
EXECUTE wide(10);
RESET plan_cache_mode;
DEALLOCATE wide;
SELECT count(*) AS differences
  FROM ((TABLE wide_keys EXCEPT ALL TABLE wide_keys_local) UNION ALL (TABLE wide_keys_local EXCEPT ALL TABLE wide_keys)) d;
SELECT * FROM ringshard.verify_table('wide_keys');
SELECT count(*) FROM items_pair WHERE id = 5000000000;
SELECT count(*) FROM items_pair WHERE id = ANY (ARRAY[5000000000, 7]);

-- Rows cross between nodes only inside a rebalance: the copy commits on its
-- targets at once, and outside a move nothing would delete them again.
BEGIN;
SELECT ringshard_internal.copy_step_rows('wide_keys', 'w1', ARRAY['w2'], 'true');
ROLLBACK;
SELECT count(*) AS differences
  FROM ((TABLE wide_keys EXCEPT ALL TABLE wide_keys_local) UNION ALL (TABLE wide_keys_local EXCEPT ALL TABLE wide_keys)) d;

-- A new session follows annotation changes from its first statement on:
-- its utility hook asks whether a table is distributed before it has built
-- any ring, and must see the table stop being distributed.  After
-- undistribute_table, DROP FOREIGN TABLE stays on the coordinator and the
-- nodes keep their rows.
CREATE TABLE kept_rows (id int, v text);
SELECT ringshard.distribute_table('kept_rows', 'id', 'pair');
SELECT ringshard.create_distributed_table('kept_rows');
INSERT INTO kept_rows SELECT i, 'x' FROM generate_series(1, 10) i;
\c pushdown_coord
SET client_min_messages = warning;
LOAD 'ringshard';	-- as shared_preload_libraries would
ALTER FOREIGN TABLE kept_rows ADD COLUMN a int;
SELECT ringshard.undistribute_table('kept_rows');
DROP FOREIGN TABLE kept_rows;
SELECT node, ok, value, error
  FROM ringshard.node_execute(ARRAY['w1', 'w2', 'w3'], 'SELECT count(*) > 0 FROM public.kept_rows', '{}', false)
 ORDER BY node;

-- The nodes' databases go with the coordinator's.
\c contrib_regression
DROP DATABASE pushdown_coord WITH (FORCE);
DROP DATABASE pushdown_w1 WITH (FORCE);
DROP DATABASE pushdown_w2 WITH (FORCE);
DROP DATABASE pushdown_w3 WITH (FORCE);

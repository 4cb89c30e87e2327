-- bench/sql/setup.sql: data, rings, hand-written baselines and the query list
-- of the SQL benchmark.  psql variables: nkeys, nsmall.
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
CREATE EXTENSION ringshard;
CREATE SCHEMA bench;

-- Keys: 'user-1' .. 'user-N' (6 to 12 bytes), pre-generated, UNLOGGED.
CREATE UNLOGGED TABLE bench.keys (k text NOT NULL);
INSERT INTO bench.keys SELECT 'user-' || i FROM generate_series(1, :nkeys) i;
-- The subset for the very slow hand-written rings: the first nsmall keys.
CREATE UNLOGGED TABLE bench.keys_small (k text NOT NULL);
INSERT INTO bench.keys_small SELECT 'user-' || i FROM generate_series(1, :nsmall) i;

-- Rings of 3, 64 and 1,000 nodes x 256 vnodes, replication factor 3; the
-- built-in ring 'default' gets the 64 nodes too (shard_for(k), no ring name).  Nodes and
-- members are inserted directly (one statement each, instead of add_node per
-- node, which validates the whole ring each time); the catalog's triggers
-- invalidate the caches.
SELECT ringshard.create_ring(r, 256, 3) FROM unnest(ARRAY['r3', 'r64', 'r1000']) r;
INSERT INTO ringshard.nodes (node_name) SELECT 'node-' || i FROM generate_series(1, 1000) i;
INSERT INTO ringshard.ring_members (ring_name, node_name)
SELECT r.name, 'node-' || i
  FROM (VALUES ('r3', 3), ('r64', 64), ('r1000', 1000), ('default', 64)) r(name, n),
       generate_series(1, r.n) i;
DO $$
BEGIN
	IF ringshard.validate_ring('r3') <> 768 OR ringshard.validate_ring('r64') <> 16384
	   OR ringshard.validate_ring('r1000') <> 256000 THEN
		RAISE EXCEPTION 'unexpected ring sizes';
	END IF;
END
$$;

-- The same 1,000 nodes on a ring of explicit tokens: each joins with 16
-- allocated tokens (add_node(..., tokens => 16), as an operator would add
-- them, one by one), 16,000 points instead of 256,000.
SELECT ringshard.create_ring('r1000t', 256, 3);
DO $$
BEGIN
	FOR i IN 1..1000 LOOP
		PERFORM ringshard.add_node('node-' || i, NULL, 'r1000t', tokens => 16);
	END LOOP;
	IF ringshard.validate_ring('r1000t') <> 16000 THEN
		RAISE EXCEPTION 'unexpected ring size';
	END IF;
END
$$;

-- The hand-written SQL ring: the same points (from ringshard.ring_points) in a
-- table with a btree index; token is the ringtoken type (unsigned 64-bit, so
-- the result equals shard_for's and can be checked); the key's hash is
-- ring_token(k), the same MurmurHash3 as ringshard.
CREATE UNLOGGED TABLE bench.points (ring text NOT NULL, token ringtoken NOT NULL, node text NOT NULL);
INSERT INTO bench.points
SELECT r, p.token, p.node FROM unnest(ARRAY['r3', 'r64', 'r1000']) r, ringshard.ring_points(r) p;
CREATE INDEX ON bench.points (ring, token);

-- The hand-written PL/pgSQL ring: the same lookup, one function call per row.
CREATE FUNCTION bench.plpgsql_ring(key text, ring_name text) RETURNS text
	LANGUAGE plpgsql STABLE AS $$
DECLARE
	t ringtoken := ring_token(key);
	owner text;
BEGIN
	SELECT p.node INTO owner FROM bench.points p
	 WHERE p.ring = ring_name AND p.token >= t ORDER BY p.token LIMIT 1;
	IF owner IS NULL THEN	-- past the last point: wrap to the first
		SELECT p.node INTO owner FROM bench.points p
		 WHERE p.ring = ring_name ORDER BY p.token LIMIT 1;
	END IF;
	RETURN owner;
END
$$;

VACUUM ANALYZE bench.keys, bench.keys_small, bench.points;

-- Timing: one EXECUTE of a query, in milliseconds (clock_timestamp deltas).
CREATE FUNCTION bench.time_ms(q text) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE
	t0 timestamptz;
	n bigint;
BEGIN
	t0 := clock_timestamp();
	EXECUTE q INTO n;
	RETURN 1000 * extract(epoch FROM clock_timestamp() - t0);
END
$$;

-- The queries.  grp: which table; nodes: ring size (0 = ring-independent).
CREATE TABLE bench.cases (
	id serial PRIMARY KEY,
	grp text NOT NULL,			-- 'all' (bench.keys) or 'small' (bench.keys_small)
	nodes int NOT NULL,
	key text NOT NULL,			-- short name for RESULT lines
	name text NOT NULL,
	q text NOT NULL,
	nrows bigint NOT NULL
);
CREATE TABLE bench.timings (case_id int, round int, ms float8);

INSERT INTO bench.cases (grp, nodes, key, name, q, nrows)
SELECT 'all', 0, c.key, c.name, format('SELECT count(%s) FROM bench.keys', c.expr), :nkeys
  FROM (VALUES
	(1, 'scan', 'count(k)  [the scan alone]', 'k'),
	(2, 'octet', 'octet_length(k)  [a trivial C function]', 'octet_length(k)'),
	(3, 'hashtext', 'hashtext(k)  [built-in hash alone]', 'hashtext(k)'),
	(4, 'hash255', 'hashtext(k) & 255  [PL/Proxy style]', 'hashtext(k) & 255'),
	(5, 'token', 'ring_token(k)', 'ring_token(k)'),
	(6, 'partition', 'partition_for(''ks'', k)', 'partition_for(''ks'', k)')) c(o, key, name, expr)
 ORDER BY c.o;

INSERT INTO bench.cases (grp, nodes, key, name, q, nrows)
SELECT 'all', r.n, c.key, c.name, format('SELECT count(%s) FROM bench.keys', format(c.expr, r.n)), :nkeys
  FROM (VALUES (3), (64), (1000)) r(n),
       (VALUES
	(1, 'hashmod', 'hashtext(k) % N', 'hashtext(k) %% %s'),
	(2, 'shard', 'shard_for(k, ring)', 'shard_for(k, ''r%s'')'),
	(3, 'replicas', 'replicas_for(k, ring)  [R = 3]', 'replicas_for(k, ''r%s'')'),
	(4, 'readnode', 'read_node_for(k, ring)  [R = 3]', 'read_node_for(k, ''r%s'')'),
	(5, 'replicas1', 'replicas_for(k, ring, 1)  [array of one]', 'replicas_for(k, ''r%s'', 1)')) c(o, key, name, expr)
 ORDER BY r.n, c.o;
INSERT INTO bench.cases (grp, nodes, key, name, q, nrows)
VALUES ('all', 1000, 'shard_tokens', 'shard_for(k, ring)  [16 allocated tokens per node: 16,000 points]',
        'SELECT count(shard_for(k, ''r1000t'')) FROM bench.keys', :nkeys),
       ('all', 1000, 'replicas_tokens', 'replicas_for(k, ring)  [R = 3, 16 allocated tokens per node]',
        'SELECT count(replicas_for(k, ''r1000t'')) FROM bench.keys', :nkeys);
INSERT INTO bench.cases (grp, nodes, key, name, q, nrows)
VALUES ('all', 64, 'shard_default', 'shard_for(k)  [ring ''default'', no ring argument]',
        'SELECT count(shard_for(k)) FROM bench.keys', :nkeys);

INSERT INTO bench.cases (grp, nodes, key, name, q, nrows)
SELECT 'small', 0, 'scan', 'count(k)  [the scan alone]', 'SELECT count(k) FROM bench.keys_small', :nsmall;
INSERT INTO bench.cases (grp, nodes, key, name, q, nrows)
SELECT 'small', r.n, c.key, c.name, format(c.q, r.n), :nsmall
  FROM (VALUES (3), (64), (1000)) r(n),
       (VALUES
	(1, 'shard', 'shard_for(k, ring)', 'SELECT count(shard_for(k, ''r%1$s'')) FROM bench.keys_small'),
	(2, 'sqlring', 'hand-written SQL ring', 'SELECT count(coalesce('
		'(SELECT p.node FROM bench.points p WHERE p.ring = ''r%1$s'' AND p.token >= ring_token(s.k) ORDER BY p.token LIMIT 1), '
		'(SELECT p.node FROM bench.points p WHERE p.ring = ''r%1$s'' ORDER BY p.token LIMIT 1))) '
		'FROM bench.keys_small s'),
	(3, 'plring', 'hand-written PL/pgSQL ring', 'SELECT count(bench.plpgsql_ring(k, ''r%1$s'')) FROM bench.keys_small')) c(o, key, name, q)
 ORDER BY r.n, c.o;

-- One round: every query once, in an order rotated by the round number so
-- that no query always runs right after the same other one.
CREATE FUNCTION bench.run_round(rnd int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	c record;
	ncases int := (SELECT count(*) FROM bench.cases);
BEGIN
	FOR c IN SELECT * FROM bench.cases ORDER BY (id + rnd * 5) % ncases, id LOOP
		INSERT INTO bench.timings VALUES (c.id, rnd, bench.time_ms(c.q));
	END LOOP;
END
$$;

-- The target of 16 allocated tokens against 3 nodes is a ratio of two
-- lookups whose difference is a few cache misses a row: on a shared VM the
-- load of other tenants moves a query's time by half from one round to the
-- next, so the two are also timed as pairs, back to back, the order
-- alternating; each pair's ratio sees the same load (bench.pairs).
CREATE TABLE bench.pairs (i int, ms_3 float8, ms_tokens float8);
CREATE FUNCTION bench.run_pairs(n int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	q3 text := 'SELECT count(shard_for(k, ''r3'')) FROM bench.keys';
	qt text := 'SELECT count(shard_for(k, ''r1000t'')) FROM bench.keys';
	a float8;
	b float8;
BEGIN
	FOR i IN 1..n LOOP
		IF i % 2 = 1 THEN
			a := bench.time_ms(q3);
			b := bench.time_ms(qt);
		ELSE
			b := bench.time_ms(qt);
			a := bench.time_ms(q3);
		END IF;
		INSERT INTO bench.pairs VALUES (i, a, b);
	END LOOP;
END
$$;

-- Part 3: the first shard_for of a transaction, right after another
-- transaction changed the ring (the cache was invalidated), and a second one
-- (cached), timed around each call with clock_timestamp().
CREATE TABLE bench.rebuilds (ring text, i int, first_ms float8, cached_ms float8, validate_ms float8);
CREATE FUNCTION bench.first_lookup(ring text, i int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	t0 timestamptz;
	t1 timestamptz;
	t2 timestamptz;
	t3 timestamptz;
	a text;
	b text;
	n int;
BEGIN
	t0 := clock_timestamp();
	a := shard_for('user-1'::text, ring);
	t1 := clock_timestamp();
	b := shard_for('user-2'::text, ring);
	t2 := clock_timestamp();
	n := ringshard.validate_ring(ring);		-- catalog read + core build, uncached
	t3 := clock_timestamp();
	IF i > 0 THEN
		INSERT INTO bench.rebuilds VALUES (ring, i,
			1000 * extract(epoch FROM t1 - t0), 1000 * extract(epoch FROM t2 - t1),
			1000 * extract(epoch FROM t3 - t2));
	END IF;
END
$$;

CREATE FUNCTION bench.median(float8[]) RETURNS float8 LANGUAGE sql IMMUTABLE AS $$
	SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY x) FROM unnest($1) x
$$;

-- Every file starts from a fresh extension: the suite shares one database.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS ringshard CASCADE;
CREATE EXTENSION ringshard;
RESET client_min_messages;
-- docs/routing.md §3 and §6: the murmur3 ring.
\set SHOW_CONTEXT never

-- The hash-ring chapter's three shards, 256 vnodes each, replication 2.
SELECT ringshard.set_replication_factor('default', 2);
SELECT ringshard.add_node('shard-jakarta-01');
SELECT ringshard.add_node('shard-surabaya-02');
SELECT ringshard.add_node('shard-makassar-03');

SELECT count(*) AS points FROM ringshard.ring_points();
SELECT * FROM ringshard.ring_points() LIMIT 3;

-- §6 ring table: token, owner and replica set of every key
SELECT key, ring_token(key) AS token, shard_for(key) AS owner, replicas_for(key) AS replicas
  FROM (VALUES ('3201012345670001'), ('3578021122330002'), ('7371034455660003'),
               ('3171059988770004'), ('key-1'), ('key-2'), ('key-3'), ('key-4')) AS v(key);

-- the same rows checked against the contract: no disagreement
SELECT count(*) AS disagreements
  FROM (VALUES ('3201012345670001', '15884386775397619189', '{shard-surabaya-02,shard-jakarta-01}'),
               ('3578021122330002', '8811238047343097349', '{shard-makassar-03,shard-surabaya-02}'),
               ('7371034455660003', '14745517588873323327', '{shard-makassar-03,shard-surabaya-02}'),
               ('3171059988770004', '7138621039917915904', '{shard-makassar-03,shard-surabaya-02}'),
               ('key-1', '18316859633611270910', '{shard-makassar-03,shard-surabaya-02}'),
               ('key-2', '15933830083902091493', '{shard-surabaya-02,shard-jakarta-01}'),
               ('key-3', '2277932087057949865', '{shard-makassar-03,shard-surabaya-02}'),
               ('key-4', '5869623425920187448', '{shard-makassar-03,shard-jakarta-01}')) AS v(key, token, replicas)
 WHERE ring_token(key) <> token::ringtoken
    OR shard_for(key) <> (replicas::text[])[1]
    OR replicas_for(key) <> replicas::text[]
    OR replicas_for(key, 'default') <> replicas::text[];

-- bigint NIKs route as their decimal text
SELECT nik, shard_for(nik) AS owner, shard_for(nik) = shard_for(nik::text) AS same_as_text
  FROM (VALUES (3201012345670001::bigint), (3578021122330002), (7371034455660003), (3171059988770004)) AS v(nik);

-- replicas_for with n: owner first, distinct, capped at the number of nodes
SELECT replicas_for('key-1', 'default', 1) AS one, replicas_for('key-1', 'default', 3) AS three,
       replicas_for('key-1', 'default', 10) AS capped;
SELECT replicas_for('key-1', 'default', 0);

-- the owner is the node of the first point whose token is >= the key's
-- token, wrapping past the last point: checked against ring_points for
-- 2,000 keys
WITH keys AS (SELECT 'k' || g AS key FROM generate_series(1, 2000) g),
     expected AS (
       SELECT k.key,
              coalesce((SELECT p.node FROM ringshard.ring_points() p
                         WHERE p.token >= ring_token(k.key) ORDER BY p.token LIMIT 1),
                       (SELECT p.node FROM ringshard.ring_points() p ORDER BY p.token LIMIT 1)) AS owner
         FROM keys k)
SELECT count(*) FILTER (WHERE shard_for(key) <> owner) AS disagreements, count(*) AS keys FROM expected;

-- exact boundary: a key whose token equals a point's token belongs to that
-- point; one more belongs to the next point.  Found with a point label.
SELECT shard_for('shard-jakarta-01#vnode#0') AS owner_of_point_label,
       (SELECT node FROM ringshard.ring_points() WHERE token = ring_token('shard-jakarta-01#vnode#0')) AS point_node;

-- §6 weighted ring: a, b weight 1, c weight 2, 4 vnodes per unit weight
SELECT ringshard.create_ring('weighted', vnodes => 4, replication_factor => 3);
SELECT ringshard.add_node('a', ring => 'weighted');
SELECT ringshard.add_node('b', ring => 'weighted');
SELECT ringshard.add_node('c', ring => 'weighted', weight => 2);
SELECT token, node FROM ringshard.ring_points('weighted');
SELECT key, shard_for(key, 'weighted') AS owner, replicas_for(key, 'weighted') AS replicas
  FROM (VALUES ('k1'), ('k2'), ('k3'), ('k4'), ('k5'), ('k6')) AS v(key);
SELECT node, weight, points FROM ringshard.ring_balance('weighted');

-- weights round half away from zero, at least one point
SELECT ringshard.set_node_weight('a', 0.125, 'weighted');
SELECT ringshard.set_node_weight('b', 0.375, 'weighted');
SELECT node, weight, points FROM ringshard.ring_balance('weighted');

-- adding a fourth node moves only keys to it, about a quarter of them
CREATE TEMP TABLE before AS
  SELECT 'key-' || g AS key, shard_for('key-' || g) AS owner FROM generate_series(1, 20000) g;
SELECT ringshard.add_node('shard-bandung-04');
SELECT count(*) FILTER (WHERE shard_for(key) <> owner AND shard_for(key) <> 'shard-bandung-04') AS moved_elsewhere,
       round(avg((shard_for(key) <> owner)::int), 2) AS moved_fraction
  FROM before;

-- replicas_for keeps the arrays of the replica sets it has seen per call
-- site (a memo; it stops itself when most sets are new, on rings of many
-- nodes).  Every row of one statement agrees with a fresh call site per key
-- (EXECUTE plans each call anew, so nothing is remembered), on a ring of few
-- nodes (the memo stays on), of 40 nodes (it stops after its trial rows),
-- and with the ring changing from row to row.
CREATE FUNCTION fresh_replicas(key text, ring text) RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE result text[];
BEGIN
  EXECUTE 'SELECT replicas_for($1, $2)' INTO result USING key, ring;
  RETURN result;
END $$;
SELECT ringshard.create_ring('forty', vnodes => 16, replication_factor => 3);
SELECT count(ringshard.add_node('f' || g, ring => 'forty')) FROM generate_series(1, 40) g;
WITH rows AS (
  SELECT 'key-' || g AS key, g,
         CASE WHEN g % 3 = 0 THEN 'weighted' WHEN g % 3 = 1 THEN 'default' ELSE 'forty' END AS mixed
    FROM generate_series(1, 3000) g)
SELECT count(*) FILTER (WHERE replicas_for(key) IS DISTINCT FROM fresh_replicas(key, 'default')) AS default_differs,
       count(*) FILTER (WHERE replicas_for(key, 'forty') IS DISTINCT FROM fresh_replicas(key, 'forty')) AS forty_differs,
       count(*) FILTER (WHERE replicas_for(key, mixed) IS DISTINCT FROM fresh_replicas(key, mixed)) AS mixed_differs,
       count(DISTINCT replicas_for(key)) AS default_sets,
       count(DISTINCT replicas_for(key, 'forty')) AS forty_sets
  FROM rows;
-- the arrays, byte for byte (record image equality compares the datums'
-- bytes, padding included), equal those of the previews' general array
-- builder, with node names shorter and longer than the 16-byte chunk that
-- replicas_for copies short names in
SELECT ringshard.create_ring('mixed_names', vnodes => 8, replication_factor => 3);
SELECT count(ringshard.add_node(n, ring => 'mixed_names'))
  FROM unnest(ARRAY['a', 'bb', 'node-twelve', 'exactly-12-b', 'a-name-of-seventeen',
                    'a-rather-long-node-name-of-forty-one-bytes']) AS n;
CREATE TYPE pg_temp.one_array AS (a text[]);
SELECT count(*) FILTER (WHERE NOT (ROW(replicas_for(key, 'mixed_names'))::pg_temp.one_array *=
                                   ROW(ringshard.proposed_replicas(key, 'mixed_names', 'set_weight', 'a', 1))::pg_temp.one_array)) AS image_differs,
       count(*) FILTER (WHERE NOT (ROW(replicas_for(key, 'mixed_names', 2))::pg_temp.one_array *=
                                   ROW((ringshard.proposed_replicas(key, 'mixed_names', 'set_weight', 'a', 1))[1:2])::pg_temp.one_array)) AS pair_image_differs,
       count(DISTINCT replicas_for(key, 'mixed_names')) AS sets
  FROM (SELECT 'key-' || g AS key FROM generate_series(1, 3000) g) AS k;
-- a ring name held in a PL/pgSQL variable changes between calls of the same
-- expression (PL/pgSQL keeps it, and its per-call-site state, for the whole
-- transaction): each call routes on the ring it names
CREATE FUNCTION route_via_variable(key text, ring text) RETURNS text
LANGUAGE plpgsql AS $$ BEGIN RETURN shard_for(key, ring) || ' ' || replicas_for(key, ring)::text; END $$;
CREATE FUNCTION route_in_loop(key text, rings text[]) RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE r text; answers text[] := '{}';
BEGIN
  FOREACH r IN ARRAY rings LOOP
    answers := answers || (shard_for(key, r) || ' ' || replicas_for(key, r)::text);
  END LOOP;
  RETURN answers;
END $$;
SELECT count(*) FILTER (WHERE route_via_variable(key, ring) IS DISTINCT FROM
                              shard_for(key, ring) || ' ' || replicas_for(key, ring)::text) AS variable_differs,
       count(DISTINCT ring) AS rings
  FROM (SELECT 'key-' || g AS key, (ARRAY['default', 'forty', 'weighted', 'mixed_names'])[1 + g % 4] AS ring
          FROM generate_series(1, 400) g) AS k;
SELECT route_in_loop('key-7', ARRAY['default', 'forty', 'default', 'weighted']) =
       ARRAY[shard_for('key-7', 'default') || ' ' || replicas_for('key-7', 'default')::text,
             shard_for('key-7', 'forty') || ' ' || replicas_for('key-7', 'forty')::text,
             shard_for('key-7', 'default') || ' ' || replicas_for('key-7', 'default')::text,
             shard_for('key-7', 'weighted') || ' ' || replicas_for('key-7', 'weighted')::text] AS loop_routes_each_ring;
DROP FUNCTION route_via_variable(text, text);
DROP FUNCTION route_in_loop(text, text[]);
-- a topology change between statements is seen by the next statement
SELECT ringshard.remove_node('shard-bandung-04');
SELECT count(*) FILTER (WHERE replicas_for('key-' || g) IS DISTINCT FROM fresh_replicas('key-' || g, 'default')) AS differs_after_change,
       count(*) FILTER (WHERE 'shard-bandung-04' = ANY (replicas_for('key-' || g))) AS removed_node_named
  FROM generate_series(1, 2000) g;
DROP FUNCTION fresh_replicas(text, text);

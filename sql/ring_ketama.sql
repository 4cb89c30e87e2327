-- Every file starts from a fresh extension: the suite shares one database.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS ringshard CASCADE;
CREATE EXTENSION ringshard;
RESET client_min_messages;
-- docs/routing.md §4 and §6: libketama-compatible rings.
SELECT ringshard.create_ring('memcached', algorithm => 'ketama');
SELECT ringshard.add_node('10.0.0.1:11211', ring => 'memcached');
SELECT ringshard.add_node('10.0.0.2:11211', ring => 'memcached');
SELECT ringshard.add_node('10.0.0.3:11211', ring => 'memcached', weight => 2);

-- 480 points: 30, 30 and 60 labels of 4 points each
SELECT count(*) AS points FROM ringshard.ring_points('memcached');
SELECT node, weight, points FROM ringshard.ring_balance('memcached');

SELECT key, shard_for(key, 'memcached') AS owner
  FROM (VALUES ('foo'), ('bar'), ('key-1'), ('3201012345670001')) AS v(key);

SELECT count(*) AS disagreements
  FROM (VALUES ('foo', '10.0.0.3:11211'), ('bar', '10.0.0.1:11211'),
               ('key-1', '10.0.0.3:11211'), ('3201012345670001', '10.0.0.1:11211')) AS v(key, owner)
 WHERE shard_for(key, 'memcached') <> owner;

-- ketama tokens live in 0 .. 2^32-1; shares add up to the whole ring
SELECT max(token) < 4294967296::ringtoken AS tokens_32_bit FROM ringshard.ring_points('memcached');
SELECT sum(owned_tokens) AS owned, sum(owned_tokens) = 4294967296 AS whole_ring
  FROM ringshard.ring_balance('memcached');

-- a key routes to the first point >= its MD5 hash, wrapping
WITH hashes AS (
  SELECT key,
         ('x' || substr(md5(key), 7, 2) || substr(md5(key), 5, 2) || substr(md5(key), 3, 2)
               || substr(md5(key), 1, 2))::bit(32)::bigint AS hash
    FROM (VALUES ('foo'), ('bar'), ('key-1'), ('3201012345670001')) AS v(key))
SELECT key, hash FROM hashes;

WITH hashes AS (
  SELECT 'k' || g AS key,
         ('x' || substr(md5('k' || g), 7, 2) || substr(md5('k' || g), 5, 2) || substr(md5('k' || g), 3, 2)
               || substr(md5('k' || g), 1, 2))::bit(32)::bigint AS hash
    FROM generate_series(1, 1000) g),
     expected AS (
  SELECT key, coalesce((SELECT node FROM ringshard.ring_points('memcached') p
                         WHERE p.token >= hash::ringtoken ORDER BY p.token LIMIT 1),
                       (SELECT node FROM ringshard.ring_points('memcached') p ORDER BY p.token LIMIT 1)) AS owner
    FROM hashes)
SELECT count(*) FILTER (WHERE shard_for(key, 'memcached') <> owner) AS disagreements FROM expected;

-- replicas walk the ketama ring as they do the murmur3 ring
SELECT replicas_for('foo', 'memcached', 3) AS replicas;

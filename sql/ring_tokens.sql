-- Explicit tokens (docs/routing.md §8) and their allocation: every vector of
-- §8, set_node_tokens and its refusals, allocate_tokens (deterministic,
-- changes nothing, existing tokens never move), add_node(..., tokens => n),
-- the previews of a join with allocated tokens, and moving a ring from
-- labelled vnodes to allocated tokens node by node.

-- §8: a holds 4611686018427387904 and 13835058055282163712, b holds
-- 9223372036854775808, c has weight 1 and V = 4 (its points are four of the
-- weighted ring's of §6).  7 points.
SELECT ringshard.create_ring('tok', 4, 2);
SELECT ringshard.add_node(n, NULL, 'tok') FROM unnest(ARRAY['a', 'b', 'c']) n;
SELECT ringshard.set_node_tokens('a', '{13835058055282163712, 4611686018427387904}', 'tok');
SELECT ringshard.set_node_tokens('b', '{9223372036854775808}', 'tok');
SELECT * FROM ringshard.ring_points('tok');
SELECT k AS key, shard_for(k, 'tok') AS owner, array_to_string(replicas_for(k, 'tok'), ', ') AS r2
  FROM unnest(ARRAY['3201012345670001', '3578021122330002', '3171059988770004', 'key-2', 'key-3', 'key-5', 'key-6']) k;
SELECT node, weight, points, explicit_tokens FROM ringshard.ring_balance('tok');
-- the weight does not place explicit tokens
SELECT ringshard.set_node_weight('a', 3, 'tok');
SELECT count(*) AS points FROM ringshard.ring_points('tok') WHERE node = 'a';
-- NULL gives a node its labelled vnodes back
SELECT ringshard.set_node_tokens('a', NULL, 'tok');
SELECT count(*) AS labelled_points FROM ringshard.ring_points('tok') WHERE node = 'a';

-- Refusals: each names what is wrong, and changes nothing.
SELECT ringshard.set_node_tokens('b', '{1, 2, 1}', 'tok');
SELECT ringshard.set_node_tokens('b', '{1, NULL}', 'tok');
SELECT ringshard.set_node_tokens('b', '{}', 'tok');
SELECT ringshard.set_node_tokens('b', '{{1, 2}, {3, 4}}', 'tok');
SELECT ringshard.set_node_tokens('b', ARRAY(SELECT g::ringtoken FROM generate_series(1, 65537) g), 'tok');
SELECT ringshard.set_node_tokens('nobody', '{1}', 'tok');
SELECT ringshard.set_node_tokens('b', '{-1}', 'tok');
SELECT ringshard.allocate_tokens('x', 0, 'tok');
SELECT ringshard.allocate_tokens('x', 65537, 'tok');
\set VERBOSITY terse
SELECT ringshard.allocate_tokens('x', 4, 'no-such-ring');
\set VERBOSITY default
SELECT ringshard.allocate_tokens('', 4, 'tok');
SELECT ringshard.add_node('x', NULL, 'tok', tokens => 0);
SELECT ringshard.create_ring('memc2', algorithm => 'ketama');
SELECT ringshard.add_node('m1', NULL, 'memc2');
SELECT ringshard.set_node_tokens('m1', '{1}', 'memc2');
SELECT ringshard.allocate_tokens('m1', 4, 'memc2');
SELECT ringshard.add_node('m2', NULL, 'memc2', tokens => 4);
SELECT * FROM ringshard.preview_set_tokens('m1', '{1}', 'memc2');
UPDATE ringshard.ring_members SET tokens = '{5, 5}' WHERE ring_name = 'tok' AND node_name = 'b';
SELECT tokens FROM ringshard.ring_members WHERE ring_name = 'tok' AND node_name = 'b';
SELECT count(*) AS not_added FROM ringshard.ring_members WHERE node_name IN ('x', 'm2');
-- a token another node holds too is allowed (ties sort by node name) and said
SELECT ringshard.set_node_tokens('a', '{9223372036854775808}', 'tok');
SELECT node, points, owned_tokens FROM ringshard.ring_balance('tok') WHERE node IN ('a', 'b');

-- allocate_tokens: deterministic, ascending, distinct from every point, and
-- it changes nothing.
SELECT ringshard.create_ring('alloc', 256, 3);
SELECT count(*) FROM (SELECT ringshard.add_node('node-' || i, NULL, 'alloc') FROM generate_series(1, 6) i) x;
CREATE TEMP TABLE catalog_before AS SELECT * FROM ringshard.ring_members;
SELECT ringshard.allocate_tokens('node-7', 16, 'alloc') = ringshard.allocate_tokens('node-7', 16, 'alloc') AS deterministic,
       cardinality(ringshard.allocate_tokens('node-7', 16, 'alloc')) AS tokens;
SELECT bool_and(t > lag) AS ascending
  FROM (SELECT t, lag(t) OVER (ORDER BY o) FROM unnest(ringshard.allocate_tokens('node-7', 16, 'alloc')) WITH ORDINALITY u(t, o)) s
 WHERE lag IS NOT NULL;
SELECT count(*) AS equal_to_a_point
  FROM unnest(ringshard.allocate_tokens('node-7', 16, 'alloc')) t JOIN ringshard.ring_points('alloc') p ON p.token = t;
SELECT count(*) AS catalog_changed
  FROM (SELECT * FROM ringshard.ring_members EXCEPT SELECT * FROM catalog_before) x;

-- A join with allocated tokens moves exactly the keys its points capture:
-- every owner move goes to the new node, and they add up to its share.
CREATE TEMP TABLE join_preview AS SELECT * FROM ringshard.preview_add_node('node-7', 'alloc', tokens => 16);
SELECT count(*) AS ranges, count(*) FILTER (WHERE to_node <> 'node-7') AS to_others FROM join_preview;
CREATE TEMP TABLE join_keys AS
SELECT 'k' || i AS k, replicas_for('k' || i, 'alloc') AS before,
       ringshard.proposed_replicas('k' || i, 'alloc', 'add', 'node-7', token_count => 16) AS proposed
  FROM generate_series(1, 3000) i;
CREATE TEMP TABLE join_copies AS SELECT * FROM ringshard.preview_add_node_copies('node-7', 'alloc', tokens => 16);
SELECT expected = ringshard.allocate_tokens('node-7', 16, 'alloc') AS allocated_as_previewed
  FROM (SELECT ringshard.allocate_tokens('node-7', 16, 'alloc') AS expected) e;
CREATE TEMP TABLE points_before AS SELECT * FROM ringshard.ring_points('alloc');
SELECT ringshard.add_node('node-7', NULL, 'alloc', tokens => 16);
SELECT tokens = ringshard.allocate_tokens('node-7', 16, 'alloc') AS member_allocates_alike
  FROM ringshard.ring_members WHERE ring_name = 'alloc' AND node_name = 'node-7';
-- no existing point moved
SELECT count(*) AS points_moved
  FROM (SELECT * FROM points_before EXCEPT SELECT * FROM ringshard.ring_points('alloc') WHERE node <> 'node-7') x;
SELECT abs((SELECT sum(fraction) FROM join_preview) - share) < 1e-12 AS moves_are_its_share
  FROM ringshard.ring_balance('alloc') WHERE node = 'node-7';
SELECT count(*) FILTER (WHERE proposed IS DISTINCT FROM replicas_for(k, 'alloc')) AS proposed_wrong,
       count(*) FILTER (WHERE before[1] <> (replicas_for(k, 'alloc'))[1] AND (replicas_for(k, 'alloc'))[1] <> 'node-7')
           AS owners_moved_elsewhere
  FROM join_keys;
SELECT count(*) FILTER (WHERE node = 'node-7' AND change = 'gains') > 0 AS gains,
       count(*) FILTER (WHERE node <> 'node-7' AND change = 'gains') AS others_gain
  FROM join_copies;
SELECT node, points, explicit_tokens, round(ratio::numeric, 2) AS ratio FROM ringshard.ring_balance('alloc') WHERE node = 'node-7';

-- a node joining in a zone with allocated tokens: previewed as add_node does it
SELECT ringshard.set_node_zone('node-' || i, CASE WHEN i % 2 = 0 THEN 'even' ELSE 'odd' END, 'alloc')
  FROM generate_series(1, 7) i;
CREATE TEMP TABLE zoned_keys AS
SELECT 'k' || i AS k,
       ringshard.proposed_replicas('k' || i, 'alloc', 'add', 'node-8', 2, 'third', NULL, 8) AS proposed
  FROM generate_series(1, 2000) i;
SELECT ringshard.add_node('node-8', NULL, 'alloc', 2, 8, 'third');
SELECT count(*) FILTER (WHERE proposed IS DISTINCT FROM replicas_for(k, 'alloc')) AS proposed_wrong FROM zoned_keys;
SELECT zone, nodes, min_copies, max_copies FROM ringshard.ring_zones('alloc');
-- three zones and R = 3: every key has one copy in each
SELECT count(*) AS keys_not_spanning
  FROM generate_series(1, 2000) i
 WHERE (SELECT count(DISTINCT m.zone) FROM unnest(replicas_for('k' || i, 'alloc')) x(n)
          JOIN ringshard.ring_members m ON m.ring_name = 'alloc' AND m.node_name = x.n) <> 3;

-- Migration: a ring on labelled vnodes moved to allocated tokens node by
-- node.  Each step is previewed, then made; the preview says exactly what
-- moves, and at the end every node holds 16 tokens and the ring is even.
SELECT ringshard.create_ring('migrate', 256, 2);
SELECT count(*) FROM (SELECT ringshard.add_node('shard-' || i, NULL, 'migrate') FROM generate_series(1, 5) i) x;
CREATE TABLE migrating (k text PRIMARY KEY);
INSERT INTO migrating SELECT 'k' || i FROM generate_series(1, 3000) i;
SELECT ringshard.distribute_table('migrating', 'k', 'migrate');
CREATE TEMP TABLE migration_log (step integer, node text, planned bigint, moved bigint, preview_fraction float8);
DO $$
DECLARE
	i integer;
	chosen ringtoken[];
	planned bigint;
	moved bigint;
BEGIN
	FOR i IN 1..5 LOOP
		chosen := ringshard.allocate_tokens('shard-' || i, 16, 'migrate');
		CREATE TEMP TABLE step_plan AS
			SELECT * FROM ringshard.plan_table_moves('migrating', 'set_tokens', 'shard-' || i, tokens => chosen);
		SELECT count(*) INTO planned FROM step_plan;
		CREATE TEMP TABLE step_before AS SELECT k, replicas_for(k, 'migrate') AS r FROM migrating;
		PERFORM ringshard.set_node_tokens('shard-' || i, chosen, 'migrate');
		SELECT count(*) INTO moved FROM step_before b WHERE b.r IS DISTINCT FROM replicas_for(b.k, 'migrate');
		-- every planned row is a moved one, with the replica set planned
		IF EXISTS (SELECT FROM step_plan p WHERE p.to_replicas IS DISTINCT FROM replicas_for(p.key, 'migrate')) THEN
			RAISE EXCEPTION 'step %: a planned row went elsewhere', i;
		END IF;
		INSERT INTO migration_log
		SELECT i, 'shard-' || i, planned, moved, NULL;
		DROP TABLE step_plan;
		DROP TABLE step_before;
	END LOOP;
END
$$;
SELECT step, node, planned = moved AS plan_exact, moved > 0 AS moved_some FROM migration_log ORDER BY step;
SELECT count(*) FILTER (WHERE explicit_tokens) AS nodes_on_tokens, min(points) AS min_points, max(points) AS max_points,
       max(ratio) < 1.1 AS owned_even, max(copy_ratio) < 1.15 AS copies_even
  FROM ringshard.ring_balance('migrate');

-- compare_schemes: 16 allocated tokens per node move about the ideal share
SELECT scheme, abs(moved_fraction - ideal_fraction) < 0.02 AS near_ideal, max_over_mean < 1.1 AS balanced
  FROM ringshard.compare_schemes(10, 11, 50000) WHERE scheme IN ('ring', 'ring_tokens');

-- Leave the catalog as the suite found it.
SELECT ringshard.undistribute_table('migrating');
DROP TABLE migrating;
SELECT ringshard.drop_ring(r) FROM unnest(ARRAY['tok', 'memc2', 'alloc', 'migrate']) r;

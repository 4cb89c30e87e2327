-- Zones (docs/routing.md §7): replica sets take one node per zone first.
-- Every vector of §7, the administration function and its refusals, a zone
-- change as a topology change (previews, row plans, the balance report).

-- §7: 16 vnodes per node; jkt-1, jkt-2 in jakarta, sby-1, sby-2 in
-- surabaya, mks-1 in makassar, spare-1 without a zone.  96 points.
SELECT ringshard.create_ring('dc', 16);
SELECT ringshard.add_node(n, NULL, 'dc', zone => z)
  FROM (VALUES ('jkt-1', 'jakarta'), ('jkt-2', 'jakarta'), ('sby-1', 'surabaya'),
               ('sby-2', 'surabaya'), ('mks-1', 'makassar'), ('spare-1', NULL)) v(n, z);
SELECT ringshard.validate_ring('dc') AS points;
SELECT k AS key, ring_token(k) AS token, shard_for(k, 'dc') AS owner,
       array_to_string(replicas_for(k, 'dc', 2), ', ') AS r2,
       array_to_string(replicas_for(k, 'dc', 3), ', ') AS r3,
       array_to_string(replicas_for(k, 'dc', 5), ', ') AS r5
  FROM unnest(ARRAY['3201012345670001', '3578021122330002', '7371034455660003', '3171059988770004',
                    'key-1', 'key-3', 'key-5', 'key-6']) k;
-- typed keys route by their canonical bytes, zones or not
SELECT replicas_for(3201012345670001::bigint, 'dc', 3) = replicas_for('3201012345670001', 'dc', 3) AS bigint_alike;
-- the ring's own replication factor: set it to 3
SELECT ringshard.set_replication_factor('dc', 3);
SELECT replicas_for('3201012345670001', 'dc') AS at_r3, read_node_for('3201012345670001', 'dc') = ANY (replicas_for('3201012345670001', 'dc')) AS reads_a_replica;

-- The same ring without zones: two copies in one data centre (§7's last line).
SELECT ringshard.create_ring('flat', 16);
SELECT count(*) FROM (SELECT ringshard.add_node(n, NULL, 'flat')
                        FROM unnest(ARRAY['jkt-1', 'jkt-2', 'sby-1', 'sby-2', 'mks-1', 'spare-1']) n) x;
SELECT replicas_for('3201012345670001', 'flat', 3) AS without_zones;
-- zones never move a point or an owner
SELECT count(*) AS points_differ
  FROM ringshard.ring_points('dc') a FULL JOIN ringshard.ring_points('flat') b USING (token, node, vnode)
 WHERE a.token IS NULL OR b.token IS NULL;

-- Every replica set spans min(R, zones) zones: 4 zones (spare-1 its own).
SELECT r, count(*) AS keys,
       count(*) FILTER (WHERE zones = least(r, 4)) AS spanning
  FROM (SELECT r, (SELECT count(DISTINCT coalesce(m.zone, m.node_name))
                     FROM unnest(replicas_for('k' || i, 'dc', r)) x(n)
                     JOIN ringshard.ring_members m ON m.ring_name = 'dc' AND m.node_name = x.n) AS zones
          FROM generate_series(1, 2000) i, generate_series(1, 6) r) s
 GROUP BY r ORDER BY r;
-- without zones, R = 3 leaves keys with two copies in one data centre
SELECT count(*) FILTER (WHERE zones < 3) > 0 AS some_keys_in_two_zones
  FROM (SELECT (SELECT count(DISTINCT d.zone)
                  FROM unnest(replicas_for('k' || i, 'flat', 3)) x(n)
                  JOIN ringshard.ring_members d ON d.ring_name = 'dc' AND d.node_name = x.n) AS zones
          FROM generate_series(1, 2000) i) s;

-- The views show zones.
SELECT node, zone, points FROM ringshard.ring_balance('dc') ORDER BY node COLLATE "C";
SELECT zone, nodes, points, min_copies, max_copies FROM ringshard.ring_zones('dc');
SELECT node, zone, points, min_copies, max_copies FROM ringshard.ring_balance_report('dc');
-- shares and copies add up: each zone's share is its nodes' shares
SELECT round(sum(share)::numeric, 12) AS shares, round(sum(copy_share)::numeric, 12) AS copies
  FROM ringshard.ring_zones('dc');
SELECT bool_and(abs(z.share - (SELECT sum(b.share) FROM ringshard.ring_balance('dc') b WHERE b.node = ANY (z.nodes))) < 1e-12)
       AS zone_share_is_its_nodes
  FROM ringshard.ring_zones('dc') z;

-- A zone change is a topology change: its copy preview says exactly which
-- keys change replica set, and how; it moves no owner.
SELECT count(*) AS owner_moves FROM ringshard.preview_change('dc', 'set_zone', 'spare-1', 1, false, 'jakarta');
CREATE TEMP TABLE zone_keys AS
SELECT 'k' || i AS k, ring_token('k' || i) AS t, replicas_for('k' || i, 'dc') AS before,
       ringshard.proposed_replicas('k' || i, 'dc', 'set_zone', 'spare-1', 1, 'jakarta') AS proposed
  FROM generate_series(1, 3000) i;
CREATE TEMP TABLE zone_preview AS SELECT * FROM ringshard.preview_set_zone_copies('spare-1', 'jakarta', 'dc');
SELECT count(*) > 0 AS changes, bool_and(change IN ('gains', 'loses')) AS kinds FROM zone_preview;
SELECT ringshard.set_node_zone('spare-1', 'jakarta', 'dc');
ALTER TABLE zone_keys ADD COLUMN after text[];
UPDATE zone_keys SET after = replicas_for(k, 'dc');
SELECT count(*) FILTER (WHERE proposed IS DISTINCT FROM after) AS proposed_wrong,
       count(*) FILTER (WHERE before[1] <> after[1]) AS owners_moved,
       count(*) FILTER (WHERE before <> after) > 0 AS some_sets_changed
  FROM zone_keys;
-- per key and node: it gains (loses) a copy iff the preview has a range saying so
SELECT count(*) AS preview_wrong
  FROM zone_keys z, (SELECT DISTINCT node_name FROM ringshard.ring_members WHERE ring_name = 'dc') n(node)
 WHERE (n.node = ANY (z.after) AND NOT n.node = ANY (z.before)) <>
       EXISTS (SELECT FROM zone_preview p WHERE p.node = n.node AND p.change = 'gains'
                  AND CASE WHEN p.range_start < p.range_end THEN z.t > p.range_start AND z.t <= p.range_end
                           ELSE z.t > p.range_start OR z.t <= p.range_end END)
    OR (n.node = ANY (z.before) AND NOT n.node = ANY (z.after)) <>
       EXISTS (SELECT FROM zone_preview p WHERE p.node = n.node AND p.change = 'loses'
                  AND CASE WHEN p.range_start < p.range_end THEN z.t > p.range_start AND z.t <= p.range_end
                           ELSE z.t > p.range_start OR z.t <= p.range_end END);
-- five nodes in three zones now: R = 3 still spans every zone
SELECT count(*) AS keys_not_spanning
  FROM generate_series(1, 2000) i
 WHERE (SELECT count(DISTINCT m.zone) FROM unnest(replicas_for('k' || i, 'dc')) x(n)
          JOIN ringshard.ring_members m ON m.ring_name = 'dc' AND m.node_name = x.n) <> 3;

-- NULL clears a zone; it was in jakarta
SELECT ringshard.set_node_zone('spare-1', NULL, 'dc');
SELECT zone IS NULL AS cleared FROM ringshard.ring_members WHERE ring_name = 'dc' AND node_name = 'spare-1';
SELECT replicas_for('7371034455660003', 'dc') AS as_in_the_vector;

-- Row plans: an annotated table's rows whose replica set a zone change alters.
CREATE TABLE citizens_dc (nik text PRIMARY KEY);
INSERT INTO citizens_dc SELECT 'k' || i FROM generate_series(1, 3000) i;
SELECT ringshard.distribute_table('citizens_dc', 'nik', 'dc');
SELECT count(*) AS planned,
       count(*) = (SELECT count(*) FROM zone_keys WHERE before IS DISTINCT FROM proposed) AS as_the_preview,
       count(*) FILTER (WHERE from_node <> to_node) AS owner_changes
  FROM ringshard.plan_table_moves('citizens_dc', 'set_zone', 'spare-1', zone => 'jakarta');
-- the summary counts copies: every node a row gains, as rebalance() copies it
SELECT sum(rows) AS summary_copies,
       sum(rows) = (SELECT sum(cardinality(ARRAY(SELECT unnest(m.to_replicas) EXCEPT SELECT unnest(m.from_replicas))))
                      FROM ringshard.plan_table_moves('citizens_dc', 'set_zone', 'spare-1', zone => 'jakarta') m) AS every_gain
  FROM ringshard.plan_table_summary('citizens_dc', 'set_zone', 'spare-1', zone => 'jakarta');
SELECT table_name, node, zone FROM ringshard.table_nodes WHERE table_name = 'citizens_dc'::regclass ORDER BY node COLLATE "C";

-- Refusals: each names what is wrong, and changes nothing.
SELECT ringshard.set_node_zone('nobody', 'jakarta', 'dc');
SELECT ringshard.set_node_zone('jkt-1', '', 'dc');
SELECT ringshard.set_node_zone('jkt-1', repeat('z', 1025), 'dc');
\set VERBOSITY terse
SELECT ringshard.set_node_zone('jkt-1', 'jakarta', 'no-such-ring');
\set VERBOSITY default
SELECT ringshard.set_node_zone(NULL, 'jakarta', 'dc');
SELECT ringshard.add_node('extra', NULL, 'dc', zone => '');
SELECT ringshard.preview_set_zone_copies('jkt-1', '', 'dc');
SELECT * FROM ringshard.preview_set_zone_copies('nobody', 'x', 'dc');
SELECT ringshard.create_ring('memc', algorithm => 'ketama');
SELECT ringshard.add_node('m1', NULL, 'memc');
SELECT ringshard.set_node_zone('m1', 'rack-1', 'memc');
SELECT ringshard.add_node('m2', NULL, 'memc', zone => 'rack-1');
SELECT * FROM ringshard.preview_set_zone_copies('m1', 'rack-1', 'memc');
-- the catalog's own checks still apply to direct DML
UPDATE ringshard.ring_members SET zone = '' WHERE ring_name = 'dc' AND node_name = 'jkt-1';
SELECT count(*) AS unchanged FROM ringshard.ring_members
 WHERE ring_name = 'dc' AND node_name = 'jkt-1' AND zone = 'jakarta';
SELECT count(*) AS m2_not_added FROM ringshard.ring_members WHERE node_name IN ('m2', 'extra');

-- Leave the catalog as the suite found it.
SELECT ringshard.undistribute_table('citizens_dc');
DROP TABLE citizens_dc;
SELECT ringshard.drop_ring(r) FROM unnest(ARRAY['dc', 'flat', 'memc']) r;

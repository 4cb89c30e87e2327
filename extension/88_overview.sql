-- Overview: what is distributed, how, and on which nodes, from the catalog
-- alone (no node is asked; rows per node are counted by node_table_rows()
-- and table_balance_report()).  Readable by everyone, like the catalog
-- tables they come from; node addresses are not shown.

-- Nodes of each table's ring or map now, with their share in per cent (to a
-- tenth): a ring member's share of the ring's tokens (the keys it holds the
-- first copy of), a map holder's partitions.
CREATE VIEW ringshard.table_nodes AS
SELECT d.table_name,
       m.node_name AS node,
       n.is_up,
       'ring member' AS role,
       m.weight,
       round((b.share * 100)::numeric, 1) AS key_share_pct,
       NULL::integer AS partitions,
       (SELECT count(*) FROM ringshard.write_queue q WHERE q.table_name = d.table_name AND q.node_name = m.node_name)
           AS queued_writes,
       (SELECT count(*) FROM ringshard.dead_letters l WHERE l.table_name = d.table_name AND l.node_name = m.node_name)
           AS dead_letters,
       m.zone
  FROM ringshard.distributed_tables d
  JOIN ringshard.ring_members m ON m.ring_name = d.ring_name
  JOIN ringshard.nodes n ON n.node_name = m.node_name
  LEFT JOIN LATERAL ringshard.ring_balance(d.ring_name) b ON b.node = m.node_name
UNION ALL
SELECT d.table_name,
       h.node_name,
       n.is_up,
       'partition holder',
       NULL::float8,
       round(h.partitions / 2.56, 1),
       h.partitions,
       (SELECT count(*) FROM ringshard.write_queue q WHERE q.table_name = d.table_name AND q.node_name = h.node_name),
       (SELECT count(*) FROM ringshard.dead_letters l WHERE l.table_name = d.table_name AND l.node_name = h.node_name),
       NULL::text
  FROM ringshard.distributed_tables d
  JOIN (SELECT a.map_name, a.node_name, sum(a.partition_end - a.partition_start + 1)::integer AS partitions
          FROM ringshard.partition_assignments a GROUP BY a.map_name, a.node_name) h ON h.map_name = d.map_name
  JOIN ringshard.nodes n ON n.node_name = h.node_name;
COMMENT ON VIEW ringshard.table_nodes IS
	'per annotated table and node of its ring or map: up or down, weight, share of the keys (ring: of the tokens it owns; map: of the 256 partitions it holds), partitions held, writes queued for it, dead letters, and its zone on the ring';

CREATE VIEW ringshard.table_overview AS
SELECT d.table_name,
       CASE WHEN c.relkind = 'f' AND ft.ftserver = (SELECT s.oid FROM pg_catalog.pg_foreign_server s
                                                      WHERE s.srvname = 'ringshard_cluster')
            THEN 'distributed' ELSE 'annotated' END AS kind,
       d.key_column,
       CASE WHEN d.ring_name IS NOT NULL THEN format('ring "%s"', d.ring_name)
            ELSE format('partition map "%s"', d.map_name) END AS placed_by,
       CASE WHEN d.keyspace IS NOT NULL THEN quote_literal(d.keyspace)
            WHEN d.keyspace_column IS NOT NULL THEN format('column %I', d.keyspace_column) END AS keyspace,
       CASE WHEN d.ring_name IS NOT NULL THEN least(r.replication_factor, nodes.total)::integer
            ELSE (SELECT min(holders.n)::integer FROM (
                      SELECT count(a.node_name) AS n
                        FROM generate_series(0, 255) p
                        LEFT JOIN ringshard.partition_assignments a
                               ON a.map_name = d.map_name AND p BETWEEN a.partition_start AND a.partition_end
                       GROUP BY p) holders) END AS copies,
       nodes.total AS nodes,
       nodes.down AS nodes_down,
       nodes.queued AS queued_writes,
       nodes.dead AS dead_letters,
       CASE WHEN c.relkind <> 'f' THEN NULL
            WHEN EXISTS (SELECT FROM ringshard.rebalance_progress g WHERE g.table_name = d.table_name) THEN 'rebalancing'
            WHEN pl.snapshot IS NULL THEN NULL
            WHEN layout.stored = layout.now
            THEN 'in place'
            ELSE 'needs rebalance' END AS layout,
       pg_catalog.pg_get_userbyid(c.relowner) AS owner
  FROM ringshard.distributed_tables d
  JOIN pg_catalog.pg_class c ON c.oid = d.table_name
  LEFT JOIN pg_catalog.pg_foreign_table ft ON ft.ftrelid = c.oid
  LEFT JOIN ringshard.rings r ON r.ring_name = d.ring_name
  LEFT JOIN ringshard.placements pl ON pl.table_name = d.table_name
  LEFT JOIN LATERAL (SELECT count(*)::integer AS total,
                            coalesce(array_agg(t.node ORDER BY t.node COLLATE "C") FILTER (WHERE NOT t.is_up), '{}') AS down,
                            coalesce(sum(t.queued_writes), 0)::bigint AS queued,
                            coalesce(sum(t.dead_letters), 0)::bigint AS dead
                       FROM ringshard.table_nodes t WHERE t.table_name = d.table_name) nodes ON true
  -- The layout the rows were put in (the placement snapshot) and the one the
  -- topology gives now, each reduced to what decides where rows live, in one
  -- order, so that they are equal exactly when they lay rows out alike.
  LEFT JOIN LATERAL (
       SELECT CASE WHEN d.ring_name IS NOT NULL THEN
                  jsonb_build_object('algorithm', pl.snapshot->>'algorithm', 'vnodes', (pl.snapshot->>'vnodes')::integer,
                                     'replication_factor', (pl.snapshot->>'replication_factor')::integer,
                                     'members', (SELECT coalesce(jsonb_agg(jsonb_build_array(m->>'node', (m->>'weight')::float8,
                                                                                             m->>'zone', (m->'tokens')::jsonb)
                                                                           ORDER BY m->>'node' COLLATE "C"), '[]')
                                                   FROM json_array_elements(pl.snapshot->'members') m))
              ELSE
                  jsonb_build_object('assignments', (SELECT coalesce(jsonb_agg(jsonb_build_array(a->>'node', (a->>'start')::integer,
                                                                                                 (a->>'end')::integer)
                                                                               ORDER BY a->>'node' COLLATE "C", (a->>'start')::integer), '[]')
                                                       FROM json_array_elements(pl.snapshot->'assignments') a))
              END AS stored,
              CASE WHEN d.ring_name IS NOT NULL THEN
                  jsonb_build_object('algorithm', r.algorithm, 'vnodes', r.vnodes, 'replication_factor', r.replication_factor,
                                     'members', (SELECT coalesce(jsonb_agg(jsonb_build_array(m.node_name, m.weight,
                                                                                             m.zone, to_jsonb(m.tokens))
                                                                           ORDER BY m.node_name COLLATE "C"), '[]')
                                                   FROM ringshard.ring_members m WHERE m.ring_name = d.ring_name))
              ELSE
                  jsonb_build_object('assignments', (SELECT coalesce(jsonb_agg(jsonb_build_array(a.node_name, a.partition_start,
                                                                                                 a.partition_end)
                                                                               ORDER BY a.node_name COLLATE "C", a.partition_start), '[]')
                                                       FROM ringshard.partition_assignments a WHERE a.map_name = d.map_name))
              END AS now) layout ON true;
COMMENT ON VIEW ringshard.table_overview IS
	'one row per annotated table: distributed (rows on the nodes) or annotated (rows here, routed), key column, ring or partition map, keyspace, copies of each row, nodes and those down, queued writes and dead letters, and whether its rows are laid out as the topology says (in place, needs rebalance, rebalancing)';

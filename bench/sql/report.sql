-- bench/sql/report.sql: medians of the SQL benchmark, as tables for people
-- and as "RESULT" lines for bench/run.  psql variables: nsmall, nrebuild,
-- core_build_768, core_build_256000 (ms, from part 2 of the same run),
-- part1file, part3file, resultfile (outputs).
\set ON_ERROR_STOP 1
\pset footer off
\pset null '-'

CREATE TEMP VIEW m AS
SELECT c.id, c.grp, c.nodes, c.key, c.name, c.nrows,
       count(t.ms) AS runs,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY t.ms) AS med,
       min(t.ms) AS lo, max(t.ms) AS hi
  FROM bench.cases c JOIN bench.timings t ON t.case_id = c.id AND t.round > 0
 GROUP BY c.id;

\o :part1file
\qecho '  1a. Over every key: SELECT count(f(k)) FROM bench.keys   (median of the rounds)'
\qecho '      ns/row = median / rows; net = ns/row minus the scan alone (count(k));'
\qecho '      x scan = median / median of count(k); x hashtext%N = median / median of hashtext(k) % N, same N'
SELECT CASE WHEN a.nodes = 0 THEN 'any' ELSE a.nodes::text END AS "ring nodes",
       a.name AS "f(k)",
       round(a.med::numeric, 1) AS "median ms",
       round((100 * (a.hi - a.lo) / a.med)::numeric) || '%' AS "spread (max-min)",
       round((1e6 * a.med / a.nrows)::numeric, 1) AS "ns/row",
       round((1e6 * (a.med - s.med) / a.nrows)::numeric, 1) AS "net ns/row",
       round((a.med / s.med)::numeric, 2) AS "x scan",
       round((a.med / h.med)::numeric, 2) AS "x hashtext%N"
  FROM m a
  JOIN m s ON s.grp = 'all' AND s.key = 'scan'
  LEFT JOIN m h ON h.grp = 'all' AND h.key = 'hashmod' AND h.nodes = a.nodes
 WHERE a.grp = 'all'
 ORDER BY a.nodes, a.id;

\qecho
\qecho '  1b. The hand-written rings are too slow for every key: they and shard_for run over the'
\qecho '      first' :nsmall 'keys (bench.keys_small), ns/row = median / rows, same rounds.'
\qecho '      Hash in both baselines = ring_token(k) (ringshard''s MurmurHash3), points in a'
\qecho '      table (ring text, token ringtoken, node text) with a btree index on (ring, token):'
\qecho '      coalesce((... WHERE token >= ring_token(k) ORDER BY token LIMIT 1), (... ORDER BY token LIMIT 1))'
SELECT CASE WHEN a.nodes = 0 THEN 'any' ELSE a.nodes::text END AS "ring nodes",
       a.name AS "f(k)",
       round(a.med::numeric, 1) AS "median ms",
       round((100 * (a.hi - a.lo) / a.med)::numeric) || '%' AS "spread (max-min)",
       round((1e6 * a.med / a.nrows)::numeric, 1) AS "ns/row",
       round((1e6 * (a.med - s.med) / a.nrows)::numeric, 1) AS "net ns/row",
       round((a.med / f.med)::numeric, 1) AS "x shard_for"
  FROM m a
  JOIN m s ON s.grp = 'small' AND s.key = 'scan'
  LEFT JOIN m f ON f.grp = 'small' AND f.key = 'shard' AND f.nodes = a.nodes
 WHERE a.grp = 'small'
 ORDER BY a.nodes, a.id;

\o :part3file
\qecho '  3. First lookup in a backend after a topology change (ringshard.set_node_weight committed'
\qecho '     in the previous transaction, weight toggled 1 <-> 1.01), medians of' :nrebuild 'changes.'
\qecho '     first = the first shard_for of the next transaction (cache rebuild: catalog read via SPI'
\qecho '     + rs_ring_build + node names); cached = a second shard_for right after it;'
\qecho '     validate_ring = catalog read + build without caching; core build = rs_ring_build alone (part 2)'
SELECT r.ring, CASE r.ring WHEN 'r3' THEN 768 WHEN 'r64' THEN 16384 ELSE 256000 END AS points,
       round(bench.median(array_agg(r.first_ms))::numeric, 3) AS "first ms",
       round(min(r.first_ms)::numeric, 3) || ' .. ' || round(max(r.first_ms)::numeric, 3) AS "first min .. max",
       round(bench.median(array_agg(r.cached_ms))::numeric, 4) AS "cached ms",
       round(bench.median(array_agg(r.validate_ms))::numeric, 3) AS "validate_ring ms",
       round((CASE r.ring WHEN 'r3' THEN :core_build_768 ELSE :core_build_256000 END)::numeric, 3) AS "core build ms",
       round((bench.median(array_agg(r.first_ms)) /
              CASE r.ring WHEN 'r3' THEN :core_build_768 ELSE :core_build_256000 END)::numeric, 2) AS "first / core build"
  FROM bench.rebuilds r GROUP BY r.ring ORDER BY points;

\pset tuples_only on
\pset format unaligned
\o :resultfile
SELECT format('RESULT sql grp=%s nodes=%s key=%s med_ms=%s nsrow=%s runs=%s',
              grp, nodes, key, med, 1e6 * med / nrows, runs) FROM m ORDER BY id;
SELECT format('RESULT raw grp=%s nodes=%s key=%s round=%s nsrow=%s',
              c.grp, c.nodes, c.key, t.round, 1e6 * t.ms / c.nrows)
  FROM bench.cases c JOIN bench.timings t ON t.case_id = c.id AND t.round > 0 ORDER BY c.id, t.round;
SELECT format('RESULT rebuild ring=%s first_ms=%s cached_ms=%s validate_ms=%s', ring,
              bench.median(array_agg(first_ms)), bench.median(array_agg(cached_ms)),
              bench.median(array_agg(validate_ms)))
  FROM bench.rebuilds GROUP BY ring;
\o

-- Every file starts from a fresh extension: the suite shares one database.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS ringshard CASCADE;
CREATE EXTENSION ringshard;
RESET client_min_messages;
-- Seeing a ring: points in order, exact shares, balance.
\set SHOW_CONTEXT never
SELECT ringshard.create_ring('small', vnodes => 2);
SELECT * FROM ringshard.ring_points('small');
SELECT * FROM ringshard.ring_balance('small');
SELECT ringshard.add_node('alpha', ring => 'small');
SELECT ringshard.add_node('beta', ring => 'small');
-- four points; each owns (previous token, its token], the first wraps
SELECT * FROM ringshard.ring_points('small');
SELECT node, points, owned_tokens, round(share::numeric, 6) AS share, ideal_share, round(ratio::numeric, 6) AS ratio
  FROM ringshard.ring_balance('small');
-- owned tokens, from the points by hand
WITH p AS (SELECT token::numeric AS t, node, lag(token::numeric) OVER (ORDER BY token) AS prev FROM ringshard.ring_points('small')),
     spans AS (SELECT node, coalesce(t - prev, t + 18446744073709551616 - (SELECT max(t) FROM p)) AS span FROM p)
SELECT node, sum(span) AS owned_by_hand FROM spans GROUP BY node ORDER BY node;
SELECT sum(owned_tokens) = 18446744073709551616 AS whole_ring FROM ringshard.ring_balance('small');
-- the report: the same shares rounded, the deviation in per cent, and bars
-- (the longer one full, the other in proportion, to the eighth)
SELECT * FROM ringshard.ring_balance_report('small');
SELECT * FROM ringshard.ring_balance_report('no-such-ring');

-- 256 vnodes: shares near 1/N (within 1/sqrt(256) = 6.25 % of ideal, with room)
SELECT ringshard.add_node('n' || g) FROM generate_series(1, 8) g;
SELECT count(*) AS nodes, sum(points) AS points,
       round(sum(share)::numeric, 12) AS total_share,
       max(ratio) < 1.25 AS no_hotspot, min(ratio) > 0.75 AS no_starved
  FROM ringshard.ring_balance();
-- the report rounds exactly the figures of ring_balance()
SELECT count(*) AS nodes,
       count(*) FILTER (WHERE r.points = b.points AND r.share_pct = round((b.share * 100)::numeric, 1)
                          AND r.ideal_pct = round((b.ideal_share * 100)::numeric, 1)
                          AND r.copy_share_pct = round((b.copy_share * 100)::numeric, 1)
                          AND r.deviation_pct = round(((b.ratio - 1) * 100)::numeric, 1)) AS agree,
       count(*) FILTER (WHERE length(r.bar) BETWEEN 17 AND 20) AS bars_near_full
  FROM ringshard.ring_balance_report() r JOIN ringshard.ring_balance() b USING (node);
SELECT node, share_pct, ideal_pct, deviation_pct, bar FROM ringshard.ring_balance_report();
-- a weight of 2 doubles the ideal share, and the bar
SELECT ringshard.set_node_weight('n1', 2);
SELECT node, points, ideal_pct, deviation_pct, bar FROM ringshard.ring_balance_report() WHERE node IN ('n1', 'n2');
SELECT ringshard.set_node_weight('n1', 1);

-- Bars: one character per eighth of the scale's width, to the eighth
SELECT i AS eighths, ringshard.share_bar(i, 16, 2) AS bar, length(ringshard.share_bar(i, 16, 2)) AS chars
  FROM generate_series(0, 16) i;
SELECT ringshard.share_bar(2, 1, 3) AS capped_at_width, ringshard.share_bar(0, 1) AS empty,
       ringshard.share_bar(1, 0) AS no_scale, ringshard.share_bar(NULL, 1) AS null_value;
-- an encoding without the block characters gets '#'
SET client_encoding = 'LATIN1';
SELECT ringshard.share_bar(11, 16, 2) AS latin1_bar;
RESET client_encoding;
SELECT ringshard.ring_points('no-such-ring');
-- every point's token is the token of its label "{node}#vnode#{i}" (§3)
SELECT count(*) AS points, count(*) FILTER (WHERE token <> ring_token(node || '#vnode#' || vnode)) AS mislabelled
  FROM ringshard.ring_points();
-- points are in ring order, ties broken by node name then label
SELECT count(*) AS out_of_order
  FROM (SELECT token, lag(token) OVER () AS prev FROM ringshard.ring_points()) s WHERE token < prev;

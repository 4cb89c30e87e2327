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

-- 256 vnodes: shares near 1/N (within 1/sqrt(256) = 6.25 % of ideal, with room)
SELECT ringshard.add_node('n' || g) FROM generate_series(1, 8) g;
SELECT count(*) AS nodes, sum(points) AS points,
       round(sum(share)::numeric, 12) AS total_share,
       max(ratio) < 1.25 AS no_hotspot, min(ratio) > 0.75 AS no_starved
  FROM ringshard.ring_balance();
SELECT ringshard.ring_points('no-such-ring');
-- every point's token is the token of its label "{node}#vnode#{i}" (§3)
SELECT count(*) AS points, count(*) FILTER (WHERE token <> ring_token(node || '#vnode#' || vnode)) AS mislabelled
  FROM ringshard.ring_points();
-- points are in ring order, ties broken by node name then label
SELECT count(*) AS out_of_order
  FROM (SELECT token, lag(token) OVER () AS prev FROM ringshard.ring_points()) s WHERE token < prev;

-- Previews: what a topology change would move, computed before any data
-- moves and without changing the catalog.

-- A change: 'add' (weight; zone; tokens, or token_count allocated as
-- add_node(..., tokens => n) allocates them), 'remove', 'set_weight'
-- (weight), 'set_zone' (zone, NULL clears it) or 'set_tokens' (tokens, NULL
-- for labelled vnodes).
CREATE FUNCTION ringshard.preview_change(ring text, change text, node text, weight float8, copies boolean,
										 zone text DEFAULT NULL, tokens ringtoken[] DEFAULT NULL,
										 token_count integer DEFAULT NULL)
	RETURNS TABLE (from_node text, to_node text, range_start ringtoken, range_end ringtoken, fraction float8)
	AS 'MODULE_PATHNAME', 'ringshard_preview_change' LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION ringshard.preview_change(text, text, text, float8, boolean, text, ringtoken[], integer) IS
	'ranges whose owner (copies false) or replica set (copies true: from_node is the node, to_node ''gains'' or ''loses'') a change ''add'', ''remove'', ''set_weight'', ''set_zone'' or ''set_tokens'' would alter';

CREATE FUNCTION ringshard.preview_add_node(node text, ring text DEFAULT 'default', weight float8 DEFAULT 1,
										   tokens integer DEFAULT NULL, zone text DEFAULT NULL)
	RETURNS TABLE (from_node text, to_node text, range_start ringtoken, range_end ringtoken, fraction float8)
	LANGUAGE ringshard_sql STABLE PARALLEL SAFE SET search_path = pg_catalog, ringshard, pg_temp
	AS $$ SELECT * FROM ringshard.preview_change(ring, 'add', node, weight, false, zone, NULL, tokens) $$;
COMMENT ON FUNCTION ringshard.preview_add_node(text, text, float8, integer, text) IS
	'each contiguous token range (range_start, range_end] whose owner changes if the node joins (in a zone, with that many allocated tokens, as add_node would), with its exact share of the ring; nothing changes';

CREATE FUNCTION ringshard.preview_remove_node(node text, ring text DEFAULT 'default')
	RETURNS TABLE (from_node text, to_node text, range_start ringtoken, range_end ringtoken, fraction float8)
	LANGUAGE ringshard_sql STABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, ringshard, pg_temp
	AS $$ SELECT * FROM ringshard.preview_change(ring, 'remove', node, 1, false) $$;
COMMENT ON FUNCTION ringshard.preview_remove_node(text, text) IS
	'each token range whose owner changes if the node leaves; nothing changes';

CREATE FUNCTION ringshard.preview_set_weight(node text, weight float8, ring text DEFAULT 'default')
	RETURNS TABLE (from_node text, to_node text, range_start ringtoken, range_end ringtoken, fraction float8)
	LANGUAGE ringshard_sql STABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, ringshard, pg_temp
	AS $$ SELECT * FROM ringshard.preview_change(ring, 'set_weight', node, weight, false) $$;
COMMENT ON FUNCTION ringshard.preview_set_weight(text, float8, text) IS
	'each token range whose owner changes if the node''s weight changes; nothing changes';

CREATE FUNCTION ringshard.preview_set_tokens(node text, tokens ringtoken[], ring text DEFAULT 'default')
	RETURNS TABLE (from_node text, to_node text, range_start ringtoken, range_end ringtoken, fraction float8)
	LANGUAGE ringshard_sql STABLE PARALLEL SAFE SET search_path = pg_catalog, ringshard, pg_temp
	AS $$ SELECT * FROM ringshard.preview_change(ring, 'set_tokens', node, 1, false, NULL, tokens) $$;
COMMENT ON FUNCTION ringshard.preview_set_tokens(text, ringtoken[], text) IS
	'each token range whose owner changes if the node''s points become these explicit tokens (NULL: its labelled vnodes); nothing changes';

CREATE FUNCTION ringshard.preview_add_node_copies(node text, ring text DEFAULT 'default', weight float8 DEFAULT 1,
												  tokens integer DEFAULT NULL, zone text DEFAULT NULL)
	RETURNS TABLE (node text, change text, range_start ringtoken, range_end ringtoken, fraction float8)
	LANGUAGE ringshard_sql STABLE PARALLEL SAFE SET search_path = pg_catalog, ringshard, pg_temp
	AS $$ SELECT * FROM ringshard.preview_change(ring, 'add', node, weight, true, zone, NULL, tokens) $$;
COMMENT ON FUNCTION ringshard.preview_add_node_copies(text, text, float8, integer, text) IS
	'with replication: each range in which a node gains or loses a copy if the node joins (what data movement really is)';

CREATE FUNCTION ringshard.preview_remove_node_copies(node text, ring text DEFAULT 'default')
	RETURNS TABLE (node text, change text, range_start ringtoken, range_end ringtoken, fraction float8)
	LANGUAGE ringshard_sql STABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, ringshard, pg_temp
	AS $$ SELECT * FROM ringshard.preview_change(ring, 'remove', node, 1, true) $$;
COMMENT ON FUNCTION ringshard.preview_remove_node_copies(text, text) IS
	'with replication: each range in which a node gains or loses a copy if the node leaves';

CREATE FUNCTION ringshard.preview_set_weight_copies(node text, weight float8, ring text DEFAULT 'default')
	RETURNS TABLE (node text, change text, range_start ringtoken, range_end ringtoken, fraction float8)
	LANGUAGE ringshard_sql STABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, ringshard, pg_temp
	AS $$ SELECT * FROM ringshard.preview_change(ring, 'set_weight', node, weight, true) $$;
COMMENT ON FUNCTION ringshard.preview_set_weight_copies(text, float8, text) IS
	'with replication: each range in which a node gains or loses a copy if the node''s weight changes';

-- A zone never changes a key's owner (§7): its preview is of copies only.
CREATE FUNCTION ringshard.preview_set_zone_copies(node text, zone text, ring text DEFAULT 'default')
	RETURNS TABLE (node text, change text, range_start ringtoken, range_end ringtoken, fraction float8)
	LANGUAGE ringshard_sql STABLE PARALLEL SAFE SET search_path = pg_catalog, ringshard, pg_temp
	AS $$ SELECT * FROM ringshard.preview_change(ring, 'set_zone', node, 1, true, zone) $$;
COMMENT ON FUNCTION ringshard.preview_set_zone_copies(text, text, text) IS
	'each range in which a node gains or loses a copy if the node''s zone becomes this one (NULL: none); a zone moves no owner; nothing changes';

CREATE FUNCTION ringshard.preview_set_tokens_copies(node text, tokens ringtoken[], ring text DEFAULT 'default')
	RETURNS TABLE (node text, change text, range_start ringtoken, range_end ringtoken, fraction float8)
	LANGUAGE ringshard_sql STABLE PARALLEL SAFE SET search_path = pg_catalog, ringshard, pg_temp
	AS $$ SELECT * FROM ringshard.preview_change(ring, 'set_tokens', node, 1, true, NULL, tokens) $$;
COMMENT ON FUNCTION ringshard.preview_set_tokens_copies(text, ringtoken[], text) IS
	'with replication: each range in which a node gains or loses a copy if the node''s points become these explicit tokens (NULL: its labelled vnodes)';

CREATE FUNCTION ringshard.proposed_replicas(key text, ring text, change text, node text, weight float8 DEFAULT 1,
											zone text DEFAULT NULL, tokens ringtoken[] DEFAULT NULL,
											token_count integer DEFAULT NULL)
	RETURNS text[]
	AS 'MODULE_PATHNAME', 'ringshard_proposed_replicas' LANGUAGE C STABLE PARALLEL SAFE;
CREATE FUNCTION ringshard.proposed_replicas(key anyelement, ring text, change text, node text, weight float8 DEFAULT 1,
											zone text DEFAULT NULL, tokens ringtoken[] DEFAULT NULL,
											token_count integer DEFAULT NULL)
	RETURNS text[]
	AS 'MODULE_PATHNAME', 'ringshard_proposed_replicas' LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION ringshard.proposed_replicas(text, text, text, text, float8, text, ringtoken[], integer) IS
	'the key''s replica set, owner first, on the ring as it would be after the change (add, remove, set_weight, set_zone, set_tokens); NULL if the key, ring, change, node or weight is';
COMMENT ON FUNCTION ringshard.proposed_replicas(anyelement, text, text, text, float8, text, ringtoken[], integer) IS
	'the key''s replica set, owner first, on the ring as it would be after the change (add, remove, set_weight, set_zone, set_tokens); NULL if the key, ring, change, node or weight is';

-- Row-level plans for annotated tables.  The query streams through the
-- table; RETURN QUERY spills to disk past work_mem rather than growing.
CREATE FUNCTION ringshard.plan_table_moves(table_name regclass, change text, node text, weight float8 DEFAULT 1,
										   zone text DEFAULT NULL, tokens ringtoken[] DEFAULT NULL,
										   token_count integer DEFAULT NULL)
	RETURNS TABLE (key text, from_node text, to_node text, from_replicas text[], to_replicas text[])
	LANGUAGE ringshard_plpgsql STABLE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	annotation ringshard.distributed_tables;
BEGIN
	-- as a strict function would for these (zone, tokens and token_count may be NULL)
	IF table_name IS NULL OR change IS NULL OR node IS NULL OR weight IS NULL THEN
		RETURN;
	END IF;
	SELECT * INTO annotation FROM ringshard.distributed_tables d WHERE d.table_name = plan_table_moves.table_name;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'table % is not annotated', table_name
			USING ERRCODE = 'undefined_object', HINT = 'Annotate it with ringshard.distribute_table().';
	END IF;
	IF annotation.ring_name IS NULL THEN
		RAISE EXCEPTION 'table % is placed by a partition map, not a ring', table_name
			USING ERRCODE = 'wrong_object_type',
			      HINT = 'Preview partition maps with ringshard.preview_partition_config().';
	END IF;
	-- Checked before the query (proposed_replicas checks it too, but only
	-- per row): a mistyped change must fail on an empty table as well.
	IF change NOT IN ('add', 'remove', 'set_weight', 'set_zone', 'set_tokens') THEN
		RAISE EXCEPTION 'unknown topology change "%"', change
			USING ERRCODE = 'invalid_parameter_value',
			      HINT = 'Use ''add'', ''remove'', ''set_weight'', ''set_zone'' or ''set_tokens''.';
	END IF;
	RETURN QUERY EXECUTE format(
		'SELECT s.k::text, s.before[1], s.after[1], s.before, s.after
		   FROM (SELECT t.%1$I AS k, pg_catalog.replicas_of(t) AS before,
		                ringshard.proposed_replicas(t.%1$I, $1, $2, $3, $4, $5, $6, $7) AS after
		           FROM %2$s t WHERE t.%1$I IS NOT NULL) s
		  WHERE s.before IS DISTINCT FROM s.after', annotation.key_column, ringshard.qualified_name(table_name))
	USING annotation.ring_name, change, node, weight, zone, tokens, token_count;
END
$$;
COMMENT ON FUNCTION ringshard.plan_table_moves(regclass, text, text, float8, text, ringtoken[], integer) IS
	'every row of a ring-placed table whose replica set a change (add, remove, set_weight, set_zone, set_tokens) would alter, with old and new owners and replica sets';

CREATE FUNCTION ringshard.plan_table_summary(table_name regclass, change text, node text, weight float8 DEFAULT 1,
											 zone text DEFAULT NULL, tokens ringtoken[] DEFAULT NULL,
											 token_count integer DEFAULT NULL)
	RETURNS TABLE (from_node text, to_node text, rows bigint)
	LANGUAGE ringshard_sql STABLE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
	-- The copies rebalance() would make, counted as its plan counts them: a
	-- row goes to every node that gains it, from the first node of its old
	-- replica set that keeps it (else its old owner).
	SELECT c.source, c.target, count(*)
	  FROM (SELECT coalesce((SELECT o FROM unnest(m.from_replicas) WITH ORDINALITY u(o, i)
	                          WHERE o = ANY (m.to_replicas) ORDER BY i LIMIT 1), m.from_replicas[1]) AS source,
	               gained.target
	          FROM ringshard.plan_table_moves(table_name, change, node, weight, zone, tokens, token_count) m,
	               LATERAL unnest(m.to_replicas) gained(target)
	         WHERE gained.target <> ALL (m.from_replicas)) c
	 GROUP BY c.source, c.target ORDER BY c.source COLLATE "C", c.target COLLATE "C";
$$;
COMMENT ON FUNCTION ringshard.plan_table_summary(regclass, text, text, float8, text, ringtoken[], integer) IS
	'the copies of rows a change would make, per (source, target) pair, counted as rebalance() counts them: a migration plan per table (rows whose replica set only changes order are in plan_table_moves)';

CREATE FUNCTION ringshard.compare_schemes(from_nodes integer, to_nodes integer, keys integer DEFAULT 100000,
										  vnodes integer DEFAULT 256)
	RETURNS TABLE (scheme text, moved_fraction float8, ideal_fraction float8, max_over_mean float8, stddev_share float8)
	AS 'MODULE_PATHNAME', 'ringshard_compare_schemes' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard.compare_schemes(integer, integer, integer, integer) IS
	'keys key-0.. placed with modulo, range, ring (vnodes random points per node), ring_tokens (16 allocated tokens per node, nodes joining one by one), jump and rendezvous on from_nodes then to_nodes nodes: share moved against the ideal, and balance after';

-- Balance reports: one per ring, and the same for the real rows of an
-- annotated table.  Shares are rounded to 4 decimals and deviations to a
-- tenth of a per cent, with a bar to see them at a glance; the exact figures
-- stay in ring_balance() (tokens owned, shares and ratios as float8).

-- A bar of Unicode blocks, value / full_scale of width characters long, to
-- an eighth of a character (U+2588 FULL BLOCK, then U+2589..U+258F for 7/8
-- down to 1/8).  The characters are made at run time: written into the
-- install script they would not convert to a database encoding without
-- them, and CREATE EXTENSION would fail there.  Where the database or the
-- client encoding cannot hold them, the bar is '#' characters, rounded to a
-- whole one.  One terminal column per character either way, so psql keeps
-- the columns aligned.
CREATE FUNCTION ringshard.share_bar(value float8, full_scale float8, width integer DEFAULT 20) RETURNS text
	LANGUAGE ringshard_plpgsql STABLE PARALLEL SAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	eighths integer;
BEGIN
	IF value IS NULL OR full_scale IS NULL OR width IS NULL OR NOT (value > 0 AND full_scale > 0 AND width > 0) THEN
		RETURN '';
	END IF;
	eighths := round(least(value / full_scale, 1) * width * 8);
	IF getdatabaseencoding() <> 'UTF8' OR pg_client_encoding() <> 'UTF8' THEN
		RETURN repeat('#', round(eighths / 8.0)::integer);
	END IF;
	RETURN repeat(chr(9608), eighths / 8) || CASE WHEN eighths % 8 > 0 THEN chr(9616 - eighths % 8) ELSE '' END;
END
$$;
COMMENT ON FUNCTION ringshard.share_bar(float8, float8, integer) IS
	'a bar of Unicode block characters value / full_scale of width characters long, to an eighth; ''#'' characters where the encoding has no blocks';

-- Node rows first (node, its zone, points, share of the keys against the
-- ideal, share of the copies at the ring's replication factor), then one row
-- per named zone (node NULL): its nodes' points and shares, and the fewest
-- and most copies of one key it holds.  Shares in per cent, to a tenth: a
-- report is read, the exact fractions are ring_balance()'s.
CREATE FUNCTION ringshard.ring_balance_report(ring text DEFAULT 'default')
	RETURNS TABLE (node text, zone text, points integer, share_pct numeric, ideal_pct numeric, deviation_pct numeric,
				   copy_share_pct numeric, min_copies integer, max_copies integer, bar text)
	LANGUAGE ringshard_sql STABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
	WITH b AS (SELECT * FROM ringshard.ring_balance(ring)),
	     z AS (SELECT z.*, (SELECT sum(b.ideal_share) FROM b WHERE b.node = ANY (z.nodes)) AS ideal_share
	             FROM ringshard.ring_zones(ring) z WHERE z.zone IS NOT NULL),
	     top AS (SELECT max(greatest(b.share, b.ideal_share)) AS scale FROM b)
	SELECT r.node, r.zone, r.points, r.share_pct, r.ideal_pct, r.deviation_pct, r.copy_share_pct, r.min_copies,
	       r.max_copies, r.bar
	  FROM (SELECT 0 AS kind, b.node, b.zone, b.points, round((b.share * 100)::numeric, 1) AS share_pct,
	               round((b.ideal_share * 100)::numeric, 1) AS ideal_pct,
	               round(((b.ratio - 1) * 100)::numeric, 1) AS deviation_pct,
	               round((b.copy_share * 100)::numeric, 1) AS copy_share_pct, NULL::integer AS min_copies,
	               NULL::integer AS max_copies, ringshard.share_bar(b.share, (SELECT top.scale FROM top)) AS bar
	          FROM b
	        UNION ALL
	        SELECT 1, NULL, z.zone, z.points, round((z.share * 100)::numeric, 1), round((z.ideal_share * 100)::numeric, 1),
	               round(((z.share / z.ideal_share - 1) * 100)::numeric, 1), round((z.copy_share * 100)::numeric, 1),
	               z.min_copies, z.max_copies, ''
	          FROM z) r
	 ORDER BY r.kind, r.node COLLATE "C", r.zone COLLATE "C";
$$;
COMMENT ON FUNCTION ringshard.ring_balance_report(text) IS
	'per node of a ring: zone, points, share of the ring and ideal share (weight / total weight) in per cent to a tenth, deviation from the ideal in per cent, share of the copies in per cent, and a bar proportional to the share; then per zone: its share and ideal, its share of the copies, and the fewest and most copies of one key in it; exact fractions in ring_balance() and ring_zones()';

-- Rows are counted where the function runs (the coordinator of a cluster
-- keeps none: gather them, or a sample, into a table annotated the same way;
-- that table may be temporary, hence parallel restricted).
CREATE FUNCTION ringshard.table_balance_report(table_name regclass)
	RETURNS TABLE (node text, rows_owned bigint, rows_held bigint, share_pct numeric, ideal_pct numeric,
				   deviation_pct numeric, bar text)
	LANGUAGE ringshard_plpgsql STABLE STRICT PARALLEL RESTRICTED SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	annotation ringshard.distributed_tables;
BEGIN
	SELECT * INTO annotation FROM ringshard.distributed_tables d WHERE d.table_name = table_balance_report.table_name;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'table % is not annotated', table_name
			USING ERRCODE = 'undefined_object',
			      HINT = 'Annotate it with ringshard.distribute_table().';
	END IF;
	-- Every node of the ring or map is listed, with no rows if it has none.
	-- Its ideal share is its weight over the ring's total weight, or for a
	-- map an equal share of the map's nodes (what suggest_partition_boundaries
	-- aims at); its share is of the rows held, replicas included.
	RETURN QUERY EXECUTE format($q$
		WITH placed AS (SELECT pg_catalog.replicas_of(t) AS holders FROM %s t),
		     held AS (SELECT h.node, h.ord FROM placed, pg_catalog.unnest(placed.holders) WITH ORDINALITY AS h(node, ord)),
		     counted AS (SELECT held.node, pg_catalog.count(*) FILTER (WHERE held.ord = 1) AS owned, pg_catalog.count(*) AS held
		                   FROM held GROUP BY held.node),
		     intended AS (
		        SELECT m.node_name AS node, m.weight / pg_catalog.sum(m.weight) OVER () AS ideal
		          FROM ringshard.ring_members m WHERE m.ring_name = $1
		        UNION ALL
		        SELECT a.node_name, 1 / (pg_catalog.count(*) OVER ())::pg_catalog.float8
		          FROM (SELECT DISTINCT x.node_name FROM ringshard.partition_assignments x WHERE x.map_name = $2) a),
		     merged AS (
		        SELECT coalesce(c.node, i.node) AS node, coalesce(c.owned, 0) AS owned, coalesce(c.held, 0) AS held, i.ideal
		          FROM counted c FULL JOIN intended i ON i.node = c.node),
		     shares AS (SELECT m.*, m.held / NULLIF(pg_catalog.sum(m.held) OVER (), 0)::pg_catalog.float8 AS share FROM merged m)
		SELECT s.node, s.owned, s.held, pg_catalog.round((s.share * 100)::pg_catalog.numeric, 1),
		       pg_catalog.round((s.ideal * 100)::pg_catalog.numeric, 1),
		       pg_catalog.round(((s.share / s.ideal - 1) * 100)::pg_catalog.numeric, 1),
		       ringshard.share_bar(s.share, pg_catalog.max(GREATEST(s.share, s.ideal)) OVER ())
		  FROM shares s ORDER BY s.node COLLATE "C"$q$, ringshard.qualified_name(table_name))
	USING annotation.ring_name, annotation.map_name;
END
$$;
COMMENT ON FUNCTION ringshard.table_balance_report(regclass) IS
	'per node of an annotated table''s ring or map: rows it owns and holds (with replicas), its share of the held rows and the ideal share in per cent to a tenth, deviation in per cent, and a bar; from the real rows of the table here';

-- Partition map previews.
CREATE FUNCTION ringshard.preview_partition_assignments(nodes text[], partition_starts integer[],
														 partition_ends integer[], map text DEFAULT 'default')
	RETURNS TABLE (partition_start integer, partition_end integer, from_nodes text[], to_nodes text[])
	LANGUAGE ringshard_plpgsql STABLE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
BEGIN
	IF nodes IS NULL OR partition_starts IS NULL OR partition_ends IS NULL OR map IS NULL THEN
		RAISE EXCEPTION 'arguments must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF cardinality(nodes) <> cardinality(partition_starts) OR cardinality(nodes) <> cardinality(partition_ends) THEN
		RAISE EXCEPTION 'nodes, partition_starts and partition_ends must have the same length'
			USING ERRCODE = 'array_subscript_error';
	END IF;
	PERFORM ringshard.check_partition_range(s, e) FROM unnest(partition_starts, partition_ends) AS u(s, e);
	IF NOT EXISTS (SELECT FROM ringshard.partition_maps m WHERE m.map_name = map) THEN
		RAISE EXCEPTION 'partition map "%" does not exist', map USING ERRCODE = 'undefined_object';
	END IF;
	RETURN QUERY
	WITH proposed AS (
		SELECT p, coalesce(array_agg(DISTINCT u.n ORDER BY u.n) FILTER (WHERE u.n IS NOT NULL), '{}') AS holders
		  FROM generate_series(0, 255) p
		  LEFT JOIN unnest(nodes, partition_starts, partition_ends) AS u(n, s, e) ON p BETWEEN u.s AND u.e
		 GROUP BY p),
	     current AS (
		SELECT p, coalesce(array_agg(DISTINCT a.node_name ORDER BY a.node_name) FILTER (WHERE a.node_name IS NOT NULL), '{}') AS holders
		  FROM generate_series(0, 255) p
		  LEFT JOIN ringshard.partition_assignments a
		    ON a.map_name = map AND p BETWEEN a.partition_start AND a.partition_end
		 GROUP BY p),
	     changed AS (
		SELECT c.p, c.holders AS before, n.holders AS after,
		       c.p - row_number() OVER (PARTITION BY c.holders, n.holders ORDER BY c.p) AS run
		  FROM current c JOIN proposed n USING (p)
		 WHERE c.holders IS DISTINCT FROM n.holders)
	SELECT min(ch.p)::integer, max(ch.p)::integer, ch.before, ch.after
	  FROM changed ch GROUP BY ch.before, ch.after, ch.run ORDER BY 1;
END
$$;
COMMENT ON FUNCTION ringshard.preview_partition_assignments(text[], integer[], integer[], text) IS
	'runs of partitions whose holders would change if the map held exactly these (node, start, end) ranges; nothing changes';

CREATE FUNCTION ringshard.preview_partition_config(config text, map text DEFAULT 'default')
	RETURNS TABLE (partition_start integer, partition_end integer, from_nodes text[], to_nodes text[])
	LANGUAGE ringshard_plpgsql STABLE PARALLEL UNSAFE STRICT SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	names text[];
	starts integer[];
	ends integer[];
BEGIN
	-- Entries name nodes by address, as load_partition_config resolves them.
	SELECT coalesce(array_agg(coalesce(ringshard.node_for_address(c.address), c.address) ORDER BY c.line), '{}'),
	       coalesce(array_agg(c.partition_start ORDER BY c.line), '{}'),
	       coalesce(array_agg(c.partition_end ORDER BY c.line), '{}')
	  INTO names, starts, ends
	  FROM ringshard.parse_partition_config(config) c;
	RETURN QUERY SELECT * FROM ringshard.preview_partition_assignments(names, starts, ends, map);
END
$$;
COMMENT ON FUNCTION ringshard.preview_partition_config(text, text) IS
	'runs of partitions whose holders would change if the YAML config were loaded into the map; nothing changes';

CREATE FUNCTION ringshard.suggest_partition_boundaries(table_name regclass)
	RETURNS TABLE (node text, partition_start integer, partition_end integer, rows bigint, current_rows bigint)
	LANGUAGE ringshard_plpgsql STABLE PARALLEL UNSAFE STRICT SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	annotation ringshard.distributed_tables;
	keyspace_expr text;
BEGIN
	SELECT * INTO annotation FROM ringshard.distributed_tables d WHERE d.table_name = suggest_partition_boundaries.table_name;
	IF NOT FOUND OR annotation.map_name IS NULL THEN
		RAISE EXCEPTION 'table % is not placed by a partition map', table_name
			USING ERRCODE = 'wrong_object_type',
			      HINT = 'Annotate it with ringshard.distribute_table_by_partition().';
	END IF;
	-- A keyspace column's value as the text of its canonical bytes, which is
	-- what placing the row hashes (a plain ::text would differ for numeric,
	-- dates, timestamps and bytea).
	keyspace_expr := CASE WHEN annotation.keyspace_column IS NOT NULL
		THEN format('pg_catalog.convert_from(ringshard.key_bytes(t.%I), ''UTF8'')', annotation.keyspace_column)
		ELSE quote_literal(annotation.keyspace) END;
	-- Rows per partition, then contiguous cuts that give each node (the
	-- map's current nodes, in name order) as close to total/N rows as the
	-- cumulative counts allow.
	RETURN QUERY EXECUTE format($q$
		WITH per_partition AS (
			SELECT p, coalesce(cnt, 0) AS cnt
			  FROM generate_series(0, 255) p
			  LEFT JOIN (SELECT pg_catalog.partition_for(%1$s, t.%2$I) AS part, count(*) AS cnt
			               FROM %3$s t WHERE t.%2$I IS NOT NULL GROUP BY 1) c ON c.part = p),
		     nodes AS (
			SELECT n, row_number() OVER (ORDER BY n COLLATE "C") - 1 AS idx, count(*) OVER () AS total_nodes
			  FROM (SELECT DISTINCT a.node_name AS n FROM ringshard.partition_assignments a WHERE a.map_name = $1) s),
		     cumulative AS (
			SELECT p, cnt, sum(cnt) OVER (ORDER BY p) - cnt AS before_p, sum(cnt) OVER () AS total
			  FROM per_partition),
		     assigned AS (
			SELECT c.p, c.cnt,
			       CASE WHEN c.total = 0 THEN c.p * (SELECT max(total_nodes) FROM nodes) / 256
			            ELSE least(floor((c.before_p + c.cnt / 2.0) * (SELECT max(total_nodes) FROM nodes) / c.total),
			                       (SELECT max(total_nodes) FROM nodes) - 1) END AS idx
			  FROM cumulative c),
		     current_rows AS (
			SELECT a.node_name AS n, sum(pp.cnt) AS cnt
			  FROM ringshard.partition_assignments a
			  JOIN per_partition pp ON pp.p BETWEEN a.partition_start AND a.partition_end
			 WHERE a.map_name = $1 GROUP BY 1)
		SELECT nodes.n, min(assigned.p)::integer, max(assigned.p)::integer, sum(assigned.cnt)::bigint,
		       coalesce((SELECT cr.cnt FROM current_rows cr WHERE cr.n = nodes.n), 0)::bigint
		  FROM assigned JOIN nodes ON nodes.idx = assigned.idx
		 GROUP BY nodes.n ORDER BY 2$q$, keyspace_expr, annotation.key_column, ringshard.qualified_name(table_name))
	USING annotation.map_name;
END
$$;
COMMENT ON FUNCTION ringshard.suggest_partition_boundaries(regclass) IS
	'new contiguous partition boundaries that equalise a partition-mapped table''s rows over the map''s current nodes; preview their moves with preview_partition_assignments()';

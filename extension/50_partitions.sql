-- Partition maps: 256 fixed partitions assigned to nodes in inclusive ranges.
-- A node's ranges within one map are kept merged, so the catalog holds one
-- row per maximal range and unassigning splits at most one row.

CREATE FUNCTION ringshard_internal.lock_partition_map(map text) RETURNS void
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
BEGIN
	PERFORM ringshard_internal.check_name('partition map', map);
	PERFORM FROM ringshard.partition_maps p WHERE p.map_name = map FOR UPDATE;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'partition map "%" does not exist', map
			USING ERRCODE = 'undefined_object',
			      HINT = coalesce('Existing maps: ' || ringshard_internal.first_names('partition map') || '. ', '')
			             || 'Create a map with ringshard.create_partition_map().';
	END IF;
END
$$;
COMMENT ON FUNCTION ringshard_internal.lock_partition_map(text) IS 'locks a map''s catalog row for a change; raises if the map does not exist';

CREATE FUNCTION ringshard.create_partition_map(map text) RETURNS text
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
BEGIN
	PERFORM ringshard_internal.check_name('partition map', map);
	IF EXISTS (SELECT FROM ringshard.partition_maps p WHERE p.map_name = map) THEN
		RAISE EXCEPTION 'partition map "%" already exists', map
			USING ERRCODE = 'duplicate_object';
	END IF;
	INSERT INTO ringshard.partition_maps (map_name) VALUES (map);
	RETURN format('partition map "%s" created; its 256 partitions are unassigned', map);
END
$$;
COMMENT ON FUNCTION ringshard.create_partition_map(text) IS 'creates an empty partition map (all 256 partitions are gaps)';

CREATE FUNCTION ringshard.drop_partition_map(map text) RETURNS text
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	assignments bigint;
BEGIN
	PERFORM ringshard_internal.lock_partition_map(map);
	PERFORM ringshard_internal.refuse_change_during_move('partition map', map);
	PERFORM ringshard_internal.refuse_drop_while_used('partition map', map);
	SELECT count(*) INTO assignments FROM ringshard.partition_assignments a WHERE a.map_name = map;
	DELETE FROM ringshard.partition_maps p WHERE p.map_name = map;
	PERFORM ringshard_internal.forget_unused_nodes();
	RETURN format('partition map "%s" dropped with its %s assignment%s', map, assignments, CASE WHEN assignments = 1 THEN '' ELSE 's' END);
END
$$;
COMMENT ON FUNCTION ringshard.drop_partition_map(text) IS 'drops a partition map; refused while annotated tables use it';

-- Partition bounds: 0..255, start <= end.
CREATE FUNCTION ringshard.check_partition_range(partition_start integer, partition_end integer) RETURNS void
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
BEGIN
	IF partition_start IS NULL OR partition_end IS NULL
	   OR partition_start NOT BETWEEN 0 AND 255 OR partition_end NOT BETWEEN 0 AND 255 THEN
		RAISE EXCEPTION 'partition range [%, %] is outside 0..255',
			coalesce(partition_start::text, 'NULL'), coalesce(partition_end::text, 'NULL')
			USING ERRCODE = 'numeric_value_out_of_range',
			      HINT = 'Partitions are numbered 0 to 255.';
	END IF;
	IF partition_start > partition_end THEN
		RAISE EXCEPTION 'partition range [%, %] starts after it ends', partition_start, partition_end
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
END
$$;
COMMENT ON FUNCTION ringshard.check_partition_range(integer, integer) IS 'raises unless 0 <= start <= end <= 255';

CREATE FUNCTION ringshard.assign_partitions(node text, partition_start integer, partition_end integer,
											map text DEFAULT 'default') RETURNS text
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	merged_start integer := partition_start;
	merged_end integer := partition_end;
BEGIN
	PERFORM ringshard_internal.lock_partition_map(map);
	PERFORM ringshard_internal.refuse_change_during_move('partition map', map);
	PERFORM ringshard.check_partition_range(partition_start, partition_end);
	PERFORM ringshard_internal.ensure_node(node, NULL);
	-- Merge with this node's ranges that overlap or touch the new one.
	SELECT least(merged_start, min(a.partition_start)), greatest(merged_end, max(a.partition_end))
	  INTO merged_start, merged_end
	  FROM ringshard.partition_assignments a
	 WHERE a.map_name = map AND a.node_name = node
	   AND a.partition_start <= assign_partitions.partition_end + 1
	   AND a.partition_end >= assign_partitions.partition_start - 1;
	merged_start := coalesce(merged_start, partition_start);
	merged_end := coalesce(merged_end, partition_end);
	DELETE FROM ringshard.partition_assignments a
	 WHERE a.map_name = map AND a.node_name = node
	   AND a.partition_start <= assign_partitions.partition_end + 1
	   AND a.partition_end >= assign_partitions.partition_start - 1;
	INSERT INTO ringshard.partition_assignments (map_name, node_name, partition_start, partition_end)
	VALUES (map, node, merged_start, merged_end);
	RETURN (SELECT format('node "%s" holds %s of map "%s": %s', node, sum(a.partition_end - a.partition_start + 1)::text || ' of 256 partitions',
	                map, string_agg(a.partition_start || '..' || a.partition_end, ', ' ORDER BY a.partition_start))
	          FROM ringshard.partition_assignments a WHERE a.map_name = map AND a.node_name = node HAVING count(*) > 0);
END
$$;
COMMENT ON FUNCTION ringshard.assign_partitions(text, integer, integer, text) IS
	'gives a node the partitions start..end (inclusive) of a map; several holders of a partition replicate it';

CREATE FUNCTION ringshard.unassign_partitions(node text, partition_start integer, partition_end integer,
											  map text DEFAULT 'default') RETURNS text
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	held ringshard.partition_assignments;
	removed boolean := false;
BEGIN
	PERFORM ringshard_internal.check_name('node', node);
	PERFORM ringshard_internal.lock_partition_map(map);
	PERFORM ringshard_internal.refuse_change_during_move('partition map', map);
	PERFORM ringshard.check_partition_range(partition_start, partition_end);
	FOR held IN
		DELETE FROM ringshard.partition_assignments a
		 WHERE a.map_name = map AND a.node_name = node
		   AND a.partition_start <= unassign_partitions.partition_end
		   AND a.partition_end >= unassign_partitions.partition_start
		RETURNING *
	LOOP
		removed := true;
		IF held.partition_start < partition_start THEN
			INSERT INTO ringshard.partition_assignments VALUES (map, node, held.partition_start, partition_start - 1);
		END IF;
		IF held.partition_end > partition_end THEN
			INSERT INTO ringshard.partition_assignments VALUES (map, node, partition_end + 1, held.partition_end);
		END IF;
	END LOOP;
	IF NOT removed THEN
		RAISE EXCEPTION 'node "%" holds none of partitions %..% in map "%"', node, partition_start, partition_end, map
			USING ERRCODE = 'undefined_object';
	END IF;
	PERFORM ringshard_internal.forget_unused_nodes();
	RETURN coalesce((SELECT format('node "%s" holds %s of map "%s": %s', node, sum(a.partition_end - a.partition_start + 1)::text || ' of 256 partitions',
	                map, string_agg(a.partition_start || '..' || a.partition_end, ', ' ORDER BY a.partition_start))
	          FROM ringshard.partition_assignments a WHERE a.map_name = map AND a.node_name = node HAVING count(*) > 0),
	              format('node "%s" holds no partition of map "%s" now', node, map));
END
$$;
COMMENT ON FUNCTION ringshard.unassign_partitions(text, integer, integer, text) IS
	'takes the partitions start..end (inclusive) of a map away from a node, splitting its ranges as needed';

CREATE FUNCTION ringshard.check_partition_map(map text DEFAULT 'default')
	RETURNS TABLE (kind text, partition_start integer, partition_end integer, nodes text[])
	AS 'MODULE_PATHNAME', 'ringshard_check_partition_map' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard.check_partition_map(text) IS
	'each maximal run of partitions that no node holds (gap) or several nodes hold (overlap), with the nodes; no rows means every partition has exactly one holder';

CREATE FUNCTION ringshard.parse_partition_config(config text)
	RETURNS TABLE (address text, partition_start integer, partition_end integer, line integer)
	AS 'MODULE_PATHNAME', 'ringshard_parse_partition_config' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard.parse_partition_config(text) IS
	'the node entries of a YAML coordinator config (version "v1"), or an error naming the field and line';

CREATE FUNCTION ringshard.format_partition_config(addresses text[], partition_starts integer[], partition_ends integer[])
	RETURNS text
	AS 'MODULE_PATHNAME', 'ringshard_format_partition_config' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard.format_partition_config(text[], integer[], integer[]) IS
	'writes node entries as a YAML coordinator config (version "v1")';

CREATE FUNCTION ringshard.load_partition_config(config text, map text DEFAULT 'default') RETURNS integer
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	entry record;
	node text;
	entries integer := 0;
	gaps integer;
	gap_partitions integer;
	gap_list text;
BEGIN
	PERFORM ringshard_internal.check_name('partition map', map);
	IF config IS NULL THEN
		RAISE EXCEPTION 'a partition config must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF NOT EXISTS (SELECT FROM ringshard.partition_maps p WHERE p.map_name = map) THEN
		INSERT INTO ringshard.partition_maps (map_name) VALUES (map);
	END IF;
	PERFORM ringshard_internal.lock_partition_map(map);
	PERFORM ringshard_internal.refuse_change_during_move('partition map', map);
	-- Parse everything before changing anything.
	CREATE TEMPORARY TABLE IF NOT EXISTS pg_temp.ringshard_config_entries
		(address text, partition_start integer, partition_end integer, line integer) ON COMMIT DROP;
	TRUNCATE pg_temp.ringshard_config_entries;
	INSERT INTO pg_temp.ringshard_config_entries SELECT * FROM ringshard.parse_partition_config(config);

	DELETE FROM ringshard.partition_assignments a WHERE a.map_name = map;
	FOR entry IN SELECT * FROM pg_temp.ringshard_config_entries ORDER BY line LOOP
		-- An entry names a node by address; a node with that address is reused.
		node := ringshard.node_for_address(entry.address);
		IF node IS NULL THEN
			node := entry.address;
			BEGIN
				PERFORM ringshard_internal.ensure_node(node, entry.address);
			EXCEPTION WHEN invalid_parameter_value OR duplicate_object THEN
				RAISE EXCEPTION 'invalid partition config: the address at line % cannot be used', entry.line
					USING ERRCODE = 'invalid_parameter_value',
					      DETAIL = format('At line %s, field address.', entry.line),
					      HINT = 'An address is host:port or a libpq connection string without a password, and must not clash with a node of another address.';
			END;
		END IF;
		PERFORM ringshard.assign_partitions(node, entry.partition_start, entry.partition_end, map);
		entries := entries + 1;
	END LOOP;
	DROP TABLE pg_temp.ringshard_config_entries;
	PERFORM ringshard_internal.forget_unused_nodes();
	-- A config that leaves partitions to no node loads (a map may be filled
	-- in steps), but not silently: keys in a gap cannot be routed.  The gaps
	-- are check_partition_map's, in its words.
	SELECT count(*), sum(c.partition_end - c.partition_start + 1),
	       string_agg(CASE WHEN c.partition_start = c.partition_end THEN c.partition_start::text
	                       ELSE c.partition_start || '..' || c.partition_end END,
	                  ', ' ORDER BY c.partition_start)
	  INTO gaps, gap_partitions, gap_list
	  FROM ringshard.check_partition_map(map) c WHERE c.kind = 'gap';
	IF gaps > 0 THEN
		RAISE WARNING 'partition map "%" has %: no node holds %', map,
			CASE WHEN gaps = 1 THEN 'a gap' ELSE gaps || ' gaps' END,
			CASE WHEN gap_partitions = 1 THEN 'partition ' ELSE 'partitions ' END || gap_list
			USING DETAIL = 'Routing a key that hashes into a gap is an error.',
			      HINT = format('Assign them with ringshard.assign_partitions(node, start, end, %L); ringshard.check_partition_map(%L) lists every gap.',
			                    map, map);
	END IF;
	RETURN entries;
END
$$;
COMMENT ON FUNCTION ringshard.load_partition_config(text, text) IS
	'replaces a map''s assignments with a YAML coordinator config, all or nothing; nodes are found or created by address; returns the number of entries; a config that leaves partitions to no node is loaded with a WARNING naming the gaps (see check_partition_map)';

CREATE FUNCTION ringshard.partition_config(map text DEFAULT 'default') RETURNS text
	LANGUAGE ringshard_plpgsql STABLE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	result text;
BEGIN
	IF NOT EXISTS (SELECT FROM ringshard.partition_maps p WHERE p.map_name = map) THEN
		RAISE EXCEPTION 'partition map "%" does not exist', map
			USING ERRCODE = 'undefined_object';
	END IF;
	SELECT ringshard.format_partition_config(
			   coalesce(array_agg(coalesce(ringshard.server_address(n.server_name), n.node_name) ORDER BY a.partition_start, a.node_name COLLATE "C"), '{}'),
			   coalesce(array_agg(a.partition_start ORDER BY a.partition_start, a.node_name COLLATE "C"), '{}'),
			   coalesce(array_agg(a.partition_end ORDER BY a.partition_start, a.node_name COLLATE "C"), '{}'))
	  INTO result
	  FROM ringshard.partition_assignments a JOIN ringshard.nodes n ON n.node_name = a.node_name
	 WHERE a.map_name = map;
	RETURN result;
END
$$;
COMMENT ON FUNCTION ringshard.partition_config(text) IS
	'the map as a YAML coordinator config (version "v1"), ranges in partition order; loading it back gives the same map';

-- Administration of rings and nodes.  Each function is one transaction's
-- worth of catalog change: an error leaves the catalog as it was.  They run
-- with the caller's rights; the catalog's grants decide who may change it.

CREATE FUNCTION ringshard.validate_ring(ring text) RETURNS integer
	AS 'MODULE_PATHNAME', 'ringshard_validate_ring' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard.validate_ring(text) IS
	'builds the ring as the catalog now describes it; returns its number of points or raises the reason it cannot be built';

-- Names of rings, maps and nodes: non-empty, at most 1024 bytes.  In C: every
-- administration function calls it first, and it checks once that the
-- library and the SQL objects are the same version (src/admin/version.c).
CREATE FUNCTION ringshard_internal.check_name(kind text, name text) RETURNS void
	AS 'MODULE_PATHNAME', 'ringshard_check_name' LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION ringshard_internal.check_name(text, text) IS 'raises unless a ring, map or node name is non-empty and at most 1024 bytes';

-- The first ten ring or map names in bytewise order, for a hint that names
-- what a mistyped name could have meant ("and N more" past ten); NULL if none.
CREATE FUNCTION ringshard_internal.first_names(kind text) RETURNS text
	LANGUAGE ringshard_sql STABLE PARALLEL SAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
	SELECT string_agg(s.name, ', ' ORDER BY s.name)
	       || CASE WHEN max(s.total) > 10 THEN ' and ' || (max(s.total) - 10) || ' more' ELSE '' END
	  FROM (SELECT n.name, count(*) OVER () AS total
	          FROM (SELECT r.ring_name COLLATE "C" AS name FROM ringshard.rings r WHERE kind = 'ring'
	                UNION ALL
	                SELECT p.map_name COLLATE "C" FROM ringshard.partition_maps p WHERE kind = 'partition map') n
	         ORDER BY 1 LIMIT 10) s
$$;
COMMENT ON FUNCTION ringshard_internal.first_names(text) IS
	'the first ten names of rings (kind ''ring'') or partition maps (''partition map''), for error hints';

-- Lock a ring's row so that concurrent changes of one ring serialize.
CREATE FUNCTION ringshard_internal.lock_ring(ring text) RETURNS ringshard.rings
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	locked ringshard.rings;
BEGIN
	PERFORM ringshard_internal.check_name('ring', ring);
	SELECT * INTO locked FROM ringshard.rings r WHERE r.ring_name = ring FOR UPDATE;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'ring "%" does not exist', ring
			USING ERRCODE = 'undefined_object',
			      HINT = coalesce('Existing rings: ' || ringshard_internal.first_names('ring') || '. ', '')
			             || 'Create a ring with ringshard.create_ring().';
	END IF;
	RETURN locked;
END
$$;
COMMENT ON FUNCTION ringshard_internal.lock_ring(text) IS 'locks a ring''s catalog row for a change; raises if the ring does not exist';

-- A ring or map changes only while no table laid out on it has a move
-- under way: a move keeps the plan it began with (its steps, their
-- sources and targets), and reads and writes route by that plan and the
-- topology together; a second change before the move ends would leave
-- rows where neither layout reads them.  (distributed_tables and
-- rebalance_progress are created further on; PL/pgSQL finds them when it
-- runs.)
CREATE FUNCTION ringshard_internal.refuse_change_during_move(kind text, name text) RETURNS void
	LANGUAGE ringshard_plpgsql STABLE PARALLEL SAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	moving regclass;
BEGIN
	-- the first such table by name, if any
	moving := (SELECT d.table_name FROM ringshard.distributed_tables d
	            WHERE ((kind = 'ring' AND d.ring_name = name) OR (kind = 'partition map' AND d.map_name = name))
	              AND EXISTS (SELECT FROM ringshard.rebalance_progress p WHERE p.table_name = d.table_name)
	            ORDER BY d.table_name::text COLLATE "C" LIMIT 1);
	IF moving IS NOT NULL THEN
		RAISE EXCEPTION '% "%" cannot change while table % has an unfinished rebalance', kind, name, moving
			USING ERRCODE = 'object_not_in_prerequisite_state',
			      DETAIL = 'A move keeps the plan it began with; a second change before it ends would leave rows '
			               'where neither layout reads them.',
			      HINT = format('Finish the move first: CALL ringshard.rebalance(%L).', ringshard.qualified_name(moving));
	END IF;
END
$$;
COMMENT ON FUNCTION ringshard_internal.refuse_change_during_move(text, text) IS
	'raises if a table laid out on the ring or partition map has an unfinished rebalance: its layout must not change before the move ends';

-- A ring or map is dropped only while no annotated table is laid out on it;
-- the error names those tables.
CREATE FUNCTION ringshard_internal.refuse_drop_while_used(kind text, name text) RETURNS void
	LANGUAGE ringshard_plpgsql STABLE PARALLEL SAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	users text;
BEGIN
	SELECT string_agg(d.table_name::text, ', ' ORDER BY d.table_name::text) INTO users
	  FROM ringshard.distributed_tables d
	 WHERE (kind = 'ring' AND d.ring_name = name) OR (kind = 'partition map' AND d.map_name = name);
	IF users IS NOT NULL THEN
		RAISE EXCEPTION 'cannot drop % "%" because annotated tables use it', kind, name
			USING ERRCODE = 'dependent_objects_still_exist',
			      DETAIL = format('Tables placed by this %s: %s.', CASE WHEN kind = 'ring' THEN 'ring' ELSE 'map' END, users),
			      HINT = 'Remove their annotation first with ringshard.undistribute_table().';
	END IF;
END
$$;
COMMENT ON FUNCTION ringshard_internal.refuse_drop_while_used(text, text) IS
	'raises if an annotated table is laid out on the ring or partition map (kind ''ring'' or ''partition map''), naming the tables';

CREATE FUNCTION ringshard.create_ring(ring text, vnodes integer DEFAULT 256,
									  replication_factor integer DEFAULT 1,
									  algorithm text DEFAULT 'murmur3') RETURNS text
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
BEGIN
	PERFORM ringshard_internal.check_name('ring', ring);
	IF algorithm IS NULL THEN
		RAISE EXCEPTION 'ring algorithm must not be null' USING ERRCODE = 'null_value_not_allowed',
			HINT = 'Use ''murmur3'' (the default) or ''ketama''.';
	END IF;
	IF algorithm NOT IN ('murmur3', 'ketama') THEN
		RAISE EXCEPTION 'unknown ring algorithm "%"', algorithm
			USING ERRCODE = 'invalid_parameter_value',
			      HINT = 'Use ''murmur3'' (the default) or ''ketama''.';
	END IF;
	IF vnodes IS NULL OR vnodes NOT BETWEEN 1 AND 65536 THEN
		RAISE EXCEPTION 'vnodes % is outside 1..65536', coalesce(vnodes::text, 'NULL')
			USING ERRCODE = 'invalid_parameter_value',
			      HINT = 'The default, 256 points per unit of weight, keeps shares within a few percent.';
	END IF;
	IF replication_factor IS NULL OR replication_factor NOT BETWEEN 1 AND 64 THEN
		RAISE EXCEPTION 'replication factor % is outside 1..64', coalesce(replication_factor::text, 'NULL')
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF EXISTS (SELECT FROM ringshard.rings r WHERE r.ring_name = ring) THEN
		RAISE EXCEPTION 'ring "%" already exists', ring
			USING ERRCODE = 'duplicate_object',
			      HINT = 'Pick another name, or drop it first with ringshard.drop_ring().';
	END IF;
	INSERT INTO ringshard.rings (ring_name, algorithm, vnodes, replication_factor)
	VALUES (ring, algorithm, vnodes, replication_factor);
	RETURN format('ring "%s" created: %s, %s, %s cop%s of each key', ring, algorithm,
	              CASE WHEN algorithm = 'ketama' THEN 'points placed as libketama places them (160 per node at equal weights)'
	                   ELSE vnodes || ' points per unit of weight' END,
	              replication_factor, CASE WHEN replication_factor = 1 THEN 'y' ELSE 'ies' END);
END
$$;
COMMENT ON FUNCTION ringshard.create_ring(text, integer, integer, text) IS
	'creates an empty ring: vnodes points per unit weight, replication factor, algorithm murmur3 or ketama';

-- Delete nodes that nothing uses any more: no ring, no map, and no
-- distributed table whose rows are laid out on them.  A node that leaves its
-- last ring or map still holds rows until rebalance() has copied them to
-- their new replicas and deleted them there, and the rebalance needs its
-- catalog row and server for that: it is kept while a table's recorded
-- placement or an unfinished rebalance step names it, and rebalance()
-- forgets it once done.  A placement of a table no longer annotated cannot
-- be rebalanced and keeps nothing.  A forgotten node's server goes with it
-- (and so the user mappings of that server).  (placements and
-- rebalance_progress are created further on in the install script;
-- PL/pgSQL finds them when it runs.)
CREATE FUNCTION ringshard_internal.forget_unused_nodes() RETURNS void
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	gone record;
BEGIN
	FOR gone IN
		DELETE FROM ringshard.nodes n
		 WHERE NOT EXISTS (SELECT FROM ringshard.ring_members m WHERE m.node_name = n.node_name)
		   AND NOT EXISTS (SELECT FROM ringshard.partition_assignments a WHERE a.node_name = n.node_name)
		   AND NOT EXISTS (SELECT FROM ringshard.placements p JOIN ringshard.distributed_tables d ON d.table_name = p.table_name,
		                               json_array_elements(coalesce(p.snapshot->'members', p.snapshot->'assignments')) x
		                    WHERE x->>'node' = n.node_name)
		   AND NOT EXISTS (SELECT FROM ringshard.rebalance_progress r
		                    WHERE r.state <> 'done' AND n.node_name = ANY (ARRAY[r.source] || r.targets || r.deletes))
		RETURNING n.server_name
	LOOP
		-- Only a server ringshard made (of its wrapper, owned by
		-- ringshard_admin): the name in the catalog row could be anybody's.
		IF gone.server_name IS NOT NULL
		   AND EXISTS (SELECT FROM pg_catalog.pg_foreign_server s
		                 JOIN pg_catalog.pg_foreign_data_wrapper w ON w.oid OPERATOR(pg_catalog.=) s.srvfdw
		                WHERE s.srvname OPERATOR(pg_catalog.=) gone.server_name
		                  AND w.fdwname OPERATOR(pg_catalog.=) 'ringshard'
		                  AND s.srvowner OPERATOR(pg_catalog.=) 'ringshard_admin'::pg_catalog.regrole) THEN
			EXECUTE format('DROP SERVER IF EXISTS %I CASCADE', gone.server_name);
		END IF;
	END LOOP;
END
$$;
COMMENT ON FUNCTION ringshard_internal.forget_unused_nodes() IS
	'deletes nodes that are in no ring and no partition map and hold no distributed table''s rows (no placement or unfinished rebalance names them), with their foreign servers';

-- Give a node the address: its foreign server gets the address's options
-- (created, owned by ringshard_admin so that every administrator may manage
-- it, or changed in place so that its user mappings stay).  An address a
-- superuser gives also gets ambient_credentials 'true': superusers and the
-- watchdog may then log in there with the server account's own credentials,
-- as 1.1 did everywhere; an address any other role gives gets none of them
-- (docs/security.md).
CREATE FUNCTION ringshard_internal.set_server(node text, address text) RETURNS void
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	server name := (SELECT n.server_name FROM ringshard.nodes n WHERE n.node_name = node);
	wanted text;
	added text;
	dropped text;
BEGIN
	SELECT string_agg(format('%I %L', o.option, o.value), ', '), string_agg(format('ADD %I %L', o.option, o.value), ', ')
	  INTO wanted, added
	  FROM (SELECT a.option, a.value FROM ringshard.address_options(address) a
	        UNION ALL
	        SELECT 'ambient_credentials', 'true' FROM pg_catalog.pg_roles r
	         WHERE r.rolname = current_user AND r.rolsuper) o;
	IF server IS NULL THEN
		IF octet_length(node) > 63 THEN
			RAISE EXCEPTION 'node name "%" is too long for a node with an address', left(node, 64)
				USING ERRCODE = 'name_too_long',
				      DETAIL = 'A node with an address is a foreign server of the same name, at most 63 bytes.';
		END IF;
		IF EXISTS (SELECT FROM pg_catalog.pg_foreign_server s WHERE s.srvname = node) THEN
			RAISE EXCEPTION 'a foreign server named "%" already exists', node
				USING ERRCODE = 'duplicate_object',
				      HINT = 'Name the node differently, or drop that server.';
		END IF;
		EXECUTE format('CREATE SERVER %I FOREIGN DATA WRAPPER ringshard OPTIONS (%s)', node, wanted);
		IF pg_catalog.pg_has_role('ringshard_admin', 'MEMBER') THEN
			EXECUTE format('ALTER SERVER %I OWNER TO ringshard_admin', node);
		END IF;
		UPDATE ringshard.nodes n SET server_name = node WHERE n.node_name = node;
		RETURN;
	END IF;
	SELECT string_agg(format('DROP %I', split_part(o, '=', 1)), ', ') INTO dropped
	  FROM pg_catalog.pg_foreign_server s, unnest(s.srvoptions) o WHERE s.srvname = server;
	IF dropped IS NOT NULL THEN
		EXECUTE format('ALTER SERVER %I OPTIONS (%s)', server, dropped);
	END IF;
	EXECUTE format('ALTER SERVER %I OPTIONS (%s)', server, added);
END
$$;
COMMENT ON FUNCTION ringshard_internal.set_server(text, text) IS 'creates or changes the foreign server of a node from an address';

CREATE FUNCTION ringshard.drop_ring(ring text) RETURNS text
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	members bigint;
	forgotten bigint;
BEGIN
	PERFORM ringshard_internal.lock_ring(ring);
	PERFORM ringshard_internal.refuse_change_during_move('ring', ring);
	PERFORM ringshard_internal.refuse_drop_while_used('ring', ring);
	SELECT count(*) INTO members FROM ringshard.ring_members m WHERE m.ring_name = ring;
	SELECT count(*) INTO forgotten FROM ringshard.nodes;
	DELETE FROM ringshard.rings r WHERE r.ring_name = ring;
	PERFORM ringshard_internal.forget_unused_nodes();
	forgotten := forgotten - (SELECT count(*) FROM ringshard.nodes);
	RETURN format('ring "%s" dropped with its %s member%s%s', ring, members, CASE WHEN members = 1 THEN '' ELSE 's' END,
	              CASE WHEN forgotten > 0 THEN format('; %s node%s in no ring or map any more forgotten', forgotten,
	                                                  CASE WHEN forgotten = 1 THEN '' ELSE 's' END) ELSE '' END);
END
$$;
COMMENT ON FUNCTION ringshard.drop_ring(text) IS 'drops a ring and its memberships; refused while annotated tables use it';

CREATE FUNCTION ringshard.set_replication_factor(ring text, replication_factor integer) RETURNS text
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	previous integer;
	members integer;
BEGIN
	PERFORM ringshard_internal.lock_ring(ring);
	PERFORM ringshard_internal.refuse_change_during_move('ring', ring);
	IF replication_factor IS NULL OR replication_factor NOT BETWEEN 1 AND 64 THEN
		RAISE EXCEPTION 'replication factor % is outside 1..64', coalesce(replication_factor::text, 'NULL')
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	SELECT r.replication_factor INTO previous FROM ringshard.rings r WHERE r.ring_name = ring;
	UPDATE ringshard.rings r SET replication_factor = set_replication_factor.replication_factor
	 WHERE r.ring_name = ring;
	-- Allowed (nodes may join later), but a replica set cannot hold more
	-- distinct nodes than the ring has: say so.  An empty ring routes nothing.
	SELECT count(*) INTO members FROM ringshard.ring_members m WHERE m.ring_name = ring;
	IF members > 0 AND members < replication_factor THEN
		RAISE WARNING 'ring "%" has % node%, fewer than its replication factor %', ring, members,
			CASE WHEN members = 1 THEN '' ELSE 's' END, replication_factor
			USING DETAIL = format('replicas_for() returns %s node%s per key until more nodes join.', members,
			                      CASE WHEN members = 1 THEN '' ELSE 's' END),
			      HINT = 'Add nodes with ringshard.add_node(node, address, ring).';
	END IF;
	RETURN format('ring "%s" keeps %s cop%s of each key (it kept %s)', ring, replication_factor,
	              CASE WHEN replication_factor = 1 THEN 'y' ELSE 'ies' END, previous);
END
$$;
COMMENT ON FUNCTION ringshard.set_replication_factor(text, integer) IS
	'changes how many distinct nodes hold each key of a ring; warns when the ring has fewer nodes than that (replica sets then hold every node)';

-- Weights: finite and > 0 (NaN sorts above infinity in PostgreSQL).
CREATE FUNCTION ringshard_internal.check_weight(weight float8) RETURNS void
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
BEGIN
	IF weight IS NULL OR NOT (weight > 0 AND weight < 'Infinity'::float8) THEN
		RAISE EXCEPTION 'weight % is not a finite number greater than zero', coalesce(weight::text, 'NULL')
			USING ERRCODE = 'invalid_parameter_value',
			      HINT = 'A node of weight w gets round(vnodes * w) points, at least one.';
	END IF;
END
$$;
COMMENT ON FUNCTION ringshard_internal.check_weight(float8) IS 'raises unless a weight is finite and greater than zero';

-- Insert a node, or check that an existing one has the same address.
CREATE FUNCTION ringshard_internal.ensure_node(node text, address text) RETURNS void
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	known ringshard.nodes;
BEGIN
	PERFORM ringshard_internal.check_name('node', node);
	SELECT * INTO known FROM ringshard.nodes n WHERE n.node_name = node FOR UPDATE;
	IF NOT FOUND THEN
		INSERT INTO ringshard.nodes (node_name) VALUES (node);
		IF address IS NOT NULL THEN
			PERFORM ringshard_internal.set_server(node, address);
		END IF;
	ELSIF address IS NOT NULL AND (known.server_name IS NULL OR
	      (SELECT array_agg(o.option || '=' || o.value ORDER BY o.option) FROM ringshard.address_options(address) o)
	      IS DISTINCT FROM
	      (SELECT array_agg(o ORDER BY o) FROM pg_catalog.pg_foreign_server s, unnest(s.srvoptions) o
	        WHERE s.srvname = known.server_name AND o NOT LIKE 'ambient\_credentials=%')) THEN
		RAISE EXCEPTION 'node "%" already exists %', node,
			CASE WHEN known.server_name IS NULL THEN 'without an address'
			     ELSE format('with address "%s"', ringshard.server_address(known.server_name)) END
			USING ERRCODE = 'duplicate_object',
			      HINT = 'Change its address with ringshard.set_node_address(), or leave the address out.';
	END IF;
END
$$;
COMMENT ON FUNCTION ringshard_internal.ensure_node(text, text) IS 'creates a node if it is new; raises if it exists with another address';

-- A zone: NULL (none) or a name of 1 to 1024 bytes.
CREATE FUNCTION ringshard_internal.check_zone(zone text) RETURNS void
	LANGUAGE ringshard_plpgsql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
BEGIN
	IF zone = '' OR octet_length(zone) > 1024 THEN
		RAISE EXCEPTION '%', CASE WHEN zone = '' THEN 'a zone must not be empty'
		                          ELSE format('a zone of %s bytes is too long', octet_length(zone)) END
			USING ERRCODE = 'invalid_parameter_value',
			      DETAIL = 'A zone is a name of 1 to 1024 bytes.',
			      HINT = 'Give NULL for no zone (the node is then a zone of its own).';
	END IF;
END
$$;
COMMENT ON FUNCTION ringshard_internal.check_zone(text) IS 'raises unless a zone is NULL or a name of 1 to 1024 bytes';

-- Zones and explicit tokens are for murmur3 rings (docs/routing.md §7, §8).
CREATE FUNCTION ringshard_internal.check_murmur3(ring text, what text) RETURNS void
	LANGUAGE ringshard_plpgsql STABLE PARALLEL SAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
BEGIN
	IF (SELECT r.algorithm FROM ringshard.rings r WHERE r.ring_name = ring) <> 'murmur3' THEN
		RAISE EXCEPTION 'ring "%" is a ketama ring: it has no %', ring, what
			USING ERRCODE = 'feature_not_supported',
			      DETAIL = 'A ketama ring places every point as libketama does.',
			      HINT = 'Zones and explicit tokens are for murmur3 rings.';
	END IF;
END
$$;
COMMENT ON FUNCTION ringshard_internal.check_murmur3(text, text) IS 'raises unless a ring is a murmur3 ring (zones and explicit tokens are theirs)';

-- "in zone z" or "without a zone", for messages.
CREATE FUNCTION ringshard_internal.zone_phrase(zone text) RETURNS text
	LANGUAGE ringshard_sql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
	SELECT CASE WHEN zone IS NULL THEN 'without a zone' ELSE format('in zone "%s"', zone) END
$$;
COMMENT ON FUNCTION ringshard_internal.zone_phrase(text) IS 'a zone as a message says it: in zone "z", or without a zone';

CREATE FUNCTION ringshard.add_node(node text, address text DEFAULT NULL, ring text DEFAULT 'default',
								   weight float8 DEFAULT 1, tokens integer DEFAULT NULL,
								   zone text DEFAULT NULL) RETURNS text
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	balance record;
BEGIN
	PERFORM ringshard_internal.check_name('ring', ring);
	PERFORM ringshard_internal.lock_ring(ring);
	PERFORM ringshard_internal.refuse_change_during_move('ring', ring);
	PERFORM ringshard_internal.check_weight(weight);
	PERFORM ringshard_internal.check_zone(zone);
	IF zone IS NOT NULL THEN
		PERFORM ringshard_internal.check_murmur3(ring, 'zones');
	END IF;
	IF tokens IS NOT NULL THEN
		PERFORM ringshard_internal.check_murmur3(ring, 'explicit tokens');
		IF tokens NOT BETWEEN 1 AND 65536 THEN
			RAISE EXCEPTION 'token count % is outside 1..65536', tokens
				USING ERRCODE = 'invalid_parameter_value',
				      HINT = '16 tokens per node keep every node within a few per cent of its share.';
		END IF;
	END IF;
	PERFORM ringshard_internal.ensure_node(node, address);
	IF EXISTS (SELECT FROM ringshard.ring_members m WHERE m.ring_name = ring AND m.node_name = node) THEN
		RAISE EXCEPTION 'node "%" is already on ring "%"', node, ring
			USING ERRCODE = 'duplicate_object',
			      HINT = 'Change its weight with ringshard.set_node_weight(), its zone with ringshard.set_node_zone(), its tokens with ringshard.set_node_tokens().';
	END IF;
	INSERT INTO ringshard.ring_members (ring_name, node_name, weight, zone)
	VALUES (ring, node, weight, add_node.zone);
	-- allocated on the way in: for its zone and weight, existing tokens unmoved
	IF tokens IS NOT NULL THEN
		UPDATE ringshard.ring_members m SET tokens = ringshard.allocate_tokens(node, add_node.tokens, ring)
		 WHERE m.ring_name = ring AND m.node_name = node;
	END IF;
	PERFORM ringshard.validate_ring(ring);
	-- every node holds the reference tables (create_reference_table): it gets them with their rebalance
	-- (the ring locked first: a remove_node meanwhile could take the node off it again)
	IF ring <> 'reference' AND EXISTS (SELECT FROM ringshard.rings r WHERE r.ring_name = 'reference') THEN
		PERFORM ringshard_internal.lock_ring('reference');
		PERFORM ringshard_internal.refuse_change_during_move('ring', 'reference');
	END IF;
	IF ring <> 'reference' AND EXISTS (SELECT FROM ringshard.rings r WHERE r.ring_name = 'reference')
	   AND NOT EXISTS (SELECT FROM ringshard.ring_members m WHERE m.ring_name = 'reference' AND m.node_name = node) THEN
		INSERT INTO ringshard.ring_members (ring_name, node_name, weight) VALUES ('reference', node, 1);
		RAISE NOTICE 'node "%" holds a copy of the reference tables too', node
			USING HINT = 'Copy them to it with CALL ringshard.rebalance(table) for each table of ring "reference".';
	END IF;
	SELECT b.points, b.share INTO balance FROM ringshard.ring_balance(ring) b WHERE b.node = add_node.node;
	RETURN format('node "%s" added to ring "%s" with weight %s%s%s: %s points, %s of the ring', node, ring, weight,
	              CASE WHEN zone IS NOT NULL THEN format(' in zone "%s"', zone) ELSE '' END,
	              CASE WHEN tokens IS NOT NULL THEN format(' and %s allocated tokens', tokens) ELSE '' END,
	              balance.points, to_char(balance.share * 100, 'FM990.0') || ' %');
END
$$;
COMMENT ON FUNCTION ringshard.add_node(text, text, text, float8, integer, text) IS
	'adds a node (created if new) to a ring with a weight, optionally in a zone and with that many allocated tokens (no existing token moves); its address is host:port or a libpq connection string without a password';

CREATE FUNCTION ringshard.remove_node(node text, ring text DEFAULT 'default') RETURNS text
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	users text;
	holding text;
	left_reference boolean := false;
BEGIN
	PERFORM ringshard_internal.check_name('node', node);
	PERFORM ringshard_internal.lock_ring(ring);
	PERFORM ringshard_internal.refuse_change_during_move('ring', ring);
	IF NOT EXISTS (SELECT FROM ringshard.ring_members m WHERE m.ring_name = ring AND m.node_name = node) THEN
		RAISE EXCEPTION 'node "%" is not on ring "%"', node, ring
			USING ERRCODE = 'undefined_object';
	END IF;
	IF (SELECT count(*) FROM ringshard.ring_members m WHERE m.ring_name = ring) = 1 THEN
		SELECT string_agg(d.table_name::text, ', ' ORDER BY d.table_name::text) INTO users
		  FROM ringshard.distributed_tables d WHERE d.ring_name = ring;
		IF users IS NOT NULL THEN
			RAISE EXCEPTION 'cannot remove node "%", the last node of ring "%", while annotated tables use the ring', node, ring
				USING ERRCODE = 'dependent_objects_still_exist',
				      DETAIL = format('Tables placed by this ring: %s.', users),
				      HINT = 'Add another node first, or remove the annotation with ringshard.undistribute_table().';
		END IF;
	END IF;
	DELETE FROM ringshard.ring_members m WHERE m.ring_name = ring AND m.node_name = node;
	-- A node that leaves its last ring (and holds no partition) stops holding
	-- the reference tables too, as add_node made it hold them: their writes
	-- would otherwise go on reaching it (or be refused while it is down).
	-- Every other node holds all their rows, so their rebalance only deletes
	-- its copies; the last copy is kept.
	IF ring <> 'reference' AND EXISTS (SELECT FROM ringshard.rings r WHERE r.ring_name = 'reference') THEN
		PERFORM ringshard_internal.lock_ring('reference');	-- before the checks: add_node takes it first too
		PERFORM ringshard_internal.refuse_change_during_move('ring', 'reference');
	END IF;
	IF ring <> 'reference'
	   AND EXISTS (SELECT FROM ringshard.ring_members m WHERE m.ring_name = 'reference' AND m.node_name = node)
	   AND NOT EXISTS (SELECT FROM ringshard.ring_members m WHERE m.node_name = node AND m.ring_name <> 'reference')
	   AND NOT EXISTS (SELECT FROM ringshard.partition_assignments a WHERE a.node_name = node) THEN
		IF (SELECT count(*) FROM ringshard.ring_members m WHERE m.ring_name = 'reference') > 1 THEN
			DELETE FROM ringshard.ring_members m WHERE m.ring_name = 'reference' AND m.node_name = node;
			left_reference := true;
			RAISE NOTICE 'node "%" no longer holds the reference tables', node
				USING HINT = 'Delete its copies with CALL ringshard.rebalance(table) for each table of ring "reference".';
		END IF;
	END IF;
	PERFORM ringshard_internal.forget_unused_nodes();
	-- In no ring or map now, yet kept: distributed tables' rows are still on it.
	IF EXISTS (SELECT FROM ringshard.nodes n WHERE n.node_name = node)
	   AND NOT EXISTS (SELECT FROM ringshard.ring_members m WHERE m.node_name = node)
	   AND NOT EXISTS (SELECT FROM ringshard.partition_assignments a WHERE a.node_name = node) THEN
		SELECT string_agg(p.table_name::text, ', ' ORDER BY p.table_name::text) INTO holding
		  FROM ringshard.placements p JOIN ringshard.distributed_tables d ON d.table_name = p.table_name
		 WHERE EXISTS (SELECT FROM json_array_elements(coalesce(p.snapshot->'members', p.snapshot->'assignments')) x
		                WHERE x->>'node' = node);
		RAISE NOTICE 'node "%" is in no ring or map now; it is kept until its rows have moved', node
			USING DETAIL = format('Rows of %s are laid out on it.', coalesce(holding, 'an unfinished rebalance')),
			      HINT = 'CALL ringshard.rebalance(table) for each of them: it copies the rows to their new replicas, deletes them on this node, and then forgets the node.';
	END IF;
	RETURN format('node "%s" removed from ring "%s"%s%s', node, ring,
	              CASE WHEN left_reference THEN ' and from ring "reference" (its copies of the reference tables)' ELSE '' END,
	              CASE WHEN NOT EXISTS (SELECT FROM ringshard.nodes n WHERE n.node_name = node)
	                   THEN '; it is in no ring or map now and was forgotten'
	                   WHEN holding IS NOT NULL OR NOT EXISTS (SELECT FROM ringshard.ring_members m WHERE m.node_name = node)
	                        AND NOT EXISTS (SELECT FROM ringshard.partition_assignments a WHERE a.node_name = node)
	                   THEN '; it is kept until rebalance() has moved its rows'
	                   ELSE '' END);
END
$$;
COMMENT ON FUNCTION ringshard.remove_node(text, text) IS
	'removes a node from a ring; a node left in no ring and no map is forgotten once no distributed table''s rows are on it (after the rebalance that moves them)';

CREATE FUNCTION ringshard.set_node_weight(node text, weight float8, ring text DEFAULT 'default') RETURNS text
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	previous float8;
	balance record;
BEGIN
	PERFORM ringshard_internal.check_name('node', node);
	PERFORM ringshard_internal.lock_ring(ring);
	PERFORM ringshard_internal.refuse_change_during_move('ring', ring);
	PERFORM ringshard_internal.check_weight(weight);
	SELECT m.weight INTO previous FROM ringshard.ring_members m WHERE m.ring_name = ring AND m.node_name = node;
	UPDATE ringshard.ring_members m SET weight = set_node_weight.weight
	 WHERE m.ring_name = ring AND m.node_name = node;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'node "%" is not on ring "%"', node, ring
			USING ERRCODE = 'undefined_object';
	END IF;
	PERFORM ringshard.validate_ring(ring);
	SELECT b.points, b.share, b.explicit_tokens INTO balance FROM ringshard.ring_balance(ring) b
	 WHERE b.node = set_node_weight.node;
	RETURN format('node "%s" on ring "%s": weight %s (it was %s), %s points, %s of the ring%s', node, ring, weight, previous,
	              balance.points, to_char(balance.share * 100, 'FM990.0') || ' %',
	              CASE WHEN balance.explicit_tokens
	                   THEN '; its points are explicit tokens, which the weight does not place (allocation aims at it)'
	                   ELSE '' END);
END
$$;
COMMENT ON FUNCTION ringshard.set_node_weight(text, float8, text) IS 'changes a node''s weight on a ring (points = round(vnodes * weight))';

CREATE FUNCTION ringshard.set_node_zone(node text, zone text, ring text DEFAULT 'default') RETURNS text
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	previous text;
	zones record;
BEGIN
	PERFORM ringshard_internal.check_name('node', node);
	PERFORM ringshard_internal.lock_ring(ring);
	PERFORM ringshard_internal.refuse_change_during_move('ring', ring);
	PERFORM ringshard_internal.check_zone(zone);
	IF NOT EXISTS (SELECT FROM ringshard.ring_members m WHERE m.ring_name = ring AND m.node_name = node) THEN
		RAISE EXCEPTION 'node "%" is not on ring "%"', node, ring
			USING ERRCODE = 'undefined_object';
	END IF;
	IF zone IS NOT NULL THEN
		PERFORM ringshard_internal.check_murmur3(ring, 'zones');
	END IF;
	SELECT m.zone INTO previous FROM ringshard.ring_members m WHERE m.ring_name = ring AND m.node_name = node;
	UPDATE ringshard.ring_members m SET zone = set_node_zone.zone
	 WHERE m.ring_name = ring AND m.node_name = node;
	PERFORM ringshard.validate_ring(ring);
	SELECT count(DISTINCT m.zone) AS named, count(*) FILTER (WHERE m.zone IS NULL) AS alone, count(*) AS nodes
	  INTO zones FROM ringshard.ring_members m WHERE m.ring_name = ring;
	RETURN format('node "%s" on ring "%s" is %s now (it was %s); the ring''s %s node%s are in %s zone%s', node, ring,
	              ringshard_internal.zone_phrase(zone), ringshard_internal.zone_phrase(previous),
	              zones.nodes, CASE WHEN zones.nodes = 1 THEN '' ELSE 's' END, zones.named + zones.alone,
	              CASE WHEN zones.named + zones.alone = 1 THEN '' ELSE 's' END);
END
$$;
COMMENT ON FUNCTION ringshard.set_node_zone(text, text, text) IS
	'sets a node''s zone on a ring (a data centre, a rack; NULL clears it): replica sets take one node per zone first (docs/routing.md §7); a topology change, as a weight change is';

CREATE FUNCTION ringshard.set_node_tokens(node text, tokens ringtoken[], ring text DEFAULT 'default') RETURNS text
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	previous ringtoken[];
	repeated ringtoken;
	tied text;
	balance record;
BEGIN
	PERFORM ringshard_internal.check_name('node', node);
	PERFORM ringshard_internal.lock_ring(ring);
	PERFORM ringshard_internal.refuse_change_during_move('ring', ring);
	IF NOT EXISTS (SELECT FROM ringshard.ring_members m WHERE m.ring_name = ring AND m.node_name = node) THEN
		RAISE EXCEPTION 'node "%" is not on ring "%"', node, ring
			USING ERRCODE = 'undefined_object';
	END IF;
	IF tokens IS NOT NULL THEN
		PERFORM ringshard_internal.check_murmur3(ring, 'explicit tokens');
		IF array_ndims(tokens) IS DISTINCT FROM 1 OR cardinality(tokens) NOT BETWEEN 1 AND 65536 THEN
			RAISE EXCEPTION 'a node holds 1 to 65536 explicit tokens, not %', cardinality(tokens)
				USING ERRCODE = 'invalid_parameter_value',
				      HINT = 'Give a one-dimensional array, or NULL to go back to labelled vnodes; ringshard.allocate_tokens(node, count, ring) chooses tokens.';
		END IF;
		IF array_position(tokens, NULL) IS NOT NULL THEN
			RAISE EXCEPTION 'a token must not be null' USING ERRCODE = 'null_value_not_allowed';
		END IF;
		SELECT t INTO repeated FROM unnest(tokens) t GROUP BY t HAVING count(*) > 1 ORDER BY t LIMIT 1;
		IF FOUND THEN
			RAISE EXCEPTION 'token % is given twice', repeated
				USING ERRCODE = 'invalid_parameter_value',
				      DETAIL = 'A node''s explicit tokens are distinct (docs/routing.md §8).';
		END IF;
	END IF;
	SELECT m.tokens INTO previous FROM ringshard.ring_members m WHERE m.ring_name = ring AND m.node_name = node;
	UPDATE ringshard.ring_members m SET tokens = set_node_tokens.tokens
	 WHERE m.ring_name = ring AND m.node_name = node;
	PERFORM ringshard.validate_ring(ring);
	-- a token another node holds too: the ring sorts the tie by node name, so one point owns nothing
	SELECT string_agg(DISTINCT p.node, ', ') INTO tied
	  FROM ringshard.ring_points(ring) p
	 WHERE p.node <> set_node_tokens.node AND p.token = ANY (tokens);
	IF tied IS NOT NULL THEN
		RAISE NOTICE 'some tokens of node "%" are points of other nodes too', node
			USING DETAIL = format('Shared with: %s. Points of one token sort by node name: the later one owns no key.', tied);
	END IF;
	SELECT b.points, b.share INTO balance FROM ringshard.ring_balance(ring) b WHERE b.node = set_node_tokens.node;
	RETURN format('node "%s" on ring "%s" %s now (it had %s): %s point%s, %s of the ring', node, ring,
	              CASE WHEN tokens IS NULL THEN 'has labelled vnodes'
	                   ELSE format('holds %s explicit token%s', cardinality(tokens), CASE WHEN cardinality(tokens) = 1 THEN '' ELSE 's' END) END,
	              CASE WHEN previous IS NULL THEN 'labelled vnodes'
	                   ELSE format('%s explicit token%s', cardinality(previous), CASE WHEN cardinality(previous) = 1 THEN '' ELSE 's' END) END,
	              balance.points, CASE WHEN balance.points = 1 THEN '' ELSE 's' END,
	              to_char(balance.share * 100, 'FM990.0') || ' %');
END
$$;
COMMENT ON FUNCTION ringshard.set_node_tokens(text, ringtoken[], text) IS
	'gives a node explicit tokens on a ring, its points exactly (docs/routing.md §8), or with NULL its labelled vnodes back; a topology change';

CREATE FUNCTION ringshard.allocate_tokens(node text, count integer DEFAULT 16, ring text DEFAULT 'default')
	RETURNS ringtoken[]
	AS 'MODULE_PATHNAME', 'ringshard_allocate_tokens' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard.allocate_tokens(text, integer, text) IS
	'count tokens for a node, chosen as if it held no points yet where they best even the ring''s replicated load for its replication factor and zones (its zone and weight if it is a member); deterministic; changes nothing';

-- Lock a node's row; raises if there is no such node.
CREATE FUNCTION ringshard_internal.lock_node(node text) RETURNS void
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
BEGIN
	PERFORM ringshard_internal.check_name('node', node);
	PERFORM FROM ringshard.nodes n WHERE n.node_name = node FOR UPDATE;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'node "%" does not exist', node
			USING ERRCODE = 'undefined_object',
			      HINT = 'List nodes in ringshard.nodes.';
	END IF;
END
$$;
COMMENT ON FUNCTION ringshard_internal.lock_node(text) IS 'locks a node''s catalog row; raises if the node does not exist';

CREATE FUNCTION ringshard.set_node_address(node text, address text) RETURNS text
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	server name;
BEGIN
	PERFORM ringshard_internal.lock_node(node);
	IF address IS NOT NULL THEN
		PERFORM ringshard_internal.set_server(node, address);
		RETURN (SELECT format('node "%s" is at %s (server %I)', node, ringshard.server_address(n.server_name), n.server_name)
		          FROM ringshard.nodes n WHERE n.node_name = node);
	END IF;
	SELECT n.server_name INTO server FROM ringshard.nodes n WHERE n.node_name = node;
	UPDATE ringshard.nodes n SET server_name = NULL WHERE n.node_name = node;
	IF server IS NOT NULL THEN
		EXECUTE format('DROP SERVER IF EXISTS %I CASCADE', server);
	END IF;
	RETURN format('node "%s" has no address now%s', node,
	              CASE WHEN server IS NOT NULL THEN format('; its server %I and the server''s user mappings were dropped', server) ELSE '' END);
END
$$;
COMMENT ON FUNCTION ringshard.set_node_address(text, text) IS
	'changes the address of a node (its foreign server''s options; its user mappings stay), or with NULL drops it';

CREATE FUNCTION ringshard.mark_node_down(node text) RETURNS text
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	was boolean;
BEGIN
	PERFORM ringshard_internal.lock_node(node);
	SELECT n.is_up INTO was FROM ringshard.nodes n WHERE n.node_name = node;
	UPDATE ringshard.nodes n SET is_up = false WHERE n.node_name = node;
	IF was THEN
		RAISE LOG 'ringshard: node "%" is marked down by role "%"', node, session_user;
	END IF;
	RETURN format('node "%s" is marked %s%s', node, 'down', CASE WHEN was IS NOT DISTINCT FROM false THEN ' (it was already)' ELSE '' END);
END
$$;
COMMENT ON FUNCTION ringshard.mark_node_down(text) IS 'read routing skips the node; ownership does not change';

CREATE FUNCTION ringshard.mark_node_up(node text) RETURNS text
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	was boolean;
BEGIN
	PERFORM ringshard_internal.lock_node(node);
	SELECT n.is_up INTO was FROM ringshard.nodes n WHERE n.node_name = node;
	UPDATE ringshard.nodes n SET is_up = true WHERE n.node_name = node;
	IF NOT was THEN
		RAISE LOG 'ringshard: node "%" is marked up by role "%"', node, session_user;
	END IF;
	RETURN format('node "%s" is marked %s%s', node, 'up', CASE WHEN was IS NOT DISTINCT FROM true THEN ' (it was already)' ELSE '' END);
END
$$;
COMMENT ON FUNCTION ringshard.mark_node_up(text) IS 'read routing uses the node again';

CREATE FUNCTION ringshard.ring_points(ring text DEFAULT 'default')
	RETURNS TABLE (token ringtoken, node text, vnode integer)
	AS 'MODULE_PATHNAME', 'ringshard_ring_points' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard.ring_points(text) IS
	'every point of a ring in ring order: token, node, and the label index i of "{node}#vnode#{i}" (ketama: 4k+h)';

CREATE FUNCTION ringshard.ring_balance(ring text DEFAULT 'default')
	RETURNS TABLE (node text, weight float8, points integer, owned_tokens numeric,
				   share float8, ideal_share float8, ratio float8, zone text, explicit_tokens boolean,
				   held_tokens numeric, copy_share float8, copy_ratio float8)
	AS 'MODULE_PATHNAME', 'ringshard_ring_balance' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard.ring_balance(text) IS
	'per node: weight, points, exact tokens owned, share of the ring, ideal share (weight / total weight, 1/N when equal), share / ideal; zone, whether its points are explicit tokens, and at the ring''s replication factor the tokens it holds a copy of, its share of all copies, and that share / ideal';

CREATE FUNCTION ringshard.ring_zones(ring text DEFAULT 'default')
	RETURNS TABLE (zone text, nodes text[], points integer, share float8, copy_share float8,
				   min_copies integer, max_copies integer)
	AS 'MODULE_PATHNAME', 'ringshard_ring_zones' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard.ring_zones(text) IS
	'per zone of a ring (a node without one is a zone of its own, zone NULL): its nodes, points, share of the keys owned, share of all copies at the ring''s replication factor, and the fewest and most copies of one key it holds';

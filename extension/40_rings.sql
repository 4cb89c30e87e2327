-- Administration of rings and nodes.  Each function is one transaction's
-- worth of catalog change: an error leaves the catalog as it was.  They run
-- with the caller's rights; the catalog's grants decide who may change it.

CREATE FUNCTION ringshard.validate_ring(ring text) RETURNS integer
	AS 'MODULE_PATHNAME', 'ringshard_validate_ring' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard.validate_ring(text) IS
	'builds the ring as the catalog now describes it; returns its number of points or raises the reason it cannot be built';

-- Lock a ring's row so that concurrent changes of one ring serialize.
CREATE FUNCTION ringshard.lock_ring(ring text) RETURNS ringshard.rings
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
DECLARE
	locked ringshard.rings;
BEGIN
	IF ring IS NULL THEN
		RAISE EXCEPTION 'ring name must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	SELECT * INTO locked FROM ringshard.rings r WHERE r.ring_name = ring FOR UPDATE;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'ring "%" does not exist', ring
			USING ERRCODE = 'undefined_object',
			      HINT = 'Create it with ringshard.create_ring(), or list rings in ringshard.rings.';
	END IF;
	RETURN locked;
END
$$;
COMMENT ON FUNCTION ringshard.lock_ring(text) IS 'locks a ring''s catalog row for a change; raises if the ring does not exist';

-- Names of rings, maps and nodes: non-empty, at most 1024 bytes.
CREATE FUNCTION ringshard.check_name(kind text, name text) RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
BEGIN
	IF name IS NULL THEN
		RAISE EXCEPTION '% name must not be null', kind USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF name = '' OR octet_length(name) > 1024 THEN
		RAISE EXCEPTION 'invalid % name "%"', kind, coalesce(left(name, 64), 'NULL')
			USING ERRCODE = 'invalid_parameter_value',
			      DETAIL = format('A %s name must be non-empty and at most 1024 bytes.', kind);
	END IF;
END
$$;
COMMENT ON FUNCTION ringshard.check_name(text, text) IS 'raises unless a ring, map or node name is non-empty and at most 1024 bytes';

CREATE FUNCTION ringshard.create_ring(ring text, vnodes integer DEFAULT 256,
									  replication_factor integer DEFAULT 1,
									  algorithm text DEFAULT 'murmur3') RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
BEGIN
	PERFORM ringshard.check_name('ring', ring);
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
END
$$;
COMMENT ON FUNCTION ringshard.create_ring(text, integer, integer, text) IS
	'creates an empty ring: vnodes points per unit weight, replication factor, algorithm murmur3 or ketama';

-- Delete nodes that nothing uses any more: no ring, no map, and no
-- distributed table whose rows are laid out on them.  A node that leaves its
-- last ring or map still holds rows until rebalance() has copied them to
-- their new replicas and deleted them there, and the rebalance needs its
-- catalog row and address for that: it is kept while a table's recorded
-- placement or an unfinished rebalance step names it, and rebalance()
-- forgets it once done.  A placement of a table no longer annotated cannot
-- be rebalanced and keeps nothing.  (placements and rebalance_progress are
-- created further on in the install script; PL/pgSQL finds them when it
-- runs.)
CREATE FUNCTION ringshard.forget_unused_nodes() RETURNS void
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
BEGIN
	DELETE FROM ringshard.nodes n
	 WHERE NOT EXISTS (SELECT FROM ringshard.ring_members m WHERE m.node_name = n.node_name)
	   AND NOT EXISTS (SELECT FROM ringshard.partition_assignments a WHERE a.node_name = n.node_name)
	   AND NOT EXISTS (SELECT FROM ringshard.placements p JOIN ringshard.distributed_tables d ON d.table_name = p.table_name,
	                               json_array_elements(coalesce(p.snapshot->'members', p.snapshot->'assignments')) x
	                    WHERE x->>'node' = n.node_name)
	   AND NOT EXISTS (SELECT FROM ringshard.rebalance_progress r
	                    WHERE r.state <> 'done' AND n.node_name = ANY (ARRAY[r.source] || r.targets || r.deletes));
END
$$;
COMMENT ON FUNCTION ringshard.forget_unused_nodes() IS
	'deletes nodes that are in no ring and no partition map and hold no distributed table''s rows (no placement or unfinished rebalance names them)';

CREATE FUNCTION ringshard.drop_ring(ring text) RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
DECLARE
	users text;
BEGIN
	PERFORM ringshard.lock_ring(ring);
	SELECT string_agg(d.table_name::text, ', ' ORDER BY d.table_name::text) INTO users
	  FROM ringshard.distributed_tables d WHERE d.ring_name = ring;
	IF users IS NOT NULL THEN
		RAISE EXCEPTION 'cannot drop ring "%" because annotated tables use it', ring
			USING ERRCODE = 'dependent_objects_still_exist',
			      DETAIL = format('Tables placed by this ring: %s.', users),
			      HINT = 'Remove their annotation first with ringshard.undistribute_table().';
	END IF;
	DELETE FROM ringshard.rings r WHERE r.ring_name = ring;
	PERFORM ringshard.forget_unused_nodes();
END
$$;
COMMENT ON FUNCTION ringshard.drop_ring(text) IS 'drops a ring and its memberships; refused while annotated tables use it';

CREATE FUNCTION ringshard.set_replication_factor(ring text, replication_factor integer) RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
BEGIN
	PERFORM ringshard.lock_ring(ring);
	IF replication_factor IS NULL OR replication_factor NOT BETWEEN 1 AND 64 THEN
		RAISE EXCEPTION 'replication factor % is outside 1..64', coalesce(replication_factor::text, 'NULL')
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	UPDATE ringshard.rings r SET replication_factor = set_replication_factor.replication_factor
	 WHERE r.ring_name = ring;
END
$$;
COMMENT ON FUNCTION ringshard.set_replication_factor(text, integer) IS 'changes how many distinct nodes hold each key of a ring';

-- Weights: finite and > 0 (NaN sorts above infinity in PostgreSQL).
CREATE FUNCTION ringshard.check_weight(weight float8) RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
BEGIN
	IF weight IS NULL OR NOT (weight > 0 AND weight < 'Infinity'::float8) THEN
		RAISE EXCEPTION 'weight % is not a finite number greater than zero', coalesce(weight::text, 'NULL')
			USING ERRCODE = 'invalid_parameter_value',
			      HINT = 'A node of weight w gets round(vnodes * w) points, at least one.';
	END IF;
END
$$;
COMMENT ON FUNCTION ringshard.check_weight(float8) IS 'raises unless a weight is finite and greater than zero';

-- Insert a node, or check that an existing one has the same address.
CREATE FUNCTION ringshard.ensure_node(node text, address text) RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
DECLARE
	known ringshard.nodes;
BEGIN
	PERFORM ringshard.check_name('node', node);
	-- The address is never printed: it may hold the very password refused.
	IF address IS NOT NULL AND NOT ringshard.address_is_safe(address) THEN
		RAISE EXCEPTION 'invalid address for node "%"', node
			USING ERRCODE = 'invalid_parameter_value',
			      DETAIL = 'An address is host:port or a libpq connection string (or URI) that parses and has no password.',
			      HINT = 'Keep passwords in ~/.pgpass, a service file or a postgres_fdw user mapping.';
	END IF;
	SELECT * INTO known FROM ringshard.nodes n WHERE n.node_name = node FOR UPDATE;
	IF NOT FOUND THEN
		INSERT INTO ringshard.nodes (node_name, address) VALUES (node, address);
	ELSIF address IS NOT NULL AND known.address IS DISTINCT FROM address THEN
		RAISE EXCEPTION 'node "%" already exists %', node,
			CASE WHEN known.address IS NULL THEN 'without an address' ELSE format('with address "%s"', known.address) END
			USING ERRCODE = 'duplicate_object',
			      HINT = 'Change its address with ringshard.set_node_address(), or leave the address out.';
	END IF;
END
$$;
COMMENT ON FUNCTION ringshard.ensure_node(text, text) IS 'creates a node if it is new; raises if it exists with another address';

CREATE FUNCTION ringshard.add_node(node text, address text DEFAULT NULL, ring text DEFAULT 'default',
								   weight float8 DEFAULT 1) RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
BEGIN
	PERFORM ringshard.check_name('ring', ring);
	PERFORM ringshard.lock_ring(ring);
	PERFORM ringshard.check_weight(weight);
	PERFORM ringshard.ensure_node(node, address);
	IF EXISTS (SELECT FROM ringshard.ring_members m WHERE m.ring_name = ring AND m.node_name = node) THEN
		RAISE EXCEPTION 'node "%" is already on ring "%"', node, ring
			USING ERRCODE = 'duplicate_object',
			      HINT = 'Change its weight with ringshard.set_node_weight().';
	END IF;
	INSERT INTO ringshard.ring_members (ring_name, node_name, weight) VALUES (ring, node, weight);
	PERFORM ringshard.validate_ring(ring);
END
$$;
COMMENT ON FUNCTION ringshard.add_node(text, text, text, float8) IS
	'adds a node (created if new) to a ring with a weight; its address is host:port or a libpq connection string without a password';

CREATE FUNCTION ringshard.remove_node(node text, ring text DEFAULT 'default') RETURNS void
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	users text;
	holding text;
BEGIN
	PERFORM ringshard.check_name('node', node);
	PERFORM ringshard.lock_ring(ring);
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
	PERFORM ringshard.forget_unused_nodes();
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
END
$$;
COMMENT ON FUNCTION ringshard.remove_node(text, text) IS
	'removes a node from a ring; a node left in no ring and no map is forgotten once no distributed table''s rows are on it (after the rebalance that moves them)';

CREATE FUNCTION ringshard.set_node_weight(node text, weight float8, ring text DEFAULT 'default') RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
BEGIN
	PERFORM ringshard.check_name('node', node);
	PERFORM ringshard.lock_ring(ring);
	PERFORM ringshard.check_weight(weight);
	UPDATE ringshard.ring_members m SET weight = set_node_weight.weight
	 WHERE m.ring_name = ring AND m.node_name = node;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'node "%" is not on ring "%"', node, ring
			USING ERRCODE = 'undefined_object';
	END IF;
	PERFORM ringshard.validate_ring(ring);
END
$$;
COMMENT ON FUNCTION ringshard.set_node_weight(text, float8, text) IS 'changes a node''s weight on a ring (points = round(vnodes * weight))';

-- Lock a node's row; raises if there is no such node.
CREATE FUNCTION ringshard.lock_node(node text) RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
BEGIN
	IF node IS NULL THEN
		RAISE EXCEPTION 'node name must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	PERFORM FROM ringshard.nodes n WHERE n.node_name = node FOR UPDATE;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'node "%" does not exist', node
			USING ERRCODE = 'undefined_object',
			      HINT = 'List nodes in ringshard.nodes.';
	END IF;
END
$$;
COMMENT ON FUNCTION ringshard.lock_node(text) IS 'locks a node''s catalog row; raises if the node does not exist';

CREATE FUNCTION ringshard.set_node_address(node text, address text) RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
BEGIN
	PERFORM ringshard.lock_node(node);
	IF address IS NOT NULL AND NOT ringshard.address_is_safe(address) THEN
		RAISE EXCEPTION 'invalid address for node "%"', node
			USING ERRCODE = 'invalid_parameter_value',
			      DETAIL = 'An address is host:port or a libpq connection string without a password.',
			      HINT = 'Keep passwords in ~/.pgpass, a service file or a postgres_fdw user mapping.';
	END IF;
	UPDATE ringshard.nodes n SET address = set_node_address.address WHERE n.node_name = node;
END
$$;
COMMENT ON FUNCTION ringshard.set_node_address(text, text) IS 'changes (or clears, with NULL) the libpq address of a node';

CREATE FUNCTION ringshard.mark_node_down(node text) RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
BEGIN
	PERFORM ringshard.lock_node(node);
	UPDATE ringshard.nodes n SET is_up = false WHERE n.node_name = node;
END
$$;
COMMENT ON FUNCTION ringshard.mark_node_down(text) IS 'read routing skips the node; ownership does not change';

CREATE FUNCTION ringshard.mark_node_up(node text) RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
BEGIN
	PERFORM ringshard.lock_node(node);
	UPDATE ringshard.nodes n SET is_up = true WHERE n.node_name = node;
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
				   share float8, ideal_share float8, ratio float8)
	AS 'MODULE_PATHNAME', 'ringshard_ring_balance' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard.ring_balance(text) IS
	'per node: weight, points, exact tokens owned, share of the ring, ideal share (weight / total weight, 1/N when equal) and share / ideal';

-- Rehoming rows stored under keys whose bytes changed.  1.0 routed some keys
-- by text that 1.1 no longer hashes (char(n) with its padding, numeric with
-- trailing zeros, dates and times in the session's DateStyle and TimeZone,
-- text in a database that is not UTF-8: docs/upgrading.md), so a distributed
-- table that 1.0 wrote may hold rows on nodes that are not their replicas
-- under 1.1, and lack them on nodes that are.  A fan-out reads each row on
-- its first replica only, so such rows are hidden, and a read by key looks
-- for them on their 1.1 replicas.  rehome_rows() puts every row on its 1.1
-- replicas, node by node (each node asks replicas_of() of its rows, with the
-- topology the coordinator has just pushed), in committed batches:
--
--  1. the rows a node holds but is not a replica of are copied to each of
--     their replicas that lacks an identical row, checked there, and deleted
--     from the node;
--  2. where a row may have more replicas now than where it was put (a
--     partition map, whose partitions may have different numbers of
--     holders; a ring that has more copies of each key now than when the
--     table was placed), the rows a node shares with other replicas are
--     copied to those that lack them.  (Otherwise a replica that lacks a row
--     always has a node that holds it wrongly: step 1 finds it.)
--
-- Copies of one row on several nodes are identical: the first node's is
-- copied, the others are only deleted, so no replica gets a row twice.  Rows
-- whose keys route as before are not touched, unless the topology changed
-- since the table was placed: every row ends on its current replicas, and
-- the table's placement is the current topology (as after a rebalance).

-- The nodes that may hold a table's rows: those of its ring or map, and those
-- its recorded placement names.
CREATE FUNCTION ringshard_internal.rehome_nodes(table_name regclass) RETURNS text[]
	LANGUAGE ringshard_sql STABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
	SELECT coalesce(array_agg(x.node ORDER BY x.node COLLATE "C"), '{}')
	  FROM (SELECT t.node FROM ringshard.table_nodes t WHERE t.table_name = rehome_nodes.table_name
	        UNION
	        SELECT e->>'node' FROM ringshard.placements p,
	               json_array_elements(coalesce(p.snapshot->'members', p.snapshot->'assignments')) e
	         WHERE p.table_name = rehome_nodes.table_name) x;
$$;
COMMENT ON FUNCTION ringshard_internal.rehome_nodes(regclass) IS
	'rehome_rows(): the nodes that may hold a table''s rows (its ring or map, and its recorded placement), in name order';

-- The rows of one node that step 1 (misplaced) or step 2 (shared) of
-- rehome_rows() takes, as a condition on the node's table t; $1 is the node.
-- Built where the batches build theirs (src/fdw/deparse.c).
CREATE FUNCTION ringshard_internal.rehome_condition(shared boolean) RETURNS text
	AS 'MODULE_PATHNAME', 'ringshard_rehome_condition' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard_internal.rehome_condition(boolean) IS
	'rehome_rows(): the SQL condition on a node''s row t ($1: the node) for rows it is not a replica of, or (shared) rows it holds with other replicas';

-- The first transaction of rehome_rows(): checks, the topology pushed to
-- every node (so that each node routes as the coordinator does) and the
-- table defined there, then on each node the rows of step 1 and of step 2,
-- counted there.  Returns [{node, misplaced, shared}] in node order.
CREATE FUNCTION ringshard_internal.rehome_begin(table_name regclass, batch_size integer) RETURNS json
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	qualified text;
	annotation ringshard.distributed_tables;
	placed json;
	check_shared boolean;
	nodes text[];
	missing text;
	counted json;
BEGIN
	IF table_name IS NULL OR batch_size IS NULL OR batch_size < 1 THEN
		RAISE EXCEPTION 'rehome_rows needs a table and a positive batch size'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	qualified := ringshard.qualified_name(table_name);
	SELECT d.* INTO annotation FROM ringshard.distributed_tables d
	  JOIN pg_catalog.pg_foreign_table f ON f.ftrelid = d.table_name
	  JOIN pg_catalog.pg_foreign_server s ON s.oid = f.ftserver AND s.srvname = 'ringshard_cluster'
	 WHERE d.table_name = rehome_begin.table_name;
	IF NOT FOUND THEN
		RAISE EXCEPTION '% is not a distributed table', qualified
			USING ERRCODE = 'object_not_in_prerequisite_state',
			      HINT = 'Only the rows of a distributed table live on nodes; an annotated table''s rows stay where they are.';
	END IF;
	PERFORM ringshard_internal.refuse_queued_writes(table_name, qualified);
	IF EXISTS (SELECT FROM ringshard.rebalance_progress p WHERE p.table_name = rehome_begin.table_name) THEN
		RAISE EXCEPTION 'table % has an unfinished rebalance', qualified
			USING ERRCODE = 'object_not_in_prerequisite_state',
			      HINT = format('Finish it first with CALL ringshard.rebalance(%L).', qualified);
	END IF;
	-- Whether a row may have more replicas now than where it was put.
	SELECT p.snapshot INTO placed FROM ringshard.placements p WHERE p.table_name = rehome_begin.table_name;
	check_shared := coalesce(annotation.map_name IS NOT NULL
		OR placed IS NULL
		OR least((placed->>'replication_factor')::integer, json_array_length(placed->'members'))
		   < (SELECT least(r.replication_factor, (SELECT count(*) FROM ringshard.ring_members m WHERE m.ring_name = r.ring_name))
		        FROM ringshard.rings r WHERE r.ring_name = annotation.ring_name), true);
	nodes := ringshard_internal.rehome_nodes(table_name);
	SELECT string_agg(format('"%s"', x.node), ', ' ORDER BY x.node COLLATE "C") INTO missing
	  FROM unnest(nodes) x(node) LEFT JOIN ringshard.nodes n ON n.node_name = x.node
	 WHERE n.server_name IS NULL;
	IF missing IS NOT NULL THEN
		RAISE EXCEPTION 'rehome of % needs every node that may hold its rows, with an address', qualified
			USING ERRCODE = 'object_not_in_prerequisite_state',
			      DETAIL = format('Without an address: %s.', missing),
			      HINT = 'Give them one with ringshard.set_node_address().';
	END IF;
	PERFORM ringshard.sync_topology();
	PERFORM ringshard.push_table_definition(table_name);
	SELECT coalesce(json_agg(json_build_object('node', x.node,
	           'misplaced', ringshard_internal.node_value(x.node,
	               format('SELECT pg_catalog.count(*) FROM %s t WHERE %s', qualified, ringshard_internal.rehome_condition(false)),
	               ARRAY[x.node], false, 'bigint')::bigint,
	           'shared', CASE WHEN check_shared THEN ringshard_internal.node_value(x.node,
	               format('SELECT pg_catalog.count(*) FROM %s t WHERE %s', qualified, ringshard_internal.rehome_condition(true)),
	               ARRAY[x.node], false, 'bigint')::bigint ELSE 0 END) ORDER BY x.node COLLATE "C"), '[]')
	  INTO counted
	  FROM unnest(nodes) x(node);
	RAISE NOTICE 'rehome of %: % rows are on nodes that are not their replicas%', qualified,
		(SELECT coalesce(sum((c->>'misplaced')::bigint), 0) FROM json_array_elements(counted) c),
		coalesce((SELECT ' (' || string_agg(format('%s on "%s"', c->>'misplaced', c->>'node'), ', ') || ')'
		            FROM json_array_elements(counted) c WHERE (c->>'misplaced')::bigint > 0), '')
		|| CASE WHEN check_shared THEN format('; %s rows with other replicas are checked on them',
		                                (SELECT coalesce(sum((c->>'shared')::bigint), 0) FROM json_array_elements(counted) c))
		        ELSE '' END;
	RETURN counted;
END
$$;
COMMENT ON FUNCTION ringshard_internal.rehome_begin(regclass, integer) IS
	'rehome_rows(): checks, pushes the topology and the table to the nodes, and counts on each node the rows of step 1 (not its own) and of step 2 (shared with other replicas, where a row may have more replicas than where it was put); [{node, misplaced, shared}]';

-- One batch from one node, in C (src/operations/move_rows.c), the data path
-- rebalance shares.  Step 1 (shared false): up to batch_size of the rows it
-- is not a replica of, after after_ctid, in the order the node finds them
-- (it deletes them: the caller ends with a pass from the start, which finds
-- any the pages passed over).  Step 2: up to batch_size of the rows it holds
-- with other replicas, the next after after_ctid in position order.  The source sends the page's row
-- positions, keys and row digests (SHA-256 of the row's text, which every
-- node session prints alike); each other replica of a row (as the node
-- routes it) is asked, by key through its index, which it already holds;
-- the others are copied to it by COPY from the source, node to node, and
-- it is asked again; in step 1 the page is then deleted from the source.
-- Everything commits with the caller's transaction, on the nodes in two
-- phases.  Returns the rows taken (0 once there are none), the copies made,
-- the rows deleted, and the ctid the next batch of step 2 starts after.
CREATE FUNCTION ringshard_internal.rehome_batch(table_name regclass, source text, batch_size integer, shared boolean,
												after_ctid text,
												OUT taken bigint, OUT copied bigint, OUT deleted bigint, OUT last_ctid text)
	AS 'MODULE_PATHNAME', 'ringshard_rehome_batch' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION ringshard_internal.rehome_batch(regclass, text, integer, boolean, text) IS
	'rehome_rows(): copies up to batch_size of a node''s rows after after_ctid that it is not a replica of (then deletes them there) or (shared) that it shares with other replicas, to their other replicas where missing, node to node by COPY, and checks them; rows taken, copies made, rows deleted, the last ctid taken';

-- The last transaction of rehome_rows(): every row is on its replicas under
-- the current topology now, so that is the table's placement (as after a
-- rebalance), and nodes kept only for its rows are forgotten.
CREATE FUNCTION ringshard_internal.rehome_finish(table_name regclass) RETURNS void
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
BEGIN
	INSERT INTO ringshard.placements (table_name, snapshot) VALUES (table_name, ringshard_internal.placement_snapshot(table_name))
	    ON CONFLICT ON CONSTRAINT placements_pkey DO UPDATE SET snapshot = EXCLUDED.snapshot, placed_at = now();
	PERFORM ringshard_internal.forget_unused_nodes();
END
$$;
COMMENT ON FUNCTION ringshard_internal.rehome_finish(regclass) IS
	'rehome_rows(): records the table as laid out under the current topology and forgets the nodes nothing needs any more';

-- A progress line, at most every ringshard.rebalance_notice_interval.
-- Returns when the last line was printed.
CREATE FUNCTION ringshard_internal.rehome_report_progress(table_name regclass, node text, done bigint, total bigint,
														  last_notice timestamptz)
	RETURNS timestamptz
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
BEGIN
	IF clock_timestamp() < last_notice + coalesce(current_setting('ringshard.rebalance_notice_interval', true), '5s')::interval THEN
		RETURN last_notice;
	END IF;
	RAISE NOTICE 'rehome of %: node "%", rows % of %', ringshard.qualified_name(table_name), node, done, total;
	RETURN clock_timestamp();
END
$$;
COMMENT ON FUNCTION ringshard_internal.rehome_report_progress(regclass, text, bigint, bigint, timestamptz) IS
	'rehome_rows(): a NOTICE "node n, rows x of y" if ringshard.rebalance_notice_interval has passed since the last; returns the time of the last';

-- The move.  A procedure that commits cannot carry a SET clause: every
-- function is schema-qualified, types and operators are pg_catalog's, and
-- the work (and every relation) is in the helpers above.  Each loop is
-- bounded by the rows counted at the start (three more batches: rows that
-- changed meanwhile, and step 1's last pass from the start).
CREATE PROCEDURE ringshard.rehome_rows(table_name regclass, batch_size integer DEFAULT 1000)
	LANGUAGE plpgsql AS $$
DECLARE
	plan pg_catalog.json;
	sources pg_catalog.text[];
	misplaced pg_catalog.int8[];
	shared pg_catalog.int8[];
	i pg_catalog.int4;
	batches pg_catalog.int4;
	batch record;
	after_ctid pg_catalog.text;
	finished pg_catalog.bool;
	step_shared pg_catalog.bool;
	step_rows pg_catalog.int8;
	node_taken pg_catalog.int8;
	node_copied pg_catalog.int8;
	node_deleted pg_catalog.int8;
	total_copied pg_catalog.int8 := 0;
	total_deleted pg_catalog.int8 := 0;
	last_notice pg_catalog.timestamptz;
	report pg_catalog.text[] := '{}';
	all_taken pg_catalog.int8 := 0;
	all_total pg_catalog.int8;
BEGIN
	plan := ringshard_internal.rehome_begin(table_name, batch_size);
	sources := ARRAY(SELECT x OPERATOR(pg_catalog.->>) 'node' FROM pg_catalog.json_array_elements(plan) x);
	misplaced := ARRAY(SELECT (x OPERATOR(pg_catalog.->>) 'misplaced')::pg_catalog.int8 FROM pg_catalog.json_array_elements(plan) x);
	shared := ARRAY(SELECT (x OPERATOR(pg_catalog.->>) 'shared')::pg_catalog.int8 FROM pg_catalog.json_array_elements(plan) x);
	COMMIT;
	last_notice := pg_catalog.clock_timestamp();
	all_total := (SELECT pg_catalog.sum(m) FROM pg_catalog.unnest(misplaced) m) OPERATOR(pg_catalog.+)
	             (SELECT pg_catalog.sum(h) FROM pg_catalog.unnest(shared) h);
	FOR i IN 1 .. pg_catalog.cardinality(sources) LOOP
		node_taken := 0;
		node_copied := 0;
		node_deleted := 0;
		-- step 1 (the rows the node is not a replica of), then step 2 (the
		-- rows it shares with other replicas), each from the node's start;
		-- step 1 deletes what it takes, so it ends with a pass from the start,
		-- which finds what a page passed over
		FOREACH step_shared IN ARRAY ARRAY[false, true] LOOP
			step_rows := CASE WHEN step_shared THEN shared[i] ELSE misplaced[i] END;
			CONTINUE WHEN step_rows OPERATOR(pg_catalog.=) 0;
			after_ctid := '(0,0)';
			finished := false;
			FOR batches IN 1 .. (step_rows OPERATOR(pg_catalog./) batch_size)::pg_catalog.int4 OPERATOR(pg_catalog.+) 3 LOOP
				SELECT * INTO batch FROM ringshard_internal.rehome_batch(table_name, sources[i], batch_size, step_shared,
																		  after_ctid);
				COMMIT;
				IF batch.taken OPERATOR(pg_catalog.=) 0 THEN
					finished := step_shared OR after_ctid OPERATOR(pg_catalog.=) '(0,0)';
					EXIT WHEN finished;
					after_ctid := '(0,0)';
					CONTINUE;
				END IF;
				after_ctid := batch.last_ctid;
				node_taken := node_taken OPERATOR(pg_catalog.+) batch.taken;
				node_copied := node_copied OPERATOR(pg_catalog.+) batch.copied;
				node_deleted := node_deleted OPERATOR(pg_catalog.+) batch.deleted;
				all_taken := all_taken OPERATOR(pg_catalog.+) batch.taken;
				PERFORM ringshard_internal.progress_report('rehome_rows', table_name,
					pg_catalog.format(CASE WHEN step_shared THEN 'rows shared with other replicas, on node "%s"'
					                       ELSE 'rows not on their replicas, from node "%s"' END, sources[i]),
					all_taken, all_total);
				last_notice := ringshard_internal.rehome_report_progress(table_name, sources[i], node_taken,
					misplaced[i] OPERATOR(pg_catalog.+) shared[i], last_notice);
			END LOOP;
			IF NOT finished THEN
				RAISE EXCEPTION 'rehome of % did not finish on node "%": rows to move keep appearing there',
					ringshard.qualified_name(table_name), sources[i]
					USING ERRCODE = 'object_not_in_prerequisite_state',
					      HINT = 'Stop writes to the table while rows are rehomed, then call rehome_rows again: it resumes.';
			END IF;
		END LOOP;
		total_copied := total_copied OPERATOR(pg_catalog.+) node_copied;
		total_deleted := total_deleted OPERATOR(pg_catalog.+) node_deleted;
		IF node_copied OPERATOR(pg_catalog.>) 0 OR node_deleted OPERATOR(pg_catalog.>) 0 THEN
			report := report OPERATOR(pg_catalog.||) pg_catalog.format('"%s": %s moved away, %s copies made from it',
				sources[i], node_deleted, node_copied);
		END IF;
	END LOOP;
	PERFORM ringshard_internal.rehome_finish(table_name);
	COMMIT;
	PERFORM ringshard_internal.progress_done();
	RAISE NOTICE 'rehome of % complete: % rows moved to their replicas, % copies made%', ringshard.qualified_name(table_name),
		total_deleted, total_copied,
		CASE WHEN pg_catalog.cardinality(report) OPERATOR(pg_catalog.>) 0
		     THEN ' (' OPERATOR(pg_catalog.||) pg_catalog.array_to_string(report, '; ') OPERATOR(pg_catalog.||) ')' ELSE '' END;
END
$$;
COMMENT ON PROCEDURE ringshard.rehome_rows(regclass, integer) IS
	'puts every row of a distributed table on its replicas (after the update from 1.0, rows of keys whose bytes changed): copies where missing, checks, deletes where it does not belong, in committed batches of batch_size; resumable; prints what it moved';

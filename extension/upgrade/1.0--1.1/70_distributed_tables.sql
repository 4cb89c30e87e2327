-- The coordinator's 1.0 distributed tables: ordinary tables whose inserts
-- the trigger ringshard_route_write sent to the nodes.  Each becomes a 1.1
-- distributed table, a foreign table of server ringshard_cluster, as
-- create_distributed_table() makes one but without reaching a node: the
-- nodes keep their rows, and whatever runs this script need not reach them.
-- (A worker's tables, with the trigger ringshard_reject_misrouted_rows, are
-- 1.1's already.)  The new tables are the user's, not the extension's.
DO $tables$
DECLARE
	old_table regclass;
	new_table regclass;
	lost text;
	placed ringshard.placements;
	converted text[] := '{}';
BEGIN
	FOR old_table IN
		SELECT t.tgrelid::regclass FROM pg_catalog.pg_trigger t
		 WHERE t.tgname = 'ringshard_route_write' AND t.tgfoid = 'ringshard.route_write()'::regprocedure
		 ORDER BY t.tgrelid::regclass::text COLLATE "C"
	LOOP
		EXECUTE format('DROP TRIGGER ringshard_route_write ON %s', ringshard.qualified_name(old_table));
		IF NOT EXISTS (SELECT FROM ringshard.distributed_tables d WHERE d.table_name = old_table) THEN
			RAISE WARNING 'table % had the trigger of a 1.0 distributed table but is not annotated: it stays an ordinary table',
				ringshard.qualified_name(old_table)
				USING DETAIL = 'Its trigger, which could not route a row without the annotation, is dropped.';
			CONTINUE;
		END IF;
		-- what a foreign table cannot keep, and 1.0 never gave the nodes
		SELECT string_agg(x.what, ', ' ORDER BY x.what) INTO lost FROM (
			SELECT format('constraint %I', c.conname) AS what FROM pg_catalog.pg_constraint c
			 WHERE c.conrelid = old_table AND c.contype NOT IN ('c', 'n')
			UNION ALL
			SELECT format('index %I', i.indexrelid::regclass::text) FROM pg_catalog.pg_index i
			 WHERE i.indrelid = old_table
			   AND NOT EXISTS (SELECT FROM pg_catalog.pg_constraint c WHERE c.conindid = i.indexrelid)) x;
		SELECT * INTO placed FROM ringshard.placements p WHERE p.table_name = old_table;
		new_table := ringshard_internal.replace_1_0_distributed_table(old_table);
		EXECUTE format('ALTER EXTENSION ringshard DROP FOREIGN TABLE %s', ringshard.qualified_name(new_table));
		-- The placement 1.0 recorded says where the rows are: it stays, so that
		-- a topology change 1.0 did not rebalance yet is still rebalanced.
		IF placed.snapshot IS NOT NULL THEN
			UPDATE ringshard.placements p SET snapshot = placed.snapshot, placed_at = placed.placed_at
			 WHERE p.table_name = new_table;
			IF placed.snapshot::jsonb IS DISTINCT FROM ringshard_internal.placement_snapshot(new_table)::jsonb THEN
				RAISE WARNING 'distributed table % is laid out under an earlier topology than the current one', ringshard.qualified_name(new_table)
					USING DETAIL = 'Its ring or map changed under 1.0 and the table was not rebalanced since.',
					      HINT = format('Once its nodes run 1.1, CALL ringshard.rebalance(%1$L); or, if the update also warns that its keys route differently, CALL ringshard.rehome_rows(%1$L), which moves every row to its current replicas.',
					                    ringshard.qualified_name(new_table));
			END IF;
		END IF;
		UPDATE ringshard.dead_letters l SET table_name = new_table WHERE l.table_name = old_table;
		IF lost IS NOT NULL THEN
			RAISE WARNING 'distributed table % keeps no % on the coordinator', ringshard.qualified_name(new_table), lost
				USING DETAIL = 'A foreign table has no indexes or unique constraints, and 1.0 never created them on the nodes.',
				      HINT = 'Create them again with ALTER TABLE ... ADD CONSTRAINT or CREATE INDEX: in 1.1 they reach every node.';
		END IF;
		converted := converted || ringshard.qualified_name(new_table);
	END LOOP;
	IF cardinality(converted) > 0 THEN
		RAISE WARNING 'distributed tables % are foreign tables of server ringshard_cluster now; their nodes keep their rows',
			array_to_string(converted, ', ')
			USING HINT = format('Once every node runs 1.1 (ALTER EXTENSION ringshard UPDATE there), run %s.',
			                    (SELECT string_agg(format('SELECT ringshard.push_table_definition(%L)', t), '; ')
			                       FROM unnest(converted) t));
	END IF;
END
$tables$;
DROP FUNCTION ringshard.route_write();

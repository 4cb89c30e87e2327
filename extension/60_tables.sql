-- Annotated tables: a table, its sharding key column, and the ring or
-- partition map that places its rows.  The annotation follows renames (by
-- attribute number) and disappears with the table or the key column.

CREATE FUNCTION pg_catalog.shard_of(row_value record) RETURNS text
	AS 'MODULE_PATHNAME', 'ringshard_shard_of' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pg_catalog.shard_of(record) IS
	'the node that owns a row of an annotated table (ring owner, or first holder of its partition)';

CREATE FUNCTION pg_catalog.replicas_of(row_value record) RETURNS text[]
	AS 'MODULE_PATHNAME', 'ringshard_replicas_of' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pg_catalog.replicas_of(record) IS
	'every node that holds a row of an annotated table (ring replica set, or all holders of its partition)';

-- A table's name for SQL text: schema and name, each quoted as needed.
-- regclass output depends on the search_path of whoever prints it (a table
-- on that path prints unqualified), and a node resolves a bare name on its
-- own search_path: every name formatted into SQL, above all SQL sent to a
-- node, comes from here.
CREATE FUNCTION ringshard.qualified_name(table_name regclass) RETURNS text
	LANGUAGE ringshard_plpgsql STABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	qualified text;
BEGIN
	SELECT pg_catalog.quote_ident(n.nspname) || '.' || pg_catalog.quote_ident(c.relname) INTO qualified
	  FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
	 WHERE c.oid = table_name;
	IF qualified IS NULL THEN
		RAISE EXCEPTION 'relation with OID % does not exist', table_name::pg_catalog.oid
			USING ERRCODE = 'undefined_table';
	END IF;
	RETURN qualified;
END
$$;
COMMENT ON FUNCTION ringshard.qualified_name(regclass) IS
	'the table''s schema-qualified, quoted name, the same on any search_path (for SQL text, above all SQL sent to nodes)';

-- The live attribute number of a column, or an error naming it.
CREATE FUNCTION ringshard_internal.column_attnum(table_name regclass, column_name name) RETURNS smallint
	LANGUAGE ringshard_plpgsql STABLE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	found smallint;
BEGIN
	SELECT a.attnum INTO found FROM pg_catalog.pg_attribute a
	 WHERE a.attrelid = table_name AND a.attname = column_name AND a.attnum > 0 AND NOT a.attisdropped;
	IF found IS NULL THEN
		RAISE EXCEPTION 'column "%" of table % does not exist', column_name, table_name
			USING ERRCODE = 'undefined_column';
	END IF;
	RETURN found;
END
$$;
COMMENT ON FUNCTION ringshard_internal.column_attnum(regclass, name) IS 'the attribute number of a live user column, or an error';

-- Keep attribute numbers in step with names (on insert, and on restore).
-- The event triggers below fire it with the extension owner's rights: every
-- name is qualified, and pg_temp comes last so that no temporary object of
-- the user whose DDL fired them can stand in for a catalog or a type.
-- A key or keyspace column must be of a type whose keys route (docs/routing.md
-- §1): refused when the table is annotated, not at its first row.
CREATE FUNCTION ringshard_internal.check_key_column(table_name regclass, column_name name, column_type regtype,
													 role text) RETURNS void
	AS 'MODULE_PATHNAME', 'ringshard_check_key_column' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard_internal.check_key_column(regclass, name, regtype, text) IS
	'raises unless the column''s type has canonical key bytes (role: "sharding key" or "keyspace column", for the message)';

CREATE FUNCTION ringshard_internal.resolve_annotation_columns() RETURNS trigger
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
BEGIN
	IF (SELECT c.relkind FROM pg_catalog.pg_class c WHERE c.oid = NEW.table_name) NOT IN ('r', 'p', 'f') THEN
		RAISE EXCEPTION '% is not a table', NEW.table_name
			USING ERRCODE = 'wrong_object_type',
			      HINT = 'Annotate an ordinary, partitioned or foreign table.';
	END IF;
	NEW.key_attnum := ringshard_internal.column_attnum(NEW.table_name, NEW.key_column);
	NEW.keyspace_attnum := CASE WHEN NEW.keyspace_column IS NOT NULL
		THEN ringshard_internal.column_attnum(NEW.table_name, NEW.keyspace_column) END;
	PERFORM ringshard_internal.check_key_column(NEW.table_name, a.attname, a.atttypid, 'sharding key')
	   FROM pg_catalog.pg_attribute a WHERE a.attrelid = NEW.table_name AND a.attnum = NEW.key_attnum;
	PERFORM ringshard_internal.check_key_column(NEW.table_name, a.attname, a.atttypid, 'keyspace column')
	   FROM pg_catalog.pg_attribute a WHERE a.attrelid = NEW.table_name AND a.attnum = NEW.keyspace_attnum;
	RETURN NEW;
END
$$;
COMMENT ON FUNCTION ringshard_internal.resolve_annotation_columns() IS 'trigger: resolves key and keyspace column names to attribute numbers';
CREATE TRIGGER resolve_annotation_columns BEFORE INSERT OR UPDATE OF table_name, key_column, keyspace_column
	ON ringshard.distributed_tables FOR EACH ROW EXECUTE FUNCTION ringshard_internal.resolve_annotation_columns();

CREATE FUNCTION ringshard.distribute_table(table_name regclass, key_column name, ring text DEFAULT 'default')
	RETURNS text
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
BEGIN
	IF table_name IS NULL OR key_column IS NULL THEN
		RAISE EXCEPTION 'table and key column must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	PERFORM ringshard_internal.lock_ring(ring);
	IF EXISTS (SELECT FROM ringshard.distributed_tables d WHERE d.table_name = distribute_table.table_name) THEN
		RAISE EXCEPTION 'table % is already annotated', table_name
			USING ERRCODE = 'duplicate_object',
			      HINT = 'Remove the annotation first with ringshard.undistribute_table().';
	END IF;
	INSERT INTO ringshard.distributed_tables (table_name, key_column, key_attnum, ring_name)
	VALUES (table_name, key_column, 0, ring);
	RETURN format('table %s is placed by ring "%s" on column %I', table_name, ring, key_column);
END
$$;
COMMENT ON FUNCTION ringshard.distribute_table(regclass, name, text) IS
	'annotates a table: its rows are placed on a ring by the key column';

CREATE FUNCTION ringshard.distribute_table_by_partition(table_name regclass, key_column name,
														keyspace text DEFAULT NULL,
														map text DEFAULT 'default',
														keyspace_column name DEFAULT NULL)
	RETURNS text
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
BEGIN
	IF table_name IS NULL OR key_column IS NULL OR map IS NULL THEN
		RAISE EXCEPTION 'table, key column and map must not be null'
			USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF (keyspace IS NULL) = (keyspace_column IS NULL) THEN
		RAISE EXCEPTION 'give exactly one of keyspace and keyspace_column'
			USING ERRCODE = 'invalid_parameter_value',
			      HINT = 'A constant keyspace: keyspace => ''faces''; one per row: keyspace_column => ''keyspace_id''.';
	END IF;
	PERFORM ringshard_internal.lock_partition_map(map);
	IF EXISTS (SELECT FROM ringshard.distributed_tables d
				WHERE d.table_name = distribute_table_by_partition.table_name) THEN
		RAISE EXCEPTION 'table % is already annotated', table_name
			USING ERRCODE = 'duplicate_object',
			      HINT = 'Remove the annotation first with ringshard.undistribute_table().';
	END IF;
	INSERT INTO ringshard.distributed_tables (table_name, key_column, key_attnum, map_name, keyspace, keyspace_column)
	VALUES (table_name, key_column, 0, map, keyspace, keyspace_column);
	RETURN format('table %s is placed by partition map "%s" on column %I, keyspace %s', table_name, map, key_column,
	              coalesce(quote_literal(keyspace), format('from column %I', keyspace_column)));
END
$$;
COMMENT ON FUNCTION ringshard.distribute_table_by_partition(regclass, name, text, text, name) IS
	'annotates a table: its rows are placed by partition_for(keyspace, key) in a partition map; the keyspace is a constant or a column';

CREATE FUNCTION ringshard.undistribute_table(table_name regclass) RETURNS text
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
BEGIN
	IF table_name IS NULL THEN
		RAISE EXCEPTION 'table must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	DELETE FROM ringshard.distributed_tables d WHERE d.table_name = undistribute_table.table_name;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'table % is not annotated', table_name
			USING ERRCODE = 'undefined_object';
	END IF;
	RETURN format('table %s is no longer annotated; its data is untouched', table_name);
END
$$;
COMMENT ON FUNCTION ringshard.undistribute_table(regclass) IS 'removes a table''s annotation (its data is untouched)';

CREATE VIEW ringshard.annotated_tables AS
SELECT d.table_name, d.key_column,
	   CASE WHEN d.ring_name IS NOT NULL THEN 'ring' ELSE 'partition map' END AS placement,
	   coalesce(d.ring_name, d.map_name) AS placed_by,
	   d.keyspace, d.keyspace_column
  FROM ringshard.distributed_tables d;
COMMENT ON VIEW ringshard.annotated_tables IS 'tables annotated with a sharding key, and the ring or map that places them';

-- Event triggers: no dangling annotation after DROP or ALTER.
-- Event triggers fire for every user's DDL, while the catalog is writable
-- only by administrators: these run with the extension owner's rights.  The
-- user whose DDL fires them owns the session, and with it pg_temp: pg_temp
-- is pinned last in search_path (else it is searched first for relations
-- and types), and every relation, type and function is qualified, so that a
-- temporary view named pg_attribute or a temporary domain named regclass
-- cannot run that user's code with the owner's rights.
CREATE FUNCTION ringshard_internal.forget_dropped_tables() RETURNS event_trigger
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	dropped record;
	forgotten boolean := false;
BEGIN
	FOR dropped IN SELECT o.objid, o.objsubid FROM pg_catalog.pg_event_trigger_dropped_objects() o
				   WHERE o.object_type IN ('table', 'table column', 'foreign table', 'foreign table column') LOOP
		IF dropped.objsubid = 0 THEN
			DELETE FROM ringshard.distributed_tables d WHERE d.table_name::pg_catalog.oid = dropped.objid;
			forgotten := forgotten OR FOUND;
			-- A later table may get the same OID: it must not inherit the
			-- dropped one's placement or unfinished rebalance.
			DELETE FROM ringshard.placements p WHERE p.table_name::pg_catalog.oid = dropped.objid;
			forgotten := forgotten OR FOUND;
			DELETE FROM ringshard.rebalance_progress p WHERE p.table_name::pg_catalog.oid = dropped.objid;
		ELSE
			DELETE FROM ringshard.distributed_tables d
			 WHERE d.table_name::pg_catalog.oid = dropped.objid
			   AND dropped.objsubid IN (d.key_attnum, d.keyspace_attnum);
			IF FOUND THEN
				RAISE NOTICE 'table % is no longer annotated: its sharding key column was dropped',
					dropped.objid::pg_catalog.regclass;
			END IF;
		END IF;
	END LOOP;
	-- Nodes kept only for the dropped table's rows are not needed any more.
	IF forgotten THEN
		PERFORM ringshard_internal.forget_unused_nodes();
	END IF;
END
$$;
COMMENT ON FUNCTION ringshard_internal.forget_dropped_tables() IS
	'event trigger: drops the annotation, placement and unfinished rebalance of a dropped table, and the annotation of a table whose key column was dropped';
CREATE EVENT TRIGGER ringshard_forget_dropped_tables ON sql_drop
	EXECUTE FUNCTION ringshard_internal.forget_dropped_tables();

CREATE FUNCTION ringshard_internal.follow_renamed_columns() RETURNS event_trigger
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER SET search_path = pg_catalog, ringshard, pg_temp AS $$
BEGIN
	UPDATE ringshard.distributed_tables d
	   SET key_column = (SELECT a.attname FROM pg_catalog.pg_attribute a WHERE a.attrelid = d.table_name AND a.attnum = d.key_attnum),
	       keyspace_column = (SELECT a.attname FROM pg_catalog.pg_attribute a WHERE a.attrelid = d.table_name AND a.attnum = d.keyspace_attnum)
	 WHERE d.table_name::pg_catalog.oid IN (SELECT c.objid FROM pg_catalog.pg_event_trigger_ddl_commands() c
	                                          WHERE c.classid = 'pg_catalog.pg_class'::pg_catalog.regclass)
	   AND (d.key_column IS DISTINCT FROM (SELECT a.attname FROM pg_catalog.pg_attribute a WHERE a.attrelid = d.table_name AND a.attnum = d.key_attnum)
	        OR d.keyspace_column IS DISTINCT FROM (SELECT a.attname FROM pg_catalog.pg_attribute a WHERE a.attrelid = d.table_name AND a.attnum = d.keyspace_attnum));
END
$$;
COMMENT ON FUNCTION ringshard_internal.follow_renamed_columns() IS 'event trigger: keeps annotation column names in step with ALTER TABLE ... RENAME';
CREATE EVENT TRIGGER ringshard_follow_renamed_columns ON ddl_command_end
	WHEN TAG IN ('ALTER TABLE', 'ALTER FOREIGN TABLE')
	EXECUTE FUNCTION ringshard_internal.follow_renamed_columns();

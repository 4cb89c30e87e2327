-- Keys whose bytes changed (docs/routing.md §1, docs/upgrading.md#keys-that-route-differently).
-- A WARNING per annotated table whose key, or keyspace column, is of a type
-- that 1.1 routes by other bytes than 1.0 did.
DO $keys$
DECLARE
	changed record;
	utf8 boolean := pg_catalog.getdatabaseencoding() IN ('UTF8', 'SQL_ASCII');
BEGIN
	FOR changed IN
		WITH RECURSIVE columns AS (
			SELECT d.table_name, 'key' AS role, a.attname, a.atttypid AS type_oid, a.atttypid AS base_oid,
			       c.relkind = 'f' AS distributed
			  FROM ringshard.distributed_tables d
			  JOIN pg_catalog.pg_class c ON c.oid = d.table_name
			  JOIN pg_catalog.pg_attribute a ON a.attrelid = d.table_name AND a.attnum = d.key_attnum
			UNION ALL
			SELECT d.table_name, 'keyspace column', a.attname, a.atttypid, a.atttypid, c.relkind = 'f'
			  FROM ringshard.distributed_tables d
			  JOIN pg_catalog.pg_class c ON c.oid = d.table_name
			  JOIN pg_catalog.pg_attribute a ON a.attrelid = d.table_name AND a.attnum = d.keyspace_attnum),
		based AS (
			SELECT c.table_name, c.role, c.attname, c.type_oid, c.base_oid, c.distributed, 0 AS depth FROM columns c
			UNION ALL
			SELECT b.table_name, b.role, b.attname, b.type_oid, t.typbasetype, b.distributed, b.depth + 1
			  FROM based b JOIN pg_catalog.pg_type t ON t.oid = b.base_oid
			 WHERE t.typtype = 'd' AND b.depth < 32)
		SELECT b.table_name, b.role, b.attname, pg_catalog.format_type(b.type_oid, NULL) AS type_name, b.distributed,
		       CASE
		         WHEN t.typname IN ('int2', 'int4', 'int8', 'uuid', 'bool', 'bytea') AND t.typnamespace = 'pg_catalog'::regnamespace
		           THEN NULL
		         WHEN (t.typname IN ('text', 'varchar', 'name') AND t.typnamespace = 'pg_catalog'::regnamespace) OR t.typtype = 'e'
		           THEN CASE WHEN NOT utf8 THEN 'non-ASCII text is routed by its UTF-8 bytes now, not by the database encoding''s' END
		         WHEN t.typname = 'bpchar' AND t.typnamespace = 'pg_catalog'::regnamespace
		           -- 1.0 already took a keyspace column of type char(n) without its padding
		           THEN CASE WHEN b.role = 'key' THEN 'a char(n) key is routed without its trailing spaces now' END
		         WHEN t.typname = 'numeric' AND t.typnamespace = 'pg_catalog'::regnamespace
		           THEN 'a numeric value is routed without trailing zeros now (1.50 as 1.5)'
		         WHEN t.typname IN ('date', 'timestamp') AND t.typnamespace = 'pg_catalog'::regnamespace
		           THEN 'a date or timestamp is routed in ISO form now, whatever the DateStyle of the session'
		         WHEN t.typname = 'timestamptz' AND t.typnamespace = 'pg_catalog'::regnamespace
		           THEN 'a timestamptz is routed as its instant in UTC now, whatever the TimeZone of the session'
		         -- other types stopped the update (10_prepare.sql)
		       END AS reason
		  FROM based b JOIN pg_catalog.pg_type t ON t.oid = b.base_oid
		 WHERE t.typtype <> 'd'
		 ORDER BY b.table_name::text COLLATE "C", b.role
	LOOP
		CONTINUE WHEN changed.reason IS NULL;
		RAISE WARNING '% % routes differently in ringshard 1.1: %', CASE WHEN changed.distributed THEN 'distributed table' ELSE 'table' END,
			ringshard.qualified_name(changed.table_name), changed.reason
			USING DETAIL = format('Its %s %I is of type %s.', changed.role, changed.attname, changed.type_name),
			      HINT = CASE
			        WHEN changed.distributed
			          THEN format('Rows stored under such keys may be on nodes that are not their replicas now: once every node runs 1.1, run SELECT ringshard.push_table_definition(%1$L); then CALL ringshard.rehome_rows(%1$L);',
			                      ringshard.qualified_name(changed.table_name))
			        ELSE 'Its rows stay where they are; shard_of() and replicas_of() answer by the new bytes.' END;
	END LOOP;
END
$keys$;

-- Every file starts from a fresh extension: the suite shares one database.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS ringshard CASCADE;
CREATE EXTENSION ringshard;
RESET client_min_messages;
--
-- definer_hijack: the event triggers run with the extension owner's rights
-- on every user's DDL.  An ordinary role that owns an annotated table shadows
-- every catalog, ringshard relation and type name those functions (and the
-- triggers they fire) could look up, with temporary views and domains that
-- run its code, and then runs each kind of DDL that fires them.  Its code
-- must never run with other rights: the role stays an ordinary role, and
-- the annotations end exactly as without the shadows.  A control at the end
-- shows that the same shadows do take over a function that leaves pg_temp
-- out of its search_path.
--
\set SHOW_CONTEXT never

-- Roles are cluster-wide: start from none (a failed earlier run may have left one).
SET client_min_messages = warning;
DO $$
BEGIN
	IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'regress_ringshard_alice') THEN
		EXECUTE 'DROP OWNED BY regress_ringshard_alice';
		EXECUTE 'DROP ROLE regress_ringshard_alice';
	END IF;
END
$$;
DROP TABLE IF EXISTS public.hijack_log;
RESET client_min_messages;
CREATE ROLE regress_ringshard_alice;
CREATE SCHEMA alice_space AUTHORIZATION regress_ringshard_alice;
-- Every run of the role's code, with the role it ran as.
CREATE TABLE public.hijack_log (ran_as name, via text);
GRANT INSERT ON public.hijack_log TO regress_ringshard_alice;
-- After each attack, in a session without the role's temporary objects:
-- is the role still ordinary, and what of its code ran as anyone else?
-- Then the slate is wiped, so that each attack is judged on its own.
CREATE FUNCTION public.hijack_check(label text)
	RETURNS TABLE (attack text, alice_is_superuser boolean, ran_with_other_rights text)
	LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	attack := label;
	alice_is_superuser := (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = 'regress_ringshard_alice');
	ran_with_other_rights := (SELECT pg_catalog.string_agg(DISTINCT l.via, ', ' ORDER BY l.via)
	                            FROM public.hijack_log l WHERE l.ran_as <> 'regress_ringshard_alice');
	RETURN NEXT;
	ALTER ROLE regress_ringshard_alice NOSUPERUSER;
	DELETE FROM public.hijack_log;
END
$$;

-- The role's table, annotated by an administrator (by ring), and a second
-- one placed by partition map with a keyspace column.
SET ROLE regress_ringshard_alice;
CREATE TABLE alice_space.alice_t (id bigint, note text, extra integer);
INSERT INTO alice_space.alice_t SELECT g, 'n' || g, g FROM generate_series(1, 20) g;
CREATE TABLE alice_space.alice_p (ks text, face_id text, extra integer);
INSERT INTO alice_space.alice_p SELECT 'faces', 'face-' || g, g FROM generate_series(1, 20) g;

-- The code that would run with stolen rights: it logs the role it runs as,
-- and makes the role a superuser if it runs as one.
CREATE FUNCTION alice_space.pwn(via text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO public.hijack_log VALUES (current_user, via);
	IF (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = current_user) THEN
		EXECUTE 'ALTER ROLE regress_ringshard_alice SUPERUSER';
	END IF;
	RETURN true;
END
$$;
CREATE FUNCTION alice_space.pwn_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM alice_space.pwn('write to ' || TG_TABLE_NAME);
	RETURN NULL;
END
$$;
-- The shadows, created in the calling session's pg_temp: views with the
-- columns of the catalogs and of ringshard's relations that run the code
-- when read (and instead of any write), and domains named after the types
-- that run it on every cast.
CREATE FUNCTION alice_space.arm() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	shadowed text;
	columns text;
BEGIN
	FOREACH shadowed IN ARRAY ARRAY['pg_attribute', 'pg_class', 'pg_namespace', 'pg_trigger', 'pg_roles',
	                                'pg_proc', 'pg_depend', 'pg_extension', 'pg_stat_activity'] LOOP
		-- every column but those of pseudo-types (a view cannot have them)
		SELECT pg_catalog.string_agg(pg_catalog.quote_ident(a.attname), ', ' ORDER BY a.attnum)
		  INTO columns
		  FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
		 WHERE a.attrelid = ('pg_catalog.' || shadowed)::pg_catalog.regclass AND a.attnum > 0 AND t.typtype <> 'p';
		EXECUTE pg_catalog.format('CREATE TEMP VIEW %I AS SELECT %s FROM pg_catalog.%I WHERE alice_space.pwn(%L)',
		                          shadowed, columns, shadowed, 'read ' || shadowed);
	END LOOP;
	FOREACH shadowed IN ARRAY ARRAY['rings', 'nodes', 'ring_members', 'partition_maps', 'partition_assignments',
	                                'distributed_tables', 'placements', 'rebalance_progress', 'cluster_state',
	                                'write_queue', 'annotated_tables'] LOOP
		SELECT pg_catalog.string_agg(pg_catalog.format('NULL::%s AS %I', pg_catalog.format_type(a.atttypid, a.atttypmod), a.attname),
		                             ', ' ORDER BY a.attnum)
		  INTO columns
		  FROM pg_catalog.pg_attribute a
		 WHERE a.attrelid = ('ringshard.' || shadowed)::pg_catalog.regclass AND a.attnum > 0 AND NOT a.attisdropped;
		EXECUTE pg_catalog.format('CREATE TEMP VIEW %I AS SELECT %s WHERE alice_space.pwn(%L)',
		                          shadowed, columns, 'read ' || shadowed);
		EXECUTE pg_catalog.format('CREATE TRIGGER pwn INSTEAD OF INSERT OR UPDATE OR DELETE ON pg_temp.%I
		                           FOR EACH ROW EXECUTE FUNCTION alice_space.pwn_trigger()', shadowed);
	END LOOP;
	FOREACH shadowed IN ARRAY ARRAY['regclass', 'regprocedure', 'oid', 'name', 'text', 'json', 'jsonb',
	                                'int2', 'int4', 'int8', 'bool', 'ringtoken'] LOOP
		EXECUTE pg_catalog.format('CREATE DOMAIN pg_temp.%I AS pg_catalog.%I CHECK (alice_space.pwn(%L))',
		                          shadowed, shadowed, 'cast to ' || shadowed);
	END LOOP;
END
$$;
RESET ROLE;
SELECT ringshard.distribute_table('alice_space.alice_t', 'id');
SELECT ringshard.distribute_table_by_partition('alice_space.alice_p', 'face_id', keyspace_column => 'ks');
SELECT table_name, key_column, keyspace_column FROM ringshard.annotated_tables ORDER BY 1::text;

-- Each attack runs in a fresh session (nothing cached from before the
-- shadows exist), and is checked from another fresh one.
--
-- 1. The report's attack: any ALTER TABLE fires follow_renamed_columns,
--    which reads pg_attribute.
\c
SET ROLE regress_ringshard_alice;
SELECT alice_space.arm();
ALTER TABLE alice_space.alice_t ALTER COLUMN note SET DEFAULT 'x';
\c
SELECT * FROM public.hijack_check('ALTER COLUMN SET DEFAULT');

-- 2. Renaming the key column: follow_renamed_columns updates the annotation,
--    which fires resolve_annotation_columns (pg_class) and column_attnum.
\c
SET ROLE regress_ringshard_alice;
SELECT alice_space.arm();
ALTER TABLE alice_space.alice_t RENAME COLUMN id TO account_id;
\c
SELECT * FROM public.hijack_check('RENAME key column');
SELECT key_column, key_attnum FROM ringshard.distributed_tables WHERE table_name = 'alice_space.alice_t'::regclass;

-- 3. Renaming the keyspace column of the map-placed table.
\c
SET ROLE regress_ringshard_alice;
SELECT alice_space.arm();
ALTER TABLE alice_space.alice_p RENAME COLUMN ks TO keyspace_id;
\c
SELECT * FROM public.hijack_check('RENAME keyspace column');
SELECT key_column, keyspace_column, keyspace_attnum FROM ringshard.distributed_tables
 WHERE table_name = 'alice_space.alice_p'::regclass;

-- 4. Dropping a column that is not a key: forget_dropped_tables runs and
--    keeps the annotation.
\c
SET ROLE regress_ringshard_alice;
SELECT alice_space.arm();
ALTER TABLE alice_space.alice_t DROP COLUMN extra;
\c
SELECT * FROM public.hijack_check('DROP COLUMN (not a key)');
SELECT count(*) AS still_annotated FROM ringshard.distributed_tables WHERE table_name = 'alice_space.alice_t'::regclass;

-- 5. Dropping the keyspace column: the annotation goes, with a notice that
--    names the table.
\c
SET ROLE regress_ringshard_alice;
SELECT alice_space.arm();
ALTER TABLE alice_space.alice_p DROP COLUMN keyspace_id;
\c
SELECT * FROM public.hijack_check('DROP COLUMN (keyspace)');
SELECT count(*) AS still_annotated FROM ringshard.distributed_tables WHERE table_name = 'alice_space.alice_p'::regclass;

-- 6. Dropping the annotated table.
\c
SET ROLE regress_ringshard_alice;
SELECT alice_space.arm();
DROP TABLE alice_space.alice_t;
\c
SELECT * FROM public.hijack_check('DROP TABLE');
SELECT count(*) AS annotations_left FROM ringshard.distributed_tables;

-- The catalog is as an administrator left it, apart from what the DDL
-- itself removed.
SELECT (SELECT count(*) FROM ringshard.rings) AS rings,
       (SELECT count(*) FROM ringshard.nodes) AS nodes,
       (SELECT count(*) FROM ringshard.partition_maps) AS maps;

-- Control: the same shadows do take over a security definer function whose
-- search_path leaves pg_temp out (so the checks above can fail).
CREATE FUNCTION public.naive_definer() RETURNS bigint
	LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog AS $$
	SELECT count(*) FROM pg_attribute a WHERE a.attrelid = 'pg_catalog.pg_class'::regclass
$$;
GRANT EXECUTE ON FUNCTION public.naive_definer() TO regress_ringshard_alice;
\c
SET ROLE regress_ringshard_alice;
SELECT alice_space.arm();
SELECT public.naive_definer() > 0 AS ran;
\c
SELECT * FROM public.hijack_check('control: search_path without pg_temp');

--
-- Every pinned search_path of the extension puts pg_temp last, explicitly.
--
SELECT count(*) > 0 AS some_pinned,
       count(*) FILTER (WHERE c.setting NOT LIKE '%, pg\_temp') AS pg_temp_not_last
FROM pg_proc p
JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'ringshard',
     unnest(p.proconfig) c(setting)
WHERE c.setting LIKE 'search\_path=%';

-- Clean up
DROP FUNCTION public.naive_definer();
DROP FUNCTION public.hijack_check(text);
DROP TABLE public.hijack_log;
SELECT ringshard.undistribute_table(table_name) FROM ringshard.distributed_tables;
DROP OWNED BY regress_ringshard_alice;
DROP ROLE regress_ringshard_alice;
SELECT count(*) AS roles_left FROM pg_roles WHERE rolname LIKE 'regress_ringshard_%';

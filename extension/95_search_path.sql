-- pg_temp last in every pinned search_path.  A search_path that does not
-- name pg_temp searches it FIRST for relations and types, so a function
-- pinned to "pg_catalog, ringshard" still lets the calling session's
-- temporary view pg_attribute or temporary domain regclass stand in for the
-- real ones; run with other rights (a security definer function, an event
-- trigger, a trigger fired from one), that is the caller's code with those
-- rights.  Every function of the extension that pins a search_path says
-- "..., pg_temp" in its source; this check runs last and refuses to install
-- a script in which one does not, so a function added without it fails the
-- build's tests instead of shipping.  (The update from 1.1 first appends
-- pg_temp to the functions 1.1 left without it: upgrade/1.1--1.2.)
-- Likewise, a function of ringshard or ringshard_internal that pins its
-- search_path is an administration function or one of its helpers, and is
-- written in ringshard_plpgsql or ringshard_sql (00_setup.sql), not plpgsql
-- or sql, so that a user's error in it comes without internal CONTEXT lines.
DO $check$
DECLARE
	missing text;
BEGIN
	SELECT pg_catalog.string_agg(p.oid::pg_catalog.regprocedure::text || ' (' || c.setting || ')', ', '
	                             ORDER BY p.oid::pg_catalog.regprocedure::text)
	  INTO missing
	  FROM pg_catalog.pg_proc p
	  JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND d.objid = p.oid
	                             AND d.deptype = 'e'
	  JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid AND e.extname = 'ringshard',
	       pg_catalog.unnest(p.proconfig) c(setting)
	 WHERE c.setting LIKE 'search\_path=%'
	   AND c.setting NOT LIKE '%, pg\_temp';
	IF missing IS NOT NULL THEN
		RAISE EXCEPTION 'functions of ringshard pin a search_path without pg_temp last: %', missing
			USING HINT = 'Write "SET search_path = pg_catalog, ringshard, pg_temp" in the function''s definition.';
	END IF;
	SELECT pg_catalog.string_agg(p.oid::pg_catalog.regprocedure::text || ' (' || l.lanname || ')', ', '
	                             ORDER BY p.oid::pg_catalog.regprocedure::text)
	  INTO missing
	  FROM pg_catalog.pg_proc p
	  JOIN pg_catalog.pg_language l ON l.oid = p.prolang
	  JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
	  JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND d.objid = p.oid
	                             AND d.deptype = 'e'
	  JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid AND e.extname = 'ringshard'
	 WHERE p.proconfig IS NOT NULL
	   AND n.nspname IN ('ringshard', 'ringshard_internal')
	   AND l.lanname IN ('plpgsql', 'sql');
	IF missing IS NOT NULL THEN
		RAISE EXCEPTION 'administration functions of ringshard are written in plpgsql or sql: %', missing
			USING HINT = 'Write "LANGUAGE ringshard_plpgsql" or "LANGUAGE ringshard_sql" in the function''s definition.';
	END IF;
END
$check$;

-- pg_temp last in every pinned search_path.  A search_path that does not
-- name pg_temp searches it FIRST for relations and types, so a function
-- pinned to "pg_catalog, ringshard" still lets the calling session's
-- temporary view pg_attribute or temporary domain regclass stand in for the
-- real ones; run with other rights (a security definer function, an event
-- trigger, a trigger fired from one), that is the caller's code with those
-- rights.  Every function of the extension that pins a search_path is meant
-- to say "..., pg_temp" itself; this sweep appends it to any that does not
-- (pieces of the script maintained elsewhere, and any function added later
-- without it), so that none is left behind.  It runs last and changes
-- nothing for a function that is already right.
DO $sweep$
DECLARE
	f record;
	wanted text;
BEGIN
	FOR f IN
		SELECT p.oid::pg_catalog.regprocedure AS func, p.prokind, c.setting
		  FROM pg_catalog.pg_proc p
		  JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND d.objid = p.oid
		                             AND d.deptype = 'e'
		  JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid AND e.extname = 'ringshard',
		       pg_catalog.unnest(p.proconfig) c(setting)
		 WHERE c.setting LIKE 'search\_path=%'
	LOOP
		SELECT pg_catalog.string_agg(s.part, ', ' ORDER BY s.i) || ', pg_temp' INTO wanted
		  FROM pg_catalog.unnest(pg_catalog.string_to_array(pg_catalog.substr(f.setting, 13), ','))
		       WITH ORDINALITY s0(raw, i),
		       LATERAL (SELECT pg_catalog.btrim(s0.raw) AS part, s0.i) s
		 WHERE s.part <> 'pg_temp';
		IF 'search_path=' || wanted IS DISTINCT FROM f.setting THEN
			EXECUTE pg_catalog.format('ALTER %s %s SET search_path = %s',
				CASE f.prokind WHEN 'p' THEN 'PROCEDURE' ELSE 'FUNCTION' END, f.func, wanted);
		END IF;
	END LOOP;
END
$sweep$;

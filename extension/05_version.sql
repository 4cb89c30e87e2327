-- Versions: the extension's SQL objects in this database, and the shared
-- library.  The library refuses to work with SQL objects of another version
-- (src/admin/version.c); this function still answers, to show the mismatch.

CREATE FUNCTION ringshard.version(OUT sql_version text, OUT library_version text,
								  OUT postgresql text, OUT build_options text)
	RETURNS record
	AS 'MODULE_PATHNAME', 'ringshard_version' LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION ringshard.version() IS
	'the extension''s SQL version in this database (extversion), the shared library''s version, the PostgreSQL it was built for, and its build options';

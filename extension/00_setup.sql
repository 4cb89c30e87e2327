-- ringshard install script.  Assembled from extension/*.sql in name order;
-- the routing functions and the ringtoken type live in pg_catalog so that
-- they work unqualified on any search_path, administration in ringshard.

\echo Use "CREATE EXTENSION ringshard" to load this file. \quit

-- Members of ringshard_admin may change topology; PUBLIC may only route.
DO $setup$
BEGIN
	IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'ringshard_admin') THEN
		CREATE ROLE ringshard_admin NOLOGIN;
	END IF;
END
$setup$;

-- The schema belongs to the extension, so DROP EXTENSION removes it too.
CREATE SCHEMA ringshard;
COMMENT ON SCHEMA ringshard IS 'ringshard administration and catalog';
GRANT USAGE ON SCHEMA ringshard TO PUBLIC;

-- The extension's own helpers (locks, checks, triggers, the steps of a
-- rebalance, the node side of create_distributed_table) live apart, out of
-- the way of \df ringshard.*: only administrators, whose functions call
-- them, may use the schema.
CREATE SCHEMA ringshard_internal;
COMMENT ON SCHEMA ringshard_internal IS 'ringshard''s internal helpers, called by its administration functions and triggers';
REVOKE ALL ON SCHEMA ringshard_internal FROM PUBLIC;
GRANT USAGE ON SCHEMA ringshard_internal TO ringshard_admin;

-- The languages of the administration functions and their helpers: PL/pgSQL
-- and SQL, compiled, validated and run by PostgreSQL's own handlers, except
-- that an error a user caused (a bad argument, a missing object, ...) leaves
-- the function without the CONTEXT lines collected inside it: the user sees
-- the error as from a built-in function, not a trace through ringshard's
-- internals (src/admin/admin_errors.c).  Every function of ringshard and
-- ringshard_internal that pins its search_path is written in one of them
-- (95_search_path.sql checks).
CREATE FUNCTION ringshard_internal.plpgsql_call_handler() RETURNS language_handler
	AS 'MODULE_PATHNAME', 'ringshard_plpgsql_call_handler' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION ringshard_internal.plpgsql_call_handler() IS 'the call handler of LANGUAGE ringshard_plpgsql: PL/pgSQL whose user errors come without internal CONTEXT lines';
CREATE FUNCTION ringshard_internal.sql_call_handler() RETURNS language_handler
	AS 'MODULE_PATHNAME', 'ringshard_sql_call_handler' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION ringshard_internal.sql_call_handler() IS 'the call handler of LANGUAGE ringshard_sql: SQL whose user errors come without internal CONTEXT lines';
-- The validators are PL/pgSQL's and SQL's own, called through functions of
-- the extension so that pg_dump (and so pg_upgrade) writes the languages
-- whole: it names a language's handler and validator only if it dumps both.
CREATE FUNCTION ringshard_internal.plpgsql_validator(function_oid oid) RETURNS void
	AS 'MODULE_PATHNAME', 'ringshard_plpgsql_validator' LANGUAGE C VOLATILE PARALLEL UNSAFE STRICT;
COMMENT ON FUNCTION ringshard_internal.plpgsql_validator(oid) IS 'the validator of LANGUAGE ringshard_plpgsql: PL/pgSQL''s own';
CREATE FUNCTION ringshard_internal.sql_validator(function_oid oid) RETURNS void
	AS 'MODULE_PATHNAME', 'ringshard_sql_validator' LANGUAGE C VOLATILE PARALLEL UNSAFE STRICT;
COMMENT ON FUNCTION ringshard_internal.sql_validator(oid) IS 'the validator of LANGUAGE ringshard_sql: SQL''s own';
CREATE LANGUAGE ringshard_plpgsql HANDLER ringshard_internal.plpgsql_call_handler VALIDATOR ringshard_internal.plpgsql_validator;
COMMENT ON LANGUAGE ringshard_plpgsql IS 'PL/pgSQL for ringshard''s administration functions: a user''s error comes without CONTEXT lines from inside them';
CREATE LANGUAGE ringshard_sql HANDLER ringshard_internal.sql_call_handler VALIDATOR ringshard_internal.sql_validator;
COMMENT ON LANGUAGE ringshard_sql IS 'SQL for ringshard''s administration functions: a user''s error comes without CONTEXT lines from inside them';

-- What a worker runs for its coordinator (reads_here and token_in_ranges in
-- the SQL of a fan-out, the misrouted-row trigger, apply_topology), apart
-- too: every role that reads through the coordinator calls the first two on
-- the nodes, so the schema is everyone's to use.
CREATE SCHEMA ringshard_worker;
COMMENT ON SCHEMA ringshard_worker IS 'what a worker runs for its coordinator: the fan-out filters, the misrouted-row trigger, apply_topology';
GRANT USAGE ON SCHEMA ringshard_worker TO PUBLIC;

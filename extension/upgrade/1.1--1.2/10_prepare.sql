-- Update from 1.1 to 1.2 (docs/upgrading.md).  One transaction: any error
-- leaves the database as 1.1 left it.  What 1.2 removed, or whose
-- signature or result type it changed, is dropped here; 50_definitions.sql
-- then gives every function, view and comment its 1.2 text.

-- node_health() has two more columns (role, host).
DROP FUNCTION ringshard.node_health();
-- node_value() checks the type of the value it reads (a fifth argument).
DROP FUNCTION ringshard_internal.node_value(text, text, text[], boolean);
-- rehome_batch() is C, and says which step it runs (its own argument).
DROP FUNCTION ringshard_internal.rehome_batch(regclass, text, integer, text);

-- The languages of the administration functions (00_setup.sql), before
-- 50_definitions.sql writes those functions in them.
--@copy CREATE FUNCTION ringshard_internal.plpgsql_call_handler
--@copy CREATE FUNCTION ringshard_internal.sql_call_handler
--@copy CREATE FUNCTION ringshard_internal.plpgsql_validator
--@copy CREATE FUNCTION ringshard_internal.sql_validator
--@copy CREATE LANGUAGE

-- What a worker runs for its coordinator moves out of \df ringshard.* into
-- its own schema, the wrapper's handler and validator into the internal one:
-- moved (not dropped and made again), so the triggers on the workers' tables
-- and the wrapper keep them.  50_definitions.sql then gives them their 1.2
-- text in the new schemas, and 90_finish.sql their privileges.
CREATE SCHEMA ringshard_worker;
COMMENT ON SCHEMA ringshard_worker IS 'what a worker runs for its coordinator: the fan-out filters, the misrouted-row trigger, apply_topology';
GRANT USAGE ON SCHEMA ringshard_worker TO PUBLIC;
ALTER FUNCTION ringshard.apply_topology(json, text, bigint) SET SCHEMA ringshard_worker;
ALTER FUNCTION ringshard.reads_here(regclass, "any", text[], bigint) SET SCHEMA ringshard_worker;
ALTER FUNCTION ringshard.reads_here(regclass, "any", "any", text[], bigint) SET SCHEMA ringshard_worker;
ALTER FUNCTION ringshard.reject_misrouted_rows() SET SCHEMA ringshard_worker;
ALTER FUNCTION ringshard.fdw_handler() SET SCHEMA ringshard_internal;
ALTER FUNCTION ringshard.fdw_validator(text[], oid) SET SCHEMA ringshard_internal;

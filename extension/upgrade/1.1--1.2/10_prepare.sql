-- Update from 1.1 to 1.2 (docs/upgrading.md).  One transaction: any error
-- leaves the database as 1.1 left it.  What 1.2 removed, or whose
-- signature or result type it changed, is dropped here; 50_definitions.sql
-- then gives every function, view and comment its 1.2 text.

-- node_health() has two more columns (role, host).
DROP FUNCTION ringshard.node_health();
-- node_value() checks the type of the value it reads (a fifth argument).
DROP FUNCTION ringshard_internal.node_value(text, text, text[], boolean);

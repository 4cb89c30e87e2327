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

-- What a worker runs for its coordinator (reads_here and token_in_ranges in
-- the SQL of a fan-out, the misrouted-row trigger, apply_topology), apart
-- too: every role that reads through the coordinator calls the first two on
-- the nodes, so the schema is everyone's to use.
CREATE SCHEMA ringshard_worker;
COMMENT ON SCHEMA ringshard_worker IS 'what a worker runs for its coordinator: the fan-out filters, the misrouted-row trigger, apply_topology';
GRANT USAGE ON SCHEMA ringshard_worker TO PUBLIC;

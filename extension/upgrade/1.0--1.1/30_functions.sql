-- Functions: the helpers move to schema ringshard_internal (moved, not
-- dropped, so that the triggers and event triggers that call them follow);
-- what 1.1 removed, and what it returns differently, is dropped; then
-- 50_definitions.sql gives every function, view and comment its 1.1 text.
-- The routing functions that user indexes, generated columns or views may
-- use (ring_token, partition_for, shard_for, replicas_for, nodes_for, ...)
-- are replaced in place there; only their character overloads go.

ALTER FUNCTION ringshard.check_name(text, text) SET SCHEMA ringshard_internal;
ALTER FUNCTION ringshard.check_weight(float8) SET SCHEMA ringshard_internal;
ALTER FUNCTION ringshard.column_attnum(regclass, name) SET SCHEMA ringshard_internal;
ALTER FUNCTION ringshard.count_topology_change() SET SCHEMA ringshard_internal;
ALTER FUNCTION ringshard.ensure_node(text, text) SET SCHEMA ringshard_internal;
ALTER FUNCTION ringshard.follow_renamed_columns() SET SCHEMA ringshard_internal;
ALTER FUNCTION ringshard.forget_dropped_tables() SET SCHEMA ringshard_internal;
ALTER FUNCTION ringshard.forget_unused_nodes() SET SCHEMA ringshard_internal;
ALTER FUNCTION ringshard.invalidate_topology_cache() SET SCHEMA ringshard_internal;
ALTER FUNCTION ringshard.lock_node(text) SET SCHEMA ringshard_internal;
ALTER FUNCTION ringshard.lock_partition_map(text) SET SCHEMA ringshard_internal;
ALTER FUNCTION ringshard.lock_ring(text) SET SCHEMA ringshard_internal;
ALTER FUNCTION ringshard.merge_builtin_ring() SET SCHEMA ringshard_internal;
ALTER FUNCTION ringshard.merge_cluster_state() SET SCHEMA ringshard_internal;
ALTER FUNCTION ringshard.node_value(text, text, text[], boolean) SET SCHEMA ringshard_internal;
ALTER FUNCTION ringshard.partition_holders_of(json, text) SET SCHEMA ringshard_internal;
ALTER FUNCTION ringshard.placement_snapshot(regclass) SET SCHEMA ringshard_internal;
ALTER FUNCTION ringshard.resolve_annotation_columns() SET SCHEMA ringshard_internal;
ALTER FUNCTION ringshard.ring_move_plan(text[], float8[], integer, integer, text) SET SCHEMA ringshard_internal;
ALTER FUNCTION ringshard.topology_snapshot() SET SCHEMA ringshard_internal;

-- char(n) keys resolve to the text overloads in 1.1 (their padding dropped).
-- A user object that calls one of these keeps the update from running, with
-- PostgreSQL's dependency error: change it to call the text overload first.
DROP FUNCTION pg_catalog.ring_token(character);
DROP FUNCTION pg_catalog.shard_for(character);
DROP FUNCTION pg_catalog.shard_for(character, text);
DROP FUNCTION pg_catalog.replicas_for(character);
DROP FUNCTION pg_catalog.replicas_for(character, text);
DROP FUNCTION pg_catalog.replicas_for(character, text, integer);
DROP FUNCTION pg_catalog.read_node_for(character);
DROP FUNCTION pg_catalog.read_node_for(character, text);
DROP FUNCTION pg_catalog.partition_for(text, character);
DROP FUNCTION pg_catalog.nodes_for(text, character);
DROP FUNCTION pg_catalog.nodes_for(text, character, text);
DROP FUNCTION ringshard.proposed_replicas(character, text, text, text, float8);

-- Removed in 1.1 (docs/upgrading.md#functions-and-settings).  route_write,
-- the trigger of 1.0's distributed tables, goes once they are converted
-- (70_distributed_tables.sql).
DROP FUNCTION ringshard.rows_per_node(regclass);
DROP FUNCTION ringshard.table_skew(regclass, float8);
DROP FUNCTION ringshard.ring_skew(text, float8);
DROP FUNCTION ringshard.ring_balance_summary(text);
DROP FUNCTION ringshard.prune_replayed_writes(interval);
DROP FUNCTION ringshard.reads_here(record, text[]);
DROP FUNCTION ringshard.adopt_distributed_table(text, json, name, text, text, text, name);

-- 1.1 returns something else (a text saying what was done, a count, the
-- two_phase_commit column): CREATE OR REPLACE cannot change that.
DROP FUNCTION ringshard.create_ring(text, integer, integer, text);
DROP FUNCTION ringshard.drop_ring(text);
DROP FUNCTION ringshard.set_replication_factor(text, integer);
DROP FUNCTION ringshard.add_node(text, text, text, float8);
DROP FUNCTION ringshard.remove_node(text, text);
DROP FUNCTION ringshard.set_node_weight(text, float8, text);
DROP FUNCTION ringshard.set_node_address(text, text);
DROP FUNCTION ringshard.mark_node_down(text);
DROP FUNCTION ringshard.mark_node_up(text);
DROP FUNCTION ringshard.create_partition_map(text);
DROP FUNCTION ringshard.drop_partition_map(text);
DROP FUNCTION ringshard.assign_partitions(text, integer, integer, text);
DROP FUNCTION ringshard.unassign_partitions(text, integer, integer, text);
DROP FUNCTION ringshard.distribute_table(regclass, name, text);
DROP FUNCTION ringshard.distribute_table_by_partition(regclass, name, text, text, name);
DROP FUNCTION ringshard.undistribute_table(regclass);
DROP FUNCTION ringshard.node_health();
DROP FUNCTION ringshard.push_table_definition(regclass);
DROP FUNCTION ringshard.create_distributed_table(regclass);
DROP FUNCTION ringshard.install_plproxy_bridge();

-- Views whose columns changed (write_queue_status went with its table).
DROP VIEW ringshard.rebalance_status;

-- Routing is for everyone; changing topology is for ringshard_admin (and the
-- extension's owner and superusers).  Routing reads the catalog with the
-- caller's rights, so PUBLIC may read it, except node addresses.

REVOKE ALL ON ALL TABLES IN SCHEMA ringshard FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA ringshard FROM PUBLIC;

GRANT SELECT ON ringshard.rings, ringshard.ring_members, ringshard.partition_maps,
	ringshard.partition_assignments, ringshard.distributed_tables, ringshard.annotated_tables TO PUBLIC;
GRANT SELECT (node_name, server_name, is_up) ON ringshard.nodes TO PUBLIC;

GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON ALL TABLES IN SCHEMA ringshard TO ringshard_admin;
-- ... except the records that decide what the coordinator does with other
-- roles' work: queued writes are replayed as the role recorded in them, and a
-- transaction record makes recovery commit a prepared transaction.  Only the
-- extension's own code (as the catalog's owner) writes them; administrators
-- read them, and may clear dead letters they have dealt with.
REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON ringshard.write_queue, ringshard.transaction_records FROM ringshard_admin;
REVOKE INSERT, UPDATE, TRUNCATE ON ringshard.dead_letters FROM ringshard_admin;
-- ... and the statements that nodes run for a distributed table (its
-- constraints and indexes, recorded for nodes added later): the extension
-- writes them from the table's own definition, as the catalog's owner.
REVOKE INSERT, UPDATE ON ringshard.distributed_tables FROM ringshard_admin;
GRANT INSERT (table_name, key_column, key_attnum, ring_name, map_name, keyspace, keyspace_column, keyspace_attnum),
	UPDATE (table_name, key_column, key_attnum, ring_name, map_name, keyspace, keyspace_column, keyspace_attnum)
	ON ringshard.distributed_tables TO ringshard_admin;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA ringshard TO ringshard_admin;
-- The internal helpers: for administrators' functions only (triggers and
-- event triggers run their functions without an EXECUTE check).
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA ringshard_internal FROM PUBLIC;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA ringshard_internal TO ringshard_admin;
-- The worker's side: administrators may run all of it (apply_topology is
-- sync_topology's on each node); PUBLIC what reads and writes need (below).
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA ringshard_worker FROM PUBLIC;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA ringshard_worker TO ringshard_admin;

-- Read-only helpers anyone may call.
GRANT EXECUTE ON FUNCTION
	ringshard.address_is_safe(text),
	ringshard.address_options(text),
	ringshard.server_address(name),
	ringshard.node_for_address(text),
	ringshard.validate_ring(text),
	ringshard.ring_points(text),
	ringshard.ring_balance(text),
	ringshard.ring_zones(text),
	ringshard.allocate_tokens(text, integer, text),
	ringshard.partition_nodes(integer, text),
	ringshard.check_partition_map(text),
	ringshard.parse_partition_config(text),
	ringshard.format_partition_config(text[], integer[], integer[]),
	ringshard.qualified_name(regclass),
	ringshard.key_bytes(text),
	ringshard.key_bytes(anyelement),
	ringshard.version()
TO PUBLIC;

-- Previews change nothing: anyone may look.
GRANT EXECUTE ON FUNCTION
	ringshard.preview_change(text, text, text, float8, boolean, text, ringtoken[], integer),
	ringshard.preview_add_node(text, text, float8, integer, text),
	ringshard.preview_remove_node(text, text),
	ringshard.preview_set_weight(text, float8, text),
	ringshard.preview_set_tokens(text, ringtoken[], text),
	ringshard.preview_add_node_copies(text, text, float8, integer, text),
	ringshard.preview_remove_node_copies(text, text),
	ringshard.preview_set_weight_copies(text, float8, text),
	ringshard.preview_set_zone_copies(text, text, text),
	ringshard.preview_set_tokens_copies(text, ringtoken[], text),
	ringshard.proposed_replicas(text, text, text, text, float8, text, ringtoken[], integer),
	ringshard.proposed_replicas(anyelement, text, text, text, float8, text, ringtoken[], integer),
	ringshard.plan_table_moves(regclass, text, text, float8, text, ringtoken[], integer),
	ringshard.plan_table_summary(regclass, text, text, float8, text, ringtoken[], integer),
	ringshard.compare_schemes(integer, integer, integer, integer),
	ringshard.share_bar(float8, float8, integer),
	ringshard.ring_balance_report(text),
	ringshard.table_balance_report(regclass),
	ringshard.preview_partition_assignments(text[], integer[], integer[], text),
	ringshard.preview_partition_config(text, text),
	ringshard.suggest_partition_boundaries(regclass)
TO PUBLIC;

-- Cluster: reading and writing distributed tables is for everyone;
-- running statements on nodes and changing them is for administrators.
GRANT SELECT ON ringshard.write_queue_status, ringshard.rebalance_status,
	ringshard.table_overview, ringshard.table_nodes TO PUBLIC;
-- The coordinator's id is part of the name of every prepared transaction it
-- leaves on the nodes: nobody but the extension's code reads or writes it.
GRANT SELECT (singleton, local_node, topology_version, change_counter) ON ringshard.cluster_state TO PUBLIC;
REVOKE SELECT, INSERT, UPDATE ON ringshard.cluster_state FROM ringshard_admin;
GRANT SELECT (singleton, local_node, topology_version, change_counter),
	UPDATE (local_node, topology_version, change_counter) ON ringshard.cluster_state TO ringshard_admin;
GRANT EXECUTE ON FUNCTION
	ringshard.node_health(),
	ringshard.addressed_nodes(),
	ringshard.node_table_rows(regclass),
	ringshard_worker.reads_here(regclass, "any", text[], bigint),
	ringshard_worker.reads_here(regclass, "any", "any", text[], bigint),
	ringshard_worker.replica_slot(regclass, "any", text[], bigint),
	ringshard_worker.replica_slot(regclass, "any", "any", text[], bigint),
	ringshard_worker.token_in_ranges(ringtoken, ringtoken[]),
	ringshard_worker.reject_misrouted_rows(),
	ringshard_worker.expect_stored_rows(bigint, bigint),
	ringshard.cluster_get(anyelement, text, text),
	ringshard.cluster_fanout(anyelement, text, name, integer, boolean),
	ringshard.last_fanout_missing(),
	ringshard.plproxy_partitions(text),
	ringshard.plproxy_version(text)
TO PUBLIC;

-- Procedures are named explicitly: rebalancing and rehoming are for administrators.
REVOKE ALL ON PROCEDURE ringshard.rebalance(regclass, boolean, integer, integer) FROM PUBLIC;
GRANT EXECUTE ON PROCEDURE ringshard.rebalance(regclass, boolean, integer, integer) TO ringshard_admin;
REVOKE ALL ON PROCEDURE ringshard.rehome_rows(regclass, integer) FROM PUBLIC;
GRANT EXECUTE ON PROCEDURE ringshard.rehome_rows(regclass, integer) TO ringshard_admin;

-- Administrators create nodes (foreign servers of ringshard, owned by
-- ringshard_admin) and distributed tables (foreign tables of ringshard_cluster).
GRANT USAGE ON FOREIGN DATA WRAPPER ringshard TO ringshard_admin;
GRANT USAGE ON FOREIGN SERVER ringshard_cluster TO ringshard_admin;

-- The node statistics are for monitoring, as pg_stat_* are: pg_monitor (the
-- role Prometheus's postgres_exporter is given) reads them too; resetting is
-- for administrators.
GRANT SELECT ON ringshard.stat_nodes TO pg_monitor;
GRANT EXECUTE ON FUNCTION ringshard_internal.stat_node_counters() TO pg_monitor;
GRANT SELECT ON ringshard.stat_hot_keys TO pg_monitor;
GRANT EXECUTE ON FUNCTION ringshard_internal.stat_hot_key_counts() TO pg_monitor;
GRANT SELECT ON ringshard.operation_progress TO pg_monitor;
GRANT EXECUTE ON FUNCTION ringshard_internal.operation_progress_rows() TO pg_monitor;

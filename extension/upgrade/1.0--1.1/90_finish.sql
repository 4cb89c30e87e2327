-- The event triggers new in 1.1, last: the statements above change tables
-- and servers.
--@copy CREATE EVENT TRIGGER ringshard_ddl_guard
--@copy CREATE EVENT TRIGGER ringshard_guard_node_servers

DROP FUNCTION ringshard_internal.address_options_as_given(text);
DROP FUNCTION ringshard_internal.replace_1_0_distributed_table(regclass);

-- Privileges as a fresh install gives them (REVOKE ALL first, then GRANT: it
-- also takes away what 1.0 granted and 1.1 does not), and every pinned
-- search_path ending with pg_temp.
--@include extension/90_privileges.sql
--@include extension/95_search_path.sql

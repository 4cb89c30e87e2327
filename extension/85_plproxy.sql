-- The PL/Proxy bridge.  PL/Proxy reads its clusters from functions in
-- schema plproxy; install_plproxy_bridge() creates them over ringshard's
-- partition maps (cluster name = map name), so PL/Proxy users get
-- ringshard's routing and health without a second configuration.

ALTER TABLE ringshard.cluster_state ADD COLUMN change_counter bigint NOT NULL DEFAULT 0;

-- Count every change of maps and nodes: PL/Proxy reloads when it grows.
CREATE FUNCTION ringshard_internal.count_topology_change() RETURNS trigger
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
BEGIN
	UPDATE ringshard.cluster_state SET change_counter = change_counter + 1;
	RETURN NULL;
END
$$;
COMMENT ON FUNCTION ringshard_internal.count_topology_change() IS 'trigger: counts catalog changes, for PL/Proxy''s cluster version';
CREATE TRIGGER count_topology_change AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
	ON ringshard.partition_assignments FOR EACH STATEMENT EXECUTE FUNCTION ringshard_internal.count_topology_change();
CREATE TRIGGER count_topology_change AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
	ON ringshard.nodes FOR EACH STATEMENT EXECUTE FUNCTION ringshard_internal.count_topology_change();

CREATE FUNCTION ringshard.plproxy_partitions(map text) RETURNS SETOF text
	AS 'MODULE_PATHNAME', 'ringshard_plproxy_partitions' LANGUAGE C STABLE PARALLEL UNSAFE STRICT;
COMMENT ON FUNCTION ringshard.plproxy_partitions(text) IS
	'256 connection strings, partition by partition: the first healthy holder of each (PL/Proxy''s get_cluster_partitions)';

CREATE FUNCTION ringshard.plproxy_version(map text) RETURNS integer
	LANGUAGE ringshard_sql STABLE PARALLEL UNSAFE STRICT SET search_path = pg_catalog, ringshard, pg_temp AS $$
	SELECT CASE WHEN EXISTS (SELECT FROM ringshard.partition_maps p WHERE p.map_name = map)
	            THEN (SELECT (s.change_counter % 2147483647)::integer + 1 FROM ringshard.cluster_state s) END;
$$;
COMMENT ON FUNCTION ringshard.plproxy_version(text) IS
	'a version that grows with every change of maps or nodes (PL/Proxy''s get_cluster_version); NULL for an unknown map';

CREATE FUNCTION ringshard.install_plproxy_bridge() RETURNS text
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
BEGIN
	CREATE SCHEMA IF NOT EXISTS plproxy;
	CREATE OR REPLACE FUNCTION plproxy.get_cluster_version(cluster_name text) RETURNS integer
		LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $f$
	DECLARE
		version integer := ringshard.plproxy_version(cluster_name);
	BEGIN
		IF version IS NULL THEN
			RAISE EXCEPTION 'unknown cluster "%"', cluster_name
				USING ERRCODE = 'undefined_object',
				      HINT = 'A cluster is a ringshard partition map; see ringshard.partition_maps.';
		END IF;
		RETURN version;
	END
	$f$;
	CREATE OR REPLACE FUNCTION plproxy.get_cluster_partitions(cluster_name text) RETURNS SETOF text
		LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp
		AS $f$ SELECT ringshard.plproxy_partitions(cluster_name) $f$;
	CREATE OR REPLACE FUNCTION plproxy.get_cluster_config(cluster_name text, OUT key text, OUT val text)
		RETURNS SETOF record
		LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp
		AS $f$ SELECT NULL::text, NULL::text WHERE false $f$;
	COMMENT ON FUNCTION plproxy.get_cluster_version(text) IS 'ringshard bridge: PL/Proxy cluster = ringshard partition map';
	COMMENT ON FUNCTION plproxy.get_cluster_partitions(text) IS 'ringshard bridge: the first healthy holder of each of the 256 partitions';
	COMMENT ON FUNCTION plproxy.get_cluster_config(text) IS 'ringshard bridge: no extra PL/Proxy settings';
	RETURN 'PL/Proxy bridge installed: plproxy.get_cluster_version, get_cluster_partitions and get_cluster_config read ringshard''s partition maps';
END
$$;
COMMENT ON FUNCTION ringshard.install_plproxy_bridge() IS
	'creates plproxy.get_cluster_version/partitions/config over ringshard partition maps; then CLUSTER ''map'' with RUN ON partition_for(keyspace, key) routes as ringshard does';

-- The topology catalog.  Every change goes through these tables, so every
-- change is transactional; triggers tell each backend's ring cache.

CREATE FUNCTION ringshard.address_is_safe(address text) RETURNS boolean
	AS 'MODULE_PATHNAME', 'ringshard_address_is_safe'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard.address_is_safe(text) IS
	'true if a node address (host:port or libpq connection string) parses and carries no password';

CREATE TABLE ringshard.rings (
	ring_name text PRIMARY KEY
		CONSTRAINT ring_name_valid CHECK (ring_name <> '' AND octet_length(ring_name) <= 1024),
	algorithm text NOT NULL DEFAULT 'murmur3'
		CONSTRAINT algorithm_known CHECK (algorithm IN ('murmur3', 'ketama')),
	vnodes integer NOT NULL DEFAULT 256
		CONSTRAINT vnodes_range CHECK (vnodes BETWEEN 1 AND 65536),
	replication_factor integer NOT NULL DEFAULT 1
		CONSTRAINT replication_factor_range CHECK (replication_factor BETWEEN 1 AND 64)
);
COMMENT ON TABLE ringshard.rings IS 'consistent hash rings: algorithm, vnodes per unit weight, replication factor';

-- The foreign-data wrapper of nodes and distributed tables (src/fdw): a node
-- with an address is a foreign server of it, and credentials to reach it are
-- user mappings, kept where PostgreSQL keeps remote credentials.
CREATE FUNCTION ringshard_internal.fdw_handler() RETURNS fdw_handler
	AS 'MODULE_PATHNAME', 'ringshard_fdw_handler' LANGUAGE C VOLATILE PARALLEL UNSAFE STRICT;
COMMENT ON FUNCTION ringshard_internal.fdw_handler() IS 'the handler of the foreign-data wrapper ringshard';
CREATE FUNCTION ringshard_internal.fdw_validator(text[], oid) RETURNS void
	AS 'MODULE_PATHNAME', 'ringshard_fdw_validator' LANGUAGE C VOLATILE PARALLEL UNSAFE STRICT;
COMMENT ON FUNCTION ringshard_internal.fdw_validator(text[], oid) IS
	'validates options: libpq options without credentials on nodes, user/password on user mappings';
CREATE FOREIGN DATA WRAPPER ringshard HANDLER ringshard_internal.fdw_handler VALIDATOR ringshard_internal.fdw_validator;
COMMENT ON FOREIGN DATA WRAPPER ringshard IS 'ringshard nodes (servers) and distributed tables (foreign tables of server ringshard_cluster)';
-- Every distributed table is a foreign table of this server; its rows live on the nodes.
CREATE SERVER ringshard_cluster FOREIGN DATA WRAPPER ringshard;
COMMENT ON SERVER ringshard_cluster IS 'the server of distributed tables: their rows live on the nodes of their ring or partition map';

CREATE FUNCTION ringshard.address_options(address text) RETURNS TABLE (option text, value text)
	AS 'MODULE_PATHNAME', 'ringshard_address_options' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard.address_options(text) IS
	'the foreign-server options of a node address (host:port or a libpq connection string); credentials are refused';
CREATE FUNCTION ringshard.server_address(server name) RETURNS text
	AS 'MODULE_PATHNAME', 'ringshard_server_address' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard.server_address(name) IS 'a node server''s options as an address: host:port when that is all, else a connection string';

CREATE TABLE ringshard.nodes (
	node_name text PRIMARY KEY
		CONSTRAINT node_name_valid CHECK (node_name <> '' AND octet_length(node_name) <= 1024),
	server_name name UNIQUE,
	is_up boolean NOT NULL DEFAULT true
);
COMMENT ON TABLE ringshard.nodes IS
	'nodes with their health; a node with an address has a foreign server (server_name) whose options are its address';

-- The node an address names (as the FREMIS-N config names nodes): the one
-- whose server has exactly the address's options, else the node without an
-- address that is named like it.  NULL if none (or the address is invalid).
CREATE FUNCTION ringshard.node_for_address(address text) RETURNS text
	LANGUAGE ringshard_plpgsql STABLE PARALLEL UNSAFE STRICT SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	wanted text[];
	found text;
BEGIN
	BEGIN
		SELECT array_agg(o.option || '=' || o.value ORDER BY o.option || '=' || o.value) INTO wanted
		  FROM ringshard.address_options(address) o;
	EXCEPTION WHEN invalid_parameter_value THEN
		wanted := NULL;
	END;
	SELECT n.node_name INTO found FROM ringshard.nodes n JOIN pg_catalog.pg_foreign_server s ON s.srvname = n.server_name
	 WHERE (SELECT array_agg(x ORDER BY x) FROM unnest(s.srvoptions) x WHERE x NOT LIKE 'ambient\_credentials=%') = wanted
	 ORDER BY n.node_name = address DESC, n.node_name LIMIT 1;
	IF found IS NULL THEN
		SELECT n.node_name INTO found FROM ringshard.nodes n WHERE n.server_name IS NULL AND n.node_name = address;
	END IF;
	RETURN found;
END
$$;
COMMENT ON FUNCTION ringshard.node_for_address(text) IS
	'the node an address names: the one whose server has the address''s options, else the node without an address of that name';

-- Explicit tokens of a member (docs/routing.md §8): 1 to 65536 distinct
-- tokens, none NULL.  (A CHECK cannot hold a subquery, hence a function.)
CREATE FUNCTION ringshard_internal.tokens_valid(tokens ringtoken[]) RETURNS boolean
	LANGUAGE ringshard_sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
	SELECT pg_catalog.cardinality(tokens) BETWEEN 1 AND 65536
	   AND pg_catalog.array_ndims(tokens) = 1
	   AND pg_catalog.array_position(tokens, NULL) IS NULL
	   AND (SELECT pg_catalog.count(DISTINCT t) FROM pg_catalog.unnest(tokens) t) = pg_catalog.cardinality(tokens)
$$;
COMMENT ON FUNCTION ringshard_internal.tokens_valid(ringtoken[]) IS
	'whether a member''s explicit tokens are 1 to 65536 distinct tokens, none NULL, in a one-dimensional array';

-- zone (§7): the member's failure domain on this ring, NULL for none (a zone
-- of its own).  tokens (§8): its points, when it has explicit tokens instead
-- of labelled vnodes (NULL).  Both at the end: a 1.1 catalog gains them so.
CREATE TABLE ringshard.ring_members (
	ring_name text NOT NULL REFERENCES ringshard.rings ON DELETE CASCADE,
	node_name text NOT NULL REFERENCES ringshard.nodes,
	weight float8 NOT NULL DEFAULT 1
		CONSTRAINT weight_positive_finite CHECK (weight > 0 AND weight < 'Infinity'),
	zone text
		CONSTRAINT zone_valid CHECK (zone <> '' AND octet_length(zone) <= 1024),
	tokens ringtoken[]
		CONSTRAINT tokens_valid CHECK (ringshard_internal.tokens_valid(tokens)),
	PRIMARY KEY (ring_name, node_name)
);
CREATE INDEX ON ringshard.ring_members (node_name);
COMMENT ON TABLE ringshard.ring_members IS
	'which nodes are on which ring, with their weight, zone (failure domain) and explicit tokens (NULL: labelled vnodes)';
COMMENT ON COLUMN ringshard.ring_members.zone IS
	'the member''s zone on this ring (a data centre, a rack): replica sets span zones first; NULL: a zone of its own';
COMMENT ON COLUMN ringshard.ring_members.tokens IS
	'the member''s explicit tokens, its points on the ring (vnodes and weight do not place them); NULL: labelled vnodes';

CREATE TABLE ringshard.partition_maps (
	map_name text PRIMARY KEY
		CONSTRAINT map_name_valid CHECK (map_name <> '' AND octet_length(map_name) <= 1024)
);
COMMENT ON TABLE ringshard.partition_maps IS 'maps of the 256 partitions to nodes';

CREATE TABLE ringshard.partition_assignments (
	map_name text NOT NULL REFERENCES ringshard.partition_maps ON DELETE CASCADE,
	node_name text NOT NULL REFERENCES ringshard.nodes,
	partition_start integer NOT NULL
		CONSTRAINT partition_start_range CHECK (partition_start BETWEEN 0 AND 255),
	partition_end integer NOT NULL
		CONSTRAINT partition_end_range CHECK (partition_end BETWEEN 0 AND 255),
	CONSTRAINT partition_range_ordered CHECK (partition_start <= partition_end),
	PRIMARY KEY (map_name, node_name, partition_start)
);
CREATE INDEX ON ringshard.partition_assignments (node_name);
COMMENT ON TABLE ringshard.partition_assignments IS 'inclusive partition ranges held by nodes; a partition held by several nodes is replicated';

CREATE TABLE ringshard.distributed_tables (
	table_name regclass PRIMARY KEY,
	key_column name NOT NULL,
	key_attnum smallint NOT NULL,
	ring_name text REFERENCES ringshard.rings,
	map_name text REFERENCES ringshard.partition_maps,
	keyspace text,
	keyspace_column name,
	keyspace_attnum smallint,
	-- distributed tables: constraints and indexes that only the nodes have, as {name, sql}
	node_ddl jsonb NOT NULL DEFAULT '[]',
	CONSTRAINT ring_or_map CHECK ((ring_name IS NULL) <> (map_name IS NULL)),
	CONSTRAINT map_has_one_keyspace CHECK (
		(map_name IS NULL AND keyspace IS NULL AND keyspace_column IS NULL) OR
		(map_name IS NOT NULL AND (keyspace IS NULL) <> (keyspace_column IS NULL)))
);
COMMENT ON TABLE ringshard.distributed_tables IS 'tables annotated with a sharding key and the ring or partition map that places their rows';

-- The built-in ring and map, empty.
INSERT INTO ringshard.rings (ring_name) VALUES ('default');
INSERT INTO ringshard.partition_maps (map_name) VALUES ('default');

-- Tell every backend's ring cache about any change, including direct DML.
CREATE FUNCTION ringshard_internal.invalidate_topology_cache() RETURNS trigger
	AS 'MODULE_PATHNAME', 'ringshard_invalidate_topology_cache'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION ringshard_internal.invalidate_topology_cache() IS
	'trigger: makes every backend rebuild its rings and maps from its next transaction';

-- The same statement trigger on every table of the topology, in this order
-- (ringshard.cluster_state, placements and rebalance_progress get theirs where
-- they are created).
DO $triggers$
DECLARE
	catalog_table text;
BEGIN
	FOREACH catalog_table IN ARRAY ARRAY['rings', 'nodes', 'ring_members', 'partition_maps',
	                                      'partition_assignments', 'distributed_tables'] LOOP
		EXECUTE pg_catalog.format('CREATE TRIGGER invalidate_topology_cache AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON ringshard.%I FOR EACH STATEMENT EXECUTE FUNCTION ringshard_internal.invalidate_topology_cache()',
		                          catalog_table);
	END LOOP;
END
$triggers$;

-- pg_dump keeps the catalog.  The built-in 'default' rows are created by
-- CREATE EXTENSION, so a restore must update them rather than collide.
CREATE FUNCTION ringshard_internal.merge_builtin_ring() RETURNS trigger
	LANGUAGE ringshard_plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
BEGIN
	IF NEW.ring_name = 'default' AND
	   EXISTS (SELECT FROM ringshard.rings WHERE ring_name = NEW.ring_name) THEN
		UPDATE ringshard.rings
		   SET algorithm = NEW.algorithm, vnodes = NEW.vnodes,
		       replication_factor = NEW.replication_factor
		 WHERE ring_name = NEW.ring_name;
		RETURN NULL;
	END IF;
	RETURN NEW;
END
$$;
COMMENT ON FUNCTION ringshard_internal.merge_builtin_ring() IS
	'trigger: a restored ''default'' ring updates the one CREATE EXTENSION made';
CREATE TRIGGER merge_builtin_ring BEFORE INSERT ON ringshard.rings
	FOR EACH ROW EXECUTE FUNCTION ringshard_internal.merge_builtin_ring();

SELECT pg_catalog.pg_extension_config_dump('ringshard.rings', '');
SELECT pg_catalog.pg_extension_config_dump('ringshard.nodes', '');
SELECT pg_catalog.pg_extension_config_dump('ringshard.ring_members', '');
SELECT pg_catalog.pg_extension_config_dump('ringshard.partition_maps', 'WHERE map_name <> ''default''');
SELECT pg_catalog.pg_extension_config_dump('ringshard.partition_assignments', '');
SELECT pg_catalog.pg_extension_config_dump('ringshard.distributed_tables', '');

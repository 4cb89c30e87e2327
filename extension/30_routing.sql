-- Routing functions, in pg_catalog so that they work unqualified.  Each SQL
-- name has a text overload (so that an untyped literal is text) and an
-- anyelement overload that routes any other type by its canonical bytes.
-- Ring-based answers depend on the catalog, so they are STABLE.

CREATE FUNCTION pg_catalog.ring_token(key text) RETURNS ringtoken
	AS 'MODULE_PATHNAME', 'ringshard_ring_token' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
-- Other types route by their text output, which for some (timestamptz,
-- date, float8, interval, money) depends on session settings: STABLE.
CREATE FUNCTION pg_catalog.ring_token(key anyelement) RETURNS ringtoken
	AS 'MODULE_PATHNAME', 'ringshard_ring_token' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pg_catalog.ring_token(text) IS
	'MurmurHash3_x64_128 h1 (seed 0) of the key''s bytes, as an unsigned ring token';
COMMENT ON FUNCTION pg_catalog.ring_token(anyelement) IS
	'MurmurHash3_x64_128 h1 (seed 0) of the key''s canonical bytes (integers as decimal, uuid as lowercase text)';

CREATE FUNCTION pg_catalog.shard_for(key text) RETURNS text
	AS 'MODULE_PATHNAME', 'ringshard_shard_for' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION pg_catalog.shard_for(key anyelement) RETURNS text
	AS 'MODULE_PATHNAME', 'ringshard_shard_for' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION pg_catalog.shard_for(key text, ring text) RETURNS text
	AS 'MODULE_PATHNAME', 'ringshard_shard_for' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION pg_catalog.shard_for(key anyelement, ring text) RETURNS text
	AS 'MODULE_PATHNAME', 'ringshard_shard_for' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pg_catalog.shard_for(text) IS 'the node that owns the key on ring ''default''';
COMMENT ON FUNCTION pg_catalog.shard_for(anyelement) IS 'the node that owns the key on ring ''default''';
COMMENT ON FUNCTION pg_catalog.shard_for(text, text) IS 'the node that owns the key on the named ring';
COMMENT ON FUNCTION pg_catalog.shard_for(anyelement, text) IS 'the node that owns the key on the named ring';

CREATE FUNCTION pg_catalog.replicas_for(key text) RETURNS text[]
	AS 'MODULE_PATHNAME', 'ringshard_replicas_for' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION pg_catalog.replicas_for(key anyelement) RETURNS text[]
	AS 'MODULE_PATHNAME', 'ringshard_replicas_for' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION pg_catalog.replicas_for(key text, ring text) RETURNS text[]
	AS 'MODULE_PATHNAME', 'ringshard_replicas_for' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION pg_catalog.replicas_for(key anyelement, ring text) RETURNS text[]
	AS 'MODULE_PATHNAME', 'ringshard_replicas_for' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION pg_catalog.replicas_for(key text, ring text, n integer) RETURNS text[]
	AS 'MODULE_PATHNAME', 'ringshard_replicas_for' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION pg_catalog.replicas_for(key anyelement, ring text, n integer) RETURNS text[]
	AS 'MODULE_PATHNAME', 'ringshard_replicas_for' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pg_catalog.replicas_for(text) IS 'the key''s replica set on ring ''default'': owner first, replication_factor distinct nodes';
COMMENT ON FUNCTION pg_catalog.replicas_for(anyelement) IS 'the key''s replica set on ring ''default'': owner first, replication_factor distinct nodes';
COMMENT ON FUNCTION pg_catalog.replicas_for(text, text) IS 'the key''s replica set on the named ring: owner first, replication_factor distinct nodes';
COMMENT ON FUNCTION pg_catalog.replicas_for(anyelement, text) IS 'the key''s replica set on the named ring: owner first, replication_factor distinct nodes';
COMMENT ON FUNCTION pg_catalog.replicas_for(text, text, integer) IS 'the first n distinct nodes clockwise from the key, owner first';
COMMENT ON FUNCTION pg_catalog.replicas_for(anyelement, text, integer) IS 'the first n distinct nodes clockwise from the key, owner first';

CREATE FUNCTION pg_catalog.read_node_for(key text) RETURNS text
	AS 'MODULE_PATHNAME', 'ringshard_read_node_for' LANGUAGE C VOLATILE STRICT PARALLEL SAFE;
CREATE FUNCTION pg_catalog.read_node_for(key anyelement) RETURNS text
	AS 'MODULE_PATHNAME', 'ringshard_read_node_for' LANGUAGE C VOLATILE STRICT PARALLEL SAFE;
CREATE FUNCTION pg_catalog.read_node_for(key text, ring text) RETURNS text
	AS 'MODULE_PATHNAME', 'ringshard_read_node_for' LANGUAGE C VOLATILE STRICT PARALLEL SAFE;
CREATE FUNCTION pg_catalog.read_node_for(key anyelement, ring text) RETURNS text
	AS 'MODULE_PATHNAME', 'ringshard_read_node_for' LANGUAGE C VOLATILE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pg_catalog.read_node_for(text) IS 'a random healthy node of the key''s replica set on ring ''default'', for reads';
COMMENT ON FUNCTION pg_catalog.read_node_for(anyelement) IS 'a random healthy node of the key''s replica set on ring ''default'', for reads';
COMMENT ON FUNCTION pg_catalog.read_node_for(text, text) IS 'a random healthy node of the key''s replica set on the named ring, for reads';
COMMENT ON FUNCTION pg_catalog.read_node_for(anyelement, text) IS 'a random healthy node of the key''s replica set on the named ring, for reads';

CREATE FUNCTION pg_catalog.partition_for(keyspace text, key text) RETURNS integer
	AS 'MODULE_PATHNAME', 'ringshard_partition_for' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION pg_catalog.partition_for(keyspace text, key anyelement) RETURNS integer
	AS 'MODULE_PATHNAME', 'ringshard_partition_for' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pg_catalog.partition_for(text, text) IS 'the key''s partition 0..255: SHA-1 of keyspace-key, first 4 bytes big-endian, mod 256';
COMMENT ON FUNCTION pg_catalog.partition_for(text, anyelement) IS 'the key''s partition 0..255: SHA-1 of keyspace-key (canonical bytes), first 4 bytes big-endian, mod 256';

CREATE FUNCTION pg_catalog.nodes_for(keyspace text, key text) RETURNS text[]
	AS 'MODULE_PATHNAME', 'ringshard_nodes_for' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION pg_catalog.nodes_for(keyspace text, key anyelement) RETURNS text[]
	AS 'MODULE_PATHNAME', 'ringshard_nodes_for' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION pg_catalog.nodes_for(keyspace text, key text, map text) RETURNS text[]
	AS 'MODULE_PATHNAME', 'ringshard_nodes_for' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION pg_catalog.nodes_for(keyspace text, key anyelement, map text) RETURNS text[]
	AS 'MODULE_PATHNAME', 'ringshard_nodes_for' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pg_catalog.nodes_for(text, text) IS 'every holder of the key''s partition in map ''default''; an error for a gap';
COMMENT ON FUNCTION pg_catalog.nodes_for(text, anyelement) IS 'every holder of the key''s partition in map ''default''; an error for a gap';
COMMENT ON FUNCTION pg_catalog.nodes_for(text, text, text) IS 'every holder of the key''s partition in the named map; an error for a gap';
COMMENT ON FUNCTION pg_catalog.nodes_for(text, anyelement, text) IS 'every holder of the key''s partition in the named map; an error for a gap';

CREATE FUNCTION ringshard.partition_nodes(partition integer, map text DEFAULT 'default') RETURNS text[]
	AS 'MODULE_PATHNAME', 'ringshard_partition_nodes' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard.partition_nodes(integer, text) IS 'the holders of one partition (empty for a gap)';

-- char(n) keys route by their bytes as stored, padding included (§1); without
-- these overloads PostgreSQL would pick the text overload and trim them.
CREATE FUNCTION pg_catalog.ring_token(key character) RETURNS ringtoken
	AS 'MODULE_PATHNAME', 'ringshard_ring_token' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION pg_catalog.shard_for(key character) RETURNS text
	AS 'MODULE_PATHNAME', 'ringshard_shard_for' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION pg_catalog.shard_for(key character, ring text) RETURNS text
	AS 'MODULE_PATHNAME', 'ringshard_shard_for' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION pg_catalog.replicas_for(key character) RETURNS text[]
	AS 'MODULE_PATHNAME', 'ringshard_replicas_for' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION pg_catalog.replicas_for(key character, ring text) RETURNS text[]
	AS 'MODULE_PATHNAME', 'ringshard_replicas_for' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION pg_catalog.replicas_for(key character, ring text, n integer) RETURNS text[]
	AS 'MODULE_PATHNAME', 'ringshard_replicas_for' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION pg_catalog.read_node_for(key character) RETURNS text
	AS 'MODULE_PATHNAME', 'ringshard_read_node_for' LANGUAGE C VOLATILE STRICT PARALLEL SAFE;
CREATE FUNCTION pg_catalog.read_node_for(key character, ring text) RETURNS text
	AS 'MODULE_PATHNAME', 'ringshard_read_node_for' LANGUAGE C VOLATILE STRICT PARALLEL SAFE;
CREATE FUNCTION pg_catalog.partition_for(keyspace text, key character) RETURNS integer
	AS 'MODULE_PATHNAME', 'ringshard_partition_for' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION pg_catalog.nodes_for(keyspace text, key character) RETURNS text[]
	AS 'MODULE_PATHNAME', 'ringshard_nodes_for' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION pg_catalog.nodes_for(keyspace text, key character, map text) RETURNS text[]
	AS 'MODULE_PATHNAME', 'ringshard_nodes_for' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pg_catalog.ring_token(character) IS 'ring token of a char(n) key, padding included';
COMMENT ON FUNCTION pg_catalog.shard_for(character) IS 'the node that owns a char(n) key (padding included) on ring ''default''';
COMMENT ON FUNCTION pg_catalog.shard_for(character, text) IS 'the node that owns a char(n) key (padding included) on the named ring';
COMMENT ON FUNCTION pg_catalog.replicas_for(character) IS 'the replica set of a char(n) key on ring ''default''';
COMMENT ON FUNCTION pg_catalog.replicas_for(character, text) IS 'the replica set of a char(n) key on the named ring';
COMMENT ON FUNCTION pg_catalog.replicas_for(character, text, integer) IS 'the first n distinct nodes clockwise from a char(n) key';
COMMENT ON FUNCTION pg_catalog.read_node_for(character) IS 'a random healthy replica of a char(n) key on ring ''default''';
COMMENT ON FUNCTION pg_catalog.read_node_for(character, text) IS 'a random healthy replica of a char(n) key on the named ring';
COMMENT ON FUNCTION pg_catalog.partition_for(text, character) IS 'the partition of a char(n) key, padding included';
COMMENT ON FUNCTION pg_catalog.nodes_for(text, character) IS 'every holder of a char(n) key''s partition in map ''default''';
COMMENT ON FUNCTION pg_catalog.nodes_for(text, character, text) IS 'every holder of a char(n) key''s partition in the named map';

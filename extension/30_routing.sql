-- Routing functions, in pg_catalog so that they work unqualified.  Each SQL
-- name has a text overload (so that an untyped literal is text) and an
-- anyelement overload that routes any other type by its canonical bytes
-- (docs/routing.md §1; key_bytes.h).  A char(n) key resolves to the text
-- overload through its implicit cast, which drops the padding exactly as the
-- canonical bytes of char(n) do, so char(n) needs no overload of its own.
--
-- Volatility: the canonical bytes depend on no session setting, so a function
-- whose answer depends only on the key (ring_token, partition_for, key_bytes)
-- is IMMUTABLE and may be used in an index, a generated column or a partition
-- key.  A function that reads the topology (shard_for, replicas_for,
-- nodes_for) is STABLE: its answer changes when the ring or map does, so it
-- must never be stored.  read_node_for picks a replica at random: VOLATILE.

CREATE FUNCTION pg_catalog.ring_token(key text) RETURNS ringtoken
	AS 'MODULE_PATHNAME', 'ringshard_ring_token' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION pg_catalog.ring_token(key anyelement) RETURNS ringtoken
	AS 'MODULE_PATHNAME', 'ringshard_ring_token' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pg_catalog.ring_token(text) IS
	'MurmurHash3_x64_128 h1 (seed 0) of the key''s UTF-8 bytes, as an unsigned ring token';
COMMENT ON FUNCTION pg_catalog.ring_token(anyelement) IS
	'MurmurHash3_x64_128 h1 (seed 0) of the key''s canonical bytes (docs/routing.md §1; see ringshard.key_bytes), as an unsigned ring token';

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
COMMENT ON FUNCTION pg_catalog.replicas_for(text, text, integer) IS 'the first n distinct nodes clockwise from the key, owner first: n overrides the ring''s replication factor (more or fewer), capped at the ring''s node count';
COMMENT ON FUNCTION pg_catalog.replicas_for(anyelement, text, integer) IS 'the first n distinct nodes clockwise from the key, owner first: n overrides the ring''s replication factor (more or fewer), capped at the ring''s node count';

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
	AS 'MODULE_PATHNAME', 'ringshard_partition_for' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pg_catalog.partition_for(text, text) IS 'the key''s partition 0..255: SHA-1 of keyspace-key (UTF-8), first 4 bytes big-endian, mod 256';
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

-- The canonical bytes themselves, to see what a key routes by (and to
-- reproduce a token or partition outside the database).
CREATE FUNCTION ringshard.key_bytes(key text) RETURNS bytea
	AS 'MODULE_PATHNAME', 'ringshard_key_bytes' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION ringshard.key_bytes(key anyelement) RETURNS bytea
	AS 'MODULE_PATHNAME', 'ringshard_key_bytes' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard.key_bytes(text) IS
	'the bytes a text key routes by: its UTF-8 encoding (docs/routing.md §1)';
COMMENT ON FUNCTION ringshard.key_bytes(anyelement) IS
	'the canonical bytes a key routes by (docs/routing.md §1): numeric normalized, char(n) trimmed, dates and timestamps in ISO form (timestamptz in UTC with +00; infinity and -infinity), uuid lowercase, boolean t or f, text in UTF-8; ring_token and partition_for hash exactly these';

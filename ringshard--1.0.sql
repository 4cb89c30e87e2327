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
-- ringtoken: an unsigned 64-bit position on the hash ring (0 .. 2^64-1).
--
-- The type and everything that belongs to it live in pg_catalog, so that
-- "ringtoken" resolves on any search_path.  Operator references are written
-- OPERATOR(pg_catalog.x): an unqualified commutator or negator that does not
-- exist yet would otherwise be created as a shell in the extension's schema.

CREATE TYPE pg_catalog.ringtoken;

-- I/O functions

CREATE FUNCTION pg_catalog.ringtoken_in(cstring) RETURNS ringtoken
	AS 'MODULE_PATHNAME', 'ringtoken_in'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pg_catalog.ringtoken_in(cstring) IS
	'input function of ringtoken: decimal or 0x hexadecimal, 0 .. 18446744073709551615';

CREATE FUNCTION pg_catalog.ringtoken_out(ringtoken) RETURNS cstring
	AS 'MODULE_PATHNAME', 'ringtoken_out'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pg_catalog.ringtoken_out(ringtoken) IS
	'output function of ringtoken: decimal';

CREATE FUNCTION pg_catalog.ringtoken_recv(internal) RETURNS ringtoken
	AS 'MODULE_PATHNAME', 'ringtoken_recv'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pg_catalog.ringtoken_recv(internal) IS
	'binary input function of ringtoken: 8 bytes, big-endian';

CREATE FUNCTION pg_catalog.ringtoken_send(ringtoken) RETURNS bytea
	AS 'MODULE_PATHNAME', 'ringtoken_send'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pg_catalog.ringtoken_send(ringtoken) IS
	'binary output function of ringtoken: 8 bytes, big-endian';

CREATE TYPE pg_catalog.ringtoken (
	INPUT = pg_catalog.ringtoken_in,
	OUTPUT = pg_catalog.ringtoken_out,
	RECEIVE = pg_catalog.ringtoken_recv,
	SEND = pg_catalog.ringtoken_send,
	INTERNALLENGTH = 8,
	PASSEDBYVALUE,
	ALIGNMENT = double,
	STORAGE = plain
);
COMMENT ON TYPE pg_catalog.ringtoken IS
	'position on a hash ring: unsigned 64-bit integer, 0 .. 18446744073709551615';

-- Comparison functions and operators (unsigned order)

CREATE FUNCTION pg_catalog.ringtoken_eq(ringtoken, ringtoken) RETURNS boolean
	AS 'MODULE_PATHNAME', 'ringtoken_eq'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
COMMENT ON FUNCTION pg_catalog.ringtoken_eq(ringtoken, ringtoken) IS
	'implementation of = for ringtoken';

CREATE FUNCTION pg_catalog.ringtoken_ne(ringtoken, ringtoken) RETURNS boolean
	AS 'MODULE_PATHNAME', 'ringtoken_ne'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
COMMENT ON FUNCTION pg_catalog.ringtoken_ne(ringtoken, ringtoken) IS
	'implementation of <> for ringtoken';

CREATE FUNCTION pg_catalog.ringtoken_lt(ringtoken, ringtoken) RETURNS boolean
	AS 'MODULE_PATHNAME', 'ringtoken_lt'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
COMMENT ON FUNCTION pg_catalog.ringtoken_lt(ringtoken, ringtoken) IS
	'implementation of < for ringtoken';

CREATE FUNCTION pg_catalog.ringtoken_le(ringtoken, ringtoken) RETURNS boolean
	AS 'MODULE_PATHNAME', 'ringtoken_le'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
COMMENT ON FUNCTION pg_catalog.ringtoken_le(ringtoken, ringtoken) IS
	'implementation of <= for ringtoken';

CREATE FUNCTION pg_catalog.ringtoken_gt(ringtoken, ringtoken) RETURNS boolean
	AS 'MODULE_PATHNAME', 'ringtoken_gt'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
COMMENT ON FUNCTION pg_catalog.ringtoken_gt(ringtoken, ringtoken) IS
	'implementation of > for ringtoken';

CREATE FUNCTION pg_catalog.ringtoken_ge(ringtoken, ringtoken) RETURNS boolean
	AS 'MODULE_PATHNAME', 'ringtoken_ge'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
COMMENT ON FUNCTION pg_catalog.ringtoken_ge(ringtoken, ringtoken) IS
	'implementation of >= for ringtoken';

CREATE OPERATOR pg_catalog.= (
	LEFTARG = ringtoken,
	RIGHTARG = ringtoken,
	FUNCTION = pg_catalog.ringtoken_eq,
	COMMUTATOR = OPERATOR(pg_catalog.=),
	NEGATOR = OPERATOR(pg_catalog.<>),
	RESTRICT = eqsel,
	JOIN = eqjoinsel,
	HASHES,
	MERGES
);
COMMENT ON OPERATOR pg_catalog.= (ringtoken, ringtoken) IS 'equal';

CREATE OPERATOR pg_catalog.<> (
	LEFTARG = ringtoken,
	RIGHTARG = ringtoken,
	FUNCTION = pg_catalog.ringtoken_ne,
	COMMUTATOR = OPERATOR(pg_catalog.<>),
	NEGATOR = OPERATOR(pg_catalog.=),
	RESTRICT = neqsel,
	JOIN = neqjoinsel
);
COMMENT ON OPERATOR pg_catalog.<> (ringtoken, ringtoken) IS 'not equal';

CREATE OPERATOR pg_catalog.< (
	LEFTARG = ringtoken,
	RIGHTARG = ringtoken,
	FUNCTION = pg_catalog.ringtoken_lt,
	COMMUTATOR = OPERATOR(pg_catalog.>),
	NEGATOR = OPERATOR(pg_catalog.>=),
	RESTRICT = scalarltsel,
	JOIN = scalarltjoinsel
);
COMMENT ON OPERATOR pg_catalog.< (ringtoken, ringtoken) IS 'less than';

CREATE OPERATOR pg_catalog.<= (
	LEFTARG = ringtoken,
	RIGHTARG = ringtoken,
	FUNCTION = pg_catalog.ringtoken_le,
	COMMUTATOR = OPERATOR(pg_catalog.>=),
	NEGATOR = OPERATOR(pg_catalog.>),
	RESTRICT = scalarlesel,
	JOIN = scalarlejoinsel
);
COMMENT ON OPERATOR pg_catalog.<= (ringtoken, ringtoken) IS 'less than or equal';

CREATE OPERATOR pg_catalog.> (
	LEFTARG = ringtoken,
	RIGHTARG = ringtoken,
	FUNCTION = pg_catalog.ringtoken_gt,
	COMMUTATOR = OPERATOR(pg_catalog.<),
	NEGATOR = OPERATOR(pg_catalog.<=),
	RESTRICT = scalargtsel,
	JOIN = scalargtjoinsel
);
COMMENT ON OPERATOR pg_catalog.> (ringtoken, ringtoken) IS 'greater than';

CREATE OPERATOR pg_catalog.>= (
	LEFTARG = ringtoken,
	RIGHTARG = ringtoken,
	FUNCTION = pg_catalog.ringtoken_ge,
	COMMUTATOR = OPERATOR(pg_catalog.<=),
	NEGATOR = OPERATOR(pg_catalog.<),
	RESTRICT = scalargesel,
	JOIN = scalargejoinsel
);
COMMENT ON OPERATOR pg_catalog.>= (ringtoken, ringtoken) IS 'greater than or equal';

-- Index support: btree (ORDER BY, merge joins, btree indexes) and hash
-- (hash joins, hash aggregation, hash indexes)

CREATE FUNCTION pg_catalog.ringtoken_cmp(ringtoken, ringtoken) RETURNS integer
	AS 'MODULE_PATHNAME', 'ringtoken_cmp'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
COMMENT ON FUNCTION pg_catalog.ringtoken_cmp(ringtoken, ringtoken) IS
	'btree comparison function of ringtoken: -1, 0 or 1 in unsigned order';

CREATE FUNCTION pg_catalog.ringtoken_sortsupport(internal) RETURNS void
	AS 'MODULE_PATHNAME', 'ringtoken_sortsupport'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pg_catalog.ringtoken_sortsupport(internal) IS
	'btree sort support function of ringtoken';

CREATE FUNCTION pg_catalog.ringtoken_hash(ringtoken) RETURNS integer
	AS 'MODULE_PATHNAME', 'ringtoken_hash'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pg_catalog.ringtoken_hash(ringtoken) IS
	'hash function of ringtoken (32-bit hash of its 64 bits)';

CREATE FUNCTION pg_catalog.ringtoken_hash_extended(ringtoken, bigint) RETURNS bigint
	AS 'MODULE_PATHNAME', 'ringtoken_hash_extended'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pg_catalog.ringtoken_hash_extended(ringtoken, bigint) IS
	'extended hash function of ringtoken (64-bit hash of its 64 bits with a seed)';

CREATE OPERATOR CLASS pg_catalog.ringtoken_ops
	DEFAULT FOR TYPE ringtoken USING btree AS
		OPERATOR 1 pg_catalog.< ,
		OPERATOR 2 pg_catalog.<= ,
		OPERATOR 3 pg_catalog.= ,
		OPERATOR 4 pg_catalog.>= ,
		OPERATOR 5 pg_catalog.> ,
		FUNCTION 1 pg_catalog.ringtoken_cmp(ringtoken, ringtoken),
		FUNCTION 2 pg_catalog.ringtoken_sortsupport(internal);

CREATE OPERATOR CLASS pg_catalog.ringtoken_ops
	DEFAULT FOR TYPE ringtoken USING hash AS
		OPERATOR 1 pg_catalog.= ,
		FUNCTION 1 pg_catalog.ringtoken_hash(ringtoken),
		FUNCTION 2 pg_catalog.ringtoken_hash_extended(ringtoken, bigint);

-- min and max

CREATE FUNCTION pg_catalog.ringtoken_smaller(ringtoken, ringtoken) RETURNS ringtoken
	AS 'MODULE_PATHNAME', 'ringtoken_smaller'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pg_catalog.ringtoken_smaller(ringtoken, ringtoken) IS
	'smaller of two ringtokens (transition function of min)';

CREATE FUNCTION pg_catalog.ringtoken_larger(ringtoken, ringtoken) RETURNS ringtoken
	AS 'MODULE_PATHNAME', 'ringtoken_larger'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pg_catalog.ringtoken_larger(ringtoken, ringtoken) IS
	'larger of two ringtokens (transition function of max)';

CREATE AGGREGATE pg_catalog.min(ringtoken) (
	SFUNC = pg_catalog.ringtoken_smaller,
	STYPE = ringtoken,
	COMBINEFUNC = pg_catalog.ringtoken_smaller,
	SORTOP = OPERATOR(pg_catalog.<),
	PARALLEL = SAFE
);
COMMENT ON AGGREGATE pg_catalog.min(ringtoken) IS
	'minimum value of all ringtoken input values';

CREATE AGGREGATE pg_catalog.max(ringtoken) (
	SFUNC = pg_catalog.ringtoken_larger,
	STYPE = ringtoken,
	COMBINEFUNC = pg_catalog.ringtoken_larger,
	SORTOP = OPERATOR(pg_catalog.>),
	PARALLEL = SAFE
);
COMMENT ON AGGREGATE pg_catalog.max(ringtoken) IS
	'maximum value of all ringtoken input values';

-- Casts
--
--	numeric   -> ringtoken	explicit: whole numbers 0 .. 2^64-1 only;
--							negative or too large is 22003, fractional 22P02
--	ringtoken -> numeric	implicit: exact
--	bigint    -> ringtoken	explicit: same 64 bits, so -1 becomes 2^64-1
--	ringtoken -> bigint		explicit: same 64 bits, so 2^64-1 becomes -1
--	integer   -> ringtoken	explicit: as integer -> bigint -> ringtoken, so
--							that a literal such as 5::ringtoken works

CREATE FUNCTION pg_catalog.ringtoken_from_numeric(numeric) RETURNS ringtoken
	AS 'MODULE_PATHNAME', 'ringtoken_from_numeric'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pg_catalog.ringtoken_from_numeric(numeric) IS
	'convert a whole numeric from 0 to 18446744073709551615 to ringtoken';

CREATE FUNCTION pg_catalog.ringtoken_to_numeric(ringtoken) RETURNS numeric
	AS 'MODULE_PATHNAME', 'ringtoken_to_numeric'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pg_catalog.ringtoken_to_numeric(ringtoken) IS
	'convert ringtoken to numeric exactly';

CREATE FUNCTION pg_catalog.ringtoken_from_int8(bigint) RETURNS ringtoken
	AS 'MODULE_PATHNAME', 'ringtoken_from_int8'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pg_catalog.ringtoken_from_int8(bigint) IS
	'reinterpret the 64 bits of a bigint as ringtoken (two''s complement: -1 becomes 18446744073709551615)';

CREATE FUNCTION pg_catalog.ringtoken_to_int8(ringtoken) RETURNS bigint
	AS 'MODULE_PATHNAME', 'ringtoken_to_int8'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pg_catalog.ringtoken_to_int8(ringtoken) IS
	'reinterpret the 64 bits of a ringtoken as bigint (two''s complement: 18446744073709551615 becomes -1)';

CREATE FUNCTION pg_catalog.ringtoken_from_int4(integer) RETURNS ringtoken
	AS 'MODULE_PATHNAME', 'ringtoken_from_int4'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pg_catalog.ringtoken_from_int4(integer) IS
	'convert integer to ringtoken as integer -> bigint -> ringtoken does (-1 becomes 18446744073709551615)';

CREATE CAST (numeric AS ringtoken)
	WITH FUNCTION pg_catalog.ringtoken_from_numeric(numeric);
CREATE CAST (ringtoken AS numeric)
	WITH FUNCTION pg_catalog.ringtoken_to_numeric(ringtoken) AS IMPLICIT;
CREATE CAST (bigint AS ringtoken)
	WITH FUNCTION pg_catalog.ringtoken_from_int8(bigint);
CREATE CAST (ringtoken AS bigint)
	WITH FUNCTION pg_catalog.ringtoken_to_int8(ringtoken);
CREATE CAST (integer AS ringtoken)
	WITH FUNCTION pg_catalog.ringtoken_from_int4(integer);
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

CREATE TABLE ringshard.nodes (
	node_name text PRIMARY KEY
		CONSTRAINT node_name_valid CHECK (node_name <> '' AND octet_length(node_name) <= 1024),
	address text
		CONSTRAINT address_without_password CHECK (ringshard.address_is_safe(address)),
	is_up boolean NOT NULL DEFAULT true
);
COMMENT ON TABLE ringshard.nodes IS 'nodes (servers) with their libpq address and health; a node may serve several rings and maps';

CREATE TABLE ringshard.ring_members (
	ring_name text NOT NULL REFERENCES ringshard.rings ON DELETE CASCADE,
	node_name text NOT NULL REFERENCES ringshard.nodes,
	weight float8 NOT NULL DEFAULT 1
		CONSTRAINT weight_positive_finite CHECK (weight > 0 AND weight < 'Infinity'),
	PRIMARY KEY (ring_name, node_name)
);
CREATE INDEX ON ringshard.ring_members (node_name);
COMMENT ON TABLE ringshard.ring_members IS 'which nodes are on which ring, with their weight';

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
CREATE FUNCTION ringshard.invalidate_topology_cache() RETURNS trigger
	AS 'MODULE_PATHNAME', 'ringshard_invalidate_topology_cache'
	LANGUAGE C;
COMMENT ON FUNCTION ringshard.invalidate_topology_cache() IS
	'trigger: makes every backend rebuild its rings and maps from its next transaction';

CREATE TRIGGER invalidate_topology_cache AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
	ON ringshard.rings FOR EACH STATEMENT EXECUTE FUNCTION ringshard.invalidate_topology_cache();
CREATE TRIGGER invalidate_topology_cache AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
	ON ringshard.nodes FOR EACH STATEMENT EXECUTE FUNCTION ringshard.invalidate_topology_cache();
CREATE TRIGGER invalidate_topology_cache AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
	ON ringshard.ring_members FOR EACH STATEMENT EXECUTE FUNCTION ringshard.invalidate_topology_cache();
CREATE TRIGGER invalidate_topology_cache AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
	ON ringshard.partition_maps FOR EACH STATEMENT EXECUTE FUNCTION ringshard.invalidate_topology_cache();
CREATE TRIGGER invalidate_topology_cache AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
	ON ringshard.partition_assignments FOR EACH STATEMENT EXECUTE FUNCTION ringshard.invalidate_topology_cache();
CREATE TRIGGER invalidate_topology_cache AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
	ON ringshard.distributed_tables FOR EACH STATEMENT EXECUTE FUNCTION ringshard.invalidate_topology_cache();

-- pg_dump keeps the catalog.  The built-in 'default' rows are created by
-- CREATE EXTENSION, so a restore must update them rather than collide.
CREATE FUNCTION ringshard.merge_builtin_ring() RETURNS trigger
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
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
COMMENT ON FUNCTION ringshard.merge_builtin_ring() IS
	'trigger: a restored ''default'' ring updates the one CREATE EXTENSION made';
CREATE TRIGGER merge_builtin_ring BEFORE INSERT ON ringshard.rings
	FOR EACH ROW EXECUTE FUNCTION ringshard.merge_builtin_ring();

SELECT pg_catalog.pg_extension_config_dump('ringshard.rings', '');
SELECT pg_catalog.pg_extension_config_dump('ringshard.nodes', '');
SELECT pg_catalog.pg_extension_config_dump('ringshard.ring_members', '');
SELECT pg_catalog.pg_extension_config_dump('ringshard.partition_maps', 'WHERE map_name <> ''default''');
SELECT pg_catalog.pg_extension_config_dump('ringshard.partition_assignments', '');
SELECT pg_catalog.pg_extension_config_dump('ringshard.distributed_tables', '');
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
-- Administration of rings and nodes.  Each function is one transaction's
-- worth of catalog change: an error leaves the catalog as it was.  They run
-- with the caller's rights; the catalog's grants decide who may change it.

CREATE FUNCTION ringshard.validate_ring(ring text) RETURNS integer
	AS 'MODULE_PATHNAME', 'ringshard_validate_ring' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard.validate_ring(text) IS
	'builds the ring as the catalog now describes it; returns its number of points or raises the reason it cannot be built';

-- Lock a ring's row so that concurrent changes of one ring serialize.
CREATE FUNCTION ringshard.lock_ring(ring text) RETURNS ringshard.rings
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
DECLARE
	locked ringshard.rings;
BEGIN
	IF ring IS NULL THEN
		RAISE EXCEPTION 'ring name must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	SELECT * INTO locked FROM ringshard.rings r WHERE r.ring_name = ring FOR UPDATE;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'ring "%" does not exist', ring
			USING ERRCODE = 'undefined_object',
			      HINT = 'Create it with ringshard.create_ring(), or list rings in ringshard.rings.';
	END IF;
	RETURN locked;
END
$$;
COMMENT ON FUNCTION ringshard.lock_ring(text) IS 'locks a ring''s catalog row for a change; raises if the ring does not exist';

-- Names of rings, maps and nodes: non-empty, at most 1024 bytes.
CREATE FUNCTION ringshard.check_name(kind text, name text) RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
BEGIN
	IF name IS NULL THEN
		RAISE EXCEPTION '% name must not be null', kind USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF name = '' OR octet_length(name) > 1024 THEN
		RAISE EXCEPTION 'invalid % name "%"', kind, coalesce(left(name, 64), 'NULL')
			USING ERRCODE = 'invalid_parameter_value',
			      DETAIL = format('A %s name must be non-empty and at most 1024 bytes.', kind);
	END IF;
END
$$;
COMMENT ON FUNCTION ringshard.check_name(text, text) IS 'raises unless a ring, map or node name is non-empty and at most 1024 bytes';

CREATE FUNCTION ringshard.create_ring(ring text, vnodes integer DEFAULT 256,
									  replication_factor integer DEFAULT 1,
									  algorithm text DEFAULT 'murmur3') RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
BEGIN
	PERFORM ringshard.check_name('ring', ring);
	IF algorithm IS NULL THEN
		RAISE EXCEPTION 'ring algorithm must not be null' USING ERRCODE = 'null_value_not_allowed',
			HINT = 'Use ''murmur3'' (the default) or ''ketama''.';
	END IF;
	IF algorithm NOT IN ('murmur3', 'ketama') THEN
		RAISE EXCEPTION 'unknown ring algorithm "%"', algorithm
			USING ERRCODE = 'invalid_parameter_value',
			      HINT = 'Use ''murmur3'' (the default) or ''ketama''.';
	END IF;
	IF vnodes IS NULL OR vnodes NOT BETWEEN 1 AND 65536 THEN
		RAISE EXCEPTION 'vnodes % is outside 1..65536', coalesce(vnodes::text, 'NULL')
			USING ERRCODE = 'invalid_parameter_value',
			      HINT = 'The default, 256 points per unit of weight, keeps shares within a few percent.';
	END IF;
	IF replication_factor IS NULL OR replication_factor NOT BETWEEN 1 AND 64 THEN
		RAISE EXCEPTION 'replication factor % is outside 1..64', coalesce(replication_factor::text, 'NULL')
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF EXISTS (SELECT FROM ringshard.rings r WHERE r.ring_name = ring) THEN
		RAISE EXCEPTION 'ring "%" already exists', ring
			USING ERRCODE = 'duplicate_object',
			      HINT = 'Pick another name, or drop it first with ringshard.drop_ring().';
	END IF;
	INSERT INTO ringshard.rings (ring_name, algorithm, vnodes, replication_factor)
	VALUES (ring, algorithm, vnodes, replication_factor);
END
$$;
COMMENT ON FUNCTION ringshard.create_ring(text, integer, integer, text) IS
	'creates an empty ring: vnodes points per unit weight, replication factor, algorithm murmur3 or ketama';

-- Delete nodes that no ring and no map uses any more.
CREATE FUNCTION ringshard.forget_unused_nodes() RETURNS void
	LANGUAGE sql SET search_path = pg_catalog, ringshard AS $$
	DELETE FROM ringshard.nodes n
	 WHERE NOT EXISTS (SELECT FROM ringshard.ring_members m WHERE m.node_name = n.node_name)
	   AND NOT EXISTS (SELECT FROM ringshard.partition_assignments a WHERE a.node_name = n.node_name);
$$;
COMMENT ON FUNCTION ringshard.forget_unused_nodes() IS 'deletes nodes that are in no ring and no partition map';

CREATE FUNCTION ringshard.drop_ring(ring text) RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
DECLARE
	users text;
BEGIN
	PERFORM ringshard.lock_ring(ring);
	SELECT string_agg(d.table_name::text, ', ' ORDER BY d.table_name::text) INTO users
	  FROM ringshard.distributed_tables d WHERE d.ring_name = ring;
	IF users IS NOT NULL THEN
		RAISE EXCEPTION 'cannot drop ring "%" because annotated tables use it', ring
			USING ERRCODE = 'dependent_objects_still_exist',
			      DETAIL = format('Tables placed by this ring: %s.', users),
			      HINT = 'Remove their annotation first with ringshard.undistribute_table().';
	END IF;
	DELETE FROM ringshard.rings r WHERE r.ring_name = ring;
	PERFORM ringshard.forget_unused_nodes();
END
$$;
COMMENT ON FUNCTION ringshard.drop_ring(text) IS 'drops a ring and its memberships; refused while annotated tables use it';

CREATE FUNCTION ringshard.set_replication_factor(ring text, replication_factor integer) RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
BEGIN
	PERFORM ringshard.lock_ring(ring);
	IF replication_factor IS NULL OR replication_factor NOT BETWEEN 1 AND 64 THEN
		RAISE EXCEPTION 'replication factor % is outside 1..64', coalesce(replication_factor::text, 'NULL')
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	UPDATE ringshard.rings r SET replication_factor = set_replication_factor.replication_factor
	 WHERE r.ring_name = ring;
END
$$;
COMMENT ON FUNCTION ringshard.set_replication_factor(text, integer) IS 'changes how many distinct nodes hold each key of a ring';

-- Weights: finite and > 0 (NaN sorts above infinity in PostgreSQL).
CREATE FUNCTION ringshard.check_weight(weight float8) RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
BEGIN
	IF weight IS NULL OR NOT (weight > 0 AND weight < 'Infinity'::float8) THEN
		RAISE EXCEPTION 'weight % is not a finite number greater than zero', coalesce(weight::text, 'NULL')
			USING ERRCODE = 'invalid_parameter_value',
			      HINT = 'A node of weight w gets round(vnodes * w) points, at least one.';
	END IF;
END
$$;
COMMENT ON FUNCTION ringshard.check_weight(float8) IS 'raises unless a weight is finite and greater than zero';

-- Insert a node, or check that an existing one has the same address.
CREATE FUNCTION ringshard.ensure_node(node text, address text) RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
DECLARE
	known ringshard.nodes;
BEGIN
	PERFORM ringshard.check_name('node', node);
	-- The address is never printed: it may hold the very password refused.
	IF address IS NOT NULL AND NOT ringshard.address_is_safe(address) THEN
		RAISE EXCEPTION 'invalid address for node "%"', node
			USING ERRCODE = 'invalid_parameter_value',
			      DETAIL = 'An address is host:port or a libpq connection string (or URI) that parses and has no password.',
			      HINT = 'Keep passwords in ~/.pgpass, a service file or a postgres_fdw user mapping.';
	END IF;
	SELECT * INTO known FROM ringshard.nodes n WHERE n.node_name = node FOR UPDATE;
	IF NOT FOUND THEN
		INSERT INTO ringshard.nodes (node_name, address) VALUES (node, address);
	ELSIF address IS NOT NULL AND known.address IS DISTINCT FROM address THEN
		RAISE EXCEPTION 'node "%" already exists %', node,
			CASE WHEN known.address IS NULL THEN 'without an address' ELSE format('with address "%s"', known.address) END
			USING ERRCODE = 'duplicate_object',
			      HINT = 'Change its address with ringshard.set_node_address(), or leave the address out.';
	END IF;
END
$$;
COMMENT ON FUNCTION ringshard.ensure_node(text, text) IS 'creates a node if it is new; raises if it exists with another address';

CREATE FUNCTION ringshard.add_node(node text, address text DEFAULT NULL, ring text DEFAULT 'default',
								   weight float8 DEFAULT 1) RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
BEGIN
	PERFORM ringshard.check_name('ring', ring);
	PERFORM ringshard.lock_ring(ring);
	PERFORM ringshard.check_weight(weight);
	PERFORM ringshard.ensure_node(node, address);
	IF EXISTS (SELECT FROM ringshard.ring_members m WHERE m.ring_name = ring AND m.node_name = node) THEN
		RAISE EXCEPTION 'node "%" is already on ring "%"', node, ring
			USING ERRCODE = 'duplicate_object',
			      HINT = 'Change its weight with ringshard.set_node_weight().';
	END IF;
	INSERT INTO ringshard.ring_members (ring_name, node_name, weight) VALUES (ring, node, weight);
	PERFORM ringshard.validate_ring(ring);
END
$$;
COMMENT ON FUNCTION ringshard.add_node(text, text, text, float8) IS
	'adds a node (created if new) to a ring with a weight; its address is host:port or a libpq connection string without a password';

CREATE FUNCTION ringshard.remove_node(node text, ring text DEFAULT 'default') RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
DECLARE
	users text;
BEGIN
	PERFORM ringshard.check_name('node', node);
	PERFORM ringshard.lock_ring(ring);
	IF NOT EXISTS (SELECT FROM ringshard.ring_members m WHERE m.ring_name = ring AND m.node_name = node) THEN
		RAISE EXCEPTION 'node "%" is not on ring "%"', node, ring
			USING ERRCODE = 'undefined_object';
	END IF;
	IF (SELECT count(*) FROM ringshard.ring_members m WHERE m.ring_name = ring) = 1 THEN
		SELECT string_agg(d.table_name::text, ', ' ORDER BY d.table_name::text) INTO users
		  FROM ringshard.distributed_tables d WHERE d.ring_name = ring;
		IF users IS NOT NULL THEN
			RAISE EXCEPTION 'cannot remove node "%", the last node of ring "%", while annotated tables use the ring', node, ring
				USING ERRCODE = 'dependent_objects_still_exist',
				      DETAIL = format('Tables placed by this ring: %s.', users),
				      HINT = 'Add another node first, or remove the annotation with ringshard.undistribute_table().';
		END IF;
	END IF;
	DELETE FROM ringshard.ring_members m WHERE m.ring_name = ring AND m.node_name = node;
	PERFORM ringshard.forget_unused_nodes();
END
$$;
COMMENT ON FUNCTION ringshard.remove_node(text, text) IS 'removes a node from a ring; a node left in no ring and no map is forgotten';

CREATE FUNCTION ringshard.set_node_weight(node text, weight float8, ring text DEFAULT 'default') RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
BEGIN
	PERFORM ringshard.check_name('node', node);
	PERFORM ringshard.lock_ring(ring);
	PERFORM ringshard.check_weight(weight);
	UPDATE ringshard.ring_members m SET weight = set_node_weight.weight
	 WHERE m.ring_name = ring AND m.node_name = node;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'node "%" is not on ring "%"', node, ring
			USING ERRCODE = 'undefined_object';
	END IF;
	PERFORM ringshard.validate_ring(ring);
END
$$;
COMMENT ON FUNCTION ringshard.set_node_weight(text, float8, text) IS 'changes a node''s weight on a ring (points = round(vnodes * weight))';

-- Lock a node's row; raises if there is no such node.
CREATE FUNCTION ringshard.lock_node(node text) RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
BEGIN
	IF node IS NULL THEN
		RAISE EXCEPTION 'node name must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	PERFORM FROM ringshard.nodes n WHERE n.node_name = node FOR UPDATE;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'node "%" does not exist', node
			USING ERRCODE = 'undefined_object',
			      HINT = 'List nodes in ringshard.nodes.';
	END IF;
END
$$;
COMMENT ON FUNCTION ringshard.lock_node(text) IS 'locks a node''s catalog row; raises if the node does not exist';

CREATE FUNCTION ringshard.set_node_address(node text, address text) RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
BEGIN
	PERFORM ringshard.lock_node(node);
	IF address IS NOT NULL AND NOT ringshard.address_is_safe(address) THEN
		RAISE EXCEPTION 'invalid address for node "%"', node
			USING ERRCODE = 'invalid_parameter_value',
			      DETAIL = 'An address is host:port or a libpq connection string without a password.',
			      HINT = 'Keep passwords in ~/.pgpass, a service file or a postgres_fdw user mapping.';
	END IF;
	UPDATE ringshard.nodes n SET address = set_node_address.address WHERE n.node_name = node;
END
$$;
COMMENT ON FUNCTION ringshard.set_node_address(text, text) IS 'changes (or clears, with NULL) the libpq address of a node';

CREATE FUNCTION ringshard.mark_node_down(node text) RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
BEGIN
	PERFORM ringshard.lock_node(node);
	UPDATE ringshard.nodes n SET is_up = false WHERE n.node_name = node;
END
$$;
COMMENT ON FUNCTION ringshard.mark_node_down(text) IS 'read routing skips the node; ownership does not change';

CREATE FUNCTION ringshard.mark_node_up(node text) RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
BEGIN
	PERFORM ringshard.lock_node(node);
	UPDATE ringshard.nodes n SET is_up = true WHERE n.node_name = node;
END
$$;
COMMENT ON FUNCTION ringshard.mark_node_up(text) IS 'read routing uses the node again';

CREATE FUNCTION ringshard.ring_points(ring text DEFAULT 'default')
	RETURNS TABLE (token ringtoken, node text, vnode integer)
	AS 'MODULE_PATHNAME', 'ringshard_ring_points' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard.ring_points(text) IS
	'every point of a ring in ring order: token, node, and the label index i of "{node}#vnode#{i}" (ketama: 4k+h)';

CREATE FUNCTION ringshard.ring_balance(ring text DEFAULT 'default')
	RETURNS TABLE (node text, weight float8, points integer, owned_tokens numeric,
				   share float8, ideal_share float8, ratio float8)
	AS 'MODULE_PATHNAME', 'ringshard_ring_balance' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard.ring_balance(text) IS
	'per node: weight, points, exact tokens owned, share of the ring, ideal share (weight / total weight, 1/N when equal) and share / ideal';
-- Partition maps: 256 fixed partitions assigned to nodes in inclusive ranges.
-- A node's ranges within one map are kept merged, so the catalog holds one
-- row per maximal range and unassigning splits at most one row.

CREATE FUNCTION ringshard.lock_partition_map(map text) RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
BEGIN
	IF map IS NULL THEN
		RAISE EXCEPTION 'partition map name must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	PERFORM FROM ringshard.partition_maps p WHERE p.map_name = map FOR UPDATE;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'partition map "%" does not exist', map
			USING ERRCODE = 'undefined_object',
			      HINT = 'Create it with ringshard.create_partition_map(), or list maps in ringshard.partition_maps.';
	END IF;
END
$$;
COMMENT ON FUNCTION ringshard.lock_partition_map(text) IS 'locks a map''s catalog row for a change; raises if the map does not exist';

CREATE FUNCTION ringshard.create_partition_map(map text) RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
BEGIN
	PERFORM ringshard.check_name('partition map', map);
	IF EXISTS (SELECT FROM ringshard.partition_maps p WHERE p.map_name = map) THEN
		RAISE EXCEPTION 'partition map "%" already exists', map
			USING ERRCODE = 'duplicate_object';
	END IF;
	INSERT INTO ringshard.partition_maps (map_name) VALUES (map);
END
$$;
COMMENT ON FUNCTION ringshard.create_partition_map(text) IS 'creates an empty partition map (all 256 partitions are gaps)';

CREATE FUNCTION ringshard.drop_partition_map(map text) RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
DECLARE
	users text;
BEGIN
	PERFORM ringshard.lock_partition_map(map);
	SELECT string_agg(d.table_name::text, ', ' ORDER BY d.table_name::text) INTO users
	  FROM ringshard.distributed_tables d WHERE d.map_name = map;
	IF users IS NOT NULL THEN
		RAISE EXCEPTION 'cannot drop partition map "%" because annotated tables use it', map
			USING ERRCODE = 'dependent_objects_still_exist',
			      DETAIL = format('Tables placed by this map: %s.', users),
			      HINT = 'Remove their annotation first with ringshard.undistribute_table().';
	END IF;
	DELETE FROM ringshard.partition_maps p WHERE p.map_name = map;
	PERFORM ringshard.forget_unused_nodes();
END
$$;
COMMENT ON FUNCTION ringshard.drop_partition_map(text) IS 'drops a partition map; refused while annotated tables use it';

-- Partition bounds: 0..255, start <= end.
CREATE FUNCTION ringshard.check_partition_range(partition_start integer, partition_end integer) RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
BEGIN
	IF partition_start IS NULL OR partition_end IS NULL
	   OR partition_start NOT BETWEEN 0 AND 255 OR partition_end NOT BETWEEN 0 AND 255 THEN
		RAISE EXCEPTION 'partition range [%, %] is outside 0..255',
			coalesce(partition_start::text, 'NULL'), coalesce(partition_end::text, 'NULL')
			USING ERRCODE = 'numeric_value_out_of_range',
			      HINT = 'Partitions are numbered 0 to 255.';
	END IF;
	IF partition_start > partition_end THEN
		RAISE EXCEPTION 'partition range [%, %] starts after it ends', partition_start, partition_end
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
END
$$;
COMMENT ON FUNCTION ringshard.check_partition_range(integer, integer) IS 'raises unless 0 <= start <= end <= 255';

CREATE FUNCTION ringshard.assign_partitions(node text, partition_start integer, partition_end integer,
											map text DEFAULT 'default') RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
DECLARE
	merged_start integer := partition_start;
	merged_end integer := partition_end;
BEGIN
	PERFORM ringshard.lock_partition_map(map);
	PERFORM ringshard.check_partition_range(partition_start, partition_end);
	PERFORM ringshard.ensure_node(node, NULL);
	-- Merge with this node's ranges that overlap or touch the new one.
	SELECT least(merged_start, min(a.partition_start)), greatest(merged_end, max(a.partition_end))
	  INTO merged_start, merged_end
	  FROM ringshard.partition_assignments a
	 WHERE a.map_name = map AND a.node_name = node
	   AND a.partition_start <= assign_partitions.partition_end + 1
	   AND a.partition_end >= assign_partitions.partition_start - 1;
	merged_start := coalesce(merged_start, partition_start);
	merged_end := coalesce(merged_end, partition_end);
	DELETE FROM ringshard.partition_assignments a
	 WHERE a.map_name = map AND a.node_name = node
	   AND a.partition_start <= assign_partitions.partition_end + 1
	   AND a.partition_end >= assign_partitions.partition_start - 1;
	INSERT INTO ringshard.partition_assignments (map_name, node_name, partition_start, partition_end)
	VALUES (map, node, merged_start, merged_end);
END
$$;
COMMENT ON FUNCTION ringshard.assign_partitions(text, integer, integer, text) IS
	'gives a node the partitions start..end (inclusive) of a map; several holders of a partition replicate it';

CREATE FUNCTION ringshard.unassign_partitions(node text, partition_start integer, partition_end integer,
											  map text DEFAULT 'default') RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
DECLARE
	held ringshard.partition_assignments;
	removed boolean := false;
BEGIN
	PERFORM ringshard.check_name('node', node);
	PERFORM ringshard.lock_partition_map(map);
	PERFORM ringshard.check_partition_range(partition_start, partition_end);
	FOR held IN
		DELETE FROM ringshard.partition_assignments a
		 WHERE a.map_name = map AND a.node_name = node
		   AND a.partition_start <= unassign_partitions.partition_end
		   AND a.partition_end >= unassign_partitions.partition_start
		RETURNING *
	LOOP
		removed := true;
		IF held.partition_start < partition_start THEN
			INSERT INTO ringshard.partition_assignments VALUES (map, node, held.partition_start, partition_start - 1);
		END IF;
		IF held.partition_end > partition_end THEN
			INSERT INTO ringshard.partition_assignments VALUES (map, node, partition_end + 1, held.partition_end);
		END IF;
	END LOOP;
	IF NOT removed THEN
		RAISE EXCEPTION 'node "%" holds none of partitions %..% in map "%"', node, partition_start, partition_end, map
			USING ERRCODE = 'undefined_object';
	END IF;
	PERFORM ringshard.forget_unused_nodes();
END
$$;
COMMENT ON FUNCTION ringshard.unassign_partitions(text, integer, integer, text) IS
	'takes the partitions start..end (inclusive) of a map away from a node, splitting its ranges as needed';

CREATE FUNCTION ringshard.check_partition_map(map text DEFAULT 'default')
	RETURNS TABLE (kind text, partition_start integer, partition_end integer, nodes text[])
	AS 'MODULE_PATHNAME', 'ringshard_check_partition_map' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard.check_partition_map(text) IS
	'each maximal run of partitions that no node holds (gap) or several nodes hold (overlap), with the nodes; no rows means every partition has exactly one holder';

CREATE FUNCTION ringshard.parse_partition_config(config text)
	RETURNS TABLE (address text, partition_start integer, partition_end integer, line integer)
	AS 'MODULE_PATHNAME', 'ringshard_parse_partition_config' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard.parse_partition_config(text) IS
	'the node entries of a YAML coordinator config (version "v1"), or an error naming the field and line';

CREATE FUNCTION ringshard.format_partition_config(addresses text[], partition_starts integer[], partition_ends integer[])
	RETURNS text
	AS 'MODULE_PATHNAME', 'ringshard_format_partition_config' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard.format_partition_config(text[], integer[], integer[]) IS
	'writes node entries as a YAML coordinator config (version "v1")';

CREATE FUNCTION ringshard.load_partition_config(config text, map text DEFAULT 'default') RETURNS integer
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
DECLARE
	entry record;
	node text;
	entries integer := 0;
BEGIN
	IF config IS NULL THEN
		RAISE EXCEPTION 'a partition config must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	PERFORM ringshard.check_name('partition map', map);
	IF NOT EXISTS (SELECT FROM ringshard.partition_maps p WHERE p.map_name = map) THEN
		INSERT INTO ringshard.partition_maps (map_name) VALUES (map);
	END IF;
	PERFORM ringshard.lock_partition_map(map);
	-- Parse everything before changing anything.
	CREATE TEMPORARY TABLE IF NOT EXISTS pg_temp.ringshard_config_entries
		(address text, partition_start integer, partition_end integer, line integer) ON COMMIT DROP;
	TRUNCATE pg_temp.ringshard_config_entries;
	INSERT INTO pg_temp.ringshard_config_entries SELECT * FROM ringshard.parse_partition_config(config);

	DELETE FROM ringshard.partition_assignments a WHERE a.map_name = map;
	FOR entry IN SELECT * FROM pg_temp.ringshard_config_entries ORDER BY line LOOP
		-- An entry names a node by address; a node with that address is reused.
		SELECT n.node_name INTO node FROM ringshard.nodes n
		 WHERE n.address = entry.address OR (n.address IS NULL AND n.node_name = entry.address)
		 ORDER BY n.node_name = entry.address DESC, n.node_name LIMIT 1;
		IF node IS NULL THEN
			node := entry.address;
			BEGIN
				PERFORM ringshard.ensure_node(node, entry.address);
			EXCEPTION WHEN invalid_parameter_value OR duplicate_object THEN
				RAISE EXCEPTION 'invalid partition config: the address at line % cannot be used', entry.line
					USING ERRCODE = 'invalid_parameter_value',
					      DETAIL = format('At line %s, field address.', entry.line),
					      HINT = 'An address is host:port or a libpq connection string without a password, and must not clash with a node of another address.';
			END;
		END IF;
		PERFORM ringshard.assign_partitions(node, entry.partition_start, entry.partition_end, map);
		entries := entries + 1;
	END LOOP;
	DROP TABLE pg_temp.ringshard_config_entries;
	PERFORM ringshard.forget_unused_nodes();
	RETURN entries;
END
$$;
COMMENT ON FUNCTION ringshard.load_partition_config(text, text) IS
	'replaces a map''s assignments with a YAML coordinator config, all or nothing; nodes are found or created by address; returns the number of entries';

CREATE FUNCTION ringshard.partition_config(map text DEFAULT 'default') RETURNS text
	LANGUAGE plpgsql STABLE SET search_path = pg_catalog, ringshard AS $$
DECLARE
	result text;
BEGIN
	IF NOT EXISTS (SELECT FROM ringshard.partition_maps p WHERE p.map_name = map) THEN
		RAISE EXCEPTION 'partition map "%" does not exist', map
			USING ERRCODE = 'undefined_object';
	END IF;
	SELECT ringshard.format_partition_config(
			   coalesce(array_agg(coalesce(n.address, n.node_name) ORDER BY a.partition_start, a.node_name COLLATE "C"), '{}'),
			   coalesce(array_agg(a.partition_start ORDER BY a.partition_start, a.node_name COLLATE "C"), '{}'),
			   coalesce(array_agg(a.partition_end ORDER BY a.partition_start, a.node_name COLLATE "C"), '{}'))
	  INTO result
	  FROM ringshard.partition_assignments a JOIN ringshard.nodes n ON n.node_name = a.node_name
	 WHERE a.map_name = map;
	RETURN result;
END
$$;
COMMENT ON FUNCTION ringshard.partition_config(text) IS
	'the map as a YAML coordinator config (version "v1"), ranges in partition order; loading it back gives the same map';
-- Annotated tables: a table, its sharding key column, and the ring or
-- partition map that places its rows.  The annotation follows renames (by
-- attribute number) and disappears with the table or the key column.

CREATE FUNCTION pg_catalog.shard_of(row_value record) RETURNS text
	AS 'MODULE_PATHNAME', 'ringshard_shard_of' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pg_catalog.shard_of(record) IS
	'the node that owns a row of an annotated table (ring owner, or first holder of its partition)';

CREATE FUNCTION pg_catalog.replicas_of(row_value record) RETURNS text[]
	AS 'MODULE_PATHNAME', 'ringshard_replicas_of' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pg_catalog.replicas_of(record) IS
	'every node that holds a row of an annotated table (ring replica set, or all holders of its partition)';

-- The live attribute number of a column, or an error naming it.
CREATE FUNCTION ringshard.column_attnum(table_name regclass, column_name name) RETURNS smallint
	LANGUAGE plpgsql STABLE SET search_path = pg_catalog, ringshard AS $$
DECLARE
	found smallint;
BEGIN
	SELECT a.attnum INTO found FROM pg_attribute a
	 WHERE a.attrelid = table_name AND a.attname = column_name AND a.attnum > 0 AND NOT a.attisdropped;
	IF found IS NULL THEN
		RAISE EXCEPTION 'column "%" of table % does not exist', column_name, table_name
			USING ERRCODE = 'undefined_column';
	END IF;
	RETURN found;
END
$$;
COMMENT ON FUNCTION ringshard.column_attnum(regclass, name) IS 'the attribute number of a live user column, or an error';

-- Keep attribute numbers in step with names (on insert, and on restore).
CREATE FUNCTION ringshard.resolve_annotation_columns() RETURNS trigger
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
BEGIN
	IF (SELECT c.relkind FROM pg_class c WHERE c.oid = NEW.table_name) NOT IN ('r', 'p', 'f') THEN
		RAISE EXCEPTION '% is not a table', NEW.table_name
			USING ERRCODE = 'wrong_object_type',
			      HINT = 'Annotate an ordinary, partitioned or foreign table.';
	END IF;
	NEW.key_attnum := ringshard.column_attnum(NEW.table_name, NEW.key_column);
	NEW.keyspace_attnum := CASE WHEN NEW.keyspace_column IS NOT NULL
		THEN ringshard.column_attnum(NEW.table_name, NEW.keyspace_column) END;
	RETURN NEW;
END
$$;
COMMENT ON FUNCTION ringshard.resolve_annotation_columns() IS 'trigger: resolves key and keyspace column names to attribute numbers';
CREATE TRIGGER resolve_annotation_columns BEFORE INSERT OR UPDATE OF table_name, key_column, keyspace_column
	ON ringshard.distributed_tables FOR EACH ROW EXECUTE FUNCTION ringshard.resolve_annotation_columns();

CREATE FUNCTION ringshard.distribute_table(table_name regclass, key_column name, ring text DEFAULT 'default')
	RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
BEGIN
	IF table_name IS NULL OR key_column IS NULL THEN
		RAISE EXCEPTION 'table and key column must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	PERFORM ringshard.lock_ring(ring);
	IF EXISTS (SELECT FROM ringshard.distributed_tables d WHERE d.table_name = distribute_table.table_name) THEN
		RAISE EXCEPTION 'table % is already annotated', table_name
			USING ERRCODE = 'duplicate_object',
			      HINT = 'Remove the annotation first with ringshard.undistribute_table().';
	END IF;
	INSERT INTO ringshard.distributed_tables (table_name, key_column, key_attnum, ring_name)
	VALUES (table_name, key_column, 0, ring);
END
$$;
COMMENT ON FUNCTION ringshard.distribute_table(regclass, name, text) IS
	'annotates a table: its rows are placed on a ring by the key column';

CREATE FUNCTION ringshard.distribute_table_by_partition(table_name regclass, key_column name,
														keyspace text DEFAULT NULL,
														map text DEFAULT 'default',
														keyspace_column name DEFAULT NULL)
	RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
BEGIN
	IF table_name IS NULL OR key_column IS NULL OR map IS NULL THEN
		RAISE EXCEPTION 'table, key column and map must not be null'
			USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF (keyspace IS NULL) = (keyspace_column IS NULL) THEN
		RAISE EXCEPTION 'give exactly one of keyspace and keyspace_column'
			USING ERRCODE = 'invalid_parameter_value',
			      HINT = 'A constant keyspace: keyspace => ''faces''; one per row: keyspace_column => ''keyspace_id''.';
	END IF;
	PERFORM ringshard.lock_partition_map(map);
	IF EXISTS (SELECT FROM ringshard.distributed_tables d
				WHERE d.table_name = distribute_table_by_partition.table_name) THEN
		RAISE EXCEPTION 'table % is already annotated', table_name
			USING ERRCODE = 'duplicate_object',
			      HINT = 'Remove the annotation first with ringshard.undistribute_table().';
	END IF;
	INSERT INTO ringshard.distributed_tables (table_name, key_column, key_attnum, map_name, keyspace, keyspace_column)
	VALUES (table_name, key_column, 0, map, keyspace, keyspace_column);
END
$$;
COMMENT ON FUNCTION ringshard.distribute_table_by_partition(regclass, name, text, text, name) IS
	'annotates a table: its rows are placed by partition_for(keyspace, key) in a partition map; the keyspace is a constant or a column';

CREATE FUNCTION ringshard.undistribute_table(table_name regclass) RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
BEGIN
	IF table_name IS NULL THEN
		RAISE EXCEPTION 'table must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	DELETE FROM ringshard.distributed_tables d WHERE d.table_name = undistribute_table.table_name;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'table % is not annotated', table_name
			USING ERRCODE = 'undefined_object';
	END IF;
END
$$;
COMMENT ON FUNCTION ringshard.undistribute_table(regclass) IS 'removes a table''s annotation (its data is untouched)';

CREATE VIEW ringshard.annotated_tables AS
SELECT d.table_name, d.key_column,
	   CASE WHEN d.ring_name IS NOT NULL THEN 'ring' ELSE 'partition map' END AS placement,
	   coalesce(d.ring_name, d.map_name) AS placed_by,
	   d.keyspace, d.keyspace_column
  FROM ringshard.distributed_tables d;
COMMENT ON VIEW ringshard.annotated_tables IS 'tables annotated with a sharding key, and the ring or map that places them';

CREATE FUNCTION ringshard.rows_per_node(table_name regclass)
	RETURNS TABLE (node text, rows_owned bigint, rows_held bigint, share_owned float8)
	LANGUAGE plpgsql STABLE SET search_path = pg_catalog, ringshard AS $$
BEGIN
	IF NOT EXISTS (SELECT FROM ringshard.distributed_tables d WHERE d.table_name = rows_per_node.table_name) THEN
		RAISE EXCEPTION 'table % is not annotated', table_name
			USING ERRCODE = 'undefined_object',
			      HINT = 'Annotate it with ringshard.distribute_table().';
	END IF;
	-- regclass output is a correctly quoted, qualified name: no injection.
	RETURN QUERY EXECUTE format(
		'WITH placed AS (SELECT pg_catalog.replicas_of(t) AS holders FROM %s t),
		      held AS (SELECT h.node, h.ord FROM placed, unnest(placed.holders) WITH ORDINALITY AS h(node, ord)),
		      total AS (SELECT count(*) AS n FROM placed WHERE holders IS NOT NULL)
		 SELECT held.node, count(*) FILTER (WHERE held.ord = 1), count(*),
		        (count(*) FILTER (WHERE held.ord = 1))::float8 / nullif((SELECT n FROM total), 0)
		   FROM held GROUP BY held.node ORDER BY held.node COLLATE "C"', table_name);
END
$$;
COMMENT ON FUNCTION ringshard.rows_per_node(regclass) IS
	'per node, the rows of an annotated table it owns and holds (with replicas), and its share of owned rows: the data''s real skew';

-- Event triggers: no dangling annotation after DROP or ALTER.
-- Event triggers fire for every user's DDL, while the catalog is writable
-- only by administrators: these run with the extension owner's rights.
CREATE FUNCTION ringshard.forget_dropped_tables() RETURNS event_trigger
	LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, ringshard AS $$
DECLARE
	dropped record;
BEGIN
	FOR dropped IN SELECT * FROM pg_event_trigger_dropped_objects()
				   WHERE object_type IN ('table', 'table column', 'foreign table', 'foreign table column') LOOP
		IF dropped.objsubid = 0 THEN
			DELETE FROM ringshard.distributed_tables d WHERE d.table_name::oid = dropped.objid;
		ELSE
			DELETE FROM ringshard.distributed_tables d
			 WHERE d.table_name::oid = dropped.objid
			   AND dropped.objsubid IN (d.key_attnum, d.keyspace_attnum);
			IF FOUND THEN
				RAISE NOTICE 'table % is no longer annotated: its sharding key column was dropped', dropped.objid::regclass;
			END IF;
		END IF;
	END LOOP;
END
$$;
COMMENT ON FUNCTION ringshard.forget_dropped_tables() IS 'event trigger: drops the annotation of a dropped table or key column';
CREATE EVENT TRIGGER ringshard_forget_dropped_tables ON sql_drop
	EXECUTE FUNCTION ringshard.forget_dropped_tables();

CREATE FUNCTION ringshard.follow_renamed_columns() RETURNS event_trigger
	LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, ringshard AS $$
BEGIN
	UPDATE ringshard.distributed_tables d
	   SET key_column = (SELECT a.attname FROM pg_attribute a WHERE a.attrelid = d.table_name AND a.attnum = d.key_attnum),
	       keyspace_column = (SELECT a.attname FROM pg_attribute a WHERE a.attrelid = d.table_name AND a.attnum = d.keyspace_attnum)
	 WHERE d.table_name::oid IN (SELECT c.objid FROM pg_event_trigger_ddl_commands() c WHERE c.classid = 'pg_class'::regclass)
	   AND (d.key_column IS DISTINCT FROM (SELECT a.attname FROM pg_attribute a WHERE a.attrelid = d.table_name AND a.attnum = d.key_attnum)
	        OR d.keyspace_column IS DISTINCT FROM (SELECT a.attname FROM pg_attribute a WHERE a.attrelid = d.table_name AND a.attnum = d.keyspace_attnum));
END
$$;
COMMENT ON FUNCTION ringshard.follow_renamed_columns() IS 'event trigger: keeps annotation column names in step with ALTER TABLE ... RENAME';
CREATE EVENT TRIGGER ringshard_follow_renamed_columns ON ddl_command_end
	WHEN TAG IN ('ALTER TABLE', 'ALTER FOREIGN TABLE')
	EXECUTE FUNCTION ringshard.follow_renamed_columns();
-- Previews: what a topology change would move, computed before any data
-- moves and without changing the catalog.

CREATE FUNCTION ringshard.preview_change(ring text, change text, node text, weight float8, copies boolean)
	RETURNS TABLE (from_node text, to_node text, range_start ringtoken, range_end ringtoken, fraction float8)
	AS 'MODULE_PATHNAME', 'ringshard_preview_change' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard.preview_change(text, text, text, float8, boolean) IS
	'ranges whose owner (copies false) or replica set (copies true: from_node is the node, to_node ''gains'' or ''loses'') a change ''add'', ''remove'' or ''set_weight'' would alter';

CREATE FUNCTION ringshard.preview_add_node(node text, ring text DEFAULT 'default', weight float8 DEFAULT 1)
	RETURNS TABLE (from_node text, to_node text, range_start ringtoken, range_end ringtoken, fraction float8)
	LANGUAGE sql STABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, ringshard
	AS $$ SELECT * FROM ringshard.preview_change(ring, 'add', node, weight, false) $$;
COMMENT ON FUNCTION ringshard.preview_add_node(text, text, float8) IS
	'each contiguous token range (range_start, range_end] whose owner changes if the node joins, with its exact share of the ring; nothing changes';

CREATE FUNCTION ringshard.preview_remove_node(node text, ring text DEFAULT 'default')
	RETURNS TABLE (from_node text, to_node text, range_start ringtoken, range_end ringtoken, fraction float8)
	LANGUAGE sql STABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, ringshard
	AS $$ SELECT * FROM ringshard.preview_change(ring, 'remove', node, 1, false) $$;
COMMENT ON FUNCTION ringshard.preview_remove_node(text, text) IS
	'each token range whose owner changes if the node leaves; nothing changes';

CREATE FUNCTION ringshard.preview_set_weight(node text, weight float8, ring text DEFAULT 'default')
	RETURNS TABLE (from_node text, to_node text, range_start ringtoken, range_end ringtoken, fraction float8)
	LANGUAGE sql STABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, ringshard
	AS $$ SELECT * FROM ringshard.preview_change(ring, 'set_weight', node, weight, false) $$;
COMMENT ON FUNCTION ringshard.preview_set_weight(text, float8, text) IS
	'each token range whose owner changes if the node''s weight changes; nothing changes';

CREATE FUNCTION ringshard.preview_add_node_copies(node text, ring text DEFAULT 'default', weight float8 DEFAULT 1)
	RETURNS TABLE (node text, change text, range_start ringtoken, range_end ringtoken, fraction float8)
	LANGUAGE sql STABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, ringshard
	AS $$ SELECT * FROM ringshard.preview_change(ring, 'add', node, weight, true) $$;
COMMENT ON FUNCTION ringshard.preview_add_node_copies(text, text, float8) IS
	'with replication: each range in which a node gains or loses a copy if the node joins (what data movement really is)';

CREATE FUNCTION ringshard.preview_remove_node_copies(node text, ring text DEFAULT 'default')
	RETURNS TABLE (node text, change text, range_start ringtoken, range_end ringtoken, fraction float8)
	LANGUAGE sql STABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, ringshard
	AS $$ SELECT * FROM ringshard.preview_change(ring, 'remove', node, 1, true) $$;
COMMENT ON FUNCTION ringshard.preview_remove_node_copies(text, text) IS
	'with replication: each range in which a node gains or loses a copy if the node leaves';

CREATE FUNCTION ringshard.preview_set_weight_copies(node text, weight float8, ring text DEFAULT 'default')
	RETURNS TABLE (node text, change text, range_start ringtoken, range_end ringtoken, fraction float8)
	LANGUAGE sql STABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, ringshard
	AS $$ SELECT * FROM ringshard.preview_change(ring, 'set_weight', node, weight, true) $$;
COMMENT ON FUNCTION ringshard.preview_set_weight_copies(text, float8, text) IS
	'with replication: each range in which a node gains or loses a copy if the node''s weight changes';

CREATE FUNCTION ringshard.proposed_replicas(key text, ring text, change text, node text, weight float8 DEFAULT 1)
	RETURNS text[]
	AS 'MODULE_PATHNAME', 'ringshard_proposed_replicas' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION ringshard.proposed_replicas(key anyelement, ring text, change text, node text, weight float8 DEFAULT 1)
	RETURNS text[]
	AS 'MODULE_PATHNAME', 'ringshard_proposed_replicas' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION ringshard.proposed_replicas(key character, ring text, change text, node text, weight float8 DEFAULT 1)
	RETURNS text[]
	AS 'MODULE_PATHNAME', 'ringshard_proposed_replicas' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard.proposed_replicas(character, text, text, text, float8) IS
	'the char(n) key''s replica set (padding included) on the ring as it would be after the change';
COMMENT ON FUNCTION ringshard.proposed_replicas(text, text, text, text, float8) IS
	'the key''s replica set, owner first, on the ring as it would be after the change (add, remove, set_weight)';
COMMENT ON FUNCTION ringshard.proposed_replicas(anyelement, text, text, text, float8) IS
	'the key''s replica set, owner first, on the ring as it would be after the change (add, remove, set_weight)';

-- Row-level plans for annotated tables.  The query streams through the
-- table; RETURN QUERY spills to disk past work_mem rather than growing.
CREATE FUNCTION ringshard.plan_table_moves(table_name regclass, change text, node text, weight float8 DEFAULT 1)
	RETURNS TABLE (key text, from_node text, to_node text, from_replicas text[], to_replicas text[])
	LANGUAGE plpgsql STABLE STRICT SET search_path = pg_catalog, ringshard AS $$
DECLARE
	annotation ringshard.distributed_tables;
BEGIN
	SELECT * INTO annotation FROM ringshard.distributed_tables d WHERE d.table_name = plan_table_moves.table_name;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'table % is not annotated', table_name
			USING ERRCODE = 'undefined_object', HINT = 'Annotate it with ringshard.distribute_table().';
	END IF;
	IF annotation.ring_name IS NULL THEN
		RAISE EXCEPTION 'table % is placed by a partition map, not a ring', table_name
			USING ERRCODE = 'wrong_object_type',
			      HINT = 'Preview partition maps with ringshard.preview_partition_config().';
	END IF;
	RETURN QUERY EXECUTE format(
		'SELECT s.k::text, s.before[1], s.after[1], s.before, s.after
		   FROM (SELECT t.%1$I AS k, pg_catalog.replicas_of(t) AS before,
		                ringshard.proposed_replicas(t.%1$I, $1, $2, $3, $4) AS after
		           FROM %2$s t WHERE t.%1$I IS NOT NULL) s
		  WHERE s.before IS DISTINCT FROM s.after', annotation.key_column, table_name)
	USING annotation.ring_name, change, node, weight;
END
$$;
COMMENT ON FUNCTION ringshard.plan_table_moves(regclass, text, text, float8) IS
	'every row of a ring-placed table whose replica set a change (add, remove, set_weight) would alter, with old and new owners and replica sets';

CREATE FUNCTION ringshard.plan_table_summary(table_name regclass, change text, node text, weight float8 DEFAULT 1)
	RETURNS TABLE (from_node text, to_node text, rows bigint)
	LANGUAGE sql STABLE STRICT SET search_path = pg_catalog, ringshard AS $$
	SELECT m.from_node, m.to_node, count(*)
	  FROM ringshard.plan_table_moves(table_name, change, node, weight) m
	 WHERE m.from_node IS DISTINCT FROM m.to_node
	 GROUP BY m.from_node, m.to_node ORDER BY m.from_node COLLATE "C", m.to_node COLLATE "C";
$$;
COMMENT ON FUNCTION ringshard.plan_table_summary(regclass, text, text, float8) IS
	'rows whose owner a change would move, counted per (from, to) pair: a migration plan per table';

CREATE FUNCTION ringshard.compare_schemes(from_nodes integer, to_nodes integer, keys integer DEFAULT 100000,
										  vnodes integer DEFAULT 256)
	RETURNS TABLE (scheme text, moved_fraction float8, ideal_fraction float8, max_over_mean float8, stddev_share float8)
	AS 'MODULE_PATHNAME', 'ringshard_compare_schemes' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard.compare_schemes(integer, integer, integer, integer) IS
	'keys key-0.. placed with modulo, range, ring, jump and rendezvous on from_nodes then to_nodes nodes: share moved against the ideal, and balance after';

-- Balance and skew.
CREATE FUNCTION ringshard.ring_skew(ring text DEFAULT 'default', threshold float8 DEFAULT 1.25)
	RETURNS TABLE (node text, share float8, ideal_share float8, ratio float8, hotspot boolean)
	LANGUAGE sql STABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, ringshard AS $$
	SELECT b.node, b.share, b.ideal_share, b.ratio, b.ratio > threshold
	  FROM ringshard.ring_balance(ring) b ORDER BY b.ratio DESC, b.node COLLATE "C";
$$;
COMMENT ON FUNCTION ringshard.ring_skew(text, float8) IS
	'each node''s share of the ring against its ideal share; hotspot when the ratio exceeds the threshold (default 1.25)';

CREATE FUNCTION ringshard.ring_balance_summary(ring text DEFAULT 'default')
	RETURNS TABLE (nodes integer, points bigint, max_over_mean float8, stddev_ratio float8, expected_stddev_ratio float8)
	LANGUAGE sql STABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, ringshard AS $$
	SELECT count(*)::integer, sum(b.points), max(b.ratio), stddev_pop(b.ratio),
	       1 / sqrt((SELECT r.vnodes FROM ringshard.rings r WHERE r.ring_name = ring))
	  FROM ringshard.ring_balance(ring) b;
$$;
COMMENT ON FUNCTION ringshard.ring_balance_summary(text) IS
	'max/mean and standard deviation of share/ideal over nodes, next to what V vnodes predict (about 1/sqrt(V))';

CREATE FUNCTION ringshard.table_skew(table_name regclass, threshold float8 DEFAULT 1.25)
	RETURNS TABLE (node text, rows_owned bigint, share float8, ratio float8, hotspot boolean)
	LANGUAGE sql STABLE STRICT SET search_path = pg_catalog, ringshard AS $$
	WITH per_node AS (SELECT * FROM ringshard.rows_per_node(table_name)),
	     n AS (SELECT count(*) AS nodes FROM per_node)
	SELECT p.node, p.rows_owned, p.share_owned, p.share_owned * n.nodes, p.share_owned * n.nodes > threshold
	  FROM per_node p, n ORDER BY p.share_owned DESC, p.node COLLATE "C";
$$;
COMMENT ON FUNCTION ringshard.table_skew(regclass, float8) IS
	'each node''s share of a table''s rows against 1/N of the nodes holding rows; a bad sharding key shows up as hotspots';

-- Partition map previews.
CREATE FUNCTION ringshard.preview_partition_assignments(nodes text[], partition_starts integer[],
														 partition_ends integer[], map text DEFAULT 'default')
	RETURNS TABLE (partition_start integer, partition_end integer, from_nodes text[], to_nodes text[])
	LANGUAGE plpgsql STABLE SET search_path = pg_catalog, ringshard AS $$
BEGIN
	IF nodes IS NULL OR partition_starts IS NULL OR partition_ends IS NULL OR map IS NULL THEN
		RAISE EXCEPTION 'arguments must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF cardinality(nodes) <> cardinality(partition_starts) OR cardinality(nodes) <> cardinality(partition_ends) THEN
		RAISE EXCEPTION 'nodes, partition_starts and partition_ends must have the same length'
			USING ERRCODE = 'array_subscript_error';
	END IF;
	PERFORM ringshard.check_partition_range(s, e) FROM unnest(partition_starts, partition_ends) AS u(s, e);
	IF NOT EXISTS (SELECT FROM ringshard.partition_maps m WHERE m.map_name = map) THEN
		RAISE EXCEPTION 'partition map "%" does not exist', map USING ERRCODE = 'undefined_object';
	END IF;
	RETURN QUERY
	WITH proposed AS (
		SELECT p, coalesce(array_agg(DISTINCT u.n ORDER BY u.n) FILTER (WHERE u.n IS NOT NULL), '{}') AS holders
		  FROM generate_series(0, 255) p
		  LEFT JOIN unnest(nodes, partition_starts, partition_ends) AS u(n, s, e) ON p BETWEEN u.s AND u.e
		 GROUP BY p),
	     current AS (
		SELECT p, coalesce(array_agg(DISTINCT a.node_name ORDER BY a.node_name) FILTER (WHERE a.node_name IS NOT NULL), '{}') AS holders
		  FROM generate_series(0, 255) p
		  LEFT JOIN ringshard.partition_assignments a
		    ON a.map_name = map AND p BETWEEN a.partition_start AND a.partition_end
		 GROUP BY p),
	     changed AS (
		SELECT c.p, c.holders AS before, n.holders AS after,
		       c.p - row_number() OVER (PARTITION BY c.holders, n.holders ORDER BY c.p) AS run
		  FROM current c JOIN proposed n USING (p)
		 WHERE c.holders IS DISTINCT FROM n.holders)
	SELECT min(ch.p)::integer, max(ch.p)::integer, ch.before, ch.after
	  FROM changed ch GROUP BY ch.before, ch.after, ch.run ORDER BY 1;
END
$$;
COMMENT ON FUNCTION ringshard.preview_partition_assignments(text[], integer[], integer[], text) IS
	'runs of partitions whose holders would change if the map held exactly these (node, start, end) ranges; nothing changes';

CREATE FUNCTION ringshard.preview_partition_config(config text, map text DEFAULT 'default')
	RETURNS TABLE (partition_start integer, partition_end integer, from_nodes text[], to_nodes text[])
	LANGUAGE plpgsql STABLE STRICT SET search_path = pg_catalog, ringshard AS $$
DECLARE
	names text[];
	starts integer[];
	ends integer[];
BEGIN
	-- Entries name nodes by address, as load_partition_config resolves them.
	SELECT coalesce(array_agg(coalesce(
	           (SELECT n.node_name FROM ringshard.nodes n
	             WHERE n.address = c.address OR (n.address IS NULL AND n.node_name = c.address)
	             ORDER BY n.node_name = c.address DESC, n.node_name LIMIT 1), c.address) ORDER BY c.line), '{}'),
	       coalesce(array_agg(c.partition_start ORDER BY c.line), '{}'),
	       coalesce(array_agg(c.partition_end ORDER BY c.line), '{}')
	  INTO names, starts, ends
	  FROM ringshard.parse_partition_config(config) c;
	RETURN QUERY SELECT * FROM ringshard.preview_partition_assignments(names, starts, ends, map);
END
$$;
COMMENT ON FUNCTION ringshard.preview_partition_config(text, text) IS
	'runs of partitions whose holders would change if the YAML config were loaded into the map; nothing changes';

CREATE FUNCTION ringshard.suggest_partition_boundaries(table_name regclass)
	RETURNS TABLE (node text, partition_start integer, partition_end integer, rows bigint, current_rows bigint)
	LANGUAGE plpgsql STABLE STRICT SET search_path = pg_catalog, ringshard AS $$
DECLARE
	annotation ringshard.distributed_tables;
	keyspace_expr text;
BEGIN
	SELECT * INTO annotation FROM ringshard.distributed_tables d WHERE d.table_name = suggest_partition_boundaries.table_name;
	IF NOT FOUND OR annotation.map_name IS NULL THEN
		RAISE EXCEPTION 'table % is not placed by a partition map', table_name
			USING ERRCODE = 'wrong_object_type',
			      HINT = 'Annotate it with ringshard.distribute_table_by_partition().';
	END IF;
	keyspace_expr := CASE WHEN annotation.keyspace_column IS NOT NULL
		THEN format('t.%I::text', annotation.keyspace_column) ELSE quote_literal(annotation.keyspace) END;
	-- Rows per partition, then contiguous cuts that give each node (the
	-- map's current nodes, in name order) as close to total/N rows as the
	-- cumulative counts allow.
	RETURN QUERY EXECUTE format($q$
		WITH per_partition AS (
			SELECT p, coalesce(cnt, 0) AS cnt
			  FROM generate_series(0, 255) p
			  LEFT JOIN (SELECT pg_catalog.partition_for(%1$s, t.%2$I) AS part, count(*) AS cnt
			               FROM %3$s t WHERE t.%2$I IS NOT NULL GROUP BY 1) c ON c.part = p),
		     nodes AS (
			SELECT n, row_number() OVER (ORDER BY n COLLATE "C") - 1 AS idx, count(*) OVER () AS total_nodes
			  FROM (SELECT DISTINCT a.node_name AS n FROM ringshard.partition_assignments a WHERE a.map_name = $1) s),
		     cumulative AS (
			SELECT p, cnt, sum(cnt) OVER (ORDER BY p) - cnt AS before_p, sum(cnt) OVER () AS total
			  FROM per_partition),
		     assigned AS (
			SELECT c.p, c.cnt,
			       CASE WHEN c.total = 0 THEN c.p * (SELECT max(total_nodes) FROM nodes) / 256
			            ELSE least(floor((c.before_p + c.cnt / 2.0) * (SELECT max(total_nodes) FROM nodes) / c.total),
			                       (SELECT max(total_nodes) FROM nodes) - 1) END AS idx
			  FROM cumulative c),
		     current_rows AS (
			SELECT a.node_name AS n, sum(pp.cnt) AS cnt
			  FROM ringshard.partition_assignments a
			  JOIN per_partition pp ON pp.p BETWEEN a.partition_start AND a.partition_end
			 WHERE a.map_name = $1 GROUP BY 1)
		SELECT nodes.n, min(assigned.p)::integer, max(assigned.p)::integer, sum(assigned.cnt)::bigint,
		       coalesce((SELECT cr.cnt FROM current_rows cr WHERE cr.n = nodes.n), 0)::bigint
		  FROM assigned JOIN nodes ON nodes.idx = assigned.idx
		 GROUP BY nodes.n ORDER BY 2$q$, keyspace_expr, annotation.key_column, table_name)
	USING annotation.map_name;
END
$$;
COMMENT ON FUNCTION ringshard.suggest_partition_boundaries(regclass) IS
	'new contiguous partition boundaries that equalise a partition-mapped table''s rows over the map''s current nodes; preview their moves with preview_partition_assignments()';
-- Cluster mode.  The coordinator keeps the topology; workers are ordinary
-- PostgreSQL servers with this extension, a copy of the topology (pushed by
-- sync_topology, with a version number) and their own name, so that each
-- worker can refuse rows that are not its own.

CREATE TABLE ringshard.cluster_state (
	singleton boolean PRIMARY KEY DEFAULT true CONSTRAINT one_row CHECK (singleton),
	local_node text,
	topology_version bigint NOT NULL DEFAULT 0
);
INSERT INTO ringshard.cluster_state DEFAULT VALUES;
COMMENT ON TABLE ringshard.cluster_state IS
	'this server''s role: on a worker its node name; everywhere the version of the topology it holds';
CREATE TRIGGER invalidate_topology_cache AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
	ON ringshard.cluster_state FOR EACH STATEMENT EXECUTE FUNCTION ringshard.invalidate_topology_cache();
-- A restored row updates the one CREATE EXTENSION made.
CREATE FUNCTION ringshard.merge_cluster_state() RETURNS trigger
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
BEGIN
	IF EXISTS (SELECT FROM ringshard.cluster_state) THEN
		UPDATE ringshard.cluster_state SET (local_node, topology_version) = (NEW.local_node, NEW.topology_version);
		-- columns added by later pieces of the script are restored too
		UPDATE ringshard.cluster_state s SET change_counter = (to_jsonb(NEW)->>'change_counter')::bigint
		 WHERE to_jsonb(NEW) ? 'change_counter';
		UPDATE ringshard.cluster_state s SET coordinator_id = (to_jsonb(NEW)->>'coordinator_id')::uuid
		 WHERE to_jsonb(NEW) ? 'coordinator_id';
		RETURN NULL;
	END IF;
	RETURN NEW;
END
$$;
COMMENT ON FUNCTION ringshard.merge_cluster_state() IS 'trigger: a restored cluster_state row updates the existing one';
CREATE TRIGGER merge_cluster_state BEFORE INSERT ON ringshard.cluster_state
	FOR EACH ROW EXECUTE FUNCTION ringshard.merge_cluster_state();
SELECT pg_catalog.pg_extension_config_dump('ringshard.cluster_state', '');

CREATE FUNCTION ringshard.node_execute(nodes text[], sql text, params text[] DEFAULT '{}',
									   in_transaction boolean DEFAULT true)
	RETURNS TABLE (node text, ok boolean, value text, error text, elapsed_ms float8)
	AS 'MODULE_PATHNAME', 'ringshard_node_execute' LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION ringshard.node_execute(text[], text, text[], boolean) IS
	'runs one statement on several nodes in parallel (libpq, asynchronous), inside remote transactions that commit with this one unless in_transaction is false';

CREATE FUNCTION ringshard.node_health()
	RETURNS TABLE (node text, reachable boolean, rtt_ms float8, server_version text,
				   database_size bigint, connections integer, last_error text)
	AS 'MODULE_PATHNAME', 'ringshard_node_health' LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION ringshard.node_health() IS
	'probes every node in parallel: reachable, round trip, server version, database size, connections, last error; a dead node costs at most ringshard.node_timeout';

CREATE FUNCTION ringshard.addressed_nodes() RETURNS text[]
	AS 'MODULE_PATHNAME', 'ringshard_addressed_nodes' LANGUAGE C STABLE STRICT;
COMMENT ON FUNCTION ringshard.addressed_nodes() IS 'the nodes that have an address (the addresses themselves stay hidden)';

CREATE FUNCTION ringshard.node_table_rows(table_name regclass)
	RETURNS TABLE (node text, rows bigint, error text)
	AS 'MODULE_PATHNAME', 'ringshard_node_table_rows' LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION ringshard.node_table_rows(regclass) IS
	'rows of a distributed table on each node (copies included): the seed''s loaded-vectors per node';

-- The topology as JSON, for workers.  Addresses stay on the coordinator.
CREATE FUNCTION ringshard.topology_snapshot() RETURNS json
	LANGUAGE sql STABLE SET search_path = pg_catalog, ringshard AS $$
	SELECT json_build_object(
		'rings', (SELECT coalesce(json_agg(r), '[]') FROM ringshard.rings r),
		'nodes', (SELECT coalesce(json_agg(json_build_object('node_name', n.node_name, 'is_up', n.is_up)), '[]') FROM ringshard.nodes n),
		'ring_members', (SELECT coalesce(json_agg(m), '[]') FROM ringshard.ring_members m),
		'partition_maps', (SELECT coalesce(json_agg(p), '[]') FROM ringshard.partition_maps p),
		'partition_assignments', (SELECT coalesce(json_agg(a), '[]') FROM ringshard.partition_assignments a));
$$;
COMMENT ON FUNCTION ringshard.topology_snapshot() IS 'rings, nodes (without addresses), members, maps and assignments as JSON';

-- On a worker: replace the topology with the coordinator's, if newer.
CREATE FUNCTION ringshard.apply_topology(topology json, local_node text, version bigint) RETURNS bigint
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
DECLARE
	held bigint;
BEGIN
	IF topology IS NULL OR local_node IS NULL OR version IS NULL THEN
		RAISE EXCEPTION 'topology, local node and version must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF json_typeof(topology) <> 'object'
	   OR EXISTS (SELECT FROM unnest(ARRAY['rings', 'nodes', 'ring_members', 'partition_maps', 'partition_assignments']) k
	               WHERE json_typeof(topology -> k) IS DISTINCT FROM 'array') THEN
		RAISE EXCEPTION 'a topology is a JSON object with the arrays rings, nodes, ring_members, partition_maps and partition_assignments'
			USING ERRCODE = 'invalid_parameter_value', HINT = 'It comes from ringshard.topology_snapshot() on the coordinator.';
	END IF;
	SELECT s.topology_version INTO held FROM ringshard.cluster_state s FOR UPDATE;
	IF version <= held THEN
		RAISE EXCEPTION 'topology version % is not newer than version % held here', version, held
			USING ERRCODE = 'object_not_in_prerequisite_state',
			      HINT = 'Another coordinator session synced first; sync again.';
	END IF;
	INSERT INTO ringshard.rings SELECT * FROM json_populate_recordset(NULL::ringshard.rings, topology->'rings')
		ON CONFLICT (ring_name) DO UPDATE SET algorithm = EXCLUDED.algorithm, vnodes = EXCLUDED.vnodes,
		                                      replication_factor = EXCLUDED.replication_factor;
	INSERT INTO ringshard.partition_maps SELECT * FROM json_populate_recordset(NULL::ringshard.partition_maps, topology->'partition_maps')
		ON CONFLICT DO NOTHING;
	INSERT INTO ringshard.nodes (node_name, is_up)
	SELECT n.node_name, n.is_up FROM json_populate_recordset(NULL::ringshard.nodes, topology->'nodes') n
		ON CONFLICT (node_name) DO UPDATE SET is_up = EXCLUDED.is_up;
	DELETE FROM ringshard.ring_members;
	INSERT INTO ringshard.ring_members SELECT * FROM json_populate_recordset(NULL::ringshard.ring_members, topology->'ring_members');
	DELETE FROM ringshard.partition_assignments;
	INSERT INTO ringshard.partition_assignments
	SELECT * FROM json_populate_recordset(NULL::ringshard.partition_assignments, topology->'partition_assignments');
	DELETE FROM ringshard.rings r
	 WHERE r.ring_name NOT IN (SELECT x.ring_name FROM json_populate_recordset(NULL::ringshard.rings, topology->'rings') x);
	DELETE FROM ringshard.partition_maps p
	 WHERE p.map_name NOT IN (SELECT x.map_name FROM json_populate_recordset(NULL::ringshard.partition_maps, topology->'partition_maps') x);
	DELETE FROM ringshard.nodes n
	 WHERE n.node_name NOT IN (SELECT x.node_name FROM json_populate_recordset(NULL::ringshard.nodes, topology->'nodes') x);
	UPDATE ringshard.cluster_state SET local_node = apply_topology.local_node, topology_version = version;
	RETURN version;
END
$$;
COMMENT ON FUNCTION ringshard.apply_topology(json, text, bigint) IS
	'on a worker: takes the coordinator''s topology and this worker''s node name, refusing a version not newer than the one held';

CREATE FUNCTION ringshard.sync_topology() RETURNS TABLE (node text, version bigint)
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
DECLARE
	snapshot json := ringshard.topology_snapshot();
	target text;
	new_version bigint;
	outcome record;
BEGIN
	UPDATE ringshard.cluster_state SET topology_version = topology_version + 1
	RETURNING topology_version INTO new_version;
	FOR target IN SELECT n.node_name FROM ringshard.nodes n WHERE n.address IS NOT NULL ORDER BY n.node_name COLLATE "C" LOOP
		SELECT * INTO outcome FROM ringshard.node_execute(ARRAY[target],
			'SELECT ringshard.apply_topology($1::json, $2, $3::bigint)',
			ARRAY[snapshot::text, target, new_version::text]);
		IF NOT outcome.ok THEN
			RAISE EXCEPTION 'could not sync the topology to node "%"', target
				USING ERRCODE = 'connection_failure', DETAIL = outcome.error,
				      HINT = 'Nothing was changed anywhere; fix the node and sync again.';
		END IF;
		node := target;
		version := new_version;
		RETURN NEXT;
	END LOOP;
END
$$;
COMMENT ON FUNCTION ringshard.sync_topology() IS
	'pushes the topology, with a new version number, to every node with an address, all or nothing (the remote transactions commit with this one)';

-- On a worker: whether this node is the chosen reader of a row: the first
-- of its replicas not excluded by the coordinator.
CREATE FUNCTION ringshard.reads_here(row_value record, excluded text[]) RETURNS boolean
	AS 'MODULE_PATHNAME', 'ringshard_reads_here' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard.reads_here(record, text[]) IS
	'on a worker: true if this node is the first replica of the row outside the excluded nodes (so a fan-out reads each row once)';

-- On a worker: refuse rows this node does not hold under its topology.
CREATE FUNCTION ringshard.reject_misrouted_rows() RETURNS trigger
	AS 'MODULE_PATHNAME', 'ringshard_reject_misrouted_rows' LANGUAGE C;
COMMENT ON FUNCTION ringshard.reject_misrouted_rows() IS
	'trigger on a worker''s distributed table: a row this node does not hold under its topology is an error';

-- On a worker: take a distributed table's definition and annotation.
CREATE FUNCTION ringshard.adopt_distributed_table(table_name text, columns json, key_column name,
												  ring text, map text, keyspace text, keyspace_column name)
	RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
DECLARE
	relid regclass := to_regclass(table_name);
	mismatch text;
BEGIN
	IF relid IS NULL THEN
		EXECUTE format('CREATE TABLE %s (%s)', table_name,
			(SELECT string_agg(format('%I %s', c->>'name', c->>'type'), ', ') FROM json_array_elements(columns) c));
		relid := to_regclass(table_name);
	ELSE
		SELECT string_agg(format('%s %s', coalesce(want.name, have.name), coalesce(want.type, '(missing)')), ', ') INTO mismatch
		  FROM (SELECT c->>'name' AS name, c->>'type' AS type FROM json_array_elements(columns) c) want
		  FULL JOIN (SELECT a.attname::text AS name, format_type(a.atttypid, a.atttypmod) AS type
		               FROM pg_attribute a WHERE a.attrelid = relid AND a.attnum > 0 AND NOT a.attisdropped) have
		    ON have.name = want.name AND have.type = want.type
		 WHERE want.name IS NULL OR have.name IS NULL;
		IF mismatch IS NOT NULL THEN
			RAISE EXCEPTION 'table % on this node does not match the coordinator''s definition', table_name
				USING ERRCODE = 'datatype_mismatch', DETAIL = format('Differing columns: %s.', mismatch);
		END IF;
	END IF;
	DELETE FROM ringshard.distributed_tables d WHERE d.table_name = relid;
	INSERT INTO ringshard.distributed_tables (table_name, key_column, key_attnum, ring_name, map_name, keyspace, keyspace_column)
	VALUES (relid, key_column, 0, nullif(ring, ''), nullif(map, ''), nullif(keyspace, ''), nullif(keyspace_column, ''));
	IF EXISTS (SELECT FROM pg_trigger t WHERE t.tgrelid = relid AND t.tgname = 'ringshard_reject_misrouted_rows') THEN
		EXECUTE format('DROP TRIGGER ringshard_reject_misrouted_rows ON %s', relid);
	END IF;
	EXECUTE format('CREATE TRIGGER ringshard_reject_misrouted_rows BEFORE INSERT OR UPDATE ON %s
	                FOR EACH ROW EXECUTE FUNCTION ringshard.reject_misrouted_rows()', relid);
END
$$;
COMMENT ON FUNCTION ringshard.adopt_distributed_table(text, json, name, text, text, text, name) IS
	'on a worker: creates the table (or checks that its columns match) and annotates it, with the trigger that refuses misrouted rows';

-- Create (or check) a distributed table on every node with an address.
CREATE FUNCTION ringshard.push_table_definition(table_name regclass) RETURNS TABLE (node text, ok boolean)
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
DECLARE
	annotation ringshard.distributed_tables;
	columns json;
	target text;
	outcome record;
BEGIN
	SELECT * INTO annotation FROM ringshard.distributed_tables d WHERE d.table_name = push_table_definition.table_name;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'table % is not annotated', table_name
			USING ERRCODE = 'undefined_object',
			      HINT = 'Annotate it first with ringshard.distribute_table() or ringshard.distribute_table_by_partition().';
	END IF;
	SELECT json_agg(json_build_object('name', a.attname, 'type', format_type(a.atttypid, a.atttypmod)) ORDER BY a.attnum)
	  INTO columns
	  FROM pg_attribute a WHERE a.attrelid = table_name AND a.attnum > 0 AND NOT a.attisdropped;
	FOR target IN SELECT n.node_name FROM ringshard.nodes n WHERE n.address IS NOT NULL ORDER BY n.node_name COLLATE "C" LOOP
		SELECT * INTO outcome FROM ringshard.node_execute(ARRAY[target],
			'SELECT ringshard.adopt_distributed_table($1, $2::json, $3, $4, $5, $6, $7)',
			ARRAY[table_name::text, columns::text, annotation.key_column::text,
			      coalesce(annotation.ring_name, ''), coalesce(annotation.map_name, ''),
			      coalesce(annotation.keyspace, ''), coalesce(annotation.keyspace_column::text, '')]);
		IF NOT outcome.ok THEN
			RAISE EXCEPTION 'could not create table % on node "%"', table_name, target
				USING ERRCODE = 'connection_failure', DETAIL = outcome.error;
		END IF;
		node := target;
		ok := true;
		RETURN NEXT;
	END LOOP;
END
$$;
COMMENT ON FUNCTION ringshard.push_table_definition(regclass) IS
	'creates an annotated table on every node with an address, or checks that its definition there matches';

CREATE FUNCTION ringshard.create_distributed_table(table_name regclass) RETURNS TABLE (node text, ok boolean)
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
BEGIN
	RETURN QUERY SELECT * FROM ringshard.push_table_definition(table_name);
	IF EXISTS (SELECT FROM pg_trigger t WHERE t.tgrelid = table_name AND t.tgname = 'ringshard_route_write') THEN
		EXECUTE format('DROP TRIGGER ringshard_route_write ON %s', table_name);
	END IF;
	EXECUTE format('CREATE TRIGGER ringshard_route_write BEFORE INSERT ON %s
	                FOR EACH ROW EXECUTE FUNCTION ringshard.route_write()', table_name);
	-- Rows are laid out under the current topology from now on.
	EXECUTE 'INSERT INTO ringshard.placements (table_name, snapshot) VALUES ($1, ringshard.placement_snapshot($1))
	         ON CONFLICT (table_name) DO UPDATE SET snapshot = EXCLUDED.snapshot, placed_at = pg_catalog.now()'
		USING table_name;
END
$$;
COMMENT ON FUNCTION ringshard.create_distributed_table(regclass) IS
	'creates an annotated table on every node (or checks its definition there), and routes inserts into it on this coordinator to the replicas';

CREATE FUNCTION ringshard.route_write() RETURNS trigger
	AS 'MODULE_PATHNAME', 'ringshard_route_write' LANGUAGE C;
COMMENT ON FUNCTION ringshard.route_write() IS
	'trigger on a coordinator''s distributed table: sends each inserted row to all of its replicas, stores nothing locally';

CREATE FUNCTION ringshard.cluster_get(row_type anyelement, key text, keyspace text DEFAULT NULL)
	RETURNS SETOF anyelement
	AS 'MODULE_PATHNAME', 'ringshard_cluster_get' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION ringshard.cluster_get(anyelement, text, text) IS
	'rows of a distributed table with this key (pass NULL::table), read from one healthy replica at random, failing over to the next';

CREATE FUNCTION ringshard.cluster_fanout(row_type anyelement, where_clause text DEFAULT NULL,
										 score_column name DEFAULT NULL, k integer DEFAULT NULL,
										 allow_partial boolean DEFAULT false)
	RETURNS SETOF anyelement
	AS 'MODULE_PATHNAME', 'ringshard_cluster_fanout' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION ringshard.cluster_fanout(anyelement, text, name, integer, boolean) IS
	'runs a filter on every node in parallel, each range read once; with score_column and k, each node returns its top k and they are merged by score descending; allow_partial accepts missing nodes';

CREATE FUNCTION ringshard.last_fanout_missing() RETURNS text[]
	AS 'MODULE_PATHNAME', 'ringshard_last_fanout_missing' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION ringshard.last_fanout_missing() IS 'the nodes the session''s last fan-out could not read';
-- Queued writes (hinted handoff).  A routed write that reached at least
-- ringshard.write_quorum replicas succeeds; for each replica that missed it
-- the row waits here, in an ordinary WAL-logged table written in the same
-- transaction, until the watchdog (or replay_queue) delivers it.  Delivery
-- is idempotent: the worker records each (coordinator, queue id) it applied
-- in the same statement that inserts the row.

ALTER TABLE ringshard.cluster_state
	ADD COLUMN coordinator_id uuid NOT NULL DEFAULT pg_catalog.gen_random_uuid();

CREATE TABLE ringshard.write_queue (
	id bigserial NOT NULL,
	node_name text NOT NULL,
	table_name regclass NOT NULL,
	payload json NOT NULL,
	queued_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
	attempts integer NOT NULL DEFAULT 0,
	last_error text,
	-- one routed write has one id, queued once per replica that missed it
	PRIMARY KEY (node_name, id)
);
COMMENT ON TABLE ringshard.write_queue IS
	'routed writes a replica missed (or could not confirm), in order, waiting to be replayed to it; the id is the write''s, shared by its replicas';
SELECT pg_catalog.pg_extension_config_dump('ringshard.write_queue', '');
SELECT pg_catalog.pg_extension_config_dump('ringshard.write_queue_id_seq', '');

CREATE VIEW ringshard.write_queue_status AS
SELECT q.node_name AS node, count(*) AS queued, min(q.queued_at) AS oldest,
       pg_catalog.now() - min(q.queued_at) AS oldest_age, max(q.attempts) AS max_attempts,
       (array_agg(q.last_error ORDER BY q.id DESC) FILTER (WHERE q.last_error IS NOT NULL))[1] AS last_error
  FROM ringshard.write_queue q GROUP BY q.node_name;
COMMENT ON VIEW ringshard.write_queue_status IS 'queued writes per node: how many, how old, and the last delivery error';

-- On a worker: the queued writes it has applied, so a replay never applies twice.
CREATE TABLE ringshard.replayed_writes (
	coordinator_id uuid NOT NULL,
	queue_id bigint NOT NULL,
	applied_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
	PRIMARY KEY (coordinator_id, queue_id)
);
COMMENT ON TABLE ringshard.replayed_writes IS 'on a worker: queued writes already applied, by coordinator and queue id';
SELECT pg_catalog.pg_extension_config_dump('ringshard.replayed_writes', '');

-- Deliver up to batch queued writes to one node, oldest first.  Each
-- delivery is one statement on the worker, committed there at once: it both
-- inserts the row and records (coordinator, id), so a delivery repeated after
-- a crash before the queue row's deletion here commits is a no-op.  A write
-- the node refuses stays queued with its error and stops this node's replay
-- (writes are delivered in order); a write whose table is gone is dropped.
-- Returns how many left the queue.
CREATE FUNCTION ringshard.replay_queue(node text, batch integer DEFAULT 1000) RETURNS integer
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
DECLARE
	item ringshard.write_queue;
	origin uuid := (SELECT s.coordinator_id FROM ringshard.cluster_state s);
	outcome record;
	delivered integer := 0;
	columns text;
BEGIN
	IF node IS NULL OR batch IS NULL OR batch < 1 THEN
		RAISE EXCEPTION 'replay_queue needs a node and a positive batch' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	FOR item IN SELECT * FROM ringshard.write_queue q WHERE q.node_name = node ORDER BY q.id LIMIT batch
		FOR UPDATE SKIP LOCKED
	LOOP
		IF NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = item.table_name::oid) THEN
			RAISE WARNING 'dropping queued write % for node "%": its table (oid %) no longer exists',
				item.id, node, item.table_name::oid;
			DELETE FROM ringshard.write_queue q WHERE q.node_name = item.node_name AND q.id = item.id;
			CONTINUE;
		END IF;
		SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum) INTO columns
		  FROM pg_attribute a WHERE a.attrelid = item.table_name AND a.attnum > 0 AND NOT a.attisdropped;
		SELECT * INTO outcome FROM ringshard.node_execute(ARRAY[node], format(
			'WITH first_time AS (INSERT INTO ringshard.replayed_writes (coordinator_id, queue_id)
			                     VALUES ($2::uuid, $3::bigint) ON CONFLICT DO NOTHING RETURNING 1)
			 INSERT INTO %1$s (%2$s) SELECT %2$s FROM pg_catalog.json_populate_record(NULL::%1$s, $1::pg_catalog.json)
			  WHERE EXISTS (SELECT FROM first_time)', item.table_name, columns),
			ARRAY[item.payload::text, origin::text, item.id::text], false);
		IF NOT outcome.ok THEN
			UPDATE ringshard.write_queue q SET attempts = q.attempts + 1, last_error = outcome.error
			 WHERE q.node_name = item.node_name AND q.id = item.id;
			EXIT;
		END IF;
		DELETE FROM ringshard.write_queue q WHERE q.node_name = item.node_name AND q.id = item.id;
		delivered := delivered + 1;
	END LOOP;
	RETURN delivered;
END
$$;
COMMENT ON FUNCTION ringshard.replay_queue(text, integer) IS
	'delivers up to batch queued writes to a node, oldest first, exactly once (idempotent on the worker); a refused write stays queued with its error; returns how many were delivered';

-- Prune replayed_writes on the workers.  A worker keeps (coordinator, write
-- id) for every routed write it applied, so that a repeated delivery is a
-- no-op; a record is needed only while this coordinator may still deliver
-- that write to that worker: while a queue entry for it exists here, or while
-- the transaction that made the write is still open (it may yet queue it).
-- So a record goes when it is older than retention (by the worker's own
-- clock), its id is below the first id queued here for that worker, and no
-- transaction of this database has been open for longer than retention (if
-- one has, nothing is pruned this time).
CREATE FUNCTION ringshard.prune_replayed_writes(retention interval DEFAULT '1 day')
	RETURNS TABLE (node text, pruned bigint, error text)
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
DECLARE
	origin uuid := (SELECT s.coordinator_id FROM ringshard.cluster_state s);
	oldest_open timestamptz;
	target record;
	outcome record;
BEGIN
	IF retention < interval '1 second' THEN
		RAISE EXCEPTION 'retention % is shorter than one second', retention
			USING ERRCODE = 'invalid_parameter_value',
			      HINT = 'Keep records at least as long as the longest transaction that routes writes; the default is one day.';
	END IF;
	-- Other sessions' transaction starts are visible only with these rights.
	IF NOT (pg_has_role('pg_read_all_stats', 'USAGE') OR
	        (SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = current_user)) THEN
		RAISE EXCEPTION 'pruning replayed writes needs to see every open transaction'
			USING ERRCODE = 'insufficient_privilege',
			      DETAIL = 'The open transactions of other roles are hidden from pg_stat_activity without pg_read_all_stats.',
			      HINT = 'GRANT pg_read_all_stats TO the role that prunes, or let the watchdog prune (it does once an hour).';
	END IF;
	SELECT min(a.xact_start) INTO oldest_open FROM pg_stat_activity a
	 WHERE a.datname = current_database() AND a.pid <> pg_backend_pid() AND a.xact_start IS NOT NULL;
	IF oldest_open < now() - retention THEN
		RAISE NOTICE 'nothing pruned: a transaction of this database has been open since %, longer than the retention %',
			oldest_open, retention;
		RETURN;
	END IF;
	FOR target IN
		SELECT n.node_name,
		       (SELECT min(q.id) FROM ringshard.write_queue q WHERE q.node_name = n.node_name) AS first_queued
		  FROM ringshard.nodes n ORDER BY n.node_name
	LOOP
		SELECT * INTO outcome FROM ringshard.node_execute(ARRAY[target.node_name],
			'WITH gone AS (DELETE FROM ringshard.replayed_writes w
			                WHERE w.coordinator_id OPERATOR(pg_catalog.=) $1::pg_catalog.uuid
			                  AND w.queue_id OPERATOR(pg_catalog.<) $2::pg_catalog.int8
			                  AND w.applied_at OPERATOR(pg_catalog.<) (pg_catalog.now() OPERATOR(pg_catalog.-) $3::pg_catalog.interval)
			                RETURNING 1)
			 SELECT pg_catalog.count(*) FROM gone',
			ARRAY[origin::text, coalesce(target.first_queued, 9223372036854775807)::text, retention::text], false);
		node := target.node_name;
		pruned := CASE WHEN outcome.ok THEN outcome.value::bigint END;
		error := outcome.error;
		RETURN NEXT;
	END LOOP;
END
$$;
COMMENT ON FUNCTION ringshard.prune_replayed_writes(interval) IS
	'deletes on every node the replayed-write records of this coordinator that no delivery can need any more (older than retention, below the first queued id, no transaction open longer than retention); per node: how many went, or the error';

-- One round of the health watchdog: probe every node, mark it up or down,
-- and replay the queue of each node that answers.
CREATE FUNCTION ringshard.watchdog_tick(mark_health boolean DEFAULT true, batch integer DEFAULT 1000)
	RETURNS TABLE (node text, reachable boolean, delivered integer, still_queued bigint)
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
DECLARE
	probe record;
BEGIN
	FOR probe IN SELECT h.node, h.reachable FROM ringshard.node_health() h LOOP
		node := probe.node;
		reachable := probe.reachable;
		delivered := 0;
		IF mark_health THEN
			UPDATE ringshard.nodes n SET is_up = probe.reachable
			 WHERE n.node_name = probe.node AND n.is_up IS DISTINCT FROM probe.reachable;
		END IF;
		IF probe.reachable THEN
			-- One node's trouble must not stop the round for the others.
			BEGIN
				delivered := ringshard.replay_queue(probe.node, batch);
			EXCEPTION WHEN OTHERS THEN
				RAISE WARNING 'replaying the queue of node "%" failed: %', probe.node, SQLERRM;
			END;
		END IF;
		still_queued := (SELECT count(*) FROM ringshard.write_queue q WHERE q.node_name = probe.node);
		RETURN NEXT;
	END LOOP;
END
$$;
COMMENT ON FUNCTION ringshard.watchdog_tick(boolean, integer) IS
	'one round of the health watchdog: probes nodes, marks them up or down, replays the queue of each node that answers';
-- The PL/Proxy bridge.  PL/Proxy reads its clusters from functions in
-- schema plproxy; install_plproxy_bridge() creates them over ringshard's
-- partition maps (cluster name = map name), so PL/Proxy users get
-- ringshard's routing and health without a second configuration.

ALTER TABLE ringshard.cluster_state ADD COLUMN change_counter bigint NOT NULL DEFAULT 0;

-- Count every change of maps and nodes: PL/Proxy reloads when it grows.
CREATE FUNCTION ringshard.count_topology_change() RETURNS trigger
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
BEGIN
	UPDATE ringshard.cluster_state SET change_counter = change_counter + 1;
	RETURN NULL;
END
$$;
COMMENT ON FUNCTION ringshard.count_topology_change() IS 'trigger: counts catalog changes, for PL/Proxy''s cluster version';
CREATE TRIGGER count_topology_change AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
	ON ringshard.partition_assignments FOR EACH STATEMENT EXECUTE FUNCTION ringshard.count_topology_change();
CREATE TRIGGER count_topology_change AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
	ON ringshard.nodes FOR EACH STATEMENT EXECUTE FUNCTION ringshard.count_topology_change();

CREATE FUNCTION ringshard.plproxy_partitions(map text) RETURNS SETOF text
	AS 'MODULE_PATHNAME', 'ringshard_plproxy_partitions' LANGUAGE C STABLE STRICT;
COMMENT ON FUNCTION ringshard.plproxy_partitions(text) IS
	'256 connection strings, partition by partition: the first healthy holder of each (PL/Proxy''s get_cluster_partitions)';

CREATE FUNCTION ringshard.plproxy_version(map text) RETURNS integer
	LANGUAGE sql STABLE STRICT SET search_path = pg_catalog, ringshard AS $$
	SELECT CASE WHEN EXISTS (SELECT FROM ringshard.partition_maps p WHERE p.map_name = map)
	            THEN (SELECT (s.change_counter % 2147483647)::integer + 1 FROM ringshard.cluster_state s) END;
$$;
COMMENT ON FUNCTION ringshard.plproxy_version(text) IS
	'a version that grows with every change of maps or nodes (PL/Proxy''s get_cluster_version); NULL for an unknown map';

CREATE FUNCTION ringshard.install_plproxy_bridge() RETURNS void
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
BEGIN
	CREATE SCHEMA IF NOT EXISTS plproxy;
	CREATE OR REPLACE FUNCTION plproxy.get_cluster_version(cluster_name text) RETURNS integer
		LANGUAGE plpgsql STABLE SET search_path = pg_catalog AS $f$
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
		LANGUAGE sql STABLE SET search_path = pg_catalog
		AS $f$ SELECT ringshard.plproxy_partitions(cluster_name) $f$;
	CREATE OR REPLACE FUNCTION plproxy.get_cluster_config(cluster_name text, OUT key text, OUT val text)
		RETURNS SETOF record
		LANGUAGE sql STABLE SET search_path = pg_catalog
		AS $f$ SELECT NULL::text, NULL::text WHERE false $f$;
	COMMENT ON FUNCTION plproxy.get_cluster_version(text) IS 'ringshard bridge: PL/Proxy cluster = ringshard partition map';
	COMMENT ON FUNCTION plproxy.get_cluster_partitions(text) IS 'ringshard bridge: the first healthy holder of each of the 256 partitions';
	COMMENT ON FUNCTION plproxy.get_cluster_config(text) IS 'ringshard bridge: no extra PL/Proxy settings';
END
$$;
COMMENT ON FUNCTION ringshard.install_plproxy_bridge() IS
	'creates plproxy.get_cluster_version/partitions/config over ringshard partition maps; then CLUSTER ''map'' with RUN ON partition_for(keyspace, key) routes as ringshard does';
-- Rebalancing.  Each distributed table remembers the topology its rows are
-- laid out under (its placement).  After the topology changes, rebalance()
-- moves exactly the rows whose replica set changed, step by step (a step is
-- a token range or a run of partitions with one old and one new replica
-- set): copy from a node that holds them to the nodes that gain them,
-- verify every copied row is there, and only then delete them from the
-- nodes that lose them.  Progress is committed batch by batch, so a crash
-- of the coordinator or of a worker is resumed by calling rebalance() again.

CREATE TABLE ringshard.placements (
	table_name regclass PRIMARY KEY,
	snapshot json NOT NULL,
	placed_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
COMMENT ON TABLE ringshard.placements IS
	'the topology (ring members and weights, or partition assignments) each distributed table''s rows are laid out under';
SELECT pg_catalog.pg_extension_config_dump('ringshard.placements', '');

CREATE TABLE ringshard.rebalance_progress (
	table_name regclass NOT NULL,
	step integer NOT NULL,
	predicate text NOT NULL,
	source text NOT NULL,
	targets text[] NOT NULL,
	deletes text[] NOT NULL,
	fraction float8,
	state text NOT NULL DEFAULT 'pending' CONSTRAINT state_known CHECK (state IN ('pending', 'copied', 'done')),
	rows_total bigint,
	rows_copied bigint NOT NULL DEFAULT 0,
	rows_deleted bigint NOT NULL DEFAULT 0,
	updated_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
	PRIMARY KEY (table_name, step)
);
COMMENT ON TABLE ringshard.rebalance_progress IS 'the steps of an unfinished rebalance and how far each got';
SELECT pg_catalog.pg_extension_config_dump('ringshard.rebalance_progress', '');

CREATE VIEW ringshard.rebalance_status AS
SELECT p.table_name, t.node, count(*) AS steps,
       count(*) FILTER (WHERE p.state = 'done') AS steps_done,
       sum(p.rows_total) AS rows_total, sum(p.rows_copied) AS rows_done,
       max(p.updated_at) AS updated_at
  FROM ringshard.rebalance_progress p, unnest(p.targets) AS t(node)
 GROUP BY p.table_name, t.node;
COMMENT ON VIEW ringshard.rebalance_status IS 'per table and receiving node: steps and rows of the running (or interrupted) rebalance, done against total';

CREATE FUNCTION ringshard.ring_move_plan(old_nodes text[], old_weights float8[], old_vnodes integer,
										 old_replicas integer, ring text)
	RETURNS TABLE (range_start ringtoken, range_end ringtoken, fraction float8, old_nodes text[], new_nodes text[])
	AS 'MODULE_PATHNAME', 'ringshard_ring_move_plan' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard.ring_move_plan(text[], float8[], integer, integer, text) IS
	'token ranges whose replica set differs between a ring as it was (members, weights, vnodes, replicas) and as it is now';

-- The topology a table's rows would be laid out under now.
CREATE FUNCTION ringshard.placement_snapshot(table_name regclass) RETURNS json
	LANGUAGE sql STABLE STRICT SET search_path = pg_catalog, ringshard AS $$
	SELECT CASE WHEN d.ring_name IS NOT NULL THEN
		json_build_object('ring', d.ring_name, 'algorithm', r.algorithm, 'vnodes', r.vnodes,
		                  'replication_factor', r.replication_factor,
		                  'members', (SELECT coalesce(json_agg(json_build_object('node', m.node_name, 'weight', m.weight)
		                                                       ORDER BY m.node_name COLLATE "C"), '[]')
		                                FROM ringshard.ring_members m WHERE m.ring_name = d.ring_name))
	ELSE
		json_build_object('map', d.map_name,
		                  'assignments', (SELECT coalesce(json_agg(json_build_object('node', a.node_name,
		                                                          'start', a.partition_start, 'end', a.partition_end)), '[]')
		                                    FROM ringshard.partition_assignments a WHERE a.map_name = d.map_name))
	END
	  FROM ringshard.distributed_tables d LEFT JOIN ringshard.rings r ON r.ring_name = d.ring_name
	 WHERE d.table_name = placement_snapshot.table_name;
$$;
COMMENT ON FUNCTION ringshard.placement_snapshot(regclass) IS 'the ring or map a table''s rows would be laid out under now, as JSON';

-- Holders of each partition under a map snapshot, and now.
CREATE FUNCTION ringshard.partition_holders_of(snapshot json, map text)
	RETURNS TABLE (partition integer, old_nodes text[], new_nodes text[])
	LANGUAGE sql STABLE SET search_path = pg_catalog, ringshard AS $$
	SELECT p,
	       coalesce((SELECT array_agg(DISTINCT a->>'node' ORDER BY a->>'node')
	                   FROM json_array_elements(snapshot->'assignments') a
	                  WHERE p BETWEEN (a->>'start')::int AND (a->>'end')::int), '{}'),
	       coalesce((SELECT array_agg(DISTINCT x.node_name ORDER BY x.node_name)
	                   FROM ringshard.partition_assignments x
	                  WHERE x.map_name = map AND p BETWEEN x.partition_start AND x.partition_end), '{}')
	  FROM generate_series(0, 255) p;
$$;
COMMENT ON FUNCTION ringshard.partition_holders_of(json, text) IS 'per partition, its holders under a placement snapshot and now';

-- The plan: one row per step, with the SQL predicate that selects its rows.
CREATE FUNCTION ringshard.rebalance_plan(table_name regclass)
	RETURNS TABLE (step integer, predicate text, fraction float8, old_nodes text[], new_nodes text[],
				   source text, targets text[], deletes text[])
	LANGUAGE plpgsql STABLE STRICT SET search_path = pg_catalog, ringshard AS $$
DECLARE
	annotation ringshard.distributed_tables;
	placed json;
	keyspace_expr text;
BEGIN
	SELECT * INTO annotation FROM ringshard.distributed_tables d WHERE d.table_name = rebalance_plan.table_name;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'table % is not annotated', table_name USING ERRCODE = 'undefined_object';
	END IF;
	SELECT p.snapshot INTO placed FROM ringshard.placements p WHERE p.table_name = rebalance_plan.table_name;
	IF placed IS NULL THEN
		RAISE EXCEPTION 'table % has no recorded placement', table_name
			USING ERRCODE = 'object_not_in_prerequisite_state',
			      HINT = 'ringshard.create_distributed_table() records it when the table is created on the nodes.';
	END IF;
	IF annotation.ring_name IS NOT NULL THEN
		IF (SELECT r.algorithm FROM ringshard.rings r WHERE r.ring_name = annotation.ring_name) <> 'murmur3' THEN
			RAISE EXCEPTION 'rebalance supports murmur3 rings only' USING ERRCODE = 'feature_not_supported';
		END IF;
		RETURN QUERY
		SELECT (row_number() OVER (ORDER BY m.range_start))::integer,
		       CASE WHEN m.range_start < m.range_end
		            THEN format('(pg_catalog.ring_token(t.%1$I) > %2$L::pg_catalog.ringtoken AND pg_catalog.ring_token(t.%1$I) <= %3$L::pg_catalog.ringtoken)',
		                        annotation.key_column, m.range_start, m.range_end)
		            ELSE format('(pg_catalog.ring_token(t.%1$I) > %2$L::pg_catalog.ringtoken OR pg_catalog.ring_token(t.%1$I) <= %3$L::pg_catalog.ringtoken)',
		                        annotation.key_column, m.range_start, m.range_end) END,
		       m.fraction, m.old_nodes, m.new_nodes,
		       -- copy from a node that keeps the rows if there is one: it stays busy anyway
		       coalesce((SELECT o FROM unnest(m.old_nodes) WITH ORDINALITY u(o, i) WHERE o = ANY (m.new_nodes) ORDER BY i LIMIT 1),
		                m.old_nodes[1]),
		       ARRAY(SELECT n FROM unnest(m.new_nodes) n WHERE n <> ALL (m.old_nodes)),
		       ARRAY(SELECT o FROM unnest(m.old_nodes) o WHERE o <> ALL (m.new_nodes))
		  FROM ringshard.ring_move_plan(
		         ARRAY(SELECT x->>'node' FROM json_array_elements(placed->'members') x),
		         ARRAY(SELECT (x->>'weight')::float8 FROM json_array_elements(placed->'members') x),
		         (placed->>'vnodes')::integer, (placed->>'replication_factor')::integer,
		         annotation.ring_name) m;
	ELSE
		keyspace_expr := CASE WHEN annotation.keyspace_column IS NOT NULL
			THEN format('t.%I::pg_catalog.text', annotation.keyspace_column) ELSE quote_literal(annotation.keyspace) END;
		RETURN QUERY
		WITH changed AS (
			SELECT h.partition, h.old_nodes, h.new_nodes,
			       h.partition - row_number() OVER (PARTITION BY h.old_nodes, h.new_nodes ORDER BY h.partition) AS run
			  FROM ringshard.partition_holders_of(placed, annotation.map_name) h
			 WHERE h.old_nodes IS DISTINCT FROM h.new_nodes AND cardinality(h.old_nodes) > 0),
		     runs AS (
			SELECT min(c.partition) AS first_p, max(c.partition) AS last_p, c.old_nodes, c.new_nodes
			  FROM changed c GROUP BY c.old_nodes, c.new_nodes, c.run)
		SELECT (row_number() OVER (ORDER BY r.first_p))::integer,
		       format('(pg_catalog.partition_for(%s, t.%I) BETWEEN %s AND %s)', keyspace_expr, annotation.key_column,
		              r.first_p, r.last_p),
		       (r.last_p - r.first_p + 1) / 256.0::float8, r.old_nodes, r.new_nodes,
		       coalesce((SELECT o FROM unnest(r.old_nodes) o WHERE o = ANY (r.new_nodes) LIMIT 1), r.old_nodes[1]),
		       ARRAY(SELECT n FROM unnest(r.new_nodes) n WHERE n <> ALL (r.old_nodes)),
		       ARRAY(SELECT o FROM unnest(r.old_nodes) o WHERE o <> ALL (r.new_nodes))
		  FROM runs r;
	END IF;
END
$$;
COMMENT ON FUNCTION ringshard.rebalance_plan(regclass) IS
	'the steps of moving a table from its recorded placement to the current topology: rows selected by predicate are copied from source to targets, then deleted from deletes';

-- Run one statement on one node; raise if it fails.
CREATE FUNCTION ringshard.node_value(node text, sql text, params text[] DEFAULT '{}', in_transaction boolean DEFAULT true)
	RETURNS text
	LANGUAGE plpgsql SET search_path = pg_catalog, ringshard AS $$
DECLARE
	outcome record;
BEGIN
	SELECT * INTO outcome FROM ringshard.node_execute(ARRAY[node], sql, params, in_transaction);
	IF NOT outcome.ok THEN
		RAISE EXCEPTION 'statement failed on node "%"', node
			USING ERRCODE = 'connection_failure', DETAIL = outcome.error;
	END IF;
	RETURN outcome.value;
END
$$;
COMMENT ON FUNCTION ringshard.node_value(text, text, text[], boolean) IS 'runs one statement on a node and returns its first value, or raises the node''s error';

-- A procedure that commits cannot carry a SET clause: every name in it is
-- schema-qualified or from pg_catalog, which is searched first.
CREATE PROCEDURE ringshard.rebalance(table_name regclass, dry_run boolean DEFAULT false,
									 batch integer DEFAULT 1000, pause_ms integer DEFAULT 0)
	LANGUAGE plpgsql AS $$
DECLARE
	annotation ringshard.distributed_tables;
	columns text;
	item record;
	target text;
	page json;
	page_rows integer;
	last_ctid text;
	missing text;
	total bigint;
	removed bigint;
	steps integer;
BEGIN
	IF table_name IS NULL OR dry_run IS NULL OR batch IS NULL OR batch < 1 OR pause_ms IS NULL OR pause_ms < 0 THEN
		RAISE EXCEPTION 'rebalance needs a table, a positive batch and a pause of at least 0 ms'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	SELECT * INTO annotation FROM ringshard.distributed_tables d WHERE d.table_name = rebalance.table_name;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'table % is not annotated', table_name USING ERRCODE = 'undefined_object';
	END IF;

	IF dry_run THEN
		FOR item IN SELECT * FROM ringshard.rebalance_plan(table_name) ORDER BY step LOOP
			RAISE NOTICE 'step %: % of the keys, from % to %: copy from % to %, then delete from %',
				item.step, round(item.fraction::numeric, 6), item.old_nodes, item.new_nodes,
				item.source, item.targets, item.deletes;
		END LOOP;
		RETURN;
	END IF;

	-- Queued writes are delivered to the nodes they were queued for: they
	-- must land before those nodes' rows move.
	IF EXISTS (SELECT FROM ringshard.write_queue q WHERE q.table_name = rebalance.table_name) THEN
		RAISE EXCEPTION 'table % has queued writes', table_name
			USING ERRCODE = 'object_not_in_prerequisite_state',
			      HINT = 'Let the watchdog deliver them (see ringshard.write_queue_status), or call ringshard.replay_queue().';
	END IF;

	-- A new rebalance records its plan; an interrupted one resumes it.
	IF NOT EXISTS (SELECT FROM ringshard.rebalance_progress p WHERE p.table_name = rebalance.table_name) THEN
		PERFORM ringshard.sync_topology();
		PERFORM ringshard.push_table_definition(table_name);
		INSERT INTO ringshard.rebalance_progress (table_name, step, predicate, source, targets, deletes, fraction)
		SELECT rebalance.table_name, p.step, p.predicate, p.source, p.targets, p.deletes, p.fraction
		  FROM ringshard.rebalance_plan(table_name) p;
		GET DIAGNOSTICS steps = ROW_COUNT;
		RAISE NOTICE 'rebalance of %: % steps', table_name, steps;
		COMMIT;
	ELSE
		RAISE NOTICE 'rebalance of %: resuming at step %', table_name,
			(SELECT min(p.step) FROM ringshard.rebalance_progress p WHERE p.table_name = rebalance.table_name AND p.state <> 'done');
	END IF;

	SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum) INTO columns
	  FROM pg_attribute a WHERE a.attrelid = table_name AND a.attnum > 0 AND NOT a.attisdropped;

	FOR item IN SELECT * FROM ringshard.rebalance_progress p
	             WHERE p.table_name = rebalance.table_name AND p.state <> 'done' ORDER BY p.step LOOP
		-- Copy: page through the source's rows of this step by ctid; each
		-- page is inserted where missing and checked, in one transaction.
		IF item.state = 'pending' THEN
			total := ringshard.node_value(item.source,
				format('SELECT count(*) FROM %s t WHERE %s', table_name, item.predicate), '{}', false)::bigint;
			UPDATE ringshard.rebalance_progress p SET rows_total = total, rows_copied = 0, updated_at = now()
			 WHERE p.table_name = rebalance.table_name AND p.step = item.step;
			COMMIT;
			last_ctid := '(0,0)';
			LOOP
				page := ringshard.node_value(item.source,
					format('SELECT json_build_object(''rows'', coalesce(json_agg(row_to_json(s) ORDER BY s.row_ctid), ''[]''), ''last'', max(s.row_ctid)::text)
					          FROM (SELECT t.ctid AS row_ctid, %s FROM %s t WHERE %s AND t.ctid > $1::tid ORDER BY t.ctid LIMIT %s) s',
					       (SELECT string_agg('t.' || quote_ident(a.attname), ', ' ORDER BY a.attnum)
					          FROM pg_attribute a WHERE a.attrelid = table_name AND a.attnum > 0 AND NOT a.attisdropped),
					       table_name, item.predicate, batch),
					ARRAY[last_ctid], false)::json;
				page_rows := json_array_length(page->'rows');
				EXIT WHEN page_rows = 0;
				FOREACH target IN ARRAY item.targets LOOP
					PERFORM ringshard.node_value(target, format(
						'INSERT INTO %1$s (%2$s) SELECT %2$s FROM json_populate_recordset(NULL::%1$s, $1::json) r
						  WHERE NOT EXISTS (SELECT FROM %1$s t WHERE t.%3$I IS NOT DISTINCT FROM r.%3$I
						                       AND (SELECT row(t.*) IS NOT DISTINCT FROM row(r.*)))',
						table_name, columns, annotation.key_column), ARRAY[(page->'rows')::text]);
					missing := ringshard.node_value(target, format(
						'SELECT count(*) FROM json_populate_recordset(NULL::%1$s, $1::json) r
						  WHERE NOT EXISTS (SELECT FROM %1$s t WHERE t.%2$I IS NOT DISTINCT FROM r.%2$I
						                       AND (SELECT row(t.*) IS NOT DISTINCT FROM row(r.*)))',
						table_name, annotation.key_column), ARRAY[(page->'rows')::text]);
					IF missing <> '0' THEN
						RAISE EXCEPTION 'verification failed: % rows of step % are missing on node "%"', missing, item.step, target
							USING ERRCODE = 'data_corrupted';
					END IF;
				END LOOP;
				last_ctid := page->>'last';
				UPDATE ringshard.rebalance_progress p SET rows_copied = p.rows_copied + page_rows, updated_at = now()
				 WHERE p.table_name = rebalance.table_name AND p.step = item.step;
				COMMIT;
				IF pause_ms > 0 THEN
					PERFORM pg_sleep(pause_ms / 1000.0);
				END IF;
			END LOOP;
			UPDATE ringshard.rebalance_progress p SET state = 'copied', updated_at = now()
			 WHERE p.table_name = rebalance.table_name AND p.step = item.step;
			COMMIT;
		END IF;
		-- Delete: every row of the step is on every target now.
		removed := 0;
		FOREACH target IN ARRAY item.deletes LOOP
			removed := removed + ringshard.node_value(target,
				format('WITH gone AS (DELETE FROM %s t WHERE %s RETURNING 1) SELECT count(*) FROM gone', table_name, item.predicate))::bigint;
		END LOOP;
		UPDATE ringshard.rebalance_progress p SET state = 'done', rows_deleted = removed, updated_at = now()
		 WHERE p.table_name = rebalance.table_name AND p.step = item.step;
		RAISE NOTICE 'step % done: % rows copied to %, % deleted from %', item.step,
			(SELECT p.rows_copied FROM ringshard.rebalance_progress p WHERE p.table_name = rebalance.table_name AND p.step = item.step),
			item.targets, removed, item.deletes;
		COMMIT;
	END LOOP;

	-- The table is laid out under the current topology now.
	EXECUTE 'INSERT INTO ringshard.placements (table_name, snapshot) VALUES ($1, ringshard.placement_snapshot($1))
	         ON CONFLICT (table_name) DO UPDATE SET snapshot = EXCLUDED.snapshot, placed_at = pg_catalog.now()'
		USING table_name;
	RAISE NOTICE 'rebalance of % complete: % rows copied', table_name,
		(SELECT coalesce(sum(p.rows_copied), 0) FROM ringshard.rebalance_progress p WHERE p.table_name = rebalance.table_name);
	DELETE FROM ringshard.rebalance_progress p WHERE p.table_name = rebalance.table_name;
	COMMIT;
END
$$;
COMMENT ON PROCEDURE ringshard.rebalance(regclass, boolean, integer, integer) IS
	'moves the rows whose replica set changed since the table was placed: copy, verify, delete, in committed batches; resumable; dry_run prints the plan';
-- Routing is for everyone; changing topology is for ringshard_admin (and the
-- extension's owner and superusers).  Routing reads the catalog with the
-- caller's rights, so PUBLIC may read it, except node addresses.

REVOKE ALL ON ALL TABLES IN SCHEMA ringshard FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA ringshard FROM PUBLIC;

GRANT SELECT ON ringshard.rings, ringshard.ring_members, ringshard.partition_maps,
	ringshard.partition_assignments, ringshard.distributed_tables, ringshard.annotated_tables TO PUBLIC;
GRANT SELECT (node_name, is_up) ON ringshard.nodes TO PUBLIC;

GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON ALL TABLES IN SCHEMA ringshard TO ringshard_admin;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA ringshard TO ringshard_admin;

-- Read-only helpers anyone may call.
GRANT EXECUTE ON FUNCTION
	ringshard.address_is_safe(text),
	ringshard.validate_ring(text),
	ringshard.ring_points(text),
	ringshard.ring_balance(text),
	ringshard.partition_nodes(integer, text),
	ringshard.check_partition_map(text),
	ringshard.parse_partition_config(text),
	ringshard.format_partition_config(text[], integer[], integer[]),
	ringshard.column_attnum(regclass, name),
	ringshard.rows_per_node(regclass),
	ringshard.invalidate_topology_cache(),
	ringshard.merge_builtin_ring(),
	ringshard.resolve_annotation_columns()
TO PUBLIC;

-- Previews change nothing: anyone may look.
GRANT EXECUTE ON FUNCTION
	ringshard.preview_change(text, text, text, float8, boolean),
	ringshard.preview_add_node(text, text, float8),
	ringshard.preview_remove_node(text, text),
	ringshard.preview_set_weight(text, float8, text),
	ringshard.preview_add_node_copies(text, text, float8),
	ringshard.preview_remove_node_copies(text, text),
	ringshard.preview_set_weight_copies(text, float8, text),
	ringshard.proposed_replicas(text, text, text, text, float8),
	ringshard.proposed_replicas(anyelement, text, text, text, float8),
	ringshard.proposed_replicas(character, text, text, text, float8),
	ringshard.plan_table_moves(regclass, text, text, float8),
	ringshard.plan_table_summary(regclass, text, text, float8),
	ringshard.compare_schemes(integer, integer, integer, integer),
	ringshard.ring_skew(text, float8),
	ringshard.ring_balance_summary(text),
	ringshard.table_skew(regclass, float8),
	ringshard.preview_partition_assignments(text[], integer[], integer[], text),
	ringshard.preview_partition_config(text, text),
	ringshard.suggest_partition_boundaries(regclass)
TO PUBLIC;

-- Cluster: reading and writing distributed tables is for everyone;
-- running statements on nodes and changing them is for administrators.
GRANT SELECT ON ringshard.cluster_state, ringshard.write_queue_status, ringshard.rebalance_status TO PUBLIC;
GRANT EXECUTE ON FUNCTION
	ringshard.node_health(),
	ringshard.addressed_nodes(),
	ringshard.node_table_rows(regclass),
	ringshard.reads_here(record, text[]),
	ringshard.reject_misrouted_rows(),
	ringshard.route_write(),
	ringshard.cluster_get(anyelement, text, text),
	ringshard.cluster_fanout(anyelement, text, name, integer, boolean),
	ringshard.last_fanout_missing(),
	ringshard.merge_cluster_state(),
	ringshard.count_topology_change(),
	ringshard.plproxy_partitions(text),
	ringshard.plproxy_version(text)
TO PUBLIC;

-- Procedures are named explicitly: rebalancing is for administrators.
REVOKE ALL ON PROCEDURE ringshard.rebalance(regclass, boolean, integer, integer) FROM PUBLIC;
GRANT EXECUTE ON PROCEDURE ringshard.rebalance(regclass, boolean, integer, integer) TO ringshard_admin;

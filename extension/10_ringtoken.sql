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

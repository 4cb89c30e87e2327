--
-- ringtoken: an unsigned 64-bit position on the hash ring
--

-- The type lives in pg_catalog, so it resolves on any search_path, and no
-- stray (shell) comparison operators were left in another schema.
SELECT typnamespace::regnamespace AS schema, typlen, typbyval, typalign, typstorage
FROM pg_type WHERE oid = 'ringtoken'::regtype;
SET search_path = '';
SELECT '42'::ringtoken AS with_empty_search_path;
RESET search_path;
SELECT oprnamespace::regnamespace, oprname
FROM pg_operator
WHERE 'ringtoken'::regtype IN (oprleft, oprright)
  AND oprnamespace <> 'pg_catalog'::regnamespace
  AND oprname IN ('=', '<>', '<', '<=', '>', '>=');

-- Helper: the value as text, or the SQLSTATE and message of the error.
CREATE FUNCTION pg_temp.try_ringtoken(input text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
	RETURN input::ringtoken::text;
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || SQLERRM;
END
$$;

--
-- Input and output
--
SELECT input, input::ringtoken AS token
FROM (VALUES
	('0'),
	('1'),
	('007'),
	('+5'),
	('-0'),
	('-0x0'),
	('9223372036854775807'),
	('9223372036854775808'),
	('18446744073709551614'),
	('18446744073709551615'),
	('000018446744073709551615'),
	('0x0'),
	('0x2a'),
	('0X2A'),
	('0xaBcDeF'),
	('0x8000000000000000'),
	('0xffffffffffffffff'),
	('0XFFFFFFFFFFFFFFFF'),
	('0x0ffffffffffffffff'),
	('0x00000000000000000000000000000001'),
	('  42  ')
) AS v(input);
-- Leading and trailing whitespace may be any of space, \t, \n, \v, \f, \r
SELECT (E' \t\n\r\f' || chr(11) || '0x10' || chr(11) || E'\f\r\n\t ')::ringtoken
	AS all_ascii_whitespace;

-- Errors as the client sees them
SELECT ''::ringtoken;
SELECT 'abc'::ringtoken;
SELECT '1 2'::ringtoken;
SELECT '18446744073709551616'::ringtoken;
SELECT '0x10000000000000000'::ringtoken;
SELECT '-1'::ringtoken;

-- Every kind of bad input, with its SQLSTATE
SELECT input, pg_temp.try_ringtoken(input) AS result
FROM (VALUES
	(''),
	('   '),
	('abc'),
	('ff'),
	('12x'),
	('x12'),
	('0x'),
	('0X'),
	('0xg'),
	('0x1g'),
	('00x1'),
	('0x0x1'),
	('+'),
	('-'),
	('+-1'),
	('--1'),
	('1-'),
	('1 2'),
	('0x 1'),
	('- 1'),
	('1.0'),
	('1e3'),
	('1_000'),
	('0b101'),
	('NaN'),
	('99999999999999999999x'),
	('18446744073709551616'),
	('99999999999999999999'),
	('100000000000000000000000000000000000000'),
	('0x10000000000000000'),
	('0x1ffffffffffffffff'),
	('-1'),
	('-0x1'),
	('-18446744073709551615'),
	('-99999999999999999999')
) AS v(input);

-- Output is always decimal and reads back unchanged
SELECT token::text, token::text::ringtoken = token AS round_trip
FROM (VALUES ('0x0'::ringtoken), ('0x7fffffffffffffff'), ('0x8000000000000000'),
	('0xffffffffffffffff')) AS v(token);

--
-- Comparison: unsigned order, also across 2^63
--
SELECT a, b, a = b AS eq, a <> b AS ne, a < b AS lt, a <= b AS le, a > b AS gt, a >= b AS ge
FROM (VALUES
	('1'::ringtoken, '1'::ringtoken),
	('1', '2'),
	('9223372036854775808', '1'),
	('9223372036854775807', '9223372036854775808'),
	('18446744073709551615', '0'),
	('18446744073709551615', '18446744073709551615')
) AS v(a, b);
SELECT 9223372036854775808::ringtoken > 1::ringtoken AS high_bit_is_larger;
SELECT NULL::ringtoken = '1'::ringtoken AS null_compares_null;

--
-- Sorting, DISTINCT, GROUP BY, min and max
--
CREATE TABLE ringtoken_tbl (id serial, token ringtoken);
INSERT INTO ringtoken_tbl (token) VALUES
	('18446744073709551615'), ('0'), ('9223372036854775808'), ('1'),
	('9223372036854775807'), ('0x8000000000000000'), ('0'), (NULL),
	('18446744073709551615'), ('12345');

SELECT token FROM ringtoken_tbl ORDER BY token;
SELECT token FROM ringtoken_tbl ORDER BY token DESC NULLS LAST;
SELECT DISTINCT token FROM ringtoken_tbl ORDER BY 1;
SELECT token, count(*) FROM ringtoken_tbl GROUP BY token ORDER BY token;
SELECT min(token), max(token), count(token) FROM ringtoken_tbl;
SELECT pg_typeof(min(token)) AS min_type, pg_typeof(max(token)) AS max_type FROM ringtoken_tbl;
SELECT min(token), max(token) FROM ringtoken_tbl WHERE false;

-- Hash aggregation
SET enable_sort = off;
EXPLAIN (COSTS OFF) SELECT token, count(*) FROM ringtoken_tbl GROUP BY token;
SELECT token, count(*) FROM ringtoken_tbl GROUP BY token ORDER BY count(*) DESC, token LIMIT 2;
RESET enable_sort;

--
-- Btree index
--
CREATE INDEX ringtoken_tbl_btree ON ringtoken_tbl (token);
SET enable_seqscan = off;
SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF)
SELECT token FROM ringtoken_tbl WHERE token >= '9223372036854775808' ORDER BY token;
SELECT token FROM ringtoken_tbl WHERE token >= '9223372036854775808' ORDER BY token;
SELECT token FROM ringtoken_tbl WHERE token < '9223372036854775808' ORDER BY token DESC;
SELECT id FROM ringtoken_tbl WHERE token = '0xffffffffffffffff' ORDER BY id;
EXPLAIN (COSTS OFF) SELECT max(token) FROM ringtoken_tbl;
SELECT max(token) FROM ringtoken_tbl;
RESET enable_seqscan;
RESET enable_bitmapscan;

--
-- Hash index and hash support functions
--
CREATE INDEX ringtoken_tbl_hash ON ringtoken_tbl USING hash (token);
SET enable_seqscan = off;
SET enable_bitmapscan = off;
DROP INDEX ringtoken_tbl_btree;
EXPLAIN (COSTS OFF) SELECT id FROM ringtoken_tbl WHERE token = '9223372036854775808';
SELECT id FROM ringtoken_tbl WHERE token = '9223372036854775808' ORDER BY id;
RESET enable_seqscan;
RESET enable_bitmapscan;

-- The hash is hashint8's on the same 64 bits, and the extended hash with
-- seed 0 agrees with it in its low 32 bits, as hash opclasses require.
SELECT token,
	ringtoken_hash(token) = hashint8(token::bigint) AS same_as_hashint8,
	ringtoken_hash_extended(token, 42) = hashint8extended(token::bigint, 42) AS same_as_hashint8extended,
	(ringtoken_hash_extended(token, 0) & 4294967295) = (ringtoken_hash(token)::bigint & 4294967295) AS seed0_low_bits_match,
	ringtoken_hash_extended(token, 0) <> ringtoken_hash_extended(token, 1) AS seed_matters
FROM (VALUES ('0'::ringtoken), ('1'), ('9223372036854775808'), ('18446744073709551615')) AS v(token);

--
-- Joins
--
CREATE TABLE ringtoken_other (token ringtoken, label text);
INSERT INTO ringtoken_other VALUES
	('0', 'zero'), ('9223372036854775808', 'half'), ('18446744073709551615', 'max'),
	('2', 'two');
ANALYZE ringtoken_tbl;
ANALYZE ringtoken_other;

SET enable_mergejoin = off;
SET enable_nestloop = off;
EXPLAIN (COSTS OFF)
SELECT t.id, o.label FROM ringtoken_tbl t JOIN ringtoken_other o ON t.token = o.token;
SELECT t.id, o.label FROM ringtoken_tbl t JOIN ringtoken_other o ON t.token = o.token
ORDER BY t.id;
RESET enable_mergejoin;

SET enable_hashjoin = off;
EXPLAIN (COSTS OFF)
SELECT t.id, o.label FROM ringtoken_tbl t JOIN ringtoken_other o ON t.token = o.token;
SELECT t.id, o.label FROM ringtoken_tbl t JOIN ringtoken_other o ON t.token = o.token
ORDER BY t.id;
RESET enable_hashjoin;
RESET enable_nestloop;

--
-- Casts
--

-- numeric -> ringtoken (explicit), ringtoken -> numeric (implicit, exact)
SELECT 0::numeric::ringtoken, 18446744073709551615::ringtoken, 5.000::ringtoken,
	9223372036854775808::ringtoken;
SELECT '18446744073709551615'::ringtoken::numeric AS max_as_numeric,
	'18446744073709551615'::ringtoken + 1::numeric AS implicit_numeric_sum,
	pg_typeof('1'::ringtoken + 1::numeric) AS sum_type;
SELECT n, n::ringtoken::numeric = n AS exact
FROM (VALUES (0::numeric), (9223372036854775807), (9223372036854775808),
	(18446744073709551615)) AS v(n);
SELECT (-1)::numeric::ringtoken;
SELECT 18446744073709551616::ringtoken;
SELECT 1.5::ringtoken;
SELECT 'NaN'::numeric::ringtoken;

-- Numeric cast errors, with SQLSTATE: out of range is 22003, not a whole
-- number is 22P02 (fractions are rejected, not rounded)
CREATE FUNCTION pg_temp.try_numeric_cast(n numeric) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
	RETURN n::ringtoken::text;
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || SQLERRM;
END
$$;
SELECT n, pg_temp.try_numeric_cast(n) AS result
FROM (VALUES ('-1'::numeric), ('-0.5'), ('18446744073709551616'), ('1e30'),
	('18446744073709551615.5'), ('0.5'), ('1.000000001'), ('NaN'),
	('Infinity'), ('-Infinity'), ('-0.0'), ('7.00')) AS v(n);

-- bigint <-> ringtoken (explicit): the same 64 bits, two's complement
SELECT (-1)::bigint::ringtoken AS minus_one,
	(-9223372036854775808)::bigint::ringtoken AS bigint_min,
	9223372036854775807::bigint::ringtoken AS bigint_max;
SELECT '18446744073709551615'::ringtoken::bigint AS max_token,
	'9223372036854775808'::ringtoken::bigint AS half_token,
	'42'::ringtoken::bigint AS small_token;
SELECT b, b::ringtoken::bigint = b AS round_trip
FROM (VALUES (0::bigint), (-1), (-9223372036854775808), (9223372036854775807)) AS v(b);

-- integer -> ringtoken (explicit) behaves as integer -> bigint -> ringtoken
SELECT 1::ringtoken AS one, 2147483647::ringtoken AS int_max,
	(-1)::ringtoken AS minus_one;

-- ringtoken -> numeric is implicit, so a ringtoken compared with another
-- numeric type is compared as numeric: by value, not by bits.
SELECT '1'::ringtoken = 1::bigint AS one_equals_one,
	'18446744073709551615'::ringtoken = (-1)::bigint AS max_equals_minus_one,
	'18446744073709551615'::ringtoken > 1 AS max_above_one;

-- Nothing converts to ringtoken implicitly or on assignment
INSERT INTO ringtoken_tbl (token) VALUES (1::bigint);
INSERT INTO ringtoken_tbl (token) VALUES (1);
INSERT INTO ringtoken_tbl (token) VALUES (1.0);

-- The cast contexts, as recorded in the catalog
SELECT castsource::regtype, casttarget::regtype, castcontext, castmethod
FROM pg_cast
WHERE format('%s -> %s', castsource::regtype, casttarget::regtype) IN (
	'numeric -> ringtoken', 'ringtoken -> numeric', 'bigint -> ringtoken',
	'ringtoken -> bigint', 'integer -> ringtoken')
ORDER BY castsource::regtype::text, casttarget::regtype::text;

--
-- Binary send/recv
--
SELECT token, ringtoken_send(token)
FROM (VALUES ('0'::ringtoken), ('1'), ('0x0102030405060708'),
	('9223372036854775808'), ('18446744073709551615')) AS v(token);

-- COPY BINARY out and back in through a file in the data directory
CREATE FUNCTION pg_temp.copy_path() RETURNS text
LANGUAGE sql AS $$ SELECT current_setting('data_directory') || '/ringtoken_regress.copy' $$;
CREATE TABLE ringtoken_copy (token ringtoken);
DO $$ BEGIN
	EXECUTE format('COPY (SELECT token FROM ringtoken_tbl ORDER BY id) TO %L (FORMAT binary)',
				   pg_temp.copy_path());
	EXECUTE format('COPY ringtoken_copy FROM %L (FORMAT binary)', pg_temp.copy_path());
END $$;
SELECT count(*) AS rows_copied FROM ringtoken_copy;
SELECT (SELECT array_agg(token ORDER BY id) FROM ringtoken_tbl) IS NOT DISTINCT FROM
	(SELECT array_agg(token) FROM ringtoken_copy) AS same_tokens;

-- Write a COPY BINARY file by hand: header, one row with one field, trailer.
CREATE FUNCTION pg_temp.copy_binary_field(field bytea) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	lo oid;
	result text;
BEGIN
	lo := lo_from_bytea(0,
		'\x5047434f50590aff0d0a00'::bytea || '\x0000000000000000'::bytea
		|| '\x0001'::bytea || int4send(length(field)) || field || '\xffff'::bytea);
	PERFORM lo_export(lo, pg_temp.copy_path());
	PERFORM lo_unlink(lo);
	TRUNCATE ringtoken_copy;
	BEGIN
		EXECUTE format('COPY ringtoken_copy FROM %L (FORMAT binary)', pg_temp.copy_path());
		SELECT token::text INTO result FROM ringtoken_copy;
	EXCEPTION WHEN OTHERS THEN
		result := SQLSTATE || ': ' || SQLERRM;
	END;
	RETURN result;
END
$$;
SELECT field, pg_temp.copy_binary_field(field) AS result
FROM (VALUES
	('\x0000000000000000'::bytea),
	('\x8000000000000001'),
	('\xffffffffffffffff'),
	('\x00000001'),
	('\x000000000000000000')
) AS v(field);

DROP TABLE ringtoken_tbl, ringtoken_other, ringtoken_copy;

-- Every file starts from a fresh extension: the suite shares one database.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS ringshard CASCADE;
CREATE EXTENSION ringshard;
RESET client_min_messages;
-- docs/routing.md §1 and §2: canonical key bytes and MurmurHash3 ring tokens.

-- §6 token vectors
SELECT key, ring_token(key) AS token
  FROM (VALUES (''), ('a'), ('hello world'), ('3201012345670001'),
               ('shard-jakarta-01#vnode#0'), ('ñandú')) AS v(key);

-- every vector, checked: no row may disagree
SELECT count(*) AS disagreements
  FROM (VALUES ('', '0'), ('a', '9607679276477937801'),
               ('hello world', '5998619086395760910'),
               ('3201012345670001', '15884386775397619189'),
               ('shard-jakarta-01#vnode#0', '6317977278498123653'),
               ('ñandú', '9900926414339375407')) AS v(key, token)
 WHERE ring_token(key) <> token::ringtoken;

-- §1: integers route by their decimal text, uuid by lowercase text
SELECT ring_token(3201012345670001::bigint) = ring_token('3201012345670001') AS bigint_as_text,
       ring_token(42::integer) = ring_token('42') AS integer_as_text,
       ring_token(42::smallint) = ring_token('42') AS smallint_as_text,
       ring_token((-7)::bigint) = ring_token('-7') AS negative_as_text,
       ring_token((-9223372036854775808)::bigint) = ring_token('-9223372036854775808') AS bigint_min,
       ring_token('A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'::uuid)
         = ring_token('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11') AS uuid_lowercase;

-- text, varchar and bytea: the raw bytes
SELECT ring_token('hello world'::varchar) AS varchar_token,
       ring_token('\x68656c6c6f20776f726c64'::bytea) AS bytea_token,
       ring_token(convert_to('ñandú', 'UTF8')) = ring_token('ñandú') AS utf8_bytes;

-- char(n): as text without its trailing spaces (char(n) compares ignoring
-- them, so 'ab'::char(4) = 'ab'); varchar keeps them
SELECT ring_token('ab'::char(4)) = ring_token('ab') AS char_trimmed,
       ring_token('ab'::char(4)) <> ring_token('ab  ') AS char_drops_padding,
       ring_token('ab  '::varchar) <> ring_token('ab') AS varchar_keeps_spaces;

-- numeric normalized, boolean t/f, date in ISO form (the full table of
-- typed keys is in the keys suite)
SET datestyle = ISO;
SELECT ring_token(1.50::numeric) = ring_token('1.5') AS numeric_normalized,
       ring_token(1.50::numeric) <> ring_token('1.50') AS numeric_not_as_output,
       ring_token(true) = ring_token('t') AS boolean_as_t,
       ring_token('2024-01-02'::date) = ring_token('2024-01-02') AS date_iso;

-- a domain routes as its base type
CREATE DOMAIN pg_temp.nik AS bigint;
SELECT ring_token(3201012345670001::pg_temp.nik) = ring_token('3201012345670001') AS domain_as_base;

-- NULL routes nowhere
SELECT ring_token(NULL::text) IS NULL AS null_text, ring_token(NULL::bigint) IS NULL AS null_bigint;

-- a key of 2 MB
SELECT ring_token(repeat('x', 2 * 1024 * 1024)) = ring_token(repeat('x', 2 * 1024 * 1024)) AS large_key_stable,
       ring_token(repeat('x', 2 * 1024 * 1024)) <> ring_token(repeat('x', 2 * 1024 * 1024 - 1)) AS large_key_differs;

-- tokens order as unsigned numbers
SELECT key FROM (VALUES ('a'), ('hello world'), ('3201012345670001'), ('')) AS v(key)
 ORDER BY ring_token(key);

-- the same call from a table, a TOASTed value and a short packed one
CREATE TEMP TABLE keys (k text);
INSERT INTO keys VALUES ('hello world'), (repeat('ñ', 100000));
SELECT ring_token(k) = ring_token(k || '') AS same_bytes FROM keys;

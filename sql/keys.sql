-- Every file starts from a fresh extension: the suite shares one database.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS ringshard CASCADE;
CREATE EXTENSION ringshard;
RESET client_min_messages;
--
-- keys: the canonical key bytes of typed keys (docs/routing.md §1)
--
-- Equal keys route alike, session settings never matter, and a type without
-- canonical bytes is refused.  Errors are shown whole (CONTEXT included: a
-- routing error has none).
--
CREATE SCHEMA keys;
SET search_path = keys, public;

-- key_bytes() as text, for reading (every key here has valid UTF-8 bytes)
CREATE FUNCTION keys.shown(b bytea) RETURNS text LANGUAGE sql IMMUTABLE STRICT
	AS $$ SELECT pg_catalog.convert_from(b, 'UTF8') $$;

-- The SQLSTATE, message and hint of the error a statement raises, or 'ok'.
CREATE FUNCTION keys.err(stmt text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	state text;
	message text;
	hint text;
BEGIN
	EXECUTE stmt;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, message = MESSAGE_TEXT, hint = PG_EXCEPTION_HINT;
	RETURN state || ': ' || message || coalesce(' / ' || nullif(hint, ''), '');
END
$$;

--
-- §6 "Typed keys": canonical bytes, then the token of those bytes; the
-- partition of ('ks-1', key) is that of the bytes too
--
CREATE TEMP TABLE typed_vectors AS
SELECT * FROM (VALUES
	('3201012345670001::bigint', ringshard.key_bytes(3201012345670001::bigint),
	 ring_token(3201012345670001::bigint), partition_for('ks-1', 3201012345670001::bigint),
	 '3201012345670001', '15884386775397619189'),
	('3201012345670001::numeric(16,0)', ringshard.key_bytes(3201012345670001::numeric(16,0)),
	 ring_token(3201012345670001::numeric(16,0)), partition_for('ks-1', 3201012345670001::numeric(16,0)),
	 '3201012345670001', '15884386775397619189'),
	('1.50::numeric', ringshard.key_bytes(1.50::numeric),
	 ring_token(1.50::numeric), partition_for('ks-1', 1.50::numeric),
	 '1.5', '13430490798912837064'),
	('''-0.000''::numeric', ringshard.key_bytes('-0.000'::numeric),
	 ring_token('-0.000'::numeric), partition_for('ks-1', '-0.000'::numeric),
	 '0', '3083240331115144064'),
	('100::numeric', ringshard.key_bytes(100::numeric),
	 ring_token(100::numeric), partition_for('ks-1', 100::numeric),
	 '100', '1040388282287204816'),
	('''ab''::char(5)', ringshard.key_bytes('ab'::char(5)),
	 ring_token('ab'::char(5)), partition_for('ks-1', 'ab'::char(5)),
	 'ab', '10631611042442844974'),
	('''ab ''::varchar', ringshard.key_bytes('ab '::varchar),
	 ring_token('ab '::varchar), partition_for('ks-1', 'ab '::varchar),
	 'ab ', '12106934627464383385'),
	('''A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11''::uuid', ringshard.key_bytes('A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'::uuid),
	 ring_token('A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'::uuid), partition_for('ks-1', 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'::uuid),
	 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '1721996422960650214'),
	('true', ringshard.key_bytes(true), ring_token(true), partition_for('ks-1', true),
	 't', '7529381342917315814'),
	('''2026-01-31''::date', ringshard.key_bytes('2026-01-31'::date),
	 ring_token('2026-01-31'::date), partition_for('ks-1', '2026-01-31'::date),
	 '2026-01-31', '10225064195164002953'),
	('''2026-01-31 07:05:00.250''::timestamp', ringshard.key_bytes('2026-01-31 07:05:00.250'::timestamp),
	 ring_token('2026-01-31 07:05:00.250'::timestamp), partition_for('ks-1', '2026-01-31 07:05:00.250'::timestamp),
	 '2026-01-31 07:05:00.25', '13515964068584293624'),
	('''2026-01-31 14:05:00+07''::timestamptz', ringshard.key_bytes('2026-01-31 14:05:00+07'::timestamptz),
	 ring_token('2026-01-31 14:05:00+07'::timestamptz), partition_for('ks-1', '2026-01-31 14:05:00+07'::timestamptz),
	 '2026-01-31 07:05:00+00', '14253869614036921824')
) v(sql_key, bytes, token, part, want_bytes, want_token);
SELECT sql_key, '"' || shown(bytes) || '"' AS canonical_bytes, token FROM typed_vectors;
SELECT count(*) AS vectors,
       count(*) FILTER (WHERE shown(bytes) <> want_bytes OR token <> want_token::ringtoken
                          OR ring_token(want_bytes) <> token
                          OR partition_for('ks-1', want_bytes) <> part) AS disagreements
  FROM typed_vectors;

--
-- Volatility: a function of the key alone is IMMUTABLE for every type; one
-- that reads the topology is STABLE (read_node_for, random: VOLATILE).  No
-- char(n) overloads: char(n) goes to the text overloads, which trim it.
--
SELECT p.pronamespace::regnamespace AS schema, p.proname AS function,
       string_agg(pg_get_function_identity_arguments(p.oid), ' | ' ORDER BY pg_get_function_identity_arguments(p.oid)) AS overloads,
       p.provolatile AS volatility, p.proparallel AS parallel
  FROM pg_proc p
 WHERE p.proname IN ('ring_token', 'partition_for', 'key_bytes', 'shard_for', 'replicas_for',
                     'read_node_for', 'nodes_for', 'proposed_replicas')
   AND p.pronamespace IN ('pg_catalog'::regnamespace, 'ringshard'::regnamespace)
 GROUP BY 1, 2, 4, 5 ORDER BY 2;

--
-- A ring of the hash-ring chapter's three shards (replication 2) and a two-node map
--
SELECT ringshard.add_node('shard-jakarta-01'), ringshard.add_node('shard-surabaya-02'),
       ringshard.add_node('shard-makassar-03');
SELECT ringshard.set_replication_factor('default', 2);
SELECT ringshard.assign_partitions('shard-jakarta-01', 0, 127), ringshard.assign_partitions('shard-surabaya-02', 100, 255);

--
-- Equal keys route alike: every spelling of one value gets one token, owner,
-- replica set, partition and holder set; different values differ
--
CREATE TEMP TABLE spellings (type text, value_no int, written text, token ringtoken, owner text,
							 replicas text[], part int, holders text[], bytes bytea);
CREATE FUNCTION keys.record_spelling(type text, value_no int, written text, k anyelement) RETURNS int
	LANGUAGE sql AS $$
	INSERT INTO spellings VALUES (type, value_no, written, ring_token(k), shard_for(k), replicas_for(k),
								  partition_for('ks', k), nodes_for('ks', k), ringshard.key_bytes(k))
	RETURNING 1
$$;
-- (text and char(n) go through the text overloads, as a call with a literal does)
CREATE FUNCTION keys.record_text_spelling(type text, value_no int, written text, k text) RETURNS int
	LANGUAGE sql AS $$
	INSERT INTO spellings VALUES (type, value_no, written, ring_token(k), shard_for(k), replicas_for(k),
								  partition_for('ks', k), nodes_for('ks', k), ringshard.key_bytes(k))
	RETURNING 1
$$;
SELECT sum(record_spelling('numeric', n, w, w::numeric)) AS recorded FROM (VALUES
	(1, '1.5'), (1, '1.50'), (1, '1.500000'), (1, '+1.5'), (1, '15e-1'), (1, '0.15E1'), (1, '01.5'),
	(2, '0'), (2, '-0'), (2, '0.000'), (2, '-0.000'), (2, '0e10'), (2, '.0'), (2, '-0.'),
	(3, '100'), (3, '1e2'), (3, '100.00'), (3, '0100'),
	(4, '-3201012345670001'), (4, '-3201012345670001.000'), (4, '-3.201012345670001e15'),
	(5, '0.000001'), (5, '1e-6'), (5, '0.0000010'),
	(6, 'NaN'), (6, 'nan'),
	(7, 'Infinity'), (7, 'inf'), (7, '+Infinity'),
	(8, '-Infinity'), (8, '-inf')) v(n, w);
SELECT record_spelling('numeric', 1, '1.5::numeric(10,4)', 1.5::numeric(10,4)) +
       record_spelling('numeric', 2, '0::numeric(5,2)', 0::numeric(5,2)) +
       record_spelling('numeric', 3, '100::numeric(5,0)', 100::numeric(5,0)) AS recorded;
-- integers and numeric: one value, one route, whatever the type
SELECT record_spelling('integer types', 1, '42::smallint', 42::smallint) +
       record_spelling('integer types', 1, '42::integer', 42::integer) +
       record_spelling('integer types', 1, '42::bigint', 42::bigint) +
       record_spelling('integer types', 1, '''042''::bigint', '042'::bigint) +
       record_spelling('integer types', 1, '42.000::numeric', 42.000::numeric) +
       record_spelling('integer types', 1, '''42''::text', '42'::text) +
       record_spelling('integer types', 2, '-9223372036854775808::bigint', (-9223372036854775808)::bigint) +
       record_spelling('integer types', 2, '-9223372036854775808::numeric', (-9223372036854775808)::numeric) AS recorded;
SELECT record_text_spelling('char(n)', 1, '''ab''::char(2)', 'ab'::char(2)) +
       record_text_spelling('char(n)', 1, '''ab''::char(5)', 'ab'::char(5)) +
       record_text_spelling('char(n)', 1, '''ab   ''::char(8)', 'ab   '::char(8)) +
       record_text_spelling('char(n)', 1, '''ab''::varchar', 'ab'::varchar) +
       record_text_spelling('char(n)', 1, '''ab''', 'ab') +
       record_text_spelling('char(n)', 2, '''ñandú''::char(10)', 'ñandú'::char(10)) +
       record_text_spelling('char(n)', 2, '''ñandú''', 'ñandú') +
       record_text_spelling('char(n)', 3, ''' x''::char(4)', ' x'::char(4)) +
       record_text_spelling('char(n)', 3, ''' x''', ' x') +
       record_text_spelling('char(n)', 4, '''''::char(3)', ''::char(3)) +
       record_text_spelling('char(n)', 4, '''   ''::char(3)', '   '::char(3)) +
       record_text_spelling('char(n)', 4, '''''', '') AS recorded;
-- the same char(n) values through anyelement: a domain over char(n) is a bpchar
CREATE DOMAIN keys.code AS char(8);
SELECT record_spelling('char(n)', 1, '''ab''::code', 'ab'::code) +
       record_spelling('char(n)', 2, '''ñandú''::code', 'ñandú'::code) AS recorded;
SELECT sum(record_spelling('timestamptz', n, w, w::timestamptz)) AS recorded FROM (VALUES
	(1, '2026-01-31 14:05:00+07'), (1, '2026-01-31 07:05:00Z'), (1, '2026-01-31 02:05:00-05'),
	(1, '2026-01-31 07:05:00.000000+00'), (1, 'Sat Jan 31 07:05:00 2026 UTC'), (1, '2026-01-31 12:50:00+05:45'),
	(2, '2026-01-31 07:05:00.25+00'), (2, '2026-01-31 07:05:00.250000Z'), (2, '2026-01-31 16:05:00.25+09'),
	(3, 'infinity'),
	(4, '-infinity'),
	(5, '0044-03-15 12:00:00+00 BC'), (5, '0044-03-15 13:00:00+01 BC'),
	(6, '2026-01-01 00:00:00+00'), (6, '2025-12-31 19:00:00-05')) v(n, w);
SELECT sum(record_spelling('timestamp', n, w, w::timestamp)) AS recorded FROM (VALUES
	(1, '2026-01-31 07:05:00.250'), (1, '2026-01-31 07:05:00.25'), (1, 'January 31 2026 07:05:00.25'),
	(1, '2026-01-31T07:05:00.250000'),
	(2, '2026-01-31 07:05:00'), (2, '2026-01-31 07:05'),
	(3, 'infinity'), (4, '-infinity'),
	(5, '4713-01-01 00:00:00 BC'), (5, 'January 1, 4713 BC')) v(n, w);
SELECT sum(record_spelling('date', n, w, w::date)) AS recorded FROM (VALUES
	(1, '2026-01-31'), (1, 'January 31, 2026'), (1, '20260131'), (1, '2026-01-31 AD'),
	(2, '0044-03-15 BC'), (2, 'March 15, 44 BC'),
	(3, 'infinity'), (4, '-infinity'),
	(5, '5874897-12-31'), (6, '4714-11-24 BC')) v(n, w);
SELECT record_spelling('date', 1, '''2026-01-31 23:59''::timestamp::date', '2026-01-31 23:59'::timestamp::date) AS recorded;
SELECT sum(record_spelling('uuid', n, w, w::uuid)) AS recorded FROM (VALUES
	(1, 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'), (1, 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'),
	(1, '{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}'), (1, 'A0EEBC999C0B4EF8BB6D6BB9BD380A11'),
	(1, 'a0EEbc99-9C0b-4Ef8-bB6d-6bB9bd380A11'),
	(2, '00000000-0000-0000-0000-000000000000'), (2, '{00000000000000000000000000000000}')) v(n, w);
SELECT sum(record_spelling('boolean', n, w, w::boolean)) AS recorded FROM (VALUES
	(1, 'true'), (1, 't'), (1, 'yes'), (1, 'on'), (1, '1'), (1, 'TRUE'), (1, 'y'),
	(2, 'false'), (2, 'f'), (2, 'no'), (2, 'off'), (2, '0'), (2, 'N')) v(n, w);
SELECT record_text_spelling('boolean', 1, '''t''::text', 't') + record_text_spelling('boolean', 2, '''f''::text', 'f') AS recorded;
CREATE TYPE keys.mood AS ENUM ('sad', 'ok', 'happy', 'ñandú', 'two words');
SELECT sum(record_spelling('enum', n, w, w::mood)) AS recorded FROM (VALUES
	(1, 'ok'), (2, 'ñandú'), (3, 'two words')) v(n, w);
SELECT sum(record_text_spelling('enum', n, w, w)) AS recorded FROM (VALUES
	(1, 'ok'), (2, 'ñandú'), (3, 'two words')) v(n, w);
CREATE DOMAIN keys.amount AS numeric(12, 4);
CREATE DOMAIN keys.positive_amount AS keys.amount CHECK (VALUE > 0);
CREATE DOMAIN keys.moment AS timestamptz;
CREATE DOMAIN keys.day AS date;
SELECT record_spelling('domains', 1, '1.5::amount', 1.5::amount) +
       record_spelling('domains', 1, '1.50::positive_amount', 1.50::positive_amount) +
       record_spelling('domains', 1, '1.5::numeric', 1.5::numeric) +
       record_spelling('domains', 2, '''2026-01-31 14:05:00+07''::moment', '2026-01-31 14:05:00+07'::moment) +
       record_spelling('domains', 2, '''2026-01-31 07:05:00Z''::timestamptz', '2026-01-31 07:05:00Z'::timestamptz) +
       record_spelling('domains', 3, '''2026-01-31''::day', '2026-01-31'::day) +
       record_spelling('domains', 3, '''2026-01-31''::date', '2026-01-31'::date) AS recorded;
SELECT type, count(DISTINCT value_no) AS "values", count(*) AS spellings,
       count(DISTINCT (value_no, token)) = count(DISTINCT value_no) AS one_token_per_value,
       count(DISTINCT token) = count(DISTINCT value_no) AS values_differ,
       count(DISTINCT (value_no, owner, replicas, part, holders, bytes)) = count(DISTINCT value_no) AS one_route_per_value
  FROM spellings GROUP BY type ORDER BY type;
-- the canonical bytes of each value
SELECT type, value_no, '"' || shown(bytes) || '"' AS canonical_bytes, count(*) AS spellings
  FROM spellings GROUP BY 1, 2, 3 ORDER BY 1, 2;

--
-- Settings never matter: a sample of every type, and its routing, stays
-- byte for byte the same whatever the session changes
--
CREATE TABLE keys.sample (id int PRIMARY KEY, n numeric, c char(8), d date, ts timestamp, tz timestamptz,
						  u uuid, b boolean, e mood, i bigint, t text, dn amount, dc code);
INSERT INTO keys.sample VALUES
	(1, 1.50, 'ab', '2026-01-31', '2026-01-31 07:05:00.250', '2026-01-31 14:05:00+07',
	 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', true, 'ok', 3201012345670001, 'ñandú', 1.5, 'ñandú'),
	(2, '-0.000', 'ñandú', '0044-03-15 BC', '0044-03-15 12:00:00.000001 BC', '0044-03-15 12:00:00+00 BC',
	 '00000000-0000-0000-0000-000000000000', false, 'ñandú', -1, '', 0, ''),
	(3, 'NaN', '', 'infinity', 'infinity', 'infinity', 'ffffffff-ffff-ffff-ffff-ffffffffffff', true, 'sad',
	 9223372036854775807, 'x', 12345678.1234, 'x'),
	(4, '-Infinity', ' x', '-infinity', '-infinity', '-infinity', '{12345678123456781234567812345678}', false,
	 'two words', -9223372036854775808, ' x ', 0.0001, ' x'),
	(5, 1e-20, '12345678', '5874897-12-31', '294276-12-31 23:59:59.999999', '294276-12-31 23:59:59.999999+00',
	 'c0ffee00-0000-4000-8000-000000000001', true, 'happy', 0, 'a b', 99999999.9999, 'a b'),
	(6, 123456789012345678901234567890.000001, 'abc', '2000-02-29', '2000-02-29 23:59:59.5', '2000-03-01 00:59:59.5+01',
	 'C0FFEE00-0000-4000-8000-000000000002', false, 'ok', 2147483648, 'tab	tab', 1.0000, 'abc');
-- the sample's canonical bytes (under the settings pg_regress runs with)
SELECT id, shown(ringshard.key_bytes(n)) AS n, shown(ringshard.key_bytes(c)) AS c, shown(ringshard.key_bytes(d)) AS d,
       shown(ringshard.key_bytes(ts)) AS ts, shown(ringshard.key_bytes(tz)) AS tz
  FROM keys.sample ORDER BY id;
SELECT id, shown(ringshard.key_bytes(u)) AS u, shown(ringshard.key_bytes(b)) AS b, shown(ringshard.key_bytes(e)) AS e,
       shown(ringshard.key_bytes(i)) AS i, shown(ringshard.key_bytes(dn)) AS dn, shown(ringshard.key_bytes(dc)) AS dc
  FROM keys.sample ORDER BY id;
-- everything a key routes by, as one digest
CREATE FUNCTION keys.sample_routing() RETURNS text LANGUAGE sql STABLE AS $$
	SELECT md5(string_agg(concat_ws(',',
		ring_token(n), ring_token(c), ring_token(d), ring_token(ts), ring_token(tz), ring_token(u),
		ring_token(b), ring_token(e), ring_token(i), ring_token(t), ring_token(dn), ring_token(dc),
		partition_for('ks', n), partition_for('ks', c), partition_for('ks', d), partition_for('ks', ts),
		partition_for('ks', tz), partition_for('ks', u), partition_for('ks', e), partition_for(t, dn),
		shard_for(n), shard_for(tz), shard_for(d), shard_for(c), replicas_for(ts), replicas_for(e),
		nodes_for('ks', tz), nodes_for('ks', n),
		ringshard.key_bytes(n), ringshard.key_bytes(tz), ringshard.key_bytes(ts), ringshard.key_bytes(d),
		ringshard.key_bytes(t), ringshard.key_bytes(c)), ';' ORDER BY id))
	  FROM keys.sample
$$;
SELECT keys.sample_routing() AS baseline \gset
SET TimeZone = 'UTC';
SELECT keys.sample_routing() = :'baseline' AS same_under_utc;
SET TimeZone = 'Asia/Jakarta';
SELECT keys.sample_routing() = :'baseline' AS same_under_jakarta;
SET TimeZone = 'America/St_Johns';
SELECT keys.sample_routing() = :'baseline' AS same_under_st_johns;
SET TimeZone = 'Pacific/Chatham';
SELECT keys.sample_routing() = :'baseline' AS same_under_chatham;
RESET TimeZone;
SET DateStyle = 'German';
SELECT keys.sample_routing() = :'baseline' AS same_under_german;
SET DateStyle = 'SQL, DMY';
SELECT keys.sample_routing() = :'baseline' AS same_under_sql_dmy;
SET DateStyle = 'Postgres, MDY';
SELECT keys.sample_routing() = :'baseline' AS same_under_postgres_mdy;
RESET DateStyle;
SET IntervalStyle = 'sql_standard';
SELECT keys.sample_routing() = :'baseline' AS same_under_sql_standard_intervals;
SET IntervalStyle = 'iso_8601';
SELECT keys.sample_routing() = :'baseline' AS same_under_iso_8601_intervals;
RESET IntervalStyle;
SET extra_float_digits = -15;
SELECT keys.sample_routing() = :'baseline' AS same_with_few_float_digits;
SET extra_float_digits = 0;
SELECT keys.sample_routing() = :'baseline' AS same_with_extra_float_digits_0;
RESET extra_float_digits;
SET lc_numeric = 'C';
SELECT keys.sample_routing() = :'baseline' AS same_under_lc_numeric_c;
SET lc_time = 'C';
SELECT keys.sample_routing() = :'baseline' AS same_under_lc_time_c;
RESET lc_numeric;
RESET lc_time;
SET client_encoding = 'LATIN1';
SELECT keys.sample_routing() = :'baseline' AS same_under_latin1_client;
RESET client_encoding;
-- all of them at once
SET TimeZone = 'Pacific/Kiritimati';
SET DateStyle = 'SQL, DMY';
SET IntervalStyle = 'postgres_verbose';
SET extra_float_digits = 3;
SET client_encoding = 'LATIN1';
SELECT keys.sample_routing() = :'baseline' AS same_under_all_changed;
RESET ALL;
SET search_path = keys, public;
SELECT keys.sample_routing() = :'baseline' AS same_after_reset;

--
-- Stored routing: an index, a generated column and a partition key over
-- ring_token and partition_for, for numeric, date, timestamptz and char(n)
-- keys; rows stored under one TimeZone are found under another
--
SET TimeZone = 'Asia/Jakarta';
CREATE TABLE keys.stored_numeric (k numeric, token ringtoken GENERATED ALWAYS AS (ring_token(k)) STORED,
								  part int GENERATED ALWAYS AS (partition_for('orders', k)) STORED);
CREATE INDEX stored_numeric_token ON keys.stored_numeric (ring_token(k));
CREATE INDEX stored_numeric_part ON keys.stored_numeric (partition_for('orders', k));
CREATE TABLE keys.stored_date (k date, token ringtoken GENERATED ALWAYS AS (ring_token(k)) STORED,
							   part int GENERATED ALWAYS AS (partition_for('orders', k)) STORED);
CREATE INDEX stored_date_token ON keys.stored_date (ring_token(k));
CREATE TABLE keys.stored_timestamptz (k timestamptz, token ringtoken GENERATED ALWAYS AS (ring_token(k)) STORED,
									  part int GENERATED ALWAYS AS (partition_for('orders', k)) STORED);
CREATE INDEX stored_timestamptz_token ON keys.stored_timestamptz (ring_token(k));
CREATE TABLE keys.stored_char (k char(8), token ringtoken GENERATED ALWAYS AS (ring_token(k)) STORED,
							   part int GENERATED ALWAYS AS (partition_for('orders', k)) STORED);
CREATE INDEX stored_char_token ON keys.stored_char (ring_token(k));
INSERT INTO keys.stored_numeric (k) SELECT (g / 100.0)::numeric(10, 3) FROM generate_series(1, 2000) g;
INSERT INTO keys.stored_numeric (k) VALUES (1.5), (1.50), (1.500), ('-0.0'), ('NaN');
INSERT INTO keys.stored_date (k) SELECT date '2026-01-01' + g FROM generate_series(-1000, 1000) g;
INSERT INTO keys.stored_date (k) VALUES ('infinity'), ('0044-03-15 BC');
INSERT INTO keys.stored_timestamptz (k) SELECT timestamptz '2026-01-31 00:00:00+07' + g * interval '37 minutes 0.25 seconds'
  FROM generate_series(1, 2000) g;
INSERT INTO keys.stored_timestamptz (k) VALUES ('2026-01-31 14:05:00+07'), ('2026-01-31 07:05:00Z'), ('infinity');
INSERT INTO keys.stored_char (k) SELECT 'k' || g FROM generate_series(1, 2000) g;
INSERT INTO keys.stored_char (k) VALUES ('ab'), ('ab  '), ('ñandú');
SET TimeZone = 'America/St_Johns';
SET DateStyle = 'German';
SELECT 'numeric' AS key_type, count(*) AS stored, count(*) FILTER (WHERE token <> ring_token(k) OR part <> partition_for('orders', k)) AS stale
  FROM keys.stored_numeric
UNION ALL
SELECT 'date', count(*), count(*) FILTER (WHERE token <> ring_token(k) OR part <> partition_for('orders', k)) FROM keys.stored_date
UNION ALL
SELECT 'timestamptz', count(*), count(*) FILTER (WHERE token <> ring_token(k) OR part <> partition_for('orders', k)) FROM keys.stored_timestamptz
UNION ALL
SELECT 'char(8)', count(*), count(*) FILTER (WHERE token <> ring_token(k) OR part <> partition_for('orders', k)) FROM keys.stored_char;
SET enable_seqscan = off;
SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT k FROM keys.stored_numeric WHERE ring_token(k) = ring_token(1.5::numeric);
SELECT k FROM keys.stored_numeric WHERE ring_token(k) = ring_token(1.5::numeric) ORDER BY k::text;
SELECT count(*) AS same_partition FROM keys.stored_numeric WHERE partition_for('orders', k) = partition_for('orders', 1.5::numeric) AND k = 1.5;
EXPLAIN (COSTS OFF) SELECT k FROM keys.stored_timestamptz WHERE ring_token(k) = ring_token('2026-01-31 07:05:00+00'::timestamptz);
SELECT count(*) AS found_from_another_zone FROM keys.stored_timestamptz
 WHERE ring_token(k) = ring_token('2026-01-31 03:35:00-03:30'::timestamptz);
SELECT count(*) AS found_from_german_dates FROM keys.stored_date WHERE ring_token(k) = ring_token('31.01.2026'::date);
SELECT count(*) AS found_padded_or_not FROM keys.stored_char WHERE ring_token(k) = ring_token('ab');
SELECT count(*) AS found_by_token FROM keys.stored_char WHERE ring_token(k) = ring_token('ñandú'::char(8));
RESET enable_seqscan;
RESET enable_bitmapscan;
RESET DateStyle;
-- a partition key: rows go to the partition of their token's half of the ring
CREATE TABLE keys.by_token (k timestamptz) PARTITION BY RANGE (ring_token(k));
CREATE TABLE keys.by_token_low PARTITION OF keys.by_token FOR VALUES FROM (MINVALUE) TO ('9223372036854775808');
CREATE TABLE keys.by_token_high PARTITION OF keys.by_token FOR VALUES FROM ('9223372036854775808') TO (MAXVALUE);
INSERT INTO keys.by_token SELECT k FROM keys.stored_timestamptz;
SET TimeZone = 'UTC';
SELECT count(*) FILTER (WHERE ring_token(k) >= '9223372036854775808') AS misplaced_low FROM keys.by_token_low;
SELECT count(*) FILTER (WHERE ring_token(k) < '9223372036854775808') AS misplaced_high FROM keys.by_token_high;
SELECT (SELECT count(*) FROM keys.by_token_low) + (SELECT count(*) FROM keys.by_token_high) AS rows_placed;
RESET TimeZone;

--
-- char(n): the same route through every entry point, padded or not
--
CREATE TABLE keys.coded (k char(8), ks char(4));
INSERT INTO keys.coded VALUES ('ab', 'ks'), ('ñandú', 'ks  '), (' x', 'ks'), ('a b', 'ks'), ('', 'ks');
SELECT ringshard.create_ring('coded', replication_factor => 2);
SELECT ringshard.add_node('shard-jakarta-01', ring => 'coded'), ringshard.add_node('shard-medan-05', ring => 'coded');
CREATE TABLE keys.coded_by_ring (k char(8));
INSERT INTO keys.coded_by_ring SELECT k FROM keys.coded;
SELECT ringshard.distribute_table('keys.coded_by_ring', 'k', 'coded');
CREATE TABLE keys.coded_by_map (k char(8), ks char(4));
INSERT INTO keys.coded_by_map SELECT k, ks FROM keys.coded;
SELECT ringshard.distribute_table_by_partition('keys.coded_by_map', 'k', keyspace_column => 'ks');
SELECT '"' || k::text || '"' AS key,
       ring_token(k) = ring_token(trimmed) AS ring_token,
       ringshard.key_bytes(k) = convert_to(trimmed, 'UTF8') AS key_bytes,
       shard_for(k) = shard_for(trimmed) AND shard_for(k, 'coded') = shard_for(trimmed, 'coded') AS shard_for,
       replicas_for(k) = replicas_for(trimmed) AND replicas_for(k, 'coded') = replicas_for(trimmed, 'coded')
         AND replicas_for(k, 'default', 3) = replicas_for(trimmed, 'default', 3) AS replicas_for,
       read_node_for(k) = ANY (replicas_for(trimmed)) AS read_node_for,
       partition_for(ks, k) = partition_for('ks', trimmed) AS partition_for,
       nodes_for(ks, k) = nodes_for('ks', trimmed) AND nodes_for(ks, k, 'default') = nodes_for('ks', trimmed, 'default') AS nodes_for,
       ringshard.proposed_replicas(k, 'default', 'set_weight', 'shard-jakarta-01', 2)
         = ringshard.proposed_replicas(trimmed, 'default', 'set_weight', 'shard-jakarta-01', 2) AS proposed_replicas,
       ring_token(k::code) = ring_token(trimmed) AS domain_over_char
  FROM (SELECT k, ks, rtrim(k::varchar, ' ') AS trimmed FROM keys.coded) c;
SELECT '"' || r.k::text || '"' AS key,
       shard_of(r) = shard_for(rtrim(r.k::varchar, ' '), 'coded') AND replicas_of(r) = replicas_for(rtrim(r.k::varchar, ' '), 'coded') AS ring_annotation,
       shard_of(m) = (nodes_for('ks', rtrim(m.k::varchar, ' ')))[1] AND replicas_of(m) = nodes_for('ks', rtrim(m.k::varchar, ' ')) AS map_annotation
  FROM keys.coded_by_ring r JOIN keys.coded_by_map m ON m.k = r.k;
SELECT ringshard.undistribute_table('keys.coded_by_ring'), ringshard.undistribute_table('keys.coded_by_map');
-- (a char(n) argument of a routing function is cast to text before the call;
-- an annotated table's key column reaches the encoder as it is, and so do
-- name and enum columns)
CREATE TABLE keys.named (k name, e mood);
INSERT INTO keys.named VALUES ('ñandú', 'ñandú'), ('two words', 'two words'), ('ok', 'ok');
CREATE TABLE keys.named_by_mood (LIKE keys.named);
INSERT INTO keys.named_by_mood SELECT * FROM keys.named;
SELECT ringshard.distribute_table('keys.named', 'k', 'coded'), ringshard.distribute_table('keys.named_by_mood', 'e', 'coded');
SELECT n.k, replicas_of(n) = replicas_for(n.k::text, 'coded') AS name_key, replicas_of(m) = replicas_for(m.e::text, 'coded') AS enum_key
  FROM keys.named n JOIN keys.named_by_mood m USING (k) ORDER BY n.k COLLATE "C";
SELECT ringshard.undistribute_table('keys.named'), ringshard.undistribute_table('keys.named_by_mood');

--
-- Annotated tables route typed keys by the same bytes, whatever the session
--
CREATE TABLE keys.payments (amount numeric, paid_at timestamptz, day date);
INSERT INTO keys.payments VALUES (1.5, '2026-01-31 14:05:00+07', '2026-01-31'), (1.50, '2026-01-31 07:05:00Z', '2026-01-31'),
	(1.500, '2026-01-31 02:05:00-05', '2026-01-31'), (2, '2026-02-01 00:00:00+00', '2026-02-01');
CREATE TABLE keys.payments_by_time (LIKE keys.payments);
INSERT INTO keys.payments_by_time SELECT * FROM keys.payments;
CREATE TABLE keys.payments_by_day (LIKE keys.payments);
INSERT INTO keys.payments_by_day SELECT * FROM keys.payments;
SELECT ringshard.distribute_table('keys.payments', 'amount');
SELECT ringshard.distribute_table('keys.payments_by_time', 'paid_at');
SELECT ringshard.distribute_table_by_partition('keys.payments_by_day', 'day', 'payments');
SET TimeZone = 'Pacific/Chatham';
SET DateStyle = 'SQL, DMY';
SELECT count(DISTINCT shard_of(p)) AS owners_of_1_5, bool_and(shard_of(p) = shard_for(1.5::numeric)) AS as_shard_for
  FROM keys.payments p WHERE amount = 1.5;
SELECT count(DISTINCT replicas_of(p)) AS replica_sets_of_one_instant,
       bool_and(replicas_of(p) = replicas_for('2026-01-31 07:05:00+00'::timestamptz)) AS as_replicas_for
  FROM keys.payments_by_time p WHERE paid_at = '2026-01-31 07:05:00+00';
SELECT bool_and(replicas_of(p) = nodes_for('payments', p.day)) AS map_as_nodes_for,
       bool_and(replicas_of(p) = nodes_for('payments', ringshard.key_bytes(p.day))) AS map_as_its_bytes
  FROM keys.payments_by_day p;
RESET TimeZone;
RESET DateStyle;
SELECT ringshard.undistribute_table('keys.payments'), ringshard.undistribute_table('keys.payments_by_time'),
       ringshard.undistribute_table('keys.payments_by_day');
-- a keyspace column of a typed value: the rows a node holds by the map, as
-- suggest_partition_boundaries counts them in SQL, are those replicas_of
-- places there
CREATE TABLE keys.ledger (region numeric, id bigint);
INSERT INTO keys.ledger SELECT (ARRAY[1.5, 1.50, 2.000, -0.0])[1 + g % 4], g FROM generate_series(1, 1000) g;
SELECT ringshard.distribute_table_by_partition('keys.ledger', 'id', keyspace_column => 'region');
SELECT s.node, s.current_rows, p.rows_held, s.current_rows = p.rows_held AS same
  FROM ringshard.suggest_partition_boundaries('keys.ledger') s JOIN ringshard.table_balance_report('keys.ledger') p USING (node)
 ORDER BY s.node;
SELECT ringshard.undistribute_table('keys.ledger');

--
-- A NULL key of any type routes nowhere
--
SELECT ring_token(NULL::numeric) IS NULL AS ring_token, shard_for(NULL::timestamptz) IS NULL AS shard_for,
       replicas_for(NULL::date) IS NULL AS replicas_for, partition_for('ks', NULL::uuid) IS NULL AS partition_for,
       nodes_for('ks', NULL::boolean) IS NULL AS nodes_for, ringshard.key_bytes(NULL::mood) IS NULL AS key_bytes,
       ring_token(NULL::char(4)) IS NULL AS char_n, ring_token(NULL::float8) IS NULL AS even_a_refused_type;

--
-- Types without canonical bytes are refused, naming the type, with a hint
-- to cast the key to text
--
SELECT ring_token(0::float8);
SELECT shard_for('1 day'::interval);
SELECT partition_for('ks', '{"a": 1}'::jsonb);
SELECT ringshard.key_bytes(ARRAY[1, 2]);
CREATE DOMAIN keys.ratio AS float8;
SELECT replicas_for(0.5::ratio);
-- "char" has an implicit cast to text and is not a string type: its call is
-- ambiguous, and refused as such
SELECT ring_token('a'::"char");
SELECT label, keys.err(stmt) AS error FROM (VALUES
	('float4',      $$SELECT ring_token(1.5::float4)$$),
	('float8 -0',   $$SELECT shard_for('-0'::float8)$$),
	('interval',    $$SELECT replicas_for('1 day'::interval, 'default', 2)$$),
	('json',        $$SELECT partition_for('ks', '{}'::json)$$),
	('jsonb',       $$SELECT nodes_for('ks', '{}'::jsonb)$$),
	('point',       $$SELECT read_node_for(point(1, 2))$$),
	('array',       $$SELECT ringshard.key_bytes(ARRAY['a'])$$),
	('record',      $$SELECT ring_token(ROW(1, 'a'))$$),
	('money',       $$SELECT shard_for(1.5::money)$$),
	('time',        $$SELECT ring_token('07:05'::time)$$),
	('timetz',      $$SELECT ring_token('07:05+07'::timetz)$$),
	('inet',        $$SELECT ring_token('10.0.0.1'::inet)$$),
	('oid',         $$SELECT ring_token(1::oid)$$),
	('domain',      $$SELECT ring_token(0.5::keys.ratio)$$),
	('proposed',    $$SELECT ringshard.proposed_replicas(1.5::float8, 'default', 'add', 'x')$$),
	('cast hint',   $$SELECT shard_for(1.5::float8::text)$$)
) v(label, stmt);
-- a table keyed by such a column is refused when it is annotated (by ring
-- or map, as key or keyspace column), not at its first row; a domain over a
-- type that routes is accepted
CREATE TABLE keys.readings (value float8, place text, at_time interval);
INSERT INTO keys.readings VALUES (0, 'a', '1 day'), ('-0', 'b', '2 days');
SELECT ringshard.distribute_table('keys.readings', 'value');
SELECT ringshard.distribute_table_by_partition('keys.readings', 'value', 'ks');
SELECT ringshard.distribute_table_by_partition('keys.readings', 'place', keyspace_column => 'at_time');
SELECT count(*) AS annotated FROM ringshard.distributed_tables WHERE table_name = 'keys.readings'::regclass;
CREATE DOMAIN keys.place_code AS text CHECK (VALUE <> '');
ALTER TABLE keys.readings ADD COLUMN code keys.place_code;
SELECT ringshard.distribute_table('keys.readings', 'code');
SELECT ringshard.undistribute_table('keys.readings');

--
-- Property test: thousands of random values of every type, each routed as
-- the text an implementation of §1 written here, with string functions,
-- gives for it
--
SELECT setseed(0.14);
CREATE TEMP TABLE property (type text, value text, token ringtoken, reference text, reference_token ringtoken);
-- numeric from random spellings: sign, leading zeros, trailing zeros, a bare
-- point, negative zero; the reference strips the spelling itself
INSERT INTO property
SELECT 'numeric', spelling, ring_token(spelling::numeric), reference, ring_token(reference)
  FROM (SELECT sign || int_digits || CASE WHEN has_point THEN '.' || frac_digits ELSE '' END AS spelling,
               CASE WHEN ltrim(int_digits, '0') = '' AND rtrim(frac_digits, '0') = '' THEN '0'
                    ELSE CASE WHEN sign = '-' THEN '-' ELSE '' END
                         || coalesce(nullif(ltrim(int_digits, '0'), ''), '0')
                         || coalesce('.' || nullif(rtrim(frac_digits, '0'), ''), '') END AS reference
          FROM (SELECT sign, int_digits, has_point, CASE WHEN has_point THEN frac_digits ELSE '' END AS frac_digits
          FROM (SELECT (ARRAY['', '-', '+'])[1 + floor(random() * 3)::int] AS sign,
                       repeat('0', floor(random() * 3)::int)
                         || substr(floor(random() * 1e15)::bigint::text, 1, floor(random() * 16)::int) AS int_digits,
                       substr(lpad(floor(random() * 1e15)::bigint::text, 15, '0'), 1, floor(random() * 16)::int)
                         || repeat('0', floor(random() * 4)::int) AS frac_digits,
                       random() < 0.7 AS has_point
                  FROM generate_series(1, 3000)) g) g
         WHERE int_digits <> '' OR frac_digits <> '') s;
-- numeric from arithmetic, with random scales and typmods (zeros appended);
-- the reference trims numeric's own plain output
INSERT INTO property
SELECT 'numeric (computed)', v::text, ring_token(v), reference, ring_token(reference)
  FROM (SELECT v, CASE WHEN v::text IN ('NaN', 'Infinity', '-Infinity') THEN v::text
                       WHEN position('.' in v::text) > 0 THEN regexp_replace(rtrim(rtrim(v::text, '0'), '.'), '^-0$', '0')
                       ELSE v::text END AS reference
          FROM (SELECT CASE WHEN random() < 0.02 THEN 'NaN'::numeric
                            WHEN random() < 0.02 THEN 'Infinity'::numeric
                            WHEN random() < 0.02 THEN '-Infinity'::numeric
                            ELSE round(((random() - 0.5) * 10 ^ (floor(random() * 40) - 20))::numeric,
                                       floor(random() * 30)::int) END AS v
                  FROM generate_series(1, 3000)) g) s;
-- dates: mostly 1 BC .. 3000 AD, also anywhere from 4714 BC to 5874897 AD
-- (beyond what to_char takes), and the infinities; the reference is built
-- from the year, month and day that extract gives (negative years are BC)
INSERT INTO property
SELECT 'date', d::text, ring_token(d), reference, ring_token(reference)
  FROM (SELECT d, CASE WHEN d = 'infinity' THEN 'infinity' WHEN d = '-infinity' THEN '-infinity'
                       ELSE repeat('0', 4 - length(abs(extract(year FROM d))::text)) || abs(extract(year FROM d))::text
                            || '-' || lpad(extract(month FROM d)::text, 2, '0') || '-' || lpad(extract(day FROM d)::text, 2, '0')
                            || CASE WHEN extract(year FROM d) < 0 THEN ' BC' ELSE '' END END AS reference
          FROM (SELECT CASE WHEN r < 0.01 THEN 'infinity'::date
                            WHEN r < 0.02 THEN '-infinity'::date
                            WHEN r < 0.60 THEN date '0001-01-01' + floor(random() * 1100000)::int - 400
                            WHEN r < 0.80 THEN date '4714-11-24 BC' + floor(random() * 1721424)::int
                            ELSE date '4714-11-24 BC' + floor(random() * 2147483494)::int END AS d
                  FROM (SELECT random() AS r FROM generate_series(1, 3000)) g) g) s;
-- timestamps: random days (BC too) and random microseconds, some rounded
-- so that they end in zeros
INSERT INTO property
SELECT 'timestamp', ts::text, ring_token(ts), reference, ring_token(reference)
  FROM (SELECT ts, CASE WHEN ts = 'infinity' THEN 'infinity' WHEN ts = '-infinity' THEN '-infinity'
                        ELSE to_char(ts, 'YYYY-MM-DD HH24:MI:SS')
                             || CASE WHEN to_char(ts, 'US') <> '000000' THEN '.' || rtrim(to_char(ts, 'US'), '0') ELSE '' END
                             || CASE WHEN ts < timestamp '0001-01-01 00:00:00' THEN ' BC' ELSE '' END END AS reference
          FROM (SELECT CASE WHEN r < 0.01 THEN 'infinity'::timestamp
                            WHEN r < 0.02 THEN '-infinity'::timestamp
                            ELSE (CASE WHEN r < 0.6 THEN date '0001-01-01' + floor(random() * 1100000)::int - 400
                                       ELSE date '4714-11-24 BC' + floor(random() * 109203000)::int END)::timestamp
                                 -- microseconds of the day, rounded to a random power of ten
                                 + floor(random() * 86400000000 / unit) * unit * interval '1 microsecond' END AS ts
                  FROM (SELECT random() AS r, 10 ^ floor(random() * 7) AS unit FROM generate_series(1, 3000)) g) g) s;
-- char(n): random strings with inner, leading and trailing spaces and
-- non-ASCII letters, padded to a random length
INSERT INTO property
SELECT 'char(n)', s, ring_token(s::char(40)), regexp_replace(s, ' +$', ''), ring_token(regexp_replace(s, ' +$', ''))
  FROM (SELECT string_agg((ARRAY['a', 'b', ' ', 'ñ', 'ú', 'Z', '0', '-'])[1 + floor(random() * 8)::int], '') AS s
          FROM generate_series(1, 3000) g, generate_series(1, 1 + (g % 30)) c GROUP BY g) s;
-- uuids in mixed case, with or without hyphens or braces
INSERT INTO property
SELECT 'uuid', spelling, ring_token(spelling::uuid), reference, ring_token(reference)
  FROM (SELECT CASE form WHEN 0 THEN mixed
                         WHEN 1 THEN '{' || mixed || '}'
                         ELSE substr(mixed, 1, 8) || '-' || substr(mixed, 9, 4) || '-' || substr(mixed, 13, 4) || '-'
                              || substr(mixed, 17, 4) || '-' || substr(mixed, 21, 12) END AS spelling,
               substr(hex, 1, 8) || '-' || substr(hex, 9, 4) || '-' || substr(hex, 13, 4) || '-'
                 || substr(hex, 17, 4) || '-' || substr(hex, 21, 12) AS reference
          FROM (SELECT hex, floor(random() * 3)::int AS form,
                       (SELECT string_agg(CASE WHEN random() < 0.5 THEN upper(ch) ELSE ch END, '' ORDER BY i)
                          FROM unnest(string_to_array(hex, NULL)) WITH ORDINALITY AS u(ch, i)) AS mixed
                  FROM (SELECT md5(random()::text || g) AS hex FROM generate_series(1, 3000) g) h) m) s;
-- booleans in every spelling PostgreSQL reads
INSERT INTO property
SELECT 'boolean', spelling, ring_token(spelling::boolean), reference, ring_token(reference)
  FROM (SELECT (ARRAY['t', 'true', 'yes', 'on', '1', 'TRUE', 'y', 'f', 'false', 'no', 'off', '0', 'FALSE', 'n'])[i] AS spelling,
               CASE WHEN i <= 7 THEN 't' ELSE 'f' END AS reference
          FROM (SELECT 1 + floor(random() * 14)::int AS i FROM generate_series(1, 3000)) g) s;
-- enum labels, and domains over numeric, char(n) and date
INSERT INTO property
SELECT 'enum', label, ring_token(label::mood), label, ring_token(label)
  FROM (SELECT (enum_range(NULL::mood))[1 + floor(random() * 5)::int]::text AS label FROM generate_series(1, 3000)) s;
INSERT INTO property
SELECT 'domains', value, token, reference, ring_token(reference) FROM (
	SELECT value, ring_token(value::amount) AS token,
	       CASE WHEN position('.' in value) > 0 THEN regexp_replace(rtrim(rtrim(value, '0'), '.'), '^-?0$', '0') ELSE value END AS reference
	  FROM (SELECT round(((random() - 0.5) * 1e8)::numeric, floor(random() * 5)::int)::amount::text AS value
	          FROM generate_series(1, 1000)) a
	UNION ALL
	SELECT value, ring_token(value::code), rtrim(value, ' ') FROM (SELECT left(md5(random()::text), floor(random() * 8)::int) || repeat(' ', floor(random() * 3)::int) AS value
	                                                                 FROM generate_series(1, 1000)) c
	UNION ALL
	SELECT d::text, ring_token(d::day), to_char(d, 'YYYY-MM-DD') || CASE WHEN d < date '0001-01-01' THEN ' BC' ELSE '' END
	  FROM (SELECT date '0001-01-01' + floor(random() * 1000000)::int - 100000 AS d FROM generate_series(1, 1000)) d) s;
-- integers of every size
INSERT INTO property
SELECT 'integers', v::text, ring_token(v), reference, ring_token(reference)
  FROM (SELECT v, v::text AS reference FROM (
	SELECT ((random() - 0.5) * 1.8e19)::bigint AS v FROM generate_series(1, 2000)
	UNION ALL SELECT v FROM unnest(ARRAY[0, -1, 9223372036854775807, -9223372036854775808]::bigint[]) v) i) s;
-- timestamptz under a random TimeZone for every value: the reference reads
-- the instant in UTC with AT TIME ZONE
CREATE FUNCTION keys.check_timestamptz(n int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	zones text[] := ARRAY['UTC', 'Asia/Jakarta', 'Asia/Kathmandu', 'America/St_Johns', 'Pacific/Chatham',
						  'Pacific/Kiritimati', 'America/Los_Angeles', 'Europe/Berlin', 'Australia/Lord_Howe', 'EST5EDT'];
	v timestamptz;
	utc timestamp;
	reference text;
BEGIN
	FOR i IN 1..n LOOP
		PERFORM set_config('TimeZone', zones[1 + floor(random() * 10)::int], true);
		IF random() < 0.02 THEN
			v := CASE WHEN random() < 0.5 THEN 'infinity' ELSE '-infinity' END;
		ELSE
			v := (CASE WHEN random() < 0.7 THEN timestamptz '1900-01-01 00:00:00+00' + floor(random() * 80000)::int * interval '1 day'
			           ELSE timestamptz '4713-11-25 00:00:00+00 BC' + floor(random() * 10000)::int * interval '1000 days' END)
			     + floor(random() * 86400000000) * interval '1 microsecond';
		END IF;
		utc := v AT TIME ZONE 'UTC';
		reference := CASE WHEN v = 'infinity' THEN 'infinity' WHEN v = '-infinity' THEN '-infinity'
			ELSE to_char(utc, 'YYYY-MM-DD HH24:MI:SS')
			     || CASE WHEN to_char(utc, 'US') <> '000000' THEN '.' || rtrim(to_char(utc, 'US'), '0') ELSE '' END
			     || '+00' || CASE WHEN utc < timestamp '0001-01-01 00:00:00' THEN ' BC' ELSE '' END END;
		INSERT INTO property VALUES ('timestamptz', v::text, ring_token(v), reference, ring_token(reference));
	END LOOP;
END
$$;
BEGIN;
SELECT keys.check_timestamptz(3000);
COMMIT;
-- char(n) once more, as the key column of an annotated table (the encoder
-- trims it; a routing function's argument is trimmed by the cast to text),
-- placed by a map of one partition per node, so that the node names the
-- partition
SELECT ringshard.create_partition_map('exact');
SELECT count(*) AS nodes FROM (SELECT ringshard.assign_partitions('p' || p, p, p, 'exact') FROM generate_series(0, 255) p) s;
CREATE TABLE keys.padded (k char(40), s text);
INSERT INTO keys.padded SELECT value, value FROM property WHERE type = 'char(n)';
SELECT ringshard.distribute_table_by_partition('keys.padded', 'k', 'ks', 'exact');
INSERT INTO property
SELECT 'char(n) column', t.s, substr(shard_of(t), 2)::ringtoken, regexp_replace(t.s, ' +$', ''),
       partition_for('ks', regexp_replace(t.s, ' +$', ''))::ringtoken
  FROM keys.padded t;
SELECT ringshard.undistribute_table('keys.padded');
SELECT ringshard.drop_partition_map('exact');
SELECT type, count(*) >= 1000 AS thousands, count(*) FILTER (WHERE token <> reference_token) AS mismatches
  FROM property GROUP BY type ORDER BY type;
-- the first disagreements, if any, to see why
SELECT type, value, reference FROM property WHERE token <> reference_token ORDER BY type, value LIMIT 5;
-- the random values covered what they should
SELECT count(*) FILTER (WHERE type = 'date' AND reference LIKE '% BC') > 100 AS bc_dates,
       count(*) FILTER (WHERE type = 'date' AND reference LIKE '%infinity') > 10 AS infinite_dates,
       count(*) FILTER (WHERE type = 'timestamp' AND reference ~ '\.\d+$') > 1000 AS fractional_timestamps,
       count(*) FILTER (WHERE type = 'timestamp' AND reference ~ ':\d\d$') > 100 AS whole_second_timestamps,
       count(*) FILTER (WHERE type = 'timestamptz' AND reference LIKE '%+00 BC') > 50 AS bc_instants,
       count(*) FILTER (WHERE type = 'numeric' AND value ~ '\.\d*0$') > 500 AS trailing_zeros,
       count(*) FILTER (WHERE type = 'numeric' AND value ~ '^[-+]?0+(\.0*)?$') > 10 AS zeros,
       count(*) FILTER (WHERE type = 'numeric' AND value ~ '^-0+(\.0*)?$') > 0 AS negative_zeros,
       count(*) FILTER (WHERE type = 'char(n)' AND value LIKE '% ') > 300 AS padded_chars,
       count(*) FILTER (WHERE type = 'uuid' AND value ~ '[A-F]' AND value ~ '[a-f]') > 1000 AS mixed_case_uuids
  FROM property;

--
-- A database in another encoding (LATIN1): text routes by its UTF-8 bytes,
-- so a key routes as it does in a UTF-8 database
--
SELECT current_database() AS regress_database,
       partition_for('ñandú', 'ñandú') AS utf8_partition, partition_for('ñandú', 'x') AS utf8_keyspace_partition \gset
SET client_min_messages = warning;
DROP DATABASE IF EXISTS ringshard_keys_latin1;
RESET client_min_messages;
CREATE DATABASE ringshard_keys_latin1 TEMPLATE template0 ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C';
\c ringshard_keys_latin1
SET client_encoding = 'UTF8';
SET client_min_messages = warning;
CREATE EXTENSION ringshard;
RESET client_min_messages;
SELECT pg_encoding_to_char(encoding) AS database_encoding FROM pg_database WHERE datname = current_database();
CREATE TYPE latin1_mood AS ENUM ('ñandú');
CREATE TABLE latin1_keys (t text, c char(10), e latin1_mood, n name);
INSERT INTO latin1_keys VALUES ('ñandú', 'ñandú', 'ñandú', 'ñandú');
SELECT ring_token(t) AS text_token, ring_token(t) = '9900926414339375407' AS text_as_in_utf8,
       ring_token(c) = ring_token(t) AS char_n, ring_token(e) = ring_token(t) AS enum, ring_token(n) = ring_token(t) AS name,
       ringshard.key_bytes(t) AS bytes, ringshard.key_bytes(c) = ringshard.key_bytes(t) AS char_bytes,
       ringshard.key_bytes(n) = ringshard.key_bytes(t) AS name_bytes,
       partition_for('default', t) AS partition, partition_for('ñandú', 'x') = :utf8_keyspace_partition AS keyspace
  FROM latin1_keys;
-- a table annotated with a non-ASCII keyspace: one partition per node
SELECT count(*) AS nodes FROM (SELECT ringshard.assign_partitions('p' || p, p, p) FROM generate_series(0, 255) p) s;
CREATE TABLE latin1_text (LIKE latin1_keys);
CREATE TABLE latin1_char (LIKE latin1_keys);
CREATE TABLE latin1_enum (LIKE latin1_keys);
CREATE TABLE latin1_name (LIKE latin1_keys);
INSERT INTO latin1_text SELECT * FROM latin1_keys;
INSERT INTO latin1_char SELECT * FROM latin1_keys;
INSERT INTO latin1_enum SELECT * FROM latin1_keys;
INSERT INTO latin1_name SELECT * FROM latin1_keys;
SELECT ringshard.distribute_table_by_partition('latin1_text', 't', 'ñandú'),
       ringshard.distribute_table_by_partition('latin1_char', 'c', 'ñandú'),
       ringshard.distribute_table_by_partition('latin1_enum', 'e', 'ñandú'),
       ringshard.distribute_table_by_partition('latin1_name', 'n', 'ñandú');
SELECT (SELECT shard_of(r) FROM latin1_text r) = 'p' || :utf8_partition AS text_key_as_in_utf8,
       (SELECT shard_of(r) FROM latin1_char r) = 'p' || :utf8_partition AS char_key_as_in_utf8,
       (SELECT shard_of(r) FROM latin1_enum r) = 'p' || :utf8_partition AS enum_key_as_in_utf8,
       (SELECT shard_of(r) FROM latin1_name r) = 'p' || :utf8_partition AS name_key_as_in_utf8,
       nodes_for('ñandú', 'ñandú') = ARRAY['p' || :utf8_partition] AS nodes_for_as_in_utf8;
\c :regress_database
DROP DATABASE ringshard_keys_latin1;
SET search_path = keys, public;

--
-- Clean up
--
SELECT ringshard.drop_ring('coded');
SELECT ringshard.unassign_partitions('shard-jakarta-01', 0, 127), ringshard.unassign_partitions('shard-surabaya-02', 100, 255);
SELECT ringshard.remove_node(node_name) FROM ringshard.ring_members WHERE ring_name = 'default';
SELECT ringshard.set_replication_factor('default', 1);
DROP SCHEMA keys CASCADE;

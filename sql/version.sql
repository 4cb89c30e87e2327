-- Every file starts from a fresh extension: the suite shares one database.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS ringshard CASCADE;
CREATE EXTENSION ringshard;
RESET client_min_messages;
--
-- version: ringshard.version(), and a library that refuses SQL objects of
-- another version
--
\set SHOW_CONTEXT never

-- One row: the SQL version (this database's extversion), the library's
-- version, the PostgreSQL it was built for, its build options.
SELECT count(*) AS rows FROM ringshard.version();
SELECT pg_catalog.pg_get_function_arguments('ringshard.version()'::regprocedure) AS columns;
SELECT sql_version = (SELECT extversion FROM pg_extension WHERE extname = 'ringshard') AS sql_version_is_extversion,
       library_version = sql_version AS library_matches,
       postgresql ~ '^PostgreSQL 15\.' AS built_for_postgresql_15,
       build_options ~ '^OpenSSL \d+\.\d+\.\d+.*, libyaml \d+\.\d+\.\d+, assertions (on|off)$' AS build_options_shape
  FROM ringshard.version();
SELECT library_version AS library FROM ringshard.version() \gset
-- The version the control file gives is the library's.
SELECT default_version = :'library' AS control_file_matches
  FROM pg_available_extensions WHERE name = 'ringshard';

-- Anyone may call it.
CREATE ROLE ringshard_version_reader;
SET ROLE ringshard_version_reader;
SELECT sql_version = library_version AS readable FROM ringshard.version();
RESET ROLE;
DROP ROLE ringshard_version_reader;

-- A mismatch, simulated: the SQL objects say they are 1.1 (as after
-- installing the 1.2 library over a database created with 1.1).  The check
-- runs once per session, at the first routing call or administration
-- function: a new session sees the change.
UPDATE pg_extension SET extversion = '1.1' WHERE extname = 'ringshard';
\c
SELECT shard_for('3201012345670001');
SELECT ringshard.create_ring('another');
SELECT partition_for('faces', 'face-001') AS immutable_hash_needs_no_catalog;
-- version() still answers, to show the mismatch.
SELECT sql_version, library_version = :'library' AS library_unchanged FROM ringshard.version();

-- SQL objects newer than the library: install the library that goes with them.
UPDATE pg_extension SET extversion = '99.0' WHERE extname = 'ringshard';
\c
SELECT ringshard.create_partition_map('another');

-- Back to the library's version: everything works again in a new session.
UPDATE pg_extension SET extversion = :'library' WHERE extname = 'ringshard';
\c
SELECT ringshard.create_ring('another');
SELECT ringshard.add_node('a', NULL, 'another');
SELECT shard_for('3201012345670001', 'another');
-- The node statistics live in shared memory, which only a library loaded at
-- server start can have (pg_regress's server does not preload ringshard).
SELECT count(*) FROM ringshard.stat_nodes;
SELECT ringshard.stat_reset();

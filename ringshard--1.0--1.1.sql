-- ringshard 1.0 to 1.1.  Built by scripts/upgrade-script from extension/upgrade/1.0--1.1/*.sql
-- and extension/*.sql: change those, not this file.

\echo Use "ALTER EXTENSION ringshard UPDATE TO '1.1'" to load this file. \quit

-- extension/upgrade/1.0--1.1/10_prepare.sql
-- Update from 1.0 to 1.1 (docs/upgrading.md).  One transaction: any error
-- leaves the database as 1.0 left it.  Everything that can refuse the update
-- is checked here, before anything changes.  What the administrator must
-- know is a WARNING: PostgreSQL shows nothing below WARNING from an
-- extension script.

-- from extension/00_setup.sql
CREATE SCHEMA ringshard_internal;
REVOKE ALL ON SCHEMA ringshard_internal FROM PUBLIC;
GRANT USAGE ON SCHEMA ringshard_internal TO ringshard_admin;

-- Helpers of this script alone, dropped at its end (their C code stays in
-- the library for as long as updates from 1.0 are supported).
CREATE FUNCTION ringshard_internal.address_options_as_given(address text) RETURNS TABLE (option text, value text)
	AS 'MODULE_PATHNAME', 'ringshard_address_options_as_given' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard_internal.address_options_as_given(text) IS
	'the update from 1.0: every option of a 1.0 node address, credentials included';
CREATE FUNCTION ringshard_internal.replace_1_0_distributed_table(table_name regclass) RETURNS regclass
	AS 'MODULE_PATHNAME', 'ringshard_replace_1_0_distributed_table' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION ringshard_internal.replace_1_0_distributed_table(regclass) IS
	'the update from 1.0: makes a 1.0 distributed table a foreign table of ringshard_cluster without reaching its nodes';

-- Keys of a type without canonical bytes: 1.0 routed them by their text
-- output, 1.1 refuses them (an annotation of one could not even be restored
-- from a dump).  The update stops, naming every such column, and says how
-- to keep routing them as 1.0 did.
-- from extension/60_tables.sql
CREATE FUNCTION ringshard_internal.check_key_column(table_name regclass, column_name name, column_type regtype,
													 role text) RETURNS void
	AS 'MODULE_PATHNAME', 'ringshard_check_key_column' LANGUAGE C STABLE STRICT PARALLEL SAFE;
DO $check_keys$
DECLARE
	column_of record;
	refused text[] := '{}';
	fixes text[] := '{}';
BEGIN
	FOR column_of IN
		SELECT d.table_name, a.attname, a.atttypid, x.role, EXISTS (SELECT FROM pg_catalog.pg_trigger t
		           WHERE t.tgrelid = d.table_name AND t.tgname = 'ringshard_route_write') AS distributed
		  FROM ringshard.distributed_tables d
		 CROSS JOIN LATERAL (VALUES (d.key_attnum, 'sharding key'), (d.keyspace_attnum, 'keyspace column')) x(attnum, role)
		  JOIN pg_catalog.pg_attribute a ON a.attrelid = d.table_name AND a.attnum = x.attnum
		 ORDER BY d.table_name::text COLLATE "C", x.role
	LOOP
		BEGIN
			PERFORM ringshard_internal.check_key_column(column_of.table_name, column_of.attname, column_of.atttypid, column_of.role);
		EXCEPTION WHEN feature_not_supported THEN
			refused := refused || format('%s.%I (%s)', column_of.table_name, column_of.attname,
			                             pg_catalog.format_type(column_of.atttypid, NULL));
			fixes := fixes || format('ALTER TABLE %s ALTER COLUMN %I TYPE text;%s', column_of.table_name, column_of.attname,
			                         CASE WHEN column_of.distributed THEN ' (and the same on every node)' ELSE '' END);
		END;
	END LOOP;
	IF cardinality(refused) > 0 THEN
		RAISE EXCEPTION 'ringshard 1.1 cannot route the keys of %', array_to_string(refused, ', ')
			USING ERRCODE = 'feature_not_supported',
			      DETAIL = 'Keys route by canonical bytes in 1.1, defined for text, varchar, name, char(n), bytea, smallint, integer, bigint, numeric, uuid, boolean, date, timestamp, timestamptz, enums and domains over these; 1.0 routed other types by their text output.',
			      HINT = format('Make each such column text, which routes its keys by that text as 1.0 did: %s Or remove the annotation with ringshard.undistribute_table(). Both work before the update; then run ALTER EXTENSION ringshard UPDATE again.',
			                    array_to_string(fixes, ' '));
	END IF;
END
$check_keys$;

-- A node with an address becomes a foreign server of the same name whose
-- options are the address's; 1.1 refuses options that bring credentials or
-- that ringshard sets itself.  A user name moves into a user mapping; any
-- other such option stops the update, naming the node and the option, with
-- the address to give it instead.  The node's name must fit a server name.
DO $check_nodes$
DECLARE
	node record;
	options text[];
	refused text;
	kept text;
BEGIN
	FOR node IN SELECT n.node_name, n.address FROM ringshard.nodes n WHERE n.address IS NOT NULL
	            ORDER BY n.node_name COLLATE "C" LOOP
		IF octet_length(node.node_name) > 63 THEN
			RAISE EXCEPTION 'node name "%" is too long for a node with an address', left(node.node_name, 64)
				USING ERRCODE = 'name_too_long',
				      DETAIL = 'In ringshard 1.1 a node with an address is a foreign server of the same name, at most 63 bytes.',
				      HINT = 'Before the update, under 1.0: add a node with a shorter name and the same address, move this node''s rows to it (ringshard.rebalance) and remove this one; then run ALTER EXTENSION ringshard UPDATE again.';
		END IF;
		BEGIN
			SELECT array_agg(o.option ORDER BY o.option) INTO options
			  FROM ringshard_internal.address_options_as_given(node.address) o;
		EXCEPTION WHEN invalid_parameter_value THEN
			RAISE EXCEPTION 'the address of node "%" does not parse', node.node_name
				USING ERRCODE = 'invalid_parameter_value',
				      DETAIL = 'An address is host:port, or a libpq connection string.',
				      HINT = format('Correct it, for example: UPDATE ringshard.nodes SET address = ''host=... port=... dbname=...'' WHERE node_name = %L; then run ALTER EXTENSION ringshard UPDATE again.', node.node_name);
		END;
		IF options <@ ARRAY['user'] THEN
			RAISE EXCEPTION 'the address of node "%" sets no more than a user name', node.node_name
				USING ERRCODE = 'invalid_parameter_value',
				      DETAIL = 'In ringshard 1.1 a node''s address becomes the options of its foreign server, and its user name a user mapping: the server would have no options.',
				      HINT = format('Give the node a full address, for example: UPDATE ringshard.nodes SET address = ''host=... port=... dbname=... user=...'' WHERE node_name = %L; then run ALTER EXTENSION ringshard UPDATE again.', node.node_name);
		END IF;
		SELECT string_agg(format('"%s"', x), ', ' ORDER BY x) INTO refused FROM unnest(options) x
		 WHERE x IN ('password', 'sslpassword', 'passfile', 'service', 'client_encoding',
		             'fallback_application_name', 'replication');
		IF refused IS NOT NULL THEN
			-- the address without them (none is a password: 1.0 refused those)
			SELECT string_agg(format('%s=''%s''', o.option, replace(replace(o.value, '\', '\\'), '''', '\''')), ' ' ORDER BY o.option)
			  INTO kept
			  FROM ringshard_internal.address_options_as_given(node.address) o
			 WHERE o.option NOT IN ('password', 'sslpassword', 'passfile', 'service', 'client_encoding',
			                        'fallback_application_name', 'replication');
			RAISE EXCEPTION 'the address of node "%" sets %, which ringshard 1.1 does not allow', node.node_name, refused
				USING ERRCODE = 'invalid_parameter_value',
				      DETAIL = 'In 1.1 a node''s address becomes the options of its foreign server; credentials belong in user mappings, and ringshard sets the client encoding and application name itself.',
				      HINT = format('Give the node an address without them, for example: UPDATE ringshard.nodes SET address = %L WHERE node_name = %L; then run ALTER EXTENSION ringshard UPDATE again.',
				                    coalesce(kept, ''), node.node_name);
		END IF;
	END LOOP;
END
$check_nodes$;


-- extension/upgrade/1.0--1.1/20_catalog.sql
-- The catalog tables take their 1.1 shape; their rows stay.

-- The foreign-data wrapper of nodes and distributed tables, and the server
-- of distributed tables.
-- from extension/20_catalog.sql
CREATE FUNCTION ringshard.fdw_handler() RETURNS fdw_handler
	AS 'MODULE_PATHNAME', 'ringshard_fdw_handler' LANGUAGE C VOLATILE PARALLEL UNSAFE STRICT;
CREATE FUNCTION ringshard.fdw_validator(text[], oid) RETURNS void
	AS 'MODULE_PATHNAME', 'ringshard_fdw_validator' LANGUAGE C VOLATILE PARALLEL UNSAFE STRICT;
CREATE FOREIGN DATA WRAPPER ringshard HANDLER ringshard.fdw_handler VALIDATOR ringshard.fdw_validator;
CREATE SERVER ringshard_cluster FOREIGN DATA WRAPPER ringshard;

-- Nodes: the address (column 2) becomes server_name, in place so that the
-- columns keep their order; the addresses wait in a table of this script
-- until 1.1's functions make them servers (60_nodes.sql).
CREATE TABLE ringshard_internal.addresses_1_0 AS
	SELECT n.node_name, n.address FROM ringshard.nodes n WHERE n.address IS NOT NULL;
ALTER TABLE ringshard.nodes DROP CONSTRAINT address_without_password;
ALTER TABLE ringshard.nodes RENAME COLUMN address TO server_name;
ALTER TABLE ringshard.nodes ALTER COLUMN server_name TYPE name USING NULL;
ALTER TABLE ringshard.nodes ADD CONSTRAINT nodes_server_name_key UNIQUE (server_name);

-- Distributed tables: the constraints and indexes only their nodes have
-- (1.0 gave the nodes none).
ALTER TABLE ringshard.distributed_tables ADD COLUMN node_ddl jsonb NOT NULL DEFAULT '[]';

-- from extension/82_write_queue.sql
CREATE TABLE ringshard.dead_letters (
	write_id uuid NOT NULL,
	node_name text NOT NULL,
	table_name regclass NOT NULL,
	writer regrole NOT NULL,
	payload json NOT NULL,
	queued_at timestamptz NOT NULL,
	attempts integer NOT NULL,
	reason text NOT NULL,
	failed_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
	PRIMARY KEY (node_name, write_id)
);
SELECT pg_catalog.pg_extension_config_dump('ringshard.dead_letters', '');
-- from extension/80_cluster.sql
CREATE TABLE ringshard.transaction_records (
	gid text PRIMARY KEY,
	node_name text NOT NULL,
	recorded_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
CREATE INDEX ON ringshard.transaction_records (node_name);

-- Queued writes.  1.1 replays a write as the role that made it, which 1.0
-- did not record: a 1.0 write cannot be replayed, and becomes a dead letter,
-- to be applied by hand.  Its writer is ringshard_admin, a role that cannot
-- log in, so that nothing ever replays it as anyone.
DO $queue$
DECLARE
	moved bigint;
	tables text;
	nodes text;
BEGIN
	INSERT INTO ringshard.dead_letters (write_id, node_name, table_name, writer, payload, queued_at, attempts, reason)
	SELECT pg_catalog.gen_random_uuid(), q.node_name, q.table_name, 'ringshard_admin'::regrole, q.payload, q.queued_at,
	       q.attempts,
	       format('queued by ringshard 1.0 (queue id %s), which did not record the role that wrote it, so 1.1 cannot replay it; insert the row on node "%s" by hand (its writer here is a placeholder)%s',
	              q.id, q.node_name, coalesce('; last error under 1.0: ' || q.last_error, ''))
	  FROM ringshard.write_queue q ORDER BY q.id;
	GET DIAGNOSTICS moved = ROW_COUNT;
	IF moved > 0 THEN
		-- as in 1.1, a node that misses a write is down for reads until it is dealt with
		UPDATE ringshard.nodes n SET is_up = false
		 WHERE n.is_up AND EXISTS (SELECT FROM ringshard.dead_letters l WHERE l.node_name = n.node_name);
		SELECT string_agg(DISTINCT q.table_name::text, ', '), string_agg(DISTINCT format('"%s"', q.node_name), ', ')
		  INTO tables, nodes FROM ringshard.write_queue q;
		RAISE WARNING '% writes queued under ringshard 1.0 are dead letters now: they were not delivered to their nodes', moved
			USING DETAIL = format('1.1 replays a queued write as the role that made it, and 1.0 did not record it. Tables: %s. Nodes, marked down for reads until their dead letters are dealt with: %s.', tables, nodes),
			      HINT = 'See SELECT * FROM ringshard.dead_letters; insert each row on its node by hand (INSERT INTO table SELECT * FROM json_populate_record(NULL::table, payload) there), then delete the dead letter; the watchdog marks the node up again.';
	END IF;
END
$queue$;
-- (A table leaves the extension before it is dropped: that also takes it out
-- of the tables pg_dump saves the rows of, which DROP TABLE alone does not.)
DROP VIEW ringshard.write_queue_status;
ALTER EXTENSION ringshard DROP SEQUENCE ringshard.write_queue_id_seq;
ALTER EXTENSION ringshard DROP TABLE ringshard.write_queue;
DROP TABLE ringshard.write_queue;
-- from extension/82_write_queue.sql
CREATE TABLE ringshard.write_queue (
	write_id uuid NOT NULL,
	ordinal bigserial NOT NULL,
	node_name text NOT NULL,
	table_name regclass NOT NULL,
	writer regrole NOT NULL,
	payload json NOT NULL,
	queued_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
	attempts integer NOT NULL DEFAULT 0,
	last_error text,
	PRIMARY KEY (node_name, write_id)
);
CREATE INDEX ON ringshard.write_queue (node_name, ordinal);
CREATE INDEX ON ringshard.write_queue (table_name);
SELECT pg_catalog.pg_extension_config_dump('ringshard.write_queue', '');
SELECT pg_catalog.pg_extension_config_dump('ringshard.write_queue_ordinal_seq', '');

-- Workers: 1.1 delivers each queued write exactly once in a two-phase
-- transaction, with no record on the worker.
ALTER EXTENSION ringshard DROP TABLE ringshard.replayed_writes;
DROP TABLE ringshard.replayed_writes;


-- extension/upgrade/1.0--1.1/30_functions.sql
-- Functions: the helpers move to schema ringshard_internal (moved, not
-- dropped, so that the triggers and event triggers that call them follow);
-- what 1.1 removed, and what it returns differently, is dropped; then
-- 50_definitions.sql gives every function, view and comment its 1.1 text.
-- The routing functions that user indexes, generated columns or views may
-- use (ring_token, partition_for, shard_for, replicas_for, nodes_for, ...)
-- are replaced in place there; only their character overloads go.

ALTER FUNCTION ringshard.check_name(text, text) SET SCHEMA ringshard_internal;
ALTER FUNCTION ringshard.check_weight(float8) SET SCHEMA ringshard_internal;
ALTER FUNCTION ringshard.column_attnum(regclass, name) SET SCHEMA ringshard_internal;
ALTER FUNCTION ringshard.count_topology_change() SET SCHEMA ringshard_internal;
ALTER FUNCTION ringshard.ensure_node(text, text) SET SCHEMA ringshard_internal;
ALTER FUNCTION ringshard.follow_renamed_columns() SET SCHEMA ringshard_internal;
ALTER FUNCTION ringshard.forget_dropped_tables() SET SCHEMA ringshard_internal;
ALTER FUNCTION ringshard.forget_unused_nodes() SET SCHEMA ringshard_internal;
ALTER FUNCTION ringshard.invalidate_topology_cache() SET SCHEMA ringshard_internal;
ALTER FUNCTION ringshard.lock_node(text) SET SCHEMA ringshard_internal;
ALTER FUNCTION ringshard.lock_partition_map(text) SET SCHEMA ringshard_internal;
ALTER FUNCTION ringshard.lock_ring(text) SET SCHEMA ringshard_internal;
ALTER FUNCTION ringshard.merge_builtin_ring() SET SCHEMA ringshard_internal;
ALTER FUNCTION ringshard.merge_cluster_state() SET SCHEMA ringshard_internal;
ALTER FUNCTION ringshard.node_value(text, text, text[], boolean) SET SCHEMA ringshard_internal;
ALTER FUNCTION ringshard.partition_holders_of(json, text) SET SCHEMA ringshard_internal;
ALTER FUNCTION ringshard.placement_snapshot(regclass) SET SCHEMA ringshard_internal;
ALTER FUNCTION ringshard.resolve_annotation_columns() SET SCHEMA ringshard_internal;
ALTER FUNCTION ringshard.ring_move_plan(text[], float8[], integer, integer, text) SET SCHEMA ringshard_internal;
ALTER FUNCTION ringshard.topology_snapshot() SET SCHEMA ringshard_internal;

-- char(n) keys resolve to the text overloads in 1.1 (their padding dropped).
-- A user object that calls one of these keeps the update from running, with
-- PostgreSQL's dependency error: change it to call the text overload first.
DROP FUNCTION pg_catalog.ring_token(character);
DROP FUNCTION pg_catalog.shard_for(character);
DROP FUNCTION pg_catalog.shard_for(character, text);
DROP FUNCTION pg_catalog.replicas_for(character);
DROP FUNCTION pg_catalog.replicas_for(character, text);
DROP FUNCTION pg_catalog.replicas_for(character, text, integer);
DROP FUNCTION pg_catalog.read_node_for(character);
DROP FUNCTION pg_catalog.read_node_for(character, text);
DROP FUNCTION pg_catalog.partition_for(text, character);
DROP FUNCTION pg_catalog.nodes_for(text, character);
DROP FUNCTION pg_catalog.nodes_for(text, character, text);
DROP FUNCTION ringshard.proposed_replicas(character, text, text, text, float8);

-- Removed in 1.1 (docs/upgrading.md#functions-and-settings).  route_write,
-- the trigger of 1.0's distributed tables, goes once they are converted
-- (70_distributed_tables.sql).
DROP FUNCTION ringshard.rows_per_node(regclass);
DROP FUNCTION ringshard.table_skew(regclass, float8);
DROP FUNCTION ringshard.ring_skew(text, float8);
DROP FUNCTION ringshard.ring_balance_summary(text);
DROP FUNCTION ringshard.prune_replayed_writes(interval);
DROP FUNCTION ringshard.reads_here(record, text[]);
DROP FUNCTION ringshard.adopt_distributed_table(text, json, name, text, text, text, name);

-- 1.1 returns something else (a text saying what was done, a count, the
-- two_phase_commit column): CREATE OR REPLACE cannot change that.
DROP FUNCTION ringshard.create_ring(text, integer, integer, text);
DROP FUNCTION ringshard.drop_ring(text);
DROP FUNCTION ringshard.set_replication_factor(text, integer);
DROP FUNCTION ringshard.add_node(text, text, text, float8);
DROP FUNCTION ringshard.remove_node(text, text);
DROP FUNCTION ringshard.set_node_weight(text, float8, text);
DROP FUNCTION ringshard.set_node_address(text, text);
DROP FUNCTION ringshard.mark_node_down(text);
DROP FUNCTION ringshard.mark_node_up(text);
DROP FUNCTION ringshard.create_partition_map(text);
DROP FUNCTION ringshard.drop_partition_map(text);
DROP FUNCTION ringshard.assign_partitions(text, integer, integer, text);
DROP FUNCTION ringshard.unassign_partitions(text, integer, integer, text);
DROP FUNCTION ringshard.distribute_table(regclass, name, text);
DROP FUNCTION ringshard.distribute_table_by_partition(regclass, name, text, text, name);
DROP FUNCTION ringshard.undistribute_table(regclass);
DROP FUNCTION ringshard.node_health();
DROP FUNCTION ringshard.push_table_definition(regclass);
DROP FUNCTION ringshard.create_distributed_table(regclass);
DROP FUNCTION ringshard.install_plproxy_bridge();

-- Views whose columns changed (write_queue_status went with its table).
DROP VIEW ringshard.rebalance_status;


-- extension/upgrade/1.0--1.1/50_definitions.sql
-- Every function, procedure, view and comment of 1.1, from the install
-- script's own text.
-- from extension/00_setup.sql
COMMENT ON SCHEMA ringshard IS 'ringshard administration and catalog';
COMMENT ON SCHEMA ringshard_internal IS 'ringshard''s internal helpers, called by its administration functions and triggers';
-- from extension/05_version.sql
CREATE OR REPLACE FUNCTION ringshard.version(OUT sql_version text, OUT library_version text,
								  OUT postgresql text, OUT build_options text)
	RETURNS record
	AS 'MODULE_PATHNAME', 'ringshard_version' LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION ringshard.version() IS
	'the extension''s SQL version in this database (extversion), the shared library''s version, the PostgreSQL it was built for, and its build options';
-- from extension/10_ringtoken.sql
CREATE OR REPLACE FUNCTION pg_catalog.ringtoken_in(cstring) RETURNS ringtoken
	AS 'MODULE_PATHNAME', 'ringtoken_in'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pg_catalog.ringtoken_in(cstring) IS
	'input function of ringtoken: decimal or 0x hexadecimal, 0 .. 18446744073709551615';
CREATE OR REPLACE FUNCTION pg_catalog.ringtoken_out(ringtoken) RETURNS cstring
	AS 'MODULE_PATHNAME', 'ringtoken_out'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pg_catalog.ringtoken_out(ringtoken) IS
	'output function of ringtoken: decimal';
CREATE OR REPLACE FUNCTION pg_catalog.ringtoken_recv(internal) RETURNS ringtoken
	AS 'MODULE_PATHNAME', 'ringtoken_recv'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pg_catalog.ringtoken_recv(internal) IS
	'binary input function of ringtoken: 8 bytes, big-endian';
CREATE OR REPLACE FUNCTION pg_catalog.ringtoken_send(ringtoken) RETURNS bytea
	AS 'MODULE_PATHNAME', 'ringtoken_send'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pg_catalog.ringtoken_send(ringtoken) IS
	'binary output function of ringtoken: 8 bytes, big-endian';
COMMENT ON TYPE pg_catalog.ringtoken IS
	'position on a hash ring: unsigned 64-bit integer, 0 .. 18446744073709551615';
CREATE OR REPLACE FUNCTION pg_catalog.ringtoken_eq(ringtoken, ringtoken) RETURNS boolean
	AS 'MODULE_PATHNAME', 'ringtoken_eq'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
COMMENT ON FUNCTION pg_catalog.ringtoken_eq(ringtoken, ringtoken) IS
	'implementation of = for ringtoken';
CREATE OR REPLACE FUNCTION pg_catalog.ringtoken_ne(ringtoken, ringtoken) RETURNS boolean
	AS 'MODULE_PATHNAME', 'ringtoken_ne'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
COMMENT ON FUNCTION pg_catalog.ringtoken_ne(ringtoken, ringtoken) IS
	'implementation of <> for ringtoken';
CREATE OR REPLACE FUNCTION pg_catalog.ringtoken_lt(ringtoken, ringtoken) RETURNS boolean
	AS 'MODULE_PATHNAME', 'ringtoken_lt'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
COMMENT ON FUNCTION pg_catalog.ringtoken_lt(ringtoken, ringtoken) IS
	'implementation of < for ringtoken';
CREATE OR REPLACE FUNCTION pg_catalog.ringtoken_le(ringtoken, ringtoken) RETURNS boolean
	AS 'MODULE_PATHNAME', 'ringtoken_le'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
COMMENT ON FUNCTION pg_catalog.ringtoken_le(ringtoken, ringtoken) IS
	'implementation of <= for ringtoken';
CREATE OR REPLACE FUNCTION pg_catalog.ringtoken_gt(ringtoken, ringtoken) RETURNS boolean
	AS 'MODULE_PATHNAME', 'ringtoken_gt'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
COMMENT ON FUNCTION pg_catalog.ringtoken_gt(ringtoken, ringtoken) IS
	'implementation of > for ringtoken';
CREATE OR REPLACE FUNCTION pg_catalog.ringtoken_ge(ringtoken, ringtoken) RETURNS boolean
	AS 'MODULE_PATHNAME', 'ringtoken_ge'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
COMMENT ON FUNCTION pg_catalog.ringtoken_ge(ringtoken, ringtoken) IS
	'implementation of >= for ringtoken';
COMMENT ON OPERATOR pg_catalog.= (ringtoken, ringtoken) IS 'equal';
COMMENT ON OPERATOR pg_catalog.<> (ringtoken, ringtoken) IS 'not equal';
COMMENT ON OPERATOR pg_catalog.< (ringtoken, ringtoken) IS 'less than';
COMMENT ON OPERATOR pg_catalog.<= (ringtoken, ringtoken) IS 'less than or equal';
COMMENT ON OPERATOR pg_catalog.> (ringtoken, ringtoken) IS 'greater than';
COMMENT ON OPERATOR pg_catalog.>= (ringtoken, ringtoken) IS 'greater than or equal';
CREATE OR REPLACE FUNCTION pg_catalog.ringtoken_cmp(ringtoken, ringtoken) RETURNS integer
	AS 'MODULE_PATHNAME', 'ringtoken_cmp'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
COMMENT ON FUNCTION pg_catalog.ringtoken_cmp(ringtoken, ringtoken) IS
	'btree comparison function of ringtoken: -1, 0 or 1 in unsigned order';
CREATE OR REPLACE FUNCTION pg_catalog.ringtoken_sortsupport(internal) RETURNS void
	AS 'MODULE_PATHNAME', 'ringtoken_sortsupport'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pg_catalog.ringtoken_sortsupport(internal) IS
	'btree sort support function of ringtoken';
CREATE OR REPLACE FUNCTION pg_catalog.ringtoken_hash(ringtoken) RETURNS integer
	AS 'MODULE_PATHNAME', 'ringtoken_hash'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pg_catalog.ringtoken_hash(ringtoken) IS
	'hash function of ringtoken (32-bit hash of its 64 bits)';
CREATE OR REPLACE FUNCTION pg_catalog.ringtoken_hash_extended(ringtoken, bigint) RETURNS bigint
	AS 'MODULE_PATHNAME', 'ringtoken_hash_extended'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pg_catalog.ringtoken_hash_extended(ringtoken, bigint) IS
	'extended hash function of ringtoken (64-bit hash of its 64 bits with a seed)';
CREATE OR REPLACE FUNCTION pg_catalog.ringtoken_smaller(ringtoken, ringtoken) RETURNS ringtoken
	AS 'MODULE_PATHNAME', 'ringtoken_smaller'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pg_catalog.ringtoken_smaller(ringtoken, ringtoken) IS
	'smaller of two ringtokens (transition function of min)';
CREATE OR REPLACE FUNCTION pg_catalog.ringtoken_larger(ringtoken, ringtoken) RETURNS ringtoken
	AS 'MODULE_PATHNAME', 'ringtoken_larger'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pg_catalog.ringtoken_larger(ringtoken, ringtoken) IS
	'larger of two ringtokens (transition function of max)';
COMMENT ON AGGREGATE pg_catalog.min(ringtoken) IS
	'minimum value of all ringtoken input values';
COMMENT ON AGGREGATE pg_catalog.max(ringtoken) IS
	'maximum value of all ringtoken input values';
CREATE OR REPLACE FUNCTION pg_catalog.ringtoken_from_numeric(numeric) RETURNS ringtoken
	AS 'MODULE_PATHNAME', 'ringtoken_from_numeric'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pg_catalog.ringtoken_from_numeric(numeric) IS
	'convert a whole numeric from 0 to 18446744073709551615 to ringtoken';
CREATE OR REPLACE FUNCTION pg_catalog.ringtoken_to_numeric(ringtoken) RETURNS numeric
	AS 'MODULE_PATHNAME', 'ringtoken_to_numeric'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pg_catalog.ringtoken_to_numeric(ringtoken) IS
	'convert ringtoken to numeric exactly';
CREATE OR REPLACE FUNCTION pg_catalog.ringtoken_from_int8(bigint) RETURNS ringtoken
	AS 'MODULE_PATHNAME', 'ringtoken_from_int8'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pg_catalog.ringtoken_from_int8(bigint) IS
	'reinterpret the 64 bits of a bigint as ringtoken (two''s complement: -1 becomes 18446744073709551615)';
CREATE OR REPLACE FUNCTION pg_catalog.ringtoken_to_int8(ringtoken) RETURNS bigint
	AS 'MODULE_PATHNAME', 'ringtoken_to_int8'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pg_catalog.ringtoken_to_int8(ringtoken) IS
	'reinterpret the 64 bits of a ringtoken as bigint (two''s complement: 18446744073709551615 becomes -1)';
CREATE OR REPLACE FUNCTION pg_catalog.ringtoken_from_int4(integer) RETURNS ringtoken
	AS 'MODULE_PATHNAME', 'ringtoken_from_int4'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pg_catalog.ringtoken_from_int4(integer) IS
	'convert integer to ringtoken as integer -> bigint -> ringtoken does (-1 becomes 18446744073709551615)';
-- from extension/20_catalog.sql
CREATE OR REPLACE FUNCTION ringshard.address_is_safe(address text) RETURNS boolean
	AS 'MODULE_PATHNAME', 'ringshard_address_is_safe'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard.address_is_safe(text) IS
	'true if a node address (host:port or libpq connection string) parses and carries no password';
COMMENT ON TABLE ringshard.rings IS 'consistent hash rings: algorithm, vnodes per unit weight, replication factor';
CREATE OR REPLACE FUNCTION ringshard.fdw_handler() RETURNS fdw_handler
	AS 'MODULE_PATHNAME', 'ringshard_fdw_handler' LANGUAGE C VOLATILE PARALLEL UNSAFE STRICT;
COMMENT ON FUNCTION ringshard.fdw_handler() IS 'the handler of the foreign-data wrapper ringshard';
CREATE OR REPLACE FUNCTION ringshard.fdw_validator(text[], oid) RETURNS void
	AS 'MODULE_PATHNAME', 'ringshard_fdw_validator' LANGUAGE C VOLATILE PARALLEL UNSAFE STRICT;
COMMENT ON FUNCTION ringshard.fdw_validator(text[], oid) IS
	'validates options: libpq options without credentials on nodes, user/password on user mappings';
COMMENT ON FOREIGN DATA WRAPPER ringshard IS 'ringshard nodes (servers) and distributed tables (foreign tables of server ringshard_cluster)';
COMMENT ON SERVER ringshard_cluster IS 'the server of distributed tables: their rows live on the nodes of their ring or partition map';
CREATE OR REPLACE FUNCTION ringshard.address_options(address text) RETURNS TABLE (option text, value text)
	AS 'MODULE_PATHNAME', 'ringshard_address_options' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard.address_options(text) IS
	'the foreign-server options of a node address (host:port or a libpq connection string); credentials are refused';
CREATE OR REPLACE FUNCTION ringshard.server_address(server name) RETURNS text
	AS 'MODULE_PATHNAME', 'ringshard_server_address' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard.server_address(name) IS 'a node server''s options as an address: host:port when that is all, else a connection string';
COMMENT ON TABLE ringshard.nodes IS
	'nodes with their health; a node with an address has a foreign server (server_name) whose options are its address';
CREATE OR REPLACE FUNCTION ringshard.node_for_address(address text) RETURNS text
	LANGUAGE plpgsql STABLE PARALLEL UNSAFE STRICT SET search_path = pg_catalog, ringshard, pg_temp AS $$
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
	 WHERE (SELECT array_agg(x ORDER BY x) FROM unnest(s.srvoptions) x) = wanted
	 ORDER BY n.node_name = address DESC, n.node_name LIMIT 1;
	IF found IS NULL THEN
		SELECT n.node_name INTO found FROM ringshard.nodes n WHERE n.server_name IS NULL AND n.node_name = address;
	END IF;
	RETURN found;
END
$$;
COMMENT ON FUNCTION ringshard.node_for_address(text) IS
	'the node an address names: the one whose server has the address''s options, else the node without an address of that name';
COMMENT ON TABLE ringshard.ring_members IS 'which nodes are on which ring, with their weight';
COMMENT ON TABLE ringshard.partition_maps IS 'maps of the 256 partitions to nodes';
COMMENT ON TABLE ringshard.partition_assignments IS 'inclusive partition ranges held by nodes; a partition held by several nodes is replicated';
COMMENT ON TABLE ringshard.distributed_tables IS 'tables annotated with a sharding key and the ring or partition map that places their rows';
CREATE OR REPLACE FUNCTION ringshard_internal.invalidate_topology_cache() RETURNS trigger
	AS 'MODULE_PATHNAME', 'ringshard_invalidate_topology_cache'
	LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION ringshard_internal.invalidate_topology_cache() IS
	'trigger: makes every backend rebuild its rings and maps from its next transaction';
CREATE OR REPLACE FUNCTION ringshard_internal.merge_builtin_ring() RETURNS trigger
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
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
-- from extension/30_routing.sql
CREATE OR REPLACE FUNCTION pg_catalog.ring_token(key text) RETURNS ringtoken
	AS 'MODULE_PATHNAME', 'ringshard_ring_token' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE OR REPLACE FUNCTION pg_catalog.ring_token(key anyelement) RETURNS ringtoken
	AS 'MODULE_PATHNAME', 'ringshard_ring_token' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pg_catalog.ring_token(text) IS
	'MurmurHash3_x64_128 h1 (seed 0) of the key''s UTF-8 bytes, as an unsigned ring token';
COMMENT ON FUNCTION pg_catalog.ring_token(anyelement) IS
	'MurmurHash3_x64_128 h1 (seed 0) of the key''s canonical bytes (docs/routing.md §1; see ringshard.key_bytes), as an unsigned ring token';
CREATE OR REPLACE FUNCTION pg_catalog.shard_for(key text) RETURNS text
	AS 'MODULE_PATHNAME', 'ringshard_shard_for' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE OR REPLACE FUNCTION pg_catalog.shard_for(key anyelement) RETURNS text
	AS 'MODULE_PATHNAME', 'ringshard_shard_for' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE OR REPLACE FUNCTION pg_catalog.shard_for(key text, ring text) RETURNS text
	AS 'MODULE_PATHNAME', 'ringshard_shard_for' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE OR REPLACE FUNCTION pg_catalog.shard_for(key anyelement, ring text) RETURNS text
	AS 'MODULE_PATHNAME', 'ringshard_shard_for' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pg_catalog.shard_for(text) IS 'the node that owns the key on ring ''default''';
COMMENT ON FUNCTION pg_catalog.shard_for(anyelement) IS 'the node that owns the key on ring ''default''';
COMMENT ON FUNCTION pg_catalog.shard_for(text, text) IS 'the node that owns the key on the named ring';
COMMENT ON FUNCTION pg_catalog.shard_for(anyelement, text) IS 'the node that owns the key on the named ring';
CREATE OR REPLACE FUNCTION pg_catalog.replicas_for(key text) RETURNS text[]
	AS 'MODULE_PATHNAME', 'ringshard_replicas_for' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE OR REPLACE FUNCTION pg_catalog.replicas_for(key anyelement) RETURNS text[]
	AS 'MODULE_PATHNAME', 'ringshard_replicas_for' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE OR REPLACE FUNCTION pg_catalog.replicas_for(key text, ring text) RETURNS text[]
	AS 'MODULE_PATHNAME', 'ringshard_replicas_for' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE OR REPLACE FUNCTION pg_catalog.replicas_for(key anyelement, ring text) RETURNS text[]
	AS 'MODULE_PATHNAME', 'ringshard_replicas_for' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE OR REPLACE FUNCTION pg_catalog.replicas_for(key text, ring text, n integer) RETURNS text[]
	AS 'MODULE_PATHNAME', 'ringshard_replicas_for' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE OR REPLACE FUNCTION pg_catalog.replicas_for(key anyelement, ring text, n integer) RETURNS text[]
	AS 'MODULE_PATHNAME', 'ringshard_replicas_for' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pg_catalog.replicas_for(text) IS 'the key''s replica set on ring ''default'': owner first, replication_factor distinct nodes';
COMMENT ON FUNCTION pg_catalog.replicas_for(anyelement) IS 'the key''s replica set on ring ''default'': owner first, replication_factor distinct nodes';
COMMENT ON FUNCTION pg_catalog.replicas_for(text, text) IS 'the key''s replica set on the named ring: owner first, replication_factor distinct nodes';
COMMENT ON FUNCTION pg_catalog.replicas_for(anyelement, text) IS 'the key''s replica set on the named ring: owner first, replication_factor distinct nodes';
COMMENT ON FUNCTION pg_catalog.replicas_for(text, text, integer) IS 'the first n distinct nodes clockwise from the key, owner first: n overrides the ring''s replication factor (more or fewer), capped at the ring''s node count';
COMMENT ON FUNCTION pg_catalog.replicas_for(anyelement, text, integer) IS 'the first n distinct nodes clockwise from the key, owner first: n overrides the ring''s replication factor (more or fewer), capped at the ring''s node count';
CREATE OR REPLACE FUNCTION pg_catalog.read_node_for(key text) RETURNS text
	AS 'MODULE_PATHNAME', 'ringshard_read_node_for' LANGUAGE C VOLATILE STRICT PARALLEL SAFE;
CREATE OR REPLACE FUNCTION pg_catalog.read_node_for(key anyelement) RETURNS text
	AS 'MODULE_PATHNAME', 'ringshard_read_node_for' LANGUAGE C VOLATILE STRICT PARALLEL SAFE;
CREATE OR REPLACE FUNCTION pg_catalog.read_node_for(key text, ring text) RETURNS text
	AS 'MODULE_PATHNAME', 'ringshard_read_node_for' LANGUAGE C VOLATILE STRICT PARALLEL SAFE;
CREATE OR REPLACE FUNCTION pg_catalog.read_node_for(key anyelement, ring text) RETURNS text
	AS 'MODULE_PATHNAME', 'ringshard_read_node_for' LANGUAGE C VOLATILE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pg_catalog.read_node_for(text) IS 'a random healthy node of the key''s replica set on ring ''default'', for reads';
COMMENT ON FUNCTION pg_catalog.read_node_for(anyelement) IS 'a random healthy node of the key''s replica set on ring ''default'', for reads';
COMMENT ON FUNCTION pg_catalog.read_node_for(text, text) IS 'a random healthy node of the key''s replica set on the named ring, for reads';
COMMENT ON FUNCTION pg_catalog.read_node_for(anyelement, text) IS 'a random healthy node of the key''s replica set on the named ring, for reads';
CREATE OR REPLACE FUNCTION pg_catalog.partition_for(keyspace text, key text) RETURNS integer
	AS 'MODULE_PATHNAME', 'ringshard_partition_for' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE OR REPLACE FUNCTION pg_catalog.partition_for(keyspace text, key anyelement) RETURNS integer
	AS 'MODULE_PATHNAME', 'ringshard_partition_for' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pg_catalog.partition_for(text, text) IS 'the key''s partition 0..255: SHA-1 of keyspace-key (UTF-8), first 4 bytes big-endian, mod 256';
COMMENT ON FUNCTION pg_catalog.partition_for(text, anyelement) IS 'the key''s partition 0..255: SHA-1 of keyspace-key (canonical bytes), first 4 bytes big-endian, mod 256';
CREATE OR REPLACE FUNCTION pg_catalog.nodes_for(keyspace text, key text) RETURNS text[]
	AS 'MODULE_PATHNAME', 'ringshard_nodes_for' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE OR REPLACE FUNCTION pg_catalog.nodes_for(keyspace text, key anyelement) RETURNS text[]
	AS 'MODULE_PATHNAME', 'ringshard_nodes_for' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE OR REPLACE FUNCTION pg_catalog.nodes_for(keyspace text, key text, map text) RETURNS text[]
	AS 'MODULE_PATHNAME', 'ringshard_nodes_for' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE OR REPLACE FUNCTION pg_catalog.nodes_for(keyspace text, key anyelement, map text) RETURNS text[]
	AS 'MODULE_PATHNAME', 'ringshard_nodes_for' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pg_catalog.nodes_for(text, text) IS 'every holder of the key''s partition in map ''default''; an error for a gap';
COMMENT ON FUNCTION pg_catalog.nodes_for(text, anyelement) IS 'every holder of the key''s partition in map ''default''; an error for a gap';
COMMENT ON FUNCTION pg_catalog.nodes_for(text, text, text) IS 'every holder of the key''s partition in the named map; an error for a gap';
COMMENT ON FUNCTION pg_catalog.nodes_for(text, anyelement, text) IS 'every holder of the key''s partition in the named map; an error for a gap';
CREATE OR REPLACE FUNCTION ringshard.partition_nodes(partition integer, map text DEFAULT 'default') RETURNS text[]
	AS 'MODULE_PATHNAME', 'ringshard_partition_nodes' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard.partition_nodes(integer, text) IS 'the holders of one partition (empty for a gap)';
CREATE OR REPLACE FUNCTION ringshard.key_bytes(key text) RETURNS bytea
	AS 'MODULE_PATHNAME', 'ringshard_key_bytes' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE OR REPLACE FUNCTION ringshard.key_bytes(key anyelement) RETURNS bytea
	AS 'MODULE_PATHNAME', 'ringshard_key_bytes' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard.key_bytes(text) IS
	'the bytes a text key routes by: its UTF-8 encoding (docs/routing.md §1)';
COMMENT ON FUNCTION ringshard.key_bytes(anyelement) IS
	'the canonical bytes a key routes by (docs/routing.md §1): numeric normalized, char(n) trimmed, dates and timestamps in ISO form (timestamptz in UTC with +00; infinity and -infinity), uuid lowercase, boolean t or f, text in UTF-8; ring_token and partition_for hash exactly these';
-- from extension/40_rings.sql
CREATE OR REPLACE FUNCTION ringshard.validate_ring(ring text) RETURNS integer
	AS 'MODULE_PATHNAME', 'ringshard_validate_ring' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard.validate_ring(text) IS
	'builds the ring as the catalog now describes it; returns its number of points or raises the reason it cannot be built';
CREATE OR REPLACE FUNCTION ringshard_internal.check_name(kind text, name text) RETURNS void
	AS 'MODULE_PATHNAME', 'ringshard_check_name' LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION ringshard_internal.check_name(text, text) IS 'raises unless a ring, map or node name is non-empty and at most 1024 bytes';
CREATE OR REPLACE FUNCTION ringshard_internal.first_names(kind text) RETURNS text
	LANGUAGE sql STABLE PARALLEL SAFE SET search_path = pg_catalog, ringshard AS $$
	SELECT string_agg(s.name, ', ' ORDER BY s.name)
	       || CASE WHEN max(s.total) > 10 THEN ' and ' || (max(s.total) - 10) || ' more' ELSE '' END
	  FROM (SELECT n.name, count(*) OVER () AS total
	          FROM (SELECT r.ring_name COLLATE "C" AS name FROM ringshard.rings r WHERE kind = 'ring'
	                UNION ALL
	                SELECT p.map_name COLLATE "C" FROM ringshard.partition_maps p WHERE kind = 'partition map') n
	         ORDER BY 1 LIMIT 10) s
$$;
COMMENT ON FUNCTION ringshard_internal.first_names(text) IS
	'the first ten names of rings (kind ''ring'') or partition maps (''partition map''), for error hints';
CREATE OR REPLACE FUNCTION ringshard_internal.lock_ring(ring text) RETURNS ringshard.rings
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard AS $$
DECLARE
	locked ringshard.rings;
BEGIN
	PERFORM ringshard_internal.check_name('ring', ring);
	SELECT * INTO locked FROM ringshard.rings r WHERE r.ring_name = ring FOR UPDATE;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'ring "%" does not exist', ring
			USING ERRCODE = 'undefined_object',
			      HINT = coalesce('Existing rings: ' || ringshard_internal.first_names('ring') || '. ', '')
			             || 'Create a ring with ringshard.create_ring().';
	END IF;
	RETURN locked;
END
$$;
COMMENT ON FUNCTION ringshard_internal.lock_ring(text) IS 'locks a ring''s catalog row for a change; raises if the ring does not exist';
CREATE OR REPLACE FUNCTION ringshard.create_ring(ring text, vnodes integer DEFAULT 256,
									  replication_factor integer DEFAULT 1,
									  algorithm text DEFAULT 'murmur3') RETURNS text
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard AS $$
BEGIN
	PERFORM ringshard_internal.check_name('ring', ring);
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
	RETURN format('ring "%s" created: %s, %s, %s cop%s of each key', ring, algorithm,
	              CASE WHEN algorithm = 'ketama' THEN 'points placed as libketama places them (160 per node at equal weights)'
	                   ELSE vnodes || ' points per unit of weight' END,
	              replication_factor, CASE WHEN replication_factor = 1 THEN 'y' ELSE 'ies' END);
END
$$;
COMMENT ON FUNCTION ringshard.create_ring(text, integer, integer, text) IS
	'creates an empty ring: vnodes points per unit weight, replication factor, algorithm murmur3 or ketama';
CREATE OR REPLACE FUNCTION ringshard_internal.forget_unused_nodes() RETURNS void
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	gone record;
BEGIN
	FOR gone IN
		DELETE FROM ringshard.nodes n
		 WHERE NOT EXISTS (SELECT FROM ringshard.ring_members m WHERE m.node_name = n.node_name)
		   AND NOT EXISTS (SELECT FROM ringshard.partition_assignments a WHERE a.node_name = n.node_name)
		   AND NOT EXISTS (SELECT FROM ringshard.placements p JOIN ringshard.distributed_tables d ON d.table_name = p.table_name,
		                               json_array_elements(coalesce(p.snapshot->'members', p.snapshot->'assignments')) x
		                    WHERE x->>'node' = n.node_name)
		   AND NOT EXISTS (SELECT FROM ringshard.rebalance_progress r
		                    WHERE r.state <> 'done' AND n.node_name = ANY (ARRAY[r.source] || r.targets || r.deletes))
		RETURNING n.server_name
	LOOP
		-- Only a server ringshard made (of its wrapper, owned by
		-- ringshard_admin): the name in the catalog row could be anybody's.
		IF gone.server_name IS NOT NULL
		   AND EXISTS (SELECT FROM pg_catalog.pg_foreign_server s
		                 JOIN pg_catalog.pg_foreign_data_wrapper w ON w.oid OPERATOR(pg_catalog.=) s.srvfdw
		                WHERE s.srvname OPERATOR(pg_catalog.=) gone.server_name
		                  AND w.fdwname OPERATOR(pg_catalog.=) 'ringshard'
		                  AND s.srvowner OPERATOR(pg_catalog.=) 'ringshard_admin'::pg_catalog.regrole) THEN
			EXECUTE format('DROP SERVER IF EXISTS %I CASCADE', gone.server_name);
		END IF;
	END LOOP;
END
$$;
COMMENT ON FUNCTION ringshard_internal.forget_unused_nodes() IS
	'deletes nodes that are in no ring and no partition map and hold no distributed table''s rows (no placement or unfinished rebalance names them), with their foreign servers';
CREATE OR REPLACE FUNCTION ringshard_internal.set_server(node text, address text) RETURNS void
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	server name := (SELECT n.server_name FROM ringshard.nodes n WHERE n.node_name = node);
	wanted text;
	dropped text;
BEGIN
	SELECT string_agg(format('%I %L', o.option, o.value), ', ') INTO wanted FROM ringshard.address_options(address) o;
	IF server IS NULL THEN
		IF octet_length(node) > 63 THEN
			RAISE EXCEPTION 'node name "%" is too long for a node with an address', left(node, 64)
				USING ERRCODE = 'name_too_long',
				      DETAIL = 'A node with an address is a foreign server of the same name, at most 63 bytes.';
		END IF;
		IF EXISTS (SELECT FROM pg_catalog.pg_foreign_server s WHERE s.srvname = node) THEN
			RAISE EXCEPTION 'a foreign server named "%" already exists', node
				USING ERRCODE = 'duplicate_object',
				      HINT = 'Name the node differently, or drop that server.';
		END IF;
		EXECUTE format('CREATE SERVER %I FOREIGN DATA WRAPPER ringshard OPTIONS (%s)', node, wanted);
		IF pg_catalog.pg_has_role('ringshard_admin', 'MEMBER') THEN
			EXECUTE format('ALTER SERVER %I OWNER TO ringshard_admin', node);
		END IF;
		UPDATE ringshard.nodes n SET server_name = node WHERE n.node_name = node;
		RETURN;
	END IF;
	SELECT string_agg(format('DROP %I', split_part(o, '=', 1)), ', ') INTO dropped
	  FROM pg_catalog.pg_foreign_server s, unnest(s.srvoptions) o WHERE s.srvname = server;
	IF dropped IS NOT NULL THEN
		EXECUTE format('ALTER SERVER %I OPTIONS (%s)', server, dropped);
	END IF;
	EXECUTE format('ALTER SERVER %I OPTIONS (%s)', server,
		(SELECT string_agg(format('ADD %I %L', o.option, o.value), ', ') FROM ringshard.address_options(address) o));
END
$$;
COMMENT ON FUNCTION ringshard_internal.set_server(text, text) IS 'creates or changes the foreign server of a node from an address';
CREATE OR REPLACE FUNCTION ringshard.drop_ring(ring text) RETURNS text
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard AS $$
DECLARE
	members bigint;
	forgotten bigint;
	users text;
BEGIN
	PERFORM ringshard_internal.lock_ring(ring);
	SELECT string_agg(d.table_name::text, ', ' ORDER BY d.table_name::text) INTO users
	  FROM ringshard.distributed_tables d WHERE d.ring_name = ring;
	IF users IS NOT NULL THEN
		RAISE EXCEPTION 'cannot drop ring "%" because annotated tables use it', ring
			USING ERRCODE = 'dependent_objects_still_exist',
			      DETAIL = format('Tables placed by this ring: %s.', users),
			      HINT = 'Remove their annotation first with ringshard.undistribute_table().';
	END IF;
	SELECT count(*) INTO members FROM ringshard.ring_members m WHERE m.ring_name = ring;
	SELECT count(*) INTO forgotten FROM ringshard.nodes;
	DELETE FROM ringshard.rings r WHERE r.ring_name = ring;
	PERFORM ringshard_internal.forget_unused_nodes();
	forgotten := forgotten - (SELECT count(*) FROM ringshard.nodes);
	RETURN format('ring "%s" dropped with its %s member%s%s', ring, members, CASE WHEN members = 1 THEN '' ELSE 's' END,
	              CASE WHEN forgotten > 0 THEN format('; %s node%s in no ring or map any more forgotten', forgotten,
	                                                  CASE WHEN forgotten = 1 THEN '' ELSE 's' END) ELSE '' END);
END
$$;
COMMENT ON FUNCTION ringshard.drop_ring(text) IS 'drops a ring and its memberships; refused while annotated tables use it';
CREATE OR REPLACE FUNCTION ringshard.set_replication_factor(ring text, replication_factor integer) RETURNS text
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard AS $$
DECLARE
	previous integer;
	members integer;
BEGIN
	PERFORM ringshard_internal.lock_ring(ring);
	IF replication_factor IS NULL OR replication_factor NOT BETWEEN 1 AND 64 THEN
		RAISE EXCEPTION 'replication factor % is outside 1..64', coalesce(replication_factor::text, 'NULL')
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	SELECT r.replication_factor INTO previous FROM ringshard.rings r WHERE r.ring_name = ring;
	UPDATE ringshard.rings r SET replication_factor = set_replication_factor.replication_factor
	 WHERE r.ring_name = ring;
	-- Allowed (nodes may join later), but a replica set cannot hold more
	-- distinct nodes than the ring has: say so.  An empty ring routes nothing.
	SELECT count(*) INTO members FROM ringshard.ring_members m WHERE m.ring_name = ring;
	IF members > 0 AND members < replication_factor THEN
		RAISE WARNING 'ring "%" has % node%, fewer than its replication factor %', ring, members,
			CASE WHEN members = 1 THEN '' ELSE 's' END, replication_factor
			USING DETAIL = format('replicas_for() returns %s node%s per key until more nodes join.', members,
			                      CASE WHEN members = 1 THEN '' ELSE 's' END),
			      HINT = 'Add nodes with ringshard.add_node(node, address, ring).';
	END IF;
	RETURN format('ring "%s" keeps %s cop%s of each key (it kept %s)', ring, replication_factor,
	              CASE WHEN replication_factor = 1 THEN 'y' ELSE 'ies' END, previous);
END
$$;
COMMENT ON FUNCTION ringshard.set_replication_factor(text, integer) IS
	'changes how many distinct nodes hold each key of a ring; warns when the ring has fewer nodes than that (replica sets then hold every node)';
CREATE OR REPLACE FUNCTION ringshard_internal.check_weight(weight float8) RETURNS void
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard AS $$
BEGIN
	IF weight IS NULL OR NOT (weight > 0 AND weight < 'Infinity'::float8) THEN
		RAISE EXCEPTION 'weight % is not a finite number greater than zero', coalesce(weight::text, 'NULL')
			USING ERRCODE = 'invalid_parameter_value',
			      HINT = 'A node of weight w gets round(vnodes * w) points, at least one.';
	END IF;
END
$$;
COMMENT ON FUNCTION ringshard_internal.check_weight(float8) IS 'raises unless a weight is finite and greater than zero';
CREATE OR REPLACE FUNCTION ringshard_internal.ensure_node(node text, address text) RETURNS void
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	known ringshard.nodes;
BEGIN
	PERFORM ringshard_internal.check_name('node', node);
	SELECT * INTO known FROM ringshard.nodes n WHERE n.node_name = node FOR UPDATE;
	IF NOT FOUND THEN
		INSERT INTO ringshard.nodes (node_name) VALUES (node);
		IF address IS NOT NULL THEN
			PERFORM ringshard_internal.set_server(node, address);
		END IF;
	ELSIF address IS NOT NULL AND (known.server_name IS NULL OR
	      (SELECT array_agg(o.option || '=' || o.value ORDER BY o.option) FROM ringshard.address_options(address) o)
	      IS DISTINCT FROM
	      (SELECT array_agg(o ORDER BY o) FROM pg_catalog.pg_foreign_server s, unnest(s.srvoptions) o
	        WHERE s.srvname = known.server_name)) THEN
		RAISE EXCEPTION 'node "%" already exists %', node,
			CASE WHEN known.server_name IS NULL THEN 'without an address'
			     ELSE format('with address "%s"', ringshard.server_address(known.server_name)) END
			USING ERRCODE = 'duplicate_object',
			      HINT = 'Change its address with ringshard.set_node_address(), or leave the address out.';
	END IF;
END
$$;
COMMENT ON FUNCTION ringshard_internal.ensure_node(text, text) IS 'creates a node if it is new; raises if it exists with another address';
CREATE OR REPLACE FUNCTION ringshard.add_node(node text, address text DEFAULT NULL, ring text DEFAULT 'default',
								   weight float8 DEFAULT 1) RETURNS text
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard AS $$
DECLARE
	balance record;
BEGIN
	PERFORM ringshard_internal.check_name('ring', ring);
	PERFORM ringshard_internal.lock_ring(ring);
	PERFORM ringshard_internal.check_weight(weight);
	PERFORM ringshard_internal.ensure_node(node, address);
	IF EXISTS (SELECT FROM ringshard.ring_members m WHERE m.ring_name = ring AND m.node_name = node) THEN
		RAISE EXCEPTION 'node "%" is already on ring "%"', node, ring
			USING ERRCODE = 'duplicate_object',
			      HINT = 'Change its weight with ringshard.set_node_weight().';
	END IF;
	INSERT INTO ringshard.ring_members (ring_name, node_name, weight) VALUES (ring, node, weight);
	PERFORM ringshard.validate_ring(ring);
	SELECT b.points, b.share INTO balance FROM ringshard.ring_balance(ring) b WHERE b.node = add_node.node;
	RETURN format('node "%s" added to ring "%s" with weight %s: %s points, %s of the ring', node, ring, weight,
	              balance.points, to_char(balance.share * 100, 'FM990.0') || ' %');
END
$$;
COMMENT ON FUNCTION ringshard.add_node(text, text, text, float8) IS
	'adds a node (created if new) to a ring with a weight; its address is host:port or a libpq connection string without a password';
CREATE OR REPLACE FUNCTION ringshard.remove_node(node text, ring text DEFAULT 'default') RETURNS text
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	users text;
	holding text;
BEGIN
	PERFORM ringshard_internal.check_name('node', node);
	PERFORM ringshard_internal.lock_ring(ring);
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
	PERFORM ringshard_internal.forget_unused_nodes();
	-- In no ring or map now, yet kept: distributed tables' rows are still on it.
	IF EXISTS (SELECT FROM ringshard.nodes n WHERE n.node_name = node)
	   AND NOT EXISTS (SELECT FROM ringshard.ring_members m WHERE m.node_name = node)
	   AND NOT EXISTS (SELECT FROM ringshard.partition_assignments a WHERE a.node_name = node) THEN
		SELECT string_agg(p.table_name::text, ', ' ORDER BY p.table_name::text) INTO holding
		  FROM ringshard.placements p JOIN ringshard.distributed_tables d ON d.table_name = p.table_name
		 WHERE EXISTS (SELECT FROM json_array_elements(coalesce(p.snapshot->'members', p.snapshot->'assignments')) x
		                WHERE x->>'node' = node);
		RAISE NOTICE 'node "%" is in no ring or map now; it is kept until its rows have moved', node
			USING DETAIL = format('Rows of %s are laid out on it.', coalesce(holding, 'an unfinished rebalance')),
			      HINT = 'CALL ringshard.rebalance(table) for each of them: it copies the rows to their new replicas, deletes them on this node, and then forgets the node.';
	END IF;
	RETURN format('node "%s" removed from ring "%s"%s', node, ring,
	              CASE WHEN NOT EXISTS (SELECT FROM ringshard.nodes n WHERE n.node_name = node)
	                   THEN '; it is in no ring or map now and was forgotten'
	                   WHEN holding IS NOT NULL OR NOT EXISTS (SELECT FROM ringshard.ring_members m WHERE m.node_name = node)
	                        AND NOT EXISTS (SELECT FROM ringshard.partition_assignments a WHERE a.node_name = node)
	                   THEN '; it is kept until rebalance() has moved its rows'
	                   ELSE '' END);
END
$$;
COMMENT ON FUNCTION ringshard.remove_node(text, text) IS
	'removes a node from a ring; a node left in no ring and no map is forgotten once no distributed table''s rows are on it (after the rebalance that moves them)';
CREATE OR REPLACE FUNCTION ringshard.set_node_weight(node text, weight float8, ring text DEFAULT 'default') RETURNS text
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard AS $$
DECLARE
	previous float8;
	balance record;
BEGIN
	PERFORM ringshard_internal.check_name('node', node);
	PERFORM ringshard_internal.lock_ring(ring);
	PERFORM ringshard_internal.check_weight(weight);
	SELECT m.weight INTO previous FROM ringshard.ring_members m WHERE m.ring_name = ring AND m.node_name = node;
	UPDATE ringshard.ring_members m SET weight = set_node_weight.weight
	 WHERE m.ring_name = ring AND m.node_name = node;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'node "%" is not on ring "%"', node, ring
			USING ERRCODE = 'undefined_object';
	END IF;
	PERFORM ringshard.validate_ring(ring);
	SELECT b.points, b.share INTO balance FROM ringshard.ring_balance(ring) b WHERE b.node = set_node_weight.node;
	RETURN format('node "%s" on ring "%s": weight %s (it was %s), %s points, %s of the ring', node, ring, weight, previous,
	              balance.points, to_char(balance.share * 100, 'FM990.0') || ' %');
END
$$;
COMMENT ON FUNCTION ringshard.set_node_weight(text, float8, text) IS 'changes a node''s weight on a ring (points = round(vnodes * weight))';
CREATE OR REPLACE FUNCTION ringshard_internal.lock_node(node text) RETURNS void
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard AS $$
BEGIN
	PERFORM ringshard_internal.check_name('node', node);
	PERFORM FROM ringshard.nodes n WHERE n.node_name = node FOR UPDATE;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'node "%" does not exist', node
			USING ERRCODE = 'undefined_object',
			      HINT = 'List nodes in ringshard.nodes.';
	END IF;
END
$$;
COMMENT ON FUNCTION ringshard_internal.lock_node(text) IS 'locks a node''s catalog row; raises if the node does not exist';
CREATE OR REPLACE FUNCTION ringshard.set_node_address(node text, address text) RETURNS text
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	server name;
BEGIN
	PERFORM ringshard_internal.lock_node(node);
	IF address IS NOT NULL THEN
		PERFORM ringshard_internal.set_server(node, address);
		RETURN (SELECT format('node "%s" is at %s (server %I)', node, ringshard.server_address(n.server_name), n.server_name)
		          FROM ringshard.nodes n WHERE n.node_name = node);
	END IF;
	SELECT n.server_name INTO server FROM ringshard.nodes n WHERE n.node_name = node;
	UPDATE ringshard.nodes n SET server_name = NULL WHERE n.node_name = node;
	IF server IS NOT NULL THEN
		EXECUTE format('DROP SERVER IF EXISTS %I CASCADE', server);
	END IF;
	RETURN format('node "%s" has no address now%s', node,
	              CASE WHEN server IS NOT NULL THEN format('; its server %I and the server''s user mappings were dropped', server) ELSE '' END);
END
$$;
COMMENT ON FUNCTION ringshard.set_node_address(text, text) IS
	'changes the address of a node (its foreign server''s options; its user mappings stay), or with NULL drops it';
CREATE OR REPLACE FUNCTION ringshard.mark_node_down(node text) RETURNS text
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard AS $$
DECLARE
	was boolean;
BEGIN
	PERFORM ringshard_internal.lock_node(node);
	SELECT n.is_up INTO was FROM ringshard.nodes n WHERE n.node_name = node;
	UPDATE ringshard.nodes n SET is_up = false WHERE n.node_name = node;
	RETURN format('node "%s" is marked %s%s', node, 'down', CASE WHEN was IS NOT DISTINCT FROM false THEN ' (it was already)' ELSE '' END);
END
$$;
COMMENT ON FUNCTION ringshard.mark_node_down(text) IS 'read routing skips the node; ownership does not change';
CREATE OR REPLACE FUNCTION ringshard.mark_node_up(node text) RETURNS text
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard AS $$
DECLARE
	was boolean;
BEGIN
	PERFORM ringshard_internal.lock_node(node);
	SELECT n.is_up INTO was FROM ringshard.nodes n WHERE n.node_name = node;
	UPDATE ringshard.nodes n SET is_up = true WHERE n.node_name = node;
	RETURN format('node "%s" is marked %s%s', node, 'up', CASE WHEN was IS NOT DISTINCT FROM true THEN ' (it was already)' ELSE '' END);
END
$$;
COMMENT ON FUNCTION ringshard.mark_node_up(text) IS 'read routing uses the node again';
CREATE OR REPLACE FUNCTION ringshard.ring_points(ring text DEFAULT 'default')
	RETURNS TABLE (token ringtoken, node text, vnode integer)
	AS 'MODULE_PATHNAME', 'ringshard_ring_points' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard.ring_points(text) IS
	'every point of a ring in ring order: token, node, and the label index i of "{node}#vnode#{i}" (ketama: 4k+h)';
CREATE OR REPLACE FUNCTION ringshard.ring_balance(ring text DEFAULT 'default')
	RETURNS TABLE (node text, weight float8, points integer, owned_tokens numeric,
				   share float8, ideal_share float8, ratio float8)
	AS 'MODULE_PATHNAME', 'ringshard_ring_balance' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard.ring_balance(text) IS
	'per node: weight, points, exact tokens owned, share of the ring, ideal share (weight / total weight, 1/N when equal) and share / ideal';
-- from extension/50_partitions.sql
CREATE OR REPLACE FUNCTION ringshard_internal.lock_partition_map(map text) RETURNS void
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
BEGIN
	PERFORM ringshard_internal.check_name('partition map', map);
	PERFORM FROM ringshard.partition_maps p WHERE p.map_name = map FOR UPDATE;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'partition map "%" does not exist', map
			USING ERRCODE = 'undefined_object',
			      HINT = coalesce('Existing maps: ' || ringshard_internal.first_names('partition map') || '. ', '')
			             || 'Create a map with ringshard.create_partition_map().';
	END IF;
END
$$;
COMMENT ON FUNCTION ringshard_internal.lock_partition_map(text) IS 'locks a map''s catalog row for a change; raises if the map does not exist';
CREATE OR REPLACE FUNCTION ringshard.create_partition_map(map text) RETURNS text
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
BEGIN
	PERFORM ringshard_internal.check_name('partition map', map);
	IF EXISTS (SELECT FROM ringshard.partition_maps p WHERE p.map_name = map) THEN
		RAISE EXCEPTION 'partition map "%" already exists', map
			USING ERRCODE = 'duplicate_object';
	END IF;
	INSERT INTO ringshard.partition_maps (map_name) VALUES (map);
	RETURN format('partition map "%s" created; its 256 partitions are unassigned', map);
END
$$;
COMMENT ON FUNCTION ringshard.create_partition_map(text) IS 'creates an empty partition map (all 256 partitions are gaps)';
CREATE OR REPLACE FUNCTION ringshard.drop_partition_map(map text) RETURNS text
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	assignments bigint;
	users text;
BEGIN
	PERFORM ringshard_internal.lock_partition_map(map);
	SELECT string_agg(d.table_name::text, ', ' ORDER BY d.table_name::text) INTO users
	  FROM ringshard.distributed_tables d WHERE d.map_name = map;
	IF users IS NOT NULL THEN
		RAISE EXCEPTION 'cannot drop partition map "%" because annotated tables use it', map
			USING ERRCODE = 'dependent_objects_still_exist',
			      DETAIL = format('Tables placed by this map: %s.', users),
			      HINT = 'Remove their annotation first with ringshard.undistribute_table().';
	END IF;
	SELECT count(*) INTO assignments FROM ringshard.partition_assignments a WHERE a.map_name = map;
	DELETE FROM ringshard.partition_maps p WHERE p.map_name = map;
	PERFORM ringshard_internal.forget_unused_nodes();
	RETURN format('partition map "%s" dropped with its %s assignment%s', map, assignments, CASE WHEN assignments = 1 THEN '' ELSE 's' END);
END
$$;
COMMENT ON FUNCTION ringshard.drop_partition_map(text) IS 'drops a partition map; refused while annotated tables use it';
CREATE OR REPLACE FUNCTION ringshard.check_partition_range(partition_start integer, partition_end integer) RETURNS void
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
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
CREATE OR REPLACE FUNCTION ringshard.assign_partitions(node text, partition_start integer, partition_end integer,
											map text DEFAULT 'default') RETURNS text
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	merged_start integer := partition_start;
	merged_end integer := partition_end;
BEGIN
	PERFORM ringshard_internal.lock_partition_map(map);
	PERFORM ringshard.check_partition_range(partition_start, partition_end);
	PERFORM ringshard_internal.ensure_node(node, NULL);
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
	RETURN (SELECT format('node "%s" holds %s of map "%s": %s', node, sum(a.partition_end - a.partition_start + 1)::text || ' of 256 partitions',
	                map, string_agg(a.partition_start || '..' || a.partition_end, ', ' ORDER BY a.partition_start))
	          FROM ringshard.partition_assignments a WHERE a.map_name = map AND a.node_name = node HAVING count(*) > 0);
END
$$;
COMMENT ON FUNCTION ringshard.assign_partitions(text, integer, integer, text) IS
	'gives a node the partitions start..end (inclusive) of a map; several holders of a partition replicate it';
CREATE OR REPLACE FUNCTION ringshard.unassign_partitions(node text, partition_start integer, partition_end integer,
											  map text DEFAULT 'default') RETURNS text
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	held ringshard.partition_assignments;
	removed boolean := false;
BEGIN
	PERFORM ringshard_internal.check_name('node', node);
	PERFORM ringshard_internal.lock_partition_map(map);
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
	PERFORM ringshard_internal.forget_unused_nodes();
	RETURN coalesce((SELECT format('node "%s" holds %s of map "%s": %s', node, sum(a.partition_end - a.partition_start + 1)::text || ' of 256 partitions',
	                map, string_agg(a.partition_start || '..' || a.partition_end, ', ' ORDER BY a.partition_start))
	          FROM ringshard.partition_assignments a WHERE a.map_name = map AND a.node_name = node HAVING count(*) > 0),
	              format('node "%s" holds no partition of map "%s" now', node, map));
END
$$;
COMMENT ON FUNCTION ringshard.unassign_partitions(text, integer, integer, text) IS
	'takes the partitions start..end (inclusive) of a map away from a node, splitting its ranges as needed';
CREATE OR REPLACE FUNCTION ringshard.check_partition_map(map text DEFAULT 'default')
	RETURNS TABLE (kind text, partition_start integer, partition_end integer, nodes text[])
	AS 'MODULE_PATHNAME', 'ringshard_check_partition_map' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard.check_partition_map(text) IS
	'each maximal run of partitions that no node holds (gap) or several nodes hold (overlap), with the nodes; no rows means every partition has exactly one holder';
CREATE OR REPLACE FUNCTION ringshard.parse_partition_config(config text)
	RETURNS TABLE (address text, partition_start integer, partition_end integer, line integer)
	AS 'MODULE_PATHNAME', 'ringshard_parse_partition_config' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard.parse_partition_config(text) IS
	'the node entries of a YAML coordinator config (version "v1"), or an error naming the field and line';
CREATE OR REPLACE FUNCTION ringshard.format_partition_config(addresses text[], partition_starts integer[], partition_ends integer[])
	RETURNS text
	AS 'MODULE_PATHNAME', 'ringshard_format_partition_config' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard.format_partition_config(text[], integer[], integer[]) IS
	'writes node entries as a YAML coordinator config (version "v1")';
CREATE OR REPLACE FUNCTION ringshard.load_partition_config(config text, map text DEFAULT 'default') RETURNS integer
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	entry record;
	node text;
	entries integer := 0;
	gaps integer;
	gap_partitions integer;
	gap_list text;
BEGIN
	PERFORM ringshard_internal.check_name('partition map', map);
	IF config IS NULL THEN
		RAISE EXCEPTION 'a partition config must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF NOT EXISTS (SELECT FROM ringshard.partition_maps p WHERE p.map_name = map) THEN
		INSERT INTO ringshard.partition_maps (map_name) VALUES (map);
	END IF;
	PERFORM ringshard_internal.lock_partition_map(map);
	-- Parse everything before changing anything.
	CREATE TEMPORARY TABLE IF NOT EXISTS pg_temp.ringshard_config_entries
		(address text, partition_start integer, partition_end integer, line integer) ON COMMIT DROP;
	TRUNCATE pg_temp.ringshard_config_entries;
	INSERT INTO pg_temp.ringshard_config_entries SELECT * FROM ringshard.parse_partition_config(config);

	DELETE FROM ringshard.partition_assignments a WHERE a.map_name = map;
	FOR entry IN SELECT * FROM pg_temp.ringshard_config_entries ORDER BY line LOOP
		-- An entry names a node by address; a node with that address is reused.
		node := ringshard.node_for_address(entry.address);
		IF node IS NULL THEN
			node := entry.address;
			BEGIN
				PERFORM ringshard_internal.ensure_node(node, entry.address);
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
	PERFORM ringshard_internal.forget_unused_nodes();
	-- A config that leaves partitions to no node loads (a map may be filled
	-- in steps), but not silently: keys in a gap cannot be routed.  The gaps
	-- are check_partition_map's, in its words.
	SELECT count(*), sum(c.partition_end - c.partition_start + 1),
	       string_agg(CASE WHEN c.partition_start = c.partition_end THEN c.partition_start::text
	                       ELSE c.partition_start || '..' || c.partition_end END,
	                  ', ' ORDER BY c.partition_start)
	  INTO gaps, gap_partitions, gap_list
	  FROM ringshard.check_partition_map(map) c WHERE c.kind = 'gap';
	IF gaps > 0 THEN
		RAISE WARNING 'partition map "%" has %: no node holds %', map,
			CASE WHEN gaps = 1 THEN 'a gap' ELSE gaps || ' gaps' END,
			CASE WHEN gap_partitions = 1 THEN 'partition ' ELSE 'partitions ' END || gap_list
			USING DETAIL = 'Routing a key that hashes into a gap is an error.',
			      HINT = format('Assign them with ringshard.assign_partitions(node, start, end, %L); ringshard.check_partition_map(%L) lists every gap.',
			                    map, map);
	END IF;
	RETURN entries;
END
$$;
COMMENT ON FUNCTION ringshard.load_partition_config(text, text) IS
	'replaces a map''s assignments with a YAML coordinator config, all or nothing; nodes are found or created by address; returns the number of entries; a config that leaves partitions to no node is loaded with a WARNING naming the gaps (see check_partition_map)';
CREATE OR REPLACE FUNCTION ringshard.partition_config(map text DEFAULT 'default') RETURNS text
	LANGUAGE plpgsql STABLE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	result text;
BEGIN
	IF NOT EXISTS (SELECT FROM ringshard.partition_maps p WHERE p.map_name = map) THEN
		RAISE EXCEPTION 'partition map "%" does not exist', map
			USING ERRCODE = 'undefined_object';
	END IF;
	SELECT ringshard.format_partition_config(
			   coalesce(array_agg(coalesce(ringshard.server_address(n.server_name), n.node_name) ORDER BY a.partition_start, a.node_name COLLATE "C"), '{}'),
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
-- from extension/60_tables.sql
CREATE OR REPLACE FUNCTION pg_catalog.shard_of(row_value record) RETURNS text
	AS 'MODULE_PATHNAME', 'ringshard_shard_of' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pg_catalog.shard_of(record) IS
	'the node that owns a row of an annotated table (ring owner, or first holder of its partition)';
CREATE OR REPLACE FUNCTION pg_catalog.replicas_of(row_value record) RETURNS text[]
	AS 'MODULE_PATHNAME', 'ringshard_replicas_of' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pg_catalog.replicas_of(record) IS
	'every node that holds a row of an annotated table (ring replica set, or all holders of its partition)';
CREATE OR REPLACE FUNCTION ringshard.qualified_name(table_name regclass) RETURNS text
	LANGUAGE plpgsql STABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	qualified text;
BEGIN
	SELECT pg_catalog.quote_ident(n.nspname) || '.' || pg_catalog.quote_ident(c.relname) INTO qualified
	  FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
	 WHERE c.oid = table_name;
	IF qualified IS NULL THEN
		RAISE EXCEPTION 'relation with OID % does not exist', table_name::pg_catalog.oid
			USING ERRCODE = 'undefined_table';
	END IF;
	RETURN qualified;
END
$$;
COMMENT ON FUNCTION ringshard.qualified_name(regclass) IS
	'the table''s schema-qualified, quoted name, the same on any search_path (for SQL text, above all SQL sent to nodes)';
CREATE OR REPLACE FUNCTION ringshard_internal.column_attnum(table_name regclass, column_name name) RETURNS smallint
	LANGUAGE plpgsql STABLE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	found smallint;
BEGIN
	SELECT a.attnum INTO found FROM pg_catalog.pg_attribute a
	 WHERE a.attrelid = table_name AND a.attname = column_name AND a.attnum > 0 AND NOT a.attisdropped;
	IF found IS NULL THEN
		RAISE EXCEPTION 'column "%" of table % does not exist', column_name, table_name
			USING ERRCODE = 'undefined_column';
	END IF;
	RETURN found;
END
$$;
COMMENT ON FUNCTION ringshard_internal.column_attnum(regclass, name) IS 'the attribute number of a live user column, or an error';
CREATE OR REPLACE FUNCTION ringshard_internal.check_key_column(table_name regclass, column_name name, column_type regtype,
													 role text) RETURNS void
	AS 'MODULE_PATHNAME', 'ringshard_check_key_column' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard_internal.check_key_column(regclass, name, regtype, text) IS
	'raises unless the column''s type has canonical key bytes (role: "sharding key" or "keyspace column", for the message)';
CREATE OR REPLACE FUNCTION ringshard_internal.resolve_annotation_columns() RETURNS trigger
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
BEGIN
	IF (SELECT c.relkind FROM pg_catalog.pg_class c WHERE c.oid = NEW.table_name) NOT IN ('r', 'p', 'f') THEN
		RAISE EXCEPTION '% is not a table', NEW.table_name
			USING ERRCODE = 'wrong_object_type',
			      HINT = 'Annotate an ordinary, partitioned or foreign table.';
	END IF;
	NEW.key_attnum := ringshard_internal.column_attnum(NEW.table_name, NEW.key_column);
	NEW.keyspace_attnum := CASE WHEN NEW.keyspace_column IS NOT NULL
		THEN ringshard_internal.column_attnum(NEW.table_name, NEW.keyspace_column) END;
	PERFORM ringshard_internal.check_key_column(NEW.table_name, a.attname, a.atttypid, 'sharding key')
	   FROM pg_catalog.pg_attribute a WHERE a.attrelid = NEW.table_name AND a.attnum = NEW.key_attnum;
	PERFORM ringshard_internal.check_key_column(NEW.table_name, a.attname, a.atttypid, 'keyspace column')
	   FROM pg_catalog.pg_attribute a WHERE a.attrelid = NEW.table_name AND a.attnum = NEW.keyspace_attnum;
	RETURN NEW;
END
$$;
COMMENT ON FUNCTION ringshard_internal.resolve_annotation_columns() IS 'trigger: resolves key and keyspace column names to attribute numbers';
CREATE OR REPLACE FUNCTION ringshard.distribute_table(table_name regclass, key_column name, ring text DEFAULT 'default')
	RETURNS text
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
BEGIN
	IF table_name IS NULL OR key_column IS NULL THEN
		RAISE EXCEPTION 'table and key column must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	PERFORM ringshard_internal.lock_ring(ring);
	IF EXISTS (SELECT FROM ringshard.distributed_tables d WHERE d.table_name = distribute_table.table_name) THEN
		RAISE EXCEPTION 'table % is already annotated', table_name
			USING ERRCODE = 'duplicate_object',
			      HINT = 'Remove the annotation first with ringshard.undistribute_table().';
	END IF;
	INSERT INTO ringshard.distributed_tables (table_name, key_column, key_attnum, ring_name)
	VALUES (table_name, key_column, 0, ring);
	RETURN format('table %s is placed by ring "%s" on column %I', table_name, ring, key_column);
END
$$;
COMMENT ON FUNCTION ringshard.distribute_table(regclass, name, text) IS
	'annotates a table: its rows are placed on a ring by the key column';
CREATE OR REPLACE FUNCTION ringshard.distribute_table_by_partition(table_name regclass, key_column name,
														keyspace text DEFAULT NULL,
														map text DEFAULT 'default',
														keyspace_column name DEFAULT NULL)
	RETURNS text
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
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
	PERFORM ringshard_internal.lock_partition_map(map);
	IF EXISTS (SELECT FROM ringshard.distributed_tables d
				WHERE d.table_name = distribute_table_by_partition.table_name) THEN
		RAISE EXCEPTION 'table % is already annotated', table_name
			USING ERRCODE = 'duplicate_object',
			      HINT = 'Remove the annotation first with ringshard.undistribute_table().';
	END IF;
	INSERT INTO ringshard.distributed_tables (table_name, key_column, key_attnum, map_name, keyspace, keyspace_column)
	VALUES (table_name, key_column, 0, map, keyspace, keyspace_column);
	RETURN format('table %s is placed by partition map "%s" on column %I, keyspace %s', table_name, map, key_column,
	              coalesce(quote_literal(keyspace), format('from column %I', keyspace_column)));
END
$$;
COMMENT ON FUNCTION ringshard.distribute_table_by_partition(regclass, name, text, text, name) IS
	'annotates a table: its rows are placed by partition_for(keyspace, key) in a partition map; the keyspace is a constant or a column';
CREATE OR REPLACE FUNCTION ringshard.undistribute_table(table_name regclass) RETURNS text
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
BEGIN
	IF table_name IS NULL THEN
		RAISE EXCEPTION 'table must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	DELETE FROM ringshard.distributed_tables d WHERE d.table_name = undistribute_table.table_name;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'table % is not annotated', table_name
			USING ERRCODE = 'undefined_object';
	END IF;
	RETURN format('table %s is no longer annotated; its data is untouched', table_name);
END
$$;
COMMENT ON FUNCTION ringshard.undistribute_table(regclass) IS 'removes a table''s annotation (its data is untouched)';
CREATE OR REPLACE VIEW ringshard.annotated_tables AS
SELECT d.table_name, d.key_column,
	   CASE WHEN d.ring_name IS NOT NULL THEN 'ring' ELSE 'partition map' END AS placement,
	   coalesce(d.ring_name, d.map_name) AS placed_by,
	   d.keyspace, d.keyspace_column
  FROM ringshard.distributed_tables d;
COMMENT ON VIEW ringshard.annotated_tables IS 'tables annotated with a sharding key, and the ring or map that places them';
CREATE OR REPLACE FUNCTION ringshard_internal.forget_dropped_tables() RETURNS event_trigger
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	dropped record;
	forgotten boolean := false;
BEGIN
	FOR dropped IN SELECT o.objid, o.objsubid FROM pg_catalog.pg_event_trigger_dropped_objects() o
				   WHERE o.object_type IN ('table', 'table column', 'foreign table', 'foreign table column') LOOP
		IF dropped.objsubid = 0 THEN
			DELETE FROM ringshard.distributed_tables d WHERE d.table_name::pg_catalog.oid = dropped.objid;
			forgotten := forgotten OR FOUND;
			-- A later table may get the same OID: it must not inherit the
			-- dropped one's placement or unfinished rebalance.
			DELETE FROM ringshard.placements p WHERE p.table_name::pg_catalog.oid = dropped.objid;
			forgotten := forgotten OR FOUND;
			DELETE FROM ringshard.rebalance_progress p WHERE p.table_name::pg_catalog.oid = dropped.objid;
		ELSE
			DELETE FROM ringshard.distributed_tables d
			 WHERE d.table_name::pg_catalog.oid = dropped.objid
			   AND dropped.objsubid IN (d.key_attnum, d.keyspace_attnum);
			IF FOUND THEN
				RAISE NOTICE 'table % is no longer annotated: its sharding key column was dropped',
					dropped.objid::pg_catalog.regclass;
			END IF;
		END IF;
	END LOOP;
	-- Nodes kept only for the dropped table's rows are not needed any more.
	IF forgotten THEN
		PERFORM ringshard_internal.forget_unused_nodes();
	END IF;
END
$$;
COMMENT ON FUNCTION ringshard_internal.forget_dropped_tables() IS
	'event trigger: drops the annotation, placement and unfinished rebalance of a dropped table, and the annotation of a table whose key column was dropped';
CREATE OR REPLACE FUNCTION ringshard_internal.follow_renamed_columns() RETURNS event_trigger
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER SET search_path = pg_catalog, ringshard, pg_temp AS $$
BEGIN
	UPDATE ringshard.distributed_tables d
	   SET key_column = (SELECT a.attname FROM pg_catalog.pg_attribute a WHERE a.attrelid = d.table_name AND a.attnum = d.key_attnum),
	       keyspace_column = (SELECT a.attname FROM pg_catalog.pg_attribute a WHERE a.attrelid = d.table_name AND a.attnum = d.keyspace_attnum)
	 WHERE d.table_name::pg_catalog.oid IN (SELECT c.objid FROM pg_catalog.pg_event_trigger_ddl_commands() c
	                                          WHERE c.classid = 'pg_catalog.pg_class'::pg_catalog.regclass)
	   AND (d.key_column IS DISTINCT FROM (SELECT a.attname FROM pg_catalog.pg_attribute a WHERE a.attrelid = d.table_name AND a.attnum = d.key_attnum)
	        OR d.keyspace_column IS DISTINCT FROM (SELECT a.attname FROM pg_catalog.pg_attribute a WHERE a.attrelid = d.table_name AND a.attnum = d.keyspace_attnum));
END
$$;
COMMENT ON FUNCTION ringshard_internal.follow_renamed_columns() IS 'event trigger: keeps annotation column names in step with ALTER TABLE ... RENAME';
-- from extension/70_previews.sql
CREATE OR REPLACE FUNCTION ringshard.preview_change(ring text, change text, node text, weight float8, copies boolean)
	RETURNS TABLE (from_node text, to_node text, range_start ringtoken, range_end ringtoken, fraction float8)
	AS 'MODULE_PATHNAME', 'ringshard_preview_change' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard.preview_change(text, text, text, float8, boolean) IS
	'ranges whose owner (copies false) or replica set (copies true: from_node is the node, to_node ''gains'' or ''loses'') a change ''add'', ''remove'' or ''set_weight'' would alter';
CREATE OR REPLACE FUNCTION ringshard.preview_add_node(node text, ring text DEFAULT 'default', weight float8 DEFAULT 1)
	RETURNS TABLE (from_node text, to_node text, range_start ringtoken, range_end ringtoken, fraction float8)
	LANGUAGE sql STABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, ringshard, pg_temp
	AS $$ SELECT * FROM ringshard.preview_change(ring, 'add', node, weight, false) $$;
COMMENT ON FUNCTION ringshard.preview_add_node(text, text, float8) IS
	'each contiguous token range (range_start, range_end] whose owner changes if the node joins, with its exact share of the ring; nothing changes';
CREATE OR REPLACE FUNCTION ringshard.preview_remove_node(node text, ring text DEFAULT 'default')
	RETURNS TABLE (from_node text, to_node text, range_start ringtoken, range_end ringtoken, fraction float8)
	LANGUAGE sql STABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, ringshard, pg_temp
	AS $$ SELECT * FROM ringshard.preview_change(ring, 'remove', node, 1, false) $$;
COMMENT ON FUNCTION ringshard.preview_remove_node(text, text) IS
	'each token range whose owner changes if the node leaves; nothing changes';
CREATE OR REPLACE FUNCTION ringshard.preview_set_weight(node text, weight float8, ring text DEFAULT 'default')
	RETURNS TABLE (from_node text, to_node text, range_start ringtoken, range_end ringtoken, fraction float8)
	LANGUAGE sql STABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, ringshard, pg_temp
	AS $$ SELECT * FROM ringshard.preview_change(ring, 'set_weight', node, weight, false) $$;
COMMENT ON FUNCTION ringshard.preview_set_weight(text, float8, text) IS
	'each token range whose owner changes if the node''s weight changes; nothing changes';
CREATE OR REPLACE FUNCTION ringshard.preview_add_node_copies(node text, ring text DEFAULT 'default', weight float8 DEFAULT 1)
	RETURNS TABLE (node text, change text, range_start ringtoken, range_end ringtoken, fraction float8)
	LANGUAGE sql STABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, ringshard, pg_temp
	AS $$ SELECT * FROM ringshard.preview_change(ring, 'add', node, weight, true) $$;
COMMENT ON FUNCTION ringshard.preview_add_node_copies(text, text, float8) IS
	'with replication: each range in which a node gains or loses a copy if the node joins (what data movement really is)';
CREATE OR REPLACE FUNCTION ringshard.preview_remove_node_copies(node text, ring text DEFAULT 'default')
	RETURNS TABLE (node text, change text, range_start ringtoken, range_end ringtoken, fraction float8)
	LANGUAGE sql STABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, ringshard, pg_temp
	AS $$ SELECT * FROM ringshard.preview_change(ring, 'remove', node, 1, true) $$;
COMMENT ON FUNCTION ringshard.preview_remove_node_copies(text, text) IS
	'with replication: each range in which a node gains or loses a copy if the node leaves';
CREATE OR REPLACE FUNCTION ringshard.preview_set_weight_copies(node text, weight float8, ring text DEFAULT 'default')
	RETURNS TABLE (node text, change text, range_start ringtoken, range_end ringtoken, fraction float8)
	LANGUAGE sql STABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, ringshard, pg_temp
	AS $$ SELECT * FROM ringshard.preview_change(ring, 'set_weight', node, weight, true) $$;
COMMENT ON FUNCTION ringshard.preview_set_weight_copies(text, float8, text) IS
	'with replication: each range in which a node gains or loses a copy if the node''s weight changes';
CREATE OR REPLACE FUNCTION ringshard.proposed_replicas(key text, ring text, change text, node text, weight float8 DEFAULT 1)
	RETURNS text[]
	AS 'MODULE_PATHNAME', 'ringshard_proposed_replicas' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE OR REPLACE FUNCTION ringshard.proposed_replicas(key anyelement, ring text, change text, node text, weight float8 DEFAULT 1)
	RETURNS text[]
	AS 'MODULE_PATHNAME', 'ringshard_proposed_replicas' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard.proposed_replicas(text, text, text, text, float8) IS
	'the key''s replica set, owner first, on the ring as it would be after the change (add, remove, set_weight)';
COMMENT ON FUNCTION ringshard.proposed_replicas(anyelement, text, text, text, float8) IS
	'the key''s replica set, owner first, on the ring as it would be after the change (add, remove, set_weight)';
CREATE OR REPLACE FUNCTION ringshard.plan_table_moves(table_name regclass, change text, node text, weight float8 DEFAULT 1)
	RETURNS TABLE (key text, from_node text, to_node text, from_replicas text[], to_replicas text[])
	LANGUAGE plpgsql STABLE PARALLEL UNSAFE STRICT SET search_path = pg_catalog, ringshard, pg_temp AS $$
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
	-- Checked before the query (proposed_replicas checks it too, but only
	-- per row): a mistyped change must fail on an empty table as well.
	IF change NOT IN ('add', 'remove', 'set_weight') THEN
		RAISE EXCEPTION 'unknown topology change "%"', change
			USING ERRCODE = 'invalid_parameter_value',
			      HINT = 'Use ''add'', ''remove'' or ''set_weight''.';
	END IF;
	RETURN QUERY EXECUTE format(
		'SELECT s.k::text, s.before[1], s.after[1], s.before, s.after
		   FROM (SELECT t.%1$I AS k, pg_catalog.replicas_of(t) AS before,
		                ringshard.proposed_replicas(t.%1$I, $1, $2, $3, $4) AS after
		           FROM %2$s t WHERE t.%1$I IS NOT NULL) s
		  WHERE s.before IS DISTINCT FROM s.after', annotation.key_column, ringshard.qualified_name(table_name))
	USING annotation.ring_name, change, node, weight;
END
$$;
COMMENT ON FUNCTION ringshard.plan_table_moves(regclass, text, text, float8) IS
	'every row of a ring-placed table whose replica set a change (add, remove, set_weight) would alter, with old and new owners and replica sets';
CREATE OR REPLACE FUNCTION ringshard.plan_table_summary(table_name regclass, change text, node text, weight float8 DEFAULT 1)
	RETURNS TABLE (from_node text, to_node text, rows bigint)
	LANGUAGE sql STABLE PARALLEL UNSAFE STRICT SET search_path = pg_catalog, ringshard, pg_temp AS $$
	SELECT m.from_node, m.to_node, count(*)
	  FROM ringshard.plan_table_moves(table_name, change, node, weight) m
	 WHERE m.from_node IS DISTINCT FROM m.to_node
	 GROUP BY m.from_node, m.to_node ORDER BY m.from_node COLLATE "C", m.to_node COLLATE "C";
$$;
COMMENT ON FUNCTION ringshard.plan_table_summary(regclass, text, text, float8) IS
	'rows whose owner a change would move, counted per (from, to) pair: a migration plan per table';
CREATE OR REPLACE FUNCTION ringshard.compare_schemes(from_nodes integer, to_nodes integer, keys integer DEFAULT 100000,
										  vnodes integer DEFAULT 256)
	RETURNS TABLE (scheme text, moved_fraction float8, ideal_fraction float8, max_over_mean float8, stddev_share float8)
	AS 'MODULE_PATHNAME', 'ringshard_compare_schemes' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard.compare_schemes(integer, integer, integer, integer) IS
	'keys key-0.. placed with modulo, range, ring, jump and rendezvous on from_nodes then to_nodes nodes: share moved against the ideal, and balance after';
CREATE OR REPLACE FUNCTION ringshard.share_bar(value float8, full_scale float8, width integer DEFAULT 20) RETURNS text
	LANGUAGE plpgsql STABLE PARALLEL SAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	eighths integer;
BEGIN
	IF value IS NULL OR full_scale IS NULL OR width IS NULL OR NOT (value > 0 AND full_scale > 0 AND width > 0) THEN
		RETURN '';
	END IF;
	eighths := round(least(value / full_scale, 1) * width * 8);
	IF getdatabaseencoding() <> 'UTF8' OR pg_client_encoding() <> 'UTF8' THEN
		RETURN repeat('#', round(eighths / 8.0)::integer);
	END IF;
	RETURN repeat(chr(9608), eighths / 8) || CASE WHEN eighths % 8 > 0 THEN chr(9616 - eighths % 8) ELSE '' END;
END
$$;
COMMENT ON FUNCTION ringshard.share_bar(float8, float8, integer) IS
	'a bar of Unicode block characters value / full_scale of width characters long, to an eighth; ''#'' characters where the encoding has no blocks';
CREATE OR REPLACE FUNCTION ringshard.ring_balance_report(ring text DEFAULT 'default')
	RETURNS TABLE (node text, points integer, share numeric, ideal numeric, deviation_pct numeric, bar text)
	LANGUAGE sql STABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
	SELECT b.node, b.points, round(b.share::numeric, 4), round(b.ideal_share::numeric, 4),
	       round(((b.ratio - 1) * 100)::numeric, 1),
	       ringshard.share_bar(b.share, max(greatest(b.share, b.ideal_share)) OVER ())
	  FROM ringshard.ring_balance(ring) b
	 ORDER BY b.node COLLATE "C";
$$;
COMMENT ON FUNCTION ringshard.ring_balance_report(text) IS
	'per node of a ring: points, share of the ring and ideal share (weight / total weight), 4 decimals, deviation from the ideal in per cent, and a bar proportional to the share; exact figures in ring_balance()';
CREATE OR REPLACE FUNCTION ringshard.table_balance_report(table_name regclass)
	RETURNS TABLE (node text, rows_owned bigint, rows_held bigint, share numeric, ideal numeric, deviation_pct numeric,
				   bar text)
	LANGUAGE plpgsql STABLE STRICT PARALLEL RESTRICTED SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	annotation ringshard.distributed_tables;
BEGIN
	SELECT * INTO annotation FROM ringshard.distributed_tables d WHERE d.table_name = table_balance_report.table_name;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'table % is not annotated', table_name
			USING ERRCODE = 'undefined_object',
			      HINT = 'Annotate it with ringshard.distribute_table().';
	END IF;
	-- Every node of the ring or map is listed, with no rows if it has none.
	-- Its ideal share is its weight over the ring's total weight, or for a
	-- map an equal share of the map's nodes (what suggest_partition_boundaries
	-- aims at); its share is of the rows held, replicas included.
	RETURN QUERY EXECUTE format($q$
		WITH placed AS (SELECT pg_catalog.replicas_of(t) AS holders FROM %s t),
		     held AS (SELECT h.node, h.ord FROM placed, pg_catalog.unnest(placed.holders) WITH ORDINALITY AS h(node, ord)),
		     counted AS (SELECT held.node, pg_catalog.count(*) FILTER (WHERE held.ord = 1) AS owned, pg_catalog.count(*) AS held
		                   FROM held GROUP BY held.node),
		     intended AS (
		        SELECT m.node_name AS node, m.weight / pg_catalog.sum(m.weight) OVER () AS ideal
		          FROM ringshard.ring_members m WHERE m.ring_name = $1
		        UNION ALL
		        SELECT a.node_name, 1 / (pg_catalog.count(*) OVER ())::pg_catalog.float8
		          FROM (SELECT DISTINCT x.node_name FROM ringshard.partition_assignments x WHERE x.map_name = $2) a),
		     merged AS (
		        SELECT coalesce(c.node, i.node) AS node, coalesce(c.owned, 0) AS owned, coalesce(c.held, 0) AS held, i.ideal
		          FROM counted c FULL JOIN intended i ON i.node = c.node),
		     shares AS (SELECT m.*, m.held / NULLIF(pg_catalog.sum(m.held) OVER (), 0)::pg_catalog.float8 AS share FROM merged m)
		SELECT s.node, s.owned, s.held, pg_catalog.round(s.share::pg_catalog.numeric, 4),
		       pg_catalog.round(s.ideal::pg_catalog.numeric, 4),
		       pg_catalog.round(((s.share / s.ideal - 1) * 100)::pg_catalog.numeric, 1),
		       ringshard.share_bar(s.share, pg_catalog.max(GREATEST(s.share, s.ideal)) OVER ())
		  FROM shares s ORDER BY s.node COLLATE "C"$q$, ringshard.qualified_name(table_name))
	USING annotation.ring_name, annotation.map_name;
END
$$;
COMMENT ON FUNCTION ringshard.table_balance_report(regclass) IS
	'per node of an annotated table''s ring or map: rows it owns and holds (with replicas), its share of the held rows and the ideal share, 4 decimals, deviation in per cent, and a bar; from the real rows of the table here';
CREATE OR REPLACE FUNCTION ringshard.preview_partition_assignments(nodes text[], partition_starts integer[],
														 partition_ends integer[], map text DEFAULT 'default')
	RETURNS TABLE (partition_start integer, partition_end integer, from_nodes text[], to_nodes text[])
	LANGUAGE plpgsql STABLE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
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
CREATE OR REPLACE FUNCTION ringshard.preview_partition_config(config text, map text DEFAULT 'default')
	RETURNS TABLE (partition_start integer, partition_end integer, from_nodes text[], to_nodes text[])
	LANGUAGE plpgsql STABLE PARALLEL UNSAFE STRICT SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	names text[];
	starts integer[];
	ends integer[];
BEGIN
	-- Entries name nodes by address, as load_partition_config resolves them.
	SELECT coalesce(array_agg(coalesce(ringshard.node_for_address(c.address), c.address) ORDER BY c.line), '{}'),
	       coalesce(array_agg(c.partition_start ORDER BY c.line), '{}'),
	       coalesce(array_agg(c.partition_end ORDER BY c.line), '{}')
	  INTO names, starts, ends
	  FROM ringshard.parse_partition_config(config) c;
	RETURN QUERY SELECT * FROM ringshard.preview_partition_assignments(names, starts, ends, map);
END
$$;
COMMENT ON FUNCTION ringshard.preview_partition_config(text, text) IS
	'runs of partitions whose holders would change if the YAML config were loaded into the map; nothing changes';
CREATE OR REPLACE FUNCTION ringshard.suggest_partition_boundaries(table_name regclass)
	RETURNS TABLE (node text, partition_start integer, partition_end integer, rows bigint, current_rows bigint)
	LANGUAGE plpgsql STABLE PARALLEL UNSAFE STRICT SET search_path = pg_catalog, ringshard, pg_temp AS $$
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
	-- A keyspace column's value as the text of its canonical bytes, which is
	-- what placing the row hashes (a plain ::text would differ for numeric,
	-- dates, timestamps and bytea).
	keyspace_expr := CASE WHEN annotation.keyspace_column IS NOT NULL
		THEN format('pg_catalog.convert_from(ringshard.key_bytes(t.%I), ''UTF8'')', annotation.keyspace_column)
		ELSE quote_literal(annotation.keyspace) END;
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
		 GROUP BY nodes.n ORDER BY 2$q$, keyspace_expr, annotation.key_column, ringshard.qualified_name(table_name))
	USING annotation.map_name;
END
$$;
COMMENT ON FUNCTION ringshard.suggest_partition_boundaries(regclass) IS
	'new contiguous partition boundaries that equalise a partition-mapped table''s rows over the map''s current nodes; preview their moves with preview_partition_assignments()';
-- from extension/80_cluster.sql
COMMENT ON TABLE ringshard.cluster_state IS
	'this server''s role: on a worker its node name; everywhere the version of the topology it holds';
CREATE OR REPLACE FUNCTION ringshard_internal.merge_cluster_state() RETURNS trigger
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard AS $$
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
COMMENT ON FUNCTION ringshard_internal.merge_cluster_state() IS 'trigger: a restored cluster_state row updates the existing one';
CREATE OR REPLACE FUNCTION ringshard.node_execute(nodes text[], sql text, params text[] DEFAULT '{}',
									   in_transaction boolean DEFAULT true)
	RETURNS TABLE (node text, ok boolean, value text, error text, elapsed_ms float8)
	AS 'MODULE_PATHNAME', 'ringshard_node_execute' LANGUAGE C VOLATILE PARALLEL UNSAFE STRICT;
COMMENT ON FUNCTION ringshard.node_execute(text[], text, text[], boolean) IS
	'runs one statement on several nodes in parallel, as the calling role; in the transaction, the nodes'' parts commit with this one in two phases';
CREATE OR REPLACE FUNCTION ringshard.node_health()
	RETURNS TABLE (node text, reachable boolean, rtt_ms float8, server_version text,
				   database_size bigint, connections integer, two_phase_commit boolean, last_error text)
	AS 'MODULE_PATHNAME', 'ringshard_node_health_with_2pc' LANGUAGE C VOLATILE PARALLEL UNSAFE STRICT;
COMMENT ON FUNCTION ringshard.node_health() IS
	'probes every node in parallel as the calling role: reachable, round trip, version, size, connections, whether it takes two-phase commits, the role''s last error there';
CREATE OR REPLACE FUNCTION ringshard.addressed_nodes() RETURNS text[]
	AS 'MODULE_PATHNAME', 'ringshard_addressed_nodes' LANGUAGE C STABLE PARALLEL UNSAFE STRICT;
COMMENT ON FUNCTION ringshard.addressed_nodes() IS 'the nodes that have an address (a foreign server)';
CREATE OR REPLACE FUNCTION ringshard.node_table_rows(table_name regclass)
	RETURNS TABLE (node text, rows bigint, error text)
	AS 'MODULE_PATHNAME', 'ringshard_node_table_rows' LANGUAGE C VOLATILE PARALLEL UNSAFE STRICT;
COMMENT ON FUNCTION ringshard.node_table_rows(regclass) IS
	'rows of a distributed table on each node (copies included), counted as the calling role';
CREATE OR REPLACE FUNCTION ringshard_internal.topology_snapshot() RETURNS json
	LANGUAGE sql STABLE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard AS $$
	SELECT json_build_object(
		'rings', (SELECT coalesce(json_agg(r), '[]') FROM ringshard.rings r),
		'nodes', (SELECT coalesce(json_agg(json_build_object('node_name', n.node_name, 'is_up', n.is_up)), '[]') FROM ringshard.nodes n),
		'ring_members', (SELECT coalesce(json_agg(m), '[]') FROM ringshard.ring_members m),
		'partition_maps', (SELECT coalesce(json_agg(p), '[]') FROM ringshard.partition_maps p),
		'partition_assignments', (SELECT coalesce(json_agg(a), '[]') FROM ringshard.partition_assignments a));
$$;
COMMENT ON FUNCTION ringshard_internal.topology_snapshot() IS 'rings, nodes (without addresses), members, maps and assignments as JSON';
CREATE OR REPLACE FUNCTION ringshard.apply_topology(topology json, local_node text, version bigint) RETURNS bigint
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard AS $$
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
			USING ERRCODE = 'invalid_parameter_value', HINT = 'It comes from ringshard_internal.topology_snapshot() on the coordinator.';
	END IF;
	SELECT s.topology_version INTO held FROM ringshard.cluster_state s FOR UPDATE;
	-- The coordinator serializes its syncs; an equal version is a retry of one
	-- that did not commit there, so taking it again converges.
	IF version < held THEN
		RAISE EXCEPTION 'topology version % is older than version % held here', version, held
			USING ERRCODE = 'object_not_in_prerequisite_state',
			      HINT = 'This node was synced by a coordinator with a newer topology.';
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
	'on a worker: takes the coordinator''s topology and this worker''s node name, refusing a version older than the one held (an equal one is a retry)';
CREATE OR REPLACE FUNCTION ringshard.sync_topology() RETURNS TABLE (node text, version bigint)
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	snapshot json := ringshard_internal.topology_snapshot();
	targets text[] := ringshard.addressed_nodes();
	new_version bigint;
	failed record;
BEGIN
	-- every node must be able to take part in two-phase commit: say so now, not at the first write
	SELECT * INTO failed FROM ringshard.node_execute(targets,
		'SELECT pg_catalog.current_setting(''max_prepared_transactions'')::pg_catalog.int4', '{}', false) x
	 WHERE NOT x.ok OR x.value::integer = 0 LIMIT 1;
	IF FOUND THEN
		RAISE EXCEPTION 'node "%" cannot take the topology', failed.node
			USING ERRCODE = CASE WHEN failed.ok THEN 'object_not_in_prerequisite_state' ELSE 'connection_failure' END,
			      DETAIL = coalesce(failed.error, 'Its max_prepared_transactions is 0.'),
			      HINT = CASE WHEN failed.ok THEN 'Set max_prepared_transactions on every node and restart it.'
			                  ELSE 'Nothing was changed anywhere; fix the node and sync again.' END;
	END IF;
	UPDATE ringshard.cluster_state SET topology_version = topology_version + 1
	RETURNING topology_version INTO new_version;
	-- each node's part commits with this transaction, in two phases
	FOREACH node IN ARRAY targets LOOP
		SELECT * INTO failed FROM ringshard.node_execute(ARRAY[node],
			'SELECT ringshard.apply_topology($1::pg_catalog.json, $2, $3::pg_catalog.int8)',
			ARRAY[snapshot::text, node, new_version::text]) x;
		IF NOT failed.ok THEN
			RAISE EXCEPTION 'could not sync the topology to node "%"', node
				USING ERRCODE = 'connection_failure', DETAIL = failed.error,
				      HINT = 'Nothing was changed anywhere; fix the node and sync again.';
		END IF;
		version := new_version;
		RETURN NEXT;
	END LOOP;
END
$$;
COMMENT ON FUNCTION ringshard.sync_topology() IS
	'pushes the topology, with a new version number, to every node with an address: all or nothing (two-phase commit)';
CREATE OR REPLACE FUNCTION ringshard.reads_here(table_name regclass, key "any", excluded text[], topology_version bigint)
	RETURNS boolean
	AS 'MODULE_PATHNAME', 'ringshard_reads_here_by_key' LANGUAGE C STABLE PARALLEL SAFE;
CREATE OR REPLACE FUNCTION ringshard.reads_here(table_name regclass, key "any", keyspace "any", excluded text[],
									 topology_version bigint)
	RETURNS boolean
	AS 'MODULE_PATHNAME', 'ringshard_reads_here_by_key' LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION ringshard.reads_here(regclass, "any", text[], bigint) IS
	'on a worker: true if this node is the first replica of the key outside the excluded nodes (so a fan-out reads each row once); errors if the node holds another topology version (NULL: no check)';
COMMENT ON FUNCTION ringshard.reads_here(regclass, "any", "any", text[], bigint) IS
	'the same for a table placed by a partition map whose keyspace is a column';
CREATE OR REPLACE FUNCTION ringshard.reject_misrouted_rows() RETURNS trigger
	AS 'MODULE_PATHNAME', 'ringshard_reject_misrouted_rows' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION ringshard.reject_misrouted_rows() IS
	'trigger on a worker''s distributed table: a row this node does not hold under its topology is an error';
CREATE OR REPLACE FUNCTION ringshard_internal.adopt_distributed_table(table_name text, create_sql text, extra_sql text[],
												  key_column name, ring text, map text, keyspace text,
												  keyspace_column name)
	RETURNS void
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	relid regclass := to_regclass(table_name);
	statement text;
	me oid := (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) current_user);
	schema_owner oid;
	schema_name text := (pg_catalog.parse_ident(table_name))[1];
BEGIN
	-- Created only if missing: CREATE SCHEMA IF NOT EXISTS would need the
	-- right to create schemas even when the schema is there.
	IF pg_catalog.to_regnamespace(pg_catalog.quote_ident(schema_name)) IS NULL THEN
		EXECUTE pg_catalog.format('CREATE SCHEMA %I', schema_name);
	END IF;
	-- The schema the coordinator's SQL created or found: its owner may drop
	-- or replace what is in it, so it must be trusted: this role, a
	-- superuser, or the database owner's public schema.
	SELECT n.nspowner INTO schema_owner FROM pg_catalog.pg_namespace n
	 WHERE n.oid OPERATOR(pg_catalog.=) (SELECT c.relnamespace FROM pg_catalog.pg_class c
	                                      WHERE c.oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass(table_name))
	    OR (relid IS NULL AND n.nspname OPERATOR(pg_catalog.=) schema_name);
	IF schema_owner IS NOT NULL AND schema_owner OPERATOR(pg_catalog.<>) me
	   AND NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.oid OPERATOR(pg_catalog.=) schema_owner)
	   AND NOT (schema_owner OPERATOR(pg_catalog.=) 'pg_database_owner'::pg_catalog.regrole
	            AND (SELECT d.datdba OPERATOR(pg_catalog.=) me OR r.rolsuper
	                   FROM pg_catalog.pg_database d JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) d.datdba
	                  WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())) THEN
		RAISE EXCEPTION 'schema of % on this node belongs to role %, which is not trusted with a distributed table', table_name,
			(SELECT r.rolname FROM pg_catalog.pg_roles r WHERE r.oid OPERATOR(pg_catalog.=) schema_owner)
			USING ERRCODE = 'insufficient_privilege',
			      DETAIL = 'Its owner could drop or replace the table that other roles write through the coordinator.',
			      HINT = 'Use a schema owned by the role that distributes the table, or by a superuser.';
	END IF;
	IF relid IS NULL THEN
		EXECUTE create_sql;
		FOREACH statement IN ARRAY coalesce(extra_sql, '{}') LOOP
			EXECUTE statement;
		END LOOP;
		relid := to_regclass(table_name);
	ELSE
		-- A table already there is adopted only if it is this role's own plain
		-- table with nothing of anybody else's on it: another role's triggers,
		-- rules or policies would run with the rights of every role that
		-- writes through the coordinator.
		IF (SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) relid) OPERATOR(pg_catalog.<>) me
		   OR (SELECT c.relkind FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) relid) OPERATOR(pg_catalog.<>) 'r' THEN
			RAISE EXCEPTION 'table % exists on this node and is not a table of role %', table_name, current_user
				USING ERRCODE = 'insufficient_privilege',
				      DETAIL = 'A distributed table on a node belongs to the role that distributes it.',
				      HINT = 'Drop or rename the node''s table (its owner or a superuser may), then try again.';
		END IF;
		IF EXISTS (SELECT FROM pg_catalog.pg_trigger t WHERE t.tgrelid OPERATOR(pg_catalog.=) relid AND NOT t.tgisinternal
		                                                 AND t.tgname OPERATOR(pg_catalog.<>) 'ringshard_reject_misrouted_rows')
		   OR EXISTS (SELECT FROM pg_catalog.pg_rewrite w WHERE w.ev_class OPERATOR(pg_catalog.=) relid)
		   OR EXISTS (SELECT FROM pg_catalog.pg_policy p WHERE p.polrelid OPERATOR(pg_catalog.=) relid) THEN
			RAISE EXCEPTION 'table % exists on this node with triggers, rules or policies of its own', table_name
				USING ERRCODE = 'object_not_in_prerequisite_state',
				      DETAIL = 'They would run for every write the coordinator sends.',
				      HINT = 'Drop them on the node, or drop the node''s table, then try again.';
		END IF;
	END IF;
	-- The ring or map comes with the topology the coordinator pushes.
	IF nullif(ring, '') IS NOT NULL AND NOT EXISTS (SELECT FROM ringshard.rings r WHERE r.ring_name = ring) THEN
		RAISE EXCEPTION 'this node does not know ring "%" yet', ring
			USING ERRCODE = 'object_not_in_prerequisite_state',
			      DETAIL = 'The ring was created on the coordinator after its topology was last pushed to the nodes.',
			      HINT = 'Run SELECT * FROM ringshard.sync_topology(); on the coordinator, then distribute the table again.';
	END IF;
	IF nullif(map, '') IS NOT NULL AND NOT EXISTS (SELECT FROM ringshard.partition_maps m WHERE m.map_name = map) THEN
		RAISE EXCEPTION 'this node does not know partition map "%" yet', map
			USING ERRCODE = 'object_not_in_prerequisite_state',
			      DETAIL = 'The map was created on the coordinator after its topology was last pushed to the nodes.',
			      HINT = 'Run SELECT * FROM ringshard.sync_topology(); on the coordinator, then distribute the table again.';
	END IF;
	DELETE FROM ringshard.distributed_tables d WHERE d.table_name = relid;
	INSERT INTO ringshard.distributed_tables (table_name, key_column, key_attnum, ring_name, map_name, keyspace, keyspace_column)
	VALUES (relid, key_column, 0, nullif(ring, ''), nullif(map, ''), nullif(keyspace, ''), nullif(keyspace_column, ''));
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_trigger t WHERE t.tgrelid = relid AND t.tgname = 'ringshard_reject_misrouted_rows') THEN
		EXECUTE format('CREATE TRIGGER ringshard_reject_misrouted_rows BEFORE INSERT OR UPDATE ON %s
		                FOR EACH ROW EXECUTE FUNCTION ringshard.reject_misrouted_rows()', relid);
	END IF;
END
$$;
COMMENT ON FUNCTION ringshard_internal.adopt_distributed_table(text, text, text[], name, text, text, text, name) IS
	'on a worker: creates a distributed table (if missing) from the coordinator''s SQL and annotates it, with the trigger that refuses misrouted rows';
CREATE OR REPLACE FUNCTION ringshard.push_table_definition(table_name regclass) RETURNS text
	AS 'MODULE_PATHNAME', 'ringshard_push_table_definition' LANGUAGE C VOLATILE PARALLEL UNSAFE STRICT;
COMMENT ON FUNCTION ringshard.push_table_definition(regclass) IS
	'creates a distributed table, with its constraints and indexes, on every node with an address that lacks it';
CREATE OR REPLACE FUNCTION ringshard.create_distributed_table(table_name regclass) RETURNS bigint
	AS 'MODULE_PATHNAME', 'ringshard_create_distributed_table' LANGUAGE C VOLATILE PARALLEL UNSAFE STRICT;
COMMENT ON FUNCTION ringshard.create_distributed_table(regclass) IS
	'makes an annotated table a distributed table: creates it on every node, moves its rows to their replicas, and replaces it by a foreign table of the same name; returns the rows moved';
CREATE OR REPLACE FUNCTION ringshard_internal.ddl_guard() RETURNS event_trigger
	AS 'MODULE_PATHNAME', 'ringshard_ddl_guard' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION ringshard_internal.ddl_guard() IS
	'event trigger: refuses DDL on a distributed table that would miss the nodes (library not loaded at the command''s start)';
CREATE OR REPLACE FUNCTION ringshard_internal.guard_node_servers() RETURNS event_trigger
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	changed record;
	me oid := (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) current_user);
BEGIN
	IF (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.oid OPERATOR(pg_catalog.=) me) THEN
		RETURN;
	END IF;
	FOR changed IN
		SELECT s.srvname, (SELECT pg_catalog.string_agg(m.usename::pg_catalog.text, ', ' ORDER BY m.usename)
		                     FROM pg_catalog.pg_user_mappings m
		                    WHERE m.srvid OPERATOR(pg_catalog.=) s.oid AND m.umuser IS DISTINCT FROM me) AS others
		  FROM pg_catalog.pg_event_trigger_ddl_commands() c
		  JOIN pg_catalog.pg_foreign_server s ON s.oid OPERATOR(pg_catalog.=) c.objid
		  JOIN pg_catalog.pg_foreign_data_wrapper w ON w.oid OPERATOR(pg_catalog.=) s.srvfdw
		 WHERE c.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_foreign_server'::pg_catalog.regclass
		   AND w.fdwname OPERATOR(pg_catalog.=) 'ringshard'
	LOOP
		IF changed.others IS NOT NULL THEN
			RAISE EXCEPTION 'only a superuser may change node server "%" while other roles have user mappings for it', changed.srvname
				USING ERRCODE = 'insufficient_privilege',
				      DETAIL = format('Roles with a user mapping for it: %s. Their passwords go where the server''s options say.', changed.others),
				      HINT = 'Ask a superuser to change it, or drop those user mappings first.';
		END IF;
	END LOOP;
END
$$;
COMMENT ON FUNCTION ringshard_internal.guard_node_servers() IS
	'event trigger: refuses a change of a node''s server by a role below superuser while other roles have user mappings for it';
CREATE OR REPLACE FUNCTION ringshard.cluster_get(row_type anyelement, key text, keyspace text DEFAULT NULL)
	RETURNS SETOF anyelement
	LANGUAGE plpgsql STABLE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	relid regclass := pg_catalog.pg_typeof(row_type)::text::regclass;
	annotation ringshard.distributed_tables;
BEGIN
	IF key IS NULL THEN
		RAISE EXCEPTION 'a key must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	SELECT * INTO annotation FROM ringshard.distributed_tables d WHERE d.table_name = relid;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'table % is not a distributed table', relid USING ERRCODE = 'undefined_object';
	END IF;
	IF annotation.keyspace_column IS NOT NULL AND keyspace IS NULL THEN
		RAISE EXCEPTION 'table % takes its keyspace from column "%": pass the keyspace', relid, annotation.keyspace_column
			USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF annotation.keyspace_column IS NOT NULL THEN
		RETURN QUERY EXECUTE format('SELECT * FROM %s WHERE %I = $1::%s AND %I = $2::%s', relid,
			annotation.key_column, (SELECT pg_catalog.format_type(a.atttypid, a.atttypmod) FROM pg_catalog.pg_attribute a
			                         WHERE a.attrelid = relid AND a.attname = annotation.key_column),
			annotation.keyspace_column, (SELECT pg_catalog.format_type(a.atttypid, a.atttypmod) FROM pg_catalog.pg_attribute a
			                              WHERE a.attrelid = relid AND a.attname = annotation.keyspace_column))
			USING key, keyspace;
	ELSE
		RETURN QUERY EXECUTE format('SELECT * FROM %s WHERE %I = $1::%s', relid, annotation.key_column,
			(SELECT pg_catalog.format_type(a.atttypid, a.atttypmod) FROM pg_catalog.pg_attribute a
			  WHERE a.attrelid = relid AND a.attname = annotation.key_column))
			USING key;
	END IF;
END
$$;
COMMENT ON FUNCTION ringshard.cluster_get(anyelement, text, text) IS
	'rows of a distributed table with this key (pass NULL::table): SELECT * FROM table WHERE key = $1, read from one healthy replica';
CREATE OR REPLACE FUNCTION ringshard.cluster_fanout(row_type anyelement, where_clause text DEFAULT NULL,
										 score_column name DEFAULT NULL, k integer DEFAULT NULL,
										 allow_partial boolean DEFAULT false)
	RETURNS SETOF anyelement
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	relid regclass := pg_catalog.pg_typeof(row_type)::text::regclass;
	previous text := coalesce(pg_catalog.current_setting('ringshard.allow_partial_reads', true), 'off');
BEGIN
	IF k IS NOT NULL AND k < 1 THEN
		RAISE EXCEPTION 'k must be positive, got %', k USING ERRCODE = 'invalid_parameter_value';
	END IF;
	PERFORM pg_catalog.set_config('ringshard.allow_partial_reads', allow_partial::text, true);
	RETURN QUERY EXECUTE format('SELECT * FROM %s t WHERE (%s)%s%s', relid, coalesce(where_clause, 'true'),
		CASE WHEN score_column IS NOT NULL THEN format(' ORDER BY t.%I DESC NULLS LAST', score_column) ELSE '' END,
		CASE WHEN k IS NOT NULL THEN format(' LIMIT %s', k) ELSE '' END);
	PERFORM pg_catalog.set_config('ringshard.allow_partial_reads', previous, true);
END
$$;
COMMENT ON FUNCTION ringshard.cluster_fanout(anyelement, text, name, integer, boolean) IS
	'SELECT * FROM table WHERE where_clause [ORDER BY score_column DESC LIMIT k], read from every node in parallel; allow_partial accepts missing nodes (ringshard.allow_partial_reads)';
CREATE OR REPLACE FUNCTION ringshard.last_fanout_missing() RETURNS text[]
	AS 'MODULE_PATHNAME', 'ringshard_last_fanout_missing' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION ringshard.last_fanout_missing() IS 'the nodes the session''s last fan-out read could not reach';
COMMENT ON TABLE ringshard.transaction_records IS
	'the prepared parts of committed coordinator transactions, until recovery finds them committed on their node';
CREATE OR REPLACE FUNCTION ringshard.recover_prepared_transactions()
	RETURNS TABLE (node text, committed integer, rolled_back integer, in_progress integer, error text)
	AS 'MODULE_PATHNAME', 'ringshard_recover_prepared_transactions' LANGUAGE C VOLATILE PARALLEL UNSAFE STRICT;
COMMENT ON FUNCTION ringshard.recover_prepared_transactions() IS
	'on every node, commits this coordinator''s prepared transactions that have a record and rolls back the others whose coordinator transaction ended; the watchdog runs it every round';
-- from extension/82_write_queue.sql
COMMENT ON TABLE ringshard.write_queue IS
	'rows a replica missed because it was down, waiting to be replayed to it as the role that wrote them';
COMMENT ON TABLE ringshard.dead_letters IS
	'queued writes their node kept refusing, with the last reason; they are not replayed (insert them again by hand once the cause is fixed)';
CREATE OR REPLACE VIEW ringshard.write_queue_status AS
SELECT n.node_name AS node,
       (SELECT count(*) FROM ringshard.write_queue q WHERE q.node_name = n.node_name) AS queued,
       (SELECT min(q.queued_at) FROM ringshard.write_queue q WHERE q.node_name = n.node_name) AS oldest,
       pg_catalog.now() - (SELECT min(q.queued_at) FROM ringshard.write_queue q WHERE q.node_name = n.node_name) AS oldest_age,
       (SELECT max(q.attempts) FROM ringshard.write_queue q WHERE q.node_name = n.node_name) AS max_attempts,
       (SELECT count(*) FROM ringshard.dead_letters d WHERE d.node_name = n.node_name) AS dead_letters,
       (SELECT q.last_error FROM ringshard.write_queue q
         WHERE q.node_name = n.node_name AND q.last_error IS NOT NULL
           AND (pg_catalog.pg_has_role(q.writer, 'MEMBER') OR pg_catalog.pg_has_role('ringshard_admin', 'MEMBER'))
         ORDER BY q.ordinal DESC LIMIT 1) AS last_error
  FROM ringshard.nodes n
 WHERE EXISTS (SELECT FROM ringshard.write_queue q WHERE q.node_name = n.node_name)
    OR EXISTS (SELECT FROM ringshard.dead_letters d WHERE d.node_name = n.node_name);
COMMENT ON VIEW ringshard.write_queue_status IS
	'queued writes per node: how many, how old, refusals, dead letters, and the last refusal of a write of yours';
CREATE OR REPLACE FUNCTION ringshard.replay_queue(node text, batch integer DEFAULT 1000) RETURNS integer
	AS 'MODULE_PATHNAME', 'ringshard_replay_queue' LANGUAGE C VOLATILE PARALLEL UNSAFE STRICT;
COMMENT ON FUNCTION ringshard.replay_queue(text, integer) IS
	'delivers up to batch queued writes to a node, oldest first, each as the role that made it, exactly once (it commits with this transaction); a refused write stays queued with its error, and moves to dead_letters after ringshard.replay_max_attempts refusals; returns how many were delivered';
CREATE OR REPLACE FUNCTION ringshard.watchdog_tick(mark_health boolean DEFAULT true, batch integer DEFAULT 1000)
	RETURNS TABLE (node text, reachable boolean, delivered integer, still_queued bigint)
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	probe record;
BEGIN
	FOR probe IN SELECT h.node, h.reachable FROM ringshard.node_health() h LOOP
		node := probe.node;
		reachable := probe.reachable;
		delivered := 0;
		IF probe.reachable THEN
			-- One node's trouble must not stop the round for the others.
			BEGIN
				delivered := ringshard.replay_queue(probe.node, batch);
			EXCEPTION WHEN OTHERS THEN
				RAISE WARNING 'replaying the queue of node "%" failed: %', probe.node, SQLERRM;
			END;
		END IF;
		still_queued := (SELECT count(*) FROM ringshard.write_queue q WHERE q.node_name = probe.node);
		IF mark_health THEN
			-- up: it answers and misses no write (none queued, none set aside as a dead letter)
			UPDATE ringshard.nodes n SET is_up = x.up
			  FROM (SELECT probe.reachable AND still_queued = 0
			               AND NOT EXISTS (SELECT FROM ringshard.dead_letters d WHERE d.node_name = probe.node) AS up) x
			 WHERE n.node_name = probe.node AND n.is_up IS DISTINCT FROM x.up;
		END IF;
		RETURN NEXT;
	END LOOP;
END
$$;
COMMENT ON FUNCTION ringshard.watchdog_tick(boolean, integer) IS
	'one round of the health watchdog: probes nodes, replays queues, marks nodes up (reachable, nothing queued, no dead letter) or down';
-- from extension/85_plproxy.sql
CREATE OR REPLACE FUNCTION ringshard_internal.count_topology_change() RETURNS trigger
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
BEGIN
	UPDATE ringshard.cluster_state SET change_counter = change_counter + 1;
	RETURN NULL;
END
$$;
COMMENT ON FUNCTION ringshard_internal.count_topology_change() IS 'trigger: counts catalog changes, for PL/Proxy''s cluster version';
CREATE OR REPLACE FUNCTION ringshard.plproxy_partitions(map text) RETURNS SETOF text
	AS 'MODULE_PATHNAME', 'ringshard_plproxy_partitions' LANGUAGE C STABLE PARALLEL UNSAFE STRICT;
COMMENT ON FUNCTION ringshard.plproxy_partitions(text) IS
	'256 connection strings, partition by partition: the first healthy holder of each (PL/Proxy''s get_cluster_partitions)';
CREATE OR REPLACE FUNCTION ringshard.plproxy_version(map text) RETURNS integer
	LANGUAGE sql STABLE PARALLEL UNSAFE STRICT SET search_path = pg_catalog, ringshard, pg_temp AS $$
	SELECT CASE WHEN EXISTS (SELECT FROM ringshard.partition_maps p WHERE p.map_name = map)
	            THEN (SELECT (s.change_counter % 2147483647)::integer + 1 FROM ringshard.cluster_state s) END;
$$;
COMMENT ON FUNCTION ringshard.plproxy_version(text) IS
	'a version that grows with every change of maps or nodes (PL/Proxy''s get_cluster_version); NULL for an unknown map';
CREATE OR REPLACE FUNCTION ringshard.install_plproxy_bridge() RETURNS text
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
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
-- from extension/86_rebalance.sql
COMMENT ON TABLE ringshard.placements IS
	'the topology (ring members and weights, or partition assignments) each distributed table''s rows are laid out under';
COMMENT ON TABLE ringshard.rebalance_progress IS 'the steps of an unfinished rebalance and how far each got';
CREATE OR REPLACE VIEW ringshard.rebalance_status AS
SELECT p.table_name,
       count(*) AS steps,
       count(*) FILTER (WHERE p.state = 'done') AS steps_done,
       coalesce(sum(p.rows_total), 0)::bigint AS rows_total,
       sum(p.rows_copied)::bigint AS rows_done,
       least(round(CASE WHEN coalesce(sum(p.rows_total), 0) > 0
                        THEN 100.0 * sum(p.rows_copied) / sum(p.rows_total)
                        ELSE 100.0 * count(*) FILTER (WHERE p.state = 'done') / count(*) END, 1),
             CASE WHEN count(*) FILTER (WHERE p.state <> 'done') > 0 THEN 99.9 END) AS percent,
       max(p.updated_at) AS updated_at
  FROM ringshard.rebalance_progress p
 GROUP BY p.table_name;
COMMENT ON VIEW ringshard.rebalance_status IS
	'per table with a running (or interrupted) rebalance: steps, steps done, rows of the whole plan, rows copied so far, percent done';
CREATE OR REPLACE FUNCTION ringshard_internal.ring_move_plan(old_nodes text[], old_weights float8[], old_vnodes integer,
										 old_replicas integer, ring text)
	RETURNS TABLE (range_start ringtoken, range_end ringtoken, fraction float8, old_nodes text[], new_nodes text[])
	AS 'MODULE_PATHNAME', 'ringshard_ring_move_plan' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION ringshard_internal.ring_move_plan(text[], float8[], integer, integer, text) IS
	'token ranges whose replica set differs between a ring as it was (members, weights, vnodes, replicas) and as it is now';
CREATE OR REPLACE FUNCTION ringshard_internal.placement_snapshot(table_name regclass) RETURNS json
	LANGUAGE sql STABLE PARALLEL UNSAFE STRICT SET search_path = pg_catalog, ringshard, pg_temp AS $$
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
COMMENT ON FUNCTION ringshard_internal.placement_snapshot(regclass) IS 'the ring or map a table''s rows would be laid out under now, as JSON';
CREATE OR REPLACE FUNCTION ringshard_internal.partition_holders_of(snapshot json, map text)
	RETURNS TABLE (partition integer, old_nodes text[], new_nodes text[])
	LANGUAGE sql STABLE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
	SELECT p,
	       coalesce((SELECT array_agg(DISTINCT a->>'node' ORDER BY a->>'node')
	                   FROM json_array_elements(snapshot->'assignments') a
	                  WHERE p BETWEEN (a->>'start')::int AND (a->>'end')::int), '{}'),
	       coalesce((SELECT array_agg(DISTINCT x.node_name ORDER BY x.node_name)
	                   FROM ringshard.partition_assignments x
	                  WHERE x.map_name = map AND p BETWEEN x.partition_start AND x.partition_end), '{}')
	  FROM generate_series(0, 255) p;
$$;
COMMENT ON FUNCTION ringshard_internal.partition_holders_of(json, text) IS 'per partition, its holders under a placement snapshot and now';
CREATE OR REPLACE FUNCTION ringshard_internal.ring_step_predicate(key_column name, range_start ringtoken, range_end ringtoken)
	RETURNS text
	LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
	SELECT CASE WHEN range_start OPERATOR(pg_catalog.<) range_end
	            THEN pg_catalog.format('(pg_catalog.ring_token(t.%1$I) > %2$L::pg_catalog.ringtoken AND pg_catalog.ring_token(t.%1$I) <= %3$L::pg_catalog.ringtoken)',
	                                   key_column, range_start, range_end)
	            ELSE pg_catalog.format('(pg_catalog.ring_token(t.%1$I) > %2$L::pg_catalog.ringtoken OR pg_catalog.ring_token(t.%1$I) <= %3$L::pg_catalog.ringtoken)',
	                                   key_column, range_start, range_end) END;
$$;
COMMENT ON FUNCTION ringshard_internal.ring_step_predicate(name, ringtoken, ringtoken) IS
	'rebalance: the SQL condition for the rows of a ring''s token range (start, end], wrapping past the top';
CREATE OR REPLACE FUNCTION ringshard_internal.partition_step_predicate(table_name regclass, first_partition integer,
															 last_partition integer)
	RETURNS text
	LANGUAGE sql STABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
	SELECT pg_catalog.format('(pg_catalog.partition_for(%s, t.%I) BETWEEN %s AND %s)',
	       CASE WHEN d.keyspace_column IS NULL THEN pg_catalog.quote_literal(d.keyspace)
	            WHEN (SELECT pg_catalog.format_type(a.atttypid, NULL) FROM pg_catalog.pg_attribute a
	                   WHERE a.attrelid OPERATOR(pg_catalog.=) d.table_name AND a.attnum OPERATOR(pg_catalog.=) d.keyspace_attnum)
	                 IN ('text', 'character varying')
	            THEN pg_catalog.format('t.%I::pg_catalog.text', d.keyspace_column)
	            ELSE pg_catalog.format('pg_catalog.convert_from(ringshard.key_bytes(t.%I), ''UTF8'')', d.keyspace_column) END,
	       d.key_column, first_partition, last_partition)
	  FROM ringshard.distributed_tables d WHERE d.table_name OPERATOR(pg_catalog.=) partition_step_predicate.table_name;
$$;
COMMENT ON FUNCTION ringshard_internal.partition_step_predicate(regclass, integer, integer) IS
	'rebalance: the SQL condition for the rows of a table in the partitions first..last of its map';
CREATE OR REPLACE FUNCTION ringshard_internal.checked_step_predicate(table_name regclass, predicate text)
	RETURNS text
	LANGUAGE plpgsql STABLE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	annotation ringshard.distributed_tables;
	numbers text[];
	rebuilt text;
BEGIN
	SELECT * INTO annotation FROM ringshard.distributed_tables d WHERE d.table_name = checked_step_predicate.table_name;
	IF annotation.ring_name IS NOT NULL THEN
		numbers := regexp_match(predicate, '> ''([0-9]{1,20})''::pg_catalog\.ringtoken (AND|OR) .* <= ''([0-9]{1,20})''::pg_catalog\.ringtoken\)$');
		IF numbers IS NOT NULL THEN
			rebuilt := ringshard_internal.ring_step_predicate(annotation.key_column, numbers[1]::ringtoken, numbers[3]::ringtoken);
		END IF;
	ELSIF annotation.map_name IS NOT NULL THEN
		numbers := regexp_match(predicate, ' BETWEEN ([0-9]{1,3}) AND ([0-9]{1,3})\)$');
		IF numbers IS NOT NULL THEN
			rebuilt := ringshard_internal.partition_step_predicate(table_name, numbers[1]::integer, numbers[2]::integer);
		END IF;
	END IF;
	IF rebuilt IS DISTINCT FROM predicate THEN
		RAISE EXCEPTION 'a recorded rebalance step of % was not made by ringshard', table_name
			USING ERRCODE = 'data_corrupted',
			      DETAIL = format('Its condition is: %s', predicate),
			      HINT = 'Delete the table''s rows from ringshard.rebalance_progress and call rebalance again.';
	END IF;
	RETURN predicate;
END
$$;
COMMENT ON FUNCTION ringshard_internal.checked_step_predicate(regclass, text) IS
	'rebalance: a recorded step''s condition, if it is exactly what ringshard builds for the table; else an error';
CREATE OR REPLACE FUNCTION ringshard.rebalance_plan(table_name regclass)
	RETURNS TABLE (step integer, predicate text, fraction float8, old_nodes text[], new_nodes text[],
				   source text, targets text[], deletes text[])
	LANGUAGE plpgsql STABLE PARALLEL UNSAFE STRICT SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	annotation ringshard.distributed_tables;
	placed json;
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
		       ringshard_internal.ring_step_predicate(annotation.key_column, m.range_start, m.range_end),
		       m.fraction, m.old_nodes, m.new_nodes,
		       -- copy from a node that keeps the rows if there is one: it stays busy anyway
		       coalesce((SELECT o FROM unnest(m.old_nodes) WITH ORDINALITY u(o, i) WHERE o = ANY (m.new_nodes) ORDER BY i LIMIT 1),
		                m.old_nodes[1]),
		       ARRAY(SELECT n FROM unnest(m.new_nodes) n WHERE n <> ALL (m.old_nodes)),
		       ARRAY(SELECT o FROM unnest(m.old_nodes) o WHERE o <> ALL (m.new_nodes))
		  FROM ringshard_internal.ring_move_plan(
		         ARRAY(SELECT x->>'node' FROM json_array_elements(placed->'members') x),
		         ARRAY(SELECT (x->>'weight')::float8 FROM json_array_elements(placed->'members') x),
		         (placed->>'vnodes')::integer, (placed->>'replication_factor')::integer,
		         annotation.ring_name) m;
	ELSE
		RETURN QUERY
		WITH changed AS (
			SELECT h.partition, h.old_nodes, h.new_nodes,
			       h.partition - row_number() OVER (PARTITION BY h.old_nodes, h.new_nodes ORDER BY h.partition) AS run
			  FROM ringshard_internal.partition_holders_of(placed, annotation.map_name) h
			 WHERE h.old_nodes IS DISTINCT FROM h.new_nodes AND cardinality(h.old_nodes) > 0),
		     runs AS (
			SELECT min(c.partition) AS first_p, max(c.partition) AS last_p, c.old_nodes, c.new_nodes
			  FROM changed c GROUP BY c.old_nodes, c.new_nodes, c.run)
		SELECT (row_number() OVER (ORDER BY r.first_p))::integer,
		       ringshard_internal.partition_step_predicate(rebalance_plan.table_name, r.first_p, r.last_p),
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
CREATE OR REPLACE FUNCTION ringshard_internal.node_value(node text, sql text, params text[] DEFAULT '{}', in_transaction boolean DEFAULT true)
	RETURNS text
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
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
COMMENT ON FUNCTION ringshard_internal.node_value(text, text, text[], boolean) IS 'runs one statement on a node and returns its first value, or raises the node''s error';
CREATE OR REPLACE FUNCTION ringshard_internal.check_rebalance_nodes(table_name regclass, nodes text[]) RETURNS void
	LANGUAGE plpgsql STABLE PARALLEL SAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	missing text;
	unaddressed text;
BEGIN
	SELECT min(x.node) FILTER (WHERE n.node_name IS NULL), min(x.node) FILTER (WHERE n.node_name IS NOT NULL AND n.server_name IS NULL)
	  INTO missing, unaddressed
	  FROM (SELECT DISTINCT u.node FROM unnest(nodes) u(node)) x
	  LEFT JOIN ringshard.nodes n ON n.node_name = x.node;
	IF missing IS NOT NULL THEN
		RAISE EXCEPTION 'rebalance of % needs node "%", which is not in ringshard.nodes', ringshard.qualified_name(table_name), missing
			USING ERRCODE = 'object_not_in_prerequisite_state',
			      DETAIL = 'The table''s rows are laid out on it: the plan copies rows from it or deletes rows there.',
			      HINT = 'Add the node back with its address (ringshard.add_node(node, address, ring), then remove_node), then rebalance; a node leaving a ring is kept until the rebalance that moves its rows.';
	END IF;
	IF unaddressed IS NOT NULL THEN
		RAISE EXCEPTION 'rebalance of % needs node "%", which has no address', ringshard.qualified_name(table_name), unaddressed
			USING ERRCODE = 'object_not_in_prerequisite_state',
			      HINT = 'Give it one with ringshard.set_node_address().';
	END IF;
END
$$;
COMMENT ON FUNCTION ringshard_internal.check_rebalance_nodes(regclass, text[]) IS
	'raises unless every node a rebalance plan names is in ringshard.nodes with an address';
CREATE OR REPLACE FUNCTION ringshard_internal.count_plan_rows(table_name regclass, plan_steps integer[], plan_sources text[],
										  plan_predicates text[])
	RETURNS TABLE (step integer, rows bigint)
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	chunk record;
	counts bigint[];
BEGIN
	FOR chunk IN
		SELECT u.source, array_agg(u.step ORDER BY u.step) AS steps, array_agg(u.predicate ORDER BY u.step) AS predicates
		  FROM (SELECT x.step, x.source, x.predicate,
		               (row_number() OVER (PARTITION BY x.source ORDER BY x.step) - 1) / 100 AS part
		          FROM unnest(plan_steps, plan_sources, plan_predicates) x(step, source, predicate)) u
		 GROUP BY u.source, u.part ORDER BY u.source, u.part
	LOOP
		counts := ringshard_internal.node_value(chunk.source,
			format('SELECT ARRAY[%s] FROM %s t',
			       (SELECT string_agg(format('pg_catalog.count(*) FILTER (WHERE %s)',
			                                 ringshard_internal.checked_step_predicate(table_name, p.predicate)), ', ' ORDER BY p.i)
			          FROM unnest(chunk.predicates) WITH ORDINALITY p(predicate, i)),
			       ringshard.qualified_name(table_name)),
			'{}', false)::bigint[];
		RETURN QUERY SELECT c.step, c.rows FROM unnest(chunk.steps, counts) c(step, rows);
	END LOOP;
END
$$;
COMMENT ON FUNCTION ringshard_internal.count_plan_rows(regclass, integer[], text[], text[]) IS
	'for each step of a plan (step numbers, sources, predicates), the rows it will copy, counted on its source';
CREATE OR REPLACE FUNCTION ringshard_internal.rebalance_counted_plan(table_name regclass) RETURNS json
	LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	planned json;
BEGIN
	IF EXISTS (SELECT FROM ringshard.rebalance_progress p WHERE p.table_name = rebalance_counted_plan.table_name) THEN
		SELECT json_agg(json_build_object('step', p.step, 'source', p.source, 'targets', p.targets,
		                                  'deletes', p.deletes, 'rows', coalesce(p.rows_total, 0)) ORDER BY p.step)
		  INTO planned
		  FROM ringshard.rebalance_progress p WHERE p.table_name = rebalance_counted_plan.table_name;
		RETURN coalesce(planned, '[]');
	END IF;
	SELECT json_agg(json_build_object('step', p.step, 'source', p.source, 'targets', p.targets,
	                                  'deletes', p.deletes, 'predicate', p.predicate) ORDER BY p.step)
	  INTO planned
	  FROM ringshard.rebalance_plan(table_name) p;
	planned := coalesce(planned, '[]');
	PERFORM ringshard_internal.check_rebalance_nodes(table_name,
		ARRAY(SELECT x.node FROM json_array_elements(planned) s,
		             LATERAL (SELECT s->>'source' UNION ALL SELECT json_array_elements_text(s->'targets')
		                      UNION ALL SELECT json_array_elements_text(s->'deletes')) x(node)));
	SELECT coalesce(json_agg(json_build_object('step', (s->>'step')::integer, 'source', s->'source', 'targets', s->'targets',
	                                           'deletes', s->'deletes', 'rows', c.rows) ORDER BY c.step), '[]')
	  INTO planned
	  FROM json_array_elements(planned) s
	  JOIN ringshard_internal.count_plan_rows(table_name,
	         ARRAY(SELECT (x->>'step')::integer FROM json_array_elements(planned) x),
	         ARRAY(SELECT x->>'source' FROM json_array_elements(planned) x),
	         ARRAY(SELECT x->>'predicate' FROM json_array_elements(planned) x)) c ON c.step = (s->>'step')::integer;
	RETURN planned;
END
$$;
COMMENT ON FUNCTION ringshard_internal.rebalance_counted_plan(regclass) IS
	'a table''s rebalance steps (recorded, or from its placement to the current topology) with the rows each copies, counted on its source, as JSON';
CREATE OR REPLACE FUNCTION ringshard_internal.summarize_rebalance(planned json)
	RETURNS TABLE (from_node text, to_node text, steps integer, rows bigint, share numeric)
	LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
	SELECT s.source, s.target, count(*)::integer, sum(s.rows)::bigint,
	       round(sum(s.rows) / nullif(sum(sum(s.rows)) OVER (), 0), 4)
	  FROM (SELECT x->>'source' AS source, t.target, (x->>'rows')::bigint AS rows
	          FROM json_array_elements(planned) x, json_array_elements_text(x->'targets') t(target)) s
	 GROUP BY s.source, s.target ORDER BY s.source COLLATE "C", s.target COLLATE "C";
$$;
COMMENT ON FUNCTION ringshard_internal.summarize_rebalance(json) IS
	'per (source, target) pair of a counted rebalance plan: steps, rows to copy, share of the copies';
CREATE OR REPLACE FUNCTION ringshard.rebalance_plan_summary(table_name regclass)
	RETURNS TABLE (from_node text, to_node text, steps integer, rows bigint, share numeric)
	LANGUAGE sql VOLATILE STRICT PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
	SELECT * FROM ringshard_internal.summarize_rebalance(ringshard_internal.rebalance_counted_plan(table_name));
$$;
COMMENT ON FUNCTION ringshard.rebalance_plan_summary(regclass) IS
	'a table''s rebalance plan per (source, target) pair: steps, rows to copy (counted on the sources) and share of the copies; the recorded plan while a rebalance is unfinished';
CREATE OR REPLACE FUNCTION ringshard_internal.rebalance_summary_text(table_name regclass, title text) RETURNS text
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	planned json := ringshard_internal.rebalance_counted_plan(table_name);
	heading text;
	body text;
BEGIN
	SELECT format('%s: %s steps, %s rows to copy', title, count(*), coalesce(sum((x->>'rows')::bigint), 0))
	  INTO heading FROM json_array_elements(planned) x;
	WITH s AS (SELECT r.from_node, r.to_node, r.steps::text AS steps, r.rows::text AS rows, coalesce(r.share::text, '') AS share
	             FROM ringshard_internal.summarize_rebalance(planned) r),
	     w AS (SELECT greatest(9, max(length(s.from_node))) AS f, greatest(7, max(length(s.to_node))) AS t,
	                  greatest(5, max(length(s.steps))) AS st, greatest(4, max(length(s.rows))) AS r,
	                  greatest(5, max(length(s.share))) AS sh FROM s)
	SELECT format(' %s | %s | %s | %s | %s', rpad('from_node', w.f), rpad('to_node', w.t), rpad('steps', w.st),
	              rpad('rows', w.r), rpad('share', w.sh)) || E'\n' ||
	       format('-%s-+-%s-+-%s-+-%s-+-%s-', repeat('-', w.f), repeat('-', w.t), repeat('-', w.st), repeat('-', w.r),
	              repeat('-', w.sh)) || E'\n' ||
	       string_agg(format(' %s | %s | %s | %s | %s', rpad(s.from_node, w.f), rpad(s.to_node, w.t), lpad(s.steps, w.st),
	                         lpad(s.rows, w.r), lpad(s.share, w.sh)), E'\n' ORDER BY s.from_node COLLATE "C", s.to_node COLLATE "C")
	  INTO body
	  FROM s, w GROUP BY w.f, w.t, w.st, w.r, w.sh;
	RETURN heading || coalesce(E'\n' || body, '');
END
$$;
COMMENT ON FUNCTION ringshard_internal.rebalance_summary_text(regclass, text) IS
	'the title with the plan''s steps and rows to copy, then rebalance_plan_summary() as an aligned text table (for notices)';
CREATE OR REPLACE FUNCTION ringshard_internal.rebalance_begin(table_name regclass, dry_run boolean, batch integer, pause_ms integer)
	RETURNS boolean
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	qualified text;
	status ringshard.rebalance_status;
BEGIN
	IF table_name IS NULL OR dry_run IS NULL OR batch IS NULL OR batch < 1 OR pause_ms IS NULL OR pause_ms < 0 THEN
		RAISE EXCEPTION 'rebalance needs a table, a positive batch and a pause of at least 0 ms'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF NOT EXISTS (SELECT FROM ringshard.distributed_tables d WHERE d.table_name = rebalance_begin.table_name) THEN
		RAISE EXCEPTION 'table % is not annotated', table_name USING ERRCODE = 'undefined_object';
	END IF;
	qualified := ringshard.qualified_name(table_name);

	IF dry_run THEN
		RAISE NOTICE '%', ringshard_internal.rebalance_summary_text(table_name,
			format('rebalance plan of %s (dry run, nothing changed)', qualified))
			USING HINT = format('ringshard.rebalance_plan(%L) lists the steps, ringshard.rebalance_plan_summary(%L) gives this table as rows.',
			                    qualified, qualified);
		RETURN false;
	END IF;

	-- Queued writes are delivered to the nodes they were queued for: they
	-- must land before those nodes' rows move.
	IF EXISTS (SELECT FROM ringshard.write_queue q WHERE q.table_name = rebalance_begin.table_name) THEN
		RAISE EXCEPTION 'table % has queued writes', table_name
			USING ERRCODE = 'object_not_in_prerequisite_state',
			      HINT = 'Let the watchdog deliver them (see ringshard.write_queue_status), or call ringshard.replay_queue().';
	END IF;

	IF EXISTS (SELECT FROM ringshard.rebalance_progress p WHERE p.table_name = rebalance_begin.table_name) THEN
		-- Steps recorded before their rows were counted (by an older version) are counted now.
		UPDATE ringshard.rebalance_progress p SET rows_total = c.rows
		  FROM ringshard_internal.count_plan_rows(rebalance_begin.table_name,
		         ARRAY(SELECT q.step FROM ringshard.rebalance_progress q WHERE q.table_name = rebalance_begin.table_name AND q.rows_total IS NULL ORDER BY q.step),
		         ARRAY(SELECT q.source FROM ringshard.rebalance_progress q WHERE q.table_name = rebalance_begin.table_name AND q.rows_total IS NULL ORDER BY q.step),
		         ARRAY(SELECT q.predicate FROM ringshard.rebalance_progress q WHERE q.table_name = rebalance_begin.table_name AND q.rows_total IS NULL ORDER BY q.step)) c
		 WHERE p.table_name = rebalance_begin.table_name AND p.step = c.step;
		SELECT * INTO status FROM ringshard.rebalance_status s WHERE s.table_name = rebalance_begin.table_name;
		RAISE NOTICE 'rebalance of %: resuming at step % of %, rows % of % copied', qualified,
			(SELECT min(p.step) FROM ringshard.rebalance_progress p
			  WHERE p.table_name = rebalance_begin.table_name AND p.state <> 'done'),
			status.steps, status.rows_done, status.rows_total;
		RETURN true;
	END IF;

	-- A new move: check the plan can run before anything changes.
	PERFORM ringshard_internal.check_rebalance_nodes(table_name,
		ARRAY(SELECT x.node FROM ringshard.rebalance_plan(table_name) p, unnest(ARRAY[p.source] || p.targets || p.deletes) x(node)));
	PERFORM ringshard.sync_topology();
	PERFORM ringshard.push_table_definition(table_name);
	INSERT INTO ringshard.rebalance_progress (table_name, step, predicate, source, targets, deletes, fraction)
	SELECT rebalance_begin.table_name, p.step, p.predicate, p.source, p.targets, p.deletes, p.fraction
	  FROM ringshard.rebalance_plan(table_name) p;
	UPDATE ringshard.rebalance_progress p SET rows_total = c.rows
	  FROM ringshard_internal.count_plan_rows(rebalance_begin.table_name,
	         ARRAY(SELECT q.step FROM ringshard.rebalance_progress q WHERE q.table_name = rebalance_begin.table_name ORDER BY q.step),
	         ARRAY(SELECT q.source FROM ringshard.rebalance_progress q WHERE q.table_name = rebalance_begin.table_name ORDER BY q.step),
	         ARRAY(SELECT q.predicate FROM ringshard.rebalance_progress q WHERE q.table_name = rebalance_begin.table_name ORDER BY q.step)) c
	 WHERE p.table_name = rebalance_begin.table_name AND p.step = c.step;
	RAISE NOTICE '%', ringshard_internal.rebalance_summary_text(table_name, format('rebalance of %s', qualified));
	RETURN true;
END
$$;
COMMENT ON FUNCTION ringshard_internal.rebalance_begin(regclass, boolean, integer, integer) IS
	'rebalance(): checks; a dry run prints the plan summary; a new move pushes the topology, records the plan with its rows counted on the sources; returns whether to move';
CREATE OR REPLACE FUNCTION ringshard_internal.rebalance_unfinished_steps(table_name regclass) RETURNS integer[]
	LANGUAGE sql STABLE PARALLEL SAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
	SELECT coalesce(array_agg(p.step ORDER BY p.step), '{}') FROM ringshard.rebalance_progress p
	 WHERE p.table_name = rebalance_unfinished_steps.table_name AND p.state <> 'done';
$$;
COMMENT ON FUNCTION ringshard_internal.rebalance_unfinished_steps(regclass) IS 'rebalance(): the steps not done yet, in order';
CREATE OR REPLACE FUNCTION ringshard_internal.rebalance_copy_start(table_name regclass, step integer) RETURNS text
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
BEGIN
	UPDATE ringshard.rebalance_progress p SET rows_copied = 0, updated_at = now()
	 WHERE p.table_name = rebalance_copy_start.table_name AND p.step = rebalance_copy_start.step AND p.state = 'pending';
	RETURN CASE WHEN FOUND THEN '(0,0)' END;
END
$$;
COMMENT ON FUNCTION ringshard_internal.rebalance_copy_start(regclass, integer) IS 'rebalance(): the ctid a step''s copy starts after, or NULL if the step is copied';
CREATE OR REPLACE FUNCTION ringshard_internal.rebalance_copy_page(table_name regclass, step integer, after_ctid text, batch integer)
	RETURNS text
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	item ringshard.rebalance_progress;
	key_column name;
	qualified text := ringshard.qualified_name(table_name);
	columns text;
	page json;
	page_rows integer;
	target text;
	missing text;
BEGIN
	SELECT * INTO item FROM ringshard.rebalance_progress p
	 WHERE p.table_name = rebalance_copy_page.table_name AND p.step = rebalance_copy_page.step;
	SELECT d.key_column INTO key_column FROM ringshard.distributed_tables d WHERE d.table_name = rebalance_copy_page.table_name;
	SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum) INTO columns
	  FROM pg_catalog.pg_attribute a WHERE a.attrelid = table_name AND a.attnum > 0 AND NOT a.attisdropped;
	page := ringshard_internal.node_value(item.source, format(
		'SELECT pg_catalog.json_build_object(''rows'', coalesce(pg_catalog.json_agg(pg_catalog.row_to_json(s) ORDER BY s.row_ctid), ''[]''::pg_catalog.json),
		                                     ''last'', pg_catalog.max(s.row_ctid)::pg_catalog.text)
		   FROM (SELECT t.ctid AS row_ctid, %s FROM %s t
		          WHERE %s AND t.ctid OPERATOR(pg_catalog.>) $1::pg_catalog.tid ORDER BY t.ctid LIMIT %s) s',
		(SELECT string_agg('t.' || quote_ident(a.attname), ', ' ORDER BY a.attnum)
		   FROM pg_catalog.pg_attribute a WHERE a.attrelid = table_name AND a.attnum > 0 AND NOT a.attisdropped),
		qualified, ringshard_internal.checked_step_predicate(table_name, item.predicate), batch), ARRAY[after_ctid], false)::json;
	page_rows := json_array_length(page->'rows');
	IF page_rows > 0 THEN
		FOREACH target IN ARRAY item.targets LOOP
			PERFORM ringshard_internal.node_value(target, format(
				'INSERT INTO %1$s (%2$s) SELECT %2$s FROM pg_catalog.json_populate_recordset(NULL::%1$s, $1::pg_catalog.json) r
				  WHERE NOT EXISTS (SELECT FROM %1$s t WHERE t.%3$I IS NOT DISTINCT FROM r.%3$I
				                       AND (SELECT row(t.*) IS NOT DISTINCT FROM row(r.*)))',
				qualified, columns, key_column), ARRAY[(page->'rows')::text]);
			missing := ringshard_internal.node_value(target, format(
				'SELECT pg_catalog.count(*) FROM pg_catalog.json_populate_recordset(NULL::%1$s, $1::pg_catalog.json) r
				  WHERE NOT EXISTS (SELECT FROM %1$s t WHERE t.%2$I IS NOT DISTINCT FROM r.%2$I
				                       AND (SELECT row(t.*) IS NOT DISTINCT FROM row(r.*)))',
				qualified, key_column), ARRAY[(page->'rows')::text]);
			IF missing <> '0' THEN
				RAISE EXCEPTION 'verification failed: % rows of step % are missing on node "%"', missing, step, target
					USING ERRCODE = 'data_corrupted';
			END IF;
		END LOOP;
	END IF;
	-- A page shorter than batch is the step's last.  A row written to the
	-- source after the count is copied too: the total grows with it.
	UPDATE ringshard.rebalance_progress p
	   SET rows_copied = p.rows_copied + page_rows,
	       rows_total = CASE WHEN page_rows < batch THEN p.rows_copied + page_rows
	                         ELSE greatest(p.rows_total, p.rows_copied + page_rows) END,
	       state = CASE WHEN page_rows < batch THEN 'copied' ELSE p.state END,
	       updated_at = now()
	 WHERE p.table_name = rebalance_copy_page.table_name AND p.step = rebalance_copy_page.step;
	RETURN CASE WHEN page_rows < batch THEN NULL ELSE page->>'last' END;
END
$$;
COMMENT ON FUNCTION ringshard_internal.rebalance_copy_page(regclass, integer, text, integer) IS
	'rebalance(): copies one page of a step''s rows from its source to its targets where missing and checks them; the ctid to continue after, or NULL when the step is copied';
CREATE OR REPLACE FUNCTION ringshard_internal.rebalance_finish_step(table_name regclass, step integer) RETURNS void
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	item ringshard.rebalance_progress;
	target text;
	removed bigint := 0;
BEGIN
	SELECT * INTO item FROM ringshard.rebalance_progress p
	 WHERE p.table_name = rebalance_finish_step.table_name AND p.step = rebalance_finish_step.step;
	FOREACH target IN ARRAY item.deletes LOOP
		removed := removed + ringshard_internal.node_value(target,
			format('WITH gone AS (DELETE FROM %s t WHERE %s RETURNING 1) SELECT pg_catalog.count(*) FROM gone',
			       ringshard.qualified_name(table_name), ringshard_internal.checked_step_predicate(table_name, item.predicate)))::bigint;
	END LOOP;
	UPDATE ringshard.rebalance_progress p SET state = 'done', rows_deleted = removed, updated_at = now()
	 WHERE p.table_name = rebalance_finish_step.table_name AND p.step = rebalance_finish_step.step;
END
$$;
COMMENT ON FUNCTION ringshard_internal.rebalance_finish_step(regclass, integer) IS
	'rebalance(): deletes a copied step''s rows from the nodes that left its replica set and marks it done';
CREATE OR REPLACE FUNCTION ringshard_internal.rebalance_report_progress(table_name regclass, step integer, last_notice timestamptz,
															 last_line text, OUT printed_at timestamptz, OUT line text)
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	status ringshard.rebalance_status;
BEGIN
	printed_at := last_notice;
	line := last_line;
	IF clock_timestamp() < last_notice + coalesce(current_setting('ringshard.rebalance_notice_interval', true), '5s')::interval THEN
		RETURN;
	END IF;
	SELECT * INTO status FROM ringshard.rebalance_status s WHERE s.table_name = rebalance_report_progress.table_name;
	IF format('step %s of %s, rows %s of %s (%s %%)', step, status.steps, status.rows_done, status.rows_total,
	          status.percent) IS NOT DISTINCT FROM last_line THEN
		RETURN;
	END IF;
	line := format('step %s of %s, rows %s of %s (%s %%)', step, status.steps, status.rows_done, status.rows_total,
	               status.percent);
	RAISE NOTICE 'rebalance of %: %', ringshard.qualified_name(table_name), line;
	printed_at := clock_timestamp();
END
$$;
COMMENT ON FUNCTION ringshard_internal.rebalance_report_progress(regclass, integer, timestamptz, text) IS
	'rebalance(): a NOTICE "step k of N, rows x of y" if ringshard.rebalance_notice_interval has passed since the last and it says something new; returns the time and text of the last';
CREATE OR REPLACE FUNCTION ringshard_internal.rebalance_finish(table_name regclass) RETURNS void
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	totals record;
	known text[] := ARRAY(SELECT n.node_name FROM ringshard.nodes n);
	forgotten text;
BEGIN
	SELECT count(*) AS steps, coalesce(sum(p.rows_copied), 0) AS copied, coalesce(sum(p.rows_deleted), 0) AS deleted
	  INTO totals FROM ringshard.rebalance_progress p WHERE p.table_name = rebalance_finish.table_name;
	INSERT INTO ringshard.placements (table_name, snapshot) VALUES (table_name, ringshard_internal.placement_snapshot(table_name))
	    ON CONFLICT ON CONSTRAINT placements_pkey DO UPDATE SET snapshot = EXCLUDED.snapshot, placed_at = now();
	DELETE FROM ringshard.rebalance_progress p WHERE p.table_name = rebalance_finish.table_name;
	PERFORM ringshard_internal.forget_unused_nodes();
	SELECT string_agg(format('"%s"', k.node_name), ', ' ORDER BY k.node_name COLLATE "C") INTO forgotten
	  FROM unnest(known) k(node_name)
	 WHERE NOT EXISTS (SELECT FROM ringshard.nodes n WHERE n.node_name = k.node_name);
	RAISE NOTICE 'rebalance of % complete: % steps, % rows copied, % deleted%', ringshard.qualified_name(table_name),
		totals.steps, totals.copied, totals.deleted,
		CASE WHEN forgotten IS NOT NULL
		     THEN format('; forgotten, in no ring or map and holding no table''s rows any more: %s', forgotten) ELSE '' END;
END
$$;
COMMENT ON FUNCTION ringshard_internal.rebalance_finish(regclass) IS
	'rebalance(): records the table''s new placement, clears its progress and forgets the nodes nothing needs any more';
CREATE OR REPLACE PROCEDURE ringshard.rebalance(table_name regclass, dry_run boolean DEFAULT false,
									 batch integer DEFAULT 1000, pause_ms integer DEFAULT 0)
	LANGUAGE plpgsql AS $$
DECLARE
	step pg_catalog.int4;
	after_ctid pg_catalog.text;
	last_notice pg_catalog.timestamptz;
	last_line pg_catalog.text;
BEGIN
	IF NOT ringshard_internal.rebalance_begin(table_name, dry_run, batch, pause_ms) THEN
		RETURN;
	END IF;
	COMMIT;
	last_notice := pg_catalog.clock_timestamp();
	FOREACH step IN ARRAY ringshard_internal.rebalance_unfinished_steps(table_name) LOOP
		-- Copy in committed pages; then delete where the rows left.
		after_ctid := ringshard_internal.rebalance_copy_start(table_name, step);
		WHILE after_ctid IS NOT NULL LOOP
			after_ctid := ringshard_internal.rebalance_copy_page(table_name, step, after_ctid, batch);
			COMMIT;
			SELECT * INTO last_notice, last_line
			  FROM ringshard_internal.rebalance_report_progress(table_name, step, last_notice, last_line);
			IF pause_ms OPERATOR(pg_catalog.>) 0 THEN
				PERFORM pg_catalog.pg_sleep(pause_ms OPERATOR(pg_catalog./) 1000.0);
			END IF;
		END LOOP;
		PERFORM ringshard_internal.rebalance_finish_step(table_name, step);
		COMMIT;
		SELECT * INTO last_notice, last_line
		  FROM ringshard_internal.rebalance_report_progress(table_name, step, last_notice, last_line);
	END LOOP;
	PERFORM ringshard_internal.rebalance_finish(table_name);
	COMMIT;
END
$$;
COMMENT ON PROCEDURE ringshard.rebalance(regclass, boolean, integer, integer) IS
	'moves the rows whose replica set changed since the table was placed: copy, verify, delete, in committed batches; resumable; prints the plan summary first and progress every ringshard.rebalance_notice_interval; dry_run prints the summary only';
-- from extension/87_rehome.sql
CREATE OR REPLACE FUNCTION ringshard_internal.rehome_nodes(table_name regclass) RETURNS text[]
	LANGUAGE sql STABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
	SELECT coalesce(array_agg(x.node ORDER BY x.node COLLATE "C"), '{}')
	  FROM (SELECT t.node FROM ringshard.table_nodes t WHERE t.table_name = rehome_nodes.table_name
	        UNION
	        SELECT e->>'node' FROM ringshard.placements p,
	               json_array_elements(coalesce(p.snapshot->'members', p.snapshot->'assignments')) e
	         WHERE p.table_name = rehome_nodes.table_name) x;
$$;
COMMENT ON FUNCTION ringshard_internal.rehome_nodes(regclass) IS
	'rehome_rows(): the nodes that may hold a table''s rows (its ring or map, and its recorded placement), in name order';
CREATE OR REPLACE FUNCTION ringshard_internal.rehome_condition(shared boolean) RETURNS text
	LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
	SELECT CASE WHEN shared
	            THEN '($1::pg_catalog.text OPERATOR(pg_catalog.=) ANY (pg_catalog.replicas_of(t))
	                   AND pg_catalog.cardinality(pg_catalog.replicas_of(t)) OPERATOR(pg_catalog.>) 1)'
	            ELSE 'NOT ($1::pg_catalog.text OPERATOR(pg_catalog.=) ANY (pg_catalog.replicas_of(t)))' END;
$$;
COMMENT ON FUNCTION ringshard_internal.rehome_condition(boolean) IS
	'rehome_rows(): the SQL condition on a node''s row t ($1: the node) for rows it is not a replica of, or (shared) rows it holds with other replicas';
CREATE OR REPLACE FUNCTION ringshard_internal.rehome_begin(table_name regclass, batch_size integer) RETURNS json
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	qualified text;
	annotation ringshard.distributed_tables;
	placed json;
	check_shared boolean;
	nodes text[];
	missing text;
	counted json;
BEGIN
	IF table_name IS NULL OR batch_size IS NULL OR batch_size < 1 THEN
		RAISE EXCEPTION 'rehome_rows needs a table and a positive batch size'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	qualified := ringshard.qualified_name(table_name);
	SELECT d.* INTO annotation FROM ringshard.distributed_tables d
	  JOIN pg_catalog.pg_foreign_table f ON f.ftrelid = d.table_name
	  JOIN pg_catalog.pg_foreign_server s ON s.oid = f.ftserver AND s.srvname = 'ringshard_cluster'
	 WHERE d.table_name = rehome_begin.table_name;
	IF NOT FOUND THEN
		RAISE EXCEPTION '% is not a distributed table', qualified
			USING ERRCODE = 'object_not_in_prerequisite_state',
			      HINT = 'Only the rows of a distributed table live on nodes; an annotated table''s rows stay where they are.';
	END IF;
	IF EXISTS (SELECT FROM ringshard.write_queue q WHERE q.table_name = rehome_begin.table_name) THEN
		RAISE EXCEPTION 'table % has queued writes', qualified
			USING ERRCODE = 'object_not_in_prerequisite_state',
			      HINT = 'Let the watchdog deliver them (see ringshard.write_queue_status), or call ringshard.replay_queue().';
	END IF;
	IF EXISTS (SELECT FROM ringshard.rebalance_progress p WHERE p.table_name = rehome_begin.table_name) THEN
		RAISE EXCEPTION 'table % has an unfinished rebalance', qualified
			USING ERRCODE = 'object_not_in_prerequisite_state',
			      HINT = format('Finish it first with CALL ringshard.rebalance(%L).', qualified);
	END IF;
	-- Whether a row may have more replicas now than where it was put.
	SELECT p.snapshot INTO placed FROM ringshard.placements p WHERE p.table_name = rehome_begin.table_name;
	check_shared := coalesce(annotation.map_name IS NOT NULL
		OR placed IS NULL
		OR least((placed->>'replication_factor')::integer, json_array_length(placed->'members'))
		   < (SELECT least(r.replication_factor, (SELECT count(*) FROM ringshard.ring_members m WHERE m.ring_name = r.ring_name))
		        FROM ringshard.rings r WHERE r.ring_name = annotation.ring_name), true);
	nodes := ringshard_internal.rehome_nodes(table_name);
	SELECT string_agg(format('"%s"', x.node), ', ' ORDER BY x.node COLLATE "C") INTO missing
	  FROM unnest(nodes) x(node) LEFT JOIN ringshard.nodes n ON n.node_name = x.node
	 WHERE n.server_name IS NULL;
	IF missing IS NOT NULL THEN
		RAISE EXCEPTION 'rehome of % needs every node that may hold its rows, with an address', qualified
			USING ERRCODE = 'object_not_in_prerequisite_state',
			      DETAIL = format('Without an address: %s.', missing),
			      HINT = 'Give them one with ringshard.set_node_address().';
	END IF;
	PERFORM ringshard.sync_topology();
	PERFORM ringshard.push_table_definition(table_name);
	SELECT coalesce(json_agg(json_build_object('node', x.node,
	           'misplaced', ringshard_internal.node_value(x.node,
	               format('SELECT pg_catalog.count(*) FROM %s t WHERE %s', qualified, ringshard_internal.rehome_condition(false)),
	               ARRAY[x.node], false)::bigint,
	           'shared', CASE WHEN check_shared THEN ringshard_internal.node_value(x.node,
	               format('SELECT pg_catalog.count(*) FROM %s t WHERE %s', qualified, ringshard_internal.rehome_condition(true)),
	               ARRAY[x.node], false)::bigint ELSE 0 END) ORDER BY x.node COLLATE "C"), '[]')
	  INTO counted
	  FROM unnest(nodes) x(node);
	RAISE NOTICE 'rehome of %: % rows are on nodes that are not their replicas%', qualified,
		(SELECT coalesce(sum((c->>'misplaced')::bigint), 0) FROM json_array_elements(counted) c),
		coalesce((SELECT ' (' || string_agg(format('%s on "%s"', c->>'misplaced', c->>'node'), ', ') || ')'
		            FROM json_array_elements(counted) c WHERE (c->>'misplaced')::bigint > 0), '')
		|| CASE WHEN check_shared THEN format('; %s rows with other replicas are checked on them',
		                                (SELECT coalesce(sum((c->>'shared')::bigint), 0) FROM json_array_elements(counted) c))
		        ELSE '' END;
	RETURN counted;
END
$$;
COMMENT ON FUNCTION ringshard_internal.rehome_begin(regclass, integer) IS
	'rehome_rows(): checks, pushes the topology and the table to the nodes, and counts on each node the rows of step 1 (not its own) and of step 2 (shared with other replicas, where a row may have more replicas than where it was put); [{node, misplaced, shared}]';
CREATE OR REPLACE FUNCTION ringshard_internal.rehome_batch(table_name regclass, source text, batch_size integer, after_ctid text,
												OUT taken bigint, OUT copied bigint, OUT deleted bigint, OUT last_ctid text)
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
DECLARE
	qualified text := ringshard.qualified_name(table_name);
	key_column name := (SELECT d.key_column FROM ringshard.distributed_tables d WHERE d.table_name = rehome_batch.table_name);
	columns text;
	page json;
	target text;
	rows_for_target text;
	missing bigint;
BEGIN
	SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum) INTO columns
	  FROM pg_catalog.pg_attribute a WHERE a.attrelid = table_name AND a.attnum > 0 AND NOT a.attisdropped;
	page := ringshard_internal.node_value(source, format(
		'SELECT coalesce(pg_catalog.json_agg(pg_catalog.json_build_object(''ctid'', s.row_ctid::pg_catalog.text,
		                                                                   ''replicas'', s.replicas, ''row'', s.row_value)
		                                     ORDER BY s.row_ctid), ''[]''::pg_catalog.json)
		   FROM (SELECT t.ctid AS row_ctid, pg_catalog.replicas_of(t) AS replicas, pg_catalog.row_to_json(t) AS row_value
		           FROM %s t
		          WHERE %s AND t.ctid OPERATOR(pg_catalog.>) $2::pg_catalog.tid
		          ORDER BY t.ctid LIMIT %s) s',
		qualified, ringshard_internal.rehome_condition(after_ctid IS NOT NULL), batch_size),
		ARRAY[source, coalesce(after_ctid, '(0,0)')])::json;
	taken := json_array_length(page);
	copied := 0;
	deleted := 0;
	last_ctid := (SELECT x->>'ctid' FROM json_array_elements(page) WITH ORDINALITY p(x, i) ORDER BY p.i DESC LIMIT 1);
	IF taken = 0 THEN
		RETURN;
	END IF;
	FOR target IN SELECT DISTINCT r.node FROM json_array_elements(page) x, json_array_elements_text(x->'replicas') r(node)
	               WHERE r.node <> source ORDER BY 1 LOOP
		rows_for_target := (SELECT json_agg(x->'row') FROM json_array_elements(page) x
		                     WHERE target IN (SELECT json_array_elements_text(x->'replicas')))::text;
		copied := copied + ringshard_internal.node_value(target, format(
			'WITH added AS (
			   INSERT INTO %1$s (%2$s) SELECT %2$s FROM pg_catalog.json_populate_recordset(NULL::%1$s, $1::pg_catalog.json) r
			    WHERE NOT EXISTS (SELECT FROM %1$s t WHERE t.%3$I IS NOT DISTINCT FROM r.%3$I
			                         AND (SELECT row(t.*) IS NOT DISTINCT FROM row(r.*)))
			   RETURNING 1)
			 SELECT pg_catalog.count(*) FROM added', qualified, columns, key_column),
			ARRAY[rows_for_target])::bigint;
		missing := ringshard_internal.node_value(target, format(
			'SELECT pg_catalog.count(*) FROM pg_catalog.json_populate_recordset(NULL::%1$s, $1::pg_catalog.json) r
			  WHERE NOT EXISTS (SELECT FROM %1$s t WHERE t.%2$I IS NOT DISTINCT FROM r.%2$I
			                       AND (SELECT row(t.*) IS NOT DISTINCT FROM row(r.*)))', qualified, key_column),
			ARRAY[rows_for_target])::bigint;
		IF missing <> 0 THEN
			RAISE EXCEPTION 'verification failed: % rows of % copied from node "%" are missing on node "%"',
				missing, qualified, source, target
				USING ERRCODE = 'data_corrupted';
		END IF;
	END LOOP;
	IF after_ctid IS NULL THEN
		deleted := ringshard_internal.node_value(source, format(
			'WITH gone AS (DELETE FROM %s t WHERE t.ctid OPERATOR(pg_catalog.=) ANY ($2::pg_catalog.tid[]) AND %s RETURNING 1)
			 SELECT pg_catalog.count(*) FROM gone', qualified, ringshard_internal.rehome_condition(false)),
			ARRAY[source, (SELECT array_agg(x->>'ctid') FROM json_array_elements(page) x)::text])::bigint;
	END IF;
END
$$;
COMMENT ON FUNCTION ringshard_internal.rehome_batch(regclass, text, integer, text) IS
	'rehome_rows(): copies up to batch_size of a node''s rows that it is not a replica of (after_ctid NULL; then deletes them there) or that it shares with other replicas (after after_ctid) to their other replicas where missing, and checks them; rows taken, copies made, rows deleted, last ctid';
CREATE OR REPLACE FUNCTION ringshard_internal.rehome_finish(table_name regclass) RETURNS void
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
BEGIN
	INSERT INTO ringshard.placements (table_name, snapshot) VALUES (table_name, ringshard_internal.placement_snapshot(table_name))
	    ON CONFLICT ON CONSTRAINT placements_pkey DO UPDATE SET snapshot = EXCLUDED.snapshot, placed_at = now();
	PERFORM ringshard_internal.forget_unused_nodes();
END
$$;
COMMENT ON FUNCTION ringshard_internal.rehome_finish(regclass) IS
	'rehome_rows(): records the table as laid out under the current topology and forgets the nodes nothing needs any more';
CREATE OR REPLACE FUNCTION ringshard_internal.rehome_report_progress(table_name regclass, node text, done bigint, total bigint,
														  last_notice timestamptz)
	RETURNS timestamptz
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SET search_path = pg_catalog, ringshard, pg_temp AS $$
BEGIN
	IF clock_timestamp() < last_notice + coalesce(current_setting('ringshard.rebalance_notice_interval', true), '5s')::interval THEN
		RETURN last_notice;
	END IF;
	RAISE NOTICE 'rehome of %: node "%", rows % of %', ringshard.qualified_name(table_name), node, done, total;
	RETURN clock_timestamp();
END
$$;
COMMENT ON FUNCTION ringshard_internal.rehome_report_progress(regclass, text, bigint, bigint, timestamptz) IS
	'rehome_rows(): a NOTICE "node n, rows x of y" if ringshard.rebalance_notice_interval has passed since the last; returns the time of the last';
CREATE OR REPLACE PROCEDURE ringshard.rehome_rows(table_name regclass, batch_size integer DEFAULT 1000)
	LANGUAGE plpgsql AS $$
DECLARE
	plan pg_catalog.json;
	sources pg_catalog.text[];
	misplaced pg_catalog.int8[];
	shared pg_catalog.int8[];
	i pg_catalog.int4;
	batches pg_catalog.int4;
	batch record;
	after_ctid pg_catalog.text;
	node_taken pg_catalog.int8;
	node_copied pg_catalog.int8;
	node_deleted pg_catalog.int8;
	total_copied pg_catalog.int8 := 0;
	total_deleted pg_catalog.int8 := 0;
	last_notice pg_catalog.timestamptz;
	report pg_catalog.text[] := '{}';
BEGIN
	plan := ringshard_internal.rehome_begin(table_name, batch_size);
	sources := ARRAY(SELECT x OPERATOR(pg_catalog.->>) 'node' FROM pg_catalog.json_array_elements(plan) x);
	misplaced := ARRAY(SELECT (x OPERATOR(pg_catalog.->>) 'misplaced')::pg_catalog.int8 FROM pg_catalog.json_array_elements(plan) x);
	shared := ARRAY(SELECT (x OPERATOR(pg_catalog.->>) 'shared')::pg_catalog.int8 FROM pg_catalog.json_array_elements(plan) x);
	COMMIT;
	last_notice := pg_catalog.clock_timestamp();
	FOR i IN 1 .. pg_catalog.cardinality(sources) LOOP
		node_taken := 0;
		node_copied := 0;
		node_deleted := 0;
		-- step 1: each batch deletes what it takes
		IF misplaced[i] OPERATOR(pg_catalog.>) 0 THEN
			FOR batches IN 1 .. (misplaced[i] OPERATOR(pg_catalog./) batch_size)::pg_catalog.int4 OPERATOR(pg_catalog.+) 2 LOOP
				SELECT * INTO batch FROM ringshard_internal.rehome_batch(table_name, sources[i], batch_size, NULL);
				COMMIT;
				EXIT WHEN batch.taken OPERATOR(pg_catalog.=) 0;
				node_taken := node_taken OPERATOR(pg_catalog.+) batch.taken;
				node_copied := node_copied OPERATOR(pg_catalog.+) batch.copied;
				node_deleted := node_deleted OPERATOR(pg_catalog.+) batch.deleted;
				last_notice := ringshard_internal.rehome_report_progress(table_name, sources[i], node_taken,
					misplaced[i] OPERATOR(pg_catalog.+) shared[i], last_notice);
			END LOOP;
			IF batch.taken OPERATOR(pg_catalog.<>) 0 THEN
				RAISE EXCEPTION 'rehome of % did not finish on node "%": rows that are not its own keep appearing there',
					ringshard.qualified_name(table_name), sources[i]
					USING ERRCODE = 'object_not_in_prerequisite_state',
					      HINT = 'Stop writes to the table while rows are rehomed, then call rehome_rows again: it resumes.';
			END IF;
		END IF;
		-- step 2: the node's shared rows, by ctid
		IF shared[i] OPERATOR(pg_catalog.>) 0 THEN
			after_ctid := '(0,0)';
			FOR batches IN 1 .. (shared[i] OPERATOR(pg_catalog./) batch_size)::pg_catalog.int4 OPERATOR(pg_catalog.+) 2 LOOP
				SELECT * INTO batch FROM ringshard_internal.rehome_batch(table_name, sources[i], batch_size, after_ctid);
				COMMIT;
				EXIT WHEN batch.taken OPERATOR(pg_catalog.=) 0;
				after_ctid := batch.last_ctid;
				node_taken := node_taken OPERATOR(pg_catalog.+) batch.taken;
				node_copied := node_copied OPERATOR(pg_catalog.+) batch.copied;
				last_notice := ringshard_internal.rehome_report_progress(table_name, sources[i], node_taken,
					misplaced[i] OPERATOR(pg_catalog.+) shared[i], last_notice);
			END LOOP;
		END IF;
		total_copied := total_copied OPERATOR(pg_catalog.+) node_copied;
		total_deleted := total_deleted OPERATOR(pg_catalog.+) node_deleted;
		IF node_copied OPERATOR(pg_catalog.>) 0 OR node_deleted OPERATOR(pg_catalog.>) 0 THEN
			report := report OPERATOR(pg_catalog.||) pg_catalog.format('"%s": %s moved away, %s copies made from it',
				sources[i], node_deleted, node_copied);
		END IF;
	END LOOP;
	PERFORM ringshard_internal.rehome_finish(table_name);
	COMMIT;
	RAISE NOTICE 'rehome of % complete: % rows moved to their replicas, % copies made%', ringshard.qualified_name(table_name),
		total_deleted, total_copied,
		CASE WHEN pg_catalog.cardinality(report) OPERATOR(pg_catalog.>) 0
		     THEN ' (' OPERATOR(pg_catalog.||) pg_catalog.array_to_string(report, '; ') OPERATOR(pg_catalog.||) ')' ELSE '' END;
END
$$;
COMMENT ON PROCEDURE ringshard.rehome_rows(regclass, integer) IS
	'puts every row of a distributed table on its replicas (after the update from 1.0, rows of keys whose bytes changed): copies where missing, checks, deletes where it does not belong, in committed batches of batch_size; resumable; prints what it moved';
-- from extension/88_overview.sql
CREATE OR REPLACE VIEW ringshard.table_nodes AS
SELECT d.table_name,
       m.node_name AS node,
       n.is_up,
       'ring member' AS role,
       m.weight,
       round(b.share::numeric, 4) AS key_share,
       NULL::integer AS partitions,
       (SELECT count(*) FROM ringshard.write_queue q WHERE q.table_name = d.table_name AND q.node_name = m.node_name)
           AS queued_writes,
       (SELECT count(*) FROM ringshard.dead_letters l WHERE l.table_name = d.table_name AND l.node_name = m.node_name)
           AS dead_letters
  FROM ringshard.distributed_tables d
  JOIN ringshard.ring_members m ON m.ring_name = d.ring_name
  JOIN ringshard.nodes n ON n.node_name = m.node_name
  LEFT JOIN LATERAL ringshard.ring_balance(d.ring_name) b ON b.node = m.node_name
UNION ALL
SELECT d.table_name,
       h.node_name,
       n.is_up,
       'partition holder',
       NULL::float8,
       round(h.partitions / 256.0, 4),
       h.partitions,
       (SELECT count(*) FROM ringshard.write_queue q WHERE q.table_name = d.table_name AND q.node_name = h.node_name),
       (SELECT count(*) FROM ringshard.dead_letters l WHERE l.table_name = d.table_name AND l.node_name = h.node_name)
  FROM ringshard.distributed_tables d
  JOIN (SELECT a.map_name, a.node_name, sum(a.partition_end - a.partition_start + 1)::integer AS partitions
          FROM ringshard.partition_assignments a GROUP BY a.map_name, a.node_name) h ON h.map_name = d.map_name
  JOIN ringshard.nodes n ON n.node_name = h.node_name;
COMMENT ON VIEW ringshard.table_nodes IS
	'per annotated table and node of its ring or map: up or down, weight, share of the keys (ring: of the tokens it owns; map: of the 256 partitions it holds), partitions held, writes queued for it and dead letters';
CREATE OR REPLACE VIEW ringshard.table_overview AS
SELECT d.table_name,
       CASE WHEN c.relkind = 'f' AND ft.ftserver = (SELECT s.oid FROM pg_catalog.pg_foreign_server s
                                                      WHERE s.srvname = 'ringshard_cluster')
            THEN 'distributed' ELSE 'annotated' END AS kind,
       d.key_column,
       CASE WHEN d.ring_name IS NOT NULL THEN format('ring "%s"', d.ring_name)
            ELSE format('partition map "%s"', d.map_name) END AS placed_by,
       CASE WHEN d.keyspace IS NOT NULL THEN quote_literal(d.keyspace)
            WHEN d.keyspace_column IS NOT NULL THEN format('column %I', d.keyspace_column) END AS keyspace,
       CASE WHEN d.ring_name IS NOT NULL THEN least(r.replication_factor, nodes.total)::integer
            ELSE (SELECT min(holders.n)::integer FROM (
                      SELECT count(a.node_name) AS n
                        FROM generate_series(0, 255) p
                        LEFT JOIN ringshard.partition_assignments a
                               ON a.map_name = d.map_name AND p BETWEEN a.partition_start AND a.partition_end
                       GROUP BY p) holders) END AS copies,
       nodes.total AS nodes,
       nodes.down AS nodes_down,
       nodes.queued AS queued_writes,
       nodes.dead AS dead_letters,
       CASE WHEN c.relkind <> 'f' THEN NULL
            WHEN EXISTS (SELECT FROM ringshard.rebalance_progress g WHERE g.table_name = d.table_name) THEN 'rebalancing'
            WHEN pl.snapshot IS NULL THEN NULL
            WHEN layout.stored = layout.now
            THEN 'in place'
            ELSE 'needs rebalance' END AS layout,
       pg_catalog.pg_get_userbyid(c.relowner) AS owner
  FROM ringshard.distributed_tables d
  JOIN pg_catalog.pg_class c ON c.oid = d.table_name
  LEFT JOIN pg_catalog.pg_foreign_table ft ON ft.ftrelid = c.oid
  LEFT JOIN ringshard.rings r ON r.ring_name = d.ring_name
  LEFT JOIN ringshard.placements pl ON pl.table_name = d.table_name
  LEFT JOIN LATERAL (SELECT count(*)::integer AS total,
                            coalesce(array_agg(t.node ORDER BY t.node COLLATE "C") FILTER (WHERE NOT t.is_up), '{}') AS down,
                            coalesce(sum(t.queued_writes), 0)::bigint AS queued,
                            coalesce(sum(t.dead_letters), 0)::bigint AS dead
                       FROM ringshard.table_nodes t WHERE t.table_name = d.table_name) nodes ON true
  -- The layout the rows were put in (the placement snapshot) and the one the
  -- topology gives now, each reduced to what decides where rows live, in one
  -- order, so that they are equal exactly when they lay rows out alike.
  LEFT JOIN LATERAL (
       SELECT CASE WHEN d.ring_name IS NOT NULL THEN
                  jsonb_build_object('algorithm', pl.snapshot->>'algorithm', 'vnodes', (pl.snapshot->>'vnodes')::integer,
                                     'replication_factor', (pl.snapshot->>'replication_factor')::integer,
                                     'members', (SELECT coalesce(jsonb_agg(jsonb_build_array(m->>'node', (m->>'weight')::float8)
                                                                           ORDER BY m->>'node' COLLATE "C"), '[]')
                                                   FROM json_array_elements(pl.snapshot->'members') m))
              ELSE
                  jsonb_build_object('assignments', (SELECT coalesce(jsonb_agg(jsonb_build_array(a->>'node', (a->>'start')::integer,
                                                                                                 (a->>'end')::integer)
                                                                               ORDER BY a->>'node' COLLATE "C", (a->>'start')::integer), '[]')
                                                       FROM json_array_elements(pl.snapshot->'assignments') a))
              END AS stored,
              CASE WHEN d.ring_name IS NOT NULL THEN
                  jsonb_build_object('algorithm', r.algorithm, 'vnodes', r.vnodes, 'replication_factor', r.replication_factor,
                                     'members', (SELECT coalesce(jsonb_agg(jsonb_build_array(m.node_name, m.weight)
                                                                           ORDER BY m.node_name COLLATE "C"), '[]')
                                                   FROM ringshard.ring_members m WHERE m.ring_name = d.ring_name))
              ELSE
                  jsonb_build_object('assignments', (SELECT coalesce(jsonb_agg(jsonb_build_array(a.node_name, a.partition_start,
                                                                                                 a.partition_end)
                                                                               ORDER BY a.node_name COLLATE "C", a.partition_start), '[]')
                                                       FROM ringshard.partition_assignments a WHERE a.map_name = d.map_name))
              END AS now) layout ON true;
COMMENT ON VIEW ringshard.table_overview IS
	'one row per annotated table: distributed (rows on the nodes) or annotated (rows here, routed), key column, ring or partition map, keyspace, copies of each row, nodes and those down, queued writes and dead letters, and whether its rows are laid out as the topology says (in place, needs rebalance, rebalancing)';


-- extension/upgrade/1.0--1.1/60_nodes.sql
-- Nodes with an address become foreign servers, as add_node() makes them in
-- 1.1 (ringshard_internal.set_server).  A user name in the address becomes a
-- user mapping for PUBLIC with that user and no password: superusers
-- connect as that user, as they did under 1.0; a role below superuser needs
-- a mapping of its own with a password (docs/security.md).  The servers and
-- mappings belong to the cluster, not to the extension: pg_dump keeps them.
DO $servers$
DECLARE
	node record;
	address text;
	login text;
BEGIN
	FOR node IN SELECT a.node_name, a.address FROM ringshard_internal.addresses_1_0 a ORDER BY a.node_name COLLATE "C" LOOP
		SELECT string_agg(format('%s=''%s''', o.option, replace(replace(o.value, '\', '\\'), '''', '\''')), ' ' ORDER BY o.option)
		         FILTER (WHERE o.option <> 'user'),
		       min(o.value) FILTER (WHERE o.option = 'user')
		  INTO address, login
		  FROM ringshard_internal.address_options_as_given(node.address) o;
		PERFORM ringshard_internal.set_server(node.node_name, coalesce(address, ''));
		EXECUTE format('ALTER EXTENSION ringshard DROP SERVER %I', node.node_name);
		IF login IS NOT NULL THEN
			EXECUTE format('CREATE USER MAPPING FOR PUBLIC SERVER %I OPTIONS (user %L)', node.node_name, login);
			RAISE WARNING 'node "%": the user name of its address is in a user mapping for PUBLIC now', node.node_name
				USING DETAIL = format('CREATE USER MAPPING FOR PUBLIC SERVER %I OPTIONS (user %L)', node.node_name, login),
				      HINT = 'Superusers connect as that user, as under 1.0; other roles need a user mapping of their own, with a password.';
		END IF;
	END LOOP;
END
$servers$;
DROP TABLE ringshard_internal.addresses_1_0;


-- extension/upgrade/1.0--1.1/70_distributed_tables.sql
-- The coordinator's 1.0 distributed tables: ordinary tables whose inserts
-- the trigger ringshard_route_write sent to the nodes.  Each becomes a 1.1
-- distributed table, a foreign table of server ringshard_cluster, as
-- create_distributed_table() makes one but without reaching a node: the
-- nodes keep their rows, and whatever runs this script need not reach them.
-- (A worker's tables, with the trigger ringshard_reject_misrouted_rows, are
-- 1.1's already.)  The new tables are the user's, not the extension's.
DO $tables$
DECLARE
	old_table regclass;
	new_table regclass;
	lost text;
	placed ringshard.placements;
	converted text[] := '{}';
BEGIN
	FOR old_table IN
		SELECT t.tgrelid::regclass FROM pg_catalog.pg_trigger t
		 WHERE t.tgname = 'ringshard_route_write' AND t.tgfoid = 'ringshard.route_write()'::regprocedure
		 ORDER BY t.tgrelid::regclass::text COLLATE "C"
	LOOP
		EXECUTE format('DROP TRIGGER ringshard_route_write ON %s', ringshard.qualified_name(old_table));
		IF NOT EXISTS (SELECT FROM ringshard.distributed_tables d WHERE d.table_name = old_table) THEN
			RAISE WARNING 'table % had the trigger of a 1.0 distributed table but is not annotated: it stays an ordinary table',
				ringshard.qualified_name(old_table)
				USING DETAIL = 'Its trigger, which could not route a row without the annotation, is dropped.';
			CONTINUE;
		END IF;
		-- what a foreign table cannot keep, and 1.0 never gave the nodes
		SELECT string_agg(x.what, ', ' ORDER BY x.what) INTO lost FROM (
			SELECT format('constraint %I', c.conname) AS what FROM pg_catalog.pg_constraint c
			 WHERE c.conrelid = old_table AND c.contype NOT IN ('c', 'n')
			UNION ALL
			SELECT format('index %I', i.indexrelid::regclass::text) FROM pg_catalog.pg_index i
			 WHERE i.indrelid = old_table
			   AND NOT EXISTS (SELECT FROM pg_catalog.pg_constraint c WHERE c.conindid = i.indexrelid)) x;
		SELECT * INTO placed FROM ringshard.placements p WHERE p.table_name = old_table;
		new_table := ringshard_internal.replace_1_0_distributed_table(old_table);
		EXECUTE format('ALTER EXTENSION ringshard DROP FOREIGN TABLE %s', ringshard.qualified_name(new_table));
		-- The placement 1.0 recorded says where the rows are: it stays, so that
		-- a topology change 1.0 did not rebalance yet is still rebalanced.
		IF placed.snapshot IS NOT NULL THEN
			UPDATE ringshard.placements p SET snapshot = placed.snapshot, placed_at = placed.placed_at
			 WHERE p.table_name = new_table;
			IF placed.snapshot::jsonb IS DISTINCT FROM ringshard_internal.placement_snapshot(new_table)::jsonb THEN
				RAISE WARNING 'distributed table % is laid out under an earlier topology than the current one', ringshard.qualified_name(new_table)
					USING DETAIL = 'Its ring or map changed under 1.0 and the table was not rebalanced since.',
					      HINT = format('Once its nodes run 1.1, CALL ringshard.rebalance(%1$L); or, if the update also warns that its keys route differently, CALL ringshard.rehome_rows(%1$L), which moves every row to its current replicas.',
					                    ringshard.qualified_name(new_table));
			END IF;
		END IF;
		UPDATE ringshard.dead_letters l SET table_name = new_table WHERE l.table_name = old_table;
		IF lost IS NOT NULL THEN
			RAISE WARNING 'distributed table % keeps no % on the coordinator', ringshard.qualified_name(new_table), lost
				USING DETAIL = 'A foreign table has no indexes or unique constraints, and 1.0 never created them on the nodes.',
				      HINT = 'Create them again with ALTER TABLE ... ADD CONSTRAINT or CREATE INDEX: in 1.1 they reach every node.';
		END IF;
		converted := converted || ringshard.qualified_name(new_table);
	END LOOP;
	IF cardinality(converted) > 0 THEN
		RAISE WARNING 'distributed tables % are foreign tables of server ringshard_cluster now; their nodes keep their rows',
			array_to_string(converted, ', ')
			USING HINT = format('Once every node runs 1.1 (ALTER EXTENSION ringshard UPDATE there), run %s.',
			                    (SELECT string_agg(format('SELECT ringshard.push_table_definition(%L)', t), '; ')
			                       FROM unnest(converted) t));
	END IF;
END
$tables$;
DROP FUNCTION ringshard.route_write();


-- extension/upgrade/1.0--1.1/80_keys.sql
-- Keys whose bytes changed (docs/routing.md §1, docs/upgrading.md#keys-that-route-differently).
-- A WARNING per annotated table whose key, or keyspace column, is of a type
-- that 1.1 routes by other bytes than 1.0 did.
DO $keys$
DECLARE
	changed record;
	utf8 boolean := pg_catalog.getdatabaseencoding() IN ('UTF8', 'SQL_ASCII');
BEGIN
	FOR changed IN
		WITH RECURSIVE columns AS (
			SELECT d.table_name, 'key' AS role, a.attname, a.atttypid AS type_oid, a.atttypid AS base_oid,
			       c.relkind = 'f' AS distributed
			  FROM ringshard.distributed_tables d
			  JOIN pg_catalog.pg_class c ON c.oid = d.table_name
			  JOIN pg_catalog.pg_attribute a ON a.attrelid = d.table_name AND a.attnum = d.key_attnum
			UNION ALL
			SELECT d.table_name, 'keyspace column', a.attname, a.atttypid, a.atttypid, c.relkind = 'f'
			  FROM ringshard.distributed_tables d
			  JOIN pg_catalog.pg_class c ON c.oid = d.table_name
			  JOIN pg_catalog.pg_attribute a ON a.attrelid = d.table_name AND a.attnum = d.keyspace_attnum),
		based AS (
			SELECT c.table_name, c.role, c.attname, c.type_oid, c.base_oid, c.distributed, 0 AS depth FROM columns c
			UNION ALL
			SELECT b.table_name, b.role, b.attname, b.type_oid, t.typbasetype, b.distributed, b.depth + 1
			  FROM based b JOIN pg_catalog.pg_type t ON t.oid = b.base_oid
			 WHERE t.typtype = 'd' AND b.depth < 32)
		SELECT b.table_name, b.role, b.attname, pg_catalog.format_type(b.type_oid, NULL) AS type_name, b.distributed,
		       CASE
		         WHEN t.typname IN ('int2', 'int4', 'int8', 'uuid', 'bool', 'bytea') AND t.typnamespace = 'pg_catalog'::regnamespace
		           THEN NULL
		         WHEN (t.typname IN ('text', 'varchar', 'name') AND t.typnamespace = 'pg_catalog'::regnamespace) OR t.typtype = 'e'
		           THEN CASE WHEN NOT utf8 THEN 'non-ASCII text is routed by its UTF-8 bytes now, not by the database encoding''s' END
		         WHEN t.typname = 'bpchar' AND t.typnamespace = 'pg_catalog'::regnamespace
		           -- 1.0 already took a keyspace column of type char(n) without its padding
		           THEN CASE WHEN b.role = 'key' THEN 'a char(n) key is routed without its trailing spaces now' END
		         WHEN t.typname = 'numeric' AND t.typnamespace = 'pg_catalog'::regnamespace
		           THEN 'a numeric value is routed without trailing zeros now (1.50 as 1.5)'
		         WHEN t.typname IN ('date', 'timestamp') AND t.typnamespace = 'pg_catalog'::regnamespace
		           THEN 'a date or timestamp is routed in ISO form now, whatever the DateStyle of the session'
		         WHEN t.typname = 'timestamptz' AND t.typnamespace = 'pg_catalog'::regnamespace
		           THEN 'a timestamptz is routed as its instant in UTC now, whatever the TimeZone of the session'
		         -- other types stopped the update (10_prepare.sql)
		       END AS reason
		  FROM based b JOIN pg_catalog.pg_type t ON t.oid = b.base_oid
		 WHERE t.typtype <> 'd'
		 ORDER BY b.table_name::text COLLATE "C", b.role
	LOOP
		CONTINUE WHEN changed.reason IS NULL;
		RAISE WARNING '% % routes differently in ringshard 1.1: %', CASE WHEN changed.distributed THEN 'distributed table' ELSE 'table' END,
			ringshard.qualified_name(changed.table_name), changed.reason
			USING DETAIL = format('Its %s %I is of type %s.', changed.role, changed.attname, changed.type_name),
			      HINT = CASE
			        WHEN changed.distributed
			          THEN format('Rows stored under such keys may be on nodes that are not their replicas now: once every node runs 1.1, run SELECT ringshard.push_table_definition(%1$L); then CALL ringshard.rehome_rows(%1$L);',
			                      ringshard.qualified_name(changed.table_name))
			        ELSE 'Its rows stay where they are; shard_of() and replicas_of() answer by the new bytes.' END;
	END LOOP;
END
$keys$;


-- extension/upgrade/1.0--1.1/90_finish.sql
-- The event triggers new in 1.1, last: the statements above change tables
-- and servers.
-- from extension/80_cluster.sql
CREATE EVENT TRIGGER ringshard_ddl_guard ON ddl_command_start
	WHEN TAG IN ('ALTER TABLE', 'ALTER FOREIGN TABLE', 'CREATE INDEX', 'DROP TABLE', 'DROP FOREIGN TABLE')
	EXECUTE FUNCTION ringshard_internal.ddl_guard();
CREATE EVENT TRIGGER ringshard_guard_node_servers ON ddl_command_end
	WHEN TAG IN ('ALTER SERVER')
	EXECUTE FUNCTION ringshard_internal.guard_node_servers();

DROP FUNCTION ringshard_internal.address_options_as_given(text);
DROP FUNCTION ringshard_internal.replace_1_0_distributed_table(regclass);

-- Privileges as a fresh install gives them (REVOKE ALL first, then GRANT: it
-- also takes away what 1.0 granted and 1.1 does not), and every pinned
-- search_path ending with pg_temp.
-- from extension/90_privileges.sql
REVOKE ALL ON ALL TABLES IN SCHEMA ringshard FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA ringshard FROM PUBLIC;
GRANT SELECT ON ringshard.rings, ringshard.ring_members, ringshard.partition_maps,
	ringshard.partition_assignments, ringshard.distributed_tables, ringshard.annotated_tables TO PUBLIC;
GRANT SELECT (node_name, server_name, is_up) ON ringshard.nodes TO PUBLIC;
GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON ALL TABLES IN SCHEMA ringshard TO ringshard_admin;
REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON ringshard.write_queue, ringshard.transaction_records FROM ringshard_admin;
REVOKE INSERT, UPDATE, TRUNCATE ON ringshard.dead_letters FROM ringshard_admin;
REVOKE INSERT, UPDATE ON ringshard.distributed_tables FROM ringshard_admin;
GRANT INSERT (table_name, key_column, key_attnum, ring_name, map_name, keyspace, keyspace_column, keyspace_attnum),
	UPDATE (table_name, key_column, key_attnum, ring_name, map_name, keyspace, keyspace_column, keyspace_attnum)
	ON ringshard.distributed_tables TO ringshard_admin;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA ringshard TO ringshard_admin;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA ringshard_internal FROM PUBLIC;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA ringshard_internal TO ringshard_admin;
GRANT EXECUTE ON FUNCTION
	ringshard.address_is_safe(text),
	ringshard.address_options(text),
	ringshard.server_address(name),
	ringshard.node_for_address(text),
	ringshard.validate_ring(text),
	ringshard.ring_points(text),
	ringshard.ring_balance(text),
	ringshard.partition_nodes(integer, text),
	ringshard.check_partition_map(text),
	ringshard.parse_partition_config(text),
	ringshard.format_partition_config(text[], integer[], integer[]),
	ringshard.qualified_name(regclass),
	ringshard.key_bytes(text),
	ringshard.key_bytes(anyelement),
	ringshard.version()
TO PUBLIC;
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
	ringshard.plan_table_moves(regclass, text, text, float8),
	ringshard.plan_table_summary(regclass, text, text, float8),
	ringshard.compare_schemes(integer, integer, integer, integer),
	ringshard.share_bar(float8, float8, integer),
	ringshard.ring_balance_report(text),
	ringshard.table_balance_report(regclass),
	ringshard.preview_partition_assignments(text[], integer[], integer[], text),
	ringshard.preview_partition_config(text, text),
	ringshard.suggest_partition_boundaries(regclass)
TO PUBLIC;
GRANT SELECT ON ringshard.write_queue_status, ringshard.rebalance_status,
	ringshard.table_overview, ringshard.table_nodes TO PUBLIC;
GRANT SELECT (singleton, local_node, topology_version, change_counter) ON ringshard.cluster_state TO PUBLIC;
REVOKE SELECT, INSERT, UPDATE ON ringshard.cluster_state FROM ringshard_admin;
GRANT SELECT (singleton, local_node, topology_version, change_counter),
	UPDATE (local_node, topology_version, change_counter) ON ringshard.cluster_state TO ringshard_admin;
GRANT EXECUTE ON FUNCTION
	ringshard.node_health(),
	ringshard.addressed_nodes(),
	ringshard.node_table_rows(regclass),
	ringshard.reads_here(regclass, "any", text[], bigint),
	ringshard.reads_here(regclass, "any", "any", text[], bigint),
	ringshard.reject_misrouted_rows(),
	ringshard.cluster_get(anyelement, text, text),
	ringshard.cluster_fanout(anyelement, text, name, integer, boolean),
	ringshard.last_fanout_missing(),
	ringshard.plproxy_partitions(text),
	ringshard.plproxy_version(text)
TO PUBLIC;
REVOKE ALL ON PROCEDURE ringshard.rebalance(regclass, boolean, integer, integer) FROM PUBLIC;
GRANT EXECUTE ON PROCEDURE ringshard.rebalance(regclass, boolean, integer, integer) TO ringshard_admin;
REVOKE ALL ON PROCEDURE ringshard.rehome_rows(regclass, integer) FROM PUBLIC;
GRANT EXECUTE ON PROCEDURE ringshard.rehome_rows(regclass, integer) TO ringshard_admin;
GRANT USAGE ON FOREIGN DATA WRAPPER ringshard TO ringshard_admin;
GRANT USAGE ON FOREIGN SERVER ringshard_cluster TO ringshard_admin;
-- from extension/95_search_path.sql
DO $sweep$
DECLARE
	f record;
	wanted text;
BEGIN
	FOR f IN
		SELECT p.oid::pg_catalog.regprocedure AS func, p.prokind, c.setting
		  FROM pg_catalog.pg_proc p
		  JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND d.objid = p.oid
		                             AND d.deptype = 'e'
		  JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid AND e.extname = 'ringshard',
		       pg_catalog.unnest(p.proconfig) c(setting)
		 WHERE c.setting LIKE 'search\_path=%'
	LOOP
		SELECT pg_catalog.string_agg(s.part, ', ' ORDER BY s.i) || ', pg_temp' INTO wanted
		  FROM pg_catalog.unnest(pg_catalog.string_to_array(pg_catalog.substr(f.setting, 13), ','))
		       WITH ORDINALITY s0(raw, i),
		       LATERAL (SELECT pg_catalog.btrim(s0.raw) AS part, s0.i) s
		 WHERE s.part <> 'pg_temp';
		IF 'search_path=' || wanted IS DISTINCT FROM f.setting THEN
			EXECUTE pg_catalog.format('ALTER %s %s SET search_path = %s',
				CASE f.prokind WHEN 'p' THEN 'PROCEDURE' ELSE 'FUNCTION' END, f.func, wanted);
		END IF;
	END LOOP;
END
$sweep$;


-- Update from 1.0 to 1.1 (docs/upgrading.md).  One transaction: any error
-- leaves the database as 1.0 left it.  Everything that can refuse the update
-- is checked here, before anything changes.  What the administrator must
-- know is a WARNING: PostgreSQL shows nothing below WARNING from an
-- extension script.

--@copy CREATE SCHEMA ringshard_internal
--@copy REVOKE ALL ON SCHEMA ringshard_internal
--@copy GRANT USAGE ON SCHEMA ringshard_internal

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
--@copy CREATE FUNCTION ringshard_internal.check_key_column
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

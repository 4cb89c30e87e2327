-- The catalog tables take their 1.1 shape; their rows stay.

-- The foreign-data wrapper of nodes and distributed tables, and the server
-- of distributed tables.
--@copy CREATE FUNCTION ringshard.fdw_handler
--@copy CREATE FUNCTION ringshard.fdw_validator
--@copy CREATE FOREIGN DATA WRAPPER ringshard
--@copy CREATE SERVER ringshard_cluster

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

--@copy CREATE TABLE ringshard.dead_letters
--@copy SELECT pg_catalog.pg_extension_config_dump('ringshard.dead_letters'
--@copy CREATE TABLE ringshard.transaction_records
--@copy CREATE INDEX ON ringshard.transaction_records

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
--@copy CREATE TABLE ringshard.write_queue
--@copy CREATE INDEX ON ringshard.write_queue
--@copy SELECT pg_catalog.pg_extension_config_dump('ringshard.write_queue'
--@copy SELECT pg_catalog.pg_extension_config_dump('ringshard.write_queue_ordinal_seq'

-- Workers: 1.1 delivers each queued write exactly once in a two-phase
-- transaction, with no record on the worker.
ALTER EXTENSION ringshard DROP TABLE ringshard.replayed_writes;
DROP TABLE ringshard.replayed_writes;

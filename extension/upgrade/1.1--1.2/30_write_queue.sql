-- 1.2 queues statements too (an UPDATE, DELETE or TRUNCATE for a replica
-- that is down), in the order of the rows queued with them.
ALTER TABLE ringshard.write_queue ALTER COLUMN payload DROP NOT NULL;
ALTER TABLE ringshard.write_queue ADD COLUMN statement text;
ALTER TABLE ringshard.write_queue
	ADD CONSTRAINT row_or_statement CHECK ((payload IS NULL) <> (statement IS NULL));
ALTER TABLE ringshard.dead_letters ALTER COLUMN payload DROP NOT NULL;
ALTER TABLE ringshard.dead_letters ADD COLUMN statement text;
ALTER TABLE ringshard.dead_letters
	ADD CONSTRAINT row_or_statement CHECK ((payload IS NULL) <> (statement IS NULL));

-- What the watchdog saw of each node in its last round.
--@copy CREATE TABLE ringshard.node_status

-- When each node was last marked down and up (ringshard.stat_nodes).
--@copy CREATE TABLE ringshard.node_marks

--
-- INSERT ... ON CONFLICT on distributed tables (src/fdw/statement_planner.c,
-- src/fdw/modify.c "Upserts"): each row goes to its replicas with the
-- conflict clause, the nodes' unique indexes resolve it, and the answer
-- (rows, RETURNING, the row count) is the one a local table gives.
--
-- The nodes are databases of this server; the coordinator is a database of
-- its own.  The server needs max_prepared_transactions.
--
SET client_min_messages = warning;
CREATE DATABASE upserts_coord;
CREATE DATABASE upserts_w1;
CREATE DATABASE upserts_w2;
CREATE DATABASE upserts_w3;
\c upserts_w1
CREATE EXTENSION ringshard;
\c upserts_w2
CREATE EXTENSION ringshard;
\c upserts_w3
CREATE EXTENSION ringshard;
\c upserts_coord
SET client_min_messages = warning;
CREATE EXTENSION ringshard;
SELECT format('host=%s port=%s',
			  coalesce(nullif(split_part(current_setting('unix_socket_directories'), ',', 1), ''), 'localhost'),
			  current_setting('port')) AS server \gset
SELECT ringshard.create_ring('pair', replication_factor => 2);
SELECT ringshard.add_node('w' || i, format('%s dbname=upserts_w%s', :'server', i), 'pair') FROM generate_series(1, 3) i;
SELECT count(*) FROM ringshard.sync_topology();

-- A distributed table and its local twin, with the same rows.
CREATE TABLE accounts_local (
	id bigint PRIMARY KEY,
	owner text NOT NULL,
	balance numeric(12,2) NOT NULL DEFAULT 0,
	visits int NOT NULL DEFAULT 0,
	opened date,
	note text
);
CREATE TABLE accounts (LIKE accounts_local INCLUDING ALL);
INSERT INTO accounts_local SELECT g, 'owner ' || g, g * 10, 0, date '2024-01-01' + g, NULL FROM generate_series(1, 40) g;
INSERT INTO accounts SELECT * FROM accounts_local;
SELECT ringshard.distribute_table('accounts', 'id', 'pair');
SELECT ringshard.create_distributed_table('accounts');

-- Both tables must hold the same rows (run after each step).
CREATE FUNCTION differences() RETURNS bigint LANGUAGE sql AS $$
	SELECT count(*) FROM ((TABLE accounts EXCEPT ALL TABLE accounts_local)
		UNION ALL (TABLE accounts_local EXCEPT ALL TABLE accounts)) d
$$;

-- DO NOTHING: an existing key is skipped (INSERT 0 0, no RETURNING row), a new one inserted.
INSERT INTO accounts VALUES (1, 'someone else', 5) ON CONFLICT (id) DO NOTHING RETURNING *;
INSERT INTO accounts_local VALUES (1, 'someone else', 5) ON CONFLICT (id) DO NOTHING RETURNING *;
INSERT INTO accounts VALUES (101, 'new', 5) ON CONFLICT DO NOTHING RETURNING id, owner, balance;
INSERT INTO accounts_local VALUES (101, 'new', 5) ON CONFLICT DO NOTHING RETURNING id, owner, balance;
-- the same key twice in one statement: DO NOTHING skips the second
INSERT INTO accounts (id, owner) VALUES (102, 'first'), (102, 'second') ON CONFLICT DO NOTHING;
INSERT INTO accounts_local (id, owner) VALUES (102, 'first'), (102, 'second') ON CONFLICT DO NOTHING;
SELECT differences();

-- DO UPDATE with the existing row (alias a), EXCLUDED, a WHERE, RETURNING, several rows.
INSERT INTO accounts AS a (id, owner, balance) VALUES (2, 'x', 7.5), (103, 'y', 1), (3, 'z', 2)
	ON CONFLICT (id) DO UPDATE SET balance = a.balance + EXCLUDED.balance, visits = a.visits + 1,
	note = coalesce(a.note, '') || 'upserted'
	RETURNING id, owner, balance, visits, note;
INSERT INTO accounts_local AS a (id, owner, balance) VALUES (2, 'x', 7.5), (103, 'y', 1), (3, 'z', 2)
	ON CONFLICT (id) DO UPDATE SET balance = a.balance + EXCLUDED.balance, visits = a.visits + 1,
	note = coalesce(a.note, '') || 'upserted'
	RETURNING id, owner, balance, visits, note;
INSERT INTO accounts AS a (id, owner) VALUES (4, 'x'), (5, 'y')
	ON CONFLICT (id) DO UPDATE SET owner = EXCLUDED.owner WHERE a.id % 2 = 0;
INSERT INTO accounts_local AS a (id, owner) VALUES (4, 'x'), (5, 'y')
	ON CONFLICT (id) DO UPDATE SET owner = EXCLUDED.owner WHERE a.id % 2 = 0;
SELECT differences();

-- DO UPDATE may not touch a row twice in one statement (as on one server: 21000).
INSERT INTO accounts (id, owner) VALUES (6, 'a'), (6, 'b') ON CONFLICT (id) DO UPDATE SET owner = EXCLUDED.owner;
INSERT INTO accounts (id, owner) VALUES (104, 'a'), (104, 'b') ON CONFLICT (id) DO UPDATE SET owner = EXCLUDED.owner;
-- ... unless the first was not written (its WHERE was false)
INSERT INTO accounts AS a (id, owner) VALUES (7, 'a'), (7, 'b') ON CONFLICT (id) DO UPDATE SET owner = EXCLUDED.owner
	WHERE EXCLUDED.owner = 'b';
INSERT INTO accounts_local AS a (id, owner) VALUES (7, 'a'), (7, 'b') ON CONFLICT (id) DO UPDATE SET owner = EXCLUDED.owner
	WHERE EXCLUDED.owner = 'b';
SELECT differences();

-- Without RETURNING, rows go in batches: per batch, one statement per
-- replica set to each of its replicas.  Old and new keys, a WHERE, the row
-- count; the same key twice in one batch goes row by row (21000 as above),
-- in two batches the coordinator remembers the first (21000 too).
CREATE FUNCTION rows_written(statement text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
	written bigint;
BEGIN
	EXECUTE statement;
	GET DIAGNOSTICS written = ROW_COUNT;
	RETURN written;
END
$$;
SELECT rows_written(format($$INSERT INTO %I (id, owner) SELECT g, 'batch ' || g FROM generate_series(1000, 1599) g
	ON CONFLICT DO NOTHING$$, t)) AS written
  FROM unnest(ARRAY['accounts', 'accounts_local']) t;
SELECT rows_written(format($$INSERT INTO %I AS a (id, owner, balance)
	SELECT g, 'again ' || g, g FROM generate_series(900, 1700) g
	ON CONFLICT (id) DO UPDATE SET balance = a.balance + EXCLUDED.balance, visits = a.visits + 1
	WHERE a.id %% 3 <> 0$$, t)) AS written
  FROM unnest(ARRAY['accounts', 'accounts_local']) t;
INSERT INTO accounts AS a (id, owner) SELECT CASE WHEN g = 2300 THEN 2000 ELSE g END, 'twice'
	FROM generate_series(2000, 2400) g ON CONFLICT (id) DO UPDATE SET owner = EXCLUDED.owner;
INSERT INTO accounts_local AS a (id, owner) SELECT CASE WHEN g = 2300 THEN 2000 ELSE g END, 'twice'
	FROM generate_series(2000, 2400) g ON CONFLICT (id) DO UPDATE SET owner = EXCLUDED.owner;
EXPLAIN (VERBOSE, COSTS OFF) INSERT INTO accounts (id, owner) VALUES (1, 'x'), (2, 'y') ON CONFLICT DO NOTHING;
SELECT differences();

-- A row without a key is refused, in a batch too (a text key: no value to hash).
CREATE TABLE tags (k text PRIMARY KEY, v int);
SELECT ringshard.distribute_table('tags', 'k', 'pair');
SELECT ringshard.create_distributed_table('tags');
INSERT INTO tags VALUES ('a', 1), (NULL, 2) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v;
INSERT INTO tags VALUES (NULL, 2) ON CONFLICT (k) DO NOTHING;
SELECT count(*) FROM tags;

-- Rows routed into the table from a partitioned table keep no conflict clause: refused.
CREATE TABLE routed (LIKE accounts_local) PARTITION BY RANGE (id);
ALTER TABLE routed ATTACH PARTITION accounts FOR VALUES FROM (MINVALUE) TO (MAXVALUE);
INSERT INTO routed (id, owner) VALUES (1, 'x') ON CONFLICT DO NOTHING;
ALTER TABLE routed DETACH PARTITION accounts;
DROP TABLE routed;

-- Values never depend on the session's settings; stable functions are
-- evaluated here, once, under the session's own settings.
SET DateStyle = 'SQL, DMY';
INSERT INTO accounts AS a (id, owner, opened) VALUES (8, 'x', '01/02/2024')
	ON CONFLICT (id) DO UPDATE SET opened = EXCLUDED.opened, note = current_setting('DateStyle');
INSERT INTO accounts_local AS a (id, owner, opened) VALUES (8, 'x', '01/02/2024')
	ON CONFLICT (id) DO UPDATE SET opened = EXCLUDED.opened, note = current_setting('DateStyle');
INSERT INTO accounts AS a (id, owner) VALUES (9, 'x')
	ON CONFLICT (id) DO UPDATE SET opened = to_date('2024-03-01', 'YYYY-MM-DD') + 1;
INSERT INTO accounts_local AS a (id, owner) VALUES (9, 'x')
	ON CONFLICT (id) DO UPDATE SET opened = to_date('2024-03-01', 'YYYY-MM-DD') + 1;
RESET DateStyle;
SELECT id, opened, note FROM accounts WHERE id IN (8, 9) ORDER BY id;
SELECT differences();

-- Prepared, planned once (a generic plan): parameters in VALUES and in SET.
SET plan_cache_mode = force_generic_plan;
PREPARE up(bigint, numeric) AS INSERT INTO accounts AS a (id, owner, balance) VALUES ($1, 'p', $2)
	ON CONFLICT (id) DO UPDATE SET balance = a.balance + $2 RETURNING id, balance;
PREPARE up_local(bigint, numeric) AS INSERT INTO accounts_local AS a (id, owner, balance) VALUES ($1, 'p', $2)
	ON CONFLICT (id) DO UPDATE SET balance = a.balance + $2 RETURNING id, balance;
EXECUTE up(10, 0.5); EXECUTE up(10, 0.25); EXECUTE up(105, 3);
EXECUTE up_local(10, 0.5); EXECUTE up_local(10, 0.25); EXECUTE up_local(105, 3);
EXPLAIN (VERBOSE, COSTS OFF) EXECUTE up(10, 1);
RESET plan_cache_mode;
SELECT differences();

-- What the nodes cannot do as we would is refused, and says why.
INSERT INTO accounts (id, owner) VALUES (11, 'x') ON CONFLICT (id) DO UPDATE SET id = EXCLUDED.id + 1000;
INSERT INTO accounts (id, owner) VALUES (11, 'x') ON CONFLICT (id) DO UPDATE SET visits = (random() * 10)::int;
INSERT INTO accounts (id, owner) VALUES (11, 'x') ON CONFLICT (id) DO UPDATE SET note = (SELECT max(owner) FROM accounts);
INSERT INTO accounts (id, owner) VALUES (11, 'x') ON CONFLICT (lower(owner)) DO NOTHING;
INSERT INTO accounts (id, owner) VALUES (11, 'x') ON CONFLICT (owner) DO NOTHING;
WITH w AS (INSERT INTO accounts (id, owner) VALUES (11, 'x') ON CONFLICT (id) DO NOTHING RETURNING id) SELECT * FROM w;
SELECT differences();

-- Every row on exactly its replicas, the same on each.
SELECT node, range, problem FROM ringshard.verify_table('accounts');

-- Replicas that disagree fail the statement, which changes nothing: a key
-- of w1 and a new key of w1 (replicas_for, the routing contract).
SELECT min(k) AS k1 FROM generate_series(12, 40) k WHERE 'w1' = ANY (replicas_for(k::bigint, 'pair')) \gset
SELECT min(k) AS k2 FROM generate_series(200, 300) k WHERE 'w1' = ANY (replicas_for(k::bigint, 'pair')) \gset
\c upserts_w1
SET client_min_messages = warning;
UPDATE public.accounts SET balance = 999 WHERE id = :k1;
\c upserts_coord
SET client_min_messages = warning;
-- a coordinator preloads ringshard (shared_preload_libraries); this test server does not
LOAD 'ringshard';
\set VERBOSITY terse
INSERT INTO accounts AS a (id, owner) VALUES (:k1, 'x') ON CONFLICT (id) DO UPDATE SET visits = a.visits + 1
	RETURNING balance;
\set VERBOSITY default
SELECT count(*) AS unchanged FROM accounts a JOIN accounts_local l USING (id) WHERE id = :k1 AND a.visits = l.visits;
-- mend it: the twin's balance on w1 again
SELECT balance AS balance1 FROM accounts_local WHERE id = :k1 \gset
\c upserts_w1
UPDATE public.accounts SET balance = :balance1 WHERE id = :k1;
\c upserts_coord
SET client_min_messages = warning;

-- A replica that is down gets the statement queued, and replays it.
SELECT ringshard.mark_node_down('w1');
INSERT INTO accounts AS a (id, owner) VALUES (:k1, 'x'), (:k2, 'q') ON CONFLICT (id) DO UPDATE SET visits = a.visits + 10;
INSERT INTO accounts_local AS a (id, owner) VALUES (:k1, 'x'), (:k2, 'q') ON CONFLICT (id) DO UPDATE SET visits = a.visits + 10;
SELECT count(*) AS queued FROM ringshard.write_queue WHERE node_name = 'w1';
SELECT ringshard.mark_node_up('w1');
SELECT node, delivered > 0 AS delivered, still_queued FROM ringshard.watchdog_tick() WHERE node = 'w1';
SELECT count(*) AS queued FROM ringshard.write_queue;
SELECT node, range, problem FROM ringshard.verify_table('accounts');
SELECT differences();

\c contrib_regression
SET client_min_messages = warning;
DROP DATABASE upserts_coord;
DROP DATABASE upserts_w1;
DROP DATABASE upserts_w2;
DROP DATABASE upserts_w3;

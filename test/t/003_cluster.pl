# Cluster mode: a coordinator and three workers on loopback.  Routed writes
# land exactly where docs/routing.md says, replicas agree, workers refuse
# misrouted rows, reads fail over, fan-out covers each range once, merges
# top-k like a single server, reports missing nodes, and runs in parallel.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $coordinator = PostgreSQL::Test::Cluster->new('coordinator');
my @workers = map { PostgreSQL::Test::Cluster->new("w$_") } 1 .. 3;
for my $node ($coordinator, @workers)
{
	$node->init;
	# nodes take part in two-phase commit
	$node->append_conf('postgresql.conf', "max_prepared_transactions = 20\nshared_preload_libraries = 'ringshard'");
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION ringshard');
}

my $setup = q{SET ringshard.node_timeout = '3s';};
for my $i (1 .. 3)
{
	my $w = $workers[ $i - 1 ];
	my $address = sprintf('host=%s port=%d dbname=postgres', $w->host, $w->port);
	$setup .= "SELECT ringshard.add_node('w$i', '$address');";
}
$setup .= q{
	SELECT ringshard.set_replication_factor('default', 2);
	SELECT ringshard.create_ring('solo');
	SELECT ringshard.add_node('w1', ring => 'solo');
	SELECT ringshard.add_node('w2', ring => 'solo');
	SELECT ringshard.add_node('w3', ring => 'solo');
	SELECT count(*) FROM ringshard.sync_topology();
	CREATE TABLE faces (face_id text, keyspace_id text, score float8, payload text);
	SELECT ringshard.distribute_table('faces', 'face_id');
	SELECT count(*) FROM ringshard.create_distributed_table('faces');
	CREATE TABLE events (id bigint, note text);
	SELECT ringshard.distribute_table('events', 'id', 'solo');
	SELECT count(*) FROM ringshard.create_distributed_table('events');
	-- the same rows on one server, for reference
	CREATE TABLE faces_reference AS
	  SELECT 'face-' || g AS face_id, 'ks' AS keyspace_id, (((g * 7919) % 1000) / 1000.0)::float8 AS score, 'p' || g AS payload
	    FROM generate_series(1, 300) g;
	INSERT INTO faces SELECT * FROM faces_reference;
	INSERT INTO events SELECT g, 'e' || g FROM generate_series(1, 90) g;
};
$coordinator->safe_psql('postgres', $setup);

is($coordinator->safe_psql('postgres', q{SELECT c.relkind::text || ' ' || s.srvname FROM pg_class c
	JOIN pg_foreign_table f ON f.ftrelid = c.oid JOIN pg_foreign_server s ON s.oid = f.ftserver WHERE c.oid = 'faces'::regclass}),
	'f ringshard_cluster', 'a distributed table is a foreign table of the cluster on the coordinator');
is($coordinator->safe_psql('postgres', 'SELECT count(*) FROM faces'), '300',
	'and it reads as a table: every row once');
is($workers[0]->safe_psql('postgres', 'SELECT topology_version FROM ringshard.cluster_state'),
	$coordinator->safe_psql('postgres', 'SELECT topology_version FROM ringshard.cluster_state'),
	'workers hold the coordinator\'s topology version');
# A node's answer for another topology version: ahead of the coordinator's
# statement (a sync committed meanwhile), a retryable 40001; behind it (a
# missed sync), an error that names sync_topology.
{
	my $version = $workers[0]->safe_psql('postgres', 'SELECT topology_version FROM ringshard.cluster_state');
	for my $case ([ $version - 1, qr/newer than the coordinator's.*\n.*DETAIL:  The topology changed while the statement ran.*\n.*HINT:  Retry the transaction/s, '40001' ],
		[ $version + 1, qr/holds topology version $version, the coordinator @{[ $version + 1 ]}.*HINT:  Run ringshard.sync_topology/s, '55000' ])
	{
		my ($asked, $message, $state) = @$case;
		my ($rc, $out, $err) = $workers[0]->psql('postgres', qq{
			\\set VERBOSITY verbose
			SELECT count(*) FROM faces t WHERE ringshard_worker.reads_here('public.faces'::regclass, t.face_id, '{}'::text[], $asked)});
		like($err, qr/ERROR:  $state: /, "a read asked at version $asked of a node at $version fails with $state");
		$err =~ s/ERROR:  $state: /ERROR:  /;
		like($err, $message, '... saying what to do');
	}
}

# A node behind only for a moment: a sync_topology has committed on the
# coordinator and its part on the node commits right after (here held back
# 3.5 s after the local commit).  A read meeting that moment waits for the
# node's prepared part (at most the node's ringshard.node_timeout, 20 s
# here) and answers under the new version, instead of failing with the
# error of a missed sync.
{
	for my $w (@workers)
	{
		$w->safe_psql('postgres', q{ALTER SYSTEM SET ringshard.node_timeout = '20s'; SELECT pg_reload_conf()});
		$w->poll_query_until('postgres', q{SELECT current_setting('ringshard.node_timeout') = '20s'})
		  or die 'the node timeout was not loaded';
	}
	my $syncer = $coordinator->background_psql('postgres');
	my $before = $workers[0]->safe_psql('postgres', 'SELECT topology_version FROM ringshard.cluster_state');
	$syncer->query_safe(q{SET ringshard.fault_injection = 'after_local_commit=sleep:3500'});
	$syncer->query_until(qr/syncing/, "\\echo syncing\nSELECT count(*) FROM ringshard.sync_topology();\n");
	ok($coordinator->poll_query_until('postgres',
		"SELECT topology_version > $before FROM ringshard.cluster_state"),
		'a sync committed on the coordinator');
	my $behind = $workers[0]->safe_psql('postgres', 'SELECT topology_version FROM ringshard.cluster_state') == $before;
	my $started = time;
	my ($rc, $out, $err) = $coordinator->psql('postgres', 'SELECT count(*) FROM faces');
	my $waited = time - $started;
	ok($behind && $rc == 0 && $out eq '300',
		"a read while the nodes' parts of that sync are still prepared waits for them and reads every row once (node behind: "
		. ($behind ? 'yes' : 'no') . ", $out)") or diag($err);
	cmp_ok($waited, '>', 1, sprintf('... it waited for them (%.1f s)', $waited));
	$syncer->quit;
	is($workers[0]->safe_psql('postgres', 'SELECT topology_version FROM ringshard.cluster_state'),
		$coordinator->safe_psql('postgres', 'SELECT topology_version FROM ringshard.cluster_state'),
		'... and the nodes then hold the new version');
	$_->safe_psql('postgres', q{ALTER SYSTEM RESET ringshard.node_timeout; SELECT pg_reload_conf()}) for @workers;
}

# Each worker holds exactly the rows whose replica set names it.
for my $i (1 .. 3)
{
	my $expected = $coordinator->safe_psql('postgres',
		"SELECT string_agg(face_id, ',' ORDER BY face_id) FROM faces_reference WHERE 'w$i' = ANY (replicas_for(face_id))");
	my $actual = $workers[ $i - 1 ]->safe_psql('postgres',
		"SELECT string_agg(face_id, ',' ORDER BY face_id) FROM faces");
	is($actual, $expected, "w$i holds exactly the rows docs/routing.md places on it");
}
my $total = 0;
$total += $_->safe_psql('postgres', 'SELECT count(*) FROM faces') for @workers;
is($total, 600, 'every row is stored twice (replication 2)');

# Replicas hold identical rows: per pair of nodes, the shared keys' rows match.
for my $pair ([ 1, 2 ], [ 1, 3 ], [ 2, 3 ])
{
	my ($a, $b) = @$pair;
	my $keys = $coordinator->safe_psql('postgres',
		"SELECT string_agg(quote_literal(face_id), ',') FROM faces_reference
		  WHERE replicas_for(face_id) @> ARRAY['w$a', 'w$b']");
	my $sql = "SELECT md5(string_agg(f::text, ';' ORDER BY face_id)) FROM faces f WHERE face_id IN ($keys)";
	is($workers[ $a - 1 ]->safe_psql('postgres', $sql), $workers[ $b - 1 ]->safe_psql('postgres', $sql),
		"w$a and w$b hold identical copies of their shared rows");
}

# A write straight to a worker that does not hold the key is refused.
my $foreign_key = $coordinator->safe_psql('postgres',
	q{SELECT 'x-' || g FROM generate_series(1, 1000) g WHERE NOT ('w1' = ANY (replicas_for('x-' || g))) LIMIT 1});
my ($rc, $out, $err) = $workers[0]->psql('postgres',
	"INSERT INTO faces VALUES ('$foreign_key', 'ks', 0.5, 'misrouted')");
isnt($rc, 0, 'a misrouted direct write fails');
like($err, qr/does not belong on node "w1"/, 'the worker names itself in the refusal');
my $own_key = $coordinator->safe_psql('postgres',
	q{SELECT 'x-' || g FROM generate_series(1, 1000) g WHERE 'w1' = ANY (replicas_for('x-' || g)) LIMIT 1});
($rc) = $workers[0]->psql('postgres', "INSERT INTO faces VALUES ('$own_key', 'ks', 0.5, 'direct') RETURNING 1");
is($rc, 0, 'a direct write of a row the worker holds is accepted');
$workers[0]->safe_psql('postgres', "DELETE FROM faces WHERE face_id = '$own_key'");

# A failed coordinator transaction leaves nothing on the workers.
($rc) = $coordinator->psql('postgres',
	"BEGIN; INSERT INTO faces VALUES ('rolled-back', 'ks', 1, 'x'); SELECT 1/0; COMMIT;");
my $left = 0;
$left += $_->safe_psql('postgres', "SELECT count(*) FROM faces WHERE face_id = 'rolled-back'") for @workers;
is($left, 0, 'a rolled-back insert reaches no worker');

# A rolled-back subtransaction rolls back its routed writes; the rest commit.
$coordinator->safe_psql('postgres', q{
	BEGIN;
	INSERT INTO faces VALUES ('sub-kept-1', 'ks', 0.5, 'kept');
	SAVEPOINT s1;
	INSERT INTO faces VALUES ('sub-undone', 'ks', 0.5, 'undone');
	SAVEPOINT s2;
	INSERT INTO faces VALUES ('sub-undone-inner', 'ks', 0.5, 'undone');
	ROLLBACK TO SAVEPOINT s1;
	INSERT INTO faces VALUES ('sub-kept-2', 'ks', 0.5, 'kept');
	SAVEPOINT s3;
	INSERT INTO faces VALUES ('sub-kept-3', 'ks', 0.5, 'kept');
	RELEASE SAVEPOINT s3;
	COMMIT;
});
my %sub_rows;
for my $w (@workers)
{
	$sub_rows{$_}++ for split /\n/, $w->safe_psql('postgres', q{SELECT face_id FROM faces WHERE face_id LIKE 'sub-%' ORDER BY 1});
}
is(join(',', map { "$_=$sub_rows{$_}" } sort keys %sub_rows), 'sub-kept-1=2,sub-kept-2=2,sub-kept-3=2',
	'rolled-back savepoints undo their routed writes on every replica; released ones commit');
$_->safe_psql('postgres', q{DELETE FROM faces WHERE face_id LIKE 'sub-%'}) for @workers;

# A write a worker refuses (a constraint only that worker has) fails the
# whole transaction with the worker's SQLSTATE: nothing of it is committed
# anywhere, not even the writes of a savepoint released before.
my ($keep_key, $poison_key) = split /\|/, $coordinator->safe_psql('postgres', q{
	SELECT (SELECT 'keep-' || g FROM generate_series(1, 1000) g WHERE 'w1' = ANY (replicas_for('keep-' || g)) LIMIT 1)
	       || '|' ||
	       (SELECT 'poison-' || g FROM generate_series(1, 1000) g WHERE 'w1' = ANY (replicas_for('poison-' || g)) LIMIT 1)});
$workers[0]->safe_psql('postgres', q{ALTER TABLE faces ADD CONSTRAINT no_poison CHECK (payload <> 'poison')});
($rc, $out, $err) = $coordinator->psql('postgres', qq{
	SET client_min_messages = error;
	\\set VERBOSITY verbose
	BEGIN;
	DO \$\$
	BEGIN
		FOR i IN 1 .. 2 LOOP
			BEGIN
				INSERT INTO faces VALUES (CASE i WHEN 1 THEN '$keep_key' ELSE 'undone-in-loop' END, 'ks', 0.5, 'x');
				IF i = 2 THEN RAISE EXCEPTION 'undo this one'; END IF;
			EXCEPTION WHEN raise_exception THEN NULL;
			END;
		END LOOP;
	END
	\$\$;
	INSERT INTO faces VALUES ('$poison_key', 'ks', 0.5, 'poison');
	COMMIT;
});
like($err, qr/23514: node "w1": new row for relation "faces" violates check constraint "no_poison"/,
	'a refused write fails with the worker\'s SQLSTATE and message, naming the node');
my $left_over = 0;
$left_over += $_->safe_psql('postgres', qq{SELECT count(*) FROM faces WHERE face_id IN ('$keep_key', '$poison_key', 'undone-in-loop')})
  for @workers;
is($left_over, 0, 'nothing of that transaction is on any worker');
is($coordinator->safe_psql('postgres', q{SELECT count(*) FROM ringshard.write_queue}), '0', 'and nothing was queued');
$workers[0]->safe_psql('postgres', q{ALTER TABLE faces DROP CONSTRAINT no_poison});

# Reads by key.
is($coordinator->safe_psql('postgres', q{SELECT payload FROM ringshard.cluster_get(NULL::faces, 'face-7')}),
	'p7', 'get by key reads the row from a replica');

# Get by key routes the key by its canonical bytes, whatever its spelling.
$coordinator->safe_psql('postgres', q{
	CREATE TABLE citizens (nik bigint, tag char(6), id uuid, name text);
	SELECT ringshard.distribute_table('citizens', 'nik');
	SELECT count(*) FROM ringshard.create_distributed_table('citizens');
	INSERT INTO citizens SELECT g, 'k' || g, md5(g::text)::uuid, 'n' || g FROM generate_series(1, 60) g;
	CREATE TABLE tagged (tag char(6), name text);
	SELECT ringshard.distribute_table('tagged', 'tag');
	SELECT count(*) FROM ringshard.create_distributed_table('tagged');
	INSERT INTO tagged SELECT 'k' || g, 'n' || g FROM generate_series(1, 60) g;
	CREATE TABLE by_uuid (id uuid, name text);
	SELECT ringshard.distribute_table('by_uuid', 'id');
	SELECT count(*) FROM ringshard.create_distributed_table('by_uuid');
	INSERT INTO by_uuid SELECT md5(g::text)::uuid, 'n' || g FROM generate_series(1, 60) g;
});
is($coordinator->safe_psql('postgres', q{
	SELECT count(*) FROM generate_series(1, 60) g
	 WHERE (SELECT name FROM ringshard.cluster_get(NULL::citizens, '0' || g)) IS DISTINCT FROM 'n' || g}),
	'0', 'a bigint key spelled with a leading zero is found on its replicas');
is($coordinator->safe_psql('postgres', q{
	SELECT count(*) FROM generate_series(1, 60) g
	 WHERE (SELECT name FROM ringshard.cluster_get(NULL::tagged, 'k' || g)) IS DISTINCT FROM 'n' || g}),
	'0', 'a char(6) key is found (padding and length kept)');
is($coordinator->safe_psql('postgres', q{
	SELECT count(*) FROM generate_series(1, 60) g
	 WHERE (SELECT name FROM ringshard.cluster_get(NULL::by_uuid, upper(md5(g::text)::uuid::text))) IS DISTINCT FROM 'n' || g}),
	'0', 'an upper-case uuid key is found');
($rc, $out, $err) = $coordinator->psql('postgres', q{SELECT * FROM ringshard.cluster_get(NULL::faces, NULL)});
like($err, qr/a key must not be null/, 'a NULL key is an error, not a crash');
is($coordinator->safe_psql('postgres', 'SELECT 1'), '1', 'the coordinator is still up');

# Fan-out: each row once, and top-k equal to one server's answer.
is($coordinator->safe_psql('postgres', q{SELECT count(*) FROM ringshard.cluster_fanout(NULL::faces)}),
	'300', 'a fan-out reads every row exactly once despite two copies');
my $topk_reference = $coordinator->safe_psql('postgres',
	q{SELECT string_agg(face_id || ':' || score, ',') FROM (SELECT * FROM faces_reference ORDER BY score DESC, face_id LIMIT 5) s});
my $topk = $coordinator->safe_psql('postgres',
	q{SELECT string_agg(face_id || ':' || score, ',') FROM ringshard.cluster_fanout(NULL::faces, NULL, 'score', 5)});
is($topk, $topk_reference, 'fan-out top-5 by score equals the single-server query');
is($coordinator->safe_psql('postgres',
	q{SELECT count(*) FROM ringshard.cluster_fanout(NULL::faces, $$score >= 0.5$$)}),
	$coordinator->safe_psql('postgres', q{SELECT count(*) FROM faces_reference WHERE score >= 0.5}),
	'a fan-out filter gives the same rows as on one server');

# Connections belong to a role: after connections were opened as the
# superuser, a session that switches to an ordinary role reaches the
# workers as that role, with its user mapping (trust authentication here,
# so the superuser waives the password the mapping would otherwise need).
$_->safe_psql('postgres', q{CREATE ROLE alice LOGIN; GRANT SELECT ON faces TO alice; GRANT USAGE ON SCHEMA ringshard TO alice;})
  for @workers;
$coordinator->safe_psql('postgres', q{CREATE ROLE alice LOGIN; GRANT SELECT ON faces TO alice;});
$coordinator->safe_psql('postgres', qq{CREATE USER MAPPING FOR alice SERVER w$_ OPTIONS (user 'alice', password_required 'false')})
  for 1 .. 3;
is($coordinator->safe_psql('postgres', q{
	SELECT count(*) FROM faces;
	SET ROLE alice;
	SELECT count(*) FROM faces;}),
	"300\n300", 'after SET ROLE the table reads the same, now as alice');
$workers[2]->safe_psql('postgres', q{REVOKE SELECT ON faces FROM alice});
($rc, $out, $err) = $coordinator->psql('postgres', q{SELECT count(*) FROM faces; SET ROLE alice; SELECT count(*) FROM faces;});
like($err, qr/node "w3": permission denied for table faces/,
	'as alice the workers check alice\'s privileges: a REVOKE on a worker holds');
like($out, qr/^300$/m, 'while the superuser\'s own connections still read every row');
$workers[2]->safe_psql('postgres', q{GRANT SELECT ON faces TO alice});
is($coordinator->safe_psql('postgres', q{SET ROLE alice; SELECT sum(rows) FROM ringshard.node_table_rows('faces');}),
	'600', 'an ordinary role can count rows per node');

# Monitoring.
my $health = $coordinator->safe_psql('postgres',
	q{SELECT string_agg(node || '=' || reachable, ',' ORDER BY node) FROM ringshard.node_health()});
is($health, 'w1=true,w2=true,w3=true', 'all workers are healthy');
# the size as a person reads it, and in bytes (each worker's own database)
my $sizes = $coordinator->safe_psql('postgres',
	q{SELECT string_agg(node || ' ' || database_size || ' ' || (database_size = pg_size_pretty(database_bytes))
	                    || ' ' || (database_bytes > 1000000), ',' ORDER BY node) FROM ringshard.node_health()});
like($sizes, qr/^w1 \d+ [kM]B true true,w2 \d+ [kM]B true true,w3 \d+ [kM]B true true$/,
	"node_health shows each database's size as pg_size_pretty does, and its bytes ($sizes)");
is($coordinator->safe_psql('postgres', q{SELECT sum(rows) FROM ringshard.node_table_rows('faces')}), '600',
	'rows per node add up to every copy');

# Parallelism: a fan-out sends its query to every worker at once.  Each
# worker's table is locked; the fan-out's three queries must all be waiting
# for those locks at the same time before any lock is released.
my @lockers = map { $_->background_psql('postgres') } @workers;
$_->query_safe('BEGIN; LOCK TABLE faces IN ACCESS EXCLUSIVE MODE;') for @lockers;
my $reader = $coordinator->background_psql('postgres', on_error_stop => 0);
$reader->query_until(qr/started/, q{\echo started
SELECT count(*) FROM faces;
});
my $all_waiting = 1;
for my $w (@workers)
{
	$all_waiting &&= $w->poll_query_until('postgres',
		q{SELECT count(*) = 1 FROM pg_stat_activity WHERE application_name LIKE 'ringshard %' AND wait_event_type = 'Lock'});
}
ok($all_waiting, 'the fan-out query waits on every worker at once (sent in parallel, not one after another)');
$_->query_safe('COMMIT;') for @lockers;
$_->quit for @lockers;
$reader->quit;

# A stopped worker: reads fail over, fan-out covers its ranges from replicas.
$workers[1]->stop;
my $w2_key = $coordinator->safe_psql('postgres',
	q{SELECT face_id FROM faces_reference WHERE (replicas_for(face_id))[1] = 'w2' ORDER BY face_id LIMIT 1});
my $w2_payload = $coordinator->safe_psql('postgres', "SELECT payload FROM faces_reference WHERE face_id = '$w2_key'");
for my $try (1 .. 5)
{
	is($coordinator->safe_psql('postgres', "SET ringshard.node_timeout = '2s'; SELECT payload FROM ringshard.cluster_get(NULL::faces, '$w2_key')"),
		$w2_payload, "read of a key owned by the stopped worker fails over (try $try)");
}
is($coordinator->safe_psql('postgres', q{SET ringshard.node_timeout = '2s'; SELECT count(*) FROM ringshard.cluster_fanout(NULL::faces)}),
	'300', 'with replication 2 a fan-out still reads every row with one worker down');
my $t0 = time;
$health = $coordinator->safe_psql('postgres',
	q{SET ringshard.node_timeout = '2s'; SELECT string_agg(node || '=' || reachable, ',' ORDER BY node) FROM ringshard.node_health()});
my $health_time = time - $t0;
is($health, 'w1=true,w2=false,w3=true', 'health shows the stopped worker');
cmp_ok($health_time, '<', 10, 'a dead worker costs at most the timeout');

# Replication 1: a missing worker means missing rows, named.
($rc, $out, $err) = $coordinator->psql('postgres',
	q{SET ringshard.node_timeout = '2s'; SELECT count(*) FROM ringshard.cluster_fanout(NULL::events)});
isnt($rc, 0, 'without allow_partial a fan-out with missing ranges fails');
like($err, qr/Nodes down or unreachable: w2/, 'the error names the stopped worker');
($rc, $out, $err) = $coordinator->psql('postgres',
	q{SET ringshard.node_timeout = '2s';
	  SELECT count(*) FROM ringshard.cluster_fanout(NULL::events, allow_partial => true);
	  SELECT ringshard.last_fanout_missing();});
is($rc, 0, 'with allow_partial the fan-out succeeds');
my ($partial_rows, $missing) = split /\n/, $out;
my $on_w2 = $coordinator->safe_psql('postgres',
	q{SELECT count(*) FROM generate_series(1, 90) g WHERE shard_for(g::bigint, 'solo') = 'w2'});
is($partial_rows, 90 - $on_w2, 'partial results hold the rows of the workers that answered');
is($missing, '{w2}', 'the missing worker is listed');
like($err, qr/some rows of table events are on no reachable node/, 'a warning says the result is partial');

# A write whose replica is down succeeds with the other replica and is
# queued for the stopped one (write quorum 1); with quorum 2 it fails.
my $new_key = $coordinator->safe_psql('postgres',
	q{SELECT 'new-' || g FROM generate_series(1, 1000) g WHERE 'w2' = ANY (replicas_for('new-' || g)) LIMIT 1});
($rc, $out, $err) = $coordinator->psql('postgres',
	"SET ringshard.node_timeout = '2s'; SET ringshard.write_quorum = 2; INSERT INTO faces VALUES ('$new_key', 'ks', 0.1, 'x')");
isnt($rc, 0, 'with write_quorum 2 a write to a stopped replica is an error');
($rc, $out, $err) = $coordinator->psql('postgres',
	"SET ringshard.node_timeout = '2s'; INSERT INTO faces VALUES ('$new_key', 'ks', 0.1, 'x')");
is($rc, 0, 'with write_quorum 1 the write succeeds on the other replica');
is($coordinator->safe_psql('postgres', q{SELECT node || '=' || queued FROM ringshard.write_queue_status}),
	'w2=1', 'the write is queued for the stopped worker');
$workers[1]->start;

$coordinator->stop;
$_->stop for grep { $_ != $workers[1] || 1 } @workers;
done_testing();

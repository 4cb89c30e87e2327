# A distributed table is a table: a realistic session against the
# coordinator's "faces" (coordinator and three workers, each its own server,
# replication 2), checked two ways: every answer equals the same statement on
# a local mirror table holding the same rows, and every worker, read
# directly, holds exactly the rows its replica sets give it, with equal
# contents.  Then the same with one worker killed: reads fail over, a
# fan-out covers its ranges from the replicas, writes queue, and nothing is
# lost once it is back.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $coordinator = PostgreSQL::Test::Cluster->new('coordinator');
my @workers = map { PostgreSQL::Test::Cluster->new("f$_") } 1 .. 3;
for my $node ($coordinator, @workers)
{
	$node->init;
	$node->append_conf('postgresql.conf', "max_prepared_transactions = 20\nshared_preload_libraries = 'ringshard'");
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION ringshard');
}
$coordinator->append_conf('postgresql.conf', q{
ringshard.watchdog_database = 'postgres'
ringshard.watchdog_interval = '300ms'
ringshard.node_timeout = '2s'
});
$coordinator->restart;

my $setup = '';
for my $i (1 .. 3)
{
	my $w = $workers[ $i - 1 ];
	$setup .= sprintf("SELECT ringshard.add_node('f%d', 'host=%s port=%d dbname=postgres');", $i, $w->host, $w->port);
}
$setup .= q{
	SELECT ringshard.set_replication_factor('default', 2);
	SELECT count(*) FROM ringshard.sync_topology();
};
$coordinator->safe_psql('postgres', $setup);

# A table that already holds rows, as a user would have it before distributing.
my ($rc, $out, $err) = $coordinator->psql('postgres', q{
	CREATE TABLE faces (
		nik text PRIMARY KEY,
		region integer NOT NULL,
		score numeric(6, 3) CHECK (score >= 0),
		enrolled date DEFAULT DATE '2026-01-01',
		note text
	);
	CREATE INDEX faces_region ON faces (region);
	INSERT INTO faces SELECT '3201' || lpad(g::text, 12, '0'), g % 17, (g * 7919 % 100000) / 1000.0, DATE '2026-01-01' + g % 300, 'n' || g
	  FROM generate_series(1, 3000) g;
	CREATE TABLE faces_mirror (LIKE faces INCLUDING ALL);
	INSERT INTO faces_mirror SELECT * FROM faces;
	SELECT ringshard.distribute_table('faces', 'nik');
	SELECT ringshard.create_distributed_table('faces');
});
is($rc, 0, 'a table holding rows is distributed');
like($err, qr/table faces is distributed: 3000 rows moved to their nodes/, 'the statement says how many rows moved');
is($coordinator->safe_psql('postgres', q{SELECT create_distributed_table FROM ringshard.create_distributed_table('faces')}),
	'0', 'distributing it again moves nothing');

# Each worker holds exactly the rows whose replica set names it, with the
# mirror's contents; the worker has the constraints and the index.
sub check_placement
{
	my ($label) = @_;
	my $mirror = $coordinator->safe_psql('postgres',
		q{SELECT string_agg(m::text, ';' ORDER BY nik) FROM faces_mirror m});
	is($coordinator->safe_psql('postgres', q{SELECT string_agg(f::text, ';' ORDER BY nik) FROM faces f}), $mirror,
		"$label: the distributed table reads exactly like its mirror");
	for my $i (1 .. 3)
	{
		my $expected = $coordinator->safe_psql('postgres',
			"SELECT md5(string_agg(m::text, ';' ORDER BY nik)) FROM faces_mirror m WHERE 'f$i' = ANY (replicas_for(nik))");
		my $actual = $workers[ $i - 1 ]->safe_psql('postgres',
			q{SELECT md5(string_agg(f::text, ';' ORDER BY nik)) FROM faces f});
		is($actual, $expected, "$label: f$i holds exactly its rows, with the same contents");
	}
}
check_placement('after distributing');
is($workers[0]->safe_psql('postgres', q{
	SELECT string_agg(conname || ':' || contype::text, ',' ORDER BY conname) FROM pg_constraint WHERE conrelid = 'faces'::regclass}),
	'faces_pkey:p,faces_score_check:c', 'the workers have the primary key and the check constraint');
is($workers[0]->safe_psql('postgres', q{SELECT count(*) FROM pg_indexes WHERE indexname = 'faces_region'}), '1',
	'and the index');

# Reads: by key, IN, a range, joins with a local table, subqueries, CTEs,
# aggregates, top-k, prepared statements, cursors.
$coordinator->safe_psql('postgres', q{
	CREATE TABLE regions (region integer PRIMARY KEY, name text);
	INSERT INTO regions SELECT g, 'region ' || g FROM generate_series(0, 16) g;
	CREATE TABLE watchlist (nik text);
	INSERT INTO watchlist SELECT '3201' || lpad(g::text, 12, '0') FROM generate_series(1, 3000, 97) g;
});
my @queries = (
	[ 'by key', q{SELECT * FROM %s WHERE nik = '3201000000002345'} ],
	[ 'by key, another spelling of the value', q{SELECT * FROM %s WHERE nik = '3201' || lpad('77', 12, '0')} ],
	[ 'IN list', q{SELECT * FROM %s WHERE nik IN ('3201' || lpad('1', 12, '0'), '3201' || lpad('2', 12, '0'), 'no such nik') ORDER BY nik} ],
	[ '= ANY', q{SELECT nik, score FROM %s WHERE nik = ANY (ARRAY['3201' || lpad('5', 12, '0'), '3201' || lpad('6', 12, '0')]) ORDER BY nik} ],
	[ 'range of a column', q{SELECT nik FROM %s WHERE score BETWEEN 10 AND 12 ORDER BY nik} ],
	[ 'pattern', q{SELECT count(*) FROM %s WHERE note LIKE 'n1%%'} ],
	[ 'join with a local table', q{SELECT r.name, count(*) FROM %s f JOIN regions r USING (region) GROUP BY r.name ORDER BY r.name} ],
	[ 'semi-join', q{SELECT nik FROM %s WHERE nik IN (SELECT nik FROM watchlist) ORDER BY nik} ],
	[ 'subquery', q{SELECT count(*) FROM %s WHERE score > (SELECT avg(score) FROM %s)} ],
	[ 'CTE', q{WITH top AS (SELECT * FROM %s ORDER BY score DESC, nik LIMIT 7) SELECT nik, score FROM top ORDER BY nik} ],
	[ 'aggregates', q{SELECT count(*), sum(score), min(score), max(score), avg(score), count(note) FROM %s} ],
	[ 'grouped aggregates', q{SELECT region, count(*), sum(score), avg(score) FROM %s GROUP BY region ORDER BY region} ],
	[ 'top-k', q{SELECT nik, score FROM %s ORDER BY score DESC, nik LIMIT 10} ],
	[ 'top-k with offset', q{SELECT nik FROM %s ORDER BY enrolled, nik LIMIT 5 OFFSET 20} ],
	[ 'distinct', q{SELECT DISTINCT region FROM %s ORDER BY region} ],
	[ 'window', q{SELECT nik, rank() OVER (ORDER BY score DESC, nik) FROM %s ORDER BY score DESC, nik LIMIT 3} ],
);
for my $q (@queries)
{
	my ($label, $sql) = @$q;
	my $distributed = $coordinator->safe_psql('postgres', sprintf($sql, 'faces', 'faces'));
	my $local = $coordinator->safe_psql('postgres', sprintf($sql, 'faces_mirror', 'faces_mirror'));
	is($distributed, $local, "SELECT, $label: same answer as the local mirror");
}
is($coordinator->safe_psql('postgres', q{
	PREPARE by_nik (text) AS SELECT note FROM faces WHERE nik = $1;
	EXECUTE by_nik('3201' || lpad('10', 12, '0'));
	EXECUTE by_nik('3201' || lpad('11', 12, '0'));
	EXECUTE by_nik('3201' || lpad('12', 12, '0'));
	EXECUTE by_nik('3201' || lpad('13', 12, '0'));
	EXECUTE by_nik('3201' || lpad('14', 12, '0'));
	EXECUTE by_nik('3201' || lpad('15', 12, '0'));
	EXECUTE by_nik('no such nik');}),
	"n10\nn11\nn12\nn13\nn14\nn15", 'a prepared statement routes each parameter (generic plans included)');
is($coordinator->safe_psql('postgres', q{
	BEGIN;
	DECLARE c CURSOR FOR SELECT nik FROM faces ORDER BY nik;
	FETCH 2 FROM c;
	FETCH 1 FROM c;
	CLOSE c;
	COMMIT;}),
	$coordinator->safe_psql('postgres',
		q{SELECT string_agg(nik, E'\n' ORDER BY nik) FROM (SELECT nik FROM faces_mirror ORDER BY nik LIMIT 3) s}),
	'a cursor reads the table in order, batch by batch');
my $key_replicas = $coordinator->safe_psql('postgres', q{SELECT array_to_string(replicas_for('3201000000000001'::text), ', ')});
like($coordinator->safe_psql('postgres', q{EXPLAIN (VERBOSE, COSTS OFF) SELECT * FROM faces WHERE nik = '3201000000000001'}),
	qr/Router: one healthy replica per value of nik.*Nodes: \Q$key_replicas\E \(the replicas of the key\).*Remote SQL: SELECT t.nik/s,
	'EXPLAIN names the router, the replicas of the key and the SQL sent');
like($coordinator->safe_psql('postgres', q{EXPLAIN (VERBOSE, COSTS OFF) SELECT nik FROM faces WHERE score > 99}),
	qr/Nodes: f1, f2, f3.*Remote SQL: SELECT t.nik FROM public.faces t WHERE \(t.score > /s,
	'EXPLAIN of a fan-out shows the filter sent to the nodes');

# Writes.  Each is applied to the mirror too.
sub both
{
	my ($sql) = @_;
	my @results;
	for my $table ('faces', 'faces_mirror')
	{
		(my $statement = $sql) =~ s/\{t\}/$table/g;
		my ($rc, $out, $err) = $coordinator->psql('postgres', $statement);
		push @results, "rc=$rc out=$out";
	}
	return @results;
}
my @r = both(q{INSERT INTO {t} VALUES ('9999999999999999', 3, 1.5, DEFAULT, 'new') RETURNING nik, enrolled, note});
is($r[0], $r[1], 'INSERT ... RETURNING returns the row with its defaults');
@r = both(q{UPDATE {t} SET note = 'by key' WHERE nik = '9999999999999999'});
is($r[0], $r[1], 'UPDATE by key reports one row');
@r = both(q{WITH u AS (UPDATE {t} SET note = note || '!' WHERE region = 6 RETURNING 1) SELECT count(*) FROM u});
is($r[0], $r[1], 'UPDATE by predicate counts each row once, not each copy');
@r = both(q{DELETE FROM {t} WHERE nik = '3201' || lpad('100', 12, '0')});
is($r[0], $r[1], 'DELETE by key reports one row');
@r = both(q{DELETE FROM {t} WHERE region = 7 AND score < 50});
is($r[0], $r[1], 'DELETE by predicate reports the rows deleted, once each');
@r = both(q{INSERT INTO {t} SELECT '5555' || lpad(g::text, 12, '0'), g % 17, 1, DATE '2026-03-01', 'bulk' FROM generate_series(1, 700) g});
is($r[0], $r[1], 'INSERT ... SELECT writes every row');
my $copy_file = $coordinator->basedir . '/faces.copy';
open(my $fh, '>', $copy_file) or die;
print $fh join("\t", sprintf('6666%012d', $_), $_ % 17, '2.5', '2026-04-01', "copied\\tline $_") . "\n" for 1 .. 500;
close($fh);
@r = both("COPY {t} FROM '$copy_file'");
is($r[0], $r[1], 'COPY into the table writes every row');
check_placement('after the writes');

# Constraints hold across the cluster.
($rc, $out, $err) = $coordinator->psql('postgres', q{\set VERBOSITY verbose
INSERT INTO faces VALUES ('9999999999999999', 1, 1, DEFAULT, 'duplicate')});
like($err, qr/ERROR:  23505: node "f\d": duplicate key value violates unique constraint "faces_pkey"/,
	'a duplicate key fails with 23505, naming the node');
like($err, qr/DETAIL:  Key \(nik\)=\(9999999999999999\) already exists/, 'with the worker\'s detail');
($rc, $out, $err) = $coordinator->psql('postgres', q{\set VERBOSITY verbose
INSERT INTO faces VALUES ('8888888888888888', 1, -1, DEFAULT, 'negative')});
like($err, qr/23514: node "f\d": new row for relation "faces" violates check constraint "faces_score_check"/,
	'a CHECK constraint is enforced with its SQLSTATE');
($rc, $out, $err) = $coordinator->psql('postgres', q{UPDATE faces SET nik = 'moved' WHERE nik = '9999999999999999'});
like($err, qr/cannot change the sharding key of distributed table faces/, 'an UPDATE of the sharding key is refused');
($rc, $out, $err) = $coordinator->psql('postgres', q{ALTER TABLE faces ADD CONSTRAINT note_unique UNIQUE (note)});
like($err, qr/does not include the sharding key "nik"/, 'a unique constraint without the key is refused, saying why');

# DDL reaches every worker; the new column is used at once.
$coordinator->safe_psql('postgres', q{
	ALTER TABLE faces ADD COLUMN camera text DEFAULT 'cam-0';
	ALTER TABLE faces_mirror ADD COLUMN camera text DEFAULT 'cam-0';
	UPDATE faces SET camera = 'cam-' || region::text WHERE region < 3;
	UPDATE faces_mirror SET camera = 'cam-' || region::text WHERE region < 3;
	INSERT INTO faces (nik, region, score, camera) VALUES ('7777777777777777', 1, 3, 'cam-x');
	INSERT INTO faces_mirror (nik, region, score, camera) VALUES ('7777777777777777', 1, 3, 'cam-x');
	CREATE INDEX faces_camera ON faces (camera);
});
is(join(',', map { $_->safe_psql('postgres', q{SELECT count(*) FROM pg_attribute WHERE attrelid = 'faces'::regclass AND attname = 'camera'}) } @workers),
	'1,1,1', 'ALTER TABLE ADD COLUMN reached every worker');
is(join(',', map { $_->safe_psql('postgres', q{SELECT count(*) FROM pg_indexes WHERE indexname = 'faces_camera'}) } @workers),
	'1,1,1', 'CREATE INDEX reached every worker');
is($coordinator->safe_psql('postgres', q{SELECT camera, count(*) FROM faces GROUP BY camera ORDER BY camera}),
	$coordinator->safe_psql('postgres', q{SELECT camera, count(*) FROM faces_mirror GROUP BY camera ORDER BY camera}),
	'the new column is read and written like any other');
check_placement('after ALTER TABLE');

# One worker killed: reads by key fail over, the fan-out covers its ranges
# from the replicas, writes queue (write_quorum 1), nothing is lost.
$coordinator->safe_psql('postgres', q{ALTER SYSTEM SET ringshard.watchdog_interval = '1h'; SELECT pg_reload_conf();});
my $killed_pid = $workers[1]->{_pid};
$workers[1]->kill9;
# its backends leave once they see their postmaster gone; then it answers no more
for (1 .. 300)
{
	last unless kill(0, $killed_pid) || !system("pg_isready -q -h " . $workers[1]->host . " -p " . $workers[1]->port);
	select(undef, undef, undef, 0.1);
}
my $f2_keys = $coordinator->safe_psql('postgres',
	q{SELECT string_agg(quote_literal(nik), ',') FROM (SELECT nik FROM faces_mirror WHERE (replicas_for(nik))[1] = 'f2' ORDER BY nik LIMIT 20) s});
is($coordinator->safe_psql('postgres', "SELECT count(*) FROM faces WHERE nik IN ($f2_keys)"), '20',
	'reads of keys whose first replica was killed fail over to the other replica');
is($coordinator->safe_psql('postgres', q{SELECT count(*), sum(score) FROM faces}),
	$coordinator->safe_psql('postgres', q{SELECT count(*), sum(score) FROM faces_mirror}),
	'a fan-out reads every row from the remaining replicas');
like($coordinator->safe_psql('postgres', q{SELECT count(*) FROM faces; SELECT ringshard.last_fanout_missing();}),
	qr/\{f2\}/, 'and says which node it left out');
($rc, $out, $err) = $coordinator->psql('postgres', q{
	INSERT INTO faces SELECT '4444' || lpad(g::text, 12, '0'), g % 17, 4, DATE '2026-05-01', 'while f2 was down', 'cam-q'
	  FROM generate_series(1, 200) g});
is($rc, 0, 'writes succeed with one replica down (write_quorum 1)');
$coordinator->safe_psql('postgres', q{
	INSERT INTO faces_mirror SELECT '4444' || lpad(g::text, 12, '0'), g % 17, 4, DATE '2026-05-01', 'while f2 was down', 'cam-q'
	  FROM generate_series(1, 200) g});
my $queued = $coordinator->safe_psql('postgres', q{SELECT queued FROM ringshard.write_queue_status WHERE node = 'f2'});
my $for_f2 = $coordinator->safe_psql('postgres',
	q{SELECT count(*) FROM generate_series(1, 200) g WHERE 'f2' = ANY (replicas_for('4444' || lpad(g::text, 12, '0')))});
is($queued, $for_f2, "the dead worker's writes are queued ($queued)");
# UPDATE and DELETE reach the replicas that are up and are queued for the
# down one, in order after the rows queued before them.
my $f2_queued_before = $coordinator->safe_psql('postgres', q{SELECT count(*) FROM ringshard.write_queue WHERE node_name = 'f2'});
($rc, $out, $err) = $coordinator->psql('postgres', q{UPDATE faces SET note = 'updated while f2 was down' WHERE region = 1});
is($rc, 0, 'an UPDATE of every node succeeds with one replica down') or diag($err);
is($out, '', 'quietly');
$coordinator->safe_psql('postgres', q{UPDATE faces_mirror SET note = 'updated while f2 was down' WHERE region = 1});
is($coordinator->safe_psql('postgres', q{SELECT count(*) FROM faces WHERE note = 'updated while f2 was down'}),
	$coordinator->safe_psql('postgres', q{SELECT count(*) FROM faces_mirror WHERE note = 'updated while f2 was down'}),
	'it counts and changes each row once, from the replicas that are up');
($rc, $out, $err) = $coordinator->psql('postgres', q{
	UPDATE faces SET score = score + 10 WHERE nik = '4444000000000007' RETURNING score::int});
is("$rc $out", '0 14', 'an UPDATE by key with RETURNING, the key just queued for f2 too') or diag($err);
$coordinator->safe_psql('postgres', q{UPDATE faces_mirror SET score = score + 10 WHERE nik = '4444000000000007'});
$coordinator->safe_psql('postgres', q{DELETE FROM faces WHERE nik IN ('4444000000000008', '4444000000000009')});
$coordinator->safe_psql('postgres', q{DELETE FROM faces_mirror WHERE nik IN ('4444000000000008', '4444000000000009')});
cmp_ok($coordinator->safe_psql('postgres', q{SELECT count(*) FROM ringshard.write_queue WHERE node_name = 'f2' AND statement IS NOT NULL}),
	'>=', 2, 'the statements are queued for f2 (the fan-out UPDATE and each write of its keys)');
($rc, $out, $err) = $coordinator->psql('postgres', q{SET ringshard.write_quorum = 2; UPDATE faces SET note = 'y' WHERE region = 2});
like($err, qr/node "f2" is down, so UPDATE would reach fewer than ringshard.write_quorum \(2\) copies/,
	'with write_quorum 2 an UPDATE that needs the down node is refused');
is($coordinator->safe_psql('postgres', q{SELECT count(*) FROM faces WHERE note = 'y'}), '0', 'and changes nothing');
$workers[1]->start;
$coordinator->safe_psql('postgres', q{ALTER SYSTEM SET ringshard.watchdog_interval = '300ms'; SELECT pg_reload_conf();});
ok($coordinator->poll_query_until('postgres', q{SELECT count(*) = 0 FROM ringshard.write_queue}),
	'the watchdog delivers the queue once the worker is back');
ok($coordinator->poll_query_until('postgres', q{SELECT bool_and(is_up) FROM ringshard.nodes}),
	'and marks it up');
check_placement('after the outage');
# the records of the queue's own delivery are cleared by the watchdog's next round
ok($coordinator->poll_query_until('postgres', q{SELECT count(*) = 0 FROM ringshard.transaction_records}),
	'no commit record is left');
is(join(',', map { $_->safe_psql('postgres', q{SELECT count(*) FROM pg_prepared_xacts}) } @workers), '0,0,0',
	'no prepared transaction is left on any worker');

# TRUNCATE and DROP TABLE reach the workers.
$coordinator->safe_psql('postgres', q{TRUNCATE faces});
is(join(',', map { $_->safe_psql('postgres', q{SELECT count(*) FROM faces}) } @workers), '0,0,0', 'TRUNCATE empties every copy');
$coordinator->safe_psql('postgres', q{DROP TABLE faces});
is(join(',', map { $_->safe_psql('postgres', q{SELECT count(*) FROM pg_class WHERE relname = 'faces'}) } @workers), '0,0,0',
	'DROP TABLE drops it on every worker');

$_->stop for ($coordinator, @workers);
done_testing();

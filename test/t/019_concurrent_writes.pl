# Concurrent writes behave as on one server: sessions hammering one row at
# R = 2 and R = 3 all finish, every update applied exactly once; two
# transactions that write two keys in opposite orders get one deadlock error
# (40P01, which clients retry) within about deadlock_timeout; READ COMMITTED
# writers of one row wait and apply instead of failing with 40001; pgbench's
# TPC-B on distributed tables keeps its invariants, with every replica equal.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $coordinator = PostgreSQL::Test::Cluster->new('coordinator');
my @workers = map { PostgreSQL::Test::Cluster->new("c$_") } 1 .. 3;
for my $node ($coordinator, @workers)
{
	$node->init;
	$node->append_conf('postgresql.conf', "max_prepared_transactions = 40\nmax_connections = 60\nshared_preload_libraries = 'ringshard'");
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION ringshard');
}
$coordinator->append_conf('postgresql.conf', "deadlock_timeout = '500ms'");
$coordinator->reload;

my $setup = q{SELECT ringshard.create_ring('three');};
for my $i (1 .. 3)
{
	my $w = $workers[ $i - 1 ];
	$setup .= sprintf("SELECT ringshard.add_node('c%d', 'host=%s port=%d dbname=postgres');", $i, $w->host, $w->port);
	$setup .= sprintf("SELECT ringshard.add_node('c%d', ring => 'three');", $i);
}
$setup .= q{
	SELECT ringshard.set_replication_factor('default', 2);
	SELECT ringshard.set_replication_factor('three', 3);
	SELECT count(*) FROM ringshard.sync_topology();
	CREATE TABLE counters (id int PRIMARY KEY, n bigint NOT NULL DEFAULT 0, note text);
	INSERT INTO counters SELECT g, 0 FROM generate_series(1, 100) g;
	SELECT ringshard.distribute_table('counters', 'id');
	SELECT ringshard.create_distributed_table('counters');
	CREATE TABLE counters3 (LIKE counters INCLUDING ALL);
	INSERT INTO counters3 SELECT g, 0 FROM generate_series(1, 100) g;
	SELECT ringshard.distribute_table('counters3', 'id', 'three');
	SELECT ringshard.create_distributed_table('counters3');
};
$coordinator->safe_psql('postgres', $setup);

my $tmp = PostgreSQL::Test::Utils::tempdir;

# pgbench against the coordinator: (failed transactions, processed, output)
sub pgbench
{
	my ($script, $args) = @_;
	my $file = "$tmp/script.sql";
	open my $fh, '>', $file or die;
	print $fh $script;
	close $fh;
	my ($stdout, $stderr);
	my $started = time;
	IPC::Run::run([ 'pgbench', '-n', '-h', $coordinator->host, '-p', $coordinator->port, @$args, '-f', $file,
					'postgres' ], '>', \$stdout, '2>', \$stderr, IPC::Run::timeout(180));
	my ($processed) = $stdout =~ /number of transactions actually processed: (\d+)/;
	my ($failed) = $stdout =~ /number of failed transactions: (\d+)/;
	return ($failed // -1, $processed // -1, "$stdout$stderr", time - $started);
}

sub replicas_equal
{
	my ($table) = @_;
	return $coordinator->safe_psql('postgres', "SELECT count(*) FROM ringshard.verify_table('$table')");
}

# ---------------------------------------------------------------------------
# One row, hammered: 2 and 8 sessions, at R = 2 and R = 3.
for my $case ([ 'counters', 2 ], [ 'counters', 8 ], [ 'counters3', 2 ], [ 'counters3', 8 ])
{
	my ($table, $clients) = @$case;
	my $copies = $table eq 'counters' ? 2 : 3;
	my $before = $coordinator->safe_psql('postgres', "SELECT n FROM $table WHERE id = 1");
	my ($failed, $processed, $out, $seconds) =
	  pgbench("UPDATE $table SET n = n + 1 WHERE id = 1;\n", [ '-c', $clients, '-j', 2, '-t', 100 ]);
	is($failed, 0, "$clients sessions on one row at R = $copies: no statement failed") or diag $out;
	is($processed, $clients * 100, "$clients sessions on one row at R = $copies: every update ran");
	is($coordinator->safe_psql('postgres', "SELECT n FROM $table WHERE id = 1"), $before + $clients * 100,
		"$clients sessions on one row at R = $copies: every update applied exactly once");
	is(replicas_equal($table), '0', "$clients sessions on one row at R = $copies: every replica holds the same row");
	note sprintf('%d sessions, R = %d: %d updates in %.1f s', $clients, $copies, $processed, $seconds);
}

# The same in explicit READ COMMITTED transactions that read the row first:
# the later writer waits for the earlier, then applies to its row (no 40001).
{
	my $before = $coordinator->safe_psql('postgres', q{SELECT n FROM counters WHERE id = 2});
	my ($failed, $processed, $out) = pgbench(q{
BEGIN ISOLATION LEVEL READ COMMITTED;
SELECT n FROM counters WHERE id = 2;
UPDATE counters SET n = n + 1 WHERE id = 2;
UPDATE counters SET n = n + 1 WHERE id = 2;
COMMIT;
}, [ '-c', 4, '-j', 2, '-t', 50 ]);
	is($failed, 0, 'READ COMMITTED writers of one row: no serialization failure') or diag $out;
	unlike($out, qr/could not serialize/, 'and no 40001 at all');
	is($coordinator->safe_psql('postgres', q{SELECT n FROM counters WHERE id = 2}), $before + 4 * 50 * 2,
		'READ COMMITTED writers of one row: every update applied');
}

# REPEATABLE READ keeps its meaning: a writer whose snapshot is older than
# the row it updates fails, as on one server (pgbench counts and retries it).
{
	my ($failed, $processed, $out) = pgbench(q{
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT n FROM counters WHERE id = 3;
SELECT pg_sleep(0.01);
UPDATE counters SET n = n + 1 WHERE id = 3;
COMMIT;
}, [ '-c', 4, '-j', 2, '-t', 20, '--max-tries', '50' ]);
	is($failed, 0, 'REPEATABLE READ writers of one row succeed once retried') or diag $out;
	like($out, qr/number of transactions retried: [1-9]/, 'after serialization failures, as on one server');
}

# ---------------------------------------------------------------------------
# Two transactions writing two keys on different nodes in opposite orders.
my ($k1, $k2) = split /\|/, $coordinator->safe_psql('postgres', q{
	SELECT a.id || '|' || b.id FROM counters a, counters b
	 WHERE (replicas_for(a.id))[1] <> (replicas_for(b.id))[1] AND a.id > 10 AND b.id > 10 LIMIT 1});
my @sessions;
my $started = time;
for my $order ([ $k1, $k2 ], [ $k2, $k1 ])
{
	# each session reads its own file: both run at once
	my $file = "$tmp/crossing-$order->[0].sql";
	open my $fh, '>', $file or die;
	print $fh "BEGIN;\nUPDATE counters SET note = 'x' WHERE id = $order->[0];\nSELECT pg_sleep(1);\n"
	  . "UPDATE counters SET n = n + 1 WHERE id = $order->[1];\nCOMMIT;\n";
	close $fh;
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start([ 'psql', '-X', '-h', $coordinator->host, '-p', $coordinator->port, '-d', 'postgres',
							  '-f', $file ], '>', \$out, '2>', \$err, IPC::Run::timeout(60));
	push @sessions, [ $h, \$out, \$err ];
}
$_->[0]->finish for @sessions;
my $elapsed = time - $started;
my @errors = map { ${ $_->[2] } } @sessions;
is(scalar(grep { /ERROR:  deadlock detected/ } @errors), 1,
	'two transactions crossing two nodes in opposite orders: exactly one gets a deadlock error');
ok($elapsed < 10, sprintf('within a bounded time (%.1f s; deadlock_timeout is 0.5 s)', $elapsed));
is($coordinator->safe_psql('postgres', "SELECT count(*) FROM counters WHERE id IN ($k1, $k2) AND note = 'x'"), '1',
	'the other one committed (one of the two keys was written by it)');
is(replicas_equal('counters'), '0', 'and every replica holds the same rows');

# ---------------------------------------------------------------------------
# pgbench TPC-B on distributed tables (the recipe of docs/cluster.md).
my ($init_out, $init_err) = ('', '');
IPC::Run::run([ 'pgbench', '-i', '-s', '1', '-q', '-h', $coordinator->host, '-p', $coordinator->port, 'postgres' ],
	'>', \$init_out, '2>', \$init_err) or die "pgbench -i: $init_err";
$coordinator->safe_psql('postgres', q{
	SELECT ringshard.distribute_table('pgbench_accounts', 'aid');
	SELECT ringshard.distribute_table('pgbench_tellers', 'tid');
	SELECT ringshard.distribute_table('pgbench_branches', 'bid');
	SELECT ringshard.distribute_table('pgbench_history', 'aid');
	SELECT ringshard.create_distributed_table(t)
	  FROM unnest('{pgbench_accounts,pgbench_tellers,pgbench_branches,pgbench_history}'::regclass[]) t;
});
for my $mode ('simple', 'prepared')
{
	my ($stdout, $stderr);
	IPC::Run::run([ 'pgbench', '-n', '-M', $mode, '-c', 4, '-j', 2, '-t', 100, '-h', $coordinator->host,
					'-p', $coordinator->port, 'postgres' ], '>', \$stdout, '2>', \$stderr, IPC::Run::timeout(300));
	my ($processed) = $stdout =~ /number of transactions actually processed: (\d+)/;
	my ($failed) = $stdout =~ /number of failed transactions: (\d+)/;
	is($failed, 0, "pgbench TPC-B (-M $mode, 4 clients): no failed transaction") or diag "$stdout$stderr";
	is($processed, 400, "pgbench TPC-B (-M $mode): every transaction ran");
}
is($coordinator->safe_psql('postgres', q{
	SELECT (SELECT sum(abalance) FROM pgbench_accounts) = (SELECT sum(delta) FROM pgbench_history)
	   AND (SELECT sum(tbalance) FROM pgbench_tellers) = (SELECT sum(delta) FROM pgbench_history)
	   AND (SELECT sum(bbalance) FROM pgbench_branches) = (SELECT sum(delta) FROM pgbench_history)
	   AND (SELECT count(*) FROM pgbench_history) = 800}), 't',
	'TPC-B invariants: sum(abalance) = sum(tbalance) = sum(bbalance) = sum(delta), 800 history rows');
for my $table (qw(pgbench_accounts pgbench_tellers pgbench_branches pgbench_history))
{
	is(replicas_equal($table), '0', "$table: every row on exactly its replicas, with equal contents");
}
my $workers_sum = 0;
for my $i (1 .. 3)
{
	$workers_sum += $workers[ $i - 1 ]->safe_psql('postgres',
		"SELECT coalesce(sum(abalance), 0) FROM pgbench_accounts WHERE (replicas_for(aid))[1] = 'c$i'");
}
is($workers_sum, $coordinator->safe_psql('postgres', q{SELECT sum(delta) FROM pgbench_history}),
	'read on the workers (each row on its owner), the balances add up to the history');

done_testing();

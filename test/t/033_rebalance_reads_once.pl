# At one copy per row (R = 1) a fan-out reads every node and, with the
# table laid out in place, filters nothing: each row is on one node.  During
# a move, the rows a batch copied stay on the node they left until their
# group's delete commits there; a fan-out must read each row once all the
# same.  The attack: the delete of the move's last group is committed on
# the coordinator (its steps marked done) but its COMMIT PREPARED on the
# node the rows left has not run yet, so the rows are visible on both
# nodes.  Before the fix, a fan-out in that moment counted them twice.
#
# 1. The coordinator sleeps after each local commit of the rebalance
#    (fault point after_local_commit): a second session counts the table
#    over and over meanwhile, and must count every row exactly once, also
#    while every step is done and the move is not yet finished.
# 2. The coordinator crashes right after the local commit of the delete:
#    the delete stays prepared on the node the rows left (no watchdog runs
#    recovery here); the table still reads every row once, and the next
#    rebalance commits the delete before it records the move as finished.
# 3. The coordinator crashes after a target committed a batch's copy and
#    before the batch is marked copied here: the steps are still to copy,
#    their rows are read once and written on the node they leave, and the
#    next rebalance clears the target before it copies them again.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(time usleep);
use FindBin;
use lib "$FindBin::RealBin/../perl";
use RingshardTestCluster qw(start_servers add_workers);

my ($coordinator, @workers) = start_servers(workers => [qw(o1 o2)],
	coordinator_conf => 'restart_after_crash = on');
add_workers($coordinator, $workers[0]);

my $rows = 3000;
$coordinator->safe_psql('postgres', qq{
	SELECT ringshard.set_replication_factor('default', 1);
	SELECT count(*) FROM ringshard.sync_topology();
	CREATE TABLE paced (id bigint PRIMARY KEY, payload text NOT NULL);
	CREATE TABLE crashed (id bigint PRIMARY KEY, payload text NOT NULL);
	CREATE TABLE stale (id bigint PRIMARY KEY, payload text NOT NULL);
	SELECT ringshard.distribute_table('paced', 'id');
	SELECT ringshard.distribute_table('crashed', 'id');
	SELECT ringshard.distribute_table('stale', 'id');
	SELECT count(*) FROM ringshard.create_distributed_table('paced');
	SELECT count(*) FROM ringshard.create_distributed_table('crashed');
	SELECT count(*) FROM ringshard.create_distributed_table('stale');
	INSERT INTO paced SELECT g, 'row-' || g FROM generate_series(1, $rows) g;
	INSERT INTO crashed SELECT g, 'row-' || g FROM generate_series(1, $rows) g;
	INSERT INTO stale SELECT g, 'row-' || g FROM generate_series(1, $rows) g;
});
# one source, one target: the move of each table is one batch, one delete
# (sync_topology creates the tables on the new node)
add_workers($coordinator, $workers[1]);
$coordinator->safe_psql('postgres', 'SELECT count(*) FROM ringshard.sync_topology()');

# Every row on exactly its replica, once, and nothing left prepared.
sub placed_exactly
{
	my ($table) = @_;
	for my $worker (@workers)
	{
		my $name = $worker->name;
		my $expected = $coordinator->safe_psql('postgres',
			"SELECT string_agg(g::text, ',' ORDER BY g) FROM generate_series(1, $rows) g WHERE '$name' = ANY (replicas_for(g::bigint))");
		is($worker->safe_psql('postgres', "SELECT string_agg(id::text, ',' ORDER BY id) FROM $table"),
			$expected, "$name holds exactly its rows of $table after the move");
	}
	my $prepared = 0;
	$prepared += $_->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts') for @workers;
	is($prepared, 0, "no prepared transaction is left on any worker after the move of $table");
	return;
}

# A rebalance of the table whose session crashes the coordinator at the
# fault point; returns once the coordinator is back.
sub rebalance_crashing_at
{
	my ($point, $table, $when) = @_;
	my $offset = -s $coordinator->logfile;
	my ($rc, $stdout, $stderr) = $coordinator->psql('postgres',
		"SET ringshard.fault_injection = '$point=crash'; CALL ringshard.rebalance('$table')");
	isnt($rc, 0, "the rebalance of $table dies with the coordinator");
	ok($coordinator->wait_for_log(qr/ringshard fault injection: crash at $point/, $offset), "the crash came $when");
	$coordinator->wait_for_log(qr/all server processes terminated; reinitializing/, $offset);
	$coordinator->poll_query_until('postgres', 'SELECT true') or die 'the coordinator did not come back';
	return;
}

# 1. Counting during a paced move.
my ($out, $err) = ('', '');
my $move = IPC::Run::start(
	[ 'psql', '-X', '-v', 'ON_ERROR_STOP=1', '-d', $coordinator->connstr('postgres'),
	  '-c', q{SET ringshard.fault_injection = 'after_local_commit=sleep:2500'},
	  '-c', q{CALL ringshard.rebalance('paced')} ],
	'>', \$out, '2>', \$err,
	IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
my ($samples, $wrong, $in_window, $in_window_wrong) = (0, 0, 0, 0);
my $deadline = time() + 120;
while (time() < $deadline)
{
	$move->pump_nb;
	last unless $move->pumpable;
	# the move's state first, then the count: a state of "all done" seen
	# before the count means the count began inside the window or later
	my $state = $coordinator->safe_psql('postgres', q{
		SELECT CASE WHEN count(*) = 0 THEN 'none' WHEN bool_and(state = 'done') THEN 'all done' ELSE 'moving' END
		  FROM ringshard.rebalance_progress WHERE table_name = 'paced'::regclass});
	my $count = $coordinator->safe_psql('postgres', 'SELECT count(*) FROM paced');
	$samples++;
	$wrong++ if $count != $rows;
	diag("read $count rows, the move's steps $state") if $count != $rows;
	if ($state eq 'all done')
	{
		$in_window++;
		$in_window_wrong++ if $count != $rows;
	}
	usleep(50_000);
}
$move->finish;
is($?, 0, 'the paced rebalance finishes') or diag($err);
cmp_ok($in_window, '>', 0, "the counts met the moment the delete was committed here only ($in_window of $samples reads)");
is($in_window_wrong, 0, 'no read in that moment counts a row twice');
is($wrong, 0, "every read during the move counts each of the $rows rows once ($samples reads)");
placed_exactly('paced');

# 2. A crash after the local commit of the delete.  The first call copies
# and is stopped while it waits for a reader before the delete; the second
# goes straight to the delete, and the coordinator crashes right after
# committing it here.
my $reader = $coordinator->background_psql('postgres');
$reader->query_safe('BEGIN');
$reader->query_safe('SELECT count(*) FROM crashed');
my ($rc, $stdout, $stderr) = $coordinator->psql('postgres',
	q{SET statement_timeout = '5s'; CALL ringshard.rebalance('crashed')});
like($stderr, qr/canceling statement due to statement timeout/, 'the first call waits for the open reader before it deletes');
$reader->query_safe('COMMIT');
$reader->quit;
is($coordinator->safe_psql('postgres',
	q{SELECT string_agg(DISTINCT state, ',') FROM ringshard.rebalance_progress WHERE table_name = 'crashed'::regclass}),
	'copied', 'its steps are copied, not yet deleted where they left');
rebalance_crashing_at('after_local_commit', 'crashed', 'right after the local commit of the delete');
is($workers[0]->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts'), '1',
	'the delete is left prepared on the node the rows left');
is($coordinator->safe_psql('postgres',
	q{SELECT string_agg(DISTINCT state, ',') FROM ringshard.rebalance_progress WHERE table_name = 'crashed'::regclass}),
	'done', 'and its steps are recorded as done');
is($coordinator->safe_psql('postgres', 'SELECT count(*) FROM crashed'), $rows,
	'the table reads each row once while the delete is in doubt');
($rc, $stdout, $stderr) = $coordinator->psql('postgres', q{CALL ringshard.rebalance('crashed')});
is($rc, 0, 'rebalance called again finishes the move') or diag($stderr);
is($coordinator->safe_psql('postgres',
	q{SELECT count(*) FROM ringshard.rebalance_progress WHERE table_name = 'crashed'::regclass}), '0',
	'the move is recorded as finished');
is($coordinator->safe_psql('postgres', 'SELECT count(*) FROM crashed'), $rows, 'the table reads each row once after it');
placed_exactly('crashed');

# 3. A crash after a target committed a batch's copy, before the local commit.
rebalance_crashing_at('rebalance_after_target_commit', 'stale', 'right after the target committed the copy');
my $on_target = $workers[1]->safe_psql('postgres', 'SELECT count(*) FROM stale');
cmp_ok($on_target, '>', 0, "the target holds the copied rows ($on_target)");
is($coordinator->safe_psql('postgres',
	q{SELECT string_agg(DISTINCT state, ',') FROM ringshard.rebalance_progress WHERE table_name = 'stale'::regclass}),
	'pending', 'but the steps are still to copy');
is($coordinator->safe_psql('postgres', 'SELECT count(*) FROM stale'), $rows, 'the table reads each row once');
# the keys that move: written now on the node they leave
my $moving = $coordinator->safe_psql('postgres',
	q{SELECT string_agg(g::text, ',') FROM (SELECT g FROM generate_series(1, 3000) g
	   WHERE replicas_for(g::bigint) = ARRAY['o2'] ORDER BY g LIMIT 20) k});
$coordinator->safe_psql('postgres', "UPDATE stale SET payload = 'changed' WHERE id IN ($moving)");
$coordinator->safe_psql('postgres', "DELETE FROM stale WHERE id = " . (split /,/, $moving)[0]);
is($coordinator->safe_psql('postgres', "SELECT count(*) FROM stale WHERE payload = 'changed'"), '19',
	'a write of keys that move reads back at once');
($rc, $stdout, $stderr) = $coordinator->psql('postgres', q{CALL ringshard.rebalance('stale')});
is($rc, 0, 'rebalance called again finishes the move') or diag($stderr);
is($workers[1]->safe_psql('postgres', "SELECT count(*) FROM stale WHERE payload = 'changed'"), '19',
	'the writes made meanwhile are on the new replica (nothing undone by the stale copy)');
is($workers[1]->safe_psql('postgres', "SELECT count(*) FROM stale WHERE id = " . (split /,/, $moving)[0]), '0',
	'and the deleted row is not brought back');
$rows--;
is($coordinator->safe_psql('postgres', 'SELECT count(*) FROM stale'), $rows, 'the table reads each row once after it');
$coordinator->safe_psql('postgres', "INSERT INTO stale VALUES (" . (split /,/, $moving)[0] . ", 'back')");
$rows++;
placed_exactly('stale');

$_->stop for ($coordinator, @workers);
done_testing();

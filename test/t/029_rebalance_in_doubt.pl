# A rebalance never goes on past a part of its own left prepared on a node.
# The attack, as 007_rebalance.pl met it: the coordinator died between the
# local commit of a batch's copy (the steps marked copied) and the COMMIT
# PREPARED of its part on the new replica, so the copied rows stayed
# prepared, invisible, there; the resumed rebalance deleted them from the
# node they left, before any recovery ran, and each was left with one
# visible copy.  A copy now commits on its targets before the local commit
# (src/operations/move_rows.c), so that part cannot be left in doubt; what
# can is any other of the move's node parts (the targets' clearing, a
# delete where rows left).
#
# Here: three workers at R = 2, a fourth added; a rebalance interrupted after
# its first batch (statement_timeout during its pause); resumed in a session
# whose next commit with node parts crashes the coordinator right after the
# local commit (fault point after_local_commit); the coordinator restarts
# (no watchdog runs recovery), so a node holds that part prepared;
# rebalance is called again.  It must commit that part before it goes on:
# every worker then holds exactly its rows, two copies of each, and no
# prepared transaction is left.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use RingshardTestCluster qw(start_servers add_workers);

# the fault point crashes the server: the postmaster restarts it (the test framework turns that off)
my ($coordinator, @workers) = start_servers(workers => [qw(r1 r2 r3 r4)],
	coordinator_conf => 'restart_after_crash = on');
add_workers($coordinator, @workers[0 .. 2]);

my $rows = 400;
$coordinator->safe_psql('postgres', qq{
	SELECT ringshard.set_replication_factor('default', 2);
	SELECT count(*) FROM ringshard.sync_topology();
	CREATE TABLE items (id bigint PRIMARY KEY, payload text NOT NULL);
	SELECT ringshard.distribute_table('items', 'id');
	SELECT count(*) FROM ringshard.create_distributed_table('items');
	INSERT INTO items SELECT g, 'row-' || g FROM generate_series(1, $rows) g;
});
add_workers($coordinator, $workers[3]);

# 1. the move starts, copies its first batch (whose rows are deleted where they
# left with those of the later batches that leave the same nodes), and is
# stopped in its pause
my ($rc, $out, $err) = $coordinator->psql('postgres',
	q{SET statement_timeout = '4s'; CALL ringshard.rebalance('items', batch => 10, pause_ms => 20000)});
like($err, qr/canceling statement due to statement timeout/, 'the first call is stopped in its pause') or diag($err);
my ($copied, $left) = split /\|/, $coordinator->safe_psql('postgres',
	q{SELECT count(*) FILTER (WHERE state <> 'pending'), count(*) FILTER (WHERE state = 'pending')
	    FROM ringshard.rebalance_progress WHERE table_name = 'items'::regclass});
cmp_ok($copied, '>', 0, "it copied a batch ($copied steps copied)");
cmp_ok($left, '>', 0, "and left steps to copy ($left)");

# 2. resumed; its next transaction with node parts commits here and the coordinator crashes before it commits on the nodes
my $offset = -s $coordinator->logfile;
($rc, $out, $err) = $coordinator->psql('postgres',
	q{SET ringshard.fault_injection = 'after_local_commit=crash'; CALL ringshard.rebalance('items', batch => 10)});
isnt($rc, 0, 'the resumed call dies with the coordinator');
ok($coordinator->wait_for_log(qr/ringshard fault injection: crash at after_local_commit/, $offset),
	'the crash came right after a local commit with node parts');
$coordinator->wait_for_log(qr/all server processes terminated; reinitializing/, $offset);
$coordinator->poll_query_until('postgres', 'SELECT true') or die 'the coordinator did not come back';
my $prepared = 0;
$prepared += $_->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts') for @workers;
cmp_ok($prepared, '>', 0, "its part is left prepared on a node ($prepared parts)");
is($coordinator->safe_psql('postgres',
	q{SELECT count(*) > 0 FROM ringshard.rebalance_progress WHERE table_name = 'items'::regclass AND state = 'copied'}),
	't', 'and the first batch\'s steps are recorded as copied');

# at REPEATABLE READ a rebalance is refused before it does anything (its recovery must see new commits)
($rc, $out, $err) = $coordinator->psql('postgres',
	q{SET default_transaction_isolation = 'repeatable read'; CALL ringshard.rebalance('items', batch => 10)});
like($err, qr/ERROR:  rebalance runs its batches at isolation level READ COMMITTED, not REPEATABLE READ/,
	'at REPEATABLE READ rebalance is refused, with the reason');
$prepared = 0;
$prepared += $_->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts') for @workers;
cmp_ok($prepared, '>', 0, '... before it touched the prepared part');

# 3. called again: the part in doubt is committed before the move goes on
($rc, $out, $err) = $coordinator->psql('postgres', q{CALL ringshard.rebalance('items', batch => 10)});
is($rc, 0, 'rebalance called again finishes the move') or diag($err);
$prepared = 0;
$prepared += $_->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts') for @workers;
is($prepared, 0, 'no prepared transaction is left on any worker');
my $total = 0;
for my $i (1 .. 4)
{
	my $expected = $coordinator->safe_psql('postgres',
		"SELECT string_agg(g::text, ',' ORDER BY g) FROM generate_series(1, $rows) g WHERE 'r$i' = ANY (replicas_for(g::bigint))");
	my $actual = $workers[ $i - 1 ]->safe_psql('postgres', q{SELECT string_agg(id::text, ',' ORDER BY id) FROM items});
	is($actual, $expected, "r$i holds exactly its rows after the move");
	$total += $workers[ $i - 1 ]->safe_psql('postgres', 'SELECT count(*) FROM items');
}
is($total, 2 * $rows, "no row lost: $rows rows, two copies each");
is($coordinator->safe_psql('postgres', q{SELECT count(*) FROM ringshard.verify_table('items')}), '0',
	'verify_table finds every replica equal');
is($coordinator->safe_psql('postgres', 'SELECT count(*) FROM items'), $rows, 'the table reads every row');

$_->stop for ($coordinator, @workers);
done_testing();

# ringshard.operation_progress (docs/monitoring.md): another session sees how
# far a rebalance is while it runs, as pg_stat_progress_* show a VACUUM.
#
#  1. A rebalance of 3,000 rows in batches of 100 with pauses, in one
#     session: a second session, as a pg_monitor role, sees a row for it
#     (its pid, command, table, phase "step k of N", rows done within the
#     rows to copy, the percent of them), and sees the rows done grow.
#  2. When it ends the row is gone; a report is gone when its transaction
#     fails or its backend exits.
#  3. create_distributed_table and rehome_rows leave no row behind (and the
#     rows create_distributed_table moves are no hot keys' writes).
#  4. A plain role cannot read the view.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use FindBin;
use lib "$FindBin::RealBin/../perl";
use RingshardTestCluster qw(start_servers add_workers);

my ($coordinator, @workers) = start_servers(workers => [qw(w1 w2 w3)]);
add_workers($coordinator, @workers[0, 1]);
$coordinator->safe_psql('postgres', q{
	SELECT ringshard.set_replication_factor('default', 1);
	SELECT count(*) FROM ringshard.sync_topology();
	CREATE TABLE items (k int PRIMARY KEY, v int NOT NULL);
	INSERT INTO items SELECT g, g FROM generate_series(1, 3000) g;
	SELECT ringshard.distribute_table('items', 'k');
	SELECT count(*) FROM ringshard.create_distributed_table('items');
	CREATE ROLE watcher LOGIN IN ROLE pg_monitor;
	CREATE ROLE nobody LOGIN;
});
is($coordinator->safe_psql('postgres', 'SELECT count(*) FROM ringshard.operation_progress'), '0',
	'create_distributed_table of 3,000 rows left no row behind');
is($coordinator->safe_psql('postgres', 'SELECT count(*) FROM ringshard.stat_hot_keys'), '0',
	'... and its moving of the rows counts as no key\'s writes in stat_hot_keys');
add_workers($coordinator, $workers[2]);
$coordinator->safe_psql('postgres', 'SELECT count(*) FROM ringshard.sync_topology()');
my $to_copy = $coordinator->safe_psql('postgres', q{SELECT count(*) FROM items WHERE shard_for(k) = 'w3'});
ok($to_copy > 100, "w3 takes $to_copy of the rows: more than one batch");

# 1. watch it from another session
my $mover = $coordinator->background_psql('postgres');
my $mover_pid = $mover->query_safe('SELECT pg_backend_pid()');
$mover->query_until(qr/started/, "\\echo started\nCALL ringshard.rebalance('items', batch => 100, pause_ms => 200);\n\\echo moved\n");
my @seen;
for (1 .. 300)    # 30 s at most
{
	my $row = $coordinator->safe_psql('postgres', q{
		SELECT pid || ' ' || command || ' ' || table_name || ' ' || rows_done || ' ' || coalesce(rows_total, -1) || ' '
		       || coalesce(percent, -1) || ' ' || (phase ~ '^step [0-9]+ of [0-9]+ \(')
		  FROM ringshard.operation_progress}, extra_params => [ '-U', 'watcher' ]);
	push @seen, $row if $row ne '' && (!@seen || $seen[-1] ne $row);
	last if @seen >= 3;
	usleep(100_000);
}
ok(@seen >= 2, 'another session saw the rebalance at ' . scalar(@seen) . ' points') or diag join("\n", @seen);
my ($pid, $command, $table, $done, $total, $percent, $phase_ok) = split / /, ($seen[0] // '');
is("$pid $command $table $phase_ok", "$mover_pid rebalance items true", '... its pid, command, table and phase (step k of N)');
# (from its start: 0 rows done before the first batch)
ok(defined $total && $total == $to_copy && $done >= 0 && $done < $total,
	"... rows done $done within the $total to copy");
ok(defined $percent && abs($percent - 100.0 * $done / $total) < 0.06, "... $percent %");
my ($later) = (split / /, ($seen[-1] // ''))[3];
ok(defined $later && $later > $done, "... and the rows done grow ($done, then $later)");

# 2. done, and failed
$mover->query_until(qr/moved/, '');
is($coordinator->safe_psql('postgres', 'SELECT count(*) FROM ringshard.operation_progress'), '0',
	'when the rebalance has ended its row is gone');
is($coordinator->safe_psql('postgres', 'SELECT count(*) FROM items'), '3000', '... and every row is there');
$mover->quit;

# an operation that fails, or whose backend exits, leaves no row: the
# reporting function by hand, in a transaction that then fails
my $failing = $coordinator->background_psql('postgres', on_error_stop => 0);
$failing->query_safe(q{BEGIN; SELECT ringshard_internal.progress_report('rebalance', 'items', 'step 1 of 2', 5, 10)});
is($coordinator->safe_psql('postgres', q{SELECT phase || ' ' || rows_done || ' ' || rows_total || ' ' || percent FROM ringshard.operation_progress}),
	'step 1 of 2 5 10 50.0', 'a report is seen at once by another session, though its transaction is open');
$failing->query('SELECT 1/0');
is($coordinator->safe_psql('postgres', 'SELECT count(*) FROM ringshard.operation_progress'), '0',
	'... and is gone when that transaction fails');
# (query, not query_safe, from here: this psql's stderr keeps the division's error)
$failing->query('ROLLBACK');
$failing->query(q{SELECT ringshard_internal.progress_report('rehome_rows', 'items', 'x', 1, NULL)});
is($coordinator->safe_psql('postgres', q{SELECT command || ' ' || coalesce(rows_total::text, 'unknown') || ' ' || coalesce(percent::text, 'none') FROM ringshard.operation_progress}),
	'rehome_rows unknown none', 'a report without a total has no percent');
$failing->quit;
$coordinator->poll_query_until('postgres', 'SELECT count(*) = 0 FROM ringshard.operation_progress')
  or die 'the row of a backend that exited stayed';
pass('... and is gone when its backend exits');

$coordinator->safe_psql('postgres', q{SELECT ringshard.remove_node('w2'); SELECT count(*) FROM ringshard.sync_topology()});
# A batch counts as it is copied: with a pause after each report of rows
# relayed (every 256), another session sees more rows done than the batches
# committed say.
my $live = $coordinator->background_psql('postgres');
$live->query_until(qr/started/,
	"SET ringshard.fault_injection = 'rebalance_rows_relayed=sleep:1500';\n\\echo started\nCALL ringshard.rebalance('items', batch => 100000);\n\\echo moved\n");
my $mid_batch = '';
for (1 .. 300)    # 30 s at most
{
	my $row = $coordinator->safe_psql('postgres', q{
		SELECT o.rows_done || ' ' || s.rows_done FROM ringshard.operation_progress o, ringshard.rebalance_status s
		 WHERE o.command = 'rebalance' AND s.table_name = o.table_name});
	if ($row =~ /^(\d+) (\d+)$/ && $1 > $2)
	{
		$mid_batch = $row;
		last;
	}
	usleep(100_000);
}
ok($mid_batch ne '', "operation_progress counts a batch's rows while it is copied (rows done, then committed: $mid_batch)");
$live->query_until(qr/moved/, '');
$live->quit;
is($coordinator->safe_psql('postgres', q{SELECT count(*) || ' ' || count(*) FILTER (WHERE shard_for(k) = 'w2') FROM items}),
	'3000 0', 'a second rebalance moves every row off w2');
is($coordinator->safe_psql('postgres', 'SELECT count(*) FROM ringshard.operation_progress'), '0', '... and leaves no row');

# 3. rehome_rows
$coordinator->safe_psql('postgres', q{CALL ringshard.rehome_rows('items')});
is($coordinator->safe_psql('postgres', 'SELECT count(*) FROM ringshard.operation_progress'), '0',
	'rehome_rows leaves no row behind');

# 4. privileges
my ($rc, $out, $err) = $coordinator->psql('postgres', 'SELECT * FROM ringshard.operation_progress', extra_params => [ '-U', 'nobody' ]);
like($err, qr/permission denied/, 'a plain role cannot read operation_progress');

done_testing();

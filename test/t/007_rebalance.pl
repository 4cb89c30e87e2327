# Rebalancing: a fourth worker joins three; rebalance() moves exactly the rows
# whose replica set changed (about what the preview says), leaves every other
# row untouched, survives the coordinator being killed in the middle, and
# ends with every row on exactly its replicas, once.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $coordinator = PostgreSQL::Test::Cluster->new('coordinator');
my @workers = map { PostgreSQL::Test::Cluster->new("r$_") } 1 .. 4;
for my $node ($coordinator, @workers)
{
	$node->init;
	$node->append_conf('postgresql.conf', 'max_prepared_transactions = 20');
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION ringshard');
}
my %address = map { ("r$_" => sprintf('host=%s port=%d dbname=postgres', $workers[ $_ - 1 ]->host, $workers[ $_ - 1 ]->port)) } 1 .. 4;

$coordinator->safe_psql('postgres', qq{
	SELECT ringshard.add_node('r1', '$address{r1}');
	SELECT ringshard.add_node('r2', '$address{r2}');
	SELECT ringshard.add_node('r3', '$address{r3}');
	SELECT ringshard.set_replication_factor('default', 2);
	SELECT count(*) FROM ringshard.sync_topology();
	CREATE TABLE items (id bigint, payload text);
	SELECT ringshard.distribute_table('items', 'id');
	SELECT count(*) FROM ringshard.create_distributed_table('items');
	INSERT INTO items SELECT g, 'payload-' || g FROM generate_series(1, 1200) g;
	CREATE TABLE expected_before AS SELECT g AS id, replicas_for(g::bigint) AS replicas FROM generate_series(1, 1200) g;
});

# What the preview says will move, before anything moves.
my $preview_rows = $coordinator->safe_psql('postgres', q{
	SELECT count(*) FROM generate_series(1, 1200) g
	 WHERE ringshard.proposed_replicas(g::bigint, 'default', 'add', 'r4') <> replicas_for(g::bigint)});
my $preview_owner_fraction = $coordinator->safe_psql('postgres',
	q{SELECT round(sum(fraction)::numeric, 3) FROM ringshard.preview_add_node('r4')});

# Each worker's rows and their row versions before the move.
my @before = map { $_->safe_psql('postgres', q{SELECT string_agg(id || ':' || xmin, ',' ORDER BY id) FROM items}) } @workers[0 .. 2];

$coordinator->safe_psql('postgres', "SELECT ringshard.add_node('r4', '$address{r4}')");
my ($rc, $out, $err) = $coordinator->psql('postgres', q{CALL ringshard.rebalance('items', dry_run => true)});
like($err, qr/step 1: .* copy from r\d to \{r\d/, 'a dry run prints the plan');
is($coordinator->safe_psql('postgres', q{SELECT count(*) FROM ringshard.rebalance_progress}), '0',
	'a dry run changes nothing');

# Start the move slowly, kill the coordinator in the middle of it.
my $mover = $coordinator->background_psql('postgres', on_error_stop => 0);
$mover->query_until(qr/started/, q{
	\echo started
	CALL ringshard.rebalance('items', batch => 20, pause_ms => 150);
});
ok($coordinator->poll_query_until('postgres',
	q{SELECT coalesce(sum(rows_done), 0) > 40 FROM ringshard.rebalance_status}),
	'the move makes progress a person can watch');
# Writes that arrive during the move go to the new replica sets and survive it.
$coordinator->safe_psql('postgres', q{INSERT INTO items SELECT g, 'during-' || g FROM generate_series(1201, 1300) g});
my $progress = $coordinator->safe_psql('postgres',
	q{SELECT sum(steps_done) || '/' || sum(steps) || ' steps, ' || sum(rows_done) || ' rows' FROM ringshard.rebalance_status});
note("progress when the coordinator was killed: $progress");
my $killed_pid = $coordinator->{_pid};
$coordinator->kill9;
eval { $mover->quit };
for (1 .. 300)
{
	last unless kill(0, $killed_pid);
	select(undef, undef, undef, 0.1);
}
$coordinator->start;
is($coordinator->safe_psql('postgres', q{SELECT count(*) > 0 FROM ringshard.rebalance_progress WHERE state <> 'done'}), 't',
	'the interrupted rebalance left its unfinished steps');

($rc, $out, $err) = $coordinator->psql('postgres', q{CALL ringshard.rebalance('items')});
is($rc, 0, 'calling rebalance again resumes and finishes the move');
like($err, qr/resuming at step/, 'it says it resumes');
is($coordinator->safe_psql('postgres', q{SELECT count(*) FROM ringshard.rebalance_progress}), '0',
	'no unfinished steps remain');

# Every worker holds exactly its rows under the new topology, each once.
my $total = 0;
for my $i (1 .. 4)
{
	my $expected = $coordinator->safe_psql('postgres',
		"SELECT string_agg(g::text, ',' ORDER BY g) FROM generate_series(1, 1300) g WHERE 'r$i' = ANY (replicas_for(g::bigint))");
	my $actual = $workers[ $i - 1 ]->safe_psql('postgres', q{SELECT string_agg(id::text, ',' ORDER BY id) FROM items});
	is($actual, $expected, "r$i holds exactly its rows after the move, each once");
	$total += $workers[ $i - 1 ]->safe_psql('postgres', 'SELECT count(*) FROM items');
}
is($total, 2600, 'no row lost or duplicated: 1300 rows (100 written during the move), two copies each');
for my $pair ([ 1, 4 ], [ 2, 4 ], [ 3, 4 ], [ 1, 2 ])
{
	my ($a, $b) = @$pair;
	my $ids = $coordinator->safe_psql('postgres',
		"SELECT coalesce(string_agg(g::text, ','), '0') FROM generate_series(1, 1300) g WHERE replicas_for(g::bigint) @> ARRAY['r$a', 'r$b']");
	my $sql = "SELECT md5(string_agg(i::text, ';' ORDER BY id)) FROM items i WHERE id IN ($ids)";
	is($workers[ $a - 1 ]->safe_psql('postgres', $sql), $workers[ $b - 1 ]->safe_psql('postgres', $sql),
		"r$a and r$b hold identical copies");
}

# About a quarter of the rows changed hands, as the preview said; rows that
# stayed on a worker are the same row versions (untouched).
my $moved = $coordinator->safe_psql('postgres', q{
	SELECT count(*) FROM expected_before e WHERE e.replicas <> replicas_for(e.id::bigint)});
is($moved, $preview_rows, "the rows whose replica set changed are the ones the preview named ($moved of 1200)");
cmp_ok(abs($moved / 1200 - 2 * $preview_owner_fraction), '<', 0.12,
	"with two copies, about twice the owner share moved ($moved of 1200; owner share $preview_owner_fraction)");
for my $i (1 .. 3)
{
	my %now = map { split /:/ } split /,/, $workers[ $i - 1 ]->safe_psql('postgres',
		q{SELECT string_agg(id || ':' || xmin, ',' ORDER BY id) FROM items});
	my ($kept, $rewritten) = (0, 0);
	for my $pair (split /,/, $before[ $i - 1 ])
	{
		my ($id, $xmin) = split /:/, $pair;
		next unless exists $now{$id};
		$kept++;
		$rewritten++ if $now{$id} ne $xmin;
	}
	is($rewritten, 0, "r$i: the $kept rows it kept were not rewritten");
}

$_->stop for ($coordinator, @workers);
done_testing();

# No write lost: while a worker is killed (SIGKILL) and restarted under a
# write load, routed writes succeed with the other replica, wait in the
# coordinator's queue, and the watchdog replays them once the worker is back.
# Afterwards every row is on every replica, exactly once.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $coordinator = PostgreSQL::Test::Cluster->new('coordinator');
my @workers = map { PostgreSQL::Test::Cluster->new("q$_") } 1 .. 3;
$coordinator->init;
$coordinator->append_conf('postgresql.conf', 'max_prepared_transactions = 20');
$coordinator->append_conf('postgresql.conf', q{
shared_preload_libraries = 'ringshard'
ringshard.watchdog_database = 'postgres'
ringshard.watchdog_interval = '300ms'
ringshard.node_timeout = '2s'
});
$coordinator->start;
for my $node (@workers)
{
	$node->init;
	$node->append_conf('postgresql.conf', 'max_prepared_transactions = 20');
	$node->start;
}
$_->safe_psql('postgres', 'CREATE EXTENSION ringshard') for ($coordinator, @workers);

my $setup = '';
for my $i (1 .. 3)
{
	my $w = $workers[ $i - 1 ];
	$setup .= sprintf("SELECT ringshard.add_node('q%d', 'host=%s port=%d dbname=postgres');", $i, $w->host, $w->port);
}
$setup .= q{
	SELECT ringshard.set_replication_factor('default', 2);
	SELECT count(*) FROM ringshard.sync_topology();
	CREATE TABLE items (id bigint, payload text);
	SELECT ringshard.distribute_table('items', 'id');
	SELECT count(*) FROM ringshard.create_distributed_table('items');
};
$coordinator->safe_psql('postgres', $setup);
ok($coordinator->poll_query_until('postgres',
	q{SELECT count(*) > 0 FROM pg_stat_activity WHERE backend_type = 'ringshard watchdog'}),
	'the watchdog background worker runs');

# The write load: one row per transaction, 360 rows; q2 dies after 120 and
# comes back after 240.
my $writer = $coordinator->background_psql('postgres');
$writer->query_safe('SET client_min_messages = error');
my $max_queued = 0;
my $killed_pid;
for my $id (1 .. 360)
{
	if ($id == 121)
	{
		$killed_pid = $workers[1]->{_pid};
		$workers[1]->kill9;
		note('q2 killed with SIGKILL');
	}
	if ($id == 241)
	{
		$max_queued = $coordinator->safe_psql('postgres',
			q{SELECT coalesce(sum(queued), 0) FROM ringshard.write_queue_status WHERE node = 'q2'});
		# the killed postmaster must be gone before a new one may start
		for (1 .. 300)
		{
			last unless kill(0, $killed_pid);
			select(undef, undef, undef, 0.1);
		}
		$workers[1]->start;
		note('q2 restarted');
	}
	$writer->query_safe("INSERT INTO items VALUES ($id, 'payload-$id')");
}
$writer->quit;
my $on_q2_while_down = $coordinator->safe_psql('postgres',
	q{SELECT count(*) FROM generate_series(121, 240) g WHERE 'q2' = ANY (replicas_for(g::bigint))});
# A backend already connected to q2 can take a write or two after its
# postmaster is killed, so most (not necessarily all) of q2's writes queue.
cmp_ok($max_queued, '>', $on_q2_while_down / 2,
	"writes for the dead worker were queued ($max_queued of the $on_q2_while_down it holds)");

ok($coordinator->poll_query_until('postgres', q{SELECT count(*) = 0 FROM ringshard.write_queue}),
	'the watchdog replays the queue once the worker is back');
is($coordinator->safe_psql('postgres', q{SELECT is_up FROM ringshard.nodes WHERE node_name = 'q2'}), 't',
	'the watchdog marks the returning worker up');

# Every replica holds exactly its rows, once, with the same content.
sub check_placement
{
	my ($label) = @_;
	for my $i (1 .. 3)
	{
		my $expected = $coordinator->safe_psql('postgres',
			"SELECT string_agg(g::text, ',' ORDER BY g) FROM generate_series(1, 360) g
			  WHERE 'q$i' = ANY (replicas_for(g::bigint))");
		my $actual = $workers[ $i - 1 ]->safe_psql('postgres',
			q{SELECT string_agg(id::text, ',' ORDER BY id) FROM items});
		is($actual, $expected, "$label: q$i holds exactly its rows, each once");
	}
	for my $pair ([ 1, 2 ], [ 1, 3 ], [ 2, 3 ])
	{
		my ($a, $b) = @$pair;
		my $ids = $coordinator->safe_psql('postgres',
			"SELECT string_agg(g::text, ',') FROM generate_series(1, 360) g
			  WHERE replicas_for(g::bigint) @> ARRAY['q$a', 'q$b']");
		my $sql = "SELECT md5(string_agg(i::text, ';' ORDER BY id)) FROM items i WHERE id IN ($ids)";
		is($workers[ $a - 1 ]->safe_psql('postgres', $sql), $workers[ $b - 1 ]->safe_psql('postgres', $sql),
			"$label: q$a and q$b hold identical copies");
	}
}
check_placement('after the outage');

# Replay is idempotent: a queue entry delivered before (as after a crash
# between the worker's commit and the coordinator's) is not applied twice.
my $replayed = $workers[1]->safe_psql('postgres',
	q{SELECT queue_id FROM ringshard.replayed_writes ORDER BY queue_id LIMIT 1});
ok($replayed ne '', "q2 recorded the queued writes it applied (first: $replayed)");
my $row_id = $coordinator->safe_psql('postgres',
	q{SELECT g FROM generate_series(121, 240) g WHERE 'q2' = ANY (replicas_for(g::bigint)) ORDER BY g LIMIT 1});
$coordinator->safe_psql('postgres', qq{
	INSERT INTO ringshard.write_queue (id, node_name, table_name, payload)
	VALUES ($replayed, 'q2', 'items', json_build_object('id', $row_id, 'payload', 'payload-$row_id'));
	SELECT ringshard.replay_queue('q2');});
is($coordinator->safe_psql('postgres', q{SELECT count(*) FROM ringshard.write_queue}), '0',
	'the duplicate delivery left the queue');
check_placement('after a repeated delivery');

# A write a worker refuses stays queued with its error and holds back only
# that worker's queue; the round goes on for the others.
$workers[0]->safe_psql('postgres', q{ALTER TABLE items ADD CONSTRAINT no_poison CHECK (payload <> 'poison')});
$coordinator->safe_psql('postgres', q{
	INSERT INTO ringshard.write_queue (node_name, table_name, payload)
	VALUES ('q1', 'items', json_build_object('id', 999999, 'payload', 'poison')),
	       ('q2', 'items', json_build_object('id', 999998, 'payload', 'fine'));});
is($coordinator->safe_psql('postgres', q{SELECT count(*) FROM ringshard.watchdog_tick(mark_health => false)}), '3',
	'a watchdog round with a refused write completes for every node');
# (the background watchdog may have tried it too: at least one attempt)
is($coordinator->safe_psql('postgres', q{SELECT node_name || ':' || (attempts >= 1) || ':' || (last_error LIKE '%no_poison%') FROM ringshard.write_queue}),
	'q1:true:true', 'the refused write stays queued with its error; the other node got its write');
$coordinator->safe_psql('postgres', q{DELETE FROM ringshard.write_queue});
$workers[1]->safe_psql('postgres', q{DELETE FROM items WHERE id = 999998});
$workers[0]->safe_psql('postgres', q{ALTER TABLE items DROP CONSTRAINT no_poison});

# With a quorum of two, a write whose second replica is down fails.
$workers[2]->stop;
my $both_on_q3 = $coordinator->safe_psql('postgres',
	q{SELECT g FROM generate_series(1000, 2000) g WHERE 'q3' = ANY (replicas_for(g::bigint)) LIMIT 1});
my ($rc, $out, $err) = $coordinator->psql('postgres',
	"SET ringshard.write_quorum = 2; INSERT INTO items VALUES ($both_on_q3, 'quorum')");
isnt($rc, 0, 'below the write quorum the write fails');
like($err, qr/fewer than ringshard.write_quorum/, 'the error names the quorum');
is($coordinator->safe_psql('postgres', q{SELECT count(*) FROM ringshard.write_queue}), '0',
	'a failed write queues nothing');
$workers[2]->start;

# Pruning the workers' records of applied writes: only records no delivery
# can need go (older than the retention, below the node's first queued id),
# and nothing goes while a transaction has been open longer than the retention.
my @recorded = map { $_->safe_psql('postgres', q{SELECT count(*) FROM ringshard.replayed_writes}) } @workers;
is($coordinator->safe_psql('postgres', q{SELECT sum(pruned) FROM ringshard.prune_replayed_writes()}), '0',
	'records younger than the retention are kept');
$_->safe_psql('postgres', q{UPDATE ringshard.replayed_writes SET applied_at = applied_at - interval '2 days'})
	for @workers;
my $long = $coordinator->background_psql('postgres');
$long->query_safe('BEGIN');
$long->query_safe('SELECT 1');
sleep 3;
my ($prune_rc, $prune_out, $prune_err) = $coordinator->psql('postgres',
	q{SELECT count(*) FROM ringshard.prune_replayed_writes('2 seconds')});
is($prune_out, '0', 'nothing is pruned while a transaction is open longer than the retention');
like($prune_err, qr/nothing pruned: a transaction of this database has been open since/,
	'the notice says why');
$long->query_safe('COMMIT');
$long->quit;
is(join(',', map { $_->safe_psql('postgres', q{SELECT count(*) FROM ringshard.replayed_writes}) } @workers),
	join(',', @recorded), 'the blocked prune deleted nothing');

# q3 has a write queued (added in the same transaction as the prune): its
# records from that write's id on stay.
my $q3_first_queued = $workers[2]->safe_psql('postgres',
	q{SELECT queue_id FROM ringshard.replayed_writes ORDER BY queue_id
	   OFFSET (SELECT count(*) / 2 FROM ringshard.replayed_writes) LIMIT 1});
my $q3_kept = $workers[2]->safe_psql('postgres',
	"SELECT count(*) FROM ringshard.replayed_writes WHERE queue_id >= $q3_first_queued");
my $pruned = $coordinator->safe_psql('postgres', qq{
	BEGIN;
	INSERT INTO ringshard.write_queue (id, node_name, table_name, payload) VALUES ($q3_first_queued, 'q3', 'items', '{}');
	SELECT string_agg(node || ':' || pruned, ',' ORDER BY node) FROM ringshard.prune_replayed_writes('2 seconds');
	ROLLBACK;});
is($pruned, sprintf('q1:%d,q2:%d,q3:%d', $recorded[0], $recorded[1], $recorded[2] - $q3_kept),
	'old records go on every node, except from the first queued id on');
is(join(',', map { $_->safe_psql('postgres', q{SELECT count(*) FROM ringshard.replayed_writes}) } @workers),
	"0,0,$q3_kept", 'the workers keep only the records still needed');

# A kept record still makes a repeated delivery a no-op.
my $q3_row = $coordinator->safe_psql('postgres',
	q{SELECT g FROM generate_series(1, 360) g WHERE 'q3' = ANY (replicas_for(g::bigint)) ORDER BY g LIMIT 1});
$coordinator->safe_psql('postgres', qq{
	INSERT INTO ringshard.write_queue (id, node_name, table_name, payload)
	VALUES ($q3_first_queued, 'q3', 'items', json_build_object('id', $q3_row, 'payload', 'payload-$q3_row'));
	SELECT ringshard.replay_queue('q3');});
check_placement('after pruning and a repeated delivery');
like(($coordinator->psql('postgres', q{SELECT * FROM ringshard.prune_replayed_writes('0 seconds')}))[2],
	qr/retention 00:00:00 is shorter than one second/, 'a retention under one second is refused');

# The watchdog prunes on its own every ringshard.watchdog_prune_interval
# (an hour by default; set to a second here): q3's remaining records are old
# and nothing is queued any more.
is($coordinator->safe_psql('postgres', q{SELECT count(*) FROM ringshard.write_queue}), '0',
	'nothing is queued');
cmp_ok($workers[2]->safe_psql('postgres', q{SELECT count(*) FROM ringshard.replayed_writes}), '>', 0,
	'q3 still holds old records');
$coordinator->safe_psql('postgres', q{ALTER SYSTEM SET ringshard.watchdog_prune_interval = '1s'});
$coordinator->safe_psql('postgres', q{SELECT pg_reload_conf()});
ok($workers[2]->poll_query_until('postgres', q{SELECT count(*) = 0 FROM ringshard.replayed_writes}),
	'the watchdog prunes records no delivery needs any more');
$coordinator->safe_psql('postgres', q{ALTER SYSTEM RESET ringshard.watchdog_prune_interval});
$coordinator->safe_psql('postgres', q{SELECT pg_reload_conf()});

$_->stop for ($coordinator, @workers);
done_testing();

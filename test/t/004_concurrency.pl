# Routing under concurrent topology changes, on one server.
#
# 1. pgbench: four clients route random keys (shard_for, replicas_for,
#    nodes_for) for a bounded time and record every answer, while another
#    session keeps switching the 'default' ring and map between topology A
#    and topology B, one committed transaction per switch.  Every recorded
#    answer must be the answer of A or of B, computed afterwards from the
#    fixed rings 'topo_a' / 'topo_b' and maps 'map_a' / 'map_b' that hold the
#    same members; every answer of a transaction that started after the last
#    switch had committed is the final topology's.  pgbench reports no error
#    and the server does not crash.
# 2. A session never uses a stale ring after its next transaction starts:
#    a session routes a key whose owner differs between A and B, another
#    session commits the switch, and the first session's next transaction
#    sees the new owner; also when the first session built its ring inside a
#    transaction (or a statement) whose snapshot predates the switch.
use strict;
use warnings;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $started = time();

my $node = PostgreSQL::Test::Cluster->new('main');
$node->init;
$node->append_conf('postgresql.conf', "max_connections = 20\n");
$node->start;

# Topology A: a1, a2, a3 (weight 1); map: a1 0-127, a2 128-255.
# Topology B: a1, a2 (weight 2), a3, a4; map: a1 0-63, a3 64-255, a4 200-255.
# Both with replication 2.  'default' starts as A and is switched; 'topo_a',
# 'topo_b', 'map_a' and 'map_b' stay fixed.
my $yaml_a = "version: v1\nnodes:\n"
  . "- address: a1\n  partition_start: 0\n  partition_end: 127\n"
  . "- address: a2\n  partition_start: 128\n  partition_end: 255\n";
my $yaml_b = "version: v1\nnodes:\n"
  . "- address: a1\n  partition_start: 0\n  partition_end: 63\n"
  . "- address: a3\n  partition_start: 64\n  partition_end: 255\n"
  . "- address: a4\n  partition_start: 200\n  partition_end: 255\n";

$node->safe_psql('postgres', qq{
	CREATE EXTENSION ringshard;
	SELECT ringshard.set_replication_factor('default', 2);
	SELECT ringshard.add_node('a1'), ringshard.add_node('a2'), ringshard.add_node('a3');
	SELECT ringshard.create_ring('topo_a', 256, 2);
	SELECT ringshard.add_node('a1', ring => 'topo_a'), ringshard.add_node('a2', ring => 'topo_a'),
	       ringshard.add_node('a3', ring => 'topo_a');
	SELECT ringshard.create_ring('topo_b', 256, 2);
	SELECT ringshard.add_node('a1', ring => 'topo_b'), ringshard.add_node('a2', ring => 'topo_b', weight => 2),
	       ringshard.add_node('a3', ring => 'topo_b'), ringshard.add_node('a4', ring => 'topo_b');
	SELECT ringshard.load_partition_config(\$y\$$yaml_a\$y\$, 'map_a');
	SELECT ringshard.load_partition_config(\$y\$$yaml_b\$y\$, 'map_b');
	SELECT ringshard.load_partition_config(\$y\$$yaml_a\$y\$, 'default');
	CREATE UNLOGGED TABLE results (k text, shard text, replicas text[], nodes text[],
	                              started timestamptz DEFAULT now());
	CREATE TABLE switches (n int, topology text);
	CREATE TABLE switching_done (at timestamptz);
});

# The statements that switch 'default' to A or to B (one transaction each).
my %switch_to = (
	B => qq{SELECT ringshard.add_node('a4');
		SELECT ringshard.set_node_weight('a2', 2);
		SELECT ringshard.load_partition_config(\$y\$$yaml_b\$y\$);},
	A => qq{SELECT ringshard.remove_node('a4');
		SELECT ringshard.set_node_weight('a2', 1);
		SELECT ringshard.load_partition_config(\$y\$$yaml_a\$y\$);});

# The topologies really differ, and 'default' (A) agrees with 'topo_a'.
my $differ = $node->safe_psql('postgres', q{
	SELECT count(*) FILTER (WHERE shard_for(k, 'topo_a') <> shard_for(k, 'topo_b')) > 0,
	       count(*) FILTER (WHERE nodes_for('ks', k, 'map_a') <> nodes_for('ks', k, 'map_b')) > 0,
	       count(*) FILTER (WHERE replicas_for(k) IS DISTINCT FROM replicas_for(k, 'topo_a')
	                          OR nodes_for('ks', k) IS DISTINCT FROM nodes_for('ks', k, 'map_a'))
	FROM (SELECT 'key-' || g AS k FROM generate_series(1, 2000) g) keys});
is($differ, 't|t|0', 'topologies A and B route differently; default starts as A');

#
# 1. pgbench against a switching topology
#
my $script = PostgreSQL::Test::Utils::tempdir() . '/route.sql';
PostgreSQL::Test::Utils::append_to_file($script, q{\set k random(0, 100000)
INSERT INTO results (k, shard, replicas, nodes) VALUES ('key-' || :k, shard_for('key-' || :k), replicas_for('key-' || :k), nodes_for('ks', 'key-' || :k));
});

my $bench_seconds = 8;
my ($bench_out, $bench_err) = ('', '');
my $bench = IPC::Run::start(
	[
		'pgbench', '-n', '-c', '4', '-j', '2', '-T', $bench_seconds,
		'-f', $script, '-h', $node->host, '-p', $node->port, 'postgres'
	],
	'>', \$bench_out, '2>', \$bench_err,
	IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));

# Switch back and forth while pgbench runs: bounded in count and in time,
# a few milliseconds apart, each switch its own committed transaction.
my $loop = qq{
DO \$loop\$
DECLARE
	i int := 0;
	deadline timestamptz := clock_timestamp() + interval '@{[ $bench_seconds - 2 ]} seconds';
BEGIN
	PERFORM pg_sleep(0.5);	-- let the clients connect and warm up
	WHILE i < 400 AND clock_timestamp() < deadline LOOP
		IF i % 2 = 0 THEN
			$switch_to{B}
			INSERT INTO switches (n, topology) VALUES (i, 'B');
		ELSE
			$switch_to{A}
			INSERT INTO switches (n, topology) VALUES (i, 'A');
		END IF;
		COMMIT;
		PERFORM pg_sleep(0.005 + random() * 0.02);
		i := i + 1;
	END LOOP;
	-- after the last COMMIT returned: its invalidation has been sent
	INSERT INTO switching_done VALUES (clock_timestamp());
END
\$loop\$;
};
$loop =~ s/SELECT (ringshard\.)/PERFORM $1/g;
my ($loop_rc, $loop_out, $loop_err) = $node->psql('postgres', $loop);
is($loop_rc, 0, 'the switching loop ran without error') or diag($loop_err);

$bench->finish;
my $bench_rc = $? >> 8;
is($bench_rc, 0, 'pgbench exited cleanly') or diag("stdout:\n$bench_out\nstderr:\n$bench_err");
unlike($bench_err, qr/error|abort|FATAL|PANIC/i, 'pgbench reported no errors')
  or diag($bench_err);
my ($processed) = $bench_out =~ /number of transactions actually processed: (\d+)/;
ok(defined $processed && $processed > 100, 'pgbench routed keys: ' . ($processed // 'none'));
like($bench_out, qr/number of failed transactions: 0 /, 'no pgbench transaction failed')
  if $bench_out =~ /number of failed transactions/;

my $switches = $node->safe_psql('postgres', 'SELECT count(*) FROM switches');
cmp_ok($switches, '>=', 20, "the topology switched $switches times during the run");

# Every answer is A's or B's, answer by answer.
my $check = $node->safe_psql('postgres', q{
	SELECT count(*),
	       count(*) FILTER (WHERE shard IS NULL OR shard NOT IN (shard_for(k, 'topo_a'), shard_for(k, 'topo_b'))),
	       count(*) FILTER (WHERE replicas IS NULL OR (replicas <> replicas_for(k, 'topo_a')
	                                                  AND replicas <> replicas_for(k, 'topo_b'))),
	       count(*) FILTER (WHERE nodes IS NULL OR (nodes <> nodes_for('ks', k, 'map_a')
	                                               AND nodes <> nodes_for('ks', k, 'map_b')))
	FROM results});
my ($answers, $bad_shard, $bad_replicas, $bad_nodes) = split /\|/, $check;
is($answers, $processed // -1, 'every pgbench transaction recorded its answers');
is($bad_shard, 0, 'every shard_for answer is the owner under topology A or B');
is($bad_replicas, 0, 'every replicas_for answer is the replica set under topology A or B');
is($bad_nodes, 0, 'every nodes_for answer is the holder set under map A or B');
if ($bad_shard || $bad_replicas || $bad_nodes)
{
	diag $node->safe_psql('postgres', q{
		SELECT k, shard, shard_for(k, 'topo_a'), shard_for(k, 'topo_b'), replicas, nodes
		FROM results
		WHERE shard NOT IN (shard_for(k, 'topo_a'), shard_for(k, 'topo_b'))
		   OR (replicas <> replicas_for(k, 'topo_a') AND replicas <> replicas_for(k, 'topo_b'))
		   OR (nodes <> nodes_for('ks', k, 'map_a') AND nodes <> nodes_for('ks', k, 'map_b'))
		LIMIT 10});
}

# Transactions that started after the last switch had committed route by
# the final topology only: no client kept a stale ring.
my $final = $node->safe_psql('postgres', 'SELECT topology FROM switches ORDER BY n DESC LIMIT 1');
my $late = $node->safe_psql('postgres', qq{
	SELECT count(*),
	       count(*) FILTER (WHERE shard <> shard_for(k, 'topo_@{[ lc $final ]}')
	                           OR replicas <> replicas_for(k, 'topo_@{[ lc $final ]}')
	                           OR nodes <> nodes_for('ks', k, 'map_@{[ lc $final ]}'))
	FROM results WHERE started > (SELECT at FROM switching_done)});
my ($late_answers, $stale_answers) = split /\|/, $late;
cmp_ok($late_answers, '>', 0, "$late_answers answers were routed after the last switch (to $final)");
is($stale_answers, 0, "all of them by topology $final: no client kept a stale ring");

# Both topologies were really seen by the clients.
my $seen = $node->safe_psql('postgres', q{
	SELECT count(*) FILTER (WHERE shard = shard_for(k, 'topo_a') AND shard <> shard_for(k, 'topo_b')) > 0,
	       count(*) FILTER (WHERE shard = shard_for(k, 'topo_b') AND shard <> shard_for(k, 'topo_a')) > 0
	FROM results});
is($seen, 't|t', 'the clients saw both topology A and topology B');

ok($node->safe_psql('postgres', 'SELECT 1') eq '1', 'the server is still up');
my $log = slurp_file($node->logfile);
unlike($log, qr/terminated by signal|server process .* was terminated|PANIC/,
	'no backend crashed');

#
# 2. No stale ring after the next transaction starts
#
# Put 'default' back on A, then find keys whose owner (and map holders)
# differ between A and B.
my $current = $node->safe_psql('postgres',
	q{SELECT topology FROM switches ORDER BY n DESC LIMIT 1});
if ($current eq 'B')
{
	$node->safe_psql('postgres', "BEGIN; $switch_to{A} COMMIT;");
}
my $key = $node->safe_psql('postgres', q{
	SELECT k FROM (SELECT 'key-' || g AS k, g FROM generate_series(1, 10000) g) keys
	WHERE shard_for(k, 'topo_a') <> shard_for(k, 'topo_b')
	  AND nodes_for('ks', k, 'map_a') <> nodes_for('ks', k, 'map_b')
	ORDER BY g LIMIT 1});
my %owner = (
	A => $node->safe_psql('postgres', "SELECT shard_for('$key', 'topo_a')"),
	B => $node->safe_psql('postgres', "SELECT shard_for('$key', 'topo_b')"));
my %holders = (
	A => $node->safe_psql('postgres', "SELECT nodes_for('ks', '$key', 'map_a')"),
	B => $node->safe_psql('postgres', "SELECT nodes_for('ks', '$key', 'map_b')"));
isnt($owner{A}, $owner{B}, "key $key: owner $owner{A} under A, $owner{B} under B");

my $route = "SELECT shard_for('$key') || ' ' || nodes_for('ks', '$key')::text";
my $reader = $node->background_psql('postgres');
my $writer = $node->background_psql('postgres');
my $topology = 'A';

# A session that has routed the key sees the switch from its next transaction.
for my $round (1 .. 4)
{
	is($reader->query_safe($route), "$owner{$topology} $holders{$topology}",
		"round $round: the reader routes by topology $topology");
	my $next = $topology eq 'A' ? 'B' : 'A';
	$writer->query_safe("BEGIN; $switch_to{$next} COMMIT;");
	$topology = $next;
	is($reader->query_safe($route), "$owner{$topology} $holders{$topology}",
		"round $round: after the switch to $topology commits, the reader's next transaction sees it");
}

# Empty the reader's cache: a catalog statement that changes nothing still
# invalidates every session's rings (statement trigger), and the reader
# processes that in a transaction that does not route.  Its next routing
# call then builds the ring from the catalog.
sub empty_reader_cache
{
	$writer->query_safe('UPDATE ringshard.rings SET vnodes = vnodes WHERE false');
	$reader->query_safe('SELECT 1');
}

# A session that builds its ring inside a REPEATABLE READ transaction whose
# snapshot predates a switch may answer by either topology in that
# transaction; its next transaction must see the newer topology, not a ring
# it built from the old snapshot.
for my $round (1 .. 3)
{
	empty_reader_cache();
	my $next = $topology eq 'A' ? 'B' : 'A';
	$reader->query_safe('BEGIN ISOLATION LEVEL REPEATABLE READ');
	$reader->query_safe('SELECT count(*) FROM switches');    # takes the snapshot
	$writer->query_safe("BEGIN; $switch_to{$next} COMMIT;");
	my $inside = $reader->query_safe($route);
	ok($inside eq "$owner{$topology} $holders{$topology}" || $inside eq "$owner{$next} $holders{$next}",
		"snapshot round $round: inside the transaction the reader routes by A or B ($inside)");
	$reader->query_safe('COMMIT');
	is($reader->query_safe($route), "$owner{$next} $holders{$next}",
		"snapshot round $round: the reader's next transaction sees $next, not a ring built from the old snapshot");
	$topology = $next;
}

# The same in READ COMMITTED, within one statement: the statement takes its
# snapshot, a switch commits, and only then does the statement first route.
my $reader_pid = $reader->query_safe('SELECT pg_backend_pid()');
for my $round (1 .. 2)
{
	empty_reader_cache();
	my $next = $topology eq 'A' ? 'B' : 'A';
	$writer->query_safe('BEGIN');
	$writer->query_safe($switch_to{$next});
	$reader->query_until(qr/sleeping/,
		"\\echo sleeping\nSELECT pg_sleep(1), shard_for('$key');\n");
	$node->poll_query_until('postgres',
		"SELECT wait_event = 'PgSleep' FROM pg_stat_activity WHERE pid = $reader_pid")
	  or die 'the reader did not start its statement';
	$writer->query_safe('COMMIT');
	$reader->query('SELECT 1');    # waits for the sleeping statement, drops its output
	is($reader->query_safe($route), "$owner{$next} $holders{$next}",
		"statement round $round: the next transaction sees $next");
	$topology = $next;
}

$reader->quit;
$writer->quit;

ok($node->safe_psql('postgres', 'SELECT 1') eq '1', 'the server is still up at the end');
$log = slurp_file($node->logfile);
unlike($log, qr/terminated by signal|PANIC/, 'still no crash in the server log');

$node->stop;
note(sprintf('the test took %.1f s', time() - $started));
done_testing();

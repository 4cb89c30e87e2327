# No acknowledged write lost: while a worker is killed (SIGKILL) and
# restarted under a write load, writes succeed with the other replica, wait
# in the coordinator's queue, and the watchdog replays them once the worker
# is back.  Afterwards every acknowledged row is on every replica, exactly
# once.  Then: refused writes (kept with their error, set aside as dead
# letters after ringshard.replay_max_attempts), and the write quorum.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

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
# comes back after 240.  A write that fails (the transaction that was using
# q2 when it died) is retried, as an application would; a write counts once
# the client saw its COMMIT succeed.
my $writer = $coordinator->background_psql('postgres', on_error_stop => 0);
$writer->query_safe('SET client_min_messages = error');
my $max_queued = 0;
my $killed_pid;
my %acknowledged;
my $retries = 0;
my $oldest_age = '';
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
		# how long the oldest waits, to a tenth of a second (not to the microsecond)
		$oldest_age = $coordinator->safe_psql('postgres',
			q{SELECT oldest_age FROM ringshard.write_queue_status WHERE node = 'q2'});
		# the killed postmaster must be gone before a new one may start
		for (1 .. 300)
		{
			last unless kill(0, $killed_pid);
			select(undef, undef, undef, 0.1);
		}
		$workers[1]->start;
		note('q2 restarted');
	}
	for my $attempt (1 .. 3)
	{
		# (BackgroundPsql's return code counts any earlier stderr: read the output instead)
		my $out = $writer->query("INSERT INTO items VALUES ($id, 'payload-$id') RETURNING 'acknowledged'");
		if ($out eq 'acknowledged')
		{
			$acknowledged{$id} = 1;
			last;
		}
		$retries++;
	}
}
$writer->quit;
is(scalar(keys %acknowledged), 360, "every write was acknowledged (after $retries retries of a write that met the kill)");
my $on_q2_while_down = $coordinator->safe_psql('postgres',
	q{SELECT count(*) FROM generate_series(121, 240) g WHERE 'q2' = ANY (replicas_for(g::bigint))});
cmp_ok($max_queued, '>=', $on_q2_while_down - 2,
	"writes for the dead worker were queued ($max_queued of the $on_q2_while_down it holds)");
like($oldest_age, qr/^\d\d:\d\d:\d\d(\.\d)?$/, "write_queue_status.oldest_age is rounded to a tenth of a second ($oldest_age)");

ok($coordinator->poll_query_until('postgres', q{SELECT count(*) = 0 FROM ringshard.write_queue}),
	'the watchdog replays the queue once the worker is back');
ok($coordinator->poll_query_until('postgres', q{SELECT is_up FROM ringshard.nodes WHERE node_name = 'q2'}),
	'the watchdog marks the returning worker up once its queue is delivered');
# The watchdog says what it did in the server log, a line each.
{
	my $log = slurp_file($coordinator->logfile);
	like($log, qr/LOG:  ringshard: node "q2" is marked down: /, 'the log says when q2 was marked down, and why');
	like($log, qr/LOG:  ringshard: delivered [1-9]\d* queued write\(s\) to node "q2", \d+ still queued/,
		'... that it delivered q2\'s queued writes, with their count');
	like($log, qr/LOG:  ringshard: node "q2" is marked up/, '... and when it marked q2 up again');
}

# Every replica holds exactly its rows, once, with the same content.
sub check_placement
{
	my ($label, $last) = @_;
	for my $i (1 .. 3)
	{
		my $expected = $coordinator->safe_psql('postgres',
			"SELECT string_agg(g::text, ',' ORDER BY g) FROM generate_series(1, $last) g
			  WHERE 'q$i' = ANY (replicas_for(g::bigint))");
		my $actual = $workers[ $i - 1 ]->safe_psql('postgres',
			"SELECT string_agg(id::text, ',' ORDER BY id) FROM items WHERE id <= $last");
		is($actual, $expected, "$label: q$i holds exactly its rows, each once");
	}
	for my $pair ([ 1, 2 ], [ 1, 3 ], [ 2, 3 ])
	{
		my ($a, $b) = @$pair;
		my $ids = $coordinator->safe_psql('postgres',
			"SELECT string_agg(g::text, ',') FROM generate_series(1, $last) g
			  WHERE replicas_for(g::bigint) @> ARRAY['q$a', 'q$b']");
		my $sql = "SELECT md5(string_agg(i::text, ';' ORDER BY id)) FROM items i WHERE id IN ($ids)";
		is($workers[ $a - 1 ]->safe_psql('postgres', $sql), $workers[ $b - 1 ]->safe_psql('postgres', $sql),
			"$label: q$a and q$b hold identical copies");
	}
}
check_placement('after the outage', 360);
is($coordinator->safe_psql('postgres', q{SELECT count(*) FROM items}), '360', 'the table reads 360 rows');

# A write a worker refuses stays queued with its error and holds back the
# later writes of its table to that worker (a later UPDATE or DELETE of the
# same key must not overtake it); the other workers' queues go on.  After
# ringshard.replay_max_attempts refusals it is set aside and the writes it
# held back are delivered.
$coordinator->safe_psql('postgres', q{ALTER SYSTEM SET ringshard.watchdog_interval = '1h'; SELECT pg_reload_conf();});
# The rounds below are run by hand: wait until the watchdog has taken the new
# interval, that is, until it stays idle for longer than the old one (a round
# in flight when the setting changed finishes first).
my $watchdog_quiet = 0;
for my $attempt (1 .. 20)
{
	my $state = q{SELECT state || ' ' || state_change FROM pg_stat_activity WHERE backend_type = 'ringshard watchdog'};
	my $before = $coordinator->safe_psql('postgres', $state);
	usleep(700_000);
	if ($before =~ /^idle / && $coordinator->safe_psql('postgres', $state) eq $before)
	{
		$watchdog_quiet = 1;
		last;
	}
}
ok($watchdog_quiet, 'the watchdog is idle under its new interval');
$workers[0]->safe_psql('postgres', q{ALTER TABLE items ADD CONSTRAINT no_poison CHECK (payload <> 'poison')});
my ($poison, $fine_q1, $fine_q2) = split /\|/, $coordinator->safe_psql('postgres', q{
	SELECT (SELECT g FROM generate_series(1000, 3000) g WHERE 'q1' = ANY (replicas_for(g::bigint)) LIMIT 1) || '|' ||
	       (SELECT g FROM generate_series(3001, 5000) g WHERE 'q1' = ANY (replicas_for(g::bigint)) LIMIT 1) || '|' ||
	       (SELECT g FROM generate_series(5001, 7000) g WHERE 'q2' = ANY (replicas_for(g::bigint))
	                                                       AND NOT 'q1' = ANY (replicas_for(g::bigint)) LIMIT 1)});
$coordinator->safe_psql('postgres', qq{
	SELECT ringshard.mark_node_down('q1');
	SET client_min_messages = error;
	INSERT INTO items VALUES ($poison, 'poison'), ($fine_q1, 'fine');
	SELECT ringshard.mark_node_down('q2');
	INSERT INTO items VALUES ($fine_q2, 'fine');});
is($coordinator->safe_psql('postgres', q{SELECT string_agg(node_name || ':' || (payload->>'id'), ',' ORDER BY ordinal) FROM ringshard.write_queue}),
	"q1:$poison,q1:$fine_q1,q2:$fine_q2", 'writes for nodes marked down are queued, in order');
$coordinator->safe_psql('postgres', q{SET ringshard.replay_max_attempts = 2; SELECT * FROM ringshard.watchdog_tick()});
is($coordinator->safe_psql('postgres', q{SELECT string_agg(node_name || ':' || attempts || ':' || coalesce((last_error LIKE '%no_poison%')::text, 'none'), ',' ORDER BY ordinal) FROM ringshard.write_queue}),
	'q1:1:true,q1:0:none', 'the refused write stays queued with its error, the later write of its table behind it');
is($workers[0]->safe_psql('postgres', "SELECT count(*) FROM items WHERE id = $fine_q1"), '0',
	'the later write to the same worker and table waits behind the refused one');
is($workers[1]->safe_psql('postgres', "SELECT count(*) FROM items WHERE id = $fine_q2"), '1',
	'another worker\'s queue was delivered');
is($coordinator->safe_psql('postgres', q{SELECT string_agg(node_name || '=' || is_up, ',' ORDER BY node_name) FROM ringshard.nodes}),
	'q1=false,q2=true,q3=true', 'a node with a write still queued stays down for reads; the others are up');
$coordinator->safe_psql('postgres', q{SET ringshard.replay_max_attempts = 2; SELECT * FROM ringshard.watchdog_tick()});
is($coordinator->safe_psql('postgres', qq{SELECT string_agg(payload->>'id', ',') FROM ringshard.write_queue}), $fine_q1,
	'after ringshard.replay_max_attempts refusals the write leaves the queue');
$coordinator->safe_psql('postgres', q{SELECT * FROM ringshard.watchdog_tick()});
is($coordinator->safe_psql('postgres', q{SELECT count(*) FROM ringshard.write_queue}), '0',
	'the next round delivers the write it held back');
is($workers[0]->safe_psql('postgres', "SELECT count(*) FROM items WHERE id = $fine_q1"), '1',
	'which is on the worker now');
like($coordinator->safe_psql('postgres', q{SELECT node_name || ' ' || attempts || ' ' || (payload->>'id') || ' ' || reason FROM ringshard.dead_letters}),
	qr/^q1 2 $poison .*no_poison/, 'and waits in dead_letters with its reason');
like(slurp_file($coordinator->logfile), qr/WARNING:  queued write \S+ for node "q1" was refused 2 times and is set aside in ringshard.dead_letters/,
	'the server log says a write was set aside, for which node and after how many refusals');
is($coordinator->safe_psql('postgres', q{SELECT queued || '/' || dead_letters FROM ringshard.write_queue_status WHERE node = 'q1'}),
	'0/1', 'write_queue_status counts the dead letter');
is($coordinator->safe_psql('postgres', q{SELECT is_up FROM ringshard.nodes WHERE node_name = 'q1'}), 'f',
	'q1 stays down for reads: it misses the dead letter\'s row');
# The operator fixes the cause and writes the row again, then drops the letter.
$workers[0]->safe_psql('postgres', q{ALTER TABLE items DROP CONSTRAINT no_poison});
$workers[0]->safe_psql('postgres', qq{INSERT INTO items SELECT (payload->>'id')::bigint, payload->>'payload' FROM (VALUES ('{"id": $poison, "payload": "poison"}'::json)) v(payload)});
$coordinator->safe_psql('postgres', q{DELETE FROM ringshard.dead_letters; SELECT * FROM ringshard.watchdog_tick();});
is($coordinator->safe_psql('postgres', q{SELECT is_up FROM ringshard.nodes WHERE node_name = 'q1'}), 't',
	'the next round marks it up: nothing is queued or set aside for it');
$coordinator->safe_psql('postgres', qq{DELETE FROM items WHERE id IN ($poison, $fine_q1, $fine_q2);});

# A delivery cancelled (statement_timeout, a user's cancel, the watchdog
# round's 10-minute limit) ends the call, as a cancel does anywhere: it is no
# refusal of the write.  Taken for one, it was counted against the write
# (a dead letter in the end), and the next queued write waited again, with
# nothing left to stop it: the round hung for ever behind a row lock on the
# node.  Here a session on q1 holds the row a queued UPDATE needs.
my $locked = $coordinator->safe_psql('postgres', q{
	SELECT g FROM generate_series(7001, 9000) g WHERE 'q1' = ANY (replicas_for(g::bigint)) LIMIT 1});
my $locked_too = $coordinator->safe_psql('postgres', qq{
	SELECT g FROM generate_series(9001, 11000) g WHERE 'q1' = ANY (replicas_for(g::bigint)) LIMIT 1});
$coordinator->safe_psql('postgres', qq{
	INSERT INTO items VALUES ($locked, 'before'), ($locked_too, 'before');
	SELECT ringshard.mark_node_down('q1');
	UPDATE items SET payload = 'after' WHERE id = $locked;
	UPDATE items SET payload = 'after' WHERE id = $locked_too;});
# A session on q1 that runs sql (which prints 'holding') and keeps its transaction open.
my ($h_in, $h_out, $h_err, $holder);
sub hold_on_q1
{
	my ($sql) = @_;
	($h_in, $h_out, $h_err) = ('', '', '');
	$holder = IPC::Run::start([ 'psql', '-X', '-q', '-At', '-h', $workers[0]->host, '-p', $workers[0]->port, '-d', 'postgres' ],
		'<', \$h_in, '>', \$h_out, '2>', \$h_err, IPC::Run::timeout(120));
	$h_in .= "$sql\n";
	$holder->pump until $h_out =~ /holding/;
}
hold_on_q1("BEGIN; SELECT 'holding' FROM items WHERE id IN ($locked, $locked_too) FOR UPDATE;");
# The holder ends its transaction (COMMIT or ROLLBACK) and leaves.
sub release_q1
{
	my ($end) = @_;
	$h_in .= "$end;\n\\q\n";
	$holder->finish;
}
# After a watchdog round: what is queued, the payloads q1 holds for the rows of where, and whether q1 is up.
sub round_then_queue_payloads_up
{
	my ($where) = @_;
	$coordinator->safe_psql('postgres', q{SELECT count(*) FROM ringshard.watchdog_tick()});
	return $coordinator->safe_psql('postgres', q{SELECT count(*) FROM ringshard.write_queue}) . ' '
	  . $workers[0]->safe_psql('postgres', "SELECT string_agg(payload, ',' ORDER BY id) FROM items WHERE $where") . ' '
	  . $coordinator->safe_psql('postgres', q{SELECT is_up FROM ringshard.nodes WHERE node_name = 'q1'});
}
for my $call ('SELECT ringshard.replay_queue(\'q1\')', 'SELECT count(*) FROM ringshard.watchdog_tick()')
{
	my $q1_offset = -s $workers[0]->logfile;
	my ($rc_c, $out_c, $err_c) = $coordinator->psql('postgres', "SET ringshard.node_timeout = '30s'; SET statement_timeout = '2s'; $call", timeout => 60);
	like($err_c, qr/canceling statement due to statement timeout/,
		"$call, waiting on a row lock on the node: statement_timeout cancels it");
	# the cancel reached the queued UPDATE waiting on the row lock on q1 (not a step before it)
	like(slurp_file($workers[0]->logfile, $q1_offset), qr/canceling statement due to user request\n[^\n]*CONTEXT:  while locking tuple [^\n]* in relation "items"\n[^\n]*STATEMENT:  [^\n]*UPDATE /,
		"$call: it was the delivery, waiting on q1, that was cancelled");
	is($coordinator->safe_psql('postgres', q{
		SELECT string_agg(attempts || ':' || coalesce(last_error, 'none'), ',') FROM ringshard.write_queue WHERE node_name = 'q1'}),
		'0:none,0:none', "$call cancelled: no queued write counted as refused");
}
release_q1('COMMIT');
is(round_then_queue_payloads_up("id IN ($locked, $locked_too)"), '0 after,after t', 'the lock released, the next round delivers both and marks q1 up');

# A node's own cancel (its statement_timeout) is that node's answer: the
# write counts as refused, with its error, and the round goes on.
$workers[0]->safe_psql('postgres', q{ALTER DATABASE postgres SET statement_timeout = '1s'});
$coordinator->safe_psql('postgres', qq{
	SELECT ringshard.mark_node_down('q1');
	UPDATE items SET payload = 'again' WHERE id = $locked;});
hold_on_q1("SET statement_timeout = 0; BEGIN; SELECT 'holding' FROM items WHERE id = $locked FOR UPDATE;");
my ($rc_n, $out_n, $err_n) = $coordinator->psql('postgres', 'SELECT count(*) FROM ringshard.watchdog_tick()', timeout => 60);
is($rc_n, 0, 'a queued UPDATE cancelled by the node\'s own statement_timeout: the watchdog round finishes') or diag $err_n;
like($coordinator->safe_psql('postgres', q{SELECT attempts || ' ' || last_error FROM ringshard.write_queue WHERE node_name = 'q1'}),
	qr/^1 .*canceling statement due to statement timeout/, 'and counts it as the node\'s refusal, with its error');
release_q1('COMMIT');
$workers[0]->safe_psql('postgres', q{ALTER DATABASE postgres RESET statement_timeout});
$coordinator->safe_psql('postgres', q{SELECT count(*) FROM ringshard.watchdog_tick()});
is($coordinator->safe_psql('postgres', q{SELECT count(*) FROM ringshard.write_queue}) . ' '
	  . $workers[0]->safe_psql('postgres', "SELECT payload FROM items WHERE id = $locked"),
	'0 again', 'the node\'s timeout lifted and the lock released, the next round delivers it');

# Each lock wait of a queued statement on its node lasts at most
# ringshard.node_timeout (2 s here): then the statement, and the node's
# writes after it, wait for the next round, neither refused nor counted; the
# round goes on with the other nodes, and does not try to hand the node over
# (that would wait on the same lock again, holding the node's queue lock
# against every writer).
my ($held, $after_held, $for_q2) = split /\|/, $coordinator->safe_psql('postgres', q{
	SELECT (SELECT g FROM generate_series(11001, 13000) g WHERE 'q1' = ANY (replicas_for(g::bigint)) AND NOT 'q2' = ANY (replicas_for(g::bigint)) LIMIT 1)
	       || '|' || (SELECT g FROM generate_series(13001, 15000) g WHERE 'q1' = ANY (replicas_for(g::bigint)) AND NOT 'q2' = ANY (replicas_for(g::bigint)) LIMIT 1)
	       || '|' || (SELECT g FROM generate_series(15001, 17000) g WHERE 'q2' = ANY (replicas_for(g::bigint)) AND NOT 'q1' = ANY (replicas_for(g::bigint)) LIMIT 1)});
$coordinator->safe_psql('postgres', qq{
	INSERT INTO items VALUES ($held, 'before');
	SELECT ringshard.mark_node_down('q1');
	SELECT ringshard.mark_node_down('q2');
	UPDATE items SET payload = 'third' WHERE id = $held;
	INSERT INTO items VALUES ($after_held, 'after the held one'), ($for_q2, 'q2 row');});
hold_on_q1("BEGIN; SELECT 'holding' FROM items WHERE id = $held FOR UPDATE;");
my $q1_offset = -s $workers[0]->logfile;
my $coordinator_offset = -s $coordinator->logfile;
my ($rc_l, $out_l, $err_l) = $coordinator->psql('postgres', 'SELECT count(*) FROM ringshard.watchdog_tick()', timeout => 60);
is($rc_l, 0, 'a queued UPDATE whose row is held on the node: the watchdog round finishes') or diag $err_l;
like(slurp_file($workers[0]->logfile, $q1_offset), qr/canceling statement due to lock timeout/,
	'the UPDATE gave up its wait on q1 after the lock timeout');
my @waits = slurp_file($coordinator->logfile, $coordinator_offset) =~ /queued write \S+ for node "q1" waits for the next round/g;
is(scalar(@waits), 1, 'once in the round: no hand-over of q1 waited on the lock again');
like($coordinator->safe_psql('postgres', q{
	SELECT string_agg(node_name || ':' || attempts || ':' || coalesce(last_error, 'none') || ':' || coalesce(payload->>'id', 'statement'), ',' ORDER BY ordinal) FROM ringshard.write_queue}),
	qr/^q1:0:[^,]*canceling statement due to lock timeout[^,]*:statement,q1:0:none:$after_held$/,
	'it stays queued for the next round, not counted as refused (its error says why), and the write after it waits behind it');
is($workers[0]->safe_psql('postgres', "SELECT count(*) FROM items WHERE id = $after_held"), '0',
	'the later write to q1 did not overtake it');
is($workers[1]->safe_psql('postgres', "SELECT payload FROM items WHERE id = $for_q2") . ' '
	  . $coordinator->safe_psql('postgres', q{SELECT string_agg(node_name || '=' || is_up, ',' ORDER BY node_name) FROM ringshard.nodes}),
	'q2 row q1=false,q2=true,q3=true', 'the same round delivered q2\'s queue and marked it up; q1 stays down');
release_q1('COMMIT');
is(round_then_queue_payloads_up("id IN ($held, $after_held)"), '0 third,after the held one t', 'the lock released, the next round delivers both, in order, and marks q1 up');
$coordinator->safe_psql('postgres', qq{DELETE FROM items WHERE id IN ($held, $after_held, $for_q2);});
$coordinator->safe_psql('postgres', qq{DELETE FROM items WHERE id IN ($locked, $locked_too);});

# A queued row waits the same way.  Its INSERT meets a key another session
# on the node inserted and holds, uncommitted: each round gives up that wait
# after ringshard.node_timeout (the node's lock timeout), and neither counts
# it as a refusal nor sets it aside, in more rounds than
# ringshard.replay_max_attempts.  Once the holder rolls back, the next round
# delivers it.  (A row used to have node_timeout in all: its link was
# dropped, the node still answered, and the wait counted as a refusal, in the
# end a dead letter, and q1 missed the row.)
my $row_held = $coordinator->safe_psql('postgres', q{
	SELECT g FROM generate_series(17001, 19000) g WHERE 'q1' = ANY (replicas_for(g::bigint)) LIMIT 1});
# (items has no key: a unique index on q1 alone, where the wait happens)
$workers[0]->safe_psql('postgres', q{CREATE UNIQUE INDEX items_id_q1 ON items (id)});
$coordinator->safe_psql('postgres', qq{
	SELECT ringshard.mark_node_down('q1');
	INSERT INTO items VALUES ($row_held, 'queued row');});
hold_on_q1("BEGIN; INSERT INTO items VALUES ($row_held, 'holder'); SELECT 'holding';");
$q1_offset = -s $workers[0]->logfile;
$coordinator_offset = -s $coordinator->logfile;
my @row_rounds;
for my $round (1 .. 3)
{
	my ($rc_r, $out_r, $err_r) = $coordinator->psql('postgres',
		'SET ringshard.replay_max_attempts = 2; SELECT count(*) FROM ringshard.watchdog_tick()', timeout => 60);
	push @row_rounds, $rc_r;
}
is(join(',', @row_rounds), '0,0,0', 'a queued row whose key is held on the node: three watchdog rounds finish');
like(slurp_file($workers[0]->logfile, $q1_offset), qr/canceling statement due to lock timeout\n[^\n]*CONTEXT:  while inserting index tuple/,
	'the row\'s INSERT gave up its wait on the held key after the lock timeout');
my @row_waits = slurp_file($coordinator->logfile, $coordinator_offset) =~ /queued write \S+ for node "q1" waits for the next round/g;
cmp_ok(scalar(@row_waits), '>=', 3, 'each round says the row waits for the next one (' . scalar(@row_waits) . ')');
like($coordinator->safe_psql('postgres', q{
	SELECT string_agg(attempts || ':' || coalesce(last_error, 'none') || ':' || coalesce(payload->>'id', 'statement'), ',') FROM ringshard.write_queue WHERE node_name = 'q1'})
	  . ' ' . $coordinator->safe_psql('postgres', q{SELECT count(*) FROM ringshard.dead_letters}),
	qr/^0:[^,]*canceling statement due to lock timeout[^,]*:$row_held 0$/,
	'the row stays queued, not counted as refused in more rounds than replay_max_attempts, and is not set aside');
release_q1('ROLLBACK');
is(round_then_queue_payloads_up("id = $row_held"), '0 queued row t', 'the key released, the next round delivers the row and marks q1 up');
$coordinator->safe_psql('postgres', qq{DELETE FROM items WHERE id = $row_held;});
$workers[0]->safe_psql('postgres', q{DROP INDEX items_id_q1});

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

$_->stop for ($coordinator, @workers);
done_testing();

# Failover on PostgreSQL's own streaming replication (docs/cluster.md,
# "High availability").  A coordinator with a synchronous standby, three
# workers, w1 with a synchronous standby of its own and addressed by a
# multi-host string with target_session_attrs=read-write; three clients of
# multi-node transactions that connect for each transaction through a
# multi-host string.
#
#   1. SELECTs through the coordinator's hot standby equal the primary's,
#      also with a worker gone that the catalog still calls up.
#   2. The coordinator primary is SIGKILLed under the clients, with one
#      transaction stopped after PREPARE on the workers (no decision yet)
#      and one after its commit decision (before COMMIT PREPARED); the
#      standby is promoted; the clients carry on through it.
#   3. w1's primary is SIGKILLed under the clients, with one transaction
#      prepared on it; its standby is promoted; the coordinator reaches the
#      new primary by the same address and resolves the prepared part.
#   4. w2 is restarted under the clients' steady load: it is marked up
#      while the load goes on, and UPDATEs of its keys succeed.
#
# Then: every transaction a client saw commit is complete on all replicas
# of its rows, none is partial, no row is duplicated, no prepared
# transaction is left, every queue is delivered.  The test prints the time
# from the coordinator's kill to the first commit through the standby and
# from w2's return to "up" under load.
use strict;
use warnings;
use POSIX ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $common = join("\n",
	"max_prepared_transactions = 20",
	"max_connections = 60",
	"shared_preload_libraries = 'ringshard'",
	"wal_keep_size = '256MB'",
	"log_min_messages = log");

# Coordinator pair and w1 pair: primaries that allow streaming, standbys
# from a base backup, synchronous (a commit is acknowledged once the standby
# has it).
my $coord_a = PostgreSQL::Test::Cluster->new('coord_a');
$coord_a->init(allows_streaming => 1);
$coord_a->append_conf('postgresql.conf', $common);
$coord_a->start;

my $w1 = PostgreSQL::Test::Cluster->new('w1');
$w1->init(allows_streaming => 1);
$w1->append_conf('postgresql.conf', $common);
$w1->start;
my $w2 = PostgreSQL::Test::Cluster->new('w2');
my $w3 = PostgreSQL::Test::Cluster->new('w3');
for my $w ($w2, $w3)
{
	$w->init;
	$w->append_conf('postgresql.conf', $common);
	$w->start;
}
$_->safe_psql('postgres', 'CREATE EXTENSION ringshard') for ($w1, $w2, $w3);

# w1's standby first: its address names both hosts.
$w1->backup('w1_base');
my $w1s = PostgreSQL::Test::Cluster->new('w1s');
$w1s->init_from_backup($w1, 'w1_base', has_streaming => 1);
$w1s->start;
$w1->append_conf('postgresql.conf', "synchronous_standby_names = 'w1s'");
$w1->reload;
$w1->safe_psql('postgres', 'CREATE TABLE sync_probe (); DROP TABLE sync_probe');	# waits for w1s
$w1->wait_for_catchup('w1s');

my $w1_address = sprintf('host=%s,%s port=%d,%d dbname=postgres target_session_attrs=read-write',
	$w1->host, $w1s->host, $w1->port, $w1s->port);
$coord_a->safe_psql('postgres', 'CREATE EXTENSION ringshard');
$coord_a->safe_psql('postgres', sprintf(q{
	SELECT ringshard.add_node('w1', %s);
	SELECT ringshard.add_node('w2', 'host=%s port=%d dbname=postgres');
	SELECT ringshard.add_node('w3', 'host=%s port=%d dbname=postgres');
	SELECT ringshard.set_replication_factor('default', 2);
	SELECT count(*) FROM ringshard.sync_topology();
	CREATE TABLE ledger (k text NOT NULL, txn text NOT NULL, part int NOT NULL, note text);
	SELECT ringshard.distribute_table('ledger', 'k');
	SELECT ringshard.create_distributed_table('ledger');
	INSERT INTO ledger SELECT 'seed-' || g, 'seed-' || g, 1, NULL FROM generate_series(1, 300) g;
	ALTER SYSTEM SET ringshard.watchdog_database = 'postgres';
	ALTER SYSTEM SET ringshard.watchdog_interval = '300ms';
	SELECT pg_reload_conf();},
	$coord_a->safe_psql('postgres', "SELECT quote_literal('$w1_address')"),
	$w2->host, $w2->port, $w3->host, $w3->port));
like($coord_a->safe_psql('postgres', q{SELECT ringshard.server_address('w1')}), qr/target_session_attrs/,
	'w1 is addressed by both its hosts, read-write');

# The coordinator's standby: ALTER SYSTEM's settings come with the backup.
$coord_a->backup('coord_base');
my $coord_b = PostgreSQL::Test::Cluster->new('coord_b');
$coord_b->init_from_backup($coord_a, 'coord_base', has_streaming => 1);
$coord_b->start;
$coord_a->append_conf('postgresql.conf', "synchronous_standby_names = 'coord_b'");
$coord_a->reload;
$coord_a->safe_psql('postgres', 'CREATE TABLE sync_probe (); DROP TABLE sync_probe');
$coord_a->wait_for_catchup('coord_b');

my $coordinators = sprintf('host=%s,%s port=%d,%d dbname=postgres target_session_attrs=read-write connect_timeout=2',
	$coord_a->host, $coord_b->host, $coord_a->port, $coord_b->port);

# ---------------------------------------------------------------------------
# 1. Reads through the coordinator's hot standby.
my @reads = (
	q{SELECT count(*), sum(part), md5(string_agg(k, ',' ORDER BY k)) FROM ledger},
	q{SELECT k, txn FROM ledger WHERE k IN ('seed-1', 'seed-77', 'seed-300') ORDER BY k},
	q{SELECT part, count(*) FROM ledger GROUP BY part ORDER BY part},
	q{SELECT k FROM ledger ORDER BY k DESC LIMIT 5});
for my $q (@reads)
{
	is($coord_b->safe_psql('postgres', $q), $coord_a->safe_psql('postgres', $q), "through the standby: $q");
}
is($coord_b->safe_psql('postgres', 'SELECT pg_is_in_recovery()'), 't', 'the standby is in recovery');
# A worker that is gone while the catalog still calls it up: the standby's
# reads skip it without writing anything (it cannot).
$coord_a->safe_psql('postgres', q{ALTER SYSTEM SET ringshard.watchdog_interval = '1h'; SELECT pg_reload_conf()});
$w3->stop('immediate');
for my $q (@reads)
{
	my ($rc, $out, $err) = $coord_b->psql('postgres', $q);
	is($rc, 0, "with w3 gone, through the standby: $q") or diag($err);
	is($out, $coord_a->safe_psql('postgres', $q), '... the same answer');
}
$w3->start;
$coord_a->safe_psql('postgres', q{ALTER SYSTEM SET ringshard.watchdog_interval = '300ms'; SELECT pg_reload_conf()});
ok($coord_a->poll_query_until('postgres', q{SELECT bool_and(is_up) FROM ringshard.nodes}), 'all nodes up again');

# ---------------------------------------------------------------------------
# Clients: each transaction writes three rows (three keys: two or three
# nodes, two phases), through a new connection to whichever coordinator is
# the primary.  Each logs "txn ok|fail time".
my $dir = PostgreSQL::Test::Utils::tempdir;
my @clients;

sub start_clients
{
	my ($phase) = @_;
	unlink "$dir/stop";
	for my $id (1 .. 3)
	{
		my $pid = fork();
		die "fork: $!" unless defined $pid;
		if ($pid == 0)
		{
			open STDOUT, '>', '/dev/null';
			open STDERR, '>>', "$dir/client$phase-$id.err";
			open my $log, '>>', "$dir/client$phase-$id.log" or POSIX::_exit(1);
			$log->autoflush(1);
			my $deadline = time + 600;
			for my $seq (1 .. 20000)
			{
				last if -e "$dir/stop" || time > $deadline;
				my $txn = sprintf('p%d-c%d-%05d', $phase, $id, $seq);
				my $sql = "BEGIN; INSERT INTO ledger (k, txn, part) VALUES "
				  . "('$txn-a', '$txn', 1), ('$txn-b', '$txn', 2), ('$txn-c', '$txn', 3); "
				  . ($seq > 1 ? sprintf("UPDATE ledger SET note = 'seen' WHERE k = 'p%d-c%d-%05d-a'; ", $phase, $id, $seq - 1) : '')
				  . "COMMIT;";
				my $rc = system('psql', '-X', '-q', '-At', '-v', 'ON_ERROR_STOP=1', '-d', $coordinators, '-c', $sql);
				printf $log "%s %s %.3f\n", $txn, ($rc == 0 ? 'ok' : 'fail'), time;
				usleep(50_000) if $rc != 0;
			}
			POSIX::_exit(0);
		}
		push @clients, $pid;
	}
}

sub stop_clients
{
	open my $fh, '>', "$dir/stop" or die;
	close $fh;
	waitpid($_, 0) for @clients;
	@clients = ();
}

# Every logged transaction: txn => [status, time]
sub client_log
{
	my %txns;
	for my $file (glob "$dir/client*.log")
	{
		open my $fh, '<', $file or die;
		while (<$fh>)
		{
			my ($txn, $status, $t) = split;
			$txns{$txn} = [ $status, $t ];
		}
	}
	return \%txns;
}

sub commits_since
{
	my ($since) = @_;
	my $log = client_log();
	return scalar grep { $_->[0] eq 'ok' && $_->[1] > $since } values %$log;
}

# wait until the clients have committed this many transactions after a time (bounded)
sub wait_for_commits
{
	my ($since, $count) = @_;
	for (1 .. 600)
	{
		return 1 if commits_since($since) >= $count;
		usleep(100_000);
	}
	return 0;
}

# A session stopped at a fault point: it writes the three rows of txn (a
# child process running psql; its pid is returned).
sub stuck_session
{
	my ($node, $fault, $txn) = @_;
	my $pid = fork();
	die "fork: $!" unless defined $pid;
	if ($pid == 0)
	{
		open STDOUT, '>', '/dev/null';
		open STDERR, '>>', "$dir/stuck-$txn.err";
		exec('psql', '-X', '-At', '-d', $node->connstr('postgres'), '-c',
			"SET ringshard.fault_injection = '$fault'; INSERT INTO ledger (k, txn, part) VALUES "
			  . "('$txn-a', '$txn', 1), ('$txn-b', '$txn', 2), ('$txn-c', '$txn', 3)")
		  or POSIX::_exit(1);
	}
	return $pid;
}

# ---------------------------------------------------------------------------
# 2. The coordinator primary killed under load, two transactions in doubt.
start_clients(1);
ok(wait_for_commits(0, 30), 'the clients commit through the primary');
my $offset = -s $coord_a->logfile;
my @stuck = (stuck_session($coord_a, 'after_prepare=until_orphaned', 'undecided'),
	stuck_session($coord_a, 'after_local_commit=until_orphaned', 'decided'));
ok($coord_a->wait_for_log(qr/fault injection: waiting for the postmaster to die at after_prepare/, $offset)
	  && $coord_a->wait_for_log(qr/fault injection: waiting for the postmaster to die at after_local_commit/, $offset),
	'one transaction waits after PREPARE on its workers, one after its commit decision');
cmp_ok(join('+', map { $_->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts') } ($w1, $w2, $w3)),
	'ne', '0+0+0', 'their parts are prepared on the workers');
my $killed_at = time;
$coord_a->kill9;
$coord_b->promote;
my $promoted_at = time;
# The two sessions' backends outlive their postmaster and go on at once, as
# lingering backends of a killed primary do: they must not commit their
# parts (the decision of the first never reaches the standby, which the
# workers would then hold committed while the new primary rolls back the
# rest).  Their clients are given up.
kill 'TERM', @stuck;
waitpid($_, 0) for @stuck;
ok(wait_for_commits($killed_at, 30), 'the clients commit through the promoted standby');
my $log = client_log();
my ($first) = sort { $a <=> $b } map { $_->[1] } grep { $_->[0] eq 'ok' && $_->[1] > $killed_at } values %$log;
note(sprintf('coordinator failover: first commit %.1f s after the kill (promotion %.1f s after it)',
	$first - $killed_at, $promoted_at - $killed_at));
ok($coord_b->poll_query_until('postgres',
	q{SELECT count(*) = 0 FROM ringshard.transaction_records}),
	'the new primary resolves what the old one left in doubt');
# A backend of the killed primary that was committing when the postmaster
# died may still send a PREPARE TRANSACTION after that (it notices the
# postmaster's death at its next wait): the part it leaves has no record on
# the new primary, and the watchdog's next recovery round rolls it back.
my $prepared_left;
for my $attempt (1 .. 120)
{
	$prepared_left = join('+', map { $_->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts') } ($w1, $w2, $w3));
	last if $prepared_left eq '0+0+0';
	usleep(500_000);
}
is($prepared_left, '0+0+0', 'no prepared transaction is left on the workers');
stop_clients();

# ---------------------------------------------------------------------------
# 3. w1's primary killed under load, a transaction prepared on it.
start_clients(2);
ok(wait_for_commits(time, 20), 'the clients commit through the new coordinator');
$offset = -s $coord_b->logfile;
# its first row has a copy on w1
my $w1_txn = $coord_b->safe_psql('postgres',
	q{SELECT t FROM (SELECT 'w1-prepared-' || g AS t FROM generate_series(1, 100) g) s
	   WHERE 'w1' = ANY (replicas_for(t || '-a')) ORDER BY t LIMIT 1});
my $stuck = stuck_session($coord_b, 'after_prepare=sleep:3000', $w1_txn);
ok($coord_b->wait_for_log(qr/fault injection: sleeping 3000 ms at after_prepare/, $offset),
	'a transaction waits after PREPARE');
# (a standby lists no prepared transaction until it is promoted; synchronous
# replication has it there once w1 acknowledged the PREPARE)
ok($w1->poll_query_until('postgres', q{SELECT count(*) > 0 FROM pg_prepared_xacts}),
	'its part on w1 is prepared');
my $w1_killed_at = time;
$w1->kill9;
$w1s->promote;
waitpid($stuck, 0);
ok($w1s->poll_query_until('postgres', q{SELECT count(*) = 0 FROM pg_prepared_xacts}),
	"the coordinator resolves the part on w1's new primary, reached by the same address");
ok($coord_b->poll_query_until('postgres', q{SELECT is_up FROM ringshard.nodes WHERE node_name = 'w1'}),
	'w1 is marked up once its queue is delivered');
ok(wait_for_commits($w1_killed_at, 30), 'the clients go on committing');
stop_clients();

# ---------------------------------------------------------------------------
# 4. w2 restarted under the clients' steady load.
start_clients(3);
ok(wait_for_commits(time, 20), 'the load runs');
$w2->stop('immediate');
my $w2_down_at = time;
ok($coord_b->poll_query_until('postgres', q{SELECT NOT is_up FROM ringshard.nodes WHERE node_name = 'w2'}),
	'w2 is marked down');
ok(wait_for_commits($w2_down_at, 30), 'writes go on while w2 is down (queued for it)');
cmp_ok($coord_b->safe_psql('postgres', q{SELECT count(*) FROM ringshard.write_queue WHERE node_name = 'w2'}),
	'>', 0, 'its writes are queued, UPDATEs among them');
my $w2_queued = $coord_b->safe_psql('postgres', q{SELECT count(*) FROM ringshard.write_queue WHERE node_name = 'w2'});
$w2->start;
my $w2_back_at = time;
ok($coord_b->poll_query_until('postgres', q{SELECT is_up FROM ringshard.nodes WHERE node_name = 'w2'}),
	'w2 is marked up under the load');
my $w2_up_at = time;
ok(wait_for_commits($w2_up_at, 10), 'the load still runs after w2 is marked up');
note(sprintf('worker restart under load: marked up %.1f s after it came back, with %d writes queued for it then',
	$w2_up_at - $w2_back_at, $w2_queued));
my $w2_keys = $coord_b->safe_psql('postgres',
	q{SELECT string_agg(quote_literal(k), ',') FROM (SELECT k FROM ledger WHERE 'w2' = ANY (replicas_for(k)) LIMIT 20) s});
my ($rc, $out, $err) = $coord_b->psql('postgres', "UPDATE ledger SET note = 'after w2 returned' WHERE k IN ($w2_keys)");
is($rc, 0, "UPDATEs of w2's keys succeed") or diag($err);
stop_clients();

# ---------------------------------------------------------------------------
# What the clients saw against what the workers hold.
ok($coord_b->poll_query_until('postgres',
	q{SELECT (SELECT count(*) FROM ringshard.write_queue) = 0 AND bool_and(is_up) FROM ringshard.nodes}),
	'every queue is delivered and every node up');
is(join('+', map { $_->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts') } ($w1s, $w2, $w3)),
	'0+0+0', 'no prepared transaction is left');
# A record is cleared by the watchdog's next recovery round once its parts
# are committed: the last transactions' records wait for that round.
ok($coord_b->poll_query_until('postgres', q{SELECT count(*) = 0 FROM ringshard.transaction_records}),
	'no commit record is left (after the watchdog\'s next round)');

my %primary = (w1 => $w1s, w2 => $w2, w3 => $w3);
my %held;		# node => key => copies
for my $name (sort keys %primary)
{
	for my $row (split /\n/, $primary{$name}->safe_psql('postgres', q{SELECT k, count(*) FROM ledger GROUP BY k}))
	{
		my ($k, $n) = split /\|/, $row;
		$held{$name}{$k} = $n;
	}
}
$log = client_log();
$log->{undecided} = [ 'fail', 0 ];
$log->{decided} = [ 'unknown', 0 ];
$log->{$w1_txn} = [ 'unknown', 0 ];
my %txn_of_key;
for my $name (keys %held) { $txn_of_key{$_} = 1 for keys %{ $held{$name} } }
# every transaction logged or found on a worker
my %txns = map { $_ => 1 } keys %$log;
for my $k (keys %txn_of_key)
{
	(my $t = $k) =~ s/-[abc]$//;
	$txns{$t} = 1 unless $k =~ /^seed-/;
}
my @keys = map { my $t = $_; map { "$t-$_" } qw(a b c) } sort keys %txns;
my %replicas;
for my $row (split /\n/, $coord_b->safe_psql('postgres',
	'SELECT k, array_to_string(replicas_for(k), \',\') FROM unnest(ARRAY[' . join(',', map { "'$_'" } @keys) . ']::text[]) k'))
{
	my ($k, $r) = split /\|/, $row;
	$replicas{$k} = [ split /,/, $r ];
}
my ($acked, $complete, $lost, $partial, $duplicated, $misplaced) = (0, 0, 0, 0, 0, 0);
for my $t (sort keys %txns)
{
	my ($present, $expected) = (0, 0);
	for my $k (map { "$t-$_" } qw(a b c))
	{
		for my $name (keys %held)
		{
			my $copies = $held{$name}{$k} // 0;
			my $is_replica = grep { $_ eq $name } @{ $replicas{$k} };
			$duplicated++ if $copies > 1;
			$misplaced++ if $copies && !$is_replica;
			$expected++ if $is_replica;
			$present++ if $copies && $is_replica;
		}
	}
	my $status = $log->{$t} ? $log->{$t}[0] : 'unknown';
	$acked++ if $status eq 'ok';
	$complete++ if $present == $expected;
	$lost++ if $status eq 'ok' && $present < $expected;
	$partial++ if $present > 0 && $present < $expected;
}
note("transactions: $acked acknowledged, $complete complete, of " . scalar(keys %txns));
cmp_ok($acked, '>', 100, 'the clients had transactions acknowledged through every failover');
is($lost, 0, 'every acknowledged transaction is on every replica of its rows');
is($partial, 0, 'no transaction is partial');
is($duplicated, 0, 'no row is duplicated');
is($misplaced, 0, 'no row is on a node that is not its replica');
is(($held{w1}{'undecided-a'} // 0) + ($held{w2}{'undecided-a'} // 0) + ($held{w3}{'undecided-a'} // 0), 0,
	'the transaction without a decision is rolled back');
my $decided = grep { $held{$_}{'decided-a'} } keys %held;
is($decided, 2, 'the decided one is committed on its replicas');

my $w1_prepared = grep { $held{$_}{"$w1_txn-a"} } keys %held;
is($w1_prepared, 2, 'the one prepared on w1 is committed on its replicas');
is($coord_b->safe_psql('postgres', q{SELECT count(*) FROM ringshard.verify_table('ledger')}), '0',
	'verify_table finds every replica equal');

$_->stop for ($coord_b, $w1s, $w2, $w3);
done_testing();

# Two-phase commit under failure (docs/design.md, invariant 3): a coordinator
# transaction that wrote on several workers commits on all of them or on none,
# whatever crashes and wherever.  A coordinator and three workers, replication
# factor 2.  Every check reads the workers directly, never through the
# coordinator, so that a bug in the coordinator's reads cannot hide one in its
# writes.
#
#  1a. the coordinator crashes at each step of the commit protocol;
#  1b. a participating worker crashes while the commit pauses at each step;
#  2.  a serializable write skew fails the commit of a distributed write;
#  4.  a transaction with a single participant;
#  5.  a second coordinator shares the workers;
#  3.  load, with the coordinator's postmaster killed (last: see there).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(time usleep);

my $coordinator = PostgreSQL::Test::Cluster->new('coordinator');
my @workers = map { PostgreSQL::Test::Cluster->new("tp$_") } 1 .. 3;
my @names = map { "w$_" } 1 .. 3;

$coordinator->init;
# The coordinator crash-restarts on a PANIC, as a production server does.
# No watchdog until the load test: before that, what recovery resolves is
# what the test's own calls resolve, and what a crash left in doubt stays so
# until the test looks at it.  The WAL writer wakes rarely, so that a commit
# not flushed by its own backend stays unwritten until a crash right after it
# (with the default 200 ms the window is shorter, not closed).
$coordinator->append_conf('postgresql.conf', q{
restart_after_crash = on
shared_preload_libraries = 'ringshard'
ringshard.node_timeout = '2s'
max_prepared_transactions = 20
wal_writer_delay = '10s'
});
$coordinator->start;
for my $w (@workers)
{
	$w->init;
	$w->append_conf('postgresql.conf', 'max_prepared_transactions = 20');
	$w->start;
}
$_->safe_psql('postgres', 'CREATE EXTENSION ringshard') for ($coordinator, @workers);

my $setup = '';
for my $i (0 .. 2)
{
	$setup .= sprintf("SELECT ringshard.add_node('%s', 'host=%s port=%d dbname=postgres');",
		$names[$i], $workers[$i]->host, $workers[$i]->port);
}
$setup .= q{
	SELECT ringshard.set_replication_factor('default', 2);
	-- one copy per row: a write there has a single participant
	SELECT ringshard.create_ring('solo');
	SELECT ringshard.add_node('w1', ring => 'solo');
	SELECT ringshard.add_node('w2', ring => 'solo');
	SELECT ringshard.add_node('w3', ring => 'solo');
	SELECT count(*) FROM ringshard.sync_topology();
	-- no primary key: a row committed twice must show as two rows
	CREATE TABLE items (id text NOT NULL, txn text, note text);
	SELECT ringshard.distribute_table('items', 'id');
	SELECT count(*) FROM ringshard.create_distributed_table('items');
	CREATE TABLE singles (id text NOT NULL, note text);
	SELECT ringshard.distribute_table('singles', 'id', 'solo');
	SELECT count(*) FROM ringshard.create_distributed_table('singles');
};
$coordinator->safe_psql('postgres', $setup);

my $coordinator_id = $coordinator->safe_psql('postgres', 'SELECT coordinator_id FROM ringshard.cluster_state');
(my $coordinator_hex = $coordinator_id) =~ s/-//g;
my $system_id = $coordinator->safe_psql('postgres', 'SELECT system_identifier FROM pg_control_system()');

# ---------------------------------------------------------------------------
# Helpers

# Two keys whose replica sets together cover all three workers: a transaction
# writing both has three participants, so "the first node" of a step is never
# all of them.
sub keys_for
{
	my ($label) = @_;
	my $pair = $coordinator->safe_psql('postgres', qq{
		WITH k AS (SELECT '$label-' || g AS id FROM generate_series(1, 40) g)
		SELECT a.id || ' ' || b.id FROM k a JOIN k b ON a.id < b.id
		 WHERE (SELECT count(DISTINCT n) FROM unnest(replicas_for(a.id) || replicas_for(b.id)) n) = 3
		 ORDER BY a.id, b.id LIMIT 1});
	die "no key pair for $label" unless $pair =~ / /;
	return split / /, $pair;
}

sub insert_sql
{
	my ($label, @keys) = @_;
	return "INSERT INTO items VALUES " . join(', ', map { "('$_', '$label', 'x')" } @keys) . ';';
}

# Where the copies of each key are, read on every worker: "key:w1+w3", with
# "w1x2" for a key stored twice on w1 and "-" for a key stored nowhere.
sub placement
{
	my ($table, @keys) = @_;
	my $list = join(', ', map { "'$_'" } @keys);
	my %where;
	for my $i (0 .. 2)
	{
		my $rows = $workers[$i]->safe_psql('postgres',
			"SELECT id, count(*) FROM $table WHERE id IN ($list) GROUP BY id ORDER BY id");
		for my $row (split /\n/, $rows)
		{
			my ($id, $n) = split /\|/, $row;
			push @{ $where{$id} }, $n == 1 ? $names[$i] : "$names[$i]x$n";
		}
	}
	return join(' ', map { "$_:" . join('+', @{ $where{$_} // ['-'] }) } @keys);
}

# The placement to expect: every key on each of its replicas once ('all'), or
# on none ('none').
sub expected_placement
{
	my ($outcome, $ring, @keys) = @_;
	my @parts;
	for my $key (@keys)
	{
		my $replicas = $coordinator->safe_psql('postgres',
			"SELECT string_agg(n, '+' ORDER BY n) FROM unnest(replicas_for('$key', '$ring')) n");
		push @parts, "$key:" . ($outcome eq 'all' ? $replicas : '-');
	}
	return join(' ', @parts);
}

# Prepared transactions on all the workers together.
sub prepared_total
{
	my $total = 0;
	$total += $_->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts') for @workers;
	return $total;
}

# recover_prepared_transactions() on a coordinator, summed over the nodes:
# "committed/rolled back/left in progress/nodes with an error".
sub recover
{
	my ($node) = @_;
	$node //= $coordinator;
	return $node->safe_psql('postgres', q{
		SELECT coalesce(sum(committed), 0) || '/' || coalesce(sum(rolled_back), 0) || '/'
		       || coalesce(sum(in_progress), 0) || '/' || count(error)
		  FROM ringshard.recover_prepared_transactions()});
}

# After recovery: nothing in doubt anywhere, no record left, nothing queued
# (a queued write would be a second way for a row to arrive).
sub check_clean
{
	my ($label) = @_;
	is(prepared_total(), 0, "$label: no prepared transaction is left on any worker");
	is($coordinator->safe_psql('postgres',
		'SELECT (SELECT count(*) FROM ringshard.transaction_records) || \'/\' || (SELECT count(*) FROM ringshard.write_queue)'),
		'0/0', "$label: no transaction record is left and nothing was queued");
}

# A psql script run in the background, so that the test can act while it
# runs; bounded by the default timeout.  The script is read from a file:
# IPC::Run feeds a child's stdin only while the test pumps it.
my $scripts = 0;
sub start_script
{
	my ($node, $sql, %params) = @_;
	my $file = $PostgreSQL::Test::Utils::tmp_check . '/script_' . ++$scripts . '.sql';
	PostgreSQL::Test::Utils::append_to_file($file, $sql);
	my %client = (stdout => '', stderr => '');
	$client{handle} = IPC::Run::start(
		[ $node->installed_command('psql'), '-XAtq', '-v', 'ON_ERROR_STOP=' . ($params{on_error_stop} // 1),
			'-v', 'VERBOSITY=verbose', '-d', $node->connstr('postgres'), '-f', $file ],
		'<', \undef, '>', \$client{stdout}, '2>', \$client{stderr},
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	return \%client;
}

# Waits for a background script; its exit status (0: every statement worked).
sub finish_script
{
	my ($client) = @_;
	$client->{handle}->finish;
	return $client->{handle}->result(0);
}

# Waits (bounded) until the coordinator accepts connections again.
sub wait_for_coordinator
{
	return $coordinator->poll_query_until('postgres', 'SELECT 1', '1');
}

# Starts the coordinator after a SIGKILL of its postmaster: the new postmaster
# cannot start while backends of the old one are still attached to its shared
# memory, and they leave only when they notice the postmaster is gone.
sub restart_killed_coordinator
{
	my ($old_pid) = @_;
	my $deadline = time + 60;
	usleep(100_000) while kill(0, $old_pid) && time < $deadline;
	while (time < $deadline)
	{
		return 1 if $coordinator->start(fail_ok => 1);
		usleep(500_000);
	}
	return 0;
}

is(recover(), '0/0/0/0', 'recovery finds nothing in doubt after the set-up');
check_clean('set-up');

# ---------------------------------------------------------------------------
# 1a. The coordinator crashes (PANIC, crash restart) at each step of the
# protocol.  Before the local commit nothing may survive; from the local
# commit on, everything must.  What the crash leaves in doubt tells that it
# happened where it says.

my @coordinator_crashes = (
	# point, prepared parts left in doubt, outcome, recovery "committed/rolled back", settings
	[ 'before_prepare', 0, 'none', '0/0' ],
	[ 'after_first_prepare', 1, 'none', '0/1' ],
	[ 'after_prepare', 3, 'none', '0/3' ],
	# the records were written in the local transaction, which the crash aborts
	[ 'after_records', 3, 'none', '0/3' ],
	[ 'after_local_commit', 3, 'all', '3/0' ],
	[ 'after_first_commit_prepared', 2, 'all', '2/0' ],
	# A client may commit asynchronously; once one node has committed its
	# part, the decision must survive the crash all the same.
	[ 'after_first_commit_prepared', 2, 'all', '2/0', 'synchronous_commit = off' ],
);
for my $case (@coordinator_crashes)
{
	my ($point, $in_doubt, $outcome, $recovered, $settings) = @$case;
	my $label = "coordinator crash at $point" . ($settings ? " ($settings)" : '');
	my $tag = 'c' . ($settings ? 'a' : '');
	my @keys = keys_for("$tag-$point");
	my $set = $settings ? "SET $settings;\n" : '';
	my $offset = -s $coordinator->logfile;

	my ($rc, $out, $err) = $coordinator->psql('postgres',
		"${set}SET ringshard.fault_injection = '$point=crash';\n" . insert_sql("$tag-$point", @keys));
	isnt($rc, 0, "$label: the client lost its connection");
	ok(wait_for_coordinator(), "$label: the coordinator is back");
	ok($coordinator->log_contains(qr/PANIC:  ringshard fault injection: crash at $point\b/, $offset),
		"$label: the coordinator crashed at that point");
	is(prepared_total(), $in_doubt, "$label: $in_doubt prepared parts left in doubt");

	if ($point eq 'after_prepare')
	{
		# docs/design.md, "Prepared-transaction names"
		my $gid = $workers[0]->safe_psql('postgres', 'SELECT gid FROM pg_prepared_xacts');
		like($gid, qr/^rs_${coordinator_hex}_${system_id}_1_\d+_\d+_\d+_\d+$/,
			"$label: the prepared transaction is named after the coordinator ($gid)");
	}

	# The next transaction after the crash, before any recovery: it may get
	# the same local transaction id as the crashed one (an id that no WAL
	# record carries is handed out again after crash recovery), and then the
	# same prepared-transaction names, still in use on the workers.
	my @next_keys = keys_for("n$tag-$point");
	my ($next_rc, $next_out, $next_err) = $coordinator->psql('postgres', insert_sql("n$tag-$point", @next_keys));
	is($next_rc, 0, "$label: the first transaction after the restart commits") or diag($next_err);

	is(recover(), "$recovered/0/0", "$label: recovery resolves what was in doubt");
	if ($in_doubt > 0)
	{
		# a line per node it finished parts on, whose counts add up to recovery's answer
		my ($committed, $rolled_back) = (0, 0);
		for my $line (split /\n/, slurp_file($coordinator->logfile, $offset))
		{
			next unless $line =~ /LOG:  ringshard: recovery finished \d+ prepared transaction\(s\) on node "\w+": (\d+) committed, (\d+) rolled back/;
			$committed += $1;
			$rolled_back += $2;
		}
		is("$committed/$rolled_back", $recovered, "$label: the server log says what recovery finished, node by node");
	}
	is(placement('items', @keys), expected_placement($outcome, 'default', @keys),
		"$label: the transaction is on " . ($outcome eq 'all' ? 'all its replicas' : 'no worker'));
	is(placement('items', @next_keys), expected_placement($next_rc == 0 ? 'all' : 'none', 'default', @next_keys),
		"$label: the next transaction is all or nothing");
	check_clean($label);
}

# ---------------------------------------------------------------------------
# 1b. A worker crashes (immediate stop: no shutdown checkpoint, the same as
# a crash for its data) while the coordinator's commit pauses at each step;
# it starts again at once.  The commit succeeds exactly when the decision was
# taken (the local commit); the worker's prepared part survives its crash and
# recovery finishes it.

# victim: 'any' participant, the one 'prepared' at the pause, or one 'unprepared'
my @worker_crashes = (
	# point, victim, commit succeeds, left in doubt, recovery "committed/rolled back"
	[ 'before_prepare', 'any', 0, 0, '0/0' ],
	[ 'after_first_prepare', 'prepared', 1, 1, '1/0' ],
	[ 'after_first_prepare', 'unprepared', 0, 0, '0/0' ],
	[ 'after_prepare', 'any', 1, 1, '1/0' ],
	[ 'after_records', 'any', 1, 1, '1/0' ],
	[ 'after_local_commit', 'any', 1, 1, '1/0' ],
	[ 'after_first_commit_prepared', 'prepared', 1, 1, '1/0' ],
);
my $case_number = 0;
for my $case (@worker_crashes)
{
	my ($point, $victim_kind, $commits, $in_doubt, $recovered) = @$case;
	my $label = "worker crash ($victim_kind) at $point";
	my $tag = 'k' . ++$case_number;
	my @keys = keys_for("$tag-$point");
	my $offset = -s $coordinator->logfile;

	my $client = start_script($coordinator,
		"SET ringshard.fault_injection = '$point=sleep:3000';\n" . insert_sql("$tag-$point", @keys));
	$coordinator->wait_for_log(qr/ringshard fault injection: sleeping 3000 ms at $point\b/, $offset);
	my $paused_at = time;

	# Which workers hold a prepared part at the pause.
	my @prepared = grep { $workers[$_]->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts') > 0 } 0 .. 2;
	my %has = map { $_ => 1 } @prepared;
	my $victim;
	if ($victim_kind eq 'prepared') { ($victim) = @prepared; }
	elsif ($victim_kind eq 'unprepared') { ($victim) = grep { !$has{$_} } 0 .. 2; }
	else { $victim = 0; }
	die "$label: no worker to crash (prepared at the pause: @prepared)" unless defined $victim;

	$workers[$victim]->stop('immediate');
	# The case is what it says only if the crash came within the pause; a
	# machine too slow for that is told so (this is not a test of speed).
	my $into = time - $paused_at;
	my $say = $into < 2.5 ? \&note : \&diag;
	$say->(sprintf("%s: %s crashed %.2f s into the 3 s pause", $label, $names[$victim], $into));
	$workers[$victim]->start;

	my $rc = finish_script($client);
	is($rc == 0 ? 1 : 0, $commits, "$label: the COMMIT " . ($commits ? 'succeeds' : 'fails'))
		or diag($client->{stderr});
	if ($commits)
	{
		like($client->{stderr}, qr/node "$names[$victim]" did not confirm the commit/,
			"$label: the client is warned that $names[$victim] has its part in doubt");
	}
	is(prepared_total(), $in_doubt, "$label: $in_doubt prepared parts left in doubt");
	is(recover(), "$recovered/0/0", "$label: recovery resolves what was in doubt");
	is(placement('items', @keys), expected_placement($commits ? 'all' : 'none', 'default', @keys),
		"$label: the transaction is on " . ($commits ? 'all its replicas' : 'no worker'));
	check_clean($label);
}

# ---------------------------------------------------------------------------
# 2. Serializable write skew: both sessions read both doctors, each takes
# one off duty.  The second to commit is the pivot and fails (40001); it also
# wrote a row of the distributed table, which must reach no worker.  When the
# first commits before the second's COMMIT, the second fails at its first
# read in pre-commit, before any PREPARE (2a).  The failure that the design
# names, raised by the local commit itself after every node prepared, needs
# the first to commit while the second pauses after its records (2b).

$coordinator->safe_psql('postgres', q{
	CREATE TABLE oncall (doctor text PRIMARY KEY, on_duty boolean NOT NULL);});
for my $variant ('2a', '2b')
{
	my $label = "write skew ($variant)";
	my $row = $variant eq '2a' ? 'ssi-row2' : 'ssi-row2b';
	$coordinator->safe_psql('postgres', q{
		TRUNCATE oncall; INSERT INTO oncall VALUES ('alice', true), ('bob', true);});
	my $s1 = $coordinator->background_psql('postgres', on_error_stop => 0);
	my $s2 = $coordinator->background_psql('postgres', on_error_stop => 0);
	$s2->query_safe('\set VERBOSITY verbose');
	$s1->query_safe('BEGIN ISOLATION LEVEL SERIALIZABLE');
	$s1->query_safe('SELECT count(*) FROM oncall WHERE on_duty');
	$s2->query_safe('BEGIN ISOLATION LEVEL SERIALIZABLE');
	$s2->query_safe('SELECT count(*) FROM oncall WHERE on_duty');
	$s1->query_safe(q{UPDATE oncall SET on_duty = false WHERE doctor = 'alice'});
	$s2->query_safe(q{UPDATE oncall SET on_duty = false WHERE doctor = 'bob'});
	$s2->query_safe("INSERT INTO items VALUES ('$row', 'ssi', 'x')");
	my @offsets = map { -s $_->logfile } @workers;
	if ($variant eq '2a')
	{
		$s1->query_safe('COMMIT');
		$s2->{stderr} = '';
		$s2->query('COMMIT');
	}
	else
	{
		my $offset = -s $coordinator->logfile;
		$s2->query_safe(q{SET ringshard.fault_injection = 'after_records=sleep:3000'});
		$s2->{stderr} = '';
		$s2->query_until(qr/committing/, "\\echo committing\nCOMMIT;\n");
		$coordinator->wait_for_log(qr/sleeping 3000 ms at after_records/, $offset);
		$s1->query_safe('COMMIT');
		$s2->query('SELECT 1');    # waits for the COMMIT
		like($s2->{stderr}, qr/during commit attempt/, "$label: the local commit itself raised the failure");
		my $prepared_then_rolled_back = 0;
		for my $i (0 .. 2)
		{
			my $log = slurp_file($workers[$i]->logfile, $offsets[$i]);
			$prepared_then_rolled_back++
			  if $log =~ /PREPARE TRANSACTION '(rs_[^']+)'.*ROLLBACK PREPARED '\1'/s;
		}
		is($prepared_then_rolled_back, 2, "$label: both replicas had prepared, and got ROLLBACK PREPARED");
	}
	like($s2->{stderr}, qr/ERROR:  40001: could not serialize access/,
		"$label: the second COMMIT fails with a serialization failure");
	is(placement('items', $row), "$row:-", "$label: the failed transaction's row is on no worker");
	is(prepared_total(), 0, "$label: nothing is left prepared, not even for recovery");
	is($coordinator->safe_psql('postgres', 'SELECT count(*) FROM ringshard.transaction_records'), '0',
		"$label: its transaction records went with it");
	# The retry: one doctor is still on duty, so the other stays; the row goes in.
	$s2->{stderr} = '';
	$s2->query_safe('RESET ringshard.fault_injection');
	$s2->query_safe('BEGIN ISOLATION LEVEL SERIALIZABLE');
	is($s2->query_safe('SELECT count(*) FROM oncall WHERE on_duty'), '1', "$label: the retry sees the first commit");
	$s2->query_safe("INSERT INTO items VALUES ('$row', 'ssi', 'x')");
	$s2->query_safe('COMMIT');
	$s1->quit;
	$s2->quit;
	is(placement('items', $row), expected_placement('all', 'default', $row),
		"$label: the retried transaction leaves exactly one copy on each replica");
	is(recover(), '0/0/0/0', "$label: nothing was left in doubt");
	check_clean($label);
}

# ---------------------------------------------------------------------------
# 4. A transaction whose one participant is the only thing it wrote commits
# there in one phase: no PREPARE, no record, nothing for recovery, and no
# crash point of the two-phase protocol is reached.  One that also wrote
# here (a local table) commits in two phases, with a record.

my $single_node = $coordinator->safe_psql('postgres', q{SELECT (replicas_for('single-1', 'solo'))[1]});
my ($single_index) = grep { $names[$_] eq $single_node } 0 .. 2;
my $worker_offset = -s $workers[$single_index]->logfile;
$coordinator->safe_psql('postgres', q{INSERT INTO singles VALUES ('single-1', 'x')});
ok(!$workers[$single_index]->log_contains(qr/PREPARE TRANSACTION 'rs_${coordinator_hex}_/, $worker_offset),
	"single node: $single_node was not asked to prepare");
is($coordinator->safe_psql('postgres', 'SELECT count(*) FROM ringshard.transaction_records'), '0',
	'single node: the commit left no transaction record');
is(prepared_total(), 0, 'single node: nothing is prepared');
is(recover(), '0/0/0/0', 'single node: recovery finds nothing in doubt');
is(placement('singles', 'single-1'), expected_placement('all', 'solo', 'single-1'), 'single node: the row is on its node');

my $offset = -s $coordinator->logfile;
my ($rc, $out, $err) = $coordinator->psql('postgres',
	q{SET ringshard.fault_injection = 'after_local_commit=crash'; INSERT INTO singles VALUES ('single-2', 'x');});
is($rc, 0, 'single node: the crash point after the local commit of two phases is never reached');
ok(!$coordinator->log_contains(qr/PANIC/, $offset), 'single node: the coordinator did not crash');
is(placement('singles', 'single-2'), expected_placement('all', 'solo', 'single-2'), 'single node: that row is on its node');
check_clean('single node, one phase');

# Writing here too: two phases again, and the crash points are reached.
$coordinator->safe_psql('postgres', q{CREATE TABLE local_notes (note text)});
$single_node = $coordinator->safe_psql('postgres', q{SELECT (replicas_for('single-3', 'solo'))[1]});
($single_index) = grep { $names[$_] eq $single_node } 0 .. 2;
$worker_offset = -s $workers[$single_index]->logfile;
($rc, $out, $err) = $coordinator->psql('postgres', q{
	SET ringshard.fault_injection = 'after_local_commit=crash';
	BEGIN; INSERT INTO local_notes VALUES ('here'); INSERT INTO singles VALUES ('single-3', 'x'); COMMIT;});
isnt($rc, 0, 'single node with a local write, crash after the local commit: the client lost its connection');
ok(wait_for_coordinator(), 'single node with a local write: the coordinator is back');
ok($workers[$single_index]->log_contains(qr/PREPARE TRANSACTION 'rs_${coordinator_hex}_/, $worker_offset),
	"single node with a local write: $single_node was asked to prepare");
is(prepared_total(), 1, 'single node with a local write, crash after the local commit: its one part is in doubt');
is(recover(), '1/0/0/0', 'single node with a local write, crash after the local commit: recovery commits it');
is(placement('singles', 'single-3'), expected_placement('all', 'solo', 'single-3'),
	'single node with a local write: the row is on its node');
is($coordinator->safe_psql('postgres', q{SELECT count(*) FROM local_notes}), '1', 'and the local row is here');
check_clean('single node with a local write');

# ---------------------------------------------------------------------------
# 4b. An INSERT that is its own transaction sends its rows together with the
# commit (ringshard.writes_with_commit): each replica gets the rows and the
# PREPARE TRANSACTION in one string, a single participant its rows and the
# one-phase COMMIT.  A node's error still fails the statement with the
# node's own SQLSTATE, and nothing of it stays anywhere; in a transaction
# block the INSERT itself fails; a read in the same transaction sees the
# rows (they are sent first).

$coordinator->safe_psql('postgres', q{
	CREATE TABLE uniques (id text PRIMARY KEY, note text);
	SELECT ringshard.distribute_table('uniques', 'id');
	SELECT count(*) FROM ringshard.create_distributed_table('uniques');
	CREATE TABLE solo_uniques (id text PRIMARY KEY, note text);
	SELECT ringshard.distribute_table('solo_uniques', 'id', 'solo');
	SELECT count(*) FROM ringshard.create_distributed_table('solo_uniques');
	CREATE FUNCTION insert_and_count(k text) RETURNS bigint LANGUAGE plpgsql AS $$
	BEGIN
		INSERT INTO uniques VALUES (k, 'counted');
		RETURN (SELECT count(*) FROM uniques WHERE id = k);
	END $$;
});
my @offsets = map { -s $_->logfile } @workers;
sub replicas_logged
{
	my ($regex) = @_;
	return join('+', map { $names[$_] } grep { $workers[$_]->log_contains($regex, $offsets[$_]) } 0 .. 2);
}
sub replica_list
{
	my ($key, $ring) = @_;
	return $coordinator->safe_psql('postgres',
		"SELECT string_agg(n, '+' ORDER BY n) FROM unnest(replicas_for('$key', '$ring')) n");
}

$coordinator->safe_psql('postgres', q{INSERT INTO uniques VALUES ('with-commit-1', 'x')});
# one row: a statement prepared on the link (the checked INSERT), executed with the row's values
is(replicas_logged(qr/statement: START TRANSACTION [^\n]*;EXECUTE ringshard_s\d+\('with-commit-1'::[^\n]*;PREPARE TRANSACTION 'rs_/),
	replica_list('with-commit-1', 'default'),
	'rows with the commit: each replica got the row and the PREPARE in one string');
is(replicas_logged(qr/statement: PREPARE TRANSACTION/), '', 'rows with the commit: no replica got a PREPARE alone');
is(placement('uniques', 'with-commit-1'), expected_placement('all', 'default', 'with-commit-1'),
	'rows with the commit: the row is on its replicas');

$coordinator->safe_psql('postgres', q{INSERT INTO solo_uniques VALUES ('with-commit-2', 'x')});
is(replicas_logged(qr/statement: START TRANSACTION [^\n]*;EXECUTE ringshard_s\d+\('with-commit-2'::[^\n]*;COMMIT\n/),
	replica_list('with-commit-2', 'solo'),
	'rows with the commit, one participant: its node got the row and COMMIT in one string');
is(placement('solo_uniques', 'with-commit-2'), expected_placement('all', 'solo', 'with-commit-2'),
	'rows with the commit, one participant: the row is on its node');

# A key UPDATE or DELETE whose text a link sent once before goes as EXECUTE
# of a statement prepared on it; a text sent for the first time goes as it
# is.  The constants of its SET list are holes of the prepared text, their
# values arguments: a simple-protocol client's statements that differ only
# in them are one prepared statement, not one per value.  One psql session:
# one link per node.
$coordinator->safe_psql('postgres', q{
	INSERT INTO uniques VALUES ('upd-1', 'x'), ('upd-2', 'x'), ('upd-3', 'x');
	UPDATE uniques SET note = 'first' WHERE id = 'upd-1';
	UPDATE uniques SET note = 'first' WHERE id = 'upd-1';
	UPDATE uniques SET note = 'other' WHERE id = 'upd-1';
	SET plan_cache_mode = force_generic_plan;
	PREPARE set_note(text, text) AS UPDATE uniques SET note = $1 WHERE id = $2;
	EXECUTE set_note('a', 'upd-2');
	EXECUTE set_note('b', 'upd-2');
	PREPARE drop_row(text) AS DELETE FROM uniques WHERE id = $1;
	EXECUTE drop_row('upd-3');
	EXECUTE drop_row('upd-3');});
is(replicas_logged(qr/statement: START TRANSACTION [^\n]*;WITH m AS \(UPDATE [^\n]*'first'[^\n]*'upd-1'/),
	replica_list('upd-1', 'default'), 'key UPDATE: sent as text the first time');
is(replicas_logged(qr/statement: START TRANSACTION [^\n]*;EXECUTE ringshard_s\d+\('first'::pg_catalog\.text, ARRAY\['upd-1'::/),
	replica_list('upd-1', 'default'), 'key UPDATE: the same text again goes as EXECUTE of a prepared statement');
is(replicas_logged(qr/statement: START TRANSACTION [^\n]*;EXECUTE ringshard_s\d+\('other'::pg_catalog\.text, ARRAY\['upd-1'::/),
	replica_list('upd-1', 'default'), 'key UPDATE: another constant in the SET list is another argument of the same EXECUTE');
is(replicas_logged(qr/WITH m AS \(UPDATE [^\n]*'other'/), '', 'key UPDATE: another constant is not another text');
is(replicas_logged(qr/statement: START TRANSACTION [^\n]*;EXECUTE ringshard_s\d+\('b'::pg_catalog\.text, [^\n]*ARRAY\['upd-2'::/),
	replica_list('upd-2', 'default'), 'key UPDATE with parameters: their values are the arguments of the EXECUTE');
is(replicas_logged(qr/statement: START TRANSACTION [^\n]*;EXECUTE ringshard_s\d+\((?:'upd-3'::pg_catalog\.text, )?ARRAY\['upd-3'::/),
	replica_list('upd-3', 'default'), 'key DELETE with a parameter: the second goes as EXECUTE');
is($coordinator->safe_psql('postgres', q{SELECT string_agg(id || '=' || note, ',' ORDER BY id) FROM uniques WHERE id LIKE 'upd-%'}),
	'upd-1=other,upd-2=b', 'key UPDATE and DELETE as EXECUTE: the rows are as written');
is(placement('uniques', 'upd-2'), expected_placement('all', 'default', 'upd-2'), 'key UPDATE as EXECUTE: the row is on its replicas');
is($coordinator->safe_psql('postgres', q{SELECT count(*) FROM ringshard.verify_table('uniques')}), '0',
	'key UPDATE and DELETE as EXECUTE: the replicas agree');

# A link that holds as many prepared statements as it keeps (64: here key
# UPDATEs of 64 texts, c1 = c1 + 1 + ... + 1, each sent twice) prepares no
# other text seen before:
# it goes as text again, rather than drop a statement (a DEALLOCATE, and a
# Parse again later).
$coordinator->safe_psql('postgres', q{
	CREATE TABLE solo_wide (id text PRIMARY KEY, c1 int);
	SELECT ringshard.distribute_table('solo_wide', 'id', 'solo');
	SELECT count(*) FROM ringshard.create_distributed_table('solo_wide');
	INSERT INTO solo_wide VALUES ('wide-1', 0), ('wide-2', 0);});
my $wide_node = $coordinator->safe_psql('postgres', q{SELECT (replicas_for('wide-1', 'solo'))[1]});
my ($wide_index) = grep { $names[$_] eq $wide_node } 0 .. 2;
my $wide_offset = -s $workers[$wide_index]->logfile;
$coordinator->safe_psql('postgres', join("\n",
	(map { (qq{UPDATE solo_wide SET c1 = c1} . (' + 1' x $_) . qq{ WHERE id = 'wide-1';}) x 2 } 1 .. 64),
	(q{UPDATE solo_wide SET c1 = 777 WHERE id = 'wide-1';}) x 2));
my $wide_log = slurp_file($workers[$wide_index]->logfile, $wide_offset);
my %wide_names = map { $_ => 1 } $wide_log =~ /statement: START TRANSACTION [^\n]*;EXECUTE (ringshard_s\d+)\((?:'1'::integer, )+ARRAY\['wide-1'::/g;
cmp_ok(scalar keys %wide_names, '>=', 63, 'a full link: the link holds the statements of the texts sent twice ('
	  . scalar(keys %wide_names) . ')');
my $wide_text = () = $wide_log =~ /statement: START TRANSACTION [^\n]*;WITH m AS \(UPDATE public\.solo_wide t SET c1 = '777'/g;
is($wide_text, 2, 'a full link: another text seen before goes as text again');
unlike($wide_log, qr/DEALLOCATE/, 'a full link: no statement was dropped for it');
is($coordinator->safe_psql('postgres', q{SELECT c1 FROM solo_wide WHERE id = 'wide-1'}), '777', 'a full link: the UPDATEs are done');

# Values sent as arguments of an EXECUTE are printed as those sent as text
# are, whatever the session's settings: a key UPDATE with constants in its
# SET list, and a one-row INSERT in a transaction block (EXECUTE of an
# INSERT prepared on the link once its text recurs), three times each, under
# a day-first DateStyle, another TimeZone, extra_float_digits = -15 and
# IntervalStyle = sql_standard (where '-1 2:00:00' is minus one day and two
# hours, and a node reading it in its own style would store minus one day
# plus two hours).  All on one link: the keys of the solo ring's node of 'dt-0'.
{
	$coordinator->safe_psql('postgres', q{
		CREATE TABLE dated (id text PRIMARY KEY, d date, ts timestamptz, f float8, iv interval);
		SELECT ringshard.distribute_table('dated', 'id', 'solo');
		SELECT count(*) FROM ringshard.create_distributed_table('dated');});
	my $dt_node = $coordinator->safe_psql('postgres', q{SELECT (replicas_for('dt-0', 'solo'))[1]});
	my ($dt_index) = grep { $names[$_] eq $dt_node } 0 .. 2;
	my @dt_keys = split /\n/, $coordinator->safe_psql('postgres', qq{
		SELECT k FROM (SELECT 'dt-' || g AS k, g FROM generate_series(1, 200) g) s
		 WHERE (replicas_for(k, 'solo'))[1] = '$dt_node' ORDER BY g LIMIT 3});
	my $dt_offset = -s $workers[$dt_index]->logfile;
	my $settings = q{SET DateStyle = 'SQL, DMY'; SET TimeZone = 'Pacific/Kiritimati'; SET extra_float_digits = -15; SET IntervalStyle = sql_standard;};
	my @statements = ($settings, q{INSERT INTO dated VALUES ('dt-0', NULL, NULL, NULL, NULL);});
	for my $day (1 .. 3)
	{
		push @statements,
		  qq{UPDATE dated SET d = '0$day/02/2024', ts = '0$day/02/2024 10:00:00', f = 0.1::float8 + 0.2::float8, iv = interval '-1 day -2 hours' WHERE id = 'dt-0';},
		  qq{BEGIN; INSERT INTO dated VALUES ('$dt_keys[$day - 1]', '0$day/02/2024', '0$day/02/2024 10:00:00', 0.1::float8 + 0.2::float8, interval '-1 day -2 hours'); COMMIT;};
	}
	$coordinator->safe_psql('postgres', join("\n", @statements));
	my $dt_log = slurp_file($workers[$dt_index]->logfile, $dt_offset);
	like($dt_log, qr/statement: START TRANSACTION [^\n]*;EXECUTE ringshard_s\d+\('2024-02-03'::pg_catalog\.date, '2024-02-03 10:00:00\+14'::timestamp with time zone, '0\.30000000000000004'::double precision, '-1 days -02:00:00'::interval, ARRAY\['dt-0'::/,
		'settings: the third key UPDATE went as EXECUTE, its arguments printed in ISO and the postgres IntervalStyle, with all float digits');
	my $inserts = () = $dt_log =~ /statement: (?:START TRANSACTION [^\n]*;)?EXECUTE ringshard_s\d+\('dt-\d+'::(?:pg_catalog\.)?text, '2024-02-0[23]'::pg_catalog\.date, '2024-02-0[23] 10:00:00\+14'::timestamp with time zone, '0\.30000000000000004'::double precision, '-1 days -02:00:00'::interval\)/g;
	is($inserts, 2, 'settings: the second and third one-row INSERT in a transaction block went as EXECUTE, their arguments printed in ISO and the postgres IntervalStyle');
	my $expected = join("\n", (map { my $day = $_ + 1; "$dt_keys[$_]|2024-02-0$day|2024-02-0$day 10:00:00+14|t|t" } 0 .. 1),
		"dt-0|2024-02-03|2024-02-03 10:00:00+14|t|t", "$dt_keys[2]|2024-02-03|2024-02-03 10:00:00+14|t|t");
	is($workers[$dt_index]->safe_psql('postgres', q{SET TimeZone = 'Pacific/Kiritimati';
		SELECT id, d, ts, f = 0.1::float8 + 0.2::float8, iv = interval '-1 day -2 hours' FROM dated ORDER BY d, id}),
		$expected, 'settings: the node stores the dates, times, floats and intervals written, EXECUTE or text');
}

# A duplicate key: the node's unique violation is the statement's error.
for my $case ([ 'uniques', 'default', 'two phases' ], [ 'solo_uniques', 'solo', 'one phase' ])
{
	my ($table, $ring, $how) = @$case;
	my $key = $table eq 'uniques' ? 'with-commit-1' : 'with-commit-2';
	my ($rc, $out, $err) = $coordinator->psql('postgres',
		"\\set VERBOSITY verbose\nINSERT INTO $table VALUES ('$key', 'again'), ('fresh-$table', 'new');\nSELECT 'after';",
		on_error_stop => 0);
	like($err, qr/ERROR:  23505: node "w\d": duplicate key value violates unique constraint/,
		"duplicate key with the commit ($how): the node's 23505 is the statement's error");
	like($out, qr/after/, "duplicate key with the commit ($how): the session goes on");
	is(placement($table, $key, "fresh-$table"), expected_placement('all', $ring, $key) . " fresh-$table:-",
		"duplicate key with the commit ($how): the old row is unchanged and the new one is nowhere");
	recover();	# the records of the commits before: recovery deletes them
	check_clean("duplicate key with the commit ($how)");
}
{
	my ($rc, $out, $err) = $coordinator->psql('postgres',
		"\\set VERBOSITY verbose\nBEGIN;\nINSERT INTO uniques VALUES ('with-commit-1', 'again');\nSELECT 'in the block';\nCOMMIT;",
		on_error_stop => 1);
	like($err, qr/^psql:<stdin>:3: ERROR:  23505: node "w\d": duplicate key/m,
		'duplicate key in a transaction block: the INSERT itself fails');
	unlike($out, qr/in the block/, 'duplicate key in a transaction block: before the next statement runs');
}

# A read after the write, in the same statement's transaction, sees the rows.
is($coordinator->safe_psql('postgres', q{SELECT insert_and_count('read-after-1')}), '1',
	'rows with the commit: a read in the same transaction sees them');
is(placement('uniques', 'read-after-1'), expected_placement('all', 'default', 'read-after-1'),
	'rows with the commit: the row read is committed on its replicas');

# A statement that fails after its INSERT: the rows held back are never sent.
@offsets = map { -s $_->logfile } @workers;
{
	my ($rc, $out, $err) = $coordinator->psql('postgres',
		q{SELECT insert_and_count('never-' || g) / (g - 1) FROM generate_series(1, 1) g});
	like($err, qr/division by zero/, 'a statement failing after its INSERT: it fails');
	is(placement('uniques', 'never-1'), 'never-1:-', 'a statement failing after its INSERT: its row is nowhere');
	recover();
	check_clean('a statement failing after its INSERT');
}

# A node that stores other rows than it was sent (a trigger on its table
# skips some) fails before the COMMIT or PREPARE in the same string runs:
# the node checks the count itself, so nothing is committed anywhere and no
# part is left prepared, in one phase and in two.
for my $w (@workers)
{
	$w->safe_psql('postgres', q{
		CREATE FUNCTION public.skip_dropped() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.id LIKE 'dropped-%' THEN RETURN NULL; END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER skip_dropped BEFORE INSERT ON public.uniques FOR EACH ROW EXECUTE FUNCTION public.skip_dropped();
		CREATE TRIGGER skip_dropped BEFORE INSERT ON public.solo_uniques FOR EACH ROW EXECUTE FUNCTION public.skip_dropped();});
}
for my $case ([ 'uniques', 'default', 'two phases' ], [ 'solo_uniques', 'solo', 'one phase' ])
{
	my ($table, $ring, $how) = @$case;
	my $dropped = "dropped-$table";
	# a kept row with the same replicas, so each node gets both rows in one INSERT
	my $kept = $coordinator->safe_psql('postgres', qq{
		SELECT 'kept-' || g FROM generate_series(1, 200) g
		 WHERE replicas_for('kept-' || g, '$ring') = replicas_for('$dropped', '$ring') ORDER BY g LIMIT 1});
	my ($rc, $out, $err) = $coordinator->psql('postgres',
		"\\set VERBOSITY verbose\nINSERT INTO $table VALUES ('$kept', 'x'), ('$dropped', 'y');",
		on_error_stop => 0);
	like($err, qr/ERROR:  27000: node "w\d": the node stored 1 of the 2 rows it was sent/,
		"rows skipped by a node's trigger ($how): the statement fails with the node's error");
	is(placement($table, $kept, $dropped), "$kept:- $dropped:-",
		"rows skipped by a node's trigger ($how): neither row is committed anywhere");
	check_clean("rows skipped by a node's trigger ($how)");
	# one row goes as a statement prepared on the link: checked the same way
	($rc, $out, $err) = $coordinator->psql('postgres',
		"\\set VERBOSITY verbose\nINSERT INTO $table VALUES ('$dropped', 'z');", on_error_stop => 0);
	like($err, qr/ERROR:  27000: node "w\d": the node stored 0 of the 1 rows it was sent/,
		"one row skipped by a node's trigger ($how): the statement fails with the node's error");
	is(placement($table, $dropped), "$dropped:-",
		"one row skipped by a node's trigger ($how): it is committed nowhere");
	check_clean("one row skipped by a node's trigger ($how)");
}

# The error of a held-back write that another statement of its transaction
# sends first surfaces there, where a function's exception block may catch
# it; the node's transaction has failed all the same, so the commit fails
# and nothing of the write stays.
$coordinator->safe_psql('postgres', q{
	CREATE FUNCTION insert_and_catch(k text) RETURNS text LANGUAGE plpgsql AS $$
	BEGIN
		INSERT INTO uniques VALUES (k, 'caught');
		BEGIN
			PERFORM count(*) FROM uniques WHERE id = k;
		EXCEPTION WHEN OTHERS THEN
			RETURN 'caught: ' || SQLERRM;
		END;
		RETURN 'not caught';
	END $$;});
{
	my ($rc, $out, $err) = $coordinator->psql('postgres', q{SELECT insert_and_catch('dropped-caught')});
	isnt($rc, 0, 'a held-back write failing inside an exception block: the statement still fails');
	like($err, qr/nothing was committed anywhere|stored 0 of the 1 rows/,
		'a held-back write failing inside an exception block: with the node\'s failure');
	is(placement('uniques', 'dropped-caught'), 'dropped-caught:-',
		'a held-back write failing inside an exception block: the row is nowhere');
	check_clean('a held-back write failing inside an exception block');
}

# A held-back write waits for a lock as long as the statement would (here:
# no statement_timeout), not only ringshard.node_timeout (2 s here): the
# second INSERT of a key waits for the first transaction, then works.
{
	my $s1 = $coordinator->background_psql('postgres', on_error_stop => 0);
	$s1->query_safe('BEGIN');
	$s1->query_safe(q{INSERT INTO uniques VALUES ('lock-wait-1', 'first')});
	my $second = start_script($coordinator, q{INSERT INTO uniques VALUES ('lock-wait-1', 'second');});
	my $deadline = time + 60;
	usleep(200_000) until $coordinator->safe_psql('postgres', q{
		SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%lock-wait-1%second%' AND state = 'active' AND pid <> pg_backend_pid()}) eq '1'
	  || time > $deadline;
	sleep(3);	# longer than ringshard.node_timeout
	$s1->query_safe('ROLLBACK');
	$s1->quit;
	is(finish_script($second), 0, 'a held-back write waiting for a lock past node_timeout: it works')
	  or diag($second->{stderr});
	is($coordinator->safe_psql('postgres', q{SELECT note FROM uniques WHERE id = 'lock-wait-1'}), 'second',
		'a held-back write waiting for a lock: its row is stored');
	is(placement('uniques', 'lock-wait-1'), expected_placement('all', 'default', 'lock-wait-1'),
		'a held-back write waiting for a lock: the row is on its replicas');
}
for my $w (@workers)
{
	$w->safe_psql('postgres', q{DROP TRIGGER skip_dropped ON public.uniques; DROP TRIGGER skip_dropped ON public.solo_uniques});
}

# With the setting off, the rows go first and the PREPARE alone.
@offsets = map { -s $_->logfile } @workers;
$coordinator->safe_psql('postgres', q{SET ringshard.writes_with_commit = off; INSERT INTO uniques VALUES ('alone-1', 'x')});
is(replicas_logged(qr/statement: PREPARE TRANSACTION 'rs_/), replica_list('alone-1', 'default'),
	'writes_with_commit off: each replica got the PREPARE alone');
is(placement('uniques', 'alone-1'), expected_placement('all', 'default', 'alone-1'), 'writes_with_commit off: the row is on its replicas');
recover();
check_clean('rows with the commit');

# ---------------------------------------------------------------------------
# 5. Two coordinators share the workers.  The second is given the first
# one's coordinator id, as a copy restored from a dump would have: only the
# system identifier tells them apart, and it must be enough.  A transaction
# of the first left in doubt after its local commit must not be touched by
# the second's recovery (it would roll it back: it has no record of it).

my $other = PostgreSQL::Test::Cluster->new('other_coordinator');
$other->init;
$other->start;
$other->safe_psql('postgres', 'CREATE EXTENSION ringshard');
$other->safe_psql('postgres', join('', map {
	sprintf("SELECT ringshard.add_node('%s', 'host=%s port=%d dbname=postgres');", $names[$_], $workers[$_]->host, $workers[$_]->port)
} 0 .. 2) . "UPDATE ringshard.cluster_state SET coordinator_id = '$coordinator_id';");

my @shared_keys = keys_for('shared');
($rc, $out, $err) = $coordinator->psql('postgres',
	"SET ringshard.fault_injection = 'after_local_commit=crash';\n" . insert_sql('shared', @shared_keys));
isnt($rc, 0, 'two coordinators: the first crashed after its local commit');
ok(wait_for_coordinator(), 'two coordinators: the first is back');
is(prepared_total(), 3, 'two coordinators: three parts in doubt');
is(recover($other), '0/0/0/0', 'two coordinators: the second\'s recovery resolves none of them');
is(prepared_total(), 3, 'two coordinators: they are still prepared');
is(recover(), '3/0/0/0', 'two coordinators: the first\'s recovery commits them');
is(placement('items', @shared_keys), expected_placement('all', 'default', @shared_keys),
	'two coordinators: the transaction is on all its replicas');
check_clean('two coordinators');
$other->stop;

# ---------------------------------------------------------------------------
# 3. Load, and the coordinator killed with SIGKILL in the middle of it;
# recovery is left to the watchdog.  Four clients (two of them with
# synchronous_commit off), each a sequence of two-row transactions (two or
# three nodes each) with unique labels; a client prints a label once its
# COMMIT returned success.  Two rounds: the postmaster alone is killed (its
# backends leave when they notice, aborting what they can), then the
# postmaster and every process it started at once (nothing gets to clean
# up).  Afterwards: every transaction a client saw commit is complete on
# every replica, one that failed is nowhere, the one in flight when the
# connection dropped is all or nothing, and none was sent after it.  This
# runs last: the watchdog needs a restart to start, and the cases above need
# it absent.

$coordinator->append_conf('postgresql.conf', q{
ringshard.watchdog_database = 'postgres'
ringshard.watchdog_interval = '200ms'
});
$coordinator->restart;
ok($coordinator->poll_query_until('postgres',
	q{SELECT count(*) > 0 FROM pg_stat_activity WHERE backend_type = 'ringshard watchdog'}),
	'load: the watchdog runs');

sub load_round
{
	my ($round, $prefix, $kill_all) = @_;
	my $nclients = 4;
	my $per_client = 2000;
	my @clients;
	for my $c (1 .. $nclients)
	{
		# a distributed commit must be durable before any node commits its
		# part, whatever the client asked for
		my $script = $c % 2 ? '' : "SET synchronous_commit = off;\n";
		for my $i (1 .. $per_client)
		{
			my $t = "$prefix$c-$i";
			# one statement, one transaction: it succeeds only if it committed
			$script .= "INSERT INTO items VALUES ('$t-a', '$t', 'load'), ('$t-b', '$t', 'load');\n"
			  . "\\if :ERROR\n\\echo failed $t\n\\else\n\\echo committed $t\n\\endif\n";
		}
		push @clients, start_script($coordinator, $script, on_error_stop => 0);
	}
	my $confirmed_so_far = sub {
		my $n = 0;
		for my $client (@clients)
		{
			$client->{handle}->pump_nb if $client->{handle}->pumpable;
			$n += () = $client->{stdout} =~ /^committed /mg;
		}
		return $n;
	};
	my $deadline = time + 60;
	usleep(20_000) while $confirmed_so_far->() < 150 && time < $deadline;
	my @children = $kill_all
	  ? split(/\n/, $coordinator->safe_psql('postgres', 'SELECT pid FROM pg_stat_activity WHERE pid <> pg_backend_pid()'))
	  : ();
	my $old_pid = $coordinator->{_pid};
	$coordinator->kill9;
	kill 'KILL', @children if @children;
	my $confirmed_at_kill = $confirmed_so_far->();
	finish_script($_) for @clients;
	my $in_doubt_at_kill = prepared_total();
	ok(restart_killed_coordinator($old_pid), "$round: the coordinator starts again");

	# The watchdog finishes what the kill left in doubt (bounded wait).
	$deadline = time + 60;
	usleep(200_000) while (prepared_total() > 0
		|| $coordinator->safe_psql('postgres', 'SELECT count(*) FROM ringshard.transaction_records') > 0)
	  && time < $deadline;
	is(prepared_total(), 0, "$round: the watchdog left no prepared transaction on any worker");
	is(recover(), '0/0/0/0', "$round: an explicit recovery afterwards finds nothing");
	check_clean($round);

	# What each client saw: the outcome of every label it printed, and the
	# label in flight (the one after its last line), whose outcome it never
	# learned.
	my (%seen, %in_flight, %attempted);
	for my $c (1 .. $nclients)
	{
		my $last = 0;
		for my $line (split /\n/, $clients[ $c - 1 ]->{stdout})
		{
			next unless $line =~ /^(committed|failed) (\Q$prefix\E(\d+)-(\d+))$/;
			$seen{$2} = $1;
			$last = $4;
		}
		$in_flight{"$prefix$c-" . ($last + 1)} = 1 if $last < $per_client;
		$attempted{"$prefix$c-$_"} = 1 for 1 .. $last + 1;
	}
	my $committed = grep { $seen{$_} eq 'committed' } keys %seen;
	cmp_ok($committed, '>=', 150, "$round: the clients saw $committed commits before the kill");

	# Every copy of every row of the round, read on the workers.
	my %copies;
	for my $i (0 .. 2)
	{
		for my $row (split /\n/, $workers[$i]->safe_psql('postgres',
			"SELECT id, txn, count(*) FROM items WHERE note = 'load' AND txn LIKE '$prefix%' GROUP BY id, txn"))
		{
			my ($id, $txn, $n) = split /\|/, $row;
			$copies{$id}{ $names[$i] } = $n;
			$attempted{$txn} //= 0;    # a row of a label never sent shows up below
		}
	}
	my @labels = sort keys %attempted;
	my %replicas = map { split /\|/ } split /\n/, $coordinator->safe_psql('postgres',
		'SELECT id, string_agg(n, \'+\' ORDER BY n) FROM unnest(ARRAY['
		  . join(',', map { "'$_-a', '$_-b'" } @labels)
		  . ']) id, unnest(replicas_for(id)) n GROUP BY id');
	my (@wrong, %outcome);
	for my $label (@labels)
	{
		my ($complete, $absent) = (1, 1);
		for my $id ("$label-a", "$label-b")
		{
			my $where = join('+',
				map { $copies{$id}{$_} == 1 ? $_ : "${_}x$copies{$id}{$_}" } sort keys %{ $copies{$id} // {} });
			$complete = 0 unless $where eq $replicas{$id};
			$absent = 0 unless $where eq '';
		}
		my $state = $complete ? 'complete' : $absent ? 'absent' : 'partial';
		$outcome{$label} = $state;
		my $client_saw = $seen{$label}
		  // ($in_flight{$label} ? 'in flight' : $attempted{$label} ? 'unknown' : 'never sent');
		push @wrong, "$label ($client_saw): $state"
		  if $state eq 'partial'
		  || ($client_saw eq 'committed' && $state ne 'complete')
		  || ($client_saw eq 'failed' && $state ne 'absent')
		  || ($client_saw eq 'never sent' && $state ne 'absent');
	}
	is(join('; ', @wrong), '', "$round: every transaction is where its client saw it go, and all or nothing");
	note(sprintf('%s: %d confirmed at the kill, %d in the end; %d parts left in doubt; in flight: %s',
		$round, $confirmed_at_kill, $committed, $in_doubt_at_kill,
		join(', ', map { "$_ $outcome{$_}" } sort keys %in_flight)));
}

load_round('load, postmaster killed', 'P', 0);
load_round('load, every coordinator process killed', 'A', 1);

done_testing();

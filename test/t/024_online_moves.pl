# Topology changes while the table is in use (issue 19): four pgbench clients
# run key-based INSERTs, UPDATEs, DELETEs, SELECTs and two-key transfers
# against a distributed table at R = 2, each statement mirrored in the same
# transaction on a local table of the coordinator, while a fourth worker is
# added and the table rebalanced, then a worker removed and the table
# rebalanced, and the coordinator is SIGKILLed in the middle of that second
# move (the move is then resumed with the clients running again); then, at
# R = 1, a third worker is removed, whose rows only it holds until the move
# has copied them.  Every SELECT compares the distributed row with its
# mirror and fails the transaction if they differ (a missed or stale read).  At the end: the
# distributed table equals its mirror row for row (nothing lost, nothing
# brought back), every replica holds the same rows, and every row is on
# exactly its replicas, once.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $coordinator = PostgreSQL::Test::Cluster->new('coordinator');
my @workers = map { PostgreSQL::Test::Cluster->new("m$_") } 1 .. 4;
for my $node ($coordinator, @workers)
{
	$node->init;
	$node->append_conf('postgresql.conf',
		"max_prepared_transactions = 40\nmax_connections = 60\nshared_preload_libraries = 'ringshard'");
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION ringshard');
}
$coordinator->append_conf('postgresql.conf', "deadlock_timeout = '200ms'");
$coordinator->reload;
my %address = map { ("m$_" => sprintf('host=%s port=%d dbname=postgres', $workers[ $_ - 1 ]->host, $workers[ $_ - 1 ]->port)) } 1 .. 4;

$coordinator->safe_psql('postgres', qq{
	SELECT ringshard.add_node('m1', '$address{m1}');
	SELECT ringshard.add_node('m2', '$address{m2}');
	SELECT ringshard.add_node('m3', '$address{m3}');
	SELECT ringshard.set_replication_factor('default', 2);
	SELECT count(*) FROM ringshard.sync_topology();
	CREATE TABLE acct (id bigint PRIMARY KEY, balance bigint NOT NULL, note text);
	SELECT ringshard.distribute_table('acct', 'id');
	SELECT count(*) FROM ringshard.create_distributed_table('acct');
	INSERT INTO acct SELECT g, 1000, 'start' FROM generate_series(1, 3000) g;
	CREATE TABLE acct_mirror (id bigint PRIMARY KEY, balance bigint NOT NULL, note text);
	INSERT INTO acct_mirror SELECT g, 1000, 'start' FROM generate_series(1, 3000) g;
});

my $tmp = PostgreSQL::Test::Utils::tempdir;
# The clients' scripts (pgbench -M simple: the keys reach the planner as
# constants, cast to the key's type so that each statement is routed by its
# key).  Each client writes and reads its own keys only (the key minus
# one is the client's number modulo 4): its reads must then see exactly its
# own last writes, and a read that does not (a missed or stale row) fails the
# transaction (1/0), whatever the other clients commit meanwhile.
my %scripts = (
	# two keys of the client's own
	transfer => q{
\set a 4 * random(0, 749) + :client_id + 1
\set b 4 * random(0, 749) + :client_id + 1
BEGIN;
UPDATE acct SET balance = balance - 1 WHERE id = :a::bigint;
UPDATE acct SET balance = balance + 1 WHERE id = :b::bigint;
UPDATE acct_mirror SET balance = balance - 1 WHERE id = :a::bigint;
UPDATE acct_mirror SET balance = balance + 1 WHERE id = :b::bigint;
END;
},
	insert => q{
\set k 4 * random(25000, 250000000000) + :client_id + 1
BEGIN;
INSERT INTO acct VALUES (:k, :k % 1000, 'inserted');
INSERT INTO acct_mirror VALUES (:k, :k % 1000, 'inserted');
END;
},
	delete => q{
\set k 4 * random(0, 749) + :client_id + 1
BEGIN;
DELETE FROM acct WHERE id = :k::bigint;
DELETE FROM acct_mirror WHERE id = :k::bigint;
END;
},
	note => q{
\set k 4 * random(0, 749) + :client_id + 1
BEGIN;
UPDATE acct SET note = 'noted-' || :client_id WHERE id = :k::bigint;
UPDATE acct_mirror SET note = 'noted-' || :client_id WHERE id = :k::bigint;
END;
},
	# a read by key finds the row exactly as the client last wrote it (or neither)
	select => q{
\set k 4 * random(0, 749) + :client_id + 1
SELECT coalesce((SELECT hashtext(balance || '|' || note) FROM acct WHERE id = :k::bigint), 0) AS got \gset
SELECT coalesce((SELECT hashtext(balance || '|' || note) FROM acct_mirror WHERE id = :k::bigint), 0) AS want \gset
SELECT CASE WHEN :got = :want THEN 1 ELSE 1 / 0 END;
},
);
my @files;
for my $name (sort keys %scripts)
{
	my $file = "$tmp/$name.sql";
	open my $fh, '>', $file or die;
	print $fh $scripts{$name};
	close $fh;
	push @files, '-f', $file . ($name eq 'transfer' ? '@4' : $name eq 'select' ? '@4' : '@1');
}

# Four clients for at most $seconds, in the background: (handle, stdout ref, stderr ref).
sub start_clients
{
	my ($seconds) = @_;
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start([ 'pgbench', '-n', '-M', 'simple', '-c', 4, '-j', 2, '-T', $seconds, '--max-tries', 50,
							  '--failures-detailed', '-h', $coordinator->host, '-p', $coordinator->port, @files, 'postgres' ],
							'>', \$out, '2>', \$err, IPC::Run::timeout($seconds + 120));
	return ($h, \$out, \$err);
}

# A move with the clients running: the change, then the rebalance paced to
# take several seconds; the clients' failures (other than retried ones).
sub move_under_load
{
	my ($label, $change) = @_;
	my ($h, $out, $err) = start_clients(30);
	usleep(1_000_000);
	$coordinator->safe_psql('postgres', $change);
	$coordinator->safe_psql('postgres', 'SELECT count(*) FROM ringshard.sync_topology()');
	my ($rc, $o, $e) = $coordinator->psql('postgres', q{CALL ringshard.rebalance('acct', batch => 20, pause_ms => 50)});
	is($rc, 0, "$label: the rebalance finishes with four clients writing") or diag($e);
	$h->finish;
	my ($failed) = $$out =~ /number of failed transactions: (\d+)/;
	my ($processed) = $$out =~ /number of transactions actually processed: (\d+)/;
	is($failed, 0, "$label: no client transaction failed (reads all matched their mirror)") or diag("$$out\n$$err");
	cmp_ok($processed // 0, '>', 100, "$label: the clients ran (" . ($processed // 0) . ' transactions)');
	unlike($$err, qr/aborted|ERROR/, "$label: no client aborted") or diag($$err);
}

# The table against its mirror; and, unless in the middle of a move, every
# replica and every row's place.
sub table_equals_mirror
{
	my ($label, $mid_move, $copies_per_row) = @_;
	$copies_per_row //= 2;
	is($coordinator->safe_psql('postgres', q{
		SELECT count(*) FROM (SELECT * FROM acct) a FULL JOIN acct_mirror m USING (id)
		 WHERE a.id IS NULL OR m.id IS NULL OR (a.balance, a.note) IS DISTINCT FROM (m.balance, m.note)}),
		'0', "$label: the table equals its mirror row for row (0 lost, 0 brought back, 0 stale)");
	return if $mid_move;
	is($coordinator->safe_psql('postgres', q{SELECT count(*) FROM ringshard.verify_table('acct')}), '0',
		"$label: every replica holds the same rows");
	my $nodes = $coordinator->safe_psql('postgres',
		q{SELECT string_agg(node, ' ' ORDER BY node) FROM ringshard.table_nodes WHERE table_name = 'acct'::regclass});
	my $misplaced = 0;
	my $copies = 0;
	for my $n (split / /, $nodes)
	{
		my ($i) = $n =~ /m(\d)/;
		my $ids = $workers[ $i - 1 ]->safe_psql('postgres', 'SELECT coalesce(string_agg(id::text, \',\'), \'0\') FROM acct');
		$copies += scalar(grep { $_ ne '0' } split /,/, $ids);
		$misplaced += $coordinator->safe_psql('postgres',
			"SELECT count(*) FROM unnest('{$ids}'::bigint[]) k WHERE k <> 0 AND NOT '$n' = ANY (replicas_for(k))");
	}
	is($misplaced, 0, "$label: every row is only on its replicas");
	is($copies, $copies_per_row * $coordinator->safe_psql('postgres', 'SELECT count(*) FROM acct_mirror'),
		"$label: $copies_per_row copies of each row ($copies)");
}

# Add a fourth worker and move.
move_under_load('add m4', "SELECT ringshard.add_node('m4', '$address{m4}')");
table_equals_mirror('after adding m4');

# Remove m2 and move; SIGKILL the coordinator in the middle of the move.
{
	my ($h, $out, $err) = start_clients(60);
	usleep(1_000_000);
	$coordinator->safe_psql('postgres', q{SELECT ringshard.remove_node('m2')});
	$coordinator->safe_psql('postgres', 'SELECT count(*) FROM ringshard.sync_topology()');
	my $mover = $coordinator->background_psql('postgres', on_error_stop => 0);
	$mover->query_until(qr/started/, q{
		\echo started
		CALL ringshard.rebalance('acct', batch => 10, pause_ms => 150);
	});
	ok($coordinator->poll_query_until('postgres',
		q{SELECT count(*) FILTER (WHERE state <> 'pending') > 20 FROM ringshard.rebalance_progress}),
		'remove m2: the move makes progress with the clients running (more than 20 steps copied)');
	my $killed_pid = $coordinator->{_pid};
	$coordinator->kill9;
	eval { $mover->quit };
	eval { $h->finish };
	for (1 .. 300)
	{
		last unless kill(0, $killed_pid);
		usleep(100_000);
	}
	$coordinator->start;
	# the transactions in flight at the kill: each commits or rolls back whole, on every node
	$coordinator->safe_psql('postgres', 'SELECT count(*) FROM ringshard.recover_prepared_transactions()');
	is($coordinator->safe_psql('postgres', q{SELECT count(*) > 0 FROM ringshard.rebalance_progress WHERE state <> 'done'}), 't',
		'remove m2: the killed move left its unfinished steps');
	table_equals_mirror('remove m2, after the coordinator was killed in the middle of the move', 1);
}
# Resume the move with the clients running again.
{
	my ($h, $out, $err) = start_clients(30);
	usleep(1_000_000);
	my ($rc, $o, $e) = $coordinator->psql('postgres', q{CALL ringshard.rebalance('acct', batch => 20, pause_ms => 50)});
	is($rc, 0, 'remove m2: calling rebalance again resumes and finishes the move with the clients running') or diag($e);
	$h->finish;
	my ($failed) = $$out =~ /number of failed transactions: (\d+)/;
	is($failed, 0, 'remove m2, resumed: no client transaction failed') or diag("$$out\n$$err");
	unlike($$err, qr/aborted|ERROR/, 'remove m2, resumed: no client aborted') or diag($$err);
}
table_equals_mirror('after removing m2');
is($workers[1]->safe_psql('postgres', 'SELECT count(*) FROM acct'), '0', 'm2 holds no rows any more');

# One copy of each row, then remove m3: until the move has copied them, the
# rows only m3 holds are read and written there (it keeps its address until
# then), and the clients see no error.
move_under_load('R = 1', q{SELECT ringshard.set_replication_factor('default', 1)});
table_equals_mirror('at R = 1', 0, 1);
move_under_load('remove m3 at R = 1', q{SELECT ringshard.remove_node('m3')});
table_equals_mirror('after removing m3 at R = 1', 0, 1);
is($workers[2]->safe_psql('postgres', 'SELECT count(*) FROM acct'), '0', 'm3 holds no rows any more');
is($coordinator->safe_psql('postgres', q{SELECT count(*) FROM ringshard.nodes WHERE node_name = 'm3'}), '0',
	'm3 is forgotten once the move is done');

$_->stop for ($coordinator, @workers);
done_testing();

# A coordinator backend that dies (kill -9) while its node backends wait for
# a lock on the nodes leaves nothing behind on them: each node backend
# notices within a second that its client is gone and rolls back, so it
# holds no row locks while it would go on waiting, and it never runs the
# rest of its query string later (a PREPARE TRANSACTION after recovery has
# looked would hold its rows' locks until someone resolved it by hand).
#
#  1. An UPDATE by key at R = 2 waits on w1 for a row a local session holds;
#     its coordinator backend is killed: the node backend goes, while the
#     local session still holds the row; nothing changed on either replica.
#  2. An INSERT whose row travels with the commit waits on w1 for a key a
#     local session inserted and has not committed (its PREPARE TRANSACTION
#     comes after the INSERT in the same query string); the coordinator
#     backend is killed, recovery runs: the node backend goes; once the local
#     session rolls back, no prepared transaction is left on either worker,
#     and the key is on neither.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use RingshardTestCluster qw(start_servers);

# A backend killed: the postmaster restarts the server (the test framework turns it off).
my ($coordinator, $w1, $w2) = start_servers(workers => [qw(w1 w2)], coordinator_conf => 'restart_after_crash = on');
my @workers = ($w1, $w2);

$coordinator->safe_psql('postgres', sprintf(q{
	SELECT ringshard.add_node('w1', 'host=%s port=%d dbname=postgres');
	SELECT ringshard.add_node('w2', 'host=%s port=%d dbname=postgres');
	SELECT ringshard.set_replication_factor('default', 2);
	SELECT count(*) FROM ringshard.sync_topology();
	CREATE TABLE crash (k int PRIMARY KEY, v int NOT NULL);
	SELECT ringshard.distribute_table('crash', 'k');
	SELECT count(*) FROM ringshard.create_distributed_table('crash');
	INSERT INTO crash SELECT g, 0 FROM generate_series(1, 10) g;
}, $w1->host, $w1->port, $w2->host, $w2->port));

# Backends on a worker waiting for a lock, other than the local holder's.
my $lock_waiters = q{(SELECT count(*) FROM pg_stat_activity
	WHERE wait_event_type = 'Lock' AND backend_type = 'client backend' AND pid <> pg_backend_pid())};

# Kill a coordinator backend with SIGKILL and wait until the coordinator
# (reinitialized by its postmaster) takes connections again.
sub kill_backend
{
	my ($pid) = @_;
	my $offset = -s $coordinator->logfile;
	kill 'KILL', $pid;
	# the postmaster has ended every backend (a session may connect before it starts to)
	$coordinator->wait_for_log(qr/all server processes terminated; reinitializing/, $offset);
	$coordinator->poll_query_until('postgres', 'SELECT true')
	  or die 'the coordinator did not come back';
}

# 1. An UPDATE waiting for a row lock on w1.
{
	my $holder = $w1->background_psql('postgres');
	$holder->query_safe('BEGIN');
	$holder->query_safe('SELECT v FROM public.crash WHERE k = 1 FOR UPDATE');

	my $writer = $coordinator->background_psql('postgres', on_error_stop => 0);
	my $pid = $writer->query_safe('SELECT pg_backend_pid()');
	$writer->query_until(qr/sent/, "\\echo sent\nUPDATE crash SET v = v + 1 WHERE k = 1;\n");
	ok($w1->poll_query_until('postgres', "SELECT $lock_waiters > 0", 't'),
		'update: the node backend waits on w1 for the row the local session holds');

	kill_backend($pid);
	eval { $writer->quit };
	ok($w1->poll_query_until('postgres', "SELECT $lock_waiters = 0", 't'),
		'update: once its coordinator backend is killed, the node backend stops waiting (the row is still held)');
	is($holder->query_safe('SELECT count(*) FROM pg_locks WHERE granted AND pid = pg_backend_pid() AND locktype = \'transactionid\''),
		'1', 'update: the local session still holds its transaction (the wait ended on the node backend\'s side)');
	$holder->query_safe('COMMIT');
	$holder->quit;

	is($w1->safe_psql('postgres', 'SELECT v FROM crash WHERE k = 1') . '/' .
	   $w2->safe_psql('postgres', 'SELECT v FROM crash WHERE k = 1'), '0/0',
		'update: the killed UPDATE changed neither replica');
	is($w1->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts') . '/' .
	   $w2->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts'), '0/0',
		'update: no prepared transaction on either worker');
}

# 2. A row that travels with the commit, waiting on w1 for a key a local
# session inserted and has not committed.
{
	my $holder = $w1->background_psql('postgres');
	$holder->query_safe('BEGIN');
	$holder->query_safe('INSERT INTO public.crash VALUES (100, -1)');

	my $writer = $coordinator->background_psql('postgres', on_error_stop => 0);
	my $pid = $writer->query_safe('SELECT pg_backend_pid()');
	$writer->query_until(qr/sent/, "\\echo sent\nBEGIN;\nINSERT INTO crash VALUES (100, 1);\nCOMMIT;\n");
	ok($w1->poll_query_until('postgres', "SELECT $lock_waiters > 0", 't'),
		'insert: the commit\'s rows wait on w1 for the key the local session inserted');

	kill_backend($pid);
	eval { $writer->quit };
	$coordinator->safe_psql('postgres', 'SELECT count(*) FROM ringshard.recover_prepared_transactions()');
	ok($w1->poll_query_until('postgres', "SELECT $lock_waiters = 0", 't'),
		'insert: once its coordinator backend is killed, the node backend stops waiting');
	# Were the node backend still there, the INSERT would go on now, and
	# the PREPARE TRANSACTION after it.
	$holder->query_safe('ROLLBACK');
	$holder->quit;
	$coordinator->safe_psql('postgres', 'SELECT count(*) FROM ringshard.recover_prepared_transactions()');
	is($w1->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts') . '/' .
	   $w2->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts'), '0/0',
		'insert: no prepared transaction is left on either worker');
	is($w1->safe_psql('postgres', 'SELECT count(*) FROM crash WHERE k = 100') . '/' .
	   $w2->safe_psql('postgres', 'SELECT count(*) FROM crash WHERE k = 100'), '0/0',
		'insert: the killed INSERT is on neither replica');
	is($coordinator->safe_psql('postgres', 'SELECT count(*) FROM crash'), '10',
		'the table reads its 10 rows through the coordinator');
}

$_->stop for ($coordinator, @workers);
done_testing();

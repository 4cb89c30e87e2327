# An UPDATE or DELETE is acknowledged only if every replica that took it
# changed the same rows.  The attack, as 020_failover.pl met it: a
# transaction's INSERT committed on one replica and still prepared (in
# doubt) on the other, whose primary died during COMMIT PREPARED; the next
# UPDATE of that row found it on one replica only (a prepared insert is
# invisible, and nothing waits for it), the coordinator counted the row on
# the replica that had it and acknowledged, and recovery then committed the
# insert without the update: the replicas differed for good.
#
# Here the in-doubt part is made by hand on a worker (the row inserted and
# prepared there, committed on the other replica), which is exactly the
# state the failover left.  Then, at R = 2 on three workers:
#  1. UPDATE and DELETE by key, the row in doubt on its first replica or on
#     its second, and UPDATE ... RETURNING, and a fan-out UPDATE: each fails
#     with SQLSTATE 40001, and no replica changed.
#  2. Once the prepared part is committed, the same statements succeed, on
#     every replica, and verify_table finds the replicas equal.
#  3. No false alarm: writes by key, by several keys, fan-out and RETURNING
#     count each row once while every replica agrees, also with a node down
#     (its copy of the change queued) and while it is delivered.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use RingshardTestCluster qw(start_servers add_workers);

my ($coordinator, @workers) = start_servers(workers => [qw(w1 w2 w3)]);
my %worker = map { ($_->name => $_) } @workers;
add_workers($coordinator, @workers);
$coordinator->safe_psql('postgres', q{
	SELECT ringshard.set_replication_factor('default', 2);
	SELECT count(*) FROM ringshard.sync_topology();
	CREATE TABLE acct (k bigint PRIMARY KEY, v int NOT NULL);
	SELECT ringshard.distribute_table('acct', 'k');
	SELECT count(*) FROM ringshard.create_distributed_table('acct');
	INSERT INTO acct SELECT g, 0 FROM generate_series(1, 30) g;
});

# A key's replicas, first first.
sub replicas
{
	my ($k) = @_;
	return split /,/, $coordinator->safe_psql('postgres',
		"SELECT array_to_string(replicas_for(${k}::bigint), ',')");
}

# The row of key $k as each of its replicas holds it ("first/second"; '-' for none).
sub copies
{
	my ($k) = @_;
	return join('/', map {
		my $v = $worker{$_}->safe_psql('postgres', "SELECT v FROM public.acct WHERE k = $k");
		$v eq '' ? '-' : $v
	} replicas($k));
}

# The row of key $k, value 0, committed on one of its replicas and prepared
# (in doubt) on the other, as a transaction whose commit reached only one.
sub in_doubt
{
	my ($k, $doubt_on) = @_;
	my ($first, $second) = replicas($k);
	my ($doubtful, $committed) = $doubt_on eq 'first' ? ($first, $second) : ($second, $first);
	$worker{$committed}->safe_psql('postgres', "INSERT INTO public.acct VALUES ($k, 0)");
	$worker{$doubtful}->safe_psql('postgres',
		"BEGIN; INSERT INTO public.acct VALUES ($k, 0); PREPARE TRANSACTION 'in_doubt_$k';");
	return $doubtful;
}

sub commit_in_doubt
{
	my ($node, $k) = @_;
	$worker{$node}->safe_psql('postgres', "COMMIT PREPARED 'in_doubt_$k'");
}

# Runs $sql on the coordinator: (status, stdout, stderr) with the SQLSTATE shown.
sub run
{
	my ($sql) = @_;
	my ($rc, $out, $err) = $coordinator->psql('postgres', "\\set VERBOSITY verbose\n$sql");
	return ($rc, $out, $err);
}

# --- 1. a row that one replica cannot see fails the change -----------------

my $sum_all = q{SELECT coalesce(sum(v), 0) || ':' || count(*) FROM public.acct};
my %before;

for my $case (
	[ 101, 'first',  "UPDATE acct SET v = 1 WHERE k = 101", 'UPDATE by key' ],
	[ 102, 'second', "UPDATE acct SET v = 1 WHERE k = 102", 'UPDATE by key' ],
	[ 103, 'first',  "DELETE FROM acct WHERE k = 103", 'DELETE by key' ],
	[ 104, 'second', "DELETE FROM acct WHERE k = 104", 'DELETE by key' ],
	[ 105, 'second', "UPDATE acct SET v = 1 WHERE k = 105 RETURNING k, v", 'UPDATE ... RETURNING by key' ],
	[ 106, 'first',  "UPDATE acct SET v = v + 1 WHERE v >= 0", 'a fan-out UPDATE' ],
	[ 107, 'second', "DELETE FROM acct WHERE k IN (1, 2, 3, 107)", 'DELETE of several keys' ])
{
	my ($k, $where, $sql, $what) = @$case;
	my $doubtful = in_doubt($k, $where);
	%before = map { ($_ => $worker{$_}->safe_psql('postgres', $sum_all)) } keys %worker;
	my ($rc, $out, $err) = run($sql);
	isnt($rc, 0, "$what, the row in doubt on its $where replica: it fails");
	like($err, qr/ERROR:  40001: the replicas of table acct changed different rows/,
		"$what, in doubt on the $where replica: a serialization failure that says the replicas differed")
	  or diag($err);
	like($err, qr/HINT:  Nothing was changed\./, "$what: the hint says nothing was changed");
	is(join(' ', map { $worker{$_}->safe_psql('postgres', $sum_all) } sort keys %worker),
		join(' ', map { $before{$_} } sort keys %worker), "$what: no replica changed");
	is(copies($k), $where eq 'first' ? '-/0' : '0/-', "$what: the row is still seen by one replica only");
	commit_in_doubt($doubtful, $k);
	is(copies($k), '0/0', "$what: once its part is committed, both replicas hold the row");
	($rc, $out, $err) = run($sql);
	is($rc, 0, "$what: the same statement succeeds then") or diag($err);
	my $expect = $sql =~ /^DELETE/ ? '-/-' : '1/1';
	is(copies($k), $expect, "$what: and changed both replicas ($expect)");
	$coordinator->safe_psql('postgres', 'UPDATE acct SET v = 0');
}
is($coordinator->safe_psql('postgres', q{SELECT count(*) FROM ringshard.verify_table('acct')}), '0',
	'verify_table finds every replica equal after the retries');
is(join('', map { $_->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts') } @workers), '000',
	'no prepared transaction is left');

# --- 3. no false alarm ------------------------------------------------------

my $rows = $coordinator->safe_psql('postgres', 'SELECT count(*) FROM acct');
my ($rc, $out, $err) = run('UPDATE acct SET v = v + 1');
like($out . $err, qr/^$/, 'a fan-out UPDATE of every row says nothing') or diag($err);
is($coordinator->safe_psql('postgres', 'SELECT sum(v) || \'/\' || count(*) FROM acct'), "$rows/$rows",
	'... and changed each row once');
is($coordinator->safe_psql('postgres', 'WITH u AS (UPDATE acct SET v = v + 1 WHERE k IN (4, 5, 6, 7) RETURNING k) SELECT count(*) FROM u'),
	'4', 'UPDATE ... RETURNING of four keys returns each row once');
is($coordinator->safe_psql('postgres', 'WITH d AS (DELETE FROM acct WHERE v = 2 RETURNING k) SELECT string_agg(k::text, \',\' ORDER BY k) FROM d'),
	'4,5,6,7', 'a fan-out DELETE ... RETURNING returns each row once');
$coordinator->safe_psql('postgres', 'INSERT INTO acct SELECT g, 1 FROM generate_series(4, 7) g');

# a node down: its copy of each change is queued, and the other replica's count stands
$coordinator->safe_psql('postgres', q{SELECT ringshard.mark_node_down('w3')});
($rc, $out, $err) = run('UPDATE acct SET v = v + 10 WHERE v < 100');
is($rc, 0, 'with w3 down, a fan-out UPDATE succeeds') or diag($err);
is($coordinator->safe_psql('postgres', 'SELECT count(*) FROM acct WHERE v = 11'), $rows,
	'... and changed each row once');
my @on_w3 = grep { (replicas($_))[0] eq 'w3' || (replicas($_))[1] eq 'w3' } 8 .. 30;
($rc, $out, $err) = run("UPDATE acct SET v = v + 100 WHERE k = $on_w3[0]");
is($rc, 0, "with w3 down, an UPDATE of key $on_w3[0], one of whose replicas is w3, succeeds") or diag($err);
# w3 is reachable: a round of the watchdog delivers its queue and marks it up
my $delivered = '';
for (1 .. 20)
{
	$coordinator->safe_psql('postgres', 'SELECT count(*) FROM ringshard.watchdog_tick()');
	$delivered = $coordinator->safe_psql('postgres',
		q{SELECT (SELECT count(*) FROM ringshard.write_queue WHERE node_name = 'w3') || '/' ||
		         (SELECT is_up FROM ringshard.nodes WHERE node_name = 'w3')});
	last if $delivered eq '0/true';
	sleep 1;
}
is($delivered, '0/true', 'the watchdog delivers w3\'s queued changes and marks it up');
is($coordinator->safe_psql('postgres', q{SELECT count(*) FROM ringshard.verify_table('acct')}), '0',
	'once w3\'s queue is delivered, every replica is equal');
is(copies($on_w3[0]), '111/111', "key $on_w3[0] holds the change on both replicas");

# A transaction that keeps one snapshot reads a key on the same replica each
# time: each node takes its own snapshot at the transaction's first
# statement there, so a key read on one replica and then on the other could
# show an older value after a newer one (a REPEATABLE READ read going back).
for my $case ([ 'REPEATABLE READ', 1001 ], [ 'SERIALIZABLE', 1002 ])
{
	my ($level, $k) = @$case;
	$coordinator->safe_psql('postgres', "INSERT INTO acct VALUES ($k, 0)");
	my $reader = $coordinator->background_psql('postgres');
	$reader->query_safe("BEGIN ISOLATION LEVEL $level");
	my $first = $reader->query_safe("SELECT v FROM acct WHERE k = $k");
	my (@seen, @whole);
	for my $i (1 .. 12)
	{
		$coordinator->safe_psql('postgres', "UPDATE acct SET v = v + 1 WHERE k = $k");
		push @seen, $reader->query_safe("SELECT v FROM acct WHERE k = $k");
		# sent whole to one replica of the key (a router statement)
		push @whole, $reader->query_safe("WITH r AS (SELECT v FROM acct WHERE k = $k) SELECT max(v) FROM r");
	}
	$reader->query_safe('COMMIT');
	$reader->quit;
	is(join(',', @seen), join(',', ($first) x 12),
		"$level: a key read 12 times while other sessions change it shows the value of the first read");
	is(join(',', @whole), join(',', ($first) x 12), "$level: ... and so does a statement on the key sent whole");
	is($coordinator->safe_psql('postgres', "SELECT v FROM acct WHERE k = $k"), '12', "$level: the changes are all there afterwards");
}

# The replica is the key's first, whatever else the transaction opened, and
# the one a fan-out reads the key on: keys A (replicas p, q), B (first
# replica q) and D (first replica p).  Read B (the transaction opens q),
# read A, let another session change A, read D (opens p, after the change),
# read A again, and read it by a fan-out: all three reads of A show the
# same value.  (Preferring a replica the transaction had opened read A on q
# first, then on p: 0, then 1.)
{
	$coordinator->safe_psql('postgres', 'INSERT INTO acct SELECT g, 0 FROM generate_series(2001, 2100) g');
	my %first;
	my %pair;
	for my $k (2001 .. 2100)
	{
		my @r = replicas($k);
		$first{$k} = $r[0];
		$pair{$k} = "$r[0] $r[1]";
	}
	my ($a, $b, $d);
	for my $k (2001 .. 2100)
	{
		my ($p, $q) = split / /, $pair{$k};
		my ($kb) = grep { $first{$_} eq $q && $_ != $k } 2001 .. 2100;
		my ($kd) = grep { $first{$_} eq $p && $_ != $k && !grep({ $_ eq $q } split / /, $pair{$_}) } 2001 .. 2100;
		if (defined $kb && defined $kd)
		{
			($a, $b, $d) = ($k, $kb, $kd);
			last;
		}
	}
	die 'no keys A, B, D' unless defined $d;
	for my $level ('REPEATABLE READ', 'SERIALIZABLE')
	{
		my $reader = $coordinator->background_psql('postgres');
		$reader->query_safe("BEGIN ISOLATION LEVEL $level");
		$reader->query_safe("SELECT v FROM acct WHERE k = $b");
		my $first_read = $reader->query_safe("SELECT v FROM acct WHERE k = $a");
		$coordinator->safe_psql('postgres', "UPDATE acct SET v = v + 1 WHERE k = $a");
		$reader->query_safe("SELECT v FROM acct WHERE k = $d");
		my $second_read = $reader->query_safe("SELECT v FROM acct WHERE k = $a");
		my $fanout = $reader->query_safe("SELECT v FROM acct WHERE k + 0 = $a");
		$reader->query_safe('COMMIT');
		$reader->quit;
		is("$second_read/$fanout", "$first_read/$first_read",
			"$level: a key read again after the transaction opened its other replica, and read by a fan-out, shows the first value");
	}
}

$_->stop for ($coordinator, @workers);
done_testing();

# rehome_rows() moves rows node to node by COPY, and copies a row only to a
# replica that lacks an identical one (docs/design.md, "Rehoming rows").
#
# A coordinator and three workers, R = 2.  Rows written through the
# coordinator sit on their replicas; then rows are planted by hand on the
# one worker that is not a replica of their key (as 1.0 left rows whose key
# bytes changed), some of them also on one of their replicas already, one
# of them twice.  The rows hold values whose text depends on session
# settings (dates, a numeric's scale, a float that needs 17 digits, a time
# with a zone, bytes, text beyond ASCII, an interval), and the workers' databases default
# to other DateStyle, TimeZone, extra_float_digits, bytea_output and IntervalStyle:
#  1. rehome_rows (small batches, the calling session in DateStyle SQL, DMY)
#     says how many rows it moved and how many copies it made: one per
#     replica that lacked the row, none where an identical row was;
#  2. every worker then holds exactly the rows it is a replica of, each
#     value as written, with no duplicate (the twice-planted row twice on
#     each replica, as it was twice on its node);
#  3. a second run finds nothing to move;
#  4. a row that changes on its node while its batch runs (after the page
#     is read, or after the copies) fails the batch, nothing moves, and the
#     next call moves the row as it is now.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use RingshardTestCluster qw(start_servers add_workers);

my ($coordinator, @workers) = start_servers(workers => [qw(w1 w2 w3)]);
my %worker = map { ($_->name => $_) } @workers;
add_workers($coordinator, @workers);
for my $w (@workers)
{
	# what a session on the worker prints by default; ringshard's own sessions pin their settings
	$w->safe_psql('postgres', q{
		ALTER DATABASE postgres SET DateStyle = 'SQL, DMY';
		ALTER DATABASE postgres SET TimeZone = 'Asia/Jakarta';
		ALTER DATABASE postgres SET extra_float_digits = 0;
		ALTER DATABASE postgres SET bytea_output = 'escape';
		ALTER DATABASE postgres SET IntervalStyle = 'sql_standard';
	});
}

# The row of number g, the same wherever it is written.
my $row_sql = q{'%s' || pg_catalog.lpad(g::text, 4, '0'), date '1990-01-01' + g,
	(g * 1.10)::numeric(12, 2), g / 3.0::float8,
	timestamptz '2024-02-01 12:00:00+07' + g * interval '1 hour',
	pg_catalog.decode(pg_catalog.md5(g::text), 'hex'), 'Jalan Merdeka №' || g || ' – ü',
	g * interval '1 day 2 hours 3.5 seconds'};
my $columns = 'nik text NOT NULL, born date, balance numeric(12, 2), score float8, seen timestamptz, photo bytea, note text, span interval';

$coordinator->safe_psql('postgres', qq{
	SELECT ringshard.set_replication_factor('default', 2);
	SELECT count(*) FROM ringshard.sync_topology();
	CREATE TABLE people ($columns);
	CREATE INDEX ON people (nik);
	SELECT ringshard.distribute_table('people', 'nik');
	SELECT count(*) FROM ringshard.create_distributed_table('people');
	INSERT INTO people SELECT @{[sprintf($row_sql, 'G')]} FROM generate_series(1, 600) g;
	-- every row as it should end: the 600 written, the 400 planted (400 twice)
	CREATE TABLE expected ($columns);
	INSERT INTO expected SELECT @{[sprintf($row_sql, 'G')]} FROM generate_series(1, 600) g;
	INSERT INTO expected SELECT @{[sprintf($row_sql, 'P')]} FROM generate_series(1, 400) g;
	INSERT INTO expected SELECT @{[sprintf($row_sql, 'P')]} FROM generate_series(400, 400) g;
});

# Plant P0001..P0400 on the worker that is not a replica of their key;
# P0001..P0100 also on their first replica; P0400 twice.
my %planted;
my %on_replica;
for my $line (split /\n/, $coordinator->safe_psql('postgres', q{
	SELECT g, (SELECT w FROM unnest(ARRAY['w1', 'w2', 'w3']) w WHERE w <> ALL (replicas_for('P' || lpad(g::text, 4, '0')))),
	       (replicas_for('P' || lpad(g::text, 4, '0')))[1]
	  FROM generate_series(1, 400) g}))
{
	my ($g, $outside, $first) = split /\|/, $line;
	push @{ $planted{$outside} }, $g;
	push @{ $planted{$outside} }, $g if $g == 400;
	push @{ $on_replica{$first} }, $g if $g <= 100;
}
for my $name (sort keys %worker)
{
	my @rows = (@{ $planted{$name} // [] }, @{ $on_replica{$name} // [] });
	next unless @rows;
	$worker{$name}->safe_psql('postgres', sprintf(q{
		SET session_replication_role = replica;  -- past the trigger that refuses rows of other nodes
		INSERT INTO public.people SELECT %s FROM unnest('{%s}'::int[]) g;
	}, sprintf($row_sql, 'P'), join(',', @rows)));
}
my $misplaced = 0;
$misplaced += scalar(@{ $planted{$_} // [] }) for keys %planted;
is($misplaced, 401, 'planted 401 rows on nodes that are not their replicas');

# A worker's rows, as text in fixed settings, sorted.
my $pinned = q{SET DateStyle = ISO; SET TimeZone = UTC; SET extra_float_digits = 3; SET bytea_output = hex; SET IntervalStyle = postgres;};
sub worker_rows
{
	my ($name) = @_;
	return $worker{$name}->safe_psql('postgres',
		"$pinned SELECT string_agg(t::text, E'\\n' ORDER BY t::text) FROM public.people t");
}
sub expected_rows
{
	my ($name) = @_;
	return $coordinator->safe_psql('postgres',
		"$pinned SELECT string_agg(e::text, E'\\n' ORDER BY e::text) FROM expected e WHERE '$name' = ANY (replicas_for(e.nik))");
}
isnt(worker_rows('w1'), expected_rows('w1'), 'before: w1 does not hold exactly its rows');

# 1. The move, in a session whose DateStyle would misprint dates.
my ($rc, $out, $err) = $coordinator->psql('postgres', q{
	SET DateStyle = 'SQL, DMY';
	SET extra_float_digits = 0;
	SET IntervalStyle = 'postgres_verbose';
	CALL ringshard.rehome_rows('people', 50);
});
is($rc, 0, 'rehome_rows runs') or diag $err;
like($err, qr/401 rows are on nodes that are not their replicas/, 'it counts the rows on nodes that are not their replicas');
# 401 rows, each to 2 replicas, less the 100 already on their first replica
like($err, qr/complete: 401 rows moved to their replicas, 702 copies made/,
	'it moves each row, copying it only where no identical row was') or diag $err;

# 2. Every worker holds exactly its rows, each value as written.
for my $name (sort keys %worker)
{
	is(worker_rows($name), expected_rows($name), "after: $name holds exactly the rows it is a replica of, values exact");
}
is($coordinator->safe_psql('postgres', q{
	SELECT count(*) FROM (SELECT * FROM people EXCEPT ALL SELECT * FROM expected) d}) . '/' .
	$coordinator->safe_psql('postgres', q{
	SELECT count(*) FROM (SELECT * FROM expected EXCEPT ALL SELECT * FROM people) d}), '0/0',
	'the table reads exactly the expected rows');
is($coordinator->safe_psql('postgres', q{SELECT count(*) FROM people WHERE nik = 'P0400'}), '2',
	'a row planted twice is on its replicas twice, as on its node');

# 3. Nothing left.
($rc, $out, $err) = $coordinator->psql('postgres', q{CALL ringshard.rehome_rows('people')});
is($rc, 0, 'a second run runs') or diag $err;
like($err, qr/: 0 rows are on nodes that are not their replicas/, 'a second run finds nothing to move');

# 4. A row that changes on its source while its batch runs: the batch
# holds (fault point) after reading its page, or after its copies, while
# another session changes the row on its node; the batch fails, nothing
# moves, and the next call moves the row in its new version, once.
my %case = (
	rehome_before_copy => [ 77, qr/ERROR:  verification failed: 1 rows of public\.people copied from node "%s"/ ],
	rehome_before_delete => [ 78, qr/ERROR:  1 rows of public\.people changed on node "%s" while they were copied/ ]);
for my $point (sort keys %case)
{
	my ($g, $expected) = @{ $case{$point} };
	my ($outside) = grep { my $n = $_; grep { $_ == $g } @{ $planted{$n} // [] } } keys %planted;
	my $nik = sprintf('Q%04d', $g);
	$worker{$outside}->safe_psql('postgres', sprintf(q{
		SET session_replication_role = replica;
		INSERT INTO public.people SELECT %s FROM unnest('{%d}'::int[]) g;
	}, sprintf($row_sql, 'Q'), $g));
	my ($mover_out, $mover_err) = ('', '');
	my $mover = IPC::Run::start([ 'psql', '-X', '-h', $coordinator->host, '-p', $coordinator->port, '-d', 'postgres',
		'-c', qq{SET ringshard.fault_injection = '$point=sleep:3000'},
		'-c', q{CALL ringshard.rehome_rows('people', 10)} ], '>', \$mover_out, '2>', \$mover_err,
		IPC::Run::timeout(120));
	# the batch sleeps 3 s at the point: change the row meanwhile
	sleep(1);
	$worker{$outside}->safe_psql('postgres',
		qq{SET session_replication_role = replica; UPDATE public.people SET note = 'changed' WHERE nik = '$nik'});
	$mover->finish;
	my $pattern = sprintf($expected, $outside);
	like($mover_err, qr/$pattern/, "$point: the batch fails, its row changed on its node meanwhile") or diag $mover_err;
	is($coordinator->safe_psql('postgres', qq{SELECT count(*) FROM people WHERE nik = '$nik'}), '0',
		"$point: nothing moved (the row is only on its node, which is not its replica)");
	($rc, $out, $err) = $coordinator->psql('postgres', q{CALL ringshard.rehome_rows('people')});
	is($rc, 0, "$point: the next call runs") or diag $err;
	is($coordinator->safe_psql('postgres', qq{SELECT string_agg(note, ',') FROM people WHERE nik = '$nik'}), 'changed',
		"$point: it moves the row in its new version, once");
	is(join(',', map { $worker{$_}->safe_psql('postgres', qq{SELECT count(*) FROM public.people WHERE nik = '$nik'}) }
			sort keys %worker),
		join(',', map { $coordinator->safe_psql('postgres', qq{SELECT ('$_' = ANY (replicas_for('$nik'::text)))::int}) }
			sort keys %worker),
		"$point: each worker holds the row exactly if it is a replica of it");
}

done_testing();

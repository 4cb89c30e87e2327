# Three of five workers leave a ring at R = 2 at once, and one rebalance in
# small batches drains them.  Some token ranges were held by two of the
# leaving workers only: their rows are copied from one of those.  Batches
# that leave the same nodes are deleted together after the last of them;
# a node the table leaves altogether is emptied whole by TRUNCATE, but only
# once no batch still to copy reads from it or leaves it, and only when
# every row there is one of the move's.  Every row ends on exactly its
# replicas, none lost; two leaving workers' tables are empty with no page
# left; the third holds a misplaced row (written there directly, in no range
# it held), which is no row of the move: it stays, and the move's rows there
# are deleted instead.  While the move runs, a session on w4 holds its table
# (a reader that does not end): w4's truncate waits 5 s for its lock, then
# the move's rows are deleted there instead, and the move goes on.
#
# A second table, "Odd Schema"."Odd ""T""" (dates, floats, intervals), is
# moved after it under DateStyle 'SQL, DMY', IntervalStyle 'sql_standard',
# extra_float_digits -15 and search_path = public, where every worker has
# an unrelated public."Odd ""T""": every value arrives exact, the leaving
# workers' table is truncated, and the unrelated tables keep their rows.
#
# The workers are databases of one server: the addresses differ by dbname.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $server = PostgreSQL::Test::Cluster->new('server');
$server->init;
$server->append_conf('postgresql.conf', "max_prepared_transactions = 40\nshared_preload_libraries = 'ringshard'");
$server->start;
my @workers = map { "w$_" } 1 .. 5;
for my $db ('coord', @workers)
{
	$server->safe_psql('postgres', "CREATE DATABASE $db");
	$server->safe_psql($db, 'CREATE EXTENSION ringshard');
}
my $host = $server->host;
my $port = $server->port;
$server->safe_psql('coord', join('', map { "SELECT ringshard.add_node('$_', 'host=$host port=$port dbname=$_');\n" } @workers) . q{
	SELECT ringshard.set_replication_factor('default', 2);
	SELECT count(*) FROM ringshard.sync_topology();
	CREATE TABLE t (id bigint PRIMARY KEY, v text);
	SELECT ringshard.distribute_table('t', 'id');
	SELECT count(*) FROM ringshard.create_distributed_table('t');
	INSERT INTO t SELECT g, 'v-' || g FROM generate_series(1, 3000) g;
});
# the odd table's schema on every node, and an unrelated table of its name in public
for my $db ('coord', @workers)
{
	$server->safe_psql($db, q{CREATE SCHEMA "Odd Schema"});
	next if $db eq 'coord';
	$server->safe_psql($db, q{CREATE TABLE public."Odd ""T""" (id bigint, d date, f float8, iv interval);
		INSERT INTO public."Odd ""T""" SELECT g, date '2024-02-01', 0.1, interval '1 day' FROM generate_series(1, 50) g});
}
$server->safe_psql('coord', q{
	CREATE TABLE "Odd Schema"."Odd ""T""" (id bigint PRIMARY KEY, d date, f float8, iv interval);
	SELECT ringshard.distribute_table('"Odd Schema"."Odd ""T"""', 'id');
	SELECT count(*) FROM ringshard.create_distributed_table('"Odd Schema"."Odd ""T"""');
	INSERT INTO "Odd Schema"."Odd ""T"""
	SELECT g, date '2024-02-01' + g, 0.1 * g + 1e-15, make_interval(days => g, secs => g / 7.0) FROM generate_series(1, 600) g;
});
my $odd_values = q{SELECT count(*) || ':' || md5(string_agg(id || ' ' || d || ' ' || f || ' ' || iv, ',' ORDER BY id))
	FROM "Odd Schema"."Odd ""T"""};
my $unrelated = q{SELECT count(*) || ':' || md5(string_agg(id || ' ' || d || ' ' || f || ' ' || iv, ',' ORDER BY id)) FROM public."Odd ""T"""};
my $unrelated_before = $server->safe_psql('w1', $unrelated);
my $all = q{SELECT count(*) || ':' || sum(id) || ':' || md5(string_agg(v, ',' ORDER BY id)) FROM t};
my $before = $server->safe_psql('coord', $all);

$server->safe_psql('coord', q{CREATE TABLE before_move AS SELECT g AS id, replicas_for(g::bigint) AS r FROM generate_series(1, 3000) g});
# ranges only leaving workers hold: their rows are copied from a leaving worker
my $only_leaving = $server->safe_psql('coord', q{
	SELECT count(*) FROM generate_series(1, 3000) g WHERE replicas_for(g::bigint) <@ ARRAY['w3', 'w4', 'w5']});
cmp_ok($only_leaving, '>', 0, "$only_leaving of 3000 rows are held only by workers that leave");

# a misplaced row on w3: a key none of w3's ranges holds, written there directly
my $misplaced = $server->safe_psql('coord', q{
	SELECT min(g) FROM generate_series(5000, 6000) g WHERE 'w3' <> ALL (replicas_for(g::bigint))});
$server->safe_psql('w3', "SET ringshard.accept_moving_rows = on; INSERT INTO t VALUES ($misplaced, 'misplaced')");

$server->safe_psql('coord', q{
	SELECT ringshard.remove_node('w3');
	SELECT ringshard.remove_node('w4');
	SELECT ringshard.remove_node('w5');
	SELECT count(*) FROM ringshard.sync_topology();
});
my $groups = $server->safe_psql('coord', q{SELECT count(DISTINCT deletes) FROM ringshard.rebalance_plan('t')});
cmp_ok($groups, '>=', 4, "the plan leaves $groups different sets of nodes (single nodes and pairs)");

# a reader on w4 holding its table for up to 60 s
my ($reader_out, $reader_err) = ('', '');
my $reader = IPC::Run::start(
	[ 'psql', '-X', '-q', '-h', $host, '-p', $port, '-d', 'w4', '-c',
	  'BEGIN; LOCK TABLE t IN ACCESS SHARE MODE; SELECT pg_sleep(60); COMMIT;' ],
	'>', \$reader_out, '2>', \$reader_err, IPC::Run::timeout(120));
$server->poll_query_until('w4', q{SELECT count(*) > 0 FROM pg_locks l JOIN pg_stat_activity a USING (pid)
	WHERE l.relation = 't'::regclass AND a.query LIKE 'BEGIN; LOCK TABLE t%'})
	or die 'the reader on w4 did not take its lock';

my ($rc, $out, $err) = $server->psql('coord', q{CALL ringshard.rebalance('t', batch => 40)});
is($rc, 0, 'the rebalance in batches of about 40 rows succeeds, the reader on w4 still running') or diag($err);
like($err, qr/NOTICE:  rebalance of public\.t: the rows of steps \{[0-9,]+\} are deleted from node w4, not truncated there\nDETAIL:  statement failed on node "w4": [^\n]*lock timeout/,
	'the truncate on w4 could not take its lock within 5 s: the move says so, and deletes the rows there instead');
is($server->safe_psql('w4', q{SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'BEGIN; LOCK TABLE t%' AND state = 'active'}),
	'1', 'the reader on w4 was still holding its table when the move ended');
$reader->kill_kill;
is($server->safe_psql('coord', $all), $before, 'every row is read back once, as it was');
for my $w (@workers[ 0 .. 1 ])
{
	my $expected = $server->safe_psql('coord',
		"SELECT count(*) || ':' || coalesce(sum(g), 0) FROM generate_series(1, 3000) g WHERE '$w' = ANY (replicas_for(g::bigint))");
	is($server->safe_psql($w, q{SELECT count(*) || ':' || coalesce(sum(id), 0) FROM t}), $expected,
		"$w holds exactly the rows it is a replica of ($expected)");
}
is($server->safe_psql('w3', q{SELECT string_agg(id || ':' || v, ',') FROM t}), "$misplaced:misplaced",
	'w3 keeps only its misplaced row, which no step moved: the rows of the move were deleted, not truncated');
# every copy that left w3, w4 or w5 is deleted there (the misplaced row is none of them)
my $copies_left = $server->safe_psql('coord', q{
	SELECT sum(cardinality(ARRAY(SELECT unnest(r) INTERSECT SELECT unnest(ARRAY['w3', 'w4', 'w5'])))) FROM before_move});
like($err, qr/rebalance of public\.t complete: \d+ steps, \d+ rows copied, $copies_left deleted/,
	"the move counts the $copies_left copies it deleted or truncated where they left");
is($server->safe_psql('w4', q{SELECT count(*) || ' rows, ' || (pg_relation_size('t') > 0) FROM t}), '0 rows, true',
	'w4, whose table a reader held, holds no row of t: they were deleted (its pages are kept), not truncated');
is($server->safe_psql('w5', q{SELECT count(*) || ' rows, ' || pg_relation_size('t') || ' bytes' FROM t}),
	'0 rows, 0 bytes', 'w5, which left, holds no row of t and no page (truncated)');
is($server->safe_psql('coord', q{SELECT count(*) FROM ringshard.verify_table('t')}), '0',
	'verify_table finds every replica the same');

# The odd table, under other settings and a search_path where public."Odd ""T"""
# comes first: its values arrive exact, and the unrelated tables are untouched.
my $odd_before = $server->safe_psql('coord', $odd_values);
($rc, $out, $err) = $server->psql('coord', q{
	SET DateStyle = 'SQL, DMY'; SET IntervalStyle = 'sql_standard'; SET extra_float_digits = -15; SET search_path = public;
	CALL ringshard.rebalance('"Odd Schema"."Odd ""T"""', batch => 100)});
is($rc, 0, 'the odd table moves under other settings and search_path') or diag($err);
is($server->safe_psql('coord', $odd_values), $odd_before, 'it is read back whole, every value as it was');
for my $w (@workers[ 0 .. 1 ])
{
	my $expected = $server->safe_psql('coord', qq{
		SELECT count(*) || ':' || md5(string_agg(g || ' ' || (date '2024-02-01' + g) || ' ' || (0.1 * g + 1e-15)::float8 || ' '
		                                         || make_interval(days => g, secs => g / 7.0), ',' ORDER BY g))
		  FROM generate_series(1, 600) g WHERE '$w' = ANY (replicas_for(g::bigint))});
	is($server->safe_psql($w, $odd_values), $expected, "$w holds exactly its rows of the odd table, every value exact");
}
for my $w (@workers[ 2 .. 4 ])
{
	is($server->safe_psql($w, q{SELECT count(*) || ' rows, ' || pg_relation_size('"Odd Schema"."Odd ""T"""') || ' bytes'
		FROM "Odd Schema"."Odd ""T"""}), '0 rows, 0 bytes', "$w, which left, holds no row of the odd table (truncated)");
}
is(join(' ', map { $server->safe_psql($_, $unrelated) } @workers), join(' ', ($unrelated_before) x 5),
	'the unrelated public."Odd ""T""" keeps its 50 rows on every worker');

is(join(',', map { $server->safe_psql($_, 'SELECT count(*) FROM pg_prepared_xacts') } @workers), '0,0,0,0,0',
	'no part of the move is left prepared on any worker');

$server->stop;
done_testing();

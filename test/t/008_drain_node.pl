# A node that leaves a ring is drained before it is forgotten.  w3 leaves
# ring r1 (R = 1, table t1) and ring r2 (R = 2, table t2): it stays in the
# catalog, with its address, while any table's rows are laid out on it; the
# dry run shows a plan that copies its rows away, the rebalance runs it, and
# once both tables are moved the node is forgotten.  Every row is then read
# back from its new replicas.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $coordinator = PostgreSQL::Test::Cluster->new('coordinator');
my @workers = map { PostgreSQL::Test::Cluster->new("w$_") } 1 .. 3;
for my $node ($coordinator, @workers)
{
	$node->init;
	$node->append_conf('postgresql.conf', "max_prepared_transactions = 20\nshared_preload_libraries = 'ringshard'");
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION ringshard');
}
my %address = map { ("w$_" => sprintf('host=%s port=%d dbname=postgres', $workers[ $_ - 1 ]->host, $workers[ $_ - 1 ]->port)) } 1 .. 3;

$coordinator->safe_psql('postgres', qq{
	SELECT ringshard.create_ring('r1', replication_factor => 1);
	SELECT ringshard.create_ring('r2', replication_factor => 2);
	SELECT ringshard.add_node('w1', '$address{w1}', 'r1');
	SELECT ringshard.add_node('w2', '$address{w2}', 'r1');
	SELECT ringshard.add_node('w3', '$address{w3}', 'r1');
	SELECT ringshard.add_node(n, ring => 'r2') FROM unnest(ARRAY['w1', 'w2', 'w3']) n;
	SELECT count(*) FROM ringshard.sync_topology();
	CREATE TABLE t1 (id bigint, payload text);
	SELECT ringshard.distribute_table('t1', 'id', 'r1');
	SELECT count(*) FROM ringshard.create_distributed_table('t1');
	INSERT INTO t1 SELECT g, 't1-' || g FROM generate_series(1, 30) g;
	CREATE TABLE t2 (id bigint, payload text);
	SELECT ringshard.distribute_table('t2', 'id', 'r2');
	SELECT count(*) FROM ringshard.create_distributed_table('t2');
	INSERT INTO t2 SELECT g, 't2-' || g FROM generate_series(1, 60) g;
});
my $t1_on_w3 = $workers[2]->safe_psql('postgres', 'SELECT count(*) FROM t1');
my $t2_on_w3 = $workers[2]->safe_psql('postgres', 'SELECT count(*) FROM t2');
cmp_ok($t1_on_w3, '>', 0, "w3 holds rows of t1 ($t1_on_w3 of 30, R = 1)");
cmp_ok($t2_on_w3, '>', 0, "w3 holds rows of t2 ($t2_on_w3 of 60 copies, R = 2)");

# a key not in t1 whose rows would be on w3 (before it leaves)
my $new_on_w3 = $coordinator->safe_psql('postgres',
	q{SELECT min(g) FROM generate_series(1000, 1200) g WHERE replicas_for(g::bigint, 'r1') = ARRAY['w3']});

# w3 leaves both rings.  It is kept, with its address: its rows are still there.
my ($rc, $out, $err) = $coordinator->psql('postgres', q{SELECT ringshard.remove_node('w3', 'r1')});
is($rc, 0, 'w3 leaves r1');
unlike($err, qr/kept/, 'while w3 is still on r2, removing it from r1 says nothing');
($rc, $out, $err) = $coordinator->psql('postgres', q{SELECT ringshard.remove_node('w3', 'r2')});
like($err, qr/node "w3" is in no ring or map now; it is kept until its rows have moved\nDETAIL:  Rows of public\.t1, public\.t2 are laid out on it\./,
	'leaving its last ring, w3 is kept until the rows of t1 and t2 have moved, and remove_node says so');
is($coordinator->safe_psql('postgres', q{SELECT count(*) FROM ringshard.nodes WHERE node_name = 'w3' AND server_name IS NOT NULL}),
	'1', 'w3 is still in the catalog with its address after leaving every ring');
is($coordinator->safe_psql('postgres', q{SELECT count(*) FROM ringshard.ring_members WHERE node_name = 'w3'}),
	'0', 'w3 is on no ring');

# Until the rebalance has moved them, the rows on w3 are read and written
# there: t1 has one copy (R = 1), which only w3 holds.
$coordinator->safe_psql('postgres', q{SELECT count(*) FROM ringshard.sync_topology()});
is($coordinator->safe_psql('postgres', q{SELECT count(*) || ' ' || sum(id) FROM t1}), '30 465',
	'before the rebalance, a fan-out of t1 reads every row once, those on w3 too');
my $unread_before = 0;
for my $id (1 .. 30)
{
	$unread_before++ unless $coordinator->safe_psql('postgres', "SELECT payload FROM t1 WHERE id = $id") eq "t1-$id";
}
is($unread_before, 0, 'and reads every row by key, those on w3 from w3');
my $k3 = $workers[2]->safe_psql('postgres', 'SELECT min(id) FROM t1');
($rc, $out, $err) = $coordinator->psql('postgres', "UPDATE t1 SET payload = payload || ' (updated)' WHERE id = $k3");
is($rc, 0, 'an UPDATE of a row on w3 runs there before the rebalance') or diag($err);
is($workers[2]->safe_psql('postgres', "SELECT payload FROM t1 WHERE id = $k3"), "t1-$k3 (updated)", 'w3 holds the change');
($rc, $out, $err) = $coordinator->psql('postgres', "INSERT INTO t1 VALUES ($new_on_w3, 'new on w3')");
is($rc, 0, 'an INSERT of a key whose rows are on w3 runs before the rebalance') or diag($err);
is($workers[2]->safe_psql('postgres', "SELECT payload FROM t1 WHERE id = $new_on_w3"), 'new on w3', 'it is on w3');
($rc, $out, $err) = $coordinator->psql('postgres', "DELETE FROM t1 WHERE id = $new_on_w3");
is($rc, 0, 'and a DELETE of it') or diag($err);
is($workers[2]->safe_psql('postgres', "SELECT count(*) FROM t1 WHERE id = $new_on_w3"), '0', 'it is gone from w3');

# The dry run shows a plan that can run: t1's rows on w3 are copied from w3.
($rc, $out, $err) = $coordinator->psql('postgres', q{CALL ringshard.rebalance('t1', dry_run => true)});
is($rc, 0, 'the dry run of t1 succeeds') or diag($err);
like($err, qr/rebalance plan of public\.t1 \(dry run, nothing changed\): \d+ steps, $t1_on_w3 rows to copy/,
	"the dry run of t1 copies the $t1_on_w3 rows on w3");
is($coordinator->safe_psql('postgres', q{SELECT string_agg(DISTINCT from_node, ',') || ':' || sum(rows) FROM ringshard.rebalance_plan_summary('t1')}),
	"w3:$t1_on_w3", 'the plan summary copies them from w3, the only holder (R = 1)');

($rc, $out, $err) = $coordinator->psql('postgres', q{CALL ringshard.rebalance('t1')});
is($rc, 0, 'the rebalance that drains w3 of t1 succeeds') or diag($err);
like($err, qr/rebalance of public\.t1 complete: \d+ steps, $t1_on_w3 rows copied, $t1_on_w3 deleted/,
	'it copied and deleted the rows of w3');
is($workers[2]->safe_psql('postgres', 'SELECT count(*) FROM t1'), '0', 'w3 holds no row of t1 any more');
# w3 holds none of t1's ranges now: its table was emptied whole by TRUNCATE
# (a DELETE leaves its pages until a vacuum), and the notice above counted
# its rows as deleted
is($workers[2]->safe_psql('postgres', q{SELECT pg_relation_size('t1')}), '0',
	't1 on w3, which left its ring, was truncated: no page is left');
is($coordinator->safe_psql('postgres', q{SELECT count(*) FROM ringshard.nodes WHERE node_name = 'w3'}),
	'1', 'w3 is kept while t2\'s rows are still on it');
is($coordinator->safe_psql('postgres', q{SELECT count(*) FROM ringshard.cluster_fanout(NULL::t1)}), '30',
	'a fan-out reads all 30 rows of t1');
my $unreadable = 0;
for my $id (1 .. 30)
{
	my $payload = $id == $k3 ? "t1-$id (updated)" : "t1-$id";
	$unreadable++ unless $coordinator->safe_psql('postgres',
		"SELECT count(*) FROM ringshard.cluster_get(NULL::t1, '$id') WHERE payload = '$payload'") eq '1';
}
is($unreadable, 0, 'every row of t1 is read back by key from its new owner, the one updated before the move as updated');

# t2 on w3 is referred to by a foreign key there: TRUNCATE would fail, so
# the rows of the move are deleted there instead.
$workers[2]->safe_psql('postgres', q{
	CREATE UNIQUE INDEX t2_id ON t2 (id);
	CREATE TABLE t2_notes (id bigint REFERENCES t2 (id));
});
my $t2_pages_on_w3 = $workers[2]->safe_psql('postgres', q{SELECT pg_relation_size('t2')});
cmp_ok($t2_pages_on_w3, '>', 0, 't2 on w3 has pages before the rebalance');

# t2, with a progress notice after every page and step (interval 0).
($rc, $out, $err) = $coordinator->psql('postgres', q{CALL ringshard.rebalance('t2', dry_run => true)});
like($err, qr/\(dry run, nothing changed\): (\d+) steps, \d+ rows to copy/, 'the dry run of t2 succeeds');
my ($t2_steps) = $err =~ /\(dry run, nothing changed\): (\d+) steps/;
($rc, $out, $err) = $coordinator->psql('postgres',
	q{SET ringshard.rebalance_notice_interval = 0; CALL ringshard.rebalance('t2')});
is($rc, 0, 'the rebalance that drains w3 of t2 succeeds') or diag($err);
# a line after each batch (steps with the same nodes, moved together): the steps copied so far, up to all of them
my @reported = $err =~ /rebalance of public\.t2: step (\d+) of $t2_steps, rows \d+ of \d+ \([\d.]+ %\)/g;
my $increasing = 1;
$increasing &&= $reported[$_] > $reported[ $_ - 1 ] for 1 .. $#reported;
ok(@reported >= 2 && $increasing && $reported[-1] == $t2_steps,
	"with ringshard.rebalance_notice_interval = 0 every batch reports progress, up to step $t2_steps of $t2_steps")
	or diag("reported: @reported");
like($err, qr/rebalance of public\.t2 complete: .* deleted; forgotten, in no ring or map and holding no table's rows any more: "w3"/,
	'the last rebalance forgets w3 and says so');
is($coordinator->safe_psql('postgres', q{SELECT count(*) FROM ringshard.nodes WHERE node_name = 'w3'}),
	'0', 'w3 is forgotten once no table\'s rows are on it');
is($workers[2]->safe_psql('postgres', 'SELECT count(*) FROM t2'), '0', 'w3 holds no row of t2 any more');
is($workers[2]->safe_psql('postgres', q{SELECT pg_relation_size('t2')}), $t2_pages_on_w3,
	't2 on w3, which a foreign key there refers to, was emptied by DELETE (its pages are kept until a vacuum), not TRUNCATE');
like($err, qr/rebalance of public\.t2 complete: \d+ steps, \d+ rows copied, $t2_on_w3 deleted/,
	"the $t2_on_w3 rows deleted from w3 are counted");
for my $i (1 .. 2)
{
	my $expected = $coordinator->safe_psql('postgres',
		"SELECT string_agg(g::text, ',' ORDER BY g) FROM generate_series(1, 60) g WHERE 'w$i' = ANY (replicas_for(g::bigint, 'r2'))");
	is($workers[ $i - 1 ]->safe_psql('postgres', q{SELECT string_agg(id::text, ',' ORDER BY id) FROM t2}),
		$expected, "w$i holds exactly its rows of t2, each once");
}
is($coordinator->safe_psql('postgres', q{SELECT count(*) FROM ringshard.cluster_fanout(NULL::t2)}), '60',
	'a fan-out reads all 60 rows of t2 once');
is($coordinator->safe_psql('postgres', q{SELECT count(*) FROM ringshard.rebalance_status}), '0',
	'no rebalance is left unfinished');

# A node kept only for a table's rows goes with the table: dropping it drops
# its placement (a later table may reuse its OID) and forgets the node.
$coordinator->safe_psql('postgres', qq{
	SELECT ringshard.create_ring('r3');
	SELECT ringshard.add_node('w1', ring => 'r3');
	SELECT ringshard.add_node('w3', '$address{w3}', 'r3');
	SELECT count(*) FROM ringshard.sync_topology();
	CREATE TABLE t3 (id bigint);
	SELECT ringshard.distribute_table('t3', 'id', 'r3');
	SELECT count(*) FROM ringshard.create_distributed_table('t3');
	INSERT INTO t3 SELECT generate_series(1, 20);
	SELECT ringshard.remove_node('w3', 'r3');
});
is($coordinator->safe_psql('postgres', q{SELECT count(*) FROM ringshard.nodes WHERE node_name = 'w3'}),
	'1', 'w3, out of r3 again, is kept for the rows of t3');
my $t3 = $coordinator->safe_psql('postgres', q{SELECT 't3'::regclass::oid});
$coordinator->safe_psql('postgres', 'DROP TABLE t3');
is($coordinator->safe_psql('postgres', "SELECT count(*) FROM ringshard.placements WHERE table_name::oid = $t3"),
	'0', 'dropping t3 drops its placement');
is($coordinator->safe_psql('postgres', q{SELECT count(*) FROM ringshard.nodes WHERE node_name = 'w3'}),
	'0', 'and forgets w3, which no table needs any more');

$_->stop for ($coordinator, @workers);
done_testing();

# Zones and explicit tokens in a cluster (docs/routing.md §7, §8): the
# topology that sync_topology() pushes carries them, so workers route, read
# (reads_here) and guard their rows (reject_misrouted_rows) with the zones'
# replica sets; a zone change and a join with allocated tokens are topology
# changes that rebalance() moves exactly, as the previews say, and the
# table's layout says when it needs one; a node moves from labelled vnodes
# to allocated tokens the same way.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $coordinator = PostgreSQL::Test::Cluster->new('coordinator');
my @workers = map { PostgreSQL::Test::Cluster->new("z$_") } 1 .. 4;
for my $node ($coordinator, @workers)
{
	$node->init;
	$node->append_conf('postgresql.conf', "max_prepared_transactions = 20\nshared_preload_libraries = 'ringshard'");
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION ringshard');
}
my %address = map { ("z$_" => sprintf('host=%s port=%d dbname=postgres', $workers[ $_ - 1 ]->host, $workers[ $_ - 1 ]->port)) } 1 .. 4;

# z1 and z2 in data centre jkt, z3 alone in sby; R = 2: every key has one
# copy in each, so z3 holds every row.
$coordinator->safe_psql('postgres', qq{
	SELECT ringshard.add_node('z1', '$address{z1}', zone => 'jkt');
	SELECT ringshard.add_node('z2', '$address{z2}', zone => 'jkt');
	SELECT ringshard.add_node('z3', '$address{z3}', zone => 'sby');
	SELECT ringshard.set_replication_factor('default', 2);
	SELECT count(*) FROM ringshard.sync_topology();
	CREATE TABLE citizens (nik text, name text);
	SELECT ringshard.distribute_table('citizens', 'nik');
	SELECT count(*) FROM ringshard.create_distributed_table('citizens');
	INSERT INTO citizens SELECT '3201' || lpad(g::text, 12, '0'), 'n' || g FROM generate_series(1, 600) g;
});

# Each worker holds exactly the rows whose replica set names it, each once.
sub check_placement
{
	my ($label, $count) = @_;
	for my $i (1 .. 4)
	{
		my $member = $coordinator->safe_psql('postgres',
			"SELECT count(*) FROM ringshard.ring_members WHERE node_name = 'z$i'");
		next if $member eq '0';
		my $expected = $coordinator->safe_psql('postgres',
			"SELECT coalesce(string_agg(nik, ',' ORDER BY nik), '') FROM generate_series(1, $count) g,
			        LATERAL (SELECT '3201' || lpad(g::text, 12, '0') AS nik) k
			  WHERE 'z$i' = ANY (replicas_for(k.nik))");
		my $actual = $workers[ $i - 1 ]->safe_psql('postgres',
			"SELECT coalesce(string_agg(nik, ',' ORDER BY nik), '') FROM citizens");
		is($actual, $expected, "$label: z$i holds exactly the rows the zones' replica sets give it");
	}
	is($coordinator->safe_psql('postgres', 'SELECT count(*) FROM citizens'), $count,
		"$label: the coordinator reads every row once (reads_here on the workers)");
}
check_placement('zones jkt, jkt, sby', 600);
is($workers[2]->safe_psql('postgres', 'SELECT count(*) FROM citizens'), '600',
	'z3, alone in its zone, holds a copy of every row');

# The workers received the zones, and route as the coordinator does.
is($workers[0]->safe_psql('postgres',
		q{SELECT string_agg(node_name || '=' || coalesce(zone, '-'), ',' ORDER BY node_name) FROM ringshard.ring_members}),
	'z1=jkt,z2=jkt,z3=sby', 'sync_topology() pushed the zones');
my $routes = q{SELECT string_agg(array_to_string(replicas_for('k' || g), '/'), ',' ORDER BY g) FROM generate_series(1, 400) g};
is($workers[1]->safe_psql('postgres', $routes), $coordinator->safe_psql('postgres', $routes),
	'a worker computes the same replica sets as the coordinator');

# The misrouted-row guard uses the zones.  Without zones a set may be
# {z1, z2}, both in jkt; with them z3 takes the second place.  So a key
# whose set without zones names z2 but with zones does not is refused on z2,
# and one whose set with zones names z3 but without them does not is taken
# on z3.
my $flat = q{
	SELECT ringshard.create_ring('flat', 256, 2);
	SELECT count(*) FROM (SELECT ringshard.add_node(n, NULL, 'flat') FROM unnest(ARRAY['z1', 'z2', 'z3']) n) x;};
$coordinator->safe_psql('postgres', $flat);
my $refused_key = $coordinator->safe_psql('postgres', q{
	SELECT k FROM (SELECT 'probe-' || g AS k FROM generate_series(1, 5000) g) s
	 WHERE 'z2' = ANY (replicas_for(k, 'flat')) AND NOT 'z2' = ANY (replicas_for(k)) LIMIT 1});
my $accepted_key = $coordinator->safe_psql('postgres', q{
	SELECT k FROM (SELECT 'probe-' || g AS k FROM generate_series(1, 5000) g) s
	 WHERE NOT 'z3' = ANY (replicas_for(k, 'flat')) AND 'z3' = ANY (replicas_for(k)) LIMIT 1});
ok($refused_key ne '' && $accepted_key ne '', "keys where zones decide the replica set exist ($refused_key, $accepted_key)");
my ($rc, $out, $err) = $workers[1]->psql('postgres', "INSERT INTO citizens VALUES ('$refused_key', 'x')");
isnt($rc, 0, 'z2 refuses a row its zone-aware replica set does not name');
like($err, qr/does not belong on node "z2"/, 'and says why') or diag($err);
($rc, $out, $err) = $workers[2]->psql('postgres', "INSERT INTO citizens VALUES ('$accepted_key', 'x')");
is($rc, 0, 'z3 takes one its zone-aware set names, though a ring without zones would not') or diag($err);
$workers[2]->safe_psql('postgres', "DELETE FROM citizens WHERE nik = '$accepted_key'");
$coordinator->safe_psql('postgres', q{SELECT ringshard.drop_ring('flat')});

# A zone change is a topology change: the copy preview names the rows that
# move, the layout needs a rebalance, and rebalance() moves exactly them.
my $moving = $coordinator->safe_psql('postgres', q{
	SELECT count(*) FROM ringshard.plan_table_moves('citizens', 'set_zone', 'z2', zone => 'sby')});
my $changing = $coordinator->safe_psql('postgres', q{
	SELECT count(*) FROM generate_series(1, 600) g, LATERAL (SELECT '3201' || lpad(g::text, 12, '0') AS nik) k
	 WHERE replicas_for(k.nik) IS DISTINCT FROM ringshard.proposed_replicas(k.nik, 'default', 'set_zone', 'z2', 1, 'sby')});
is($moving, $changing, 'plan_table_moves names the rows proposed_replicas says change');
cmp_ok($moving, '>', 0, "moving z2 to sby changes the replica sets of $moving rows");
is($coordinator->safe_psql('postgres', q{SELECT count(*) FROM ringshard.preview_change('default', 'set_zone', 'z2', 1, false, 'sby')}),
	'0', 'and moves no owner');
$coordinator->safe_psql('postgres', q{SELECT ringshard.set_node_zone('z2', 'sby')});
is($coordinator->safe_psql('postgres', q{SELECT layout FROM ringshard.table_overview WHERE table_name = 'citizens'::regclass}),
	'needs rebalance', 'after the zone change the table needs a rebalance');
($rc, $out, $err) = $coordinator->psql('postgres', q{CALL ringshard.rebalance('citizens')});
is($rc, 0, 'rebalance moves the zone change') or diag($err);
my ($copied, $deleted) = $err =~ /complete: \d+ steps, (\d+) rows copied, (\d+) deleted/;
is($copied, $moving, "it copied exactly the rows whose replica set changed ($moving)");
is($coordinator->safe_psql('postgres', q{SELECT layout FROM ringshard.table_overview WHERE table_name = 'citizens'::regclass}),
	'in place', 'and the table is laid out as the topology says');
check_placement('z2 moved to sby', 600);

# A join with allocated tokens, in a zone: the preview names the rows, the
# tokens reach the workers, rebalance() moves exactly those rows.
my $join_rows = $coordinator->safe_psql('postgres', q{
	SELECT count(*) FROM ringshard.plan_table_moves('citizens', 'add', 'z4', 1, 'jkt', NULL, 16)});
my $allocated = $coordinator->safe_psql('postgres', q{SELECT ringshard.allocate_tokens('z4', 16)});
$coordinator->safe_psql('postgres', "SELECT ringshard.add_node('z4', '$address{z4}', tokens => 16, zone => 'jkt')");
is($coordinator->safe_psql('postgres', q{SELECT cardinality(tokens) FROM ringshard.ring_members WHERE node_name = 'z4'}),
	'16', 'z4 joined with 16 allocated tokens');
($rc, $out, $err) = $coordinator->psql('postgres', q{CALL ringshard.rebalance('citizens')});
is($rc, 0, 'rebalance moves the join') or diag($err);
is($workers[0]->safe_psql('postgres', q{SELECT tokens FROM ringshard.ring_members WHERE node_name = 'z4'}),
	$coordinator->safe_psql('postgres', q{SELECT tokens FROM ringshard.ring_members WHERE node_name = 'z4'}),
	'the explicit tokens reached the workers intact');
is($workers[3]->safe_psql('postgres', q{SELECT count(*) FROM citizens}),
	$coordinator->safe_psql('postgres', q{SELECT count(*) FROM generate_series(1, 600) g WHERE 'z4' = ANY (replicas_for('3201' || lpad(g::text, 12, '0')))}),
	'z4 holds exactly its rows');
cmp_ok($join_rows, '>', 0, "the join changed the replica sets of $join_rows rows, as previewed");
check_placement('z4 joined with allocated tokens', 600);
is($workers[2]->safe_psql('postgres', $routes), $coordinator->safe_psql('postgres', $routes),
	'workers route with the explicit tokens as the coordinator does');

# Migration: z1 from labelled vnodes to allocated tokens, previewed, then
# moved by rebalance().
my $migrate_rows = $coordinator->safe_psql('postgres', q{
	SELECT count(*) FROM ringshard.plan_table_moves('citizens', 'set_tokens', 'z1',
	       tokens => ringshard.allocate_tokens('z1', 16))});
$coordinator->safe_psql('postgres', q{SELECT ringshard.set_node_tokens('z1', ringshard.allocate_tokens('z1', 16))});
($rc, $out, $err) = $coordinator->psql('postgres', q{CALL ringshard.rebalance('citizens')});
is($rc, 0, 'rebalance moves z1 to its allocated tokens') or diag($err);
cmp_ok($migrate_rows, '>', 0, "the migration step changed $migrate_rows rows' replica sets");
check_placement('z1 on allocated tokens', 600);
is($coordinator->safe_psql('postgres', q{SELECT layout FROM ringshard.table_overview WHERE table_name = 'citizens'::regclass}),
	'in place', 'after each rebalance the layout is in place');

done_testing();

# Rebalancing names every relation it sends to a node schema-qualified and
# quoted, whatever the caller's search_path.  app.items is distributed and
# the workers also have an unrelated public.items: a rebalance called with
# search_path = app, public (where app.items prints as "items") must move
# app.items rows and leave public.items alone on every worker.  A table in a
# schema and with a name that need quoting moves too.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $coordinator = PostgreSQL::Test::Cluster->new('coordinator');
my @workers = map { PostgreSQL::Test::Cluster->new("n$_") } 1 .. 3;
for my $node ($coordinator, @workers)
{
	$node->init;
	$node->append_conf('postgresql.conf', "max_prepared_transactions = 20\nshared_preload_libraries = 'ringshard'");
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION ringshard');
}
my %address = map { ("n$_" => sprintf('host=%s port=%d dbname=postgres', $workers[ $_ - 1 ]->host, $workers[ $_ - 1 ]->port)) } 1 .. 3;

# On every worker: the schemas of the distributed tables, and an unrelated
# public.items with the same columns and other ids.
for my $w (@workers)
{
	$w->safe_psql('postgres', q{
		CREATE SCHEMA app;
		CREATE SCHEMA "Odd Schema";
		CREATE TABLE public.items (id bigint, payload text);
		INSERT INTO public.items SELECT g, 'unrelated-' || g FROM generate_series(1001, 1400) g;
	});
}
my $unrelated = q{SELECT count(*) || ':' || md5(string_agg(i::text, ';' ORDER BY i.id)) FROM public.items i};
my @unrelated_before = map { $_->safe_psql('postgres', $unrelated) } @workers;

$coordinator->safe_psql('postgres', qq{
	SELECT ringshard.add_node('n1', '$address{n1}');
	SELECT ringshard.add_node('n2', '$address{n2}');
	SELECT count(*) FROM ringshard.sync_topology();
	CREATE SCHEMA app;
	CREATE TABLE app.items (id bigint, payload text);
	SELECT ringshard.distribute_table('app.items', 'id');
	SELECT count(*) FROM ringshard.create_distributed_table('app.items');
	INSERT INTO app.items SELECT g, 'app-' || g FROM generate_series(1, 300) g;
	CREATE SCHEMA "Odd Schema";
	CREATE TABLE "Odd Schema"."Odd ""Items""" ("Item Id" bigint, "Payload" text);
	SELECT ringshard.distribute_table('"Odd Schema"."Odd ""Items"""', 'Item Id');
	SELECT count(*) FROM ringshard.create_distributed_table('"Odd Schema"."Odd ""Items"""');
	INSERT INTO "Odd Schema"."Odd ""Items""" SELECT g, 'odd-' || g FROM generate_series(1, 120) g;
	CREATE TABLE owners_before AS SELECT g AS id, shard_for(g::bigint) AS owner FROM generate_series(1, 300) g;
});
$coordinator->safe_psql('postgres', "SELECT ringshard.add_node('n3', '$address{n3}')");
my $moving = $coordinator->safe_psql('postgres',
	q{SELECT count(*) FROM owners_before WHERE owner <> shard_for(id::bigint)});
cmp_ok($moving, '>', 0, "adding n3 moves some of app.items ($moving of 300 rows)");

# The dry run under the same search_path counts app.items rows, not public.items.
my ($rc, $out, $err) = $coordinator->psql('postgres',
	q{SET search_path = app, public; CALL ringshard.rebalance('app.items', dry_run => true)});
like($err, qr/rebalance plan of app\.items \(dry run, nothing changed\): \d+ steps, $moving rows to copy/,
	'the dry run counts the rows of app.items that move');

($rc, $out, $err) = $coordinator->psql('postgres', q{
	SET search_path = app, public;
	CALL ringshard.rebalance('app.items');
	CALL ringshard.rebalance('"Odd Schema"."Odd ""Items"""');
});
is($rc, 0, 'both rebalances succeed with search_path = app, public') or diag($err);
like($err, qr/rebalance of app\.items complete: \d+ steps, $moving rows copied, $moving deleted/,
	'the rebalance of app.items copied and deleted exactly the rows that move');

for my $i (1 .. 3)
{
	is($workers[ $i - 1 ]->safe_psql('postgres', $unrelated), $unrelated_before[ $i - 1 ],
		"n$i: public.items is untouched");
	my $expected = $coordinator->safe_psql('postgres',
		"SELECT coalesce(string_agg(g::text, ',' ORDER BY g), '') FROM generate_series(1, 300) g WHERE shard_for(g::bigint) = 'n$i'");
	is($workers[ $i - 1 ]->safe_psql('postgres', q{SELECT coalesce(string_agg(id::text, ',' ORDER BY id), '') FROM app.items}),
		$expected, "n$i holds exactly its rows of app.items");
	$expected = $coordinator->safe_psql('postgres',
		"SELECT coalesce(string_agg(g::text, ',' ORDER BY g), '') FROM generate_series(1, 120) g WHERE shard_for(g::bigint) = 'n$i'");
	is($workers[ $i - 1 ]->safe_psql('postgres',
		q{SELECT coalesce(string_agg("Item Id"::text, ',' ORDER BY "Item Id"), '') FROM "Odd Schema"."Odd ""Items"""}),
		$expected, "n$i holds exactly its rows of \"Odd Schema\".\"Odd \"\"Items\"\"\"");
}
cmp_ok($workers[2]->safe_psql('postgres', 'SELECT count(*) FROM app.items'), '>', 0, 'the new node received rows');
is($coordinator->safe_psql('postgres', q{SELECT count(*) FROM ringshard.cluster_fanout(NULL::app.items)}), '300',
	'all 300 rows of app.items are read back once');

$_->stop for ($coordinator, @workers);
done_testing();

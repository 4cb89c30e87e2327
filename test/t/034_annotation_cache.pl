# Whether a foreign table is distributed, and by what, is cached per session
# (src/routing/annotated_tables.c): the planner and the utility hook ask for
# every statement.  Another session's commit must reach that answer before
# the next statement acts on it, also inside a transaction block that began
# before the commit and in a parallel query: a stale "distributed" sends
# DROP TABLE to the nodes of a table that no longer is (their rows gone), a
# stale "not distributed" keeps ALTER TABLE on the coordinator (the nodes'
# tables then lack a column the coordinator's has).  A coordinator database
# and three worker databases of one server; two long-lived sessions.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('main');
$node->init;
$node->append_conf('postgresql.conf', "max_prepared_transactions = 20\nshared_preload_libraries = 'ringshard'");
$node->start;
my $setup = 'CREATE EXTENSION ringshard;';
for my $i (1 .. 3)
{
	$node->safe_psql('postgres', "CREATE DATABASE w$i");
	$node->safe_psql("w$i", 'CREATE EXTENSION ringshard');
	$setup .= sprintf("SELECT ringshard.add_node('w%d', 'host=%s port=%d dbname=w%d');", $i, $node->host, $node->port, $i);
}
$node->safe_psql('postgres', $setup . q{
	SELECT ringshard.set_replication_factor('default', 2);
	SELECT count(*) FROM ringshard.sync_topology();
	CREATE TABLE probe (i int);
});

# A distributed table of 20 rows (at R = 2: 40 copies over the nodes).
sub make_table
{
	my ($table) = @_;
	$node->safe_psql('postgres', qq{
		CREATE TABLE $table (id int PRIMARY KEY, v text);
		INSERT INTO $table SELECT g, 'x' || g FROM generate_series(1, 20) g;
		SELECT ringshard.distribute_table('$table', 'id');
		SELECT ringshard.create_distributed_table('$table');
	});
	return;
}

# What the nodes hold of a table: its rows over all nodes, or -1 where a node lacks it.
sub node_rows
{
	my ($table) = @_;
	my $total = 0;
	for my $i (1 .. 3)
	{
		my $exists = $node->safe_psql("w$i", "SELECT to_regclass('public.$table') IS NOT NULL");
		return -1 if $exists ne 't';
		$total += $node->safe_psql("w$i", "SELECT count(*) FROM public.$table");
	}
	return $total;
}

my $a = $node->background_psql('postgres', on_error_stop => 0);
my $b = $node->background_psql('postgres');
$_->query_safe('SET client_min_messages = warning') for ($a, $b);

# 1. A transaction block begun before another session undistributed the table.
make_table('t_drop');
$a->query_safe('SELECT count(*) FROM t_drop');
$a->query_safe('BEGIN');
$b->query_safe(q{SELECT ringshard.undistribute_table('t_drop')});
$a->query_safe('DROP FOREIGN TABLE t_drop');
$a->query_safe('COMMIT');
is(node_rows('t_drop'), 40, 'DROP in a transaction begun before another session undistributed the table stays on the coordinator');

# 2. The other way: a table distributed again while a transaction block is open.
make_table('t_alter');
$b->query_safe(q{SELECT ringshard.undistribute_table('t_alter')});
# (A reads the table once it is not distributed: an error, and A knows it as such)
my (undef, $failed) = $a->query('SELECT count(*) FROM t_alter');
ok($failed, 'a table no longer distributed cannot be read through the coordinator');
$a->{stderr} = '';	# (BackgroundPsql of PostgreSQL 15 keeps an error for the next query otherwise)
$a->query_safe('BEGIN');
$b->query_safe(q{SELECT ringshard.distribute_table('t_alter', 'id')});
$a->query_safe('ALTER FOREIGN TABLE t_alter ADD COLUMN c int');
$a->query_safe('COMMIT');
is( $node->safe_psql('w1',
		q{SELECT string_agg(attname, ',' ORDER BY attnum) FROM pg_attribute WHERE attrelid = 'public.t_alter'::regclass AND attnum > 0 AND NOT attisdropped}),
	'id,v,c',
	'ALTER in a transaction begun before another session distributed the table again reaches the nodes');
is($a->query_safe(q{INSERT INTO t_alter VALUES (100, 'n', 1); SELECT count(*) FROM t_alter}), '21',
	'and the new column takes writes');

# 3. A parallel query reads the annotation with its transaction's snapshot
# (no newer one may be taken there): what it read must not outlive the
# transaction.
make_table('t_parallel');
$a->query_safe('BEGIN ISOLATION LEVEL REPEATABLE READ');
$a->query_safe('SELECT 1');
$b->query_safe(q{SELECT ringshard.undistribute_table('t_parallel')});
$a->query_safe('SELECT count(*) FROM probe');
$a->query_safe('SET LOCAL force_parallel_mode = on');
$a->query_safe('SET LOCAL max_parallel_workers = 0');
$a->query_safe(q{SELECT shard_of(ROW(1, 'x')::t_parallel)});
$a->query_safe('COMMIT');
$a->query_safe('DROP FOREIGN TABLE t_parallel');
is(node_rows('t_parallel'), 40, 'an annotation read in a parallel query with an old snapshot is not kept after it');

$a->quit;
$b->quit;
done_testing();

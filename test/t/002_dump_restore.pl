# pg_dump / pg_restore of a database with rings, maps and annotated tables
# gives identical routing afterwards; so does pg_upgrade of the cluster;
# DROP EXTENSION leaves nothing behind.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('main');
$node->init;
$node->start;
$node->safe_psql('postgres', q{CREATE DATABASE source});
$node->safe_psql('source', q{
	CREATE EXTENSION ringshard;
	SELECT ringshard.set_replication_factor('default', 2);
	SELECT ringshard.add_node('shard-jakarta-01', 'host=127.0.0.1 port=6001');
	SELECT ringshard.add_node('shard-surabaya-02');
	SELECT ringshard.add_node('shard-makassar-03', weight => 1.5);
	SELECT ringshard.mark_node_down('shard-surabaya-02');
	SELECT ringshard.create_ring('memcached', algorithm => 'ketama');
	SELECT ringshard.add_node('10.0.0.1:11211', ring => 'memcached');
	SELECT ringshard.add_node('10.0.0.3:11211', ring => 'memcached', weight => 2);
	SELECT ringshard.load_partition_config($$version: "v1"
nodes:
- address: "0.0.0.0:4003"
  partition_start: 0
  partition_end: 127
- address: "0.0.0.0:4004"
  partition_start: 128
  partition_end: 255
$$);
	SELECT ringshard.create_partition_map('faces-map');
	SELECT ringshard.assign_partitions('shard-jakarta-01', 0, 200, 'faces-map');
	SELECT ringshard.assign_partitions('shard-makassar-03', 100, 255, 'faces-map');
	CREATE SCHEMA app;
	CREATE TABLE app."Citizens" (nik bigint PRIMARY KEY, name text);
	INSERT INTO app."Citizens" SELECT 3201012345670000 + g, 'c' || g FROM generate_series(1, 300) g;
	SELECT ringshard.distribute_table('app."Citizens"', 'nik');
	CREATE TABLE faces (keyspace_id text, face_id text, score float8);
	INSERT INTO faces SELECT 'ks-' || (g % 3), 'face-' || g, g / 300.0 FROM generate_series(1, 300) g;
	SELECT ringshard.distribute_table_by_partition('faces', 'face_id', keyspace_column => 'keyspace_id', map => 'faces-map');
	ALTER TABLE faces RENAME COLUMN face_id TO fid;
});

# Everything routing answers, as one text.
my $routing_sql = q{
	SELECT string_agg(x, E'\n' ORDER BY x) FROM (
		SELECT 'ring ' || g || ' ' || shard_for('k' || g) || ' ' || replicas_for('k' || g)::text AS x FROM generate_series(1, 200) g
		UNION ALL SELECT 'ketama ' || g || ' ' || shard_for('k' || g, 'memcached') FROM generate_series(1, 100) g
		UNION ALL SELECT 'map ' || g || ' ' || nodes_for('ks', 'k' || g)::text FROM generate_series(1, 100) g
		UNION ALL SELECT 'citizen ' || c.nik || ' ' || shard_of(c) || ' ' || replicas_of(c)::text FROM app."Citizens" c
		UNION ALL SELECT 'face ' || f.fid || ' ' || replicas_of(f)::text FROM faces f
		UNION ALL SELECT 'node ' || node_name || ' up=' || is_up || ' ' || coalesce(ringshard.server_address(server_name), '-') FROM ringshard.nodes
		UNION ALL SELECT 'reads avoid down nodes ' || bool_and(n.is_up)
		  FROM generate_series(1, 200) g JOIN ringshard.nodes n ON n.node_name = read_node_for('k' || g)
		UNION ALL SELECT 'config ' || ringshard.partition_config()
		UNION ALL SELECT 'rf ' || replication_factor FROM ringshard.rings WHERE ring_name = 'default'
		UNION ALL SELECT 'annotated ' || table_name::text || ' ' || key_column || ' ' || placed_by FROM ringshard.annotated_tables
	) s};

my $before = $node->safe_psql('source', $routing_sql);
like($before, qr/citizen 3201012345670001 /, 'the source routes annotated rows');
like($before, qr/reads avoid down nodes true/, 'the down node gets no reads');

my $dump = $node->basedir . '/source.dump';
command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', $node->connstr('source') ], 'pg_dump');
$node->safe_psql('postgres', q{CREATE DATABASE restored});
command_ok([ 'pg_restore', '--exit-on-error', '-d', $node->connstr('restored'), $dump ], 'pg_restore');

my $after = $node->safe_psql('restored', $routing_sql);
is($after, $before, 'routing after restore is identical, row for row');
is($node->safe_psql('restored', q{SELECT count(*) FROM ringshard.rings}), '2', 'no duplicate rings after restore');
is($node->safe_psql('restored', q{SELECT count(*) FROM ringshard.partition_maps}), '2', 'no duplicate maps after restore');
is($node->safe_psql('restored', q{SELECT key_column || ' ' || key_attnum FROM ringshard.distributed_tables WHERE table_name = 'faces'::regclass}),
	'fid 2', 'the renamed key column is restored with its attribute number');

# Nodes with an address are foreign servers of the extension's wrapper:
# like postgres_fdw's, they (and their user mappings) go only with CASCADE.
my ($drop_rc, $drop_out, $drop_err) = $node->psql('source', q{DROP EXTENSION ringshard});
like($drop_err, qr/server 0\.0\.0\.0:4003 depends on foreign-data wrapper ringshard/,
	'DROP EXTENSION names the node servers that depend on it');
# DROP EXTENSION ... CASCADE leaves nothing behind in the database that created it.
$node->safe_psql('source', q{DROP EXTENSION ringshard CASCADE});
is($node->safe_psql('source', q{SELECT count(*) FROM pg_foreign_server}), '0', 'the node servers are gone');
is($node->safe_psql('source', q{
	SELECT count(*) FROM pg_proc WHERE proname IN ('shard_for', 'replicas_for', 'ring_token', 'partition_for', 'shard_of', 'ringtoken_in')}),
	'0', 'no ringshard functions remain');
is($node->safe_psql('source', q{SELECT count(*) FROM pg_type WHERE typname = 'ringtoken'}), '0', 'the ringtoken type is gone');
is($node->safe_psql('source', q{SELECT count(*) FROM pg_event_trigger WHERE evtname LIKE 'ringshard%'}), '0', 'event triggers are gone');
is($node->safe_psql('source', q{SELECT count(*) FROM pg_namespace WHERE nspname = 'ringshard'}), '0', 'the schema is gone');
is($node->safe_psql('source', q{SELECT count(*) FROM app."Citizens"}), '300', 'user data is untouched');

# pg_upgrade of the whole cluster.  Its dump writes the extension's members
# one by one; a language whose handler or validator it does not dump comes
# out as a bare CREATE LANGUAGE, which PostgreSQL reads as CREATE EXTENSION
# of that name, and the upgrade stops half-way.
$node->stop;
my $new = PostgreSQL::Test::Cluster->new('upgraded');
$new->init;
my $bindir = $node->config_data('--bindir');
my $work = PostgreSQL::Test::Utils::tempdir;
chdir $work or die "cannot enter $work: $!";
command_ok([ "$bindir/pg_upgrade", '--no-sync', '-d', $node->data_dir, '-D', $new->data_dir, '-b', $bindir, '-B', $bindir,
			 '-s', $new->host, '-p', $node->port, '-P', $new->port ], 'pg_upgrade of a cluster with ringshard');
$new->start;
is($new->safe_psql('restored', $routing_sql), $before, 'routing after pg_upgrade is identical, row for row');
my ($up_rc, $up_out, $up_err) = $new->psql('restored', q{SELECT ringshard.add_node('shard-x', NULL, 'no-such-ring')});
like($up_err, qr/ring "no-such-ring" does not exist/, 'after pg_upgrade an administration error is reported');
unlike($up_err, qr/CONTEXT/, 'after pg_upgrade an administration error still comes without internal CONTEXT lines');
is($new->safe_psql('restored', q{SELECT string_agg(l.lanname || ' ' || h.proname || ' ' || v.proname, ', ' ORDER BY l.lanname)
	FROM pg_language l JOIN pg_proc h ON h.oid = l.lanplcallfoid JOIN pg_proc v ON v.oid = l.lanvalidator
	WHERE l.lanname LIKE 'ringshard%'}),
	'ringshard_plpgsql plpgsql_call_handler plpgsql_validator, ringshard_sql sql_call_handler sql_validator',
	'after pg_upgrade the languages keep their handlers and validators');
$new->stop;
done_testing();

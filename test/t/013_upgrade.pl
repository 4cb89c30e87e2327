# The upgrade from 1.0 to 1.1 (docs/upgrading.md).  A copy of the PostgreSQL
# installation under test gets ringshard 1.0, built from commit 7bee8a5 of
# this repository; a coordinator and three workers build 1.0 state with it
# (rings, maps, annotated tables, distributed tables written through 1.0, the
# topology pushed, a queued write).  Then the copy gets the 1.1 files that
# are installed (make install), the servers restart, and ALTER EXTENSION
# ringshard UPDATE runs on the workers, then on the coordinator.  Checked:
# routing is unchanged except as docs/routing.md §1 says (expected results
# come from a fresh 1.1 database), every row is where it was, the queued
# write is a dead letter, the extension's objects are exactly a fresh
# install's, the 1.0 distributed tables work as 1.1's once their rows are
# rehomed, pg_dump/pg_restore round-trips, and refused addresses stop the
# update with a hint that works.
#
# Every later release adds its update script and extends this test.
use strict;
use warnings;
use Cwd qw(getcwd);
use File::Basename qw(dirname);
use File::Copy qw(copy);
use File::Path qw(make_path remove_tree);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# The 1.0 release.
my $release_1_0 = '7bee8a5';

# ---------------------------------------------------------------------------
# A copy of the installation under test, with 1.0 built into it.

my $tmp = $PostgreSQL::Test::Utils::tmp_check;
my %config;
for my $item (qw(bindir sharedir pkglibdir includedir))
{
	my $value = `pg_config --$item`;
	die "pg_config --$item failed\n" if $? != 0;
	chomp $value;
	$config{$item} = $value;
}
# Copy the installation's directories to the same places under $copy, so
# that the copy's pg_config (which finds the rest relative to its own place,
# as Debian's and a source build's do) describes the copy.
my $prefix = $config{bindir};
$prefix = dirname($prefix) while index("$config{sharedir}/", "$prefix/") != 0 || index("$config{pkglibdir}/", "$prefix/") != 0;
my $copy = "$tmp/installation";
remove_tree($copy);
my $install_path = $copy . substr(dirname($config{bindir}), length $prefix);
for my $dir (dirname($config{bindir}), $config{sharedir}, $config{pkglibdir})
{
	my $target = $copy . substr($dir, length $prefix);
	next if -d $target;
	make_path(dirname($target));
	system_or_bail('cp', '-a', $dir, $target);
}
my $include_copy = $copy . substr($config{includedir}, length $prefix);
if (!-e $include_copy)
{
	make_path(dirname($include_copy));
	symlink($config{includedir}, $include_copy) or die "symlink $include_copy: $!";
}
my $pg_config = "$install_path/bin/pg_config";
my $copied_share = `$pg_config --sharedir`;
chomp $copied_share;
BAIL_OUT("the copy of the installation is not relocatable: its pg_config says $copied_share")
  unless $copied_share eq $copy . substr($config{sharedir}, length $prefix);
my $extension_dir = "$copied_share/extension";
# The version under test (1.0 updates to it through 1.1).
my ($current) = slurp_file(($ENV{TESTDIR} // getcwd()) . "/ringshard.control") =~ /^default_version = '([^']+)'/m;
my $libdir = `$pg_config --pkglibdir`;
chomp $libdir;
BAIL_OUT("ringshard 1.1 is not installed in $config{sharedir} (run make install first)")
  unless -f "$extension_dir/ringshard--1.0--1.1.sql" && -f "$extension_dir/ringshard--1.1.sql";

# Set the installed 1.1 files aside: 1.0's make install replaces them.
my $aside = "$tmp/ringshard-1.1-files";
remove_tree($aside);
make_path("$aside/bitcode");
copy("$libdir/ringshard.so", "$aside/ringshard.so") or die "copy: $!";
copy("$extension_dir/ringshard.control", "$aside/ringshard.control") or die "copy: $!";
copy("$extension_dir/ringshard--1.0.sql", "$aside/ringshard--1.0.sql") or die "copy: $!";
system_or_bail('cp', '-a', "$libdir/bitcode/ringshard", "$libdir/bitcode/ringshard.index.bc", "$aside/bitcode/")
  if -d "$libdir/bitcode/ringshard";

# 1.0's source, from this repository's history (a shallow clone lacks it).
my $tree = $ENV{TESTDIR} // getcwd();
my $source_1_0 = "$tmp/ringshard-1.0";
remove_tree($source_1_0);
make_path($source_1_0);
my $started = time;
system("git -c safe.directory='*' -C '$tree' archive $release_1_0 | tar -x -C '$source_1_0'") == 0
  or BAIL_OUT("cannot extract ringshard 1.0 (commit $release_1_0) from the repository at $tree: "
	  . "the test needs the history up to 1.0 (git fetch --unshallow in a shallow clone)");
{
	# a make of its own, not a part of the make that runs this test
	local %ENV = %ENV;
	delete @ENV{qw(MAKEFLAGS MAKELEVEL MFLAGS)};
	my $log = "$tmp/ringshard-1.0-build.log";
	system("make -C '$source_1_0' -s -j2 PG_CONFIG='$pg_config' >'$log' 2>&1 && "
		  . "make -C '$source_1_0' -s install PG_CONFIG='$pg_config' >>'$log' 2>&1") == 0
	  or BAIL_OUT("building ringshard 1.0 failed; see $log");
}
note sprintf('ringshard 1.0 built and installed in %d s', time - $started);
is(slurp_file("$aside/ringshard--1.0.sql"), slurp_file("$source_1_0/ringshard--1.0.sql"),
	'the shipped ringshard--1.0.sql is exactly the install script 1.0 builds');

# The 1.1 files back: what make install put there.
sub install_1_1
{
	copy("$aside/ringshard.so", "$libdir/ringshard.so") or die "copy: $!";
	copy("$aside/ringshard.control", "$extension_dir/ringshard.control") or die "copy: $!";
	copy("$aside/ringshard--1.0.sql", "$extension_dir/ringshard--1.0.sql") or die "copy: $!";
	if (-d "$aside/bitcode/ringshard")
	{
		remove_tree("$libdir/bitcode/ringshard");
		system_or_bail('cp', '-a', "$aside/bitcode/ringshard", "$aside/bitcode/ringshard.index.bc", "$libdir/bitcode/");
	}
}

# ---------------------------------------------------------------------------
# A 1.0 cluster: a coordinator and three workers.

my $coordinator = PostgreSQL::Test::Cluster->new('coordinator', install_path => $install_path);
my @workers = map { PostgreSQL::Test::Cluster->new("w$_", install_path => $install_path) } 1 .. 3;
for my $node ($coordinator, @workers)
{
	$node->init(extra => [ '--encoding=UTF8', '--no-locale' ]);
	$node->append_conf('postgresql.conf', "max_prepared_transactions = 10\n");
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION ringshard');
}
is($coordinator->safe_psql('postgres', q{SELECT extversion FROM pg_extension WHERE extname = 'ringshard'}),
	'1.0', 'the cluster runs ringshard 1.0');
my $superuser = $coordinator->safe_psql('postgres', 'SELECT current_user');
my ($w1, $w2, $w3) = @workers;

# Three forms of a 1.0 address: a connection string, one with a user name
# (1.1 moves it into a user mapping), and host:port.
$coordinator->safe_psql('postgres', sprintf(q{
	CREATE ROLE app;
	SELECT ringshard.set_replication_factor('default', 2);
	SELECT ringshard.add_node('w1', 'host=%s port=%d dbname=postgres');
	SELECT ringshard.add_node('w2', 'host=%s port=%d dbname=postgres user=%s');
	SELECT ringshard.add_node('w3', '%s:%d', weight => 2);
	SELECT ringshard.create_ring('kring', replication_factor => 2, algorithm => 'ketama');
	SELECT ringshard.add_node('w1', ring => 'kring');
	SELECT ringshard.add_node('w2', ring => 'kring', weight => 2);
	SELECT ringshard.assign_partitions('w1', 0, 99);
	SELECT ringshard.assign_partitions('w2', 100, 199);
	SELECT ringshard.assign_partitions('w3', 200, 255);
	SELECT ringshard.assign_partitions('w1', 200, 255);
	SELECT ringshard.create_partition_map('ksmap');
	SELECT ringshard.assign_partitions('w2', 0, 127, 'ksmap');
	SELECT ringshard.assign_partitions('w3', 128, 255, 'ksmap');
	SELECT count(*) FROM ringshard.sync_topology();
}, $w1->host, $w1->port, $w2->host, $w2->port, $superuser, $w3->host, $w3->port));

# Annotated tables (rows here), keys of many types.  ann_text also has
# objects that use the routing functions: a generated column, an index and
# a view; the update replaces those functions in place.
$coordinator->safe_psql('postgres', q{
	CREATE TABLE ann_char (k char(8) PRIMARY KEY, v integer);
	INSERT INTO ann_char SELECT left(md5(g::text), 1 + g % 8), g FROM generate_series(1, 60) g ON CONFLICT DO NOTHING;
	SELECT ringshard.distribute_table('ann_char', 'k');
	CREATE TABLE ann_num (k numeric PRIMARY KEY, v integer);
	INSERT INTO ann_num SELECT round(g / 4.0, 2), g FROM generate_series(1, 60) g;
	SELECT ringshard.distribute_table('ann_num', 'k', 'kring');
	CREATE TABLE ann_tstz (k timestamptz PRIMARY KEY, v integer);
	INSERT INTO ann_tstz SELECT timestamptz '2026-01-31 14:05:00+07' + g * interval '7 hours 1 minute', g FROM generate_series(1, 60) g;
	SELECT ringshard.distribute_table('ann_tstz', 'k');
	CREATE TABLE ann_text (k text PRIMARY KEY, v integer, tok ringtoken GENERATED ALWAYS AS (ring_token(k)) STORED);
	INSERT INTO ann_text (k, v) SELECT 'key-' || g, g FROM generate_series(1, 60) g;
	INSERT INTO ann_text (k, v) VALUES ('ñandú', 0);
	CREATE INDEX ann_text_token ON ann_text (ring_token(k));
	CREATE VIEW ann_text_routed AS SELECT k, shard_for(k) AS owner, ring_token(k) AS token FROM ann_text;
	SELECT ringshard.distribute_table('ann_text', 'k');
	CREATE TABLE ann_int (k integer PRIMARY KEY, v integer);
	INSERT INTO ann_int SELECT g * 37 - 500, g FROM generate_series(1, 60) g;
	SELECT ringshard.distribute_table_by_partition('ann_int', 'k', keyspace => 'ints');
	CREATE TABLE ann_uuid (k uuid PRIMARY KEY, v integer);
	INSERT INTO ann_uuid SELECT md5(g::text)::uuid, g FROM generate_series(1, 60) g;
	SELECT ringshard.distribute_table('ann_uuid', 'k');
	CREATE TABLE ann_ks (ks integer, k text, v integer, PRIMARY KEY (ks, k));
	INSERT INTO ann_ks SELECT g % 5, 'face-' || g, g FROM generate_series(1, 60) g;
	SELECT ringshard.distribute_table_by_partition('ann_ks', 'k', keyspace_column => 'ks', map => 'ksmap');
	CREATE TABLE ann_ksn (ks numeric, k bigint, v integer, PRIMARY KEY (ks, k));
	INSERT INTO ann_ksn SELECT (g % 4) / 2.0, g, g FROM generate_series(1, 60) g;
	SELECT ringshard.distribute_table_by_partition('ann_ksn', 'k', keyspace_column => 'ks', map => 'ksmap');
	CREATE TABLE ann_float (k float8 PRIMARY KEY, v integer);
	INSERT INTO ann_float SELECT g / 3.0, g FROM generate_series(1, 20) g;
	SELECT ringshard.distribute_table('ann_float', 'k');
});

# 1.0 distributed tables, written through 1.0's trigger.  d_int has an owner
# of its own, privileges, comments, a sequence, a CHECK constraint and a
# primary key (a foreign table cannot keep that one); d_char and d_map have
# keys whose bytes changed.
$coordinator->safe_psql('postgres', q{
	CREATE TABLE d_int (id bigint PRIMARY KEY, seq bigserial, note text NOT NULL DEFAULT 'none',
	                    amount numeric(8,2) CONSTRAINT amount_positive CHECK (amount >= 0));
	COMMENT ON TABLE d_int IS 'integers, distributed by 1.0';
	COMMENT ON COLUMN d_int.note IS 'a note';
	ALTER TABLE d_int OWNER TO app;
	GRANT SELECT ON d_int TO PUBLIC;
	SELECT ringshard.distribute_table('d_int', 'id');
	SELECT count(*) FROM ringshard.create_distributed_table('d_int');
	INSERT INTO d_int (id, note, amount) SELECT g, 'n' || g, g * 1.5 FROM generate_series(1, 150) g;

	CREATE TABLE d_char (code char(6), label text);
	SELECT ringshard.distribute_table('d_char', 'code');
	SELECT count(*) FROM ringshard.create_distributed_table('d_char');
	INSERT INTO d_char SELECT left(md5(g::text), 1 + g % 6), 'label ' || g FROM generate_series(1, 150) g;

	CREATE TABLE d_map (ks text, amount numeric, label text);
	SELECT ringshard.distribute_table_by_partition('d_map', 'amount', keyspace_column => 'ks');
	SELECT count(*) FROM ringshard.create_distributed_table('d_map');
	INSERT INTO d_map SELECT 'ks-' || (g % 3), round(g / 8.0, 3), 'label ' || g FROM generate_series(1, 150) g;

	-- 1.0 left the rows a table had before it was distributed where they were
	CREATE TABLE d_old (id integer, note text);
	INSERT INTO d_old SELECT g, 'old ' || g FROM generate_series(1, 12) g;
	SELECT ringshard.distribute_table('d_old', 'id');
	SELECT count(*) FROM ringshard.create_distributed_table('d_old');

	-- a view on a distributed table: the update refuses it, as create_distributed_table does
	CREATE VIEW d_int_notes AS SELECT id, note FROM d_int;

	-- a table whose ring changed under 1.0 and that was not rebalanced
	SELECT ringshard.create_ring('lring');
	SELECT ringshard.add_node('w1', ring => 'lring');
	SELECT ringshard.add_node('w2', ring => 'lring');
	SELECT count(*) FROM ringshard.sync_topology();
	CREATE TABLE d_late (id integer, note text);
	SELECT ringshard.distribute_table('d_late', 'id', 'lring');
	SELECT count(*) FROM ringshard.create_distributed_table('d_late');
	INSERT INTO d_late SELECT g, 'late ' || g FROM generate_series(1, 40) g;
	SELECT ringshard.add_node('w3', ring => 'lring');
	SELECT count(*) FROM ringshard.sync_topology();
});
my $d_old_rows = rows_of($coordinator, 'd_old');
my @distributed = ('d_int', 'd_char', 'd_map', 'd_late');

# A write queued for w3 while it is down.
my $queued_id = $coordinator->safe_psql('postgres',
	q{SELECT g FROM generate_series(1000, 2000) g WHERE 'w3' = ANY (replicas_for(g::bigint)) LIMIT 1});
$w3->stop;
$coordinator->safe_psql('postgres', "INSERT INTO d_int (id, note, amount) VALUES ($queued_id, 'queued', 7)");
$w3->start;
my $queued_payload = $coordinator->safe_psql('postgres', q{SELECT payload::text FROM ringshard.write_queue});
like($queued_payload, qr/"id":$queued_id/, '1.0 queued the write for the node that was down');

# ---------------------------------------------------------------------------
# What 1.0 gives, to compare with afterwards.

# Keys: a label, the type, the literal, and its canonical bytes as docs/routing.md
# §1 gives them (undef: 1.1 refuses the type).
my @keys = (
	[ 'text', 'text', 'key-1', 'key-1' ],
	[ 'text non-ASCII', 'text', 'ñandú', 'ñandú' ],
	[ 'text digits', 'text', '3201012345670001', '3201012345670001' ],
	[ 'integer', 'integer', '42', '42' ],
	[ 'integer negative', 'integer', '-7', '-7' ],
	[ 'smallint', 'smallint', '5', '5' ],
	[ 'bigint', 'bigint', '3201012345670001', '3201012345670001' ],
	[ 'uuid', 'uuid', 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11' ],
	[ 'boolean', 'boolean', 'true', 't' ],
	[ 'char(8) short', 'character(8)', 'ab', 'ab' ],
	[ 'char(8) key', 'character(8)', 'key-1', 'key-1' ],
	[ 'char(5) full', 'character(5)', 'abcde', 'abcde' ],
	[ 'numeric trailing zero', 'numeric', '1.50', '1.5' ],
	[ 'numeric zero with a scale', 'numeric', '-0.000', '0' ],
	[ 'numeric whole', 'numeric', '100', '100' ],
	[ 'numeric plain', 'numeric', '2.5', '2.5' ],
	[ 'date', 'date', '2026-01-31', '2026-01-31' ],
	[ 'timestamp', 'timestamp', '2026-01-31 07:05:00.250', '2026-01-31 07:05:00.25' ],
	[ 'timestamptz', 'timestamptz', '2026-01-31 14:05:00+07', '2026-01-31 07:05:00+00' ],
	[ 'double precision', 'double precision', '1.5', undef ],
	[ 'interval', 'interval', '1 day', undef ]);

# Session settings that 1.0's text forms depend on and 1.1's bytes do not.
my $settings = q{SET TimeZone = 'Asia/Jakarta'; SET DateStyle = 'SQL, DMY';};

# Every routing function of a value, as one line.
sub routing_of
{
	my ($value) = @_;
	return "ring_token($value)::text || ' ' || shard_for($value) || ' ' || replicas_for($value)::text || ' ' || "
	  . "shard_for($value, 'kring') || ' ' || replicas_for($value, 'kring')::text || ' ' || "
	  . "partition_for('ints', $value) || ' ' || nodes_for('ints', $value)::text";
}

# The routing of every key of @keys (of those 1.1 routes, with $routed_only).
sub routing_of_keys
{
	my ($node, $db, $routed_only) = @_;
	my %result;
	for my $k (@keys)
	{
		my ($label, $type, $literal, $canonical) = @$k;
		next if $routed_only && !defined $canonical;
		$result{$label} = $node->safe_psql($db,
			$settings . sprintf('SELECT %s FROM (SELECT %s::%s AS v) s', routing_of('v'), quote($literal), $type));
	}
	return \%result;
}

# The text 1.0 hashed for a key: its output in the session (char(n) with its
# padding, a boolean as t or f).
sub form_1_0
{
	my ($type, $literal) = @_;
	my $expression =
	    $type =~ /^character\((\d+)\)$/ ? "rpad(v::text, $1)"
	  : $type eq 'boolean' ? q{CASE WHEN v THEN 't' ELSE 'f' END}
	  : 'v::text';
	return $coordinator->safe_psql('postgres',
		$settings . sprintf('SELECT %s FROM (SELECT %s::%s AS v) s', $expression, quote($literal), $type));
}

sub quote
{
	my ($text) = @_;
	$text =~ s/'/''/g;
	return "'$text'";
}

my $routing_1_0 = routing_of_keys($coordinator, 'postgres', 0);
my %form_1_0 = map { ($_->[0] => form_1_0($_->[1], $_->[2])) } @keys;

# The rows of every table, as text.
sub rows_of
{
	my ($node, $table) = @_;
	return $node->safe_psql('postgres', "SELECT string_agg(t::text, E'\\n' ORDER BY t::text) FROM $table t");
}
my @annotated = qw(ann_char ann_num ann_tstz ann_text ann_int ann_uuid ann_ks ann_ksn ann_float);
my %local_rows = map { ($_ => rows_of($coordinator, $_)) } @annotated;
my %annotated_replicas = map {
	($_ => $coordinator->safe_psql('postgres',
		"SELECT string_agg(t::text || ' ' || replicas_of(t)::text, E'\\n' ORDER BY t::text) FROM $_ t"))
} qw(ann_text ann_int ann_uuid ann_ks ann_float);
my %worker_rows;
for my $i (0 .. 2)
{
	$worker_rows{"w@{[$i + 1]} $_"} = rows_of($workers[$i], $_) for @distributed;
}
# Every row of a distributed table, once: the union of the workers' copies.
my %all_rows;
for my $table (@distributed)
{
	my %seen;
	$seen{$_} = 1 for grep { $_ ne '' } map { split /\n/, $worker_rows{"w$_ $table"} } 1 .. 3;
	$all_rows{$table} = join("\n", sort { $a cmp $b } keys %seen);
}
is(scalar(split /\n/, $all_rows{d_int}), 151, 'the workers hold the 151 rows of d_int (the queued one on its other replica)');
is(scalar(split /\n/, $all_rows{d_char}), 150, 'and the 150 of d_char');
is(scalar(split /\n/, $all_rows{d_map}), 150, 'and the 150 of d_map');
is(scalar(split /\n/, $all_rows{d_late}), 40, 'and the 40 of d_late');

my $catalog_sql = q{
	SELECT string_agg(x, E'\n' ORDER BY x) FROM (
		SELECT 'ring ' || r::text AS x FROM ringshard.rings r
		UNION ALL SELECT format('member (%s,%s,%s)', m.ring_name, m.node_name, m.weight) FROM ringshard.ring_members m
		UNION ALL SELECT 'map ' || p::text FROM ringshard.partition_maps p
		UNION ALL SELECT 'assignment ' || a::text FROM ringshard.partition_assignments a
		UNION ALL SELECT 'node ' || n.node_name || ' up=' || n.is_up FROM ringshard.nodes n
		UNION ALL SELECT format('annotation %s %s %s %s %s %s %s', d.table_name::text, d.key_column, d.key_attnum, d.ring_name,
		                        d.map_name, d.keyspace, d.keyspace_column) FROM ringshard.distributed_tables d
		UNION ALL SELECT format('state %s %s %s', s.local_node, s.topology_version, s.coordinator_id) FROM ringshard.cluster_state s
	) c};
my $catalog_1_0 = $coordinator->safe_psql('postgres', $catalog_sql);
my @worker_catalog_1_0 = map { $_->safe_psql('postgres', $catalog_sql) } @workers;
like($worker_catalog_1_0[0], qr/state w1 \d+ /, 'the workers hold the topology, with their names and its version');
my $address_w3 = sprintf('%s:%d', $w3->host, $w3->port);

# ---------------------------------------------------------------------------
# Install 1.1 (the files make install put in place) and restart; the
# coordinator preloads the library, as 1.1 requires.

$_->stop for $coordinator, @workers;
install_1_1();
$coordinator->append_conf('postgresql.conf', "shared_preload_libraries = 'ringshard'\n");
$_->start for $coordinator, @workers;

my ($rc, $out, $err) = $coordinator->psql('postgres', q{SELECT shard_for('key-1')});
like($err, qr/ringshard library version \Q$current\E does not match the extension's SQL version 1.0 in this database/,
	"until the update, the $current library refuses the 1.0 SQL objects");
like($err, qr/HINT:  Run ALTER EXTENSION ringshard UPDATE in this database/, 'and says what to run');

# ---------------------------------------------------------------------------
# 1.0 SQL objects with the 1.1 library, in a database of their own: every C
# function of 1.0 errors or answers, none crashes the server; addresses 1.1
# refuses stop the update with a hint that works; a user object that uses a
# removed overload stops it with PostgreSQL's dependency error.  The
# database is LATIN1: text keys route differently there in 1.1.

$coordinator->safe_psql('postgres', q{CREATE DATABASE legacy ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0});
($rc, $out, $err) = $coordinator->psql('legacy', q{CREATE EXTENSION ringshard VERSION '1.0'});
is($rc, 0, 'CREATE EXTENSION ringshard VERSION 1.0 works with the 1.1 library (every C symbol of 1.0 is in it)')
  or diag $err;
my $started_at = $coordinator->safe_psql('postgres', 'SELECT pg_postmaster_start_time()');
($rc, $out, $err) = $coordinator->psql('legacy', q{
	CREATE TABLE legacy_t (k text PRIMARY KEY, v integer);
	INSERT INTO legacy_t VALUES ('a', 1), ('b', 2);
	DO $calls$
	DECLARE
		f record;
		args text;
		answered integer := 0;
		refused integer := 0;
	BEGIN
		FOR f IN
			SELECT p.proname, n.nspname, p.proargtypes::oid[] AS types
			  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
			  JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
			  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'ringshard'
			 WHERE p.prolang = (SELECT l.oid FROM pg_language l WHERE l.lanname = 'c')
			   AND p.prorettype NOT IN ('trigger'::regtype, 'event_trigger'::regtype)
			   AND NOT p.proargtypes::oid[] && ARRAY['cstring'::regtype, 'internal'::regtype]::oid[]
			 ORDER BY p.oid
		LOOP
			SELECT string_agg(CASE t
				WHEN 'text'::regtype THEN '''k1'''
				WHEN 'character'::regtype THEN '''k1''::character(4)'
				WHEN 'anyelement'::regtype THEN CASE WHEN f.proname LIKE 'cluster%' THEN 'NULL::legacy_t' ELSE '42' END
				WHEN 'integer'::regtype THEN '1'
				WHEN 'bigint'::regtype THEN '1'
				WHEN 'double precision'::regtype THEN '1.0'
				WHEN 'numeric'::regtype THEN '1'
				WHEN 'regclass'::regtype THEN '''legacy_t''::regclass'
				WHEN 'record'::regtype THEN '(SELECT l FROM legacy_t l LIMIT 1)'
				WHEN 'text[]'::regtype THEN '''{}''::text[]'
				WHEN 'integer[]'::regtype THEN '''{}''::integer[]'
				WHEN 'double precision[]'::regtype THEN '''{}''::float8[]'
				WHEN 'json'::regtype THEN '''{}''::json'
				WHEN 'name'::regtype THEN '''k'''
				WHEN 'boolean'::regtype THEN 'false'
				WHEN 'interval'::regtype THEN '''1 day'''
				WHEN 'ringtoken'::regtype THEN '1::ringtoken'
				ELSE 'NULL' END, ', ' ORDER BY i) INTO args
			  FROM unnest(f.types) WITH ORDINALITY u(t, i);
			BEGIN
				EXECUTE format('SELECT count(*) FROM %I.%I(%s) x', f.nspname, f.proname, coalesce(args, ''));
				answered := answered + 1;
			EXCEPTION WHEN OTHERS THEN
				refused := refused + 1;
			END;
		END LOOP;
		RAISE NOTICE 'called: % answered, % refused', answered, refused;
	END
	$calls$;
	SELECT 'alive';
});
my ($answered, $refused) = $err =~ /called: (\d+) answered, (\d+) refused/;
is($out, 'alive', 'every C function of 1.0 was called with the 1.1 library, and none crashed the server');
is(($answered // 0) + ($refused // 0), $coordinator->safe_psql('legacy', q{
	SELECT count(*) FROM pg_proc p JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
	 WHERE d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'ringshard')
	   AND p.prolang = (SELECT l.oid FROM pg_language l WHERE l.lanname = 'c')
	   AND p.prorettype NOT IN ('trigger'::regtype, 'event_trigger'::regtype)
	   AND NOT p.proargtypes::oid[] && ARRAY['cstring'::regtype, 'internal'::regtype]::oid[]}),
	"that is, all $answered + $refused of them but the type's and triggers' (called as such below)");
cmp_ok($refused // 0, '>', 30, 'most of them refuse');
($rc, $out, $err) = $coordinator->psql('legacy', q{
	CREATE TABLE routed (k text);
	CREATE TRIGGER ringshard_route_write BEFORE INSERT ON routed FOR EACH ROW EXECUTE FUNCTION ringshard.route_write();
	INSERT INTO routed VALUES ('x')});
like($err, qr/does not match the extension's SQL version 1.0/, 'a 1.0 trigger whose function 1.1 dropped refuses with the version error');
($rc, $out, $err) = $coordinator->psql('legacy', q{SELECT count(*) FROM ringshard.node_health()});
like($err, qr/does not match the extension's SQL version 1.0/,
	'so does node_health(), whose 1.0 rows have another shape than 1.1\'s');
($rc, $out, $err) = $coordinator->psql('legacy', q{SELECT ringshard.reads_here(l, '{}') FROM legacy_t l});
like($err, qr/does not match the extension's SQL version 1.0/,
	'so does reads_here(row, excluded), whose arguments 1.1 changed');
($rc, $out, $err) = $coordinator->psql('legacy', q{
	CREATE TABLE guarded (k text);
	CREATE TRIGGER ringshard_reject_misrouted_rows BEFORE INSERT ON guarded
		FOR EACH ROW EXECUTE FUNCTION ringshard.reject_misrouted_rows();
	INSERT INTO guarded VALUES ('x')});
like($err, qr/ERROR: /, 'the trigger of 1.0 workers, whose symbol 1.1 keeps, errors (no topology of this version to check rows against)');
is($coordinator->safe_psql('postgres', 'SELECT pg_postmaster_start_time()'), $started_at, 'the server never restarted');
$coordinator->safe_psql('legacy', 'DROP TABLE routed; DROP TABLE guarded');

# Nodes 1.1 cannot take as they are (1.0's add_node needs the 1.0 library: the
# rows go in directly, as add_node would have put them).
my $long_name = 'n' x 64;
$coordinator->safe_psql('legacy', sprintf(q{
	INSERT INTO ringshard.nodes (node_name, address) VALUES
		('%s', 'host=%s port=%d'),
		('bad', 'host=%s port=%d dbname=legacy fallback_application_name=x passfile=/nowhere');
	CREATE TABLE latin (k text PRIMARY KEY);
	INSERT INTO ringshard.distributed_tables (table_name, key_column, key_attnum, ring_name) VALUES ('latin', 'k', 0, 'default');
	CREATE VIEW padded AS SELECT ring_token('ab'::char(4)) AS token;
}, $long_name, $w1->host, $w1->port, $w1->host, $w1->port));
sub legacy_update
{
	my ($rc, $out, $err) = $coordinator->psql('legacy', 'ALTER EXTENSION ringshard UPDATE');
	my $version = $coordinator->safe_psql('legacy', q{SELECT extversion FROM pg_extension WHERE extname = 'ringshard'});
	return ($rc, $err, $version);
}
my $version;
($rc, $err, $version) = legacy_update();
like($err, qr/ERROR:  the address of node "bad" sets "fallback_application_name", "passfile", which ringshard 1.1 does not allow/,
	'an address 1.1 refuses stops the update, naming the node and the options');
my ($fix) = $err =~ /HINT:  Give the node an address without them, for example: (UPDATE ringshard\.nodes SET address = .*? WHERE node_name = 'bad';)/;
ok(defined $fix, 'the hint gives the UPDATE that fixes the row');
is($version, '1.0', 'and the database is left as it was');
$coordinator->safe_psql('legacy', $fix // 'SELECT 1');
is($coordinator->safe_psql('legacy', q{SELECT count(*) FROM ringshard.nodes WHERE node_name = 'bad' AND address NOT LIKE '%fallback%'}), '1',
	'that UPDATE works on the 1.0 catalog with the 1.1 library');
($rc, $err, $version) = legacy_update();
like($err, qr/ERROR:  node name "n{64}" is too long for a node with an address/, 'a node name too long for a server stops the update');
like($err, qr/HINT:  .*shorter name/, 'with a hint');
is($version, '1.0', 'and the database is left as it was');
$coordinator->safe_psql('legacy', "DELETE FROM ringshard.nodes WHERE node_name = '$long_name'");
($rc, $err, $version) = legacy_update();
like($err, qr/ERROR:  cannot drop function ring_token\(character\) because other objects depend on it/,
	'a view that uses a removed char(n) overload stops the update with PostgreSQL\'s dependency error');
is($version, '1.0', 'and the database is left as it was');
$coordinator->safe_psql('legacy', 'DROP VIEW padded');
($rc, $err, $version) = legacy_update();
is($version, $current, 'then the update runs (through 1.1)');
like($err, qr/WARNING:  table public\.latin routes differently in ringshard 1\.1: non-ASCII text is routed by its UTF-8 bytes now/,
	'and warns that text keys route by their UTF-8 bytes in a database that is not UTF-8');
is($coordinator->safe_psql('legacy', q{SELECT ringshard.server_address(server_name) FROM ringshard.nodes WHERE node_name = 'bad'}),
	sprintf(q{dbname='legacy' host='%s' port='%d'}, $w1->host, $w1->port), 'the corrected address is the node\'s server');

# ---------------------------------------------------------------------------
# The workers, then the coordinator.

for my $i (0 .. 2)
{
	my $w = $workers[$i];
	($rc, $out, $err) = $w->psql('postgres', 'ALTER EXTENSION ringshard UPDATE');
	is($rc, 0, "w@{[$i + 1]} updates") or diag $err;
	is($w->safe_psql('postgres', q{SELECT to_regclass('ringshard.replayed_writes') IS NULL}), 't',
		"w@{[$i + 1]}: replayed_writes is gone");
	is($w->safe_psql('postgres', $catalog_sql), $worker_catalog_1_0[$i], "w@{[$i + 1]}: its topology, name and version are kept");
	is($w->safe_psql('postgres', q{SELECT count(*) FROM ringshard.ring_members WHERE zone IS NOT NULL OR tokens IS NOT NULL}),
		'0', "w@{[$i + 1]}: no member has a zone or explicit tokens (1.2's, absent before)");
	is(rows_of($w, $_), $worker_rows{"w@{[$i + 1]} $_"}, "w@{[$i + 1]}: $_ holds the same rows") for @distributed;
}
($rc, $out, $err) = $w1->psql('postgres',
	q{INSERT INTO d_int (id, seq, note, amount) SELECT g, 0, 'misrouted', 1 FROM generate_series(1, 50) g WHERE NOT ('w1' = ANY (replicas_for(g::bigint))) LIMIT 1});
like($err, qr/ERROR: .*w1/, 'a worker still refuses a row that is not its own');

# The coordinator's update needs no node: w1 is down meanwhile.  A key of a
# type 1.1 refuses stops it first, then a view on a 1.0 distributed table.
$w1->stop;
($rc, $out, $err) = $coordinator->psql('postgres', 'ALTER EXTENSION ringshard UPDATE');
like($err, qr/ERROR:  ringshard 1\.1 cannot route the keys of public\.ann_float\.k \(double precision\)/,
	'a key of a type 1.1 refuses stops the update, named');
my ($key_fix) = $err =~ /HINT:  Make each such column text, which routes its keys by that text as 1\.0 did: (ALTER TABLE public\.ann_float ALTER COLUMN k TYPE text;)/;
ok(defined $key_fix, 'the hint gives the statement that makes it text');
is($coordinator->safe_psql('postgres', q{SELECT extversion FROM pg_extension WHERE extname = 'ringshard'}), '1.0',
	'and the coordinator is left as it was');
$coordinator->safe_psql('postgres', $key_fix // 'SELECT 1');
($rc, $out, $err) = $coordinator->psql('postgres', 'ALTER EXTENSION ringshard UPDATE');
like($err, qr/ERROR:  table d_int cannot be distributed while other objects depend on it\nDETAIL:  Depending on it: view public\.d_int_notes\./,
	'a view on a 1.0 distributed table stops the update, named');
is($coordinator->safe_psql('postgres', q{SELECT extversion FROM pg_extension WHERE extname = 'ringshard'}), '1.0',
	'and the coordinator is left as it was');
$coordinator->safe_psql('postgres', 'DROP VIEW d_int_notes');
($rc, $out, $err) = $coordinator->psql('postgres', 'ALTER EXTENSION ringshard UPDATE');
is($rc, 0, 'once it is dropped, the coordinator updates, with a node down') or diag $err;
my $update_messages = $err;
$w1->start;
is($coordinator->safe_psql('postgres', q{SELECT sql_version || ' ' || library_version FROM ringshard.version()}), "$current $current",
	"the coordinator runs $current");

# What the update said.
for my $table (qw(ann_char ann_num ann_tstz ann_ksn d_char d_map))
{
	like($update_messages, qr/WARNING:  (distributed )?table public\.$table routes differently in ringshard 1\.1/,
		"the update warns that $table routes differently");
}
for my $table (qw(ann_text ann_int ann_uuid ann_ks ann_float d_int))
{
	unlike($update_messages, qr/public\.$table routes differently/, "but not for $table, whose keys route as before");
}
like($update_messages, qr/HINT:  .*CALL ringshard\.rehome_rows\('public\.d_char'\)/, 'the hint for d_char names rehome_rows');
like($update_messages,
	qr/WARNING:  distributed tables public\.d_char, public\.d_int, public\.d_late, public\.d_map, public\.d_old are foreign tables of server ringshard_cluster now/,
	'it names the converted distributed tables');
like($update_messages, qr/SELECT ringshard\.push_table_definition\('public\.d_int'\)/, 'and the step that brings their nodes to 1.1');
like($update_messages, qr/WARNING:  1 writes queued under ringshard 1\.0 are dead letters now/, 'it says the queued write is a dead letter');
like($update_messages, qr/WARNING:  distributed table public\.d_late is laid out under an earlier topology than the current one/,
	'and that d_late was not rebalanced after its ring changed');
like($update_messages, qr/WARNING:  node "w2": the user name of its address is in a user mapping for PUBLIC now/,
	'and where the user name of an address went');
like($update_messages, qr/WARNING:  distributed table public\.d_int keeps no constraint d_int_pkey on the coordinator/,
	'and which constraint the coordinator\'s table lost');
like($update_messages, qr/WARNING:  superusers and the watchdog now need a user mapping with a password for these nodes: w1 \(/,
	'and that no address of 1.1 is trusted with the server account\'s own credentials');
my ($trust) = $update_messages =~ /HINT:  Check each address, then, as a superuser: (ALTER SERVER [^\n]*)/;
ok(defined $trust && $trust =~ /ALTER SERVER w1 OPTIONS \(ADD ambient_credentials 'true'\);/,
	'with the statements that trust them');
# This test's addresses are its own: trusted as the hint says.
$coordinator->safe_psql('postgres', $trust // 'SELECT 1');

# ---------------------------------------------------------------------------
# The catalog and the routing.

my $catalog_1_1 = $coordinator->safe_psql('postgres', $catalog_sql);
(my $catalog_expected = $catalog_1_0) =~ s/^node w3 up=true$/node w3 up=false/m;
is($catalog_1_1, $catalog_expected,
	'rings, members, maps, assignments, nodes, annotations and cluster state are kept (w3, which misses a write, is down)');
is($coordinator->safe_psql('postgres', q{
	SELECT string_agg(format('%s %s %s', n.node_name, n.server_name, ringshard.server_address(n.server_name)), E'\n' ORDER BY n.node_name)
	  FROM ringshard.nodes n}),
	sprintf(qq{w1 w1 dbname='postgres' host='%s' port='%d'\nw2 w2 dbname='postgres' host='%s' port='%d'\nw3 w3 %s},
		$w1->host, $w1->port, $w2->host, $w2->port, $address_w3),
	'every address is a foreign server of the node\'s name, without the user name');
is($coordinator->safe_psql('postgres', q{
	SELECT string_agg(format('%s %s %s', m.srvname, m.usename, array_to_string(m.umoptions, ',')), E'\n') FROM pg_user_mappings m}),
	"w2 public user=$superuser", 'the user name is a user mapping for PUBLIC');
is($coordinator->safe_psql('postgres', q{
	SELECT string_agg(s.srvname || ' ' || s.srvowner::regrole, ', ' ORDER BY s.srvname) FROM pg_foreign_server s
	 WHERE s.srvname LIKE 'w_'}),
	'w1 ringshard_admin, w2 ringshard_admin, w3 ringshard_admin', 'the servers belong to ringshard_admin, as add_node makes them');

# Expected routing: a fresh 1.1 database with the same topology.
$coordinator->safe_psql('postgres', 'CREATE DATABASE fresh');
$coordinator->safe_psql('fresh', 'CREATE EXTENSION ringshard');
my $topology_copy = $coordinator->safe_psql('postgres', q{
	SELECT string_agg(s, E';\n') FROM (
		SELECT format('INSERT INTO ringshard.nodes (node_name) VALUES (%L)', n.node_name) AS s FROM ringshard.nodes n
		UNION ALL SELECT format('INSERT INTO ringshard.rings VALUES (%L, %L, %s, %s)', r.ring_name, r.algorithm, r.vnodes, r.replication_factor)
		  FROM ringshard.rings r
		UNION ALL SELECT format('INSERT INTO ringshard.ring_members VALUES (%L, %L, %s)', m.ring_name, m.node_name, m.weight)
		  FROM ringshard.ring_members m
		UNION ALL SELECT format('INSERT INTO ringshard.partition_maps VALUES (%L) ON CONFLICT DO NOTHING', p.map_name)
		  FROM ringshard.partition_maps p
		UNION ALL SELECT format('INSERT INTO ringshard.partition_assignments VALUES (%L, %L, %s, %s)', a.map_name, a.node_name,
		                        a.partition_start, a.partition_end)
		  FROM ringshard.partition_assignments a) x});
$coordinator->safe_psql('fresh', $topology_copy);

my $routing_after = routing_of_keys($coordinator, 'postgres', 1);
my $routing_fresh = routing_of_keys($coordinator, 'fresh', 1);
for my $k (@keys)
{
	my ($label, $type, $literal, $canonical) = @$k;
	if (!defined $canonical)
	{
		($rc, $out, $err) = $coordinator->psql('postgres', sprintf('SELECT ring_token(%s::%s)', quote($literal), $type));
		like($err, qr/ERROR: .*$type.*\nHINT: .*text/s, "$label: 1.1 refuses the key, with a hint to cast it to text");
		ok($routing_1_0->{$label} ne '', "$label: (1.0 routed it)");
		next;
	}
	is($routing_after->{$label}, $routing_fresh->{$label}, "$label: routes as in a fresh 1.1 database");
	my $by_canonical = $coordinator->safe_psql('fresh', sprintf('SELECT %s FROM (SELECT %s::text AS v) s', routing_of('v'), quote($canonical)));
	is($routing_fresh->{$label}, $by_canonical, "$label: 1.1 routes it by the bytes §1 gives ('$canonical')");
	my $by_form_1_0 = $coordinator->safe_psql('fresh',
		sprintf('SELECT %s FROM (SELECT %s::text AS v) s', routing_of('v'), quote($form_1_0{$label})));
	is($routing_1_0->{$label}, $by_form_1_0, "$label: 1.0 routed it by its text '$form_1_0{$label}'");
	if ($form_1_0{$label} eq $canonical)
	{
		is($routing_after->{$label}, $routing_1_0->{$label}, "$label: unchanged by the update");
	}
	else
	{
		my ($token_1_0) = split / /, $routing_1_0->{$label};
		my ($token_1_1) = split / /, $routing_after->{$label};
		isnt($token_1_1, $token_1_0, "$label: its token changed, as its bytes did");
	}
}

# Annotated tables: every row kept; rows route by the functions above.
for my $table (@annotated)
{
	is(rows_of($coordinator, $table), $local_rows{$table}, "$table: every row is kept");
}
for my $table (sort keys %annotated_replicas)
{
	is($coordinator->safe_psql('postgres',
		"SELECT string_agg(t::text || ' ' || replicas_of(t)::text, E'\\n' ORDER BY t::text) FROM $table t"),
		$annotated_replicas{$table}, "$table: replicas_of() of every row is unchanged (its key type routes as before)");
}
is($coordinator->safe_psql('postgres', q{
	SELECT count(*) FROM ann_char t WHERE replicas_of(t) IS DISTINCT FROM replicas_for(t.k)}), '0',
	'ann_char: replicas_of() of a row is replicas_for() of its key');
is($coordinator->safe_psql('postgres', q{
	SELECT count(*) FROM ann_text_routed v JOIN ann_text t USING (k)
	 WHERE v.owner IS DISTINCT FROM shard_for(t.k) OR v.token <> t.tok OR t.tok <> ring_token(t.k)}), '0',
	'the view and the generated column over the routing functions still work');
like($coordinator->safe_psql('postgres', q{
	SET enable_seqscan = off; EXPLAIN (COSTS OFF) SELECT k FROM ann_text WHERE ring_token(k) = ring_token('key-7')}),
	qr/ann_text_token/, 'and so does the index over ring_token()');

# ---------------------------------------------------------------------------
# The extension's objects are exactly those of a fresh install.

my $describe_sql = slurp_file(dirname(__FILE__) . '/../upgrade/describe_extension.sql');
my $described_fresh = $coordinator->safe_psql('fresh', $describe_sql);
cmp_ok(scalar(split /\n/, $described_fresh), '>', 500, 'the description of a fresh 1.1 install has every object');
is($coordinator->safe_psql('postgres', $describe_sql), $described_fresh,
	'the updated coordinator has exactly the objects of a fresh 1.1 install');
is($w1->safe_psql('postgres', $describe_sql), $described_fresh, 'so has an updated worker');
is($coordinator->safe_psql('legacy', $describe_sql), $described_fresh, 'and the updated LATIN1 database');
is($coordinator->safe_psql('postgres', q{
	SELECT count(*) FROM pg_init_privs i WHERE i.privtype = 'e'
	   AND NOT EXISTS (SELECT FROM pg_depend d WHERE d.classid = i.classoid AND d.objid = i.objoid AND d.deptype = 'e')}), '0',
	'no object outside the extension has initial privileges of it (pg_dump would leave out its grants)');

# ---------------------------------------------------------------------------
# The distributed tables.

is($coordinator->safe_psql('postgres', q{
	SELECT string_agg(c.relname || ' ' || c.relkind::text || ' ' || s.srvname || ' ' || c.relowner::regrole, ', ' ORDER BY c.relname)
	  FROM pg_class c JOIN pg_foreign_table f ON f.ftrelid = c.oid JOIN pg_foreign_server s ON s.oid = f.ftserver}),
	"d_char f ringshard_cluster $superuser, d_int f ringshard_cluster app, d_late f ringshard_cluster $superuser, d_map f ringshard_cluster $superuser, d_old f ringshard_cluster $superuser",
	'the 1.0 distributed tables are foreign tables of ringshard_cluster, with their owners');
is($coordinator->safe_psql('postgres', q{
	SELECT concat_ws(' | ', obj_description('d_int'::regclass, 'pg_class'), col_description('d_int'::regclass, 3),
	                 (SELECT relacl::text FROM pg_class WHERE oid = 'd_int'::regclass),
	                 (SELECT string_agg(conname || ' ' || pg_get_constraintdef(oid), ', ') FROM pg_constraint WHERE conrelid = 'd_int'::regclass),
	                 pg_get_serial_sequence('d_int', 'seq'),
	                 (SELECT string_agg(x.node_ddl::text, ',') FROM ringshard.distributed_tables x WHERE x.table_name = 'd_int'::regclass))}),
	'integers, distributed by 1.0 | a note | {app=arwdDxt/app,=r/app} | amount_positive CHECK ((amount >= (0)::numeric)) | public.d_int_seq_seq | []',
	'd_int keeps its comments, privileges, CHECK constraint and sequence; no node-only DDL is recorded');
is($coordinator->safe_psql('postgres', q{
	SELECT string_agg(p.table_name::text || ' ' || (p.snapshot::jsonb = ringshard_internal.placement_snapshot(p.table_name)::jsonb)::text, ', '
	                  ORDER BY p.table_name::text)
	  FROM ringshard.placements p}),
	'd_char true, d_int true, d_late false, d_map true, d_old true',
	'their placements are the current topology, but d_late\'s, whose ring changed under 1.0 without a rebalance');
is($coordinator->safe_psql('postgres', q{SELECT layout FROM ringshard.table_overview WHERE table_name = 'd_late'::regclass}),
	'needs rebalance', 'table_overview says d_late needs a rebalance');
like($update_messages, qr/WARNING:  table public\.d_old held 12 rows on the coordinator, which ringshard 1\.0 never sent to its nodes\n.*public\.d_old_1_0_local_rows/,
	'rows a 1.0 distributed table held on the coordinator are named');
is(rows_of($coordinator, 'd_old_1_0_local_rows'), $d_old_rows, 'and kept, in an ordinary table');
is($coordinator->safe_psql('postgres', q{
	SELECT string_agg(c.relname, ', ' ORDER BY c.relname) FROM pg_class c WHERE c.relname LIKE 'd\_%' AND c.relkind = 'r'}),
	'd_old_1_0_local_rows', 'no other local table is left over');

# The queued write is a dead letter: applied by hand, as the hint says.
is($coordinator->safe_psql('postgres', q{
	SELECT concat_ws(' | ', node_name, table_name::text, writer::text, payload::text, reason LIKE 'queued by ringshard 1.0%')
	  FROM ringshard.dead_letters}),
	"w3 | d_int | ringshard_admin | $queued_payload | t", 'the write queued under 1.0 is a dead letter, its row as queued');
is($coordinator->safe_psql('postgres', 'SELECT count(*) FROM ringshard.write_queue'), '0', 'nothing is queued');

for my $table (@distributed, 'd_old')
{
	($rc, $out, $err) = $coordinator->psql('postgres', "SELECT ringshard.push_table_definition('$table')");
	like($out, qr/table public\.$table is defined on 3 nodes/, "push_table_definition('$table') reaches the three nodes")
	  or diag $err;
}
$coordinator->safe_psql('postgres', 'INSERT INTO d_old SELECT * FROM d_old_1_0_local_rows; DROP TABLE d_old_1_0_local_rows');
is(rows_of($coordinator, 'd_old'), $d_old_rows, 'the rows set aside, inserted as the warning says, are in the distributed table');

# w3 is down for reads while it misses a write: reads go to the other replicas.
is(rows_of($coordinator, 'd_int'), $all_rows{d_int}, 'd_int reads every row once (d_int\'s keys route as in 1.0)');
$w3->safe_psql('postgres', "INSERT INTO public.d_int SELECT * FROM json_populate_record(NULL::public.d_int, '$queued_payload')");
$coordinator->safe_psql('postgres', 'DELETE FROM ringshard.dead_letters');
$coordinator->safe_psql('postgres', 'SELECT count(*) FROM ringshard.watchdog_tick()');
is($coordinator->safe_psql('postgres', q{SELECT is_up FROM ringshard.nodes WHERE node_name = 'w3'}), 't',
	'once the dead letter is applied on w3 and deleted, the watchdog marks w3 up');
is(rows_of($coordinator, 'd_int'), $all_rows{d_int}, 'd_int still reads every row once');

# d_char and d_map: rows stored under 1.0's bytes, on nodes 1.1 does not choose.
my %misplaced;
for my $table ('d_char', 'd_map')
{
	$misplaced{$table} = 0;
	for my $i (1 .. 3)
	{
		$misplaced{$table} += $workers[ $i - 1 ]->safe_psql('postgres',
			"SELECT count(*) FROM $table t WHERE NOT ('w$i' = ANY (replicas_of(t)))");
	}
	cmp_ok($misplaced{$table}, '>', 0, "$table: some rows are on nodes that are not their replicas under 1.1");
}
isnt(rows_of($coordinator, 'd_char'), $all_rows{d_char}, 'so a plain SELECT of d_char misses rows before they are rehomed');
($rc, $out, $err) = $coordinator->psql('postgres', q{CALL ringshard.rehome_rows('d_char', 20)});
is($rc, 0, 'rehome_rows(d_char) runs') or diag $err;
note $err;
like($err, qr/NOTICE:  rehome of public\.d_char: $misplaced{d_char} rows are on nodes that are not their replicas/,
	'it says how many rows are misplaced');
like($err, qr/NOTICE:  rehome of public\.d_char complete: $misplaced{d_char} rows moved to their replicas, \d+ copies made/,
	'and what it moved');
($rc, $out, $err) = $coordinator->psql('postgres', q{CALL ringshard.rehome_rows('d_map')});
is($rc, 0, 'rehome_rows(d_map) runs') or diag $err;
note $err;
($rc, $out, $err) = $coordinator->psql('postgres', q{CALL ringshard.rehome_rows('d_char')});
like($err, qr/complete: 0 rows moved/, 'a second run finds nothing to move');
($rc, $out, $err) = $coordinator->psql('postgres', q{CALL ringshard.rebalance('d_late')});
is($rc, 0, 'd_late is rebalanced from the placement 1.0 recorded') or diag $err;
like($err, qr/rebalance of public\.d_late complete: \d+ steps, [1-9]\d* rows copied/, 'moving rows');

# Every distributed table reads every row once, and every worker holds
# exactly the rows whose 1.1 replicas it is.
sub check_distributed
{
	my ($label, $expected) = @_;
	for my $table (@distributed)
	{
		is(rows_of($coordinator, $table), $expected->{$table}, "$label: SELECT from $table returns every row once");
		for my $i (1 .. 3)
		{
			is(rows_of($workers[ $i - 1 ], $table),
				$coordinator->safe_psql('postgres',
					"SELECT string_agg(t::text, E'\\n' ORDER BY t::text) FROM $table t WHERE 'w$i' = ANY (replicas_of(t))"),
				"$label: w$i holds exactly the rows of $table it is a replica of");
		}
	}
}
check_distributed('after rehome_rows', \%all_rows);
is($coordinator->safe_psql('postgres', q{
	SELECT count(*) FROM (SELECT DISTINCT code FROM d_char) k
	 WHERE (SELECT count(*) FROM d_char d WHERE d.code = k.code) = 0}), '0',
	'every d_char key is found by a read by key');

# Writes and reads after the update.
$coordinator->safe_psql('postgres', q{
	INSERT INTO d_int (id, note, amount) SELECT g, 'after ' || g, g FROM generate_series(5001, 5040) g;
	UPDATE d_int SET note = 'changed' WHERE id = 5001;
	DELETE FROM d_int WHERE id = 5002;
	INSERT INTO d_char VALUES ('zz', 'after'), ('zz    ', 'after, padded');
	INSERT INTO d_map VALUES ('ks-9', 1.50, 'after');
});
is($coordinator->safe_psql('postgres', q{SELECT count(*) || ' ' || max(seq) FROM d_int WHERE id > 5000}), '39 191',
	'rows written after the update read back (with the sequence 1.0 used going on)');
is($coordinator->safe_psql('postgres', q{SELECT note FROM d_int WHERE id = 5001}), 'changed', 'an UPDATE by key reaches its rows');
is($coordinator->safe_psql('postgres', q{SELECT count(*) FROM d_char WHERE code = 'zz'}), '2', 'a char(n) key reads back, padded or not');
is($coordinator->safe_psql('postgres', q{SELECT label FROM d_map WHERE ks = 'ks-9' AND amount = 1.5}), 'after',
	'a numeric key reads back by an equal value');
my %after_writes;
$after_writes{$_} = $coordinator->safe_psql('postgres', "SELECT string_agg(t::text, E'\\n' ORDER BY t::text) FROM $_ t") for @distributed;
check_distributed('after writes', \%after_writes);

# ---------------------------------------------------------------------------
# pg_dump of the updated coordinator, restored, dumps the same.

my $pg_dump = "$install_path/bin/pg_dump";
my $dump = "$tmp/updated.dump";
command_ok([ $pg_dump, '-Fc', '-f', $dump, '-d', $coordinator->connstr('postgres') ], 'pg_dump of the updated coordinator');
$coordinator->safe_psql('postgres', 'CREATE DATABASE restored');
command_ok([ "$install_path/bin/pg_restore", '--exit-on-error', '-d', $coordinator->connstr('restored'), $dump ],
	'pg_restore into a new database');
# A plain dump, without what differs between any two dumps: the random key
# of \restrict (pg_dump 15.14 and later).  The counter of catalog changes
# that PL/Proxy reads counts the restore's writes to the catalog too: it
# only has to grow.
my %change_counter;
my ($dumped, $restored) = map {
	my $db = $_;
	my $text = `'$pg_dump' -Fp -d '@{[$coordinator->connstr($db)]}'`;
	die "pg_dump of $db failed" if $? != 0;
	$text =~ s/^\\restrict \S+$/\\restrict (key)/m;
	$text =~ s/^\\unrestrict \S+$/\\unrestrict (key)/m;
	$text =~ s/^(t\t\S+\t\d+\t[0-9a-f-]{36}\t)(\d+)$/$1(counter)/m or die "no cluster_state row in the dump of $db";
	$change_counter{$db} = $2;
	$text
} ('postgres', 'restored');
cmp_ok(length $dumped, '>', 10000, 'the dump holds the database');
cmp_ok($change_counter{restored}, '>=', $change_counter{postgres}, 'the catalog change counter did not go back');
is($restored, $dumped, 'the restored database dumps exactly as the updated one') or do {
	open(my $f, '>', "$tmp/dumped.sql") or die; print $f $dumped; close $f;
	open($f, '>', "$tmp/restored.sql") or die; print $f $restored; close $f;
	diag `diff -u '$tmp/dumped.sql' '$tmp/restored.sql' | head -n 60`;
};
is($coordinator->safe_psql('restored', $describe_sql), $described_fresh, 'and has the extension objects of a fresh install');

note sprintf('the test took %d s', time - $started);
done_testing();

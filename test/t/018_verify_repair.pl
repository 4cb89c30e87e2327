# Proof of equal replicas: ringshard.verify_table() compares every replica of
# a distributed table by digests the nodes compute, and repair_table() brings
# the diverged ones back.  Replicas are broken behind the coordinator's back
# (rows deleted, changed and added on one worker directly, rows put on a
# worker that is no replica of them), verified, repaired, verified again, on
# a ring with two copies and on a partition map with a keyspace column.
# Then what must not diverge replicas in the first place: DDL while writes
# are queued is refused, and DDL carries what changes answers.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $coordinator = PostgreSQL::Test::Cluster->new('coordinator');
my @workers = map { PostgreSQL::Test::Cluster->new("v$_") } 1 .. 3;
for my $node ($coordinator, @workers)
{
	$node->init;
	$node->append_conf('postgresql.conf', "max_prepared_transactions = 20\nshared_preload_libraries = 'ringshard'");
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION ringshard');
}

my $setup = '';
for my $i (1 .. 3)
{
	my $w = $workers[ $i - 1 ];
	$setup .= sprintf("SELECT ringshard.add_node('v%d', 'host=%s port=%d dbname=postgres');", $i, $w->host, $w->port);
}
$setup .= q{
	SELECT ringshard.set_replication_factor('default', 2);
	SELECT ringshard.create_partition_map('halves');
	SELECT ringshard.assign_partitions('v1', 0, 170, 'halves');
	SELECT ringshard.assign_partitions('v2', 85, 255, 'halves');
	SELECT ringshard.assign_partitions('v3', 0, 84, 'halves');
	SELECT ringshard.assign_partitions('v3', 171, 255, 'halves');
	SELECT count(*) FROM ringshard.sync_topology();
	CREATE TABLE accounts (id bigint PRIMARY KEY, owner text NOT NULL, balance numeric(12, 2), opened date, f float8);
	INSERT INTO accounts SELECT g, 'o' || g, g * 1.25, DATE '2026-01-01' + g % 90, g / 3.0 FROM generate_series(1, 2000) g;
	SELECT ringshard.distribute_table('accounts', 'id');
	SELECT ringshard.create_distributed_table('accounts');
	CREATE TABLE events (tenant int, id int, body text, PRIMARY KEY (tenant, id));
	INSERT INTO events SELECT g % 7, g, 'e' || g FROM generate_series(1, 1000) g;
	SELECT ringshard.distribute_table_by_partition('events', 'id', map => 'halves', keyspace_column => 'tenant');
	SELECT ringshard.create_distributed_table('events');
};
$coordinator->safe_psql('postgres', $setup);

sub verify
{
	my ($table) = @_;
	return $coordinator->safe_psql('postgres', qq{
		SELECT coalesce(string_agg(format('%s %s %s %s', node, problem, rows, sample_keys), E'\\n'
		                           ORDER BY node, problem, sample_keys::text), 'equal')
		  FROM ringshard.verify_table('$table')});
}

sub worker { my ($name) = @_; return $workers[ substr($name, 1) - 1 ]; }

# The replicas of a key, and a key whose replicas are given nodes.
sub replicas
{
	my ($key) = @_;
	return split /,/, $coordinator->safe_psql('postgres', "SELECT array_to_string(replicas_for(${key}::bigint), ',')");
}

sub key_on
{
	my ($first, $second) = @_;
	return $coordinator->safe_psql('postgres', qq{
		SELECT min(g) FROM generate_series(1, 2000) g WHERE replicas_for(g::bigint) = ARRAY['$first', '$second']});
}

is(verify('accounts'), 'equal', 'a freshly distributed table: every replica holds the same rows');
like($coordinator->safe_psql('postgres', q{SELECT count(*) FROM ringshard.verify_table('accounts')}), qr/^0$/,
	'no row when all agree');

# Break it on the nodes directly.
my $deleted = key_on('v1', 'v2');
my $changed = key_on('v2', 'v3');
my $added = 5001;
my @added_replicas = replicas($added);
my ($outsider) = grep { my $n = $_; !grep { $_ eq $n } @added_replicas } qw(v1 v2 v3);
my $misplaced = key_on('v1', 'v3');
worker('v2')->safe_psql('postgres', "DELETE FROM accounts WHERE id = $deleted");
worker('v3')->safe_psql('postgres', "UPDATE accounts SET balance = balance + 1 WHERE id = $changed");
worker($added_replicas[1])->safe_psql('postgres', q{ALTER TABLE accounts DISABLE TRIGGER USER});
worker($added_replicas[1])->safe_psql('postgres', "INSERT INTO accounts VALUES ($added, 'new', 1, NULL, NULL)");
worker('v2')->safe_psql('postgres', q{ALTER TABLE accounts DISABLE TRIGGER USER});
worker('v2')->safe_psql('postgres', "INSERT INTO accounts SELECT * FROM (VALUES (${misplaced}::bigint, 'stray', 2::numeric, NULL::date, NULL::float8)) s");

is(verify('accounts'), join("\n", sort
	"v2 missing 1 {$deleted}",
	"v3 differing 1 {$changed}",
	"v2 misplaced 1 ",
	"$added_replicas[1] extra 1 {$added}"),
	'verify_table names each broken row: missing where it was deleted, differing where it was changed, '
	. 'extra where it was added to one replica only, misplaced on a node that is no replica of it '
	. '(two replicas that disagree are compared against the first, the owner)');

# Only a table's owner repairs it; the source is the named node where it is a replica, else the majority (owner first).
my ($rc, $out, $err) = $coordinator->psql('postgres', q{
	CREATE ROLE reader LOGIN;
	GRANT SELECT ON accounts TO reader;
	SET ROLE reader;
	SELECT * FROM ringshard.repair_table('accounts');});
like($err, qr/permission denied for function repair_table|must be owner of foreign table accounts/,
	'a role that may only read the table cannot repair it');

# A repair streams whole groups (a range of one replica set), as Cassandra streams ranges.
my $repaired = $coordinator->safe_psql('postgres', q{
	SELECT string_agg(format('%s<-%s', node, source), ' ' ORDER BY node, source) || ' ' || sum(copied) - sum(deleted)
	  FROM ringshard.repair_table('accounts', 'v1')});
my ($pairs, $net) = $repaired =~ /^(.*) (-?\d+)$/;
my %pair = map { $_ => 1 } split / /, $pairs // '';
ok($pair{'v2<-v1'}, 'the deleted row\'s range is brought back on v2 from the chosen source, v1');
ok($pair{'v3<-v2'}, 'the changed row\'s range on v3 from the owner of its range (v1 is no replica of it)');
ok($pair{"$added_replicas[1]<-$added_replicas[0]"}, 'the range with a row added to one replica only, from its owner');
is($net, -1, 'one row copied back, one added and one misplaced row gone');
is(verify('accounts'), 'equal', 'after the repair every replica holds the same rows');
is($coordinator->safe_psql('postgres', q{SELECT count(*) FROM ringshard.repair_table('accounts')}), '0',
	'a second repair has nothing to do');
is(worker('v3')->safe_psql('postgres', "SELECT balance FROM accounts WHERE id = $changed"),
	$coordinator->safe_psql('postgres', "SELECT $changed * 1.25"), 'the changed row has its value again');
is($coordinator->safe_psql('postgres', q{SELECT count(*), sum(balance) FROM accounts}),
	$coordinator->safe_psql('postgres', q{SELECT count(*), sum(g * 1.25) FROM generate_series(1, 2000) g}),
	'the table reads as it was written');

# A partition map whose keyspace is a column.
worker('v3')->safe_psql('postgres', q{DELETE FROM events WHERE id IN (SELECT id FROM events ORDER BY id LIMIT 5)});
my $map_report = verify('events');
like($map_report, qr/^v3 missing \d+ /m, 'a partition map: rows deleted on a holder are missing there');
$coordinator->safe_psql('postgres', q{SELECT count(*) FROM ringshard.repair_table('events')});
is(verify('events'), 'equal', 'and repaired');

# ---------------------------------------------------------------------------
# DDL never diverges replicas: with writes queued for a node that is down,
# DDL on the table waits for them (the rows would be replayed against
# another definition).

$workers[2]->stop;
$coordinator->safe_psql('postgres', q{SELECT ringshard.mark_node_down('v3')});
$coordinator->safe_psql('postgres', qq{INSERT INTO accounts SELECT g, 'late', 0, NULL, NULL FROM generate_series(3001, 3040) g});
ok($coordinator->safe_psql('postgres', q{SELECT count(*) FROM ringshard.write_queue}) > 0, 'writes for the stopped node are queued');
($rc, $out, $err) = $coordinator->psql('postgres', q{ALTER TABLE accounts RENAME COLUMN owner TO holder});
like($err, qr/ALTER TABLE \.\.\. RENAME of distributed table accounts must wait: some of its writes have not reached every replica/,
	'a rename waits for the queue');
($rc, $out, $err) = $coordinator->psql('postgres', q{ALTER TABLE accounts ADD COLUMN flag int DEFAULT 7});
like($err, qr/ALTER TABLE of distributed table accounts must wait/, 'so does ADD COLUMN');
like($err, qr/DETAIL:  The table has \d+ queued write\(s\) for v3\./, 'naming the node');
$workers[2]->start;
$coordinator->poll_query_until('postgres', q{
	SELECT count(*) = 0 FROM ringshard.watchdog_tick() w WHERE w.still_queued > 0 OR NOT w.reachable}) or die;
$coordinator->safe_psql('postgres', q{ALTER TABLE accounts RENAME COLUMN owner TO holder; ALTER TABLE accounts ADD COLUMN flag int DEFAULT 7});
is(verify('accounts'), 'equal', 'once delivered, the DDL runs and every replica holds the same rows');
is(worker('v3')->safe_psql('postgres', q{SELECT count(*) FROM accounts WHERE holder = 'late' AND flag = 7}),
	$coordinator->safe_psql('postgres', q{SELECT count(*) FROM accounts WHERE holder = 'late' AND 'v3' = ANY (replicas_for(id))}),
	'the delivered rows have the renamed column and the new default');

# ---------------------------------------------------------------------------
# DDL fidelity: what changes answers or constraints reaches the nodes.

$coordinator->safe_psql('postgres', q{
	ALTER TABLE accounts ALTER COLUMN holder TYPE text COLLATE "C";
	CREATE UNIQUE INDEX accounts_holder_key ON accounts (id, holder) NULLS NOT DISTINCT WITH (fillfactor = 70);
	ALTER TABLE accounts ADD CONSTRAINT accounts_pair UNIQUE NULLS NOT DISTINCT (id, opened) DEFERRABLE INITIALLY DEFERRED;
	CREATE INDEX accounts_late ON accounts (lower(holder)) WHERE flag > 5;
});
for my $i (1 .. 3)
{
	my $w = $workers[ $i - 1 ];
	is($w->safe_psql('postgres', q{SELECT collname FROM pg_attribute a JOIN pg_collation c ON c.oid = a.attcollation
	                               WHERE attrelid = 'accounts'::regclass AND attname = 'holder'}),
		'C', "v$i: ALTER COLUMN TYPE carries the collation");
	like($w->safe_psql('postgres', q{SELECT pg_get_indexdef('accounts_holder_key'::regclass)}),
		qr/NULLS NOT DISTINCT WITH \(fillfactor='?70'?\)/, "v$i: the index keeps NULLS NOT DISTINCT and its storage option");
	like($w->safe_psql('postgres', q{SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = 'accounts_pair'}),
		qr/UNIQUE NULLS NOT DISTINCT \(id, opened\) DEFERRABLE INITIALLY DEFERRED/, "v$i: the constraint keeps NULLS NOT DISTINCT and DEFERRABLE");
	like($w->safe_psql('postgres', q{SELECT pg_get_indexdef('accounts_late'::regclass)}),
		qr/\(lower\(holder\)\) WHERE \(flag > 5\)/, "v$i: an expression index keeps its expression and predicate");
}
is($coordinator->safe_psql('postgres', q{SELECT string_agg(holder, ' ' ORDER BY holder) FROM (VALUES ('a'), ('B'), ('c'), ('D')) v(holder)}),
	'B D a c', 'a local "C" ordering, for comparison');
$coordinator->safe_psql('postgres', q{INSERT INTO accounts (id, holder) VALUES (9001, 'a'), (9002, 'B'), (9003, 'c'), (9004, 'D')});
is($coordinator->safe_psql('postgres', q{
	SELECT string_agg(holder, ' ') FROM (SELECT holder FROM accounts WHERE id > 9000 ORDER BY holder LIMIT 10) s}),
	'B D a c', 'the nodes sort by the column\'s new collation (ORDER BY ... LIMIT runs there)');

# Row security: a table with it enabled is refused, it would lose it.
($rc, $out, $err) = $coordinator->psql('postgres', q{
	CREATE TABLE secret (id int PRIMARY KEY, v text);
	ALTER TABLE secret ENABLE ROW LEVEL SECURITY;
	SELECT ringshard.distribute_table('secret', 'id');
	SELECT ringshard.create_distributed_table('secret');});
like($err, qr/table secret cannot be distributed while other objects depend on it\nDETAIL:  Depending on it: row level security/,
	'a table with row level security enabled is refused');

# A key whose collation is not deterministic is refused when annotated.
($rc, $out, $err) = $coordinator->psql('postgres', q{
	CREATE COLLATION ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
	CREATE TABLE people (email text COLLATE ci PRIMARY KEY);
	SELECT ringshard.distribute_table('people', 'email');});
like($err, qr/cannot use column "email" of table public\.people as the sharding key: its collation ci is not deterministic/,
	'a key with a non-deterministic collation is refused');

# Only the table's owner changes it, checked before any node runs anything.
($rc, $out, $err) = $coordinator->psql('postgres', q{
	CREATE ROLE intruder LOGIN;
	GRANT SELECT, INSERT ON accounts TO intruder;
	SET ROLE intruder;
	CREATE INDEX intruder_idx ON accounts (balance);});
like($err, qr/must be owner of (foreign )?table accounts/, 'CREATE INDEX by a role that does not own the table is refused here');
is(join(',', map { $_->safe_psql('postgres', q{SELECT count(*) FROM pg_class WHERE relname = 'intruder_idx'}) } @workers), '0,0,0',
	'and no node built it');

done_testing();

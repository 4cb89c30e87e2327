# A silent host in a multi-host address (docs/auto-failover.md, "A worker's
# primary that goes silent"): the first host of a node's address accepts the
# TCP connection and never answers (test/perl/RingshardFakeNode.pm,
# start_silent), as a frozen primary does; the second is the real worker,
# as its promoted standby would be.  Each host of an address has
# ringshard.node_timeout to connect, so:
#
#  1. node_health() reaches the node, on the real host, after about one
#     node_timeout; a write and a read of a distributed table through the
#     node succeed (each new session's connection gives up on the silent
#     host first);
#  2. with both hosts silent, the node is unreachable within the sum of
#     the hosts' limits, and the error names each host that timed out; a
#     read that needs the node fails (no healthy replica of its key);
#  3. a single silent host fails as before: "timeout while connecting
#     (ringshard.node_timeout = ... ms)".
#
# Times are printed; the only bound asserted is generous (the sum of the
# hosts' limits plus 5 s).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IO::Select;
use IO::Socket::INET;
use Time::HiRes qw(time);
use RingshardFakeNode;

my $timeout_ms = 2000;
my $silent = RingshardFakeNode->start_silent(lifetime => 300);
my $silent2 = RingshardFakeNode->start_silent(lifetime => 300);

my $coordinator = PostgreSQL::Test::Cluster->new('coordinator');
my @workers = map { PostgreSQL::Test::Cluster->new("s$_") } 1 .. 2;
for my $node ($coordinator, @workers)
{
	$node->init;
	$node->append_conf('postgresql.conf', "max_prepared_transactions = 20\nshared_preload_libraries = 'ringshard'");
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION ringshard');
}
$coordinator->append_conf('postgresql.conf', "ringshard.node_timeout = '${timeout_ms}ms'");
$coordinator->reload;
my ($w1, $w2) = @workers;

# The silent host works: it takes a connection and says nothing.
{
	my $sock = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $silent->port, Proto => 'tcp', Timeout => 5);
	ok($sock, 'the silent host accepts a connection');
	my $select = IO::Select->new($sock);
	ok(!$select->can_read(0.5), '... and answers nothing');
	close($sock) if $sock;
}

# s1: the silent host first, the real worker second, read-write as for a
# worker with a standby.
my $w1_reached = sprintf('%s:%d', $w1->host, $w1->port);
my $address = sprintf('host=127.0.0.1,%s port=%d,%d dbname=postgres target_session_attrs=read-write',
	$w1->host, $silent->port, $w1->port);
$coordinator->safe_psql('postgres', sprintf(q{
	SELECT ringshard.add_node('s1', %s);
	SELECT ringshard.add_node('s2', 'host=%s port=%d dbname=postgres');
	SELECT ringshard.set_replication_factor('default', 1);
	SELECT count(*) FROM ringshard.sync_topology();
	CREATE TABLE items (k text PRIMARY KEY, v int NOT NULL);
	SELECT ringshard.distribute_table('items', 'k');
	SELECT ringshard.create_distributed_table('items');
}, $coordinator->safe_psql('postgres', "SELECT quote_literal('$address')"), $w2->host, $w2->port));

# Times each statement in a new session (a new connection to each node).
sub timed
{
	my ($sql) = @_;
	my $t0 = time;
	my ($rc, $out, $err) = $coordinator->psql('postgres', $sql);
	return ($rc, $out, $err, time - $t0);
}

# 1. The silent host first: the node is reached on the real one.
my ($rc, $out, $err, $took) = timed(
	q{SELECT reachable || ' ' || coalesce(host, '') || ' ' || coalesce(last_error, '') FROM ringshard.node_health() WHERE node = 's1'});
is($rc, 0, 'node_health() runs') or diag($err);
is($out, "true $w1_reached ", 'with a silent host first, node_health() reaches the node on the real host');
diag(sprintf('silent host first: node_health() took %.2f s (node_timeout %d ms)', $took, $timeout_ms));
cmp_ok($took, '<', 2 * $timeout_ms / 1000 + 5, '... within the sum of the hosts\' limits plus 5 s');

# Keys of each node (replication 1: one node each).
my @s1_keys = split(/\n/, $coordinator->safe_psql('postgres',
	q{SELECT k FROM (SELECT 'key-' || g AS k FROM generate_series(1, 200) g) x WHERE replicas_for(k) = ARRAY['s1'] ORDER BY k LIMIT 5}));
my @s2_keys = split(/\n/, $coordinator->safe_psql('postgres',
	q{SELECT k FROM (SELECT 'key-' || g AS k FROM generate_series(1, 200) g) x WHERE replicas_for(k) = ARRAY['s2'] ORDER BY k LIMIT 5}));
is(scalar(@s1_keys), 5, 'keys of s1') or diag($coordinator->safe_psql('postgres', q{SELECT replicas_for('key-1'::text)}));
is(scalar(@s2_keys), 5, 'keys of s2');
my $values = join(', ', map { "('$_', 1)" } @s1_keys, @s2_keys);

($rc, $out, $err, $took) = timed("INSERT INTO items VALUES $values");
is($rc, 0, 'a write through the node with a silent host first succeeds') or diag($err);
diag(sprintf('the write took %.2f s', $took));
cmp_ok($took, '<', 2 * $timeout_ms / 1000 + 5, '... within the sum of the hosts\' limits plus 5 s');
is($w1->safe_psql('postgres', q{SELECT count(*) FROM items}), '5', 'the real host of s1 holds its rows');
is($w2->safe_psql('postgres', q{SELECT count(*) FROM items}), '5', 's2 holds its rows');

($rc, $out, $err, $took) = timed(sprintf(q{SELECT string_agg(k || '=' || v, ',' ORDER BY k) FROM items WHERE k IN (%s)},
	join(', ', map { "'$_'" } @s1_keys)));
is($rc, 0, 'a read through the node succeeds') or diag($err);
is($out, join(',', map { "$_=1" } sort @s1_keys), '... and returns its rows');
diag(sprintf('the read took %.2f s', $took));
($rc, $out, $err) = $coordinator->psql('postgres', q{UPDATE items SET v = v + 1; SELECT sum(v) FROM items});
is($rc, 0, 'an update of every row') or diag($err);
is($out, '20', '... reads back');
is($coordinator->safe_psql('postgres', q{SELECT string_agg(node_name || '=' || is_up, ',' ORDER BY node_name) FROM ringshard.nodes}),
	's1=true,s2=true', 'both nodes are up');

# 2. Both hosts silent: unreachable within the sum of the limits, each named.
$coordinator->safe_psql('postgres', sprintf(q{SELECT ringshard.set_node_address('s1', 'host=127.0.0.1,127.0.0.1 port=%d,%d dbname=postgres target_session_attrs=read-write')},
	$silent->port, $silent2->port));
($rc, $out, $err, $took) = timed(q{SELECT reachable || E'\n' || coalesce(last_error, '') FROM ringshard.node_health() WHERE node = 's1'});
is($rc, 0, 'node_health() runs with both hosts silent') or diag($err);
diag(sprintf('both hosts silent: node_health() took %.2f s', $took));
cmp_ok($took, '<', 2 * $timeout_ms / 1000 + 5, '... within the sum of the hosts\' limits plus 5 s');
my ($reachable, @error) = split(/\n/, $out);
is($reachable, 'false', 'the node is unreachable');
my $error = join("\n", @error);
for my $port ($silent->port, $silent2->port)
{
	like($error, qr/"127\.0\.0\.1"(?: \([^)]*\))?, port $port failed: timeout while connecting \(ringshard\.node_timeout = $timeout_ms ms for each host\)/,
		"the error names the silent host on port $port");
}
note("both silent: $error");
($rc, $out, $err, $took) = timed(sprintf(q{SELECT v FROM items WHERE k = '%s'}, $s1_keys[0]));
isnt($rc, 0, 'a read that needs the node fails');
like($err, qr/no healthy replica of key '\Q$s1_keys[0]\E' of table items could be read/, '... saying why') or diag($err);
diag(sprintf('the failed read took %.2f s', $took));
cmp_ok($took, '<', 2 * $timeout_ms / 1000 + 5, '... within the sum of the hosts\' limits plus 5 s');

# 3. A single silent host: as before.
$coordinator->safe_psql('postgres', sprintf(q{SELECT ringshard.set_node_address('s1', 'host=127.0.0.1 port=%d dbname=postgres')},
	$silent->port));
($rc, $out, $err, $took) = timed(q{SELECT reachable || ' ' || coalesce(last_error, '') FROM ringshard.node_health() WHERE node = 's1'});
is($rc, 0, 'node_health() runs with one silent host') or diag($err);
is($out, "false timeout while connecting (ringshard.node_timeout = $timeout_ms ms)", 'a single silent host fails as before');
diag(sprintf('a single silent host: node_health() took %.2f s', $took));
cmp_ok($took, '<', $timeout_ms / 1000 + 5, '... within its limit plus 5 s');

# The address back: the node is reached again.
$coordinator->safe_psql('postgres', sprintf(q{SELECT ringshard.set_node_address('s1', %s)},
	$coordinator->safe_psql('postgres', "SELECT quote_literal('$address')")));
is($coordinator->safe_psql('postgres', q{SELECT reachable FROM ringshard.node_health() WHERE node = 's1'}), 't',
	'with the silent host first again, the node is reached');

$silent->stop;
$silent2->stop;
done_testing();

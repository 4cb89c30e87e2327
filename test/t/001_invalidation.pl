# A topology change committed in one session reaches every other session
# from its next transaction: relcache invalidation through the catalog's
# triggers, for the admin functions and for direct DML alike.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('main');
$node->init;
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION ringshard;
	SELECT ringshard.add_node('shard-jakarta-01');
	SELECT ringshard.add_node('shard-surabaya-02');
	SELECT ringshard.add_node('shard-makassar-03');
	SELECT ringshard.set_replication_factor('default', 2);
});

# Owners of 500 keys, as one line, so that two sessions' answers compare.
my $owners_sql = q{SELECT string_agg(shard_for('key-' || g), ',' ORDER BY g) FROM generate_series(1, 500) g};

# A fresh connection builds its ring from the committed catalog: the reference.
sub fresh { return $node->safe_psql('postgres', $owners_sql); }

my $reader = $node->background_psql('postgres');
my $writer = $node->background_psql('postgres');

my $three = $reader->query_safe($owners_sql);
is($three, fresh(), 'a long-lived session and a new one agree');
like($three, qr/shard-surabaya-02/, 'keys are spread over the nodes');

# An admin function in another session, committed.
$node->safe_psql('postgres', q{SELECT ringshard.add_node('shard-bandung-04')});
my $four = $reader->query_safe($owners_sql);
is($four, fresh(), 'add_node committed elsewhere is seen by the next transaction');
isnt($four, $three, 'the ring did change');
like($four, qr/shard-bandung-04/, 'the new node owns keys');

# An uncommitted change is not seen; once committed it is.
$writer->query_safe(q{BEGIN});
$writer->query_safe(q{SELECT ringshard.remove_node('shard-bandung-04')});
is($reader->query_safe($owners_sql), $four, 'an uncommitted removal is not seen');
$writer->query_safe(q{COMMIT});
is($reader->query_safe($owners_sql), $three, 'the committed removal is seen: the 3-node ring again');

# A rolled-back change leaves every session on the old ring.
$writer->query_safe(q{BEGIN});
$writer->query_safe(q{SELECT ringshard.add_node('shard-medan-05')});
$writer->query_safe(q{ROLLBACK});
is($reader->query_safe($owners_sql), $three, 'a rolled-back change is never seen');
is($writer->query_safe($owners_sql), $three, 'the session that rolled back is back on the old ring');

# Direct DML on the catalog invalidates too (statement trigger).
$node->safe_psql('postgres', q{UPDATE ringshard.ring_members SET weight = 4 WHERE node_name = 'shard-jakarta-01'});
my $weighted = $reader->query_safe($owners_sql);
is($weighted, fresh(), 'direct UPDATE of ring_members is seen');
isnt($weighted, $three, 'the weight change moved keys');
my $jakarta = () = $weighted =~ /shard-jakarta-01/g;
cmp_ok($jakarta, '>', 250, "weight 4 of 6 gives jakarta most keys ($jakarta of 500)");

# Health: a node marked down elsewhere is skipped by read routing at once.
$node->safe_psql('postgres', q{SELECT ringshard.mark_node_down('shard-jakarta-01')});
my $reads = $reader->query_safe(
	q{SELECT count(*) FROM generate_series(1, 300) g WHERE read_node_for('key-' || g) = 'shard-jakarta-01'});
is($reads, '0', 'read_node_for skips a node marked down in another session');
is($reader->query_safe($owners_sql), $weighted, 'ownership does not change when a node is down');

# Partition maps are cached and invalidated the same way.
my $map_sql = q{SELECT string_agg(array_to_string(nodes_for('faces', 'face-' || g), '+'), ',' ORDER BY g) FROM generate_series(1, 200) g};
$node->safe_psql('postgres', q{SELECT ringshard.assign_partitions('node1', 0, 255)});
is($reader->query_safe($map_sql), join(',', ('node1') x 200), 'map: one holder');
$node->safe_psql('postgres', q{SELECT ringshard.assign_partitions('node2', 128, 255)});
is($reader->query_safe($map_sql), $node->safe_psql('postgres', $map_sql), 'map: a new holder is seen');
like($reader->query_safe($map_sql), qr/node1\+node2/, 'map: replicated partitions list both holders');

# A dropped and recreated extension does not leave a stale cache behind.
$writer->query_safe(q{DROP EXTENSION ringshard});
$writer->query_safe(q{CREATE EXTENSION ringshard});
$writer->query_safe(q{SELECT ringshard.add_node('solo')});
is($reader->query_safe(q{SELECT shard_for('key-1')}), 'solo', 'a recreated extension is seen by other sessions');

$reader->quit;
$writer->quit;
$node->stop;
done_testing();

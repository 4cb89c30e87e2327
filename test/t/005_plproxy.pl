# The PL/Proxy bridge: PL/Proxy functions use a ringshard partition map as
# their cluster and RUN ON partition_for(keyspace, key): each call reaches the
# holder ringshard names, and a holder marked down is skipped.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $proxy = PostgreSQL::Test::Cluster->new('proxy');
my @workers = map { PostgreSQL::Test::Cluster->new("p$_") } 1 .. 2;
for my $node ($proxy, @workers)
{
	$node->init;
	$node->append_conf('postgresql.conf', 'max_prepared_transactions = 20');
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION ringshard');
}
# On every worker: a function that says where it ran.
$_->safe_psql('postgres', q{
	CREATE FUNCTION whoami(keyspace text, key text) RETURNS text
	LANGUAGE sql AS $$ SELECT local_node FROM ringshard.cluster_state $$;
}) for @workers;

my $config = "version: \"v1\"\nnodes:\n";
my ($a1, $a2) = map { sprintf('host=%s port=%d', $_->host, $_->port) } @workers;
$config .= "- address: \"$a1\"\n  partition_start: 0\n  partition_end: 127\n";
$config .= "- address: \"$a2\"\n  partition_start: 128\n  partition_end: 255\n";
$config .= "- address: \"$a2\"\n  partition_start: 0\n  partition_end: 63\n";
$proxy->safe_psql('postgres', qq{
	CREATE EXTENSION plproxy;
	SELECT ringshard.install_plproxy_bridge();
	SELECT ringshard.load_partition_config(\$yaml\$$config\$yaml\$);
	SELECT count(*) FROM ringshard.sync_topology();
	CREATE FUNCTION whoami(keyspace text, key text) RETURNS text AS \$\$
		CLUSTER 'default';
		RUN ON partition_for(keyspace, key);
	\$\$ LANGUAGE plproxy;
});

is($proxy->safe_psql('postgres', q{SELECT count(*) FROM plproxy.get_cluster_partitions('default')}),
	'256', 'the bridge gives PL/Proxy 256 partitions');

# The node each call reached is the map's first healthy holder of its partition.
my $check = q{
	SELECT count(*) FILTER (WHERE whoami('faces', 'face-' || g) <> (nodes_for('faces', 'face-' || g))[1]),
	       count(DISTINCT whoami('faces', 'face-' || g))
	  FROM generate_series(1, 200) g};
is($proxy->safe_psql('postgres', $check), '0|2',
	'every PL/Proxy call lands on the holder ringshard routes to, across both workers');
is($proxy->safe_psql('postgres', q{SELECT whoami('faces', 'face-001')}),
	$proxy->safe_psql('postgres', q{SELECT (nodes_for('faces', 'face-001'))[1]}),
	'ROUTING.md: faces/face-001 is partition 28, held first by the first node');

# A replicated partition fails over to its other holder when one is marked down.
my $down = $proxy->safe_psql('postgres', q{SELECT (nodes_for('faces', 'face-001'))[1]});
$proxy->safe_psql('postgres', "SELECT ringshard.mark_node_down('$down')");
my $now = $proxy->safe_psql('postgres', q{SELECT whoami('faces', 'face-001')});
isnt($now, $down, 'with its first holder down, partition 28 is served by the replica');
is($proxy->safe_psql('postgres', q{SELECT count(*) FROM generate_series(1, 200) g
	WHERE partition_for('faces', 'face-' || g) BETWEEN 0 AND 63 AND whoami('faces', 'face-' || g) = }
	. "'$down'"), '0', 'no replicated partition is sent to the node marked down');

# A gap is refused rather than routed anywhere.
$proxy->safe_psql('postgres', "SELECT ringshard.mark_node_up('$down')");
$proxy->safe_psql('postgres', q{SELECT ringshard.create_partition_map('holey');
	SELECT ringshard.assign_partitions((SELECT node_name FROM ringshard.nodes ORDER BY 1 LIMIT 1), 0, 100, 'holey');});
my ($rc, $out, $err) = $proxy->psql('postgres', q{SELECT count(*) FROM plproxy.get_cluster_partitions('holey')});
like($err, qr/partition 101 of map "holey" has no node/, 'a map with a gap is refused with the partition named');

$_->stop for ($proxy, @workers);
done_testing();

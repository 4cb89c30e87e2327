# The PL/Proxy bridge: PL/Proxy functions use a ringshard partition map as
# their cluster and RUN ON partition_for(keyspace, key): each call reaches the
# holder ringshard names, and a holder marked down is skipped.  The bridge's
# connection strings are libpq key=value strings that PL/Proxy can extend,
# quoted the libpq way: a database whose name holds a space and a quote, and
# a node addressed by URI, are reached too.
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
	'docs/routing.md: faces/face-001 is partition 28, held first by the first node');

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

# A database whose name holds a space and a quote, on the proxy and on the
# workers; one worker addressed by key=value pairs and one by URI, neither
# naming the database (it defaults to the proxy's own).
my $odd_db = q{proxy db's};
(my $odd_ident = $odd_db) =~ s/"/""/g;
for my $node ($proxy, @workers)
{
	$node->safe_psql('postgres', qq{CREATE DATABASE "$odd_ident"});
	$node->safe_psql($odd_db, 'CREATE EXTENSION ringshard');
}
$_->safe_psql($odd_db, q{
	CREATE FUNCTION whoami(keyspace text, key text) RETURNS text
	LANGUAGE sql AS $$ SELECT local_node || ' in ' || current_database() FROM ringshard.cluster_state $$;
}) for @workers;
(my $socket = $workers[1]->host) =~ s{([^A-Za-z0-9_.~-])}{sprintf('%%%02X', ord($1))}ge;
my $uri = sprintf('postgresql://%s:%d', $socket, $workers[1]->port);
$config = "version: \"v1\"\nnodes:\n";
$config .= "- address: \"$a1\"\n  partition_start: 0\n  partition_end: 127\n";
$config .= "- address: \"$uri\"\n  partition_start: 128\n  partition_end: 255\n";
$proxy->safe_psql($odd_db, qq{
	CREATE EXTENSION plproxy;
	SELECT ringshard.install_plproxy_bridge();
	SELECT ringshard.load_partition_config(\$yaml\$$config\$yaml\$);
	SELECT count(*) FROM ringshard.sync_topology();
	CREATE FUNCTION whoami(keyspace text, key text) RETURNS text AS \$\$
		CLUSTER 'default';
		RUN ON partition_for(keyspace, key);
	\$\$ LANGUAGE plproxy;
});
my $quoted_db = q{dbname='proxy db\\'s'};
is($proxy->safe_psql($odd_db, q{SELECT DISTINCT c FROM plproxy.get_cluster_partitions('default') c ORDER BY 1}),
	join("\n", sort(sprintf("host='%s' port='%d' %s", $workers[0]->host, $workers[0]->port, $quoted_db),
	                 sprintf("host='%s' port='%d' %s", $workers[1]->host, $workers[1]->port, $quoted_db))),
	'the bridge quotes the database name the libpq way and writes the URI as key=value pairs');
is($proxy->safe_psql($odd_db, q{
	SELECT count(*) FILTER (WHERE whoami('faces', 'face-' || g) <> (nodes_for('faces', 'face-' || g))[1] || ' in proxy db''s'),
	       count(DISTINCT whoami('faces', 'face-' || g))
	  FROM generate_series(1, 200) g}),
	'0|2', 'PL/Proxy reaches both workers, by key=value address and by URI, in the database named with a space and a quote');

$_->stop for ($proxy, @workers);
done_testing();

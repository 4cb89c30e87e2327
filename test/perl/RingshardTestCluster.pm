# Shared set-up of the TAP tests: a coordinator and workers, each with
# ringshard preloaded and the extension created, and the workers added to the
# coordinator's ring by their addresses.
package RingshardTestCluster;

use strict;
use warnings;
use Exporter 'import';
use PostgreSQL::Test::Cluster;

our @EXPORT_OK = qw(start_servers add_workers wait_for_fresh_period);

# start_servers(coordinator => NAME, workers => [NAMES], coordinator_conf => TEXT)
# returns ($coordinator, @workers), started, with CREATE EXTENSION ringshard
# done.  Every server allows prepared transactions; coordinator_conf is
# appended to the coordinator's postgresql.conf (then it is restarted).
sub start_servers
{
	my (%opts) = @_;
	my $coordinator = PostgreSQL::Test::Cluster->new($opts{coordinator} // 'coordinator');
	my @workers = map { PostgreSQL::Test::Cluster->new($_) } @{ $opts{workers} };
	for my $node ($coordinator, @workers)
	{
		$node->init;
		$node->append_conf('postgresql.conf',
			"max_prepared_transactions = 20\nshared_preload_libraries = 'ringshard'");
		$node->start;
		$node->safe_psql('postgres', 'CREATE EXTENSION ringshard');
	}
	if (defined $opts{coordinator_conf})
	{
		$coordinator->append_conf('postgresql.conf', $opts{coordinator_conf});
		$coordinator->restart;
	}
	return ($coordinator, @workers);
}

# add_workers($coordinator, @workers): ringshard.add_node for each, named as
# the server, at its host and port.
sub add_workers
{
	my ($coordinator, @workers) = @_;
	$coordinator->safe_psql('postgres', join('', map {
		sprintf(q{SELECT ringshard.add_node('%s', 'host=%s port=%d dbname=postgres');}, $_->name, $_->host, $_->port)
	} @workers));
	return;
}

# wait_for_fresh_period($node, $margin): ringshard.stat_hot_keys counts in
# periods aligned to the clock (ringshard.hot_keys_period, 60 s unless the
# server says otherwise); when fewer than $margin seconds (default 20) are
# left of the current one, sleep into the next, so that a short workload
# falls in one period.  Waits at most $margin seconds.
sub wait_for_fresh_period
{
	my ($node, $margin) = @_;
	$margin //= 20;
	my $left = $node->safe_psql('postgres', q{
		SELECT p - mod(extract(epoch FROM clock_timestamp())::numeric, p)
		  FROM (SELECT extract(epoch FROM current_setting('ringshard.hot_keys_period')::interval)::numeric AS p) s});
	$node->safe_psql('postgres', sprintf('SELECT pg_sleep(%.3f)', $left + 0.05)) if $left < $margin;
	return;
}

1;

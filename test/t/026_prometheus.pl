# Prometheus's postgres_exporter with monitoring/postgres_exporter-queries.yaml
# (docs/monitoring.md).  Skipped when the exporter is not on the PATH (Debian:
# prometheus-postgres-exporter; scripts/install-deps installs it).
#
# A coordinator and two workers, a distributed table, and a scripted
# workload: one INSERT of 20 rows, 45 reads of one key each (key 3 seven
# times), one duplicate key.  The watchdog's round is run by hand once, then w2 is marked down.
# Then the exporter runs as the Debian user would start it, connected over
# the coordinator's unix socket as a role with pg_monitor only, listening on
# a free loopback port; /metrics is polled until ringshard's series are there
# (30 s at most).
#
#  1. Every metric of the file is exported for each node, with the type the
#     file gives it, labelled with the node and the database.
#  2. Each value is the one ringshard.stat_nodes shows.
#  3. The values are those the workload implies: each node's queries at
#     least the statements sent to it, rows_written the rows it owns, the
#     duplicate key's error on its owner as class 23, w1 up and w2 down;
#     the hot keys: key 3 the most read, key 7 (the duplicate tried) the
#     most written, five series per access kind.
#  4. No scrape error: pg_exporter_last_scrape_error 0, the file loaded, and
#     nothing in the exporter's log reports an error.
#  5. With --auto-discover-databases the exporter also runs the queries in a
#     database without the extension: no error there, and no ringshard series.
use strict;
use warnings;
use Cwd qw(abs_path);
use File::Basename qw(dirname);
use HTTP::Tiny;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use FindBin;
use lib "$FindBin::RealBin/../perl";
use RingshardTestCluster qw(wait_for_fresh_period);

my ($exporter) = grep { -x $_ }
  map { ("$_/prometheus-postgres-exporter", "$_/postgres_exporter") } split /:/, ($ENV{PATH} // '');
plan skip_all => 'postgres_exporter is not on the PATH (Debian: prometheus-postgres-exporter, '
  . 'which scripts/install-deps installs)'
  unless $exporter;

my $queries_file = abs_path(dirname(__FILE__) . '/../../monitoring/postgres_exporter-queries.yaml');
ok(defined $queries_file && -r $queries_file, 'monitoring/postgres_exporter-queries.yaml is there')
  or BAIL_OUT('no queries file');

# The file's queries and their metrics, read with a regular expression (no
# YAML module in core Perl): top-level keys, and "- name:" with "usage:".
my (%usage, @order);
{
	open my $fh, '<', $queries_file or die "$queries_file: $!";
	my ($query, $metric);
	while (<$fh>)
	{
		if (/^(\w+):\s*$/) { $query = $1; push @order, $query; next; }
		if (/^\s+- (\w+):\s*$/) { $metric = $1; next; }
		$usage{$query}{$metric} = uc $1 if /^\s+usage:\s*"?(\w+)"?\s*$/ && defined $query && defined $metric;
	}
}
my @node_metrics = grep { $usage{ringshard_stat_nodes}{$_} ne 'LABEL' } sort keys %{ $usage{ringshard_stat_nodes} };
ok(scalar(@node_metrics) >= 15 && (grep { $_ eq 'queries' } @node_metrics) && (grep { $_ eq 'is_up' } @node_metrics),
	'the file has the query ringshard_stat_nodes with its metrics (' . scalar(@node_metrics) . ')');

my $coordinator = PostgreSQL::Test::Cluster->new('coordinator');
my @workers = map { PostgreSQL::Test::Cluster->new("w$_") } 1 .. 2;
for my $node ($coordinator, @workers)
{
	$node->init;
	$node->append_conf('postgresql.conf', "max_prepared_transactions = 20\nshared_preload_libraries = 'ringshard'");
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION ringshard');
}
my ($w1, $w2) = @workers;

$coordinator->safe_psql('postgres', sprintf(q{
	SELECT ringshard.add_node('w1', 'host=%s port=%d dbname=postgres');
	SELECT ringshard.add_node('w2', 'host=%s port=%d dbname=postgres');
	SELECT ringshard.set_replication_factor('default', 1);
	SELECT count(*) FROM ringshard.sync_topology();
	CREATE TABLE items (k int PRIMARY KEY, v int NOT NULL);
	SELECT ringshard.distribute_table('items', 'k');
	SELECT ringshard.create_distributed_table('items');
	CREATE ROLE watcher LOGIN IN ROLE pg_monitor;
	GRANT SELECT ON items TO watcher;    -- the hot keys' values are shown to readers of the table
	CREATE DATABASE plain;
}, $w1->host, $w1->port, $w2->host, $w2->port));

# Which node owns each key 1..20.
my %owner;
for my $line (split /\n/, $coordinator->safe_psql('postgres', 'SELECT g, shard_for(g) FROM generate_series(1, 20) g'))
{
	my ($k, $node) = split /\|/, $line;
	$owner{$k} = $node;
}
my %owns = (w1 => 0, w2 => 0);
$owns{ $owner{$_} }++ for keys %owner;
ok($owns{w1} > 0 && $owns{w2} > 0, "keys 1..20 fall on both nodes (w1 $owns{w1}, w2 $owns{w2})");

# The workload: one statement per line, each sent on its own by psql.
my @reads = ((1 .. 20), (1 .. 20), (3) x 5);    # key 3 the hottest read (7), key 7 the hottest write (2)
my $duplicate = 7;
my %sent = (w1 => 1, w2 => 1);    # the INSERT writes to both
$sent{ $owner{$_} }++ for @reads, $duplicate;
my $workload = join("\n",
	'SELECT ringshard.stat_reset();',
	'INSERT INTO items SELECT g, g FROM generate_series(1, 20) g;',
	(map { "SELECT v FROM items WHERE k = $_;" } @reads));
wait_for_fresh_period($coordinator);    # one period of stat_hot_keys holds the workload
$coordinator->safe_psql('postgres', $workload);
my ($rc, undef, $err) = $coordinator->psql('postgres', "INSERT INTO items VALUES ($duplicate, 0)");
like($err, qr/duplicate key/, 'workload: ' . (2 + @reads) . " statements, the last a duplicate key on $owner{$duplicate}");

# One round of the watchdog by hand (it records each probe's round trip; both
# nodes answer, so both stay up), then w2 marked down.
$coordinator->safe_psql('postgres', q{
	SELECT count(*) FROM ringshard.watchdog_tick();
	SELECT ringshard.mark_node_down('w2');
});

# The view, once the workload's connections to the nodes have closed: "node
# metric" => value (NULL as NaN).
my @columns = map { $_ eq 'is_up' ? 'is_up::integer' : $_ } @node_metrics;
my $view_sql = sprintf(q{SELECT node, %s FROM ringshard.stat_nodes ORDER BY node},
	join(', ', map { "coalesce(($_)::text, 'NaN')" } @columns));
my %view;
my $deadline = time + 60;
while (1)
{
	%view = ();
	for my $line (split /\n/, $coordinator->safe_psql('postgres', $view_sql, extra_params => [ '-U', 'watcher' ]))
	{
		my ($node, @values) = split /\|/, $line;
		@view{ map { "$node $_" } @node_metrics } = @values;
	}
	last if ($view{'w1 connections_open'} // '') eq '0' && ($view{'w2 connections_open'} // '') eq '0';
	last if time > $deadline;
	usleep(100_000);
}
is(($view{'w1 connections_open'} // 'none') . '/' . ($view{'w2 connections_open'} // 'none'), '0/0',
	'the workload\'s connections to the nodes have closed');

# --- the exporter -----------------------------------------------------------

my @running;    # IPC::Run handles, killed at the end whatever happens
END
{
	my $status = $?;    # kill_kill() sets $? to the exporter's
	for my $h (@running)
	{
		eval { $h->kill_kill(grace => 5) };
	}
	$? = $status;
}

my $dsn = sprintf('host=%s port=%d user=watcher dbname=postgres sslmode=disable', $coordinator->host,
	$coordinator->port);
my $http = HTTP::Tiny->new(timeout => 10);

# Starts the exporter with @flags on a free port; returns (handle, port, log
# file).  A port taken between get_free_port() and the exporter's bind is
# tried again with another, three times.
sub start_exporter
{
	my ($name, @flags) = @_;
	my $log = "$PostgreSQL::Test::Utils::log_path/026_${name}.log";
	for my $attempt (1 .. 3)
	{
		my $port = PostgreSQL::Test::Cluster::get_free_port();
		unlink $log;
		local $ENV{DATA_SOURCE_NAME} = $dsn;
		my $h = IPC::Run::start([ $exporter, "--extend.query-path=$queries_file",
				"--web.listen-address=127.0.0.1:$port", @flags ],
			'<', '/dev/null', '>', $log, '2>&1');
		push @running, $h;
		my $until = time + 30;
		while (time < $until)
		{
			last if slurp_file_or_empty($log) =~ /Listening on|address already in use/;
			last unless $h->pumpable;
			usleep(100_000);
		}
		return ($h, $port, $log) if slurp_file_or_empty($log) =~ /Listening on/ && $h->pumpable;
		diag "exporter $name (attempt $attempt, port $port) did not listen:\n" . slurp_file_or_empty($log);
		stop_exporter($h);
	}
	return (undef, undef, $log);
}

sub stop_exporter
{
	my ($h) = @_;
	return unless $h;
	eval { $h->signal('TERM') };
	my $until = time + 10;
	usleep(100_000) while $h->pumpable && time < $until;
	eval { $h->kill_kill(grace => 5) };
	@running = grep { $_ != $h } @running;
}

sub slurp_file_or_empty
{
	my ($file) = @_;
	return -e $file ? slurp_file($file) : '';
}

# Polls /metrics until $ready matches (30 s at most); returns the last body.
sub scrape_until
{
	my ($port, $ready) = @_;
	my $body = '';
	my $until = time + 30;
	while (time < $until)
	{
		my $res = $http->get("http://127.0.0.1:$port/metrics");
		if ($res->{success})
		{
			$body = $res->{content};
			return $body if $body =~ $ready;
		}
		usleep(250_000);
	}
	return $body;
}

# The series of a scrape: [ name, { label => value }, value ], and the TYPE of
# each name.
sub parse_metrics
{
	my ($body) = @_;
	my (@series, %type);
	for my $line (split /\n/, $body)
	{
		if ($line =~ /^# TYPE (\S+) (\S+)/) { $type{$1} = $2; next; }
		next if $line =~ /^#/ || $line !~ /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)/;
		my ($name, $labels, $value) = ($1, $2 // '', $3);
		my %l;
		$l{$1} = $2 while $labels =~ /(\w+)="((?:[^"\\]|\\.)*)"/g;
		push @series, [ $name, \%l, $value ];
	}
	return (\@series, \%type);
}

# The series of $name whose labels include %want.
sub series
{
	my ($all, $name, %want) = @_;
	return grep {
		my $s = $_;
		$s->[0] eq $name && !grep { ($s->[1]{$_} // "\0") ne $want{$_} } keys %want
	} @$all;
}

sub one_value
{
	my @s = series(@_);
	return @s == 1 ? $s[0][2] : undef;
}

sub same_number
{
	my ($a, $b) = @_;
	return 0 unless defined $a && defined $b;
	return lc($a) eq 'nan' && lc($b) eq 'nan' if lc($a) eq 'nan' || lc($b) eq 'nan';
	return abs($a - $b) <= 1e-9 * (1 + abs($b));
}

# Lines of the exporter's log that report an error (0.11 logs a failed or
# unparsable query at level info, with err=).
sub log_errors
{
	my ($log) = @_;
	return grep { /level=(?:error|warn)|\berr=/ } split /\n/, slurp_file_or_empty($log);
}

# 1-4: as the Debian user would run it (docs/monitoring.md)
{
	my ($h, $port, $log) = start_exporter('exporter');
	ok($h, 'the exporter listens on 127.0.0.1' . ($port ? ":$port" : ''));
	my $body = $h ? scrape_until($port, qr/^ringshard_stat_nodes_queries\{[^}]*node="w2"/m) : '';
	my ($all, $type) = parse_metrics($body);
	ok(scalar(series($all, 'ringshard_stat_nodes_queries')), '/metrics has ringshard\'s series')
	  or diag "log:\n" . slurp_file_or_empty($log) . "\nmetrics:\n" . join("\n", grep { /^(ringshard|pg_up|pg_exporter)/ } split /\n/, $body);

	is(one_value($all, 'pg_up'), '1', 'pg_up 1');
	is(one_value($all, 'pg_exporter_last_scrape_error'), '0', 'pg_exporter_last_scrape_error 0');
	is(one_value($all, 'pg_exporter_user_queries_load_error', filename => $queries_file), '0',
		'pg_exporter_user_queries_load_error 0 for the file');

	# 1 and 2
	my (@missing, @mistyped, @differ);
	for my $metric (@node_metrics)
	{
		my $name = "ringshard_stat_nodes_$metric";
		push @mistyped, "$name: " . ($type->{$name} // 'none')
		  if ($type->{$name} // '') ne lc $usage{ringshard_stat_nodes}{$metric};
		for my $node (qw(w1 w2))
		{
			my $v = one_value($all, $name, node => $node, datname => 'postgres');
			if (!defined $v) { push @missing, "$name\{node=\"$node\"}"; next; }
			push @differ, "$name\{node=\"$node\"}: exported $v, view " . ($view{"$node $metric"} // 'none')
			  unless same_number($v, $view{"$node $metric"});
		}
	}
	is(join(', ', @missing), '', 'every metric of ringshard_stat_nodes is there for w1 and w2, with datname="postgres"');
	is(join(', ', @mistyped), '', '... each of the type the file gives it (COUNTER, GAUGE)');
	is(join("\n", @differ), '', '... each with the value ringshard.stat_nodes shows');
	my @server = map { $_->[1]{server} // '' } series($all, 'ringshard_stat_nodes_queries');
	is(scalar(grep { $_ eq $coordinator->host . ':' . $coordinator->port } @server), 2,
		'... and the exporter\'s server label (socket directory:port)');

	# 3
	for my $node (qw(w1 w2))
	{
		my $q = one_value($all, 'ringshard_stat_nodes_queries', node => $node) // -1;
		ok($q >= $sent{$node}, "$node: ringshard_stat_nodes_queries $q >= the $sent{$node} statements sent to it");
		is(one_value($all, 'ringshard_stat_nodes_rows_written', node => $node), $owns{$node},
			"$node: ringshard_stat_nodes_rows_written = the $owns{$node} rows of the INSERT it owns");
		my $rt = one_value($all, 'ringshard_stat_nodes_round_trips', node => $node) // -1;
		my $mean = one_value($all, 'ringshard_stat_nodes_mean_ms', node => $node) // 'none';
		my $p99 = one_value($all, 'ringshard_stat_nodes_p99_ms', node => $node) // 'none';
		ok($rt >= $sent{$node} && $mean =~ /^[\d.e+-]+$/ && $p99 =~ /^[\d.e+-]+$/ && $p99 >= $mean && $mean >= 0,
			"$node: round trips $rt, mean $mean ms, p99 $p99 ms");
		is(one_value($all, 'ringshard_stat_nodes_prepared_open', node => $node), '0', "$node: no prepared transaction open");
	}
	is(one_value($all, 'ringshard_stat_nodes_is_up', node => 'w1') . '/' . one_value($all, 'ringshard_stat_nodes_is_up', node => 'w2'),
		'1/0', 'ringshard_stat_nodes_is_up: w1 1, w2 (marked down) 0');
	my $rtt = one_value($all, 'ringshard_stat_nodes_last_rtt_ms', node => 'w1') // 'none';
	ok($rtt =~ /^[\d.e+-]+$/ && $rtt >= 0, "w1: ringshard_stat_nodes_last_rtt_ms $rtt (the watchdog's probe)");
	my $dup_owner = $owner{$duplicate};
	is(one_value($all, 'ringshard_stat_nodes_errors_by_class', node => $dup_owner, class => '23', datname => 'postgres'), '1',
		"ringshard_stat_nodes_errors_by_class{class=\"23\"} 1 on $dup_owner, the duplicate key's owner");
	is(scalar(series($all, 'ringshard_stat_nodes_errors_by_class')), 1, '... and no other error class anywhere');
	is(($type->{ringshard_stat_nodes_errors_by_class} // 'none'), 'counter', '... a counter');
	is(join(' ', map { one_value($all, 'ringshard_stat_hot_keys_count', datname => 'postgres', table_name => 'items',
				access => $_->[0], rank => $_->[1], key => $_->[2]) // 'none' } ([ 'read', 1, 3 ], [ 'read', 2, 1 ], [ 'write', 1, 7 ])),
		'7 2 2', 'ringshard_stat_hot_keys_count: key 3 read 7 times first, then key 1 (2); key 7 written twice (the duplicate tried) first');
	is(scalar(series($all, 'ringshard_stat_hot_keys_count', table_name => 'items')), 10, '... five per access kind');
	is(($type->{ringshard_stat_hot_keys_count} // 'none'), 'gauge', '... a gauge');

	# 4
	my @errors = log_errors($log);
	is(scalar(@errors), 0, 'the exporter\'s log reports no error') or diag join("\n", @errors);
	stop_exporter($h);
}

# 5: every database, one of them without the extension.  The role's
# statements in "plain" are logged, to see that the exporter ran them there.
{
	$coordinator->safe_psql('postgres', q{ALTER ROLE watcher IN DATABASE plain SET log_statement = 'all'});
	my $log_offset = -s $coordinator->logfile;
	my ($h, $port, $log) = start_exporter('exporter_discover', '--auto-discover-databases');
	ok($h, 'the exporter with --auto-discover-databases listens');
	my $body = $h ? scrape_until($port, qr/^ringshard_stat_nodes_queries\{[^}]*datname="postgres"/m) : '';
	my ($all) = parse_metrics($body);
	is(one_value($all, 'pg_exporter_last_scrape_error'), '0', 'pg_exporter_last_scrape_error 0 over every database');
	is(scalar(series($all, 'ringshard_stat_nodes_queries', datname => 'postgres')), 2, 'the coordinator\'s series are there');
	my $ran = 0;
	my $until = time + 30;
	while (!$ran && time < $until)
	{
		$ran = substr(slurp_file($coordinator->logfile), $log_offset) =~ /statement: .*?to_regclass\('ringshard\.stat_nodes'\)/s;
		usleep(100_000) unless $ran;
	}
	ok($ran, 'the exporter ran ringshard\'s queries in "plain", which has no extension');
	is(scalar(grep { $_->[0] =~ /^ringshard_/ && ($_->[1]{datname} // '') eq 'plain' } @$all), 0,
		'... which gave no ringshard series');
	my @errors = log_errors($log);
	is(scalar(@errors), 0, '... and no error in the exporter\'s log') or diag join("\n", @errors);
	stop_exporter($h);
}

done_testing();

# Failover managed by pg_auto_failover (docs/auto-failover.md).  Opt-in (it
# takes about 6 minutes, too long for CI's budget): runs only with
# RINGSHARD_TEST_AUTO_FAILOVER=1 and pg_autoctl on the PATH (Debian:
# pg-auto-failover-cli, and postgresql-15-auto-failover for the monitor's
# extension; scripts/install-deps installs both).
#
# One pg_auto_failover monitor; the coordinator as formation "coord" (two
# nodes), workers w1 and w2 as formations "w1" and "w2" (two nodes each), w3
# a plain server.  Every node runs under pg_autoctl on loopback.  Three
# clients run multi-node transactions (three rows, three keys: two phases),
# one psql per transaction, through the URI that `pg_autoctl show uri` gives
# for the coordinator's formation.  Under their load:
#
#   1. pg_autoctl perform failover on the coordinator's formation;
#   2. the coordinator's primary SIGKILLed (keeper and postgres), with one
#      transaction stopped after PREPARE on its workers and one after its
#      commit decision; the monitor promotes the other node;
#   3. w1's primary SIGKILLed, with one transaction prepared on it; the
#      monitor promotes w1's other node;
#   4. pg_autoctl perform failover on w2's formation.
#
# After each kill the old primary's keeper is started again and rejoins as
# the standby.  Then: every transaction a client saw commit is complete on
# all replicas of its rows, none is partial, no row is duplicated, nothing is
# left prepared, queued or recorded, each group's standby has its primary's
# rows.  The test prints the time from each failover's start to the first
# commit after it.
use strict;
use warnings;
use File::Copy ();
use File::Path qw(mkpath rmtree);
use POSIX ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

if (($ENV{RINGSHARD_TEST_AUTO_FAILOVER} // '') ne '1')
{
	plan skip_all => 'pg_auto_failover failovers take about 6 minutes: opt-in, set RINGSHARD_TEST_AUTO_FAILOVER=1 '
	  . '(needs pg_autoctl and the pgautofailover extension, docs/auto-failover.md)';
}
my ($autoctl) = grep { -x $_ } map { "$_/pg_autoctl" } split /:/, ($ENV{PATH} // '');
plan skip_all => 'pg_autoctl is not on the PATH (Debian: pg-auto-failover-cli)' unless $autoctl;

# The data nodes run the PostgreSQL under test (with ringshard); the monitor
# needs one with the pgautofailover extension: that one if it has it, else
# Debian's PostgreSQL of the same major version.
chomp(my $bindir = `pg_config --bindir`);
chomp(my $sharedir = `pg_config --sharedir`);
my ($major) = `pg_config --version` =~ /(\d+)/;
my $monitor_pg_ctl = $ENV{RINGSHARD_TEST_MONITOR_PG_CTL};
if (!$monitor_pg_ctl)
{
	if (-e "$sharedir/extension/pgautofailover.control")
	{
		$monitor_pg_ctl = "$bindir/pg_ctl";
	}
	elsif (-e "/usr/share/postgresql/$major/extension/pgautofailover.control"
		&& -x "/usr/lib/postgresql/$major/bin/pg_ctl")
	{
		$monitor_pg_ctl = "/usr/lib/postgresql/$major/bin/pg_ctl";
	}
}
plan skip_all => "no PostgreSQL $major with the pgautofailover extension for the monitor "
  . "(Debian: postgresql-$major-auto-failover)"
  unless $monitor_pg_ctl;

my $base = "$PostgreSQL::Test::Utils::tmp_check/t_021_auto_failover_data";
my $logdir = $PostgreSQL::Test::Utils::log_path;
rmtree($base);
mkpath($base);
my $dir = "$base/clients";
mkpath($dir);
note("pg_autoctl: $autoctl; monitor: $monitor_pg_ctl; data nodes: $bindir/pg_ctl; data and logs: $base, $logdir");

# pg_autoctl keeps its files under XDG_CONFIG_HOME and XDG_DATA_HOME, and
# connects to its local Postgres by PGHOST: loopback (the framework sets PGHOST
# to its own socket directory, where these servers do not listen).
my %autoctl_env = (
	XDG_CONFIG_HOME => "$base/xdg-config",
	XDG_DATA_HOME => "$base/xdg-data",
	XDG_RUNTIME_DIR => "$base/xdg-run",
	PGHOST => '127.0.0.1');
my %af;			# name => { name, formation, port, pgdata, pid (of pg_autoctl run, its process group) }

# Start a pg_autoctl command, its output appended to the node's log, killed
# after $timeout seconds: its IPC::Run handle.
sub autoctl_start
{
	my ($log, $timeout, @args) = @_;
	local @ENV{ keys %autoctl_env } = values %autoctl_env;
	local $ENV{PGPORT};
	delete $ENV{PGPORT};
	my $file = "$logdir/021_$log.autoctl.log";
	open my $fh, '>>', $file or die "$file: $!";
	printf $fh "==== %s pg_autoctl %s\n", scalar(localtime), join(' ', @args);
	close $fh;
	return IPC::Run::start([ $autoctl, @args ], '<', '/dev/null', '>>', $file, '2>&1', IPC::Run::timeout($timeout));
}

# Wait for a started pg_autoctl command: its exit status (-1 after its time-out).
sub autoctl_finish
{
	my ($h) = @_;
	return $h->full_result(0) >> 8 if eval { $h->finish; 1 };
	eval { $h->kill_kill };
	return -1;
}

# Run a pg_autoctl command: its exit status (-1 after a time-out).
sub autoctl
{
	return autoctl_finish(autoctl_start(@_));
}

# A pg_autoctl command's standard output (undef if it failed).
sub autoctl_output
{
	my ($log, @args) = @_;
	local @ENV{ keys %autoctl_env } = values %autoctl_env;
	my ($out, $err) = ('', '');
	my $ok = eval {
		IPC::Run::run([ $autoctl, @args ], '<', '/dev/null', '>', \$out, '2>', \$err, IPC::Run::timeout(60));
		1;
	};
	open my $fh, '>>', "$logdir/021_$log.autoctl.log" or die;
	print $fh "==== pg_autoctl @args\n$out$err";
	close $fh;
	return ($ok && $? == 0) ? $out : undef;
}

# Start `pg_autoctl run` for a node in its own process group (pid = group).
sub start_keeper
{
	my ($name) = @_;
	my $n = $af{$name};
	my $pid = fork();
	die "fork: $!" unless defined $pid;
	if ($pid == 0)
	{
		POSIX::setsid();
		@ENV{ keys %autoctl_env } = values %autoctl_env;
		delete $ENV{PGPORT};
		open STDIN, '<', '/dev/null';
		open STDOUT, '>>', "$logdir/021_$name.autoctl.log" or POSIX::_exit(1);
		open STDERR, '>&', \*STDOUT;
		exec($autoctl, 'run', '--pgdata', $n->{pgdata}) or POSIX::_exit(1);
	}
	$n->{pid} = $pid;
	return $pid;
}

# Whether a child exited within $timeout seconds (reaped if so).
sub wait_exit
{
	my ($pid, $timeout) = @_;
	my $until = time + $timeout;
	while (time < $until)
	{
		my $r = waitpid($pid, POSIX::WNOHANG);
		return 1 if $r == $pid || $r == -1;
		usleep(100_000);
	}
	return 0;
}

# A node's processes: its keeper's process group (pg_autoctl and the
# postmaster it runs) and the postmaster's children (each backend leads a
# process group of its own).
sub node_processes
{
	my ($name) = @_;
	my $pgid = $af{$name}{pid};
	my $postmaster;
	if (open my $fh, '<', "$af{$name}{pgdata}/postmaster.pid")
	{
		$postmaster = <$fh>;
		chomp $postmaster if defined $postmaster;
	}
	my (%pgrp, %ppid);
	opendir my $dh, '/proc' or return ();
	for my $p (grep { /^\d+$/ } readdir $dh)
	{
		open my $st, '<', "/proc/$p/stat" or next;
		my $line = <$st> // next;
		my ($ppid, $pgrp) = $line =~ /\)\s+\S+\s+(\d+)\s+(\d+)/ or next;
		($ppid{$p}, $pgrp{$p}) = ($ppid, $pgrp);
	}
	# the postmaster only if it is the keeper's (a stale pid file names another process)
	undef $postmaster unless defined $postmaster && ($pgrp{$postmaster} // -1) == $pgid;
	return grep { $pgrp{$_} == $pgid || (defined $postmaster && $ppid{$_} == $postmaster) } keys %pgrp;
}

# The machine of a node lost: its keeper, its postgres and every backend,
# stopped, then SIGKILLed together.
sub kill_node
{
	my ($name) = @_;
	my $pid = $af{$name}{pid};
	return unless $pid;
	kill 'STOP', -$pid;
	my @pids = node_processes($name);
	kill 'STOP', @pids;
	@pids = node_processes($name);
	kill 'KILL', -$pid;
	kill 'KILL', @pids;
	wait_exit($pid, 30);
	$af{$name}{pid} = undef;
}

# Stop a node's keeper (and its postgres): SIGTERM, and what is left after
# 60 s SIGKILLed.
sub stop_keeper
{
	my ($name) = @_;
	my $pid = $af{$name}{pid};
	return unless $pid;
	kill 'TERM', $pid;
	kill_node($name) unless wait_exit($pid, 60);
	$af{$name}{pid} = undef;
}

# psql on an af node (or the monitor), SQL on standard input: (rc, out, err).
sub af_psql
{
	my ($name, $sql, $dbname) = @_;
	my ($out, $err) = ('', '');
	my $ok = eval {
		IPC::Run::run([ 'psql', '-X', '-A', '-t', '-q', '-v', 'ON_ERROR_STOP=1', '-h', '127.0.0.1',
				'-p', $af{$name}{port}, '-d', $dbname // 'postgres', '-f', '-' ],
			'<', \$sql, '>', \$out, '2>', \$err, IPC::Run::timeout(120));
		1;
	};
	$err .= $@ unless $ok;
	chomp $out;
	return ($ok ? $? >> 8 : -1, $out, $err);
}

sub af_safe_psql
{
	my ($name, $sql, $dbname) = @_;
	my ($rc, $out, $err) = af_psql($name, $sql, $dbname);
	die "psql on $name failed ($rc): $err\nquery: $sql" if $rc != 0;
	return $out;
}

sub monitor_query { return af_safe_psql('monitor', $_[0], 'pg_auto_failover') }

# Poll a sub until it returns true: every 200 ms, at most $timeout seconds.
sub poll_until
{
	my ($timeout, $check) = @_;
	my $until = time + $timeout;
	for (1 .. int($timeout * 5) + 1)
	{
		my $r = eval { $check->() };
		return $r if $r;
		last if time > $until;
		usleep(200_000);
	}
	return 0;
}

# A formation's nodes as the monitor sees them: "name=reported/goal ...".
sub formation_state
{
	my ($formation) = @_;
	return monitor_query(qq{SELECT string_agg(nodename || '=' || reportedstate || '/' || goalstate, ' ' ORDER BY nodename)
		FROM pgautofailover.node WHERE formationid = '$formation'});
}

# Wait (bounded) until the monitor has one primary and the other nodes
# secondaries in a formation; its primary's name, or undef.
sub wait_stable
{
	my ($formation, $timeout) = @_;
	my $primary;
	poll_until($timeout // 180, sub {
		my $state = formation_state($formation);
		my @nodes = split / /, $state;
		my @primary = grep { m{=primary/primary$} } @nodes;
		my @secondary = grep { m{=secondary/secondary$} } @nodes;
		return 0 unless @primary == 1 && @primary + @secondary == @nodes && @nodes > 1;
		($primary) = $primary[0] =~ /^([^=]+)=/;
		return 1;
	}) or diag("formation $formation: " . (eval { formation_state($formation) } // $@));
	return $primary;
}

# Wait (bounded) until a node of the formation other than $old takes writes;
# its name, or undef.
sub wait_writable_other
{
	my ($formation, $old, $timeout) = @_;
	my $new;
	poll_until($timeout, sub {
		for my $name (grep { $af{$_}{formation} eq $formation && $_ ne $old } keys %af)
		{
			my ($rc, $out) = af_psql($name, 'SHOW transaction_read_only');
			if ($rc == 0 && $out eq 'off')
			{
				$new = $name;
				return 1;
			}
		}
		return 0;
	});
	return $new;
}

# Create data nodes under the monitor, in parallel (the first of a formation
# is its primary; the next is made from a base backup of it): name =>
# formation pairs; each one's exit status (-1 after a time-out of 240 s).
my $monitor_uri;
sub create_nodes
{
	my (@pairs) = @_;
	my @started;
	while (my ($name, $formation) = splice(@pairs, 0, 2))
	{
		my $n = $af{$name} = {
			name => $name,
			formation => $formation,
			port => PostgreSQL::Test::Cluster::get_free_port(),
			pgdata => "$base/$name" };
		my @args = ('create', 'postgres', '--pgctl', "$bindir/pg_ctl", '--pgdata', $n->{pgdata},
			'--pgport', $n->{port}, '--hostname', '127.0.0.1', '--listen', '127.0.0.1', '--name', $name,
			'--formation', $formation, '--monitor', $monitor_uri, '--auth', 'trust', '--no-ssl',
			'--dbname', 'postgres');
		push @started, autoctl_start($name, 240, @args);
	}
	return map { autoctl_finish($_) } @started;
}

sub append_file
{
	my ($file, $text) = @_;
	open my $fh, '>>', $file or die "$file: $!";
	print $fh $text;
	close $fh;
}

# What ringshard needs on every node: after pg_autoctl's include line
# (which it keeps at the top of postgresql.conf), so these win.  pg_autoctl
# preloads pg_stat_statements (it creates that extension); its tuning sizes
# shared_buffers for a machine of its own, made small here for eight servers
# on one test machine.  fsync off as in every TAP test: a SIGKILL loses no
# written page.  pg_basebackup (a new standby) waits for a checkpoint: an
# unpaced one here.
my $node_conf = <<'EOF';

# ringshard (after the include line of pg_auto_failover, so that these win)
shared_preload_libraries = 'pg_stat_statements,ringshard'
max_prepared_transactions = 20
shared_buffers = '128MB'
effective_cache_size = '1GB'
work_mem = '4MB'
maintenance_work_mem = '64MB'
wal_keep_size = '256MB'
fsync = off
checkpoint_completion_target = 0
EOF

# Clean up whatever this test started, and keep the servers' logs.
END
{
	my $status = $?;
	stop_keeper($_) for grep { $_ ne 'monitor' } sort keys %af;
	stop_keeper('monitor') if $af{monitor};
	for my $name (keys %af)
	{
		my $to = "$logdir/021_${name}_pglog";
		mkpath($to);
		File::Copy::copy($_, $to) for glob("$af{$name}{pgdata}/log/*"), glob("$af{$name}{pgdata}/startup.log");
	}
	rmtree($base) if defined $base && $status == 0 && PostgreSQL::Test::Utils::all_tests_passing() && !$ENV{PG_TEST_NOCLEAN};
	$? = $status;
}

# ---------------------------------------------------------------------------
# The monitor.  Its health checks made faster than the defaults (5 s period,
# 20 s before a node is unhealthy, 30 s for a primary to demote): the
# primaries here are SIGKILLed, so none can linger on the far side of a
# partition.
$af{monitor} = { name => 'monitor', formation => '', port => PostgreSQL::Test::Cluster::get_free_port(),
	pgdata => "$base/monitor" };
is(autoctl('monitor', 240, 'create', 'monitor', '--pgctl', $monitor_pg_ctl, '--pgdata', $af{monitor}{pgdata},
		'--pgport', $af{monitor}{port}, '--hostname', '127.0.0.1', '--listen', '127.0.0.1', '--auth', 'trust',
		'--no-ssl'),
	0, 'pg_autoctl create monitor');
append_file("$af{monitor}{pgdata}/postgresql.conf", <<'EOF');

shared_buffers = '32MB'
work_mem = '4MB'
maintenance_work_mem = '64MB'
effective_cache_size = '1GB'
fsync = off
pgautofailover.health_check_period = 1000
pgautofailover.health_check_timeout = 2000
pgautofailover.health_check_max_retries = 2
pgautofailover.health_check_retry_delay = 1000
pgautofailover.node_considered_unhealthy_timeout = 5000
pgautofailover.primary_demote_timeout = 5000
EOF
start_keeper('monitor');
ok(poll_until(60, sub { monitor_query('SELECT count(*) FROM pgautofailover.formation') >= 1 }), 'the monitor runs');
is(monitor_query('SHOW listen_addresses'), '127.0.0.1', 'the monitor listens on loopback only');
$monitor_uri = autoctl_output('monitor', 'show', 'uri', '--pgdata', $af{monitor}{pgdata}, '--formation', 'monitor');
chomp $monitor_uri if defined $monitor_uri;
like($monitor_uri, qr{^postgres://autoctl_node\@127\.0\.0\.1:$af{monitor}{port}/pg_auto_failover}, "the monitor's URI");
for my $formation (qw(coord w1 w2))
{
	is(autoctl('monitor', 60, 'create', 'formation', '--pgdata', $af{monitor}{pgdata}, '--formation', $formation,
			'--kind', 'pgsql', '--dbname', 'postgres'),
		0, "formation $formation");
}

# ---------------------------------------------------------------------------
# The workers' groups: the first node, with ringshard's settings and the
# extension, then the second from a base backup of it (which brings both).
# Each group's first node (the workers' and the coordinator's, in parallel),
# with ringshard's settings; the extension on the workers.
my @first = map { ("${_}_a" => $_) } qw(w1 w2 coord);
my @rc = create_nodes(@first);
for my $name (map { $first[ 2 * $_ ] } 0 .. $#first / 2)
{
	my $g = $af{$name}{formation};
	is(shift @rc, 0, "pg_autoctl create postgres $name");
	append_file("$af{$name}{pgdata}/postgresql.conf", $node_conf);
	start_keeper($name);
}
for my $name (map { $first[ 2 * $_ ] } 0 .. $#first / 2)
{
	my $g = $af{$name}{formation};
	ok(poll_until(120, sub { formation_state($g) eq "$name=single/single" && (af_psql($name, 'SELECT 1'))[0] == 0 }),
		"$name runs as the single node of $g") or diag(formation_state($g));
}
af_safe_psql($_, 'CREATE EXTENSION ringshard') for qw(w1_a w2_a);

# The workers' second nodes, from base backups (which bring ringshard's
# settings and the extension), in parallel.
@rc = create_nodes(map { ("${_}_b" => $_) } qw(w1 w2));
for my $g (qw(w1 w2))
{
	is(shift @rc, 0, "pg_autoctl create postgres ${g}_b (a base backup of ${g}_a)");
	start_keeper("${g}_b");
}
for my $g (qw(w1 w2))
{
	is(wait_stable($g), "${g}_a", "$g: ${g}_a primary, ${g}_b its secondary");
}
like(af_safe_psql('w1_a', 'SHOW synchronous_standby_names'), qr/^ANY 1 \(pgautofailover_standby_\d+\)$/,
	"w1's primary waits for its standby's confirmation of each commit");
is(af_safe_psql('w1_b', q{SELECT current_setting('shared_preload_libraries') ~ 'ringshard'
	AND current_setting('max_prepared_transactions')::int > 0 AND pg_is_in_recovery()}),
	't', "w1's standby has ringshard's settings (from the base backup)");

my $w3 = PostgreSQL::Test::Cluster->new('w3');
$w3->init;
$w3->append_conf('postgresql.conf', "max_prepared_transactions = 20\nshared_preload_libraries = 'ringshard'");
$w3->start;
$w3->safe_psql('postgres', 'CREATE EXTENSION ringshard');

# ---------------------------------------------------------------------------
# The coordinator: ringshard set up on its first node (the watchdog's
# settings with ALTER SYSTEM), then its second node from a base backup.
my %address = map {
	my $g = $_;
	($g => sprintf('host=127.0.0.1,127.0.0.1 port=%d,%d dbname=postgres target_session_attrs=read-write',
			$af{"${g}_a"}{port}, $af{"${g}_b"}{port}))
} qw(w1 w2);
my $w1_uri = autoctl_output('monitor', 'show', 'uri', '--pgdata', $af{monitor}{pgdata}, '--formation', 'w1');
# "postgres://host:port,host:port/dbname?target_session_attrs=read-write&...": its host:port pairs, sorted
sub uri_hosts
{
	my ($uri) = @_;
	my ($hosts) = ($uri // '') =~ m{^postgres://([^/]+)/postgres\?target_session_attrs=read-write};
	return join(',', sort split /,/, $hosts // '');
}
is(uri_hosts($w1_uri), join(',', sort map { "127.0.0.1:$af{$_}{port}" } qw(w1_a w1_b)),
	"pg_autoctl show uri --formation w1: w1's two hosts, read-write") or diag($w1_uri);
af_safe_psql('coord_a', sprintf(q{
	CREATE EXTENSION ringshard;
	SELECT ringshard.add_node('w1', '%s');
	SELECT ringshard.add_node('w2', '%s');
	SELECT ringshard.add_node('w3', 'host=%s port=%d dbname=postgres');
	SELECT ringshard.set_replication_factor('default', 2);
	SELECT count(*) FROM ringshard.sync_topology();
	CREATE TABLE ledger (k text NOT NULL, txn text NOT NULL, part int NOT NULL, note text);
	SELECT ringshard.distribute_table('ledger', 'k');
	SELECT ringshard.create_distributed_table('ledger');
	INSERT INTO ledger SELECT 'seed-' || g, 'seed-' || g, 1, NULL FROM generate_series(1, 300) g;
	ALTER SYSTEM SET ringshard.watchdog_database = 'postgres';
	ALTER SYSTEM SET ringshard.watchdog_interval = '300ms';
	SELECT pg_reload_conf();},
	$address{w1}, $address{w2}, $w3->host, $w3->port));
ok(poll_until(60, sub { af_safe_psql('coord_a', q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'ringshard watchdog'}) == 1 }),
	'the watchdog runs on the primary coordinator');
is((create_nodes(coord_b => 'coord'))[0], 0, 'pg_autoctl create postgres coord_b (a base backup of coord_a)');
start_keeper('coord_b');
is(wait_stable('coord'), 'coord_a', 'coord: coord_a primary, coord_b its secondary');
like(af_safe_psql('coord_a', 'SHOW synchronous_standby_names'), qr/^ANY 1 \(pgautofailover_standby_\d+\)$/,
	"the coordinator's primary waits for its standby's confirmation of each commit");
is(af_safe_psql('coord_b', q{SELECT current_setting('ringshard.watchdog_database') || ' ' || pg_is_in_recovery()}),
	'postgres true', "the coordinator's standby has ALTER SYSTEM's settings (from the base backup)");
is(af_safe_psql('coord_b', q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'ringshard watchdog'}),
	'0', 'no watchdog runs on the standby');
my $coord_uri = autoctl_output('monitor', 'show', 'uri', '--pgdata', $af{monitor}{pgdata}, '--formation', 'coord');
chomp $coord_uri if defined $coord_uri;
is(uri_hosts($coord_uri), join(',', sort map { "127.0.0.1:$af{$_}{port}" } qw(coord_a coord_b)),
	"pg_autoctl show uri --formation coord: both coordinators, read-write") or diag($coord_uri);
$coord_uri .= '&connect_timeout=2';

my $fault_injection = af_safe_psql('coord_a', q{SELECT current_setting('ringshard.fault_injection', true) IS NOT NULL});
note('no FAULT_INJECTION build: the transactions held in doubt are left out') if $fault_injection ne 't';

# ---------------------------------------------------------------------------
# Clients: each transaction writes three rows (three keys: two or three
# nodes, two phases) through a new connection to the coordinators' URI.
# Each logs "txn ok|fail time port" (the port of the coordinator it reached).
my @clients;
sub start_clients
{
	unlink "$dir/stop";
	for my $id (1 .. 3)
	{
		my $pid = fork();
		die "fork: $!" unless defined $pid;
		if ($pid == 0)
		{
			open STDERR, '>>', "$dir/client-$id.err";
			open my $log, '>>', "$dir/client-$id.log" or POSIX::_exit(1);
			$log->autoflush(1);
			my $deadline = time + 600;
			for my $seq (1 .. 20000)
			{
				last if -e "$dir/stop" || time > $deadline;
				my $txn = sprintf('c%d-%05d', $id, $seq);
				my $sql = "BEGIN; INSERT INTO ledger (k, txn, part) VALUES "
				  . "('$txn-a', '$txn', 1), ('$txn-b', '$txn', 2), ('$txn-c', '$txn', 3); "
				  . ($seq > 1 ? sprintf("UPDATE ledger SET note = 'seen' WHERE k = 'c%d-%05d-a'; ", $id, $seq - 1) : '')
				  . "COMMIT;";
				# one psql per transaction, killed after 60 s (then "fail": its
				# outcome unknown to the client)
				my ($out, $err) = ('', '');
				my $ran = eval {
					IPC::Run::run([ 'psql', '-X', '-q', '-At', '-v', 'ON_ERROR_STOP=1', '-d', $coord_uri,
							'-c', 'SELECT inet_server_port()', '-c', $sql ],
						'<', '/dev/null', '>', \$out, '2>', \$err, IPC::Run::timeout(60));
					1;
				};
				my $rc = $ran ? $? : -1;
				print STDERR $err;
				my ($port) = $out =~ /(\d+)/;
				printf $log "%s %s %.3f %s\n", $txn, ($rc == 0 ? 'ok' : 'fail'), time, $port // '-';
				usleep(50_000) if $rc != 0;
			}
			POSIX::_exit(0);
		}
		push @clients, $pid;
	}
}

sub stop_clients
{
	open my $fh, '>', "$dir/stop" or die;
	close $fh;
	for my $pid (@clients)
	{
		kill 'KILL', $pid unless wait_exit($pid, 120);
	}
	@clients = ();
}

# Every logged transaction: txn => [status, time, port]
sub client_log
{
	my %txns;
	for my $file (glob "$dir/client-*.log")
	{
		open my $fh, '<', $file or die;
		while (<$fh>)
		{
			my ($txn, $status, $t, $port) = split;
			$txns{$txn} = [ $status, $t, $port ];
		}
	}
	return \%txns;
}

# The first commit after a time (through a coordinator port, if given): its time, or undef.
sub first_commit_after
{
	my ($since, $port) = @_;
	my ($first) = sort { $a <=> $b } map { $_->[1] }
	  grep { $_->[0] eq 'ok' && $_->[1] > $since && (!defined $port || $_->[2] eq $port) } values %{ client_log() };
	return $first;
}

sub commits_since
{
	my ($since) = @_;
	return scalar grep { $_->[0] eq 'ok' && $_->[1] > $since } values %{ client_log() };
}

# wait until the clients have committed this many transactions after a time (bounded)
sub wait_for_commits
{
	my ($since, $count) = @_;
	return poll_until(120, sub { commits_since($since) >= $count });
}

# A session stopped at a fault point: it writes the three rows of txn
# through the given coordinator node (a child running psql; its pid).
sub stuck_session
{
	my ($name, $fault, $txn) = @_;
	my $pid = fork();
	die "fork: $!" unless defined $pid;
	if ($pid == 0)
	{
		open STDOUT, '>', '/dev/null';
		open STDERR, '>>', "$dir/stuck-$txn.err";
		exec('psql', '-X', '-At', '-h', '127.0.0.1', '-p', $af{$name}{port}, '-d', 'postgres', '-c',
			"SET ringshard.fault_injection = '$fault'; INSERT INTO ledger (k, txn, part) VALUES "
			  . "('$txn-a', '$txn', 1), ('$txn-b', '$txn', 2), ('$txn-c', '$txn', 3)")
		  or POSIX::_exit(1);
	}
	return $pid;
}

# Whether a line matching the pattern is in a node's server log (bounded wait).
sub wait_for_server_log
{
	my ($name, $re, $timeout) = @_;
	return poll_until($timeout, sub {
		for my $file (glob "$af{$name}{pgdata}/log/*")
		{
			open my $fh, '<', $file or next;
			while (<$fh>) { return 1 if $_ =~ $re }
		}
		return 0;
	});
}

# The node of a formation that takes writes now (undef if none).
sub current_primary
{
	my ($formation) = @_;
	for my $name (sort grep { $af{$_}{formation} eq $formation } keys %af)
	{
		my ($rc, $out) = af_psql($name, 'SHOW transaction_read_only');
		return $name if $rc == 0 && $out eq 'off';
	}
	return undef;
}

# Prepared transactions on the workers' primaries: "w1+w2+w3".
sub prepared_on_workers
{
	return join('+',
		(map { my $p = current_primary($_); defined $p ? af_safe_psql($p, 'SELECT count(*) FROM pg_prepared_xacts') : '?' } qw(w1 w2)),
		$w3->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts'));
}

my %measured;	# what the test prints at the end
my %pause;	# phase => [ its start, its end (the old primary a standby again) ]
start_clients();
ok(wait_for_commits(0, 20), 'the clients commit through the coordinator');

# ---------------------------------------------------------------------------
# 1. pg_autoctl perform failover on the coordinator's formation.
my $old = 'coord_a';
my $started_at = time;
# (pg_autoctl waits until the formation is stable again: in the background)
my $failover = autoctl_start('monitor', 180, 'perform', 'failover', '--pgdata', $af{monitor}{pgdata},
	'--formation', 'coord', '--wait', '120');
my $new = wait_writable_other('coord', $old, 120);
my $promoted_at = time;
my $rc = autoctl_finish($failover);
is($new, 'coord_b', "perform failover on coord: coord_b takes writes (pg_autoctl's exit status $rc)");
ok(wait_for_commits($started_at, 20), 'the clients commit through the new primary');
my $first = first_commit_after($started_at, $af{coord_b}{port});
$measured{'coordinator, pg_autoctl perform failover'} = defined $first ? $first - $started_at : undef;
$measured{'coordinator, pg_autoctl perform failover: until the promoted node took writes'} = $promoted_at - $started_at;
is(wait_stable('coord'), 'coord_b', 'coord_a rejoins as the standby');
$pause{'1. coordinator, pg_autoctl perform failover'} = [ $started_at, time ];
ok(poll_until(60, sub { af_safe_psql('coord_b', q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'ringshard watchdog'}) == 1 }),
	'the watchdog runs on the promoted coordinator');

# ---------------------------------------------------------------------------
# 2. The coordinator's primary SIGKILLed, two transactions in doubt.
$old = 'coord_b';
my @stuck;
if ($fault_injection eq 't')
{
	@stuck = (stuck_session($old, 'after_prepare=sleep:60000', 'undecided'),
		stuck_session($old, 'after_local_commit=sleep:60000', 'decided'));
	ok(wait_for_server_log($old, qr/fault injection: sleeping 60000 ms at after_prepare/, 60)
		  && wait_for_server_log($old, qr/fault injection: sleeping 60000 ms at after_local_commit/, 60),
		'one transaction waits after PREPARE on its workers, one after its commit decision');
	cmp_ok(prepared_on_workers(), 'ne', '0+0+0', 'their parts are prepared on the workers');
}
$started_at = time;
kill_node($old);
$new = wait_writable_other('coord', $old, 180);
$promoted_at = time;
for my $pid (@stuck) { kill 'KILL', $pid unless wait_exit($pid, 120) }
is($new, 'coord_a', 'the monitor promotes coord_a after coord_b is killed');
ok(wait_for_commits($started_at, 20), 'the clients commit through the promoted coordinator');
$first = first_commit_after($started_at, $af{coord_a}{port});
$measured{'coordinator, SIGKILL of keeper and postgres'} = defined $first ? $first - $started_at : undef;
$measured{'coordinator, SIGKILL: until the promoted node took writes'} = $promoted_at - $started_at;
ok(poll_until(60, sub { af_safe_psql('coord_a', q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'ringshard watchdog'}) == 1 }),
	'the watchdog runs on the promoted coordinator');
ok(poll_until(120, sub { af_safe_psql('coord_a', q{SELECT count(*) FROM ringshard.transaction_records}) == 0 }),
	'the promoted coordinator resolves what the killed one left in doubt');
start_keeper($old);
is(wait_stable('coord'), 'coord_a', 'coord_b rejoins as the standby');
$pause{'2. coordinator, SIGKILL'} = [ $started_at, time ];

# ---------------------------------------------------------------------------
# 3. w1's primary SIGKILLed, a transaction prepared on it.
$old = 'w1_a';
my $w1_txn;
my $stuck;
if ($fault_injection eq 't')
{
	$w1_txn = af_safe_psql('coord_a',
		q{SELECT t FROM (SELECT 'w1-prepared-' || g AS t FROM generate_series(1, 100) g) s
		   WHERE 'w1' = ANY (replicas_for(t || '-a')) ORDER BY t LIMIT 1});
	$stuck = stuck_session('coord_a', 'after_prepare=sleep:3000', $w1_txn);
	ok(wait_for_server_log('coord_a', qr/fault injection: sleeping 3000 ms at after_prepare/, 60),
		'a transaction waits after PREPARE');
	ok(poll_until(30, sub { af_safe_psql($old, 'SELECT count(*) FROM pg_prepared_xacts') > 0 }),
		'its part on w1 is prepared');
}
$started_at = time;
kill_node($old);
$new = wait_writable_other('w1', $old, 180);
$promoted_at = time;
kill 'KILL', $stuck if $stuck && !wait_exit($stuck, 120);
is($new, 'w1_b', 'the monitor promotes w1_b after w1_a is killed');
ok(poll_until(120, sub { af_safe_psql('coord_a', q{SELECT is_up FROM ringshard.nodes WHERE node_name = 'w1'}) eq 't' }),
	"w1 is marked up: the coordinator reaches the promoted node by the same address");
my $w1_up_at = time;
if ($fault_injection eq 't')
{
	ok(poll_until(120, sub { af_safe_psql('w1_b', 'SELECT count(*) FROM pg_prepared_xacts') == 0 }),
		"the part prepared on w1 is resolved on its new primary");
}
ok(wait_for_commits($w1_up_at, 20), 'the clients go on committing');
$first = first_commit_after($started_at);
$measured{'w1, SIGKILL: first commit of any client'} = defined $first ? $first - $started_at : undef;
$measured{'w1, SIGKILL: until the promoted node took writes'} = $promoted_at - $started_at;
$measured{'w1, SIGKILL: until the coordinator marked w1 up'} = $w1_up_at - $started_at;
start_keeper($old);
is(wait_stable('w1'), 'w1_b', 'w1_a rejoins as the standby');
$pause{'3. w1, SIGKILL'} = [ $started_at, time ];

# ---------------------------------------------------------------------------
# 4. pg_autoctl perform failover on w2's formation.
$old = 'w2_a';
$started_at = time;
$failover = autoctl_start('monitor', 180, 'perform', 'failover', '--pgdata', $af{monitor}{pgdata}, '--formation', 'w2',
	'--wait', '120');
$new = wait_writable_other('w2', $old, 120);
$promoted_at = time;
is($new, 'w2_b', 'perform failover on w2: w2_b takes writes');
ok(poll_until(120, sub { af_safe_psql('coord_a', q{SELECT is_up FROM ringshard.nodes WHERE node_name = 'w2'}) eq 't' }),
	'w2 is marked up');
my $w2_up_at = time;
$rc = autoctl_finish($failover);
is($rc, 0, 'pg_autoctl perform failover on w2 succeeds');
ok(wait_for_commits($w2_up_at, 20), 'the clients go on committing');
$first = first_commit_after($started_at);
$measured{'w2, pg_autoctl perform failover: first commit of any client'} = defined $first ? $first - $started_at : undef;
$measured{'w2, pg_autoctl perform failover: until the coordinator marked w2 up'} = $w2_up_at - $started_at;
$measured{'w2, pg_autoctl perform failover: until the promoted node took writes'} = $promoted_at - $started_at;
is(wait_stable('w2'), 'w2_b', 'w2_a rejoins as the standby');
$pause{'4. w2, pg_autoctl perform failover'} = [ $started_at, time ];
stop_clients();

# ---------------------------------------------------------------------------
# What the clients saw against what the workers hold.
my %primary = (w1 => 'w1_b', w2 => 'w2_b');
ok(poll_until(180, sub {
		af_safe_psql('coord_a', q{SELECT (SELECT count(*) FROM ringshard.write_queue) = 0
			AND (SELECT count(*) FROM ringshard.transaction_records) = 0
			AND (SELECT bool_and(is_up) FROM ringshard.nodes)}) eq 't'
		  && prepared_on_workers() eq '0+0+0';
	}),
	'the watchdog settles: every queue delivered, every node up, nothing prepared or recorded')
  or diag(af_safe_psql('coord_a', q{SELECT (SELECT count(*) FROM ringshard.write_queue) || ' queued, '
		|| (SELECT count(*) FROM ringshard.transaction_records) || ' records, down: '
		|| coalesce((SELECT string_agg(node_name, ',') FROM ringshard.nodes WHERE NOT is_up), '-')})
	  . '; prepared on w1+w2+w3: ' . prepared_on_workers());
is(af_safe_psql('coord_a', 'SELECT count(*) FROM pg_prepared_xacts'), '0', 'nothing is prepared on the coordinator');
is(af_safe_psql('coord_a', q{SELECT string_agg(node || ' ' || reachable || ' ' || coalesce(role, '-') || ' '
		|| coalesce(host, '-'), ', ' ORDER BY node) FROM ringshard.node_health()}),
	sprintf('w1 true primary 127.0.0.1:%d, w2 true primary 127.0.0.1:%d, w3 true primary %s:%d',
		$af{w1_b}{port}, $af{w2_b}{port}, $w3->host, $w3->port),
	"node_health(): every node reachable, w1 and w2 through their promoted hosts");

my %held;		# node => key => copies
my $ledger = q{SELECT k, count(*) FROM ledger GROUP BY k};
my %rows = (w1 => af_safe_psql($primary{w1}, $ledger), w2 => af_safe_psql($primary{w2}, $ledger),
	w3 => $w3->safe_psql('postgres', $ledger));
for my $name (sort keys %rows)
{
	for my $row (split /\n/, $rows{$name})
	{
		my ($k, $n) = split /\|/, $row;
		$held{$name}{$k} = $n;
	}
}
for my $g (qw(w1 w2))
{
	my $sum = q{SELECT count(*) || ' ' || md5(string_agg(k || ':' || txn || ':' || coalesce(note, ''), ',' ORDER BY k)) FROM ledger};
	my $want = af_safe_psql($primary{$g}, $sum);
	(my $standby = $primary{$g}) =~ tr/ab/ba/;
	ok(poll_until(60, sub { af_safe_psql($standby, $sum) eq $want }), "$g: the standby $standby has its primary's rows");
}
my $log = client_log();
if ($fault_injection eq 't')
{
	$log->{undecided} = [ 'fail', 0 ];
	$log->{decided} = [ 'unknown', 0 ];
	$log->{$w1_txn} = [ 'unknown', 0 ];
}
# every transaction logged or found on a worker
my %txns = map { $_ => 1 } keys %$log;
for my $name (keys %held)
{
	for my $k (keys %{ $held{$name} })
	{
		next if $k =~ /^seed-/;
		(my $t = $k) =~ s/-[abc]$//;
		$txns{$t} = 1;
	}
}
my @keys = map { my $t = $_; map { "$t-$_" } qw(a b c) } sort keys %txns;
my %replicas;
for my $row (split /\n/, af_safe_psql('coord_a',
	'SELECT k, array_to_string(replicas_for(k), \',\') FROM unnest(ARRAY[' . join(',', map { "'$_'" } @keys) . ']::text[]) k'))
{
	my ($k, $r) = split /\|/, $row;
	$replicas{$k} = [ split /,/, $r ];
}
my ($acked, $complete, $lost, $partial, $duplicated, $misplaced) = (0, 0, 0, 0, 0, 0);
my @lost;
for my $t (sort keys %txns)
{
	my ($present, $expected) = (0, 0);
	for my $k (map { "$t-$_" } qw(a b c))
	{
		for my $name (keys %held)
		{
			my $copies = $held{$name}{$k} // 0;
			my $is_replica = grep { $_ eq $name } @{ $replicas{$k} };
			$duplicated++ if $copies > 1;
			$misplaced++ if $copies && !$is_replica;
			$expected++ if $is_replica;
			$present++ if $copies && $is_replica;
		}
	}
	my $status = $log->{$t} ? $log->{$t}[0] : 'unknown';
	$acked++ if $status eq 'ok';
	$complete++ if $present == $expected;
	if ($status eq 'ok' && $present < $expected)
	{
		$lost++;
		push @lost, "$t ($present of $expected copies)";
	}
	$partial++ if $present > 0 && $present < $expected;
}
note("transactions: $acked acknowledged, $complete complete, of " . scalar(keys %txns));
cmp_ok($acked, '>', 100, 'the clients had transactions acknowledged through every failover');
is($lost, 0, 'every acknowledged transaction is on every replica of its rows') or diag("lost: @lost[0 .. ($#lost < 9 ? $#lost : 9)]");
is($partial, 0, 'no transaction is partial');
is($duplicated, 0, 'no row is duplicated');
is($misplaced, 0, 'no row is on a node that is not its replica');
if ($fault_injection eq 't')
{
	is(scalar(grep { $held{$_}{'undecided-a'} } keys %held), 0, 'the transaction without a decision is rolled back');
	is(scalar(grep { $held{$_}{'decided-a'} } keys %held), 2, 'the decided one is committed on its replicas');
	is(scalar(grep { $held{$_}{"$w1_txn-a"} } keys %held), 2, 'the one prepared on w1 is committed on its replicas');
}
is(af_safe_psql('coord_a', q{SELECT count(*) FROM ringshard.verify_table('ledger')}), '0',
	'verify_table finds every replica equal');

# The longest time without a commit of any client in a phase: from its
# start to the first commit, or between two commits.
for my $phase (sort keys %pause)
{
	my ($from, $to) = @{ $pause{$phase} };
	my @t = sort { $a <=> $b } map { $_->[1] } grep { $_->[0] eq 'ok' && $_->[1] > $from && $_->[1] <= $to } values %$log;
	my ($longest, $prev) = (0, $from);
	for my $t (@t)
	{
		$longest = $t - $prev if $t - $prev > $longest;
		$prev = $t;
	}
	note(sprintf('%s: %d commits in %.0f s, the longest time without one %.1f s',
			$phase, scalar(@t), $to - $from, @t ? $longest : $to - $from));
}
note(sprintf('the test took %.0f s', time - $^T));
for my $what (sort keys %measured)
{
	note(sprintf('%s: %s', $what, defined $measured{$what} ? sprintf('%.1f s', $measured{$what}) : 'no commit'));
}
$w3->stop;
done_testing();

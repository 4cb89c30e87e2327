# No borrowed credentials: a node address that a role below superuser chose
# gets none of the coordinator's server account's own credentials, whoever
# connects there: a superuser's session, watchdog_tick(), recovery, or the
# watchdog itself.  The coordinator's server runs with credentials in its
# environment, as libpq reads them by default: a password file (PGPASSFILE),
# a password (PGPASSWORD), a service file with a password (PGSERVICEFILE,
# PGSERVICE), and a client certificate and key (PGSSLCERT, PGSSLKEY).  An
# administrator (ringshard_admin, not a superuser) adds a node whose address
# is a credential recorder (test/perl/RingshardFakeNode.pm): it asks every
# client for a password in clear text, asks for a client certificate in the
# TLS handshake, and writes down what it was offered.
#
# Checked: the recorder never sees one of those credentials, but does see
# connections (so that the test can fail) and the password of a user
# mapping when there is one; the administrator cannot forge the server
# option that would allow them (ambient_credentials); an address a
# superuser gives gets that option, and the administrator cannot then move
# the address while keeping it.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);
use RingshardFakeNode;

my $tmp = PostgreSQL::Test::Utils::tempdir;

# The recorder, and a client certificate it can recognize.
my $recorder = RingshardFakeNode->start_recorder(dir => $tmp, log => "$tmp/recorder.log", lifetime => 900);
my ($client_key, $client_cert) = RingshardFakeNode::make_certificate($tmp, 'ambient-client', '/CN=ambient-client-certificate');
my $evil = sprintf('host=127.0.0.1 port=%d dbname=postgres', $recorder->port);

# The recorder works: it sees what a client offers, a certificate included.
{
	local $ENV{PGPASSWORD} = 'probe-pw';
	local $ENV{PGCONNECT_TIMEOUT} = '10';
	system('psql', '-X', '-w', '-c', 'SELECT 1',
		"$evil user=probe sslmode=require sslcert=$client_cert sslkey=$client_key");
	system('psql', '-X', '-w', '-c', 'SELECT 1', "$evil user=plain sslmode=disable");
}
$recorder->wait_for_lines(2, 10);
my @probe = $recorder->recorded;
ok((grep { $_->{user} eq 'probe' && $_->{password} eq 'probe-pw' && $_->{cert} =~ /ambient-client-certificate/ && $_->{tls} } @probe),
	'the recorder sees a password and a client certificate when a client offers them (TLS)');
ok((grep { $_->{user} eq 'plain' && !$_->{tls} } @probe), 'and a client without TLS');

# The server account's credentials, in the coordinator server's environment.
my %ambient = (
	'ambient-secret' => 'a password file (PGPASSFILE)',
	'ambient-pgpassword' => 'PGPASSWORD',
	'ambient-service-secret' => 'a service file (PGSERVICEFILE, PGSERVICE)',
);
open(my $pgpass, '>', "$tmp/pgpass") or die;
print $pgpass "*:*:*:*:ambient-secret\n";
close($pgpass);
chmod(0600, "$tmp/pgpass");
open(my $service, '>', "$tmp/pg_service.conf") or die;
print $service "[ambient]\npassword=ambient-service-secret\n";
close($service);
my %server_env = (
	PGPASSFILE => "$tmp/pgpass",
	PGPASSWORD => 'ambient-pgpassword',
	PGSERVICEFILE => "$tmp/pg_service.conf",
	PGSERVICE => 'ambient',
	PGSSLCERT => $client_cert,
	PGSSLKEY => $client_key,
);

my $coordinator = PostgreSQL::Test::Cluster->new('coordinator');
my $worker = PostgreSQL::Test::Cluster->new('good');
$coordinator->init;
$coordinator->append_conf('postgresql.conf', q{
max_prepared_transactions = 20
shared_preload_libraries = 'ringshard'
ringshard.watchdog_database = 'postgres'
ringshard.watchdog_interval = '200ms'
ringshard.node_timeout = '3s'
});
$worker->init;
$worker->append_conf('postgresql.conf', "max_prepared_transactions = 20\nshared_preload_libraries = 'ringshard'");
$worker->start;
$worker->safe_psql('postgres', 'CREATE EXTENSION ringshard');

# The server's backends and its watchdog inherit the environment it starts
# with (and only the server: the test's own clients do not get it).
sub start_with_ambient
{
	my (@without) = @_;
	my %env = %server_env;
	delete @env{@without};
	local @ENV{ keys %env } = values %env;
	$coordinator->start;
}
start_with_ambient();
$coordinator->safe_psql('postgres', q{
	SET password_encryption = 'scram-sha-256';
	CREATE EXTENSION ringshard;
	CREATE ROLE radmin LOGIN PASSWORD 'radmin-pw' IN ROLE ringshard_admin;
});
my $superuser = $coordinator->safe_psql('postgres', 'SELECT current_user');

sub as_radmin
{
	my ($sql) = @_;
	return $coordinator->psql('postgres', $sql, extra_params => [ '-U', 'radmin' ]);
}

# A good node, added by the superuser; the recorder, added by radmin.
$coordinator->safe_psql('postgres', sprintf(q{
	SELECT ringshard.add_node('good', 'host=%s port=%d dbname=postgres');
	SELECT count(*) FROM ringshard.sync_topology();
}, $worker->host, $worker->port));
my ($rc, $out, $err) = as_radmin(qq{
	SELECT ringshard.create_ring('scratch');
	SELECT ringshard.add_node('evil', '$evil', 'scratch');
});
is($rc, 0, 'radmin adds a node whose address is the recorder') or diag($err);
is($coordinator->safe_psql('postgres',
	q{SELECT count(*) FROM pg_foreign_server, unnest(srvoptions) o WHERE srvname = 'evil' AND o LIKE 'ambient_credentials=%'}),
	'0', 'the address radmin gave does not allow the server account\'s credentials');

# Every kind of connection the server makes as a superuser or in the background.
my $recorded_before = scalar $recorder->recorded;
sub trigger_connections
{
	my ($label) = @_;
	my @lines;
	($rc, $out, $err) = $coordinator->psql('postgres', q{SELECT node || ' ' || reachable || ' ' || coalesce(last_error, '-') FROM ringshard.node_health() ORDER BY node});
	push @lines, "node_health: rc=$rc $out $err";
	($rc, $out, $err) = $coordinator->psql('postgres', q{SELECT node || ' ' || reachable FROM ringshard.watchdog_tick() ORDER BY node});
	push @lines, "watchdog_tick: rc=$rc $out $err";
	($rc, $out, $err) = $coordinator->psql('postgres', q{SELECT node || ' ' || coalesce(error, '-') FROM ringshard.recover_prepared_transactions() ORDER BY node});
	push @lines, "recover: rc=$rc $out $err";
	return @lines;
}

# After a change of a mapping or an address: a watchdog round that began
# before it may still connect as before; one second is five rounds.
sub settle
{
	sleep(1);
	$recorder->wait_for_lines(scalar($recorder->recorded), 1);
}

# Wait (at most 15 s), with no session running anything, for the watchdog
# to connect to the recorder; how many connections it made.
sub watchdog_connections
{
	my $before = scalar $recorder->recorded;
	for (1 .. 150)
	{
		last if scalar($recorder->recorded) >= $before + 2;
		sleep(0.1);
	}
	return scalar($recorder->recorded) - $before;
}

# Nothing the recorder saw is a credential of the server account.
sub nothing_borrowed
{
	my ($label, $from) = @_;
	my @seen = ($recorder->recorded)[ $from .. scalar($recorder->recorded) - 1 ];
	for my $secret (sort keys %ambient)
	{
		my @leaks = grep { $_->{password} eq $secret } @seen;
		is(scalar @leaks, 0, "$label: the recorder never received the password of $ambient{$secret}");
	}
	my @certs = grep { ($_->{cert} // 'none') ne 'none' } @seen;
	is(scalar @certs, 0, "$label: nor a client certificate") or diag(explain \@certs);
	return @seen;
}

#
# 1. No user mapping for the superuser: the recorder gets nothing, and the
#    other node is still probed.
#
my @outcome = trigger_connections('no mapping');
like($outcome[0], qr/^node_health: rc=0 /, 'no mapping: a superuser\'s node_health() still answers')
  or diag($outcome[0]);
like($outcome[0], qr/good true/, 'no mapping: the good node is reachable in it') or diag($outcome[0]);
like($outcome[0], qr/evil false .*user mapping/, 'no mapping: the recorder is not, for want of a user mapping')
  or diag($outcome[0]);
like($outcome[1], qr/^watchdog_tick: rc=0 .*good true/s, 'no mapping: watchdog_tick() still serves the good node')
  or diag($outcome[1]);
watchdog_connections();
nothing_borrowed('no mapping', $recorded_before);

#
# 2. A mapping without a password, that a superuser allows
#    (password_required 'false'): still none of the server account's own.
#
$coordinator->safe_psql('postgres', qq{CREATE USER MAPPING FOR "$superuser" SERVER evil OPTIONS (password_required 'false')});
settle();
my $from = scalar $recorder->recorded;
@outcome = trigger_connections('no password');
my $by_watchdog = watchdog_connections();
cmp_ok($by_watchdog, '>', 0, "no password: the watchdog connected to the recorder on its own ($by_watchdog times)");
my @seen = nothing_borrowed('no password', $from);
cmp_ok(scalar @seen, '>=', 3, 'no password: the recorder saw the connections (' . scalar(@seen) . ')')
  or diag(join("\n", @outcome));
is(join(',', sort { $a cmp $b } keys %{ { map { $_->{password} => 1 } @seen } }), 'none',
	'no password: no password was offered at all');
is(join(',', sort { $a cmp $b } keys %{ { map { $_->{user} => 1 } @seen } }), $superuser,
	'no password: the connections were the superuser\'s');

# The same without the service file, which libpq reads before PGPASSWORD.
$coordinator->stop;
start_with_ambient(qw(PGSERVICE PGSERVICEFILE));
$from = scalar $recorder->recorded;
@outcome = trigger_connections('no password, no service');
$by_watchdog = watchdog_connections();
cmp_ok($by_watchdog, '>', 0, "no password, no service: the watchdog connected on its own ($by_watchdog times)");
@seen = nothing_borrowed('no password, no service', $from);
cmp_ok(scalar @seen, '>=', 3, 'no password, no service: the recorder saw the connections (' . scalar(@seen) . ')')
  or diag(join("\n", @outcome));
is(join(',', sort { $a cmp $b } keys %{ { map { $_->{password} => 1 } @seen } }), 'none',
	'no password, no service: no password was offered at all');

#
# 3. (a) A mapping with a password: the recorder receives that password,
#    and still no certificate.
#
$coordinator->safe_psql('postgres', qq{
	ALTER USER MAPPING FOR "$superuser" SERVER evil OPTIONS (DROP password_required, ADD password 'mapped-pw')});
settle();
$from = scalar $recorder->recorded;
@outcome = trigger_connections('mapped password');
$by_watchdog = watchdog_connections();
cmp_ok($by_watchdog, '>', 0, "mapped password: the watchdog connected on its own ($by_watchdog times)");
@seen = nothing_borrowed('mapped password', $from);
cmp_ok(scalar @seen, '>=', 3, 'mapped password: the recorder saw the connections (' . scalar(@seen) . ')')
  or diag(join("\n", @outcome));
is(join(',', sort { $a cmp $b } keys %{ { map { $_->{password} => 1 } @seen } }), 'mapped-pw',
	'mapped password: every connection offered the mapping\'s password, and only it');

# radmin's own connections offer radmin's mapping, nothing of the server account's
($rc, $out, $err) = as_radmin(q{CREATE USER MAPPING FOR radmin SERVER evil OPTIONS (user 'radmin', password 'radmin-own-pw')});
is($rc, 0, 'radmin maps itself to the recorder') or diag($err);
$from = scalar $recorder->recorded;
as_radmin(q{SELECT * FROM ringshard.node_health()});
as_radmin(q{SELECT * FROM ringshard.node_execute(ARRAY['evil'], 'SELECT 1', '{}', false)});
@seen = grep { $_->{user} eq 'radmin' } nothing_borrowed('radmin\'s own', $from);
ok(@seen > 0 && !(grep { $_->{password} ne 'radmin-own-pw' } @seen),
	'radmin\'s own: its connections offered its own mapping\'s password') or diag(explain \@seen);

#
# 4. (b) radmin cannot forge the option that allows the server account's
#    credentials.
#
($rc, $out, $err) = as_radmin(q{ALTER SERVER evil OPTIONS (ADD ambient_credentials 'true')});
like($err, qr/only a superuser may set or keep option "ambient_credentials"/,
	'radmin cannot add ambient_credentials to its node');
($rc, $out, $err) = as_radmin(qq{CREATE SERVER evil2 FOREIGN DATA WRAPPER ringshard OPTIONS (host '127.0.0.1', port '@{[ $recorder->port ]}', ambient_credentials 'true')});
like($err, qr/only a superuser may set or keep option "ambient_credentials"|permission denied/,
	'nor create a server with it');
($rc, $out, $err) = as_radmin(qq{ALTER SERVER evil OPTIONS (ADD sslcert '$client_cert')});
like($err, qr/only a superuser may set option "sslcert"/, 'nor name a certificate of the server account');
is($coordinator->safe_psql('postgres',
	q{SELECT count(*) FROM pg_foreign_server, unnest(srvoptions) o WHERE srvname = 'evil' AND o LIKE 'ambient_credentials=%'}),
	'0', 'the node still does not allow them');

#
# 5. (c) A superuser who sets the address: ambient_credentials 'true'
#    appears (documented: a superuser's own address may get the server
#    account's credentials); radmin cannot then move the address and keep it.
#
nothing_borrowed('until a superuser gave the address', $recorded_before);
$coordinator->safe_psql('postgres', qq{SELECT ringshard.set_node_address('evil', '$evil')});
settle();
is($coordinator->safe_psql('postgres',
	q{SELECT string_agg(o, ',') FROM pg_foreign_server, unnest(srvoptions) o WHERE srvname = 'evil' AND o LIKE 'ambient_credentials=%'}),
	'ambient_credentials=true', 'an address a superuser sets gets ambient_credentials \'true\'');
# the control: there, the server account's certificate is offered, so the checks above could fail
$from = scalar $recorder->recorded;
watchdog_connections();
ok((grep { $_->{cert} =~ /ambient-client-certificate/ } ($recorder->recorded)[ $from .. scalar($recorder->recorded) - 1 ]),
	'where a superuser gave the address, the watchdog offers the server account\'s certificate (the environment works)');
($rc, $out, $err) = as_radmin(q{ALTER SERVER evil OPTIONS (SET host '127.0.0.2')});
like($err, qr/only a superuser may set or keep option "ambient_credentials"/,
	'radmin cannot change the host of that address while keeping the option');
($rc, $out, $err) = as_radmin(sprintf(q{SELECT ringshard.set_node_address('evil', 'host=127.0.0.2 port=%d dbname=postgres')}, $recorder->port));
isnt($rc, 0, 'nor move it with set_node_address (other roles have mappings for it)');
is($coordinator->safe_psql('postgres',
	q{SELECT string_agg(o, ',' ORDER BY o) FROM pg_foreign_server, unnest(srvoptions) o WHERE srvname = 'evil' AND o LIKE 'host=%'}),
	'host=127.0.0.1', 'the address is unchanged');

# Once radmin gives the address again (dropping the option), it is not trusted again.
$coordinator->safe_psql('postgres', qq{DROP USER MAPPING FOR "$superuser" SERVER evil});
($rc, $out, $err) = as_radmin(qq{SELECT ringshard.set_node_address('evil', '$evil')});
is($rc, 0, 'radmin may give its own node an address again once only its own mapping is left') or diag($err);
is($coordinator->safe_psql('postgres',
	q{SELECT count(*) FROM pg_foreign_server, unnest(srvoptions) o WHERE srvname = 'evil' AND o LIKE 'ambient_credentials=%'}),
	'0', 'and the option is gone with it');
# and the superuser's connections there borrow nothing again
$coordinator->safe_psql('postgres', qq{CREATE USER MAPPING FOR "$superuser" SERVER evil OPTIONS (password_required 'false')});
settle();
$from = scalar $recorder->recorded;
trigger_connections('given again by radmin');
watchdog_connections();
@seen = nothing_borrowed('given again by radmin', $from);
cmp_ok(scalar @seen, '>', 0, 'given again by radmin: the recorder saw connections');

$recorder->stop;
$coordinator->stop;
$worker->stop;
done_testing();

# RingshardFakeNode: servers that stand where a ringshard node should be, for
# the TAP tests that check what the coordinator does when a node is not what
# it claims (test/t/015_hostile_node.pl, test/t/016_no_borrowed_credentials.pl).
#
# Three of them, each a forked process listening on 127.0.0.1 only, on a
# port of 20000-20999 found free by trying to bind it:
#
#  - RingshardFakeNode->start_recorder(...): a credential recorder.  It
#    answers like a PostgreSQL server that wants a password in clear text,
#    writes down everything a client offered (TLS or not, a client
#    certificate, user, database, password), then refuses the login.
#
#  - RingshardFakeNode->start_proxy(...): a hostile proxy.  It relays the
#    v3 protocol between the coordinator and a real worker, and answers the
#    queries that match a rule of its control file itself, in a chosen bad
#    way.  The test rewrites the control file between statements.
#
#  - RingshardFakeNode->start_silent(...): a silent host.  It accepts every
#    connection and never answers, until the client closes it: a server
#    whose machine froze after the TCP handshake
#    (test/t/023_silent_host.pl).
#
# Pure Perl (IO::Socket::INET, IO::Select, fork; IO::Socket::SSL for the
# recorder's TLS).  Every wait is bounded: sockets are read with select()
# timeouts, and every process ends by itself after `lifetime` seconds or
# when the process that started it is gone.
package RingshardFakeNode;

use strict;
use warnings;

use Errno qw(EINTR EAGAIN);
use IO::Select;
use IO::Socket::INET;
use IO::Socket::UNIX;
use POSIX ();
use Socket qw(SOCK_STREAM);
use Time::HiRes ();

# Protocol constants (src/include/libpq/pqcomm.h).
use constant {
	PROTOCOL_3 => 196608,
	SSL_REQUEST_CODE => 80877103,
	GSSENC_REQUEST_CODE => 80877104,
	CANCEL_REQUEST_CODE => 80877102,
	TEXT_OID => 25,
	INT8_OID => 20,
	PORT_LOW => 20000,
	PORT_HIGH => 20999,
};

#
# Ports and processes
#

# A listening socket on 127.0.0.1 and a free port of 20000-20999: each port
# is tried once, in random order (at most 1000 tries).
sub listen_on_free_port
{
	my @ports = (PORT_LOW .. PORT_HIGH);
	for (my $i = $#ports; $i > 0; $i--)
	{
		my $j = int(rand($i + 1));
		@ports[ $i, $j ] = @ports[ $j, $i ];
	}
	for my $port (@ports)
	{
		my $sock = IO::Socket::INET->new(
			LocalAddr => '127.0.0.1',
			LocalPort => $port,
			Proto => 'tcp',
			Listen => 64,
			ReuseAddr => 1);
		return ($sock, $port) if $sock;
	}
	die "no free port in " . PORT_LOW . "-" . PORT_HIGH . " on 127.0.0.1";
}

# Fork a server: the child runs $serve->($listener) and exits; the parent
# gets the pid.  The child ends its own children when it is told to stop.
sub fork_server
{
	my ($listener, $serve) = @_;
	my $pid = fork();
	die "fork: $!" unless defined $pid;
	if ($pid == 0)
	{
		# the test's END blocks and Test::More's must not run in here
		my %children;
		my $stopping = 0;
		$SIG{TERM} = sub { $stopping = 1; };
		$SIG{CHLD} = 'DEFAULT';
		eval { $serve->($listener, \%children, \$stopping); };
		kill 'TERM', keys %children;
		POSIX::_exit(0);
	}
	close($listener);
	return $pid;
}

# The accept loop of a server: one forked child per connection, for at most
# $lifetime seconds, until told to stop or until the test process is gone.
sub accept_loop
{
	my ($listener, $children, $stopping, $lifetime, $parent, $handle) = @_;
	my $select = IO::Select->new($listener);
	my $deadline = Time::HiRes::time() + $lifetime;
	while (!$$stopping && Time::HiRes::time() < $deadline && kill(0, $parent))
	{
		# reap finished children without waiting
		while ((my $done = waitpid(-1, POSIX::WNOHANG())) > 0)
		{
			delete $children->{$done};
		}
		next unless $select->can_read(0.2);
		my $client = $listener->accept or next;
		my $pid = fork();
		if (!defined $pid)
		{
			close($client);
			next;
		}
		if ($pid == 0)
		{
			close($listener);
			$SIG{TERM} = 'DEFAULT';
			eval { $handle->($client, $deadline, $parent); };
			POSIX::_exit(0);
		}
		$children->{$pid} = 1;
		close($client);
	}
}

# Stop a server: its process and the connections it serves.
sub stop
{
	my ($self) = @_;
	return unless $self->{pid};
	kill 'TERM', $self->{pid};
	# bounded: 5 s, then KILL
	for (1 .. 50)
	{
		last if waitpid($self->{pid}, POSIX::WNOHANG()) != 0;
		Time::HiRes::sleep(0.1);
	}
	if (kill(0, $self->{pid}))
	{
		kill 'KILL', $self->{pid};
		waitpid($self->{pid}, 0);
	}
	delete $self->{pid};
}

sub DESTROY
{
	my ($self) = @_;
	# only the process that started the server stops it
	$self->stop if $self->{pid} && $self->{owner} == $$;
}

sub port { return $_[0]->{port}; }

# Append one line to a log file shared by the server's processes: one
# write of the whole line with O_APPEND, so lines never interleave.
sub append_line
{
	my ($file, $line) = @_;
	$line =~ s/[\r\n]/ /g;
	if (open(my $fh, '>>', $file))
	{
		syswrite($fh, "$line\n");
		close($fh);
	}
}

#
# Reading and writing protocol messages, with time limits
#

# Read exactly $n bytes from a socket before the deadline; undef at end of
# stream or when the time is up.
sub read_exact
{
	my ($sock, $n, $deadline) = @_;
	my $buf = '';
	my $select = IO::Select->new($sock);
	while (length($buf) < $n)
	{
		my $left = $deadline - Time::HiRes::time();
		return undef if $left <= 0;
		# an SSL socket may hold decrypted bytes that select() does not see
		my $pending = $sock->can('pending') ? $sock->pending : 0;
		next unless $pending || $select->can_read($left < 0.5 ? $left : 0.5);
		my $got = sysread($sock, my $chunk, $n - length($buf));
		if (!defined $got)
		{
			next if $! == EINTR || $! == EAGAIN;
			return undef;
		}
		return undef if $got == 0;
		$buf .= $chunk;
	}
	return $buf;
}

# An untyped packet (the first one of a connection): length, then body.
sub read_startup_packet
{
	my ($sock, $deadline) = @_;
	my $head = read_exact($sock, 4, $deadline);
	return undef unless defined $head;
	my $len = unpack('N', $head);
	return undef if $len < 8 || $len > 10000;
	my $body = read_exact($sock, $len - 4, $deadline);
	return defined $body ? $head . $body : undef;
}

# A typed message: (type, body), or () at end of stream.
sub read_message
{
	my ($sock, $deadline) = @_;
	my $head = read_exact($sock, 5, $deadline);
	return () unless defined $head;
	my ($type, $len) = unpack('a N', $head);
	return () if $len < 4 || $len > 64 * 1024 * 1024;
	my $body = $len > 4 ? read_exact($sock, $len - 4, $deadline) : '';
	return () unless defined $body;
	return ($type, $body);
}

# One message in wire form.
sub message
{
	my ($type, $body) = @_;
	return $type . pack('N', length($body) + 4) . $body;
}

# Write everything before the deadline; false if the peer is gone.
sub write_all
{
	my ($sock, $data, $deadline) = @_;
	$deadline //= Time::HiRes::time() + 10;
	my $select = IO::Select->new($sock);
	while (length($data) > 0)
	{
		return 0 if Time::HiRes::time() > $deadline;
		next unless $select->can_write(0.5);
		my $n = syswrite($sock, $data);
		if (!defined $n)
		{
			next if $! == EINTR || $! == EAGAIN;
			return 0;
		}
		substr($data, 0, $n) = '';
	}
	return 1;
}

# The key=value pairs of a startup packet.
sub startup_parameters
{
	my ($packet) = @_;
	my @parts = split(/\0/, substr($packet, 8));
	my %params;
	while (@parts >= 2)
	{
		my ($k, $v) = splice(@parts, 0, 2);
		$params{$k} = $v;
	}
	return %params;
}

#
# Server messages the fake servers answer with
#

# AuthenticationCleartextPassword ('R', code 3): the client must send its
# password as it is, which is what the recorder wants to see.
sub authentication_cleartext { return message('R', pack('N', 3)); }

# ErrorResponse: severity, SQLSTATE and message fields.
sub error_response
{
	my ($sqlstate, $text) = @_;
	return message('E', "SFATAL\0VFATAL\0C$sqlstate\0M$text\0\0");
}

# RowDescription of columns (name, type OID, format code).
sub row_description
{
	my @columns = @_;
	my $body = pack('n', scalar @columns);
	for my $c (@columns)
	{
		my ($name, $type, $format) = @$c;
		my $typlen = $type == INT8_OID ? 8 : -1;
		$body .= "$name\0" . pack('N n N n N n', 0, 0, $type, $typlen & 0xffff, 0xffffffff, $format);
	}
	return message('T', $body);
}

# DataRow of values (undef is NULL).
sub data_row
{
	my @values = @_;
	my $body = pack('n', scalar @values);
	for my $v (@values)
	{
		$body .= defined $v ? pack('N', length($v)) . $v : pack('N', 0xffffffff);
	}
	return message('D', $body);
}

sub command_complete { return message('C', "$_[0]\0"); }
sub ready_for_query { return message('Z', $_[0] // 'I'); }
sub parse_complete { return message('1', ''); }
sub bind_complete { return message('2', ''); }

# CopyOutResponse: text format, one column.
sub copy_out_response { return message('H', pack('C n n', 0, 1, 0)); }
sub copy_data { return message('d', $_[0]); }

# A DataRow whose 4-byte values (int4 in binary) lose their last byte: the
# lengths still add up, so the message parses, but an int4 of 3 bytes is
# not an int4.
sub shorten_binary_values
{
	my ($body) = @_;
	my $n = unpack('n', $body);
	my $pos = 2;
	my $out = pack('n', $n);
	for (1 .. $n)
	{
		my $len = unpack('N', substr($body, $pos, 4));
		$pos += 4;
		if ($len == 0xffffffff)
		{
			$out .= pack('N', $len);
			next;
		}
		my $value = substr($body, $pos, $len);
		$pos += $len;
		$value = substr($value, 0, 3) if $len == 4;
		$out .= pack('N', length($value)) . $value;
	}
	return $out;
}

#
# The credential recorder
#

# start_recorder(dir => $dir, log => $file, lifetime => $seconds): a server
# that records what each client offers.  $dir receives a self-signed key and
# certificate (made with openssl); the TLS handshake asks for a client
# certificate (verify mode peer, any certificate accepted).  One line per
# connection goes to $file:
#   request=startup|cancel|none  tls=0|1  cert=<subject>|none  user=<u>
#   database=<d>  password=<p>|none
sub start_recorder
{
	my ($class, %args) = @_;
	my $dir = $args{dir} or die "start_recorder: dir";
	my $log = $args{log} or die "start_recorder: log";
	my $lifetime = $args{lifetime} // 600;
	my ($key, $cert) = make_certificate($dir, 'recorder', '/CN=ringshard-credential-recorder');
	require IO::Socket::SSL;
	my ($listener, $port) = listen_on_free_port();
	my $parent = $$;
	my $pid = fork_server(
		$listener,
		sub {
			my ($l, $children, $stopping) = @_;
			accept_loop($l, $children, $stopping, $lifetime, $parent,
				sub { record_one_client($_[0], $key, $cert, $log); });
		});
	return bless { pid => $pid, port => $port, log => $log, owner => $$ }, $class;
}

# A key and self-signed certificate made with the openssl command; returns
# (key file, certificate file).
sub make_certificate
{
	my ($dir, $name, $subject) = @_;
	my $key = "$dir/$name.key";
	my $cert = "$dir/$name.crt";
	# openssl prints its progress on stderr: not into the test's output
	open(my $saved, '>&', \*STDERR) or die "dup stderr: $!";
	open(STDERR, '>', "$dir/$name.openssl.log") or die "openssl log: $!";
	my $rc = system('openssl', 'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2',
		'-subj', $subject, '-keyout', $key, '-out', $cert);
	open(STDERR, '>&', $saved) or die "restore stderr: $!";
	$rc == 0 or die "openssl req failed for $name (see $dir/$name.openssl.log)";
	chmod(0600, $key);
	return ($key, $cert);
}

# One connection: TLS if asked, startup, a cleartext password request, then
# a refusal (28P01).  At most 15 s per connection.
sub record_one_client
{
	my ($sock, $key, $cert, $log) = @_;
	my $deadline = Time::HiRes::time() + 15;
	my %seen = (request => 'none', tls => 0, cert => 'none', user => '', database => '', password => 'none');
	my $packet;
	for (1 .. 3)    # SSLRequest and GSSENCRequest may come first, once each
	{
		$packet = read_startup_packet($sock, $deadline);
		last unless defined $packet;
		my $code = unpack('N', substr($packet, 4, 4));
		if ($code == SSL_REQUEST_CODE)
		{
			write_all($sock, 'S', $deadline) or return;
			my $ssl = IO::Socket::SSL->start_SSL(
				$sock,
				SSL_server => 1,
				SSL_cert_file => $cert,
				SSL_key_file => $key,
				# ask for a client certificate, take any: the point is to see one
				SSL_verify_mode => IO::Socket::SSL::SSL_VERIFY_PEER(),
				SSL_verify_callback => sub { return 1; },
				SSL_ca_file => $cert,
				Timeout => 10);
			if (!$ssl)
			{
				$seen{tls} = 'handshake-failed';
				append_line($log, join("\t", map { "$_=$seen{$_}" } qw(request tls cert user database password))
					  . "\terror=" . IO::Socket::SSL::errstr());
				return;
			}
			$sock = $ssl;
			$seen{tls} = 1;
			my $subject = $sock->peer_certificate('subject');
			$seen{cert} = $subject if defined $subject && $subject ne '';
			next;
		}
		if ($code == GSSENC_REQUEST_CODE)
		{
			write_all($sock, 'N', $deadline) or return;
			next;
		}
		last;
	}
	my $code = defined $packet ? unpack('N', substr($packet, 4, 4)) : -1;
	$seen{request} = $code == PROTOCOL_3 ? 'startup' : $code == CANCEL_REQUEST_CODE ? 'cancel' : $code == -1 ? 'none' : "code $code";
	if ($code == PROTOCOL_3)
	{
		my %params = startup_parameters($packet);
		$seen{user} = $params{user} // '';
		$seen{database} = $params{database} // '';
		if (write_all($sock, authentication_cleartext(), $deadline))
		{
			my ($type, $body) = read_message($sock, $deadline);
			if (defined $type && $type eq 'p')
			{
				($seen{password} = $body) =~ s/\0.*//s;
			}
			write_all($sock, error_response('28P01', "password authentication failed for user \"$seen{user}\""),
				$deadline);
		}
	}
	append_line($log, join("\t", map { "$_=$seen{$_}" } qw(request tls cert user database password)));
	close($sock);
}

# Wait (at most $seconds) until the recorder has written $n lines; how many it has.
sub wait_for_lines
{
	my ($self, $n, $seconds) = @_;
	my $deadline = Time::HiRes::time() + ($seconds // 5);
	my $have;
	while (($have = scalar($self->recorded)) < $n && Time::HiRes::time() < $deadline)
	{
		Time::HiRes::sleep(0.05);
	}
	return $have;
}

# The recorder's lines so far, each as a hash.
sub recorded
{
	my ($self) = @_;
	my @lines;
	open(my $fh, '<', $self->{log}) or return ();
	while (my $line = <$fh>)
	{
		chomp $line;
		my %f = map { split(/=/, $_, 2) } grep { /=/ } split(/\t/, $line);
		push @lines, \%f;
	}
	close($fh);
	return @lines;
}

#
# The hostile proxy
#

# start_proxy(upstream_host => $host, upstream_port => $port, control =>
# $file, log => $file, lifetime => $seconds): relays to the real server at
# $host (a socket directory when it starts with /, else a TCP host) and
# $port.  The control file holds rules, one a line: a Perl regex, a tab, an
# action.  Each query the client sends is matched against the rules as it
# arrives (the file is read again every time): a simple Query by its text,
# an extended-protocol batch (Parse ... Sync) with an Execute by the text of
# the statement it runs (also a named one prepared earlier).  A startup
# packet is matched as "STARTUP user=<u> database=<d>", a cancel request as
# "CANCEL REQUEST".  The first matching rule's action applies (see
# local_answer and the relay below); no match: relayed as it is.  Each match
# is logged as "hit<TAB>action<TAB>text", each query as "seen<TAB>text".
sub start_proxy
{
	my ($class, %args) = @_;
	my %config = (
		upstream_host => $args{upstream_host},
		upstream_port => $args{upstream_port},
		control => $args{control},
		log => $args{log},
	);
	die "start_proxy: upstream_host, upstream_port, control and log" if grep { !defined } values %config;
	my $lifetime = $args{lifetime} // 900;
	set_rules($config{control}, []);
	my ($listener, $port) = listen_on_free_port();
	my $parent = $$;
	my $pid = fork_server(
		$listener,
		sub {
			my ($l, $children, $stopping) = @_;
			accept_loop($l, $children, $stopping, $lifetime, $parent,
				sub { proxy_one_client($_[0], $_[1], $_[2], \%config); });
		});
	return bless { pid => $pid, port => $port, owner => $$, %config }, $class;
}

# A server that accepts connections and never answers (see black_hole).
sub start_silent
{
	my ($class, %args) = @_;
	my $lifetime = $args{lifetime} // 900;
	my ($listener, $port) = listen_on_free_port();
	my $parent = $$;
	my $pid = fork_server(
		$listener,
		sub {
			my ($l, $children, $stopping) = @_;
			accept_loop($l, $children, $stopping, $lifetime, $parent, sub { black_hole($_[0], $_[1]); });
		});
	return bless { pid => $pid, port => $port, owner => $$ }, $class;
}

# Write the rules [[regex, action], ...] atomically (a connection reading the
# file sees the old rules or the new ones, never half of them).
sub set_rules
{
	my ($file, $rules) = @_;
	open(my $fh, '>', "$file.tmp") or die "cannot write $file.tmp: $!";
	print $fh "$_->[0]\t$_->[1]\n" for @$rules;
	close($fh);
	rename("$file.tmp", $file) or die "cannot rename to $file: $!";
}

# The proxy's own: replace its rules (none: a plain relay).
sub rules
{
	my ($self, @rules) = @_;
	set_rules($self->{control}, \@rules);
}

# How many times a rule with this action matched so far.
sub hits
{
	my ($self, $action) = @_;
	my $n = 0;
	open(my $fh, '<', $self->{log}) or return 0;
	while (my $line = <$fh>)
	{
		$n++ if $line =~ /^hit\t\Q$action\E\t/;
	}
	close($fh);
	return $n;
}

# Action "delay:MS": the query waits MS milliseconds, then goes to the server
# as it is (a slow node).  Returns the action left to apply.
sub delayed
{
	my ($action) = @_;
	return $action unless defined $action && $action =~ /^delay:(\d+)$/;
	Time::HiRes::sleep($1 / 1000);
	return undef;
}

# The action for a text, or undef.
sub match_rule
{
	my ($config, $text, $parse_only) = @_;
	open(my $fh, '<', $config->{control}) or return undef;
	my @lines = <$fh>;
	close($fh);
	for my $line (@lines)
	{
		chomp $line;
		next if $line eq '' || $line =~ /^#/;
		my ($regex, $action) = split(/\t/, $line, 2);
		next unless defined $action;
		# a Parse alone meets only rules for it; they meet nothing else
		next if ($parse_only // 0) != ($regex =~ /^\^PARSE / ? 1 : 0);
		my $matches = eval { $text =~ /$regex/s };
		if ($matches)
		{
			append_line($config->{log}, "hit\t$action\t" . substr($text, 0, 300));
			return $action;
		}
	}
	return undef;
}

# The connection to the real server.
sub connect_upstream
{
	my ($config) = @_;
	my ($host, $port) = @$config{qw(upstream_host upstream_port)};
	return IO::Socket::UNIX->new(Type => SOCK_STREAM, Peer => "$host/.s.PGSQL.$port", Timeout => 5)
	  if $host =~ m{^/};
	return IO::Socket::INET->new(PeerAddr => $host, PeerPort => $port, Proto => 'tcp', Timeout => 5);
}

# Hold a connection open, answering nothing, until the client closes it or
# the time is up: a server that took the request and went silent.
sub black_hole
{
	my ($sock, $deadline) = @_;
	my $select = IO::Select->new($sock);
	while (Time::HiRes::time() < $deadline)
	{
		next unless $select->can_read(0.5);
		my $got = sysread($sock, my $junk, 65536);
		last if defined $got && $got == 0;
		last if !defined $got && $! != EINTR && $! != EAGAIN;
	}
}

# The answer the proxy gives itself to a query, for an action that needs no
# server: a list of messages up to ReadyForQuery.  $status is the
# transaction status to report; @before, what the batch's Parse and Bind
# get (ParseComplete, BindComplete).
sub local_answer
{
	my ($action, $status, @before) = @_;
	my @m = @before;
	if ($action eq 'one_column')
	{
		# one text column, one row "x": whatever the statement expected
		push @m, row_description([ 'x', TEXT_OID, 0 ]), data_row('x'), command_complete('SELECT 1');
	}
	elsif ($action eq 'no_rows')
	{
		# one column, no row at all (an aggregate never answers so)
		push @m, row_description([ 'x', TEXT_OID, 0 ]), command_complete('SELECT 0');
	}
	elsif ($action eq 'wrong_count')
	{
		# a count that is not an integer
		push @m, row_description([ 'count', INT8_OID, 0 ]), data_row('abc'), command_complete('SELECT 1');
	}
	elsif ($action eq 'null_count')
	{
		# a count that is NULL
		push @m, row_description([ 'count', INT8_OID, 0 ]), data_row(undef), command_complete('SELECT 1');
	}
	else
	{
		return ();
	}
	push @m, ready_for_query($status);
	return @m;
}

# The second result extra_results adds after the real answer: one text
# column, one row.
sub extra_result
{
	return row_description([ 'extra', TEXT_OID, 0 ]) . data_row('extra') . command_complete('SELECT 1');
}

# Relay one client connection.
sub proxy_one_client
{
	my ($client, $deadline, $parent, $config) = @_;
	my $startup_deadline = Time::HiRes::time() + 15;
	my $packet;

	# The untyped first packets: SSL and GSS requests are refused ('N'),
	# a cancel request is forwarded (or swallowed), the startup is relayed.
	for (1 .. 3)
	{
		$packet = read_startup_packet($client, $startup_deadline);
		return unless defined $packet;
		my $code = unpack('N', substr($packet, 4, 4));
		if ($code == SSL_REQUEST_CODE || $code == GSSENC_REQUEST_CODE)
		{
			write_all($client, 'N') or return;
			next;
		}
		if ($code == CANCEL_REQUEST_CODE)
		{
			my $action = match_rule($config, 'CANCEL REQUEST') // '';
			append_line($config->{log}, "cancel\t" . ($action || 'forwarded'));
			if ($action eq 'hang')
			{
				black_hole($client, $deadline);
				return;
			}
			# forward it, wait (5 s at most) for the server to close, then close
			my $up = connect_upstream($config) or return;
			write_all($up, $packet);
			read_exact($up, 1, Time::HiRes::time() + 5);
			close($up);
			close($client);
			return;
		}
		last;
	}
	my %params = startup_parameters($packet);
	my $startup = sprintf('STARTUP user=%s database=%s', $params{user} // '', $params{database} // '');
	append_line($config->{log}, "seen\t$startup");
	my $startup_action = match_rule($config, $startup) // '';
	if ($startup_action eq 'hang')
	{
		black_hole($client, $deadline);
		return;
	}
	return if $startup_action eq 'close';
	if ($startup_action eq 'garbage')
	{
		write_all($client, garbage());
		black_hole($client, $deadline);
		return;
	}
	my $server = connect_upstream($config) or return;
	write_all($server, $packet) or return;
	relay($client, $server, $deadline, $parent, $config);
}

# Bytes that are no protocol message: 'g' is no message type a server sends.
sub garbage { return "garbage\x00\xff\xfe\x01 not a PostgreSQL message\n"; }

# The relay loop.  Client messages are read whole and either forwarded or
# answered here; server messages are read whole and forwarded, rewritten
# for the query they answer when its action says so.  Answers go back in
# the order of the queries: each query forwarded or answered here takes a
# place in @pending, and the server's ReadyForQuery ends the first one.
sub relay
{
	my ($client, $server, $deadline, $parent, $config) = @_;
	my $select = IO::Select->new($client, $server);
	my $cbuf = '';
	my $sbuf = '';
	my %statements;             # prepared statement name -> SQL
	my @batch;                  # extended-protocol messages up to Sync
	my @pending;                # {action => ...} forwarded, or {local => [messages]}
	my $status = 'I';           # the server's last transaction status
	my $frozen = 0;             # hang, garbage, copy_out: nothing more is relayed
	my $copy_sent = 0;
	my $next_copy = 0;

	my $to_client = sub { write_all($client, join('', @_), $deadline) };

	# local answers that have their turn now go out
	my $flush_local = sub {
		while (@pending && $pending[0]{local})
		{
			my $p = shift @pending;
			$to_client->(@{ $p->{local} });
		}
	};

	# a query the proxy answers itself, by action; false if the action needs the server
	my $answer_here = sub {
		my ($action, $text, @before) = @_;
		my $st = $status;
		$st = 'T' if $st eq 'I' && $text =~ /^\s*(START TRANSACTION|BEGIN)/i;
		if ($action eq 'hang' || $action eq 'garbage' || $action eq 'copy_out' || $action eq 'close')
		{
			# these take the connection over once the answers before them are out
			push @pending, { takeover => $action };
			return 1;
		}
		my @m = local_answer($action, $st, @before);
		return 0 unless @m;
		push @pending, { local => \@m };
		$flush_local->() if @pending == 1;
		return 1;
	};

	my $take_over = sub {
		my ($action) = @_;
		if ($action eq 'close')
		{
			close($client);
			close($server);
			return 0;
		}
		$frozen = $action;
		$to_client->(garbage()) if $action eq 'garbage';
		$to_client->(copy_out_response()) if $action eq 'copy_out';
		return 1;
	};

	my $client_message = sub {
		my ($type, $body) = @_;
		my $raw = message($type, $body);
		if ($type eq 'Q')
		{
			(my $sql = $body) =~ s/\0$//;
			# EXECUTE of a statement prepared before (Parse): matched with its text, in place
			$sql =~ s/\bEXECUTE (\w+)\(/"EXECUTE $1 [" . ($statements{$1} \/\/ '') . "] ("/ge;
			append_line($config->{log}, "seen\t" . substr($sql, 0, 300));
			my $action = delayed(match_rule($config, $sql));
			if (defined $action && $action ne 'bad_binary' && $action ne 'extra_results')
			{
				return if $answer_here->($action, $sql);
			}
			push @pending, { action => $action // '' };
			write_all($server, $raw, $deadline);
			return;
		}
		if ($type =~ /^[PBDEC]$/)
		{
			# extended protocol: held until Sync, matched as one batch
			push @batch, [ $type, $body, $raw ];
			return;
		}
		if ($type eq 'S' || $type eq 'H')
		{
			my ($sql, $has_execute, $has_parse, $has_bind) = ('', 0, 0, 0);
			for my $m (@batch)
			{
				my ($t, $b) = @$m;
				if ($t eq 'P')
				{
					my ($name, $query) = split(/\0/, $b, 3);
					$statements{$name} = $query;
					$sql = $query;
					$has_parse = 1;
				}
				elsif ($t eq 'B')
				{
					my ($portal, $name) = split(/\0/, $b, 3);
					$sql = $statements{$name} // $sql;
					$has_bind = 1;
				}
				elsif ($t eq 'E')
				{
					$has_execute = 1;
				}
			}
			my $raw_batch = join('', map { $_->[2] } @batch) . $raw;
			@batch = ();
			if ($has_execute)
			{
				append_line($config->{log}, "seen\t" . substr($sql, 0, 300));
				my $action = delayed(match_rule($config, $sql));
				if (defined $action && $action ne 'bad_binary' && $action ne 'extra_results')
				{
					return if $answer_here->($action, $sql, ($has_parse ? parse_complete() : ()),
						($has_bind ? bind_complete() : ()));
				}
				push @pending, { action => $action // '' } if $type eq 'S';
			}
			elsif ($has_parse)
			{
				# a statement prepared alone: only rules written for it ("^PARSE ") apply
				my $action = delayed(match_rule($config, "PARSE $sql", 1));
				if (defined $action && $action ne 'bad_binary' && $action ne 'extra_results')
				{
					return if $answer_here->($action, "PARSE $sql");
				}
				push @pending, { action => $action // '' } if $type eq 'S';
			}
			elsif ($type eq 'S')
			{
				push @pending, { action => '' };
			}
			write_all($server, $raw_batch, $deadline);
			return;
		}
		# password, COPY data, Terminate, function calls: as they are
		write_all($server, $raw, $deadline);
	};

	my $server_message = sub {
		my ($type, $body) = @_;
		my $action = @pending && !$pending[0]{local} ? ($pending[0]{action} // '') : '';
		if ($type eq 'D' && $action eq 'bad_binary')
		{
			$body = shorten_binary_values($body);
		}
		if ($type eq 'Z')
		{
			$status = substr($body, 0, 1);
			$to_client->(extra_result()) if $action eq 'extra_results';
			$to_client->(message($type, $body));
			shift @pending if @pending && !$pending[0]{local} && !$pending[0]{takeover};
			$flush_local->();
			if (@pending && $pending[0]{takeover})
			{
				return $take_over->(shift(@pending)->{takeover});
			}
			return 1;
		}
		$to_client->(message($type, $body));
		return 1;
	};

	while (Time::HiRes::time() < $deadline && kill(0, $parent))
	{
		# a take-over queued while no answer is outstanding starts now
		if (!$frozen && @pending && $pending[0]{takeover})
		{
			return unless $take_over->(shift(@pending)->{takeover});
		}
		if ($frozen eq 'copy_out' && Time::HiRes::time() >= $next_copy && $copy_sent < 2000)
		{
			# COPY data without end, slowly (at most 2000 messages, 20 a second)
			last unless $to_client->(copy_data("row $copy_sent of a COPY that never ends\n"));
			$copy_sent++;
			$next_copy = Time::HiRes::time() + 0.05;
		}
		my @ready = $select->can_read(0.05);
		for my $sock (@ready)
		{
			my $got = sysread($sock, my $chunk, 65536);
			if (!defined $got)
			{
				next if $! == EINTR || $! == EAGAIN;
				return;
			}
			return if $got == 0;    # either side closed: the relay ends
			if ($sock == $client)
			{
				next if $frozen;    # nothing more reaches the server
				$cbuf .= $chunk;
				while (length($cbuf) >= 5)
				{
					my ($type, $len) = unpack('a N', $cbuf);
					last if length($cbuf) < $len + 1;
					my $body = substr($cbuf, 5, $len - 4);
					substr($cbuf, 0, $len + 1) = '';
					$client_message->($type, $body);
				}
			}
			else
			{
				next if $frozen;    # the server's answers no longer reach the client
				$sbuf .= $chunk;
				while (length($sbuf) >= 5)
				{
					my ($type, $len) = unpack('a N', $sbuf);
					last if length($sbuf) < $len + 1;
					my $body = substr($sbuf, 5, $len - 4);
					substr($sbuf, 0, $len + 1) = '';
					return unless $server_message->($type, $body);
				}
			}
		}
	}
}

1;

# Differential test: values crossing between the coordinator and its nodes
# never depend on the session's settings.
#
# Every generated statement runs twice in one coordinator session, with the
# same random settings (DateStyle, IntervalStyle, extra_float_digits,
# TimeZone, bytea_output, lc_monetary, plan_cache_mode, the batch sizes):
# once on a distributed table, once on its local twin of identical
# definition.  Both must fail with the same SQLSTATE class (or both with
# errors of the rows' data, met in another order) or both succeed
# with the same row count and the same answer, printed as text in that
# session.  Periodically, and at the end, the whole contents are compared
# under fixed settings and every worker is read directly: each row must be
# on exactly its replicas, with the twin's contents.
#
# Literals are written the way the session reads them (dates in its
# DateStyle order, intervals in its IntervalStyle, ...), and as expressions
# (make_date(...), 0.1::float8 + 0.2::float8, 3.1415927::real, ...).
#
#   RINGSHARD_DIFF_SEED=n        replay a run (the seed is printed first)
#   RINGSHARD_DIFF_STATEMENTS=n  how many statement units (default 3000)
#   RINGSHARD_DIFF_DUMP=file     write every compared statement and both answers to a file
#
# Router statements (a SELECT fixed to one key over tables of several
# families) are compared the same way, and most must go whole to one node;
# so are joins of every key (grouped by the key, by another column, one
# total, DISTINCT: the nodes' groups combined on the coordinator).
#
# A refusal by design (SQLSTATE 0A000 on the distributed table only: an
# UPDATE of the key, an UPDATE, DELETE or upsert that cannot be sent whole)
# is not a difference; refusals are counted and listed apart, and most
# upserts must run (not be refused).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(time);

my $seed = $ENV{RINGSHARD_DIFF_SEED} // ((int(time() * 1000) ^ ($$ << 8)) & 0x7fffffff);
my $nunits = $ENV{RINGSHARD_DIFF_STATEMENTS} // 3000;
diag("RINGSHARD_DIFF_SEED=$seed RINGSHARD_DIFF_STATEMENTS=$nunits");
srand($seed);
my $started = time();

# ---------------------------------------------------------------------------
# The cluster: a coordinator and three workers.

my $coordinator = PostgreSQL::Test::Cluster->new('coordinator');
my @workers = map { PostgreSQL::Test::Cluster->new("f$_") } 1 .. 3;
for my $node ($coordinator, @workers)
{
	$node->init;
	$node->append_conf('postgresql.conf', "max_prepared_transactions = 20\nshared_preload_libraries = 'ringshard'\nfsync = off");
	$node->start;
	$node->safe_psql('postgres', q{
		CREATE EXTENSION ringshard;
		CREATE TYPE public.mood AS ENUM ('sad', 'ok', 'happy');
		CREATE TYPE public.pairt AS (a int4, f float8, m money);
	});
}

my $setup = q{SET client_min_messages = warning;
	SELECT ringshard.create_ring('pair', replication_factor => 2);
	SELECT ringshard.create_ring('single');
	SELECT ringshard.create_partition_map('halves');
};
for my $i (1 .. 3)
{
	my $w = $workers[ $i - 1 ];
	$setup .= sprintf("SELECT ringshard.add_node('f%d', 'host=%s port=%d dbname=postgres', 'pair');\n", $i, $w->host, $w->port);
	$setup .= "SELECT ringshard.add_node('f$i', ring => 'single');\n";
}
$setup .= q{
	SELECT ringshard.assign_partitions('f1', 0, 170, 'halves');
	SELECT ringshard.assign_partitions('f2', 85, 255, 'halves');
	SELECT ringshard.assign_partitions('f3', 0, 84, 'halves');
	SELECT ringshard.assign_partitions('f3', 171, 255, 'halves');
	SELECT count(*) FROM ringshard.sync_topology();
};

# The main tables: one column of each type; the "text" family has a column
# of a composite type, which travels only as text, so all its values do.
my $main_columns = q{id int4 PRIMARY KEY, i8 int8, n numeric, n2 numeric(12,2), n5 numeric(20,5), f4 real,
	f8 float8, fx float8, d date, ts timestamp, tz timestamptz, iv interval, tm time, ttz timetz, m money,
	t text, vc varchar(12), ch char(6), b bytea, bo bool, u uuid, ia int4[], ta text[], j jsonb, e mood,
	ip inet};
my %families;
my @main_families = (
	[ 'pair', 'distribute_table(%s, %s, %s)', 'pair', '' ],
	[ 'single', 'distribute_table(%s, %s, %s)', 'single', '' ],
	[ 'map', q{distribute_table_by_partition(%s, %s, keyspace => 'items', map => %s)}, 'halves', '' ],
	[ 'text', 'distribute_table(%s, %s, %s)', 'pair', ', pt pairt' ],
);
for my $f (@main_families)
{
	my ($name, $how, $ring, $extra) = @$f;
	$families{$name} = {
		name => $name, kind => 'main', dist => "dt_$name", local => "lt_$name", key => 'id',
		ring => $ring, map => ($how =~ /partition/ ? 1 : 0), has_pt => ($extra ne '' ? 1 : 0),
	};
	$setup .= "CREATE TABLE lt_$name ($main_columns$extra);\n";
	$setup .= "CREATE TABLE dt_$name (LIKE lt_$name INCLUDING ALL);\n";
	$setup .= 'SELECT ringshard.' . sprintf($how, "'dt_$name'", "'id'", "'$ring'") . ";\n";
	$setup .= "SELECT ringshard.create_distributed_table('dt_$name');\n";
}
# Tables keyed by types whose equal values have several spellings.
my %key_tables = (
	nk => [ 'nk numeric PRIMARY KEY, v text, f8 float8, d date', 'nk' ],
	ck => [ 'code char(4) PRIMARY KEY, v text, n int4', 'code' ],
	tk => [ 'tk timestamptz PRIMARY KEY, v text, iv interval', 'tk' ],
);
for my $name (sort keys %key_tables)
{
	my ($columns, $key) = @{ $key_tables{$name} };
	$families{$name} = {
		name => $name, kind => $name, dist => "${name}_dist", local => "${name}_local", key => $key,
		ring => 'pair', map => 0, has_pt => 0,
	};
	$setup .= "CREATE TABLE ${name}_local ($columns);\n";
	$setup .= "CREATE TABLE ${name}_dist (LIKE ${name}_local INCLUDING ALL);\n";
	$setup .= "SELECT ringshard.distribute_table('${name}_dist', '$key', 'pair');\n";
	$setup .= "SELECT ringshard.create_distributed_table('${name}_dist');\n";
}
# A reference table (a copy on every node), joined by router statements.
$setup .= q{
	CREATE TABLE lt_ref (id int4 PRIMARY KEY, v text, n numeric, d date);
	INSERT INTO lt_ref SELECT g, 'site ' || g, g * 1.25, date '2024-01-01' + g FROM generate_series(1, 50) g;
	CREATE TABLE dt_ref (LIKE lt_ref INCLUDING ALL);
	INSERT INTO dt_ref SELECT * FROM lt_ref;
	SELECT ringshard.create_reference_table('dt_ref');
};
$coordinator->safe_psql('postgres', $setup);
# a crashed backend is a difference to report, not the end of the run
$coordinator->append_conf('postgresql.conf', 'restart_after_crash = on');
$coordinator->reload;
my @family_names = ((map { $_->[0] } @main_families), sort keys %key_tables);
pass('coordinator, three workers and ' . scalar(@family_names) . ' pairs of tables are set up');

# Another locale for lc_monetary, if the machine has one.
my @monetary = ('C');
for my $candidate ('en_US.UTF-8', 'en_US.utf8', 'de_DE.UTF-8', 'en_GB.UTF-8', 'C.UTF-8', 'C.utf8')
{
	my ($rc) = $coordinator->psql('postgres', "SET lc_monetary = '$candidate'");
	if ($rc == 0)
	{
		push @monetary, $candidate;
		last;
	}
}
# C.UTF-8 formats money as C does: compile a locale that does not
# (1.234,56 €), for the coordinator only, if the machine has the sources.
if (!grep { /^(en|de)_/ } @monetary)
{
	my $dir = $coordinator->basedir . '/locales';
	mkdir($dir);
	my $server_locales = $coordinator->safe_psql('postgres',
		q{SELECT string_agg(setting, ' ') FROM pg_settings WHERE name IN ('lc_collate', 'lc_ctype', 'lc_messages', 'lc_monetary', 'lc_numeric', 'lc_time')});
	if (-d '/usr/share/i18n/locales' && -e '/usr/share/i18n/locales/de_DE' && $server_locales =~ /^((C|POSIX|C\.UTF-8|C\.utf8)( |$))+$/
		&& system("localedef -i de_DE -f UTF-8 '$dir/de_DE.UTF-8' >/dev/null 2>&1") == 0)
	{
		local $ENV{LOCPATH} = $dir;
		$coordinator->restart;
		my ($rc) = $coordinator->psql('postgres', "SET lc_monetary = 'de_DE.UTF-8'");
		push @monetary, 'de_DE.UTF-8' if $rc == 0;
	}
}
diag("lc_monetary values: @monetary" . (@monetary == 1 ? ' (no other locale installed: lc_monetary stays C)' : ''));

# ---------------------------------------------------------------------------
# One psql session on the coordinator, kept for the whole run: statements
# are sent with a marker after each, which echoes SQLSTATE and ROW_COUNT.

my ($ps, $ps_in, $ps_out, $ps_err);
my $marker_seq = 0;

sub ps_start
{
	($ps_in, $ps_out, $ps_err) = ('', '', '');
	local %ENV = %ENV;
	$ENV{PGOPTIONS} = '-c client_min_messages=warning';
	$ps = IPC::Run::start(
		[
			'psql', '-XAtq', '-F', "\x1f", '-0', '-P', 'null=<NULL>', '-v', 'ON_ERROR_STOP=0',
			'-d', $coordinator->connstr('postgres'), '-f', '-'
		],
		'<', \$ps_in, '>', \$ps_out, '2>', \$ps_err,
		IPC::Run::timeout(600));
}

# Run statements ({sql, copy}) in the session; one result per statement:
# {state, count, rows, err}.  A lost session is restarted and reported.
sub ps_run
{
	my @stmts = @_;
	my $tag = 'RSDIFF' . (++$marker_seq);
	my $script = '';
	for my $i (0 .. $#stmts)
	{
		my $s = $stmts[$i];
		$script .= $s->{sql} . ";\n";
		$script .= join('', map { "$_\n" } @{ $s->{copy} }) . "\\.\n" if $s->{copy};
		$script .= "\\echo '\@\@$tag:$i' :SQLSTATE :ROW_COUNT\n\\warn '\@\@$tag:$i'\n";
	}
	$ps_in .= $script;
	my $last = $#stmts;
	my $ok = eval {
		$ps->pump until $ps_out =~ /\@\@$tag:$last \S+ \S+\n/ && $ps_err =~ /\@\@$tag:$last\n/;
		1;
	};
	if (!$ok)
	{
		my $why = $@;
		my $err = $ps_err;
		eval { $ps->kill_kill; };
		# the server restarts after a crash: wait for it, finish what the crash left prepared
		for (1 .. 600)
		{
			my ($rc) = $coordinator->psql('postgres', 'SELECT 1');
			last if $rc == 0;
			select(undef, undef, undef, 0.1);
		}
		$coordinator->psql('postgres', 'SELECT ringshard.recover_prepared_transactions()');
		my @crash = grep { /terminated by signal|Failed process was running/ } split /\n/, slurp_file($coordinator->logfile);
		my $log = join("\n", @crash[ ($#crash > 1 ? $#crash - 1 : 0) .. $#crash ]);
		ps_start();
		return map { { state => 'LOST', count => 0, rows => [], err => "session lost: $why $err\nserver log: $log" } } @stmts;
	}
	my @results;
	for my $i (0 .. $last)
	{
		$ps_out =~ s/^(.*?)\@\@$tag:$i (\S+) (\S+)\n//s or die "no output marker $i";
		my ($chunk, $state, $count) = ($1, $2, $3);
		my @rows = length($chunk) ? split(/\0/, $chunk, -1) : ();
		pop @rows if @rows;
		$ps_err =~ s/^(.*?)\@\@$tag:$i\n//s or die "no error marker $i";
		my $err = $1;
		$count = 0 if $count !~ /^\d+$/;
		push @results, { state => $state, count => $count, rows => \@rows, err => $err };
	}
	return @results;
}

# A statement of our own (not compared); dies if it fails.
sub ps_internal
{
	my ($sql) = @_;
	my ($r) = ps_run({ sql => $sql });
	die "internal statement failed: $sql\n$r->{err}" if $r->{state} ne '00000';
	return @{ $r->{rows} };
}

ps_start();

# ---------------------------------------------------------------------------
# Randomness.

sub rint { my ($lo, $hi) = @_; return $lo + int(rand($hi - $lo + 1)); }
sub pick { return $_[ int(rand(scalar @_)) ]; }
sub chance { return rand() < $_[0]; }

sub wpick
{
	my @pairs = @_;
	my $total = 0;
	$total += $_->[0] for @pairs;
	my $r = rand($total);
	for my $p (@pairs)
	{
		return $p->[1] if ($r -= $p->[0]) < 0;
	}
	return $pairs[-1][1];
}

sub ql { my ($s) = @_; $s =~ s/'/''/g; return "'$s'"; }

# ---------------------------------------------------------------------------
# Session settings.

my @datestyles = map { my $s = $_; map { [ $s, $_ ] } qw(DMY MDY YMD) } qw(ISO SQL Postgres German);
my @intervalstyles = qw(postgres postgres_verbose sql_standard iso_8601);
my @timezones = ('UTC', 'Asia/Jakarta', 'America/St_Johns', 'Pacific/Chatham', 'Asia/Kathmandu');

sub random_settings
{
	my $ds = pick(@datestyles);
	return {
		style => $ds->[0], order => $ds->[1],
		intervalstyle => pick(@intervalstyles),
		efd => rint(-15, 3),
		tz => pick(@timezones),
		bytea => pick('hex', 'escape'),
		monetary => pick(@monetary),
		plan => wpick([ 6, 'auto' ], [ 3, 'force_generic_plan' ], [ 1, 'force_custom_plan' ]),
		array_nulls => chance(0.8) ? 'on' : 'off',
		fetch => wpick([ 8, 2000 ], [ 1, 3 ], [ 1, 50 ]),
		batch => wpick([ 8, 1000 ], [ 1, 7 ], [ 1, 100 ]),
	};
}

sub settings_sql
{
	my ($S) = @_;
	return join(
		' \; ',
		"SET DateStyle = '$S->{style}, $S->{order}'",
		"SET IntervalStyle = $S->{intervalstyle}",
		"SET extra_float_digits = $S->{efd}",
		"SET TimeZone = '$S->{tz}'",
		"SET bytea_output = $S->{bytea}",
		"SET lc_monetary = '$S->{monetary}'",
		"SET plan_cache_mode = $S->{plan}",
		"SET array_nulls = $S->{array_nulls}",
		"SET ringshard.fetch_size = $S->{fetch}",
		"SET ringshard.write_batch_size = $S->{batch}");
}

sub settings_text
{
	my ($S) = @_;
	return "DateStyle '$S->{style}, $S->{order}', IntervalStyle $S->{intervalstyle}, extra_float_digits $S->{efd}, "
	  . "TimeZone $S->{tz}, bytea_output $S->{bytea}, lc_monetary $S->{monetary}, plan_cache_mode $S->{plan}, "
	  . "array_nulls $S->{array_nulls}, fetch_size $S->{fetch}, write_batch_size $S->{batch}";
}

my %canonical = (
	style => 'ISO', order => 'MDY', intervalstyle => 'postgres', efd => 3, tz => 'UTC', bytea => 'hex',
	monetary => 'C', plan => 'auto', fetch => 2000, batch => 1000, array_nulls => 'on');

# ---------------------------------------------------------------------------
# Values, written as the session reads them.  Each type has a text form
# (valid input under the session's settings: also used for COPY) and SQL
# forms (literals, casts and expressions).

my @month_names = qw(Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec);

sub random_date_parts
{
	my $r = rand();
	return [ 'special', pick('infinity', '-infinity') ] if $r < 0.02;
	my $y = $r < 0.80 ? rint(1900, 2100) : $r < 0.87 ? rint(1, 1899) : $r < 0.90 ? -rint(0, 300)
	  : $r < 0.98 ? rint(2101, 9999) : rint(10000, 20000);
	my $m = rint(1, 12);
	my $d = rint(1, 28);
	if ($y > 0 && $y < 10000 && chance(0.2))
	{
		my @len = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31);
		$len[1] = 29 if $y % 4 == 0 && ($y % 100 != 0 || $y % 400 == 0);
		$d = $len[ $m - 1 ];
	}
	return [ 'date', $y, $m, $d ];
}

# y <= 0 is 1 - y BC (astronomical year numbering)
sub date_text
{
	my ($S, $p) = @_;
	return $p->[1] if $p->[0] eq 'special';
	my (undef, $y, $m, $d) = @$p;
	my $bc = $y <= 0;
	my $ys = sprintf('%04d', $bc ? 1 - $y : $y);
	my ($mm, $dd) = (sprintf('%02d', $m), sprintf('%02d', $d));
	my $form = wpick([ 6, 'order' ], [ 2, 'iso' ], [ 1, 'dmon' ], [ 1, 'mond' ]);
	my $s;
	if ($form eq 'iso' || ($form eq 'order' && ($S->{style} eq 'ISO' || $S->{order} eq 'YMD')))
	{
		$s = "$ys-$mm-$dd";
	}
	elsif ($form eq 'order')
	{
		my $sep = { SQL => '/', German => '.', Postgres => '-' }->{ $S->{style} };
		$s = $S->{order} eq 'DMY' ? "$dd$sep$mm$sep$ys" : "$mm$sep$dd$sep$ys";
	}
	elsif ($form eq 'dmon') { $s = "$dd $month_names[$m - 1] $ys"; }
	else { $s = "$month_names[$m - 1] $dd $ys"; }
	return $bc ? "$s BC" : $s;
}

sub random_time_parts
{
	my $us = wpick([ 5, 0 ], [ 2, rint(1, 999) * 1000 ], [ 3, rint(1, 999999) ]);
	return [ 24, 0, 0, 0 ] if chance(0.01);
	return [ rint(0, 23), rint(0, 59), rint(0, 59), $us ];
}

sub time_text
{
	my ($p) = @_;
	my ($h, $mi, $s, $us) = @$p;
	my $t = sprintf('%02d:%02d:%02d', $h, $mi, $s);
	if ($us)
	{
		(my $f = sprintf('%06d', $us)) =~ s/0+$//;
		$t .= ".$f";
	}
	return $t;
}

my @zones = ('+00', '+05:45', '-03:30', '+13:45', '-09:30', '+05:30', '+14', '-12', ' UTC', ' Asia/Kathmandu',
	' America/St_Johns', ' Pacific/Chatham', ' Europe/Berlin', ' Z');

sub timestamp_text
{
	my ($S, $dp, $tp, $zone) = @_;
	return $dp->[1] if $dp->[0] eq 'special';
	my (undef, $y, $m, $d) = @$dp;
	my $bc = $y <= 0;
	my $z = defined $zone ? $zone : '';
	if ($S->{style} eq 'Postgres' && chance(0.6))
	{
		my $ys = sprintf('%04d', $bc ? 1 - $y : $y);
		my $mon = $month_names[ $m - 1 ];
		my $date = $S->{order} eq 'DMY' ? sprintf('%02d %s', $d, $mon) : sprintf('%s %02d', $mon, $d);
		my $s = "$date " . time_text($tp) . " $ys";
		$s .= ($z =~ /^ / ? $z : " $z") if $z ne '';
		return $bc ? "$s BC" : $s;
	}
	my $date = date_text($S, [ 'date', $y, $m, $d ]);
	$date =~ s/ BC$//;
	my $sep = ($date =~ /^\d{4,5}-\d\d-\d\d$/ && chance(0.2)) ? 'T' : ' ';
	my $s = $date . $sep . time_text($tp) . $z;
	return $bc ? "$s BC" : $s;
}

sub random_interval_parts
{
	my $mon = chance(0.5) ? 0 : rint(-30, 30);
	my $day = chance(0.4) ? 0 : rint(-45, 45);
	my $us = chance(0.2) ? 0 : (rint(-100 * 3600, 100 * 3600) * 1000000 + (chance(0.5) ? 0 : rint(0, 999999)));
	return [ $mon, $day, $us ];
}

sub signed { my ($v) = @_; return $v < 0 ? "$v" : "+$v"; }

sub usec_hms
{
	my ($us) = @_;
	my $neg = $us < 0;
	$us = -$us if $neg;
	my $h = int($us / 3600000000);
	my $mi = int(($us % 3600000000) / 60000000);
	my $s = int(($us % 60000000) / 1000000);
	my $f = $us % 1000000;
	return ($neg, $h, $mi, $s, $f);
}

sub secs_text
{
	my ($s, $f) = @_;
	return "$s" unless $f;
	(my $ft = sprintf('%06d', $f)) =~ s/0+$//;
	return "$s.$ft";
}

sub interval_text
{
	my ($S, $p, $style) = @_;
	my ($mon, $day, $us) = @$p;
	$style //= chance(0.6) ? $S->{intervalstyle} : pick(@intervalstyles, 'bare');
	my $ys = int(abs($mon) / 12) * ($mon < 0 ? -1 : 1);
	my $ms = (abs($mon) % 12) * ($mon < 0 ? -1 : 1);
	my ($neg, $h, $mi, $s, $f) = usec_hms($us);
	my $sg = $neg ? '-' : '+';
	if ($style eq 'iso_8601')
	{
		my $out = 'P';
		$out .= "${ys}Y" if $ys;
		$out .= "${ms}M" if $ms;
		$out .= "${day}D" if $day;
		if ($us)
		{
			my $n = $neg ? '-' : '';
			$out .= 'T';
			$out .= "$n${h}H" if $h;
			$out .= "$n${mi}M" if $mi;
			$out .= $n . secs_text($s, $f) . 'S' if $s || $f;
		}
		return $out eq 'P' ? 'PT0S' : $out;
	}
	if ($style eq 'sql_standard')
	{
		my @parts;
		push @parts, ($mon < 0 ? '-' : '+') . int(abs($mon) / 12) . '-' . (abs($mon) % 12) if $mon;
		# a day count stands only before a time (a lone number is seconds)
		push @parts, signed($day) if $day || ($mon && $us);
		push @parts, sprintf('%s%d:%02d:%02d%s', $sg, $h, $mi, $s, $f ? substr(secs_text(0, $f), 1) : '')
		  if $us || $day || !@parts;
		return join(' ', @parts);
	}
	if ($style eq 'postgres_verbose')
	{
		my @parts;
		push @parts, signed($ys) . ' years' if $ys;
		push @parts, signed($ms) . ' mons' if $ms;
		push @parts, signed($day) . ' days' if $day;
		push @parts, "$sg$h hours" if $h;
		push @parts, "$sg$mi mins" if $mi;
		push @parts, $sg . secs_text($s, $f) . ' secs' if $s || $f;
		return @parts ? '@ ' . join(' ', @parts) : '@ 0';
	}
	if ($style eq 'bare')
	{
		# no explicit signs after the first: read differently under sql_standard, as a user would
		my @parts;
		push @parts, "$mon mons" if $mon;
		push @parts, "$day days" if $day;
		push @parts, sprintf('%s%02d:%02d:%s', $neg ? '-' : '', $h, $mi, ($s < 10 ? '0' : '') . secs_text($s, $f)) if $us;
		return @parts ? join(' ', @parts) : '0';
	}
	my @parts;
	push @parts, signed($ys) . ' years' if $ys;
	push @parts, signed($ms) . ' mons' if $ms;
	push @parts, signed($day) . ' days' if $day;
	push @parts, sprintf('%s%02d:%02d:%s', $sg, $h, $mi, ($s < 10 ? '0' : '') . secs_text($s, $f)) if $us || !@parts;
	return join(' ', @parts);
}

sub money_text
{
	my ($S) = @_;
	my $cents = wpick([ 5, rint(-100000, 100000) ], [ 3, rint(-100000000, 100000000) ], [ 1, rint(-9e11, 9e11) ]);
	my $neg = $cents < 0;
	$cents = -$cents if $neg;
	my $units = int($cents / 100);
	my $digits = "$units";
	if (($S->{monetary} // 'C') =~ /^de_DE/)
	{
		# 1.234,56 €
		1 while chance(0.5) && $digits =~ s/^(\d+)(\d{3})/$1.$2/;
		return ($neg ? '-' : '') . $digits . sprintf(',%02d', $cents % 100) . (chance(0.5) ? ' €' : '');
	}
	1 while chance(0.5) && $digits =~ s/^(\d+)(\d{3})/$1,$2/;
	my $s = ($neg ? '-' : '') . (chance(0.5) ? '$' : '') . $digits . sprintf('.%02d', $cents % 100);
	return $s;
}

my @text_pool = ('a' .. 'z', 'A' .. 'Z', '0' .. '9', ' ', ' ', "\t", "\n", '\\', "'", '"', ',', '{', '}', '(', ')',
	"\xc3\xa9", "\xc3\x9f", "\xe2\x82\xac", "\xe6\x97\xa5");
my @ascii_pool = ('a' .. 'z', 'A' .. 'Z', '0' .. '9', ' ', '-', '_');

sub random_string
{
	my ($max, $pool) = @_;
	my $len = rint(0, $max);
	return join('', map { pick(@$pool) } 1 .. $len);
}

sub random_bytes { my $n = rint(0, 8); return [ map { wpick([ 3, rint(0, 255) ], [ 1, 0 ], [ 1, 92 ]) } 1 .. $n ]; }

sub bytea_text
{
	my ($bytes) = @_;
	return '\\x' . join('', map { sprintf('%02x', $_) } @$bytes) if chance(0.6);
	return join('', map { $_ == 92 ? '\\\\' : ($_ >= 32 && $_ < 127 && $_ != 39) ? chr($_) : sprintf('\\%03o', $_) } @$bytes);
}

sub uuid_text
{
	my $h = join('', map { sprintf('%02x', rint(0, 255)) } 1 .. 16);
	my $form = rint(0, 3);
	my $u = join('-', substr($h, 0, 8), substr($h, 8, 4), substr($h, 12, 4), substr($h, 16, 4), substr($h, 20, 12));
	return $form == 0 ? $u : $form == 1 ? uc($u) : $form == 2 ? "{$u}" : $h;
}

sub float8_text
{
	my $r = rand();
	return pick('NaN', 'Infinity', '-Infinity') if $r < 0.05;
	return pick('0.1', '0.2', '0.3', '1e308', '5e-324', '2.2250738585072014e-308', '1.7976931348623157e308',
		'0.30000000000000004', '3.141592653589793', '100', '-1.5', '1e-10', '123456789012345680000')
	  if $r < 0.35;
	my $v = (rand() * 2 - 1) * 10**rint(-30, 30);
	return sprintf('%.*g', pick(6, 15, 17), $v);
}

sub float4_text
{
	my $r = rand();
	return pick('NaN', 'Infinity', '-Infinity') if $r < 0.05;
	return pick('3.1415927', '0.1', '1.5', '-2.75', '1e30', '1.17549435e-38', '1e-45', '3.4028235e38', '16777217')
	  if $r < 0.4;
	return sprintf('%.*g', pick(6, 9), (rand() * 2 - 1) * 10**rint(-10, 10));
}

sub exact_float_text { return sprintf('%.10f', rint(-(2**30), 2**30) / 1024); }

sub numeric_text
{
	my ($max_int_digits, $max_scale) = @_;
	my $int = join('', map { rint(0, 9) } 1 .. rint(1, $max_int_digits));
	$int =~ s/^0+(?=\d)//;
	my $scale = rint(0, $max_scale);
	my $s = (chance(0.3) ? '-' : '') . $int;
	$s .= '.' . join('', map { rint(0, 9) } 1 .. $scale) if $scale;
	return $s;
}

sub inet_text
{
	return join('.', map { rint(0, 255) } 1 .. 4) . (chance(0.4) ? '/' . rint(8, 32) : '') if chance(0.7);
	return pick('::1', '2001:db8::' . sprintf('%x', rint(0, 65535)), '::ffff:10.1.2.3', 'fe80::1/64', '2001:db8:0:1::/64');
}

sub int_array_text
{
	my $r = rand();
	return '{}' if $r < 0.1;
	return '{{1,2},{3,4}}' if $r < 0.15;
	return '[0:2]={7,8,9}' if $r < 0.2;
	return '{' . join(',', map { chance(0.1) ? 'NULL' : rint(-1000, 1000) } 1 .. rint(1, 5)) . '}';
}

sub text_array_text
{
	return '{}' if chance(0.1);
	my @e = map {
		my $s = random_string(6, [ 'a' .. 'f', ' ', ',', '"', '\\', "\xc3\xa9" ]);
		chance(0.1) ? 'NULL' : chance(0.1) ? '"NULL"' : do { $s =~ s/(["\\])/\\$1/g; "\"$s\"" }
	} 1 .. rint(1, 4);
	return '{' . join(',', @e) . '}';
}

sub json_text
{
	my $n = rint(-1000, 1000);
	my $s = random_string(5, [ 'a' .. 'e', ' ', '"', '\\', "\xc3\xa9" ]);
	$s =~ s/(["\\])/\\$1/g;
	return pick(
		qq({"a": $n, "b": [1, 2.50, "x"], "c": null}),
		qq({"a": $n, "f": 0.30000000000000004}),
		qq({"s": "$s", "a": 1}),
		qq([$n, 1.0, 1.00, true, null]),
		qq("$s"),
		qq($n.25),
		qq({"nested": {"a": [$n, {"b": 1e3}]}, "z": false}),
		qq({}),
		qq({"a": 1, "big": 123456789012345678901234567890.5}));
}

# The value generators: [text form or undef for NULL, SQL form].
sub value
{
	my ($type, $S) = @_;
	return [ undef, pick('NULL', 'NULL', 'NULL::' . ($type eq 'fx' ? 'float8' : $type)) ] if chance(0.07);
	if ($type eq 'int4')
	{
		my $t = rint(-100000, 100000);
		return [ $t, pick($t, ql($t), "${t}::int4") ];
	}
	if ($type eq 'int8')
	{
		my $t = wpick([ 6, rint(-100000, 100000) ], [ 3, rint(-2**40, 2**40) ],
			[ 1, pick('9223372036854775807', '-9223372036854775808', '4611686018427387904') ]);
		return [ $t, pick($t, ql($t), "${t}::int8") ];
	}
	if ($type eq 'numeric')
	{
		my $t = chance(0.05) ? pick('NaN', 'Infinity', '-Infinity') : chance(0.2) ? pick('1.5', '1.50', '1.500', '0', '0.000', '-0.5') : numeric_text(pick(3, 8, 25), pick(0, 2, 8, 20));
		my $plain = $t =~ /^-?[\d.]+$/;
		return [ $t, pick(ql($t), ql($t) . '::numeric', $plain ? ("($t)::numeric", $t) : ql($t)) ];
	}
	if ($type eq 'numeric(12,2)')
	{
		my $t = chance(0.03) ? 'NaN' : numeric_text(8, 4);
		return [ $t, pick(ql($t), $t =~ /\d/ ? ($t, "($t)::numeric(12,2)") : ql($t)) ];
	}
	if ($type eq 'numeric(20,5)')
	{
		my $t = numeric_text(12, 8);
		return [ $t, pick(ql($t), $t, "($t)::numeric / 3", "round(($t)::numeric, 3)") ];
	}
	if ($type eq 'real')
	{
		my $t = float4_text();
		return [ $t, pick(ql($t) . '::real', ($t =~ /^-?\d/ ? "${t}::real" : ql($t) . '::float4'), ql($t), '3.1415927::real', '(1.0 / 3)::real', '0.1::real * 3') ];
	}
	if ($type eq 'float8')
	{
		my $t = float8_text();
		return [ $t, pick(ql($t) . '::float8', ql($t), '0.1::float8 + 0.2::float8', '1.0::float8 / 3', 'pi()', 'exp(1::float8)', 'sqrt(2::float8)',
			'1e300::float8 * 100000', '0.1::float8 * 3', "${t}::float8" =~ s/^([A-Za-z-]+)::/'$1'::/r) ];
	}
	if ($type eq 'fx')
	{
		my $t = exact_float_text();
		return [ $t, pick(ql($t), "${t}::float8", ql($t) . '::float8') ];
	}
	if ($type eq 'date')
	{
		my $p = random_date_parts();
		my $t = date_text($S, $p);
		my @sql = (ql($t), ql($t) . '::date', 'date ' . ql($t));
		if ($p->[0] eq 'date' && $p->[1] > 0)
		{
			push @sql, "make_date($p->[1], $p->[2], $p->[3])";
			push @sql, sprintf("date '%04d-%02d-%02d' + %d", $p->[1], $p->[2], $p->[3], rint(-400, 400)) if $p->[1] > 1 && $p->[1] < 9999;
		}
		return [ $t, pick(@sql) ];
	}
	if ($type eq 'timestamp')
	{
		my ($dp, $tp) = (random_date_parts(), random_time_parts());
		my $t = timestamp_text($S, $dp, $tp);
		my @sql = (ql($t), ql($t) . '::timestamp', 'timestamp ' . ql($t));
		if ($dp->[0] eq 'date' && $dp->[1] > 0 && $tp->[0] < 24)
		{
			push @sql, sprintf('make_timestamp(%d, %d, %d, %d, %d, %s)', @$dp[ 1 .. 3 ], @$tp[ 0 .. 1 ], secs_text($tp->[2], $tp->[3]));
			push @sql, ql($t) . '::timestamp + ' . ql(interval_text($S, random_interval_parts())) . '::interval' if $dp->[1] > 1 && $dp->[1] < 9999;
		}
		return [ $t, pick(@sql) ];
	}
	if ($type eq 'timestamptz')
	{
		my ($dp, $tp) = (random_date_parts(), random_time_parts());
		my $zone = chance(0.4) ? '' : pick(@zones);
		my $t = timestamp_text($S, $dp, $tp, $zone);
		my @sql = (ql($t), ql($t) . '::timestamptz', 'timestamptz ' . ql($t));
		if ($dp->[0] eq 'date' && $dp->[1] > 0 && $tp->[0] < 24)
		{
			push @sql, sprintf('make_timestamptz(%d, %d, %d, %d, %d, %s%s)', @$dp[ 1 .. 3 ], @$tp[ 0 .. 1 ], secs_text($tp->[2], $tp->[3]),
				chance(0.5) ? ', ' . ql(pick('UTC', 'Asia/Kathmandu', 'America/St_Johns', '+03', 'Pacific/Chatham')) : '');
			push @sql, sprintf("'epoch'::timestamptz + %d * interval '1 second'", rint(-2**33, 2**33));
			push @sql, sprintf("to_timestamp(%d.%06d)", rint(-2**31, 2**32), rint(0, 999999));
			push @sql, sprintf("timestamp '%04d-%02d-%02d %s' AT TIME ZONE %s", @$dp[ 1 .. 3 ], time_text($tp), ql(pick(@timezones)))
			  if $dp->[1] < 10000;
		}
		return [ $t, pick(@sql) ];
	}
	if ($type eq 'interval')
	{
		my $p = random_interval_parts();
		my $t = interval_text($S, $p);
		my @sql = (ql($t), ql($t) . '::interval', 'interval ' . ql($t), ql($t) . '::interval * 1.5');
		my ($neg, $h, $mi, $s, $f) = usec_hms($p->[2]);
		my $sign = $neg ? -1 : 1;
		push @sql, sprintf('make_interval(months => %d, days => %d, hours => %d, mins => %d, secs => %s)', $p->[0], $p->[1], $sign * $h, $sign * $mi,
			($neg ? '-' : '') . secs_text($s, $f));
		push @sql, "'1 day -2 hours'::interval", "'-1 day +2 hours'::interval", "'1 mon -30 days'::interval";
		return [ $t, pick(@sql) ];
	}
	if ($type eq 'time')
	{
		my $tp = random_time_parts();
		my $t = chance(0.02) ? 'allballs' : time_text($tp);
		my @sql = (ql($t), ql($t) . '::time', 'time ' . ql($t));
		push @sql, sprintf('make_time(%d, %d, %s)', @$tp[ 0 .. 1 ], secs_text($tp->[2], $tp->[3])) if $tp->[0] < 24;
		return [ $t, pick(@sql) ];
	}
	if ($type eq 'timetz')
	{
		my $tp = random_time_parts();
		my $zone = pick('', '+00', '+05:45', '-03:30', '+13:45', '-09:30', '+05:30', '+14', '-12', '-0330', '+0545');
		my $t = time_text($tp) . $zone;
		return [ $t, pick(ql($t), ql($t) . '::timetz', 'time with time zone ' . ql($t)) ];
	}
	if ($type eq 'money')
	{
		my $t = money_text($S);
		(my $plain = $t) =~ s/[\$, €.]//g;
		$plain =~ s/(\d\d)$/.$1/;
		return [ $t, pick(ql($t), ql($t) . '::money', "($plain)::numeric::money", "($plain)::money") ];
	}
	if ($type eq 'text')
	{
		my $t = random_string(16, \@text_pool);
		return [ $t, pick(ql($t), ql($t) . '::text', ql($t) . " || ''") ];
	}
	if ($type eq 'varchar(12)')
	{
		my $t = random_string(12, \@ascii_pool);
		return [ $t, pick(ql($t), ql($t) . '::varchar') ];
	}
	if ($type eq 'char(6)')
	{
		my $t = random_string(6, \@ascii_pool);
		$t .= ' ' x rint(0, 6 - length($t)) if chance(0.3);
		return [ $t, pick(ql($t), ql($t) . '::bpchar', ql($t) . '::char(6)') ];
	}
	if ($type eq 'bytea')
	{
		my $bytes = random_bytes();
		my $t = bytea_text($bytes);
		my $hex = join('', map { sprintf('%02x', $_) } @$bytes);
		return [ $t, pick(ql($t), ql($t) . '::bytea', "decode('$hex', 'hex')", "'\\x$hex'::bytea") ];
	}
	if ($type eq 'bool')
	{
		my $t = pick('t', 'f', 'true', 'false', 'yes', 'no', 'on', 'off', '1', '0');
		return [ $t, pick(ql($t), ql($t) . '::bool', $t =~ /^(true|false)$/ ? $t : ql($t)) ];
	}
	if ($type eq 'uuid')
	{
		my $t = uuid_text();
		return [ $t, pick(ql($t), ql($t) . '::uuid') ];
	}
	if ($type eq 'int4[]')
	{
		my $t = int_array_text();
		$t =~ s/NULL/0/g if $S->{array_nulls} eq 'off';
		my @sql = (ql($t), ql($t) . '::int4[]');
		push @sql, 'ARRAY[' . join(', ', map { rint(-50, 50) } 1 .. rint(1, 4)) . ']' if chance(0.5);
		return [ $t, pick(@sql) ];
	}
	if ($type eq 'text[]')
	{
		my $t = text_array_text();
		my @sql = (ql($t), ql($t) . '::text[]', "ARRAY['x', NULL, 'y z']");
		return [ $t, pick(@sql) ];
	}
	if ($type eq 'jsonb')
	{
		my $t = json_text();
		return [ $t, pick(ql($t), ql($t) . '::jsonb', "jsonb_build_object('a', " . rint(-9, 9) . ", 'f', 0.1::float8 + 0.2::float8)") ];
	}
	if ($type eq 'mood')
	{
		my $t = pick('sad', 'ok', 'happy');
		return [ $t, pick(ql($t), ql($t) . '::mood') ];
	}
	if ($type eq 'inet')
	{
		my $t = inet_text();
		return [ $t, pick(ql($t), ql($t) . '::inet') ];
	}
	if ($type eq 'pairt')
	{
		my $a = chance(0.1) ? '' : rint(-99, 99);
		my $f = float8_text();
		my $m = money_text($S);
		my $t = "($a,$f,\"$m\")";
		return [ $t, pick(ql($t), ql($t) . '::pairt', 'ROW(' . ($a eq '' ? 'NULL' : $a) . ', 0.1::float8 + 0.2::float8, ' . ql($m) . ')::pairt') ];
	}
	die "no generator for $type";
}

my @main_cols = (
	[ 'i8', 'int8' ], [ 'n', 'numeric' ], [ 'n2', 'numeric(12,2)' ], [ 'n5', 'numeric(20,5)' ], [ 'f4', 'real' ],
	[ 'f8', 'float8' ], [ 'fx', 'fx' ], [ 'd', 'date' ], [ 'ts', 'timestamp' ], [ 'tz', 'timestamptz' ],
	[ 'iv', 'interval' ], [ 'tm', 'time' ], [ 'ttz', 'timetz' ], [ 'm', 'money' ], [ 't', 'text' ],
	[ 'vc', 'varchar(12)' ], [ 'ch', 'char(6)' ], [ 'b', 'bytea' ], [ 'bo', 'bool' ], [ 'u', 'uuid' ],
	[ 'ia', 'int4[]' ], [ 'ta', 'text[]' ], [ 'j', 'jsonb' ], [ 'e', 'mood' ], [ 'ip', 'inet' ]);

sub family_columns
{
	my ($fam) = @_;
	my @cols = @main_cols;
	push @cols, [ 'pt', 'pairt' ] if $fam->{has_pt};
	return @cols;
}

# COPY text and CSV forms of a value.
sub copy_text
{
	my ($v) = @_;
	return '\\N' unless defined $v;
	$v =~ s/\\/\\\\/g;
	$v =~ s/\t/\\t/g;
	$v =~ s/\n/\\n/g;
	$v =~ s/\r/\\r/g;
	return $v;
}

sub copy_csv
{
	my ($v) = @_;
	return '' unless defined $v;
	return $v if $v ne '' && $v !~ /[",\n\r\\ ]/ && chance(0.5);
	$v =~ s/"/""/g;
	return "\"$v\"";
}


# ---------------------------------------------------------------------------
# Conditions on each column: [SQL, whether the nodes can evaluate it (an
# UPDATE or DELETE with a condition they cannot is refused by design)].

sub lit { my ($type, $S) = @_; my $v; $v = value($type, $S) until defined $v && defined $v->[0]; return $v; }
sub lit_sql { my ($type, $S, $cast) = @_; my $v = lit($type, $S); return ql($v->[0]) . "::$cast"; }

sub cond_for
{
	my ($col, $type, $S) = @_;
	my $l = sub { lit_sql($_[0] // $type, $S, $_[1] // ($_[0] // $type)) };
	my %sqltype = (fx => 'float8');
	if ($type !~ /^(pairt|bool|jsonb|int4\[\]|text\[\])$/ && chance(0.15))
	{
		# a value the nodes get as a parameter (an initplan's result), or an IN list: an array literal
		my $t = $sqltype{$type} // $type;
		return pick([ "$col = (SELECT " . $l->($type, $t) . ')', 1 ], [ "$col > (SELECT " . $l->($type, $t) . ')', 1 ],
			[ "$col IN (" . join(', ', map { $l->($type, $t) } 1 .. rint(2, 4)) . ')', 1 ],
			[ "$col <> ALL (ARRAY[" . join(', ', map { $l->($type, $t) } 1 .. rint(1, 3)) . '])', 1 ]);
	}
	if ($type eq 'int8')
	{
		my $v = rint(-100000, 100000);
		return pick([ "$col > $v", 1 ], [ "$col <= $v", 1 ], [ "$col IS NULL", 1 ], [ "$col % 3 = 0", 1 ],
 [ "$col BETWEEN $v AND " . ($v + 50000), 1 ]);
	}
	if ($type =~ /^numeric/)
	{
		my $v = numeric_text(3, 3);
		return pick([ "$col = 1.50", 1 ], [ "$col > $v", 1 ], [ "$col BETWEEN -$v AND $v" =~ s/--/-/r, 1 ], [ "$col IS NULL", 1 ],
			[ "$col = 'NaN'", 1 ], [ "trim_scale($col) = 1.5", 1 ], [ "${col}::text = '1.50'", 1 ], [ "round($col, 1) > $v", 1 ],
			[ "$col = " . $l->(), 1 ]);
	}
	if ($type eq 'real')
	{
		my $v = float4_text();
		return pick([ "$col = 3.1415927::real", 1 ], [ "$col > " . ql($v) . '::real', 1 ], [ "$col < 0.1", 1 ], [ "$col = 'NaN'", 1 ],
			[ "${col}::text = (3.1415927::real)::text", 0 ], [ "${col}::text = (" . ql($v) . "::real)::text", 0 ], [ "$col IS NULL", 1 ],
			[ "${col}::float8 > 0.3", 1 ], [ "$col = 0.1::real * 3", 1 ]);
	}
	if ($type eq 'float8')
	{
		my $v = float8_text();
		return pick([ "$col = 0.1::float8 + 0.2::float8", 1 ], [ "$col > " . ql($v) . '::float8', 1 ],
			[ "${col}::text = (0.1::float8 + 0.2::float8)::text", 0 ], [ "${col}::text = " . ql($v), 0 ], [ "${col}::varchar LIKE '0.3%'", 0 ],
			[ "$col = 'Infinity'", 1 ], [ "round(${col}::numeric, 3) = 0.3", 1 ], [ "$col BETWEEN 0.1 AND 0.3", 1 ],
			[ "$col IS NOT NULL", 1 ], [ "${col}::numeric > 0", 1 ], [ "$col = 1.0::float8 / 3", 1 ]);
	}
	if ($type eq 'fx')
	{
		return pick([ "$col > " . exact_float_text(), 1 ], [ "$col < 0", 1 ], [ "$col IS NULL", 1 ]);
	}
	if ($type eq 'date')
	{
		return pick([ "$col = " . $l->(), 1 ], [ "$col < " . $l->(), 1 ], [ "$col BETWEEN " . $l->() . ' AND ' . $l->(), 1 ],
			[ "${col}::text = (" . $l->() . ")::text", 0 ], [ "${col}::text LIKE '%20%'", 0 ], [ "extract(year from $col) = 2024", 1 ],
			[ "$col = 'infinity'", 1 ], [ "$col IS NULL", 1 ], [ "$col > make_date(2000, 1, 1)", 1 ], [ "$col + 30 > " . $l->(), 1 ],
			[ "to_char($col, 'YYYY-MM') = '2024-02'", 0 ]);
	}
	if ($type eq 'timestamp')
	{
		return pick([ "$col > " . $l->(), 1 ], [ "${col}::date = " . $l->('date'), 1 ], [ "date_trunc('month', $col) = " . $l->(), 1 ],
			[ "extract(hour from $col) = 10", 1 ], [ "${col}::text LIKE '%20%'", 0 ], [ "$col BETWEEN " . $l->() . ' AND ' . $l->(), 1 ],
			[ "$col = 'infinity'", 1 ], [ "$col IS NULL", 1 ]);
	}
	if ($type eq 'timestamptz')
	{
		return pick([ "$col > " . $l->(), 1 ], [ "${col}::date = " . $l->('date'), 0 ], [ "$col AT TIME ZONE 'UTC' > " . $l->('timestamp'), 1 ],
			[ "${col}::text LIKE '%:30%'", 0 ], [ "extract(epoch from $col) > " . rint(-2**31, 2**32), 0 ],
			[ "$col BETWEEN " . $l->() . ' AND ' . $l->(), 1 ], [ "$col = " . $l->(), 1 ], [ "$col IS NULL", 1 ]);
	}
	if ($type eq 'interval')
	{
		return pick([ "$col > " . $l->(), 1 ], [ "$col = " . $l->(), 1 ], [ "${col}::text = (" . $l->() . ")::text", 0 ],
			[ "justify_interval($col) > " . $l->(), 1 ], [ "extract(epoch from $col) > " . rint(-200000, 200000), 1 ],
			[ "$col IS NULL", 1 ], [ "$col < '1 day -2 hours'::interval", 1 ], [ "${col}::text LIKE '%-%'", 0 ]);
	}
	if ($type eq 'time' || $type eq 'timetz')
	{
		return pick([ "$col > " . $l->(), 1 ], [ "$col BETWEEN " . $l->() . ' AND ' . $l->(), 1 ], [ "$col = " . $l->(), 1 ],
			[ "$col IS NULL", 1 ]);
	}
	if ($type eq 'money')
	{
		return pick([ "$col > " . $l->(), 1 ], [ "$col = " . $l->(), 1 ], [ "${col}::text = (" . $l->() . ")::text", 0 ],
			[ "$col < '0'::money", 1 ], [ "$col * 2 > 100::numeric::money", 1 ]);
	}
	if ($type eq 'text')
	{
		return pick([ "$col = " . $l->(), 1 ], [ "$col LIKE 'a%'", 1 ], [ "$col > 'm'", 1 ], [ "length($col) > 5", 1 ],
			[ "$col ~ '^[a-z]'", 1 ], [ "upper($col) LIKE 'A%'", 1 ], [ "strpos($col, 'a') > 0", 1 ], [ "$col IS NULL", 1 ],
			[ "$col = ''", 1 ], [ "$col COLLATE \"C\" > 'M'", 0 ]);
	}
	if ($type eq 'varchar(12)')
	{
		return pick([ "$col = " . $l->(), 1 ], [ "$col LIKE 'a%'", 1 ], [ "$col > 'k'", 1 ], [ "length($col) = 3", 1 ]);
	}
	if ($type eq 'char(6)')
	{
		return pick([ "$col = " . $l->(), 1 ], [ "$col = 'ab'", 1 ], [ "${col}::text = 'ab'", 1 ], [ "length($col) < 3", 1 ],
			[ "octet_length($col) = 6", 1 ], [ "$col LIKE 'a%'", 1 ], [ "$col > 'M'", 1 ]);
	}
	if ($type eq 'bytea')
	{
		return pick([ "$col = " . $l->(), 1 ], [ "length($col) > 2", 1 ], [ "encode($col, 'hex') LIKE '00%'", 1 ],
			[ "${col}::text = (" . $l->() . ")::text", 0 ], [ "$col IS NULL", 1 ], [ "position('\\x00'::bytea in $col) > 0", 1 ]);
	}
	if ($type eq 'bool')
	{
		return pick([ $col, 1 ], [ "NOT $col", 1 ], [ "$col IS NULL", 1 ], [ "$col IS NOT TRUE", 1 ], [ "$col = true", 1 ]);
	}
	if ($type eq 'uuid')
	{
		return pick([ "$col = " . $l->(), 1 ], [ "$col > " . $l->(), 1 ], [ "${col}::text LIKE 'a%'", 1 ]);
	}
	if ($type eq 'int4[]')
	{
		return pick([ "$col @> ARRAY[1]", 1 ], [ "$col = " . $l->(), 1 ], [ "array_length($col, 1) > 1", 1 ], [ "$col\[1] > 2", 0 ],
			[ "cardinality($col) = 0", 1 ], [ "${col}::text = '{1,2}'", 0 ], [ rint(-5, 5) . " = ANY ($col)", 1 ]);
	}
	if ($type eq 'text[]')
	{
		return pick([ "$col && ARRAY['a']", 1 ], [ "'x' = ANY ($col)", 1 ], [ "array_length($col, 1) = 2", 1 ], [ "$col = '{}'", 1 ]);
	}
	if ($type eq 'jsonb')
	{
		return pick([ qq{$col @> '{"a": 1}'}, 1 ], [ "$col ? 'a'", 1 ], [ "$col->>'a' = '1'", 1 ], [ "$col->'f' = '0.30000000000000004'::jsonb", 1 ],
			[ "jsonb_typeof($col) = 'object'", 1 ], [ "$col = " . $l->(), 1 ], [ "$col->>'f' = '0.30000000000000004'", 1 ],
			[ "$col->'b'->1 = '2.5'::jsonb", 1 ]);
	}
	if ($type eq 'mood')
	{
		return pick([ "$col = 'ok'", 1 ], [ "$col > 'sad'", 1 ], [ "$col IN ('ok', 'happy')", 1 ], [ "${col}::text = 'ok'", 0 ]);
	}
	if ($type eq 'inet')
	{
		return pick([ "$col << '10.0.0.0/8'", 1 ], [ "family($col) = 6", 1 ], [ "masklen($col) < 32", 1 ], [ "$col = " . $l->(), 1 ],
			[ "$col > '100.0.0.0'", 1 ]);
	}
	if ($type eq 'pairt')
	{
		return pick([ "($col).a > 3", 0 ], [ "$col IS NULL", 1 ], [ "($col).f::text = (0.1::float8 + 0.2::float8)::text", 0 ]);
	}
	die "no condition for $type";
}

# A WHERE clause: one to three conditions; only ones the nodes evaluate if asked.
sub where_clause
{
	my ($fam, $S, $shippable_only) = @_;
	my @cols = family_columns($fam);
	my @conds;
	for (1 .. wpick([ 5, 1 ], [ 3, 2 ], [ 1, 3 ]))
	{
		my $c;
		for (1 .. 20)
		{
			my $col = pick(@cols);
			$c = cond_for($col->[0], $col->[1], $S);
			last if !$shippable_only || $c->[1];
		}
		push @conds, $c->[1] || !$shippable_only ? $c->[0] : 'true';
	}
	my $sql = shift @conds;
	for my $c (@conds)
	{
		$sql = chance(0.7) ? "$sql AND $c" : chance(0.7) ? "($sql OR $c)" : "$sql AND NOT ($c)";
	}
	return $sql;
}

# ---------------------------------------------------------------------------
# Keys.

my $next_id = 100000;
my %known_ids;		# family => [ids in its twin]
my %dirty;

sub known_ids
{
	my ($fam) = @_;
	if ($dirty{ $fam->{name} } || !$known_ids{ $fam->{name} })
	{
		$known_ids{ $fam->{name} } = [ ps_internal("SELECT id FROM $fam->{local} ORDER BY id") ];
		$dirty{ $fam->{name} } = 0;
	}
	return @{ $known_ids{ $fam->{name} } };
}

sub some_id
{
	my ($fam) = @_;
	my @ids = known_ids($fam);
	return chance(0.9) && @ids ? pick(@ids) : rint(1, $next_id);
}

sub key_condition
{
	my ($fam) = @_;
	my @k = map { some_id($fam) } 1 .. rint(1, 6);
	return wpick([ 4, "id = $k[0]" ], [ 3, 'id IN (' . join(', ', @k) . ')' ], [ 2, 'id = ANY (ARRAY[' . join(', ', @k) . '])' ],
		[ 1, "id = ANY ('{" . join(',', @k) . "}'::int4[])" ], [ 1, "id = ANY ('{" . join(',', @k) . "}')" ],
		[ 1, "id = $k[0] + 0" ], [ 1, "id IN ($k[0], $k[0], " . ($k[-1]) . ')' ], [ 1, "id = $k[0]::int8" ],
		[ 1, 'id = ANY (ARRAY[' . join(', ', @k) . ']::int8[])' ],
		[ 1, "id = '$k[0]'" ], [ 1, "id = $k[0].0" ], [ 1, 'id IN (' . join(', ', map { "'$_'" } @k) . ')' ]);
}

# ---------------------------------------------------------------------------
# Statement units: {cat, fam, stmts => [{sql, ordered, copy}], txn}.  In the
# SQL, {t} is the table, {p} a prepared statement's or cursor's name.

sub stmt { my ($sql, %o) = @_; return { sql => $sql, %o }; }

sub row_values
{
	my ($fam, $S, $id, $cols) = @_;
	my @v = map { value($_->[1], $S)->[1] } @$cols;
	return '(' . join(', ', $id, @v) . ')';
}

sub random_column_subset
{
	my ($fam) = @_;
	my @cols = family_columns($fam);
	return @cols if chance(0.6);
	return grep { chance(0.5) } @cols;
}

sub returning_clause
{
	return '' unless chance(0.25);
	return pick(' RETURNING *', ' RETURNING id, f8, d::text, iv, tz', ' RETURNING id, f8::text, f4::text, m, b',
		' RETURNING id, ts, ttz, ia, ta, j, e, ip, u, n, n2, n5');
}

sub gen_insert
{
	my ($fam, $S, $nrows) = @_;
	my @cols = random_column_subset($fam);
	my $collist = join(', ', 'id', map { $_->[0] } @cols);
	my @rows;
	my $dup = $nrows > 1 && chance(0.04);
	for my $i (1 .. $nrows)
	{
		my $id = $next_id++;
		$id = some_id($fam) if ($nrows == 1 && chance(0.03)) || ($dup && $i == $nrows);
		push @rows, row_values($fam, $S, $id, \@cols);
	}
	my $ret = returning_clause();
	return { cat => 'insert', stmts => [ stmt("INSERT INTO {t} ($collist) VALUES " . join(",\n ", @rows) . $ret) ], writes => 1 };
}

sub gen_insert_select
{
	my ($fam, $S) = @_;
	my $base = $next_id;
	$next_id += 200;
	if (chance(0.5))
	{
		my $n = rint(1, 60);
		my $d = lit('date', $S);
		my $ts = lit('timestamp', $S);
		my $tz = lit('timestamptz', $S);
		my $iv = lit('interval', $S);
		my $sql = "INSERT INTO {t} (id, i8, n, n2, f4, f8, fx, d, ts, tz, iv, tm, m, t, vc, ch, b, bo, ia, ta, j, e, ip) "
		  . "SELECT $base + g, g * 1000003, g * 1.5, g / 7.0, g * 0.1::real, g * (0.1::float8 + 0.2::float8), g / 8.0, "
		  . ql($d->[0]) . "::date + g, " . ql($ts->[0]) . "::timestamp + g * interval '1 hour 1 second', "
		  . ql($tz->[0]) . "::timestamptz + g * " . ql(interval_text($S, random_interval_parts())) . "::interval, "
		  . ql($iv->[0]) . "::interval * g, time '00:00' + g * interval '7 minutes', (g * 1.25)::numeric::money, "
		  . "'row ' || g || E'\\t' || g, 'v' || g, 'c' || g % 10, decode(lpad(to_hex(g), 4, '0'), 'hex'), g % 2 = 0, ARRAY[g, -g], "
		  . "ARRAY['a' || g, NULL], jsonb_build_object('a', g, 'f', g * 0.1::float8), (ARRAY['sad', 'ok', 'happy']::mood[])[1 + g % 3], "
		  . "('10.0.0.' || g % 250)::inet FROM generate_series(1, $n) g";
		return { cat => 'insert_select', stmts => [ stmt($sql . returning_clause()) ], writes => 1 };
	}
	my @cols = map { $_->[0] } family_columns($fam);
	my $sql = "INSERT INTO {t} (id, " . join(', ', @cols) . ") SELECT $base + row_number() OVER (ORDER BY id), "
	  . join(', ', @cols) . " FROM {t} WHERE " . where_clause($fam, $S, 0) . " ORDER BY id LIMIT " . rint(1, 40);
	return { cat => 'insert_select', stmts => [ stmt($sql) ], writes => 1 };
}

sub gen_copy
{
	my ($fam, $S) = @_;
	my @cols = random_column_subset($fam);
	my $csv = chance(0.3);
	my @lines;
	for (1 .. wpick([ 3, rint(1, 5) ], [ 3, rint(6, 20) ], [ 2, rint(21, 60) ]))
	{
		my $id = chance(0.02) ? some_id($fam) : $next_id++;
		my @vals = ($id, map { value($_->[1], $S)->[0] } @cols);
		push @lines, $csv ? join(',', map { copy_csv($_) } @vals) : join("\t", map { copy_text($_) } @vals);
	}
	my $collist = join(', ', 'id', map { $_->[0] } @cols);
	return {
		cat => 'copy',
		stmts => [ stmt("COPY {t} ($collist) FROM STDIN" . ($csv ? ' WITH (FORMAT csv)' : ''), copy => \@lines) ],
		writes => 1
	};
}

# SET expressions the nodes can evaluate, per column.
sub set_expression
{
	my ($col, $type, $S) = @_;
	return value($type, $S)->[1] if chance(0.35);
	return '(SELECT (' . value($type, $S)->[1] . ')::' . ($type eq 'fx' ? 'float8' : $type) . ')' if chance(0.08);
	my %exprs = (
		int8 => [ "$col + 1", "$col * 2", "abs($col)", "-$col" ],
		numeric => [ "$col * 2", "$col + 1.5", "round($col, 2)", "trunc($col, 1)", "$col / 3" ],
		'numeric(12,2)' => [ "$col + 0.01", "$col * 1.5", "-$col" ],
		'numeric(20,5)' => [ "$col / 3", "$col * 7" ],
		real => [ "$col * 2", "$col + 0.1::real", "-$col" ],
		float8 => [ "$col * 3", "$col + 0.1", "$col / 3", "sqrt(abs($col))", "$col + (0.1::float8 + 0.2::float8)" ],
		fx => [ "$col + 0.5", "$col * 2" ],
		date => [ "$col + 1", "$col - 30", "($col + interval '1 month')::date" ],
		timestamp => [ "$col + interval '1 day 2 hours'", "$col + iv", "date_trunc('hour', $col)" ],
		timestamptz => [ "ts AT TIME ZONE 'Asia/Kathmandu'", "(ts + interval '30 minutes') AT TIME ZONE 'America/St_Johns'" ],
		interval => [ "$col * 2", "$col + interval '1 mon -3 days'", "justify_hours($col)", "-$col", "$col / 3" ],
		time => [ "$col + interval '90 minutes'", "$col - interval '1 second'" ],
		timetz => [ "$col + interval '1 hour'" ],
		money => [ "$col * 2", "$col + 1::numeric::money", "$col / 3", "$col * 1.5::float8" ],
		text => [ "$col || 'x'", "upper($col)", "substr($col, 2)", "replace($col, 'a', E'\\t')", "left($col, 3)" ],
		'varchar(12)' => [ "left($col || 'z', 12)", "lower($col)" ],
		'char(6)' => [ "upper($col)" ],
		bytea => [ "$col || '\\x00ff'::bytea", "substring($col from 2)" ],
		bool => [ "NOT $col", "$col IS NULL" ],
		uuid => [ "'00000000-0000-0000-0000-000000000001'" ],
		'int4[]' => [ "$col || 7", "array_append($col, 1)", "array_remove($col, 1)" ],
		'text[]' => [ "array_append($col, 'z')", "$col || ARRAY['q r']" ],
		jsonb => [ qq{$col || '{"z": 1.50}'::jsonb}, "$col - 'a'" ],
		mood => [ "'happy'" ],
		inet => [ "$col + 1", "set_masklen($col, 16)" ],
		pairt => [ "ROW(1, 0.5, 1.5::numeric::money)::pairt", "ROW(($col).a + 1, ($col).f * 2, ($col).m * 2)::pairt" ],
	);
	return pick(@{ $exprs{$type} });
}

sub gen_update
{
	my ($fam, $S, $by_key) = @_;
	my @cols = family_columns($fam);
	my %seen;
	my @sets;
	for (1 .. wpick([ 5, 1 ], [ 3, 2 ], [ 2, 4 ]))
	{
		my $c = pick(@cols);
		next if $seen{ $c->[0] }++;
		push @sets, "$c->[0] = " . set_expression($c->[0], $c->[1], $S);
	}
	my $where = $by_key ? key_condition($fam) . (chance(0.3) ? ' AND ' . where_clause($fam, $S, 1) : '') : where_clause($fam, $S, 1);
	return {
		cat => $by_key ? 'update_key' : 'update_where',
		stmts => [ stmt("UPDATE {t} SET " . join(', ', @sets) . " WHERE $where" . returning_clause()) ],
		writes => 1
	};
}

sub gen_delete
{
	my ($fam, $S, $by_key) = @_;
	my $where = $by_key ? key_condition($fam) : where_clause($fam, $S, 1) . ' AND id % ' . rint(2, 9) . ' = 0';
	return { cat => $by_key ? 'delete_key' : 'delete_where', stmts => [ stmt("DELETE FROM {t} WHERE $where" . returning_clause()) ], writes => 1 };
}

my @cast_exprs = ('f8::text', 'f4::text', 'd::text', 'ts::text', 'tz::text', 'iv::text', 'm::text', 'b::text', 'ttz::text',
	'tm::text', 'j::text', 'ia::text', 'ta::text', 'n::text', 'ts::date', 'tz::date', 'to_char(ts, \'YYYY-MM-DD HH24:MI:SS.US\')',
	'to_char(tz, \'YYYY-MM-DD HH24:MI:SS TZH:TZM\')', 'f8::numeric', 'f4::float8', 'extract(epoch from tz)', 'tz::timestamp',
	'justify_interval(iv)', 'u::text', 'ip::text', 'e::text', 'ch::text', 'vc || ch', 'bo::text', 'format(\'%s|%s\', f8, iv)',
	'f8 * 1', 'm::numeric', 'iv * 1.5', 'd + 1', 'ts + iv', 'row(f8, d, iv)::text', 'f8::numeric::text',
	"to_jsonb(f8)", "jsonb_build_array(f8, iv, d, tz, m)", 'ARRAY[f8, f4]::text', 'ta::text', 'pg_typeof(f8)', "d || ''", "'x' || f8");

sub select_list
{
	my ($fam) = @_;
	my $r = rand();
	return '*' if $r < 0.3;
	my @cols = map { $_->[0] } family_columns($fam);
	return join(', ', 'id', map { pick(@cast_exprs) } 1 .. rint(1, 6)) if $r < 0.65;
	return join(', ', 'id', grep { chance(0.4) } @cols);
}

# Sort keys and their direction: a unique order ends with id.
sub order_by
{
	my ($fam) = @_;
	my @cols = grep { $_->[1] ne 'pairt' } family_columns($fam);
	my @keys;
	for (1 .. rint(1, 2))
	{
		my $c = pick(@cols);
		my $e = wpick([ 6, $c->[0] ], [ 1, "abs(f8)" ], [ 1, 'length(t)' ], [ 1, 't COLLATE "C"' ], [ 1, '-fx' ], [ 1, 'iv * 2' ]);
		push @keys, $e . pick('', ' DESC', ' NULLS FIRST', ' DESC NULLS LAST', ' ASC');
	}
	return join(', ', @keys, 'id' . pick('', ' DESC'));
}

my @aggregates = ('count(*)', 'count(f8)', 'count(DISTINCT e)', 'sum(i8)', 'sum(n)', 'sum(n2)', 'sum(n5)', 'sum(fx)', 'avg(fx)',
	'avg(n)', 'avg(i8)', 'sum(iv)', 'avg(iv)', 'sum(m)', 'min(i8)', 'max(n2)', 'min(n5)', 'min(f4)', 'max(f4)', 'min(f8)',
	'max(f8)', 'max(fx)', 'min(d)', 'max(d)', 'min(ts)', 'max(tz)', 'min(tz)', 'max(tm)', 'min(ttz)', 'max(m)', 'min(t)',
	'max(vc)', 'min(ch)', 'max(e)', 'min(ip)', 'min(ia)', 'trim_scale(min(n))', 'trim_scale(max(n))',
	'justify_interval(min(iv))', 'justify_interval(max(iv))', 'sum(f8::numeric)', 'sum(f4::numeric)', 'bool_and(bo)',
	"string_agg(d::text, ',' ORDER BY id)", "string_agg(f8::text, ',' ORDER BY id)", 'count(*) FILTER (WHERE bo)',
	"sum(i8) FILTER (WHERE e = 'ok')", 'max(f8) - min(f8)', 'count(*) * 2 + 1', "justify_interval(min(iv) FILTER (WHERE iv > '1 day'))");
my @having = ('count(*) > 1', 'max(d) > %date', 'sum(iv) > %interval', 'min(f8) < 0.3', 'sum(m) > %money', 'max(tz) < %timestamptz',
	'max(f4) = 3.1415927::real', 'min(n) < %numeric', 'sum(m) > (SELECT %money)', "count(*) FILTER (WHERE ts > %timestamp) >= 1");
my @group_keys = ('e', 'bo', 'ch', 'vc', 'd', "date_trunc('month', ts)", 'extract(year from d)', 'i8 % 5', 'n2', 'tm', 'ip',
	'family(ip)', 'length(t)', 'f8', 'j->>\'a\'', 'e, bo', 'ia', 'ttz', 'tz', 'm', 'b');

sub gen_select
{
	my ($fam, $S) = @_;
	my $kind = wpick([ 10, 'key' ], [ 14, 'where' ], [ 6, 'order' ], [ 6, 'agg' ], [ 6, 'group' ], [ 5, 'casts' ],
		[ 2, 'join' ], [ 1, 'distinct' ], [ 2, 'row' ], [ 2, 'count' ]);
	my $where = where_clause($fam, $S, 0);
	if ($kind eq 'key')
	{
		my $extra = chance(0.3) ? " AND $where" : '';
		return { cat => 'select_key', stmts => [ stmt('SELECT ' . select_list($fam) . ' FROM {t} WHERE ' . key_condition($fam) . $extra) ] };
	}
	if ($kind eq 'where')
	{
		return { cat => 'select_where', stmts => [ stmt('SELECT ' . select_list($fam) . " FROM {t} WHERE $where") ] };
	}
	if ($kind eq 'order')
	{
		my $limit = chance(0.8) ? ' LIMIT ' . rint(0, 30) . (chance(0.3) ? ' OFFSET ' . rint(0, 40) : '') : '';
		my $w = chance(0.6) ? " WHERE $where" : '';
		return { cat => 'select_order', stmts => [ stmt('SELECT ' . select_list($fam) . " FROM {t}$w ORDER BY " . order_by($fam) . $limit, ordered => 1) ] };
	}
	if ($kind eq 'agg')
	{
		my $w = chance(0.6) ? " WHERE $where" : '';
		my @a = map { pick(@aggregates) } 1 .. rint(1, 6);
		push @a, pick('count(*) FILTER (WHERE d > %date)', 'sum(m) FILTER (WHERE m > %money)', 'justify_interval(max(iv) FILTER (WHERE iv < %interval))',
			'count(*) FILTER (WHERE f8 = 0.1::float8 + 0.2::float8)', 'sum(fx) FILTER (WHERE tz > %timestamptz)') if chance(0.4);
		my $list = join(', ', @a);
		$list =~ s/%(\w+)/lit_sql($1, $S, $1)/ge;
		return { cat => 'select_agg', stmts => [ stmt("SELECT $list FROM {t}$w") ] };
	}
	if ($kind eq 'group')
	{
		my $g = pick(@group_keys);
		my $w = chance(0.4) ? " WHERE $where" : '';
		my $having = chance(0.4) ? ' HAVING ' . pick(@having) : '';
		$having =~ s/%(\w+)/lit_sql($1, $S, $1)/ge;
		return { cat => 'select_group', stmts => [ stmt("SELECT $g, " . join(', ', map { pick(@aggregates) } 1 .. rint(1, 4)) . " FROM {t}$w GROUP BY $g$having") ] };
	}
	if ($kind eq 'casts')
	{
		my $w = chance(0.5) ? key_condition($fam) : $where;
		return { cat => 'select_casts', stmts => [ stmt('SELECT id, ' . join(', ', map { pick(@cast_exprs) } 1 .. rint(2, 8)) . " FROM {t} WHERE $w") ] };
	}
	if ($kind eq 'join')
	{
		my @k = map { some_id($fam) } 1 .. rint(1, 5);
		return { cat => 'select_key', stmts => [ stmt('SELECT v.k, x.* FROM (VALUES ' . join(', ', map { "($_)" } @k) . ') v(k) JOIN {t} x ON x.id = v.k') ] };
	}
	if ($kind eq 'distinct')
	{
		return { cat => 'select_where', stmts => [ stmt('SELECT DISTINCT ' . pick('e', 'e, bo', 'ch', 'd', 'vc', 'ip') . " FROM {t} WHERE $where") ] };
	}
	if ($kind eq 'row')
	{
		return { cat => 'select_where', stmts => [ stmt("SELECT x::text FROM {t} x WHERE $where") ] };
	}
	return { cat => 'select_where', stmts => [ stmt("SELECT count(*) FROM {t} WHERE $where") ] };
}

# Prepared statements: parameters of many types, executed under changing
# settings, with custom and generic plans.
sub gen_prepared
{
	my ($fam, $S) = @_;
	my @stmts;
	push @stmts, stmt('SET plan_cache_mode = ' . pick('force_generic_plan', 'auto', 'force_custom_plan'), nocompare => 1) if chance(0.5);
	my $kind = rint(0, 5);
	my ($prep, $gen);
	if ($kind == 0)
	{
		$prep = 'PREPARE {p}(int4) AS SELECT * FROM {t} WHERE id = $1';
		$gen = sub { '(' . some_id($fam) . ')' };
	}
	elsif ($kind == 1)
	{
		$prep = 'PREPARE {p}(int4[]) AS SELECT id, f8, d, iv FROM {t} WHERE id = ANY ($1)';
		$gen = sub { "('{" . join(',', map { some_id($fam) } 1 .. rint(1, 4)) . "}')" };
	}
	elsif ($kind == 2)
	{
		my @types = ([ 'date', 'd' ], [ 'float8', 'f8' ], [ 'interval', 'iv' ], [ 'timestamptz', 'tz' ], [ 'numeric', 'n' ], [ 'money', 'm' ],
			[ 'timestamp', 'ts' ], [ 'real', 'f4' ], [ 'bytea', 'b' ], [ 'time', 'tm' ]);
		my $t = pick(@types);
		my $op = pick('>', '<', '=', '<=');
		# equal values of several spellings (1.5 and 1.50, 1 mon and 30 days): the minimum is either
		my $min = $t->[0] eq 'bytea' ? 'max(length(b))' : $t->[0] eq 'numeric' ? 'trim_scale(min(n))'
		  : $t->[0] eq 'interval' ? 'justify_interval(min(iv))' : "min($t->[1])";
		$prep = "PREPARE {p}($t->[0]) AS SELECT count(*), $min, max(id) FROM {t} WHERE $t->[1] $op \$1";
		$gen = sub { '(' . value($t->[0], $_[0])->[1] . ')' };
	}
	elsif ($kind == 5)
	{
		$prep = 'PREPARE {p}(int8, int8, date) AS SELECT id, d, f8, iv FROM {t} WHERE d > $3 ORDER BY f8 DESC, id LIMIT $1 OFFSET $2';
		$gen = sub { '(' . rint(0, 10) . ', ' . rint(0, 5) . ', ' . value('date', $_[0])->[1] . ')' };
	}
	elsif ($kind == 3)
	{
		$prep = 'PREPARE {p}(int4, float8, interval) AS SELECT id, f8 = $2 AS f8_equal, iv = $3 AS iv_equal, f8::text = $2::text AS same_text FROM {t} WHERE id = $1';
		$gen = sub { '(' . some_id($fam) . ', ' . value('float8', $_[0])->[1] . ', ' . value('interval', $_[0])->[1] . ')' };
	}
	else
	{
		$prep = 'PREPARE {p}(date, text) AS SELECT id, d, t FROM {t} WHERE d > $1 OR t = $2 ORDER BY id LIMIT 5';
		$gen = sub { '(' . value('date', $_[0])->[1] . ', ' . value('text', $_[0])->[1] . ')' };
	}
	push @stmts, stmt($prep);
	my $S2 = $S;
	for (1 .. rint(3, 8))
	{
		if (chance(0.3))
		{
			my $plan = $S2->{plan};
			$S2 = random_settings();
			$S2->{plan} = $plan;
			push @stmts, stmt(settings_sql($S2), nocompare => 1, settings => $S2);
		}
		push @stmts, stmt('EXECUTE {p}' . $gen->($S2), ordered => ($kind == 4 || $kind == 5));
	}
	push @stmts, stmt('DEALLOCATE {p}', nocompare => 1);
	return { cat => 'prepared', stmts => \@stmts };
}

sub gen_prepared_write
{
	my ($fam, $S) = @_;
	my @stmts = (stmt('BEGIN'));
	push @stmts, stmt('PREPARE {p}(int4, float8, date, interval, text, timestamptz, numeric, money) AS '
		  . 'INSERT INTO {t} (id, f8, d, iv, t, tz, n, m) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)');
	my @ids;
	for (1 .. rint(1, 6))
	{
		my $id = $next_id++;
		push @ids, $id;
		push @stmts, stmt("EXECUTE {p}($id, " . join(', ', map { value($_, $S)->[1] } qw(float8 date interval text timestamptz numeric money)) . ')');
	}
	push @stmts, stmt('PREPARE {p}u(int4, float8, interval, date) AS UPDATE {t} SET f8 = $2, iv = iv + $3, d = $4 WHERE id = $1');
	my $S2 = $S;
	for (1 .. rint(1, 5))
	{
		if (chance(0.3))
		{
			$S2 = random_settings();
			push @stmts, stmt(settings_sql($S2), nocompare => 1, settings => $S2);
		}
		push @stmts, stmt('EXECUTE {p}u(' . (chance(0.5) ? pick(@ids) : some_id($fam)) . ', '
			  . join(', ', map { lit($_, $S2)->[1] } qw(float8 interval date)) . ')');
	}
	push @stmts, stmt('SELECT id, f8, d, iv, t, tz, n, m FROM {t} WHERE id IN (' . join(', ', @ids) . ')');
	push @stmts, stmt('DEALLOCATE {p}', nocompare => 1), stmt('DEALLOCATE {p}u', nocompare => 1);
	push @stmts, stmt(chance(0.8) ? 'COMMIT' : 'ROLLBACK');
	return { cat => 'prepared', stmts => \@stmts, writes => 1, txn => 1 };
}

sub gen_transaction
{
	my ($fam, $S) = @_;
	my @stmts = (stmt('BEGIN'));
	for (1 .. rint(1, 4))
	{
		my $u = wpick([ 3, sub { gen_insert($fam, $S, rint(1, 20)) } ], [ 2, sub { gen_update($fam, $S, 1) } ],
			[ 1, sub { gen_update($fam, $S, 0) } ], [ 1, sub { gen_delete($fam, $S, 1) } ], [ 2, sub { gen_select($fam, $S) } ],
			[ 1, sub { gen_copy($fam, $S) } ], [ 1, sub { gen_upsert($fam, $S) } ])->();
		push @stmts, @{ $u->{stmts} };
		if (chance(0.2))
		{
			my $S2 = random_settings();
			push @stmts, stmt(settings_sql($S2), nocompare => 1, settings => $S2);
			$S = $S2;
		}
	}
	push @stmts, stmt('SELECT count(*), sum(i8), max(id) FROM {t}');
	push @stmts, stmt(chance(0.75) ? 'COMMIT' : 'ROLLBACK');
	return { cat => 'transaction', stmts => \@stmts, writes => 1, txn => 1 };
}

sub gen_cursor
{
	my ($fam, $S) = @_;
	# plain columns only: they are printed as each FETCH runs, under the settings
	# of that moment, whatever the plan (a Sort would compute expressions early)
	my @cols = map { $_->[0] } family_columns($fam);
	my $list = chance(0.3) ? '*' : join(', ', 'id', grep { chance(0.4) } @cols);
	my @stmts = (stmt('BEGIN'),
		stmt("DECLARE {p} CURSOR FOR SELECT $list FROM {t}" . (chance(0.5) ? ' WHERE ' . where_clause($fam, $S, 1) : '') . ' ORDER BY id'));
	for (1 .. rint(2, 5))
	{
		if (chance(0.4))
		{
			my $S2 = random_settings();
			push @stmts, stmt(settings_sql($S2), nocompare => 1, settings => $S2);
		}
		push @stmts, stmt('FETCH ' . rint(1, 20) . ' FROM {p}', ordered => 1);
	}
	push @stmts, stmt('CLOSE {p}'), stmt('COMMIT');
	return { cat => 'cursor', stmts => \@stmts, txn => 1 };
}

# Router statements: every table fixed to one key, joined with a table of
# another family ({pair}, {text}, {single}, {map}: the same side's table),
# in joins, aggregates, window functions, CTEs, correlated subqueries and
# UNION; prepared, generic plans too; after a write in a transaction.  Each
# is run whole on one node holding those rows, where one does.  Writes that
# read another table (UPDATE ... FROM, DELETE ... USING, EXISTS) run whole on
# every replica of the key where the other table's rows are there too.
my @router_partners = ('pair', 'text', 'single', 'map');
sub gen_router
{
	my ($fam, $S) = @_;
	my $k = some_id($fam);
	my $x = '{' . pick(@router_partners) . '}';
	my $kind = rint(0, 19);
	my $ordered = 0;
	my $date = lit_sql('date', $S, 'date');
	my $cols = sub { my ($alias) = @_; join(', ', map { "$alias.$_" } grep { chance(0.5) } qw(i8 n n2 f8 fx d ts tz iv t vc e ip ia)) || "$alias.t" };
	my $key = wpick([ 4, "a.id = $k" ], [ 1, "a.id = ${k}::int8" ], [ 1, "$k = a.id" ], [ 1, "a.id IN ($k)" ]);
	my $sql;
	if ($kind == 0)
	{
		$sql = "SELECT a.id, " . $cols->('a') . ', ' . $cols->('b') . " FROM {t} a JOIN $x b ON b.id = a.id WHERE $key";
	}
	elsif ($kind == 1)
	{
		$sql = "SELECT count(*), count(b.id), sum(a.i8), max(b.d), min(a.n2), sum(b.iv) FROM {t} a LEFT JOIN $x b ON b.id = a.id WHERE $key";
	}
	elsif ($kind == 2)
	{
		$sql = "SELECT id, rank() OVER (ORDER BY f8 NULLS LAST, id), count(*) OVER (), sum(n) OVER (ORDER BY id) FROM {t} a WHERE $key";
	}
	elsif ($kind == 3)
	{
		$sql = "WITH x AS (SELECT * FROM $x WHERE id = $k) SELECT a.id, x.n, x.iv, a.d FROM {t} a, x WHERE $key";
	}
	elsif ($kind == 4)
	{
		# a literal in the session's DateStyle, or the coordinator's own date (sent as a value)
		my $when = pick($date, 'current_date - 9000', "(now() - interval '20 years')::date");
		$sql = "SELECT a.id, a.d FROM {t} a WHERE $key AND " . pick('NOT ', '') . "EXISTS (SELECT 1 FROM $x b WHERE b.id = a.id AND b.d > $when)";
	}
	elsif ($kind == 5)
	{
		$sql = "SELECT a.id, (SELECT b.t FROM $x b WHERE b.id = a.id), (SELECT count(*) FROM $x c WHERE c.id = a.id AND c.f8 > 0) FROM {t} a WHERE $key";
	}
	elsif ($kind == 6)
	{
		my $k2 = chance(0.5) ? $k : some_id($fam);
		$sql = "SELECT id, t, d FROM {t} WHERE id = $k UNION ALL SELECT id, t, d FROM $x WHERE id = $k2";
	}
	elsif ($kind == 7)
	{
		$sql = "SELECT id, a.iv, b.iv, CASE WHEN a.n > b.n THEN 'a' ELSE coalesce(b.t, 'none') END FROM {t} a JOIN $x b USING (id) WHERE id = $k";
	}
	elsif ($kind >= 18)
	{
		# every key, grouped by another column or one total, or DISTINCT: each node
		# aggregates (or makes distinct) the rows of its keys, the groups combined here
		my $join = pick('JOIN', 'LEFT JOIN');
		my $w = chance(0.5) ? ' WHERE ' . pick("a.d > $date", 'a.n IS NOT NULL', 'a.i8 % 3 = 0', 'b.n2 > 0') : '';
		my @groups = @{ pick([], ['a.e'], ['b.bo'], ['extract(year from a.d)'], ['a.i8 % 5'], ['b.e', 'a.bo'], ['a.vc']) };
		if ($kind == 18)
		{
			my @aggs = grep { chance(0.5) } ('count(b.id)', 'sum(b.n)', 'sum(a.i8)', 'min(b.d)', 'max(a.n2)', 'avg(a.i8)',
				'avg(b.n)', 'max(a.t)', 'min(b.iv)', 'sum(a.n) FILTER (WHERE b.f8 > 0.5)', 'count(*) * 2 + 1');
			$sql = 'SELECT ' . join(', ', @groups, 'count(*)', @aggs) . " FROM {t} a $join $x b ON b.id = a.id$w"
			  . (@groups ? ' GROUP BY ' . join(', ', @groups) : '') . (chance(0.3) ? ' HAVING count(*) > 1' : '');
		}
		else
		{
			@groups = ('a.e') unless @groups;
			$sql = 'SELECT DISTINCT ' . join(', ', @groups) . " FROM {t} a $join $x b ON b.id = a.id$w";
		}
		# sorted by every group (a total order), a LIMIT on top
		if (@groups && chance(0.5))
		{
			$sql .= ' ORDER BY ' . join(', ', map { "$_ NULLS FIRST" } 1 .. scalar(@groups)) . pick('', ' LIMIT ' . rint(1, 5));
			$ordered = 1;
		}
	}
	elsif ($kind >= 15)
	{
		# every key: tied to the first table by the key, the whole statement on every node (same ring only)
		my $w = chance(0.5) ? ' WHERE ' . pick("a.d > $date", 'a.n IS NOT NULL', "b.t <> 'x'", 'a.i8 % 3 = 0') : '';
		$sql = $kind == 15 ? "SELECT a.id, a.f8, b.d, b.n FROM {t} a " . pick('JOIN', 'LEFT JOIN') . " $x b ON b.id = a.id$w"
		  : $kind == 16 ? pick("SELECT a.id, count(*), sum(b.n), max(b.d) FROM {t} a JOIN $x b ON b.id = a.id$w GROUP BY a.id",
			  # the nullable side's key: NULL for the rows without a match, one group (not one per node)
			  "SELECT b.id, count(*), sum(a.n) FROM {t} a LEFT JOIN $x b ON b.id = a.id AND b.f8 > 0.5$w GROUP BY b.id")
		  : "SELECT a.id, a.t FROM {t} a WHERE " . pick('NOT ', '') . "EXISTS (SELECT 1 FROM $x b WHERE b.id = a.id AND b.f8 > 0)";
		# ORDER BY (a total order) and LIMIT/OFFSET: each node its first rows, sorted and cut again here;
		# by a column not returned: the usual plan
		if (chance(0.5))
		{
			my $order = $kind == 15 ? pick('a.f8 DESC NULLS LAST, a.id', 'b.n NULLS FIRST, a.id DESC', 'a.id', 'a.n, a.id')
			  : $kind == 16 ? ($sql =~ /GROUP BY b\.id/ ? '2 DESC, 1 NULLS FIRST' : pick('2 DESC, a.id', '3 NULLS LAST, 1', 'a.id DESC'))
			  : 'a.id';
			$sql .= " ORDER BY $order" . pick('', ' LIMIT ' . rint(1, 30), ' LIMIT ' . rint(1, 30) . ' OFFSET ' . rint(0, 20),
				' OFFSET ' . rint(1, 40));
			$ordered = 1;
		}
	}
	elsif ($kind == 13)
	{
		# the reference table: joined on the node holding the key's rows
		$sql = "SELECT a.id, a.n, r.v, r.n, r.d FROM {t} a " . pick('JOIN', 'LEFT JOIN') . " {ref} r ON r.id = a.id % 60 + 1 WHERE $key"
		  . pick('', ' AND r.d > ' . $date, " AND EXISTS (SELECT 1 FROM {ref} q WHERE q.id = r.id AND q.n > 10)");
	}
	elsif ($kind == 14)
	{
		# a write of the reference table (every copy), then a join with it
		my $r = rint(1, 55);
		return { cat => 'router', writes => 1, txn => 1, stmts => [ stmt('BEGIN'),
			stmt(pick("UPDATE {ref} SET n = n + 1, d = d + 1 WHERE id = $r", "UPDATE {ref} SET v = v || 'x' WHERE id IN ($r, " . ($r + 7) . ')')),
			stmt("SELECT a.id, r.v, r.n FROM {t} a JOIN {ref} r ON r.id = $r WHERE $key"),
			stmt(chance(0.7) ? 'COMMIT' : 'ROLLBACK') ] };
	}
	elsif ($kind >= 10)
	{
		# writes that read another table: refused (0A000) where that table's rows are not on the same nodes
		my $v = lit_sql('float8', $S, 'float8');
		$sql = $kind == 10 ? "UPDATE {t} a SET f8 = b.f8, n = a.n + 1, iv = coalesce(b.iv, a.iv) FROM $x b WHERE $key AND b.id = a.id"
		  : $kind == 11 ? "DELETE FROM {t} a USING $x b WHERE $key AND b.id = a.id AND b.d > $date"
		  : "UPDATE {t} a SET f8 = $v WHERE $key AND " . pick('NOT ', '') . "EXISTS (SELECT 1 FROM $x b WHERE b.id = a.id AND b.f8 > 0)";
		$sql .= ' RETURNING a.id, a.f8, a.n' if chance(0.3);
		return { cat => 'router', writes => 1, stmts => [ stmt($sql) ] };
	}
	elsif ($kind == 8)
	{
		my @stmts = (stmt('SET plan_cache_mode = ' . pick('force_generic_plan', 'auto', 'force_custom_plan'), nocompare => 1));
		push @stmts, stmt("PREPARE {p}(int4) AS SELECT a.id, a.f8, b.d, b.n FROM {t} a LEFT JOIN $x b ON b.id = a.id WHERE a.id = \$1");
		push @stmts, stmt('EXECUTE {p}(' . some_id($fam) . ')') for 1 .. rint(2, 6);
		push @stmts, stmt('DEALLOCATE {p}', nocompare => 1);
		return { cat => 'router', stmts => \@stmts };
	}
	else
	{
		my $v = lit_sql('float8', $S, 'float8');
		return { cat => 'router', writes => 1, txn => 1, stmts => [ stmt('BEGIN'), stmt("UPDATE {t} SET f8 = $v WHERE id = $k"),
			stmt("SELECT a.id, a.f8, b.f8 FROM {t} a LEFT JOIN $x b ON b.id = a.id WHERE a.id = $k"),
			stmt(chance(0.5) ? 'COMMIT' : 'ROLLBACK') ] };
	}
	return { cat => 'router', stmts => [ stmt($sql, explain => 1, ordered => $ordered) ] };
}

# Upserts (INSERT ... ON CONFLICT): new and existing ids, a key twice in
# one statement (DO UPDATE must fail with 21000, DO NOTHING skip it), new
# values from the existing row (alias x), EXCLUDED, constants, stable functions; a
# WHERE on DO UPDATE; RETURNING.  Columns are qualified: unqualified, a
# column of both the row and EXCLUDED is ambiguous.
sub upsert_set_list
{
	my ($fam, $S) = @_;
	my @cols = family_columns($fam);
	my %seen;
	my @sets;
	for (1 .. rint(1, 4))
	{
		my $c = pick(@cols);
		next if $seen{ $c->[0] }++;
		my $e = wpick([ 4, "EXCLUDED.$c->[0]" ], [ 5, set_expression("x.$c->[0]", $c->[1], $S) ],
			[ 1, "COALESCE(EXCLUDED.$c->[0], x.$c->[0])" ]);
		push @sets, "$c->[0] = $e";
	}
	# stable functions are evaluated on the coordinator, under the session's settings, and sent as values
	push @sets, pick("t = current_setting('DateStyle') || ' ' || current_setting('TimeZone')",
		"d = to_date('2024-02-01', 'YYYY-MM-DD')", "tz = '2024-02-01 10:00'::timestamp::timestamptz") if chance(0.08);
	return join(', ', @sets);
}

sub upsert_where
{
	my ($S) = @_;
	return '' unless chance(0.3);
	return ' WHERE ' . pick('x.id % 2 = 0', 'EXCLUDED.f8 IS DISTINCT FROM x.f8', 'x.d IS NULL OR x.d < EXCLUDED.d',
		'x.bo IS NOT TRUE', 'x.n > ' . value('numeric', $S)->[1], "x.t <> 'x'", 'x.iv < EXCLUDED.iv');
}

sub gen_upsert
{
	my ($fam, $S) = @_;
	if (chance(0.2))
	{
		# prepared, planned once for all its executions (force_generic_plan) or not
		my @stmts = (stmt('SET plan_cache_mode = ' . pick('force_generic_plan', 'auto', 'force_custom_plan'), nocompare => 1));
		my $action = pick('DO UPDATE SET f8 = x.f8 + $2, iv = EXCLUDED.iv, t = $3 || x.t',
			'DO UPDATE SET d = $4, f8 = EXCLUDED.f8 WHERE x.id > $1 - 1000', 'DO NOTHING', 'DO UPDATE SET t = EXCLUDED.t RETURNING id, t, f8');
		$action .= ' RETURNING *' if $action !~ /RETURNING/ && chance(0.3);
		push @stmts, stmt('PREPARE {p}(int4, float8, text, date, interval) AS INSERT INTO {t} AS x (id, f8, t, d, iv) '
			  . "VALUES (\$1, \$2, \$3, \$4, \$5) ON CONFLICT (id) $action");
		for (1 .. rint(2, 8))
		{
			my $id = chance(0.5) ? some_id($fam) : $next_id++;
			push @stmts, stmt("EXECUTE {p}($id, " . join(', ', map { value($_, $S)->[1] } qw(float8 text date interval)) . ')');
		}
		push @stmts, stmt('DEALLOCATE {p}', nocompare => 1);
		return { cat => 'upsert', stmts => \@stmts, writes => 1 };
	}
	my @cols = random_column_subset($fam);
	my $collist = join(', ', 'id', map { $_->[0] } @cols);
	my $nrows = wpick([ 5, 1 ], [ 3, rint(2, 5) ], [ 1, rint(6, 20) ]);
	my @ids;
	for my $i (1 .. $nrows)
	{
		push @ids, chance(0.5) ? some_id($fam) : $next_id++;
		$ids[-1] = $ids[0] if $i > 1 && chance(0.03);	# the same key twice
	}
	my $action = wpick([ 3, ' ON CONFLICT (id) DO NOTHING' ], [ 1, ' ON CONFLICT DO NOTHING' ],
		[ 8, ' ON CONFLICT (id) DO UPDATE SET ' . upsert_set_list($fam, $S) . upsert_where($S) ]);
	my $sql = "INSERT INTO {t} AS x ($collist) VALUES " . join(",\n ", map { row_values($fam, $S, $_, \@cols) } @ids) . $action;
	return { cat => 'upsert', stmts => [ stmt($sql . returning_clause()) ], writes => 1 };
}

# Statements refused by design; both sides run them in a transaction rolled back.
sub gen_refused
{
	my ($fam, $S) = @_;
	my $id = some_id($fam);
	my $sql = pick(
		"INSERT INTO {t} (id, t) VALUES ($id, 'x') ON CONFLICT (id) DO UPDATE SET id = EXCLUDED.id + 1000000",
		"INSERT INTO {t} (id, t) VALUES ($id, 'x') ON CONFLICT (id) DO UPDATE SET f8 = random()",
		"INSERT INTO {t} (id, t) VALUES ($id, 'x') ON CONFLICT (id) DO UPDATE SET t = (SELECT max(t) FROM {t})",
		"UPDATE {t} SET id = id + 1000000 WHERE id = $id",
		"UPDATE {t} SET t = f8::text WHERE id = $id",
		"UPDATE {t} SET tz = tz + interval '1 hour' WHERE id = $id",
		"DELETE FROM {t} WHERE tz::date = " . lit_sql('date', $S, 'date'),
		"UPDATE {t} SET vc = left(d::text, 12) WHERE " . where_clause($fam, $S, 1));
	$next_id++;
	return { cat => 'refused', stmts => [ stmt('BEGIN', nocompare => 1), stmt($sql), stmt('ROLLBACK', nocompare => 1) ] };
}

# The tables keyed by numeric, char(4) and timestamptz: equal keys of
# several spellings, routed and de-duplicated.
my @nk_pool = ('1.5', '2', '3.25', '10', '0.001', '-4.5', '100.125', '0.00001', '12345678901234567890.5', '7', '-0', '42.42');
my @ck_pool = map { "c$_" } 1 .. 30;
my @tk_pool = map { [ 2024, 1 + $_ % 12, 1 + $_, rint(0, 23), pick(0, 15, 30, 45), rint(0, 59) ] } 0 .. 24;

sub spell_nk
{
	my ($k) = @_;
	my $s = $k;
	$s .= ($s =~ /\./ ? '' : '.') . ('0' x rint(1, 3)) if chance(0.5);
	return pick($s, ql($s), "${s}::numeric", "($s)::numeric(30,8)");
}

sub spell_ck
{
	my ($k) = @_;
	my $s = $k . (' ' x rint(0, 7 - length($k)));
	return pick(ql($s), ql($s) . '::bpchar', ql($s) . '::char(4)', ql($k) . '::char(4)', ql(uc(substr($k, 0, 1)) eq 'C' ? $s : $s));
}

# The same instant in another time zone, or in the session's own.
sub spell_tk
{
	my ($k, $S) = @_;
	my ($y, $m, $d, $h, $mi, $s) = @$k;
	my $utc = sprintf("timestamptz '%04d-%02d-%02d %02d:%02d:%02d+00'", $y, $m, $d, $h, $mi, $s);
	return '(' . pick(
		$utc,
		"$utc AT TIME ZONE 'Asia/Kathmandu' AT TIME ZONE 'Asia/Kathmandu'",
		"(timestamp '" . sprintf('%04d-%02d-%02d %02d:%02d:%02d', $y, $m, $d, $h, $mi, $s) . "' AT TIME ZONE 'UTC')",
		ql(timestamp_text($S, [ 'date', $y, $m, $d ], [ $h, $mi, $s, 0 ], '+00')),
		"make_timestamptz($y, $m, $d, $h, $mi, $s, 'UTC')",
		"'epoch'::timestamptz + " . sprintf("%d", timegm_simple($y, $m, $d, $h, $mi, $s)) . " * interval '1 second'") . ')';
}

sub timegm_simple
{
	my ($y, $m, $d, $h, $mi, $s) = @_;
	my $days = 0;
	$days += (($_ % 4 == 0 && ($_ % 100 != 0 || $_ % 400 == 0)) ? 366 : 365) for 1970 .. $y - 1;
	my @len = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31);
	$len[1] = 29 if $y % 4 == 0 && ($y % 100 != 0 || $y % 400 == 0);
	$days += $len[$_] for 0 .. $m - 2;
	$days += $d - 1;
	return $days * 86400 + $h * 3600 + $mi * 60 + $s;
}

sub gen_keyed
{
	my ($fam, $S) = @_;
	my $kind = $fam->{kind};
	my ($key, $spell, @pool) = $kind eq 'nk' ? ('nk', \&spell_nk, @nk_pool) : $kind eq 'ck' ? ('code', \&spell_ck, @ck_pool)
	  : ('tk', sub { spell_tk($_[0], $S) }, @tk_pool);
	my $k = pick(@pool);
	my @same = map { $spell->($k) } 1 .. rint(2, 4);
	my @others = map { $spell->(pick(@pool)) } 1 .. rint(0, 3);
	my @in = (@same, @others);
	my @rest = $kind eq 'nk' ? ([ 'v', 'text' ], [ 'f8', 'float8' ], [ 'd', 'date' ]) : $kind eq 'ck' ? ([ 'v', 'text' ], [ 'n', 'int4' ])
	  : ([ 'v', 'text' ], [ 'iv', 'interval' ]);
	my $op = wpick([ 5, 'insert' ], [ 6, 'in' ], [ 3, 'any' ], [ 2, 'eq' ], [ 2, 'prepared' ], [ 2, 'update' ], [ 1, 'delete' ],
		[ 2, 'fanout' ], [ 1, 'cross' ], [ 4, 'upsert' ]);
	my $vals = sub { join(', ', map { value($_->[1], $S)->[1] } @rest) };
	my $restcols = join(', ', map { $_->[0] } @rest);
	my $fresh = $kind eq 'nk' ? sub { numeric_text(4, 4) } : $kind eq 'ck' ? sub { 'k' . rint(0, 999) }
	  : sub { [ rint(2000, 2040), rint(1, 12), rint(1, 28), rint(0, 23), rint(0, 59), rint(0, 59) ] };
	if ($fam->{fill})
	{
		my @rows = map { '(' . $spell->($_) . ', ' . $vals->() . ')' } @pool;
		return { cat => 'insert', stmts => [ stmt("INSERT INTO {t} ($key, $restcols) VALUES " . join(', ', @rows)) ], writes => 1 };
	}
	if ($op eq 'insert')
	{
		my @rows = map { '(' . $spell->(chance(0.3) ? pick(@pool) : $fresh->()) . ', ' . $vals->() . ')' } 1 .. rint(1, 3);
		return { cat => 'keys', stmts => [ stmt("INSERT INTO {t} ($key, $restcols) VALUES " . join(', ', @rows) . (chance(0.3) ? ' RETURNING *' : '')) ], writes => 1 };
	}
	if ($op eq 'upsert')
	{
		# equal keys spelled differently are one row: a conflict, or (DO UPDATE) a row written twice
		my @rows = map { '(' . $spell->(chance(0.6) ? pick(@pool) : $fresh->()) . ', ' . $vals->() . ')' } 1 .. rint(1, 3);
		my $action = pick(" ON CONFLICT ($key) DO NOTHING", ' ON CONFLICT DO NOTHING',
			" ON CONFLICT ($key) DO UPDATE SET v = EXCLUDED.v || coalesce(x.v, '')",
			" ON CONFLICT ($key) DO UPDATE SET v = EXCLUDED.v WHERE x.v IS DISTINCT FROM EXCLUDED.v");
		return { cat => 'keys_upsert', stmts => [ stmt("INSERT INTO {t} AS x ($key, $restcols) VALUES " . join(', ', @rows) . $action
			  . (chance(0.3) ? ' RETURNING *' : '')) ], writes => 1 };
	}
	if ($op eq 'in')
	{
		return { cat => 'keys', stmts => [ stmt("SELECT * FROM {t} WHERE $key IN (" . join(', ', @in) . ')' . (chance(0.2) ? " AND v IS NOT NULL" : '')) ] };
	}
	if ($op eq 'any')
	{
		my $type = { nk => 'numeric', ck => 'bpchar', tk => 'timestamptz' }->{$kind};
		return { cat => 'keys', stmts => [ stmt("SELECT * FROM {t} WHERE $key = ANY (ARRAY[" . join(', ', @in) . "]::${type}[])") ] };
	}
	if ($op eq 'eq')
	{
		my $rhs = $kind eq 'tk' && chance(0.4) ? "($same[0] AT TIME ZONE current_setting('TimeZone'))" : $same[0];
		return { cat => 'keys', stmts => [ stmt("SELECT $key, v FROM {t} WHERE $key = $rhs") ] };
	}
	if ($op eq 'prepared')
	{
		my $type = { nk => 'numeric', ck => 'bpchar', tk => 'timestamptz' }->{$kind};
		my @stmts = (stmt('SET plan_cache_mode = ' . pick('force_generic_plan', 'auto'), nocompare => 1),
			stmt("PREPARE {p}(${type}[]) AS SELECT * FROM {t} WHERE $key = ANY (\$1)"));
		push @stmts, stmt("EXECUTE {p}(ARRAY[" . join(', ', (map { $spell->($k) } 1 .. 2), map { $spell->(pick(@pool)) } 1 .. 2) . "]::${type}[])") for 1 .. rint(2, 7);
		push @stmts, stmt("PREPARE {p}s($type) AS SELECT * FROM {t} WHERE $key = \$1"), map { stmt("EXECUTE {p}s($_)") } @same;
		push @stmts, stmt('DEALLOCATE {p}', nocompare => 1), stmt('DEALLOCATE {p}s', nocompare => 1);
		return { cat => 'keys', stmts => \@stmts };
	}
	if ($op eq 'update')
	{
		return { cat => 'keys', stmts => [ stmt("UPDATE {t} SET v = " . value('text', $S)->[1] . " WHERE $key IN (" . join(', ', @in) . ')'
			  . (chance(0.3) ? " RETURNING $key, v" : '')) ], writes => 1 };
	}
	if ($op eq 'delete')
	{
		my $type = { nk => 'numeric', ck => 'bpchar', tk => 'timestamptz' }->{$kind};
		return { cat => 'keys', stmts => [ stmt("DELETE FROM {t} WHERE $key = ANY (ARRAY[" . join(', ', @same) . "]::${type}[])") ], writes => 1 };
	}
	if ($op eq 'cross')
	{
		# comparisons that are not the key's own equality must not route by key
		my @c = $kind eq 'nk' ? ("nk::text = '1.50'", "nk::float8 = 1.5", "trim_scale(nk) = 1.5")
		  : $kind eq 'ck' ? ("code::text = 'c7 '", "code = 'c7 '::varchar", "code::varchar = 'c7'", "code = 'C7'", "code LIKE 'c7%'", "code::text IN ('c7', 'c7 ')")
		  : ("tk = timestamp '2024-03-05 10:15:00'", "tk::date = date '2024-03-05'", "tk::timestamp = timestamp '2024-03-05 10:15:00'",
			"tk IN (" . join(', ', map { "(" . spell_tk($_, $S) . ") AT TIME ZONE current_setting('TimeZone')" } $k, pick(@pool)) . ')',
			"tk = ANY (ARRAY[" . join(', ', map { "(" . spell_tk($_, $S) . ") AT TIME ZONE " . ql($S->{tz}) } $k, pick(@pool)) . '])',
			"tk AT TIME ZONE 'UTC' = " . ql(sprintf('%04d-%02d-%02d %02d:%02d:%02d', @$k)) . '::timestamp');
		return { cat => 'keys', stmts => [ stmt("SELECT * FROM {t} WHERE " . pick(@c)) ] };
	}
	my @f = $kind eq 'nk' ? ('f8 > 0.3', 'd > ' . lit_sql('date', $S, 'date'), "f8 = 0.1::float8 + 0.2::float8", 'nk > 5')
	  : $kind eq 'ck' ? ("code > 'c5'", 'n > 0', "v LIKE '%a%'") : ("tk > timestamptz '2024-06-01 00:00+00'", "iv > interval '1 day'", "tk::text LIKE '%:30:%'");
	return { cat => 'keys', stmts => [ stmt("SELECT * FROM {t} WHERE " . pick(@f) . (chance(0.5) ? " ORDER BY $key" : ''), ordered => 0) ] };
}

sub gen_unit
{
	my ($fam, $S) = @_;
	return gen_keyed($fam, $S) if $fam->{kind} ne 'main';
	my $g = wpick(
		[ 9, sub { gen_insert($fam, $S, 1) } ],
		[ 7, sub { gen_insert($fam, $S, wpick([ 3, rint(2, 5) ], [ 2, rint(6, 16) ], [ 1, rint(17, 40) ])) } ],
		[ 3, sub { gen_insert_select($fam, $S) } ],
		[ 4, sub { gen_copy($fam, $S) } ],
		[ 6, sub { gen_update($fam, $S, 1) } ],
		[ 4, sub { gen_update($fam, $S, 0) } ],
		[ 4, sub { gen_delete($fam, $S, 1) } ],
		[ 2, sub { gen_delete($fam, $S, 0) } ],
		[ 40, sub { gen_select($fam, $S) } ],
		[ 4, sub { gen_prepared($fam, $S) } ],
		[ 2, sub { gen_prepared_write($fam, $S) } ],
		[ 3, sub { gen_transaction($fam, $S) } ],
		[ 2, sub { gen_cursor($fam, $S) } ],
		[ 8, sub { gen_upsert($fam, $S) } ],
		[ 6, sub { gen_router($fam, $S) } ],
		[ 0.6, sub { gen_refused($fam, $S) } ]);
	return $g->();
}

# ---------------------------------------------------------------------------
# Running a unit on both tables and comparing.

my %stats;			# category => {units, statements, differences, refusals}
my @differences;
my @refusals;
my $unit_no = 0;
my %failures;		# SQLSTATE => statements that failed on both sides alike
my $dump;
if ($ENV{RINGSHARD_DIFF_DUMP})
{
	open($dump, '>', $ENV{RINGSHARD_DIFF_DUMP}) or die "cannot write $ENV{RINGSHARD_DIFF_DUMP}: $!";
}

sub instantiate
{
	my ($u, $table, $tag, $side) = @_;
	return map {
		my %s = %$_;
		# outside string literals only: a generated text value may hold "{t}"
		$s{sql} =~ s/('(?:[^']|'')*')|\{t\}/defined $1 ? $1 : $table/ge;
		# router statements: a table of another family, on the same side, or the reference table
		$s{sql} =~ s/('(?:[^']|'')*')|\{(pair|text|single|map)\}/defined $1 ? $1 : $families{$2}{$side}/ge;
		$s{sql} =~ s/('(?:[^']|'')*')|\{ref\}/defined $1 ? $1 : ($side eq 'dist' ? 'dt_ref' : 'lt_ref')/ge;
		$s{sql} =~ s/('(?:[^']|'')*')|\{p\}/defined $1 ? $1 : "rs_$tag"/ge;
		\%s
	} @{ $u->{stmts} };
}

sub rows_text
{
	my ($rows, $max) = @_;
	my @r = @$rows[ 0 .. ($#$rows < $max - 1 ? $#$rows : $max - 1) ];
	my $s = join("\n", map { my $x = $_; $x =~ s/\x1f/ | /g; $x =~ s/\n/\\n/g; $x =~ s/\t/\\t/g; "    $x" } @r);
	$s .= "\n    ... (" . scalar(@$rows) . ' rows)' if @$rows > $max;
	return $s;
}

sub answer_text
{
	my ($r) = @_;
	return "the session was lost: $1" if $r->{state} eq 'LOST' && $r->{err} =~ /server log: (.*)/s;
	if ($r->{state} ne '00000')
	{
		my ($msg) = grep { /ERROR|FATAL|lost/ } split /\n/, $r->{err};
		return "SQLSTATE $r->{state}: " . ($msg // $r->{err});
	}
	return "$r->{count} rows" . (@{ $r->{rows} } ? ":\n" . rows_text($r->{rows}, 8) : '');
}

# undef if the answers are the same, else what differs.
sub compare_results
{
	my ($d, $l, $ordered) = @_;
	return 'the coordinator session was lost (the server log says why)' if $d->{state} eq 'LOST' || $l->{state} eq 'LOST';
	# Both failed on the rows' data, each side on the first bad row it met: a
	# statement over many rows meets them in another order on the nodes than
	# here (an UPDATE whose f8 / 3 underflows in one row while array_remove
	# meets a multidimensional array in another).  Two errors of the data
	# (classes 22 and 23, or 0A for what a value needs) are alike.
	return undef if $d->{state} =~ /^(22|23|0A)/ && $l->{state} =~ /^(22|23|0A)/;
	return "SQLSTATE $d->{state} on the distributed table, $l->{state} on the local one"
	  if substr($d->{state}, 0, 2) ne substr($l->{state}, 0, 2);
	return undef if $d->{state} ne '00000';
	return "row count $d->{count} on the distributed table, $l->{count} on the local one" if $d->{count} != $l->{count};
	my @a = @{ $d->{rows} };
	my @b = @{ $l->{rows} };
	unless ($ordered)
	{
		@a = sort @a;
		@b = sort @b;
	}
	for my $i (0 .. $#a)
	{
		next if $a[$i] eq $b[$i];
		(my $x = $a[$i]) =~ s/\x1f/ | /g;
		(my $y = $b[$i]) =~ s/\x1f/ | /g;
		return ($ordered ? "row $i differs" : 'the rows differ') . ": distributed [$x], local [$y]";
	}
	return undef;
}

sub unit_sql_text
{
	my ($stmts, $mark) = @_;
	my @lines;
	for my $i (0 .. $#$stmts)
	{
		my $s = $stmts->[$i];
		my $text = $s->{sql};
		if ($s->{copy})
		{
			my @c = @{ $s->{copy} };
			$text .= "\n" . join("\n", @c[ 0 .. ($#c < 4 ? $#c : 4) ]) . (@c > 5 ? "\n(" . scalar(@c) . ' data lines)' : '') . "\n\\.";
		}
		push @lines, (defined $mark && $i == $mark ? '>>> ' : '    ') . $text . ';';
	}
	return join("\n", @lines);
}

sub record_difference
{
	my (%d) = @_;
	$stats{ $d{cat} }{differences}++;
	push @differences, \%d;
}

sub run_unit
{
	my ($u, $S) = @_;
	my $fam = $families{ $u->{fam} };
	my $cat = $u->{cat};
	$unit_no++;
	$stats{$cat}{units}++;
	my @d_stmts = instantiate($u, $fam->{dist}, "d$unit_no", 'dist');
	my ($set, @dres) = ps_run(stmt(settings_sql($S)), @d_stmts);
	die "settings were refused: $set->{err}" if $set->{state} ne '00000' && $set->{state} ne 'LOST';
	my $refused;
	for my $i (0 .. $#d_stmts)
	{
		if (($dres[$i]{state} eq '0A000' || $dres[$i]{state} eq 'LOST') && !$d_stmts[$i]{nocompare})
		{
			$refused = $i;
			last;
		}
	}
	my @l_stmts = instantiate($u, $fam->{local}, "l$unit_no", 'local');
	my $offset = 0;
	if (defined $refused && $cat ne 'refused')
	{
		# the distributed side refused: the local side must not keep the changes either
		if ($u->{txn})
		{
			$l_stmts[-1] = { %{ $l_stmts[-1] }, sql => 'ROLLBACK' };
		}
		else
		{
			unshift @l_stmts, stmt('BEGIN', nocompare => 1);
			push @l_stmts, stmt('ROLLBACK', nocompare => 1);
			$offset = 1;
		}
	}
	my (undef, @lres) = ps_run(stmt(settings_sql($S)), @l_stmts);
	my $diverged = 0;
	my $current = $S;
	for my $i (0 .. $#d_stmts)
	{
		$current = $d_stmts[$i]{settings} if $d_stmts[$i]{settings};
		next if $d_stmts[$i]{nocompare};
		$stats{$cat}{statements}++;
		my ($d, $l) = ($dres[$i], $lres[ $i + $offset ]);
		if ($d->{state} eq '0A000' && $l->{state} ne '0A000')
		{
			$stats{$cat}{refusals}++;
			my ($msg) = grep { /ERROR/ } split /\n/, $d->{err};
			push @refusals, { cat => $cat, sql => $d_stmts[$i]{sql}, err => $msg // $d->{err} };
			last;
		}
		my $problem = compare_results($d, $l, $d_stmts[$i]{ordered});
		if ($dump)
		{
			print $dump "-- unit $unit_no $cat $fam->{name} | " . settings_text($current) . "\n" . unit_sql_text([ $d_stmts[$i] ]) . "\n-- distributed: "
			  . answer_text($d) . "\n-- local: " . answer_text($l) . "\n" . (defined $problem ? "-- DIFFERENCE: $problem\n" : '') . "\n";
		}
		if ($l->{state} ne '00000')
		{
			$stats{$cat}{failed}++;
			$failures{ $l->{state} }++;
		}
		next unless defined $problem;
		record_difference(
			cat => $cat, fam => $fam->{name}, unit => $unit_no, problem => $problem,
			sql => unit_sql_text(\@d_stmts, @d_stmts > 1 ? $i : undef),
			settings => settings_text($current), dist => answer_text($d), local => answer_text($l));
		$diverged = 1;
		last;
	}
	# how many router statements are planned to go whole (EXPLAIN, on the distributed side)
	for my $st (grep { $_->{explain} } @d_stmts)
	{
		my ($plan) = ps_run({ sql => "EXPLAIN (COSTS OFF) $st->{sql}" });
		next if $plan->{state} ne '00000';
		$stats{$cat}{explained}++;
		$stats{$cat}{routed}++ if grep { /ringshard router/ } @{ $plan->{rows} };
	}
	$dirty{ $fam->{name} } = 1 if $u->{writes};
	check_contents($fam, "after unit $unit_no") if $diverged && $u->{writes};
	return $diverged;
}

# ---------------------------------------------------------------------------
# Whole contents, and each worker's rows.

# The distributed table made equal to its twin again (after a difference).
sub resync
{
	my ($fam) = @_;
	ps_internal(settings_sql(\%canonical));
	ps_internal("DELETE FROM $fam->{dist}");
	ps_internal("INSERT INTO $fam->{dist} SELECT * FROM $fam->{local}");
	$dirty{ $fam->{name} } = 1;
}

sub list_diff
{
	my ($a, $b) = @_;
	my (%ca, %cb);
	$ca{$_}++ for @$a;
	$cb{$_}++ for @$b;
	my @only_a = grep { !$cb{$_} || $cb{$_}-- <= 0 } sort keys %ca;
	my @only_b = grep { !$ca{$_} } sort keys %cb;
	return (\@only_a, \@only_b);
}

# Returns the number of differences found (recorded unless $quiet).
sub check_contents
{
	my ($fam, $label, $quiet) = @_;
	my ($set, $d, $l) = ps_run(stmt(settings_sql(\%canonical)), stmt("SELECT x::text FROM $fam->{dist} x"),
		stmt("SELECT x::text FROM $fam->{local} x"));
	$stats{contents}{statements}++;
	my @a = sort @{ $d->{rows} };
	my @b = sort @{ $l->{rows} };
	return 0 if $d->{state} eq '00000' && join("\0", @a) eq join("\0", @b);
	my ($only_d, $only_l) = list_diff(\@a, \@b);
	my $what = $d->{state} ne '00000' ? answer_text($d)
	  : scalar(@$only_d) . " rows only in the distributed table, " . scalar(@$only_l) . " only in the local one\n"
	  . "  only distributed:\n" . rows_text($only_d, 5) . "\n  only local:\n" . rows_text($only_l, 5);
	return 1 if $quiet;
	record_difference(cat => 'contents', fam => $fam->{name}, unit => $unit_no, problem => "contents differ $label",
		sql => "SELECT x::text FROM $fam->{dist} x", settings => settings_text(\%canonical), dist => $what, local => scalar(@b) . ' rows');
	resync($fam);
	return 1;
}

sub worker_settings { return "SET DateStyle = 'ISO, MDY'; SET IntervalStyle = postgres; SET extra_float_digits = 3; SET TimeZone = 'UTC'; SET bytea_output = hex; SET lc_monetary = 'C';"; }

# Every worker holds exactly the rows whose replica set names it, with the twin's contents.
sub check_placement
{
	my ($fam, $label, $quiet) = @_;
	my $key = $fam->{key};
	my $nodes = $fam->{map} ? "nodes_for('items', x.id, 'halves')" : "replicas_for(x.$key, '$fam->{ring}')";
	ps_internal(settings_sql(\%canonical));
	my %expected = map { ("f$_" => []) } 1 .. 3;
	for my $r (ps_internal("SELECT w, x.$key\:\:text || ' ' || md5(x::text) FROM $fam->{local} x, unnest($nodes) w"))
	{
		my ($w, $row) = split /\x1f/, $r;
		push @{ $expected{$w} }, $row;
	}
	my $found = 0;
	for my $i (1 .. 3)
	{
		$stats{placement}{statements}++;
		my $actual = $workers[ $i - 1 ]->safe_psql('postgres', worker_settings() . "SELECT x.$key\:\:text || ' ' || md5(x::text) FROM $fam->{dist} x");
		my @a = sort grep { $_ ne '' } split /\n/, $actual;
		my @e = sort @{ $expected{"f$i"} };
		next if join("\n", @a) eq join("\n", @e);
		$found++;
		next if $quiet;
		my ($only_w, $only_e) = list_diff(\@a, \@e);
		record_difference(cat => 'placement', fam => $fam->{name}, unit => $unit_no,
			problem => "worker f$i does not hold exactly its rows of $fam->{dist} $label",
			sql => "(read on worker f$i) SELECT $key, md5(x::text) FROM $fam->{dist} x", settings => settings_text(\%canonical),
			dist => scalar(@$only_w) . " rows on f$i that should not be (or differ): " . join(', ', map { (split / /)[0] } @$only_w[ 0 .. ($#$only_w < 9 ? $#$only_w : 9) ]),
			local => scalar(@$only_e) . " rows missing on f$i (or differing): " . join(', ', map { (split / /)[0] } @$only_e[ 0 .. ($#$only_e < 9 ? $#$only_e : 9) ]));
	}
	resync($fam) if $found && !$quiet;
	return $found;
}

sub check_all
{
	my ($label) = @_;
	for my $name (@family_names)
	{
		check_contents($families{$name}, $label);
		check_placement($families{$name}, $label);
	}
}

# ---------------------------------------------------------------------------
# Self-checks: the generator writes what it means, the comparison sees a
# planted difference.

{
	my @failures;
	my $checked = 0;
	for (1 .. 24)
	{
		my $S = random_settings();
		my @cmp;
		for (1 .. 12)
		{
			my $dp = random_date_parts();
			my $tp = random_time_parts();
			next if $dp->[0] ne 'date';
			my ($y, $m, $d) = @$dp[ 1 .. 3 ];
			my $iso_date = sprintf('%04d-%02d-%02d', $y <= 0 ? 1 - $y : $y, $m, $d) . ($y <= 0 ? ' BC' : '');
			my $iso_ts = sprintf('%04d-%02d-%02d %s', $y <= 0 ? 1 - $y : $y, $m, $d, time_text($tp)) . ($y <= 0 ? ' BC' : '');
			my $zone = pick('', '+05:45', '-03:30', ' Asia/Kathmandu', ' UTC');
			my $iso_tz = sprintf('%04d-%02d-%02d %s%s', $y <= 0 ? 1 - $y : $y, $m, $d, time_text($tp), $zone) . ($y <= 0 ? ' BC' : '');
			push @cmp, [ 'date', date_text($S, $dp), $iso_date ];
			push @cmp, [ 'timestamp', timestamp_text($S, $dp, $tp), $iso_ts ];
			push @cmp, [ 'timestamptz', timestamp_text($S, $dp, $tp, $zone), $iso_tz ];
			my $ip = random_interval_parts();
			my ($neg, $h, $mi, $s, $f) = usec_hms($ip->[2]);
			my $text = interval_text($S, $ip, pick(@intervalstyles));
			my $iso_iv = "P$ip->[0]M$ip->[1]DT" . ($neg ? '-' : '') . secs_text($h * 3600 + $mi * 60 + $s, $f) . 'S';
			push @cmp, [ 'interval', $text, $iso_iv ];
		}
		my $sql = 'SELECT ' . join(', ', map { "($_->[1])::$_->[0]::text IS NOT DISTINCT FROM ($_->[2])::$_->[0]::text" }
			  map { [ $_->[0], ql($_->[1]), ql($_->[2]) ] } @cmp);
		my ($set, $r) = ps_run(stmt(settings_sql($S)), stmt($sql));
		$checked += @cmp;
		if ($r->{state} ne '00000')
		{
			push @failures, settings_text($S) . ": $r->{err}";
			next;
		}
		my @ok = split /\x1f/, $r->{rows}[0];
		for my $i (0 .. $#cmp)
		{
			push @failures, settings_text($S) . ": $cmp[$i][0] '$cmp[$i][1]' is not '$cmp[$i][2]'" if $ok[$i] ne 't';
		}
	}
	diag("generator: $_") for @failures[ 0 .. ($#failures < 9 ? $#failures : 9) ];
	is(scalar(@failures), 0, "generator: $checked date, timestamp and interval literals written in the session's style mean what they say");
}

# Initial rows: each pair of tables gets the same rows, under varied settings.
for my $name (@family_names)
{
	my $fam = $families{$name};
	for (1 .. ($fam->{kind} eq 'main' ? 6 : 1))
	{
		my $S = random_settings();
		local $fam->{fill} = 1;
		my $u = $fam->{kind} eq 'main' ? gen_insert($fam, $S, 25) : gen_keyed($fam, $S);
		$u->{fam} = $name;
		$u->{cat} = 'insert';
		run_unit($u, $S);
	}
}
check_all('after the first rows');

{
	my ($set, $d, $l) = ps_run(stmt(settings_sql(\%canonical)), stmt('SELECT count(*) FROM dt_pair'), stmt('SELECT count(*) + 1 FROM lt_pair'));
	ok(defined compare_results($d, $l, 0), 'self-check: a planted difference in an answer is seen');
	($set, $d, $l) = ps_run(stmt(settings_sql(\%canonical)), stmt('SELECT 1 / 0 FROM dt_pair LIMIT 1'), stmt('SELECT 1 FROM lt_pair LIMIT 1'));
	ok(defined compare_results($d, $l, 0), 'self-check: an error on one side only is seen');
	($set, $d, $l) = ps_run(stmt(settings_sql(\%canonical)), stmt('SELECT id FROM dt_pair ORDER BY id'), stmt('SELECT id FROM lt_pair ORDER BY id DESC'));
	ok(defined compare_results($d, $l, 1) && !defined compare_results($d, $l, 0), 'self-check: order counts only where it is asked for');
	# a row that belongs on f1 but never went through the coordinator
	my $id = $coordinator->safe_psql('postgres', q{SELECT -g FROM generate_series(1, 1000) g WHERE replicas_for(-g, 'single') = '{f1}' LIMIT 1});
	$workers[0]->safe_psql('postgres', "INSERT INTO dt_single (id, t) VALUES ($id, 'planted')");
	ok(check_placement($families{single}, 'self-check', 1) > 0 && check_contents($families{single}, 'self-check', 1) > 0,
		'self-check: a row planted on a worker is seen by the placement and contents checks');
	$workers[0]->safe_psql('postgres', "DELETE FROM dt_single WHERE id = $id");
	is(check_placement($families{single}, 'self-check', 1) + check_contents($families{single}, 'self-check', 1), 0,
		'self-check: and once it is gone, nothing is');
}

# ---------------------------------------------------------------------------
# The run.

my @weighted_families = ([ 22, 'pair' ], [ 18, 'single' ], [ 15, 'map' ], [ 20, 'text' ], [ 9, 'nk' ], [ 8, 'ck' ], [ 8, 'tk' ]);
my $loop_started = time();
for my $i (1 .. $nunits)
{
	my $fam = $families{ wpick(@weighted_families) };
	my $S = random_settings();
	my $u = gen_unit($fam, $S);
	$u->{fam} = $fam->{name};
	run_unit($u, $S);
	check_all("after unit $unit_no") if $i % 500 == 0;
}
my $loop_time = time() - $loop_started;
check_all('at the end');
# every copy of the reference table the same, and the twin's
{
	my ($verified) = ps_internal("SELECT count(*) FROM ringshard.verify_table('dt_ref')");
	is($verified, 0, 'the reference table: every copy holds the same rows');
	ps_internal(settings_sql(\%canonical));
	my ($differ) = ps_internal('SELECT count(*) FROM ((TABLE dt_ref EXCEPT ALL TABLE lt_ref) UNION ALL (TABLE lt_ref EXCEPT ALL TABLE dt_ref)) d');
	is($differ, 0, 'the reference table holds its twin\'s rows');
}

# ---------------------------------------------------------------------------
# What was found.

my $total_statements = 0;
$total_statements += $stats{$_}{statements} // 0 for grep { $_ ne 'contents' && $_ ne 'placement' } keys %stats;
diag(sprintf('%d units, %d statements compared in %.0f s (%.1f ms per unit); seed %d', $unit_no, $total_statements, $loop_time,
	1000 * $loop_time / ($nunits || 1), $seed));
for my $cat (sort keys %stats)
{
	diag(sprintf('  %-14s %5d units %6d statements (%5d failed alike) %4d differences %4d refusals', $cat, $stats{$cat}{units} // 0,
		$stats{$cat}{statements} // 0, $stats{$cat}{failed} // 0, $stats{$cat}{differences} // 0, $stats{$cat}{refusals} // 0));
}
diag('statements that failed alike on both sides, by SQLSTATE: ' . join(', ', map { "$_ x $failures{$_}" } sort { $failures{$b} <=> $failures{$a} } keys %failures));
if (@refusals)
{
	my %by;
	$by{ $_->{err} =~ s/^.*?ERROR:\s*//r =~ s/ of distributed table \S+| on distributed table \S+//r }++ for @refusals;
	diag(scalar(@refusals) . ' statements refused by the distributed table by design (0A000), not counted as differences:');
	diag("  $by{$_} x $_") for sort keys %by;
}
my $shown = 0;
for my $d (@differences)
{
	last if ++$shown > 20;
	diag("difference $shown ($d->{cat}, table family $d->{fam}, unit $d->{unit}): $d->{problem}\n"
		  . "  settings: $d->{settings}\n  statement:\n$d->{sql}\n  distributed: $d->{dist}\n  local: $d->{local}\n");
}
# Upserts run whole on the nodes; only the kinds refused by design (a
# subquery or a volatile function in the new values) may be refused.
for my $cat ('upsert', 'keys_upsert')
{
	my $n = $stats{$cat}{statements} // 0;
	my $refused = $stats{$cat}{refusals} // 0;
	ok($n >= 20 && $refused <= $n * 0.15, "$cat: $refused of $n statements refused (at most 15 %)");
}
# Most single-key statements over several tables go whole to one node.
{
	my ($explained, $routed) = ($stats{router}{explained} // 0, $stats{router}{routed} // 0);
	diag("router statements: $routed of $explained planned to go whole to one node");
	ok($explained >= 20 && $routed >= $explained * 0.5, "router: $routed of $explained statements go whole (at least half)");
}
for my $cat (sort keys %stats)
{
	is($stats{$cat}{differences} // 0, 0, "$cat: " . ($stats{$cat}{statements} // 0) . ' statements answer the same on both tables');
}
is(scalar(@differences), 0, "no differences between distributed tables and their local twins ($total_statements statements, seed $seed)");

ps_internal('SELECT 1');
$ps_in .= "\\q\n";
eval { $ps->finish; };
$_->stop for ($coordinator, @workers);
done_testing();

# ringshard.stat_hot_keys (docs/monitoring.md): the hottest keys of each
# distributed table, by reads and by writes, per period, from a bounded
# sketch in the coordinator's shared memory.
#
#  1. Exact while few keys are seen: router reads, a scan by a list of keys,
#     UPDATE and DELETE by key, an UPDATE that reads another table, and each
#     row of an INSERT count by the amounts the script implies, as reads or
#     as writes; a plain EXPLAIN counts nothing; a router read that falls
#     back to the plan below counts its keys once.
#  2. The issue's case: one key read 1,000 times more among 10,000 keys read
#     once each (itself one of them), in random order, ranks first, its
#     bounds holding its true count (1,001); the same for writes (300
#     UPDATEs of one key among an INSERT of 10,000 rows: 301).  Its token is
#     the key's ring_token.
#  3. A partition-map table shows each key's partition (partition_for), no
#     token, and its keyspace where that is a column; a key longer than what is kept is cut with "..."; a key with a
#     control character is shown as hex.
#  4. Periods: with ringshard.hot_keys_period = 1 s, reads in two periods
#     give two rows, each a second long; a period older than four is gone.
#  5. ringshard.track_hot_keys = off notes nothing; stat_reset_hot_keys()
#     empties the view.
#  6. Privileges: pg_monitor reads the view, the keys only of tables it may
#     read; a plain role can neither read it nor reset it.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use RingshardTestCluster qw(start_servers add_workers wait_for_fresh_period);

my ($coordinator, @workers) = start_servers(workers => [qw(w1 w2)]);
add_workers($coordinator, @workers);
$coordinator->safe_psql('postgres', q{
	SELECT ringshard.set_replication_factor('default', 1);
	SELECT ringshard.create_partition_map('halves');
	SELECT ringshard.assign_partitions('w1', 0, 127, 'halves');
	SELECT ringshard.assign_partitions('w2', 128, 255, 'halves');
	SELECT count(*) FROM ringshard.sync_topology();
	CREATE TABLE residents (nik text PRIMARY KEY, v int NOT NULL);
	SELECT ringshard.distribute_table('residents', 'nik');
	SELECT count(*) FROM ringshard.create_distributed_table('residents');
	CREATE TABLE small (k int PRIMARY KEY, v int NOT NULL);
	SELECT ringshard.distribute_table('small', 'k');
	SELECT count(*) FROM ringshard.create_distributed_table('small');
	CREATE TABLE by_part (k text PRIMARY KEY, v int NOT NULL);
	SELECT ringshard.distribute_table_by_partition('by_part', 'k', keyspace => 'penduduk', map => 'halves');
	SELECT count(*) FROM ringshard.create_distributed_table('by_part');
	CREATE TABLE by_region (region text NOT NULL, k text NOT NULL, v int NOT NULL, PRIMARY KEY (region, k));
	SELECT ringshard.distribute_table_by_partition('by_region', 'k', map => 'halves', keyspace_column => 'region');
	SELECT count(*) FROM ringshard.create_distributed_table('by_region');
	CREATE ROLE watcher LOGIN IN ROLE pg_monitor;
	CREATE ROLE nobody LOGIN;
});

# "table/access/key=count/min_count" for every row of the newest period, sorted.
sub hot_rows
{
	my ($where) = @_;
	$where //= 'true';
	return $coordinator->safe_psql('postgres', qq{
		SELECT string_agg(format('%s/%s/%s=%s/%s', table_name, access, key, count, min_count), ' '
		                  ORDER BY table_name::text, access, key)
		  FROM ringshard.stat_hot_keys
		 WHERE period_start = (SELECT max(period_start) FROM ringshard.stat_hot_keys) AND $where});
}

# 1. exact counts while the sketch holds every key (each part of 1-3 falls in one period)
wait_for_fresh_period($coordinator);
$coordinator->safe_psql('postgres', q{SELECT ringshard.stat_reset_hot_keys()});
is($coordinator->safe_psql('postgres', 'SELECT count(*) FROM ringshard.stat_hot_keys'), '0',
	'after stat_reset_hot_keys() the view is empty');
$coordinator->safe_psql('postgres', q{
	INSERT INTO small VALUES (1, 0), (2, 0), (3, 0);
	SELECT v FROM small WHERE k = 1;
	SELECT v FROM small WHERE k = 1;
	SELECT v FROM small WHERE k = 1;
	SELECT v FROM small WHERE k = 2;
	SELECT count(*) FROM small WHERE k IN (2, 3);
	UPDATE small SET v = v + 1 WHERE k = 3;
	UPDATE small SET v = v + 1 WHERE k = 3;
	DELETE FROM small WHERE k = 2;
	UPDATE small SET v = v WHERE k IN (1, 1);
	UPDATE small SET v = (SELECT s2.v FROM small s2 WHERE s2.k = 3) WHERE k = 3;
	EXPLAIN SELECT v FROM small WHERE k = 1;
	EXPLAIN UPDATE small SET v = 0 WHERE k = 1;
	PREPARE one(int) AS SELECT v FROM small WHERE k = $1;
	EXECUTE one(1);
	EXECUTE one(3);
});
is(hot_rows(q{table_name = 'small'::regclass}),
	'small/read/1=4/4 small/read/2=2/2 small/read/3=3/3 small/write/1=2/2 small/write/2=2/2 small/write/3=4/4',
	'reads (router, prepared, a list of keys) and writes (each INSERT row, UPDATE, DELETE, an UPDATE of a list naming one key twice, an UPDATE reading its own key) counted exactly; EXPLAIN counts nothing');
like($coordinator->safe_psql('postgres', q{EXPLAIN UPDATE small SET v = (SELECT s2.v FROM small s2 WHERE s2.k = 3) WHERE k = 3}),
	qr/Router: the whole statement to every replica of its key/, '... that UPDATE is a router write (its read of the key counted as a read)');
is($coordinator->safe_psql('postgres', q{
	SELECT count(*) FILTER (WHERE rank = 1 AND key = '1' AND access = 'read')
	       || ' ' || count(*) FILTER (WHERE token IS DISTINCT FROM ring_token(key::int))
	       || ' ' || count(*) FILTER (WHERE partition IS NOT NULL OR keyspace IS NOT NULL)
	       || ' ' || count(*) FILTER (WHERE period_end - period_start <> interval '60 s')
	  FROM ringshard.stat_hot_keys WHERE table_name = 'small'::regclass}),
	'1 0 0 0', 'the most read key ranks first; every token is the key\'s ring_token; no partition; 60 s periods');

# a router read whose keys have no node in common runs as the plan below,
# whose scans note each key: once, not once more for the router's attempt
my $apart = $coordinator->safe_psql('postgres',
	q{SELECT min(g) FROM generate_series(2, 500) g WHERE replicas_for(g) <> replicas_for(1)});
$coordinator->safe_psql('postgres', qq{
	SELECT ringshard.stat_reset_hot_keys();
	SELECT a.v, b.v FROM small a, small b WHERE a.k = 1 AND b.k = $apart;});
is(hot_rows(q{table_name = 'small'::regclass}), "small/read/1=1/1 small/read/$apart=1/1",
	"a join of keys on different nodes (1 and $apart), which no node can answer alone: each key read once");

# 2. one hot key among 10,000 uniform ones, by reads and by writes
wait_for_fresh_period($coordinator);
$coordinator->safe_psql('postgres', q{SELECT ringshard.stat_reset_hot_keys()});
$coordinator->safe_psql('postgres', q{
	INSERT INTO residents SELECT '3201' || lpad(g::text, 12, '0'), 0 FROM generate_series(1, 10000) g;
	DO $$
	DECLARE
		k text;
		n int := 0;
		got int;
	BEGIN
		FOR k IN
			SELECT key FROM (SELECT '3201' || lpad(g::text, 12, '0') AS key FROM generate_series(1, 10000) g
			                 UNION ALL SELECT '3201000000004242' FROM generate_series(1, 1000)) s
			 ORDER BY random()
		LOOP
			SELECT r.v INTO got FROM residents r WHERE r.nik = k;
			n := n + 1;
		END LOOP;
		FOR i IN 1 .. 300 LOOP
			UPDATE residents r SET v = r.v + 1 WHERE r.nik = '3201000000007777';
		END LOOP;
		RAISE NOTICE 'read % keys', n;
	END
	$$;
});
my $top = $coordinator->safe_psql('postgres', q{
	SELECT access || ' ' || key || ' ' || (count >= want AND min_count <= want) || ' ' || (token = ring_token(key))
	  FROM (SELECT *, CASE access WHEN 'read' THEN 1001 ELSE 301 END AS want FROM ringshard.stat_hot_keys) h
	 WHERE table_name = 'residents'::regclass AND rank = 1 ORDER BY access});
is($top, "read 3201000000004242 true true\nwrite 3201000000007777 true true",
	'a key read 1,000 times among 10,000 read once ranks first, and one updated 300 times among 10,000 inserted; bounds hold, token is ring_token');
is($coordinator->safe_psql('postgres', q{
	SELECT access || ' ' || count(*) FROM ringshard.stat_hot_keys WHERE table_name = 'residents'::regclass
	 GROUP BY access ORDER BY access}), "read 256\nwrite 256", 'the sketch holds 256 keys per access kind: bounded memory');
is($coordinator->safe_psql('postgres', q{
	SELECT percent_of_period FROM ringshard.stat_hot_keys
	 WHERE table_name = 'residents'::regclass AND access = 'read' AND rank = 1}),
	$coordinator->safe_psql('postgres', q{
	SELECT round(100.0 * count / 11000, 1) FROM ringshard.stat_hot_keys
	 WHERE table_name = 'residents'::regclass AND access = 'read' AND rank = 1}),
	'percent_of_period is the share of the period\'s 11,000 reads');

# 3. partitions, cut keys, keys shown as hex
wait_for_fresh_period($coordinator);
$coordinator->safe_psql('postgres', q{SELECT ringshard.stat_reset_hot_keys()});
$coordinator->safe_psql('postgres', q{
	INSERT INTO by_part VALUES ('a', 1), ('bb', 2), (repeat('x', 200), 3), (E'tab\there', 4);
	SELECT v FROM by_part WHERE k = 'a';
});
is($coordinator->safe_psql('postgres', q{
	SELECT string_agg(format('%s:%s:%s', access, key, partition = partition_for('penduduk', key)), ' ' ORDER BY access, key)
	  FROM ringshard.stat_hot_keys WHERE table_name = 'by_part'::regclass AND key NOT LIKE 'xxx%'}),
	'read:a:t write:\x7461620968657265:f write:a:t write:bb:t',
	'a map table shows each key\'s partition; a key with a control character is shown as hex');
is($coordinator->safe_psql('postgres', q{
	SELECT format('%s %s %s', key = repeat('x', 96) || '...', token IS NULL, keyspace IS NULL)
	  FROM ringshard.stat_hot_keys WHERE table_name = 'by_part'::regclass AND key LIKE 'xxx%'}),
	't t t', 'a long key is cut to 96 bytes and marked; a map table has no token (its keyspace is a constant)');

$coordinator->safe_psql('postgres', q{
	INSERT INTO by_region VALUES ('jabar', 'a', 1), ('jatim', 'a', 2), ('jatim', 'b', 3);
	UPDATE by_region SET v = 0 WHERE region = 'jatim' AND k = 'a';
});
is($coordinator->safe_psql('postgres', q{
	SELECT string_agg(format('%s/%s=%s:%s', keyspace, key, count, partition = partition_for(keyspace, key)), ' '
	                  ORDER BY keyspace, key)
	  FROM ringshard.stat_hot_keys WHERE table_name = 'by_region'::regclass AND access = 'write'}),
	'jabar/a=1:t jatim/a=2:t jatim/b=1:t',
	'a map whose keyspace is a column: keyspace and key together are the item, with their partition');

# 4. periods of one second
$coordinator->safe_psql('postgres', q{ALTER SYSTEM SET ringshard.hot_keys_period = '1s'; SELECT pg_reload_conf()});
$coordinator->poll_query_until('postgres', q{SELECT current_setting('ringshard.hot_keys_period') = '1s'})
  or die 'the period setting was not loaded';
$coordinator->safe_psql('postgres', q{SELECT ringshard.stat_reset_hot_keys()});
$coordinator->safe_psql('postgres', q{SELECT v FROM small WHERE k = 1});
# the next read falls in a later period: wait for the wall clock's next second
$coordinator->safe_psql('postgres', q{SELECT pg_sleep(1.1)});
$coordinator->safe_psql('postgres', q{SELECT v FROM small WHERE k = 1});
is($coordinator->safe_psql('postgres', q{
	SELECT count(*) || ' ' || sum(count) || ' ' || bool_and(period_end - period_start = interval '1 s')::int
	  FROM ringshard.stat_hot_keys WHERE table_name = 'small'::regclass}),
	'2 2 1', 'reads in two periods of 1 s: two rows of one read each');
# after four more periods the first is no longer kept (bounded: at most 10 s)
my $first = $coordinator->safe_psql('postgres', q{
	SELECT min(period_start) FROM ringshard.stat_hot_keys WHERE table_name = 'small'::regclass});
$coordinator->poll_query_until('postgres', qq{
	SELECT now() > '$first'::timestamptz + interval '4.2 s'}) or die 'the clock did not move';
is($coordinator->safe_psql('postgres', qq{
	SELECT count(*) FROM ringshard.stat_hot_keys WHERE period_start = '$first'}), '0',
	'a period more than four periods old is gone');
$coordinator->safe_psql('postgres', q{ALTER SYSTEM RESET ringshard.hot_keys_period; SELECT pg_reload_conf()});
$coordinator->poll_query_until('postgres', q{SELECT current_setting('ringshard.hot_keys_period') = '1min'})
  or die 'the period setting was not reset';

# 5. off, and reset
$coordinator->safe_psql('postgres', q{SELECT ringshard.stat_reset_hot_keys()});
$coordinator->safe_psql('postgres', q{
	SET ringshard.track_hot_keys = off;
	SELECT v FROM small WHERE k = 1;
	UPDATE small SET v = 0 WHERE k = 1;
	INSERT INTO small VALUES (50, 0);
});
is($coordinator->safe_psql('postgres', 'SELECT count(*) FROM ringshard.stat_hot_keys'), '0',
	'ringshard.track_hot_keys = off notes nothing');
my ($rc, $out, $err) = $coordinator->psql('postgres', 'SET ringshard.track_hot_keys = off', extra_params => [ '-U', 'nobody' ]);
like($err, qr/permission denied to set parameter/, 'a plain role cannot turn the noting off');
$coordinator->safe_psql('postgres', q{SELECT v FROM small WHERE k = 1});
is($coordinator->safe_psql('postgres', 'SELECT count(*) FROM ringshard.stat_hot_keys'), '1', 'on again: noted');

# 6. privileges
is($coordinator->safe_psql('postgres', q{SELECT count(*) || ' ' || count(key) || ' ' || count(token) FROM ringshard.stat_hot_keys},
		extra_params => [ '-U', 'watcher' ]),
	'1 0 1', 'pg_monitor reads the view, but not the keys of a table it may not read (as pg_stats)');
$coordinator->safe_psql('postgres', 'GRANT SELECT ON small TO watcher');
is($coordinator->safe_psql('postgres', 'SELECT key FROM ringshard.stat_hot_keys', extra_params => [ '-U', 'watcher' ]),
	'1', '... and the keys once it may read the table');
($rc, $out, $err) = $coordinator->psql('postgres', 'SELECT count(*) FROM ringshard.stat_hot_keys', extra_params => [ '-U', 'nobody' ]);
like($err, qr/permission denied/, 'a plain role cannot read the keys');
($rc, $out, $err) = $coordinator->psql('postgres', 'SELECT ringshard.stat_reset_hot_keys()', extra_params => [ '-U', 'watcher' ]);
like($err, qr/permission denied/, 'pg_monitor cannot reset them');
is($coordinator->safe_psql('postgres', 'SELECT count(*) FROM ringshard.stat_hot_keys'), '1', '... so they stay');

done_testing();

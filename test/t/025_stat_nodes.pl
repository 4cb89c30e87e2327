# ringshard.stat_nodes (docs/monitoring.md): per-node counters in shared
# memory, moved by a scripted workload by exactly the amounts it implies.
#
#  1. After stat_reset() every counter of every node is 0.
#  2. An INSERT of 20 rows at R = 1: each node's rows_written is the number
#     of those keys it owns (shard_for), and the total is 20; at R = 2 each
#     row is written twice.
#  3. A fan-out SELECT of every row: each node's rows_read is the rows it
#     serves; round trips have a mean and a 99th percentile (p99 >= mean).
#  4. A duplicate key: node_errors +1 on the owner, errors_by_class {"23": 1}.
#  5. Gauges: a session that holds a connection to each node shows
#     connections_open 1 per node, back to 0 when it ends; a transaction
#     paused after PREPARE (fault injection) shows prepared_open 1 on each
#     node it wrote to, back to 0 after its commit.
#  6. A stopped worker: links_lost moves on it only.
#  7. ringshard.track_node_stats = off: counters stand still.
#  8. Privileges: pg_monitor reads the view; a plain role reads nothing and
#     cannot reset.
#  9. ringshard.cluster_activity shows a statement running on a node.
# 10. EXPLAIN ANALYZE per node: the rows of a read, the partial rows of an
#     aggregate and a GROUP BY pushed down, the rows an UPDATE and a DELETE
#     changed, the rows an INSERT routed to each node, each with the times its answers came.
# 11. When a node was last marked down and up.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

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
	SELECT ringshard.create_ring('pair', 256, 2);
	SELECT ringshard.add_node('w1', ring => 'pair'), ringshard.add_node('w2', ring => 'pair');
	SELECT count(*) FROM ringshard.sync_topology();
	CREATE TABLE pairs (k int PRIMARY KEY, v int NOT NULL);
	SELECT ringshard.distribute_table('pairs', 'k', ring => 'pair');
	SELECT ringshard.create_distributed_table('pairs');
	CREATE ROLE watcher LOGIN IN ROLE pg_monitor;
	CREATE ROLE nobody LOGIN;
}, $w1->host, $w1->port, $w2->host, $w2->port));

# The counters of every node as "node:column=value" lines, for a list of columns.
sub counters
{
	my ($session_sql, @columns) = @_;
	my $cols = join(", ", map { "'$_=' || coalesce(${_}::text, 'null')" } @columns);
	return $coordinator->safe_psql('postgres',
		"$session_sql; SELECT node || ':' || concat_ws(' ', $cols) FROM ringshard.stat_nodes ORDER BY node");
}

sub column_of
{
	my ($text, $node, $column) = @_;
	my ($line) = grep { /^$node:/ } split /\n/, $text;
	return undef unless defined $line;
	return $line =~ /\b$column=(\S+)/ ? $1 : undef;
}

my @all = qw(queries round_trips rows_read rows_written bytes_sent bytes_received node_errors links_lost
  malformed_answers timeouts connects);

# 1. reset
{
	my $out = counters('SELECT ringshard.stat_reset()', @all);
	my @nonzero = grep { !/=0( |$)/ } map { split / / } map { s/^\w+://r } grep { /^\w+:/ } split /\n/, $out;
	is(scalar(@nonzero), 0, 'after stat_reset() every counter is 0') or diag $out;
	is($coordinator->safe_psql('postgres', 'SELECT ringshard.stat_reset()'), '2', 'stat_reset() names the two nodes it reset');
	is($coordinator->safe_psql('postgres', q{SELECT ringshard.stat_reset('w1')}), '1', '... or one');
	is($coordinator->safe_psql('postgres', q{SELECT ringshard.stat_reset('nowhere')}), '0', '... or none');
}

my %owns;
for my $line (split /\n/,
	$coordinator->safe_psql('postgres', 'SELECT shard_for(g), count(*) FROM generate_series(1, 20) g GROUP BY 1'))
{
	my ($node, $n) = split /\|/, $line;
	$owns{$node} = $n;
}
$owns{$_} //= 0 for qw(w1 w2);
ok($owns{w1} > 0 && $owns{w2} > 0, "keys 1..20 fall on both nodes (w1 $owns{w1}, w2 $owns{w2})");

# 2. rows written
{
	my $out = counters('SELECT ringshard.stat_reset(); INSERT INTO items SELECT g, g FROM generate_series(1, 20) g',
		qw(rows_written rows_read node_errors));
	is(column_of($out, 'w1', 'rows_written'), $owns{w1}, "an INSERT of 20 rows: w1 wrote the $owns{w1} it owns");
	is(column_of($out, 'w2', 'rows_written'), $owns{w2}, "... w2 the $owns{w2} it owns");
	is(column_of($out, 'w1', 'node_errors') + column_of($out, 'w2', 'node_errors'), 0, '... without an error');

	$out = counters('SELECT ringshard.stat_reset(); INSERT INTO pairs SELECT g, g FROM generate_series(1, 20) g',
		qw(rows_written));
	is(column_of($out, 'w1', 'rows_written') . '/' . column_of($out, 'w2', 'rows_written'), '20/20',
		'at R = 2 with two nodes each node wrote every row');

	$out = counters(q{SELECT ringshard.stat_reset(); INSERT INTO items VALUES (101, 1)}, qw(rows_written));
	my $owner = $coordinator->safe_psql('postgres', 'SELECT shard_for(101)');
	my $other = $owner eq 'w1' ? 'w2' : 'w1';
	is(column_of($out, $owner, 'rows_written') . '/' . column_of($out, $other, 'rows_written'), '1/0',
		'a one-row autocommit INSERT (sent with the commit) counts one row written on its owner only');
	$coordinator->safe_psql('postgres', 'DELETE FROM items WHERE k = 101');

	# An UPDATE and a DELETE count the rows each node changed, not the row of
	# counts it answered with.
	$out = counters('SELECT ringshard.stat_reset(); UPDATE items SET v = v + 1', qw(rows_written rows_read));
	is(column_of($out, 'w1', 'rows_written') . '/' . column_of($out, 'w2', 'rows_written'), "$owns{w1}/$owns{w2}",
		'an UPDATE of every row: each node wrote the rows it owns');
	is(column_of($out, 'w1', 'rows_read') . '/' . column_of($out, 'w2', 'rows_read'), '0/0', '... and read none');
	$out = counters('SELECT ringshard.stat_reset(); UPDATE pairs SET v = v + 1 WHERE k <= 5', qw(rows_written));
	is(column_of($out, 'w1', 'rows_written') . '/' . column_of($out, 'w2', 'rows_written'), '5/5',
		'at R = 2 an UPDATE of 5 rows counts 5 on each replica');
	$out = counters('SELECT ringshard.stat_reset(); DELETE FROM pairs WHERE k > 15', qw(rows_written));
	is(column_of($out, 'w1', 'rows_written') . '/' . column_of($out, 'w2', 'rows_written'), '5/5',
		'a DELETE of 5 rows at R = 2 counts 5 on each replica');
	$out = counters('SELECT ringshard.stat_reset(); UPDATE pairs SET v = v + 1 WHERE k <= 3 RETURNING k',
		qw(rows_written rows_read));
	is(join('/', map { column_of($out, $_, 'rows_written') . ':' . column_of($out, $_, 'rows_read') } qw(w1 w2)),
		'3:0/3:0', 'an UPDATE of 3 rows with RETURNING at R = 2 counts 3 written on each replica, none read');
	$coordinator->safe_psql('postgres', 'INSERT INTO pairs SELECT g, g + 1 FROM generate_series(16, 20) g');
}

# 3. rows read and round trips
{
	my $out = counters('SELECT ringshard.stat_reset(); SELECT * FROM items',
		qw(rows_read queries round_trips mean_ms p99_ms bytes_sent bytes_received));
	is(column_of($out, 'w1', 'rows_read'), $owns{w1}, "a fan-out of every row: w1 read its $owns{w1}");
	is(column_of($out, 'w2', 'rows_read'), $owns{w2}, "... w2 its $owns{w2}");
	for my $node (qw(w1 w2))
	{
		my ($q, $rt, $mean, $p99) = map { column_of($out, $node, $_) } qw(queries round_trips mean_ms p99_ms);
		ok($q >= 1 && $rt >= 1, "$node: queries ($q) and round trips ($rt) counted");
		ok($mean ne 'null' && $mean >= 0 && $p99 >= $mean, "$node: mean $mean ms, p99 $p99 ms (p99 >= mean)");
		ok(column_of($out, $node, 'bytes_sent') > 0 && column_of($out, $node, 'bytes_received') > 0,
			"$node: bytes sent and received");
	}
}

# 4. a node's error
{
	my $owner = $coordinator->safe_psql('postgres', 'SELECT shard_for(3)');
	my $other = $owner eq 'w1' ? 'w2' : 'w1';
	$coordinator->safe_psql('postgres', 'SELECT ringshard.stat_reset()');
	my ($rc, undef, $err) = $coordinator->psql('postgres', 'INSERT INTO items VALUES (3, 3)');
	like($err, qr/duplicate key/, 'a duplicate key fails on its node');
	my $out = counters('SELECT 1', qw(node_errors errors_by_class));
	is(column_of($out, $owner, 'node_errors'), 1, "node_errors 1 on the owner ($owner)");
	like($out, qr/^$owner:.*errors_by_class=\{"23": 1\}$/m, '... of SQLSTATE class 23');
	is(column_of($out, $other, 'node_errors'), 0, '... 0 on the other');
}

# Whether every node's connections_open comes back to 0 (a session's backend
# leaves after its client has gone: the count drops when it has, so wait, up
# to 10 s).
sub connections_closed
{
	my $out = '';
	for (1 .. 100)
	{
		$out = counters('SELECT 1', qw(connections_open));
		return 1 if column_of($out, 'w1', 'connections_open') eq '0' && column_of($out, 'w2', 'connections_open') eq '0';
		select(undef, undef, undef, 0.1);
	}
	diag $out;
	return 0;
}

# 5. gauges
{
	# the sessions of the sections above may not have left yet
	ok(connections_closed(), 'no connection is open once the earlier sessions have left');
	my $holder = $coordinator->background_psql('postgres');
	$holder->query_safe('SELECT count(*) FROM items');
	my $out = counters('SELECT 1', qw(connections_open));
	# this session's own connection counts too (counters() reads no node: none of its own)
	is(column_of($out, 'w1', 'connections_open') . '/' . column_of($out, 'w2', 'connections_open'), '1/1',
		'a session that read every node holds one connection to each');
	$holder->quit;
	ok(connections_closed(), '... and none once it has ended');

	# a transaction that writes both nodes, paused after its PREPAREs
	my $k1 = $coordinator->safe_psql('postgres', q{SELECT min(g) FROM generate_series(200, 400) g WHERE shard_for(g) = 'w1'});
	my $k2 = $coordinator->safe_psql('postgres', q{SELECT min(g) FROM generate_series(200, 400) g WHERE shard_for(g) = 'w2'});
	my $writer = $coordinator->background_psql('postgres');
	$writer->query_safe(q{SET ringshard.fault_injection = 'after_prepare=sleep:4000'});
	$writer->query_until(qr/started/, "\\echo started\nINSERT INTO items VALUES ($k1, 1), ($k2, 2);\n");
	my $seen = '';
	for (1 .. 80)
	{
		$out = counters('SELECT 1', qw(prepared_open));
		$seen = column_of($out, 'w1', 'prepared_open') . '/' . column_of($out, 'w2', 'prepared_open');
		last if $seen eq '1/1';
		select(undef, undef, undef, 0.05);
	}
	is($seen, '1/1', 'a transaction paused after its PREPAREs counts one prepared transaction on each node');
	$writer->query_safe('SELECT 1');
	$writer->quit;
	$out = counters('SELECT 1', qw(prepared_open));
	is(column_of($out, 'w1', 'prepared_open') . '/' . column_of($out, 'w2', 'prepared_open'), '0/0',
		'... and none once it has committed');
	is($coordinator->safe_psql('postgres', "SELECT count(*) FROM items WHERE k IN ($k1, $k2)"), '2', '... its rows are there');
}

# 6. a node that is gone
{
	$coordinator->safe_psql('postgres', 'SELECT ringshard.stat_reset()');
	$w2->stop('fast');
	my ($rc, undef, $err) = $coordinator->psql('postgres', 'SELECT count(*) FROM items');
	isnt($rc, 0, 'a read of every row fails while w2 is down');
	my $out = counters('SELECT 1', qw(links_lost));
	ok(column_of($out, 'w2', 'links_lost') >= 1, 'links_lost counts the failed connection to w2') or diag $out;
	is(column_of($out, 'w1', 'links_lost'), 0, '... none to w1');
	$w2->start;
	$coordinator->safe_psql('postgres', q{UPDATE ringshard.nodes SET is_up = true});
}

# 7. counting off
{
	ok(connections_closed(), 'no connection is open before counting is turned off');
	my $out = counters(q{SELECT ringshard.stat_reset(); SET ringshard.track_node_stats = off;
		SELECT count(*) FROM items; INSERT INTO pairs VALUES (1001, 1)}, qw(queries rows_read rows_written connections_open));
	is(column_of($out, 'w1', 'queries') . '/' . column_of($out, 'w1', 'rows_read') . '/'
		  . column_of($out, 'w1', 'rows_written'), '0/0/0', 'with track_node_stats off nothing is counted');
	is(column_of($out, 'w1', 'connections_open'), 1, '... but open connections still are');
	my ($rc, undef, $err) = $coordinator->psql('postgres', 'SET ringshard.track_node_stats = off', extra_params => ['-U', 'nobody']);
	like($err, qr/permission denied/, 'only a superuser turns the counting off');
}

# 8. privileges
{
	is($coordinator->safe_psql('postgres', 'SELECT count(*) FROM ringshard.stat_nodes', extra_params => ['-U', 'watcher']),
		'2', 'pg_monitor reads stat_nodes');
	my ($rc, undef, $err) = $coordinator->psql('postgres', 'SELECT count(*) FROM ringshard.stat_nodes',
		extra_params => ['-U', 'nobody']);
	like($err, qr/permission denied/, 'a plain role does not');
	($rc, undef, $err) = $coordinator->psql('postgres', 'SELECT ringshard.stat_reset()', extra_params => ['-U', 'watcher']);
	like($err, qr/permission denied/, 'pg_monitor cannot reset');
}

# 9. ringshard.cluster_activity: a coordinator backend beside what its node
# connections run; node connections name the coordinator and backend.
{
	my $k = $coordinator->safe_psql('postgres', q{SELECT min(g) FROM generate_series(500, 700) g WHERE shard_for(g) = 'w1'});
	$coordinator->safe_psql('postgres', "INSERT INTO items VALUES ($k, 0)");
	my $coordinator_id = $coordinator->safe_psql('postgres', q{SELECT replace(coordinator_id::text, '-', '') FROM ringshard.cluster_state});
	my $prefix = $coordinator->safe_psql('postgres', q{SELECT ringshard_internal.node_session_prefix()});
	like($prefix, qr/^ringshard [0-9a-f]{16} $/, 'node connections are named "ringshard <tag> <pid>"');
	unlike($prefix, qr/$coordinator_id/, '... by a tag that does not show the coordinator\'s id');
	# an administrator who may read every session on the nodes
	$coordinator->safe_psql('postgres', q{CREATE ROLE operator LOGIN IN ROLE ringshard_admin;
		CREATE USER MAPPING FOR operator SERVER w1 OPTIONS (user 'operator', password_required 'false');
		CREATE USER MAPPING FOR operator SERVER w2 OPTIONS (user 'operator', password_required 'false');});
	$_->safe_psql('postgres', 'CREATE ROLE operator LOGIN IN ROLE pg_read_all_stats') for ($w1, $w2);

	# a writer waiting on w1 for the row a local session holds there
	my $local = $w1->background_psql('postgres');
	$local->query_safe('BEGIN');
	$local->query_safe("SELECT v FROM public.items WHERE k = $k FOR UPDATE");
	my $waiter = $coordinator->background_psql('postgres');
	my $waiter_pid = $waiter->query_safe('SELECT pg_backend_pid()');
	$waiter->query_until(qr/sent/, "\\echo sent\nUPDATE items SET v = v + 1 WHERE k = $k;\n");
	# a reader in a transaction, holding a connection to each node
	my $reader = $coordinator->background_psql('postgres');
	my $reader_pid = $reader->query_safe('SELECT pg_backend_pid()');
	$reader->query_safe('BEGIN');
	$reader->query_safe('SELECT count(*) FROM items');

	ok($coordinator->poll_query_until('postgres',
			"SELECT count(*) = 1 FROM ringshard.cluster_activity WHERE coordinator_pid = $waiter_pid AND node_wait_event_type = 'Lock'"),
		'cluster_activity shows the writer\'s node session waiting for a lock');
	is($coordinator->safe_psql('postgres', qq{
			SELECT node || '|' || node_state || '|' || (coordinator_query LIKE 'UPDATE items SET v = v + 1 WHERE k = %')
			       || '|' || (node_query LIKE '%UPDATE%items%') || '|' || coordinator_user || '|' || node_user
			  FROM ringshard.cluster_activity WHERE coordinator_pid = $waiter_pid}),
		'w1|active|true|true|postgres|postgres',
		'... on w1, active, beside the coordinator statement that caused it, with both roles');
	is($coordinator->safe_psql('postgres', qq{
			SELECT string_agg(node || ':' || coordinator_state, ',' ORDER BY node)
			  FROM ringshard.cluster_activity WHERE coordinator_pid = $reader_pid}),
		'w1:idle in transaction,w2:idle in transaction',
		'a reader in a transaction has a session on each node it read');
	is($coordinator->safe_psql('postgres',
			'SELECT count(*) FROM ringshard.cluster_activity WHERE coordinator_pid = pg_backend_pid() OR error IS NOT NULL'),
		'0', 'the sessions asking the nodes are not listed, and no node failed');
	# sessions on w1 whose names look like ringshard's but are not this
	# coordinator's node sessions (a pid that is no number, too long a pid,
	# another coordinator's tag) are not listed, and blank nothing
	my $w1_rows = q{SELECT count(*) || '/' || count(*) FILTER (WHERE error IS NOT NULL) FROM ringshard.cluster_activity WHERE node = 'w1'};
	my $before = $coordinator->safe_psql('postgres', $w1_rows);
	my @lookalikes;
	for my $name ("${prefix}abc", "${prefix}1234567890", "ringshard 0000000000000000 $waiter_pid", "${prefix}$waiter_pid x")
	{
		local $ENV{PGAPPNAME} = $name;
		my $session = $w1->background_psql('postgres');
		$session->query_safe('SELECT 1');
		push @lookalikes, $session;
	}
	is($w1->safe_psql('postgres', q{SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'ringshard %' AND application_name NOT LIKE '%' || pg_backend_pid()}) >= 4 ? 'there' : 'missing',
		'there', 'the look-alike sessions are on w1');
	is($coordinator->safe_psql('postgres', $w1_rows), $before,
		"sessions named like ringshard's but not this coordinator's node sessions are not listed ($before rows/errors)");
	$_->quit for @lookalikes;
	is($coordinator->safe_psql('postgres', qq{
			SELECT node || '|' || (node_query LIKE '%UPDATE%items%') FROM ringshard.cluster_activity WHERE coordinator_pid = $waiter_pid},
			extra_params => ['-U', 'operator']),
		'w1|true', 'ringshard_admin reads it too, as itself on the nodes (with pg_read_all_stats there: the query text)');
	my ($rc, undef, $err) = $coordinator->psql('postgres',
		'BEGIN; SELECT count(*) FROM items; SELECT count(*) FROM ringshard.cluster_activity; COMMIT');
	like($err, qr/cannot be read in a transaction that has used the nodes/,
		'it is refused in a transaction that has used the nodes (it would run in their part of it)');
	$local->query_safe('COMMIT');
	$local->quit;
	$waiter->query_safe('SELECT 1');
	$waiter->quit;
	$reader->query_safe('COMMIT');
	$reader->quit;
	like(slurp_file($w1->logfile), qr/\Q$prefix\E$waiter_pid LOG:  statement: .*UPDATE/,
		'the node\'s log lines name the coordinator and the backend (log_line_prefix %a)');

	$w2->stop('fast');
	is($coordinator->safe_psql('postgres',
			q{SELECT node || ':' || (error IS NOT NULL) FROM ringshard.cluster_activity WHERE node = 'w2'}),
		'w2:true', 'a node that cannot be asked gives a row with its error');
	$w2->start;
	($rc, undef, $err) = $coordinator->psql('postgres', 'SELECT * FROM ringshard.cluster_activity',
		extra_params => ['-U', 'nobody']);
	like($err, qr/permission denied/, 'a plain role cannot read cluster_activity');
}

# 10. EXPLAIN ANALYZE of a read of every row: each node's rows and when they came.
{
	my %rows;
	for my $line (split /\n/, $coordinator->safe_psql('postgres', 'SELECT shard_for(k), count(*) FROM items GROUP BY 1'))
	{
		my ($node, $n) = split /\|/, $line;
		$rows{$node} = $n;
	}
	my $plan = $coordinator->safe_psql('postgres', 'EXPLAIN (ANALYZE, COSTS off) SELECT * FROM items');
	for my $node (qw(w1 w2))
	{
		my $n = $rows{$node} // 0;
		like($plan, qr/Node $node: $n rows? in 1 batch, first after \d+\.\d{3} ms, last after \d+\.\d{3} ms/,
			"EXPLAIN ANALYZE: $node returned its $n rows, with the times of its first and last batch");
	}
	my $verbose = $coordinator->safe_psql('postgres', 'EXPLAIN (ANALYZE, VERBOSE, COSTS off, TIMING off) SELECT * FROM items');
	like($verbose, qr/Node w1: \d+ rows? in 1 batch\n/, '... without times when TIMING is off');
	like($verbose, qr/Remote SQL: SELECT /, '... and VERBOSE shows the SQL the nodes ran');
	unlike($coordinator->safe_psql('postgres', 'EXPLAIN (COSTS off) SELECT * FROM items'), qr/Node w1:/,
		'plain EXPLAIN runs nothing and shows no node rows');

	# an aggregate pushed down: one partial row per node; a GROUP BY: a row per group the node has
	my $agg = $coordinator->safe_psql('postgres', 'EXPLAIN (ANALYZE, COSTS off) SELECT count(*), sum(v) FROM items');
	like($agg, qr/Pushed down:/, 'count(*) and sum(v) are pushed down');
	like($agg, qr/Node $_: 1 row in 1 batch, first after \d+\.\d{3} ms, last after \d+\.\d{3} ms/,
		"EXPLAIN ANALYZE of the aggregate: $_ answered its one partial row, with its time") for qw(w1 w2);
	my %groups;
	for my $line (split /\n/, $coordinator->safe_psql('postgres',
			'SELECT shard_for(k), count(DISTINCT k % 3) FROM items GROUP BY 1'))
	{
		my ($node, $n) = split /\|/, $line;
		$groups{$node} = $n;
	}
	my $grouped = $coordinator->safe_psql('postgres',
		'EXPLAIN (ANALYZE, COSTS off, TIMING off) SELECT k % 3, count(*) FROM items GROUP BY 1');
	like($grouped, qr/Node $_: $groups{$_} rows? in 1 batch\n/,
		"... of a GROUP BY: $_ answered one row per group it holds ($groups{$_})") for qw(w1 w2);

	# a write sent whole: the rows each node changed
	my $update = $coordinator->safe_psql('postgres', 'EXPLAIN (ANALYZE, COSTS off) UPDATE items SET v = v');
	like($update, qr/Node $_: $rows{$_} rows? changed in 1 batch, first after \d+\.\d{3} ms, last after \d+\.\d{3} ms/,
		"EXPLAIN ANALYZE of an UPDATE of every row: $_ changed its $rows{$_} rows") for qw(w1 w2);
	my $key = $coordinator->safe_psql('postgres', q{SELECT min(k) FROM items WHERE shard_for(k) = 'w2'});
	my $delete = $coordinator->safe_psql('postgres', qq{
		BEGIN; EXPLAIN (ANALYZE, COSTS off, TIMING off) DELETE FROM items WHERE k = $key RETURNING k; ROLLBACK;});
	like($delete, qr/Node w2: 1 row changed in 1 batch\n/, "... of a DELETE by key with RETURNING: its owner w2 changed 1 row");
	unlike($delete, qr/Node w1:/, '... and w1 was not asked');

	# an INSERT: the rows sent to each node
	my %sent;
	for my $line (split /\n/, $coordinator->safe_psql('postgres',
			'SELECT shard_for(g), count(*) FROM generate_series(1001, 1020) g GROUP BY 1'))
	{
		my ($node, $n) = split /\|/, $line;
		$sent{$node} = $n;
	}
	my $insert = $coordinator->safe_psql('postgres', q{
		BEGIN; EXPLAIN (ANALYZE, COSTS off, TIMING off) INSERT INTO items SELECT g, 0 FROM generate_series(1001, 1020) g; ROLLBACK;});
	like($insert, qr/Node $_: $sent{$_} rows?\n/, "... of an INSERT of 20 rows: $_ got the $sent{$_} it owns")
	  for qw(w1 w2);
}

# 11. When a node was last marked down and up, whoever marked it.
{
	$coordinator->safe_psql('postgres', q{SELECT ringshard.mark_node_down('w1')});
	is($coordinator->safe_psql('postgres',
			q{SELECT (last_marked_down IS NOT NULL) || '/' || (last_marked_up IS NULL OR last_marked_up < last_marked_down)
			    FROM ringshard.stat_nodes WHERE node = 'w1'}),
		'true/true', 'stat_nodes says when w1 was marked down');
	my $down = $coordinator->safe_psql('postgres', q{SELECT last_marked_down FROM ringshard.stat_nodes WHERE node = 'w1'});
	$coordinator->safe_psql('postgres', q{SELECT ringshard.mark_node_down('w1')});
	is($coordinator->safe_psql('postgres', q{SELECT last_marked_down FROM ringshard.stat_nodes WHERE node = 'w1'}), $down,
		'... a mark of a node already down changes nothing');
	$coordinator->safe_psql('postgres', q{UPDATE ringshard.nodes SET is_up = true WHERE node_name = 'w1'});
	is($coordinator->safe_psql('postgres',
			q{SELECT (last_marked_up >= last_marked_down) || '/' || (last_marked_down = '} . $down . q{')
			    FROM ringshard.stat_nodes WHERE node = 'w1'}),
		'true/true', '... and when it was marked up again (here by an UPDATE of ringshard.nodes), keeping the down time');
	like($coordinator->safe_psql('postgres', q{SELECT count(*) FROM ringshard.stat_nodes WHERE node = 'w1'},
			extra_params => ['-U', 'watcher']), qr/^1$/, 'pg_monitor reads the marks through the view');
}

done_testing();

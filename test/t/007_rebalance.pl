# Rebalancing: a fourth worker joins three; rebalance() moves exactly the rows
# whose replica set changed (about what the preview says), leaves every other
# row untouched, survives the coordinator being killed in the middle, and
# ends with every row on exactly its replicas, once.  Its output is a plan
# summary first (rows per source and target, counted before anything moves),
# then "step k of N, rows x of y" at most every few seconds, and
# rebalance_status counts the whole plan from the first step on.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $coordinator = PostgreSQL::Test::Cluster->new('coordinator');
my @workers = map { PostgreSQL::Test::Cluster->new("r$_") } 1 .. 4;
for my $node ($coordinator, @workers)
{
	$node->init;
	$node->append_conf('postgresql.conf', "max_prepared_transactions = 20\nshared_preload_libraries = 'ringshard'");
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION ringshard');
}
my %address = map { ("r$_" => sprintf('host=%s port=%d dbname=postgres', $workers[ $_ - 1 ]->host, $workers[ $_ - 1 ]->port)) } 1 .. 4;

$coordinator->safe_psql('postgres', qq{
	SELECT ringshard.add_node('r1', '$address{r1}');
	SELECT ringshard.add_node('r2', '$address{r2}');
	SELECT ringshard.add_node('r3', '$address{r3}');
	SELECT ringshard.set_replication_factor('default', 2);
	SELECT count(*) FROM ringshard.sync_topology();
	CREATE TABLE items (id bigint, payload text);
	SELECT ringshard.distribute_table('items', 'id');
	SELECT count(*) FROM ringshard.create_distributed_table('items');
	INSERT INTO items SELECT g, 'payload-' || g FROM generate_series(1, 1200) g;
	CREATE TABLE expected_before AS SELECT g AS id, replicas_for(g::bigint) AS replicas FROM generate_series(1, 1200) g;
});

# What the preview says will move, before anything moves.
my $preview_rows = $coordinator->safe_psql('postgres', q{
	SELECT count(*) FROM generate_series(1, 1200) g
	 WHERE ringshard.proposed_replicas(g::bigint, 'default', 'add', 'r4') <> replicas_for(g::bigint)});
my $preview_owner_fraction = $coordinator->safe_psql('postgres',
	q{SELECT round(sum(fraction)::numeric, 3) FROM ringshard.preview_add_node('r4')});
my $summary_copies = $coordinator->safe_psql('postgres',
	q{SELECT coalesce(sum(rows), 0) FROM ringshard.plan_table_summary('items', 'add', 'r4')});

# Each worker's rows and their row versions before the move.
my @before = map { $_->safe_psql('postgres', q{SELECT string_agg(id || ':' || xmin, ',' ORDER BY id) FROM items}) } @workers[0 .. 2];

$coordinator->safe_psql('postgres', "SELECT ringshard.add_node('r4', '$address{r4}')");
# Before the rebalance, sync_topology has created the table on r4.  A key
# whose replicas now include r4 keeps its rows on its old replicas until the
# rebalance copies them (docs/design.md, "Moving rows"): it is read there and
# written there, and the copy takes the writes along; keys that do not move
# are written as usual.  Every statement reports what it did.
$coordinator->safe_psql('postgres', 'SELECT count(*) FROM ringshard.sync_topology()');
is($workers[3]->safe_psql('postgres', 'SELECT count(*) FROM items'), '0', 'sync_topology created the table on r4');
my $r4_key = $coordinator->safe_psql('postgres',
	q{SELECT g FROM generate_series(90001, 99999) g WHERE 'r4' = ANY (replicas_for(g::bigint)) LIMIT 1});
my ($ins_rc, $ins_out, $ins_err) = $coordinator->psql('postgres', "INSERT INTO items VALUES ($r4_key, 'early')");
is($ins_rc, 0, 'a write of a key that moves to the new node succeeds before the rebalance') or diag($ins_err);
is($workers[3]->safe_psql('postgres', "SELECT count(*) FROM items WHERE id = $r4_key"), '0',
	'it went to the key\'s old replicas, not yet to r4');
is($coordinator->safe_psql('postgres', "SELECT payload FROM items WHERE id = ${r4_key}::bigint"), 'early', 'and reads back by key');
is($coordinator->safe_psql('postgres', "DELETE FROM items WHERE id = ${r4_key}::bigint RETURNING payload"), 'early',
	'a DELETE by that key finds it');
my $moving_old = $coordinator->safe_psql('postgres',
	q{SELECT g FROM generate_series(1, 1200) g WHERE 'r4' = ANY (replicas_for(g::bigint)) ORDER BY g LIMIT 1});
is($coordinator->safe_psql('postgres', "UPDATE items SET payload = 'changed-early' WHERE id = ${moving_old}::bigint RETURNING id"),
	$moving_old, 'an UPDATE of a stored key that moves changes its row');
is($coordinator->safe_psql('postgres', "UPDATE items SET payload = 'changed-again' WHERE payload = 'changed-early' RETURNING id"),
	$moving_old, 'an UPDATE without a key finds it, once');
is($coordinator->safe_psql('postgres', 'SELECT count(*) || \'/\' || count(DISTINCT id) FROM items'), '1200/1200',
	'a fan-out reads every row once');
my $staying = $coordinator->safe_psql('postgres',
	q{SELECT g FROM generate_series(90001, 99999) g WHERE NOT 'r4' = ANY (replicas_for(g::bigint)) LIMIT 1});
($ins_rc, $ins_out, $ins_err) = $coordinator->psql('postgres', "INSERT INTO items VALUES ($staying, 'early'); DELETE FROM items WHERE id = ${staying}::bigint");
is($ins_rc, 0, 'a key that does not move is written as usual') or diag($ins_err);
my ($rc, $out, $err) = $coordinator->psql('postgres', q{CALL ringshard.rebalance('items', dry_run => true)});
# The dry run is a summary: a title with the plan's steps and rows, then one
# line per (source, target) pair, not a line per step.
my ($plan_steps, $plan_rows) = $err =~ /rebalance plan of public\.items \(dry run, nothing changed\): (\d+) steps, (\d+) rows to copy/;
ok(defined $plan_rows, 'a dry run prints the plan summary with its steps and rows') or diag($err);
my %pairs;
while ($err =~ /^ (r\d) +\| (r\d) +\| +(\d+) \| +(\d+) \| +([\d.]+) \| +(\d+ (?:bytes|kB|MB|GB))$/mg)
{
	$pairs{"$1>$2"} = { steps => $3, rows => $4, share => $5, size => $6 };
}
is(join(',', sort keys %pairs), 'r1>r4,r2>r4,r3>r4', 'one line per pair: every old node copies to r4');
my ($pair_rows, $pair_steps, $pair_share) = (0, 0, 0);
for (values %pairs) { $pair_rows += $_->{rows}; $pair_steps += $_->{steps}; $pair_share += $_->{share} }
# R = 2 and one node joins: every row whose replica set changed gains r4 and
# nothing else, so the rows to copy are exactly the rows the preview named.
is($plan_rows, $preview_rows, "the plan's rows, counted on the sources, are the rows whose replica set changes ($preview_rows)");
is($pair_rows, $plan_rows, 'the pairs add up to the total');
is($summary_copies, $plan_rows, 'plan_table_summary, before the change, counted the copies the plan makes');
is($pair_steps, $plan_steps, 'each step copies to one node here: the pairs\' steps add up to the plan\'s');
cmp_ok(abs($pair_share - 100), '<=', 0.15, 'the shares, in per cent to a tenth, add up to 100');
cmp_ok(scalar(split /\n/, $err), '<=', 8, "the dry run prints a few lines, not one per step ($plan_steps steps)");
is($coordinator->safe_psql('postgres', q{SELECT sum(rows) || '/' || sum(steps) FROM ringshard.rebalance_plan_summary('items')}),
	"$plan_rows/$plan_steps", 'rebalance_plan_summary() gives the same plan as rows');
# the bytes of the rows to copy, per source and target: what pg_column_size
# says of those rows (the rows r4 gains), counted on the sources
my ($plan_bytes, $gained_bytes) = split /\//, $coordinator->safe_psql('postgres', q{
	SELECT (SELECT sum(s.bytes) FROM ringshard.rebalance_plan_summary('items') s) || '/' ||
	       (SELECT sum(pg_column_size(i.*)) FROM items i WHERE 'r4' = ANY (replicas_of(i)))});
cmp_ok($plan_bytes, '>', 0, "the plan counts the bytes of the rows to copy ($plan_bytes)");
# (a row formed on the coordinator may pack a value a few bytes apart from its stored form)
cmp_ok(abs($plan_bytes - $gained_bytes), '<=', $gained_bytes / 100,
	"the plan's bytes are the bytes of the rows r4 gains ($plan_bytes against $gained_bytes, within 1 %)");
is($coordinator->safe_psql('postgres', q{SELECT bool_and(s.bytes > 0 AND s.size = pg_size_pretty(s.bytes)) FROM ringshard.rebalance_plan_summary('items') s}),
	't', 'each pair has its bytes, and their size as pg_size_pretty writes it');
like($err, qr/\d+ steps, \d+ rows to copy \(\d+ (?:bytes|kB|MB)\)/, 'the dry run says the size of the rows to copy');
is($coordinator->safe_psql('postgres', q{SELECT count(*) FROM ringshard.rebalance_progress}), '0',
	'a dry run changes nothing');

# Start the move slowly, kill the coordinator in the middle of it.
my $mover = $coordinator->background_psql('postgres', on_error_stop => 0);
$mover->query_until(qr/started/, q{
	\echo started
	CALL ringshard.rebalance('items', batch => 20, pause_ms => 150);
});
ok($coordinator->poll_query_until('postgres',
	q{SELECT coalesce(sum(rows_done), 0) > 40 FROM ringshard.rebalance_status}),
	'the move makes progress a person can watch');
# One move of a table at a time: a second session's rebalance would find the
# first one's steps pending and clear their targets of rows it copies.  And
# no verify or repair in the middle: rows are where the move has them.
($rc, $out, $err) = $coordinator->psql('postgres', q{CALL ringshard.rebalance('items')});
like($err, qr/ERROR:  another session is rebalancing table items/,
	'a second session\'s rebalance of the table is refused while the first runs') or diag($err);
is($coordinator->safe_psql('postgres', q{SELECT count(*) FROM ringshard.rebalance_progress WHERE state = 'pending'}) > 0, 1,
	'... and changed nothing: steps are still pending');
($rc, $out, $err) = $coordinator->psql('postgres', q{SELECT * FROM ringshard.repair_table('items')});
like($err, qr/ERROR:  table items has an unfinished rebalance/, 'repair_table is refused in the middle of a move') or diag($err);
# ... nor a second change of the ring: the move keeps the plan it began with
($rc, $out, $err) = $coordinator->psql('postgres', q{SELECT ringshard.set_node_weight('r4', 2)});
like($err, qr/ERROR:  ring "default" cannot change while table public\.items has an unfinished rebalance/,
	'a second change of the ring is refused in the middle of a move') or diag($err);
# rebalance_status, read in the middle: the rows of the whole plan, the rows
# copied so far, and the percent that is their ratio.
my ($st_steps, $st_done, $st_total, $st_rows_done, $st_percent, $st_exact) = split /\|/, $coordinator->safe_psql('postgres',
	q{SELECT steps, steps_done, rows_total, rows_done, percent, round(100.0 * rows_done / rows_total, 1)
	    FROM ringshard.rebalance_status WHERE table_name = 'items'::regclass});
note("status when the coordinator was about to be killed: step $st_done of $st_steps, rows $st_rows_done of $st_total ($st_percent %)");
is($st_steps, $plan_steps, 'rebalance_status counts every step of the plan');
cmp_ok($st_total, '>=', $plan_rows, 'rows_total is the whole plan from the first step on, not the steps started so far');
cmp_ok($st_rows_done, '<', $st_total, 'rows_done is below rows_total in the middle of the move');
is($st_percent, $st_exact, "percent is rows_done against rows_total ($st_percent)");
my ($st_phase, $st_rate, $st_left, $st_left_exact) = split /\|/, $coordinator->safe_psql('postgres',
	q{SELECT phase, rows_per_second, extract(epoch FROM time_left)::bigint,
	         round((rows_total - rows_done) * extract(epoch FROM updated_at - started_at) / rows_done)::bigint
	    FROM ringshard.rebalance_status WHERE table_name = 'items'::regclass});
note("rate when the coordinator was about to be killed: $st_rate rows/s, $st_left s left");
is($st_phase, 'copying', 'the phase is copying while steps have rows to copy');
cmp_ok($st_rate, '>', 0, 'rows_per_second is the rate since the move started');
is($st_left, $st_left_exact, 'time_left is the rows left at that rate, to the second');
cmp_ok($st_done, '<', $st_steps, 'steps_done is below steps in the middle of the move');
# Reads in the middle of the move, some steps copied and some not, find
# every row once; writes during the move, of keys that move (copied or not)
# and of keys that do not, survive it.
is($coordinator->safe_psql('postgres', 'SELECT count(*) || \'/\' || count(DISTINCT id) FROM items'), '1200/1200',
	'in the middle of the move a fan-out reads every row once');
is($coordinator->safe_psql('postgres', 'SELECT count(*) FROM items WHERE id = ANY (ARRAY(SELECT generate_series(1, 1200)::bigint))'),
	'1200', 'and reads by key find every row');
my ($during_rc, $during_out, $during_err) = $coordinator->psql('postgres',
	join('', map { "INSERT INTO items VALUES ($_, 'during-$_');\n" } 1201 .. 1300));
is($during_rc, 0, 'every write during the move succeeds, one INSERT at a time') or diag($during_err);
my $progress = $coordinator->safe_psql('postgres',
	q{SELECT sum(steps_done) || '/' || sum(steps) || ' steps, ' || sum(rows_done) || ' rows' FROM ringshard.rebalance_status});
note("progress when the coordinator was killed: $progress");
my $killed_pid = $coordinator->{_pid};
$coordinator->kill9;
eval { $mover->quit };
for (1 .. 300)
{
	last unless kill(0, $killed_pid);
	select(undef, undef, undef, 0.1);
}
$coordinator->start;
is($coordinator->safe_psql('postgres', q{SELECT count(*) > 0 FROM ringshard.rebalance_progress WHERE state <> 'done'}), 't',
	'the interrupted rebalance left its unfinished steps');

is($coordinator->safe_psql('postgres', q{LOAD 'ringshard'; SHOW ringshard.rebalance_notice_interval}), '5s',
	'progress is reported every 5 s by default');
# The rest of the move, paced to take a few seconds, with a progress line at
# most every second.
my $started = time;
($rc, $out, $err) = $coordinator->psql('postgres',
	q{SET ringshard.rebalance_notice_interval = '1s'; CALL ringshard.rebalance('items', batch => 20, pause_ms => 100)});
my $elapsed = time - $started;
is($rc, 0, 'calling rebalance again resumes and finishes the move');
like($err, qr/rebalance of public\.items: resuming at step \d+ of $plan_steps, rows \d+ of \d+ copied/,
	'it says where it resumes, as step k of N and rows x of y');
my @steps_reported = $err =~ /rebalance of public\.items: step (\d+) of $plan_steps, rows \d+ of \d+ \([\d.]+ %\)/g;
my @rows_reported = $err =~ /rebalance of public\.items: step \d+ of $plan_steps, rows (\d+) of \d+ \(/g;
note(sprintf('%d progress lines in %.1f s: steps %s', scalar(@steps_reported), $elapsed, join(' ', @steps_reported)));
cmp_ok($elapsed, '>', 3, 'the paced move takes a few seconds');
cmp_ok(scalar(@steps_reported), '>=', 2, 'progress lines appear while it runs');
cmp_ok(scalar(@steps_reported), '<=', int($elapsed) + 1, 'and no more often than that');
is(join(' ', @steps_reported), join(' ', sort { $a <=> $b } @steps_reported), 'the steps reported go forward');
is(join(' ', @rows_reported), join(' ', sort { $a <=> $b } @rows_reported), 'so do the rows');
cmp_ok(scalar(split /\n/, $err), '<=', scalar(@steps_reported) + 3, 'nothing else but the resume and the end');
is($coordinator->safe_psql('postgres', "SELECT payload FROM items WHERE id = ${moving_old}::bigint"), 'changed-again',
	'the changes made before the rebalance to a key that moved are on its new replicas');
my ($copied, $deleted) = $err =~ /rebalance of public\.items complete: $plan_steps steps, (\d+) rows copied, (\d+) deleted/;
ok(defined $deleted, 'it ends with the totals') or diag($err);
# the rows that moved: the planned ones, and those of the moving keys written during the move
my $moved_during = $coordinator->safe_psql('postgres',
	q{SELECT count(*) FROM generate_series(1201, 1300) g WHERE 'r4' = ANY (replicas_for(g::bigint))});
# (a key written during the move went to its old replicas if its batch was not copied yet, else to its new ones)
cmp_ok($deleted, '>=', $preview_rows, "every planned row was deleted once from the node that left it ($preview_rows)");
cmp_ok($deleted, '<=', $preview_rows + $moved_during, "and at most the $moved_during moving keys written during the move besides");
cmp_ok($copied, '>=', $plan_rows, 'every planned row was copied (and the rows written during the move that it met)');
is($coordinator->safe_psql('postgres', q{SELECT count(*) FROM ringshard.rebalance_progress}), '0',
	'no unfinished steps remain');

# Every worker holds exactly its rows under the new topology, each once.
my $total = 0;
for my $i (1 .. 4)
{
	my $expected = $coordinator->safe_psql('postgres',
		"SELECT string_agg(g::text, ',' ORDER BY g) FROM generate_series(1, 1300) g WHERE 'r$i' = ANY (replicas_for(g::bigint))");
	my $actual = $workers[ $i - 1 ]->safe_psql('postgres', q{SELECT string_agg(id::text, ',' ORDER BY id) FROM items});
	is($actual, $expected, "r$i holds exactly its rows after the move, each once");
	$total += $workers[ $i - 1 ]->safe_psql('postgres', 'SELECT count(*) FROM items');
}
is($total, 2600, 'no row lost or duplicated: 1300 rows (100 written during the move), two copies each');
for my $pair ([ 1, 4 ], [ 2, 4 ], [ 3, 4 ], [ 1, 2 ])
{
	my ($a, $b) = @$pair;
	my $ids = $coordinator->safe_psql('postgres',
		"SELECT coalesce(string_agg(g::text, ','), '0') FROM generate_series(1, 1300) g WHERE replicas_for(g::bigint) @> ARRAY['r$a', 'r$b']");
	my $sql = "SELECT md5(string_agg(i::text, ';' ORDER BY id)) FROM items i WHERE id IN ($ids)";
	is($workers[ $a - 1 ]->safe_psql('postgres', $sql), $workers[ $b - 1 ]->safe_psql('postgres', $sql),
		"r$a and r$b hold identical copies");
}

# About a quarter of the rows changed hands, as the preview said; rows that
# stayed on a worker are the same row versions (untouched).
my $moved = $coordinator->safe_psql('postgres', q{
	SELECT count(*) FROM expected_before e WHERE e.replicas <> replicas_for(e.id::bigint)});
is($moved, $preview_rows, "the rows whose replica set changed are the ones the preview named ($moved of 1200)");
cmp_ok(abs($moved / 1200 - 2 * $preview_owner_fraction), '<', 0.12,
	"with two copies, about twice the owner share moved ($moved of 1200; owner share $preview_owner_fraction)");
for my $i (1 .. 3)
{
	my %now = map { split /:/ } split /,/, $workers[ $i - 1 ]->safe_psql('postgres',
		q{SELECT string_agg(id || ':' || xmin, ',' ORDER BY id) FROM items});
	my ($kept, $rewritten) = (0, 0);
	for my $pair (split /,/, $before[ $i - 1 ])
	{
		my ($id, $xmin) = split /:/, $pair;
		next unless exists $now{$id};
		next if $id == $moving_old;	# changed by the test before the move
		$kept++;
		$rewritten++ if $now{$id} ne $xmin;
	}
	is($rewritten, 0, "r$i: the $kept rows it kept were not rewritten");
}

# With progress on every page (interval 0), a line is printed only when it
# says something new: a step whose last page and end report the same rows
# gives one line, not two.
$coordinator->safe_psql('postgres', q{SELECT ringshard.set_node_weight('r4', 2)});
($rc, $out, $err) = $coordinator->psql('postgres',
	q{SET ringshard.rebalance_notice_interval = 0; CALL ringshard.rebalance('items', batch => 50)});
is($rc, 0, 'a second move, reporting on every page, finishes') or diag($err);
my @lines = $err =~ /rebalance of public\.items: (step \d+ of \d+, rows \d+ of \d+ \([\d.]+ %\))/g;
cmp_ok(scalar(@lines), '>=', 2, 'it reports its steps (' . scalar(@lines) . ' lines)');
my %seen;
my @repeated = grep { $seen{$_}++ } @lines;
is(scalar(@repeated), 0, 'no progress line is printed twice') or diag(join("\n", @repeated));

$_->stop for ($coordinator, @workers);
done_testing();

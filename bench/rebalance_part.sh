#!/usr/bin/env bash
# Part 10 of bench/run, inside a throwaway server (started with
# shared_preload_libraries = 'ringshard', max_prepared_transactions = 20,
# fsync = on, max_wal_size = 4GB): rebalance at scale (issue 19).
#
# One server, databases rb_c (the coordinator), rb_w1..rb_w4 (workers) and
# rb_scratch; table faces (nik text PRIMARY KEY, score float8, payload text)
# on ring 'default' at R = 2 over rb_w1..rb_w3, RB_ROWS rows (1,000,000;
# 100,000 with RB_QUICK=1) loaded by COPY.  Then, measured in this run:
#   baseline  a plain COPY of the rows the move will copy, node to node:
#             psql -d rb_w1 -c "COPY (SELECT ... LIMIT n) TO STDOUT" |
#             psql -d rb_scratch -c "COPY faces_copy FROM STDIN" (the same
#             table definition, its primary key included); rows/s;
#   add       add_node('w4'), sync_topology(), CALL rebalance('faces'): rows
#             copied per second over the whole move and over its first and last
#             tenth of the rows (operation_progress sampled every 0.05 s from
#             another session, the moment a tenth is reached interpolated
#             between two samples; the first tenth counts from the CALL's
#             start, the last ends with the CALL); meanwhile one session runs UPDATEs by key of
#             random rows (moving or not), one after another (psql's \timing):
#             the longest any of them took is the longest a write waited on
#             the move (each step holds the table against writers while its
#             copy commits);
#   remove    the same for remove_node('w2') and its rebalance.
# After each move: ringshard.verify_table('faces') (every replica the same
# rows) and the row count.
#
# Environment: OUT, BENCH_STARTED, RB_ROWS, RB_QUICK.  Writes OUT/rebalance/report.txt
# and OUT/rebalance/results.txt (RESULT lines for targets.awk).
set -euo pipefail
touch "$BENCH_STARTED"		# the server is up: failures from here on are real

if [ "${RB_QUICK:-0}" = 1 ]; then : "${RB_ROWS:=100000}"; fi
NROWS=${RB_ROWS:-1000000}
D="$OUT/rebalance"
mkdir -p "$D"
chmod 755 "$D"
REPORT="$D/report.txt"
RES="$D/results.txt"
: >"$REPORT"
: >"$RES"
log() { echo "bench: $*" >&2; }
say() { echo "$*" >>"$REPORT"; }
q() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
qa() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }
now() { date +%s.%N; }
C=rb_c
socket=$(qa -d postgres -c "SHOW unix_socket_directories" | cut -d, -f1)
port=$(qa -d postgres -c "SHOW port")

log "part 10: setup (coordinator, 4 workers, $NROWS rows at R = 2 on 3 of them)"
t0=$(date +%s)
for w in w1 w2 w3 w4; do
	createdb "rb_$w"
	q -d "rb_$w" -c "CREATE EXTENSION ringshard" >/dev/null
done
createdb rb_scratch
q -d rb_scratch -c "CREATE TABLE faces_copy (nik text PRIMARY KEY, score float8, payload text)"
createdb "$C"
q -d "$C" >/dev/null <<SQL
CREATE EXTENSION ringshard;
SELECT ringshard.add_node('w1', 'host=$socket port=$port dbname=rb_w1');
SELECT ringshard.add_node('w2', 'host=$socket port=$port dbname=rb_w2');
SELECT ringshard.add_node('w3', 'host=$socket port=$port dbname=rb_w3');
SELECT ringshard.set_replication_factor('default', 2);
SELECT count(*) FROM ringshard.sync_topology();
CREATE TABLE faces (nik text PRIMARY KEY, score float8, payload text);
SELECT ringshard.distribute_table('faces', 'nik');
SELECT ringshard.create_distributed_table('faces');
SQL
q -d "$C" -c "\\copy (SELECT (3201000000000000 + i)::text, (hashint4(i)::float8 + 2147483648) / 4294967296, 'face-' || md5(i::text) FROM generate_series(1, $NROWS) i) TO '$D/faces.tsv'"
chmod 644 "$D/faces.tsv"
q -d "$C" -c "COPY faces FROM '$D/faces.tsv'" >/dev/null
rm -f "$D/faces.tsv"
for w in w1 w2 w3 w4; do q -d "rb_$w" -c "VACUUM ANALYZE" >/dev/null 2>&1 || true; done
say "  server: $(qa -d postgres -c 'SHOW server_version') on port $port; fsync=$(qa -d postgres -c 'SHOW fsync'); databases $C, rb_w1..4, rb_scratch"
say "  data: $NROWS rows of faces (nik text PRIMARY KEY, score float8, payload text), ring 'default' at R = 2 over w1..w3; setup $(( $(date +%s) - t0 )) s"

# writer_keys: keys whose replica set the change leaves alone (replicas_for
# before the change, saved; compared after it), for the writer session.
save_replicas() { q -d "$C" -c "DROP TABLE IF EXISTS before_change; CREATE TABLE before_change AS SELECT nik, replicas_for(nik) AS r FROM (SELECT (3201000000000000 + i)::text AS nik FROM generate_series(1, $NROWS, 97) i) k"; }
writer_script() {	# writer_script FILE: UPDATEs by key of random rows (moving or not), \timing on
	local f=$1
	{
		echo '\timing on'
		qa -d "$C" -c "SELECT format('UPDATE faces SET score = score + 1 WHERE nik = %L;', nik) FROM before_change ORDER BY md5(nik) LIMIT 2000"
	} >"$f"
}

# move LABEL SQL: the topology change, then the rebalance with a writer and a sampler running
move() {
	local label=$1 change=$2 wfile="$D/writer_$1.sql" wout="$D/writer_$1.out" sfile="$D/samples_$1.txt"
	local wpid spid t_start t_end copied writes max_wait rate first last total
	save_replicas
	q -d "$C" -c "$change" -c "SELECT count(*) FROM ringshard.sync_topology()" >/dev/null
	writer_script "$wfile"
	total=$(qa -d "$C" -c "SELECT coalesce(sum(rows), 0) FROM ringshard.rebalance_plan_summary('faces')")
	# the sampler: (seconds since the epoch, rows copied) every 0.05 s from one
	# session (psql's \watch; a new connection per sample would cost more than
	# the interval), for at most 3 hours: the rebalance's row of
	# operation_progress (which counts a batch as it is copied), else the
	# batches committed
	timeout 10800 psql -X -q -At -F'|' -d "$C" >"$sfile" 2>/dev/null <<<"SELECT extract(epoch FROM clock_timestamp()), coalesce((SELECT max(rows_done) FROM ringshard.operation_progress WHERE command = 'rebalance'), (SELECT sum(rows_done) FROM ringshard.rebalance_status), 0) \\watch 0.05" &
	spid=$!
	# the writer: its UPDATEs one after another, as long as the move takes (bounded by the script's length)
	( for ((i = 0; i < 1000; i++)); do psql -X -q -d "$C" -f "$wfile" 2>&1 || true; done ) >"$wout" &
	wpid=$!
	t_start=$(now)
	q -d "$C" -c "SET client_min_messages = warning" -c "CALL ringshard.rebalance('faces')" >/dev/null
	t_end=$(now)
	kill "$wpid" "$spid" 2>/dev/null || true
	wait "$wpid" "$spid" 2>/dev/null || true
	copied=$(awk -v s="$t_start" -v e="$t_end" -v n="$total" 'BEGIN { printf "%d", n / (e - s) }')
	writes=$(grep -c '^Time:' "$wout" || true)
	max_wait=$(sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' "$wout" | sort -g | tail -1)
	# the first and last tenth of the rows, from the samples: the time to go
	# from the CALL's start to 10 % of the rows copied, and from 90 % to the
	# CALL's end (the deletes included); the moment a share is reached is
	# interpolated between the two samples around it
	read -r first last < <(awk -v n="$total" -v s="$t_start" -v e="$t_end" -F'|' '
		function reached(share,   i, x) {
			x = share * n
			for (i = 2; i <= m; i++)
				if (r[i] >= x && r[i - 1] < x)
					return t[i - 1] + (t[i] - t[i - 1]) * (x - r[i - 1]) / (r[i] - r[i - 1])
			return ""
		}
		NF >= 2 { m++; t[m] = $1; r[m] = $2 }
		END {
			b = reached(0.1); c = reached(0.9)
			if (b == "" || c == "" || b <= s || e <= c) { print "0 0"; exit }
			printf "%d %d\n", 0.1 * n / (b - s), 0.1 * n / (e - c)
		}' "$sfile")
	say "  $label: $total rows to copy (the plan's copies); rebalance $(awk -v s="$t_start" -v e="$t_end" 'BEGIN { printf "%.1f", e - s }') s, $copied rows/s"
	say "    rows/s over the first tenth of the rows $first, over the last tenth $last"
	say "    writer: $writes UPDATEs by key during the move ($(qa -d "$C" -c "SELECT count(*) FROM before_change WHERE r <> replicas_for(nik)") of the $(qa -d "$C" -c "SELECT count(*) FROM before_change") sampled keys move), the longest $max_wait ms, errors: $(grep -c ERROR "$wout" || true)"
	say "    after: $(qa -d "$C" -c "SELECT count(*) FROM faces") rows; verify_table: $(qa -d "$C" -c "SELECT count(*) FROM ringshard.verify_table('faces')" 2>&1 | tail -1) problems"
	echo "RESULT rebalance move=$label rows=$total rows_per_s=$copied first_tenth=$first last_tenth=$last max_write_ms=${max_wait:-0} writes=$writes" >>"$RES"
}

# The baseline: a plain COPY of as many rows as the first move copies, between two nodes.
save_replicas
n_base=$(qa -d "$C" -c "SELECT coalesce(sum(rows), 0) FROM ringshard.plan_table_summary('faces', 'add', 'w4')")
[ "$n_base" -gt 0 ] || n_base=$((NROWS / 2))
q -d rb_scratch -c "TRUNCATE faces_copy" -c "CHECKPOINT" >/dev/null
t_start=$(now)
psql -X -q -d rb_w1 -c "COPY (SELECT nik, score, payload FROM public.faces LIMIT $n_base) TO STDOUT" |
	psql -X -q -v ON_ERROR_STOP=1 -d rb_scratch -c "COPY faces_copy FROM STDIN"
t_end=$(now)
base_rate=$(awk -v s="$t_start" -v e="$t_end" -v n="$n_base" 'BEGIN { printf "%d", n / (e - s) }')
say "  baseline: plain COPY ... TO STDOUT | COPY ... FROM STDIN of $n_base rows, node to node (primary key on the target): $base_rate rows/s"
echo "RESULT rebalance move=baseline rows=$n_base rows_per_s=$base_rate" >>"$RES"
q -d rb_scratch -c "TRUNCATE faces_copy" >/dev/null

move add "SELECT ringshard.add_node('w4', 'host=$socket port=$port dbname=rb_w4')"
move remove "SELECT ringshard.remove_node('w2')"

say ""
say "  Targets of part 10 (issue 19; measured in this run)"
awk -v base="$base_rate" '
	function t(desc, x, bound, le) {
		if (x == "") { printf "  N/A   %s\n", desc; return }
		ok = le ? x <= bound : x >= bound
		printf "  %-4s  %-66s %8.2f  (target %s %s)\n", ok ? "PASS" : "MISS", desc, x, le ? "<=" : ">=", bound
	}
	/move=add|move=remove/ {
		split($0, f, " "); for (i in f) { split(f[i], kv, "="); v[kv[1]] = kv[2] }
		t(sprintf("rebalance (%s) / plain COPY between two nodes, rows/s", v["move"]), base > 0 ? v["rows_per_s"] / base : "", 0.5, 0)
		# within 20 %: the slower tenth against the faster
		lo = v["first_tenth"] < v["last_tenth"] ? v["first_tenth"] : v["last_tenth"]
		hi = v["first_tenth"] < v["last_tenth"] ? v["last_tenth"] : v["first_tenth"]
		t(sprintf("rebalance (%s), slower / faster of the first and last tenth, rows/s", v["move"]), lo > 0 ? lo / hi : "", 0.8, 0)
		t(sprintf("rebalance (%s), longest write wait, s", v["move"]), v["writes"] > 0 ? v["max_write_ms"] / 1000 : "", 1, 1)
	}' "$RES" >>"$REPORT"
cat "$REPORT"

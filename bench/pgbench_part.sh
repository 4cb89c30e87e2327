#!/usr/bin/env bash
# Part 8 of bench/run, inside a throwaway server (started with
# shared_preload_libraries = 'ringshard', max_prepared_transactions = 20,
# fsync = on, max_wal_size = 4GB): pgbench TPC-B and select-only (issue 21).
#
# One server, thirteen databases, four variants of pgbench's tables at the same scale:
#   local  bench_local: pgbench -i, plain local tables (the baseline)
#   rs1    bench_rs1: pgbench -i, then the four tables distributed as docs/cluster.md
#          shows, ring 'default' at R = 1 over the workers bench_rs1_w1..3
#   rs2    bench_rs2: the same at R = 2 over bench_rs2_w1..3
#   peer   bench_peer: the four tables PARTITION BY HASH (accounts by aid, tellers by
#          tid, branches by bid, history by aid) into 3 postgres_fdw foreign tables on
#          bench_peer_w1..3, loaded by pgbench -i -I G (the same rows as pgbench -i)
# (each variant has its own workers: ringshard keeps a table under the same
# schema and name on its nodes, and pgbench's table names are fixed.)
#
# Runs, medians of PGB_ROUNDS rounds after one untimed warm-up round; each round
# runs every variant once per workload, in an order that rotates between rounds:
#   tpcb4  pgbench -n -c 4 -j 2 -T PGB_SECS --max-tries PGB_MAX_TRIES   (TPC-B, simple protocol)
#   tpcb1  pgbench -n -c 1 -j 1 -T PGB_SECS --max-tries PGB_MAX_TRIES
#   sel4   pgbench -n -S -c 4 -j 2 -M prepared -T PGB_SECS --max-tries PGB_MAX_TRIES
# and, for TPC-B only, a diagnostic variant rs2_1pc: bench_rs2 with ringshard.two_phase_commit
# = off (what the commit protocol costs; no target).  During round 1's tpcb4 runs, one session
# samples pg_stat_activity every 0.1 s: what the backends of the variant's databases wait for.
# Untimed before each run: a CHECKPOINT, so no variant pays for another's dirty pages.
# After the runs: the TPC-B invariant of every variant, ringshard.verify_table of every
# distributed table, and the prepared transactions left on the server.
#
# Needs only a server (PGHOST/PGPORT...) and psql, pgbench, createdb in PATH.
# Environment: OUT (a directory), BENCH_STARTED, PGB_SCALE (4), PGB_SECS (10),
# PGB_WARMUP_SECS (2), PGB_ROUNDS (3), PGB_MAX_TRIES (10); PGB_QUICK=1 sets the quick
# sizes of bench/run --quick (scale 1, 2 s, 1 s warm-up, 3 rounds) unless given.
# Writes OUT/pgbench/report.txt and OUT/pgbench/results.txt (RESULT lines for
# targets.awk); prints the report on stdout.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
touch "$BENCH_STARTED"		# the server is up: failures from here on are real

if [ "${PGB_QUICK:-0}" = 1 ]; then
	: "${PGB_SCALE:=1}" "${PGB_SECS:=2}" "${PGB_WARMUP_SECS:=1}" "${PGB_ROUNDS:=3}"
fi
SCALE=${PGB_SCALE:-4}
SECS=${PGB_SECS:-10}
WARM=${PGB_WARMUP_SECS:-2}
ROUNDS=${PGB_ROUNDS:-3}
TRIES=${PGB_MAX_TRIES:-10}
D="$OUT/pgbench"
mkdir -p "$D"
chmod 755 "$D"
REPORT="$D/report.txt"
T="$D/runs.txt"			# "round variant workload tps processed failed retried serialization deadlock aborted cpu_ms coordinator_ms workers_ms"
: >"$T"
STM="$D/statements.txt"		# "round variant workload" + TPC-B's 7 statement latencies (ms)
: >"$STM"
: >"$REPORT"
log() { echo "bench: $*" >&2; }
say() { echo "$*" >>"$REPORT"; }
q() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
qa() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }

socket=$(qa -d postgres -c "SHOW unix_socket_directories" | cut -d, -f1)
port=$(qa -d postgres -c "SHOW port")
VARIANTS="local rs1 rs2 peer"
WORKLOADS="tpcb4 tpcb1 sel4"
TABLES="pgbench_accounts pgbench_tellers pgbench_branches pgbench_history"
# diagnostic variant of the TPC-B runs (no target): R = 2 with ringshard.two_phase_commit = off
# (superuser only), what the commit protocol costs
DIAG_VARIANTS="rs2_1pc"
variants_of() { case $1 in tpcb*) echo "$VARIANTS $DIAG_VARIANTS" ;; *) echo "$VARIANTS" ;; esac; }
db_of() { case $1 in rs2_1pc) echo bench_rs2 ;; *) echo "bench_$1" ;; esac; }

rotate() {	# rotate R WORD...: the words, starting at index R mod their count
	local r=$1
	shift
	local a=("$@") n=$# i
	for ((i = 0; i < n; i++)); do echo "${a[(i + r) % n]}"; done
}

# ---------------------------------------------------------------- setup
log "part 8: setup (pgbench scale $SCALE: local, ringshard R = 1 and R = 2 on 3 workers each, postgres_fdw peer on 3 workers)"
t0=$(date +%s)
step() { log "  setup: $* ($(( $(date +%s) - t0 )) s)"; }
createdb bench_local
pgbench -i -q -s "$SCALE" bench_local >"$D/init_local.txt" 2>&1 || { cat "$D/init_local.txt" >&2; exit 1; }
step "local tables"

for r in 1 2; do
	c=bench_rs$r
	for w in 1 2 3; do
		createdb "${c}_w$w"
		q -d "${c}_w$w" -c "CREATE EXTENSION ringshard" >/dev/null
	done
	createdb "$c"
	q -d "$c" >/dev/null <<SQL
CREATE EXTENSION ringshard;
SELECT ringshard.add_node('w1', 'host=$socket port=$port dbname=${c}_w1');
SELECT ringshard.add_node('w2', 'host=$socket port=$port dbname=${c}_w2');
SELECT ringshard.add_node('w3', 'host=$socket port=$port dbname=${c}_w3');
SELECT ringshard.set_replication_factor('default', $r);
SELECT count(*) FROM ringshard.sync_topology();
SQL
	pgbench -i -q -s "$SCALE" "$c" >"$D/init_rs$r.txt" 2>&1 || { cat "$D/init_rs$r.txt" >&2; exit 1; }
	step "ringshard R = $r: coordinator, workers, pgbench -i"
	# the recipe of docs/cluster.md, "Concurrent writers, and pgbench"
	q -d "$c" >/dev/null 2>"$D/distribute_rs$r.txt" <<'SQL'
SELECT ringshard.distribute_table('pgbench_accounts', 'aid');
SELECT ringshard.distribute_table('pgbench_tellers', 'tid');
SELECT ringshard.distribute_table('pgbench_branches', 'bid');
SELECT ringshard.distribute_table('pgbench_history', 'aid');
SELECT ringshard.create_distributed_table(t)
  FROM unnest('{pgbench_accounts,pgbench_tellers,pgbench_branches,pgbench_history}'::regclass[]) t;
SQL
	step "ringshard R = $r: tables distributed"
	for w in 1 2 3; do
		q -d "${c}_w$w" -c "VACUUM ANALYZE" >/dev/null
	done
	step "ringshard R = $r: workers vacuumed"
done

# the peer: the classic hand-made sharding with postgres_fdw
for w in 1 2 3; do
	createdb "bench_peer_w$w"
	q -d "bench_peer_w$w" >/dev/null <<'SQL'
CREATE TABLE pgbench_accounts (aid int NOT NULL PRIMARY KEY, bid int, abalance int, filler char(84)) WITH (fillfactor = 100);
CREATE TABLE pgbench_tellers (tid int NOT NULL PRIMARY KEY, bid int, tbalance int, filler char(84)) WITH (fillfactor = 100);
CREATE TABLE pgbench_branches (bid int NOT NULL PRIMARY KEY, bbalance int, filler char(88)) WITH (fillfactor = 100);
CREATE TABLE pgbench_history (tid int, bid int, aid int, delta int, mtime timestamp, filler char(22));
SQL
done
createdb bench_peer
q -d bench_peer >/dev/null <<SQL
CREATE EXTENSION postgres_fdw;
CREATE TABLE pgbench_accounts (aid int NOT NULL, bid int, abalance int, filler char(84)) PARTITION BY HASH (aid);
CREATE TABLE pgbench_tellers (tid int NOT NULL, bid int, tbalance int, filler char(84)) PARTITION BY HASH (tid);
CREATE TABLE pgbench_branches (bid int NOT NULL, bbalance int, filler char(88)) PARTITION BY HASH (bid);
CREATE TABLE pgbench_history (tid int, bid int, aid int, delta int, mtime timestamp, filler char(22)) PARTITION BY HASH (aid);
DO \$\$
DECLARE t text;
BEGIN
	FOR w IN 1 .. 3 LOOP
		EXECUTE format('CREATE SERVER peer_w%s FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host %L, port %L, dbname %L, batch_size %L)',
		               w, '$socket', '$port', 'bench_peer_w' || w, '1000');
		EXECUTE format('CREATE USER MAPPING FOR CURRENT_USER SERVER peer_w%s', w);
		FOREACH t IN ARRAY ARRAY['pgbench_accounts', 'pgbench_tellers', 'pgbench_branches', 'pgbench_history'] LOOP
			EXECUTE format('CREATE FOREIGN TABLE %I PARTITION OF %I FOR VALUES WITH (MODULUS 3, REMAINDER %s) SERVER peer_w%s OPTIONS (schema_name %L, table_name %L)',
			               t || '_p' || (w - 1), t, w - 1, w, 'public', t);
		END LOOP;
	END LOOP;
END \$\$;
SQL
# -I G: pgbench's own server-side generation (TRUNCATE, then INSERT ... SELECT
# generate_series), the rows of pgbench -i; through the partitions to the workers
pgbench -i -q -I G -s "$SCALE" bench_peer >"$D/init_peer.txt" 2>&1 || { cat "$D/init_peer.txt" >&2; exit 1; }
step "peer loaded"
for w in 1 2 3; do
	q -d "bench_peer_w$w" -c "VACUUM ANALYZE" >/dev/null
done
q -d bench_peer -c "ANALYZE" >/dev/null
step "peer analyzed"

# the same rows everywhere, or the comparison is void
rows_of() { qa -d "$(db_of "$1")" -F ' ' -c "SELECT (SELECT count(*) FROM pgbench_accounts), (SELECT count(*) FROM pgbench_tellers), (SELECT count(*) FROM pgbench_branches), (SELECT count(*) FROM pgbench_history), (SELECT sum(aid::bigint * 7 + bid) FROM pgbench_accounts)"; }
expected=$(rows_of local)
for v in rs1 rs2 peer; do
	got=$(rows_of $v)
	if [ "$got" != "$expected" ]; then
		log "$v holds other rows than bench_local: $got, not $expected (accounts, tellers, branches, history, checksum)"
		exit 1
	fi
done
say "  server: $(qa -d postgres -c 'SHOW server_version') on port $port; shared_buffers=$(qa -d postgres -c 'SHOW shared_buffers'), fsync=$(qa -d postgres -c 'SHOW fsync'), synchronous_commit=$(qa -d postgres -c 'SHOW synchronous_commit'), max_prepared_transactions=$(qa -d postgres -c 'SHOW max_prepared_transactions'), max_wal_size=$(qa -d postgres -c 'SHOW max_wal_size'), default_transaction_isolation=$(qa -d postgres -c 'SHOW default_transaction_isolation')"
say "  data: pgbench scale $SCALE ($(cut -d' ' -f1 <<<"$expected") accounts, $(cut -d' ' -f2 <<<"$expected") tellers, $(cut -d' ' -f3 <<<"$expected") branches), checked equal in all four variants; setup $(( $(date +%s) - t0 )) s"
say "  local: bench_local, pgbench -i; ringshard: bench_rs1 / bench_rs2, pgbench -i then the 4 tables distributed (docs/cluster.md),"
say "    ring 'default' at R = 1 / R = 2 over 3 worker databases each; peer: bench_peer, the 4 tables PARTITION BY HASH"
say "    (aid, tid, bid, aid), 3 postgres_fdw foreign partitions each on 3 worker databases; all databases of this server,"
say "    workers reached over the Unix socket"

# ---------------------------------------------------------------- runs
# TPC-B's invariant: every transaction adds its delta to one account, one teller,
# one branch and one history row
inv_sql="SELECT (SELECT sum(abalance) FROM pgbench_accounts) || ' ' || (SELECT sum(tbalance) FROM pgbench_tellers) || ' '
             || (SELECT sum(bbalance) FROM pgbench_branches) || ' ' || (SELECT coalesce(sum(delta), 0) FROM pgbench_history) || ' '
             || (SELECT count(*) FROM pgbench_history)"
invariant() {	# invariant VARIANT: "holds|BROKEN a t b h n"
	local a t b h n
	read -r a t b h n <<<"$(qa -d "$(db_of "$1")" -c "$inv_sql")"
	if [ -n "$a" ] && [ "$a" = "$t" ] && [ "$t" = "$b" ] && [ "$b" = "$h" ]; then echo "holds $a $t $b $h $n"; else echo "BROKEN $a $t $b $h $n"; fi
}
INV="$D/invariants.txt"		# "round variant workload holds|BROKEN a t b h n", after every TPC-B run
: >"$INV"
WAITS="$D/waits.txt"		# "variant role wait" per sample and backend (role: coordinator or worker)
: >"$WAITS"
sample_waits() {	# sample_waits DB VARIANT SECS: what the client backends of DB and its workers wait for
	local db=$1 v=$2 n=$(( $3 * 10 )) i
	sleep 0.5	# pgbench's connections are up
	for ((i = 0; i < n - 5; i++)); do
		echo "SELECT '$v', CASE WHEN datname = '$db' THEN 'coordinator' ELSE 'worker' END,
		             coalesce(wait_event_type || ':' || wait_event, 'CPU') || CASE WHEN state = 'idle in transaction' THEN '(idle in transaction)' WHEN state = 'idle' THEN '(idle)' ELSE '' END
		        FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()
		         AND (datname = '$db' OR datname LIKE '${db}\\_w_');"
		echo "SELECT pg_sleep(0.1);"
	done | psql -X -q -At -F ' ' -d postgres >>"$WAITS" 2>/dev/null || true
}

# sample_role_cpu DB SECS FILE: the CPU time (clock ticks, /proc/PID/stat utime + stime) the
# client backends of DB (the coordinator's, or local's) and of its worker databases used from
# 0.5 s into the run to 1 s before its end, and that window's length (s): "window coord worker"
sample_role_cpu() {
	local db=$1 secs=$2 file=$3 t0 t1 pids before after
	sleep 0.5	# pgbench's connections (and the coordinator's to its nodes, at their first statement) are up
	pids=$(qa -d postgres -F ' ' -c "SELECT pid, CASE WHEN datname = '$db' THEN 'c' ELSE 'w' END FROM pg_stat_activity
	        WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() AND (datname = '$db' OR datname LIKE '${db}\_w_')" 2>/dev/null || true)
	ticks() { while read -r pid role; do [ -r "/proc/$pid/stat" ] && awk -v p="$pid" -v r="$role" '{ print p, r, $14 + $15 }' "/proc/$pid/stat" 2>/dev/null; done <<<"$pids"; return 0; }
	t0=$(date +%s.%N); before=$(ticks)
	sleep "$(awk -v s="$secs" 'BEGIN { print (s > 2 ? s - 1.5 : 0.5) }')"
	t1=$(date +%s.%N); after=$(ticks)
	# a backend gone before the second sample counts for neither (pgbench keeps its connections)
	awk -v w="$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" -v before="$before" '
		BEGIN { n = split(before, l, "\n"); for (i = 1; i <= n; i++) if (split(l[i], f, " ") == 3) b[f[1]] = f[3] }
		$1 in b { s[$2] += $3 - b[$1] }
		END { printf "%.3f %d %d\n", w, s["c"], s["w"] }' <<<"$after" >"$file"
}

# pgb ROUND VARIANT WORKLOAD SECS: one pgbench run; a line in $T unless ROUND is 0
pgb() {
	local r=$1 v=$2 wl=$3 secs=$4 db out rc=0 tps proc failed retried ser dl aborted
	db=$(db_of "$v")
	case $wl in
		tpcb4) set -- -c 4 -j 2 ;;
		tpcb1) set -- -c 1 -j 1 ;;
		sel4) set -- -S -M prepared -c 4 -j 2 ;;
	esac
	q -d "$db" -c CHECKPOINT >/dev/null
	out="$D/run_${r}_${v}_$wl.txt"
	# round 1 of TPC-B -c 4: sample what the backends wait for, every 0.1 s, in one session
	local sampler=
	if [ "$r" = 1 ] && [ "$wl" = tpcb4 ]; then
		sample_waits "$db" "$v" "$secs" &
		sampler=$!
	fi
	# TPC-B: the CPU time of the coordinator's (or local's) backends and of the workers'
	local role_file="$D/rolecpu_${r}_${v}_$wl.txt" role_sampler=
	case $wl in tpcb*) sample_role_cpu "$db" "$secs" "$role_file" & role_sampler=$! ;; esac
	local pgopt=${PGOPTIONS:-}
	[ "$v" != rs2_1pc ] || pgopt="$pgopt -c ringshard.two_phase_commit=off"
	# the machine's CPU time over the run (user, nice, system, irq, softirq; in clock ticks)
	local cpu0 cpu1 cpu_ms
	cpu0=$(awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 }' /proc/stat 2>/dev/null || echo 0)
	PGOPTIONS=$pgopt pgbench -n "$@" -T "$secs" --max-tries "$TRIES" --failures-detailed -r "$db" >"$out" 2>&1 || rc=$?
	cpu1=$(awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 }' /proc/stat 2>/dev/null || echo 0)
	[ -z "$sampler" ] || wait "$sampler" || true
	[ -z "$role_sampler" ] || wait "$role_sampler" || true
	tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$out" | head -1)
	proc=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$out")
	failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$out")
	retried=$(sed -n 's/^number of transactions retried: \([0-9]*\).*/\1/p' "$out")
	ser=$(sed -n 's/^number of serialization failures: \([0-9]*\).*/\1/p' "$out")
	dl=$(sed -n 's/^number of deadlock failures: \([0-9]*\).*/\1/p' "$out")
	aborted=$(grep -c 'aborted in command' "$out" || true)
	if [ -z "$tps" ] || [ -z "$proc" ]; then
		log "pgbench gave no figures on $db ($wl, exit $rc): $(head -c 2000 "$out")"
		return 1
	fi
	if [ "$rc" != 0 ] || [ "$aborted" != 0 ]; then
		log "pgbench on $db ($wl): exit $rc, $aborted client(s) aborted: $(grep -m1 -i 'error' "$out" || true)"
	fi
	# CPU time per transaction (ms), the whole machine: pgbench, the coordinator's backends, the workers'
	cpu_ms=$(awk -v a="${cpu0:-0}" -v b="${cpu1:-0}" -v n="$proc" -v hz="$(getconf CLK_TCK 2>/dev/null || echo 100)" \
		'BEGIN { if (n > 0 && b > a) printf "%.3f", (b - a) * 1000 / hz / n; else print "-" }')
	# ... and each role's, per transaction (ms): its ticks over the window, by the transactions of
	# the window (the run's, pro rata: pgbench's rate is steady after its first statements)
	local role_ms="- -"
	if [ -s "$role_file" ]; then
		role_ms=$(awk -v n="$proc" -v secs="$secs" -v hz="$(getconf CLK_TCK 2>/dev/null || echo 100)" \
			'{ x = n * $1 / secs; if (x > 0) printf "%.3f %.3f", $2 * 1000 / hz / x, $3 * 1000 / hz / x; else print "- -" }' "$role_file")
	fi
	[ "$r" = 0 ] || echo "$r $v $wl $tps $proc ${failed:-0} ${retried:-0} ${ser:-0} ${dl:-0} $aborted $cpu_ms $role_ms" >>"$T"
	# TPC-B's per-statement latencies (pgbench -r), ms: BEGIN, the 3 UPDATEs, SELECT, INSERT, END
	case $wl in tpcb*) [ "$r" = 0 ] || awk -v pre="$r $v $wl" '
		/^statement latencies/ { on = 1; next }
		on && $1 ~ /^[0-9.]+$/ {
			if (/ BEGIN;/) s["begin"] = $1; else if (/UPDATE pgbench_accounts/) s["upd_a"] = $1
			else if (/SELECT abalance/) s["sel"] = $1; else if (/UPDATE pgbench_tellers/) s["upd_t"] = $1
			else if (/UPDATE pgbench_branches/) s["upd_b"] = $1; else if (/INSERT INTO pgbench_history/) s["ins"] = $1
			else if (/ END;/) s["end"] = $1
		}
		END { if ("end" in s) print pre, s["begin"], s["upd_a"], s["sel"], s["upd_t"], s["upd_b"], s["ins"], s["end"] }' "$out" >>"$STM" ;;
	esac
	# the TPC-B invariant after every run (the warm-up's too)
	case $wl in tpcb*)
		local inv
		inv=$(invariant "$v")
		echo "$r $v $wl $inv" >>"$INV"
		case $inv in holds*) ;; *) log "  round $r: $v $wl: the TPC-B invariant is BROKEN: $inv" ;; esac ;;
	esac
	log "  round $r: $v $wl: tps $tps, failed ${failed:-0}, retried ${retried:-0}, aborted clients $aborted"
}

log "part 8: 1 warm-up round of $WARM s per run, then $ROUNDS rounds of $SECS s per run (3 workloads x 4 variants, and a diagnostic variant of TPC-B)"
for wl in $WORKLOADS; do
	for v in $(variants_of $wl); do pgb 0 $v $wl "$WARM"; done
done
for ((r = 1; r <= ROUNDS; r++)); do
	for wl in $WORKLOADS; do
		for v in $(rotate $r $(variants_of $wl)); do pgb $r $v $wl "$SECS"; done
	done
	log "  round $r/$ROUNDS done"
done

# ---------------------------------------------------------------- checks
invariants=""
for v in $VARIANTS; do
	invariants="$invariants$v $(invariant $v)
"
done
verify=""
for v in rs1 rs2; do
	for t in $TABLES; do
		p=$(qa -d "$(db_of $v)" -c "SET client_min_messages = warning" -c "SELECT count(*) FROM ringshard.verify_table('$t')")
		verify="$verify $v:$t:$p"
	done
done
leftover=$(qa -d postgres -c "SELECT count(*) FROM pg_prepared_xacts")

# ---------------------------------------------------------------- report
awk -v scale="$SCALE" -v secs="$SECS" -v warm="$WARM" -v rounds="$ROUNDS" -v tries="$TRIES" \
	-v invariants="$invariants" -v verify="$verify" -v leftover="$leftover" -v statements="$STM" \
	-v each_run="$INV" -v waits="$WAITS" \
	-f "$here/pgbench_report.awk" "$T" >>"$REPORT"
awk -v results=1 -v each_run="$INV" -f "$here/pgbench_report.awk" "$T" >"$D/results.txt"
# on stdout (bench/run prints report.txt itself, and these targets in its summary)
cat "$REPORT"
echo
awk -v only=pgbench -f "$here/targets.awk" "$D/results.txt"

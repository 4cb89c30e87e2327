#!/usr/bin/env bash
# Parts 5 and 6 of bench/run, inside a throwaway server (pg_virtualenv -t,
# started with shared_preload_libraries = 'ringshard', max_prepared_transactions
# and fsync = on): distributed tables (issue 12) and two-phase commit (issue 13).
#
# One server, four databases: bench_coordinator and the workers bench_w1..3.
# `faces (nik text PRIMARY KEY, score float8, payload text)` is a distributed
# table of ring 'default' (R = 2), `faces_r1` the same on ring 'r1' (R = 1).
# The peer is what a user would build with postgres_fdw: `faces_peer`, hash
# partitioned by nik into 3 foreign tables on the same worker databases
# (async_capable, batch_size 1000, enable_partitionwise_aggregate = on).
# Baselines: a plain local table `faces_local`, the workers run directly, the peer.
#
# Environment: OUT (a directory), DIST_ROWS, DIST_SELECTS, DIST_INSERTS,
# DIST_TX10, DIST_UPSERTS, DIST_ROUNDS, DIST_COPY_ROUNDS, DIST_WRITE_ROUNDS.  Writes OUT/dist/report.txt.
# Every loop is bounded; nothing is timed-asserted: figures are medians of
# rounds, each round runs every variant once, in an order that rotates.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
touch "$BENCH_STARTED"		# the server is up: failures from here on are real

NROWS=${DIST_ROWS:-1000000}
NSEL=${DIST_SELECTS:-10000}
NINS=${DIST_INSERTS:-1000}
NTX10=${DIST_TX10:-200}
NUPS=${DIST_UPSERTS:-10}
ROUNDS=${DIST_ROUNDS:-5}
CROUNDS=${DIST_COPY_ROUNDS:-3}
WROUNDS=${DIST_WRITE_ROUNDS:-$ROUNDS}
D="$OUT/dist"
mkdir -p "$D"
chmod 755 "$D"
REPORT="$D/report.txt"
T="$D/timings.txt"		# "round variant value" lines
: >"$T"
: >"$REPORT"
log() { echo "bench: $*" >&2; }
say() { echo "$*" >>"$REPORT"; }
q() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
qa() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }

socket=$(qa -d postgres -c "SHOW unix_socket_directories" | cut -d, -f1)
port=$(qa -d postgres -c "SHOW port")
C=bench_coordinator
WORKERS="w1 w2 w3"

# rotate R WORD...: the words, starting at index R mod their count.
rotate() {
	local r=$1
	shift
	local a=("$@") n=$# i
	for ((i = 0; i < n; i++)); do echo "${a[(i + r) % n]}"; done
}

# timed DB WARMUP SQL: the milliseconds of SQL as psql's \timing sees them
# (the client's round trip, commit included), in a session where WARMUP ran first.
timed() {
	local out ms
	out=$(printf '%s\n' '\o /dev/null' "$2" '\timing on' "$3" | psql -X -q -v ON_ERROR_STOP=1 -d "$1") || {
		log "failed on $1: $3"
		return 1
	}
	ms=$(sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' <<<"$out" | tail -1)
	[ -n "$ms" ] || { log "no timing from $1: $3"; return 1; }
	echo "$ms"
}

# pgb DB SCRIPT N PATTERN [pgbench options]: mean latency (ms) of the statements of
# SCRIPT that match PATTERN (pgbench -r, per-statement latency) over N transactions,
# or of the whole transaction when PATTERN is "-".
pgb() {
	local db=$1 f=$2 n=$3 pat=$4 out v
	shift 4
	out=$(pgbench -n -M prepared -r -t "$n" -f "$f" "$@" "$db" 2>&1) || { log "pgbench failed on $db: $out"; return 1; }
	if grep -q 'number of failed transactions: [1-9]\|aborted' <<<"$out"; then
		log "pgbench failed on $db: $out"
		return 1
	fi
	if [ "$pat" = - ]; then
		v=$(sed -n 's/^latency average = \([0-9.]*\) ms.*/\1/p' <<<"$out")
	else
		v=$(awk -v p="$pat" '$1 ~ /^[0-9.]+$/ && index($0, p) { s += $1 } END { if (s != "") print s }' <<<"$out")
	fi
	[ -n "$v" ] || { log "no latency from pgbench on $db: $out"; return 1; }
	echo "$v"
}

record() { echo "$1 $2 $3" >>"$T"; }

# ---------------------------------------------------------------- setup
log "part 5: setup (coordinator, 3 workers, $NROWS rows)"
t0=$(date +%s)
for w in $WORKERS; do
	createdb "bench_$w"
	q -d "bench_$w" -c "CREATE EXTENSION ringshard" >/dev/null
	# the peer's own table on this worker: the rows of one hash partition
	q -d "bench_$w" -c "CREATE TABLE faces_peer (nik text PRIMARY KEY, score float8, payload text)" >/dev/null
done
createdb "$C"
q -d "$C" >/dev/null <<SQL
CREATE EXTENSION ringshard;
CREATE EXTENSION postgres_fdw;
SELECT ringshard.add_node('w1', 'host=$socket port=$port dbname=bench_w1');
SELECT ringshard.add_node('w2', 'host=$socket port=$port dbname=bench_w2');
SELECT ringshard.add_node('w3', 'host=$socket port=$port dbname=bench_w3');
SELECT ringshard.set_replication_factor('default', 2);
SELECT ringshard.create_ring('r1', 256, 1);
SELECT ringshard.add_node(n, NULL, 'r1') FROM unnest(ARRAY['w1', 'w2', 'w3']) n;
SELECT * FROM ringshard.sync_topology();
CREATE TABLE faces (nik text PRIMARY KEY, score float8, payload text);
SELECT ringshard.distribute_table('faces', 'nik');
SELECT ringshard.create_distributed_table('faces');
CREATE TABLE faces_r1 (nik text PRIMARY KEY, score float8, payload text);
SELECT ringshard.distribute_table('faces_r1', 'nik', 'r1');
SELECT ringshard.create_distributed_table('faces_r1');
CREATE TABLE faces_local (nik text PRIMARY KEY, score float8, payload text);
-- the rows the peer's INSERT ... SELECT reads (the same rows as the file)
CREATE TABLE faces_src (nik text, score float8, payload text);
-- the peer
CREATE TABLE faces_peer (nik text, score float8, payload text) PARTITION BY HASH (nik);
DO \$\$
BEGIN
	FOR w IN 1 .. 3 LOOP
		EXECUTE format('CREATE SERVER peer_w%s FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host %L, port %L, dbname %L, async_capable %L, batch_size %L)',
		               w, '$socket', '$port', 'bench_w' || w, 'true', '1000');
		EXECUTE format('CREATE USER MAPPING FOR CURRENT_USER SERVER peer_w%s', w);
		EXECUTE format('CREATE FOREIGN TABLE faces_peer_p%s PARTITION OF faces_peer FOR VALUES WITH (MODULUS 3, REMAINDER %s) SERVER peer_w%s OPTIONS (schema_name %L, table_name %L)',
		               w - 1, w - 1, w, 'public', 'faces_peer');
	END LOOP;
END \$\$;
ALTER DATABASE $C SET enable_partitionwise_aggregate = on;
SQL
# NIK-like keys '3201' || lpad(i, 12, '0') = (3201000000000000 + i)::text, which
# pgbench can compute; scores distinct enough for a stable top 10.
q -d "$C" -c "\\copy (SELECT (3201000000000000 + i)::text, (hashint4(i)::float8 + 2147483648) / 4294967296, 'face-' || md5(i::text) FROM generate_series(1, $NROWS) i) TO '$D/faces.tsv'"
chmod 644 "$D/faces.tsv"
q -d "$C" -c "COPY faces_src FROM '$D/faces.tsv'" -c "VACUUM ANALYZE faces_src" >/dev/null
say "  server: $(qa -d postgres -c 'SHOW server_version') on port $port; shared_buffers=$(qa -d postgres -c 'SHOW shared_buffers'), fsync=$(qa -d postgres -c 'SHOW fsync'), max_prepared_transactions=$(qa -d postgres -c 'SHOW max_prepared_transactions'), max_wal_size=$(qa -d postgres -c 'SHOW max_wal_size')"
say "  layout: databases $C, bench_w1..3 of this server (loopback, unix socket); faces on ring 'default', R = 2; faces_r1 on ring 'r1', R = 1"
say "  peer: faces_peer PARTITION BY HASH (nik), 3 postgres_fdw foreign partitions on bench_w1..3 (async_capable, batch_size 1000), enable_partitionwise_aggregate = on"
say "  data: $NROWS rows, nik '3201' || lpad(i, 12, '0'), score in [0, 1), payload 'face-' || md5(i) ($(du -m "$D/faces.tsv" | cut -f1) MB file); setup $(( $(date +%s) - t0 )) s"

# ---------------------------------------------------------------- 5a: writes in bulk
log "part 5: COPY of $NROWS rows, $CROUNDS rounds"
empty_sql() {
	case $1 in
		copy_local) echo "TRUNCATE faces_local;" ;;
		copy_r2) echo "TRUNCATE faces;" ;;
		copy_r1) echo "TRUNCATE faces_r1;" ;;
		peer_insert) echo "TRUNCATE faces_peer;" ;;
	esac
}
load_sql() {
	case $1 in
		copy_local) echo "COPY faces_local FROM '$D/faces.tsv';" ;;
		copy_r2) echo "COPY faces FROM '$D/faces.tsv';" ;;
		copy_r1) echo "COPY faces_r1 FROM '$D/faces.tsv';" ;;
		peer_insert) echo "INSERT INTO faces_peer SELECT * FROM faces_src;" ;;
	esac
}
for ((r = 1; r <= CROUNDS; r++)); do
	for v in $(rotate $r copy_local copy_r2 copy_r1 peer_insert); do
		# emptied and checkpointed untimed, so no variant pays for another's dirty pages
		q -d "$C" -c "$(empty_sql $v)" -c "CHECKPOINT" >/dev/null
		ms=$(timed "$C" "SELECT count(*) FROM faces WHERE nik = '0';" "$(load_sql $v)")
		record $r $v "$ms"
		log "  copy round $r/$CROUNDS: $v $ms ms"
	done
done
counts=$(qa -d "$C" -F ' ' -c "SELECT (SELECT count(*) FROM faces), (SELECT count(*) FROM faces_r1), (SELECT count(*) FROM faces_local), (SELECT count(*) FROM faces_peer)")
say "  rows after the loads (faces, faces_r1, faces_local, faces_peer): $counts"
for w in $WORKERS; do
	q -d "bench_$w" -c "VACUUM ANALYZE faces" -c "VACUUM ANALYZE faces_r1" -c "VACUUM ANALYZE faces_peer" >/dev/null
done
q -d "$C" -c "VACUUM ANALYZE faces_local" -c "ANALYZE faces_peer" >/dev/null

# ---------------------------------------------------------------- 5b: reads
# Direct lookups: each worker gets the keys it owns (shard_for, computed on the
# worker from the synced topology), numbered, in a side table bench_keys; its
# pgbench script fetches the i-th key (\gset) and then runs the lookup, whose
# per-statement latency (pgbench -r) alone is counted.
shares=""
for w in $WORKERS; do
	q -d "bench_$w" >/dev/null <<SQL
CREATE TABLE bench_keys AS SELECT row_number() OVER () AS i, nik FROM faces WHERE shard_for(nik) = '$w';
ALTER TABLE bench_keys ADD PRIMARY KEY (i);
VACUUM ANALYZE bench_keys;
SQL
	n=$(qa -d "bench_$w" -c "SELECT count(*) FROM bench_keys")
	eval "owned_$w=$n"
	shares="$shares $n"
	cat >"$D/sel_$w.sql" <<EOF
\\set i random(1, $n)
SELECT nik AS k FROM bench_keys WHERE i = :i \\gset
SELECT nik, score, payload FROM faces WHERE nik = :k;
EOF
done
total_owned=$(( owned_w1 + owned_w2 + owned_w3 ))
if [ "$total_owned" != "$NROWS" ]; then
	log "the workers own $total_owned keys, not $NROWS"
	exit 1
fi
for t in faces faces_peer faces_local; do
	cat >"$D/sel_$t.sql" <<EOF
\\set k 3201000000000000 + random(1, $NROWS)
SELECT nik, score, payload FROM $t WHERE nik = :k;
EOF
done
# a join of one key (a self-join: faces is colocated with itself), as a router
# statement, table by table (ringshard.router_statements = off), and locally
for t in faces faces_local; do
	cat >"$D/join_$t.sql" <<EOF
\\set k 3201000000000000 + random(1, $NROWS)
SELECT a.score, b.payload FROM $t a JOIN $t b ON b.nik = a.nik WHERE a.nik = :k;
EOF
done
# the lookups of one round, split by the owners' shares
share() { echo $(( ($1 * $2 + total_owned / 2) / total_owned )); }

agg_q="SELECT count(*), sum(score) FROM faces;"
topk_q="SELECT nik, score, payload FROM faces ORDER BY score DESC LIMIT 10;"
topk_peer_q="SELECT nik, score, payload FROM faces_peer ORDER BY score DESC LIMIT 10;"
qa -d "$C" -c "EXPLAIN VERBOSE $agg_q" >"$D/explain_agg.txt"
qa -d "$C" -c "EXPLAIN VERBOSE $topk_q" >"$D/explain_topk.txt"
qa -d "$C" -c "EXPLAIN VERBOSE $topk_peer_q" >"$D/explain_topk_peer.txt"
qa -d "$C" -c "EXPLAIN VERBOSE SELECT nik, score, payload FROM faces WHERE nik = '3201000000000001'" >"$D/explain_point.txt"
# rows the coordinator received from the nodes: the Foreign Scan's actual rows
qa -d "$C" -c "EXPLAIN (ANALYZE, VERBOSE, COSTS OFF, TIMING OFF) $agg_q" >"$D/explain_analyze_agg.txt"
agg_rows=$(awk '/Foreign Scan/ && match($0, /actual rows=[0-9]+/) { print substr($0, RSTART + 12, RLENGTH - 12); exit }' "$D/explain_analyze_agg.txt")
# The part each worker runs: the Remote SQL, with the values the coordinator
# puts in for $excluded (no node down: '{}') and $topology_version.
remote_sql=$(sed -n 's/^ *Remote SQL: //p' "$D/explain_agg.txt" | head -1)
topo=$(qa -d "$C" -c "SELECT topology_version FROM ringshard.cluster_state")
worker_sql=$(sed -e "s/\\\$excluded/'{}'::pg_catalog.text[]/g" -e "s/\\\$topology_version/${topo}::pg_catalog.int8/g" <<<"$remote_sql")
if [ -z "$remote_sql" ] || grep -q '\$' <<<"$worker_sql"; then
	log "cannot run the Remote SQL on the workers: $remote_sql"
	worker_sql=""
fi
# the answers must agree, or the comparison is void (one scan of a distributed
# table per statement: two in one statement find the nodes' links busy)
answer() { qa -d "$C" -c "SELECT array_agg(score) FROM (${1%;}) a"; }
total() { qa -d "$C" -c "SELECT count(*) || ' ' || round(sum(score)::numeric, 6) FROM $1"; }
if [ "$(answer "$topk_q")" != "$(answer "$topk_peer_q")" ] || [ "$(total faces)" != "$(total faces_local)" ]; then
	log "the coordinator's answers differ from the peer's or the local table's"
	exit 1
fi
if [ -n "$worker_sql" ]; then
	wsum=0
	for w in $WORKERS; do
		part=$(qa -d "bench_$w" -c "SELECT count(*) FROM (${worker_sql}) x")
		wsum=$((wsum + part))
	done
fi

point_run() {	# point_run VARIANT N ROUND
	local v=$1 n=$2 r=$3 ms w nw tot
	case $v in
		sel_coord) ms=$(pgb "$C" "$D/sel_faces.sql" "$n" "FROM faces WHERE") ;;
		sel_nostats) ms=$(PGOPTIONS="${PGOPTIONS:-} -c ringshard.track_node_stats=off" pgb "$C" "$D/sel_faces.sql" "$n" "FROM faces WHERE") ;;
		sel_nohot) ms=$(PGOPTIONS="${PGOPTIONS:-} -c ringshard.track_hot_keys=off" pgb "$C" "$D/sel_faces.sql" "$n" "FROM faces WHERE") ;;
		sel_peer) ms=$(pgb "$C" "$D/sel_faces_peer.sql" "$n" "FROM faces_peer WHERE") ;;
		sel_local) ms=$(pgb "$C" "$D/sel_faces_local.sql" "$n" "FROM faces_local WHERE") ;;
		join_router) ms=$(pgb "$C" "$D/join_faces.sql" "$n" "JOIN faces b") ;;
		join_table) ms=$(PGOPTIONS="${PGOPTIONS:-} -c ringshard.router_statements=off" pgb "$C" "$D/join_faces.sql" "$n" "JOIN faces b") ;;
		join_local) ms=$(pgb "$C" "$D/join_faces_local.sql" "$n" "JOIN faces_local b") ;;
		diag_scan) ms=$(timed bench_w1 "SELECT 1 FROM faces LIMIT 1;" "SELECT count(*) FROM faces;") ;;
		diag_filter)
			# diagnostic: what the fan-out filter costs a node (not fatal if its signature changed)
			ms=$(timed bench_w1 "SELECT 1 FROM faces LIMIT 1;" \
				"SELECT count(*) FROM faces t WHERE ringshard_worker.reads_here('public.faces'::pg_catalog.regclass, t.nik, '{}'::pg_catalog.text[], $topo);" 2>/dev/null) || return 0 ;;
		sel_direct)
			# a weighted mean: each worker's lookup latency, by its share of the lookups
			tot=0
			for w in $WORKERS; do
				eval "nw=\$(share \$n \$owned_$w)"
				ms=$(pgb "bench_$w" "$D/sel_$w.sql" "$nw" "FROM faces WHERE")
				tot=$(awk -v t="$tot" -v m="$ms" -v k="$nw" 'BEGIN { printf "%.6f", t + m * k }')
			done
			ms=$(awk -v t="$tot" -v n="$n" 'BEGIN { printf "%.6f", t / n }') ;;
		agg_coord) ms=$(timed "$C" "SELECT nik FROM faces WHERE nik = '3201000000000001';" "$agg_q") ;;
		agg_direct)
			[ -n "$worker_sql" ] || return 0
			ms=0
			for w in $WORKERS; do
				m=$(timed "bench_$w" "SELECT 1 FROM faces LIMIT 1;" "$worker_sql;")
				[ "$r" = 0 ] || record "$r" "agg_$w" "$m"
				ms=$(awk -v a="$ms" -v b="$m" 'BEGIN { print (b > a ? b : a) }')
			done ;;
		topk_coord) ms=$(timed "$C" "SELECT nik FROM faces WHERE nik = '3201000000000001';" "$topk_q") ;;
		topk_peer) ms=$(timed "$C" "SELECT nik FROM faces_peer WHERE nik = '3201000000000001';" "$topk_peer_q") ;;
	esac
	[ "$r" = 0 ] || record "$r" "$v" "$ms"
}
reads="sel_coord sel_nostats sel_nohot sel_peer sel_direct sel_local join_router join_table join_local agg_coord agg_direct topk_coord topk_peer diag_scan diag_filter"
log "part 5: reads, 1 warm-up round + $ROUNDS rounds ($NSEL point lookups per variant and round)"
for v in $reads; do point_run $v $(( NSEL / 10 )) 0; done
for ((r = 1; r <= ROUNDS; r++)); do
	for v in $(rotate $r $reads); do point_run $v "$NSEL" $r; done
	log "  reads round $r/$ROUNDS done"
done

# ---------------------------------------------------------------- 6: writes, one at a time
for t in faces faces_local; do
	# a single-key UPDATE of an existing row
	cat >"$D/upd_$t.sql" <<EOF
\\set k 3201000000000000 + random(1, $NROWS)
UPDATE $t SET score = score + 0.000001 WHERE nik = :k;
EOF
done
for t in faces faces_r1 faces_local; do
	cat >"$D/ins_$t.sql" <<EOF
\\set n :n + 1
\\set k :base + :n
INSERT INTO $t VALUES (:k, 0.5, 'face-0123456789abcdef0123456789abcdef');
EOF
done
# a 500-row upsert whose keys are half the last one's (DO UPDATE) and half new:
# without RETURNING its rows go in batches, with RETURNING one at a time
for t in faces faces_local; do
	cat >"$D/ups_$t.sql" <<EOF
\\set n :n + 250
\\set k :base + :n
INSERT INTO $t AS a SELECT (:k::bigint + g)::text, 0.5, 'face-0123456789abcdef0123456789abcdef'
  FROM generate_series(0, 499) g ON CONFLICT (nik) DO UPDATE SET score = a.score + 0.000001;
EOF
done
sed 's/0\.000001;$/0.000001 RETURNING nik;/' "$D/ups_faces.sql" >"$D/ups_row.sql"
{
	echo '\set n :n + 10'
	for j in 0 1 2 3 4 5 6 7 8 9; do echo "\\set k$j :base + :n + $j"; done
	echo 'BEGIN;'
	for j in 0 1 2 3 4 5 6 7 8 9; do echo "INSERT INTO faces VALUES (:k$j, 0.5, 'face-0123456789abcdef0123456789abcdef');"; done
	echo 'COMMIT;'
} >"$D/tx10.sql"
# new keys 32xx..., never in the loaded range: a prefix per round and variant
write_run() {	# write_run VARIANT N ROUND
	local v=$1 n=$2 r=$3 ms base
	base=$(( 3300000000000000 + r * 10000000000000 ))
	case $v in
		ins_local) ms=$(pgb "$C" "$D/ins_faces_local.sql" "$n" - -D n=0 -D base=$((base + 1000000000000))) ;;
		ins_2pc) ms=$(pgb "$C" "$D/ins_faces.sql" "$n" - -D n=0 -D base=$((base + 2000000000000))) ;;
		ins_1pc) ms=$(PGOPTIONS="${PGOPTIONS:-} -c ringshard.two_phase_commit=off" pgb "$C" "$D/ins_faces.sql" "$n" - -D n=0 -D base=$((base + 3000000000000))) ;;
		ins_r1) ms=$(pgb "$C" "$D/ins_faces_r1.sql" "$n" - -D n=0 -D base=$((base + 6000000000000))) ;;
		upd_local) ms=$(pgb "$C" "$D/upd_faces_local.sql" "$n" -) ;;
		upd_2pc) ms=$(pgb "$C" "$D/upd_faces.sql" "$n" -) ;;
		tx10_2pc) ms=$(pgb "$C" "$D/tx10.sql" "$n" - -D n=0 -D base=$((base + 4000000000000))) ;;
		tx10_1pc) ms=$(PGOPTIONS="${PGOPTIONS:-} -c ringshard.two_phase_commit=off" pgb "$C" "$D/tx10.sql" "$n" - -D n=0 -D base=$((base + 5000000000000))) ;;
		ups_local) ms=$(pgb "$C" "$D/ups_faces_local.sql" "$n" - -D n=0 -D base=$((base + 7000000000000))) ;;
		ups_batch) ms=$(pgb "$C" "$D/ups_faces.sql" "$n" - -D n=0 -D base=$((base + 8000000000000))) ;;
		ups_row) ms=$(pgb "$C" "$D/ups_row.sql" "$n" - -D n=0 -D base=$((base + 9000000000000))) ;;
	esac
	[ "$r" = 0 ] || record "$r" "$v" "$ms"
}
writes="ins_local ins_2pc ins_1pc ins_r1 upd_local upd_2pc tx10_2pc tx10_1pc ups_local ups_batch ups_row"
log "part 6: single-row INSERTs, 1 warm-up round + $WROUNDS rounds ($NINS single-row transactions, $NTX10 of 10 rows, $NUPS upserts of 500 rows, per variant and round)"
for v in $writes; do
	case $v in tx10*) write_run $v $(( NTX10 / 10 )) 0 ;; ups*) write_run $v 1 0 ;; *) write_run $v $(( NINS / 10 )) 0 ;; esac
done
for ((r = 1; r <= WROUNDS; r++)); do
	for v in $(rotate $r $writes); do
		case $v in tx10*) write_run $v "$NTX10" $r ;; ups*) write_run $v "$NUPS" $r ;; *) write_run $v "$NINS" $r ;; esac
	done
	log "  writes round $r/$WROUNDS done"
done
leftover=$(qa -d postgres -c "SELECT count(*) FROM pg_prepared_xacts")

# ---------------------------------------------------------------- report
report() {	# report PART
	awk -v part="$1" -v nsel="$NSEL" -v nins="$NINS" -v ntx10="$NTX10" -v nups="$NUPS" -v nrows="$NROWS" -v rounds="$ROUNDS" \
		-v crounds="$CROUNDS" -v wrounds="$WROUNDS" -v agg_rows="${agg_rows:-}" -v nnodes=3 -v leftover="$leftover" -v shares="$shares" \
		-f "$here/dist_report.awk" "$T" >>"$REPORT"
}
indent() { sed 's/^/      /' "$1" >>"$REPORT"; }
report 5
say ""
say "  How the count/sum was checked: EXPLAIN VERBOSE $agg_q   (on the coordinator)"
indent "$D/explain_agg.txt"
say "  rows the nodes sent for it (EXPLAIN ANALYZE, the Foreign Scan's actual rows): ${agg_rows:-?}; one per node would be 3"
say "  what each worker ran directly for the baseline (the Remote SQL above, \$excluded = '{}' as no node is down,"
say "  \$topology_version = the coordinator's): ${worker_sql:-(not runnable)}"
[ -z "${wsum:-}" ] || say "  (its rows on the three workers add up to $wsum; the table has $NROWS)"
say "  EXPLAIN VERBOSE $topk_q"
indent "$D/explain_topk.txt"
say "  EXPLAIN VERBOSE $topk_peer_q"
indent "$D/explain_topk_peer.txt"
say "  EXPLAIN VERBOSE of a point lookup:"
indent "$D/explain_point.txt"
say ""
say "Part 6: two-phase commit"
report 6

#!/usr/bin/env bash
# Part 9 of bench/run (issue 18): COPY and single-row INSERT throughput of this
# build against the 1.1 release, in the same run, rounds interleaved.
#
# Runs on a private server of this build (lib.sh's throwaway_server with
# BENCH_PGBIN: bench/run sets it to the installation this build went into;
# started with shared_preload_libraries = 'ringshard', max_prepared_transactions
# = 20, fsync = on, max_wal_size = 4GB), then:
#   1. builds the 1.1 release (git archive RS11_COMMIT, default 0529c64, of this
#      checkout) and installs it into a private copy of PostgreSQL made in
#      OUT/compat/pg11 (the trees /usr/lib/postgresql/15, /usr/share/postgresql/15
#      and /usr/include/postgresql copied under OUT/compat/pg11/usr/: PostgreSQL
#      is relocatable, the copy's pg_config reports the copy's paths); if that
#      fails, the part says so and stops (no figures, no targets);
#   2. sets up the same cluster on both servers: databases bench_coordinator and
#      workers bench_w1..3 of that server, ring 'default' at R = 2,
#      faces (nik text PRIMARY KEY, score float8, payload text) distributed;
#   3. starts a private server of the 1.1 copy with the same settings
#      (throwaway_server with BENCH_PGBIN = the copy's bin directory), which runs
#      this script again, with COMPAT_INNER=1 and the first server's address in
#      NEW_PGHOST / NEW_PGPORT;
#   4. per round, each variant once, the order rotating (1.1 first in odd rounds):
#      copy:   TRUNCATE faces; CHECKPOINT (untimed), COPY faces FROM file
#              (part 5's COPY, DIST_ROWS rows), psql's \timing in autocommit;
#      insert: pgbench -n -M prepared -t DIST_INSERTS, autocommit
#              INSERT INTO faces VALUES (...) with two-phase commit (part 6's
#              ins_2pc, new keys each run): pgbench's mean transaction latency;
#      one warm-up round of a tenth of the INSERTs and a COPY of a tenth of the rows first.
# Both servers run side by side on the same machine for the whole part; only
# one is measured at a time.  Clients reach both over TCP loopback (as
# throwaway_server's private servers and pg_virtualenv), the coordinators
# their workers over the Unix socket.
#
# Environment: OUT, BENCH_STARTED, DIST_ROWS (1000000), COMPAT_INSERTS (else DIST_INSERTS, 500),
# COMPAT_ROUNDS (3 COPY rounds; the INSERT rounds: COMPAT_WRITE_ROUNDS, 9, of COMPAT_INSERTS, 500),
# RS11_COMMIT (0529c64).  Writes OUT/compat/report.txt and OUT/compat/results.txt.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
NROWS=${DIST_ROWS:-1000000}
NINS=${COMPAT_INSERTS:-${DIST_INSERTS:-500}}
CROUNDS=${COMPAT_ROUNDS:-3}
WROUNDS=${COMPAT_WRITE_ROUNDS:-9}
COMMIT11=${RS11_COMMIT:-0529c64}
D="$OUT/compat"
REPORT="$D/report.txt"
T="$D/timings.txt"		# "round variant workload value" lines
log() { echo "bench: $*" >&2; }
say() { echo "$*" >>"$REPORT"; }
q() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
qa() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }
C=bench_coordinator

# setup_cluster: the cluster of parts 5 and 6 (ring 'default' at R = 2, faces) on the server of PGHOST/PGPORT
setup_cluster() {
	local socket port w
	socket=$(qa -d postgres -c "SHOW unix_socket_directories" | cut -d, -f1)
	port=$(qa -d postgres -c "SHOW port")
	for w in w1 w2 w3; do
		createdb "bench_$w"
		q -d "bench_$w" -c "CREATE EXTENSION ringshard" >/dev/null
	done
	createdb "$C"
	q -d "$C" >/dev/null 2>&1 <<SQL
CREATE EXTENSION ringshard;
SELECT ringshard.add_node('w1', 'host=$socket port=$port dbname=bench_w1');
SELECT ringshard.add_node('w2', 'host=$socket port=$port dbname=bench_w2');
SELECT ringshard.add_node('w3', 'host=$socket port=$port dbname=bench_w3');
SELECT ringshard.set_replication_factor('default', 2);
SELECT * FROM ringshard.sync_topology();
CREATE TABLE faces (nik text PRIMARY KEY, score float8, payload text);
SELECT ringshard.distribute_table('faces', 'nik');
SELECT ringshard.create_distributed_table('faces');
SQL
	qa -d "$C" -c "SELECT extversion FROM pg_extension WHERE extname = 'ringshard'"
}

if [ "${COMPAT_INNER:-0}" != 1 ]; then
	# ------------------------------------------------------------ outer: this build's server
	touch "$BENCH_STARTED"
	mkdir -p "$D"
	chmod 755 "$D"
	: >"$REPORT"
	: >"$T"
	: >"$D/results.txt"
	log "part 9: building release 1.1 ($COMMIT11) into a private PostgreSQL copy"
	t0=$(date +%s)
	src="$D/src11"
	pg11="$D/pg11"
	built=0
	why=
	if ! git -C "$root" rev-parse --verify -q "$COMMIT11^{commit}" >/dev/null 2>&1; then
		why="commit $COMMIT11 is not in this checkout ($root is not a git clone with the history)"
	else
		rm -rf "$src" "$pg11"
		mkdir -p "$src" "$pg11/usr/lib/postgresql" "$pg11/usr/share/postgresql" "$pg11/usr/include"
		if ! git -C "$root" archive "$COMMIT11" | tar -x -C "$src"; then
			why="git archive $COMMIT11 failed"
		elif ! { cp -a /usr/lib/postgresql/15 "$pg11/usr/lib/postgresql/" &&
			cp -a /usr/share/postgresql/15 "$pg11/usr/share/postgresql/" &&
			cp -a /usr/include/postgresql "$pg11/usr/include/"; } 2>"$D/copy11.log"; then
			why="copying PostgreSQL failed: $(head -c 300 "$D/copy11.log")"
		else
			# whatever ringshard the system install has (bench/run installs this build there) goes
			rm -f "$pg11"/usr/lib/postgresql/15/lib/ringshard* "$pg11"/usr/share/postgresql/15/extension/ringshard*
			pgc="$pg11/usr/lib/postgresql/15/bin/pg_config"
			# a build of the same commit for the same PostgreSQL is kept in the cache
			# (RS11_CACHE; compiling takes 1 to 5 minutes on this VM)
			cache="${RS11_CACHE:-/var/tmp/ringshard-bench-cache}/$(git -C "$root" rev-parse "$COMMIT11")-$("$pgc" --version | tr -c 'A-Za-z0-9.\n' _)"
			if [ "$("$pgc" --sharedir 2>/dev/null)" != "$pg11/usr/share/postgresql/15" ]; then
				why="the copy's pg_config reports $("$pgc" --sharedir 2>&1), not the copy's paths"
			elif [ -s "$cache/lib/ringshard.so" ] && [ -s "$cache/extension/ringshard.control" ] &&
				cp -a "$cache"/lib/. "$pg11/usr/lib/postgresql/15/lib/" && cp -a "$cache"/extension/. "$pg11/usr/share/postgresql/15/extension/"; then
				built=1
				from_cache=" (from the cache $cache)"
			elif ! (cd "$src" && make -s -j"$(nproc)" PG_CONFIG="$pgc" && make -s PG_CONFIG="$pgc" install) >"$D/build11.log" 2>&1; then
				why="make failed: $(grep -m3 -i 'error' "$D/build11.log" | tr '\n' ' ' | head -c 400)"
			elif [ ! -e "$pg11/usr/lib/postgresql/15/lib/ringshard.so" ]; then
				why="make install put no ringshard.so into the copy"
			else
				built=1
				from_cache=
				if mkdir -p "$cache.tmp/lib" "$cache.tmp/extension" 2>/dev/null &&
					cp -a "$pg11"/usr/lib/postgresql/15/lib/ringshard* "$cache.tmp/lib/" &&
					cp -a "$pg11"/usr/share/postgresql/15/extension/ringshard* "$cache.tmp/extension/"; then
					rm -rf "$cache" && mv "$cache.tmp" "$cache" || true
				fi
				rm -rf "$cache.tmp"
			fi
		fi
	fi
	if [ "$built" != 1 ]; then
		log "part 9: release 1.1 could not be built: $why; part 9 skipped"
		say "  release 1.1 ($COMMIT11) could not be built: $why"
		say "  part 9 skipped: no figures, no targets"
		cat "$REPORT"
		exit 0
	fi
	say "  release 1.1: git archive $COMMIT11, built and installed into a private copy of PostgreSQL$from_cache ($(( $(date +%s) - t0 )) s)"
	log "part 9: 1.1 built ($(( $(date +%s) - t0 )) s); this build's cluster"
	v12=$(setup_cluster)
	# part 5's file: the same rows
	q -d "$C" -c "\\copy (SELECT (3201000000000000 + i)::text, (hashint4(i)::float8 + 2147483648) / 4294967296, 'face-' || md5(i::text) FROM generate_series(1, $NROWS) i) TO '$D/faces.tsv'"
	chmod 644 "$D/faces.tsv"
	head -n $(( NROWS / 10 )) "$D/faces.tsv" >"$D/faces_warm.tsv"
	chmod 644 "$D/faces_warm.tsv"
	say "  this build: ringshard $v12 (extversion) on $(qa -d postgres -c 'SHOW server_version'), port $(qa -d postgres -c 'SHOW port')"
	mkdir -p "$D/s11"
	rc=0
	. "$here/lib.sh"
	export NEW_PGHOST=$PGHOST NEW_PGPORT=$PGPORT COMPAT_INNER=1
	# lib.sh's throwaway_server with BENCH_PGBIN: a private server of the 1.1 copy
	(
		export BENCH_PGBIN="$pg11/usr/lib/postgresql/15/bin"
		throwaway_server -o shared_preload_libraries=ringshard -o max_prepared_transactions=20 -o fsync=on \
			-o max_wal_size=4GB "$D/s11" "$here/compat_part.sh"
	) || rc=$?
	[ "$rc" = 0 ] || { log "part 9: the 1.1 server's part failed (exit $rc): $(tail -5 "$D/s11/server_err.txt" 2>/dev/null)"; exit 1; }
	leftover=$(qa -d postgres -c "SELECT count(*) FROM pg_prepared_xacts")
	rows12=$(qa -d "$C" -c "SELECT count(*) FROM faces")
	say "  rows in faces after the part: this build $rows12, 1.1 $(cat "$D/rows11.txt"); prepared transactions left: this build $leftover, 1.1 $(cat "$D/left11.txt")"
	awk -v crounds="$CROUNDS" -v wrounds="$WROUNDS" -v nrows="$NROWS" -v nins="$NINS" -f "$here/compat_report.awk" "$T" >>"$REPORT"
	awk -v results=1 -f "$here/compat_report.awk" "$T" >"$D/results.txt"
	cat "$REPORT"
	exit 0
fi

# ---------------------------------------------------------------- inner: the 1.1 server is up too
touch "$BENCH_STARTED"
OLD_PGHOST=$PGHOST OLD_PGPORT=$PGPORT
log "part 9: the 1.1 server's cluster"
v11=$(setup_cluster)
say "  release 1.1: ringshard $v11 (extversion) on $(qa -d postgres -c 'SHOW server_version'), port $PGPORT"
on() {	# on 11|12 COMMAND...: COMMAND against that version's server
	local v=$1
	shift
	if [ "$v" = 11 ]; then PGHOST=$OLD_PGHOST PGPORT=$OLD_PGPORT "$@"; else PGHOST=$NEW_PGHOST PGPORT=$NEW_PGPORT "$@"; fi
}
# the server's CPU time (clock ticks): the postmaster's own and its reaped children's, and
# every live child's; read around a psql session, it is what the session cost the server
# (its backend, the coordinator's connections to the workers, WAL writing), whatever else
# runs on the machine
pm_of() { head -1 "$(on "$1" qa -d postgres -c 'SHOW data_directory')/postmaster.pid"; }
PM11=$(pm_of 11)
PM12=$(pm_of 12)
TICK=$(getconf CLK_TCK)
server_ticks() {	# server_ticks 11|12
	local pm c t=0
	if [ "$1" = 11 ]; then pm=$PM11; else pm=$PM12; fi
	t=$(awk '{ print $14 + $15 + $16 + $17 }' "/proc/$pm/stat" 2>/dev/null || echo 0)
	for c in $(ps --ppid "$pm" -o pid= 2>/dev/null); do
		t=$(( t + $(awk '{ print $14 + $15 }' "/proc/$c/stat" 2>/dev/null || echo 0) ))
	done
	echo "$t"
}
cpu_of() {	# cpu_of 11|12 TICKS_BEFORE: CPU seconds of the server since, once the session's backends are gone
	local n
	for n in 1 2 3 4 5 6 7 8 9 10; do	# its backend and its connections to the workers exit (bounded wait)
		[ "$(on "$1" qa -d postgres -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()")" = 0 ] && break
		sleep 0.2
	done
	sleep 0.2
	awk -v a="$2" -v b="$(server_ticks "$1")" -v hz="$TICK" 'BEGIN { printf "%.2f", (b - a) / hz }'
}
timed() {	# timed SQL: psql's \timing of SQL on bench_coordinator, in a session that ran a point lookup first
	local out ms
	out=$(printf '%s\n' '\o /dev/null' "SELECT count(*) FROM faces WHERE nik = '0';" '\timing on' "$1" | psql -X -q -v ON_ERROR_STOP=1 -d "$C") || {
		log "failed: $1"
		return 1
	}
	ms=$(sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' <<<"$out" | tail -1)
	[ -n "$ms" ] || { log "no timing: $1"; return 1; }
	echo "$ms"
}
cat >"$D/ins_faces.sql" <<'EOF'
\set n :n + 1
\set k :base + :n
INSERT INTO faces VALUES (:k, 0.5, 'face-0123456789abcdef0123456789abcdef');
EOF
chmod 644 "$D/ins_faces.sql"
copy_run() {	# copy_run VERSION ROUND FILE
	local v=$1 r=$2 f=$3 ms
	local t0 cpu
	on "$v" q -d "$C" -c "TRUNCATE faces" -c "CHECKPOINT" >/dev/null
	sleep 0.5
	t0=$(server_ticks "$v")
	ms=$(on "$v" timed "COPY faces FROM '$f';")
	cpu=$(cpu_of "$v" "$t0")
	[ "$r" = 0 ] || echo "$r v$v copy $ms" >>"$T"
	[ "$r" = 0 ] || echo "$r v$v copy_cpu $(awk -v c="$cpu" 'BEGIN { print c * 1000 }')" >>"$T"
	log "  copy round $r: $v $ms ms, server CPU $cpu s"
}
ins_run() {	# ins_run VERSION ROUND N: new keys 33..., a prefix per round and version
	local v=$1 r=$2 n=$3 out ms base
	base=$(( 3300000000000000 + r * 10000000000000 + v * 100000000000 ))
	local t0 cpu
	t0=$(server_ticks "$v")
	out=$(on "$v" pgbench -n -M prepared -t "$n" -f "$D/ins_faces.sql" -D n=0 -D base=$base "$C" 2>&1) || { log "pgbench failed ($v): $out"; return 1; }
	if grep -q 'number of failed transactions: [1-9]\|aborted' <<<"$out"; then log "pgbench failed ($v): $out"; return 1; fi
	ms=$(sed -n 's/^latency average = \([0-9.]*\) ms.*/\1/p' <<<"$out")
	[ -n "$ms" ] || { log "no latency from pgbench ($v): $out"; return 1; }
	cpu=$(cpu_of "$v" "$t0")
	[ "$r" = 0 ] || echo "$r v$v insert $ms" >>"$T"
	[ "$r" = 0 ] || echo "$r v$v insert_cpu $(awk -v c="$cpu" -v n="$n" 'BEGIN { print c * 1000 / n }')" >>"$T"
	log "  insert round $r: $v $ms ms, server CPU $cpu s"
}
order() { if [ $(( $1 % 2 )) = 1 ]; then echo 11 12; else echo 12 11; fi; }
log "part 9: COPY of $NROWS rows, 1 warm-up + $CROUNDS rounds; single-row INSERTs, 1 warm-up + $WROUNDS rounds of $NINS"
for v in 11 12; do copy_run $v 0 "$D/faces_warm.tsv"; done
for ((r = 1; r <= CROUNDS; r++)); do
	for v in $(order $r); do copy_run $v $r "$D/faces.tsv"; done
done
for v in 11 12; do ins_run $v 0 $(( NINS / 10 )); done
for ((r = 1; r <= WROUNDS; r++)); do
	for v in $(order $r); do ins_run $v $r "$NINS"; done
done
qa -d "$C" -c "SELECT count(*) FROM faces" >"$D/rows11.txt"
qa -d postgres -c "SELECT count(*) FROM pg_prepared_xacts" >"$D/left11.txt"

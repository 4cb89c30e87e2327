# bench/lib.sh: shared by bench/run and bench/profile (sourced, not run).

# pg_virtualenv names every cluster 15/regress and, left alone, gives each the
# first free port it knows of and the pid file /var/run/postgresql/15-regress.pid:
# two runs at once on this shared machine collide.  So pick an unused port and
# a private pid file, and retry (a bounded number of times) if the server did
# not come up.
free_port() {
	local p
	for p in $(shuf -i 20000-29999 -n 100); do
		[ -e "/var/run/postgresql/.s.PGSQL.$p" ] && continue
		if command -v ss >/dev/null && ss -Htln "sport = :$p" | grep -q .; then continue; fi
		echo "$p"
		return 0
	done
	return 1
}

# throwaway_server [-o NAME=VALUE]... DIR COMMAND...: run COMMAND in
# `pg_virtualenv -t` with the benchmark's server settings (and the extra ones
# given with -o); its stdout goes to DIR/server_out.txt, stderr to ours and
# DIR/server_err.txt.  COMMAND must `touch "$BENCH_STARTED"` first thing: a
# failure after that is real and not retried.
throwaway_server() {
	local extra=() dir attempt port
	if [ -n "${BENCH_PGBIN:-}" ]; then
		private_server "$@"
		return
	fi
	while [ "${1:-}" = -o ]; do
		extra+=(-o "$2")
		shift 2
	done
	dir=$1
	shift
	export BENCH_STARTED="$dir/server_started"
	for attempt in 1 2 3 4 5; do
		port=$(free_port)
		rm -f "$BENCH_STARTED"
		if PGPORT=$port pg_virtualenv -t -o "external_pid_file=/tmp/ringshard-bench-$$-$port.pid" \
			-o shared_buffers=512MB -o max_parallel_workers_per_gather=0 -o jit=off \
			${extra[@]+"${extra[@]}"} "$@" >"$dir/server_out.txt" 2> >(tee "$dir/server_err.txt" >&2); then
			return 0
		fi
		if [ -e "$BENCH_STARTED" ] || [ "$attempt" = 5 ]; then
			cat "$dir/server_out.txt" >&2
			return 1
		fi
		echo "bench: the throwaway server did not start (attempt $attempt): $(grep -m1 -i error "$dir/server_err.txt" || true); retrying" >&2
		sleep $((attempt * 3))
	done
}

# With BENCH_PGBIN set (the bin directory of a PostgreSQL installation other
# than the system's, e.g. a copy the extension was installed into with
# `make PG_CONFIG=...`), throwaway_server runs its own server from there
# instead of pg_virtualenv: initdb in a temporary directory (as postgres when
# we are root), the same settings, clients over TCP loopback as with
# pg_virtualenv, and the directory removed afterwards.
private_server() {
	local extra=() dir port data status as=()
	while [ "${1:-}" = -o ]; do
		extra+=(-c "$2")
		shift 2
	done
	dir=$1
	shift
	export BENCH_STARTED="$dir/server_started"
	[ "$(id -u)" = 0 ] && as=(runuser -u postgres --)
	port=$(free_port) || return 1
	data=$(mktemp -d /tmp/ringshard-bench-data.XXXXXX)
	chmod 755 "$data"
	[ "$(id -u)" = 0 ] && chown postgres "$data"
	"${as[@]}" "$BENCH_PGBIN/initdb" -D "$data/pg" -A trust -U postgres >"$dir/server_out.txt" 2>"$dir/server_err.txt" || return 1
	"${as[@]}" "$BENCH_PGBIN/pg_ctl" -D "$data/pg" -l "$data/log" -w -o "$(printf '%q ' -p "$port" -k "$data" \
		-c listen_addresses=localhost -c shared_buffers=512MB -c max_parallel_workers_per_gather=0 -c jit=off \
		${extra[@]+"${extra[@]}"})" start >>"$dir/server_out.txt" 2>>"$dir/server_err.txt" || { cat "$data/log" >&2; return 1; }
	PGHOST=localhost PGPORT=$port PGUSER=postgres PGDATABASE=postgres "$@" >>"$dir/server_out.txt" 2> >(tee -a "$dir/server_err.txt" >&2)
	status=$?
	"${as[@]}" "$BENCH_PGBIN/pg_ctl" -D "$data/pg" -m fast stop >/dev/null 2>&1
	rm -rf "$data"
	return $status
}

#!/usr/bin/env bash
# bench/sql_part.sh: parts 1 and 3 of the benchmark, run by bench/run inside
# `pg_virtualenv -t` (PGHOST, PGPORT, ... point at a throwaway server).
# Environment: NKEYS NSMALL REPEATS NREBUILD CORE_BUILD_768 CORE_BUILD_256000
# OUT (a directory: part1.txt, part3.txt and results.txt, the RESULT lines).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
touch "$BENCH_STARTED"		# the server is up: failures from here on are real

# Single-core, no JIT, for every session: comparisons are fair and stable.
export PGOPTIONS="-c max_parallel_workers_per_gather=0 -c jit=off"
psql_q() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }

echo "  server: $(psql_q -At -c 'SHOW server_version') on port ${PGPORT:-?}; shared_buffers=$(psql_q -At -c 'SHOW shared_buffers'), max_parallel_workers_per_gather=$(psql_q -At -c 'SHOW max_parallel_workers_per_gather'), jit=$(psql_q -At -c 'SHOW jit')"
t0=$(date +%s)
psql_q -v nkeys="$NKEYS" -v nsmall="$NSMALL" -f "$here/sql/setup.sql" >/dev/null
echo "  setup: $NKEYS keys 'user-1'..'user-$NKEYS' in an UNLOGGED table, rings r3/r64/r1000 (256 vnodes, R = 3), $(( $(date +%s) - t0 )) s"

# The hand-written rings must give shard_for's answers, or the comparison is void.
psql_q -At -F ' ' <<'SQL' | while read -r n agree_sql agree_pl total; do
SELECT r.n, count(*) FILTER (WHERE sq = sf), count(*) FILTER (WHERE pl = sf), count(*)
  FROM (VALUES (3), (64), (1000)) r(n),
       LATERAL (SELECT shard_for(s.k, 'r' || r.n) AS sf,
                       coalesce((SELECT p.node FROM bench.points p WHERE p.ring = 'r' || r.n
                                  AND p.token >= ring_token(s.k) ORDER BY p.token LIMIT 1),
                                (SELECT p.node FROM bench.points p WHERE p.ring = 'r' || r.n
                                  ORDER BY p.token LIMIT 1)) AS sq,
                       bench.plpgsql_ring(s.k, 'r' || r.n) AS pl
                  FROM (SELECT k FROM bench.keys_small LIMIT 2000) s) x
 GROUP BY r.n ORDER BY r.n;
SQL
	echo "  check, $n nodes: SQL ring agrees with shard_for on $agree_sql/$total keys, PL/pgSQL ring on $agree_pl/$total"
	if [ "$agree_sql" != "$total" ] || [ "$agree_pl" != "$total" ]; then
		echo "bench: the hand-written rings disagree with shard_for" >&2
		exit 1
	fi
done

# All rounds in one session, so that the rings are cached once (round 0, a
# warm-up, also reads the tables into shared buffers and is not counted).
{
	for ((r = 0; r <= REPEATS; r++)); do
		if [ "$r" = 0 ]; then note=" (warm-up, not counted)"; else note=""; fi
		echo "\\warn '  part 1: round $r of $REPEATS$note'"
		echo "SELECT bench.run_round($r);"
	done
	echo "\\warn '  part 1: $(( 4 * REPEATS + 1 )) pairs of shard_for on 3 nodes and on 1,000 x 16 allocated tokens'"
	echo "SELECT bench.run_pairs($(( 4 * REPEATS + 1 )));"
} | psql_q -o /dev/null
psql_q -At -c "SELECT format('RESULT pair key=shard_tokens i=%s ms_3=%s ms_tokens=%s', i, round(ms_3::numeric, 3), round(ms_tokens::numeric, 3)) FROM bench.pairs ORDER BY i" >>"$OUT/results.txt"

echo "  part 3: $NREBUILD topology changes per ring" >&2
# Part 3: alternate a topology change and the first lookup after it, per ring.
for ring in r3 r1000; do
	{
		echo "SELECT bench.first_lookup('$ring', 0);"	# warm-up: compile, cache
		for ((i = 1; i <= NREBUILD; i++)); do
			w=$([ $((i % 2)) = 1 ] && echo 1.01 || echo 1)
			echo "SELECT ringshard.set_node_weight('node-1', $w, '$ring');"
			echo "SELECT bench.first_lookup('$ring', $i);"
		done
	} | psql_q -o /dev/null
done

# Memory the backend's cache keeps outside the core ring (palloc'd in the
# "ringshard topology" context: entry, names as text, health flags).
for ring in r3 r64 r1000; do
	used=$(psql_q -At <<SQL
SELECT ring_token('load the library'::text) IS NOT NULL AS loaded \gset
SELECT coalesce(sum(used_bytes), -1) AS before FROM pg_backend_memory_contexts WHERE name = 'ringshard topology' \gset
SELECT shard_for('user-1'::text, '$ring') IS NOT NULL AS built \gset
SELECT coalesce(sum(used_bytes), -1) - :before FROM pg_backend_memory_contexts WHERE name = 'ringshard topology';
SQL
)
	echo "RESULT glue ring=$ring bytes=$used" >>"$OUT/results.txt"
done

psql_q -v nsmall="$NSMALL" -v nrebuild="$NREBUILD" -v resultfile="$OUT/report.txt" \
	-v part1file="$OUT/part1.txt" -v part3file="$OUT/part3.txt" \
	-v core_build_768="$CORE_BUILD_768" -v core_build_256000="$CORE_BUILD_256000" \
	-f "$here/sql/report.sql"
cat "$OUT/report.txt" >>"$OUT/results.txt"

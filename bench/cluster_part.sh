#!/usr/bin/env bash
# Part 4 of bench/run, inside a throwaway server: fan-out latency against the
# slowest worker.  The workers are three databases of the same server (one
# machine: what is measured is whether ringshard runs them concurrently),
# each answering after a 0.3 s sleep.  Medians of ROUNDS rounds.
set -euo pipefail
touch "$BENCH_STARTED"
ROUNDS=${ROUNDS:-5}
socket=$(psql -XAtq -d postgres -c "SHOW unix_socket_directories" | cut -d, -f1)
port=$(psql -XAtq -d postgres -c "SHOW port")
for w in 1 2 3; do
	createdb "bench_w$w"
	psql -XAtq -d "bench_w$w" -c "CREATE EXTENSION ringshard" >/dev/null
done
createdb bench_coordinator
psql -XAtq -v ON_ERROR_STOP=1 -d bench_coordinator >/dev/null <<SQL
CREATE EXTENSION ringshard;
SELECT ringshard.add_node('w1', 'host=$socket port=$port dbname=bench_w1');
SELECT ringshard.add_node('w2', 'host=$socket port=$port dbname=bench_w2');
SELECT ringshard.add_node('w3', 'host=$socket port=$port dbname=bench_w3');
SELECT count(*) FROM ringshard.sync_topology();
CREATE TABLE faces (face_id text, score float8);
SELECT ringshard.distribute_table('faces', 'face_id');
SELECT count(*) FROM ringshard.create_distributed_table('faces');
INSERT INTO faces SELECT 'face-' || g, random() FROM generate_series(1, 3000) g;
SQL
psql -XAtq -v ON_ERROR_STOP=1 -d bench_coordinator <<SQL
CREATE FUNCTION pg_temp.elapsed_ms(q text) RETURNS float8 LANGUAGE plpgsql AS \$\$
DECLARE t0 timestamptz := clock_timestamp();
BEGIN EXECUTE q; RETURN extract(epoch FROM clock_timestamp() - t0) * 1000; END \$\$;
CREATE TEMP TABLE timing (round int, what text, ms float8);
DO \$\$
DECLARE sleepy text := '(SELECT true FROM pg_sleep(0.3))';
BEGIN
	-- one untimed round warms the connections
	PERFORM count(*) FROM ringshard.cluster_fanout(NULL::faces);
	FOR r IN 1 .. $ROUNDS LOOP
		FOR w IN 1 .. 3 LOOP
			INSERT INTO timing SELECT r, 'w' || w, pg_temp.elapsed_ms(format(
				'SELECT * FROM ringshard.node_execute(ARRAY[%L], %L, ''{}'', false)', 'w' || w,
				'SELECT count(*) FROM public.faces t WHERE ' || sleepy));
		END LOOP;
		INSERT INTO timing SELECT r, 'fanout', pg_temp.elapsed_ms(format(
			'SELECT count(*) FROM ringshard.cluster_fanout(NULL::faces, %L)', sleepy));
		INSERT INTO timing SELECT r, 'fanout top-5', pg_temp.elapsed_ms(format(
			'SELECT count(*) FROM ringshard.cluster_fanout(NULL::faces, %L, ''score'', 5)', sleepy));
	END LOOP;
END \$\$;
\echo '  3 workers (databases of one server), each answering after pg_sleep(0.3); medians of $ROUNDS rounds'
\echo '  single = one worker through ringshard.node_execute; fan-out = ringshard.cluster_fanout over all three'
WITH per_round AS (
	SELECT round, max(ms) FILTER (WHERE what LIKE 'w%') AS slowest, sum(ms) FILTER (WHERE what LIKE 'w%') AS sum_of_three,
	       max(ms) FILTER (WHERE what = 'fanout') AS fanout, max(ms) FILTER (WHERE what = 'fanout top-5') AS topk
	  FROM timing GROUP BY round)
SELECT '  slowest worker ' || round(percentile_cont(0.5) WITHIN GROUP (ORDER BY slowest)::numeric, 1) || ' ms, sum of three '
       || round(percentile_cont(0.5) WITHIN GROUP (ORDER BY sum_of_three)::numeric, 1) || ' ms, fan-out '
       || round(percentile_cont(0.5) WITHIN GROUP (ORDER BY fanout)::numeric, 1) || ' ms, fan-out top-5 '
       || round(percentile_cont(0.5) WITHIN GROUP (ORDER BY topk)::numeric, 1) || ' ms'
  FROM per_round;
WITH per_round AS (
	SELECT round, max(ms) FILTER (WHERE what LIKE 'w%') AS slowest,
	       max(ms) FILTER (WHERE what = 'fanout') AS fanout, max(ms) FILTER (WHERE what = 'fanout top-5') AS topk
	  FROM timing GROUP BY round),
     ratios AS (
	SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY fanout) / percentile_cont(0.5) WITHIN GROUP (ORDER BY slowest) AS r1,
	       percentile_cont(0.5) WITHIN GROUP (ORDER BY topk) / percentile_cont(0.5) WITHIN GROUP (ORDER BY slowest) AS r2
	  FROM per_round)
SELECT format('  %s  fan-out / slowest worker                                   %s  (target <= 1.2)',
              CASE WHEN r1 <= 1.2 THEN 'PASS' ELSE 'MISS' END, round(r1::numeric, 2)) || E'\n' ||
       format('  %s  fan-out top-5 / slowest worker                             %s  (target <= 1.2)',
              CASE WHEN r2 <= 1.2 THEN 'PASS' ELSE 'MISS' END, round(r2::numeric, 2))
  FROM ratios;
SQL

# bench/dist_report.awk: the tables and targets of parts 5 and 6 (bench/dist_part.sh),
# from its "round variant value" lines, all measured in the same run.
# -v part=5 or 6.  Medians over rounds; targets are ratios of medians, with the
# median of the per-round ratios beside them as a check.  Nothing is tuned.

$1 > 0 { v[$2, $1] = $3; seen[$2] = 1; if ($1 > maxr) maxr = $1 }

function median(name,    r, c, a, i, j, t) {
	c = 0
	for (r = 1; r <= maxr; r++)
		if ((name, r) in v)
			a[++c] = v[name, r] + 0
	if (c == 0)
		return ""
	for (i = 2; i <= c; i++)
		for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
	return c % 2 ? a[(c + 1) / 2] : (a[c / 2] + a[c / 2 + 1]) / 2
}
function spread(name,    r, lo, hi, m) {
	lo = hi = ""
	for (r = 1; r <= maxr; r++)
		if ((name, r) in v) {
			if (lo == "" || v[name, r] + 0 < lo) lo = v[name, r] + 0
			if (hi == "" || v[name, r] + 0 > hi) hi = v[name, r] + 0
		}
	m = median(name)
	return (m == "" || m == 0) ? "-" : sprintf("%d%%", 100 * (hi - lo) / m + 0.5)
}
function round_ratio(x, y,    r, c, a, i, j, t) {
	c = 0
	for (r = 1; r <= maxr; r++)
		if ((x, r) in v && (y, r) in v && v[y, r] > 0)
			a[++c] = v[x, r] / v[y, r]
	if (c == 0)
		return ""
	for (i = 2; i <= c; i++)
		for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
	return c % 2 ? a[(c + 1) / 2] : (a[c / 2] + a[c / 2 + 1]) / 2
}
function ratio(x, y,    a, b) { a = median(x); b = median(y); return (a == "" || b == "" || b == 0) ? "" : a / b }

function row(name, desc, unit, scale,    m) {
	m = median(name)
	if (m == "")
		printf "  %-80s %10s\n", desc, "(not measured)"
	else
		printf "  %-80s %10.*f %s  spread %s\n", desc, m * scale < 10 ? 2 : 1, m * scale, unit, spread(name)
}

# target DESC X Y BOUND [EXTRA_OK EXTRA_NOTE]: PASS/MISS on median(X)/median(Y) <= BOUND
function target(desc, x, y, bound, extra_ok, note,    q, rr, ok) {
	q = ratio(x, y)
	if (q == "") {
		printf "  %-4s  %-62s  %s\n", "N/A", desc, "(not measured)"
		missing++
		return
	}
	ok = q <= bound && (extra_ok == "" || extra_ok)
	if (ok) pass++; else miss++
	rr = round_ratio(x, y)
	printf "  %-4s  %-62s %8.2f  (target <= %s)%s%s\n", ok ? "PASS" : "MISS", desc, q, bound,
		rr == "" ? "" : sprintf("  (per-round ratios, median: %.2f)", rr), note == "" ? "" : "  " note
}

END {
	pass = miss = missing = 0
	if (part == 5) {
		printf "  5a. Writes in bulk: %d rows (one file), medians of %d rounds; each round runs every variant once,\n", nrows, crounds
		print  "      order rotating; before each, its table is emptied (TRUNCATE) and CHECKPOINTed, untimed."
		print  "      Times are psql's \\timing of the statement in autocommit: the commit (two-phase on the nodes) included."
		row("copy_local", "COPY faces_local FROM file   (plain local table, PRIMARY KEY)", "ms", 1)
		row("copy_r2", "COPY faces FROM file         (coordinator, ring 'default', R = 2)", "ms", 1)
		row("copy_r1", "COPY faces_r1 FROM file      (coordinator, ring 'r1', R = 1)", "ms", 1)
		row("peer_insert", "INSERT INTO faces_peer SELECT * FROM faces_src   (postgres_fdw peer)", "ms", 1)
		print ""
		printf "  5b. Reads on %d rows, medians of %d rounds (after one warm-up round), order rotating.\n", nrows, rounds
		printf "      Point lookups: %d per variant and round, pgbench -n -M prepared -t N -r, one client; the figure\n", nsel
		print  "      is pgbench's mean per-statement latency of the lookup SELECT (client round trip included)."
		print  "      Direct: each worker looks up keys it owns (shard_for), its number of lookups = its share"
		printf "      of the keys (%s of %d), and the figure is the mean over the three, weighted by share.\n", substr(shares, 2), nrows
		row("sel_coord", "SELECT ... FROM faces WHERE nik = $1        (coordinator)", "us", 1000)
		row("sel_nostats", "  the same, ringshard.track_node_stats = off (no stat_nodes counters)", "us", 1000)
		row("sel_nohot", "  the same, ringshard.track_hot_keys = off (no hot-key sketch)", "us", 1000)
		row("sel_direct", "SELECT ... FROM faces WHERE nik = $1        (directly on the owning workers)", "us", 1000)
		row("sel_peer", "SELECT ... FROM faces_peer WHERE nik = $1   (postgres_fdw peer)", "us", 1000)
		row("sel_local", "  diagnostic: the same on faces_local, the coordinator's local table", "us", 1000)
		print  "      A join of one key: SELECT a.score, b.payload FROM t a JOIN t b ON b.nik = a.nik WHERE a.nik = $1"
		row("join_router", "  faces  (coordinator: a router statement, whole on one replica)", "us", 1000)
		row("join_table", "  faces  (coordinator, ringshard.router_statements = off: table by table)", "us", 1000)
		row("join_local", "  faces_local  (plain local table)", "us", 1000)
		print  "      Scans: psql's \\timing of the query, in a session that ran a point lookup first (links up, caches warm)."
		row("agg_coord", "SELECT count(*), sum(score) FROM faces      (coordinator)", "ms", 1)
		row("agg_direct", "  its Remote SQL directly on the slowest worker (max of the three, per round)", "ms", 1)
		row("agg_w1", "    on w1", "ms", 1)
		row("agg_w2", "    on w2", "ms", 1)
		row("agg_w3", "    on w3", "ms", 1)
		row("topk_coord", "SELECT ... FROM faces ORDER BY score DESC LIMIT 10       (coordinator)", "ms", 1)
		row("topk_peer", "SELECT ... FROM faces_peer ORDER BY score DESC LIMIT 10  (postgres_fdw peer)", "ms", 1)
		print  "      Diagnostic, on worker w1 (it holds 2/3 of the rows at R = 2), what the fan-out filter costs a node:"
		row("diag_scan", "  SELECT count(*) FROM faces", "ms", 1)
		row("diag_filter", "  SELECT count(*) FROM faces t WHERE ringshard_worker.reads_here('faces', t.nik, '{}', version)", "ms", 1)
		print ""
		print "  Targets of part 5 (ratios of medians measured in this run)"
		target(sprintf("COPY %s rows: coordinator (R = 2) / plain local table", nrows == 1000000 ? "1 M" : nrows),
		       "copy_r2", "copy_local", 5)
		target("COPY at R = 1 / postgres_fdw peer INSERT ... SELECT (batch 1000)", "copy_r1", "peer_insert", 1.0)
		target("point SELECT: coordinator / directly on the owning workers", "sel_coord", "sel_direct", 2.5)
		target("point SELECT: coordinator / postgres_fdw peer", "sel_coord", "sel_peer", 1.2)
		target("point SELECT: stat_nodes counters on / off", "sel_coord", "sel_nostats", 1.05)
		target("point SELECT: hot-key sketch on / off", "sel_coord", "sel_nohot", 1.05)
		target("count(*), sum(score): coordinator / slowest worker's part", "agg_coord", "agg_direct", 1.3,
		       agg_rows != "" && agg_rows + 0 <= nnodes,
		       sprintf("(rows sent by the nodes: %s; target %d, one per node)", agg_rows == "" ? "?" : agg_rows, nnodes))
		target("ORDER BY score DESC LIMIT 10: coordinator / postgres_fdw peer", "topk_coord", "topk_peer", 0.5)
		target("join of one key: router statement / table by table", "join_router", "join_table", 1.0)
	} else {
		printf "  Single-row INSERTs in autocommit (%d transactions per variant and round) and transactions of\n", nins
		printf "  10 single-row INSERTs between BEGIN and COMMIT (%d per variant and round), pgbench -n -M prepared,\n", ntx10
		printf "  one client; mean latency per transaction; medians of %d rounds after one warm-up round, order rotating.\n", wrounds
		print  "  New keys each time; R = 2, so a row goes to 2 of the 3 workers and 10 rows nearly always to all 3."
		row("ins_local", "INSERT INTO faces_local   (plain local table)", "ms", 1)
		row("ins_2pc", "INSERT INTO faces         (coordinator, R = 2, two-phase commit)", "ms", 1)
		row("ins_1pc", "INSERT INTO faces         (coordinator, R = 2, ringshard.two_phase_commit = off)", "ms", 1)
		row("ins_r1", "INSERT INTO faces_r1      (coordinator, R = 1: one node, one-phase commit)", "ms", 1)
		row("upd_local", "UPDATE faces_local SET score = score + 0.000001 WHERE nik = $1   (plain local table)", "ms", 1)
		row("upd_2pc", "UPDATE faces SET ... WHERE nik = $1   (coordinator, R = 2, two-phase commit)", "ms", 1)
		row("tx10_2pc", "BEGIN; 10 x INSERT INTO faces; COMMIT   (two-phase commit)", "ms", 1)
		row("tx10_1pc", "BEGIN; 10 x INSERT INTO faces; COMMIT   (two_phase_commit = off)", "ms", 1)
		printf "  Upserts of 500 rows, half of them keys of the one before (DO UPDATE), half new (%d per variant and round):\n", nups
		row("ups_local", "INSERT INTO faces_local ... ON CONFLICT (nik) DO UPDATE   (plain local table)", "ms", 1)
		row("ups_batch", "INSERT INTO faces ... ON CONFLICT (nik) DO UPDATE   (R = 2; in batches, one per replica set)", "ms", 1)
		row("ups_row", "the same ... RETURNING nik   (R = 2; RETURNING: row by row)", "ms", 1)
		printf "  prepared transactions left on the server afterwards: %s\n", leftover
		print ""
		print "  Targets of part 6 (and part 5's single-row INSERT)"
		target("single-row INSERT: coordinator (R = 2) / plain local table", "ins_2pc", "ins_local", 4)
		target("single-row INSERT: coordinator (R = 1) / plain local table", "ins_r1", "ins_local", 2)
		target("single-key UPDATE: coordinator (R = 2) / plain local table", "upd_2pc", "upd_local", 4)
		target("single-row INSERT: two-phase / one-phase commit", "ins_2pc", "ins_1pc", 1.5)
		target("10-row multi-node transaction: two-phase / one-phase commit", "tx10_2pc", "tx10_1pc", 1.5)
		if (ratio("ups_batch", "ups_local") != "" && ratio("ups_row", "ups_batch") != "")
			printf "  (no target) 500-row upsert: in batches / local table %.2f; row by row / in batches %.2f\n",
				ratio("ups_batch", "ups_local"), ratio("ups_row", "ups_batch")
	}
	printf "  %d PASS, %d MISS%s\n", pass, miss, missing ? sprintf(", %d not measured", missing) : ""
}

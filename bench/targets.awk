# bench/targets.awk: the targets of the benchmark, from the RESULT lines of
# core_bench and of the SQL part (all measured in the same run).
# Each target prints PASS or MISS with the measured ratio; nothing is tuned.

function kv(line, arr,    n, i, f, p) {
	delete arr
	n = split(line, f, " ")
	for (i = 3; i <= n; i++) {
		p = index(f[i], "=")
		if (p > 0)
			arr[substr(f[i], 1, p - 1)] = substr(f[i], p + 1)
	}
}

# le: the ratio must be <= bound; ge: >= bound.
function target(desc, ratio, op, bound, detail,    ok, verdict) {
	if (ratio == "" || ratio != ratio + 0) {
		printf "  %-4s  %-62s  %s\n", "N/A", desc, "(not measured)"
		missing++
		return
	}
	ok = (op == "le") ? (ratio <= bound) : (ratio >= bound)
	verdict = ok ? "PASS" : "MISS"
	if (ok) pass++; else miss++
	printf "  %-4s  %-62s %8.2f  (target %s %s)%s\n", verdict, desc, ratio,
		(op == "le" ? "<=" : ">="), bound, detail == "" ? "" : "  " detail
}

$1 == "RESULT" && $2 == "sql" {
	kv($0, a)
	sql[a["grp"], a["nodes"], a["key"]] = a["med_ms"]
	nsrow[a["grp"], a["nodes"], a["key"]] = a["nsrow"]
}
$1 == "RESULT" && $2 == "pair" { kv($0, a); if (a["ms_3"] > 0) pair_ratio[a["key"], ++npairs[a["key"]]] = a["ms_tokens"] / a["ms_3"] }
$1 == "RESULT" && $2 == "raw" { kv($0, a); raw[a["grp"], a["nodes"], a["key"], a["round"]] = a["nsrow"]; rounds[a["round"]] = 1 }
$1 == "RESULT" && $2 == "core_lookup" { kv($0, a); lookup_ring[a["points"]] = a["ring_ns"]; lookup_lb[a["points"]] = a["lb_ns"] }
$1 == "RESULT" && $2 == "core_build" { kv($0, a); build[a["points"]] = a["build_ms"]; build_base[a["points"]] = a["base_ms"] }
$1 == "RESULT" && $2 == "core_memory" { kv($0, a); mem[a["points"]] = a["bytes_per_point"]; mem_malloc[a["points"]] = a["malloc_bytes_per_point"] }
$1 == "RESULT" && $2 == "core_lookup" { dep_ring[a["points"]] = a["dep_ring_ns"] }
$1 == "RESULT" && $2 == "core_replicas" { kv($0, a); core_owner[a["points"]] = a["owner_ns"]; core_rep[a["points"]] = a["replicas_ns"] }
$1 == "RESULT" && $2 == "glue" { kv($0, a); glue[a["ring"]] = a["bytes"] }
$1 == "RESULT" && $2 == "balance" {
	kv($0, a)
	if (a["points"] == "tokens16") {
		if (a["owned_max"] + 0 > bal_owned[a["r"]] + 0) bal_owned[a["r"]] = a["owned_max"] + 0
		if (a["copies_max"] + 0 > bal_copies[a["r"]] + 0) bal_copies[a["r"]] = a["copies_max"] + 0
		bal_n[a["r"]] = bal_n[a["r"]] " " a["n"]
	}
}
# part 8 (bench/pgbench_part.sh): medians of tps per variant and workload, and each round's
$1 == "RESULT" && $2 == "pgbench" {
	kv($0, a)
	pgb_tps[a["variant"], a["workload"]] = a["tps"]
	pgb_failed[a["variant"], a["workload"]] = a["failed_pct"]
	pgb_retried[a["variant"], a["workload"]] = a["retried_pct"]
	pgb_aborted[a["variant"], a["workload"]] = a["aborted"]
}
# part 9 (bench/compat_part.sh): this build against 1.1
$1 == "RESULT" && $2 == "compat" { kv($0, a); compat[a["workload"]] = a["ratio"]; compat_rr[a["workload"]] = a["round_ratio"]; compat_11[a["workload"]] = a["v11_ms"]; compat_12[a["workload"]] = a["v12_ms"]; compat_cpu[a["workload"]] = a["cpu_ratio"] }
$1 == "RESULT" && $2 == "pgbench_invariant" { kv($0, a); pgb_inv_runs = a["runs"]; pgb_inv_broken = a["broken"] }
$1 == "RESULT" && $2 == "pgbench_raw" { kv($0, a); pgb_raw[a["variant"], a["workload"], a["round"]] = a["tps"]; pgb_rounds[a["round"]] = 1 }

# Median over rounds of the ratio of two queries timed in the same round.
function round_ratio(g1, n1, k1, g2, n2, k2,    r, c, v, i, j, t) {
	c = 0
	for (r in rounds)
		if ((g1, n1, k1, r) in raw && (g2, n2, k2, r) in raw && raw[g2, n2, k2, r] > 0)
			v[++c] = raw[g1, n1, k1, r] / raw[g2, n2, k2, r]
	if (c == 0)
		return ""
	for (i = 2; i <= c; i++)
		for (j = i; j > 1 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
	return c % 2 ? v[(c + 1) / 2] : (v[c / 2] + v[c / 2 + 1]) / 2
}
# Median of the ratios of the pairs timed back to back (bench.run_pairs).
function pair_median(key,    c, v, i, j, t) {
	c = npairs[key] + 0
	if (c == 0)
		return ""
	for (i = 1; i <= c; i++)
		v[i] = pair_ratio[key, i]
	for (i = 2; i <= c; i++)
		for (j = i; j > 1 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
	return c % 2 ? v[(c + 1) / 2] : (v[c / 2] + v[c / 2 + 1]) / 2
}
function rr_note(x) { return x == "" ? "" : sprintf("(per-round ratios, median: %.2f)", x) }

# Median over rounds of the ratio of two pgbench runs of the same round.
function pgb_round_ratio(v1, w1, v2, w2,    r, c, v, i, j, t) {
	c = 0
	for (r in pgb_rounds)
		if ((v1, w1, r) in pgb_raw && (v2, w2, r) in pgb_raw && pgb_raw[v2, w2, r] > 0)
			v[++c] = pgb_raw[v1, w1, r] / pgb_raw[v2, w2, r]
	if (c == 0)
		return ""
	for (i = 2; i <= c; i++)
		for (j = i; j > 1 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
	return c % 2 ? v[(c + 1) / 2] : (v[c / 2] + v[c / 2 + 1]) / 2
}

# The targets of part 8: TPC-B -c 4 at R = 2 against local tables and the peer,
# and no transaction of ringshard's TPC-B meeting an error at READ COMMITTED
# (failed, or retried by --max-tries: on one server, TPC-B at READ COMMITTED gets
# neither a serialization failure nor a deadlock), and no client aborted.
function pgbench_targets(    v, w, k, e, worst, ab, n) {
	target("pgbench TPC-B -c 4: ringshard R = 2 / local tables, tps",
	       ratio(pgb_tps["rs2", "tpcb4"], pgb_tps["local", "tpcb4"]), "ge", 0.3,
	       rr_note(pgb_round_ratio("rs2", "tpcb4", "local", "tpcb4")))
	target("pgbench TPC-B -c 4: ringshard R = 2 / postgres_fdw peer, tps",
	       ratio(pgb_tps["rs2", "tpcb4"], pgb_tps["peer", "tpcb4"]), "ge", 1.5,
	       rr_note(pgb_round_ratio("rs2", "tpcb4", "peer", "tpcb4")))
	# no target, printed beside them: -c 1 and select-only, R = 1 and 2
	split("rs2 tpcb1 rs1 tpcb4 rs1 tpcb1 rs2 sel4 rs1 sel4", pr, " ")
	for (v = 1; v < 10; v += 2)
		if ((pr[v], pr[v + 1]) in pgb_tps && ("local", pr[v + 1]) in pgb_tps && ("peer", pr[v + 1]) in pgb_tps)
			printf "  info  %-62s %8.2f  x peer %.2f  (per-round ratios, median: %.2f, %.2f)\n",
			       sprintf("pgbench %s: ringshard R = %s / local tables, tps",
			               pr[v + 1] == "tpcb4" ? "TPC-B -c 4" : pr[v + 1] == "tpcb1" ? "TPC-B -c 1" : "select-only -c 4",
			               substr(pr[v], 3)),
			       ratio(pgb_tps[pr[v], pr[v + 1]], pgb_tps["local", pr[v + 1]]),
			       ratio(pgb_tps[pr[v], pr[v + 1]], pgb_tps["peer", pr[v + 1]]),
			       pgb_round_ratio(pr[v], pr[v + 1], "local", pr[v + 1]), pgb_round_ratio(pr[v], pr[v + 1], "peer", pr[v + 1])
	worst = ""
	ab = n = 0
	for (v = 1; v <= 2; v++)
		for (w = 1; w <= 2; w++) {
			k = (v == 1 ? "rs1" : "rs2") SUBSEP (w == 1 ? "tpcb4" : "tpcb1")
			if (!(k in pgb_failed))
				continue
			n++
			e = pgb_failed[k] + pgb_retried[k]
			if (worst == "" || e > worst)
				worst = e
		}
	for (k in pgb_aborted)
		ab += pgb_aborted[k]
	target("pgbench TPC-B, READ COMMITTED, ringshard: % failed or retried",
	       n == 4 ? worst : "", "le", 0, "(the worst of R = 1, 2 at -c 4, -c 1)")
	target("pgbench, every run: clients aborted by an error",
	       n == 4 ? ab : "", "le", 0, "")
	target("pgbench TPC-B: runs after which the invariant was broken",
	       pgb_inv_runs != "" ? pgb_inv_broken : "", "le", 0,
	       pgb_inv_runs != "" ? sprintf("(checked after each of %d TPC-B runs, every variant)", pgb_inv_runs) : "")
}

function ratio(x, y) { return (x == "" || y == "" || y + 0 == 0) ? "" : x / y }

function d(x, y) { return (x == "" || y == "") ? "" : x - y }
function cell(x) { return x == "" ? sprintf("%9s", "-") : sprintf("%9.1f", x) }

END {
	if (only == "pgbench") {	# bench/pgbench_part.sh run on its own
		pass = miss = missing = 0
		print "Targets of part 8 (ratios of medians measured in this run)"
		pgbench_targets()
		printf "  %d PASS, %d MISS%s\n", pass, miss, missing ? sprintf(", %d not measured", missing) : ""
		exit
	}
	# Where the per-row time goes: differences of medians of this run.
	split("3 64 1000", ns, " ")
	pts[3] = 768; pts[64] = 16384; pts[1000] = 256000
	print "Breakdown of the per-row time, every key (ns/row; differences of the medians above)"
	printf "  %-66s %9s %9s %9s\n", "", "3 nodes", "64 nodes", "1000 nodes"
	printf "  %-66s", "scan + count (count(k))"
	for (i = 1; i <= 3; i++) printf " %s", cell(nsrow["all", 0, "scan"]); print ""
	printf "  %-66s", "+ calling a C function (octet_length(k) - count(k))"
	for (i = 1; i <= 3; i++) printf " %s", cell(d(nsrow["all", 0, "octet"], nsrow["all", 0, "scan"])); print ""
	printf "  %-66s", "+ key bytes and MurmurHash3 (ring_token - octet_length)"
	for (i = 1; i <= 3; i++) printf " %s", cell(d(nsrow["all", 0, "token"], nsrow["all", 0, "octet"])); print ""
	printf "  %-66s", "+ ring fetch and lookup (shard_for - ring_token)"
	for (i = 1; i <= 3; i++) printf " %s", cell(d(nsrow["all", ns[i], "shard"], nsrow["all", 0, "token"])); print ""
	printf "  %-66s", "    the C core's lookup alone, latency-bound (part 2)"
	for (i = 1; i <= 3; i++) printf " %s", cell(dep_ring[pts[ns[i]]]); print ""
	printf "  %-66s", "= shard_for(k, ring)"
	for (i = 1; i <= 3; i++) printf " %s", cell(nsrow["all", ns[i], "shard"]); print ""
	printf "  %-66s", "  hashtext(k) % N, for comparison"
	for (i = 1; i <= 3; i++) printf " %s", cell(nsrow["all", ns[i], "hashmod"]); print ""
	printf "  %-66s", "replicas_for R=3 - shard_for"
	for (i = 1; i <= 3; i++) printf " %s", cell(d(nsrow["all", ns[i], "replicas"], nsrow["all", ns[i], "shard"])); print ""
	printf "  %-66s", "    of which a text[] of one (replicas_for(k,ring,1) - shard_for)"
	for (i = 1; i <= 3; i++) printf " %s", cell(d(nsrow["all", ns[i], "replicas1"], nsrow["all", ns[i], "shard"])); print ""
	printf "  %-66s", "    C core: rs_ring_replicas R=3 - rs_ring_owner (part 2)"
	for (i = 1; i <= 3; i++) printf " %s", cell(d(core_rep[pts[ns[i]]], core_owner[pts[ns[i]]])); print ""
	printf "  %-66s", "read_node_for R=3 - shard_for (replica walk, no array)"
	for (i = 1; i <= 3; i++) printf " %s", cell(d(nsrow["all", ns[i], "readnode"], nsrow["all", ns[i], "shard"])); print ""
	print ""

	pass = miss = missing = 0
	print "Targets (ratios of medians measured in this run)"
	target("shard_for, 64 nodes / hashtext(k) % 64, every key",
	       ratio(sql["all", 64, "shard"], sql["all", 64, "hashmod"]), "le", 1.3,
	       rr_note(round_ratio("all", 64, "shard", "all", 64, "hashmod")))
	target("shard_for, 1,000 nodes / shard_for, 3 nodes, every key",
	       ratio(sql["all", 1000, "shard"], sql["all", 3, "shard"]), "le", 1.3,
	       rr_note(round_ratio("all", 1000, "shard", "all", 3, "shard")))
	# paired (bench.run_pairs): the median of the back-to-back ratios; without pairs, the rounds'
	pm = pair_median("shard_tokens")
	rm = ratio(sql["all", 1000, "shard_tokens"], sql["all", 3, "shard"])
	if (pm != "")
		note = sprintf("(median of %d pairs timed back to back; ratio of the rounds' medians: %.2f, per-round median: %.2f)",
		               npairs["shard_tokens"], rm, round_ratio("all", 1000, "shard_tokens", "all", 3, "shard"))
	else {
		pm = rm
		note = rr_note(round_ratio("all", 1000, "shard_tokens", "all", 3, "shard"))
	}
	target("shard_for, 1,000 nodes x 16 allocated tokens / 3 nodes, every key", pm, "le", 1.1, note)
	target("C core: lower_bound / rs_ring lookup time, 256,000 points",
	       ratio(lookup_lb[256000], lookup_ring[256000]), "ge", 2,
	       sprintf("(%.1f vs %.1f ns, hashing excluded)", lookup_lb[256000], lookup_ring[256000]))
	split("3 64 1000", ns, " ")
	# The hand-written rings ran on the subset and are scaled per row; shard_for
	# per row comes from every key.  The same-subset ratio is shown beside it.
	for (b = 1; b <= 2; b++) {
		base = b == 1 ? "sqlring" : "plring"
		for (i = 1; i <= 3; i++)
			target(sprintf("hand-written %s ring / shard_for per row, %s nodes", b == 1 ? "SQL" : "PL/pgSQL", ns[i]),
			       ratio(nsrow["small", ns[i], base], nsrow["all", ns[i], "shard"]), "ge", b == 1 ? 20 : 100,
			       sprintf("(%.0f vs %.0f ns/row; per-round median %.1f; on the same subset: %.1f)", nsrow["small", ns[i], base],
			               nsrow["all", ns[i], "shard"], round_ratio("small", ns[i], base, "all", ns[i], "shard"),
			               ratio(nsrow["small", ns[i], base], nsrow["small", ns[i], "shard"])))
	}
	target("ring build 256,000 points / (hash all labels + one qsort)",
	       ratio(build[256000], build_base[256000]), "le", 1.5,
	       sprintf("(%.1f vs %.1f ms)", build[256000], build_base[256000]))
	split("768 16384 256000", ps, " ")
	split("r3 r64 r1000", rs, " ")
	for (i = 1; i <= 3; i++) {
		full = ""
		if (glue[rs[i]] != "" && glue[rs[i]] >= 0)
			full = sprintf("(with malloc headers and the backend's per-node text/flags: %.2f B)", mem_malloc[ps[i]] + glue[rs[i]] / ps[i])
		target(sprintf("backend cache bytes per point (rs_ring arrays), %s points", ps[i]),
		       mem[ps[i]], "le", 16, full)
	}
	for (i = 1; i <= 3; i++)
		target(sprintf("replicas_for (R = 3) / shard_for, %s nodes, every key", ns[i]),
		       ratio(sql["all", ns[i], "replicas"], sql["all", ns[i], "shard"]), "le", 1.5,
		       rr_note(round_ratio("all", ns[i], "replicas", "all", ns[i], "shard")))
	for (r = 2; r <= 3; r++) {
		target(sprintf("owned share, most loaded / mean, 16 allocated tokens, R = %d, worst N", r),
		       bal_owned[r], "le", 1.05, "(N =" bal_n[r] ")")
		target(sprintf("share of the copies, most loaded / mean, 16 allocated tokens, R = %d, worst N", r),
		       bal_copies[r], "le", 1.10, "(N =" bal_n[r] ")")
	}
	pgbench_targets()
	if ("copy" in compat || "insert" in compat) {
		target("COPY of the distributed table: this build / 1.1, time",
		       compat["copy"] == "" ? "" : compat["copy"] + 0, "le", 1.05, sprintf("(%s vs %s ms; per-round ratios, median: %.2f; server CPU: %s)", compat_12["copy"], compat_11["copy"], compat_rr["copy"], compat_cpu["copy"]))
		target("single-row INSERT, R = 2, 2PC: this build / 1.1, time",
		       compat["insert"] == "" ? "" : compat["insert"] + 0, "le", 1.05, sprintf("(%s vs %s ms; per-round ratios, median: %.2f; server CPU: %s)", compat_12["insert"], compat_11["insert"], compat_rr["insert"], compat_cpu["insert"]))
	}
	printf "  %d PASS, %d MISS%s\n", pass, miss, missing ? sprintf(", %d not measured", missing) : ""
}

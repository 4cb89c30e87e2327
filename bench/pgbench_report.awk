# bench/pgbench_report.awk: the table of part 8 (bench/pgbench_part.sh), from its
# "round variant workload tps processed failed retried serialization deadlock aborted cpu_ms
# coordinator_ms workers_ms" lines, all measured in the same run; or, with -v results=1, the RESULT lines that
# bench/targets.awk reads.  Medians over rounds; nothing is tuned.

{
	k = $2 SUBSEP $3
	tps[k, $1] = $4; seen[k] = 1
	if ($1 > maxr) maxr = $1
	proc[k] += $5; fail[k] += $6; retr[k] += $7; ser[k] += $8; dl[k] += $9; abrt[k] += $10
	if (NF >= 11 && $11 != "-")
		cpu[k, $1] = $11
	if (NF >= 13 && $12 != "-") {
		coord_cpu[k, $1] = $12
		worker_cpu[k, $1] = $13
	}
}

# the median over the rounds of values[k, round], or "" when no round has one
function rounds_median(values, k,    r, c, a, i, j, t) {
	c = 0
	for (r = 1; r <= maxr; r++)
		if ((k, r) in values)
			a[++c] = values[k, r] + 0
	if (c == 0)
		return ""
	for (i = 2; i <= c; i++)
		for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
	return c % 2 ? a[(c + 1) / 2] : (a[c / 2] + a[c / 2 + 1]) / 2
}
function median(k) { return rounds_median(tps, k) }
function spread(k,    r, lo, hi, m) {
	lo = hi = ""
	for (r = 1; r <= maxr; r++)
		if ((k, r) in tps) {
			if (lo == "" || tps[k, r] + 0 < lo) lo = tps[k, r] + 0
			if (hi == "" || tps[k, r] + 0 > hi) hi = tps[k, r] + 0
		}
	m = median(k)
	return (m == "" || m == 0) ? "-" : sprintf("%d%%", 100 * (hi - lo) / m + 0.5)
}
function pct(x, k) { return proc[k] + fail[k] > 0 ? 100 * x / (proc[k] + fail[k]) : "" }
function ratio(x, y) { return (x == "" || y == "" || y + 0 == 0) ? "-" : sprintf("%.2f", x / y) }

END {
	split("tpcb4 tpcb1 sel4", wls, " ")
	nv = split("local rs1 rs2 peer rs2_1pc", vs, " ")
	wname["tpcb4"] = "TPC-B, -c 4 -j 2"
	wname["tpcb1"] = "TPC-B, -c 1"
	wname["sel4"] = "select-only, -S -M prepared -c 4 -j 2"
	vname["local"] = "local tables (bench_local)"
	vname["rs1"] = "ringshard, R = 1"
	vname["rs2"] = "ringshard, R = 2"
	vname["peer"] = "postgres_fdw peer (hash partitions)"
	vname["rs2_1pc"] = "diagnostic: R = 2, two_phase_commit=off"
	if (results) {
		for (i = 1; i <= 3; i++)
			for (j = 1; j <= nv; j++) {
				k = vs[j] SUBSEP wls[i]
				if (!(k in seen))
					continue
				printf "RESULT pgbench variant=%s workload=%s tps=%s failed_pct=%.4f retried_pct=%.4f aborted=%d processed=%d\n",
					vs[j], wls[i], median(k), pct(fail[k], k), pct(retr[k], k), abrt[k], proc[k]
				for (r = 1; r <= maxr; r++)
					if ((k, r) in tps)
						printf "RESULT pgbench_raw variant=%s workload=%s round=%d tps=%s\n", vs[j], wls[i], r, tps[k, r]
			}
		if (each_run != "") {
			nr = nb = 0
			while ((getline line < each_run) > 0)
				if (split(line, f, " ") >= 4) { nr++; if (f[4] != "holds") nb++ }
			printf "RESULT pgbench_invariant runs=%d broken=%d\n", nr, nb
		}
		exit
	}
	printf "  pgbench -n, scale %d, -T %d s per run; medians of %d rounds after a warm-up round of %d s per run;\n", scale, secs, rounds, warm
	print  "  each round runs every variant once per workload, the order rotating; a CHECKPOINT (untimed) before each run."
	printf "  Every run has --max-tries %d: a transaction that gets a serialization failure (40001) or a deadlock\n", tries
	print  "  (40P01) is retried, up to that many tries; 'retried' = transactions that needed a retry and then"
	print  "  succeeded, 'failed' = those that still failed; both over all rounds, % of (processed + failed)."
	print  "  TPC-B is pgbench's default script in the simple protocol, at the default isolation (READ COMMITTED)."
	printf "  %-38s %-36s %9s %7s %8s %7s %8s %8s %s\n", "", "", "tps", "spread", "x local", "x peer", "failed", "retried", ""
	for (i = 1; i <= 3; i++) {
		for (j = 1; j <= nv; j++) {
			k = vs[j] SUBSEP wls[i]
			loc = median(vs[1] SUBSEP wls[i])
			peer = median(vs[4] SUBSEP wls[i])
			m = median(k)
			if (m == "" && j > 4)
				continue
			if (m == "") {
				printf "  %-38s %-36s %9s\n", j == 1 ? wname[wls[i]] : "", vname[vs[j]], "(not measured)"
				continue
			}
			note = ""
			if (ser[k] + dl[k] > 0)
				note = sprintf("(errors met: %d serialization, %d deadlock)", ser[k], dl[k])
			if (abrt[k] > 0)
				note = note sprintf(" %d client(s) ABORTED", abrt[k])
			printf "  %-38s %-36s %9.1f %7s %8s %7s %7.2f%% %7.2f%% %s\n", j == 1 ? wname[wls[i]] : "", vname[vs[j]], m, spread(k),
				ratio(m, loc), ratio(m, peer), pct(fail[k], k), pct(retr[k], k), note
		}
	}
	# CPU per transaction: on a machine that runs everything, what throughput is bounded by
	header = 0
	for (i = 1; i <= 2; i++)
		for (j = 1; j <= nv; j++) {
			k = vs[j] SUBSEP wls[i]
			c = rounds_median(cpu, k)
			if (c == "")
				continue
			if (!header) {
				print ""
				print "  CPU time per TPC-B transaction (ms): the whole machine's (pgbench, the coordinator's and the workers'"
				print "  backends, all on this machine) over each run, by transactions processed; of it, the client backends"
				print "  of the variant's database (the coordinator's; local's own) and of its worker databases (from 0.5 s"
				print "  into each run to 1 s before its end, /proc/PID/stat); medians of the rounds"
				printf "  %-13s %-36s %9s   %-13s %11s %9s\n", "", "", "machine", "", "coordinator", "workers"
				header = 1
			}
			cc = rounds_median(coord_cpu, k)
			wc = rounds_median(worker_cpu, k)
			printf "  %-13s %-36s %9.3f   x local %-5s %11s %9s\n", j == 1 ? (wls[i] == "tpcb4" ? "TPC-B, -c 4" : "TPC-B, -c 1") : "",
				vname[vs[j]], c, ratio(c, rounds_median(cpu, vs[1] SUBSEP wls[i])),
				cc == "" ? "-" : sprintf("%.3f", cc), wc == "" ? "-" : sprintf("%.3f", wc)
		}
	# where a TPC-B transaction's time goes: pgbench -r, medians over rounds
	if (statements != "") {
		while ((getline line < statements) > 0) {
			if (split(line, f, " ") < 10)
				continue
			for (c = 1; c <= 7; c++)
				st[f[2], f[3], c, f[1]] = f[3 + c]
			stseen[f[2], f[3]] = 1
		}
		close(statements)
		split("BEGIN UPDATE_accounts SELECT UPDATE_tellers UPDATE_branches INSERT END", sn, " ")
		print ""
		print "  Where a TPC-B transaction's time goes: pgbench -r, mean latency of each statement (ms), medians of the"
		print "  rounds; END is the commit (for ringshard: PREPARE TRANSACTION on the nodes written, the coordinator's"
		print "  commit, COMMIT PREPARED)"
		printf "  %-13s %-36s", "", ""
		for (c = 1; c <= 7; c++) { nm = sn[c]; gsub(/_/, " ", nm); printf " %9s", substr(nm, 1, 9) }
		print ""
		for (i = 1; i <= 2; i++)
			for (j = 1; j <= nv; j++) {
				if (!((vs[j], wls[i]) in stseen))
					continue
				printf "  %-13s %-36s", j == 1 ? (wls[i] == "tpcb4" ? "TPC-B, -c 4" : "TPC-B, -c 1") : "", vname[vs[j]]
				for (c = 1; c <= 7; c++) {
					n = 0
					delete a
					for (r = 1; r <= maxr; r++)
						if ((vs[j], wls[i], c, r) in st && st[vs[j], wls[i], c, r] != "")
							a[++n] = st[vs[j], wls[i], c, r] + 0
					for (p = 2; p <= n; p++)
						for (q = p; q > 1 && a[q - 1] > a[q]; q--) { t = a[q]; a[q] = a[q - 1]; a[q - 1] = t }
					printf " %9s", n == 0 ? "-" : sprintf("%.3f", n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2)
				}
				print ""
			}
	}
	# what the backends waited for, sampled every 0.1 s during round 1's TPC-B -c 4
	if (waits != "") {
		while ((getline line < waits) > 0) {
			if ((nf = split(line, f, " ")) < 3)
				continue
			w = f[3]
			for (c = 4; c <= nf; c++)
				w = w " " f[c]
			nw[f[1], f[2], w]++
			ntot[f[1], f[2]]++
			wseen[f[1], f[2]] = 1
			wlist[w] = 1
		}
		close(waits)
		header = 0
		for (j = 1; j <= nv; j++)
			for (role = 1; role <= 2; role++) {
				rn = role == 1 ? "coordinator" : "worker"
				if (!((vs[j], rn) in wseen))
					continue
				if (!header) {
					print ""
					print "  What the backends wait for during TPC-B -c 4 (round 1; pg_stat_activity sampled every 0.1 s; share of"
					print "  backend samples, the 4 largest; 'CPU' = no wait event: running or runnable; coordinator = the"
					print "  sessions of pgbench's database, worker = the sessions on its worker databases)"
					header = 1
				}
				# the 4 largest
				line = ""
				delete used
				for (c = 1; c <= 4; c++) {
					best = ""
					for (w in wlist)
						if (!(w in used) && ((vs[j], rn, w) in nw) && (best == "" || nw[vs[j], rn, w] > nw[vs[j], rn, best]))
							best = w
					if (best == "")
						break
					used[best] = 1
					line = line sprintf("%s%s %.0f%%", c == 1 ? "" : ", ", best, 100 * nw[vs[j], rn, best] / ntot[vs[j], rn])
				}
				printf "    %-36s %-11s %6d samples: %s\n", vname[vs[j]], rn, ntot[vs[j], rn], line
			}
	}
	# the invariant after every TPC-B run
	if (each_run != "") {
		while ((getline line < each_run) > 0) {
			if (split(line, f, " ") < 4)
				continue
			nrun[f[2]]++
			if (f[4] == "holds")
				nheld[f[2]]++
		}
		close(each_run)
		line = ""
		for (j = 1; j <= nv; j++)
			if (vs[j] in nrun)
				line = line sprintf("%s%s %d of %d", line == "" ? "" : ", ", vs[j], nheld[vs[j]] + 0, nrun[vs[j]])
		if (line != "") {
			print ""
			print "  TPC-B invariant checked after every TPC-B run (warm-up included), runs where it held: " line
		}
	}
	print ""
	print "  TPC-B invariant after all runs: sum(abalance) = sum(tbalance) = sum(bbalance) = sum(delta) of history"
	n = split(invariants, lines, "\n")
	for (i = 1; i <= n; i++) {
		if (split(lines[i], f, " ") < 7)
			continue
		printf "    %-38s %-6s  %s = %s = %s = %s, %s history rows\n", vname[f[1]], f[2], f[3], f[4], f[5], f[6], f[7]
	}
	n = split(verify, vv, " ")
	line = ""
	for (i = 1; i <= n; i++) {
		split(vv[i], f, ":")
		line = line sprintf("%s%s %s %s", i == 1 ? "" : ", ", f[1] == "rs1" ? "R = 1" : "R = 2", f[2], f[3])
	}
	if (line != "")
		print "  ringshard.verify_table (rows of problems; 0: every replica holds the same rows): " line
	print "  prepared transactions left on the server afterwards: " leftover
}

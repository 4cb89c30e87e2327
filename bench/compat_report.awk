# bench/compat_report.awk: part 9's table and targets (bench/compat_part.sh), from its
# "round variant workload value" lines (variant v11 or v12, workload copy or insert,
# value in ms), all measured in the same run; with -v results=1, RESULT lines.
# Medians over rounds.  The target is the median over rounds of this build's time
# over 1.1's in the same round: the two run back to back, so a burst of load on the
# shared machine moves both sides of one ratio, where it can move one side's median
# alone (the ratio of the medians is shown too).

{ v[$3, $2, $1] = $4 + 0; seen[$3, $2] = 1; if ($1 > maxr) maxr = $1 }

function med(w, x,    r, c, a, i, j, t) {
	c = 0
	for (r = 1; r <= maxr; r++)
		if ((w, x, r) in v)
			a[++c] = v[w, x, r]
	if (c == 0)
		return ""
	for (i = 2; i <= c; i++)
		for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
	return c % 2 ? a[(c + 1) / 2] : (a[c / 2] + a[c / 2 + 1]) / 2
}
function spread(w, x,    r, lo, hi, m) {
	lo = hi = ""
	for (r = 1; r <= maxr; r++)
		if ((w, x, r) in v) {
			if (lo == "" || v[w, x, r] < lo) lo = v[w, x, r]
			if (hi == "" || v[w, x, r] > hi) hi = v[w, x, r]
		}
	m = med(w, x)
	return m == "" || m == 0 ? "-" : sprintf("%d%%", 100 * (hi - lo) / m + 0.5)
}
function round_ratio(w,    r, c, a, i, j, t) {	# median over rounds of v12 / v11 of the same round
	c = 0
	for (r = 1; r <= maxr; r++)
		if ((w, "v12", r) in v && (w, "v11", r) in v && v[w, "v11", r] > 0)
			a[++c] = v[w, "v12", r] / v[w, "v11", r]
	if (c == 0)
		return ""
	for (i = 2; i <= c; i++)
		for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
	return c % 2 ? a[(c + 1) / 2] : (a[c / 2] + a[c / 2 + 1]) / 2
}
function cpu_ratio(w,    a) {
	if (!((w "_cpu", "v11") in seen) || !((w "_cpu", "v12") in seen))
		return "-"
	a = med(w "_cpu", "v11")
	return a > 0 ? sprintf("%.4f", med(w "_cpu", "v12") / a) : "-"
}
function target(desc, x, bound, detail) {
	if (x == "") {
		printf "  %-4s  %-62s  %s\n", "N/A", desc, "(not measured)"
		return
	}
	if (x <= bound) pass++; else miss++
	printf "  %-4s  %-62s %8.3f  (target <= %s)%s\n", x <= bound ? "PASS" : "MISS", desc, x, bound, detail == "" ? "" : "  " detail
}

END {
	split("copy insert", ws, " ")
	if (results) {
		for (i = 1; i <= 2; i++)
			if ((ws[i], "v11") in seen && (ws[i], "v12") in seen)
				printf "RESULT compat workload=%s v11_ms=%s v12_ms=%s ratio=%.4f round_ratio=%.4f cpu_ratio=%s\n", ws[i],
					med(ws[i], "v11"), med(ws[i], "v12"), med(ws[i], "v12") / med(ws[i], "v11"), round_ratio(ws[i]),
					cpu_ratio(ws[i])
		exit
	}
	name["copy"] = sprintf("COPY faces FROM file, %d rows (R = 2; TRUNCATE + CHECKPOINT before, untimed)", nrows)
	name["insert"] = sprintf("single-row INSERT INTO faces, autocommit, R = 2, two-phase commit (pgbench -M prepared, %d per run)", nins)
	printf "  medians of %d COPY rounds and %d INSERT rounds, after one warm-up round; each round runs both versions\n", crounds, wrounds
	print  "  once, 1.1 first in odd rounds, this build first in even ones. COPY: psql's \\timing of the statement; INSERT:"
	print  "  pgbench's mean latency per transaction. ratio = this build / 1.1 (time: > 1 is slower)."
	for (i = 1; i <= 2; i++) {
		printf "  %s\n", name[ws[i]]
		a = med(ws[i], "v11"); b = med(ws[i], "v12")
		printf "    1.1          %10.3f ms  spread %s\n", a, spread(ws[i], "v11")
		printf "    this build   %10.3f ms  spread %s\n", b, spread(ws[i], "v12")
		rr = round_ratio(ws[i])
		printf "    ratio        %10.3f     (per-round ratios, median %s; each round's:", (a > 0 ? b / a : 0), rr == "" ? "-" : sprintf("%.3f", rr)
		for (r = 1; r <= maxr; r++)
			if ((ws[i], "v11", r) in v && (ws[i], "v12", r) in v && v[ws[i], "v11", r] > 0)
				printf " %.2f", v[ws[i], "v12", r] / v[ws[i], "v11", r]
		print ")"
	}
	# the server's CPU time around each run: what it cost, whatever else the machine ran
	if (("copy_cpu", "v11") in seen) {
		print ""
		print "  Diagnostic: the server's CPU time for the same runs (its processes' utime + stime, /proc, read before"
		print "  and after the session; the COPY's backend, the coordinator's connections to the workers, WAL writing,"
		print "  background processes), medians; less sensitive than the times to what else runs on the machine"
		split("copy_cpu insert_cpu", cs, " ")
		for (i = 1; i <= 2; i++) {
			a = med(cs[i], "v11"); b = med(cs[i], "v12"); rr = round_ratio(cs[i])
			printf "    %-44s 1.1 %10.3f ms  this build %10.3f ms  ratio %.3f  (per-round ratios, median %s)\n",
				cs[i] == "copy_cpu" ? "COPY, server CPU per COPY" : "single-row INSERT, server CPU per INSERT",
				a, b, (a > 0 ? b / a : 0), rr == "" ? "-" : sprintf("%.3f", rr)
		}
	}
	print ""
	print "  Targets of part 9 (issue 18; the median of the per-round ratios measured in this run)"
	pass = miss = 0
	for (i = 1; i <= 2; i++) {
		a = med(ws[i], "v11"); b = med(ws[i], "v12")
		rr = round_ratio(ws[i])
		target(sprintf("%s: this build / 1.1, time", ws[i] == "copy" ? "COPY of the distributed table" : "single-row INSERT, 2PC, R = 2"),
		       rr, 1.05, (a == "" || b == "" || a == 0) ? "" : sprintf("(ratio of the medians: %.3f)", b / a))
	}
	printf "  %d PASS, %d MISS\n", pass, miss
}

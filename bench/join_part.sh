#!/usr/bin/env bash
# Part 11 of bench/run, inside a throwaway server (started with
# shared_preload_libraries = 'ringshard', max_prepared_transactions = 20):
# joins of colocated tables on the workers (issue 22).
#
# One server, databases jn_c (the coordinator), jn_w1..jn_w3 (workers) and
# jn_peer (the same tables, local: the join on one server).  Tables
#   customers (id bigint PRIMARY KEY, region int, name text)       JN_CUSTOMERS rows
#   orders (id bigint, customer_id bigint, cents bigint,
#           PRIMARY KEY (customer_id, id))                          JN_ORDERS rows
# (1,000,000 and 4,000,000; a tenth of each with JN_QUICK=1), distributed on
# ring 'default' at R = 2 over the three workers by customers.id and
# orders.customer_id (colocated: one ring, one key type), loaded by COPY.
# About 2 % of the customers have no order.
#
# Each query runs on the coordinator and on the peer, JN_ROUNDS times in turn
# (3), timed by the client around `COPY (query) TO STDOUT` into a file; the
# figure is the median.  The answers are compared (sorted, md5) before the
# figures count.  Rows sent by the workers: the actual rows of the
# coordinator's `Custom Scan (ringshard router)` and Foreign Scans in EXPLAIN
# (ANALYZE), against the rows of the result:
#   per_customer  orders and their sum per customer (GROUP BY the key): the
#                 nodes send one row per customer;
#   top_region    the 10 biggest orders of one region (ORDER BY ... LIMIT on
#                 top of the join): each node sends its first 10;
#   no_orders     customers without an order (NOT EXISTS, an anti join);
#   per_region    orders and their sum per region (GROUP BY a column that is
#                 not the key): the nodes would send one row per region each.
#
# Environment: OUT, BENCH_STARTED, JN_CUSTOMERS, JN_ORDERS, JN_ROUNDS,
# JN_QUICK.  Writes OUT/join/report.txt and RESULT lines to OUT/join/results.txt.
set -euo pipefail
touch "$BENCH_STARTED"		# the server is up: failures from here on are real

if [ "${JN_QUICK:-0}" = 1 ]; then : "${JN_CUSTOMERS:=100000}" "${JN_ORDERS:=400000}"; fi
NC=${JN_CUSTOMERS:-1000000}
NO=${JN_ORDERS:-4000000}
ROUNDS=${JN_ROUNDS:-3}
D="$OUT/join"
mkdir -p "$D"
chmod 777 "$D"
REPORT="$D/report.txt"
RES="$D/results.txt"
: >"$REPORT"
: >"$RES"
log() { echo "bench: $*" >&2; }
say() { echo "$*" >>"$REPORT"; }
q() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
qa() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }
now() { date +%s.%N; }
C=jn_c
P=jn_peer
socket=$(qa -d postgres -c "SHOW unix_socket_directories" | cut -d, -f1)
port=$(qa -d postgres -c "SHOW port")

log "part 11: setup (coordinator, 3 workers, $NC customers and $NO orders at R = 2, the same on the peer)"
t0=$(date +%s)
for w in w1 w2 w3; do
	createdb "jn_$w"
	q -d "jn_$w" -c "CREATE EXTENSION ringshard" >/dev/null
done
createdb "$P"
createdb "$C"
tables="CREATE TABLE customers (id bigint PRIMARY KEY, region int NOT NULL, name text NOT NULL);
CREATE TABLE orders (id bigint NOT NULL, customer_id bigint NOT NULL, cents bigint NOT NULL, PRIMARY KEY (customer_id, id));"
q -d "$P" -c "$tables"
q -d "$C" >/dev/null <<SQL
CREATE EXTENSION ringshard;
SELECT ringshard.add_node('w1', 'host=$socket port=$port dbname=jn_w1');
SELECT ringshard.add_node('w2', 'host=$socket port=$port dbname=jn_w2');
SELECT ringshard.add_node('w3', 'host=$socket port=$port dbname=jn_w3');
SELECT ringshard.set_replication_factor('default', 2);
SELECT count(*) FROM ringshard.sync_topology();
$tables
SELECT ringshard.distribute_table('customers', 'id');
SELECT ringshard.distribute_table('orders', 'customer_id');
SELECT ringshard.create_distributed_table('customers');
SELECT ringshard.create_distributed_table('orders');
SQL
# the rows, written once to files the server reads (COPY ... FROM a file)
q -d "$P" -c "COPY (SELECT i, i % 50, 'customer-' || i FROM generate_series(1, $NC) i) TO '$D/customers.tsv'"
q -d "$P" -c "COPY (SELECT j, 1 + (hashint4(j) & 2147483647) % $NC, (hashint4(j + 7) & 1048575) FROM generate_series(1, $NO) j) TO '$D/orders.tsv'"
for db in "$P" "$C"; do
	q -d "$db" -c "COPY customers FROM '$D/customers.tsv'" -c "COPY orders FROM '$D/orders.tsv'" >/dev/null
done
rm -f "$D/customers.tsv" "$D/orders.tsv"
for db in "$P" jn_w1 jn_w2 jn_w3; do q -d "$db" -c "VACUUM ANALYZE" >/dev/null; done
say "  server: $(qa -d postgres -c 'SHOW server_version') on port $port; work_mem $(qa -d postgres -c 'SHOW work_mem'); databases $C, jn_w1..3, $P"
say "  data: $NC customers, $NO orders, ring 'default' at R = 2 over w1..w3 (colocated by customer id), the same tables local on the peer; setup $(( $(date +%s) - t0 )) s"

declare -A SQL
SQL[per_customer]="SELECT c.id, c.region, count(*) AS orders, sum(o.cents) AS cents
  FROM customers c JOIN orders o ON o.customer_id = c.id GROUP BY c.id, c.region"
SQL[top_region]="SELECT o.id, o.customer_id, o.cents, c.name
  FROM customers c JOIN orders o ON o.customer_id = c.id WHERE c.region = 7
 ORDER BY o.cents DESC, o.id LIMIT 10"
SQL[no_orders]="SELECT c.id, c.name FROM customers c
 WHERE NOT EXISTS (SELECT FROM orders o WHERE o.customer_id = c.id)"
SQL[per_region]="SELECT c.region, count(*) AS orders, sum(o.cents) AS cents
  FROM customers c JOIN orders o ON o.customer_id = c.id GROUP BY c.region"
names="per_customer top_region no_orders per_region"

# run NAME DB ROUND: the query's rows into a file, timed; prints milliseconds
run() {
	local t1 t2
	t1=$(now)
	qa -d "$2" -c "COPY (${SQL[$1]}) TO STDOUT" >"$D/$1.$2.$3.out"
	t2=$(now)
	awk -v s="$t1" -v e="$t2" 'BEGIN { printf "%.1f", (e - s) * 1000 }'
}
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

say ""
printf "  %-14s %10s %10s %7s %12s %12s %9s\n" query "ms" "peer ms" ratio "result rows" "rows sent" "sent/res" >>"$REPORT"
for name in $names; do
	: >"$D/$name.dist.ms"
	: >"$D/$name.peer.ms"
	for ((r = 1; r <= ROUNDS; r++)); do
		run "$name" "$C" "$r" >>"$D/$name.dist.ms"; echo >>"$D/$name.dist.ms"
		run "$name" "$P" "$r" >>"$D/$name.peer.ms"; echo >>"$D/$name.peer.ms"
	done
	# the same answer as the peer's, every round
	want=$(sort "$D/$name.$P.1.out" | md5sum | cut -c1-32)
	for ((r = 1; r <= ROUNDS; r++)); do
		got=$(sort "$D/$name.$C.$r.out" | md5sum | cut -c1-32)
		if [ "$got" != "$want" ]; then
			say "  $name: round $r's answer differs from the peer's"
			echo "bench: part 11: $name answers differently on the coordinator (round $r)" >&2
			exit 1
		fi
	done
	result_rows=$(wc -l <"$D/$name.$P.1.out")
	# what the workers sent: the fan-out's actual rows
	qa -d "$C" -c "EXPLAIN (ANALYZE, VERBOSE, COSTS OFF, TIMING OFF) ${SQL[$name]}" >"$D/$name.explain.txt"
	# (a join the nodes cannot run reads each table with a Foreign Scan of its own)
	sent=$(awk 'match($0, /(Custom Scan \(ringshard router\)|Foreign Scan) .*actual rows=[0-9]+ loops=[0-9]+/) {
			split(substr($0, RSTART, RLENGTH), a, "actual rows="); split(a[2], b, " loops="); n += b[1] * b[2]; seen = 1
		} END { if (seen) print n }' "$D/$name.explain.txt")
	ms=$(median <"$D/$name.dist.ms")
	peer=$(median <"$D/$name.peer.ms")
	printf "  %-14s %10.1f %10.1f %7.2f %12d %12s %9s\n" "$name" "$ms" "$peer" \
		"$(awk -v a="$ms" -v b="$peer" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')" "$result_rows" "${sent:-n/a}" \
		"$(awk -v s="${sent:-}" -v r="$result_rows" 'BEGIN { if (s == "" || r == 0) print "n/a"; else printf "%.2f", s / r }')" >>"$REPORT"
	echo "RESULT join query=$name ms=$ms peer_ms=$peer result_rows=$result_rows sent=${sent:-} nodes=3" >>"$RES"
	rm -f "$D/$name".*.out
done
say "  (medians of $ROUNDS rounds, the coordinator and the peer in turn; every answer the peer's; rows sent: the"
say "   coordinator's Custom Scan (ringshard router) and Foreign Scans in EXPLAIN ANALYZE, rows x loops)"
say ""
say "  EXPLAIN (ANALYZE, VERBOSE, COSTS OFF, TIMING OFF) on the coordinator of per_customer:"
sed 's/^/    /' "$D/per_customer.explain.txt" >>"$REPORT"
say "  and of per_region:"
sed 's/^/    /' "$D/per_region.explain.txt" >>"$REPORT"

say ""
say "  Targets of part 11 (issue 22; measured in this run)"
awk '
	function t(desc, x, bound) {
		if (x == "") { printf "  N/A   %s\n", desc; return }
		printf "  %-4s  %-66s %8.2f  (target <= %s)\n", x <= bound ? "PASS" : "MISS", desc, x, bound
	}
	/^RESULT join/ {
		delete v; split($0, f, " "); for (i in f) { p = index(f[i], "="); if (p) v[substr(f[i], 1, p - 1)] = substr(f[i], p + 1) }
		n = v["nodes"]
		# the result'"'"'s rows: one per result row; under a LIMIT, or of groups
		# of other columns than the key, each node its own
		each = v["query"] == "top_region" || v["query"] == "per_region"
		bound = each ? n * v["result_rows"] : v["result_rows"]
		t(sprintf("join %s: rows the workers sent / %s", v["query"], each ? "(nodes x result rows)" : "result rows"),
		  v["sent"] == "" || bound == 0 ? "" : v["sent"] / bound, 1)
	}' "$RES" >>"$REPORT"
cat "$REPORT"

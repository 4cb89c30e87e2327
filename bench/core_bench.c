/*
 * core_bench.c
 *		Micro-benchmark of ringshard's pure core (src/core), without PostgreSQL.
 *
 * Measures, in one process and one run, against baselines timed in the same
 * rounds (each round runs every variant once, in turn; the figure reported is
 * the median over rounds):
 *   - ns per lookup of rs_ring_owner() (bucket table + fixed-width scan of
 *     packed token/owner words) against a plain lower_bound binary search
 *     over the same tokens laid out plainly (a sorted uint64_t array and a
 *     uint16_t owner array, copied from the ring), with
 *     random 64-bit hashes (hashing excluded) and with MurmurHash3 of
 *     pre-generated text keys (hashing included);
 *   - rs_ring_build() time for 1,000 nodes x 256 vnodes against the minimum
 *     the contract needs: formatting + hashing every label, then one qsort of
 *     the (token, node, label) points in contract order;
 *   - bytes per point of the built ring's arrays.
 *
 * Build (bench/run does it): gcc -O2 -Isrc/core bench/core_bench.c
 *     src/core/{every .c} -lyaml -lcrypto -lm
 * Usage: core_bench [--quick] [--repeats N]
 * Output: human-readable tables, plus lines starting with "RESULT " (key=value)
 * that bench/run reads to compute the targets.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <malloc.h>
#include <time.h>

#include "rs_hash.h"
#include "rs_ring.h"

#define MAX_REPEATS 15
#define NKEYS 1000000			/* distinct text keys for "hashing included" */
#define KEY_SLOT 16

static volatile uint64_t sink;	/* defeats dead-code elimination */

static double
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double) ts.tv_sec * 1e9 + (double) ts.tv_nsec;
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a;
	double		y = *(const double *) b;

	return (x > y) - (x < y);
}

static double
median(double *v, int n)
{
	double		tmp[MAX_REPEATS];

	memcpy(tmp, v, sizeof(double) * n);
	qsort(tmp, n, sizeof(double), cmp_double);
	return n % 2 ? tmp[n / 2] : (tmp[n / 2 - 1] + tmp[n / 2]) / 2;
}

static inline uint64_t
xorshift64(uint64_t *state)
{
	uint64_t	x = *state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *state = x;
}

/* Plain lower_bound over the sorted tokens, wrapping past the end to 0. */
static inline uint32_t
lower_bound_point(const uint64_t *tokens, uint32_t npoints, uint64_t hash)
{
	uint32_t	lo = 0;
	uint32_t	n = npoints;

	while (n > 0)
	{
		uint32_t	half = n / 2;

		if (tokens[lo + half] < hash)
		{
			lo += half + 1;
			n -= half + 1;
		}
		else
			n = half;
	}
	return lo == npoints ? 0 : lo;
}

/* The baseline's layout: the ring's tokens and owners in plain arrays. */
typedef struct plain_ring
{
	uint64_t   *tokens;
	uint16_t   *owners;
	uint32_t	npoints;
} plain_ring;

static plain_ring
make_plain(const rs_ring *ring)
{
	plain_ring	plain;

	plain.npoints = ring->npoints;
	plain.tokens = malloc(ring->npoints * sizeof(uint64_t));
	plain.owners = malloc(ring->npoints * sizeof(uint16_t));
	if (!plain.tokens || !plain.owners)
	{
		fprintf(stderr, "core_bench: out of memory\n");
		exit(1);
	}
	for (uint32_t i = 0; i < ring->npoints; i++)
	{
		plain.tokens[i] = rs_ring_token(ring, i);
		plain.owners[i] = (uint16_t) rs_ring_point_owner(ring, i);
	}
	return plain;
}

static void
free_plain(plain_ring *plain)
{
	free(plain->tokens);
	free(plain->owners);
}

/* ---- the timed loops; each returns elapsed ns ---- */

static double
loop_rng_only(uint64_t n, uint64_t rng_start)
{
	uint64_t	s = rng_start,
				sum = 0;
	double		t0 = now_ns();

	for (uint64_t i = 0; i < n; i++)
		sum += xorshift64(&s) >> 60;
	sink += sum;
	return now_ns() - t0;
}

static double
loop_ring(const rs_ring *ring, uint64_t n, uint64_t rng_start)
{
	uint64_t	s = rng_start,
				sum = 0;
	double		t0 = now_ns();

	for (uint64_t i = 0; i < n; i++)
		sum += rs_ring_owner(ring, xorshift64(&s));
	sink += sum;
	return now_ns() - t0;
}

static double
loop_lower_bound(const plain_ring *ring, uint64_t n, uint64_t rng_start)
{
	uint64_t	s = rng_start,
				sum = 0;
	double		t0 = now_ns();

	for (uint64_t i = 0; i < n; i++)
		sum += ring->owners[lower_bound_point(ring->tokens, ring->npoints, xorshift64(&s))];
	sink += sum;
	return now_ns() - t0;
}

/*
 * Latency-bound variants: each hash depends on the previous answer, so a
 * lookup cannot start before the previous one ends (as in a query, where one
 * row's lookup is separated from the next by the executor's work).
 */
static double
loop_ring_dependent(const rs_ring *ring, uint64_t n, uint64_t rng_start)
{
	uint64_t	s = rng_start,
				last = 0;
	double		t0 = now_ns();

	for (uint64_t i = 0; i < n; i++)
		last = rs_ring_owner(ring, xorshift64(&s) ^ last);
	sink += last;
	return now_ns() - t0;
}

static double
loop_lower_bound_dependent(const plain_ring *ring, uint64_t n, uint64_t rng_start)
{
	uint64_t	s = rng_start,
				last = 0;
	double		t0 = now_ns();

	for (uint64_t i = 0; i < n; i++)
		last = ring->owners[lower_bound_point(ring->tokens, ring->npoints, xorshift64(&s) ^ last)];
	sink += last;
	return now_ns() - t0;
}

static double
loop_replicas(const rs_ring *ring, uint64_t n, uint64_t rng_start, uint32_t want)
{
	uint64_t	s = rng_start,
				last = 0;
	uint16_t	out[64];
	uint32_t	count = 0;
	double		t0 = now_ns();

	for (uint64_t i = 0; i < n; i++)
	{
		if (rs_ring_replicas(ring, xorshift64(&s) ^ last, want, out, &count) != RS_OK)
			abort();
		last = out[count - 1];
	}
	sink += last;
	return now_ns() - t0;
}

typedef struct keyset
{
	char	   *bytes;			/* NKEYS slots of KEY_SLOT bytes */
	uint8_t    *lens;
} keyset;

static double
loop_hash_only(const keyset *k, uint64_t n)
{
	uint64_t	sum = 0;
	uint32_t	j = 0;
	double		t0 = now_ns();

	for (uint64_t i = 0; i < n; i++)
	{
		sum += rs_murmur3_token(k->bytes + (size_t) j * KEY_SLOT, k->lens[j]);
		if (++j == NKEYS)
			j = 0;
	}
	sink += sum;
	return now_ns() - t0;
}

static double
loop_hash_ring(const rs_ring *ring, const keyset *k, uint64_t n)
{
	uint64_t	sum = 0;
	uint32_t	j = 0;
	double		t0 = now_ns();

	for (uint64_t i = 0; i < n; i++)
	{
		sum += rs_ring_owner(ring, rs_murmur3_token(k->bytes + (size_t) j * KEY_SLOT, k->lens[j]));
		if (++j == NKEYS)
			j = 0;
	}
	sink += sum;
	return now_ns() - t0;
}

static double
loop_hash_lower_bound(const plain_ring *ring, const keyset *k, uint64_t n)
{
	uint64_t	sum = 0;
	uint32_t	j = 0;
	double		t0 = now_ns();

	for (uint64_t i = 0; i < n; i++)
	{
		uint64_t	h = rs_murmur3_token(k->bytes + (size_t) j * KEY_SLOT, k->lens[j]);

		sum += ring->owners[lower_bound_point(ring->tokens, ring->npoints, h)];
		if (++j == NKEYS)
			j = 0;
	}
	sink += sum;
	return now_ns() - t0;
}

/* ---- ring construction ---- */

typedef struct members
{
	rs_ring_member *m;
	char	  **names;
	uint32_t	n;
} members;

static members
make_members(uint32_t nnodes)
{
	members		ms;

	ms.n = nnodes;
	ms.m = calloc(nnodes, sizeof(rs_ring_member));
	ms.names = calloc(nnodes, sizeof(char *));
	if (!ms.m || !ms.names)
		abort();
	for (uint32_t i = 0; i < nnodes; i++)
	{
		if (asprintf(&ms.names[i], "node-%u", i) < 0)
			abort();
		ms.m[i].name = ms.names[i];
		ms.m[i].name_len = strlen(ms.names[i]);
		ms.m[i].weight = 1.0;
	}
	return ms;
}

static void
free_members(members *ms)
{
	for (uint32_t i = 0; i < ms->n; i++)
		free(ms->names[i]);
	free(ms->names);
	free(ms->m);
}

static rs_ring *
build(const members *ms, uint32_t vnodes)
{
	rs_ring    *ring = NULL;
	rs_status	st = rs_ring_build(RS_RING_MURMUR3, ms->m, ms->n, vnodes, 0, &ring, NULL);

	if (st != RS_OK)
	{
		fprintf(stderr, "core_bench: rs_ring_build failed: %s\n", rs_status_text(st));
		exit(1);
	}
	return ring;
}

/* Baseline of the build: hash every label, one qsort in contract order. */
typedef struct bpoint
{
	uint64_t	token;
	uint32_t	node;
	uint32_t	label;
} bpoint;

static int
cmp_bpoint(const void *a, const void *b)
{
	const bpoint *pa = a,
			   *pb = b;

	if (pa->token != pb->token)
		return pa->token < pb->token ? -1 : 1;
	if (pa->node != pb->node)
		return pa->node < pb->node ? -1 : 1;
	return (pa->label > pb->label) - (pa->label < pb->label);
}

/* Labels are formatted as the core does: name bytes, "#vnode#", "%u". */
static size_t
format_label(char *buf, const char *name, size_t name_len, uint32_t i)
{
	memcpy(buf, name, name_len);
	memcpy(buf + name_len, "#vnode#", 7);
	return name_len + 7 + (size_t) snprintf(buf + name_len + 7, 16, "%u", i);
}

/*
 * Hash all labels (nodes in name order, as the core) + one qsort of the
 * (token, node, label) points; *hash_ns gets the hashing part.
 */
static double
baseline_build(const members *ms, uint32_t vnodes, double *hash_ns)
{
	size_t		np = (size_t) ms->n * vnodes;
	bpoint	   *pts = malloc(np * sizeof(bpoint));
	char		buf[RS_RING_MAX_NAME + 32];
	size_t		k = 0;
	double		t0,
				t1,
				t2;

	if (!pts)
		abort();
	t0 = now_ns();
	for (uint32_t node = 0; node < ms->n; node++)
		for (uint32_t i = 0; i < vnodes; i++)
		{
			size_t		len = format_label(buf, ms->m[node].name, ms->m[node].name_len, i);

			pts[k].token = rs_murmur3_token(buf, len);
			pts[k].node = node;
			pts[k].label = i;
			k++;
		}
	t1 = now_ns();
	qsort(pts, np, sizeof(bpoint), cmp_bpoint);
	t2 = now_ns();
	sink += pts[np / 2].token;
	free(pts);
	if (hash_ns)
		*hash_ns = t1 - t0;
	return t2 - t0;
}

/* Bytes of the ring's arrays as the backend cache holds them (no labels). */
static double
ring_bytes(const rs_ring *r, double *per_node_bytes)
{
	double		point_arrays = ((double) r->npoints + RS_RING_SCAN_MAX) * sizeof(uint64_t) +
		(double) r->npoints * sizeof(uint16_t) +
		((double) r->nbuckets + 1) * (r->buckets16 ? sizeof(uint16_t) : sizeof(uint32_t));
	double		node_arrays = 0;

	for (uint32_t i = 0; i < r->nnodes; i++)
		node_arrays += sizeof(char *) + (double) r->name_lens[i] + 1 + sizeof(size_t) +
			sizeof(double) + sizeof(uint32_t);
	node_arrays += sizeof(rs_ring);
	if (r->labels)
		point_arrays += (double) r->npoints * sizeof(uint32_t);
	*per_node_bytes = node_arrays;
	return point_arrays + node_arrays;
}

int
main(int argc, char **argv)
{
	int			quick = 0;
	int			repeats = 0;
	uint64_t	nlookups;
	int			build_repeats;

	for (int i = 1; i < argc; i++)
	{
		if (strcmp(argv[i], "--quick") == 0)
			quick = 1;
		else if (strcmp(argv[i], "--repeats") == 0 && i + 1 < argc)
			repeats = atoi(argv[++i]);
		else
		{
			fprintf(stderr, "usage: core_bench [--quick] [--repeats N]\n");
			return 2;
		}
	}
	if (repeats < 1 || repeats > MAX_REPEATS)
		repeats = quick ? 3 : 5;
	nlookups = quick ? 2000000 : 10000000;
	build_repeats = repeats;
	const uint32_t sizes[3] = {3, 64, 1000};
	const uint32_t vnodes = 256;
	keyset		keys;

	keys.bytes = malloc((size_t) NKEYS * KEY_SLOT);
	keys.lens = malloc(NKEYS);
	if (!keys.bytes || !keys.lens)
		abort();
	for (uint32_t j = 0; j < NKEYS; j++)
		keys.lens[j] = (uint8_t) snprintf(keys.bytes + (size_t) j * KEY_SLOT, KEY_SLOT, "user-%u", j + 1);

	printf("Part 2: the C core alone (gcc -O2, one thread)\n");
	printf("  %llu lookups per timing, %d rounds (each round times every variant once), median\n",
		   (unsigned long long) nlookups, repeats);
	printf("  hashes excluded: xorshift64 random 64-bit hashes (the RNG is in both columns; 'rng only' is its cost)\n");
	printf("  hashes included: MurmurHash3 of %d pre-generated keys 'user-1'..'user-%d', cycled\n\n",
		   NKEYS, NKEYS);

	printf("  'latency-bound': each hash depends on the previous answer, so lookups cannot overlap\n"
		   "  (as in a query, one row at a time); hashing excluded\n\n");
	printf("  %-8s %8s | %9s %11s %7s | %9s %11s %7s | %8s %8s | %9s %11s\n",
		   "ring", "points", "rs_ring", "lower_bound", "speedup",
		   "rs+hash", "lb+hash", "speedup", "rng only", "hash only",
		   "rs_ring", "lower_bound");
	printf("  %-8s %8s | %9s %11s %7s | %9s %11s %7s | %8s %8s | %21s\n",
		   "", "", "ns", "ns", "", "ns", "ns", "", "ns", "ns", "latency-bound, ns");

	for (int si = 0; si < 3; si++)
	{
		members		ms = make_members(sizes[si]);
		rs_ring    *ring = build(&ms, vnodes);
		plain_ring	plain = make_plain(ring);
		double		t_ring[MAX_REPEATS],
					t_lb[MAX_REPEATS],
					t_rng[MAX_REPEATS],
					t_hring[MAX_REPEATS],
					t_hlb[MAX_REPEATS],
					t_hash[MAX_REPEATS],
					t_dring[MAX_REPEATS],
					t_dlb[MAX_REPEATS];
		uint64_t	check_a = 0,
					check_b = 0,
					s = 88172645463325252ULL;

		/* The two searches must agree on every point. */
		for (uint64_t i = 0; i < 1000000; i++)
		{
			uint64_t	h = xorshift64(&s);

			check_a = rs_ring_owner(ring, h);
			check_b = lower_bound_point(plain.tokens, plain.npoints, h);
			if (check_a != plain.owners[check_b == plain.npoints ? 0 : check_b])
			{
				fprintf(stderr, "core_bench: rs_ring_owner and lower_bound disagree\n");
				return 1;
			}
		}

		/* warm-up: one untimed pass of each */
		loop_ring(ring, nlookups / 10, 1);
		loop_lower_bound(&plain, nlookups / 10, 1);
		loop_hash_ring(ring, &keys, nlookups / 10);
		for (int r = 0; r < repeats; r++)
		{
			uint64_t	rng_start = 0x9E3779B97F4A7C15ULL * (uint64_t) (r + 1);

			t_rng[r] = loop_rng_only(nlookups, rng_start) / nlookups;
			t_ring[r] = loop_ring(ring, nlookups, rng_start) / nlookups;
			t_lb[r] = loop_lower_bound(&plain, nlookups, rng_start) / nlookups;
			t_hash[r] = loop_hash_only(&keys, nlookups) / nlookups;
			t_hring[r] = loop_hash_ring(ring, &keys, nlookups) / nlookups;
			t_hlb[r] = loop_hash_lower_bound(&plain, &keys, nlookups) / nlookups;
			t_dring[r] = loop_ring_dependent(ring, nlookups, rng_start) / nlookups;
			t_dlb[r] = loop_lower_bound_dependent(&plain, nlookups, rng_start) / nlookups;
		}
		{
			double		m_ring = median(t_ring, repeats),
						m_lb = median(t_lb, repeats),
						m_rng = median(t_rng, repeats),
						m_hring = median(t_hring, repeats),
						m_hlb = median(t_hlb, repeats),
						m_hash = median(t_hash, repeats),
						m_dring = median(t_dring, repeats),
						m_dlb = median(t_dlb, repeats);
			char		label[32];

			snprintf(label, sizeof(label), "%ux%u", sizes[si], vnodes);
			printf("  %-8s %8u | %9.2f %11.2f %6.2fx | %9.2f %11.2f %6.2fx | %8.2f %8.2f | %9.2f %11.2f\n",
				   label, ring->npoints, m_ring, m_lb, m_lb / m_ring,
				   m_hring, m_hlb, m_hlb / m_hring, m_rng, m_hash, m_dring, m_dlb);
			printf("RESULT core_lookup points=%u ring_ns=%.3f lb_ns=%.3f rng_ns=%.3f "
				   "hash_ring_ns=%.3f hash_lb_ns=%.3f hash_ns=%.3f dep_ring_ns=%.3f dep_lb_ns=%.3f\n",
				   ring->npoints, m_ring, m_lb, m_rng, m_hring, m_hlb, m_hash, m_dring, m_dlb);
		}
		free_plain(&plain);
		rs_ring_free(ring);
		free_members(&ms);
	}

	printf("\n  rs_ring_replicas, R = 3 distinct nodes (owner first), %llu calls per timing, %d rounds,\n"
		   "  median; hashing excluded, latency-bound (each hash depends on the previous answer)\n",
		   (unsigned long long) (nlookups / 2), repeats);
	printf("  %-8s %8s | %12s %12s %7s\n", "ring", "points", "rs_ring_owner", "replicas R=3", "ratio");
	printf("  %-8s %8s | %12s %12s %7s\n", "", "", "ns", "ns", "");
	for (int si = 0; si < 3; si++)
	{
		members		ms = make_members(sizes[si]);
		rs_ring    *ring = build(&ms, vnodes);
		double		t_own[MAX_REPEATS],
					t_rep[MAX_REPEATS];
		uint64_t	n = nlookups / 2;

		loop_replicas(ring, n / 10, 1, 3);
		for (int r = 0; r < repeats; r++)
		{
			uint64_t	rng_start = 0x9E3779B97F4A7C15ULL * (uint64_t) (r + 1);

			t_own[r] = loop_ring_dependent(ring, n, rng_start) / n;
			t_rep[r] = loop_replicas(ring, n, rng_start, 3) / n;
		}
		{
			char		label[32];
			double		mo = median(t_own, repeats),
						mr = median(t_rep, repeats);

			snprintf(label, sizeof(label), "%ux%u", sizes[si], vnodes);
			printf("  %-8s %8u | %12.2f %12.2f %6.2fx\n", label, ring->npoints, mo, mr, mr / mo);
			printf("RESULT core_replicas points=%u owner_ns=%.3f replicas_ns=%.3f\n", ring->npoints, mo, mr);
		}
		rs_ring_free(ring);
		free_members(&ms);
	}

	printf("\n  ring build, %d rounds, median (baseline: format+hash every label \"node-i#vnode#k\",\n"
		   "  then one qsort of (token, node, label) records in contract order)\n", build_repeats);
	printf("  %-8s %8s | %10s %12s %7s | %10s\n",
		   "ring", "points", "rs_build", "hash+qsort", "ratio", "hash part");
	printf("  %-8s %8s | %10s %12s %7s | %10s\n",
		   "", "", "ms", "ms", "", "ms");
	for (int si = 0; si < 3; si++)
	{
		members		ms = make_members(sizes[si]);
		double		t_build[MAX_REPEATS],
					t_base[MAX_REPEATS],
					t_hashpart[MAX_REPEATS];
		uint32_t	np = 0;

		/* warm-up */
		rs_ring_free(build(&ms, vnodes));
		baseline_build(&ms, vnodes, NULL);
		for (int r = 0; r < build_repeats; r++)
		{
			double		t0 = now_ns();
			rs_ring    *ring = build(&ms, vnodes);

			t_build[r] = (now_ns() - t0) / 1e6;
			np = ring->npoints;
			sink += rs_ring_token(ring, 0);
			rs_ring_free(ring);
			t_base[r] = baseline_build(&ms, vnodes, &t_hashpart[r]) / 1e6;
			t_hashpart[r] /= 1e6;
		}
		{
			char		label[32];
			double		mb = median(t_build, build_repeats),
						mbase = median(t_base, build_repeats);

			snprintf(label, sizeof(label), "%ux%u", sizes[si], vnodes);
			printf("  %-8s %8u | %10.3f %12.3f %6.2fx | %10.3f\n",
				   label, np, mb, mbase, mb / mbase, median(t_hashpart, build_repeats));
			printf("RESULT core_build points=%u build_ms=%.4f base_ms=%.4f hash_ms=%.4f\n",
				   np, mb, mbase, median(t_hashpart, build_repeats));
		}
		free_members(&ms);
	}

	printf("\n  memory of a built ring (the arrays the backend cache keeps; malloc headers excluded)\n");
	printf("  points 8 B (token's top 48 bits + owner) x (npoints + 16 padding), token's low 16 bits 2 B\n"
		   "  per point, buckets 2 B (below 65,535 points) or 4 B x (nbuckets+1), per node: name+NUL,\n"
		   "  name pointer 8, name_len 8, weight 8, node_points 4; plus the rs_ring struct\n");
	printf("  'malloc delta' is what glibc reports in use (mallinfo2 uordblks + hblkhd) after the build\n"
		   "  minus before it: the arrays plus allocator headers and page rounding\n");
	printf("  %-8s %8s %9s | %10s %10s %11s | %12s %11s\n",
		   "ring", "points", "nbuckets", "bytes", "node part", "bytes/point",
		   "malloc delta", "bytes/point");
	for (int si = 0; si < 3; si++)
	{
		members		ms = make_members(sizes[si]);
		struct mallinfo2 before = mallinfo2();
		rs_ring    *ring = build(&ms, vnodes);
		struct mallinfo2 after = mallinfo2();
		double		node_part;
		double		bytes = ring_bytes(ring, &node_part);
		double		measured = (double) (after.uordblks + after.hblkhd) -
			(double) (before.uordblks + before.hblkhd);
		char		label[32];

		snprintf(label, sizeof(label), "%ux%u", sizes[si], vnodes);
		printf("  %-8s %8u %9u | %10.0f %10.0f %11.2f | %12.0f %11.2f\n",
			   label, ring->npoints, ring->nbuckets, bytes, node_part, bytes / ring->npoints,
			   measured, measured / ring->npoints);
		printf("RESULT core_memory points=%u bytes=%.0f bytes_per_point=%.4f malloc_bytes_per_point=%.4f\n",
			   ring->npoints, bytes, bytes / ring->npoints, measured / ring->npoints);
		rs_ring_free(ring);
		free_members(&ms);
	}
	printf("\n  (checksum %llu)\n", (unsigned long long) sink);
	free(keys.bytes);
	free(keys.lens);
	return 0;
}

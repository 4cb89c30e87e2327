/*
 * balance_bench.c
 *		How evenly rings of N nodes spread keys and their copies (part 7 of
 *		bench/run): for N = 3, 10, 100, 300 and 1,000 nodes "node-0" …, the
 *		most and least loaded node against the mean, of the share of the
 *		keys each owns (the first copy) and of the share of all copies each
 *		holds at R = 2 and R = 3, for rings of 256 random vnodes per node (the
 *		labelled points of docs/routing.md §3, the baseline) and of 8, 16 and
 *		32 allocated tokens per node (§8, §9), the nodes joining one by one,
 *		each with the tokens the allocation chooses for the ring's R.
 *
 * Shares are exact (token counts of every range, rs_ring_ownership and
 * rs_ring_replicated_ownership), not sampled.  The allocated rings are grown
 * with rs_token_allocator, which chooses each node's tokens as
 * rs_ring_allocate_tokens (and so allocate_tokens and add_node) does on the
 * ring of the nodes before it; the unit tests check that they agree.  Also
 * printed: the seconds each ring took to grow, against building the
 * vnode ring once.
 *
 * Build (bench/run does it): gcc -O2 -Isrc/core bench/balance_bench.c
 *     src/core/{every .c} -lyaml -lcrypto -lm
 * Output: a table, and "RESULT balance ..." lines for bench/targets.awk.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rs_ring.h"
#include "rs_ring_alloc.h"

#define MAX_NODES 1000

static const uint32_t sizes[] = {3, 10, 100, 300, 1000};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

typedef struct spread
{
	double		owned_max;
	double		owned_min;
	double		copies_max;
	double		copies_min;
} spread;

/* Max and min over nodes of owned and held shares, against the mean. */
static spread
measure(const rs_ring *ring, uint32_t replicas)
{
	rs_u128    *owned = malloc(ring->nnodes * sizeof(rs_u128));
	rs_u128    *held = malloc(ring->nnodes * sizeof(rs_u128));
	double		mean_owned = 0,
				mean_held = 0;
	spread		s = {0, 1e300, 0, 1e300};

	if (!owned || !held)
		abort();
	rs_ring_ownership(ring, owned);
	if (rs_ring_replicated_ownership(ring, replicas, held, NULL, NULL) != RS_OK)
		abort();
	for (uint32_t n = 0; n < ring->nnodes; n++)
	{
		mean_owned += (double) owned[n];
		mean_held += (double) held[n];
	}
	mean_owned /= ring->nnodes;
	mean_held /= ring->nnodes;
	for (uint32_t n = 0; n < ring->nnodes; n++)
	{
		double		o = (double) owned[n] / mean_owned;
		double		h = (double) held[n] / mean_held;

		if (o > s.owned_max)
			s.owned_max = o;
		if (o < s.owned_min)
			s.owned_min = o;
		if (h > s.copies_max)
			s.copies_max = h;
		if (h < s.copies_min)
			s.copies_min = h;
	}
	free(owned);
	free(held);
	return s;
}

static char names[MAX_NODES][16];
static rs_ring_member members[MAX_NODES];
static uint64_t tokens[MAX_NODES][32];

static void
print_row(const char *points, uint32_t replicas, uint32_t n, spread s, double seconds)
{
	printf("  %-22s %2u %6u | %9.3f %9.3f | %9.3f %9.3f | %8.2f\n", points, replicas, n,
		   s.owned_max, s.owned_min, s.copies_max, s.copies_min, seconds);
}

int
main(void)
{
	static const uint32_t counts[] = {8, 16, 32};

	for (uint32_t i = 0; i < MAX_NODES; i++)
	{
		snprintf(names[i], sizeof(names[i]), "node-%u", i);
		memset(&members[i], 0, sizeof(members[i]));
		members[i].name = names[i];
		members[i].name_len = strlen(names[i]);
		members[i].weight = 1;
	}
	printf("Part 7: balance of rings (exact shares; the most and least loaded node / the mean)\n");
	printf("  nodes node-0 ... node-(N-1), weight 1; 'allocated': each joins in turn with the tokens the\n"
		   "  allocation chooses for the ring's R (existing tokens never move); 'random': 256 labelled vnodes\n");
	printf("  seconds: to build the vnode ring, or to grow the allocated ring to that N from the start\n\n");
	printf("  %-22s %2s %6s | %19s | %19s | %8s\n", "points per node", "R", "nodes",
		   "owned share", "share of the copies", "seconds");
	printf("  %-22s %2s %6s | %9s %9s | %9s %9s | %8s\n", "", "", "", "max/mean", "min/mean",
		   "max/mean", "min/mean", "");
	for (uint32_t replicas = 2; replicas <= 3; replicas++)
	{
		/* the baseline: 256 random (labelled) vnodes */
		for (size_t k = 0; k < NSIZES; k++)
		{
			rs_ring    *ring = NULL;
			double		t0 = now_s();
			spread		s;

			for (uint32_t i = 0; i < sizes[k]; i++)
			{
				members[i].tokens = NULL;
				members[i].ntokens = 0;
			}
			if (rs_ring_build(RS_RING_MURMUR3, members, sizes[k], 256, 0, &ring, NULL) != RS_OK)
				abort();
			s = measure(ring, replicas);
			print_row("256 random vnodes", replicas, sizes[k], s, now_s() - t0);
			printf("RESULT balance points=vnodes256 r=%u n=%u owned_max=%.6f owned_min=%.6f copies_max=%.6f copies_min=%.6f\n",
				   replicas, sizes[k], s.owned_max, s.owned_min, s.copies_max, s.copies_min);
			rs_ring_free(ring);
		}
		/* allocated tokens, grown node by node */
		for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
		{
			rs_token_allocator *allocator = NULL;
			double		t0 = now_s();
			size_t		k = 0;
			char		label[32];

			snprintf(label, sizeof(label), "%u allocated tokens", counts[c]);
			if (rs_token_allocator_create(replicas, &allocator) != RS_OK)
				abort();
			for (uint32_t i = 0; i < MAX_NODES && k < NSIZES; i++)
			{
				rs_status	status = rs_token_allocator_add(allocator, &members[i], counts[c], tokens[i]);

				if (status != RS_OK)
				{
					fprintf(stderr, "balance_bench: allocation failed: %s\n", rs_status_text(status));
					return 1;
				}
				members[i].tokens = tokens[i];
				members[i].ntokens = counts[c];
				if (i + 1 == sizes[k])
				{
					double		elapsed = now_s() - t0;
					rs_ring    *ring = NULL;
					spread		s;

					if (rs_ring_build(RS_RING_MURMUR3, members, sizes[k], 256, 0, &ring, NULL) != RS_OK)
						abort();
					s = measure(ring, replicas);
					print_row(label, replicas, sizes[k], s, elapsed);
					printf("RESULT balance points=tokens%u r=%u n=%u owned_max=%.6f owned_min=%.6f copies_max=%.6f copies_min=%.6f\n",
						   counts[c], replicas, sizes[k], s.owned_max, s.owned_min, s.copies_max, s.copies_min);
					rs_ring_free(ring);
					k++;
				}
			}
			rs_token_allocator_free(allocator);
		}
	}
	return 0;
}

/*
 * fuzz_topk.c
 *		libFuzzer target for the space-saving sketch (rs_topk.h).
 *
 * The input is a capacity (its first byte, 1 to 16, so that counters are
 * taken over often) and a stream of (item, weight) byte pairs over 40
 * items, counted exactly beside the sketch.  After every add it checks the
 * counter returned; at the end, for every item held,
 *	count - error <= true count <= count,
 * every item above total / capacity is held, the counts add up to the
 * total, and rs_topk_ranked gives each held counter once, most counted
 * first.  Any disagreement aborts.
 *
 *	test/fuzz/run 100000    (FUZZ_TARGETS=topk for this one only)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rs_topk.h"

#define ITEMS 40

static void
fail(const char *what)
{
	fprintf(stderr, "fuzz_topk: %s\n", what);
	abort();
}

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	rs_topk		sketch;
	uint64_t	truth[ITEMS] = {0};
	uint64_t	total = 0;
	uint64_t	sum = 0;
	uint32_t	order[RS_TOPK_MAX_CAPACITY];
	int			seen[RS_TOPK_MAX_CAPACITY] = {0};
	uint32_t	capacity;
	uint32_t	n;

	if (size < 1)
		return 0;
	capacity = 1 + data[0] % 16;
	if (rs_topk_init(&sketch, capacity) != RS_OK)
		fail("init refused a valid capacity");
	for (size_t i = 1; i + 1 < size; i += 2)
	{
		uint64_t	item = data[i] % ITEMS;
		uint64_t	weight = 1 + data[i + 1] % 4;
		uint64_t	fingerprint = rs_topk_fingerprint(7, "", 0, &item, sizeof(item));
		uint32_t	index = UINT32_MAX;
		int			taken = -1;

		if (rs_topk_add(&sketch, fingerprint, weight, &index, &taken) != RS_OK)
			fail("add failed");
		truth[item] += weight;
		total += weight;
		if (index >= sketch.used || sketch.used > capacity)
			fail("index or used out of range");
		if (sketch.counters[index].fingerprint != fingerprint || (taken != 0 && taken != 1))
			fail("the counter returned is not the item's");
		if (sketch.total != total)
			fail("total differs");
	}
	for (uint32_t i = 0; i < sketch.used; i++)
	{
		const rs_topk_counter *c = &sketch.counters[i];
		int			found = 0;

		sum += c->count;
		for (uint64_t item = 0; item < ITEMS; item++)
			if (rs_topk_fingerprint(7, "", 0, &item, sizeof(item)) == c->fingerprint)
			{
				found = 1;
				if (c->count < truth[item] || c->count - c->error > truth[item])
					fail("bounds broken");
			}
		if (!found)
			fail("a counter holds an item never added");
	}
	if (sum != total)
		fail("counts do not add up to the total");
	for (uint64_t item = 0; item < ITEMS; item++)
		if (truth[item] * capacity > total)
		{
			uint64_t	fingerprint = rs_topk_fingerprint(7, "", 0, &item, sizeof(item));
			int			held = 0;

			for (uint32_t i = 0; i < sketch.used; i++)
				held |= sketch.counters[i].fingerprint == fingerprint;
			if (!held)
				fail("an item above total / capacity is not held");
		}
	n = rs_topk_ranked(&sketch, order);
	if (n != sketch.used)
		fail("ranked gives a different number");
	for (uint32_t r = 0; r < n; r++)
	{
		if (order[r] >= sketch.used || seen[order[r]]++)
			fail("ranked is not a permutation");
		if (r > 0 && sketch.counters[order[r - 1]].count < sketch.counters[order[r]].count)
			fail("ranked out of order");
	}
	return 0;
}

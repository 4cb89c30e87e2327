/*
 * fuzz_partmap.c
 *		Differential libFuzzer target for the 256-partition map (rs_partmap.h).
 *
 * The input bytes become a list of (node, partition_start, partition_end)
 * ranges, mostly valid, sometimes not (negative, past 255, start after end,
 * huge node numbers).  Then:
 *	- rs_partmap_build must refuse exactly the lists that hold an invalid
 *	  range, name the first one, and leave the map empty;
 *	- otherwise every partition's holders must be the sorted, distinct node
 *	  numbers of the ranges covering it, computed here one partition at a
 *	  time, and rs_partmap_holder_count must agree;
 *	- rs_partmap_check must list exactly the maximal runs of partitions with
 *	  identical holder sets that have no holder (gap) or several (overlap),
 *	  in partition order, pointing at the right holders.
 * Any disagreement aborts.
 *
 * Build and run, e.g.:
 *	clang -g -O1 -fsanitize=fuzzer,address,undefined -Isrc/core \
 *		test/fuzz/fuzz_partmap.c src/core/rs_*.c \
 *		-lmurmurhash -lyaml -lcrypto -lm -o /tmp/fuzz_partmap
 *	/tmp/fuzz_partmap -runs=200000 test/fuzz/corpus/partmap
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rs_partmap.h"

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_RANGES 64

/* The oracle stays out of the coverage instrumentation (see fuzz_ring_lookup.c). */
#define ORACLE __attribute__((no_sanitize("coverage")))

static void
fail(const char *why)
{
	fprintf(stderr, "fuzz_partmap: %s\n", why);
	abort();
}

typedef struct reader
{
	const uint8_t *data;
	size_t		size;
	size_t		pos;
} reader;

static uint8_t
next_byte(reader *r)
{
	return r->pos < r->size ? r->data[r->pos++] : 0;
}

static uint32_t
next_u32(reader *r)
{
	uint32_t	v = 0;

	for (int i = 0; i < 4; i++)
		v |= (uint32_t) next_byte(r) << (8 * i);
	return v;
}

/* A partition bound: mostly 0..255, sometimes just outside or far outside. */
static int
read_bound(reader *r, int *kind_out)
{
	uint8_t		kind = next_byte(r);

	*kind_out = 0;
	if (kind < 248)
		return next_byte(r);
	*kind_out = 1;
	switch (kind)
	{
		case 248:
			return -1;
		case 249:
			return 256;
		case 250:
			return INT32_MIN;
		case 251:
			return INT32_MAX;
		case 252:
			return 255;
		case 253:
			return 0;
		default:
			return (int) next_u32(r);
	}
}

/* The node number of a range: usually small, sometimes anything. */
static uint32_t
read_node(reader *r)
{
	uint8_t		b = next_byte(r);

	if (b >= 250)
		return b == 250 ? UINT32_MAX : next_u32(r);
	return b % 12;
}

/* One partition's holders, the slow way: scan, insert sorted, skip repeats. */
ORACLE static size_t
naive_holders(const rs_partition_range *ranges, size_t n, int p, uint32_t *out)
{
	size_t		count = 0;

	for (size_t i = 0; i < n; i++)
	{
		size_t		at;

		if (p < ranges[i].partition_start || p > ranges[i].partition_end)
			continue;
		for (at = 0; at < count && out[at] < ranges[i].node; at++)
			;
		if (at < count && out[at] == ranges[i].node)
			continue;
		memmove(out + at + 1, out + at, (count - at) * sizeof(uint32_t));
		out[at] = ranges[i].node;
		count++;
	}
	return count;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	reader		r = {data, size, 0};
	rs_partition_range ranges[MAX_RANGES];
	size_t		nranges = next_byte(&r) % (MAX_RANGES + 1);
	long		first_bad = -1;
	long		bad = -2;
	rs_partmap	map;
	rs_status	status;
	static uint32_t expect[RS_PARTITION_COUNT][MAX_RANGES];
	size_t		nexpect[RS_PARTITION_COUNT];
	rs_partmap_issue issues[RS_PARTITION_COUNT];
	size_t		nissues;
	size_t		at;
	size_t		total = 0;

	for (size_t i = 0; i < nranges; i++)
	{
		int			k1,
					k2;

		ranges[i].node = read_node(&r);
		ranges[i].partition_start = read_bound(&r, &k1);
		if (k1 == 0 && (next_byte(&r) & 1))
		{
			/* a valid end at or after the start, most of the time */
			int			len = next_byte(&r);

			ranges[i].partition_end = ranges[i].partition_start + len % (256 - ranges[i].partition_start);
		}
		else
			ranges[i].partition_end = read_bound(&r, &k2);
		if (first_bad < 0 &&
			(ranges[i].partition_start < 0 || ranges[i].partition_end > 255 ||
			 ranges[i].partition_start > ranges[i].partition_end))
			first_bad = (long) i;
	}

	memset(&map, 0x5A, sizeof(map));
	status = rs_partmap_build(ranges, nranges, &map, &bad);
	if (first_bad >= 0)
	{
		if (status != RS_ERR_OUT_OF_RANGE)
			fail("an invalid range was accepted");
		if (bad != first_bad)
			fail("bad_range does not name the first invalid range");
		if (map.holders != NULL)
			fail("map not left empty after a failure");
		for (int p = 0; p <= RS_PARTITION_COUNT; p++)
			if (map.offsets[p] != 0)
				fail("offsets not left empty after a failure");
		rs_partmap_free(&map);
		/* NULL bad_range is allowed too */
		if (rs_partmap_build(ranges, nranges, &map, NULL) != RS_ERR_OUT_OF_RANGE)
			fail("status depends on bad_range");
		rs_partmap_free(&map);
		return 0;
	}
	if (status != RS_OK)
		fail("a valid range list was refused");
	if (bad != -1)
		fail("bad_range set on success");
	if (map.holders == NULL)
		fail("holders missing");

	/* Holders, partition by partition. */
	if (map.offsets[0] != 0)
		fail("offsets do not start at 0");
	for (int p = 0; p < RS_PARTITION_COUNT; p++)
	{
		nexpect[p] = naive_holders(ranges, nranges, p, expect[p]);
		total += nexpect[p];
		if (map.offsets[p + 1] < map.offsets[p])
			fail("offsets not monotonic");
		if (rs_partmap_holder_count(&map, p) != nexpect[p])
		{
			fprintf(stderr, "partition %d: %u holders, expected %zu\n", p,
					rs_partmap_holder_count(&map, p), nexpect[p]);
			fail("holder count differs from a naive count");
		}
		if (nexpect[p] > 0 &&
			memcmp(map.holders + map.offsets[p], expect[p], nexpect[p] * sizeof(uint32_t)) != 0)
			fail("holders differ from the naive sorted distinct set");
	}
	if (map.offsets[RS_PARTITION_COUNT] != total)
		fail("total holder count wrong");

	/* Gaps and overlaps: maximal runs of equal holder sets with count != 1. */
	memset(issues, 0xA5, sizeof(issues));
	nissues = rs_partmap_check(&map, issues);
	if (nissues > RS_PARTITION_COUNT)
		fail("more issues than partitions");
	at = 0;
	for (int p = 0; p < RS_PARTITION_COUNT;)
	{
		int			end = p;

		while (end + 1 < RS_PARTITION_COUNT && nexpect[end + 1] == nexpect[p] &&
			   memcmp(expect[end + 1], expect[p], nexpect[p] * sizeof(uint32_t)) == 0)
			end++;
		if (nexpect[p] != 1)
		{
			const rs_partmap_issue *issue;

			if (at >= nissues)
				fail("a gap or overlap is missing from the check");
			issue = &issues[at++];
			if (issue->kind != (nexpect[p] == 0 ? RS_PARTMAP_GAP : RS_PARTMAP_OVERLAP))
				fail("issue of the wrong kind");
			if (issue->partition_start != p || issue->partition_end != end)
			{
				fprintf(stderr, "issue [%d, %d], expected [%d, %d]\n",
						issue->partition_start, issue->partition_end, p, end);
				fail("issue run has the wrong bounds");
			}
			if (issue->nholders != nexpect[p])
				fail("issue has the wrong number of holders");
			if (issue->first_holder != map.offsets[p])
				fail("issue points at the wrong holders");
		}
		p = end + 1;
	}
	if (at != nissues)
		fail("the check lists an issue that is not a gap or overlap");

	rs_partmap_free(&map);
	if (map.holders != NULL || map.offsets[RS_PARTITION_COUNT] != 0)
		fail("free did not leave the map empty");
	return 0;
}

/*
 * rs_partmap.c
 *		Holder lists, gap/overlap checks and range arithmetic for partition maps.
 */
#include "rs_partmap.h"

#include <stdlib.h>
#include <string.h>

/* qsort order for node indexes. */
static int
compare_u32(const void *a, const void *b)
{
	uint32_t	x = *(const uint32_t *) a;
	uint32_t	y = *(const uint32_t *) b;

	return (x > y) - (x < y);
}

/* Build the holder lists (see rs_partmap.h). */
rs_status
rs_partmap_build(const rs_partition_range *ranges, size_t nranges,
				 rs_partmap *map, long *bad_range)
{
	uint32_t	counts[RS_PARTITION_COUNT] = {0};
	uint32_t	fill[RS_PARTITION_COUNT];
	size_t		total = 0;

	memset(map, 0, sizeof(*map));
	if (bad_range)
		*bad_range = -1;
	for (size_t i = 0; i < nranges; i++)
	{
		const rs_partition_range *r = &ranges[i];

		if (r->partition_start < 0 || r->partition_end >= RS_PARTITION_COUNT ||
			r->partition_start > r->partition_end)
		{
			if (bad_range)
				*bad_range = (long) i;
			return RS_ERR_OUT_OF_RANGE;
		}
		for (int p = r->partition_start; p <= r->partition_end; p++)
			counts[p]++;
		total += (size_t) (r->partition_end - r->partition_start + 1);
	}

	map->holders = malloc((total > 0 ? total : 1) * sizeof(uint32_t));
	if (map->holders == NULL)
		return RS_ERR_NOMEM;
	for (int p = 0; p < RS_PARTITION_COUNT; p++)
	{
		map->offsets[p + 1] = map->offsets[p] + counts[p];
		fill[p] = map->offsets[p];
	}
	for (size_t i = 0; i < nranges; i++)
		for (int p = ranges[i].partition_start; p <= ranges[i].partition_end; p++)
			map->holders[fill[p]++] = ranges[i].node;

	/* Sort each partition's holders and drop a node listed twice. */
	{
		uint32_t	out = 0;
		uint32_t	start = 0;

		for (int p = 0; p < RS_PARTITION_COUNT; p++)
		{
			uint32_t	end = map->offsets[p + 1];
			uint32_t   *h = map->holders + start;
			uint32_t	n = end - start;

			qsort(h, n, sizeof(uint32_t), compare_u32);
			map->offsets[p] = out;
			for (uint32_t j = 0; j < n; j++)
				if (j == 0 || h[j] != h[j - 1])
					map->holders[out++] = h[j];
			start = end;
		}
		map->offsets[RS_PARTITION_COUNT] = out;
	}
	return RS_OK;
}

/* Free the holder lists; the map is left empty. */
void
rs_partmap_free(rs_partmap *map)
{
	free(map->holders);
	memset(map, 0, sizeof(*map));
}

/* Whether partitions a and b have the same holders. */
static int
same_holders(const rs_partmap *map, int a, int b)
{
	uint32_t	na = rs_partmap_holder_count(map, a);

	return na == rs_partmap_holder_count(map, b) &&
		(na == 0 || memcmp(map->holders + map->offsets[a],
						   map->holders + map->offsets[b],
						   na * sizeof(uint32_t)) == 0);
}

/* List gaps and overlaps in partition order (see rs_partmap.h). */
size_t
rs_partmap_check(const rs_partmap *map, rs_partmap_issue *issues)
{
	size_t		nissues = 0;
	int			p = 0;

	while (p < RS_PARTITION_COUNT)
	{
		int			end = p;
		uint32_t	n = rs_partmap_holder_count(map, p);

		while (end + 1 < RS_PARTITION_COUNT && same_holders(map, p, end + 1))
			end++;
		if (n != 1)
		{
			rs_partmap_issue *issue = &issues[nissues++];

			issue->kind = n == 0 ? RS_PARTMAP_GAP : RS_PARTMAP_OVERLAP;
			issue->partition_start = p;
			issue->partition_end = end;
			issue->first_holder = map->offsets[p];
			issue->nholders = n;
		}
		p = end + 1;
	}
	return nissues;
}

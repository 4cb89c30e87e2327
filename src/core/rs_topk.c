/*
 * rs_topk.c
 *		The space-saving sketch (rs_topk.h).
 *
 * Counters are looked through in one pass that finds the item or, failing
 * that, the least counted counter: at RS_TOPK_MAX_CAPACITY = 256 a pass is
 * a few hundred nanoseconds, less than keeping a heap and an index
 * consistent in shared memory would cost in code, and never worse.
 */
#include "rs_topk.h"

#include <stdlib.h>
#include <string.h>

#include "rs_hash.h"

rs_status
rs_topk_init(rs_topk *sketch, uint32_t capacity)
{
	if (sketch == NULL)
		return RS_ERR_INVALID;
	if (capacity < 1 || capacity > RS_TOPK_MAX_CAPACITY)
		return RS_ERR_OUT_OF_RANGE;
	memset(sketch, 0, sizeof(*sketch));
	sketch->capacity = capacity;
	return RS_OK;
}

void
rs_topk_reset(rs_topk *sketch)
{
	uint32_t	capacity = sketch->capacity;

	memset(sketch, 0, sizeof(*sketch));
	sketch->capacity = capacity;
}

rs_status
rs_topk_add(rs_topk *sketch, uint64_t fingerprint, uint64_t weight, uint32_t *index, int *taken)
{
	uint32_t	least = 0;
	rs_topk_counter *c;

	if (sketch == NULL || index == NULL || taken == NULL || weight == 0 ||
		sketch->capacity < 1 || sketch->capacity > RS_TOPK_MAX_CAPACITY || sketch->used > sketch->capacity)
		return RS_ERR_INVALID;
	if (sketch->total > UINT64_MAX - weight)
		return RS_ERR_OUT_OF_RANGE;
	for (uint32_t i = 0; i < sketch->used; i++)
	{
		c = &sketch->counters[i];
		if (c->fingerprint == fingerprint)
		{
			/* count <= total, so this cannot overflow when total does not */
			c->count += weight;
			sketch->total += weight;
			*index = i;
			*taken = 0;
			return RS_OK;
		}
		if (c->count < sketch->counters[least].count)
			least = i;
	}
	if (sketch->used < sketch->capacity)
	{
		c = &sketch->counters[sketch->used];
		c->fingerprint = fingerprint;
		c->count = weight;
		c->error = 0;
		*index = sketch->used++;
	}
	else
	{
		c = &sketch->counters[least];
		c->fingerprint = fingerprint;
		c->error = c->count;
		c->count += weight;
		*index = least;
	}
	sketch->total += weight;
	*taken = 1;
	return RS_OK;
}

static int
compare_counters(const rs_topk_counter *a, const rs_topk_counter *b)
{
	if (a->count != b->count)
		return a->count > b->count ? -1 : 1;
	if (a->error != b->error)
		return a->error < b->error ? -1 : 1;
	if (a->fingerprint != b->fingerprint)
		return a->fingerprint < b->fingerprint ? -1 : 1;
	return 0;
}

uint32_t
rs_topk_ranked(const rs_topk *sketch, uint32_t *order)
{
	uint32_t	n = sketch->used <= RS_TOPK_MAX_CAPACITY ? sketch->used : RS_TOPK_MAX_CAPACITY;

	/* insertion sort: at most 256 counters, read by a monitoring query */
	for (uint32_t i = 0; i < n; i++)
	{
		uint32_t	j = i;

		while (j > 0 && compare_counters(&sketch->counters[i], &sketch->counters[order[j - 1]]) < 0)
		{
			order[j] = order[j - 1];
			j--;
		}
		order[j] = i;
	}
	return n;
}

uint64_t
rs_topk_fingerprint(uint64_t scope, const void *first, size_t first_len,
					const void *second, size_t second_len)
{
	uint64_t	h = rs_fmix64(scope ^ UINT64_C(0x9e3779b97f4a7c15));

	h = rs_fmix64(h ^ rs_murmur3_token(first, first_len) ^ (uint64_t) first_len);
	h = rs_fmix64(rs_rotl64(h, 29) ^ rs_murmur3_token(second, second_len) ^ ((uint64_t) second_len << 32));
	return h;
}

/*
 * test_topk.c
 *		Unit tests for the space-saving sketch (rs_topk.h): its bounds hold
 *		on every item, a heavy item is always held and ranks first, and bad
 *		arguments are refused.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rs_topk.h"
#include "unit.h"

/* A small deterministic generator (xorshift64*), so a failure repeats. */
static uint64_t rng_state = UINT64_C(0x2545F4914F6CDD1D);

static uint64_t
next_random(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * UINT64_C(2685821657736338717);
}

static void
test_init_and_arguments(void)
{
	rs_topk		sketch;
	uint32_t	index = 99;
	int			taken = 7;

	UNIT_EQ_INT(rs_topk_init(&sketch, 0), RS_ERR_OUT_OF_RANGE);
	UNIT_EQ_INT(rs_topk_init(&sketch, RS_TOPK_MAX_CAPACITY + 1), RS_ERR_OUT_OF_RANGE);
	UNIT_EQ_INT(rs_topk_init(NULL, 4), RS_ERR_INVALID);
	UNIT_EQ_INT(rs_topk_init(&sketch, 4), RS_OK);
	UNIT_EQ_INT(sketch.used, 0);
	UNIT_EQ_U64(sketch.total, 0);
	UNIT_EQ_INT(rs_topk_add(&sketch, 1, 0, &index, &taken), RS_ERR_INVALID);
	UNIT_EQ_INT(index, 99);
	UNIT_EQ_INT(rs_topk_add(&sketch, 1, 1, NULL, &taken), RS_ERR_INVALID);
	UNIT_EQ_INT(rs_topk_add(&sketch, 1, 1, &index, NULL), RS_ERR_INVALID);
	/* a sketch whose fields were overwritten is refused, not read past its end */
	sketch.used = 5;
	UNIT_EQ_INT(rs_topk_add(&sketch, 1, 1, &index, &taken), RS_ERR_INVALID);
	sketch.used = 0;
	sketch.capacity = RS_TOPK_MAX_CAPACITY + 1;
	UNIT_EQ_INT(rs_topk_add(&sketch, 1, 1, &index, &taken), RS_ERR_INVALID);
	UNIT_EQ_INT(rs_topk_init(&sketch, 4), RS_OK);
	/* the total cannot wrap */
	UNIT_EQ_INT(rs_topk_add(&sketch, 1, UINT64_MAX - 1, &index, &taken), RS_OK);
	UNIT_EQ_INT(rs_topk_add(&sketch, 2, 2, &index, &taken), RS_ERR_OUT_OF_RANGE);
	UNIT_EQ_U64(sketch.total, UINT64_MAX - 1);
	UNIT_EQ_INT(rs_topk_add(&sketch, 1, 1, &index, &taken), RS_OK);
	UNIT_EQ_U64(sketch.counters[index].count, UINT64_MAX);
}

/* Up to capacity distinct items are counted exactly, and taken once each. */
static void
test_exact_below_capacity(void)
{
	rs_topk		sketch;
	uint32_t	order[RS_TOPK_MAX_CAPACITY];
	uint32_t	index;
	int			taken;
	int			takes = 0;

	rs_topk_init(&sketch, 8);
	for (int round = 0; round < 10; round++)
		for (uint64_t item = 1; item <= 8; item++)
			if (item <= (uint64_t) round || item == 8)
			{
				UNIT_EQ_INT(rs_topk_add(&sketch, item * 1000, 1, &index, &taken), RS_OK);
				takes += taken;
			}
	UNIT_EQ_INT(takes, 8);
	UNIT_EQ_INT(sketch.used, 8);
	UNIT_EQ_INT(rs_topk_ranked(&sketch, order), 8);
	/* item 8: every round (10); item k < 8: rounds k..9 (10 - k) */
	UNIT_EQ_U64(sketch.counters[order[0]].fingerprint, 8000);
	UNIT_EQ_U64(sketch.counters[order[0]].count, 10);
	for (uint32_t r = 1; r < 8; r++)
	{
		UNIT_EQ_U64(sketch.counters[order[r]].fingerprint, r * 1000);
		UNIT_EQ_U64(sketch.counters[order[r]].count, 10 - r);
		UNIT_EQ_U64(sketch.counters[order[r]].error, 0);
	}
	rs_topk_reset(&sketch);
	UNIT_EQ_INT(sketch.used, 0);
	UNIT_EQ_INT(sketch.capacity, 8);
	UNIT_EQ_INT(rs_topk_ranked(&sketch, order), 0);
}

/* What replacing does: the new item inherits the least count as its error. */
static void
test_replacement(void)
{
	rs_topk		sketch;
	uint32_t	index;
	int			taken;

	rs_topk_init(&sketch, 2);
	rs_topk_add(&sketch, 10, 5, &index, &taken);
	rs_topk_add(&sketch, 20, 3, &index, &taken);
	UNIT_EQ_INT(rs_topk_add(&sketch, 30, 1, &index, &taken), RS_OK);
	UNIT_EQ_INT(taken, 1);
	UNIT_EQ_INT(index, 1);		/* 20 was the least counted */
	UNIT_EQ_U64(sketch.counters[1].fingerprint, 30);
	UNIT_EQ_U64(sketch.counters[1].count, 4);
	UNIT_EQ_U64(sketch.counters[1].error, 3);
	UNIT_EQ_INT(rs_topk_add(&sketch, 10, 2, &index, &taken), RS_OK);
	UNIT_EQ_INT(taken, 0);
	UNIT_EQ_INT(index, 0);
	UNIT_EQ_U64(sketch.counters[0].count, 7);
	UNIT_EQ_U64(sketch.total, 11);
}

/*
 * The case: one key asked 1,000 times among 10,000 keys asked once
 * each, in random order; it is held and ranks first, with count - error at
 * least its true count's lower bound, at both a small and the full capacity.
 */
static void
test_hot_key_among_uniform(uint32_t capacity)
{
	enum { HOT = 1000, COLD = 10000 };
	uint64_t   *stream = malloc(sizeof(uint64_t) * (HOT + COLD));
	rs_topk		sketch;
	uint32_t	order[RS_TOPK_MAX_CAPACITY];
	uint32_t	index;
	int			taken;
	int			status_ok = 1;
	const uint64_t hot = rs_topk_fingerprint(42, "", 0, "3201010101010001", 16);

	for (int i = 0; i < COLD; i++)
	{
		char		key[32];
		int			len = snprintf(key, sizeof(key), "32010101%08d", i);

		stream[i] = rs_topk_fingerprint(42, "", 0, key, (size_t) len);
	}
	for (int i = COLD; i < COLD + HOT; i++)
		stream[i] = hot;
	for (int i = COLD + HOT - 1; i > 0; i--)
	{
		int			j = (int) (next_random() % (uint64_t) (i + 1));
		uint64_t	t = stream[i];

		stream[i] = stream[j];
		stream[j] = t;
	}
	rs_topk_init(&sketch, capacity);
	for (int i = 0; i < COLD + HOT; i++)
		status_ok &= rs_topk_add(&sketch, stream[i], 1, &index, &taken) == RS_OK;
	UNIT_CHECK(status_ok, "every add succeeded");
	UNIT_EQ_INT(rs_topk_ranked(&sketch, order), capacity);
	UNIT_EQ_U64(sketch.counters[order[0]].fingerprint, hot);
	UNIT_CHECK(sketch.counters[order[0]].count >= HOT &&
			   sketch.counters[order[0]].count - sketch.counters[order[0]].error <= HOT,
			   "the hot key's bounds hold: count %" PRIu64 ", error %" PRIu64,
			   sketch.counters[order[0]].count, sketch.counters[order[0]].error);
	UNIT_EQ_U64(sketch.total, HOT + COLD);
	free(stream);
}

/*
 * The bounds on every held item, and the guarantee that every item above
 * total / capacity is held, on a skewed random stream checked against exact
 * counts.
 */
static void
test_bounds_on_skewed_stream(void)
{
	enum { ITEMS = 2000, EVENTS = 200000, CAPACITY = 64 };
	uint64_t   *truth = calloc(ITEMS, sizeof(uint64_t));
	rs_topk		sketch;
	uint32_t	order[RS_TOPK_MAX_CAPACITY];
	uint32_t	index;
	int			taken;
	int			bounds_ok = 1;
	int			heavy_held = 1;
	int			sorted = 1;
	uint32_t	n;

	rs_topk_init(&sketch, CAPACITY);
	for (int e = 0; e < EVENTS; e++)
	{
		/* item = floor(ITEMS * u^3): strongly skewed towards 0 */
		double		u = (double) (next_random() >> 11) / (double) (UINT64_C(1) << 53);
		uint64_t	item = (uint64_t) (ITEMS * u * u * u);
		uint64_t	weight = 1 + next_random() % 3;

		truth[item] += weight;
		rs_topk_add(&sketch, item + 1, weight, &index, &taken);
	}
	n = rs_topk_ranked(&sketch, order);
	UNIT_EQ_INT(n, CAPACITY);
	for (uint32_t r = 0; r < n; r++)
	{
		const rs_topk_counter *c = &sketch.counters[order[r]];
		uint64_t	t = truth[c->fingerprint - 1];

		bounds_ok &= c->count >= t && c->count - c->error <= t;
		if (r > 0)
			sorted &= sketch.counters[order[r - 1]].count >= c->count;
	}
	for (uint64_t item = 0; item < ITEMS; item++)
		if (truth[item] > sketch.total / CAPACITY)
		{
			int			held = 0;

			for (uint32_t i = 0; i < sketch.used; i++)
				held |= sketch.counters[i].fingerprint == item + 1;
			heavy_held &= held;
		}
	UNIT_CHECK(bounds_ok, "count - error <= true count <= count for every held item");
	UNIT_CHECK(heavy_held, "every item above total / capacity is held");
	UNIT_CHECK(sorted, "ranked most counted first");
	UNIT_EQ_U64(sketch.counters[order[0]].fingerprint, 1);
	free(truth);
}

static void
test_fingerprint(void)
{
	UNIT_CHECK(rs_topk_fingerprint(1, "ab", 2, "c", 1) != rs_topk_fingerprint(1, "a", 1, "bc", 2),
			   "the two strings are delimited");
	UNIT_CHECK(rs_topk_fingerprint(1, "", 0, "k", 1) != rs_topk_fingerprint(2, "", 0, "k", 1),
			   "the scope counts");
	UNIT_CHECK(rs_topk_fingerprint(1, "x", 1, "k", 1) != rs_topk_fingerprint(1, "", 0, "k", 1),
			   "the keyspace counts");
	UNIT_EQ_U64(rs_topk_fingerprint(7, "ks", 2, "key", 3), rs_topk_fingerprint(7, "ks", 2, "key", 3));
	UNIT_CHECK(rs_topk_fingerprint(7, NULL, 0, NULL, 0) == rs_topk_fingerprint(7, "", 0, "", 0),
			   "empty strings need no pointer");
}

int
main(void)
{
	test_init_and_arguments();
	test_exact_below_capacity();
	test_replacement();
	test_hot_key_among_uniform(128);
	test_hot_key_among_uniform(RS_TOPK_MAX_CAPACITY);
	test_bounds_on_skewed_stream();
	test_fingerprint();
	return unit_report();
}

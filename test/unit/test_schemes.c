/*
 * test_schemes.c
 *		The scheme comparison reproduces the textbook claims: mod N moves about
 *		(N-1)/N keys when a node joins, the consistent schemes about 1/(N+1).
 */
#include <math.h>

#include "rs_schemes.h"
#include "unit.h"

/* Published jump-hash properties: in range, and monotone growth. */
static void
test_jump_hash(void)
{
	int			out_of_range = 0;
	int			bad_moves = 0;

	for (uint64_t key = 1; key < 20000; key++)
	{
		uint64_t	k = key * 0x9e3779b97f4a7c15ULL;

		for (int32_t n = 1; n < 20; n++)
		{
			int32_t		a = rs_jump_hash(k, n);
			int32_t		b = rs_jump_hash(k, n + 1);

			out_of_range += a < 0 || a >= n;
			/* growing by one bucket either keeps a key or moves it to the new one */
			bad_moves += a != b && b != n;
		}
	}
	UNIT_EQ_INT(out_of_range, 0);
	UNIT_EQ_INT(bad_moves, 0);
	UNIT_EQ_INT(rs_jump_hash(0, 1), 0);
}

/* 3 -> 4 nodes: modulo ~75 %, the consistent schemes ~25 %. */
static void
test_three_to_four(void)
{
	rs_scheme_result r[RS_SCHEME_COUNT];

	UNIT_EQ_INT(rs_compare_schemes(3, 4, 100000, 256, r), RS_OK);
	UNIT_EQ_STR(r[RS_SCHEME_MODULO].scheme, "modulo");
	UNIT_CHECK(fabs(r[RS_SCHEME_MODULO].moved_fraction - 0.75) < 0.01, "modulo moved %.4f", r[RS_SCHEME_MODULO].moved_fraction);
	UNIT_CHECK(fabs(r[RS_SCHEME_RING].moved_fraction - 0.25) < 0.03, "ring moved %.4f", r[RS_SCHEME_RING].moved_fraction);
	UNIT_EQ_STR(r[RS_SCHEME_RING_TOKENS].scheme, "ring_tokens");
	UNIT_CHECK(fabs(r[RS_SCHEME_RING_TOKENS].moved_fraction - 0.25) < 0.02, "ring_tokens moved %.4f",
			   r[RS_SCHEME_RING_TOKENS].moved_fraction);
	UNIT_CHECK(fabs(r[RS_SCHEME_JUMP].moved_fraction - 0.25) < 0.01, "jump moved %.4f", r[RS_SCHEME_JUMP].moved_fraction);
	UNIT_CHECK(fabs(r[RS_SCHEME_RENDEZVOUS].moved_fraction - 0.25) < 0.01, "rendezvous moved %.4f", r[RS_SCHEME_RENDEZVOUS].moved_fraction);
	/* equal ranges re-split: 3 -> 4 moves half the keys */
	UNIT_CHECK(fabs(r[RS_SCHEME_RANGE].moved_fraction - 0.5) < 0.01, "range moved %.4f", r[RS_SCHEME_RANGE].moved_fraction);
	UNIT_CHECK(fabs(r[RS_SCHEME_RING].ideal_fraction - 0.25) < 1e-12, "ideal %.4f", r[RS_SCHEME_RING].ideal_fraction);
	for (int s = 0; s < RS_SCHEME_COUNT; s++)
		UNIT_CHECK(r[s].max_over_mean >= 1.0 && r[s].max_over_mean < 1.15, "%s max/mean %.3f", r[s].scheme, r[s].max_over_mean);
	/* 100 -> 101: allocated tokens move about the ideal and stay balanced */
	UNIT_EQ_INT(rs_compare_schemes(100, 101, 200000, 256, r), RS_OK);
	UNIT_CHECK(fabs(r[RS_SCHEME_RING_TOKENS].moved_fraction - 1.0 / 101) < 0.003, "ring_tokens moved %.4f",
			   r[RS_SCHEME_RING_TOKENS].moved_fraction);
	UNIT_CHECK(r[RS_SCHEME_RING_TOKENS].max_over_mean < r[RS_SCHEME_RING].max_over_mean,
			   "16 allocated tokens (%.3f) balance better than 256 random vnodes (%.3f) at 101 nodes",
			   r[RS_SCHEME_RING_TOKENS].max_over_mean, r[RS_SCHEME_RING].max_over_mean);
	UNIT_EQ_INT(rs_compare_schemes(0, 4, 10, 256, r), RS_ERR_INVALID);
	UNIT_EQ_INT(rs_compare_schemes(3, 4, 10, 0, r), RS_ERR_INVALID);
}

int
main(void)
{
	test_jump_hash();
	test_three_to_four();
	return unit_report();
}

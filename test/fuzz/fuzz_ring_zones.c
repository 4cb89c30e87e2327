/*
 * fuzz_ring_zones.c
 *		Differential libFuzzer target for zones (docs/routing.md §7),
 *		explicit tokens (§8) and token allocation (rs_ring_alloc.h).
 *
 * The input describes a small murmur3 ring: 1-12 members, each with a name,
 * a weight, maybe a zone (from a small alphabet, so that zones are shared;
 * sometimes empty, which must be refused) and maybe explicit tokens taken
 * from the input (sometimes repeated, which must be refused).  Then:
 *
 *	- the build is refused exactly when a member breaks a rule (an empty
 *	  zone, no tokens, a token twice), naming that member;
 *	- the ring's points are the explicit tokens (label i the position in
 *	  ascending order) and the labelled vnodes, in contract order;
 *	- rs_ring_replicas equals a naive two-pass walk written from §7, with and
 *	  without a table of replica sets, for hashes from the input and around
 *	  points, and every set spans min(R, zones) zones;
 *	- a node joins with allocated tokens: they are ascending, distinct from
 *	  every point, the same when asked again, and every owner move between
 *	  the rings goes to the new node.
 * Any disagreement aborts.
 *
 * Build and run, e.g.:
 *	clang -g -O1 -fsanitize=fuzzer,address,undefined -Isrc/core \
 *		test/fuzz/fuzz_ring_zones.c src/core/rs_*.c \
 *		-lmurmurhash -lyaml -lcrypto -lm -o /tmp/fuzz_ring_zones
 *	/tmp/fuzz_ring_zones -runs=200000 test/fuzz/corpus/ring_zones
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rs_ring.h"
#include "rs_ring_alloc.h"
#include "rs_ring_diff.h"

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define ORACLE __attribute__((no_sanitize("coverage")))

#define MAX_MEMBERS 12
#define MAX_TOKENS 12
#define MAX_NAME 6

static void
fail(const char *why)
{
	fprintf(stderr, "fuzz_ring_zones: %s\n", why);
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

static uint64_t
next_u64(reader *r)
{
	uint64_t	v = 0;

	for (int i = 0; i < 8; i++)
		v |= (uint64_t) next_byte(r) << (8 * i);
	return v;
}

typedef struct member_set
{
	/* one more than read: a node joins */
	char		names[MAX_MEMBERS + 1][MAX_NAME + 1];
	char		zones[MAX_MEMBERS + 1][3];
	uint64_t	tokens[MAX_MEMBERS + 1][MAX_TOKENS];
	rs_ring_member members[MAX_MEMBERS + 1];
	size_t		count;
	long		first_bad;		/* first member (input order) breaking a rule, or -1 */
	int			bad[MAX_MEMBERS];	/* whether each member breaks a rule */
} member_set;

static const char alphabet[] = "abcz09-#\x80\xff";

/* Read one member; note whether it breaks a rule. */
static void
read_member(reader *r, member_set *set)
{
	size_t		i = set->count;
	size_t		len = 1 + next_byte(r) % MAX_NAME;
	uint8_t		kind = next_byte(r);
	rs_ring_member *m = &set->members[i];
	int			bad = 0;

	memset(m, 0, sizeof(*m));
	for (size_t k = 0; k < len; k++)
		set->names[i][k] = alphabet[next_byte(r) % (sizeof(alphabet) - 1)];
	set->names[i][len] = '\0';
	m->name = set->names[i];
	m->name_len = len;
	m->weight = (double) (1 + next_byte(r) % 16) / 8.0;
	if (kind & 1)
	{
		/* zones "a".."d" shared; 1 in 32 an empty one */
		uint8_t		z = next_byte(r);

		set->zones[i][0] = (char) ('a' + z % 4);
		set->zones[i][1] = '\0';
		m->zone = set->zones[i];
		m->zone_len = (z % 32 == 31) ? 0 : 1;
		bad |= m->zone_len == 0;
	}
	if (kind & 2)
	{
		uint32_t	n = next_byte(r) % (MAX_TOKENS + 1);	/* 0: refused */

		for (uint32_t t = 0; t < n; t++)
		{
			/* a small token space now and then, so that ties and repeats happen */
			uint64_t	v = next_u64(r);

			set->tokens[i][t] = (kind & 4) ? v % 64 : v;
		}
		m->tokens = set->tokens[i];
		m->ntokens = n;
		bad |= n == 0;
		for (uint32_t a = 0; a < n; a++)
			for (uint32_t b = a + 1; b < n; b++)
				bad |= set->tokens[i][a] == set->tokens[i][b];
	}
	set->bad[i] = bad;
	if (bad && set->first_bad < 0)
		set->first_bad = (long) i;
	set->count++;
}

ORACLE static int
same_name(const rs_ring_member *a, const rs_ring_member *b)
{
	return a->name_len == b->name_len && memcmp(a->name, b->name, a->name_len) == 0;
}

ORACLE static int
has_duplicate(const member_set *set)
{
	for (size_t i = 0; i < set->count; i++)
		for (size_t j = i + 1; j < set->count; j++)
			if (same_name(&set->members[i], &set->members[j]))
				return 1;
	return 0;
}

/* The §7 walk, as the contract words it, by a linear scan. */
ORACLE static uint32_t
naive_replicas(const rs_ring *ring, uint64_t hash, uint32_t want, uint16_t *out)
{
	uint32_t	start = 0;
	uint32_t	found = 0;
	uint32_t	zones = 0;

	while (start < ring->npoints && rs_ring_token(ring, start) < hash)
		start++;
	if (start == ring->npoints)
		start = 0;
	if (want > ring->nnodes)
		want = ring->nnodes;
	for (uint32_t step = 0; step < ring->npoints && found < want && zones < ring->nzones; step++)
	{
		uint16_t	node = (uint16_t) rs_ring_point_owner(ring, (start + step) % ring->npoints);
		int			taken = 0;

		for (uint32_t j = 0; j < found; j++)
			taken |= out[j] == node || rs_ring_zone_of(ring, out[j]) == rs_ring_zone_of(ring, node);
		if (!taken)
		{
			out[found++] = node;
			zones++;
		}
	}
	for (uint32_t step = 0; step < ring->npoints && found < want; step++)
	{
		uint16_t	node = (uint16_t) rs_ring_point_owner(ring, (start + step) % ring->npoints);
		int			taken = 0;

		for (uint32_t j = 0; j < found; j++)
			taken |= out[j] == node;
		if (!taken)
			out[found++] = node;
	}
	return found;
}

/* Zone count of a member set, as the contract counts them. */
ORACLE static uint32_t
count_zones(const rs_ring *ring)
{
	uint32_t	zones = 0;

	for (uint32_t n = 0; n < ring->nnodes; n++)
	{
		int			seen = 0;

		for (uint32_t m = 0; m < n; m++)
		{
			const char *a = rs_ring_zone_name(ring, n);
			const char *b = rs_ring_zone_name(ring, m);

			seen |= a != NULL && b != NULL && strcmp(a, b) == 0;
		}
		zones += !seen;
	}
	return zones;
}

ORACLE static void
check_points(const rs_ring *ring, const member_set *set)
{
	for (uint32_t p = 1; p < ring->npoints; p++)
	{
		uint64_t	a = rs_ring_token(ring, p - 1);
		uint64_t	b = rs_ring_token(ring, p);
		uint32_t	na = rs_ring_point_owner(ring, p - 1);
		uint32_t	nb = rs_ring_point_owner(ring, p);

		if (a > b || (a == b && (na > nb || (na == nb && ring->labels[p - 1] >= ring->labels[p]))))
			fail("points not in contract order");
	}
	for (uint32_t n = 0; n < ring->nnodes; n++)
	{
		const rs_ring_member *m = NULL;

		for (size_t i = 0; i < set->count; i++)
			if (set->members[i].name_len == ring->name_lens[n] &&
				memcmp(set->members[i].name, ring->names[n], ring->name_lens[n]) == 0)
				m = &set->members[i];
		if (m == NULL)
			fail("a node that is no member");
		if (m->tokens == NULL)
			continue;
		if (ring->node_points[n] != m->ntokens)
			fail("a member with tokens has another point count");
		for (uint32_t p = 0; p < ring->npoints; p++)
		{
			uint32_t	below = 0;

			if (rs_ring_point_owner(ring, p) != n)
				continue;
			for (uint32_t t = 0; t < m->ntokens; t++)
				below += m->tokens[t] < rs_ring_token(ring, p);
			if (below != ring->labels[p])
				fail("an explicit token's label is not its position among the tokens");
		}
	}
}

ORACLE static void
check_replicas(const rs_ring *ring, reader *r)
{
	uint32_t	zones = count_zones(ring);

	if (zones != ring->nzones)
		fail("zone count differs from the contract's");
	for (int k = 0; k < 24; k++)
	{
		uint64_t	h = k < 8 ? rs_ring_token(ring, next_byte(r) % ring->npoints) + (uint64_t) (k % 3) - 1
			: next_u64(r);
		uint32_t	want = next_byte(r) % (ring->nnodes + 3);
		uint16_t	got[MAX_MEMBERS + 4];
		uint16_t	expected[MAX_MEMBERS + 4];
		uint32_t	count = 999;
		uint32_t	expected_count = naive_replicas(ring, h, want, expected);
		uint32_t	spanned = 0;

		if (rs_ring_replicas(ring, h, want, got, &count) != RS_OK)
			fail("rs_ring_replicas failed");
		if (count != expected_count || memcmp(got, expected, count * sizeof(uint16_t)) != 0)
			fail("replica set differs from the naive two-pass walk");
		for (uint32_t i = 0; i < count; i++)
		{
			int			seen = 0;

			for (uint32_t j = 0; j < i; j++)
				seen |= rs_ring_zone_of(ring, got[j]) == rs_ring_zone_of(ring, got[i]);
			spanned += !seen;
		}
		if (spanned != (want < zones ? want : zones))
			fail("a replica set spans fewer than min(R, zones) zones");
	}
}

/* A node joins with allocated tokens. */
ORACLE static void
check_allocation(const rs_ring *ring, const member_set *set, uint32_t vnodes, reader *r)
{
	member_set	joined;
	rs_ring_member node;
	uint64_t	tokens[MAX_TOKENS];
	uint64_t	again[MAX_TOKENS];
	uint32_t	count = 1 + next_byte(r) % MAX_TOKENS;
	uint32_t	replicas = 1 + next_byte(r) % 4;
	rs_ring    *after = NULL;
	rs_owner_move *moves = NULL;
	size_t		nmoves = 0;
	rs_status	status;

	memset(&node, 0, sizeof(node));
	node.name = "~new";			/* '~' sorts after every name of the alphabet but the high bytes */
	node.name_len = 4;
	node.weight = 1;
	if (next_byte(r) & 1)
	{
		node.zone = "b";
		node.zone_len = 1;
	}
	status = rs_ring_allocate_tokens(set->members, set->count, vnodes, replicas, &node, count, tokens, NULL);
	if (status == RS_ERR_TOO_MANY_POINTS)
		return;					/* tiny token spaces can run out of gaps */
	if (status != RS_OK)
		fail("allocation failed on a valid ring");
	if (rs_ring_allocate_tokens(set->members, set->count, vnodes, replicas, &node, count, again, NULL) != RS_OK ||
		memcmp(tokens, again, count * sizeof(uint64_t)) != 0)
		fail("allocation is not deterministic");
	for (uint32_t i = 0; i < count; i++)
	{
		if (i > 0 && tokens[i - 1] >= tokens[i])
			fail("allocated tokens not ascending and distinct");
		for (uint32_t p = 0; p < ring->npoints; p++)
			if (rs_ring_token(ring, p) == tokens[i])
				fail("an allocated token equals an existing point");
	}
	memcpy(&joined, set, sizeof(joined));
	for (size_t i = 0; i < joined.count; i++)
	{
		joined.members[i].name = joined.names[i];
		if (joined.members[i].zone)
			joined.members[i].zone = joined.zones[i];
		if (joined.members[i].tokens)
			joined.members[i].tokens = joined.tokens[i];
	}
	node.tokens = tokens;
	node.ntokens = count;
	joined.members[joined.count++] = node;
	if (rs_ring_build(RS_RING_MURMUR3, joined.members, joined.count, vnodes, 0, &after, NULL) != RS_OK)
		fail("the ring with the allocated node does not build");
	if (rs_ring_owner_moves(ring, after, &moves, &nmoves) != RS_OK)
		fail("owner moves failed");
	for (size_t i = 0; i < nmoves; i++)
		if (strcmp(moves[i].to_node, "~new") != 0)
		{
			fprintf(stderr, "move (%" PRIu64 ", %" PRIu64 "] %s -> %s\n", moves[i].range_start,
					moves[i].range_end, moves[i].from_node, moves[i].to_node);
			fail("a join with allocated tokens moved keys to another node");
		}
	free(moves);
	rs_ring_free(after);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	reader		r = {data, size, 0};
	uint8_t		flags = next_byte(&r);
	size_t		nmembers = 1 + next_byte(&r) % MAX_MEMBERS;
	uint32_t	vnodes = 1 + next_byte(&r) % 8;
	member_set	set;
	rs_ring    *ring = (rs_ring *) 0x1;
	long		bad = -2;
	rs_status	status;

	set.count = 0;
	set.first_bad = -1;
	for (size_t i = 0; i < nmembers; i++)
		read_member(&r, &set);
	status = rs_ring_build(RS_RING_MURMUR3, set.members, set.count, vnodes, RS_RING_KEEP_LABELS, &ring, &bad);
	if (has_duplicate(&set))
	{
		if (status != RS_ERR_DUPLICATE && status != RS_ERR_INVALID)
			fail("duplicate names not refused");
		return 0;
	}
	if (set.first_bad >= 0)
	{
		if (status != RS_ERR_INVALID || ring != NULL || bad < 0 ||
			bad >= (long) set.count || !set.bad[bad])
			fail("a member breaking a rule was not refused, or another was named");
		return 0;
	}
	if (status != RS_OK || ring == NULL)
		fail("a valid ring failed to build");
	check_points(ring, &set);
	check_replicas(ring, &r);
	if (flags & 1)
	{
		if (rs_ring_precompute_replicas(ring, 1 + flags % 5) != RS_OK)
			fail("rs_ring_precompute_replicas failed");
		check_replicas(ring, &r);
	}
	if (flags & 2)
		check_allocation(ring, &set, vnodes, &r);
	rs_ring_free(ring);
	return 0;
}

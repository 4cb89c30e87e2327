/*
 * test_zones_tokens.c
 *		Unit tests of zones (docs/routing.md §7), explicit tokens (§8) and
 *		token allocation (rs_ring_alloc.h): every vector of both sections,
 *		the build errors, and properties on random rings checked against
 *		oracles written here from the contract's text:
 *
 *		- replica sets equal a naive two-pass walk, and span min(R, zones)
 *		  zones (with and without a table of replica sets);
 *		- adding a node with allocated tokens moves exactly the keys its
 *		  points capture, and no existing point moves;
 *		- changing a zone moves no owner, and the copy changes and move steps
 *		  predict exactly which sampled keys change replica sets;
 *		- allocation is deterministic, the incremental allocator agrees with
 *		  the one-shot function, and the balance it reaches stays near the
 *		  mean (a loose bound: a broken allocator fails it, a noisy one not).
 */
#include <stdlib.h>

#include "rs_hash.h"
#include "rs_ring.h"
#include "rs_ring_alloc.h"
#include "rs_ring_diff.h"

#include "unit.h"

#define LEN(s) strlen(s)

/* A member with a name, weight 1, and optionally a zone. */
static rs_ring_member
member(const char *name, const char *zone)
{
	rs_ring_member m;

	memset(&m, 0, sizeof(m));
	m.name = name;
	m.name_len = strlen(name);
	m.weight = 1;
	if (zone)
	{
		m.zone = zone;
		m.zone_len = strlen(zone);
	}
	return m;
}

static rs_ring *
build_or_die(const rs_ring_member *members, size_t n, uint32_t vnodes, int options)
{
	rs_ring    *ring = NULL;
	rs_status	status = rs_ring_build(RS_RING_MURMUR3, members, n, vnodes, options, &ring, NULL);

	UNIT_CHECK(status == RS_OK, "build failed: %s", rs_status_text(status));
	if (status != RS_OK)
		exit(unit_report());
	return ring;
}

/* Replica names of a key joined with ", ". */
static const char *
replicas_of(const rs_ring *ring, const char *key, uint32_t want)
{
	static char buf[512];
	uint16_t	out[64];
	uint32_t	count = 0;

	buf[0] = '\0';
	rs_ring_replicas(ring, rs_murmur3_token(key, LEN(key)), want, out, &count);
	for (uint32_t i = 0; i < count; i++)
	{
		if (i > 0)
			strcat(buf, ", ");
		strcat(buf, ring->names[out[i]]);
	}
	return buf;
}

static const char *
owner_of(const rs_ring *ring, const char *key)
{
	return ring->names[rs_ring_owner(ring, rs_murmur3_token(key, LEN(key)))];
}

/* §7: 16 vnodes, two nodes in jakarta and surabaya, one in makassar, one without a zone. */
static void
test_zone_vectors(void)
{
	rs_ring_member m[6];
	rs_ring    *ring;
	rs_ring    *plain;
	static const struct
	{
		const char *key;
		uint64_t	token;
		const char *owner;
		const char *r2;
		const char *r3;
		const char *r5;
	}			v[] = {
		{"3201012345670001", 15884386775397619189ULL, "jkt-2", "jkt-2, sby-1", "jkt-2, sby-1, mks-1",
		"jkt-2, sby-1, mks-1, spare-1, jkt-1"},
		{"3578021122330002", 8811238047343097349ULL, "jkt-1", "jkt-1, spare-1", "jkt-1, spare-1, mks-1",
		"jkt-1, spare-1, mks-1, sby-2, jkt-2"},
		{"7371034455660003", 14745517588873323327ULL, "spare-1", "spare-1, sby-2", "spare-1, sby-2, jkt-1",
		"spare-1, sby-2, jkt-1, mks-1, jkt-2"},
		{"3171059988770004", 7138621039917915904ULL, "sby-1", "sby-1, mks-1", "sby-1, mks-1, spare-1",
		"sby-1, mks-1, spare-1, jkt-1, sby-2"},
		{"key-1", 18316859633611270910ULL, "jkt-2", "jkt-2, sby-2", "jkt-2, sby-2, mks-1",
		"jkt-2, sby-2, mks-1, spare-1, jkt-1"},
		{"key-3", 2277932087057949865ULL, "jkt-2", "jkt-2, sby-1", "jkt-2, sby-1, spare-1",
		"jkt-2, sby-1, spare-1, mks-1, sby-2"},
		{"key-5", 12076830457862200096ULL, "sby-2", "sby-2, spare-1", "sby-2, spare-1, jkt-1",
		"sby-2, spare-1, jkt-1, mks-1, sby-1"},
		{"key-6", 4791607696751962669ULL, "sby-1", "sby-1, jkt-1", "sby-1, jkt-1, mks-1",
		"sby-1, jkt-1, mks-1, spare-1, jkt-2"},
	};

	m[0] = member("jkt-1", "jakarta");
	m[1] = member("jkt-2", "jakarta");
	m[2] = member("sby-1", "surabaya");
	m[3] = member("sby-2", "surabaya");
	m[4] = member("mks-1", "makassar");
	m[5] = member("spare-1", NULL);
	ring = build_or_die(m, 6, 16, 0);
	UNIT_EQ_INT(ring->npoints, 96);
	UNIT_EQ_INT(ring->zoned, 1);
	UNIT_EQ_INT(ring->nzones, 4);
	UNIT_EQ_INT(ring->nnamed_zones, 3);
	UNIT_EQ_STR(ring->zone_names[0], "jakarta");
	UNIT_EQ_STR(ring->zone_names[2], "surabaya");
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
	{
		UNIT_EQ_U64(rs_murmur3_token(v[i].key, LEN(v[i].key)), v[i].token);
		UNIT_EQ_STR(owner_of(ring, v[i].key), v[i].owner);
		UNIT_EQ_STR(replicas_of(ring, v[i].key, 2), v[i].r2);
		UNIT_EQ_STR(replicas_of(ring, v[i].key, 3), v[i].r3);
		UNIT_EQ_STR(replicas_of(ring, v[i].key, 5), v[i].r5);
		UNIT_EQ_STR(replicas_of(ring, v[i].key, 1), v[i].owner);
		/* all six nodes: pass 2 takes the rest in walk order */
		UNIT_CHECK(strncmp(replicas_of(ring, v[i].key, 6), v[i].r5, strlen(v[i].r5)) == 0,
				   "R = 6 extends R = 5");
	}
	/* the table of replica sets answers alike */
	UNIT_EQ_INT(rs_ring_precompute_replicas(ring, 5), RS_OK);
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
	{
		UNIT_EQ_STR(replicas_of(ring, v[i].key, 2), v[i].r2);
		UNIT_EQ_STR(replicas_of(ring, v[i].key, 3), v[i].r3);
		UNIT_EQ_STR(replicas_of(ring, v[i].key, 5), v[i].r5);
	}
	/* zone names of nodes; a node without one has none */
	UNIT_EQ_STR(rs_ring_zone_name(ring, 0), "jakarta");	/* jkt-1 */
	UNIT_CHECK(rs_ring_zone_name(ring, 5) == NULL, "spare-1 has no zone");	/* names sort: ..., spare-1 */

	/* the same ring without zones: two copies in one data centre */
	for (int i = 0; i < 6; i++)
	{
		m[i].zone = NULL;
		m[i].zone_len = 0;
	}
	plain = build_or_die(m, 6, 16, 0);
	UNIT_EQ_INT(plain->zoned, 0);
	UNIT_EQ_STR(replicas_of(plain, "3201012345670001", 3), "jkt-2, sby-1, jkt-1");
	/* zones never change the points or the owners */
	UNIT_EQ_INT(plain->npoints, ring->npoints);
	for (uint32_t p = 0; p < ring->npoints; p++)
		if (rs_ring_token(plain, p) != rs_ring_token(ring, p) ||
			rs_ring_point_owner(plain, p) != rs_ring_point_owner(ring, p))
		{
			UNIT_CHECK(0, "point %u differs with zones", p);
			break;
		}
	rs_ring_free(plain);
	rs_ring_free(ring);
}

/* Copies per zone: with zones every key at R = 3 has one copy per zone at most. */
static void
test_zone_copies(void)
{
	rs_ring_member m[6];
	rs_ring    *ring;
	rs_ring    *plain;
	rs_u128		held[6];
	uint32_t	zmin[6];
	uint32_t	zmax[6];
	rs_u128		total = 0;

	m[0] = member("jkt-1", "jakarta");
	m[1] = member("jkt-2", "jakarta");
	m[2] = member("sby-1", "surabaya");
	m[3] = member("sby-2", "surabaya");
	m[4] = member("mks-1", "makassar");
	m[5] = member("spare-1", NULL);
	ring = build_or_die(m, 6, 16, 0);
	UNIT_EQ_INT(rs_ring_replicated_ownership(ring, 3, held, zmin, zmax), RS_OK);
	for (int n = 0; n < 6; n++)
		total += held[n];
	UNIT_CHECK(total == 3 * ((rs_u128) 1 << 64), "copies sum to R times the ring");
	for (uint32_t z = 0; z < ring->nzones; z++)
		UNIT_CHECK(zmax[z] <= 1, "zone %u holds at most one copy of a key at R = 3", z);
	/* the four zones and R = 3: a key lacks a copy in exactly one of them */
	for (uint32_t z = 0; z < ring->nzones; z++)
		UNIT_EQ_INT(zmin[z], 0);
	/* at R = 5 every zone holds a copy of every key, jakarta and surabaya up to two */
	UNIT_EQ_INT(rs_ring_replicated_ownership(ring, 5, held, zmin, zmax), RS_OK);
	for (uint32_t z = 0; z < ring->nzones; z++)
		UNIT_CHECK(zmin[z] >= 1, "zone %u holds a copy of every key at R = 5", z);
	UNIT_EQ_INT(zmax[0], 2);

	for (int i = 0; i < 6; i++)
		m[i].zone = NULL;
	plain = build_or_die(m, 6, 16, 0);
	UNIT_EQ_INT(rs_ring_replicated_ownership(plain, 3, held, zmin, zmax), RS_OK);
	for (uint32_t z = 0; z < plain->nzones; z++)
		UNIT_CHECK(zmax[z] == 1, "without zones each node (its own zone) holds one copy at most");
	rs_ring_free(plain);
	rs_ring_free(ring);
}

/* §8: a and b with explicit tokens, c labelled (weight 1, V = 4). */
static void
test_token_vectors(void)
{
	/* given out of order: labels are positions in ascending order */
	static const uint64_t a_tokens[] = {13835058055282163712ULL, 4611686018427387904ULL};
	static const uint64_t b_tokens[] = {9223372036854775808ULL};
	static const uint64_t c_points[] = {4344669118157756245ULL, 4412727709028772756ULL,
	11597015718131045905ULL, 14365157503195557672ULL};
	static const struct
	{
		const char *key;
		const char *owner;
		const char *r2;
	}			v[] = {
		{"3201012345670001", "c", "c, a"},
		{"3578021122330002", "b", "b, c"},
		{"3171059988770004", "b", "b, c"},
		{"key-2", "c", "c, a"},
		{"key-3", "c", "c, a"},
		{"key-5", "a", "a, c"},
		{"key-6", "b", "b, c"},
	};
	rs_ring_member m[3];
	rs_ring    *ring;
	int			c_seen = 0;

	m[0] = member("a", NULL);
	m[0].tokens = a_tokens;
	m[0].ntokens = 2;
	m[0].weight = 5;			/* weight does not place explicit tokens */
	m[1] = member("b", NULL);
	m[1].tokens = b_tokens;
	m[1].ntokens = 1;
	m[2] = member("c", NULL);
	ring = build_or_die(m, 3, 4, RS_RING_KEEP_LABELS);
	UNIT_EQ_INT(ring->npoints, 7);
	UNIT_EQ_INT(ring->node_points[0], 2);
	UNIT_EQ_INT(ring->node_points[1], 1);
	UNIT_EQ_INT(ring->node_points[2], 4);
	UNIT_EQ_INT(ring->explicit_tokens[0], 1);
	UNIT_EQ_INT(ring->explicit_tokens[2], 0);
	for (uint32_t p = 0; p < ring->npoints; p++)
	{
		uint32_t	owner = rs_ring_point_owner(ring, p);
		uint64_t	t = rs_ring_token(ring, p);

		if (owner == 0)
			UNIT_EQ_U64(t, a_tokens[1 - ring->labels[p]]);
		else if (owner == 1)
			UNIT_EQ_U64(t, b_tokens[0]);
		else
			UNIT_EQ_U64(t, c_points[c_seen++]);
		if (p > 0)
			UNIT_CHECK(rs_ring_token(ring, p - 1) < t, "points in token order");
	}
	UNIT_EQ_INT(c_seen, 4);
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
	{
		UNIT_EQ_STR(owner_of(ring, v[i].key), v[i].owner);
		UNIT_EQ_STR(replicas_of(ring, v[i].key, 2), v[i].r2);
	}
	rs_ring_free(ring);

	/* ties across nodes sort by node name: b's point first, a's owns nothing */
	{
		static const uint64_t same[] = {1000};
		rs_ring_member t[2];
		rs_ring    *tied;

		t[0] = member("b", NULL);
		t[0].tokens = same;
		t[0].ntokens = 1;
		t[1] = member("a", NULL);
		t[1].tokens = same;
		t[1].ntokens = 1;
		tied = build_or_die(t, 2, 4, 0);
		UNIT_EQ_STR(tied->names[rs_ring_owner(tied, 999)], "a");
		UNIT_EQ_STR(tied->names[rs_ring_owner(tied, 1000)], "a");
		UNIT_EQ_STR(tied->names[rs_ring_owner(tied, 1001)], "a");
		UNIT_CHECK(rs_ring_point_span(tied, 1) == 0, "the second of a tie owns nothing");
		rs_ring_free(tied);
	}
}

/* Bad members are refused with RS_ERR_INVALID and name the member. */
static void
test_errors(void)
{
	static const uint64_t dup[] = {5, 7, 5};
	rs_ring_member m[2];
	rs_ring    *ring = (rs_ring *) 1;
	long		bad = -2;

	m[0] = member("a", NULL);
	m[1] = member("b", "");
	UNIT_EQ_INT(rs_ring_build(RS_RING_MURMUR3, m, 2, 4, 0, &ring, &bad), RS_ERR_INVALID);
	UNIT_CHECK(ring == NULL, "no ring on error");
	UNIT_EQ_INT(bad, 1);

	m[1] = member("b", "z");
	UNIT_EQ_INT(rs_ring_build(RS_RING_KETAMA, m, 2, 4, 0, &ring, &bad), RS_ERR_INVALID);
	UNIT_EQ_INT(bad, 1);

	m[1] = member("b", NULL);
	m[1].tokens = dup;
	m[1].ntokens = 3;
	UNIT_EQ_INT(rs_ring_build(RS_RING_MURMUR3, m, 2, 4, 0, &ring, &bad), RS_ERR_INVALID);
	UNIT_EQ_INT(bad, 1);
	m[1].ntokens = 2;
	UNIT_EQ_INT(rs_ring_build(RS_RING_MURMUR3, m, 2, 4, 0, &ring, &bad), RS_OK);
	rs_ring_free(ring);
	m[1].ntokens = 0;
	UNIT_EQ_INT(rs_ring_build(RS_RING_MURMUR3, m, 2, 4, 0, &ring, &bad), RS_ERR_INVALID);
	m[1].ntokens = 2;
	UNIT_EQ_INT(rs_ring_build(RS_RING_KETAMA, m, 2, 4, 0, &ring, &bad), RS_ERR_INVALID);

	/* allocation: bad arguments */
	{
		rs_ring_member n = member("n", NULL);
		uint64_t	out[4] = {0};

		UNIT_EQ_INT(rs_ring_allocate_tokens(m, 1, 4, 3, &n, 0, out, NULL), RS_ERR_INVALID);
		UNIT_EQ_INT(rs_ring_allocate_tokens(m, 1, 4, 0, &n, 4, out, NULL), RS_ERR_INVALID);
		UNIT_EQ_INT(rs_ring_allocate_tokens(m, 1, 4, 65, &n, 4, out, NULL), RS_ERR_INVALID);
		UNIT_EQ_INT(rs_ring_allocate_tokens(m, 1, 4, 3, &n, RS_RING_MAX_TOKENS + 1, out, NULL), RS_ERR_INVALID);
		n.weight = 0;
		UNIT_EQ_INT(rs_ring_allocate_tokens(m, 1, 4, 3, &n, 4, out, NULL), RS_ERR_INVALID);
		n.weight = 1;
		n.zone = "";
		UNIT_EQ_INT(rs_ring_allocate_tokens(m, 1, 4, 3, &n, 4, out, NULL), RS_ERR_INVALID);
		n.zone = NULL;
		m[1].ntokens = 0;		/* a bad other member is named */
		bad = -2;
		UNIT_EQ_INT(rs_ring_allocate_tokens(m, 2, 4, 3, &n, 4, out, &bad), RS_ERR_INVALID);
		UNIT_EQ_INT(bad, 1);
		UNIT_EQ_U64(out[0], 0);	/* nothing written on error */
	}
}

/* ---- random rings ---- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;

static uint64_t
next_random(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

#define MAX_NODES 40

typedef struct random_ring
{
	char		names[MAX_NODES][16];
	char		zones[MAX_NODES][8];
	uint64_t	tokens[MAX_NODES][24];
	rs_ring_member members[MAX_NODES];
	size_t		n;
	uint32_t	nzones;			/* distinct zones, a node without one its own */
} random_ring;

/* 2..MAX_NODES nodes in up to 5 named zones, some without, some with explicit tokens. */
static void
make_random(random_ring *r)
{
	uint32_t	named = 1 + (uint32_t) (next_random() % 5);
	int			used[5] = {0};

	r->n = 2 + next_random() % (MAX_NODES - 1);
	r->nzones = 0;
	for (size_t i = 0; i < r->n; i++)
	{
		int			kind = (int) (next_random() % 8);

		snprintf(r->names[i], sizeof(r->names[i]), "n%zu", i);
		r->members[i] = member(r->names[i], NULL);
		if (kind < 6)
		{
			uint32_t	z = (uint32_t) (next_random() % named);

			snprintf(r->zones[i], sizeof(r->zones[i]), "z%u", z);
			r->members[i].zone = r->zones[i];
			r->members[i].zone_len = strlen(r->zones[i]);
			if (!used[z]++)
				r->nzones++;
		}
		else
			r->nzones++;
		if (next_random() % 3 == 0)
		{
			uint32_t	k = 1 + (uint32_t) (next_random() % 24);

			for (uint32_t t = 0; t < k; t++)
				r->tokens[i][t] = next_random();
			r->members[i].tokens = r->tokens[i];
			r->members[i].ntokens = k;
		}
		else
			r->members[i].weight = (double) (1 + next_random() % 4) / 2;
	}
}

/* The contract's §7 walk, as written: from the owner's point, pass 1 then pass 2. */
static uint32_t
naive_zoned_replicas(const rs_ring *ring, uint64_t hash, uint32_t want, uint16_t *out)
{
	uint32_t	start = 0;
	uint32_t	found = 0;
	uint32_t	zones_in_set = 0;

	while (start < ring->npoints && rs_ring_token(ring, start) < hash)
		start++;
	if (start == ring->npoints)
		start = 0;
	if (want > ring->nnodes)
		want = ring->nnodes;
	for (uint32_t step = 0; step < ring->npoints && found < want && zones_in_set < ring->nzones; step++)
	{
		uint16_t	node = (uint16_t) rs_ring_point_owner(ring, (start + step) % ring->npoints);
		int			taken = 0;
		int			zone_taken = 0;

		for (uint32_t j = 0; j < found; j++)
		{
			taken |= out[j] == node;
			zone_taken |= rs_ring_zone_of(ring, out[j]) == rs_ring_zone_of(ring, node);
		}
		if (!taken && !zone_taken)
		{
			out[found++] = node;
			zones_in_set++;
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

/* Every replica set is the naive walk's and spans min(R, zones) zones. */
static void
test_random_replica_sets(void)
{
	int			wrong = 0;
	int			spans_wrong = 0;

	for (int round = 0; round < 60; round++)
	{
		random_ring r;
		rs_ring    *ring;

		make_random(&r);
		ring = build_or_die(r.members, r.n, 1 + (uint32_t) (next_random() % 16), 0);
		UNIT_EQ_INT(ring->nzones, r.nzones);
		for (int pass = 0; pass < 2; pass++)
		{
			if (pass == 1 && rs_ring_precompute_replicas(ring, 1 + (uint32_t) (next_random() % 8)) != RS_OK)
				UNIT_CHECK(0, "precompute failed");
			for (int k = 0; k < 200; k++)
			{
				uint64_t	h = k < 3 ? (k == 0 ? 0 : k == 1 ? UINT64_MAX : rs_ring_token(ring, 0)) : next_random();
				uint32_t	want = 1 + (uint32_t) (next_random() % (ring->nnodes + 2));
				uint16_t	got[MAX_NODES + 2];
				uint16_t	expected[MAX_NODES + 2];
				uint32_t	count = 0;
				uint32_t	expected_count = naive_zoned_replicas(ring, h, want, expected);
				uint32_t	zones = 0;
				uint32_t	wanted_zones;

				rs_ring_replicas(ring, h, want, got, &count);
				if (count != expected_count || memcmp(got, expected, count * sizeof(uint16_t)) != 0)
					wrong++;
				for (uint32_t i = 0; i < count; i++)
				{
					int			seen = 0;

					for (uint32_t j = 0; j < i; j++)
						seen |= rs_ring_zone_of(ring, got[j]) == rs_ring_zone_of(ring, got[i]);
					zones += !seen;
				}
				wanted_zones = want < ring->nzones ? want : ring->nzones;
				if (zones != wanted_zones)
					spans_wrong++;
			}
		}
		rs_ring_free(ring);
	}
	UNIT_EQ_INT(wrong, 0);
	UNIT_EQ_INT(spans_wrong, 0);
}

/* Whether t lies in (start, end], wrapping. */
static int
in_range(uint64_t t, uint64_t start, uint64_t end)
{
	if (start < end)
		return t > start && t <= end;
	return t > start || t <= end;
}

/*
 * Adding a node with allocated tokens: existing points stay, every owner
 * move goes to the new node, and the moves cover exactly the ranges its
 * points own in the new ring.
 */
static void
test_allocated_join(void)
{
	int			bad_moves = 0;
	int			moved_points = 0;
	int			sampled_wrong = 0;

	for (int round = 0; round < 30; round++)
	{
		random_ring r;
		rs_ring    *before;
		rs_ring    *after;
		rs_ring_member joined[MAX_NODES + 1];
		uint64_t	tokens[32];
		uint32_t	count = 1 + (uint32_t) (next_random() % 32);
		uint32_t	replicas = 1 + (uint32_t) (next_random() % 4);
		rs_owner_move *moves = NULL;
		size_t		nmoves = 0;
		rs_u128		moved = 0;
		rs_u128		captured = 0;
		uint32_t	newnode = 0;
		rs_status	status;

		make_random(&r);
		before = build_or_die(r.members, r.n, 8, 0);
		memcpy(joined, r.members, r.n * sizeof(rs_ring_member));
		joined[r.n] = member("zz-new", next_random() % 2 ? "z1" : NULL);
		status = rs_ring_allocate_tokens(r.members, r.n, 8, replicas, &joined[r.n], count, tokens, NULL);
		UNIT_CHECK(status == RS_OK, "allocation failed: %s", rs_status_text(status));
		if (status != RS_OK)
		{
			rs_ring_free(before);
			continue;
		}
		for (uint32_t i = 1; i < count; i++)
			UNIT_CHECK(tokens[i - 1] < tokens[i], "tokens ascending and distinct");
		joined[r.n].tokens = tokens;
		joined[r.n].ntokens = count;
		after = build_or_die(joined, r.n + 1, 8, 0);
		newnode = after->nnodes - 1;	/* "zz-new" sorts last */
		UNIT_EQ_STR(after->names[newnode], "zz-new");

		/* existing points unchanged: after's points without the new node's are before's */
		{
			uint32_t	j = 0;

			for (uint32_t p = 0; p < after->npoints; p++)
			{
				if (rs_ring_point_owner(after, p) == newnode)
					continue;
				if (j >= before->npoints || rs_ring_token(after, p) != rs_ring_token(before, j) ||
					strcmp(after->names[rs_ring_point_owner(after, p)],
						   before->names[rs_ring_point_owner(before, j)]) != 0)
					moved_points++;
				j++;
			}
			UNIT_EQ_INT(j, before->npoints);
			for (uint32_t p = 0; p < after->npoints; p++)
				if (rs_ring_point_owner(after, p) == newnode)
				{
					captured += rs_ring_point_span(after, p);
					for (uint32_t q = 0; q < before->npoints; q++)
						if (rs_ring_token(before, q) == rs_ring_token(after, p))
							moved_points++;	/* a token taken twice */
				}
		}

		UNIT_EQ_INT(rs_ring_owner_moves(before, after, &moves, &nmoves), RS_OK);
		for (size_t i = 0; i < nmoves; i++)
		{
			bad_moves += strcmp(moves[i].to_node, "zz-new") != 0;
			moved += moves[i].span;
		}
		UNIT_CHECK(moved == captured, "moves cover exactly the new node's ranges");

		/* sampled keys: the owner changes iff it is the new node now */
		for (int k = 0; k < 300; k++)
		{
			uint64_t	h = next_random();
			const char *old_owner = before->names[rs_ring_owner(before, h)];
			const char *new_owner = after->names[rs_ring_owner(after, h)];
			int			in_move = 0;

			for (size_t i = 0; i < nmoves; i++)
				in_move |= in_range(h, moves[i].range_start, moves[i].range_end);
			if ((strcmp(old_owner, new_owner) != 0) != in_move ||
				(in_move && strcmp(new_owner, "zz-new") != 0))
				sampled_wrong++;
		}
		free(moves);

		/* deterministic: the same ring and arguments give the same tokens */
		{
			uint64_t	again[32];

			UNIT_EQ_INT(rs_ring_allocate_tokens(r.members, r.n, 8, replicas, &joined[r.n], count, again, NULL), RS_OK);
			UNIT_CHECK(memcmp(again, tokens, count * sizeof(uint64_t)) == 0, "allocation is deterministic");
		}
		/* as if the node held no points yet: allocating for a member ignores its points */
		{
			uint64_t	as_member[32];

			UNIT_EQ_INT(rs_ring_allocate_tokens(joined, r.n + 1, 8, replicas, &joined[r.n], count,
												as_member, NULL), RS_OK);
			UNIT_CHECK(memcmp(as_member, tokens, count * sizeof(uint64_t)) == 0,
					   "a member's own points do not count");
		}
		rs_ring_free(before);
		rs_ring_free(after);
	}
	UNIT_EQ_INT(bad_moves, 0);
	UNIT_EQ_INT(moved_points, 0);
	UNIT_EQ_INT(sampled_wrong, 0);
}

/*
 * Changing a zone moves no owner; the move steps and copy changes between
 * the rings say exactly which sampled keys change replica set, and how.
 */
static void
test_zone_change(void)
{
	int			owner_moves = 0;
	int			steps_wrong = 0;
	int			copies_wrong = 0;
	int			changed_keys = 0;

	for (int round = 0; round < 40; round++)
	{
		random_ring r;
		random_ring s;
		rs_ring    *before;
		rs_ring    *after;
		uint32_t	replicas = 2 + (uint32_t) (next_random() % 3);
		size_t		victim;
		rs_owner_move *moves = NULL;
		size_t		nmoves = 0;
		rs_move_step *steps = NULL;
		size_t		nsteps = 0;
		rs_copy_change *changes = NULL;
		size_t		nchanges = 0;

		make_random(&r);
		memcpy(&s, &r, sizeof(r));
		for (size_t i = 0; i < s.n; i++)
		{
			s.members[i].name = s.names[i];
			if (s.members[i].zone)
				s.members[i].zone = s.zones[i];
			if (s.members[i].tokens)
				s.members[i].tokens = s.tokens[i];
		}
		victim = next_random() % s.n;
		switch (next_random() % 3)
		{
			case 0:				/* clear */
				s.members[victim].zone = NULL;
				s.members[victim].zone_len = 0;
				break;
			case 1:				/* another zone */
				snprintf(s.zones[victim], sizeof(s.zones[victim]), "z%u", (unsigned) (next_random() % 6));
				s.members[victim].zone = s.zones[victim];
				s.members[victim].zone_len = strlen(s.zones[victim]);
				break;
			default:			/* a new zone */
				snprintf(s.zones[victim], sizeof(s.zones[victim]), "new");
				s.members[victim].zone = s.zones[victim];
				s.members[victim].zone_len = 3;
				break;
		}
		before = build_or_die(r.members, r.n, 8, 0);
		after = build_or_die(s.members, s.n, 8, 0);
		UNIT_EQ_INT(rs_ring_owner_moves(before, after, &moves, &nmoves), RS_OK);
		owner_moves += (int) nmoves;
		UNIT_EQ_INT(rs_ring_move_steps(before, replicas, after, replicas, &steps, &nsteps), RS_OK);
		UNIT_EQ_INT(rs_ring_copy_changes(before, replicas, after, replicas, &changes, &nchanges), RS_OK);
		for (int k = 0; k < 300; k++)
		{
			uint64_t	h = k < (int) nsteps ? steps[k].range_end : next_random();
			uint16_t	a[8],
						b[8];
			uint32_t	na = 0,
						nb = 0;
			int			same = 1;
			const rs_move_step *hit = NULL;

			rs_ring_replicas(before, h, replicas, a, &na);
			rs_ring_replicas(after, h, replicas, b, &nb);
			for (uint32_t i = 0; i < na; i++)
			{
				int			found = 0;

				for (uint32_t j = 0; j < nb; j++)
					found |= strcmp(before->names[a[i]], after->names[b[j]]) == 0;
				same &= found;
			}
			same &= na == nb;
			changed_keys += !same;
			for (size_t i = 0; i < nsteps; i++)
				if (in_range(h, steps[i].range_start, steps[i].range_end))
					hit = &steps[i];
			if (same != (hit == NULL))
				steps_wrong++;
			else if (hit)
			{
				for (uint32_t i = 0; i < na; i++)
					steps_wrong += strcmp(hit->old_nodes[i], before->names[a[i]]) != 0;
				for (uint32_t i = 0; i < nb; i++)
					steps_wrong += strcmp(hit->new_nodes[i], after->names[b[i]]) != 0;
			}
			/* each node gains (loses) a copy of h iff a copy change says so */
			for (uint32_t n = 0; n < before->nnodes; n++)
			{
				const char *name = before->names[n];
				int			had = 0,
							has = 0,
							gains = 0,
							loses = 0;

				for (uint32_t i = 0; i < na; i++)
					had |= strcmp(before->names[a[i]], name) == 0;
				for (uint32_t i = 0; i < nb; i++)
					has |= strcmp(after->names[b[i]], name) == 0;
				for (size_t i = 0; i < nchanges; i++)
					if (strcmp(changes[i].node, name) == 0 &&
						in_range(h, changes[i].range_start, changes[i].range_end))
					{
						gains |= changes[i].gains;
						loses |= !changes[i].gains;
					}
				if (gains != (has && !had) || loses != (had && !has))
					copies_wrong++;
			}
		}
		free(moves);
		free(steps);
		free(changes);
		rs_ring_free(before);
		rs_ring_free(after);
	}
	UNIT_EQ_INT(owner_moves, 0);
	UNIT_EQ_INT(steps_wrong, 0);
	UNIT_EQ_INT(copies_wrong, 0);
	UNIT_CHECK(changed_keys > 0, "some zone changes changed replica sets (%d keys)", changed_keys);
}

/*
 * The incremental allocator chooses what the one-shot function chooses, and
 * a ring grown to 60 nodes by allocation stays balanced: owned and copies
 * within 10 % and 15 % of the mean (256 random vnodes give about 1.1 at this
 * size; a broken allocator, many times that).
 */
static void
test_allocator_growth(void)
{
	for (uint32_t replicas = 1; replicas <= 3; replicas++)
	{
		rs_token_allocator *allocator = NULL;
		static rs_ring_member members[60];
		static char names[60][16];
		static uint64_t tokens[60][16];
		int			differs = 0;
		rs_ring    *ring;
		rs_u128		owned[60];
		rs_u128		held[60];
		double		max_owned = 0,
					max_held = 0;

		UNIT_EQ_INT(rs_token_allocator_create(replicas, &allocator), RS_OK);
		for (int i = 0; i < 60; i++)
		{
			uint64_t	one_shot[16];

			snprintf(names[i], sizeof(names[i]), "node-%d", i);
			members[i] = member(names[i], NULL);
			UNIT_EQ_INT(rs_token_allocator_add(allocator, &members[i], 16, tokens[i]), RS_OK);
			UNIT_EQ_INT(rs_ring_allocate_tokens(members, (size_t) i, 256, replicas, &members[i], 16,
												one_shot, NULL), RS_OK);
			differs += memcmp(one_shot, tokens[i], sizeof(one_shot)) != 0;
			members[i].tokens = tokens[i];
			members[i].ntokens = 16;
		}
		UNIT_EQ_INT(differs, 0);
		rs_token_allocator_free(allocator);

		ring = build_or_die(members, 60, 256, 0);
		rs_ring_ownership(ring, owned);
		UNIT_EQ_INT(rs_ring_replicated_ownership(ring, replicas, held, NULL, NULL), RS_OK);
		for (int n = 0; n < 60; n++)
		{
			double		o = (double) owned[n] * 60 / 18446744073709551616.0;
			double		h = (double) held[n] * 60 / (18446744073709551616.0 * replicas);

			if (o > max_owned)
				max_owned = o;
			if (h > max_held)
				max_held = h;
		}
		UNIT_CHECK(max_owned < 1.10, "R = %u: most owned %.3f of the mean", replicas, max_owned);
		UNIT_CHECK(max_held < 1.15, "R = %u: most copies %.3f of the mean", replicas, max_held);
		rs_ring_free(ring);
	}
}

/* Allocation with zones: the new node's zone is taken into account, weights too. */
static void
test_allocation_zones_weights(void)
{
	rs_ring_member m[7];
	uint64_t	tokens[6][16];
	const char *zones[6] = {"a", "a", "b", "b", "c", "c"};
	static char names[7][8];
	rs_ring    *ring;
	rs_u128		held[7];
	uint32_t	zmin[8],
				zmax[8];

	for (int i = 0; i < 6; i++)
	{
		snprintf(names[i], sizeof(names[i]), "n%d", i);
		m[i] = member(names[i], zones[i]);
		UNIT_EQ_INT(rs_ring_allocate_tokens(m, (size_t) i, 16, 3, &m[i], 16, tokens[i], NULL), RS_OK);
		m[i].tokens = tokens[i];
		m[i].ntokens = 16;
	}
	ring = build_or_die(m, 6, 16, 0);
	UNIT_EQ_INT(rs_ring_replicated_ownership(ring, 3, held, zmin, zmax), RS_OK);
	/* three zones, R = 3: every key has exactly one copy in each */
	for (uint32_t z = 0; z < ring->nzones; z++)
	{
		UNIT_EQ_INT(zmin[z], 1);
		UNIT_EQ_INT(zmax[z], 1);
	}
	for (int n = 0; n < 6; n++)
	{
		double		share = (double) held[n] / (3 * 18446744073709551616.0);

		UNIT_CHECK(share > 0.12 && share < 0.21, "node %d holds %.3f of the copies (1/6 ideal)", n, share);
	}
	rs_ring_free(ring);

	/* a node of weight 2 gets about twice the share with the same token count */
	{
		uint64_t	heavy[16];
		rs_u128		owned[7];

		snprintf(names[6], sizeof(names[6]), "n6");
		m[6] = member(names[6], NULL);
		m[6].weight = 2;
		for (int i = 0; i < 6; i++)
			m[i].zone = NULL;
		UNIT_EQ_INT(rs_ring_allocate_tokens(m, 6, 16, 1, &m[6], 16, heavy, NULL), RS_OK);
		m[6].tokens = heavy;
		m[6].ntokens = 16;
		ring = build_or_die(m, 7, 16, 0);
		rs_ring_ownership(ring, owned);
		UNIT_CHECK((double) owned[6] / 18446744073709551616.0 > 0.2,
				   "the heavy node owns %.3f (ideal 2/8)", (double) owned[6] / 18446744073709551616.0);
		rs_ring_free(ring);
	}
}

/* A node alone gets evenly spaced tokens; one more node fills the gaps. */
static void
test_first_nodes(void)
{
	rs_ring_member m[2];
	uint64_t	t[4];
	uint64_t	u[4];

	m[0] = member("only", NULL);
	UNIT_EQ_INT(rs_ring_allocate_tokens(NULL, 0, 256, 3, &m[0], 4, t, NULL), RS_OK);
	for (int i = 1; i < 4; i++)
		UNIT_EQ_U64(t[i] - t[i - 1], (uint64_t) 1 << 62);
	m[0].tokens = t;
	m[0].ntokens = 4;
	m[1] = member("second", NULL);
	UNIT_EQ_INT(rs_ring_allocate_tokens(m, 1, 256, 1, &m[1], 4, u, NULL), RS_OK);
	/* one token of the second node inside each gap of the first */
	for (int i = 0; i < 4; i++)
	{
		int			inside = 0;

		for (int j = 0; j < 4; j++)
			inside += in_range(u[j], t[i], t[(i + 1) % 4]);
		UNIT_EQ_INT(inside, 1);
	}
}


/*
 * Interoperability claims of docs/routing.md: a model of Cassandra's rules
 * written here from the interop table's words (the x64_128 h1 with tail
 * bytes sign-extended, signed token order with the minimum excluded, a token
 * owning the range from its predecessor, NetworkTopologyStrategy's one pass
 * that accepts R - racks rack repeats in walk order).  Checked: tokens agree
 * for ASCII keys and not always otherwise; with the same tokens (as signed
 * numbers) every owner agrees; replica sets agree as sets with zones as
 * racks, and in order when R <= zones.
 */
static uint64_t
rotl64(uint64_t x, int r)
{
	return (x << r) | (x >> (64 - r));
}

static uint64_t
fmix64(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdULL;
	k ^= k >> 33;
	k *= 0xc4ceb9fe1a85ec53ULL;
	k ^= k >> 33;
	return k;
}

/* h1 of MurmurHash3_x64_128, seed 0; sign_extend: tail bytes as signed bytes. */
static uint64_t
murmur_h1(const unsigned char *data, size_t len, int sign_extend)
{
	const uint64_t c1 = 0x87c37b91114253d5ULL;
	const uint64_t c2 = 0x4cf5ad432745937fULL;
	uint64_t	h1 = 0,
				h2 = 0,
				k1 = 0,
				k2 = 0;
	size_t		nblocks = len / 16;
	const unsigned char *tail = data + nblocks * 16;

	for (size_t i = 0; i < nblocks; i++)
	{
		uint64_t	a = 0,
					b = 0;

		for (int j = 7; j >= 0; j--)
		{
			a = (a << 8) | data[i * 16 + j];
			b = (b << 8) | data[i * 16 + 8 + j];
		}
		a *= c1; a = rotl64(a, 31); a *= c2; h1 ^= a;
		h1 = rotl64(h1, 27); h1 += h2; h1 = h1 * 5 + 0x52dce729;
		b *= c2; b = rotl64(b, 33); b *= c1; h2 ^= b;
		h2 = rotl64(h2, 31); h2 += h1; h2 = h2 * 5 + 0x38495ab5;
	}
	for (size_t j = len & 15; j > 0; j--)
	{
		uint64_t	byte = sign_extend ? (uint64_t) (int64_t) (signed char) tail[j - 1] : tail[j - 1];

		if (j > 8)
			k2 ^= byte << (8 * (j - 9));
		else
			k1 ^= byte << (8 * (j - 1));
	}
	if ((len & 15) > 8)
	{
		k2 *= c2; k2 = rotl64(k2, 33); k2 *= c1; h2 ^= k2;
	}
	if ((len & 15) > 0)
	{
		k1 *= c1; k1 = rotl64(k1, 31); k1 *= c2; h1 ^= k1;
	}
	h1 ^= len; h2 ^= len;
	h1 += h2; h2 += h1;
	h1 = fmix64(h1); h2 = fmix64(h2);
	h1 += h2;
	return h1;
}

/* Cassandra's token of a key: signed, the minimum excluded. */
static int64_t
cassandra_token(const char *key)
{
	int64_t		t = (int64_t) murmur_h1((const unsigned char *) key, strlen(key), 1);

	return t == INT64_MIN ? INT64_MAX : t;
}

static void
test_interop_models(void)
{
	int			ascii_differ = 0;
	int			high_differ = 0;
	int			owners_differ = 0;
	int			sets_differ = 0;
	int			order_differs_small_r = 0;
	char		key[32];

	/* our own h1 model agrees with the core on the contract's vectors */
	UNIT_EQ_U64(murmur_h1((const unsigned char *) "3201012345670001", 16, 0), 15884386775397619189ULL);
	UNIT_EQ_U64(murmur_h1((const unsigned char *) "\xc3\xb1" "and\xc3\xba", 7, 0), 9900926414339375407ULL);
	for (int i = 0; i < 5000; i++)
	{
		snprintf(key, sizeof(key), "user-%d", i);
		ascii_differ += (uint64_t) cassandra_token(key) != rs_murmur3_token(key, strlen(key));
	}
	UNIT_EQ_INT(ascii_differ, 0);
	/* a high byte in the tail: the variants part */
	for (int i = 0; i < 100; i++)
	{
		snprintf(key, sizeof(key), "k%d\xc3\xb1", i);
		high_differ += (uint64_t) cassandra_token(key) != rs_murmur3_token(key, strlen(key));
	}
	UNIT_CHECK(high_differ > 90, "tail bytes >= 0x80 change the token (%d of 100)", high_differ);

	for (int round = 0; round < 20; round++)
	{
		random_ring r;
		rs_ring    *ring;
		int64_t    *signed_tokens;
		uint32_t   *order;

		make_random(&r);
		ring = build_or_die(r.members, r.n, 1 + (uint32_t) (next_random() % 8), 0);
		/* the same points in signed order (a rotation of the ring's order) */
		signed_tokens = malloc(ring->npoints * sizeof(int64_t));
		order = malloc(ring->npoints * sizeof(uint32_t));
		{
			uint32_t	first_negative = 0;

			while (first_negative < ring->npoints && rs_ring_token(ring, first_negative) < (UINT64_C(1) << 63))
				first_negative++;
			for (uint32_t i = 0; i < ring->npoints; i++)
			{
				order[i] = (first_negative + i) % ring->npoints;
				signed_tokens[i] = (int64_t) rs_ring_token(ring, order[i]);
			}
		}
		for (int k = 0; k < 300; k++)
		{
			int64_t		t = (int64_t) next_random();
			uint32_t	p = 0;
			uint32_t	want = 1 + (uint32_t) (next_random() % 5);
			uint16_t	ours[64];
			uint32_t	nours = 0;
			uint16_t	theirs[64];
			uint32_t	ntheirs = 0;
			uint32_t	zones_seen[64];
			uint32_t	nzones_seen = 0;
			int			repeats;
			uint32_t	target;

			while (p < ring->npoints && signed_tokens[p] < t)
				p++;
			if (p == ring->npoints)
				p = 0;
			if (rs_ring_point_owner(ring, order[p]) != rs_ring_owner(ring, (uint64_t) t))
				owners_differ++;

			/* NetworkTopologyStrategy, one data centre, zones as racks */
			target = want < ring->nnodes ? want : ring->nnodes;
			repeats = (int) want - (int) ring->nzones;
			for (uint32_t step = 0; step < ring->npoints && ntheirs < target; step++)
			{
				uint16_t	node = (uint16_t) rs_ring_point_owner(ring, order[(p + step) % ring->npoints]);
				uint32_t	zone = rs_ring_zone_of(ring, node);
				int			new_zone = 1;
				int			taken = 0;

				for (uint32_t j = 0; j < nzones_seen; j++)
					new_zone &= zones_seen[j] != zone;
				for (uint32_t j = 0; j < ntheirs; j++)
					taken |= theirs[j] == node;
				if (new_zone)
				{
					zones_seen[nzones_seen++] = zone;
					theirs[ntheirs++] = node;
				}
				else if (repeats > 0 && !taken)
				{
					theirs[ntheirs++] = node;
					repeats--;
				}
			}
			rs_ring_replicas(ring, (uint64_t) t, want, ours, &nours);
			if (nours != ntheirs || ours[0] != theirs[0])
				sets_differ++;
			else
				for (uint32_t i = 0; i < nours; i++)
				{
					int			found = 0;

					for (uint32_t j = 0; j < ntheirs; j++)
						found |= ours[i] == theirs[j];
					sets_differ += !found;
				}
			if (want <= ring->nzones && memcmp(ours, theirs, nours * sizeof(uint16_t)) != 0)
				order_differs_small_r++;
		}
		free(signed_tokens);
		free(order);
		rs_ring_free(ring);
	}
	UNIT_EQ_INT(owners_differ, 0);
	UNIT_EQ_INT(sets_differ, 0);
	UNIT_EQ_INT(order_differs_small_r, 0);
}

int
main(void)
{
	test_zone_vectors();
	test_zone_copies();
	test_token_vectors();
	test_errors();
	test_random_replica_sets();
	test_allocated_join();
	test_zone_change();
	test_allocator_growth();
	test_allocation_zones_weights();
	test_first_nodes();
	test_interop_models();
	return unit_report();
}

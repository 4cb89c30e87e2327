/*
 * fuzz_ring_lookup.c
 *		Differential libFuzzer target for ring lookups (rs_ring.h) and owner
 *		moves between rings (rs_ring_diff.h).
 *
 * The input bytes describe a small ring: murmur3 (1-20 members, 1-64 vnodes
 * per unit weight, fewer when the ring would pass POINT_BUDGET points) or
 * ketama (1-4 members, ~160 points each), members with names and weights
 * (1/8 .. 4).  The target then checks, against slow and obvious oracles
 * written here from docs/routing.md:
 *
 *	- the built ring: node order, point counts per node, sorted points with
 *	  the contract's tie order, and (when labels are kept) points' tokens
 *	  recomputed from their labels with libmurmurhash / OpenSSL MD5;
 *	- rs_ring_find_point and rs_ring_owner against a linear scan (first
 *	  token >= hash, wrapping to point 0), for 0, the top of the token
 *	  space, every sampled point token and its +-1 neighbours, and hashes
 *	  taken from the input;
 *	- rs_ring_replicas against a naive clockwise walk collecting distinct
 *	  nodes from the owner's point, for replica counts 0 .. nnodes + 2
 *	  (so both the small-set scan and the seen-map path run);
 *	- rs_ring_owner_moves between the ring and a second ring derived from
 *	  the input (a node added, removed, reweighted, other vnodes, or fresh
 *	  members): ranges sorted and merged, spans exact, and for every sampled
 *	  hash the owner changes iff the hash lies in exactly one reported range
 *	  whose from/to are the old and new owners.
 * Any disagreement aborts.
 *
 * Hashes are kept inside the ring's token space (ketama: 32 bits), which is
 * all rs_ring_key_hash can produce.  Build with -DFUZZ_OUT_OF_SPACE_HASHES
 * to also look up 64-bit hashes in ketama rings: rs_ring_find_point does
 * not check that a hash is inside the space, and a ketama hash >= 2^32
 * indexes past the end of the bucket table (off by default for that reason;
 * the expected answer is point 0, as no token is >= such a hash).
 *
 * Build and run, e.g.:
 *	clang -g -O1 -fsanitize=fuzzer,address,undefined -Isrc/core \
 *		test/fuzz/fuzz_ring_lookup.c src/core/rs_*.c \
 *		-lmurmurhash -lyaml -lcrypto -lm -o /tmp/fuzz_ring_lookup
 *	/tmp/fuzz_ring_lookup -runs=200000 test/fuzz/corpus/ring_lookup
 */
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <murmurhash.h>
#include <openssl/evp.h>

#include "rs_ring.h"
#include "rs_ring_diff.h"

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * The oracles and checks loop over every point; leaving them out of the
 * coverage instrumentation keeps the target fast and the feedback about the
 * code under test.
 */
#define ORACLE __attribute__((no_sanitize("coverage")))

#define MAX_MEMBERS 20
#define MAX_NAME 8
#define MAX_SAMPLED_POINTS 16
#define MAX_KETAMA_MEMBERS 4	/* libketama gives a node ~160 points */
#define POINT_BUDGET 384		/* murmur3 rings are kept about this small */
#define MAX_INPUT_HASHES 16

/* Stop loudly, naming the invariant that broke. */
static void
fail(const char *why)
{
	fprintf(stderr, "fuzz_ring_lookup: %s\n", why);
	abort();
}

/* ---- reading the input ---- */

typedef struct reader
{
	const uint8_t *data;
	size_t		size;
	size_t		pos;
} reader;

/* The next byte, or 0 once the input is used up. */
static uint8_t
next_byte(reader *r)
{
	return r->pos < r->size ? r->data[r->pos++] : 0;
}

/* The next 8 bytes, little-endian, zero-filled. */
static uint64_t
next_u64(reader *r)
{
	uint64_t	v = 0;

	for (int i = 0; i < 8; i++)
		v |= (uint64_t) next_byte(r) << (8 * i);
	return v;
}

/* Name alphabet: no NUL (names compare with strcmp in the diff), high bytes included. */
static const char alphabet[] = "abcxyz019-:#.\x7f\x80\xc3\xff";

typedef struct member_set
{
	char		names[MAX_MEMBERS][MAX_NAME + 1];
	rs_ring_member members[MAX_MEMBERS];
	size_t		count;
} member_set;

/*
 * A weight: 1/8 .. 4 in steps of 1/8, so that sums are exact in any order;
 * mostly at most 2, which keeps rings (and runs) small.
 */
static double
read_weight(reader *r)
{
	uint8_t		b = next_byte(r);

	return (double) (1 + (b < 224 ? b % 16 : b % 32)) / 8.0;
}

/* Append a member with a name and weight drawn from the input. */
static void
read_member(reader *r, member_set *set)
{
	size_t		i = set->count;
	size_t		len = 1 + next_byte(r) % MAX_NAME;

	for (size_t k = 0; k < len; k++)
		set->names[i][k] = alphabet[next_byte(r) % (sizeof(alphabet) - 1)];
	set->names[i][len] = '\0';
	memset(&set->members[i], 0, sizeof(set->members[i]));
	set->members[i].name = set->names[i];
	set->members[i].name_len = len;
	set->members[i].weight = read_weight(r);
	set->count++;
}

/* Copy a member set (the names move with it). */
static void
copy_set(member_set *dst, const member_set *src)
{
	memcpy(dst->names, src->names, sizeof(dst->names));
	dst->count = src->count;
	for (size_t i = 0; i < src->count; i++)
	{
		dst->members[i] = src->members[i];
		dst->members[i].name = dst->names[i];
	}
}

/* Whether two members have the same name bytes. */
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

/* ---- oracles ---- */

/* Bytewise name order, a proper prefix first. */
ORACLE static int
name_order(const char *a, size_t alen, const char *b, size_t blen)
{
	size_t		n = alen < blen ? alen : blen;
	int			c = memcmp(a, b, n);

	if (c != 0)
		return c;
	return alen < blen ? -1 : alen > blen;
}

/* The contract's point count for one member. */
static uint64_t
expected_points(rs_ring_algorithm algorithm, uint32_t vnodes, double weight,
				double total_weight, uint32_t nmembers)
{
	if (algorithm == RS_RING_MURMUR3)
	{
		double		exact = round((double) vnodes * weight);

		return exact < 1 ? 1 : (uint64_t) exact;
	}
	else
	{
		float		pct = (float) weight / (float) total_weight;

		return (uint64_t) floorf((float) (pct * 40.0 * (float) nmembers)) * 4;
	}
}

/* The token of a point from its label, with the hash libraries directly. */
ORACLE static uint64_t
label_token(rs_ring_algorithm algorithm, const char *name, uint32_t label)
{
	char		buf[MAX_NAME + 32];
	int			len;

	if (algorithm == RS_RING_MURMUR3)
	{
		uint64_t	out[2];

		len = snprintf(buf, sizeof(buf), "%s#vnode#%" PRIu32, name, label);
		lmmh_x64_128(buf, (unsigned int) len, 0, out);
		return out[0];
	}
	else
	{
		unsigned char d[EVP_MAX_MD_SIZE];
		unsigned int dlen = 0;
		uint32_t	h = label % 4;

		len = snprintf(buf, sizeof(buf), "%s-%" PRIu32, name, label / 4);
		if (EVP_Digest(buf, (size_t) len, d, &dlen, EVP_md5(), NULL) != 1 || dlen != 16)
			fail("MD5 failed in the oracle");
		return (uint64_t) d[4 * h] | (uint64_t) d[4 * h + 1] << 8 |
			(uint64_t) d[4 * h + 2] << 16 | (uint64_t) d[4 * h + 3] << 24;
	}
}

/* The ring as built must be exactly what the contract describes. */
ORACLE static void
check_ring_shape(const rs_ring *ring, rs_ring_algorithm algorithm, uint32_t vnodes,
				 const member_set *set, int labels_kept)
{
	double		total_weight = 0;
	uint64_t	total_points = 0;
	uint32_t	counted[MAX_MEMBERS] = {0};

	if (ring->algorithm != algorithm || ring->nnodes != set->count)
		fail("ring header differs from its members");
	for (size_t i = 0; i < set->count; i++)
		total_weight += set->members[i].weight;

	for (uint32_t n = 0; n < ring->nnodes; n++)
	{
		const rs_ring_member *m = NULL;
		uint64_t	want;

		if (strlen(ring->names[n]) != ring->name_lens[n])
			fail("name length wrong");
		if (n > 0 && name_order(ring->names[n - 1], ring->name_lens[n - 1],
								ring->names[n], ring->name_lens[n]) >= 0)
			fail("node names not in strict bytewise order");
		for (size_t i = 0; i < set->count; i++)
			if (set->members[i].name_len == ring->name_lens[n] &&
				memcmp(set->members[i].name, ring->names[n], ring->name_lens[n]) == 0)
				m = &set->members[i];
		if (m == NULL)
			fail("ring node is not a member");
		if (ring->weights[n] != m->weight)
			fail("ring weight differs from the member's");
		want = expected_points(algorithm, vnodes, m->weight, total_weight,
							   (uint32_t) set->count);
		if (ring->node_points[n] != want)
			fail("point count of a node differs from the contract");
		total_points += want;
	}
	if (ring->npoints != total_points)
		fail("total point count differs from the contract");

	for (uint32_t p = 0; p < ring->npoints; p++)
	{
		if (rs_ring_point_owner(ring, p) >= ring->nnodes)
			fail("owner index out of range");
		counted[rs_ring_point_owner(ring, p)]++;
		if (algorithm == RS_RING_KETAMA && rs_ring_token(ring, p) > UINT32_MAX)
			fail("ketama token outside 32 bits");
		if (p > 0)
		{
			const uint64_t a = rs_ring_token(ring, p - 1);
			const uint64_t b = rs_ring_token(ring, p);

			if (a > b)
				fail("tokens not sorted");
			if (a == b)
			{
				if (rs_ring_point_owner(ring, p - 1) > rs_ring_point_owner(ring, p))
					fail("tied tokens not ordered by node name");
				if (labels_kept && rs_ring_point_owner(ring, p - 1) == rs_ring_point_owner(ring, p) &&
					ring->labels[p - 1] >= ring->labels[p])
					fail("tied tokens of one node not ordered by label");
			}
		}
		if (labels_kept)
		{
			if (ring->labels[p] >= ring->node_points[rs_ring_point_owner(ring, p)])
				fail("label index out of range");
			/* hashing is slow: every point of a small ring, ~64 of a larger one */
			if (p % (1 + ring->npoints / 64) == 0 &&
				label_token(algorithm, ring->names[rs_ring_point_owner(ring, p)], ring->labels[p]) !=
				rs_ring_token(ring, p))
				fail("point token is not the hash of its label");
		}
	}
	for (uint32_t n = 0; n < ring->nnodes; n++)
		if (counted[n] != ring->node_points[n])
			fail("node_points disagrees with the owners array");
}

/* First point whose token is >= hash, wrapping to 0: a linear scan. */
ORACLE static uint32_t
naive_find(const rs_ring *ring, uint64_t hash)
{
	for (uint32_t p = 0; p < ring->npoints; p++)
		if (rs_ring_token(ring, p) >= hash)
			return p;
	return 0;
}

/* The same answer by a plain lower-bound binary search (for bulk checks). */
ORACLE static uint32_t
bsearch_find(const rs_ring *ring, uint64_t hash)
{
	uint32_t	lo = 0;
	uint32_t	hi = ring->npoints;

	while (lo < hi)
	{
		uint32_t	mid = lo + (hi - lo) / 2;

		if (rs_ring_token(ring, mid) < hash)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo == ring->npoints ? 0 : lo;
}

/* Distinct nodes clockwise from the owner's point (start), at most want of them. */
ORACLE static uint32_t
naive_replicas(const rs_ring *ring, uint32_t start, uint32_t want, uint16_t *out)
{
	uint32_t	found = 0;

	for (uint32_t step = 0; step < ring->npoints && found < want; step++)
	{
		uint16_t	node = rs_ring_point_owner(ring, (start + step) % ring->npoints);
		int			taken = 0;

		for (uint32_t j = 0; j < found; j++)
			if (out[j] == node)
				taken = 1;
		if (!taken)
			out[found++] = node;
	}
	return found;
}

/* ---- the hashes to look up ---- */

typedef struct hash_list
{
	uint64_t	items[2 * (8 + 3 * (MAX_SAMPLED_POINTS + 2) + MAX_INPUT_HASHES)];
	size_t		count;
} hash_list;

static void
add_hash(hash_list *list, uint64_t h)
{
	if (list->count < sizeof(list->items) / sizeof(list->items[0]))
		list->items[list->count++] = h;
}

/* A point token and its neighbours, kept inside the space (mask). */
static void
add_with_neighbours(hash_list *list, uint64_t t, uint64_t mask)
{
	add_hash(list, t);
	add_hash(list, (t - 1) & mask);
	add_hash(list, (t + 1) & mask);
}

static void
collect_hashes(reader *r, const rs_ring *ring, uint64_t mask, hash_list *list)
{
	size_t		npoints_sampled = next_byte(r) % (MAX_SAMPLED_POINTS + 1);
	size_t		ninput = next_byte(r) % (MAX_INPUT_HASHES + 1);

	list->count = 0;
	add_hash(list, 0);
	add_hash(list, 1);
	add_hash(list, mask);		/* UINT64_MAX, or UINT32_MAX for ketama */
	add_hash(list, mask - 1);
	add_hash(list, mask >> 1);
	add_hash(list, (mask >> 1) + 1);
#ifdef FUZZ_OUT_OF_SPACE_HASHES
	add_hash(list, UINT64_MAX);
	add_hash(list, (uint64_t) UINT32_MAX + 1);
#endif
	add_with_neighbours(list, rs_ring_token(ring, 0), mask);
	add_with_neighbours(list, rs_ring_token(ring, ring->npoints - 1), mask);
	for (size_t i = 0; i < npoints_sampled; i++)
	{
		uint32_t	p = (uint32_t) (((uint32_t) next_byte(r) << 8 | next_byte(r)) % ring->npoints);

		add_with_neighbours(list, rs_ring_token(ring, p), mask);

		/*
		 * The same top 48 bits as the point, other low bits: the murmur3
		 * lookup's hand-over to the exact search (for ketama, whose tokens
		 * are stored shifted up, a hash near the point).
		 */
		add_hash(list, ((rs_ring_token(ring, p) & ~(mask >> 16 & 0xFFFF)) |
						(((uint64_t) next_byte(r) << 8 | next_byte(r)) & (mask >> 16 & 0xFFFF))) & mask);
	}
	for (size_t i = 0; i < ninput; i++)
		add_hash(list, next_u64(r) & mask);
}

/* ---- the checks ---- */

ORACLE static void
check_lookups(const rs_ring *ring, const hash_list *list, reader *r)
{
	uint16_t	got[MAX_MEMBERS + 4];
	uint16_t	want_nodes[MAX_MEMBERS + 4];

	for (size_t i = 0; i < list->count; i++)
	{
		uint64_t	h = list->items[i];
		uint32_t	point = rs_ring_find_point(ring, h);
		uint32_t	expected = naive_find(ring, h);
		uint32_t	want;
		uint32_t	count = 12345;
		uint32_t	naive_count;

		if (point != expected)
		{
			fprintf(stderr, "hash %" PRIu64 ": point %u, linear scan %u\n", h, point, expected);
			fail("rs_ring_find_point disagrees with a linear scan");
		}
		if (rs_ring_owner(ring, h) != rs_ring_point_owner(ring, point))
			fail("rs_ring_owner disagrees with rs_ring_find_point");

		want = next_byte(r) % (ring->nnodes + 3);
		if (i == 0)
			want = ring->nnodes + 2;	/* always once past the node count */
		memset(got, 0xAB, sizeof(got));
		if (rs_ring_replicas(ring, h, want, got, &count) != RS_OK)
			fail("rs_ring_replicas failed");
		naive_count = naive_replicas(ring, expected, want, want_nodes);
		if (count != naive_count)
			fail("replica count differs from a naive walk");
		if (memcmp(got, want_nodes, count * sizeof(uint16_t)) != 0)
			fail("replica set differs from a naive walk");
		if (want > 0 && count > 0 && got[0] != rs_ring_point_owner(ring, point))
			fail("replica set does not start with the owner");
	}
}

/* Whether t lies in (start, end], wrapping; start == end is the whole ring. */
ORACLE static int
in_range(uint64_t t, uint64_t start, uint64_t end)
{
	if (start < end)
		return t > start && t <= end;
	return t > start || t <= end;
}

/* Tokens in (start, end] in a space of this size. */
ORACLE static rs_u128
span_of(uint64_t start, uint64_t end, rs_u128 space)
{
	if (start < end)
		return (rs_u128) (end - start);
	return space - start + end;
}

ORACLE static void
check_moves(const rs_ring *a, const rs_ring *b, const hash_list *list, uint64_t mask,
			int sample_points)
{
	rs_owner_move *moves = NULL;
	size_t		nmoves = 0;
	rs_u128		space = rs_ring_space(a);
	rs_u128		total = 0;

	if (rs_ring_owner_moves(a, b, &moves, &nmoves) != RS_OK)
		fail("rs_ring_owner_moves failed");

	for (size_t i = 0; i < nmoves; i++)
	{
		const rs_owner_move *m = &moves[i];

		if (strcmp(m->from_node, m->to_node) == 0)
			fail("a move from a node to itself");
		if (m->range_start > mask || m->range_end > mask)
			fail("move range outside the token space");
		if (m->span != span_of(m->range_start, m->range_end, space))
			fail("move span differs from its range");
		if (i > 0 && moves[i - 1].range_end >= m->range_end)
			fail("moves not in token order");
		if (i > 0 && m->range_start < moves[i - 1].range_end)
			fail("moves overlap");
		if (i > 0 && m->range_start == moves[i - 1].range_end &&
			strcmp(m->from_node, moves[i - 1].from_node) == 0 &&
			strcmp(m->to_node, moves[i - 1].to_node) == 0)
			fail("adjacent moves with the same nodes not merged");
		total += m->span;
	}
	if (nmoves > 1 && moves[nmoves - 1].range_end == moves[0].range_start &&
		strcmp(moves[nmoves - 1].from_node, moves[0].from_node) == 0 &&
		strcmp(moves[nmoves - 1].to_node, moves[0].to_node) == 0)
		fail("moves touching across the wrap not merged");
	if (total > space)
		fail("moves cover more than the ring");

	if (nmoves > 0 && moves[0].range_start == moves[0].range_end && nmoves != 1)
		fail("a move covering the whole ring is not alone");
	if (nmoves > 1 && moves[0].range_start > moves[0].range_end &&
		moves[nmoves - 1].range_end > moves[0].range_start)
		fail("the wrapping move overlaps the last one");

	/*
	 * Sampled hashes: the list, and points of both rings with their +-1
	 * neighbours (every point of a small ring, about 64 of a larger one).
	 */
	for (int pass = 0; pass < (sample_points ? 3 : 1); pass++)
	{
		const rs_ring *source = pass == 1 ? a : b;
		size_t		stride = pass == 0 ? 1 : 1 + source->npoints / 64;
		size_t		n = pass == 0 ? list->count : 3 * (size_t) source->npoints;

		for (size_t k = 0; k < n; k += (k % 3 == 2) ? 3 * (stride - 1) + 1 : 1)
		{
			uint64_t	h;
			const char *old_owner;
			const char *new_owner;
			size_t		hits = 0;
			const rs_owner_move *hit = NULL;
			size_t		candidates[3];
			size_t		lo = 0,
						hi = nmoves;

			if (pass == 0)
				h = list->items[k];
			else
				h = (rs_ring_token(source, k / 3) + (uint64_t) (k % 3) - 1) & mask;
			old_owner = a->names[rs_ring_point_owner(a, bsearch_find(a, h))];
			new_owner = b->names[rs_ring_point_owner(b, bsearch_find(b, h))];

			/*
			 * Ranges are disjoint and sorted by end (checked above); only the
			 * first may wrap.  So the first range ending at or after h, the
			 * first and the last range are the only ones that can hold h.
			 */
			while (lo < hi)
			{
				size_t		mid = lo + (hi - lo) / 2;

				if (moves[mid].range_end < h)
					lo = mid + 1;
				else
					hi = mid;
			}
			candidates[0] = lo;
			candidates[1] = 0;
			candidates[2] = nmoves - 1;
			for (int c = 0; c < 3 && nmoves > 0; c++)
			{
				size_t		i = candidates[c];

				if (i >= nmoves || (c > 0 && i == candidates[0]) || (c == 2 && i == 0))
					continue;
				if (in_range(h, moves[i].range_start, moves[i].range_end))
				{
					hits++;
					hit = &moves[i];
				}
			}
			if (hits > 1)
				fail("a hash lies in two moves");
			if (strcmp(old_owner, new_owner) == 0)
			{
				if (hits != 0)
				{
					fprintf(stderr, "hash %" PRIu64 " owner %s stays but lies in (%" PRIu64
							", %" PRIu64 "] %s -> %s\n", h, old_owner, hit->range_start,
							hit->range_end, hit->from_node, hit->to_node);
					fail("a hash whose owner stays lies in a move");
				}
			}
			else
			{
				if (hits != 1)
				{
					fprintf(stderr, "hash %" PRIu64 " moves %s -> %s, in no range\n", h,
							old_owner, new_owner);
					fail("a hash whose owner changes lies in no move");
				}
				if (strcmp(hit->from_node, old_owner) != 0 || strcmp(hit->to_node, new_owner) != 0)
					fail("a move names the wrong nodes");
			}
		}
	}
	free(moves);
}

/* Derive the second ring's members from the first's. */
static void
derive_members(reader *r, const member_set *first, member_set *second, size_t max_members)
{
	uint8_t		how = next_byte(r) % 5;

	copy_set(second, first);
	switch (how)
	{
		case 0:				/* add a node */
			if (second->count < max_members)
				read_member(r, second);
			break;
		case 1:				/* remove a node */
			if (second->count > 1)
			{
				size_t		victim = next_byte(r) % second->count;
				member_set	tmp;

				copy_set(&tmp, second);
				second->count = 0;
				for (size_t i = 0; i < tmp.count; i++)
					if (i != victim)
					{
						memcpy(second->names[second->count], tmp.names[i], sizeof(tmp.names[i]));
						second->members[second->count] = tmp.members[i];
						second->members[second->count].name = second->names[second->count];
						second->count++;
					}
			}
			break;
		case 2:				/* reweight a node */
			second->members[next_byte(r) % second->count].weight = read_weight(r);
			break;
		case 3:				/* same members (vnodes may differ) */
			break;
		default:			/* fresh members */
			{
				size_t		n = 1 + next_byte(r) % max_members;

				second->count = 0;
				for (size_t i = 0; i < n; i++)
					read_member(r, second);
			}
			break;
	}
}

/*
 * Fewer vnodes when the members' total weight would give a murmur3 ring of
 * more than POINT_BUDGET points: the oracles scan every point, and a bigger
 * ring finds nothing a smaller one does not (bucket tables of every size up
 * to 2^9 are still built, and 65536 vnodes are the unit tests' business).
 */
static uint32_t
fit_budget(uint32_t vnodes, const member_set *set)
{
	double		total = 0;

	for (size_t i = 0; i < set->count; i++)
		total += set->members[i].weight;
	while (vnodes > 1 && vnodes * total > POINT_BUDGET)
		vnodes /= 2;
	return vnodes;
}

/* Build a ring, checking the status against the members; NULL on a duplicate. */
static rs_ring *
build_checked(rs_ring_algorithm algorithm, const member_set *set, uint32_t vnodes,
			  int options)
{
	rs_ring    *ring = (rs_ring *) 0x1;
	long		bad = -2;
	rs_status	status = rs_ring_build(algorithm, set->members, set->count, vnodes,
									   options, &ring, &bad);

	if (has_duplicate(set))
	{
		if (status != RS_ERR_DUPLICATE || ring != NULL)
			fail("duplicate names not refused");
		if (bad < 0 || (size_t) bad >= set->count)
			fail("duplicate refused without naming a member");
		for (size_t i = 0, found = 0; i < set->count; i++)
		{
			if (i != (size_t) bad && same_name(&set->members[i], &set->members[bad]))
				found = 1;
			if (i + 1 == set->count && !found)
				fail("bad_member of a duplicate is not a duplicated name");
		}
		return NULL;
	}
	if (status != RS_OK || ring == NULL)
	{
		fprintf(stderr, "status %d (%s)\n", status, rs_status_text(status));
		fail("a valid ring failed to build");
	}
	if (bad != -1)
		fail("bad_member set on success");
	check_ring_shape(ring, algorithm, vnodes, set, (options & RS_RING_KEEP_LABELS) != 0);
	return ring;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	reader		r = {data, size, 0};
	uint8_t		flags = next_byte(&r);
	/* ketama rings (bits 0 and 4) cost ten times more to build: a quarter */
	rs_ring_algorithm algorithm = (flags & 0x11) == 0x11 ? RS_RING_KETAMA : RS_RING_MURMUR3;
	int			options = (flags & 2) ? RS_RING_KEEP_LABELS : 0;
	uint64_t	mask = algorithm == RS_RING_KETAMA ? UINT32_MAX : UINT64_MAX;
	uint32_t	vnodes = 1 + next_byte(&r) % 64;
	uint32_t	vnodes2;
	size_t		max_members = algorithm == RS_RING_KETAMA ? MAX_KETAMA_MEMBERS : MAX_MEMBERS;
	size_t		nmembers = 1 + next_byte(&r) % max_members;
	member_set	first;
	member_set	second;
	rs_ring    *ring;
	rs_ring    *other;
	hash_list	hashes;

	first.count = 0;
	for (size_t i = 0; i < nmembers; i++)
		read_member(&r, &first);
	vnodes = fit_budget(vnodes, &first);

	ring = build_checked(algorithm, &first, vnodes, options);
	if (ring == NULL)
		return 0;

	collect_hashes(&r, ring, mask, &hashes);
	check_lookups(ring, &hashes, &r);

	/* Precomputed replica sets must answer exactly as the walk did. */
	if (flags & 0x20)
	{
		if (rs_ring_precompute_replicas(ring, 1 + flags % 4) != RS_OK)
			fail("rs_ring_precompute_replicas failed");
		check_lookups(ring, &hashes, &r);
	}

	/* A second ring: owner moves between the two. */
	derive_members(&r, &first, &second, max_members);
	vnodes2 = fit_budget((flags & 4) ? 1 + next_byte(&r) % 64 : vnodes, &second);
	other = build_checked(algorithm, &second, vnodes2, options);
	if (other != NULL)
	{
		hash_list	more;

		collect_hashes(&r, other, mask, &more);
		check_lookups(other, &more, &r);
		for (size_t i = 0; i < more.count; i++)
			add_hash(&hashes, more.items[i]);
		check_moves(ring, other, &hashes, mask, 1);
		check_moves(other, ring, &hashes, mask, 1);
		check_moves(ring, ring, &hashes, mask, 0);
		rs_ring_free(other);
	}

	/* Rings of different algorithms cannot be compared (few members: cheap). */
	if ((flags & 8) && first.count <= MAX_KETAMA_MEMBERS)
	{
		rs_ring    *alien = NULL;
		rs_owner_move *moves = (rs_owner_move *) 0x1;
		size_t		nmoves = 99;

		if (rs_ring_build(algorithm == RS_RING_KETAMA ? RS_RING_MURMUR3 : RS_RING_KETAMA,
						  first.members, first.count, vnodes, 0, &alien, NULL) != RS_OK)
			fail("the same members failed to build with the other algorithm");
		if (rs_ring_owner_moves(ring, alien, &moves, &nmoves) != RS_ERR_INVALID ||
			moves != NULL || nmoves != 0)
			fail("owner moves across algorithms not refused cleanly");
		rs_ring_free(alien);
	}

	rs_ring_free(ring);
	return 0;
}

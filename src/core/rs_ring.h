/*
 * rs_ring.h
 *		Consistent hash rings: murmur3 (docs/routing.md §3) and ketama (§4),
 *		with zones (§7) and explicit tokens (§8) on murmur3 rings.
 *
 * A ring is built once from its members and then only read, so lookups need
 * no locking and the layout is chosen for lookup speed (see struct rs_ring).
 */
#ifndef RS_RING_H
#define RS_RING_H

#include <stddef.h>
#include <stdint.h>

#include "rs_hash.h"
#include "rs_status.h"

/* Documented limits; SQL-level validation quotes them. */
#define RS_RING_MAX_POINTS	(1u << 22)	/* 4,194,304 points in one ring */
#define RS_RING_MAX_NODES	65535		/* node indexes are 16 bits */
#define RS_RING_MAX_VNODES	65536		/* vnodes per unit weight */
#define RS_RING_MAX_NAME	1024		/* bytes in a node name, or a zone name */
#define RS_RING_MAX_TOKENS	65536		/* explicit tokens of one node */
#define RS_KETAMA_LABELS_PER_SERVER 40	/* libketama's constant */

typedef enum rs_ring_algorithm
{
	RS_RING_MURMUR3 = 0,
	RS_RING_KETAMA = 1
} rs_ring_algorithm;

/*
 * Exact token counts need 65 bits.  The type asks for only 8-byte alignment
 * so that arrays of it can live in memory from allocators that give no more
 * (palloc), without the compiler assuming 16.
 */
typedef unsigned __int128 rs_u128 __attribute__((aligned(8)));

/*
 * One member as the caller describes it; name, zone and tokens are copied.
 * Zero the struct before filling it: the fields after weight are optional.
 *
 * zone (murmur3 only): the member's failure domain (§7), zone_len bytes, not
 * empty; NULL for none (the node is then a zone of its own).
 * tokens (murmur3 only): ntokens distinct explicit tokens, in any order
 * (§8); the member's points are exactly these, and vnodes and weight do not
 * place them.  NULL for labelled vnodes.
 */
typedef struct rs_ring_member
{
	const char *name;
	size_t		name_len;
	double		weight;
	const char *zone;
	size_t		zone_len;
	const uint64_t *tokens;
	uint32_t	ntokens;
} rs_ring_member;

/*
 * Points read past a bucket by the lookup's fixed-width scan; the point
 * array carries this many padding entries after its last point.
 */
#define RS_RING_SCAN_MAX 16

/*
 * A built ring.  Read-only after rs_ring_build; read points through
 * rs_ring_token() and rs_ring_point_owner(), the other fields directly.
 * Node indexes are positions in names[], which is sorted bytewise, so the
 * contract's tie order (token, node name, label index) is integer order.
 *
 * Layout, chosen for one lookup per row at any ring size (bench/README.md
 * has the measurements): each point is one 64-bit word, the token's top 48
 * bits over the owner's 16, so the word that decides the search also names
 * the owner and a lookup touches one line of points after its bucket entry;
 * the token's low 16 bits, needed only when a hash shares the top 48 bits
 * with a point, live apart.  Ketama's 32-bit tokens are stored shifted to
 * the top (token_shift 32), so both algorithms share the search.
 */
typedef struct rs_ring
{
	rs_ring_algorithm algorithm;
	uint32_t	npoints;
	uint32_t	nnodes;
	uint64_t   *points;			/* npoints + RS_RING_SCAN_MAX words, sorted */
	uint16_t   *token_low;		/* low 16 bits of each stored token */
	int			token_shift;	/* stored token = token << token_shift */
	uint32_t   *labels;			/* label index of each point, or NULL */
	uint32_t   *buckets;		/* first point of each bucket, nbuckets + 1 ... */
	uint16_t   *buckets16;		/* ... or these, on rings below 2^16 points (buckets NULL) */
	uint32_t	nbuckets;
	int			bucket_shift;	/* stored token >> bucket_shift is its bucket */
	uint32_t	scan_width;		/* points compared per lookup: 4 or 16 */
	char	  **names;			/* NUL-terminated copies, sorted bytewise */
	size_t	   *name_lens;
	double	   *weights;		/* as given, per node index */
	uint32_t   *node_points;	/* points placed per node */
	uint16_t   *replica_sets;	/* optional: replica_width nodes per point */
	uint32_t	replica_width;

	/*
	 * Zones (§7).  zone_of[node] is the node's zone id: named zones first,
	 * numbered in bytewise order of their names (zone_names[id], NUL-
	 * terminated copies), then one id of its own for each node without a
	 * zone.  nzones counts them all.  zoned is 0 when no member has a zone:
	 * replica sets are then §3's, and zone_of is NULL.
	 */
	int			zoned;
	uint32_t	nzones;
	uint32_t	nnamed_zones;
	uint32_t   *zone_of;
	char	  **zone_names;
	size_t	   *zone_name_lens;
	uint8_t    *explicit_tokens;	/* per node: 1 if its points are explicit tokens */
} rs_ring;

#define RS_RING_OWNER_MASK UINT64_C(0xFFFF)

/* Token of point i (0 <= i < npoints), in the ring's token space. */
static inline uint64_t
rs_ring_token(const rs_ring *ring, uint32_t i)
{
	return ((ring->points[i] & ~RS_RING_OWNER_MASK) | ring->token_low[i]) >> ring->token_shift;
}

/* Node index owning point i. */
static inline uint32_t
rs_ring_point_owner(const rs_ring *ring, uint32_t i)
{
	return (uint32_t) (ring->points[i] & RS_RING_OWNER_MASK);
}

/* Build options. */
#define RS_RING_KEEP_LABELS 0x1 /* fill labels[] (for showing a ring) */

/*
 * Build a ring.  vnodes is per unit weight (murmur3; ignored by ketama).
 * Errors: RS_ERR_INVALID (empty name, weight not finite and > 0, vnodes out
 * of 1..RS_RING_MAX_VNODES, name too long, an empty or too long zone, no
 * tokens or more than RS_RING_MAX_TOKENS, a token twice in one member, a
 * zone or tokens on a ketama ring), RS_ERR_DUPLICATE,
 * RS_ERR_TOO_MANY_NODES, RS_ERR_TOO_MANY_POINTS, RS_ERR_EMPTY (no members),
 * RS_ERR_NOMEM, RS_ERR_CRYPTO.  On error *ring_out is NULL and nothing leaks;
 * *bad_member (if not NULL) is the index of the offending member or -1.
 */
extern rs_status rs_ring_build(rs_ring_algorithm algorithm,
							   const rs_ring_member *members, size_t nmembers,
							   uint32_t vnodes, int options,
							   rs_ring **ring_out, long *bad_member);

extern void rs_ring_free(rs_ring *ring);

/* Points a member of this weight gets (murmur3 rule); 0 if invalid. */
extern uint64_t rs_murmur3_point_count(uint32_t vnodes, double weight);

/* Zone id of a node (see struct rs_ring); the node's own id when not zoned. */
static inline uint32_t
rs_ring_zone_of(const rs_ring *ring, uint32_t node)
{
	return ring->zoned ? ring->zone_of[node] : node;
}

/* Zone name of a node, or NULL when it has none. */
static inline const char *
rs_ring_zone_name(const rs_ring *ring, uint32_t node)
{
	if (!ring->zoned || ring->zone_of[node] >= ring->nnamed_zones)
		return NULL;
	return ring->zone_names[ring->zone_of[node]];
}

/* The hash of a key in this ring's token space. */
static inline uint64_t
rs_ring_key_hash(const rs_ring *ring, const void *key, size_t len)
{
	if (ring->algorithm == RS_RING_KETAMA)
		return rs_ketama_hash(key, len);
	return rs_murmur3_token(key, len);
}

/* Size of the token space: 2^64 (murmur3) or 2^32 (ketama). */
extern rs_u128 rs_ring_space(const rs_ring *ring);

/* qsort comparator: tokens (uint64_t) in ascending order. */
extern int rs_ring_compare_tokens(const void *a, const void *b);

/*
 * The hash as the ring stores tokens (shifted to the top for ketama); false
 * for a hash past a 32-bit (ketama) space, which is above every point.
 */
static inline int
rs_ring_stored_hash(const rs_ring *ring, uint64_t hash, uint64_t *stored)
{
	if (ring->token_shift != 0 && (hash >> (64 - ring->token_shift)) != 0)
		return 0;
	*stored = hash << ring->token_shift;
	return 1;
}

/* Index of the first point of bucket b (0 <= b <= nbuckets; nbuckets: npoints). */
static inline uint32_t
rs_ring_bucket_first(const rs_ring *ring, uint32_t b)
{
	return ring->buckets16 != NULL ? ring->buckets16[b] : ring->buckets[b];
}

/* The exact search behind rs_ring_find_point, for its rare cases. */
extern uint32_t rs_ring_find_point_exact(const rs_ring *ring, uint64_t hash);

/*
 * Position in points[] of the first point whose token is >= hash, or
 * npoints when there is none (the padding entries after the last point
 * carry point 0's owner, so points[] at that position names the wrapped
 * owner).  The bucket of the hash gives where its points start; the
 * points of the bucket are counted, without branches, by comparing a fixed
 * number of words with the hash's top 48 bits: words past the bucket hold
 * larger tokens and do not count.  A bucket fuller than the scan, or a
 * point sharing the hash's top 48 bits, goes to the exact search.
 */
static inline uint32_t
rs_ring_search(const rs_ring *ring, uint64_t hash)
{
	uint64_t	stored;
	uint64_t	top;
	const uint64_t *scan;
	uint32_t	less;

	if (!rs_ring_stored_hash(ring, hash, &stored))
		return ring->npoints;
	top = stored & ~RS_RING_OWNER_MASK;
	scan = ring->points + rs_ring_bucket_first(ring, (uint32_t) (stored >> ring->bucket_shift));
	if (ring->scan_width == 4)
		less = (scan[0] < top) + (scan[1] < top) + (scan[2] < top) + (scan[3] < top);
	else
	{
		less = 0;
		for (int i = 0; i < RS_RING_SCAN_MAX; i++)
			less += scan[i] < top;
	}
	if (__builtin_expect(less == ring->scan_width ||
						 ((scan[less] ^ stored) & ~RS_RING_OWNER_MASK) == 0, 0))
		return rs_ring_find_point_exact(ring, hash);
	return (uint32_t) (scan - ring->points) + less;
}

/* Index of the first point whose token is >= hash, wrapping to 0. */
static inline uint32_t
rs_ring_find_point(const rs_ring *ring, uint64_t hash)
{
	uint32_t	point = rs_ring_search(ring, hash);

	return point == ring->npoints ? 0 : point;
}

/* Node index owning a hash. */
static inline uint32_t
rs_ring_owner(const rs_ring *ring, uint64_t hash)
{
	return (uint32_t) (ring->points[rs_ring_search(ring, hash)] & RS_RING_OWNER_MASK);
}

/*
 * The replica set of a hash: up to want distinct node indexes, owner first,
 * walking clockwise once around the ring (§3), and on a ring with zones in
 * two passes, zones first (§7).  *count gets how many were found (fewer than
 * want when the ring has fewer nodes).  Never allocates; always RS_OK (the
 * status stays for callers written against earlier versions).
 *
 * Up to three replicas are walked inline, the found nodes in registers: on a
 * ring of many nodes the next point's owner is almost always new, so each
 * inner loop ends at its first test and the branches predict well.  Rings
 * with a table of replica sets, rings with zones, and larger sets take the
 * general path.
 */
extern rs_status rs_ring_replicas_general(const rs_ring *ring, uint64_t hash,
										  uint32_t want, uint16_t *out, uint32_t *count);

static inline rs_status
rs_ring_replicas(const rs_ring *ring, uint64_t hash, uint32_t want,
				 uint16_t *out, uint32_t *count)
{
	uint32_t	point;
	uint32_t	steps = 1;
	uint32_t	first;
	uint32_t	second;
	uint32_t	third;

	if (want > 3 || ring->replica_sets != NULL || ring->zoned)
		return rs_ring_replicas_general(ring, hash, want, out, count);
	*count = 0;
	if (want == 0)
		return RS_OK;
	point = rs_ring_find_point(ring, hash);
	first = rs_ring_point_owner(ring, point);
	out[0] = (uint16_t) first;
	*count = 1;
	if (want < 2)
		return RS_OK;

	/*
	 * Two loops written out rather than one over the found nodes: measured,
	 * the loop form costs R = 3 about 15 % more on a 64-node ring.
	 */
	do
	{
		if (steps++ == ring->npoints)
			return RS_OK;
		if (++point == ring->npoints)
			point = 0;
		second = rs_ring_point_owner(ring, point);
	} while (second == first);
	out[1] = (uint16_t) second;
	*count = 2;
	if (want < 3)
		return RS_OK;
	do
	{
		if (steps++ == ring->npoints)
			return RS_OK;
		if (++point == ring->npoints)
			point = 0;
		third = rs_ring_point_owner(ring, point);
	} while (third == first || third == second);
	out[2] = (uint16_t) third;
	*count = 3;
	return RS_OK;
}

/*
 * Precompute the replica set (up to width nodes) of every point, so that
 * rs_ring_replicas answers from a table instead of walking the ring.  Worth
 * it on rings of few nodes, where the walk passes many points of the same
 * node; costs 2 x width bytes per point.  RS_ERR_NOMEM; the ring stays usable.
 */
extern rs_status rs_ring_precompute_replicas(rs_ring *ring, uint32_t width);

/* Tokens owned by point i: the size of (tokens[i-1], tokens[i]], wrapping. */
extern rs_u128 rs_ring_point_span(const rs_ring *ring, uint32_t point);

/* Tokens owned per node index, into owned[nnodes]. */
extern void rs_ring_ownership(const rs_ring *ring, rs_u128 *owned);

/*
 * The replica set of every point's range, replicas nodes each (capped at the
 * node count): the walk rs_ring_replicas makes, from point p, into
 * sets[p * width .. p * width + width - 1], width = min(replicas, nnodes).
 * For callers that need all of them (shares of copies, allocation).
 */
extern rs_status rs_ring_point_replicas(const rs_ring *ring, uint32_t point, uint32_t want,
										uint16_t *out, uint32_t *count);

/*
 * Tokens of which each node holds a copy at R = replicas, into held[nnodes]
 * (summing to min(R, nnodes) x the space), and for each zone id the fewest
 * and most copies of one key it holds, into zone_min[nzones] and
 * zone_max[nzones] (either may be NULL; on a ring without zones a node's id
 * is its zone's).  RS_OK only.
 */
extern rs_status rs_ring_replicated_ownership(const rs_ring *ring, uint32_t replicas,
											  rs_u128 *held, uint32_t *zone_min,
											  uint32_t *zone_max);

#endif							/* RS_RING_H */

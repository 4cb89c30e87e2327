/*
 * rs_ring.c
 *		Building and querying murmur3 and ketama rings.
 */
#include "rs_ring.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rs_hash.h"

/* A point while the ring is being built, before it is split into arrays. */
typedef struct build_point
{
	uint64_t	token;
	uint32_t	node;
	uint32_t	label;
} build_point;

/*
 * Order of two byte strings: by their bytes, then by length (a prefix sorts
 * first).  Node names and zone names are ordered this way.
 */
static int
compare_name_bytes(const char *a, size_t a_len, const char *b, size_t b_len)
{
	size_t		common = a_len < b_len ? a_len : b_len;
	int			cmp = common > 0 ? memcmp(a, b, common) : 0;

	if (cmp != 0)
		return cmp;
	return (a_len > b_len) - (a_len < b_len);
}

/* Member order by name bytes, then length (a prefix sorts first). */
static int
compare_member_names(const rs_ring_member *a, const rs_ring_member *b)
{
	return compare_name_bytes(a->name, a->name_len, b->name, b->name_len);
}

/* qsort adaptor over pointers to members. */
static int
compare_member_ptrs(const void *a, const void *b)
{
	return compare_member_names(*(const rs_ring_member *const *) a,
								*(const rs_ring_member *const *) b);
}

/* The contract's point order: token, then node name, then label index. */
static int
compare_points(const void *a, const void *b)
{
	const build_point *pa = a;
	const build_point *pb = b;

	if (pa->token != pb->token)
		return pa->token < pb->token ? -1 : 1;
	if (pa->node != pb->node)
		return pa->node < pb->node ? -1 : 1;
	return (pa->label > pb->label) - (pa->label < pb->label);
}

/* Points a member of this weight gets (murmur3 rule); 0 if invalid. */
uint64_t
rs_murmur3_point_count(uint32_t vnodes, double weight)
{
	double		exact;

	if (!isfinite(weight) || weight <= 0 || vnodes == 0)
		return 0;
	exact = round((double) vnodes * weight);	/* half away from zero */
	if (exact < 1)
		return 1;
	if (exact > (double) RS_RING_MAX_POINTS)
		return (uint64_t) RS_RING_MAX_POINTS + 1;
	return (uint64_t) exact;
}

/*
 * libketama's label count for one server, bit for bit: the share as float,
 * the product in double, rounded to float, then floorf.
 */
static uint32_t
ketama_label_count(double weight, double total_weight, uint32_t nservers)
{
	float		pct = (float) weight / (float) total_weight;

	return (uint32_t) floorf((float) (pct * 40.0 * (float) nservers));
}

/* Write "{name}{sep}{index}" into buf; returns the length. */
static size_t
format_label(char *buf, const char *name, size_t name_len,
			 const char *separator, uint32_t index)
{
	size_t		sep_len = strlen(separator);
	int			digits;

	memcpy(buf, name, name_len);
	memcpy(buf + name_len, separator, sep_len);
	digits = snprintf(buf + name_len + sep_len, 16, "%u", index);
	return name_len + sep_len + (size_t) digits;
}

/* Fill the points of one murmur3 member. */
static void
place_murmur3_points(build_point *points, uint32_t node, const char *name,
					 size_t name_len, uint32_t count, char *label_buf)
{
	for (uint32_t i = 0; i < count; i++)
	{
		size_t		len = format_label(label_buf, name, name_len, "#vnode#", i);

		points[i].token = rs_murmur3_token(label_buf, len);
		points[i].node = node;
		points[i].label = i;
	}
}

/* Fill the points of one ketama member: four per MD5 of "{name}-{k}". */
static rs_status
place_ketama_points(build_point *points, uint32_t node, const char *name,
					size_t name_len, uint32_t labels, char *label_buf)
{
	for (uint32_t k = 0; k < labels; k++)
	{
		unsigned char digest[16];
		size_t		len = format_label(label_buf, name, name_len, "-", k);
		rs_status	status = rs_md5(label_buf, len, digest);

		if (status != RS_OK)
			return status;
		for (int h = 0; h < 4; h++)
		{
			build_point *p = &points[k * 4 + h];

			p->token = (uint64_t) digest[4 * h] |
				(uint64_t) digest[4 * h + 1] << 8 |
				(uint64_t) digest[4 * h + 2] << 16 |
				(uint64_t) digest[4 * h + 3] << 24;
			p->node = node;
			p->label = k * 4 + (uint32_t) h;
		}
	}
	return RS_OK;
}

/* Smallest number of bits b with 2^b >= n, at least 1. */
static int
ceil_log2(uint32_t n)
{
	int			bits = 1;

	while (bits < 31 && (1u << bits) < n)
		bits++;
	return bits;
}

/*
 * Largest ring whose lookup scans 4 points per bucket, with about one point
 * per bucket; larger rings have about 8 points per bucket and scan 16, which
 * keeps their bucket table small enough to stay in cache beside the points
 * (measured in bench/README.md).
 */
#define RS_RING_NARROW_SCAN_POINTS 65536

/*
 * Whether a table of 2^bits buckets sends few lookups (at most 1 in 128) to
 * the exact search: those whose hash lies past the fourth point of its
 * bucket, where the 4-point scan ends.  Counted over the hash space, bucket
 * by bucket, from the sorted points.
 */
static int
few_lookups_overflow(const rs_ring *ring, int bits)
{
	int			shift = 64 - bits;
	uint64_t	size = UINT64_C(1) << shift;
	double		overflow = 0;	/* in buckets' worth of hash space */
	uint32_t	run = 0;

	for (uint32_t i = 0; i < ring->npoints; i++)
	{
		run = (i > 0 && (ring->points[i] >> shift) == (ring->points[i - 1] >> shift)) ? run + 1 : 1;
		if (run == 4)
			overflow += (double) (size - (ring->points[i] & (size - 1))) / (double) size;
	}
	return overflow <= (double) (UINT64_C(1) << bits) / 128;
}

/* Build the bucket table over the top bits of the sorted stored tokens. */
static rs_status
build_buckets(rs_ring *ring, int space_bits)
{
	int			bits = ceil_log2(ring->npoints);

	if (ring->npoints <= RS_RING_NARROW_SCAN_POINTS)
	{
		ring->scan_width = 4;

		/*
		 * Evenly spread points (allocated tokens, §8) fill half as many
		 * buckets about twice as full and seldom overflow the scan: a
		 * table half the size stays in the L1 cache more often (measured:
		 * 1,000 nodes x 16 tokens, bench/README.md).  Random vnodes
		 * overflow it more and keep one bucket per point.
		 */
		if (bits > 1 && bits - 1 <= space_bits && few_lookups_overflow(ring, bits - 1))
			bits--;
	}
	else
	{
		ring->scan_width = RS_RING_SCAN_MAX;
		bits -= 3;
	}
	if (bits > space_bits)
		bits = space_bits;
	ring->nbuckets = 1u << bits;
	ring->bucket_shift = 64 - bits;

	/*
	 * Point indexes of rings below 2^16 points fit 16 bits: a table half the
	 * size, in cache more often.
	 */
	if (ring->npoints < UINT16_MAX)
		ring->buckets16 = malloc(((size_t) ring->nbuckets + 1) * sizeof(uint16_t));
	else
		ring->buckets = malloc(((size_t) ring->nbuckets + 1) * sizeof(uint32_t));
	if (ring->buckets == NULL && ring->buckets16 == NULL)
		return RS_ERR_NOMEM;

	/* bucket b's entry = index of the first point whose bucket is >= b */
	{
		uint32_t	point = 0;

		for (uint64_t b = 0; b <= ring->nbuckets; b++)
		{
			while (point < ring->npoints &&
				   (ring->points[point] >> ring->bucket_shift) < b)
				point++;
			if (ring->buckets16)
				ring->buckets16[b] = (uint16_t) point;
			else
				ring->buckets[b] = point;
		}
	}
	return RS_OK;
}

/* Free an array of count strings and the strings; NULL is fine. */
static void
free_strings(char **strings, uint32_t count)
{
	if (strings != NULL)
		for (uint32_t i = 0; i < count; i++)
			free(strings[i]);
	free(strings);
}

/* Free a ring and everything it owns; NULL is fine. */
void
rs_ring_free(rs_ring *ring)
{
	if (ring == NULL)
		return;
	free_strings(ring->names, ring->nnodes);
	free(ring->name_lens);
	free(ring->weights);
	free(ring->node_points);
	free(ring->points);
	free(ring->token_low);
	free(ring->labels);
	free(ring->buckets);
	free(ring->buckets16);
	free(ring->replica_sets);
	free_strings(ring->zone_names, ring->nnamed_zones);
	free(ring->zone_name_lens);
	free(ring->zone_of);
	free(ring->explicit_tokens);
	free(ring);
}

/* qsort order of unsigned 64-bit tokens (see rs_ring.h). */
int
rs_ring_compare_tokens(const void *a, const void *b)
{
	uint64_t	x = *(const uint64_t *) a;
	uint64_t	y = *(const uint64_t *) b;

	return (x > y) - (x < y);
}

/* Whether count tokens are pairwise distinct (a sorted copy is checked). */
static int
tokens_distinct(const uint64_t *tokens, uint32_t count)
{
	uint64_t   *copy = malloc((size_t) count * sizeof(uint64_t));
	int			distinct = 1;

	if (copy == NULL)
	{
		/* Without memory for a copy, compare pairs (members are small then). */
		for (uint32_t i = 0; i < count && distinct; i++)
			for (uint32_t j = i + 1; j < count && distinct; j++)
				distinct = tokens[i] != tokens[j];
		return distinct;
	}
	memcpy(copy, tokens, (size_t) count * sizeof(uint64_t));
	qsort(copy, count, sizeof(uint64_t), rs_ring_compare_tokens);
	for (uint32_t i = 1; i < count && distinct; i++)
		distinct = copy[i - 1] != copy[i];
	free(copy);
	return distinct;
}

/* Check members and compute each one's point count, in name order. */
static rs_status
plan_points(rs_ring_algorithm algorithm, const rs_ring_member *const *sorted,
			size_t nmembers, uint32_t vnodes, uint32_t *counts,
			uint64_t *total, long *bad_sorted_index)
{
	double		total_weight = 0;

	*total = 0;
	for (size_t i = 0; i < nmembers; i++)
	{
		const rs_ring_member *m = sorted[i];

		*bad_sorted_index = (long) i;
		if (m->name_len == 0 || m->name_len > RS_RING_MAX_NAME)
			return RS_ERR_INVALID;
		if (!isfinite(m->weight) || m->weight <= 0)
			return RS_ERR_INVALID;
		if (m->zone != NULL &&
			(algorithm != RS_RING_MURMUR3 || m->zone_len == 0 || m->zone_len > RS_RING_MAX_NAME))
			return RS_ERR_INVALID;
		if (m->tokens != NULL &&
			(algorithm != RS_RING_MURMUR3 || m->ntokens == 0 || m->ntokens > RS_RING_MAX_TOKENS ||
			 !tokens_distinct(m->tokens, m->ntokens)))
			return RS_ERR_INVALID;
		if (i > 0 && compare_member_names(sorted[i - 1], m) == 0)
			return RS_ERR_DUPLICATE;
		total_weight += m->weight;
	}
	*bad_sorted_index = -1;
	if (!isfinite(total_weight))
		return RS_ERR_INVALID;

	for (size_t i = 0; i < nmembers; i++)
	{
		uint64_t	count;

		if (algorithm == RS_RING_MURMUR3 && sorted[i]->tokens != NULL)
			count = sorted[i]->ntokens;
		else if (algorithm == RS_RING_MURMUR3)
			count = rs_murmur3_point_count(vnodes, sorted[i]->weight);
		else
			count = (uint64_t) ketama_label_count(sorted[i]->weight, total_weight,
												  (uint32_t) nmembers) * 4;
		*total += count;
		if (count > RS_RING_MAX_POINTS || *total > RS_RING_MAX_POINTS)
		{
			*bad_sorted_index = (long) i;
			return RS_ERR_TOO_MANY_POINTS;
		}
		counts[i] = (uint32_t) count;
	}
	return *total == 0 ? RS_ERR_EMPTY : RS_OK;
}

/* Zone order: name bytes, then length. */
static int
compare_zone_names(const rs_ring_member *a, const rs_ring_member *b)
{
	return compare_name_bytes(a->zone, a->zone_len, b->zone, b->zone_len);
}

/* A member with a zone and its node index, for sorting by zone. */
typedef struct zoned_node
{
	const rs_ring_member *member;
	uint32_t	node;
} zoned_node;

static int
compare_zoned_nodes(const void *a, const void *b)
{
	const zoned_node *x = a;
	const zoned_node *y = b;
	int			cmp = compare_zone_names(x->member, y->member);

	if (cmp != 0)
		return cmp;
	return (x->node > y->node) - (x->node < y->node);
}

/*
 * Number the zones (see struct rs_ring): named zones in bytewise order of
 * their names, then one zone per node without a name.  No zone anywhere
 * leaves the ring unzoned, with nzones = nnodes.
 */
static rs_status
copy_zones(rs_ring *ring, const rs_ring_member *const *sorted)
{
	uint32_t	n = ring->nnodes;
	uint32_t	nnamed = 0;
	zoned_node *order;
	uint32_t	next_id = 0;

	for (uint32_t i = 0; i < n; i++)
		nnamed += sorted[i]->zone != NULL;
	ring->nzones = n;
	if (nnamed == 0)
		return RS_OK;
	ring->zoned = 1;
	ring->zone_of = malloc(n * sizeof(uint32_t));
	order = malloc(nnamed * sizeof(zoned_node));
	ring->zone_names = calloc(nnamed, sizeof(char *));
	ring->zone_name_lens = malloc(nnamed * sizeof(size_t));
	if (!ring->zone_of || !order || !ring->zone_names || !ring->zone_name_lens)
	{
		free(order);
		return RS_ERR_NOMEM;
	}
	for (uint32_t i = 0, k = 0; i < n; i++)
		if (sorted[i]->zone != NULL)
		{
			order[k].member = sorted[i];
			order[k].node = i;
			k++;
		}
	qsort(order, nnamed, sizeof(zoned_node), compare_zoned_nodes);
	for (uint32_t k = 0; k < nnamed; k++)
	{
		const rs_ring_member *m = order[k].member;

		if (k == 0 || compare_zone_names(order[k - 1].member, m) != 0)
		{
			char	   *copy = malloc(m->zone_len + 1);

			if (copy == NULL)
			{
				ring->nnamed_zones = next_id;
				free(order);
				return RS_ERR_NOMEM;
			}
			memcpy(copy, m->zone, m->zone_len);
			copy[m->zone_len] = '\0';
			ring->zone_names[next_id] = copy;
			ring->zone_name_lens[next_id] = m->zone_len;
			next_id++;
		}
		ring->zone_of[order[k].node] = next_id - 1;
	}
	ring->nnamed_zones = next_id;
	free(order);
	for (uint32_t i = 0; i < n; i++)
		if (sorted[i]->zone == NULL)
			ring->zone_of[i] = next_id++;
	ring->nzones = next_id;
	return RS_OK;
}

/* Copy names and weights into the ring, in name order. */
static rs_status
copy_nodes(rs_ring *ring, const rs_ring_member *const *sorted, const uint32_t *counts)
{
	uint32_t	n = ring->nnodes;

	ring->names = calloc(n, sizeof(char *));
	ring->name_lens = malloc(n * sizeof(size_t));
	ring->weights = malloc(n * sizeof(double));
	ring->node_points = malloc(n * sizeof(uint32_t));
	if (!ring->names || !ring->name_lens || !ring->weights || !ring->node_points)
		return RS_ERR_NOMEM;
	for (uint32_t i = 0; i < n; i++)
	{
		ring->names[i] = malloc(sorted[i]->name_len + 1);
		if (ring->names[i] == NULL)
			return RS_ERR_NOMEM;
		memcpy(ring->names[i], sorted[i]->name, sorted[i]->name_len);
		ring->names[i][sorted[i]->name_len] = '\0';
		ring->name_lens[i] = sorted[i]->name_len;
		ring->weights[i] = sorted[i]->weight;
		ring->node_points[i] = counts[i];
	}
	ring->explicit_tokens = calloc(n, 1);
	if (ring->explicit_tokens == NULL)
		return RS_ERR_NOMEM;
	for (uint32_t i = 0; i < n; i++)
		ring->explicit_tokens[i] = sorted[i]->tokens != NULL;
	return copy_zones(ring, sorted);
}

/*
 * Fill the points of a member with explicit tokens (§8): its tokens, label i
 * the position of the token among them in ascending order.
 */
static rs_status
place_token_points(build_point *points, uint32_t node, const rs_ring_member *member)
{
	uint64_t   *sorted_tokens = malloc((size_t) member->ntokens * sizeof(uint64_t));

	if (sorted_tokens == NULL)
		return RS_ERR_NOMEM;
	memcpy(sorted_tokens, member->tokens, (size_t) member->ntokens * sizeof(uint64_t));
	qsort(sorted_tokens, member->ntokens, sizeof(uint64_t), rs_ring_compare_tokens);
	for (uint32_t i = 0; i < member->ntokens; i++)
	{
		points[i].token = sorted_tokens[i];
		points[i].node = node;
		points[i].label = i;
	}
	free(sorted_tokens);
	return RS_OK;
}

/* Hash every label, sort, and split the points into the ring's arrays. */
static rs_status
place_points(rs_ring *ring, const rs_ring_member *const *sorted, const uint32_t *counts,
			 int options)
{
	build_point *points = malloc((size_t) ring->npoints * sizeof(build_point));
	char	   *label_buf = malloc(RS_RING_MAX_NAME + 32);
	rs_status	status = RS_OK;
	uint32_t	next = 0;

	if (points == NULL || label_buf == NULL)
	{
		free(points);
		free(label_buf);
		return RS_ERR_NOMEM;
	}
	for (uint32_t node = 0; node < ring->nnodes && status == RS_OK; node++)
	{
		if (ring->algorithm == RS_RING_MURMUR3 && sorted[node]->tokens != NULL)
			status = place_token_points(points + next, node, sorted[node]);
		else if (ring->algorithm == RS_RING_MURMUR3)
			place_murmur3_points(points + next, node, ring->names[node],
								 ring->name_lens[node], counts[node], label_buf);
		else
			status = place_ketama_points(points + next, node, ring->names[node],
										 ring->name_lens[node], counts[node] / 4,
										 label_buf);
		next += counts[node];
	}
	free(label_buf);
	if (status != RS_OK)
	{
		free(points);
		return status;
	}

	qsort(points, ring->npoints, sizeof(build_point), compare_points);

	ring->token_shift = ring->algorithm == RS_RING_KETAMA ? 32 : 0;
	ring->points = malloc(((size_t) ring->npoints + RS_RING_SCAN_MAX) * sizeof(uint64_t));
	ring->token_low = malloc((size_t) ring->npoints * sizeof(uint16_t));
	if (options & RS_RING_KEEP_LABELS)
		ring->labels = malloc((size_t) ring->npoints * sizeof(uint32_t));
	if (!ring->points || !ring->token_low ||
		((options & RS_RING_KEEP_LABELS) && !ring->labels))
	{
		free(points);
		return RS_ERR_NOMEM;
	}
	for (uint32_t i = 0; i < ring->npoints; i++)
	{
		uint64_t	stored = points[i].token << ring->token_shift;

		ring->points[i] = (stored & ~RS_RING_OWNER_MASK) | points[i].node;
		ring->token_low[i] = (uint16_t) (stored & RS_RING_OWNER_MASK);
		if (ring->labels)
			ring->labels[i] = points[i].label;
	}

	/* Padding: above every token, and naming the owner a lookup wraps to. */
	for (uint32_t i = 0; i < RS_RING_SCAN_MAX; i++)
		ring->points[ring->npoints + i] = ~RS_RING_OWNER_MASK | points[0].node;
	free(points);
	return RS_OK;
}

/* Build a ring (see rs_ring.h for the rules and errors). */
rs_status
rs_ring_build(rs_ring_algorithm algorithm, const rs_ring_member *members,
			  size_t nmembers, uint32_t vnodes, int options,
			  rs_ring **ring_out, long *bad_member)
{
	const rs_ring_member **sorted = NULL;
	uint32_t   *counts = NULL;
	rs_ring    *ring = NULL;
	uint64_t	total = 0;
	long		bad_sorted = -1;
	rs_status	status;

	*ring_out = NULL;
	if (bad_member)
		*bad_member = -1;
	if (algorithm != RS_RING_MURMUR3 && algorithm != RS_RING_KETAMA)
		return RS_ERR_INVALID;
	if (nmembers == 0)
		return RS_ERR_EMPTY;
	if (nmembers > RS_RING_MAX_NODES)
		return RS_ERR_TOO_MANY_NODES;
	if (algorithm == RS_RING_MURMUR3 && (vnodes == 0 || vnodes > RS_RING_MAX_VNODES))
		return RS_ERR_INVALID;

	sorted = malloc(nmembers * sizeof(*sorted));
	counts = malloc(nmembers * sizeof(uint32_t));
	ring = calloc(1, sizeof(rs_ring));
	if (!sorted || !counts || !ring)
	{
		status = RS_ERR_NOMEM;
		goto done;
	}
	for (size_t i = 0; i < nmembers; i++)
		sorted[i] = &members[i];
	qsort(sorted, nmembers, sizeof(*sorted), compare_member_ptrs);

	status = plan_points(algorithm, sorted, nmembers, vnodes, counts, &total,
						 &bad_sorted);
	if (status != RS_OK)
	{
		if (bad_member && bad_sorted >= 0)
			*bad_member = (long) (sorted[bad_sorted] - members);
		goto done;
	}

	ring->algorithm = algorithm;
	ring->nnodes = (uint32_t) nmembers;
	ring->npoints = (uint32_t) total;
	status = copy_nodes(ring, sorted, counts);
	if (status == RS_OK)
		status = place_points(ring, sorted, counts, options);
	if (status == RS_OK)
		status = build_buckets(ring, algorithm == RS_RING_MURMUR3 ? 64 : 32);

done:
	free(sorted);
	free(counts);
	if (status != RS_OK)
		rs_ring_free(ring);
	else
		*ring_out = ring;
	return status;
}

/* Stored token of point i: the token shifted to the top of 64 bits. */
static inline uint64_t
stored_token(const rs_ring *ring, uint32_t i)
{
	return (ring->points[i] & ~RS_RING_OWNER_MASK) | ring->token_low[i];
}

/*
 * The first point >= hash by full tokens, or npoints: a binary search over
 * the hash's bucket, for the cases the fast scan hands over.
 */
uint32_t
rs_ring_find_point_exact(const rs_ring *ring, uint64_t hash)
{
	uint64_t	stored;
	uint64_t	bucket;
	uint32_t	lo;
	uint32_t	hi;

	if (!rs_ring_stored_hash(ring, hash, &stored))
		return ring->npoints;
	bucket = stored >> ring->bucket_shift;
	lo = rs_ring_bucket_first(ring, (uint32_t) bucket);
	hi = rs_ring_bucket_first(ring, (uint32_t) bucket + 1);

	/* Every later bucket's points are larger: the answer is in [lo, hi]. */
	while (lo < hi)
	{
		uint32_t	mid = lo + (hi - lo) / 2;

		if (stored_token(ring, mid) < stored)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Size of the token space: 2^64 (murmur3) or 2^32 (ketama). */
rs_u128
rs_ring_space(const rs_ring *ring)
{
	return (rs_u128) 1 << (ring->algorithm == RS_RING_KETAMA ? 32 : 64);
}

/*
 * Bitmaps of taken nodes and represented zones, for sets larger than a scan
 * of what was found is worth: on the stack (ids are below 2^16), so that a
 * lookup never allocates.
 */
#define SET_SCAN_MAX 16
#define ID_WORDS ((RS_RING_MAX_NODES + 64) / 64)

typedef struct walk_marks
{
	uint64_t	nodes[ID_WORDS];
	uint64_t	zones[ID_WORDS];
} walk_marks;

static inline int
mark_test(const uint64_t *bits, uint32_t id)
{
	return (int) ((bits[id >> 6] >> (id & 63)) & 1);
}

static inline void
mark_set(uint64_t *bits, uint32_t id)
{
	bits[id >> 6] |= UINT64_C(1) << (id & 63);
}

/* Whether a node, or (zones) a node of the zone, is among the found. */
static inline int
found_node(const uint16_t *out, uint32_t found, uint32_t node)
{
	for (uint32_t j = 0; j < found; j++)
		if (out[j] == node)
			return 1;
	return 0;
}

static inline int
found_zone(const rs_ring *ring, const uint16_t *out, uint32_t found, uint32_t zone)
{
	for (uint32_t j = 0; j < found; j++)
		if (ring->zone_of[out[j]] == zone)
			return 1;
	return 0;
}

/*
 * Walk clockwise from a point collecting up to want distinct nodes (§3); on
 * a ring with zones, first nodes of zones not yet represented, until want
 * or every zone is, then from the start again any node not taken (§7).
 * Whether a node, or a node of a zone, is taken is answered by a scan of
 * what was found (marks NULL) or by bitmaps; inlined for each below.
 */
static inline __attribute__((always_inline)) void
walk_replicas_with(const rs_ring *ring, uint32_t start, uint32_t want, uint16_t *out,
				   uint32_t *count, walk_marks *marks)
{
	uint32_t	found = 0;

	if (ring->zoned)
	{
		uint32_t	zones_taken = 0;

		for (uint32_t step = 0; step < ring->npoints && found < want &&
			 zones_taken < ring->nzones; step++)
		{
			uint32_t	point = start + step;
			uint32_t	node;
			uint32_t	zone;
			int			taken;

			if (point >= ring->npoints)
				point -= ring->npoints;
			node = rs_ring_point_owner(ring, point);
			zone = ring->zone_of[node];
			taken = marks ? mark_test(marks->zones, zone) : found_zone(ring, out, found, zone);
			if (!taken)
			{
				/* a zone not represented yet has none of its nodes taken */
				out[found++] = (uint16_t) node;
				zones_taken++;
				if (marks)
				{
					mark_set(marks->nodes, node);
					mark_set(marks->zones, zone);
				}
			}
		}
	}
	for (uint32_t step = 0; step < ring->npoints && found < want; step++)
	{
		uint32_t	point = start + step;
		uint32_t	node;
		int			taken;

		if (point >= ring->npoints)
			point -= ring->npoints;
		node = rs_ring_point_owner(ring, point);
		taken = marks ? mark_test(marks->nodes, node) : found_node(out, found, node);
		if (!taken)
		{
			out[found++] = (uint16_t) node;
			if (marks)
				mark_set(marks->nodes, node);
		}
	}
	*count = found;
}

/* Large sets: bitmaps on this function's stack (16 KB), never allocated. */
static __attribute__((noinline)) void
walk_replicas_marked(const rs_ring *ring, uint32_t start, uint32_t want, uint16_t *out,
					 uint32_t *count)
{
	walk_marks	marks;

	memset(marks.nodes, 0, ((ring->nnodes + 63) / 64) * sizeof(uint64_t));
	if (ring->zoned)
		memset(marks.zones, 0, ((ring->nzones + 63) / 64) * sizeof(uint64_t));
	walk_replicas_with(ring, start, want, out, count, &marks);
}

static void
walk_replicas(const rs_ring *ring, uint32_t start, uint32_t want, uint16_t *out, uint32_t *count)
{
	if (want > SET_SCAN_MAX)
		walk_replicas_marked(ring, start, want, out, count);
	else
		walk_replicas_with(ring, start, want, out, count, NULL);
}

/* The replica set of a hash, beyond rs_ring_replicas' inline case. */
rs_status
rs_ring_replicas_general(const rs_ring *ring, uint64_t hash, uint32_t want,
						 uint16_t *out, uint32_t *count)
{
	/* a hash's replicas are those of the point whose range holds it */
	return rs_ring_point_replicas(ring, rs_ring_find_point(ring, hash), want, out, count);
}

/* The replica set of one point's range (see rs_ring.h). */
rs_status
rs_ring_point_replicas(const rs_ring *ring, uint32_t point, uint32_t want,
					   uint16_t *out, uint32_t *count)
{
	if (want > ring->nnodes)
		want = ring->nnodes;
	if (ring->replica_sets != NULL && want <= ring->replica_width)
	{
		memcpy(out, ring->replica_sets + (size_t) point * ring->replica_width, want * sizeof(uint16_t));
		*count = want;
		return RS_OK;
	}
	walk_replicas(ring, point, want, out, count);
	return RS_OK;
}

/* Precompute every point's replica set (see rs_ring.h). */
rs_status
rs_ring_precompute_replicas(rs_ring *ring, uint32_t width)
{
	uint16_t   *sets;
	uint32_t	placed = 0;

	/* Only nodes with points can be reached (ketama may give a node none). */
	for (uint32_t n = 0; n < ring->nnodes; n++)
		placed += ring->node_points[n] > 0;
	if (width > placed)
		width = placed;
	if (width == 0)
		return RS_OK;
	sets = malloc((size_t) ring->npoints * width * sizeof(uint16_t));
	if (sets == NULL)
		return RS_ERR_NOMEM;
	for (uint32_t p = 0; p < ring->npoints; p++)
	{
		uint32_t	found = 0;

		walk_replicas(ring, p, width, sets + (size_t) p * width, &found);
	}
	free(ring->replica_sets);
	ring->replica_sets = sets;
	ring->replica_width = width;
	return RS_OK;
}

/* Tokens owned by point i: the size of (tokens[i-1], tokens[i]], wrapping. */
rs_u128
rs_ring_point_span(const rs_ring *ring, uint32_t point)
{
	if (point > 0)
		return (rs_u128) (rs_ring_token(ring, point) - rs_ring_token(ring, point - 1));
	return rs_ring_space(ring) - rs_ring_token(ring, ring->npoints - 1) + rs_ring_token(ring, 0);
}

/* Tokens owned per node index, into owned[nnodes]. */
void
rs_ring_ownership(const rs_ring *ring, rs_u128 *owned)
{
	for (uint32_t n = 0; n < ring->nnodes; n++)
		owned[n] = 0;
	for (uint32_t p = 0; p < ring->npoints; p++)
		owned[rs_ring_point_owner(ring, p)] += rs_ring_point_span(ring, p);
}

/* Tokens held per node at R = replicas, and copies per zone (see rs_ring.h). */
rs_status
rs_ring_replicated_ownership(const rs_ring *ring, uint32_t replicas, rs_u128 *held,
							 uint32_t *zone_min, uint32_t *zone_max)
{
	uint16_t	set[64];
	uint32_t	want = replicas < 64 ? replicas : 64;
	uint32_t	zones = ring->nzones;
	int			per_zone = zone_min != NULL || zone_max != NULL;
	uint32_t   *present = NULL;		/* ranges holding a copy in the zone */
	uint32_t   *low = NULL;			/* fewest copies where it holds any */
	uint32_t	ranges = 0;			/* ranges of a non-zero span */

	if (per_zone)
	{
		present = calloc(zones, sizeof(uint32_t));
		low = malloc(zones * sizeof(uint32_t));
		if (present == NULL || low == NULL)
		{
			free(present);
			free(low);
			return RS_ERR_NOMEM;
		}
		for (uint32_t z = 0; z < zones; z++)
			low[z] = UINT32_MAX;
		if (zone_max != NULL)
			memset(zone_max, 0, zones * sizeof(uint32_t));
	}
	for (uint32_t n = 0; n < ring->nnodes; n++)
		held[n] = 0;
	for (uint32_t p = 0; p < ring->npoints; p++)
	{
		uint32_t	count = 0;
		rs_u128		span = rs_ring_point_span(ring, p);

		rs_ring_point_replicas(ring, p, want, set, &count);
		for (uint32_t i = 0; i < count; i++)
			held[set[i]] += span;
		if (!per_zone || span == 0)
			continue;
		ranges++;
		/* each zone of the set once: its copies in this range */
		for (uint32_t i = 0; i < count; i++)
		{
			uint32_t	zone = rs_ring_zone_of(ring, set[i]);
			uint32_t	copies = 0;
			int			first = 1;

			for (uint32_t j = 0; j < count; j++)
				if (rs_ring_zone_of(ring, set[j]) == zone)
				{
					if (j < i)
						first = 0;
					copies++;
				}
			if (!first)
				continue;
			present[zone]++;
			if (copies < low[zone])
				low[zone] = copies;
			if (zone_max != NULL && copies > zone_max[zone])
				zone_max[zone] = copies;
		}
	}
	if (zone_min != NULL)
		for (uint32_t z = 0; z < zones; z++)
			zone_min[z] = present[z] < ranges || low[z] == UINT32_MAX ? 0 : low[z];
	free(present);
	free(low);
	return RS_OK;
}

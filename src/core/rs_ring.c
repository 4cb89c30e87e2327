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

/* Member order by name bytes, then length (a prefix sorts first). */
static int
compare_member_names(const rs_ring_member *a, const rs_ring_member *b)
{
	size_t		common = a->name_len < b->name_len ? a->name_len : b->name_len;
	int			cmp = common > 0 ? memcmp(a->name, b->name, common) : 0;

	if (cmp != 0)
		return cmp;
	return (a->name_len > b->name_len) - (a->name_len < b->name_len);
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

/* Build the bucket table over the top bits of the sorted stored tokens. */
static rs_status
build_buckets(rs_ring *ring, int space_bits)
{
	int			bits = ceil_log2(ring->npoints);

	if (ring->npoints <= RS_RING_NARROW_SCAN_POINTS)
		ring->scan_width = 4;
	else
	{
		ring->scan_width = RS_RING_SCAN_MAX;
		bits -= 3;
	}
	if (bits > space_bits)
		bits = space_bits;
	ring->nbuckets = 1u << bits;
	ring->bucket_shift = 64 - bits;
	ring->buckets = malloc(((size_t) ring->nbuckets + 1) * sizeof(uint32_t));
	if (ring->buckets == NULL)
		return RS_ERR_NOMEM;

	/* buckets[b] = index of the first point whose bucket is >= b */
	{
		uint32_t	point = 0;

		for (uint64_t b = 0; b <= ring->nbuckets; b++)
		{
			while (point < ring->npoints &&
				   (ring->points[point] >> ring->bucket_shift) < b)
				point++;
			ring->buckets[b] = point;
		}
	}
	return RS_OK;
}

/* Free a ring and everything it owns; NULL is fine. */
void
rs_ring_free(rs_ring *ring)
{
	if (ring == NULL)
		return;
	if (ring->names != NULL)
		for (uint32_t i = 0; i < ring->nnodes; i++)
			free(ring->names[i]);
	free(ring->names);
	free(ring->name_lens);
	free(ring->weights);
	free(ring->node_points);
	free(ring->points);
	free(ring->token_low);
	free(ring->labels);
	free(ring->buckets);
	free(ring->replica_sets);
	free(ring);
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

		if (algorithm == RS_RING_MURMUR3)
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
	return RS_OK;
}

/* Hash every label, sort, and split the points into the ring's arrays. */
static rs_status
place_points(rs_ring *ring, const uint32_t *counts, int options)
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
		if (ring->algorithm == RS_RING_MURMUR3)
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
		status = place_points(ring, counts, options);
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
	lo = ring->buckets[bucket];
	hi = ring->buckets[bucket + 1];

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

/* Walk clockwise from a point collecting up to want distinct nodes. */
static rs_status
walk_replicas(const rs_ring *ring, uint32_t start, uint32_t want, uint16_t *out, uint32_t *count)
{
	uint32_t	found = 0;
	unsigned char *seen = NULL;

	/* Small sets scan what they have; large ones keep a seen-map. */
	if (want > 16)
	{
		seen = calloc(ring->nnodes, 1);
		if (seen == NULL)
			return RS_ERR_NOMEM;
	}
	for (uint32_t step = 0; step < ring->npoints && found < want; step++)
	{
		uint32_t	point = start + step;
		uint16_t	node;
		int			taken = 0;

		if (point >= ring->npoints)
			point -= ring->npoints;
		node = (uint16_t) rs_ring_point_owner(ring, point);
		if (seen)
			taken = seen[node];
		else
			for (uint32_t j = 0; j < found && !taken; j++)
				taken = out[j] == node;
		if (!taken)
		{
			out[found++] = node;
			if (seen)
				seen[node] = 1;
		}
	}
	free(seen);
	*count = found;
	return RS_OK;
}

/* The replica set of a hash, beyond rs_ring_replicas' inline case. */
rs_status
rs_ring_replicas_general(const rs_ring *ring, uint64_t hash, uint32_t want,
						 uint16_t *out, uint32_t *count)
{
	uint32_t	start = rs_ring_find_point(ring, hash);

	if (want > ring->nnodes)
		want = ring->nnodes;
	if (ring->replica_sets != NULL && want <= ring->replica_width)
	{
		memcpy(out, ring->replica_sets + (size_t) start * ring->replica_width, want * sizeof(uint16_t));
		*count = want;
		return RS_OK;
	}
	return walk_replicas(ring, start, want, out, count);
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
		rs_status	status = walk_replicas(ring, p, width, sets + (size_t) p * width, &found);

		if (status != RS_OK)
		{
			free(sets);
			return status;
		}
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

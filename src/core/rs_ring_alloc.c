/*
 * rs_ring_alloc.c
 *		Token allocation for a joining node (see rs_ring_alloc.h).
 *
 * State: the ring's points in token order (the new node's points join them
 * as they are chosen), with each point's replica set (the set of the range
 * (previous token, token]) and its reach, the number of points its replica
 * walk examined (REACH_ALL: it examined them all without filling the set,
 * or without every zone represented in its first pass, so that any new
 * point would change it).  The node being placed is a member with no points
 * yet.  A new point x in the gap before point g changes:
 *
 *	- the range (previous, x], which x now owns: its set is the walk from x;
 *	- the range (x, g], only when g's walk goes all the way round (REACH_ALL);
 *	- each earlier range i whose walk reaches g: with d points from i to
 *	  g - 1, those with reach > d.  Walks are short on rings of many nodes,
 *	  so these are few.
 *
 * Copies change linearly in s, the part of the gap x takes, for the first
 * range, and by a constant for the others; the objective is therefore a
 * quadratic in s, minimised in closed form.  When a gap is described, the
 * backward scan and each walk are capped (BACK_CAP, EVAL_WALK_CAP), so that
 * a degenerate ring costs bounded time per gap; a chosen point is applied
 * exactly, without caps.
 */
#include "rs_ring_alloc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rs_hash.h"

#define REACH_ALL UINT32_MAX
#define BACK_CAP 64				/* earlier ranges looked at per gap */
#define EVAL_WALK_CAP 512		/* points one description's walk may examine */
#define MAX_REPLICAS 64

/*
 * Weights of the objective's terms (rs_ring_alloc.h), chosen with the
 * balance part of bench/run (nodes joining one by one up to 1,000, 8 to 32
 * tokens, R = 2 and 3).
 */
#define OWNED_WEIGHT 4.0
#define RANGE_WEIGHT 0.1

/*
 * Gaps kept in the queue per token to place: the best by their first score.
 * A gap far down that list does not become the best while the node's few
 * tokens are placed; keeping the queue short keeps re-scoring cheap.
 */
#define CANDIDATES_PER_TOKEN 16

/* A gap in the queue: the gap that ends at the point with this id. */
typedef struct candidate
{
	double		score;			/* how much the objective drops; larger first */
	uint64_t	token;			/* the gap's end token, for ties */
	uint32_t	id;
	uint32_t	version;		/* stale unless equal to the gap's version */
} candidate;

typedef struct alloc_state
{
	/* points in token order, room for cap */
	uint32_t	np;
	uint32_t	cap;
	uint64_t   *tok;
	uint32_t   *node;
	uint32_t   *reach;
	uint32_t   *pid;			/* stable id of each point */
	uint8_t    *setn;			/* nodes in each point's set */
	uint16_t   *sets;			/* replicas node indexes per point */
	/* by point id */
	uint32_t   *pos_of;
	uint32_t   *version;
	uint32_t	nids;

	/* nodes, room for node_cap; newnode is the node being placed */
	uint32_t	nnodes;
	uint32_t	node_cap;
	uint32_t	newnode;
	uint32_t	nzones;
	uint32_t	zone_cap;
	uint32_t	replicas;
	uint32_t	want;			/* copies per range: min(R, nodes) */
	int			replicated;		/* whether copies depend on placement */
	double	   *weight;
	uint32_t   *zone;
	double	   *target_r;		/* want x weight share */
	double	   *target_o;		/* weight share */
	double	   *load_r;			/* share of the space held (sums to want) */
	double	   *load_o;			/* share owned (sums to 1) */
	double		owned_weight;
	double		range_weight;
	double		mean_range;		/* mean range size once every token is placed */
	double		new_factor;		/* the new node's targets are scaled by this */
	uint32_t	max_reach;

	/* walk marks: taken when equal to the walk's stamp */
	uint32_t	stamp;
	uint32_t   *node_stamp;
	uint32_t   *zone_stamp;
	uint16_t	walk_a[MAX_REPLICAS];
	uint16_t	walk_b[MAX_REPLICAS];

	/* one description's copy changes per node: a + b s */
	uint32_t	slot_round;
	uint32_t   *slot_stamp;
	uint32_t   *slot_of;
	uint32_t   *slot_node;
	double	   *slot_a;
	double	   *slot_b;
	uint32_t	nslots;

	/*
	 * What a point in each gap changes, by gap id, kept until a point
	 * nearby invalidates it: copies of other nodes change by a + b s (pool
	 * entries cache_first .. + cache_count), the new node's by new_a +
	 * new_b s.  Scoring a gap from it needs no walk.
	 */
	uint8_t    *cache_valid;
	uint32_t   *cache_first;
	uint32_t   *cache_count;
	double	   *cache_new_a;
	double	   *cache_new_b;
	uint32_t   *pool_node;
	double	   *pool_a;
	double	   *pool_b;
	size_t		pool_used;
	size_t		pool_cap;
	size_t		pool_live;

	/* the queue: a binary max-heap */
	candidate  *heap;
	size_t		nheap;
	size_t		heap_cap;

	/* names of the zones that have one (the others are a node's own) */
	char	  **zone_names;
	size_t	   *zone_name_lens;
	uint32_t   *zone_name_ids;
	uint32_t	nzone_names;
} alloc_state;

struct rs_token_allocator
{
	alloc_state st;
};

/* ---- small helpers ---- */

static const double two64 = 18446744073709551616.0;

/* Tokens in the range ending at point i, (token of i - 1, token of i]. */
static inline rs_u128
span_of(const alloc_state *st, uint32_t i)
{
	if (i > 0)
		return (rs_u128) (st->tok[i] - st->tok[i - 1]);
	return ((rs_u128) 1 << 64) - st->tok[st->np - 1] + st->tok[0];
}

static inline double
fraction(rs_u128 span)
{
	return (double) span / two64;
}

/* A new walk's stamp, clearing the marks when the counter wraps. */
static inline uint32_t
next_stamp(alloc_state *st)
{
	if (++st->stamp == 0)
	{
		memset(st->node_stamp, 0, st->nnodes * sizeof(uint32_t));
		memset(st->zone_stamp, 0, st->nzones * sizeof(uint32_t));
		st->stamp = 1;
	}
	return st->stamp;
}

/*
 * Node at position e of a walk over the points with, when vgap >= 0, the new
 * node's virtual point just before the point vgap: positions below vgap are
 * points, vgap the virtual one, above it point e - 1.
 */
static inline uint32_t
walk_node(const alloc_state *st, uint32_t e, int64_t vgap)
{
	if (vgap < 0)
		return st->node[e];
	if ((int64_t) e == vgap)
		return st->newnode;
	return st->node[(int64_t) e < vgap ? e : e - 1];
}

/*
 * The replica walk of the contract (§3, §7) from position start, over the
 * points and the virtual point of vgap (if >= 0), examining at most cap
 * positions: 0 if it needed more, else 1 with the set in out[*count] and
 * how far it looked in *reach.
 */
static int
walk(alloc_state *st, uint32_t start, int64_t vgap, uint32_t cap,
	 uint16_t *out, uint32_t *count, uint32_t *reach)
{
	uint32_t	positions = st->np + (vgap >= 0 ? 1 : 0);
	uint32_t	id = next_stamp(st);
	uint32_t	found = 0;
	uint32_t	zones = 0;
	uint32_t	steps;
	uint32_t	k;
	uint32_t	e = start;
	int			exhausted = 0;

	for (k = 0; k < positions && found < st->want && zones < st->nzones; k++)
	{
		uint32_t	u;

		if (k == cap)
			return 0;
		u = walk_node(st, e, vgap);
		if (st->zone_stamp[st->zone[u]] != id)
		{
			/* a zone not represented yet has none of its nodes taken */
			st->zone_stamp[st->zone[u]] = id;
			st->node_stamp[u] = id;
			out[found++] = (uint16_t) u;
			zones++;
		}
		if (++e == positions)
			e = 0;
	}
	steps = k;
	if (k == positions && found < st->want && zones < st->nzones)
		exhausted = 1;
	if (found < st->want)
	{
		e = start;
		for (k = 0; k < positions && found < st->want; k++)
		{
			uint32_t	u;

			if (k == cap)
				return 0;
			u = walk_node(st, e, vgap);
			if (st->node_stamp[u] != id)
			{
				st->node_stamp[u] = id;
				out[found++] = (uint16_t) u;
			}
			if (++e == positions)
				e = 0;
		}
		if (k > steps)
			steps = k;
		if (found < st->want)
			exhausted = 1;
	}
	*count = found;
	*reach = exhausted ? REACH_ALL : steps;
	return 1;
}

/* The set of point i as stored. */
static inline const uint16_t *
set_of(const alloc_state *st, uint32_t i)
{
	return st->sets + (size_t) i * st->replicas;
}

/* Add (sign 1) or take away (-1) point i's range from its set's loads. */
static void
add_set(alloc_state *st, uint32_t i, double sign)
{
	double		span = sign * fraction(span_of(st, i));
	const uint16_t *set = set_of(st, i);

	for (uint32_t j = 0; j < st->setn[i]; j++)
		st->load_r[set[j]] += span;
}

/* Recompute the set and reach of point i, exactly. */
static void
rewalk(alloc_state *st, uint32_t i)
{
	uint32_t	count = 0;
	uint32_t	reach = 0;

	walk(st, i, -1, UINT32_MAX, st->sets + (size_t) i * st->replicas, &count, &reach);
	st->setn[i] = (uint8_t) count;
	st->reach[i] = reach;
	if (reach > st->max_reach)
		st->max_reach = reach;
}

/* ---- describing and scoring a gap ---- */

static void
slots_reset(alloc_state *st)
{
	st->nslots = 0;
	if (++st->slot_round == 0)
	{
		memset(st->slot_stamp, 0, st->nnodes * sizeof(uint32_t));
		st->slot_round = 1;
	}
}

static inline uint32_t
slot(alloc_state *st, uint32_t u)
{
	if (st->slot_stamp[u] != st->slot_round)
	{
		uint32_t	s = st->nslots++;

		st->slot_stamp[u] = st->slot_round;
		st->slot_of[u] = s;
		st->slot_node[s] = u;
		st->slot_a[s] = 0;
		st->slot_b[s] = 0;
	}
	return st->slot_of[u];
}

/*
 * Room for n more pool entries: the valid descriptions' entries are copied
 * into fresh arrays (in id order, dropping the forgotten ones), large enough
 * for twice what is kept and n more.
 */
static rs_status
pool_reserve(alloc_state *st, size_t n)
{
	size_t		cap;
	size_t		used = 0;
	uint32_t   *nodes;
	double	   *as;
	double	   *bs;

	if (st->pool_used + n <= st->pool_cap)
		return RS_OK;
	cap = 2 * (st->pool_live + n) + 1024;
	nodes = malloc(cap * sizeof(uint32_t));
	as = malloc(cap * sizeof(double));
	bs = malloc(cap * sizeof(double));
	if (nodes == NULL || as == NULL || bs == NULL)
	{
		free(nodes);
		free(as);
		free(bs);
		return RS_ERR_NOMEM;
	}
	for (uint32_t id = 0; id < st->nids; id++)
	{
		if (!st->cache_valid[id] || st->cache_count[id] == 0)
			continue;
		memcpy(nodes + used, st->pool_node + st->cache_first[id], st->cache_count[id] * sizeof(uint32_t));
		memcpy(as + used, st->pool_a + st->cache_first[id], st->cache_count[id] * sizeof(double));
		memcpy(bs + used, st->pool_b + st->cache_first[id], st->cache_count[id] * sizeof(double));
		st->cache_first[id] = (uint32_t) used;
		used += st->cache_count[id];
	}
	free(st->pool_node);
	free(st->pool_a);
	free(st->pool_b);
	st->pool_node = nodes;
	st->pool_a = as;
	st->pool_b = bs;
	st->pool_cap = cap;
	st->pool_used = used;
	return RS_OK;
}

/* Forget what a gap changes (a point was placed near it). */
static inline void
invalidate_gap(alloc_state *st, uint32_t id)
{
	if (st->cache_valid[id])
	{
		st->cache_valid[id] = 0;
		st->pool_live -= st->cache_count[id];
	}
}

/*
 * Work out, from the replica walks, what a point of the new node in the gap
 * before point g changes (see the comment at the top), and keep it.
 */
static rs_status
describe_gap(alloc_state *st, uint32_t g)
{
	uint32_t	np = st->np;
	uint32_t	id = st->pid[g];
	double		gap_fraction = fraction(span_of(st, g));
	rs_status	status;

	slots_reset(st);
	if (st->replicated)
	{
		uint32_t	count;
		uint32_t	reach;
		uint32_t	back;
		const uint16_t *old = set_of(st, g);

		/* the range x takes: its set is the walk from x */
		walk(st, g, g, UINT32_MAX, st->walk_a, &count, &reach);
		for (uint32_t j = 0; j < count; j++)
			st->slot_b[slot(st, st->walk_a[j])] += 1;
		/* the rest of the gap keeps g's set unless g's walk goes round */
		if (st->reach[g] == REACH_ALL &&
			walk(st, g + 1, g, EVAL_WALK_CAP, st->walk_b, &count, &reach))
		{
			for (uint32_t j = 0; j < count; j++)
			{
				uint32_t	k = slot(st, st->walk_b[j]);

				st->slot_a[k] += gap_fraction;
				st->slot_b[k] -= 1;
			}
			for (uint32_t j = 0; j < st->setn[g]; j++)
				st->slot_a[slot(st, old[j])] -= gap_fraction;
		}
		else
			for (uint32_t j = 0; j < st->setn[g]; j++)
				st->slot_b[slot(st, old[j])] -= 1;

		/* earlier ranges whose walk reaches the gap */
		back = st->max_reach < BACK_CAP ? st->max_reach : BACK_CAP;
		if (back > np - 1)
			back = np - 1;
		for (uint32_t d = 1; d <= back; d++)
		{
			uint32_t	i = g >= d ? g - d : g + np - d;
			double		span;
			const uint16_t *before = set_of(st, i);

			if (st->reach[i] <= d)
				continue;
			if (!walk(st, i < g ? i : i + 1, g, EVAL_WALK_CAP, st->walk_b, &count, &reach))
				continue;
			span = fraction(span_of(st, i));
			for (uint32_t j = 0; j < count; j++)
				st->slot_a[slot(st, st->walk_b[j])] += span;
			for (uint32_t j = 0; j < st->setn[i]; j++)
				st->slot_a[slot(st, before[j])] -= span;
		}
	}

	invalidate_gap(st, id);
	status = pool_reserve(st, st->nslots);
	if (status != RS_OK)
		return status;
	st->cache_first[id] = (uint32_t) st->pool_used;
	st->cache_count[id] = 0;
	st->cache_new_a[id] = 0;
	st->cache_new_b[id] = 0;
	for (uint32_t k = 0; k < st->nslots; k++)
	{
		uint32_t	u = st->slot_node[k];

		if (st->slot_a[k] == 0 && st->slot_b[k] == 0)
			continue;
		if (u == st->newnode)
		{
			st->cache_new_a[id] = st->slot_a[k];
			st->cache_new_b[id] = st->slot_b[k];
			continue;
		}
		st->pool_node[st->pool_used] = u;
		st->pool_a[st->pool_used] = st->slot_a[k];
		st->pool_b[st->pool_used] = st->slot_b[k];
		st->pool_used++;
		st->cache_count[id]++;
	}
	st->pool_live += st->cache_count[id];
	st->cache_valid[id] = 1;
	return RS_OK;
}

/*
 * Score the gap before point g: the best place x in it, and how much the
 * objective drops with a point of the new node there (larger is better);
 * -INFINITY when the gap has no room.  Uses, or first makes, the gap's
 * description.
 */
static double
score_gap(alloc_state *st, uint32_t g, uint64_t *x_out, rs_status *status)
{
	uint32_t	np = st->np;
	uint32_t	id = st->pid[g];
	rs_u128		gap = span_of(st, g);
	double		gap_fraction;
	double		qa = 0,
				qb = 0,
				qc = 0;
	double		s;
	double		lo,
				hi;
	double		offset;
	uint64_t	step;
	uint32_t	owner = st->node[g];
	uint32_t	n = st->newnode;

	*status = RS_OK;
	/*
	 * No room, or a range the node owns already: a point there changes no
	 * replica set (the walks meet the node a little earlier, that is all).
	 */
	if (gap < 2 || owner == n)
		return -INFINITY;
	if (!st->cache_valid[id])
	{
		*status = describe_gap(st, g);
		if (*status != RS_OK)
			return -INFINITY;
	}
	gap_fraction = fraction(gap);

	/* F(s) - F(0) = qa s^2 + qb s + qc; first the copies */
	if (st->replicated)
	{
		double		tr = st->target_r[n] * st->new_factor;
		double		a = st->cache_new_a[id];
		double		b = st->cache_new_b[id];
		double		l = st->load_r[n];

		for (uint32_t k = 0; k < st->cache_count[id]; k++)
		{
			uint32_t	e = st->cache_first[id] + k;
			uint32_t	u = st->pool_node[e];
			double		ur = st->target_r[u];
			double		ua = st->pool_a[e];
			double		ub = st->pool_b[e];
			double		ul = st->load_r[u];

			qa += ub * ub / ur;
			qb += 2 * (ul + ua) * ub / ur;
			qc += ((ul + ua) * (ul + ua) - ul * ul) / ur;
		}
		qa += b * b / tr;
		qb += 2 * (l + a) * b / tr;
		qc += ((l + a) * (l + a) - l * l) / tr;
	}
	/* first copies: x takes s of the gap from g's owner */
	{
		double		to_owner = st->target_o[owner];
		double		to_new = st->target_o[n] * st->new_factor;

		qa += st->owned_weight * (1 / to_owner + 1 / to_new);
		qb += st->owned_weight * 2 * (st->load_o[n] / to_new - st->load_o[owner] / to_owner);
	}

	/*
	 * Ranges of even size: splitting the gap G into s and G - s changes the
	 * sum of squared range sizes by 2 s^2 - 2 G s.  Without this a large
	 * range whose nodes are balanced for now is never split, and as the
	 * ring grows (every node's share shrinks, the range does not) its nodes
	 * end up loaded most.
	 */
	qa += st->range_weight * 2 / st->mean_range;
	qb -= st->range_weight * 2 * gap_fraction / st->mean_range;

	/* s within the gap, leaving at least one token on each side */
	lo = 1.0 / two64;
	hi = gap_fraction - 1.0 / two64;
	s = qa > 0 ? -qb / (2 * qa) : hi;
	if (!(s > lo))
		s = lo;
	if (s > hi)
		s = hi;
	offset = s * two64;
	if (offset >= two64)
		step = UINT64_MAX;
	else if (offset < 1)
		step = 1;
	else
		step = (uint64_t) offset;
	if ((rs_u128) step >= gap)
		step = (uint64_t) (gap - 1);
	s = fraction(step);
	*x_out = (g > 0 ? st->tok[g - 1] : st->tok[np - 1]) + step;
	return -(qa * s * s + qb * s + qc);
}

/* ---- the queue ---- */

/* Whether a comes before b: larger score, then smaller token, then id. */
static inline int
before(const candidate *a, const candidate *b)
{
	if (a->score != b->score)
		return a->score > b->score;
	if (a->token != b->token)
		return a->token < b->token;
	return a->id < b->id;
}

static rs_status
heap_push(alloc_state *st, candidate c)
{
	size_t		i;

	if (st->nheap == st->heap_cap)
	{
		size_t		cap = st->heap_cap ? st->heap_cap * 2 : 256;
		candidate  *grown = realloc(st->heap, cap * sizeof(candidate));

		if (grown == NULL)
			return RS_ERR_NOMEM;
		st->heap = grown;
		st->heap_cap = cap;
	}
	i = st->nheap++;
	while (i > 0 && before(&c, &st->heap[(i - 1) / 2]))
	{
		st->heap[i] = st->heap[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	st->heap[i] = c;
	return RS_OK;
}

static candidate
heap_pop(alloc_state *st)
{
	candidate	top = st->heap[0];
	candidate	last = st->heap[--st->nheap];
	size_t		i = 0;

	for (;;)
	{
		size_t		child = 2 * i + 1;

		if (child >= st->nheap)
			break;
		if (child + 1 < st->nheap && before(&st->heap[child + 1], &st->heap[child]))
			child++;
		if (!before(&st->heap[child], &last))
			break;
		st->heap[i] = st->heap[child];
		i = child;
	}
	if (st->nheap > 0)
		st->heap[i] = last;
	return top;
}

/* Drop stale entries from the top. */
static void
heap_clean_top(alloc_state *st)
{
	while (st->nheap > 0 && st->heap[0].version != st->version[st->heap[0].id])
		(void) heap_pop(st);
}

/* Score the gap before position g and queue it, replacing its entry. */
static rs_status
queue_gap(alloc_state *st, uint32_t g)
{
	candidate	c;
	uint64_t	x;
	rs_status	status;

	c.id = st->pid[g];
	c.version = ++st->version[c.id];
	c.token = st->tok[g];
	c.score = score_gap(st, g, &x, &status);
	if (status != RS_OK)
		return status;
	if (c.score == -INFINITY)
		return RS_OK;			/* no room: never a candidate */
	return heap_push(st, c);
}

/* ---- placing a point ---- */

/*
 * Insert the new node's point x into the gap before position g, updating
 * loads exactly; *inserted gets its position.  affected is scratch room for
 * np indexes.  Room for the point must have been made.
 */
static void
apply_point(alloc_state *st, uint32_t g, uint64_t x, uint32_t *affected, uint32_t *inserted)
{
	uint32_t	np = st->np;
	uint32_t	naffected = 0;
	uint32_t	pos;
	uint64_t	prev = g > 0 ? st->tok[g - 1] : st->tok[np - 1];
	double		taken = fraction((rs_u128) (uint64_t) (x - prev));
	uint32_t	id = st->nids++;

	if (st->replicated)
	{
		uint32_t	back = st->max_reach < np - 1 ? st->max_reach : np - 1;

		for (uint32_t d = 1; d <= back; d++)
		{
			uint32_t	i = g >= d ? g - d : g + np - d;

			if (st->reach[i] > d)
				affected[naffected++] = i;
		}
		for (uint32_t k = 0; k < naffected; k++)
			add_set(st, affected[k], -1);
		add_set(st, g, -1);
	}
	st->load_o[st->node[g]] -= taken;
	st->load_o[st->newnode] += taken;

	/* insert in token order: the wrapping gap puts x first or last */
	pos = g > 0 ? g : (x > st->tok[np - 1] ? np : 0);
	memmove(st->tok + pos + 1, st->tok + pos, (np - pos) * sizeof(uint64_t));
	memmove(st->node + pos + 1, st->node + pos, (np - pos) * sizeof(uint32_t));
	memmove(st->reach + pos + 1, st->reach + pos, (np - pos) * sizeof(uint32_t));
	memmove(st->pid + pos + 1, st->pid + pos, (np - pos) * sizeof(uint32_t));
	memmove(st->setn + pos + 1, st->setn + pos, (np - pos) * sizeof(uint8_t));
	if (st->replicated)
		memmove(st->sets + (size_t) (pos + 1) * st->replicas, st->sets + (size_t) pos * st->replicas,
				(size_t) (np - pos) * st->replicas * sizeof(uint16_t));
	st->tok[pos] = x;
	st->node[pos] = st->newnode;
	st->pid[pos] = id;
	st->setn[pos] = 0;
	st->reach[pos] = 0;
	st->np = ++np;
	st->version[id] = 0;
	st->cache_valid[id] = 0;
	st->cache_count[id] = 0;
	for (uint32_t j = pos; j < np; j++)
		st->pos_of[st->pid[j]] = j;
	if (g >= pos)
		g++;
	for (uint32_t k = 0; k < naffected; k++)
		if (affected[k] >= pos)
			affected[k]++;

	if (st->replicated)
	{
		rewalk(st, pos);
		add_set(st, pos, 1);
		rewalk(st, g);
		add_set(st, g, 1);
		for (uint32_t k = 0; k < naffected; k++)
		{
			rewalk(st, affected[k]);
			add_set(st, affected[k], 1);
		}
	}
	*inserted = pos;
}

/*
 * Forget the descriptions of the gaps within reach of position pos (at most
 * BACK_CAP + 2 points either side): a point there changed their walks.
 * With requeue, score and queue them again.
 */
static rs_status
refresh_around(alloc_state *st, uint32_t pos, int requeue)
{
	uint32_t	window = (st->max_reach < BACK_CAP ? st->max_reach : BACK_CAP) + 2;
	rs_status	status = RS_OK;

	if (2 * window + 1 >= st->np)
	{
		for (uint32_t q = 0; q < st->np && status == RS_OK; q++)
		{
			invalidate_gap(st, st->pid[q]);
			if (requeue)
				status = queue_gap(st, q);
		}
		return status;
	}
	for (uint32_t d = 0; d <= 2 * window && status == RS_OK; d++)
	{
		uint32_t	q = (pos + st->np - window + d) % st->np;

		invalidate_gap(st, st->pid[q]);
		if (requeue)
			status = queue_gap(st, q);
	}
	return status;
}

#ifdef RS_ALLOC_CHECK
#include <stdio.h>

/*
 * Tests only (-DRS_ALLOC_CHECK): the loads kept incrementally must equal
 * those recomputed from every point's walk, and every kept description what
 * describing the gap again gives.
 */
static void
check_state(alloc_state *st)
{
	double	   *lr = calloc(st->nnodes, sizeof(double));
	double	   *lo = calloc(st->nnodes, sizeof(double));
	uint16_t	set[MAX_REPLICAS];

	for (uint32_t i = 0; i < st->np; i++)
	{
		uint32_t	count,
					reach;
		double		span = fraction(span_of(st, i));

		lo[st->node[i]] += span;
		if (!st->replicated)
			continue;
		walk(st, i, -1, UINT32_MAX, set, &count, &reach);
		if (count != st->setn[i] || memcmp(set, set_of(st, i), count * sizeof(uint16_t)) != 0 ||
			reach != st->reach[i])
		{
			fprintf(stderr, "rs_ring_alloc: point %u: stored set or reach is stale\n", i);
			abort();
		}
		for (uint32_t j = 0; j < count; j++)
			lr[set[j]] += span;
	}
	for (uint32_t u = 0; u < st->nnodes; u++)
		if (fabs(lo[u] - st->load_o[u]) > 1e-9 ||
			(st->replicated && fabs(lr[u] - st->load_r[u]) > 1e-9))
		{
			fprintf(stderr, "rs_ring_alloc: node %u: load %g/%g, recomputed %g/%g\n", u,
					st->load_r[u], st->load_o[u], lr[u], lo[u]);
			abort();
		}
	if (st->max_reach <= BACK_CAP)
		for (uint32_t g = 0; g < st->np; g++)
		{
			uint32_t	id = st->pid[g];
			uint32_t	first = st->cache_first[id];
			uint32_t	n = st->cache_count[id];
			double		na = st->cache_new_a[id];
			double		nb = st->cache_new_b[id];
			uint32_t	kept_nodes[4 * MAX_REPLICAS];
			double		kept_a[4 * MAX_REPLICAS];
			double		kept_b[4 * MAX_REPLICAS];
			int			same;

			if (!st->cache_valid[id] || n > 4 * MAX_REPLICAS)
				continue;
			if (n > 0)
			{
				memcpy(kept_nodes, st->pool_node + first, n * sizeof(uint32_t));
				memcpy(kept_a, st->pool_a + first, n * sizeof(double));
				memcpy(kept_b, st->pool_b + first, n * sizeof(double));
			}
			if (describe_gap(st, g) != RS_OK)
				abort();
			first = st->cache_first[id];
			same = st->cache_count[id] == n && fabs(st->cache_new_a[id] - na) < 1e-12 &&
				fabs(st->cache_new_b[id] - nb) < 1e-12;
			for (uint32_t k = 0; same && k < n; k++)
				same = st->pool_node[first + k] == kept_nodes[k] &&
					fabs(st->pool_a[first + k] - kept_a[k]) < 1e-12 &&
					fabs(st->pool_b[first + k] - kept_b[k]) < 1e-12;
			if (!same)
			{
				fprintf(stderr, "rs_ring_alloc: gap %u: kept description is stale\n", g);
				abort();
			}
		}
	free(lr);
	free(lo);
}
#endif

/* ---- the state: setting up and growing ---- */

static void
free_state(alloc_state *st)
{
	free(st->tok);
	free(st->node);
	free(st->reach);
	free(st->pid);
	free(st->setn);
	free(st->sets);
	free(st->pos_of);
	free(st->version);
	free(st->weight);
	free(st->zone);
	free(st->target_r);
	free(st->target_o);
	free(st->load_r);
	free(st->load_o);
	free(st->node_stamp);
	free(st->zone_stamp);
	free(st->slot_stamp);
	free(st->slot_of);
	free(st->slot_node);
	free(st->slot_a);
	free(st->slot_b);
	free(st->cache_valid);
	free(st->cache_first);
	free(st->cache_count);
	free(st->cache_new_a);
	free(st->cache_new_b);
	free(st->pool_node);
	free(st->pool_a);
	free(st->pool_b);
	free(st->heap);
	for (uint32_t z = 0; z < st->nzone_names; z++)
		free(st->zone_names[z]);
	free(st->zone_names);
	free(st->zone_name_lens);
	free(st->zone_name_ids);
	memset(st, 0, sizeof(*st));
}

/* realloc an array field to bytes, returning RS_ERR_NOMEM on failure (it stays as it was). */
#define GROW(field, bytes) \
	do { \
		size_t		bytes_ = (bytes); \
		void	   *grown_ = realloc((field), bytes_ > 0 ? bytes_ : 1); \
		if (grown_ == NULL) \
			return RS_ERR_NOMEM; \
		(field) = grown_; \
	} while (0)

/* Room for points: cap at least wanted (every array by point or id). */
static rs_status
reserve_points(alloc_state *st, uint32_t wanted)
{
	size_t		cap = wanted;
	uint32_t	old = st->cap;

	if (wanted <= st->cap)
		return RS_OK;
	if (cap < (size_t) st->cap * 2)
		cap = (size_t) st->cap * 2;
	if (cap > RS_RING_MAX_POINTS)
		cap = RS_RING_MAX_POINTS;
	if (cap < wanted)
		return RS_ERR_TOO_MANY_POINTS;
	GROW(st->tok, cap * sizeof(uint64_t));
	GROW(st->node, cap * sizeof(uint32_t));
	GROW(st->reach, cap * sizeof(uint32_t));
	GROW(st->pid, cap * sizeof(uint32_t));
	GROW(st->setn, cap * sizeof(uint8_t));
	GROW(st->sets, cap * st->replicas * sizeof(uint16_t));
	GROW(st->pos_of, cap * sizeof(uint32_t));
	GROW(st->version, cap * sizeof(uint32_t));
	GROW(st->cache_valid, cap * sizeof(uint8_t));
	GROW(st->cache_first, cap * sizeof(uint32_t));
	GROW(st->cache_count, cap * sizeof(uint32_t));
	GROW(st->cache_new_a, cap * sizeof(double));
	GROW(st->cache_new_b, cap * sizeof(double));
	memset(st->cache_valid + old, 0, cap - old);
	memset(st->version + old, 0, (cap - old) * sizeof(uint32_t));
	st->cap = (uint32_t) cap;
	return RS_OK;
}

/* Room for nodes and zones (every array by node or zone). */
static rs_status
reserve_nodes(alloc_state *st, uint32_t nodes, uint32_t zones)
{
	if (nodes > st->node_cap)
	{
		size_t		cap = nodes < 2 * st->node_cap ? 2 * st->node_cap : nodes;
		uint32_t	old = st->node_cap;

		GROW(st->weight, cap * sizeof(double));
		GROW(st->zone, cap * sizeof(uint32_t));
		GROW(st->target_r, cap * sizeof(double));
		GROW(st->target_o, cap * sizeof(double));
		GROW(st->load_r, cap * sizeof(double));
		GROW(st->load_o, cap * sizeof(double));
		GROW(st->node_stamp, cap * sizeof(uint32_t));
		GROW(st->slot_stamp, cap * sizeof(uint32_t));
		GROW(st->slot_of, cap * sizeof(uint32_t));
		GROW(st->slot_node, cap * sizeof(uint32_t));
		GROW(st->slot_a, cap * sizeof(double));
		GROW(st->slot_b, cap * sizeof(double));
		memset(st->node_stamp + old, 0, (cap - old) * sizeof(uint32_t));
		memset(st->slot_stamp + old, 0, (cap - old) * sizeof(uint32_t));
		memset(st->load_r + old, 0, (cap - old) * sizeof(double));
		memset(st->load_o + old, 0, (cap - old) * sizeof(double));
		st->node_cap = (uint32_t) cap;
	}
	if (zones > st->zone_cap)
	{
		size_t		cap = zones < 2 * st->zone_cap ? 2 * st->zone_cap : zones;
		uint32_t	old = st->zone_cap;

		GROW(st->zone_stamp, cap * sizeof(uint32_t));
		memset(st->zone_stamp + old, 0, (cap - old) * sizeof(uint32_t));
		st->zone_cap = (uint32_t) cap;
	}
	return RS_OK;
}

/* The zone id of a zone name, or a new one (NULL: a zone of its own). */
static rs_status
zone_id(alloc_state *st, const char *zone, size_t len, uint32_t *id)
{
	char	   *copy;

	if (zone != NULL)
		for (uint32_t z = 0; z < st->nzone_names; z++)
			if (st->zone_name_lens[z] == len && memcmp(st->zone_names[z], zone, len) == 0)
			{
				*id = st->zone_name_ids[z];
				return RS_OK;
			}
	if (zone != NULL)
	{
		GROW(st->zone_names, (st->nzone_names + 1) * sizeof(char *));
		GROW(st->zone_name_lens, (st->nzone_names + 1) * sizeof(size_t));
		GROW(st->zone_name_ids, (st->nzone_names + 1) * sizeof(uint32_t));
		copy = malloc(len + 1);
		if (copy == NULL)
			return RS_ERR_NOMEM;
		memcpy(copy, zone, len);
		copy[len] = '\0';
		st->zone_names[st->nzone_names] = copy;
		st->zone_name_lens[st->nzone_names] = len;
		st->zone_name_ids[st->nzone_names] = st->nzones;
		st->nzone_names++;
	}
	*id = st->nzones;
	return RS_OK;
}

/*
 * Loads afresh from the points and their sets, in point order (kept up to
 * date point by point, they drift by rounding), and the longest reach.
 */
static void
recompute_loads(alloc_state *st)
{
	st->max_reach = 0;
	for (uint32_t u = 0; u < st->nnodes; u++)
	{
		st->load_o[u] = 0;
		st->load_r[u] = 0;
	}
	for (uint32_t i = 0; i < st->np; i++)
	{
		st->load_o[st->node[i]] += fraction(span_of(st, i));
		if (st->replicated)
		{
			add_set(st, i, 1);
			if (st->reach[i] > st->max_reach)
				st->max_reach = st->reach[i];
		}
	}
}

/*
 * Copies per range, and whether placement changes them: set and reach of
 * every point afresh, and the loads; every description forgotten.
 */
static void
recompute_copies(alloc_state *st)
{
	st->want = st->replicas < st->nnodes ? st->replicas : st->nnodes;
	st->replicated = st->nnodes > st->replicas;
	st->max_reach = 0;
	for (uint32_t u = 0; u < st->nnodes; u++)
		st->load_r[u] = 0;
	for (uint32_t id = 0; id < st->nids; id++)
		invalidate_gap(st, id);
	st->pool_used = 0;
	for (uint32_t i = 0; i < st->np; i++)
	{
		if (st->replicated)
			rewalk(st, i);
		else
		{
			st->setn[i] = 0;
			st->reach[i] = 0;
		}
	}
	recompute_loads(st);
}

/*
 * Add a node with no points yet (the node to place next), with its weight
 * and zone.  The copies of the ranges change only if the copies per range
 * do, or if a zone was added to a ring where some zone has several nodes
 * (a first pass could then have stopped with every zone represented).
 */
static rs_status
add_member(alloc_state *st, double weight, const char *zone, size_t zone_len, uint32_t *index)
{
	uint32_t	zid;
	uint32_t	want_before = st->want;
	int			replicated_before = st->replicated;
	int			zones_shared = st->nzones < st->nnodes;
	int			new_zone;
	rs_status	status = reserve_nodes(st, st->nnodes + 1, st->nzones + 1);

	if (status == RS_OK)
		status = zone_id(st, zone, zone_len, &zid);
	if (status != RS_OK)
		return status;
	new_zone = zid == st->nzones;
	*index = st->nnodes++;
	st->weight[*index] = weight;
	st->zone[*index] = zid;
	st->load_r[*index] = 0;
	st->load_o[*index] = 0;
	st->node_stamp[*index] = 0;
	st->slot_stamp[*index] = 0;
	if (new_zone)
		st->nzones++;
	if ((st->replicas < st->nnodes ? st->replicas : st->nnodes) != want_before ||
		(st->nnodes > st->replicas) != replicated_before ||
		(new_zone && zones_shared))
		recompute_copies(st);
	return RS_OK;
}

/* Targets from the weights: each node's share, and want times it. */
static void
set_targets(alloc_state *st)
{
	double		total = 0;

	for (uint32_t u = 0; u < st->nnodes; u++)
		total += st->weight[u];
	for (uint32_t u = 0; u < st->nnodes; u++)
	{
		st->target_o[u] = st->weight[u] / total;
		st->target_r[u] = (double) st->want * st->weight[u] / total;
	}
}

/*
 * Place count points for node st->newnode (a member with no points), into
 * tokens_out in the order chosen.  On an empty ring, count tokens evenly
 * spaced from the token of name.
 */
static rs_status
place_tokens(alloc_state *st, const char *name, size_t name_len, uint32_t count,
			 uint64_t *tokens_out)
{
	uint32_t   *affected = NULL;
	rs_status	status;

	if ((uint64_t) st->np + count > RS_RING_MAX_POINTS)
		return RS_ERR_TOO_MANY_POINTS;
	status = reserve_points(st, st->np + count);
	if (status != RS_OK)
		return status;

	if (st->np == 0)
	{
		uint64_t	start = rs_murmur3_token(name, name_len);
		rs_u128		step = ((rs_u128) 1 << 64) / count;

		for (uint32_t k = 0; k < count; k++)
			tokens_out[k] = start + (uint64_t) (step * k);
		memcpy(st->tok, tokens_out, count * sizeof(uint64_t));
		qsort(st->tok, count, sizeof(uint64_t), rs_ring_compare_tokens);
		for (uint32_t i = 0; i < count; i++)
		{
			st->node[i] = st->newnode;
			st->pid[i] = i;
			st->pos_of[i] = i;
			st->version[i] = 0;
			st->cache_valid[i] = 0;
		}
		st->np = count;
		st->nids = count;
		recompute_copies(st);
		recompute_loads(st);
		return RS_OK;
	}

	affected = malloc(((size_t) st->np + count + 1) * sizeof(uint32_t));
	if (affected == NULL)
		return RS_ERR_NOMEM;
	set_targets(st);
	st->owned_weight = !st->replicated ? 1 :
		st->replicas > 1 ? OWNED_WEIGHT * (double) st->want : 0;
	st->range_weight = RANGE_WEIGHT * (st->replicated ? (double) st->want : 1.0);
	st->mean_range = 1.0 / ((double) st->np + count);
	st->new_factor = 1.0 / count;
	st->nheap = 0;

	/* every gap scored, the best CANDIDATES_PER_TOKEN x count kept */
	for (uint32_t g = 0; g < st->np && status == RS_OK; g++)
		status = queue_gap(st, g);
	if (status == RS_OK && st->nheap > (size_t) CANDIDATES_PER_TOKEN * count)
	{
		size_t		keep = (size_t) CANDIDATES_PER_TOKEN * count;
		candidate  *kept = malloc(keep * sizeof(candidate));

		if (kept == NULL)
			status = RS_ERR_NOMEM;
		else
		{
			size_t		nkept = 0;

			while (nkept < keep && st->nheap > 0)
				kept[nkept++] = heap_pop(st);
			for (size_t i = 0; i < st->nheap; i++)
				st->version[st->heap[i].id]++;
			st->nheap = 0;
			for (size_t i = 0; i < nkept && status == RS_OK; i++)
				status = heap_push(st, kept[i]);
			free(kept);
		}
	}

	for (uint32_t k = 0; k < count && status == RS_OK; k++)
	{
		/*
		 * Scores in the queue are from before the last points were placed
		 * (the node's own load has grown since): take the top, score it
		 * again, and hold the best so far out of the queue until it is at
		 * least the next score in the queue.
		 */
		candidate	best;
		uint64_t	best_x = 0;
		int			have_best = 0;
		uint32_t	pos;

		st->new_factor = (double) (k + 1) / count;
		memset(&best, 0, sizeof(best));
		for (;;)
		{
			candidate	c;
			uint64_t	x;

			heap_clean_top(st);
			if (st->nheap == 0 || (have_best && !before(&st->heap[0], &best)))
				break;
			c = heap_pop(st);
			c.score = score_gap(st, st->pos_of[c.id], &x, &status);
			if (status != RS_OK)
				break;
			if (c.score == -INFINITY)
			{
				st->version[c.id]++;
				continue;
			}
			if (have_best && !before(&c, &best))
			{
				c.version = ++st->version[c.id];
				status = heap_push(st, c);
			}
			else
			{
				if (have_best)
				{
					best.version = ++st->version[best.id];
					status = heap_push(st, best);
				}
				best = c;
				best_x = x;
				have_best = 1;
			}
			if (status != RS_OK)
				break;
		}
		if (status != RS_OK)
			break;
		if (!have_best)
		{
			status = RS_ERR_TOO_MANY_POINTS;	/* no gap left to split */
			break;
		}
		st->version[best.id]++;
		apply_point(st, st->pos_of[best.id], best_x, affected, &pos);
		tokens_out[k] = best_x;
		status = refresh_around(st, pos, 1);
#ifdef RS_ALLOC_CHECK
		check_state(st);
#endif
	}
	free(affected);
	if (status != RS_OK)
		return status;

	/*
	 * The node's points are ordinary points from now on: the descriptions
	 * near them took them for the new node's.
	 */
	for (uint32_t i = 0; i < st->np; i++)
		if (st->node[i] == st->newnode)
			(void) refresh_around(st, i, 0);
	recompute_loads(st);
	st->nheap = 0;
	return RS_OK;
}

/* Whether a node description is one the allocation takes. */
static int
node_valid(const rs_ring_member *node)
{
	return node != NULL && node->name != NULL && node->name_len > 0 &&
		node->name_len <= RS_RING_MAX_NAME && isfinite(node->weight) && node->weight > 0 &&
		(node->zone == NULL || (node->zone_len > 0 && node->zone_len <= RS_RING_MAX_NAME));
}

/* ---- the entry points ---- */

/* Choose the tokens (see rs_ring_alloc.h). */
rs_status
rs_ring_allocate_tokens(const rs_ring_member *members, size_t nmembers, uint32_t vnodes,
						uint32_t replicas, const rs_ring_member *node, uint32_t count,
						uint64_t *tokens_out, long *bad_member)
{
	rs_ring_member *others = NULL;
	size_t	   *other_index = NULL;
	size_t		nothers = 0;
	rs_ring    *ring = NULL;
	alloc_state st;
	uint64_t   *chosen = NULL;
	uint32_t	newnode;
	long		bad = -1;
	rs_status	status = RS_OK;

	if (bad_member)
		*bad_member = -1;
	memset(&st, 0, sizeof(st));
	if (count < 1 || count > RS_RING_MAX_TOKENS || replicas < 1 || replicas > MAX_REPLICAS ||
		!node_valid(node))
		return RS_ERR_INVALID;

	others = malloc((nmembers + 1) * sizeof(rs_ring_member));
	other_index = malloc((nmembers + 1) * sizeof(size_t));
	chosen = malloc((size_t) count * sizeof(uint64_t));
	if (others == NULL || other_index == NULL || chosen == NULL)
	{
		status = RS_ERR_NOMEM;
		goto done;
	}
	for (size_t i = 0; i < nmembers; i++)
		if (members[i].name_len != node->name_len ||
			memcmp(members[i].name, node->name, node->name_len) != 0)
		{
			other_index[nothers] = i;
			others[nothers++] = members[i];
		}
	if (nothers + 1 > RS_RING_MAX_NODES)
	{
		status = RS_ERR_TOO_MANY_NODES;
		goto done;
	}
	if (nothers > 0)
	{
		status = rs_ring_build(RS_RING_MURMUR3, others, nothers, vnodes, 0, &ring, &bad);
		if (status != RS_OK)
		{
			if (bad_member && bad >= 0)
				*bad_member = (long) other_index[bad];
			goto done;
		}
		if ((uint64_t) ring->npoints + count > RS_RING_MAX_POINTS)
		{
			status = RS_ERR_TOO_MANY_POINTS;
			goto done;
		}
	}

	/* the state of the other members' ring (their zones by name), then the node */
	st.replicas = replicas;
	if (ring != NULL)
	{
		status = reserve_points(&st, ring->npoints + count);
		if (status == RS_OK)
			status = reserve_nodes(&st, ring->nnodes + 1, ring->nzones + 1);
		for (uint32_t u = 0; u < ring->nnodes && status == RS_OK; u++)
		{
			const char *zone = rs_ring_zone_name(ring, u);
			uint32_t	zid;

			status = zone_id(&st, zone, zone ? strlen(zone) : 0, &zid);
			if (status != RS_OK)
				break;
			st.weight[u] = ring->weights[u];
			st.zone[u] = zid;
			if (zid == st.nzones)
				st.nzones++;
		}
		if (status != RS_OK)
			goto done;
		st.nnodes = ring->nnodes;
		for (uint32_t i = 0; i < ring->npoints; i++)
		{
			st.tok[i] = rs_ring_token(ring, i);
			st.node[i] = rs_ring_point_owner(ring, i);
			st.pid[i] = i;
			st.pos_of[i] = i;
		}
		st.np = ring->npoints;
		st.nids = ring->npoints;
		recompute_copies(&st);
		recompute_loads(&st);
	}
	status = add_member(&st, node->weight, node->zone, node->zone_len, &newnode);
	if (status != RS_OK)
		goto done;
	st.newnode = newnode;
	status = place_tokens(&st, node->name, node->name_len, count, chosen);
	if (status == RS_OK)
	{
		qsort(chosen, count, sizeof(uint64_t), rs_ring_compare_tokens);
		memcpy(tokens_out, chosen, (size_t) count * sizeof(uint64_t));
	}

done:
	free_state(&st);
	rs_ring_free(ring);
	free(others);
	free(other_index);
	free(chosen);
	return status;
}

rs_status
rs_token_allocator_create(uint32_t replicas, rs_token_allocator **out)
{
	rs_token_allocator *allocator;

	*out = NULL;
	if (replicas < 1 || replicas > MAX_REPLICAS)
		return RS_ERR_INVALID;
	allocator = calloc(1, sizeof(rs_token_allocator));
	if (allocator == NULL)
		return RS_ERR_NOMEM;
	allocator->st.replicas = replicas;
	*out = allocator;
	return RS_OK;
}

rs_status
rs_token_allocator_add(rs_token_allocator *allocator, const rs_ring_member *node,
					   uint32_t count, uint64_t *tokens_out)
{
	alloc_state *st = &allocator->st;
	uint64_t   *chosen;
	uint32_t	newnode;
	rs_status	status;

	if (count < 1 || count > RS_RING_MAX_TOKENS || !node_valid(node))
		return RS_ERR_INVALID;
	if (st->nnodes + 1 > RS_RING_MAX_NODES)
		return RS_ERR_TOO_MANY_NODES;
	if ((uint64_t) st->np + count > RS_RING_MAX_POINTS)
		return RS_ERR_TOO_MANY_POINTS;
	chosen = malloc((size_t) count * sizeof(uint64_t));
	if (chosen == NULL)
		return RS_ERR_NOMEM;
	/* room first, so that nothing below fails half way on memory */
	status = reserve_points(st, st->np + count);
	if (status == RS_OK)
		status = reserve_nodes(st, st->nnodes + 1, st->nzones + 1);
	if (status == RS_OK)
		status = add_member(st, node->weight, node->zone, node->zone_len, &newnode);
	if (status == RS_OK)
	{
		st->newnode = newnode;
		status = place_tokens(st, node->name, node->name_len, count, chosen);
	}
	if (status == RS_OK)
	{
		qsort(chosen, count, sizeof(uint64_t), rs_ring_compare_tokens);
		memcpy(tokens_out, chosen, (size_t) count * sizeof(uint64_t));
	}
	free(chosen);
	return status;
}

void
rs_token_allocator_free(rs_token_allocator *allocator)
{
	if (allocator == NULL)
		return;
	free_state(&allocator->st);
	free(allocator);
}

/*
 * rs_ring_diff.c
 *		Owner and replica-set differences between two rings.
 *
 * Every point of either ring is a boundary.  Between two consecutive
 * boundaries b' < t <= b, every token has the same first point >= it in each
 * ring, so one comparison per boundary decides the whole interval.  The
 * interval ending at the smallest boundary wraps from the largest one.
 */
#include "rs_ring_diff.h"

#include <stdlib.h>
#include <string.h>

/* A growable array of fixed-size records. */
typedef struct growable
{
	void	   *items;
	size_t		count;
	size_t		capacity;
	size_t		item_size;
} growable;

/* Append one record; RS_ERR_NOMEM on failure. */
static rs_status
growable_push(growable *g, const void *item)
{
	if (g->count == g->capacity)
	{
		size_t		capacity = g->capacity ? g->capacity * 2 : 64;
		void	   *items = realloc(g->items, capacity * g->item_size);

		if (items == NULL)
			return RS_ERR_NOMEM;
		g->items = items;
		g->capacity = capacity;
	}
	memcpy((char *) g->items + g->count * g->item_size, item, g->item_size);
	g->count++;
	return RS_OK;
}

/*
 * End a list: on success hand its records to the caller (and their number to
 * *count_out), on failure free them and hand over nothing.
 */
static void *
growable_release(growable *g, rs_status status, size_t *count_out)
{
	if (status != RS_OK)
	{
		free(g->items);
		return NULL;
	}
	*count_out = g->count;
	return g->items;
}

/* The sorted, distinct union of both rings' tokens; *count its length. */
static rs_status
boundaries(const rs_ring *a, const rs_ring *b, uint64_t **out, size_t *count)
{
	uint64_t   *merged = malloc(((size_t) a->npoints + b->npoints) * sizeof(uint64_t));
	size_t		i = 0,
				j = 0,
				n = 0;

	if (merged == NULL)
		return RS_ERR_NOMEM;
	while (i < a->npoints || j < b->npoints)
	{
		uint64_t	next;

		if (j >= b->npoints || (i < a->npoints && rs_ring_token(a, i) <= rs_ring_token(b, j)))
			next = rs_ring_token(a, i++);
		else
			next = rs_ring_token(b, j++);
		if (n == 0 || merged[n - 1] != next)
			merged[n++] = next;
	}
	*out = merged;
	*count = n;
	return RS_OK;
}

/* Tokens in (start, end], wrapping when start >= end, in a space of this size. */
static rs_u128
range_span(uint64_t start, uint64_t end, rs_u128 space)
{
	if (start < end)
		return (rs_u128) (end - start);
	return space - start + end;
}

/*
 * The intervals every diff below walks, one per boundary of either ring
 * (see the top of the file), and the size of their token space: the three
 * diffs set them up, and cut interval k, the same way.
 */
typedef struct intervals
{
	uint64_t   *bounds;
	size_t		count;
	rs_u128		space;
} intervals;

/* The intervals of two rings; RS_ERR_INVALID if their algorithms differ. */
static rs_status
intervals_init(intervals *iv, const rs_ring *old_ring, const rs_ring *new_ring)
{
	iv->bounds = NULL;
	iv->count = 0;
	iv->space = rs_ring_space(old_ring);
	if (old_ring->algorithm != new_ring->algorithm)
		return RS_ERR_INVALID;
	return boundaries(old_ring, new_ring, &iv->bounds, &iv->count);
}

/*
 * Interval k: (*start, *end], the one ending at the smallest boundary
 * wrapping from the largest; returns its number of tokens.
 */
static rs_u128
interval_at(const intervals *iv, size_t k, uint64_t *start, uint64_t *end)
{
	*end = iv->bounds[k];
	*start = iv->bounds[k == 0 ? iv->count - 1 : k - 1];
	return range_span(*start, *end, iv->space);
}

/* The ranges whose owner changes (see rs_ring_diff.h). */
rs_status
rs_ring_owner_moves(const rs_ring *old_ring, const rs_ring *new_ring,
					rs_owner_move **moves_out, size_t *nmoves_out)
{
	intervals	iv;
	growable	moves = {NULL, 0, 0, sizeof(rs_owner_move)};
	rs_status	status;

	*moves_out = NULL;
	*nmoves_out = 0;
	status = intervals_init(&iv, old_ring, new_ring);
	if (status != RS_OK)
		return status;

	for (size_t k = 0; k < iv.count && status == RS_OK; k++)
	{
		uint64_t	start;
		uint64_t	end;
		rs_u128		span = interval_at(&iv, k, &start, &end);
		const char *from = old_ring->names[rs_ring_owner(old_ring, end)];
		const char *to = new_ring->names[rs_ring_owner(new_ring, end)];
		rs_owner_move *last = moves.count ? (rs_owner_move *) moves.items + moves.count - 1 : NULL;

		if (strcmp(from, to) == 0)
			continue;
		if (last && last->range_end == start && strcmp(last->from_node, from) == 0 &&
			strcmp(last->to_node, to) == 0)
		{
			last->range_end = end;
			last->span += span;
		}
		else
		{
			rs_owner_move move = {from, to, start, end, span};

			status = growable_push(&moves, &move);
		}
	}

	/* The first range may continue the last one across the wrap. */
	if (status == RS_OK && moves.count > 1)
	{
		rs_owner_move *first = moves.items;
		rs_owner_move *last = first + moves.count - 1;

		if (last->range_end == first->range_start &&
			strcmp(last->from_node, first->from_node) == 0 &&
			strcmp(last->to_node, first->to_node) == 0)
		{
			first->range_start = last->range_start;
			first->span += last->span;
			moves.count--;
		}
	}
	free(iv.bounds);
	*moves_out = growable_release(&moves, status, nmoves_out);
	return status;
}

/* Order copy changes by node name, change, then range start. */
static int
compare_copy_changes(const void *a, const void *b)
{
	const rs_copy_change *x = a;
	const rs_copy_change *y = b;
	int			cmp = strcmp(x->node, y->node);

	if (cmp != 0)
		return cmp;
	if (x->gains != y->gains)
		return y->gains - x->gains;
	return (x->range_start > y->range_start) - (x->range_start < y->range_start);
}

/* Whether a name is among count names. */
static int
holds(const char *const *names, uint32_t count, const char *name)
{
	for (uint32_t i = 0; i < count; i++)
		if (strcmp(names[i], name) == 0)
			return 1;
	return 0;
}

/* The replica set at a boundary, as names. */
static rs_status
replica_names(const rs_ring *ring, uint64_t token, uint32_t want, uint16_t *scratch,
			  const char **names, uint32_t *count)
{
	rs_status	status = rs_ring_replicas(ring, token, want, scratch, count);

	for (uint32_t i = 0; status == RS_OK && i < *count; i++)
		names[i] = ring->names[scratch[i]];
	return status;
}

/* The ranges where nodes gain or lose a copy (see rs_ring_diff.h). */
rs_status
rs_ring_copy_changes(const rs_ring *old_ring, uint32_t old_replicas,
					 const rs_ring *new_ring, uint32_t new_replicas,
					 rs_copy_change **changes_out, size_t *nchanges_out)
{
	intervals	iv = {NULL, 0, 0};
	growable	changes = {NULL, 0, 0, sizeof(rs_copy_change)};
	uint32_t	max_r = old_replicas > new_replicas ? old_replicas : new_replicas;
	uint16_t   *scratch = malloc((size_t) (max_r ? max_r : 1) * sizeof(uint16_t));
	const char **old_set = malloc((size_t) (max_r ? max_r : 1) * sizeof(char *));
	const char **new_set = malloc((size_t) (max_r ? max_r : 1) * sizeof(char *));
	rs_status	status = RS_OK;
	size_t		out = 0;

	*changes_out = NULL;
	*nchanges_out = 0;
	if (!scratch || !old_set || !new_set)
		status = RS_ERR_NOMEM;
	else
		status = intervals_init(&iv, old_ring, new_ring);

	for (size_t k = 0; status == RS_OK && k < iv.count; k++)
	{
		uint64_t	start;
		uint64_t	end;
		rs_u128		span = interval_at(&iv, k, &start, &end);
		uint32_t	nold = 0,
					nnew = 0;

		status = replica_names(old_ring, end, old_replicas, scratch, old_set, &nold);
		if (status == RS_OK)
			status = replica_names(new_ring, end, new_replicas, scratch, new_set, &nnew);
		for (uint32_t i = 0; status == RS_OK && i < nnew; i++)
			if (!holds(old_set, nold, new_set[i]))
			{
				rs_copy_change change = {new_set[i], 1, start, end, span};

				status = growable_push(&changes, &change);
			}
		for (uint32_t i = 0; status == RS_OK && i < nold; i++)
			if (!holds(new_set, nnew, old_set[i]))
			{
				rs_copy_change change = {old_set[i], 0, start, end, span};

				status = growable_push(&changes, &change);
			}
	}

	/* Group by node and change, then merge ranges that touch. */
	if (status == RS_OK && changes.count > 0)
	{
		rs_copy_change *c = changes.items;

		qsort(c, changes.count, sizeof(rs_copy_change), compare_copy_changes);
		for (size_t i = 0; i < changes.count; i++)
		{
			if (out > 0 && strcmp(c[out - 1].node, c[i].node) == 0 &&
				c[out - 1].gains == c[i].gains && c[out - 1].range_end == c[i].range_start)
			{
				c[out - 1].range_end = c[i].range_end;
				c[out - 1].span += c[i].span;
			}
			else
				c[out++] = c[i];
		}
		/* Within one (node, change) group, the last range may wrap into the first. */
		{
			size_t		group_start = 0;
			size_t		kept = 0;

			for (size_t i = 0; i <= out; i++)
			{
				if (i == out || strcmp(c[i].node, c[group_start].node) != 0 ||
					c[i].gains != c[group_start].gains)
				{
					size_t		last = i - 1;
					size_t		n = i - group_start;

					if (n > 1 && c[last].range_end == c[group_start].range_start)
					{
						c[group_start].range_start = c[last].range_start;
						c[group_start].span += c[last].span;
						n--;
					}
					memmove(&c[kept], &c[group_start], n * sizeof(rs_copy_change));
					kept += n;
					group_start = i;
				}
			}
			out = kept;
		}
		changes.count = out;
	}

	free(iv.bounds);
	free(scratch);
	free(old_set);
	free(new_set);
	*changes_out = growable_release(&changes, status, nchanges_out);
	return status;
}

/* Whether two name lists hold the same names in the same order. */
static int
same_names(const char *const *a, uint32_t na, const char *const *b, uint32_t nb)
{
	if (na != nb)
		return 0;
	for (uint32_t i = 0; i < na; i++)
		if (strcmp(a[i], b[i]) != 0)
			return 0;
	return 1;
}

/* Whether two name lists hold the same names, in any order. */
static int
same_name_sets(const char *const *a, uint32_t na, const char *const *b, uint32_t nb)
{
	if (na != nb)
		return 0;
	for (uint32_t i = 0; i < na; i++)
		if (!holds(b, nb, a[i]))
			return 0;
	return 1;
}

/* The ranges whose replica set changes (see rs_ring_diff.h). */
rs_status
rs_ring_move_steps(const rs_ring *old_ring, uint32_t old_replicas,
				   const rs_ring *new_ring, uint32_t new_replicas,
				   rs_move_step **steps_out, size_t *nsteps_out)
{
	intervals	iv;
	growable	steps = {NULL, 0, 0, sizeof(rs_move_step)};
	uint16_t	scratch[RS_MOVE_MAX_REPLICAS];
	rs_status	status;

	*steps_out = NULL;
	*nsteps_out = 0;
	status = intervals_init(&iv, old_ring, new_ring);
	if (status != RS_OK)
		return status;
	if (old_replicas > RS_MOVE_MAX_REPLICAS)
		old_replicas = RS_MOVE_MAX_REPLICAS;
	if (new_replicas > RS_MOVE_MAX_REPLICAS)
		new_replicas = RS_MOVE_MAX_REPLICAS;

	for (size_t k = 0; status == RS_OK && k < iv.count; k++)
	{
		rs_move_step step;
		rs_move_step *last;

		memset(&step, 0, sizeof(step));
		step.span = interval_at(&iv, k, &step.range_start, &step.range_end);
		status = replica_names(old_ring, step.range_end, old_replicas, scratch, step.old_nodes, &step.nold);
		if (status == RS_OK)
			status = replica_names(new_ring, step.range_end, new_replicas, scratch, step.new_nodes, &step.nnew);
		if (status != RS_OK || same_name_sets(step.old_nodes, step.nold, step.new_nodes, step.nnew))
			continue;
		last = steps.count ? (rs_move_step *) steps.items + steps.count - 1 : NULL;
		if (last && last->range_end == step.range_start &&
			same_names(last->old_nodes, last->nold, step.old_nodes, step.nold) &&
			same_names(last->new_nodes, last->nnew, step.new_nodes, step.nnew))
		{
			last->range_end = step.range_end;
			last->span += step.span;
		}
		else
			status = growable_push(&steps, &step);
	}
	/* The first step may continue the last one across the wrap. */
	if (status == RS_OK && steps.count > 1)
	{
		rs_move_step *first = steps.items;
		rs_move_step *last = first + steps.count - 1;

		if (last->range_end == first->range_start &&
			same_names(last->old_nodes, last->nold, first->old_nodes, first->nold) &&
			same_names(last->new_nodes, last->nnew, first->new_nodes, first->nnew))
		{
			first->range_start = last->range_start;
			first->span += last->span;
			steps.count--;
		}
	}
	free(iv.bounds);
	*steps_out = growable_release(&steps, status, nsteps_out);
	return status;
}

/*
 * rs_ring_diff.h
 *		Exactly what moves between two rings: the token ranges whose owner, or
 *		whose replica set, differs.  Computed from the rings' geometry (the
 *		merged point lists), not by sampling keys.
 */
#ifndef RS_RING_DIFF_H
#define RS_RING_DIFF_H

#include "rs_ring.h"

#define RS_MOVE_MAX_REPLICAS 64

/*
 * A range (range_start, range_end] of the token space, wrapping past the top
 * when range_start >= range_end.  Node names point into the rings.
 */
typedef struct rs_owner_move
{
	const char *from_node;		/* owner in the old ring */
	const char *to_node;		/* owner in the new ring */
	uint64_t	range_start;	/* exclusive */
	uint64_t	range_end;		/* inclusive */
	rs_u128		span;			/* tokens in the range */
} rs_owner_move;

typedef struct rs_copy_change
{
	const char *node;
	int			gains;			/* 1: the node gains a copy; 0: it loses one */
	uint64_t	range_start;
	uint64_t	range_end;
	rs_u128		span;
} rs_copy_change;

/*
 * The ranges whose owner changes, in token order, adjacent ranges with the
 * same (from, to) merged.  Both rings must use the same algorithm.  *moves is
 * malloc'd (free it); RS_ERR_INVALID for mismatched algorithms, RS_ERR_NOMEM.
 */
extern rs_status rs_ring_owner_moves(const rs_ring *old_ring, const rs_ring *new_ring,
									 rs_owner_move **moves, size_t *nmoves);

/*
 * The ranges where a node gains or loses a copy when the replica sets of
 * old_ring (R = old_replicas) become those of new_ring (R = new_replicas);
 * ordered by node, then change, then token; contiguous ranges merged.
 */
extern rs_status rs_ring_copy_changes(const rs_ring *old_ring, uint32_t old_replicas,
									  const rs_ring *new_ring, uint32_t new_replicas,
									  rs_copy_change **changes, size_t *nchanges);

/*
 * One step of a data move: a range whose replica set differs between the
 * rings, with both sets (owner first).  Consecutive ranges with the same two
 * sets are merged.
 */
typedef struct rs_move_step
{
	uint64_t	range_start;	/* exclusive */
	uint64_t	range_end;		/* inclusive; wraps when start >= end */
	rs_u128		span;
	const char *old_nodes[RS_MOVE_MAX_REPLICAS];
	uint32_t	nold;
	const char *new_nodes[RS_MOVE_MAX_REPLICAS];
	uint32_t	nnew;
} rs_move_step;

/*
 * The ranges whose replica set changes from old_ring (R = old_replicas) to
 * new_ring (R = new_replicas), in token order; replicas at most
 * RS_MOVE_MAX_REPLICAS.  *steps is malloc'd.
 */
extern rs_status rs_ring_move_steps(const rs_ring *old_ring, uint32_t old_replicas,
									const rs_ring *new_ring, uint32_t new_replicas,
									rs_move_step **steps, size_t *nsteps);

#endif							/* RS_RING_DIFF_H */

/*
 * rs_ring_alloc.h
 *		Choosing explicit tokens for a node (docs/routing.md §8): where its
 *		points best even the ring's replicated load, for the ring's
 *		replication factor and zones.
 *
 * The allocation is not part of the routing contract; what it returns, once
 * stored as the node's tokens, is.  It is deterministic: the same members,
 * vnodes, replication factor and node give the same tokens.  Existing points
 * never move: only the new node's tokens are chosen.
 *
 * The method is a greedy search over the gaps between the ring's points,
 * one token at a time.  For a gap it works out exactly, from the replica
 * walks (§3, §7) a point there would change, how each node's load changes
 * as a function of where in the gap the point goes, and places the point
 * where this objective is least:
 *
 *		F =   sum over nodes u of  L_u^2 / (R t_u)         (copies)
 *		    + w_o R  sum over u of  O_u^2 / t_u             (first copies)
 *		    + w_r R  sum over ranges of  size^2 / mean size (even ranges)
 *
 * L_u is the share of the keys of which node u holds a copy at R (counting
 * each key R times), O_u the share it owns, t_u its weight over the total
 * weight; F is least when every node's loads are proportional to its weight
 * and the ranges are of one size (a ring of uneven ranges that is balanced
 * today is not once its nodes' shares shrink as the ring grows).  While the
 * node's tokens are placed, its own targets grow with them ((k + 1) / count
 * of the way for the k-th token), so that each token takes a fair part.  The
 * gaps are ranked in a priority queue, re-scored lazily when taken (a gap
 * whose score dropped goes back), as in Cassandra's replication-aware
 * allocator; what a point in a gap changes is kept per gap until a point
 * is placed near it, so that re-scoring needs no walk.
 */
#ifndef RS_RING_ALLOC_H
#define RS_RING_ALLOC_H

#include "rs_ring.h"

/*
 * Choose count tokens for the node described by node (its name, weight and
 * zone; its tokens field is ignored) on the murmur3 ring of these members,
 * vnodes per unit of weight, replication factor replicas (1..64).  A member
 * of the same name is left out first: the tokens are chosen as if the node
 * held no points yet.  tokens_out[count] gets them in ascending order; none
 * equals a point of another member.  A node alone on its ring gets count
 * tokens evenly spaced from the token of its name.
 *
 * Errors: RS_ERR_INVALID (count outside 1..RS_RING_MAX_TOKENS, replicas
 * outside 1..64, an invalid node, or an invalid other member, with
 * *bad_member (if not NULL) its index), RS_ERR_DUPLICATE,
 * RS_ERR_TOO_MANY_NODES, RS_ERR_TOO_MANY_POINTS (more than
 * RS_RING_MAX_POINTS, or no gap left to split), RS_ERR_NOMEM.  Nothing is
 * written to tokens_out on error.
 */
extern rs_status rs_ring_allocate_tokens(const rs_ring_member *members, size_t nmembers,
										 uint32_t vnodes, uint32_t replicas,
										 const rs_ring_member *node, uint32_t count,
										 uint64_t *tokens_out, long *bad_member);

/*
 * A ring grown by allocation alone, one node after another, keeping what
 * the allocation works out between nodes (most of it stays true when a node
 * joins): for benchmarks and scheme comparisons that add many nodes.  Each
 * rs_token_allocator_add chooses the node's tokens by the method of
 * rs_ring_allocate_tokens on the ring of the nodes added before it, and
 * adds them to that ring.  Names are not kept: a node's name only places
 * the first node's tokens; the caller must not add a name twice.
 */
typedef struct rs_token_allocator rs_token_allocator;

/* RS_ERR_INVALID (replicas outside 1..64), RS_ERR_NOMEM. */
extern rs_status rs_token_allocator_create(uint32_t replicas, rs_token_allocator **out);

/*
 * Errors as rs_ring_allocate_tokens.  RS_ERR_INVALID, RS_ERR_TOO_MANY_NODES
 * and RS_ERR_TOO_MANY_POINTS leave the allocator as it was; after another
 * error it can only be freed.
 */
extern rs_status rs_token_allocator_add(rs_token_allocator *allocator, const rs_ring_member *node,
										uint32_t count, uint64_t *tokens_out);

extern void rs_token_allocator_free(rs_token_allocator *allocator);

#endif							/* RS_RING_ALLOC_H */

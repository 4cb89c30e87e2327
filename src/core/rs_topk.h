/*
 * rs_topk.h
 *		The most frequent items of a stream in bounded memory: the
 *		space-saving algorithm (Metwally, Agrawal and El Abbadi, 2005), over
 *		64-bit fingerprints.
 *
 * A sketch of capacity k counts every item it holds; an item not held
 * takes the place of the least counted one and inherits its count, which
 * becomes the new item's error.  Hence, for every item held,
 *		count - error <= true count <= count,
 * and every item whose true count exceeds total / k is held.  The memory is
 * the caller's (ringshard keeps its sketches in shared memory): the core
 * never allocates here, and a sketch is a plain struct that can be copied.
 */
#ifndef RS_TOPK_H
#define RS_TOPK_H

#include <stddef.h>
#include <stdint.h>

#include "rs_status.h"

/* The largest capacity (the struct's size); a sketch may use fewer counters. */
#define RS_TOPK_MAX_CAPACITY 256

typedef struct rs_topk_counter
{
	uint64_t	fingerprint;
	uint64_t	count;			/* never below the item's true count */
	uint64_t	error;			/* count - error never above it */
} rs_topk_counter;

typedef struct rs_topk
{
	uint32_t	capacity;		/* counters in use at most (1 .. RS_TOPK_MAX_CAPACITY) */
	uint32_t	used;			/* counters holding an item */
	uint64_t	total;			/* weight added since the last reset */
	rs_topk_counter counters[RS_TOPK_MAX_CAPACITY];
} rs_topk;

/* An empty sketch of the given capacity; RS_ERR_OUT_OF_RANGE outside 1 .. RS_TOPK_MAX_CAPACITY. */
extern rs_status rs_topk_init(rs_topk *sketch, uint32_t capacity);

/* Empty a sketch, keeping its capacity. */
extern void rs_topk_reset(rs_topk *sketch);

/*
 * Count weight (at least 1) more of an item.  *index is its counter;
 * *taken is 1 when that counter was given to this item by this call (new,
 * or in the place of the least counted item), so the caller replaces what
 * it keeps beside the counter, and 0 when the item was held already.
 * RS_ERR_INVALID for weight 0 or a sketch whose fields are inconsistent;
 * RS_ERR_OUT_OF_RANGE when a count would overflow.
 */
extern rs_status rs_topk_add(rs_topk *sketch, uint64_t fingerprint, uint64_t weight,
							 uint32_t *index, int *taken);

/*
 * The indexes of the held counters, most counted first (ties: the smaller
 * error first, then the smaller fingerprint), into order (room for
 * RS_TOPK_MAX_CAPACITY); returns how many.
 */
extern uint32_t rs_topk_ranked(const rs_topk *sketch, uint32_t *order);

/*
 * A 64-bit fingerprint of an item made of a scope (for ringshard: database
 * and table) and two byte strings (keyspace and key), each length-delimited
 * so that ("ab", "c") and ("a", "bc") differ.
 */
extern uint64_t rs_topk_fingerprint(uint64_t scope, const void *first, size_t first_len,
									const void *second, size_t second_len);

#endif							/* RS_TOPK_H */

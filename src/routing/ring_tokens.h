/*
 * ring_tokens.h
 *		Explicit tokens chosen for a node (allocate_tokens, and the previews
 *		of a node joining with allocated tokens).
 */
#ifndef RINGSHARD_RING_TOKENS_H
#define RINGSHARD_RING_TOKENS_H

#include "postgres.h"

#include "utils/array.h"

#include "routing/topology_cache.h"

/*
 * count tokens for node (its zone, or NULL, and its weight) on the ring the
 * spec describes, as if the node held no points yet (a member of that name
 * is left out), in ascending order, palloc'd; ERROR on a ketama ring, a count
 * outside 1..RS_RING_MAX_TOKENS, or a ring that cannot take them.
 */
extern uint64 *ring_tokens_allocate(const RingSpec *spec, const char *node, const char *zone,
									double weight, int32 count);

/* A ringtoken[] of count tokens, palloc'd; type is ringtoken's oid. */
extern ArrayType *ring_tokens_array(const uint64 *tokens, int count, Oid type);

#endif							/* RINGSHARD_RING_TOKENS_H */

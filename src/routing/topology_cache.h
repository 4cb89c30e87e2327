/*
 * topology_cache.h
 *		Backend-local rings and partition maps, built from the catalog once and
 *		rebuilt only after a topology change.
 *
 * Lookups never touch the catalog: a routing function keeps a pointer to a
 * cached ring in its fn_extra together with the cache generation it saw, and
 * asks the cache again only when the generation has moved on.  A relcache
 * invalidation of ringshard.rings (sent by the catalog's triggers on every
 * change) bumps the generation.  Replaced entries stay allocated until the
 * end of the transaction, because a query may still hold node names that
 * were returned from them without a copy.
 */
#ifndef RINGSHARD_TOPOLOGY_CACHE_H
#define RINGSHARD_TOPOLOGY_CACHE_H

#include "postgres.h"

#include "utils/array.h"

#include "rs_partmap.h"
#include "rs_ring.h"

/*
 * A ring's node names are text values in one block, each zero-padded to int
 * alignment, with this much readable slack after the last: replicas_for
 * copies a short name as a fixed-size chunk (see node_array).
 */
#define NODE_TEXT_CHUNK 16

typedef struct CachedRing
{
	MemoryContext mcxt;			/* holds the entry and its palloc'd parts */
	char	   *name;
	rs_ring    *ring;			/* NULL when the ring has no nodes */
	int			replication_factor;
	Datum	   *node_texts;		/* text datum of each node's name */
	uint16	   *node_text_sizes;	/* their sizes, padded to int alignment */
	char	   *node_text_block;	/* where the names lie, node i at i x stride ... */
	uint32		node_text_stride;	/* ... or 0 when a long name makes them lie packed */
	bool	   *node_up;		/* health, by node index */
	struct CachedRing *next;
} CachedRing;

/*
 * Names padded to at most this many bytes lie at a fixed stride: shard_for
 * finds the owner's name by arithmetic, not by loading node_texts[owner],
 * which on a ring of many nodes is one more cache miss per row.
 */
#define NODE_TEXT_MAX_STRIDE 64

/* The text datum of node i's name (see node_text_stride). */
static inline Datum
cached_ring_node_text(const CachedRing *ring, uint32 i)
{
	if (ring->node_text_stride != 0)
		return PointerGetDatum(ring->node_text_block + (Size) i * ring->node_text_stride);
	return ring->node_texts[i];
}

typedef struct CachedMap
{
	MemoryContext mcxt;			/* holds the entry and its palloc'd parts */
	char	   *name;
	rs_partmap	map;
	int			nnodes;
	Datum	   *node_texts;		/* by the node indexes used in map.holders */
	bool	   *node_up;
	struct CachedMap *next;
} CachedMap;

/* Bumped by every invalidation; a pointer is valid while this is unchanged. */
extern uint64 topology_cache_generation;

/*
 * Set while a table's placement loads under one snapshot of the catalog
 * (annotated_tables.c): rings and maps are then read with the active
 * snapshot, not a newer one of their own.
 */
extern bool topology_cache_use_active_snapshot;

/* Watch the catalog's invalidations from now on (before a cache is filled from it). */
extern void topology_cache_watch(void);

/*
 * SPI connected for a read of the catalog as committed now (see
 * topology_cache_use_active_snapshot; in parallel mode, as of the
 * transaction's snapshot, and every cache is read again after it); true if
 * a snapshot was pushed, for topology_catalog_finish.
 */
extern bool topology_catalog_connect(void);
extern void topology_catalog_finish(bool pushed);

extern void topology_cache_init(void);

/* The cached ring of this name; ERROR if no such ring. */
extern CachedRing *topology_cache_ring(const char *ring_name);

/* The cached map of this name; ERROR if no such map. */
extern CachedMap *topology_cache_map(const char *map_name);

/*
 * The names of the rings other than ring_name that have nodes, ", "-separated
 * in bytewise order, or NULL when there are none: for the hint of an error
 * about a ring without nodes (often "default", when the ring argument was
 * forgotten).
 */
extern char *topology_other_rings_with_nodes(const char *ring_name);

/* A ring's definition and members as the catalog has them now. */
typedef struct RingSpec
{
	char	   *name;
	rs_ring_algorithm algorithm;
	int			vnodes;
	int			replication_factor;
	int			nmembers;
	rs_ring_member *members;	/* in bytewise name order; names, zones and
								 * tokens palloc'd */
	bool	   *node_up;		/* by member index */
} RingSpec;

/* Read a ring's definition and members (not cached); ERROR if no such ring. */
extern RingSpec *topology_read_ring_spec(const char *ring_name);

/* The tokens of a ringtoken[], palloc'd; ERROR for NULL elements or too many. */
extern uint64 *topology_token_array(ArrayType *array, uint32 *count);

/* Build the ring a spec describes; NULL when it has no members; ERROR if invalid. */
extern rs_ring *topology_build_ring(const RingSpec *spec, int options);

/* The SQLSTATE a core status is reported with. */
extern int	ringshard_core_error_code(rs_status status);

/* Report a core status as an ERROR with a SQLSTATE; never returns. */
extern void ringshard_report_core_error(rs_status status, const char *what) pg_attribute_noreturn();

#endif							/* RINGSHARD_TOPOLOGY_CACHE_H */

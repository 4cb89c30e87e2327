/*
 * annotated_tables.h
 *		Placement of rows of annotated tables: the table's ring or map and key
 *		columns, loaded once per call site (or trigger) and per topology
 *		generation, and the nodes a row belongs on.
 */
#ifndef RINGSHARD_ANNOTATED_TABLES_H
#define RINGSHARD_ANNOTATED_TABLES_H

#include "postgres.h"

#include "access/htup.h"
#include "access/tupdesc.h"

#include "routing/topology_cache.h"
#include "types/key_bytes.h"

/*
 * The moves a table still owes (ringshard_internal.moving_ranges): token
 * ranges (start, end] of its ring, sorted by start (the last may wrap past
 * the top), or runs of partitions of its map, each with the replicas it had
 * when the table was placed and has now.  Their rows are complete only on
 * the old replicas until a rebalance copies them (docs/design.md, "Moving
 * rows").
 */
typedef struct MovingRanges
{
	int			count;
	uint64	   *start;			/* rings */
	uint64	   *end;
	int		   *first_partition;	/* maps */
	int		   *last_partition;
	char	 ***old_nodes;		/* per range, old_count[i] names */
	int		   *old_count;
	char	  **new_nodes_text; /* per range, the new replicas as "a, b" */
	char	  **old_nodes_text;
	char	  **source;			/* per range, the node a rebalance copies it from */
	char	   *position_sql;	/* a row t's token or partition, in SQL for a node */
	bool		leftovers;		/* copied rows may still be on the nodes they left */

	/*
	 * Old replicas that have left the table's ring or map but keep their
	 * address until the rebalance has moved their rows (remove_node at
	 * R = 1 leaves a range's only copy there): the placement's nodes after
	 * its own, so that reads and writes of those ranges still reach them.
	 */
	int			departed_count;
	Datum	   *departed_texts;
	bool	   *departed_up;
} MovingRanges;

typedef struct TablePlacement
{
	uint64		generation;
	Oid			row_type;		/* the row type the annotation was loaded for */
	Oid			relid;
	CachedRing *ring;			/* one of ring and map is set */
	CachedMap  *map;
	AttrNumber	key_attnum;
	KeyEncoder	key;
	AttrNumber	keyspace_attnum;	/* 0 when the keyspace is a constant */
	KeyEncoder	keyspace_key;
	char	   *keyspace;		/* the constant keyspace */
	const char *keyspace_bytes; /* its canonical (UTF-8) bytes */
	size_t		keyspace_bytes_len;
	char	   *table_name;
	char	   *key_column;
	char	   *keyspace_column;
	MovingRanges moving;		/* copied into the statement's context */
} TablePlacement;

/* Load (or reload, after a topology change) the annotation of a table. */
extern void table_placement_load(TablePlacement *placement, Oid relid, TupleDesc desc,
								 MemoryContext mcxt);

/* The same without the table's moves (for a worker's checks; moving stays empty). */
extern void table_placement_load_without_moves(TablePlacement *placement, Oid relid, TupleDesc desc,
											   MemoryContext mcxt);

/* Whether the placement is current for this relation. */
extern bool table_placement_is_current(const TablePlacement *placement, Oid relid);

/*
 * The replicas of a key's canonical bytes on the table's ring, owner first,
 * as node indexes (at most want); ERROR if the ring has no nodes.
 */
extern uint32 table_placement_ring_replicas(const TablePlacement *placement, const char *bytes, size_t len,
											uint32 want, uint16 *out);

/*
 * The holders of a key's partition in the table's map: their number, and in
 * *first the index of the first in map.holders.  A partition without a
 * holder is an ERROR, whose detail names the keyspace if name_keyspace.
 */
extern uint32 table_placement_partition_holders(const TablePlacement *placement,
												const char *keyspace, size_t keyspace_len,
												const char *bytes, size_t len, bool name_keyspace,
												uint32 *first);

/*
 * The nodes a row belongs on: the ring replica set (or just the owner), or
 * every holder of its partition (or the first).  False for a NULL key.
 */
extern bool table_placement_place(TablePlacement *placement, HeapTuple tuple, TupleDesc desc,
								  bool owner_only, Datum **nodes, int *count);

/*
 * What planning needs of a table's annotation, cached until the topology
 * changes (ringshard.distributed_tables, rings and ring_members invalidate
 * it).  ring_name (NULL for a partition map) lives in the cache: copy it.
 */
typedef struct TableAnnotationInfo
{
	AttrNumber	key_attnum;
	AttrNumber	keyspace_attnum;	/* 0: a constant keyspace */
	bool		on_every_node;	/* a ring whose replication factor is at least its node count */
	const char *ring_name;
} TableAnnotationInfo;

/* False if the table is not annotated. */
extern bool table_annotation_info(Oid relid, TableAnnotationInfo *info);

/* A heap tuple over a composite datum's header, for heap_getattr. */
extern void row_as_tuple(HeapTupleHeader row, HeapTupleData *tuple);

#endif							/* RINGSHARD_ANNOTATED_TABLES_H */

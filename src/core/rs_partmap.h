/*
 * rs_partmap.h
 *		The fixed 256-partition map (docs/routing.md §5): who holds which partition,
 *		and where the map has gaps or overlaps.
 */
#ifndef RS_PARTMAP_H
#define RS_PARTMAP_H

#include <stddef.h>
#include <stdint.h>

#include "rs_hash.h"
#include "rs_status.h"

/* One inclusive range of partitions held by a node (by the caller's index). */
typedef struct rs_partition_range
{
	uint32_t	node;
	int			partition_start;
	int			partition_end;
} rs_partition_range;

/*
 * Holders per partition, as sorted, distinct node indexes:
 * holders[offsets[p] .. offsets[p + 1]) are partition p's.
 */
typedef struct rs_partmap
{
	uint32_t	offsets[RS_PARTITION_COUNT + 1];
	uint32_t   *holders;
} rs_partmap;

/*
 * Build the holder lists.  RS_ERR_OUT_OF_RANGE if a range leaves 0..255 or
 * starts after it ends (*bad_range gets its index), RS_ERR_NOMEM.  On error
 * the map is left empty.
 */
extern rs_status rs_partmap_build(const rs_partition_range *ranges, size_t nranges,
								  rs_partmap *map, long *bad_range);

extern void rs_partmap_free(rs_partmap *map);

/* Number of holders of a partition (0 means a gap). */
static inline uint32_t
rs_partmap_holder_count(const rs_partmap *map, int partition)
{
	return map->offsets[partition + 1] - map->offsets[partition];
}

/* What a run of partitions in check output is. */
typedef enum rs_partmap_issue_kind
{
	RS_PARTMAP_GAP,				/* no holder */
	RS_PARTMAP_OVERLAP			/* more than one holder */
} rs_partmap_issue_kind;

/* A maximal run of partitions with the same holders that is a gap or overlap. */
typedef struct rs_partmap_issue
{
	rs_partmap_issue_kind kind;
	int			partition_start;
	int			partition_end;
	uint32_t	first_holder;	/* holders[] index of the run's holders */
	uint32_t	nholders;
} rs_partmap_issue;

/*
 * List gaps and overlaps in partition order into issues[256] (a run never
 * spans two holder sets, so 256 is enough); returns how many.
 */
extern size_t rs_partmap_check(const rs_partmap *map, rs_partmap_issue *issues);

#endif							/* RS_PARTMAP_H */

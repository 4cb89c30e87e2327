/*
 * placement.h
 *		Where the rows of a distributed table live, by node index of the
 *		table's ring or map (then the nodes that left it and hold rows a
 *		rebalance copies from them): the nodes, the replicas of one key or one row,
 *		and whether a set of nodes still covers every range.  A statement
 *		loads the placement once and keeps it (docs/design.md, invariant 4).
 */
#ifndef RINGSHARD_PLACEMENT_H
#define RINGSHARD_PLACEMENT_H

#include "postgres.h"

#include "executor/tuptable.h"

#include "routing/annotated_tables.h"
#include "types/key_bytes.h"

/* At most this many replicas per key (rings allow up to 64). */
#define PLACEMENT_MAX_REPLICAS 64

extern int	placement_node_count(const TablePlacement *p);
extern Datum placement_node_text(const TablePlacement *p, int i);
extern char *placement_node_name(const TablePlacement *p, int i);
extern bool placement_node_up(const TablePlacement *p, int i);

/*
 * The replicas of a key, owner first, as node indexes (at most
 * PLACEMENT_MAX_REPLICAS); keyspace is used by partition maps whose keyspace
 * is a column (else the map's constant keyspace is).  A partition without
 * a holder is an ERROR.
 */
extern int	placement_key_replicas(TablePlacement *p, Datum key, Datum keyspace, uint16 *out);

/* The coordinator lock slot of a key (fdw/write_locks.h), from its canonical bytes. */
extern uint32 placement_key_lock_slot(TablePlacement *p, Datum key, Datum keyspace);

/*
 * A row's key as canonical bytes, encoded once for each use a write makes
 * of it (its replicas, its lock slot, its hot-key note).  The bytes may
 * point into the struct: use it where it was filled.
 */
typedef struct PlacementRowKey
{
	const char *bytes;
	size_t		len;
	const char *keyspace;		/* what the partition is hashed with: the column's or the map's constant */
	size_t		keyspace_len;
	bool		keyspace_is_column;
	char		buf[KEY_BYTES_BUFSIZE];
	char		keyspace_buf[KEY_BYTES_BUFSIZE];
} PlacementRowKey;

/* The key (and keyspace) of the row in a slot, encoded; false if either is NULL. */
extern bool placement_slot_key(TablePlacement *p, TupleTableSlot *slot, PlacementRowKey *key);

/* The replicas and the coordinator lock slot of an encoded key. */
extern int	placement_row_key_replicas(TablePlacement *p, const PlacementRowKey *key, uint16 *out);
extern uint32 placement_row_key_lock_slot(const PlacementRowKey *key);

/* Whether every token range or partition keeps a replica on a node not excluded. */
extern bool placement_covered(const TablePlacement *p, const bool *excluded);

/* Whether every range or partition keeps at least copies replicas (all it has, if fewer) not excluded. */
extern bool placement_covered_by(const TablePlacement *p, const bool *excluded, int copies);

/* Whether each row has one copy only (R = 1, or one holder per partition). */
extern bool placement_single_copy(const TablePlacement *p);

/*
 * Moves not copied yet (docs/design.md, "Moving rows").  Whether the table
 * owes any; the move that holds a key's rows (an index into
 * p->moving), or -1 when its replicas have not changed or its rows are
 * copied; and ERROR for a write to such a key, what naming the statement.
 */
static inline bool
placement_is_moving(const TablePlacement *p)
{
	return p->moving.count > 0;
}
extern int	placement_key_move(TablePlacement *p, Datum key, Datum keyspace);
extern void placement_refuse_moving_write(const TablePlacement *p, int move, const char *what);
extern void placement_refuse_while_moving(const TablePlacement *p, const char *what);

/*
 * The replicas a key had where its rows are not copied yet: the old replicas
 * of the move that are nodes of the placement, as node indexes (in the old
 * order): those of the ring or map, and one that left it but keeps its
 * address where the rebalance copies the move from it (remove_node at
 * R = 1); 0 when none is.
 */
extern int	placement_move_old_replicas(const TablePlacement *p, int move, uint16 *out);

/*
 * Who serves each move's rows to a fan-out: the first of its old replicas
 * in the placement that is not excluded, or -1 (serves has one entry per
 * move).  Returns the first move without one, or -1 when every move has one.
 */
extern int	placement_move_servers(const TablePlacement *p, const bool *excluded, int *serves);

/*
 * Whether a move's rows can take writes: the node its rebalance copies them
 * from is a node of the placement (of the ring or map, or one that left it
 * and keeps its address).  The writes of a moving key go to its old
 * replicas of placement_move_old_replicas(), the source among them; one
 * that left the ring and is no source misses them, and is emptied by the
 * move anyway.
 */
extern bool placement_move_writable(const TablePlacement *p, int move);

/* The same for every move. */
extern bool placement_moves_in_placement(const TablePlacement *p);

#endif							/* RINGSHARD_PLACEMENT_H */

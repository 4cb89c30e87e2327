/*
 * placement.c
 *		Rows of a distributed table by node index (see placement.h).
 */
#include "postgres.h"

#include "utils/builtins.h"

#include "fdw/write_locks.h"
#include "routing/placement.h"
#include "rs_hash.h"

/* The nodes of the ring or map; the departed nodes of its moves come after them. */
static int
own_node_count(const TablePlacement *p)
{
	if (p->ring)
		return p->ring->ring ? (int) p->ring->ring->nnodes : 0;
	return p->map->nnodes;
}

int
placement_node_count(const TablePlacement *p)
{
	return own_node_count(p) + p->moving.departed_count;
}

/*
 * Where node i is described: the ring's or map's arrays for its own nodes,
 * the moves' departed_* arrays past them; at is i's index in those arrays.
 */
typedef struct NodeArrays
{
	const Datum *texts;
	const bool *up;
	int			at;
} NodeArrays;

static NodeArrays
node_arrays(const TablePlacement *p, int i)
{
	int			own = own_node_count(p);
	NodeArrays	a;

	if (i >= own)
	{
		a.texts = p->moving.departed_texts;
		a.up = p->moving.departed_up;
		a.at = i - own;
	}
	else
	{
		a.texts = p->ring ? p->ring->node_texts : p->map->node_texts;
		a.up = p->ring ? p->ring->node_up : p->map->node_up;
		a.at = i;
	}
	return a;
}

Datum
placement_node_text(const TablePlacement *p, int i)
{
	NodeArrays	a = node_arrays(p, i);

	return a.texts[a.at];
}

char *
placement_node_name(const TablePlacement *p, int i)
{
	return TextDatumGetCString(placement_node_text(p, i));
}

bool
placement_node_up(const TablePlacement *p, int i)
{
	NodeArrays	a = node_arrays(p, i);

	return a.up[a.at];
}

/* The replicas of a key given as canonical bytes. */
static int
bytes_replicas(TablePlacement *p, const char *bytes, size_t len,
			   const char *keyspace, size_t keyspace_len, uint16 *out)
{
	if (p->ring)
		return (int) table_placement_ring_replicas(p, bytes, len,
												   (uint32) Min(p->ring->replication_factor, PLACEMENT_MAX_REPLICAS),
												   out);
	else
	{
		uint32		first;
		uint32		holders = table_placement_partition_holders(p, keyspace, keyspace_len, bytes, len,
																false, &first);

		holders = Min(holders, PLACEMENT_MAX_REPLICAS);
		for (uint32 i = 0; i < holders; i++)
			out[i] = (uint16) p->map->map.holders[first + i];
		return (int) holders;
	}
}

int
placement_key_replicas(TablePlacement *p, Datum key, Datum keyspace, uint16 *out)
{
	char		buf[KEY_BYTES_BUFSIZE];
	char		keyspace_buf[KEY_BYTES_BUFSIZE];
	size_t		len;
	const char *bytes = key_encoder_bytes(&p->key, key, buf, &len);
	const char *ks = p->keyspace_bytes;	/* a constant keyspace, in UTF-8 */
	size_t		ks_len = p->keyspace_bytes_len;

	if (p->map && p->keyspace_attnum > 0)
		ks = key_encoder_bytes(&p->keyspace_key, keyspace, keyspace_buf, &ks_len);
	return bytes_replicas(p, bytes, len, ks, ks_len, out);
}

uint32
placement_key_lock_slot(TablePlacement *p, Datum key, Datum keyspace)
{
	char		buf[KEY_BYTES_BUFSIZE];
	char		keyspace_buf[KEY_BYTES_BUFSIZE];
	size_t		len;
	size_t		ks_len = 0;
	const char *bytes = key_encoder_bytes(&p->key, key, buf, &len);
	const char *ks = NULL;

	if (p->map && p->keyspace_attnum > 0)
		ks = key_encoder_bytes(&p->keyspace_key, keyspace, keyspace_buf, &ks_len);
	return rsfdw_key_lock_slot(bytes, len, ks, ks_len);
}

bool
placement_slot_key(TablePlacement *p, TupleTableSlot *slot, PlacementRowKey *key)
{
	slot_getsomeattrs(slot, Max(p->key_attnum, p->keyspace_attnum));
	if (slot->tts_isnull[p->key_attnum - 1])
		return false;
	key->keyspace = p->keyspace_bytes;	/* a constant keyspace, in UTF-8 */
	key->keyspace_len = p->keyspace_bytes_len;
	key->keyspace_is_column = p->map && p->keyspace_attnum > 0;
	if (key->keyspace_is_column)
	{
		if (slot->tts_isnull[p->keyspace_attnum - 1])
			return false;
		key->keyspace = key_encoder_bytes(&p->keyspace_key, slot->tts_values[p->keyspace_attnum - 1],
										  key->keyspace_buf, &key->keyspace_len);
	}
	key->bytes = key_encoder_bytes(&p->key, slot->tts_values[p->key_attnum - 1], key->buf, &key->len);
	return true;
}

int
placement_row_key_replicas(TablePlacement *p, const PlacementRowKey *key, uint16 *out)
{
	return bytes_replicas(p, key->bytes, key->len, key->keyspace, key->keyspace_len, out);
}

uint32
placement_row_key_lock_slot(const PlacementRowKey *key)
{
	/* (as placement_key_lock_slot: a constant keyspace is the table's, not part of the slot) */
	return rsfdw_key_lock_slot(key->bytes, key->len, key->keyspace_is_column ? key->keyspace : NULL,
							   key->keyspace_is_column ? key->keyspace_len : 0);
}

bool
placement_covered(const TablePlacement *p, const bool *excluded)
{
	return placement_covered_by(p, excluded, 1);
}

bool
placement_covered_by(const TablePlacement *p, const bool *excluded, int copies)
{
	if (p->ring)
	{
		const rs_ring *ring = p->ring->ring;
		uint16		replicas[PLACEMENT_MAX_REPLICAS];
		uint32		found;

		if (ring == NULL)
			return true;
		for (uint32 point = 0; point < ring->npoints; point++)
		{
			int			kept = 0;

			rs_ring_replicas(ring, rs_ring_token(ring, point),
							 (uint32) Min(p->ring->replication_factor, PLACEMENT_MAX_REPLICAS), replicas, &found);
			for (uint32 r = 0; r < found; r++)
				kept += !excluded[replicas[r]];
			if (kept < Min(copies, (int) found))
				return false;
		}
		return true;
	}
	for (int part = 0; part < RS_PARTITION_COUNT; part++)
	{
		uint32		first = p->map->map.offsets[part];
		uint32		holders = rs_partmap_holder_count(&p->map->map, part);
		int			kept = 0;

		for (uint32 h = 0; h < holders; h++)
			kept += !excluded[p->map->map.holders[first + h]];
		if (kept < Min(copies, (int) holders))
			return false;
	}
	return true;
}

/* The move whose token range holds a token: (start, end], sorted by start, the last may wrap. */
static int
token_move(const MovingRanges *m, uint64 token)
{
	int			lo = 0;
	int			hi = m->count - 1;
	int			found = -1;

	/* the last range starting below the token */
	while (lo <= hi)
	{
		int			mid = lo + (hi - lo) / 2;

		if (m->start[mid] < token)
		{
			found = mid;
			lo = mid + 1;
		}
		else
			hi = mid - 1;
	}
	if (found >= 0)
	{
		if (m->start[found] >= m->end[found] || token <= m->end[found])
			return found;
		return -1;
	}
	/* below every start: only a range wrapping past the top holds it */
	found = m->count - 1;
	if (m->start[found] >= m->end[found] && token <= m->end[found])
		return found;
	return -1;
}

int
placement_key_move(TablePlacement *p, Datum key, Datum keyspace)
{
	char		buf[KEY_BYTES_BUFSIZE];
	char		keyspace_buf[KEY_BYTES_BUFSIZE];
	size_t		len;
	const char *bytes;

	if (p->moving.count == 0)
		return -1;
	bytes = key_encoder_bytes(&p->key, key, buf, &len);
	if (p->ring)
	{
		if (p->ring->ring == NULL)
			return -1;
		return token_move(&p->moving, rs_ring_key_hash(p->ring->ring, bytes, len));
	}
	else
	{
		const char *ks = p->keyspace_bytes;
		size_t		ks_len = p->keyspace_bytes_len;
		int			partition = 0;
		rs_status	status;

		if (p->keyspace_attnum > 0)
			ks = key_encoder_bytes(&p->keyspace_key, keyspace, keyspace_buf, &ks_len);
		status = rs_partition(ks, ks_len, bytes, len, &partition);
		if (status != RS_OK)
			ringshard_report_core_error(status, "cannot compute partition");
		for (int i = 0; i < p->moving.count; i++)
			if (partition >= p->moving.first_partition[i] && partition <= p->moving.last_partition[i])
				return i;
		return -1;
	}
}

void
placement_refuse_moving_write(const TablePlacement *p, int move, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("%s of table \"%s\" would change rows whose replicas are moving", what, p->table_name),
			 errdetail("The topology changed since the table was placed: this key's rows are on %s until a "
					   "rebalance copies them to %s, and they take its writes until then, but not all of them "
					   "can now (a node left the ring, or is down); a write could be lost.",
					   p->moving.old_nodes_text[move], p->moving.new_nodes_text[move]),
			 errhint("Bring the nodes back, or move the rows with CALL ringshard.rebalance('%s'), then retry.",
					 p->table_name)));
}

void
placement_refuse_while_moving(const TablePlacement *p, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("%s of table \"%s\" cannot run while some of its rows are moving", what, p->table_name),
			 errdetail("The topology changed since the table was placed: %d token ranges or partitions of it "
					   "have new replicas and are not copied yet, and some of their rows are on nodes that left "
					   "the ring, which the statement cannot reach.", p->moving.count),
			 errhint("Move them with CALL ringshard.rebalance('%s'), then retry.", p->table_name)));
}

int
placement_move_old_replicas(const TablePlacement *p, int move, uint16 *out)
{
	int			nnodes = placement_node_count(p);
	int			own = own_node_count(p);
	int			found = 0;

	for (int j = 0; j < p->moving.old_count[move] && found < PLACEMENT_MAX_REPLICAS; j++)
		for (int i = 0; i < nnodes; i++)
			if (strcmp(placement_node_name(p, i), p->moving.old_nodes[move][j]) == 0)
			{
				/* a node that left the ring only where the move is copied from it */
				if (i < own || strcmp(p->moving.old_nodes[move][j], p->moving.source[move]) == 0)
					out[found++] = (uint16) i;
				break;
			}
	return found;
}

int
placement_move_servers(const TablePlacement *p, const bool *excluded, int *serves)
{
	int			missing = -1;

	for (int m = 0; m < p->moving.count; m++)
	{
		uint16		old[PLACEMENT_MAX_REPLICAS];
		int			n = placement_move_old_replicas(p, m, old);

		serves[m] = -1;
		for (int r = 0; r < n && serves[m] < 0; r++)
			if (!excluded[old[r]])
				serves[m] = old[r];
		if (serves[m] < 0 && missing < 0)
			missing = m;
	}
	return missing;
}

bool
placement_move_writable(const TablePlacement *p, int move)
{
	int			nnodes = placement_node_count(p);

	for (int i = 0; i < nnodes; i++)
		if (strcmp(placement_node_name(p, i), p->moving.source[move]) == 0)
			return true;
	return false;
}

bool
placement_moves_in_placement(const TablePlacement *p)
{
	for (int m = 0; m < p->moving.count; m++)
		if (!placement_move_writable(p, m))
			return false;
	return true;
}

bool
placement_single_copy(const TablePlacement *p)
{
	/* rows copied by an unfinished move may still be on the nodes they left */
	if (p->moving.count > 0 || p->moving.leftovers)
		return false;
	if (p->ring)
		return p->ring->replication_factor <= 1 || (p->ring->ring && p->ring->ring->nnodes <= 1);
	for (int part = 0; part < RS_PARTITION_COUNT; part++)
		if (rs_partmap_holder_count(&p->map->map, part) > 1)
			return false;
	return true;
}

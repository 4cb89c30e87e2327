/*
 * routing.c
 *		The SQL-callable routing functions: ring_token, shard_for, replicas_for,
 *		read_node_for, partition_for, nodes_for, partition_nodes, and
 *		ringshard.key_bytes.
 *
 * One C function serves every overload of a SQL name: the key's type is read
 * from the call expression once and kept, with the ring or map, in fn_extra.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "common/pg_prng.h"
#include "nodes/primnodes.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "routing/topology_cache.h"
#include "rs_hash.h"
#include "types/key_bytes.h"
#include "types/ringtoken.h"

/*
 * Replica arrays a call site keeps, by replica set: a ring of a few nodes
 * has few distinct sets (six on three nodes at R = 3), so most rows return
 * an array built before instead of building one.  Direct-mapped; sets of up
 * to four nodes, the key packing their indexes.  On a ring of many nodes
 * almost every set is new, so a memo that hits less than half of its first
 * MEMO_TRIAL_ROWS rows stops, and the rows build their arrays as before.
 */
#define REPLICA_MEMO_SLOTS 64
#define REPLICA_MEMO_MAX_NODES 4
#define MEMO_TRIAL_ROWS 1024

typedef struct ReplicaMemo
{
	const CachedRing *ring;		/* the ring the arrays were built from */
	uint64		generation;		/* of the cache when they were */
	uint32		rows;			/* rows seen since then, up to the trial's end */
	uint32		hits;
	bool		stopped;		/* too few hits: rows build their own arrays */
	uint64		keys[REPLICA_MEMO_SLOTS];	/* 0 = empty slot */
	ArrayType  *arrays[REPLICA_MEMO_SLOTS];
} ReplicaMemo;

/* What a routing call site keeps between rows. */
typedef struct RouteCallState
{
	KeyEncoder	key;
	uint64		generation;		/* of the cache when ring/map were fetched */
	CachedRing *ring;
	CachedMap  *map;
	text	   *target_name;	/* ring or map name the pointer was fetched for */
	bool		target_arg_stable;	/* name is a constant of the call site */
	ReplicaMemo *replica_memo;	/* replicas_for's arrays, made on first use */
} RouteCallState;

/*
 * Whether argument argnum of the call is a constant in the expression.  Not
 * get_fn_expr_arg_stable: it also accepts external parameters, and a
 * PL/pgSQL variable is one whose value changes while the expression, and
 * its fn_extra, are kept for the whole transaction.
 */
static bool
arg_is_constant(FmgrInfo *flinfo, int argnum)
{
	Node	   *expr = flinfo->fn_expr;
	List	   *args;
	Node	   *arg;

	if (expr == NULL || !IsA(expr, FuncExpr))
		return false;
	args = ((FuncExpr *) expr)->args;
	if (argnum < 0 || argnum >= list_length(args))
		return false;
	arg = (Node *) list_nth(args, argnum);
	while (arg != NULL && IsA(arg, RelabelType))
		arg = (Node *) ((RelabelType *) arg)->arg;
	return arg != NULL && IsA(arg, Const);
}

/*
 * The call site's state, set up on the first row.  target_arg is the
 * position of the ring or map name argument (absent means "default").
 */
static RouteCallState *
route_state(FunctionCallInfo fcinfo, int key_arg, int target_arg)
{
	RouteCallState *state = fcinfo->flinfo->fn_extra;

	if (state == NULL)
	{
		state = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(RouteCallState));
		key_encoder_init(&state->key, get_fn_expr_argtype(fcinfo->flinfo, key_arg),
						 fcinfo->flinfo->fn_mcxt);

		/*
		 * A name that is a constant cannot change between rows, so the ring
		 * fetched for it stays right until the cache changes: no per-row
		 * name comparison.
		 */
		state->target_arg_stable = target_arg >= PG_NARGS() ||
			arg_is_constant(fcinfo->flinfo, target_arg);
		fcinfo->flinfo->fn_extra = state;
	}
	return state;
}

/* Whether the call site's ring/map was fetched for this name and is current. */
static bool
target_is_current(RouteCallState *state, text *name)
{
	return state->generation == topology_cache_generation &&
		state->target_name != NULL &&
		VARSIZE_ANY_EXHDR(state->target_name) == VARSIZE_ANY_EXHDR(name) &&
		memcmp(VARDATA_ANY(state->target_name), VARDATA_ANY(name),
			   VARSIZE_ANY_EXHDR(name)) == 0;
}

/* Remember the name the call site's ring/map belongs to. */
static void
remember_target(FunctionCallInfo fcinfo, RouteCallState *state, text *name)
{
	if (state->target_name)
		pfree(state->target_name);
	state->target_name = (text *) MemoryContextAlloc(fcinfo->flinfo->fn_mcxt, VARSIZE_ANY(name));
	memcpy(state->target_name, name, VARSIZE_ANY(name));
	state->generation = topology_cache_generation;
}

/* The text 'default', the name of the built-in ring and map. */
static text *
default_target_name(void)
{
	static text *default_name = NULL;

	if (default_name == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

		default_name = cstring_to_text_with_len("default", 7);
		MemoryContextSwitchTo(old);
	}
	return default_name;
}

/* Fetch the ring of this name for the call site; it must have nodes. */
static void
fetch_ring(FunctionCallInfo fcinfo, RouteCallState *state, text *name)
{
	char	   *cname = text_to_cstring(name);
	CachedRing *ring = topology_cache_ring(cname);

	/* Not remembered: a caught error must not leave it for the next row. */
	if (ring->ring == NULL)
	{
		/* Often "default" because the ring argument was left out: name the others. */
		char	   *others = topology_other_rings_with_nodes(ring->name);

		if (others)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("ring \"%s\" has no nodes", ring->name),
					 errhint("Rings with nodes: %s. Name the ring as the argument after the key, or add a node with ringshard.add_node(node, address, ring).",
							 others)));
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("ring \"%s\" has no nodes", ring->name),
				 errhint("Add one with ringshard.add_node(node, address, ring).")));
	}
	state->ring = ring;
	remember_target(fcinfo, state, name);
	pfree(cname);
}

/*
 * The name of the ring or map for this row (the named argument, or
 * "default") when the call site's one, fetched (the ring or map at hand,
 * NULL if none) for an earlier row, is not it or not current; else NULL.
 * Inline, as it runs once per row.
 */
static inline text *
target_to_fetch(FunctionCallInfo fcinfo, RouteCallState *state, const void *fetched, int target_arg)
{
	text	   *name;

	if (likely(state->target_arg_stable && fetched != NULL &&
			   state->generation == topology_cache_generation))
		return NULL;
	name = target_arg < PG_NARGS() ? PG_GETARG_TEXT_PP(target_arg) : default_target_name();
	return target_is_current(state, name) ? NULL : name;
}

/*
 * The ring for this row: the named argument, or "default".  Inline, as it
 * runs once per row; a ring without nodes is refused when it is fetched.
 */
static inline CachedRing *
route_ring(FunctionCallInfo fcinfo, RouteCallState *state, int ring_arg)
{
	text	   *name = target_to_fetch(fcinfo, state, state->ring, ring_arg);

	if (name != NULL)
		fetch_ring(fcinfo, state, name);
	return state->ring;
}

/* The map for this row: the named argument, or "default". */
static CachedMap *
route_map(FunctionCallInfo fcinfo, RouteCallState *state, int map_arg)
{
	text	   *name = target_to_fetch(fcinfo, state, state->map, map_arg);

	if (name != NULL)
	{
		char	   *cname = text_to_cstring(name);

		state->map = topology_cache_map(cname);
		remember_target(fcinfo, state, name);
		pfree(cname);
	}
	return state->map;
}

/* The key's hash in the ring's token space. */
static inline uint64
key_hash(FunctionCallInfo fcinfo, RouteCallState *state, const rs_ring *ring)
{
	char		buf[KEY_BYTES_BUFSIZE];
	size_t		len;
	const char *bytes = key_encoder_bytes(&state->key, PG_GETARG_DATUM(0), buf, &len);

	return rs_ring_key_hash(ring, bytes, len);
}

/*
 * A text[] of node names from node indexes, laid out directly: the cached
 * names are ready-made text values, zero-padded to int alignment, with their
 * padded sizes at hand, so every byte of the array is copied from them and
 * nothing is cleared first.  A name of at most NODE_TEXT_CHUNK bytes is
 * copied as one fixed-size chunk: the bytes past its end land where the next
 * name goes, or in the slack past the array, and the cache keeps that many
 * readable bytes after its last name.
 */
static ArrayType *
node_array(const CachedRing *ring, const uint16 *nodes, uint32 count)
{
	Size		data_bytes = 0;
	Size		total;
	ArrayType  *array;
	char	   *data;

	if (count == 0)
		return construct_empty_array(TEXTOID);
	for (uint32 i = 0; i < count; i++)
		data_bytes += ring->node_text_sizes[nodes[i]];
	total = ARR_OVERHEAD_NONULLS(1) + data_bytes;
	array = (ArrayType *) palloc(total + NODE_TEXT_CHUNK);
	StaticAssertStmt(ARR_OVERHEAD_NONULLS(1) == sizeof(ArrayType) + 2 * sizeof(int),
					 "a one-dimensional array's header has no padding");
	SET_VARSIZE(array, total);
	array->ndim = 1;
	array->dataoffset = 0;
	array->elemtype = TEXTOID;
	ARR_DIMS(array)[0] = (int) count;
	ARR_LBOUND(array)[0] = 1;
	data = ARR_DATA_PTR(array);
	for (uint32 i = 0; i < count; i++)
	{
		const char *name = DatumGetPointer(ring->node_texts[nodes[i]]);
		Size		size = ring->node_text_sizes[nodes[i]];

		if (size <= NODE_TEXT_CHUNK)
			memcpy(data, name, NODE_TEXT_CHUNK);
		else
			memcpy(data, name, size);
		data += size;
	}
	return array;
}

/*
 * The text[] of a replica set, from the call site's memo when it was built
 * before.  The memo lives in the call site's memory and is returned without
 * a copy, as shard_for returns cached names: callers copy what they keep.
 */
static ArrayType *
memo_node_array(FunctionCallInfo fcinfo, RouteCallState *state, const CachedRing *ring,
				const uint16 *nodes, uint32 count)
{
	ReplicaMemo *memo = state->replica_memo;
	uint64		key = 0;
	uint32		slot;

	if (count == 0 || count > REPLICA_MEMO_MAX_NODES)
		return node_array(ring, nodes, count);
	if (memo == NULL)
		memo = state->replica_memo =
			MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(ReplicaMemo));
	if (memo->ring != ring || memo->generation != topology_cache_generation)
	{
		for (int i = 0; i < REPLICA_MEMO_SLOTS; i++)
		{
			if (memo->arrays[i])
				pfree(memo->arrays[i]);
			memo->arrays[i] = NULL;
			memo->keys[i] = 0;
		}
		memo->ring = ring;
		memo->generation = topology_cache_generation;
		memo->rows = 0;
		memo->hits = 0;
		memo->stopped = false;
	}
	if (memo->stopped)
		return node_array(ring, nodes, count);

	/* Node indexes are < 65535, so index + 1 packs into 16 bits, never 0. */
	for (uint32 i = 0; i < count; i++)
		key = (key << 16) | ((uint64) nodes[i] + 1);
	slot = (uint32) ((key * UINT64CONST(0x9E3779B97F4A7C15)) >> 58);
	if (memo->rows < MEMO_TRIAL_ROWS)
	{
		memo->rows++;
		memo->hits += memo->keys[slot] == key;
	}
	else if (memo->hits < MEMO_TRIAL_ROWS / 2)
	{
		memo->stopped = true;
		return node_array(ring, nodes, count);
	}
	if (memo->keys[slot] != key)
	{
		MemoryContext old = MemoryContextSwitchTo(fcinfo->flinfo->fn_mcxt);

		if (memo->arrays[slot])
			pfree(memo->arrays[slot]);
		memo->arrays[slot] = NULL;	/* stays empty if the build fails */
		memo->keys[slot] = 0;
		memo->arrays[slot] = node_array(ring, nodes, count);
		memo->keys[slot] = key;
		MemoryContextSwitchTo(old);
	}
	return memo->arrays[slot];
}

/* The replica set of the current row's key: up to want node indexes. */
static uint32
ring_replicas(FunctionCallInfo fcinfo, RouteCallState *state, const rs_ring *ring,
			  uint32 want, uint16 *out)
{
	uint32		count = 0;
	rs_status	status = rs_ring_replicas(ring, key_hash(fcinfo, state, ring), want, out, &count);

	if (status != RS_OK)
		ringshard_report_core_error(status, "cannot compute replicas");
	return count;
}

PG_FUNCTION_INFO_V1(ringshard_ring_token);

/* ring_token(key): the key's MurmurHash3 ring token (§2). */
Datum
ringshard_ring_token(PG_FUNCTION_ARGS)
{
	RouteCallState *state = route_state(fcinfo, 0, PG_NARGS());
	char		buf[KEY_BYTES_BUFSIZE];
	size_t		len;
	const char *bytes = key_encoder_bytes(&state->key, PG_GETARG_DATUM(0), buf, &len);

	PG_RETURN_RINGTOKEN(rs_murmur3_token(bytes, len));
}

PG_FUNCTION_INFO_V1(ringshard_key_bytes);

/* key_bytes(key): the canonical bytes ring_token and partition_for hash (§1). */
Datum
ringshard_key_bytes(PG_FUNCTION_ARGS)
{
	RouteCallState *state = route_state(fcinfo, 0, PG_NARGS());
	char		buf[KEY_BYTES_BUFSIZE];
	size_t		len;
	const char *bytes = key_encoder_bytes(&state->key, PG_GETARG_DATUM(0), buf, &len);
	bytea	   *result = (bytea *) palloc(VARHDRSZ + len);

	SET_VARSIZE(result, VARHDRSZ + len);
	memcpy(VARDATA(result), bytes, len);
	PG_RETURN_BYTEA_P(result);
}

PG_FUNCTION_INFO_V1(ringshard_shard_for);

/*
 * shard_for(key [, ring]): the owning node's name.  STABLE in SQL, as every
 * function that reads the topology: its answer changes with the ring.
 */
Datum
ringshard_shard_for(PG_FUNCTION_ARGS)
{
	RouteCallState *state = route_state(fcinfo, 0, 1);
	CachedRing *ring = route_ring(fcinfo, state, 1);
	uint32		owner = rs_ring_owner(ring->ring, key_hash(fcinfo, state, ring->ring));

	/* The name lives in the cache until the transaction ends: no copy. */
	PG_RETURN_DATUM(cached_ring_node_text(ring, owner));
}

PG_FUNCTION_INFO_V1(ringshard_replicas_for);

/* replicas_for(key [, ring [, n]]): owner first, R (or n) distinct nodes. */
Datum
ringshard_replicas_for(PG_FUNCTION_ARGS)
{
	RouteCallState *state = route_state(fcinfo, 0, 1);
	CachedRing *ring = route_ring(fcinfo, state, 1);
	int32		want = ring->replication_factor;
	uint16		small[64];
	uint16	   *nodes = small;
	uint32		count;

	if (PG_NARGS() > 2)
	{
		want = PG_GETARG_INT32(2);
		if (want < 1)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("replica count %d is not positive", want),
					 errhint("Ask for at least one replica.")));
	}
	if ((uint32) want > ring->ring->nnodes)
		want = (int32) ring->ring->nnodes;
	if (want > (int32) lengthof(small))
		nodes = palloc(sizeof(uint16) * want);
	count = ring_replicas(fcinfo, state, ring->ring, (uint32) want, nodes);
	PG_RETURN_ARRAYTYPE_P(memo_node_array(fcinfo, state, ring, nodes, count));
}

PG_FUNCTION_INFO_V1(ringshard_read_node_for);

/* read_node_for(key [, ring]): one healthy replica, chosen at random. */
Datum
ringshard_read_node_for(PG_FUNCTION_ARGS)
{
	RouteCallState *state = route_state(fcinfo, 0, 1);
	CachedRing *ring = route_ring(fcinfo, state, 1);
	uint16		nodes[64];
	uint16		healthy[64];
	uint32		nhealthy = 0;
	uint32		count;

	count = ring_replicas(fcinfo, state, ring->ring,
						  (uint32) Min(ring->replication_factor, (int) lengthof(nodes)), nodes);
	for (uint32 i = 0; i < count; i++)
		if (ring->node_up[nodes[i]])
			healthy[nhealthy++] = nodes[i];
	if (nhealthy == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("no healthy replica in ring \"%s\" for this key", ring->name),
				 errdetail("All %u replicas, owner first %s, are marked down.", count,
						   TextDatumGetCString(ring->node_texts[nodes[0]])),
				 errhint("Mark a node up with ringshard.mark_node_up(), or raise the replication factor.")));
	PG_RETURN_DATUM(ring->node_texts[healthy[pg_prng_uint64_range(&pg_global_prng_state, 0, nhealthy - 1)]]);
}

/* partition(keyspace, key) of the current row (§5): both as UTF-8 canonical bytes. */
static int
row_partition(FunctionCallInfo fcinfo, RouteCallState *state)
{
	text	   *keyspace = PG_GETARG_TEXT_PP(0);
	size_t		keyspace_len;
	const char *keyspace_bytes = key_text_as_utf8(VARDATA_ANY(keyspace), VARSIZE_ANY_EXHDR(keyspace),
												  &keyspace_len);
	char		buf[KEY_BYTES_BUFSIZE];
	size_t		len;
	const char *bytes = key_encoder_bytes(&state->key, PG_GETARG_DATUM(1), buf, &len);
	int			partition = 0;
	rs_status	status = rs_partition(keyspace_bytes, keyspace_len, bytes, len, &partition);

	if (status != RS_OK)
		ringshard_report_core_error(status, "cannot compute partition");
	return partition;
}

PG_FUNCTION_INFO_V1(ringshard_partition_for);

/* partition_for(keyspace, key): the key's partition, 0..255 (§5). */
Datum
ringshard_partition_for(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(row_partition(fcinfo, route_state(fcinfo, 1, PG_NARGS())));
}

/* The holders of a partition as text[]; empty for a gap. */
static ArrayType *
partition_holders(const CachedMap *map, int partition)
{
	uint32		first = map->map.offsets[partition];
	uint32		count = rs_partmap_holder_count(&map->map, partition);
	Datum	   *elems = palloc(sizeof(Datum) * Max(count, 1));

	for (uint32 i = 0; i < count; i++)
		elems[i] = map->node_texts[map->map.holders[first + i]];
	return construct_array(elems, (int) count, TEXTOID, -1, false, TYPALIGN_INT);
}

PG_FUNCTION_INFO_V1(ringshard_nodes_for);

/* nodes_for(keyspace, key [, map]): every holder of the key's partition. */
Datum
ringshard_nodes_for(PG_FUNCTION_ARGS)
{
	RouteCallState *state = route_state(fcinfo, 1, 2);
	CachedMap  *map = route_map(fcinfo, state, 2);
	int			partition = row_partition(fcinfo, state);

	if (rs_partmap_holder_count(&map->map, partition) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("partition %d of map \"%s\" has no node", partition, map->name),
				 errdetail("The key in keyspace \"%s\" hashes to partition %d, which is a gap in the map.",
						   text_to_cstring(PG_GETARG_TEXT_PP(0)), partition),
				 errhint("Assign it with ringshard.assign_partitions(node, %d, %d, '%s'); ringshard.check_partition_map() lists every gap.",
						 partition, partition, map->name)));
	PG_RETURN_ARRAYTYPE_P(partition_holders(map, partition));
}

PG_FUNCTION_INFO_V1(ringshard_partition_nodes);

/* partition_nodes(partition [, map]): the holders of one partition. */
Datum
ringshard_partition_nodes(PG_FUNCTION_ARGS)
{
	int32		partition = PG_GETARG_INT32(0);
	RouteCallState *state = fcinfo->flinfo->fn_extra;

	if (partition < 0 || partition >= RS_PARTITION_COUNT)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("partition %d is out of range", partition),
				 errhint("Partitions are numbered 0 to 255.")));
	if (state == NULL)
	{
		state = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(RouteCallState));
		state->target_arg_stable = PG_NARGS() < 2 ||
			arg_is_constant(fcinfo->flinfo, 1);
		fcinfo->flinfo->fn_extra = state;
	}
	PG_RETURN_ARRAYTYPE_P(partition_holders(route_map(fcinfo, state, 1), partition));
}

/*
 * topology_cache.c
 *		Backend-local rings and partition maps (see topology_cache.h).
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "admin/version.h"
#include "routing/topology_cache.h"

uint64		topology_cache_generation = 1;

static CachedRing *cached_rings;
static CachedMap *cached_maps;

/* Entries replaced by an invalidation, freed at the end of the transaction. */
static CachedRing *retired_rings;
static CachedMap *retired_maps;

/* The relation whose relcache invalidation means "topology changed". */
static Oid	sentinel_relid = InvalidOid;

static MemoryContext topology_context;

/* Free the lists of retired entries. */
static void
release_retired(void)
{
	/*
	 * Each entry lives in its own context under topology_context, with
	 * everything palloc'd for it; its core ring or map is malloc'd.
	 */
	while (retired_rings)
	{
		CachedRing *next = retired_rings->next;

		rs_ring_free(retired_rings->ring);
		MemoryContextDelete(retired_rings->mcxt);
		retired_rings = next;
	}
	while (retired_maps)
	{
		CachedMap  *next = retired_maps->next;

		rs_partmap_free(&retired_maps->map);
		MemoryContextDelete(retired_maps->mcxt);
		retired_maps = next;
	}
}

/*
 * A context for a new entry.  It starts under the caller's context (not an
 * SPI context, which ends before the entry is done), so an error while the
 * entry is built frees it with the transaction; once the
 * entry is complete, keep_entry_context moves it under topology_context.
 */
static MemoryContext
new_entry_context(MemoryContext parent, const char *name)
{
	MemoryContext mcxt = AllocSetContextCreate(parent, "ringshard topology",
											   ALLOCSET_SMALL_SIZES);

	MemoryContextCopyAndSetIdentifier(mcxt, name);
	return mcxt;
}

static void
keep_entry_context(MemoryContext mcxt)
{
	MemoryContextSetParent(mcxt, topology_context);
}

/* Retire every cached entry and move the generation on. */
static void
invalidate_all(void)
{
	while (cached_rings)
	{
		CachedRing *next = cached_rings->next;

		cached_rings->next = retired_rings;
		retired_rings = cached_rings;
		cached_rings = next;
	}
	while (cached_maps)
	{
		CachedMap  *next = cached_maps->next;

		cached_maps->next = retired_maps;
		retired_maps = cached_maps;
		cached_maps = next;
	}
	topology_cache_generation++;
}

/* Relcache callback: a change of ringshard.rings (or of everything) invalidates. */
static void
topology_relcache_callback(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == sentinel_relid)
		invalidate_all();
}

/*
 * Whether this transaction filled a cache entry from its own snapshot rather
 * than the latest: in parallel mode no newer snapshot may be taken, and an
 * entry read so after an invalidation may predate the change it announced.
 * Such entries serve the rest of the transaction, as its snapshot would,
 * and are all read again after it.
 */
static bool read_old_snapshot = false;

/* Transaction callback: retired entries can go once no query holds them. */
static void
topology_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_PARALLEL_ABORT ||
		event == XACT_EVENT_PREPARE)
	{
		if (read_old_snapshot)
			invalidate_all();
		read_old_snapshot = false;
		release_retired();
	}
}

/* Register the callbacks; called from _PG_init. */
void
topology_cache_init(void)
{
	topology_context = AllocSetContextCreate(TopMemoryContext, "ringshard topology",
											 ALLOCSET_SMALL_SIZES);
	CacheRegisterRelcacheCallback(topology_relcache_callback, (Datum) 0);
	RegisterXactCallback(topology_xact_callback, NULL);
}

/* The relation whose invalidation means "topology changed": ringshard.rings, or InvalidOid. */
static Oid
lookup_sentinel(void)
{
	Oid			schema = get_namespace_oid("ringshard", true);

	return OidIsValid(schema) ? get_relname_relid("rings", schema) : InvalidOid;
}

/* Remember which relation's invalidation means "topology changed". */
static void
resolve_sentinel(void)
{
	sentinel_relid = lookup_sentinel();
	if (!OidIsValid(sentinel_relid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("ringshard catalog not found"),
				 errhint("Run CREATE EXTENSION ringshard in this database.")));
	/* Every cached ring or map is built here first: check the SQL version once. */
	ringshard_check_version();
}

/*
 * Watch the catalog's invalidations from now on.  Until the sentinel is
 * known an invalidation of it passes unnoticed; a cache that is filled
 * before any ring or map is built here (a table's annotation, read by
 * planning and by the utility hook) must not miss the changes that follow.
 */
void
topology_cache_watch(void)
{
	if (!OidIsValid(sentinel_relid))
		sentinel_relid = lookup_sentinel();
}

/* The SQLSTATE a core status is reported with (see topology_cache.h). */
int
ringshard_core_error_code(rs_status status)
{
	switch (status)
	{
		case RS_ERR_NOMEM:
			return ERRCODE_OUT_OF_MEMORY;
		case RS_ERR_SYNTAX:
			return ERRCODE_INVALID_TEXT_REPRESENTATION;
		case RS_ERR_OUT_OF_RANGE:
			return ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE;
		case RS_ERR_TOO_MANY_POINTS:
		case RS_ERR_TOO_MANY_NODES:
		case RS_ERR_TOO_LARGE:
			return ERRCODE_PROGRAM_LIMIT_EXCEEDED;
		case RS_ERR_DUPLICATE:
			return ERRCODE_DUPLICATE_OBJECT;
		case RS_ERR_EMPTY:
			return ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE;
		case RS_ERR_CRYPTO:
			return ERRCODE_EXTERNAL_ROUTINE_EXCEPTION;
		default:
			return ERRCODE_INVALID_PARAMETER_VALUE;
	}
}

/* Report a core status as an ERROR with a SQLSTATE; never returns. */
void
ringshard_report_core_error(rs_status status, const char *what)
{
	ereport(ERROR,
			(errcode(ringshard_core_error_code(status)),
			 errmsg("%s: %s", what, rs_status_text(status))));
}

/*
 * Read the catalog as committed now, not as of the calling statement's
 * snapshot: a ring built from an older snapshot after the invalidation that
 * announced a change was already consumed would be cached as current.  (In
 * a parallel worker no newer snapshot may be taken; the leader's is used.)
 */
bool		topology_cache_use_active_snapshot = false;

bool
topology_catalog_connect(void)
{
	bool		pushed = false;

	if (!IsInParallelMode() && !topology_cache_use_active_snapshot)
	{
		PushActiveSnapshot(GetLatestSnapshot());
		pushed = true;
	}
	else if (IsInParallelMode())
		read_old_snapshot = true;
	SPI_connect();
	return pushed;
}

/* Undo topology_catalog_connect. */
void
topology_catalog_finish(bool pushed)
{
	SPI_finish();
	if (pushed)
		PopActiveSnapshot();
}

/* Run a read-only catalog query with one text parameter. */
static void
run_catalog_query(const char *sql, const char *param)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		values[1];

	values[0] = CStringGetTextDatum(param);
	if (SPI_execute_with_args(sql, 1, argtypes, values, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "ringshard catalog query failed: %s", sql);
}

/*
 * Names other than exclude, ", "-separated in bytewise order, read in the
 * current SPI connection: the column name (qualified by its alias) of the
 * relation from.  NULL when there are none.  For hints that name the rings
 * or maps a mistyped or forgotten argument could have meant: the rings with
 * nodes, all rings and all maps are listed alike.
 */
static char *
other_names_in_catalog(const char *name, const char *from, const char *exclude)
{
	char	   *value;
	char	   *names = NULL;

	/* The first ten: a hint, not a listing. */
	run_catalog_query(psprintf("SELECT pg_catalog.string_agg(s.name, ', ' ORDER BY s.name) "
							   "|| CASE WHEN pg_catalog.max(s.total) > 10 "
							   "THEN ' and ' || (pg_catalog.max(s.total) - 10) || ' more' ELSE '' END "
							   "FROM (SELECT %s COLLATE pg_catalog.\"C\" AS name, "
							   "pg_catalog.count(*) OVER () AS total "
							   "FROM %s "
							   "WHERE %s OPERATOR(pg_catalog.<>) $1 ORDER BY 1 LIMIT 10) s",
							   name, from, name), exclude);
	value = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	if (value)
	{
		/* in the caller's context: SPI's goes away with the connection */
		names = SPI_palloc(strlen(value) + 1);
		strcpy(names, value);
	}
	return names;
}

/*
 * The error for a ring or map (what: "ring", "partition map") that does not
 * exist: the others of its kind (others, from other_names_in_catalog) and
 * the function that creates one (creator) in the hint.
 */
static void report_missing(const char *what, const char *name, const char *kind, const char *others,
						   const char *creator) pg_attribute_noreturn();

static void
report_missing(const char *what, const char *name, const char *kind, const char *others,
			   const char *creator)
{
	if (others)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("%s \"%s\" does not exist", what, name),
				 errhint("Existing %ss: %s. Create a %s with ringshard.%s().", kind, others, kind, creator)));
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_OBJECT),
			 errmsg("%s \"%s\" does not exist", what, name),
			 errhint("Create a %s with ringshard.%s().", kind, creator)));
}

/* Names of the other rings that have nodes (see topology_cache.h). */
char *
topology_other_rings_with_nodes(const char *ring_name)
{
	bool		pushed = topology_catalog_connect();
	char	   *names = other_names_in_catalog("m.ring_name",
											   "(SELECT DISTINCT ring_name FROM ringshard.ring_members) m",
											   ring_name);

	topology_catalog_finish(pushed);
	return names;
}

/* Read a ring's definition and members from the catalog (see topology_cache.h). */
RingSpec *
topology_read_ring_spec(const char *ring_name)
{
	MemoryContext caller = CurrentMemoryContext;
	RingSpec   *spec = palloc0(sizeof(RingSpec));
	bool		pushed;

	spec->name = pstrdup(ring_name);
	pushed = topology_catalog_connect();
	run_catalog_query("SELECT algorithm, vnodes, replication_factor FROM ringshard.rings "
					  "WHERE ring_name OPERATOR(pg_catalog.=) $1", ring_name);
	if (SPI_processed != 1)
		report_missing("ring", ring_name, "ring",
					   other_names_in_catalog("r.ring_name", "ringshard.rings r", ring_name), "create_ring");
	{
		bool		isnull;
		HeapTuple	tuple = SPI_tuptable->vals[0];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		char	   *algorithm_name = TextDatumGetCString(SPI_getbinval(tuple, desc, 1, &isnull));

		spec->algorithm = strcmp(algorithm_name, "ketama") == 0 ? RS_RING_KETAMA : RS_RING_MURMUR3;
		spec->vnodes = DatumGetInt32(SPI_getbinval(tuple, desc, 2, &isnull));
		spec->replication_factor = DatumGetInt32(SPI_getbinval(tuple, desc, 3, &isnull));
	}

	/* Bytewise name order is the core's node order, so indexes line up. */
	run_catalog_query("SELECT m.node_name, m.weight, n.is_up, m.zone, m.tokens "
					  "FROM ringshard.ring_members m JOIN ringshard.nodes n "
					  "ON n.node_name OPERATOR(pg_catalog.=) m.node_name "
					  "WHERE m.ring_name OPERATOR(pg_catalog.=) $1 "
					  "ORDER BY m.node_name COLLATE pg_catalog.\"C\"", ring_name);
	spec->nmembers = (int) SPI_processed;
	spec->members = MemoryContextAllocZero(caller, sizeof(rs_ring_member) * (spec->nmembers + 1));
	spec->node_up = MemoryContextAllocZero(caller, sizeof(bool) * (spec->nmembers + 1));
	for (int i = 0; i < spec->nmembers; i++)
	{
		bool		isnull;
		HeapTuple	tuple = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		char	   *name = MemoryContextStrdup(caller, TextDatumGetCString(SPI_getbinval(tuple, desc, 1, &isnull)));
		Datum		zone;
		Datum		tokens;

		spec->members[i].name = name;
		spec->members[i].name_len = strlen(name);
		spec->members[i].weight = DatumGetFloat8(SPI_getbinval(tuple, desc, 2, &isnull));
		spec->node_up[i] = DatumGetBool(SPI_getbinval(tuple, desc, 3, &isnull));
		zone = SPI_getbinval(tuple, desc, 4, &isnull);
		if (!isnull)
		{
			char	   *z = MemoryContextStrdup(caller, TextDatumGetCString(zone));

			spec->members[i].zone = z;
			spec->members[i].zone_len = strlen(z);
		}
		tokens = SPI_getbinval(tuple, desc, 5, &isnull);
		if (!isnull)
		{
			MemoryContext old = MemoryContextSwitchTo(caller);

			spec->members[i].tokens = topology_token_array(DatumGetArrayTypeP(tokens),
														   &spec->members[i].ntokens);
			MemoryContextSwitchTo(old);
		}
	}
	topology_catalog_finish(pushed);
	return spec;
}

/*
 * The tokens of a ringtoken[] as a palloc'd array, in the current memory
 * context; ERROR for NULL elements or more than RS_RING_MAX_TOKENS (the
 * catalog's check refuses both; an argument may hold them).
 */
uint64 *
topology_token_array(ArrayType *array, uint32 *count)
{
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	uint64	   *tokens;

	if (ARR_NDIM(array) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("tokens must be a one-dimensional array")));
	deconstruct_array(array, ARR_ELEMTYPE(array), 8, true, TYPALIGN_DOUBLE, &elems, &nulls, &n);
	if (n > RS_RING_MAX_TOKENS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("%d tokens are more than a node may hold", n),
				 errdetail("A node holds at most %u explicit tokens.", RS_RING_MAX_TOKENS)));
	tokens = palloc(sizeof(uint64) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("a token must not be null")));
		tokens[i] = DatumGetUInt64(elems[i]);
	}
	*count = (uint32) n;
	return tokens;
}

/* Build the ring a spec describes; NULL when it has no members; ERROR if invalid. */
rs_ring *
topology_build_ring(const RingSpec *spec, int options)
{
	rs_ring    *ring = NULL;
	long		bad_member = -1;
	rs_status	status;

	if (spec->nmembers == 0)
		return NULL;
	status = rs_ring_build(spec->algorithm, spec->members, (size_t) spec->nmembers,
						   (uint32) spec->vnodes, options, &ring, &bad_member);
	if (status == RS_OK)
		return ring;
	if (bad_member >= 0 && status == RS_ERR_INVALID && spec->algorithm == RS_RING_KETAMA &&
		(spec->members[bad_member].zone != NULL || spec->members[bad_member].tokens != NULL))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot build ring \"%s\": node \"%s\" has a zone or explicit tokens on a ketama ring",
						spec->name, spec->members[bad_member].name),
				 errhint("Zones and explicit tokens are for murmur3 rings.")));
	if (bad_member >= 0)
		ereport(ERROR,
				(errcode(status == RS_ERR_TOO_MANY_POINTS ? ERRCODE_PROGRAM_LIMIT_EXCEEDED
						 : ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cannot build ring \"%s\": %s", spec->name, rs_status_text(status)),
				 spec->members[bad_member].tokens != NULL ?
				 errdetail("The offending node is \"%s\" with %u explicit tokens.",
						   spec->members[bad_member].name, spec->members[bad_member].ntokens) :
				 errdetail("The offending node is \"%s\" with weight %.17g.",
						   spec->members[bad_member].name, spec->members[bad_member].weight),
				 errhint("A ring holds at most %u points and %u nodes.",
						 RS_RING_MAX_POINTS, RS_RING_MAX_NODES)));
	ringshard_report_core_error(status, psprintf("cannot build ring \"%s\"", spec->name));
}

/*
 * Read a ring's spec or a map's entry from the catalog with reader, again
 * while an invalidation arrives during the read (at most 11 reads): an
 * invalidation consumed while reading means the rows read may predate the
 * change it announces, and a new read takes a snapshot that sees it.
 * discard, unless NULL, frees a read that is not kept.  Rings and maps are
 * cached alike.
 */
static void *
read_current(void *(*reader) (const char *name), void (*discard) (void *result), const char *name)
{
	for (int attempt = 0;; attempt++)
	{
		uint64		generation = topology_cache_generation;
		void	   *result = reader(name);

		if (generation == topology_cache_generation || attempt == 10)
			return result;
		if (discard)
			discard(result);
	}
}

/* topology_read_ring_spec as read_current takes a reader. */
static void *
read_ring_spec(const char *ring_name)
{
	return topology_read_ring_spec(ring_name);
}

/* The cached ring of this name; ERROR if no such ring. */
CachedRing *
topology_cache_ring(const char *ring_name)
{
	CachedRing *entry;
	RingSpec   *spec;
	rs_ring    *ring;
	int			replication_factor;
	MemoryContext entry_cxt;
	MemoryContext old;

	for (entry = cached_rings; entry; entry = entry->next)
		if (strcmp(entry->name, ring_name) == 0)
			return entry;

	resolve_sentinel();
	spec = read_current(read_ring_spec, NULL, ring_name);
	ring = topology_build_ring(spec, 0);
	replication_factor = spec->replication_factor;

	/*
	 * On a ring of few nodes a replica walk passes many points of the same
	 * node; a table of every point's replica set (2 bytes x R per point, and
	 * few points) answers at once.  Without memory for it, the walk serves.
	 */
	if (ring != NULL && ring->nnodes <= 16 && replication_factor > 1)
		(void) rs_ring_precompute_replicas(ring, (uint32) Min(replication_factor, 8));
	/* The core ring is malloc'd: free it if building the entry fails. */
	PG_TRY();
	{
		entry_cxt = new_entry_context(CurrentMemoryContext, ring_name);
		old = MemoryContextSwitchTo(entry_cxt);
		entry = palloc0(sizeof(CachedRing));
		entry->mcxt = entry_cxt;
		entry->name = pstrdup(ring_name);
		entry->ring = ring;
		entry->replication_factor = replication_factor;
		entry->node_up = palloc(sizeof(bool) * (spec->nmembers + 1));
		memcpy(entry->node_up, spec->node_up, sizeof(bool) * (spec->nmembers + 1));
		if (ring)
		{
			Size		block_size = NODE_TEXT_CHUNK;	/* the slack */
			Size		widest = 0;
			char	   *block;

			for (uint32 i = 0; i < ring->nnodes; i++)
			{
				block_size += INTALIGN(VARHDRSZ + ring->name_lens[i]);
				widest = Max(widest, INTALIGN(VARHDRSZ + ring->name_lens[i]));
			}
			/* short names (the usual) at a fixed stride, the gaps zero */
			entry->node_text_stride = widest <= NODE_TEXT_MAX_STRIDE ? (uint32) widest : 0;
			if (entry->node_text_stride != 0)
				block_size = (Size) ring->nnodes * widest + NODE_TEXT_CHUNK;
			block = palloc0(block_size);
			entry->node_text_block = block;
			entry->node_texts = palloc(sizeof(Datum) * ring->nnodes);
			entry->node_text_sizes = palloc(sizeof(uint16) * ring->nnodes);
			for (uint32 i = 0; i < ring->nnodes; i++)
			{
				text	   *name = (text *) block;

				SET_VARSIZE(name, VARHDRSZ + ring->name_lens[i]);
				memcpy(VARDATA(name), ring->names[i], ring->name_lens[i]);
				entry->node_texts[i] = PointerGetDatum(name);
				entry->node_text_sizes[i] = (uint16) INTALIGN(VARHDRSZ + ring->name_lens[i]);
				block += entry->node_text_stride != 0 ? entry->node_text_stride : entry->node_text_sizes[i];
			}
		}
		MemoryContextSwitchTo(old);
	}
	PG_CATCH();
	{
		rs_ring_free(ring);
		PG_RE_THROW();
	}
	PG_END_TRY();
	keep_entry_context(entry_cxt);
	entry->next = cached_rings;
	cached_rings = entry;
	return entry;
}

/*
 * Read a map's assignments from the catalog and build its entry, in a context
 * of its own under the caller's (see new_entry_context): a CachedMap, as
 * read_current takes a reader.
 */
static void *
read_map_entry(const char *map_name)
{
	CachedMap  *entry;
	bool		pushed;
	rs_partition_range *ranges;
	uint64		nranges;
	uint64		nnodes;
	MemoryContext caller_cxt = CurrentMemoryContext;
	MemoryContext entry_cxt;
	MemoryContext old;
	rs_status	status;

	pushed = topology_catalog_connect();
	run_catalog_query("SELECT 1 FROM ringshard.partition_maps "
					  "WHERE map_name OPERATOR(pg_catalog.=) $1", map_name);
	if (SPI_processed != 1)
		report_missing("partition map", map_name, "map",
					   other_names_in_catalog("p.map_name", "ringshard.partition_maps p", map_name),
					   "create_partition_map");

	/* Node indexes: dense ranks in bytewise name order. */
	run_catalog_query("SELECT (pg_catalog.dense_rank() OVER (ORDER BY a.node_name COLLATE pg_catalog.\"C\") - 1)::int4, "
					  "a.node_name, n.is_up, a.partition_start, a.partition_end "
					  "FROM ringshard.partition_assignments a JOIN ringshard.nodes n "
					  "ON n.node_name OPERATOR(pg_catalog.=) a.node_name "
					  "WHERE a.map_name OPERATOR(pg_catalog.=) $1 "
					  "ORDER BY a.node_name COLLATE pg_catalog.\"C\", a.partition_start", map_name);
	nranges = SPI_processed;
	ranges = palloc(sizeof(rs_partition_range) * Max(nranges, 1));
	nnodes = 0;

	entry_cxt = new_entry_context(caller_cxt, map_name);
	old = MemoryContextSwitchTo(entry_cxt);
	entry = palloc0(sizeof(CachedMap));
	entry->mcxt = entry_cxt;
	entry->name = pstrdup(map_name);
	entry->node_texts = palloc(sizeof(Datum) * Max(nranges, 1));
	entry->node_up = palloc(sizeof(bool) * Max(nranges, 1));
	for (uint64 i = 0; i < nranges; i++)
	{
		bool		isnull;
		HeapTuple	tuple = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		int			node = DatumGetInt32(SPI_getbinval(tuple, desc, 1, &isnull));

		if ((uint64) node == nnodes)
		{
			entry->node_texts[node] = PointerGetDatum(DatumGetTextPCopy(SPI_getbinval(tuple, desc, 2, &isnull)));
			entry->node_up[node] = DatumGetBool(SPI_getbinval(tuple, desc, 3, &isnull));
			nnodes++;
		}
		ranges[i].node = (uint32) node;
		ranges[i].partition_start = DatumGetInt32(SPI_getbinval(tuple, desc, 4, &isnull));
		ranges[i].partition_end = DatumGetInt32(SPI_getbinval(tuple, desc, 5, &isnull));
	}
	MemoryContextSwitchTo(old);
	entry->nnodes = (int) nnodes;

	status = rs_partmap_build(ranges, nranges, &entry->map, NULL);
	if (status != RS_OK)
		ringshard_report_core_error(status, psprintf("cannot build partition map \"%s\"", map_name));
	topology_catalog_finish(pushed);		/* frees ranges with the SPI context */
	return entry;
}

/* Free a map entry read_map_entry built and read_current does not keep. */
static void
discard_map_entry(void *result)
{
	CachedMap  *entry = result;

	rs_partmap_free(&entry->map);
	MemoryContextDelete(entry->mcxt);
}

/* The cached map of this name; ERROR if no such map. */
CachedMap *
topology_cache_map(const char *map_name)
{
	CachedMap  *entry;

	for (entry = cached_maps; entry; entry = entry->next)
		if (strcmp(entry->name, map_name) == 0)
			return entry;

	resolve_sentinel();
	entry = read_current(read_map_entry, discard_map_entry, map_name);
	keep_entry_context(entry->mcxt);
	entry->next = cached_maps;
	cached_maps = entry;
	return entry;
}

PG_FUNCTION_INFO_V1(ringshard_invalidate_topology_cache);

/* Trigger on every catalog table: any change makes every backend rebuild. */
Datum
ringshard_invalidate_topology_cache(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	Oid			rings_relid;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("ringshard_internal.invalidate_topology_cache() must be called as a trigger")));

	rings_relid = get_relname_relid("rings", RelationGetNamespace(trigdata->tg_relation));
	if (OidIsValid(rings_relid))
		CacheInvalidateRelcacheByRelid(rings_relid);
	return PointerGetDatum(NULL);
}

/*
 * annotated_tables.c
 *		shard_of(row) and replicas_of(row): placement of a row of an annotated
 *		table, without restating its ring, map or key column.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "access/xact.h"
#include "executor/spi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/typcache.h"

#include "remote/catalog.h"
#include "routing/annotated_tables.h"
#include "rs_hash.h"

/* The attribute number of a live column of this row type, or ERROR. */
static AttrNumber
row_column(TupleDesc desc, const char *column, const char *table_name, Oid *type_oid)
{
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(desc, i);

		if (!attr->attisdropped && strcmp(NameStr(attr->attname), column) == 0)
		{
			*type_oid = attr->atttypid;
			return attr->attnum;
		}
	}
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_COLUMN),
			 errmsg("column \"%s\" of annotated table %s not found in the row", column, table_name)));
}

/*
 * A table's annotation as ringshard.distributed_tables has it, cached per
 * table until the topology changes (every change of that catalog bumps the
 * generation): statements against a distributed table load their placement
 * at every start, and a catalog query each time would cost more than the
 * routing itself.
 */
typedef struct Annotation
{
	Oid			relid;			/* hash key */
	uint64		generation;
	bool		found;
	char	   *key_column;
	char	   *ring_name;
	char	   *map_name;
	char	   *keyspace;
	char	   *keyspace_column;
	AttrNumber	key_attnum;		/* as the catalog has them (planning reads these) */
	AttrNumber	keyspace_attnum;	/* 0: a constant keyspace */
	bool		on_every_node;	/* its ring's replication factor covers all its nodes */
	MovingRanges moving;		/* in moving_cxt */
	MemoryContext moving_cxt;
	bool		moves_loaded;	/* moving was read (a worker's loads skip it) */
} Annotation;

static HTAB *annotations = NULL;

static char *
keep_string(const char *value)
{
	return value ? MemoryContextStrdup(TopMemoryContext, value) : NULL;
}

/*
 * The per-range arrays of n moves, zeroed, in the current memory context:
 * those load_moving_ranges fills from the catalog and copy_moving_ranges
 * from another placement's moves.
 */
static void
allocate_moves(MovingRanges *m, int n)
{
	m->start = palloc0(sizeof(uint64) * n);
	m->end = palloc0(sizeof(uint64) * n);
	m->first_partition = palloc0(sizeof(int) * n);
	m->last_partition = palloc0(sizeof(int) * n);
	m->old_nodes = palloc0(sizeof(char **) * n);
	m->old_count = palloc0(sizeof(int) * n);
	m->old_nodes_text = palloc0(sizeof(char *) * n);
	m->new_nodes_text = palloc0(sizeof(char *) * n);
	m->source = palloc0(sizeof(char *) * n);
}

static void load_departed_nodes(MovingRanges *m, Oid relid, MemoryContext mcxt);

/*
 * The moves the table still owes, from moving_ranges(), read with the
 * catalog owner's rights (placements and rebalance progress are the
 * administrators'; any role's statement routes by them).  One text[] per
 * move: start, end, first and last partition, the old and new replicas as
 * text, where a node's row lies in SQL, then the old replicas.
 */
static void
load_moving_ranges(Annotation *entry, Oid relid)
{
	Oid			argtypes[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	MemoryContext old;
	MovingRanges *m = &entry->moving;
	int			n;
	char	  **rows;

	/*
	 * One plain query first: whether a move has copied rows and not yet
	 * finished (a fan-out must pick each row's copy even at R = 1: a copied
	 * step's rows stay where they left until its group's delete, and a done
	 * step's delete may still be prepared there, visible, until its COMMIT
	 * PREPARED), and whether the table's placement differs from the
	 * topology at all.
	 * Mostly neither holds (and on a worker there is no placement), and
	 * every new session, a worker's too, pays this load once: moving_ranges
	 * (PL/pgSQL, compiled per session) runs only when something moves.
	 */
	rows = owner_catalog_query("SELECT pg_catalog.concat_ws(',', "
							   "EXISTS (SELECT FROM ringshard.rebalance_progress p "
							   "WHERE p.table_name::pg_catalog.oid OPERATOR(pg_catalog.=) $1 "
							   "AND p.state OPERATOR(pg_catalog.<>) 'pending'), "
							   "EXISTS (SELECT FROM ringshard.placements p "
							   "WHERE p.table_name::pg_catalog.oid OPERATOR(pg_catalog.=) $1 "
							   "AND p.snapshot IS NOT NULL AND p.snapshot::pg_catalog.text OPERATOR(pg_catalog.<>) "
							   "ringshard_internal.placement_snapshot(p.table_name)::pg_catalog.text))",
							   1, argtypes, values, true, &n);
	if (n != 1 || rows[0] == NULL || strlen(rows[0]) != 3)
		elog(ERROR, "ringshard: malformed answer to the moves check of table %u", relid);
	m->leftovers = rows[0][0] == 't';
	/* the placement is the topology's: nothing moves (what moving_ranges would answer) */
	if (rows[0][2] != 't')
		return;

	rows = owner_catalog_query("SELECT ARRAY[m.range_start::pg_catalog.text, m.range_end::pg_catalog.text, "
							   "m.first_partition::pg_catalog.text, m.last_partition::pg_catalog.text, "
							   "pg_catalog.array_to_string(m.old_nodes, ', '), pg_catalog.array_to_string(m.new_nodes, ', '), "
							   "CASE WHEN d.ring_name IS NOT NULL "
							   "THEN pg_catalog.format('pg_catalog.ring_token(t.%I)', d.key_column) "
							   "ELSE pg_catalog.regexp_replace(ringshard_internal.partition_step_predicate(d.table_name, 0, 0), "
							   "'^\\((.*) BETWEEN 0 AND 0\\)$', '\\1') END, "
							   /* the source rebalance_plan picks: the first old replica kept, else the first */
							   "coalesce((SELECT o FROM pg_catalog.unnest(m.old_nodes) WITH ORDINALITY u(o, i) "
							   "WHERE o OPERATOR(pg_catalog.=) ANY (m.new_nodes) ORDER BY i LIMIT 1), m.old_nodes[1])] "
							   "OPERATOR(pg_catalog.||) m.old_nodes "
							   "FROM ringshard.distributed_tables d, "
							   "ringshard_internal.moving_ranges(d.table_name) m "
							   "WHERE d.table_name::pg_catalog.oid OPERATOR(pg_catalog.=) $1",
							   1, argtypes, values, true, &n);
	if (n == 0)
		return;
	entry->moving_cxt = AllocSetContextCreate(TopMemoryContext, "ringshard moving ranges", ALLOCSET_SMALL_SIZES);
	old = MemoryContextSwitchTo(entry->moving_cxt);
	allocate_moves(m, n);
	for (int i = 0; i < n; i++)
	{
		/* array_in keeps its state in flinfo: called through an FmgrInfo */
		Datum		array = OidInputFunctionCall(F_ARRAY_IN, rows[i], TEXTOID, -1);
		Datum	   *elems;
		bool	   *nulls;
		int			nelems;

		deconstruct_array(DatumGetArrayTypeP(array), TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &nelems);
		if (nelems < 8)
			elog(ERROR, "ringshard: malformed move of table %u", relid);
		m->start[i] = nulls[0] ? 0 : strtoull(TextDatumGetCString(elems[0]), NULL, 10);
		m->end[i] = nulls[1] ? 0 : strtoull(TextDatumGetCString(elems[1]), NULL, 10);
		m->first_partition[i] = nulls[2] ? -1 : atoi(TextDatumGetCString(elems[2]));
		m->last_partition[i] = nulls[3] ? -1 : atoi(TextDatumGetCString(elems[3]));
		m->old_nodes_text[i] = nulls[4] ? "" : TextDatumGetCString(elems[4]);
		m->new_nodes_text[i] = nulls[5] ? "" : TextDatumGetCString(elems[5]);
		if (i == 0)
			m->position_sql = TextDatumGetCString(elems[6]);
		m->source[i] = nulls[7] ? "" : TextDatumGetCString(elems[7]);
		m->old_nodes[i] = palloc(sizeof(char *) * Max(nelems - 8, 1));
		for (int j = 8; j < nelems; j++)
			if (!nulls[j])
				m->old_nodes[i][m->old_count[i]++] = TextDatumGetCString(elems[j]);
	}
	m->count = n;
	MemoryContextSwitchTo(old);
	load_departed_nodes(m, relid, entry->moving_cxt);
}

/*
 * The old replicas of the moves that still have an address, whether they
 * are up: those that left the ring or map are the placement's departed
 * nodes (kept by load_placement once the ring or map is known).
 */
static void
load_departed_nodes(MovingRanges *m, Oid relid, MemoryContext mcxt)
{
	Oid			argtypes[1] = {TEXTARRAYOID};
	Datum		values[1];
	Datum	   *names = palloc(sizeof(Datum) * 64);
	int			nnames = 0;
	int			capacity = 64;
	char	  **rows;
	int			n;
	MemoryContext old;

	for (int i = 0; i < m->count; i++)
		for (int j = 0; j < m->old_count[i]; j++)
		{
			bool		seen = false;

			for (int k = 0; k < nnames && !seen; k++)
				seen = strcmp(TextDatumGetCString(names[k]), m->old_nodes[i][j]) == 0;
			if (seen)
				continue;
			if (nnames == capacity)
			{
				capacity *= 2;
				names = repalloc(names, sizeof(Datum) * capacity);
			}
			names[nnames++] = CStringGetTextDatum(m->old_nodes[i][j]);
		}
	values[0] = PointerGetDatum(construct_array(names, nnames, TEXTOID, -1, false, TYPALIGN_INT));
	/* "t name" or "f name": whether it is up, then the name (which may hold spaces) */
	rows = owner_catalog_query("SELECT pg_catalog.concat(CASE WHEN n.is_up THEN 't ' ELSE 'f ' END, n.node_name) "
							   "FROM ringshard.nodes n WHERE n.server_name IS NOT NULL "
							   "AND n.node_name OPERATOR(pg_catalog.=) ANY ($1) ORDER BY n.node_name",
							   1, argtypes, values, true, &n);
	old = MemoryContextSwitchTo(mcxt);
	m->departed_texts = palloc(sizeof(Datum) * Max(n, 1));
	m->departed_up = palloc(sizeof(bool) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		if (rows[i] == NULL || strlen(rows[i]) < 3)
			elog(ERROR, "ringshard: malformed node of the moves of table %u", relid);
		m->departed_up[i] = rows[i][0] == 't';
		m->departed_texts[i] = CStringGetTextDatum(rows[i] + 2);
	}
	m->departed_count = n;
	MemoryContextSwitchTo(old);
}

/* A copy of the moves in mcxt, for a placement that outlives the cache entry's generation. */
static void
copy_moving_ranges(MovingRanges *to, const MovingRanges *from, MemoryContext mcxt)
{
	int			n = from->count;
	MemoryContext old;

	memset(to, 0, sizeof(*to));
	to->leftovers = from->leftovers;
	if (n == 0)
		return;
	old = MemoryContextSwitchTo(mcxt);
	allocate_moves(to, n);
	memcpy(to->start, from->start, sizeof(uint64) * n);
	memcpy(to->end, from->end, sizeof(uint64) * n);
	memcpy(to->first_partition, from->first_partition, sizeof(int) * n);
	memcpy(to->last_partition, from->last_partition, sizeof(int) * n);
	memcpy(to->old_count, from->old_count, sizeof(int) * n);
	for (int i = 0; i < n; i++)
	{
		to->old_nodes[i] = palloc(sizeof(char *) * Max(from->old_count[i], 1));
		for (int j = 0; j < from->old_count[i]; j++)
			to->old_nodes[i][j] = pstrdup(from->old_nodes[i][j]);
		to->old_nodes_text[i] = pstrdup(from->old_nodes_text[i]);
		to->new_nodes_text[i] = pstrdup(from->new_nodes_text[i]);
		to->source[i] = pstrdup(from->source[i]);
	}
	to->position_sql = pstrdup(from->position_sql);
	to->count = n;
	to->departed_texts = palloc(sizeof(Datum) * Max(from->departed_count, 1));
	to->departed_up = palloc(sizeof(bool) * Max(from->departed_count, 1));
	for (int i = 0; i < from->departed_count; i++)
	{
		to->departed_texts[i] = PointerGetDatum(DatumGetTextPCopy(from->departed_texts[i]));
		to->departed_up[i] = from->departed_up[i];
	}
	to->departed_count = from->departed_count;
	MemoryContextSwitchTo(old);
}

/*
 * Keep, of the moves' old replicas with an address, those that are not
 * nodes of the table's ring or map and that a rebalance copies some move
 * from (after the annotation and the ring or map are loaded from one
 * snapshot).  Writes of such a move must reach its source, or the copy
 * would miss them; an old replica that left and is no source is not
 * needed (the move's other old replicas take its reads and writes, as
 * before), and may well be down.
 */
static void
keep_departed_nodes(TablePlacement *state)
{
	MovingRanges *m = &state->moving;
	int			base;
	Datum	   *base_texts;
	int			kept = 0;

	if (state->ring)
	{
		base = state->ring->ring ? (int) state->ring->ring->nnodes : 0;
		base_texts = state->ring->node_texts;
	}
	else
	{
		base = state->map->nnodes;
		base_texts = state->map->node_texts;
	}
	for (int i = 0; i < m->departed_count; i++)
	{
		char	   *name = TextDatumGetCString(m->departed_texts[i]);
		bool		member = false;

		bool		source = false;

		for (int b = 0; b < base && !member; b++)
			member = strcmp(TextDatumGetCString(base_texts[b]), name) == 0;
		for (int j = 0; j < m->count && !source; j++)
			source = strcmp(m->source[j], name) == 0;
		if (member || !source)
			continue;
		m->departed_texts[kept] = m->departed_texts[i];
		m->departed_up[kept++] = m->departed_up[i];
	}
	m->departed_count = kept;
}

static void load_annotation(Annotation *entry, Oid relid);

/* Free what a cache entry holds (its strings and moves). */
static void
clear_annotation(Annotation *entry)
{
	char	   *strings[5] = {entry->key_column, entry->ring_name, entry->map_name, entry->keyspace,
	entry->keyspace_column};

	for (int i = 0; i < 5; i++)
		if (strings[i])
			pfree(strings[i]);
	if (entry->moving_cxt)
		MemoryContextDelete(entry->moving_cxt);
	memset(((char *) entry) + sizeof(Oid), 0, sizeof(Annotation) - sizeof(Oid));
}

/*
 * A table's cache entry, loaded again if the topology changed since.  The
 * load reads the catalog as committed now (not as of the caller's snapshot,
 * which may predate a change whose invalidation was consumed already: the
 * entry would then keep the old annotation as current), and is marked with
 * the generation seen before it: an invalidation consumed during the load
 * (the load's own locks take it in) means it may predate that change, and
 * it is read again.  The catalog's invalidations are watched from the first
 * load on (topology_cache_watch).
 */
static Annotation *
cached_annotation(Oid relid, bool with_moves)
{
	Annotation *entry;
	bool		found;

	if (annotations == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(Annotation);
		ctl.hcxt = TopMemoryContext;
		annotations = hash_create("ringshard annotations", 16, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	entry = hash_search(annotations, &relid, HASH_ENTER, &found);
	if (!found)
		memset(((char *) entry) + sizeof(Oid), 0, sizeof(Annotation) - sizeof(Oid));

	/*
	 * Changes other sessions committed since this transaction last took a
	 * lock: the utility hook asks before the statement locks anything, and
	 * inside a transaction block nothing else would take them in.
	 */
	AcceptInvalidationMessages();
	if (!found || entry->generation != topology_cache_generation)
	{
		topology_cache_watch();
		for (int attempt = 0;; attempt++)
		{
			uint64		generation = topology_cache_generation;

			clear_annotation(entry);	/* a failed load leaves generation 0: loaded again */
			load_annotation(entry, relid);
			if (generation == topology_cache_generation || attempt == 10)
			{
				entry->generation = generation;
				break;
			}
		}
	}
	/* a worker's loads skip the moves; a later load that needs them reads them once */
	if (entry->found && with_moves && !entry->moves_loaded)
	{
		load_moving_ranges(entry, relid);
		entry->moves_loaded = true;
	}
	return entry->found ? entry : NULL;
}

/* Read a table's annotation, as committed now, into a cleared cache entry (found false: none). */
static void
load_annotation(Annotation *entry, Oid relid)
{
	Oid			argtypes[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	bool		pushed = topology_catalog_connect();


	if (SPI_execute_with_args("SELECT d.key_column::text, d.ring_name, d.map_name, d.keyspace, d.keyspace_column::text, "
							  "d.key_attnum, COALESCE(d.keyspace_attnum, 0::pg_catalog.int2), "
							  "COALESCE((SELECT r.replication_factor OPERATOR(pg_catalog.>=) "
							  "  (SELECT pg_catalog.count(*) FROM ringshard.ring_members m "
							  "    WHERE m.ring_name OPERATOR(pg_catalog.=) r.ring_name) "
							  "  FROM ringshard.rings r WHERE r.ring_name OPERATOR(pg_catalog.=) d.ring_name), false) "
							  "FROM ringshard.distributed_tables d "
							  "WHERE d.table_name::pg_catalog.oid OPERATOR(pg_catalog.=) $1",
							  1, argtypes, values, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "ringshard catalog query failed");
	if (SPI_processed == 1)
	{
		HeapTuple	tuple = SPI_tuptable->vals[0];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;

		entry->found = true;
		entry->key_column = keep_string(SPI_getvalue(tuple, desc, 1));
		entry->ring_name = keep_string(SPI_getvalue(tuple, desc, 2));
		entry->map_name = keep_string(SPI_getvalue(tuple, desc, 3));
		entry->keyspace = keep_string(SPI_getvalue(tuple, desc, 4));
		entry->keyspace_column = keep_string(SPI_getvalue(tuple, desc, 5));
		entry->key_attnum = DatumGetInt16(SPI_getbinval(tuple, desc, 6, &isnull));
		entry->keyspace_attnum = DatumGetInt16(SPI_getbinval(tuple, desc, 7, &isnull));
		entry->on_every_node = DatumGetBool(SPI_getbinval(tuple, desc, 8, &isnull));
	}
	topology_catalog_finish(pushed);
}

/*
 * What planning needs of a table's annotation, from the cache: every
 * statement that names a foreign table asks whether it is distributed, and
 * a catalog query there (parsed and planned each time) cost the coordinator
 * a fifth of a pgbench transaction.  False if the table is not annotated.
 */
bool
table_annotation_info(Oid relid, TableAnnotationInfo *info)
{
	Annotation *annotation = cached_annotation(relid, false);

	if (annotation == NULL)
		return false;
	info->key_attnum = annotation->key_attnum;
	info->keyspace_attnum = annotation->keyspace_attnum;
	info->on_every_node = annotation->on_every_node;
	info->ring_name = annotation->ring_name;
	return true;
}

static void load_annotated(TablePlacement *state, Oid relid, TupleDesc desc, MemoryContext mcxt,
						   bool with_moves, Annotation **annotation_out);
static void load_placement(TablePlacement *state, Oid relid, TupleDesc desc, MemoryContext mcxt,
						   bool with_moves);

/* Load (or reload, after a topology change) the annotation of a table. */
void
table_placement_load(TablePlacement *state, Oid relid, TupleDesc desc, MemoryContext mcxt)
{
	load_placement(state, relid, desc, mcxt, true);
}

/*
 * The same without the table's moves, for a worker's own checks: a worker
 * routes by the topology it was given, and rows of keys still moving come
 * to it only with ringshard.accept_moving_rows set by the coordinator, which
 * alone follows the moves.  Every session a coordinator opens to a worker
 * loads this once; the moves' query would cost it more than its first write.
 */
void
table_placement_load_without_moves(TablePlacement *state, Oid relid, TupleDesc desc, MemoryContext mcxt)
{
	load_placement(state, relid, desc, mcxt, false);
}

static void
load_placement(TablePlacement *state, Oid relid, TupleDesc desc, MemoryContext mcxt, bool with_moves)
{
	Annotation *annotation = NULL;

	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("shard_of() and replicas_of() take a row of a table"),
				 errhint("Pass the table alias, as in SELECT shard_of(t) FROM my_table t.")));

	state->table_name = MemoryContextStrdup(mcxt, get_rel_name(relid) ? get_rel_name(relid) : "?");

	/*
	 * The annotation (with the table's moves) and the ring or map must be of
	 * one topology: loading either may take in a topology change, and a new
	 * ring with the moves of the old one would send a key not copied yet to
	 * its new replicas.  Load again until nothing changed meanwhile.
	 */
	for (int attempt = 0;; attempt++)
	{
		uint64		generation = topology_cache_generation;
		/* one snapshot, as committed now, for the annotation, its moves and the ring or map */
		bool		pushed = !IsInParallelMode();

		if (pushed)
			PushActiveSnapshot(GetLatestSnapshot());
		topology_cache_use_active_snapshot = pushed;
		PG_TRY();
		{
			load_annotated(state, relid, desc, mcxt, with_moves, &annotation);
		}
		PG_CATCH();
		{
			topology_cache_use_active_snapshot = false;
			PG_RE_THROW();
		}
		PG_END_TRY();
		topology_cache_use_active_snapshot = false;
		if (pushed)
			PopActiveSnapshot();
		if (generation == topology_cache_generation || attempt == 10)
			break;
	}
	/* the cache entry may be reloaded (and freed) before this placement is done with */
	if (with_moves)
	{
		copy_moving_ranges(&state->moving, &annotation->moving, mcxt);
		keep_departed_nodes(state);
	}
	else
		memset(&state->moving, 0, sizeof(state->moving));
	state->relid = relid;
	state->generation = topology_cache_generation;
}

/* One load of table_placement_load: the annotation, key encoders, the ring or map. */
static void
load_annotated(TablePlacement *state, Oid relid, TupleDesc desc, MemoryContext mcxt, bool with_moves,
			   Annotation **annotation_out)
{
	char	   *key_column;
	char	   *ring_name = NULL;
	char	   *map_name = NULL;
	char	   *keyspace_column = NULL;
	Oid			type_oid;
	Annotation *annotation;

	annotation = cached_annotation(relid, with_moves);
	*annotation_out = annotation;
	if (annotation == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table \"%s\" is not annotated with a sharding key", state->table_name),
				 errhint("Annotate it with ringshard.distribute_table() or ringshard.distribute_table_by_partition().")));
	key_column = MemoryContextStrdup(mcxt, annotation->key_column);
	state->key_column = key_column;
	if (annotation->ring_name)
		ring_name = MemoryContextStrdup(mcxt, annotation->ring_name);
	if (annotation->map_name)
		map_name = MemoryContextStrdup(mcxt, annotation->map_name);
	state->keyspace = annotation->keyspace ? MemoryContextStrdup(mcxt, annotation->keyspace) : NULL;
	if (annotation->keyspace_column)
		keyspace_column = MemoryContextStrdup(mcxt, annotation->keyspace_column);
	state->keyspace_column = keyspace_column;

	state->key_attnum = row_column(desc, key_column, state->table_name, &type_oid);
	key_encoder_init(&state->key, type_oid, mcxt);
	state->keyspace_bytes = NULL;
	state->keyspace_bytes_len = 0;
	if (state->keyspace)
	{
		MemoryContext old = MemoryContextSwitchTo(mcxt);

		state->keyspace_bytes = key_text_as_utf8(state->keyspace, strlen(state->keyspace),
												 &state->keyspace_bytes_len);
		MemoryContextSwitchTo(old);
	}
	state->keyspace_attnum = 0;
	if (keyspace_column)
	{
		state->keyspace_attnum = row_column(desc, keyspace_column, state->table_name, &type_oid);
		keyspace_encoder_init(&state->keyspace_key, type_oid, mcxt);
	}
	state->ring = ring_name ? topology_cache_ring(ring_name) : NULL;
	state->map = map_name ? topology_cache_map(map_name) : NULL;
}

/* Whether the placement is current for this relation. */
bool
table_placement_is_current(const TablePlacement *placement, Oid relid)
{
	return placement->generation == topology_cache_generation && placement->relid == relid &&
		OidIsValid(relid);
}

/* The replicas of a key's canonical bytes on the table's ring (see annotated_tables.h). */
uint32
table_placement_ring_replicas(const TablePlacement *placement, const char *bytes, size_t len,
							  uint32 want, uint16 *out)
{
	const rs_ring *ring = placement->ring->ring;
	uint32		found = 0;
	rs_status	status;

	if (ring == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("ring \"%s\" of table \"%s\" has no nodes", placement->ring->name, placement->table_name),
				 errhint("Add one with ringshard.add_node(node, address, ring).")));
	status = rs_ring_replicas(ring, rs_ring_key_hash(ring, bytes, len), want, out, &found);
	if (status != RS_OK)
		ringshard_report_core_error(status, "cannot compute replicas");
	return found;
}

/* The holders of a key's partition in the table's map (see annotated_tables.h). */
uint32
table_placement_partition_holders(const TablePlacement *placement, const char *keyspace, size_t keyspace_len,
								  const char *bytes, size_t len, bool name_keyspace, uint32 *first)
{
	int			partition = 0;
	rs_status	status = rs_partition(keyspace, keyspace_len, bytes, len, &partition);
	uint32		holders;

	if (status != RS_OK)
		ringshard_report_core_error(status, "cannot compute partition");
	holders = rs_partmap_holder_count(&placement->map->map, partition);
	if (holders == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("partition %d of map \"%s\" has no node", partition, placement->map->name),
				 name_keyspace ?
				 errdetail("A row of table \"%s\" in keyspace \"%.*s\" hashes to partition %d, which is a gap in the map.",
						   placement->table_name,
						   /* a constant keyspace as written, not as its UTF-8 bytes */
						   placement->keyspace_attnum > 0 ? (int) keyspace_len : (int) strlen(placement->keyspace),
						   placement->keyspace_attnum > 0 ? keyspace : placement->keyspace, partition) :
				 errdetail("A row of table \"%s\" hashes to partition %d, which is a gap in the map.",
						   placement->table_name, partition),
				 errhint("Assign it with ringshard.assign_partitions(node, %d, %d, '%s').",
						 partition, partition, placement->map->name)));
	*first = placement->map->map.offsets[partition];
	return holders;
}

/* The nodes a row belongs on (see annotated_tables.h). */
bool
table_placement_place(TablePlacement *state, HeapTuple tuple, TupleDesc desc,
					  bool owner_only, Datum **nodes, int *count)
{
	bool		isnull;
	Datum		key;
	char		buf[KEY_BYTES_BUFSIZE];
	size_t		len;
	const char *bytes;

	key = heap_getattr(tuple, state->key_attnum, desc, &isnull);
	if (isnull)
		return false;
	bytes = key_encoder_bytes(&state->key, key, buf, &len);

	if (state->ring)
	{
		uint32		want = owner_only ? 1 : (uint32) state->ring->replication_factor;
		uint16	   *found = palloc(sizeof(uint16) * Max(want, 1));
		uint32		nfound = table_placement_ring_replicas(state, bytes, len, want, found);

		*nodes = palloc(sizeof(Datum) * Max(nfound, 1));
		for (uint32 i = 0; i < nfound; i++)
			(*nodes)[i] = state->ring->node_texts[found[i]];
		*count = (int) nfound;
	}
	else
	{
		const char *keyspace = state->keyspace_bytes;
		size_t		keyspace_len = state->keyspace_bytes_len;
		char		keyspace_buf[KEY_BYTES_BUFSIZE];
		uint32		first;
		uint32		holders;

		if (state->keyspace_attnum > 0)
		{
			Datum		keyspace_value = heap_getattr(tuple, state->keyspace_attnum, desc, &isnull);

			if (isnull)
				return false;
			keyspace = key_encoder_bytes(&state->keyspace_key, keyspace_value, keyspace_buf, &keyspace_len);
		}
		holders = table_placement_partition_holders(state, keyspace, keyspace_len, bytes, len, true, &first);
		if (owner_only)
			holders = 1;
		*nodes = palloc(sizeof(Datum) * holders);
		for (uint32 i = 0; i < holders; i++)
			(*nodes)[i] = state->map->node_texts[state->map->map.holders[first + i]];
		*count = (int) holders;
	}
	return true;
}

/* A heap tuple over a composite datum's header, for heap_getattr. */
void
row_as_tuple(HeapTupleHeader row, HeapTupleData *tuple)
{
	tuple->t_len = HeapTupleHeaderGetDatumLength(row);
	ItemPointerSetInvalid(&tuple->t_self);
	tuple->t_tableOid = InvalidOid;
	tuple->t_data = row;
}

/* Route one row passed as a record argument; false for a NULL key. */
static bool
place_row(FunctionCallInfo fcinfo, bool owner_only, Datum **nodes, int *count)
{
	HeapTupleHeader row = PG_GETARG_HEAPTUPLEHEADER(0);
	Oid			type_oid = HeapTupleHeaderGetTypeId(row);
	int32		typmod = HeapTupleHeaderGetTypMod(row);
	TablePlacement *state = fcinfo->flinfo->fn_extra;
	TupleDesc	desc = lookup_rowtype_tupdesc(type_oid, typmod);
	HeapTupleData tuple;
	bool		placed;

	if (state == NULL)
	{
		state = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(TablePlacement));
		fcinfo->flinfo->fn_extra = state;
	}
	if (state->generation != topology_cache_generation || state->row_type != type_oid)
	{
		table_placement_load(state, get_typ_typrelid(type_oid), desc, fcinfo->flinfo->fn_mcxt);
		state->row_type = type_oid;
	}
	row_as_tuple(row, &tuple);
	placed = table_placement_place(state, &tuple, desc, owner_only, nodes, count);
	ReleaseTupleDesc(desc);
	return placed;
}

PG_FUNCTION_INFO_V1(ringshard_shard_of);

/* shard_of(row): the node that owns a row of an annotated table. */
Datum
ringshard_shard_of(PG_FUNCTION_ARGS)
{
	Datum	   *nodes;
	int			count;

	if (!place_row(fcinfo, true, &nodes, &count))
		PG_RETURN_NULL();
	PG_RETURN_DATUM(nodes[0]);
}

PG_FUNCTION_INFO_V1(ringshard_replicas_of);

/* replicas_of(row): every node that holds a row of an annotated table. */
Datum
ringshard_replicas_of(PG_FUNCTION_ARGS)
{
	Datum	   *nodes;
	int			count;

	if (!place_row(fcinfo, false, &nodes, &count))
		PG_RETURN_NULL();
	PG_RETURN_ARRAYTYPE_P(construct_array(nodes, count, TEXTOID, -1, false, TYPALIGN_INT));
}

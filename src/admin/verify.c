/*
 * verify.c
 *		Proof that a distributed table's replicas hold the same rows, and the
 *		repair of those that do not (Cassandra's repair and Vitess's VDiff are
 *		the models).
 *
 * Each node groups the rows it holds by where they belong: for a ring, the
 * replica set the node computes for the row's key (with the topology it
 * holds, which must be the coordinator's) and one of 256 slices of the
 * token space; for a partition map, the partition.  Per group it sends a
 * count and a digest (the sum of 60 bits of the MD5 of each row's text, the
 * same on every node: their sessions print values alike), never the rows.
 * A group whose replicas disagree is compared key by key: each replica's
 * keys and row digests, in that group only, against the reference copy,
 * which is the one most replicas agree on (the first replica, the owner,
 * when they split evenly) unless a source node is named.  Rows that a node
 * holds for a replica set it is not in are misplaced.
 *
 * Writes through the coordinator wait while a table is verified (a SHARE
 * lock; reads go on) or repaired (EXCLUSIVE), so a write in flight is never
 * taken for a difference; writes made on a node directly are what this
 * finds.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/relation.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "fdw/deparse.h"
#include "fdw/fdw.h"
#include "remote/catalog.h"
#include "remote/connection.h"
#include "remote/values.h"
#include "routing/placement.h"

/* One group of rows on one node: how many, and their digest. */
typedef struct NodeGroup
{
	int64		count;
	char	   *digest;			/* the sum of the row digests, as numeric text */
} NodeGroup;

/* A group of rows that belong together: a replica set and a slice of tokens, or a partition. */
typedef struct RowGroup
{
	char		key[256];		/* hash key: "<bucket>:<set text>" */
	char	   *set_text;		/* the replica set as the nodes print it ('' for a map) */
	int			bucket;			/* token slice (ring) or partition (map) */
	bool	   *member;			/* per node index: belongs to the group's replica set */
	int			nmembers;
	int		   *order;			/* the members' node indexes, owner first */
	NodeGroup  *at;				/* per node index (count 0: none there) */
} RowGroup;

typedef struct VerifyState
{
	Relation	rel;
	TablePlacement placement;
	int			nnodes;
	RemoteConnection **conns;
	char	   *table;			/* qualified name on the nodes */
	char	   *set_expr;		/* SQL over alias t */
	char	   *bucket_expr;
	char	   *identity_expr;	/* a row's key as canonical bytes (hex), keyspace too */
	char	   *key_text_expr;
	char	   *digest_expr;	/* a row's digest */
	HTAB	   *groups;
	List	   *group_list;		/* in the order found */
} VerifyState;

/* Slices of the token space per replica set: 2^64 / 2^56. */
#define TOKEN_SLICE "72057594037927936"

static void
build_expressions(VerifyState *vs)
{
	TablePlacement *p = &vs->placement;
	TupleDesc	desc = RelationGetDescr(vs->rel);
	char	   *key = psprintf("t.%s", quote_identifier(p->key_column));
	StringInfoData row;

	vs->table = rsfdw_relation_name(RelationGetRelid(vs->rel));
	if (p->ring)
	{
		vs->set_expr = psprintf("pg_catalog.replicas_for(%s, %s)::pg_catalog.text", key,
								quote_literal_cstr(p->ring->name));
		vs->bucket_expr = psprintf("pg_catalog.floor(pg_catalog.ring_token(%s)::pg_catalog.numeric "
								   "OPERATOR(pg_catalog./) " TOKEN_SLICE ")::pg_catalog.int4", key);
		vs->identity_expr = psprintf("pg_catalog.encode(ringshard.key_bytes(%s), 'hex')", key);
	}
	else
	{
		char	   *keyspace = p->keyspace_attnum > 0
			? psprintf("pg_catalog.convert_from(ringshard.key_bytes(t.%s), 'UTF8')", quote_identifier(p->keyspace_column))
			: quote_literal_cstr(p->keyspace ? p->keyspace : "");

		vs->set_expr = "''::pg_catalog.text";
		vs->bucket_expr = psprintf("pg_catalog.partition_for(%s, %s)", keyspace, key);
		vs->identity_expr = p->keyspace_attnum > 0
			? psprintf("pg_catalog.encode(ringshard.key_bytes(%s), 'hex') OPERATOR(pg_catalog.||) '/' "
					   "OPERATOR(pg_catalog.||) pg_catalog.encode(ringshard.key_bytes(t.%s), 'hex')",
					   key, quote_identifier(p->keyspace_column))
			: psprintf("pg_catalog.encode(ringshard.key_bytes(%s), 'hex')", key);
	}
	vs->key_text_expr = psprintf("%s::pg_catalog.text", key);
	initStringInfo(&row);
	for (int i = 0; i < desc->natts; i++)
		if (!TupleDescAttr(desc, i)->attisdropped)
			appendStringInfo(&row, "%st.%s", row.len ? ", " : "", quote_identifier(NameStr(TupleDescAttr(desc, i)->attname)));
	vs->digest_expr = psprintf("('x' OPERATOR(pg_catalog.||) pg_catalog.substr(pg_catalog.md5(ROW(%s)::pg_catalog.text), 1, 15))"
							   "::pg_catalog.bit(60)::pg_catalog.int8", row.data);
}

/* The condition that picks a group's rows on a node. */
static char *
group_condition(VerifyState *vs, RowGroup *g)
{
	return psprintf("%s OPERATOR(pg_catalog.=) %s AND %s OPERATOR(pg_catalog.=) %d", vs->set_expr,
					quote_literal_cstr(g->set_text), vs->bucket_expr, g->bucket);
}

/* A group's range, as a report names it. */
static char *
group_range(VerifyState *vs, RowGroup *g)
{
	if (vs->placement.map)
		return psprintf("partition %d", g->bucket);
	return psprintf("replicas %s, tokens %s to %s", g->set_text,
					DatumGetCString(DirectFunctionCall1(numeric_out,
														DirectFunctionCall2(numeric_mul,
																			DirectFunctionCall1(int4_numeric, Int32GetDatum(g->bucket)),
																			DirectFunctionCall3(numeric_in, CStringGetDatum(TOKEN_SLICE),
																								ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1))))),
					DatumGetCString(DirectFunctionCall1(numeric_out,
														DirectFunctionCall2(numeric_sub,
																			DirectFunctionCall2(numeric_mul,
																								DirectFunctionCall1(int4_numeric, Int32GetDatum(g->bucket + 1)),
																								DirectFunctionCall3(numeric_in, CStringGetDatum(TOKEN_SLICE),
																													ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1))),
																			DirectFunctionCall1(int4_numeric, Int32GetDatum(1))))));
}

/* Which nodes a group belongs on: the set the nodes printed, or the partition's holders. */
static void
group_members(VerifyState *vs, RowGroup *g, RemoteConnection *from)
{
	g->member = palloc0(sizeof(bool) * Max(vs->nnodes, 1));
	g->order = palloc0(sizeof(int) * Max(vs->nnodes, 1));
	if (vs->placement.map)
	{
		CachedMap  *map = vs->placement.map;
		uint32		holders;
		uint32		first;

		if (g->bucket < 0 || g->bucket > 255)
			ereport(ERROR,
					(errcode(ERRCODE_PROTOCOL_VIOLATION),
					 errmsg("node \"%s\" answered partition %d, which does not exist", from->node, g->bucket)));
		holders = rs_partmap_holder_count(&map->map, g->bucket);
		first = map->map.offsets[g->bucket];
		for (uint32 i = 0; i < holders; i++)
			if (!g->member[map->map.holders[first + i]])
			{
				g->member[map->map.holders[first + i]] = true;
				g->order[g->nmembers++] = map->map.holders[first + i];
			}
	}
	else
	{
		int			level = remote_transmission_begin(false);
		ArrayType  *array = DatumGetArrayTypeP(OidInputFunctionCall(F_ARRAY_IN, g->set_text, TEXTOID, -1));
		Datum	   *names;
		bool	   *nulls;
		int			n;

		remote_transmission_end(level);
		deconstruct_array(array, TEXTOID, -1, false, TYPALIGN_INT, &names, &nulls, &n);
		for (int i = 0; i < n; i++)
		{
			char	   *name = nulls[i] ? "" : TextDatumGetCString(names[i]);

			for (int j = 0; j < vs->nnodes; j++)
				if (strcmp(name, placement_node_name(&vs->placement, j)) == 0 && !g->member[j])
				{
					g->member[j] = true;
					g->order[g->nmembers++] = j;
				}
		}
	}
}

/* The per-node digests of every group (one query per node, in parallel). */
static void
collect_digests(VerifyState *vs)
{
	HASHCTL		ctl;
	char	   *sql = psprintf("SELECT %s, %s, pg_catalog.count(*), pg_catalog.sum(%s)::pg_catalog.text FROM %s t "
							   "GROUP BY 1, 2", vs->set_expr, vs->bucket_expr, vs->digest_expr, vs->table);
	RemoteResult *out = palloc0(sizeof(RemoteResult) * Max(vs->nnodes, 1));
	const char *what = "the digests of a verification";

	ctl.keysize = sizeof(((RowGroup *) 0)->key);
	ctl.entrysize = sizeof(RowGroup);
	ctl.hcxt = CurrentMemoryContext;
	vs->groups = hash_create("ringshard verify groups", 1024, &ctl, HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);

	for (int i = 0; i < vs->nnodes; i++)
		remote_send(vs->conns[i], sql, true, vs->conns[i]);
	remote_receive(vs->conns, vs->nnodes, out, 0, 0);
	for (int i = 0; i < vs->nnodes; i++)
		(void) remote_answer(vs->conns[i], &out[i], sql, what);
	for (int i = 0; i < vs->nnodes; i++)
	{
		PGresult   *res = out[i].result;

		remote_expect_rows(vs->conns[i], res, 4, 0, -1, what);
		remote_expect_formats(vs->conns[i], res, 0, NULL, what);
		for (int r = 0; r < PQntuples(res); r++)
		{
			char	   *set_text = remote_text_value(vs->conns[i], res, r, 0, what);
			int64		bucket = remote_int64_value(vs->conns[i], res, r, 1, what);
			char		key[256];
			RowGroup	   *g;
			bool		found;

			if (strlen(set_text) > 200)
				ereport(ERROR,
						(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						 errmsg("the replica set %s of table %s is too long to verify", set_text, vs->table)));
			snprintf(key, sizeof(key), "%lld:%s", (long long) bucket, set_text);
			g = hash_search(vs->groups, key, HASH_ENTER, &found);
			if (!found)
			{
				g->set_text = pstrdup(set_text);
				g->bucket = (int) bucket;
				g->at = palloc0(sizeof(NodeGroup) * Max(vs->nnodes, 1));
				g->nmembers = 0;
				group_members(vs, g, vs->conns[i]);
				vs->group_list = lappend(vs->group_list, g);
			}
			g->at[i].count = remote_int64_value(vs->conns[i], res, r, 2, what);
			g->at[i].digest = pstrdup(remote_text_value(vs->conns[i], res, r, 3, what));
		}
		remote_result_free(res);
	}
}

/* Whether two nodes hold the same rows of a group. */
static bool
same_rows(NodeGroup *a, NodeGroup *b)
{
	if (a->count != b->count)
		return false;
	return a->count == 0 || strcmp(a->digest, b->digest) == 0;
}

/*
 * The reference copy of a group: the named source (if it is a replica), else
 * the copy most replicas hold, the first replica's when they split evenly.
 */
static int
reference_node(VerifyState *vs, RowGroup *g, int source)
{
	int			best = -1;
	int			best_votes = 0;

	if (source >= 0 && g->member[source])
		return source;
	for (int k = 0; k < g->nmembers; k++)
	{
		int			i = g->order[k];
		int			votes = 0;

		for (int j = 0; j < vs->nnodes; j++)
			votes += g->member[j] && same_rows(&g->at[i], &g->at[j]);
		if (votes > best_votes)
		{
			best = i;
			best_votes = votes;
		}
	}
	return best;
}

/* Whether every replica of a group holds the same rows, and no other node holds any. */
static bool
group_agrees(VerifyState *vs, RowGroup *g)
{
	int			first = -1;

	for (int i = 0; i < vs->nnodes; i++)
	{
		if (!g->member[i])
		{
			if (g->at[i].count > 0)
				return false;
			continue;
		}
		if (first < 0)
			first = i;
		else if (!same_rows(&g->at[first], &g->at[i]))
			return false;
	}
	return true;
}

/* One replica's rows of a group: canonical key, key text, digest, ordered by key. */
static PGresult *
group_rows(VerifyState *vs, RowGroup *g, int node)
{
	char	   *sql = psprintf("SELECT %s, %s, (%s)::pg_catalog.text FROM %s t WHERE %s ORDER BY 1, 3",
							   vs->identity_expr, vs->key_text_expr, vs->digest_expr, vs->table, group_condition(vs, g));
	PGresult   *res;
	const char *what = "the rows of a verification";

	res = remote_exec(vs->conns[node], sql, true);
	remote_expect_rows(vs->conns[node], res, 3, 0, -1, what);
	remote_expect_formats(vs->conns[node], res, 0, NULL, what);
	for (int r = 0; r < PQntuples(res); r++)
		for (int c = 0; c < 3; c++)
			(void) remote_text_value(vs->conns[node], res, r, c, what);
	return res;
}

/* The differences of one node's rows of a group against the reference's. */
typedef struct Difference
{
	int64		missing;		/* keys the reference has and the node lacks */
	int64		extra;			/* keys the node has and the reference lacks */
	int64		differing;		/* keys both have, with other contents */
	List	   *samples;		/* up to 5 key texts */
} Difference;

static void
note_sample(Difference *d, const char *key)
{
	if (list_length(d->samples) < 5)
		d->samples = lappend(d->samples, pstrdup(key));
}

/* Merge two sorted row lists of a group (see group_rows). */
static void
compare_rows(PGresult *ref, PGresult *mine, Difference *d)
{
	int			i = 0;
	int			j = 0;
	int			nref = ref ? PQntuples(ref) : 0;
	int			nmine = mine ? PQntuples(mine) : 0;

	memset(d, 0, sizeof(*d));
	while (i < nref || j < nmine)
	{
		int			c;

		if (i >= nref)
			c = 1;
		else if (j >= nmine)
			c = -1;
		else
			c = strcmp(PQgetvalue(ref, i, 0), PQgetvalue(mine, j, 0));
		if (c < 0)
		{
			d->missing++;
			note_sample(d, PQgetvalue(ref, i, 1));
			i++;
		}
		else if (c > 0)
		{
			d->extra++;
			note_sample(d, PQgetvalue(mine, j, 1));
			j++;
		}
		else
		{
			if (strcmp(PQgetvalue(ref, i, 2), PQgetvalue(mine, j, 2)) != 0)
			{
				d->differing++;
				note_sample(d, PQgetvalue(mine, j, 1));
			}
			i++;
			j++;
		}
	}
}

/* Open a verification: the table locked, its nodes connected, their topology the coordinator's. */
static void
begin_verify(VerifyState *vs, Oid relid, LOCKMODE lockmode)
{
	int64		version;
	int			nrows;
	char	  **rows;

	memset(vs, 0, sizeof(*vs));
	/* the lock stops writers: only who may read the table verifies it, only its owner repairs it */
	if (lockmode == ShareLock)
	{
		AclResult	acl = pg_class_aclcheck(relid, GetUserId(), ACL_SELECT);

		if (acl != ACLCHECK_OK)
			aclcheck_error(acl, OBJECT_FOREIGN_TABLE, get_rel_name(relid));
	}
	else if (!pg_class_ownercheck(relid, GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, OBJECT_FOREIGN_TABLE, get_rel_name(relid));
	LockRelationOid(relid, lockmode);
	vs->rel = relation_open(relid, NoLock);
	if (vs->rel->rd_rel->relkind != RELKIND_FOREIGN_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("%s is not a distributed table", RelationGetRelationName(vs->rel)),
				 errhint("Distributed tables are made by ringshard.create_distributed_table().")));

	/*
	 * A move under way: rows not copied yet are on their old replicas only,
	 * and copied ones still on the nodes they left, by design; a repair
	 * would put rows on targets that the move copies again.
	 */
	{
		Oid			argtypes[1] = {REGCLASSOID};
		Datum		values[1] = {ObjectIdGetDatum(relid)};

		(void) owner_catalog_query("SELECT 1 FROM ringshard.rebalance_progress WHERE table_name = $1 LIMIT 1",
								   1, argtypes, values, true, &nrows);
		if (nrows > 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("table %s has an unfinished rebalance", RelationGetRelationName(vs->rel)),
					 errdetail("Until the move ends, rows not copied yet are only on their old replicas, and copied "
							   "ones are still on the nodes they left."),
					 errhint("CALL ringshard.rebalance('%s') finishes it; then verify the table.",
							 quote_qualified_identifier(get_namespace_name(RelationGetNamespace(vs->rel)),
														RelationGetRelationName(vs->rel)))));
	}
	table_placement_load(&vs->placement, relid, RelationGetDescr(vs->rel), CurrentMemoryContext);
	vs->nnodes = placement_node_count(&vs->placement);
	vs->conns = palloc(sizeof(RemoteConnection *) * Max(vs->nnodes, 1));
	for (int i = 0; i < vs->nnodes; i++)
		vs->conns[i] = remote_connection(placement_node_name(&vs->placement, i), GetUserId());
	remote_connect_all(vs->conns, vs->nnodes, false);
	build_expressions(vs);

	/* the nodes group rows by the topology they hold: it must be ours */
	rows = owner_catalog_query("SELECT topology_version FROM ringshard.cluster_state", 0, NULL, NULL, true, &nrows);
	version = nrows == 1 && rows[0] ? strtoll(rows[0], NULL, 10) : 0;
	for (int i = 0; i < vs->nnodes; i++)
	{
		const char *what = "the topology version";
		PGresult   *res = remote_exec(vs->conns[i], "SELECT topology_version FROM ringshard.cluster_state", true);

		remote_expect_rows(vs->conns[i], res, 1, 1, 1, what);
		if (remote_int64_value(vs->conns[i], res, 0, 0, what) != version)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("node \"%s\" holds another topology than the coordinator", vs->conns[i]->node),
					 errhint("Run SELECT * FROM ringshard.sync_topology(); then verify again.")));
		remote_result_free(res);
	}
	collect_digests(vs);
}

/* The writes queued for a table, per node: rows the node lacks until the watchdog delivers them. */
static void
report_queued(VerifyState *vs, ReturnSetInfo *rsinfo)
{
	Oid			argtypes[1] = {OIDOID};
	Datum		args[1] = {ObjectIdGetDatum(RelationGetRelid(vs->rel))};
	int			nrows;
	char	  **rows = owner_catalog_query("SELECT q.node_name OPERATOR(pg_catalog.||) E'\\x1f' OPERATOR(pg_catalog.||) "
										   "pg_catalog.count(*) FROM ringshard.write_queue q "
										   "WHERE q.table_name::pg_catalog.oid OPERATOR(pg_catalog.=) $1 GROUP BY q.node_name",
										   1, argtypes, args, false, &nrows);

	for (int i = 0; i < nrows; i++)
	{
		char	   *sep = strchr(rows[i], '\x1f');
		Datum		values[6];
		bool		nulls[6] = {false, false, false, false, true, false};

		*sep = '\0';
		values[0] = CStringGetTextDatum(rows[i]);
		values[1] = CStringGetTextDatum("(queued writes)");
		values[2] = CStringGetTextDatum("queued");
		values[3] = Int64GetDatum(strtoll(sep + 1, NULL, 10));
		values[5] = CStringGetTextDatum("the watchdog delivers them when the node is back");
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
}

static void
put_problem(ReturnSetInfo *rsinfo, const char *node, const char *range, const char *problem, int64 rows,
			List *samples, const char *reference)
{
	Datum		values[6];
	bool		nulls[6] = {false, false, false, false, samples == NIL, false};

	values[0] = CStringGetTextDatum(node);
	values[1] = CStringGetTextDatum(range);
	values[2] = CStringGetTextDatum(problem);
	values[3] = Int64GetDatum(rows);
	if (samples != NIL)
	{
		Datum	   *keys = palloc(sizeof(Datum) * list_length(samples));
		ListCell   *lc;

		foreach(lc, samples)
			keys[foreach_current_index(lc)] = CStringGetTextDatum(lfirst(lc));
		values[4] = PointerGetDatum(construct_array(keys, list_length(samples), TEXTOID, -1, false, TYPALIGN_INT));
	}
	values[5] = CStringGetTextDatum(reference);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

PG_FUNCTION_INFO_V1(ringshard_verify_table);

/*
 * verify_table(table): per node and range, the rows that are missing, extra,
 * differing (against the reference copy) or misplaced (on a node that is no
 * replica of them), with up to five of their keys; no row when every
 * replica holds the same rows.
 */
Datum
ringshard_verify_table(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	VerifyState vs;
	ListCell   *lc;
	int64		copies = 0;
	int			differing_groups = 0;

	InitMaterializedSRF(fcinfo, 0);
	begin_verify(&vs, PG_GETARG_OID(0), ShareLock);
	report_queued(&vs, rsinfo);
	foreach(lc, vs.group_list)
	{
		RowGroup	   *g = lfirst(lc);
		int			ref;
		PGresult   *ref_rows;
		char	   *range;

		for (int i = 0; i < vs.nnodes; i++)
			copies += g->at[i].count;
		if (group_agrees(&vs, g))
			continue;
		CHECK_FOR_INTERRUPTS();
		differing_groups++;
		range = group_range(&vs, g);
		for (int i = 0; i < vs.nnodes; i++)
			if (!g->member[i] && g->at[i].count > 0)
				put_problem(rsinfo, placement_node_name(&vs.placement, i), range, "misplaced", g->at[i].count, NIL,
							"the node is no replica of these rows: CALL ringshard.rebalance() or repair_table() removes them");
		ref = reference_node(&vs, g, -1);
		if (ref < 0)
			continue;			/* no replica holds any: all of them are misplaced */
		ref_rows = group_rows(&vs, g, ref);
		for (int i = 0; i < vs.nnodes; i++)
		{
			Difference	d;
			PGresult   *mine;

			if (!g->member[i] || i == ref || same_rows(&g->at[i], &g->at[ref]))
				continue;
			mine = g->at[i].count > 0 ? group_rows(&vs, g, i) : NULL;
			compare_rows(ref_rows, mine, &d);
			remote_result_free(mine);
			{
				char	   *against = psprintf("against node %s", placement_node_name(&vs.placement, ref));

				if (d.missing > 0)
					put_problem(rsinfo, placement_node_name(&vs.placement, i), range, "missing", d.missing, d.samples, against);
				if (d.extra > 0)
					put_problem(rsinfo, placement_node_name(&vs.placement, i), range, "extra", d.extra, d.samples, against);
				if (d.differing > 0)
					put_problem(rsinfo, placement_node_name(&vs.placement, i), range, "differing", d.differing, d.samples, against);
			}
		}
		remote_result_free(ref_rows);
	}
	ereport(NOTICE,
			(errmsg("table %s: %d groups of rows compared on %d nodes (" INT64_FORMAT " row copies); %s",
					RelationGetRelationName(vs.rel), list_length(vs.group_list), vs.nnodes, copies,
					differing_groups == 0 ? "every replica holds the same rows"
					: psprintf("%d groups differ", differing_groups))));
	relation_close(vs.rel, NoLock);
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(ringshard_repair_table);

/*
 * repair_table(table, source): bring every replica whose rows differ back to
 * the reference copy, group by group, in this transaction (the nodes commit
 * in two phases with it): the group's rows are deleted on the replica and
 * copied there from the reference node by COPY, node to node.  The reference
 * is the named source node where it is a replica, else the copy most
 * replicas hold (the first replica's when they split evenly).  Misplaced
 * rows are deleted where their replicas hold their keys.  Per node and
 * range: the source, the rows deleted and copied.
 */
Datum
ringshard_repair_table(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	VerifyState vs;
	ListCell   *lc;
	int			source = -1;
	TupleDesc	desc;
	StringInfoData columns;

	InitMaterializedSRF(fcinfo, 0);
	begin_verify(&vs, PG_GETARG_OID(0), ExclusiveLock);
	if (!PG_ARGISNULL(1))
	{
		char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(1));

		for (int i = 0; i < vs.nnodes && source < 0; i++)
			if (strcmp(placement_node_name(&vs.placement, i), name) == 0)
				source = i;
		if (source < 0)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("node \"%s\" holds no rows of table %s", name, RelationGetRelationName(vs.rel)),
					 errhint("Name one of the table's nodes (ringshard.table_nodes), or pass NULL for the majority copy.")));
	}
	desc = RelationGetDescr(vs.rel);
	initStringInfo(&columns);
	for (int i = 0; i < desc->natts; i++)
		if (!TupleDescAttr(desc, i)->attisdropped)
			appendStringInfo(&columns, "%s%s", columns.len ? ", " : "",
							 quote_identifier(NameStr(TupleDescAttr(desc, i)->attname)));

	foreach(lc, vs.group_list)
	{
		RowGroup	   *g = lfirst(lc);
		int			ref;
		char	   *range;
		char	   *condition;

		if (group_agrees(&vs, g))
			continue;
		CHECK_FOR_INTERRUPTS();
		range = group_range(&vs, g);
		condition = group_condition(&vs, g);
		ref = reference_node(&vs, g, source);
		for (int i = 0; i < vs.nnodes && ref >= 0; i++)
		{
			PGresult   *res;
			int64		deleted;
			int64		copied = 0;
			Datum		values[5];
			bool		nulls[5] = {false, false, false, false, false};

			if (!g->member[i] || i == ref || same_rows(&g->at[i], &g->at[ref]))
				continue;
			vs.conns[i]->wrote = true;
			res = remote_exec(vs.conns[i], psprintf("DELETE FROM %s t WHERE %s", vs.table, condition), true);
			remote_expect_command(vs.conns[i], res, "DELETE", -1, "a repair");
			deleted = strtoll(PQcmdTuples(res), NULL, 10);
			remote_result_free(res);
			if (g->at[ref].count > 0)
				copied = remote_copy_between(vs.conns[ref], vs.conns[i],
											 psprintf("COPY (SELECT %s FROM %s t WHERE %s) TO STDOUT (FORMAT binary)",
													  columns.data, vs.table, condition),
											 psprintf("COPY %s (%s) FROM STDIN (FORMAT binary)", vs.table, columns.data));
			values[0] = CStringGetTextDatum(placement_node_name(&vs.placement, i));
			values[1] = CStringGetTextDatum(range);
			values[2] = CStringGetTextDatum(placement_node_name(&vs.placement, ref));
			values[3] = Int64GetDatum(deleted);
			values[4] = Int64GetDatum(copied);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
		/*
		 * Rows on a node that is no replica of them go, but only those whose
		 * keys the replicas now hold: a misplaced row may be the only copy
		 * there is, and stays (verify_table shows it) until it is moved.
		 */
		for (int i = 0; i < vs.nnodes && ref >= 0; i++)
		{
			PGresult   *res;
			PGresult   *ref_rows;
			StringInfoData keys;
			Datum		values[5];
			bool		nulls[5] = {false, false, false, false, false};

			if (g->member[i] || g->at[i].count == 0)
				continue;
			ref_rows = group_rows(&vs, g, ref);
			initStringInfo(&keys);
			for (int r = 0; r < PQntuples(ref_rows); r++)
				appendStringInfo(&keys, "%s%s", keys.len ? ", " : "", quote_literal_cstr(PQgetvalue(ref_rows, r, 0)));
			remote_result_free(ref_rows);
			if (keys.len == 0)
				continue;
			vs.conns[i]->wrote = true;
			res = remote_exec(vs.conns[i], psprintf("DELETE FROM %s t WHERE %s AND %s OPERATOR(pg_catalog.=) ANY (ARRAY[%s])",
													vs.table, condition, vs.identity_expr, keys.data), true);
			remote_expect_command(vs.conns[i], res, "DELETE", -1, "a repair");
			values[0] = CStringGetTextDatum(placement_node_name(&vs.placement, i));
			values[1] = CStringGetTextDatum(range);
			values[2] = CStringGetTextDatum(placement_node_name(&vs.placement, ref));
			values[3] = Int64GetDatum(strtoll(PQcmdTuples(res), NULL, 10));
			values[4] = Int64GetDatum(0);
			remote_result_free(res);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	}
	relation_close(vs.rel, NoLock);
	PG_RETURN_VOID();
}

/*
 * cluster_sql.c
 *		Cluster mode in SQL: remote execution on nodes, health, routed writes,
 *		reads by key with failover, and parallel fan-out with top-k merge.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "common/pg_prng.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/typcache.h"

#include "annotated_tables.h"
#include "cluster.h"
#include "rs_hash.h"

/* Nodes the last fan-out of this session could not read. */
static ArrayType *last_fanout_missing = NULL;

/* The elements of a text[] argument as C strings. */
static char **
text_array_strings(ArrayType *array, int *count)
{
	Datum	   *values;
	bool	   *nulls;
	char	  **strings;

	deconstruct_array(array, TEXTOID, -1, false, TYPALIGN_INT, &values, &nulls, count);
	strings = palloc(sizeof(char *) * Max(*count, 1));
	for (int i = 0; i < *count; i++)
	{
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("node and parameter lists must not contain nulls")));
		strings[i] = TextDatumGetCString(values[i]);
	}
	return strings;
}

/* A text[] of C strings. */
static ArrayType *
strings_text_array(char **strings, int count)
{
	Datum	   *elems = palloc(sizeof(Datum) * Max(count, 1));

	for (int i = 0; i < count; i++)
		elems[i] = CStringGetTextDatum(strings[i]);
	return construct_array(elems, count, TEXTOID, -1, false, TYPALIGN_INT);
}

/* A text[] literal of C strings, each double-quoted and escaped. */
static char *
text_array_literal(char **strings, int count)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	for (int i = 0; i < count; i++)
	{
		if (i > 0)
			appendStringInfoChar(&buf, ',');
		appendStringInfoChar(&buf, '"');
		for (const char *p = strings[i]; *p; p++)
		{
			if (*p == '"' || *p == '\\')
				appendStringInfoChar(&buf, '\\');
			appendStringInfoChar(&buf, *p);
		}
		appendStringInfoChar(&buf, '"');
	}
	appendStringInfoChar(&buf, '}');
	return buf.data;
}

PG_FUNCTION_INFO_V1(ringshard_node_execute);

/*
 * node_execute(nodes, sql, params, in_transaction): run one statement on
 * several nodes in parallel; per node whether it worked, the first value of
 * its first row, its error and its time.
 */
Datum
ringshard_node_execute(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			nnodes;
	char	  **nodes = text_array_strings(PG_GETARG_ARRAYTYPE_P(0), &nnodes);
	char	   *sql = text_to_cstring(PG_GETARG_TEXT_PP(1));
	int			nparams;
	char	  **params = text_array_strings(PG_GETARG_ARRAYTYPE_P(2), &nparams);
	bool		in_transaction = PG_GETARG_BOOL(3);
	NodeResult *results = palloc0(sizeof(NodeResult) * Max(nnodes, 1));

	InitMaterializedSRF(fcinfo, 0);
	cluster_connect_all(nnodes, (const char *const *) nodes, results);
	cluster_query_all(nnodes, results, sql, nparams, (const char *const *) params,
					  in_transaction ? REMOTE_TRANSACTION : REMOTE_AUTOCOMMIT);
	for (int i = 0; i < nnodes; i++)
	{
		Datum		values[5];
		bool		nulls[5] = {false, false, true, true, false};
		PGresult   *r = results[i].result;

		values[0] = CStringGetTextDatum(nodes[i]);
		values[1] = BoolGetDatum(r != NULL);
		if (r && PQntuples(r) > 0 && PQnfields(r) > 0 && !PQgetisnull(r, 0, 0))
		{
			values[2] = CStringGetTextDatum(PQgetvalue(r, 0, 0));
			nulls[2] = false;
		}
		if (results[i].error)
		{
			values[3] = CStringGetTextDatum(results[i].error);
			nulls[3] = false;
		}
		values[4] = Float8GetDatum(results[i].elapsed_ms);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		if (r)
			PQclear(r);
	}
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(ringshard_addressed_nodes);

/* addressed_nodes(): the nodes that have an address, in name order. */
Datum
ringshard_addressed_nodes(PG_FUNCTION_ARGS)
{
	int			count;
	char	  **nodes = cluster_addressed_nodes(&count);

	PG_RETURN_ARRAYTYPE_P(strings_text_array(nodes, count));
}

PG_FUNCTION_INFO_V1(ringshard_node_health);

/*
 * node_health(): per node whether it answers, its round trip, server
 * version, database size and connections, and the last error seen.  Nodes
 * are probed in parallel; a dead one costs at most ringshard.node_timeout.
 */
Datum
ringshard_node_health(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			nnodes;
	char	  **nodes;
	NodeResult *results;
	const char *probe = "SELECT current_setting('server_version'), "
		"pg_database_size(current_database()), "
		"(SELECT count(*) FROM pg_stat_activity WHERE datname = current_database())";

	InitMaterializedSRF(fcinfo, 0);
	nodes = cluster_addressed_nodes(&nnodes);
	results = palloc0(sizeof(NodeResult) * Max(nnodes, 1));
	cluster_connect_all(nnodes, (const char *const *) nodes, results);
	cluster_query_all(nnodes, results, probe, 0, NULL, REMOTE_AUTOCOMMIT);
	for (int i = 0; i < nnodes; i++)
	{
		Datum		values[7];
		bool		nulls[7] = {false, false, true, true, true, true, true};
		PGresult   *r = results[i].result;

		values[0] = CStringGetTextDatum(nodes[i]);
		values[1] = BoolGetDatum(r != NULL);
		if (r && PQntuples(r) == 1)
		{
			values[2] = Float8GetDatum(results[i].elapsed_ms);
			values[3] = CStringGetTextDatum(PQgetvalue(r, 0, 0));
			values[4] = Int64GetDatum(strtoll(PQgetvalue(r, 0, 1), NULL, 10));
			values[5] = Int32GetDatum(atoi(PQgetvalue(r, 0, 2)));
			nulls[2] = nulls[3] = nulls[4] = nulls[5] = false;
		}
		if (results[i].connection->last_error)
		{
			values[6] = CStringGetTextDatum(results[i].connection->last_error);
			nulls[6] = false;
		}
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		if (r)
			PQclear(r);
	}
	PG_RETURN_VOID();
}

/* The SQL list of a row type's live columns, quoted, in order. */
static char *
column_list(TupleDesc desc)
{
	StringInfoData buf;
	bool		first = true;

	initStringInfo(&buf);
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(desc, i);

		if (attr->attisdropped)
			continue;
		appendStringInfo(&buf, "%s%s", first ? "" : ", ", quote_identifier(NameStr(attr->attname)));
		first = false;
	}
	return buf.data;
}

/*
 * Settle a routed write: when at least ringshard.write_quorum replicas took
 * it, queue it durably (in this transaction) for each replica that did not;
 * otherwise fail naming the nodes.
 */
static void
settle_write(Oid relid, const char *table, const char *json, int64 write_id,
			 int nnodes, NodeResult *results)
{
	int			took = 0;
	int			quorum = Min(ringshard_write_quorum, nnodes);

	for (int i = 0; i < nnodes; i++)
		took += results[i].error == NULL;
	if (took < quorum)
	{
		StringInfoData failed;

		initStringInfo(&failed);
		for (int i = 0; i < nnodes; i++)
			if (results[i].error)
				appendStringInfo(&failed, "%s%s: %s", failed.len ? "; " : "",
								 results[i].connection->node, results[i].error);
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("write to table %s reached %d of %d replicas, fewer than ringshard.write_quorum (%d)",
						table, took, nnodes, ringshard_write_quorum),
				 errdetail("%s", failed.data),
				 errhint("Check the nodes with ringshard.node_health().")));
	}
	for (int i = 0; i < nnodes; i++)
	{
		if (results[i].error == NULL)
		{
			/* Remember it: if the node cannot confirm its commit, it is queued then. */
			MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);
			PendingWrite *w = palloc(sizeof(PendingWrite));

			w->relid = relid;
			w->json = pstrdup(json);
			w->write_id = write_id;
			w->level = GetCurrentTransactionNestLevel();
			results[i].connection->pending_writes = lappend(results[i].connection->pending_writes, w);
			MemoryContextSwitchTo(old);
			continue;
		}
		cluster_enqueue_write(results[i].connection->node, relid, json, write_id);
		ereport(NOTICE,
				(errmsg("node \"%s\" did not take the write; it is queued and will be replayed",
						results[i].connection->node),
				 errdetail("%s", results[i].error)));
	}
}

PG_FUNCTION_INFO_V1(ringshard_route_write);

/*
 * Trigger on a distributed table at the coordinator: each inserted row goes
 * to every node of its replica set (or every holder of its partition), in
 * remote transactions that commit with the local one; nothing is stored
 * locally.
 */
Datum
ringshard_route_write(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	Relation	rel;
	TablePlacement *placement;
	Datum	   *nodes;
	int			count;
	char	  **node_names;
	NodeResult *results;
	char	   *table;
	char	   *json;
	char	   *sql;
	const char *params[3];
	int64		write_id;

	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_BEFORE(trigdata->tg_event) ||
		!TRIGGER_FIRED_FOR_ROW(trigdata->tg_event) || !TRIGGER_FIRED_BY_INSERT(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("ringshard.route_write() must be a BEFORE INSERT row trigger")));
	rel = trigdata->tg_relation;

	/* The trigger's own memory keeps the placement between rows of a statement. */
	placement = fcinfo->flinfo->fn_extra;
	if (placement == NULL)
		placement = fcinfo->flinfo->fn_extra = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(TablePlacement));
	if (!table_placement_is_current(placement, RelationGetRelid(rel)))
		table_placement_load(placement, RelationGetRelid(rel), RelationGetDescr(rel), fcinfo->flinfo->fn_mcxt);

	table = quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)), RelationGetRelationName(rel));
	if (!table_placement_place(placement, trigdata->tg_trigtuple, RelationGetDescr(rel), false, &nodes, &count))
		ereport(ERROR,
				(errcode(ERRCODE_NOT_NULL_VIOLATION),
				 errmsg("a row of distributed table %s needs a sharding key", table),
				 errdetail("Its key column \"%s\" is null.", placement->key_column)));

	node_names = palloc(sizeof(char *) * count);
	for (int i = 0; i < count; i++)
		node_names[i] = TextDatumGetCString(nodes[i]);
	json = TextDatumGetCString(DirectFunctionCall1(row_to_json,
												   heap_copy_tuple_as_datum(trigdata->tg_trigtuple,
																			RelationGetDescr(rel))));
	/*
	 * The write carries (coordinator, write id), recorded on the worker in
	 * the same statement: a later replay of the same write is a no-op.
	 */
	write_id = cluster_next_write_id();
	params[0] = json;
	params[1] = cluster_coordinator_id();
	params[2] = psprintf(INT64_FORMAT, write_id);
	sql = psprintf("WITH first_time AS (INSERT INTO ringshard.replayed_writes (coordinator_id, queue_id) "
				   "VALUES ($2::pg_catalog.uuid, $3::pg_catalog.int8) ON CONFLICT DO NOTHING RETURNING 1) "
				   "INSERT INTO %s (%s) SELECT %s FROM pg_catalog.json_populate_record(NULL::%s, $1::pg_catalog.json) "
				   "WHERE EXISTS (SELECT FROM first_time)",
				   table, column_list(RelationGetDescr(rel)), column_list(RelationGetDescr(rel)), table);
	results = palloc0(sizeof(NodeResult) * count);
	cluster_connect_all(count, (const char *const *) node_names, results);
	cluster_query_all(count, results, sql, 3, params, REMOTE_ROUTED_WRITE);
	settle_write(RelationGetRelid(rel), table, json, write_id, count, results);
	for (int i = 0; i < count; i++)
		if (results[i].result)
			PQclear(results[i].result);
	return PointerGetDatum(NULL);
}

/* Build a tuple of the row type from one row of a node's text result. */
static HeapTuple
tuple_from_result(AttInMetadata *attinmeta, PGresult *r, int row, char **values)
{
	TupleDesc	desc = attinmeta->tupdesc;
	int			field = 0;

	for (int i = 0; i < desc->natts; i++)
	{
		if (TupleDescAttr(desc, i)->attisdropped)
		{
			values[i] = NULL;
			continue;
		}
		values[i] = PQgetisnull(r, row, field) ? NULL : PQgetvalue(r, row, field);
		field++;
	}
	return BuildTupleFromCStrings(attinmeta, values);
}

/* The row type's descriptor and the relation behind it, for a polymorphic argument. */
static TupleDesc
row_type_desc(FunctionCallInfo fcinfo, Oid *relid)
{
	Oid			type_oid = get_fn_expr_argtype(fcinfo->flinfo, 0);

	*relid = get_typ_typrelid(type_oid);
	if (!OidIsValid(*relid))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("the first argument must be a row of a distributed table"),
				 errhint("Pass NULL::my_table.")));
	return lookup_rowtype_tupdesc_copy(type_oid, -1);
}

PG_FUNCTION_INFO_V1(ringshard_cluster_get);

/*
 * cluster_get(NULL::table, key [, keyspace]): the rows with this key, read
 * from one healthy replica chosen at random, failing over to the others.
 */
Datum
ringshard_cluster_get(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			relid;
	TupleDesc	desc;
	TablePlacement *placement;
	char	   *keyspace;
	uint16		replica_index[64];
	Datum	   *candidates;
	int			ncandidates = 0;
	int			nhealthy = 0;
	char	   *table;
	char	   *sql;
	const char *params[2];
	int			nparams = 1;
	StringInfoData failures;
	AttInMetadata *attinmeta;
	Form_pg_attribute key_attr;
	Datum		key_value;
	char		key_buf[KEY_BYTES_BUFSIZE];
	size_t		key_len;
	const char *key_bytes;
	char	   *keyspace_filter = "";

	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("a key must not be null")));
	keyspace = PG_NARGS() > 2 && !PG_ARGISNULL(2) ? text_to_cstring(PG_GETARG_TEXT_PP(2)) : NULL;
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	desc = row_type_desc(fcinfo, &relid);
	placement = palloc0(sizeof(TablePlacement));
	table_placement_load(placement, relid, desc, CurrentMemoryContext);
	table = quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)), get_rel_name(relid));

	/*
	 * The key as a value of its column's type, so that it routes by the same
	 * canonical bytes as the row did when it was written ('07' is 7, an
	 * upper-case uuid is the uuid, a char(n) key gets its padding).
	 */
	key_attr = TupleDescAttr(desc, placement->key_attnum - 1);
	{
		Oid			input;
		Oid			ioparam;
		Oid			output;
		bool		varlena;

		getTypeInputInfo(key_attr->atttypid, &input, &ioparam);
		key_value = OidInputFunctionCall(input, text_to_cstring(PG_GETARG_TEXT_PP(1)), ioparam, key_attr->atttypmod);
		getTypeOutputInfo(key_attr->atttypid, &output, &varlena);
		params[0] = OidOutputFunctionCall(output, key_value);
	}
	key_bytes = key_encoder_bytes(&placement->key, key_value, key_buf, &key_len);

	/* The key's replicas, healthy ones first in random order. */
	if (placement->ring)
	{
		const rs_ring *ring = placement->ring->ring;
		uint32		found = 0;

		if (ring == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("ring \"%s\" has no nodes", placement->ring->name)));
		rs_ring_replicas(ring, rs_ring_key_hash(ring, key_bytes, key_len),
						 (uint32) Min(placement->ring->replication_factor, 64), replica_index, &found);
		candidates = palloc(sizeof(Datum) * Max(found, 1));
		for (int pass = 0; pass < 2; pass++)
			for (uint32 i = 0; i < found; i++)
				if (placement->ring->node_up[replica_index[i]] == (pass == 0))
				{
					candidates[ncandidates++] = placement->ring->node_texts[replica_index[i]];
					nhealthy += pass == 0;
				}
	}
	else
	{
		const char *ks;
		size_t		ks_len;
		char		ks_buf[KEY_BYTES_BUFSIZE];
		int			partition;
		uint32		first;
		uint32		holders;

		if (placement->keyspace_attnum > 0)
		{
			/* The keyspace column's value, encoded as the row's was. */
			Form_pg_attribute ks_attr = TupleDescAttr(desc, placement->keyspace_attnum - 1);
			Oid			input;
			Oid			ioparam;
			Oid			output;
			bool		varlena;
			Datum		ks_value;

			if (keyspace == NULL)
				ereport(ERROR,
						(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						 errmsg("table %s takes its keyspace from column \"%s\": pass the keyspace",
								table, placement->keyspace_column)));
			getTypeInputInfo(ks_attr->atttypid, &input, &ioparam);
			ks_value = OidInputFunctionCall(input, keyspace, ioparam, ks_attr->atttypmod);
			ks = key_encoder_bytes(&placement->keyspace_key, ks_value, ks_buf, &ks_len);
			getTypeOutputInfo(ks_attr->atttypid, &output, &varlena);
			params[1] = OidOutputFunctionCall(output, ks_value);
			nparams = 2;
			keyspace_filter = psprintf(" AND %s OPERATOR(pg_catalog.=) $2::%s",
									   quote_identifier(placement->keyspace_column),
									   format_type_extended(ks_attr->atttypid, ks_attr->atttypmod,
															FORMAT_TYPE_TYPEMOD_GIVEN | FORMAT_TYPE_FORCE_QUALIFY));
		}
		else
		{
			if (keyspace != NULL && strcmp(keyspace, placement->keyspace) != 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("table %s has the fixed keyspace \"%s\", not \"%s\"",
								table, placement->keyspace, keyspace)));
			ks = placement->keyspace;
			ks_len = strlen(ks);
		}
		if (rs_partition(ks, ks_len, key_bytes, key_len, &partition) != RS_OK)
			ereport(ERROR, (errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION), errmsg("cannot compute partition")));
		holders = rs_partmap_holder_count(&placement->map->map, partition);
		if (holders == 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("partition %d of map \"%s\" has no node", partition, placement->map->name)));
		first = placement->map->map.offsets[partition];
		candidates = palloc(sizeof(Datum) * holders);
		for (int pass = 0; pass < 2; pass++)
			for (uint32 i = 0; i < holders; i++)
				if (placement->map->node_up[placement->map->map.holders[first + i]] == (pass == 0))
				{
					candidates[ncandidates++] = placement->map->node_texts[placement->map->map.holders[first + i]];
					nhealthy += pass == 0;
				}
	}
	/* Shuffle the healthy prefix so reads spread over replicas. */
	for (int i = nhealthy - 1; i > 0; i--)
	{
		int			j = (int) pg_prng_uint64_range(&pg_global_prng_state, 0, i);
		Datum		t = candidates[i];

		candidates[i] = candidates[j];
		candidates[j] = t;
	}

	sql = psprintf("SELECT %s FROM %s WHERE %s OPERATOR(pg_catalog.=) $1::%s%s",
				   column_list(desc), table, quote_identifier(placement->key_column),
				   format_type_extended(key_attr->atttypid, key_attr->atttypmod,
										FORMAT_TYPE_TYPEMOD_GIVEN | FORMAT_TYPE_FORCE_QUALIFY),
				   keyspace_filter);
	attinmeta = TupleDescGetAttInMetadata(rsinfo->setDesc);
	initStringInfo(&failures);
	for (int i = 0; i < ncandidates; i++)
	{
		const char *node = TextDatumGetCString(candidates[i]);
		NodeResult	result;

		cluster_connect_all(1, &node, &result);
		cluster_query_all(1, &result, sql, nparams, params, REMOTE_AUTOCOMMIT);
		if (result.result == NULL)
		{
			appendStringInfo(&failures, "%s%s: %s", failures.len ? "; " : "", node, result.error);
			continue;
		}
		{
			char	  **values = palloc(sizeof(char *) * desc->natts);

			for (int row = 0; row < PQntuples(result.result); row++)
				tuplestore_puttuple(rsinfo->setResult, tuple_from_result(attinmeta, result.result, row, values));
		}
		PQclear(result.result);
		if (failures.len)
			ereport(NOTICE,
					(errmsg("read of table %s failed over to node \"%s\"", table, node),
					 errdetail("%s", failures.data)));
		PG_RETURN_VOID();
	}
	ereport(ERROR,
			(errcode(ERRCODE_CONNECTION_FAILURE),
			 errmsg("no replica of the key could be read from table %s", table),
			 errdetail("%s", failures.len ? failures.data : "The key has no replicas."),
			 errhint("Check the nodes with ringshard.node_health().")));
}

/* Comparison of two tuples by one column, descending, for the top-k merge. */
typedef struct ScoreSort
{
	AttrNumber	attnum;
	TupleDesc	desc;
	FmgrInfo   *cmp;
	Oid			collation;
} ScoreSort;

static ScoreSort score_sort;

/* qsort comparator: higher scores first, NULLs last. */
static int
compare_scores(const void *a, const void *b)
{
	HeapTuple	x = *(const HeapTuple *) a;
	HeapTuple	y = *(const HeapTuple *) b;
	bool		xnull,
				ynull;
	Datum		xv = heap_getattr(x, score_sort.attnum, score_sort.desc, &xnull);
	Datum		yv = heap_getattr(y, score_sort.attnum, score_sort.desc, &ynull);

	if (xnull || ynull)
		return (int) xnull - (int) ynull;
	return -DatumGetInt32(FunctionCall2Coll(score_sort.cmp, score_sort.collation, xv, yv));
}

/* Whether a node name (a text datum) equals a C string. */
static bool
node_name_is(Datum node_text, const char *name)
{
	text	   *t = DatumGetTextPP(node_text);

	return strlen(name) == VARSIZE_ANY_EXHDR(t) &&
		memcmp(name, VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t)) == 0;
}

/* Whether a node name (a text datum) is among the excluded ones. */
static bool
node_excluded(Datum node_text, char **excluded, int nexcluded)
{
	for (int e = 0; e < nexcluded; e++)
		if (node_name_is(node_text, excluded[e]))
			return true;
	return false;
}

/* Whether every range keeps a replica outside the excluded nodes. */
static bool
coverage_complete(TablePlacement *placement, char **excluded, int nexcluded)
{
	if (nexcluded == 0)
		return true;
	if (placement->ring)
	{
		const rs_ring *ring = placement->ring->ring;
		uint16		replicas[64];
		uint32		found;

		for (uint32 p = 0; p < ring->npoints; p++)
		{
			bool		covered = false;

			rs_ring_replicas(ring, rs_ring_token(ring, p), (uint32) Min(placement->ring->replication_factor, 64),
							 replicas, &found);
			for (uint32 r = 0; r < found && !covered; r++)
				covered = !node_excluded(placement->ring->node_texts[replicas[r]], excluded, nexcluded);
			if (!covered)
				return false;
		}
		return true;
	}
	for (int part = 0; part < RS_PARTITION_COUNT; part++)
	{
		uint32		first = placement->map->map.offsets[part];
		uint32		holders = rs_partmap_holder_count(&placement->map->map, part);
		bool		covered = false;

		for (uint32 h = 0; h < holders && !covered; h++)
			covered = !node_excluded(placement->map->node_texts[placement->map->map.holders[first + h]],
									 excluded, nexcluded);
		if (!covered && holders > 0)
			return false;
	}
	return true;
}

PG_FUNCTION_INFO_V1(ringshard_cluster_fanout);

/*
 * cluster_fanout(NULL::table, where, score_column, k, allow_partial): run a
 * query on every node at once; each node returns only the rows it is the
 * chosen reader of (the first replica that answered), so every range is
 * read exactly once.  With score_column and k, each node returns its top k
 * and the coordinator merges them.
 */
Datum
ringshard_cluster_fanout(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			relid;
	TupleDesc	desc;
	TablePlacement *placement;
	char	   *where = PG_ARGISNULL(1) ? "true" : text_to_cstring(PG_GETARG_TEXT_PP(1));
	char	   *score_column = PG_ARGISNULL(2) ? NULL : NameStr(*PG_GETARG_NAME(2));
	int32		k = PG_ARGISNULL(3) ? -1 : PG_GETARG_INT32(3);
	bool		allow_partial = !PG_ARGISNULL(4) && PG_GETARG_BOOL(4);
	char	   *table;
	Datum	   *node_texts;
	int			nnodes;
	char	  **nodes;
	NodeResult *results;
	char	  **excluded;
	int			nexcluded = 0;
	char	   *sql;
	const char *params[1];
	HeapTuple  *rows = NULL;
	int			nrows = 0;
	int			capacity = 0;
	AttrNumber	score_attnum = 0;
	AttInMetadata *attinmeta;
	bool		complete;

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	desc = row_type_desc(fcinfo, &relid);
	placement = palloc0(sizeof(TablePlacement));
	table_placement_load(placement, relid, desc, CurrentMemoryContext);
	table = quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)), get_rel_name(relid));
	if (score_column)
	{
		for (int i = 0; i < desc->natts; i++)
			if (!TupleDescAttr(desc, i)->attisdropped && strcmp(NameStr(TupleDescAttr(desc, i)->attname), score_column) == 0)
				score_attnum = TupleDescAttr(desc, i)->attnum;
		if (score_attnum == 0)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("column \"%s\" of table %s does not exist", score_column, table)));
	}
	if (k == 0 || k < -1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("k must be positive, got %d", k)));

	/* The nodes that hold the table's data. */
	if (placement->ring)
	{
		if (placement->ring->ring == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("ring \"%s\" has no nodes", placement->ring->name)));
		nnodes = (int) placement->ring->ring->nnodes;
		node_texts = placement->ring->node_texts;
	}
	else
	{
		nnodes = placement->map->nnodes;
		node_texts = placement->map->node_texts;
	}
	nodes = palloc(sizeof(char *) * Max(nnodes, 1));
	excluded = palloc(sizeof(char *) * Max(nnodes, 1));
	for (int i = 0; i < nnodes; i++)
		nodes[i] = TextDatumGetCString(node_texts[i]);

	/* Connect to all at once; nodes marked down or unreachable are left out. */
	results = palloc0(sizeof(NodeResult) * Max(nnodes, 1));
	cluster_connect_all(nnodes, (const char *const *) nodes, results);
	for (int i = 0; i < nnodes; i++)
	{
		bool		up = placement->ring ? placement->ring->node_up[i] : placement->map->node_up[i];

		if (!up && !results[i].error)
			results[i].error = pstrdup("marked down");
		if (results[i].error)
			excluded[nexcluded++] = nodes[i];
	}
	complete = coverage_complete(placement, excluded, nexcluded);

	sql = psprintf("SELECT %s FROM %s t WHERE (%s) AND ringshard.reads_here(t, $1::pg_catalog.text[])%s",
				   column_list(desc), table, where,
				   score_column
				   ? psprintf(" ORDER BY %s DESC NULLS LAST%s", quote_identifier(score_column),
							  k > 0 ? psprintf(" LIMIT %d", k) : "")
				   : (k > 0 ? psprintf(" LIMIT %d", k) : ""));
	params[0] = text_array_literal(excluded, nexcluded);
	cluster_query_all(nnodes, results, sql, 1, params, REMOTE_AUTOCOMMIT);

	attinmeta = TupleDescGetAttInMetadata(rsinfo->setDesc);
	for (int i = 0; i < nnodes; i++)
	{
		PGresult   *r = results[i].result;
		char	  **values = palloc(sizeof(char *) * desc->natts);

		if (r == NULL)
		{
			bool		listed = false;

			for (int e = 0; e < nexcluded; e++)
				listed |= excluded[e] == nodes[i];
			if (!listed)
			{
				/* It failed after the others were told to skip its rows. */
				excluded[nexcluded++] = nodes[i];
				complete = false;
			}
			continue;
		}
		for (int row = 0; row < PQntuples(r); row++)
		{
			if (nrows == capacity)
			{
				capacity = capacity ? capacity * 2 : 256;
				rows = rows ? repalloc(rows, sizeof(HeapTuple) * capacity) : palloc(sizeof(HeapTuple) * capacity);
			}
			rows[nrows++] = tuple_from_result(attinmeta, r, row, values);
		}
		PQclear(r);
	}

	if (nexcluded > 0)
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

		if (last_fanout_missing)
			pfree(last_fanout_missing);
		last_fanout_missing = strings_text_array(excluded, nexcluded);
		MemoryContextSwitchTo(old);
	}
	else if (last_fanout_missing)
	{
		pfree(last_fanout_missing);
		last_fanout_missing = NULL;
	}
	if (!complete)
	{
		StringInfoData missing;

		initStringInfo(&missing);
		for (int i = 0; i < nnodes; i++)
			if (results[i].error)
				appendStringInfo(&missing, "%s%s (%s)", missing.len ? ", " : "", nodes[i], results[i].error);
		ereport(allow_partial ? WARNING : ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("fan-out over table %s %s", table,
						allow_partial ? "returned partial results" : "could not read every range"),
				 errdetail("Nodes that did not answer: %s.", missing.data),
				 allow_partial ? errhint("ringshard.last_fanout_missing() lists them.")
				 : errhint("Pass allow_partial => true to accept the rows of the nodes that answered.")));
	}

	if (score_attnum > 0)
	{
		TypeCacheEntry *typentry = lookup_type_cache(TupleDescAttr(desc, score_attnum - 1)->atttypid,
													 TYPECACHE_CMP_PROC_FINFO);

		if (!OidIsValid(typentry->cmp_proc_finfo.fn_oid))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_FUNCTION),
					 errmsg("column \"%s\" has no ordering to merge by", score_column)));
		score_sort.attnum = score_attnum;
		score_sort.desc = desc;
		score_sort.cmp = &typentry->cmp_proc_finfo;
		score_sort.collation = TupleDescAttr(desc, score_attnum - 1)->attcollation;
		if (nrows > 1)
			qsort(rows, nrows, sizeof(HeapTuple), compare_scores);
	}
	for (int i = 0; i < nrows && (k < 0 || i < k); i++)
		tuplestore_puttuple(rsinfo->setResult, rows[i]);
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(ringshard_last_fanout_missing);

/* last_fanout_missing(): the nodes the session's last fan-out could not read. */
Datum
ringshard_last_fanout_missing(PG_FUNCTION_ARGS)
{
	if (last_fanout_missing == NULL)
		PG_RETURN_ARRAYTYPE_P(construct_empty_array(TEXTOID));
	PG_RETURN_ARRAYTYPE_P(DatumGetArrayTypePCopy(PointerGetDatum(last_fanout_missing)));
}

/* What a reads_here() call site keeps: the table's placement and this node's name. */
typedef struct ReadsHereState
{
	TablePlacement placement;
	uint64		generation;
	char	   *local_node;
	char	  **excluded;
	int			nexcluded;
	ArrayType  *excluded_array;	/* the argument the list was read from */
} ReadsHereState;

/* This server's node name from ringshard.cluster_state, or NULL. */
static char *
local_node_name(MemoryContext mcxt)
{
	char	   *name = NULL;

	SPI_connect();
	if (SPI_execute("SELECT local_node FROM ringshard.cluster_state", true, 1) == SPI_OK_SELECT &&
		SPI_processed == 1)
	{
		char	   *value = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);

		if (value)
			name = MemoryContextStrdup(mcxt, value);
	}
	SPI_finish();
	return name;
}

PG_FUNCTION_INFO_V1(ringshard_reads_here);

/*
 * reads_here(row, excluded): on a worker, whether this node is the first of
 * the row's replicas outside the excluded nodes, so that a fan-out reads each
 * row exactly once.  Everything but the row is cached per call site.
 */
Datum
ringshard_reads_here(PG_FUNCTION_ARGS)
{
	HeapTupleHeader row = PG_GETARG_HEAPTUPLEHEADER(0);
	ArrayType  *excluded = PG_GETARG_ARRAYTYPE_P(1);
	Oid			type_oid = HeapTupleHeaderGetTypeId(row);
	ReadsHereState *state = fcinfo->flinfo->fn_extra;
	TupleDesc	desc = lookup_rowtype_tupdesc(type_oid, HeapTupleHeaderGetTypMod(row));
	HeapTupleData tuple;
	Datum	   *nodes;
	int			count;
	bool		here = false;

	if (state == NULL)
		state = fcinfo->flinfo->fn_extra = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(ReadsHereState));
	if (state->generation != topology_cache_generation || state->placement.row_type != type_oid)
	{
		table_placement_load(&state->placement, get_typ_typrelid(type_oid), desc, fcinfo->flinfo->fn_mcxt);
		state->placement.row_type = type_oid;
		state->local_node = local_node_name(fcinfo->flinfo->fn_mcxt);
		state->generation = topology_cache_generation;
	}
	if (state->excluded_array == NULL || VARSIZE(state->excluded_array) != VARSIZE(excluded) ||
		memcmp(state->excluded_array, excluded, VARSIZE(excluded)) != 0)
	{
		MemoryContext old = MemoryContextSwitchTo(fcinfo->flinfo->fn_mcxt);

		state->excluded_array = (ArrayType *) palloc(VARSIZE(excluded));
		memcpy(state->excluded_array, excluded, VARSIZE(excluded));
		state->excluded = text_array_strings(excluded, &state->nexcluded);
		MemoryContextSwitchTo(old);
	}
	if (state->local_node == NULL)
	{
		ReleaseTupleDesc(desc);
		PG_RETURN_BOOL(false);
	}

	row_as_tuple(row, &tuple);
	if (table_placement_place(&state->placement, &tuple, desc, false, &nodes, &count))
	{
		for (int i = 0; i < count; i++)
		{
			if (node_excluded(nodes[i], state->excluded, state->nexcluded))
				continue;
			here = node_name_is(nodes[i], state->local_node);
			break;
		}
	}
	ReleaseTupleDesc(desc);
	PG_RETURN_BOOL(here);
}

PG_FUNCTION_INFO_V1(ringshard_reject_misrouted_rows);

/*
 * Trigger on a worker's distributed table: a row this node does not hold
 * under the topology it was given is an error, so a misrouted write fails
 * loudly instead of hiding data.
 */
Datum
ringshard_reject_misrouted_rows(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	Relation	rel;
	HeapTuple	row;
	ReadsHereState *state;
	Datum	   *nodes;
	int			count;
	StringInfoData holders;

	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_FOR_ROW(trigdata->tg_event) ||
		!TRIGGER_FIRED_BEFORE(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("ringshard.reject_misrouted_rows() must be a BEFORE row trigger")));
	rel = trigdata->tg_relation;
	row = TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event) ? trigdata->tg_newtuple : trigdata->tg_trigtuple;

	state = fcinfo->flinfo->fn_extra;
	if (state == NULL)
		state = fcinfo->flinfo->fn_extra = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(ReadsHereState));
	if (state->generation != topology_cache_generation ||
		!table_placement_is_current(&state->placement, RelationGetRelid(rel)))
	{
		table_placement_load(&state->placement, RelationGetRelid(rel), RelationGetDescr(rel), fcinfo->flinfo->fn_mcxt);
		state->local_node = local_node_name(fcinfo->flinfo->fn_mcxt);
		state->generation = topology_cache_generation;
	}
	if (state->local_node == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("this server is not a ringshard worker"),
				 errhint("Run ringshard.sync_topology() on the coordinator.")));
	if (!table_placement_place(&state->placement, row, RelationGetDescr(rel), false, &nodes, &count))
		ereport(ERROR,
				(errcode(ERRCODE_NOT_NULL_VIOLATION),
				 errmsg("a row of distributed table %s needs a sharding key", RelationGetRelationName(rel))));
	initStringInfo(&holders);
	for (int i = 0; i < count; i++)
	{
		if (node_name_is(nodes[i], state->local_node))
			return PointerGetDatum(row);
		appendStringInfo(&holders, "%s%s", i ? ", " : "", TextDatumGetCString(nodes[i]));
	}
	ereport(ERROR,
			(errcode(ERRCODE_CHECK_VIOLATION),
			 errmsg("row of table %s does not belong on node \"%s\"", RelationGetRelationName(rel), state->local_node),
			 errdetail("Under the topology this node holds, its nodes are %s.", holders.data),
			 errhint("Write through the coordinator, which sends each row to its replicas.")));
}

PG_FUNCTION_INFO_V1(ringshard_node_table_rows);

/*
 * node_table_rows(table): count(*) of a distributed table on every node with
 * an address, in parallel, as the calling role: the seed's loaded-vectors
 * check, for any user who may read the table on the workers.
 */
Datum
ringshard_node_table_rows(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			relid = PG_GETARG_OID(0);
	int			nnodes;
	char	  **nodes;
	NodeResult *results;
	char	   *sql;

	InitMaterializedSRF(fcinfo, 0);
	if (get_rel_name(relid) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	sql = psprintf("SELECT pg_catalog.count(*) FROM %s",
				   quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)), get_rel_name(relid)));
	nodes = cluster_addressed_nodes(&nnodes);
	results = palloc0(sizeof(NodeResult) * Max(nnodes, 1));
	cluster_connect_all(nnodes, (const char *const *) nodes, results);
	cluster_query_all(nnodes, results, sql, 0, NULL, REMOTE_AUTOCOMMIT);
	for (int i = 0; i < nnodes; i++)
	{
		Datum		values[3];
		bool		nulls[3] = {false, true, true};
		PGresult   *r = results[i].result;

		values[0] = CStringGetTextDatum(nodes[i]);
		if (r && PQntuples(r) == 1)
		{
			values[1] = Int64GetDatum(strtoll(PQgetvalue(r, 0, 0), NULL, 10));
			nulls[1] = false;
		}
		if (results[i].error)
		{
			values[2] = CStringGetTextDatum(results[i].error);
			nulls[2] = false;
		}
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		if (r)
			PQclear(r);
	}
	PG_RETURN_VOID();
}

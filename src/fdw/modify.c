/*
 * modify.c
 *		Writing distributed tables (see fdw.h and docs/design.md, Writes).
 *
 * INSERT and COPY: each row's replicas are computed here and the row is
 * appended to a buffer per node; a full buffer goes to its node as one COPY
 * (a few rows as one INSERT), all nodes at once.  A replica marked down, or
 * that cannot be reached before it took a write in this transaction, gets
 * the row queued instead, in this transaction, if ringshard.write_quorum
 * replicas take it.  UPDATE and DELETE are sent whole to the key's replicas
 * or to every node, and count each row once.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/explain.h"
#include "common/int.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/appendinfo.h"
#include "optimizer/pathnode.h"
#include "optimizer/optimizer.h"
#include "parser/parsetree.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/timestamp.h"
#include "utils/typcache.h"
#include "utils/datum.h"
#include "utils/hsearch.h"

#include "commands/ddl.h"
#include "fdw/deparse.h"
#include "fdw/fdw.h"
#include "fdw/node_analysis.h"
#include "fdw/write_locks.h"
#include "operations/progress.h"
#include "remote/catalog.h"
#include "remote/connection.h"
#include "remote/queue.h"
#include "remote/transaction.h"
#include "remote/values.h"
#include "routing/hot_keys.h"
#include "routing/placement.h"

/* A few rows go as one INSERT (one round trip); more as a COPY (two). */
#define SMALL_BATCH_ROWS 16

/* An upsert's rows per batch: per batch, one statement per replica set. */
#define UPSERT_BATCH_ROWS 200

/* Progress of a long copy (create_distributed_table sets it). */
int64		rsfdw_progress_total = -1;

typedef struct NodeBuffer
{
	RemoteConnection *conn;		/* NULL until the node gets its first row */
	bool		queued;			/* unreachable or down: its rows go to the write queue */
	StringInfoData copy_data;	/* rows in COPY format (binary, or text), without header and trailer */
	StringInfoData values;		/* the first rows as VALUES literals */
	int			nrows;
	bool		result_pending; /* a COPY or INSERT sent, its result not read yet */
	bool		pending_copy;	/* ... a COPY (else an INSERT) */
	int			pending_rows;	/* ... of this many rows, which the answer must count */
	bool		moving;			/* it takes rows of keys not copied yet, as their old replica */
	int64		rows_routed;	/* EXPLAIN ANALYZE: rows of this statement for the node, sent or to send */
	int64		rows_queued;	/* ... and queued for it (it was down) */
} NodeBuffer;

typedef struct RsModifyState
{
	Relation	rel;
	TupleDesc	desc;
	Oid			userid;
	TablePlacement placement;
	NodeBuffer *buffers;		/* by node index */
	int			nnodes;
	RemoteCodec *codecs;		/* per column: binary send, or text output (remote/values.h) */
	bool		binary;			/* every column binary-safe: COPY ... (FORMAT binary) */
	bool		money;			/* a column's text involves money (lc_monetary is pinned for it) */
	char	   *columns;		/* the column list */
	char	   *parameter_row;	/* ($1::type, ...): one row of a prepared INSERT, the casts of the literals */
	char	   *prepared_insert;	/* the INSERT of parameter_row (a one-row INSERT prepared on a link) */
	int			ncolumns;		/* ... and how many */
	bool		preparable;		/* every column's type may be prepared on a node */
	char	   *table;			/* the qualified name */
	MemoryContext row_cxt;
	int64		rows;
	TimestampTz last_progress;

	/* an upsert (INSERT ... ON CONFLICT): rows go alone or in the executor's batches, with the clause */
	bool		upsert;
	List	   *upsert_tmpl;	/* the clause (deparse.c), with holes */
	List	   *upsert_param_exprs; /* ... and their expressions */
	List	   *upsert_param_states;
	ExprContext *upsert_econtext;
	char	   *upsert_clause;	/* filled in at the first row: the values of the holes are the statement's */
	RemoteCodec *text_codecs;	/* decoding the row a node answers with (text) */
	int			nlive;			/* live columns */
	List	   *arbiter;		/* DO UPDATE: the conflict target's columns, else NIL */
	FmgrInfo   *arbiter_eq;		/* ... their types' equality */
	Oid		   *arbiter_coll;	/* ... and collations */
	HTAB	   *written;		/* rows this statement wrote, by key lock slot (WrittenRows) */
} RsModifyState;

/* The conflict-target values of the rows an upsert wrote, for keys of one lock slot. */
typedef struct WrittenRows
{
	uint32		slot;
	List	   *rows;			/* Datum arrays, in the order of RsModifyState.arbiter */
} WrittenRows;

/* ----- INSERT and COPY ----- */

static RsModifyState *
begin_insert(EState *estate, ResultRelInfo *rinfo)
{
	RsModifyState *state = palloc0(sizeof(RsModifyState));
	Relation	rel = rinfo->ri_RelationDesc;
	RangeTblEntry *rte;
	StringInfoData columns;
	StringInfoData parameters;

	state->rel = rel;
	state->desc = RelationGetDescr(rel);
	rte = exec_rt_fetch(rinfo->ri_RangeTableIndex, estate);
	state->userid = OidIsValid(rte->checkAsUser) ? rte->checkAsUser : GetUserId();
	table_placement_load(&state->placement, RelationGetRelid(rel), state->desc, estate->es_query_cxt);
	state->nnodes = placement_node_count(&state->placement);
	if (state->nnodes == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table %s has no nodes to write to", RelationGetRelationName(rel))));
	state->buffers = palloc0(sizeof(NodeBuffer) * state->nnodes);
	/* Rows travel as binary COPY where every column's type allows (remote/values.h), else as text. */
	state->codecs = remote_codecs_for_desc(state->desc, true, &state->binary);
	if (!state->binary)
		state->codecs = remote_codecs_for_desc(state->desc, false, NULL);
	initStringInfo(&columns);
	initStringInfo(&parameters);
	state->preparable = true;
	for (int i = 0; i < state->desc->natts; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(state->desc, i);

		if (attr->attisdropped)
			continue;
		state->money |= remote_type_involves_money(attr->atttypid);
		appendStringInfo(&columns, "%s%s", columns.len ? ", " : "", quote_identifier(NameStr(attr->attname)));
		appendStringInfo(&parameters, "%s$%d::%s", state->ncolumns ? ", " : "(", state->ncolumns + 1,
						 rsfdw_type_name(attr->atttypid, attr->atttypmod));
		state->ncolumns++;
		state->preparable &= remote_type_preparable(attr->atttypid);
	}
	appendStringInfoChar(&parameters, ')');
	state->preparable &= state->ncolumns > 0;
	state->columns = columns.data;
	state->parameter_row = parameters.data;
	state->table = rsfdw_relation_name(RelationGetRelid(rel));
	state->prepared_insert = rsfdw_insert_values_sql(state->table, state->columns, state->parameter_row);
	state->row_cxt = AllocSetContextCreate(estate->es_query_cxt, "ringshard write row", ALLOCSET_DEFAULT_SIZES);
	state->last_progress = GetCurrentTimestamp();
	return state;
}

/* What a write's errors say it was doing. */
static const char *
write_what(RsModifyState *state)
{
	return psprintf("a write to table %s", RelationGetRelationName(state->rel));
}

/*
 * A batch's answer: the node's error as its own; else it must have written
 * every row sent (INSERT 0 n, COPY n), or the write would be acknowledged
 * with rows on no node.
 */
static void
check_batch_answer(RsModifyState *state, RemoteConnection *conn, NodeBuffer *b, RemoteResult *out)
{
	PGresult   *res = remote_answer(conn, out, NULL, write_what(state));

	remote_expect_command(conn, res, b->pending_copy ? "COPY" : "INSERT", b->pending_rows, write_what(state));
	remote_result_free(res);
}

/*
 * Send every buffer that has rows (or only the full ones) to its node, all
 * at once.  With with_commit, a buffer small enough for one INSERT is held
 * on its connection to travel with the commit instead (connection.h).
 */
static void
flush_buffers(RsModifyState *state, bool only_full, bool with_commit)
{
	RemoteConnection **conns = palloc(sizeof(RemoteConnection *) * state->nnodes);
	int		   *which = palloc(sizeof(int) * state->nnodes);
	RemoteResult *out = palloc(sizeof(RemoteResult) * state->nnodes);
	int			n = 0;
	int			ncopy = 0;

	for (int i = 0; i < state->nnodes; i++)
	{
		NodeBuffer *b = &state->buffers[i];

		if (b->queued || b->nrows == 0 || (only_full && b->nrows < ringshard_write_batch_size &&
										   b->copy_data.len < 8 * 1024 * 1024))
			continue;
		conns[n] = b->conn;
		which[n++] = i;
	}
	if (n == 0)
		return;

	/* The previous batch of these nodes must have landed. */
	{
		int			m = 0;
		RemoteConnection **pending = palloc(sizeof(RemoteConnection *) * n);
		int		   *pending_which = palloc(sizeof(int) * n);
		const void **owners = palloc(sizeof(void *) * n);

		for (int j = 0; j < n; j++)
			if (state->buffers[which[j]].result_pending)
			{
				pending[m] = conns[j];
				owners[m] = state;
				pending_which[m++] = which[j];
			}
		remote_receive_owned(pending, owners, m, out, 0, 0);
		for (int j = 0; j < m; j++)
			state->buffers[pending_which[j]].result_pending = false;
		for (int j = 0; j < m; j++)
			check_batch_answer(state, pending[j], &state->buffers[pending_which[j]], &out[j]);
	}

	/* Small batches: one INSERT each; larger ones: COPY. */
	for (int j = 0; j < n; j++)
	{
		NodeBuffer *b = &state->buffers[which[j]];

		if (b->moving)
			remote_take_moving_rows(b->conn);
		remote_note_write(b->conn);
		b->pending_rows = b->nrows;
		b->pending_copy = !(b->nrows <= SMALL_BATCH_ROWS && b->values.len > 0);
		/* (a scan of the same node may still be reading: then the rows go now, as they would) */
		if (!b->pending_copy && with_commit && b->conn->link == LINK_IDLE)
		{
			/*
			 * One row, the usual autocommit INSERT: a statement prepared on
			 * the link, its values the arguments (the same literals).
			 */
			if (b->nrows == 1 && state->preparable)
				remote_defer_prepared_write(b->conn,
											rsfdw_insert_values_checked_sql(state->table, state->columns,
																			state->parameter_row, 1),
											state->ncolumns, b->values.data, 1, write_what(state));
			else
				remote_defer_write(b->conn, rsfdw_insert_values_checked_sql(state->table, state->columns,
																			b->values.data, b->nrows),
								   b->nrows, write_what(state));
			continue;
		}
		if (!b->pending_copy && b->nrows == 1 && state->preparable)
		{
			/* one row in a transaction: EXECUTE of an INSERT prepared on the link once it recurs */
			char	   *sql = rsfdw_insert_values_sql(state->table, state->columns, b->values.data);

			remote_send_execute(b->conn, state->prepared_insert, state->ncolumns, b->values.data, sql, true, state);
			pfree(sql);			/* (a row at a time, many times in one statement: nothing kept) */
		}
		else if (!b->pending_copy)
			remote_send(b->conn, rsfdw_insert_values_sql(state->table, state->columns, b->values.data), true, state);
		else
		{
			remote_send(b->conn, rsfdw_copy_from_sql(state->table, state->columns, state->binary), true, state);
			ncopy++;
		}
		if (b->conn->link != LINK_BUSY)
			ereport(ERROR,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("lost the connection to node \"%s\" while writing to table %s",
							b->conn->node, RelationGetRelationName(state->rel))));
		b->result_pending = true;
	}
	if (ncopy > 0)
	{
		RemoteConnection **copies = palloc(sizeof(RemoteConnection *) * ncopy);
		int		   *copy_which = palloc(sizeof(int) * ncopy);
		int			m = 0;

		for (int j = 0; j < n; j++)
		{
			NodeBuffer *b = &state->buffers[which[j]];

			if (!(b->nrows <= SMALL_BATCH_ROWS && b->values.len > 0))
			{
				copies[m] = b->conn;
				copy_which[m++] = which[j];
			}
		}
		/* wait until every node is ready for data, then stream it to all */
		remote_receive(copies, m, out, 0, 0);
		for (int j = 0; j < m; j++)
		{
			NodeBuffer *b = &state->buffers[copy_which[j]];

			if (!out[j].ok || copies[j]->link != LINK_COPY_IN)
			{
				b->result_pending = false;
				if (out[j].ok)
					out[j].ok = false;	/* it answered, but not with a COPY */
				(void) remote_answer(copies[j], &out[j], NULL, write_what(state));
			}
			remote_result_free(out[j].result);
			if (state->binary)
			{
				StringInfoData edge;

				initStringInfo(&edge);
				remote_copy_binary_header(&edge);
				remote_copy_data(copies[j], edge.data, edge.len);
				remote_copy_data(copies[j], b->copy_data.data, b->copy_data.len);
				resetStringInfo(&edge);
				remote_copy_binary_trailer(&edge);
				remote_copy_data(copies[j], edge.data, edge.len);
			}
			else
				remote_copy_data(copies[j], b->copy_data.data, b->copy_data.len);
		}
		remote_copy_end_all(copies, m);
		for (int j = 0; j < m; j++)
			copies[j]->owner = state;
	}
	for (int j = 0; j < n; j++)
	{
		NodeBuffer *b = &state->buffers[which[j]];

		resetStringInfo(&b->copy_data);
		resetStringInfo(&b->values);
		b->nrows = 0;
	}
}

/*
 * Whether the statement's last rows may travel with the commit: it is its
 * own transaction (no transaction block, no subtransaction), so nothing of
 * it needs the node's answer before the commit, which follows at once and
 * reports the node's error as the statement's.  In a transaction block an
 * application expects a unique violation from the INSERT itself.
 */
static bool
rows_may_travel_with_commit(void)
{
	return ringshard_writes_with_commit && !IsTransactionBlock() && GetCurrentTransactionNestLevel() == 1;
}

/* Wait for every batch sent; raise the first node error. */
static void
finish_buffers(RsModifyState *state)
{
	RemoteConnection **conns = palloc(sizeof(RemoteConnection *) * state->nnodes);
	const void **owners = palloc(sizeof(void *) * state->nnodes);
	RemoteResult *out = palloc(sizeof(RemoteResult) * state->nnodes);
	NodeBuffer **batches = palloc(sizeof(NodeBuffer *) * state->nnodes);
	int			n = 0;

	flush_buffers(state, false, rows_may_travel_with_commit());
	for (int i = 0; i < state->nnodes; i++)
		if (state->buffers[i].result_pending)
		{
			conns[n] = state->buffers[i].conn;
			batches[n] = &state->buffers[i];
			owners[n++] = state;
			state->buffers[i].result_pending = false;
		}
	remote_receive_owned(conns, owners, n, out, 0, 0);
	for (int j = 0; j < n; j++)
		check_batch_answer(state, conns[j], batches[j], &out[j]);
}

/* Decide, once per transaction and node, whether it takes rows or gets them queued. */
static void
prepare_node(RsModifyState *state, int node)
{
	NodeBuffer *b = &state->buffers[node];

	if (b->conn != NULL || b->queued)
		return;
	initStringInfo(&b->copy_data);
	initStringInfo(&b->values);
	b->conn = remote_connection(placement_node_name(&state->placement, node), state->userid);
	/*
	 * A node marked down gets its writes queued, in order, until the
	 * watchdog has delivered its queue and marked it up (asked again here:
	 * the topology cached for this statement may be older than a hand-over).
	 */
	if (b->conn->unreachable ||
		(!placement_node_up(&state->placement, node) &&
		 !queue_node_up_now(placement_node_name(&state->placement, node))))
	{
		b->queued = true;
		return;
	}
	remote_connect_all(&b->conn, 1, true);
	if (b->conn->link == LINK_BROKEN || b->conn->link == LINK_CLOSED)
	{
		/* nothing of the transaction commits: 40001 says a retry may succeed (clients and pgbench retry it) */
		if (b->conn->wrote)
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("lost the connection to node \"%s\", which took writes in this transaction",
							b->conn->node),
					 errhint("Retry the transaction; its writes for that node are then queued.")));
		b->conn->unreachable = true;
		b->queued = true;
		ereport(NOTICE,
				(errmsg("node \"%s\" cannot be reached; its writes are queued and will be replayed",
						b->conn->node),
				 b->conn->last_error ? errdetail_internal("%s", b->conn->last_error) : 0));
	}
}

/*
 * The replicas a row goes to, each prepared (connected, or its writes
 * queued): a key whose rows are not copied yet is written where it is
 * read; the writers of one key queue here first; at least
 * ringshard.write_quorum of them must take the row now.
 */
static int
row_replicas(RsModifyState *state, TupleTableSlot *slot, uint16 *replicas)
{
	int			nreplicas;
	int			took = 0;
	int			quorum;
	PlacementRowKey key;

	/* encoded once: for its replicas, its hot-key note, its lock slot */
	if (!placement_slot_key(&state->placement, slot, &key))
		ereport(ERROR,
				(errcode(ERRCODE_NOT_NULL_VIOLATION),
				 errmsg("a row of distributed table %s needs a sharding key", RelationGetRelationName(state->rel)),
				 errdetail("Its key column \"%s\" is null.", state->placement.key_column)));
	nreplicas = placement_row_key_replicas(&state->placement, &key, replicas);
	/* the rows create_distributed_table moves to their nodes are no key's load */
	if (rsfdw_progress_total < 0)
		hot_keys_note_encoded(&state->placement, key.bytes, key.len, key.keyspace, key.keyspace_len, HOT_KEY_WRITE);
	/*
	 * A key whose rows are not copied yet is written where it is read: on
	 * its old replicas, which the copy then takes it from (docs/design.md,
	 * "Moving rows").  Each must take it now: one that left the ring, or is
	 * down, would miss it.
	 */
	if (placement_is_moving(&state->placement))
	{
		int			move = placement_key_move(&state->placement, slot->tts_values[state->placement.key_attnum - 1],
											  state->placement.keyspace_attnum > 0
											  ? slot->tts_values[state->placement.keyspace_attnum - 1] : (Datum) 0);

		if (move >= 0)
		{
			nreplicas = placement_move_old_replicas(&state->placement, move, replicas);
			if (!placement_move_writable(&state->placement, move))
				placement_refuse_moving_write(&state->placement, move, "a write");
			for (int r = 0; r < nreplicas; r++)
			{
				prepare_node(state, replicas[r]);
				if (state->buffers[replicas[r]].queued)
					placement_refuse_moving_write(&state->placement, move, "a write");
				state->buffers[replicas[r]].moving = true;
			}
		}
	}
	/* writers of one key queue here, before any replica (write_locks.c) */
	rsfdw_lock_key_for_write(RelationGetRelid(state->rel), placement_row_key_lock_slot(&key));
	for (int r = 0; r < nreplicas; r++)
	{
		prepare_node(state, replicas[r]);
		took += !state->buffers[replicas[r]].queued;
	}
	quorum = Min(ringshard_write_quorum, nreplicas);
	if (took < quorum)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("a write to table %s reached %d of %d replicas, fewer than ringshard.write_quorum (%d)",
						RelationGetRelationName(state->rel), took, nreplicas, ringshard_write_quorum),
				 errhint("Check the nodes with ringshard.node_health().")));
	for (int r = 0; r < nreplicas; r++)
	{
		NodeBuffer *b = &state->buffers[replicas[r]];

		if (b->queued)
			b->rows_queued++;
		else
			b->rows_routed++;
	}
	return nreplicas;
}

/* A row as a VALUES literal, (v1::type, ...), printed under the pinned settings (the caller pins them). */
static void
append_row_literal(RsModifyState *state, TupleTableSlot *slot, StringInfo literal)
{
	appendStringInfoChar(literal, '(');
	for (int i = 0, first = 1; i < state->desc->natts; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(state->desc, i);

		if (attr->attisdropped)
			continue;
		if (!first)
			appendStringInfoString(literal, ", ");
		first = 0;
		if (slot->tts_isnull[i])
			appendStringInfo(literal, "NULL::%s", rsfdw_type_name(attr->atttypid, attr->atttypmod));
		else
			appendStringInfo(literal, "%s::%s",
							 quote_literal_cstr(remote_value_text(attr->atttypid, slot->tts_values[i], false)),
							 rsfdw_type_name(attr->atttypid, attr->atttypmod));
	}
	appendStringInfoChar(literal, ')');
}

static TupleTableSlot *
insert_row(RsModifyState *state, TupleTableSlot *slot)
{
	uint16		replicas[PLACEMENT_MAX_REPLICAS];
	int			nreplicas;
	MemoryContext old;
	StringInfoData line;
	StringInfoData literal;
	bool		need_values = false;

	nreplicas = row_replicas(state, slot, replicas);
	for (int r = 0; r < nreplicas; r++)
		need_values |= !state->buffers[replicas[r]].queued && state->buffers[replicas[r]].nrows < SMALL_BATCH_ROWS;

	/*
	 * The row, encoded once for every replica: as a binary COPY row, or as
	 * text under pinned settings; the first rows of a node also as a VALUES
	 * literal (a few rows go as one INSERT).
	 */
	MemoryContextReset(state->row_cxt);
	old = MemoryContextSwitchTo(state->row_cxt);
	slot_getallattrs(slot);
	initStringInfo(&line);
	initStringInfo(&literal);
	if (state->binary)
		remote_copy_binary_row(&line, state->codecs, state->desc, slot->tts_values, slot->tts_isnull);
	if (need_values || !state->binary)
	{
		int			level = remote_transmission_begin(state->money);

		if (!state->binary)
			remote_copy_text_row(&line, state->codecs, state->desc, slot->tts_values, slot->tts_isnull);
		if (need_values)
			append_row_literal(state, slot, &literal);
		remote_transmission_end(level);
	}
	MemoryContextSwitchTo(old);

	for (int r = 0; r < nreplicas; r++)
	{
		NodeBuffer *b = &state->buffers[replicas[r]];

		if (b->queued)
		{
			queue_write(placement_node_name(&state->placement, replicas[r]), RelationGetRelid(state->rel),
						state->userid, ExecFetchSlotHeapTupleDatum(slot));
			continue;
		}
		appendBinaryStringInfo(&b->copy_data, line.data, line.len);
		if (b->nrows < SMALL_BATCH_ROWS)
			appendStringInfo(&b->values, "%s%s", b->nrows ? ", " : "", literal.data);
		else if (b->values.len > 0)
			resetStringInfo(&b->values);	/* too many for one INSERT: COPY it is */
		b->nrows++;
	}
	flush_buffers(state, true, false);

	state->rows++;
	/* create_distributed_table: ringshard.operation_progress every 1000 rows, a NOTICE every 5 s */
	if (rsfdw_progress_total >= 0 && (state->rows % 1000) == 0)
		operation_progress_report("create_distributed_table", RelationGetRelid(state->rel), "copying rows to their nodes",
								  state->rows, rsfdw_progress_total);
	if (rsfdw_progress_total >= 0 && (state->rows % 1000) == 0 &&
		TimestampDifferenceExceeds(state->last_progress, GetCurrentTimestamp(), 5000))
	{
		state->last_progress = GetCurrentTimestamp();
		ereport(NOTICE,
				(errmsg("copied " INT64_FORMAT " of " INT64_FORMAT " rows of %s to their nodes",
						state->rows, rsfdw_progress_total, RelationGetRelationName(state->rel))));
	}
	return slot;
}

/* ----- Upserts ----- */

/*
 * INSERT ... ON CONFLICT: each row goes alone to its replicas, all at
 * once, as INSERT ... VALUES (row) ON CONFLICT ... RETURNING the row; the
 * node's unique index (it includes the key) resolves the conflict, and the
 * row it answers with (inserted, updated, or none) is what RETURNING and
 * the row count see.  Replicas hold the same rows, so they must answer
 * alike; one that does not has diverged, and the statement fails rather
 * than pick a side.  A replica that is down gets the statement queued: it
 * replays it, in order, on the same rows.
 */
static void
begin_upsert(RsModifyState *state, ModifyTableState *mtstate, List *fdw_private)
{
	state->upsert = true;
	state->upsert_tmpl = linitial(fdw_private);
	state->upsert_param_exprs = lsecond(fdw_private);
	state->upsert_param_states = ExecInitExprList(state->upsert_param_exprs, &mtstate->ps);
	state->upsert_econtext = CreateExprContext(mtstate->ps.state);
	state->text_codecs = remote_codecs_for_desc(state->desc, false, NULL);
	for (int i = 0; i < state->desc->natts; i++)
		state->nlive += !TupleDescAttr(state->desc, i)->attisdropped;
	state->arbiter = lthird(fdw_private);
	if (state->arbiter != NIL)
	{
		HASHCTL		ctl;
		ListCell   *lc;

		state->arbiter_eq = palloc0(sizeof(FmgrInfo) * list_length(state->arbiter));
		state->arbiter_coll = palloc0(sizeof(Oid) * list_length(state->arbiter));
		foreach(lc, state->arbiter)
		{
			Form_pg_attribute attr = TupleDescAttr(state->desc, lfirst_int(lc) - 1);
			TypeCacheEntry *type = lookup_type_cache(attr->atttypid, TYPECACHE_EQ_OPR_FINFO);

			if (!OidIsValid(type->eq_opr_finfo.fn_oid))
				ereport(ERROR,
						(errcode(ERRCODE_UNDEFINED_FUNCTION),
						 errmsg("could not identify an equality operator for type %s", format_type_be(attr->atttypid))));
			fmgr_info_copy(&state->arbiter_eq[foreach_current_index(lc)], &type->eq_opr_finfo, CurrentMemoryContext);
			state->arbiter_coll[foreach_current_index(lc)] = attr->attcollation;
		}
		ctl.keysize = sizeof(uint32);
		ctl.entrysize = sizeof(WrittenRows);
		ctl.hcxt = CurrentMemoryContext;
		state->written = hash_create("ringshard upserted rows", 64, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
}

/* Whether two values of conflict-target column i (of RsModifyState.arbiter) are equal. */
static bool
arbiter_values_equal(RsModifyState *state, int i, Datum a, Datum b)
{
	return DatumGetBool(FunctionCall2Coll(&state->arbiter_eq[i], state->arbiter_coll[i], a, b));
}

static uint32
row_lock_slot(RsModifyState *state, Datum *values)
{
	return placement_key_lock_slot(&state->placement, values[state->placement.key_attnum - 1],
								   state->placement.keyspace_attnum > 0
								   ? values[state->placement.keyspace_attnum - 1] : (Datum) 0);
}

/*
 * DO UPDATE may not touch a row twice in one statement (PostgreSQL's own
 * rule, SQLSTATE 21000): a proposed row whose conflict-target values equal
 * those of a row this statement wrote would.  Each node sees one row at a
 * time, so the coordinator remembers what it wrote.  Nulls never conflict.
 */
static void
check_not_written_twice(RsModifyState *state, Datum *values, bool *nulls)
{
	WrittenRows *entry;
	ListCell   *lc;

	if (state->arbiter == NIL)
		return;
	entry = hash_search(state->written, &(uint32) {row_lock_slot(state, values)}, HASH_FIND, NULL);
	if (entry == NULL)
		return;
	foreach(lc, entry->rows)
	{
		Datum	   *seen = lfirst(lc);
		bool		equal = true;
		ListCell   *col;

		foreach(col, state->arbiter)
		{
			int			i = foreach_current_index(col);
			int			attnum = lfirst_int(col);

			if (nulls[attnum - 1] || !arbiter_values_equal(state, i, values[attnum - 1], seen[i]))
			{
				equal = false;
				break;
			}
		}
		if (equal)
			ereport(ERROR,
					(errcode(ERRCODE_CARDINALITY_VIOLATION),
					 errmsg("ON CONFLICT DO UPDATE command cannot affect row a second time"),
					 errhint("Ensure that no rows proposed for insertion within the same command have duplicate "
							 "constrained values.")));
	}
}

static void
remember_written(RsModifyState *state, Datum *values, bool *nulls, MemoryContext cxt)
{
	WrittenRows *entry;
	bool		found;
	Datum	   *seen;
	ListCell   *col;
	MemoryContext old;

	if (state->arbiter == NIL)
		return;
	foreach(col, state->arbiter)
		if (nulls[lfirst_int(col) - 1])
			return;				/* never conflicts */
	entry = hash_search(state->written, &(uint32) {row_lock_slot(state, values)}, HASH_ENTER, &found);
	if (!found)
		entry->rows = NIL;
	old = MemoryContextSwitchTo(cxt);
	seen = palloc(sizeof(Datum) * list_length(state->arbiter));
	foreach(col, state->arbiter)
	{
		Form_pg_attribute attr = TupleDescAttr(state->desc, lfirst_int(col) - 1);

		seen[foreach_current_index(col)] = datumCopy(values[lfirst_int(col) - 1], attr->attbyval, attr->attlen);
	}
	entry->rows = lappend(entry->rows, seen);
	MemoryContextSwitchTo(old);
}

/* Two replicas' answers to one upsert must be the same rows, in the same order. */
static void
check_replicas_agree(RsModifyState *state, RemoteConnection *a, PGresult *ra, RemoteConnection *b, PGresult *rb)
{
	bool		same = PQntuples(ra) == PQntuples(rb);

	for (int row = 0; same && row < PQntuples(ra); row++)
		for (int c = 0; same && c < state->nlive; c++)
			same = PQgetisnull(ra, row, c) == PQgetisnull(rb, row, c) &&
				strcmp(PQgetvalue(ra, row, c), PQgetvalue(rb, row, c)) == 0;
	if (!same)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("replicas \"%s\" and \"%s\" of table %s answered an upsert differently",
						a->node, b->node, RelationGetRelationName(state->rel)),
				 PQntuples(ra) <= 1 && PQntuples(rb) <= 1
				 ? errdetail("Node \"%s\" %s, node \"%s\" %s: the replicas hold different rows for the key.",
							 a->node, PQntuples(ra) ? "wrote a row" : "wrote none",
							 b->node, PQntuples(rb) ? (PQntuples(ra) ? "another" : "wrote a row") : "wrote none")
				 : errdetail("Node \"%s\" wrote %d rows, node \"%s\" %d%s: the replicas hold different rows for the keys.",
							 a->node, PQntuples(ra), b->node, PQntuples(rb),
							 PQntuples(ra) == PQntuples(rb) ? ", not the same" : ""),
				 errhint("Nothing was changed.  Compare and mend the replicas with ringshard.verify_table() and "
						 "ringshard.repair_table().")));
}

/* The statement's conflict clause, its holes filled at its first row (their values are the statement's). */
static const char *
upsert_clause(RsModifyState *state)
{
	if (state->upsert_clause == NULL)
	{
		RsParamValues *params = rsfdw_eval_params(state->upsert_param_states, state->upsert_param_exprs,
												  state->upsert_econtext);
		MemoryContext old = MemoryContextSwitchTo(GetMemoryChunkContext(state));

		state->upsert_clause = rsfdw_template_text(state->upsert_tmpl, params);
		MemoryContextSwitchTo(old);
	}
	return state->upsert_clause;
}

/*
 * One upsert of rows (VALUES literals, nrows of them, all of one replica
 * set) to each of their replicas at once; a replica that is down gets it
 * queued.  Each replica answers with the rows it wrote (RETURNING), and
 * they must answer alike.  Returns the first answer, which the caller
 * frees, and its node in *node.
 */
static PGresult *
send_upsert(RsModifyState *state, const uint16 *replicas, int nreplicas, const char *values, int nrows,
			const char **node)
{
	RemoteConnection *conns[PLACEMENT_MAX_REPLICAS];
	const void *owners[PLACEMENT_MAX_REPLICAS];
	RemoteResult out[PLACEMENT_MAX_REPLICAS];
	int			n = 0;
	const char *what = write_what(state);
	const char *clause = upsert_clause(state);
	char	   *statement = rsfdw_upsert_sql(state->table, state->columns, values, clause, false);
	char	   *sql = rsfdw_upsert_sql(state->table, state->columns, values, clause, true);

	for (int r = 0; r < nreplicas; r++)
	{
		NodeBuffer *b = &state->buffers[replicas[r]];

		if (b->queued)
		{
			queue_statement(placement_node_name(&state->placement, replicas[r]), RelationGetRelid(state->rel),
							state->userid, statement);
			continue;
		}
		if (b->moving)
			remote_take_moving_rows(b->conn);
		remote_note_write(b->conn);
		remote_send(b->conn, sql, true, state);
		conns[n] = b->conn;
		owners[n++] = state;
	}
	remote_receive_owned(conns, owners, n, out, 0, 0);
	for (int j = 0; j < n; j++)
	{
		(void) remote_answer(conns[j], &out[j], sql, what);
		remote_expect_rows(conns[j], out[j].result, state->nlive, 0, nrows, what);
	}
	for (int j = 1; j < n; j++)
		check_replicas_agree(state, conns[0], out[0].result, conns[j], out[j].result);
	/* at least one replica took it now (row_replicas: ringshard.write_quorum is at least 1) */
	for (int j = 1; j < n; j++)
		remote_result_free(out[j].result);
	*node = conns[0]->node;
	return out[0].result;
}

/*
 * Row row of a node's answer, as the node holds it now, decoded into datums
 * and nulls: every column, or only those of columns (attribute numbers).
 */
static void
answered_row(RsModifyState *state, PGresult *res, int row, const char *node, List *columns, Datum *datums,
			 bool *nulls)
{
	for (int i = 0, c = 0; i < state->desc->natts; i++)
	{
		nulls[i] = true;
		datums[i] = (Datum) 0;
		if (TupleDescAttr(state->desc, i)->attisdropped)
			continue;
		if ((columns == NIL || list_member_int(columns, i + 1)) && !PQgetisnull(res, row, c))
		{
			datums[i] = remote_codec_decode(&state->text_codecs[i], PQgetvalue(res, row, c),
											PQgetlength(res, row, c), node);
			nulls[i] = false;
		}
		c++;
	}
}

/*
 * One row of an upsert, alone, for a statement that needs each row's answer
 * at once (RETURNING, triggers) or whose rows would affect one row twice.
 */
static TupleTableSlot *
upsert_row(RsModifyState *state, TupleTableSlot *slot)
{
	uint16		replicas[PLACEMENT_MAX_REPLICAS];
	int			nreplicas;
	MemoryContext old;
	StringInfoData values;
	PGresult   *answer;
	const char *node;
	HeapTuple	tuple;
	Datum	   *datums;
	bool	   *nulls;
	int			level;

	nreplicas = row_replicas(state, slot, replicas);
	MemoryContextReset(state->row_cxt);
	old = MemoryContextSwitchTo(state->row_cxt);
	slot_getallattrs(slot);
	check_not_written_twice(state, slot->tts_values, slot->tts_isnull);
	initStringInfo(&values);
	level = remote_transmission_begin(state->money);
	append_row_literal(state, slot, &values);
	remote_transmission_end(level);
	answer = send_upsert(state, replicas, nreplicas, values.data, 1, &node);
	if (PQntuples(answer) == 0)
	{
		remote_result_free(answer);
		MemoryContextSwitchTo(old);
		/* no replica wrote it (DO NOTHING, or DO UPDATE ... WHERE false): not counted, not returned */
		return NULL;
	}
	datums = palloc(sizeof(Datum) * state->desc->natts);
	nulls = palloc(sizeof(bool) * state->desc->natts);
	answered_row(state, answer, 0, node, NIL, datums, nulls);
	remote_result_free(answer);
	remember_written(state, datums, nulls, GetMemoryChunkContext(state));
	MemoryContextSwitchTo(slot->tts_mcxt);
	tuple = heap_form_tuple(state->desc, datums, nulls);
	MemoryContextSwitchTo(old);
	ExecForceStoreHeapTuple(tuple, slot, true);
	return slot;
}

/*
 * Whether two rows of a batch propose the same conflict-target values (and
 * so, under DO UPDATE, might affect one row twice): compared within a key's
 * lock slot.  Nulls never conflict.
 */
static bool
batch_repeats_a_target(RsModifyState *state, TupleTableSlot **slots, int nslots)
{
	uint32	   *lock_slots;
	bool	   *keyed;

	if (state->arbiter == NIL)
		return false;
	lock_slots = MemoryContextAlloc(state->row_cxt, sizeof(uint32) * nslots);
	keyed = MemoryContextAlloc(state->row_cxt, sizeof(bool) * nslots);
	for (int i = 0; i < nslots; i++)
	{
		bool	   *nulls;

		slot_getallattrs(slots[i]);
		nulls = slots[i]->tts_isnull;
		/* a row without a key has no lock slot: row_replicas refuses it */
		keyed[i] = !nulls[state->placement.key_attnum - 1] &&
			!(state->placement.keyspace_attnum > 0 && nulls[state->placement.keyspace_attnum - 1]);
		if (!keyed[i])
			continue;
		lock_slots[i] = row_lock_slot(state, slots[i]->tts_values);
		for (int j = 0; j < i; j++)
		{
			bool		equal = keyed[j] && lock_slots[j] == lock_slots[i];
			ListCell   *col;

			foreach(col, state->arbiter)
			{
				int			attnum = lfirst_int(col);

				if (!equal)
					break;
				equal = !slots[i]->tts_isnull[attnum - 1] && !slots[j]->tts_isnull[attnum - 1] &&
					arbiter_values_equal(state, foreach_current_index(col), slots[i]->tts_values[attnum - 1],
										 slots[j]->tts_values[attnum - 1]);
			}
			if (equal)
				return true;
		}
	}
	return false;
}

/* The rows of a batch that share one replica set: one statement for them. */
typedef struct UpsertGroup
{
	uint16		replicas[PLACEMENT_MAX_REPLICAS];	/* in node order */
	int			nreplicas;
	StringInfoData values;
	int			nrows;
} UpsertGroup;

/*
 * A batch of an upsert's rows (the executor's, for a statement that needs
 * no row's answer at once: no RETURNING, no row triggers): the rows that
 * share a replica set go in one INSERT ... VALUES (...), ... ON CONFLICT to
 * each of those replicas, one replica set after another.  Each node applies
 * its rows in their order, as the rows would be one at a time.  Returns how
 * many rows were written (inserted or updated).  A batch in which two rows
 * propose the same conflict-target values goes row by row, so that DO
 * UPDATE's rule against affecting a row twice is applied, and reported,
 * as for rows one at a time.
 */
static int
upsert_batch(RsModifyState *state, TupleTableSlot **slots, int nslots)
{
	UpsertGroup *groups;
	int			ngroups = 0;
	int			written = 0;
	uint16	   *row_sets;
	int		   *row_set_sizes;
	MemoryContext old;
	int			level;

	MemoryContextReset(state->row_cxt);
	if (batch_repeats_a_target(state, slots, nslots))
	{
		for (int i = 0; i < nslots; i++)
			written += upsert_row(state, slots[i]) != NULL;
		return written;
	}
	/* each row's replicas, in the statement's context (a node's buffer is set up there) */
	row_sets = MemoryContextAlloc(state->row_cxt, sizeof(uint16) * PLACEMENT_MAX_REPLICAS * nslots);
	row_set_sizes = MemoryContextAlloc(state->row_cxt, sizeof(int) * nslots);
	for (int i = 0; i < nslots; i++)
		row_set_sizes[i] = row_replicas(state, slots[i], &row_sets[i * PLACEMENT_MAX_REPLICAS]);
	old = MemoryContextSwitchTo(state->row_cxt);
	groups = palloc(sizeof(UpsertGroup) * nslots);
	level = remote_transmission_begin(state->money);
	for (int i = 0; i < nslots; i++)
	{
		uint16	   *replicas = &row_sets[i * PLACEMENT_MAX_REPLICAS];
		int			nreplicas = row_set_sizes[i];
		int			g;

		slot_getallattrs(slots[i]);
		check_not_written_twice(state, slots[i]->tts_values, slots[i]->tts_isnull);
		/* a replica set in node order, so that one set in two orders is one group */
		for (int a = 1; a < nreplicas; a++)
			for (int b = a; b > 0 && replicas[b - 1] > replicas[b]; b--)
			{
				uint16		swap = replicas[b];

				replicas[b] = replicas[b - 1];
				replicas[b - 1] = swap;
			}
		for (g = 0; g < ngroups; g++)
			if (groups[g].nreplicas == nreplicas &&
				memcmp(groups[g].replicas, replicas, sizeof(uint16) * nreplicas) == 0)
				break;
		if (g == ngroups)
		{
			memcpy(groups[g].replicas, replicas, sizeof(uint16) * nreplicas);
			groups[g].nreplicas = nreplicas;
			initStringInfo(&groups[g].values);
			groups[g].nrows = 0;
			ngroups++;
		}
		if (groups[g].nrows++ > 0)
			appendStringInfoString(&groups[g].values, ", ");
		append_row_literal(state, slots[i], &groups[g].values);
	}
	remote_transmission_end(level);
	for (int g = 0; g < ngroups; g++)
	{
		const char *node;
		PGresult   *answer = send_upsert(state, groups[g].replicas, groups[g].nreplicas, groups[g].values.data,
										 groups[g].nrows, &node);
		Datum	   *datums = palloc(sizeof(Datum) * state->desc->natts);
		bool	   *nulls = palloc(sizeof(bool) * state->desc->natts);

		/* what DO UPDATE must remember of the rows written: their conflict-target values */
		for (int row = 0; row < PQntuples(answer) && state->arbiter != NIL; row++)
		{
			answered_row(state, answer, row, node, state->arbiter, datums, nulls);
			remember_written(state, datums, nulls, GetMemoryChunkContext(state));
		}
		written += PQntuples(answer);
		remote_result_free(answer);
	}
	MemoryContextSwitchTo(old);
	return written;
}

void
rsAddForeignUpdateTargets(PlannerInfo *root, Index rtindex, RangeTblEntry *target_rte, Relation target_relation)
{
	/* UPDATE and DELETE are sent to the nodes whole: no row identity is needed */
}

/*
 * What stops an UPDATE or DELETE from going whole: the first part of its
 * conditions or new values that the nodes cannot evaluate as we would.
 */
static const char *
refusal_reason(PlannerInfo *root, ModifyTable *plan, Index resultRelation)
{
	RelOptInfo *rel = find_base_rel(root, resultRelation);
	ListCell   *lc;
	Plan	   *subplan = outerPlan(plan);

	if (subplan && IsA(subplan, Result) && outerPlan(subplan))
		subplan = outerPlan(subplan);
	if (subplan == NULL || !IsA(subplan, ForeignScan) ||
		((ForeignScan *) subplan)->scan.scanrelid != resultRelation)
		return "another table, a join or a subquery";
	foreach(lc, subplan->qual)
	{
		const char *reason = rsfdw_unshippable_reason(root, rel, lfirst(lc));

		if (reason)
			return psprintf("%s in its WHERE clause", reason);
	}
	if (plan->operation == CMD_UPDATE)
	{
		List	   *processed_tlist = NIL;
		List	   *target_attrs = NIL;

		get_translated_update_targetlist(root, resultRelation, &processed_tlist, &target_attrs);
		foreach(lc, processed_tlist)
		{
			const char *reason = rsfdw_unshippable_reason(root, rel, lfirst_node(TargetEntry, lc)->expr);

			if (reason)
				return psprintf("%s in its SET list", reason);
		}
	}
	return "a part the nodes cannot evaluate as the coordinator would";
}

List *
rsPlanForeignModify(PlannerInfo *root, ModifyTable *plan, Index resultRelation, int subplan_index)
{
	RangeTblEntry *rte = planner_rt_fetch(resultRelation, root);

	if (plan->operation == CMD_UPDATE || plan->operation == CMD_DELETE)
	{
		const char *reason = refusal_reason(root, plan, resultRelation);

		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("this %s of distributed table %s cannot be sent to its nodes as one statement",
						plan->operation == CMD_UPDATE ? "UPDATE" : "DELETE", get_rel_name(rte->relid)),
				 errdetail("It uses %s.", reason),
				 errhint("Write the condition and the new values with built-in immutable functions of the table's "
						 "columns, constants, parameters and stable functions of those, or select the keys first "
						 "and use WHERE key = ANY (...).")));
	}
	/* an upsert: the planner hook took its clause out (statement_planner.c) */
	if (plan->operation == CMD_INSERT)
		return rsfdw_upsert_private(root, resultRelation);
	if (plan->onConflictAction != ONCONFLICT_NONE)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("INSERT ... ON CONFLICT is not supported on distributed table %s", get_rel_name(rte->relid)),
				 errhint("Unique constraints are enforced by the nodes: a duplicate fails with SQLSTATE 23505.")));
	return NIL;
}

void
rsBeginForeignModify(ModifyTableState *mtstate, ResultRelInfo *rinfo, List *fdw_private,
					 int subplan_index, int eflags)
{
	if (eflags & EXEC_FLAG_EXPLAIN_ONLY)
		return;
	rinfo->ri_FdwState = begin_insert(mtstate->ps.state, rinfo);
	if (fdw_private != NIL)
		begin_upsert(rinfo->ri_FdwState, mtstate, fdw_private);
}

TupleTableSlot *
rsExecForeignInsert(EState *estate, ResultRelInfo *rinfo, TupleTableSlot *slot, TupleTableSlot *planSlot)
{
	RsModifyState *state = rinfo->ri_FdwState;

	return state->upsert ? upsert_row(state, slot) : insert_row(state, slot);
}

/*
 * Whether an upsert's rows can come in the executor's batches: when no
 * row's answer is needed at once (no RETURNING, no row triggers, no check
 * option of a view).
 */
static bool
upsert_in_batches(ResultRelInfo *rinfo)
{
	return rinfo->ri_projectReturning == NULL && rinfo->ri_WithCheckOptions == NIL &&
		!(rinfo->ri_TrigDesc && (rinfo->ri_TrigDesc->trig_insert_before_row ||
								 rinfo->ri_TrigDesc->trig_insert_after_row));
}

TupleTableSlot **
rsExecForeignBatchInsert(EState *estate, ResultRelInfo *rinfo, TupleTableSlot **slots,
						 TupleTableSlot **planSlots, int *numSlots)
{
	RsModifyState *state = rinfo->ri_FdwState;

	/*
	 * Only upserts come in batches (rsGetForeignModifyBatchSize).  The
	 * executor counts *numSlots rows written, and would run AFTER ROW
	 * triggers and check options on the first *numSlots slots, which are the
	 * rows proposed, not those written: upsert_in_batches lets no statement
	 * with either come here.
	 */
	if (state->upsert)
	{
		*numSlots = upsert_batch(state, slots, *numSlots);
		return slots;
	}
	for (int i = 0; i < *numSlots; i++)
		insert_row(state, slots[i]);
	return slots;
}

/*
 * Row-by-row UPDATE and DELETE: never planned (rsPlanForeignModify refuses
 * them), but the executor wants the callbacks to exist.
 */
TupleTableSlot *
rsExecForeignUpdateOrDelete(EState *estate, ResultRelInfo *rinfo, TupleTableSlot *slot, TupleTableSlot *planSlot)
{
	elog(ERROR, "ringshard: UPDATE and DELETE of distributed tables are sent to the nodes whole");
	return NULL;
}

int
rsGetForeignModifyBatchSize(ResultRelInfo *rinfo)
{
	RsModifyState *state = rinfo->ri_FdwState;

	/* plain rows are batched per node here, not by the executor (EXPLAIN alone has no state) */
	return state != NULL && state->upsert && upsert_in_batches(rinfo) ? UPSERT_BATCH_ROWS : 1;
}

void
rsEndForeignModify(EState *estate, ResultRelInfo *rinfo)
{
	if (rinfo->ri_FdwState)
		finish_buffers(rinfo->ri_FdwState);
}

void
rsBeginForeignInsert(ModifyTableState *mtstate, ResultRelInfo *rinfo)
{
	if (mtstate->operation != CMD_INSERT)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("rows cannot move into distributed table %s by UPDATE of a partitioned table",
						RelationGetRelationName(rinfo->ri_RelationDesc))));
	/* routed from a partitioned table: its conflict clause would be lost here */
	if (mtstate->ps.plan != NULL && ((ModifyTable *) mtstate->ps.plan)->onConflictAction != ONCONFLICT_NONE)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("INSERT ... ON CONFLICT cannot route rows into distributed table %s",
						RelationGetRelationName(rinfo->ri_RelationDesc)),
				 errhint("Run the upsert on the distributed table itself.")));
	/*
	 * COPY FROM: a bulk write, which would lock more keys than the lock table
	 * holds; it takes the table against other writers before it writes
	 * anything (write_locks.c), so two loads queue instead of deadlocking.
	 */
	rsfdw_lock_table_for_write(RelationGetRelid(rinfo->ri_RelationDesc));
	rinfo->ri_FdwState = begin_insert(mtstate->ps.state, rinfo);
}

void
rsEndForeignInsert(EState *estate, ResultRelInfo *rinfo)
{
	if (rinfo->ri_FdwState)
		finish_buffers(rinfo->ri_FdwState);
}

int
rsIsForeignRelUpdatable(Relation rel)
{
	return (1 << CMD_INSERT) | (1 << CMD_UPDATE) | (1 << CMD_DELETE);
}

void
rsExplainForeignModify(ModifyTableState *mtstate, ResultRelInfo *rinfo, List *fdw_private,
					   int subplan_index, ExplainState *es)
{
	RsModifyState *state = rinfo->ri_FdwState;

	if (fdw_private != NIL)
	{
		ExplainPropertyText("Writes", upsert_in_batches(rinfo)
							? "rows in batches, one INSERT ... ON CONFLICT per batch and replica set to each of its "
							"replicas; a replica that is down gets the statement queued"
							: "each row alone to every replica, as one INSERT ... ON CONFLICT; a replica "
							"that is down gets the statement queued", es);
		if (es->verbose)
			ExplainPropertyText("Conflict clause", rsfdw_template_text(linitial(fdw_private), NULL), es);
	}
	else
		ExplainPropertyText("Writes", "each row to every replica, batched per node (COPY); a replica that is down "
							"gets it queued", es);
	/*
	 * EXPLAIN ANALYZE: the rows of the statement for each node.  Batches go
	 * when full and at the statement's end (or with its commit), after the
	 * plan is printed, so there are no times to show.
	 */
	for (int i = 0; es->analyze && state && i < state->nnodes; i++)
	{
		NodeBuffer *b = &state->buffers[i];

		if (b->rows_routed > 0 || b->rows_queued > 0)
			ExplainPropertyText(psprintf("Node %s", placement_node_name(&state->placement, i)),
								b->rows_queued == 0
								? psprintf(INT64_FORMAT " row%s", b->rows_routed, b->rows_routed == 1 ? "" : "s")
								: psprintf(INT64_FORMAT " row%s, " INT64_FORMAT " queued (the node is down)",
										   b->rows_routed, b->rows_routed == 1 ? "" : "s", b->rows_queued),
								es);
	}
}

/* ----- UPDATE and DELETE, sent whole ----- */

/*
 * The ForeignScan under a ModifyTable, if it is ours and alone.  A Result
 * above it that only gates it on a condition of constants and parameters
 * (WHERE false, WHERE $1 > 0) stays and still decides whether it runs.
 */
static ForeignScan *
modify_subplan(ModifyTable *plan, Index resultRelation)
{
	Plan	   *subplan = outerPlan(plan);

	if (subplan && IsA(subplan, Result) && subplan->qual == NIL && outerPlan(subplan))
		subplan = outerPlan(subplan);
	if (subplan == NULL || !IsA(subplan, ForeignScan) ||
		((ForeignScan *) subplan)->scan.scanrelid != resultRelation)
		return NULL;
	return (ForeignScan *) subplan;
}

bool
rsPlanDirectModify(PlannerInfo *root, ModifyTable *plan, Index resultRelation, int subplan_index)
{
	ForeignScan *fscan;
	RelOptInfo *rel;
	RsRelInfo  *info;
	RangeTblEntry *rte = planner_rt_fetch(resultRelation, root);
	List	   *params;
	RsScanPlan *scan;
	RsDirectPlan *direct = palloc0(sizeof(RsDirectPlan));
	DeparseContext ctx;
	Bitmapset  *attrs = NULL;

	if (plan->operation != CMD_UPDATE && plan->operation != CMD_DELETE)
		return false;
	fscan = modify_subplan(plan, resultRelation);
	if (fscan == NULL || fscan->scan.plan.qual != NIL)
		return false;
	rel = find_base_rel(root, resultRelation);
	info = rel->fdw_private;
	scan = rsfdw_scan_plan_from_private(fscan->fdw_private);
	/* the statement shares the scan's parameters, and its WHERE template */
	params = list_truncate(list_copy(fscan->fdw_exprs), scan->nparams);

	rsfdw_deparse_init(&ctx, root, rel, resultRelation, &params);
	if (plan->operation == CMD_UPDATE)
	{
		List	   *processed_tlist = NIL;
		List	   *target_attrs = NIL;
		ListCell   *lc;
		ListCell   *lc2;

		get_translated_update_targetlist(root, resultRelation, &processed_tlist, &target_attrs);
		/* (processed_tlist goes on with junk columns: as far as target_attrs only) */
		forboth(lc, processed_tlist, lc2, target_attrs)
		{
			TargetEntry *tle = lfirst_node(TargetEntry, lc);
			AttrNumber	attno = lfirst_int(lc2);

			if (attno == info->key_attnum || attno == info->keyspace_attnum)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot change the sharding key of distributed table %s", get_rel_name(rte->relid)),
						 errdetail("Column \"%s\" places each row on its nodes.", get_attname(rte->relid, attno, false)),
						 errhint("Delete the row and insert it with its new key, in one transaction.")));
			if (!rsfdw_is_shippable(root, rel, (Expr *) tle->expr))
				return false;
		}

		/*
		 * Twice: as EXPLAIN shows it and as it goes when it goes as text
		 * (constants as literals), and with its constants as holes too, the
		 * text prepared on the nodes (rsfdw_direct_modify_prepared): one
		 * prepared statement serves "SET n = n + 1" and "SET n = n + 2".
		 * The second pass adds only constants to the shared parameters.
		 */
		for (int pass = 0; pass < 2; pass++)
		{
			if (pass == 1)
			{
				direct->statement_tmpl = rsfdw_deparse_finish(&ctx);
				rsfdw_deparse_init(&ctx, root, rel, resultRelation, &params);
				ctx.consts_as_holes = true;
			}
			rsfdw_append(&ctx, "UPDATE ");
			rsfdw_append(&ctx, rsfdw_relation_name(rte->relid));
			rsfdw_append(&ctx, " t SET ");
			forboth(lc, processed_tlist, lc2, target_attrs)
			{
				TargetEntry *tle = lfirst_node(TargetEntry, lc);

				if (foreach_current_index(lc) > 0)
					rsfdw_append(&ctx, ", ");
				rsfdw_append(&ctx, rsfdw_column_name(rte->relid, lfirst_int(lc2)));
				rsfdw_append(&ctx, " = ");
				rsfdw_append_expr(&ctx, (Expr *) tle->expr);
			}
		}
		direct->statement_prepared_tmpl = rsfdw_deparse_finish(&ctx);
	}
	else
	{
		rsfdw_append(&ctx, "DELETE FROM ");
		rsfdw_append(&ctx, rsfdw_relation_name(rte->relid));
		rsfdw_append(&ctx, " t");
		direct->statement_tmpl = rsfdw_deparse_finish(&ctx);
	}
	direct->where_tmpl = scan->where_tmpl;

	/* RETURNING: the columns it reads come back from the node that counts the row */
	if (plan->returningLists)
	{
		Relation	relation = table_open(rte->relid, NoLock);
		TupleDesc	desc = RelationGetDescr(relation);
		List	   *returning_list = list_nth(plan->returningLists, subplan_index);
		bool		whole_row;

		pull_varattnos((Node *) returning_list, resultRelation, &attrs);
		whole_row = bms_is_member(0 - FirstLowInvalidHeapAttributeNumber, attrs);
		for (int attnum = 1; attnum <= desc->natts; attnum++)
		{
			if (TupleDescAttr(desc, attnum - 1)->attisdropped)
				continue;
			if (whole_row || bms_is_member(attnum - FirstLowInvalidHeapAttributeNumber, attrs))
				direct->returning = lappend_int(direct->returning, attnum);
		}
		table_close(relation, NoLock);
	}

	direct->relid = rte->relid;
	direct->kind = scan->kind;
	direct->nparams = list_length(params);
	direct->key_attnum = scan->key_attnum;
	direct->key_is_array = scan->key_is_array;
	direct->has_returning = plan->returningLists != NIL;

	/* key values (and keyspace) follow the parameters, as in the scan */
	{
		List	   *exprs = list_copy(params);

		for (int i = scan->nparams; i < list_length(fscan->fdw_exprs); i++)
			exprs = lappend(exprs, list_nth(fscan->fdw_exprs, i));
		fscan->fdw_exprs = exprs;
	}
	fscan->operation = plan->operation;
	fscan->resultRelation = resultRelation;
	fscan->fdw_private = rsfdw_direct_plan_to_private(direct);
	return true;
}

/* Execution of a statement sent whole. */
typedef struct RsDirectState
{
	RsDirectPlan *plan;			/* what planning decided (plan_state.h) */
	Relation	rel;
	TupleDesc	desc;
	Oid			userid;
	TablePlacement placement;
	List	   *returning;		/* attnums */
	int			nreturning;
	RsScanKind	kind;
	char	   *key_column;
	bool		has_returning;
	List	   *param_exprs;
	List	   *param_states;
	ExprState  *key_state;
	ExprState  *keyspace_state;
	RemoteCodec *codecs;		/* RETURNING columns come back as text */
	PGresult  **results;		/* per target node */
	RemoteConnection **result_conns;
	int			nresults;
	int			result_index;
	int			row;
	bool		done;
	MemoryContext row_cxt;
	/* router: the replicas of each key written, nkey_sets sets of key_set_size[] */
	uint16	   *key_sets;
	int		   *key_set_size;
	int			nkey_sets;
	bool	   *moving_nodes;	/* by node: takes rows of keys not copied yet (their old replica) */
	NodeAnalyses *analysis;		/* EXPLAIN ANALYZE: by placement node, else NULL */
	/* router: the keys of the key filter, nfilter_keys of key_type */
	Datum	   *filter_keys;
	int			nfilter_keys;
	Oid			key_type;
} RsDirectState;

void
rsBeginDirectModify(ForeignScanState *node, int eflags)
{
	ForeignScan *plan = (ForeignScan *) node->ss.ps.plan;
	EState	   *estate = node->ss.ps.state;
	List	   *private = plan->fdw_private;
	RsDirectState *state = palloc0(sizeof(RsDirectState));
	RangeTblEntry *rte;

	node->fdw_state = state;
	state->rel = node->ss.ss_currentRelation ? node->ss.ss_currentRelation
		: ExecOpenScanRelation(estate, plan->resultRelation, eflags);
	state->desc = RelationGetDescr(state->rel);
	state->plan = rsfdw_direct_plan_from_private(private);
	state->returning = state->plan->returning;
	state->nreturning = list_length(state->returning);
	state->kind = state->plan->kind;
	state->key_column = state->kind != RS_SCAN_FANOUT
		? rsfdw_column_name(state->plan->relid, state->plan->key_attnum) : "";
	state->has_returning = state->plan->has_returning;
	rte = exec_rt_fetch(plan->resultRelation, estate);
	state->userid = OidIsValid(rte->checkAsUser) ? rte->checkAsUser : GetUserId();
	table_placement_load(&state->placement, RelationGetRelid(state->rel), state->desc, estate->es_query_cxt);

	rsfdw_init_fdw_exprs(plan->fdw_exprs, state->plan->nparams, (PlanState *) node, &state->param_exprs,
						 &state->param_states, &state->key_state, &state->keyspace_state);
	state->codecs = remote_codecs_for_desc(state->desc, false, NULL);
	state->row_cxt = AllocSetContextCreate(estate->es_query_cxt, "ringshard returning row", ALLOCSET_DEFAULT_SIZES);
}

/* The nodes a statement sent whole must reach: every replica of its keys, or every node. */
static bool *
direct_targets(ForeignScanState *node, RsDirectState *state, char **key_filter, const char *command)
{
	int			nnodes = placement_node_count(&state->placement);
	bool	   *targets = palloc0(sizeof(bool) * Max(nnodes, 1));
	ExprContext *econtext = node->ss.ps.ps_ExprContext;
	StringInfoData filter;

	*key_filter = "";
	state->moving_nodes = palloc0(sizeof(bool) * Max(nnodes, 1));
	if (state->kind == RS_SCAN_FANOUT)
	{
		/*
		 * While the table moves, every node changes its rows, the moving
		 * ones on their old replicas (and any copy a new one has): all of
		 * them must be nodes of the ring still.
		 */
		if (placement_is_moving(&state->placement))
		{
			if (!placement_moves_in_placement(&state->placement))
				placement_refuse_while_moving(&state->placement, command);
			for (int i = 0; i < nnodes; i++)
				state->moving_nodes[i] = true;
		}
		/* any row may change: the table is locked against other writers (write_locks.c) */
		rsfdw_lock_table_for_write(RelationGetRelid(state->rel));
		for (int i = 0; i < nnodes; i++)
			targets[i] = true;
		return targets;
	}
	initStringInfo(&filter);
	{
		bool		isnull;
		bool		keyspace_null = false;
		Datum		keys = ExecEvalExpr(state->key_state, econtext, &isnull);
		Datum		keyspace = state->keyspace_state ? ExecEvalExpr(state->keyspace_state, econtext, &keyspace_null) : 0;
		Oid			key_type = TupleDescAttr(state->desc, state->placement.key_attnum - 1)->atttypid;
		Datum	   *elems = &keys;
		bool	   *nulls = &isnull;
		int			nelems = 1;
		int			nkeys = 0;
		Datum	   *filter_keys;
		uint32	   *slots;

		if (!isnull && state->plan->key_is_array)
		{
			ArrayType  *array = DatumGetArrayTypeP(keys);
			int16		typlen;
			bool		typbyval;
			char		typalign;

			get_typlenbyvalalign(ARR_ELEMTYPE(array), &typlen, &typbyval, &typalign);
			deconstruct_array(array, ARR_ELEMTYPE(array), typlen, typbyval, typalign, &elems, &nulls, &nelems);
		}
		filter_keys = palloc(sizeof(Datum) * Max(nelems, 1));
		slots = palloc(sizeof(uint32) * Max(nelems, 1));
		state->key_sets = palloc(sizeof(uint16) * PLACEMENT_MAX_REPLICAS * Max(nelems, 1));
		state->key_set_size = palloc(sizeof(int) * Max(nelems, 1));
		state->nkey_sets = 0;

		if (!isnull && !keyspace_null)
			hot_keys_note_keys(&state->placement, elems, nulls, nelems, state->keyspace_state ? &keyspace : NULL,
							   HOT_KEY_WRITE);
		for (int k = 0; k < nelems && !isnull && !keyspace_null; k++)
		{
			uint16		replicas[PLACEMENT_MAX_REPLICAS];
			int			n;

			if (nulls[k])
				continue;
			n = placement_key_replicas(&state->placement, elems[k], keyspace, replicas);
			/* a key not copied yet is changed where it is read: on its old replicas, all of them up */
			if (placement_is_moving(&state->placement))
			{
				int			move = placement_key_move(&state->placement, elems[k], keyspace);

				if (move >= 0)
				{
					n = placement_move_old_replicas(&state->placement, move, replicas);
					if (!placement_move_writable(&state->placement, move))
						placement_refuse_moving_write(&state->placement, move, command);
					for (int r = 0; r < n; r++)
					{
						if (!placement_node_up(&state->placement, replicas[r]) &&
							!queue_node_up_now(placement_node_name(&state->placement, replicas[r])))
							placement_refuse_moving_write(&state->placement, move, command);
						state->moving_nodes[replicas[r]] = true;
					}
				}
			}
			for (int r = 0; r < n; r++)
				targets[replicas[r]] = true;
			memcpy(&state->key_sets[PLACEMENT_MAX_REPLICAS * state->nkey_sets], replicas, sizeof(uint16) * n);
			state->key_set_size[state->nkey_sets++] = n;
			slots[nkeys] = placement_key_lock_slot(&state->placement, elems[k], keyspace);
			filter_keys[nkeys++] = elems[k];
		}
		/* writers of one key queue here, before any replica (write_locks.c) */
		rsfdw_lock_keys_for_write(RelationGetRelid(state->rel), slots, nkeys);
		*key_filter = rsfdw_key_filter_sql(state->key_column, key_type, filter_keys, nkeys);
		state->filter_keys = filter_keys;
		state->nfilter_keys = nkeys;
		state->key_type = key_type;
	}
	return targets;
}

/*
 * A statement that changes rows may leave replicas that are down to their
 * queue only if every row it may touch keeps, among the nodes it reaches,
 * at least ringshard.write_quorum of its copies (all of them when it has
 * fewer): one of them counts the row and returns it, and the write is as
 * safe as an INSERT that reached a quorum.
 */
static void
check_copies_reached(TablePlacement *placement, const bool *queued, const uint16 *key_sets,
					 const int *key_set_size, int nkey_sets, const char *what, Relation rel)
{
	int			nnodes = placement_node_count(placement);
	int			missing = -1;

	if (key_sets == NULL)
	{
		if (!placement_covered_by(placement, queued, ringshard_write_quorum))
			for (int i = 0; i < nnodes && missing < 0; i++)
				if (queued[i])
					missing = i;
	}
	else
		for (int k = 0; k < nkey_sets && missing < 0; k++)
		{
			const uint16 *set = &key_sets[PLACEMENT_MAX_REPLICAS * k];
			int			reached = 0;

			for (int r = 0; r < key_set_size[k]; r++)
				reached += !queued[set[r]];
			if (reached < Min(ringshard_write_quorum, key_set_size[k]))
				for (int r = 0; r < key_set_size[k] && missing < 0; r++)
					if (queued[set[r]])
						missing = set[r];
		}
	if (missing >= 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("node \"%s\" is down, so %s would reach fewer than ringshard.write_quorum (%d) copies of some rows of table %s",
						placement_node_name(placement, missing), what, ringshard_write_quorum,
						RelationGetRelationName(rel)),
				 errdetail("A replica that is down gets the statement queued, but each row must keep a copy that "
						   "takes it now."),
				 errhint("Retry once the node is back (see ringshard.node_health()), or lower ringshard.write_quorum.")));
}

/* The nodes of a placement a write must queue for: down, and still down when asked under their queue lock. */
static bool *
queued_targets(TablePlacement *placement, const bool *targets, int *nqueued)
{
	int			nnodes = placement_node_count(placement);
	bool	   *queued = palloc0(sizeof(bool) * Max(nnodes, 1));

	*nqueued = 0;
	for (int i = 0; i < nnodes; i++)
		if (targets[i] && !placement_node_up(placement, i) && !queue_node_up_now(placement_node_name(placement, i)))
		{
			queued[i] = true;
			(*nqueued)++;
		}
	return queued;
}

/*
 * A row changes on every one of its replicas that took the statement, or on
 * none: each node's answer counts the rows it changed by slot (the number of
 * the row's replicas that took the statement, and which of them this node
 * is, from ringshard_worker.replica_slot()), and for each number of replicas
 * every rank must have changed as many rows.  One that changed fewer missed
 * rows the others changed, most often a row inserted by a transaction that
 * is still in doubt on it (its commit did not reach the node, and recovery
 * has not finished it yet): acknowledging the change would leave the
 * replicas different for good.  The statement fails instead, as a
 * serialization failure: nothing was changed, and a retry once the replicas
 * agree again succeeds.  Answers: rows whose slot column is not NULL, with
 * their count in count_column; ranked[] gets the rows each node changed as
 * a replica of theirs.
 */
static void
check_replicas_changed_alike(RsDirectState *state, RemoteConnection **conns, PGresult **results, int n,
							 int slot_column, int count_column, const int64 *counted, const int64 *changed_here,
							 int64 *ranked, const char *what)
{
	int64	   *changed = palloc0(sizeof(int64) * (PLACEMENT_MAX_REPLICAS + 1) * PLACEMENT_MAX_REPLICAS);

	for (int j = 0; j < n; j++)
	{
		int64		first_replica = 0;	/* rows changed here as their first replica */
		int64		as_replica = 0; /* rows changed here as any of their replicas */

		for (int row = 0; row < PQntuples(results[j]); row++)
		{
			int64		slot;
			int64		count;
			int64	   *sum;

			if (PQgetisnull(results[j], row, slot_column))
				continue;
			slot = remote_int64_value(conns[j], results[j], row, slot_column, what);
			count = remote_int64_value(conns[j], results[j], row, count_column, what);
			if (slot < 100 || slot / 100 > PLACEMENT_MAX_REPLICAS || slot % 100 >= slot / 100 || count < 0)
				remote_reject_answer(conns[j], what, psprintf("slot " INT64_FORMAT " with count " INT64_FORMAT,
															  slot, count));
			sum = &changed[(slot / 100) * PLACEMENT_MAX_REPLICAS + slot % 100];
			if (pg_add_s64_overflow(*sum, count, sum) || pg_add_s64_overflow(as_replica, count, &as_replica) ||
				(slot % 100 == 0 && pg_add_s64_overflow(first_replica, count, &first_replica)))
				remote_reject_answer(conns[j], what, "counts that overflow");
		}

		/*
		 * The node's counts must agree with each other: the rows it counted
		 * for the statement are those it is the first replica of (reads_here
		 * is rank 0 of replica_slot), and it changed at least the rows it
		 * ranks.
		 */
		if (first_replica != counted[j] || (changed_here[j] >= 0 && as_replica > changed_here[j]))
			remote_reject_answer(conns[j], what,
								 psprintf("it counted " INT64_FORMAT " rows, " INT64_FORMAT " as their first replica, "
										  "and ranked " INT64_FORMAT " of the " INT64_FORMAT " it changed",
										  counted[j], first_replica, as_replica, changed_here[j]));
		ranked[j] = as_replica;
	}
	for (int copies = 2; copies <= PLACEMENT_MAX_REPLICAS; copies++)
		for (int rank = 1; rank < copies; rank++)
		{
			int64		first = changed[copies * PLACEMENT_MAX_REPLICAS];
			int64		other = changed[copies * PLACEMENT_MAX_REPLICAS + rank];

			if (first != other)
				ereport(ERROR,
						(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
						 errmsg("the replicas of table %s changed different rows", RelationGetRelationName(state->rel)),
						 errdetail("Of the rows kept by %d replicas, their first replicas changed " INT64_FORMAT
								   " and their replicas number %d changed " INT64_FORMAT ".",
								   copies, first, rank + 1, other),
						 errhint("Nothing was changed.  A transaction may still be in doubt on a node, its rows not "
								 "visible there yet: retry the transaction once recovery has finished it "
								 "(ringshard.recover_prepared_transactions()); if it fails again, compare the "
								 "replicas with ringshard.verify_table().")));
		}
	pfree(changed);
}

/* Run the statement on every target node at once; queue it for those that are down. */
static void
execute_direct(ForeignScanState *node, RsDirectState *state)
{
	ExprContext *econtext = node->ss.ps.ps_ExprContext;
	int			nnodes = placement_node_count(&state->placement);
	char	   *key_filter;
	const char *command = node->ss.ps.plan && ((ForeignScan *) node->ss.ps.plan)->operation == CMD_UPDATE
		? "UPDATE" : "DELETE";
	bool	   *targets = direct_targets(node, state, &key_filter, command);
	RsParamValues *params = rsfdw_eval_params(state->param_states, state->param_exprs, econtext);
	char	   *statement = rsfdw_template_text(state->plan->statement_tmpl, params);
	char	   *where = rsfdw_template_text(state->plan->where_tmpl, params);
	RemoteConnection **conns = palloc(sizeof(RemoteConnection *) * Max(nnodes, 1));
	int		   *conn_node = palloc(sizeof(int) * Max(nnodes, 1));
	RemoteResult *out = palloc(sizeof(RemoteResult) * Max(nnodes, 1));
	int			n = 0;
	char	   *sql;
	char	  **node_sql = NULL;
	char	   *prepared_sql = NULL;
	int			nparams = 0;
	char	   *arguments = NULL;
	char	   *excluded;
	char	   *counted;
	char	   *slots = NULL;
	const char *version = "NULL::pg_catalog.int8";	/* see below */
	int64	   *node_counted;
	int64	   *node_changed;
	int64	   *node_ranked;
	bool		single_copy = placement_single_copy(&state->placement);
	char	   *what;
	int			nqueued;
	bool	   *queued = queued_targets(&state->placement, targets, &nqueued);

	if (nqueued > 0)
	{
		char	   *replay = psprintf("%s%s%s", statement, where, key_filter);

		/* a replay later could not take rows of keys not copied yet */
		for (int i = 0; i < nnodes; i++)
			if (queued[i] && state->moving_nodes[i])
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("%s of table \"%s\" cannot run while some of its rows are moving and node \"%s\" is down",
								command, RelationGetRelationName(state->rel), placement_node_name(&state->placement, i)),
						 errdetail("Rows not copied yet take their writes on their old replicas, and a write queued for "
								   "one would miss them."),
						 errhint("Retry once the node is back, or after CALL ringshard.rebalance('%s').",
								 RelationGetRelationName(state->rel))));

		check_copies_reached(&state->placement, queued, state->kind == RS_SCAN_FANOUT ? NULL : state->key_sets,
							 state->key_set_size, state->nkey_sets, command, state->rel);
		/* the same statement, in order after the writes queued before it */
		for (int i = 0; i < nnodes; i++)
			if (queued[i])
				queue_statement(placement_node_name(&state->placement, i), RelationGetRelid(state->rel),
								state->userid, replay);
	}
	for (int i = 0; i < nnodes; i++)
		if (targets[i] && !queued[i])
		{
			conn_node[n] = i;
			conns[n++] = remote_connection(placement_node_name(&state->placement, i), state->userid);
		}
	remote_connect_all(conns, n, false);

	/*
	 * Each row counts once: on its first replica (ringshard_worker.reads_here
	 * with nobody left out).  No topology version is passed (NULL), unlike a
	 * fan-out's: a write that meets a sync_topology in flight (a node has
	 * committed the new version, this statement's snapshot holds the old one)
	 * would fail with an error clients do not retry; test/t/024 met it.
	 */
	excluded = rsfdw_excluded_nodes_sql(&state->placement, queued);
	counted = single_copy ? "true" : rsfdw_reads_here_sql(&state->placement, excluded, version);

	/*
	 * ... and each node says which replica of each row it changed it as, so
	 * that a row changed on some replicas only fails the statement
	 * (check_replicas_changed_alike).  Not while rows move: a row not copied
	 * yet changes on its old replicas, which the new topology does not rank.
	 */
	if (!single_copy && !placement_is_moving(&state->placement))
		slots = rsfdw_replica_slot_sql(&state->placement, excluded, version);
	sql = rsfdw_direct_modify_sql(state->plan, statement, where, key_filter, counted, slots);
	if (placement_is_moving(&state->placement))
	{
		/* ... and a row not copied yet on the first of its old replicas that takes the statement */
		int		   *serves = palloc(sizeof(int) * state->placement.moving.count);

		(void) placement_move_servers(&state->placement, queued, serves);
		node_sql = palloc(sizeof(char *) * Max(n, 1));
		for (int j = 0; j < n; j++)
		{
			char	   *filter = rsfdw_moving_fanout_filter(&state->placement, psprintf(" AND %s", counted), serves,
															conn_node[j]);

			node_sql[j] = rsfdw_direct_modify_sql(state->plan, statement, where, key_filter,
												  filter + strlen(" AND "), NULL);
		}
	}
	/*
	 * A statement for keys, one text for every node, goes as EXECUTE of a
	 * statement prepared on each link: an UPDATE or DELETE of a key costs the
	 * node no parsing and planning after the first.  Not with RETURNING: a
	 * column type changed on the nodes would change the prepared statement's
	 * result ("cached plan must not change result type").
	 */
	if (state->kind != RS_SCAN_FANOUT && node_sql == NULL && !state->has_returning &&
		!rsfdw_direct_modify_prepared(state->plan, params, state->key_column, state->key_type, state->filter_keys,
									  state->nfilter_keys, counted, slots, &prepared_sql, &nparams, &arguments))
		prepared_sql = NULL;
	state->analysis = node_analysis_start_run(state->analysis, &node->ss.ps, nnodes);
	for (int j = 0; j < n; j++)
	{
		if (state->moving_nodes[conn_node[j]])
			remote_take_moving_rows(conns[j]);
		remote_note_write(conns[j]);
		if (prepared_sql)
			remote_send_execute(conns[j], prepared_sql, nparams, arguments, sql, true, state);
		else
			remote_send(conns[j], node_sql ? node_sql[j] : sql, true, state);
		remote_answer_counts_writes(conns[j]);
	}
	remote_receive(conns, n, out, 0, 0);
	what = psprintf("a change of table %s", RelationGetRelationName(state->rel));
	for (int j = 0; j < n; j++)
		(void) remote_answer(conns[j], &out[j], sql, what);
	state->results = palloc(sizeof(PGresult *) * Max(n, 1));
	state->result_conns = conns;
	state->nresults = n;
	node_counted = palloc0(sizeof(int64) * Max(n, 1));
	node_changed = palloc0(sizeof(int64) * Max(n, 1));
	node_ranked = palloc0(sizeof(int64) * Max(n, 1));
	for (int j = 0; j < n; j++)
	{
		state->results[j] = out[j].result;
		/* RETURNING: the flag, the slot, the columns, the slot's count; else the slot and two counts */
		if (state->has_returning)
		{
			remote_expect_rows(conns[j], out[j].result, 3 + state->nreturning, 0, -1, what);
			/* the rows returned are those counted here; the rows changed are not told */
			for (int row = 0; row < PQntuples(out[j].result); row++)
				node_counted[j] += !PQgetisnull(out[j].result, row, 0);
			node_changed[j] = -1;
		}
		else
		{
			PGresult   *res = out[j].result;
			int			totals = -1;
			int64		changed;

			remote_expect_rows(conns[j], res, 3, 1, 1 + PLACEMENT_MAX_REPLICAS * PLACEMENT_MAX_REPLICAS, what);
			for (int row = 0; row < PQntuples(res); row++)
				if (PQgetisnull(res, row, 0))
				{
					if (totals >= 0)
						remote_reject_answer(conns[j], what, "two rows of totals");
					totals = row;
				}
			if (totals < 0)
				remote_reject_answer(conns[j], what, "no row of totals");
			/* the rows counted here (on the first replica), and the rows the node changed */
			node_counted[j] = remote_int64_value(conns[j], res, totals, 1, what);
			changed = remote_int64_value(conns[j], res, totals, 2, what);
			if (node_counted[j] < 0 || changed < node_counted[j])
				remote_reject_answer(conns[j], what, psprintf("it counted " INT64_FORMAT " rows and changed " INT64_FORMAT,
															  node_counted[j], changed));
			node_changed[j] = changed;
			node->ss.ps.state->es_processed += node_counted[j];
			remote_count_rows_written(conns[j], changed);
		}
	}
	if (slots)
		check_replicas_changed_alike(state, conns, state->results, n, state->has_returning ? 1 : 0,
									 state->has_returning ? 2 + state->nreturning : 1, node_counted, node_changed,
									 node_ranked, what);
	/* stat_nodes, RETURNING: the rows each node changed as a replica of theirs (its slots), else those it returned */
	for (int j = 0; state->has_returning && j < n; j++)
		remote_count_rows_written(conns[j], slots ? node_ranked[j] : node_counted[j]);
	/* EXPLAIN ANALYZE: the rows each node changed (with RETURNING, as for stat_nodes) */
	for (int j = 0; j < n; j++)
		node_analysis_add_at(state->analysis, conn_node[j],
							 !state->has_returning ? node_changed[j] : slots ? node_ranked[j] : node_counted[j],
							 out[j].elapsed_ms);
}

TupleTableSlot *
rsIterateDirectModify(ForeignScanState *node)
{
	RsDirectState *state = node->fdw_state;
	TupleTableSlot *slot = node->ss.ss_ScanTupleSlot;
	EState	   *estate = node->ss.ps.state;
	ResultRelInfo *rinfo = node->resultRelInfo;

	if (!state->done)
	{
		/*
		 * The executor calls this in the per-tuple context, reset for every
		 * row: the results and their connections must outlive it.
		 */
		MemoryContext old = MemoryContextSwitchTo(estate->es_query_cxt);

		execute_direct(node, state);
		MemoryContextSwitchTo(old);
		state->done = true;
	}
	if (!state->has_returning)
		return ExecClearTuple(slot);

	/* RETURNING: each row once, from the node that counts it */
	while (state->result_index < state->nresults)
	{
		PGresult   *res = state->results[state->result_index];
		MemoryContext old;
		int			column = 2;	/* after the flag and the slot */
		ListCell   *lc;

		if (state->row >= PQntuples(res))
		{
			state->result_index++;
			state->row = 0;
			continue;
		}
		/* a row of slot counts (check_replicas_changed_alike), not a returned row */
		if (PQgetisnull(res, state->row, 0))
		{
			state->row++;
			continue;
		}
		MemoryContextReset(state->row_cxt);
		old = MemoryContextSwitchTo(state->row_cxt);
		ExecClearTuple(slot);
		memset(slot->tts_isnull, true, sizeof(bool) * slot->tts_tupleDescriptor->natts);
		foreach(lc, state->returning)
		{
			int			attnum = lfirst_int(lc);

			if (!PQgetisnull(res, state->row, column))
			{
				slot->tts_values[attnum - 1] =
					remote_codec_decode(&state->codecs[attnum - 1], PQgetvalue(res, state->row, column),
										PQgetlength(res, state->row, column),
										state->result_conns[state->result_index]->node);
				slot->tts_isnull[attnum - 1] = false;
			}
			column++;
		}
		MemoryContextSwitchTo(old);
		ExecStoreVirtualTuple(slot);
		state->row++;
		estate->es_processed++;
		if (rinfo && rinfo->ri_projectReturning)
			rinfo->ri_projectReturning->pi_exprContext->ecxt_scantuple = slot;
		return slot;
	}
	return ExecClearTuple(slot);
}

void
rsEndDirectModify(ForeignScanState *node)
{
	RsDirectState *state = node->fdw_state;

	if (state == NULL)
		return;
	for (int j = 0; j < state->nresults; j++)
		remote_result_free(state->results[j]);
	state->nresults = 0;
}

void
rsExplainDirectModify(ForeignScanState *node, ExplainState *es)
{
	RsDirectState *state = node->fdw_state;

	{
		char	   *replicas = state->kind == RS_SCAN_FANOUT ? NULL
			: rsfdw_constant_key_replicas(&state->placement, (ForeignScan *) node->ss.ps.plan, state->plan->nparams,
										  state->kind == RS_SCAN_ROUTER_KEYSPACE);

		ExplainPropertyText("Sent whole to", state->kind == RS_SCAN_FANOUT ? "every node of the table"
							: replicas ? replicas
							: psprintf("every replica of the values of %s", state->key_column), es);
	}
	if (es->verbose)
		ExplainPropertyText("Remote SQL", psprintf("%s%s%s", rsfdw_template_text(state->plan->statement_tmpl, NULL),
												   rsfdw_template_text(state->plan->where_tmpl, NULL),
												   state->kind != RS_SCAN_FANOUT
												   ? psprintf(" AND t.%s = ANY ($keys)", state->key_column) : ""), es);
	/* EXPLAIN ANALYZE: each node's rows changed, and when it answered */
	node_analysis_explain(state->analysis, &state->placement, "row changed", "rows changed", es);
}

/* ----- TRUNCATE ----- */

void
rsExecForeignTruncate(List *rels, DropBehavior behavior, bool restart_seqs)
{
	ListCell   *lc;

	foreach(lc, rels)
	{
		Relation	rel = lfirst(lc);
		TablePlacement placement;
		int			nnodes;
		RemoteConnection **conns;
		char	   *sql;
		bool	   *all;
		bool	   *queued;
		int			nqueued;
		int			n;

		memset(&placement, 0, sizeof(placement));
		table_placement_load(&placement, RelationGetRelid(rel), RelationGetDescr(rel), CurrentMemoryContext);
		/* a node that left the ring keeps rows a later copy would bring back */
		if (placement_is_moving(&placement) && !placement_moves_in_placement(&placement))
			placement_refuse_while_moving(&placement, "TRUNCATE");
		nnodes = placement_node_count(&placement);
		conns = palloc(sizeof(RemoteConnection *) * Max(nnodes, 1));
		all = palloc(sizeof(bool) * Max(nnodes, 1));
		for (int i = 0; i < nnodes; i++)
			all[i] = true;
		queued = queued_targets(&placement, all, &nqueued);
		if (nqueued > 0)
			check_copies_reached(&placement, queued, NULL, NULL, 0, "TRUNCATE", rel);
		n = 0;
		for (int i = 0; i < nnodes; i++)
			if (!queued[i])
				conns[n++] = remote_connection(placement_node_name(&placement, i), GetUserId());
		sql = rsfdw_truncate_sql(RelationGetRelid(rel), behavior == DROP_CASCADE);
		run_on_connections(conns, n, sql, "TRUNCATE TABLE", "TRUNCATE");
		/* writes queued for the table would bring rows back; a node that is down empties its copy in turn */
		queue_forget_table(RelationGetRelid(rel));
		for (int i = 0; i < nnodes; i++)
			if (queued[i])
				queue_statement(placement_node_name(&placement, i), RelationGetRelid(rel), GetUserId(), sql);
	}
}

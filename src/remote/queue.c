/*
 * queue.c
 *		Queued writes and their replay (see queue.h).
 *
 * A replay runs in the caller's transaction (the watchdog's round): each
 * write is inserted on the node inside a remote savepoint and deleted from
 * the queue here, and the node's part commits with ours in two phases, so
 * a write is delivered exactly once without any record on the node.  A
 * write the node refuses for an SQL reason stays queued with its error;
 * after ringshard.replay_max_attempts refusals it moves to
 * ringshard.dead_letters, and the other writes go on.
 */
#include "postgres.h"

#include "access/hash.h"
#include "access/xact.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/lock.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/syscache.h"

#include "fdw/deparse.h"
#include "remote/catalog.h"
#include "remote/connection.h"
#include "remote/queue.h"
#include "remote/transaction.h"
#include "remote/values.h"

/*
 * The node's queue lock: a heavyweight advisory lock on (database, "RN",
 * hashtext(node)), the lock pg_advisory_xact_lock(21070, hashtext(node))
 * takes.  Every transaction that queues a write for a node holds it shared
 * to its end; the watchdog's hand-over (watchdog_tick) takes it exclusive,
 * so when it has delivered what is queued no write is still on its way to
 * the queue, and it can mark the node up (docs/design.md, "A node that
 * returns").  Waiting writers queue behind the hand-over, which lasts as
 * long as delivering a batch.
 */
#define NODE_QUEUE_LOCK_CLASS 0x524E	/* "RN" */

static void
lock_node_queue(const char *node)
{
	LOCKTAG		tag;

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, NODE_QUEUE_LOCK_CLASS,
						 (uint32) DatumGetInt32(hash_any((const unsigned char *) node, strlen(node))), 2);
	(void) LockAcquire(&tag, ShareLock, false, false);
}

bool
queue_node_up_now(const char *node)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		values[1];
	int			nrows;
	char	  **up;

	lock_node_queue(node);
	values[0] = CStringGetTextDatum(node);
	/*
	 * FOR SHARE reads the row as last committed, also under REPEATABLE READ,
	 * where a change since the snapshot is a serialization failure (40001)
	 * rather than an old answer.
	 */
	up = owner_catalog_query("SELECT is_up FROM ringshard.nodes WHERE node_name OPERATOR(pg_catalog.=) $1 FOR SHARE",
							 1, argtypes, values, false, &nrows);
	return nrows == 1 && up[0] != NULL && strcmp(up[0], "t") == 0;
}

/* Queue a row (payload) or a statement for a node. */
static void
queue_insert(const char *node, Oid relid, Oid writer, Datum payload, const char *statement)
{
	Oid			argtypes[5] = {TEXTOID, OIDOID, OIDOID, TEXTOID, TEXTOID};
	Datum		values[5];
	char		nulls[5] = {' ', ' ', ' ', ' ', ' '};
	int			nrows;
	char	  **up;

	lock_node_queue(node);
	values[0] = CStringGetTextDatum(node);
	values[1] = ObjectIdGetDatum(relid);
	values[2] = ObjectIdGetDatum(writer);
	values[3] = payload;
	values[4] = statement ? CStringGetTextDatum(statement) : (Datum) 0;
	nulls[3] = statement ? 'n' : ' ';
	nulls[4] = statement ? ' ' : 'n';
	(void) owner_catalog_query_nulls("INSERT INTO ringshard.write_queue (write_id, node_name, table_name, writer, payload, statement) "
									 "VALUES (pg_catalog.gen_random_uuid(), $1, $2, $3, $4::pg_catalog.json, $5)",
									 5, argtypes, values, nulls, false, &nrows);

	/* The node misses rows now: nobody reads from it until its queue is delivered. */
	up = owner_catalog_query("SELECT is_up FROM ringshard.nodes WHERE node_name OPERATOR(pg_catalog.=) $1",
							 1, argtypes, values, false, &nrows);
	if (nrows == 1 && up[0] && strcmp(up[0], "t") == 0)
	{
		(void) owner_catalog_query("UPDATE ringshard.nodes SET is_up = false "
								   "WHERE node_name OPERATOR(pg_catalog.=) $1 AND is_up RETURNING node_name",
								   1, argtypes, values, false, &nrows);
		/* (in the writer's transaction: the mark holds only if it commits) */
		if (nrows == 1)
			ereport(LOG,
					(errmsg("ringshard: node \"%s\" is marked down: a write of table \"%s\" is queued for it",
							node, get_rel_name(relid)),
					 errdetail("The mark and the queued write take effect if the writing transaction commits.")));
	}
}

void
queue_write(const char *node, Oid relid, Oid writer, Datum row)
{
	Datum		payload;

	/*
	 * The row as JSON, printed under the pinned settings (remote/values.h):
	 * the node, whose session pins the same, reads back exactly these values
	 * when the write is replayed.
	 */
	{
		int			level = remote_transmission_begin(true);

		payload = DirectFunctionCall1(row_to_json, row);
		remote_transmission_end(level);
	}
	queue_insert(node, relid, writer, payload, NULL);
}

void
queue_statement(const char *node, Oid relid, Oid writer, const char *sql)
{
	queue_insert(node, relid, writer, (Datum) 0, sql);
}

void
queue_forget_table(Oid relid)
{
	Oid			argtypes[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	int			nrows;

	(void) owner_catalog_query("DELETE FROM ringshard.write_queue WHERE table_name OPERATOR(pg_catalog.=) $1",
							   1, argtypes, values, false, &nrows);
}

/* One queued write, as read from the queue. */
typedef struct QueuedWrite
{
	char	   *write_id;
	Oid			relid;
	Oid			writer;
	bool		is_statement;	/* else a row */
	bool		held;			/* the node refused it in this call, or it waits behind one that was */
	char	   *payload;		/* the row as JSON, or the statement */
	char	   *row_key;		/* md5 of a row's key (and keyspace) as its JSON gives them */
	int			attempts;
} QueuedWrite;

/*
 * Whether a queued write must wait behind an earlier one of the same call
 * that the node refused, or that waits behind such a one (so that nothing
 * overtakes a write it may depend on, through a chain): a statement (UPDATE, DELETE, TRUNCATE) may touch
 * any row of its table, so it waits behind any refused write of the table,
 * and every write of the table waits behind a refused statement; a row
 * waits behind a refused row of its table with the same key, or written by
 * the same role (whose later writes may build on the refused one).  Another
 * role's rows of other keys go on: one role's refused write does not hold
 * back everyone else's.
 */
static bool
waits_behind(const QueuedWrite *later, const QueuedWrite *refused)
{
	if (!refused->held || refused->relid != later->relid)
		return false;
	if (refused->is_statement || later->is_statement || refused->writer == later->writer)
		return true;
	return strcmp(refused->row_key, later->row_key) == 0;
}

/* Run a catalog statement about one queued write (its id is $1). */
static void
queue_update(const char *sql, const char *write_id, const char *node, const char *text)
{
	Oid			argtypes[3] = {UUIDOID, TEXTOID, TEXTOID};
	Datum		values[3];
	int			nrows;

	values[0] = DirectFunctionCall1(uuid_in, CStringGetDatum(write_id));
	values[1] = CStringGetTextDatum(node);
	values[2] = CStringGetTextDatum(text ? text : "");
	(void) owner_catalog_query(sql, 3, argtypes, values, false, &nrows);
}

/*
 * Whether a node answers the role replaying the queue, when the writer of a
 * queued write could not connect to it: if it does, the failure is the
 * writer's own (a changed password, a dropped mapping) and counts as a
 * refusal of that write, which ends in dead_letters, instead of holding back
 * every other role's writes to the node.
 */
static bool
node_answers(const char *node, Oid writer)
{
	MemoryContext old = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	volatile bool answers = false;

	if (writer == GetUserId())
		return false;
	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(old);
	PG_TRY();
	{
		RemoteConnection *probe = remote_connection(node, GetUserId());

		remote_connect_all(&probe, 1, false);
		answers = probe->link == LINK_IDLE;
		ReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		ErrorData  *edata = remote_rollback_subtransaction(old);

		CurrentResourceOwner = owner;
		remote_rethrow_cancel(edata);
	}
	PG_END_TRY();
	MemoryContextSwitchTo(old);
	CurrentResourceOwner = owner;
	return answers;
}

/*
 * SET LOCAL lock_timeout on a node's link, in the replay's transaction
 * there: timeout_ms, or the node session's own value when it is negative.
 */
static void
set_node_lock_timeout(RemoteConnection *c, int timeout_ms)
{
	char	   *sql = timeout_ms < 0 ? "SET LOCAL lock_timeout = DEFAULT"
		: psprintf("SET LOCAL lock_timeout = %d", timeout_ms);
	PGresult   *res = remote_exec_timed(c, sql, true, ringshard_node_timeout_ms);

	remote_expect_command(c, res, "SET", -1, "the delivery of a queued write");
	remote_result_free(res);
}

PG_FUNCTION_INFO_V1(ringshard_replay_queue);

/*
 * replay_queue(node, batch): deliver up to batch queued writes to a node,
 * oldest first, each as the role that made it.  Returns how many were
 * delivered.
 */
Datum
ringshard_replay_queue(PG_FUNCTION_ARGS)
{
	char	   *node = text_to_cstring(PG_GETARG_TEXT_PP(0));
	int32		batch = PG_GETARG_INT32(1);
	Oid			argtypes[2] = {TEXTOID, INT4OID};
	Datum		values[2];
	int			nrows;
	char	  **rows;
	QueuedWrite *writes;
	int			delivered = 0;

	if (batch < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("batch must be at least 1")));
	(void) remote_node_server(node);	/* the node exists and has an address */

	/* oldest first; a write another session is replaying is skipped */
	values[0] = CStringGetTextDatum(node);
	values[1] = Int32GetDatum(batch);
	rows = owner_catalog_query("SELECT pg_catalog.concat_ws(E'\\x1f', q.write_id, q.table_name::pg_catalog.oid, "
							   "q.writer::pg_catalog.oid, q.attempts, "
							   "CASE WHEN q.statement IS NULL THEN 'r' ELSE 's' END, "
							   "pg_catalog.md5(pg_catalog.concat_ws(E'\\x1e', q.payload OPERATOR(pg_catalog.->>) d.key_column::pg_catalog.text, "
							   "q.payload OPERATOR(pg_catalog.->>) d.keyspace_column::pg_catalog.text)), "
							   "COALESCE(q.statement, q.payload::pg_catalog.text)) "
							   "FROM ringshard.write_queue q LEFT JOIN ringshard.distributed_tables d "
							   "ON d.table_name OPERATOR(pg_catalog.=) q.table_name "
							   "WHERE q.node_name OPERATOR(pg_catalog.=) $1 "
							   "ORDER BY q.ordinal LIMIT $2 FOR UPDATE OF q SKIP LOCKED",
							   2, argtypes, values, false, &nrows);
	writes = palloc0(sizeof(QueuedWrite) * Max(nrows, 1));
	for (int i = 0; i < nrows; i++)
	{
		char	   *fields[7];
		char	   *p = rows[i];

		/* the last field, a statement, may hold the separator itself */
		for (int f = 0; f < 7; f++)
		{
			fields[f] = p;
			p = f < 6 ? strchr(p, '\x1f') : NULL;
			if (f < 6)
			{
				if (p == NULL)
					elog(ERROR, "ringshard: malformed write queue row");
				*p++ = '\0';
			}
		}
		writes[i].write_id = fields[0];
		writes[i].relid = (Oid) strtoul(fields[1], NULL, 10);
		writes[i].writer = (Oid) strtoul(fields[2], NULL, 10);
		writes[i].attempts = atoi(fields[3]);
		writes[i].is_statement = fields[4][0] == 's';
		writes[i].row_key = fields[5];
		writes[i].payload = fields[6];
	}

	for (int i = 0; i < nrows; i++)
	{
		QueuedWrite *w = &writes[i];
		MemoryContext old = CurrentMemoryContext;
		bool		behind_refused = false;
		ResourceOwner owner = CurrentResourceOwner;
		RemoteConnection *volatile c = NULL;	/* set in PG_TRY, read in PG_CATCH */
		bool		lost = false;
		bool		busy = false;
		volatile bool in_write = false; /* the write itself on the node, not the SETs around a statement */
		char	   *error = NULL;

		/*
		 * A later write that may depend on an earlier one the node refused
		 * waits behind it (waits_behind).  Once that one is set aside as a
		 * dead letter, the node stays down until repaired, and the others
		 * go on.
		 */
		for (int j = 0; j < i && !behind_refused; j++)
			behind_refused = waits_behind(w, &writes[j]);
		if (behind_refused)
		{
			/* what may depend on it waits too: a later row behind a held DELETE */
			w->held = true;
			continue;
		}
		if (get_rel_name(w->relid) == NULL)
		{
			ereport(WARNING,
					(errmsg("dropping queued write %s for node \"%s\": its table (oid %u) no longer exists",
							w->write_id, node, w->relid)));
			queue_update("DELETE FROM ringshard.write_queue WHERE write_id OPERATOR(pg_catalog.=) $1 "
						 "AND node_name OPERATOR(pg_catalog.=) $2", w->write_id, node, NULL);
			continue;
		}
		if (!SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(w->writer)))
			error = pstrdup("the role that made the write no longer exists");
		else
		{
			/* each write in a subtransaction: a refusal rolls back only its own remote savepoint */
			BeginInternalSubTransaction(NULL);
			MemoryContextSwitchTo(old);
			PG_TRY();
			{
				char	   *table = rsfdw_relation_name(w->relid);
				char	   *sql;
				RemoteConnection *link;

				/*
				 * A row is one string, one round trip: its INSERT, checked on
				 * the node (exactly one row stored), with each of its lock
				 * waits there (a unique key another session holds) bounded
				 * by ringshard.node_timeout, as a statement's are below, and
				 * the node session's own lock_timeout again after it (a
				 * failed row takes its SET back with its savepoint).
				 */
				if (w->is_statement)
					sql = w->payload;
				else
					sql = psprintf("SET LOCAL lock_timeout = %3$d; "
								   "WITH rs_stored AS (INSERT INTO %1$s SELECT * FROM "
								   "pg_catalog.json_populate_record(NULL::%1$s, %2$s::pg_catalog.json) RETURNING 1) "
								   "SELECT ringshard_worker.expect_stored_rows(pg_catalog.count(*), 1) FROM rs_stored; "
								   "SET LOCAL lock_timeout = DEFAULT",
								   table, quote_literal_cstr(w->payload), ringshard_node_timeout_ms);
				link = remote_connection(node, w->writer);

				c = link;
				remote_connect_all(&link, 1, false);
				remote_note_write(link);
				if (w->is_statement)
				{
					/*
					 * A statement may run as long as it needs, but each of
					 * its lock waits on the node lasts at most
					 * ringshard.node_timeout (the node's lock_timeout, for
					 * this write only): a lock held there (a session left
					 * idle in a transaction, a part recovery cannot finish)
					 * would otherwise hold up the whole round, every node's
					 * deliveries with it, until the round's limit cancels it.
					 */
					set_node_lock_timeout(link, ringshard_node_timeout_ms);
				}
				{
					/*
					 * A row is one INSERT: twice ringshard.node_timeout in
					 * all (its lock waits end first, with the node's 55P03);
					 * a statement may take its own time.
					 */
					PGresult   *res;
					RemoteResult out;

					in_write = true;
					remote_send(link, sql, true, link);
					/* a row's count is an answer, not a row read (stat_nodes): written once checked, below */
					if (!w->is_statement)
						remote_answer_counts_writes(link);
					remote_receive_all(&link, 1, &out, w->is_statement ? 0 : 2 * ringshard_node_timeout_ms);
					res = remote_answer(link, &out, sql, NULL);
					in_write = false;

					/* a row's string answers last for its SET (the INSERT's count is checked on the node) */
					remote_expect_command(link, res, w->is_statement ? NULL : "SET", -1, "the delivery of a queued write");
					remote_result_free(res);
					if (!w->is_statement)
						remote_count_rows_written(link, 1);
				}
				if (w->is_statement)
					set_node_lock_timeout(link, -1);	/* the rest of the node's transaction as it was */
				queue_update("DELETE FROM ringshard.write_queue WHERE write_id OPERATOR(pg_catalog.=) $1 "
							 "AND node_name OPERATOR(pg_catalog.=) $2", w->write_id, node, NULL);
				ReleaseCurrentSubTransaction();
				MemoryContextSwitchTo(old);
				CurrentResourceOwner = owner;
				delivered++;
			}
			PG_CATCH();
			{
				ErrorData  *edata;

				edata = remote_rollback_subtransaction(old);
				MemoryContextSwitchTo(old);
				CurrentResourceOwner = owner;
				remote_rethrow_cancel(edata);
				error = edata->message;
				busy = in_write && edata->sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE;
				lost = edata->sqlerrcode == ERRCODE_CONNECTION_FAILURE ||
					edata->sqlerrcode == ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION ||
					(c != NULL && c->link == LINK_BROKEN);
			}
			PG_END_TRY();
		}
		if (error == NULL)
			continue;
		if (busy)
		{
			/*
			 * No refusal: its rows are held on the node; it and the writes
			 * after it wait for the next call.  Its error is kept (not
			 * counted): write_queue_status shows why the node waits, and
			 * the watchdog does not hand the node over while it is there
			 * (the hand-over, holding the node's queue lock against every
			 * writer, would wait on the same lock again).
			 */
			queue_update("UPDATE ringshard.write_queue SET last_error = $3 "
						 "WHERE write_id OPERATOR(pg_catalog.=) $1 AND node_name OPERATOR(pg_catalog.=) $2",
						 w->write_id, node, error);
			ereport(LOG,
					(errmsg("ringshard: queued write %s for node \"%s\" waits for the next round: %s",
							w->write_id, node, error)));
			break;
		}
		if (lost && node_answers(node, w->writer))
			lost = false;		/* the node is up; it is this writer's connection that fails */
		if (lost)
			break;				/* the node is down: its writes wait, in order */
		/* refused: count it; set it aside once it has been refused often enough */
		w->held = true;
		if (w->attempts + 1 >= ringshard_replay_max_attempts)
		{
			queue_update("WITH gone AS (DELETE FROM ringshard.write_queue WHERE write_id OPERATOR(pg_catalog.=) $1 "
						 "AND node_name OPERATOR(pg_catalog.=) $2 RETURNING *) "
						 "INSERT INTO ringshard.dead_letters (write_id, node_name, table_name, writer, payload, "
						 "queued_at, attempts, reason, statement) "
						 "SELECT write_id, node_name, table_name, writer, payload, queued_at, attempts OPERATOR(pg_catalog.+) 1, $3, "
						 "statement FROM gone",
						 w->write_id, node, error);
			ereport(WARNING,
					(errcode(ERRCODE_DATA_EXCEPTION),
					 errmsg("queued write %s for node \"%s\" was refused %d times and is set aside in ringshard.dead_letters",
							w->write_id, node, w->attempts + 1),
					 errdetail("Last refusal: %s", error)));
		}
		else
			queue_update("UPDATE ringshard.write_queue SET attempts = attempts OPERATOR(pg_catalog.+) 1, last_error = $3 "
						 "WHERE write_id OPERATOR(pg_catalog.=) $1 AND node_name OPERATOR(pg_catalog.=) $2",
						 w->write_id, node, error);
	}
	PG_RETURN_INT32(delivered);
}

/*
 * cluster.c
 *		Coordinator-side connections to worker nodes (see cluster.h).
 *
 * Every remote call goes through libpq's asynchronous API so that a dead or
 * hung node costs at most ringshard.node_timeout and nodes work in parallel.
 * Writes run in a remote transaction opened on first use and committed in
 * the local transaction's pre-commit phase (as postgres_fdw does), so a
 * failed local transaction leaves nothing on the workers.
 */
#include "postgres.h"

#include <poll.h>

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "commands/dbcommands.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "portability/instr_time.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "cluster.h"

int			ringshard_node_timeout_ms = 5000;
int			ringshard_write_quorum = 1;

static NodeConnection *connections;

/* Milliseconds since a start time. */
static double
elapsed_since(instr_time start)
{
	instr_time	now;

	INSTR_TIME_SET_CURRENT(now);
	INSTR_TIME_SUBTRACT(now, start);
	return INSTR_TIME_GET_MILLISEC(now);
}

/* Remember a node's last error, replacing (and freeing) the previous one. */
static void
set_last_error(NodeConnection *c, const char *error)
{
	if (c->last_error)
		pfree(c->last_error);
	c->last_error = MemoryContextStrdup(TopMemoryContext, error);
}

/* Close a connection and forget any remote transaction on it. */
void
cluster_disconnect(NodeConnection *connection)
{
	if (connection->conn)
		PQfinish(connection->conn);
	connection->conn = NULL;
	/*
	 * A remote transaction dies with its connection; routed writes sent in it
	 * are queued at commit (transaction_failed), so keep in_transaction.
	 */
	if (connection->in_transaction)
		connection->transaction_failed = true;
}

/* Send one command and wait for it, bounded by the node timeout. */
static bool
run_command(NodeConnection *connection, const char *sql)
{
	NodeResult	result = {connection, NULL, NULL, 0};

	/* A failure is recorded in connection->last_error by cluster_query_all. */
	cluster_query_all(1, &result, sql, 0, NULL, REMOTE_AUTOCOMMIT);
	if (result.result == NULL)
		return false;
	PQclear(result.result);
	return true;
}

/*
 * Queue a node's routed writes of this transaction: they certainly did not
 * land (its remote transaction failed) or may not have (it did not confirm
 * the commit).  Replay is idempotent, so none lands twice.
 */
static void
queue_pending_writes(NodeConnection *c, const char *why)
{
	ListCell   *lc;
	bool		pushed = false;

	if (c->pending_writes == NIL)
		return;
	if (!ActiveSnapshotSet())
	{
		PushActiveSnapshot(GetTransactionSnapshot());
		pushed = true;
	}
	foreach(lc, c->pending_writes)
	{
		PendingWrite *w = lfirst(lc);

		cluster_enqueue_write(c->node, w->relid, w->json, w->write_id);
	}
	if (pushed)
		PopActiveSnapshot();
	ereport(WARNING,
			(errcode(ERRCODE_CONNECTION_FAILURE),
			 errmsg("node \"%s\" %s; %d writes are queued for it", c->node, why,
					list_length(c->pending_writes)),
			 errdetail("%s", c->last_error ? c->last_error : "no detail")));
}

/* COMMIT on a node; true only if the server says it committed. */
static bool
commit_remote(NodeConnection *c)
{
	NodeResult	result = {c, NULL, NULL, 0};
	bool		committed;

	cluster_query_all(1, &result, "COMMIT", 0, NULL, REMOTE_AUTOCOMMIT);
	if (result.result == NULL)
		return false;
	/* A failed remote transaction answers COMMIT with ROLLBACK, not an error. */
	committed = strcmp(PQcmdStatus(result.result), "COMMIT") == 0;
	if (!committed)
		set_last_error(c, "the remote transaction rolled back");
	PQclear(result.result);
	return committed;
}

/* Finish every remote transaction with the local one. */
static void
cluster_xact_callback(XactEvent event, void *arg)
{
	for (NodeConnection *c = connections; c; c = c->next)
	{
		if (c->in_transaction && event == XACT_EVENT_PRE_PREPARE)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot prepare a transaction that has written to ringshard node \"%s\"", c->node)));
		if (c->in_transaction &&
			(event == XACT_EVENT_PRE_COMMIT || event == XACT_EVENT_PARALLEL_PRE_COMMIT))
		{
			bool		failed_before = c->transaction_failed;

			c->in_transaction = false;
			if (failed_before || !commit_remote(c))
			{
				if (failed_before && c->conn)
					(void) run_command(c, "ROLLBACK");
				else
					cluster_disconnect(c);
				if (c->other_statements)
					ereport(ERROR,
							(errcode(ERRCODE_CONNECTION_FAILURE),
							 errmsg("could not commit on node \"%s\"", c->node),
							 errdetail("%s", c->last_error ? c->last_error : "no detail"),
							 errhint("Nodes committed before this one keep their changes; check with ringshard.node_health().")));
				queue_pending_writes(c, failed_before ? "lost its transaction" : "did not confirm its commit");
			}
		}
		else if (c->in_transaction && (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT))
		{
			c->in_transaction = false;
			/* A connection that cannot roll back is closed: the server aborts it. */
			if (c->conn && (PQtransactionStatus(c->conn) == PQTRANS_ACTIVE ||
							!run_command(c, "ROLLBACK")))
				cluster_disconnect(c);
		}
		if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
			event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_PARALLEL_ABORT)
		{
			/* The list lived in TopTransactionContext, which goes now. */
			c->pending_writes = NIL;
			c->other_statements = false;
			c->transaction_failed = false;
			c->xact_depth = 0;
		}
	}
}

/*
 * Follow the local subtransactions: release a remote savepoint when ours
 * commits, roll back to it when ours aborts, and forget the writes made
 * under it (their queue rows are rolled back locally with it).
 */
static void
cluster_subxact_callback(SubXactEvent event, SubTransactionId my_subid,
						 SubTransactionId parent_subid, void *arg)
{
	int			level = GetCurrentTransactionNestLevel();

	if (event != SUBXACT_EVENT_PRE_COMMIT_SUB && event != SUBXACT_EVENT_ABORT_SUB)
		return;
	for (NodeConnection *c = connections; c; c = c->next)
	{
		/* Writes of a released savepoint now belong to its parent. */
		if (event == SUBXACT_EVENT_PRE_COMMIT_SUB)
		{
			ListCell   *lc;

			foreach(lc, c->pending_writes)
			{
				PendingWrite *w = lfirst(lc);

				if (w->level >= level)
					w->level = level - 1;
			}
		}
		if (!c->in_transaction || c->xact_depth < level)
			continue;
		if (event == SUBXACT_EVENT_PRE_COMMIT_SUB)
		{
			if (c->conn && !c->transaction_failed &&
				!run_command(c, psprintf("RELEASE SAVEPOINT ringshard_%d", level)))
				c->transaction_failed = true;
		}
		else
		{
			ListCell   *lc;
			List	   *kept = NIL;

			if (c->conn && run_command(c, psprintf("ROLLBACK TO SAVEPOINT ringshard_%d; RELEASE SAVEPOINT ringshard_%d",
													level, level)))
				c->transaction_failed = false;
			else
				c->transaction_failed = true;
			foreach(lc, c->pending_writes)
			{
				PendingWrite *w = lfirst(lc);

				if (w->level < level)
					kept = lappend(kept, w);
			}
			c->pending_writes = kept;
		}
		c->xact_depth = level - 1;
	}
}

/* Register the GUC and the transaction callbacks; called from _PG_init. */
void
cluster_init(void)
{
	DefineCustomIntVariable("ringshard.node_timeout",
							"Milliseconds a worker node may take to connect or to answer.",
							"A node that takes longer is cancelled and counted as failed.",
							&ringshard_node_timeout_ms, 5000, 10, 3600 * 1000,
							PGC_USERSET, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("ringshard.write_quorum",
							"Replicas that must take a routed write for it to succeed.",
							"The others get it queued in ringshard.write_queue and replayed when they return.",
							&ringshard_write_quorum, 1, 1, 64,
							PGC_USERSET, 0, NULL, NULL, NULL);
	RegisterXactCallback(cluster_xact_callback, NULL);
	RegisterSubXactCallback(cluster_subxact_callback, NULL);
}

/* The owner of the ringshard catalog, whose rights read node addresses. */
static Oid
catalog_owner(void)
{
	Oid			schema = get_namespace_oid("ringshard", false);
	Oid			relid = get_relname_relid("nodes", schema);
	HeapTuple	tuple;
	Oid			owner;

	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for relation %u", relid);
	owner = ((Form_pg_class) GETSTRUCT(tuple))->relowner;
	ReleaseSysCache(tuple);
	return owner;
}

/* The libpq connection string of a node, from its catalog address; ERROR if none. */
/*
 * Run one catalog statement with the catalog owner's rights and return the
 * first column of its rows as strings (NULL for a null), in the transaction's
 * memory.  Node addresses and the write queue are the administrators', yet
 * any user's routed write needs them, as a security definer function would.
 */
static char **
owner_catalog_query(const char *sql, int nargs, Oid *argtypes, Datum *values,
					bool read_only, int *nrows)
{
	Oid			saved_user;
	int			saved_context;
	char	  **rows = NULL;

	*nrows = 0;
	GetUserIdAndSecContext(&saved_user, &saved_context);
	SetUserIdAndSecContext(catalog_owner(), saved_context | SECURITY_LOCAL_USERID_CHANGE);
	PG_TRY();
	{
		int			rc;

		SPI_connect();
		rc = SPI_execute_with_args(sql, nargs, argtypes, values, NULL, read_only, 0);
		if (rc < 0)
			elog(ERROR, "ringshard catalog statement failed: %s", sql);
		if (SPI_tuptable != NULL)
		{
			*nrows = (int) SPI_processed;
			rows = MemoryContextAlloc(TopTransactionContext, sizeof(char *) * Max(*nrows, 1));
			for (int i = 0; i < *nrows; i++)
			{
				char	   *value = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);

				rows[i] = value ? MemoryContextStrdup(TopTransactionContext, value) : NULL;
			}
		}
		SPI_finish();
	}
	PG_FINALLY();
	{
		SetUserIdAndSecContext(saved_user, saved_context);
	}
	PG_END_TRY();
	return rows;
}

char *
cluster_node_conninfo(const char *node)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(node)};
	int			nrows;
	char	  **rows = owner_catalog_query("SELECT address FROM ringshard.nodes "
										   "WHERE node_name OPERATOR(pg_catalog.=) $1",
										   1, argtypes, values, true, &nrows);
	bool		node_exists = nrows == 1;
	char	   *address = node_exists ? rows[0] : NULL;
	char	   *conninfo;

	if (!node_exists)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("node \"%s\" does not exist", node),
				 errhint("List nodes in ringshard.nodes.")));
	if (address == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("node \"%s\" has no address", node),
				 errhint("Give it one with ringshard.set_node_address(node, 'host:port') or a libpq connection string.")));

	/* host:port is shorthand; the database is the coordinator's own by default. */
	if (strchr(address, '=') == NULL && strstr(address, "://") == NULL)
	{
		char	   *colon = strrchr(address, ':');

		if (colon)
			conninfo = psprintf("host=%.*s port=%s", (int) (colon - address), address, colon + 1);
		else
			conninfo = psprintf("host=%s", address);
	}
	else
		conninfo = pstrdup(address);
	return conninfo;
}

/*
 * Queue a write for a node that missed it, in the current transaction.  The
 * queue is the administrators'; any user whose insert was routed may add
 * to it, so the row is written with the catalog owner's rights.
 */
void
cluster_enqueue_write(const char *node, Oid relid, const char *json, int64 write_id)
{
	Oid			argtypes[4] = {TEXTOID, OIDOID, TEXTOID, INT8OID};
	Datum		values[4];
	int			nrows;

	values[0] = CStringGetTextDatum(node);
	values[1] = ObjectIdGetDatum(relid);
	values[2] = CStringGetTextDatum(json);
	values[3] = Int64GetDatum(write_id);
	(void) owner_catalog_query("INSERT INTO ringshard.write_queue (id, node_name, table_name, payload) "
							   "VALUES ($4, $1, $2, $3::pg_catalog.json) ON CONFLICT DO NOTHING",
							   4, argtypes, values, false, &nrows);
}

/* The first value of a catalog query run with the owner's rights; ERROR if none. */
static char *
owner_query_value(const char *sql)
{
	int			nrows;
	char	  **rows = owner_catalog_query(sql, 0, NULL, NULL, false, &nrows);

	if (nrows != 1 || rows[0] == NULL)
		elog(ERROR, "ringshard catalog query returned no value: %s", sql);
	return rows[0];
}

/* Every node with an address, in name order (read with the owner's rights). */
char	  **
cluster_addressed_nodes(int *count)
{
	return owner_catalog_query("SELECT node_name FROM ringshard.nodes WHERE address IS NOT NULL "
							   "ORDER BY node_name COLLATE pg_catalog.\"C\"", 0, NULL, NULL, true, count);
}

/* A new routed write's id, shared by all its replicas. */
int64
cluster_next_write_id(void)
{
	return strtoll(owner_query_value("SELECT pg_catalog.nextval('ringshard.write_queue_id_seq')"), NULL, 10);
}

/* This coordinator's id, which workers use to recognise a repeated delivery. */
char *
cluster_coordinator_id(void)
{
	return owner_query_value("SELECT coordinator_id FROM ringshard.cluster_state");
}

/* The session's connection entry for a node, created if new. */
static NodeConnection *
connection_for(const char *node)
{
	NodeConnection *c;
	char	   *conninfo = cluster_node_conninfo(node);

	/*
	 * A connection logs in as the role that opened it: one per node and
	 * role, so that a later call under another role (SET ROLE, a security
	 * definer function) never runs with the first one's rights.
	 */
	for (c = connections; c; c = c->next)
		if (strcmp(c->node, node) == 0 && c->user == GetUserId())
			break;
	if (c == NULL)
	{
		c = MemoryContextAllocZero(TopMemoryContext, sizeof(NodeConnection));
		c->node = MemoryContextStrdup(TopMemoryContext, node);
		c->user = GetUserId();
		c->next = connections;
		connections = c;
	}
	/* A changed address means a new connection. */
	if (c->conninfo == NULL || strcmp(c->conninfo, conninfo) != 0)
	{
		cluster_disconnect(c);
		if (c->conninfo)
			pfree(c->conninfo);
		c->conninfo = MemoryContextStrdup(TopMemoryContext, conninfo);
	}
	return c;
}

/*
 * Start a non-blocking connection: the coordinator's database and user and
 * the node timeout are defaults that the address's own settings override.
 */
static PGconn *
start_connection(const char *conninfo, const char *dbname, const char *user, const char *timeout)
{
	PQconninfoOption *options = PQconninfoParse(conninfo, NULL);
	const char *keywords[64];
	const char *values[64];
	int			n = 0;
	PGconn	   *conn;

	keywords[n] = "dbname";
	values[n++] = dbname;
	keywords[n] = "user";
	values[n++] = user;
	keywords[n] = "connect_timeout";
	values[n++] = timeout;
	keywords[n] = "application_name";
	values[n++] = "ringshard coordinator";
	for (PQconninfoOption *o = options; o && o->keyword && n < 63; o++)
		if (o->val != NULL && o->val[0] != '\0')
		{
			keywords[n] = o->keyword;
			values[n++] = o->val;
		}
	keywords[n] = NULL;
	values[n] = NULL;
	conn = PQconnectStartParams(keywords, values, false);
	if (options)
		PQconninfoFree(options);
	return conn;
}

/* Connect to several nodes at once (see cluster.h). */
void
cluster_connect_all(int nnodes, const char *const *nodes, NodeResult *results)
{
	instr_time	start;
	int			pending = 0;
	const char *dbname = get_database_name(MyDatabaseId);
	const char *user = GetUserNameFromId(GetUserId(), false);
	char		timeout[32];

	snprintf(timeout, sizeof(timeout), "%d", Max(1, (ringshard_node_timeout_ms + 999) / 1000));
	INSTR_TIME_SET_CURRENT(start);
	for (int i = 0; i < nnodes; i++)
	{
		NodeConnection *c = connection_for(nodes[i]);
		bool		repeated = false;

		results[i].connection = c;
		results[i].result = NULL;
		results[i].error = NULL;
		/* One connection serves one entry: a node named twice is refused. */
		for (int j = 0; j < i && !repeated; j++)
			repeated = results[j].connection == c;
		if (repeated)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("node \"%s\" is named twice", nodes[i])));
		if (c->conn && PQstatus(c->conn) == CONNECTION_OK)
			continue;
		cluster_disconnect(c);
		c->conn = start_connection(c->conninfo, dbname, user, timeout);
		if (c->conn == NULL || PQstatus(c->conn) == CONNECTION_BAD)
		{
			results[i].error = pstrdup(c->conn ? PQerrorMessage(c->conn) : "out of memory");
			cluster_disconnect(c);
		}
		else
			pending++;
	}

	/* Drive every pending handshake until done or out of time. */
	while (pending > 0)
	{
		struct pollfd *fds = palloc(sizeof(struct pollfd) * nnodes);
		int		   *which = palloc(sizeof(int) * nnodes);
		int			nfds = 0;
		double		left = ringshard_node_timeout_ms - elapsed_since(start);

		for (int i = 0; i < nnodes; i++)
		{
			NodeConnection *c = results[i].connection;
			PostgresPollingStatusType status;

			if (results[i].error || c->conn == NULL || PQstatus(c->conn) == CONNECTION_OK)
				continue;
			status = PQconnectPoll(c->conn);
			if (status == PGRES_POLLING_OK)
			{
				pending--;
				continue;
			}
			if (status == PGRES_POLLING_FAILED || left <= 0)
			{
				results[i].error = pstrdup(status == PGRES_POLLING_FAILED ? PQerrorMessage(c->conn)
										   : "timeout while connecting");
				cluster_disconnect(c);
				pending--;
				continue;
			}
			fds[nfds].fd = PQsocket(c->conn);
			fds[nfds].events = status == PGRES_POLLING_WRITING ? POLLOUT : POLLIN;
			fds[nfds].revents = 0;
			which[nfds++] = i;
		}
		if (nfds > 0)
		{
			CHECK_FOR_INTERRUPTS();
			(void) poll(fds, nfds, (int) Max(1, Min(left, 100)));
		}
		pfree(fds);
		pfree(which);
	}
	for (int i = 0; i < nnodes; i++)
		if (results[i].error)
			set_last_error(results[i].connection, results[i].error);
}

/* Run one query on several connected nodes in parallel (see cluster.h). */
void
cluster_query_all(int nnodes, NodeResult *results, const char *sql,
				  int nparams, const char *const *params, RemoteMode mode)
{
	instr_time	start;
	bool	   *done = palloc0(sizeof(bool) * nnodes);
	int			pending = 0;

	/*
	 * Open the remote transactions first, as deep as ours: BEGIN, then one
	 * savepoint per local subtransaction level, so that a rolled-back
	 * subtransaction rolls back its remote writes too.  They finish with ours.
	 */
	if (mode != REMOTE_AUTOCOMMIT)
	{
		int			level = GetCurrentTransactionNestLevel();

		for (;;)
		{
			NodeResult *opens = palloc0(sizeof(NodeResult) * nnodes);
			int		   *index = palloc(sizeof(int) * nnodes);
			int			nopens = 0;
			int			depth = -1;

			/* One round per depth: every connection at the shallowest depth steps down one level. */
			for (int i = 0; i < nnodes; i++)
			{
				NodeConnection *conn = results[i].connection;
				int			d = conn->in_transaction ? conn->xact_depth : 0;

				if (!results[i].error && conn->conn && !conn->transaction_failed && d < level &&
					(depth < 0 || d < depth))
					depth = d;
			}
			if (depth < 0)
				break;
			for (int i = 0; i < nnodes; i++)
			{
				NodeConnection *conn = results[i].connection;
				int			d = conn->in_transaction ? conn->xact_depth : 0;

				if (!results[i].error && conn->conn && !conn->transaction_failed && d == depth)
				{
					opens[nopens].connection = conn;
					index[nopens++] = i;
				}
			}
			cluster_query_all(nopens, opens, depth == 0 ? "BEGIN" : psprintf("SAVEPOINT ringshard_%d", depth + 1),
							  0, NULL, REMOTE_AUTOCOMMIT);
			for (int b = 0; b < nopens; b++)
			{
				if (opens[b].error)
				{
					results[index[b]].error = opens[b].error;
					if (depth > 0)
						opens[b].connection->transaction_failed = true;
				}
				else
				{
					PQclear(opens[b].result);
					opens[b].connection->in_transaction = true;
					opens[b].connection->xact_depth = depth + 1;
				}
			}
		}
	}

	INSTR_TIME_SET_CURRENT(start);
	for (int i = 0; i < nnodes; i++)
	{
		NodeConnection *c = results[i].connection;
		bool		sent;

		if (results[i].error || c->conn == NULL)
		{
			if (!results[i].error)
				results[i].error = pstrdup("not connected");
			done[i] = true;
			continue;
		}
		/* A node whose remote transaction broke takes no more of this one. */
		if (mode != REMOTE_AUTOCOMMIT && c->transaction_failed)
		{
			results[i].error = pstrdup("its remote transaction failed earlier in this transaction");
			done[i] = true;
			continue;
		}
		if (mode == REMOTE_TRANSACTION)
			c->other_statements = true;
		sent = nparams > 0
			? PQsendQueryParams(c->conn, sql, nparams, NULL, params, NULL, NULL, 0)
			: PQsendQuery(c->conn, sql);
		if (!sent)
		{
			results[i].error = pstrdup(PQerrorMessage(c->conn));
			cluster_disconnect(c);
			done[i] = true;
			continue;
		}
		pending++;
	}

	while (pending > 0)
	{
		struct pollfd *fds = palloc(sizeof(struct pollfd) * nnodes);
		int			nfds = 0;
		double		left = ringshard_node_timeout_ms - elapsed_since(start);

		for (int i = 0; i < nnodes; i++)
		{
			NodeConnection *c = results[i].connection;

			if (done[i])
				continue;
			if (!PQconsumeInput(c->conn))
			{
				results[i].error = pstrdup(PQerrorMessage(c->conn));
				cluster_disconnect(c);
				done[i] = true;
				pending--;
				continue;
			}
			if (!PQisBusy(c->conn))
			{
				PGresult   *r;
				PGresult   *last = NULL;

				/* Keep the last result; an error anywhere fails the node. */
				while ((r = PQgetResult(c->conn)) != NULL)
				{
					if (PQresultStatus(r) != PGRES_TUPLES_OK && PQresultStatus(r) != PGRES_COMMAND_OK &&
						results[i].error == NULL)
						results[i].error = pstrdup(PQresultErrorMessage(r));
					if (last)
						PQclear(last);
					last = r;
				}
				if (results[i].error)
				{
					PQclear(last);
					if (mode != REMOTE_AUTOCOMMIT)
						c->transaction_failed = true;
				}
				else
					results[i].result = last;
				results[i].elapsed_ms = elapsed_since(start);
				done[i] = true;
				pending--;
				continue;
			}
			if (left <= 0)
			{
				PGcancel   *cancel = PQgetCancel(c->conn);
				char		errbuf[256];

				if (cancel)
				{
					(void) PQcancel(cancel, errbuf, sizeof(errbuf));
					PQfreeCancel(cancel);
				}
				results[i].error = psprintf("no answer within ringshard.node_timeout (%d ms)",
											ringshard_node_timeout_ms);
				cluster_disconnect(c);
				done[i] = true;
				pending--;
				continue;
			}
			fds[nfds].fd = PQsocket(c->conn);
			fds[nfds].events = POLLIN;
			fds[nfds].revents = 0;
			nfds++;
		}
		if (nfds > 0)
		{
			CHECK_FOR_INTERRUPTS();
			(void) poll(fds, nfds, (int) Max(1, Min(left, 100)));
		}
		pfree(fds);
	}
	for (int i = 0; i < nnodes; i++)
		if (results[i].error)
			set_last_error(results[i].connection, results[i].error);
	pfree(done);
}

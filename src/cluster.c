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
#include "utils/syscache.h"

#include "cluster.h"

int			ringshard_node_timeout_ms = 5000;

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

/* Close a connection and forget any remote transaction on it. */
void
cluster_disconnect(NodeConnection *connection)
{
	if (connection->conn)
		PQfinish(connection->conn);
	connection->conn = NULL;
	connection->in_transaction = false;
}

/* Send one command and wait for it, bounded by the node timeout. */
static bool
run_command(NodeConnection *connection, const char *sql)
{
	NodeResult	result = {connection, NULL, NULL, 0};

	cluster_query_all(1, &result, sql, 0, NULL, false);
	if (result.result == NULL)
	{
		connection->last_error = result.error;
		return false;
	}
	PQclear(result.result);
	return true;
}

/* Finish every remote transaction with the local one. */
static void
cluster_xact_callback(XactEvent event, void *arg)
{
	for (NodeConnection *c = connections; c; c = c->next)
	{
		if (!c->in_transaction)
			continue;
		if (event == XACT_EVENT_PRE_COMMIT || event == XACT_EVENT_PARALLEL_PRE_COMMIT)
		{
			c->in_transaction = false;
			if (!run_command(c, "COMMIT"))
			{
				cluster_disconnect(c);
				ereport(ERROR,
						(errcode(ERRCODE_CONNECTION_FAILURE),
						 errmsg("could not commit on node \"%s\"", c->node),
						 errdetail("%s", c->last_error ? c->last_error : "no detail"),
						 errhint("Nodes committed before this one keep their writes; check with ringshard.node_health().")));
			}
		}
		else if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
		{
			c->in_transaction = false;
			/* A connection that cannot roll back is closed: the server aborts it. */
			if (c->conn && (PQtransactionStatus(c->conn) == PQTRANS_ACTIVE ||
							!run_command(c, "ROLLBACK")))
				cluster_disconnect(c);
		}
	}
}

/* Register the GUC and the transaction callback; called from _PG_init. */
void
cluster_init(void)
{
	DefineCustomIntVariable("ringshard.node_timeout",
							"Milliseconds a worker node may take to connect or to answer.",
							"A node that takes longer is cancelled and counted as failed.",
							&ringshard_node_timeout_ms, 5000, 10, 3600 * 1000,
							PGC_USERSET, GUC_UNIT_MS, NULL, NULL, NULL);
	RegisterXactCallback(cluster_xact_callback, NULL);
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
char *
cluster_node_conninfo(const char *node)
{
	Oid			saved_user;
	int			saved_context;
	Oid			argtypes[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(node)};
	char	   *address = NULL;
	char	   *conninfo;

	/*
	 * Addresses are hidden from PUBLIC, yet any user's routed write needs
	 * them: read them with the catalog owner's rights, like a security
	 * definer function would.
	 */
	GetUserIdAndSecContext(&saved_user, &saved_context);
	SetUserIdAndSecContext(catalog_owner(), saved_context | SECURITY_LOCAL_USERID_CHANGE);
	PG_TRY();
	{
		SPI_connect();
		if (SPI_execute_with_args("SELECT address FROM ringshard.nodes WHERE node_name OPERATOR(pg_catalog.=) $1",
								  1, argtypes, values, NULL, true, 1) == SPI_OK_SELECT &&
			SPI_processed == 1)
		{
			char	   *value = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);

			if (value)
				address = MemoryContextStrdup(TopTransactionContext, value);
		}
		SPI_finish();
	}
	PG_FINALLY();
	{
		SetUserIdAndSecContext(saved_user, saved_context);
	}
	PG_END_TRY();

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

/* The session's connection entry for a node, created if new. */
static NodeConnection *
connection_for(const char *node)
{
	NodeConnection *c;
	char	   *conninfo = cluster_node_conninfo(node);

	for (c = connections; c; c = c->next)
		if (strcmp(c->node, node) == 0)
			break;
	if (c == NULL)
	{
		c = MemoryContextAllocZero(TopMemoryContext, sizeof(NodeConnection));
		c->node = MemoryContextStrdup(TopMemoryContext, node);
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

		results[i].connection = c;
		results[i].result = NULL;
		results[i].error = NULL;
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
			results[i].connection->last_error = MemoryContextStrdup(TopMemoryContext, results[i].error);
}

/* Run one query on several connected nodes in parallel (see cluster.h). */
void
cluster_query_all(int nnodes, NodeResult *results, const char *sql,
				  int nparams, const char *const *params, bool in_transaction)
{
	instr_time	start;
	bool	   *done = palloc0(sizeof(bool) * nnodes);
	int			pending = 0;

	/* Open the remote transactions first; they finish with ours. */
	if (in_transaction)
	{
		NodeResult *begins = palloc0(sizeof(NodeResult) * nnodes);
		int		   *index = palloc(sizeof(int) * nnodes);
		int			nbegins = 0;

		for (int i = 0; i < nnodes; i++)
			if (!results[i].error && results[i].connection->conn && !results[i].connection->in_transaction)
			{
				begins[nbegins].connection = results[i].connection;
				index[nbegins++] = i;
			}
		if (nbegins > 0)
			cluster_query_all(nbegins, begins, "BEGIN", 0, NULL, false);
		for (int b = 0; b < nbegins; b++)
		{
			if (begins[b].error)
				results[index[b]].error = begins[b].error;
			else
			{
				PQclear(begins[b].result);
				begins[b].connection->in_transaction = true;
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
					PQclear(last);
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
			results[i].connection->last_error = MemoryContextStrdup(TopMemoryContext, results[i].error);
	pfree(done);
}

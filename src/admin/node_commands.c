/*
 * node_commands.c
 *		Administration of nodes from SQL: running a statement on several
 *		nodes, probing their health, counting a table's rows per node.  Each
 *		runs as the calling role, with its user mapping.
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "funcapi.h"
#include "access/xact.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

#include "fdw/deparse.h"
#include "remote/catalog.h"
#include "remote/connection.h"
#include "remote/transaction.h"

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
					 errmsg("lists of nodes, statements and parameters must not contain nulls")));
		strings[i] = TextDatumGetCString(values[i]);
	}
	return strings;
}

/* Connection entries of the calling role for some nodes; a node named twice is refused. */
static RemoteConnection **
connections_for(char **nodes, int n)
{
	RemoteConnection **conns = palloc(sizeof(RemoteConnection *) * Max(n, 1));

	for (int i = 0; i < n; i++)
	{
		conns[i] = remote_connection(nodes[i], GetUserId());
		for (int j = 0; j < i; j++)
			if (conns[j] == conns[i])
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("node \"%s\" is named twice", nodes[i])));
	}
	return conns;
}

/*
 * Send one query to each node in parallel (each that connects) and wait for
 * the answers, up to timeout_ms (0: no limit).  Returns the answers, one per
 * node; *conns_out gets the connections, whose errors explain a failed one.
 */
static RemoteResult *
ask_every_node(char **nodes, int nnodes, const char *sql, bool in_transaction,
			   int timeout_ms, RemoteConnection ***conns_out)
{
	RemoteConnection **conns = connections_for(nodes, nnodes);
	RemoteResult *out = palloc0(sizeof(RemoteResult) * Max(nnodes, 1));

	remote_connect_all(conns, nnodes, true);
	for (int i = 0; i < nnodes; i++)
		if (conns[i]->link == LINK_IDLE)
			remote_send(conns[i], sql, in_transaction, conns[i]);
	remote_receive(conns, nnodes, out, 0, timeout_ms);
	*conns_out = conns;
	return out;
}

/* The error text of a failed node. */
static char *
failure_text(RemoteConnection *c, RemoteResult *out)
{
	if (out->result && !out->ok)
	{
		char	   *message = PQresultErrorMessage(out->result);
		int			len = strlen(message);

		while (len > 0 && message[len - 1] == '\n')
			len--;
		return pnstrdup(message, len);
	}
	return pstrdup(c->last_error ? c->last_error : "connection lost");
}

/*
 * Send each node its statement (sqls[i] to nodes[i]; one for all when nsql
 * is 1), all in parallel, wait for every answer and return one row per node:
 * whether it worked, the first value of its first row, its error and its
 * time.  In the transaction, the nodes' parts commit with ours (in two
 * phases); otherwise each runs on its own.
 */
static void
execute_on_nodes(FunctionCallInfo fcinfo, char **nodes, int nnodes, char **sqls, int nsql,
				 char **params, int nparams, bool in_transaction)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	RemoteConnection **conns;
	RemoteResult *out = palloc0(sizeof(RemoteResult) * Max(nnodes, 1));
	instr_time	start;

	InitMaterializedSRF(fcinfo, 0);
	conns = connections_for(nodes, nnodes);
	INSTR_TIME_SET_CURRENT(start);
	remote_connect_all(conns, nnodes, true);
	for (int i = 0; i < nnodes; i++)
	{
		if (conns[i]->link != LINK_IDLE)
			continue;
		if (in_transaction)
			remote_note_write(conns[i]);
		remote_send_params(conns[i], sqls[nsql == 1 ? 0 : i], nparams, (const char *const *) params,
						   in_transaction, conns[i]);
	}
	remote_receive(conns, nnodes, out, 0, 0);
	for (int i = 0; i < nnodes; i++)
	{
		Datum		values[5];
		bool		nulls[5] = {false, false, true, true, false};
		PGresult   *r = out[i].result;
		instr_time	now;

		INSTR_TIME_SET_CURRENT(now);
		INSTR_TIME_SUBTRACT(now, start);
		values[0] = CStringGetTextDatum(nodes[i]);
		values[1] = BoolGetDatum(out[i].ok);
		if (out[i].ok && r && PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0 && PQnfields(r) > 0 &&
			PQfformat(r, 0) == 0 && !PQgetisnull(r, 0, 0))
		{
			values[2] = CStringGetTextDatum(PQgetvalue(r, 0, 0));
			nulls[2] = false;
		}
		if (!out[i].ok)
		{
			values[3] = CStringGetTextDatum(failure_text(conns[i], &out[i]));
			nulls[3] = false;
		}
		/* to a hundredth of a millisecond: a duration to read, not a clock */
		values[4] = Float8GetDatum(rint(INSTR_TIME_GET_MILLISEC(now) * 100.0) / 100.0);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		remote_result_free(r);
	}
}

PG_FUNCTION_INFO_V1(ringshard_node_execute);

/*
 * node_execute(nodes, sql, params, in_transaction): one statement on several
 * nodes in parallel; per node whether it worked, the first value of its
 * first row, its error and its time.
 */
Datum
ringshard_node_execute(PG_FUNCTION_ARGS)
{
	int			nnodes;
	char	  **nodes = text_array_strings(PG_GETARG_ARRAYTYPE_P(0), &nnodes);
	char	   *sql = text_to_cstring(PG_GETARG_TEXT_PP(1));
	int			nparams;
	char	  **params = text_array_strings(PG_GETARG_ARRAYTYPE_P(2), &nparams);

	execute_on_nodes(fcinfo, nodes, nnodes, &sql, 1, params, nparams, PG_GETARG_BOOL(3));
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(ringshard_node_execute_each);

/*
 * node_execute_each(nodes, statements): a statement of its own on each node
 * (the i-th to the i-th), all in parallel, in this transaction (each node's
 * part commits with it in two phases); the rows of node_execute.  A
 * rebalance deletes on every node the rows that left it so, at once.
 */
Datum
ringshard_node_execute_each(PG_FUNCTION_ARGS)
{
	int			nnodes;
	char	  **nodes = text_array_strings(PG_GETARG_ARRAYTYPE_P(0), &nnodes);
	int			nsql;
	char	  **sqls = text_array_strings(PG_GETARG_ARRAYTYPE_P(1), &nsql);

	if (nsql != nnodes)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("node_execute_each needs one statement per node"),
				 errdetail("%d nodes and %d statements were given.", nnodes, nsql)));
	execute_on_nodes(fcinfo, nodes, nnodes, sqls, nsql, NULL, 0, true);
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(ringshard_addressed_nodes);

/* addressed_nodes(): the nodes that have an address, in name order. */
Datum
ringshard_addressed_nodes(PG_FUNCTION_ARGS)
{
	int			count;
	char	  **nodes = catalog_addressed_nodes(&count);
	Datum	   *elems = palloc(sizeof(Datum) * Max(count, 1));

	for (int i = 0; i < count; i++)
		elems[i] = CStringGetTextDatum(nodes[i]);
	PG_RETURN_ARRAYTYPE_P(construct_array(elems, count, TEXTOID, -1, false, TYPALIGN_INT));
}

PG_FUNCTION_INFO_V1(ringshard_node_health_with_2pc);

/* What node_health() asks each node, and what it must answer: one row of four columns. */
static const char *const health_probe =
"SELECT pg_catalog.current_setting('server_version'), "
"pg_catalog.pg_database_size(pg_catalog.current_database()), "
"(SELECT pg_catalog.count(*) FROM pg_catalog.pg_stat_activity "
"WHERE datname OPERATOR(pg_catalog.=) pg_catalog.current_database()), "
"pg_catalog.current_setting('max_prepared_transactions')::pg_catalog.int4, "
"(SELECT e.extversion FROM pg_catalog.pg_extension e WHERE e.extname OPERATOR(pg_catalog.=) 'ringshard'), "
"pg_catalog.pg_is_in_recovery()";

/*
 * One node's probe answer as the columns of its node_health() row (3 to 7),
 * or an ERROR if it is malformed; a subtransaction keeps that error to the
 * node's row.
 */
static char *
read_health_answer(RemoteConnection *c, PGresult *r, Datum *values, bool *nulls)
{
	MemoryContext old = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	char	   *volatile error = NULL;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(old);
	PG_TRY();
	{
		const char *what = "the health probe";
		char	   *version;

		remote_expect_rows(c, r, 6, 1, 1, what);
		version = remote_text_value(c, r, 0, 0, what);
		values[3] = CStringGetTextDatum(version);
		values[4] = Int64GetDatum(remote_int64_value(c, r, 0, 1, what));
		values[5] = Int32GetDatum((int32) remote_int64_value(c, r, 0, 2, what));
		values[6] = BoolGetDatum(remote_int64_value(c, r, 0, 3, what) > 0);
		nulls[3] = nulls[4] = nulls[5] = nulls[6] = false;
		{
			const char *recovery = remote_text_value(c, r, 0, 5, what);

			if (strcmp(recovery, "t") != 0 && strcmp(recovery, "f") != 0)
				ereport(ERROR,
						(errcode(ERRCODE_PROTOCOL_VIOLATION),
						 errmsg("the health probe's answer is malformed"),
						 errdetail("\"%s\" where a boolean was expected.", pnstrdup(recovery, 20))));
			/* the coordinator writes to a node: one in recovery is a standby it should not have reached */
			values[7] = CStringGetTextDatum(recovery[0] == 't' ? "standby" : "primary");
			nulls[7] = false;
			if (recovery[0] == 't')
				error = psprintf("the node is a standby (in recovery): its address should reach the primary "
								 "(target_session_attrs=read-write)");
		}
		if (PQgetisnull(r, 0, 4))
			error = psprintf("the extension ringshard is not installed in the node's database");
		ReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		edata = remote_rollback_subtransaction(old);
		CurrentResourceOwner = owner;
		remote_rethrow_cancel(edata);
		error = psprintf("%s: %s", edata->message, edata->detail ? edata->detail : "");
	}
	PG_END_TRY();
	MemoryContextSwitchTo(old);
	CurrentResourceOwner = owner;
	return error;
}

/*
 * node_health(): per node whether it answers the calling role, its own round
 * trip, server version, database size, connections, whether it can take
 * two-phase commits, and the last error of the calling role's connection.
 * Nodes are probed in parallel; a dead one costs at most ringshard.node_timeout.
 * A node that answers malformed rows, or whose database lacks the extension,
 * is not ok, with the reason as its error.
 * (Not named ringshard_node_health: that symbol is 1.0's node_health, whose
 * rows have no two_phase_commit column; see legacy_1_0.c.)
 */
/*
 * The rows of node_health(): 1.2's eleven columns, or 1.1's eight (without
 * the size in bytes, the role and the host reached; the size in bytes where
 * 1.2 shows it for a person), for a database not updated yet.
 */
static void
node_health_rows(FunctionCallInfo fcinfo, bool with_role)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			nnodes;
	char	  **nodes;
	RemoteConnection **conns;
	RemoteResult *out;

	InitMaterializedSRF(fcinfo, 0);
	nodes = catalog_addressed_nodes(&nnodes);
	out = ask_every_node(nodes, nnodes, health_probe, false, ringshard_node_timeout_ms, &conns);
	for (int i = 0; i < nnodes; i++)
	{
		Datum		values[10];
		bool		nulls[10] = {false, false, true, true, true, true, true, true, true, true};
		PGresult   *r = out[i].result;
		char	   *error = NULL;

		values[0] = CStringGetTextDatum(nodes[i]);
		if (out[i].ok && r)
		{
			values[2] = Float8GetDatum(rint(out[i].elapsed_ms * 100.0) / 100.0);	/* to 0.01 ms */
			nulls[2] = false;
			/* the host the connection reached, of those a multi-host address names */
			if (conns[i]->conn && PQhost(conns[i]->conn) && remote_may_see_addresses())
			{
				values[8] = CStringGetTextDatum(psprintf("%s:%s", PQhost(conns[i]->conn), PQport(conns[i]->conn)));
				nulls[8] = false;
			}
			error = read_health_answer(conns[i], r, values, nulls);
		}
		else
			error = failure_text(conns[i], &out[i]);
		values[1] = BoolGetDatum(error == NULL);
		if (error)
		{
			values[9] = CStringGetTextDatum(error);
			nulls[9] = false;
		}
		if (!with_role)
		{
			values[7] = values[9];
			nulls[7] = nulls[9];
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
		else
		{
			/* 1.2: the size as a person reads it, then in bytes for a program */
			Datum		row[11];
			bool		row_nulls[11];

			memcpy(row, values, sizeof(Datum) * 4);
			memcpy(row_nulls, nulls, sizeof(bool) * 4);
			row_nulls[4] = row_nulls[5] = nulls[4];
			if (!nulls[4])
			{
				row[4] = DirectFunctionCall1(pg_size_pretty, values[4]);
				row[5] = values[4];
			}
			memcpy(row + 6, values + 5, sizeof(Datum) * 5);
			memcpy(row_nulls + 6, nulls + 5, sizeof(bool) * 5);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, row, row_nulls);
		}
		remote_result_free(r);
	}
}

/*
 * node_health(): per node whether it answers the calling role, its own round
 * trip, server version, database size, connections, whether it can take
 * two-phase commits, whether it is a primary or a standby, the host reached
 * (of a multi-host address), and the last error of the calling role's
 * connection.  Nodes are probed in parallel; a dead one costs at most
 * ringshard.node_timeout.  A node that answers malformed rows, whose
 * database lacks the extension, or that is a standby, is not ok, with the
 * reason as its error.
 * (Not named ringshard_node_health: that symbol is 1.0's node_health, whose
 * rows have no two_phase_commit column (see legacy_1_0.c); 1.1's is
 * ringshard_node_health_with_2pc.)
 */
PG_FUNCTION_INFO_V1(ringshard_node_health_with_role);

Datum
ringshard_node_health_with_role(PG_FUNCTION_ARGS)
{
	node_health_rows(fcinfo, true);
	PG_RETURN_VOID();
}

Datum
ringshard_node_health_with_2pc(PG_FUNCTION_ARGS)
{
	node_health_rows(fcinfo, false);
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(ringshard_node_table_rows);

/*
 * node_table_rows(table): count(*) of a distributed table on every node with
 * an address, copies included, in parallel, as the calling role.
 */
Datum
ringshard_node_table_rows(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			relid = PG_GETARG_OID(0);
	int			nnodes;
	char	  **nodes;
	RemoteConnection **conns;
	RemoteResult *out;
	char	   *sql;

	InitMaterializedSRF(fcinfo, 0);
	if (get_rel_name(relid) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	sql = psprintf("SELECT pg_catalog.count(*) FROM %s", rsfdw_relation_name(relid));
	nodes = catalog_addressed_nodes(&nnodes);
	out = ask_every_node(nodes, nnodes, sql, true, 0, &conns);
	for (int i = 0; i < nnodes; i++)
	{
		Datum		values[3];
		bool		nulls[3] = {false, true, true};
		PGresult   *r = out[i].result;

		values[0] = CStringGetTextDatum(nodes[i]);
		if (out[i].ok && r)
		{
			remote_expect_rows(conns[i], r, 1, 1, 1, "a count of rows");
			values[1] = Int64GetDatum(remote_int64_value(conns[i], r, 0, 0, "a count of rows"));
			nulls[1] = false;
		}
		else
		{
			values[2] = CStringGetTextDatum(failure_text(conns[i], &out[i]));
			nulls[2] = false;
		}
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		remote_result_free(r);
	}
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(ringshard_node_session_prefix);

/*
 * "ringshard <tag> ": how the application_name of every node connection of
 * this coordinator begins (the backend's pid follows).
 */
Datum
ringshard_node_session_prefix(PG_FUNCTION_ARGS)
{
	PG_RETURN_TEXT_P(cstring_to_text(psprintf("ringshard %s ", remote_coordinator_tag())));
}

/* Visitor: note a connection with a transaction open; stop at the first. */
static bool
note_open_transaction(RemoteConnection *c, void *arg)
{
	if (c->xact != RXACT_NONE || c->deferred != NULL)
	{
		*(bool *) arg = true;
		return false;
	}
	return true;
}

PG_FUNCTION_INFO_V1(ringshard_node_transactions_open);

/*
 * Whether this session has a transaction (or rows held back for one) open
 * on any node: a statement that asks the nodes outside the transaction
 * would run in it instead.
 */
Datum
ringshard_node_transactions_open(PG_FUNCTION_ARGS)
{
	bool		open = false;

	remote_foreach(note_open_transaction, &open);
	PG_RETURN_BOOL(open);
}

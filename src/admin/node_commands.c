/*
 * node_commands.c
 *		Administration of nodes from SQL: running a statement on several
 *		nodes, probing their health, counting a table's rows per node.  Each
 *		runs as the calling role, with its user mapping.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

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
					 errmsg("node and parameter lists must not contain nulls")));
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

PG_FUNCTION_INFO_V1(ringshard_node_execute);

/*
 * node_execute(nodes, sql, params, in_transaction): one statement on several
 * nodes in parallel; per node whether it worked, the first value of its
 * first row, its error and its time.  In the transaction, the nodes' parts
 * commit with ours (in two phases); otherwise each runs on its own.
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
		remote_send_params(conns[i], sql, nparams, (const char *const *) params, in_transaction, conns[i]);
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
		if (out[i].ok && r && PQntuples(r) > 0 && PQnfields(r) > 0 && !PQgetisnull(r, 0, 0))
		{
			values[2] = CStringGetTextDatum(PQgetvalue(r, 0, 0));
			nulls[2] = false;
		}
		if (!out[i].ok)
		{
			values[3] = CStringGetTextDatum(failure_text(conns[i], &out[i]));
			nulls[3] = false;
		}
		values[4] = Float8GetDatum(INSTR_TIME_GET_MILLISEC(now));
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
	char	  **nodes = catalog_addressed_nodes(&count);
	Datum	   *elems = palloc(sizeof(Datum) * Max(count, 1));

	for (int i = 0; i < count; i++)
		elems[i] = CStringGetTextDatum(nodes[i]);
	PG_RETURN_ARRAYTYPE_P(construct_array(elems, count, TEXTOID, -1, false, TYPALIGN_INT));
}

PG_FUNCTION_INFO_V1(ringshard_node_health_with_2pc);

/*
 * node_health(): per node whether it answers the calling role, its round
 * trip, server version, database size, connections, whether it can take
 * two-phase commits, and the last error of the calling role's connection.
 * Nodes are probed in parallel; a dead one costs at most ringshard.node_timeout.
 * (Not named ringshard_node_health: that symbol is 1.0's node_health, whose
 * rows have no two_phase_commit column; see legacy_1_0.c.)
 */
Datum
ringshard_node_health_with_2pc(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			nnodes;
	char	  **nodes;
	RemoteConnection **conns;
	RemoteResult *out;
	double	   *elapsed;
	const char *probe = "SELECT pg_catalog.current_setting('server_version'), "
		"pg_catalog.pg_database_size(pg_catalog.current_database()), "
		"(SELECT pg_catalog.count(*) FROM pg_catalog.pg_stat_activity "
		"WHERE datname OPERATOR(pg_catalog.=) pg_catalog.current_database()), "
		"pg_catalog.current_setting('max_prepared_transactions')::pg_catalog.int4";
	instr_time	start;

	InitMaterializedSRF(fcinfo, 0);
	nodes = catalog_addressed_nodes(&nnodes);
	conns = connections_for(nodes, nnodes);
	out = palloc0(sizeof(RemoteResult) * Max(nnodes, 1));
	elapsed = palloc0(sizeof(double) * Max(nnodes, 1));
	remote_connect_all(conns, nnodes, true);
	INSTR_TIME_SET_CURRENT(start);
	for (int i = 0; i < nnodes; i++)
		if (conns[i]->link == LINK_IDLE)
			remote_send(conns[i], probe, false, conns[i]);
	remote_receive(conns, nnodes, out, 0, ringshard_node_timeout_ms);
	{
		instr_time	now;

		INSTR_TIME_SET_CURRENT(now);
		INSTR_TIME_SUBTRACT(now, start);
		for (int i = 0; i < nnodes; i++)
			elapsed[i] = INSTR_TIME_GET_MILLISEC(now);
	}
	for (int i = 0; i < nnodes; i++)
	{
		Datum		values[8];
		bool		nulls[8] = {false, false, true, true, true, true, true, true};
		PGresult   *r = out[i].result;

		values[0] = CStringGetTextDatum(nodes[i]);
		values[1] = BoolGetDatum(out[i].ok);
		if (out[i].ok && r && PQntuples(r) == 1)
		{
			values[2] = Float8GetDatum(elapsed[i]);
			values[3] = CStringGetTextDatum(PQgetvalue(r, 0, 0));
			values[4] = Int64GetDatum(strtoll(PQgetvalue(r, 0, 1), NULL, 10));
			values[5] = Int32GetDatum(atoi(PQgetvalue(r, 0, 2)));
			values[6] = BoolGetDatum(atoi(PQgetvalue(r, 0, 3)) > 0);
			nulls[2] = nulls[3] = nulls[4] = nulls[5] = nulls[6] = false;
		}
		if (!out[i].ok)
		{
			values[7] = CStringGetTextDatum(failure_text(conns[i], &out[i]));
			nulls[7] = false;
		}
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		if (r)
			PQclear(r);
	}
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
	conns = connections_for(nodes, nnodes);
	out = palloc0(sizeof(RemoteResult) * Max(nnodes, 1));
	remote_connect_all(conns, nnodes, true);
	for (int i = 0; i < nnodes; i++)
		if (conns[i]->link == LINK_IDLE)
			remote_send(conns[i], sql, true, conns[i]);
	remote_receive(conns, nnodes, out, 0, 0);
	for (int i = 0; i < nnodes; i++)
	{
		Datum		values[3];
		bool		nulls[3] = {false, true, true};
		PGresult   *r = out[i].result;

		values[0] = CStringGetTextDatum(nodes[i]);
		if (out[i].ok && r && PQntuples(r) == 1)
		{
			values[1] = Int64GetDatum(strtoll(PQgetvalue(r, 0, 0), NULL, 10));
			nulls[1] = false;
		}
		else
		{
			values[2] = CStringGetTextDatum(failure_text(conns[i], &out[i]));
			nulls[2] = false;
		}
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		if (r)
			PQclear(r);
	}
	PG_RETURN_VOID();
}

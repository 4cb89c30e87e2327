/*
 * addresses.c
 *		Node addresses as the options of their foreign servers: an address
 *		given to add_node() (host:port, a libpq connection string or URI)
 *		becomes server options, and a server's options read back as an
 *		address (host:port when that is all they say).
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "foreign/foreign.h"
#include "funcapi.h"
#include "libpq-fe.h"
#include "utils/builtins.h"

#include "fdw/fdw.h"
#include "remote/connection.h"

/* Options that credentials or ringshard itself own: never from an address. */
static bool
option_refused(const char *keyword)
{
	static const char *const refused[] = {
		"user", "password", "sslpassword", "passfile", "service", "client_encoding",
		"fallback_application_name", "replication", NULL
	};

	for (int i = 0; refused[i]; i++)
		if (strcmp(keyword, refused[i]) == 0)
			return true;
	return false;
}

/*
 * The options of an address as rows (option, value) of the set-returning
 * function fcinfo.  host:port is shorthand for host and port; anything with
 * '=' or '://' is a libpq connection string.  With refuse_credentials, an
 * option that brings credentials is an error.  The address is never printed
 * in an error: it may hold the very password.
 */
static void
address_options_rows(FunctionCallInfo fcinfo, bool refuse_credentials)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *address = text_to_cstring(PG_GETARG_TEXT_PP(0));

	InitMaterializedSRF(fcinfo, 0);
	if (address[0] == '\0' || strlen(address) > 1024)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid node address"),
				 errdetail("An address is host:port, or a libpq connection string of at most 1024 bytes.")));
	if (strchr(address, '=') == NULL && strstr(address, "://") == NULL)
	{
		const char *colon = strrchr(address, ':');
		Datum		values[2];
		bool		nulls[2] = {false, false};

		if (strpbrk(address, " \t\r\n'\"\\") != NULL || colon == address)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid node address"),
					 errdetail("An address is host:port, or a libpq connection string.")));
		values[0] = CStringGetTextDatum("host");
		values[1] = CStringGetTextDatum(colon ? pnstrdup(address, colon - address) : address);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		if (colon)
		{
			char	   *end;
			long		port;

			errno = 0;
			port = strtol(colon + 1, &end, 10);
			if (colon[1] == '\0' || *end != '\0' || errno != 0 || port < 1 || port > 65535)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("invalid port in node address"),
						 errdetail("A port is a number from 1 to 65535.")));
			values[0] = CStringGetTextDatum("port");
			values[1] = CStringGetTextDatum(colon + 1);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
		return;
	}
	{
		char	   *parse_error = NULL;
		PQconninfoOption *options = PQconninfoParse(address, &parse_error);

		if (options == NULL)
		{
			if (parse_error)
				PQfreemem(parse_error);
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid node address"),
					 errdetail("The connection string does not parse.")));
		}
		for (PQconninfoOption *o = options; o->keyword; o++)
			if (refuse_credentials && o->val != NULL && o->val[0] != '\0' && option_refused(o->keyword))
			{
				char	   *keyword = pstrdup(o->keyword);

				PQconninfoFree(options);
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("a node address may not set \"%s\"", keyword),
						 errdetail("Credentials belong in user mappings, where only their role and the node's owner see them."),
						 errhint("CREATE USER MAPPING FOR role SERVER node OPTIONS (user '...', password '...');")));
			}
		for (PQconninfoOption *o = options; o->keyword; o++)
		{
			Datum		values[2];
			bool		nulls[2] = {false, false};

			if (o->val == NULL || o->val[0] == '\0')
				continue;
			values[0] = CStringGetTextDatum(o->keyword);
			values[1] = CStringGetTextDatum(o->val);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
		PQconninfoFree(options);
	}
}

PG_FUNCTION_INFO_V1(ringshard_address_options);

/*
 * address_options(address): the server options of an address.  Credentials
 * are refused: they belong in user mappings.
 */
Datum
ringshard_address_options(PG_FUNCTION_ARGS)
{
	address_options_rows(fcinfo, true);
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(ringshard_address_options_as_given);

/*
 * The same without refusing anything: every option an address sets.  Only
 * the upgrade from 1.0 calls it (ringshard--1.0--1.1.sql), to turn 1.0
 * addresses, which could carry a user name or a service, into servers and
 * user mappings, naming what it cannot convert.
 */
Datum
ringshard_address_options_as_given(PG_FUNCTION_ARGS)
{
	address_options_rows(fcinfo, false);
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(ringshard_server_address);

/* server_address(server): host:port (or host) when those are its only options, else a connection string. */
Datum
ringshard_server_address(PG_FUNCTION_ARGS)
{
	ForeignServer *server = GetForeignServerByName(NameStr(*PG_GETARG_NAME(0)), true);
	char	   *host = NULL;
	char	   *port = NULL;
	int			others = 0;
	ListCell   *lc;
	StringInfoData buf;

	if (server == NULL)
		PG_RETURN_NULL();
	foreach(lc, server->options)
	{
		DefElem    *d = lfirst(lc);

		if (strcmp(d->defname, RINGSHARD_AMBIENT_OPTION) == 0)
			continue;			/* who gave the address, not a part of it */
		if (strcmp(d->defname, "host") == 0)
			host = defGetString(d);
		else if (strcmp(d->defname, "port") == 0)
			port = defGetString(d);
		else
			others++;
	}
	if (others == 0 && host && strpbrk(host, " \t\r\n'\"\\=") == NULL)
		PG_RETURN_TEXT_P(cstring_to_text(port ? psprintf("%s:%s", host, port) : host));
	initStringInfo(&buf);
	(void) remote_append_server_conninfo(&buf, server);
	PG_RETURN_TEXT_P(cstring_to_text(buf.data));
}

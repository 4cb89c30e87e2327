/*
 * checks.c
 *		Argument checks every administration function starts with: a node
 *		address that parses and carries no password (address_is_safe), and
 *		a ring, map or node name (check_name, which also checks that the
 *		library and the SQL objects are the same version).
 */
#include "postgres.h"

#include "fmgr.h"
#include "libpq-fe.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"

#include "admin/version.h"

PG_FUNCTION_INFO_V1(ringshard_address_is_safe);

/*
 * address_is_safe(address): a host[:port] (port 1..65535) or a libpq
 * connection string (or URI) that parses and has no password in it, at most
 * 1024 bytes.  Passwords belong in .pgpass,
 * a service file or a user mapping, never in the catalog PUBLIC can read.
 */
Datum
ringshard_address_is_safe(PG_FUNCTION_ARGS)
{
	char	   *address = text_to_cstring(PG_GETARG_TEXT_PP(0));
	PQconninfoOption *options;
	char	   *parse_error = NULL;
	bool		safe = true;

	if (address[0] == '\0' || strlen(address) > 1024)
		PG_RETURN_BOOL(false);

	/* A bare host[:port] is not a connection string; it has no password. */
	if (strchr(address, '=') == NULL && strstr(address, "://") == NULL)
	{
		const char *colon = strrchr(address, ':');

		if (strpbrk(address, " \t\r\n'\"\\") != NULL)
			PG_RETURN_BOOL(false);
		if (colon != NULL)
		{
			char	   *end;
			long		port;

			errno = 0;
			port = strtol(colon + 1, &end, 10);
			if (colon[1] == '\0' || *end != '\0' || errno != 0 || port < 1 || port > 65535 ||
				colon == address)
				PG_RETURN_BOOL(false);
		}
		PG_RETURN_BOOL(true);
	}

	options = PQconninfoParse(address, &parse_error);
	if (options == NULL)
	{
		if (parse_error)
			PQfreemem(parse_error);
		PG_RETURN_BOOL(false);
	}
	for (PQconninfoOption *option = options; option->keyword; option++)
		if (option->val != NULL && option->val[0] != '\0' &&
			(strcmp(option->keyword, "password") == 0 ||
			 strcmp(option->keyword, "sslpassword") == 0))
			safe = false;
	PQconninfoFree(options);
	PG_RETURN_BOOL(safe);
}

PG_FUNCTION_INFO_V1(ringshard_check_name);

/*
 * check_name(kind, name): raises unless a ring, map or node name is non-empty
 * and at most 1024 bytes, or unless the library and the SQL objects are the
 * same version (version.c) (the catalog's CHECK constraints, checked first for
 * a better message).  In C rather than PL/pgSQL so that the administration
 * functions, which all call it first, check the version before anything else.
 */
Datum
ringshard_check_name(PG_FUNCTION_ARGS)
{
	char	   *kind = PG_ARGISNULL(0) ? "object" : text_to_cstring(PG_GETARG_TEXT_PP(0));
	text	   *name;
	int			len;

	/* Every administration function starts here: check the SQL version once. */
	ringshard_check_version();
	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s name must not be null", kind)));
	name = PG_GETARG_TEXT_PP(1);
	len = VARSIZE_ANY_EXHDR(name);
	if (len == 0 || len > 1024)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid %s name \"%.*s\"", kind,
						pg_mbcharcliplen(VARDATA_ANY(name), len, 64), VARDATA_ANY(name)),
				 errdetail("A %s name must be non-empty and at most 1024 bytes.", kind)));
	PG_RETURN_VOID();
}

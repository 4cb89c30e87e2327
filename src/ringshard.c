/*
 * ringshard.c
 *		Module entry point and small catalog helpers.
 */
#include "postgres.h"

#include "fmgr.h"
#include "libpq-fe.h"
#include "utils/builtins.h"
#include "utils/guc.h"

#include "cluster.h"
#include "topology_cache.h"
#include "watchdog.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

/* Read by ringshard.rebalance_report_progress() through current_setting(). */
static int	rebalance_notice_interval_ms = 5000;

/* Load-time set-up: cache invalidation hooks, cluster settings, the watchdog. */
void
_PG_init(void)
{
	topology_cache_init();
	cluster_init();
	watchdog_init();
	DefineCustomIntVariable("ringshard.rebalance_notice_interval",
							"Least time between two progress notices of ringshard.rebalance().",
							"A move of many steps reports \"step k of N, rows x of y\" at most this often; 0 reports after every page and step.",
							&rebalance_notice_interval_ms, 5000, 0, 3600 * 1000,
							PGC_USERSET, GUC_UNIT_MS, NULL, NULL, NULL);
}

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

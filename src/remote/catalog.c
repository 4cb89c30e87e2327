/*
 * catalog.c
 *		The ringshard catalog read and written with its owner's rights (see
 *		catalog.h).
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "remote/catalog.h"
#include "routing/topology_cache.h"

/* The owner of the ringshard catalog: the owner of its table nodes. */
static Oid
catalog_owner(void)
{
	Oid			schema = get_namespace_oid("ringshard", false);

	return catalog_relation_owner(get_relname_relid("nodes", schema));
}

/* The owner of a relation (see catalog.h). */
Oid
catalog_relation_owner(Oid relid)
{
	HeapTuple	tuple;
	Oid			owner;

	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for relation %u", relid);
	owner = ((Form_pg_class) GETSTRUCT(tuple))->relowner;
	ReleaseSysCache(tuple);
	return owner;
}

/*
 * The statements are a handful of fixed strings, run on every distributed
 * commit, queued write and recovery round: each is planned once per session
 * and its plan kept, found by its text (the plan cache replans it if the
 * catalog changes).  A text too long for the key is planned every time.
 */
#define KEPT_PLAN_SQL_MAX 1024

typedef struct KeptPlan
{
	char		sql[KEPT_PLAN_SQL_MAX];	/* the statement: the key */
	SPIPlanPtr	plan;
} KeptPlan;

static HTAB *kept_plans = NULL;

static SPIPlanPtr
kept_plan(const char *sql, int nargs, Oid *argtypes)
{
	KeptPlan   *entry;
	bool		found;
	SPIPlanPtr	plan;

	if (strlen(sql) >= KEPT_PLAN_SQL_MAX)
		return NULL;
	if (kept_plans == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = KEPT_PLAN_SQL_MAX;
		ctl.entrysize = sizeof(KeptPlan);
		kept_plans = hash_create("ringshard catalog statements", 32, &ctl, HASH_ELEM | HASH_STRINGS);
	}
	entry = hash_search(kept_plans, sql, HASH_FIND, &found);
	if (found)
		return entry->plan;
	plan = SPI_prepare(sql, nargs, argtypes);
	if (plan == NULL)
		elog(ERROR, "ringshard catalog statement could not be prepared (%s): %s",
			 SPI_result_code_string(SPI_result), sql);
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "ringshard catalog statement could not be kept: %s", sql);
	/* entered only once the plan exists, so that a failure leaves no empty entry */
	entry = hash_search(kept_plans, sql, HASH_ENTER, &found);
	entry->plan = plan;
	return plan;
}

char	  **
owner_catalog_query(const char *sql, int nargs, Oid *argtypes, Datum *values,
					bool read_only, int *nrows)
{
	return owner_catalog_query_nulls(sql, nargs, argtypes, values, NULL, read_only, nrows);
}

char	  **
owner_catalog_query_nulls(const char *sql, int nargs, Oid *argtypes, Datum *values, const char *nulls,
						  bool read_only, int *nrows)
{
	Oid			saved_user;
	int			saved_context;
	char	  **rows = NULL;
	MemoryContext caller = CurrentMemoryContext;

	*nrows = 0;
	GetUserIdAndSecContext(&saved_user, &saved_context);

	/*
	 * As the owner, nothing of the caller's may run: the search_path is
	 * pinned (no operator, function or type of the caller's schemas is found
	 * first), and the operation is restricted as PostgreSQL restricts
	 * maintenance run as a table's owner.
	 */
	SetUserIdAndSecContext(catalog_owner(),
						   saved_context | SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION);
	PG_TRY();
	{
		bool		pushed = false;
		int			rc;
		int			nestlevel = NewGUCNestLevel();

		(void) set_config_option("search_path", "pg_catalog, pg_temp", PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_SAVE, true, 0, false);
		SPI_connect();
		if (!ActiveSnapshotSet())
		{
			PushActiveSnapshot(GetTransactionSnapshot());
			pushed = true;
		}
		{
			SPIPlanPtr	plan = kept_plan(sql, nargs, argtypes);

			rc = plan ? SPI_execute_plan(plan, values, nulls, read_only, 0)
				: SPI_execute_with_args(sql, nargs, argtypes, values, nulls, read_only, 0);
		}
		if (rc < 0)
			elog(ERROR, "ringshard catalog statement failed: %s", sql);
		if (SPI_tuptable != NULL)
		{
			*nrows = (int) SPI_processed;
			rows = MemoryContextAlloc(caller, sizeof(char *) * Max(*nrows, 1));
			for (int i = 0; i < *nrows; i++)
			{
				char	   *value = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);

				rows[i] = value ? MemoryContextStrdup(caller, value) : NULL;
			}
		}
		if (pushed)
			PopActiveSnapshot();
		SPI_finish();
		AtEOXact_GUC(false, nestlevel);
	}
	PG_FINALLY();
	{
		SetUserIdAndSecContext(saved_user, saved_context);
	}
	PG_END_TRY();
	return rows;
}

char	  **
catalog_addressed_nodes(int *count)
{
	return owner_catalog_query("SELECT node_name FROM ringshard.nodes WHERE server_name IS NOT NULL "
							   "ORDER BY node_name COLLATE pg_catalog.\"C\"", 0, NULL, NULL, true, count);
}

const char *
catalog_coordinator_id(void)
{
	static char id[33];
	static uint64 generation = 0;

	/* cluster_state changes send the topology invalidation too */
	if (generation != topology_cache_generation || id[0] == '\0')
	{
		int			nrows;
		char	  **rows = owner_catalog_query("SELECT pg_catalog.replace(coordinator_id::pg_catalog.text, '-', '') "
											   "FROM ringshard.cluster_state", 0, NULL, NULL, true, &nrows);

		if (nrows != 1 || rows[0] == NULL || strlen(rows[0]) != 32)
			elog(ERROR, "ringshard.cluster_state has no coordinator id");
		memcpy(id, rows[0], 33);
		generation = topology_cache_generation;
	}
	return id;
}

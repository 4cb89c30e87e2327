/*
 * admin_errors.c
 *		An administration function's error reaches the user as one clean
 *		error, without CONTEXT lines from ringshard's own PL/pgSQL.
 *
 * The administration functions (ringshard.add_node, load_partition_config,
 * plan_table_moves, ...) are PL/pgSQL and SQL that call helpers (lock_ring,
 * check_name, ensure_node, ...) and run dynamic queries.  PostgreSQL reports
 * an error raised in a helper with a CONTEXT line for every PL/pgSQL frame
 * and SQL statement between it and the user ("PL/pgSQL function
 * lock_ring(text) line 10 at RAISE", "SQL statement "SELECT
 * ringshard_internal.lock_ring(ring)"", the text of a dynamic query, ...).  Those
 * lines describe ringshard's internals, not the user's mistake, and every
 * edit of a helper would change them.
 *
 * Every such function has a SET clause (its search_path), so PostgreSQL
 * calls it through fmgr_security_definer, which tells the function manager
 * hook (FHET_ABORT) when the function fails, once the error context stack is
 * back to the caller's.  There the error is raised again as it was, without
 * the context collected inside ringshard; the caller's own context (its
 * PL/pgSQL function, its DO block) is collected again, as for an error of a
 * built-in function.  Nested ringshard calls each do this, so what is left
 * is the context outside the outermost one.
 *
 * Only errors a user causes are cleaned (SQLSTATE classes 0A, 22, 23, 2B,
 * 42, 55 and P0: bad arguments, missing or duplicate objects, permissions,
 * refused key types); any other error keeps its full context for diagnosis.
 * The dropped context is logged at DEBUG1.  The hook is installed when the
 * library loads; the administration functions call a C function
 * (ringshard_internal.check_name) before they can raise, which loads it.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_proc.h"
#include "fmgr.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "admin/admin_errors.h"

static fmgr_hook_type previous_fmgr_hook = NULL;

/* Holds the copy of the error being raised again; reset on each use. */
static MemoryContext reraise_context = NULL;

/* Whether an error of this SQLSTATE is one a user causes with bad input. */
static bool
is_user_error(int sqlerrcode)
{
	switch (ERRCODE_TO_CATEGORY(sqlerrcode))
	{
		case ERRCODE_FEATURE_NOT_SUPPORTED:
		case ERRCODE_DATA_EXCEPTION:
		case ERRCODE_INTEGRITY_CONSTRAINT_VIOLATION:
		case ERRCODE_DEPENDENT_PRIVILEGE_DESCRIPTORS_STILL_EXIST:
		case ERRCODE_SYNTAX_ERROR_OR_ACCESS_RULE_VIOLATION:
		case ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE:
		case ERRCODE_PLPGSQL_ERROR:
			return true;
		default:
			return false;
	}
}

/* Whether a function lives in the ringshard schema. */
static bool
is_ringshard_function(Oid fn_oid)
{
	HeapTuple	tuple = SearchSysCache1(PROCOID, ObjectIdGetDatum(fn_oid));
	Oid			namespace_oid;
	char	   *namespace_name;

	if (!HeapTupleIsValid(tuple))
		return false;
	namespace_oid = ((Form_pg_proc) GETSTRUCT(tuple))->pronamespace;
	ReleaseSysCache(tuple);
	namespace_name = get_namespace_name(namespace_oid);
	return namespace_name != NULL &&
		(strcmp(namespace_name, "ringshard") == 0 || strcmp(namespace_name, "ringshard_internal") == 0);
}

/*
 * Called while function fn_oid's error is being thrown past it: raise it
 * again without its context if it is a user's error from a ringshard
 * function, else return and let it go on as it was.
 */
static void
reraise_without_internal_context(Oid fn_oid)
{
	MemoryContext caller = CurrentMemoryContext;	/* ErrorContext here */
	ErrorData  *error;
	char	   *dropped;

	/* Most errors passing here are not ours: decide before copying anything. */
	if (!is_user_error(geterrcode()))
		return;
	MemoryContextReset(reraise_context);
	MemoryContextSwitchTo(reraise_context);
	if (!is_ringshard_function(fn_oid))
	{
		MemoryContextSwitchTo(caller);
		return;
	}
	error = CopyErrorData();
	if (error->elevel != ERROR || (error->context == NULL && error->internalquery == NULL))
	{
		MemoryContextSwitchTo(caller);
		return;
	}
	FlushErrorState();
	dropped = error->context;
	error->context = NULL;
	error->internalquery = NULL;
	error->internalpos = 0;
	if (dropped)
		ereport(DEBUG1,
				(errmsg_internal("ringshard: context of \"%s\" not shown: %s", error->message, dropped),
				 errhidestmt(true)));
	ThrowErrorData(error);
	pg_unreachable();
}

/* The function manager hook: only failures of a function interest it. */
static void
admin_errors_fmgr_hook(FmgrHookEventType event, FmgrInfo *flinfo, Datum *private)
{
	if (previous_fmgr_hook)
		(*previous_fmgr_hook) (event, flinfo, private);
	if (event == FHET_ABORT)
		reraise_without_internal_context(flinfo->fn_oid);
}

/* Install the hook (from _PG_init). */
void
admin_errors_init(void)
{
	reraise_context = AllocSetContextCreate(TopMemoryContext, "ringshard error re-raise",
											ALLOCSET_SMALL_SIZES);
	previous_fmgr_hook = fmgr_hook;
	fmgr_hook = admin_errors_fmgr_hook;
}

/*
 * admin_errors.c
 *		An administration function's error reaches the user as one clean
 *		error, without CONTEXT lines from ringshard's own PL/pgSQL and SQL.
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
 * So those functions are written in two procedural languages of the
 * extension's own, ringshard_plpgsql and ringshard_sql (00_setup.sql): the
 * same languages as plpgsql and sql, compiled, validated and run by
 * PostgreSQL's own handlers, whose call handlers below only add what happens
 * when the function fails.  The validators are the extension's too (they only
 * pass the call on): pg_dump writes a language's HANDLER and VALIDATOR only
 * when it dumps both functions, and pg_upgrade's dump names no built-in one,
 * so a language whose validator were plpgsql's own would come back from
 * pg_upgrade without its handler.  Then, with the error context stack back to the caller's,
 * the error is raised again as it was, without the context collected inside
 * the function; the caller's own context (its PL/pgSQL function, its DO
 * block) is collected again, as for an error of a built-in function.  Nested
 * calls each do this, so what is left is the context outside the outermost
 * one.  Only functions written in these languages are touched: no hook sees
 * any other function of the server.
 *
 * Only errors a user causes are cleaned (SQLSTATE classes 0A, 22, 23, 2B,
 * 42, 55 and P0: bad arguments, missing or duplicate objects, permissions,
 * refused key types); any other error keeps its full context for diagnosis.
 * The dropped context is logged at DEBUG1.
 */
#include "postgres.h"

#include "executor/functions.h"
#include "fmgr.h"
#include "utils/fmgrprotos.h"
#include "utils/memutils.h"

/* plpgsql's call handler and validator, found in its library on first use. */
static PGFunction plpgsql_call_handler = NULL;
static PGFunction plpgsql_validator = NULL;

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

/*
 * Called in the PG_CATCH of a function of ours, with the error context stack
 * back to the caller's: raise the error again without its context if a user
 * caused it, else return and let the caller re-throw it as it is.
 */
static void
reraise_without_internal_context(void)
{
	MemoryContext caller = CurrentMemoryContext;	/* ErrorContext here */
	ErrorData  *error;
	char	   *dropped;

	/* Decide before copying anything. */
	if (!is_user_error(geterrcode()))
		return;
	if (reraise_context == NULL)
		reraise_context = AllocSetContextCreate(TopMemoryContext, "ringshard error re-raise",
												ALLOCSET_SMALL_SIZES);
	MemoryContextReset(reraise_context);
	MemoryContextSwitchTo(reraise_context);
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

/* Run a function body with its language's own handler; clean its errors. */
static Datum
call_cleaning_errors(PGFunction language_handler, FunctionCallInfo fcinfo)
{
	Datum		result = (Datum) 0;

	PG_TRY();
	{
		result = language_handler(fcinfo);
	}
	PG_CATCH();
	{
		reraise_without_internal_context();
		PG_RE_THROW();
	}
	PG_END_TRY();
	return result;
}

PG_FUNCTION_INFO_V1(ringshard_plpgsql_call_handler);

/* The call handler of LANGUAGE ringshard_plpgsql: PL/pgSQL, errors cleaned. */
Datum
ringshard_plpgsql_call_handler(PG_FUNCTION_ARGS)
{
	if (plpgsql_call_handler == NULL)
		plpgsql_call_handler = load_external_function("$libdir/plpgsql", "plpgsql_call_handler",
													  true, NULL);
	return call_cleaning_errors(plpgsql_call_handler, fcinfo);
}

PG_FUNCTION_INFO_V1(ringshard_sql_call_handler);

/* The call handler of LANGUAGE ringshard_sql: SQL, errors cleaned. */
Datum
ringshard_sql_call_handler(PG_FUNCTION_ARGS)
{
	return call_cleaning_errors(fmgr_sql, fcinfo);
}

PG_FUNCTION_INFO_V1(ringshard_plpgsql_validator);

/*
 * The validator of LANGUAGE ringshard_plpgsql: plpgsql's own, called as it is
 * (it checks that it is the language's validator by fcinfo's function, this
 * one).
 */
Datum
ringshard_plpgsql_validator(PG_FUNCTION_ARGS)
{
	if (plpgsql_validator == NULL)
		plpgsql_validator = load_external_function("$libdir/plpgsql", "plpgsql_validator", true, NULL);
	return plpgsql_validator(fcinfo);
}

PG_FUNCTION_INFO_V1(ringshard_sql_validator);

/* The validator of LANGUAGE ringshard_sql: SQL's own, called as it is. */
Datum
ringshard_sql_validator(PG_FUNCTION_ARGS)
{
	return fmgr_sql_validator(fcinfo);
}

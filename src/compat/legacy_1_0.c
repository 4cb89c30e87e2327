/*
 * legacy_1_0.c
 *		What this library keeps of ringshard 1.0: the C symbols that 1.0's SQL
 *		objects name, and the helpers of the upgrade from 1.0.
 *
 * PostgreSQL looks a C function's symbol up when the function is created,
 * even in an extension script: CREATE EXTENSION ringshard VERSION '1.0',
 * which ALTER EXTENSION ... UPDATE starts from, needs every symbol that
 * ringshard--1.0.sql names.  A 1.0 function that 1.1 dropped, and one whose
 * SQL signature 1.1 changed (1.1 gave its own function a new symbol, so that
 * a 1.0 SQL object can never call code written for other arguments), is a
 * stub here that refuses with the version error.  ringshard--1.0--1.1.sql
 * also calls the helper below, which it creates and drops.  Keep all of them
 * for as long as upgrades from 1.0 are supported: an update script runs with
 * the newest library.
 */
#include "postgres.h"

#include "catalog/pg_class.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "admin/version.h"
#include "commands/ddl.h"

static void refuse_1_0_function(FunctionCallInfo fcinfo) pg_attribute_noreturn();

/*
 * A 1.0 function was called: refuse with the version error (the SQL objects
 * of this database are 1.0's), or, while an extension script runs and the
 * version is not checked, with an error naming the function.
 */
static void
refuse_1_0_function(FunctionCallInfo fcinfo)
{
	char	   *name = fcinfo->flinfo ? get_func_name(fcinfo->flinfo->fn_oid) : NULL;

	ringshard_check_version();
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("%s() is a function of ringshard 1.0, which library version %s does not run",
					name ? name : "this", RINGSHARD_VERSION),
			 errhint("Run ALTER EXTENSION ringshard UPDATE in this database.")));
}

/* 1.0's trigger that routed inserts into a distributed table (a foreign table in 1.1). */
PG_FUNCTION_INFO_V1(ringshard_route_write);
Datum
ringshard_route_write(PG_FUNCTION_ARGS)
{
	refuse_1_0_function(fcinfo);
	PG_RETURN_NULL();
}

/* 1.0's cluster_get(), a PL/pgSQL wrapper of a plain query in 1.1. */
PG_FUNCTION_INFO_V1(ringshard_cluster_get);
Datum
ringshard_cluster_get(PG_FUNCTION_ARGS)
{
	refuse_1_0_function(fcinfo);
	PG_RETURN_NULL();
}

/* 1.0's cluster_fanout(), a PL/pgSQL wrapper of a plain query in 1.1. */
PG_FUNCTION_INFO_V1(ringshard_cluster_fanout);
Datum
ringshard_cluster_fanout(PG_FUNCTION_ARGS)
{
	refuse_1_0_function(fcinfo);
	PG_RETURN_NULL();
}

/* 1.0's node_health(), whose rows lack 1.1's two_phase_commit column. */
PG_FUNCTION_INFO_V1(ringshard_node_health);
Datum
ringshard_node_health(PG_FUNCTION_ARGS)
{
	refuse_1_0_function(fcinfo);
	PG_RETURN_NULL();
}

/* 1.0's reads_here(row, excluded); 1.1's takes the table, the key and a topology version. */
PG_FUNCTION_INFO_V1(ringshard_reads_here);
Datum
ringshard_reads_here(PG_FUNCTION_ARGS)
{
	refuse_1_0_function(fcinfo);
	PG_RETURN_NULL();
}

PG_FUNCTION_INFO_V1(ringshard_replace_1_0_distributed_table);

/*
 * replace_1_0_distributed_table(table): the upgrade's step for one of the
 * coordinator's 1.0 distributed tables, an ordinary table whose inserts a
 * trigger routed to the nodes (the caller has dropped that trigger).  It
 * becomes a 1.1 distributed table as create_distributed_table() makes one,
 * without reaching any node, since the nodes already hold its rows and keep
 * their copies: a foreign table of server ringshard_cluster takes its name,
 * columns, CHECK constraints, comments, privileges and owner, and its
 * placement is the current topology.  1.0 never gave the nodes its other
 * constraints or indexes, so none are recorded for them.  Rows the local
 * table held (1.0 left there those it had before it was distributed; reads
 * never saw them) are not lost: the table is kept under another name, with a
 * WARNING.  Returns the new table.
 */
Datum
ringshard_replace_1_0_distributed_table(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	char	   *schema;
	char	   *relname;
	char	   *columns;
	char	   *old_name;
	Oid			new_relid;
	int			qualified;
	uint64		nrows;
	SPITupleTable *rows;
	int64		kept;

	if (get_rel_relkind(relid) != RELKIND_RELATION)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("relation with OID %u is not an ordinary table", relid)));
	SPI_connect();
	LockRelationOid(relid, AccessExclusiveLock);
	schema = get_namespace_name(get_rel_namespace(relid));
	relname = get_rel_name(relid);
	check_dependents(relid);
	qualified = begin_qualified_names();
	columns = column_definitions(relid, false);
	end_qualified_names(qualified);
	new_relid = replace_by_foreign_table(relid, columns, NIL, NIL, &old_name);

	rows = spi_query(psprintf("SELECT pg_catalog.count(*) FROM %s", quote_qualified_identifier(schema, old_name)),
					 0, NULL, NULL, &nrows);
	kept = strtoll(SPI_getvalue(rows->vals[0], rows->tupdesc, 1), NULL, 10);
	ringshard_ddl_internal = true;
	PG_TRY();
	{
		if (kept == 0)
			spi_exec(psprintf("DROP TABLE %s", quote_qualified_identifier(schema, old_name)));
		else
		{
			/* a name that says what the table is, if it is free */
			char	   *aside = psprintf("%.48s_1_0_local_rows", relname);

			if (!OidIsValid(get_relname_relid(aside, get_rel_namespace(relid))))
			{
				spi_exec(psprintf("ALTER TABLE %s RENAME TO %s", quote_qualified_identifier(schema, old_name),
								  quote_identifier(aside)));
				old_name = aside;
			}
			ereport(WARNING,
					(errmsg("table %s held " INT64_FORMAT " rows on the coordinator, which ringshard 1.0 never sent to its nodes",
							quote_qualified_identifier(schema, relname), kept),
					 errdetail("They are kept in the ordinary table %s; reads of the distributed table do not see them.",
							   quote_qualified_identifier(schema, old_name)),
					 errhint("Once the nodes run 1.1 and SELECT ringshard.push_table_definition('%s') has run, move them with INSERT INTO %s SELECT * FROM %s, then drop %s.",
							 quote_qualified_identifier(schema, relname), quote_qualified_identifier(schema, relname),
							 quote_qualified_identifier(schema, old_name), quote_qualified_identifier(schema, old_name))));
		}
	}
	PG_FINALLY();
	{
		ringshard_ddl_internal = false;
	}
	PG_END_TRY();
	SPI_finish();
	PG_RETURN_OID(new_relid);
}

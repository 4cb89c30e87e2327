/*
 * handler.c
 *		The foreign-data wrapper ringshard: its handler, the validator of the
 *		options of its servers (nodes), user mappings (credentials) and
 *		foreign tables (distributed tables), and its settings.
 */
#include "postgres.h"

#include "access/reloptions.h"
#include "catalog/pg_foreign_data_wrapper.h"
#include "catalog/pg_foreign_server.h"
#include "catalog/pg_foreign_table.h"
#include "catalog/pg_user_mapping.h"
#include "commands/defrem.h"
#include "libpq-fe.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"

#include "fdw/fdw.h"
#include "routing/annotated_tables.h"
#include "remote/connection.h"

PG_FUNCTION_INFO_V1(ringshard_fdw_handler);

Datum
ringshard_fdw_handler(PG_FUNCTION_ARGS)
{
	FdwRoutine *routine = makeNode(FdwRoutine);

	routine->GetForeignRelSize = rsGetForeignRelSize;
	routine->GetForeignPaths = rsGetForeignPaths;
	routine->GetForeignPlan = rsGetForeignPlan;
	routine->BeginForeignScan = rsBeginForeignScan;
	routine->IterateForeignScan = rsIterateForeignScan;
	routine->ReScanForeignScan = rsReScanForeignScan;
	routine->EndForeignScan = rsEndForeignScan;
	routine->GetForeignUpperPaths = rsGetForeignUpperPaths;

	routine->AddForeignUpdateTargets = rsAddForeignUpdateTargets;
	routine->PlanForeignModify = rsPlanForeignModify;
	routine->BeginForeignModify = rsBeginForeignModify;
	routine->ExecForeignInsert = rsExecForeignInsert;
	routine->ExecForeignBatchInsert = rsExecForeignBatchInsert;
	routine->GetForeignModifyBatchSize = rsGetForeignModifyBatchSize;
	routine->ExecForeignUpdate = rsExecForeignUpdateOrDelete;
	routine->ExecForeignDelete = rsExecForeignUpdateOrDelete;
	routine->EndForeignModify = rsEndForeignModify;
	routine->BeginForeignInsert = rsBeginForeignInsert;
	routine->EndForeignInsert = rsEndForeignInsert;
	routine->IsForeignRelUpdatable = rsIsForeignRelUpdatable;
	routine->PlanDirectModify = rsPlanDirectModify;
	routine->BeginDirectModify = rsBeginDirectModify;
	routine->IterateDirectModify = rsIterateDirectModify;
	routine->EndDirectModify = rsEndDirectModify;

	routine->ExplainForeignScan = rsExplainForeignScan;
	routine->ExplainForeignModify = rsExplainForeignModify;
	routine->ExplainDirectModify = rsExplainDirectModify;
	routine->ExecForeignTruncate = rsExecForeignTruncate;
	PG_RETURN_POINTER(routine);
}

/*
 * Server options that would bring in credentials other than the user
 * mapping's, or that ringshard sets itself.
 */
static bool
server_option_forbidden(const char *keyword)
{
	static const char *const forbidden[] = {
		"user", "password", "sslpassword", "passfile", "service", "client_encoding",
		"fallback_application_name", "replication", "dbname_is_uri", NULL
	};

	for (int i = 0; forbidden[i]; i++)
		if (strcmp(keyword, forbidden[i]) == 0)
			return true;
	return false;
}

/* Whether libpq knows the keyword. */
static bool
is_libpq_keyword(const char *keyword)
{
	PQconninfoOption *options = PQconndefaults();
	bool		found = false;

	for (PQconninfoOption *o = options; o && o->keyword && !found; o++)
		found = strcmp(o->keyword, keyword) == 0 && strchr(o->dispchar, 'D') == NULL;
	PQconninfoFree(options);
	return found;
}

PG_FUNCTION_INFO_V1(ringshard_fdw_validator);

/*
 * A node's server takes libpq's connection options except credentials; a
 * user mapping takes user, password, sslpassword and (superusers only)
 * password_required; the wrapper and distributed tables take none.
 */
Datum
ringshard_fdw_validator(PG_FUNCTION_ARGS)
{
	List	   *options = untransformRelOptions(PG_GETARG_DATUM(0));
	Oid			catalog = PG_GETARG_OID(1);
	ListCell   *lc;

	foreach(lc, options)
	{
		DefElem    *d = lfirst(lc);

		if (catalog == ForeignServerRelationId && strcmp(d->defname, RINGSHARD_AMBIENT_OPTION) == 0)
		{
			/*
			 * The options are validated whole on every CREATE and ALTER
			 * SERVER: a role below superuser that changes a node whose
			 * address a superuser gave must drop this in the same statement,
			 * so the server account's credentials never follow an address
			 * that role chose.
			 */
			(void) defGetBoolean(d);
			if (!superuser())
				ereport(ERROR,
						(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
						 errmsg("only a superuser may set or keep option \"%s\" of a ringshard node",
								RINGSHARD_AMBIENT_OPTION),
						 errdetail("It lets superusers and the watchdog connect to the node's address with the "
								   "server account's own credentials."),
						 errhint("Set the address with ringshard.set_node_address(), or drop the option in the same "
								 "ALTER SERVER.")));
			continue;
		}
		if (catalog == ForeignServerRelationId)
		{
			if ((strcmp(d->defname, "sslcert") == 0 || strcmp(d->defname, "sslkey") == 0) && !superuser())
				ereport(ERROR,
						(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
						 errmsg("only a superuser may set option \"%s\" of a ringshard node", d->defname),
						 errdetail("It names a file of the coordinator's server account, offered to the node as a credential.")));
			if (server_option_forbidden(d->defname))
				ereport(ERROR,
						(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
						 errmsg("option \"%s\" is not allowed on a ringshard node", d->defname),
						 errdetail("Credentials belong in user mappings; ringshard sets the others itself."),
						 errhint("CREATE USER MAPPING FOR role SERVER node OPTIONS (user '...', password '...');")));
			if (!is_libpq_keyword(d->defname))
				ereport(ERROR,
						(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
						 errmsg("invalid option \"%s\" for a ringshard node", d->defname),
						 errhint("A node takes libpq connection options such as host, port and dbname.")));
		}
		else if (catalog == UserMappingRelationId)
		{
			if (strcmp(d->defname, "password_required") == 0)
			{
				bool		required = defGetBoolean(d);

				if (!required && !superuser())
					ereport(ERROR,
							(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
							 errmsg("password_required=false is superuser-only"),
							 errhint("User mappings with the password_required option set to false may only "
									 "be created or modified by a superuser.")));
			}
			else if (strcmp(d->defname, "user") != 0 && strcmp(d->defname, "password") != 0 &&
					 strcmp(d->defname, "sslpassword") != 0)
				ereport(ERROR,
						(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
						 errmsg("invalid option \"%s\" for a ringshard user mapping", d->defname),
						 errhint("A user mapping takes user, password, sslpassword and password_required.")));
		}
		else
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
					 errmsg("invalid option \"%s\"", d->defname),
					 errhint("ringshard's foreign-data wrapper and distributed tables take no options.")));
	}
	PG_RETURN_VOID();
}

/* The annotation of a distributed table for planning (see fdw.h). */
void
rsfdw_table_info(Oid relid, AttrNumber *key_attnum, Oid *key_type, AttrNumber *keyspace_attnum)
{
	TableAnnotationInfo info;

	if (!table_annotation_info(relid, &info))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("foreign table \"%s\" is not a distributed table", get_rel_name(relid)),
				 errhint("Distributed tables are made by ringshard.create_distributed_table().")));
	*key_attnum = info.key_attnum;
	*keyspace_attnum = info.keyspace_attnum;
	*key_type = get_atttype(relid, *key_attnum);
}

/*
 * Whether every node of the table's ring holds every row: a ring whose
 * replication factor is at least its node count (the reference ring, made
 * by ringshard.create_reference_table()).
 */
bool
rsfdw_table_on_every_node(Oid relid)
{
	TableAnnotationInfo info;

	return table_annotation_info(relid, &info) && info.on_every_node;
}

/* The ring a distributed table is placed by, or NULL (a partition map, or not distributed). */
char *
rsfdw_table_ring(Oid relid)
{
	TableAnnotationInfo info;

	if (!table_annotation_info(relid, &info) || info.ring_name == NULL)
		return NULL;
	return pstrdup(info.ring_name);
}

/*
 * version.c
 *		ringshard.version(), and the check that the library and the SQL
 *		objects of the extension are the same version (see version.h).
 *
 * A new shared library is installed for every database of a server at once,
 * while each database keeps the SQL objects of the version it was created or
 * last updated with until someone runs ALTER EXTENSION ringshard UPDATE
 * there.  A library that ran against other SQL objects could call functions
 * with other arguments or read catalog tables of another shape; it refuses to
 * work instead, and says what to run.
 */
#include "postgres.h"

#include <openssl/opensslv.h>
#include <yaml.h>

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/indexing.h"
#include "catalog/pg_extension.h"
#include "commands/dbcommands.h"
#include "commands/extension.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/rel.h"

#include "admin/version.h"

/* Set once the check has passed in this session. */
static bool version_checked = false;

/*
 * The version of the extension ringshard in this database (pg_extension's
 * extversion), palloc'd, or NULL when it is not installed here.
 */
static char *
installed_sql_version(void)
{
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;
	char	   *version = NULL;

	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_extname, BTEqualStrategyNumber, F_NAMEEQ,
				CStringGetDatum("ringshard"));
	scan = systable_beginscan(rel, ExtensionNameIndexId, true, NULL, 1, &key);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
	{
		bool		isnull;
		Datum		value = heap_getattr(tuple, Anum_pg_extension_extversion,
										 RelationGetDescr(rel), &isnull);

		if (!isnull)
			version = text_to_cstring(DatumGetTextPP(value));
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return version;
}

/*
 * Whether dotted version a ("1.0") comes before b ("1.1"), comparing the
 * numbers one by one; a part that is not a number compares as text.
 */
static bool
older_version(const char *a, const char *b)
{
	while (*a || *b)
	{
		char	   *end_a;
		char	   *end_b;
		long		x = strtol(a, &end_a, 10);
		long		y = strtol(b, &end_b, 10);

		if (end_a == a || end_b == b)
			return strcmp(a, b) < 0;
		if (x != y)
			return x < y;
		a = end_a + (*end_a == '.');
		b = end_b + (*end_b == '.');
	}
	return false;
}

void
ringshard_check_version(void)
{
	char	   *installed;

	/* An extension script is installing or updating the SQL objects. */
	if (version_checked || creating_extension || !IsTransactionState())
		return;
	installed = installed_sql_version();
	/* Not installed here: the caller finds no catalog and says so. */
	if (installed == NULL)
		return;
	if (strcmp(installed, RINGSHARD_VERSION) != 0 && older_version(installed, RINGSHARD_VERSION))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("ringshard library version %s does not match the extension's SQL version %s in this database",
						RINGSHARD_VERSION, installed),
				 errdetail("A new library serves every database of the server at once; the SQL objects of database \"%s\" are still those of version %s.",
						   get_database_name(MyDatabaseId), installed),
				 errhint("Run ALTER EXTENSION ringshard UPDATE in this database.")));
	if (strcmp(installed, RINGSHARD_VERSION) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("ringshard library version %s does not match the extension's SQL version %s in this database",
						RINGSHARD_VERSION, installed),
				 errdetail("The SQL objects of database \"%s\" are newer than the library.",
						   get_database_name(MyDatabaseId)),
				 errhint("Install the library of ringshard %s (make install), then start a new session (restart the server if it preloads ringshard).", installed)));
	version_checked = true;
}

PG_FUNCTION_INFO_V1(ringshard_version);

/*
 * version(): one row with the SQL version installed in this database, the
 * library's version, the PostgreSQL it was built for, and the libraries and
 * options it was built with.  It does not run the check: it is how to see
 * a mismatch.
 */
Datum
ringshard_version(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	Datum		values[4];
	bool		nulls[4] = {false, false, false, false};
	char	   *installed;
#ifdef USE_ASSERT_CHECKING
	const char *assertions = "on";
#else
	const char *assertions = "off";
#endif

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "ringshard.version() must return a record");
	desc = BlessTupleDesc(desc);

	installed = installed_sql_version();
	if (installed)
		values[0] = CStringGetTextDatum(installed);
	else
		nulls[0] = true;
	values[1] = CStringGetTextDatum(RINGSHARD_VERSION);
	values[2] = CStringGetTextDatum("PostgreSQL " PG_VERSION);
	values[3] = CStringGetTextDatum(psprintf("%s, libyaml %s, assertions %s",
											 OPENSSL_VERSION_TEXT, yaml_get_version_string(),
											 assertions));
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
}

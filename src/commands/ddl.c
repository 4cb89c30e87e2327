/*
 * ddl.c
 *		The definition of distributed tables on their nodes.
 *
 * create_distributed_table() creates a table on every node (columns,
 * constraints, indexes), moves the rows the local table held to their
 * replicas and replaces it by a foreign table of the same name, owner,
 * privileges, comments and defaults.  Afterwards the DDL a user writes
 * against the table reaches every node in the same transaction, or is
 * refused: the ProcessUtility hook below.  Constraints and indexes that only
 * the nodes can have (PRIMARY KEY, UNIQUE, indexes) are kept in
 * ringshard.distributed_tables.node_ddl so that a node added later gets them
 * too.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/dependency.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_constraint.h"
#include "catalog/pg_foreign_table.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "executor/spi.h"
#include "foreign/foreign.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "parser/parse_utilcmd.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/ruleutils.h"

#include "commands/ddl.h"
#include "fdw/deparse.h"
#include "fdw/fdw.h"
#include "operations/progress.h"
#include "remote/catalog.h"
#include "remote/connection.h"
#include "remote/queue.h"
#include "remote/transaction.h"
#include "routing/annotated_tables.h"

extern int64 rsfdw_progress_total;

/* ----- helpers ----- */

/* Run SQL through SPI and return the rows (as the current user). */
SPITupleTable *
spi_query(const char *sql, int nargs, Oid *argtypes, Datum *values, uint64 *nrows)
{
	int			rc = SPI_execute_with_args(sql, nargs, argtypes, values, NULL, false, 0);

	if (rc < 0)
		elog(ERROR, "ringshard: SPI failed (%d): %s", rc, sql);
	*nrows = SPI_processed;
	return SPI_tuptable;
}

/* Run SQL through SPI whose one parameter, $1, is a relation's oid. */
static SPITupleTable *
spi_query_relid(const char *sql, Oid relid, uint64 *nrows)
{
	Oid			argtypes[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};

	return spi_query(sql, 1, argtypes, values, nrows);
}

void
spi_exec(const char *sql)
{
	uint64		n;

	(void) spi_query(sql, 0, NULL, NULL, &n);
}

/* Deparse with search_path = pg_catalog, so that every name comes out qualified. */
int
begin_qualified_names(void)
{
	int			level = NewGUCNestLevel();

	(void) set_config_option("search_path", "pg_catalog", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	return level;
}

void
end_qualified_names(int level)
{
	AtEOXact_GUC(true, level);
}

/*
 * Whether a relation is a distributed foreign table of this coordinator: a
 * foreign table of server ringshard_cluster that is annotated.  pg_restore
 * creates such a table, and gives it its owner and defaults, before it
 * restores the catalog rows that annotate it: until then the table is the
 * coordinator's alone, and DDL on it stays here.
 */
bool
is_distributed_table(Oid relid)
{
	ForeignTable *ft;
	ForeignServer *server;
	TableAnnotationInfo info;

	if (!OidIsValid(relid) || get_rel_relkind(relid) != RELKIND_FOREIGN_TABLE)
		return false;
	ft = GetForeignTable(relid);
	server = GetForeignServer(ft->serverid);
	if (strcmp(server->servername, CLUSTER_SERVER) != 0)
		return false;
	return table_annotation_info(relid, &info);
}

/*
 * Run one statement on every node with an address, in this transaction;
 * ERROR on any failure.  Returns how many nodes ran it.
 */
int
run_on_all_nodes(const char *sql, bool answers_row)
{
	int			nnodes;
	char	  **nodes = catalog_addressed_nodes(&nnodes);
	RemoteConnection **conns = palloc(sizeof(RemoteConnection *) * Max(nnodes, 1));

	for (int i = 0; i < nnodes; i++)
		conns[i] = remote_connection(nodes[i], GetUserId());
	run_on_connections(conns, nnodes, sql, answers_row ? RS_ANSWER_ONE_ROW : NULL, NULL);
	return nnodes;
}

/*
 * Run one statement on several nodes at once, in this transaction (as a
 * write of it); a node's error is raised as the node's, a lost connection as
 * one (during `what`, if given), and an answer that is not the completion of
 * a command (with this tag, unless NULL), or of one row for the tag
 * RS_ANSWER_ONE_ROW (a function call), as a malformed one.
 */
void
run_on_connections(RemoteConnection **conns, int n, const char *sql, const char *tag, const char *what)
{
	RemoteResult *out = palloc(sizeof(RemoteResult) * Max(n, 1));

	remote_connect_all(conns, n, false);
	for (int i = 0; i < n; i++)
	{
		remote_note_write(conns[i]);
		remote_send(conns[i], sql, true, conns[i]);
	}
	remote_receive(conns, n, out, 0, 0);
	for (int i = 0; i < n; i++)
	{
		PGresult   *res = remote_answer(conns[i], &out[i], sql, what);

		/* a statement that did not run on a node must not pass for one that did */
		if (tag && strcmp(tag, RS_ANSWER_ONE_ROW) == 0)
			remote_expect_rows(conns[i], res, 1, 1, 1, what ? what : "a table's definition");
		else
			remote_expect_command(conns[i], res, tag, -1, what ? what : "a change of a table's definition");
	}
	for (int i = 0; i < n; i++)
		remote_result_free(out[i].result);
}

/* Every node must be able to take two-phase commits before it gets a table. */
static void
check_nodes_prepared_transactions(void)
{
	int			nnodes;
	char	  **nodes = catalog_addressed_nodes(&nnodes);
	RemoteConnection **conns = palloc(sizeof(RemoteConnection *) * Max(nnodes, 1));
	RemoteResult *out = palloc(sizeof(RemoteResult) * Max(nnodes, 1));

	if (nnodes == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("no node has an address"),
				 errhint("Add nodes with ringshard.add_node(node, address).")));
	for (int i = 0; i < nnodes; i++)
		conns[i] = remote_connection(nodes[i], GetUserId());
	remote_connect_all(conns, nnodes, false);
	for (int i = 0; i < nnodes; i++)
		remote_send(conns[i], "SELECT pg_catalog.current_setting('max_prepared_transactions')::pg_catalog.int4", true,
					conns[i]);
	remote_receive(conns, nnodes, out, 0, ringshard_node_timeout_ms);
	for (int i = 0; i < nnodes; i++)
	{
		const char *what = "the check of max_prepared_transactions";
		PGresult   *res = remote_answer(conns[i], &out[i], NULL, what);

		remote_expect_rows(conns[i], res, 1, 1, 1, what);
		if (remote_int64_value(conns[i], res, 0, 0, what) <= 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("node \"%s\" cannot take part in two-phase commit", conns[i]->node),
					 errdetail("Its max_prepared_transactions is 0."),
					 errhint("Set max_prepared_transactions (for example to max_connections) on every node and restart it.")));
		remote_result_free(res);
	}
}

/*
 * The column definitions of a relation (all its columns, or only the one
 * numbered only_attnum), built from the catalog: quoted name, type,
 * collation, NOT NULL, default.  For nodes, defaults only when they use
 * nothing but built-in objects; *node_default, if given, receives that
 * default expression of the one column (NULL if it has none for nodes).
 */
static char *
column_definitions_of(Oid relid, bool for_nodes, AttrNumber only_attnum, char **node_default)
{
	StringInfoData buf;
	Oid			argtypes[2] = {OIDOID, INT2OID};
	Datum		values[2] = {ObjectIdGetDatum(relid), Int16GetDatum(only_attnum)};
	uint64		nrows;
	SPITupleTable *rows;

	if (node_default)
		*node_default = NULL;
	initStringInfo(&buf);
	rows = spi_query("SELECT pg_catalog.quote_ident(a.attname::pg_catalog.text), "
					 "pg_catalog.format_type(a.atttypid, a.atttypmod), a.attnotnull, "
					 "CASE WHEN a.attcollation <> 0 AND a.attcollation <> t.typcollation THEN "
					 "  (SELECT pg_catalog.quote_ident(n.nspname::pg_catalog.text) OPERATOR(pg_catalog.||) '.' "
					 "     OPERATOR(pg_catalog.||) pg_catalog.quote_ident(co.collname::pg_catalog.text) "
					 "     FROM pg_catalog.pg_collation co JOIN pg_catalog.pg_namespace n ON n.oid = co.collnamespace "
					 "    WHERE co.oid = a.attcollation) END, "
					 "pg_catalog.pg_get_expr(d.adbin, d.adrelid), a.attgenerated::pg_catalog.text, "
					 "EXISTS (SELECT FROM pg_catalog.pg_depend dep WHERE dep.classid = 'pg_catalog.pg_attrdef'::pg_catalog.regclass "
					 "        AND dep.objid = d.oid AND dep.refobjid >= 16384 "
					 "        AND NOT (dep.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass AND dep.refobjid = a.attrelid)), "
					 "a.attidentity::pg_catalog.text "
					 "FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_type t ON t.oid = a.atttypid "
					 "LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum "
					 "WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped "
					 "AND ($2 OPERATOR(pg_catalog.=) 0 OR a.attnum OPERATOR(pg_catalog.=) $2) ORDER BY a.attnum",
					 2, argtypes, values, &nrows);
	if (only_attnum > 0 && nrows != 1)
		elog(ERROR, "ringshard: column %d of relation %u not found", only_attnum, relid);
	for (uint64 i = 0; i < nrows; i++)
	{
		HeapTuple	tuple = rows->vals[i];
		TupleDesc	desc = rows->tupdesc;
		char	   *name = SPI_getvalue(tuple, desc, 1);
		char	   *type = SPI_getvalue(tuple, desc, 2);
		char	   *notnull = SPI_getvalue(tuple, desc, 3);
		char	   *collation = SPI_getvalue(tuple, desc, 4);
		char	   *def = SPI_getvalue(tuple, desc, 5);
		char	   *generated = SPI_getvalue(tuple, desc, 6);
		bool		uses_objects = strcmp(SPI_getvalue(tuple, desc, 7), "t") == 0;
		char	   *identity = SPI_getvalue(tuple, desc, 8);

		if (identity && identity[0] != '\0')
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("column %s of table %s is an identity column", name, get_rel_name(relid)),
					 errdetail("The coordinator's table becomes a foreign table, which cannot have identity columns."),
					 errhint("Use a sequence default instead: bigserial, or DEFAULT nextval('seq').")));
		appendStringInfo(&buf, "%s%s %s", i ? ", " : "", name, type);
		if (collation)
			appendStringInfo(&buf, " COLLATE %s", collation);
		if (strcmp(notnull, "t") == 0)
			appendStringInfoString(&buf, " NOT NULL");
		if (def && generated && generated[0] == 's')
		{
			/* computed here, before the row is sent: a plain column on the nodes */
			if (!for_nodes)
				appendStringInfo(&buf, " GENERATED ALWAYS AS (%s) STORED", def);
		}
		else if (def && (!for_nodes || !uses_objects))
		{
			appendStringInfo(&buf, " DEFAULT %s", def);
			if (node_default && for_nodes)
				*node_default = pstrdup(def);
		}
	}
	return buf.data;
}

/* The column definitions of a relation (see column_definitions_of). */
char *
column_definitions(Oid relid, bool for_nodes)
{
	return column_definitions_of(relid, for_nodes, 0, NULL);
}

/* One column's definition on the nodes, and its default there (see column_definitions_of). */
char *
node_column_definition(Oid relid, AttrNumber attnum, char **node_default)
{
	return column_definitions_of(relid, true, attnum, node_default);
}

/* Whether the constraint conname of a relation has the column attnum among its columns. */
static bool
constraint_has_column(Oid relid, const char *conname, AttrNumber attnum)
{
	Oid			argtypes[3] = {OIDOID, TEXTOID, INT2OID};
	Datum		values[3];
	uint64		n;
	SPITupleTable *t;

	values[0] = ObjectIdGetDatum(relid);
	values[1] = CStringGetTextDatum(conname);
	values[2] = Int16GetDatum(attnum);
	t = spi_query("SELECT ($3 OPERATOR(pg_catalog.=) ANY (conkey)) "
				  "FROM pg_catalog.pg_constraint WHERE conrelid = $1 AND conname = $2::pg_catalog.name",
				  3, argtypes, values, &n);
	return n == 1 && strcmp(SPI_getvalue(t->vals[0], t->tupdesc, 1), "t") == 0;
}

/* The node-only parts of a table (PRIMARY KEY, UNIQUE and CHECK constraints, indexes) as statements. */
static List *
node_only_parts(Oid relid, const char *table, AttrNumber key_attnum, AttrNumber keyspace_attnum,
				List **names, bool for_local_table)
{
	uint64		nrows;
	SPITupleTable *rows;
	List	   *parts = NIL;
	char	   *key_column = get_attname(relid, key_attnum, false);

	rows = spi_query_relid("SELECT c.conname::pg_catalog.text, pg_catalog.pg_get_constraintdef(c.oid), c.contype::pg_catalog.text "
						   "FROM pg_catalog.pg_constraint c WHERE c.conrelid = $1 ORDER BY c.contype, c.conname",
						   relid, &nrows);
	for (uint64 i = 0; i < nrows; i++)
	{
		char	   *name = SPI_getvalue(rows->vals[i], rows->tupdesc, 1);
		char	   *def = SPI_getvalue(rows->vals[i], rows->tupdesc, 2);
		char		type = SPI_getvalue(rows->vals[i], rows->tupdesc, 3)[0];

		if (type == 'f')
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("table %s has the foreign key %s", get_rel_name(relid), quote_identifier(name)),
					 errdetail("A distributed table's rows live on several nodes, where no foreign key can be checked."),
					 errhint("Drop the foreign key first.")));
		if (type == 'x' || type == 't')
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("table %s has the %s %s, which a distributed table cannot have", get_rel_name(relid),
							type == 'x' ? "exclusion constraint" : "constraint trigger", quote_identifier(name))));
		if (type == 'p' || type == 'u')
		{
			/* the key (and a keyspace column) must be in it, or equal keys may land on different nodes */
			if (!constraint_has_column(relid, name, key_attnum))
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("unique constraint %s of table %s does not include the sharding key \"%s\"",
								quote_identifier(name), get_rel_name(relid), key_column),
						 errdetail("Rows with equal values in it can be on different nodes, where no node can see both."),
						 errhint("Add the key column to the constraint, or drop the constraint.")));
			if (keyspace_attnum > 0 && !constraint_has_column(relid, name, keyspace_attnum))
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("unique constraint %s of table %s does not include the keyspace column \"%s\"",
								quote_identifier(name), get_rel_name(relid), get_attname(relid, keyspace_attnum, false)),
						 errhint("Add the keyspace column to the constraint.")));
		}
		if (type == 'c' && !for_local_table)
			continue;			/* a foreign table keeps its CHECK constraints itself */
		if (type == 'n')
			continue;
		parts = lappend(parts, psprintf("ALTER TABLE %s ADD CONSTRAINT %s %s", table, quote_identifier(name), def));
		*names = lappend(*names, pstrdup(name));
	}

	/* indexes that back no constraint */
	rows = spi_query("SELECT (SELECT c.relname::pg_catalog.text FROM pg_catalog.pg_class c WHERE c.oid = i.indexrelid), "
					 "pg_catalog.pg_get_indexdef(i.indexrelid), i.indisunique, "
					 "($2::pg_catalog.int2 OPERATOR(pg_catalog.=) ANY (i.indkey::pg_catalog.int2[])) "
					 "FROM pg_catalog.pg_index i WHERE i.indrelid = $1 "
					 "AND NOT EXISTS (SELECT FROM pg_catalog.pg_constraint c WHERE c.conindid = i.indexrelid) "
					 "ORDER BY 1",
					 2, (Oid[]) {OIDOID, INT2OID}, (Datum[]) {ObjectIdGetDatum(relid), Int16GetDatum(key_attnum)}, &nrows);
	for (uint64 i = 0; i < nrows; i++)
	{
		char	   *name = SPI_getvalue(rows->vals[i], rows->tupdesc, 1);
		char	   *def = SPI_getvalue(rows->vals[i], rows->tupdesc, 2);
		bool		unique = strcmp(SPI_getvalue(rows->vals[i], rows->tupdesc, 3), "t") == 0;
		bool		has_key = strcmp(SPI_getvalue(rows->vals[i], rows->tupdesc, 4), "t") == 0;
		/*
		 * pg_get_indexdef() writes "CREATE [UNIQUE] INDEX <name> ON
		 * <schema.table> USING ...": the part from USING on is kept, found
		 * after that exact prefix (never by searching the text, which quoted
		 * names may contain).
		 */
		char	   *prefix = psprintf("CREATE %sINDEX %s ON %s USING ", unique ? "UNIQUE " : "",
									  quote_identifier(name),
									  quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
																 get_rel_name(relid)));

		if (unique && !has_key)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("unique index %s of table %s does not include the sharding key \"%s\"",
							quote_identifier(name), get_rel_name(relid), key_column),
					 errhint("Add the key column to the index, or drop the index.")));
		if (strncmp(def, prefix, strlen(prefix)) != 0)
			elog(ERROR, "ringshard: unexpected index definition: %s", def);
		/* the index of the table on the nodes, whatever the local table was called */
		parts = lappend(parts, psprintf("CREATE %sINDEX %s ON %s USING %s", unique ? "UNIQUE " : "",
										quote_identifier(name), table, def + strlen(prefix)));
		*names = lappend(*names, pstrdup(name));
	}
	return parts;
}

/* The SQL that creates (or adopts) a distributed table on a node. */
static char *
node_definition_sql(Oid relid, const char *schema, const char *table, List *parts, const char *annotation_args)
{
	StringInfoData buf;
	StringInfoData extra;
	ListCell   *lc;

	initStringInfo(&extra);
	appendStringInfoString(&extra, "ARRAY[");
	foreach(lc, parts)
		appendStringInfo(&extra, "%s%s", foreach_current_index(lc) ? ", " : "", quote_literal_cstr(lfirst(lc)));
	appendStringInfoString(&extra, "]::pg_catalog.text[]");

	initStringInfo(&buf);
	/* adopt_distributed_table creates the schema if it is missing */
	appendStringInfo(&buf, "SELECT ringshard_internal.adopt_distributed_table(%s, %s, %s, %s)",
					 quote_literal_cstr(table),
					 quote_literal_cstr(psprintf("CREATE TABLE %s (%s)", table, column_definitions(relid, true))),
					 extra.data, annotation_args);
	return buf.data;
}

/* The arguments of adopt_distributed_table after the SQL: key, ring, map, keyspace, keyspace column. */
static char *
annotation_arguments(Oid relid)
{
	uint64		nrows;
	SPITupleTable *rows;

	rows = spi_query_relid("SELECT pg_catalog.format('%L, %L, %L, %L, %L', key_column, coalesce(ring_name, ''), "
						   "coalesce(map_name, ''), coalesce(keyspace, ''), coalesce(keyspace_column::pg_catalog.text, '')) "
						   "FROM ringshard.distributed_tables WHERE table_name::pg_catalog.oid = $1",
						   relid, &nrows);
	if (nrows != 1)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table %s is not annotated with a sharding key", get_rel_name(relid)),
				 errhint("Annotate it first with ringshard.distribute_table() or ringshard.distribute_table_by_partition().")));
	return pstrdup(SPI_getvalue(rows->vals[0], rows->tupdesc, 1));
}

/* The node-only statements recorded for a distributed table. */
static List *
recorded_node_ddl(Oid relid)
{
	uint64		nrows;
	SPITupleTable *rows;
	List	   *parts = NIL;

	rows = spi_query_relid("SELECT x->>'sql' FROM ringshard.distributed_tables d, "
						   "pg_catalog.jsonb_array_elements(d.node_ddl) x WHERE d.table_name::pg_catalog.oid = $1",
						   relid, &nrows);
	for (uint64 i = 0; i < nrows; i++)
		parts = lappend(parts, pstrdup(SPI_getvalue(rows->vals[i], rows->tupdesc, 1)));
	return parts;
}

/* Record node-only statements (name, sql) for a table, replacing or appending. */
void
record_node_ddl(Oid relid, List *names, List *parts, bool replace)
{
	StringInfoData json;
	ListCell   *ln;
	ListCell   *lp;
	Oid			argtypes[2] = {OIDOID, TEXTOID};
	Datum		values[2];
	int			n;

	initStringInfo(&json);
	appendStringInfoChar(&json, '[');
	forboth(ln, names, lp, parts)
	{
		appendStringInfo(&json, "%s{\"name\": ", foreach_current_index(ln) ? ", " : "");
		escape_json(&json, lfirst(ln));
		appendStringInfoString(&json, ", \"sql\": ");
		escape_json(&json, lfirst(lp));
		appendStringInfoChar(&json, '}');
	}
	appendStringInfoChar(&json, ']');
	values[0] = ObjectIdGetDatum(relid);
	values[1] = CStringGetTextDatum(json.data);
	/* as the catalog's owner: administrators may not write node_ddl, which nodes run */
	(void) owner_catalog_query(replace
							   ? "UPDATE ringshard.distributed_tables SET node_ddl = $2::pg_catalog.jsonb "
							   "WHERE table_name::pg_catalog.oid OPERATOR(pg_catalog.=) $1"
							   : "UPDATE ringshard.distributed_tables SET node_ddl = node_ddl OPERATOR(pg_catalog.||) $2::pg_catalog.jsonb "
							   "WHERE table_name::pg_catalog.oid OPERATOR(pg_catalog.=) $1",
							   2, argtypes, values, false, &n);
}

/* ----- create_distributed_table ----- */

/* Refuse a table that other objects depend on, naming them. */
void
check_dependents(Oid relid)
{
	uint64		nrows;
	SPITupleTable *rows;

	rows = spi_query_relid("SELECT string_agg(what, ', ' ORDER BY what) FROM ("
						   " SELECT 'view ' OPERATOR(pg_catalog.||) r.ev_class::pg_catalog.regclass::pg_catalog.text AS what"
						   "   FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_rewrite r ON r.oid = d.objid"
						   "  WHERE d.classid = 'pg_catalog.pg_rewrite'::pg_catalog.regclass AND d.refobjid = $1 AND r.ev_class <> $1"
						   " UNION SELECT 'rule ' OPERATOR(pg_catalog.||) r.rulename FROM pg_catalog.pg_rewrite r WHERE r.ev_class = $1"
						   " UNION SELECT 'trigger ' OPERATOR(pg_catalog.||) t.tgname FROM pg_catalog.pg_trigger t"
						   "  WHERE t.tgrelid = $1 AND NOT t.tgisinternal"
						   " UNION SELECT 'foreign key ' OPERATOR(pg_catalog.||) c.conname OPERATOR(pg_catalog.||) ' of '"
						   "        OPERATOR(pg_catalog.||) c.conrelid::pg_catalog.regclass::pg_catalog.text"
						   "   FROM pg_catalog.pg_constraint c WHERE c.contype = 'f' AND (c.confrelid = $1 OR c.conrelid = $1)"
						   " UNION SELECT 'inheritance with ' OPERATOR(pg_catalog.||) i.inhrelid::pg_catalog.regclass::pg_catalog.text"
						   "   FROM pg_catalog.pg_inherits i WHERE i.inhparent = $1"
						   " UNION SELECT 'inheritance from ' OPERATOR(pg_catalog.||) i.inhparent::pg_catalog.regclass::pg_catalog.text"
						   "   FROM pg_catalog.pg_inherits i WHERE i.inhrelid = $1"
						   " UNION SELECT 'row security policy ' OPERATOR(pg_catalog.||) p.polname FROM pg_catalog.pg_policy p"
						   "  WHERE p.polrelid = $1"
						   " UNION SELECT 'row level security (enabled on the table: it hides every row from roles without a policy)'"
						   "   FROM pg_catalog.pg_class r WHERE r.oid = $1 AND (r.relrowsecurity OR r.relforcerowsecurity)"
						   " UNION SELECT 'publication ' OPERATOR(pg_catalog.||) p.pubname FROM pg_catalog.pg_publication_rel pr"
						   "   JOIN pg_catalog.pg_publication p ON p.oid = pr.prpubid WHERE pr.prrelid = $1"
						   ") x",
						   relid, &nrows);
	if (nrows == 1 && SPI_getvalue(rows->vals[0], rows->tupdesc, 1) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
				 errmsg("table %s cannot be distributed while other objects depend on it", get_rel_name(relid)),
				 errdetail("Depending on it: %s.", SPI_getvalue(rows->vals[0], rows->tupdesc, 1)),
				 errhint("Drop them first and create them again afterwards (views and rules work on the distributed table).")));
}

/*
 * Run the statements a query wrote (its first column), after reading them
 * all: each statement's own SPI call replaces the query's result.
 */
static void
run_statements_of(SPITupleTable *rows, uint64 nrows)
{
	List	   *statements = NIL;
	ListCell   *lc;

	for (uint64 i = 0; i < nrows; i++)
		statements = lappend(statements, pstrdup(SPI_getvalue(rows->vals[i], rows->tupdesc, 1)));
	foreach(lc, statements)
		spi_exec(lfirst(lc));
}

/* Copy comments and privileges from one relation to another (as the owner). */
static void
copy_comments_and_privileges(Oid from, Oid to, const char *new_table)
{
	Oid			argtypes[2] = {OIDOID, TEXTOID};
	Datum		values[2] = {ObjectIdGetDatum(from), CStringGetTextDatum(new_table)};
	uint64		nrows;
	SPITupleTable *rows;

	rows = spi_query("SELECT pg_catalog.format('COMMENT ON FOREIGN TABLE %s IS %L', $2, d.description)"
					 "  FROM pg_catalog.pg_description d WHERE d.objoid = $1 AND d.classoid = 'pg_catalog.pg_class'::pg_catalog.regclass"
					 "   AND d.objsubid = 0"
					 " UNION ALL SELECT pg_catalog.format('COMMENT ON COLUMN %s.%I IS %L', $2, a.attname, d.description)"
					 "  FROM pg_catalog.pg_description d JOIN pg_catalog.pg_attribute a ON a.attrelid = d.objoid AND a.attnum = d.objsubid"
					 " WHERE d.objoid = $1 AND d.classoid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.objsubid > 0"
					 " UNION ALL SELECT pg_catalog.format('GRANT %s ON %s TO %s%s', x.privilege_type, $2,"
					 "        CASE WHEN x.grantee = 0 THEN 'PUBLIC' ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(x.grantee)::pg_catalog.text) END,"
					 "        CASE WHEN x.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END)"
					 "  FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) x"
					 " WHERE c.oid = $1 AND x.grantee <> c.relowner"
					 " UNION ALL SELECT pg_catalog.format('GRANT %s (%I) ON %s TO %s%s', x.privilege_type, a.attname, $2,"
					 "        CASE WHEN x.grantee = 0 THEN 'PUBLIC' ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(x.grantee)::pg_catalog.text) END,"
					 "        CASE WHEN x.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END)"
					 "  FROM pg_catalog.pg_attribute a, pg_catalog.aclexplode(a.attacl) x"
					 " WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped",
					 2, argtypes, values, &nrows);
	run_statements_of(rows, nrows);
	/* sequences owned by the old columns belong to the new ones */
	rows = spi_query("SELECT pg_catalog.format('ALTER SEQUENCE %s OWNED BY %s.%I', d.objid::pg_catalog.regclass, $2, a.attname)"
					 "  FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid"
					 " WHERE d.refobjid = $1 AND d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.deptype = 'a'"
					 "   AND d.refobjsubid > 0"
					 "   AND (SELECT c.relkind FROM pg_catalog.pg_class c WHERE c.oid = d.objid) = 'S'",
					 2, argtypes, values, &nrows);
	run_statements_of(rows, nrows);
	(void) to;
}

/*
 * The swap at the heart of create_distributed_table: the local table steps
 * aside (renamed to *old_name, which is returned; the caller moves its rows
 * and drops it) and a foreign table of server ringshard_cluster takes its
 * name, with its columns (as column_definitions() gave them), its CHECK
 * constraints, comments, privileges, owner and owned sequences; the
 * annotation and placement follow the new table, whose rows are laid out
 * under the current topology from now on, and names/parts are recorded as
 * its node-only DDL.  Nothing is sent to a node: the upgrade from 1.0 uses it
 * on tables whose nodes already hold the rows (legacy_1_0.c).  The caller
 * holds an AccessExclusiveLock on the table and has run check_dependents().
 */
Oid
replace_by_foreign_table(Oid relid, const char *columns, List *names, List *parts, char **old_name)
{
	char	   *schema = get_namespace_name(get_rel_namespace(relid));
	char	   *relname = get_rel_name(relid);
	char	   *table = quote_qualified_identifier(schema, relname);
	Oid			owner = catalog_relation_owner(relid);
	Oid			new_relid;
	int			qualified;
	uint64		nrows;
	SPITupleTable *rows;

	*old_name = psprintf("%.40s_ringshard_%u", relname, relid);
	ringshard_ddl_internal = true;
	PG_TRY();
	{
	spi_exec(psprintf("ALTER TABLE %s RENAME TO %s", table, quote_identifier(*old_name)));
	spi_exec(psprintf("CREATE FOREIGN TABLE %s (%s) SERVER %s", table, columns, CLUSTER_SERVER));
	new_relid = RangeVarGetRelid(makeRangeVar(schema, relname, -1), NoLock, false);
	{
		/* CHECK constraints stay visible here too (the nodes enforce them) */
		Oid			argtypes[2] = {OIDOID, TEXTOID};
		Datum		values[2] = {ObjectIdGetDatum(relid), CStringGetTextDatum(table)};
		List	   *checks = NIL;
		ListCell   *lc;

		qualified = begin_qualified_names();
		rows = spi_query("SELECT pg_catalog.format('ALTER FOREIGN TABLE %s ADD CONSTRAINT %I %s', $2::pg_catalog.text, "
						 "c.conname, pg_catalog.pg_get_constraintdef(c.oid)) FROM pg_catalog.pg_constraint c "
						 "WHERE c.conrelid = $1 AND c.contype = 'c'", 2, argtypes, values, &nrows);
		end_qualified_names(qualified);
		for (uint64 i = 0; i < nrows; i++)
			checks = lappend(checks, pstrdup(SPI_getvalue(rows->vals[i], rows->tupdesc, 1)));
		foreach(lc, checks)
			spi_exec(lfirst(lc));
	}
	/* the owner first: sequences owned by its columns must have the same */
	if (owner != GetUserId())
		spi_exec(psprintf("ALTER FOREIGN TABLE %s OWNER TO %s", table,
						  quote_identifier(GetUserNameFromId(owner, false))));
	copy_comments_and_privileges(relid, new_relid, table);
	{
		Oid			argtypes[2] = {OIDOID, OIDOID};
		Datum		values[2] = {ObjectIdGetDatum(relid), ObjectIdGetDatum(new_relid)};
		int			changed;

		(void) owner_catalog_query("UPDATE ringshard.distributed_tables SET table_name = $2::pg_catalog.regclass "
								   "WHERE table_name::pg_catalog.oid OPERATOR(pg_catalog.=) $1", 2, argtypes, values, false, &changed);
		(void) owner_catalog_query("UPDATE ringshard.placements SET table_name = $2::pg_catalog.regclass "
								   "WHERE table_name::pg_catalog.oid OPERATOR(pg_catalog.=) $1", 2, argtypes, values, false, &changed);
		/* its rows are laid out under the current topology from now on */
		(void) owner_catalog_query("INSERT INTO ringshard.placements (table_name, snapshot) "
								   "VALUES ($2::pg_catalog.regclass, ringshard_internal.placement_snapshot($2::pg_catalog.regclass)) "
								   "ON CONFLICT (table_name) DO UPDATE SET snapshot = EXCLUDED.snapshot, "
								   "placed_at = pg_catalog.now()", 2, argtypes, values, false, &changed);
	}
	record_node_ddl(new_relid, names, parts, true);
	}
	PG_FINALLY();
	{
		ringshard_ddl_internal = false;
	}
	PG_END_TRY();

	return new_relid;
}

PG_FUNCTION_INFO_V1(ringshard_create_distributed_table);

/*
 * create_distributed_table(table): make an annotated table a distributed
 * table (see the file header).  Returns how many rows moved to the nodes.
 */
Datum
ringshard_create_distributed_table(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	char	   *schema;
	char	   *relname;
	char	   *table;
	char	   *old_name;
	char	   *annotation;
	AttrNumber	key_attnum;
	AttrNumber	keyspace_attnum;
	Oid			key_type;
	List	   *names = NIL;
	List	   *parts;
	int			qualified;
	int64		moved = 0;
	char	   *columns;
	uint64		nrows;
	SPITupleTable *rows;

	if (get_rel_name(relid) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	if (!pg_class_ownercheck(relid, GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, OBJECT_TABLE, get_rel_name(relid));
	SPI_connect();
	schema = get_namespace_name(get_rel_namespace(relid));
	relname = get_rel_name(relid);
	table = quote_qualified_identifier(schema, relname);
	annotation = annotation_arguments(relid);
	rsfdw_table_info(relid, &key_attnum, &key_type, &keyspace_attnum);
	check_nodes_prepared_transactions();

	/* Already distributed: (re)create it on the nodes that lack it. */
	if (is_distributed_table(relid))
	{
		qualified = begin_qualified_names();
		parts = recorded_node_ddl(relid);
		run_on_all_nodes(node_definition_sql(relid, schema, table, parts, annotation), true);
		end_qualified_names(qualified);
		SPI_finish();
		PG_RETURN_INT64(0);
	}
	if (get_rel_relkind(relid) != RELKIND_RELATION)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("%s is not an ordinary table", relname),
				 errhint("Distribute an ordinary table; partitioned and foreign tables cannot be.")));

	LockRelationOid(relid, AccessExclusiveLock);
	check_dependents(relid);

	/* The definition, with every name qualified. */
	qualified = begin_qualified_names();
	parts = node_only_parts(relid, table, key_attnum, keyspace_attnum, &names, true);
	columns = column_definitions(relid, false);
	run_on_all_nodes(node_definition_sql(relid, schema, table, parts, annotation), true);
	end_qualified_names(qualified);

	/* The local table steps aside; a foreign table takes its name. */
	(void) replace_by_foreign_table(relid, columns, names, parts, &old_name);

	/* Rows already in the table go to their replicas, with progress. */
	rows = spi_query(psprintf("SELECT pg_catalog.count(*) FROM %s.%s", quote_identifier(schema),
							  quote_identifier(old_name)), 0, NULL, NULL, &nrows);
	rsfdw_progress_total = strtoll(SPI_getvalue(rows->vals[0], rows->tupdesc, 1), NULL, 10);
	PG_TRY();
	{
		if (rsfdw_progress_total > 0)
		{
			(void) spi_query(psprintf("INSERT INTO %s SELECT * FROM %s.%s", table, quote_identifier(schema),
									  quote_identifier(old_name)), 0, NULL, NULL, &nrows);
			moved = (int64) nrows;
		}
	}
	PG_FINALLY();
	{
		rsfdw_progress_total = -1;
		operation_progress_done();
	}
	PG_END_TRY();
	ringshard_ddl_internal = true;
	PG_TRY();
	{
		spi_exec(psprintf("DROP TABLE %s.%s", quote_identifier(schema), quote_identifier(old_name)));
	}
	PG_FINALLY();
	{
		ringshard_ddl_internal = false;
	}
	PG_END_TRY();
	SPI_finish();
	ereport(NOTICE,
			(errmsg("table %s is distributed: " INT64_FORMAT " rows moved to their nodes", relname, moved)));
	PG_RETURN_INT64(moved);
}

PG_FUNCTION_INFO_V1(ringshard_push_table_definition);

/* push_table_definition(table): create a distributed table on the nodes that lack it. */
Datum
ringshard_push_table_definition(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	char	   *schema;
	char	   *table;
	int			qualified;
	int			nnodes;

	if (!is_distributed_table(relid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s is not a distributed table", get_rel_name(relid) ? get_rel_name(relid) : "?"),
				 errhint("Make it one with ringshard.create_distributed_table().")));
	SPI_connect();
	schema = get_namespace_name(get_rel_namespace(relid));
	table = quote_qualified_identifier(schema, get_rel_name(relid));
	qualified = begin_qualified_names();
	nnodes = run_on_all_nodes(node_definition_sql(relid, schema, table, recorded_node_ddl(relid),
												  annotation_arguments(relid)), true);
	end_qualified_names(qualified);
	SPI_finish();
	PG_RETURN_TEXT_P(cstring_to_text(psprintf("table %s is defined on %d node%s (created where it was missing)",
											  table, nnodes, nnodes == 1 ? "" : "s")));
}

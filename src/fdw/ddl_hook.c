/*
 * ddl_hook.c
 *		DDL on a distributed table reaches every node in the same transaction,
 *		or is refused with the reason: never applied to the coordinator alone.
 *
 * Supported: ALTER TABLE ADD/DROP/RENAME COLUMN, SET/DROP DEFAULT, SET/DROP
 * NOT NULL, ALTER COLUMN TYPE (not of the key), ADD/DROP CONSTRAINT (CHECK
 * here and on the nodes; PRIMARY KEY and UNIQUE on the nodes, which must
 * include the sharding key), OWNER TO (here only), RENAME TO; CREATE INDEX
 * and DROP INDEX (on the nodes); DROP TABLE (everywhere).  SQL for the nodes
 * is built from the catalog after the local change, with qualified names.
 */
#include "postgres.h"

#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_constraint.h"
#include "commands/defrem.h"
#include "commands/event_trigger.h"
#include "foreign/foreign.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "parser/parse_utilcmd.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/ruleutils.h"

#include "fdw/ddl.h"
#include "remote/catalog.h"
#include "fdw/deparse.h"
#include "fdw/fdw.h"
#include "remote/queue.h"

static ProcessUtility_hook_type previous_utility_hook = NULL;

bool		ringshard_ddl_internal = false;

/* How deep we are inside ringshard_process_utility (the guard's proof that the hook ran). */
static int	hook_depth = 0;

/* Run a (changed) utility statement the normal way. */
static void
run_utility(PlannedStmt *pstmt, Node *stmt, const char *queryString, ProcessUtilityContext context,
			ParamListInfo params, QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc)
{
	PlannedStmt *copy = copyObject(pstmt);

	copy->utilityStmt = stmt;
	if (previous_utility_hook)
		previous_utility_hook(copy, queryString, false, context, params, queryEnv, dest, qc);
	else
		standard_ProcessUtility(copy, queryString, false, context, params, queryEnv, dest, qc);
}

static void
refuse(Oid relid, const char *what, const char *why)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("%s is not supported on distributed table %s", what, get_rel_name(relid)),
			 why ? errdetail("%s", why) : 0,
			 errhint("Supported: ADD/DROP/RENAME COLUMN, SET/DROP DEFAULT, SET/DROP NOT NULL, ALTER COLUMN TYPE, "
					 "ADD/DROP CONSTRAINT, RENAME, OWNER TO, CREATE/DROP INDEX, DROP TABLE.")));
}

static char *
table_name(Oid relid)
{
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)), get_rel_name(relid));
}

/* The name of the sharding key (and keyspace) columns of a distributed table. */
static void
key_columns(Oid relid, char **key, char **keyspace)
{
	AttrNumber	key_attnum;
	AttrNumber	keyspace_attnum;
	Oid			key_type;

	rsfdw_table_info(relid, &key_attnum, &key_type, &keyspace_attnum);
	*key = get_attname(relid, key_attnum, false);
	*keyspace = keyspace_attnum > 0 ? get_attname(relid, keyspace_attnum, false) : NULL;
}

/* A unique constraint or index must cover the key (and keyspace) column. */
static void
check_unique_columns(Oid relid, List *column_names, const char *what)
{
	char	   *key;
	char	   *keyspace;
	bool		has_key = false;
	bool		has_keyspace = false;
	ListCell   *lc;

	key_columns(relid, &key, &keyspace);
	foreach(lc, column_names)
	{
		has_key |= strcmp(lfirst(lc), key) == 0;
		has_keyspace |= keyspace && strcmp(lfirst(lc), keyspace) == 0;
	}
	if (!has_key || (keyspace && !has_keyspace))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s on distributed table %s does not include the sharding key \"%s\"%s", what,
						get_rel_name(relid), key, keyspace && !has_keyspace ? " and its keyspace column" : ""),
				 errdetail("Rows with equal values in it can be on different nodes, where no node can see both."),
				 errhint("Include the key column.")));
}

/* Whether a name is among the node-only parts of a table; its table if so. */
static Oid
node_ddl_owner(const char *name, Oid namespace_hint)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(name)};
	uint64		n;
	SPITupleTable *rows;

	rows = spi_query("SELECT d.table_name::pg_catalog.oid FROM ringshard.distributed_tables d, "
					 "pg_catalog.jsonb_array_elements(d.node_ddl) x WHERE x->>'name' = $1",
					 1, argtypes, values, &n);
	for (uint64 i = 0; i < n; i++)
	{
		Oid			relid = (Oid) strtoul(SPI_getvalue(rows->vals[i], rows->tupdesc, 1), NULL, 10);

		if (!OidIsValid(namespace_hint) || get_rel_namespace(relid) == namespace_hint)
			return relid;
	}
	return InvalidOid;
}

static void
forget_node_ddl(Oid relid, const char *name)
{
	Oid			argtypes[2] = {OIDOID, TEXTOID};
	Datum		values[2] = {ObjectIdGetDatum(relid), CStringGetTextDatum(name)};
	int			n;

	/* as the catalog's owner: administrators may not write node_ddl, which nodes run */
	(void) owner_catalog_query("UPDATE ringshard.distributed_tables SET node_ddl = coalesce((SELECT pg_catalog.jsonb_agg(x) "
							   "FROM pg_catalog.jsonb_array_elements(node_ddl) x "
							   "WHERE x OPERATOR(pg_catalog.->>) 'name' OPERATOR(pg_catalog.<>) $2), '[]') "
							   "WHERE table_name::pg_catalog.oid OPERATOR(pg_catalog.=) $1", 2, argtypes, values, false, &n);
}

/* ALTER TABLE on a distributed table. */
static void
alter_table(PlannedStmt *pstmt, AlterTableStmt *stmt, Oid relid, const char *queryString,
			ProcessUtilityContext context, ParamListInfo params, QueryEnvironment *queryEnv,
			DestReceiver *dest, QueryCompletion *qc)
{
	AlterTableStmt *local = copyObject(stmt);
	List	   *after = NIL;	/* per command: what to send, decided after the local change */
	List	   *node_only_names = NIL;
	List	   *node_only_sql = NIL;
	List	   *dropped_node_only = NIL;
	ListCell   *lc;
	char	   *table = table_name(relid);
	char	   *key;
	char	   *keyspace;
	int			qualified;
	StringInfoData sql;

	key_columns(relid, &key, &keyspace);
	local->cmds = NIL;
	foreach(lc, stmt->cmds)
	{
		AlterTableCmd *cmd = lfirst(lc);

		switch (cmd->subtype)
		{
			case AT_AddColumn:
				{
					ColumnDef  *def = (ColumnDef *) cmd->def;
					ListCell   *c;

					foreach(c, def->constraints)
					{
						Constraint *con = lfirst(c);

						if (con->contype == CONSTR_PRIMARY || con->contype == CONSTR_UNIQUE ||
							con->contype == CONSTR_FOREIGN || con->contype == CONSTR_EXCLUSION ||
							con->contype == CONSTR_IDENTITY)
							refuse(relid, "a new column with a key, unique, identity or foreign-key constraint",
								   "Add the column first, then the constraint (a unique one must include the sharding key).");
					}
					local->cmds = lappend(local->cmds, cmd);
					after = lappend(after, list_make2(makeString("add column"), makeString(def->colname)));
					break;
				}
			case AT_DropColumn:
				if (strcmp(cmd->name, key) == 0 || (keyspace && strcmp(cmd->name, keyspace) == 0))
					refuse(relid, "dropping the sharding key column", "It places every row on its nodes.");
				local->cmds = lappend(local->cmds, cmd);
				after = lappend(after, list_make1(makeString(psprintf("ALTER TABLE %s DROP COLUMN IF EXISTS %s%s", table,
																	 quote_identifier(cmd->name),
																	 cmd->behavior == DROP_CASCADE ? " CASCADE" : ""))));
				break;
			case AT_ColumnDefault:
			case AT_SetNotNull:
			case AT_DropNotNull:
				local->cmds = lappend(local->cmds, cmd);
				after = lappend(after, list_make2(makeString(cmd->subtype == AT_ColumnDefault ? "default"
															  : cmd->subtype == AT_SetNotNull ? "set not null" : "drop not null"),
												  makeString(cmd->name)));
				break;
			case AT_AlterColumnType:
				{
					ColumnDef  *def = (ColumnDef *) cmd->def;

					if (strcmp(cmd->name, key) == 0 || (keyspace && strcmp(cmd->name, keyspace) == 0))
						refuse(relid, "changing the type of the sharding key column",
							   "Equal keys of another type may route to other nodes.");
					if (def->raw_default)
						refuse(relid, "ALTER COLUMN TYPE ... USING", "The nodes convert the values with the type's cast.");
					local->cmds = lappend(local->cmds, cmd);
					after = lappend(after, list_make2(makeString("type"), makeString(cmd->name)));
					break;
				}
			case AT_AddConstraint:
				{
					Constraint *con = (Constraint *) cmd->def;

					if (con->contype == CONSTR_CHECK)
					{
						if (con->conname == NULL)
							refuse(relid, "an unnamed CHECK constraint", "Name it (ADD CONSTRAINT name CHECK (...)) "
								   "so that the nodes' copy has the same name.");
						local->cmds = lappend(local->cmds, cmd);
						after = lappend(after, list_make2(makeString("check"), makeString(con->conname)));
					}
					else if (con->contype == CONSTR_PRIMARY || con->contype == CONSTR_UNIQUE)
					{
						List	   *columns = NIL;
						StringInfoData def;
						ListCell   *k;
						char	   *name = con->conname;

						foreach(k, con->keys)
							columns = lappend(columns, strVal(lfirst(k)));
						check_unique_columns(relid, columns, con->contype == CONSTR_PRIMARY ? "a primary key" : "a unique constraint");
						if (name == NULL)
							name = ChooseConstraintName(get_rel_name(relid),
														con->contype == CONSTR_PRIMARY ? NULL : strVal(linitial(con->keys)),
														con->contype == CONSTR_PRIMARY ? "pkey" : "key",
														get_rel_namespace(relid), NIL);
						initStringInfo(&def);
						appendStringInfo(&def, "ALTER TABLE %s ADD CONSTRAINT %s %s (", table, quote_identifier(name),
										 con->contype == CONSTR_PRIMARY ? "PRIMARY KEY" : "UNIQUE");
						foreach(k, con->keys)
							appendStringInfo(&def, "%s%s", foreach_current_index(k) ? ", " : "",
											 quote_identifier(strVal(lfirst(k))));
						appendStringInfoChar(&def, ')');
						if (con->including)
						{
							appendStringInfoString(&def, " INCLUDE (");
							foreach(k, con->including)
								appendStringInfo(&def, "%s%s", foreach_current_index(k) ? ", " : "",
												 quote_identifier(strVal(lfirst(k))));
							appendStringInfoChar(&def, ')');
						}
						node_only_names = lappend(node_only_names, pstrdup(name));
						node_only_sql = lappend(node_only_sql, def.data);
						after = lappend(after, list_make1(makeString(def.data)));
					}
					else
						refuse(relid, con->contype == CONSTR_FOREIGN ? "a foreign key" : "this kind of constraint",
							   "A distributed table's rows live on several nodes, where it cannot be checked.");
					break;
				}
			case AT_DropConstraint:
				{
					Oid			owner = node_ddl_owner(cmd->name, get_rel_namespace(relid));

					if (owner == relid)
					{
						dropped_node_only = lappend(dropped_node_only, cmd->name);
						after = lappend(after, list_make1(makeString(psprintf("ALTER TABLE %s DROP CONSTRAINT IF EXISTS %s%s",
																			 table, quote_identifier(cmd->name),
																			 cmd->behavior == DROP_CASCADE ? " CASCADE" : ""))));
					}
					else
					{
						local->cmds = lappend(local->cmds, cmd);
						after = lappend(after, list_make1(makeString(psprintf("ALTER TABLE %s DROP CONSTRAINT %s%s%s",
																			 table, cmd->missing_ok ? "IF EXISTS " : "",
																			 quote_identifier(cmd->name),
																			 cmd->behavior == DROP_CASCADE ? " CASCADE" : ""))));
					}
					break;
				}
			case AT_ChangeOwner:
				local->cmds = lappend(local->cmds, cmd);
				break;
			default:
				refuse(relid, "this ALTER TABLE subcommand", NULL);
		}
	}

	if (local->cmds != NIL)
		run_utility(pstmt, (Node *) local, queryString, context, params, queryEnv, dest, qc);
	else if (qc)
		SetQueryCompletion(qc, CMDTAG_ALTER_TABLE, 0);

	/* What the nodes must do, now that the catalog shows the result. */
	SPI_connect();
	qualified = begin_qualified_names();
	initStringInfo(&sql);
	foreach(lc, after)
	{
		List	   *item = lfirst(lc);
		char	   *kind = strVal(linitial(item));

		if (list_length(item) == 1)
			appendStringInfo(&sql, "%s;", kind);
		else
		{
			char	   *column = strVal(lsecond(item));

			if (strcmp(kind, "add column") == 0)
				appendStringInfo(&sql, "ALTER TABLE %s ADD COLUMN %s;", table,
								 node_column_definition(relid, get_attnum(relid, column), NULL));
			else if (strcmp(kind, "default") == 0)
			{
				char	   *node_default;

				(void) node_column_definition(relid, get_attnum(relid, column), &node_default);
				if (node_default)
					appendStringInfo(&sql, "ALTER TABLE %s ALTER COLUMN %s SET DEFAULT %s;", table,
									 quote_identifier(column), node_default);
				else
					appendStringInfo(&sql, "ALTER TABLE %s ALTER COLUMN %s DROP DEFAULT;", table,
									 quote_identifier(column));
			}
			else if (strcmp(kind, "set not null") == 0 || strcmp(kind, "drop not null") == 0)
				appendStringInfo(&sql, "ALTER TABLE %s ALTER COLUMN %s %s NOT NULL;", table, quote_identifier(column),
								 kind[0] == 's' ? "SET" : "DROP");
			else if (strcmp(kind, "type") == 0)
			{
				AttrNumber	attnum = get_attnum(relid, column);
				Oid			typid;
				int32		typmod;
				Oid			collid;

				get_atttypetypmodcoll(relid, attnum, &typid, &typmod, &collid);
				appendStringInfo(&sql, "ALTER TABLE %s ALTER COLUMN %s TYPE %s;", table, quote_identifier(column),
								 format_type_with_typemod(typid, typmod));
			}
			else if (strcmp(kind, "check") == 0)
			{
				Oid			conid = get_relation_constraint_oid(relid, column, false);

				appendStringInfo(&sql, "ALTER TABLE %s ADD CONSTRAINT %s %s;", table, quote_identifier(column),
								 TextDatumGetCString(DirectFunctionCall1(pg_get_constraintdef, ObjectIdGetDatum(conid))));
			}
		}
	}
	if (sql.len > 0)
		run_on_all_nodes(sql.data);
	foreach(lc, dropped_node_only)
		forget_node_ddl(relid, lfirst(lc));
	if (node_only_names)
		record_node_ddl(relid, node_only_names, node_only_sql, false);
	end_qualified_names(qualified);
	SPI_finish();
}

/* CREATE INDEX on a distributed table: on the nodes only. */
static void
create_index(IndexStmt *stmt, Oid relid, const char *queryString, QueryCompletion *qc)
{
	IndexStmt  *cooked;
	StringInfoData sql;
	ListCell   *lc;
	List	   *columns = NIL;
	char	   *name;
	List	   *context;
	int			qualified;

	if (stmt->concurrent)
		refuse(relid, "CREATE INDEX CONCURRENTLY", "The index is built on every node in the coordinator's transaction.");
	cooked = transformIndexStmt(relid, copyObject(stmt), queryString);
	name = cooked->idxname ? cooked->idxname
		: ChooseRelationName(get_rel_name(relid),
							 cooked->indexParams && ((IndexElem *) linitial(cooked->indexParams))->name
							 ? ((IndexElem *) linitial(cooked->indexParams))->name : NULL,
							 cooked->unique ? "key" : "idx", get_rel_namespace(relid), false);
	SPI_connect();
	qualified = begin_qualified_names();
	context = deparse_context_for(get_rel_name(relid), relid);
	initStringInfo(&sql);
	appendStringInfo(&sql, "CREATE %sINDEX %s%s ON %s USING %s (", cooked->unique ? "UNIQUE " : "",
					 cooked->if_not_exists ? "IF NOT EXISTS " : "", quote_identifier(name), table_name(relid),
					 quote_identifier(cooked->accessMethod));
	foreach(lc, cooked->indexParams)
	{
		IndexElem  *elem = lfirst(lc);

		if (foreach_current_index(lc) > 0)
			appendStringInfoString(&sql, ", ");
		if (elem->name)
		{
			appendStringInfoString(&sql, quote_identifier(elem->name));
			columns = lappend(columns, elem->name);
		}
		else
			appendStringInfo(&sql, "(%s)", deparse_expression(elem->expr, context, false, false));
		if (elem->collation)
			appendStringInfo(&sql, " COLLATE %s", NameListToQuotedString(elem->collation));
		if (elem->opclass)
			appendStringInfo(&sql, " %s", NameListToQuotedString(elem->opclass));
		if (elem->ordering == SORTBY_DESC)
			appendStringInfoString(&sql, " DESC");
		if (elem->nulls_ordering == SORTBY_NULLS_FIRST)
			appendStringInfoString(&sql, " NULLS FIRST");
		else if (elem->nulls_ordering == SORTBY_NULLS_LAST)
			appendStringInfoString(&sql, " NULLS LAST");
	}
	appendStringInfoChar(&sql, ')');
	if (cooked->indexIncludingParams)
	{
		appendStringInfoString(&sql, " INCLUDE (");
		foreach(lc, cooked->indexIncludingParams)
			appendStringInfo(&sql, "%s%s", foreach_current_index(lc) ? ", " : "",
							 quote_identifier(((IndexElem *) lfirst(lc))->name));
		appendStringInfoChar(&sql, ')');
	}
	if (cooked->whereClause)
		appendStringInfo(&sql, " WHERE %s", deparse_expression(cooked->whereClause, context, false, false));
	if (cooked->unique)
		check_unique_columns(relid, columns, "a unique index");
	run_on_all_nodes(sql.data);
	record_node_ddl(relid, list_make1(pstrdup(name)), list_make1(sql.data), false);
	end_qualified_names(qualified);
	SPI_finish();
	if (qc)
		SetQueryCompletion(qc, CMDTAG_CREATE_INDEX, 0);
}

/* DROP TABLE / FOREIGN TABLE / INDEX naming distributed tables or their node-only indexes. */
static bool
drop_objects(PlannedStmt *pstmt, DropStmt *stmt, const char *queryString, ProcessUtilityContext context,
			 ParamListInfo params, QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc)
{
	List	   *distributed = NIL;	/* names of distributed tables */
	List	   *others = NIL;
	List	   *node_sql = NIL;
	List	   *node_index_owner = NIL;
	List	   *node_index_name = NIL;
	ListCell   *lc;

	foreach(lc, stmt->objects)
	{
		List	   *names = lfirst(lc);
		RangeVar   *rv = makeRangeVarFromNameList(names);

		if (stmt->removeType == OBJECT_INDEX)
		{
			Oid			namespace = rv->schemaname ? get_namespace_oid(rv->schemaname, true) : InvalidOid;
			Oid			owner;

			SPI_connect();
			owner = node_ddl_owner(rv->relname, namespace);
			SPI_finish();
			if (OidIsValid(owner) && !OidIsValid(RangeVarGetRelid(rv, NoLock, true)))
			{
				node_sql = lappend(node_sql, psprintf("DROP INDEX IF EXISTS %s%s",
													 quote_qualified_identifier(get_namespace_name(get_rel_namespace(owner)),
																				rv->relname),
													 stmt->behavior == DROP_CASCADE ? " CASCADE" : ""));
				node_index_owner = lappend_oid(node_index_owner, owner);
				node_index_name = lappend(node_index_name, rv->relname);
				continue;
			}
			others = lappend(others, names);
			continue;
		}
		{
			Oid			relid = RangeVarGetRelid(rv, NoLock, true);

			if (is_distributed_table(relid))
			{
				distributed = lappend(distributed, names);
				node_sql = lappend(node_sql, psprintf("DROP TABLE IF EXISTS %s%s", table_name(relid),
													 stmt->behavior == DROP_CASCADE ? " CASCADE" : ""));
				queue_forget_table(relid);
			}
			else
				others = lappend(others, names);
		}
	}
	if (node_sql == NIL)
		return false;

	/*
	 * The nodes first: dropping the table here may forget nodes that only
	 * held its rows (and their servers).  All of it commits or rolls back
	 * together.
	 */
	foreach(lc, node_sql)
		run_on_all_nodes(lfirst(lc));
	if (others != NIL)
	{
		DropStmt   *rest = copyObject(stmt);

		rest->objects = others;
		run_utility(pstmt, (Node *) rest, queryString, context, params, queryEnv, dest, qc);
	}
	if (distributed != NIL)
	{
		DropStmt   *tables = copyObject(stmt);

		tables->objects = distributed;
		tables->removeType = OBJECT_FOREIGN_TABLE;
		run_utility(pstmt, (Node *) tables, queryString, context, params, queryEnv, dest, qc);
	}
	if (node_index_owner != NIL)
	{
		ListCell   *o;
		ListCell   *n;

		SPI_connect();
		forboth(o, node_index_owner, n, node_index_name)
			forget_node_ddl(lfirst_oid(o), lfirst(n));
		SPI_finish();
	}
	if (qc && qc->commandTag == CMDTAG_UNKNOWN)
		SetQueryCompletion(qc, stmt->removeType == OBJECT_INDEX ? CMDTAG_DROP_INDEX : CMDTAG_DROP_TABLE, 0);
	return true;
}

/* ALTER TABLE ... RENAME on a distributed table. */
static bool
rename_object(PlannedStmt *pstmt, RenameStmt *stmt, const char *queryString, ProcessUtilityContext context,
			  ParamListInfo params, QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc)
{
	Oid			relid;
	char	   *sql;

	if (stmt->relation == NULL ||
		(stmt->renameType != OBJECT_COLUMN && stmt->renameType != OBJECT_TABLE &&
		 stmt->renameType != OBJECT_FOREIGN_TABLE && stmt->renameType != OBJECT_TABCONSTRAINT))
		return false;
	relid = RangeVarGetRelid(stmt->relation, NoLock, true);
	if (!is_distributed_table(relid))
		return false;
	if (stmt->renameType == OBJECT_TABCONSTRAINT)
		refuse(relid, "renaming a constraint", NULL);
	if (stmt->renameType == OBJECT_COLUMN)
		sql = psprintf("ALTER TABLE %s RENAME COLUMN %s TO %s", table_name(relid), quote_identifier(stmt->subname),
					   quote_identifier(stmt->newname));
	else
	{
		RenameStmt *as_foreign = copyObject(stmt);

		sql = psprintf("ALTER TABLE %s RENAME TO %s", table_name(relid), quote_identifier(stmt->newname));
		as_foreign->renameType = OBJECT_FOREIGN_TABLE;
		stmt = as_foreign;
	}
	run_utility(pstmt, (Node *) stmt, queryString, context, params, queryEnv, dest, qc);
	run_on_all_nodes(sql);
	return true;
}

static void ringshard_process_utility_body(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
										   ProcessUtilityContext context, ParamListInfo params,
										   QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc);

static void
ringshard_process_utility(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
						  ProcessUtilityContext context, ParamListInfo params, QueryEnvironment *queryEnv,
						  DestReceiver *dest, QueryCompletion *qc)
{
	hook_depth++;
	PG_TRY();
	{
		ringshard_process_utility_body(pstmt, queryString, readOnlyTree, context, params, queryEnv, dest, qc);
	}
	PG_FINALLY();
	{
		hook_depth--;
	}
	PG_END_TRY();
}

static void
ringshard_process_utility_body(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
							   ProcessUtilityContext context, ParamListInfo params, QueryEnvironment *queryEnv,
							   DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *parsetree = pstmt->utilityStmt;

	/* Only when the extension is here and the statement names a distributed table. */
	if (!ringshard_ddl_internal && get_foreign_server_oid(CLUSTER_SERVER, true) != InvalidOid)
	{
		if (readOnlyTree)
			parsetree = copyObject(parsetree);
		switch (nodeTag(parsetree))
		{
			case T_AlterTableStmt:
				{
					AlterTableStmt *stmt = (AlterTableStmt *) parsetree;
					Oid			relid = RangeVarGetRelid(stmt->relation, NoLock, true);

					if (is_distributed_table(relid))
					{
						alter_table(pstmt, stmt, relid, queryString, context, params, queryEnv, dest, qc);
						return;
					}
					break;
				}
			case T_IndexStmt:
				{
					IndexStmt  *stmt = (IndexStmt *) parsetree;
					Oid			relid = RangeVarGetRelid(stmt->relation, NoLock, true);

					if (is_distributed_table(relid))
					{
						create_index(stmt, relid, queryString, qc);
						return;
					}
					break;
				}
			case T_DropStmt:
				{
					DropStmt   *stmt = (DropStmt *) parsetree;

					if ((stmt->removeType == OBJECT_TABLE || stmt->removeType == OBJECT_FOREIGN_TABLE ||
						 stmt->removeType == OBJECT_INDEX) &&
						drop_objects(pstmt, stmt, queryString, context, params, queryEnv, dest, qc))
						return;
					break;
				}
			case T_RenameStmt:
				if (rename_object(pstmt, (RenameStmt *) parsetree, queryString, context, params, queryEnv, dest, qc))
					return;
				break;
			case T_AlterObjectSchemaStmt:
				{
					AlterObjectSchemaStmt *stmt = (AlterObjectSchemaStmt *) parsetree;

					if (stmt->relation && is_distributed_table(RangeVarGetRelid(stmt->relation, NoLock, true)))
						refuse(RangeVarGetRelid(stmt->relation, NoLock, true), "SET SCHEMA", NULL);
					break;
				}
			default:
				break;
		}
	}
	if (previous_utility_hook)
		previous_utility_hook(pstmt, queryString, readOnlyTree, context, params, queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context, params, queryEnv, dest, qc);
}

void
rsfdw_ddl_init(void)
{
	previous_utility_hook = ProcessUtility_hook;
	ProcessUtility_hook = ringshard_process_utility;
}

/* Whether a utility statement names a distributed table (or a node-only index of one). */
static bool
names_distributed_table(Node *parsetree)
{
	switch (nodeTag(parsetree))
	{
		case T_AlterTableStmt:
			return is_distributed_table(RangeVarGetRelid(((AlterTableStmt *) parsetree)->relation, NoLock, true));
		case T_IndexStmt:
			return is_distributed_table(RangeVarGetRelid(((IndexStmt *) parsetree)->relation, NoLock, true));
		case T_RenameStmt:
			return ((RenameStmt *) parsetree)->relation &&
				is_distributed_table(RangeVarGetRelid(((RenameStmt *) parsetree)->relation, NoLock, true));
		case T_AlterObjectSchemaStmt:
			return ((AlterObjectSchemaStmt *) parsetree)->relation &&
				is_distributed_table(RangeVarGetRelid(((AlterObjectSchemaStmt *) parsetree)->relation, NoLock, true));
		case T_DropStmt:
			{
				DropStmt   *stmt = (DropStmt *) parsetree;
				ListCell   *lc;

				if (stmt->removeType != OBJECT_TABLE && stmt->removeType != OBJECT_FOREIGN_TABLE)
					return false;
				foreach(lc, stmt->objects)
					if (is_distributed_table(RangeVarGetRelid(makeRangeVarFromNameList(lfirst(lc)), NoLock, true)))
						return true;
				return false;
			}
		default:
			return false;
	}
}

PG_FUNCTION_INFO_V1(ringshard_ddl_guard);

/*
 * Event trigger at ddl_command_start: DDL on a distributed table that did
 * not pass the hook (the library was not loaded when the session started
 * the command) would change the coordinator alone.  Refuse it; by now the
 * library is loaded, so the same command works when run again.
 */
Datum
ringshard_ddl_guard(PG_FUNCTION_ARGS)
{
	EventTriggerData *trigdata;

	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		elog(ERROR, "ringshard_ddl_guard() must be called as an event trigger");
	trigdata = (EventTriggerData *) fcinfo->context;
	if (hook_depth == 0 && !ringshard_ddl_internal && names_distributed_table(trigdata->parsetree))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("DDL on a distributed table needs ringshard's library loaded when the command starts"),
				 errdetail("Otherwise it would change the coordinator's table and not the nodes'."),
				 errhint("Run the command again (the library is loaded now), and add ringshard to "
						 "shared_preload_libraries on the coordinator.")));
	PG_RETURN_VOID();
}

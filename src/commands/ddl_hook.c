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
#include "storage/lmgr.h"
#include "nodes/makefuncs.h"
#include "parser/parse_utilcmd.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/ruleutils.h"

#include "commands/ddl.h"
#include "fdw/deparse.h"
#include "fdw/fdw.h"
#include "remote/catalog.h"
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

/*
 * DDL must find every replica of the table holding the same rows: a write
 * queued for a node that was down, replayed after a column was renamed,
 * added or retyped, would land under another definition than it was
 * written for (a renamed column empty, a new column without its default).
 * So DDL waits until the watchdog has delivered the table's queue, and a
 * dead letter is dealt with first.  The table is locked first: no write can
 * queue for it while the DDL runs.
 */
static void
check_no_queued_writes(Oid relid, const char *what)
{
	Oid			argtypes[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	int			nrows;
	char	  **rows;

	LockRelationOid(relid, AccessExclusiveLock);
	rows = owner_catalog_query("SELECT pg_catalog.format('%s queued write(s) for %s', count(*), "
							   "pg_catalog.string_agg(DISTINCT q.node_name, ', ')) FROM ringshard.write_queue q "
							   "WHERE q.table_name::pg_catalog.oid OPERATOR(pg_catalog.=) $1 HAVING count(*) > 0 "
							   "UNION ALL "
							   "SELECT pg_catalog.format('%s dead letter(s) for %s', count(*), "
							   "pg_catalog.string_agg(DISTINCT d.node_name, ', ')) FROM ringshard.dead_letters d "
							   "WHERE d.table_name::pg_catalog.oid OPERATOR(pg_catalog.=) $1 HAVING count(*) > 0",
							   1, argtypes, values, false, &nrows);
	if (nrows > 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s of distributed table %s must wait: some of its writes have not reached every replica",
						what, get_rel_name(relid)),
				 errdetail("The table has %s%s%s.", rows[0], nrows > 1 ? " and " : "", nrows > 1 ? rows[1] : ""),
				 errhint("Retry once the watchdog has delivered them (ringshard.write_queue_status); a dead letter "
						 "must be replayed or discarded first (ringshard.dead_letters).")));
}

/* Only the table's owner changes it: checked here, before any node runs anything. */
static void
check_table_owner(Oid relid)
{
	if (!pg_class_ownercheck(relid, GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, OBJECT_FOREIGN_TABLE, get_rel_name(relid));
}

/* What an ALTER TABLE subcommand makes the nodes do, decided before the local change. */
typedef enum NodeAlterAction
{
	NODE_ALTER_NOTHING,			/* the coordinator only (OWNER TO) */
	NODE_ALTER_SQL,				/* a statement built from the command itself */
	NODE_ALTER_ADD_COLUMN,		/* the column as the catalog has it afterwards */
	NODE_ALTER_DEFAULT,			/* its default for the nodes, if it has one they can evaluate */
	NODE_ALTER_SET_NOT_NULL,
	NODE_ALTER_DROP_NOT_NULL,
	NODE_ALTER_TYPE,			/* its type and collation afterwards */
	NODE_ALTER_ADD_CHECK		/* the constraint as the catalog has it afterwards */
} NodeAlterAction;

typedef struct NodeAlterStep
{
	NodeAlterAction action;
	char	   *name;			/* the column or constraint */
	char	   *sql;			/* NODE_ALTER_SQL */
	bool		local;			/* the coordinator runs the subcommand too */
	bool		node_only;		/* a constraint the nodes alone have (recorded in node_ddl) */
	bool		drops_node_only;	/* drops such a constraint */
} NodeAlterStep;

static NodeAlterStep *
alter_step(NodeAlterAction action, const char *name, char *sql)
{
	NodeAlterStep *step = palloc0(sizeof(NodeAlterStep));

	step->action = action;
	step->name = name ? pstrdup(name) : NULL;
	step->sql = sql;
	step->local = true;
	return step;
}

/* Check one subcommand and decide what the nodes do for it; refuses what cannot be carried. */
static NodeAlterStep *
plan_alter_command(Oid relid, AlterTableCmd *cmd, const char *table, const char *key, const char *keyspace)
{
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
				return alter_step(NODE_ALTER_ADD_COLUMN, def->colname, NULL);
			}
		case AT_DropColumn:
			if (strcmp(cmd->name, key) == 0 || (keyspace && strcmp(cmd->name, keyspace) == 0))
				refuse(relid, "dropping the sharding key column", "It places every row on its nodes.");
			return alter_step(NODE_ALTER_SQL, cmd->name,
							  psprintf("ALTER TABLE %s DROP COLUMN IF EXISTS %s%s", table, quote_identifier(cmd->name),
									   cmd->behavior == DROP_CASCADE ? " CASCADE" : ""));
		case AT_ColumnDefault:
			return alter_step(NODE_ALTER_DEFAULT, cmd->name, NULL);
		case AT_SetNotNull:
			return alter_step(NODE_ALTER_SET_NOT_NULL, cmd->name, NULL);
		case AT_DropNotNull:
			return alter_step(NODE_ALTER_DROP_NOT_NULL, cmd->name, NULL);
		case AT_AlterColumnType:
			{
				ColumnDef  *def = (ColumnDef *) cmd->def;

				if (strcmp(cmd->name, key) == 0 || (keyspace && strcmp(cmd->name, keyspace) == 0))
					refuse(relid, "changing the type of the sharding key column",
						   "Equal keys of another type may route to other nodes.");
				if (def->raw_default)
					refuse(relid, "ALTER COLUMN TYPE ... USING", "The nodes convert the values with the type's cast.");
				return alter_step(NODE_ALTER_TYPE, cmd->name, NULL);
			}
		case AT_AddConstraint:
			{
				Constraint *con = (Constraint *) cmd->def;

				if (con->contype == CONSTR_CHECK)
				{
					if (con->conname == NULL)
						refuse(relid, "an unnamed CHECK constraint", "Name it (ADD CONSTRAINT name CHECK (...)) "
							   "so that the nodes' copy has the same name.");
					return alter_step(NODE_ALTER_ADD_CHECK, con->conname, NULL);
				}
				if (con->contype == CONSTR_PRIMARY || con->contype == CONSTR_UNIQUE)
				{
					List	   *columns = NIL;
					ListCell   *k;
					char	   *name = con->conname;
					NodeAlterStep *step;

					if (con->indexname)
						refuse(relid, "ADD CONSTRAINT ... USING INDEX",
							   "The coordinator's table has no index to use: create the constraint on its columns.");
					foreach(k, con->keys)
						columns = lappend(columns, strVal(lfirst(k)));
					check_unique_columns(relid, columns, con->contype == CONSTR_PRIMARY ? "a primary key" : "a unique constraint");
					if (name == NULL)
						name = ChooseConstraintName(get_rel_name(relid),
													con->contype == CONSTR_PRIMARY ? NULL : strVal(linitial(con->keys)),
													con->contype == CONSTR_PRIMARY ? "pkey" : "key",
													get_rel_namespace(relid), NIL);
					step = alter_step(NODE_ALTER_SQL, name, rsfdw_deparse_unique_constraint(table, name, con));
					step->local = false;	/* a foreign table has no index to back it */
					step->node_only = true;
					return step;
				}
				refuse(relid, con->contype == CONSTR_FOREIGN ? "a foreign key" : "this kind of constraint",
					   "A distributed table's rows live on several nodes, where it cannot be checked.");
				break;
			}
		case AT_DropConstraint:
			{
				Oid			owner = node_ddl_owner(cmd->name, get_rel_namespace(relid));
				NodeAlterStep *step;

				if (owner == relid)
				{
					step = alter_step(NODE_ALTER_SQL, cmd->name,
									  psprintf("ALTER TABLE %s DROP CONSTRAINT IF EXISTS %s%s", table,
											   quote_identifier(cmd->name),
											   cmd->behavior == DROP_CASCADE ? " CASCADE" : ""));
					step->local = false;
					step->drops_node_only = true;
					return step;
				}
				return alter_step(NODE_ALTER_SQL, cmd->name,
								  psprintf("ALTER TABLE %s DROP CONSTRAINT %s%s%s", table,
										   cmd->missing_ok ? "IF EXISTS " : "", quote_identifier(cmd->name),
										   cmd->behavior == DROP_CASCADE ? " CASCADE" : ""));
			}
		case AT_ChangeOwner:
			return alter_step(NODE_ALTER_NOTHING, NULL, NULL);
		default:
			refuse(relid, "this ALTER TABLE subcommand", NULL);
	}
	return NULL;				/* keep the compiler quiet */
}

/* The nodes' statement for a step, from the catalog as the local change left it ("" for none). */
static char *
node_alter_sql(Oid relid, const char *table, NodeAlterStep *step)
{
	AttrNumber	attnum = step->name ? get_attnum(relid, step->name) : InvalidAttrNumber;
	char	   *column = step->name ? (char *) quote_identifier(step->name) : NULL;

	switch (step->action)
	{
		case NODE_ALTER_NOTHING:
			return "";
		case NODE_ALTER_SQL:
			return step->sql;
		case NODE_ALTER_ADD_COLUMN:
			return psprintf("ALTER TABLE %s ADD COLUMN %s", table, node_column_definition(relid, attnum, NULL));
		case NODE_ALTER_DEFAULT:
			{
				char	   *node_default;

				(void) node_column_definition(relid, attnum, &node_default);
				return node_default
					? psprintf("ALTER TABLE %s ALTER COLUMN %s SET DEFAULT %s", table, column, node_default)
					: psprintf("ALTER TABLE %s ALTER COLUMN %s DROP DEFAULT", table, column);
			}
		case NODE_ALTER_SET_NOT_NULL:
			return psprintf("ALTER TABLE %s ALTER COLUMN %s SET NOT NULL", table, column);
		case NODE_ALTER_DROP_NOT_NULL:
			return psprintf("ALTER TABLE %s ALTER COLUMN %s DROP NOT NULL", table, column);
		case NODE_ALTER_TYPE:
			return psprintf("ALTER TABLE %s ALTER COLUMN %s TYPE %s", table, column,
							rsfdw_deparse_column_type(relid, attnum));
		case NODE_ALTER_ADD_CHECK:
			return psprintf("ALTER TABLE %s ADD CONSTRAINT %s %s", table, column,
							TextDatumGetCString(DirectFunctionCall1(pg_get_constraintdef,
																	ObjectIdGetDatum(get_relation_constraint_oid(relid, step->name, false)))));
	}
	return "";
}

/*
 * ALTER TABLE on a distributed table: every subcommand is checked and
 * planned, the coordinator runs its part, then the nodes get their
 * statements, built from the catalog as the local change left it.
 */
static void
alter_table(PlannedStmt *pstmt, AlterTableStmt *stmt, Oid relid, const char *queryString,
			ProcessUtilityContext context, ParamListInfo params, QueryEnvironment *queryEnv,
			DestReceiver *dest, QueryCompletion *qc)
{
	AlterTableStmt *local = copyObject(stmt);
	List	   *steps = NIL;
	List	   *node_only_names = NIL;
	List	   *node_only_sql = NIL;
	ListCell   *lc;
	ListCell   *cmd;
	char	   *table = table_name(relid);
	char	   *key;
	char	   *keyspace;
	int			qualified;
	StringInfoData sql;

	check_table_owner(relid);
	check_no_queued_writes(relid, "ALTER TABLE");
	key_columns(relid, &key, &keyspace);
	local->cmds = NIL;
	{
		/* the plan outlives the SPI connection node_ddl_owner() reads the catalog with */
		MemoryContext caller = CurrentMemoryContext;

		SPI_connect();
		MemoryContextSwitchTo(caller);
		foreach(cmd, stmt->cmds)
		{
			NodeAlterStep *step = plan_alter_command(relid, lfirst(cmd), table, key, keyspace);

			steps = lappend(steps, step);
			if (step->local)
				local->cmds = lappend(local->cmds, lfirst(cmd));
		}
		SPI_finish();
		MemoryContextSwitchTo(caller);
	}

	if (local->cmds != NIL)
		run_utility(pstmt, (Node *) local, queryString, context, params, queryEnv, dest, qc);
	else if (qc)
		SetQueryCompletion(qc, CMDTAG_ALTER_TABLE, 0);

	SPI_connect();
	qualified = begin_qualified_names();
	initStringInfo(&sql);
	foreach(lc, steps)
	{
		NodeAlterStep *step = lfirst(lc);
		char	   *statement = node_alter_sql(relid, table, step);

		if (statement[0] != '\0')
			appendStringInfo(&sql, "%s;", statement);
		if (step->node_only)
		{
			node_only_names = lappend(node_only_names, step->name);
			node_only_sql = lappend(node_only_sql, statement);
		}
	}
	if (sql.len > 0)
		run_on_all_nodes(sql.data, false);
	foreach(lc, steps)
		if (((NodeAlterStep *) lfirst(lc))->drops_node_only)
			forget_node_ddl(relid, ((NodeAlterStep *) lfirst(lc))->name);
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
	char	   *sql;
	ListCell   *lc;
	List	   *columns = NIL;
	char	   *name;
	int			qualified;

	if (stmt->concurrent)
		refuse(relid, "CREATE INDEX CONCURRENTLY", "The index is built on every node in the coordinator's transaction.");
	check_table_owner(relid);
	check_no_queued_writes(relid, "CREATE INDEX");
	cooked = transformIndexStmt(relid, copyObject(stmt), queryString);
	name = cooked->idxname ? cooked->idxname
		: ChooseRelationName(get_rel_name(relid),
							 cooked->indexParams && ((IndexElem *) linitial(cooked->indexParams))->name
							 ? ((IndexElem *) linitial(cooked->indexParams))->name : NULL,
							 cooked->unique ? "key" : "idx", get_rel_namespace(relid), false);
	foreach(lc, cooked->indexParams)
		if (((IndexElem *) lfirst(lc))->name)
			columns = lappend(columns, ((IndexElem *) lfirst(lc))->name);
	if (cooked->unique)
		check_unique_columns(relid, columns, "a unique index");
	SPI_connect();
	qualified = begin_qualified_names();
	sql = rsfdw_deparse_create_index(cooked, relid, table_name(relid), name);
	run_on_all_nodes(sql, false);
	record_node_ddl(relid, list_make1(pstrdup(name)), list_make1(sql), false);
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
				check_table_owner(owner);
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
				check_table_owner(relid);
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
		run_on_all_nodes(lfirst(lc), false);
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
	check_table_owner(relid);
	/* a queued row names its columns: a renamed one would come back empty */
	check_no_queued_writes(relid, "ALTER TABLE ... RENAME");
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
	run_on_all_nodes(sql, false);
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

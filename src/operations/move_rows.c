/*
 * move_rows.c
 *		The data path of a rebalance: one step's rows, node to node, by COPY.
 *
 * A step is a token range (or run of partitions) whose replica set changed:
 * its rows go from one node that holds them (the source) to each node that
 * gains them (the targets).  On each target, in the caller's transaction
 * (the targets commit in two phases with it): the rows of the step already
 * there are deleted (what an interrupted copy left), the step's rows are
 * copied from the source by COPY ... TO STDOUT relayed undecoded into COPY
 * ... FROM STDIN (binary where every column's type allows), and counted
 * again there.  The rows never pass through the coordinator's executor, and
 * each costs the same however many rows the target already holds.
 *
 * The copy is exact because nothing else writes the step's rows meanwhile:
 * the coordinator refuses writes to keys whose rows are not copied yet
 * (docs/design.md, "Moving rows"), and the table is held in EXCLUSIVE mode
 * through the commit, so that no write through this coordinator can route
 * by the step's new state before the targets have committed its rows.
 * Readers go on.
 */
#include "postgres.h"

#include "access/table.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/rel.h"

#include "fdw/deparse.h"
#include "remote/connection.h"
#include "remote/values.h"

PG_FUNCTION_INFO_V1(ringshard_copy_step_rows);

/*
 * copy_step_rows(table, source, targets, condition): the rows of the table
 * (alias t) that match condition, copied from source onto every target, in
 * this transaction; returns how many rows each target got (the same for
 * all: a target that ends with another count is an error).  condition is
 * the caller's, checked by it (rebalance's checked_step_predicate).
 */
Datum
ringshard_copy_step_rows(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	char	   *source = text_to_cstring(PG_GETARG_TEXT_PP(1));
	ArrayType  *targets_array = PG_GETARG_ARRAYTYPE_P(2);
	char	   *condition = text_to_cstring(PG_GETARG_TEXT_PP(3));
	Datum	   *target_datums;
	bool	   *target_nulls;
	int			ntargets;
	Relation	rel;
	char	   *columns;
	bool		binary = false;
	char	   *out_sql;
	char	   *in_sql;
	RemoteConnection *from;
	int64		copied = -1;

	deconstruct_array(targets_array, TEXTOID, -1, false, TYPALIGN_INT, &target_datums, &target_nulls, &ntargets);
	/* writers wait (readers do not) until the targets have committed the rows */
	LockRelationOid(relid, ExclusiveLock);
	rel = table_open(relid, NoLock);
	columns = rsfdw_column_list(rel);
	(void) remote_codecs_for_desc(RelationGetDescr(rel), true, &binary);
	table_close(rel, NoLock);
	out_sql = rsfdw_step_copy_out_sql(relid, columns, condition, binary);
	in_sql = rsfdw_step_copy_in_sql(relid, columns, binary);

	from = remote_connection(source, GetUserId());
	remote_connect_all(&from, 1, false);
	for (int i = 0; i < ntargets; i++)
	{
		char	   *target;
		RemoteConnection *to;
		PGresult   *res;
		int64		rows;

		if (target_nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("a step's targets must not contain nulls")));
		target = TextDatumGetCString(target_datums[i]);
		if (strcmp(target, source) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("node \"%s\" is both the source and a target of a step", source)));
		CHECK_FOR_INTERRUPTS();
		to = remote_connection(target, GetUserId());
		remote_connect_all(&to, 1, false);
		to->wrote = true;
		res = remote_exec(to, rsfdw_step_delete_sql(relid, condition), true);
		remote_expect_command(to, res, "DELETE", -1, "a copy of rows");
		remote_result_free(res);
		/* the source's and the target's counts are compared there */
		rows = remote_copy_between(from, to, out_sql, in_sql);
		if (copied >= 0 && rows != copied)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("verification failed: node \"%s\" got " INT64_FORMAT " rows of the step, the first target " INT64_FORMAT,
							target, rows, copied)));
		copied = rows;
	}
	PG_RETURN_INT64(Max(copied, 0));
}

PG_FUNCTION_INFO_V1(ringshard_wait_for_readers);

/*
 * wait_for_readers(table): wait until every transaction that holds a lock
 * on the table now has ended, without taking one (new statements go on).
 * Before a batch's rows are deleted from the nodes they left: a statement
 * that loaded the table's placement before the batch was copied may still
 * read them there; one that starts now routes by the copied state.  The
 * wait is interruptible (it is a lock wait).
 */
Datum
ringshard_wait_for_readers(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	LOCKTAG		tag;

	SET_LOCKTAG_RELATION(tag, MyDatabaseId, relid);
	WaitForLockers(tag, AccessExclusiveLock, false);
	PG_RETURN_VOID();
}

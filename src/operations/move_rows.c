/*
 * move_rows.c
 *		The data path of rebalance and rehome_rows: rows node to node, by
 *		COPY relayed undecoded, never through the coordinator's executor.
 *
 * A step is a token range (or run of partitions) whose replica set changed:
 * its rows go from one node that holds them (the source) to each node that
 * gains them (the targets).  On each target the step's rows are copied from
 * the source by COPY ... TO STDOUT relayed undecoded into COPY ... FROM
 * STDIN (binary where every column's type allows), counted again there, and
 * committed there at once, before the caller's transaction commits.
 *
 * Why before: the caller's commit marks the steps copied, and from then on
 * readers route the steps' keys to the targets.  Had the targets committed
 * in two phases with it, a reader in the moment between the local commit
 * and a target's COMMIT PREPARED (or, after a crash, until recovery) would
 * find the rows there still prepared, invisible, and miss them.  Committed
 * first, the rows are on every target before any reader is sent there.  If
 * the caller's transaction does not commit after all, the steps stay
 * pending: their keys still route to their old replicas, each node serves
 * only its own rows of a table that moves (reads_here), and the next call
 * of rebalance clears the targets of them before it copies the steps again
 * (rebalance_clear_targets).
 * The targets hold none of the step's rows before (rebalance_clear_targets
 * deletes them once per call, before its first batch; one move of a table
 * runs at a time, hold_table_move), so no batch scans a target: the rows
 * never pass through the coordinator's executor, and each costs the same
 * however many rows the target already holds.
 *
 * The copy is exact because nothing else writes the step's rows meanwhile:
 * the coordinator refuses writes to keys whose rows are not copied yet
 * (docs/design.md, "Moving rows"), and the table is held in EXCLUSIVE mode
 * from the copy through the local commit, so that no write through this
 * coordinator goes to the old replicas after the copy read them, or routes
 * by the step's new state before the targets hold its rows.  Readers go on.
 */
#include "postgres.h"

#include <ctype.h>

#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "fdw/deparse.h"
#include "operations/progress.h"
#include "remote/catalog.h"
#include "remote/connection.h"
#include "remote/transaction.h"
#include "remote/values.h"
#include "routing/placement.h"

static void refuse_outside_table_move(Oid relid);

/* A step's copy under way, for the rebalance's progress. */
typedef struct StepCopyProgress
{
	Oid			relid;
	int			ntargets;
	int64		earlier;		/* rows the step's earlier targets got */
} StepCopyProgress;

/*
 * The rebalance counts a step's rows once, whatever its targets: shown as
 * the share of all its targets' copies done so far.
 */
static void
step_rows_relayed(int64 rows, void *arg)
{
	StepCopyProgress *progress = arg;

	operation_progress_in_flight("rebalance", progress->relid,
								 (progress->earlier + rows) / Max(progress->ntargets, 1));
	remote_fault_point("rebalance_rows_relayed");	/* tests: a pause, to watch a batch under way */
}

PG_FUNCTION_INFO_V1(ringshard_copy_step_rows);

/*
 * copy_step_rows(table, source, targets, condition): the rows of the table
 * (alias t) that match condition, copied from source onto every target, in
 * this transaction; returns how many rows each target got (the same for
 * all: a target that ends with another count is an error), each target's
 * copy committed there before this returns.  condition is the caller's,
 * checked by it (rebalance's checked_step_predicate).
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
	StepCopyProgress progress = {relid, 0, 0};

	/*
	 * Each target commits its copy at once, whatever this transaction does
	 * later: only a move, which clears its targets when it starts or resumes
	 * and deletes what it moved, may leave rows there.
	 */
	refuse_outside_table_move(relid);
	deconstruct_array(targets_array, TEXTOID, -1, false, TYPALIGN_INT, &target_datums, &target_nulls, &ntargets);
	progress.ntargets = ntargets;
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
		/* the source's and the target's counts are compared there */
		rows = remote_copy_between_reporting(from, to, out_sql, in_sql, step_rows_relayed, &progress);
		progress.earlier += rows;
		remote_commit_part_now(to);
		remote_fault_point("rebalance_after_target_commit");
		if (copied >= 0 && rows != copied)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("verification failed: node \"%s\" got " INT64_FORMAT " rows of the step, the first target " INT64_FORMAT,
							target, rows, copied)));
		copied = rows;
	}
	PG_RETURN_INT64(Max(copied, 0));
}

/* What tells a rebalance's hold of its table apart from other advisory locks (pg_locks.objsubid): "RM". */
#define TABLE_MOVE_LOCK_CLASS 0x524d

static void
table_move_tag(LOCKTAG *tag, Oid relid)
{
	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, relid, 0, TABLE_MOVE_LOCK_CLASS);
}

/* An error unless this session moves the table (holds it by hold_table_move). */
static void
refuse_outside_table_move(Oid relid)
{
	LOCKTAG		tag;

	table_move_tag(&tag, relid);
	if (!LockHeldByMe(&tag, ExclusiveLock))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("rows of table %s are copied between nodes only by its rebalance", get_rel_name(relid)),
				 errdetail("Each target commits its copy at once; outside a move nothing would remove those rows again."),
				 errhint("CALL ringshard.rebalance('%s') moves the rows whose replica set changed.",
						 get_rel_name(relid))));
}

PG_FUNCTION_INFO_V1(ringshard_hold_table_move);

/*
 * hold_table_move(table): this session moves the table's rows; another
 * session's rebalance of it is refused until this one lets go.  A session
 * lock: a rebalance commits batch by batch and holds the table across its
 * commits.  Two moves of one table at once would each take the other's
 * copies for rows still to copy (a target is cleared of them once, when a
 * move starts or resumes), and copy a batch twice.  A move stopped by an
 * error keeps the hold until its session ends or moves the table again;
 * the session's own new call takes it over.
 */
Datum
ringshard_hold_table_move(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	LOCKTAG		tag;

	table_move_tag(&tag, relid);
	if (LockHeldByMe(&tag, ExclusiveLock))
		PG_RETURN_VOID();
	if (LockAcquire(&tag, ExclusiveLock, true, true) == LOCKACQUIRE_NOT_AVAIL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("another session is rebalancing table %s", get_rel_name(relid)),
				 errdetail("A rebalance holds its table from its start to its end; one stopped by an error holds it "
						   "until its session ends or calls rebalance again."),
				 errhint("Wait for it to finish: ringshard.rebalance_status shows how far it is.")));
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(ringshard_release_table_move);

/* release_table_move(table): the end of this session's move of the table. */
Datum
ringshard_release_table_move(PG_FUNCTION_ARGS)
{
	LOCKTAG		tag;

	table_move_tag(&tag, PG_GETARG_OID(0));
	if (LockHeldByMe(&tag, ExclusiveLock))
		(void) LockRelease(&tag, ExclusiveLock, true);
	PG_RETURN_VOID();
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

/*
 * Rehoming (rehome_rows(), extension/87_rehome.sql): rows a node holds
 * whose replicas, as the node routes them now, are elsewhere or also
 * elsewhere.  A batch takes a page of them from the source (ctid, key, a
 * digest of the row and each replica of it), asks each other replica which
 * of its rows it already holds (by key, through the index, and digest),
 * copies the others to it by COPY from the source, and asks again: each
 * must be there now.  Step 1 then deletes the page from the source.  Each
 * row costs the same however many rows the target holds.
 */

/* One row of a page. */
typedef struct RehomeRow
{
	char	   *ctid;
	char	   *key;
	char	   *digest;
	char	  **replicas;
	int			nreplicas;
} RehomeRow;

static bool has_replica(const struct RehomeRow *row, const char *node);

/* Parse a ctid "(block,offset)"; false if it is not one. */
static bool
parse_ctid(const char *text, uint32 *block, uint32 *offset)
{
	unsigned long b,
				o;
	char	   *end;

	if (*text != '(' || !isdigit((unsigned char) text[1]))
		return false;
	errno = 0;
	b = strtoul(text + 1, &end, 10);
	if (errno != 0 || b > PG_UINT32_MAX || *end != ',' || !isdigit((unsigned char) end[1]))
		return false;
	o = strtoul(end + 1, &end, 10);
	if (errno != 0 || o > PG_UINT16_MAX || strcmp(end, ")") != 0)
		return false;
	*block = (uint32) b;
	*offset = (uint32) o;
	return true;
}

/* Whether text is 64 lowercase hexadecimal digits (a SHA-256 digest). */
static bool
is_digest(const char *text)
{
	int			n = 0;

	for (; text[n]; n++)
		if (!isdigit((unsigned char) text[n]) && !(text[n] >= 'a' && text[n] <= 'f'))
			return false;
	return n == 64;
}

/*
 * The source's page: rows in ctid order, each with its replicas; a node's
 * answer is checked before it is used (ctids rising, at most batch_size
 * rows, each replica one of the nodes that may hold the table's rows and
 * named once, no nulls, digests of their form).
 */
static RehomeRow *
read_rehome_page(RemoteConnection *from, PGresult *res, int batch_size, char **nodes, int nnodes, int *nrows)
{
	const char *what = "a page of rows to rehome";
	static const Oid types[] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID};
	RehomeRow  *rows;
	int			n = 0;
	uint32		last_block = 0,
				last_offset = 0;

	remote_expect_rows(from, res, 4, 0, -1, what);
	remote_expect_formats(from, res, 0, types, what);
	rows = palloc0(sizeof(RehomeRow) * Max(Min(PQntuples(res), batch_size), 1));
	for (int i = 0; i < PQntuples(res); i++)
	{
		char	   *ctid = remote_text_value(from, res, i, 0, what);
		char	   *node = remote_text_value(from, res, i, 3, what);
		uint32		block,
					offset;
		RehomeRow  *row;
		bool		known = false;

		CHECK_FOR_INTERRUPTS();
		if (!parse_ctid(ctid, &block, &offset))
			remote_reject_answer(from, what, psprintf("\"%s\" in row %d is not a row position", pnstrdup(ctid, 40), i + 1));
		if (n == 0 || block != last_block || offset != last_offset)
		{
			if (n > 0 && (block < last_block || (block == last_block && offset < last_offset)))
				remote_reject_answer(from, what, psprintf("row %d is out of order", i + 1));
			if (n == batch_size)
				remote_reject_answer(from, what, psprintf("more than %d rows", batch_size));
			row = &rows[n++];
			row->ctid = pstrdup(ctid);
			row->key = pstrdup(remote_text_value(from, res, i, 1, what));
			row->digest = pstrdup(remote_text_value(from, res, i, 2, what));
			if (!is_digest(row->digest))
				remote_reject_answer(from, what, psprintf("\"%s\" in row %d is not a row digest",
														  pnstrdup(row->digest, 70), i + 1));
			row->replicas = palloc(sizeof(char *) * PLACEMENT_MAX_REPLICAS);
			last_block = block;
			last_offset = offset;
		}
		row = &rows[n - 1];
		for (int k = 0; k < nnodes && !known; k++)
			known = strcmp(nodes[k], node) == 0;
		if (!known || has_replica(row, node) || row->nreplicas == PLACEMENT_MAX_REPLICAS)
			remote_reject_answer(from, what, psprintf("row %d names replica \"%s\", which is no node of the table, "
													  "or names it twice", i + 1, pnstrdup(node, 64)));
		row->replicas[row->nreplicas++] = pstrdup(node);
	}
	*nrows = n;
	return rows;
}

/* Whether row names node among its replicas. */
static bool
has_replica(const RehomeRow *row, const char *node)
{
	for (int i = 0; i < row->nreplicas; i++)
		if (strcmp(row->replicas[i], node) == 0)
			return true;
	return false;
}

/* A text[] literal of strings. */
static char *
text_array_literal(char **strings, int n)
{
	Datum	   *datums = palloc(sizeof(Datum) * Max(n, 1));

	for (int i = 0; i < n; i++)
		datums[i] = CStringGetTextDatum(strings[i]);
	/* array_out keeps its state in flinfo: called through a looked-up function, not directly */
	return OidOutputFunctionCall(F_ARRAY_OUT,
								 PointerGetDatum(construct_array(datums, n, TEXTOID, -1, false, TYPALIGN_INT)));
}

/*
 * Which of the rows (given by key and digest) a node holds: held[i] is set
 * for each.  Returns how many.
 */
static int
rows_held(RemoteConnection *c, const char *sql, RehomeRow **rows, int n, bool *held)
{
	const char *what = "which rows a node holds";
	char	  **keys = palloc(sizeof(char *) * Max(n, 1));
	char	  **digests = palloc(sizeof(char *) * Max(n, 1));
	const char *params[2];
	RemoteResult out;
	PGresult   *res;
	int			count = 0;

	for (int i = 0; i < n; i++)
	{
		keys[i] = rows[i]->key;
		digests[i] = rows[i]->digest;
		held[i] = false;
	}
	params[0] = text_array_literal(keys, n);
	params[1] = text_array_literal(digests, n);
	remote_send_params(c, sql, 2, params, true, c);
	remote_receive_all(&c, 1, &out, 0);
	res = remote_answer(c, &out, sql, what);
	remote_expect_rows(c, res, 1, 0, n, what);
	for (int i = 0; i < PQntuples(res); i++)
	{
		int64		position = remote_int64_value(c, res, i, 0, what);

		if (position < 1 || position > n || held[position - 1])
			remote_reject_answer(c, what, psprintf("position " INT64_FORMAT " is not one of the %d rows asked, or named twice",
												   position, n));
		held[position - 1] = true;
		count++;
	}
	remote_result_free(res);
	return count;
}

static int
compare_names(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

PG_FUNCTION_INFO_V1(ringshard_rehome_batch);

/*
 * rehome_batch(table, source, batch_size, shared, after_ctid): one batch of
 * rehome_rows() from one node.  Step 1 (shared false): up to batch_size of
 * the rows the source is not a replica of after after_ctid, in the order
 * the node finds them (no sort: each page costs its own rows, not the rest
 * of the node), copied to each of their replicas that lacks an identical
 * row, checked there, then deleted from the source.  Step 2: the next
 * batch_size rows, in position order, that it holds with other replicas,
 * copied where missing and checked.  All in the
 * caller's transaction (the nodes commit in two phases with it).  Returns
 * the rows taken, the copies made, the rows deleted and the last ctid.
 */
Datum
ringshard_rehome_batch(PG_FUNCTION_ARGS)
{
	Oid			relid;
	char	   *source;
	int			batch_size;
	bool		shared;
	const char *after;
	Oid			argtypes[1] = {REGCLASSOID};
	Datum		args[1];
	char	  **key_column;
	int			found;
	char	  **nodes;
	int			nnodes;
	AttrNumber	key_attnum;
	Relation	rel;
	char	   *columns;
	bool		binary = false;
	char	   *page_sql;
	char	   *present_sql;
	char	   *in_sql;
	RemoteConnection *from;
	RemoteResult out;
	PGresult   *res;
	const char *params[2];
	RehomeRow  *rows;
	int			nrows;
	char	  **targets;
	int			ntargets = 0;
	int64		copied = 0;
	int64		deleted = 0;
	TupleDesc	result_desc;
	Datum		values[4];
	bool		nulls[4] = {false, false, false, false};

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2) || PG_GETARG_INT32(2) < 1 || PG_ARGISNULL(3))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("rehome_batch needs a table, a node, a positive batch size and a step")));
	relid = PG_GETARG_OID(0);
	source = text_to_cstring(PG_GETARG_TEXT_PP(1));
	batch_size = PG_GETARG_INT32(2);
	shared = PG_GETARG_BOOL(3);
	after = PG_ARGISNULL(4) ? "(0,0)" : text_to_cstring(PG_GETARG_TEXT_PP(4));
	if (get_call_result_type(fcinfo, NULL, &result_desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "rehome_batch must return a record");

	args[0] = ObjectIdGetDatum(relid);
	key_column = owner_catalog_query("SELECT key_column::pg_catalog.text FROM ringshard.distributed_tables"
									 " WHERE table_name OPERATOR(pg_catalog.=) $1",
									 1, argtypes, args, true, &found);
	if (found != 1 || key_column[0] == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s is not a distributed table", rsfdw_relation_name(relid))));
	/* the nodes a row may name as its replicas: those that may hold the table's rows */
	nodes = owner_catalog_query("SELECT pg_catalog.unnest(ringshard_internal.rehome_nodes($1))",
								1, argtypes, args, true, &nnodes);
	/*
	 * Writers (and readers FOR UPDATE) of the table wait here, on the
	 * coordinator, until the batch commits, as during a rebalance's copy: a
	 * row lock one of them held on the source would otherwise hold the
	 * batch's DELETE on the node, where no deadlock detector sees both.
	 * One batch of the table at a time, too (two would both copy a shared
	 * row where it is missing).  Readers go on.
	 */
	LockRelationOid(relid, ExclusiveLock);
	key_attnum = get_attnum(relid, key_column[0]);
	if (key_attnum == InvalidAttrNumber)
		elog(ERROR, "ringshard: key column \"%s\" of %s is missing", key_column[0], rsfdw_relation_name(relid));

	rel = table_open(relid, AccessShareLock);
	columns = rsfdw_column_list(rel);
	(void) remote_codecs_for_desc(RelationGetDescr(rel), true, &binary);
	page_sql = rsfdw_rehome_page_sql(rel, key_column[0], shared, batch_size);
	present_sql = rsfdw_rehome_present_sql(rel, key_column[0], get_atttype(relid, key_attnum));
	table_close(rel, NoLock);
	in_sql = rsfdw_step_copy_in_sql(relid, columns, binary);

	/* the page, read in the source's part of this transaction (its DELETE sees the same rows) */
	from = remote_connection(source, GetUserId());
	remote_connect_all(&from, 1, false);
	/*
	 * The page is read in position order by a TID range scan: a seq scan
	 * (a synchronized one starts where another is) or a parallel one would
	 * pass rows over, for step 1's last pass to find, or time out the
	 * caller's bound.  Local to the batch's node transaction.
	 */
	res = remote_exec(from, "SET LOCAL enable_seqscan = off; SET LOCAL max_parallel_workers_per_gather = 0", true);
	remote_expect_command(from, res, "SET", -1, "a setting of the page's scan");
	remote_result_free(res);
	params[0] = source;
	params[1] = after;
	remote_send_params(from, page_sql, 2, params, true, from);
	remote_receive_all(&from, 1, &out, 0);
	res = remote_answer(from, &out, page_sql, "a page of rows to rehome");
	rows = read_rehome_page(from, res, batch_size, nodes, nnodes, &nrows);
	remote_result_free(res);

	/* the other replicas the page names, in name order */
	targets = palloc(sizeof(char *) * Max(nnodes, 1));
	for (int i = 0; i < nrows; i++)
		for (int j = 0; j < rows[i].nreplicas; j++)
		{
			bool		seen = strcmp(rows[i].replicas[j], source) == 0;

			CHECK_FOR_INTERRUPTS();

			for (int k = 0; k < ntargets && !seen; k++)
				seen = strcmp(targets[k], rows[i].replicas[j]) == 0;
			if (!seen)
				targets[ntargets++] = rows[i].replicas[j];
		}
	qsort(targets, ntargets, sizeof(char *), compare_names);
	remote_fault_point("rehome_before_copy");

	for (int t = 0; t < ntargets; t++)
	{
		RemoteConnection *to;
		RehomeRow **candidates = palloc(sizeof(RehomeRow *) * Max(nrows, 1));
		RehomeRow **missing = palloc(sizeof(RehomeRow *) * Max(nrows, 1));
		char	  **missing_ctids = palloc(sizeof(char *) * Max(nrows, 1));
		bool	   *held = palloc(sizeof(bool) * Max(nrows, 1));
		int			ncandidates = 0;
		int			nmissing = 0;
		int64		rows_copied;

		CHECK_FOR_INTERRUPTS();
		for (int i = 0; i < nrows; i++)
			if (has_replica(&rows[i], targets[t]))
				candidates[ncandidates++] = &rows[i];
		to = remote_connection(targets[t], GetUserId());
		remote_connect_all(&to, 1, false);
		(void) rows_held(to, present_sql, candidates, ncandidates, held);
		for (int i = 0; i < ncandidates; i++)
			if (!held[i])
			{
				missing[nmissing] = candidates[i];
				missing_ctids[nmissing++] = candidates[i]->ctid;
			}
		if (nmissing == 0)
			continue;
		rows_copied = remote_copy_between(from, to,
										  rsfdw_step_copy_out_sql(relid, columns,
																  rsfdw_ctid_condition(missing_ctids, nmissing),
																  binary),
										  in_sql);
		if (rows_copied != nmissing ||
			rows_held(to, present_sql, missing, nmissing, held) != nmissing)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("verification failed: %d rows of %s copied from node \"%s\" are not on node \"%s\"",
							nmissing, rsfdw_relation_name(relid), source, targets[t]),
					 errdetail("The copy took " INT64_FORMAT " rows.", rows_copied),
					 errhint("Rows of the table were changed on the nodes meanwhile; call rehome_rows again.")));
		copied += nmissing;
	}

	/*
	 * Step 1: the page leaves its node.  Each row only as it was read: one
	 * changed there since (a write on the node itself) was copied in a
	 * version it no longer has, so the batch fails and a later call copies
	 * the new one.
	 */
	if (!shared && nrows > 0)
	{
		const char *what = "a delete of rehomed rows";
		char	  **ctids = palloc(sizeof(char *) * nrows);
		char	  **digests = palloc(sizeof(char *) * nrows);
		char	   *delete_sql;

		for (int i = 0; i < nrows; i++)
		{
			ctids[i] = rows[i].ctid;
			digests[i] = rows[i].digest;
		}
		remote_fault_point("rehome_before_delete");
		rel = table_open(relid, AccessShareLock);
		delete_sql = rsfdw_rehome_delete_sql(rel, ctids, digests, nrows);
		table_close(rel, NoLock);
		remote_note_write(from);
		params[0] = source;
		remote_send_params(from, delete_sql, 1, params, true, from);
		remote_receive_all(&from, 1, &out, 0);
		res = remote_answer(from, &out, delete_sql, what);
		remote_expect_command(from, res, "DELETE", -1, what);
		deleted = strtoll(PQcmdTuples(res), NULL, 10);
		remote_result_free(res);
		if (deleted < 0 || deleted > nrows)
			remote_reject_answer(from, what, psprintf(INT64_FORMAT " rows deleted of %d", deleted, nrows));
		if (deleted != nrows)
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("%d rows of %s changed on node \"%s\" while they were copied",
							(int) (nrows - deleted), rsfdw_relation_name(relid), source),
					 errhint("Nothing of this batch was kept; call rehome_rows again to copy them as they are now.")));
	}

	values[0] = Int64GetDatum(nrows);
	values[1] = Int64GetDatum(copied);
	values[2] = Int64GetDatum(deleted);
	if (nrows > 0)
		values[3] = CStringGetTextDatum(rows[nrows - 1].ctid);
	else
		nulls[3] = true;
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(result_desc), values, nulls)));
}

PG_FUNCTION_INFO_V1(ringshard_rehome_condition);

/* rehome_condition(shared): the condition rehome_rows() counts with, the one its batches take rows by. */
Datum
ringshard_rehome_condition(PG_FUNCTION_ARGS)
{
	PG_RETURN_TEXT_P(cstring_to_text(rsfdw_rehome_condition(PG_GETARG_BOOL(0))));
}

/*
 * transaction.c
 *		Remote transactions follow the local one (see transaction.h).
 *
 * Pre-commit: every node that took a write gets PREPARE TRANSACTION, all at
 * once; then one row per node goes into ringshard.transaction_records, in the
 * local transaction.  The local commit makes those rows, and so the decision,
 * durable.  After it, COMMIT PREPARED goes to every node.  If anything fails
 * before the local commit (a node, a serialization failure at commit), the
 * abort path sends ROLLBACK PREPARED.  A crash anywhere leaves prepared
 * transactions that recover_prepared_transactions() resolves from the
 * records: committed where a record exists, rolled back where none does and
 * the local transaction is over.  Nodes that were only read are committed
 * with a plain COMMIT.
 */
#include "postgres.h"

#include "access/transam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "replication/syncrep.h"
#include "replication/walsender.h"
#include "replication/walsender_private.h"
#include "storage/lwlock.h"
#include "storage/pmsignal.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "remote/catalog.h"
#include "remote/transaction.h"


void
remote_note_write(RemoteConnection *c)
{
	c->wrote = true;
}

/*
 * For a PG_CATCH that goes on after a node's error, once its clean-up is
 * done: a cancel of this backend (the user's, statement_timeout, the
 * watchdog round's time limit) is no node's answer.  Taken as one, it was
 * counted as a refusal of a queued write, and the next write waited again,
 * for ever: it must end the statement, as it would anywhere else.
 * (PL/pgSQL's WHEN OTHERS does not catch it either.)  PostgreSQL raises
 * such a cancel in ProcessInterrupts; a node's own cancel (its
 * statement_timeout, an operator there) comes back with the same SQLSTATE,
 * reported by remote_report_error, and stays that node's answer.
 */
void
remote_rethrow_cancel(ErrorData *edata)
{
	if (edata->sqlerrcode == ERRCODE_QUERY_CANCELED && edata->funcname != NULL &&
		strcmp(edata->funcname, "ProcessInterrupts") == 0)
		ReThrowError(edata);
}

ErrorData *
remote_rollback_subtransaction(MemoryContext cxt)
{
	ErrorData  *edata;

	MemoryContextSwitchTo(cxt);
	edata = CopyErrorData();
	FlushErrorState();
	RollbackAndReleaseCurrentSubTransaction();
	return edata;
}

/*
 * Whether a fault is injected at this point: tests only, in a build made
 * with FAULT_INJECTION=1 (see the Makefile); never in a plain build.
 */
static bool
fault_point_armed(const char *point)
{
#ifdef RINGSHARD_FAULT_INJECTION
	const char *eq;

	if (ringshard_fault_injection == NULL || ringshard_fault_injection[0] == '\0')
		return false;
	eq = strchr(ringshard_fault_injection, '=');
	return eq != NULL && strlen(point) == (size_t) (eq - ringshard_fault_injection) &&
		strncmp(ringshard_fault_injection, point, eq - ringshard_fault_injection) == 0;
#else
	return false;
#endif
}

void
remote_fault_point(const char *point)
{
#ifdef RINGSHARD_FAULT_INJECTION
	const char *eq;

	if (!fault_point_armed(point))
		return;
	eq = strchr(ringshard_fault_injection, '=');
	if (strcmp(eq + 1, "crash") == 0)
		elog(PANIC, "ringshard fault injection: crash at %s", point);
	if (strcmp(eq + 1, "until_orphaned") == 0)
	{
		/* tests: wait (at most a minute) for the postmaster to die, then go on as a lingering backend */
		TimestampTz until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), 60000);

		elog(LOG, "ringshard fault injection: waiting for the postmaster to die at %s", point);
		while (PostmasterIsAlive() && GetCurrentTimestamp() < until)
			pg_usleep(10000L);
		return;
	}
	if (strncmp(eq + 1, "sleep:", 6) == 0)
	{
		long		ms = strtol(eq + 7, NULL, 10);

		TimestampTz until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), ms);

		elog(LOG, "ringshard fault injection: sleeping %ld ms at %s", ms, point);
		/* the whole time: a signal (a cache invalidation, say) cuts pg_usleep short */
		while (GetCurrentTimestamp() < until)
			pg_usleep(Min(100000L, (until - GetCurrentTimestamp())));
	}
#endif
}

/* The connections in a given state, collected for one step of the protocol. */
typedef struct Collected
{
	RemoteConnection **conns;
	int			n;
	int			capacity;
	int			what;
} Collected;

enum
{
	COLLECT_IN_TRANSACTION,		/* any remote transaction or query in flight */
	COLLECT_WRITERS,			/* open transaction with writes */
	COLLECT_READERS,			/* open transaction without writes */
	COLLECT_PREPARED,			/* prepared */
	COLLECT_AT_LEVEL			/* savepoints at or below the current level */
};

static bool
collect_visitor(RemoteConnection *c, void *arg)
{
	Collected  *col = arg;
	bool		take = false;

	switch (col->what)
	{
		case COLLECT_IN_TRANSACTION:
			take = c->xact != RXACT_NONE || c->link == LINK_BUSY || c->link == LINK_COPY_IN ||
				c->link == LINK_COPY_OUT;
			break;
		case COLLECT_WRITERS:
			take = (c->xact == RXACT_OPEN || c->xact == RXACT_FAILED) && c->wrote;
			break;
		case COLLECT_READERS:
			take = (c->xact == RXACT_OPEN || c->xact == RXACT_FAILED) && !c->wrote;
			break;
		case COLLECT_PREPARED:
			take = c->xact == RXACT_PREPARED;
			break;
		case COLLECT_AT_LEVEL:
			take = c->xact != RXACT_NONE && c->xact != RXACT_PREPARED &&
				c->xact_depth >= GetCurrentTransactionNestLevel();
			break;
	}
	if (take)
	{
		if (col->n == col->capacity)
		{
			col->capacity = col->capacity ? col->capacity * 2 : 8;
			col->conns = col->conns ? repalloc(col->conns, sizeof(RemoteConnection *) * col->capacity)
				: palloc(sizeof(RemoteConnection *) * col->capacity);
		}
		col->conns[col->n++] = c;
	}
	return true;
}

static Collected
collect(int what)
{
	Collected	col = {NULL, 0, 0, what};

	remote_foreach(collect_visitor, &col);
	return col;
}

/*
 * Finish queries still in flight (a scan stopped early): wait for them, as
 * for a control command, and drop the rows; a node that does not answer in
 * time loses its link (it cannot hold the commit: a writer's part then
 * fails the transaction).
 */
static void
drain_in_flight(Collected *col)
{
	for (int i = 0; i < col->n; i++)
	{
		RemoteConnection *c = col->conns[i];

		if (c->link == LINK_BUSY)
		{
			RemoteResult out;

			/* not cancelled at once: that would fail the node's transaction, which may have writes */
			remote_receive_all(&c, 1, &out, ringshard_node_timeout_ms);
			remote_result_free(out.result);
		}
		if (c->link == LINK_COPY_IN || c->link == LINK_COPY_OUT)
			remote_mark_broken(c, "a COPY was left unfinished");
	}
}

/*
 * How long the commit waits for a node's PREPARE TRANSACTION (or one-phase
 * COMMIT): a control command, so ringshard.node_timeout, or statement_timeout
 * when that is longer (PostgreSQL stops its timer before a commit runs, so
 * it is applied here).  A node that does not answer in time rolls the whole
 * transaction back; a cancel ends the wait sooner.
 */
static int
commit_timeout_ms(void)
{
	return Max(ringshard_node_timeout_ms, StatementTimeout);
}

void
remote_commit_part_now(RemoteConnection *c)
{
	PGresult   *res;

	/* not inside a savepoint, with nothing in flight or held back to send with the commit */
	if (c->xact != RXACT_OPEN || c->xact_depth != 1 || c->link != LINK_IDLE || c->deferred != NULL)
		elog(ERROR, "ringshard: the part of node \"%s\" cannot be committed on its own now", c->node);

	/*
	 * Durable when acknowledged, as a PREPARE TRANSACTION is whatever the
	 * node's synchronous_commit: the caller may delete the rows' only other
	 * copy next.  A node that commits asynchronously flushes this one.
	 */
	res = remote_exec_timed(c, "SELECT pg_catalog.set_config('synchronous_commit', 'local', true) "
							"WHERE pg_catalog.current_setting('synchronous_commit') OPERATOR(pg_catalog.=) 'off'",
							true, commit_timeout_ms());
	remote_result_free(res);
	res = remote_exec_timed(c, "COMMIT", false, commit_timeout_ms());
	remote_expect_command(c, res, "COMMIT", -1, "a commit of rows copied");
	remote_result_free(res);
	remote_set_xact(c, RXACT_NONE);
	c->xact_depth = 0;
	c->wrote = false;
	c->takes_moving_rows = false;
}


/*
 * Send one command to several connections and wait (timeout_ms 0: as long as
 * it takes, interruptibly); true where it worked: the node completed it with
 * the command tag expected (any, if NULL).  A node whose transaction had
 * failed answers COMMIT, and PREPARE TRANSACTION, with ROLLBACK: that is not
 * a commit, nor a part prepared.
 */
static void
command_all(RemoteConnection **conns, int n, char **sql, const char *tag, bool *worked, int timeout_ms)
{
	RemoteResult *out = palloc0(sizeof(RemoteResult) * Max(n, 1));
	RemoteConnection **sent = palloc(sizeof(RemoteConnection *) * Max(n, 1));
	int		   *index = palloc(sizeof(int) * Max(n, 1));
	int			nsent = 0;

	for (int i = 0; i < n; i++)
	{
		worked[i] = false;
		if (conns[i]->link != LINK_IDLE)
			continue;
		conns[i]->last_sqlstate = 0;

		/*
		 * A write held back for the commit is the statement's own work: it
		 * may wait for locks or run triggers as long as the statement could
		 * (statement_timeout, else as long as it takes, interruptibly), not
		 * only as long as a control command.
		 */
		if (conns[i]->deferred && timeout_ms > 0)
			timeout_ms = StatementTimeout > 0 ? Max(timeout_ms, StatementTimeout) : 0;
		/* a write held back for the commit travels in the same string (connection.h) */
		remote_send(conns[i], conns[i]->deferred ? remote_take_deferred(conns[i], sql[i]) : sql[i], false,
					conns[i]);
		if (conns[i]->link == LINK_BUSY)
		{
			sent[nsent] = conns[i];
			index[nsent++] = i;
		}
	}
	remote_receive_all(sent, nsent, out, timeout_ms);
	for (int j = 0; j < nsent; j++)
	{
		PGresult   *res = out[j].result;
		bool		keep = false;

		if (!remote_deferred_outcome(sent[j], res, out[j].ok, &keep))
			sent[j]->deferred_failed = true;
		worked[index[j]] = out[j].ok;
		if (out[j].ok && tag != NULL &&
			(res == NULL || PQresultStatus(res) != PGRES_COMMAND_OK || strcmp(PQcmdStatus(res), tag) != 0))
		{
			worked[index[j]] = false;
			sent[j]->last_sqlstate = ERRCODE_PROTOCOL_VIOLATION;
			remote_set_error(sent[j], psprintf("the node answered %s with \"%s\", not %s", sql[index[j]],
											  res ? (PQresultStatus(res) == PGRES_COMMAND_OK ? PQcmdStatus(res)
													 : PQresStatus(PQresultStatus(res))) : "nothing", tag));
		}
		if (!keep)
			remote_result_free(res);
	}
	pfree(out);
	pfree(sent);
	pfree(index);
}

/*
 * The prepared-transaction name of a node's part of this transaction
 * (docs/design.md).  It ends with when this backend started: after a crash
 * the server hands out again every transaction id that no WAL record on disk
 * carries (a transaction whose writes all went to nodes has written none),
 * and the next transaction with such an id must not take the names of the
 * crashed one's parts, still prepared on the nodes.  So no WAL flush is
 * needed before the first PREPARE: only the commit decision is flushed.
 */
static void
make_gid(RemoteConnection *c, FullTransactionId fxid)
{
	snprintf(c->gid, sizeof(c->gid), "rs_%s_" UINT64_FORMAT "_%u_" UINT64_FORMAT "_%u_%u_" INT64_FORMAT,
			 catalog_coordinator_id(), GetSystemIdentifier(), GetWALInsertionTimeLine(),
			 U64FromFullTransactionId(fxid), c->userid, c->serverid, (int64) MyStartTimestamp);
}

/*
 * A write that travelled with its node's PREPARE TRANSACTION or COMMIT and
 * failed: its own error is the statement's (the first such node's).
 */
static void
raise_deferred_failures(Collected *writers)
{
	for (int i = 0; i < writers->n; i++)
		if (writers->conns[i]->deferred_failed)
			remote_raise_deferred_failure(writers->conns[i]);
}

/* One record per prepared node, in the local transaction: the commit decision. */
static void
record_prepared(Collected *writers)
{
	Oid			argtypes[2] = {TEXTARRAYOID, TEXTARRAYOID};
	Datum		values[2];
	Datum	   *gids = palloc(sizeof(Datum) * writers->n);
	Datum	   *nodes = palloc(sizeof(Datum) * writers->n);
	int			nrows;

	for (int i = 0; i < writers->n; i++)
	{
		gids[i] = CStringGetTextDatum(writers->conns[i]->gid);
		nodes[i] = CStringGetTextDatum(writers->conns[i]->node);
	}
	values[0] = PointerGetDatum(construct_array(gids, writers->n, TEXTOID, -1, false, TYPALIGN_INT));
	values[1] = PointerGetDatum(construct_array(nodes, writers->n, TEXTOID, -1, false, TYPALIGN_INT));
	(void) owner_catalog_query("INSERT INTO ringshard.transaction_records (gid, node_name) "
							   "SELECT * FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2))",
							   2, argtypes, values, false, &nrows);
}

static void
pre_commit(bool preparing)
{
	Collected	all = collect(COLLECT_IN_TRANSACTION);
	Collected	writers;
	Collected	readers;
	bool	   *worked;
	char	  **sql;

	if (all.n == 0)
		return;
	drain_in_flight(&all);
	writers = collect(COLLECT_WRITERS);
	readers = collect(COLLECT_READERS);

	if (writers.n > 0 && preparing)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot prepare a transaction that wrote to ringshard node \"%s\"", writers.conns[0]->node),
				 errdetail("ringshard commits the nodes' part of a transaction itself, in two phases.")));

	/*
	 * A node that lost its part cannot commit it: the whole transaction rolls
	 * back.  40001 (a serialization failure) tells clients, and pgbench, that
	 * a retry may succeed: it queues the writes of a node that is down.
	 */
	for (int i = 0; i < writers.n; i++)
	{
		RemoteConnection *c = writers.conns[i];

		if (c->xact == RXACT_FAILED || c->link != LINK_IDLE)
			ereport(ERROR,
					(errcode(c->link == LINK_IDLE && c->last_sqlstate != 0 ? c->last_sqlstate
							 : ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("node \"%s\" lost its part of the transaction, so nothing was committed anywhere", c->node),
					 c->last_error ? errdetail_internal("%s", c->last_error) : 0,
					 errhint("Retry the transaction; a node that is down then gets its writes queued.")));
	}

	worked = palloc(sizeof(bool) * Max(writers.n, Max(readers.n, 1)));
	sql = palloc(sizeof(char *) * Max(writers.n, Max(readers.n, 1)));
	if (writers.n == 1 && !FullTransactionIdIsValid(GetTopFullTransactionIdIfAny()))
	{
		/*
		 * One node took writes and the coordinator wrote nothing (no
		 * transaction id: no queued write, no record, nothing local): the
		 * node's commit is the whole decision, so it commits in one phase,
		 * here, before the local transaction ends (which cannot fail: it has
		 * nothing to commit).  If the link drops during COMMIT the outcome is
		 * unknown, as for a client of one server.
		 */
		RemoteConnection *c = writers.conns[0];

		sql[0] = "COMMIT";
		command_all(writers.conns, 1, sql, "COMMIT", worked, commit_timeout_ms());
		if (c->deferred_failed)
		{
			/* the write before the COMMIT failed: the node's transaction is left open, failed */
			remote_set_xact(c, RXACT_FAILED);
			remote_raise_deferred_failure(c);
		}
		remote_set_xact(c, RXACT_NONE);
		c->xact_depth = 0;
		if (!worked[0])
			ereport(ERROR,
					(errcode(c->link == LINK_IDLE ? ERRCODE_TRANSACTION_ROLLBACK
							 : ERRCODE_TRANSACTION_RESOLUTION_UNKNOWN),
					 errmsg("could not commit on node \"%s\"", c->node),
					 c->last_error ? errdetail_internal("%s", c->last_error) : 0,
					 c->link == LINK_IDLE ? errhint("The node rolled its part back: nothing was committed.")
					 : errhint("The connection was lost during COMMIT: the node may or may not have committed.")));
	}
	else if (writers.n > 0 && ringshard_two_phase_commit)
	{
		FullTransactionId fxid = GetTopFullTransactionId();

		for (int i = 0; i < writers.n; i++)
		{
			make_gid(writers.conns[i], fxid);
			sql[i] = psprintf("PREPARE TRANSACTION '%s'", writers.conns[i]->gid);
		}
		remote_fault_point("before_prepare");
		if (fault_point_armed("after_first_prepare") && writers.n > 1)
		{
			/* tests: one node prepared, the others not yet */
			command_all(writers.conns, 1, sql, "PREPARE TRANSACTION", worked, commit_timeout_ms());
			if (worked[0])
				remote_set_xact(writers.conns[0], RXACT_PREPARED);
			remote_fault_point("after_first_prepare");
			command_all(writers.conns + 1, writers.n - 1, sql + 1, "PREPARE TRANSACTION", worked + 1,
						commit_timeout_ms());
		}
		else
			command_all(writers.conns, writers.n, sql, "PREPARE TRANSACTION", worked, commit_timeout_ms());
		for (int i = 0; i < writers.n; i++)
			if (worked[i])
				remote_set_xact(writers.conns[i], RXACT_PREPARED);
		raise_deferred_failures(&writers);
		for (int i = 0; i < writers.n; i++)
			if (!worked[i])
				ereport(ERROR,
						(errcode(writers.conns[i]->link != LINK_IDLE ? ERRCODE_T_R_SERIALIZATION_FAILURE
								 : ERRCODE_TRANSACTION_ROLLBACK),
						 errmsg("node \"%s\" could not prepare its part of the transaction, so nothing was committed anywhere",
								writers.conns[i]->node),
						 writers.conns[i]->last_error ? errdetail_internal("%s", writers.conns[i]->last_error) : 0,
						 writers.conns[i]->last_sqlstate == ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE ?
						 errhint("Nodes need max_prepared_transactions > 0.") : 0));
		remote_fault_point("after_prepare");
		record_prepared(&writers);

		/*
		 * The local commit is the decision, and post_commit() acts on it: it
		 * must be on disk before any node commits its part.  With
		 * synchronous_commit off the commit record would only be queued for
		 * the WAL writer, and a crash could then lose the decision (and the
		 * records) after some nodes committed: recovery would roll back the
		 * others.
		 */
		ForceSyncCommit();
		remote_fault_point("after_records");
	}
	else if (writers.n > 0)
	{
		/* one-phase commit: only when asked, to measure what two phases cost */
		for (int i = 0; i < writers.n; i++)
			sql[i] = "COMMIT";
		command_all(writers.conns, writers.n, sql, "COMMIT", worked, commit_timeout_ms());
		for (int i = 0; i < writers.n; i++)
		{
			writers.conns[i]->xact = writers.conns[i]->deferred_failed ? RXACT_FAILED : RXACT_NONE;
			writers.conns[i]->xact_depth = writers.conns[i]->deferred_failed ? 1 : 0;
		}
		raise_deferred_failures(&writers);
		for (int i = 0; i < writers.n; i++)
			if (!worked[i])
				ereport(ERROR,
						(errcode(ERRCODE_CONNECTION_FAILURE),
						 errmsg("could not commit on node \"%s\"", writers.conns[i]->node),
						 writers.conns[i]->last_error ? errdetail_internal("%s", writers.conns[i]->last_error) : 0,
						 errhint("With ringshard.two_phase_commit off, nodes committed before this one keep their changes.")));
	}

	/* Nodes only read from: their transactions just end. */
	for (int i = 0; i < readers.n; i++)
		sql[i] = readers.conns[i]->xact == RXACT_OPEN ? "COMMIT" : "ROLLBACK";
	command_all(readers.conns, readers.n, sql, NULL, worked, ringshard_node_timeout_ms);
	for (int i = 0; i < readers.n; i++)
	{
		remote_set_xact(readers.conns[i], RXACT_NONE);
		readers.conns[i]->xact_depth = 0;
		if (!worked[i])
			remote_mark_broken(readers.conns[i], NULL);
	}
}

/*
 * Whether a COMMIT PREPARED (or ROLLBACK PREPARED) failed only because
 * another session finished the part first, or is finishing it: after the
 * local commit, recovery (a rebalance's, the watchdog's) may commit a part
 * while its own transaction's COMMIT PREPARED is on its way, and the one that
 * comes second finds it gone (42704, "does not exist") or being finished
 * (55000, "is busy": PostgreSQL's LockGXact).  The decision is the same
 * either way.
 */
static bool
part_is_busy(RemoteConnection *c)
{
	return c->link == LINK_IDLE && c->last_sqlstate == ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE;
}

static bool
finished_meanwhile(RemoteConnection *c)
{
	return c->link == LINK_IDLE && (c->last_sqlstate == ERRCODE_UNDEFINED_OBJECT || part_is_busy(c));
}

/*
 * A part that another session is committing at this moment: wait until it is
 * gone from the node (its COMMIT PREPARED again finds it gone, or does it),
 * so that the commit is visible on every node once this one returns (the
 * client's next statement must see its own write).  Bounded by a deadline
 * that all of a commit's parts share: if the other session stalls, the part
 * stays for recovery.  False if the part is still busy at the deadline, or
 * a retry failed otherwise (then last_error says how).  Nothing here may
 * throw.
 */
static bool
wait_while_busy(RemoteConnection *c, char *sql, TimestampTz deadline)
{
	while (part_is_busy(c) && GetCurrentTimestamp() < deadline)
	{
		bool		worked;

		pg_usleep(10 * 1000L);
		command_all(&c, 1, &sql, "COMMIT PREPARED", &worked, ringshard_node_timeout_ms);
		if (worked || (c->link == LINK_IDLE && c->last_sqlstate == ERRCODE_UNDEFINED_OBJECT))
			return true;
	}
	return false;
}

/*
 * Whether the decision just committed here is as durable as the commit
 * promised: with synchronous replication, the synchronous standbys have
 * confirmed it.  PostgreSQL ends that wait early, with the commit done
 * locally, when the session is cancelled or terminated or the postmaster
 * dies (a primary being failed over, whose backends linger).  Its parts are
 * then left prepared: a standby promoted without the decision rolls them
 * back, and this server, if it stays primary, commits them at its next
 * recovery round.  Committing them now could split the transaction.
 */
static bool
decision_is_durable(void)
{
	int			mode;
	bool		confirmed;

	if (!PostmasterIsAlive())
		return false;
	/* (the GUC, not the walsenders' shared flag: that one's layout changes between minor releases) */
	if (!SyncRepRequested() || SyncRepStandbyNames == NULL || SyncRepStandbyNames[0] == '\0')
		return true;
	switch (synchronous_commit)
	{
		case SYNCHRONOUS_COMMIT_REMOTE_WRITE:
			mode = SYNC_REP_WAIT_WRITE;
			break;
		case SYNCHRONOUS_COMMIT_REMOTE_APPLY:
			mode = SYNC_REP_WAIT_APPLY;
			break;
		default:
			mode = SYNC_REP_WAIT_FLUSH;
			break;
	}
	LWLockAcquire(SyncRepLock, LW_SHARED);
	confirmed = ((volatile WalSndCtlData *) WalSndCtl)->lsn[mode] >= XactLastCommitEnd;
	LWLockRelease(SyncRepLock);
	return confirmed;
}

/* After the local commit: commit the prepared parts.  Nothing here may throw. */
static void
post_commit(void)
{
	Collected	prepared = collect(COLLECT_PREPARED);
	bool	   *worked;
	char	  **sql;
	TimestampTz busy_deadline;

	if (prepared.n == 0)
		return;
	remote_fault_point("after_local_commit");
	if (!PostmasterIsAlive())
	{
		/* the server is going away: its recovery (or a promoted standby's) finishes them */
		ereport(WARNING,
				(errcode(ERRCODE_TRANSACTION_RESOLUTION_UNKNOWN),
				 errmsg("the server went away during the commit, so its parts on the nodes stay prepared"),
				 errdetail("Recovery finishes them as the transaction records say, once the server is back.")));
		return;
	}
	if (!decision_is_durable())
	{
		ereport(WARNING,
				(errcode(ERRCODE_TRANSACTION_RESOLUTION_UNKNOWN),
				 errmsg("the commit is not confirmed by the synchronous standby, so its parts on the nodes stay prepared"),
				 errdetail("Recovery finishes them as the primary's transaction records say: committed if this server "
						   "stays the primary, rolled back if a standby without the commit is promoted.")));
		return;
	}
	worked = palloc(sizeof(bool) * prepared.n);
	sql = palloc(sizeof(char *) * prepared.n);
	busy_deadline = 0;
	for (int i = 0; i < prepared.n; i++)
		sql[i] = psprintf("COMMIT PREPARED '%s'", prepared.conns[i]->gid);
	if (fault_point_armed("after_first_commit_prepared") && prepared.n > 1)
	{
		/* tests: one node committed, the others not yet */
		command_all(prepared.conns, 1, sql, "COMMIT PREPARED", worked, ringshard_node_timeout_ms);
		remote_fault_point("after_first_commit_prepared");
		command_all(prepared.conns + 1, prepared.n - 1, sql + 1, "COMMIT PREPARED", worked + 1,
					ringshard_node_timeout_ms);
	}
	else
		command_all(prepared.conns, prepared.n, sql, "COMMIT PREPARED", worked, ringshard_node_timeout_ms);
	for (int i = 0; i < prepared.n; i++)
	{
		RemoteConnection *c = prepared.conns[i];

		if (worked[i])
			continue;
		if (part_is_busy(c))
		{
			if (busy_deadline == 0)
				busy_deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
															ringshard_node_timeout_ms > 0 ? ringshard_node_timeout_ms : 10000);
			if (wait_while_busy(c, sql[i], busy_deadline))
				continue;
			if (part_is_busy(c))
			{
				ereport(WARNING,
						(errcode(ERRCODE_TRANSACTION_RESOLUTION_UNKNOWN),
						 errmsg("node \"%s\" is still finishing the commit of its part of the transaction", c->node),
						 errdetail("The transaction is committed; another session (recovery) is committing the "
								   "node's part, which may not be visible there yet.")));
				continue;
			}
			/* a retry failed otherwise: as below */
		}
		if (finished_meanwhile(c))
			ereport(DEBUG1,
					(errmsg_internal("node \"%s\": recovery finished the commit of the part %s", c->node, c->gid)));
		else
			ereport(WARNING,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("node \"%s\" did not confirm the commit of its part of the transaction", c->node),
					 errdetail("The transaction is committed; the node's part stays prepared until "
							   "ringshard.recover_prepared_transactions() commits it (the watchdog does)."),
					 c->last_error ? errdetail_internal("%s", c->last_error) : 0));
	}
}

/* After a local abort: roll back every remote part.  Nothing here may throw. */
static bool
drop_deferred_visitor(RemoteConnection *c, void *arg)
{
	remote_drop_deferred(c);
	return true;
}

static void
post_abort(void)
{
	Collected	all;

	/* a write held back for the commit was never sent: it just goes */
	remote_foreach(drop_deferred_visitor, NULL);
	all = collect(COLLECT_IN_TRANSACTION);

	for (int i = 0; i < all.n; i++)
	{
		RemoteConnection *c = all.conns[i];

		/* A query in flight is cancelled; a link that stays busy is closed. */
		(void) remote_abandon_query(c);
	}
	for (int i = 0; i < all.n; i++)
	{
		RemoteConnection *c = all.conns[i];
		bool		worked = false;
		char	   *sql;

		if (c->link != LINK_IDLE)
			continue;
		if (c->xact == RXACT_PREPARED)
			sql = psprintf("ROLLBACK PREPARED '%s'", c->gid);
		else if (c->xact != RXACT_NONE)
			sql = "ROLLBACK";
		else
			continue;
		command_all(&c, 1, &sql, c->xact == RXACT_PREPARED ? "ROLLBACK PREPARED" : "ROLLBACK", &worked,
					ringshard_node_timeout_ms);
		if (!worked && c->xact == RXACT_PREPARED)
			ereport(WARNING,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("node \"%s\" did not confirm the rollback of its part of the transaction", c->node),
					 errdetail("Its part stays prepared until ringshard.recover_prepared_transactions() rolls it back.")));
		if (!worked)
			remote_mark_broken(c, NULL);
	}
}

/* Every connection leaves the transaction; broken or changed links are closed. */
static bool
reset_visitor(RemoteConnection *c, void *arg)
{
	remote_set_xact(c, RXACT_NONE);
	c->xact_depth = 0;
	c->wrote = false;
	c->takes_moving_rows = false;
	c->unreachable = false;
	c->gid[0] = '\0';
	remote_drop_deferred(c);
	c->deferred_failed = false;
	remote_clear_parked(c);
	if (c->link == LINK_BROKEN || c->invalidated ||
		(c->conn && PQtransactionStatus(c->conn) != PQTRANS_IDLE))
	{
		remote_disconnect(c);
		c->invalidated = false;
	}
	return true;
}

static void
remote_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PARALLEL_PRE_COMMIT:
			pre_commit(false);
			break;
		case XACT_EVENT_PRE_PREPARE:
			pre_commit(true);
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			post_commit();
			remote_foreach(reset_visitor, NULL);
			break;
		case XACT_EVENT_PREPARE:
			remote_foreach(reset_visitor, NULL);
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			post_abort();
			remote_foreach(reset_visitor, NULL);
			break;
	}
}

/* Savepoints follow the local subtransactions. */
static void
remote_subxact_callback(SubXactEvent event, SubTransactionId my_subid,
						SubTransactionId parent_subid, void *arg)
{
	int			level = GetCurrentTransactionNestLevel();
	Collected	at_level;
	bool	   *worked;
	char	  **sql;

	if (event != SUBXACT_EVENT_PRE_COMMIT_SUB && event != SUBXACT_EVENT_ABORT_SUB)
		return;
	at_level = collect(COLLECT_AT_LEVEL);
	if (at_level.n == 0)
		return;
	worked = palloc(sizeof(bool) * at_level.n);
	sql = palloc(sizeof(char *) * at_level.n);

	if (event == SUBXACT_EVENT_PRE_COMMIT_SUB)
	{
		drain_in_flight(&at_level);
		for (int i = 0; i < at_level.n; i++)
			sql[i] = psprintf("RELEASE SAVEPOINT s%d", level);
		command_all(at_level.conns, at_level.n, sql, "RELEASE", worked, ringshard_node_timeout_ms);
		for (int i = 0; i < at_level.n; i++)
		{
			at_level.conns[i]->xact_depth = level - 1;
			if (!worked[i])
			{
				if (at_level.conns[i]->xact == RXACT_OPEN)
					remote_set_xact(at_level.conns[i], RXACT_FAILED);
				ereport(ERROR,
						(errcode(ERRCODE_CONNECTION_FAILURE),
						 errmsg("could not release a savepoint on node \"%s\"", at_level.conns[i]->node),
						 at_level.conns[i]->last_error ? errdetail_internal("%s", at_level.conns[i]->last_error) : 0));
			}
		}
		return;
	}

	/* Abort: cancel what runs, then roll back to the savepoint. */
	for (int i = 0; i < at_level.n; i++)
	{
		RemoteConnection *c = at_level.conns[i];

		(void) remote_abandon_query(c);
		sql[i] = psprintf("ROLLBACK TO SAVEPOINT s%d; RELEASE SAVEPOINT s%d", level, level);
	}
	command_all(at_level.conns, at_level.n, sql, "RELEASE", worked, ringshard_node_timeout_ms);
	for (int i = 0; i < at_level.n; i++)
	{
		RemoteConnection *c = at_level.conns[i];

		c->xact_depth = level - 1;
		if (worked[i])
			remote_set_xact(c, RXACT_OPEN);
		else
		{
			remote_set_xact(c, RXACT_FAILED);
			if (c->link != LINK_IDLE)
				remote_mark_broken(c, NULL);
		}
	}
}

void
remote_transaction_init(void)
{
	RegisterXactCallback(remote_xact_callback, NULL);
	RegisterSubXactCallback(remote_subxact_callback, NULL);
}

/* A control command still running outside any remote transaction is given up. */
static bool
abandon_control_visitor(RemoteConnection *c, void *arg)
{
	if (c->xact == RXACT_NONE && c->link == LINK_BUSY)
		(void) remote_abandon_query(c);
	return true;
}

/*
 * recover_prepared_transactions(): resolve this coordinator's prepared
 * transactions on every node (docs/design.md).  Per node: how many were
 * committed, rolled back, left alone (still running here), and the error.
 */
typedef struct PreparedPart
{
	char	   *gid;
	TimeLineID	timeline;
	FullTransactionId fxid;
	Oid			role;
	char	   *owner;			/* the node's role that prepared it (pg_prepared_xacts.owner) */
	bool		in_progress;
} PreparedPart;

/* Parse the tail of a gid after the instance prefix: "<timeline>_<fxid>_<role>_<server>". */
static bool
parse_gid_tail(const char *tail, PreparedPart *part)
{
	unsigned long timeline;
	unsigned long long fxid;
	unsigned long role;
	unsigned long server;
	long long	started;
	char		extra;
	int			fields;

	/* 1.1's names lack the backend's start time */
	fields = sscanf(tail, "%lu_%llu_%lu_%lu_%lld%c", &timeline, &fxid, &role, &server, &started, &extra);
	if (fields != 5 && (fields != 4 || strchr(tail, '_') == NULL ||
						sscanf(tail, "%lu_%llu_%lu_%lu%c", &timeline, &fxid, &role, &server, &extra) != 4))
		return false;
	part->timeline = (TimeLineID) timeline;
	part->fxid = FullTransactionIdFromU64((uint64) fxid);
	part->role = (Oid) role;
	return true;
}

/* Whether a gid has a record; with fresh rows when asked. */
static bool
has_record(const char *gid)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(gid)};
	int			nrows;

	(void) owner_catalog_query("SELECT 1 FROM ringshard.transaction_records WHERE gid OPERATOR(pg_catalog.=) $1",
							   1, argtypes, values, false, &nrows);
	return nrows > 0;
}

/*
 * Connect to a node for recovery, as the calling role or a part's owner.
 * COMMIT PREPARED runs outside a transaction block: not on a connection
 * where this transaction works.
 */
static void
connect_outside_transaction(RemoteConnection *c, const char *node)
{
	if (c->xact != RXACT_NONE)
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("this transaction has work in progress on node \"%s\"", node),
				 errhint("Run ringshard.recover_prepared_transactions() in a transaction of its own.")));
	remote_connect_all(&c, 1, false);
}

PG_FUNCTION_INFO_V1(ringshard_recover_prepared_transactions);

Datum
ringshard_recover_prepared_transactions(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			nnodes;
	char	  **nodes;
	char	   *prefix;
	TimeLineID	current_timeline = GetWALInsertionTimeLine();

	/* The decision reads records committed after this statement began. */
	if (IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("ringshard.recover_prepared_transactions() must run at isolation level READ COMMITTED"),
				 errdetail("It must see the transaction records committed while it runs.")));
	InitMaterializedSRF(fcinfo, 0);
	prefix = psprintf("rs_%s_" UINT64_FORMAT "_", catalog_coordinator_id(), GetSystemIdentifier());
	nodes = catalog_addressed_nodes(&nnodes);
	/* recover_prepared_transactions_on(nodes): those nodes only (a rebalance, before it deletes copied rows) */
	if (PG_NARGS() == 1)
	{
		ArrayType  *only = PG_GETARG_ARRAYTYPE_P(0);
		Datum	   *names;
		bool	   *name_nulls;
		int			nnames;
		int			kept = 0;

		deconstruct_array(only, TEXTOID, -1, false, TYPALIGN_INT, &names, &name_nulls, &nnames);
		for (int n = 0; n < nnodes; n++)
			for (int i = 0; i < nnames; i++)
				if (!name_nulls[i] && strcmp(nodes[n], TextDatumGetCString(names[i])) == 0)
				{
					nodes[kept++] = nodes[n];
					break;
				}
		nnodes = kept;
	}

	for (int n = 0; n < nnodes; n++)
	{
		Datum		values[5];
		bool		nulls[5] = {false, false, false, false, true};
		/* changed in PG_TRY, read after it */
		volatile int committed = 0;
		volatile int rolled_back = 0;
		volatile int left = 0;
		MemoryContext node_context = AllocSetContextCreate(CurrentMemoryContext, "ringshard recovery",
														   ALLOCSET_DEFAULT_SIZES);
		MemoryContext old = MemoryContextSwitchTo(node_context);
		ResourceOwner owner = CurrentResourceOwner;
		volatile bool failed = false;
		char	   *error = NULL;

		/* Each node in a subtransaction: one node's trouble must not stop the others. */
		BeginInternalSubTransaction(NULL);
		MemoryContextSwitchTo(node_context);
		PG_TRY();
		{
			Oid			argtypes[1] = {TEXTOID};
			Datum		args[1] = {CStringGetTextDatum(nodes[n])};
			int			nrecords;
			char	  **records;
			RemoteConnection *c = remote_connection(nodes[n], GetUserId());
			PGresult   *res;
			PreparedPart *parts;
			int			nparts;
			char	   *list_sql;

			/* Records first: one seen here was written after its PREPARE (see design). */
			records = owner_catalog_query("SELECT gid FROM ringshard.transaction_records "
										  "WHERE node_name OPERATOR(pg_catalog.=) $1",
										  1, argtypes, args, false, &nrecords);
			connect_outside_transaction(c, nodes[n]);
			list_sql = psprintf("SELECT gid, owner FROM pg_catalog.pg_prepared_xacts "
								"WHERE database OPERATOR(pg_catalog.=) pg_catalog.current_database() "
								"AND pg_catalog.starts_with(gid, %s)", quote_literal_cstr(prefix));
			res = remote_exec_timed(c, list_sql, false, ringshard_node_timeout_ms);
			remote_expect_rows(c, res, 2, 0, -1, "the list of prepared transactions");
			nparts = PQntuples(res);
			parts = palloc0(sizeof(PreparedPart) * Max(nparts, 1));
			for (int i = 0; i < nparts; i++)
			{
				parts[i].gid = pstrdup(remote_text_value(c, res, i, 0, "the list of prepared transactions"));
				parts[i].owner = pstrdup(remote_text_value(c, res, i, 1, "the list of prepared transactions"));
			}
			remote_result_free(res);

			/* A record whose part is no longer prepared has done its work. */
			for (int r = 0; r < nrecords; r++)
			{
				bool		still_prepared = false;

				for (int i = 0; i < nparts && !still_prepared; i++)
					still_prepared = strcmp(parts[i].gid, records[r]) == 0;
				if (!still_prepared)
				{
					Datum		gid_arg[1] = {CStringGetTextDatum(records[r])};
					int			ignored;

					(void) owner_catalog_query("DELETE FROM ringshard.transaction_records "
											   "WHERE gid OPERATOR(pg_catalog.=) $1",
											   1, argtypes, gid_arg, false, &ignored);
				}
			}

			/* Which parts belong to transactions still running here? (before reading records again) */
			for (int i = 0; i < nparts; i++)
			{
				/* the node was asked for our names only; a node that answers others is not believed */
				if (strncmp(parts[i].gid, prefix, strlen(prefix)) != 0 ||
					!parse_gid_tail(parts[i].gid + strlen(prefix), &parts[i]))
				{
					parts[i].in_progress = true;	/* not one of ours after all: leave it */
					continue;
				}
				/*
				 * An id not handed out yet (after a crash, ids that no WAL
				 * record carried are handed out again) is no running
				 * transaction's: its part is a crashed transaction's.
				 */
				parts[i].in_progress = parts[i].timeline == current_timeline &&
					FullTransactionIdPrecedes(parts[i].fxid, ReadNextFullTransactionId()) &&
					TransactionIdIsInProgress(XidFromFullTransactionId(parts[i].fxid));
			}

			for (int i = 0; i < nparts; i++)
			{
				bool		commit;
				RemoteConnection *owner_conn;
				char	   *sql;

				if (parts[i].in_progress)
				{
					left++;
					continue;
				}
				commit = false;
				for (int r = 0; r < nrecords && !commit; r++)
					commit = strcmp(records[r], parts[i].gid) == 0;
				if (!commit)
				{
					/* a fresh look (a new snapshot): it may have committed since the first read */
					commit = has_record(parts[i].gid);
				}
				/* Finish it as the role that prepared it, with that role's mapping. */
				owner_conn = c;
				if (OidIsValid(parts[i].role) && parts[i].role != GetUserId() &&
					SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(parts[i].role)))
				{
					owner_conn = remote_connection(nodes[n], parts[i].role);
					connect_outside_transaction(owner_conn, nodes[n]);
				}
				/*
				 * The name says which role prepared it, but anyone on the node
				 * may prepare a transaction of any name: one not prepared by
				 * the node role that this role connects as is not ours.  Left
				 * alone, it holds back nothing else.
				 */
				if (strcmp(PQuser(owner_conn->conn), parts[i].owner) != 0)
				{
					left++;
					ereport(WARNING,
							(errcode(ERRCODE_INVALID_TRANSACTION_STATE),
							 errmsg("prepared transaction %s on node \"%s\" was prepared by role \"%s\", not by the role its name gives",
									parts[i].gid, nodes[n], parts[i].owner),
							 errdetail("Recovery leaves it alone; a superuser on the node may roll it back.")));
					continue;
				}
				sql = psprintf("%s PREPARED %s", commit ? "COMMIT" : "ROLLBACK", quote_literal_cstr(parts[i].gid));
				{
					RemoteResult done;

					owner_conn->last_sqlstate = 0;
					remote_send(owner_conn, sql, false, owner_conn);
					remote_receive_all(&owner_conn, 1, &done, ringshard_node_timeout_ms);
					if (!done.ok && !done.lost && finished_meanwhile(owner_conn))
					{
						/*
						 * Its own transaction, which committed here a moment
						 * ago, finished it (or is finishing it) on the node:
						 * nothing is left to do.
						 */
						remote_result_free(done.result);
						left += part_is_busy(owner_conn);
						continue;
					}
					res = remote_answer(owner_conn, &done, sql, NULL);
					remote_expect_command(owner_conn, res, commit ? "COMMIT PREPARED" : "ROLLBACK PREPARED", -1,
										  "the resolution of a prepared transaction");
					remote_result_free(res);
				}
				if (commit)
				{
					Datum		gid_arg[1] = {CStringGetTextDatum(parts[i].gid)};
					int			ignored;

					(void) owner_catalog_query("DELETE FROM ringshard.transaction_records "
											   "WHERE gid OPERATOR(pg_catalog.=) $1",
											   1, argtypes, gid_arg, false, &ignored);
					committed++;
				}
				else
					rolled_back++;
			}
			ReleaseCurrentSubTransaction();
			MemoryContextSwitchTo(node_context);
			CurrentResourceOwner = owner;
		}
		PG_CATCH();
		{
			ErrorData  *edata;

			edata = remote_rollback_subtransaction(node_context);
			/* a query left running (a cancel, a timeout) must not hold the links */
			remote_foreach(abandon_control_visitor, NULL);
			MemoryContextSwitchTo(node_context);
			CurrentResourceOwner = owner;
			remote_rethrow_cancel(edata);
			error = edata->message;
			failed = true;
		}
		PG_END_TRY();
		MemoryContextSwitchTo(old);

		if (committed > 0 || rolled_back > 0)
			ereport(LOG,
					(errmsg("ringshard: recovery finished %d prepared transaction(s) on node \"%s\": "
							"%d committed, %d rolled back, %d left to their running transactions",
							committed + rolled_back, nodes[n], committed, rolled_back, left)));
		values[0] = CStringGetTextDatum(nodes[n]);
		values[1] = Int32GetDatum(committed);
		values[2] = Int32GetDatum(rolled_back);
		values[3] = Int32GetDatum(left);
		if (failed)
		{
			values[4] = CStringGetTextDatum(error);
			nulls[4] = false;
		}
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		MemoryContextDelete(node_context);
	}
	PG_RETURN_VOID();
}

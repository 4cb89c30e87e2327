/*
 * guard.c
 *		What runs on a worker for the coordinator: reads_here(), which makes a
 *		fan-out read each row once, the trigger that refuses rows this
 *		node does not hold under its topology, and the check that a write
 *		sent with the commit stored every row.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/relation.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "access/xlog.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "utils/timestamp.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/typcache.h"

#include "routing/annotated_tables.h"
#include "routing/placement.h"
#include "routing/topology_cache.h"
#include "guc.h"

/* Whether a node name (a text datum) equals a C string. */
static bool
node_name_is(Datum node_text, const char *name)
{
	text	   *t = DatumGetTextPP(node_text);

	return strlen(name) == VARSIZE_ANY_EXHDR(t) &&
		memcmp(name, VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t)) == 0;
}

/* What the trigger keeps between rows. */
typedef struct WorkerState
{
	TablePlacement placement;
	uint64		generation;
	char	   *local_node;
	int64		topology_version;
} WorkerState;

/*
 * This server's node name and topology version from ringshard.cluster_state,
 * read once per topology generation: a change of cluster_state moves the
 * generation on (its invalidate_topology_cache trigger), and every write a
 * node takes would otherwise pay a query for it.
 */
static char *cached_local_node = NULL;
static int64 cached_topology_version = 0;
static uint64 cached_generation = 0;

static void
read_cluster_state(WorkerState *state, MemoryContext mcxt)
{
	bool		isnull;

	if (cached_generation != topology_cache_generation)
	{
		uint64		generation = topology_cache_generation;

		if (cached_local_node)
			pfree(cached_local_node);
		cached_local_node = NULL;
		cached_topology_version = 0;

		/*
		 * Read as committed now, not as of the calling statement's snapshot
		 * (a REPEATABLE READ transaction's may predate the change that moved
		 * the generation on): an older row cached as current would outlive
		 * the transaction.  A parallel worker may not take a snapshot.
		 */
		if (!IsInParallelMode())
			PushActiveSnapshot(GetLatestSnapshot());
		SPI_connect();
		if (SPI_execute("SELECT local_node, topology_version FROM ringshard.cluster_state", true, 1) == SPI_OK_SELECT &&
			SPI_processed == 1)
		{
			char	   *value = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
			Datum		version = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);

			if (value)
				cached_local_node = MemoryContextStrdup(TopMemoryContext, value);
			if (!isnull)
				cached_topology_version = DatumGetInt64(version);
		}
		SPI_finish();
		if (!IsInParallelMode())
			PopActiveSnapshot();
		/* an invalidation that arrived while it was read: read again next time */
		cached_generation = generation == topology_cache_generation ? generation : 0;
	}
	state->local_node = cached_local_node ? MemoryContextStrdup(mcxt, cached_local_node) : NULL;
	state->topology_version = cached_topology_version;
}

/*
 * A node behind the coordinator's statement may only be in the middle of
 * taking the sync_topology that the coordinator has committed: its part
 * (prepared, holding its lock on cluster_state) commits a moment later.  Wait
 * for such a part, at most ringshard.node_timeout and interruptibly, so that
 * a statement meeting that moment goes on under the new version instead of
 * failing.  Only a prepared transaction's lock is waited for (another
 * session's, autovacuum's, is no sync on its way).  True if the version may
 * have moved on (the caller reads it again); false if no change was in
 * flight (the node missed a sync).
 */
static bool
prepared_change_holds(Oid relid)
{
	LockData   *locks = GetLockStatusData();
	bool		found = false;

	/* (a prepared transaction's locks belong to a dummy process, pid 0, as pg_locks shows) */
	for (int i = 0; i < locks->nelements && !found; i++)
	{
		LockInstanceData *lock = &locks->locks[i];

		found = lock->locktag.locktag_type == LOCKTAG_RELATION &&
			lock->locktag.locktag_field1 == MyDatabaseId && lock->locktag.locktag_field2 == relid &&
			lock->pid == 0 && (lock->holdMask & LOCKBIT_ON(RowExclusiveLock)) != 0;
	}
	pfree(locks->locks);
	pfree(locks);
	return found;
}

static bool
waited_for_topology_change(void)
{
	Oid			schema = get_namespace_oid("ringshard", true);
	Oid			relid = OidIsValid(schema) ? get_relname_relid("cluster_state", schema) : InvalidOid;
	uint64		generation = topology_cache_generation;
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													  ringshard_node_timeout_ms > 0 ? ringshard_node_timeout_ms : 10000);
	bool		waited = false;
	long		pause_us = 2 * 1000L;

	/* (a parallel worker reads the query's snapshot, and a standby takes no ShareLock: nothing to wait for) */
	if (!OidIsValid(relid) || IsInParallelMode() || RecoveryInProgress())
		return false;

	/*
	 * ShareLock conflicts with the RowExclusiveLock of the change's UPDATE;
	 * acquiring takes its invalidations.  The looks come quickly at first (a
	 * sync's parts commit within milliseconds of its commit), then every
	 * 100 ms: a part left prepared by a crash, until recovery, costs each
	 * read that meets it some fifty looks at the lock table, not thousands.
	 */
	while (!ConditionalLockRelationOid(relid, ShareLock))
	{
		if (!prepared_change_holds(relid) || GetCurrentTimestamp() >= deadline)
			return generation != topology_cache_generation;
		CHECK_FOR_INTERRUPTS();
		pg_usleep(pause_us);
		pause_us = Min(pause_us * 2, 100 * 1000L);
		waited = true;
	}
	UnlockRelationOid(relid, ShareLock);
	return waited || generation != topology_cache_generation;
}

/* What a reads_here() call site keeps: the table's placement, this node, who is left out. */
typedef struct ReadsHereState
{
	TablePlacement placement;
	uint64		generation;
	Oid			relid;
	int			local_index;	/* this node's index in the placement, -1 if none */
	int64		topology_version;
	char	   *local_node;
	bool	   *excluded;		/* by node index */
	ArrayType  *excluded_array; /* the argument they were read from */
} ReadsHereState;

/*
 * The replicas of a reads_here() or replica_slot() call's key, by node
 * index, into replicas[] (their count into *nreplicas), and the call site's
 * state, with this node's index and the excluded nodes; NULL if an argument
 * is null or this node is not in the table's placement.  The coordinator
 * passes its topology version: a node holding another one would answer for
 * the wrong rows, so that is an error (NULL skips the check).
 */
static ReadsHereState *
key_replicas_here(FunctionCallInfo fcinfo, uint16 *replicas, int *nreplicas)
{
	ReadsHereState *state = fcinfo->flinfo->fn_extra;
	bool		with_keyspace = PG_NARGS() == 5;
	int			excluded_arg = with_keyspace ? 3 : 2;
	int			version_arg = excluded_arg + 1;
	Oid			relid;
	ArrayType  *excluded;
	bool		waited = false;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || (with_keyspace && PG_ARGISNULL(2)) || PG_ARGISNULL(excluded_arg))
		return NULL;
	relid = PG_GETARG_OID(0);
	excluded = PG_GETARG_ARRAYTYPE_P(excluded_arg);
	if (state == NULL)
		state = fcinfo->flinfo->fn_extra = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(ReadsHereState));
reload:
	if (state->generation != topology_cache_generation || state->relid != relid)
	{
		Relation	rel;
		WorkerState cluster;

		/* whoever asks must be able to read the table, before it is even locked */
		if (pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("permission denied for table %s", get_rel_name(relid) ? get_rel_name(relid) : "?")));
		rel = relation_open(relid, AccessShareLock);
		memset(&state->placement, 0, sizeof(state->placement));
		table_placement_load_without_moves(&state->placement, relid, RelationGetDescr(rel), fcinfo->flinfo->fn_mcxt);

		/*
		 * The key (and keyspace) arrive as "any": they are read as the
		 * columns' types, so they must be of exactly those types.
		 */
		if (get_fn_expr_argtype(fcinfo->flinfo, 1) !=
			TupleDescAttr(RelationGetDescr(rel), state->placement.key_attnum - 1)->atttypid ||
			(with_keyspace &&
			 (state->placement.keyspace_attnum <= 0 ||
			  get_fn_expr_argtype(fcinfo->flinfo, 2) !=
			  TupleDescAttr(RelationGetDescr(rel), state->placement.keyspace_attnum - 1)->atttypid)) ||
			(!with_keyspace && state->placement.keyspace_attnum > 0))
		{
			relation_close(rel, AccessShareLock);
			state->generation = 0;
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("%s() needs the key%s of table %s as the table's column type%s",
							get_func_name(fcinfo->flinfo->fn_oid), with_keyspace ? " and keyspace" : "",
							get_rel_name(relid), with_keyspace ? "s" : "")));
		}
		relation_close(rel, AccessShareLock);
		read_cluster_state(&cluster, fcinfo->flinfo->fn_mcxt);
		state->local_node = cluster.local_node;
		state->topology_version = cluster.topology_version;
		state->local_index = -1;
		for (int i = 0; state->local_node && i < placement_node_count(&state->placement); i++)
			if (node_name_is(placement_node_text(&state->placement, i), state->local_node))
				state->local_index = i;
		state->relid = relid;
		state->generation = topology_cache_generation;
		state->excluded_array = NULL;
	}
	/*
	 * A node ahead of the coordinator's statement took a sync_topology that
	 * committed after the statement read its version: the topology changed
	 * under it, which a retry settles (40001, as clients and pgbench retry).
	 * A node behind is either taking that sync at this moment (its part
	 * commits a moment after the coordinator's commit: wait for it, once) or
	 * missed one, which needs a sync_topology.
	 */
	if (!PG_ARGISNULL(version_arg) && PG_GETARG_INT64(version_arg) < state->topology_version)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("node \"%s\" holds topology version " INT64_FORMAT ", newer than the coordinator's " INT64_FORMAT
						" when the statement began",
						state->local_node ? state->local_node : "?", state->topology_version,
						PG_GETARG_INT64(version_arg)),
				 errdetail("The topology changed while the statement ran."),
				 errhint("Retry the transaction.")));
	if (!PG_ARGISNULL(version_arg) && PG_GETARG_INT64(version_arg) > state->topology_version && !waited)
	{
		waited = true;
		if (waited_for_topology_change())
		{
			/* read this node's version and the table's placement again */
			cached_generation = 0;
			state->generation = 0;
			goto reload;
		}
	}
	if (!PG_ARGISNULL(version_arg) && PG_GETARG_INT64(version_arg) != state->topology_version)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("node \"%s\" holds topology version " INT64_FORMAT ", the coordinator " INT64_FORMAT,
						state->local_node ? state->local_node : "?", state->topology_version,
						PG_GETARG_INT64(version_arg)),
				 errhint("Run ringshard.sync_topology() on the coordinator.")));
	if (state->local_index < 0)
		return NULL;
	if (state->excluded_array == NULL || VARSIZE(state->excluded_array) != VARSIZE(excluded) ||
		memcmp(state->excluded_array, excluded, VARSIZE(excluded)) != 0)
	{
		MemoryContext old = MemoryContextSwitchTo(fcinfo->flinfo->fn_mcxt);
		Datum	   *values;
		bool	   *nulls;
		int			count;
		int			nnodes = placement_node_count(&state->placement);

		state->excluded_array = (ArrayType *) palloc(VARSIZE(excluded));
		memcpy(state->excluded_array, excluded, VARSIZE(excluded));
		state->excluded = palloc0(sizeof(bool) * Max(nnodes, 1));
		deconstruct_array(excluded, TEXTOID, -1, false, TYPALIGN_INT, &values, &nulls, &count);
		for (int e = 0; e < count; e++)
			for (int i = 0; i < nnodes && !nulls[e]; i++)
				if (node_name_is(placement_node_text(&state->placement, i), TextDatumGetCString(values[e])))
					state->excluded[i] = true;
		MemoryContextSwitchTo(old);
	}
	*nreplicas = placement_key_replicas(&state->placement, PG_GETARG_DATUM(1),
										with_keyspace ? PG_GETARG_DATUM(2) : (Datum) 0, replicas);
	return state;
}

PG_FUNCTION_INFO_V1(ringshard_reads_here_by_key);

/*
 * reads_here(table, key [, keyspace], excluded, version): on a worker,
 * whether this node is the first of the key's replicas outside the excluded
 * nodes, so that a fan-out reads each row exactly once.  It takes the key
 * columns, not the row: building each row as a value cost more than the
 * routing.  (Not named ringshard_reads_here: that symbol is 1.0's
 * reads_here(row, excluded); see legacy_1_0.c.)
 */
Datum
ringshard_reads_here_by_key(PG_FUNCTION_ARGS)
{
	uint16		replicas[PLACEMENT_MAX_REPLICAS];
	int			n;
	ReadsHereState *state = key_replicas_here(fcinfo, replicas, &n);

	for (int i = 0; state && i < n; i++)
		if (!state->excluded[replicas[i]])
			PG_RETURN_BOOL(replicas[i] == state->local_index);
	PG_RETURN_BOOL(false);
}

PG_FUNCTION_INFO_V1(ringshard_replica_slot_by_key);

/*
 * replica_slot(table, key [, keyspace], excluded, version): on a worker,
 * 100 times the number of the key's replicas outside the excluded nodes,
 * plus this node's rank among them (0 for the first); NULL if this node is
 * not one of them.  A change sent to every replica answers how many rows it
 * changed in each slot: a row changes on every replica or on none, so, for
 * each number of replicas, every rank must count the same rows.  A replica
 * that missed a row (one still in doubt there, say, inserted by a
 * transaction whose commit has not reached it) shows as a rank that counted
 * fewer, and the coordinator fails the statement instead of acknowledging a
 * change that only some replicas made.
 */
Datum
ringshard_replica_slot_by_key(PG_FUNCTION_ARGS)
{
	uint16		replicas[PLACEMENT_MAX_REPLICAS];
	int			n;
	int			copies = 0;
	int			rank = -1;
	ReadsHereState *state = key_replicas_here(fcinfo, replicas, &n);

	StaticAssertStmt(PLACEMENT_MAX_REPLICAS < 100, "a slot is copies * 100 + rank");
	if (state == NULL)
		PG_RETURN_NULL();
	for (int i = 0; i < n; i++)
		if (!state->excluded[replicas[i]])
		{
			if (replicas[i] == state->local_index)
				rank = copies;
			copies++;
		}
	if (rank < 0)
		PG_RETURN_NULL();
	PG_RETURN_INT32(copies * 100 + rank);
}

PG_FUNCTION_INFO_V1(ringshard_reject_misrouted_rows);

/*
 * Trigger on a worker's distributed table: a row this node does not hold
 * under the topology it was given is an error, so a misrouted write fails
 * loudly instead of hiding data.
 */
Datum
ringshard_reject_misrouted_rows(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	Relation	rel;
	HeapTuple	row;
	WorkerState *state;
	Datum	   *nodes;
	int			count;
	StringInfoData holders;

	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_FOR_ROW(trigdata->tg_event) ||
		!TRIGGER_FIRED_BEFORE(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("ringshard_worker.reject_misrouted_rows() must be a BEFORE row trigger")));
	rel = trigdata->tg_relation;
	row = TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event) ? trigdata->tg_newtuple : trigdata->tg_trigtuple;

	state = fcinfo->flinfo->fn_extra;
	if (state == NULL)
		state = fcinfo->flinfo->fn_extra = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(WorkerState));
	if (state->generation != topology_cache_generation ||
		!table_placement_is_current(&state->placement, RelationGetRelid(rel)))
	{
		table_placement_load_without_moves(&state->placement, RelationGetRelid(rel), RelationGetDescr(rel), fcinfo->flinfo->fn_mcxt);
		read_cluster_state(state, fcinfo->flinfo->fn_mcxt);
		state->generation = topology_cache_generation;
	}
	if (state->local_node == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("this server is not a ringshard worker"),
				 errhint("Run ringshard.sync_topology() on the coordinator.")));
	if (!table_placement_place(&state->placement, row, RelationGetDescr(rel), false, &nodes, &count))
		ereport(ERROR,
				(errcode(ERRCODE_NOT_NULL_VIOLATION),
				 errmsg("a row of distributed table %s needs a sharding key", RelationGetRelationName(rel))));
	initStringInfo(&holders);
	for (int i = 0; i < count; i++)
	{
		if (node_name_is(nodes[i], state->local_node))
			return PointerGetDatum(row);
		/* the coordinator writes a key not copied yet to its old replicas, this one of them */
		if (ringshard_accept_moving_rows)
			return PointerGetDatum(row);
		appendStringInfo(&holders, "%s%s", i ? ", " : "", TextDatumGetCString(nodes[i]));
	}
	ereport(ERROR,
			(errcode(ERRCODE_CHECK_VIOLATION),
			 errmsg("row of table %s does not belong on node \"%s\"", RelationGetRelationName(rel), state->local_node),
			 errdetail("Under the topology this node holds, its nodes are %s.", holders.data),
			 errhint("Write through the coordinator, which sends each row to its replicas.")));
}

PG_FUNCTION_INFO_V1(ringshard_expect_stored_rows);

/*
 * On a worker: the rows of a write its coordinator sends with the commit
 * were all stored, or the node's transaction fails here, before the
 * PREPARE TRANSACTION or COMMIT that follows in the same string can run.
 * A trigger or rule on the node's table that skips rows would otherwise
 * leave this replica committed with fewer rows than its siblings while the
 * statement reports an error (the coordinator checks the count only once
 * the whole string has run).
 */
Datum
ringshard_expect_stored_rows(PG_FUNCTION_ARGS)
{
	int64		stored = PG_GETARG_INT64(0);
	int64		expected = PG_GETARG_INT64(1);

	if (stored != expected)
		ereport(ERROR,
				(errcode(ERRCODE_TRIGGERED_DATA_CHANGE_VIOLATION),
				 errmsg("the node stored " INT64_FORMAT " of the " INT64_FORMAT " rows it was sent", stored, expected),
				 errdetail("A trigger or rule on the node's table changed what an INSERT stores, so this replica would differ from the others."),
				 errhint("A distributed table's rows are stored on each node as they were sent: drop such triggers and rules on the nodes.")));
	PG_RETURN_INT64(stored);
}

/*
 * scan.c
 *		Executing scans of distributed tables (see fdw.h).
 *
 * A fan-out opens a cursor on every node at once and streams batches from
 * whichever node has one ready, fetching the next batch of a node as soon as
 * the previous one arrives, so the nodes work in parallel with us.  With a
 * sort order each node's stream is sorted and the streams are merged here.
 * A router scan sends each key's query to one healthy replica (keys grouped
 * per node) and fails over to the next replica when a node cannot answer.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/explain.h"
#include "common/pg_prng.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/sortsupport.h"

#include "fdw/deparse.h"
#include "fdw/fdw.h"
#include "fdw/node_analysis.h"
#include "fdw/upper.h"
#include "fdw/write_locks.h"
#include "remote/catalog.h"
#include "remote/connection.h"
#include "remote/values.h"
#include "routing/hot_keys.h"
#include "routing/placement.h"
#include "types/key_bytes.h"

/* One key of a router scan and the replicas it may be read from. */
typedef struct KeyRoute
{
	Datum		key;
	uint16		replicas[PLACEMENT_MAX_REPLICAS];	/* preferred first */
	int			nreplicas;
	int			tried;			/* replicas[0 .. tried-1] failed; -1 once answered or given up */
	bool		sent;			/* a query for it is on its way to replicas[tried] */
} KeyRoute;

/* What one node returns for this scan. */
typedef struct NodeStream
{
	int			node;			/* index in the placement */
	RemoteConnection *conn;
	char		cursor[32];		/* fan-out: its cursor; router: empty */
	PGresult   *batch;			/* rows not yet returned */
	int			next;			/* next row of batch */
	bool		in_flight;		/* a query or FETCH is on its way */
	bool		exhausted;		/* nothing more will come */
	List	   *routes;			/* router: the KeyRoutes sent here */
	RsMergeRow	merge;			/* merge: the current row's sort values */
	bool		has_row;		/* merge: merge holds the current row */
} NodeStream;


typedef struct RsScanState
{
	Relation	rel;
	TupleDesc	desc;
	RsScanPlan *plan;			/* what planning decided (plan_state.h) */
	RsScanKind	kind;
	Oid			relid;
	Oid			userid;
	int			nretrieved;
	int		   *retrieved_attnums;
	List	   *param_exprs;
	List	   *param_states;
	ExprState  *key_state;
	ExprState  *keyspace_state;
	char	   *key_column;		/* router scans: quoted */
	Oid			key_type;
	TablePlacement placement;
	RemoteCodec *text_codecs;	/* by attnum - 1: how a column's text from a node is read */
	RemoteCodec *binary_codecs; /* ... its binary form, for the binary-safe types */
	bool		binary_fanout;	/* every retrieved column binary-safe: fan-outs read a binary cursor */
	NodeStream **streams;		/* pointers: a stream's address is the owner of its queries */
	int			nstreams;
	int			capacity;
	bool		started;
	int			nsort;
	SortSupport sortkeys;
	int		   *sort_columns;	/* 0-based result column of each sort key */
	MemoryContext row_cxt;		/* the row being returned */
	MemoryContext scan_cxt;		/* everything of one run of the scan */
	bool		explain_only;
	RsScanSQL  *sql;			/* this run's SQL parts, parameters filled in */
	int			fetch_size;		/* ringshard.fetch_size when the run started: every FETCH of it asks this many */
	NodeAnalyses *analysis;		/* EXPLAIN ANALYZE: by placement node, else NULL */
} RsScanState;

static unsigned int cursor_number = 0;

/* The nodes the session's last fan-out read could not reach (last_fanout_missing()). */
static ArrayType *last_fanout_missing = NULL;

static void
remember_missing(TablePlacement *p, const bool *excluded, int n)
{
	Datum	   *names = palloc(sizeof(Datum) * Max(n, 1));
	int			count = 0;
	MemoryContext old;

	for (int i = 0; i < n; i++)
		if (excluded[i])
			names[count++] = placement_node_text(p, i);
	old = MemoryContextSwitchTo(TopMemoryContext);
	if (last_fanout_missing)
		pfree(last_fanout_missing);
	last_fanout_missing = construct_array(names, count, TEXTOID, -1, false, TYPALIGN_INT);
	MemoryContextSwitchTo(old);
}

PG_FUNCTION_INFO_V1(ringshard_last_fanout_missing);

Datum
ringshard_last_fanout_missing(PG_FUNCTION_ARGS)
{
	if (last_fanout_missing == NULL)
		PG_RETURN_ARRAYTYPE_P(construct_empty_array(TEXTOID));
	PG_RETURN_ARRAYTYPE_P(DatumGetArrayTypePCopy(PointerGetDatum(last_fanout_missing)));
}

/* The coordinator's topology version, which a fan-out's nodes must hold too. */
int64
rsfdw_coordinator_topology_version(void)
{
	int			nrows;
	char	  **rows = owner_catalog_query("SELECT topology_version FROM ringshard.cluster_state",
										   0, NULL, NULL, true, &nrows);

	return nrows == 1 && rows[0] ? strtoll(rows[0], NULL, 10) : 0;
}

void
rsBeginForeignScan(ForeignScanState *node, int eflags)
{
	ForeignScan *plan = (ForeignScan *) node->ss.ps.plan;
	EState	   *estate = node->ss.ps.state;
	RsScanState *state = palloc0(sizeof(RsScanState));
	RangeTblEntry *rte;
	ListCell   *lc;
	int			i;

	if (plan->scan.scanrelid == 0)
		return rsupper_begin_scan(node, eflags);	/* aggregates or top rows: upper_scan.c */
	node->fdw_state = state;
	state->rel = node->ss.ss_currentRelation;
	state->desc = RelationGetDescr(state->rel);
	state->plan = rsfdw_scan_plan_from_private(plan->fdw_private);
	state->relid = state->plan->relid;
	state->kind = state->plan->kind;
	state->key_column = state->kind != RS_SCAN_FANOUT ? rsfdw_column_name(state->relid, state->plan->key_attnum) : "";
	state->explain_only = (eflags & EXEC_FLAG_EXPLAIN_ONLY) != 0;

	/* Remote work runs as the role that reads: a view's owner through a view. */
	rte = exec_rt_fetch(plan->scan.scanrelid, estate);
	state->userid = OidIsValid(rte->checkAsUser) ? rte->checkAsUser : GetUserId();

	/* One statement, one topology: the placement is taken now and kept. */
	table_placement_load(&state->placement, state->relid, state->desc, estate->es_query_cxt);
	state->key_type = TupleDescAttr(state->desc, state->placement.key_attnum - 1)->atttypid;

	state->nretrieved = list_length(state->plan->retrieved);
	state->retrieved_attnums = palloc(sizeof(int) * Max(state->nretrieved, 1));
	i = 0;
	foreach(lc, state->plan->retrieved)
		state->retrieved_attnums[i++] = lfirst_int(lc);
	/* Values come back in binary where their types allow (remote/values.h), else as text. */
	state->text_codecs = remote_codecs_for_desc(state->desc, false, NULL);
	state->binary_codecs = remote_codecs_for_desc(state->desc, true, NULL);
	state->binary_fanout = true;
	for (i = 0; i < state->nretrieved; i++)
		state->binary_fanout &= state->binary_codecs[state->retrieved_attnums[i] - 1].binary;

	/* Parameters of the SQL, then the key values of a router scan. */
	rsfdw_init_fdw_exprs(plan->fdw_exprs, state->plan->nparams, (PlanState *) node, &state->param_exprs,
						 &state->param_states, &state->key_state, &state->keyspace_state);

	/* Merging sorted streams: comparators for the sort keys. */
	state->nsort = state->plan->nsort;
	if (state->nsort > 0)
	{
		state->sortkeys = palloc0(sizeof(SortSupportData) * state->nsort);
		state->sort_columns = palloc(sizeof(int) * state->nsort);
		rsfdw_prepare_sort_keys(state->plan->sort, state->nsort, state->sortkeys, state->sort_columns);
	}
	state->row_cxt = AllocSetContextCreate(estate->es_query_cxt, "ringshard scan row", ALLOCSET_DEFAULT_SIZES);
	state->scan_cxt = AllocSetContextCreate(estate->es_query_cxt, "ringshard scan", ALLOCSET_DEFAULT_SIZES);
}

/*
 * The replicas of a key in the order to try them: healthy ones, in random
 * order; in a transaction that keeps one snapshot (REPEATABLE READ,
 * SERIALIZABLE), in the key's order: each node keeps the snapshot it took
 * at the transaction's first statement there, so a key must be read on one
 * replica every time, and the one a fan-out reads it on (its first healthy
 * replica, reads_here), or it could show an older value after a newer one.
 */
static void
route_key(RsScanState *state, KeyRoute *route, Datum keyspace)
{
	uint16		replicas[PLACEMENT_MAX_REPLICAS];
	int			n = placement_key_replicas(&state->placement, route->key, keyspace, replicas);

	hot_keys_note_key(&state->placement, route->key,
					  state->kind == RS_SCAN_ROUTER_KEYSPACE ? &keyspace : NULL, HOT_KEY_READ);

	/*
	 * A key whose replicas changed and whose rows are not copied yet is read
	 * where the rows are: on its old replicas, which writes to it (refused
	 * meanwhile) cannot have left behind (docs/design.md, "Moving rows").
	 */
	if (placement_is_moving(&state->placement))
	{
		int			move = placement_key_move(&state->placement, route->key, keyspace);

		if (move >= 0)
		{
			n = placement_move_old_replicas(&state->placement, move, replicas);
			if (n == 0)
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("rows of table \"%s\" with this key are on nodes that left its ring and are not copied yet",
								state->placement.table_name),
						 errdetail("They are on %s and move to %s.", state->placement.moving.old_nodes_text[move],
								   state->placement.moving.new_nodes_text[move]),
						 errhint("Move them with CALL ringshard.rebalance('%s').", state->placement.table_name)));
		}
	}
	route->nreplicas = 0;
	route->tried = 0;
	for (int i = 0; i < n; i++)
		if (placement_node_up(&state->placement, replicas[i]))
			route->replicas[route->nreplicas++] = replicas[i];
	if (IsolationUsesXactSnapshot())
		return;
	/* shuffle, so reads spread over the replicas */
	for (int i = route->nreplicas - 1; i > 0; i--)
	{
		int			j = (int) pg_prng_uint64_range(&pg_global_prng_state, 0, i);
		uint16		t = route->replicas[i];

		route->replicas[i] = route->replicas[j];
		route->replicas[j] = t;
	}
}

/*
 * A stream of a node that can take a new router query (nothing in flight,
 * no rows left to return), created if there is none.
 */
static NodeStream *
stream_for(RsScanState *state, int node)
{
	NodeStream *stream;

	for (int i = 0; i < state->nstreams; i++)
	{
		stream = state->streams[i];
		if (stream->node == node && !stream->in_flight &&
			(stream->batch == NULL || stream->next >= PQntuples(stream->batch)) &&
			(stream->routes == NIL || !stream->exhausted))
			return stream;
	}
	if (state->nstreams == state->capacity)
	{
		state->capacity = state->capacity ? state->capacity * 2 : 8;
		state->streams = state->streams
			? repalloc(state->streams, sizeof(NodeStream *) * state->capacity)
			: palloc(sizeof(NodeStream *) * state->capacity);
	}
	stream = palloc0(sizeof(NodeStream));
	stream->node = node;
	stream->conn = remote_connection(placement_node_name(&state->placement, node), state->userid);
	state->streams[state->nstreams++] = stream;
	return stream;
}

/* A key that has no replica left to try. */
static void
report_unreachable_key(RsScanState *state, KeyRoute *route)
{
	Oid			output;
	bool		varlena;

	getTypeOutputInfo(state->key_type, &output, &varlena);
	ereport(ringshard_allow_partial_reads ? WARNING : ERROR,
			(errcode(ERRCODE_CONNECTION_FAILURE),
			 errmsg("no healthy replica of key %s of table %s could be read",
					quote_literal_cstr(OidOutputFunctionCall(output, route->key)),
					RelationGetRelationName(state->rel)),
			 errhint("Check the nodes with ringshard.node_health(); with ringshard.allow_partial_reads "
					 "the rows of such keys are left out.")));
}

/* The keys of the router queries of a stream. */
static Datum *
stream_keys(NodeStream *stream, int *nkeys)
{
	Datum	   *keys = palloc(sizeof(Datum) * Max(list_length(stream->routes), 1));
	ListCell   *lc;

	foreach(lc, stream->routes)
		keys[foreach_current_index(lc)] = ((KeyRoute *) lfirst(lc))->key;
	*nkeys = list_length(stream->routes);
	return keys;
}

/*
 * Send each key still unassigned to its next replica, keys grouped per node;
 * nodes that cannot be reached pass their keys on.  Returns false when no
 * key is waiting.
 */
static bool
route_keys(RsScanState *state, List *routes)
{
	ListCell   *lc;
	bool		any = false;

	for (;;)
	{
		RemoteConnection **conns;
		int			nconns = 0;
		bool		retry = false;

		/* assign every waiting key to its next replica */
		foreach(lc, routes)
		{
			KeyRoute   *route = lfirst(lc);
			NodeStream *stream;

			if (route->tried < 0)
				continue;		/* answered, or given up */
			if (route->tried >= route->nreplicas)
			{
				report_unreachable_key(state, route);
				route->tried = -1;
				continue;
			}
			if (route->tried >= 0 && route->sent)
				continue;		/* on its way */
			stream = stream_for(state, route->replicas[route->tried]);
			stream->routes = lappend(stream->routes, route);
			route->sent = true;
		}
		conns = palloc(sizeof(RemoteConnection *) * Max(state->nstreams, 1));
		for (int i = 0; i < state->nstreams; i++)
			if (state->streams[i]->routes != NIL && !state->streams[i]->in_flight && !state->streams[i]->exhausted)
				conns[nconns++] = state->streams[i]->conn;
		remote_connect_all(conns, nconns, true);

		/* a node that cannot be reached hands its keys to their next replicas */
		for (int i = 0; i < state->nstreams; i++)
		{
			NodeStream *stream = state->streams[i];

			if (stream->routes == NIL || stream->in_flight || stream->exhausted)
				continue;
			/*
			 * A statement on its own reads a key in one round trip, without
			 * a remote transaction to begin and commit: one node's snapshot
			 * is all it needs.  In a transaction block, the remote
			 * transaction keeps its reads consistent on that node.
			 */
			if (stream->conn->link == LINK_IDLE || stream->conn->link == LINK_BUSY)
			{
				bool		in_transaction = IsTransactionBlock() || stream->conn->xact != RXACT_NONE;

				/*
				 * With no parameter but the keys, the statement is prepared
				 * on the node once and only the keys travel afterwards.
				 */
				int			nkeys;
				Datum	   *keys = stream_keys(stream, &nkeys);

				if (state->plan->nparams == 0 && OidIsValid(get_array_type(state->key_type)) &&
					remote_type_preparable(state->key_type) && remote_can_send_prepared(stream->conn, in_transaction))
				{
					const char *params[1] = {rsfdw_router_param_text(state->key_type, keys, nkeys)};

					remote_send_prepared(stream->conn, rsfdw_router_sql_param(state->sql, state->key_column,
																			  state->key_type, nkeys > 1),
										 1, params, stream);
				}
				else
					remote_send(stream->conn, rsfdw_router_sql(state->sql, state->key_column, state->key_type, keys, nkeys),
								in_transaction, stream);
			}
			if (!remote_owner_pending(stream->conn, stream))
			{
				foreach(lc, stream->routes)
				{
					((KeyRoute *) lfirst(lc))->tried++;
					((KeyRoute *) lfirst(lc))->sent = false;
				}
				list_free(stream->routes);
				stream->routes = NIL;
				stream->exhausted = true;
				retry = true;
				continue;
			}
			stream->in_flight = true;
			stream->exhausted = false;
			any = true;
		}
		if (!retry)
			return any;
	}
}

/*
 * Connect to the nodes of a fan-out read (see fdw.h): nodes marked down or
 * unreachable are left out, an uncovered range is an error (a warning with
 * ringshard.allow_partial_reads), and the filter makes each node return
 * only the rows it is the first remaining replica of.
 */
RemoteConnection **
rsfdw_fanout_connect(TablePlacement *placement, Oid userid, const char *table, char ***filters)
{
	char	   *filter;
	int			nnodes = placement_node_count(placement);
	bool	   *excluded = palloc0(sizeof(bool) * Max(nnodes, 1));
	RemoteConnection **all = palloc0(sizeof(RemoteConnection *) * Max(nnodes, 1));
	RemoteConnection **conns = palloc(sizeof(RemoteConnection *) * Max(nnodes, 1));
	int			nconns = 0;
	bool		any_excluded = false;

	if (nnodes == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table %s has no nodes", table)));
	for (int i = 0; i < nnodes; i++)
	{
		excluded[i] = !placement_node_up(placement, i);
		if (!excluded[i])
		{
			all[i] = remote_connection(placement_node_name(placement, i), userid);
			conns[nconns++] = all[i];
		}
	}
	remote_connect_all(conns, nconns, true);
	for (int i = 0; i < nnodes; i++)
	{
		/* a busy link only has another scan's answer pending (parked when we send): it is up */
		if (!excluded[i] && all[i]->link != LINK_IDLE && all[i]->link != LINK_BUSY)
			excluded[i] = true;
		if (excluded[i])
			all[i] = NULL;
		any_excluded |= excluded[i];
	}
	remember_missing(placement, excluded, nnodes);
	if (!placement_covered(placement, excluded))
	{
		StringInfoData missing;

		initStringInfo(&missing);
		for (int i = 0; i < nnodes; i++)
			if (excluded[i])
				appendStringInfo(&missing, "%s%s", missing.len ? ", " : "", placement_node_name(placement, i));
		ereport(ringshard_allow_partial_reads ? WARNING : ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("some rows of table %s are on no reachable node", table),
				 errdetail("Nodes down or unreachable: %s.", missing.data),
				 ringshard_allow_partial_reads
				 ? errhint("The rows of those ranges are missing from this answer.")
				 : errhint("Set ringshard.allow_partial_reads to read the other rows.")));
	}
	/* Each row once: on its first replica not left out (no filter with one copy and nobody left out) */
	filter = "";
	if (any_excluded || !placement_single_copy(placement))
		filter = rsfdw_fanout_filter(placement, excluded, rsfdw_coordinator_topology_version());
	*filters = palloc(sizeof(char *) * Max(nnodes, 1));
	for (int i = 0; i < nnodes; i++)
		(*filters)[i] = filter;
	if (placement_is_moving(placement))
	{
		/*
		 * The rows of a move not copied yet are read on its first old replica
		 * that is up (docs/design.md, "Moving rows"); nobody else returns
		 * them, not even a new replica a copy has reached in part.
		 */
		int		   *serves = palloc(sizeof(int) * placement->moving.count);
		int			m = placement_move_servers(placement, excluded, serves);

		if (m >= 0 && !ringshard_allow_partial_reads)
				ereport(ERROR,
						(errcode(ERRCODE_CONNECTION_FAILURE),
						 errmsg("some rows of table %s are on no reachable node", table),
						 errdetail("Their replicas changed and they are not copied yet; they are on %s.",
								   placement->moving.old_nodes_text[m]),
						 errhint("Bring those nodes back, or move the rows with CALL ringshard.rebalance('%s').",
								 table)));
		for (int i = 0; i < nnodes; i++)
			(*filters)[i] = rsfdw_moving_fanout_filter(placement, filter, serves, i);
	}
	return all;
}

/*
 * A scan's fdw_exprs (see planner.c): the parameters of its SQL, then the
 * key values of a router scan, then the keyspace value; each prepared for
 * execution under parent.
 */
void
rsfdw_init_fdw_exprs(List *fdw_exprs, int nparams, PlanState *parent, List **param_exprs,
					 List **param_states, ExprState **key_state, ExprState **keyspace_state)
{
	ListCell   *lc;

	foreach(lc, fdw_exprs)
	{
		Expr	   *expr = lfirst(lc);
		ExprState  *es = ExecInitExpr(expr, parent);
		int			i = foreach_current_index(lc);

		if (i < nparams)
		{
			*param_exprs = lappend(*param_exprs, expr);
			*param_states = lappend(*param_states, es);
		}
		else if (i == nparams)
			*key_state = es;
		else
			*keyspace_state = es;
	}
}

/* FOR UPDATE and FOR NO KEY UPDATE lock as a writer does; FOR SHARE and FOR KEY SHARE let each other in. */
static bool
row_lock_is_exclusive(int strength)
{
	return strength == LCS_FORUPDATE || strength == LCS_FORNOKEYUPDATE;
}

/* Start the scan: evaluate parameters and keys, send the queries. */
static void
start_scan(ForeignScanState *node)
{
	RsScanState *state = node->fdw_state;
	ExprContext *econtext = node->ss.ps.ps_ExprContext;
	MemoryContext old = MemoryContextSwitchTo(state->scan_cxt);
	int			nnodes = placement_node_count(&state->placement);

	state->streams = NULL;
	state->nstreams = 0;
	state->capacity = 0;
	state->started = true;
	state->sql = rsfdw_scan_sql(state->plan, rsfdw_eval_params(state->param_states, state->param_exprs, econtext));
	state->fetch_size = ringshard_fetch_size;
	/*
	 * EXPLAIN ANALYZE instruments the node (after BeginForeignScan): say per
	 * node what it returned, and when.
	 */
	state->analysis = node_analysis_start_run(state->analysis, &node->ss.ps, nnodes);

	if (state->kind == RS_SCAN_FANOUT)
	{
		RemoteConnection **conns;
		char	  **filters;
		bool	   *excluded = palloc0(sizeof(bool) * Max(nnodes, 1));

		/* FOR UPDATE/SHARE of any row: the table, where writers queue (planner.c) */
		if (state->plan->row_lock != LCS_NONE && !state->explain_only)
			rsfdw_lock_table_for_rows(state->relid, row_lock_is_exclusive(state->plan->row_lock),
									  state->plan->lock_nowait);

		conns = rsfdw_fanout_connect(&state->placement, state->userid, RelationGetRelationName(state->rel),
									 &filters);
		for (int i = 0; i < nnodes; i++)
		{
			(void) stream_for(state, i);	/* stream i reads node i */
			excluded[i] = conns[i] == NULL;
		}
		for (int i = 0; i < nnodes; i++)
		{
			NodeStream *stream = state->streams[i];

			if (excluded[i])
			{
				stream->exhausted = true;
				continue;
			}
			snprintf(stream->cursor, sizeof(stream->cursor), "ringshard_c%u", ++cursor_number);
			remote_send(stream->conn, rsfdw_fanout_sql(stream->cursor, state->binary_fanout, state->sql, filters[i],
													   state->fetch_size), true, stream);
			stream->in_flight = stream->conn->link == LINK_BUSY;
			if (!stream->in_flight)
				ereport(ERROR,
						(errcode(ERRCODE_CONNECTION_FAILURE),
						 errmsg("lost the connection to node \"%s\"", stream->conn->node),
						 errdetail_internal("%s", stream->conn->last_error ? stream->conn->last_error : "")));
		}
	}
	else
	{
		bool		isnull;
		Datum		keys = ExecEvalExpr(state->key_state, econtext, &isnull);
		Datum		keyspace = (Datum) 0;
		List	   *routes = NIL;

		if (state->kind == RS_SCAN_ROUTER_KEYSPACE)
		{
			bool		keyspace_null;

			keyspace = ExecEvalExpr(state->keyspace_state, econtext, &keyspace_null);
			if (keyspace_null)
				isnull = true;	/* keyspace = NULL matches nothing */
		}
		if (!isnull && state->plan->key_is_array)
		{
			ArrayType  *array = DatumGetArrayTypeP(keys);
			Datum	   *elems;
			bool	   *nulls;
			int			nelems;
			const char **key_bytes;
			size_t	   *key_len;
			char		key_buf[KEY_BYTES_BUFSIZE];
			int16		typlen;
			bool		typbyval;
			char		typalign;

			get_typlenbyvalalign(ARR_ELEMTYPE(array), &typlen, &typbyval, &typalign);
			deconstruct_array(array, ARR_ELEMTYPE(array), typlen, typbyval, typalign, &elems, &nulls, &nelems);
			key_bytes = palloc0(sizeof(char *) * Max(nelems, 1));
			key_len = palloc0(sizeof(size_t) * Max(nelems, 1));
			for (int i = 0; i < nelems; i++)
			{
				KeyRoute   *route;
				bool		seen = false;

				if (nulls[i])
					continue;
				/*
				 * The same key twice is read once: equal keys (1.5 and 1.50,
				 * 'c7' and 'c7 ' as char(n)) have the same canonical bytes,
				 * whatever bytes their values have.
				 */
				key_bytes[i] = key_encoder_bytes_slow(&state->placement.key, elems[i], key_buf, &key_len[i]);
				key_bytes[i] = pnstrdup(key_bytes[i], key_len[i]);
				for (int j = 0; j < i && !seen; j++)
					seen = !nulls[j] && key_len[j] == key_len[i] && memcmp(key_bytes[j], key_bytes[i], key_len[i]) == 0;
				if (seen)
					continue;
				route = palloc0(sizeof(KeyRoute));
				route->key = elems[i];
				route_key(state, route, keyspace);
				routes = lappend(routes, route);
			}
		}
		else if (!isnull)
		{
			KeyRoute   *route = palloc0(sizeof(KeyRoute));

			route->key = keys;
			route_key(state, route, keyspace);
			routes = lappend(routes, route);
		}
		/* FOR UPDATE/SHARE: the keys, where writers queue, before any node reads them (planner.c) */
		if (state->plan->row_lock != LCS_NONE && routes != NIL && !state->explain_only)
		{
			uint32	   *slots = palloc(sizeof(uint32) * list_length(routes));
			ListCell   *lc;

			foreach(lc, routes)
				slots[foreach_current_index(lc)] =
					placement_key_lock_slot(&state->placement, ((KeyRoute *) lfirst(lc))->key, keyspace);
			rsfdw_lock_keys_for_rows(state->relid, slots, list_length(routes),
									 row_lock_is_exclusive(state->plan->row_lock), state->plan->lock_nowait);
		}
		(void) route_keys(state, routes);
	}
	MemoryContextSwitchTo(old);
}

/* A stream's query or FETCH came back: keep its rows, fetch the next batch at once. */
static void
take_batch(RsScanState *state, NodeStream *stream, RemoteResult *out)
{
	stream->in_flight = false;
	if (out->lost)
	{
		/* a router query lost before any row: its keys try their next replicas */
		if (state->kind != RS_SCAN_FANOUT)
		{
			ListCell   *lc;
			List	   *moved = stream->routes;
			MemoryContext old = MemoryContextSwitchTo(state->scan_cxt);

			foreach(lc, moved)
			{
				((KeyRoute *) lfirst(lc))->tried++;
				((KeyRoute *) lfirst(lc))->sent = false;
			}
			stream->routes = NIL;
			stream->exhausted = true;
			(void) route_keys(state, moved);
			MemoryContextSwitchTo(old);
			return;
		}
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("lost the connection to node \"%s\" during a read of table %s",
						stream->conn->node, RelationGetRelationName(state->rel)),
				 errdetail_internal("%s", stream->conn->last_error ? stream->conn->last_error : "")));
	}
	if (!out->ok)
		remote_report_error(ERROR, stream->conn, out->result, NULL);
	/* a batch of the columns asked for, no more rows than a FETCH asks */
	remote_expect_rows(stream->conn, out->result, Max(state->nretrieved, 1), 0,
					   state->kind == RS_SCAN_FANOUT ? state->fetch_size : -1,
					   psprintf("a read of table %s", RelationGetRelationName(state->rel)));
	if (state->kind == RS_SCAN_FANOUT)
		remote_expect_formats(stream->conn, out->result, state->binary_fanout ? 1 : 0, NULL,
							  psprintf("a read of table %s", RelationGetRelationName(state->rel)));
	remote_result_free(stream->batch);
	stream->batch = out->result;
	stream->next = 0;
	node_analysis_add(state->analysis, stream->node, PQntuples(stream->batch));
	if (state->kind != RS_SCAN_FANOUT || PQntuples(stream->batch) < state->fetch_size)
	{
		ListCell   *lc;

		stream->exhausted = true;
		foreach(lc, stream->routes)
			((KeyRoute *) lfirst(lc))->tried = -1;	/* answered */
		return;
	}
	/* prefetch: the node works on the next batch while we return this one */
	remote_send(stream->conn, rsfdw_fetch_sql(stream->cursor, state->fetch_size), true, stream);
	stream->in_flight = stream->conn->link == LINK_BUSY;
	if (!stream->in_flight)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("lost the connection to node \"%s\"", stream->conn->node)));
}

/* Wait for one stream's batch. */
static void
wait_stream(RsScanState *state, NodeStream *stream)
{
	RemoteResult out;
	const void *owner = stream;

	remote_receive_owned(&stream->conn, &owner, 1, &out, 0, 0);
	take_batch(state, stream, &out);
}

/* Wait until some stream in flight has its batch. */
static void
wait_any_stream(RsScanState *state)
{
	RemoteConnection **conns = palloc(sizeof(RemoteConnection *) * state->nstreams);
	const void **owners = palloc(sizeof(void *) * state->nstreams);
	RemoteResult *out = palloc(sizeof(RemoteResult) * state->nstreams);
	int		   *which = palloc(sizeof(int) * state->nstreams);
	int			n = 0;

	for (int i = 0; i < state->nstreams; i++)
		if (state->streams[i]->in_flight)
		{
			conns[n] = state->streams[i]->conn;
			owners[n] = state->streams[i];
			which[n++] = i;
		}
	if (n > 0)
	{
		remote_receive_owned(conns, owners, n, out, 1, 0);
		for (int j = 0; j < n; j++)
			if (!out[j].pending)
				take_batch(state, state->streams[which[j]], &out[j]);
	}
	pfree(conns);
	pfree(owners);
	pfree(out);
	pfree(which);
}

/* Whether a stream has a row ready to return. */
static bool
stream_has_row(NodeStream *stream)
{
	return stream->batch != NULL && stream->next < PQntuples(stream->batch);
}

/* A retrieved column's value in a batch, decoded in the format it came in (binary or text). */
static Datum
column_value(RsScanState *state, NodeStream *stream, PGresult *res, int row, int column)
{
	int			attnum = state->retrieved_attnums[column];
	RemoteCodec *codec = PQfformat(res, column) == 1 ? &state->binary_codecs[attnum - 1]
		: &state->text_codecs[attnum - 1];

	if (PQfformat(res, column) == 1 && !codec->binary)
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("node \"%s\" sent column %d of table %s in binary, which was not asked for",
						stream->conn->node, column + 1, RelationGetRelationName(state->rel))));
	return remote_codec_decode(codec, PQgetvalue(res, row, column), PQgetlength(res, row, column),
							   stream->conn->node);
}

/* Fill the slot from row r of a stream's batch. */
static void
store_row(RsScanState *state, NodeStream *stream, TupleTableSlot *slot)
{
	PGresult   *res = stream->batch;
	int			row = stream->next++;
	MemoryContext old;

	MemoryContextReset(state->row_cxt);
	old = MemoryContextSwitchTo(state->row_cxt);
	ExecClearTuple(slot);
	memset(slot->tts_isnull, true, sizeof(bool) * state->desc->natts);
	for (int j = 0; j < state->nretrieved; j++)
	{
		int			attnum = state->retrieved_attnums[j];

		if (PQgetisnull(res, row, j))
			continue;
		slot->tts_values[attnum - 1] = column_value(state, stream, res, row, j);
		slot->tts_isnull[attnum - 1] = false;
	}
	MemoryContextSwitchTo(old);
	ExecStoreVirtualTuple(slot);
}

/* Merge: decode the sort columns of a stream's next row. */
static void
load_sort_values(RsScanState *state, NodeStream *stream)
{
	PGresult   *res = stream->batch;
	int			row = stream->next;
	MemoryContext old = rsfdw_merge_row_start(&stream->merge, state->scan_cxt, "ringshard merge row", state->nsort);

	for (int k = 0; k < state->nsort; k++)
	{
		int			column = state->sort_columns[k];

		stream->merge.nulls[k] = PQgetisnull(res, row, column);
		stream->merge.values[k] = stream->merge.nulls[k] ? (Datum) 0 : column_value(state, stream, res, row, column);
	}
	MemoryContextSwitchTo(old);
	stream->has_row = true;
}

MemoryContext
rsfdw_merge_row_start(RsMergeRow *row, MemoryContext parent, const char *cxt_name, int nkeys)
{
	if (row->cxt == NULL)
	{
		/* the callers' names are constants, as AllocSetContextCreate checks */
		row->cxt = AllocSetContextCreateInternal(parent, cxt_name, ALLOCSET_SMALL_SIZES);
		row->values = MemoryContextAlloc(parent, sizeof(Datum) * nkeys);
		row->nulls = MemoryContextAlloc(parent, sizeof(bool) * nkeys);
	}
	MemoryContextReset(row->cxt);
	return MemoryContextSwitchTo(row->cxt);
}

int
rsfdw_merge_row_compare(const RsMergeRow *a, const RsMergeRow *b, int nkeys, SortSupport sortkeys)
{
	for (int k = 0; k < nkeys; k++)
	{
		int			c = ApplySortComparator(a->values[k], a->nulls[k], b->values[k], b->nulls[k], &sortkeys[k]);

		if (c != 0)
			return c;
	}
	return 0;
}

void
rsfdw_prepare_sort_keys(const RsSortKey *keys, int nkeys, SortSupport sortkeys, int *sort_columns)
{
	for (int i = 0; i < nkeys; i++)
	{
		SortSupport ssup = &sortkeys[i];

		sort_columns[i] = keys[i].column - 1;
		ssup->ssup_cxt = CurrentMemoryContext;
		ssup->ssup_collation = keys[i].collation;
		ssup->ssup_nulls_first = keys[i].nulls_first;
		PrepareSortSupportFromOrderingOp(keys[i].sort_operator, ssup);
	}
}

char *
rsfdw_explain_nodes(TablePlacement *placement)
{
	StringInfoData nodes;
	int			n = placement_node_count(placement);

	initStringInfo(&nodes);
	for (int i = 0; i < n; i++)
		appendStringInfo(&nodes, "%s%s%s", i ? ", " : "", placement_node_name(placement, i),
						 placement_node_up(placement, i) ? "" : " (down)");
	return nodes.data;
}

TupleTableSlot *
rsIterateForeignScan(ForeignScanState *node)
{
	RsScanState *state = node->fdw_state;
	TupleTableSlot *slot = node->ss.ss_ScanTupleSlot;

	if (((ForeignScan *) node->ss.ps.plan)->scan.scanrelid == 0)
		return rsupper_iterate_scan(node);
	if (!state->started)
		start_scan(node);

	if (state->nsort == 0)
	{
		/* any stream with a row will do; else wait for the first batch to come */
		for (;;)
		{
			bool		in_flight = false;

			for (int i = 0; i < state->nstreams; i++)
			{
				if (stream_has_row(state->streams[i]))
				{
					store_row(state, state->streams[i], slot);
					return slot;
				}
				in_flight |= state->streams[i]->in_flight;
			}
			if (!in_flight)
				return ExecClearTuple(slot);
			wait_any_stream(state);
		}
	}

	/* Merge: every live stream needs its next row before the smallest is known. */
	{
		NodeStream *best = NULL;

		for (int i = 0; i < state->nstreams; i++)
		{
			NodeStream *stream = state->streams[i];

			if (!stream->has_row)
			{
				while (!stream_has_row(stream) && stream->in_flight)
					wait_stream(state, stream);
				if (!stream_has_row(stream))
					continue;
				load_sort_values(state, stream);
			}
			if (best == NULL || rsfdw_merge_row_compare(&stream->merge, &best->merge, state->nsort, state->sortkeys) < 0)
				best = stream;
		}
		if (best == NULL)
			return ExecClearTuple(slot);
		store_row(state, best, slot);
		best->has_row = false;
		return slot;
	}
}

char *
rsfdw_constant_key_replicas(TablePlacement *placement, ForeignScan *plan, int nparams, bool with_keyspace)
{
	Node	   *keys = list_nth(plan->fdw_exprs, nparams);
	Node	   *keyspace = with_keyspace ? list_nth(plan->fdw_exprs, nparams + 1) : NULL;
	StringInfoData buf;
	Datum	   *elems;
	bool	   *nulls;
	int			n;

	keys = strip_implicit_coercions(keys);
	if (!IsA(keys, Const) || ((Const *) keys)->constisnull ||
		(keyspace && (!IsA(keyspace, Const) || ((Const *) keyspace)->constisnull)))
		return NULL;
	if (type_is_array(((Const *) keys)->consttype))
	{
		ArrayType  *array = DatumGetArrayTypeP(((Const *) keys)->constvalue);
		int16		typlen;
		bool		typbyval;
		char		typalign;

		get_typlenbyvalalign(ARR_ELEMTYPE(array), &typlen, &typbyval, &typalign);
		deconstruct_array(array, ARR_ELEMTYPE(array), typlen, typbyval, typalign, &elems, &nulls, &n);
	}
	else
	{
		elems = &((Const *) keys)->constvalue;
		nulls = &((Const *) keys)->constisnull;
		n = 1;
	}
	initStringInfo(&buf);
	for (int k = 0; k < n; k++)
	{
		uint16		replicas[PLACEMENT_MAX_REPLICAS];
		int			nreplicas;

		if (nulls[k])
			continue;
		nreplicas = placement_key_replicas(placement, elems[k], keyspace ? ((Const *) keyspace)->constvalue : 0,
										   replicas);
		if (buf.len)
			appendStringInfoString(&buf, "; ");
		for (int r = 0; r < nreplicas; r++)
			appendStringInfo(&buf, "%s%s%s", r ? ", " : "", placement_node_name(placement, replicas[r]),
							 placement_node_up(placement, replicas[r]) ? "" : " (down)");
	}
	if (buf.len == 0)
		return NULL;
	return psprintf("%s (the replicas of the key%s)", buf.data, n > 1 ? "s" : "");
}

/* Close a run of the scan: its cursors die with the remote transaction, results are dropped. */
static void
finish_run(RsScanState *state)
{
	for (int i = 0; i < state->nstreams; i++)
	{
		NodeStream *stream = state->streams[i];

		if (stream->conn && stream->conn->link != LINK_BROKEN && stream->conn->link != LINK_CLOSED)
		{
			remote_forget_owner(stream->conn, stream);
			if (stream->cursor[0] != '\0' && stream->conn->link == LINK_IDLE && stream->conn->xact == RXACT_OPEN)
				remote_send(stream->conn, rsfdw_close_sql(stream->cursor), true, &cursor_number);
			/* owned by no stream, whose freed address a later scan may get; dropped at transaction end */
		}
		remote_result_free(stream->batch);
		stream->batch = NULL;
	}
	state->nstreams = 0;
	state->started = false;
	MemoryContextReset(state->scan_cxt);
}

void
rsReScanForeignScan(ForeignScanState *node)
{
	RsScanState *state = node->fdw_state;

	if (((ForeignScan *) node->ss.ps.plan)->scan.scanrelid == 0)
		return rsupper_rescan(node);
	if (state->started)
		finish_run(state);
}

void
rsEndForeignScan(ForeignScanState *node)
{
	RsScanState *state = node->fdw_state;

	if (((ForeignScan *) node->ss.ps.plan)->scan.scanrelid == 0)
		return rsupper_end_scan(node);
	/* a run to finish, unless the statement was only explained */
	if (state != NULL && !state->explain_only && state->started)
		finish_run(state);
}

void
rsExplainForeignScan(ForeignScanState *node, ExplainState *es)
{
	RsScanState *state = node->fdw_state;
	char	   *nodes;

	if (((ForeignScan *) node->ss.ps.plan)->scan.scanrelid == 0)
		return rsupper_explain_scan(node, es);
	nodes = rsfdw_explain_nodes(&state->placement);
	if (state->kind == RS_SCAN_FANOUT)
	{
		ExplainPropertyText("Nodes", nodes, es);
		ExplainPropertyText("Reads", placement_single_copy(&state->placement)
							? "every node, in parallel (one copy of each row)"
							: "every node, in parallel; each row on its first healthy replica", es);
	}
	else
	{
		char	   *replicas = rsfdw_constant_key_replicas(&state->placement,
														   (ForeignScan *) node->ss.ps.plan, state->plan->nparams,
														   state->kind == RS_SCAN_ROUTER_KEYSPACE);

		ExplainPropertyText("Router", psprintf("one healthy replica per value of %s", state->key_column), es);
		/* a key fixed by a constant: its replicas, one of which is read */
		ExplainPropertyText("Nodes", replicas ? replicas : nodes, es);
	}
	if (es->verbose)
	{
		RsScanSQL  *sql = rsfdw_scan_sql(state->plan, NULL);
		char	   *filter = "";

		if (state->kind == RS_SCAN_FANOUT && !placement_single_copy(&state->placement))
			filter = psprintf(" AND %s", rsfdw_reads_here_sql(&state->placement, "$excluded", "$topology_version"));
		else if (state->kind != RS_SCAN_FANOUT)
			filter = psprintf(" AND t.%s = ANY ($keys)", state->key_column);
		ExplainPropertyText("Remote SQL", psprintf("SELECT %s%s%s%s%s", sql->select, sql->from, sql->where, filter,
												   sql->tail), es);
	}
	/* EXPLAIN ANALYZE: each node that was asked, its rows and when they came */
	node_analysis_explain(state->analysis, &state->placement, "row", "rows", es);
}

/*
 * connection.h
 *		Connections from the coordinator to its nodes (docs/design.md).
 *
 * A node is a foreign server of the foreign-data wrapper ringshard; a
 * connection logs in with the user mapping of the role it works for.  The
 * cache holds one connection per server and role, for the session, so a role
 * never runs anything on another role's connection.  Every query is sent
 * asynchronously (several nodes work at once) as one simple-protocol string,
 * with the remote transaction's START TRANSACTION and savepoints prefixed to
 * it, so that most remote steps cost one round trip.
 */
#ifndef RINGSHARD_REMOTE_CONNECTION_H
#define RINGSHARD_REMOTE_CONNECTION_H

#include "postgres.h"

#include "access/transam.h"

#include "foreign/foreign.h"
#include "lib/stringinfo.h"
#include "libpq-fe.h"
#include "portability/instr_time.h"
#include "remote/stats.h"

/*
 * The server option that says a node's address was given by a superuser,
 * so that superusers and the watchdog may connect to it with the server
 * account's own credentials (.pgpass, certificates, peer); only a superuser
 * may set it, and any change by another role must drop it (fdw/handler.c).
 */
#define RINGSHARD_AMBIENT_OPTION "ambient_credentials"

#include "guc.h"

/* How many texts sent once a link remembers (remote_send_execute). */
#define REMOTE_TEXTS_SEEN 64
/* How many statements a link keeps prepared on its node, and the longest text prepared by remote_send_execute. */
#define REMOTE_PREPARED_MAX 64
#define REMOTE_PREPARED_TEXT_MAX 8192

/* The state of the link itself. */
typedef enum RemoteLinkState
{
	LINK_CLOSED,				/* no connection */
	LINK_IDLE,					/* connected, nothing in flight */
	LINK_BUSY,					/* a query was sent; its results are pending */
	LINK_COPY_IN,				/* the node waits for COPY data */
	LINK_COPY_OUT,				/* the node sends COPY data (remote_copy_between only) */
	LINK_BROKEN					/* lost or unusable; closed at transaction end */
} RemoteLinkState;

/* The state of the remote transaction, within the local one. */
typedef enum RemoteXactState
{
	RXACT_NONE,					/* none open */
	RXACT_OPEN,					/* START TRANSACTION sent */
	RXACT_FAILED,				/* a statement failed in it: only a rollback helps */
	RXACT_PREPARED				/* PREPARE TRANSACTION succeeded (gid) */
} RemoteXactState;

typedef struct RemoteConnection
{
	/* hash key: the server and the local role the connection works for */
	Oid			serverid;
	Oid			userid;

	char	   *node;			/* the node's name (for messages) */
	Oid			umid;			/* its user mapping, or InvalidOid (superuser as itself) */
	PGconn	   *conn;
	RemoteLinkState link;
	RemoteXactState xact;
	int			xact_depth;		/* 1 after START TRANSACTION, +1 per savepoint */
	bool		wrote;			/* took a write: a two-phase participant */
	bool		unreachable;	/* failed before taking a write: its writes are queued */
	bool		invalidated;	/* its server or mapping changed: reconnect when idle */
	bool		copy_out_expected;	/* the query in flight is a COPY ... TO STDOUT of ours */
	bool		takes_moving_rows;	/* ringshard.accept_moving_rows is on in its transaction */
	uint32		server_hash;
	uint32		mapping_hash;
	const void *owner;			/* who sent the query in flight */
	List	   *parked;			/* ParkedResults: queries of other owners drained for them */
	PGresult   *partial;		/* the result kept so far of the query in flight */
	bool		partial_ok;		/* ... and whether it is not an error */
	char		gid[200];		/* the prepared transaction's name, once prepared */
	List	   *statements;		/* PreparedStatements on this link (SQL text and name) */
	/* hashes of the texts remote_send_execute sent once, not prepared yet (a ring) */
	uint32		texts_seen[REMOTE_TEXTS_SEEN];
	int			texts_seen_next;
	instr_time	sent_at;		/* when the query in flight was sent */
	char	   *last_error;		/* the last failure, for node_health() */
	int			last_sqlstate;	/* its SQLSTATE when the node reported it, else 0 */

	/*
	 * A write held back to travel with the commit (remote_defer_write): the
	 * text (in TopTransactionContext, with the START TRANSACTION that opens
	 * the node's transaction, if it does), the rows it must report, and what
	 * it is, for messages.
	 */
	char	   *deferred;
	int64		deferred_rows;
	const char *deferred_what;
	bool		deferred_opens;	/* its text opens the node's transaction */
	int			deferred_answer_at; /* in a combined string: which OK result answers it (1-based), else 0 */
	int			ok_results;		/* OK results of the query in flight so far */
	char		deferred_answer[64];	/* the command tag that answered it */
	PGresult   *deferred_failure;	/* its error, when it failed (tracked: freed at resource release) */
	bool		deferred_failed;	/* it failed or answered wrongly: the commit raises that */

	/*
	 * The query in flight answers one row (counted, changed) for a direct
	 * UPDATE or DELETE: stat_nodes counts the second column as rows written,
	 * not the row as read.  Cleared by the next send.
	 */
	bool		answer_counts_writes;

	/* ringshard.stat_nodes (stats.h): the node's counters, and the gauges this link adds to */
	NodeStatsSlot *stats;
	NodeStatsSlot *counted_open;	/* the slot counting this link as open, if any */
	NodeStatsSlot *counted_prepared;	/* the slot counting its prepared transaction, if any */
	bool		copying_in;		/* the query in flight ends a COPY FROM STDIN (its rows are written) */
} RemoteConnection;

/* Register settings and cache invalidation; called from _PG_init. */
extern void remote_connection_init(void);

/* The server of a node; ERROR if the node does not exist or has no address. */
extern Oid	remote_node_server(const char *node);

/*
 * A server's options, but the one that says who gave the address, as a
 * libpq connection string (values single-quoted), appended to buf; true if
 * one of them is dbname.
 */
extern bool remote_append_server_conninfo(StringInfo buf, const ForeignServer *server);

/*
 * A node's libpq connection string without credentials (for PL/Proxy):
 * the server's options, single-quoted, and dbname (this database unless
 * the server names one).
 */
extern char *remote_node_conninfo(const char *node);

/* The session's connection entry for a node and role (not connected yet). */
extern RemoteConnection *remote_connection(const char *node, Oid userid);

/*
 * Connect every entry that is not connected, all at once, bounded by
 * ringshard.node_timeout (for each host of a multi-host address: a silent
 * host is given up for the hosts after it).  A node that cannot be reached ends up
 * LINK_BROKEN with last_error set; with missing_ok false that is an ERROR.
 * Credential rules (a role below superuser must authenticate with a
 * password from its user mapping) are always an ERROR.
 */
extern void remote_connect_all(RemoteConnection **conns, int n, bool missing_ok);

/*
 * Send one simple-protocol query string (it may hold several statements).
 * With in_transaction, the remote transaction is opened first as deep as the
 * local one (START TRANSACTION, savepoints), in the same string.  A query in
 * flight for another owner is drained and parked for it first.
 */
extern void remote_send(RemoteConnection *c, const char *sql, bool in_transaction, const void *owner);
/*
 * The query just sent answers with counts, not rows read: its reader tells
 * stat_nodes the rows the node wrote, once it has checked the answer.
 */
extern void remote_answer_counts_writes(RemoteConnection *c);
extern void remote_count_rows_written(RemoteConnection *c, int64 rows);

/* The coordinator's tag in the application_name of its node connections ("ringshard <tag> <pid>"). */
extern const char *remote_coordinator_tag(void);

/*
 * The same for one statement with text parameters $1..$n (extended protocol):
 * the remote transaction, if it must be opened, is opened first, with its
 * own round trip.
 */
extern void remote_send_params(RemoteConnection *c, const char *sql, int nparams, const char *const *params,
							   bool in_transaction, const void *owner);

/*
 * The same for a statement prepared on the node (named, planned once per
 * connection): the first use prepares it, one more round trip.  Only where
 * no remote transaction must be opened first (in_transaction false, or the
 * transaction already open as deep as ours); else the caller sends text.
 */
extern bool remote_can_send_prepared(RemoteConnection *c, bool in_transaction);

/*
 * Whether a parameter of this type may be prepared on a node: only a
 * built-in type.  A node fixes a prepared statement's parameter types by
 * OID while the statement's text (the cache key) names them, so a type of
 * the user's dropped and made again under its name there would keep the
 * text and lose the type ("cache lookup failed for type").
 */
static inline bool
remote_type_preparable(Oid type)
{
	return type < FirstNormalObjectId;
}
extern void remote_send_prepared(RemoteConnection *c, const char *sql, int nparams, const char *const *params,
								 const void *owner);

/*
 * As remote_send of sql, but sent as "EXECUTE name arguments" of the
 * statement prepared on the link with the text prepared_sql, arguments
 * "(literal, ...)": the node neither parses nor plans the statement again.
 * The text is prepared (one round trip) the second time the link sends it,
 * if the link has room for another statement: sent once, it goes as sql, so
 * that texts that differ every time (constants of a simple-protocol client
 * are part of them) cost no round trip and leave no statement on the node.
 * sql goes instead, as remote_send sends it, when the text is longer than
 * REMOTE_PREPARED_TEXT_MAX, or the remote transaction failed, is prepared,
 * or has fewer savepoints than ours.
 */
extern void remote_send_execute(RemoteConnection *c, const char *prepared_sql, int nparams, const char *arguments,
								const char *sql, bool in_transaction, const void *owner);

/*
 * Writes that travel with the commit.  The last batch of an INSERT that is
 * its own transaction (autocommit) need not be answered before the
 * statement ends: nothing reads it before the commit, and the commit's
 * PREPARE TRANSACTION (or one-phase COMMIT) can follow it in the same
 * string, one round trip instead of two.  remote_defer_write() holds it on
 * the connection; any other use of the connection sends it first and checks
 * its answer (remote_flush_deferred(), from every remote_send*); the commit
 * sends it with its own command (remote_take_deferred()) and checks both
 * (remote_deferred_outcome()); an abort drops it (remote_drop_deferred()).
 * Its errors are the node's own, reported when the commit runs: in
 * autocommit that is still before the statement's command tag reaches the
 * client.
 */
extern void remote_defer_write(RemoteConnection *c, const char *sql, int64 rows, const char *what);

/*
 * The same for a statement of nparams parameters that is prepared on the
 * link (now, if it is not yet): what travels is EXECUTE with its arguments,
 * "(literal, ...)", so the node neither parses nor plans the statement again
 * (a single-row INSERT spends about a quarter of a node's time on that).
 */
extern void remote_defer_prepared_write(RemoteConnection *c, const char *sql, int nparams, const char *arguments,
										int64 rows, const char *what);
extern void remote_flush_deferred(RemoteConnection *c);
extern char *remote_take_deferred(RemoteConnection *c, const char *command);
extern void remote_drop_deferred(RemoteConnection *c);

/*
 * After the combined string answered (res: its result; ok: not an error):
 * true if the held-back write worked and reported its rows.  False: it
 * failed (its error result is kept in deferred_failure, to be raised with
 * remote_raise_deferred_failure()), or it answered with another tag.
 */
extern bool remote_deferred_outcome(RemoteConnection *c, PGresult *res, bool ok, bool *keep_result);
extern void remote_raise_deferred_failure(RemoteConnection *c);

/* The outcome of a query. */
typedef struct RemoteResult
{
	PGresult   *result;			/* the last result, or the error result */
	bool		ok;				/* a result that is not an error */
	bool		lost;			/* the connection failed (no SQL error) */
	bool		pending;		/* not finished yet (only when not waiting for all) */
	double		elapsed_ms;		/* from sending the query to its end */
} RemoteResult;

/*
 * Wait for the queries in flight on several connections, in parallel, until
 * `need` of them have finished (0: all of them).  With timeout_ms > 0 a node
 * that does not answer in time is cancelled and counted lost; with -1 the
 * call does not wait at all.  Results go to out[i] (the caller PQclear()s
 * them); a query not finished yet is marked pending and stays in flight.
 * Returns how many finished.
 */
extern int	remote_receive(RemoteConnection **conns, int n, RemoteResult *out, int need, int timeout_ms);

/*
 * The same, for queries sent by the given owners (one per connection): a
 * query whose result another user of the connection drained is handed over
 * from where it was parked.
 */
extern int	remote_receive_owned(RemoteConnection **conns, const void **owners, int n, RemoteResult *out,
								 int need, int timeout_ms);

/* Drop an owner's results: finish its query in flight and discard it, drop what was parked for it. */
extern void remote_forget_owner(RemoteConnection *c, const void *owner);

/* Drop every parked result (at transaction end). */
extern void remote_clear_parked(RemoteConnection *c);

/* Whether an owner has a query in flight or a parked result on the connection. */
extern bool remote_owner_pending(RemoteConnection *c, const void *owner);

/* The same, for all of them. */
#define remote_receive_all(conns, n, out, timeout_ms) \
	((void) remote_receive((conns), (n), (out), 0, (timeout_ms)))

/*
 * Results.  Every result remote_receive() hands out is tracked: it is freed
 * by remote_result_free(), or, should an error come first, when the
 * resource owner it arrived under is released.  Never PQclear() one.
 */
extern void remote_result_free(PGresult *result);

/*
 * The result of a finished query, or an ERROR: the node's own (its SQLSTATE,
 * detail, hint and context, with sql as context), or a lost connection
 * (during `what`, if given).
 */
extern PGresult *remote_answer(RemoteConnection *c, RemoteResult *out, const char *sql, const char *what);

/*
 * A node's answer is data to check before it is read.  Each of these breaks
 * the link and raises a protocol-violation ERROR unless the answer has the
 * shape the statement `what` gives: rows of exactly nfields columns, between
 * min_rows and max_rows of them (max_rows -1: any); every column in the
 * given format (0 text, 1 binary) and, where types[i] is a built-in type, of
 * that type; a non-null text value (or an integer) at a row and column.
 */
extern void remote_expect_rows(RemoteConnection *c, PGresult *res, int nfields, int min_rows, int max_rows,
							   const char *what);
/* A node's answer to `what` is malformed (detail says how): the link goes, and it is an error. */
extern void remote_reject_answer(RemoteConnection *c, const char *what, const char *detail) pg_attribute_noreturn();
/* Remember why a connection's last command failed (its last_error). */
extern void remote_set_error(RemoteConnection *c, const char *error);

/*
 * A command's answer must be PGRES_COMMAND_OK with a command tag that is tag
 * or starts with it and a space (any tag if NULL) and, when rows >= 0, that
 * row count (INSERT, UPDATE, DELETE, COPY); else the link goes, and it is
 * an error (a broken node never passes for one that did the work).
 */
extern void remote_expect_command(RemoteConnection *c, PGresult *res, const char *tag, int64 rows,
								  const char *what);
extern void remote_expect_formats(RemoteConnection *c, PGresult *res, int format, const Oid *types,
								  const char *what);
extern char *remote_text_value(RemoteConnection *c, PGresult *res, int row, int column, const char *what);
extern int64 remote_int64_value(RemoteConnection *c, PGresult *res, int row, int column, const char *what);

/* Send and receive on one connection; an SQL error or a lost node is an ERROR. */
extern PGresult *remote_exec(RemoteConnection *c, const char *sql, bool in_transaction);
/* The same, waiting at most timeout_ms (a control command): then the link is lost. */
extern PGresult *remote_exec_timed(RemoteConnection *c, const char *sql, bool in_transaction, int timeout_ms);

/* Re-raise a node's error with its SQLSTATE, detail, hint and context, naming the node. */
extern void remote_report_error(int elevel, RemoteConnection *c, PGresult *res, const char *sql);

/* COPY data to a node in LINK_COPY_IN; ERROR if the link fails. */
extern void remote_copy_data(RemoteConnection *c, const char *data, int len);

/* End COPY data on several connections and flush them, in parallel; the results follow. */
extern void remote_copy_end_all(RemoteConnection **conns, int n);

/*
 * Copy rows from one node to another, node to node: out_sql (a COPY ... TO
 * STDOUT) runs on `from`, in_sql (a COPY ... FROM STDIN) on `to`, both in
 * this transaction (`to` as a write of it); the data is relayed as it
 * comes, never decoded, so any format works (binary where the types allow).
 * Returns the number of rows the target took.  Either side's error is an
 * ERROR; every wait is interruptible.
 */
extern int64 remote_copy_between(RemoteConnection *from, RemoteConnection *to, const char *out_sql,
								 const char *in_sql);
/* The same, telling relayed(messages so far, arg) every 256 messages relayed (about as many rows). */
extern int64 remote_copy_between_reporting(RemoteConnection *from, RemoteConnection *to, const char *out_sql,
										   const char *in_sql, void (*relayed) (int64 rows, void *arg), void *arg);

/*
 * Let the node's part of this transaction take rows of keys whose rows are
 * not copied yet, as one of their old replicas (docs/design.md, "Moving
 * rows"): SET LOCAL ringshard.accept_moving_rows, once per transaction.
 */
extern void remote_take_moving_rows(RemoteConnection *c);

/* Record a failure: the link is unusable until the transaction ends. */
extern void remote_mark_broken(RemoteConnection *c, const char *why);

/* Move a connection's remote transaction to a state (counting prepared ones for stat_nodes). */
extern void remote_set_xact(RemoteConnection *c, RemoteXactState state);

/* Every connection entry of the session, for the transaction callbacks. */
typedef bool (*RemoteConnectionVisitor) (RemoteConnection *c, void *arg);
extern void remote_foreach(RemoteConnectionVisitor visit, void *arg);

/* Close a connection (after its transaction ended, or when it is broken). */
extern void remote_disconnect(RemoteConnection *c);

/*
 * Send a cancel request for the query in flight, within a short time (at
 * most 2 s, interruptible); false if it could not be delivered.
 */
extern bool remote_cancel(RemoteConnection *c);

/*
 * Stop the query in flight, if any, and discard what it answers, within a
 * bounded time: the one clean-up of an aborted (sub)transaction.  True when
 * the link is idle afterwards; a link that stays busy is closed.
 */
extern bool remote_abandon_query(RemoteConnection *c);

/* Whether the role may see node addresses and error texts that may hold them. */
extern bool remote_may_see_addresses(void);

#endif							/* RINGSHARD_REMOTE_CONNECTION_H */

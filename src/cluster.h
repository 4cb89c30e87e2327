/*
 * cluster.h
 *		Connections from the coordinator to worker nodes, with libpq's
 *		asynchronous API: parallel connects and queries bounded by a timeout,
 *		and remote transactions that commit with the local one.
 */
#ifndef RINGSHARD_CLUSTER_H
#define RINGSHARD_CLUSTER_H

#include "postgres.h"

#include "libpq-fe.h"
#include "nodes/pg_list.h"

/* ringshard.node_timeout: milliseconds a node may take to connect or answer. */
extern int	ringshard_node_timeout_ms;

/* ringshard.write_quorum: replicas that must take a routed write at once. */
extern int	ringshard_write_quorum;

/* How a statement relates to the local transaction. */
typedef enum RemoteMode
{
	REMOTE_AUTOCOMMIT,			/* on its own */
	REMOTE_TRANSACTION,			/* in the remote transaction; a failed commit fails ours */
	REMOTE_ROUTED_WRITE			/* likewise, but a failed commit queues the node's writes */
} RemoteMode;

/* A routed write sent to a node in the current transaction. */
typedef struct PendingWrite
{
	Oid			relid;
	char	   *json;
	int64		write_id;
	int			level;			/* transaction nesting level of the write */
} PendingWrite;

/* One node's connection, kept for the session. */
typedef struct NodeConnection
{
	char	   *node;
	Oid			user;			/* the role the connection logs in as */
	char	   *conninfo;
	PGconn	   *conn;
	bool		in_transaction; /* BEGIN sent in this local transaction */
	int			xact_depth;		/* remote nesting: 1 after BEGIN, +1 per savepoint */
	bool		other_statements;	/* statements other than routed writes sent */
	bool		transaction_failed; /* a statement failed: the remote transaction is lost */
	List	   *pending_writes; /* PendingWrite, in TopTransactionContext */
	char	   *last_error;
	struct NodeConnection *next;
} NodeConnection;

/* The outcome of one node's part of a parallel call. */
typedef struct NodeResult
{
	NodeConnection *connection;
	PGresult   *result;			/* NULL if the node failed */
	char	   *error;			/* why it failed, or NULL */
	double		elapsed_ms;
} NodeResult;

extern void cluster_init(void);

/* The libpq connection string of a node, from its catalog address; ERROR if none. */
extern char *cluster_node_conninfo(const char *node);

/*
 * Connect to several nodes at once (reusing open connections).  Every entry
 * of results gets its connection; failures carry an error and no result.
 */
extern void cluster_connect_all(int nnodes, const char *const *nodes, NodeResult *results);

/*
 * Run one query with text parameters on several connected nodes in parallel,
 * inside each node's remote transaction unless mode is REMOTE_AUTOCOMMIT.  Waits
 * for all, at most ringshard.node_timeout; a late node is cancelled and fails.
 */
extern void cluster_query_all(int nnodes, NodeResult *results, const char *sql,
							  int nparams, const char *const *params, RemoteMode mode);

/* Queue a write for a node that missed it, in the current transaction. */
extern void cluster_enqueue_write(const char *node, Oid relid, const char *json, int64 write_id);

/* Every node with an address, in name order. */
extern char **cluster_addressed_nodes(int *count);

/* A new routed write's id, and this coordinator's id, for idempotent delivery. */
extern int64 cluster_next_write_id(void);
extern char *cluster_coordinator_id(void);

/* Forget a node's connection (after a failure, or when it is dropped). */
extern void cluster_disconnect(NodeConnection *connection);

#endif							/* RINGSHARD_CLUSTER_H */

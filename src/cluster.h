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

/* ringshard.node_timeout: milliseconds a node may take to connect or answer. */
extern int	ringshard_node_timeout_ms;

/* One node's connection, kept for the session. */
typedef struct NodeConnection
{
	char	   *node;
	char	   *conninfo;
	PGconn	   *conn;
	bool		in_transaction; /* BEGIN sent in this local transaction */
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
 * inside each node's remote transaction when in_transaction is true.  Waits
 * for all, at most ringshard.node_timeout; a late node is cancelled and fails.
 */
extern void cluster_query_all(int nnodes, NodeResult *results, const char *sql,
							  int nparams, const char *const *params, bool in_transaction);

/* Forget a node's connection (after a failure, or when it is dropped). */
extern void cluster_disconnect(NodeConnection *connection);

#endif							/* RINGSHARD_CLUSTER_H */

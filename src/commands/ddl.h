/*
 * ddl.h
 *		Definitions of distributed tables on their nodes (ddl.c) and the DDL
 *		that follows them there (ddl_hook.c).
 */
#ifndef RINGSHARD_FDW_DDL_H
#define RINGSHARD_FDW_DDL_H

#include "postgres.h"

#include "executor/spi.h"
#include "remote/connection.h"

/* The foreign server of distributed tables. */
#define CLUSTER_SERVER "ringshard_cluster"

extern bool is_distributed_table(Oid relid);
extern SPITupleTable *spi_query(const char *sql, int nargs, Oid *argtypes, Datum *values, uint64 *nrows);
extern void spi_exec(const char *sql);
extern int	begin_qualified_names(void);
extern void end_qualified_names(int level);
/* The tag of run_on_connections() for a statement that answers one row (a function call). */
#define RS_ANSWER_ONE_ROW "\x01one row"
extern int	run_on_all_nodes(const char *sql, bool answers_row);
extern void run_on_connections(RemoteConnection **conns, int n, const char *sql, const char *tag,
							   const char *what);
extern char *column_definitions(Oid relid, bool for_nodes);
extern char *node_column_definition(Oid relid, AttrNumber attnum, char **node_default);
extern void record_node_ddl(Oid relid, List *names, List *parts, bool replace);
extern void check_dependents(Oid relid);
extern Oid replace_by_foreign_table(Oid relid, const char *columns, List *names, List *parts, char **old_name);

/* While set, DDL passes the hook untouched (ringshard's own statements). */
extern bool ringshard_ddl_internal;

/* Install the hook that makes DDL on distributed tables reach their nodes. */
extern void rsfdw_ddl_init(void);

#endif							/* RINGSHARD_FDW_DDL_H */

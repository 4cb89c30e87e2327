/*
 * catalog.h
 *		The coordinator's own catalog, read and written with its owner's
 *		rights: node lists, the write queue, transaction records.  Any role's
 *		routed write needs them, as a security definer function would, while
 *		the tables themselves are the administrators'.
 */
#ifndef RINGSHARD_REMOTE_CATALOG_H
#define RINGSHARD_REMOTE_CATALOG_H

#include "postgres.h"

/*
 * Run one statement on the ringshard catalog with its owner's rights and
 * return the first column of its rows as strings (NULL for a null), in the
 * current memory context.
 */
extern char **owner_catalog_query(const char *sql, int nargs, Oid *argtypes, Datum *values,
								  bool read_only, int *nrows);

/* The same with SPI's nulls ('n' for a null argument, ' ' else; NULL for none). */
extern char **owner_catalog_query_nulls(const char *sql, int nargs, Oid *argtypes, Datum *values,
										const char *nulls, bool read_only, int *nrows);

/* Every node that has an address (a server), in name order. */
extern char **catalog_addressed_nodes(int *count);

/* This coordinator's id (a UUID, 32 hex digits without dashes). */
extern const char *catalog_coordinator_id(void);

/*
 * The owner of a relation, from its pg_class row: the catalog's owner (its
 * table nodes) and a table that DDL replaces take theirs from here.
 */
extern Oid	catalog_relation_owner(Oid relid);

#endif							/* RINGSHARD_REMOTE_CATALOG_H */

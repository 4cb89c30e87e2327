/*
 * ringtoken.h
 *		The ringtoken SQL type: an unsigned 64-bit position on the hash ring.
 *
 * A ringtoken is passed by value and stored as a uint64 in the Datum, so
 * glue code can move tokens between C and SQL with these macros.  The text
 * form is parsed and formatted by the pure core (rs_token_text.h).
 */
#ifndef RINGTOKEN_H
#define RINGTOKEN_H

#include "postgres.h"
#include "fmgr.h"

#include "rs_status.h"

#ifndef USE_FLOAT8_BYVAL
#error "ringtoken requires a 64-bit server (USE_FLOAT8_BYVAL)"
#endif

/* Name of the SQL type, for messages. */
#define RINGTOKEN_TYPE_NAME "ringtoken"

/* Datum <-> C conversions for a ring token. */
#define DatumGetRingToken(X)	DatumGetUInt64(X)
#define RingTokenGetDatum(X)	UInt64GetDatum(X)

/* fmgr argument and result helpers for a ring token. */
#define PG_GETARG_RINGTOKEN(n)	DatumGetRingToken(PG_GETARG_DATUM(n))
#define PG_RETURN_RINGTOKEN(x)	return RingTokenGetDatum(x)

/*
 * Raise the error for a core parse failure of the given text (SQLSTATE 22P02
 * for bad syntax, 22003 for out of range).  Shared so that every place that
 * reads a token from text reports it the same way.
 */
extern void ringtoken_report_parse_error(rs_status status, const char *text) pg_attribute_noreturn();

#endif							/* RINGTOKEN_H */

/*
 * rs_status.h
 *		Status codes returned by the pure core.
 *
 * The core never raises errors itself: every fallible function returns one of
 * these codes and the caller (the PostgreSQL glue, a unit test or a fuzzer)
 * decides how to report it.
 */
#ifndef RS_STATUS_H
#define RS_STATUS_H

typedef enum rs_status
{
	RS_OK = 0,
	RS_ERR_NOMEM,				/* an allocation failed */
	RS_ERR_INVALID,				/* an argument breaks a documented rule */
	RS_ERR_SYNTAX,				/* text that does not parse */
	RS_ERR_OUT_OF_RANGE,		/* a number outside its documented range */
	RS_ERR_TOO_MANY_POINTS,		/* a ring over RS_RING_MAX_POINTS */
	RS_ERR_TOO_MANY_NODES,		/* a ring over RS_RING_MAX_NODES */
	RS_ERR_DUPLICATE,			/* the same node named twice */
	RS_ERR_EMPTY,				/* a ring without points */
	RS_ERR_CRYPTO,				/* the digest library failed */
	RS_ERR_TOO_LARGE			/* an input over a documented size cap */
} rs_status;

/* A short English phrase for a status, for messages. */
extern const char *rs_status_text(rs_status status);

#endif							/* RS_STATUS_H */

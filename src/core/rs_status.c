/*
 * rs_status.c
 *		Phrases for the core's status codes.
 */
#include "rs_status.h"

/* A short English phrase for a status, for messages. */
const char *
rs_status_text(rs_status status)
{
	switch (status)
	{
		case RS_OK:
			return "success";
		case RS_ERR_NOMEM:
			return "out of memory";
		case RS_ERR_INVALID:
			return "invalid argument";
		case RS_ERR_SYNTAX:
			return "syntax error";
		case RS_ERR_OUT_OF_RANGE:
			return "value out of range";
		case RS_ERR_TOO_MANY_POINTS:
			return "too many ring points";
		case RS_ERR_TOO_MANY_NODES:
			return "too many ring nodes";
		case RS_ERR_DUPLICATE:
			return "duplicate node";
		case RS_ERR_EMPTY:
			return "ring has no points";
		case RS_ERR_CRYPTO:
			return "digest computation failed";
		case RS_ERR_TOO_LARGE:
			return "input too large";
	}
	return "unknown status";
}

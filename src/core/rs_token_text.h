/*
 * rs_token_text.h
 *		Text form of a ring token: an unsigned 64-bit position on the hash ring.
 *
 * Accepted input, after optional leading and trailing ASCII whitespace
 * (space, \t, \n, \v, \f, \r):
 *
 *		[+|-] decimal digits				e.g. 0, 42, 18446744073709551615
 *		[+|-] 0x|0X hexadecimal digits	e.g. 0x2a, 0XFFFFFFFFFFFFFFFF
 *
 * Leading zeros are allowed in both forms; only the value is checked, never
 * the number of digits.  A minus sign is accepted so that a negative number
 * is reported as out of range rather than as bad syntax; "-0" is zero.
 * Malformed text is RS_ERR_SYNTAX even when its digits would also overflow;
 * well-formed text outside 0 .. 2^64-1 is RS_ERR_OUT_OF_RANGE.
 *
 * The output form is always plain decimal.
 *
 * Pure C: no PostgreSQL headers, no allocation, no global state.
 */
#ifndef RS_TOKEN_TEXT_H
#define RS_TOKEN_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "rs_status.h"

/* Buffer size for rs_token_format, including the terminating NUL. */
#define RS_TOKEN_TEXT_MAX 21

/*
 * Parse len bytes of text (need not be NUL-terminated; a NUL byte inside is a
 * syntax error).  On RS_OK stores the value in *out; otherwise *out is left
 * untouched.  Returns RS_OK, RS_ERR_SYNTAX or RS_ERR_OUT_OF_RANGE.
 */
extern rs_status rs_token_parse(const char *text, size_t len, uint64_t *out);

/*
 * Write value in decimal to buf (at least RS_TOKEN_TEXT_MAX bytes), NUL-
 * terminated.  Returns the number of characters written, excluding the NUL.
 */
extern size_t rs_token_format(uint64_t value, char *buf);

#endif							/* RS_TOKEN_TEXT_H */

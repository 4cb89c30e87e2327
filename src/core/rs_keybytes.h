/*
 * rs_keybytes.h
 *		Canonical key bytes of typed keys (docs/routing.md §1): the text forms
 *		that make equal keys route alike whatever the session's settings.
 *
 * The PostgreSQL glue takes a value apart into plain fields (the digits of a
 * numeric, the calendar fields of a date or timestamp, the 16 bytes of a
 * uuid) and these functions write the canonical bytes:
 *
 *	numeric		plain decimal, no exponent, no leading zeros, no trailing
 *				fractional zeros, no trailing point, "0" for any zero (never
 *				"-0"); "NaN", "Infinity", "-Infinity"
 *	date		YYYY-MM-DD, the year at least four digits; years before 1 as
 *				1 BC, 2 BC, ... ("0001-01-01 BC"), as PostgreSQL's ISO output
 *	timestamp	YYYY-MM-DD HH:MM:SS, then "." and the microseconds without
 *				trailing zeros when they are not zero, then " BC" for years
 *				before 1 (PostgreSQL's ISO output)
 *	timestamptz	the UTC fields in the timestamp form with "+00" after the
 *				time and before any " BC": "0044-03-15 12:00:00+00 BC", which
 *				is PostgreSQL's ISO output with TimeZone set to UTC
 *	infinities	"infinity" and "-infinity" for dates and both timestamps
 *	uuid		36 lowercase hexadecimal characters with hyphens (8-4-4-4-12)
 *	char(n)		the text without its trailing spaces
 *
 * Pure C: no PostgreSQL headers, no allocation, no global state.  Output is
 * not NUL-terminated unless a function says so; lengths are returned.
 */
#ifndef RS_KEYBYTES_H
#define RS_KEYBYTES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rs_status.h"

/*
 * Years accepted by the date and timestamp forms, in astronomical numbering
 * (0 is 1 BC): eight digits each way, far beyond PostgreSQL's own range
 * (4713 BC to 5874897 AD), so that every field set fits the buffer below.
 */
#define RS_KEYBYTES_YEAR_MIN (-99999998)
#define RS_KEYBYTES_YEAR_MAX 99999999

/* Buffer size for any date, timestamp or infinity form, with room for a NUL. */
#define RS_KEYBYTES_DATETIME_MAX 48

/* Length of the uuid form. */
#define RS_KEYBYTES_UUID_LEN 36

/*
 * Buffer size for the canonical form of len bytes of numeric text: the form
 * is never longer than the input plus one ("-.5" gives "-0.5"), or nine
 * ("-inf" gives "-Infinity").
 */
#define RS_KEYBYTES_NUMERIC_SIZE(len) ((len) + 10)

/* Calendar fields of a date or timestamp, proleptic Gregorian. */
typedef struct rs_datetime
{
	int32_t		year;			/* astronomical: 1 is 1 AD, 0 is 1 BC, -1 is 2 BC */
	int32_t		month;			/* 1 .. 12 */
	int32_t		day;			/* 1 .. days in the month */
	int32_t		hour;			/* 0 .. 23 */
	int32_t		minute;			/* 0 .. 59 */
	int32_t		second;			/* 0 .. 59 */
	int32_t		microsecond;	/* 0 .. 999999 */
} rs_datetime;

/*
 * The canonical form of a decimal number written as text: optional sign,
 * digits with an optional point (".5" and "5." are numbers), or NaN,
 * Infinity or inf with any case (infinities with an optional sign).  No
 * whitespace, no exponent.  Writes at most RS_KEYBYTES_NUMERIC_SIZE(len) - 1
 * bytes to out and their count to *out_len.  RS_ERR_SYNTAX for anything else
 * (out is then untouched).  Idempotent: a canonical form maps to itself.
 */
extern rs_status rs_keybytes_numeric(const char *text, size_t len, char *out, size_t *out_len);

/*
 * The date form of dt's year, month and day (the time fields are ignored)
 * into buf (RS_KEYBYTES_DATETIME_MAX bytes), NUL-terminated; *len gets its
 * length.  RS_ERR_OUT_OF_RANGE for a year outside RS_KEYBYTES_YEAR_MIN ..
 * RS_KEYBYTES_YEAR_MAX, a month outside 1 .. 12 or a day the month does not
 * have (buf is then untouched).
 */
extern rs_status rs_keybytes_date(const rs_datetime *dt, char *buf, size_t *len);

/*
 * The timestamp form of dt into buf (RS_KEYBYTES_DATETIME_MAX bytes),
 * NUL-terminated, with "+00" after the time when utc_offset is true (the
 * timestamptz form).  RS_ERR_OUT_OF_RANGE as rs_keybytes_date, or for a time
 * field outside its range.
 */
extern rs_status rs_keybytes_timestamp(const rs_datetime *dt, bool utc_offset,
									   char *buf, size_t *len);

/*
 * "infinity" or "-infinity" into buf (RS_KEYBYTES_DATETIME_MAX bytes),
 * NUL-terminated; returns the length.
 */
extern size_t rs_keybytes_infinity(bool negative, char *buf);

/*
 * The lowercase 8-4-4-4-12 form of 16 uuid bytes into buf (at least
 * RS_KEYBYTES_UUID_LEN + 1 bytes), NUL-terminated; returns its length.
 */
extern size_t rs_keybytes_uuid(const uint8_t *bytes, char *buf);

/* The length of text without its trailing spaces (bytes 0x20 only). */
extern size_t rs_keybytes_trim_trailing_spaces(const char *text, size_t len);

/* Days in a month of a (proleptic Gregorian, astronomical) year; 0 for a bad month. */
extern int	rs_keybytes_days_in_month(int32_t year, int32_t month);

#endif							/* RS_KEYBYTES_H */

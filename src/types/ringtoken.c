/*
 * ringtoken.c
 *		fmgr functions of the ringtoken type: I/O, comparison, hashing, casts
 *		and the min/max transition functions.
 *
 * A ringtoken is an unsigned 64-bit ring position, stored as a uint64 in a
 * pass-by-value Datum.  Text parsing and formatting live in the pure core
 * (src/core/rs_token_text.c); this file only adapts it to PostgreSQL.
 */
#include "postgres.h"

#include "fmgr.h"
#include "libpq/pqformat.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/numeric.h"
#include "utils/sortsupport.h"

#include "rs_token_text.h"
#include "types/ringtoken.h"

#define RINGTOKEN_RANGE_HINT "Values of type ringtoken range from 0 to 18446744073709551615."

/* Raise the error for a core parse failure of text; see ringtoken.h. */
void
ringtoken_report_parse_error(rs_status status, const char *text)
{
	if (status == RS_ERR_OUT_OF_RANGE)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("value \"%s\" is out of range for type %s",
						text, RINGTOKEN_TYPE_NAME),
				 errhint(RINGTOKEN_RANGE_HINT)));

	ereport(ERROR,
			(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
			 errmsg("invalid input syntax for type %s: \"%s\"",
					RINGTOKEN_TYPE_NAME, text)));
}

/* Parse a NUL-terminated string into a token, raising an error on failure. */
static uint64
parse_ringtoken_cstring(const char *text)
{
	uint64_t	value;
	rs_status	status = rs_token_parse(text, strlen(text), &value);

	if (status != RS_OK)
		ringtoken_report_parse_error(status, text);
	return value;
}

/* Three-way unsigned comparison of two tokens. */
static inline int
compare_ringtokens(uint64 a, uint64 b)
{
	return (a > b) - (a < b);
}

PG_FUNCTION_INFO_V1(ringtoken_in);
/* Text input: decimal or 0x-prefixed hexadecimal, surrounded by optional whitespace. */
Datum
ringtoken_in(PG_FUNCTION_ARGS)
{
	const char *text = PG_GETARG_CSTRING(0);

	PG_RETURN_RINGTOKEN(parse_ringtoken_cstring(text));
}

PG_FUNCTION_INFO_V1(ringtoken_out);
/* Text output: plain decimal. */
Datum
ringtoken_out(PG_FUNCTION_ARGS)
{
	uint64		token = PG_GETARG_RINGTOKEN(0);
	char	   *text = palloc(RS_TOKEN_TEXT_MAX);

	rs_token_format(token, text);
	PG_RETURN_CSTRING(text);
}

PG_FUNCTION_INFO_V1(ringtoken_recv);
/* Binary input: 8 bytes, big-endian; every bit pattern is a valid token. */
Datum
ringtoken_recv(PG_FUNCTION_ARGS)
{
	StringInfo	message = (StringInfo) PG_GETARG_POINTER(0);

	PG_RETURN_RINGTOKEN((uint64) pq_getmsgint64(message));
}

PG_FUNCTION_INFO_V1(ringtoken_send);
/* Binary output: 8 bytes, big-endian. */
Datum
ringtoken_send(PG_FUNCTION_ARGS)
{
	uint64		token = PG_GETARG_RINGTOKEN(0);
	StringInfoData buf;

	pq_begintypsend(&buf);
	pq_sendint64(&buf, token);
	PG_RETURN_BYTEA_P(pq_endtypsend(&buf));
}

PG_FUNCTION_INFO_V1(ringtoken_eq);
/* Operator =: the tokens are equal. */
Datum
ringtoken_eq(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(PG_GETARG_RINGTOKEN(0) == PG_GETARG_RINGTOKEN(1));
}

PG_FUNCTION_INFO_V1(ringtoken_ne);
/* Operator <>: the tokens differ. */
Datum
ringtoken_ne(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(PG_GETARG_RINGTOKEN(0) != PG_GETARG_RINGTOKEN(1));
}

PG_FUNCTION_INFO_V1(ringtoken_lt);
/* Operator <: the first token comes before the second (unsigned order). */
Datum
ringtoken_lt(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(PG_GETARG_RINGTOKEN(0) < PG_GETARG_RINGTOKEN(1));
}

PG_FUNCTION_INFO_V1(ringtoken_le);
/* Operator <=: the first token comes before or equals the second. */
Datum
ringtoken_le(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(PG_GETARG_RINGTOKEN(0) <= PG_GETARG_RINGTOKEN(1));
}

PG_FUNCTION_INFO_V1(ringtoken_gt);
/* Operator >: the first token comes after the second (unsigned order). */
Datum
ringtoken_gt(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(PG_GETARG_RINGTOKEN(0) > PG_GETARG_RINGTOKEN(1));
}

PG_FUNCTION_INFO_V1(ringtoken_ge);
/* Operator >=: the first token comes after or equals the second. */
Datum
ringtoken_ge(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(PG_GETARG_RINGTOKEN(0) >= PG_GETARG_RINGTOKEN(1));
}

PG_FUNCTION_INFO_V1(ringtoken_cmp);
/* Btree support 1: -1, 0 or 1 as the first token sorts before, with or after the second. */
Datum
ringtoken_cmp(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(compare_ringtokens(PG_GETARG_RINGTOKEN(0), PG_GETARG_RINGTOKEN(1)));
}

PG_FUNCTION_INFO_V1(ringtoken_sortsupport);
/* Btree support 2: sort tokens by comparing their Datums as unsigned integers. */
Datum
ringtoken_sortsupport(PG_FUNCTION_ARGS)
{
	SortSupport ssup = (SortSupport) PG_GETARG_POINTER(0);

	ssup->comparator = ssup_datum_unsigned_cmp;
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(ringtoken_hash);
/* Hash support 1: 32-bit hash of the token's 64 bits (same as hashint8 on them). */
Datum
ringtoken_hash(PG_FUNCTION_ARGS)
{
	int64		bits = (int64) PG_GETARG_RINGTOKEN(0);

	return DirectFunctionCall1(hashint8, Int64GetDatum(bits));
}

PG_FUNCTION_INFO_V1(ringtoken_hash_extended);
/* Hash support 2: seeded 64-bit hash of the token's 64 bits (same as hashint8extended). */
Datum
ringtoken_hash_extended(PG_FUNCTION_ARGS)
{
	int64		bits = (int64) PG_GETARG_RINGTOKEN(0);

	return DirectFunctionCall2(hashint8extended, Int64GetDatum(bits), PG_GETARG_DATUM(1));
}

PG_FUNCTION_INFO_V1(ringtoken_larger);
/* Transition function of max(ringtoken): the later of two tokens. */
Datum
ringtoken_larger(PG_FUNCTION_ARGS)
{
	uint64		a = PG_GETARG_RINGTOKEN(0);
	uint64		b = PG_GETARG_RINGTOKEN(1);

	PG_RETURN_RINGTOKEN(a > b ? a : b);
}

PG_FUNCTION_INFO_V1(ringtoken_smaller);
/* Transition function of min(ringtoken): the earlier of two tokens. */
Datum
ringtoken_smaller(PG_FUNCTION_ARGS)
{
	uint64		a = PG_GETARG_RINGTOKEN(0);
	uint64		b = PG_GETARG_RINGTOKEN(1);

	PG_RETURN_RINGTOKEN(a < b ? a : b);
}

PG_FUNCTION_INFO_V1(ringtoken_from_numeric);
/* Cast numeric -> ringtoken: a whole number from 0 to 2^64-1, else an error. */
Datum
ringtoken_from_numeric(PG_FUNCTION_ARGS)
{
	Numeric		num = PG_GETARG_NUMERIC(0);
	Datum		num_datum = NumericGetDatum(num);
	Datum		zero;
	Datum		max_token;
	Datum		truncated;
	char	   *text;

	if (numeric_is_nan(num))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("cannot convert NaN to %s", RINGTOKEN_TYPE_NAME)));

	/* Infinity and -Infinity fail this range check too. */
	zero = NumericGetDatum(int64_to_numeric(0));
	max_token = DirectFunctionCall3(numeric_in,
									CStringGetDatum("18446744073709551615"),
									ObjectIdGetDatum(InvalidOid),
									Int32GetDatum(-1));
	if (DatumGetInt32(DirectFunctionCall2(numeric_cmp, num_datum, zero)) < 0 ||
		DatumGetInt32(DirectFunctionCall2(numeric_cmp, num_datum, max_token)) > 0)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("value \"%s\" is out of range for type %s",
						DatumGetCString(DirectFunctionCall1(numeric_out, num_datum)),
						RINGTOKEN_TYPE_NAME),
				 errhint(RINGTOKEN_RANGE_HINT)));

	truncated = DirectFunctionCall2(numeric_trunc, num_datum, Int32GetDatum(0));
	if (DatumGetInt32(DirectFunctionCall2(numeric_cmp, num_datum, truncated)) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("cannot convert fractional value \"%s\" to %s",
						DatumGetCString(DirectFunctionCall1(numeric_out, num_datum)),
						RINGTOKEN_TYPE_NAME),
				 errhint("Apply trunc(), round(), floor() or ceil() before the cast.")));

	/* A whole numeric with scale 0 prints as plain decimal digits. */
	text = DatumGetCString(DirectFunctionCall1(numeric_out, truncated));
	PG_RETURN_RINGTOKEN(parse_ringtoken_cstring(text));
}

PG_FUNCTION_INFO_V1(ringtoken_to_numeric);
/* Cast ringtoken -> numeric: the exact value. */
Datum
ringtoken_to_numeric(PG_FUNCTION_ARGS)
{
	uint64		token = PG_GETARG_RINGTOKEN(0);
	char		text[RS_TOKEN_TEXT_MAX];

	if (token <= (uint64) PG_INT64_MAX)
		PG_RETURN_NUMERIC(int64_to_numeric((int64) token));

	rs_token_format(token, text);
	return DirectFunctionCall3(numeric_in,
							   CStringGetDatum(text),
							   ObjectIdGetDatum(InvalidOid),
							   Int32GetDatum(-1));
}

PG_FUNCTION_INFO_V1(ringtoken_from_int8);
/* Cast bigint -> ringtoken: reinterpret the 64 bits (two's complement), so -1 is 2^64-1. */
Datum
ringtoken_from_int8(PG_FUNCTION_ARGS)
{
	PG_RETURN_RINGTOKEN((uint64) PG_GETARG_INT64(0));
}

PG_FUNCTION_INFO_V1(ringtoken_to_int8);
/* Cast ringtoken -> bigint: reinterpret the 64 bits (two's complement), so 2^64-1 is -1. */
Datum
ringtoken_to_int8(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64((int64) PG_GETARG_RINGTOKEN(0));
}

PG_FUNCTION_INFO_V1(ringtoken_from_int4);
/* Cast integer -> ringtoken: same as integer -> bigint -> ringtoken, so -1 is 2^64-1. */
Datum
ringtoken_from_int4(PG_FUNCTION_ARGS)
{
	PG_RETURN_RINGTOKEN((uint64) (int64) PG_GETARG_INT32(0));
}

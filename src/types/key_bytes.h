/*
 * key_bytes.h
 *		A key's canonical bytes (docs/routing.md §1), for any SQL type.
 *
 * The encoder is chosen once per call site from the argument's type, so the
 * per-row work is a switch and, for strings, no copy at all.  The bytes never
 * depend on a session setting (TimeZone, DateStyle, extra_float_digits, lc_*,
 * client_encoding): dates and timestamps are formatted from their binary
 * value by the pure core (rs_keybytes.h), never by the type's output
 * function, and text is UTF-8 whatever the database encoding.  That is what
 * lets every routing function that depends only on the key be IMMUTABLE.
 *
 * Types without canonical bytes (float4/float8, interval, json, arrays,
 * records, "char", money, ...) are refused when the encoder is chosen, with
 * a hint to cast the key to text.
 */
#ifndef RINGSHARD_KEY_BYTES_H
#define RINGSHARD_KEY_BYTES_H

#include "postgres.h"

#include "fmgr.h"

#include "rs_keybytes.h"

/*
 * Room for the bytes of any key that is formatted rather than read in place:
 * the decimal text of a bigint, a uuid, a date or timestamp form, with NUL.
 */
#define KEY_BYTES_BUFSIZE RS_KEYBYTES_DATETIME_MAX

typedef enum KeyKind
{
	KEY_VARLENA,				/* bytea, and text or varchar in a UTF-8
								 * database: the bytes as stored */
	KEY_TEXT,					/* text or varchar converted to UTF-8 */
	KEY_BPCHAR,					/* char(n): trailing spaces dropped, UTF-8 */
	KEY_NAME,					/* name: UTF-8 */
	KEY_INT2,
	KEY_INT4,
	KEY_INT8,					/* integers: decimal text */
	KEY_NUMERIC,				/* normalized decimal */
	KEY_UUID,					/* lowercase 36-character text */
	KEY_BOOL,					/* t or f */
	KEY_DATE,					/* YYYY-MM-DD */
	KEY_TIMESTAMP,				/* YYYY-MM-DD HH:MM:SS[.ffffff] */
	KEY_TIMESTAMPTZ,			/* the same in UTC, then +00 */
	KEY_ENUM					/* the label, UTF-8 */
} KeyKind;

typedef struct KeyEncoder
{
	KeyKind		kind;
	bool		to_utf8;		/* string kinds: the database is not UTF-8 */
} KeyEncoder;

/*
 * Choose the encoding for values of a type (a domain encodes as its base
 * type); ERROR for a type without canonical bytes.  mcxt is unused, kept so
 * that callers need not change when an encoder needs state.
 */
extern void key_encoder_init(KeyEncoder *encoder, Oid type_oid, MemoryContext mcxt);

/* Whether keys of a type (or a domain over it) have canonical bytes. */
extern bool key_type_routes(Oid type_oid);

/*
 * The same for a keyspace column: a keyspace is encoded as a key is, so that
 * a char(n) keyspace loses its padding as its cast to text does.
 */
extern void keyspace_encoder_init(KeyEncoder *encoder, Oid type_oid, MemoryContext mcxt);

/*
 * The canonical bytes of a non-NULL value.  The result points into the value,
 * into buf (KEY_BYTES_BUFSIZE bytes) or into memory of the current context.
 */
extern const char *key_encoder_bytes_slow(const KeyEncoder *encoder, Datum value,
										  char *buf, size_t *len);

/*
 * Text in the database encoding as UTF-8 bytes (the keyspace of
 * partition_for, a table's constant keyspace): the text itself in a UTF-8
 * database, else a converted copy in the current context.
 */
extern const char *key_text_as_utf8(const char *text, size_t len, size_t *out_len);

/*
 * The same as key_encoder_bytes_slow, with the common case inline: a string
 * stored in place (not compressed, not out of line) whose bytes need no
 * conversion is read where it is, with no call.
 */
static inline const char *
key_encoder_bytes(const KeyEncoder *encoder, Datum value, char *buf, size_t *len)
{
	if (likely(encoder->kind == KEY_VARLENA))
	{
		const char *ptr = DatumGetPointer(value);

		/* pg_detoast_datum_packed's own test: neither compressed nor out of line */
		if (!VARATT_IS_COMPRESSED(ptr) && !VARATT_IS_EXTERNAL(ptr))
		{
			*len = VARSIZE_ANY_EXHDR(ptr);
			return VARDATA_ANY(ptr);
		}
	}
	return key_encoder_bytes_slow(encoder, value, buf, len);
}

#endif							/* RINGSHARD_KEY_BYTES_H */

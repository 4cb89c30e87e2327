/*
 * key_bytes.h
 *		A key's canonical bytes (ROUTING.md §1), for any SQL type.
 *
 * The encoder is chosen once per call site from the argument's type, so the
 * per-row work is a switch and, for strings, no copy at all.
 */
#ifndef RINGSHARD_KEY_BYTES_H
#define RINGSHARD_KEY_BYTES_H

#include "postgres.h"

#include "fmgr.h"

/* Room for the decimal text of any bigint or the text of a uuid, with NUL. */
#define KEY_BYTES_BUFSIZE 40

typedef enum KeyKind
{
	KEY_VARLENA,				/* text, varchar, char, bytea: bytes as stored */
	KEY_BPCHAR_AS_TEXT,			/* char(n) cast to text: trailing spaces dropped */
	KEY_INT2,
	KEY_INT4,
	KEY_INT8,					/* integers: decimal text */
	KEY_UUID,					/* lowercase 36-character text */
	KEY_OUTPUT					/* anything else: the type's text output */
} KeyKind;

typedef struct KeyEncoder
{
	KeyKind		kind;
	FmgrInfo	output;			/* KEY_OUTPUT only */
} KeyEncoder;

/* Choose the encoding for values of a type; output functions live in mcxt. */
extern void key_encoder_init(KeyEncoder *encoder, Oid type_oid, MemoryContext mcxt);

/*
 * The same for a keyspace: partition_for() takes the keyspace as text, so a
 * char(n) keyspace is encoded as its cast to text (without the padding).
 */
extern void keyspace_encoder_init(KeyEncoder *encoder, Oid type_oid, MemoryContext mcxt);

/*
 * The canonical bytes of a non-NULL value.  The result points into the value,
 * into buf (KEY_BYTES_BUFSIZE bytes) or into memory of the current context.
 */
extern const char *key_encoder_bytes_slow(const KeyEncoder *encoder, Datum value,
										  char *buf, size_t *len);

/*
 * The same, with the common case inline: a string stored in place (not
 * compressed, not out of line) is read where it is, with no call.
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

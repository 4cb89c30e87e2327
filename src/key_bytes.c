/*
 * key_bytes.c
 *		Canonical key bytes for routing (ROUTING.md §1).
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/uuid.h"

#include "key_bytes.h"

/* Choose the encoding for values of a type; output functions live in mcxt. */
void
key_encoder_init(KeyEncoder *encoder, Oid type_oid, MemoryContext mcxt)
{
	Oid			base = getBaseType(type_oid);

	switch (base)
	{
		case TEXTOID:
		case VARCHAROID:
		case BPCHAROID:
		case BYTEAOID:
			encoder->kind = KEY_VARLENA;
			break;
		case INT2OID:
			encoder->kind = KEY_INT2;
			break;
		case INT4OID:
			encoder->kind = KEY_INT4;
			break;
		case INT8OID:
			encoder->kind = KEY_INT8;
			break;
		case UUIDOID:
			encoder->kind = KEY_UUID;
			break;
		default:
			{
				Oid			output_func;
				bool		is_varlena;

				if (!OidIsValid(base) || base == UNKNOWNOID)
					ereport(ERROR,
							(errcode(ERRCODE_INDETERMINATE_DATATYPE),
							 errmsg("could not determine the type of the routing key"),
							 errhint("Cast the key to a type, for example text or bigint.")));
				getTypeOutputInfo(base, &output_func, &is_varlena);
				fmgr_info_cxt(output_func, &encoder->output, mcxt);
				encoder->kind = KEY_OUTPUT;
			}
			break;
	}
}

/* The same for a keyspace: char(n) as its cast to text (see key_bytes.h). */
void
keyspace_encoder_init(KeyEncoder *encoder, Oid type_oid, MemoryContext mcxt)
{
	key_encoder_init(encoder, type_oid, mcxt);
	if (getBaseType(type_oid) == BPCHAROID)
		encoder->kind = KEY_BPCHAR_AS_TEXT;
}

/* Lowercase canonical text of a uuid into buf; returns 36. */
static size_t
format_uuid(const pg_uuid_t *uuid, char *buf)
{
	static const char hex[] = "0123456789abcdef";
	size_t		len = 0;

	for (int i = 0; i < UUID_LEN; i++)
	{
		if (i == 4 || i == 6 || i == 8 || i == 10)
			buf[len++] = '-';
		buf[len++] = hex[uuid->data[i] >> 4];
		buf[len++] = hex[uuid->data[i] & 0x0F];
	}
	buf[len] = '\0';
	return len;
}

/* The canonical bytes of a non-NULL value (see key_bytes.h). */
const char *
key_encoder_bytes_slow(const KeyEncoder *encoder, Datum value, char *buf, size_t *len)
{
	switch (encoder->kind)
	{
		case KEY_VARLENA:
			{
				/* Short values arrive packed and are read in place. */
				struct varlena *v = PG_DETOAST_DATUM_PACKED(value);

				*len = VARSIZE_ANY_EXHDR(v);
				return VARDATA_ANY(v);
			}
		case KEY_BPCHAR_AS_TEXT:
			{
				struct varlena *v = PG_DETOAST_DATUM_PACKED(value);
				size_t		n = VARSIZE_ANY_EXHDR(v);

				while (n > 0 && VARDATA_ANY(v)[n - 1] == ' ')
					n--;
				*len = n;
				return VARDATA_ANY(v);
			}
		case KEY_INT2:
			*len = (size_t) pg_ltoa(DatumGetInt16(value), buf);
			return buf;
		case KEY_INT4:
			*len = (size_t) pg_ltoa(DatumGetInt32(value), buf);
			return buf;
		case KEY_INT8:
			*len = (size_t) pg_lltoa(DatumGetInt64(value), buf);
			return buf;
		case KEY_UUID:
			*len = format_uuid(DatumGetUUIDP(value), buf);
			return buf;
		case KEY_OUTPUT:
			{
				char	   *text = OutputFunctionCall((FmgrInfo *) &encoder->output, value);

				*len = strlen(text);
				return text;
			}
	}
	pg_unreachable();
}

/*
 * key_bytes.c
 *		Canonical key bytes for routing (docs/routing.md §1).
 *
 * This file takes values apart; the forms themselves are written by the pure
 * core (src/core/rs_keybytes.c).  No type output function is called: their
 * text depends on DateStyle, TimeZone, extra_float_digits and the like.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_enum.h"
#include "catalog/pg_type.h"
#include "datatype/timestamp.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/date.h"
#include "utils/datetime.h"
#include "utils/lsyscache.h"
#include "utils/numeric.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

#include "types/key_bytes.h"

/* Refuse a key type without canonical bytes, naming it. */
static void
refuse_key_type(Oid type_oid, Oid base)
{
	if (base != type_oid)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot route a key of type %s, a domain over %s",
						format_type_be(type_oid), format_type_be(base)),
				 errdetail("Keys route by canonical bytes, defined for text, varchar, name, char(n), bytea, "
						   "smallint, integer, bigint, numeric, uuid, boolean, date, timestamp, timestamptz, "
						   "enums and domains over these (docs/routing.md §1)."),
				 errhint("Cast the key to text, as in shard_for(k::text), to route it by its text.")));
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("cannot route a key of type %s", format_type_be(type_oid)),
			 errdetail("Keys route by canonical bytes, defined for text, varchar, name, char(n), bytea, "
					   "smallint, integer, bigint, numeric, uuid, boolean, date, timestamp, timestamptz, "
					   "enums and domains over these (docs/routing.md §1)."),
			 errhint("Cast the key to text, as in shard_for(k::text), to route it by its text.")));
}

/*
 * The key kind of a base type, or false if it has no canonical bytes.
 * Enums are looked up in the type cache.
 */
static bool
kind_of_base_type(Oid base, bool utf8_database, KeyKind *kind)
{
	switch (base)
	{
		case BYTEAOID:
			*kind = KEY_VARLENA;
			return true;
		case TEXTOID:
		case VARCHAROID:
			/* In a UTF-8 database the stored bytes are the canonical bytes. */
			*kind = utf8_database ? KEY_VARLENA : KEY_TEXT;
			return true;
		case BPCHAROID:
			*kind = KEY_BPCHAR;
			return true;
		case NAMEOID:
			*kind = KEY_NAME;
			return true;
		case INT2OID:
			*kind = KEY_INT2;
			return true;
		case INT4OID:
			*kind = KEY_INT4;
			return true;
		case INT8OID:
			*kind = KEY_INT8;
			return true;
		case NUMERICOID:
			*kind = KEY_NUMERIC;
			return true;
		case UUIDOID:
			*kind = KEY_UUID;
			return true;
		case BOOLOID:
			*kind = KEY_BOOL;
			return true;
		case DATEOID:
			*kind = KEY_DATE;
			return true;
		case TIMESTAMPOID:
			*kind = KEY_TIMESTAMP;
			return true;
		case TIMESTAMPTZOID:
			*kind = KEY_TIMESTAMPTZ;
			return true;
		default:
			if (OidIsValid(base) && base != UNKNOWNOID && type_is_enum(base))
			{
				*kind = KEY_ENUM;
				return true;
			}
			return false;
	}
}

/* Choose the encoding for values of a type (see key_bytes.h). */
void
key_encoder_init(KeyEncoder *encoder, Oid type_oid, MemoryContext mcxt)
{
	Oid			base = getBaseType(type_oid);
	bool		utf8_database = GetDatabaseEncoding() == PG_UTF8;

	encoder->to_utf8 = !utf8_database;
	if (kind_of_base_type(base, utf8_database, &encoder->kind))
		return;
	if (!OidIsValid(base) || base == UNKNOWNOID)
		ereport(ERROR,
				(errcode(ERRCODE_INDETERMINATE_DATATYPE),
				 errmsg("could not determine the type of the routing key"),
				 errhint("Cast the key to a type, for example text or bigint.")));
	refuse_key_type(type_oid, base);
}

/* Whether keys of a type route (see key_bytes.h). */
bool
key_type_routes(Oid type_oid)
{
	KeyKind		kind;

	return kind_of_base_type(getBaseType(type_oid), GetDatabaseEncoding() == PG_UTF8, &kind);
}

PG_FUNCTION_INFO_V1(ringshard_check_key_column);

/*
 * check_key_column(table, column, type, role): raises unless a column's type
 * routes, when a table is annotated, rather than at its first row.
 */
Datum
ringshard_check_key_column(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	char	   *column = NameStr(*PG_GETARG_NAME(1));
	Oid			type_oid = PG_GETARG_OID(2);
	char	   *role = text_to_cstring(PG_GETARG_TEXT_PP(3));

	if (!key_type_routes(type_oid))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot use column \"%s\" of type %s as the %s of table %s", column,
						format_type_be(type_oid), role,
						get_rel_name(relid) ? quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
																		 get_rel_name(relid)) : "?"),
				 errdetail("Keys route by canonical bytes, defined for text, varchar, name, char(n), bytea, "
						   "smallint, integer, bigint, numeric, uuid, boolean, date, timestamp, timestamptz, "
						   "enums and domains over these (docs/routing.md §1)."),
				 errhint("Choose a column of one of these types, or change the column's type, for example "
						 "with ALTER TABLE ... ALTER COLUMN ... TYPE text.")));

	/*
	 * A non-deterministic collation calls strings with other bytes equal
	 * ('Alice@Example.com' = 'alice@example.com' at ks-level2): they would
	 * route apart, so a lookup could miss its row and a unique key hold two
	 * spellings on two nodes.
	 */
	{
		AttrNumber	attnum = get_attnum(relid, column);
		Oid			collation = InvalidOid;
		Oid			typid;
		int32		typmod;

		if (attnum != InvalidAttrNumber)
			get_atttypetypmodcoll(relid, attnum, &typid, &typmod, &collation);

		if (OidIsValid(collation) && !get_collation_isdeterministic(collation))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot use column \"%s\" of table %s as the %s: its collation %s is not deterministic",
							column,
							get_rel_name(relid) ? quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
																			 get_rel_name(relid)) : "?",
							role, quote_identifier(get_collation_name(collation))),
					 errdetail("Keys route by their bytes; this collation calls values with other bytes equal, "
							   "which would then be placed on different nodes."),
					 errhint("Route by a normalized value instead, for example a column lower(email) with a "
							 "deterministic collation, or give the column one: ALTER TABLE ... ALTER COLUMN ... "
							 "TYPE text COLLATE \"default\".")));
	}
	PG_RETURN_VOID();
}

/* The same for a keyspace column (see key_bytes.h). */
void
keyspace_encoder_init(KeyEncoder *encoder, Oid type_oid, MemoryContext mcxt)
{
	key_encoder_init(encoder, type_oid, mcxt);
}

/* Text as UTF-8 bytes (see key_bytes.h). */
const char *
key_text_as_utf8(const char *text, size_t len, size_t *out_len)
{
	const char *converted;

	if (GetDatabaseEncoding() == PG_UTF8 || len == 0)
	{
		*out_len = len;
		return text;
	}
	/* The text itself when nothing changes, else a NUL-terminated copy. */
	converted = pg_server_to_any(text, (int) len, PG_UTF8);
	*out_len = converted == text ? len : strlen(converted);
	return converted;
}

/* Calendar fields of a timestamp's UTC reading (no time zone applied). */
static void
timestamp_fields(Timestamp ts, rs_datetime *dt)
{
	struct pg_tm tm;
	fsec_t		fsec;

	/* A NULL tzp means no time zone conversion: the fields are UTC's. */
	if (timestamp2tm(ts, NULL, &tm, &fsec, NULL, NULL) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timestamp out of range")));
	dt->year = tm.tm_year;
	dt->month = tm.tm_mon;
	dt->day = tm.tm_mday;
	dt->hour = tm.tm_hour;
	dt->minute = tm.tm_min;
	dt->second = tm.tm_sec;
	dt->microsecond = fsec;
}

/* Report a core failure to format fields PostgreSQL itself produced. */
static void
report_format_failure(rs_status status, const char *type_name)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
			 errmsg("cannot form the key bytes of a %s: %s", type_name, rs_status_text(status))));
}

/* The canonical bytes of a timestamp or timestamptz value into buf. */
static const char *
timestamp_bytes(Timestamp ts, bool utc_offset, char *buf, size_t *len)
{
	rs_datetime dt;
	rs_status	status;

	if (TIMESTAMP_NOT_FINITE(ts))
	{
		*len = rs_keybytes_infinity(TIMESTAMP_IS_NOBEGIN(ts), buf);
		return buf;
	}
	timestamp_fields(ts, &dt);
	status = rs_keybytes_timestamp(&dt, utc_offset, buf, len);
	if (status != RS_OK)
		report_format_failure(status, utc_offset ? "timestamptz" : "timestamp");
	return buf;
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
		case KEY_TEXT:
			{
				struct varlena *v = PG_DETOAST_DATUM_PACKED(value);

				return key_text_as_utf8(VARDATA_ANY(v), VARSIZE_ANY_EXHDR(v), len);
			}
		case KEY_BPCHAR:
			{
				/* Padding is not part of the value: 'ab'::char(5) = 'ab'. */
				struct varlena *v = PG_DETOAST_DATUM_PACKED(value);
				size_t		n = rs_keybytes_trim_trailing_spaces(VARDATA_ANY(v), VARSIZE_ANY_EXHDR(v));

				if (encoder->to_utf8)
					return key_text_as_utf8(VARDATA_ANY(v), n, len);
				*len = n;
				return VARDATA_ANY(v);
			}
		case KEY_NAME:
			{
				const char *name = NameStr(*DatumGetName(value));

				if (encoder->to_utf8)
					return key_text_as_utf8(name, strlen(name), len);
				*len = strlen(name);
				return name;
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
		case KEY_NUMERIC:
			{
				/*
				 * numeric_normalize writes the value's digits without an
				 * exponent and depends on no setting; the core makes the
				 * canonical form of them (and checks it).
				 */
				char	   *text = numeric_normalize(DatumGetNumeric(value));
				size_t		text_len = strlen(text);
				char	   *out = palloc(RS_KEYBYTES_NUMERIC_SIZE(text_len));
				rs_status	status = rs_keybytes_numeric(text, text_len, out, len);

				if (status != RS_OK)
					ereport(ERROR,
							(errcode(ERRCODE_INTERNAL_ERROR),
							 errmsg("cannot form the key bytes of numeric \"%s\": %s",
									text, rs_status_text(status))));
				pfree(text);
				return out;
			}
		case KEY_UUID:
			*len = rs_keybytes_uuid(DatumGetUUIDP(value)->data, buf);
			return buf;
		case KEY_BOOL:
			buf[0] = DatumGetBool(value) ? 't' : 'f';
			buf[1] = '\0';
			*len = 1;
			return buf;
		case KEY_DATE:
			{
				DateADT		date = DatumGetDateADT(value);
				rs_datetime dt = {0};
				rs_status	status;

				if (DATE_NOT_FINITE(date))
				{
					*len = rs_keybytes_infinity(DATE_IS_NOBEGIN(date), buf);
					return buf;
				}
				j2date(date + POSTGRES_EPOCH_JDATE, &dt.year, &dt.month, &dt.day);
				status = rs_keybytes_date(&dt, buf, len);
				if (status != RS_OK)
					report_format_failure(status, "date");
				return buf;
			}
		case KEY_TIMESTAMP:
			return timestamp_bytes(DatumGetTimestamp(value), false, buf, len);
		case KEY_TIMESTAMPTZ:
			/* The value is the UTC instant: the session's TimeZone plays no part. */
			return timestamp_bytes(DatumGetTimestampTz(value), true, buf, len);
		case KEY_ENUM:
			{
				Oid			member = DatumGetObjectId(value);
				HeapTuple	tuple = SearchSysCache1(ENUMOID, ObjectIdGetDatum(member));
				char	   *label;

				if (!HeapTupleIsValid(tuple))
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
							 errmsg("invalid internal value for enum: %u", member)));
				label = pstrdup(NameStr(((Form_pg_enum) GETSTRUCT(tuple))->enumlabel));
				ReleaseSysCache(tuple);
				if (encoder->to_utf8)
					return key_text_as_utf8(label, strlen(label), len);
				*len = strlen(label);
				return label;
			}
	}
	pg_unreachable();
}

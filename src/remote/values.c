/*
 * values.c
 *		Values across the link to a node (see values.h).
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/transam.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "port/pg_bswap.h"
#include "parser/parser.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/bytea.h"
#include "utils/float.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/pg_locale.h"
#include "utils/syscache.h"
#include "utils/typcache.h"
#include "utils/xml.h"

#include "remote/values.h"

int
remote_transmission_begin(bool money)
{
	int			nestlevel = NewGUCNestLevel();

	/* as postgres_fdw's set_transmission_modes(), and what else a built-in type's text depends on */
	if (DateStyle != USE_ISO_DATES)
		(void) set_config_option("datestyle", "ISO", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	if (IntervalStyle != INTSTYLE_POSTGRES)
		(void) set_config_option("intervalstyle", "postgres", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0,
								 false);
	if (extra_float_digits < 3)
		(void) set_config_option("extra_float_digits", "3", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0,
								 false);
	if (bytea_output != BYTEA_OUTPUT_HEX)
		(void) set_config_option("bytea_output", "hex", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0,
								 false);
	if (!Array_nulls)
		(void) set_config_option("array_nulls", "on", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	/* SQL text printed here (literals of a router statement) quotes backslashes as the node reads them */
	if (!standard_conforming_strings)
		(void) set_config_option("standard_conforming_strings", "on", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE,
								 true, 0, false);
	if (xmloption != XMLOPTION_CONTENT)
		(void) set_config_option("xmloption", "content", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0,
								 false);
	/* a locale switch: only for values that involve money */
	if (money && strcmp(locale_monetary, "C") != 0)
		(void) set_config_option("lc_monetary", "C", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	return nestlevel;
}

void
remote_transmission_end(int nestlevel)
{
	AtEOXact_GUC(true, nestlevel);
}

/* The pg_type row of a type, or an ERROR. */
static HeapTuple
type_tuple(Oid typid)
{
	HeapTuple	tuple = SearchSysCache1(TYPEOID, ObjectIdGetDatum(typid));

	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for type %u", typid);
	return tuple;
}

/* Whether a built-in type's values are object identifiers, which mean other objects on another server. */
bool
remote_type_is_object_reference(Oid typid)
{
	switch (typid)
	{
		case REGCLASSOID:
		case REGTYPEOID:
		case REGPROCOID:
		case REGPROCEDUREOID:
		case REGOPEROID:
		case REGOPERATOROID:
		case REGNAMESPACEOID:
		case REGROLEOID:
		case REGCONFIGOID:
		case REGDICTIONARYOID:
		case REGCOLLATIONOID:
			return true;
		default:
			return false;
	}
}

static bool
binary_safe(Oid typid, int depth)
{
	HeapTuple	tuple;
	Form_pg_type t;
	bool		safe;

	if (depth > 16)
		return false;
	tuple = type_tuple(typid);
	t = (Form_pg_type) GETSTRUCT(tuple);
	if (t->typtype == TYPTYPE_DOMAIN)
		safe = binary_safe(t->typbasetype, depth + 1);	/* its values are its base type's */
	else if (t->typtype == TYPTYPE_ENUM)
		safe = true;			/* sent as the label's text */
	else if (!OidIsValid(t->typsend) || !OidIsValid(t->typreceive) || typid >= FirstGenbkiObjectId ||
			 t->typtype == TYPTYPE_PSEUDO || t->typtype == TYPTYPE_COMPOSITE || remote_type_is_object_reference(typid))
		safe = false;			/* an extension's type, a row (its binary form names column types), an OID of an object */
	else if (OidIsValid(t->typelem) && t->typsubscript == F_ARRAY_SUBSCRIPT_HANDLER)
		/* an array's binary form names its element type: it must be the same type everywhere */
		safe = t->typelem < FirstGenbkiObjectId && binary_safe(t->typelem, depth + 1);
	else
		safe = true;
	ReleaseSysCache(tuple);
	return safe;
}

bool
remote_type_binary_safe(Oid typid)
{
	return binary_safe(typid, 0);
}

/*
 * Whether a type's text involves money (lc_monetary), or any text input that
 * depends on settings: arrays (array_nulls), xml (xmloption), and rows and
 * ranges of such types.
 */
static void
text_dependence(Oid typid, int depth, bool *money, bool *needs_pin)
{
	HeapTuple	tuple;
	Form_pg_type t;

	if (depth > 16)
	{
		*needs_pin = true;
		return;
	}
	if (typid == CASHOID)
	{
		*money = *needs_pin = true;
		return;
	}
	if (typid == XMLOID)
		*needs_pin = true;
	tuple = type_tuple(typid);
	t = (Form_pg_type) GETSTRUCT(tuple);
	if (t->typtype == TYPTYPE_DOMAIN)
		text_dependence(t->typbasetype, depth + 1, money, needs_pin);
	else if (OidIsValid(t->typelem) && t->typsubscript == F_ARRAY_SUBSCRIPT_HANDLER)
	{
		*needs_pin = true;
		text_dependence(t->typelem, depth + 1, money, needs_pin);
	}
	else if (t->typtype == TYPTYPE_RANGE || t->typtype == TYPTYPE_MULTIRANGE)
	{
		TypeCacheEntry *cache = lookup_type_cache(typid, TYPECACHE_RANGE_INFO | TYPECACHE_MULTIRANGE_INFO);
		TypeCacheEntry *range = t->typtype == TYPTYPE_MULTIRANGE ? cache->rngtype : cache;

		if (range && range->rngelemtype)
			text_dependence(range->rngelemtype->type_id, depth + 1, money, needs_pin);
	}
	else if (t->typtype == TYPTYPE_COMPOSITE || typid == RECORDOID)
	{
		*needs_pin = true;
		if (OidIsValid(t->typrelid))
		{
			TupleDesc	desc = lookup_rowtype_tupdesc(typid, -1);

			for (int i = 0; i < desc->natts; i++)
				if (!TupleDescAttr(desc, i)->attisdropped)
					text_dependence(TupleDescAttr(desc, i)->atttypid, depth + 1, money, needs_pin);
			ReleaseTupleDesc(desc);
		}
		else
			*money = true;		/* an anonymous record: anything may be in it */
	}
	ReleaseSysCache(tuple);
}

bool
remote_type_involves_money(Oid typid)
{
	bool		money = false;
	bool		needs_pin = false;

	text_dependence(typid, 0, &money, &needs_pin);
	return money;
}

void
remote_codec_init(RemoteCodec *codec, Oid typid, int32 typmod, bool want_binary)
{
	Oid			output;
	Oid			input;
	bool		varlena;

	memset(codec, 0, sizeof(*codec));
	codec->typid = typid;
	codec->typmod = typmod;
	codec->binary = want_binary && remote_type_binary_safe(typid);
	text_dependence(typid, 0, &codec->money, &codec->text_needs_pin);
	if (codec->binary)
	{
		getTypeBinaryOutputInfo(typid, &output, &varlena);
		getTypeBinaryInputInfo(typid, &input, &codec->ioparam);
	}
	else
	{
		getTypeOutputInfo(typid, &output, &varlena);
		getTypeInputInfo(typid, &input, &codec->ioparam);
	}
	fmgr_info(output, &codec->output);
	fmgr_info(input, &codec->input);
}

RemoteCodec *
remote_codecs_for_desc(TupleDesc desc, bool want_binary, bool *all_binary)
{
	RemoteCodec *codecs = palloc0(sizeof(RemoteCodec) * Max(desc->natts, 1));

	if (all_binary)
		*all_binary = true;
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute attr = TupleDescAttr(desc, i);

		if (attr->attisdropped)
			continue;
		remote_codec_init(&codecs[i], attr->atttypid, attr->atttypmod, want_binary);
		if (all_binary && !codecs[i].binary)
			*all_binary = false;
	}
	return codecs;
}

/* Names what was being decoded when a node's value turns out malformed. */
typedef struct DecodeContext
{
	const char *node;
	Oid			typid;
	bool		binary;
} DecodeContext;

static void
decode_error_context(void *arg)
{
	DecodeContext *ctx = arg;

	errcontext("%s value of type %s from node \"%s\"", ctx->binary ? "binary" : "text",
			   format_type_be(ctx->typid), ctx->node ? ctx->node : "?");
}

Datum
remote_codec_decode(RemoteCodec *codec, const char *data, int len, const char *node)
{
	ErrorContextCallback callback;
	DecodeContext ctx = {node, codec->typid, codec->binary};
	Datum		value;

	callback.callback = decode_error_context;
	callback.arg = &ctx;
	callback.previous = error_context_stack;
	error_context_stack = &callback;
	if (codec->binary)
	{
		StringInfoData buf;

		/* libpq ends every value with a NUL, as a StringInfo's data must be */
		buf.data = (char *) data;
		buf.len = len;
		buf.maxlen = len + 1;
		buf.cursor = 0;
		value = ReceiveFunctionCall(&codec->input, &buf, codec->ioparam, codec->typmod);
		if (buf.cursor != buf.len)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
					 errmsg("incorrect binary data format: %d bytes left over", buf.len - buf.cursor)));
	}
	else if (codec->text_needs_pin)
	{
		int			level = remote_transmission_begin(codec->money);

		value = InputFunctionCall(&codec->input, (char *) data, codec->ioparam, codec->typmod);
		remote_transmission_end(level);
	}
	else
		value = InputFunctionCall(&codec->input, (char *) data, codec->ioparam, codec->typmod);
	error_context_stack = callback.previous;
	return value;
}

char *
remote_value_text(Oid typid, Datum value, bool pin)
{
	Oid			output;
	bool		varlena;
	char	   *text;
	int			level = 0;

	getTypeOutputInfo(typid, &output, &varlena);
	if (pin)
		level = remote_transmission_begin(remote_type_involves_money(typid));
	text = OidOutputFunctionCall(output, value);
	if (pin)
		remote_transmission_end(level);
	return text;
}

static void
append_int16(StringInfo buf, int16 value)
{
	uint16		n = pg_hton16((uint16) value);

	appendBinaryStringInfo(buf, (char *) &n, 2);
}

static void
append_int32(StringInfo buf, int32 value)
{
	uint32		n = pg_hton32((uint32) value);

	appendBinaryStringInfo(buf, (char *) &n, 4);
}

void
remote_copy_binary_header(StringInfo buf)
{
	static const char signature[11] = "PGCOPY\n\377\r\n\0";

	appendBinaryStringInfo(buf, signature, 11);
	append_int32(buf, 0);		/* flags: no OIDs */
	append_int32(buf, 0);		/* no header extension */
}

void
remote_copy_binary_row(StringInfo buf, RemoteCodec *codecs, TupleDesc desc, Datum *values, bool *isnull)
{
	int			nlive = 0;

	for (int i = 0; i < desc->natts; i++)
		nlive += !TupleDescAttr(desc, i)->attisdropped;
	append_int16(buf, (int16) nlive);
	for (int i = 0; i < desc->natts; i++)
	{
		bytea	   *bytes;

		if (TupleDescAttr(desc, i)->attisdropped)
			continue;
		if (isnull[i])
		{
			append_int32(buf, -1);
			continue;
		}
		bytes = SendFunctionCall(&codecs[i].output, values[i]);
		append_int32(buf, (int32) (VARSIZE(bytes) - VARHDRSZ));
		appendBinaryStringInfo(buf, VARDATA(bytes), VARSIZE(bytes) - VARHDRSZ);
	}
}

void
remote_copy_binary_trailer(StringInfo buf)
{
	append_int16(buf, -1);
}

/* A value in COPY text format: the characters COPY reads specially, escaped. */
static void
append_copy_text(StringInfo buf, const char *value)
{
	static const char special[] = "\\\t\n\r";
	static const char escaped[] = "\\tnr";	/* each after a backslash */

	for (const char *c = value; *c; c++)
	{
		const char *s = strchr(special, *c);

		if (s != NULL)
		{
			appendStringInfoChar(buf, '\\');
			appendStringInfoChar(buf, escaped[s - special]);
		}
		else
			appendStringInfoChar(buf, *c);
	}
}

void
remote_copy_text_row(StringInfo buf, RemoteCodec *codecs, TupleDesc desc, Datum *values, bool *isnull)
{
	bool		first = true;

	for (int i = 0; i < desc->natts; i++)
	{
		if (TupleDescAttr(desc, i)->attisdropped)
			continue;
		if (!first)
			appendStringInfoChar(buf, '\t');
		first = false;
		if (isnull[i])
			appendStringInfoString(buf, "\\N");
		else
			append_copy_text(buf, OutputFunctionCall(&codecs[i].output, values[i]));
	}
	appendStringInfoChar(buf, '\n');
}

/*
 * values.h
 *		How values cross the link to a node, exactly (docs/design.md,
 *		"Values across the link").
 *
 * A value bound for a node, or read from one, never depends on the
 * session's settings.  Where a type's binary form is the same on every
 * server (built-in types, enums, domains over them, arrays of built-in
 * types), values travel in binary: COPY ... (FORMAT binary) for writes, a
 * binary cursor for fan-out reads.  Elsewhere they travel as text, printed
 * and parsed with the settings that text forms depend on pinned to fixed
 * values on both sides (postgres_fdw's set_transmission_modes): the node's
 * session is pinned when it connects (connection.c), ours around every
 * conversion (remote_transmission_begin/end).
 */
#ifndef RINGSHARD_REMOTE_VALUES_H
#define RINGSHARD_REMOTE_VALUES_H

#include "postgres.h"

#include "access/tupdesc.h"
#include "fmgr.h"
#include "lib/stringinfo.h"

/*
 * The settings both sides pin, as libpq startup options for the node's
 * session: text forms of dates, times, intervals, floats, bytea, money,
 * arrays and XML are then read and written the same way everywhere.
 */
#define REMOTE_PINNED_SETTINGS \
	"-c DateStyle=ISO -c IntervalStyle=postgres -c extra_float_digits=3 -c bytea_output=hex " \
	"-c lc_monetary=C -c xmloption=content -c array_nulls=on -c standard_conforming_strings=on"

/*
 * Pin our side for text conversions; returns the GUC nest level to pass to
 * remote_transmission_end (which also runs if an error unwinds the
 * transaction).  Settings already at their pinned values cost nothing; with
 * money, lc_monetary is pinned too (a locale switch, so only when needed).
 */
extern int	remote_transmission_begin(bool money);
extern void remote_transmission_end(int nestlevel);

/* Whether values of a type may travel in binary: the same bytes mean the same value on every node. */
extern bool remote_type_binary_safe(Oid typid);

/* Whether a type's values are object identifiers (regclass, ...), which mean other objects on another server. */
extern bool remote_type_is_object_reference(Oid typid);

/* Whether a type's text form involves money (so lc_monetary must be pinned). */
extern bool remote_type_involves_money(Oid typid);

/* How one column's values are encoded and decoded. */
typedef struct RemoteCodec
{
	Oid			typid;
	int32		typmod;
	bool		binary;			/* binary send/receive, else text output/input */
	bool		money;			/* text form depends on lc_monetary */
	bool		text_needs_pin; /* its text input depends on settings (arrays, money, xml, ...) */
	Oid			ioparam;
	FmgrInfo	output;			/* typsend (binary) or typoutput */
	FmgrInfo	input;			/* typreceive (binary) or typinput */
} RemoteCodec;

/* Set a codec up for a type; binary only when asked for and the type is binary-safe. */
extern void remote_codec_init(RemoteCodec *codec, Oid typid, int32 typmod, bool want_binary);

/* The codecs of a tuple descriptor's live columns (dropped ones are left zeroed); *all_binary if every one is. */
extern RemoteCodec *remote_codecs_for_desc(TupleDesc desc, bool want_binary, bool *all_binary);

/*
 * Decode a value a node sent, in the codec's format (binary: all its bytes
 * must be consumed; text: parsed under pinned settings when the type needs
 * them).  A malformed value is an ERROR naming the node.
 */
extern Datum remote_codec_decode(RemoteCodec *codec, const char *data, int len, const char *node);

/* The text form of a value under pinned settings (the caller pins, or pass pin = true). */
extern char *remote_value_text(Oid typid, Datum value, bool pin);

/* Binary COPY: the header, one row (the slot's values, dropped columns skipped), the trailer. */
extern void remote_copy_binary_header(StringInfo buf);
extern void remote_copy_binary_row(StringInfo buf, RemoteCodec *codecs, TupleDesc desc, Datum *values,
								   bool *isnull);
extern void remote_copy_binary_trailer(StringInfo buf);

/* Text COPY: one row, printed under pinned settings (the caller pins). */
extern void remote_copy_text_row(StringInfo buf, RemoteCodec *codecs, TupleDesc desc, Datum *values,
								 bool *isnull);

#endif							/* RINGSHARD_REMOTE_VALUES_H */

/*
 * rs_config.c
 *		Parse and write the YAML partition-map config.
 *
 * Parsing walks libyaml's event stream (never the document loader) with a
 * small hand-written descent that knows the one shape allowed:
 *
 *		stream > one document > mapping {version, nodes}
 *		nodes > sequence of mappings {address, partition_start, partition_end}
 *
 * It takes two passes over the events.  The first only checks that the whole
 * text is YAML and has no anchors or aliases, so a syntax error is reported
 * as such wherever it is, and no alias is ever followed (alias bombs cost
 * nothing).  The second refuses anything else at the first event that does
 * not fit the shape, so deep nesting is a wrong-type error, not a recursion.
 * Entries are appended to the output as they are read; every failure path
 * frees them, so the caller sees either a complete config or an empty one.
 */
#include "rs_config.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#if defined(__GNUC__) || defined(__clang__)
#define RS_CONFIG_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define RS_CONFIG_PRINTF(fmt, args)
#endif

/*
 * How deep the first pass follows nesting.  The valid shape is three levels
 * deep, so anything deeper is a wrong-type error the second pass finds within
 * its first four levels; the first pass gives up there rather than walk a
 * megabyte of brackets, which costs libyaml time quadratic in the depth.
 */
#define SYNTAX_CHECK_MAX_DEPTH 64

/* How many bytes of a user-supplied value a message quotes at most. */
#define SHOWN_VALUE_SIZE 96

/* The parse in progress: libyaml's state, the current event, where to report. */
typedef struct config_reader
{
	yaml_parser_t parser;
	yaml_event_t event;
	bool		parser_ready;	/* parser needs yaml_parser_delete */
	bool		event_ready;	/* event needs yaml_event_delete */
	const char *text;
	size_t		len;
	rs_config_error *err;
} config_reader;

/* A growing output buffer for rs_config_format. */
typedef struct text_builder
{
	char	   *data;
	size_t		len;
	size_t		cap;
} text_builder;

static void set_error_v(rs_config_error *err, int line, int column, const char *field,
						const char *fmt, va_list args) RS_CONFIG_PRINTF(5, 0);

/*
 * Fill *err, truncating whatever does not fit: the one body of set_error and
 * set_error_at, which differ only in how the position is given.
 */
static void
set_error_v(rs_config_error *err, int line, int column, const char *field,
			const char *fmt, va_list args)
{
	err->line = line;
	err->column = column;
	snprintf(err->field, sizeof(err->field), "%s", field ? field : "");
	vsnprintf(err->message, sizeof(err->message), fmt, args);
}

static void set_error(rs_config_error *err, int line, int column, const char *field,
					  const char *fmt,...) RS_CONFIG_PRINTF(5, 6);

/* Fill *err at a 1-based line and column (0, 0: no position). */
static void
set_error(rs_config_error *err, int line, int column, const char *field,
		  const char *fmt,...)
{
	va_list		args;

	va_start(args, fmt);
	set_error_v(err, line, column, field, fmt, args);
	va_end(args);
}

/* Fill *err at a libyaml mark (0-based) as 1-based line and column. */
static void set_error_at(rs_config_error *err, yaml_mark_t mark, const char *field,
						 const char *fmt,...) RS_CONFIG_PRINTF(4, 5);

static void
set_error_at(rs_config_error *err, yaml_mark_t mark, const char *field,
			 const char *fmt,...)
{
	va_list		args;

	va_start(args, fmt);
	set_error_v(err, (int) mark.line + 1, (int) mark.column + 1, field, fmt, args);
	va_end(args);
}

/*
 * Decode one strictly valid UTF-8 sequence (no overlongs, surrogates or code
 * points past U+10FFFF); returns its length, or 0 if s does not start one.
 */
static size_t
utf8_decode(const unsigned char *s, size_t len, uint32_t *code_point)
{
	uint32_t	cp;
	size_t		need;
	size_t		i;

	if (len == 0)
		return 0;
	if (s[0] < 0x80)
	{
		*code_point = s[0];
		return 1;
	}
	else if (s[0] >= 0xC2 && s[0] <= 0xDF)
	{
		cp = s[0] & 0x1F;
		need = 2;
	}
	else if (s[0] >= 0xE0 && s[0] <= 0xEF)
	{
		cp = s[0] & 0x0F;
		need = 3;
	}
	else if (s[0] >= 0xF0 && s[0] <= 0xF4)
	{
		cp = s[0] & 0x07;
		need = 4;
	}
	else
		return 0;
	if (len < need)
		return 0;
	for (i = 1; i < need; i++)
	{
		if ((s[i] & 0xC0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3F);
	}
	if ((need == 3 && cp < 0x800) || (need == 4 && cp < 0x10000) ||
		cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
		return 0;
	*code_point = cp;
	return need;
}

/*
 * May this code point appear raw inside a double-quoted YAML scalar and come
 * back unchanged?  Not for the quote and backslash, anything libyaml's reader
 * refuses, and the characters YAML treats as line breaks or a BOM.
 */
static bool
is_safe_in_double_quotes(uint32_t cp)
{
	if (cp == '"' || cp == '\\')
		return false;
	if (cp >= 0x20 && cp <= 0x7E)
		return true;
	if (cp >= 0xA0 && cp <= 0xD7FF)
		return cp != 0x2028 && cp != 0x2029;
	if (cp >= 0xE000 && cp <= 0xFFFD)
		return cp != 0xFEFF;
	return cp >= 0x10000 && cp <= 0x10FFFF;
}

/*
 * Render user bytes for a message or a field name: printable text (UTF-8
 * included) as is, quotes and backslashes escaped, other bytes as \xNN, cut
 * with "..." so the result (always valid UTF-8, one line) fits in dstsize (at
 * least 4) bytes.
 */
static void
describe_bytes(char *dst, size_t dstsize, const char *src, size_t len)
{
	const unsigned char *bytes = (const unsigned char *) src;
	size_t		in = 0;
	size_t		out = 0;

	while (in < len)
	{
		char		unit[8];
		size_t		unitlen;
		size_t		consumed;
		size_t		room = dstsize - 1 - out;
		uint32_t	cp;
		bool		last;

		if (bytes[in] == '"' || bytes[in] == '\\')
		{
			unit[0] = '\\';
			unit[1] = (char) bytes[in];
			unitlen = 2;
			consumed = 1;
		}
		else if (bytes[in] >= 0x20 && bytes[in] < 0x7F)
		{
			unit[0] = (char) bytes[in];
			unitlen = 1;
			consumed = 1;
		}
		else if (bytes[in] >= 0x80 &&
				 (consumed = utf8_decode(bytes + in, len - in, &cp)) > 0 &&
				 is_safe_in_double_quotes(cp))
		{
			memcpy(unit, bytes + in, consumed);
			unitlen = consumed;
		}
		else
		{
			snprintf(unit, sizeof(unit), "\\x%02x", bytes[in]);
			unitlen = 4;
			consumed = 1;
		}

		/* Keep room for "..." until the last unit is known to fit. */
		last = (in + consumed == len);
		if (unitlen > room || (!last && unitlen + 3 > room))
		{
			memcpy(dst + out, "...", 3);
			out += 3;
			break;
		}
		memcpy(dst + out, unit, unitlen);
		out += unitlen;
		in += consumed;
	}
	dst[out] = '\0';
}

/* Shorthand: render a scalar event's value into a SHOWN_VALUE_SIZE buffer. */
static void
describe_scalar(char *dst, const yaml_event_t *event)
{
	describe_bytes(dst, SHOWN_VALUE_SIZE, (const char *) event->data.scalar.value,
				   event->data.scalar.length);
}

/* Does a scalar event hold YAML's null (empty, ~ or null, unquoted)? */
static bool
scalar_is_null(const yaml_event_t *event)
{
	const char *value = (const char *) event->data.scalar.value;
	size_t		len = event->data.scalar.length;

	if (event->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return false;
	return len == 0 ||
		(len == 1 && value[0] == '~') ||
		(len == 4 && (memcmp(value, "null", 4) == 0 ||
					  memcmp(value, "Null", 4) == 0 ||
					  memcmp(value, "NULL", 4) == 0));
}

/* Name the kind of node an event starts, for wrong-type messages. */
static const char *
describe_node_kind(const yaml_event_t *event)
{
	switch (event->type)
	{
		case YAML_SCALAR_EVENT:
			return scalar_is_null(event) ? "null" : "a scalar";
		case YAML_SEQUENCE_START_EVENT:
			return "a sequence";
		case YAML_MAPPING_START_EVENT:
			return "a mapping";
		default:
			return "nothing";
	}
}

/* Does a scalar event's value equal the NUL-terminated word exactly? */
static bool
scalar_equals(const yaml_event_t *event, const char *word)
{
	size_t		wordlen = strlen(word);

	return event->data.scalar.length == wordlen &&
		memcmp(event->data.scalar.value, word, wordlen) == 0;
}

/*
 * Turn a byte offset into 1-based line and column the way libyaml counts them
 * (columns in characters), for reader errors, which carry only an offset.
 */
static void
offset_to_position(const char *text, size_t len, size_t offset, int *line, int *column)
{
	size_t		i;
	int			l = 1;
	int			c = 1;

	if (offset > len)
		offset = len;
	for (i = 0; i < offset; i++)
	{
		unsigned char ch = (unsigned char) text[i];

		if (ch == '\n' || (ch == '\r' && (i + 1 >= len || text[i + 1] != '\n')))
		{
			l++;
			c = 1;
		}
		else if (ch != '\r' && (ch & 0xC0) != 0x80)
			c++;
	}
	*line = l;
	*column = c;
}

/* Report libyaml's own failure (reader, scanner, parser or memory). */
static rs_status
report_yaml_failure(config_reader *reader)
{
	yaml_parser_t *parser = &reader->parser;
	const char *problem = parser->problem ? parser->problem : "invalid YAML";

	switch (parser->error)
	{
		case YAML_MEMORY_ERROR:
			set_error(reader->err, 0, 0, "", "out of memory");
			return RS_ERR_NOMEM;
		case YAML_READER_ERROR:
			{
				int			line;
				int			column;

				offset_to_position(reader->text, reader->len,
								   parser->problem_offset, &line, &column);
				set_error(reader->err, line, column, "", "%s", problem);
				return RS_ERR_SYNTAX;
			}
		default:
			if (parser->context)
				set_error_at(reader->err, parser->problem_mark, "", "%s %s",
							 problem, parser->context);
			else
				set_error_at(reader->err, parser->problem_mark, "", "%s", problem);
			return RS_ERR_SYNTAX;
	}
}

/* Start libyaml on the text (from its beginning) for one pass. */
static rs_status
reader_open(config_reader *reader)
{
	if (!yaml_parser_initialize(&reader->parser))
	{
		set_error(reader->err, 0, 0, "", "out of memory");
		return RS_ERR_NOMEM;
	}
	reader->parser_ready = true;
	yaml_parser_set_input_string(&reader->parser,
								 (const unsigned char *) reader->text, reader->len);
	yaml_parser_set_encoding(&reader->parser, YAML_UTF8_ENCODING);
	return RS_OK;
}

/* Release whatever libyaml still holds; safe to call twice. */
static void
reader_close(config_reader *reader)
{
	if (reader->event_ready)
		yaml_event_delete(&reader->event);
	reader->event_ready = false;
	if (reader->parser_ready)
		yaml_parser_delete(&reader->parser);
	reader->parser_ready = false;
}

/* Advance to the next event, dropping the current one. */
static rs_status
reader_next(config_reader *reader)
{
	if (reader->event_ready)
	{
		yaml_event_delete(&reader->event);
		reader->event_ready = false;
	}
	if (!yaml_parser_parse(&reader->parser, &reader->event))
		return report_yaml_failure(reader);
	reader->event_ready = true;
	return RS_OK;
}

/* The anchor an event carries, if any (aliases count as carrying one). */
static const yaml_char_t *
event_anchor(const yaml_event_t *event)
{
	switch (event->type)
	{
		case YAML_ALIAS_EVENT:
			return event->data.alias.anchor;
		case YAML_SCALAR_EVENT:
			return event->data.scalar.anchor;
		case YAML_SEQUENCE_START_EVENT:
			return event->data.sequence_start.anchor;
		case YAML_MAPPING_START_EVENT:
			return event->data.mapping_start.anchor;
		default:
			return NULL;
	}
}

/*
 * First pass over the whole stream: is it YAML at all, and free of anchors
 * and aliases?  A syntax error anywhere wins over everything else (libyaml
 * streams events, so without this pass a structural complaint about an early
 * value could hide a broken document); then the first anchor or alias, so no
 * alias is ever followed and an alias bomb is named for what it is.  Nesting
 * past SYNTAX_CHECK_MAX_DEPTH ends the pass early, leaving the rest of the
 * text to the second pass, which refuses it as the wrong type.
 */
static rs_status
check_syntax_and_anchors(config_reader *reader)
{
	rs_status	status;
	bool		found_anchor = false;
	yaml_mark_t anchor_mark = {0, 0, 0};
	int			depth = 0;

	if ((status = reader_open(reader)) != RS_OK)
		return status;
	for (;;)
	{
		if ((status = reader_next(reader)) != RS_OK)
			break;
		if (reader->event.type == YAML_STREAM_END_EVENT)
			break;
		if (reader->event.type == YAML_SEQUENCE_START_EVENT ||
			reader->event.type == YAML_MAPPING_START_EVENT)
		{
			if (++depth > SYNTAX_CHECK_MAX_DEPTH)
				break;
		}
		else if (reader->event.type == YAML_SEQUENCE_END_EVENT ||
				 reader->event.type == YAML_MAPPING_END_EVENT)
			depth--;
		if (!found_anchor &&
			(reader->event.type == YAML_ALIAS_EVENT ||
			 event_anchor(&reader->event) != NULL))
		{
			found_anchor = true;
			anchor_mark = reader->event.start_mark;
		}
	}
	reader_close(reader);
	if (status == RS_OK && found_anchor)
	{
		set_error_at(reader->err, anchor_mark, "",
					 "aliases and anchors are not allowed");
		status = RS_ERR_INVALID;
	}
	return status;
}

/* Refuse a key that is not a scalar; field names must be plain text. */
static rs_status
check_key_is_scalar(config_reader *reader, const char *owner)
{
	if (reader->event.type == YAML_SCALAR_EVENT)
		return RS_OK;
	set_error_at(reader->err, reader->event.start_mark, owner,
				 "field names must be scalars, got %s",
				 describe_node_kind(&reader->event));
	return RS_ERR_INVALID;
}

/*
 * Report that the current event starts the wrong kind of node: "<subject>
 * must be <expected>, got <kind>", at the event, under field.
 */
static rs_status
report_wrong_kind(config_reader *reader, const char *field, const char *subject,
				  const char *expected)
{
	set_error_at(reader->err, reader->event.start_mark, field,
				 "%s must be %s, got %s", subject, expected,
				 describe_node_kind(&reader->event));
	return RS_ERR_INVALID;
}

/*
 * Note that the mapping key just read (name, reported under field) has been
 * seen; a second time is a duplicate field.
 */
static rs_status
mark_field_seen(config_reader *reader, const char *field, const char *name, bool *seen)
{
	if (*seen)
	{
		set_error_at(reader->err, reader->event.start_mark, field,
					 "duplicate field \"%s\"", name);
		return RS_ERR_DUPLICATE;
	}
	*seen = true;
	return RS_OK;
}

/* Report a key that the format does not know, naming it in field and message. */
static rs_status
report_unknown_field(config_reader *reader, const char *prefix)
{
	char		field[sizeof(reader->err->field)];
	char		shown[SHOWN_VALUE_SIZE];
	size_t		prefixlen;

	prefixlen = (size_t) snprintf(field, sizeof(field), "%s", prefix);
	if (prefixlen > sizeof(field) - 4)
		prefixlen = sizeof(field) - 4;
	describe_bytes(field + prefixlen, sizeof(field) - prefixlen,
				   (const char *) reader->event.data.scalar.value,
				   reader->event.data.scalar.length);
	describe_scalar(shown, &reader->event);
	set_error_at(reader->err, reader->event.start_mark, field,
				 "unknown field \"%s\"", shown);
	return RS_ERR_INVALID;
}

/* Read the value of "version": the scalar v1 in any quoting. */
static rs_status
read_version(config_reader *reader)
{
	rs_status	status;
	char		shown[SHOWN_VALUE_SIZE];

	if ((status = reader_next(reader)) != RS_OK)
		return status;
	if (reader->event.type != YAML_SCALAR_EVENT)
		return report_wrong_kind(reader, "version", "version", "a string");
	if (!scalar_equals(&reader->event, "v1"))
	{
		describe_scalar(shown, &reader->event);
		set_error_at(reader->err, reader->event.start_mark, "version",
					 "unsupported version \"%s\"; expected \"v1\"", shown);
		return RS_ERR_INVALID;
	}
	return RS_OK;
}

/* Read an address value: a non-empty scalar without NUL bytes, copied out. */
static rs_status
read_address(config_reader *reader, const char *field, char **address)
{
	rs_status	status;
	const yaml_event_t *event = &reader->event;
	size_t		len;

	if ((status = reader_next(reader)) != RS_OK)
		return status;
	if (event->type != YAML_SCALAR_EVENT)
		return report_wrong_kind(reader, field, "address", "a string");
	len = event->data.scalar.length;
	if (len == 0)
	{
		set_error_at(reader->err, event->start_mark, field,
					 "address must not be empty");
		return RS_ERR_INVALID;
	}
	/*
	 * A plain ~ or null is YAML's null, not an address named "null" (the
	 * empty scalar, null too, was refused just above).
	 */
	if (scalar_is_null(event))
	{
		set_error_at(reader->err, event->start_mark, field,
					 "address must not be null");
		return RS_ERR_INVALID;
	}
	if (memchr(event->data.scalar.value, '\0', len) != NULL)
	{
		set_error_at(reader->err, event->start_mark, field,
					 "address must not contain a NUL byte");
		return RS_ERR_INVALID;
	}
	if (len > RS_CONFIG_MAX_ADDRESS_BYTES)
	{
		set_error_at(reader->err, event->start_mark, field,
					 "address is %zu bytes long, over the limit of %d",
					 len, RS_CONFIG_MAX_ADDRESS_BYTES);
		return RS_ERR_TOO_LARGE;
	}
	*address = malloc(len + 1);
	if (*address == NULL)
	{
		set_error(reader->err, 0, 0, "", "out of memory");
		return RS_ERR_NOMEM;
	}
	memcpy(*address, event->data.scalar.value, len);
	(*address)[len] = '\0';
	return RS_OK;
}

/*
 * Read a partition number: an unquoted decimal integer (optional sign, no
 * leading zeros, which YAML 1.1 would read as octal) within 0..255.
 */
static rs_status
read_partition(config_reader *reader, const char *name, const char *field,
			   int *value, yaml_mark_t *mark)
{
	rs_status	status;
	const yaml_event_t *event = &reader->event;
	const char *text;
	size_t		len;
	size_t		i;
	size_t		digits_at;
	long		number = 0;
	bool		negative = false;
	char		shown[SHOWN_VALUE_SIZE];

	if ((status = reader_next(reader)) != RS_OK)
		return status;
	if (event->type != YAML_SCALAR_EVENT || scalar_is_null(event))
		return report_wrong_kind(reader, field, name, "an integer");
	*mark = event->start_mark;
	text = (const char *) event->data.scalar.value;
	len = event->data.scalar.length;
	describe_scalar(shown, event);

	if (event->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
	{
		set_error_at(reader->err, event->start_mark, field,
					 "%s must be an integer, got the string \"%s\"", name, shown);
		return RS_ERR_INVALID;
	}
	digits_at = (len > 0 && (text[0] == '+' || text[0] == '-')) ? 1 : 0;
	negative = (digits_at == 1 && text[0] == '-');
	for (i = digits_at; i < len; i++)
		if (text[i] < '0' || text[i] > '9')
			break;
	if (digits_at == len || i < len)
	{
		set_error_at(reader->err, event->start_mark, field,
					 "%s must be an integer, got \"%s\"", name, shown);
		return RS_ERR_INVALID;
	}
	if (text[digits_at] == '0' && len - digits_at > 1)
	{
		set_error_at(reader->err, event->start_mark, field,
					 "%s must be a decimal integer without leading zeros, got \"%s\"",
					 name, shown);
		return RS_ERR_INVALID;
	}
	for (i = digits_at; i < len && number <= RS_CONFIG_PARTITION_MAX; i++)
		number = number * 10 + (text[i] - '0');
	if ((negative && number != 0) || number > RS_CONFIG_PARTITION_MAX)
	{
		set_error_at(reader->err, event->start_mark, field,
					 "%s %s is outside 0..%d", name, shown, RS_CONFIG_PARTITION_MAX);
		return RS_ERR_OUT_OF_RANGE;
	}
	*value = (int) number;
	return RS_OK;
}

/* Make room for one more entry at the end of the config and zero it. */
static rs_status
append_entry(config_reader *reader, rs_config *config, size_t *capacity,
			 rs_config_entry **entry)
{
	if (config->nentries == *capacity)
	{
		size_t		newcap = *capacity ? *capacity * 2 : 8;
		rs_config_entry *grown;

		if (newcap > RS_CONFIG_MAX_NODES)
			newcap = RS_CONFIG_MAX_NODES;
		grown = realloc(config->entries, newcap * sizeof(rs_config_entry));
		if (grown == NULL)
		{
			set_error(reader->err, 0, 0, "", "out of memory");
			return RS_ERR_NOMEM;
		}
		config->entries = grown;
		*capacity = newcap;
	}
	*entry = &config->entries[config->nentries++];
	memset(*entry, 0, sizeof(**entry));
	return RS_OK;
}

/*
 * Read one element of "nodes" (the current event starts it) into a new entry.
 * The entry joins the config before its fields are read, so a failure half
 * way leaves nothing the caller's rs_config_free would miss.
 */
static rs_status
read_node(config_reader *reader, rs_config *config, size_t *capacity)
{
	rs_status	status;
	rs_config_entry *entry;
	size_t		index = config->nentries;
	char		owner[32];
	char		field[64];
	yaml_mark_t mapping_mark = reader->event.start_mark;
	yaml_mark_t start_mark = mapping_mark;
	yaml_mark_t end_mark = mapping_mark;
	bool		seen_address = false;
	bool		seen_start = false;
	bool		seen_end = false;

	snprintf(owner, sizeof(owner), "nodes[%zu]", index);
	if (reader->event.type != YAML_MAPPING_START_EVENT)
		return report_wrong_kind(reader, owner, owner, "a mapping");
	if ((status = append_entry(reader, config, capacity, &entry)) != RS_OK)
		return status;

	for (;;)
	{
		const char *name;
		bool	   *seen;

		if ((status = reader_next(reader)) != RS_OK)
			return status;
		if (reader->event.type == YAML_MAPPING_END_EVENT)
			break;
		if ((status = check_key_is_scalar(reader, owner)) != RS_OK)
			return status;
		if (entry->line == 0)
			entry->line = (int) reader->event.start_mark.line + 1;

		if (scalar_equals(&reader->event, "address"))
		{
			name = "address";
			seen = &seen_address;
		}
		else if (scalar_equals(&reader->event, "partition_start"))
		{
			name = "partition_start";
			seen = &seen_start;
		}
		else if (scalar_equals(&reader->event, "partition_end"))
		{
			name = "partition_end";
			seen = &seen_end;
		}
		else
		{
			char		prefix[40];

			snprintf(prefix, sizeof(prefix), "%s.", owner);
			return report_unknown_field(reader, prefix);
		}

		snprintf(field, sizeof(field), "%s.%s", owner, name);
		if ((status = mark_field_seen(reader, field, name, seen)) != RS_OK)
			return status;

		if (seen == &seen_address)
			status = read_address(reader, field, &entry->address);
		else if (seen == &seen_start)
			status = read_partition(reader, name, field, &entry->partition_start,
									&start_mark);
		else
			status = read_partition(reader, name, field, &entry->partition_end,
									&end_mark);
		if (status != RS_OK)
			return status;
	}

	if (!seen_address || !seen_start || !seen_end)
	{
		const char *missing = !seen_address ? "address" :
			!seen_start ? "partition_start" : "partition_end";

		snprintf(field, sizeof(field), "%s.%s", owner, missing);
		set_error_at(reader->err, mapping_mark, field,
					 "missing field \"%s\"", missing);
		return RS_ERR_INVALID;
	}
	if (entry->partition_start > entry->partition_end)
	{
		snprintf(field, sizeof(field), "%s.partition_end", owner);
		set_error_at(reader->err, end_mark, field,
					 "partition_start %d is greater than partition_end %d",
					 entry->partition_start, entry->partition_end);
		return RS_ERR_INVALID;
	}
	return RS_OK;
}

/* Read the value of "nodes": a sequence of node mappings, possibly empty. */
static rs_status
read_nodes(config_reader *reader, rs_config *config)
{
	rs_status	status;
	size_t		capacity = 0;

	if ((status = reader_next(reader)) != RS_OK)
		return status;
	if (reader->event.type != YAML_SEQUENCE_START_EVENT)
		return report_wrong_kind(reader, "nodes", "nodes", "a sequence");
	for (;;)
	{
		if ((status = reader_next(reader)) != RS_OK)
			return status;
		if (reader->event.type == YAML_SEQUENCE_END_EVENT)
			return RS_OK;
		if (config->nentries >= RS_CONFIG_MAX_NODES)
		{
			set_error_at(reader->err, reader->event.start_mark, "nodes",
						 "more than %d nodes", RS_CONFIG_MAX_NODES);
			return RS_ERR_TOO_LARGE;
		}
		if ((status = read_node(reader, config, &capacity)) != RS_OK)
			return status;
	}
}

/* Read the root mapping (the current event starts it): version and nodes. */
static rs_status
read_root(config_reader *reader, rs_config *config)
{
	rs_status	status;
	yaml_mark_t mapping_mark = reader->event.start_mark;
	bool		seen_version = false;
	bool		seen_nodes = false;

	if (reader->event.type != YAML_MAPPING_START_EVENT)
		return report_wrong_kind(reader, "", "the document", "a mapping");
	for (;;)
	{
		if ((status = reader_next(reader)) != RS_OK)
			return status;
		if (reader->event.type == YAML_MAPPING_END_EVENT)
			break;
		if ((status = check_key_is_scalar(reader, "")) != RS_OK)
			return status;

		if (scalar_equals(&reader->event, "version"))
		{
			if ((status = mark_field_seen(reader, "version", "version",
										  &seen_version)) == RS_OK)
				status = read_version(reader);
		}
		else if (scalar_equals(&reader->event, "nodes"))
		{
			if ((status = mark_field_seen(reader, "nodes", "nodes",
										  &seen_nodes)) == RS_OK)
				status = read_nodes(reader, config);
		}
		else
			status = report_unknown_field(reader, "");
		if (status != RS_OK)
			return status;
	}
	if (!seen_version || !seen_nodes)
	{
		const char *missing = !seen_version ? "version" : "nodes";

		set_error_at(reader->err, mapping_mark, missing,
					 "missing field \"%s\"", missing);
		return RS_ERR_INVALID;
	}
	return RS_OK;
}

/* Read the whole stream: exactly one document holding the root mapping. */
static rs_status
read_stream(config_reader *reader, rs_config *config)
{
	rs_status	status;

	if ((status = reader_next(reader)) != RS_OK)	/* stream start */
		return status;
	if ((status = reader_next(reader)) != RS_OK)
		return status;
	if (reader->event.type == YAML_STREAM_END_EVENT)
	{
		set_error(reader->err, 0, 0, "", "the config is empty");
		return RS_ERR_INVALID;
	}
	/* The only other event libyaml emits here is a document start. */
	if ((status = reader_next(reader)) != RS_OK)
		return status;
	if ((status = read_root(reader, config)) != RS_OK)
		return status;
	if ((status = reader_next(reader)) != RS_OK)	/* document end */
		return status;
	if ((status = reader_next(reader)) != RS_OK)
		return status;
	if (reader->event.type != YAML_STREAM_END_EVENT)
	{
		set_error_at(reader->err, reader->event.start_mark, "",
					 "expected a single document, found another");
		return RS_ERR_INVALID;
	}
	return RS_OK;
}

/* Parse a config document; see rs_config.h. */
rs_status
rs_config_parse(const char *text, size_t len, rs_config *out, rs_config_error *err)
{
	rs_config_error scratch;
	config_reader reader;
	rs_status	status;

	if (err == NULL)
		err = &scratch;
	memset(err, 0, sizeof(*err));
	if (out == NULL)
	{
		set_error(err, 0, 0, "", "no config to fill was given");
		return RS_ERR_INVALID;
	}
	out->entries = NULL;
	out->nentries = 0;
	if (text == NULL && len > 0)
	{
		set_error(err, 0, 0, "", "no config text was given");
		return RS_ERR_INVALID;
	}
	if (len > RS_CONFIG_MAX_BYTES)
	{
		set_error(err, 0, 0, "", "the config is %zu bytes, over the limit of %d",
				  len, RS_CONFIG_MAX_BYTES);
		return RS_ERR_TOO_LARGE;
	}

	/*
	 * The text is UTF-8 by definition (NUL bytes, and so UTF-16, are syntax
	 * errors); skip a UTF-8 byte order mark ourselves, as libyaml only does
	 * that when left to guess the encoding.
	 */
	memset(&reader, 0, sizeof(reader));
	reader.text = text ? text : "";
	reader.len = len;
	reader.err = err;
	if (len >= 3 && memcmp(reader.text, "\xEF\xBB\xBF", 3) == 0)
	{
		reader.text += 3;
		reader.len -= 3;
	}

	status = check_syntax_and_anchors(&reader);
	if (status == RS_OK)
		status = reader_open(&reader);
	if (status == RS_OK)
		status = read_stream(&reader, out);
	reader_close(&reader);
	if (status != RS_OK)
		rs_config_free(out);
	return status;
}

/* Free a parsed config and leave it empty. */
void
rs_config_free(rs_config *config)
{
	size_t		i;

	if (config == NULL)
		return;
	for (i = 0; i < config->nentries; i++)
		free(config->entries[i].address);
	free(config->entries);
	config->entries = NULL;
	config->nentries = 0;
}

/* Append bytes to the output, refusing to grow past the document cap. */
static rs_status
builder_append(text_builder *builder, const char *bytes, size_t len)
{
	if (len > RS_CONFIG_MAX_BYTES - builder->len)
		return RS_ERR_TOO_LARGE;
	if (builder->len + len + 1 > builder->cap)
	{
		size_t		newcap = builder->cap ? builder->cap : 256;
		char	   *grown;

		while (newcap < builder->len + len + 1)
			newcap *= 2;
		grown = realloc(builder->data, newcap);
		if (grown == NULL)
			return RS_ERR_NOMEM;
		builder->data = grown;
		builder->cap = newcap;
	}
	memcpy(builder->data + builder->len, bytes, len);
	builder->len += len;
	builder->data[builder->len] = '\0';
	return RS_OK;
}

/* Append a NUL-terminated string to the output. */
static rs_status
builder_append_str(text_builder *builder, const char *str)
{
	return builder_append(builder, str, strlen(str));
}

/*
 * The escape of a character that cannot stand as itself in a double-quoted
 * YAML scalar: its short form if it has one, else its code point in hex.
 */
static void
yaml_escape(uint32_t cp, char *escape, size_t size)
{
	static const struct
	{
		uint32_t	cp;
		const char *escape;
	}			short_escapes[] = {
		{'"', "\\\""},
		{'\\', "\\\\"},
		{'\t', "\\t"},
		{'\n', "\\n"},
		{'\r', "\\r"},
	};

	for (size_t i = 0; i < sizeof(short_escapes) / sizeof(short_escapes[0]); i++)
		if (short_escapes[i].cp == cp)
		{
			snprintf(escape, size, "%s", short_escapes[i].escape);
			return;
		}
	if (cp <= 0xFF)
		snprintf(escape, size, "\\x%02X", (unsigned) cp);
	else if (cp <= 0xFFFF)
		snprintf(escape, size, "\\u%04X", (unsigned) cp);
	else
		snprintf(escape, size, "\\U%08X", (unsigned) cp);
}

/* Append an address as a double-quoted YAML scalar; refuses non-UTF-8. */
static rs_status
append_quoted_address(text_builder *builder, const char *address, size_t len)
{
	const unsigned char *bytes = (const unsigned char *) address;
	rs_status	status;
	size_t		i = 0;

	if ((status = builder_append(builder, "\"", 1)) != RS_OK)
		return status;
	while (i < len)
	{
		uint32_t	cp;
		size_t		seqlen = utf8_decode(bytes + i, len - i, &cp);
		char		escape[16];

		if (seqlen == 0)
			return RS_ERR_INVALID;
		if (is_safe_in_double_quotes(cp))
			status = builder_append(builder, address + i, seqlen);
		else
		{
			yaml_escape(cp, escape, sizeof(escape));
			status = builder_append_str(builder, escape);
		}
		if (status != RS_OK)
			return status;
		i += seqlen;
	}
	return builder_append(builder, "\"", 1);
}

/* Check that an entry would parse back as itself. */
static rs_status
check_entry_for_format(const rs_config_entry *entry)
{
	size_t		len;

	if (entry->address == NULL)
		return RS_ERR_INVALID;
	len = strlen(entry->address);
	if (len == 0)
		return RS_ERR_INVALID;
	if (len > RS_CONFIG_MAX_ADDRESS_BYTES)
		return RS_ERR_TOO_LARGE;
	if (entry->partition_start < 0 || entry->partition_start > RS_CONFIG_PARTITION_MAX ||
		entry->partition_end < 0 || entry->partition_end > RS_CONFIG_PARTITION_MAX)
		return RS_ERR_OUT_OF_RANGE;
	if (entry->partition_start > entry->partition_end)
		return RS_ERR_INVALID;
	return RS_OK;
}

/* Write entries as a config document; see rs_config.h. */
rs_status
rs_config_format(const rs_config_entry *entries, size_t nentries,
				 char **out, size_t *outlen)
{
	text_builder builder = {NULL, 0, 0};
	rs_status	status;
	size_t		i;

	if (out == NULL || outlen == NULL)
		return RS_ERR_INVALID;
	*out = NULL;
	*outlen = 0;
	if (entries == NULL && nentries > 0)
		return RS_ERR_INVALID;
	if (nentries > RS_CONFIG_MAX_NODES)
		return RS_ERR_TOO_LARGE;
	for (i = 0; i < nentries; i++)
		if ((status = check_entry_for_format(&entries[i])) != RS_OK)
			return status;

	status = builder_append_str(&builder, nentries == 0 ?
								"version: \"v1\"\nnodes: []\n" :
								"version: \"v1\"\nnodes:\n");
	for (i = 0; i < nentries && status == RS_OK; i++)
	{
		char		numbers[96];

		status = builder_append_str(&builder, "- address: ");
		if (status == RS_OK)
			status = append_quoted_address(&builder, entries[i].address,
										   strlen(entries[i].address));
		if (status == RS_OK)
		{
			snprintf(numbers, sizeof(numbers),
					 "\n  partition_start: %d\n  partition_end: %d\n",
					 entries[i].partition_start, entries[i].partition_end);
			status = builder_append_str(&builder, numbers);
		}
	}
	if (status != RS_OK)
	{
		free(builder.data);
		return status;
	}
	*out = builder.data;
	*outlen = builder.len;
	return RS_OK;
}

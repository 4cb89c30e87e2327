/*
 * fuzz_config.c
 *		libFuzzer target for the YAML partition-map config (rs_config.c).
 *
 * Parses arbitrary bytes.  A failure must leave the output empty with a
 * status and message that make sense; a success must format, and the
 * formatted text must parse back to identical entries and format to the very
 * same text.  Anything else aborts.
 *
 * Build and run, e.g.:
 *	clang -g -O1 -fsanitize=fuzzer,address,undefined -Isrc/core \
 *		test/fuzz/fuzz_config.c src/core/rs_config.c src/core/rs_status.c \
 *		-lyaml -o /tmp/fuzz_config
 *	/tmp/fuzz_config -runs=200000 test/fuzz/corpus/config
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rs_config.h"

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Stop the run loudly, saying which invariant broke. */
static void
fail(const char *why)
{
	fprintf(stderr, "fuzz_config: %s\n", why);
	abort();
}

/* A failed parse must leave a clean, well-formed error behind. */
static void
check_failure(rs_status status, const rs_config *config, const rs_config_error *err)
{
	size_t		msglen = strnlen(err->message, sizeof(err->message));

	if (status != RS_ERR_NOMEM && status != RS_ERR_SYNTAX && status != RS_ERR_INVALID &&
		status != RS_ERR_OUT_OF_RANGE && status != RS_ERR_TOO_LARGE &&
		status != RS_ERR_DUPLICATE)
		fail("unexpected status");
	if (config->entries != NULL || config->nentries != 0)
		fail("output not left empty after a failure");
	if (msglen == 0 || msglen == sizeof(err->message))
		fail("message empty or not terminated");
	if (strnlen(err->field, sizeof(err->field)) == sizeof(err->field))
		fail("field not terminated");
	if (err->line < 0 || err->column < 0)
		fail("negative position");
}

/* Entries from a successful parse must obey the documented ranges. */
static void
check_entries(const rs_config *config)
{
	size_t		i;

	if (config->nentries > RS_CONFIG_MAX_NODES)
		fail("too many entries");
	if (config->nentries > 0 && config->entries == NULL)
		fail("entries missing");
	for (i = 0; i < config->nentries; i++)
	{
		const rs_config_entry *entry = &config->entries[i];
		size_t		len;

		if (entry->address == NULL)
			fail("null address");
		len = strlen(entry->address);
		if (len == 0 || len > RS_CONFIG_MAX_ADDRESS_BYTES)
			fail("address length out of bounds");
		if (entry->partition_start < 0 || entry->partition_end > 255 ||
			entry->partition_start > entry->partition_end)
			fail("partition range out of bounds");
		if (entry->line < 1)
			fail("entry without a line");
	}
}

/* Parse, format, re-parse, compare. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	rs_config	first = {NULL, 0};
	rs_config	second = {NULL, 0};
	rs_config_error err;
	rs_status	status;
	char	   *text = NULL;
	char	   *again = NULL;
	size_t		textlen = 0;
	size_t		againlen = 0;
	size_t		i;

	status = rs_config_parse((const char *) data, size, &first, &err);
	if (status != RS_OK)
	{
		check_failure(status, &first, &err);
		return 0;
	}
	check_entries(&first);

	status = rs_config_format(first.entries, first.nentries, &text, &textlen);
	if (status == RS_ERR_TOO_LARGE)
	{
		/* escapes may make a parsed document grow past the cap: fine */
		if (text != NULL || size < RS_CONFIG_MAX_BYTES / 4)
			fail("format refused a small document as too large");
		rs_config_free(&first);
		return 0;
	}
	if (status != RS_OK || text == NULL || strlen(text) != textlen)
		fail("format failed on parsed entries");

	status = rs_config_parse(text, textlen, &second, &err);
	if (status != RS_OK)
	{
		fprintf(stderr, "re-parse: %d:%d %s: %s\n%s\n", err.line, err.column,
				err.field, err.message, text);
		fail("formatted text does not parse");
	}
	if (second.nentries != first.nentries)
		fail("round trip changed the number of entries");
	for (i = 0; i < first.nentries; i++)
	{
		if (strcmp(first.entries[i].address, second.entries[i].address) != 0)
			fail("round trip changed an address");
		if (first.entries[i].partition_start != second.entries[i].partition_start ||
			first.entries[i].partition_end != second.entries[i].partition_end)
			fail("round trip changed a partition range");
		if (second.entries[i].line != (int) (3 + 3 * i))
			fail("formatted entry on an unexpected line");
	}

	status = rs_config_format(second.entries, second.nentries, &again, &againlen);
	if (status != RS_OK || againlen != textlen || memcmp(text, again, textlen) != 0)
		fail("formatting is not stable");

	free(again);
	free(text);
	rs_config_free(&second);
	rs_config_free(&first);
	return 0;
}

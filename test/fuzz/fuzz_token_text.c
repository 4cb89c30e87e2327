/*
 * fuzz_token_text.c
 *		libFuzzer target for rs_token_parse and rs_token_format.
 *
 * For every input it checks that
 *	- rs_token_parse agrees (status and value) with an independent oracle
 *	  built on a separate scanner and strtoull;
 *	- a parsed value formats as printf's %PRIu64 would, and the formatted
 *	  text parses back to the same value.
 * Any disagreement aborts.
 *
 * Build and run, for example:
 *	clang -g -O1 -fsanitize=fuzzer,address,undefined -Isrc/core \
 *		test/fuzz/fuzz_token_text.c src/core/rs_token_text.c src/core/rs_status.c \
 *		-o /tmp/fuzz_token_text
 *	/tmp/fuzz_token_text -max_total_time=60 test/fuzz/corpus/token_text
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rs_token_text.h"

/* Inputs longer than this are only checked for not crashing. */
#define ORACLE_MAX_LEN 4096

/* Report a disagreement and abort so that libFuzzer keeps the input. */
static void
fail(const char *what, const uint8_t *data, size_t size)
{
	size_t		i;

	fprintf(stderr, "fuzz_token_text: %s; input (%zu bytes):", what, size);
	for (i = 0; i < size && i < 64; i++)
		fprintf(stderr, " %02x", data[i]);
	fputc('\n', stderr);
	abort();
}

/* ASCII whitespace as the grammar defines it, written out independently. */
static int
oracle_is_space(uint8_t c)
{
	return memchr(" \t\n\v\f\r", c, 6) != NULL;
}

/* Whether every one of the n bytes is a digit of the base (10 or 16). */
static int
oracle_all_digits(const char *s, size_t n, int base)
{
	static const char decimal[] = "0123456789";
	static const char hex[] = "0123456789abcdefABCDEF";
	const char *set = (base == 16) ? hex : decimal;
	size_t		i;

	for (i = 0; i < n; i++)
		if (s[i] == '\0' || strchr(set, s[i]) == NULL)
			return 0;
	return 1;
}

/*
 * Classify the input the slow, obvious way: trim, peel off a sign and a
 * prefix, insist the rest is digits, and let strtoull compute the value.
 */
static rs_status
oracle_parse(const uint8_t *data, size_t size, uint64_t *out)
{
	size_t		start = 0;
	size_t		end = size;
	int			negative = 0;
	int			base = 10;
	char	   *digits;
	char	   *endptr;
	size_t		ndigits;
	unsigned long long value;
	int			overflow;

	while (start < end && oracle_is_space(data[start]))
		start++;
	while (end > start && oracle_is_space(data[end - 1]))
		end--;

	if (start < end && (data[start] == '-' || data[start] == '+'))
	{
		negative = (data[start] == '-');
		start++;
	}
	if (end - start >= 2 && data[start] == '0' && (data[start + 1] | 0x20) == 'x')
	{
		base = 16;
		start += 2;
	}

	ndigits = end - start;
	if (ndigits == 0 || !oracle_all_digits((const char *) data + start, ndigits, base))
		return RS_ERR_SYNTAX;

	digits = malloc(ndigits + 1);
	if (digits == NULL)
		abort();
	memcpy(digits, data + start, ndigits);
	digits[ndigits] = '\0';

	errno = 0;
	value = strtoull(digits, &endptr, base);
	overflow = (errno == ERANGE);
	if (*endptr != '\0')
		fail("oracle: strtoull stopped early", data, size);
	free(digits);

	if (overflow || (negative && value != 0))
		return RS_ERR_OUT_OF_RANGE;
	*out = (uint64_t) value;
	return RS_OK;
}

/* Format value, compare with printf, and parse it back. */
static void
check_format_round_trip(uint64_t value, const uint8_t *data, size_t size)
{
	char		formatted[RS_TOKEN_TEXT_MAX];
	char		expected[32];
	size_t		len;
	uint64_t	reparsed = 0;

	len = rs_token_format(value, formatted);
	snprintf(expected, sizeof(expected), "%" PRIu64, value);
	if (len != strlen(expected) || strcmp(formatted, expected) != 0)
		fail("rs_token_format disagrees with printf", data, size);
	if (rs_token_parse(formatted, len, &reparsed) != RS_OK)
		fail("formatted value does not parse", data, size);
	if (reparsed != value)
		fail("formatted value parses to a different value", data, size);
}

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t	value = 0;
	uint64_t	oracle_value = 0;
	rs_status	status;
	rs_status	oracle_status;

	status = rs_token_parse((const char *) data, size, &value);
	if (status != RS_OK && status != RS_ERR_SYNTAX && status != RS_ERR_OUT_OF_RANGE)
		fail("unexpected status", data, size);

	if (size <= ORACLE_MAX_LEN)
	{
		oracle_status = oracle_parse(data, size, &oracle_value);
		if (status != oracle_status)
			fail("status differs from the oracle", data, size);
		if (status == RS_OK && value != oracle_value)
			fail("value differs from the oracle", data, size);
	}

	if (status == RS_OK)
		check_format_round_trip(value, data, size);

	/* the bytes of the input as a number also format and parse back */
	if (size >= sizeof(uint64_t))
	{
		uint64_t	raw;

		memcpy(&raw, data, sizeof(raw));
		check_format_round_trip(raw, data, size);
	}

	return 0;
}

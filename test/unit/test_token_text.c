/*
 * test_token_text.c
 *		Unit tests for rs_token_parse and rs_token_format.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "rs_token_text.h"
#include "unit.h"

/* Marker left in the output variable so tests can see it was not written. */
#define UNTOUCHED UINT64_C(0xDEADBEEFDEADBEEF)

/* Parse a NUL-terminated string; the parsed value (or UNTOUCHED) goes to *out. */
static rs_status
parse_str(const char *text, uint64_t *out)
{
	*out = UNTOUCHED;
	return rs_token_parse(text, strlen(text), out);
}

/* Check that text parses to want. */
#define EXPECT_VALUE(text, want) \
	do { \
		uint64_t	got_; \
		UNIT_EQ_INT(parse_str((text), &got_), RS_OK); \
		UNIT_EQ_U64(got_, (want)); \
	} while (0)

/* Check that text fails with the given status and leaves the output alone. */
#define EXPECT_STATUS(text, want_status) \
	do { \
		uint64_t	got_; \
		UNIT_EQ_INT(parse_str((text), &got_), (want_status)); \
		UNIT_EQ_U64(got_, UNTOUCHED); \
	} while (0)

/* Decimal input, including both ends of the range and leading zeros. */
static void
test_decimal(void)
{
	EXPECT_VALUE("0", 0);
	EXPECT_VALUE("1", 1);
	EXPECT_VALUE("42", 42);
	EXPECT_VALUE("007", 7);
	EXPECT_VALUE("00000000000000000000000000000000000000000", 0);
	EXPECT_VALUE("4294967295", UINT64_C(4294967295));
	EXPECT_VALUE("4294967296", UINT64_C(4294967296));
	EXPECT_VALUE("9223372036854775807", UINT64_C(9223372036854775807));
	EXPECT_VALUE("9223372036854775808", UINT64_C(9223372036854775808));
	EXPECT_VALUE("18446744073709551614", UINT64_C(18446744073709551614));
	EXPECT_VALUE("18446744073709551615", UINT64_MAX);
	EXPECT_VALUE("000018446744073709551615", UINT64_MAX);
	EXPECT_VALUE("+5", 5);
	EXPECT_VALUE("+18446744073709551615", UINT64_MAX);
}

/* Hexadecimal input: prefixes, case, leading zeros and the top of the range. */
static void
test_hex(void)
{
	EXPECT_VALUE("0x0", 0);
	EXPECT_VALUE("0X0", 0);
	EXPECT_VALUE("0x2a", 42);
	EXPECT_VALUE("0x2A", 42);
	EXPECT_VALUE("0XaBcDeF", UINT64_C(0xABCDEF));
	EXPECT_VALUE("0x8000000000000000", UINT64_C(0x8000000000000000));
	EXPECT_VALUE("0xffffffffffffffff", UINT64_MAX);
	EXPECT_VALUE("0xFFFFFFFFFFFFFFFF", UINT64_MAX);
	/* 17 digits with a leading zero still fits */
	EXPECT_VALUE("0x0ffffffffffffffff", UINT64_MAX);
	EXPECT_VALUE("0x00000000000000000000000000000001", 1);
	EXPECT_VALUE("0x0123456789abcdef", UINT64_C(0x0123456789ABCDEF));
	EXPECT_VALUE("+0x10", 16);
}

/* Leading and trailing ASCII whitespace is ignored; inner whitespace is not. */
static void
test_whitespace(void)
{
	EXPECT_VALUE(" 1", 1);
	EXPECT_VALUE("1 ", 1);
	EXPECT_VALUE("  \t\n\v\f\r123\r\f\v\n\t  ", 123);
	EXPECT_VALUE("\t0x10\n", 16);
	EXPECT_VALUE(" 18446744073709551615 ", UINT64_MAX);
	EXPECT_STATUS("1 2", RS_ERR_SYNTAX);
	EXPECT_STATUS("0x 1", RS_ERR_SYNTAX);
	EXPECT_STATUS("0 x1", RS_ERR_SYNTAX);
	EXPECT_STATUS("- 1", RS_ERR_SYNTAX);
	EXPECT_STATUS("+ 1", RS_ERR_SYNTAX);
	EXPECT_STATUS("12 34", RS_ERR_SYNTAX);
}

/* Values above 2^64 - 1, in either base, are out of range. */
static void
test_too_large(void)
{
	EXPECT_STATUS("18446744073709551616", RS_ERR_OUT_OF_RANGE);
	EXPECT_STATUS("18446744073709551620", RS_ERR_OUT_OF_RANGE);
	EXPECT_STATUS("99999999999999999999", RS_ERR_OUT_OF_RANGE);
	EXPECT_STATUS("184467440737095516150", RS_ERR_OUT_OF_RANGE);
	EXPECT_STATUS("100000000000000000000000000000000000000", RS_ERR_OUT_OF_RANGE);
	/* 17 significant hex digits */
	EXPECT_STATUS("0x10000000000000000", RS_ERR_OUT_OF_RANGE);
	EXPECT_STATUS("0x1ffffffffffffffff", RS_ERR_OUT_OF_RANGE);
	EXPECT_STATUS("0xffffffffffffffff0", RS_ERR_OUT_OF_RANGE);
	EXPECT_STATUS(" 0x10000000000000000 ", RS_ERR_OUT_OF_RANGE);
}

/* Negative values are out of range, but minus zero is zero. */
static void
test_negative(void)
{
	EXPECT_STATUS("-1", RS_ERR_OUT_OF_RANGE);
	EXPECT_STATUS("-0x1", RS_ERR_OUT_OF_RANGE);
	EXPECT_STATUS("-18446744073709551615", RS_ERR_OUT_OF_RANGE);
	EXPECT_STATUS("-18446744073709551616", RS_ERR_OUT_OF_RANGE);
	EXPECT_STATUS("-9223372036854775808", RS_ERR_OUT_OF_RANGE);
	EXPECT_STATUS(" -1 ", RS_ERR_OUT_OF_RANGE);
	EXPECT_VALUE("-0", 0);
	EXPECT_VALUE("-0x0", 0);
	EXPECT_VALUE("-000", 0);
}

/* Every kind of malformed text is a syntax error. */
static void
test_syntax_errors(void)
{
	EXPECT_STATUS("", RS_ERR_SYNTAX);
	EXPECT_STATUS(" ", RS_ERR_SYNTAX);
	EXPECT_STATUS(" \t\n ", RS_ERR_SYNTAX);
	EXPECT_STATUS("abc", RS_ERR_SYNTAX);
	EXPECT_STATUS("12x", RS_ERR_SYNTAX);
	EXPECT_STATUS("x12", RS_ERR_SYNTAX);
	EXPECT_STATUS("0x", RS_ERR_SYNTAX);
	EXPECT_STATUS("0X", RS_ERR_SYNTAX);
	EXPECT_STATUS(" 0x ", RS_ERR_SYNTAX);
	EXPECT_STATUS("0xg", RS_ERR_SYNTAX);
	EXPECT_STATUS("0x1g", RS_ERR_SYNTAX);
	EXPECT_STATUS("00x1", RS_ERR_SYNTAX);
	EXPECT_STATUS("0x0x1", RS_ERR_SYNTAX);
	EXPECT_STATUS("x", RS_ERR_SYNTAX);
	EXPECT_STATUS("+", RS_ERR_SYNTAX);
	EXPECT_STATUS("-", RS_ERR_SYNTAX);
	EXPECT_STATUS("+-1", RS_ERR_SYNTAX);
	EXPECT_STATUS("-+1", RS_ERR_SYNTAX);
	EXPECT_STATUS("--1", RS_ERR_SYNTAX);
	EXPECT_STATUS("++1", RS_ERR_SYNTAX);
	EXPECT_STATUS("1-", RS_ERR_SYNTAX);
	EXPECT_STATUS("1+", RS_ERR_SYNTAX);
	EXPECT_STATUS("1.0", RS_ERR_SYNTAX);
	EXPECT_STATUS("1.", RS_ERR_SYNTAX);
	EXPECT_STATUS(".5", RS_ERR_SYNTAX);
	EXPECT_STATUS("1e3", RS_ERR_SYNTAX);
	EXPECT_STATUS("1_000", RS_ERR_SYNTAX);
	EXPECT_STATUS("1,000", RS_ERR_SYNTAX);
	EXPECT_STATUS("0b101", RS_ERR_SYNTAX);
	EXPECT_STATUS("0o17", RS_ERR_SYNTAX);
	EXPECT_STATUS("abcdef", RS_ERR_SYNTAX);
	EXPECT_STATUS("ff", RS_ERR_SYNTAX);
	EXPECT_STATUS("NaN", RS_ERR_SYNTAX);
	EXPECT_STATUS("infinity", RS_ERR_SYNTAX);
	EXPECT_STATUS("\xd9\xa1", RS_ERR_SYNTAX);	/* ARABIC-INDIC DIGIT ONE */
	EXPECT_STATUS("\xc2\xa0" "1", RS_ERR_SYNTAX);	/* NO-BREAK SPACE */
	/* malformed text stays a syntax error even when its digits overflow */
	EXPECT_STATUS("99999999999999999999x", RS_ERR_SYNTAX);
	EXPECT_STATUS("-99999999999999999999x", RS_ERR_SYNTAX);
	EXPECT_STATUS("0x10000000000000000g", RS_ERR_SYNTAX);
}

/* The length argument bounds the text; NUL bytes inside are syntax errors. */
static void
test_length_and_nul(void)
{
	uint64_t	value;

	value = UNTOUCHED;
	UNIT_EQ_INT(rs_token_parse("12345", 3, &value), RS_OK);
	UNIT_EQ_U64(value, 123);

	value = UNTOUCHED;
	UNIT_EQ_INT(rs_token_parse("0x1f", 3, &value), RS_OK);
	UNIT_EQ_U64(value, 1);

	value = UNTOUCHED;
	UNIT_EQ_INT(rs_token_parse("0x1f", 2, &value), RS_ERR_SYNTAX);
	UNIT_EQ_U64(value, UNTOUCHED);

	value = UNTOUCHED;
	UNIT_EQ_INT(rs_token_parse("7", 0, &value), RS_ERR_SYNTAX);
	UNIT_EQ_U64(value, UNTOUCHED);

	value = UNTOUCHED;
	UNIT_EQ_INT(rs_token_parse("1\0" "2", 3, &value), RS_ERR_SYNTAX);
	UNIT_EQ_U64(value, UNTOUCHED);

	value = UNTOUCHED;
	UNIT_EQ_INT(rs_token_parse("12\0", 3, &value), RS_ERR_SYNTAX);
	UNIT_EQ_U64(value, UNTOUCHED);

	value = UNTOUCHED;
	UNIT_EQ_INT(rs_token_parse("\0" "12", 3, &value), RS_ERR_SYNTAX);
	UNIT_EQ_U64(value, UNTOUCHED);

	/* a buffer that is not NUL-terminated at all */
	{
		char		digits[3] = {'9', '9', '9'};

		value = UNTOUCHED;
		UNIT_EQ_INT(rs_token_parse(digits, sizeof(digits), &value), RS_OK);
		UNIT_EQ_U64(value, 999);
	}

	value = UNTOUCHED;
	UNIT_EQ_INT(rs_token_parse(NULL, 0, &value), RS_ERR_SYNTAX);
	UNIT_EQ_U64(value, UNTOUCHED);
}

/* Formatting writes plain decimal and returns its length. */
static void
test_format(void)
{
	static const struct
	{
		uint64_t	value;
		const char *text;
	}			cases[] = {
		{0, "0"},
		{1, "1"},
		{9, "9"},
		{10, "10"},
		{UINT64_C(4294967296), "4294967296"},
		{UINT64_C(9223372036854775807), "9223372036854775807"},
		{UINT64_C(9223372036854775808), "9223372036854775808"},
		{UINT64_C(10000000000000000000), "10000000000000000000"},
		{UINT64_MAX, "18446744073709551615"},
	};
	size_t		i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
	{
		char		buf[RS_TOKEN_TEXT_MAX];
		const char *formatted = buf;

		memset(buf, 'Z', sizeof(buf));
		UNIT_EQ_INT(rs_token_format(cases[i].value, buf), strlen(cases[i].text));
		UNIT_EQ_STR(formatted, cases[i].text);
	}

	/* the largest value needs exactly the whole buffer */
	{
		char		buf[RS_TOKEN_TEXT_MAX];

		UNIT_EQ_INT(rs_token_format(UINT64_MAX, buf), RS_TOKEN_TEXT_MAX - 1);
		UNIT_EQ_INT(buf[RS_TOKEN_TEXT_MAX - 1], '\0');
	}
}

/* Formatting then parsing gives back the same value. */
static void
test_round_trip(void)
{
	uint64_t	value = 1;
	int			i;

	/* powers of two, their neighbours, and a pseudo-random walk */
	for (i = 0; i < 64; i++)
	{
		uint64_t	samples[3];
		int			j;

		samples[0] = UINT64_C(1) << i;
		samples[1] = samples[0] - 1;
		samples[2] = samples[0] + 1;
		for (j = 0; j < 3; j++)
		{
			char		buf[RS_TOKEN_TEXT_MAX];
			size_t		len = rs_token_format(samples[j], buf);
			uint64_t	parsed = UNTOUCHED;

			UNIT_EQ_INT(rs_token_parse(buf, len, &parsed), RS_OK);
			UNIT_EQ_U64(parsed, samples[j]);
		}
	}

	for (i = 0; i < 1000; i++)
	{
		char		buf[RS_TOKEN_TEXT_MAX];
		char		hex[32];
		size_t		len;
		uint64_t	parsed = UNTOUCHED;

		value = value * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
		len = rs_token_format(value, buf);
		UNIT_EQ_INT(rs_token_parse(buf, len, &parsed), RS_OK);
		UNIT_EQ_U64(parsed, value);

		snprintf(hex, sizeof(hex), "0x%" PRIx64, value);
		parsed = UNTOUCHED;
		UNIT_EQ_INT(rs_token_parse(hex, strlen(hex), &parsed), RS_OK);
		UNIT_EQ_U64(parsed, value);
	}
}

int
main(void)
{
	test_decimal();
	test_hex();
	test_whitespace();
	test_too_large();
	test_negative();
	test_syntax_errors();
	test_length_and_nul();
	test_format();
	test_round_trip();
	return unit_report();
}

/*
 * test_keybytes.c
 *		Unit tests of the canonical key bytes of typed keys (rs_keybytes):
 *		every "Typed keys" vector of docs/routing.md §6, and the forms of
 *		§1 case by case.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rs_hash.h"
#include "rs_keybytes.h"
#include "unit.h"

/* Canonical numeric form of a NUL-terminated string, or NULL on error. */
static const char *
numeric(const char *text)
{
	static char out[256];
	size_t		len = 0;

	memset(out, 0x7F, sizeof(out));
	if (rs_keybytes_numeric(text, strlen(text), out, &len) != RS_OK)
		return NULL;
	UNIT_CHECK(len <= RS_KEYBYTES_NUMERIC_SIZE(strlen(text)) - 1, "form of \"%s\" is %zu bytes", text, len);
	out[len] = '\0';
	return out;
}

#define EXPECT_NUMERIC(text, want) UNIT_EQ_STR(numeric(text), (want))

/* UNIT_EQ_STR for a buffer (through a pointer: an array is never NULL). */
#define EXPECT_BUFFER(buf, want) \
	do { \
		const char *got_ = (buf); \
		UNIT_EQ_STR(got_, (want)); \
	} while (0)

/* The numeric form refuses text, and leaves the output untouched. */
#define EXPECT_NUMERIC_SYNTAX(text) \
	do { \
		char		out_[64] = "untouched"; \
		size_t		len_ = 12345; \
		UNIT_EQ_INT(rs_keybytes_numeric((text), strlen(text), out_, &len_), RS_ERR_SYNTAX); \
		EXPECT_BUFFER(out_, "untouched"); \
		UNIT_EQ_INT(len_, 12345); \
	} while (0)

/* Date or timestamp form of the given fields, or NULL on error. */
static const char *
datetime(int kind, int32_t year, int32_t month, int32_t day, int32_t hour, int32_t minute,
		 int32_t second, int32_t microsecond)
{
	static char buf[RS_KEYBYTES_DATETIME_MAX];
	rs_datetime dt = {year, month, day, hour, minute, second, microsecond};
	size_t		len = 0;
	rs_status	status;

	memset(buf, 0x7F, sizeof(buf));
	if (kind == 0)
		status = rs_keybytes_date(&dt, buf, &len);
	else
		status = rs_keybytes_timestamp(&dt, kind == 2, buf, &len);
	if (status != RS_OK)
	{
		UNIT_EQ_INT(status, RS_ERR_OUT_OF_RANGE);
		UNIT_CHECK(buf[0] == 0x7F, "buffer written on error");
		return NULL;
	}
	UNIT_EQ_INT(len, strlen(buf));
	UNIT_CHECK(len < RS_KEYBYTES_DATETIME_MAX, "form of %zu bytes", len);
	return buf;
}

#define DATE(y, m, d) datetime(0, (y), (m), (d), 0, 0, 0, 0)
#define TIMESTAMP(y, m, d, hh, mi, ss, us) datetime(1, (y), (m), (d), (hh), (mi), (ss), (us))
#define TIMESTAMPTZ(y, m, d, hh, mi, ss, us) datetime(2, (y), (m), (d), (hh), (mi), (ss), (us))

/* The MurmurHash3 token of a NUL-terminated string. */
static uint64_t
token(const char *bytes)
{
	return rs_murmur3_token(bytes, strlen(bytes));
}

/* §6 "Typed keys": the canonical bytes, then their token. */
static void
test_typed_key_vectors(void)
{
	static const uint8_t uuid[16] = {0xA0, 0xEE, 0xBC, 0x99, 0x9C, 0x0B, 0x4E, 0xF8,
	0xBB, 0x6D, 0x6B, 0xB9, 0xBD, 0x38, 0x0A, 0x11};
	char		buf[64];
	const char *form;

	/* 3201012345670001::numeric(16,0) */
	form = numeric("3201012345670001");
	UNIT_EQ_STR(form, "3201012345670001");
	UNIT_EQ_U64(token(form), UINT64_C(15884386775397619189));
	/* 1.50::numeric */
	form = numeric("1.50");
	UNIT_EQ_STR(form, "1.5");
	UNIT_EQ_U64(token(form), UINT64_C(13430490798912837064));
	/* '-0.000'::numeric */
	form = numeric("-0.000");
	UNIT_EQ_STR(form, "0");
	UNIT_EQ_U64(token(form), UINT64_C(3083240331115144064));
	/* 100::numeric */
	form = numeric("100");
	UNIT_EQ_STR(form, "100");
	UNIT_EQ_U64(token(form), UINT64_C(1040388282287204816));
	/* 'ab'::char(5): the stored 'ab   ' without its padding */
	UNIT_EQ_INT(rs_keybytes_trim_trailing_spaces("ab   ", 5), 2);
	UNIT_EQ_U64(rs_murmur3_token("ab   ", 2), UINT64_C(10631611042442844974));
	/* 'ab '::varchar is not trimmed: its token is of all three bytes */
	UNIT_EQ_U64(token("ab "), UINT64_C(12106934627464383385));
	/* 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'::uuid */
	UNIT_EQ_INT(rs_keybytes_uuid(uuid, buf), 36);
	EXPECT_BUFFER(buf, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11");
	UNIT_EQ_U64(token(buf), UINT64_C(1721996422960650214));
	/* true */
	UNIT_EQ_U64(token("t"), UINT64_C(7529381342917315814));
	/* '2026-01-31'::date */
	form = DATE(2026, 1, 31);
	UNIT_EQ_STR(form, "2026-01-31");
	UNIT_EQ_U64(token(form), UINT64_C(10225064195164002953));
	/* '2026-01-31 07:05:00.250'::timestamp */
	form = TIMESTAMP(2026, 1, 31, 7, 5, 0, 250000);
	UNIT_EQ_STR(form, "2026-01-31 07:05:00.25");
	UNIT_EQ_U64(token(form), UINT64_C(13515964068584293624));
	/* '2026-01-31 14:05:00+07'::timestamptz, read in UTC */
	form = TIMESTAMPTZ(2026, 1, 31, 7, 5, 0, 0);
	UNIT_EQ_STR(form, "2026-01-31 07:05:00+00");
	UNIT_EQ_U64(token(form), UINT64_C(14253869614036921824));
}

/* Numeric forms: zeros, signs, points, specials. */
static void
test_numeric(void)
{
	EXPECT_NUMERIC("0", "0");
	EXPECT_NUMERIC("-0", "0");
	EXPECT_NUMERIC("+0", "0");
	EXPECT_NUMERIC("0.000", "0");
	EXPECT_NUMERIC("-0.000", "0");
	EXPECT_NUMERIC("000", "0");
	EXPECT_NUMERIC(".0", "0");
	EXPECT_NUMERIC("0.", "0");
	EXPECT_NUMERIC("-.0", "0");
	EXPECT_NUMERIC("1", "1");
	EXPECT_NUMERIC("-1", "-1");
	EXPECT_NUMERIC("+1", "1");
	EXPECT_NUMERIC("1.5", "1.5");
	EXPECT_NUMERIC("1.50", "1.5");
	EXPECT_NUMERIC("1.500000000000000000000", "1.5");
	EXPECT_NUMERIC("01.5", "1.5");
	EXPECT_NUMERIC("-001.050", "-1.05");
	EXPECT_NUMERIC("100", "100");
	EXPECT_NUMERIC("100.00", "100");
	EXPECT_NUMERIC("100.", "100");
	EXPECT_NUMERIC("10.01", "10.01");
	EXPECT_NUMERIC(".5", "0.5");
	EXPECT_NUMERIC("-.5", "-0.5");
	EXPECT_NUMERIC("+.5", "0.5");
	EXPECT_NUMERIC("0.000001", "0.000001");
	EXPECT_NUMERIC("-0.0000010", "-0.000001");
	EXPECT_NUMERIC("123456789012345678901234567890.000001", "123456789012345678901234567890.000001");
	EXPECT_NUMERIC("-9223372036854775808", "-9223372036854775808");
	EXPECT_NUMERIC("NaN", "NaN");
	EXPECT_NUMERIC("nan", "NaN");
	EXPECT_NUMERIC("NAN", "NaN");
	EXPECT_NUMERIC("Infinity", "Infinity");
	EXPECT_NUMERIC("infinity", "Infinity");
	EXPECT_NUMERIC("+inf", "Infinity");
	EXPECT_NUMERIC("INF", "Infinity");
	EXPECT_NUMERIC("-Infinity", "-Infinity");
	EXPECT_NUMERIC("-inf", "-Infinity");
	/* the longest growth: "-inf" (4 bytes) becomes "-Infinity" (9) */
	UNIT_CHECK(9 <= RS_KEYBYTES_NUMERIC_SIZE(4) - 1, "size bound");
}

/* Text that is not a plain decimal number is refused. */
static void
test_numeric_syntax(void)
{
	EXPECT_NUMERIC_SYNTAX("");
	EXPECT_NUMERIC_SYNTAX("-");
	EXPECT_NUMERIC_SYNTAX("+");
	EXPECT_NUMERIC_SYNTAX(".");
	EXPECT_NUMERIC_SYNTAX("-.");
	EXPECT_NUMERIC_SYNTAX("1e5");
	EXPECT_NUMERIC_SYNTAX("1E-5");
	EXPECT_NUMERIC_SYNTAX(" 1");
	EXPECT_NUMERIC_SYNTAX("1 ");
	EXPECT_NUMERIC_SYNTAX("1.2.3");
	EXPECT_NUMERIC_SYNTAX("--1");
	EXPECT_NUMERIC_SYNTAX("+-1");
	EXPECT_NUMERIC_SYNTAX("1-");
	EXPECT_NUMERIC_SYNTAX("0x10");
	EXPECT_NUMERIC_SYNTAX("1,5");
	EXPECT_NUMERIC_SYNTAX("-NaN");
	EXPECT_NUMERIC_SYNTAX("+nan");
	EXPECT_NUMERIC_SYNTAX("infinit");
	EXPECT_NUMERIC_SYNTAX("infinityy");
	EXPECT_NUMERIC_SYNTAX("--inf");
	EXPECT_NUMERIC_SYNTAX("\xd9\xa1");	/* ARABIC-INDIC DIGIT ONE: digits are ASCII */

	/* a NUL byte inside the length is not a digit */
	{
		char		out[16];
		size_t		len;

		UNIT_EQ_INT(rs_keybytes_numeric("1\0002", 3, out, &len), RS_ERR_SYNTAX);
		UNIT_EQ_INT(rs_keybytes_numeric(NULL, 0, out, &len), RS_ERR_SYNTAX);
		/* only the given length is read */
		UNIT_EQ_INT(rs_keybytes_numeric("12x", 2, out, &len), RS_OK);
		UNIT_EQ_INT(len, 2);
	}
}

/* The form of a form is itself, and equal values written apart meet. */
static void
test_numeric_idempotent(void)
{
	static const char *const inputs[] = {
		"0", "-0.00", "1.50", "-001.050", ".5", "-.5", "100.", "NaN", "-inf", "+Infinity",
		"000123.456000", "99999999999999999999999999999999999999.99999999999999999999"
	};

	for (size_t i = 0; i < sizeof(inputs) / sizeof(inputs[0]); i++)
	{
		char		once[128];
		char		twice[128];
		size_t		len1 = 0;
		size_t		len2 = 0;

		UNIT_EQ_INT(rs_keybytes_numeric(inputs[i], strlen(inputs[i]), once, &len1), RS_OK);
		UNIT_EQ_INT(rs_keybytes_numeric(once, len1, twice, &len2), RS_OK);
		UNIT_CHECK(len1 == len2 && memcmp(once, twice, len1) == 0, "not idempotent for \"%s\"", inputs[i]);
	}
}

/* Dates: padding, BC years, large years, the calendar's own checks. */
static void
test_date(void)
{
	UNIT_EQ_STR(DATE(2026, 1, 31), "2026-01-31");
	UNIT_EQ_STR(DATE(1, 1, 1), "0001-01-01");
	UNIT_EQ_STR(DATE(5, 6, 7), "0005-06-07");
	UNIT_EQ_STR(DATE(999, 12, 31), "0999-12-31");
	UNIT_EQ_STR(DATE(10000, 1, 1), "10000-01-01");
	UNIT_EQ_STR(DATE(5874897, 12, 31), "5874897-12-31");
	/* astronomical year 0 is 1 BC, -43 is 44 BC, -4713 is 4714 BC */
	UNIT_EQ_STR(DATE(0, 1, 1), "0001-01-01 BC");
	UNIT_EQ_STR(DATE(-43, 3, 15), "0044-03-15 BC");
	UNIT_EQ_STR(DATE(-4713, 11, 24), "4714-11-24 BC");
	UNIT_EQ_STR(DATE(-9999, 1, 1), "10000-01-01 BC");
	UNIT_EQ_STR(DATE(RS_KEYBYTES_YEAR_MAX, 12, 31), "99999999-12-31");
	UNIT_EQ_STR(DATE(RS_KEYBYTES_YEAR_MIN, 1, 1), "99999999-01-01 BC");

	/* leap years, proleptic Gregorian; 1 BC (year 0) and 5 BC (-4) were */
	UNIT_EQ_STR(DATE(2000, 2, 29), "2000-02-29");
	UNIT_EQ_STR(DATE(2024, 2, 29), "2024-02-29");
	UNIT_EQ_STR(DATE(0, 2, 29), "0001-02-29 BC");
	UNIT_EQ_STR(DATE(-4, 2, 29), "0005-02-29 BC");
	UNIT_CHECK(DATE(1900, 2, 29) == NULL, "1900-02-29");
	UNIT_CHECK(DATE(2023, 2, 29) == NULL, "2023-02-29");
	UNIT_CHECK(DATE(-1, 2, 29) == NULL, "2 BC-02-29");
	UNIT_CHECK(DATE(-100, 2, 29) == NULL, "101 BC-02-29");

	/* out of range */
	UNIT_CHECK(DATE(2026, 0, 1) == NULL, "month 0");
	UNIT_CHECK(DATE(2026, 13, 1) == NULL, "month 13");
	UNIT_CHECK(DATE(2026, 1, 0) == NULL, "day 0");
	UNIT_CHECK(DATE(2026, 1, 32) == NULL, "day 32");
	UNIT_CHECK(DATE(2026, 4, 31) == NULL, "April 31");
	UNIT_CHECK(DATE(RS_KEYBYTES_YEAR_MAX + 1, 1, 1) == NULL, "year too large");
	UNIT_CHECK(DATE(RS_KEYBYTES_YEAR_MIN - 1, 1, 1) == NULL, "year too small");
	UNIT_CHECK(DATE(INT32_MIN, 1, 1) == NULL, "INT32_MIN");
	UNIT_CHECK(DATE(INT32_MAX, 1, 1) == NULL, "INT32_MAX");
	UNIT_CHECK(DATE(2026, INT32_MIN, 1) == NULL, "month INT32_MIN");
	UNIT_CHECK(DATE(2026, 1, INT32_MAX) == NULL, "day INT32_MAX");

	/* the time fields are not looked at */
	UNIT_EQ_STR(datetime(0, 2026, 1, 31, 99, -1, 77, -5), "2026-01-31");
}

/* Timestamps: fractions without trailing zeros, +00, BC after the offset. */
static void
test_timestamp(void)
{
	UNIT_EQ_STR(TIMESTAMP(2026, 1, 31, 7, 5, 0, 0), "2026-01-31 07:05:00");
	UNIT_EQ_STR(TIMESTAMP(2026, 1, 31, 7, 5, 0, 250000), "2026-01-31 07:05:00.25");
	UNIT_EQ_STR(TIMESTAMP(2026, 1, 31, 7, 5, 0, 500000), "2026-01-31 07:05:00.5");
	UNIT_EQ_STR(TIMESTAMP(2026, 1, 31, 7, 5, 0, 1), "2026-01-31 07:05:00.000001");
	UNIT_EQ_STR(TIMESTAMP(2026, 1, 31, 7, 5, 0, 10), "2026-01-31 07:05:00.00001");
	UNIT_EQ_STR(TIMESTAMP(2026, 1, 31, 7, 5, 0, 123456), "2026-01-31 07:05:00.123456");
	UNIT_EQ_STR(TIMESTAMP(2026, 1, 31, 7, 5, 0, 100100), "2026-01-31 07:05:00.1001");
	UNIT_EQ_STR(TIMESTAMP(2026, 1, 31, 23, 59, 59, 999999), "2026-01-31 23:59:59.999999");
	UNIT_EQ_STR(TIMESTAMP(2026, 1, 31, 0, 0, 0, 0), "2026-01-31 00:00:00");
	UNIT_EQ_STR(TIMESTAMP(0, 1, 1, 0, 0, 0, 0), "0001-01-01 00:00:00 BC");
	UNIT_EQ_STR(TIMESTAMP(-43, 3, 15, 12, 0, 0, 1), "0044-03-15 12:00:00.000001 BC");
	UNIT_EQ_STR(TIMESTAMP(294276, 12, 31, 23, 59, 59, 999999), "294276-12-31 23:59:59.999999");

	UNIT_EQ_STR(TIMESTAMPTZ(2026, 1, 31, 7, 5, 0, 0), "2026-01-31 07:05:00+00");
	UNIT_EQ_STR(TIMESTAMPTZ(2026, 1, 31, 7, 5, 0, 250000), "2026-01-31 07:05:00.25+00");
	/* PostgreSQL's ISO output in UTC: the offset, then the era */
	UNIT_EQ_STR(TIMESTAMPTZ(-43, 3, 15, 12, 0, 0, 0), "0044-03-15 12:00:00+00 BC");

	UNIT_CHECK(TIMESTAMP(2026, 1, 31, 24, 0, 0, 0) == NULL, "hour 24");
	UNIT_CHECK(TIMESTAMP(2026, 1, 31, -1, 0, 0, 0) == NULL, "hour -1");
	UNIT_CHECK(TIMESTAMP(2026, 1, 31, 0, 60, 0, 0) == NULL, "minute 60");
	UNIT_CHECK(TIMESTAMP(2026, 1, 31, 0, 0, 60, 0) == NULL, "second 60");
	UNIT_CHECK(TIMESTAMP(2026, 1, 31, 0, 0, 0, 1000000) == NULL, "microsecond 1000000");
	UNIT_CHECK(TIMESTAMP(2026, 1, 31, 0, 0, 0, -1) == NULL, "microsecond -1");
	UNIT_CHECK(TIMESTAMPTZ(2026, 2, 30, 0, 0, 0, 0) == NULL, "February 30");
}

/* Infinities, uuids, trimming. */
static void
test_other_forms(void)
{
	char		buf[RS_KEYBYTES_DATETIME_MAX];
	uint8_t		bytes[16];

	UNIT_EQ_INT(rs_keybytes_infinity(false, buf), 8);
	EXPECT_BUFFER(buf, "infinity");
	UNIT_EQ_INT(rs_keybytes_infinity(true, buf), 9);
	EXPECT_BUFFER(buf, "-infinity");

	memset(bytes, 0, sizeof(bytes));
	UNIT_EQ_INT(rs_keybytes_uuid(bytes, buf), 36);
	EXPECT_BUFFER(buf, "00000000-0000-0000-0000-000000000000");
	memset(bytes, 0xFF, sizeof(bytes));
	rs_keybytes_uuid(bytes, buf);
	EXPECT_BUFFER(buf, "ffffffff-ffff-ffff-ffff-ffffffffffff");
	for (int i = 0; i < 16; i++)
		bytes[i] = (uint8_t) (i * 17);
	rs_keybytes_uuid(bytes, buf);
	EXPECT_BUFFER(buf, "00112233-4455-6677-8899-aabbccddeeff");

	UNIT_EQ_INT(rs_keybytes_trim_trailing_spaces("ab", 2), 2);
	UNIT_EQ_INT(rs_keybytes_trim_trailing_spaces("ab   ", 5), 2);
	UNIT_EQ_INT(rs_keybytes_trim_trailing_spaces("   ", 3), 0);
	UNIT_EQ_INT(rs_keybytes_trim_trailing_spaces("", 0), 0);
	UNIT_EQ_INT(rs_keybytes_trim_trailing_spaces(" a", 2), 2);
	UNIT_EQ_INT(rs_keybytes_trim_trailing_spaces("a b ", 4), 3);
	/* only spaces: a tab or a no-break space stays */
	UNIT_EQ_INT(rs_keybytes_trim_trailing_spaces("a\t", 2), 2);
	UNIT_EQ_INT(rs_keybytes_trim_trailing_spaces("a\xc2\xa0", 3), 3);
	/* the length given is what is looked at */
	UNIT_EQ_INT(rs_keybytes_trim_trailing_spaces("ab  cd", 4), 2);

	UNIT_EQ_INT(rs_keybytes_days_in_month(2026, 2), 28);
	UNIT_EQ_INT(rs_keybytes_days_in_month(2000, 2), 29);
	UNIT_EQ_INT(rs_keybytes_days_in_month(1900, 2), 28);
	UNIT_EQ_INT(rs_keybytes_days_in_month(0, 2), 29);
	UNIT_EQ_INT(rs_keybytes_days_in_month(2026, 12), 31);
	UNIT_EQ_INT(rs_keybytes_days_in_month(2026, 0), 0);
	UNIT_EQ_INT(rs_keybytes_days_in_month(2026, 13), 0);
}

/*
 * Every date of 803 years around year 0 against a calendar written out
 * here: each valid day formats as printf writes it, every invalid one is
 * refused, and the count of valid days is the calendar's.  (One check per
 * year, so that the totals stay readable.)
 */
static void
test_calendar_walk(void)
{
	for (int32_t year = -401; year <= 401; year++)
	{
		bool		leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
		int			days = 0;
		int			wrong = 0;

		for (int32_t month = 1; month <= 12; month++)
			for (int32_t day = 1; day <= 32; day++)
			{
				static const int month_days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
				bool		valid = day <= month_days[month - 1] + (month == 2 && leap);
				rs_datetime dt = {year, month, day, 0, 0, 0, 0};
				char		buf[RS_KEYBYTES_DATETIME_MAX];
				char		want[64];
				size_t		len = 0;
				rs_status	status = rs_keybytes_date(&dt, buf, &len);

				if (!valid)
				{
					wrong += status != RS_ERR_OUT_OF_RANGE;
					continue;
				}
				days++;
				snprintf(want, sizeof(want), "%04d-%02d-%02d%s", (int) (year > 0 ? year : 1 - year),
						 (int) month, (int) day, year > 0 ? "" : " BC");
				wrong += status != RS_OK || len != strlen(want) || strcmp(buf, want) != 0;
			}
		UNIT_CHECK(wrong == 0 && days == (leap ? 366 : 365), "year %d: %d wrong, %d days", (int) year, wrong, days);
	}
}

int
main(void)
{
	test_typed_key_vectors();
	test_numeric();
	test_numeric_syntax();
	test_numeric_idempotent();
	test_date();
	test_timestamp();
	test_other_forms();
	test_calendar_walk();
	return unit_report();
}

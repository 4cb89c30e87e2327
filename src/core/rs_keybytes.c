/*
 * rs_keybytes.c
 *		Canonical key bytes of typed keys (docs/routing.md §1); the forms are
 *		described in rs_keybytes.h.
 */
#include "rs_keybytes.h"

#include <string.h>

/* Whether c is an ASCII decimal digit, independent of the C locale. */
static bool
is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* Whether len bytes of text spell word, ASCII case ignored. */
static bool
equals_ignoring_case(const char *text, size_t len, const char *word)
{
	size_t		n = strlen(word);

	if (len != n)
		return false;
	for (size_t i = 0; i < n; i++)
	{
		char		c = text[i];

		if (c >= 'A' && c <= 'Z')
			c = (char) (c - 'A' + 'a');
		if (c != word[i])
			return false;
	}
	return true;
}

/* Canonical form of a decimal number (see rs_keybytes.h). */
rs_status
rs_keybytes_numeric(const char *text, size_t len, char *out, size_t *out_len)
{
	size_t		pos = 0;
	bool		negative = false;
	size_t		int_start;
	size_t		int_end;
	size_t		frac_start;
	size_t		frac_end;
	size_t		n = 0;

	if (text == NULL)
		return RS_ERR_SYNTAX;
	if (equals_ignoring_case(text, len, "nan"))
	{
		memcpy(out, "NaN", 3);
		*out_len = 3;
		return RS_OK;
	}
	if (len > 0 && (text[0] == '+' || text[0] == '-'))
	{
		negative = text[0] == '-';
		pos = 1;
	}
	if (equals_ignoring_case(text + pos, len - pos, "infinity") ||
		equals_ignoring_case(text + pos, len - pos, "inf"))
	{
		if (negative)
			out[n++] = '-';
		memcpy(out + n, "Infinity", 8);
		*out_len = n + 8;
		return RS_OK;
	}

	/* digits [. digits], at least one digit on either side of the point */
	int_start = pos;
	while (pos < len && is_digit(text[pos]))
		pos++;
	int_end = pos;
	frac_start = frac_end = pos;
	if (pos < len && text[pos] == '.')
	{
		pos++;
		frac_start = pos;
		while (pos < len && is_digit(text[pos]))
			pos++;
		frac_end = pos;
	}
	if (pos != len || (int_end == int_start && frac_end == frac_start))
		return RS_ERR_SYNTAX;

	/* Leading zeros of the whole part and trailing zeros of the fraction go. */
	while (int_start < int_end && text[int_start] == '0')
		int_start++;
	while (frac_end > frac_start && text[frac_end - 1] == '0')
		frac_end--;

	/* Any zero is "0": the sign of a zero is not part of its value. */
	if (int_start == int_end && frac_start == frac_end)
	{
		out[0] = '0';
		*out_len = 1;
		return RS_OK;
	}
	if (negative)
		out[n++] = '-';
	if (int_start == int_end)
		out[n++] = '0';
	else
	{
		memcpy(out + n, text + int_start, int_end - int_start);
		n += int_end - int_start;
	}
	if (frac_end > frac_start)
	{
		out[n++] = '.';
		memcpy(out + n, text + frac_start, frac_end - frac_start);
		n += frac_end - frac_start;
	}
	*out_len = n;
	return RS_OK;
}

/* Whether a year is a leap year (astronomical numbering: 0 is, as 1 BC was). */
static bool
is_leap_year(int32_t year)
{
	return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
}

/* Days in a month; 0 for a month outside 1 .. 12. */
int
rs_keybytes_days_in_month(int32_t year, int32_t month)
{
	static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

	if (month < 1 || month > 12)
		return 0;
	if (month == 2 && is_leap_year(year))
		return 29;
	return days[month - 1];
}

/* Write value in decimal, zero-padded to at least width digits; returns the length. */
static size_t
put_padded(char *buf, uint32_t value, int width)
{
	char		reversed[16];
	size_t		n = 0;

	do
	{
		reversed[n++] = (char) ('0' + value % 10);
		value /= 10;
	} while (value != 0);
	while (n < (size_t) width)
		reversed[n++] = '0';
	for (size_t i = 0; i < n; i++)
		buf[i] = reversed[n - 1 - i];
	return n;
}

/* Whether dt's date fields are in range. */
static bool
date_fields_valid(const rs_datetime *dt)
{
	return dt->year >= RS_KEYBYTES_YEAR_MIN && dt->year <= RS_KEYBYTES_YEAR_MAX &&
		dt->day >= 1 && dt->day <= rs_keybytes_days_in_month(dt->year, dt->month);
}

/* "YYYY-MM-DD" with the year as written (BC years counted from 1); returns the length. */
static size_t
put_date(char *buf, const rs_datetime *dt)
{
	/* 1 BC is year 0: the written year is 1 - year for years before 1. */
	uint32_t	written_year = dt->year > 0 ? (uint32_t) dt->year : (uint32_t) (1 - (int64_t) dt->year);
	size_t		n = put_padded(buf, written_year, 4);

	buf[n++] = '-';
	n += put_padded(buf + n, (uint32_t) dt->month, 2);
	buf[n++] = '-';
	n += put_padded(buf + n, (uint32_t) dt->day, 2);
	return n;
}

/* Append " BC" for years before 1; returns the new length. */
static size_t
put_era(char *buf, size_t n, const rs_datetime *dt)
{
	if (dt->year <= 0)
	{
		memcpy(buf + n, " BC", 3);
		n += 3;
	}
	return n;
}

/* Date form (see rs_keybytes.h). */
rs_status
rs_keybytes_date(const rs_datetime *dt, char *buf, size_t *len)
{
	size_t		n;

	if (!date_fields_valid(dt))
		return RS_ERR_OUT_OF_RANGE;
	n = put_date(buf, dt);
	n = put_era(buf, n, dt);
	buf[n] = '\0';
	*len = n;
	return RS_OK;
}

/* Timestamp and timestamptz forms (see rs_keybytes.h). */
rs_status
rs_keybytes_timestamp(const rs_datetime *dt, bool utc_offset, char *buf, size_t *len)
{
	size_t		n;

	if (!date_fields_valid(dt) ||
		dt->hour < 0 || dt->hour > 23 || dt->minute < 0 || dt->minute > 59 ||
		dt->second < 0 || dt->second > 59 ||
		dt->microsecond < 0 || dt->microsecond > 999999)
		return RS_ERR_OUT_OF_RANGE;
	n = put_date(buf, dt);
	buf[n++] = ' ';
	n += put_padded(buf + n, (uint32_t) dt->hour, 2);
	buf[n++] = ':';
	n += put_padded(buf + n, (uint32_t) dt->minute, 2);
	buf[n++] = ':';
	n += put_padded(buf + n, (uint32_t) dt->second, 2);
	if (dt->microsecond != 0)
	{
		/* six digits, then the trailing zeros dropped: .25, not .250000 */
		buf[n++] = '.';
		n += put_padded(buf + n, (uint32_t) dt->microsecond, 6);
		while (buf[n - 1] == '0')
			n--;
	}
	if (utc_offset)
	{
		memcpy(buf + n, "+00", 3);
		n += 3;
	}
	n = put_era(buf, n, dt);
	buf[n] = '\0';
	*len = n;
	return RS_OK;
}

/* "infinity" or "-infinity" (see rs_keybytes.h). */
size_t
rs_keybytes_infinity(bool negative, char *buf)
{
	const char *word = negative ? "-infinity" : "infinity";
	size_t		n = strlen(word);

	memcpy(buf, word, n + 1);
	return n;
}

/* Lowercase uuid form (see rs_keybytes.h). */
size_t
rs_keybytes_uuid(const uint8_t *bytes, char *buf)
{
	static const char hex[] = "0123456789abcdef";
	size_t		n = 0;

	for (int i = 0; i < 16; i++)
	{
		if (i == 4 || i == 6 || i == 8 || i == 10)
			buf[n++] = '-';
		buf[n++] = hex[bytes[i] >> 4];
		buf[n++] = hex[bytes[i] & 0x0F];
	}
	buf[n] = '\0';
	return n;
}

/* Length without trailing spaces (see rs_keybytes.h). */
size_t
rs_keybytes_trim_trailing_spaces(const char *text, size_t len)
{
	while (len > 0 && text[len - 1] == ' ')
		len--;
	return len;
}

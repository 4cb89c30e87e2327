/*
 * fuzz_keybytes.c
 *		libFuzzer target for the canonical key bytes of typed keys
 *		(rs_keybytes: docs/routing.md §1).
 *
 * For every input it checks that
 *	- rs_keybytes_numeric accepts exactly the text an independent scanner
 *	  accepts; its form has no exponent, no sign on zero, no leading or
 *	  trailing zero it does not need and no trailing point; it keeps the
 *	  value (compared digit by digit with the input, stripped the slow way);
 *	  it is idempotent; and equal values written otherwise (zeros added, a
 *	  plus sign, a bare point) get the same bytes;
 *	- rs_keybytes_date and rs_keybytes_timestamp accept exactly the fields
 *	  an independent calendar accepts, and their text parses back, with a
 *	  separate parser, to the same fields (no trailing zero in a fraction,
 *	  the year at least four digits, "+00" before " BC");
 *	- rs_keybytes_uuid parses back to its 16 bytes, in lowercase;
 *	- rs_keybytes_trim_trailing_spaces drops spaces only, and all of them.
 * Any disagreement aborts.
 *
 * Build and run, for example:
 *	clang -g -O1 -fsanitize=fuzzer,address,undefined -Isrc/core \
 *		test/fuzz/fuzz_keybytes.c src/core/rs_keybytes.c src/core/rs_status.c \
 *		-o /tmp/fuzz_keybytes
 *	/tmp/fuzz_keybytes -max_total_time=60 test/fuzz/corpus/keybytes
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rs_keybytes.h"

/* Inputs longer than this are only checked for not crashing. */
#define ORACLE_MAX_LEN 4096

static const uint8_t *fuzz_data;
static size_t fuzz_size;

/* Report a disagreement and abort so that libFuzzer keeps the input. */
static void
fail(const char *what)
{
	fprintf(stderr, "fuzz_keybytes: %s; input (%zu bytes):", what, fuzz_size);
	for (size_t i = 0; i < fuzz_size && i < 64; i++)
		fprintf(stderr, " %02x", fuzz_data[i]);
	fputc('\n', stderr);
	abort();
}

/* ---- numeric ---- */

/* A number as the oracle reads it: sign, digits, how many are whole. */
typedef struct oracle_number
{
	int			special;		/* 0 finite, 1 NaN, 2 +Infinity, 3 -Infinity */
	bool		negative;
	char	   *digits;			/* all digits, without the point */
	size_t		ndigits;
	size_t		nwhole;			/* how many of them come before the point */
} oracle_number;

/* Whether the n bytes spell word in any ASCII case. */
static bool
oracle_word(const char *s, size_t n, const char *word)
{
	if (n != strlen(word))
		return false;
	for (size_t i = 0; i < n; i++)
	{
		char		c = s[i];

		if (c >= 'A' && c <= 'Z')
			c = (char) (c + ('a' - 'A'));
		if (c != word[i])
			return false;
	}
	return true;
}

/*
 * Read text the slow way: specials first, then an optional sign, then any
 * digits and at most one point with a digit somewhere.  False when the text
 * is not a number.  Digits are malloc'd.
 */
static bool
oracle_read(const char *s, size_t n, oracle_number *num)
{
	size_t		start = 0;
	size_t		points = 0;

	memset(num, 0, sizeof(*num));
	if (oracle_word(s, n, "nan"))
	{
		num->special = 1;
		return true;
	}
	if (n > 0 && (s[0] == '-' || s[0] == '+'))
	{
		num->negative = s[0] == '-';
		start = 1;
	}
	if (oracle_word(s + start, n - start, "inf") || oracle_word(s + start, n - start, "infinity"))
	{
		num->special = num->negative ? 3 : 2;
		return true;
	}
	num->digits = malloc(n + 1);
	if (num->digits == NULL)
		abort();
	num->nwhole = (size_t) -1;
	for (size_t i = start; i < n; i++)
	{
		if (s[i] == '.')
		{
			if (++points > 1)
				return false;
			num->nwhole = num->ndigits;
		}
		else if (s[i] >= '0' && s[i] <= '9')
			num->digits[num->ndigits++] = s[i];
		else
			return false;
	}
	if (num->nwhole == (size_t) -1)
		num->nwhole = num->ndigits;
	return num->ndigits > 0;
}

/* The oracle's canonical text of a number it read, malloc'd. */
static char *
oracle_canonical(const oracle_number *num)
{
	static const char *const specials[] = {NULL, "NaN", "Infinity", "-Infinity"};
	size_t		first = 0;
	size_t		last;
	char	   *out;
	size_t		n = 0;

	if (num->special)
		return strdup(specials[num->special]);
	out = malloc(num->ndigits + 4);
	if (out == NULL)
		abort();
	/* leading zeros of the whole part, trailing zeros of the fraction */
	while (first < num->nwhole && num->digits[first] == '0')
		first++;
	last = num->ndigits;
	while (last > num->nwhole && num->digits[last - 1] == '0')
		last--;
	if (first == num->nwhole && last == num->nwhole)
	{
		strcpy(out, "0");
		return out;
	}
	if (num->negative)
		out[n++] = '-';
	if (first == num->nwhole)
		out[n++] = '0';
	for (size_t i = first; i < num->nwhole; i++)
		out[n++] = num->digits[i];
	if (last > num->nwhole)
	{
		out[n++] = '.';
		for (size_t i = num->nwhole; i < last; i++)
			out[n++] = num->digits[i];
	}
	out[n] = '\0';
	return out;
}

/* Whether a form is minimal: the grammar of canonical forms, checked by hand. */
static bool
numeric_form_is_minimal(const char *s, size_t n)
{
	size_t		i = 0;
	size_t		point = n;

	if ((n == 3 && memcmp(s, "NaN", 3) == 0) || (n == 8 && memcmp(s, "Infinity", 8) == 0) ||
		(n == 9 && memcmp(s, "-Infinity", 9) == 0) || (n == 1 && s[0] == '0'))
		return true;
	if (n > 0 && s[0] == '-')
		i = 1;
	if (i == n)
		return false;
	for (size_t j = i; j < n; j++)
	{
		if (s[j] == '.')
		{
			if (point != n)
				return false;
			point = j;
		}
		else if (s[j] < '0' || s[j] > '9')
			return false;
	}
	/* a whole part: "0" alone, or no leading zero */
	if (point == i || (s[i] == '0' && point != i + 1))
		return false;
	/* a fraction, if any: digits ending in a non-zero */
	if (point != n && (point == n - 1 || s[n - 1] == '0'))
		return false;
	/* no negative zero: a sign needs a non-zero digit */
	if (i == 1 && strspn(s + 1, "0.") == n - 1)
		return false;
	return true;
}

/* Canonical form of n bytes into a malloc'd buffer; status returned. */
static rs_status
normalize(const char *s, size_t n, char **out, size_t *out_len)
{
	size_t		size = RS_KEYBYTES_NUMERIC_SIZE(n);
	rs_status	status;

	*out = malloc(size);
	if (*out == NULL)
		abort();
	memset(*out, 0x55, size);
	status = rs_keybytes_numeric(s, n, *out, out_len);
	if (status == RS_OK && *out_len > size - 1)
		fail("numeric form longer than its bound");
	return status;
}

/* The form of the same value written differently must be the same. */
static void
check_numeric_respelling(const char *prefix, const char *s, size_t n, const char *suffix,
						 const char *form, size_t form_len)
{
	size_t		total = strlen(prefix) + n + strlen(suffix);
	char	   *respelled = malloc(total + 1);
	char	   *other;
	size_t		other_len = 0;

	if (respelled == NULL)
		abort();
	memcpy(respelled, prefix, strlen(prefix));
	memcpy(respelled + strlen(prefix), s, n);
	memcpy(respelled + strlen(prefix) + n, suffix, strlen(suffix));
	if (normalize(respelled, total, &other, &other_len) != RS_OK)
		fail("a respelling of a number is refused");
	if (other_len != form_len || memcmp(other, form, form_len) != 0)
		fail("an equal value written otherwise gets other bytes");
	free(other);
	free(respelled);
}

static void
check_numeric(const char *s, size_t n)
{
	oracle_number num;
	bool		oracle_ok = oracle_read(s, n, &num);
	char	   *form;
	size_t		form_len = 0;
	rs_status	status = normalize(s, n, &form, &form_len);

	if (status != RS_OK && status != RS_ERR_SYNTAX)
		fail("numeric: unexpected status");
	if ((status == RS_OK) != oracle_ok)
		fail("numeric: accepted differently from the oracle");
	if (status == RS_OK)
	{
		char	   *want = oracle_canonical(&num);
		char	   *again;
		size_t		again_len = 0;

		if (form_len != strlen(want) || memcmp(form, want, form_len) != 0)
			fail("numeric: form differs from the oracle's");
		if (!numeric_form_is_minimal(form, form_len))
			fail("numeric: form is not minimal");
		if (memchr(form, 'e', form_len) || memchr(form, 'E', form_len))
			fail("numeric: form has an exponent");
		if (normalize(form, form_len, &again, &again_len) != RS_OK ||
			again_len != form_len || memcmp(again, form, form_len) != 0)
			fail("numeric: form is not idempotent");
		free(again);

		/* finite numbers written otherwise: zeros around, a sign, a point */
		if (num.special == 0)
		{
			bool		has_point = memchr(s, '.', n) != NULL;
			bool		has_sign = n > 0 && (s[0] == '-' || s[0] == '+');

			if (!has_sign)
			{
				check_numeric_respelling("000", s, n, has_point ? "000" : "", form, form_len);
				check_numeric_respelling("+", s, n, has_point ? "" : ".", form, form_len);
				/* -x is x negated: the form gets a '-' unless it is 0 */
				{
					char	   *negated = malloc(n + 2);
					char	   *neg_form;
					size_t		neg_len = 0;

					if (negated == NULL)
						abort();
					negated[0] = '-';
					memcpy(negated + 1, s, n);
					if (normalize(negated, n + 1, &neg_form, &neg_len) != RS_OK)
						fail("numeric: a negated number is refused");
					if (strcmp(want, "0") == 0
						? (neg_len != 1 || neg_form[0] != '0')
						: (neg_len != form_len + 1 || neg_form[0] != '-' ||
						   memcmp(neg_form + 1, form, form_len) != 0))
						fail("numeric: a negated number has other digits");
					free(neg_form);
					free(negated);
				}
			}
		}
		free(want);
	}
	free(form);
	free(num.digits);
}

/* ---- dates and timestamps ---- */

/* The calendar, written independently: month lengths, leap years. */
static bool
oracle_valid_date(int32_t year, int32_t month, int32_t day)
{
	static const int lengths[13] = {0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	int			length;
	bool		leap;

	if (year < RS_KEYBYTES_YEAR_MIN || year > RS_KEYBYTES_YEAR_MAX || month < 1 || month > 12)
		return false;
	leap = year % 400 == 0 || (year % 4 == 0 && year % 100 != 0);
	length = lengths[month] + (month == 2 && leap ? 1 : 0);
	return day >= 1 && day <= length;
}

/* Read exactly ndigits (or, when ndigits is 0, at least 4) digits at *p. */
static bool
parse_digits(const char **p, const char *end, int ndigits, int64_t *value)
{
	int			count = 0;

	*value = 0;
	while (*p < end && **p >= '0' && **p <= '9' && (ndigits == 0 || count < ndigits))
	{
		*value = *value * 10 + (**p - '0');
		(*p)++;
		count++;
		if (count > 12)
			return false;
	}
	return ndigits == 0 ? count >= 4 : count == ndigits;
}

/* Whether s at *p continues with lit; if so, step over it. */
static bool
parse_literal(const char **p, const char *end, const char *lit)
{
	size_t		n = strlen(lit);

	if ((size_t) (end - *p) < n || memcmp(*p, lit, n) != 0)
		return false;
	*p += n;
	return true;
}

/*
 * Parse a date or timestamp form back into fields, separately from the
 * writer: "YYYY-MM-DD[ HH:MM:SS[.f]][+00][ BC]".
 */
static void
parse_back(const char *s, size_t n, bool with_time, bool utc_offset, rs_datetime *dt)
{
	const char *p = s;
	const char *end = s + n;
	int64_t		v;
	const char *year_start = s;

	memset(dt, 0, sizeof(*dt));
	if (!parse_digits(&p, end, 0, &v))
		fail("form: year of fewer than four digits");
	if (p - year_start > 4 && *year_start == '0')
		fail("form: a long year with a leading zero");
	dt->year = (int32_t) v;
	if (!parse_literal(&p, end, "-") || !parse_digits(&p, end, 2, &v))
		fail("form: month");
	dt->month = (int32_t) v;
	if (!parse_literal(&p, end, "-") || !parse_digits(&p, end, 2, &v))
		fail("form: day");
	dt->day = (int32_t) v;
	if (with_time)
	{
		if (!parse_literal(&p, end, " ") || !parse_digits(&p, end, 2, &v))
			fail("form: hour");
		dt->hour = (int32_t) v;
		if (!parse_literal(&p, end, ":") || !parse_digits(&p, end, 2, &v))
			fail("form: minute");
		dt->minute = (int32_t) v;
		if (!parse_literal(&p, end, ":") || !parse_digits(&p, end, 2, &v))
			fail("form: second");
		dt->second = (int32_t) v;
		if (parse_literal(&p, end, "."))
		{
			int			count = 0;

			while (p < end && *p >= '0' && *p <= '9')
			{
				dt->microsecond = dt->microsecond * 10 + (*p - '0');
				p++;
				count++;
			}
			if (count < 1 || count > 6 || p[-1] == '0')
				fail("form: a fraction of 1 to 6 digits ending in a non-zero");
			for (; count < 6; count++)
				dt->microsecond *= 10;
		}
	}
	if (utc_offset && !parse_literal(&p, end, "+00"))
		fail("form: no +00");
	if (parse_literal(&p, end, " BC"))
	{
		if (dt->year == 0)
			fail("form: year 0 BC");
		dt->year = 1 - dt->year;
	}
	else if (dt->year == 0)
		fail("form: year 0");
	if (p != end)
		fail("form: trailing bytes");
}

/* Fields from input bytes: raw, or folded into plausible ranges. */
static void
fields_from(const uint8_t *data, size_t size, bool fold, rs_datetime *dt)
{
	int32_t		raw[7] = {0};

	memcpy(raw, data, size < sizeof(raw) ? size : sizeof(raw));
	if (!fold)
	{
		dt->year = raw[0];
		dt->month = raw[1];
		dt->day = raw[2];
		dt->hour = raw[3];
		dt->minute = raw[4];
		dt->second = raw[5];
		dt->microsecond = raw[6];
		return;
	}
	/* unsigned remainders: mostly valid, the edges one step out */
	dt->year = (int32_t) ((uint32_t) raw[0] % 30003u) - 15001;
	dt->month = (int32_t) ((uint32_t) raw[1] % 14u);
	dt->day = (int32_t) ((uint32_t) raw[2] % 33u);
	dt->hour = (int32_t) ((uint32_t) raw[3] % 25u);
	dt->minute = (int32_t) ((uint32_t) raw[4] % 61u);
	dt->second = (int32_t) ((uint32_t) raw[5] % 61u);
	dt->microsecond = (int32_t) ((uint32_t) raw[6] % 1000001u);
	/* sometimes round the fraction, so that it ends in zeros */
	if (size > 28 && data[28] % 4 == 0)
		dt->microsecond -= dt->microsecond % 1000;
	if (size > 29 && data[29] % 7 == 0)
		dt->year = (int32_t) (data[29] % 2 ? RS_KEYBYTES_YEAR_MAX : RS_KEYBYTES_YEAR_MIN);
}

static void
check_datetime(const rs_datetime *dt)
{
	char		date[RS_KEYBYTES_DATETIME_MAX];
	char		stamp[RS_KEYBYTES_DATETIME_MAX];
	char		stamptz[RS_KEYBYTES_DATETIME_MAX];
	size_t		date_len = 0;
	size_t		stamp_len = 0;
	size_t		stamptz_len = 0;
	bool		date_ok = oracle_valid_date(dt->year, dt->month, dt->day);
	bool		time_ok = dt->hour >= 0 && dt->hour <= 23 && dt->minute >= 0 && dt->minute <= 59 &&
		dt->second >= 0 && dt->second <= 59 && dt->microsecond >= 0 && dt->microsecond <= 999999;
	rs_status	status;
	rs_datetime back;

	status = rs_keybytes_date(dt, date, &date_len);
	if ((status == RS_OK) != date_ok || (status != RS_OK && status != RS_ERR_OUT_OF_RANGE))
		fail("date: accepted differently from the calendar");
	if (status == RS_OK)
	{
		if (date_len >= RS_KEYBYTES_DATETIME_MAX || date[date_len] != '\0' || strlen(date) != date_len)
			fail("date: length");
		parse_back(date, date_len, false, false, &back);
		if (back.year != dt->year || back.month != dt->month || back.day != dt->day)
			fail("date: does not parse back to its fields");
	}

	status = rs_keybytes_timestamp(dt, false, stamp, &stamp_len);
	if ((status == RS_OK) != (date_ok && time_ok) || (status != RS_OK && status != RS_ERR_OUT_OF_RANGE))
		fail("timestamp: accepted differently from the calendar and clock");
	if (status == RS_OK)
	{
		if (stamp_len >= RS_KEYBYTES_DATETIME_MAX || strlen(stamp) != stamp_len)
			fail("timestamp: length");
		parse_back(stamp, stamp_len, true, false, &back);
		if (memcmp(&back, dt, sizeof(back)) != 0)
			fail("timestamp: does not parse back to its fields");
		/* the date is the timestamp's first part (and its era) */
		if (memcmp(stamp, date, 10) != 0 || strncmp(stamp, date, strcspn(date, " ")) != 0)
			fail("timestamp: date part differs from the date form");

		if (rs_keybytes_timestamp(dt, true, stamptz, &stamptz_len) != RS_OK)
			fail("timestamptz: refused where timestamp was not");
		parse_back(stamptz, stamptz_len, true, true, &back);
		if (memcmp(&back, dt, sizeof(back)) != 0)
			fail("timestamptz: does not parse back to its fields");
		if (stamptz_len != stamp_len + 3)
			fail("timestamptz: not the timestamp with +00");
	}
}

/* ---- uuid and trimming ---- */

static void
check_uuid(const uint8_t *bytes)
{
	char		text[RS_KEYBYTES_UUID_LEN + 1];
	uint8_t		back[16];
	size_t		n = rs_keybytes_uuid(bytes, text);
	size_t		b = 0;

	if (n != RS_KEYBYTES_UUID_LEN || text[n] != '\0')
		fail("uuid: length");
	for (size_t i = 0; i < n; i++)
	{
		bool		hyphen = i == 8 || i == 13 || i == 18 || i == 23;

		if (hyphen != (text[i] == '-'))
			fail("uuid: hyphens");
		if (!hyphen && strchr("0123456789abcdef", text[i]) == NULL)
			fail("uuid: not lowercase hexadecimal");
	}
	for (size_t i = 0; i < n; i += (text[i] == '-') ? 1 : 2)
	{
		if (text[i] == '-')
			continue;
		back[b++] = (uint8_t) (((text[i] <= '9' ? text[i] - '0' : text[i] - 'a' + 10) << 4) |
							   (text[i + 1] <= '9' ? text[i + 1] - '0' : text[i + 1] - 'a' + 10));
	}
	if (b != 16 || memcmp(back, bytes, 16) != 0)
		fail("uuid: does not parse back to its bytes");
}

static void
check_trim(const char *s, size_t n)
{
	size_t		kept = rs_keybytes_trim_trailing_spaces(s, n);

	if (kept > n || (kept > 0 && s[kept - 1] == ' '))
		fail("trim: kept a trailing space");
	for (size_t i = kept; i < n; i++)
		if (s[i] != ' ')
			fail("trim: dropped more than spaces");
}

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	rs_datetime dt;

	fuzz_data = data;
	fuzz_size = size;
	if (size <= ORACLE_MAX_LEN)
		check_numeric((const char *) data, size);
	else
	{
		char	   *form;
		size_t		form_len;

		(void) normalize((const char *) data, size, &form, &form_len);
		free(form);
	}
	check_trim((const char *) data, size);

	fields_from(data, size, false, &dt);
	check_datetime(&dt);
	fields_from(data, size, true, &dt);
	check_datetime(&dt);

	if (size >= 16)
		check_uuid(data);
	return 0;
}

/*
 * rs_token_text.c
 *		Parse and format ring tokens (unsigned 64-bit ring positions).
 *
 * The grammar is described in rs_token_text.h.
 */
#include "rs_token_text.h"

#include <stdbool.h>

/* Whether c is ASCII whitespace, independent of the C locale. */
static bool
is_ascii_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

/* The value of hexadecimal digit c, or -1 if c is not one. */
static int
hex_digit_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * Accumulate digits of the given base from text[*pos] onwards into *value.
 * Stops at the first non-digit.  Returns how many digits were consumed and
 * sets *overflow if the value exceeded UINT64_MAX (the value is then
 * meaningless but scanning goes on, so that syntax is still checked).
 */
static size_t
scan_digits(const char *text, size_t len, size_t *pos, unsigned base,
			uint64_t *value, bool *overflow)
{
	size_t		ndigits = 0;

	while (*pos < len)
	{
		int			digit = hex_digit_value(text[*pos]);

		if (digit < 0 || (unsigned) digit >= base)
			break;
		if (*value > (UINT64_MAX - (uint64_t) digit) / base)
			*overflow = true;
		else
			*value = *value * base + (uint64_t) digit;
		(*pos)++;
		ndigits++;
	}
	return ndigits;
}

/* Parse a ring token from len bytes of text; see rs_token_text.h. */
rs_status
rs_token_parse(const char *text, size_t len, uint64_t *out)
{
	size_t		pos = 0;
	bool		negative = false;
	bool		overflow = false;
	unsigned	base = 10;
	uint64_t	value = 0;

	if (text == NULL)
		return RS_ERR_SYNTAX;

	while (pos < len && is_ascii_space(text[pos]))
		pos++;

	if (pos < len && (text[pos] == '+' || text[pos] == '-'))
	{
		negative = (text[pos] == '-');
		pos++;
	}

	if (pos + 1 < len && text[pos] == '0' && (text[pos + 1] == 'x' || text[pos + 1] == 'X'))
	{
		base = 16;
		pos += 2;
	}

	if (scan_digits(text, len, &pos, base, &value, &overflow) == 0)
		return RS_ERR_SYNTAX;

	while (pos < len && is_ascii_space(text[pos]))
		pos++;

	if (pos != len)
		return RS_ERR_SYNTAX;

	if (overflow || (negative && value != 0))
		return RS_ERR_OUT_OF_RANGE;

	*out = value;
	return RS_OK;
}

/* Write value in decimal to buf; see rs_token_text.h. */
size_t
rs_token_format(uint64_t value, char *buf)
{
	char		reversed[RS_TOKEN_TEXT_MAX];
	size_t		ndigits = 0;
	size_t		i;

	do
	{
		reversed[ndigits++] = (char) ('0' + value % 10);
		value /= 10;
	} while (value != 0);

	for (i = 0; i < ndigits; i++)
		buf[i] = reversed[ndigits - 1 - i];
	buf[ndigits] = '\0';
	return ndigits;
}

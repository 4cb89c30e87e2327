/*
 * unit.h
 *		A minimal assertion harness for the pure core's unit tests.
 *
 * Each test program counts its own checks and prints "N passed, N failed";
 * test/unit/run sums the programs.  A failed check prints where and why and
 * the program goes on, so one run shows every failure.
 */
#ifndef RS_UNIT_H
#define RS_UNIT_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int	unit_passed;
static int	unit_failed;

#define UNIT_CHECK(cond, ...) \
	do { \
		if (cond) \
			unit_passed++; \
		else \
		{ \
			unit_failed++; \
			fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__); \
			fputc('\n', stderr); \
		} \
	} while (0)

#define UNIT_EQ_U64(got, want) \
	UNIT_CHECK((uint64_t) (got) == (uint64_t) (want), "got %" PRIu64 ", want %" PRIu64, \
			   (uint64_t) (got), (uint64_t) (want))

#define UNIT_EQ_INT(got, want) \
	UNIT_CHECK((long) (got) == (long) (want), "got %ld, want %ld", (long) (got), (long) (want))

#define UNIT_EQ_STR(got, want) \
	UNIT_CHECK((got) != NULL && strcmp((got), (want)) == 0, "got \"%s\", want \"%s\"", \
			   (got) ? (got) : "(null)", (want))

/* Print the closing line and turn the count into an exit status. */
static inline int
unit_report(void)
{
	printf("%d passed, %d failed\n", unit_passed, unit_failed);
	return unit_failed == 0 ? 0 : 1;
}

#endif							/* RS_UNIT_H */

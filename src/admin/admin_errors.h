/*
 * admin_errors.h
 *		Errors of administration functions without ringshard's internal
 *		CONTEXT lines (see admin_errors.c).
 */
#ifndef RINGSHARD_ADMIN_ERRORS_H
#define RINGSHARD_ADMIN_ERRORS_H

/* Install the function manager hook that cleans them (from _PG_init). */
extern void admin_errors_init(void);

#endif							/* RINGSHARD_ADMIN_ERRORS_H */

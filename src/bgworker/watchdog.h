/*
 * watchdog.h
 *		The health watchdog background worker (see watchdog.c).
 */
#ifndef RINGSHARD_WATCHDOG_H
#define RINGSHARD_WATCHDOG_H

/* Define its settings; register the worker when preloaded with a database. */
extern void watchdog_init(void);

#endif							/* RINGSHARD_WATCHDOG_H */

/*
 * version.h
 *		The library's version, and the check that the extension's SQL objects
 *		in this database are the version the library was built for.
 */
#ifndef RINGSHARD_VERSION_H
#define RINGSHARD_VERSION_H

/* The extension version this library was built for (ringshard.control). */
#ifndef RINGSHARD_VERSION
#error "RINGSHARD_VERSION is set by the Makefile from ringshard.control"
#endif

/*
 * Raise an error, with a hint to run ALTER EXTENSION ringshard UPDATE, when
 * the extension's version in this database is not the library's.  Checks
 * once per session, and not while an extension script runs (CREATE
 * EXTENSION, ALTER EXTENSION ... UPDATE).  Called where work starts: the
 * first build of a cached ring or map, and every administration function.
 */
extern void ringshard_check_version(void);

#endif							/* RINGSHARD_VERSION_H */

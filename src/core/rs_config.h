/*
 * rs_config.h
 *		The YAML partition-map config: parse it into entries and write it back.
 *
 * The format is the FREMIS-N coordinator's config:
 *
 *		version: "v1"
 *		nodes:
 *		- address: "0.0.0.0:4003"
 *		  partition_start: 0
 *		  partition_end: 127
 *
 * This is pure C on top of libyaml's event API: no PostgreSQL headers, memory
 * from malloc, and every failure reported as an rs_status plus an
 * rs_config_error that says where and why.
 */
#ifndef RS_CONFIG_H
#define RS_CONFIG_H

#include <stddef.h>

#include "rs_status.h"

#define RS_CONFIG_MAX_BYTES (1024 * 1024)	/* larger documents: RS_ERR_TOO_LARGE */
#define RS_CONFIG_MAX_NODES 65536	/* more entries: RS_ERR_TOO_LARGE */
#define RS_CONFIG_MAX_ADDRESS_BYTES 1024	/* longer addresses: RS_ERR_TOO_LARGE */
#define RS_CONFIG_PARTITION_MAX 255 /* partitions are numbered 0..255 */

typedef struct rs_config_entry
{
	char	   *address;		/* malloc'd, NUL-terminated, non-empty */
	int			partition_start;	/* 0..255 */
	int			partition_end;	/* partition_start..255 */
	int			line;			/* 1-based line of the entry's first key */
} rs_config_entry;

typedef struct rs_config
{
	rs_config_entry *entries;	/* in document order */
	size_t		nentries;
} rs_config;

typedef struct rs_config_error
{
	int			line;			/* 1-based; 0 if not tied to a place */
	int			column;			/* 1-based; 0 if not tied to a place */
	char		field[64];		/* the offending key, e.g. "nodes[2].address";
								 * "" if none */
	char		message[256];	/* lowercase English phrase, no final period */
} rs_config_error;

/*
 * Parse text (len bytes, not necessarily NUL-terminated).  On success fills
 * *out (free it with rs_config_free).  On failure *out is left empty, nothing
 * leaks and *err (which may be NULL) describes the first problem.
 */
extern rs_status rs_config_parse(const char *text, size_t len, rs_config *out,
								 rs_config_error *err);

/* Free a parsed config; safe on an empty or zeroed one, which it leaves empty. */
extern void rs_config_free(rs_config *config);

/*
 * Write entries in the format above, in the given order.  *out is malloc'd
 * and NUL-terminated, *outlen its length without the NUL.  The output always
 * re-parses to the same entries; entries that could not (bad ranges, empty or
 * non-UTF-8 addresses, output over RS_CONFIG_MAX_BYTES) are refused.
 */
extern rs_status rs_config_format(const rs_config_entry *entries, size_t nentries,
								  char **out, size_t *outlen);

#endif							/* RS_CONFIG_H */

/*
 * rs_schemes.h
 *		Placement schemes compared on the same keys: how many keys move when a
 *		cluster grows or shrinks, and how evenly each scheme spreads them.
 *		This measures the classic experiment (mod N against consistent
 *		hashing) and the hash-ring chapter's table of keys moved.
 */
#ifndef RS_SCHEMES_H
#define RS_SCHEMES_H

#include <stdint.h>

#include "rs_status.h"

typedef enum rs_scheme
{
	RS_SCHEME_MODULO,			/* token mod N */
	RS_SCHEME_RANGE,			/* N equal token ranges */
	RS_SCHEME_RING,				/* this extension's murmur3 ring */
	RS_SCHEME_RING_TOKENS,		/* the ring, each node 16 allocated tokens */
	RS_SCHEME_JUMP,				/* Lamping and Veach's jump consistent hash */
	RS_SCHEME_RENDEZVOUS,		/* highest random weight */
	RS_SCHEME_COUNT
} rs_scheme;

typedef struct rs_scheme_result
{
	const char *scheme;
	double		moved_fraction;	/* keys whose node differs after the change */
	double		ideal_fraction;	/* the least any scheme must move */
	double		max_over_mean;	/* busiest node / mean, after the change */
	double		stddev_share;	/* standard deviation of node shares, after */
} rs_scheme_result;

/* Jump consistent hash: bucket 0..buckets-1 of a 64-bit key. */
extern int32_t rs_jump_hash(uint64_t key, int32_t buckets);

/* Allocated tokens per node of the ring_tokens scheme. */
#define RS_SCHEME_TOKENS 16

/*
 * Place keys "key-0" .. "key-(keys-1)" on from_nodes and then to_nodes nodes
 * (named "node-0" …) with every scheme.  The ring_tokens scheme's nodes join
 * in that order, each with RS_SCHEME_TOKENS tokens allocated at R = 1, so the
 * smaller ring's tokens are the larger one's (no existing token moves).  results has RS_SCHEME_COUNT entries.
 * RS_ERR_INVALID for node counts outside 1..10000, keys outside 1..10^7 or
 * vnodes outside 1..65536; RS_ERR_NOMEM.
 */
extern rs_status rs_compare_schemes(uint32_t from_nodes, uint32_t to_nodes, uint32_t keys,
									uint32_t vnodes, rs_scheme_result *results);

#endif							/* RS_SCHEMES_H */

/*
 * rs_hash.h
 *		The three hashes of the routing contract (ROUTING.md §2, §4, §5).
 *
 * MurmurHash3 comes from libmurmurhash (Appleby's reference), MD5 and SHA-1
 * from OpenSSL: none of them is written here.
 */
#ifndef RS_HASH_H
#define RS_HASH_H

#include <stddef.h>
#include <stdint.h>

#include "rs_status.h"

#define RS_PARTITION_COUNT 256

/* h1 of MurmurHash3_x64_128, seed 0, as an unsigned ring token (§2). */
extern uint64_t rs_murmur3_token(const void *data, size_t len);

/* libketama's key hash: little-endian uint32 of MD5's first 4 bytes (§4). */
extern uint32_t rs_ketama_hash(const void *data, size_t len);

/* The 16-byte MD5 digest, for ketama's point labels. */
extern rs_status rs_md5(const void *data, size_t len, unsigned char digest[16]);

/* partition(keyspace, key) = be32(SHA-1(keyspace "-" key)[0..3]) mod 256 (§5). */
extern rs_status rs_partition(const void *keyspace, size_t keyspace_len,
							  const void *key, size_t key_len, int *partition);

#endif							/* RS_HASH_H */

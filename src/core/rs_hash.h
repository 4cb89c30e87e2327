/*
 * rs_hash.h
 *		The three hashes of the routing contract (docs/routing.md §2, §4, §5).
 *
 * MD5 and SHA-1 come from OpenSSL.  MurmurHash3_x64_128 is written out here,
 * inline, because it runs once per routed row and the library's generic
 * version behind a shared-library call cost half again as much on the short
 * keys routing sees; the unit tests and the fuzzer check it, bit for bit,
 * against libmurmurhash (Appleby's reference) on every length.
 */
#ifndef RS_HASH_H
#define RS_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "rs_status.h"

#define RS_PARTITION_COUNT 256

/* Little-endian 64-bit load from any address. */
static inline uint64_t
rs_load_le64(const unsigned char *p)
{
	uint64_t	v;

	memcpy(&v, p, sizeof(v));
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	v = __builtin_bswap64(v);
#endif
	return v;
}

static inline uint64_t
rs_rotl64(uint64_t x, int r)
{
	return (x << r) | (x >> (64 - r));
}

/* MurmurHash3's finalisation mix. */
static inline uint64_t
rs_fmix64(uint64_t k)
{
	k ^= k >> 33;
	k *= UINT64_C(0xff51afd7ed558ccd);
	k ^= k >> 33;
	k *= UINT64_C(0xc4ceb9fe1a85ec53);
	k ^= k >> 33;
	return k;
}

/* Inline even where the compiler would call it: it runs once per row. */
#if defined(__GNUC__)
#define RS_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define RS_ALWAYS_INLINE inline
#endif

/* h1 of MurmurHash3_x64_128, seed 0, as an unsigned ring token (§2). */
static RS_ALWAYS_INLINE uint64_t
rs_murmur3_token(const void *data, size_t len)
{
	const uint64_t c1 = UINT64_C(0x87c37b91114253d5);
	const uint64_t c2 = UINT64_C(0x4cf5ad432745937f);
	const unsigned char *bytes = data;
	size_t		rest = len & 15;
	size_t		body = len - rest;
	uint64_t	h1 = 0;
	uint64_t	h2 = 0;
	uint64_t	k1 = 0;
	uint64_t	k2 = 0;

	for (size_t offset = 0; offset < body; offset += 16)
	{
		const unsigned char *block = bytes + offset;

		k1 = rs_load_le64(block) * c1;
		k1 = rs_rotl64(k1, 31) * c2;
		h1 ^= k1;
		h1 = rs_rotl64(h1, 27) + h2;
		h1 = h1 * 5 + 0x52dce729;
		k2 = rs_load_le64(block + 8) * c2;
		k2 = rs_rotl64(k2, 33) * c1;
		h2 ^= k2;
		h2 = rs_rotl64(h2, 31) + h1;
		h2 = h2 * 5 + 0x38495ab5;
	}

	/*
	 * The tail (1..15 bytes) is read with whole-word loads that end at the
	 * input's last byte, shifted so that only the tail's bytes remain: the
	 * reference's byte-by-byte switch, without the bytes' branches.  Only an
	 * input shorter than 8 bytes is read byte by byte.
	 */
	k1 = 0;
	k2 = 0;
	if (rest > 8)
	{
		k1 = rs_load_le64(bytes + body);
		k2 = rs_load_le64(bytes + len - 8) >> (8 * (16 - rest));
		k2 = rs_rotl64(k2 * c2, 33) * c1;
		h2 ^= k2;
	}
	else if (rest > 0 && len >= 8)
		k1 = rs_load_le64(bytes + len - 8) >> (8 * (8 - rest));
	else
		for (size_t i = rest; i > 0; i--)
			k1 = (k1 << 8) | bytes[body + i - 1];
	if (rest > 0)
	{
		k1 = rs_rotl64(k1 * c1, 31) * c2;
		h1 ^= k1;
	}

	h1 ^= (uint64_t) len;
	h2 ^= (uint64_t) len;
	h1 += h2;
	h2 += h1;
	return rs_fmix64(h1) + rs_fmix64(h2);
}

/* libketama's key hash: little-endian uint32 of MD5's first 4 bytes (§4). */
extern uint32_t rs_ketama_hash(const void *data, size_t len);

/* The 16-byte MD5 digest, for ketama's point labels. */
extern rs_status rs_md5(const void *data, size_t len, unsigned char digest[16]);

/* partition(keyspace, key) = be32(SHA-1(keyspace "-" key)[0..3]) mod 256 (§5). */
extern rs_status rs_partition(const void *keyspace, size_t keyspace_len,
							  const void *key, size_t key_len, int *partition);

#endif							/* RS_HASH_H */

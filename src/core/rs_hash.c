/*
 * rs_hash.c
 *		Ketama hashes and SHA-1 partitions (MurmurHash3 is inline in rs_hash.h).
 */
#include "rs_hash.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/sha.h>

/*
 * Keys up to this size are joined with their keyspace on the stack; larger
 * ones are fed to the digest in parts, so that no size needs an allocation.
 */
#define RS_PARTITION_STACK_BYTES 512

/*
 * A digest algorithm fetched once and a context kept for reuse.  OpenSSL 3's
 * one-shot calls (SHA1(), EVP_Digest with EVP_md5()) look the algorithm up
 * and allocate a context on every call, which cost about 500 ns of a 600 ns
 * partition_for; fetched and reused, a short digest costs about 130 ns.  The
 * process is single-threaded where this runs (a PostgreSQL backend, the unit
 * tests, the fuzzer), so one context per algorithm is enough.  They live as
 * long as the process.
 */
typedef struct cached_digest
{
	const char *name;
	EVP_MD	   *md;
	EVP_MD_CTX *ctx;
} cached_digest;

static cached_digest md5_digest = {"MD5", NULL, NULL};
static cached_digest sha1_digest = {"SHA1", NULL, NULL};

/* Start a digest of the algorithm; RS_ERR_NOMEM or RS_ERR_CRYPTO. */
static rs_status
digest_start(cached_digest *digest)
{
	if (digest->md == NULL)
	{
		digest->md = EVP_MD_fetch(NULL, digest->name, NULL);
		if (digest->md == NULL)
			return RS_ERR_CRYPTO;
	}
	if (digest->ctx == NULL)
	{
		digest->ctx = EVP_MD_CTX_new();
		if (digest->ctx == NULL)
			return RS_ERR_NOMEM;
	}
	return EVP_DigestInit_ex2(digest->ctx, digest->md, NULL) == 1 ? RS_OK : RS_ERR_CRYPTO;
}

/* The digest of the concatenated parts into out (expected_len bytes). */
static rs_status
digest_parts(cached_digest *digest, int nparts, const void *const *parts,
			 const size_t *lens, unsigned char *out, unsigned int expected_len)
{
	rs_status	status = digest_start(digest);
	unsigned int len = 0;

	if (status != RS_OK)
		return status;
	for (int i = 0; i < nparts; i++)
		if (EVP_DigestUpdate(digest->ctx, parts[i], lens[i]) != 1)
			return RS_ERR_CRYPTO;
	if (EVP_DigestFinal_ex(digest->ctx, out, &len) != 1 || len != expected_len)
		return RS_ERR_CRYPTO;
	return RS_OK;
}

/* The 16-byte MD5 digest, for ketama's point labels. */
rs_status
rs_md5(const void *data, size_t len, unsigned char digest[16])
{
	return digest_parts(&md5_digest, 1, &data, &len, digest, 16);
}

/* libketama's key hash: little-endian uint32 of MD5's first 4 bytes (§4). */
uint32_t
rs_ketama_hash(const void *data, size_t len)
{
	unsigned char digest[16];

	/*
	 * MD5 from the default provider cannot fail short of memory exhaustion;
	 * a zero digest then still routes deterministically rather than crash.
	 */
	if (rs_md5(data, len, digest) != RS_OK)
		memset(digest, 0, sizeof(digest));
	return (uint32_t) digest[0] | (uint32_t) digest[1] << 8 |
		(uint32_t) digest[2] << 16 | (uint32_t) digest[3] << 24;
}

/* partition(keyspace, key) = be32(SHA-1(keyspace "-" key)[0..3]) mod 256 (§5). */
rs_status
rs_partition(const void *keyspace, size_t keyspace_len,
			 const void *key, size_t key_len, int *partition)
{
	unsigned char digest[SHA_DIGEST_LENGTH];
	rs_status	status;

	/* Short inputs are joined on the stack: one update instead of three. */
	if (keyspace_len + key_len + 1 <= RS_PARTITION_STACK_BYTES)
	{
		unsigned char joined[RS_PARTITION_STACK_BYTES];
		const void *part = joined;
		size_t		len = keyspace_len + 1 + key_len;

		if (keyspace_len > 0)
			memcpy(joined, keyspace, keyspace_len);
		joined[keyspace_len] = '-';
		if (key_len > 0)
			memcpy(joined + keyspace_len + 1, key, key_len);
		status = digest_parts(&sha1_digest, 1, &part, &len, digest, SHA_DIGEST_LENGTH);
	}
	else
	{
		const void *parts[3] = {keyspace, "-", key};
		size_t		lens[3] = {keyspace_len, 1, key_len};

		status = digest_parts(&sha1_digest, 3, parts, lens, digest, SHA_DIGEST_LENGTH);
	}
	if (status != RS_OK)
		return status;

	/* The big-endian uint32 of bytes 0..3, mod 256, is byte 3. */
	*partition = digest[3];
	return RS_OK;
}

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
 * ones go through an incremental digest so that no size needs an allocation.
 */
#define RS_PARTITION_STACK_BYTES 512

/* The 16-byte MD5 digest, for ketama's point labels. */
rs_status
rs_md5(const void *data, size_t len, unsigned char digest[16])
{
	unsigned int digest_len = 0;

	if (EVP_Digest(data, len, digest, &digest_len, EVP_md5(), NULL) != 1 ||
		digest_len != 16)
		return RS_ERR_CRYPTO;
	return RS_OK;
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

/* Digest keyspace "-" key with an incremental context (large keys). */
static rs_status
sha1_joined_incremental(const void *keyspace, size_t keyspace_len,
						const void *key, size_t key_len,
						unsigned char digest[SHA_DIGEST_LENGTH])
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	unsigned int digest_len = 0;
	int			ok;

	if (ctx == NULL)
		return RS_ERR_NOMEM;
	ok = EVP_DigestInit_ex(ctx, EVP_sha1(), NULL) == 1 &&
		EVP_DigestUpdate(ctx, keyspace, keyspace_len) == 1 &&
		EVP_DigestUpdate(ctx, "-", 1) == 1 &&
		EVP_DigestUpdate(ctx, key, key_len) == 1 &&
		EVP_DigestFinal_ex(ctx, digest, &digest_len) == 1;
	EVP_MD_CTX_free(ctx);
	return ok && digest_len == SHA_DIGEST_LENGTH ? RS_OK : RS_ERR_CRYPTO;
}

/* partition(keyspace, key) = be32(SHA-1(keyspace "-" key)[0..3]) mod 256 (§5). */
rs_status
rs_partition(const void *keyspace, size_t keyspace_len,
			 const void *key, size_t key_len, int *partition)
{
	unsigned char digest[SHA_DIGEST_LENGTH];

	if (keyspace_len + key_len + 1 <= RS_PARTITION_STACK_BYTES)
	{
		unsigned char joined[RS_PARTITION_STACK_BYTES];

		if (keyspace_len > 0)
			memcpy(joined, keyspace, keyspace_len);
		joined[keyspace_len] = '-';
		if (key_len > 0)
			memcpy(joined + keyspace_len + 1, key, key_len);
		if (SHA1(joined, keyspace_len + 1 + key_len, digest) == NULL)
			return RS_ERR_CRYPTO;
	}
	else
	{
		rs_status	status = sha1_joined_incremental(keyspace, keyspace_len,
													 key, key_len, digest);

		if (status != RS_OK)
			return status;
	}

	/* The big-endian uint32 of bytes 0..3, mod 256, is byte 3. */
	*partition = digest[3];
	return RS_OK;
}

/*
 * test_routing.c
 *		Unit tests of hashing, rings and partition maps against every vector
 *		of docs/routing.md §6, plus the properties the contract states in words.
 */
#include <math.h>
#include <stdlib.h>

#include <murmurhash.h>
#include <openssl/sha.h>

#include "rs_hash.h"
#include "rs_partmap.h"
#include "rs_ring.h"

#include "unit.h"

#define LEN(s) strlen(s)

/* Build a ring from NUL-terminated names and weights; aborts the test on error. */
static rs_ring *
build(rs_ring_algorithm algorithm, const char **names, const double *weights,
	  size_t n, uint32_t vnodes, int options)
{
	rs_ring_member members[16] = {{0}};
	rs_ring    *ring = NULL;
	rs_status	status;

	for (size_t i = 0; i < n; i++)
	{
		members[i].name = names[i];
		members[i].name_len = strlen(names[i]);
		members[i].weight = weights ? weights[i] : 1.0;
	}
	status = rs_ring_build(algorithm, members, n, vnodes, options, &ring, NULL);
	UNIT_CHECK(status == RS_OK, "build failed: %s", rs_status_text(status));
	if (status != RS_OK)
		exit(unit_report());
	return ring;
}

/* Owner name of a key. */
static const char *
owner_of(const rs_ring *ring, const char *key)
{
	return ring->names[rs_ring_owner(ring, rs_ring_key_hash(ring, key, LEN(key)))];
}

/* Replica names of a key joined with ", ". */
static const char *
replicas_of(const rs_ring *ring, const char *key, uint32_t want)
{
	static char buf[512];
	uint16_t	out[16];
	uint32_t	count = 0;

	buf[0] = '\0';
	rs_ring_replicas(ring, rs_ring_key_hash(ring, key, LEN(key)), want, out, &count);
	for (uint32_t i = 0; i < count; i++)
	{
		if (i > 0)
			strcat(buf, ", ");
		strcat(buf, ring->names[out[i]]);
	}
	return buf;
}

/* §6 tokens. */
static void
test_tokens(void)
{
	UNIT_EQ_U64(rs_murmur3_token("", 0), 0);
	UNIT_EQ_U64(rs_murmur3_token("a", 1), 9607679276477937801ULL);
	UNIT_EQ_U64(rs_murmur3_token("hello world", 11), 5998619086395760910ULL);
	UNIT_EQ_U64(rs_murmur3_token("3201012345670001", 16), 15884386775397619189ULL);
	UNIT_EQ_U64(rs_murmur3_token("shard-jakarta-01#vnode#0", 24), 6317977278498123653ULL);
	UNIT_EQ_U64(rs_murmur3_token("\xc3\xb1" "and\xc3\xba", 7), 9900926414339375407ULL);
}

/* §6 the hash-ring chapter's three shards, 256 vnodes, R = 2. */
/*
 * The inline MurmurHash3 against the reference (libmurmurhash) on every
 * length from 0 to 300, at every alignment of the input, on varied bytes:
 * the tail is read with overlapping word loads, so each length and offset
 * is its own case.
 */
static void
test_murmur3_matches_reference(void)
{
	unsigned char buf[320 + 8];
	uint64_t	state = 0x9E3779B97F4A7C15ULL;
	int			mismatches = 0;

	for (size_t i = 0; i < sizeof(buf); i++)
	{
		state ^= state << 13;
		state ^= state >> 7;
		state ^= state << 17;
		buf[i] = (unsigned char) state;
	}
	for (size_t offset = 0; offset < 8; offset++)
		for (size_t len = 0; len <= 300; len++)
		{
			uint64_t	want[2];

			lmmh_x64_128(buf + offset, (unsigned int) len, 0, want);
			if (rs_murmur3_token(buf + offset, len) != want[0])
			{
				if (mismatches++ < 5)
					UNIT_CHECK(0, "length %zu at offset %zu differs from libmurmurhash", len, offset);
			}
			else
				unit_passed++;
		}
	UNIT_EQ_INT(mismatches, 0);
}

static void
test_chapter_ring(void)
{
	const char *names[] = {"shard-surabaya-02", "shard-jakarta-01", "shard-makassar-03"};
	rs_ring    *ring = build(RS_RING_MURMUR3, names, NULL, 3, 256, RS_RING_KEEP_LABELS);
	struct
	{
		const char *key;
		uint64_t	token;
		const char *owner;
		const char *replicas;
	}			rows[] = {
		{"3201012345670001", 15884386775397619189ULL, "shard-surabaya-02", "shard-surabaya-02, shard-jakarta-01"},
		{"3578021122330002", 8811238047343097349ULL, "shard-makassar-03", "shard-makassar-03, shard-surabaya-02"},
		{"7371034455660003", 14745517588873323327ULL, "shard-makassar-03", "shard-makassar-03, shard-surabaya-02"},
		{"3171059988770004", 7138621039917915904ULL, "shard-makassar-03", "shard-makassar-03, shard-surabaya-02"},
		{"key-1", 18316859633611270910ULL, "shard-makassar-03", "shard-makassar-03, shard-surabaya-02"},
		{"key-2", 15933830083902091493ULL, "shard-surabaya-02", "shard-surabaya-02, shard-jakarta-01"},
		{"key-3", 2277932087057949865ULL, "shard-makassar-03", "shard-makassar-03, shard-surabaya-02"},
		{"key-4", 5869623425920187448ULL, "shard-makassar-03", "shard-makassar-03, shard-jakarta-01"},
	};

	UNIT_EQ_INT(ring->npoints, 768);
	UNIT_EQ_U64(rs_ring_token(ring, 0), 1248161353781320ULL);
	UNIT_EQ_STR(ring->names[rs_ring_point_owner(ring, 0)], "shard-jakarta-01");
	UNIT_EQ_U64(rs_ring_token(ring, 1), 110574070585934323ULL);
	UNIT_EQ_STR(ring->names[rs_ring_point_owner(ring, 1)], "shard-jakarta-01");
	UNIT_EQ_U64(rs_ring_token(ring, 2), 122692341856663444ULL);
	UNIT_EQ_STR(ring->names[rs_ring_point_owner(ring, 2)], "shard-makassar-03");

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
	{
		UNIT_EQ_U64(rs_ring_key_hash(ring, rows[i].key, LEN(rows[i].key)), rows[i].token);
		UNIT_EQ_STR(owner_of(ring, rows[i].key), rows[i].owner);
		UNIT_EQ_STR(replicas_of(ring, rows[i].key, 2), rows[i].replicas);
	}
	/* Asking for more replicas than nodes gives all of them. */
	UNIT_EQ_STR(replicas_of(ring, "key-1", 5),
				"shard-makassar-03, shard-surabaya-02, shard-jakarta-01");

	/* The shares of all nodes add up to the whole ring exactly. */
	{
		rs_u128		owned[3];

		rs_ring_ownership(ring, owned);
		UNIT_CHECK(owned[0] + owned[1] + owned[2] == rs_ring_space(ring), "shares sum to 2^64");
	}
	rs_ring_free(ring);
}

/* §6 weighted ring: a, b weight 1, c weight 2, 4 vnodes per unit. */
static void
test_weighted_ring(void)
{
	const char *names[] = {"c", "a", "b"};
	const double weights[] = {2, 1, 1};
	rs_ring    *ring = build(RS_RING_MURMUR3, names, weights, 3, 4, 0);
	const uint64_t tokens[] = {
		1903812905114130257ULL, 3074956795884799052ULL, 4344669118157756245ULL,
		4412727709028772756ULL, 4439414176943906018ULL, 5613278765619589496ULL,
		9438532861067374093ULL, 9785870350844133842ULL, 11468561292107898894ULL,
		11597015718131045905ULL, 12148726745311343695ULL, 12219044043300047363ULL,
		13224480325027830098ULL, 14365157503195557672ULL, 14806138732722470253ULL,
		17612122193483363911ULL};
	const char *owners = "baccbaacccbbccac";
	const char *keys[][2] = {
		{"k1", "c, b, a"}, {"k2", "a, c, b"}, {"k3", "b, a, c"},
		{"k4", "a, c, b"}, {"k5", "b, a, c"}, {"k6", "a, c, b"}};

	UNIT_EQ_INT(ring->npoints, 16);
	for (int i = 0; i < 16; i++)
	{
		char		want[2] = {owners[i], '\0'};

		UNIT_EQ_U64(rs_ring_token(ring, i), tokens[i]);
		UNIT_EQ_STR(ring->names[rs_ring_point_owner(ring, i)], want);
	}
	for (int i = 0; i < 6; i++)
	{
		char		want_owner[2] = {keys[i][1][0], '\0'};

		UNIT_EQ_STR(owner_of(ring, keys[i][0]), want_owner);
		UNIT_EQ_STR(replicas_of(ring, keys[i][0], 3), keys[i][1]);
	}
	rs_ring_free(ring);
}

/* §6 partitions. */
static void
test_partitions(void)
{
	struct
	{
		const char *keyspace;
		const char *key;
		int			partition;
	}			rows[] = {
		{"faces", "face-001", 28},
		{"users", "1", 240},
		{"ks-1", "3201012345670001", 86},
		{"default", "\xc3\xb1" "and\xc3\xba", 115},
		{"", "", 138},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
	{
		int			partition = -1;

		UNIT_EQ_INT(rs_partition(rows[i].keyspace, LEN(rows[i].keyspace),
								 rows[i].key, LEN(rows[i].key), &partition), RS_OK);
		UNIT_EQ_INT(partition, rows[i].partition);
	}
}

/* Both SHA-1 paths (stack and incremental) agree with a direct digest. */
static void
test_partition_paths_agree(void)
{
	static char keyspace[200000];
	static char key[200000];
	static unsigned char joined[400001];
	const size_t sizes[][2] = {{255, 256}, {256, 255}, {256, 256}, {0, 511}, {0, 512},
	{511, 0}, {512, 0}, {100000, 100000}};

	for (size_t i = 0; i < sizeof(keyspace); i++)
	{
		keyspace[i] = (char) ('a' + i % 26);
		key[i] = (char) ('0' + i % 10);
	}
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
	{
		size_t		ks = sizes[i][0];
		size_t		kl = sizes[i][1];
		unsigned char digest[SHA_DIGEST_LENGTH];
		int			partition = -1;

		memcpy(joined, keyspace, ks);
		joined[ks] = '-';
		memcpy(joined + ks + 1, key, kl);
		SHA1(joined, ks + 1 + kl, digest);
		UNIT_EQ_INT(rs_partition(keyspace, ks, key, kl, &partition), RS_OK);
		UNIT_EQ_INT(partition, digest[3]);
	}
}

/* §6 ketama: three memcached servers. */
static void
test_ketama(void)
{
	const char *names[] = {"10.0.0.1:11211", "10.0.0.2:11211", "10.0.0.3:11211"};
	const double weights[] = {1, 1, 2};
	rs_ring    *ring = build(RS_RING_KETAMA, names, weights, 3, 0, 0);
	unsigned char d[16];
	struct
	{
		const char *key;
		uint32_t	hash;
		const char *owner;
	}			rows[] = {
		{"foo", 3675831724u, "10.0.0.3:11211"},
		{"bar", 421377335u, "10.0.0.1:11211"},
		{"key-1", 2339090209u, "10.0.0.3:11211"},
		{"3201012345670001", 1559374663u, "10.0.0.1:11211"},
	};

	UNIT_EQ_INT(ring->npoints, 480);
	UNIT_EQ_INT(ring->node_points[0], 120);
	UNIT_EQ_INT(ring->node_points[1], 120);
	UNIT_EQ_INT(ring->node_points[2], 240);

	UNIT_EQ_INT(rs_md5("127.0.0.1:11211-0", 17, d), RS_OK);
	UNIT_EQ_U64((uint32_t) d[0] | (uint32_t) d[1] << 8 | (uint32_t) d[2] << 16 | (uint32_t) d[3] << 24, 2589391586u);
	UNIT_EQ_U64((uint32_t) d[4] | (uint32_t) d[5] << 8 | (uint32_t) d[6] << 16 | (uint32_t) d[7] << 24, 1482608462u);
	UNIT_EQ_U64((uint32_t) d[8] | (uint32_t) d[9] << 8 | (uint32_t) d[10] << 16 | (uint32_t) d[11] << 24, 2562656683u);
	UNIT_EQ_U64((uint32_t) d[12] | (uint32_t) d[13] << 8 | (uint32_t) d[14] << 16 | (uint32_t) d[15] << 24, 1506298073u);

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
	{
		UNIT_EQ_U64(rs_ketama_hash(rows[i].key, LEN(rows[i].key)), rows[i].hash);
		UNIT_EQ_STR(owner_of(ring, rows[i].key), rows[i].owner);
	}
	{
		rs_u128		owned[3];

		rs_ring_ownership(ring, owned);
		UNIT_CHECK(owned[0] + owned[1] + owned[2] == ((rs_u128) 1 << 32), "ketama shares sum to 2^32");
	}
	rs_ring_free(ring);
}

/* The bucket search equals a plain linear scan on random rings and keys. */
static void
test_lookup_matches_linear_scan(void)
{
	char		namebuf[64][24];
	rs_ring_member members[64] = {{0}};
	uint64_t	state = 0x9e3779b97f4a7c15ULL;
	int			mismatches = 0;

	for (int i = 0; i < 64; i++)
	{
		snprintf(namebuf[i], sizeof(namebuf[i]), "node-%d", i);
		members[i].name = namebuf[i];
		members[i].name_len = strlen(namebuf[i]);
		members[i].weight = 1 + (i % 3);
	}
	for (uint32_t vnodes = 1; vnodes <= 64; vnodes *= 4)
	{
		rs_ring    *ring = NULL;

		UNIT_EQ_INT(rs_ring_build(RS_RING_MURMUR3, members, 64, vnodes, 0, &ring, NULL), RS_OK);
		if (!ring)
			continue;
		for (int k = 0; k < 20000; k++)
		{
			uint64_t	hash;
			uint32_t	linear = 0;

			state ^= state << 13;
			state ^= state >> 7;
			state ^= state << 17;
			/* mix in exact point tokens and their neighbours: the edges */
			hash = (k % 4 == 0) ? rs_ring_token(ring, state % ring->npoints) + (uint64_t) (k % 3) - 1 : state;
			while (linear < ring->npoints && rs_ring_token(ring, linear) < hash)
				linear++;
			if (linear == ring->npoints)
				linear = 0;
			mismatches += rs_ring_find_point(ring, hash) != linear;
		}
		UNIT_CHECK(rs_ring_find_point(ring, 0) == 0 || rs_ring_token(ring, 0) == 0, "hash 0 finds point 0");
		UNIT_EQ_INT(rs_ring_find_point(ring, UINT64_MAX),
					rs_ring_token(ring, ring->npoints - 1) == UINT64_MAX ? ring->npoints - 1 : 0);
		rs_ring_free(ring);
	}
	UNIT_EQ_INT(mismatches, 0);
}

/* First point >= hash by a plain binary search over the tokens, wrapping. */
static uint32_t
reference_point(const rs_ring *ring, uint64_t hash)
{
	uint32_t	lo = 0;
	uint32_t	hi = ring->npoints;

	while (lo < hi)
	{
		uint32_t	mid = lo + (hi - lo) / 2;

		if (rs_ring_token(ring, mid) < hash)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo == ring->npoints ? 0 : lo;
}

/* Lookups of hash agree with the reference; returns 1 on a mismatch. */
static int
lookup_differs(const rs_ring *ring, uint64_t hash)
{
	uint32_t	want = reference_point(ring, hash);

	return rs_ring_find_point(ring, hash) != want ||
		rs_ring_owner(ring, hash) != rs_ring_point_owner(ring, want);
}

/*
 * Both lookup layouts (a 4-point scan with about one point per bucket up to
 * 65,536 points, a 16-point scan with about eight above) against a plain
 * binary search: random hashes, every point's token and its neighbours, and
 * hashes that share a point's top 48 bits (the exact search's case); every
 * point of the fullest bucket, whose count exceeds the scan on both rings
 * (checked: the fast scan's hand-over to the exact search is exercised).
 */
static void
test_lookup_layouts(void)
{
	static char namebuf[1000][24];
	static rs_ring_member members[1000];
	uint32_t	sizes[2] = {64, 1000};
	uint32_t	widths[2] = {4, 16};
	uint64_t	state = 0x2545F4914F6CDD1DULL;

	for (int i = 0; i < 1000; i++)
	{
		snprintf(namebuf[i], sizeof(namebuf[i]), "node-%d", i);
		members[i].name = namebuf[i];
		members[i].name_len = strlen(namebuf[i]);
		members[i].weight = 1;
	}
	for (int s = 0; s < 2; s++)
	{
		rs_ring    *ring = NULL;
		int			mismatches = 0;
		uint32_t	fullest = 0;
		uint32_t	fullest_count = 0;

		UNIT_EQ_INT(rs_ring_build(RS_RING_MURMUR3, members, sizes[s], 256, 0, &ring, NULL), RS_OK);
		if (!ring)
			continue;
		UNIT_EQ_INT(ring->scan_width, widths[s]);
		/* every point of the small ring, every 7th of the large one */
		for (uint32_t p = 0; p < ring->npoints; p += ring->npoints > 100000 ? 7 : 1)
		{
			uint64_t	token = rs_ring_token(ring, p);

			state ^= state << 13;
			state ^= state >> 7;
			state ^= state << 17;
			mismatches += lookup_differs(ring, token);
			mismatches += lookup_differs(ring, token - 1);
			mismatches += lookup_differs(ring, token + 1);
			mismatches += lookup_differs(ring, (token & ~UINT64_C(0xFFFF)) | (state & 0xFFFF));
			mismatches += lookup_differs(ring, state);
		}
		for (uint32_t b = 0; b < ring->nbuckets; b++)
			if (rs_ring_bucket_first(ring, b + 1) - rs_ring_bucket_first(ring, b) > fullest_count)
			{
				fullest = b;
				fullest_count = rs_ring_bucket_first(ring, b + 1) - rs_ring_bucket_first(ring, b);
			}
		for (uint32_t p = rs_ring_bucket_first(ring, fullest); p <= rs_ring_bucket_first(ring, fullest + 1) && p < ring->npoints; p++)
			mismatches += lookup_differs(ring, rs_ring_token(ring, p) + 1) +
				lookup_differs(ring, rs_ring_token(ring, p));
		UNIT_CHECK(fullest_count > ring->scan_width, "fullest bucket of %u points holds %u, not more than the scan",
				   ring->npoints, fullest_count);
		mismatches += lookup_differs(ring, 0) + lookup_differs(ring, UINT64_MAX);
		UNIT_EQ_INT(mismatches, 0);
		rs_ring_free(ring);
	}
}

/*
 * Evenly spread tokens (1,000 nodes x 16, one in every 2^64 / 16,000, each
 * moved by up to two steps) get a bucket table half as large (about two
 * points a bucket; some buckets as full as the 4-point scan, but few random
 * hashes past their fourth point), random vnodes of as many points one
 * bucket per point; both answer as the binary search does, at every point,
 * its neighbours and random hashes, full buckets included.
 */
static void
test_lookup_even_tokens(void)
{
	static char namebuf[1000][24];
	static rs_ring_member members[1000];
	static uint64_t tokens[1000][16];
	uint64_t	state = 0x9E3779B97F4A7C15ULL;
	uint64_t	step = UINT64_MAX / 16000;
	rs_ring    *ring = NULL;
	int			mismatches = 0;
	uint32_t	full = 0;
	uint32_t	overflow = 0;

	for (int i = 0; i < 1000; i++)
	{
		snprintf(namebuf[i], sizeof(namebuf[i]), "node-%d", i);
		members[i].name = namebuf[i];
		members[i].name_len = strlen(namebuf[i]);
		members[i].weight = 1;
		for (int t = 0; t < 16; t++)
		{
			state ^= state << 13;
			state ^= state >> 7;
			state ^= state << 17;
			/* point t * 1000 + i of 16,000, moved by up to two steps */
			tokens[i][t] = step * (uint64_t) (t * 1000 + i) + state % (step * 2);
		}
		members[i].tokens = tokens[i];
		members[i].ntokens = 16;
	}
	UNIT_EQ_INT(rs_ring_build(RS_RING_MURMUR3, members, 1000, 256, 0, &ring, NULL), RS_OK);
	if (!ring)
		return;
	UNIT_EQ_INT(ring->npoints, 16000);
	UNIT_EQ_INT(ring->scan_width, 4);
	UNIT_EQ_INT(ring->nbuckets, 8192);
	for (uint32_t b = 0; b < ring->nbuckets; b++)
		full += rs_ring_bucket_first(ring, b + 1) - rs_ring_bucket_first(ring, b) >= 4;
	UNIT_CHECK(full > 0, "no bucket holds 4 points: the exact search is not exercised");
	for (uint32_t p = 0; p < ring->npoints; p++)
	{
		uint64_t	token = rs_ring_token(ring, p);

		state ^= state << 13;
		state ^= state >> 7;
		state ^= state << 17;
		mismatches += lookup_differs(ring, token) + lookup_differs(ring, token - 1) +
			lookup_differs(ring, token + 1) + lookup_differs(ring, state);
		/* a random hash past its bucket's fourth point: the scan hands over */
		{
			uint64_t	bucket = state >> ring->bucket_shift;

			overflow += rs_ring_bucket_first(ring, bucket + 1) - rs_ring_bucket_first(ring, bucket) >= 4 &&
				state > rs_ring_token(ring, rs_ring_bucket_first(ring, bucket) + 3);
		}
	}
	UNIT_CHECK(overflow <= ring->npoints / 64, "%u of %u random hashes overflow the scan", overflow, ring->npoints);
	mismatches += lookup_differs(ring, 0) + lookup_differs(ring, UINT64_MAX);
	UNIT_EQ_INT(mismatches, 0);
	rs_ring_free(ring);

	/* random vnodes, 16 a node: as many points, one bucket each */
	ring = NULL;
	for (int i = 0; i < 1000; i++)
	{
		members[i].tokens = NULL;
		members[i].ntokens = 0;
	}
	UNIT_EQ_INT(rs_ring_build(RS_RING_MURMUR3, members, 1000, 16, 0, &ring, NULL), RS_OK);
	if (!ring)
		return;
	UNIT_EQ_INT(ring->npoints, 16000);
	UNIT_EQ_INT(ring->nbuckets, 16384);
	mismatches = 0;
	for (uint32_t p = 0; p < ring->npoints; p++)
		mismatches += lookup_differs(ring, rs_ring_token(ring, p)) + lookup_differs(ring, rs_ring_token(ring, p) + 1);
	UNIT_EQ_INT(mismatches, 0);
	rs_ring_free(ring);
}

/* Adding a node moves only keys the new node captures, about 1/(N+1). */
static void
test_add_moves_only_to_new_node(void)
{
	const char *three[] = {"shard-jakarta-01", "shard-surabaya-02", "shard-makassar-03"};
	const char *four[] = {"shard-jakarta-01", "shard-surabaya-02", "shard-makassar-03", "shard-bandung-04"};
	rs_ring    *before = build(RS_RING_MURMUR3, three, NULL, 3, 256, 0);
	rs_ring    *after = build(RS_RING_MURMUR3, four, NULL, 4, 256, 0);
	int			moved = 0;
	int			wrong = 0;
	const int	keys = 100000;

	for (int k = 0; k < keys; k++)
	{
		char		key[32];
		int			len = snprintf(key, sizeof(key), "key-%d", k);
		uint64_t	hash = rs_murmur3_token(key, (size_t) len);
		const char *a = before->names[rs_ring_owner(before, hash)];
		const char *b = after->names[rs_ring_owner(after, hash)];

		if (strcmp(a, b) != 0)
		{
			moved++;
			wrong += strcmp(b, "shard-bandung-04") != 0;
		}
	}
	UNIT_EQ_INT(wrong, 0);
	UNIT_CHECK(fabs((double) moved / keys - 0.25) < 0.04, "moved fraction %.4f", (double) moved / keys);
	rs_ring_free(before);
	rs_ring_free(after);
}

/* Build errors are reported, not crashed on, and name the member. */
static void
test_build_errors(void)
{
	rs_ring_member m[3] = {{.name = "a", .name_len = 1, .weight = 1}, {.name = "b", .name_len = 1, .weight = 1},
		{.name = "a", .name_len = 1, .weight = 2}};
	rs_ring    *ring = (rs_ring *) 1;
	long		bad = -2;

	UNIT_EQ_INT(rs_ring_build(RS_RING_MURMUR3, m, 3, 4, 0, &ring, &bad), RS_ERR_DUPLICATE);
	UNIT_CHECK(ring == NULL, "no ring on error");
	UNIT_CHECK(bad == 0 || bad == 2, "bad member %ld", bad);
	UNIT_EQ_INT(rs_ring_build(RS_RING_MURMUR3, m, 0, 4, 0, &ring, &bad), RS_ERR_EMPTY);
	UNIT_EQ_INT(rs_ring_build(RS_RING_MURMUR3, m, 2, 0, 0, &ring, &bad), RS_ERR_INVALID);
	m[1].weight = 0;
	UNIT_EQ_INT(rs_ring_build(RS_RING_MURMUR3, m, 2, 4, 0, &ring, &bad), RS_ERR_INVALID);
	UNIT_EQ_INT(bad, 1);
	m[1].weight = NAN;
	UNIT_EQ_INT(rs_ring_build(RS_RING_MURMUR3, m, 2, 4, 0, &ring, &bad), RS_ERR_INVALID);
	m[1].weight = INFINITY;
	UNIT_EQ_INT(rs_ring_build(RS_RING_MURMUR3, m, 2, 4, 0, &ring, &bad), RS_ERR_INVALID);
	m[1].weight = 1e9;
	UNIT_EQ_INT(rs_ring_build(RS_RING_MURMUR3, m, 2, 256, 0, &ring, &bad), RS_ERR_TOO_MANY_POINTS);
	UNIT_EQ_INT(bad, 1);
	m[1].weight = 1;
	m[1].name_len = 0;
	UNIT_EQ_INT(rs_ring_build(RS_RING_MURMUR3, m, 2, 4, 0, &ring, &bad), RS_ERR_INVALID);
	/* Rounding: half away from zero, at least one point. */
	UNIT_EQ_U64(rs_murmur3_point_count(4, 0.125), 1);
	UNIT_EQ_U64(rs_murmur3_point_count(4, 0.375), 2);
	UNIT_EQ_U64(rs_murmur3_point_count(4, 0.001), 1);
	UNIT_EQ_U64(rs_murmur3_point_count(256, 1.5), 384);
	UNIT_EQ_U64(rs_murmur3_point_count(256, -1), 0);
}

/* Partition maps: holders, gaps and overlaps. */
static void
test_partmap(void)
{
	rs_partition_range fremis[] = {{0, 0, 127}, {1, 128, 255}};
	rs_partition_range gappy[] = {{0, 0, 100}, {1, 150, 255}, {2, 200, 255}, {2, 210, 220}};
	rs_partition_range bad[] = {{0, 0, 256}};
	rs_partmap	map;
	rs_partmap_issue issues[256];
	long		bad_index = -1;
	size_t		n;

	UNIT_EQ_INT(rs_partmap_build(fremis, 2, &map, NULL), RS_OK);
	UNIT_EQ_INT(rs_partmap_check(&map, issues), 0);
	UNIT_EQ_INT(rs_partmap_holder_count(&map, 28), 1);
	UNIT_EQ_INT(map.holders[map.offsets[28]], 0);
	UNIT_EQ_INT(map.holders[map.offsets[240]], 1);
	rs_partmap_free(&map);

	UNIT_EQ_INT(rs_partmap_build(gappy, 4, &map, NULL), RS_OK);
	n = rs_partmap_check(&map, issues);
	UNIT_EQ_INT(n, 2);
	UNIT_EQ_INT(issues[0].kind, RS_PARTMAP_GAP);
	UNIT_EQ_INT(issues[0].partition_start, 101);
	UNIT_EQ_INT(issues[0].partition_end, 149);
	UNIT_EQ_INT(issues[1].kind, RS_PARTMAP_OVERLAP);
	UNIT_EQ_INT(issues[1].partition_start, 200);
	UNIT_EQ_INT(issues[1].partition_end, 255);
	UNIT_EQ_INT(issues[1].nholders, 2);	/* node 2 listed twice counts once */
	rs_partmap_free(&map);

	UNIT_EQ_INT(rs_partmap_build(bad, 1, &map, &bad_index), RS_ERR_OUT_OF_RANGE);
	UNIT_EQ_INT(bad_index, 0);
	UNIT_EQ_INT(rs_partmap_build(NULL, 0, &map, NULL), RS_OK);
	n = rs_partmap_check(&map, issues);
	UNIT_EQ_INT(n, 1);
	UNIT_EQ_INT(issues[0].partition_end, 255);
	rs_partmap_free(&map);
}

/* Precomputed replica sets equal the walk, for every width and point. */
static void
test_precomputed_replicas(void)
{
	const char *names[] = {"a", "b", "c", "d"};
	const double weights[] = {1, 2, 1, 0.5};
	rs_ring    *walked = build(RS_RING_MURMUR3, names, weights, 4, 16, 0);
	rs_ring    *tabled = build(RS_RING_MURMUR3, names, weights, 4, 16, 0);
	int			wrong = 0;

	UNIT_EQ_INT(rs_ring_precompute_replicas(tabled, 3), RS_OK);
	UNIT_EQ_INT(tabled->replica_width, 3);
	for (uint32_t want = 1; want <= 4; want++)
		for (uint64_t h = 0; h < 4000; h++)
		{
			uint64_t	hash = h * 4611686018427387ULL + (h << 50);
			uint16_t	a[4],
						b[4];
			uint32_t	na = 0,
						nb = 0;

			rs_ring_replicas(walked, hash, want, a, &na);
			rs_ring_replicas(tabled, hash, want, b, &nb);
			wrong += na != nb || memcmp(a, b, na * sizeof(uint16_t)) != 0;
		}
	UNIT_EQ_INT(wrong, 0);
	rs_ring_free(walked);
	rs_ring_free(tabled);
}

int
main(void)
{
	test_tokens();
	test_murmur3_matches_reference();
	test_chapter_ring();
	test_weighted_ring();
	test_partitions();
	test_partition_paths_agree();
	test_ketama();
	test_lookup_matches_linear_scan();
	test_lookup_layouts();
	test_lookup_even_tokens();
	test_add_moves_only_to_new_node();
	test_build_errors();
	test_partmap();
	test_precomputed_replicas();
	return unit_report();
}

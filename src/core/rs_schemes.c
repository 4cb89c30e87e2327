/*
 * rs_schemes.c
 *		Movement and balance of five placement schemes on the same keys.
 */
#include "rs_schemes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rs_hash.h"
#include "rs_ring.h"
#include "rs_ring_alloc.h"

static const char *const scheme_names[RS_SCHEME_COUNT] = {
	"modulo", "range", "ring", "ring_tokens", "jump", "rendezvous"
};

/* Jump consistent hash (Lamping and Veach, 2014), as published. */
int32_t
rs_jump_hash(uint64_t key, int32_t buckets)
{
	int64_t		b = -1;
	int64_t		j = 0;

	while (j < buckets)
	{
		b = j;
		key = key * 2862933555777941757ULL + 1;
		j = (int64_t) ((double) (b + 1) * ((double) (1LL << 31) / (double) ((key >> 33) + 1)));
	}
	return (int32_t) b;
}

/* A strong 64-bit mix (splitmix64's finaliser) for rendezvous scores. */
static uint64_t
mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

/* A ring of nodes "node-0" .. "node-(n-1)". */
static rs_status
scheme_ring(uint32_t nodes, uint32_t vnodes, rs_ring **ring)
{
	rs_ring_member *members = calloc(nodes, sizeof(rs_ring_member));
	char	   *names = calloc(nodes, 16);
	rs_status	status;

	if (!members || !names)
	{
		free(members);
		free(names);
		return RS_ERR_NOMEM;
	}
	for (uint32_t i = 0; i < nodes; i++)
	{
		snprintf(names + i * 16, 16, "node-%u", i);
		members[i].name = names + i * 16;
		members[i].name_len = strlen(names + i * 16);
		members[i].weight = 1;
	}
	status = rs_ring_build(RS_RING_MURMUR3, members, nodes, vnodes, 0, ring, NULL);
	free(members);
	free(names);
	return status;
}

/*
 * Rings of the first from_nodes and to_nodes of nodes "node-0" … joining one
 * by one with allocated tokens.
 */
static rs_status
scheme_token_rings(uint32_t from_nodes, uint32_t to_nodes, rs_ring **from_ring, rs_ring **to_ring)
{
	uint32_t	n = from_nodes > to_nodes ? from_nodes : to_nodes;
	rs_ring_member *members = calloc(n, sizeof(rs_ring_member));
	char	   *names = calloc(n, 16);
	uint64_t   *tokens = malloc((size_t) n * RS_SCHEME_TOKENS * sizeof(uint64_t));
	rs_token_allocator *allocator = NULL;
	rs_status	status = (members && names && tokens) ? rs_token_allocator_create(1, &allocator) : RS_ERR_NOMEM;

	for (uint32_t i = 0; i < n && status == RS_OK; i++)
	{
		snprintf(names + i * 16, 16, "node-%u", i);
		members[i].name = names + i * 16;
		members[i].name_len = strlen(names + i * 16);
		members[i].weight = 1;
		members[i].tokens = tokens + (size_t) i * RS_SCHEME_TOKENS;
		members[i].ntokens = RS_SCHEME_TOKENS;
		status = rs_token_allocator_add(allocator, &members[i], RS_SCHEME_TOKENS,
										tokens + (size_t) i * RS_SCHEME_TOKENS);
	}
	if (status == RS_OK)
		status = rs_ring_build(RS_RING_MURMUR3, members, from_nodes, 1, 0, from_ring, NULL);
	if (status == RS_OK)
		status = rs_ring_build(RS_RING_MURMUR3, members, to_nodes, 1, 0, to_ring, NULL);
	rs_token_allocator_free(allocator);
	free(members);
	free(names);
	free(tokens);
	return status;
}

/* Node number of a ring's node index ("node-17" is 17). */
static uint32_t
ring_node_number(const rs_ring *ring, uint32_t index)
{
	return (uint32_t) strtoul(ring->names[index] + 5, NULL, 10);
}

/* The node of one key under one scheme with n nodes. */
static uint32_t
place(rs_scheme scheme, uint64_t token, uint32_t n, const rs_ring *ring,
	  const rs_ring *token_ring, const uint64_t *node_tokens)
{
	switch (scheme)
	{
		case RS_SCHEME_MODULO:
			return (uint32_t) (token % n);
		case RS_SCHEME_RANGE:
			return (uint32_t) (((rs_u128) token * n) >> 64);
		case RS_SCHEME_RING:
			return ring_node_number(ring, rs_ring_owner(ring, token));
		case RS_SCHEME_RING_TOKENS:
			return ring_node_number(token_ring, rs_ring_owner(token_ring, token));
		case RS_SCHEME_JUMP:
			return (uint32_t) rs_jump_hash(token, (int32_t) n);
		case RS_SCHEME_RENDEZVOUS:
			{
				uint32_t	best = 0;
				uint64_t	best_score = 0;

				for (uint32_t i = 0; i < n; i++)
				{
					uint64_t	score = mix64(token ^ node_tokens[i]);

					if (i == 0 || score > best_score)
					{
						best = i;
						best_score = score;
					}
				}
				return best;
			}
		case RS_SCHEME_COUNT:
			break;
	}
	return 0;
}

/* Compare every scheme (see rs_schemes.h). */
rs_status
rs_compare_schemes(uint32_t from_nodes, uint32_t to_nodes, uint32_t keys, uint32_t vnodes,
				   rs_scheme_result *results)
{
	uint32_t	max_nodes = from_nodes > to_nodes ? from_nodes : to_nodes;
	rs_ring    *from_ring = NULL;
	rs_ring    *to_ring = NULL;
	rs_ring    *from_tokens = NULL;
	rs_ring    *to_tokens = NULL;
	uint64_t   *tokens = NULL;
	uint64_t   *node_tokens = NULL;
	uint64_t   *counts = NULL;
	rs_status	status;

	if (from_nodes < 1 || to_nodes < 1 || from_nodes > 10000 || to_nodes > 10000 ||
		keys < 1 || keys > 10000000 || vnodes < 1 || vnodes > RS_RING_MAX_VNODES)
		return RS_ERR_INVALID;

	tokens = malloc((size_t) keys * sizeof(uint64_t));
	node_tokens = malloc((size_t) max_nodes * sizeof(uint64_t));
	counts = malloc((size_t) to_nodes * sizeof(uint64_t));
	status = (tokens && node_tokens && counts) ? RS_OK : RS_ERR_NOMEM;
	if (status == RS_OK)
		status = scheme_ring(from_nodes, vnodes, &from_ring);
	if (status == RS_OK)
		status = scheme_ring(to_nodes, vnodes, &to_ring);
	if (status == RS_OK)
		status = scheme_token_rings(from_nodes, to_nodes, &from_tokens, &to_tokens);
	if (status != RS_OK)
		goto done;

	for (uint32_t k = 0; k < keys; k++)
	{
		char		key[32];
		int			len = snprintf(key, sizeof(key), "key-%u", k);

		tokens[k] = rs_murmur3_token(key, (size_t) len);
	}
	for (uint32_t i = 0; i < max_nodes; i++)
	{
		char		name[32];
		int			len = snprintf(name, sizeof(name), "node-%u", i);

		node_tokens[i] = rs_murmur3_token(name, (size_t) len);
	}

	for (int s = 0; s < RS_SCHEME_COUNT; s++)
	{
		uint64_t	moved = 0;
		double		mean = (double) keys / to_nodes;
		double		max_count = 0;
		double		variance = 0;

		memset(counts, 0, (size_t) to_nodes * sizeof(uint64_t));
		for (uint32_t k = 0; k < keys; k++)
		{
			uint32_t	before = place((rs_scheme) s, tokens[k], from_nodes, from_ring, from_tokens, node_tokens);
			uint32_t	after = place((rs_scheme) s, tokens[k], to_nodes, to_ring, to_tokens, node_tokens);

			moved += before != after;
			counts[after]++;
		}
		for (uint32_t i = 0; i < to_nodes; i++)
		{
			double		share = (double) counts[i] / keys;

			if (counts[i] > max_count)
				max_count = (double) counts[i];
			variance += (share - 1.0 / to_nodes) * (share - 1.0 / to_nodes);
		}
		results[s].scheme = scheme_names[s];
		results[s].moved_fraction = (double) moved / keys;
		results[s].ideal_fraction = (double) (from_nodes > to_nodes ? from_nodes - to_nodes : to_nodes - from_nodes) /
			(double) max_nodes;
		results[s].max_over_mean = max_count / mean;
		results[s].stddev_share = sqrt(variance / to_nodes);
	}

done:
	rs_ring_free(from_ring);
	rs_ring_free(to_ring);
	rs_ring_free(from_tokens);
	rs_ring_free(to_tokens);
	free(tokens);
	free(node_tokens);
	free(counts);
	return status;
}

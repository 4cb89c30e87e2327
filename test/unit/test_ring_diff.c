/*
 * test_ring_diff.c
 *		Owner moves and copy changes between rings, checked against their
 *		definition: exact spans, and every sampled key agreeing.
 */
#include <stdlib.h>

#include "rs_ring_diff.h"
#include "unit.h"

static char names[8][32];

/* A murmur3 ring of nodes node-0 .. node-(n-1), optionally skipping one. */
static rs_ring *
ring_of(int n, int skip, uint32_t vnodes, double last_weight)
{
	rs_ring_member members[8] = {{0}};
	int			count = 0;
	rs_ring    *ring = NULL;

	for (int i = 0; i < n; i++)
	{
		if (i == skip)
			continue;
		snprintf(names[i], sizeof(names[i]), "node-%d", i);
		members[count].name = names[i];
		members[count].name_len = strlen(names[i]);
		members[count].weight = (i == n - 1) ? last_weight : 1.0;
		count++;
	}
	if (rs_ring_build(RS_RING_MURMUR3, members, (size_t) count, vnodes, 0, &ring, NULL) != RS_OK)
		abort();
	return ring;
}

/* Whether token t lies in (start, end], wrapping. */
static int
in_range(uint64_t t, uint64_t start, uint64_t end)
{
	if (start < end)
		return t > start && t <= end;
	return t > start || t <= end;
}

/* Owner of a node index by name in another ring. */
static rs_u128
owned_by(const rs_ring *ring, const char *name)
{
	rs_u128		owned[8];

	rs_ring_ownership(ring, owned);
	for (uint32_t i = 0; i < ring->nnodes; i++)
		if (strcmp(ring->names[i], name) == 0)
			return owned[i];
	return 0;
}

/* Sampled keys: every owner change lies in exactly the reported ranges. */
static void
check_moves_by_sampling(const rs_ring *a, const rs_ring *b, const rs_owner_move *moves, size_t n)
{
	uint64_t	state = 88172645463325252ULL;
	int			wrong = 0;

	for (int k = 0; k < 200000; k++)
	{
		const char *from;
		const char *to;
		const rs_owner_move *hit = NULL;

		state ^= state << 13;
		state ^= state >> 7;
		state ^= state << 17;
		from = a->names[rs_ring_owner(a, state)];
		to = b->names[rs_ring_owner(b, state)];
		for (size_t m = 0; m < n && !hit; m++)
			if (in_range(state, moves[m].range_start, moves[m].range_end))
				hit = &moves[m];
		if (strcmp(from, to) != 0)
			wrong += hit == NULL || strcmp(hit->from_node, from) != 0 || strcmp(hit->to_node, to) != 0;
		else
			wrong += hit != NULL;
	}
	UNIT_EQ_INT(wrong, 0);
}

/* Adding a node: every move goes to it, and the moves add up to its share. */
static void
test_add_node(void)
{
	rs_ring    *before = ring_of(4, 3, 64, 1.0);
	rs_ring    *after = ring_of(4, -1, 64, 1.0);
	rs_owner_move *moves = NULL;
	size_t		n = 0;
	rs_u128		total = 0;
	int			wrong_target = 0;

	UNIT_EQ_INT(rs_ring_owner_moves(before, after, &moves, &n), RS_OK);
	UNIT_CHECK(n > 0, "some ranges move");
	for (size_t i = 0; i < n; i++)
	{
		total += moves[i].span;
		wrong_target += strcmp(moves[i].to_node, "node-3") != 0;
	}
	UNIT_EQ_INT(wrong_target, 0);
	UNIT_CHECK(total == owned_by(after, "node-3"), "moved tokens equal the new node's share exactly");
	check_moves_by_sampling(before, after, moves, n);
	free(moves);
	rs_ring_free(before);
	rs_ring_free(after);
}

/* Removing a node: every move comes from it, adding up to its old share. */
static void
test_remove_node(void)
{
	rs_ring    *before = ring_of(5, -1, 32, 1.0);
	rs_ring    *after = ring_of(5, 2, 32, 1.0);
	rs_owner_move *moves = NULL;
	size_t		n = 0;
	rs_u128		total = 0;
	int			wrong_source = 0;

	UNIT_EQ_INT(rs_ring_owner_moves(before, after, &moves, &n), RS_OK);
	for (size_t i = 0; i < n; i++)
	{
		total += moves[i].span;
		wrong_source += strcmp(moves[i].from_node, "node-2") != 0;
	}
	UNIT_EQ_INT(wrong_source, 0);
	UNIT_CHECK(total == owned_by(before, "node-2"), "moved tokens equal the removed node's share");
	check_moves_by_sampling(before, after, moves, n);
	free(moves);
	rs_ring_free(before);
	rs_ring_free(after);
}

/* Reweighting moves keys both ways only to and from the reweighted node. */
static void
test_reweight(void)
{
	rs_ring    *before = ring_of(4, -1, 16, 1.0);
	rs_ring    *after = ring_of(4, -1, 16, 2.5);
	rs_owner_move *moves = NULL;
	size_t		n = 0;
	int			unrelated = 0;

	UNIT_EQ_INT(rs_ring_owner_moves(before, after, &moves, &n), RS_OK);
	for (size_t i = 0; i < n; i++)
		unrelated += strcmp(moves[i].to_node, "node-3") != 0 && strcmp(moves[i].from_node, "node-3") != 0;
	UNIT_EQ_INT(unrelated, 0);
	check_moves_by_sampling(before, after, moves, n);
	free(moves);

	/* A ring compared with itself moves nothing. */
	UNIT_EQ_INT(rs_ring_owner_moves(before, before, &moves, &n), RS_OK);
	UNIT_EQ_INT(n, 0);
	free(moves);
	rs_ring_free(before);
	rs_ring_free(after);
}

/* One node to two: the move covers exactly the new node's share, wrapping. */
static void
test_single_node_wrap(void)
{
	rs_ring    *before = ring_of(2, 1, 1, 1.0);
	rs_ring    *after = ring_of(2, -1, 1, 1.0);
	rs_owner_move *moves = NULL;
	size_t		n = 0;

	UNIT_EQ_INT(before->npoints, 1);
	UNIT_EQ_INT(rs_ring_owner_moves(before, after, &moves, &n), RS_OK);
	UNIT_EQ_INT(n, 1);
	if (n == 1)
	{
		UNIT_CHECK(moves[0].span == owned_by(after, "node-1"), "one range, the whole share");
		UNIT_EQ_STR(moves[0].to_node, "node-1");
	}
	check_moves_by_sampling(before, after, moves, n);
	free(moves);
	rs_ring_free(before);
	rs_ring_free(after);
}

/* Copy changes agree with the replica sets of sampled keys. */
static void
test_copy_changes(void)
{
	rs_ring    *before = ring_of(5, 4, 32, 1.0);
	rs_ring    *after = ring_of(5, -1, 32, 1.0);
	rs_copy_change *changes = NULL;
	size_t		n = 0;
	uint64_t	state = 2463534242ULL;
	int			wrong = 0;
	rs_u128		gained = 0,
				lost = 0;

	UNIT_EQ_INT(rs_ring_copy_changes(before, 3, after, 3, &changes, &n), RS_OK);
	for (size_t i = 0; i < n; i++)
	{
		if (changes[i].gains)
			gained += changes[i].span;
		else
			lost += changes[i].span;
	}
	UNIT_CHECK(gained == lost, "as many copies gained as lost when R is unchanged");
	for (int k = 0; k < 50000; k++)
	{
		uint16_t	a[3],
					b[3];
		uint32_t	na = 0,
					nb = 0;

		state ^= state << 13;
		state ^= state >> 7;
		state ^= state << 17;
		rs_ring_replicas(before, state, 3, a, &na);
		rs_ring_replicas(after, state, 3, b, &nb);
		for (size_t i = 0; i < n; i++)
		{
			int			in_old = 0,
						in_new = 0;

			if (!in_range(state, changes[i].range_start, changes[i].range_end))
				continue;
			for (uint32_t j = 0; j < na; j++)
				in_old |= strcmp(before->names[a[j]], changes[i].node) == 0;
			for (uint32_t j = 0; j < nb; j++)
				in_new |= strcmp(after->names[b[j]], changes[i].node) == 0;
			wrong += changes[i].gains ? !(in_new && !in_old) : !(in_old && !in_new);
		}
		/* and every difference is reported */
		for (uint32_t j = 0; j < nb; j++)
		{
			int			was = 0,
						reported = 0;

			for (uint32_t i2 = 0; i2 < na; i2++)
				was |= strcmp(before->names[a[i2]], after->names[b[j]]) == 0;
			for (size_t i = 0; i < n && !was; i++)
				reported |= changes[i].gains && strcmp(changes[i].node, after->names[b[j]]) == 0 &&
					in_range(state, changes[i].range_start, changes[i].range_end);
			wrong += !was && !reported;
		}
	}
	UNIT_EQ_INT(wrong, 0);
	free(changes);

	/* Raising R from 1 to 2 only adds copies. */
	UNIT_EQ_INT(rs_ring_copy_changes(after, 1, after, 2, &changes, &n), RS_OK);
	{
		int			losses = 0;
		rs_u128		total = 0;

		for (size_t i = 0; i < n; i++)
		{
			losses += !changes[i].gains;
			total += changes[i].span;
		}
		UNIT_EQ_INT(losses, 0);
		UNIT_CHECK(total == rs_ring_space(after), "one extra copy of the whole ring");
	}
	free(changes);
	rs_ring_free(before);
	rs_ring_free(after);
}

/* Move steps: every sampled key whose replica set changes is in exactly one step with both sets. */
static void
test_move_steps(void)
{
	rs_ring    *before = ring_of(5, 4, 32, 1.0);
	rs_ring    *after = ring_of(5, -1, 32, 1.0);
	rs_move_step *steps = NULL;
	size_t		n = 0;
	uint64_t	state = 1234567ULL;
	int			wrong = 0;
	rs_u128		moved = 0;

	UNIT_EQ_INT(rs_ring_move_steps(before, 2, after, 2, &steps, &n), RS_OK);
	UNIT_CHECK(n > 0, "some ranges change replicas");
	for (int k = 0; k < 50000; k++)
	{
		uint16_t	a[2],
					b[2];
		uint32_t	na = 0,
					nb = 0;
		int			changed;
		int			hits = 0;

		state ^= state << 13;
		state ^= state >> 7;
		state ^= state << 17;
		rs_ring_replicas(before, state, 2, a, &na);
		rs_ring_replicas(after, state, 2, b, &nb);
		changed = !((strcmp(before->names[a[0]], after->names[b[0]]) == 0 &&
					 strcmp(before->names[a[1]], after->names[b[1]]) == 0) ||
					(strcmp(before->names[a[0]], after->names[b[1]]) == 0 &&
					 strcmp(before->names[a[1]], after->names[b[0]]) == 0));
		for (size_t i = 0; i < n; i++)
			if (in_range(state, steps[i].range_start, steps[i].range_end))
			{
				hits++;
				wrong += strcmp(steps[i].old_nodes[0], before->names[a[0]]) != 0 ||
					strcmp(steps[i].new_nodes[0], after->names[b[0]]) != 0;
			}
		wrong += changed ? hits != 1 : hits != 0;
	}
	UNIT_EQ_INT(wrong, 0);
	for (size_t i = 0; i < n; i++)
		moved += steps[i].span;
	UNIT_CHECK(moved > 0 && moved < rs_ring_space(after), "a part of the ring moves");
	free(steps);
	rs_ring_free(before);
	rs_ring_free(after);
}

int
main(void)
{
	test_add_node();
	test_remove_node();
	test_reweight();
	test_single_node_wrap();
	test_copy_changes();
	test_move_steps();
	return unit_report();
}

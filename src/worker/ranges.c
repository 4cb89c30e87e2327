/*
 * ranges.c
 *		token_in_ranges(): on a worker, whether a ring token lies in one of
 *		the token ranges the coordinator gave.
 *
 * A fan-out asks each node for the rows it is the chosen reader of; the
 * coordinator, which alone knows a table's layout (its recorded placement
 * and how far a move has got), computes those as token ranges and sends
 * them with the query.  The node then needs no topology of its own to
 * answer for the right rows: what it holds beyond them (copies left by a
 * move, rows of ranges another replica serves) is filtered out here.
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/array.h"
#include "utils/lsyscache.h"

#include "types/ringtoken.h"

/* What a call site keeps: the ranges of the last array it was given. */
typedef struct TokenRanges
{
	ArrayType  *source;			/* a copy of the argument they were read from */
	ArrayType  *given;			/* the argument as last passed */
	bool		stable;			/* it is a constant (or a parameter) of the query */
	int			nranges;
	uint64	   *low;			/* inclusive, sorted, not overlapping */
	uint64	   *high;			/* inclusive */
} TokenRanges;

static void
read_ranges(TokenRanges *ranges, ArrayType *array, MemoryContext mcxt)
{
	Datum	   *values;
	bool	   *nulls;
	int			count;
	int16		typlen;
	bool		typbyval;
	char		typalign;
	MemoryContext old = MemoryContextSwitchTo(mcxt);

	if (ARR_NDIM(array) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("token ranges must be a one-dimensional array")));
	get_typlenbyvalalign(ARR_ELEMTYPE(array), &typlen, &typbyval, &typalign);
	deconstruct_array(array, ARR_ELEMTYPE(array), typlen, typbyval, typalign, &values, &nulls, &count);
	if (count % 2 != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("token ranges come in pairs (low, high), not %d values", count)));
	ranges->nranges = count / 2;
	ranges->low = palloc(sizeof(uint64) * Max(ranges->nranges, 1));
	ranges->high = palloc(sizeof(uint64) * Max(ranges->nranges, 1));
	for (int i = 0; i < ranges->nranges; i++)
	{
		if (nulls[2 * i] || nulls[2 * i + 1])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("token ranges cannot contain nulls")));
		ranges->low[i] = DatumGetRingToken(values[2 * i]);
		ranges->high[i] = DatumGetRingToken(values[2 * i + 1]);
		if (ranges->low[i] > ranges->high[i] || (i > 0 && ranges->low[i] <= ranges->high[i - 1]))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("token ranges must be sorted, each low <= high, without overlaps")));
	}
	ranges->source = palloc(VARSIZE(array));
	memcpy(ranges->source, array, VARSIZE(array));
	MemoryContextSwitchTo(old);
}

/*
 * The pair of the ranges argument (argument 1) that holds a token: its
 * index from 0, or -1.  The ranges are read once per call site.
 */
static int
range_of(FunctionCallInfo fcinfo, uint64 token)
{
	ArrayType  *array = PG_GETARG_ARRAYTYPE_P(1);
	TokenRanges *ranges = fcinfo->flinfo->fn_extra;
	int			lo = 0;
	int			hi;

	if (ranges == NULL)
		ranges = fcinfo->flinfo->fn_extra = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(TokenRanges));
	/*
	 * The coordinator sends the ranges as a constant of the query: read
	 * once; then the same pointer is the same value.  Anything else is
	 * compared by content on each call.
	 */
	if (ranges->source == NULL ||
		(!(array == ranges->given && ranges->stable) &&
		 (VARSIZE(ranges->source) != VARSIZE(array) || memcmp(ranges->source, array, VARSIZE(array)) != 0)))
	{
		read_ranges(ranges, array, fcinfo->flinfo->fn_mcxt);
		ranges->stable = get_fn_expr_arg_stable(fcinfo->flinfo, 1);
	}
	ranges->given = array;
	hi = ranges->nranges - 1;
	while (lo <= hi)
	{
		int			mid = lo + (hi - lo) / 2;

		if (token < ranges->low[mid])
			hi = mid - 1;
		else if (token > ranges->high[mid])
			lo = mid + 1;
		else
			return mid;
	}
	return -1;
}

PG_FUNCTION_INFO_V1(ringshard_token_in_ranges);

/* token_in_ranges(token, ranges): whether low <= token <= high for a pair of ranges. */
Datum
ringshard_token_in_ranges(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(range_of(fcinfo, PG_GETARG_RINGTOKEN(0)) >= 0);
}

PG_FUNCTION_INFO_V1(ringshard_token_range_of);

/*
 * token_range_of(token, ranges): the number (from 1) of the (low, high) pair
 * of ranges that holds the token, or NULL: rebalance counts the rows of
 * many steps in one scan of a node, one hash per row.
 */
Datum
ringshard_token_range_of(PG_FUNCTION_ARGS)
{
	int			found = range_of(fcinfo, PG_GETARG_RINGTOKEN(0));

	if (found < 0)
		PG_RETURN_NULL();
	PG_RETURN_INT32(found + 1);
}

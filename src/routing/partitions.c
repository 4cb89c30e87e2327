/*
 * partitions.c
 *		Partition maps in SQL: gap/overlap checks and the FREMIS-N YAML config.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/builtins.h"

#include "routing/topology_cache.h"
#include "rs_config.h"

PG_FUNCTION_INFO_V1(ringshard_check_partition_map);

/*
 * check_partition_map(map): each maximal run of partitions that no node holds
 * (gap) or that several nodes hold (overlap, i.e. replicated), with its nodes.
 */
Datum
ringshard_check_partition_map(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *map_name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	CachedMap  *map;
	rs_partmap_issue issues[RS_PARTITION_COUNT];
	size_t		nissues;

	InitMaterializedSRF(fcinfo, 0);
	map = topology_cache_map(map_name);
	nissues = rs_partmap_check(&map->map, issues);
	for (size_t i = 0; i < nissues; i++)
	{
		Datum		values[4];
		bool		nulls[4] = {false, false, false, false};
		Datum	   *holders = palloc(sizeof(Datum) * Max(issues[i].nholders, 1));

		for (uint32 h = 0; h < issues[i].nholders; h++)
			holders[h] = map->node_texts[map->map.holders[issues[i].first_holder + h]];
		values[0] = CStringGetTextDatum(issues[i].kind == RS_PARTMAP_GAP ? "gap" : "overlap");
		values[1] = Int32GetDatum(issues[i].partition_start);
		values[2] = Int32GetDatum(issues[i].partition_end);
		values[3] = PointerGetDatum(construct_array(holders, (int) issues[i].nholders,
													TEXTOID, -1, false, TYPALIGN_INT));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(ringshard_parse_partition_config);

/*
 * parse_partition_config(config): the entries of a YAML coordinator config,
 * in document order, or an error naming the field and line.
 */
Datum
ringshard_parse_partition_config(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	text	   *document = PG_GETARG_TEXT_PP(0);
	rs_config	config = {0};
	rs_config_error error;
	rs_status	status;

	InitMaterializedSRF(fcinfo, 0);
	memset(&error, 0, sizeof(error));
	status = rs_config_parse(VARDATA_ANY(document), VARSIZE_ANY_EXHDR(document), &config, &error);
	if (status != RS_OK)
	{
		/* a field named twice makes the config invalid: not a duplicate object */
		int			code = status == RS_ERR_DUPLICATE ? ERRCODE_INVALID_PARAMETER_VALUE
			: ringshard_core_error_code(status);

		ereport(ERROR,
				(errcode(code),
				 errmsg("invalid partition config: %s", error.message),
				 error.line > 0 ?
				 errdetail("At line %d, column %d%s%s.", error.line, error.column,
						   error.field[0] ? ", field " : "", error.field) :
				 (error.field[0] ? errdetail("Field %s.", error.field) : 0),
				 errhint("A config has version: \"v1\" and a list of nodes, each with address, partition_start and partition_end (0..255).")));
	}

	PG_TRY();
	{
		for (size_t i = 0; i < config.nentries; i++)
		{
			Datum		values[4];
			bool		nulls[4] = {false, false, false, false};

			values[0] = CStringGetTextDatum(config.entries[i].address);
			values[1] = Int32GetDatum(config.entries[i].partition_start);
			values[2] = Int32GetDatum(config.entries[i].partition_end);
			values[3] = Int32GetDatum(config.entries[i].line);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	}
	PG_FINALLY();
	{
		rs_config_free(&config);
	}
	PG_END_TRY();
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(ringshard_format_partition_config);

/* format_partition_config(addresses, starts, ends): the YAML config text. */
Datum
ringshard_format_partition_config(PG_FUNCTION_ARGS)
{
	ArrayType  *addresses = PG_GETARG_ARRAYTYPE_P(0);
	ArrayType  *starts = PG_GETARG_ARRAYTYPE_P(1);
	ArrayType  *ends = PG_GETARG_ARRAYTYPE_P(2);
	Datum	   *address_values;
	Datum	   *start_values;
	Datum	   *end_values;
	bool	   *address_nulls;
	bool	   *start_nulls;
	bool	   *end_nulls;
	int			n;
	int			n_starts;
	int			n_ends;
	rs_config_entry *entries;
	char	   *out = NULL;
	size_t		outlen = 0;
	rs_status	status;
	text	   *result;

	deconstruct_array(addresses, TEXTOID, -1, false, TYPALIGN_INT, &address_values, &address_nulls, &n);
	deconstruct_array(starts, INT4OID, 4, true, TYPALIGN_INT, &start_values, &start_nulls, &n_starts);
	deconstruct_array(ends, INT4OID, 4, true, TYPALIGN_INT, &end_values, &end_nulls, &n_ends);
	if (n != n_starts || n != n_ends)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("addresses, starts and ends must have the same length")));
	entries = palloc0(sizeof(rs_config_entry) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		if (address_nulls[i] || start_nulls[i] || end_nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("partition config entry %d has a null field", i + 1)));
		entries[i].address = TextDatumGetCString(address_values[i]);
		entries[i].partition_start = DatumGetInt32(start_values[i]);
		entries[i].partition_end = DatumGetInt32(end_values[i]);
	}
	status = rs_config_format(entries, (size_t) n, &out, &outlen);
	if (status != RS_OK)
		ringshard_report_core_error(status, "cannot write partition config");
	result = cstring_to_text_with_len(out, (int) outlen);
	free(out);
	PG_RETURN_TEXT_P(result);
}

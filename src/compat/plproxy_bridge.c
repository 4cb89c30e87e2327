/*
 * plproxy_bridge.c
 *		PL/Proxy's cluster configuration answered from a ringshard partition
 *		map: PL/Proxy functions say CLUSTER 'map' and RUN ON
 *		partition_for(keyspace, key), and reach the holder ringshard would.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "libpq-fe.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "remote/connection.h"
#include "routing/topology_cache.h"

PG_FUNCTION_INFO_V1(ringshard_plproxy_partitions);

/*
 * plproxy_partitions(map): 256 libpq connection strings, one per partition
 * in order: the partition's first healthy holder (or its first holder when
 * none is marked up).  A gap is an error: PL/Proxy cannot route to nothing.
 */
Datum
ringshard_plproxy_partitions(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *map_name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	CachedMap  *map;
	char	  **connstrs;

	/* A set of scalars: materialise it with a one-column descriptor of our own. */
	{
		MemoryContext old = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
		TupleDesc	desc = CreateTemplateTupleDesc(1);

		TupleDescInitEntry(desc, (AttrNumber) 1, "connstr", TEXTOID, -1, 0);
		rsinfo->returnMode = SFRM_Materialize;
		rsinfo->setDesc = BlessTupleDesc(desc);
		rsinfo->setResult = tuplestore_begin_heap(true, false, work_mem);
		MemoryContextSwitchTo(old);
	}
	map = topology_cache_map(map_name);
	connstrs = palloc0(sizeof(char *) * Max(map->nnodes, 1));
	for (int p = 0; p < RS_PARTITION_COUNT; p++)
	{
		uint32		first = map->map.offsets[p];
		uint32		holders = rs_partmap_holder_count(&map->map, p);
		uint32		chosen;
		Datum		value;
		bool		isnull = false;

		if (holders == 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("partition %d of map \"%s\" has no node", p, map_name),
					 errhint("PL/Proxy needs every partition held; ringshard.check_partition_map() lists the gaps.")));
		chosen = map->map.holders[first];
		for (uint32 h = 0; h < holders; h++)
			if (map->node_up[map->map.holders[first + h]])
			{
				chosen = map->map.holders[first + h];
				break;
			}
		if (connstrs[chosen] == NULL)
		{
			/* PL/Proxy adds the user; the database defaults to this one. */
			connstrs[chosen] = remote_node_conninfo(TextDatumGetCString(map->node_texts[chosen]));
		}
		value = CStringGetTextDatum(connstrs[chosen]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, &value, &isnull);
	}
	PG_RETURN_VOID();
}

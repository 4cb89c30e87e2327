/*
 * plan_state.c
 *		The typed plan state of scans and statements sent whole, as
 *		fdw_private lists (see plan_state.h).  Each struct's fields are
 *		listed once, in their order, and that list is expanded both into its
 *		writer and into its reader, so the two cannot disagree.
 */
#include "postgres.h"

#include "nodes/value.h"

#include "fdw/plan_state.h"

/* Writing: one list element per field. */
static List *
put_int(List *list, int value)
{
	return lappend(list, makeInteger(value));
}

static List *
put_string(List *list, const char *value)
{
	return lappend(list, makeString(pstrdup(value ? value : "")));
}

/* Reading: the fields in order, through a cursor. */
typedef struct PrivateReader
{
	List	   *list;
	int			next;
} PrivateReader;

static Node *
get_node(PrivateReader *r)
{
	if (r->next >= list_length(r->list))
		elog(ERROR, "ringshard: plan state ends early (field %d)", r->next);
	return list_nth(r->list, r->next++);
}

static int
get_int(PrivateReader *r)
{
	return intVal(get_node(r));
}

static char *
get_string(PrivateReader *r)
{
	return strVal(get_node(r));
}

static List *
get_list(PrivateReader *r)
{
	return (List *) get_node(r);
}

/*
 * Expanders of the field lists below: a field's writer appends it to list
 * from plan; its reader takes it back from the cursor r.  INT is an int,
 * Oid, enum or AttrNumber (of that type); BOOL a bool; TEXT a string (NULL
 * written as ""); LIST a List kept as it is; BUILT a List the writer builds
 * from the plan's arrays first, and the reader takes apart after (a local
 * variable of that name on both sides).
 */
#define WRITE_INT(field, type)	list = put_int(list, plan->field);
#define WRITE_BOOL(field)		list = put_int(list, plan->field);
#define WRITE_TEXT(field)		list = put_string(list, plan->field);
#define WRITE_LIST(field)		list = lappend(list, plan->field);
#define WRITE_BUILT(local)		list = lappend(list, local);
#define READ_INT(field, type)	plan->field = (type) get_int(&r);
#define READ_BOOL(field)		plan->field = get_int(&r) != 0;
#define READ_TEXT(field)		plan->field = get_string(&r);
#define READ_LIST(field)		plan->field = get_list(&r);
#define READ_BUILT(local)		local = get_list(&r);

/* RsScanPlan, in the order kept */
#define SCAN_PLAN_FIELDS(INT, BOOL, TEXT, LIST, BUILT) \
	INT(relid, Oid) INT(kind, RsScanKind) \
	LIST(select_tmpl) LIST(from_tmpl) LIST(where_tmpl) LIST(tail_tmpl) LIST(retrieved) \
	INT(nparams, int) INT(key_attnum, AttrNumber) BOOL(key_is_array) \
	BUILT(sort) \
	BOOL(upper) BOOL(aggregating) INT(limit_index, int) INT(offset_index, int) \
	BUILT(aggregates) BUILT(groups) \
	TEXT(pushed) TEXT(relations) TEXT(limit_sql) \
	LIST(tiebreak) BUILT(late) \
	INT(row_lock, int) BOOL(lock_nowait)

/* RsDirectPlan, in the order kept */
#define DIRECT_PLAN_FIELDS(INT, BOOL, LIST) \
	INT(relid, Oid) INT(kind, RsScanKind) \
	LIST(statement_tmpl) LIST(statement_prepared_tmpl) LIST(where_tmpl) \
	INT(nparams, int) INT(key_attnum, AttrNumber) BOOL(key_is_array) \
	BOOL(has_returning) LIST(returning)

List *
rsfdw_scan_plan_to_private(const RsScanPlan *plan)
{
	List	   *list = NIL;
	List	   *sort = NIL;
	List	   *aggregates = NIL;
	List	   *groups = NIL;
	List	   *late = NIL;

	for (int i = 0; i < plan->nsort; i++)
		sort = lappend(sort, list_make4_int(plan->sort[i].column, plan->sort[i].sort_operator,
											plan->sort[i].collation, plan->sort[i].nulls_first));
	for (int i = 0; i < plan->naggregates; i++)
	{
		const RsAggregatePlan *a = &plan->aggregates[i];

		aggregates = lappend(aggregates, lappend_int(list_make5_int(a->kind, a->column, a->output, a->partial_type,
																	a->function), a->collation));
	}
	for (int i = 0; i < plan->ngroups; i++)
		groups = lappend(groups, list_make2_int(plan->groups[i].equality_operator, plan->groups[i].collation));
	if (plan->late)
		late = list_make4(makeString(pstrdup(plan->late->inner_select)), makeString(pstrdup(plan->late->inner_order)),
						  makeString(pstrdup(plan->late->outer)), makeString(pstrdup(plan->late->row)));

	SCAN_PLAN_FIELDS(WRITE_INT, WRITE_BOOL, WRITE_TEXT, WRITE_LIST, WRITE_BUILT)
	return list;
}

RsScanPlan *
rsfdw_scan_plan_from_private(List *private)
{
	RsScanPlan *plan = palloc0(sizeof(RsScanPlan));
	PrivateReader r = {private, 0};
	List	   *sort;
	List	   *aggregates;
	List	   *groups;
	List	   *late;
	ListCell   *lc;

	SCAN_PLAN_FIELDS(READ_INT, READ_BOOL, READ_TEXT, READ_LIST, READ_BUILT)
	if (r.next != list_length(private))
		elog(ERROR, "ringshard: plan state has %d fields, not %d", list_length(private), r.next);

	plan->nsort = list_length(sort);
	plan->sort = palloc0(sizeof(RsSortKey) * Max(plan->nsort, 1));
	foreach(lc, sort)
	{
		List	   *key = lfirst(lc);
		RsSortKey  *s = &plan->sort[foreach_current_index(lc)];

		s->column = linitial_int(key);
		s->sort_operator = (Oid) lsecond_int(key);
		s->collation = (Oid) lthird_int(key);
		s->nulls_first = lfourth_int(key) != 0;
	}
	plan->naggregates = list_length(aggregates);
	plan->aggregates = palloc0(sizeof(RsAggregatePlan) * Max(plan->naggregates, 1));
	foreach(lc, aggregates)
	{
		List	   *d = lfirst(lc);
		RsAggregatePlan *a = &plan->aggregates[foreach_current_index(lc)];

		a->kind = (RsCombineKind) list_nth_int(d, 0);
		a->column = list_nth_int(d, 1);
		a->output = list_nth_int(d, 2);
		a->partial_type = (Oid) list_nth_int(d, 3);
		a->function = (Oid) list_nth_int(d, 4);
		a->collation = (Oid) list_nth_int(d, 5);
	}
	plan->ngroups = list_length(groups);
	plan->groups = palloc0(sizeof(RsGroupKey) * Max(plan->ngroups, 1));
	foreach(lc, groups)
	{
		plan->groups[foreach_current_index(lc)].equality_operator = (Oid) linitial_int((List *) lfirst(lc));
		plan->groups[foreach_current_index(lc)].collation = (Oid) lsecond_int((List *) lfirst(lc));
	}
	if (late != NIL)
	{
		plan->late = palloc(sizeof(RsLateCheck));
		plan->late->inner_select = strVal(linitial(late));
		plan->late->inner_order = strVal(lsecond(late));
		plan->late->outer = strVal(lthird(late));
		plan->late->row = strVal(lfourth(late));
	}
	return plan;
}

List *
rsfdw_direct_plan_to_private(const RsDirectPlan *plan)
{
	List	   *list = NIL;

	DIRECT_PLAN_FIELDS(WRITE_INT, WRITE_BOOL, WRITE_LIST)
	return list;
}

RsDirectPlan *
rsfdw_direct_plan_from_private(List *private)
{
	RsDirectPlan *plan = palloc0(sizeof(RsDirectPlan));
	PrivateReader r = {private, 0};

	DIRECT_PLAN_FIELDS(READ_INT, READ_BOOL, READ_LIST)
	if (r.next != list_length(private))
		elog(ERROR, "ringshard: plan state has %d fields, not %d", list_length(private), r.next);
	return plan;
}

/*
 * plan_state.c
 *		The typed plan state of scans and statements sent whole, as
 *		fdw_private lists (see plan_state.h).  Each struct has a writer and a
 *		reader, side by side, that visit its fields in the same order.
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

	list = put_int(list, plan->relid);
	list = put_int(list, plan->kind);
	list = lappend(list, plan->select_tmpl);
	list = lappend(list, plan->from_tmpl);
	list = lappend(list, plan->where_tmpl);
	list = lappend(list, plan->tail_tmpl);
	list = lappend(list, plan->retrieved);
	list = put_int(list, plan->nparams);
	list = put_int(list, plan->key_attnum);
	list = put_int(list, plan->key_is_array);
	list = lappend(list, sort);
	list = put_int(list, plan->upper);
	list = put_int(list, plan->aggregating);
	list = put_int(list, plan->limit_index);
	list = put_int(list, plan->offset_index);
	list = lappend(list, aggregates);
	list = lappend(list, groups);
	list = put_string(list, plan->pushed);
	list = put_string(list, plan->relations);
	list = put_string(list, plan->limit_sql);
	list = lappend(list, plan->tiebreak);
	list = lappend(list, late);
	list = put_int(list, plan->row_lock);
	list = put_int(list, plan->lock_nowait);
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

	plan->relid = (Oid) get_int(&r);
	plan->kind = (RsScanKind) get_int(&r);
	plan->select_tmpl = get_list(&r);
	plan->from_tmpl = get_list(&r);
	plan->where_tmpl = get_list(&r);
	plan->tail_tmpl = get_list(&r);
	plan->retrieved = get_list(&r);
	plan->nparams = get_int(&r);
	plan->key_attnum = (AttrNumber) get_int(&r);
	plan->key_is_array = get_int(&r) != 0;
	sort = get_list(&r);
	plan->upper = get_int(&r) != 0;
	plan->aggregating = get_int(&r) != 0;
	plan->limit_index = get_int(&r);
	plan->offset_index = get_int(&r);
	aggregates = get_list(&r);
	groups = get_list(&r);
	plan->pushed = get_string(&r);
	plan->relations = get_string(&r);
	plan->limit_sql = get_string(&r);
	plan->tiebreak = get_list(&r);
	late = get_list(&r);
	plan->row_lock = get_int(&r);
	plan->lock_nowait = get_int(&r) != 0;
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

	list = put_int(list, plan->relid);
	list = put_int(list, plan->kind);
	list = lappend(list, plan->statement_tmpl);
	list = lappend(list, plan->where_tmpl);
	list = put_int(list, plan->nparams);
	list = put_int(list, plan->key_attnum);
	list = put_int(list, plan->key_is_array);
	list = put_int(list, plan->has_returning);
	list = lappend(list, plan->returning);
	return list;
}

RsDirectPlan *
rsfdw_direct_plan_from_private(List *private)
{
	RsDirectPlan *plan = palloc0(sizeof(RsDirectPlan));
	PrivateReader r = {private, 0};

	plan->relid = (Oid) get_int(&r);
	plan->kind = (RsScanKind) get_int(&r);
	plan->statement_tmpl = get_list(&r);
	plan->where_tmpl = get_list(&r);
	plan->nparams = get_int(&r);
	plan->key_attnum = (AttrNumber) get_int(&r);
	plan->key_is_array = get_int(&r) != 0;
	plan->has_returning = get_int(&r) != 0;
	plan->returning = get_list(&r);
	if (r.next != list_length(private))
		elog(ERROR, "ringshard: plan state has %d fields, not %d", list_length(private), r.next);
	return plan;
}

-- Zones and explicit tokens (docs/routing.md §7, §8).  A ring member gains
-- its zone and its tokens, as the last columns (a fresh install defines them
-- last too); both NULL: a 1.1 ring routes as it did.
--@copy CREATE FUNCTION ringshard_internal.tokens_valid
ALTER TABLE ringshard.ring_members
	ADD COLUMN zone text
		CONSTRAINT zone_valid CHECK (zone <> '' AND octet_length(zone) <= 1024),
	ADD COLUMN tokens ringtoken[]
		CONSTRAINT tokens_valid CHECK (ringshard_internal.tokens_valid(tokens));

-- Functions whose arguments or result 1.2 changed: 50_definitions.sql
-- creates them again.  add_node, the previews and the row plans take a zone
-- and tokens; ring_balance shows zones and copies, and the views over it go
-- with it (a view of the database's own over them stops the update here,
-- naming it: drop it first, and create it again after).
DROP FUNCTION ringshard.add_node(text, text, text, float8);
DROP FUNCTION ringshard.preview_change(text, text, text, float8, boolean);
DROP FUNCTION ringshard.preview_add_node(text, text, float8);
DROP FUNCTION ringshard.preview_add_node_copies(text, text, float8);
DROP FUNCTION ringshard.proposed_replicas(text, text, text, text, float8);
DROP FUNCTION ringshard.proposed_replicas(anyelement, text, text, text, float8);
DROP FUNCTION ringshard.plan_table_summary(regclass, text, text, float8);
DROP FUNCTION ringshard.plan_table_moves(regclass, text, text, float8);
DROP FUNCTION ringshard_internal.ring_move_plan(text[], float8[], integer, integer, text);
DROP FUNCTION ringshard.ring_balance_report(text);
DROP VIEW ringshard.table_overview;
DROP VIEW ringshard.table_nodes;
DROP FUNCTION ringshard.ring_balance(text);

-- Placements recorded before 1.2 name each member's node and weight; 1.2
-- records its zone and tokens too, and there were none: say so, so that a
-- recorded placement equals the snapshot 1.2 takes of the same topology.
UPDATE ringshard.placements p
   SET snapshot = pg_catalog.jsonb_set(p.snapshot::pg_catalog.jsonb, '{members}',
           (SELECT coalesce(pg_catalog.jsonb_agg(m.member::pg_catalog.jsonb
                                                            OPERATOR(pg_catalog.||) '{"zone": null, "tokens": null}'::pg_catalog.jsonb
                                                            ORDER BY m.i), '[]'::pg_catalog.jsonb)
              FROM pg_catalog.json_array_elements(p.snapshot OPERATOR(pg_catalog.->) 'members') WITH ORDINALITY m(member, i)))::pg_catalog.json
 WHERE pg_catalog.json_typeof(p.snapshot OPERATOR(pg_catalog.->) 'members') OPERATOR(pg_catalog.=) 'array';

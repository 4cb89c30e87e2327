-- rebalance_status shows the rate and the time left: each step records when
-- its move started (a move recorded by 1.1 counts from the update).
ALTER TABLE ringshard.rebalance_progress ADD COLUMN started_at timestamptz NOT NULL DEFAULT pg_catalog.now();
-- The plan says the bytes each step copies too (counted with its rows; a
-- step recorded by 1.1 has none counted: NULL).
ALTER TABLE ringshard.rebalance_progress ADD COLUMN bytes_total bigint;

-- Moves in progress fence their keys (moving_ranges): the placement and the
-- steps' states invalidate the backends' routing.
--@copy CREATE TRIGGER invalidate_topology_cache AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON ringshard.placements
--@copy CREATE TRIGGER invalidate_topology_cache AFTER DELETE OR TRUNCATE ON ringshard.rebalance_progress
--@copy CREATE TRIGGER invalidate_topology_cache_on_state

-- Steps move in batches, one COPY node to node per target (copy_step_rows),
-- not in pages of JSON.
DROP FUNCTION ringshard_internal.rebalance_copy_start(regclass, integer);
DROP FUNCTION ringshard_internal.rebalance_copy_page(regclass, integer, text, integer);
DROP FUNCTION ringshard_internal.rebalance_finish_step(regclass, integer);

-- Reports show shares in per cent (share_pct, to a tenth): their result
-- columns changed, so 50_definitions.sql creates them again.
DROP FUNCTION ringshard.rebalance_plan_summary(regclass);
DROP FUNCTION ringshard_internal.summarize_rebalance(json);
DROP FUNCTION ringshard.table_balance_report(regclass);
-- The plan's count gives the bytes of each step's rows too.
DROP FUNCTION ringshard_internal.count_plan_rows(regclass, integer[], text[], text[]);

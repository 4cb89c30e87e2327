-- rebalance_status shows the rate and the time left: each step records when
-- its move started (a move recorded by 1.1 counts from the update).
ALTER TABLE ringshard.rebalance_progress ADD COLUMN started_at timestamptz NOT NULL DEFAULT pg_catalog.now();

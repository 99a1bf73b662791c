-- A queue's caps across nodes: its rate bucket (broker.RateBucket) lives
-- in its row, so that every node's leases refill and spend the same one,
-- under the row's lock (broker/postgres/caps.go). rate_last 0: not
-- started. rate_holder is the fired group (conveyor_groups.gid) the
-- rate_held tokens are kept for until rate_held_until (0: none).
ALTER TABLE conveyor_queues
    ADD COLUMN rate_tokens     double precision NOT NULL DEFAULT 0,
    ADD COLUMN rate_last       bigint NOT NULL DEFAULT 0,
    ADD COLUMN rate_held       double precision NOT NULL DEFAULT 0,
    ADD COLUMN rate_held_until bigint NOT NULL DEFAULT 0,
    ADD COLUMN rate_holder     bigint NOT NULL DEFAULT 0;

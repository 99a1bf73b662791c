-- The worker sessions of every node (broker.SessionRegistry), so that any
-- node lists them all. Each node writes its own: a row on open, one
-- statement every few seconds for the loads, a delete on close. A node
-- declared dead takes its sessions along when its row is deleted.
CREATE TABLE conveyor_sessions (
    id             text COLLATE "C" PRIMARY KEY,
    node           text COLLATE "C" NOT NULL REFERENCES conveyor_nodes (id) ON DELETE CASCADE,
    queues         jsonb   NOT NULL,
    concurrency    integer NOT NULL,
    in_flight      integer NOT NULL DEFAULT 0,
    labels         jsonb   NOT NULL,
    sdk_version    text    NOT NULL,
    batch_types    text[]  NOT NULL,
    -- Unix nanoseconds, as every time here (0: none).
    connected_at   bigint  NOT NULL,
    last_heartbeat bigint  NOT NULL DEFAULT 0
);
-- A node's sessions: its loads' update, and the cascade of its delete.
CREATE INDEX conveyor_sessions_node ON conveyor_sessions (node);

-- Worker releases (broker.ReleaseRegistry): when each was first seen, which
-- ranks them, and whether it was drained. first_seen is Unix ns.
CREATE TABLE conveyor_releases (
    id         text    PRIMARY KEY,
    first_seen bigint  NOT NULL,
    draining   boolean NOT NULL DEFAULT false
);

-- What routes a session's work, for the other nodes' ListWorkers: its
-- types (empty: every type), release and whether it authorizes starts.
ALTER TABLE conveyor_sessions
    ADD COLUMN types               text[]  NOT NULL DEFAULT '{}',
    ADD COLUMN release_id          text    NOT NULL DEFAULT '',
    ADD COLUMN start_authorization boolean NOT NULL DEFAULT false;

-- Worker releases (broker.ReleaseRegistry): when each was first seen, which
-- ranks them, and whether it was drained. first_seen is Unix ns.
CREATE TABLE conveyor_releases (
    id         text    PRIMARY KEY,
    first_seen bigint  NOT NULL,
    draining   boolean NOT NULL DEFAULT false
);

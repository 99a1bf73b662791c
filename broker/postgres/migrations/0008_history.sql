-- The queues' history (broker.HistoryKeeper): each queue's counters at the
-- opening of a minute (kept a day) and of a UTC day (kept 90 days).
-- resolution is broker.HistoryResolution (1 minute, 2 day); bucket is the
-- bucket's start in Unix ns. Keyed by time first, so that dropping what
-- fell out of retention is one range of the index.
CREATE TABLE conveyor_history (
    resolution smallint NOT NULL,
    bucket     bigint   NOT NULL,
    queue      text     NOT NULL,
    enqueued   bigint   NOT NULL,
    processed  bigint   NOT NULL,
    failed     bigint   NOT NULL,
    PRIMARY KEY (resolution, bucket, queue)
);

-- The time of the latest round of the history recorder (Unix ns): a queue
-- first sampled after it was made since then, and counts from zero there.
CREATE TABLE conveyor_history_round (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    at  bigint  NOT NULL
);

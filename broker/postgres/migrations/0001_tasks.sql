-- Conveyor's tables on PostgreSQL. Every time is a bigint of Unix
-- nanoseconds, passed in by the caller (0: none). Every name is of the
-- "C" collation, so that ids and names sort as their bytes do, as they do
-- on the embedded engine.

-- Queues: the pause flag, the configuration, and the rate bucket.
CREATE TABLE conveyor_queues (
    name              text COLLATE "C" PRIMARY KEY,
    paused            boolean NOT NULL DEFAULT false,
    concurrency_limit integer NOT NULL DEFAULT 0,
    max_active        integer NOT NULL DEFAULT 0,
    rate_per_second   integer NOT NULL DEFAULT 0,
    rate_burst        integer NOT NULL DEFAULT 0,
    group_max_size    integer NOT NULL DEFAULT 0,
    group_max_delay   bigint  NOT NULL DEFAULT 0,
    group_grace       bigint  NOT NULL DEFAULT 0,
    max_waiting       bigint  NOT NULL DEFAULT 0
);

-- Queue totals, spread over a few rows per queue so that concurrent
-- transactions seldom wait for one another's counter: a total is the sum
-- of a queue's rows.
CREATE TABLE conveyor_queue_totals (
    queue     text COLLATE "C" NOT NULL,
    shard     smallint NOT NULL,
    enqueued  bigint NOT NULL DEFAULT 0,
    processed bigint NOT NULL DEFAULT 0,
    failed    bigint NOT NULL DEFAULT 0,
    expired   bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, shard)
);

-- The FIFO order of ready tasks.
CREATE SEQUENCE conveyor_ready_seq;

-- Tasks, in every state until purged.
CREATE TABLE conveyor_tasks (
    id               text COLLATE "C" PRIMARY KEY,
    queue            text COLLATE "C" NOT NULL,
    type             text COLLATE "C" NOT NULL,
    state            smallint NOT NULL,
    priority         smallint NOT NULL,
    retried          integer  NOT NULL DEFAULT 0,
    max_retry        integer  NOT NULL,
    payload          bytea    NOT NULL,
    content_type     text     NOT NULL,
    metadata         jsonb,
    options          bytea,
    enqueued_at      bigint   NOT NULL,
    -- due_at is NextProcessAt: when a SCHEDULED or RETRY task is due, when
    -- a PENDING one became ready, a BLOCKED one's process_at.
    due_at           bigint   NOT NULL DEFAULT 0,
    -- ready_seq orders the ready tasks of a priority: first in, first out.
    -- Its default numbers the rows of an enqueue's COPY in order.
    ready_seq        bigint   NOT NULL DEFAULT nextval('conveyor_ready_seq'),
    started_at       bigint   NOT NULL DEFAULT 0,
    completed_at     bigint   NOT NULL DEFAULT 0,
    expires_at       bigint   NOT NULL DEFAULT 0,
    deadline         bigint   NOT NULL DEFAULT 0,
    -- expire_at is the earlier of expires_at and deadline (NULL: neither):
    -- a task still waiting then is archived.
    expire_at        bigint,
    timeout          bigint   NOT NULL DEFAULT 0,
    retention        bigint,
    -- purge_at is when a COMPLETED task with a retention of its own goes;
    -- the others go by completed_at and the purger's horizons.
    purge_at         bigint,
    retry_strategy   smallint,
    retry_base       bigint,
    retry_max        bigint,
    unique_key       text COLLATE "C",
    unique_until     bigint   NOT NULL DEFAULT 0,
    group_key        text COLLATE "C",
    group_gid        bigint,
    concurrency_key  text COLLATE "C",
    -- held marks a PENDING task its concurrency key holds back.
    held             boolean  NOT NULL DEFAULT false,
    lease_session    text,
    lease_token      bigint,
    lease_expiry     bigint,
    lease_limit      bigint,
    -- canceled marks an ACTIVE task an operator canceled.
    canceled         boolean  NOT NULL DEFAULT false,
    last_error       text     NOT NULL DEFAULT '',
    errors           jsonb,
    result           bytea,
    progress_percent integer  NOT NULL DEFAULT 0,
    progress_message text     NOT NULL DEFAULT '',
    -- spec_bytes is what the task's spec takes, for a group's byte bound.
    spec_bytes       integer  NOT NULL DEFAULT 0,
    -- A BLOCKED task's dependencies: how many it still waits for, whether
    -- one failed under ON_FAILURE_BLOCK, and the state it takes once done
    -- waiting (release).
    waiting          integer  NOT NULL DEFAULT 0,
    dep_failed       boolean  NOT NULL DEFAULT false,
    release_state    smallint NOT NULL DEFAULT 0,
    -- has_dependents is set once a task gains a dependent, so that the end
    -- of a task without one looks for none.
    has_dependents   boolean  NOT NULL DEFAULT false
);

-- The ready line: PENDING tasks not held back, by priority then FIFO.
CREATE INDEX conveyor_tasks_ready ON conveyor_tasks (queue, priority DESC, ready_seq)
    WHERE state = 2 AND NOT held;
-- The listing, by queue and state, in id order (a listing by type filters
-- it; one of every state merges the states: each index here is written on
-- every insert and state change, the hot path).
CREATE INDEX conveyor_tasks_list ON conveyor_tasks (queue, state, id);
-- Timers: due SCHEDULED and RETRY tasks, expiries of waiting tasks,
-- lease expiries, purges.
CREATE INDEX conveyor_tasks_due ON conveyor_tasks (due_at) WHERE state IN (1, 4);
CREATE INDEX conveyor_tasks_expire ON conveyor_tasks (expire_at)
    WHERE state IN (1, 2, 4, 8, 9) AND expire_at IS NOT NULL;
CREATE INDEX conveyor_tasks_lease ON conveyor_tasks (lease_expiry) WHERE state = 3;
CREATE INDEX conveyor_tasks_purge_own ON conveyor_tasks (purge_at) WHERE purge_at IS NOT NULL;
CREATE INDEX conveyor_tasks_ended ON conveyor_tasks (state, completed_at)
    WHERE state IN (5, 6, 7) AND purge_at IS NULL;
-- A concurrency key's held line, by priority then FIFO.
CREATE INDEX conveyor_tasks_held ON conveyor_tasks (queue, concurrency_key, priority DESC, ready_seq)
    WHERE held;
-- A group's members.
CREATE INDEX conveyor_tasks_group ON conveyor_tasks (group_gid) WHERE group_gid IS NOT NULL;

-- Lease tokens, unique for good.
CREATE SEQUENCE conveyor_lease_token;

-- Unique-key claims of incomplete tasks; until (0: none) ends one early.
CREATE TABLE conveyor_unique (
    key     text COLLATE "C" PRIMARY KEY,
    task_id text COLLATE "C" NOT NULL,
    until   bigint NOT NULL DEFAULT 0
);

-- Dependencies: task_id waits for dep_id (its ord-th dependency: a task
-- may name one twice, with two policies).
CREATE TABLE conveyor_deps (
    task_id    text COLLATE "C" NOT NULL,
    dep_id     text COLLATE "C" NOT NULL,
    ord        integer  NOT NULL,
    on_failure smallint NOT NULL,
    -- resolved is set once dep_id's end was applied to task_id (or it had
    -- ended when task_id was enqueued): an edge is applied once.
    resolved   boolean  NOT NULL DEFAULT false,
    PRIMARY KEY (task_id, ord)
);
CREATE INDEX conveyor_deps_dep ON conveyor_deps (dep_id);

-- Concurrency keys: how many of a key's tasks are admitted (ready or
-- ACTIVE), and how many of them are ACTIVE.
CREATE TABLE conveyor_ckeys (
    queue    text COLLATE "C" NOT NULL,
    key      text COLLATE "C" NOT NULL,
    admitted integer NOT NULL DEFAULT 0,
    active   integer NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, key)
);

-- Aggregation groups: one row per instance, open while it gathers, then
-- fired until its members are leased.
CREATE TABLE conveyor_groups (
    gid        bigserial PRIMARY KEY,
    queue      text COLLATE "C" NOT NULL,
    name       text COLLATE "C" NOT NULL,
    type       text COLLATE "C" NOT NULL,
    first      bigint  NOT NULL,
    last       bigint  NOT NULL,
    live       integer NOT NULL DEFAULT 0,
    bytes      bigint  NOT NULL DEFAULT 0,
    fires_at   bigint  NOT NULL DEFAULT 0,
    fired      boolean NOT NULL DEFAULT false,
    fire_seq   bigint,
    first_left boolean NOT NULL DEFAULT false
);
CREATE UNIQUE INDEX conveyor_groups_open ON conveyor_groups (queue, name, type) WHERE NOT fired;
CREATE INDEX conveyor_groups_fires ON conveyor_groups (fires_at) WHERE NOT fired;
CREATE INDEX conveyor_groups_fired ON conveyor_groups (queue, type, fire_seq) WHERE fired;
CREATE SEQUENCE conveyor_fire_seq;

-- Cron entries.
CREATE TABLE conveyor_crons (
    id           text COLLATE "C" PRIMARY KEY,
    spec         text    NOT NULL,
    queue        text    NOT NULL,
    type         text    NOT NULL,
    payload      bytea   NOT NULL,
    content_type text    NOT NULL,
    metadata     jsonb,
    options      bytea,
    paused       boolean NOT NULL DEFAULT false,
    next_run     bigint  NOT NULL DEFAULT 0,
    last_run     bigint  NOT NULL DEFAULT 0,
    last_fire    bigint  NOT NULL DEFAULT 0,
    last_task_id text    NOT NULL DEFAULT '',
    last_error   text    NOT NULL DEFAULT ''
);

-- push_error appends a failed attempt to a task's error history, keeping
-- the latest ten.
CREATE FUNCTION conveyor_push_error(hist jsonb, attempt integer, msg text, at bigint) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(jsonb_agg(e ORDER BY n), '[]'::jsonb)
    FROM (
        SELECT e, n FROM jsonb_array_elements(
            coalesce(hist, '[]'::jsonb) || jsonb_build_array(jsonb_build_object('a', attempt, 'm', msg, 't', at))
        ) WITH ORDINALITY AS x(e, n)
        ORDER BY n DESC LIMIT 10
    ) last
$$;

-- conveyor_sat_add is a + b, clamped to bigint's span instead of failing.
CREATE FUNCTION conveyor_sat_add(a bigint, b bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN b > 0 AND a > 9223372036854775807 - b THEN 9223372036854775807
        WHEN b < 0 AND a < -9223372036854775807 - b THEN -9223372036854775807
        ELSE a + b END
$$;

-- conveyor_lease_limit is broker.LeaseLimit: the latest expiry a lease of
-- an attempt started at start may have (NULL: none), for a task with
-- deadline and timeout (0: none).
CREATE FUNCTION conveyor_lease_limit(deadline bigint, timeout bigint, start bigint, grace bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$
    SELECT conveyor_sat_add(least(nullif(deadline, 0),
        CASE WHEN timeout > 0 THEN conveyor_sat_add(start, timeout) END), grace)
$$;

-- Routing by type and start authorization (broker.Route,
-- broker.StartAuthorizer).

-- at_most_once marks a task that runs only under start authorization;
-- start_authorized marks an ACTIVE task whose current attempt's start was
-- authorized (cleared whenever the task leaves ACTIVE or is leased again).
ALTER TABLE conveyor_tasks
    ADD COLUMN at_most_once     boolean NOT NULL DEFAULT false,
    ADD COLUMN start_authorized boolean NOT NULL DEFAULT false;

-- The ready line by type: a lease routed to some types walks one branch
-- per (type, at_most_once) it may take, in the line's order, and passes
-- over the other types' tasks without reading them. Its (queue, type,
-- at_most_once) prefix is also what WaitingKinds skips along. held is
-- never NULL: "held IS NOT TRUE" holds the same rows as "NOT held", but
-- the planner does not take one for the other, so that the statements
-- written for this index (saying it so) can use no other: without
-- statistics, or with stale ones, it would otherwise read the ready line
-- of conveyor_tasks_ready, whose order is the same, filtering it by type.
CREATE INDEX conveyor_tasks_ready_type ON conveyor_tasks (queue, type, at_most_once, priority DESC, ready_seq)
    WHERE state = 2 AND held IS NOT TRUE;
-- The ready line without the at-most-once tasks: a lease of a session that
-- does not ask before it starts a task (the zero broker.Route: older
-- workers, push endpoints) walks it as an open lease walks
-- conveyor_tasks_ready, never reading the at-most-once tasks that wait.
CREATE INDEX conveyor_tasks_ready_plain ON conveyor_tasks (queue, priority DESC, ready_seq)
    WHERE state = 2 AND NOT held AND NOT at_most_once;

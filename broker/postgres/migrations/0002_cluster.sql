-- Several nodes on one database (docs/scaling.md).

-- Nodes: each server registers here and renews last_seen on a heartbeat
-- (the database's clock, so that nodes' clocks need not agree). A node
-- whose heartbeat lapsed is dead: the leader releases its ACTIVE tasks and
-- deletes its row, and anything it still sends is refused (fencing).
CREATE TABLE conveyor_nodes (
    id         text COLLATE "C" PRIMARY KEY,
    address    text NOT NULL,
    version    text NOT NULL,
    started_at timestamptz NOT NULL DEFAULT now(),
    last_seen  timestamptz NOT NULL DEFAULT now()
);

-- The leader: one row, held by a node for a term until expires_at. A node
-- takes it when it expired, with the term one higher; the leader's jobs
-- lock it FOR SHARE under the term they hold, so that no takeover commits
-- while one of them runs (fencing).
CREATE TABLE conveyor_leader (
    one        boolean PRIMARY KEY DEFAULT true CHECK (one),
    node       text COLLATE "C" NOT NULL,
    term       bigint NOT NULL,
    expires_at timestamptz NOT NULL
);

-- lease_node is the node whose session holds an ACTIVE task's lease (only
-- meaningful while state = 3).
ALTER TABLE conveyor_tasks ADD COLUMN lease_node text COLLATE "C";

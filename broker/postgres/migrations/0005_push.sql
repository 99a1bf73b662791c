-- A queue's HTTP push endpoint (broker.PushEndpoint): stored with the
-- queue's other settings; the server invokes it. push_url '': none;
-- push_concurrency and push_timeout (ns) 0: the server's defaults.
ALTER TABLE conveyor_queues
    ADD COLUMN push_url         text    NOT NULL DEFAULT '',
    ADD COLUMN push_concurrency integer NOT NULL DEFAULT 0,
    ADD COLUMN push_timeout     bigint  NOT NULL DEFAULT 0;

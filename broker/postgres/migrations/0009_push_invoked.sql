-- push_invoked is set while the current attempt is a request to a push
-- endpoint that was durably recorded before it was sent
-- (broker.StartParams.Push): a restart, or a node's death, that finds the
-- task ACTIVE counts the attempt instead of handing it back unrun.
ALTER TABLE conveyor_tasks ADD COLUMN push_invoked boolean NOT NULL DEFAULT false;

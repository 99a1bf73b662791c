package main

import (
	"context"

	"connectrpc.com/connect"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// listEveryQueue is task ls without --queue: the tasks of every queue
// ListQueues names, merged in id order (ListTasks serves one queue at a
// time, each in id order, so this is a merge of sorted lists that holds a
// page per queue at most). The hint says how to see more when --limit cut
// the listing short: a page token continues one queue only, so there is
// none to give here.
func (c *taskLsCmd) listEveryQueue(ctx context.Context, cn *conn, out *taskList) (string, error) {
	res, err := cn.admin.ListQueues(ctx, connect.NewRequest(&conveyorv1.ListQueuesRequest{}))
	if err != nil {
		return "", err
	}
	page := int32(maxListPage)
	if !c.All {
		page = int32(min(maxListPage, c.Limit))
	}
	cursors := make([]*queueCursor, 0, len(res.Msg.GetQueues()))
	for _, q := range res.Msg.GetQueues() {
		cursors = append(cursors, &queueCursor{req: c.filter().request(q.GetName()), page: page})
	}
	for printed := 0; c.All || printed < c.Limit; printed++ {
		t, err := nextTask(ctx, cn, cursors)
		if err != nil || t == nil {
			return "", err
		}
		if err := out.add(t); err != nil {
			return "", err
		}
	}
	for _, q := range cursors {
		if len(q.buf) > 0 || !q.done {
			return "more tasks: raise --limit, use --all, or give --queue to page through one queue", nil
		}
	}
	return "", nil
}

// queueCursor is one queue's place in the merge: the page fetched and not
// yet printed, and the token of the next.
type queueCursor struct {
	req  *conveyorv1.ListTasksRequest
	page int32
	buf  []*conveyorv1.TaskInfo
	done bool // no page after buf
}

// fill fetches pages until the cursor holds a task or the queue has none
// left.
func (q *queueCursor) fill(ctx context.Context, cn *conn) error {
	for len(q.buf) == 0 && !q.done {
		q.req.PageSize = q.page
		res, err := cn.admin.ListTasks(ctx, connect.NewRequest(q.req))
		if err != nil {
			return err
		}
		q.buf = res.Msg.GetTasks()
		q.req.PageToken = res.Msg.GetNextPageToken()
		q.done = q.req.PageToken == ""
	}
	return nil
}

// nextTask takes the task with the smallest id among the queues' next
// ones (ids are ULIDs: their text sorts as they do); nil when every queue
// is done.
func nextTask(ctx context.Context, cn *conn, cursors []*queueCursor) (*conveyorv1.TaskInfo, error) {
	var first *queueCursor
	for _, q := range cursors {
		if err := q.fill(ctx, cn); err != nil {
			return nil, err
		}
		if len(q.buf) > 0 && (first == nil || q.buf[0].GetId() < first.buf[0].GetId()) {
			first = q
		}
	}
	if first == nil {
		return nil, nil
	}
	t := first.buf[0]
	first.buf = first.buf[1:]
	return t, nil
}

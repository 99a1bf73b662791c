package main

import (
	"context"
	"os"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// A value that names something on the server completes from the server:
// its argument or flag carries the tag complete:"KIND", and serverNames
// says how to list that kind. Completion calls the server the command
// line names (its --addr, --token and --token-file, before or after the
// command, else the environment and the defaults, as the command itself
// would), for at most completeTimeout; a server that does not answer, or
// refuses, gives no candidates and no message: Tab must never print an
// error into the line being typed.

// completeTimeout bounds the calls of one completion: Tab must not hang.
const completeTimeout = time.Second

// serverNames lists the names of each kind of the complete tag, given the
// words being completed (for the prefix and the flags on the line). A
// lister may return what it found before an error.
var serverNames = map[string]func(context.Context, *conn, *completion) ([]string, error){
	"queue":   func(ctx context.Context, cn *conn, _ *completion) ([]string, error) { return queueNames(ctx, cn) },
	"cron":    cronIDs,
	"task":    taskIDs,
	"release": releaseIDs,
}

// fromServer is the names of kind on the server, those that are safe to
// hand a shell; nil when it cannot be called.
func (c *completion) fromServer(kind string) []string {
	list := serverNames[kind]
	f := c.connection()
	if list == nil || f == nil {
		return nil
	}
	cn, err := f.dial()
	if err != nil {
		return nil
	}
	defer cn.http.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), completeTimeout)
	defer cancel()
	names, _ := list(ctx, cn, c) // no answer is no candidates
	// A name with a line break or a control character would break the
	// one-candidate-a-line protocol, or act on the terminal.
	return slices.DeleteFunc(names, func(n string) bool { return unsafeAt(n) >= 0 })
}

// connection is the connection flags of the command being completed,
// resolved as parsing it would: given after the command, else before it,
// else the environment, else the default. Nil when the command does not
// call a server.
func (c *completion) connection() *clientFlags {
	if nodeConnector(c.node) == nil {
		return nil
	}
	return &clientFlags{Addr: c.flagValue("addr"), Token: c.flagValue("token"), TokenFile: c.flagValue("token-file")}
}

func (c *completion) flagValue(name string) string {
	if v, ok := c.given[name]; ok {
		return v
	}
	if v, ok := c.global[name]; ok {
		return v
	}
	f := findFlag(c.node, "--"+name)
	if f == nil {
		return ""
	}
	for _, env := range f.Envs {
		if v, ok := os.LookupEnv(env); ok {
			return v
		}
	}
	return f.Default
}

func queueNames(ctx context.Context, cn *conn) ([]string, error) {
	res, err := cn.admin.ListQueues(ctx, connect.NewRequest(&conveyorv1.ListQueuesRequest{}))
	return namesOf(res, err, (*conveyorv1.ListQueuesResponse).GetQueues, (*conveyorv1.QueueInfo).GetName)
}

func cronIDs(ctx context.Context, cn *conn, _ *completion) ([]string, error) {
	res, err := cn.admin.ListCrons(ctx, connect.NewRequest(&conveyorv1.ListCronsRequest{}))
	return namesOf(res, err, (*conveyorv1.ListCronsResponse).GetEntries, (*conveyorv1.CronEntry).GetId)
}

func releaseIDs(ctx context.Context, cn *conn, _ *completion) ([]string, error) {
	res, err := cn.admin.ListReleases(ctx, connect.NewRequest(&conveyorv1.ListReleasesRequest{}))
	return namesOf(res, err, (*conveyorv1.ListReleasesResponse).GetReleases, (*conveyorv1.ReleaseInfo).GetReleaseId)
}

// namesOf is the name of each item a listing call answered, or its error.
func namesOf[Res, Item any](res *connect.Response[Res], err error, items func(*Res) []Item, name func(Item) string) ([]string, error) {
	if err != nil {
		return nil, err
	}
	list := items(res.Msg)
	names := make([]string, len(list))
	for i, it := range list {
		names[i] = name(it)
	}
	return names, nil
}

const (
	// maxTaskCandidates is how many task ids a completion offers: the
	// most recent (the greatest ULIDs) of those that match.
	maxTaskCandidates = 50
	// maxTasksScanned bounds the tasks a completion reads, over every
	// queue: ListTasks lists oldest first, and a shell waits.
	maxTasksScanned = 10 * maxListPage
)

// taskIDs is the ids that start with the word typed so far, of the
// --queue on the line or else of every queue, less those already on it
// (task cancel ID ID...). The server's search narrows the listing to ids
// (or metadata or payloads) that contain the word.
func taskIDs(ctx context.Context, cn *conn, c *completion) ([]string, error) {
	queues := []string{c.given["queue"]}
	if queues[0] == "" {
		var err error
		if queues, err = queueNames(ctx, cn); err != nil {
			return nil, err
		}
	}
	var ids []string
	var err error
	scanned := 0
	for _, q := range queues {
		req := &conveyorv1.ListTasksRequest{Queue: q, Search: c.cur, PageSize: maxListPage}
		for scanned < maxTasksScanned && err == nil {
			var res *connect.Response[conveyorv1.ListTasksResponse]
			if res, err = cn.admin.ListTasks(ctx, connect.NewRequest(req)); err != nil {
				break
			}
			scanned += len(res.Msg.GetTasks())
			for _, t := range res.Msg.GetTasks() {
				if id := t.GetId(); strings.HasPrefix(id, c.cur) && !slices.Contains(c.args, id) {
					ids = append(ids, id)
				}
			}
			if req.PageToken = res.Msg.GetNextPageToken(); req.PageToken == "" {
				break
			}
		}
	}
	slices.Sort(ids)
	return ids[max(0, len(ids)-maxTaskCandidates):], err
}

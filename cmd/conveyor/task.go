package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// taskCmd groups the commands on tasks, one file each (task_*.go).
type taskCmd struct {
	Ls      taskLsCmd      `cmd:"" help:"List a queue's tasks, by state, type or a search."`
	Get     taskGetCmd     `cmd:"" help:"Show one task."`
	Cancel  taskCancelCmd  `cmd:"" help:"Cancel tasks: waiting ones at once, running ones through their worker."`
	Delete  taskDeleteCmd  `cmd:"" help:"Delete tasks that are not running."`
	Run     taskRunCmd     `cmd:"" help:"Make scheduled, retrying, blocked, archived or canceled tasks pending now."`
	Archive taskArchiveCmd `cmd:"" help:"Archive waiting tasks."`
}

// stateNames are the task states by the short names the CLI takes and
// shows, in the order of their numbers.
var stateNames = []string{"scheduled", "pending", "active", "retry", "completed", "archived", "canceled", "aggregating", "blocked"}

// parseState is the TaskState of a short name; "" and "all" are
// TASK_STATE_UNSPECIFIED (every state, where a listing allows it).
func parseState(name string) conveyorv1.TaskState {
	return conveyorv1.TaskState(conveyorv1.TaskState_value["TASK_STATE_"+strings.ToUpper(name)])
}

// stateName is the short name of s, such as "pending".
func stateName(s conveyorv1.TaskState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "TASK_STATE_"))
}

// printTask writes t to w: JSON with --json, else an aligned key/value
// listing for people that leaves unset fields out.
func (f *clientFlags) printTask(w io.Writer, t *conveyorv1.TaskInfo) error {
	if f.JSON {
		return writeJSON(w, t)
	}
	var l listing
	l.add("id", t.GetId())
	l.add("queue", t.GetQueue())
	l.add("type", t.GetType())
	l.add("state", stateName(t.GetState()))
	l.add("priority", fmt.Sprint(t.GetPriority()))
	l.add("retried", fmt.Sprintf("%d/%d", t.GetRetried(), t.GetMaxRetry()))
	l.addBlockIf("last_error", t.GetLastError())
	l.add("content_type", t.GetContentType())
	l.addBlock("payload", showBytes(t.GetPayload()))
	l.addIf("metadata", showMap(t.GetMetadata()))
	l.addTime("enqueued_at", t.GetEnqueuedAt())
	l.addTime("next_process_at", t.GetNextProcessAt())
	l.addTime("started_at", t.GetStartedAt())
	l.addTime("completed_at", t.GetCompletedAt())
	l.addTime("expires_at", t.GetExpiresAt())
	l.addTime("deadline", t.GetOptions().GetDeadline())
	l.addIf("group", t.GetGroup())
	l.addIf("concurrency_key", t.GetConcurrencyKey())
	l.addIf("unique_key", t.GetOptions().GetUniqueKey())
	for _, d := range t.GetDependsOn() {
		l.add("depends_on", d.GetTaskId()+" (on failure: "+onFailure(d.GetOnFailure())+")")
	}
	l.addIf("session_id", t.GetSessionId())
	if t.GetProgressPercent() != 0 || t.GetProgressMessage() != "" {
		l.add("progress", strings.TrimSpace(fmt.Sprintf("%d%% %s", t.GetProgressPercent(), t.GetProgressMessage())))
	}
	if len(t.GetResult()) > 0 {
		l.addBlock("result", showBytes(t.GetResult()))
	}
	return l.write(w)
}

// onFailure is a dependency's policy by its short name; unspecified is
// shown as what the server does with it, block.
func onFailure(f conveyorv1.OnFailure) string {
	if f == conveyorv1.OnFailure_ON_FAILURE_UNSPECIFIED {
		f = conveyorv1.OnFailure_ON_FAILURE_BLOCK
	}
	return strings.ToLower(strings.TrimPrefix(f.String(), "ON_FAILURE_"))
}

// showMap is m as "k=v, k=v" sorted by key; "" when empty.
func showMap[V any](m map[string]V) string {
	pairs := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		pairs = append(pairs, fmt.Sprintf("%s=%v", k, m[k]))
	}
	return strings.Join(pairs, ", ")
}

package conveyor

import (
	"context"
	"time"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
)

// GroupInfo describes one aggregation group waiting to fire.
type GroupInfo struct {
	// Queue is the group's queue.
	Queue string
	// Group is the group key.
	Group string
	// Type is the members' task type.
	Type string
	// Size counts the members waiting.
	Size int
	// FirstEnqueuedAt is when the oldest waiting member was enqueued.
	FirstEnqueuedAt time.Time
	// LastEnqueuedAt is when the newest waiting member was enqueued.
	LastEnqueuedAt time.Time
	// FiresAt is when the group fires by time; a group that has fired and
	// waits for a worker that handles its type shows the time it fired.
	FiresAt time.Time
}

// ListGroups lists the aggregation groups waiting to fire, ordered by
// queue, group and type: those of queue, or of every queue when queue is
// empty. An invalid queue name fails with ErrInvalidArgument.
func (i *Inspector) ListGroups(ctx context.Context, queue string) ([]*GroupInfo, error) {
	res, err := adminCall(ctx, i.admin, &conveyorv1.ListGroupsRequest{Queue: queue}, repeatable, conveyorv1connect.AdminServiceClient.ListGroups)
	if err != nil {
		return nil, err
	}
	out := make([]*GroupInfo, len(res.GetGroups()))
	for k, g := range res.GetGroups() {
		out[k] = &GroupInfo{Queue: g.GetQueue(), Group: g.GetGroup(), Type: g.GetType(), Size: int(g.GetSize()),
			FirstEnqueuedAt: timeOrZero(g.GetFirstEnqueuedAt()), LastEnqueuedAt: timeOrZero(g.GetLastEnqueuedAt()),
			FiresAt: timeOrZero(g.GetFiresAt())}
	}
	return out, nil
}

// WorkerInfo describes one live worker session, or a queue's push
// endpoint, which the server lists as a worker whose Labels["push"] is its
// URL.
type WorkerInfo struct {
	// SessionID is the session's ULID.
	SessionID string
	// NodeID is the server node the session is on (nodes sharing a
	// database); empty on the embedded engine.
	NodeID string
	// Queues are the served queues and their weights.
	Queues map[string]int
	// Concurrency is the declared concurrency.
	Concurrency int
	// InFlight counts the tasks dispatched and not yet answered.
	InFlight int
	// TaskIDs are the tasks the session holds.
	TaskIDs []string
	// Types are the task types the worker has handlers for; empty: every type.
	Types []string
	// BatchTypes are the task types the worker handles as batches.
	BatchTypes []string
	// ReleaseID is the worker's release; empty: unversioned.
	ReleaseID string
	// Draining is set when the worker's release was drained: it receives
	// no new work.
	Draining bool
	// StartAuthorization is set when the worker asks before it starts an
	// at-most-once task (only such a worker is given one).
	StartAuthorization bool
	// Labels are the worker's labels.
	Labels map[string]string
	// SDKVersion is the worker's SDK version.
	SDKVersion string
	// ConnectedAt is when the session opened.
	ConnectedAt time.Time
	// LastHeartbeatAt is when its latest heartbeat arrived.
	LastHeartbeatAt time.Time
}

// ListWorkers lists the live worker sessions (of every node, when several
// share a database) and this node's push endpoints, ordered by session
// id. Another node's sessions are as that node last wrote them: their
// in-flight counts and heartbeats every few seconds.
func (i *Inspector) ListWorkers(ctx context.Context) ([]*WorkerInfo, error) {
	res, err := adminCall(ctx, i.admin, &conveyorv1.ListWorkersRequest{}, repeatable, conveyorv1connect.AdminServiceClient.ListWorkers)
	if err != nil {
		return nil, err
	}
	out := make([]*WorkerInfo, len(res.GetWorkers()))
	for k, w := range res.GetWorkers() {
		out[k] = newWorkerInfo(w)
	}
	return out, nil
}

func newWorkerInfo(w *conveyorv1.WorkerInfo) *WorkerInfo {
	var queues map[string]int
	if len(w.GetQueues()) > 0 {
		queues = make(map[string]int, len(w.GetQueues()))
		for q, weight := range w.GetQueues() {
			queues[q] = int(weight)
		}
	}
	return &WorkerInfo{
		SessionID: w.GetSessionId(), NodeID: w.GetNodeId(), Queues: queues,
		Concurrency: int(w.GetConcurrency()), InFlight: int(w.GetInFlight()), TaskIDs: w.GetTaskIds(),
		Types: w.GetTypes(), BatchTypes: w.GetBatchTypes(), ReleaseID: w.GetReleaseId(), Draining: w.GetDraining(),
		StartAuthorization: w.GetStartAuthorization(), Labels: w.GetLabels(), SDKVersion: w.GetSdkVersion(),
		ConnectedAt: timeOrZero(w.GetConnectedAt()), LastHeartbeatAt: timeOrZero(w.GetLastHeartbeatAt()),
	}
}

// ReleaseInfo describes one worker release the server has seen (see
// WithReleaseID).
type ReleaseInfo struct {
	// ReleaseID is the release's id.
	ReleaseID string
	// FirstSeenAt is when a session of it first registered; releases rank
	// by it, the newest first, and new work goes to the newest that can
	// take it.
	FirstSeenAt time.Time
	// Draining is set once DrainRelease named it.
	Draining bool
	// Sessions counts its live sessions.
	Sessions int
}

// ListReleases lists the worker releases the server has seen, the newest
// first.
func (i *Inspector) ListReleases(ctx context.Context) ([]*ReleaseInfo, error) {
	res, err := adminCall(ctx, i.admin, &conveyorv1.ListReleasesRequest{}, repeatable, conveyorv1connect.AdminServiceClient.ListReleases)
	if err != nil {
		return nil, err
	}
	out := make([]*ReleaseInfo, len(res.GetReleases()))
	for k, r := range res.GetReleases() {
		out[k] = &ReleaseInfo{ReleaseID: r.GetReleaseId(), FirstSeenAt: timeOrZero(r.GetFirstSeenAt()),
			Draining: r.GetDraining(), Sessions: int(r.GetSessions())}
	}
	return out, nil
}

// DrainRelease stops new work going to the sessions of the release with
// id: once it returns, they receive no new task. Draining a release twice
// changes nothing. A release the server never saw (see ListReleases)
// fails with ErrNotFound; an empty id, or one over 1,024 bytes, with
// ErrInvalidArgument.
func (i *Inspector) DrainRelease(ctx context.Context, id string) error {
	_, err := adminCall(ctx, i.admin, &conveyorv1.DrainReleaseRequest{ReleaseId: id}, repeatable, conveyorv1connect.AdminServiceClient.DrainRelease)
	return err
}

// NodeInfo describes one serving node.
type NodeInfo struct {
	// ID identifies the node.
	ID string
	// Address is where the node listens.
	Address string
	// Version is the node's build version.
	Version string
	// StartedAt is when the node started.
	StartedAt time.Time
	// LastSeenAt is the node's last heartbeat (nodes sharing a database);
	// zero on the embedded engine.
	LastSeenAt time.Time
	// Leader is set on the node that runs the jobs that run once across
	// nodes (promotion, purges, cron, sweeping dead nodes).
	Leader bool
}

// ClusterInfo describes the serving nodes, as the answering node sees them.
type ClusterInfo struct {
	// Nodes are the serving nodes (one on the embedded engine).
	Nodes []NodeInfo
	// Version is the answering node's build version.
	Version string
	// Uptime is how long the answering node has run.
	Uptime time.Duration
	// StorageEngine names the broker engine, such as "bbolt".
	StorageEngine string
}

// GetClusterInfo describes the serving nodes.
func (i *Inspector) GetClusterInfo(ctx context.Context) (*ClusterInfo, error) {
	res, err := adminCall(ctx, i.admin, &conveyorv1.GetClusterInfoRequest{}, repeatable, conveyorv1connect.AdminServiceClient.GetClusterInfo)
	if err != nil {
		return nil, err
	}
	out := &ClusterInfo{Nodes: make([]NodeInfo, len(res.GetNodes())), Version: res.GetVersion(),
		Uptime: res.GetUptime().AsDuration(), StorageEngine: res.GetStorageEngine()}
	for k, n := range res.GetNodes() {
		out.Nodes[k] = NodeInfo{ID: n.GetId(), Address: n.GetAddress(), Version: n.GetVersion(),
			StartedAt: timeOrZero(n.GetStartedAt()), LastSeenAt: timeOrZero(n.GetLastSeenAt()), Leader: n.GetLeader()}
	}
	return out, nil
}

// BrokerInfo describes the storage engine. Its figures are the engine's:
// the file ones the embedded engine's, the database ones PostgreSQL's,
// zero on the other.
type BrokerInfo struct {
	// Engine names the broker engine, such as "bbolt".
	Engine string
	// DataPath is the engine's data file or address.
	DataPath string
	// TaskCounts maps state names (TaskState.String, such as "pending") to
	// task counts over all queues.
	TaskCounts map[string]int64
	// FileSizeBytes is the data file's size (the embedded engine).
	FileSizeBytes int64
	// FreePages counts the data file's free pages (the embedded engine).
	FreePages int64
	// DatabaseSizeBytes is what the engine's tables and indexes take
	// (PostgreSQL).
	DatabaseSizeBytes int64
	// LiveTuples and DeadTuples are the database's estimates of the live
	// and dead (not yet vacuumed) rows of the engine's tables (PostgreSQL).
	LiveTuples, DeadTuples int64
}

// GetBrokerInfo describes the storage engine.
func (i *Inspector) GetBrokerInfo(ctx context.Context) (*BrokerInfo, error) {
	res, err := adminCall(ctx, i.admin, &conveyorv1.GetBrokerInfoRequest{}, repeatable, conveyorv1connect.AdminServiceClient.GetBrokerInfo)
	if err != nil {
		return nil, err
	}
	return &BrokerInfo{Engine: res.GetEngine(), DataPath: res.GetDataPath(), TaskCounts: res.GetTaskCounts(),
		FileSizeBytes: res.GetFileSizeBytes(), FreePages: res.GetFreePages(), DatabaseSizeBytes: res.GetDatabaseSizeBytes(),
		LiveTuples: res.GetLiveTuples(), DeadTuples: res.GetDeadTuples()}, nil
}

import type {
  GetBrokerInfoResponse,
  GetClusterInfoResponse,
  GroupInfo,
  ReleaseInfo,
  WorkerInfo,
} from "./gen/conveyor/v1/admin_pb.js";
import { type InspectorRpc, rpc } from "./inspector_rpc.js";
import type { CallOptions } from "./client.js";

/**
 * ClusterInfo describes the serving nodes as the answering node sees them:
 * `nodes` (one on the embedded engine; `leader` set on the node that runs
 * the jobs that run once across nodes), its `version`, `uptime` and
 * `storageEngine`.
 */
export type ClusterInfo = GetClusterInfoResponse;

/**
 * BrokerInfo describes the storage engine: its `engine` and `dataPath`,
 * `taskCounts` by state name (`pending`, ...) over all queues, and the
 * engine's own figures (the file's for the embedded engine, the
 * database's for PostgreSQL, zero on the other).
 */
export type BrokerInfo = GetBrokerInfoResponse;

/** listGroups is Inspector.listGroups. */
export async function listGroups(c: InspectorRpc, queue: string, call: CallOptions): Promise<GroupInfo[]> {
  const res = await rpc(call.signal, () => c.admin.listGroups({ queue }, { signal: call.signal }));
  return res.groups;
}

/** listWorkers is Inspector.listWorkers. */
export async function listWorkers(c: InspectorRpc, call: CallOptions): Promise<WorkerInfo[]> {
  const res = await rpc(call.signal, () => c.admin.listWorkers({}, { signal: call.signal }));
  return res.workers;
}

/** listReleases is Inspector.listReleases. */
export async function listReleases(c: InspectorRpc, call: CallOptions): Promise<ReleaseInfo[]> {
  const res = await rpc(call.signal, () => c.admin.listReleases({}, { signal: call.signal }));
  return res.releases;
}

/** drainRelease is Inspector.drainRelease. */
export async function drainRelease(c: InspectorRpc, id: string, call: CallOptions): Promise<void> {
  await rpc(call.signal, () => c.admin.drainRelease({ releaseId: id }, { signal: call.signal }));
}

/** getClusterInfo is Inspector.getClusterInfo. */
export async function getClusterInfo(c: InspectorRpc, call: CallOptions): Promise<ClusterInfo> {
  return rpc(call.signal, () => c.admin.getClusterInfo({}, { signal: call.signal }));
}

/** getBrokerInfo is Inspector.getBrokerInfo. */
export async function getBrokerInfo(c: InspectorRpc, call: CallOptions): Promise<BrokerInfo> {
  return rpc(call.signal, () => c.admin.getBrokerInfo({}, { signal: call.signal }));
}

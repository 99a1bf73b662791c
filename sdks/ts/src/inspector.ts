import { createClient } from "@connectrpc/connect";
import type { CallOptions } from "./client.js";
import type {
  BulkTasksProgress,
  CronEntry,
  GetQueueStatsResponse,
  GroupInfo,
  HistoryPoint,
  QueueConfig,
  QueueInfo,
  ReleaseInfo,
  TaskAction,
  WorkerInfo,
} from "./gen/conveyor/v1/admin_pb.js";
import { HistoryResolution } from "./gen/conveyor/v1/admin_pb.js";
import { AdminService, TaskService } from "./gen/conveyor/v1/service_pb.js";
import type { TaskInfo } from "./gen/conveyor/v1/task_pb.js";
import { type BulkTasksCallOptions, type BulkTasksOptions, bulkTasks, bulkTasksProgress } from "./inspector_bulk.js";
import * as cluster from "./inspector_cluster.js";
import type { BrokerInfo, ClusterInfo } from "./inspector_cluster.js";
import * as cron from "./inspector_cron.js";
import type { CronEntryInput, CronEntryUpdate, CronField } from "./inspector_cron.js";
import * as queues from "./inspector_queues.js";
import type { QueueConfigInput, QueueSetting } from "./inspector_queues.js";
import type { InspectorRpc } from "./inspector_rpc.js";
import * as tasks from "./inspector_tasks.js";
import type { AllTasksOptions, ListTasksOptions, TaskActionResult, TaskPage } from "./inspector_tasks.js";
import { type ConnectionOptions, createTransport } from "./transport.js";

/**
 * Inspector is the operator's side of the server from code: it lists and
 * acts on tasks, pauses and configures queues, manages cron entries, and
 * reads the groups, workers, releases and nodes, through the server's
 * AdminService (the service the dashboard and the CLI use). Create one per
 * server and reuse it: it holds the HTTP/2 connection, and concurrent
 * calls share it. It takes the Client's connection options (url, token,
 * protocol, tlsCa, pings) and does not connect until the first call.
 *
 * Results are the protocol's messages, as the Client's are (TaskInfo,
 * QueueInfo, CronEntry, ...: counts of tasks are bigints, times
 * Timestamps, which `timestampDate` of `@bufbuild/protobuf/wkt` turns into
 * Dates). Every call takes an AbortSignal (`{ signal }`) and throws a
 * ConveyorError of the class of its code, as the Client's do:
 * NotFoundError for a task, queue, cron entry or release that does not
 * exist, InvalidArgumentError for a request the server refuses as such,
 * FailedPreconditionError for an action the state of what it names
 * refuses (deleting a running task, or a queue that still holds tasks).
 */
export class Inspector {
  private readonly rpc: InspectorRpc;

  constructor(opts: ConnectionOptions) {
    const transport = createTransport(opts);
    this.rpc = { admin: createClient(AdminService, transport), tasks: createClient(TaskService, transport) };
  }

  // Tasks.

  /**
   * getTask returns the task with id, as Client.getTask does. An unknown
   * (or purged) id fails with NotFoundError, an empty one with
   * InvalidArgumentError.
   */
  getTask(id: string, call: CallOptions = {}): Promise<TaskInfo> {
    return tasks.getTask(this.rpc, id, call);
  }

  /**
   * listTasks returns one page of a queue's tasks that match opts. The
   * order is stable: paging while tasks are enqueued or change state never
   * skips nor repeats a task present throughout. A missing or invalid
   * queue name, or a page size out of 0..1000, fails with
   * InvalidArgumentError; a queue the server does not know lists no task.
   */
  listTasks(opts: ListTasksOptions): Promise<TaskPage> {
    return tasks.listTasks(this.rpc, opts);
  }

  /**
   * allTasks yields every task that matches opts, fetching a page (of
   * opts.pageSize) at a time as the loop asks for more; without a queue,
   * those of every queue in turn, in the queues' name order. A failed call
   * ends the loop with its error. Breaking out of the loop fetches no more.
   *
   *     for await (const t of insp.allTasks({ queue: "emails", state: TaskState.ARCHIVED })) {
   *       console.log(t.id, t.lastError);
   *     }
   */
  allTasks(opts: AllTasksOptions = {}): AsyncGenerator<TaskInfo, void, undefined> {
    return tasks.allTasks(this.rpc, opts);
  }

  /**
   * cancelTask cancels the task with id and returns it as the cancel left
   * it. A waiting task (scheduled, pending, retry, blocked, aggregating)
   * becomes canceled at once. A running one stays active: its worker is
   * told to stop, and the worker's answer decides how it ends. A task that
   * has already ended fails with FailedPreconditionError, an unknown id
   * with NotFoundError.
   */
  cancelTask(id: string, call: CallOptions = {}): Promise<TaskInfo> {
    return tasks.taskAction(this.rpc, "cancelTask", id, call);
  }

  /**
   * runTask makes a scheduled, retry, blocked (its dependencies then
   * ignored), archived or canceled task pending now, and returns it so. A
   * task in another state fails with FailedPreconditionError, an unknown
   * id with NotFoundError.
   */
  runTask(id: string, call: CallOptions = {}): Promise<TaskInfo> {
    return tasks.taskAction(this.rpc, "runTask", id, call);
  }

  /**
   * archiveTask archives a task that is neither running nor finished, and
   * returns it archived. A running or finished task fails with
   * FailedPreconditionError, an unknown id with NotFoundError.
   */
  archiveTask(id: string, call: CallOptions = {}): Promise<TaskInfo> {
    return tasks.taskAction(this.rpc, "archiveTask", id, call);
  }

  /**
   * deleteTask removes a task that is not running, for good. A running
   * task fails with FailedPreconditionError, an unknown id with
   * NotFoundError.
   */
  deleteTask(id: string, call: CallOptions = {}): Promise<void> {
    return tasks.deleteTask(this.rpc, id, call);
  }

  /**
   * batchCancelTasks cancels the tasks of 1..1000 ids, each as cancelTask
   * would; the tasks succeed or fail independently, and results[i] is the
   * outcome of ids[i]. The call itself fails only for no ids or more than
   * 1000 (InvalidArgumentError), or when the server cannot be reached.
   */
  batchCancelTasks(ids: string[], call: CallOptions = {}): Promise<TaskActionResult[]> {
    return tasks.batchAction(this.rpc, "batchCancelTasks", ids, call);
  }

  /** batchRunTasks runs the tasks of 1..1000 ids now, each as runTask would; see batchCancelTasks for the results. */
  batchRunTasks(ids: string[], call: CallOptions = {}): Promise<TaskActionResult[]> {
    return tasks.batchAction(this.rpc, "batchRunTasks", ids, call);
  }

  /** batchArchiveTasks archives the tasks of 1..1000 ids, each as archiveTask would; see batchCancelTasks. */
  batchArchiveTasks(ids: string[], call: CallOptions = {}): Promise<TaskActionResult[]> {
    return tasks.batchAction(this.rpc, "batchArchiveTasks", ids, call);
  }

  /** batchDeleteTasks deletes the tasks of 1..1000 ids, each as deleteTask would; see batchCancelTasks. */
  batchDeleteTasks(ids: string[], call: CallOptions = {}): Promise<TaskActionResult[]> {
    return tasks.batchAction(this.rpc, "batchDeleteTasks", ids, call);
  }

  /**
   * bulkTasks applies action to every task of a queue in one state (and of
   * one type, group or search, if given) that was enqueued before the call
   * began, in chunks of at most 500 tasks (one commit each, so dispatch
   * never waits long), and resolves with the final counts. opts.onProgress
   * gets each report on the way. Tasks enqueued meanwhile are left alone;
   * tasks that changed state meanwhile count as failed. An action the
   * state never takes (running pending tasks, deleting active ones) is
   * refused with FailedPreconditionError before any task is touched, and a
   * missing queue, state or action with InvalidArgumentError. Aborting the
   * signal stops the action between chunks: the chunks done stay done.
   */
  bulkTasks(action: TaskAction, opts: BulkTasksCallOptions): Promise<BulkTasksProgress> {
    return bulkTasks(this.rpc, action, opts);
  }

  /**
   * bulkTasksProgress is bulkTasks as an async iterator of its progress
   * reports, the last one with `done` set. Breaking out of the loop stops
   * the action between chunks, as aborting does.
   */
  bulkTasksProgress(action: TaskAction, opts: BulkTasksOptions): AsyncGenerator<BulkTasksProgress, void, undefined> {
    return bulkTasksProgress(this.rpc, action, opts);
  }

  // Queues.

  /** listQueues lists every queue the server knows, sorted by name. */
  listQueues(call: CallOptions = {}): Promise<QueueInfo[]> {
    return queues.listQueues(this.rpc, call);
  }

  /**
   * getQueue returns the queue named name. The AdminService has no call for
   * one queue, so it lists them all and picks it: a queue the server does
   * not know fails with NotFoundError, and an invalid name with
   * InvalidArgumentError before any call.
   */
  getQueue(name: string, call: CallOptions = {}): Promise<QueueInfo> {
    return queues.getQueue(this.rpc, name, call);
  }

  /**
   * pauseQueue stops dispatch from the queue (enqueues still succeed) and
   * returns the queue, paused. Pausing a queue the server does not know yet
   * creates it, paused. An invalid name fails with InvalidArgumentError.
   */
  pauseQueue(name: string, call: CallOptions = {}): Promise<QueueInfo> {
    return queues.setPaused(this.rpc, name, true, call);
  }

  /** resumeQueue restarts dispatch from a paused queue and returns it. An invalid name fails with InvalidArgumentError. */
  resumeQueue(name: string, call: CallOptions = {}): Promise<QueueInfo> {
    return queues.setPaused(this.rpc, name, false, call);
  }

  /**
   * deleteQueue forgets an empty queue for good: its pause flag, its
   * configuration and its totals. A queue that still holds a task in any
   * state, or that a cron entry enqueues into, is refused with
   * FailedPreconditionError (the message says what it holds); an unknown
   * queue fails with NotFoundError.
   */
  deleteQueue(name: string, call: CallOptions = {}): Promise<void> {
    return queues.deleteQueue(this.rpc, name, call);
  }

  /**
   * getQueueHistory returns what the queue (every queue, summed, when name
   * is empty) did per minute (HistoryResolution.MINUTE, the default) or
   * per UTC day (HistoryResolution.DAY): the tasks enqueued and the
   * attempts completed and failed. Points are oldest first, with no gap,
   * up to the current minute or day, which is still filling. The server
   * samples every minute and keeps a day of minutes and 90 days of days,
   * across restarts. An unknown queue fails with NotFoundError.
   */
  getQueueHistory(name: string, resolution = HistoryResolution.MINUTE, call: CallOptions = {}): Promise<HistoryPoint[]> {
    return queues.getQueueHistory(this.rpc, name, resolution, call);
  }

  /**
   * getQueueStats returns how far behind the queue is and how long its
   * tasks wait and run: `latency`, the age of its longest-waiting ready
   * task (zero when none is), and `oldestReadyAt`; the wait from due to
   * dispatch (p50, p95) and the run time per type. The durations are those
   * the answering node observed since `observedSince`. An unknown queue
   * fails with NotFoundError.
   */
  getQueueStats(name: string, call: CallOptions = {}): Promise<GetQueueStatsResponse> {
    return queues.getQueueStats(this.rpc, name, call);
  }

  /**
   * getQueueConfig returns the queue's effective configuration: what it
   * does, every default filled in (its defaults if it was never configured).
   */
  getQueueConfig(name: string, call: CallOptions = {}): Promise<QueueConfig> {
    return queues.getQueueConfig(this.rpc, name, false, call);
  }

  /**
   * getStoredQueueConfig returns the queue's configuration as stored: a
   * zero field wherever the queue follows the default.
   */
  getStoredQueueConfig(name: string, call: CallOptions = {}): Promise<QueueConfig> {
    return queues.getQueueConfig(this.rpc, name, true, call);
  }

  /**
   * updateQueueConfig changes the configuration of the queue config.queue
   * names and returns its effective configuration after. With settings,
   * only those are stored from config and the others keep their values:
   * the server reads and writes the configuration in one step, so two
   * callers changing different settings at once both keep their change.
   * Without settings, config replaces the whole configuration (a field
   * left unset then follows its default). An unset or zero value makes a
   * setting follow its default again. config may also be a QueueConfig
   * read with getStoredQueueConfig and changed: a read-modify-write of the
   * whole configuration (one of the effective configuration would store
   * today's defaults as the queue's own).
   *
   *     // Cap the queue at 10 active tasks, whatever else is set.
   *     await insp.updateQueueConfig({ queue: "emails", maxActive: 10 }, ["maxActive"]);
   *
   * A value out of range, or a setting that is not one, fails with
   * InvalidArgumentError naming it.
   */
  updateQueueConfig(config: QueueConfigInput | QueueConfig, settings: QueueSetting[] = [], call: CallOptions = {}): Promise<QueueConfig> {
    return queues.updateQueueConfig(this.rpc, config, settings, call);
  }

  // Cron entries.

  /**
   * createCron stores a new cron entry and returns it as stored, with its
   * id and next run. A spec or template the server refuses fails with
   * InvalidArgumentError naming the field; an id already taken with
   * AlreadyExistsError.
   */
  createCron(entry: CronEntryInput, call: CallOptions = {}): Promise<CronEntry> {
    return cron.createCron(this.rpc, entry, call);
  }

  /** getCron returns the cron entry with id. An unknown id fails with NotFoundError, an empty one with InvalidArgumentError. */
  getCron(id: string, call: CallOptions = {}): Promise<CronEntry> {
    return cron.getCron(this.rpc, id, call);
  }

  /** listCrons lists every cron entry, ordered by id. */
  listCrons(call: CallOptions = {}): Promise<CronEntry[]> {
    return cron.listCrons(this.rpc, call);
  }

  /**
   * updateCron changes the cron entry entry.id names and returns it as
   * stored. With fields, only those are stored from entry and the others
   * keep their values, in one step on the server (paused is not such a
   * field: pauseCron and resumeCron change it). Without fields, entry
   * replaces every field but the id and the history, paused included;
   * entry may then be a CronEntry read with getCron and changed. The
   * next run is counted from now when the update changes the spec (or
   * replaces the entry), and kept otherwise.
   *
   *     // Fire every 10 minutes from now on; nothing else changes.
   *     await insp.updateCron({ id: "sync", spec: "@every 10m" }, ["spec"]);
   *
   * An unknown id fails with NotFoundError; a field that is not one, or an
   * entry the server refuses, with InvalidArgumentError.
   */
  updateCron(entry: CronEntryUpdate | CronEntry, fields: CronField[] = [], call: CallOptions = {}): Promise<CronEntry> {
    return cron.updateCron(this.rpc, entry, fields, call);
  }

  /** deleteCron removes the cron entry with id; the tasks it fired stay. An unknown id fails with NotFoundError. */
  deleteCron(id: string, call: CallOptions = {}): Promise<void> {
    return cron.deleteCron(this.rpc, id, call);
  }

  /** pauseCron stops the cron entry with id from firing and returns it, paused. An unknown id fails with NotFoundError. */
  pauseCron(id: string, call: CallOptions = {}): Promise<CronEntry> {
    return cron.setCronPaused(this.rpc, id, true, call);
  }

  /**
   * resumeCron lets a paused cron entry fire again, from its next scheduled
   * time after now (the fires missed while paused are not replayed), and
   * returns it. Resuming an entry that is not paused changes nothing. An
   * unknown id fails with NotFoundError.
   */
  resumeCron(id: string, call: CallOptions = {}): Promise<CronEntry> {
    return cron.setCronPaused(this.rpc, id, false, call);
  }

  // Groups, workers, releases and the cluster.

  /**
   * listGroups lists the aggregation groups waiting to fire, ordered by
   * queue, group and type: those of queue, or of every queue when queue is
   * empty. An invalid queue name fails with InvalidArgumentError.
   */
  listGroups(queue = "", call: CallOptions = {}): Promise<GroupInfo[]> {
    return cluster.listGroups(this.rpc, queue, call);
  }

  /**
   * listWorkers lists the live worker sessions (of every node, when several
   * share a database) and this node's push endpoints (a worker whose
   * labels.push is its URL), ordered by session id.
   */
  listWorkers(call: CallOptions = {}): Promise<WorkerInfo[]> {
    return cluster.listWorkers(this.rpc, call);
  }

  /** listReleases lists the worker releases the server has seen, the newest first. */
  listReleases(call: CallOptions = {}): Promise<ReleaseInfo[]> {
    return cluster.listReleases(this.rpc, call);
  }

  /**
   * drainRelease stops new work going to the sessions of the release with
   * id: once it resolves, they receive no new task. Draining a release
   * twice changes nothing. A release the server never saw fails with
   * NotFoundError, an empty id with InvalidArgumentError.
   */
  drainRelease(id: string, call: CallOptions = {}): Promise<void> {
    return cluster.drainRelease(this.rpc, id, call);
  }

  /** getClusterInfo describes the serving nodes. */
  getClusterInfo(call: CallOptions = {}): Promise<ClusterInfo> {
    return cluster.getClusterInfo(this.rpc, call);
  }

  /** getBrokerInfo describes the storage engine. */
  getBrokerInfo(call: CallOptions = {}): Promise<BrokerInfo> {
    return cluster.getBrokerInfo(this.rpc, call);
  }
}

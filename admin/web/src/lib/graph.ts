// A task's dependency graph, as far as the view goes: its ancestors (what
// it depends on, and what those depend on) and its descendants (what
// depends on it, and so on), each read with GetTask. A task's links carry
// the linked tasks' states; the GetTask of each node adds its type and its
// own links to follow.
import type { TaskInfo } from "../gen/conveyor/v1/task_pb";
import type { TaskState } from "../gen/conveyor/v1/task_pb";

/** GRAPH_DEPTH is how many levels the graph follows each way from the task. */
export const GRAPH_DEPTH = 5;

/** GRAPH_NODES bounds the tasks the graph shows, the task included. */
export const GRAPH_NODES = 50;

/** GraphNode is one task of the graph. */
export interface GraphNode {
  id: string;
  state: TaskState;
  /** type is the task's type; "" when it could not be read (deleted since). */
  type: string;
  /** layer is the level: negative for ancestors, 0 the task, positive for descendants. */
  layer: number;
}

/** Graph is the part of a task's dependency graph the view shows. */
export interface Graph {
  nodes: GraphNode[];
  /** edges run from a prerequisite to the task that depends on it. */
  edges: { from: string; to: string }[];
  /** deeper is set when tasks beyond GRAPH_DEPTH levels were left out. */
  deeper: boolean;
  /** full is set when tasks were left out to stay within GRAPH_NODES. */
  full: boolean;
}

/** Fetch reads one task; it rejects when the task cannot be read. */
export type Fetch = (id: string) => Promise<TaskInfo>;

/**
 * loadGraph walks from the task with id, breadth first, up its
 * dependencies and down its dependents (never sideways: a dependency's
 * other dependents are not this task's business), level by level, each
 * level's tasks read at once.
 */
export async function loadGraph(id: string, fetch: Fetch, depth = GRAPH_DEPTH, limit = GRAPH_NODES): Promise<Graph> {
  const root = await fetch(id);
  const g: Graph = { nodes: [{ id, state: root.state, type: root.type, layer: 0 }], edges: [], deeper: false, full: false };
  const seen = new Map<string, GraphNode>([[id, g.nodes[0] as GraphNode]]);
  const edges = new Set<string>();
  const edge = (from: string, to: string) => {
    const k = `${from}>${to}`;
    if (!edges.has(k)) {
      edges.add(k);
      g.edges.push({ from, to });
    }
  };
  for (const dir of [-1, 1] as const) {
    let frontier: TaskInfo[] = [root];
    for (let level = 1; frontier.length > 0; level++) {
      const next: GraphNode[] = [];
      for (const t of frontier) {
        const links = dir < 0 ? t.dependsOn : t.dependents;
        for (const l of links) {
          const known = seen.get(l.taskId);
          if (!known && level > depth) {
            g.deeper = true;
            continue;
          }
          if (!known && seen.size >= limit) {
            g.full = true;
            continue;
          }
          if (dir < 0) edge(l.taskId, t.id);
          else edge(t.id, l.taskId);
          if (known) continue;
          const n: GraphNode = { id: l.taskId, state: l.state, type: "", layer: dir * level };
          seen.set(n.id, n);
          g.nodes.push(n);
          next.push(n);
        }
      }
      frontier = await readAll(next, fetch);
    }
  }
  return g;
}

// readAll reads the new nodes' tasks at once and fills in their types and
// current states. A task that cannot be read (deleted meanwhile) stays as
// its link showed it, and is not followed.
async function readAll(nodes: GraphNode[], fetch: Fetch): Promise<TaskInfo[]> {
  const got = await Promise.all(nodes.map((n) => fetch(n.id).catch(() => undefined)));
  const out: TaskInfo[] = [];
  got.forEach((t, i) => {
    const n = nodes[i];
    if (!t || !n) return;
    n.type = t.type;
    n.state = t.state;
    out.push(t);
  });
  return out;
}

/** Placed is a node with its position in the drawing, in layer order. */
export interface Placed extends GraphNode {
  /** col is the node's place in its layer, from 0. */
  col: number;
}

/**
 * place orders each layer's nodes: the task's own layer holds it alone;
 * moving away from it, each node goes near the nodes it links to in the
 * layer before (the mean of their places), ties by id, so that most edges
 * run straight.
 */
export function place(g: Graph): { nodes: Placed[]; layers: number[] } {
  const byLayer = new Map<number, GraphNode[]>();
  for (const n of g.nodes) byLayer.set(n.layer, [...(byLayer.get(n.layer) ?? []), n]);
  const col = new Map<string, number>();
  const out: Placed[] = [];
  const neighbours = (id: string) => g.edges.flatMap((e) => (e.from === id ? [e.to] : e.to === id ? [e.from] : []));
  const layers = [...byLayer.keys()].sort((a, b) => Math.abs(a) - Math.abs(b) || a - b);
  for (const layer of layers) {
    const nodes = byLayer.get(layer) ?? [];
    const closer = layer === 0 ? 0 : layer - Math.sign(layer);
    const key = (n: GraphNode) => {
      const cols = neighbours(n.id)
        .filter((m) => byLayer.get(closer)?.some((x) => x.id === m))
        .map((m) => col.get(m) ?? 0);
      return cols.length ? cols.reduce((a, b) => a + b, 0) / cols.length : 0;
    };
    const sorted = [...nodes].sort((a, b) => key(a) - key(b) || (a.id < b.id ? -1 : 1));
    sorted.forEach((n, i) => {
      col.set(n.id, i);
      out.push({ ...n, col: i });
    });
  }
  return { nodes: out, layers: [...byLayer.keys()].sort((a, b) => a - b) };
}

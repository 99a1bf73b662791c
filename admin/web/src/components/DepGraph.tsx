import { tasks } from "../lib/api";
import { GRAPH_DEPTH, GRAPH_NODES, loadGraph, place, type Graph, type Placed } from "../lib/graph";
import { usePoll } from "../lib/poll";
import { seg } from "../lib/router";
import { isTerminal, stateDef } from "../lib/states";
import { Link } from "./Link";
import { ErrorBox, Loading } from "./Status";

// The drawing's measures, in px.
const W = 216; // a node's width
const H = 46; // a node's height
const GX = 20; // between two nodes of a layer
const GY = 44; // between two layers
const PAD = 8;
const TYPE_CHARS = 24; // a longer type is cut, whole in the node's tooltip

/**
 * DepGraph draws a task's dependency graph: what it depends on above it
 * (and what those depend on), what depends on it below, GRAPH_DEPTH levels
 * each way and GRAPH_NODES tasks at most, saying when it was cut. Each
 * node is a link to its task. It refreshes every 5 s until every task in
 * it is done.
 */
export function DepGraph({ id }: { id: string }) {
  const g = usePoll(
    (signal) => loadGraph(id, (x) => tasks.getTask({ id: x }, { signal })),
    (graph) => (graph.nodes.every((n) => isTerminal(n.state)) ? null : 5000),
    [id],
  );
  if (g.error) return <ErrorBox error={g.error} what="Could not draw the dependency graph" retry={g.reload} />;
  if (!g.data) return <Loading what="Drawing the dependency graph" />;
  return (
    <div class="dep-graph">
      <p class="muted">Above: the tasks this one waits for. Below: the tasks that wait for it. Arrows point to the waiting task.</p>
      <Cut graph={g.data} />
      <div class="table-wrap">
        <Drawing graph={g.data} root={id} />
      </div>
    </div>
  );
}

function Cut({ graph }: { graph: Graph }) {
  if (!graph.deeper && !graph.full) return null;
  return (
    <p class="graph-cut" role="note">
      {graph.deeper && `Tasks more than ${GRAPH_DEPTH} levels away are left out. `}
      {graph.full && `Only ${GRAPH_NODES} tasks are drawn; some nearer ones are left out. `}
      Open a task at the edge to see past it.
    </p>
  );
}

function Drawing({ graph, root }: { graph: Graph; root: string }) {
  const { nodes, layers } = place(graph);
  const counts = new Map<number, number>();
  for (const n of nodes) counts.set(n.layer, (counts.get(n.layer) ?? 0) + 1);
  const widest = Math.max(...counts.values());
  const width = widest * (W + GX) - GX + 2 * PAD;
  const height = layers.length * (H + GY) - GY + 2 * PAD;
  const pos = new Map<string, { x: number; y: number }>();
  for (const n of nodes) {
    const inLayer = counts.get(n.layer) ?? 1;
    const offset = (width - 2 * PAD - (inLayer * (W + GX) - GX)) / 2;
    pos.set(n.id, { x: PAD + offset + n.col * (W + GX), y: PAD + layers.indexOf(n.layer) * (H + GY) });
  }
  return (
    <svg class="graph" width={width} height={height} viewBox={`0 0 ${width} ${height}`} role="group" aria-label="Dependency graph">
      <defs>
        <marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">
          <path d="M0,0 L10,5 L0,10 z" class="graph-arrow" />
        </marker>
      </defs>
      {graph.edges.map((e) => {
        const a = pos.get(e.from);
        const b = pos.get(e.to);
        return a && b ? <path key={`${e.from}>${e.to}`} class="graph-edge" d={curve(a, b)} marker-end="url(#arrow)" /> : null;
      })}
      {nodes.map((n) => {
        const p = pos.get(n.id);
        return p ? <Node key={n.id} n={n} x={p.x} y={p.y} root={n.id === root} /> : null;
      })}
    </svg>
  );
}

// curve joins the bottom of a to the top of b; when b is not below a (a
// link within one layer), the side of a to the side of b.
function curve(a: { x: number; y: number }, b: { x: number; y: number }): string {
  if (b.y > a.y) {
    const x1 = a.x + W / 2;
    const y1 = a.y + H;
    const x2 = b.x + W / 2;
    const y2 = b.y;
    const m = (y2 - y1) / 2;
    return `M${x1},${y1} C${x1},${y1 + m} ${x2},${y2 - m} ${x2},${y2}`;
  }
  const right = b.x > a.x;
  const x1 = right ? a.x + W : a.x;
  const x2 = right ? b.x : b.x + W;
  const y1 = a.y + H / 2;
  const y2 = b.y + H / 2;
  return `M${x1},${y1} C${(x1 + x2) / 2},${y1} ${(x1 + x2) / 2},${y2} ${x2},${y2}`;
}

function Node({ n, x, y, root }: { n: Placed; x: number; y: number; root: boolean }) {
  const d = stateDef(n.state);
  const label = d?.label ?? "Unknown";
  const type = n.type.length > TYPE_CHARS ? `${n.type.slice(0, TYPE_CHARS - 1)}…` : n.type;
  const body = (
    <>
      <title>{`${n.id}\n${n.type || "type unknown"} · ${label}`}</title>
      <rect x={x} y={y} width={W} height={H} rx={6} class="graph-node" />
      <text x={x + 8} y={y + 18} class="graph-id">
        {n.id}
      </text>
      <text x={x + 8} y={y + 36} class="graph-sub">
        <tspan class="graph-state">{label}</tspan>
        {type && <tspan class="graph-type"> · {type}</tspan>}
      </text>
    </>
  );
  const cls = `graph-task state-${d?.name ?? "unknown"}${root ? " graph-root" : ""}`;
  if (root) {
    return (
      <g class={cls} data-node={n.id} data-layer={String(n.layer)} aria-label={`This task, ${label}`} role="img">
        {body}
      </g>
    );
  }
  return (
    <Link
      to={`/tasks/${seg(n.id)}`}
      class={cls}
      data-node={n.id}
      data-layer={String(n.layer)}
      aria-label={`Task ${n.id}, ${n.type || "type unknown"}, ${label}, ${n.layer < 0 ? "which this task waits for" : "which waits for this task"}`}
    >
      {body}
    </Link>
  );
}

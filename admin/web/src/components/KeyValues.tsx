import { Empty } from "./Status";

/** KeyValues lists a string map (metadata, labels) as a definition list. */
export function KeyValues({ map, empty = "None." }: { map: Record<string, string | number>; empty?: string }) {
  const keys = Object.keys(map).sort();
  if (keys.length === 0) return <Empty>{empty}</Empty>;
  return (
    <dl class="kv">
      {keys.map((k) => (
        <div key={k}>
          <dt>{k}</dt>
          <dd>{String(map[k])}</dd>
        </div>
      ))}
    </dl>
  );
}

/** Chips shows a short map inline, as key=value chips. */
export function Chips({ map }: { map: Record<string, string | number> }) {
  const keys = Object.keys(map).sort();
  if (keys.length === 0) return <span class="muted">—</span>;
  return (
    <ul class="chips">
      {keys.map((k) => (
        <li key={k}>
          {k}
          <span class="muted">=</span>
          {String(map[k])}
        </li>
      ))}
    </ul>
  );
}

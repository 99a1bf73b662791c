import { RANGES, type Range, unitOf } from "../lib/history";

/**
 * RangePicker chooses how far back a history chart reaches: buttons, the
 * chosen one pressed (aria-pressed), minutes up to a day, then days.
 */
export function RangePicker({ value, onChange }: { value: Range; onChange: (r: Range) => void }) {
  return (
    <div class="range-picker" role="group" aria-label="Chart range">
      {RANGES.map((r) => (
        <button
          type="button"
          key={r.key}
          data-range={r.key}
          aria-pressed={r.key === value.key}
          title={`The last ${r.span}, per ${unitOf(r.resolution)}`}
          onClick={() => onChange(r)}
        >
          {r.label}
        </button>
      ))}
    </div>
  );
}

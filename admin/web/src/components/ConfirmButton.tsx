import { useEffect, useRef, useState } from "preact/hooks";

/**
 * ConfirmButton asks before it acts: the first click shows the question
 * with Confirm and Keep buttons in its place (focus moves to Confirm, Escape
 * keeps).
 */
export function ConfirmButton({
  label,
  question,
  onConfirm,
  danger = false,
  disabled = false,
  action,
}: {
  /** action names the button for tests and styles (data-action). */
  action?: string;
  label: string;
  question: string;
  onConfirm: () => void;
  danger?: boolean;
  disabled?: boolean;
}) {
  const [asking, setAsking] = useState(false);
  const yes = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    if (asking) yes.current?.focus();
  }, [asking]);
  if (!asking) {
    return (
      <button type="button" class={danger ? "danger" : undefined} disabled={disabled} onClick={() => setAsking(true)} data-action={action}>
        {label}
      </button>
    );
  }
  return (
    <span class="confirm" role="group" aria-label={question} onKeyDown={(e) => e.key === "Escape" && setAsking(false)}>
      <span>{question}</span>
      <button
        ref={yes}
        type="button"
        class={danger ? "danger" : "primary"}
        onClick={() => {
          setAsking(false);
          onConfirm();
        }}
      >
        Confirm
      </button>
      <button type="button" onClick={() => setAsking(false)}>
        Keep
      </button>
    </span>
  );
}

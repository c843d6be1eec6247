// Small pieces every screen uses: a modal dialog (the browser's own <dialog>: focus kept inside,
// Escape closes it, focus goes back where it was), and the line that says whether an action worked.
import type { ComponentChildren } from 'preact';
import { useEffect, useId, useRef, useState } from 'preact/hooks';

export function Dialog({
  title,
  onClose,
  children,
  closable = true,
}: {
  title: string;
  onClose: () => void;
  children: ComponentChildren;
  /** False: Escape does nothing (the one-time secret must be acknowledged first). */
  closable?: boolean;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  const titleId = useId();
  useEffect(() => {
    const opener = document.activeElement as HTMLElement | null;
    ref.current?.showModal();
    return () => opener?.focus();
  }, []);
  return (
    <dialog
      ref={ref}
      aria-labelledby={titleId}
      onCancel={(event) => {
        event.preventDefault();
        if (closable) onClose();
      }}
    >
      <h2 id={titleId}>{title}</h2>
      {children}
    </dialog>
  );
}

type Notice = { id: number; text: string; failed: boolean };
const listeners = new Set<(notice: Notice) => void>();
let counter = 0;

/** Says what happened: `failed` notices are errors (keygate's sentence). */
export function notify(text: string, failed = false): void {
  const notice = { id: ++counter, text, failed };
  for (const listener of listeners) listener(notice);
}

export function Notices() {
  const [notice, setNotice] = useState<Notice | undefined>();
  useEffect(() => {
    listeners.add(setNotice);
    return () => {
      listeners.delete(setNotice);
    };
  }, []);
  return (
    <div class="notices">
      <p role="status" class="notice" data-testid="notice">
        {notice && !notice.failed ? notice.text : ''}
      </p>
      <p role="alert" class="notice failed" data-testid="error">
        {notice?.failed ? notice.text : ''}
      </p>
    </div>
  );
}

/** Runs an action and says whether it worked; resolves with its result, or undefined when it failed. */
export async function attempt<T>(
  action: () => Promise<T>,
  done?: (result: T) => string,
): Promise<T | undefined> {
  try {
    const result = await action();
    if (done) notify(done(result));
    return result;
  } catch (error) {
    notify((error as Error).message, true);
    return undefined;
  }
}

/** A dialog form's buttons: its action (submit) and Cancel. */
export function FormButtons({
  label,
  onCancel,
  disabled = false,
  danger = false,
}: {
  label: string;
  onCancel: () => void;
  disabled?: boolean;
  danger?: boolean;
}) {
  return (
    <div class="buttons">
      <button type="submit" class={danger ? 'danger' : 'primary'} disabled={disabled}>
        {label}
      </button>
      <button type="button" onClick={onCancel}>
        Cancel
      </button>
    </div>
  );
}

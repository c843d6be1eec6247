// Small pieces every screen uses: a modal dialog (the browser's own <dialog>: focus kept inside,
// Escape closes it, focus goes back where it was), a secret shown once, and the line that says
// whether an action worked.
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
      // Chromium lets a page refuse only one Escape per user activation (close watchers): the next
      // one closes the dialog anyway. A dialog that must stay (a secret not yet acknowledged) opens
      // again; any other is closed for good.
      onClose={() => {
        if (closable) onClose();
        else ref.current?.showModal();
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

/** One value a secret dialog shows: its label names its copy button ("Copy secret") and its notice. */
export type ShownOnce = { label: string; value: string; testId: string };

/**
 * A secret shown once (a key's, a webhook endpoint's signing secret): copy buttons, a warning, and no
 * way to close the dialog (not even Escape) until the reader says the secret was copied.
 */
export function SecretDialog({
  title,
  warning,
  shown,
  onClose,
}: {
  title: string;
  warning: string;
  shown: ShownOnce[];
  onClose: () => void;
}) {
  const [acknowledged, setAcknowledged] = useState(false);
  const warningId = useId();
  const copy = (text: string, what: string) =>
    navigator.clipboard.writeText(text).then(
      () => notify(`${what} copied.`),
      () => notify(`Could not copy the ${what.toLowerCase()}: select it and copy it by hand.`, true),
    );
  return (
    <Dialog title={title} onClose={onClose} closable={acknowledged}>
      <div class="form">
        <p class="warning" id={warningId}>
          {warning}
        </p>
        {shown.map(({ label, value, testId }) => (
          <div class="form" key={testId}>
            <label>
              {label}
              <input
                readOnly
                value={value}
                data-testid={testId}
                aria-describedby={warningId}
                onFocus={(event) => event.currentTarget.select()}
              />
            </label>
            <button type="button" onClick={() => copy(value, label)}>
              Copy {label.toLowerCase()}
            </button>
          </div>
        ))}
        <label class="choice">
          <input
            type="checkbox"
            checked={acknowledged}
            onChange={(event) => setAcknowledged(event.currentTarget.checked)}
          />
          I have copied the secret; I understand it will not be shown again.
        </label>
        <div class="buttons">
          <button type="button" class="primary" disabled={!acknowledged} onClick={onClose}>
            Done
          </button>
        </div>
      </div>
    </Dialog>
  );
}

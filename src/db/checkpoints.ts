// WAL checkpoints on a thread of their own. SQLite's automatic checkpoint runs inside the COMMIT that
// takes the WAL past 1000 pages, on the event loop: with 1M keys stored it held every request for tens
// of milliseconds (bench/RESULTS.md). A serving keygate turns it off and checkpoints from a Worker
// instead; if the Worker fails, the automatic checkpoint comes back, so the WAL never grows unchecked.
import type { Database } from 'bun:sqlite';
import { checkpointWorkerSource } from './checkpoint-worker.macro' with { type: 'macro' };

/** How often the Worker copies what the WAL holds into the database file. */
export const CHECKPOINT_INTERVAL_MS = 50;
/** SQLite's own default, restored when the Worker cannot run. */
export const AUTOCHECKPOINT_PAGES = 1000;
/** How long start waits for the Worker to open the database, and stop() for it to close it. */
const WORKER_TIMEOUT_MS = 2000;

const WORKER_URL = URL.createObjectURL(new Blob([checkpointWorkerSource()], { type: 'text/javascript' }));

export type CheckpointerMessage = { type: 'start'; path: string; intervalMs: number } | { type: 'stop' };
export type CheckpointerReply =
  | { type: 'started' }
  | { type: 'stopped' }
  | { type: 'failed'; message: string };

export type Checkpoints = {
  /** Whether the Worker runs the checkpoints (false: SQLite's automatic checkpoint does). */
  readonly inBackground: boolean;
  /** Ends the Worker (after its last checkpoint); call before closing the serving connection. */
  stop(): Promise<void>;
};

/**
 * Starts the Worker for the database `client` has open and, once it runs, turns the client's own
 * automatic checkpoint off. `onFailure` is told (once) if the Worker cannot start or stops working.
 */
export async function checkpointInBackground(
  client: Database,
  { onFailure, path = client.filename }: { onFailure: (message: string) => void; path?: string },
): Promise<Checkpoints> {
  const worker = new Worker(WORKER_URL);
  worker.unref();
  let running = false;
  let stopping = false;
  let stopped: (() => void) | undefined;
  let started: ((ok: boolean) => void) | undefined;

  const fail = (message: string) => {
    if (stopping) return;
    stopping = true;
    if (running) client.run(`PRAGMA wal_autocheckpoint = ${AUTOCHECKPOINT_PAGES}`);
    running = false;
    worker.terminate();
    started?.(false);
    onFailure(message);
  };
  worker.onmessage = ({ data }: MessageEvent<CheckpointerReply>) => {
    if (data.type === 'started') started?.(true);
    else if (data.type === 'stopped') stopped?.();
    else fail(data.message);
  };
  worker.onerror = (event) => fail(event.message);
  worker.addEventListener('close', () => fail('the checkpoint thread ended'));

  // A timer, not the Worker, keeps the process alive meanwhile (the Worker is unref'd).
  const timeout = setTimeout(() => fail('the checkpoint thread did not start'), WORKER_TIMEOUT_MS);
  const ok = await new Promise<boolean>((resolve) => {
    started = resolve;
    worker.postMessage({
      type: 'start',
      path,
      intervalMs: CHECKPOINT_INTERVAL_MS,
    } satisfies CheckpointerMessage);
  });
  clearTimeout(timeout);
  started = undefined;
  if (ok) {
    client.run('PRAGMA wal_autocheckpoint = 0');
    running = true;
  }

  return {
    get inBackground() {
      return running;
    },
    async stop() {
      if (stopping) return;
      stopping = true;
      // The timer also keeps the process alive until the Worker answers (the Worker is unref'd).
      let timeout: ReturnType<typeof setTimeout> | undefined;
      await new Promise<void>((resolve) => {
        stopped = resolve;
        timeout = setTimeout(resolve, WORKER_TIMEOUT_MS);
        worker.postMessage({ type: 'stop' } satisfies CheckpointerMessage);
      });
      clearTimeout(timeout);
      worker.terminate();
      if (running) client.run(`PRAGMA wal_autocheckpoint = ${AUTOCHECKPOINT_PAGES}`);
      running = false;
    },
  };
}

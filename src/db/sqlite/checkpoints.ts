// WAL checkpoints on a thread of their own. SQLite's automatic checkpoint runs inside the COMMIT that
// takes the WAL past 1000 pages, on the event loop: with 1M keys stored it held every request for tens
// of milliseconds (bench/HISTORY.md). A serving keygate turns it off and checkpoints from a Worker
// instead; if the Worker fails, the automatic checkpoint comes back, so the WAL never grows unchecked.
//
// A checkpoint alone never makes the WAL shorter: SQLite starts writing it from the top again only
// when a write begins after every frame was copied, which a steady write load never allows. So once
// the WAL holds RESTART_FRAMES, the Worker asks for the writes to be held, finishes the copy and
// restarts the WAL (its RESTART mode), and lets the writes go: a pause of one short checkpoint.
import type { Database } from 'bun:sqlite';
import { checkpointWorkerSource } from './checkpoint-worker.macro' with { type: 'macro' };

/** How often the Worker copies what the WAL holds into the database file. */
export const CHECKPOINT_INTERVAL_MS = 50;
/** WAL frames (pages) after which the WAL is restarted: 64 MiB of 4 KiB pages (bench/HISTORY.md). */
export const RESTART_FRAMES = 16_384;
/** SQLite's own default, restored when the Worker cannot run. */
export const AUTOCHECKPOINT_PAGES = 1000;
/** The longest writes are held for a restart, and stop() waits for the Worker to close its connection. */
const WORKER_TIMEOUT_MS = 2000;

export type CheckpointerMessage =
  | { type: 'start'; path: string; intervalMs: number; restartFrames: number }
  | { type: 'writes-held' }
  | { type: 'stop' };
export type CheckpointerReply =
  | { type: 'started' }
  | { type: 'hold-writes' }
  | { type: 'writes-free' }
  | { type: 'stopped' }
  | { type: 'failed'; message: string };

export type Checkpoints = {
  /** Resolves once the Worker runs the checkpoints (true), or could not start (false). */
  readonly started: Promise<boolean>;
  /** Whether the Worker runs the checkpoints now (false: SQLite's automatic checkpoint does). */
  readonly inBackground: boolean;
  /** Ends the Worker (after its last checkpoint); call before closing the serving connection. */
  stop(): Promise<void>;
};

const WORKER_URL = URL.createObjectURL(new Blob([checkpointWorkerSource()], { type: 'text/javascript' }));

/**
 * Starts the Worker for the database `client` has open; once it runs, the client's own automatic
 * checkpoint is off. `holdWrites` stops new write transactions until the function it returns is
 * called. `onFailure` is told (once) if the Worker cannot start or stops working.
 */
export function checkpointInBackground(
  client: Database,
  {
    holdWrites,
    onFailure,
    path = client.filename,
    restartFrames = RESTART_FRAMES,
  }: {
    holdWrites: () => () => void;
    onFailure: (message: string) => void;
    path?: string;
    restartFrames?: number;
  },
): Checkpoints {
  const worker = new Worker(WORKER_URL);
  worker.unref();
  let running = false;
  let stopping = false;
  let stopped: (() => void) | undefined;
  let reportStart: (ok: boolean) => void = () => {};
  const started = new Promise<boolean>((resolve) => {
    reportStart = resolve;
  });
  let releaseWrites: (() => void) | undefined;
  let holdTimeout: ReturnType<typeof setTimeout> | undefined;
  const freeWrites = () => {
    clearTimeout(holdTimeout);
    releaseWrites?.();
    releaseWrites = undefined;
  };

  const end = () => {
    stopping = true;
    freeWrites();
    if (running) client.run(`PRAGMA wal_autocheckpoint = ${AUTOCHECKPOINT_PAGES}`);
    running = false;
    worker.terminate();
    reportStart(false); // if it had not started yet
  };
  const fail = (message: string) => {
    if (stopping) return;
    end();
    onFailure(message);
  };

  worker.onmessage = ({ data }: MessageEvent<CheckpointerReply>) => {
    switch (data.type) {
      case 'started':
        client.run('PRAGMA wal_autocheckpoint = 0');
        running = true;
        reportStart(true);
        return;
      case 'hold-writes':
        // Between two turns of the event loop no write transaction is open: held, they stay closed.
        releaseWrites = holdWrites();
        holdTimeout = setTimeout(freeWrites, WORKER_TIMEOUT_MS);
        worker.postMessage({ type: 'writes-held' } satisfies CheckpointerMessage);
        return;
      case 'writes-free':
        freeWrites();
        return;
      case 'stopped':
        stopped?.();
        return;
      case 'failed':
        fail(data.message);
    }
  };
  worker.onerror = (event) => fail(event.message);
  worker.addEventListener('close', () => fail('the checkpoint thread ended'));
  worker.postMessage({
    type: 'start',
    path,
    intervalMs: CHECKPOINT_INTERVAL_MS,
    restartFrames,
  } satisfies CheckpointerMessage);

  return {
    started,
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
      end();
    },
  };
}

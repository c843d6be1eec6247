// The thread that runs SQLite's WAL checkpoints for a serving keygate (started by db/checkpoints.ts):
// copying committed pages from the WAL into the database file, and the fsync after it, happen here on
// a connection of its own, so the event loop never stalls in them.
import { Database, type Statement } from 'bun:sqlite';
import type { CheckpointerMessage, CheckpointerReply } from './checkpoints';

declare const self: Worker;

/** How long a RESTART checkpoint waits for a reader still on the WAL (the writes are held meanwhile). */
const RESTART_BUSY_TIMEOUT_MS = 100;

type CheckpointRow = { busy: number; log: number; checkpointed: number };
type Checkpointer = {
  db: Database;
  passive: Statement<CheckpointRow>;
  restart: Statement<CheckpointRow>;
  timer: ReturnType<typeof setInterval>;
};

let checkpointer: Checkpointer | undefined;
let awaitingHold = false;

const reply = (message: CheckpointerReply) => self.postMessage(message);

/** Runs `work`; on an error, stops checkpointing and tells the serving thread why. */
function guarded(work: () => void): void {
  try {
    work();
  } catch (error) {
    clearInterval(checkpointer?.timer);
    reply({ type: 'failed', message: (error as Error).message });
  }
}

function start(path: string, intervalMs: number, restartFrames: number): Checkpointer {
  const db = new Database(path, { create: false });
  db.run('PRAGMA synchronous = FULL');
  db.run(`PRAGMA busy_timeout = ${RESTART_BUSY_TIMEOUT_MS}`);
  const passive = db.prepare<CheckpointRow, []>('PRAGMA wal_checkpoint(PASSIVE)');
  const restart = db.prepare<CheckpointRow, []>('PRAGMA wal_checkpoint(RESTART)');
  const timer = setInterval(
    () =>
      guarded(() => {
        // PASSIVE never waits for readers or the writer: it copies what it can, and the rest next time.
        const copied = passive.get();
        if (copied !== null && copied.log >= restartFrames && !awaitingHold) {
          awaitingHold = true;
          reply({ type: 'hold-writes' });
        }
      }),
    intervalMs,
  );
  return { db, passive, restart, timer };
}

self.onmessage = ({ data }: MessageEvent<CheckpointerMessage>) => {
  switch (data.type) {
    case 'start':
      guarded(() => {
        checkpointer = start(data.path, data.intervalMs, data.restartFrames);
        reply({ type: 'started' });
      });
      return;
    case 'writes-held':
      // No write can begin now: the copy left since the last PASSIVE is short, then the WAL restarts.
      guarded(() => checkpointer?.restart.get());
      awaitingHold = false;
      reply({ type: 'writes-free' });
      return;
    case 'stop':
      if (checkpointer) {
        clearInterval(checkpointer.timer);
        checkpointer.passive.finalize();
        checkpointer.restart.finalize();
        checkpointer.db.close();
      }
      reply({ type: 'stopped' });
  }
};

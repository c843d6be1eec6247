// The thread that runs SQLite's WAL checkpoints for a serving keygate (started by db/checkpoints.ts):
// copying committed pages from the WAL into the database file, and the fsync after it, happen here on
// a connection of its own, so the event loop never stalls in them.
import { Database, type Statement } from 'bun:sqlite';
import type { CheckpointerMessage, CheckpointerReply } from './checkpoints';

declare const self: Worker;

/** How long a RESTART checkpoint waits for a reader still on the WAL (the writes are held meanwhile). */
const RESTART_BUSY_TIMEOUT_MS = 100;

let db: Database | undefined;
let passive: Statement | undefined;
let restart: Statement | undefined;
let timer: ReturnType<typeof setInterval> | undefined;
let restartFrames = Number.POSITIVE_INFINITY;
let awaitingHold = false;

const reply = (message: CheckpointerReply) => self.postMessage(message);

type CheckpointRow = { busy: number; log: number; checkpointed: number };

/** Runs `work`; on an error, stops checkpointing and tells the serving thread why. */
function guarded(work: () => void): void {
  try {
    work();
  } catch (error) {
    clearInterval(timer);
    reply({ type: 'failed', message: (error as Error).message });
  }
}

self.onmessage = ({ data }: MessageEvent<CheckpointerMessage>) => {
  switch (data.type) {
    case 'start':
      guarded(() => {
        db = new Database(data.path, { create: false });
        db.run('PRAGMA synchronous = FULL');
        db.run(`PRAGMA busy_timeout = ${RESTART_BUSY_TIMEOUT_MS}`);
        passive = db.prepare('PRAGMA wal_checkpoint(PASSIVE)');
        restart = db.prepare('PRAGMA wal_checkpoint(RESTART)');
        restartFrames = data.restartFrames;
        timer = setInterval(checkpoint, data.intervalMs);
        reply({ type: 'started' });
      });
      return;
    case 'writes-held':
      // No write can begin now: the copy left since the last PASSIVE is short, then the WAL restarts.
      guarded(() => restart?.get());
      awaitingHold = false;
      reply({ type: 'writes-free' });
      return;
    case 'stop':
      clearInterval(timer);
      passive?.finalize();
      restart?.finalize();
      db?.close();
      reply({ type: 'stopped' });
  }
};

function checkpoint(): void {
  guarded(() => {
    // PASSIVE never waits for readers or the writer: it copies what it can and tries again next time.
    const { log } = passive?.get() as CheckpointRow;
    if (log >= restartFrames && !awaitingHold) {
      awaitingHold = true;
      reply({ type: 'hold-writes' });
    }
  });
}

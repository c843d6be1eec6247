// The thread that runs SQLite's WAL checkpoints for a serving keygate (started by db/checkpoints.ts):
// copying committed pages from the WAL into the database file, and the fsync after it, happen here on
// a connection of its own, so the event loop never stalls in them.
import { Database, type Statement } from 'bun:sqlite';
import type { CheckpointerMessage, CheckpointerReply } from './checkpoints';

declare const self: Worker;

let db: Database | undefined;
let checkpoint: Statement | undefined;
let timer: ReturnType<typeof setInterval> | undefined;

const reply = (message: CheckpointerReply) => self.postMessage(message);

self.onmessage = ({ data }: MessageEvent<CheckpointerMessage>) => {
  if (data.type === 'stop') {
    clearInterval(timer);
    checkpoint?.finalize();
    db?.close();
    reply({ type: 'stopped' });
    return;
  }
  try {
    db = new Database(data.path, { create: false });
    db.run('PRAGMA synchronous = FULL');
  } catch (error) {
    reply({ type: 'failed', message: (error as Error).message });
    return;
  }
  checkpoint = db.prepare('PRAGMA wal_checkpoint(PASSIVE)');
  timer = setInterval(() => {
    try {
      // PASSIVE never waits for readers or the writer: it copies what it can and tries again next time.
      checkpoint?.run();
    } catch (error) {
      clearInterval(timer);
      reply({ type: 'failed', message: (error as Error).message });
    }
  }, data.intervalMs);
  reply({ type: 'started' });
};

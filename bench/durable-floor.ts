// The durable floor: what one core does when each request is nothing but a JSON parse and one
// insert committed with group commit, no framework, no auth, no crypto. It bounds what keygate can
// reach with durable writes on a pinned core, whatever the rest of the pipeline costs.
//   taskset -c 0 bun bench/durable-floor.ts 3901 full|off  then  taskset -c 1 wrk -t1 -c64 -d4s -s bench/lua/create.lua ...
import { Database } from 'bun:sqlite';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const port = Number(process.argv[2] ?? 3901);
const synchronous = process.argv[3] === 'off' ? 'OFF' : 'FULL';
const db = new Database(join(mkdtempSync(join(tmpdir(), 'keygate-floor-')), 'floor.db'), { create: true });
db.run('PRAGMA journal_mode = WAL');
db.run(`PRAGMA synchronous = ${synchronous}`);
db.run('CREATE TABLE t (id TEXT PRIMARY KEY, user_id INTEGER, expires_at INTEGER)');
db.run('CREATE INDEX t_user ON t (user_id, expires_at)');
const insert = db.prepare('INSERT INTO t VALUES (?, ?, ?)');
const begin = db.prepare('BEGIN IMMEDIATE');
const commit = db.prepare('COMMIT');

let queue: Array<{ row: [string, number, number]; done: () => void }> = [];
function write(row: [string, number, number]): Promise<void> {
  return new Promise((done) => {
    if (queue.push({ row, done }) > 1) return;
    setImmediate(() => {
      const batch = queue;
      queue = [];
      begin.run();
      for (const job of batch) insert.run(...job.row);
      commit.run();
      for (const job of batch) job.done();
    });
  });
}

let users = 0;
Bun.serve({
  hostname: '127.0.0.1',
  port,
  async fetch(request) {
    const body = (await request.json()) as { name: string };
    await write([crypto.randomUUID(), users++ % 1000, Date.now()]);
    return Response.json({ result: 'success', name: body.name }, { status: 201 });
  },
});
console.log(`durable floor (synchronous=${synchronous}) on 127.0.0.1:${port}`);

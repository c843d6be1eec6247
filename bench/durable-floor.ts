// The durable floor: what one core does when each request is nothing but a JSON parse and one
// insert committed with group commit, no framework, no auth, no crypto. It bounds what keygate can
// reach with durable writes on a pinned core, whatever the rest of the pipeline costs.
//   taskset -c 0 bun bench/durable-floor.ts 3901 full|off [keygate.db]  then  taskset -c 1 wrk -t1 -c64 -d4s -s bench/lua/create.lua ...
// Without a file it writes a small table of its own in a fresh file. Given a keygate database it
// opens it as keygate does (its pragmas) and inserts rows of keygate's shape into api_keys, so the
// same floor on an empty and on a million-key file shows what the file's size alone costs a commit.
import { Database } from 'bun:sqlite';
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateKeyId } from '../src/auth/secrets';
import { openDatabase } from '../src/db/open';

const port = Number(process.argv[2] ?? 3901);
const synchronous = process.argv[3] === 'off' ? 'OFF' : 'FULL';
const keygateFile = process.argv[4];

type Row = [string, ...Array<string | number | Uint8Array>];

function ownTable(): Database {
  const db = new Database(join(mkdtempSync(join(tmpdir(), 'keygate-floor-')), 'floor.db'), { create: true });
  db.run('PRAGMA journal_mode = WAL');
  db.run('CREATE TABLE t (id TEXT PRIMARY KEY, user_id INTEGER, expires_at INTEGER)');
  db.run('CREATE INDEX t_user ON t (user_id, expires_at)');
  return db;
}

const db = keygateFile ? openDatabase(keygateFile).$client : ownTable();
db.run(`PRAGMA synchronous = ${synchronous}`);
const insert = keygateFile
  ? db.prepare(
      'INSERT INTO api_keys (id, secret_hash, user_id, level, name, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
    )
  : db.prepare('INSERT INTO t VALUES (?, ?, ?)');
const begin = db.prepare('BEGIN IMMEDIATE');
const commit = db.prepare('COMMIT');

let users = 0;
function rowOf(name: string): Row {
  const now = Date.now();
  const user = (users++ % 1000) + 1;
  if (!keygateFile) return [crypto.randomUUID(), user, now];
  return [generateKeyId(now), randomBytes(32), user, 1, name, now, now + 30 * 86_400_000];
}

let queue: Array<{ row: Row; done: () => void }> = [];
function write(row: Row): Promise<void> {
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

Bun.serve({
  hostname: '127.0.0.1',
  port,
  async fetch(request) {
    const body = (await request.json()) as { name: string };
    await write(rowOf(body.name));
    return Response.json({ result: 'success', name: body.name }, { status: 201 });
  },
});
console.log(
  `durable floor (synchronous=${synchronous}${keygateFile ? `, ${keygateFile}` : ''}) on 127.0.0.1:${port}`,
);

// The durable floor: what one core does when each request is nothing but a JSON parse and one
// insert committed with group commit, no framework, no auth, no crypto. It bounds what keygate can
// reach with durable writes on a pinned core, whatever the rest of the pipeline costs.
//   taskset -c 0 bun bench/durable-floor.ts 3901 full|off [keygate.db [duties]]  then  taskset -c 1 wrk -t1 -c64 -d4s -s bench/lua/create.lua ...
// Without a file it writes a small table of its own in a fresh file. Given a keygate database it
// opens it as keygate does (its pragmas) and inserts rows of keygate's shape into api_keys, so the
// same floor on an empty and on a million-key file shows what the file's size alone costs a commit.
// With `duties` (and JWT_SECRET in the environment) it also does what a create owes beside the
// insert: the caller's HS256 token checked (once per token, then remembered, as keygate does), the
// body read as keygate reads it, a key id and secret made and the secret hashed, the user's row
// count read (keygate's triggers keep it in step), the audit line and the request line, and the
// answer's headers (bench/duties.ts). No framework, no body schema, no savepoints. Without `duties`
// the floor drops those triggers from the file, so its insert is one row and its indexes: give it a
// copy, never a database keygate serves.
import { Database } from 'bun:sqlite';
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jwtVerify } from 'jose';
import { generateKeyId, generateSecret, hashSecret } from '../src/apikeys/secrets';
import { openDatabase } from '../src/db/sqlite/open';
import { answered, jsonBody, logLine, requestId } from './duties';

const port = Number(process.argv[2] ?? 3901);
const synchronous = process.argv[3] === 'off' ? 'OFF' : 'FULL';
const keygateFile = process.argv[4];
const duties = process.argv[5] === 'duties';
if (duties && (keygateFile === undefined || !process.env.JWT_SECRET)) {
  throw new Error('duties: give a keygate database file and JWT_SECRET');
}

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
// The duties' cap check: the user's row count, under keygate's default cap or MAX_KEYS_PER_USER (the
// one-user cases lift it, as they do keygate's).
const MAX_KEYS_PER_USER = Number(process.env.MAX_KEYS_PER_USER ?? 1000);
const rowsHeld = keygateFile
  ? db.prepare<{ keys: number }, [number]>('SELECT keys FROM user_key_counts WHERE user_id = ?')
  : undefined;
if (keygateFile && !duties) {
  db.run('DROP TRIGGER api_keys_count_inserted');
  db.run('DROP TRIGGER api_keys_count_deleted');
}

type Job = { row: Row; userId: number; done: (inserted: boolean) => void };
let queue: Job[] = [];
function write(row: Row, userId: number): Promise<boolean> {
  return new Promise((done) => {
    if (queue.push({ row, userId, done }) > 1) return;
    setImmediate(() => {
      const batch = queue;
      queue = [];
      begin.run();
      const outcomes = batch.map((job) => {
        if (duties && (rowsHeld?.get(job.userId)?.keys ?? 0) >= MAX_KEYS_PER_USER) return false;
        insert.run(...job.row);
        return true;
      });
      commit.run();
      for (const [i, job] of batch.entries()) job.done(outcomes[i] as boolean);
    });
  });
}

let users = 0;
function rowOf(name: string): Row {
  const now = Date.now();
  const user = (users++ % 1000) + 1;
  if (!keygateFile) return [crypto.randomUUID(), user, now];
  return [generateKeyId(now), randomBytes(32), user, 1, name, now, now + 30 * 86_400_000];
}

const jwtKey = new TextEncoder().encode(process.env.JWT_SECRET ?? '');
const callers = new Map<string, { userId: number; level: number }>();
async function callerOf(request: Request): Promise<{ userId: number; level: number } | undefined> {
  const token = (request.headers.get('authorization') ?? '').slice('Bearer '.length);
  const known = callers.get(token);
  if (known) return known;
  try {
    const { payload } = await jwtVerify(token, jwtKey, {
      algorithms: ['HS256'],
      requiredClaims: ['exp', 'sub'],
    });
    const caller = { userId: Number(payload.sub), level: Number(payload.level ?? 10) };
    callers.set(token, caller);
    return caller;
  } catch {
    return undefined;
  }
}

async function create(request: Request): Promise<Response> {
  const started = performance.now();
  const id = requestId(request);
  const caller = await callerOf(request);
  if (caller === undefined)
    return answered(request, id, started, 401, { result: 'error', error: 'Unauthorized.' });
  const body = (await jsonBody(request)) as
    | { name?: unknown; level?: unknown; expiresIn?: unknown }
    | undefined;
  const { name, level, expiresIn } = body ?? {};
  if (
    typeof name !== 'string' ||
    typeof level !== 'number' ||
    typeof expiresIn !== 'number' ||
    level > caller.level
  ) {
    return answered(request, id, started, 400, { result: 'error', error: 'Bad body.' });
  }
  const now = Date.now();
  const key = generateKeyId(now);
  const secret = generateSecret();
  const expiresAt = now + expiresIn * 1000;
  const row: Row = [key, hashSecret(secret), caller.userId, level, name, now, expiresAt];
  if (!(await write(row, caller.userId))) {
    return answered(request, id, started, 409, { result: 'error', error: 'Too many keys.' });
  }
  logLine(
    `{"time":"${new Date().toISOString()}","level":"info","msg":"apikey.created","key":"${key}","userId":${caller.userId},"by":"jwt","requestId":"${id}"}`,
  );
  const apikey = {
    key,
    secret,
    level,
    expiresAt: new Date(expiresAt).toISOString(),
    name,
    userId: caller.userId,
  };
  return answered(request, id, started, 201, { result: 'success', apikey });
}

Bun.serve({
  hostname: '127.0.0.1',
  port,
  async fetch(request) {
    if (request.method === 'GET') return new Response(null, { status: 204 }); // "are you up?"
    if (duties) return create(request);
    const body = (await request.json()) as { name: string };
    const row = rowOf(body.name);
    await write(row, row[2] as number);
    return Response.json({ result: 'success', name: body.name }, { status: 201 });
  },
});
console.log(
  `durable floor (synchronous=${synchronous}${keygateFile ? `, ${keygateFile}` : ''}${duties ? ", keygate's duties" : ''}) on 127.0.0.1:${port}`,
);

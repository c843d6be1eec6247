// Another process holds SQLite's write lock (the sqlite3 CLI in BEGIN EXCLUSIVE) while keygate serves.
//   bun scripts/experiments/db-lock.ts [--hold-ms 3000] [--binary path]
// Measures what a write waiting for the lock does to everything else: while one create waits,
// /health and a key-authenticated call are sent every 100 ms and timed. Then the lock is released
// and writes must succeed again with nothing acknowledged lost.

import { Database } from 'bun:sqlite';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { hashSecret } from '../../src/apikeys/secrets';
import { flag, jwt, percentile, round, startKeygate, stopGracefully, tempDir } from './support/server';

const holdMs = flag('hold-ms', 3000);
const binaryAt = process.argv.indexOf('--binary');
const binary = binaryAt === -1 ? undefined : process.argv[binaryAt + 1];
const sqlite3 = Bun.which('sqlite3');
if (!sqlite3) throw new Error('sqlite3 CLI not found');

const dir = tempDir('lock');
const databaseUrl = join(dir, 'keygate.db');
const server = await startKeygate({ databaseUrl, binary });
const bearer = {
  authorization: `Bearer ${await jwt.sign({ sub: 5, ttlSeconds: 600 })}`,
  'content-type': 'application/json',
};
type Created = { apikey: { key: string; secret: string } };
const create = () =>
  fetch(`${server.base}/apikeys/jwt`, {
    method: 'POST',
    headers: bearer,
    body: JSON.stringify({ name: 'lock', level: 1, expiresIn: 600 }),
  });

const acknowledged: Created['apikey'][] = [];
for (let i = 0; i < 5; i++) acknowledged.push(((await (await create()).json()) as Created).apikey);
const [known] = acknowledged as [Created['apikey']];
const basic = {
  authorization: `Basic ${Buffer.from(`${known.key}:${known.secret}`).toString('base64')}`,
  'content-type': 'application/json',
};

// The other process: takes the write lock, says so, and holds it until told to roll back.
const holder = Bun.spawn([sqlite3, databaseUrl], { stdin: 'pipe', stdout: 'pipe', stderr: 'pipe' });
holder.stdin.write('BEGIN EXCLUSIVE;\n.print locked\n');
holder.stdin.flush();
const reader = holder.stdout.getReader();
let said = '';
while (!said.includes('locked'))
  said += new TextDecoder().decode((await reader.read()).value ?? new Uint8Array());
const lockedAt = performance.now();

const write = (async () => {
  const started = performance.now();
  const response = await create();
  const text = await response.text();
  return {
    status: response.status,
    ms: round(performance.now() - started),
    retryAfter: response.headers.get('retry-after'),
    body: text,
  };
})();
const others: Array<{ what: string; status: number; ms: number }> = [];
const probes: Array<Promise<void>> = [];
for (let t = 100; t < Math.min(holdMs, 2500); t += 100) {
  probes.push(
    Bun.sleep(t).then(async () => {
      const pair = [
        ['health', () => fetch(`${server.base}/health`)],
        [
          'key auth (403 for the level)',
          () =>
            fetch(`${server.base}/apikeys/key`, {
              method: 'POST',
              headers: basic,
              body: JSON.stringify({ name: 'x', level: 8, expiresIn: 60 }),
            }),
        ],
      ] as const;
      await Promise.all(
        pair.map(async ([what, send]) => {
          const started = performance.now();
          const response = await send();
          await response.arrayBuffer();
          others.push({ what, status: response.status, ms: performance.now() - started });
        }),
      );
    }),
  );
}
const waitingWrite = await write;
await Promise.all(probes);
await Bun.sleep(Math.max(0, holdMs - (performance.now() - lockedAt)));

// A write sent while the lock is held, then the lock released 300 ms later: does it wait and succeed?
const lateWrite = create();
await Bun.sleep(300);
holder.stdin.write('ROLLBACK;\n.quit\n');
holder.stdin.flush();
await holder.exited;
const late = await lateWrite;
const afterRelease = await create();
if (afterRelease.status === 201) acknowledged.push(((await afterRelease.json()) as Created).apikey);

await stopGracefully(server);
const db = new Database(databaseUrl, { readonly: true });
const find = db.query('SELECT secret_hash AS hash FROM api_keys WHERE id = ?');
const lost = acknowledged.filter((k) => {
  const row = find.get(k.key) as { hash: Uint8Array } | null;
  return !row || !Buffer.from(row.hash).equals(hashSecret(k.secret));
}).length;
const integrity = (db.query('PRAGMA integrity_check').get() as { integrity_check: string }).integrity_check;
db.close();
rmSync(dir, { recursive: true, force: true });

const latencies = (what: string) => {
  const sorted = others
    .filter((o) => o.what === what)
    .map((o) => o.ms)
    .sort((a, b) => a - b);
  return {
    n: sorted.length,
    p50: round(percentile(sorted, 50)),
    max: round(sorted.at(-1) ?? Number.NaN),
    statuses: [...new Set(others.filter((o) => o.what === what).map((o) => o.status))],
  };
};
console.log(
  JSON.stringify(
    {
      writeWhileLocked: {
        status: waitingWrite.status,
        ms: waitingWrite.ms,
        retryAfter: waitingWrite.retryAfter,
        body: waitingWrite.body,
      },
      othersWhileWriteWaits: {
        health: latencies('health'),
        keyAuth: latencies('key auth (403 for the level)'),
      },
      writeSentDuringLockReleased300msLater: late.status,
      writeAfterRelease: afterRelease.status,
      acknowledgedLost: lost,
      integrity,
    },
    null,
    2,
  ),
);
process.exit(lost === 0 && integrity === 'ok' && afterRelease.status === 201 ? 0 : 1);

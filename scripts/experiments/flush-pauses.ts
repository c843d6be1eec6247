// How long the event loop stops while the usage flush writes 100k keys on SQLite: a setImmediate
// ticker records the gaps between its ticks while one flush runs (the keys exist, so each row is a
// real upsert; the first round inserts the hour rows, the next ones add to them; WAL checkpoints run
// on their thread, as when serving). Prints, per round,
// the flush's duration, the longest gap and the 99th percentile of the gaps, in ms.
//   bun scripts/experiments/flush-pauses.ts [--keys 100000] [--rounds 3] [--slice <keys per slice>]
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { checkpointInBackground } from '../../src/db/sqlite/checkpoints';
import { GroupCommitWriter } from '../../src/db/sqlite/group-commit';
import { openDatabase } from '../../src/db/sqlite/open';
import { createSqliteUsageStore } from '../../src/db/sqlite/usage-store';
import { createUsageCounter } from '../../src/usage/counter';
import { createUsageFlusher } from '../../src/usage/flusher';

const { values } = parseArgs({
  options: {
    keys: { type: 'string', default: '100000' },
    rounds: { type: 'string', default: '3' },
    slice: { type: 'string' },
  },
});
const keys = Number(values.keys);
const rounds = Number(values.rounds);
/** Keys per slice; the flusher's default when left out. */
const sliceKeys = values.slice === undefined ? undefined : Number(values.slice);

const dir = mkdtempSync(join(tmpdir(), 'flush-pauses-'));
try {
  const db = openDatabase(join(dir, 'keygate.db'));
  const client = db.$client;
  const ids = Array.from({ length: keys }, (_, i) => `kg_flush${String(i).padStart(24, '0')}`);
  const insert = client.prepare(
    `INSERT INTO api_keys (id, secret_hash, user_id, level, name, created_at, expires_at) VALUES (?, x'00', ?, 1, 'k', 1, ${Number.MAX_SAFE_INTEGER})`,
  );
  client.transaction(() => {
    for (const [i, id] of ids.entries()) insert.run(id, i % 1000);
  })();
  const groupCommit = new GroupCommitWriter(client);
  // As a serving keygate does: WAL checkpoints on a thread of their own, not on the event loop.
  const checkpoints = checkpointInBackground(client, {
    holdWrites: () => groupCommit.hold(),
    onFailure: (reason) => console.error('checkpoints back on the event loop:', reason),
  });
  if (!(await checkpoints.started)) console.error('checkpoints on the event loop');
  const store = createSqliteUsageStore(db, groupCommit);
  const counter = createUsageCounter({ clock: () => Date.now(), maxKeys: keys + 1 });
  const flusher = createUsageFlusher({
    counter,
    store,
    intervalSeconds: 3600,
    timer: () => () => {},
    logger: { warn: (msg, fields) => console.error(msg, fields) },
    ...(sliceKeys === undefined ? {} : { sliceKeys }),
  });

  for (let round = 1; round <= rounds; round++) {
    for (const id of ids) counter.record(id, 'valid');
    const gaps: number[] = [];
    let running = true;
    let last = performance.now();
    const tick = () => {
      const now = performance.now();
      gaps.push(now - last);
      last = now;
      if (running) setImmediate(tick);
    };
    setImmediate(tick);
    const started = performance.now();
    await flusher.flush();
    const took = performance.now() - started;
    running = false;
    await new Promise((resolve) => setImmediate(resolve));
    const maxAt = gaps.indexOf(Math.max(...gaps));
    gaps.sort((a, b) => a - b);
    const p99 = gaps[Math.min(gaps.length - 1, Math.floor(gaps.length * 0.99))] ?? 0;
    console.log(
      JSON.stringify({
        round,
        keys,
        flushMs: Math.round(took),
        maxGapMs: Number((gaps.at(-1) ?? 0).toFixed(1)),
        p99GapMs: Number(p99.toFixed(1)),
        ticks: gaps.length,
        maxAt: maxAt,
      }),
    );
  }
  await checkpoints.stop();
  client.close();
} finally {
  rmSync(dir, { recursive: true, force: true });
}

// How long do the operator's lookups take at a million keys? Seeds 1M keys over 100k users (10 each,
// created over the last 30 days, ten names taking turns), 1,000 user policies, the last 24 hours
// of usage of 50k keys (1.2M key_usage rows, their last_used_at) and 30 days of verification and
// creation counts; then builds keygate in this process on that database and times each lookup
// through its full request handler (the operator's token checked, the query run, the JSON written):
// the median and the slowest of --runs runs after one warm-up. On SQLite the keys come from
// bench/seed.ts; on PostgreSQL (--engine postgres, a throwaway server) from INSERT … SELECT over
// generate_series on the server. Prints one table; docs/operator.md quotes it.
// Run alone: flock /tmp/keygate-load.lock bun scripts/experiments/operator-lookups.ts [--engine postgres] [--keys 1000000] [--runs 7]

import { Database } from 'bun:sqlite';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { SQL } from 'bun';
import { seedKeys } from '../../bench/seed';
import { loadConfig } from '../../src/config';
import { createLogger } from '../../src/core/log';
import { createKeygate } from '../../src/keygate';
import { startPostgres, type ThrowawayPostgres } from '../../test/support/postgres';
import { flag, round, SCRIPT_JWT_SECRET, tempDir } from './support/server';

const keyCount = flag('keys', 1_000_000);
const userCount = flag('users', 100_000);
const runs = flag('runs', 7);
const usedKeys = Math.min(flag('used-keys', 50_000), keyCount);
const engine = process.argv.includes('--engine')
  ? process.argv[process.argv.indexOf('--engine') + 1]
  : 'sqlite';
if (engine !== 'sqlite' && engine !== 'postgres') throw new Error('--engine is sqlite or postgres');

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const NOW = Date.now();
const HOUR_NOW = NOW - (NOW % HOUR);
const FIRST_CREATED = NOW - 30 * DAY;
const NAMES = [
  'ci runner',
  'Billing Service',
  'deploy',
  'backup',
  'mobile app',
  'web app',
  'cron',
  'analytics',
  'partner',
  'staging',
];
const perName = Math.ceil(keyCount / NAMES.length);
/** Key i (over all names): created evenly over the last 30 days, oldest first; its user i % users. */
const createdAtOf = (i: number) => FIRST_CREATED + Math.floor((i * 30 * DAY) / keyCount);

/** SQL both engines run after the keys: policies, usage, last uses, verification and creation counts. */
function extraRowsSql(usedIds: string) {
  return [
    // 1,000 users with a policy, every hundredth.
    `INSERT INTO user_policies (user_id, max_keys) SELECT DISTINCT user_id, 20 FROM api_keys WHERE user_id % 100 = 0`,
    // The last 24 hours of the used keys' usage: one row per key and hour.
    `INSERT INTO key_usage (key_id, bucket, valid, rate_limited, usage_exceeded, denied)
      SELECT k.id, ${HOUR_NOW} - h.n * ${HOUR}, 1 + (k.rn * 7 + h.n) % 50, 0, 0, (k.rn + h.n) % 3
      FROM (${usedIds}) k CROSS JOIN (${hoursSql(24)}) h`,
    `UPDATE api_keys SET last_used_at = ${NOW - 1000} WHERE id IN (SELECT id FROM (${usedIds}) u)`,
    // Six codes in each of the last 720 hours.
    `INSERT INTO verification_counts (bucket, code, count)
      SELECT ${HOUR_NOW} - h.n * ${HOUR}, c.code, 1000 + h.n FROM (${hoursSql(720)}) h
      CROSS JOIN (SELECT 'VALID' AS code UNION ALL SELECT 'NOT_FOUND' UNION ALL SELECT 'EXPIRED'
        UNION ALL SELECT 'INVALID_TOKEN' UNION ALL SELECT 'RATE_LIMITED' UNION ALL SELECT 'DISABLED') c`,
    `INSERT INTO key_creations (bucket, shard, count)
      SELECT ${HOUR_NOW} - h.n * ${HOUR}, 0, 1389 FROM (${hoursSql(720)}) h`,
  ];
}
/** Rows n = 0 .. count-1, in either engine's SQL. */
const hoursSql = (count: number) =>
  engine === 'postgres'
    ? `SELECT generate_series(0, ${count - 1})::bigint AS n`
    : `WITH RECURSIVE h(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM h WHERE n < ${count - 1}) SELECT n FROM h`;
/** The used keys: every (keys / usedKeys)-th, numbered. */
const usedIdsSql = () => {
  const step = Math.max(1, Math.floor(keyCount / usedKeys));
  return `SELECT id, rn FROM (SELECT id, row_number() OVER (ORDER BY id) AS rn FROM api_keys) n WHERE rn % ${step} = 0`;
};

async function seedSqlite(path: string) {
  seedKeys(
    path,
    NAMES.map((name, n) => ({
      count: Math.min(perName, keyCount - n * perName),
      // The names take turns, as keys of many kinds are created every day.
      userOf: (i: number) => (i * NAMES.length + n) % userCount,
      createdAt: (i: number) => createdAtOf(i * NAMES.length + n),
      level: 3,
      expiresAt: NOW + 365 * DAY,
      name,
    })),
  );
  const db = new Database(path);
  db.run('PRAGMA journal_mode = WAL');
  db.run('BEGIN');
  for (const statement of extraRowsSql(usedIdsSql())) db.run(statement);
  db.run('COMMIT');
  db.run('ANALYZE');
  db.run('PRAGMA wal_checkpoint(TRUNCATE)');
  db.close();
}

async function seedPostgres(url: string) {
  const sql = new SQL(url, { max: 1 });
  // The ids: kg_ + created_at in 12 hex digits + 20 hex digits; hex sorts as the time does.
  await sql.unsafe(`INSERT INTO api_keys (id, secret_hash, user_id, level, name, created_at, expires_at)
    SELECT 'kg_' || lpad(to_hex(c), 12, '0') || substr(md5(i::text), 1, 20), repeat('0', 64),
      i % ${userCount}, 3, (ARRAY[${NAMES.map((name) => `'${name}'`).join(',')}])[1 + i % ${NAMES.length}], c,
      ${NOW + 365 * DAY}
    FROM generate_series(0, ${keyCount - 1}) AS i,
      LATERAL (SELECT ${FIRST_CREATED}::bigint + (i::bigint * ${30 * DAY}) / ${keyCount} AS c) t`);
  for (const statement of extraRowsSql(usedIdsSql())) await sql.unsafe(statement);
  await sql.unsafe('VACUUM ANALYZE');
  await sql.close();
}

const scratch = tempDir('operator-lookups');
let postgres: ThrowawayPostgres | undefined;
try {
  const seedStart = performance.now();
  let databaseUrl: string;
  if (engine === 'postgres') {
    postgres = await startPostgres();
    databaseUrl = postgres.createDatabase('lookups');
    // keygate migrates the empty database; the seed follows.
    const migrating = await keygateOn(databaseUrl);
    await migrating.close();
    await seedPostgres(databaseUrl);
  } else {
    databaseUrl = join(scratch, 'keygate.db');
    await seedSqlite(databaseUrl);
  }
  console.log(
    `seeded ${keyCount} keys over ${userCount} users on ${engine} in ${round((performance.now() - seedStart) / 1000, 1)} s`,
  );

  const keygate = await keygateOn(databaseUrl);
  const token = await keygate.jwt.sign({ sub: 'ops', scope: 'keygate:admin', ttlSeconds: 3600 });
  // biome-ignore lint/suspicious/noExplicitAny: the answers are read as JSON, whatever their route.
  const ask = async (path: string): Promise<any> => {
    const response = await keygate.handle(
      new Request(`http://localhost${path}`, { headers: { authorization: `Bearer ${token}` } }),
    );
    const body = await response.json();
    if (response.status !== 200) throw new Error(`${path}: ${response.status} ${JSON.stringify(body)}`);
    return body;
  };
  const first = await ask('/admin/apikeys?limit=1');
  const someKey: string = first.apikeys[0].key;
  const middle = await ask(`/admin/apikeys?limit=100&q=${someKey.slice(0, 6)}`);
  const deepCursor: string = (await ask('/admin/apikeys?limit=100')).nextCursor;
  const userCursor: string = (await ask('/admin/users?limit=100')).nextCursor;
  const CASES: Array<[string, string]> = [
    ['users, first page (50)', '/admin/users'],
    ['users, a later page (100)', `/admin/users?limit=100&cursor=${userCursor}`],
    ['keys, first page (50)', '/admin/apikeys'],
    ['keys, second page (100)', `/admin/apikeys?limit=100&cursor=${deepCursor}`],
    ['q = a whole key id', `/admin/apikeys?q=${someKey}`],
    ['q = kg_ + 5 characters (~90 keys)', `/admin/apikeys?q=${someKey.slice(0, 8)}`],
    ['q = kg_ + 2 characters (every key)', `/admin/apikeys?q=${someKey.slice(0, 5)}`],
    ['q = kg_ (every key)', '/admin/apikeys?q=kg_'],
    ['q = "billing" (a tenth of the names)', '/admin/apikeys?q=billing'],
    ['q = "nightly" (no name: a full scan)', '/admin/apikeys?q=nightly'],
    ['overview', '/admin/overview'],
  ];
  if (middle.apikeys.length === 0) throw new Error('the prefix found nothing');
  console.log(`| lookup (${engine}, ${keyCount} keys) | median ms | slowest ms | items |`);
  console.log('| --- | ---: | ---: | ---: |');
  for (const [label, path] of CASES) {
    const body = await ask(path); // warm-up
    const times: number[] = [];
    for (let i = 0; i < runs; i++) {
      const started = performance.now();
      await ask(path);
      times.push(performance.now() - started);
    }
    times.sort((a, b) => a - b);
    const items =
      body.apikeys?.length ?? body.users?.length ?? `${body.topKeys.length} + ${body.topUsers.length}`;
    console.log(
      `| ${label} | ${round(times[Math.floor(times.length / 2)] as number, 1)} | ${round(times.at(-1) as number, 1)} | ${items} |`,
    );
  }
  await keygate.close();
} finally {
  await postgres?.stop();
  rmSync(scratch, { recursive: true, force: true });
}

async function keygateOn(databaseUrl: string) {
  const config = loadConfig({ DATABASE_URL: databaseUrl, JWT_SECRET: SCRIPT_JWT_SECRET, LOG_LEVEL: 'warn' });
  return createKeygate(config, {
    jwtSecret: SCRIPT_JWT_SECRET,
    logger: createLogger(config.logLevel, (chunk) => process.stderr.write(chunk)),
  });
}

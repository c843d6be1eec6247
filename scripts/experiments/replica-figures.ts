// Figures for several replicas on one PostgreSQL database, on a throwaway PostgreSQL and keygate replicas
// started from source, all on 127.0.0.1: revocation latency across replicas (a key deleted on one,
// polled every 1 ms on another until refused; N trials), the cap race (concurrent creates for one user
// spread over three replicas), and a purge of K expired keys by three replicas (time, and whether the
// purged counts add up: any excess would be work done twice). Stops everything it started.
//   bun scripts/experiments/replica-figures.ts [--trials 100] [--expired 100000]
import { parseArgs } from 'node:util';
import { SQL } from 'bun';
import { startPostgres } from '../../test/support/postgres';
import { bearerFor, type Replica, startReplica } from '../../test/support/replicas';

const { values } = parseArgs({
  options: { trials: { type: 'string', default: '100' }, expired: { type: 'string', default: '100000' } },
});
const trials = Number(values.trials);
const expired = Number(values.expired);
const body = { name: 'figures', level: 3, expiresIn: 3600 };

const server = await startPostgres();
const replicas: Replica[] = [];
try {
  const start = async (url: string, n: number, env: Record<string, string>) => {
    const started = await Promise.all(Array.from({ length: n }, () => startReplica(url, env)));
    replicas.push(...started);
    return started;
  };

  // 1. Revocation latency: an hour of key cache, so only NOTIFY can make the other replica forget.
  const revocationDb = server.createDatabase('revocation');
  const [a, b] = (await start(revocationDb, 2, { KEY_CACHE_SECONDS: '3600' })) as [Replica, Replica];
  const headers = await bearerFor(1);
  const latencies: number[] = [];
  for (let i = 0; i < trials; i++) {
    const key = (await a.req('POST', '/apikeys/jwt', { headers, body })).json.apikey;
    const verify = () => b.req('POST', '/apikeys/verify', { body: { key: key.key, secret: key.secret } });
    if ((await verify()).json.code !== 'VALID') throw new Error('not valid before the delete');
    const deleted = a.req('DELETE', `/apikeys/${key.key}/jwt`, { headers });
    const sent = performance.now();
    if ((await deleted).status !== 204) throw new Error('delete failed');
    while ((await verify()).json.code !== 'NOT_FOUND') {
      if (performance.now() - sent > 5000) throw new Error('still valid after 5 s');
      await Bun.sleep(1);
    }
    latencies.push(performance.now() - sent);
  }
  latencies.sort((x, y) => x - y);
  const ms = (x: number) => `${x.toFixed(1)} ms`;
  console.log(
    `revocation across replicas (${trials} trials, from sending the DELETE to the other replica's first NOT_FOUND): median ${ms(latencies[Math.floor(trials / 2)] as number)}, p90 ${ms(latencies[Math.floor(trials * 0.9)] as number)}, max ${ms(latencies.at(-1) as number)}`,
  );

  // 2. The cap race: 300 concurrent creates for one user over three replicas, cap 100.
  const capDb = server.createDatabase('cap');
  const three = await start(capDb, 3, { MAX_KEYS_PER_USER: '100' });
  const statuses = await Promise.all(
    Array.from({ length: 300 }, (_, i) =>
      (three[i % 3] as Replica).req('POST', '/apikeys/jwt', { headers, body }).then((r) => r.status),
    ),
  );
  const capSql = new SQL(capDb, { max: 1 });
  const [{ n: held }] = await capSql`SELECT count(*)::int AS n FROM api_keys`;
  await capSql.close();
  console.log(
    `cap race (cap 100, 300 concurrent creates over 3 replicas): ${statuses.filter((s) => s === 201).length} × 201, ${statuses.filter((s) => s === 409).length} × 409, other ${statuses.filter((s) => s !== 201 && s !== 409).length}; rows held: ${held}`,
  );

  // 3. Purge: K expired keys, three replicas purging every second.
  const purgeDb = server.createDatabase('purge');
  const [migrator] = await start(purgeDb, 1, {});
  await (migrator as Replica).stop();
  const sql = new SQL(purgeDb, { max: 2 });
  const now = Date.now();
  await sql`INSERT INTO api_keys (id, secret_hash, user_id, level, name, created_at, expires_at)
    SELECT 'kg_expired' || lpad(i::text, 19, '0'), repeat('0', 64), i % 1000, 1, 'old', ${now - 7200_000}, ${now - 3600_000}
    FROM generate_series(1, ${expired}) AS i`;
  const purgers = await start(purgeDb, 3, { PURGE_INTERVAL_SECONDS: '1' });
  const began = performance.now();
  for (;;) {
    const [{ n }] = await sql`SELECT count(*)::int AS n FROM api_keys`;
    if (n === 0) break;
    if (performance.now() - began > 300_000) throw new Error('purge did not finish in 5 minutes');
    await Bun.sleep(100);
  }
  const took = performance.now() - began;
  for (const replica of purgers) await replica.stop();
  const counts = purgers.map((replica) =>
    replica.lines('apikeys.purged').reduce((sum: number, line: { count: number }) => sum + line.count, 0),
  );
  const total = counts.reduce((x, y) => x + y, 0);
  console.log(
    `purge of ${expired} expired keys by 3 replicas: ${(took / 1000).toFixed(1)} s (first timer tick included); per replica ${counts.join(' + ')} = ${total} (${total - expired} removed twice)`,
  );
  await sql.close();
} finally {
  await Promise.all(replicas.map((replica) => replica.stop()));
  server.destroy();
}
process.exit(0);

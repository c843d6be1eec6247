// Webhooks across kill -9: does every acknowledged change's message arrive?
//   flock /tmp/keygate-load.lock bun scripts/experiments/webhook-crash-test.ts [--cycles 5]
//     [--workers 16] [--engine sqlite|postgres] [--receiver-delay-ms 20] [--source]
// Each cycle starts keygate (dist/keygate, or the source with --source) on the same database, with
// one webhook endpoint (key.created, key.deleted) pointing at a receiver in this process that answers
// 204 after --receiver-delay-ms, so a queue builds up behind the writes. Workers create keys and
// delete some of those acknowledged; keygate is killed with SIGKILL at a random moment, when changes
// have been acknowledged (201/204) whose messages have not arrived yet. The next cycle's start sends
// what is left. At the end a last start drains the outbox, and the script counts: changes
// acknowledged, those whose message arrived, those whose message never did (must be 0), changes
// still undelivered when a kill came (the cases the test is about), and messages sent twice (a kill
// after the receiver's 2xx but before keygate recorded it: allowed, at least once).
import { crashDatabase } from './support/crash-database';
import {
  BINARY,
  flag,
  jwt,
  killHard,
  type RunningKeygate,
  startKeygate,
  stopGracefully,
} from './support/server';

const cycles = flag('cycles', 5);
const workers = flag('workers', 16);
const receiverDelayMs = flag('receiver-delay-ms', 20);
const engineAt = process.argv.indexOf('--engine');
const engine = engineAt === -1 ? 'sqlite' : process.argv[engineAt + 1];
if (engine !== 'sqlite' && engine !== 'postgres') throw new Error('--engine is sqlite or postgres');
const fromSource = process.argv.includes('--source') || !(await Bun.file(BINARY).exists());

const database = await crashDatabase(engine);
const env = { WEBHOOK_ALLOW_PRIVATE: 'true', LOG_LEVEL: 'warn' };

/** What the receiver got: each (type, key) with the webhook-ids it came under, and how often. */
const arrived = new Map<string, number>();
const deliveriesById = new Map<string, number>();
const receiver = Bun.serve({
  hostname: '127.0.0.1',
  port: 0,
  async fetch(request) {
    const body = (await request.json()) as { type: string; data: { key: string } };
    await Bun.sleep(receiverDelayMs);
    const id = request.headers.get('webhook-id') ?? '';
    deliveriesById.set(id, (deliveriesById.get(id) ?? 0) + 1);
    const change = `${body.type} ${body.data.key}`;
    arrived.set(change, (arrived.get(change) ?? 0) + 1);
    return new Response(null, { status: 204 });
  },
});

const acknowledged = new Set<string>(); // `${type} ${key}` of every 201'd create and 204'd delete
const undeliveredAtKill = new Set<string>();
const totals = { requests: 0, transportErrors: 0, unexpected: 0, kills: 0 };
const operator = {
  authorization: `Bearer ${await jwt.sign({ sub: 'crash', scope: 'keygate:admin', ttlSeconds: 86_400 })}`,
};
const tokens = await Promise.all(
  Array.from({ length: 20 }, (_, i) => jwt.sign({ sub: i + 1, ttlSeconds: 86_400 })),
);
const json = { 'content-type': 'application/json' };

async function drive(server: RunningKeygate, stop: AbortSignal, worker: number): Promise<void> {
  const mine: string[] = [];
  while (!stop.aborted) {
    const user = (worker % tokens.length) + 1;
    const headers = { authorization: `Bearer ${tokens[user - 1]}`, ...json };
    totals.requests++;
    try {
      const victim = mine.length > 3 && Math.random() < 0.3 ? mine.shift() : undefined;
      if (victim) {
        const response = await fetch(`${server.base}/apikeys/${victim}/jwt`, { method: 'DELETE', headers });
        if (response.status === 204) acknowledged.add(`key.deleted ${victim}`);
        else totals.unexpected++;
      } else {
        const response = await fetch(`${server.base}/apikeys/jwt`, {
          method: 'POST',
          headers,
          body: JSON.stringify({ name: 'crash', level: 0, expiresIn: 86_400 }),
        });
        if (response.status === 201) {
          const { apikey } = (await response.json()) as { apikey: { key: string } };
          acknowledged.add(`key.created ${apikey.key}`);
          mine.push(apikey.key);
        } else totals.unexpected++;
      }
    } catch {
      totals.transportErrors++; // killed mid-request: not acknowledged, not judged
      return;
    }
  }
}

const start = () => startKeygate({ databaseUrl: database.url, env, fromSource });
const started = performance.now();
try {
  let server = await start();
  const created = await fetch(`${server.base}/admin/webhooks`, {
    method: 'POST',
    headers: { ...operator, ...json },
    body: JSON.stringify({
      url: `http://127.0.0.1:${receiver.port}/hooks`,
      events: ['key.created', 'key.deleted'],
    }),
  });
  if (created.status !== 201)
    throw new Error(`endpoint not created: ${created.status} ${await created.text()}`);
  for (let cycle = 1; cycle <= cycles; cycle++) {
    const stop = new AbortController();
    const driving = Array.from({ length: workers }, (_, worker) => drive(server, stop.signal, worker));
    await Bun.sleep(300 + Math.random() * 1200);
    await killHard(server);
    totals.kills++;
    stop.abort();
    await Promise.all(driving);
    for (const change of acknowledged) if (!arrived.has(change)) undeliveredAtKill.add(change);
    server = await start();
  }
  // The last start sends what the kills left.
  const deadline = performance.now() + 60_000;
  while (performance.now() < deadline && [...acknowledged].some((change) => !arrived.has(change)))
    await Bun.sleep(100);
  await stopGracefully(server);
} finally {
  receiver.stop(true);
  await database.destroy();
}

const missing = [...acknowledged].filter((change) => !arrived.has(change));
const twice = [...deliveriesById.values()].filter((n) => n > 1).length;
const unacknowledgedArrived = [...arrived.keys()].filter((change) => !acknowledged.has(change)).length;
const report = {
  engine,
  keygate: fromSource ? 'source' : 'dist/keygate',
  cycles,
  kills: totals.kills,
  requests: totals.requests,
  changesAcknowledged: acknowledged.size,
  acknowledgedDelivered: acknowledged.size - missing.length,
  acknowledgedMissing: missing.length,
  undeliveredWhenKilled: undeliveredAtKill.size,
  undeliveredWhenKilledThenDelivered: [...undeliveredAtKill].filter((change) => arrived.has(change)).length,
  messagesDeliveredTwice: twice,
  unacknowledgedChangesDelivered: unacknowledgedArrived,
  transportErrors: totals.transportErrors,
  unexpectedStatuses: totals.unexpected,
  seconds: Math.round((performance.now() - started) / 100) / 10,
};
console.log(JSON.stringify(report, null, 2));
if (missing.length > 0) {
  console.error(`LOST: ${missing.slice(0, 10).join(', ')}`);
  process.exit(1);
}

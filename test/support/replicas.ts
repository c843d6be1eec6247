// keygate replicas as real processes on one PostgreSQL database: each `bun src/cli.ts serve` on
// 127.0.0.1 and a port of its own, its JSON log lines collected, stopped (or killed) by its PID.
import { join } from 'node:path';
import { SQL, type Subprocess } from 'bun';
import { createJwtAuthority } from '../../src/auth/jwt';
import { systemClock } from '../../src/core/clock';
import { sharedPostgres } from './postgres';

export const REPLICA_JWT_SECRET = 'replica-tests-secret-at-least-32-bytes-long';
const CLI = join(import.meta.dir, '..', '..', 'src', 'cli.ts');

const started = new Set<Subprocess>();
process.on('exit', () => {
  for (const child of started) if (child.exitCode === null) child.kill('SIGKILL');
});

export type Replica = Awaited<ReturnType<typeof startReplica>>;

/** Starts one replica and resolves once it listens (after migrating), with its base URL. */
export async function startReplica(databaseUrl: string, env: Record<string, string> = {}) {
  const child = Bun.spawn(['bun', CLI, 'serve'], {
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      DATABASE_URL: databaseUrl,
      JWT_SECRET: REPLICA_JWT_SECRET,
      HOST: '127.0.0.1',
      PORT: '0',
      DATABASE_POOL_SIZE: '4',
      ...env,
    },
    stdout: 'pipe',
    stderr: 'pipe',
  });
  started.add(child);
  // biome-ignore lint/suspicious/noExplicitAny: log lines are whatever JSON keygate wrote.
  const lines: any[] = [];
  /** Lines that were not JSON, from either stream: keygate writes none, so each is a finding. */
  const notJson: Array<{ stream: 'stdout' | 'stderr'; line: string }> = [];
  const stderrLines: string[] = [];
  let url: string | undefined;
  let listening: () => void = () => {};
  const ready = new Promise<void>((resolve) => {
    listening = resolve;
  });
  const readLines = async (stream: ReadableStream<Uint8Array>, each: (line: string) => void) => {
    const decoder = new TextDecoder();
    let rest = '';
    for await (const chunk of stream) {
      rest += decoder.decode(chunk, { stream: true });
      const parts = rest.split('\n');
      rest = parts.pop() ?? '';
      for (const part of parts) if (part !== '') each(part);
    }
    if (rest !== '') each(rest);
  };
  const parsed = (stream: 'stdout' | 'stderr', part: string) => {
    try {
      return JSON.parse(part);
    } catch {
      notJson.push({ stream, line: part });
      return undefined;
    }
  };
  readLines(child.stdout, (part) => {
    const line = parsed('stdout', part);
    if (line === undefined) return;
    lines.push(line);
    if (line.msg === 'listening') {
      url = String(line.url).replace(/\/$/, '');
      listening();
    }
  });
  // Read as it comes, so a chatty stderr cannot fill the pipe and stall the replica.
  const stderrDone = readLines(child.stderr, (part) => {
    stderrLines.push(part);
    const line = parsed('stderr', part);
    if (line !== undefined) lines.push(line);
  });
  const exited = child.exited.then(async (code) => {
    await stderrDone;
    throw new Error(`replica exited (${code}) before listening: ${stderrLines.join('\n')}`);
  });
  await Promise.race([
    ready,
    exited,
    Bun.sleep(30_000).then(() => Promise.reject(new Error('no start in 30 s'))),
  ]);
  exited.catch(() => {}); // it may exit later, when stopped
  const base = url as string;
  return {
    base,
    pid: child.pid,
    /** The log lines so far; `msg` filters them. */
    // biome-ignore lint/suspicious/noExplicitAny: as above.
    lines: (msg?: string): any[] => (msg === undefined ? lines : lines.filter((line) => line.msg === msg)),
    /** Every line so far, on stdout or stderr, that did not parse as JSON. */
    notJson: () => [...notJson],
    async req(method: string, path: string, init: { headers?: Record<string, string>; body?: unknown } = {}) {
      const headers = new Headers(init.headers);
      if (init.body !== undefined) headers.set('content-type', 'application/json');
      const response = await fetch(`${base}${path}`, {
        method,
        headers,
        body: init.body === undefined ? undefined : JSON.stringify(init.body),
      });
      const text = await response.text();
      return {
        status: response.status,
        headers: response.headers,
        json: text === '' ? undefined : JSON.parse(text),
      };
    },
    /** SIGTERM and wait for the exit code. */
    async stop(): Promise<number> {
      if (child.exitCode === null) child.kill('SIGTERM');
      const code = await child.exited;
      started.delete(child);
      return code;
    },
    /** SIGKILL: no drain, no clean close. */
    async kill(): Promise<void> {
      child.kill('SIGKILL');
      await child.exited;
      started.delete(child);
    },
  };
}

const jwt = createJwtAuthority({ secret: REPLICA_JWT_SECRET, clock: systemClock });

const running: Replica[] = [];

/** Starts `count` replicas on one database at once; `stopReplicas` stops them (a file's afterAll). */
export async function startReplicas(
  databaseUrl: string,
  count: number,
  env: Record<string, string> = {},
): Promise<Replica[]> {
  const started = await Promise.all(Array.from({ length: count }, () => startReplica(databaseUrl, env)));
  running.push(...started);
  return started;
}

/** Stops every replica `startReplicas` started and has not stopped yet. */
export async function stopReplicas(): Promise<void> {
  await Promise.all(running.splice(0).map((replica) => replica.stop()));
}

let databases = 0;

/** An empty database on the run's shared PostgreSQL, named after `purpose`, and a small client on it. */
export async function freshReplicaDatabase(purpose: string): Promise<{ url: string; sql: SQL }> {
  const { server } = await sharedPostgres();
  const url = server.createDatabase(`keygate_${purpose}_${process.pid}_${++databases}`);
  return { url, sql: new SQL(url, { max: 2 }) };
}

/** Polls `check` every 10 ms until it holds or `limitMs` passes; resolves with the ms it took. */
export async function within(limitMs: number, check: () => Promise<boolean>): Promise<number> {
  const started = performance.now();
  while (performance.now() - started < limitMs) {
    if (await check()) return performance.now() - started;
    await Bun.sleep(10);
  }
  throw new Error(`not within ${limitMs} ms`);
}

/** A token for `sub`: a user id, or any subject for replicas with JWT_USER_IDS=mapped. */
export async function bearerFor(sub: number | string, level?: number): Promise<Record<string, string>> {
  return { authorization: `Bearer ${await jwt.sign({ sub, level, ttlSeconds: 3600 })}` };
}

/** The operator's token: the default admin scope, any subject. */
export async function operatorBearer(sub = 'ops'): Promise<Record<string, string>> {
  return { authorization: `Bearer ${await jwt.sign({ sub, scope: 'keygate:admin', ttlSeconds: 3600 })}` };
}

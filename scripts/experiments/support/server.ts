// Starts the compiled binary (or the source) for the fault scripts: 127.0.0.1, a free port, a fixed JWT secret, a
// database in a directory the caller owns. Tracks every process it starts so a script can end
// exactly those (and only those) on the way out.
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Subprocess } from 'bun';
import { createJwtAuthority } from '../../../src/auth/jwt';

export const SCRIPT_JWT_SECRET = 'fault-scripts-secret-at-least-32-bytes-long';
/** dist/keygate, or KEYGATE_BINARY (e.g. a build of the working tree kept apart from a running bench). */
export const BINARY = process.env.KEYGATE_BINARY ?? resolve(import.meta.dir, '../../../dist/keygate');

const CLI_SOURCE = resolve(import.meta.dir, '../../../src/cli.ts');

const started = new Set<Subprocess>();
process.on('exit', () => {
  for (const child of started)
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => process.exit(130));
}

export function requireBinary(binary = BINARY): string {
  if (!existsSync(binary)) throw new Error(`${binary} is missing: run bun run build first.`);
  return binary;
}

export function tempDir(label: string): string {
  return mkdtempSync(join(tmpdir(), `keygate-${label}-`));
}

/** A port nobody listens on right now (the kernel picks it; the tiny race is acceptable here). */
export function freePort(): number {
  const probe = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } });
  const port = probe.port;
  probe.stop(true);
  return port;
}

export type RunningKeygate = {
  process: Subprocess<'ignore', 'pipe', 'pipe'>;
  base: string;
  port: number;
  pid: number;
  stderr(): Promise<string>;
};

export type StartOptions = {
  databaseUrl: string;
  port?: number;
  env?: Record<string, string>;
  binary?: string;
  /** Run from source (`bun src/cli.ts serve`) instead of the compiled binary. */
  fromSource?: boolean;
};

/** Spawns keygate serve; resolves once /health answers (or rejects with its stderr if it exits). */
export async function startKeygate(options: StartOptions): Promise<RunningKeygate> {
  const spawned = spawnKeygate(options);
  await spawned.ready;
  return spawned.running;
}

/** Spawns keygate serve and hands the process back at once; `ready` settles as startKeygate does. */
export function spawnKeygate(options: StartOptions): { running: RunningKeygate; ready: Promise<void> } {
  const port = options.port ?? freePort();
  const command = options.fromSource ? [process.execPath, CLI_SOURCE] : [requireBinary(options.binary)];
  const child = Bun.spawn([...command, 'serve'], {
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOST: '127.0.0.1',
      PORT: String(port),
      DATABASE_URL: options.databaseUrl,
      JWT_SECRET: SCRIPT_JWT_SECRET,
      LOG_LEVEL: 'warn',
      ...options.env,
    },
    stdin: 'ignore',
    stdout: 'pipe',
    stderr: 'pipe',
  });
  started.add(child);
  child.exited.then(() => started.delete(child));
  const base = `http://127.0.0.1:${port}`;
  const running: RunningKeygate = {
    process: child,
    base,
    port,
    pid: child.pid,
    stderr: () => new Response(child.stderr).text(),
  };
  // Drain stdout so a chatty log level can never block the server on a full pipe.
  void new Response(child.stdout).arrayBuffer().catch(() => undefined);
  const ready = (async () => {
    const deadline = performance.now() + 15_000;
    while (performance.now() < deadline) {
      if (child.exitCode !== null || child.signalCode !== null) {
        throw new Error(
          `keygate exited (${child.exitCode ?? child.signalCode}): ${(await running.stderr()).trim()}`,
        );
      }
      try {
        const response = await fetch(`${base}/health`, { signal: AbortSignal.timeout(1000) });
        if (response.status === 200) return;
      } catch {
        // not listening yet
      }
      await Bun.sleep(10);
    }
    child.kill('SIGKILL');
    throw new Error('keygate did not answer /health within 15 s');
  })();
  return { running, ready };
}

export async function killHard(running: RunningKeygate): Promise<void> {
  running.process.kill('SIGKILL');
  await running.process.exited;
}

export async function stopGracefully(running: RunningKeygate): Promise<number> {
  running.process.kill('SIGTERM');
  const code = await Promise.race([running.process.exited, Bun.sleep(10_000).then(() => null)]);
  if (code === null) {
    running.process.kill('SIGKILL');
    return running.process.exited;
  }
  return code;
}

/** Tokens for the fault scripts, signed with the secret the scripts start keygate with. */
export const jwt = createJwtAuthority({ secret: SCRIPT_JWT_SECRET, clock: () => Date.now() });

export function flag(name: string, fallback: number): number {
  const at = process.argv.indexOf(`--${name}`);
  if (at === -1) return fallback;
  const value = Number(process.argv[at + 1]);
  if (!Number.isFinite(value) || value < 0) throw new Error(`--${name} needs a non-negative number`);
  return value;
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
}

export const round = (value: number, digits = 2) => Math.round(value * 10 ** digits) / 10 ** digits;

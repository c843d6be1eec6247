// One wrk run for the bench's tools: one thread and 64 connections on CPU 1 (the load's core; the
// server is on CPU 0), a script of bench/lua, and the BENCH_JSON line its report.lua prints.
// bench/driver.ts has its own (asynchronous, its connections and CPU configurable).
import { join } from 'node:path';

export type WrkRun = { line: string; requests: number; durationUs: number; non2xx: number };

/** `url` with `bench/lua/<script>` and its args for `seconds`; throws when wrk printed no figures. */
export function wrkOnce(url: string, script: string, args: string[], seconds: number): WrkRun {
  return figuresOf(url, Bun.spawnSync(commandOf(url, script, args, seconds)).stdout.toString());
}

/** The same run, started at once: for two loads driven side by side. */
export async function wrkAlongside(
  url: string,
  script: string,
  args: string[],
  seconds: number,
): Promise<WrkRun> {
  const child = Bun.spawn(commandOf(url, script, args, seconds), { stdout: 'pipe' });
  return figuresOf(url, await new Response(child.stdout).text());
}

function commandOf(url: string, script: string, args: string[], seconds: number): string[] {
  return [
    'taskset',
    '-c',
    '1',
    'wrk',
    '-t1',
    '-c64',
    `-d${seconds}s`,
    '-s',
    join(import.meta.dir, 'lua', script),
    url,
    '--',
    ...args,
  ];
}

function figuresOf(url: string, out: string): WrkRun {
  const line = out.split('\n').find((l) => l.startsWith('BENCH_JSON '));
  if (line === undefined) throw new Error(`wrk gave no figures for ${url}:\n${out}`);
  const run = JSON.parse(line.slice('BENCH_JSON '.length));
  return { line, requests: run.requests, durationUs: run.duration_us, non2xx: run.non2xx };
}

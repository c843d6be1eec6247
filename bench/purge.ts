// The purge measurement (--purge): what purging 1M expired keys on keygate's own timer adds to the
// latency of a create load, against the same load on the same database with the timer off.
import { Database } from 'bun:sqlite';
import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { type Fixtures, NO_PURGE_INTERVAL_SECONDS, PURGE_KEYS } from './cases';
import { type Bench, type Running, say, startKeygate, stop, wrk } from './driver';
import { type PurgeResult, type Slice, summarizeSlices } from './figures';
import { fixed } from './report';

const PURGE_INTERVAL_SECONDS = 4;
const PURGE_SLICE_SECONDS = 1;
const PURGE_MAX_SLICES = 75;
const PURGE_SLICES_AFTER = 4;

/**
 * Create load (via JWT) on a database holding 1M expired keys, with the purge on keygate's own timer
 * (as in production, sharing the event loop and the group commit with requests). wrk runs in
 * one-second slices so each slice's max latency can be placed before, during or after the purge.
 * Then the same load, as many slices, on another copy of the same database with the timer off: the
 * slices during the purge are compared with the baseline's at the same positions, as many of each,
 * since the worst of 72 slices against the worst of 2 would measure the count, not the purge.
 */
export async function measurePurge(bench: Bench, fixtures: Fixtures): Promise<PurgeResult> {
  const { scratch } = bench;
  say(
    `purge: ${PURGE_KEYS} expired keys, timer every ${PURGE_INTERVAL_SECONDS} s, create load in ${PURGE_SLICE_SECONDS} s slices`,
  );
  const dbPath = join(scratch, 'purge.db');
  copyFileSync(fixtures.templates.expired as string, dbPath);
  const log = join(scratch, 'purge.log');
  // The purge log line is at info; request lines are silenced here only if the run asked for it.
  const keygate = await startKeygate(
    bench,
    dbPath,
    { PURGE_INTERVAL_SECONDS: String(PURGE_INTERVAL_SECONDS) },
    log,
  );
  let purgeLine: PurgeLine | undefined;
  const purgeLog = purgeLineReader(log);
  let slicesAfter = 0;
  // The slices' times count from here (createLoadInSlices starts its clock at once).
  const originWall = Date.now();
  const slices = await createLoadInSlices(bench, keygate, fixtures, PURGE_MAX_SLICES, async () => {
    purgeLine ??= await purgeLog.next();
    if (purgeLine) slicesAfter++;
    return slicesAfter >= PURGE_SLICES_AFTER;
  });
  await stop(keygate.child);
  // How far the pass got, from the file itself (keygate only logs a pass once it is complete).
  const remaining = countExpired(dbPath);
  // The timer's first tick; keygate's log line gives the end (and the duration) once the pass is done.
  const timerFires = PURGE_INTERVAL_SECONDS * 1000;
  const purgeEnd = purgeLine ? Date.parse(purgeLine.time) - originWall : Number.POSITIVE_INFINITY;
  const purgeStart = purgeLine ? purgeEnd - purgeLine.ms : timerFires;
  const phased = slices.map((slice) => ({
    ...slice,
    phase:
      slice.endedMs <= purgeStart
        ? ('before' as const)
        : slice.startedMs >= purgeEnd
          ? ('after' as const)
          : ('during' as const),
  }));
  // The first slice of each run includes keygate's warm-up (JIT), so it is never compared.
  const positions = phased.flatMap((slice, i) => (i > 0 && slice.phase === 'during' ? [i] : []));

  say(`purge baseline: the same load, ${slices.length} slices, purge timer off`);
  const baselinePath = join(scratch, 'purge-baseline.db');
  copyFileSync(fixtures.templates.expired as string, baselinePath);
  const baselineKeygate = await startKeygate(
    bench,
    baselinePath,
    { PURGE_INTERVAL_SECONDS: String(NO_PURGE_INTERVAL_SECONDS) },
    join(scratch, 'purge-baseline.log'),
  );
  const baselineSlices = await createLoadInSlices(bench, baselineKeygate, fixtures, slices.length);
  await stop(baselineKeygate.child);
  const baselineRemoved = PURGE_KEYS - countExpired(baselinePath);

  const at = (list: Slice[]) => positions.flatMap((i) => (list[i] ? [list[i]] : []));
  const during = summarizeSlices(at(phased));
  const baseline = summarizeSlices(at(baselineSlices));
  const result: PurgeResult = {
    finished: purgeLine !== undefined,
    removed: purgeLine?.removed ?? PURGE_KEYS - remaining,
    purgeMs: purgeLine?.ms ?? slices.reduce((end, s) => Math.max(end, s.endedMs), 0) - timerFires,
    slices: phased,
    baselineSlices,
    baselineRemoved,
    compared:
      `worst of ${during.slices} 1-s slices during the purge vs worst of ${baseline.slices} 1-s slices ` +
      `of the same load without a purge timer (the same positions in a run of ${slices.length} slices)`,
    during,
    baseline,
  };
  say(
    `purge ${result.finished ? `removed ${result.removed} in` : 'had not finished after'} ${Math.round(result.purgeMs)} ms; ` +
      `${result.compared}: ${fixed(during.worstMax)} vs ${fixed(baseline.worstMax)} ms`,
  );
  return result;
}

/**
 * Create load on a running keygate in one-second wrk slices: `count` of them, or fewer if `enough`
 * (asked after each slice) says so.
 */
async function createLoadInSlices(
  bench: Bench,
  keygate: Running,
  fixtures: Fixtures,
  count: number,
  enough: () => Promise<boolean> = async () => false,
): Promise<Slice[]> {
  const origin = performance.now();
  const slices: Slice[] = [];
  while (slices.length < count) {
    const startedMs = performance.now() - origin;
    const figures = await wrk(
      keygate.url,
      'create.lua',
      ['/apikeys/jwt', fixtures.bearerFile],
      PURGE_SLICE_SECONDS,
      bench.options.connections,
    );
    slices.push({ ...figures, startedMs, endedMs: performance.now() - origin });
    if (await enough()) break;
  }
  return slices;
}

function countExpired(dbPath: string): number {
  const db = new Database(dbPath, { readonly: true });
  try {
    return (
      db.query('SELECT count(*) AS n FROM api_keys WHERE expires_at <= ?').get(Date.now()) as { n: number }
    ).n;
  } finally {
    db.close();
  }
}

type PurgeLine = { removed: number; ms: number; time: string };

/** Reads keygate's log as it grows (only the new part each time) until the first purge line. */
function purgeLineReader(log: string): { next(): Promise<PurgeLine | undefined> } {
  let offset = 0;
  let partial = '';
  return {
    async next() {
      const file = Bun.file(log);
      const size = file.size;
      if (size <= offset) return undefined;
      const lines = (partial + (await file.slice(offset, size).text())).split('\n');
      offset = size;
      partial = lines.pop() ?? '';
      for (const line of lines) {
        if (!line.includes('"msg":"purge"')) continue;
        const entry = JSON.parse(line);
        return { removed: entry.removed, ms: entry.ms, time: entry.time };
      }
      return undefined;
    },
  };
}

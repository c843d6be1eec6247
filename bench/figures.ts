// What a bench run records: one wrk run's figures, each case's runs beside their ceiling, the purge's
// one-second slices, start-up and memory; the driver fills them in, the report reads them.
import type { CaseName, Ceiling } from './cases';

/** One wrk run: latencies in ms. */
export type Figures = {
  requests: number;
  rps: number;
  p50: number;
  p99: number;
  max: number;
  non2xx: number;
  socketErrors: number;
};

/** One case on one database in one round, with the mean of the two ceiling runs around it. */
export type Run = Figures & {
  /** The fairness cases: the heavy load's rate (the figures are the light user's). */
  heavyRps?: number;
  round: number;
  case: CaseName;
  /** The A/B cases' runs on the baseline's build (--baseline); absent: this build. */
  build?: 'baseline';
  db: string;
  ceiling: Ceiling;
  ceilingRps: number;
  ceilingP99: number;
  expect: number;
};

export type Startup = { medianMs: number; minMs: number; maxMs: number };

/** keygate's RSS per database: at idle before each run, and the high-water mark after it. */
export type Memory = Record<string, { idleKb: number[]; peakKb: number[] }>;

export type Slice = Figures & { startedMs: number; endedMs: number };
export type SlicePhase = 'before' | 'during' | 'after';

/** Slices of one run, summed up: the worst and the median slice max and p99, the median rate. */
export type SliceSummary = {
  slices: number;
  worstMax: number;
  medianMax: number;
  worstP99: number;
  medianP99: number;
  rps: number;
};

export type PurgeResult = {
  finished: boolean;
  removed: number;
  purgeMs: number;
  /** The run with the purge timer; each slice placed before, during or after the purge. */
  slices: Array<Slice & { phase: SlicePhase }>;
  /** The same create load on another copy of the same database, no purge timer, as many slices. */
  baselineSlices: Slice[];
  /** Expired keys gone from the baseline's database by its end: 0 unless a purge ran after all. */
  baselineRemoved: number;
  /** What the target compares, in words. */
  compared: string;
  during: SliceSummary;
  /** The baseline's slices at the same positions as those during the purge: as many, as far in. */
  baseline: SliceSummary;
};

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2
    ? (sorted[middle] as number)
    : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}

export function summarizeSlices(slices: Slice[]): SliceSummary {
  return {
    slices: slices.length,
    worstMax: Math.max(...slices.map((s) => s.max)),
    medianMax: median(slices.map((s) => s.max)),
    worstP99: Math.max(...slices.map((s) => s.p99)),
    medianP99: median(slices.map((s) => s.p99)),
    rps: median(slices.map((s) => s.rps)),
  };
}

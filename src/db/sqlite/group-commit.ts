// Group commit: writes that arrive in the same turn of the event loop share one transaction and so
// one fsync. Each job runs in a savepoint of its own, so one failing job rolls back alone.
import type { Database, Statement } from 'bun:sqlite';
import { RequestGoneError } from '../../core/errors';

/** How long writes wait for another connection's write lock before they fail with SQLITE_BUSY (503). */
export const WRITE_LOCK_WAIT_MS = 2000;
const LOCK_RETRY_MS = 20;

/** What one shared transaction carried: told to the observer after it committed or failed. */
export type CommitBatch = { size: number; seconds: number; committed: boolean };

type Job = {
  run: () => unknown;
  /** The connection of the request that queued the job; aborted when Bun closed it unanswered. */
  signal: AbortSignal | undefined;
  committed?: (value: unknown) => void;
  resolve: (value: unknown) => void;
  reject: (reason: unknown) => void;
};

export class GroupCommitWriter {
  private queue: Job[] = [];
  private scheduled = false;
  private idleWaiters: Array<() => void> = [];
  /** When the current wait for another connection's write lock began. */
  private lockWaitStarted: number | undefined;
  /** While above 0, no transaction begins: writes queue (the WAL is being restarted). */
  private holds = 0;

  // Prepared once: Database.run() would compile each of these again for every job of every batch.
  private readonly sql: Record<
    'begin' | 'savepoint' | 'release' | 'rollbackTo' | 'commit' | 'rollback',
    Statement
  >;

  constructor(
    private readonly client: Database,
    /** Told about every batch after COMMIT (metrics); must not throw. */
    private readonly observer?: (batch: CommitBatch) => void,
    /** How long writes wait for another connection's write lock before they fail (503). */
    private readonly lockWaitMs = WRITE_LOCK_WAIT_MS,
  ) {
    this.sql = {
      begin: client.prepare('BEGIN IMMEDIATE'),
      savepoint: client.prepare('SAVEPOINT job'),
      release: client.prepare('RELEASE job'),
      rollbackTo: client.prepare('ROLLBACK TO job'),
      commit: client.prepare('COMMIT'),
      rollback: client.prepare('ROLLBACK'),
    };
  }

  /**
   * Runs `work` inside the next shared transaction; resolves only after that transaction commits.
   * `committed` runs synchronously right after the COMMIT, before any writer's promise resolves.
   */
  write<T>(work: () => T, committed?: (value: T) => void, signal?: AbortSignal): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({
        run: work,
        signal,
        committed: committed as ((value: unknown) => void) | undefined,
        resolve: resolve as (value: unknown) => void,
        reject,
      });
      this.scheduleFlush();
    });
  }

  /**
   * Begins no transaction until the returned function is called (writes queue meanwhile). Between
   * two turns of the event loop no transaction is open, so none is open while held.
   */
  hold(): () => void {
    this.holds++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.holds--;
      if (this.holds === 0 && this.queue.length > 0) this.scheduleFlush();
    };
  }

  /** Resolves once every queued write has been committed or rejected. */
  drained(): Promise<void> {
    if (!this.scheduled && this.queue.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private scheduleFlush(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    // setImmediate, not a microtask: requests parsed in this loop turn join the same commit.
    setImmediate(() => this.flush());
  }

  private flush(): void {
    this.scheduled = false;
    if (this.holds > 0) return; // the release schedules the next flush
    const started = this.observer ? performance.now() : 0;
    try {
      this.sql.begin.run();
    } catch (error) {
      this.lockRefused(error);
      return;
    }
    this.lockWaitStarted = undefined;
    const jobs = this.queue;
    this.queue = [];
    const { outcomes, committed } = this.commit(jobs);
    this.observer?.({ size: jobs.length, seconds: (performance.now() - started) / 1000, committed });
    this.settle(jobs, outcomes);
  }

  /**
   * Another connection holds the write lock. Waiting in SQLite's busy handler would block the event
   * loop (bun:sqlite is synchronous), so wait here with timers and let other requests run meanwhile.
   */
  private lockRefused(error: unknown): void {
    const now = performance.now();
    this.lockWaitStarted ??= now;
    if (isBusy(error) && now - this.lockWaitStarted < this.lockWaitMs) {
      this.scheduled = true;
      setTimeout(() => this.flush(), LOCK_RETRY_MS);
      return;
    }
    this.lockWaitStarted = undefined;
    const jobs = this.queue;
    this.queue = [];
    this.settle(
      jobs,
      jobs.map(() => ({ ok: false, error })),
    );
  }

  private settle(jobs: Job[], outcomes: Outcome[]): void {
    for (let i = 0; i < jobs.length; i++) {
      const outcome = outcomes[i] as Outcome;
      if (outcome.ok) jobs[i]?.committed?.(outcome.value);
    }
    for (let i = 0; i < jobs.length; i++) {
      const job = jobs[i] as Job;
      const outcome = outcomes[i] as Outcome;
      if (outcome.ok) job.resolve(outcome.value);
      else job.reject(outcome.error);
    }
    if (this.queue.length === 0 && !this.scheduled) {
      for (const wake of this.idleWaiters.splice(0)) wake();
    }
  }

  /** Runs the jobs in the transaction BEGIN IMMEDIATE opened, then commits it. */
  private commit(jobs: Job[]): { outcomes: Outcome[]; committed: boolean } {
    try {
      const outcomes = jobs.map((job) => this.runInSavepoint(job));
      this.sql.commit.run();
      return { outcomes, committed: true };
    } catch (error) {
      // Nothing of this batch is on disk: every job fails, including those that ran cleanly.
      if (this.client.inTransaction) this.sql.rollback.run();
      return { outcomes: jobs.map(() => ({ ok: false, error })), committed: false };
    }
  }

  private runInSavepoint(job: Job): Outcome {
    // Bun 1.4 closes a connection unanswered when a request is pipelined behind a pending response
    // (README "Pipelining"); committing its work would leave e.g. a key whose secret nobody saw.
    if (job.signal?.aborted) return { ok: false, error: new RequestGoneError() };
    this.sql.savepoint.run();
    try {
      const value = job.run();
      this.sql.release.run();
      return { ok: true, value };
    } catch (error) {
      // SQLite ended the transaction itself (on SQLITE_FULL, say): the batch fails with this error.
      if (!this.client.inTransaction) throw error;
      this.sql.rollbackTo.run();
      this.sql.release.run();
      return { ok: false, error };
    }
  }
}

type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown };

function isBusy(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && code.startsWith('SQLITE_BUSY');
}

// Group commit: writes that arrive in the same turn of the event loop share one transaction and so
// one fsync. Each job runs in a savepoint of its own, so one failing job rolls back alone.
import type { Database } from 'bun:sqlite';

type Job = {
  run: () => unknown;
  resolve: (value: unknown) => void;
  reject: (reason: unknown) => void;
};

export class GroupCommitWriter {
  private queue: Job[] = [];
  private scheduled = false;
  private idleWaiters: Array<() => void> = [];

  constructor(private readonly client: Database) {}

  /** Runs `work` inside the next shared transaction; resolves only after that transaction commits. */
  write<T>(work: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ run: work, resolve: resolve as (value: unknown) => void, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        // setImmediate, not a microtask: requests parsed in this loop turn join the same commit.
        setImmediate(() => this.flush());
      }
    });
  }

  /** Resolves once every queued write has been committed or rejected. */
  drained(): Promise<void> {
    if (!this.scheduled && this.queue.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private flush(): void {
    const jobs = this.queue;
    this.queue = [];
    this.scheduled = false;
    const outcomes = this.commit(jobs);
    for (let i = 0; i < jobs.length; i++) {
      const job = jobs[i] as Job;
      const outcome = outcomes[i] as Outcome;
      if (outcome.ok) job.resolve(outcome.value);
      else job.reject(outcome.error);
    }
    if (this.queue.length === 0) {
      for (const wake of this.idleWaiters.splice(0)) wake();
    }
  }

  private commit(jobs: Job[]): Outcome[] {
    try {
      this.client.run('BEGIN IMMEDIATE');
    } catch (error) {
      return jobs.map(() => ({ ok: false, error }));
    }
    const outcomes: Outcome[] = jobs.map((job) => {
      this.client.run('SAVEPOINT job');
      try {
        const value = job.run();
        this.client.run('RELEASE job');
        return { ok: true, value };
      } catch (error) {
        this.client.run('ROLLBACK TO job');
        this.client.run('RELEASE job');
        return { ok: false, error };
      }
    });
    try {
      this.client.run('COMMIT');
      return outcomes;
    } catch (error) {
      // Nothing of this batch is on disk: every job fails, including those that ran cleanly.
      if (this.client.inTransaction) this.client.run('ROLLBACK');
      return jobs.map(() => ({ ok: false, error }));
    }
  }
}

type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown };

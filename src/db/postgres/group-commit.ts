// Group commit on PostgreSQL: writes that arrive together share one transaction and so one COMMIT
// (one WAL flush), on one reserved connection whose statements are pipelined (sent without waiting
// for the answer before). Each job runs in a savepoint of its own, so one failing job rolls back
// alone; jobs of one group (creates) standing together run as one statement in one savepoint, and
// each alone only should that statement fail. A few batches run at once, each on its own connection.
//
// Locks: a job names the users whose key counter it takes (creates, capped rotations). The batch
// locks those counter rows first, in user order, so batches of creates on any number of replicas
// cannot deadlock each other; two jobs of one user in one batch then run one after the other in the
// same transaction and see each other's rows. A counter row another transaction holds is skipped
// (SKIP LOCKED) and its jobs wait in a batch of their own, so a user whose row is held elsewhere
// delays nobody else's writes. Deletes and updates lock key rows as they go; should that ever close a
// cycle with another transaction, PostgreSQL aborts one with a deadlock error and its batch runs again.
import type { ReservedSQL, SQL } from 'bun';
import { RequestGoneError } from '../../core/errors';
import { unavailableCode } from './unavailable';

/** What one shared transaction carried: told to the observer after it committed or failed. */
export type CommitBatch = { size: number; seconds: number; committed: boolean };

/** One statement with its parameters ($1, $2, …). */
export type Statement = { sql: string; params: unknown[] };

/**
 * Jobs of one kind (creates, say) that a batch runs as one statement when they stand next to each
 * other in its queue: one round trip and one execution on the server for all of them.
 */
export type JobGroup<Input, T> = {
  /** The one statement doing every input's work, in their order. */
  statement: (inputs: readonly Input[]) => Statement;
  /** Each input's value, in the inputs' order, from the statement's rows. */
  values: (rows: unknown[], inputs: readonly Input[]) => T[];
};

export type PostgresWrite<Session, T, Input = never> = {
  /** The users whose key counter row the job locks (it is created at 0 when missing). */
  users?: readonly number[];
  /** The connection of the request that asked for it: once aborted, the job commits nothing. */
  signal?: AbortSignal;
} & (
  | {
      /** The job's statements, through the batch's session; it runs inside its own savepoint. */
      run: (session: Session) => Promise<T>;
    }
  | {
      /** The job as one input of a group's statement. */
      group: JobGroup<Input, T>;
      input: Input;
    }
);

export type PostgresGroupCommitOptions<Session> = {
  /** The session jobs write through, built once per batch on its reserved connection. */
  open: (connection: ReservedSQL) => Session;
  /** How many batches may run at once (each holds one pooled connection), besides the waiting one. */
  lanes: number;
  /** Told about every batch after its COMMIT or failure (metrics); must not throw. */
  observer?: (batch: CommitBatch) => void;
};

/**
 * At most this many jobs per batch. Each job's savepoint that writes is a subtransaction, and a
 * backend remembers only 64 of them in shared memory; past that every snapshot taken on the server
 * has to look subtransactions up on disk.
 */
export const MAX_JOBS_PER_BATCH = 48;
/** A batch that deadlocked or failed to serialise runs again, this many times in all at most. */
const MAX_ATTEMPTS = 3;

type Job = {
  users: readonly number[];
  run?: (session: unknown) => Promise<unknown>;
  group?: JobGroup<unknown, unknown>;
  input?: unknown;
  signal: AbortSignal | undefined;
  resolve: (value: unknown) => void;
  reject: (reason: unknown) => void;
};

type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown };

/** Each job's outcome, or `undefined` for a job whose counter row was held elsewhere. */
type Outcomes = Array<Outcome | undefined>;

export class PostgresGroupCommit<Session> {
  private queue: Job[] = [];
  /** Jobs whose counter row another transaction held: they run in a batch that waits for it. */
  private waiting: Job[] = [];
  private scheduled = false;
  private running = 0;
  private waitingRuns = false;
  private idleWaiters: Array<() => void> = [];

  constructor(
    private readonly client: SQL,
    private readonly options: PostgresGroupCommitOptions<Session>,
  ) {}

  /** Runs the job in the next shared transaction; settles only after that transaction committed or failed. */
  write<T, Input = never>(write: PostgresWrite<Session, T, Input>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({
        users: write.users ?? [],
        ...('run' in write
          ? { run: write.run as (session: unknown) => Promise<unknown> }
          : { group: write.group as JobGroup<unknown, unknown>, input: write.input }),
        signal: write.signal,
        resolve: resolve as (value: unknown) => void,
        reject,
      });
      this.schedule();
    });
  }

  /** Resolves once every queued write has been committed or rejected. */
  drained(): Promise<void> {
    if (this.idle()) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private idle(): boolean {
    return (
      !this.scheduled &&
      this.running === 0 &&
      !this.waitingRuns &&
      this.queue.length === 0 &&
      this.waiting.length === 0
    );
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    // setImmediate, not a microtask: requests parsed in this turn of the event loop join the batch.
    setImmediate(() => {
      this.scheduled = false;
      this.start();
    });
  }

  private start(): void {
    while (this.running < this.options.lanes && this.queue.length > 0) {
      const jobs = this.queue.splice(0, MAX_JOBS_PER_BATCH);
      this.running++;
      void this.runBatch(jobs, false).finally(() => {
        this.running--;
        this.afterBatch();
      });
    }
    if (!this.waitingRuns && this.waiting.length > 0) {
      const jobs = this.waiting.splice(0, MAX_JOBS_PER_BATCH);
      this.waitingRuns = true;
      void this.runBatch(jobs, true).finally(() => {
        this.waitingRuns = false;
        this.afterBatch();
      });
    }
  }

  private afterBatch(): void {
    if (this.queue.length > 0 || this.waiting.length > 0) this.schedule();
    else if (this.idle()) for (const wake of this.idleWaiters.splice(0)) wake();
  }

  /** Runs the jobs in one transaction (again after a deadlock), then settles each. */
  private async runBatch(jobs: Job[], wait: boolean): Promise<void> {
    const started = performance.now();
    let outcomes: Outcomes;
    let committed = false;
    for (let attempt = 1; ; attempt++) {
      try {
        outcomes = await this.attempt(jobs, wait);
        committed = true;
        break;
      } catch (failure) {
        const { error, committing } = failure as AttemptFailure;
        if (attempt < MAX_ATTEMPTS && (isRetryable(error) || (!committing && isStale(error)))) continue;
        // Nothing of this batch is committed: every job fails, those that ran cleanly too.
        outcomes = jobs.map(() => ({ ok: false, error }));
        break;
      }
    }
    const size = outcomes.filter((outcome) => outcome !== undefined).length;
    if (size > 0) {
      this.options.observer?.({ size, seconds: (performance.now() - started) / 1000, committed });
    }
    for (let i = 0; i < jobs.length; i++) {
      const job = jobs[i] as Job;
      const outcome = outcomes[i];
      if (outcome === undefined) this.waiting.push(job);
      else if (outcome.ok) job.resolve(outcome.value);
      else job.reject(outcome.error);
    }
  }

  /**
   * One transaction on one reserved connection: BEGIN, the counter rows locked in user order, each
   * job in its savepoint, COMMIT. Throws when the transaction as a whole failed.
   */
  private async attempt(jobs: Job[], wait: boolean): Promise<Outcomes> {
    const connection = await this.client.reserve().catch((error: unknown) => {
      throw new AttemptFailure(error, false);
    });
    // Statements sent without being awaited still answer in order; the first failure among them is
    // kept here, and fails the batch (it means the connection or the transaction is gone).
    let sentFailed: { error: unknown } | undefined;
    const send = (query: Promise<unknown>) => {
      query.catch((error: unknown) => {
        sentFailed ??= { error };
      });
    };
    let open = false;
    let committing = false;
    try {
      // Durability must not depend on the server's default: a 2xx means the commit is on disk. Per
      // transaction, not in the startup message: PgBouncer refuses unknown startup parameters.
      send(connection.unsafe('BEGIN; SET LOCAL synchronous_commit TO on'));
      open = true;
      const held = await this.lockCounters(connection, jobs, wait, send);
      const session = this.options.open(connection);
      const outcomes: Outcomes = [];
      const runnable = (job: Job, index: number) => {
        if (!job.users.every((user) => held.has(user))) outcomes[index] = undefined;
        // Bun closes a connection unanswered when a request is pipelined behind a pending response;
        // committing its work would leave e.g. a key whose secret nobody saw.
        else if (job.signal?.aborted) outcomes[index] = { ok: false, error: new RequestGoneError() };
        else return true;
        return false;
      };
      // Savepoints are named after the job's place in the batch and never released: COMMIT ends them.
      let next = 0;
      while (next < jobs.length) {
        const job = jobs[next] as Job;
        if (!runnable(job, next)) {
          next++;
        } else if (job.group) {
          next = await this.runGroup(connection, jobs, next, runnable, outcomes);
        } else {
          send(connection.unsafe(`SAVEPOINT s${next}`));
          try {
            const value = await (job.run as (session: Session) => Promise<unknown>)(session);
            if (sentFailed) throw sentFailed.error;
            if (job.signal?.aborted) throw new RequestGoneError();
            outcomes[next] = { ok: true, value };
          } catch (error) {
            if (sentFailed || unavailableCode(error) !== undefined) throw error;
            await connection.unsafe(`ROLLBACK TO SAVEPOINT s${next}`);
            outcomes[next] = { ok: false, error };
          }
          next++;
        }
      }
      committing = true;
      await connection.unsafe('COMMIT');
      open = false;
      if (sentFailed) throw sentFailed.error;
      return outcomes;
    } catch (error) {
      // A statement sent earlier failed first: later ones only say the transaction is aborted.
      throw new AttemptFailure(sentFailed ? sentFailed.error : error, committing);
    } finally {
      // After a failure mid-transaction, end it before the connection goes back to the pool (Bun
      // would close a connection released inside a transaction; it may be closed already).
      if (open) await connection.unsafe('ROLLBACK').catch(() => undefined);
      await connection.release();
    }
  }

  /**
   * Runs the jobs of one group from `first` on (up to the next job of another kind) as one statement
   * in one savepoint; answers the place of the next job to run. Should that statement fail, or a
   * request among them go away while it ran, the savepoint is undone and each job runs alone in a
   * savepoint of its own, so only the failing one fails.
   */
  private async runGroup(
    connection: ReservedSQL,
    jobs: Job[],
    first: number,
    runnable: (job: Job, index: number) => boolean,
    outcomes: Outcomes,
  ): Promise<number> {
    const group = (jobs[first] as Job).group as JobGroup<unknown, unknown>;
    const members: number[] = [];
    let end = first;
    for (; end < jobs.length && (jobs[end] as Job).group === group; end++) {
      if (end === first || runnable(jobs[end] as Job, end)) members.push(end);
    }
    const run = async (indexes: number[]) => {
      const inputs = indexes.map((index) => (jobs[index] as Job).input);
      const { sql, params } = group.statement(inputs);
      return group.values((await connection.unsafe(sql, params)) as unknown[], inputs);
    };
    // Started now (a query is sent once something waits on it), so it goes before the statement.
    const savepoint = connection.unsafe(`SAVEPOINT s${first}`);
    savepoint.catch(() => undefined);
    try {
      const values = await run(members);
      await savepoint;
      if (members.every((index) => !(jobs[index] as Job).signal?.aborted)) {
        members.forEach((index, k) => {
          outcomes[index] = { ok: true, value: values[k] };
        });
        return end;
      }
    } catch (error) {
      // A refused savepoint, or a connection gone: the batch fails.
      await savepoint;
      if (unavailableCode(error) !== undefined) throw error;
    }
    await connection.unsafe(`ROLLBACK TO SAVEPOINT s${first}`);
    for (const index of members) {
      const job = jobs[index] as Job;
      if (!runnable(job, index)) continue;
      await connection.unsafe(`SAVEPOINT s${index}`);
      try {
        const [value] = await run([index]);
        if (job.signal?.aborted) throw new RequestGoneError();
        outcomes[index] = { ok: true, value };
      } catch (error) {
        if (unavailableCode(error) !== undefined) throw error;
        await connection.unsafe(`ROLLBACK TO SAVEPOINT s${index}`);
        outcomes[index] = { ok: false, error };
      }
    }
    return end;
  }

  /**
   * Locks the counter rows of the batch's users in user order, creating missing ones at 0; answers
   * the users it holds. Unless `wait`, a row another transaction holds is skipped.
   */
  private async lockCounters(
    connection: ReservedSQL,
    jobs: Job[],
    wait: boolean,
    send: (query: Promise<unknown>) => void,
  ): Promise<Set<number>> {
    const users = [...new Set(jobs.flatMap((job) => job.users))].sort((a, b) => a - b);
    if (users.length === 0) return new Set();
    const list = `{${users.join(',')}}`;
    send(
      connection.unsafe(
        `INSERT INTO user_key_counts (user_id, keys) SELECT u, 0 FROM unnest($1::bigint[]) AS u ORDER BY u
        ON CONFLICT (user_id) DO NOTHING`,
        [list],
      ),
    );
    const rows = (await connection.unsafe(
      `SELECT user_id::text AS id FROM user_key_counts WHERE user_id = ANY($1::bigint[])
        ORDER BY user_id FOR UPDATE${wait ? '' : ' SKIP LOCKED'}`,
      [list],
    )) as Array<{ id: string }>;
    return new Set(rows.map((row) => Number(row.id)));
  }
}

/** Why one run of a batch failed, and whether its COMMIT had been sent (its outcome then unknown). */
class AttemptFailure {
  constructor(
    readonly error: unknown,
    readonly committing: boolean,
  ) {}
}

/**
 * The pool handed out a connection the server had dropped (it restarted, say): nothing was committed,
 * so the batch may run again on another connection.
 */
function isStale(error: unknown): boolean {
  return unavailableCode(error) === 'ERR_POSTGRES_CONNECTION_CLOSED';
}

/** A deadlock or serialisation failure: the whole transaction was rolled back, and may run again. */
function isRetryable(error: unknown): boolean {
  const code = unavailableCode(error);
  return code === '40P01' || code === '40001';
}

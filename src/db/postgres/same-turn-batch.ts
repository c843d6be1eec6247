// Calls that arrive in the same turn of the event loop, sent to PostgreSQL as ONE call: the rate-limit
// decisions (rate-limits.ts) and the credit takes (credits-batch.ts) of verifications. While a batch
// is in flight the next one gathers, so under load a batch holds every verification that waited
// meanwhile, and one round trip (and for credits one commit) serves them all; alone, a call waits
// one turn of the loop.

/** Sends a batch and answers one result per item, in order; a rejection rejects every item of it. */
export type SendBatch<Item, Result> = (items: Item[]) => Promise<Result[]>;

export type SameTurnBatchOptions = {
  /** The most items in one call. */
  maxBatch?: number;
  /** Batches sent and not yet answered; the next waits (and grows) meanwhile. */
  maxInFlight?: number;
};

type Waiting<Item, Result> = {
  item: Item;
  resolve: (result: Result) => void;
  reject: (error: unknown) => void;
};

export function sameTurnBatches<Item, Result>(
  send: SendBatch<Item, Result>,
  { maxBatch = 256, maxInFlight = 1 }: SameTurnBatchOptions = {},
): (item: Item) => Promise<Result> {
  let queue: Waiting<Item, Result>[] = [];
  let scheduled = false;
  let inFlight = 0;

  const schedule = () => {
    if (scheduled) return;
    scheduled = true;
    // setImmediate, not a microtask: requests parsed in this turn of the loop join the same batch.
    setImmediate(flush);
  };

  const flush = () => {
    scheduled = false;
    while (queue.length > 0 && inFlight < maxInFlight) {
      const batch = queue.length <= maxBatch ? queue : queue.slice(0, maxBatch);
      queue = batch === queue ? [] : queue.slice(maxBatch);
      inFlight++;
      sendOne(batch).finally(() => {
        inFlight--;
        if (queue.length > 0) schedule();
      });
    }
  };

  const sendOne = async (batch: Waiting<Item, Result>[]) => {
    try {
      const results = await send(batch.map((waiting) => waiting.item));
      if (results.length !== batch.length) {
        throw new Error(`a batch of ${batch.length} was answered with ${results.length} results`);
      }
      for (let i = 0; i < batch.length; i++) batch[i]?.resolve(results[i] as Result);
    } catch (error) {
      for (const waiting of batch) waiting.reject(error);
    }
  };

  return (item) =>
    new Promise<Result>((resolve, reject) => {
      queue.push({ item, resolve, reject });
      schedule();
    });
}

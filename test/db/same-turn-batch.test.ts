// Same-turn batching: the calls of one turn of the event loop are sent as one batch, answered in order;
// while a batch is in flight the next one gathers every call made meanwhile; a failed batch fails each
// of its calls and no other.
import { describe, expect, it } from 'bun:test';
import { sameTurnBatches } from '../../src/db/postgres/same-turn-batch';

/** A send that records each batch and answers when told. */
function controlledSend() {
  const batches: number[][] = [];
  const pending: Array<{ resolve: (results: string[]) => void; reject: (error: unknown) => void }> = [];
  const send = (items: number[]) => {
    batches.push(items);
    return new Promise<string[]>((resolve, reject) => pending.push({ resolve, reject }));
  };
  return { batches, pending, send };
}

const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

describe('same-turn batches', () => {
  it('sends the calls of one turn as one batch and answers each with its own result', async () => {
    const { batches, pending, send } = controlledSend();
    const call = sameTurnBatches(send);
    const answers = [call(1), call(2), call(3)];
    await nextTurn();
    expect(batches).toEqual([[1, 2, 3]]);
    pending[0]?.resolve(['one', 'two', 'three']);
    expect(await Promise.all(answers)).toEqual(['one', 'two', 'three']);
  });

  it('gathers the calls made while a batch is in flight into the next one, sent once it is answered', async () => {
    const { batches, pending, send } = controlledSend();
    const call = sameTurnBatches(send);
    const first = call(1);
    await nextTurn();
    const later = [call(2), call(3)];
    await nextTurn();
    await nextTurn();
    expect(batches).toEqual([[1]]);
    pending[0]?.resolve(['one']);
    expect(await first).toBe('one');
    await nextTurn();
    await nextTurn();
    expect(batches).toEqual([[1], [2, 3]]);
    pending[1]?.resolve(['two', 'three']);
    expect(await Promise.all(later)).toEqual(['two', 'three']);
  });

  it('splits a turn larger than the largest batch', async () => {
    const { batches, pending, send } = controlledSend();
    const call = sameTurnBatches(send, { maxBatch: 2, maxInFlight: 2 });
    const answers = [1, 2, 3, 4, 5].map(call);
    await nextTurn();
    expect(batches).toEqual([
      [1, 2],
      [3, 4],
    ]);
    pending[0]?.resolve(['1', '2']);
    pending[1]?.resolve(['3', '4']);
    await Promise.all(answers.slice(0, 4));
    await nextTurn();
    await nextTurn();
    expect(batches[2]).toEqual([5]);
    pending[2]?.resolve(['5']);
    expect(await Promise.all(answers)).toEqual(['1', '2', '3', '4', '5']);
  });

  it("fails every call of a failed batch, and only that batch's", async () => {
    const { pending, send } = controlledSend();
    const call = sameTurnBatches(send);
    const failing = [call(1), call(2)];
    await nextTurn();
    const unavailable = new Error('database unavailable');
    const errors = Promise.all(failing.map((answer) => answer.catch((error: unknown) => error)));
    pending[0]?.reject(unavailable);
    expect(await errors).toEqual([unavailable, unavailable]);
    const next = call(3);
    await nextTurn();
    pending[1]?.resolve(['three']);
    expect(await next).toBe('three');
  });

  it('fails the batch when the answer does not have one result per call', async () => {
    const { pending, send } = controlledSend();
    const call = sameTurnBatches(send);
    const answers = [call(1), call(2)];
    await nextTurn();
    const errors = Promise.all(answers.map((answer) => answer.catch((error: Error) => error.message)));
    pending[0]?.resolve(['only one']);
    expect(await errors).toEqual([
      'a batch of 2 was answered with 1 results',
      'a batch of 2 was answered with 1 results',
    ]);
  });
});

// A property of the list: paging through it while keys are created between pages never repeats or
// skips a key that existed when paging began, and keeps newest-first order. fast-check, fixed seed.
import { expect, it } from 'bun:test';
import fc from 'fast-check';
import { testKeygate } from '../support/keygate';

type Item = { key: string; createdAt: string };

it('pages never repeat or skip an item while keys are created between pages', async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.record({
        // Clock steps of 0 make ties on createdAt, which the id must break.
        initialSteps: fc.array(fc.integer({ min: 0, max: 2 }), { minLength: 0, maxLength: 25 }),
        limit: fc.integer({ min: 1, max: 7 }),
        createdBetweenPages: fc.array(fc.array(fc.integer({ min: 0, max: 1 }), { maxLength: 3 }), {
          maxLength: 10,
        }),
      }),
      async ({ initialSteps, limit, createdBetweenPages }) => {
        const k = await testKeygate();
        try {
          const headers = await k.bearer(42);
          const initial = new Set<string>();
          for (const step of initialSteps) {
            k.time.now += step;
            initial.add((await k.createKey(42)).key);
          }
          const seen: Item[] = [];
          let cursor: string | null = null;
          let page = 0;
          do {
            const query: string = cursor === null ? `?limit=${limit}` : `?limit=${limit}&cursor=${cursor}`;
            const response = await k.req('GET', `/apikeys/jwt${query}`, { headers });
            expect(response.status).toBe(200);
            seen.push(...response.json.apikeys);
            cursor = response.json.nextCursor;
            for (const step of createdBetweenPages[page] ?? []) {
              k.time.now += step;
              await k.createKey(42);
            }
            page++;
            // A list that repeats itself would page for ever: fail instead.
            if (page > 100) throw new Error('more than 100 pages');
          } while (cursor !== null);
          const keys = seen.map((item) => item.key);
          expect(new Set(keys).size).toBe(keys.length);
          for (const key of initial) expect(keys).toContain(key);
          for (let i = 1; i < seen.length; i++) {
            const [a, b] = [seen[i - 1] as Item, seen[i] as Item];
            const descending = a.createdAt > b.createdAt || (a.createdAt === b.createdAt && a.key > b.key);
            expect(descending).toBe(true);
          }
        } finally {
          await k.close();
        }
      },
    ),
    { seed: 20261122, numRuns: 40 },
  );
  // On PostgreSQL each run is a fresh database and up to ~55 durable commits.
}, 120_000);

// The permissions query under random input, at length: parses N random queries (the generators of
// test/permissions/random-queries.ts) and counts those parsed, those refused with a
// PermissionQueryError, any other throw (must be 0) and any disagreement with the reference. Then the
// time to parse distinct 1,000-character queries of three shapes (µs: median, p99 and max, the max
// including pauses for garbage collection), and what one check of a parsed query costs. Exit 1 on
// any other throw or disagreement.
//   bun scripts/experiments/permission-query-fuzz.ts [--runs 100000] [--seed 20261128]
import { parseArgs } from 'node:util';
import fc from 'fast-check';
import { heldPermissions } from '../../src/permissions/held';
import { PermissionQueryError, parsePermissionQuery } from '../../src/permissions/query';
import { heldList, randomQuery, referenceQuery } from '../../test/permissions/random-queries';

const { values } = parseArgs({
  options: { runs: { type: 'string', default: '100000' }, seed: { type: 'string', default: '20261128' } },
});
const runs = Number(values.runs);
const seed = Number(values.seed);

const counts = { parsed: 0, refused: 0, otherThrows: 0, disagreements: 0 };
const examples: string[] = [];
const BATCH = 10_000;
for (let done = 0; done < runs; done += BATCH) {
  const size = Math.min(BATCH, runs - done);
  const samples = fc.sample(fc.tuple(randomQuery, heldList), { numRuns: size, seed: seed + done });
  for (const [text, held] of samples) {
    const reference = referenceQuery(text);
    try {
      const query = parsePermissionQuery(text);
      counts.parsed++;
      if (
        reference === undefined ||
        query.satisfiedBy(heldPermissions(held)) !== reference.satisfiedBy(held)
      ) {
        counts.disagreements++;
        examples.push(`disagrees with the reference: ${JSON.stringify(text)} held ${JSON.stringify(held)}`);
      }
    } catch (error) {
      if (!(error instanceof PermissionQueryError)) {
        counts.otherThrows++;
        examples.push(`${String(error)}: ${JSON.stringify(text)}`);
      } else {
        counts.refused++;
        if (reference !== undefined) {
          counts.disagreements++;
          examples.push(`refused, the reference takes it: ${JSON.stringify(text)}`);
        }
      }
    }
  }
}
console.log(`random queries: ${runs} (seed ${seed})`);
console.log(`  parsed ${counts.parsed}, refused ${counts.refused}`);
console.log(`  other throws ${counts.otherThrows}, disagreements with the reference ${counts.disagreements}`);
for (const example of examples.slice(0, 5)) console.log(`  ${example}`);

/** 1,000-character queries of one shape, each text distinct so that none is answered from the cache. */
const SHAPES: Record<string, (i: number) => string> = {
  '100 names, AND/OR and parentheses': (i) => {
    const names = Array.from({ length: 100 }, (_, n) => `p${(i * 7 + n) % 997}`);
    const text = names
      .map((name, n) => (n % 10 === 0 ? `(${name}` : n % 10 === 9 ? `${name})` : name))
      .join(i % 2 === 0 ? ' AND ' : ' or ');
    return text.slice(0, 1000).padEnd(1000, ' ');
  },
  '499 nested parentheses': (i) => {
    const inner = `n${i}`;
    const depth = Math.floor((1000 - inner.length) / 2);
    return `${'('.repeat(depth)}${inner}${')'.repeat(depth)}`.padEnd(1000, ' ');
  },
  '7 names of 128 characters': (i) =>
    Array.from({ length: 7 }, (_, n) => `${i}.${n}.`.padEnd(128, 'x'))
      .join(' AND ')
      .padEnd(1000, ' '),
};

const microseconds = (ms: number) => (ms * 1000).toFixed(1);
const PARSES = 5000;
const WARMUP = 500;
let serial = 0;
for (const [shape, build] of Object.entries(SHAPES)) {
  for (let i = 0; i < WARMUP; i++) parsePermissionQuery(build(serial++));
  // The random queries' garbage is collected now, so that its collection is not timed as a parse.
  Bun.gc(true);
  const times: number[] = [];
  for (let i = 0; i < PARSES; i++) {
    const text = build(serial++);
    if (text.length !== 1000) throw new Error(`${shape}: ${text.length} characters, not 1000`);
    const started = performance.now();
    parsePermissionQuery(text);
    times.push(performance.now() - started);
  }
  times.sort((a, b) => a - b);
  const median = times[Math.floor(times.length / 2)] ?? 0;
  const p99 = times[Math.floor(times.length * 0.99)] ?? 0;
  const max = times[times.length - 1] ?? 0;
  console.log(
    `parse a 1,000-character query (${shape}): median ${microseconds(median)} µs, ` +
      `p99 ${microseconds(p99)} µs, max ${microseconds(max)} µs over ${PARSES}`,
  );
}

/** What a verify pays per check once the query is parsed: the 100-name query against a wildcard holder. */
const query = parsePermissionQuery(SHAPES['100 names, AND/OR and parentheses']?.(1) ?? '');
const held = heldPermissions(['documents.*', 'p5', 'p13', 'billing:read', 'p.x.*']);
const CHECKS = 1_000_000;
let satisfied = 0;
const started = performance.now();
for (let i = 0; i < CHECKS; i++) if (query.satisfiedBy(held)) satisfied++;
const perCheck = ((performance.now() - started) * 1e6) / CHECKS;
console.log(
  `check a parsed 100-name query: ${perCheck.toFixed(0)} ns per satisfiedBy (${satisfied} satisfied)`,
);

if (counts.otherThrows > 0 || counts.disagreements > 0) process.exit(1);

// docs/operator.md's walk-through, run as written against keygate from source on a free port and a
// temporary directory: every command prints one line, and each matches the `# →` line the page shows
// under it (`…` stands for ids, secrets and times).
import { afterAll, expect, it } from 'bun:test';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const root = join(import.meta.dir, '..', '..');
const scratch = mkdtempSync(join(tmpdir(), 'keygate-walkthrough-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

async function walkThrough(): Promise<string> {
  const page = await Bun.file(join(root, 'docs', 'operator.md')).text();
  const section = page.slice(page.indexOf('## Walk-through'), page.indexOf('## Routes'));
  const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1];
  if (block === undefined) throw new Error('docs/operator.md has no sh block in its walk-through');
  return block;
}

/** The page's `# → …` lines, as patterns: `…` is any text, "the same" the line before. */
function expectedLines(block: string): Array<string | RegExp> {
  const shown = [...block.matchAll(/^# → (.*)$/gm)].map((match) => match[1] as string);
  return shown.map((line, i) => {
    const text = line === 'the same' ? (shown[i - 1] as string) : line;
    const escaped = text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replaceAll('…', '.*');
    return new RegExp(`^${escaped}$`);
  });
}

it('prints, command by command, what docs/operator.md shows', async () => {
  const block = await walkThrough();
  const probe = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } });
  const port = probe.port;
  probe.stop(true);
  // `keygate` on PATH is the CLI from source (exec'd, so the page's `kill %1` stops the server); the
  // page's `sleep 1` becomes a bounded wait for /health, so a slow start on a busy machine passes.
  const bin = join(scratch, 'bin');
  const work = join(scratch, 'work');
  mkdirSync(bin);
  mkdirSync(work);
  writeFileSync(
    join(bin, 'keygate'),
    `#!/bin/sh\nexec "${process.execPath}" run "${join(root, 'src', 'cli.ts')}" "$@"\n`,
  );
  chmodSync(join(bin, 'keygate'), 0o755);
  const script = [
    "trap 'kill $(jobs -p) 2>/dev/null' EXIT",
    block.replace(
      /^sleep 1$/m,
      'for _ in $(seq 100); do curl -s -o /dev/null "$KEYGATE/health" && break; sleep 0.1; done',
    ),
  ].join('\n');
  const run = Bun.spawnSync(['bash', '-c', script], {
    cwd: work,
    env: { PATH: `${bin}:${process.env.PATH ?? ''}`, HOME: scratch, KEYGATE: `http://127.0.0.1:${port}` },
    stdout: 'pipe',
    stderr: 'pipe',
    timeout: 60_000, // a server left running would hold the pipes open until then
  });
  expect(run.stderr.toString()).toBe('');
  expect(run.exitCode).toBe(0);
  const printed = run.stdout.toString().trimEnd().split('\n');
  const expected = expectedLines(block);
  expect(printed).toHaveLength(expected.length);
  for (const [i, line] of printed.entries()) expect(line).toMatch(expected[i] as RegExp);
  // The walk-through cleans up after itself.
  expect(readdirSync(work)).toEqual([]);
}, 90_000);

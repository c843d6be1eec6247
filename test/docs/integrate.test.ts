// docs/integrate.md shows the guarded apps the client tests build (examples/integrate/) as they are,
// each under 15 lines, and every one of them.
import { expect, it } from 'bun:test';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';

const root = join(import.meta.dir, '..', '..');
const doc = await Bun.file(join(root, 'docs/integrate.md')).text();
const shown = [...doc.matchAll(/<!-- example: (\S+) -->\n```\w+\n([\s\S]*?)\n```/g)].map(
  ([, path, text]) => ({
    path: path as string,
    text: text as string,
  }),
);
const examples = readdirSync(join(root, 'examples/integrate')).filter((name) => /\.(ts|py)$/.test(name));

it('shows every example file, verbatim', async () => {
  expect(shown.map(({ path }) => path).sort()).toEqual(
    examples.map((name) => `examples/integrate/${name}`).sort(),
  );
  for (const { path, text } of shown) {
    expect({ path, text }).toEqual({ path, text: (await Bun.file(join(root, path)).text()).trimEnd() });
  }
});

it('keeps each guarded app under 15 lines', () => {
  for (const { path, text } of shown.filter(({ path }) => !path.includes('mint-token'))) {
    expect({ path, lines: text.split('\n').length < 15 }).toEqual({ path, lines: true });
  }
});

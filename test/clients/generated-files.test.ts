// @keygate/client's generated files (openapi.d.ts, routes.ts) are what `bun run client:types` makes
// from the served document today: a route or schema changed without regenerating fails here.
import { expect, it } from 'bun:test';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { generateClientFiles } from '../../scripts/ci/client-types';

it('the committed client types and routes match a fresh generation (run bun run client:types)', async () => {
  const files = await generateClientFiles();
  for (const [name, fresh] of Object.entries(files)) {
    const committed = readFileSync(join(import.meta.dir, '../../packages/client/src', name), 'utf8');
    expect({ name, same: committed === fresh }).toEqual({ name, same: true });
  }
}, 30_000);

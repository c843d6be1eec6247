// Build-time macro: the checkpoint Worker's code as a string, transpiled when the code is bundled, so
// the Worker starts from a Blob URL alike from source and from the compiled binary (where a Worker's
// file URL would point into the binary's own file system, at a path that depends on the bundle).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export function checkpointWorkerSource(): string {
  const source = readFileSync(join(import.meta.dir, 'checkpoint-worker.ts'), 'utf8');
  return new Bun.Transpiler({ loader: 'ts' }).transformSync(source);
}

// The compiled binary for process-level tests: built as `bun run build` builds it, but to a path of the
// test's choosing so a dist/keygate in use is left alone; and the first line a started server prints.
import { join } from 'node:path';

export function buildBinary(outfile: string): void {
  const root = join(import.meta.dir, '..', '..');
  const built = Bun.spawnSync([process.execPath, 'scripts/ci/build.ts', outfile], {
    cwd: root,
    stderr: 'pipe',
  });
  if (built.exitCode !== 0) throw new Error(`build failed: ${built.stderr.toString()}`);
}

/** Reads the start-up line ({"msg":"listening","url":…}) from a server's stdout. */
export async function readStartLine(stdout: {
  read(): Promise<{ value?: Uint8Array }>;
}): Promise<{ msg: string; url: string; database: string; metrics?: string }> {
  const { value } = await stdout.read();
  return JSON.parse(new TextDecoder().decode(value).split('\n')[0] as string);
}

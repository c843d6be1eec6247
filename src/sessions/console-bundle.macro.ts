// Build-time macro: bundles the console's front-end (console/, its own package) with Bun's bundler
// when keygate's code is bundled, so `bun build --compile` carries it inside the binary and
// `bun run start` and the tests serve the same bundle, made on the fly. Bun.build cannot run inside a
// macro (the bundler waits for the macro), so the macro runs `bun build` as a process.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const CONSOLE = join(import.meta.dir, '..', '..', 'console');

export function consoleBundle(): { js: string; css: string } {
  const built = Bun.spawnSync(
    [
      process.execPath,
      'build',
      join(CONSOLE, 'src', 'main.tsx'),
      '--target=browser',
      '--format=esm',
      '--minify',
      '--define',
      'process.env.NODE_ENV="production"',
    ],
    { cwd: CONSOLE, stdout: 'pipe', stderr: 'pipe', env: { ...process.env, NO_COLOR: '1' } },
  );
  if (built.exitCode !== 0) throw new Error(`the console's bundle failed: ${built.stderr.toString()}`);
  return { js: built.stdout.toString(), css: readFileSync(join(CONSOLE, 'src', 'console.css'), 'utf8') };
}

// `bun run build [OUTFILE [ENTRY]]`: compiles src/cli.ts (or ENTRY: the bench's own build,
// bench/keygate-entry.ts) into one executable (default dist/keygate) with the
// commit it was built from: KEYGATE_COMMIT from the environment (the Dockerfile passes its REVISION
// build arg), else `git rev-parse HEAD`, else "unknown" (outside a checkout).
//
// The executable reads its settings from its environment and flags only: Bun's default would have it
// load `.env` files and `bunfig.toml` (whose `preload` runs code) from whatever directory it is started
// in, silently, and `keygate config` would credit their values to the environment.
import { join } from 'node:path';

const root = join(import.meta.dir, '..', '..');
const outfile = process.argv[2] ?? 'dist/keygate';
const entry = process.argv[3] ?? 'src/cli.ts';

function commit(): string {
  const given = process.env.KEYGATE_COMMIT?.trim();
  if (given) return given;
  try {
    const git = Bun.spawnSync(['git', 'rev-parse', 'HEAD'], { cwd: root, stdout: 'pipe', stderr: 'ignore' });
    const head = git.exitCode === 0 ? git.stdout.toString().trim() : '';
    return /^[0-9a-f]{40}$/.test(head) ? head : 'unknown';
  } catch {
    return 'unknown'; // no git on this machine
  }
}

const command = [
  process.execPath,
  'build',
  entry,
  '--compile',
  '--bytecode',
  '--format=esm',
  '--minify',
  '--no-compile-autoload-dotenv',
  '--no-compile-autoload-bunfig',
  `--define=KEYGATE_COMMIT=${JSON.stringify(commit())}`,
  '--outfile',
  outfile,
];
const built = Bun.spawnSync(command, { cwd: root, stdout: 'inherit', stderr: 'inherit' });
process.exit(built.exitCode ?? 1);

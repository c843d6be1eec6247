// What some tests run beside keygate comes from Debian's packages (PostgreSQL, Chromium, Python's
// FastAPI and Flask): installed when missing and the tests run as root (as `.ci/run` does), so that
// the README's `bun run test` works from a fresh clone; otherwise the tests say what to install.
import { spawnSync } from 'node:child_process';

const updated = { done: false };

/** Runs `apt-get install` for `packages` unless `present()` already holds; true when it holds after. */
export function ensureDebianPackages(packages: readonly string[], present: () => boolean): boolean {
  if (present()) return true;
  if (process.getuid?.() !== 0) return false;
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  if (!updated.done) {
    spawnSync('apt-get', ['update', '-qq'], { env, stdio: 'ignore', timeout: 300_000 });
    updated.done = true;
  }
  spawnSync('apt-get', ['install', '-y', '-qq', ...packages], { env, stdio: 'ignore', timeout: 600_000 });
  return present();
}

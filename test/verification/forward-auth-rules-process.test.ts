// FORWARD_AUTH_RULES_FILE in a real process (`bun src/cli.ts serve`): a bad file stops start-up with
// exit 2 and one line naming the rule; a real SIGHUP reads the file again, and a bad file then keeps
// the old rules and says why in the log.
import { afterAll, describe, expect, it } from 'bun:test';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Subprocess, spawn, spawnSync } from 'bun';

const CLI = join(import.meta.dir, '..', '..', 'src', 'cli.ts');
const SECRET = 'rules-process-test-secret-32-bytes-long';
const scratch = mkdtempSync(join(tmpdir(), 'keygate-rules-process-'));
const running: Subprocess[] = [];
afterAll(() => {
  for (const child of running) child.kill('SIGKILL');
  rmSync(scratch, { recursive: true, force: true });
});

const env = (rules: string) => ({
  PATH: process.env.PATH ?? '',
  DATABASE_URL: ':memory:',
  JWT_SECRET: SECRET,
  HOST: '127.0.0.1',
  PORT: '0',
  FORWARD_AUTH_RULES_FILE: rules,
});

/** A start that must fail: its exit code and stderr. */
function failedStart(rules: string) {
  const result = spawnSync(['bun', CLI, 'serve'], {
    env: env(rules),
    stdout: 'pipe',
    stderr: 'pipe',
    timeout: 10_000,
  });
  return { code: result.exitCode, stderr: result.stderr.toString() };
}

function rulesFile(name: string, rules: unknown): string {
  const path = join(scratch, name);
  writeFileSync(path, typeof rules === 'string' ? rules : JSON.stringify(rules));
  return path;
}

describe('a bad rules file at start', () => {
  it.each([
    ['not JSON', '[{'],
    [
      'an unknown property',
      [
        { path: '/a', permissions: 'x' },
        { path: '/b', extra: 1 },
      ],
    ],
    ['a bad query', [{ path: '/a', permissions: 'x AND' }]],
    ['a bad path', [{ path: 'docs/*' }]],
  ])('stops start-up with exit 2 and one line: %s', (_, rules) => {
    const path = rulesFile(`bad-${Math.random()}.json`, rules);
    const result = failedStart(path);
    expect(result.code).toBe(2);
    const lines = result.stderr.trimEnd().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain('FORWARD_AUTH_RULES_FILE');
    expect(lines[0]).toContain(path);
  });

  it('names the rule that is wrong', () => {
    const path = rulesFile('second.json', [{ path: '/a' }, { path: '/b', minLevel: 9 }]);
    const result = failedStart(path);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('rule 2');
  });
});

describe('SIGHUP', () => {
  it('reads the rules file again; a bad one keeps the old rules and the log says why', async () => {
    const path = rulesFile('reload.json', [{ path: '/open', allow: 'anyone' }]);
    const child = spawn(['bun', CLI, 'serve'], {
      env: { ...env(path), FORWARD_AUTH_DEFAULT: 'deny' },
      stdout: 'pipe',
      stderr: 'pipe',
    });
    running.push(child);
    const lines: Array<Record<string, unknown>> = [];
    let url: string | undefined;
    const reader = (async () => {
      const decoder = new TextDecoder();
      let rest = '';
      for await (const chunk of child.stdout) {
        rest += decoder.decode(chunk, { stream: true });
        const parts = rest.split('\n');
        rest = parts.pop() ?? '';
        for (const part of parts) {
          const line = JSON.parse(part) as Record<string, unknown>;
          lines.push(line);
          if (line.msg === 'listening') url = String(line.url);
        }
      }
    })();
    const until = async (check: () => boolean) => {
      for (let i = 0; i < 500 && !check(); i++) await Bun.sleep(20);
      expect(check()).toBe(true);
    };
    await until(() => url !== undefined);
    const status = async (path: string) => (await fetch(new URL(`forward-auth${path}`, url))).status;
    expect(await status('/open')).toBe(200);
    expect(await status('/closed')).toBe(403);

    writeFileSync(path, JSON.stringify([{ path: '/closed', allow: 'anyone' }]));
    child.kill('SIGHUP');
    await until(() => lines.some((line) => line.msg === 'forward-auth rules reloaded'));
    expect(await status('/closed')).toBe(200);
    expect(await status('/open')).toBe(403);

    writeFileSync(path, '[{"path": "/open", "allow": "anyone", "permissions": "x"}]');
    child.kill('SIGHUP');
    await until(() =>
      lines.some((line) => line.msg === 'forward-auth rules not reloaded: the old rules stay'),
    );
    expect(await status('/closed')).toBe(200);
    expect(child.exitCode).toBeNull(); // SIGHUP does not end it

    child.kill('SIGTERM');
    expect(await child.exited).toBe(0);
    await reader;
  }, 30_000);
});

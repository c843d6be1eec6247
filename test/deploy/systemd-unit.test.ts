// deploy/keygate.service: the settings docs/running-on-a-vm.md relies on (its own user, the state
// directory holding the database, the optional environment file, the hardening), and, where
// systemd-analyze is installed, a verify without a single warning.
import { afterAll, describe, expect, it } from 'bun:test';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const UNIT = readFileSync(join(import.meta.dir, '..', '..', 'deploy', 'keygate.service'), 'utf8');
const scratch = mkdtempSync(join(tmpdir(), 'keygate-unit-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Every value each directive is given, in order. */
const directives = new Map<string, string[]>();
for (const line of UNIT.split('\n')) {
  const match = /^([A-Za-z]+)=(.*)$/.exec(line);
  if (match)
    directives.set(match[1] as string, [...(directives.get(match[1] as string) ?? []), match[2] as string]);
}
const value = (name: string) => directives.get(name)?.at(-1);

describe('deploy/keygate.service', () => {
  it('runs keygate serve as its own user, with its database in the state directory', () => {
    expect(value('ExecStart')).toBe('/usr/local/bin/keygate serve');
    expect(value('User')).toBe('keygate');
    expect(value('StateDirectory')).toBe('keygate');
    expect(value('Environment')).toBe('DATABASE_URL=/var/lib/keygate/keygate.db');
    expect(value('EnvironmentFile')).toBe('-/etc/keygate/keygate.env');
    expect(value('Restart')).toBe('on-failure');
    expect(value('WantedBy')).toBe('multi-user.target');
  });

  it('is hardened: no privileges, a read-only system, only network address families', () => {
    expect(value('NoNewPrivileges')).toBe('yes');
    expect(value('CapabilityBoundingSet')).toBe('');
    expect(value('ProtectSystem')).toBe('strict');
    expect(value('ProtectHome')).toBe('yes');
    expect(value('PrivateTmp')).toBe('yes');
    expect(value('RestrictAddressFamilies')).toBe('AF_INET AF_INET6 AF_UNIX');
    expect(value('SystemCallFilter')).toBe('@system-service');
    // Bun's JIT writes and then runs machine code: this setting would stop it at start.
    expect(directives.has('MemoryDenyWriteExecute')).toBe(false);
  });

  it.skipIf(Bun.which('systemd-analyze') === null)('passes systemd-analyze verify without a warning', () => {
    // verify checks that ExecStart's program exists; this machine has no /usr/local/bin/keygate.
    const unit = join(scratch, 'keygate.service');
    writeFileSync(unit, UNIT.replace('ExecStart=/usr/local/bin/keygate ', `ExecStart=${Bun.which('true')} `));
    const result = Bun.spawnSync(['systemd-analyze', 'verify', unit], { stdout: 'pipe', stderr: 'pipe' });
    expect(`${result.stdout}${result.stderr}`).toBe('');
    expect(result.exitCode).toBe(0);
  });
});

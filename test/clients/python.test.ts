// The Python module's tests (clients/python/tests, unittest) under Debian's /usr/bin/python3, which has
// python3-fastapi, python3-uvicorn and python3-flask (installed when missing, as root, as .ci/run
// does): the same table, in FastAPI and Flask, against the keygate and stubs started here.
import { afterAll, expect, it } from 'bun:test';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { ensureDebianPackages } from '../support/debian-packages';
import { startKeygatesForClients } from './keygate-for-clients';

const PYTHON = '/usr/bin/python3';
const frameworksPresent = () =>
  spawnSync(PYTHON, ['-c', 'import fastapi, uvicorn, flask'], { stdio: 'ignore' }).status === 0;
if (!ensureDebianPackages(['python3-fastapi', 'python3-uvicorn', 'python3-flask'], frameworksPresent)) {
  throw new Error(
    `${PYTHON} lacks fastapi, uvicorn or flask: apt-get install python3-fastapi python3-uvicorn python3-flask (as .ci/run does).`,
  );
}

const ROOT = join(import.meta.dir, '..', '..');
const keygates = await startKeygatesForClients();
afterAll(() => keygates.stop());

it('the Python client, FastAPI dependency and Flask decorator pass the table', async () => {
  const python = Bun.spawn([PYTHON, '-m', 'unittest', 'discover', '-s', 'clients/python/tests', '-v'], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH ?? '',
      KEYGATE_URL: keygates.url,
      KEYGATE_TOKEN: keygates.token,
      KEYGATE_STUBS: JSON.stringify(keygates.stubs),
    },
    stdout: 'pipe',
    stderr: 'pipe',
  });
  // Awaited, not spawnSync: the stubs answer from this process while Python runs.
  const [code, output] = await Promise.all([python.exited, new Response(python.stderr).text()]);
  expect({ code, output }).toEqual({ code: 0, output: expect.stringContaining('OK') });
}, 120_000);

// The Python module's tests (clients/python/tests, unittest) under Debian's /usr/bin/python3, which has
// python3-fastapi, python3-uvicorn and python3-flask (.ci/run installs them): the same table, in
// FastAPI and Flask, against the keygate and stubs started here.
import { afterAll, expect, it } from 'bun:test';
import { join } from 'node:path';
import { startKeygatesForClients } from './keygate-for-clients';

const ROOT = join(import.meta.dir, '..', '..');
const keygates = await startKeygatesForClients();
afterAll(() => keygates.stop());

it('the Python client, FastAPI dependency and Flask decorator pass the table', async () => {
  const python = Bun.spawn(
    ['/usr/bin/python3', '-m', 'unittest', 'discover', '-s', 'clients/python/tests', '-v'],
    {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH ?? '',
        KEYGATE_URL: keygates.url,
        KEYGATE_TOKEN: keygates.token,
        KEYGATE_STUBS: JSON.stringify(keygates.stubs),
      },
      stdout: 'pipe',
      stderr: 'pipe',
    },
  );
  // Awaited, not spawnSync: the stubs answer from this process while Python runs.
  const [code, output] = await Promise.all([python.exited, new Response(python.stderr).text()]);
  expect({ code, output }).toEqual({ code: 0, output: expect.stringContaining('OK') });
}, 120_000);

// Runs cases.json, the one table of middleware behaviour, for one framework: each row builds the
// framework's guarded app (the example under examples/integrate/) with the row's options, serves it on
// 127.0.0.1, and sends the row's request. The framework's test file only says how to serve its app.
import { afterAll, describe, expect, it } from 'bun:test';
import { createClient } from '@keygate/client';
import table from './cases.json' with { type: 'json' };
import { type KeygatesForClients, startKeygatesForClients } from './keygate-for-clients';

export type Case = (typeof table.cases)[number] & {
  key?: Record<string, unknown> | null;
  keygate?: keyof KeygatesForClients['stubs'] | 'real';
  warmup?: number;
  options?: {
    minLevel?: number;
    permissions?: string;
    permissionsByMethod?: Record<string, string>;
    cost?: number;
    failOpen?: boolean;
    timeoutMs?: number;
  };
  expect: {
    status: number;
    headers?: Record<string, string | null>;
    principal?: Record<string, unknown> | null;
  };
};
export const CASES = table.cases as Case[];

/** The options every adapter takes, as a row asks for them. */
export type GuardOptions<R> = {
  url: string;
  minLevel?: number;
  permissions?: string | ((request: R) => string | undefined);
  cost?: number;
  failOpen?: boolean;
  timeoutMs?: number;
  clientIp?: false;
};

/** A served app: its base URL and how to stop it. */
export type Served = { url: string; close(): Promise<void> | void };

export async function runTable<R>(
  framework: string,
  serve: (options: GuardOptions<R>) => Promise<Served>,
  methodOf: (request: R) => string,
): Promise<void> {
  const keygates = await startKeygatesForClients();
  describe(`${framework}: the middleware table`, () => {
    afterAll(() => keygates.stop());

    for (const row of CASES) {
      it(row.name, async () => {
        const headers = await credentialFor(row, keygates);
        const { permissionsByMethod, ...options } = row.options ?? {};
        const byMethod = permissionsByMethod;
        const app = await serve({
          ...options,
          url: row.keygate && row.keygate !== 'real' ? keygates.stubs[row.keygate] : keygates.url,
          ...(byMethod ? { permissions: (request: R) => byMethod[methodOf(request)] } : {}),
        });
        try {
          for (let i = 0; i < (row.warmup ?? 0); i++) {
            expect((await fetch(`${app.url}/api/whoami`, { headers })).status).toBe(200);
          }
          const response = await fetch(`${app.url}/api/whoami`, { headers });
          const body = (await response.json()) as Record<string, unknown>;
          expect({ status: response.status, body }).toMatchObject({ status: row.expect.status });
          for (const [name, pattern] of Object.entries(row.expect.headers ?? {})) {
            const value = response.headers.get(name);
            if (pattern === null) expect({ [name]: value }).toEqual({ [name]: null });
            else expect({ [name]: value }).toEqual({ [name]: expect.stringMatching(new RegExp(pattern)) });
          }
          if (row.expect.status === 200) {
            if (row.expect.principal === null) expect(body).toEqual({ principal: null });
            else if (row.expect.principal) expect(body.principal).toMatchObject(row.expect.principal);
          } else {
            expect(response.headers.get('content-type')).toStartWith('application/json');
            expect(body).toEqual({ result: 'error', error: expect.any(String) });
          }
        } finally {
          await app.close();
        }
      });
    }
  });
}

/** The request headers a row sends, creating its fresh key (and waiting out an expiry) first. */
async function credentialFor(row: Case, keygates: KeygatesForClients): Promise<Record<string, string>> {
  switch (row.credential) {
    case 'none':
      return {};
    case 'token':
      return { authorization: `Bearer ${keygates.token}` };
    case 'invalid-token':
      return { authorization: 'Bearer not.a.token' };
    case 'malformed-basic':
      return { authorization: 'Basic !!!' };
    case 'key-without-secret':
      return { 'x-api-key': 'kg_0123456789abcdefghijkl' };
  }
  const client = createClient({ url: keygates.url, token: keygates.token });
  const body = { name: row.name, level: 3, expiresIn: 3600, ...row.key };
  const { apikey } = await client.createKey({ body: body as never });
  if (body.expiresIn === 1) await Bun.sleep(Math.max(0, Date.parse(apikey.expiresAt) - Date.now() + 20));
  const secret = row.credential === 'wrong-secret' ? `${apikey.secret}x` : apikey.secret;
  if (row.credential === 'headers') return { 'x-api-key': apikey.key, 'x-api-secret': secret };
  return { authorization: `Basic ${btoa(`${apikey.key}:${secret}`)}` };
}

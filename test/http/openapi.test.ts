// The OpenAPI document (/openapi/json) is valid, names its schemas, types integers as integers,
// documents every status and header keygate sends, and generates client types that are right.
import { afterAll, describe, expect, it } from 'bun:test';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import SwaggerParser from '@apidevtools/swagger-parser';
import openapiTS, { astToString } from 'openapi-typescript';
import { testKeygate } from '../support/keygate';

const scratch = mkdtempSync(join(tmpdir(), 'keygate-openapi-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

async function documentOf(env: Record<string, string> = {}) {
  const k = await testKeygate(env);
  const response = await k.req('GET', '/openapi/json');
  expect(response.status).toBe(200);
  return response.json;
}

// biome-ignore lint/suspicious/noExplicitAny: walking an arbitrary JSON document.
type Node = any;
const operationsOf = (doc: Node) =>
  Object.entries(doc.paths).flatMap(([path, item]) =>
    Object.entries(item as Node).map(([method, operation]) => ({
      path,
      method,
      operation: operation as Node,
    })),
  );

/** Every object in the document, with its JSON pointer. */
function* walk(value: Node, pointer = ''): Generator<[string, Node]> {
  if (value === null || typeof value !== 'object') return;
  yield [pointer, value];
  for (const [key, inner] of Object.entries(value)) yield* walk(inner, `${pointer}/${key}`);
}

describe('the OpenAPI document', () => {
  it.each([[''], ['/auth']])(
    'passes @apidevtools/swagger-parser validation (BASE_PATH "%s")',
    async (basePath) => {
      const doc = await documentOf({ BASE_PATH: basePath });
      await expect(SwaggerParser.validate(structuredClone(doc))).resolves.toBeDefined();
    },
  );

  it('is caught by the validator when it is wrong (the check can fail)', async () => {
    const doc = await documentOf();
    doc.paths['/apikeys/{id}/jwt'].delete.responses['204'].content = { type: 'void' };
    await expect(SwaggerParser.validate(doc)).rejects.toThrow();
  });

  it('puts BASE_PATH in its server entry and nowhere in the paths', async () => {
    const doc = await documentOf({ BASE_PATH: '/auth' });
    expect(doc.servers).toEqual([{ url: '/auth', description: expect.any(String) }]);
    expect(Object.keys(doc.paths)).toContain('/apikeys/{id}/jwt');
    expect(Object.keys(doc.paths).filter((path) => path.startsWith('/auth'))).toEqual([]);
    expect((await documentOf()).servers[0].url).toBe('/');
  });

  it('names its schemas and refers to them', async () => {
    const doc = await documentOf();
    expect(Object.keys(doc.components.schemas)).toEqual(
      expect.arrayContaining(['Error', 'Health', 'CreateKeyRequest', 'CreatedApiKey', 'CreatedResponse']),
    );
    const create = doc.paths['/apikeys/jwt'].post;
    expect(create.requestBody.content['application/json'].schema).toEqual({
      $ref: '#/components/schemas/CreateKeyRequest',
    });
    expect(create.responses['201'].content['application/json'].schema).toEqual({
      $ref: '#/components/schemas/CreatedResponse',
    });
    expect(doc.paths['/health'].get.responses['200'].content['application/json'].schema).toEqual({
      $ref: '#/components/schemas/Health',
    });
  });

  it('names the usage schemas, lists the usage query, and shows lastUsedAt in the key info', async () => {
    const doc = await documentOf();
    expect(Object.keys(doc.components.schemas)).toEqual(
      expect.arrayContaining(['UsageResponse', 'UsageBucket']),
    );
    for (const scheme of ['jwt', 'key']) {
      const usage = doc.paths[`/apikeys/{id}/usage/${scheme}`].get;
      expect(usage.responses['200'].content['application/json'].schema).toEqual({
        $ref: '#/components/schemas/UsageResponse',
      });
      expect(usage.parameters.map((p: { name: string; in: string }) => `${p.in}:${p.name}`)).toEqual([
        'path:id',
        'query:granularity',
        'query:since',
        'query:until',
      ]);
    }
    expect(doc.components.schemas.KeySummary.required).toContain('lastUsedAt');
    expect(doc.components.schemas.KeySummary.properties.lastUsedAt.type).toEqual(['string', 'null']);
  });

  it('types integers as integers, everywhere', async () => {
    const doc = await documentOf();
    const { CreatedApiKey, CreateKeyRequest } = doc.components.schemas;
    expect(CreatedApiKey.properties.level).toEqual({ type: 'integer' });
    expect(CreatedApiKey.properties.userId).toEqual({ type: 'integer' });
    expect(CreateKeyRequest.properties.level).toMatchObject({ type: 'integer', minimum: 0, maximum: 8 });
    expect(CreateKeyRequest.properties.expiresIn).toMatchObject({ type: 'integer', minimum: 1 });
    for (const [pointer, node] of walk(doc)) {
      if (node.format === 'integer' || (node.type === 'number' && node.multipleOf === 1)) {
        throw new Error(`a disguised integer at ${pointer}`);
      }
    }
  });

  it('documents 204 without content, and 500 and 503 on every operation', async () => {
    const doc = await documentOf();
    expect(doc.paths['/apikeys/{id}/key'].delete.responses['204']).not.toHaveProperty('content');
    for (const { path, method, operation } of operationsOf(doc)) {
      for (const status of ['500', '503']) {
        expect({
          path,
          method,
          status,
          schema: operation.responses[status]?.content['application/json'].schema,
        }).toEqual({
          path,
          method,
          status,
          schema: { $ref: '#/components/schemas/Error' },
        });
      }
    }
  });

  it('documents X-Request-Id on every response, WWW-Authenticate on 401 and Retry-After on 503', async () => {
    const doc = await documentOf();
    let checked401 = 0;
    for (const { operation } of operationsOf(doc)) {
      for (const [status, response] of Object.entries(operation.responses as Record<string, Node>)) {
        expect(response.headers['X-Request-Id']).toEqual({ $ref: '#/components/headers/X-Request-Id' });
        if (status === '401') {
          checked401++;
          expect(response.headers['WWW-Authenticate']).toEqual({
            $ref: '#/components/headers/WWW-Authenticate',
          });
        }
        if (status === '503') expect(response.headers['Retry-After']).toBeDefined();
      }
    }
    expect(checked401).toBeGreaterThanOrEqual(4);
    expect(Object.keys(doc.components.headers).sort()).toEqual([
      'Retry-After',
      'WWW-Authenticate',
      'X-Request-Id',
    ]);
    // What it documents is what keygate sends.
    const k = await testKeygate();
    const unauthenticated = await k.req('POST', '/apikeys/jwt', { body: {} });
    expect(unauthenticated.status).toBe(401);
    expect(unauthenticated.headers.get('www-authenticate')).toStartWith('Bearer');
    expect(unauthenticated.headers.get('x-request-id')).toBeTruthy();
  });

  it('documents the leak endpoints with named schemas; /leaks/github only when GitHub secret scanning is on', async () => {
    expect((await documentOf()).paths['/leaks/github']).toBeUndefined();
    const doc = await documentOf({ GITHUB_SECRET_SCANNING: 'on' });
    await expect(SwaggerParser.validate(structuredClone(doc))).resolves.toBeDefined();
    const json = (operation: Node, status: string) =>
      operation.responses[status].content['application/json'].schema;
    const github = doc.paths['/leaks/github'].post;
    expect(github.requestBody.content['application/json'].schema).toEqual({
      $ref: '#/components/schemas/GithubSecretScanningAlerts',
    });
    expect(json(github, '200')).toEqual({ $ref: '#/components/schemas/GithubSecretScanningFeedback' });
    expect(github.responses['401']).toBeDefined();
    const admin = doc.paths['/admin/leaks'].post;
    expect(admin.requestBody.content['application/json'].schema).toEqual({
      $ref: '#/components/schemas/LeakReportRequest',
    });
    expect(json(admin, '200')).toEqual({ $ref: '#/components/schemas/LeakReportResponse' });
    expect(admin.security).toEqual([{ bearer: [] }]);
    expect(doc.components.schemas.KeySummary.properties).toHaveProperty('leakedAt');
    expect(doc.components.schemas.LeakReportResponse.properties.notFound.type).toBe('integer');
  });

  it('says which operations take no credentials, and uses unique operation ids without BASE_PATH', async () => {
    const doc = await documentOf({ BASE_PATH: '/kgbase' });
    expect(doc.paths['/health'].get.security).toEqual([]);
    expect(doc.paths['/apikeys/jwt'].post.security).toEqual([{ bearer: [] }]);
    const ids = operationsOf(doc).map(({ operation }) => operation.operationId);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids).toContain('deleteApikeysByIdJwt');
    expect(ids.filter((id: string) => id.toLowerCase().includes('kgbase'))).toEqual([]);
  });
});

describe('types generated with openapi-typescript', () => {
  const CLIENT = `import type { components, paths } from './keygate';
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
const expectType = <T extends true>(): T | undefined => undefined;

type Created = paths['/apikeys/jwt']['post']['responses'][201]['content']['application/json'];
expectType<Equal<Created['apikey']['level'], number>>();
expectType<Equal<Created['apikey']['userId'], number>>();
expectType<Equal<Created['result'], 'success'>>();
type Health = paths['/health']['get']['responses'][200]['content']['application/json'];
expectType<Equal<Health, { status: 'ok' }>>();
type Failure = paths['/apikeys/jwt']['post']['responses'][503]['content']['application/json'];
expectType<Equal<Failure, components['schemas']['Error']>>();
expectType<Equal<Required<paths['/apikeys/{id}/jwt']['delete']['responses'][204]>['content'], never>>();
type Body = NonNullable<paths['/apikeys/key']['post']['requestBody']>['content']['application/json'];
const body: Body = { name: 'ci', level: 3, expiresIn: 3600 };
// The first verify call: cost and minLevel may be left out; code is a union of the codes.
type Verify = paths['/apikeys/verify']['post'];
export const verifyBody: Verify['requestBody']['content']['application/json'] = { key: 'kg_x', secret: 's' };
type Code = Verify['responses'][200]['content']['application/json']['code'];
expectType<Equal<Extract<Code, 'VALID' | 'IP_NOT_ALLOWED' | 'INSUFFICIENT_PERMISSIONS'>, 'VALID' | 'IP_NOT_ALLOWED' | 'INSUFFICIENT_PERMISSIONS'>>();
// @ts-expect-error: an unknown code is not a Code
export const notACode: Code = 'NOT_A_CODE';

// A small client, as a user would write it against the generated types.
export async function createKey(baseUrl: string, token: string): Promise<Created['apikey']> {
  const response = await fetch(\`\${baseUrl}/apikeys/jwt\`, {
    method: 'POST',
    headers: { authorization: \`Bearer \${token}\`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (response.status !== 201) throw new Error(((await response.json()) as Failure).error);
  const created = (await response.json()) as Created;
  const nextLevel: number = created.apikey.level + 1;
  return { ...created.apikey, level: nextLevel - 1 };
}
`;

  function typeCheck(files: Record<string, string>): { code: number | null; output: string } {
    const dir = mkdtempSync(join(scratch, 'client-'));
    for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
    writeFileSync(
      join(dir, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          strict: true,
          noEmit: true,
          target: 'ES2022',
          module: 'ESNext',
          moduleResolution: 'bundler',
          lib: ['ES2022', 'DOM'],
          types: [],
        },
        include: ['*.ts'],
      }),
    );
    const result = Bun.spawnSync(['bun', 'check', '--no-pretty', '--no-script', '-p', dir], {
      stdout: 'pipe',
      stderr: 'pipe',
    });
    return { code: result.exitCode, output: result.stdout.toString() + result.stderr.toString() };
  }

  it('type-check a small client: level and userId are numbers, /health, 204, 500 and 503 are typed', async () => {
    const types = astToString(await openapiTS(await documentOf()));
    const result = typeCheck({ 'keygate.ts': types, 'client.ts': CLIENT });
    expect(result.output).toContain('No type errors');
    expect(result.code).toBe(0);
  }, 30_000);

  it.each([
    [
      'cost with a default (openapi-typescript makes it required)',
      (doc: Node) => {
        doc.components.schemas.VerifyBody.properties.cost.default = 1;
      },
    ],
    [
      'code a plain string',
      (doc: Node) => {
        doc.components.schemas.VerifyResponse.properties.code = { type: 'string' };
      },
    ],
  ])(
    'would catch a verify call that does not type-check: %s',
    async (_, spoil) => {
      const doc = await documentOf();
      spoil(doc);
      const result = typeCheck({ 'keygate.ts': astToString(await openapiTS(doc)), 'client.ts': CLIENT });
      expect(result.code).not.toBe(0);
      expect(result.output).toContain('client.ts');
    },
    30_000,
  );

  it('marks the verify codes as an enum open to new values', async () => {
    const code = (await documentOf()).components.schemas.VerifyResponse.properties.code;
    expect(code['x-enum-open']).toBe(true);
    expect(code.enum).toEqual(
      expect.arrayContaining(['VALID', 'IP_NOT_ALLOWED', 'INSUFFICIENT_PERMISSIONS']),
    );
    expect(code.default).toBeUndefined();
  });

  it('would catch the old mistake: a level typed string | number fails the same client', async () => {
    const doc = await documentOf();
    doc.components.schemas.CreatedApiKey.properties.level = {
      anyOf: [{ type: 'string' }, { type: 'integer' }],
    };
    const result = typeCheck({ 'keygate.ts': astToString(await openapiTS(doc)), 'client.ts': CLIENT });
    expect(result.code).not.toBe(0);
    expect(result.output).toContain('client.ts');
  }, 30_000);
});

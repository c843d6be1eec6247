// The operator's routes in the OpenAPI document: every one under the Operator tag, needing a bearer
// token, its bodies and answers named schemas; the document stays valid.
import { afterAll, beforeAll, describe, expect, it } from 'bun:test';
import SwaggerParser from '@apidevtools/swagger-parser';
import { type TestKeygate, testKeygate } from '../support/keygate';
import { sharedPostgres, TEST_ENGINE } from '../support/postgres';

let k: TestKeygate;
// biome-ignore lint/suspicious/noExplicitAny: walking an arbitrary JSON document.
let doc: any;
// Starting the run's PostgreSQL takes longer than one hook may, when this file runs first.
beforeAll(async () => {
  if (TEST_ENGINE === 'postgres') await sharedPostgres();
}, 60_000);
beforeAll(async () => {
  k = await testKeygate();
  doc = (await k.req('GET', '/openapi/json')).json;
});
afterAll(() => k.close());

const OPERATIONS: Array<[method: string, path: string, success: string, schema: string | undefined]> = [
  ['get', '/admin/users/{userId}/apikeys', '200', 'KeyListResponse'],
  ['post', '/admin/users/{userId}/apikeys', '201', 'CreatedResponse'],
  ['delete', '/admin/users/{userId}/apikeys', '200', 'RevokedAllResponse'],
  ['get', '/admin/users/{userId}/usage', '200', 'UserUsageResponse'],
  ['get', '/admin/apikeys/{id}', '200', 'KeyResponse'],
  ['patch', '/admin/apikeys/{id}', '200', 'KeyResponse'],
  ['delete', '/admin/apikeys/{id}', '204', undefined],
  ['get', '/admin/apikeys/{id}/usage', '200', 'UsageResponse'],
  ['put', '/admin/users/{userId}/policy', '200', 'PolicyResponse'],
  ['get', '/admin/users/{userId}/policy', '200', 'PolicyResponse'],
  ['delete', '/admin/users/{userId}/policy', '204', undefined],
  ['get', '/admin/subjects', '200', 'SubjectResponse'],
  ['get', '/admin/users', '200', 'UserListResponse'],
  ['get', '/admin/apikeys', '200', 'KeySearchResponse'],
  ['get', '/admin/overview', '200', 'OverviewResponse'],
];

describe('the operator’s routes in the OpenAPI document', () => {
  it('still passes @apidevtools/swagger-parser validation', async () => {
    await expect(SwaggerParser.validate(structuredClone(doc))).resolves.toBeDefined();
  });

  it.each(OPERATIONS)('%s %s: Operator tag, bearer, a named %s answer', (method, path, success, schema) => {
    const operation = doc.paths[path]?.[method];
    expect(operation).toBeDefined();
    expect(operation.tags).toEqual(['Operator']);
    expect(operation.security).toEqual([{ bearer: [] }]);
    expect(Object.keys(operation.responses)).toEqual(expect.arrayContaining(['400', '401', '403', '503']));
    const content = operation.responses[success].content;
    if (schema === undefined) expect(content).toBeUndefined();
    else expect(content['application/json'].schema).toEqual({ $ref: `#/components/schemas/${schema}` });
  });

  it('lists the Operator tag with a description', () => {
    expect(doc.tags).toContainEqual({ name: 'Operator', description: expect.any(String) });
  });
});

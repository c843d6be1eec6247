// The OpenAPI document lists the verify, forward-auth, list, get and rotate routes, with named
// schemas in components.schemas that the operations reference.
import { expect, it } from 'bun:test';
import { testKeygate } from '../support/keygate';

it('documents the new routes with named, referenced schemas', async () => {
  const k = await testKeygate();
  try {
    const doc = (await k.req('GET', '/openapi/json')).json;
    for (const suffix of ['jwt', 'key']) {
      expect(doc.paths[`/apikeys/${suffix}`].get.responses['200'].content['application/json'].schema).toEqual(
        {
          $ref: '#/components/schemas/KeyListResponse',
        },
      );
      expect(doc.paths[`/apikeys/{id}/${suffix}`].get).toBeDefined();
      expect(doc.paths[`/apikeys/{id}/rotate/${suffix}`].post.responses['201']).toBeDefined();
    }
    expect(doc.paths['/apikeys/verify'].post.requestBody.content['application/json'].schema).toEqual({
      $ref: '#/components/schemas/VerifyBody',
    });
    expect(doc.paths['/forward-auth']).toBeDefined();
    expect(doc.paths['/forward-auth/*']).toBeUndefined();
    for (const name of [
      'KeySummary',
      'KeyListResponse',
      'RotatedResponse',
      'VerifyResponse',
      'ForwardAuthResponse',
    ]) {
      expect(doc.components.schemas[name]).toBeDefined();
    }
    const text = JSON.stringify(doc);
    for (const ref of text.match(/"\$ref":"[^"]*"/g) ?? [])
      expect(ref).toMatch(/#\/components\/(schemas|headers)\//);
  } finally {
    await k.close();
  }
});

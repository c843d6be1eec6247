// Reading credentials from headers: absent (401) versus malformed (403) versus usable.
import { describe, expect, it } from 'bun:test';
import { readBearer, readKeyAndSecret } from '../../src/auth/credentials';

const h = (init: Record<string, string>) => new Headers(init);
const b64 = (text: string) => Buffer.from(text).toString('base64');

describe('readBearer', () => {
  it.each([
    [{}, { kind: 'absent' }],
    [{ authorization: 'Basic abc' }, { kind: 'absent' }],
    [{ authorization: 'Bearerabc' }, { kind: 'absent' }],
    [{ authorization: 'Bearer' }, { kind: 'malformed' }],
    [{ authorization: 'Bearer a b' }, { kind: 'malformed' }],
    [{ authorization: 'Bearer abc' }, { kind: 'bearer', token: 'abc' }],
    [{ authorization: 'BEARER  abc ' }, { kind: 'bearer', token: 'abc' }],
  ])('%p → %p', (headers, expected) => {
    expect(readBearer(h(headers))).toEqual(expected as never);
  });
});

describe('readKeyAndSecret', () => {
  it.each([
    [{}, { kind: 'absent' }],
    [{ authorization: 'Bearer abc' }, { kind: 'absent' }],
    [{ authorization: `Basic ${b64('kg_a:s3cr:et')}` }, { kind: 'key', key: 'kg_a', secret: 's3cr:et' }],
    [{ authorization: `basic ${b64('k:s')}` }, { kind: 'key', key: 'k', secret: 's' }],
    [{ authorization: 'Basic' }, { kind: 'malformed' }],
    [{ authorization: 'Basic %%%' }, { kind: 'malformed' }],
    [{ authorization: 'Basic abc' }, { kind: 'malformed' }],
    [{ authorization: `Basic ${b64('nocolon')}` }, { kind: 'malformed' }],
    [{ authorization: `Basic ${b64(':secret')}` }, { kind: 'malformed' }],
    [{ authorization: `Basic ${b64('key:')}` }, { kind: 'malformed' }],
    [
      { 'x-api-key': 'k', 'x-api-secret': 's' },
      { kind: 'key', key: 'k', secret: 's' },
    ],
    [{ 'x-api-key': 'k' }, { kind: 'malformed' }],
    [{ 'x-api-key': '', 'x-api-secret': 's' }, { kind: 'malformed' }],
  ])('%p → %p', (headers, expected) => {
    expect(readKeyAndSecret(h(headers))).toEqual(expected as never);
  });

  it('prefers Basic over the X-API headers', () => {
    const headers = h({ authorization: `Basic ${b64('a:b')}`, 'x-api-key': 'c', 'x-api-secret': 'd' });
    expect(readKeyAndSecret(headers)).toEqual({ kind: 'key', key: 'a', secret: 'b' });
  });
});

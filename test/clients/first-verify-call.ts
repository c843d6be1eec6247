// Type-checked by `bun run check` (not run): a client generated from the served document with
// openapi-typescript's defaults makes its first verify call without ceremony; `code` is a union.
import { createClient, type paths } from '@keygate/client';

type VerifyBody = paths['/apikeys/verify']['post']['requestBody']['content']['application/json'];
type VerifyCode = paths['/apikeys/verify']['post']['responses'][200]['content']['application/json']['code'];

export const firstBody: VerifyBody = { key: 'kg_example', secret: 'secret' };
export const tokenBody: VerifyBody = { token: 'eyJ…' };
export const newCodes: VerifyCode[] = ['IP_NOT_ALLOWED', 'INSUFFICIENT_PERMISSIONS'];
// @ts-expect-error: code is a union of the codes, not any string
export const notACode: VerifyCode = 'NOT_A_CODE';

export async function firstVerifyCall(): Promise<boolean> {
  const keygate = createClient({ url: 'http://127.0.0.1:3000' });
  const answer = await keygate.verify({ body: { key: 'kg_example', secret: 'secret' } });
  const code: 'VALID' | 'NOT_FOUND' | VerifyCode = answer.code;
  const created = await keygate.createKey({ body: { name: 'ci', level: 1, expiresIn: 60 } });
  await keygate.getKey({ params: { id: created.apikey.key } });
  await keygate.listKeys();
  await keygate.health();
  // @ts-expect-error: a route's path parameters are required
  await keygate.getKey({});
  return code === 'VALID';
}

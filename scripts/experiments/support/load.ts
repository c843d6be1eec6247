// The mixed request load of the soak and slow-client scripts: creates and deletes under both schemes,
// failed authentications, health checks. Each operation knows the statuses it may get; any other
// status, or a transport error, is an error.
import { jwt } from './server';

type Key = { key: string; secret: string; userId: number };
type Answer = { apikey: { key: string; secret: string } };

export type Outcome = { op: string; ms: number; ok: boolean; detail?: string };

const USERS = 200;
const json = { 'content-type': 'application/json' };
const basic = (k: Key) => ({
  authorization: `Basic ${Buffer.from(`${k.key}:${k.secret}`).toString('base64')}`,
});

export async function createMixedLoad(base: string) {
  const tokens: string[] = [];
  for (let user = 0; user < USERS; user++) tokens.push(await jwt.sign({ sub: user, ttlSeconds: 86_400 }));
  const pool: Key[] = [];
  const bearer = (userId: number) => ({ authorization: `Bearer ${tokens[userId]}` });
  const pickUser = () => Math.floor(Math.random() * USERS);
  let sequence = 0;

  async function timed(
    op: string,
    expected: number[],
    send: () => Promise<Response>,
    onOk?: (response: Response) => Promise<void>,
  ): Promise<Outcome> {
    const started = performance.now();
    try {
      const response = await send();
      const ok = expected.includes(response.status);
      if (ok && onOk) await onOk(response);
      else await response.arrayBuffer();
      return {
        op,
        ms: performance.now() - started,
        ok,
        detail: ok ? undefined : `${op} answered ${response.status}`,
      };
    } catch (error) {
      return { op, ms: performance.now() - started, ok: false, detail: `${op}: ${(error as Error).message}` };
    }
  }

  const create = (viaKey: boolean, expiresIn: number, keep: boolean) => {
    const parent = viaKey && pool.length > 0 ? pool[Math.floor(Math.random() * pool.length)] : undefined;
    const userId = parent?.userId ?? pickUser();
    return timed(
      parent ? 'create-key' : 'create-jwt',
      // A parent picked here may be deleted by a concurrent request before this one is served.
      parent ? [201, 403] : [201],
      () =>
        fetch(`${base}/apikeys/${parent ? 'key' : 'jwt'}`, {
          method: 'POST',
          headers: { ...json, ...(parent ? basic(parent) : bearer(userId)) },
          body: JSON.stringify({ name: `soak ${sequence++}`, level: 0, expiresIn }),
        }),
      async (response) => {
        if (response.status !== 201) return void (await response.arrayBuffer());
        const { apikey } = (await response.json()) as Answer;
        if (keep) pool.push({ key: apikey.key, secret: apikey.secret, userId });
      },
    );
  };

  const remove = (viaKey: boolean) => {
    const victim = pool.splice(Math.floor(Math.random() * pool.length), 1)[0];
    if (!victim) return create(false, 3600, true);
    return timed(viaKey ? 'delete-key' : 'delete-jwt', [204], () =>
      fetch(`${base}/apikeys/${victim.key}/${viaKey ? 'key' : 'jwt'}`, {
        method: 'DELETE',
        headers: viaKey ? basic(victim) : bearer(victim.userId),
      }),
    );
  };

  /** One operation drawn from the mix; the key pool hovers around `target` keys. */
  return function next(target = 2000): Promise<Outcome> {
    const roll = Math.random();
    if (roll < 0.05) return timed('health', [200], () => fetch(`${base}/health`));
    if (roll < 0.15) {
      const k = pool[Math.floor(Math.random() * pool.length)];
      const wrong = k
        ? { ...k, secret: `${k.secret.slice(0, -2)}xx` }
        : { key: 'kg_0000000000000000000000', secret: 'x', userId: 0 };
      return timed('auth-fail', [403], () =>
        fetch(`${base}/apikeys/key`, { method: 'POST', headers: { ...json, ...basic(wrong) }, body: '{}' }),
      );
    }
    if (roll < 0.2)
      return timed('no-auth', [401], () =>
        fetch(`${base}/apikeys/jwt`, { method: 'POST', headers: json, body: '{}' }),
      );
    // Short-lived keys feed the purge timer so that it runs during the soak.
    if (roll < 0.25) return create(false, 5, false);
    const grow = pool.length < target;
    if (roll < 0.65) return grow ? create(roll < 0.45, 3600, true) : remove(roll < 0.45);
    return grow ? create(false, 3600, true) : remove(roll < 0.85);
  };
}

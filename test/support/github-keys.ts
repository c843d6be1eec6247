// A stand-in for GitHub's secret scanning keys endpoint: a Bun.serve on 127.0.0.1 serving EC P-256
// public keys made here, and alert bodies signed with their private keys as GitHub signs them
// (ECDSA with SHA-256 over the raw body, a base64 DER signature).
import { generateKeyPairSync, type KeyObject, sign } from 'node:crypto';

export type GithubKeysServer = Awaited<ReturnType<typeof startGithubKeysServer>>;

/** A signing key: its identifier (as GitHub's, a hex string) and its pair. */
export function newSigningKey(): { id: string; privateKey: KeyObject; publicPem: string } {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const id = Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString('hex');
  return { id, privateKey, publicPem: publicKey.export({ type: 'spki', format: 'pem' }).toString() };
}

export function startGithubKeysServer() {
  const state = {
    keys: [newSigningKey()],
    /** Answer 500 instead of the keys. */
    failing: false,
    requests: 0,
  };
  const server = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    fetch() {
      state.requests++;
      if (state.failing) return new Response('down', { status: 500 });
      return Response.json({
        public_keys: state.keys.map((key, i) => ({
          key_identifier: key.id,
          key: key.publicPem,
          is_current: i === 0,
        })),
      });
    },
  });
  return {
    url: `http://127.0.0.1:${server.port}/meta/public_keys/secret_scanning`,
    state,
    stop: () => server.stop(true),
  };
}

/** The headers GitHub sends with `body`, signed by `key`. */
export function signedHeaders(body: string, key: { id: string; privateKey: KeyObject }) {
  return {
    'content-type': 'application/json',
    'github-public-key-identifier': key.id,
    'github-public-key-signature': sign('sha256', Buffer.from(body), {
      key: key.privateKey,
      dsaEncoding: 'der',
    }).toString('base64'),
  };
}

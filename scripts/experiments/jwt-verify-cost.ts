// What one token verification costs, in process: HS256 with the shared secret beside RS256, ES256 and
// EdDSA through a JWKS endpoint (a Bun.serve on 127.0.0.1, fetched once, then the cached key), and a
// hit of the verified-token cache. Each series verifies distinct pre-signed tokens (so the cache never
// answers) in batches and prints the median and p90 µs per verify over the batches.
// Run under the load lock: flock /tmp/keygate-load.lock bun run scripts/experiments/jwt-verify-cost.ts [--tokens 2000]
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { createJwtAuthority, type JwtAuthority } from '../../src/auth/jwt';
import { flag, percentile, round } from './support/server';

const tokens = flag('tokens', 2000);
const BATCH = 100;
const SECRET = 'jwt-verify-cost-secret-at-least-32-bytes';
const clock = () => Date.now();
const nowS = Math.floor(Date.now() / 1000);

const pairs = {
  RS256: await generateKeyPair('RS256'),
  ES256: await generateKeyPair('ES256'),
  EdDSA: await generateKeyPair('EdDSA'),
};
const keys = await Promise.all(
  Object.entries(pairs).map(async ([alg, pair]) => ({ ...(await exportJWK(pair.publicKey)), kid: alg, alg })),
);
const provider = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: () => Response.json({ keys }) });

async function series(name: string, authority: JwtAuthority, sign: (i: number) => Promise<string>) {
  const signed = await Promise.all(Array.from({ length: tokens }, (_, i) => sign(i)));
  if (!(await authority.verify(await sign(tokens))).ok) throw new Error(`${name}: warm-up token refused`);
  const perVerify: number[] = [];
  for (let start = 0; start < tokens; start += BATCH) {
    const began = performance.now();
    for (let i = start; i < start + BATCH; i++) {
      if (!(await authority.verify(signed[i] as string)).ok) throw new Error(`${name}: token refused`);
    }
    perVerify.push(((performance.now() - began) * 1000) / BATCH);
  }
  // The same token again and again: answered by the verified-token cache.
  const hits: number[] = [];
  for (let batch = 0; batch < tokens / BATCH; batch++) {
    const began = performance.now();
    for (let i = 0; i < BATCH; i++) await authority.verify(signed[0] as string);
    hits.push(((performance.now() - began) * 1000) / BATCH);
  }
  perVerify.sort((a, b) => a - b);
  hits.sort((a, b) => a - b);
  return {
    series: name,
    'verify µs (median)': round(percentile(perVerify, 50)),
    'verify µs (p90)': round(percentile(perVerify, 90)),
    'cache hit µs (median)': round(percentile(hits, 50)),
  };
}

try {
  const claims = (i: number) => ({ sub: String(i), exp: nowS + 3600 });
  const rows = [
    await series('HS256, JWT_SECRET', createJwtAuthority({ secret: SECRET, clock }), (i) =>
      new SignJWT(claims(i)).setProtectedHeader({ alg: 'HS256' }).sign(new TextEncoder().encode(SECRET)),
    ),
  ];
  for (const [alg, pair] of Object.entries(pairs)) {
    const authority = createJwtAuthority({
      jwks: { url: `http://127.0.0.1:${provider.port}/jwks` },
      algorithms: ['RS256', 'ES256', 'EdDSA'],
      clock,
    });
    rows.push(
      await series(`${alg}, JWT_JWKS_URL (cached key)`, authority, (i) =>
        new SignJWT(claims(i)).setProtectedHeader({ alg, kid: alg }).sign(pair.privateKey),
      ),
    );
  }
  console.log(`${tokens} distinct tokens per series, batches of ${BATCH}, Bun ${Bun.version}`);
  console.table(rows);
} finally {
  provider.stop(true);
}

// Which signature algorithms keygate accepts from which key source. With a shared secret it is HS256
// alone; with an identity provider's public keys it is a list of asymmetric algorithms, never an
// HMAC one (a public key used as an HMAC secret is the algorithm-confusion attack) and never `none`.
import { createPublicKey } from 'node:crypto';

export const ASYMMETRIC_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'ES256', 'ES384', 'EdDSA'] as const;
export type AsymmetricAlgorithm = (typeof ASYMMETRIC_ALGORITHMS)[number];
export type JwtAlgorithm = 'HS256' | AsymmetricAlgorithm;

export const DEFAULT_ASYMMETRIC_ALGORITHMS: readonly AsymmetricAlgorithm[] = ['RS256', 'ES256', 'EdDSA'];

/** `JWT_ALGORITHMS`: a comma list of asymmetric algorithms, or the one line saying what is wrong. */
export function parseAlgorithms(value: string): AsymmetricAlgorithm[] | { problem: string } {
  const names = value.split(',').map((name) => name.trim());
  const chosen: AsymmetricAlgorithm[] = [];
  for (const name of names) {
    const known = ASYMMETRIC_ALGORITHMS.find((algorithm) => algorithm === name);
    if (known === undefined) {
      const why = /^hs/i.test(name)
        ? 'an HMAC algorithm is never accepted with a public key'
        : name.toLowerCase() === 'none'
          ? '"none" is never accepted'
          : `"${name.slice(0, 20)}" is not one of them`;
      return {
        problem: `JWT_ALGORITHMS takes a comma list from ${ASYMMETRIC_ALGORITHMS.join(', ')}; ${why}.`,
      };
    }
    if (!chosen.includes(known)) chosen.push(known);
  }
  return chosen;
}

/**
 * The algorithms among `wanted` that this PEM public key can verify, or the one line saying why it
 * cannot be used (not a public key PEM, a private key, or no algorithm in common).
 */
export function algorithmsForPublicKey(
  pem: string,
  wanted: readonly AsymmetricAlgorithm[],
): AsymmetricAlgorithm[] | { problem: string } {
  if (/PRIVATE KEY/.test(pem)) {
    return { problem: 'JWT_PUBLIC_KEY holds a private key; give the public key (BEGIN PUBLIC KEY).' };
  }
  let fits: readonly AsymmetricAlgorithm[];
  try {
    const key = createPublicKey(pem);
    const type = key.asymmetricKeyType;
    const curve = key.asymmetricKeyDetails?.namedCurve;
    if (type === 'rsa') fits = ['RS256', 'RS384', 'RS512', 'PS256'];
    else if (type === 'rsa-pss') fits = ['PS256'];
    else if (type === 'ec' && curve === 'prime256v1') fits = ['ES256'];
    else if (type === 'ec' && curve === 'secp384r1') fits = ['ES384'];
    else if (type === 'ed25519') fits = ['EdDSA'];
    else return { problem: `JWT_PUBLIC_KEY is a ${type ?? 'unknown'} key, which keygate cannot use.` };
  } catch {
    return { problem: 'JWT_PUBLIC_KEY is not a PEM public key (-----BEGIN PUBLIC KEY----- …).' };
  }
  const usable = wanted.filter((algorithm) => fits.includes(algorithm));
  if (usable.length === 0) {
    return {
      problem: `JWT_PUBLIC_KEY can verify ${fits.join(', ')}, none of which JWT_ALGORITHMS (${wanted.join(',')}) allows.`,
    };
  }
  return usable;
}

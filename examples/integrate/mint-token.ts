import { SignJWT } from 'jose';

// A token keygate accepts for `userId`: HS256 with keygate's JWT_SECRET, valid ten minutes.
export function mintToken(userId: number, jwtSecret: string, level?: number): Promise<string> {
  return new SignJWT(level === undefined ? {} : { level })
    .setProtectedHeader({ alg: 'HS256' })
    .setSubject(String(userId))
    .setExpirationTime('10m')
    .sign(new TextEncoder().encode(jwtSecret));
}

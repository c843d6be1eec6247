// A console session for the session tests: a link made through the API, exchanged as the page does,
// and the headers a change from the page carries (cookie, CSRF token, Origin).
import type { TestKeygate } from '../support/keygate';

export const ORIGIN = 'http://localhost';

export function codeOf(url: string): string {
  return url.slice(url.indexOf('#code=') + '#code='.length);
}

export async function exchange(kg: TestKeygate, url: string, origin = ORIGIN) {
  return kg.req('POST', '/console/api/session', { headers: { origin }, body: { code: codeOf(url) } });
}

/** A user's console session (through a token of `sub` at `level`), or the operator's. */
export async function consoleSession(
  kg: TestKeygate,
  who: { sub: number | string; level?: number; sessionSeconds?: number } | { operator: true },
) {
  const link =
    'operator' in who
      ? await kg.req('POST', '/admin/sessions', { headers: await kg.operator(), body: { operator: true } })
      : await kg.req('POST', '/apikeys/sessions/jwt', {
          headers: await kg.bearer(who.sub, who.level),
          ...(who.sessionSeconds === undefined ? {} : { body: { sessionSeconds: who.sessionSeconds } }),
        });
  if (link.status !== 201) throw new Error(`link failed: ${link.status} ${link.text}`);
  const opened = await exchange(kg, link.json.url);
  if (opened.status !== 200) throw new Error(`exchange failed: ${opened.status} ${opened.text}`);
  const cookie = (opened.headers.get('set-cookie') as string).split(';')[0] as string;
  const csrf = opened.json.session.csrfToken as string;
  return {
    link,
    opened,
    cookie,
    csrf,
    /** What a read from the page carries. */
    read: { cookie },
    /** What a change from the page carries. */
    change: { cookie, origin: ORIGIN, 'x-keygate-csrf': csrf },
  };
}

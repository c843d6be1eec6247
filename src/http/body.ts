// Reads a JSON body under keygate's rules, or refuses it with a 400 or 413 naming the problem. A route
// that authenticates its caller reads the body only after that: a request without credentials gets
// 401 even when its body is also bad, and a refused caller's body is never read (Bun skips it).
import { HttpError } from './errors';

export const MAX_BODY_BYTES = 16 * 1024;

const JSON_CONTENT_TYPE = /^application\/json[ \t]*(;|$)/i;
// Stateless between calls (no `stream` option), so one decoder serves every request.
const utf8 = new TextDecoder('utf-8', { fatal: true });

export const BODY_TOO_LARGE = `The body is larger than ${MAX_BODY_BYTES} bytes.`;
/** Sent with a 413: the rest of that body is never read, so Bun closes the connection instead. */
export const CLOSE = { connection: 'close' };

/** The parsed JSON value; rejects with the HttpError that names the body's problem. */
export function readJsonBody(request: Request): Promise<unknown> {
  const contentType = request.headers.get('content-type') ?? '';
  if (!JSON_CONTENT_TYPE.test(contentType)) {
    return Promise.reject(new HttpError(400, 'The Content-Type must be application/json.'));
  }
  // The body is decoded as UTF-8 (RFC 8259, section 8.1): a request that says it is in another charset is
  // refused rather than silently decoded as something it says it is not.
  const charset = charsetOf(contentType);
  if (charset !== undefined && charset.toLowerCase() !== 'utf-8') {
    return Promise.reject(new HttpError(400, 'The Content-Type charset must be utf-8 (or left out).'));
  }
  // With a declared length the body is whole in memory (the edge refused it above the limit already).
  const bytes = request.headers.has('content-length') ? request.bytes() : readChunked(request);
  return bytes.then(jsonOf);
}

/**
 * The body's bytes as sent, for a route that must see them unparsed (a signature over the raw body),
 * up to `maxBytes` (a declared length above it is refused by the edge before this is read).
 */
export async function readBodyBytes(request: Request, maxBytes: number): Promise<Uint8Array> {
  const bytes = request.headers.has('content-length')
    ? await request.bytes()
    : await readChunked(request, maxBytes);
  if (bytes === null || bytes.byteLength > maxBytes) {
    throw new HttpError(413, `The body is larger than ${maxBytes} bytes.`, CLOSE);
  }
  return bytes;
}

function jsonOf(bytes: Uint8Array | null): unknown {
  if (bytes === null || bytes.byteLength > MAX_BODY_BYTES) throw new HttpError(413, BODY_TOO_LARGE, CLOSE);
  return jsonOfBytes(bytes);
}

/** The JSON value of UTF-8 bytes, or the 400 that names what is wrong with them. */
export function jsonOfBytes(bytes: Uint8Array): unknown {
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    throw new HttpError(400, 'The body is not valid UTF-8.');
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new HttpError(
      400,
      text.trim() === '' ? 'The body is empty; send a JSON object.' : 'The body is not valid JSON.',
    );
  }
  // The schema check recurses into the value: thousands of nested arrays overflow the stack there.
  // A flat object or array (every verify body, every create body) nests one level: no need to look.
  if (!isFlat(value) && nestingDepth(text) > MAX_JSON_DEPTH) {
    throw new HttpError(400, `The body nests deeper than ${MAX_JSON_DEPTH} levels; send a flat JSON object.`);
  }
  return value;
}

/** True for a value with no object or array inside it. */
function isFlat(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return true;
  for (const name in value) {
    const member = (value as Record<string, unknown>)[name];
    if (typeof member === 'object' && member !== null) return false;
  }
  return true;
}

const MAX_JSON_DEPTH = 32;

/** The charset parameter of a media type (quotes removed), or undefined when there is none. */
function charsetOf(contentType: string): string | undefined {
  if (!contentType.includes(';')) return undefined;
  for (const parameter of contentType.split(';').slice(1)) {
    const equals = parameter.indexOf('=');
    if (parameter.slice(0, equals).trim().toLowerCase() !== 'charset') continue;
    return parameter
      .slice(equals + 1)
      .trim()
      .replace(/^"(.*)"$/, '$1');
  }
  return undefined;
}

/** The deepest nesting of arrays and objects in valid JSON text. */
function nestingDepth(text: string): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // a backslash escapes the next character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) deepest = Math.max(deepest, ++depth);
    else if (c === 0x5d || c === 0x7d) depth--;
  }
  return deepest;
}

/** A body without Content-Length (chunked), or null once it passes `maxBytes`. */
async function readChunked(request: Request, maxBytes = MAX_BODY_BYTES): Promise<Uint8Array | null> {
  if (!request.body) return new Uint8Array(0);
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of request.body) {
    size += chunk.byteLength;
    if (size > maxBytes) return null;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

// The list cursor: opaque to clients, base64url of "<createdAt>.<id>" of the last item of a page.
// Anything that does not decode to exactly that shape, re-encoded identically, is refused (400).
import { KEY_ID_PATTERN } from './secrets';
import type { ListPosition } from './store';

const POSITION = /^(0|[1-9][0-9]{0,15})\.(kg_[A-Za-z0-9]+)$/;

export function encodeCursor(position: ListPosition): string {
  return Buffer.from(`${position.createdAt}.${position.id}`).toString('base64url');
}

/** The position a cursor names, or undefined when it is not one this service wrote. */
export function decodeCursor(cursor: string): ListPosition | undefined {
  if (!/^[A-Za-z0-9_-]{1,200}$/.test(cursor)) return undefined;
  const text = Buffer.from(cursor, 'base64url').toString('latin1');
  const match = POSITION.exec(text);
  if (!match || Buffer.from(text).toString('base64url') !== cursor) return undefined;
  const createdAt = Number(match[1]);
  const id = match[2] as string;
  if (!Number.isSafeInteger(createdAt) || !KEY_ID_PATTERN.test(id)) return undefined;
  return { createdAt, id };
}

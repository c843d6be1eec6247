// The store's change events, shared by both engines: listeners told of the ids each committed write
// changed (or 'all' when changes may have been missed), so the key cache can evict them.
import type { KeysChangedListener } from '../apikeys/store';

export function keyChanges() {
  const listeners = new Set<KeysChangedListener>();
  return {
    /** Tells every listener, synchronously; an empty list tells nobody. */
    announce(ids: Parameters<KeysChangedListener>[0]): void {
      if (typeof ids === 'object' && 'length' in ids && ids.length === 0) return;
      for (const listener of listeners) listener(ids);
    },
    /** The store's `onKeysChanged`: adds `listener`, returns the function that removes it. */
    onKeysChanged(listener: KeysChangedListener): () => void {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
}

// What SQLite has copied from the WAL into the database file itself: only a checkpoint writes there.
import { readFileSync } from 'node:fs';

/** Whether `text` reaches the database file at `path` within `withinMs` (polled every 10 ms). */
export async function reachesDatabaseFile(path: string, text: string, withinMs = 3000): Promise<boolean> {
  const deadline = performance.now() + withinMs;
  while (performance.now() < deadline) {
    if (readFileSync(path).includes(text)) return true;
    await Bun.sleep(10);
  }
  return false;
}

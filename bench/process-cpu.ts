// The CPU a process has used, for the bench's CPU-per-request figures: on a shared host a server's
// CPU per request moves far less than its requests per second.
import { readFileSync } from 'node:fs';

/** utime + stime of the process so far, in µs (/proc/<pid>/stat fields 14 and 15, in 10 ms ticks). */
export function cpuUs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  return (Number(fields[11]) + Number(fields[12])) * 10_000;
}

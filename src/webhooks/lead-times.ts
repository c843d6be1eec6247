// WEBHOOK_EXPIRING_LEAD's lead times: `<n>s|m|h|d` in a comma list, read into ms and written back.
const MINUTE = 60_000;

/** `7d,1d` → ms, largest first; a bad list throws the sentence config.ts shows. */
export function parseLeadTimes(text: string): number[] {
  const units: Record<string, number> = { s: 1000, m: MINUTE, h: 60 * MINUTE, d: 24 * 60 * MINUTE };
  const leads = text.split(',').map((part) => {
    const match = /^([1-9][0-9]{0,5})([smhd])$/.exec(part.trim());
    if (!match) throw new Error(`"${part.trim().slice(0, 20)}" is not <n>s, <n>m, <n>h or <n>d`);
    return Number(match[1]) * (units[match[2] as string] as number);
  });
  return [...new Set(leads)].sort((a, b) => b - a);
}

export const leadText = (ms: number) =>
  ms % 86_400_000 === 0
    ? `${ms / 86_400_000}d`
    : ms % 3_600_000 === 0
      ? `${ms / 3_600_000}h`
      : ms % MINUTE === 0
        ? `${ms / MINUTE}m`
        : `${ms / 1000}s`;

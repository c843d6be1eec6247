// Usage as inline SVG drawn here (no chart library): a 30-day sparkline per key, and one key's (or a
// user's) usage by hour or by day as stacked bars: valid below, refused above.
import type { Bucket } from './api';

const HOUR = 3_600_000;
const DAY = 86_400_000;

/** Every slot from `since` to `until`, zeros where keygate has no bucket (it sends only non-zero ones). */
export function slots(buckets: Bucket[], granularity: 'hour' | 'day', count: number, until = Date.now()) {
  const size = granularity === 'hour' ? HOUR : DAY;
  const last = Math.floor(until / size) * size;
  const byStart = new Map(buckets.map((bucket) => [Date.parse(bucket.start), bucket]));
  return Array.from({ length: count }, (_, index) => {
    const start = last - (count - 1 - index) * size;
    const bucket = byStart.get(start);
    return {
      start,
      valid: bucket?.valid ?? 0,
      refused: bucket ? bucket.rateLimited + bucket.usageExceeded + bucket.denied : 0,
    };
  });
}

export function Sparkline({ buckets }: { buckets: Bucket[] | undefined }) {
  if (buckets === undefined) return <span class="muted">…</span>;
  const days = slots(buckets, 'day', 30);
  const total = days.reduce((sum, day) => sum + day.valid, 0);
  const top = Math.max(1, ...days.map((day) => day.valid));
  const points = days.map((day, index) => `${index * 4},${22 - (day.valid / top) * 20}`).join(' ');
  return (
    <svg
      class="sparkline"
      viewBox="0 0 116 24"
      width="116"
      height="24"
      role="img"
      aria-label={`${total} valid verifications in the last 30 days`}
    >
      <polyline points={points} fill="none" stroke="currentColor" stroke-width="1.5" />
    </svg>
  );
}

export function UsageChart({ buckets, granularity }: { buckets: Bucket[]; granularity: 'hour' | 'day' }) {
  const data = slots(buckets, granularity, granularity === 'hour' ? 24 : 30);
  const top = Math.max(1, ...data.map((slot) => slot.valid + slot.refused));
  const width = 600;
  const height = 180;
  const bar = width / data.length;
  const valid = data.reduce((sum, slot) => sum + slot.valid, 0);
  const refused = data.reduce((sum, slot) => sum + slot.refused, 0);
  const span = granularity === 'hour' ? 'the last 24 hours' : 'the last 30 days';
  const label = (start: number) =>
    granularity === 'hour'
      ? new Date(start).toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit' })
      : new Date(start).toLocaleDateString(undefined, { month: 'short', day: 'numeric' });
  return (
    <figure class="chart">
      <svg
        viewBox={`0 0 ${width} ${height + 20}`}
        role="img"
        aria-label={`${valid} valid and ${refused} refused verifications in ${span}, by ${granularity}`}
      >
        {data.map((slot, index) => {
          const validHeight = (slot.valid / top) * height;
          const refusedHeight = (slot.refused / top) * height;
          return (
            <g key={slot.start}>
              <title>{`${label(slot.start)}: ${slot.valid} valid, ${slot.refused} refused`}</title>
              <rect
                class="valid"
                x={index * bar + 1}
                width={bar - 2}
                y={height - validHeight}
                height={validHeight}
              />
              <rect
                class="refused"
                x={index * bar + 1}
                width={bar - 2}
                y={height - validHeight - refusedHeight}
                height={refusedHeight}
              />
            </g>
          );
        })}
        <line x1="0" x2={width} y1={height} y2={height} class="axis" />
        {(
          [
            [0, 'start', 0],
            [Math.floor(data.length / 2), 'middle', bar / 2],
            [data.length - 1, 'end', bar],
          ] as const
        ).map(([index, anchor, shift]) => (
          <text key={index} x={index * bar + shift} y={height + 15} class="tick" text-anchor={anchor}>
            {label((data[index] as { start: number }).start)}
          </text>
        ))}
      </svg>
      <figcaption>
        <span class="swatch valid" /> {valid} valid · <span class="swatch refused" /> {refused} refused,{' '}
        {span}
      </figcaption>
    </figure>
  );
}

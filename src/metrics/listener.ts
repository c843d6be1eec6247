// The second listener (METRICS_PORT, METRICS_HOST): GET /metrics in the Prometheus text format and
// nothing else, apart from the API so that /metrics is never reachable where the API is published.
import { errorResponse } from '../http/errors';
import type { Metrics } from './metrics';

export type MetricsListener = { url: URL; stop(): Promise<void> };

export function startMetricsListener(options: {
  host: string;
  port: number;
  metrics: Metrics;
}): MetricsListener {
  const { metrics } = options;
  const server = Bun.serve({
    hostname: options.host,
    port: options.port,
    development: false,
    idleTimeout: 30,
    reusePort: false, // a busy port must fail to start, as for the API listener
    async fetch(request) {
      const url = new URL(request.url);
      if (url.pathname !== '/metrics') {
        return errorResponse(
          404,
          `There is no ${url.pathname.slice(0, 100)} here; metrics are at GET /metrics.`,
        );
      }
      if (request.method !== 'GET' && request.method !== 'HEAD') {
        return errorResponse(405, 'Only GET /metrics is served here.', { allow: 'GET, HEAD' });
      }
      return new Response(await metrics.exposition(), {
        headers: { 'content-type': metrics.contentType, 'cache-control': 'no-store' },
      });
    },
  });
  return {
    url: new URL('/metrics', server.url),
    async stop() {
      await server.stop(true);
    },
  };
}

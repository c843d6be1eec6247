// `keygate healthcheck`: for Docker's HEALTHCHECK, from inside the container.
import type { Config } from '../config';

export async function healthcheck(config: Config): Promise<number> {
  const host = ['0.0.0.0', '::', '[::]'].includes(config.host) ? '127.0.0.1' : config.host;
  const url = `http://${host.includes(':') && !host.startsWith('[') ? `[${host}]` : host}:${config.port}${config.basePath}/health`;
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(3000) });
    if (response.ok) return 0;
    process.stderr.write(`keygate: ${url} answered ${response.status}\n`);
  } catch (error) {
    process.stderr.write(`keygate: ${url} did not answer: ${(error as Error).message}\n`);
  }
  return 1;
}

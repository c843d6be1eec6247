// What keygate owes every answer, for the floors that measure the least an endpoint can cost while
// keeping those promises: the request's JSON log line with its request id (the client's id when it
// is well formed, else a UUID), Cache-Control: no-store, and the headers the README promises
// (X-Request-Id, X-Content-Type-Options, Keep-Alive). Log lines are buffered and written once a turn.

const REQUEST_ID = /^[A-Za-z0-9._-]{1,64}$/;
let logLines = '';
let flushScheduled = false;

export function requestId(request: Request): string {
  const given = request.headers.get('x-request-id');
  return given !== null && REQUEST_ID.test(given) ? given : crypto.randomUUID();
}

/** Queues one log line (a JSON object's text, no newline) for this turn's write to stdout. */
export function logLine(json: string): void {
  logLines += `${json}\n`;
  if (flushScheduled) return;
  flushScheduled = true;
  setImmediate(() => {
    flushScheduled = false;
    process.stdout.write(logLines);
    logLines = '';
  });
}

/** The answer with the headers keygate promises, and its request line. */
export function answered(
  request: Request,
  id: string,
  started: number,
  status: number,
  body: unknown,
  extra: Record<string, string> = {},
): Response {
  const response = new Response(JSON.stringify(body), {
    status,
    headers: {
      'content-type': 'application/json',
      'cache-control': 'no-store',
      'x-request-id': id,
      'x-content-type-options': 'nosniff',
      'keep-alive': 'timeout=5',
      ...extra,
    },
  });
  const url = request.url;
  const pathStart = url.indexOf('/', url.indexOf('//') + 2);
  const ms = performance.now() - started;
  logLine(
    `{"time":"${new Date().toISOString()}","level":"info","msg":"request","requestId":"${id}","method":"${request.method}","path":${JSON.stringify(url.slice(pathStart))},"status":${status},"ms":${Math.round(ms * 100) / 100}}`,
  );
  return response;
}

const JSON_TYPE = /^application\/json[ \t]*(;|$)/i;
const utf8 = new TextDecoder('utf-8', { fatal: true });

/** A JSON body as keygate reads one: its Content-Type checked, its bytes decoded as strict UTF-8. */
export async function jsonBody(request: Request): Promise<unknown> {
  if (!JSON_TYPE.test(request.headers.get('content-type') ?? '')) return undefined;
  return JSON.parse(utf8.decode(await request.bytes()));
}

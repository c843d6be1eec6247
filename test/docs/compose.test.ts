// compose.yaml and examples/compose/nginx.conf: the rules a user relies on without running them
// (scripts/experiments/compose-smoke.sh runs them for real, by hand). Ports on 127.0.0.1 only, the three
// replicas configured alike on PostgreSQL, nginx balancing over exactly those replicas, and the
// forward-auth example guarded.
import { describe, expect, it } from 'bun:test';
import { join } from 'node:path';
import { loadConfig } from '../../src/config';

const root = join(import.meta.dir, '..', '..');
const read = (path: string) => Bun.file(join(root, path)).text();

type Service = {
  image?: string;
  build?: string;
  ports?: string[];
  environment?: Record<string, string>;
  volumes?: string[];
  depends_on?: Record<string, { condition: string }>;
  healthcheck?: { test: string[] };
};
type Compose = { services: Record<string, Service>; volumes: Record<string, unknown> };

const compose = Bun.YAML.parse(await read('compose.yaml')) as Compose;
const nginxConf = await read('examples/compose/nginx.conf');
const replicas = Object.keys(compose.services).filter((name) => name.startsWith('keygate-'));

/** `${NAME:-default}` → default, as compose does when NAME is unset. */
const withDefaults = (value: string) => value.replace(/\$\{[A-Z0-9_]+:-([^}]*)\}/g, '$1');

describe('compose.yaml', () => {
  it('has PostgreSQL, three keygate replicas and nginx', () => {
    expect(Object.keys(compose.services).sort()).toEqual([
      'keygate-1',
      'keygate-2',
      'keygate-3',
      'nginx',
      'postgres',
    ]);
  });

  it('publishes every port on 127.0.0.1 only, and PostgreSQL not at all', () => {
    const published = Object.values(compose.services).flatMap((service) => service.ports ?? []);
    expect(published.length).toBe(4);
    for (const port of published) expect(port).toMatch(/^127\.0\.0\.1:/);
    expect(compose.services.postgres?.ports).toBeUndefined();
  });

  it('configures the replicas alike: one image, one environment, a health check, PostgreSQL healthy first', () => {
    const [first, ...rest] = replicas.map((name) => compose.services[name] as Service);
    for (const replica of rest) {
      expect(replica.environment).toEqual(first?.environment);
      expect(replica.image).toBe(first?.image);
    }
    for (const replica of [first, ...rest]) {
      expect(replica?.build).toBe('.');
      expect(replica?.healthcheck?.test).toEqual(['CMD', 'keygate', 'healthcheck']);
      expect(replica?.depends_on).toEqual({ postgres: { condition: 'service_healthy' } });
    }
  });

  it('the replicas environment, with its defaults, is a valid keygate configuration on PostgreSQL', () => {
    const environment = compose.services['keygate-1']?.environment ?? {};
    const env = Object.fromEntries(
      Object.entries(environment).map(([name, value]) => [name, withDefaults(value)]),
    );
    const config = loadConfig(env);
    const { database } = config;
    if (database.engine !== 'postgres') throw new Error(`expected PostgreSQL, got ${database.engine}`);
    expect(database.url).toStartWith('postgres://keygate:');
    expect(new URL(database.url).hostname).toBe('postgres');
    expect(config.jwtKeySource).toBe('secret');
    // The default secret is a placeholder that says so; docs/replicas.md says to replace it.
    expect(config.jwtSecret).toContain('change-me');
    expect(environment.JWT_SECRET).toStartWith('${JWT_SECRET:-');
  });

  it('keeps PostgreSQL data in the named volume, with a pg_isready health check', () => {
    const postgres = compose.services.postgres as Service;
    expect(postgres.volumes).toEqual(['pgdata:/var/lib/postgresql/data']);
    expect(Object.keys(compose.volumes)).toEqual(['pgdata']);
    expect(postgres.healthcheck?.test.slice(0, 2)).toEqual(['CMD', 'pg_isready']);
  });

  it('starts nginx after every replica is healthy, with its own health check and the example config', () => {
    const nginx = compose.services.nginx as Service;
    expect(Object.keys(nginx.depends_on ?? {}).sort()).toEqual(replicas.sort());
    expect(nginx.healthcheck?.test[0]).toBe('CMD-SHELL');
    expect(nginx.healthcheck?.test[1]).toContain('/nginx-health');
    expect(nginx.volumes).toEqual(['./examples/compose/nginx.conf:/etc/nginx/conf.d/default.conf:ro']);
  });
});

describe('examples/compose/nginx.conf', () => {
  it('balances over exactly the replicas compose.yaml defines', () => {
    const upstream = nginxConf.match(/upstream keygate \{([^}]*)\}/)?.[1] ?? '';
    const servers = [...upstream.matchAll(/server ([^;]+);/g)].map((match) => match[1]);
    expect(servers).toEqual(replicas.map((name) => `${name}:3000`));
  });

  it('guards /app/ with auth_request through an internal forward-auth location', () => {
    const app = nginxConf.match(/location \/app\/ \{([^}]*)\}/)?.[1] ?? '';
    expect(app).toContain('auth_request /_keygate/0;');
    // `return` runs before auth_request (rewrite phase), so the guarded location must proxy instead.
    expect(app).not.toContain('return');
    const subrequest = nginxConf.match(/location ~ \^\/_keygate\/\(\[0-8\]\)\$ \{([^}]*)\}/)?.[1] ?? '';
    expect(subrequest).toContain('internal;');
    expect(subrequest).toContain('proxy_pass http://keygate/forward-auth?minLevel=$1;');
    expect(subrequest).toContain('proxy_pass_request_body off;');
  });

  it('gives /app/ keygate’s 429 back, as the tested nginx configuration does', async () => {
    const app = nginxConf.match(/location \/app\/ \{([^}]*)\}/)?.[1] ?? '';
    expect(app).toContain('error_page 500 = @keygate_refused;');
    // The named location is the one scripts/ci/proxy-smoke.sh runs through real nginx, verbatim.
    const refused = (conf: string) =>
      conf.match(/\n {4}location @keygate_refused \{\n[\s\S]*?\n {4}\}\n/)?.[0];
    const tested = refused(await read('examples/proxies/nginx.conf'));
    expect(tested).toBeString();
    expect(refused(nginxConf)).toBe(tested);
  });

  it('logs no request headers (credentials travel in them)', () => {
    const format = nginxConf.match(/log_format keygate ([^;]*);/)?.[1] ?? '';
    expect(format).not.toMatch(/\$http_|\$request\b|\$args|\$query_string/);
  });
});

describe('docs/replicas.md, podman-compose', () => {
  // podman-compose 1.0.3 names the project after the directory, not compose.yaml's `name:`, so the
  // container names the commands use hold only with `-p <name>`.
  it('gives every podman-compose command the project name the podman commands use', async () => {
    const replicasDoc = await read('docs/replicas.md');
    const commands = [...replicasDoc.matchAll(/^podman-compose (.*)$/gm)].map((match) => match[1] ?? '');
    expect(commands.length).toBeGreaterThanOrEqual(3);
    for (const command of commands) expect(command).toStartWith('-p keygate ');
    const containers = [...replicasDoc.matchAll(/podman exec (\S+)/g)].map((match) => match[1]);
    expect(containers.length).toBeGreaterThanOrEqual(2);
    for (const container of containers) {
      const service = container?.match(/^keygate_(.+)_1$/)?.[1] ?? '';
      expect(Object.keys(compose.services)).toContain(service);
    }
  });

  it('does not promise podman-compose a --wait it does not have', async () => {
    const replicasDoc = await read('docs/replicas.md');
    expect(replicasDoc).not.toMatch(/^podman-compose .*--wait/m);
  });
});

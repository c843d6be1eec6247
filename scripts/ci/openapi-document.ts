// Prints the OpenAPI document keygate serves at /openapi/json (for `redocly lint` in .ci/run).
// Usage: bun scripts/ci/openapi-document.ts [BASE_PATH]
import { loadConfig } from '../../src/config';
import { createLogger } from '../../src/core/log';
import { createKeygate } from '../../src/keygate';

const secret = 'openapi-document-secret-0123456789abcdef';
const config = loadConfig({ DATABASE_URL: ':memory:', JWT_SECRET: secret, BASE_PATH: process.argv[2] ?? '' });
const keygate = await createKeygate(config, { jwtSecret: secret, logger: createLogger('silent') });
const response = await keygate.handle(new Request(`http://localhost${config.basePath}/openapi/json`));
if (response.status !== 200) throw new Error(`/openapi/json answered ${response.status}`);
process.stdout.write(`${JSON.stringify(await response.json(), null, 2)}\n`);
await keygate.close();

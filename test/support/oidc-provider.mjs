// A real OpenID provider for tests, run by Node: oidc-provider on 127.0.0.1 and a free port, with two
// clients that use the client-credentials grant to get JWT access tokens for one resource (resource
// indicators), signed with an RSA key of its own, published at its jwks_uri: `backend` (scope `api`)
// and `operator`, which may also ask for keygate's admin scope. It prints one JSON line ({issuer,
// jwksUri, tokenUrl, resource, clientId, clientSecret, operatorClientId, operatorClientSecret}) once it
// listens, and runs until it is signalled.
import { createServer } from 'node:http';
import { exportJWK, generateKeyPair } from 'jose';
import Provider from 'oidc-provider';

const RESOURCE = 'https://keygate.test/api';
const CLIENT_ID = 'backend';
const CLIENT_SECRET = 'backend-client-secret-for-tests-only';
const OPERATOR_CLIENT_ID = 'operator';
const OPERATOR_CLIENT_SECRET = 'operator-client-secret-for-tests-only';
const ADMIN_SCOPE = 'keygate:admin';

const { privateKey } = await generateKeyPair('RS256', { extractable: true });
const signingKey = { ...(await exportJWK(privateKey)), kid: 'test-rs256', alg: 'RS256', use: 'sig' };

const server = createServer();
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address();
  const issuer = `http://127.0.0.1:${port}`;
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: CLIENT_ID,
        client_secret: CLIENT_SECRET,
        grant_types: ['client_credentials'],
        redirect_uris: [],
        response_types: [],
        scope: 'api',
      },
      {
        client_id: OPERATOR_CLIENT_ID,
        client_secret: OPERATOR_CLIENT_SECRET,
        grant_types: ['client_credentials'],
        redirect_uris: [],
        response_types: [],
        scope: `api ${ADMIN_SCOPE}`,
      },
    ],
    scopes: ['api', ADMIN_SCOPE],
    jwks: { keys: [signingKey] },
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => RESOURCE,
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx, resource) => {
          if (resource !== RESOURCE) throw new Error(`unknown resource ${resource}`);
          return {
            scope: `api ${ADMIN_SCOPE}`,
            audience: RESOURCE,
            accessTokenFormat: 'jwt',
            jwt: { sign: { alg: 'RS256' } },
          };
        },
      },
    },
  });
  server.on('request', provider.callback());
  process.stdout.write(
    `${JSON.stringify({
      issuer,
      jwksUri: `${issuer}/jwks`,
      tokenUrl: `${issuer}/token`,
      resource: RESOURCE,
      clientId: CLIENT_ID,
      clientSecret: CLIENT_SECRET,
      operatorClientId: OPERATOR_CLIENT_ID,
      operatorClientSecret: OPERATOR_CLIENT_SECRET,
    })}\n`,
  );
});

for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => server.close(() => process.exit(0)));

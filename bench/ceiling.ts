// The ceiling: a bare Elysia app (the same version keygate ships) that validates the same create body
// and answers at once. keygate's figures are read as a fraction of what this does on the same core.
import { Elysia, t } from 'elysia';

const CreateBody = t.Object(
  {
    name: t.String({ minLength: 1, maxLength: 256 }),
    level: t.Number({ minimum: 0, maximum: 8 }),
    expiresIn: t.Number({ minimum: 1 }),
  },
  { additionalProperties: false },
);

const port = Number(process.env.PORT ?? 3100);

new Elysia({ normalize: false })
  .post(
    '/apikeys/jwt',
    ({ body, set }) => {
      set.status = 201;
      return { result: 'success', name: body.name };
    },
    { body: CreateBody },
  )
  .get('/health', () => {})
  .listen({ hostname: '127.0.0.1', port });

// The operator's webhook routes (/admin/webhooks): thin handlers over the webhook service, with
// the admin scheme's checks in the other routes' order: the operator's credential (the scheme's
// derive) → the body → 404. Bodies are read after authentication and worded as one sentence.
import { Elysia, t } from 'elysia';
import type { operatorAuth } from '../admin/operator-auth';
import { ErrorResponse, WholeNumber } from '../apikeys/model';
import { READ_BODY_IN_TRANSFORM } from '../apikeys/routes';
import { readJsonBody } from '../http/body';
import { HttpError } from '../http/errors';
import { ALL_EVENTS, EVENT_TYPES } from './event-names';
import { createBodyProblem, updateBodyProblem, type WebhookService } from './service';

const EventName = t.String({
  enum: [...EVENT_TYPES, ALL_EVENTS],
  description: 'An event name, or "*" for all.',
});

export const WebhookEndpoint = t.Object(
  {
    id: t.String(),
    url: t.String({ description: 'https (http only with WEBHOOK_ALLOW_PRIVATE=true).' }),
    events: t.Array(EventName, { minItems: 1 }),
    description: t.Union([t.String(), t.Null()]),
    enabled: t.Boolean(),
    createdAt: t.String({ format: 'date-time' }),
  },
  { title: 'WebhookEndpoint' },
);
export const CreateWebhookRequest = t.Object(
  {
    url: t.String(),
    events: t.Array(EventName, { minItems: 1 }),
    description: t.Optional(t.String({ maxLength: 500 })),
  },
  { additionalProperties: false, title: 'CreateWebhookRequest' },
);
export const UpdateWebhookRequest = t.Object(
  {
    url: t.Optional(t.String()),
    events: t.Optional(t.Array(EventName, { minItems: 1 })),
    description: t.Optional(t.Union([t.String({ maxLength: 500 }), t.Null()])),
    enabled: t.Optional(t.Boolean()),
  },
  { additionalProperties: false, title: 'UpdateWebhookRequest' },
);
export const WebhookCreatedResponse = t.Object(
  {
    result: t.Literal('success'),
    endpoint: WebhookEndpoint,
    secret: t.String({ description: '`whsec_…`: shown here only.' }),
  },
  { title: 'WebhookCreatedResponse' },
);
export const WebhookResponse = t.Object(
  { result: t.Literal('success'), endpoint: WebhookEndpoint },
  { title: 'WebhookResponse' },
);
export const WebhookListResponse = t.Object(
  { result: t.Literal('success'), endpoints: t.Array(WebhookEndpoint) },
  { title: 'WebhookListResponse' },
);
export const WebhookSecretResponse = t.Object(
  { result: t.Literal('success'), secret: t.String({ description: 'The new `whsec_…`, shown here only.' }) },
  { title: 'WebhookSecretResponse' },
);
export const WebhookMessage = t.Object(
  {
    id: t.String({ description: 'Its webhook-id.' }),
    type: t.String(),
    createdAt: t.String({ format: 'date-time' }),
    status: t.Union([t.Literal('pending'), t.Literal('delivered'), t.Literal('failed')]),
    attempts: t.Array(
      t.Object({
        at: t.String({ format: 'date-time' }),
        status: t.Union([WholeNumber(), t.Null()], {
          description: 'The HTTP status, or null when there was no answer.',
        }),
        error: t.Union([t.String(), t.Null()]),
      }),
    ),
  },
  { title: 'WebhookMessage' },
);
export const WebhookMessagesResponse = t.Object(
  { result: t.Literal('success'), messages: t.Array(WebhookMessage) },
  { title: 'WebhookMessagesResponse' },
);
export const AcceptedResponse = t.Object({ result: t.Literal('success') }, { title: 'AcceptedResponse' });

const ID_PARAMS = t.Object({ id: t.String({ description: 'The endpoint id.' }) });
const MESSAGE_PARAMS = t.Object({
  id: t.String({ description: 'The endpoint id.' }),
  messageId: t.String({ description: 'The message’s webhook-id.' }),
});
const errors = {
  400: ErrorResponse,
  401: ErrorResponse,
  403: ErrorResponse,
  404: ErrorResponse,
  503: ErrorResponse,
};

const describe = (summary: string, description: string) => ({
  summary,
  description: `Needs a token whose scope holds JWT_ADMIN_SCOPE. ${description}`,
  security: [{ bearer: [] }],
  tags: ['Webhooks'],
});

/** A body read after authentication, its problem a 400. */
const bodyChecked = (problemOf: (body: unknown) => string | undefined) => ({
  parse: READ_BODY_IN_TRANSFORM,
  transform: async (context: { request: Request; body: unknown }) => {
    const body = await readJsonBody(context.request);
    const problem = problemOf(body);
    if (problem !== undefined) throw new HttpError(400, problem);
    context.body = body;
  },
});

export function webhookRoutes({
  auth,
  webhooks,
  allowPrivate,
}: {
  auth: ReturnType<typeof operatorAuth>;
  webhooks: WebhookService;
  allowPrivate: boolean;
}) {
  return new Elysia()
    .model({
      WebhookEndpoint,
      CreateWebhookRequest,
      UpdateWebhookRequest,
      WebhookCreatedResponse,
      WebhookResponse,
      WebhookListResponse,
      WebhookSecretResponse,
      WebhookMessage,
      WebhookMessagesResponse,
      AcceptedResponse,
    })
    .use(auth)
    .post(
      '/admin/webhooks',
      async ({ body, set }) => {
        const created = await webhooks.create(body);
        set.status = 201;
        set.headers['cache-control'] = 'no-store';
        return { result: 'success' as const, ...created };
      },
      {
        ...bodyChecked((body) => createBodyProblem(body, allowPrivate)),
        body: 'CreateWebhookRequest',
        response: { 201: 'WebhookCreatedResponse', ...errors, 413: ErrorResponse },
        detail: describe(
          'Create a webhook endpoint',
          'Its signing secret is in this response only. events: names or ["*"]. An http URL, or one whose host is a private address, is refused unless WEBHOOK_ALLOW_PRIVATE=true.',
        ),
      },
    )
    .get('/admin/webhooks', async () => ({ result: 'success' as const, endpoints: await webhooks.list() }), {
      response: { 200: 'WebhookListResponse', ...errors },
      detail: describe('List webhook endpoints', 'Oldest first; never their secrets.'),
    })
    .get(
      '/admin/webhooks/:id',
      async ({ params }) => ({ result: 'success' as const, endpoint: await webhooks.get(params.id) }),
      {
        params: ID_PARAMS,
        response: { 200: 'WebhookResponse', ...errors },
        detail: describe('Get a webhook endpoint', '404 for an unknown id.'),
      },
    )
    .patch(
      '/admin/webhooks/:id',
      async ({ params, body }) => ({
        result: 'success' as const,
        endpoint: await webhooks.update(params.id, body),
      }),
      {
        params: ID_PARAMS,
        ...bodyChecked((body) => updateBodyProblem(body, allowPrivate)),
        body: 'UpdateWebhookRequest',
        response: { 200: 'WebhookResponse', ...errors, 413: ErrorResponse },
        detail: describe(
          'Update a webhook endpoint',
          'Any of url, events, description (null removes it), enabled.',
        ),
      },
    )
    .delete(
      '/admin/webhooks/:id',
      async ({ params, set }) => {
        await webhooks.remove(params.id);
        set.status = 204;
      },
      {
        params: ID_PARAMS,
        response: { 204: t.Void(), ...errors },
        detail: describe('Delete a webhook endpoint', 'Its messages not yet delivered are dropped.'),
      },
    )
    .post(
      '/admin/webhooks/:id/secret',
      async ({ params, set }) => {
        const secret = await webhooks.rotateSecret(params.id);
        set.status = 201;
        set.headers['cache-control'] = 'no-store';
        return { result: 'success' as const, secret };
      },
      {
        params: ID_PARAMS,
        response: { 201: 'WebhookSecretResponse', ...errors },
        detail: describe(
          'Rotate a webhook endpoint’s secret',
          'For 24 hours the webhook-signature header carries both signatures, the new secret’s and the old one’s.',
        ),
      },
    )
    .get(
      '/admin/webhooks/:id/messages',
      async ({ params }) => ({ result: 'success' as const, messages: await webhooks.messages(params.id) }),
      {
        params: ID_PARAMS,
        response: { 200: 'WebhookMessagesResponse', ...errors },
        detail: describe(
          'List an endpoint’s messages',
          'The latest 100, latest first, each with its attempts.',
        ),
      },
    )
    .post(
      '/admin/webhooks/:id/messages/:messageId/retry',
      async ({ params, set }) => {
        await webhooks.retry(params.id, params.messageId);
        set.status = 202;
        return { result: 'success' as const };
      },
      {
        params: MESSAGE_PARAMS,
        response: { 202: 'AcceptedResponse', ...errors },
        detail: describe('Send a message again', 'It is due at once, whatever its status.'),
      },
    );
}

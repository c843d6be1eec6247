// The operator's webhook endpoints (§24): the list, create (its signing secret shown once), edit,
// disable and enable, rotate the signing secret, delete, and an endpoint's messages with their
// attempts and a retry. Thin: the server checks URLs and event names; a refusal shows its sentence.
import { useEffect, useState } from 'preact/hooks';
import { ALL_EVENTS, EVENT_TYPES } from '../../src/webhooks/event-names';
import { call } from './api';
import { toTheSecond, when } from './format';
import { attempt, Dialog, FormButtons, SecretDialog } from './ui';

type Endpoint = {
  id: string;
  url: string;
  events: string[];
  description: string | null;
  enabled: boolean;
  createdAt: string;
};

type Attempt = { at: string; status: number | null; error: string | null };
type Message = {
  id: string;
  type: string;
  createdAt: string;
  status: 'pending' | 'delivered' | 'failed';
  attempts: Attempt[];
};

type Action =
  | { kind: 'create' }
  | { kind: 'edit'; endpoint: Endpoint }
  | { kind: 'rotate'; endpoint: Endpoint }
  | { kind: 'delete'; endpoint: Endpoint }
  | { kind: 'secret'; secret: string; rotated: boolean };

const endpointPath = (id: string, rest = '') => `admin/webhooks/${encodeURIComponent(id)}${rest}`;

/** How an endpoint is named on its buttons and dialogs: its description, else its URL. */
const nameOf = (endpoint: Endpoint) => endpoint.description || endpoint.url;

export function WebhooksPanel() {
  const [endpoints, setEndpoints] = useState<Endpoint[] | undefined>();
  const [failed, setFailed] = useState<string | undefined>();
  const [version, setVersion] = useState(0);
  const [action, setAction] = useState<Action | undefined>();
  const [showing, setShowing] = useState<string | undefined>();
  const reload = () => setVersion((value) => value + 1);

  useEffect(() => {
    let live = true;
    call<{ endpoints: Endpoint[] }>('GET', 'admin/webhooks').then(
      (answer) => {
        if (!live) return;
        setEndpoints(answer.endpoints);
        setFailed(undefined);
      },
      (error: Error) => live && setFailed(error.message),
    );
    return () => {
      live = false;
    };
  }, [version]);

  const toggle = (endpoint: Endpoint) =>
    attempt(
      () => call('PATCH', endpointPath(endpoint.id), { enabled: !endpoint.enabled }),
      () => `Endpoint ${nameOf(endpoint)} ${endpoint.enabled ? 'disabled' : 'enabled'}.`,
    ).then(reload);

  const shown = endpoints?.find((endpoint) => endpoint.id === showing);
  return (
    <>
      <section class="panel" aria-labelledby="webhooks-heading">
        <div class="panel-head">
          <h2 id="webhooks-heading">Webhook endpoints</h2>
          <button type="button" class="primary" onClick={() => setAction({ kind: 'create' })}>
            Add endpoint
          </button>
        </div>
        <p class="muted">
          Each endpoint receives the events it subscribes to, signed with its own secret (Standard Webhooks).
        </p>
        {failed && (
          <p role="alert" class="failed" data-testid="webhooks-failed">
            {failed}
          </p>
        )}
        {endpoints === undefined && !failed && <p class="muted">Loading the endpoints…</p>}
        {endpoints?.length === 0 && <p class="empty">No webhook endpoints yet.</p>}
        {endpoints && endpoints.length > 0 && (
          <table class="results">
            <caption class="visually-hidden">Webhook endpoints</caption>
            <thead>
              <tr>
                <th scope="col">URL</th>
                <th scope="col">Events</th>
                <th scope="col">Description</th>
                <th scope="col">Status</th>
                <th scope="col">Created</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {endpoints.map((endpoint) => (
                <tr key={endpoint.id} data-endpoint={endpoint.id}>
                  <th scope="row" data-label="URL" class="url">
                    {endpoint.url}
                  </th>
                  <td data-label="Events">
                    {endpoint.events.includes(ALL_EVENTS) ? 'all' : endpoint.events.join(' ')}
                  </td>
                  <td data-label="Description">{endpoint.description ?? ''}</td>
                  <td data-label="Status">
                    <span class={`status ${endpoint.enabled ? 'active' : 'disabled'}`}>
                      {endpoint.enabled ? 'enabled' : 'disabled'}
                    </span>
                  </td>
                  <td data-label="Created">{when(endpoint.createdAt)}</td>
                  <td data-label="Actions" class="actions">
                    <button
                      type="button"
                      aria-pressed={showing === endpoint.id}
                      onClick={() => setShowing(showing === endpoint.id ? undefined : endpoint.id)}
                      aria-label={`Messages of ${nameOf(endpoint)}`}
                    >
                      Messages
                    </button>
                    <button
                      type="button"
                      onClick={() => setAction({ kind: 'edit', endpoint })}
                      aria-label={`Edit ${nameOf(endpoint)}`}
                    >
                      Edit
                    </button>
                    <button
                      type="button"
                      onClick={() => toggle(endpoint)}
                      aria-label={`${endpoint.enabled ? 'Disable' : 'Enable'} ${nameOf(endpoint)}`}
                    >
                      {endpoint.enabled ? 'Disable' : 'Enable'}
                    </button>
                    <button
                      type="button"
                      onClick={() => setAction({ kind: 'rotate', endpoint })}
                      aria-label={`Rotate the secret of ${nameOf(endpoint)}`}
                    >
                      Rotate secret
                    </button>
                    <button
                      type="button"
                      class="danger"
                      onClick={() => setAction({ kind: 'delete', endpoint })}
                      aria-label={`Delete ${nameOf(endpoint)}`}
                    >
                      Delete
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </section>
      {shown && <MessagesPanel key={shown.id} endpoint={shown} />}
      {(action?.kind === 'create' || action?.kind === 'edit') && (
        <EndpointDialog
          endpoint={action.kind === 'edit' ? action.endpoint : undefined}
          onClose={() => setAction(undefined)}
          onSaved={(secret) => {
            setAction(secret === undefined ? undefined : { kind: 'secret', secret, rotated: false });
            reload();
          }}
        />
      )}
      {action?.kind === 'rotate' && (
        <RotateSecretDialog
          endpoint={action.endpoint}
          onClose={() => setAction(undefined)}
          onRotated={(secret) => setAction({ kind: 'secret', secret, rotated: true })}
        />
      )}
      {action?.kind === 'delete' && (
        <DeleteEndpointDialog
          endpoint={action.endpoint}
          onClose={() => setAction(undefined)}
          onDeleted={() => {
            setAction(undefined);
            if (showing === action.endpoint.id) setShowing(undefined);
            reload();
          }}
        />
      )}
      {action?.kind === 'secret' && (
        <SecretDialog
          title={action.rotated ? 'The endpoint’s new signing secret' : 'The endpoint’s signing secret'}
          warning={`Copy the signing secret now: keygate will never show it again. Your receiver checks each message's webhook-signature with it.${
            action.rotated
              ? ' For 24 hours every message is signed with both the new and the old secret: put the new one in your receiver before then.'
              : ''
          }`}
          shown={[{ label: 'Signing secret', value: action.secret, testId: 'webhook-secret' }]}
          onClose={() => setAction(undefined)}
        />
      )}
    </>
  );
}

/** Create an endpoint (`endpoint` undefined) or change one; `onSaved` gets a new endpoint's secret. */
function EndpointDialog({
  endpoint,
  onClose,
  onSaved,
}: {
  endpoint?: Endpoint;
  onClose: () => void;
  onSaved: (secret?: string) => void;
}) {
  const [all, setAll] = useState(endpoint?.events.includes(ALL_EVENTS) ?? false);
  const [busy, setBusy] = useState(false);
  const submit = async (event: Event) => {
    event.preventDefault();
    const form = new FormData(event.currentTarget as HTMLFormElement);
    const url = String(form.get('url') ?? '').trim();
    const description = String(form.get('description') ?? '').trim();
    // None picked is sent as it is: the server's sentence says what is missing.
    const events = all ? [ALL_EVENTS] : form.getAll('event').map(String);
    setBusy(true);
    if (endpoint === undefined) {
      const created = await attempt(
        () =>
          call<{ endpoint: Endpoint; secret: string }>('POST', 'admin/webhooks', {
            url,
            events,
            ...(description === '' ? {} : { description }),
          }),
        (answer) => `Endpoint ${answer.endpoint.url} added.`,
      );
      setBusy(false);
      if (created) onSaved(created.secret);
      return;
    }
    const patch: Record<string, unknown> = {};
    if (url !== endpoint.url) patch.url = url;
    if ([...events].sort().join(' ') !== [...endpoint.events].sort().join(' ')) patch.events = events;
    if (description !== (endpoint.description ?? ''))
      patch.description = description === '' ? null : description;
    if (Object.keys(patch).length === 0) {
      setBusy(false);
      onClose();
      return;
    }
    const saved = await attempt(
      () => call<{ endpoint: Endpoint }>('PATCH', endpointPath(endpoint.id), patch),
      (answer) => `Endpoint ${answer.endpoint.url} saved.`,
    );
    setBusy(false);
    if (saved) onSaved();
  };
  return (
    <Dialog title={endpoint ? `Edit ${nameOf(endpoint)}` : 'Add a webhook endpoint'} onClose={onClose}>
      <form onSubmit={submit} class="form">
        <label>
          URL
          <input
            name="url"
            required
            autoComplete="off"
            inputMode="url"
            defaultValue={endpoint?.url ?? ''}
            placeholder="https://example.com/keygate-events"
          />
          <small>https; keygate refuses private and loopback addresses unless told otherwise.</small>
        </label>
        <fieldset>
          <legend>Events</legend>
          <label class="choice">
            <input type="checkbox" checked={all} onChange={(event) => setAll(event.currentTarget.checked)} />
            All events, present and future (*)
          </label>
          <div class="choices">
            {EVENT_TYPES.map((name) => (
              <label key={name} class="choice">
                <input
                  type="checkbox"
                  name="event"
                  value={name}
                  disabled={all}
                  defaultChecked={endpoint?.events.includes(name) ?? false}
                />
                <code>{name}</code>
              </label>
            ))}
          </div>
        </fieldset>
        <label>
          Description (optional)
          <input name="description" autoComplete="off" defaultValue={endpoint?.description ?? ''} />
        </label>
        <FormButtons label={endpoint ? 'Save' : 'Add endpoint'} onCancel={onClose} disabled={busy} />
      </form>
    </Dialog>
  );
}

function RotateSecretDialog({
  endpoint,
  onClose,
  onRotated,
}: {
  endpoint: Endpoint;
  onClose: () => void;
  onRotated: (secret: string) => void;
}) {
  const [busy, setBusy] = useState(false);
  const confirm = async () => {
    setBusy(true);
    const rotated = await attempt(
      () => call<{ secret: string }>('POST', endpointPath(endpoint.id, '/secret')),
      () => `The signing secret of ${nameOf(endpoint)} was rotated.`,
    );
    setBusy(false);
    if (rotated) onRotated(rotated.secret);
  };
  return (
    <Dialog title={`Rotate the signing secret of ${nameOf(endpoint)}?`} onClose={onClose}>
      <p>
        keygate makes a new secret. For 24 hours both the new and the old secret sign every message, so your
        receiver keeps accepting them while you change its secret; then only the new one does.
      </p>
      <div class="buttons">
        <button type="button" class="primary" onClick={confirm} disabled={busy}>
          Rotate secret
        </button>
        <button type="button" onClick={onClose}>
          Cancel
        </button>
      </div>
    </Dialog>
  );
}

function DeleteEndpointDialog({
  endpoint,
  onClose,
  onDeleted,
}: {
  endpoint: Endpoint;
  onClose: () => void;
  onDeleted: () => void;
}) {
  const confirm = async () => {
    const done = await attempt(
      () => call('DELETE', endpointPath(endpoint.id)).then(() => true),
      () => `Endpoint ${nameOf(endpoint)} deleted.`,
    );
    if (done) onDeleted();
  };
  return (
    <Dialog title={`Delete ${nameOf(endpoint)}?`} onClose={onClose}>
      <p>
        {endpoint.url} receives nothing more; its messages not yet delivered are dropped. This cannot be
        undone.
      </p>
      <div class="buttons">
        <button type="button" class="danger" onClick={confirm}>
          Delete endpoint
        </button>
        <button type="button" onClick={onClose}>
          Cancel
        </button>
      </div>
    </Dialog>
  );
}

/** An endpoint's latest messages, each one's attempts on demand, and a retry. */
function MessagesPanel({ endpoint }: { endpoint: Endpoint }) {
  const [messages, setMessages] = useState<Message[] | undefined>();
  const [failed, setFailed] = useState<string | undefined>();
  const [version, setVersion] = useState(0);
  const [open, setOpen] = useState<Set<string>>(new Set());
  const reload = () => setVersion((value) => value + 1);
  useEffect(() => {
    let live = true;
    call<{ messages: Message[] }>('GET', endpointPath(endpoint.id, '/messages')).then(
      (answer) => {
        if (!live) return;
        setMessages(answer.messages);
        setFailed(undefined);
      },
      (error: Error) => live && setFailed(error.message),
    );
    return () => {
      live = false;
    };
  }, [endpoint.id, version]);

  const expand = (id: string) =>
    setOpen((known) => {
      const next = new Set(known);
      if (!next.delete(id)) next.add(id);
      return next;
    });
  const retry = (message: Message) =>
    attempt(
      () => call('POST', endpointPath(endpoint.id, `/messages/${encodeURIComponent(message.id)}/retry`)),
      () => `Message ${message.id} will be sent again.`,
    ).then(reload);

  const heading = `Messages to ${nameOf(endpoint)}`;
  return (
    <section class="panel" aria-labelledby="messages-heading">
      <div class="panel-head">
        <h2 id="messages-heading">{heading}</h2>
        <button type="button" onClick={reload}>
          Refresh
        </button>
      </div>
      {failed && (
        <p role="alert" class="failed">
          {failed}
        </p>
      )}
      {messages === undefined && !failed && <p class="muted">Loading the messages…</p>}
      {messages?.length === 0 && <p class="empty">No messages yet.</p>}
      {messages && messages.length > 0 && (
        <table class="results messages">
          <caption class="visually-hidden">{heading}, the latest first</caption>
          <thead>
            <tr>
              <th scope="col">Event</th>
              <th scope="col">Message</th>
              <th scope="col">Created</th>
              <th scope="col">Status</th>
              <th scope="col">Attempts</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          {messages.map((message) => {
            const expanded = open.has(message.id);
            const listId = `attempts-${message.id}`;
            return (
              <tbody key={message.id} data-message={message.id}>
                <tr>
                  <th scope="row" data-label="Event">
                    <code>{message.type}</code>
                  </th>
                  <td data-label="Message">
                    <code>{message.id}</code>
                  </td>
                  <td data-label="Created">{when(message.createdAt)}</td>
                  <td data-label="Status">
                    <span class={`status ${message.status}`}>{message.status}</span>
                  </td>
                  <td data-label="Attempts">
                    <button
                      type="button"
                      aria-expanded={expanded}
                      aria-controls={listId}
                      aria-label={`Attempts of ${message.id}: ${message.attempts.length}`}
                      disabled={message.attempts.length === 0}
                      onClick={() => expand(message.id)}
                    >
                      {message.attempts.length}
                    </button>
                  </td>
                  <td data-label="Actions" class="actions">
                    <button type="button" onClick={() => retry(message)} aria-label={`Retry ${message.id}`}>
                      Retry
                    </button>
                  </td>
                </tr>
                {expanded && (
                  <tr class="attempts">
                    <td colSpan={6}>
                      <ol id={listId} aria-label={`Attempts of ${message.id}`}>
                        {message.attempts.map((sent, index) => (
                          <li key={`${index}-${sent.at}`}>
                            {toTheSecond(sent.at)}:{' '}
                            {sent.status === null ? 'no answer' : `HTTP ${sent.status}`}
                            {sent.error ? ` (${sent.error})` : ''}
                          </li>
                        ))}
                      </ol>
                    </td>
                  </tr>
                )}
              </tbody>
            );
          })}
        </table>
      )}
    </section>
  );
}

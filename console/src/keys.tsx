// A user's keys: the table (paged past 50), and every action on a key: create, the secret shown once,
// rotate, disable and enable, rename and edit meta, delete, usage. The same screen serves the user's
// own page and the operator acting for a user; what it offers (levels, permissions, expiry) comes
// from the server's rules, and every refusal shows keygate's sentence.
import { useEffect, useRef, useState } from 'preact/hooks';
import { type Bucket, type CreatedKey, call, type Key, type KeyRoutes, type Rules } from './api';
import { Sparkline, UsageChart } from './charts';
import { day, maskKey, seconds, statusOf, when } from './format';
import { attempt, Dialog, FormButtons, SecretDialog } from './ui';

type Page = { apikeys: Key[]; nextCursor: string | null };

/** Six sparklines at a time: a page of 50 keys never floods keygate. */
async function eachLimited<T>(items: T[], limit: number, work: (item: T) => Promise<void>) {
  const queue = [...items];
  await Promise.all(
    Array.from({ length: Math.min(limit, queue.length) }, async () => {
      for (let item = queue.shift(); item !== undefined; item = queue.shift()) await work(item);
    }),
  );
}

type Action =
  | { kind: 'create' }
  | { kind: 'secret'; created: CreatedKey; previous?: string }
  | { kind: 'rotate'; key: Key }
  | { kind: 'edit'; key: Key }
  | { kind: 'delete'; key: Key }
  | { kind: 'usage'; key: Key };

export function KeysPanel({ routes, rules, heading }: { routes: KeyRoutes; rules: Rules; heading: string }) {
  const [cursors, setCursors] = useState<Array<string | null>>([null]);
  const [page, setPage] = useState<Page | undefined>();
  const [failed, setFailed] = useState<string | undefined>();
  const [sparks, setSparks] = useState<Record<string, Bucket[]>>({});
  const [action, setAction] = useState<Action | undefined>();
  const [version, setVersion] = useState(0);
  const cursor = cursors[cursors.length - 1] ?? null;
  const path = (rest: string) => `${routes.base}apikeys${rest}/session`;
  const send = <T,>(method: string, rest: string, body?: unknown) =>
    call<T>(method, path(rest), body, routes.headers);
  const reload = () => setVersion((value) => value + 1);
  const createButton = useRef<HTMLButtonElement>(null);
  // After a delete the focused row is gone: the focus goes to "Create key", not to the page's start.
  const refocus = useRef(false);

  useEffect(() => {
    let live = true;
    const query = `?limit=50${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`;
    call<Page>('GET', `${path('')}${query}`, undefined, routes.headers).then(
      async (loaded) => {
        if (!live) return;
        setPage(loaded);
        if (refocus.current) {
          refocus.current = false;
          requestAnimationFrame(() => createButton.current?.focus());
        }
        setFailed(undefined);
        await eachLimited(loaded.apikeys, 6, async (key) => {
          const usage = await call<{ usage: Bucket[] }>(
            'GET',
            `${path(`/${key.key}/usage`)}?granularity=day`,
            undefined,
            routes.headers,
          ).catch(() => ({ usage: [] }));
          if (live) setSparks((known) => ({ ...known, [key.key]: usage.usage }));
        });
      },
      (error: Error) => live && setFailed(error.message),
    );
    return () => {
      live = false;
    };
  }, [cursor, version, routes.base, routes.headers['x-keygate-acting-for']]);

  const toggle = (key: Key) =>
    attempt(
      () => send('PATCH', `/${key.key}`, { enabled: !key.enabled }),
      () => `Key “${key.name}” ${key.enabled ? 'disabled' : 'enabled'}.`,
    ).then(reload);

  return (
    <section aria-labelledby="keys-heading" class="panel">
      <div class="panel-head">
        <h2 id="keys-heading">{heading}</h2>
        <button
          type="button"
          class="primary"
          ref={createButton}
          onClick={() => setAction({ kind: 'create' })}
        >
          Create key
        </button>
      </div>
      {failed && (
        <p role="alert" class="failed">
          {failed}
        </p>
      )}
      {page === undefined && !failed && <p class="muted">Loading keys…</p>}
      {page && page.apikeys.length === 0 && cursors.length === 1 && (
        <p class="empty">No keys yet. Create one to call the API.</p>
      )}
      {page && page.apikeys.length > 0 && (
        <table class="keys">
          <caption class="visually-hidden">{heading}</caption>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Key</th>
              <th scope="col">Level</th>
              <th scope="col">Permissions</th>
              <th scope="col">Status</th>
              <th scope="col">Created</th>
              <th scope="col">Expires</th>
              <th scope="col">Last used</th>
              <th scope="col">30 days</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {page.apikeys.map((key) => {
              const status = statusOf(key);
              return (
                <tr key={key.key} data-key={key.key}>
                  <th scope="row" data-label="Name">
                    {key.name}
                  </th>
                  <td data-label="Key">
                    <code title={key.key}>{maskKey(key.key)}</code>
                  </td>
                  <td data-label="Level">{key.level}</td>
                  <td data-label="Permissions">
                    {key.permissions?.join(' ') || <span class="muted">none</span>}
                  </td>
                  <td data-label="Status">
                    <span class={`status ${status.replace(' ', '-')}`}>{status}</span>
                  </td>
                  <td data-label="Created" title={when(key.createdAt)}>
                    {day(key.createdAt)}
                  </td>
                  <td data-label="Expires" title={when(key.expiresAt)}>
                    {day(key.expiresAt)}
                  </td>
                  <td data-label="Last used">{when(key.lastUsedAt)}</td>
                  <td data-label="30 days">
                    <Sparkline buckets={sparks[key.key]} />
                  </td>
                  <td data-label="Actions" class="actions">
                    <button
                      type="button"
                      onClick={() => setAction({ kind: 'usage', key })}
                      aria-label={`Usage of ${key.name}`}
                    >
                      Usage
                    </button>
                    <button
                      type="button"
                      onClick={() => setAction({ kind: 'edit', key })}
                      aria-label={`Edit ${key.name}`}
                    >
                      Edit
                    </button>
                    <button
                      type="button"
                      onClick={() => setAction({ kind: 'rotate', key })}
                      aria-label={`Rotate ${key.name}`}
                    >
                      Rotate
                    </button>
                    <button
                      type="button"
                      onClick={() => toggle(key)}
                      aria-label={`${key.enabled ? 'Disable' : 'Enable'} ${key.name}`}
                    >
                      {key.enabled ? 'Disable' : 'Enable'}
                    </button>
                    <button
                      type="button"
                      class="danger"
                      onClick={() => setAction({ kind: 'delete', key })}
                      aria-label={`Delete ${key.name}`}
                    >
                      Delete
                    </button>
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
      {page && (cursors.length > 1 || page.nextCursor !== null) && (
        <nav class="pager" aria-label="Pages of keys">
          <button
            type="button"
            disabled={cursors.length === 1}
            onClick={() => setCursors(cursors.slice(0, -1))}
          >
            Previous page
          </button>
          <span>Page {cursors.length}</span>
          <button
            type="button"
            disabled={page.nextCursor === null}
            onClick={() => page.nextCursor !== null && setCursors([...cursors, page.nextCursor])}
          >
            Next page
          </button>
        </nav>
      )}
      {action?.kind === 'create' && (
        <CreateDialog
          rules={rules}
          onClose={() => setAction(undefined)}
          create={(body) => send<{ apikey: CreatedKey }>('POST', '', body)}
          onCreated={(created) => {
            setAction({ kind: 'secret', created });
            reload();
          }}
        />
      )}
      {action?.kind === 'secret' && (
        <KeySecretDialog
          created={action.created}
          previous={action.previous}
          onClose={() => setAction(undefined)}
        />
      )}
      {action?.kind === 'rotate' && (
        <RotateDialog
          apikey={action.key}
          onClose={() => setAction(undefined)}
          rotate={(gracePeriod) =>
            send<{ apikey: CreatedKey; previous: { key: string } }>('POST', `/${action.key.key}/rotate`, {
              gracePeriod,
            })
          }
          onRotated={(created, previous) => {
            setAction({ kind: 'secret', created, previous });
            reload();
          }}
        />
      )}
      {action?.kind === 'edit' && (
        <EditDialog
          apikey={action.key}
          onClose={() => setAction(undefined)}
          save={(patch) => send('PATCH', `/${action.key.key}`, patch)}
          onSaved={() => {
            setAction(undefined);
            reload();
          }}
        />
      )}
      {action?.kind === 'delete' && (
        <DeleteDialog
          apikey={action.key}
          onClose={() => setAction(undefined)}
          remove={() => send('DELETE', `/${action.key.key}`)}
          onDeleted={() => {
            refocus.current = true;
            setAction(undefined);
            reload();
          }}
        />
      )}
      {action?.kind === 'usage' && (
        <UsageDialog
          apikey={action.key}
          onClose={() => setAction(undefined)}
          load={(granularity) =>
            call<{ usage: Bucket[] }>(
              'GET',
              `${path(`/${action.key.key}/usage`)}?granularity=${granularity}`,
              undefined,
              routes.headers,
            )
          }
        />
      )}
    </section>
  );
}

const EXPIRY_PRESETS: Array<[string, number]> = [
  ['1 day', 86_400],
  ['7 days', 604_800],
  ['30 days', 2_592_000],
  ['90 days', 7_776_000],
  ['1 year', 31_536_000],
];

function CreateDialog({
  rules,
  onClose,
  create,
  onCreated,
}: {
  rules: Rules;
  onClose: () => void;
  create: (body: unknown) => Promise<{ apikey: CreatedKey }>;
  onCreated: (created: CreatedKey) => void;
}) {
  const presets = EXPIRY_PRESETS.filter(([, value]) => value <= rules.maxExpiresInSeconds);
  const [expiry, setExpiry] = useState(String(presets[2]?.[1] ?? presets[0]?.[1] ?? 'custom'));
  const [busy, setBusy] = useState(false);
  const [problem, setProblem] = useState<string | undefined>();
  const [limited, setLimited] = useState(false);
  const [withCredits, setWithCredits] = useState(false);

  const submit = async (event: Event) => {
    event.preventDefault();
    const form = new FormData(event.currentTarget as HTMLFormElement);
    const text = (name: string) => String(form.get(name) ?? '').trim();
    const number = (name: string) => Number(text(name));
    const body: Record<string, unknown> = {
      name: text('name'),
      level: number('level'),
      expiresIn: expiry === 'custom' ? Math.round(number('customDays') * 86_400) : Number(expiry),
    };
    const picked = form.getAll('permission').map(String);
    const typed = text('permissionsText')
      .split(/[\s,]+/)
      .filter(Boolean);
    const permissions = [...new Set([...picked, ...typed])];
    if (permissions.length > 0) body.permissions = permissions;
    if (text('meta') !== '') {
      try {
        body.meta = JSON.parse(text('meta'));
      } catch {
        setProblem('Meta must be JSON, such as {"team": "billing"}.');
        return;
      }
    }
    if (limited) body.ratelimit = { limit: number('limit'), duration: number('duration') };
    if (withCredits) {
      const credits: Record<string, unknown> = { remaining: number('remaining') };
      if (text('refillAmount') !== '') {
        credits.refill = {
          amount: number('refillAmount'),
          interval: Math.round(number('refillDays') * 86_400),
        };
      }
      body.credits = credits;
    }
    setBusy(true);
    const created = await attempt(
      () => create(body),
      ({ apikey }) => `Key “${apikey.name}” created.`,
    );
    setBusy(false);
    if (created) onCreated(created.apikey);
  };

  const levels = Array.from({ length: rules.maxLevel + 1 }, (_, level) => level);
  return (
    <Dialog title="Create a key" onClose={onClose}>
      <form onSubmit={submit} class="form">
        <label>
          Name
          <input name="name" required autoComplete="off" />
        </label>
        <label>
          Level
          <select name="level">
            {levels.map((level) => (
              <option key={level} value={level}>
                {level}
              </option>
            ))}
          </select>
          <small>Up to {rules.maxLevel}: a key acts on keys of its level and below.</small>
        </label>
        <fieldset>
          <legend>Expires in</legend>
          <div class="choices">
            {presets.map(([label, value]) => (
              <label key={value} class="choice">
                <input
                  type="radio"
                  name="expiry"
                  value={value}
                  checked={expiry === String(value)}
                  onChange={() => setExpiry(String(value))}
                />
                {label}
              </label>
            ))}
            <label class="choice">
              <input
                type="radio"
                name="expiry"
                value="custom"
                checked={expiry === 'custom'}
                onChange={() => setExpiry('custom')}
              />
              Custom
            </label>
          </div>
          {expiry === 'custom' && (
            <label>
              Days
              <input name="customDays" type="number" step="any" required />
              <small>At most {seconds(rules.maxExpiresInSeconds)}.</small>
            </label>
          )}
        </fieldset>
        <fieldset>
          <legend>Permissions</legend>
          {rules.permissions === null ? (
            <small>Any permission names, such as documents.read.</small>
          ) : (
            <>
              <div class="choices">
                {rules.permissions.map((permission) => (
                  <label key={permission} class="choice">
                    <input type="checkbox" name="permission" value={permission} />
                    <code>{permission}</code>
                  </label>
                ))}
              </div>
              <small>Or narrower ones within these (e.g. documents.read within documents.*).</small>
            </>
          )}
          <label>
            {rules.permissions === null ? 'Permissions' : 'Other permissions'}
            <input name="permissionsText" autoComplete="off" placeholder="documents.read documents.write" />
          </label>
        </fieldset>
        <label>
          Meta (JSON, optional)
          <textarea name="meta" rows={2} placeholder='{"team": "billing"}' />
        </label>
        <fieldset>
          <legend>Limits (optional)</legend>
          <label class="choice">
            <input
              type="checkbox"
              checked={limited}
              onChange={(event) => setLimited(event.currentTarget.checked)}
            />
            Rate limit
          </label>
          {limited && (
            <div class="row">
              <label>
                Verifications
                <input name="limit" type="number" required />
              </label>
              <label>
                Per seconds
                <input name="duration" type="number" required />
              </label>
            </div>
          )}
          <label class="choice">
            <input
              type="checkbox"
              checked={withCredits}
              onChange={(event) => setWithCredits(event.currentTarget.checked)}
            />
            Credits
          </label>
          {withCredits && (
            <div class="row">
              <label>
                Remaining
                <input name="remaining" type="number" required />
              </label>
              <label>
                Refill to (optional)
                <input name="refillAmount" type="number" />
              </label>
              <label>
                Every days
                <input name="refillDays" type="number" step="any" />
              </label>
            </div>
          )}
        </fieldset>
        {problem && (
          <p role="alert" class="failed">
            {problem}
          </p>
        )}
        <FormButtons label="Create" onCancel={onClose} disabled={busy} />
      </form>
    </Dialog>
  );
}

function KeySecretDialog({
  created,
  previous,
  onClose,
}: {
  created: CreatedKey;
  previous?: string;
  onClose: () => void;
}) {
  return (
    <SecretDialog
      title={previous ? 'The new key’s secret' : 'Your new key’s secret'}
      warning={`Copy the secret now: keygate keeps only its hash and will never show it again.${
        previous ? ` The old key ${maskKey(previous)} keeps working until its grace period ends.` : ''
      }`}
      shown={[
        { label: 'Key', value: created.key, testId: 'new-key' },
        { label: 'Secret', value: created.secret, testId: 'new-secret' },
      ]}
      onClose={onClose}
    />
  );
}

const GRACE_PRESETS: Array<[string, number]> = [
  ['None: the old key stops now', 0],
  ['1 hour', 3600],
  ['1 day', 86_400],
  ['7 days', 604_800],
  ['30 days', 2_592_000],
];

function RotateDialog({
  apikey,
  onClose,
  rotate,
  onRotated,
}: {
  apikey: Key;
  onClose: () => void;
  rotate: (gracePeriod: number) => Promise<{ apikey: CreatedKey; previous: { key: string } }>;
  onRotated: (created: CreatedKey, previous: string) => void;
}) {
  const [grace, setGrace] = useState(3600);
  const [busy, setBusy] = useState(false);
  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    const rotated = await attempt(
      () => rotate(grace),
      () => `Key “${apikey.name}” rotated.`,
    );
    setBusy(false);
    if (rotated) onRotated(rotated.apikey, rotated.previous.key);
  };
  return (
    <Dialog title={`Rotate “${apikey.name}”`} onClose={onClose}>
      <form onSubmit={submit} class="form">
        <p>A new key with the same name, level, permissions and expiry replaces {maskKey(apikey.key)}.</p>
        <fieldset>
          <legend>Grace period for the old key</legend>
          <div class="choices">
            {GRACE_PRESETS.map(([label, value]) => (
              <label key={value} class="choice">
                <input type="radio" name="grace" checked={grace === value} onChange={() => setGrace(value)} />
                {label}
              </label>
            ))}
          </div>
        </fieldset>
        <FormButtons label="Rotate" onCancel={onClose} disabled={busy} />
      </form>
    </Dialog>
  );
}

function EditDialog({
  apikey,
  onClose,
  save,
  onSaved,
}: {
  apikey: Key;
  onClose: () => void;
  save: (patch: Record<string, unknown>) => Promise<unknown>;
  onSaved: () => void;
}) {
  const [problem, setProblem] = useState<string | undefined>();
  const submit = async (event: Event) => {
    event.preventDefault();
    const form = new FormData(event.currentTarget as HTMLFormElement);
    const name = String(form.get('name') ?? '').trim();
    const metaText = String(form.get('meta') ?? '').trim();
    const patch: Record<string, unknown> = {};
    if (name !== apikey.name) patch.name = name;
    let meta: unknown = null;
    if (metaText !== '') {
      try {
        meta = JSON.parse(metaText);
      } catch {
        setProblem('Meta must be JSON, such as {"team": "billing"}; leave it empty to remove it.');
        return;
      }
    }
    if (JSON.stringify(meta) !== JSON.stringify(apikey.meta ?? null)) patch.meta = meta;
    if (Object.keys(patch).length === 0) {
      onClose();
      return;
    }
    const saved = await attempt(
      () => save(patch),
      () => `Key “${name}” saved.`,
    );
    if (saved !== undefined) onSaved();
  };
  return (
    <Dialog title={`Edit “${apikey.name}”`} onClose={onClose}>
      <form onSubmit={submit} class="form">
        <label>
          Name
          <input name="name" required defaultValue={apikey.name} autoComplete="off" />
        </label>
        <label>
          Meta (JSON; empty removes it)
          <textarea
            name="meta"
            rows={4}
            defaultValue={apikey.meta ? JSON.stringify(apikey.meta, null, 2) : ''}
          />
        </label>
        {problem && (
          <p role="alert" class="failed">
            {problem}
          </p>
        )}
        <FormButtons label="Save" onCancel={onClose} />
      </form>
    </Dialog>
  );
}

function DeleteDialog({
  apikey,
  onClose,
  remove,
  onDeleted,
}: {
  apikey: Key;
  onClose: () => void;
  remove: () => Promise<unknown>;
  onDeleted: () => void;
}) {
  const confirm = async () => {
    const done = await attempt(
      async () => {
        await remove();
        return true;
      },
      () => `Key “${apikey.name}” deleted.`,
    );
    if (done) onDeleted();
  };
  return (
    <Dialog title={`Delete “${apikey.name}”?`} onClose={onClose}>
      <p>{maskKey(apikey.key)} stops working at once, everywhere. This cannot be undone.</p>
      <div class="buttons">
        <button type="button" class="danger" onClick={confirm}>
          Delete key
        </button>
        <button type="button" onClick={onClose}>
          Cancel
        </button>
      </div>
    </Dialog>
  );
}

function UsageDialog({
  apikey,
  onClose,
  load,
}: {
  apikey: Key;
  onClose: () => void;
  load: (granularity: 'hour' | 'day') => Promise<{ usage: Bucket[] }>;
}) {
  return (
    <Dialog title={`Usage of “${apikey.name}”`} onClose={onClose}>
      <UsageView load={load} />
      <div class="buttons">
        <button type="button" onClick={onClose}>
          Close
        </button>
      </div>
    </Dialog>
  );
}

/** Usage by hour (24 hours) or by day (30 days), whichever is chosen. */
export function UsageView({ load }: { load: (granularity: 'hour' | 'day') => Promise<{ usage: Bucket[] }> }) {
  const [granularity, setGranularity] = useState<'hour' | 'day'>('hour');
  const [buckets, setBuckets] = useState<Bucket[] | undefined>();
  const [failed, setFailed] = useState<string | undefined>();
  useEffect(() => {
    let live = true;
    setBuckets(undefined);
    load(granularity).then(
      (answer) => live && setBuckets(answer.usage),
      (error: Error) => live && setFailed(error.message),
    );
    return () => {
      live = false;
    };
  }, [granularity]);
  return (
    <div class="usage">
      <fieldset class="segmented">
        <legend class="visually-hidden">Granularity</legend>
        <button type="button" aria-pressed={granularity === 'hour'} onClick={() => setGranularity('hour')}>
          By hour
        </button>
        <button type="button" aria-pressed={granularity === 'day'} onClick={() => setGranularity('day')}>
          By day
        </button>
      </fieldset>
      {failed && (
        <p role="alert" class="failed">
          {failed}
        </p>
      )}
      {buckets === undefined && !failed ? <p class="muted">Loading usage…</p> : null}
      {buckets && <UsageChart buckets={buckets} granularity={granularity} />}
    </div>
  );
}

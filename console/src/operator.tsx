// The operator's console: find a user (by id, or issuer and subject with mapped ids) or a key (by id
// prefix or name), a user's keys at every level with every action, the user's policy, usage and
// revoke-all, the overview, and the webhook endpoints. Thin: the operator's routes say what is allowed.
import { useEffect, useState } from 'preact/hooks';
import { actingFor, type Bucket, call, type Key, type Rules } from './api';
import { maskKey, when } from './format';
import { KeysPanel, UsageView } from './keys';
import { attempt, Dialog, FormButtons } from './ui';
import { WebhooksPanel } from './webhooks';

type View = { kind: 'find' } | { kind: 'user'; userId: number } | { kind: 'overview' } | { kind: 'webhooks' };

export function OperatorConsole({ rules }: { rules: Rules }) {
  const [view, setView] = useState<View>({ kind: 'find' });
  const openUser = (userId: number) => setView({ kind: 'user', userId });
  return (
    <>
      <nav class="tabs" aria-label="Operator">
        <button
          type="button"
          aria-pressed={view.kind === 'find' || view.kind === 'user'}
          onClick={() => setView({ kind: 'find' })}
        >
          Users and keys
        </button>
        <button
          type="button"
          aria-pressed={view.kind === 'overview'}
          onClick={() => setView({ kind: 'overview' })}
        >
          Overview
        </button>
        <button
          type="button"
          aria-pressed={view.kind === 'webhooks'}
          onClick={() => setView({ kind: 'webhooks' })}
        >
          Webhooks
        </button>
      </nav>
      {view.kind === 'overview' ? (
        <Overview openUser={openUser} />
      ) : view.kind === 'webhooks' ? (
        <WebhooksPanel />
      ) : (
        <>
          <Find rules={rules} openUser={openUser} />
          {view.kind === 'user' && <UserView key={view.userId} userId={view.userId} rules={rules} />}
        </>
      )}
    </>
  );
}

const KEY_ID = /^kg_[A-Za-z0-9]{22,128}$/;

function Find({ rules, openUser }: { rules: Rules; openUser: (userId: number) => void }) {
  const [found, setFound] = useState<Key[] | undefined>();
  const [users, setUsers] = useState<UserRow[] | undefined>();

  const search = async (event: Event) => {
    event.preventDefault();
    const form = new FormData(event.currentTarget as HTMLFormElement);
    const query = String(form.get('query') ?? '').trim();
    setFound(undefined);
    if (/^[0-9]{1,16}$/.test(query)) {
      openUser(Number(query));
      return;
    }
    if (KEY_ID.test(query)) {
      const one = await attempt(() => call<{ apikey: Key }>('GET', `admin/apikeys/${query}`));
      if (one) openUser(one.apikey.userId);
      return;
    }
    const page = await attempt(() =>
      call<{ apikeys: Key[] }>('GET', `admin/apikeys?limit=50&q=${encodeURIComponent(query)}`),
    );
    if (page) setFound(page.apikeys);
  };

  const bySubject = async (event: Event) => {
    event.preventDefault();
    const form = new FormData(event.currentTarget as HTMLFormElement);
    const query = new URLSearchParams({
      iss: String(form.get('iss') ?? ''),
      sub: String(form.get('sub') ?? ''),
    });
    const answer = await attempt(() => call<{ userId: number }>('GET', `admin/subjects?${query}`));
    if (answer) openUser(answer.userId);
  };

  const browse = async () => {
    const page = await attempt(() => call<{ users: UserRow[] }>('GET', 'admin/users?limit=50'));
    if (page) setUsers(page.users);
  };

  return (
    <section class="panel" aria-labelledby="find-heading">
      <h2 id="find-heading">Find a user or a key</h2>
      <form class="search" onSubmit={search} aria-label="Find a user or a key">
        <label>
          User id, key id (or its start) or key name
          <input name="query" required autoComplete="off" placeholder="42, kg_0Vbh… or billing" />
        </label>
        <button type="submit" class="primary">
          Find
        </button>
      </form>
      {rules.userIds === 'mapped' && (
        <form class="search" onSubmit={bySubject} aria-label="Find a user by issuer and subject">
          <label>
            Issuer (iss; empty for tokens without one)
            <input name="iss" autoComplete="off" />
          </label>
          <label>
            Subject (sub)
            <input name="sub" required autoComplete="off" />
          </label>
          <button type="submit">Find user</button>
        </form>
      )}
      <button type="button" onClick={browse}>
        List users
      </button>
      {found && (
        <table class="results">
          <caption>Keys found</caption>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Key</th>
              <th scope="col">User</th>
              <th scope="col">Expires</th>
            </tr>
          </thead>
          <tbody>
            {found.length === 0 && (
              <tr>
                <td colSpan={4}>No live key matches.</td>
              </tr>
            )}
            {found.map((key) => (
              <tr key={key.key}>
                <th scope="row" data-label="Name">
                  {key.name}
                </th>
                <td data-label="Key">
                  <code title={key.key}>{maskKey(key.key)}</code>
                </td>
                <td data-label="User">
                  <button
                    type="button"
                    onClick={() => openUser(key.userId)}
                    aria-label={`Open user ${key.userId}`}
                  >
                    User {key.userId}
                  </button>
                </td>
                <td data-label="Expires">{when(key.expiresAt)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {users && <UserList users={users} openUser={openUser} />}
    </section>
  );
}

type UserRow = { userId: number; subject?: string; keys: number; lastUsedAt: string | null };

function UserList({ users, openUser }: { users: UserRow[]; openUser: (userId: number) => void }) {
  return (
    <table class="results">
      <caption>Users</caption>
      <thead>
        <tr>
          <th scope="col">User</th>
          <th scope="col">Keys</th>
          <th scope="col">Last used</th>
        </tr>
      </thead>
      <tbody>
        {users.map((user) => (
          <tr key={user.userId}>
            <th scope="row" data-label="User">
              <button type="button" onClick={() => openUser(user.userId)}>
                User {user.userId}
                {user.subject ? ` (${user.subject})` : ''}
              </button>
            </th>
            <td data-label="Keys">{user.keys}</td>
            <td data-label="Last used">{when(user.lastUsedAt)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

type Policy = {
  ratelimit: { limit: number; duration: number } | null;
  credits: { remaining: number; refill?: { amount: number; interval: number } } | null;
  maxKeys: number | null;
  maxLevel: number | null;
  permissions: string[] | null;
};

function UserView({ userId, rules }: { userId: number; rules: Rules }) {
  const [revoking, setRevoking] = useState(false);
  const [generation, setGeneration] = useState(0);
  // The operator session's rules, as the server gave them: any level, any permission.
  return (
    <div class="user" key={generation}>
      <h2 class="user-heading">User {userId}</h2>
      <KeysPanel routes={actingFor(userId)} rules={rules} heading={`Keys of user ${userId}`} />
      <PolicyEditor userId={userId} />
      <section class="panel" aria-labelledby="user-usage-heading">
        <h2 id="user-usage-heading">Usage of user {userId}</h2>
        <UsageView
          load={(granularity) =>
            call<{ usage: Bucket[] }>('GET', `admin/users/${userId}/usage?granularity=${granularity}`)
          }
        />
      </section>
      <section class="panel danger-zone" aria-labelledby="revoke-heading">
        <h2 id="revoke-heading">Revoke every key</h2>
        <p>Deletes all of user {userId}'s keys at once and ends their console sessions.</p>
        <button type="button" class="danger" onClick={() => setRevoking(true)}>
          Revoke all keys…
        </button>
      </section>
      {revoking && (
        <RevokeAllDialog
          userId={userId}
          onClose={() => setRevoking(false)}
          onDone={() => {
            setRevoking(false);
            setGeneration((value) => value + 1);
          }}
        />
      )}
    </div>
  );
}

function RevokeAllDialog({
  userId,
  onClose,
  onDone,
}: {
  userId: number;
  onClose: () => void;
  onDone: () => void;
}) {
  const [typed, setTyped] = useState('');
  const submit = async (event: Event) => {
    event.preventDefault();
    const done = await attempt(
      () => call<{ deleted: number }>('DELETE', `admin/users/${userId}/apikeys`),
      ({ deleted }) => `Revoked ${deleted} key${deleted === 1 ? '' : 's'} of user ${userId}.`,
    );
    if (done) onDone();
  };
  return (
    <Dialog title={`Revoke every key of user ${userId}?`} onClose={onClose}>
      <form onSubmit={submit} class="form">
        <p>Every key of this user stops working at once, on every replica. This cannot be undone.</p>
        <label>
          Type the user id ({userId}) to confirm
          <input
            value={typed}
            onInput={(event) => setTyped(event.currentTarget.value)}
            autoComplete="off"
            inputMode="numeric"
          />
        </label>
        <FormButtons
          label="Revoke all keys"
          onCancel={onClose}
          disabled={typed.trim() !== String(userId)}
          danger
        />
      </form>
    </Dialog>
  );
}

function PolicyEditor({ userId }: { userId: number }) {
  const [policy, setPolicy] = useState<Policy | undefined>();
  const [failed, setFailed] = useState<string | undefined>();
  const [version, setVersion] = useState(0);
  useEffect(() => {
    call<{ policy: Policy }>('GET', `admin/users/${userId}/policy`).then(
      (answer) => setPolicy(answer.policy),
      (error: Error) => setFailed(error.message),
    );
  }, [userId, version]);

  const save = async (event: Event) => {
    event.preventDefault();
    const form = new FormData(event.currentTarget as HTMLFormElement);
    const text = (name: string) => String(form.get(name) ?? '').trim();
    const number = (name: string) => (text(name) === '' ? null : Number(text(name)));
    const limit = number('limit');
    const remaining = number('remaining');
    const refillAmount = number('refillAmount');
    const permissions = text('permissions')
      .split(/[\s,]+/)
      .filter(Boolean);
    const body: Policy = {
      ratelimit: limit === null ? null : { limit, duration: number('duration') ?? 0 },
      credits:
        remaining === null
          ? null
          : {
              remaining,
              ...(refillAmount === null
                ? {}
                : { refill: { amount: refillAmount, interval: number('refillInterval') ?? 0 } }),
            },
      maxKeys: number('maxKeys'),
      maxLevel: number('maxLevel'),
      permissions: permissions.length === 0 ? null : permissions,
    };
    const saved = await attempt(
      () => call<{ policy: Policy }>('PUT', `admin/users/${userId}/policy`, body),
      () => `Policy of user ${userId} saved.`,
    );
    if (saved) setPolicy(saved.policy);
  };

  const remove = async () => {
    const done = await attempt(
      () => call('DELETE', `admin/users/${userId}/policy`).then(() => true),
      () => `Policy of user ${userId} removed.`,
    );
    if (done) setVersion((value) => value + 1);
  };

  return (
    <section class="panel" aria-labelledby="policy-heading">
      <h2 id="policy-heading">Policy of user {userId}</h2>
      {failed && (
        <p role="alert" class="failed">
          {failed}
        </p>
      )}
      {policy && (
        <form class="form policy" onSubmit={save} key={JSON.stringify(policy)}>
          <p class="muted">
            Empty fields mean no limit. The user's keys share the rate limit and the credits.
          </p>
          <div class="row">
            <label>
              Rate limit: verifications
              <input name="limit" type="number" defaultValue={policy.ratelimit?.limit ?? ''} />
            </label>
            <label>
              per seconds
              <input name="duration" type="number" defaultValue={policy.ratelimit?.duration ?? ''} />
            </label>
          </div>
          <div class="row">
            <label>
              Credits remaining
              <input name="remaining" type="number" defaultValue={policy.credits?.remaining ?? ''} />
            </label>
            <label>
              Refill to
              <input name="refillAmount" type="number" defaultValue={policy.credits?.refill?.amount ?? ''} />
            </label>
            <label>
              every seconds
              <input
                name="refillInterval"
                type="number"
                defaultValue={policy.credits?.refill?.interval ?? ''}
              />
            </label>
          </div>
          <div class="row">
            <label>
              Most keys
              <input name="maxKeys" type="number" defaultValue={policy.maxKeys ?? ''} />
            </label>
            <label>
              Highest level
              <input name="maxLevel" type="number" defaultValue={policy.maxLevel ?? ''} />
            </label>
          </div>
          <label>
            Permissions the keys may hold (space-separated; empty: any)
            <input name="permissions" autoComplete="off" defaultValue={policy.permissions?.join(' ') ?? ''} />
          </label>
          <div class="buttons">
            <button type="submit" class="primary">
              Save policy
            </button>
            <button type="button" onClick={remove}>
              Remove policy
            </button>
          </div>
        </form>
      )}
    </section>
  );
}

type OverviewAnswer = {
  keys: number;
  created: { day: number; month: number };
  verifications: { day: Record<string, number>; month: Record<string, number> };
  topKeys: Array<{ key: string; userId: number; name: string; valid: number }>;
  topUsers: Array<{ userId: number; valid: number }>;
};

function Overview({ openUser }: { openUser: (userId: number) => void }) {
  const [overview, setOverview] = useState<OverviewAnswer | undefined>();
  const [failed, setFailed] = useState<string | undefined>();
  useEffect(() => {
    call<OverviewAnswer>('GET', 'admin/overview').then(setOverview, (error: Error) =>
      setFailed(error.message),
    );
  }, []);
  if (failed)
    return (
      <p role="alert" class="failed panel">
        {failed}
      </p>
    );
  if (!overview) return <p class="muted panel">Loading the overview…</p>;
  const codes = [
    ...new Set([...Object.keys(overview.verifications.day), ...Object.keys(overview.verifications.month)]),
  ];
  return (
    <section class="panel overview" aria-labelledby="overview-heading">
      <h2 id="overview-heading">Overview</h2>
      <dl class="figures">
        <div>
          <dt>Keys alive</dt>
          <dd>{overview.keys}</dd>
        </div>
        <div>
          <dt>Created, 24 hours</dt>
          <dd>{overview.created.day}</dd>
        </div>
        <div>
          <dt>Created, 30 days</dt>
          <dd>{overview.created.month}</dd>
        </div>
      </dl>
      <table class="results">
        <caption>Verifications by code</caption>
        <thead>
          <tr>
            <th scope="col">Code</th>
            <th scope="col">24 hours</th>
            <th scope="col">30 days</th>
          </tr>
        </thead>
        <tbody>
          {codes.map((code) => (
            <tr key={code}>
              <th scope="row" data-label="Code">
                <code>{code}</code>
              </th>
              <td data-label="24 hours">{overview.verifications.day[code] ?? 0}</td>
              <td data-label="30 days">{overview.verifications.month[code] ?? 0}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <table class="results">
        <caption>Top keys, 24 hours</caption>
        <thead>
          <tr>
            <th scope="col">Key</th>
            <th scope="col">User</th>
            <th scope="col">Valid</th>
          </tr>
        </thead>
        <tbody>
          {overview.topKeys.map((key) => (
            <tr key={key.key}>
              <th scope="row" data-label="Key">
                {key.name} <code>{maskKey(key.key)}</code>
              </th>
              <td data-label="User">
                <button type="button" onClick={() => openUser(key.userId)}>
                  User {key.userId}
                </button>
              </td>
              <td data-label="Valid">{key.valid}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <table class="results">
        <caption>Top users, 24 hours</caption>
        <thead>
          <tr>
            <th scope="col">User</th>
            <th scope="col">Valid</th>
          </tr>
        </thead>
        <tbody>
          {overview.topUsers.map((user) => (
            <tr key={user.userId}>
              <th scope="row" data-label="User">
                <button type="button" onClick={() => openUser(user.userId)}>
                  User {user.userId}
                </button>
              </th>
              <td data-label="Valid">{user.valid}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

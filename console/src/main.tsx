// The console's front-end: reads the link's one-time code from the fragment (and removes it from the
// address bar at once), exchanges it for the session cookie, or finds the session it already has;
// then the customer's key page or the operator's console.
import { render } from 'preact';
import { useState } from 'preact/hooks';
import { ApiError, call, type Me, OWN_KEYS, setCsrfToken } from './api';
import { when } from './format';
import { KeysPanel } from './keys';
import { OperatorConsole } from './operator';
import { attempt, Notices } from './ui';

function App({ me, title }: { me: Me; title: string }) {
  const [signedOut, setSignedOut] = useState(false);
  const { session, rules } = me;
  if (signedOut)
    return <SignedOut title={title} message="You have logged out. Open a new console link to come back." />;
  const logout = async () => {
    const done = await attempt(() => call('DELETE', 'session').then(() => true));
    if (done) setSignedOut(true);
  };
  return (
    <>
      <header class="top">
        <h1>{title}</h1>
        <p class="who">
          {session.kind === 'operator' ? 'Operator' : `User ${session.userId} · level ${session.level}`}
          <span class="muted"> · session until {when(session.expiresAt)}</span>
        </p>
        <button type="button" onClick={logout}>
          Log out
        </button>
      </header>
      <Notices />
      <main>
        {session.kind === 'operator' ? (
          <OperatorConsole rules={rules} />
        ) : (
          <KeysPanel routes={OWN_KEYS} rules={rules} heading="Your API keys" />
        )}
      </main>
    </>
  );
}

function SignedOut({ title, message }: { title: string; message: string }) {
  return (
    <>
      <header class="top">
        <h1>{title}</h1>
      </header>
      <main>
        <p role="alert" class="panel signed-out" data-testid="signed-out">
          {message}
        </p>
      </main>
    </>
  );
}

async function start() {
  const root = document.getElementById('console');
  if (root === null) return;
  const title = root.dataset.title ?? 'keygate';
  const code = new URLSearchParams(window.location.hash.slice(1)).get('code');
  // The code is spent by the exchange; it must not stay in the address bar or the history.
  if (code !== null) window.history.replaceState(null, '', window.location.pathname + window.location.search);
  root.textContent = '';
  try {
    const me = code !== null ? await call<Me>('POST', 'session', { code }) : await call<Me>('GET', 'session');
    setCsrfToken(me.session.csrfToken);
    render(<App me={me} title={title} />, root);
  } catch (error) {
    const message =
      error instanceof ApiError && error.status === 401 && code === null
        ? 'Open the console through a link from your application (or keygate console-link).'
        : (error as Error).message;
    render(<SignedOut title={title} message={message} />, root);
  }
}

start();

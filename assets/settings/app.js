// The Settings application's shell: which page the URL's fragment names (`#/tokens`,
// `#/staff/ID`, `#/set-password?token=...`), the signed-in session, the navigation, and the
// two message regions every page writes to (an alert for refusals, a polite live region for
// what went well). Routing is by fragment so that the secrets of links never reach a server.

import { html, render, useEffect, useRef, useState } from './htm-preact-standalone.js';
import { SESSION_ENDED, SessionEnded, Refusal, request, sentence, session } from './api.js';
import { AppContext, useApp } from './ui.js';
import { SetPassword, SetUp, SignIn } from './access.js';
import { Tokens } from './tokens.js';
import { Staff, StaffMember } from './staff.js';
import { Account } from './account.js';
import { AppointmentTypes, Labels, Locations } from './catalogue.js';
import { Practice } from './practice.js';
import { Audit } from './audit.js';
import { Deliveries, Webhooks } from './webhooks.js';

/// The pages of the navigation, in its order: route, link text, page.
const PAGES = [
  ['/tokens', 'API tokens', Tokens],
  ['/staff', 'Staff', Staff],
  ['/account', 'My account', Account],
  ['/practice', 'Practice', Practice],
  ['/labels', 'Labels', Labels],
  ['/locations', 'Locations', Locations],
  ['/appointment-types', 'Appointment types', AppointmentTypes],
  ['/webhooks', 'Webhooks', Webhooks],
  ['/audit', 'Audit log', Audit],
];

/// Pages reached from another page, with an id: `#/staff/ID`, `#/webhooks/ID`.
const DETAILS = {
  staff: StaffMember,
  webhooks: Deliveries,
};

/// Pages that need no session: they come from one-time links.
const PUBLIC = { '/set-password': SetPassword, '/setup': SetUp };

/// The route in the URL's fragment: its path and its query.
const currentRoute = () => {
  const [path, query = ''] = location.hash.replace(/^#/, '').split('?');
  return { path: path || '/', params: new URLSearchParams(query) };
};

/// Where a signed-in user lands: an admin on the tokens, anyone else on their account.
const home = (user) => (user?.role === 'admin' ? '/tokens' : '/account');

function Shell() {
  const [route, setRoute] = useState(currentRoute);
  const [user, setUser] = useState(() => session.read()?.user ?? null);
  const [practice, setPractice] = useState(null);
  const [alert, setAlert] = useState('');
  const [status, setStatus] = useState('');

  // What a page change says on the next page ("You have signed out."); other messages belong
  // to the page they were said on.
  const carried = useRef(null);
  useEffect(() => {
    const follow = () => {
      setRoute(currentRoute());
      setAlert(carried.current?.alert ?? '');
      setStatus(carried.current?.status ?? '');
      carried.current = null;
    };
    addEventListener('hashchange', follow);
    return () => removeEventListener('hashchange', follow);
  }, []);

  // Who is signed in, as the server sees it now, and the practice's name for the header.
  useEffect(() => {
    if (!user) return;
    request('{ currentUser { id firstName lastName role } currentPractice { name } }').then(
      (data) => {
        if (data.currentUser) setUser(data.currentUser);
        setPractice(data.currentPractice?.name ?? null);
      },
      (error) => app.fail(error),
    );
  }, [user?.id]);

  /// Shows the page at `path`, with `messages` (`{ alert, status }`) on it.
  const navigate = (path, messages = null) => {
    carried.current = messages;
    if (currentRoute().path === path) {
      carried.current = null;
      setRoute(currentRoute());
      if (messages) {
        setAlert(messages.alert ?? '');
        setStatus(messages.status ?? '');
      }
    } else {
      location.hash = `#${path}`;
    }
  };

  const app = {
    user,
    say(message) {
      setAlert('');
      setStatus(message);
    },
    fail(error) {
      setStatus('');
      if (error instanceof SessionEnded) {
        setUser(null);
        setPractice(null);
        setAlert(SESSION_ENDED);
        return;
      }
      if (!(error instanceof Refusal)) console.error(error);
      setAlert(sentence(error?.message));
    },
    clear() {
      setAlert('');
      setStatus('');
    },
    /// A session began (sign-in, set-password, first start): show the page asked for, if
    /// any, else the user's home, with `message`.
    signedIn(signedInUser, message) {
      setUser(signedInUser);
      const asked = currentRoute().path;
      const stay = PAGES.some(([path]) => path === asked) || asked.split('/').length > 2;
      navigate(stay ? asked : home(signedInUser), { status: message });
    },
    /// Signs out: the server ends the session (if it has not ended already), the tab forgets it.
    async signOut() {
      await request('mutation { signOut }').catch(() => {});
      session.clear();
      setUser(null);
      setPractice(null);
      navigate('/sign-in', { status: 'You have signed out.' });
    },
    navigate,
    /// The practice's name changed (the Practice page): the header follows.
    renamed: setPractice,
  };

  const page = choosePage(route, user);
  return html`
    <${AppContext.Provider} value=${app}>
      <a class="skip" href="#main" onClick=${skipToMain}>Skip to the page's content</a>
      <${Header} user=${user} practice=${practice} />
      <div class=${user && !page.bare ? 'layout' : 'layout bare'}>
        ${user && !page.bare && html`<${Navigation} path=${route.path} />`}
        <main id="main" tabindex="-1">
          <div class="messages">
            <div class="alert" role="alert">${alert}</div>
            <div class="status" role="status" aria-live="polite">${status}</div>
          </div>
          <${page.component} params=${route.params} id=${page.id} />
        </main>
      </div>
    <//>
  `;
}

/// The page for a route: a public page of a link, the sign-in page without a session, a page
/// of the navigation, a record's page, or "not found".
function choosePage(route, user) {
  if (PUBLIC[route.path]) return { component: PUBLIC[route.path], bare: true };
  if (!user) return { component: SignIn, bare: true };
  if (route.path === '/' || route.path === '/sign-in') return { component: Redirect };
  const page = PAGES.find(([path]) => path === route.path);
  if (page) return { component: page[2] };
  const [, kind, id] = route.path.split('/');
  if (DETAILS[kind] && id) return { component: DETAILS[kind], id: decodeURIComponent(id) };
  return { component: NotFound };
}

/// `#/` (or the sign-in route once signed in): on to the user's home page.
function Redirect() {
  const user = session.read()?.user;
  useEffect(() => {
    location.replace(`#${home(user)}`);
  }, []);
  return null;
}

function NotFound() {
  return html`
    <h1>Page not found</h1>
    <p>There is no page at this address. <a href="#/account">Go to your account</a>.</p>
  `;
}

/// The "skip" link moves focus without changing the fragment, which names the page.
const skipToMain = (event) => {
  event.preventDefault();
  document.getElementById('main')?.focus();
};

function Header({ user, practice }) {
  return html`
    <header class="top">
      <p class="brand">
        <span class="product">Settings</span>
        ${practice && html`<span class="practice">${practice}</span>`}
      </p>
      ${user && html`<${Who} user=${user} />`}
    </header>
  `;
}

/// The signed-in user, and signing out.
function Who({ user }) {
  const app = useApp();
  return html`
    <div class="who">
      <span>Signed in as ${user.firstName} ${user.lastName}</span>
      <button type="button" onClick=${() => app.signOut()}>Sign out</button>
    </div>
  `;
}

function Navigation({ path }) {
  const section = `/${path.split('/')[1] ?? ''}`;
  return html`
    <nav class="side" aria-label="Settings">
      <ul>
        ${PAGES.map(
          ([route, text]) => html`<li>
            <a href=${`#${route}`} aria-current=${route === section ? 'page' : undefined}>${text}</a>
          </li>`,
        )}
      </ul>
    </nav>
  `;
}

const root = document.getElementById('app');
root.replaceChildren(); // the "Loading" line of index.html
render(html`<${Shell} />`, root);

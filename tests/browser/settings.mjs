// Drives practice-api's Settings application (/settings) in Debian's headless Chromium, as
// the people of a clinic would, in several browsers at once (each a fresh context: its own
// session storage): the first admin made with the first-start link; signing out and in (by
// keyboard); an API token for `query:patient` only, made in the page and used over HTTP,
// refused `bookings`, then revoked in the page and refused; a staff member added, their
// set-password link opened in another browser, signed in; disabled, and their open page
// refused; a second admin's password reset, and that admin's other sessions ended; the
// catalogue, the practice, webhooks (a local receiver gets the deliveries) and the audit log.
// Every refusal must show in the page as a sentence in its alert. On every page, axe-core
// finds no serious or critical violation, the page fits a laptop (1280x800) and a tablet
// (768x1024) without sideways scrolling, and a screenshot at 1280x800 is saved.
//
// Run by `cargo test --test settings` (tests/settings.rs), which starts the server and passes:
//   SETTINGS_BASE         http://127.0.0.1:PORT
//   SETTINGS_SETUP_TOKEN  the practice's first-start token (it has no staff yet)
//   SETTINGS_API_TOKEN    an API token with every permission, for what this script does over
//                         HTTP as an integration would (a patient, a second admin)
//   SETTINGS_SCREENSHOTS  the folder for the screenshots (docs/screenshots)
//   CHROMIUM              the browser (default /usr/bin/chromium); none is ever downloaded
//
// axe-core is put in each page with page.evaluate (the DevTools protocol), which the page's
// Content-Security-Policy does not govern: no context bypasses the policy, and any violation
// of it is reported as a failure.
//
// It prints progress on stderr and, last on stdout, one line `RESULT {json}` for the Rust test
// to check again; it exits non-zero at the first failed check.

import { mkdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const env = (name, fallback) => {
  const value = process.env[name] ?? fallback;
  if (value === undefined) throw new Error(`${name} is not set`);
  return value;
};
const base = env('SETTINGS_BASE');
const setupToken = env('SETTINGS_SETUP_TOKEN');
const apiToken = env('SETTINGS_API_TOKEN');
const screenshots = env('SETTINGS_SCREENSHOTS');
const executablePath = env('CHROMIUM', '/usr/bin/chromium');
const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const settings = `${base}/settings/`;
const WAIT = 20_000;
const LAPTOP = { width: 1280, height: 800 };
const TABLET = { width: 768, height: 1024 };
const SESSION_ENDED = 'Your session has ended: sign in again.';

const ADA = { email: 'ada@example.com', first: 'Ada', last: 'Lovelace', password: 'analytical engine 1843' };
const GRACE = { email: 'grace@example.com', first: 'Grace', last: 'Hopper', password: 'nanoseconds of wire' };
const BOB = { email: 'bob@example.com', first: 'Bob', last: 'Kahn', password: 'transmission control' };

const log = (message) => process.stderr.write(`settings.mjs: ${message}\n`);
const summary = {
  refusals: {},
  axe: {},
  fit: {},
  screenshots: [],
  external: [],
  policyViolations: [],
  pageErrors: [],
  http: {},
  webhookPosts: 0,
};
const check = (ok, message, detail = '') => {
  if (!ok) throw new Error(`check failed: ${message}${detail ? `: ${detail}` : ''}`);
  log(`ok: ${message}`);
};

// What `probe` returns once it returns something, or undefined after WAIT ms.
const eventually = async (probe, wait = WAIT) => {
  const deadline = Date.now() + wait;
  for (;;) {
    const value = await probe();
    if (value !== undefined || Date.now() > deadline) return value;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
};

// --- Over HTTP, as an integration -----------------------------------------------------------

const graphql = async (query, variables = {}, token = apiToken) => {
  const headers = { 'content-type': 'application/json' };
  if (token) headers['x-token'] = token;
  const response = await fetch(`${base}/graphql`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ query, variables }),
  });
  return response.json();
};

// --- In the page ------------------------------------------------------------------------------

const heading = (page) => page.locator('h1').first();
const alertOf = (page) => page.locator('.alert[role="alert"]');
const statusOf = (page) => page.locator('.status[role="status"]');
const text = async (locator) => ((await locator.count()) ? (await locator.innerText()).trim() : '');

// Waits for the page's heading to be `title`.
const onPage = async (page, title) => {
  const seen = await eventually(async () => ((await text(heading(page))) === title ? title : undefined));
  check(seen === title, `the page "${title}" is shown`, `the heading is "${await text(heading(page))}"`);
};

// Waits for the alert to say something, checks it is `expected` (when given) and a sentence,
// and records it under `name`.
const refusal = async (page, name, expected) => {
  const said = await eventually(async () => (await text(alertOf(page))) || undefined);
  check(Boolean(said), `the page shows the refusal "${name}" in its alert`);
  if (expected !== undefined) {
    check(
      expected instanceof RegExp ? expected.test(said) : said === expected,
      `the alert says ${expected}`,
      `it says "${said}"`,
    );
  }
  check(/^[A-Z].*[.!?]$/s.test(said), `the refusal "${name}" is a sentence`, said);
  check(await alertOf(page).isVisible(), `the refusal "${name}" is visible`);
  summary.refusals[name] = said;
  return said;
};

// Waits for the live region to say `expected` (a string or a RegExp).
const says = async (page, expected) => {
  const matches = (said) => (expected instanceof RegExp ? expected.test(said) : said === expected);
  const said = await eventually(async () => {
    const now = await text(statusOf(page));
    return matches(now) ? now : undefined;
  });
  const alert = await text(alertOf(page));
  check(said !== undefined, `the page says ${expected}`, `it says "${await text(statusOf(page))}"${alert ? `, alert "${alert}"` : ''}`);
};

// Waits until nothing in the page is loading.
const settled = async (page) => {
  await eventually(async () =>
    (await page.locator('main').innerText()).includes('Loading') ? undefined : true,
  );
};

const field = (page, label) => page.getByLabel(label, { exact: true });
const button = (page, name) => page.getByRole('button', { name, exact: true });
const go = async (page, route) => {
  await page.evaluate((hash) => {
    location.hash = hash;
  }, `#${route}`);
};

// Confirms a ConfirmButton's dialog with the button `confirm`.
const confirm = async (page, opener, confirmLabel) => {
  await button(page, opener).click();
  const dialog = page.locator('dialog[open]');
  await dialog.waitFor();
  await dialog.getByRole('button', { name: confirmLabel, exact: true }).click();
};

// axe-core, the fit on a laptop and a tablet, and a screenshot at laptop size: every page.
// The screenshot shows the top of the page, or `at` (a locator) when given.
const inspect = async (page, name, at = null) => {
  await settled(page);
  if (!(await page.evaluate(() => typeof window.axe === 'object'))) await page.evaluate(axeSource);
  const result = await page.evaluate(() =>
    window.axe.run(document, { resultTypes: ['violations'] }),
  );
  const grave = result.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      nodes: v.nodes.map((n) => n.target.join(' ')).slice(0, 5),
    }));
  const minor = result.violations.filter((v) => !grave.some((g) => g.id === v.id));
  if (minor.length) log(`axe, ${name}: minor: ${minor.map((v) => `${v.id} (${v.impact})`).join(', ')}`);
  summary.axe[name] = grave;
  check(grave.length === 0, `axe finds no serious or critical violation on "${name}"`, JSON.stringify(grave));

  const overflow = () =>
    page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  await page.setViewportSize(TABLET);
  const tablet = await overflow();
  await page.setViewportSize(LAPTOP);
  const laptop = await overflow();
  summary.fit[name] = { laptop, tablet };
  check(laptop <= 0 && tablet <= 0, `"${name}" fits a laptop and a tablet`, `overflows by ${laptop}/${tablet} px`);

  await page.evaluate(() => window.scrollTo(0, 0));
  if (at) await at.evaluate((element) => element.scrollIntoView({ block: 'start' }));
  const path = join(screenshots, `${name}.png`);
  await page.screenshot({ path });
  summary.screenshots.push(`${name}.png`);
};

// --- Browsers -------------------------------------------------------------------------------

const isLocal = (url) => url.startsWith(`${base}/`) || /^(data|blob|about|chrome-error):/.test(url);

let browser;
const newContext = async (who) => {
  const context = await browser.newContext({ viewport: LAPTOP });
  context.setDefaultTimeout(WAIT);
  context.on('request', (request) => {
    if (!isLocal(request.url())) {
      summary.external.push(request.url());
      log(`EXTERNAL REQUEST from ${who}: ${request.url()}`);
    }
  });
  await context.route((url) => !isLocal(url.href), (route) => route.abort('blockedbyclient'));
  const page = await context.newPage();
  page.on('pageerror', (error) => summary.pageErrors.push(`${who}: ${error}`));
  page.on('console', (message) => {
    if (/Content.Security.Policy/i.test(message.text())) {
      summary.policyViolations.push(`${who}: ${message.text()}`);
    } else if (message.type() === 'error' && !/Failed to load resource/.test(message.text())) {
      log(`console error in ${who}: ${message.text()}`);
    }
  });
  return page;
};

const signIn = async (page, person) => {
  await field(page, 'Email').fill(person.email);
  await field(page, 'Password').fill(person.password);
  await button(page, 'Sign in').click();
};

// A webhook receiver, as an integration runs one: it answers 204 to every delivery.
const receiver = createServer((request, response) => {
  request.resume();
  request.on('end', () => {
    summary.webhookPosts += 1;
    response.writeHead(204).end();
  });
});

const pages = [];
try {
  mkdirSync(screenshots, { recursive: true });
  await new Promise((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const receiverUrl = `http://127.0.0.1:${receiver.address().port}/hooks/practice`;
  browser = await chromium.launch({
    executablePath,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    timeout: 60_000,
  });

  // 1. The first start: the link `serve` prints makes the first admin, who is signed in.
  const ada = await newContext('Ada');
  pages.push(ada);
  const response = await ada.goto(`${settings}#/setup?token=${encodeURIComponent(setupToken)}`);
  const headers = response.headers();
  check(response.status() === 200, 'GET /settings/ answers 200');
  check(/frame-ancestors 'none'/.test(headers['content-security-policy'] ?? ''), 'the page is sent with its Content-Security-Policy');
  await onPage(ada, 'Set up the practice');
  await inspect(ada, 'setup');
  await field(ada, 'Email').fill(ADA.email);
  await field(ada, 'First name').fill(ADA.first);
  await field(ada, 'Last name').fill(ADA.last);
  await field(ada, 'New password').fill(ADA.password);
  await field(ada, 'New password, again').fill(`${ADA.password}!`);
  await button(ada, 'Create admin and sign in').click();
  await refusal(ada, 'passwords differ', 'The two passwords differ: type the same password twice.');
  await field(ada, 'New password, again').fill(ADA.password);
  await button(ada, 'Create admin and sign in').click();
  await onPage(ada, 'API tokens');
  await says(ada, 'You are the practice’s first admin, and signed in.');
  check(!ada.url().includes(setupToken), 'the first-start token has left the address bar');
  const stored = await ada.evaluate(() => ({
    local: localStorage.length,
    session: Object.keys(sessionStorage).map((key) => sessionStorage.getItem(key)).join(''),
  }));
  check(stored.local === 0 && stored.session.includes('"token":"pa_'), 'the session token is in sessionStorage, nothing in localStorage');

  // The link works once.
  const late = await newContext('a second visitor of the first-start link');
  pages.push(late);
  await late.goto(`${settings}#/setup?token=${encodeURIComponent(setupToken)}`);
  await onPage(late, 'Set up the practice');
  await field(late, 'Email').fill('mallory@example.com');
  await field(late, 'First name').fill('Mallory');
  await field(late, 'Last name').fill('Late');
  await field(late, 'New password').fill('another long password');
  await field(late, 'New password, again').fill('another long password');
  await button(late, 'Create admin and sign in').click();
  await refusal(late, 'first-start link used');

  // 2. Sign out, then sign in again with the keyboard alone; a wrong password first.
  await button(ada, 'Sign out').click();
  await onPage(ada, 'Sign in');
  await says(ada, 'You have signed out.');
  await inspect(ada, 'sign-in');
  await signIn(ada, { ...ADA, password: 'not the password' });
  await refusal(ada, 'wrong password');
  await field(ada, 'Email').fill('');
  await field(ada, 'Password').fill('');
  // A page opens with the focus on its heading (as after a reload); Tab goes on from there.
  await heading(ada).focus();
  await ada.keyboard.press('Tab');
  const focused = await ada.evaluate(() => ({
    label: document.activeElement?.labels?.[0]?.textContent,
    outline: getComputedStyle(document.activeElement).outlineStyle,
  }));
  check(focused.label === 'Email', 'Tab reaches the email field', JSON.stringify(focused));
  check(focused.outline !== 'none', 'the focused field shows a visible outline', JSON.stringify(focused));
  await ada.keyboard.type(ADA.email);
  await ada.keyboard.press('Tab');
  await ada.keyboard.type(ADA.password);
  await ada.keyboard.press('Enter');
  await onPage(ada, 'API tokens');
  await says(ada, 'Welcome, Ada.');

  // The practice's name and time zone.
  await go(ada, '/practice');
  await onPage(ada, 'Practice');
  await eventually(async () => ((await field(ada, 'Name').inputValue()) ? true : undefined));
  await field(ada, 'Name').fill('Riverside Clinic');
  await field(ada, 'Time zone').selectOption('Europe/London');
  await button(ada, 'Save').click();
  await says(ada, 'The practice is saved: Riverside Clinic, Europe/London.');
  await inspect(ada, 'practice');

  // 3. A token for query:patient only: made in the page, its secret read from the page.
  const made = await graphql(
    `mutation { createPatient(patientData: { first: "Jane", last: "Doe", email: "jane@example.com" }) { data { id } error } }`,
  );
  const patientId = made.data?.createPatient?.data?.id;
  check(Boolean(patientId), 'a patient is made over HTTP', JSON.stringify(made));
  await go(ada, '/tokens');
  await onPage(ada, 'API tokens');
  await field(ada, 'Name').fill('Patient reader');
  await field(ada, 'Find an operation').fill('patient');
  await ada.getByRole('checkbox', { name: /^query:patient (?!s)/ }).check();
  check(
    (await text(ada.locator('.summary'))).replace(/\s+/g, ' ') === 'The token will have: query:patient',
    'the page says the token will have query:patient only',
    await text(ada.locator('.summary')),
  );
  await inspect(ada, 'tokens-new', ada.getByRole('group', { name: 'What may it do?' }));
  await button(ada, 'Make the token').click();
  await says(ada, 'The token “Patient reader” is made.');
  const secret = await ada.getByRole('textbox', { name: 'Secret of the new token' }).inputValue();
  check(/^pa_[^_]+_[0-9a-f]{64}$/.test(secret), 'the page shows the new secret');
  check(
    (await text(ada.locator('.secret .warning'))).includes('shown only this once'),
    'the secret comes with a warning that it is shown once',
  );
  await inspect(ada, 'tokens');
  const madeRow = ada.getByRole('row', { name: /Patient reader/ });
  await eventually(async () => ((await text(madeRow)).includes('Ada Lovelace') ? true : undefined));
  check((await text(madeRow)).includes('Ada Lovelace'), 'the list says who made the token', await text(madeRow));

  const read = await graphql('query($id: ID!) { patient(id: $id) { firstName lastName } }', { id: patientId }, secret);
  check(read.data?.patient?.firstName === 'Jane', 'the new token reads the patient over HTTP', JSON.stringify(read));
  const bookings = await graphql('{ bookings { data { id } } }', {}, secret);
  summary.http.bookingsRefused = bookings.errors?.[0] ?? null;
  check(bookings.errors?.[0]?.extensions?.code === 'FORBIDDEN', 'the new token is refused bookings', JSON.stringify(bookings));

  // 4. Revoked in the page; the next request with it is refused.
  await button(ada, 'I have copied it').click();
  check((await ada.locator('.secret').count()) === 0, 'the secret is gone once copied');
  await button(ada, 'Revoke Patient reader').click();
  await ada.locator('dialog[open]').waitFor();
  await ada.keyboard.press('Escape');
  await eventually(async () => ((await ada.locator('dialog[open]').count()) === 0 ? true : undefined));
  check((await ada.locator('dialog[open]').count()) === 0, 'Escape closes the confirmation');
  await confirm(ada, 'Revoke Patient reader', 'Revoke the token');
  await says(ada, 'The token “Patient reader” is revoked: it is refused from now on.');
  const row = ada.getByRole('row', { name: /Patient reader/ });
  await eventually(async () => ((await text(row)).includes('Revoked') ? true : undefined));
  check((await text(row)).includes('Revoked'), 'the list shows the token revoked');
  const after = await graphql('query($id: ID!) { patient(id: $id) { firstName } }', { id: patientId }, secret);
  summary.http.revokedRefused = after.errors?.[0] ?? null;
  check(after.errors?.[0]?.extensions?.code === 'UNAUTHENTICATED', 'the revoked token is refused', JSON.stringify(after));

  // 5. The catalogue; a refused change shows the server's sentence.
  await go(ada, '/labels');
  await onPage(ada, 'Labels');
  await field(ada, 'Title').fill('VIP');
  await button(ada, 'Add label').click();
  await says(ada, 'The label “VIP” is added.');
  await field(ada, 'Title').fill('VIP');
  await button(ada, 'Add label').click();
  await refusal(ada, 'label taken');
  await field(ada, 'Title').fill('Allergy');
  await field(ada, 'Colour').fill('#b91c1c');
  await button(ada, 'Add label').click();
  await says(ada, 'The label “Allergy” is added.');
  await inspect(ada, 'labels');

  await go(ada, '/locations');
  await onPage(ada, 'Locations');
  await field(ada, 'Name').fill('Main surgery');
  await field(ada, 'Street and number').fill('1 High Street');
  await field(ada, 'Town or city').fill('Riverside');
  await button(ada, 'Add location').click();
  await says(ada, 'The location “Main surgery” is added.');
  await inspect(ada, 'locations');

  await go(ada, '/appointment-types');
  await onPage(ada, 'Appointment types');
  await field(ada, 'Title').fill('Initial consultation');
  await field(ada, 'Duration (minutes)').fill('45');
  await field(ada, 'Price (optional)').fill('80');
  await button(ada, 'Add appointment type').click();
  await says(ada, 'The appointment type “Initial consultation” is added.');
  await inspect(ada, 'appointment-types');

  // 6. A staff member: added in the page, their link opened in another browser, signed in.
  await go(ada, '/staff');
  await onPage(ada, 'Staff');
  await field(ada, 'First name').fill(GRACE.first);
  await field(ada, 'Last name').fill(GRACE.last);
  await field(ada, 'Email').fill(GRACE.email);
  await field(ada, 'Role').selectOption('receptionist');
  await button(ada, 'Add staff member').click();
  await says(ada, 'Grace Hopper is added: hand them the set-password link.');
  const link = await ada.getByRole('textbox', { name: 'Set-password link' }).inputValue();
  check(link.startsWith(`${settings}#/set-password?token=`), 'the page shows the set-password link', link);
  await inspect(ada, 'staff');
  await button(ada, 'I have copied it').click();

  const grace = await newContext('Grace');
  pages.push(grace);
  await grace.goto(link);
  await onPage(grace, 'Choose your password');
  await inspect(grace, 'set-password');
  await field(grace, 'New password').fill('short');
  await field(grace, 'New password, again').fill('short');
  await button(grace, 'Set password and sign in').click();
  await refusal(grace, 'password too short', 'The password is too short: use at least 8 characters.');
  await field(grace, 'New password').fill(GRACE.password);
  await field(grace, 'New password, again').fill(GRACE.password);
  await button(grace, 'Set password and sign in').click();
  await onPage(grace, 'My account');
  await says(grace, 'Your password is set, and you are signed in.');
  check(!grace.url().includes('token='), 'the set-password token has left the address bar');
  await button(grace, 'Sign out').click();
  await onPage(grace, 'Sign in');
  await signIn(grace, GRACE);
  await onPage(grace, 'My account');
  check((await text(grace.locator('.who'))).includes('Grace Hopper'), 'Grace is signed in with her new password');

  // A receptionist may not see the tokens: the page says the server's sentence.
  await go(grace, '/tokens');
  await onPage(grace, 'API tokens');
  await refusal(grace, 'no permission', /^Missing permission settings/);

  // The set-password link works once.
  const again = await newContext('a second visitor of the set-password link');
  pages.push(again);
  await again.goto(link);
  await onPage(again, 'Choose your password');
  await field(again, 'New password').fill('yet another password');
  await field(again, 'New password, again').fill('yet another password');
  await button(again, 'Set password and sign in').click();
  await refusal(again, 'set-password link used');

  // 7. Disabled in the admin's page: her open page is refused, and she cannot sign in.
  await go(ada, '/staff');
  await onPage(ada, 'Staff');
  await ada.getByRole('link', { name: 'Grace Hopper', exact: true }).click();
  await onPage(ada, 'Grace Hopper');
  await eventually(async () => ((await ada.getByRole('row', { name: /this session|End session/ }).count()) ? true : undefined));
  await inspect(ada, 'staff-member');
  await confirm(ada, 'Disable Grace Hopper', 'Disable');
  await says(ada, 'Grace Hopper is disabled: their sessions have ended.');
  await go(grace, '/account');
  await onPage(grace, 'Sign in');
  await refusal(grace, 'session ended (disabled)', SESSION_ENDED);
  await signIn(grace, GRACE);
  await refusal(grace, 'disabled account signs in');
  check(
    (await text(heading(grace))) === 'Sign in',
    'the disabled account stays on the sign-in page',
  );

  // Enabled again, she signs in; the admin ends that session from her page, and her page
  // is refused in turn.
  await button(ada, 'Enable Grace Hopper').click();
  await says(ada, 'Grace Hopper is enabled.');
  await signIn(grace, GRACE);
  await onPage(grace, 'My account');
  await button(ada, 'Refresh the sessions').click();
  const graceSession = ada.getByRole('button', { name: 'End session', exact: true });
  await eventually(async () => ((await graceSession.count()) === 1 ? true : undefined));
  await graceSession.click();
  await says(ada, 'The session has ended.');
  await go(grace, '/staff');
  await onPage(grace, 'Sign in');
  await refusal(grace, 'session ended (ended by an admin)', SESSION_ENDED);

  // Nobody disables their own account.
  const me = await graphql('{ users { data { id email } } }');
  const adaId = me.data.users.data.find((user) => user.email === ADA.email).id;
  await go(ada, `/staff/${adaId}`);
  await onPage(ada, 'Ada Lovelace');
  await confirm(ada, 'Disable Ada Lovelace', 'Disable');
  await refusal(ada, 'own account');

  // 8. A second admin, with a session over HTTP and one in a browser; their password reset.
  const bobMade = await graphql(
    `mutation($input: CreateUserInput!) { createUser(input: $input) { data { id } error setPasswordToken } }`,
    { input: { email: BOB.email, firstName: BOB.first, lastName: BOB.last, role: 'admin' } },
  );
  const bobLink = bobMade.data?.createUser?.setPasswordToken;
  check(Boolean(bobLink), 'a second admin is made over HTTP', JSON.stringify(bobMade));
  const bobSet = await graphql(
    `mutation($t: String!, $p: String!) { setPassword(setPasswordToken: $t, password: $p) { token error } }`,
    { t: bobLink, p: BOB.password },
    null,
  );
  const bobToken = bobSet.data?.setPassword?.token;
  check(Boolean(bobToken), 'the second admin has a session over HTTP', JSON.stringify(bobSet));
  const bobMinted = await graphql(
    'mutation { createApiToken(name: "Bob\'s script", permissions: ["patients:read"]) { token error } }',
    {},
    bobToken,
  );
  const bobApiToken = bobMinted.data?.createApiToken?.token;
  check(Boolean(bobApiToken), 'the second admin makes an API token over HTTP', JSON.stringify(bobMinted));
  const bob = await newContext('Bob');
  pages.push(bob);
  await bob.goto(settings);
  await onPage(bob, 'Sign in');
  await signIn(bob, BOB);
  await onPage(bob, 'API tokens');

  await go(ada, '/staff');
  await onPage(ada, 'Staff');
  await ada.getByRole('link', { name: 'Bob Kahn', exact: true }).click();
  await onPage(ada, 'Bob Kahn');
  await confirm(ada, "Reset Bob Kahn's password", 'Reset password');
  await says(ada, "Bob Kahn's password is reset: hand them the new link.");
  const bobNewLink = await ada.getByRole('textbox', { name: 'Set-password link' }).inputValue();
  check(bobNewLink.startsWith(`${settings}#/set-password?token=`), 'the page shows the new set-password link');
  const bobAfter = await graphql('{ currentUser { id } }', {}, bobToken);
  summary.http.resetRefused = bobAfter.errors?.[0] ?? null;
  check(bobAfter.errors?.[0]?.extensions?.code === 'UNAUTHENTICATED', "the second admin's HTTP session has ended", JSON.stringify(bobAfter));
  await go(bob, '/staff');
  await onPage(bob, 'Sign in');
  await refusal(bob, 'session ended (password reset)', SESSION_ENDED);
  await signIn(bob, BOB);
  await refusal(bob, 'old password after a reset');
  // The reset left the API token he made; disabled with his tokens, it is refused too.
  const bobScript = () => graphql('{ patients { data { id } } }', {}, bobApiToken);
  check(!(await bobScript()).errors, "the second admin's API token outlives his password");
  await confirm(ada, 'Disable Bob Kahn and revoke their tokens', 'Disable and revoke');
  await says(ada, 'Bob Kahn is disabled: their sessions have ended, and the API tokens they made are revoked.');
  const scriptAfter = await bobScript();
  check(scriptAfter.errors?.[0]?.extensions?.code === 'UNAUTHENTICATED', "the second admin's API token is refused", JSON.stringify(scriptAfter));

  // 9. My account: a wrong current password is refused; a change ends the other sessions.
  const adaOther = await graphql(
    `mutation($e: String!, $p: String!) { signIn(email: $e, password: $p) { token error } }`,
    { e: ADA.email, p: ADA.password },
    null,
  );
  const adaOtherToken = adaOther.data?.signIn?.token;
  check(Boolean(adaOtherToken), 'Ada has another session, over HTTP');
  await go(ada, '/account');
  await onPage(ada, 'My account');
  await eventually(async () => ((await ada.getByRole('row', { name: /this session/ }).count()) ? true : undefined));
  check((await ada.getByRole('row').count()) >= 3, 'My account lists both of her sessions');
  await inspect(ada, 'account');
  const newPassword = 'difference engine 1822';
  await field(ada, 'Current password').fill('not my password');
  await field(ada, 'New password').fill(newPassword);
  await field(ada, 'New password, again').fill(newPassword);
  await button(ada, 'Change password').click();
  await refusal(ada, 'wrong current password');
  await field(ada, 'Current password').fill(ADA.password);
  await field(ada, 'New password').fill(newPassword);
  await field(ada, 'New password, again').fill(newPassword);
  await button(ada, 'Change password').click();
  await says(ada, 'Your password is changed. Your other sessions have ended; this one goes on.');
  const otherAfter = await graphql('{ currentUser { id } }', {}, adaOtherToken);
  check(otherAfter.errors?.[0]?.extensions?.code === 'UNAUTHENTICATED', "Ada's other session has ended");
  await go(ada, '/tokens');
  await onPage(ada, 'API tokens');
  await settled(ada);
  check((await text(alertOf(ada))) === '', "Ada's own session goes on");

  // 10. Webhooks: made with its secret shown once, delivered to a local receiver, paused and
  //     resumed, its delivery log, and a delivery sent again.
  await go(ada, '/webhooks');
  await onPage(ada, 'Webhooks');
  await field(ada, 'Label').fill('CRM sync');
  await field(ada, 'Address (URL)').fill(receiverUrl);
  await ada.getByRole('checkbox', { name: 'label.created', exact: true }).check();
  await ada.getByRole('checkbox', { name: 'patient.created', exact: true }).check();
  await button(ada, 'Make the webhook').click();
  await says(ada, 'The webhook “CRM sync” is made.');
  const signing = await ada.getByRole('textbox', { name: 'Signing secret' }).inputValue();
  check(signing.startsWith('whsec_'), 'the page shows the signing secret');
  await inspect(ada, 'webhooks');
  await button(ada, 'I have copied it').click();
  await graphql('mutation { createLabel(title: "Diabetic", color: "#0369a1") { data { id } error } }');
  const delivered = await eventually(() => (summary.webhookPosts >= 1 ? true : undefined), 30_000);
  check(delivered === true, 'the receiver got the label.created delivery');
  await button(ada, 'Pause CRM sync').click();
  await says(ada, '“CRM sync” is paused: its deliveries wait.');
  await button(ada, 'Resume CRM sync').click();
  await says(ada, '“CRM sync” is resumed: what waited is being sent.');
  await ada.getByRole('link', { name: 'CRM sync', exact: true }).click();
  await onPage(ada, 'Deliveries of “CRM sync”');
  const deliveredRow = await eventually(async () => {
    const rowText = await text(ada.getByRole('row', { name: /label\.created/ }));
    if (rowText.includes('delivered')) return rowText;
    await button(ada, 'Refresh the log').click();
    await settled(ada);
    return undefined;
  }, 30_000);
  check(Boolean(deliveredRow), 'the delivery log shows the delivery as delivered');
  await inspect(ada, 'webhook-deliveries');
  const posts = summary.webhookPosts;
  await ada.getByRole('button', { name: /^Send again the label\.created delivery/ }).first().click();
  await says(ada, 'The label.created delivery is due again now.');
  check((await eventually(() => (summary.webhookPosts > posts ? true : undefined), 30_000)) === true, 'the receiver got it again');

  // 11. The audit log, filtered by patient, then by actor.
  await go(ada, '/audit');
  await onPage(ada, 'Audit log');
  await settled(ada);
  await inspect(ada, 'audit');
  await field(ada, 'Patient ID').fill(patientId);
  await button(ada, 'Show events').click();
  const patientRows = await eventually(async () => {
    const rows = await ada.getByRole('row').allInnerTexts();
    return rows.some((r) => r.includes('Patient reader') && r.includes('read')) ? rows : undefined;
  });
  check(Boolean(patientRows), "filtered by the patient, the log shows the token's read of her");
  await button(ada, 'Clear filters').click();
  await field(ada, 'Who').selectOption({ label: 'Grace Hopper (staff)' });
  await button(ada, 'Show events').click();
  const graceRows = await eventually(async () => {
    const rows = (await ada.getByRole('row').allInnerTexts()).slice(1);
    return rows.length && rows.every((r) => r.includes('Grace Hopper')) ? rows : undefined;
  });
  check(Boolean(graceRows), 'filtered by actor, the log shows only what Grace did');

  // Nothing went elsewhere, nothing broke, the policy held.
  check(summary.external.length === 0, 'no request to any other host', summary.external.join(', '));
  check(summary.pageErrors.length === 0, 'no uncaught error in any page', summary.pageErrors.join(' | '));
  check(
    summary.policyViolations.length === 0,
    'no Content-Security-Policy violation',
    summary.policyViolations.join(' | '),
  );
  process.stdout.write(`RESULT ${JSON.stringify(summary)}\n`);
} catch (error) {
  log(String(error?.stack ?? error));
  if (summary.pageErrors.length) log(`page errors: ${summary.pageErrors.join(' | ')}`);
  if (summary.policyViolations.length) log(`policy violations: ${summary.policyViolations.join(' | ')}`);
  for (const [index, page] of pages.entries()) {
    const path = join(tmpdir(), `practice-api-settings-failure-${process.pid}-${index}.png`);
    await page.screenshot({ path }).then(() => log(`screenshot of the failure: ${path}`), () => {});
  }
  process.exitCode = 1;
} finally {
  await browser?.close().catch(() => {});
  receiver.close();
}

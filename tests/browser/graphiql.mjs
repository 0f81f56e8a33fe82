// Drives practice-api's GraphiQL page in Debian's headless Chromium, as a person would: the
// page renders, the token goes into the Headers tab, a query runs and shows its result, and
// the documentation explorer shows the schema's descriptions. The page must ask no host but
// the server for anything.
//
// Run by `cargo test --test graphiql` (tests/graphiql.rs), which starts the server and passes:
//   GRAPHIQL_URL         http://127.0.0.1:PORT/graphql
//   GRAPHIQL_TOKEN       a token with every permission
//   GRAPHIQL_EXPECT      the practice name the query must return
//   GRAPHIQL_SCREENSHOT  where to save the screenshot (PNG)
//   CHROMIUM             the browser (default /usr/bin/chromium); no browser is ever downloaded
//
// It prints progress on stderr and, last on stdout, one line `RESULT {json}` for the Rust test
// to check again; it exits non-zero at the first failed check.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const env = (name, fallback) => {
  const value = process.env[name] ?? fallback;
  if (value === undefined) throw new Error(`${name} is not set`);
  return value;
};
const pageUrl = env('GRAPHIQL_URL');
const token = env('GRAPHIQL_TOKEN');
const expectedName = env('GRAPHIQL_EXPECT');
const screenshot = env('GRAPHIQL_SCREENSHOT');
const executablePath = env('CHROMIUM', '/usr/bin/chromium');
const origin = new URL(pageUrl).origin;
const WAIT = 20_000;

const log = (message) => process.stderr.write(`graphiql.mjs: ${message}\n`);
const check = (ok, message, detail = '') => {
  if (!ok) throw new Error(`check failed: ${message}${detail}`);
  log(`ok: ${message}`);
};

// What `probe` returns once it returns something, or undefined after WAIT ms.
const eventually = async (probe) => {
  const deadline = Date.now() + WAIT;
  for (;;) {
    const value = await probe();
    if (value !== undefined || Date.now() > deadline) return value;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
};

// Only the server, and URLs that never leave the browser.
const isLocal = (url) =>
  url.startsWith(`${origin}/`) || /^(data|blob|about|chrome-error):/.test(url);

const userDataDir = mkdtempSync(join(tmpdir(), 'practice-api-chromium-'));
let context;
const summary = { external: [], pageErrors: [], consoleErrors: [] };
try {
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
    viewport: { width: 1400, height: 900 },
    timeout: 60_000,
  });
  context.setDefaultTimeout(WAIT);

  // Every request the page makes is seen here; one to another host is recorded (and then
  // refused, so that a regression fails fast instead of waiting on a network that is not there).
  const introspections = [];
  context.on('request', (request) => {
    const url = request.url();
    if (!isLocal(url)) {
      summary.external.push(url);
      log(`EXTERNAL REQUEST: ${request.method()} ${url}`);
    }
    const body = request.postData() ?? '';
    if (request.method() === 'POST' && body.includes('__schema')) {
      introspections.push({ token: request.headers()['x-token'] ?? null, request });
    }
  });
  await context.route(
    (url) => !isLocal(url.href),
    (route) => route.abort('blockedbyclient'),
  );

  const page = context.pages()[0] ?? (await context.newPage());
  page.on('pageerror', (error) => summary.pageErrors.push(String(error)));
  page.on('console', (message) => {
    if (message.type() === 'error') summary.consoleErrors.push(message.text());
  });

  // 1. The page renders GraphiQL from the server's own files.
  const response = await page.goto(pageUrl, { waitUntil: 'load' });
  check(response?.status() === 200, `GET ${pageUrl} answers 200 (got ${response?.status()})`);
  check(
    (response.headers()['content-type'] ?? '').startsWith('text/html'),
    'the page is HTML',
  );
  const rendered = await eventually(async () => {
    if (summary.pageErrors.length) return `an uncaught error: ${summary.pageErrors.join(' | ')}`;
    if (summary.external.length) return `a request to another host: ${summary.external.join(', ')}`;
    if (await page.locator('.graphiql-container').count()) return 'rendered';
    return undefined;
  });
  check(rendered === 'rendered', 'GraphiQL rendered', `; instead: ${rendered ?? 'nothing in time'}`);
  const queryEditor = page.locator('.graphiql-query-editor .CodeMirror').first();
  await queryEditor.waitFor();
  const editorValue = (locator) =>
    locator.evaluate((element) => element.CodeMirror.getValue());
  check(
    (await editorValue(queryEditor)).includes('currentPractice'),
    'GraphiQL shows the default query',
  );

  // 2. The Headers tab is open with {"x-token": ""}.
  const headersTool = page.locator('section.graphiql-editor-tool[aria-label="Headers"]');
  const headersEditor = headersTool.locator('.graphiql-editor:not(.hidden) .CodeMirror');
  await headersEditor.waitFor();
  check(
    JSON.parse(await editorValue(headersEditor))['x-token'] === '',
    'the Headers tab is open, with an empty x-token',
  );

  // 3. Paste the token into the Headers editor, as a person would.
  const loadIntrospections = introspections.length;
  await headersEditor.click();
  await page.keyboard.press('ControlOrMeta+A');
  await page.keyboard.insertText(JSON.stringify({ 'x-token': token }, null, 2));
  check(
    JSON.parse(await editorValue(headersEditor))['x-token'] === token,
    'the token is in the Headers editor',
  );

  // 4. The page fetches the schema again, with the token, on its own.
  const withToken = await eventually(() =>
    introspections.slice(loadIntrospections).find((i) => i.token === token),
  );
  check(withToken !== undefined, 'the schema was fetched again with the token from the Headers tab');
  const introspection = await (await withToken.request.response()).json();
  check(
    introspection?.data?.__schema !== undefined,
    'the server answered that introspection with the schema',
  );

  // 5. Run a query: the result pane shows the practice.
  await queryEditor.evaluate((element) =>
    element.CodeMirror.setValue('{ currentPractice { name } }'),
  );
  const resultEditor = page.locator('.graphiql-response .CodeMirror').first();
  const before = await editorValue(resultEditor);
  const answered = page.waitForResponse(
    (r) => r.request().method() === 'POST' && (r.request().postData() ?? '').includes('currentPractice'),
  );
  await page.locator('.graphiql-execute-button').click();
  const queryResponse = await answered;
  check(queryResponse.status() === 200, `the query was answered (${queryResponse.status()})`);
  // The pane shows the new result once it differs from what it showed before.
  await page.waitForFunction((previous) => {
    const value = document.querySelector('.graphiql-response .CodeMirror')?.CodeMirror.getValue();
    return value && value !== previous;
  }, before);
  const resultText = await editorValue(resultEditor);
  try {
    summary.result = JSON.parse(resultText);
  } catch {
    summary.result = resultText;
  }
  check(
    summary.result?.data?.currentPractice?.name === expectedName,
    `the result pane shows the practice ${JSON.stringify(expectedName)}`,
    `; it shows:\n${resultText}`,
  );
  check(
    (await page.locator('.graphiql-response').innerText()).includes(expectedName),
    'the practice name is visible in the result pane',
  );

  // 6. The documentation explorer shows the schema's descriptions: Query, then patient.
  await page.locator('button[aria-label="Show Documentation Explorer"]').click();
  const docs = page.locator('.graphiql-doc-explorer');
  await docs.locator('a.graphiql-doc-explorer-type-name', { hasText: /^Query$/ }).first().click();
  await docs.locator('a.graphiql-doc-explorer-field-name', { hasText: /^patient$/ }).first().click();
  const description = docs.locator('.graphiql-markdown-description', {
    hasText: 'One patient, by id',
  });
  await description.first().waitFor();
  summary.docs = (await description.first().innerText()).trim();
  check(
    summary.docs.includes('One patient, by id'),
    'the documentation explorer shows the description of Query.patient',
  );
  await page.screenshot({ path: screenshot });
  log(`screenshot: ${screenshot}`);

  // 7. The headers are persisted: after a reload the token is still there, and the schema is
  //    fetched with it at once.
  const beforeReload = introspections.length;
  await page.reload({ waitUntil: 'load' });
  await headersEditor.waitFor();
  check(
    JSON.parse(await editorValue(headersEditor))['x-token'] === token,
    'after a reload, the token is still in the Headers tab',
  );
  const first = await eventually(() => introspections[beforeReload]);
  check(first?.token === token, 'after a reload, the schema is fetched with the token at once');
  // The token lives in this tab's session storage only: nothing of it in local storage,
  // where every later visit (and any script of the origin, for good) could read it.
  const stored = await page.evaluate(() => ({
    local: Object.keys(localStorage).map((k) => localStorage.getItem(k)).join('\n'),
    session: Object.keys(sessionStorage).map((k) => sessionStorage.getItem(k)).join('\n'),
  }));
  check(!stored.local.includes(token), 'the token is not in local storage');
  check(stored.session.includes(token), 'the token is in the session storage');

  // 8. Nothing went elsewhere, nothing broke.
  check(
    summary.external.length === 0,
    `no request to any host but ${origin}`,
    `; saw: ${summary.external.join(', ')}`,
  );
  check(
    summary.pageErrors.length === 0,
    'no uncaught error in the page',
    `; saw: ${summary.pageErrors.join(' | ')}`,
  );
  summary.screenshot = screenshot;
  process.stdout.write(`RESULT ${JSON.stringify(summary)}\n`);
} catch (error) {
  log(String(error?.stack ?? error));
  if (summary.pageErrors.length) log(`page errors: ${summary.pageErrors.join(' | ')}`);
  if (summary.consoleErrors.length) log(`console errors: ${summary.consoleErrors.join(' | ')}`);
  if (context) {
    const failure = screenshot.replace(/\.png$/, '') + '-failure.png';
    await context.pages()[0]?.screenshot({ path: failure }).then(
      () => log(`screenshot of the failure: ${failure}`),
      () => {},
    );
  }
  process.exitCode = 1;
} finally {
  await context?.close().catch(() => {});
  rmSync(userDataDir, { recursive: true, force: true });
}

#!/usr/bin/env node
// GraphQL-over-HTTP conformance audit (graphql-http's server audit suite).
//
//   npm ci --prefix .ci
//   AUDIT_URL=http://127.0.0.1:8080/graphql AUDIT_TOKEN=secret node .ci/audit.mjs
//
// AUDIT_URL    (required) full URL of the GraphQL endpoint.
// AUDIT_TOKEN  (optional) sent as `x-token: <token>` on every request.
//
// Output: one line per audit, `PASS|FAIL|WARN <name> [<id>]` where <name> starts
// with its level (MUST/SHOULD/MAY), followed by indented failure details, then
// `audit: K warnings ...` and `audit: N passed, M failed`.
// Failing MUST audits count as failed; failing SHOULD/MAY audits as warnings.
// A request that could not complete at all (connection refused, reset, 10 s
// timeout) is reported as FAIL whatever the level.
// Exit code: 1 if anything counted as failed (or on bad configuration), else 0.
//
// Note: this runs the same audits as graphql-http's `auditServer` (which is just
// `Promise.all(serverAudits(opts).map((a) => a.fn()))`), but settles each audit
// separately so one transport error does not hide the other 60 results.

import { serverAudits } from 'graphql-http';

const REQUEST_TIMEOUT_MS = 10_000;
const BODY_SNIPPET_CHARS = 300;

function die(msg) {
  console.error(`audit: ${msg}`);
  process.exit(1);
}

if (typeof fetch !== 'function') die('global fetch is unavailable; use Node.js >= 20');

const rawUrl = process.env.AUDIT_URL;
if (!rawUrl) die('AUDIT_URL is not set (e.g. AUDIT_URL=http://127.0.0.1:8080/graphql)');
let url;
try {
  url = new URL(rawUrl).toString();
} catch {
  die(`AUDIT_URL is not a valid URL: ${JSON.stringify(rawUrl)}`);
}
const token = process.env.AUDIT_TOKEN ?? '';
if (!token) console.error('audit: warning: AUDIT_TOKEN is not set; requests carry no x-token header');

let authRejections = 0; // 401/403 responses seen (likely a bad or missing token)

/** fetch wrapper: adds x-token and a per-request timeout. */
async function fetchFn(input, init) {
  const opts = { ...(init ?? {}) };
  const headers = new Headers(
    init?.headers ?? (input instanceof Request ? input.headers : undefined),
  );
  if (token) headers.set('x-token', token);
  opts.headers = headers;
  const timeout = AbortSignal.timeout(REQUEST_TIMEOUT_MS);
  opts.signal =
    init?.signal && typeof AbortSignal.any === 'function'
      ? AbortSignal.any([init.signal, timeout])
      : timeout;
  const res = await fetch(input, opts);
  if (res.status === 401 || res.status === 403) authRejections++;
  return res;
}

function oneLine(s, max) {
  const flat = String(s).replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max)}…` : flat;
}

function describeError(err) {
  if (err?.name === 'TimeoutError') {
    return `request timed out after ${REQUEST_TIMEOUT_MS / 1000} s (no complete response)`;
  }
  let msg = `${err?.name ?? 'Error'}: ${err?.message ?? String(err)}`;
  // undici puts the socket-level reason (ECONNREFUSED, ECONNRESET, ...) in `cause`.
  for (let c = err?.cause, depth = 0; c && depth < 3; c = c.cause, depth++) {
    msg += ` <- ${c.code ? `${c.code} ` : ''}${c.message ?? String(c)}`;
  }
  return oneLine(msg, 500);
}

async function describeResponse(res) {
  if (!res || typeof res.status !== 'number') return [];
  const lines = [
    `response: ${res.status} ${res.statusText || ''}`.trimEnd() +
      `, content-type: ${res.headers.get('content-type') ?? '(none)'}`,
  ];
  let body;
  if (res.bodyUsed) {
    body = '(body already consumed by the audit)';
  } else {
    try {
      const text = await res.text();
      body = text === '' ? '(empty)' : oneLine(text, BODY_SNIPPET_CHARS);
    } catch (err) {
      body = `(could not read body: ${describeError(err)})`;
    }
  }
  lines.push(`body: ${body}`);
  return lines;
}

const audits = serverAudits({ url, fetchFn });
console.log(`audit: running ${audits.length} GraphQL-over-HTTP audits against ${url}`);

const settled = await Promise.allSettled(audits.map((a) => a.fn()));

let passed = 0;
let failed = 0;
let warnings = 0;
let transportErrors = 0;

for (let i = 0; i < audits.length; i++) {
  const { id, name } = audits[i];
  const level = name.split(' ', 1)[0]; // MUST | SHOULD | MAY
  const outcome = settled[i];
  const details = [];
  let verdict;

  if (outcome.status === 'rejected') {
    // Not an assertion failure: the request itself failed.
    verdict = 'FAIL';
    failed++;
    transportErrors++;
    details.push(`request error: ${describeError(outcome.reason)}`);
  } else if (outcome.value.status === 'ok') {
    verdict = 'PASS';
    passed++;
  } else {
    if (level === 'MUST') {
      verdict = 'FAIL';
      failed++;
    } else {
      verdict = 'WARN';
      warnings++;
    }
    details.push(`reason: ${outcome.value.reason}`);
    details.push(...(await describeResponse(outcome.value.response)));
  }

  console.log(`${verdict} ${name} [${id}]`);
  for (const d of details) console.log(`    ${d}`);
}

if (transportErrors === audits.length) {
  console.log(`audit: no audit got a response from ${url}; is the server running?`);
}
if (authRejections > 0) {
  console.log(
    `audit: note: ${authRejections} response(s) were 401/403; check AUDIT_TOKEN ` +
      '(4xx-expecting audits can pass spuriously when auth rejects the request)',
  );
}
console.log(`audit: ${warnings} warnings (SHOULD or MAY items not met)`);
console.log(`audit: ${passed} passed, ${failed} failed`);
process.exitCode = failed > 0 ? 1 : 0;

// A webhook receiver on loopback whose signature check is the npm standardwebhooks package,
// for the Rust tests to drive:
//
//   node receiver.mjs
//
// It prints {"listening": "http://127.0.0.1:PORT/"} first, then one JSON line per request:
// {"id", "timestamp", "signature", "body", "verified": [index of each secret that verifies],
//  "error", "status", "path", "headers"}. On stdin it takes JSON lines:
//   {"secrets": ["whsec_...", ...]}   the secrets to check signatures with
//   {"answer": [500, 200, ...]}        the statuses to answer with, in turn (then 200)
//   {"retryAfter": "2"}                a Retry-After header on answers that are not 2xx
import http from 'node:http';
import readline from 'node:readline';
import { Webhook } from 'standardwebhooks';

let secrets = [];
let answers = [];
let retryAfter = null;
const say = (line) => process.stdout.write(JSON.stringify(line) + '\n');

readline.createInterface({ input: process.stdin }).on('line', (line) => {
  const command = JSON.parse(line);
  if (command.secrets) secrets = command.secrets;
  if (command.answer) answers = command.answer;
  if ('retryAfter' in command) retryAfter = command.retryAfter;
  say({ ok: Object.keys(command) });
});

const server = http.createServer((request, response) => {
  const chunks = [];
  request.on('data', (chunk) => chunks.push(chunk));
  request.on('end', () => {
    const body = Buffer.concat(chunks).toString('utf8');
    const verified = [];
    let error = null;
    secrets.forEach((secret, index) => {
      try {
        new Webhook(secret).verify(body, request.headers);
        verified.push(index);
      } catch (e) {
        error = String(e.message ?? e);
      }
    });
    const status = answers.length > 0 ? answers.shift() : 200;
    say({
      id: request.headers['webhook-id'],
      timestamp: request.headers['webhook-timestamp'],
      signature: request.headers['webhook-signature'],
      method: request.method,
      path: request.url,
      headers: request.headers,
      body,
      verified,
      error: verified.length > 0 ? null : error,
      status,
      at: Date.now(),
    });
    const headers = { 'content-type': 'text/plain' };
    if (status >= 300 && retryAfter !== null) headers['retry-after'] = retryAfter;
    response.writeHead(status, headers);
    response.end('ok');
  });
});
server.listen(0, '127.0.0.1', () => {
  say({ listening: `http://127.0.0.1:${server.address().port}/hooks` });
});

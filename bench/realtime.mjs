// The realtime benchmark's client (bench/realtime runs it): N websocket subscribers speaking
// graphql-transport-ws with the `ws` package, a steady stream of changes over HTTP, and the
// figures: delivery latency from commit to subscriber (p50, p99, max), events lost, and the
// server's memory per idle connection.
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';

const require = createRequire(new URL('../tests/realtime/package.json', import.meta.url));
const WebSocket = require('ws');

const [url, token, pid, n, rate, seconds] = process.argv.slice(2);
const subscribers = Number(n);
const wsUrl = url.replace(/^http/, 'ws');
const rssMb = () => {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((l) => l.startsWith('VmRSS:'));
  return Number(line.split(/\s+/)[1]) / 1024;
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const gql = async (query, variables = {}) => {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-token': token },
    body: JSON.stringify({ query, variables }),
  });
  return response.json();
};

await gql('{ currentPractice { id } }');
await sleep(500);
const before = rssMb();

const latencies = [];
const received = new Array(subscribers).fill(0);
let subscribed = 0;
const sockets = [];
const open = (i) =>
  new Promise((resolve, reject) => {
    const socket = new WebSocket(wsUrl, 'graphql-transport-ws');
    socket.on('open', () => socket.send(JSON.stringify({ type: 'connection_init', payload: { 'x-token': token } })));
    socket.on('message', (data) => {
      const message = JSON.parse(data);
      if (message.type === 'connection_ack') {
        socket.send(JSON.stringify({
          id: '1', type: 'subscribe',
          payload: { query: 'subscription { events(eventTypes: ["label.created"]) { id occurredAt } }' },
        }));
        subscribed += 1;
        resolve();
      } else if (message.type === 'next') {
        const at = Date.parse(message.payload.data.events.occurredAt);
        latencies.push(Date.now() - at);
        received[i] += 1;
      } else if (message.type === 'ping') {
        socket.send(JSON.stringify({ type: 'pong' }));
      } else if (message.type === 'error') {
        reject(new Error(JSON.stringify(message.payload)));
      }
    });
    socket.on('error', reject);
    socket.on('close', (code, reason) => {
      if (subscribed < subscribers) reject(new Error(`closed ${code} ${reason}`));
    });
    sockets.push(socket);
  });
for (let i = 0; i < subscribers; i += 50) {
  await Promise.all(Array.from({ length: Math.min(50, subscribers - i) }, (_, k) => open(i + k)));
}
await sleep(2000);
const idle = rssMb();

// A steady stream of changes: `rate` labels a second.
const total = Math.round(Number(rate) * Number(seconds));
const every = 1000 / Number(rate);
const started = Date.now();
for (let k = 0; k < total; k += 1) {
  const due = started + k * every;
  if (due > Date.now()) await sleep(due - Date.now());
  const result = await gql('mutation($t: String!) { createLabel(title: $t) { data { id } error } }', { t: `Bench ${k}` });
  if (!result.data?.createLabel?.data) throw new Error(JSON.stringify(result));
}
await sleep(3000);
const busy = rssMb();
for (const socket of sockets) socket.terminate();

latencies.sort((a, b) => a - b);
const at = (q) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))];
const expected = total * subscribers;
const figures = {
  subscribers,
  changes: total,
  delivered: latencies.length,
  lost: expected - latencies.length,
  p50_ms: at(0.5),
  p99_ms: at(0.99),
  max_ms: latencies[latencies.length - 1],
  rss_before_mb: Number(before.toFixed(1)),
  rss_idle_mb: Number(idle.toFixed(1)),
  rss_busy_mb: Number(busy.toFixed(1)),
  kib_per_idle_connection: Number((((idle - before) * 1024) / subscribers).toFixed(1)),
};
console.log(JSON.stringify(figures));
console.log(`| ${subscribers} | ${rate}/s for ${seconds} s | ${figures.delivered} of ${expected} | ${figures.p50_ms} | ${figures.p99_ms} | ${figures.max_ms} | ${figures.kib_per_idle_connection} |`);
// An event not delivered is a fault, not a figure.
process.exit(figures.lost === 0 ? 0 : 1);

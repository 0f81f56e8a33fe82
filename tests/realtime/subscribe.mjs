// A subscriber written with the npm graphql-ws client, for the Rust tests to drive:
//
//   node subscribe.mjs WS_URL TOKEN '{"query": "...", "variables": {...}}'
//
// It prints one JSON line per thing that happens: {"next": payload}, {"error": [errors]},
// {"complete": true}, {"closed": {"code", "reason"}}, and {"connected": true} once acknowledged.
// It exits after the subscription ends (complete, error or close).
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';

const [url, token, request] = process.argv.slice(2);
const say = (line) => process.stdout.write(JSON.stringify(line) + '\n');

const client = createClient({
  url,
  webSocketImpl: WebSocket,
  connectionParams: token ? { 'x-token': token } : undefined,
  lazy: true,
  retryAttempts: 0,
  on: {
    connected: () => say({ connected: true }),
    closed: (event) => say({ closed: { code: event.code, reason: event.reason } }),
  },
});

await new Promise((resolve) => {
  client.subscribe(JSON.parse(request), {
    next: (payload) => say({ next: payload }),
    error: (error) => {
      if (Array.isArray(error)) say({ error });
      else if (typeof error?.code === 'number') say({ closed: { code: error.code, reason: error.reason } });
      else say({ failed: String(error?.message ?? error) });
      resolve();
    },
    complete: () => {
      say({ complete: true });
      resolve();
    },
  });
});
await client.dispose();
process.exit(0);

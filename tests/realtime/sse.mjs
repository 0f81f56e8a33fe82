// A subscriber written with the npm graphql-sse client (distinct connections mode), for the
// Rust tests to drive:
//
//   node sse.mjs HTTP_URL TOKEN '{"query": "...", "variables": {...}}'
//
// It prints one JSON line per thing that happens: {"next": payload}, {"complete": true},
// {"failed": message, "status"?}; it exits after the operation ends.
import { createClient } from 'graphql-sse';

const [url, token, request] = process.argv.slice(2);
const say = (line) => process.stdout.write(JSON.stringify(line) + '\n');

const client = createClient({
  url,
  headers: token ? { 'x-token': token } : {},
  retryAttempts: 0,
  on: { connected: () => say({ connected: true }) },
});

await new Promise((resolve) => {
  client.subscribe(JSON.parse(request), {
    next: (payload) => say({ next: payload }),
    error: (error) => {
      say({ failed: String(error?.message ?? error), status: error?.response?.status });
      resolve();
    },
    complete: () => {
      say({ complete: true });
      resolve();
    },
  });
});
client.dispose();
process.exit(0);

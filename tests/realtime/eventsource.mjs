// An EventSource, as a browser's parses a stream (the npm eventsource package, which follows
// the HTML specification), on one GraphQL operation sent by GET, for the Rust tests to drive:
//
//   node eventsource.mjs HTTP_URL TOKEN QUERY
//
// The token goes in the x-token header, which a browser's EventSource cannot send; the rest is
// the browser's. It prints one JSON line per thing that happens: {"next": payload},
// {"complete": data} when the `complete` event is dispatched (it is not without a data field),
// {"error": message} when the stream fails or ends without one; it exits after the first
// `complete` or error, and does not reconnect.
import { EventSource } from 'eventsource';

const [url, token, query] = process.argv.slice(2);
const say = (line) => process.stdout.write(JSON.stringify(line) + '\n');

const source = new EventSource(`${url}?query=${encodeURIComponent(query)}`, {
  fetch: (input, init) =>
    fetch(input, { ...init, headers: { ...init?.headers, 'x-token': token } }),
});
const end = () => {
  source.close();
  process.exit(0);
};
source.addEventListener('next', (event) => say({ next: JSON.parse(event.data) }));
source.addEventListener('complete', (event) => {
  say({ complete: event.data });
  end();
});
source.addEventListener('error', (event) => {
  say({ error: String(event?.message ?? 'the stream failed or ended') });
  end();
});

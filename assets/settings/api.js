// The one way the Settings application talks to the server: the public GraphQL API at
// /graphql, POST with JSON, the session's token in the x-token header. Every refusal becomes
// a `Refusal` whose message is a sentence for the person in front of the page:
//
// - a GraphQL error (no permission, an invalid argument, a rate limit): the server's message;
// - a mutation's `{ data, error }` envelope with `error` set: that sentence;
// - a token the server no longer takes (expired, revoked, signed out, account disabled):
//   `SessionEnded`, "Your session has ended: sign in again.", and the session is forgotten;
// - no answer, or an answer that is not GraphQL: a sentence saying so.
//
// The session lives in sessionStorage, never localStorage: it ends with the tab, and no later
// visit finds it.

const SESSION_KEY = 'practice-api.settings.session';

export const SESSION_ENDED = 'Your session has ended: sign in again.';

/// A refusal, in a sentence for a person; `code` is the GraphQL error's, when there was one.
export class Refusal extends Error {
  constructor(sentence, code = null) {
    super(sentence);
    this.code = code;
  }
}

/// The server refused the session's token: the person must sign in again.
export class SessionEnded extends Refusal {
  constructor() {
    super(SESSION_ENDED, 'UNAUTHENTICATED');
  }
}

/// A message as a sentence: a capital first, a full stop last.
export const sentence = (text) => {
  const trimmed = String(text ?? '').trim();
  if (!trimmed) return 'The server refused this without saying why.';
  const capital = trimmed[0].toUpperCase() + trimmed.slice(1);
  return /[.!?]$/.test(capital) ? capital : `${capital}.`;
};

/// The signed-in session of this tab: `{ token, expiresAt, user }`, or null.
export const session = {
  read() {
    try {
      return JSON.parse(sessionStorage.getItem(SESSION_KEY) ?? 'null');
    } catch {
      return null;
    }
  },
  write(value) {
    sessionStorage.setItem(SESSION_KEY, JSON.stringify(value));
  },
  clear() {
    sessionStorage.removeItem(SESSION_KEY);
  },
};

/// Runs a GraphQL document and returns its `data`; throws a `Refusal` for any error. With
/// `anonymous`, no token is sent (signIn, setPassword, createFirstAdmin).
export async function request(query, variables = {}, { anonymous = false } = {}) {
  const token = anonymous ? null : session.read()?.token;
  const headers = { 'content-type': 'application/json', accept: 'application/json' };
  if (token) headers['x-token'] = token;
  let response;
  try {
    response = await fetch('/graphql', {
      method: 'POST',
      headers,
      body: JSON.stringify({ query, variables }),
      credentials: 'omit',
      cache: 'no-store',
    });
  } catch {
    throw new Refusal('The server could not be reached: check the connection and try again.');
  }
  let body;
  try {
    body = await response.json();
  } catch {
    throw new Refusal(
      `The server answered with HTTP ${response.status} and no result: try again in a moment.`,
    );
  }
  const error = body?.errors?.[0];
  if (error) {
    const code = error.extensions?.code ?? null;
    if (code === 'UNAUTHENTICATED' && token) {
      session.clear();
      throw new SessionEnded();
    }
    throw new Refusal(sentence(error.message), code);
  }
  if (!body?.data) throw new Refusal('The server answered without a result: try again.');
  return body.data;
}

/// Runs a mutation and returns its payload (`data[field]`); a payload whose `error` is set
/// throws that sentence.
export async function mutate(query, variables, field, options) {
  const data = await request(query, variables, options);
  const payload = data[field];
  if (payload?.error) throw new Refusal(sentence(payload.error));
  return payload;
}

/// The fields of a signed-in session kept in the tab.
export const SIGNED_IN = 'token expiresAt user { id firstName lastName role } error';

/// Keeps a SignInPayload's token as the tab's session.
export const remember = (payload) => {
  session.write({ token: payload.token, expiresAt: payload.expiresAt, user: payload.user });
  return payload.user;
};

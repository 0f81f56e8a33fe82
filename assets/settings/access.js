// The pages that begin a session: signing in with email and password, setting a password
// with the one-time link an admin handed over (`#/set-password?token=...`), and making a
// practice's first admin with the link `practice-api serve` prints (`#/setup?token=...`).
// The last two send no x-token: the link's token is the credential.

import { Refusal, SIGNED_IN, mutate, remember } from './api.js';
import { Field, Page, html, onSubmit, useAction, useApp, useState } from './ui.js';

/// Shortest password the server takes (setPassword, createFirstAdmin, changePassword).
export const MIN_PASSWORD = 8;

export function SignIn() {
  const app = useApp();
  const [run, busy] = useAction();
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const signIn = () =>
    run(async () => {
      const payload = await mutate(
        `mutation signIn($email: String!, $password: String!) {
          signIn(email: $email, password: $password) { ${SIGNED_IN} }
        }`,
        { email, password },
        'signIn',
        { anonymous: true },
      );
      app.signedIn(remember(payload), `Welcome, ${payload.user.firstName}.`);
    });
  return html`
    <${Page} title="Sign in">
      <form class="narrow" onSubmit=${onSubmit(signIn)}>
        <${Field}
          label="Email"
          type="email"
          autocomplete="username"
          required
          value=${email}
          onValue=${setEmail}
        />
        <${Field}
          label="Password"
          type="password"
          autocomplete="current-password"
          required
          value=${password}
          onValue=${setPassword}
        />
        <button type="submit" class="primary" disabled=${busy}>Sign in</button>
      </form>
    <//>
  `;
}

/// A new password, typed twice. Calls `onPassword(password)` once both agree.
export function NewPassword({ submitLabel, busy, onPassword, children }) {
  const app = useApp();
  const [password, setPassword] = useState('');
  const [again, setAgain] = useState('');
  const submit = () => {
    if (password !== again) {
      app.fail(new Refusal('The two passwords differ: type the same password twice.'));
    } else if (password.length < MIN_PASSWORD) {
      app.fail(new Refusal(`The password is too short: use at least ${MIN_PASSWORD} characters.`));
    } else {
      onPassword(password);
    }
  };
  return html`
    <form class="narrow" onSubmit=${onSubmit(submit)}>
      ${children}
      <${Field}
        label="New password"
        type="password"
        autocomplete="new-password"
        required
        hint=${`At least ${MIN_PASSWORD} characters; a few words make a good one.`}
        value=${password}
        onValue=${setPassword}
      />
      <${Field}
        label="New password, again"
        type="password"
        autocomplete="new-password"
        required
        value=${again}
        onValue=${setAgain}
      />
      <button type="submit" class="primary" disabled=${busy}>${submitLabel}</button>
    </form>
  `;
}

/// The token of a one-time link, or a refusal saying the link is cut short.
const linkToken = (params) => {
  const token = params.get('token');
  if (!token) {
    throw new Refusal(
      'This link has no token: open the whole link, or ask an admin of the practice for a new one.',
    );
  }
  return token;
};

/// `[submit, busy]` for a one-time link's page: `submit(variables)` runs the mutation
/// `field` (a SignInPayload) with the link's token as `$token`, sends no x-token, takes the
/// token out of the address bar and the tab's history, and keeps the new session.
function useLinkSignIn(params, field, query, message) {
  const app = useApp();
  const [run, busy] = useAction();
  const submit = (variables) =>
    run(async () => {
      const payload = await mutate(query, { token: linkToken(params), ...variables }, field, {
        anonymous: true,
      });
      history.replaceState(null, '', `${location.pathname}#/`);
      app.signedIn(remember(payload), message);
    });
  return [submit, busy];
}

export function SetPassword({ params }) {
  const [setPassword, busy] = useLinkSignIn(
    params,
    'setPassword',
    `mutation setPassword($token: String!, $password: String!) {
      setPassword(setPasswordToken: $token, password: $password) { ${SIGNED_IN} }
    }`,
    'Your password is set, and you are signed in.',
  );
  return html`
    <${Page}
      title="Choose your password"
      intro="An admin of the practice gave you this link. It works once: choose the password you will sign in with."
    >
      <${NewPassword}
        submitLabel="Set password and sign in"
        busy=${busy}
        onPassword=${(password) => setPassword({ password })}
      />
    <//>
  `;
}

export function SetUp({ params }) {
  const [email, setEmail] = useState('');
  const [firstName, setFirstName] = useState('');
  const [lastName, setLastName] = useState('');
  const [createFirstAdmin, busy] = useLinkSignIn(
    params,
    'createFirstAdmin',
    `mutation createFirstAdmin($token: String!, $email: String!, $firstName: String!,
                               $lastName: String!, $password: String!) {
      createFirstAdmin(setupToken: $token, email: $email, firstName: $firstName,
                       lastName: $lastName, password: $password) { ${SIGNED_IN} }
    }`,
    'You are the practice’s first admin, and signed in.',
  );
  return html`
    <${Page}
      title="Set up the practice"
      intro="The practice has no staff yet. Make its first admin: you. This link works once."
    >
      <${NewPassword}
        submitLabel="Create admin and sign in"
        busy=${busy}
        onPassword=${(password) => createFirstAdmin({ email, firstName, lastName, password })}
      >
        <${Field} label="Email" type="email" autocomplete="username" required value=${email} onValue=${setEmail} />
        <${Field}
          label="First name"
          autocomplete="given-name"
          required
          value=${firstName}
          onValue=${setFirstName}
        />
        <${Field}
          label="Last name"
          autocomplete="family-name"
          required
          value=${lastName}
          onValue=${setLastName}
        />
      <//>
    <//>
  `;
}

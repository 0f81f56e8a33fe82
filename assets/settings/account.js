// My account: who is signed in, changing one's own password (every other session ends; this
// one goes on), and one's own sessions.

import { mutate, request } from './api.js';
import { NewPassword } from './access.js';
import { Sessions } from './staff.js';
import { Field, Page, Section, html, useAction, useApp, useLoad, useState } from './ui.js';

export function Account() {
  const app = useApp();
  const me = useLoad(async () => (await request('{ currentUser { id fullName email role } }')).currentUser);
  const [round, setRound] = useState(0);
  return html`
    <${Page} title="My account">
      ${me.data &&
      html`<dl class="facts">
        <dt>Name</dt><dd>${me.data.fullName}</dd>
        <dt>Email</dt><dd>${me.data.email}</dd>
        <dt>Role</dt><dd>${me.data.role}</dd>
      </dl>`}
      ${me.data === null && !me.loading && html`<p>This session belongs to an API token, not to a staff user.</p>`}
      <${Section} title="Change my password">
        <${ChangePassword} onChanged=${() => setRound(round + 1)} />
      <//>
      <${Section} title="My sessions">
        <${Sessions} own key=${round} userId=${app.user?.id} />
      <//>
    <//>
  `;
}

function ChangePassword({ onChanged }) {
  const [run, busy] = useAction();
  const [current, setCurrent] = useState('');
  const [round, setRound] = useState(0);
  const change = (newPassword) =>
    run(async () => {
      await mutate(
        `mutation changePassword($current: String!, $new: String!) {
          changePassword(currentPassword: $current, newPassword: $new) { expiresAt user { id } error }
        }`,
        { current, new: newPassword },
        'changePassword',
      );
      setCurrent('');
      setRound(round + 1);
      onChanged();
    }, 'Your password is changed. Your other sessions have ended; this one goes on.');
  return html`
    <${NewPassword} key=${round} submitLabel="Change password" busy=${busy} onPassword=${change}>
      <${Field}
        label="Current password"
        type="password"
        autocomplete="current-password"
        required
        value=${current}
        onValue=${setCurrent}
      />
    <//>
  `;
}

// Staff: the practice's staff users, adding one (the set-password link is shown once, to be
// handed over: the server sends no email), and a staff member's own page: their role,
// disabling and enabling them, resetting their password (a new link, shown once; every
// session of theirs ends), and their sessions, each of which can be ended.

import { mutate, request } from './api.js';
import {
  Checkbox,
  ConfirmButton,
  Field,
  OneTimeSecret,
  Page,
  Pager,
  Section,
  Table,
  emptyText,
  When,
  html,
  onSubmit,
  useAction,
  useApp,
  useLoad,
  usePagedList,
  useState,
} from './ui.js';

export const ROLES = [
  ['receptionist', 'Receptionist (bookings; reads patients)'],
  ['practitioner', 'Practitioner (patients, bookings, labels)'],
  ['admin', 'Admin (everything)'],
];

const roleName = (role) => (role ? role[0].toUpperCase() + role.slice(1) : '—');

const USER_FIELDS = 'id firstName lastName fullName email role isDoctor deleted lastSignInAt';

/// The link a set-password token makes, for this server.
const setPasswordLink = (token) =>
  `${location.origin}/settings/#/set-password?token=${encodeURIComponent(token)}`;

/// The link of a new set-password token, shown once.
const LinkOnce = ({ link, onDone }) => html`<${OneTimeSecret}
  title=${`Set-password link for ${link.name}`}
  label="Set-password link"
  value=${link.url}
  warning=${`Hand this link to ${link.name} yourself (no email is sent). It works once, for 72 hours, and is shown only now. Whoever opens it chooses the password of this account.`}
  onDone=${onDone}
/>`;

export function Staff() {
  const users = usePagedList('users', USER_FIELDS);
  const [link, setLink] = useState(null);
  const rows = (users.data?.data ?? []).map(
    (user) => html`
      <tr>
        <th scope="row"><a href=${`#/staff/${encodeURIComponent(user.id)}`}>${user.fullName}</a></th>
        <td>${user.email}</td>
        <td>${roleName(user.role)}${user.isDoctor ? ', doctor' : ''}</td>
        <td>${user.deleted ? 'Disabled' : 'Active'}</td>
        <td><${When} value=${user.lastSignInAt} empty="Never" /></td>
      </tr>
    `,
  );
  return html`
    <${Page} title="Staff" intro="Who works in the practice, and what each may do. Open a staff member to change their role, disable them, reset their password or end their sessions.">
      ${link && html`<${LinkOnce} link=${link} onDone=${() => setLink(null)} />`}
      <${Section} title="Staff members">
        <${Table}
          caption="Staff of the practice, by last name"
          head=${['Name', 'Email', 'Role', 'State', 'Last sign-in']}
          rows=${rows}
          empty=${emptyText(users, 'No staff yet.')}
        />
        <${Pager} pageInfo=${users.data?.pageInfo} onPage=${users.setPage} label="Pages of staff" />
      <//>
      <${Section} title="Add a staff member">
        <${NewStaff}
          onCreated=${(user, token) => {
            setLink({ name: user.fullName, url: setPasswordLink(token) });
            users.reload();
          }}
        />
      <//>
    <//>
  `;
}

function NewStaff({ onCreated }) {
  const [run, busy] = useAction();
  const empty = { email: '', firstName: '', lastName: '', role: 'receptionist', isDoctor: false };
  const [input, setInput] = useState(empty);
  const set = (name) => (value) => setInput({ ...input, [name]: value });
  const create = () =>
    run(
      async () => {
        const payload = await mutate(
          `mutation createUser($input: CreateUserInput!) {
            createUser(input: $input) { data { id fullName } error setPasswordToken }
          }`,
          { input },
          'createUser',
        );
        onCreated(payload.data, payload.setPasswordToken);
        setInput(empty);
        return payload.data;
      },
      (user) => `${user.fullName} is added: hand them the set-password link.`,
    );
  return html`
    <form onSubmit=${onSubmit(create)}>
      <div class="row">
        <${Field} label="First name" required value=${input.firstName} onValue=${set('firstName')} />
        <${Field} label="Last name" required value=${input.lastName} onValue=${set('lastName')} />
      </div>
      <div class="row">
        <${Field}
          label="Email"
          type="email"
          required
          hint="They sign in with it."
          value=${input.email}
          onValue=${set('email')}
        />
        <${Field} label="Role" as="select" options=${ROLES} value=${input.role} onValue=${set('role')} />
      </div>
      <${Checkbox}
        label="Sees patients and can be booked (a doctor)"
        checked=${input.isDoctor}
        onChange=${set('isDoctor')}
      />
      <button type="submit" class="primary" disabled=${busy}>Add staff member</button>
    </form>
  `;
}

/// One staff member's page: `#/staff/ID`.
export function StaffMember({ id }) {
  const app = useApp();
  const user = useLoad(
    async () => (await request(`query user($id: ID!) { user(id: $id) { ${USER_FIELDS} } }`, { id })).user,
    [id],
  );
  const [run, busy] = useAction();
  const [link, setLink] = useState(null);
  const [role, setRole] = useState(null);
  const found = user.data;
  if (!found) {
    return html`<${Page} title=${user.loading ? 'Staff member' : 'No such staff member'}>
      <p>${user.loading ? 'Loading…' : html`<a href="#/staff">Back to the staff</a>`}</p>
    <//>`;
  }
  const name = found.fullName;
  // `revokeApiTokens`, which disableUser and resetUserPassword take: their API tokens go too.
  const change = (field, done, revokeApiTokens = false) =>
    run(
      () =>
        mutate(
          revokeApiTokens
            ? `mutation ${field}($id: ID!) { ${field}(id: $id, revokeApiTokens: true) { data { id } error setPasswordToken } }`
            : `mutation ${field}($id: ID!) { ${field}(id: $id) { data { id } error setPasswordToken } }`,
          { id },
          field,
        ),
      done,
    ).then((payload) => {
      if (payload?.setPasswordToken) setLink({ name, url: setPasswordLink(payload.setPasswordToken) });
      user.reload();
    });
  const saveRole = () =>
    run(
      () =>
        mutate(
          `mutation updateUser($id: ID!, $role: String!) {
            updateUser(id: $id, input: { role: $role }) { data { id role } error }
          }`,
          { id, role: role ?? found.role },
          'updateUser',
        ),
      (payload) => `${name} is now ${roleName(payload.data.role).toLowerCase()}.`,
    ).then(user.reload);
  return html`
    <${Page} title=${name}>
      <p><a href="#/staff">All staff</a></p>
      ${link && html`<${LinkOnce} link=${link} onDone=${() => setLink(null)} />`}
      <dl class="facts">
        <dt>Email</dt><dd>${found.email}</dd>
        <dt>Role</dt><dd>${roleName(found.role)}${found.isDoctor ? ', doctor' : ''}</dd>
        <dt>State</dt><dd>${found.deleted ? 'Disabled: cannot sign in' : 'Active'}</dd>
        <dt>Last sign-in</dt><dd><${When} value=${found.lastSignInAt} empty="Never" /></dd>
      </dl>
      <${Section} title="Role">
        <form class="inline" onSubmit=${onSubmit(saveRole)}>
          <${Field}
            label="Role"
            as="select"
            options=${ROLES}
            value=${role ?? found.role}
            onValue=${setRole}
          />
          <button type="submit" disabled=${busy}>Change role</button>
        </form>
      <//>
      <${Section} title="Access">
        ${found.deleted
          ? html`<p>${name} is disabled. Enabling lets them sign in again with their password; their ended sessions stay ended.</p>
              <button type="button" disabled=${busy} onClick=${() => change('enableUser', `${name} is enabled.`)}>
                Enable ${name}
              </button>`
          : html`<p>Disabling ends every session of ${name} at once, and they can no longer sign in. The API tokens they made keep working (the clinic's integrations outlive whoever set them up), unless you revoke them too: do, if their account may have been taken over.</p>
              <div class="actions">
                <${ConfirmButton}
                  label=${`Disable ${name}`}
                  question=${`Disable ${name}? Every session of theirs ends at once, and they can no longer sign in.`}
                  confirmLabel="Disable"
                  danger
                  disabled=${busy}
                  onConfirm=${() => change('disableUser', `${name} is disabled: their sessions have ended.`)}
                />
                <${ConfirmButton}
                  label=${`Disable ${name} and revoke their tokens`}
                  question=${`Disable ${name} and revoke every API token they made? Their sessions end, and every integration using one of their tokens stops working at once. This cannot be undone.`}
                  confirmLabel="Disable and revoke"
                  danger
                  disabled=${busy}
                  onConfirm=${() =>
                    change('disableUser', `${name} is disabled: their sessions have ended, and the API tokens they made are revoked.`, true)}
                />
              </div>`}
      <//>
      <${Section} title="Password">
        <p>Resetting ends ${name}'s password and every session of theirs at once, and gives you a new set-password link to hand them.</p>
        <${ConfirmButton}
          label=${`Reset ${name}'s password`}
          question=${`Reset ${name}'s password? Their password stops working and every session of theirs ends at once.`}
          confirmLabel="Reset password"
          danger
          disabled=${busy}
          onConfirm=${() =>
            change('resetUserPassword', `${name}'s password is reset: hand them the new link.`)}
        />
      <//>
      <${Section} title="Sessions">
        <${Sessions} userId=${id} key=${`${id}-${found.deleted}`} own=${app.user?.id === id} />
      <//>
    <//>
  `;
}

/// The live sessions of a user (the caller's own when `userId` is not given), each of which
/// can be ended. Ending the caller's current session signs them out.
export function Sessions({ userId, own }) {
  const app = useApp();
  const sessions = useLoad(
    async () =>
      (
        await request(
          `query sessions($userId: ID) { sessions(userId: $userId) { id createdAt lastUsedAt expiresAt current } }`,
          { userId },
        )
      ).sessions,
    [userId],
  );
  const [run, busy] = useAction();
  const end = (session) =>
    run(async () => {
      const { revokeSession } = await request(
        `mutation revokeSession($id: ID!) { revokeSession(id: $id) }`,
        { id: session.id },
      );
      if (session.current) {
        await app.signOut();
        return null;
      }
      sessions.reload();
      return revokeSession ? 'The session has ended.' : 'There was no such session to end.';
    }, (message) => message);
  const rows = (sessions.data ?? []).map(
    (session) => html`
      <tr>
        <th scope="row"><${When} value=${session.createdAt} />${session.current ? ' (this session)' : ''}</th>
        <td><${When} value=${session.lastUsedAt} empty="Not yet" /></td>
        <td><${When} value=${session.expiresAt} /></td>
        <td>
          <button type="button" disabled=${busy} onClick=${() => end(session)}>
            ${session.current ? 'End this session (sign out)' : 'End session'}
          </button>
        </td>
      </tr>
    `,
  );
  return html`
    <p><button type="button" onClick=${sessions.reload}>Refresh the sessions</button></p>
    <${Table}
      caption=${own ? 'Your signed-in sessions, newest first' : 'Signed-in sessions, newest first'}
      head=${['Signed in', 'Last used', 'Ends', 'Actions']}
      rows=${rows}
      empty=${emptyText(sessions, 'No session: not signed in anywhere.')}
    />
  `;
}

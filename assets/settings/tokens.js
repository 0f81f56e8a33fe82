// API tokens: for integrations where nobody signs in. A token is made with a name, an expiry
// and permissions chosen as a person thinks of them (everything; read or write per resource;
// single operations picked from the schema's own list, read by introspection); its secret is
// shown once. The list shows each token's last use; revoking asks first.

import { Refusal, mutate, request } from './api.js';
import {
  Checkbox,
  ConfirmButton,
  Field,
  OneTimeSecret,
  Page,
  Section,
  Table,
  When,
  emptyText,
  html,
  onSubmit,
  useAction,
  useId,
  useLoad,
  useState,
} from './ui.js';

/// The resources a permission reads or writes, as `patients:read`, `patients:write`.
const RESOURCES = [
  ['patients', 'Patients', 'Patients, their details and their labels.'],
  ['bookings', 'Bookings', 'Bookings; reading also reads locations and appointment types.'],
  ['labels', 'Labels', 'The catalogue of labels.'],
  ['users', 'Staff', 'Staff users; writing manages them.'],
  ['webhooks', 'Webhooks', 'Webhook subscriptions and their delivery log.'],
];

/// Operations that take no token, so that no permission is about them.
const TOKENLESS = new Set(['mutation:signIn', 'mutation:setPassword', 'mutation:createFirstAdmin']);

const TOKEN_FIELDS = 'id name permissions createdAt lastUsedAt expiresAt revoked createdBy { fullName } createdByTokenId';

/// The schema's root operations, `[{ permission: "query:patient", description }]`.
const OPERATIONS = `{
  __schema {
    queryType { fields { name description } }
    mutationType { fields { name description } }
  }
}`;

const firstSentence = (text) => (text ?? '').split(/(?<=\.)\s/)[0].replace(/\s+/g, ' ');

async function loadOperations() {
  const { __schema: schema } = await request(OPERATIONS);
  const of = (kind, type) =>
    (type?.fields ?? []).map((field) => ({
      permission: `${kind}:${field.name}`,
      description: firstSentence(field.description),
    }));
  return [...of('query', schema.queryType), ...of('mutation', schema.mutationType)].filter(
    (operation) => !TOKENLESS.has(operation.permission),
  );
}

export function Tokens() {
  const tokens = useLoad(async () => (await request(`{ apiTokens { ${TOKEN_FIELDS} } }`)).apiTokens);
  const [created, setCreated] = useState(null);
  return html`
    <${Page}
      title="API tokens"
      intro="A token lets an integration (a booking widget, a CRM) use the API without anyone signing in. Give each integration its own, with only what it needs."
    >
      ${created &&
      html`<${OneTimeSecret}
        title=${`New token “${created.name}”`}
        label="Secret of the new token"
        value=${created.secret}
        warning="Copy the secret now and keep it somewhere safe: it is shown only this once, and cannot be read again. Anyone who has it can use the API with this token's permissions."
        onDone=${() => setCreated(null)}
      />`}
      <${Section} title="Your tokens">
        <${TokenList} tokens=${tokens} />
      <//>
      <${Section} title="Make a token">
        <${NewToken}
          onCreated=${(name, secret) => {
            setCreated({ name, secret });
            tokens.reload();
          }}
        />
      <//>
    <//>
  `;
}

/// Who made a token: the staff user at the head of the chain (and the token they made it
/// through), a token made on the command line, or the command line itself.
const madeBy = (token, all) => {
  const through = all.find((other) => other.id === token.createdByTokenId);
  const via = through ? `“${through.name}”` : 'an API token';
  if (token.createdBy) return token.createdByTokenId ? `${token.createdBy.fullName}, through ${via}` : token.createdBy.fullName;
  if (token.createdByTokenId) return `The command line, through ${via}`;
  return 'The command line';
};

const stateOf = (token) => {
  if (token.revoked) return 'Revoked';
  if (token.expiresAt && new Date(token.expiresAt) < new Date()) return 'Expired';
  return 'Active';
};

/// The tokens as loaded: `{ data, loading, failed, reload }`.
function TokenList({ tokens }) {
  const [run, busy] = useAction();
  const revoke = (token) =>
    run(
      () =>
        mutate(
          `mutation revokeApiToken($id: ID!) { revokeApiToken(id: $id) { data { id revoked } error } }`,
          { id: token.id },
          'revokeApiToken',
        ),
      `The token “${token.name}” is revoked: it is refused from now on.`,
    ).then(tokens.reload);
  const rows = (tokens.data ?? []).map(
    (token) => html`
      <tr>
        <th scope="row">${token.name}</th>
        <td><${Permissions} list=${token.permissions} /></td>
        <td><${When} value=${token.createdAt} /></td>
        <td>${madeBy(token, tokens.data ?? [])}</td>
        <td><${When} value=${token.lastUsedAt} empty="Never" /></td>
        <td><${When} value=${token.expiresAt} empty="Never" /></td>
        <td>${stateOf(token)}</td>
        <td>
          ${stateOf(token) === 'Active' &&
          html`<${ConfirmButton}
            label=${html`Revoke<span class="visually-hidden"> ${token.name}</span>`}
            question=${`Revoke the token “${token.name}”? Every integration using it stops working at once. This cannot be undone.`}
            confirmLabel="Revoke the token"
            danger
            disabled=${busy}
            onConfirm=${() => revoke(token)}
          />`}
        </td>
      </tr>
    `,
  );
  return html`<${Table}
    caption="API tokens of the practice, newest first"
    head=${['Name', 'Permissions', 'Made', 'Made by', 'Last used', 'Expires', 'State', 'Actions']}
    rows=${rows}
    empty=${emptyText(tokens, 'No API token yet.')}
  />`;
}

const Permissions = ({ list }) =>
  html`<ul class="permissions">
    ${list.map((permission) => html`<li><code>${permission}</code></li>`)}
  </ul>`;

/// The permissions a choice makes, in the API's words.
const permissionsOf = ({ everything, access, settings, operations }) => {
  if (everything) return ['*'];
  const list = [];
  for (const [resource] of RESOURCES) {
    if (access[resource] !== 'none') list.push(`${resource}:${access[resource]}`);
  }
  if (settings) list.push('settings');
  return [...list, ...operations];
};

/// The end of a day in the browser's time zone, as the API takes it.
const endOfDay = (date) => new Date(`${date}T23:59:59.999`).toISOString();

function NewToken({ onCreated }) {
  const [run, busy] = useAction();
  const [name, setName] = useState('');
  const [expires, setExpires] = useState('');
  const [choice, setChoice] = useState({
    everything: false,
    access: Object.fromEntries(RESOURCES.map(([resource]) => [resource, 'none'])),
    settings: false,
    operations: [],
  });
  const permissions = permissionsOf(choice);
  const create = () =>
    run(async () => {
      if (permissions.length === 0) {
        throw new Refusal('Choose at least one permission for the token.');
      }
      const payload = await mutate(
        `mutation createApiToken($name: String!, $permissions: [String!]!, $expiresAt: DateTime) {
          createApiToken(name: $name, permissions: $permissions, expiresAt: $expiresAt) {
            token data { id } error
          }
        }`,
        { name, permissions, expiresAt: expires ? endOfDay(expires) : null },
        'createApiToken',
      );
      onCreated(name, payload.token);
      setName('');
      setExpires('');
    }, `The token “${name}” is made.`);
  return html`
    <form onSubmit=${onSubmit(create)}>
      <div class="row">
        <${Field}
          label="Name"
          hint="What the token is for, e.g. “Booking widget”."
          required
          maxlength="100"
          value=${name}
          onValue=${setName}
        />
        <${Field}
          label="Expires on (optional)"
          type="date"
          hint="It stops working at the end of that day. Leave empty for a token that does not expire."
          value=${expires}
          onValue=${setExpires}
        />
      </div>
      <${PermissionChooser} choice=${choice} setChoice=${setChoice} />
      <p class="summary" aria-live="polite">
        The token will have:
        ${permissions.length ? html` <${Permissions} list=${permissions} />` : ' no permission yet.'}
      </p>
      <button type="submit" class="primary" disabled=${busy}>Make the token</button>
    </form>
  `;
}

function PermissionChooser({ choice, setChoice }) {
  const change = (part) => setChoice({ ...choice, ...part });
  return html`
    <fieldset>
      <legend>What may it do?</legend>
      <${Checkbox}
        label="Everything"
        hint="(*): every operation, now and in later versions. Prefer less."
        checked=${choice.everything}
        onChange=${(everything) => change({ everything })}
      />
      ${!choice.everything &&
      html`
        <div class="resources">
          ${RESOURCES.map(
            ([resource, title, what]) => html`<${AccessChoice}
              resource=${resource}
              title=${title}
              what=${what}
              value=${choice.access[resource]}
              onChange=${(value) => change({ access: { ...choice.access, [resource]: value } })}
            />`,
          )}
        </div>
        <${Checkbox}
          label="Settings"
          hint="(settings): API tokens, locations, appointment types, the practice, the audit log, webhooks."
          checked=${choice.settings}
          onChange=${(settings) => change({ settings })}
        />
        <${OperationChooser}
          chosen=${choice.operations}
          onChange=${(operations) => change({ operations })}
        />
      `}
    </fieldset>
  `;
}

/// None, read, or read and write, of one resource.
function AccessChoice({ resource, title, what, value, onChange }) {
  const name = useId('access');
  const options = [
    ['none', 'No access'],
    ['read', 'Read'],
    ['write', 'Read and write'],
  ];
  return html`
    <fieldset class="access" aria-describedby=${`${name}-what`}>
      <legend>${title}</legend>
      <p class="hint" id=${`${name}-what`}>${what}</p>
      ${options.map(
        ([option, text]) => html`<label class="radio">
          <input
            type="radio"
            name=${name}
            value=${option}
            checked=${value === option}
            onChange=${() => onChange(option)}
          />
          ${text}
        </label>`,
      )}
    </fieldset>
  `;
}

/// Single operations, each its own permission (`query:patient`), from the schema's list.
function OperationChooser({ chosen, onChange }) {
  const operations = useLoad(loadOperations);
  const [filter, setFilter] = useState('');
  const wanted = filter.trim().toLowerCase();
  const shown = (operations.data ?? []).filter(
    ({ permission, description }) =>
      !wanted || permission.toLowerCase().includes(wanted) || description.toLowerCase().includes(wanted),
  );
  const toggle = (permission, on) =>
    onChange(on ? [...chosen, permission] : chosen.filter((p) => p !== permission));
  return html`
    <fieldset class="operations">
      <legend>Single operations <span class="hint">each query or mutation on its own, and only it</span></legend>
      <${Field}
        label="Find an operation"
        type="search"
        hint="Part of its name or description, e.g. “patient”."
        value=${filter}
        onValue=${setFilter}
      />
      <div class="operation-list">
        ${operations.loading && html`<p>Loading the list of operations…</p>`}
        ${shown.map(
          ({ permission, description }) => html`<${Checkbox}
            key=${permission}
            label=${html`<code>${permission}</code>`}
            hint=${description}
            checked=${chosen.includes(permission)}
            onChange=${(on) => toggle(permission, on)}
          />`,
        )}
        ${!operations.loading && shown.length === 0 && html`<p>No operation matches.</p>`}
      </div>
    </fieldset>
  `;
}

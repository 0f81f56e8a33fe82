// Webhooks: subscriptions that post the practice's events to an integration's URL. Made with
// a label, a URL, event types (checkboxes) and optional headers; the signing secret is shown
// once, when made or rotated. Paused and resumed, deleted; and a subscription's delivery log
// (`#/webhooks/ID`), with every attempt's status, where a delivery can be sent again.

import { Refusal, mutate, request } from './api.js';
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
  useLoad,
  usePagedList,
  useState,
} from './ui.js';

/// The event types a subscription can take, by resource: the API's own list
/// (`EVENT_TYPES` in src/store/events.rs; tests/settings.rs checks that they agree).
export const EVENT_GROUPS = [
  [
    'Patients',
    [
      'patient.created',
      'patient.updated',
      'patient.deleted',
      'patient.archived',
      'patient.unarchived',
      'patient.label.added',
      'patient.label.removed',
    ],
  ],
  [
    "Patients' records",
    [
      'patient.phone.added',
      'patient.phone.updated',
      'patient.phone.removed',
      'patient.number.added',
      'patient.number.updated',
      'patient.number.removed',
      'patient.customAttribute.added',
      'patient.customAttribute.updated',
      'patient.customAttribute.removed',
      'patient.relationship.added',
      'patient.relationship.updated',
      'patient.relationship.removed',
      'patient.membership.updated',
    ],
  ],
  [
    'Bookings',
    [
      'booking.created',
      'booking.updated',
      'booking.deleted',
      'booking.patientJourney.arrived',
      'booking.patientJourney.inConsultation',
      'booking.patientJourney.completed',
      'booking.patientJourney.noShow',
    ],
  ],
  ['Labels', ['label.created', 'label.updated', 'label.deleted']],
  [
    'Catalogue',
    [
      'product.created',
      'product.updated',
      'location.created',
      'location.updated',
      'accessGroup.created',
      'practiceNumber.created',
    ],
  ],
];

/// Most event types and headers a subscription takes.
const MAX_EVENT_TYPES = 10;
const MAX_HEADERS = 10;

const WEBHOOK_FIELDS = 'id label url eventTypes deliveryPaused deleted createdAt';

/// The secret of a subscription, shown once.
const SecretOnce = ({ secret, onDone }) => html`<${OneTimeSecret}
  title=${`Signing secret of “${secret.label}”`}
  label="Signing secret"
  value=${secret.value}
  warning="Copy the secret into the receiving integration now: it checks each delivery's webhook-signature with it. It is not shown again on this page."
  onDone=${onDone}
/>`;

export function Webhooks() {
  const webhooks = usePagedList('webhooks', WEBHOOK_FIELDS);
  const [secret, setSecret] = useState(null);
  const rows = (webhooks.data?.data ?? []).map(
    (webhook) =>
      html`<${WebhookRow}
        key=${webhook.id}
        webhook=${webhook}
        reload=${webhooks.reload}
        onSecret=${setSecret}
      />`,
  );
  return html`
    <${Page} title="Webhooks" intro="A webhook posts the practice's events (a patient made, a booking moved) to an integration's address as they happen, signed with a secret.">
      ${secret && html`<${SecretOnce} secret=${secret} onDone=${() => setSecret(null)} />`}
      <${Section} title="Subscriptions">
        <${Table}
          caption="Webhook subscriptions, newest first"
          head=${['Label', 'Address', 'Events', 'State', 'Actions']}
          rows=${rows}
          empty=${emptyText(webhooks, 'No webhook yet.')}
        />
        <${Pager} pageInfo=${webhooks.data?.pageInfo} onPage=${webhooks.setPage} label="Pages of webhooks" />
      <//>
      <${Section} title="Add a webhook">
        <${NewWebhook}
          onCreated=${(webhook) => {
            setSecret({ label: webhook.label, value: webhook.secret });
            webhooks.reload();
          }}
        />
      <//>
    <//>
  `;
}

function WebhookRow({ webhook, reload, onSecret }) {
  const [run, busy] = useAction();
  const label = webhook.label;
  const update = (field, query, variables, done) =>
    run(() => mutate(query, { id: webhook.id, ...variables }, field), done).then((payload) => {
      if (payload?.data?.secret) onSecret({ label, value: payload.data.secret });
      reload();
    });
  const pause = (paused) =>
    update(
      'updateWebhook',
      `mutation updateWebhook($id: ID!, $paused: Boolean!) {
        updateWebhook(id: $id, input: { deliveryPaused: $paused }) { data { id deliveryPaused } error }
      }`,
      { paused },
      paused
        ? `“${label}” is paused: its deliveries wait.`
        : `“${label}” is resumed: what waited is being sent.`,
    );
  const rotate = () =>
    update(
      'rotateWebhookSecret',
      `mutation rotateWebhookSecret($id: ID!) { rotateWebhookSecret(id: $id) { data { id secret } error } }`,
      {},
      `“${label}” has a new secret; the old one also signs for 24 hours.`,
    );
  const remove = () =>
    update(
      'deleteWebhook',
      `mutation deleteWebhook($id: ID!) { deleteWebhook(id: $id) { data { id } error } }`,
      {},
      `“${label}” is deleted: nothing more is delivered.`,
    );
  const hidden = html`<span class="visually-hidden"> ${label}</span>`;
  return html`
    <tr>
      <th scope="row"><a href=${`#/webhooks/${encodeURIComponent(webhook.id)}`}>${label}</a></th>
      <td><code class="url">${webhook.url}</code></td>
      <td><ul class="permissions">${webhook.eventTypes.map((type) => html`<li><code>${type}</code></li>`)}</ul></td>
      <td>${webhook.deleted ? 'Deleted' : webhook.deliveryPaused ? 'Paused' : 'Active'}</td>
      <td class="actions">
        ${!webhook.deleted &&
        html`
          <button type="button" disabled=${busy} onClick=${() => pause(!webhook.deliveryPaused)}>
            ${webhook.deliveryPaused ? 'Resume' : 'Pause'}${hidden}
          </button>
          <${ConfirmButton}
            label=${html`New secret${hidden}`}
            question=${`Give “${label}” a new signing secret? For 24 hours deliveries are signed with the old one too, so that the receiver can switch.`}
            confirmLabel="Make a new secret"
            disabled=${busy}
            onConfirm=${rotate}
          />
          <${ConfirmButton}
            label=${html`Delete${hidden}`}
            question=${`Delete “${label}”? Nothing more is delivered, and deliveries still due are dropped.`}
            confirmLabel="Delete the webhook"
            danger
            disabled=${busy}
            onConfirm=${remove}
          />
        `}
      </td>
    </tr>
  `;
}

function NewWebhook({ onCreated }) {
  const [run, busy] = useAction();
  const [label, setLabel] = useState('');
  const [url, setUrl] = useState('');
  const [types, setTypes] = useState([]);
  const [headers, setHeaders] = useState([]);
  const toggle = (type, on) => setTypes(on ? [...types, type] : types.filter((t) => t !== type));
  const setHeader = (index, part) =>
    setHeaders(headers.map((header, i) => (i === index ? { ...header, ...part } : header)));
  const create = () =>
    run(async () => {
      if (types.length === 0) throw new Refusal('Choose at least one event type to deliver.');
      const payload = await mutate(
        `mutation createWebhook($input: CreateWebhookInput!) {
          createWebhook(input: $input) { data { id label secret } error }
        }`,
        {
          input: {
            label,
            url,
            eventTypes: types,
            headers: headers.filter((header) => header.key.trim()),
          },
        },
        'createWebhook',
      );
      onCreated(payload.data);
      setLabel('');
      setUrl('');
      setTypes([]);
      setHeaders([]);
    }, `The webhook “${label}” is made.`);
  return html`
    <form onSubmit=${onSubmit(create)}>
      <div class="row">
        <${Field} label="Label" required maxlength="256" hint="What it is for, e.g. “CRM sync”." value=${label} onValue=${setLabel} />
        <${Field}
          label="Address (URL)"
          type="url"
          required
          hint="The https address the integration gives you for its webhooks."
          value=${url}
          onValue=${setUrl}
        />
      </div>
      <fieldset>
        <legend>Events to deliver <span class="hint">at most ${MAX_EVENT_TYPES}</span></legend>
        <div class="event-groups">
          ${EVENT_GROUPS.map(
            ([group, list]) => html`<fieldset class="event-group">
              <legend>${group}</legend>
              ${list.map(
                (type) => html`<${Checkbox}
                  key=${type}
                  label=${html`<code>${type}</code>`}
                  checked=${types.includes(type)}
                  disabled=${!types.includes(type) && types.length >= MAX_EVENT_TYPES}
                  onChange=${(on) => toggle(type, on)}
                />`,
              )}
            </fieldset>`,
          )}
        </div>
      </fieldset>
      <fieldset>
        <legend>Headers (optional) <span class="hint">added to every delivery, e.g. the receiver's credentials</span></legend>
        ${headers.map(
          (header, index) => html`<div class="row" key=${index}>
            <${Field}
              label=${`Header ${index + 1} name`}
              value=${header.key}
              onValue=${(key) => setHeader(index, { key })}
            />
            <${Field}
              label=${`Header ${index + 1} value`}
              value=${header.value}
              onValue=${(value) => setHeader(index, { value })}
            />
            <button type="button" class="align-end" onClick=${() => setHeaders(headers.filter((_, i) => i !== index))}>
              Remove header ${index + 1}
            </button>
          </div>`,
        )}
        <button
          type="button"
          disabled=${headers.length >= MAX_HEADERS}
          onClick=${() => setHeaders([...headers, { key: '', value: '' }])}
        >
          Add a header
        </button>
      </fieldset>
      <button type="submit" class="primary" disabled=${busy}>Make the webhook</button>
    </form>
  `;
}

const DELIVERY_FIELDS =
  'id eventId eventType attempt status responseStatus error at nextAttemptAt attempts { attempt at responseStatus error }';

/// What came of an attempt, in words.
const outcome = ({ responseStatus, error }) =>
  [responseStatus ? `HTTP ${responseStatus}` : null, error].filter(Boolean).join(': ') || '—';

/// A subscription's delivery log: `#/webhooks/ID`.
export function Deliveries({ id }) {
  const [page, setPage] = useState(1);
  const log = useLoad(
    async () =>
      request(
        `query deliveries($id: ID!, $page: Int) {
          webhook(id: $id) { id label url deleted deliveryPaused }
          webhookDeliveries(subscriptionId: $id, pagination: { page: $page, pageSize: 25 }) {
            data { ${DELIVERY_FIELDS} } pageInfo { page pageSize hasMore }
          }
        }`,
        { id, page },
      ),
    [id, page],
  );
  const [run, busy] = useAction();
  const redeliver = (delivery) =>
    run(
      () =>
        mutate(
          `mutation redeliverWebhook($id: ID!) { redeliverWebhook(deliveryId: $id) { data { id status } error } }`,
          { id: delivery.id },
          'redeliverWebhook',
        ),
      `The ${delivery.eventType} delivery is due again now.`,
    ).then(log.reload);
  const webhook = log.data?.webhook;
  const rows = (log.data?.webhookDeliveries?.data ?? []).map(
    (delivery) => html`
      <tr>
        <th scope="row"><code>${delivery.eventType}</code> <span class="hint">event <code>${delivery.eventId}</code></span></th>
        <td>${delivery.status}</td>
        <td><${When} value=${delivery.at} /></td>
        <td>
          <details>
            <summary>${delivery.attempt} attempt${delivery.attempt === 1 ? '' : 's'}: ${outcome(delivery)}</summary>
            <ol class="attempts">
              ${delivery.attempts.map(
                (attempt) => html`<li><${When} value=${attempt.at} />: ${outcome(attempt)}</li>`,
              )}
            </ol>
          </details>
        </td>
        <td><${When} value=${delivery.nextAttemptAt} /></td>
        <td>
          <button type="button" disabled=${busy || delivery.status === 'pending'} onClick=${() => redeliver(delivery)}>
            Send again<span class="visually-hidden"> the ${delivery.eventType} delivery</span>
          </button>
        </td>
      </tr>
    `,
  );
  return html`
    <${Page} title=${webhook ? `Deliveries of “${webhook.label}”` : 'Deliveries'}>
      <p><a href="#/webhooks">All webhooks</a></p>
      ${webhook &&
      html`<p>To <code class="url">${webhook.url}</code>${webhook.deliveryPaused ? ' (paused: deliveries wait)' : ''}${webhook.deleted ? ' (deleted)' : ''}.</p>`}
      ${log.data && !webhook && html`<p>There is no such webhook.</p>`}
      <${Section} title="Delivery log">
        <p><button type="button" onClick=${log.reload}>Refresh the log</button></p>
        <${Table}
          caption="Deliveries, newest first"
          head=${['Event', 'Status', 'Last attempt', 'Attempts', 'Next attempt', 'Actions']}
          rows=${rows}
          empty=${emptyText(log, 'Nothing delivered yet.')}
        />
        <${Pager} pageInfo=${log.data?.webhookDeliveries?.pageInfo} onPage=${setPage} label="Pages of deliveries" />
      <//>
    <//>
  `;
}

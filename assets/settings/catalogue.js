// The practice's catalogue: labels (made, renamed, recoloured, deleted), locations and
// appointment types (listed and made; the API has no change or removal of them yet).

import { mutate, request } from './api.js';
import {
  ConfirmButton,
  Field,
  Page,
  Pager,
  Section,
  Table,
  emptyText,
  html,
  onSubmit,
  useAction,
  useLoad,
  usePagedList,
  useState,
} from './ui.js';

const LABEL_FIELDS = 'id title color';

export function Labels() {
  const labels = usePagedList('labels', LABEL_FIELDS, 50);
  const rows = (labels.data?.data ?? []).map(
    (label) => html`<${LabelRow} key=${label.id} label=${label} reload=${labels.reload} />`,
  );
  return html`
    <${Page} title="Labels" intro="Labels flag patients at a glance (“VIP”, “Allergy”). Changing one changes it on every patient who has it.">
      <${Section} title="The labels">
        <${Table}
          caption="Labels of the practice, by title"
          head=${['Title', 'Colour', 'Actions']}
          rows=${rows}
          empty=${emptyText(labels, 'No label yet.')}
        />
        <${Pager} pageInfo=${labels.data?.pageInfo} onPage=${labels.setPage} label="Pages of labels" />
      <//>
      <${Section} title="Add a label">
        <${NewLabel} onCreated=${labels.reload} />
      <//>
    <//>
  `;
}

/// A colour swatch beside its hex code (set through the DOM's style object, which the page's
/// Content-Security-Policy allows, unlike a style attribute).
const Swatch = ({ color }) =>
  html`<span class="swatch-line"><span class="swatch" style=${{ backgroundColor: color }}></span><code>${color}</code></span>`;

function LabelRow({ label, reload }) {
  const [run, busy] = useAction();
  const [title, setTitle] = useState(label.title ?? '');
  const [color, setColor] = useState(label.color ?? '#6b7280');
  const save = () =>
    run(
      () =>
        mutate(
          `mutation updateLabel($id: ID!, $title: String, $color: String) {
            updateLabel(id: $id, title: $title, color: $color) { data { ${LABEL_FIELDS} } error }
          }`,
          { id: label.id, title, color },
          'updateLabel',
        ),
      `The label “${title}” is saved.`,
    ).then(reload);
  const remove = () =>
    run(
      () =>
        mutate(
          `mutation deleteLabel($id: ID!) { deleteLabel(id: $id) { data { id } error } }`,
          { id: label.id },
          'deleteLabel',
        ),
      `The label “${label.title}” is deleted.`,
    ).then(reload);
  return html`
    <tr>
      <td>
        <form class="inline" id=${`label-${label.id}`} onSubmit=${onSubmit(save)}>
          <${Field}
            label=${`Title of “${label.title}”`}
            required
            value=${title}
            onValue=${setTitle}
            class="compact"
          />
        </form>
      </td>
      <td>
        <div class="inline">
          <${Field}
            label=${`Colour of “${label.title}”`}
            type="color"
            form=${`label-${label.id}`}
            value=${color}
            onValue=${setColor}
          />
          <${Swatch} color=${label.color} />
        </div>
      </td>
      <td class="actions">
        <button type="submit" form=${`label-${label.id}`} disabled=${busy}>
          Save<span class="visually-hidden"> ${label.title}</span>
        </button>
        <${ConfirmButton}
          label=${html`Delete<span class="visually-hidden"> ${label.title}</span>`}
          question=${`Delete the label “${label.title}”? It is taken off every patient who has it.`}
          confirmLabel="Delete the label"
          danger
          disabled=${busy}
          onConfirm=${remove}
        />
      </td>
    </tr>
  `;
}

function NewLabel({ onCreated }) {
  const [run, busy] = useAction();
  const [title, setTitle] = useState('');
  const [color, setColor] = useState('#2563eb');
  const create = () =>
    run(async () => {
      await mutate(
        `mutation createLabel($title: String!, $color: String) {
          createLabel(title: $title, color: $color) { data { id } error }
        }`,
        { title, color },
        'createLabel',
      );
      setTitle('');
      onCreated();
    }, `The label “${title}” is added.`);
  return html`
    <form class="inline" onSubmit=${onSubmit(create)}>
      <${Field} label="Title" required maxlength="200" value=${title} onValue=${setTitle} />
      <${Field} label="Colour" type="color" value=${color} onValue=${setColor} />
      <button type="submit" class="primary" disabled=${busy}>Add label</button>
    </form>
  `;
}

const addressLine = (address) =>
  [address?.address, address?.city, address?.postcode, address?.country].filter(Boolean).join(', ') || '—';

export function Locations() {
  const locations = useLoad(
    async () => (await request('{ locations { id name address { address city postcode country } } }')).locations,
  );
  const rows = (locations.data ?? []).map(
    (location) => html`<tr><th scope="row">${location.name}</th><td>${addressLine(location.address)}</td></tr>`,
  );
  return html`
    <${Page} title="Locations" intro="The places where the practice sees patients; a booking can name one.">
      <${Section} title="The locations">
        <${Table}
          caption="Locations of the practice, by name"
          head=${['Name', 'Address']}
          rows=${rows}
          empty=${emptyText(locations, 'No location yet.')}
        />
      <//>
      <${Section} title="Add a location">
        <${NewLocation} onCreated=${locations.reload} />
      <//>
    <//>
  `;
}

function NewLocation({ onCreated }) {
  const [run, busy] = useAction();
  const empty = { name: '', address: '', city: '', postcode: '', country: '' };
  const [input, setInput] = useState(empty);
  const set = (name) => (value) => setInput({ ...input, [name]: value });
  const create = () =>
    run(async () => {
      const { name, ...address } = input;
      await mutate(
        `mutation createLocation($name: String!, $address: AddressInput) {
          createLocation(name: $name, address: $address) { data { id } error }
        }`,
        { name, address },
        'createLocation',
      );
      setInput(empty);
      onCreated();
    }, `The location “${input.name}” is added.`);
  return html`
    <form onSubmit=${onSubmit(create)}>
      <${Field} label="Name" required maxlength="200" hint="E.g. “Main surgery”." value=${input.name} onValue=${set('name')} />
      <div class="row">
        <${Field} label="Street and number" autocomplete="street-address" value=${input.address} onValue=${set('address')} />
        <${Field} label="Town or city" autocomplete="address-level2" value=${input.city} onValue=${set('city')} />
      </div>
      <div class="row">
        <${Field} label="Postal code" autocomplete="postal-code" value=${input.postcode} onValue=${set('postcode')} />
        <${Field} label="Country" autocomplete="country-name" value=${input.country} onValue=${set('country')} />
      </div>
      <button type="submit" class="primary" disabled=${busy}>Add location</button>
    </form>
  `;
}

const price = (value) => (value === null || value === undefined ? '—' : value.toFixed(2));

export function AppointmentTypes() {
  const types = useLoad(
    async () => (await request('{ appointmentTypes { id title duration price } }')).appointmentTypes,
  );
  const rows = (types.data ?? []).map(
    (type) => html`<tr>
      <th scope="row">${type.title}</th>
      <td>${type.duration} min</td>
      <td>${price(type.price)}</td>
    </tr>`,
  );
  return html`
    <${Page} title="Appointment types" intro="What a booking is for, how long it takes and what it costs. A booking without an end lasts its type's duration.">
      <${Section} title="The appointment types">
        <${Table}
          caption="Appointment types of the practice, by title"
          head=${['Title', 'Duration', 'Price']}
          rows=${rows}
          empty=${emptyText(types, 'No appointment type yet.')}
        />
      <//>
      <${Section} title="Add an appointment type">
        <${NewAppointmentType} onCreated=${types.reload} />
      <//>
    <//>
  `;
}

function NewAppointmentType({ onCreated }) {
  const [run, busy] = useAction();
  const [title, setTitle] = useState('');
  const [duration, setDuration] = useState('30');
  const [cost, setCost] = useState('');
  const create = () =>
    run(async () => {
      await mutate(
        `mutation createAppointmentType($title: String!, $duration: Int!, $price: Float) {
          createAppointmentType(title: $title, duration: $duration, price: $price) { data { id } error }
        }`,
        { title, duration: Number(duration), price: cost === '' ? null : Number(cost) },
        'createAppointmentType',
      );
      setTitle('');
      onCreated();
    }, `The appointment type “${title}” is added.`);
  return html`
    <form onSubmit=${onSubmit(create)}>
      <div class="row">
        <${Field} label="Title" required maxlength="200" hint="E.g. “Initial consultation”." value=${title} onValue=${setTitle} />
        <${Field}
          label="Duration (minutes)"
          type="number"
          required
          min="1"
          max="1440"
          step="1"
          value=${duration}
          onValue=${setDuration}
        />
        <${Field}
          label="Price (optional)"
          type="number"
          min="0"
          step="0.01"
          hint="In the practice's currency."
          value=${cost}
          onValue=${setCost}
        />
      </div>
      <button type="submit" class="primary" disabled=${busy}>Add appointment type</button>
    </form>
  `;
}

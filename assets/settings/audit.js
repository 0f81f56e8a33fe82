// The audit log: who read or changed what, and when, newest first, a page at a time;
// filtered by patient ("who looked at this patient") and by actor (a staff user or an API
// token), and by dates. A patient or an actor in the list filters by them in one click.

import { request } from './api.js';
import { Field, Page, Pager, Section, Table, When, emptyText, html, onSubmit, useLoad, useState } from './ui.js';

const EVENT_FIELDS = 'id at actorType actorId actorName action operation resourceType resourceId patientId';

/// Staff users and API tokens, for the actor filter: `[[id, label], ...]`.
async function loadActors() {
  const data = await request(`{
    users(pagination: { pageSize: 100 }) { data { id fullName } }
    apiTokens { id name }
  }`);
  return [
    ...(data.users?.data ?? []).map((user) => [user.id, `${user.fullName} (staff)`]),
    ...(data.apiTokens ?? []).map((token) => [token.id, `${token.name} (API token)`]),
  ];
}

/// The start or the end of a day in the browser's time zone, as the API takes it.
const dayEdge = (date, end) => new Date(`${date}T${end ? '23:59:59.999' : '00:00:00'}`).toISOString();

export function Audit() {
  const [filters, setFilters] = useState({ patientId: '', actorId: '', from: '', to: '', page: 1 });
  const [draft, setDraft] = useState(filters);
  const actors = useLoad(loadActors);
  const events = useLoad(
    async () => {
      const { patientId, actorId, from, to, page } = filters;
      // An open end is the epoch, or tomorrow: the API takes a range with both ends.
      const dateRange =
        from || to
          ? {
              start: from ? dayEdge(from, false) : new Date(0).toISOString(),
              end: to ? dayEdge(to, true) : new Date(Date.now() + 86_400_000).toISOString(),
            }
          : null;
      return (
        await request(
          `query audit($patientId: ID, $actorId: ID, $dateRange: DateRange, $page: Int) {
            auditEvents(patientId: $patientId, actorId: $actorId, dateRange: $dateRange,
                        pagination: { page: $page, pageSize: 50 }) {
              data { ${EVENT_FIELDS} } pageInfo { page pageSize hasMore }
            }
          }`,
          { patientId: patientId || null, actorId: actorId || null, dateRange, page },
        )
      ).auditEvents;
    },
    [filters],
  );
  const apply = (next) => {
    const all = { ...filters, ...next, page: next.page ?? 1 };
    setDraft(all);
    setFilters(all);
  };
  const set = (name) => (value) => setDraft({ ...draft, [name]: value });
  const known = actors.data ?? [];
  // An actor picked from the list may be one the filter does not name (the command line).
  const unnamed = draft.actorId && !known.some(([id]) => id === draft.actorId);
  const actorOptions = [['', 'Anyone'], ...known, ...(unnamed ? [[draft.actorId, draft.actorId]] : [])];
  const rows = (events.data?.data ?? []).map(
    (event) => html`
      <tr>
        <td><${When} value=${event.at} /></td>
        <td>
          <button type="button" class="link" onClick=${() => apply({ actorId: event.actorId })}>
            ${event.actorName ?? event.actorId}
          </button>
          <span class="hint"> ${event.actorType}</span>
        </td>
        <td>${event.action}${event.operation ? html` <code>${event.operation}</code>` : ''}</td>
        <td>${event.resourceType ?? '—'}${event.resourceId ? html` <code>${event.resourceId}</code>` : ''}</td>
        <td>
          ${event.patientId
            ? html`<button type="button" class="link" onClick=${() => apply({ patientId: event.patientId })}>
                <code>${event.patientId}</code>
              </button>`
            : '—'}
        </td>
      </tr>
    `,
  );
  return html`
    <${Page} title="Audit log" intro="Every read of patient data and every change, with who did it and when. Select a person or a patient in the list to see only theirs.">
      <${Section} title="Filters">
        <form onSubmit=${onSubmit(() => apply(draft))}>
          <div class="row">
            <${Field}
              label="Patient ID"
              hint="Only what concerns this patient."
              value=${draft.patientId}
              onValue=${set('patientId')}
            />
            <${Field}
              label="Who"
              as="select"
              options=${actorOptions}
              value=${draft.actorId}
              onValue=${set('actorId')}
            />
          </div>
          <div class="row">
            <${Field} label="From" type="date" value=${draft.from} onValue=${set('from')} />
            <${Field} label="To" type="date" value=${draft.to} onValue=${set('to')} />
          </div>
          <div class="actions">
            <button type="submit" class="primary">Show events</button>
            <button type="button" onClick=${() => apply({ patientId: '', actorId: '', from: '', to: '' })}>
              Clear filters
            </button>
          </div>
        </form>
      <//>
      <${Section} title="Events">
        <${Table}
          caption="Audit events, newest first"
          head=${['When', 'Who', 'What', 'Record', 'Patient']}
          rows=${rows}
          empty=${emptyText(events, 'No event matches.')}
        />
        <${Pager}
          pageInfo=${events.data?.pageInfo}
          onPage=${(page) => apply({ page })}
          label="Pages of the audit log"
        />
      <//>
    <//>
  `;
}

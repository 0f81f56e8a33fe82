// The practice: its name and its IANA time zone (times in the API stay instants with an
// offset whatever the zone; the zone says where the practice works).

import { mutate, request } from './api.js';
import { Field, Page, html, onSubmit, useAction, useApp, useEffect, useLoad, useState } from './ui.js';

/// The browser's list of IANA zones, with UTC and the practice's own zone in it.
const zones = (current) => {
  const known = typeof Intl.supportedValuesOf === 'function' ? Intl.supportedValuesOf('timeZone') : [];
  return [...new Set(['UTC', current, ...known].filter(Boolean))].sort((a, b) =>
    a === 'UTC' ? -1 : b === 'UTC' ? 1 : a.localeCompare(b),
  );
};

export function Practice() {
  const app = useApp();
  const practice = useLoad(async () => (await request('{ currentPractice { id name timezone } }')).currentPractice);
  const [run, busy] = useAction();
  const [name, setName] = useState('');
  const [timezone, setTimezone] = useState('UTC');
  useEffect(() => {
    if (practice.data) {
      setName(practice.data.name);
      setTimezone(practice.data.timezone);
    }
  }, [practice.data]);
  const save = () =>
    run(
      () =>
        mutate(
          `mutation updatePractice($name: String, $timezone: String) {
            updatePractice(name: $name, timezone: $timezone) { data { id name timezone } error }
          }`,
          { name, timezone },
          'updatePractice',
        ),
      (payload) => `The practice is saved: ${payload.data.name}, ${payload.data.timezone}.`,
    ).then((payload) => payload && app.renamed(payload.data.name));
  return html`
    <${Page} title="Practice" intro="The practice's name, as staff and integrations see it, and the time zone it works in.">
      <form class="narrow" onSubmit=${onSubmit(save)}>
        <${Field} label="Name" required maxlength="200" value=${name} onValue=${setName} />
        <${Field}
          label="Time zone"
          as="select"
          options=${zones(timezone).map((zone) => [zone, zone.replace(/_/g, ' ')])}
          hint="Where the practice works, e.g. Europe/London."
          value=${timezone}
          onValue=${setTimezone}
        />
        <button type="submit" class="primary" disabled=${busy || !practice.data}>Save</button>
      </form>
    <//>
  `;
}

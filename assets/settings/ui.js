// The pieces every page of the Settings application is made of: the application's context
// (who is signed in, where messages go), loading and acting with errors shown as sentences,
// labelled form fields, a confirmation dialog, a secret shown once, a pager, and times.
// Pages use these instead of touching the DOM; the library is Preact with htm templates.

import {
  html,
  createContext,
  useContext,
  useEffect,
  useRef,
  useState,
} from './htm-preact-standalone.js';

import { request } from './api.js';

export { html, useEffect, useRef, useState };

/// What the shell gives every page: `user` (the signed-in staff user), `say(sentence)` for
/// a success in the live region, `fail(error)` for a refusal in the alert, `clear()`,
/// `signedIn(user, message)`, `signOut()`, `navigate(path, messages)`, `renamed(name)`.
export const AppContext = createContext(null);
export const useApp = () => useContext(AppContext);

let lastId = 0;
/// An id for this component's lifetime, for label `for` and `aria-describedby`.
export const useId = (prefix = 'f') => useRef(`${prefix}-${++lastId}`).current;

/// Loads what a page shows with `load()` (an async function) whenever one of `deps`
/// changes, or `reload()` is called: `{ data, loading, failed, reload }`. A refusal goes to
/// the page's alert.
export function useLoad(load, deps = []) {
  const app = useApp();
  const [state, setState] = useState({ data: null, loading: true, failed: false });
  const [round, setRound] = useState(0);
  useEffect(() => {
    let current = true;
    setState((previous) => ({ ...previous, loading: true }));
    load().then(
      (data) => current && setState({ data, loading: false, failed: false }),
      (error) => {
        if (!current) return;
        setState((previous) => ({ ...previous, loading: false, failed: true }));
        app.fail(error);
      },
    );
    return () => {
      current = false;
    };
  }, [...deps, round]);
  return { ...state, reload: () => setRound((n) => n + 1) };
}

/// One page of a paged list of the API, read as
/// `FIELD(pagination: { page, pageSize }) { data { SELECTION } pageInfo { ... } }`:
/// what `useLoad` gives (its `data` is `{ data: [...], pageInfo }`), and `setPage(n)`.
export function usePagedList(field, selection, pageSize = 25) {
  const [page, setPage] = useState(1);
  const loaded = useLoad(
    async () =>
      (
        await request(
          `query ${field}($page: Int) {
            ${field}(pagination: { page: $page, pageSize: ${pageSize} }) {
              data { ${selection} } pageInfo { page pageSize hasMore }
            }
          }`,
          { page },
        )
      )[field],
    [page],
  );
  return { ...loaded, setPage };
}

/// `[run, busy]`: `run(action, done)` clears the messages, runs the async `action`, says
/// `done` (a sentence, or a function of the result giving one) when it succeeds, shows the
/// refusal when it fails, and returns the result (undefined on failure).
export function useAction() {
  const app = useApp();
  const [busy, setBusy] = useState(false);
  const run = async (action, done) => {
    app.clear();
    setBusy(true);
    try {
      const result = await action();
      const message = typeof done === 'function' ? done(result) : done;
      if (message) app.say(message);
      return result;
    } catch (error) {
      app.fail(error);
      return undefined;
    } finally {
      setBusy(false);
    }
  };
  return [run, busy];
}

/// A page: its heading (focused when the page opens, so that a screen reader says where one
/// is) and the document's title.
export function Page({ title, children, intro }) {
  const heading = useRef(null);
  useEffect(() => {
    document.title = `${title} · Settings · practice-api`;
    heading.current?.focus({ preventScroll: true });
  }, [title]);
  return html`
    <h1 tabindex="-1" ref=${heading}>${title}</h1>
    ${intro && html`<p class="intro">${intro}</p>`}
    ${children}
  `;
}

/// A section of a page, with its heading.
export const Section = ({ title, children, id }) => {
  const headingId = useId('s');
  return html`
    <section aria-labelledby=${headingId} id=${id}>
      <h2 id=${headingId}>${title}</h2>
      ${children}
    </section>
  `;
};

/// A labelled input (or `as="select"` with `options` `[[value, label], ...]`, or
/// `as="textarea"`), with an optional hint read out with it.
export function Field({ label, hint, as = 'input', options = [], onValue, ...props }) {
  const id = useId();
  const hintId = hint ? `${id}-hint` : undefined;
  const common = {
    id,
    'aria-describedby': hintId,
    onInput: onValue && ((event) => onValue(event.currentTarget.value)),
    ...props,
  };
  const control =
    as === 'select'
      ? html`<select ...${common}>
          ${options.map(([value, text]) => html`<option value=${value}>${text}</option>`)}
        </select>`
      : as === 'textarea'
        ? html`<textarea ...${common}></textarea>`
        : html`<input ...${common} />`;
  return html`
    <div class="field">
      <label for=${id}>${label}</label>
      ${control}
      ${hint && html`<p class="hint" id=${hintId}>${hint}</p>`}
    </div>
  `;
}

/// A labelled checkbox.
export function Checkbox({ label, checked, onChange, hint, ...props }) {
  const id = useId('c');
  return html`
    <div class="check">
      <input
        type="checkbox"
        id=${id}
        checked=${checked}
        onChange=${(event) => onChange(event.currentTarget.checked)}
        ...${props}
      />
      <label for=${id}>${label}${hint && html` <span class="hint">${hint}</span>`}</label>
    </div>
  `;
}

/// A button that asks first, in a modal dialog: `question` and `confirmLabel` say what will
/// happen; Escape or Cancel changes nothing.
export function ConfirmButton({ label, question, confirmLabel, onConfirm, disabled, danger }) {
  const dialog = useRef(null);
  const titleId = useId('d');
  const [open, setOpen] = useState(false);
  useEffect(() => {
    if (open && !dialog.current?.open) dialog.current?.showModal();
  }, [open]);
  const close = () => {
    dialog.current?.close();
    setOpen(false);
  };
  return html`
    <button
      type="button"
      class=${danger ? 'danger' : ''}
      disabled=${disabled}
      onClick=${() => setOpen(true)}
    >
      ${label}
    </button>
    ${open &&
    html`<dialog ref=${dialog} aria-labelledby=${titleId} onClose=${() => setOpen(false)}>
      <p id=${titleId}>${question}</p>
      <div class="actions">
        <button
          type="button"
          class=${danger ? 'danger' : 'primary'}
          onClick=${() => {
            close();
            onConfirm();
          }}
        >
          ${confirmLabel}
        </button>
        <button type="button" onClick=${close}>Cancel</button>
      </div>
    </dialog>`}
  `;
}

/// A secret shown this once (a token, a link): under its heading `title`, a read-only field
/// labelled `label` with a copy button and a warning; `onDone` hides it for good.
export function OneTimeSecret({ title, label, value, warning, onDone }) {
  const app = useApp();
  const input = useRef(null);
  const id = useId('secret');
  useEffect(() => {
    input.current?.focus();
    input.current?.select();
  }, [value]);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(value);
    } catch {
      // No clipboard API outside a secure context (plain http on a clinic's network): the
      // selection and the browser's copy command still work.
      input.current?.select();
      if (!document.execCommand('copy')) {
        app.fail(new Error('Copying failed: select the text and copy it by hand.'));
        return;
      }
    }
    app.say('Copied to the clipboard.');
  };
  return html`
    <section class="secret" aria-labelledby=${`${id}-title`}>
      <h2 id=${`${id}-title`}>${title}</h2>
      <label for=${id}>${label}</label>
      <div class="secret-row">
        <input id=${id} ref=${input} readonly value=${value} aria-describedby=${`${id}-warning`} />
        <button type="button" class="primary" onClick=${copy}>Copy</button>
      </div>
      <p class="warning" id=${`${id}-warning`}>${warning}</p>
      <button type="button" onClick=${onDone}>I have copied it</button>
    </section>
  `;
}

/// Previous and next for a paged list.
export function Pager({ pageInfo, onPage, label = 'Pages' }) {
  if (!pageInfo || (pageInfo.page <= 1 && !pageInfo.hasMore)) return null;
  return html`
    <nav class="pager" aria-label=${label}>
      <button type="button" disabled=${pageInfo.page <= 1} onClick=${() => onPage(pageInfo.page - 1)}>
        Previous page
      </button>
      <span>Page ${pageInfo.page}</span>
      <button type="button" disabled=${!pageInfo.hasMore} onClick=${() => onPage(pageInfo.page + 1)}>
        Next page
      </button>
    </nav>
  `;
}

const timeFormat = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });

/// An instant of the API, in the browser's time zone; `empty` when there is none.
export const When = ({ value, empty = '—' }) =>
  value ? html`<time datetime=${value}>${timeFormat.format(new Date(value))}</time>` : empty;

/// What an empty list says: that it is loading, that it could not be loaded, or `none`.
export const emptyText = (loaded, none) =>
  loaded.loading ? 'Loading…' : loaded.failed ? 'Not shown: see the message above.' : none;

/// A table with a caption, and a line instead when there is nothing in it.
export const Table = ({ caption, head, rows, empty }) =>
  rows.length === 0
    ? html`<p class="empty">${empty}</p>`
    : html`
        <table>
          <caption>${caption}</caption>
          <thead>
            <tr>${head.map((title) => html`<th scope="col">${title}</th>`)}</tr>
          </thead>
          <tbody>
            ${rows}
          </tbody>
        </table>
      `;

/// What a form's submit does: no page load, then `action`.
export const onSubmit = (action) => (event) => {
  event.preventDefault();
  action(event);
};

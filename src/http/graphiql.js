// The GraphiQL page's own script (src/http/graphiql.html loads it; the page allows no inline
// script).
// Every request but signIn needs a token in the x-token header, introspection (the
// schema behind the documentation explorer and autocompletion) included. To set it:
//
//   1. Paste the token (from `practice-api token create`, or the `token` that signIn
//      returns) between the quotes of "x-token" in the "Headers" tab below the editor.
//   2. That's all: a moment after the headers change, the page fetches the schema again
//      with them, and the documentation explorer (the book icon, top left) shows the
//      schema's types and descriptions. By hand: the "Re-fetch GraphQL schema" button
//      (the circling arrows, bottom left), Shift+Ctrl+R in an editor, or reloading the page.
//
// Until then the documentation explorer says "Error fetching schema" and the result pane
// shows the server's refusal (UNAUTHENTICATED).
// The headers (and the token in them) are kept in this tab's session storage only: they are
// gone when the tab closes, and no other tab or later visit can read them.
//
// GraphiQL 3 fetches the schema only when its fetcher changes, not when the headers do: so
// the page hands it a new fetcher (the same one, wrapped anew) whenever the headers change
// to another valid JSON object.
(function () {
  const url = window.location.pathname;
  const baseFetcher = GraphiQL.createFetcher({ url });
  const defaultHeaders = JSON.stringify({ 'x-token': '' }, null, 2);
  // Headers as GraphiQL would send them, or null while they are not valid JSON.
  const normalized = (text) => {
    try {
      return JSON.stringify(text && text.trim() ? JSON.parse(text) : {});
    } catch {
      return null;
    }
  };
  function App() {
    const [generation, setGeneration] = React.useState(0);
    const sent = React.useRef(null);
    const timer = React.useRef(null);
    const fetcher = React.useMemo(
      () => (params, options) => baseFetcher(params, options),
      [generation],
    );
    const onEditHeaders = React.useCallback((text) => {
      clearTimeout(timer.current);
      timer.current = setTimeout(() => {
        const headers = normalized(text);
        if (headers !== null && headers !== sent.current) {
          sent.current = headers;
          setGeneration((n) => n + 1);
        }
      }, 500);
    }, []);
    return React.createElement(GraphiQL, {
      fetcher,
      onEditHeaders,
      defaultHeaders,
      defaultEditorToolsVisibility: 'headers',
      isHeadersEditorEnabled: true,
      shouldPersistHeaders: true,
      storage: window.sessionStorage,
      defaultQuery: '# Put your token in the Headers tab below, then run:\n' +
        '{\n  currentPractice { id name }\n  patients(pagination: { pageSize: 5 }) {\n' +
        '    data { id firstName lastName email }\n    pageInfo { page pageSize hasMore }\n  }\n}\n',
    });
  }

  ReactDOM.createRoot(document.getElementById('graphiql')).render(React.createElement(App));
})();

//! The Settings application at `/settings`, served whole from the binary:
//!
//! - `settings_is_served_with_strict_headers`: the page and each of its files are served with
//!   the Content-Security-Policy (no inline script or style, no frame), `nosniff`,
//!   `no-referrer` and `no-store`, and are the files in `assets/settings/`; every module the
//!   application imports is served, and nothing else is; the page has no inline script and
//!   names no other host; the webhook page offers exactly the API's event types; and the
//!   API's own answers are not cached either.
//! - `settings_works_in_headless_chromium`: `tests/browser/settings.mjs` drives every page in
//!   Debian's Chromium with playwright-core, as an admin, a new staff member and a second
//!   admin would (see that script for the scenarios): tokens made, used over HTTP and
//!   revoked; staff added, signed in, disabled; a password reset ending sessions; each
//!   refusal shown as a sentence; axe-core with no serious or critical violation on every
//!   page; a screenshot of each page at 1280x800 in `target/settings-screenshots/`, or in
//!   `docs/screenshots/` (README's) with `UPDATE_SCREENSHOTS=1`. It needs
//!   `/usr/bin/chromium` and Node.js (`apt-get install chromium nodejs npm`): without them it
//!   is skipped, but fails when `CI=true`. It runs `npm ci` in `tests/browser` when the
//!   locked playwright-core or axe-core is not installed there (no browser is downloaded).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use practice_api::config::ServeConfig;
use practice_api::http::{AppState, serve};
use practice_api::store::events::EVENT_TYPES;
use practice_api::store::{PoolSettings, Store};
use serde_json::{Value, json};
use tokio::net::TcpListener;

const CHROMIUM: &str = "/usr/bin/chromium";

/// The policy every answer of `/settings` carries.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
                      img-src 'self' data:; connect-src 'self'; form-action 'self'; \
                      frame-ancestors 'none'; base-uri 'none'";

/// Every file under `/settings/assets/`: served name, file in `assets/settings/`.
const ASSETS: &[(&str, &str)] = &[
    (
        "htm-preact-standalone.js",
        "vendor/htm-preact-standalone.module.js",
    ),
    ("settings.css", "settings.css"),
    ("app.js", "app.js"),
    ("api.js", "api.js"),
    ("ui.js", "ui.js"),
    ("access.js", "access.js"),
    ("tokens.js", "tokens.js"),
    ("staff.js", "staff.js"),
    ("account.js", "account.js"),
    ("catalogue.js", "catalogue.js"),
    ("practice.js", "practice.js"),
    ("audit.js", "audit.js"),
    ("webhooks.js", "webhooks.js"),
];

/// The pages the browser test inspects and photographs: `docs/screenshots/{page}.png`.
const PAGES: &[&str] = &[
    "setup",
    "sign-in",
    "set-password",
    "tokens",
    "tokens-new",
    "staff",
    "staff-member",
    "account",
    "practice",
    "labels",
    "locations",
    "appointment-types",
    "webhooks",
    "webhook-deliveries",
    "audit",
];

/// The sentence a page shows when the server no longer takes its session.
const SESSION_ENDED: &str = "Your session has ended: sign in again.";

/// Writes to the real stderr, past the test harness's capture: the skip notice and what the
/// browser saw are for whoever runs `cargo test`.
fn say(message: &str) {
    let _ = writeln!(std::io::stderr(), "{message}");
}

fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A server on a free loopback port, on a fresh SQLite file whose practice has no staff yet:
/// an API token that may do anything (for what the browser test does over HTTP, as an
/// integration), and the practice's first-start token.
struct Server {
    base: String,
    api_token: String,
    setup_token: String,
    _dir: tempfile::TempDir,
}

async fn start_server() -> Server {
    let dir = tempfile::tempdir().expect("temporary directory");
    let url = format!("sqlite://{}", dir.path().join("settings.db").display());
    let store = Store::open(&url, &PoolSettings::default())
        .await
        .expect("open the store");
    let practice = practice_api::admin::practice(&store, None)
        .await
        .expect("default practice");
    let (_, api_token) = practice_api::admin::create_token(
        &store,
        &practice.id,
        "test set-up",
        &["*".to_string()],
        None,
    )
    .await
    .expect("create a token");
    let setup_token = practice_api::admin::first_admin_link(&store)
        .await
        .expect("the first-start link")
        .expect("a practice without staff has a first-start link");
    let config = ServeConfig {
        // The browser test's own burst of requests must not meet the rate limits, and its
        // webhook receiver listens on the loopback address.
        rate_limit: 1_000_000,
        address_rate_limit: 1_000_000,
        webhook_allow_private: true,
        ..ServeConfig::default()
    };
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("local address").port();
    tokio::spawn(serve(
        listener,
        None,
        AppState::new(store, &config),
        std::future::pending(),
    ));
    Server {
        base: format!("http://127.0.0.1:{port}"),
        api_token,
        setup_token,
        _dir: dir,
    }
}

/// Checks the headers every answer of `/settings` carries, and returns the body.
async fn fetch_strict(client: &reqwest::Client, url: &str, media: &str) -> Vec<u8> {
    let response = client.get(url).send().await.expect("GET");
    assert_eq!(response.status(), 200, "{url}");
    let headers = response.headers().clone();
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(
        header("content-type"),
        format!("{media}; charset=utf-8"),
        "{url}"
    );
    assert_eq!(header("content-security-policy"), POLICY, "{url}");
    assert_eq!(header("x-content-type-options"), "nosniff", "{url}");
    assert_eq!(header("referrer-policy"), "no-referrer", "{url}");
    assert_eq!(header("cache-control"), "no-store", "{url}");
    response.bytes().await.expect("body").to_vec()
}

/// The relative modules a JavaScript file imports (`from './api.js'`).
fn imports(source: &str) -> Vec<String> {
    source
        .split("from './")
        .skip(1)
        .filter_map(|rest| rest.split_once('\'').map(|(name, _)| name.to_string()))
        .collect()
}

#[tokio::test]
async fn settings_is_served_with_strict_headers() {
    let server = start_server().await;
    let client = reqwest::Client::new();
    let assets_dir = manifest_dir().join("assets/settings");

    // The policy is strict: nothing inline, nothing from elsewhere, no framing.
    for part in ["'unsafe-inline'", "'unsafe-eval'", "*", "http:", "https:"] {
        assert!(!POLICY.contains(part), "the policy allows {part}");
    }

    // The page, at both addresses, is index.html.
    let index = std::fs::read(assets_dir.join("index.html")).expect("index.html");
    for path in ["/settings", "/settings/"] {
        let body = fetch_strict(&client, &format!("{}{path}", server.base), "text/html").await;
        assert!(body == index, "{path} is not assets/settings/index.html");
    }
    let html = String::from_utf8(index).expect("index.html is UTF-8");
    assert!(
        !html.contains("http:") && !html.contains("https:") && !html.contains("//unpkg"),
        "the page must name no other host:\n{html}"
    );
    for attribute in ["src=\"//", "href=\"//"] {
        assert!(!html.contains(attribute), "a protocol-relative {attribute}");
    }
    for script in html.split("<script").skip(1) {
        let (tag, rest) = script.split_once('>').expect("a closed <script> tag");
        assert!(
            tag.contains("src=\"/settings/assets/"),
            "a script without src: {tag}"
        );
        assert!(
            rest.starts_with("</script>"),
            "an inline script body: {rest}"
        );
    }
    assert!(!html.contains("<style"), "an inline <style>");
    assert!(!html.contains(" style="), "an inline style attribute");
    assert!(!html.contains(" on"), "an inline event handler");
    assert!(html.contains("href=\"/settings/assets/settings.css\""));
    assert!(html.contains("src=\"/settings/assets/app.js\""));

    // Each file is served, as it is in assets/settings/, with the same headers.
    for (name, file) in ASSETS {
        let media = if name.ends_with(".css") {
            "text/css"
        } else {
            "text/javascript"
        };
        let url = format!("{}/settings/assets/{name}", server.base);
        let body = fetch_strict(&client, &url, media).await;
        let expected = std::fs::read(assets_dir.join(file)).expect("the asset's file");
        assert!(body == expected, "{name} is not assets/settings/{file}");
        let text = String::from_utf8(body).expect("UTF-8");
        for module in imports(&text) {
            assert!(
                ASSETS.iter().any(|(served, _)| *served == module),
                "{name} imports ./{module}, which is not served"
            );
        }
        if !file.starts_with("vendor/") {
            assert!(
                !text.contains("http://") && !text.contains("https://"),
                "{name} names another host"
            );
            assert!(!text.contains("localStorage."), "{name} uses localStorage");
        }
    }

    // Every module and style sheet of the application is served; nothing else is.
    for entry in std::fs::read_dir(&assets_dir).expect("assets/settings") {
        let name = entry.expect("entry").file_name();
        let name = name.to_string_lossy();
        if name.ends_with(".js") || name.ends_with(".css") {
            assert!(
                ASSETS.iter().any(|(_, file)| *file == name),
                "assets/settings/{name} is not served"
            );
        }
    }
    for path in [
        "/settings/assets/index.html",
        "/settings/assets/vendor/htm-preact-standalone.module.js",
        "/settings/assets/htm-preact-standalone.module.js",
        "/settings/assets/README.md",
        "/settings/assets/..%2Fapi.js",
        "/settings/assets/",
        "/settings/app.js",
    ] {
        let response = client
            .get(format!("{}{path}", server.base))
            .send()
            .await
            .expect("GET");
        assert_eq!(response.status(), 404, "{path}");
    }

    // The webhook page offers the API's event types, all of them and no other.
    let webhooks = std::fs::read_to_string(assets_dir.join("webhooks.js")).expect("webhooks.js");
    for event_type in EVENT_TYPES {
        assert!(
            webhooks.contains(&format!("'{event_type}'")),
            "the webhook page lacks {event_type}"
        );
    }
    let listed = [
        "'patient.",
        "'booking.",
        "'label.",
        "'product.",
        "'location.",
        "'accessGroup.",
        "'practiceNumber.",
    ]
    .iter()
    .map(|prefix| webhooks.matches(prefix).count())
    .sum::<usize>();
    assert_eq!(
        listed,
        EVENT_TYPES.len(),
        "the webhook page offers event types the API does not have"
    );

    // The application's data comes from /graphql, whose answers no cache keeps either.
    let answer = client
        .post(format!("{}/graphql", server.base))
        .header("x-token", &server.api_token)
        .json(&json!({ "query": "{ currentPractice { name } }" }))
        .send()
        .await
        .expect("POST /graphql");
    assert_eq!(answer.status(), 200);
    assert_eq!(answer.headers()["cache-control"], "no-store");
}

/// What the browser test lacks here, if anything.
fn missing_tools() -> Option<&'static str> {
    if !Path::new(CHROMIUM).exists() {
        return Some("chromium not installed (apt-get install chromium)");
    }
    let runs = |program: &str| {
        std::process::Command::new(program)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    };
    if !runs("node") || !runs("npm") {
        return Some("node not installed (apt-get install nodejs npm)");
    }
    None
}

/// Runs `npm ci` in tests/browser unless the locked playwright-core and axe-core are both
/// installed there already. Quiet unless it fails.
async fn install_packages(browser_dir: &Path) {
    let version = |path: PathBuf, pointer: &str| -> Option<String> {
        let json: Value = serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
        json.pointer(pointer)?.as_str().map(str::to_string)
    };
    let installed = ["playwright-core", "axe-core"].iter().all(|package| {
        let locked = version(
            browser_dir.join("package-lock.json"),
            &format!("/packages/node_modules~1{package}/version"),
        );
        let present = version(
            browser_dir.join(format!("node_modules/{package}/package.json")),
            "/version",
        );
        locked.is_some() && locked == present
    });
    if installed {
        return;
    }
    let output = tokio::process::Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
        .current_dir(browser_dir)
        .stdin(Stdio::null())
        .output()
        .await
        .expect("run npm ci");
    assert!(
        output.status.success(),
        "npm ci in {} failed:\n{}{}",
        browser_dir.display(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Width and height of a PNG file, from its header.
fn png_size(png: &[u8]) -> Option<(u32, u32)> {
    if !png.starts_with(b"\x89PNG\r\n\x1a\n") || png.len() < 24 {
        return None;
    }
    let number = |at: usize| png.get(at..at + 4)?.try_into().ok().map(u32::from_be_bytes);
    Some((number(16)?, number(20)?))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_works_in_headless_chromium() {
    if let Some(missing) = missing_tools() {
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!(
                "{missing}: CI must run the browser test, so .ci/run must install it \
                 (apt-get install -y chromium nodejs npm)"
            );
        }
        say(&format!("skipping: {missing}"));
        return;
    }
    let started = Instant::now();
    let browser_dir = manifest_dir().join("tests/browser");
    install_packages(&browser_dir).await;
    // README's pictures are taken again only when asked (`UPDATE_SCREENSHOTS=1`): each run's
    // differ by their times and ids, and would leave the tree changed after every test run.
    let screenshots = match std::env::var("UPDATE_SCREENSHOTS").as_deref() {
        Ok("1") => manifest_dir().join("docs/screenshots"),
        _ => manifest_dir().join("target/settings-screenshots"),
    };

    let server = start_server().await;
    let script = tokio::process::Command::new("node")
        .arg(browser_dir.join("settings.mjs"))
        .current_dir(&browser_dir)
        .env("SETTINGS_BASE", &server.base)
        .env("SETTINGS_SETUP_TOKEN", &server.setup_token)
        .env("SETTINGS_API_TOKEN", &server.api_token)
        .env("SETTINGS_SCREENSHOTS", &screenshots)
        .env("CHROMIUM", CHROMIUM)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(300), script)
        .await
        .expect("the browser test did not finish within 300 s")
        .expect("run node tests/browser/settings.mjs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "tests/browser/settings.mjs failed ({}):\n{stderr}\n{stdout}",
        output.status
    );

    // The script checked everything already; check its findings again here.
    let result: Value = stdout
        .lines()
        .find_map(|line| line.strip_prefix("RESULT "))
        .and_then(|json| serde_json::from_str(json).ok())
        .unwrap_or_else(|| panic!("no RESULT line from the script:\n{stdout}\n{stderr}"));
    for list in ["external", "policyViolations", "pageErrors"] {
        assert_eq!(result[list], json!([]), "{list}: {result}");
    }
    for page in PAGES {
        assert_eq!(
            result["axe"][page],
            json!([]),
            "axe on {page}: {}",
            result["axe"]
        );
        let fit = &result["fit"][page];
        for device in ["laptop", "tablet"] {
            assert!(
                fit[device].as_i64().is_some_and(|overflow| overflow <= 0),
                "{page} overflows on a {device}: {fit}"
            );
        }
        let png = std::fs::read(screenshots.join(format!("{page}.png"))).expect("a screenshot");
        assert_eq!(
            png_size(&png),
            Some((1280, 800)),
            "docs/screenshots/{page}.png"
        );
    }

    // Each refusal is a sentence in the page; those the page words itself, word for word.
    let refusals = result["refusals"]
        .as_object()
        .unwrap_or_else(|| panic!("no refusals: {result}"));
    for (name, expected) in [
        ("session ended (disabled)", Some(SESSION_ENDED)),
        ("session ended (password reset)", Some(SESSION_ENDED)),
        ("session ended (ended by an admin)", Some(SESSION_ENDED)),
        (
            "passwords differ",
            Some("The two passwords differ: type the same password twice."),
        ),
        ("no permission", Some("Missing permission settings.")),
        ("wrong password", None),
        ("first-start link used", None),
        ("set-password link used", None),
        ("disabled account signs in", None),
        ("own account", None),
        ("label taken", None),
        ("wrong current password", None),
        ("old password after a reset", None),
    ] {
        let said = refusals[name].as_str().unwrap_or_default();
        assert!(
            said.ends_with('.') && said.len() > 10,
            "{name}: not a sentence: {said:?}"
        );
        if let Some(expected) = expected {
            assert_eq!(said, expected, "{name}");
        }
    }
    assert_eq!(
        result["http"]["bookingsRefused"]["extensions"]["code"],
        "FORBIDDEN"
    );
    assert_eq!(
        result["http"]["revokedRefused"]["extensions"]["code"],
        "UNAUTHENTICATED"
    );
    assert_eq!(
        result["http"]["resetRefused"]["extensions"]["code"],
        "UNAUTHENTICATED"
    );
    assert!(result["webhookPosts"].as_u64().is_some_and(|n| n >= 2));

    say(&format!(
        "settings: browser test passed in {:.1} s; screenshots in {}; the refusals as shown:",
        started.elapsed().as_secs_f64(),
        screenshots.display()
    ));
    for (name, said) in refusals {
        say(&format!("  {name}: {}", said.as_str().unwrap_or_default()));
    }
}

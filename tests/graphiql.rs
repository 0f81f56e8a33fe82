//! GraphiQL at `GET /graphql`, served whole from the binary (clinics often have no internet):
//!
//! - `assets_are_served_from_the_binary`: the page names only the server's own files, and
//!   `/graphiql/{file}` serves exactly the four vendored ones.
//! - `graphiql_works_in_headless_chromium`: a real browser (Debian's Chromium, driven by
//!   `tests/browser/graphiql.mjs` with playwright-core) renders the page, takes a token in the
//!   Headers tab, runs a query, shows the schema's descriptions and asks no other host for
//!   anything. It needs `/usr/bin/chromium` and Node.js (`apt-get install chromium nodejs npm`):
//!   without them it is skipped, but fails when `CI=true`. It runs `npm ci` in `tests/browser`
//!   when playwright-core is not installed there (no browser is downloaded).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use practice_api::config::ServeConfig;
use practice_api::http::{AppState, serve};
use practice_api::store::{PoolSettings, Store};
use serde_json::Value;
use tokio::net::TcpListener;

const CHROMIUM: &str = "/usr/bin/chromium";
const PRACTICE_NAME: &str = "My practice";

/// The four vendored files and their content types.
const ASSETS: &[(&str, &str)] = &[
    ("react.production.min.js", "text/javascript"),
    ("react-dom.production.min.js", "text/javascript"),
    ("graphiql.min.js", "text/javascript"),
    ("graphiql.min.css", "text/css"),
];

/// Writes to the real stderr, past the test harness's capture: the skip notice and the
/// screenshot's path are for whoever runs `cargo test`.
fn say(message: &str) {
    let _ = writeln!(std::io::stderr(), "{message}");
}

/// A server on a free loopback port, on a fresh SQLite file, with a token that may do anything.
struct Server {
    base: String,
    token: String,
    _dir: tempfile::TempDir,
}

async fn start_server() -> Server {
    let dir = tempfile::tempdir().expect("temporary directory");
    let url = format!("sqlite://{}", dir.path().join("graphiql.db").display());
    let store = Store::open(&url, &PoolSettings::default())
        .await
        .expect("open the store");
    let practice = practice_api::admin::practice(&store, None)
        .await
        .expect("default practice");
    assert_eq!(practice.name, PRACTICE_NAME);
    let (_, token) = practice_api::admin::create_token(
        &store,
        &practice.id,
        "browser",
        &["*".to_string()],
        None,
    )
    .await
    .expect("create a token");
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("local address").port();
    let state = AppState::new(store.clone(), &ServeConfig::default());
    tokio::spawn(serve(listener, None, state, std::future::pending()));
    Server {
        base: format!("http://127.0.0.1:{port}"),
        token,
        _dir: dir,
    }
}

fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[tokio::test]
async fn assets_are_served_from_the_binary() {
    let server = start_server().await;
    let client = reqwest::Client::new();

    let page = client
        .get(format!("{}/graphql", server.base))
        .header("accept", "text/html,application/xhtml+xml,*/*;q=0.8")
        .send()
        .await
        .expect("GET /graphql");
    assert_eq!(page.status(), 200);
    let content_type = page.headers()["content-type"].to_str().unwrap().to_string();
    assert!(content_type.starts_with("text/html"), "{content_type}");
    let html = page.text().await.unwrap();
    assert!(
        !html.contains("http://") && !html.contains("https://") && !html.contains("//unpkg"),
        "the page must load nothing from another host:\n{html}"
    );
    for (name, _) in ASSETS {
        assert!(
            html.contains(&format!("\"/graphiql/{name}")),
            "the page does not load /graphiql/{name}"
        );
    }

    for (name, media) in ASSETS {
        // As the page asks for it: with a version in the query string, which changes nothing.
        let response = client
            .get(format!("{}/graphiql/{name}?v=1", server.base))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{name}");
        let headers = response.headers().clone();
        assert_eq!(
            headers["content-type"],
            format!("{media}; charset=utf-8"),
            "{name}"
        );
        assert_eq!(headers["cache-control"], "public, max-age=86400", "{name}");
        let body = response.bytes().await.unwrap();
        let file = std::fs::read(manifest_dir().join("assets/graphiql").join(name)).unwrap();
        assert!(body == file, "{name} is not the file in assets/graphiql");
    }

    for path in [
        "/graphiql/README.md",
        "/graphiql/graphiql.js",
        "/graphiql/graphiql.min.js.map",
        "/graphiql/..%2FCargo.toml",
        "/graphiql/",
    ] {
        let response = client
            .get(format!("{}{path}", server.base))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 404, "{path}");
    }
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

/// Installs playwright-core in tests/browser from its lock file, unless the locked version is
/// there already. Quiet unless it fails.
async fn install_playwright(browser_dir: &Path) {
    let version_of = |path: PathBuf| -> Option<String> {
        let text = std::fs::read_to_string(path).ok()?;
        let json: Value = serde_json::from_str(&text).ok()?;
        json.pointer("/packages/node_modules~1playwright-core/version")
            .or_else(|| json.get("version"))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let locked = version_of(browser_dir.join("package-lock.json"));
    let installed = version_of(browser_dir.join("node_modules/playwright-core/package.json"));
    if locked.is_some() && locked == installed {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graphiql_works_in_headless_chromium() {
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
    install_playwright(&browser_dir).await;

    let server = start_server().await;
    let screenshot =
        std::env::temp_dir().join(format!("practice-api-graphiql-{}.png", std::process::id()));
    let _ = std::fs::remove_file(&screenshot);
    let script = tokio::process::Command::new("node")
        .arg(browser_dir.join("graphiql.mjs"))
        .current_dir(&browser_dir)
        .env("GRAPHIQL_URL", format!("{}/graphql", server.base))
        .env("GRAPHIQL_TOKEN", &server.token)
        .env("GRAPHIQL_EXPECT", PRACTICE_NAME)
        .env("GRAPHIQL_SCREENSHOT", &screenshot)
        .env("CHROMIUM", CHROMIUM)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(180), script)
        .await
        .expect("the browser test did not finish within 180 s")
        .expect("run node tests/browser/graphiql.mjs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "tests/browser/graphiql.mjs failed ({}):\n{stderr}\n{stdout}",
        output.status
    );

    // The script checked everything already; check its findings again here.
    let result: Value = stdout
        .lines()
        .find_map(|line| line.strip_prefix("RESULT "))
        .and_then(|json| serde_json::from_str(json).ok())
        .unwrap_or_else(|| panic!("no RESULT line from the script:\n{stdout}\n{stderr}"));
    assert_eq!(
        result.pointer("/result/data/currentPractice/name"),
        Some(&Value::from(PRACTICE_NAME)),
        "{result}"
    );
    assert_eq!(
        result["external"],
        Value::Array(vec![]),
        "the page asked another host"
    );
    assert!(
        result["docs"]
            .as_str()
            .is_some_and(|docs| docs.contains("One patient, by id")),
        "{result}"
    );
    let png = std::fs::read(&screenshot).expect("the screenshot");
    assert!(png.starts_with(b"\x89PNG"), "the screenshot is not a PNG");
    say(&format!(
        "graphiql: browser test passed in {:.1} s; screenshot: {}",
        started.elapsed().as_secs_f64(),
        screenshot.display()
    ));
}

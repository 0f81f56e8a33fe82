//! The command line, as an operator runs it: the real binary against a fresh database.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use practice_api::admin;
use rstest::rstest;
use tempfile::TempDir;

use crate::helpers::{Engine, TestDatabase, journals_holding_reads, journals_of_reads};

pub(crate) struct Cli {
    dir: TempDir,
    /// For PostgreSQL: the test's database, given as PRACTICE_DATABASE_URL. For SQLite: none,
    /// so that the default, `practice.db` in the working directory, is what runs.
    database: Option<TestDatabase>,
}

/// `let cli = cli!(engine);`, or an early return where PostgreSQL is missing on a laptop.
macro_rules! cli {
    ($engine:expr) => {
        match Cli::on($engine).await {
            Some(cli) => cli,
            None => return,
        }
    };
}

impl Cli {
    fn new() -> Cli {
        Cli {
            dir: tempfile::tempdir().expect("tempdir"),
            database: None,
        }
    }

    pub(crate) async fn on(engine: Engine) -> Option<Cli> {
        Some(match engine {
            Engine::Sqlite => Cli::new(),
            Engine::Postgres => Cli {
                dir: tempfile::tempdir().expect("tempdir"),
                database: Some(TestDatabase::new(engine).await?),
            },
        })
    }

    /// The URL of the database the commands use.
    fn database_url(&self) -> String {
        match &self.database {
            Some(db) => db.url.clone(),
            None => format!("sqlite://{}", self.dir.path().join("practice.db").display()),
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_practice-api"));
        command
            .args(args)
            .current_dir(self.dir.path())
            .env_remove("PRACTICE_DATABASE_URL")
            .env_remove("PRACTICE_PASSWORD")
            .env("PRACTICE_LOG", "warn");
        if let Some(db) = &self.database {
            command.env("PRACTICE_DATABASE_URL", &db.url);
        }
        command
    }

    pub(crate) fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("run practice-api")
    }

    /// Two staff users, by the command line: ada@example.com (admin) and rita@example.com
    /// (receptionist), both with the password "a long password".
    fn make_staff(&self) {
        for (email, role) in [
            ("ada@example.com", "admin"),
            ("rita@example.com", "receptionist"),
        ] {
            let made = self.run_with_stdin(
                &[
                    "user",
                    "create",
                    "--email",
                    email,
                    "--first-name",
                    "Test",
                    "--last-name",
                    role,
                    "--role",
                    role,
                    "--password-stdin",
                ],
                "a long password\n",
            );
            assert!(made.status.success(), "{}", stderr(&made));
        }
    }

    fn run_with_stdin(&self, args: &[&str], stdin: &str) -> Output {
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(stdin.as_bytes())
            .expect("write");
        child.wait_with_output().expect("wait")
    }
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

pub(crate) fn last_line(output: &Output) -> String {
    assert!(output.status.success(), "failed: {}", stderr(output));
    stdout(output).lines().last().unwrap_or("").to_string()
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn operator_commands_work_end_to_end(#[case] engine: Engine) {
    let cli = cli!(engine);
    let practice = last_line(&cli.run(&["practice", "create", "--name", "North Clinic"]));
    assert!(!practice.is_empty());
    if engine == Engine::Sqlite {
        let file = cli.dir.path().join("practice.db");
        assert!(file.exists(), "default database file");
    }

    let user = cli.run_with_stdin(
        &[
            "user",
            "create",
            "--email",
            "ada@north.example",
            "--first-name",
            "Ada",
            "--last-name",
            "Lovelace",
            "--role",
            "admin",
            "--doctor",
            "--password-stdin",
            "--practice",
            &practice,
        ],
        "a long password\n",
    );
    assert!(user.status.success(), "{}", stderr(&user));
    assert!(
        !stderr(&user).contains("a long password"),
        "the password is never printed"
    );

    let secret = last_line(&cli.run(&[
        "token",
        "create",
        "--name",
        "CRM sync",
        "--permission",
        "patients:read",
        "--permission",
        "query:patient",
        "--practice",
        &practice,
    ]));
    assert!(secret.starts_with(&format!("pa_{practice}_")), "{secret}");

    let listed = cli.run(&["token", "list", "--practice", &practice]);
    let listed = stdout(&listed);
    let line = listed
        .lines()
        .find(|l| l.contains("CRM sync"))
        .expect("listed");
    assert!(line.contains("patients:read,query:patient"), "{line}");
    assert!(line.ends_with("active"), "{line}");
    assert!(!listed.contains(&secret), "the secret is shown once only");

    let id = line.split('\t').next().expect("id");
    let revoked = cli.run(&["token", "revoke", id]);
    assert!(revoked.status.success(), "{}", stderr(&revoked));
    let listed = stdout(&cli.run(&["token", "list", "--practice", &practice]));
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with(id) && l.ends_with("revoked")),
        "{listed}"
    );

    // Without --practice: the default practice, made on first use, holds nothing of North's.
    let default_list = cli.run(&["token", "list"]);
    assert!(default_list.status.success());
    assert_eq!(stdout(&default_list), "");

    let migrated = cli.run(&["migrate"]);
    assert!(migrated.status.success(), "{}", stderr(&migrated));
}

/// `token list` lists every token, one a line, however many: past the 200 a practice may
/// have live, the revoked ones too.
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn token_list_lists_every_token(#[case] engine: Engine) {
    let cli = cli!(engine);
    let pool = practice_api::store::PoolSettings::default();
    let store = practice_api::store::Store::open(&cli.database_url(), &pool)
        .await
        .expect("open");
    let practice = admin::practice(&store, None).await.expect("practice").id;
    let every = ["*".to_string()];
    let mut made = Vec::new();
    for i in 0..200 {
        let (token, _) = admin::create_token(&store, &practice, &format!("t{i}"), &every, None)
            .await
            .expect("a token");
        made.push(token.id);
    }
    for id in &made[..10] {
        admin::revoke_token(&store, id).await.expect("revoke");
    }
    for i in 0..9 {
        admin::create_token(&store, &practice, &format!("u{i}"), &every, None)
            .await
            .expect("a token");
    }
    // One that expires a moment from now, and has when the list is asked for.
    let soon = (chrono::Utc::now() + chrono::Duration::milliseconds(500)).to_rfc3339();
    admin::create_token(&store, &practice, "brief", &every, Some(&soon))
        .await
        .expect("a token");
    store.close().await;
    tokio::time::sleep(std::time::Duration::from_millis(700)).await;
    let listed = cli.run(&["token", "list"]);
    assert!(listed.status.success(), "{}", stderr(&listed));
    let listed = stdout(&listed);
    assert_eq!(listed.lines().count(), 210);
    let state = |line: &str| line.rsplit('\t').next().unwrap_or_default().to_string();
    let count = |s: &str| listed.lines().filter(|l| state(l) == s).count();
    assert_eq!(
        (count("revoked"), count("expired"), count("active")),
        (10, 1, 199),
        "{listed}"
    );
    let brief = listed.lines().find(|l| l.contains("\tbrief\t"));
    assert!(brief.is_some_and(|l| l.ends_with("\texpired")), "{brief:?}");
}

#[test]
fn password_from_the_environment() {
    let cli = Cli::new();
    let output = cli
        .command(&[
            "user",
            "create",
            "--email",
            "rosa@example.com",
            "--first-name",
            "Rosa",
            "--last-name",
            "Desk",
            "--role",
            "receptionist",
        ])
        .env("PRACTICE_PASSWORD", "another long password")
        .output()
        .expect("run");
    assert!(output.status.success(), "{}", stderr(&output));
}

#[test]
fn bad_arguments_exit_non_zero_with_one_line() {
    let cli = Cli::new();
    let cases: Vec<(Vec<&str>, &str, &str)> = vec![
        (
            vec![
                "token",
                "create",
                "--name",
                "x",
                "--permission",
                "patients:delete",
            ],
            "",
            "unknown permission",
        ),
        (
            vec![
                "token",
                "create",
                "--name",
                "x",
                "--permission",
                "*",
                "--expires-at",
                "tomorrow",
            ],
            "",
            "RFC 3339",
        ),
        (
            vec![
                "token",
                "create",
                "--name",
                "x",
                "--permission",
                "*",
                "--expires-at",
                "2020-01-01T00:00:00Z",
            ],
            "",
            "--expires-at 2020-01-01T00:00:00Z is not in the future",
        ),
        (vec!["token", "revoke", "no-such-token"], "", "no API token"),
        (
            vec!["token", "list", "--practice", "no-such-practice"],
            "",
            "no practice",
        ),
        (
            vec![
                "user",
                "create",
                "--email",
                "a@b.example",
                "--first-name",
                "A",
                "--last-name",
                "B",
                "--role",
                "boss",
                "--password-stdin",
            ],
            "a long password",
            "unknown role",
        ),
        (
            vec![
                "user",
                "create",
                "--email",
                "a@b.example",
                "--first-name",
                "A",
                "--last-name",
                "B",
                "--role",
                "admin",
                "--password-stdin",
            ],
            "short",
            "at least 8",
        ),
        (
            vec![
                "user",
                "create",
                "--email",
                "nope",
                "--first-name",
                "A",
                "--last-name",
                "B",
                "--role",
                "admin",
                "--password-stdin",
            ],
            "a long password",
            "must be an email address",
        ),
        (
            vec!["--database", "mysql://x", "migrate"],
            "",
            "unsupported database URL",
        ),
        (
            vec!["serve", "--user-token-ttl", "soon"],
            "",
            "not a duration",
        ),
        // The missing argument is named on the one line.
        (
            vec!["token", "create", "--name", "x"],
            "",
            "were not provided: --permission",
        ),
        // A command that needs a subcommand says so, rather than printing its description.
        (vec!["user"], "", "a subcommand is missing"),
        // A limit of none is refused, not taken as one.
        (vec!["serve", "--rate-limit", "0"], "", "--rate-limit"),
        (
            vec!["--db-max-connections", "0", "migrate"],
            "",
            "--db-max-connections",
        ),
        (
            vec!["serve", "--max-body-bytes", "0"],
            "",
            "--max-body-bytes",
        ),
        (vec!["serve", "--max-depth", "0"], "", "--max-depth"),
        (vec!["serve", "--max-cost", "0"], "", "--max-cost"),
        (
            vec!["serve", "--max-connections-per-address", "0"],
            "",
            "--max-connections-per-address",
        ),
        // An address /metrics cannot be served at stops the server before it starts.
        (
            vec![
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--metrics-listen",
                "nowhere",
            ],
            "",
            "cannot serve /metrics on nowhere (PRACTICE_METRICS_LISTEN)",
        ),
    ];
    for (args, stdin, says) in cases {
        let output = cli.run_with_stdin(&args, stdin);
        assert!(!output.status.success(), "{args:?} succeeded");
        let err = stderr(&output);
        assert!(err.contains(says), "{args:?}: {err}");
        assert_eq!(
            err.trim_end().lines().count(),
            1,
            "{args:?}: one line, got {err}"
        );
    }
    // The URL named once in its error.
    let output = cli.run(&["--database", "notaurl", "migrate"]);
    assert_eq!(
        stderr(&output).matches("notaurl").count(),
        1,
        "{}",
        stderr(&output)
    );
    // A log format that is neither text nor json.
    let output = cli
        .command(&["migrate"])
        .env("PRACTICE_LOG_FORMAT", "yaml")
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(err.contains("PRACTICE_LOG_FORMAT"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    // A log filter that is not one, refused where it was set aside for the default unsaid.
    let output = cli
        .command(&["migrate"])
        .env("PRACTICE_LOG", "+++bad")
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(err.contains("PRACTICE_LOG is a log filter"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    // One that parses but names nowhere logs come from (a misspelt level or crate), which
    // would switch every log off without a word.
    for typo in ["inof", "practise_api=debug,warn"] {
        let output = cli
            .command(&["migrate"])
            .env("PRACTICE_LOG", typo)
            .output()
            .expect("run");
        assert_eq!(output.status.code(), Some(2), "{typo}");
        let err = stderr(&output);
        assert!(err.contains("neither a level"), "{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    }
    let output = cli
        .command(&["migrate"])
        .env(
            "PRACTICE_LOG",
            "warn,practice_api::store=debug,sqlx::postgres::notice=warn",
        )
        .output()
        .expect("run");
    assert!(output.status.success(), "{}", stderr(&output));
    // A duplicate email.
    let create = |email: &str| {
        cli.run_with_stdin(
            &[
                "user",
                "create",
                "--email",
                email,
                "--first-name",
                "A",
                "--last-name",
                "B",
                "--role",
                "admin",
                "--password-stdin",
            ],
            "a long password",
        )
    };
    assert!(create("dup@example.com").status.success());
    let again = create("DUP@example.com");
    assert!(!again.status.success());
    assert!(
        stderr(&again).contains("already exists"),
        "{}",
        stderr(&again)
    );
}

#[test]
fn schema_command_prints_the_checked_in_schema() {
    let cli = Cli::new();
    let output = cli.run(&["schema"]);
    assert!(output.status.success());
    let checked_in = include_str!("../../schema.graphql");
    assert_eq!(
        stdout(&output),
        checked_in,
        "schema.graphql is out of date: run `cargo run -- schema > schema.graphql`"
    );
    assert!(
        !cli.dir.path().join("practice.db").exists(),
        "schema needs no database"
    );
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn demo_fills_a_practice(#[case] engine: Engine) {
    let cli = cli!(engine);
    let output = cli.run(&["demo", "--patients", "120"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(err.contains("made 120 patients, 6 labels and "), "{err}");
    let bookings: usize = err
        .split("labels and ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("a count of bookings");
    assert!(bookings > 100, "a few weeks of bookings: {err}");
    assert!(err.contains("(practitioner)"), "{err}");
    // The database holds no two overlapping bookings of one doctor.
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(&cli.database_url())
        .await
        .expect("connect");
    let overlaps: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM bookings a JOIN bookings b ON a.practice_id = b.practice_id \
         AND a.doctor_id = b.doctor_id AND a.id < b.id WHERE a.cancelled_at IS NULL \
         AND b.cancelled_at IS NULL AND a.start_at < b.end_at AND b.start_at < a.end_at",
    )
    .fetch_one(&pool)
    .await
    .expect("count");
    // The record is filled too: relationships, attributes, memberships, phones, statuses.
    let filled: (i64, i64, i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT COUNT(*) FROM patients WHERE relationships <> '[]'), \
         (SELECT COUNT(*) FROM patients WHERE attributes <> '[]'), \
         (SELECT COUNT(*) FROM patients WHERE membership_name IS NOT NULL), \
         (SELECT COUNT(*) FROM patients WHERE phones <> '[]' AND occupation IS NOT NULL), \
         (SELECT COUNT(*) FROM bookings WHERE status = 'pending')",
    )
    .fetch_one(&pool)
    .await
    .expect("count");
    pool.close().await;
    assert_eq!(overlaps, 0);
    assert_eq!((filled.0, filled.1, filled.2), (50, 50, 17), "{filled:?}");
    assert_eq!(filled.3, 120, "{filled:?}");
    assert!(filled.4 > 0, "some bookings are pending: {filled:?}");
    // The staff's password was made at random, and printed once, alone on stdout's last line.
    let password = String::from_utf8_lossy(&output.stdout)
        .lines()
        .last()
        .unwrap_or_default()
        .to_string();
    assert!(password.len() >= 20, "{password:?}");
    assert!(!err.contains(&password), "the password is not in the log");
    // Demo data goes into an empty practice only: never mixed with a clinic's patients.
    let again = cli.run(&["demo", "--patients", "10"]);
    assert!(!again.status.success());
    assert!(
        stderr(&again).contains("already has patients"),
        "{}",
        stderr(&again)
    );
    // Its one line of reason, and no word of work it does not do.
    assert_eq!(
        stderr(&again).trim_end().lines().count(),
        1,
        "{}",
        stderr(&again)
    );
    assert!(again.stdout.is_empty());
    // Nor into one an earlier demo filled without patients: its labels and staff are there,
    // and a second run would print a password that is nobody's.
    let other = last_line(&cli.run(&["practice", "create", "--name", "Empty demo"]));
    let first = cli.run(&["demo", "--patients", "0", "--practice", &other]);
    assert!(first.status.success(), "{}", stderr(&first));
    let second = cli.run(&["demo", "--patients", "0", "--practice", &other]);
    assert!(!second.status.success(), "{}", stdout(&second));
    assert!(
        stderr(&second).contains("already has patients, labels or staff"),
        "{}",
        stderr(&second)
    );
    assert!(second.stdout.is_empty(), "no password for nobody");
}

/// `--help` shows where each setting comes from, but not the database URL's value in the
/// environment: it may hold a password.
#[test]
fn help_shows_no_password_from_the_environment() {
    let cli = Cli::new();
    for args in [&["--help"][..], &["serve", "--help"], &["backup", "--help"]] {
        let output = cli
            .command(args)
            .env(
                "PRACTICE_DATABASE_URL",
                "postgres://clinic:s3cret-pw@db.example/clinic",
            )
            .output()
            .expect("run");
        assert!(output.status.success(), "{args:?}: {}", stderr(&output));
        let text = stdout(&output) + &stderr(&output);
        assert!(text.contains("PRACTICE_DATABASE_URL"), "{args:?}: {text}");
        assert!(!text.contains("s3cret-pw"), "{args:?}: {text}");
    }
}

/// Output read by a reader that goes away (`| head`, `| grep -q`) ends there: the command
/// succeeds, with no panic on stderr. The schema is longer than a pipe holds, so its writer
/// meets the closed pipe.
#[test]
fn a_reader_that_goes_away_ends_the_output_not_the_command() {
    use std::io::Read;
    let cli = Cli::new();
    let mut child = cli
        .command(&["schema"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // More than a pipe holds (64 KiB on Linux): the writer meets the closed pipe.
    assert!(include_str!("../../schema.graphql").len() > 64 * 1024);
    let mut out = child.stdout.take().expect("stdout");
    let mut start = [0u8; 16];
    out.read_exact(&mut start).expect("the schema's start");
    drop(out);
    let output = child.wait_with_output().expect("wait");
    let err = stderr(&output);
    assert!(output.status.success(), "{}: {err}", output.status);
    assert!(!err.contains("panicked"), "{err}");
}

/// A `PRACTICE_*` variable set to nothing, as a deployment's template leaves one, is unset:
/// its default holds, where clap took "" for the value and refused it.
#[test]
fn a_setting_left_blank_in_the_environment_is_its_default() {
    let cli = Cli::new();
    let output = cli
        .command(&["migrate"])
        .env("PRACTICE_DB_MAX_CONNECTIONS", "")
        .env("PRACTICE_DB_ACQUIRE_TIMEOUT", " ")
        .output()
        .expect("run");
    assert!(output.status.success(), "{}", stderr(&output));
    // But a database URL left blank is a secret that did not come: refused, not the default.
    let cli = Cli::new();
    let output = cli
        .command(&["migrate"])
        .env("PRACTICE_DATABASE_URL", "")
        .output()
        .expect("run");
    assert!(!output.status.success(), "{}", stderr(&output));
    assert!(!cli.dir.path().join("practice.db").exists());
}

/// `backup` of a database that is not there is refused, without making it: a mistyped name
/// made an empty database and backed it up, with success. On PostgreSQL it says to use
/// pg_dump, without connecting first.
#[test]
fn a_backup_of_a_database_that_is_not_there_is_refused() {
    let cli = Cli::new();
    let output = cli.run(&[
        "--database",
        "sqlite://typo.db",
        "backup",
        "--to",
        "copy.db",
    ]);
    assert!(!output.status.success(), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(err.contains("no SQLite database at \"typo.db\""), "{err}");
    // Nor one in memory, gone with its process.
    let output = cli.run(&["--database", "sqlite::memory:", "backup", "--to", "copy.db"]);
    assert!(!output.status.success(), "{}", stderr(&output));
    assert!(!cli.dir.path().join("typo.db").exists(), "made: {err}");
    assert!(!cli.dir.path().join("copy.db").exists(), "copied: {err}");
    let output = cli.run(&[
        "--database",
        "postgres://postgres@127.0.0.1:1/nothing",
        "backup",
        "--to",
        "copy.db",
    ]);
    assert!(!output.status.success());
    let err = stderr(&output);
    assert!(err.contains("pg_dump"), "{err}");
}

/// Starts `practice-api serve` on a free port; returns the child and its GraphQL URL.
fn start_server(cli: &Cli) -> (std::process::Child, String) {
    start_server_with(cli, &[])
}

/// [`start_server`], with these settings in its environment.
pub(crate) fn start_server_with(
    cli: &Cli,
    settings: &[(&str, &str)],
) -> (std::process::Child, String) {
    let (child, url, _) = start_server_watched(cli, settings);
    (child, url)
}

/// [`start_server_with`], and the lines the server writes to stderr after its address.
fn start_server_watched(
    cli: &Cli,
    settings: &[(&str, &str)],
) -> (
    std::process::Child,
    String,
    std::sync::mpsc::Receiver<String>,
) {
    use std::io::{BufRead, BufReader};
    let mut child = cli
        .command(&["serve", "--listen", "127.0.0.1:0"])
        .env("PRACTICE_LOG", "info")
        .env("PRACTICE_RATE_LIMIT", "1000000")
        .env("PRACTICE_ADDRESS_RATE_LIMIT", "1000000")
        .envs(settings.iter().copied())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn server");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    let url = loop {
        let line = lines.next().expect("server exited").expect("read");
        if let Some(at) = line.find("http://") {
            break line[at..].trim().to_string();
        }
    };
    // Keep draining stderr so the server never blocks on a full pipe, whether or not the
    // lines are read.
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            let _ = sender.send(line);
        }
    });
    (child, url, receiver)
}

/// POSTs a GraphQL request to a server started by [`start_server`]; returns the body.
pub(crate) async fn post(
    client: &reqwest::Client,
    url: &str,
    token: &str,
    query: &str,
    variables: serde_json::Value,
) -> serde_json::Value {
    client
        .post(url)
        .header("x-token", token)
        .json(&serde_json::json!({ "query": query, "variables": variables }))
        .send()
        .await
        .expect("send")
        .json()
        .await
        .expect("json")
}

/// Creates the patient "Read `last`" through a server of [`start_server`]; returns its id.
async fn create_patient(client: &reqwest::Client, url: &str, token: &str, last: &str) -> String {
    let made = post(
        client,
        url,
        token,
        "mutation($l: String!) { createPatient(patientData: { first: \"Read\", last: $l }) { data { id } } }",
        serde_json::json!({ "l": last }),
    )
    .await;
    made["data"]["createPatient"]["data"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("created: {made}"))
        .to_string()
}

/// Reads the patient's first name through a server of [`start_server`]: "Read".
async fn read_patient(client: &reqwest::Client, url: &str, token: &str, patient: &str) {
    let body = post(
        client,
        url,
        token,
        "query($id: ID!) { patient(id: $id) { firstName } }",
        serde_json::json!({ "id": patient }),
    )
    .await;
    assert_eq!(body["data"]["patient"]["firstName"], "Read", "{body}");
}

/// How many reads of `patient(id)` the patient's trail lists, through a server of
/// [`start_server`], and the trail.
async fn reads_on_the_trail(
    client: &reqwest::Client,
    url: &str,
    token: &str,
    patient: &str,
) -> (usize, serde_json::Value) {
    let trail = post(
        client,
        url,
        token,
        "query($p: ID!) { auditEvents(patientId: $p, pagination: { pageSize: 100 }) { data { action operation } } }",
        serde_json::json!({ "p": patient }),
    )
    .await;
    let reads = trail["data"]["auditEvents"]["data"]
        .as_array()
        .unwrap_or_else(|| panic!("trail: {trail}"))
        .iter()
        .filter(|e| e["action"] == "read" && e["operation"] == "patient")
        .count();
    (reads, trail)
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn nothing_acknowledged_is_lost_when_the_process_is_killed(#[case] engine: Engine) {
    let cli = cli!(engine);
    let token = last_line(&cli.run(&["token", "create", "--name", "t", "--permission", "*"]));
    let (mut server, url) = start_server(&cli);
    let client = reqwest::Client::new();
    let mut ids = Vec::new();
    for i in 0..20 {
        let body: serde_json::Value = client
            .post(&url)
            .header("x-token", &token)
            .json(&serde_json::json!({
                "query": "mutation($l: String!) { createPatient(patientData: { first: \"Kill\", last: $l }) { data { id } } }",
                "variables": { "l": format!("Test{i}") }
            }))
            .send()
            .await
            .expect("send")
            .json()
            .await
            .expect("json");
        ids.push(
            body["data"]["createPatient"]["data"]["id"]
                .as_str()
                .expect("id")
                .to_string(),
        );
    }
    server.kill().expect("SIGKILL");
    server.wait().expect("wait");

    let (mut server, url) = start_server(&cli);
    let body = post(
        &client,
        &url,
        &token,
        "{ patients(pagination: { pageSize: 100 }) { data { id } } }",
        serde_json::json!({}),
    )
    .await;
    let found: Vec<&str> = body["data"]["patients"]["data"]
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|p| p["id"].as_str())
        .collect();
    assert_eq!(found.len(), 20, "{body}");
    for id in &ids {
        assert!(found.contains(&id.as_str()), "{id} was lost");
    }
    // Each write's event was committed with it: one per patient, none lost, none extra. On
    // PostgreSQL the feed shows an event once no transaction older than its own is still
    // open anywhere on the server (other tests' included): a moment, under load.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let body = post(
            &client,
            &url,
            &token,
            "{ events(limit: 500) { data { eventType identifiers { patientId } } } }",
            serde_json::json!({}),
        )
        .await;
        let events: Vec<&str> = body["data"]["events"]["data"]
            .as_array()
            .expect("events")
            .iter()
            .filter(|e| e["eventType"] == "patient.created")
            .filter_map(|e| e["identifiers"]["patientId"].as_str())
            .collect();
        assert!(
            ids.starts_with(&events.iter().map(|e| e.to_string()).collect::<Vec<_>>()),
            "in order, none extra: {body}"
        );
        if events.len() == ids.len() || std::time::Instant::now() > deadline {
            assert_eq!(events, ids, "one event per write, in order: {body}");
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    server.kill().expect("kill");
    let _ = server.wait();
}

/// A read answered is on the patient's trail even when the server is killed before it moves
/// its journal of reads into the audit log (SQLite, within a second of the read): the next
/// server moves what the one gone left.
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn reads_answered_are_on_the_trail_after_the_process_is_killed(#[case] engine: Engine) {
    let cli = cli!(engine);
    let token = last_line(&cli.run(&["token", "create", "--name", "t", "--permission", "*"]));
    let client = reqwest::Client::new();
    let patient = {
        let (server, url) = start_server(&cli);
        let _server = Stopped(server);
        create_patient(&client, &url, &token, "Often").await
    };
    // Killed right after its reads, the server has (on SQLite) most likely not moved them
    // yet: it does so about once a second. Tried again until it had not, so that the test
    // shows the journal left behind taken up.
    let mut reads = 0;
    for attempt in 0.. {
        let (mut server, url) = start_server(&cli);
        for _ in 0..3 {
            read_patient(&client, &url, &token, &patient).await;
            reads += 1;
        }
        server.kill().expect("SIGKILL");
        server.wait().expect("wait");
        if engine == Engine::Postgres || !journals_holding_reads(cli.dir.path()).is_empty() {
            break;
        }
        assert!(attempt < 5, "the reads were always moved before the kill");
    }

    let left = journals_of_reads(cli.dir.path());
    let (server, url) = start_server(&cli);
    let _server = Stopped(server);
    let (found, trail) = reads_on_the_trail(&client, &url, &token, &patient).await;
    assert_eq!(found, reads, "every read answered is on the trail: {trail}");
    for journal in &left {
        assert!(
            !journal.exists(),
            "{} was moved and removed",
            journal.display()
        );
    }
}

/// SQLite: a server stopped with SIGTERM moves its journal of reads into the log and leaves
/// no journal behind, though the mover of every second makes the next one ahead of the reads
/// (src/store/journal.rs): the reads before the stop are on the trail of the next start.
#[tokio::test]
async fn a_server_stopped_leaves_no_journal_of_reads_behind() {
    let cli = Cli::new();
    let token = last_line(&cli.run(&["token", "create", "--name", "t", "--permission", "*"]));
    let client = reqwest::Client::new();
    let (server, url) = start_server(&cli);
    let server = Stopped(server);
    let patient = create_patient(&client, &url, &token, "Once").await;
    // Two reads, each waited for until the mover (about once a second) has set its journal
    // aside and made the next ahead: then a journal is there and it holds nothing.
    for _ in 0..2 {
        read_patient(&client, &url, &token, &patient).await;
        let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !journals_holding_reads(cli.dir.path()).is_empty()
            || journals_of_reads(cli.dir.path()).is_empty()
        {
            assert!(
                std::time::Instant::now() < until,
                "no journal made ahead: {:?}",
                journals_of_reads(cli.dir.path())
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }
    let pid = server.0.id().to_string();
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(sent.success());
    let mut server = server;
    let status = server.0.wait().expect("wait");
    assert!(status.success(), "stopped: {status}");
    let left = journals_of_reads(cli.dir.path());
    assert!(left.is_empty(), "{left:?}");

    let (server, url) = start_server(&cli);
    let _server = Stopped(server);
    let (reads, trail) = reads_on_the_trail(&client, &url, &token, &patient).await;
    assert_eq!(reads, 2, "{trail}");
}

/// A server told to stop (SIGTERM) with a request in flight, once it has been seen to wait for
/// it rather than stop: a write held up by a lock another connection holds (on the labels on
/// PostgreSQL, on the file on SQLite), until the connection returned rolls back; the request's
/// answer comes through the task.
async fn stopping_with_a_request_in_flight(
    cli: &Cli,
    engine: Engine,
) -> (
    Stopped,
    sqlx::AnyConnection,
    tokio::task::JoinHandle<serde_json::Value>,
) {
    let token = last_line(&cli.run(&["token", "create", "--name", "t", "--permission", "*"]));
    // The server says when it starts on a request (tower-http's trace, at debug).
    let (server, url, said) =
        start_server_watched(cli, &[("PRACTICE_LOG", "info,tower_http=debug")]);
    let other = crate::helpers::hold_writes(&cli.database_url(), engine, "labels").await;
    let client = reqwest::Client::new();
    let writing = tokio::spawn(async move {
        post(
            &client,
            &url,
            &token,
            "mutation { createLabel(title: \"Held\", color: \"#f59e0b\") { data { id } error } }",
            serde_json::json!({}),
        )
        .await
    });
    // Until the server has the request.
    let started = tokio::task::spawn_blocking(move || {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while let Ok(line) =
            said.recv_timeout(until.saturating_duration_since(std::time::Instant::now()))
        {
            // Logs written to a pipe have no colours' escape codes.
            assert!(!line.contains('\u{1b}'), "an escape code in {line:?}");
            if line.contains("started processing request") {
                return true;
            }
        }
        false
    });
    assert!(
        started.await.expect("watch"),
        "the server never had the request"
    );
    if engine == Engine::Postgres {
        crate::helpers::waits_on_a_lock(&cli.database_url()).await;
    }
    let mut server = Stopped(server);
    signal(&server, "TERM");
    // It waits for the request rather than stopping.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert!(
        server.0.try_wait().expect("look").is_none(),
        "the server stopped with a request in flight"
    );
    (server, other, writing)
}

/// Sends `signal` (TERM, INT) to the server.
fn signal(server: &Stopped, signal: &str) {
    let sent = std::process::Command::new("kill")
        .args([&format!("-{signal}"), &server.0.id().to_string()])
        .status()
        .expect("kill");
    assert!(sent.success());
}

/// A request in flight when the server is told to stop (SIGTERM) is answered before it
/// exits, as cli.md asks.
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_request_in_flight_is_answered_before_the_server_stops(#[case] engine: Engine) {
    let cli = cli!(engine);
    let (mut server, mut other, writing) = stopping_with_a_request_in_flight(&cli, engine).await;
    sqlx::query("ROLLBACK")
        .execute(&mut other)
        .await
        .expect("let go");
    let answer = writing.await.expect("the request");
    assert!(
        answer["data"]["createLabel"]["data"]["id"].is_string(),
        "{answer}"
    );
    let status = server.0.wait().expect("wait");
    assert!(status.success(), "stopped: {status}");
}

/// A second signal while the server waits for its requests in flight stops it at once (exit
/// status 130): an operator's second Ctrl-C is not ignored for as long as a request may run.
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_second_signal_stops_the_server_at_once(#[case] engine: Engine) {
    let cli = cli!(engine);
    let (mut server, mut other, writing) = stopping_with_a_request_in_flight(&cli, engine).await;
    signal(&server, "INT");
    let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let status = loop {
        if let Some(status) = server.0.try_wait().expect("look") {
            break status;
        }
        assert!(
            std::time::Instant::now() < until,
            "still running 5 s after the second signal, its request held"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!(status.code(), Some(130), "{status}");
    // Its request got no answer: the server was stopped under it.
    assert!(
        writing.await.is_err(),
        "an answer from a server stopped at once"
    );
    sqlx::query("ROLLBACK")
        .execute(&mut other)
        .await
        .expect("let go");
}

/// A webhook attempt under way when the server is told to stop ends, and is recorded, before
/// the server exits: its delivery is `delivered`, not left claimed until its lease runs out
/// (and sent again after). The receiver answers a second and a half after it is sent to.
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_webhook_attempt_under_way_ends_before_the_server_stops(#[case] engine: Engine) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let cli = cli!(engine);
    let token = last_line(&cli.run(&["token", "create", "--name", "t", "--permission", "*"]));
    let receiver = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let receiver_url = format!("http://{}/in", receiver.local_addr().expect("address"));
    let (sent_to, mut attempts) = tokio::sync::mpsc::channel(4);
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = receiver.accept().await {
            let sent_to = sent_to.clone();
            tokio::spawn(async move {
                let mut request = vec![0u8; 16 * 1024];
                let _ = socket.read(&mut request).await;
                let _ = sent_to.send(()).await;
                tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
                let _ = socket
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                    .await;
            });
        }
    });
    let (server, url) = start_server_with(&cli, &[("PRACTICE_WEBHOOK_ALLOW_PRIVATE", "true")]);
    let mut server = Stopped(server);
    let client = reqwest::Client::new();
    let made = post(
        &client,
        &url,
        &token,
        "mutation($u: String!) { createWebhook(input: { url: $u, eventTypes: [\"label.created\"], label: \"CRM\" }) { data { id } error } }",
        serde_json::json!({ "u": receiver_url }),
    )
    .await;
    let hook = made["data"]["createWebhook"]["data"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{made}"))
        .to_string();
    post(
        &client,
        &url,
        &token,
        "mutation { createLabel(title: \"Sent\", color: \"#f59e0b\") { data { id } error } }",
        serde_json::json!({}),
    )
    .await;
    tokio::time::timeout(std::time::Duration::from_secs(10), attempts.recv())
        .await
        .expect("an attempt in time");
    signal(&server, "TERM");
    let status = tokio::task::spawn_blocking(move || {
        let status = server.0.wait().expect("wait");
        drop(server);
        status
    })
    .await
    .expect("the server's end");
    assert!(status.success(), "stopped: {status}");
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(&cli.database_url())
        .await
        .expect("connect");
    let (delivered,): (String,) =
        sqlx::query_as("SELECT status FROM webhook_deliveries WHERE subscription_id = $1")
            .bind(&hook)
            .fetch_one(&pool)
            .await
            .expect("the delivery");
    pool.close().await;
    assert_eq!(delivered, "delivered");
}

#[test]
fn an_unreachable_database_is_one_line_and_a_non_zero_exit() {
    let cli = Cli::new();
    let started = std::time::Instant::now();
    let output = cli.run(&[
        "--database",
        "postgres://postgres@127.0.0.1:1/nothing",
        "--db-acquire-timeout",
        "2s",
        "serve",
    ]);
    assert!(!output.status.success());
    let err = stderr(&output);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("the database is unavailable"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    // Not a hang: bounded by the acquire timeout (with room for a slow machine).
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
}

/// Sends createPatient to `url` again and again until `stop`; returns the ids of the patients
/// whose creation was answered with success, each also a permit added to `answered` as it comes.
async fn write_until(
    url: String,
    token: String,
    stop: tokio::sync::watch::Receiver<bool>,
    answered: std::sync::Arc<tokio::sync::Semaphore>,
) -> Vec<String> {
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(5))
        .build()
        .expect("client");
    let mut acknowledged = Vec::new();
    let mut i = 0;
    while !*stop.borrow() {
        i += 1;
        let sent = client
            .post(&url)
            .header("x-token", &token)
            .json(&serde_json::json!({
                "query": "mutation($l: String!) { createPatient(patientData: { first: \"Crash\", last: $l }) { data { id } } }",
                "variables": { "l": format!("Test{i}") }
            }))
            .send()
            .await;
        let Ok(answer) = sent else { continue };
        let Ok(body) = answer.json::<serde_json::Value>().await else {
            continue;
        };
        if let Some(id) = body["data"]["createPatient"]["data"]["id"].as_str() {
            acknowledged.push(id.to_string());
            answered.add_permits(1);
        }
    }
    acknowledged
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn writes_survive_ten_kills_in_the_middle_of_writing(#[case] engine: Engine) {
    let cli = cli!(engine);
    let token = last_line(&cli.run(&["token", "create", "--name", "t", "--permission", "*"]));
    let mut acknowledged = Vec::new();
    let mut url = String::new();
    for _ in 0..10 {
        let (mut server, at) = start_server(&cli);
        url = at;
        let (stop, stopping) = tokio::sync::watch::channel(false);
        let answered = std::sync::Arc::new(tokio::sync::Semaphore::new(0));
        let writers: Vec<_> = (0..4)
            .map(|_| {
                let writer = write_until(
                    url.clone(),
                    token.clone(),
                    stopping.clone(),
                    answered.clone(),
                );
                tokio::spawn(writer)
            })
            .collect();
        // Let the writers get going (a few writes answered: on a loaded machine the first
        // answers of a fresh server can take longer than any fixed pause), then kill the
        // server under them.
        let going = answered.acquire_many(4);
        let _ = tokio::time::timeout(std::time::Duration::from_secs(20), going).await;
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        server.kill().expect("SIGKILL");
        server.wait().expect("wait");
        let _ = stop.send(true);
        for writer in writers {
            acknowledged.extend(writer.await.expect("writer"));
        }
    }
    assert!(
        acknowledged.len() > 10,
        "only {} writes were acknowledged",
        acknowledged.len()
    );
    // Every write answered with success is there, with its record in the audit log.
    let (mut server, url_now) = start_server(&cli);
    let _ = url;
    let client = reqwest::Client::new();
    for id in &acknowledged {
        let body: serde_json::Value = client
            .post(&url_now)
            .header("x-token", &token)
            .json(&serde_json::json!({
                "query": "query($id: ID!) { patient(id: $id) { id } auditEvents(patientId: $id) { data { action } } }",
                "variables": { "id": id }
            }))
            .send()
            .await
            .expect("send")
            .json()
            .await
            .expect("json");
        assert_eq!(
            body["data"]["patient"]["id"],
            serde_json::json!(id),
            "{id} was lost: {body}"
        );
        let actions: Vec<&str> = body["data"]["auditEvents"]["data"]
            .as_array()
            .expect("events")
            .iter()
            .filter_map(|e| e["action"].as_str())
            .collect();
        assert!(actions.contains(&"create"), "{id} has no record: {body}");
    }
    // And with its event: every patient there has its one patient.created, and no event names
    // a patient that is not there (some writes committed without their answer arriving).
    let mut patients = std::collections::BTreeSet::new();
    for page in 1.. {
        let body = post(
            &client,
            &url_now,
            &token,
            "query($p: Int) { patients(pagination: { page: $p, pageSize: 100 }) { data { id } pageInfo { hasMore } } }",
            serde_json::json!({ "p": page }),
        )
        .await;
        let list = &body["data"]["patients"];
        for patient in list["data"].as_array().expect("patients") {
            patients.insert(patient["id"].as_str().expect("id").to_string());
        }
        if list["pageInfo"]["hasMore"] != true {
            break;
        }
    }
    let mut events = Vec::new();
    let mut after = serde_json::Value::Null;
    loop {
        let body = post(
            &client,
            &url_now,
            &token,
            "query($a: ID) { events(after: $a, eventTypes: [\"patient.created\"], limit: 500) { data { identifiers { patientId } } cursor hasMore } }",
            serde_json::json!({ "a": after }),
        )
        .await;
        let feed = &body["data"]["events"];
        for event in feed["data"].as_array().expect("events") {
            events.push(
                event["identifiers"]["patientId"]
                    .as_str()
                    .expect("patient")
                    .to_string(),
            );
        }
        after = feed["cursor"].clone();
        if feed["hasMore"] != true {
            break;
        }
    }
    let distinct: std::collections::BTreeSet<String> = events.iter().cloned().collect();
    assert_eq!(distinct.len(), events.len(), "an event written twice");
    assert_eq!(distinct, patients, "events and patients differ");
    server.kill().expect("kill");
    let _ = server.wait();
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_live_database_is_backed_up(#[case] engine: Engine) {
    let cli = cli!(engine);
    let token = last_line(&cli.run(&["token", "create", "--name", "t", "--permission", "*"]));
    let (mut server, url) = start_server(&cli);
    let client = reqwest::Client::new();
    let made: serde_json::Value = client
        .post(&url)
        .header("x-token", &token)
        .json(&serde_json::json!({ "query": "mutation { createPatient(patientData: { first: \"Backed\", last: \"Up\" }) { data { id } } }" }))
        .send()
        .await
        .expect("send")
        .json()
        .await
        .expect("json");
    let id = made["data"]["createPatient"]["data"]["id"].clone();
    let copy = cli.dir.path().join("copy.db");
    let copy_arg = copy.display().to_string();
    let output = cli.run(&["backup", "--to", &copy_arg]);
    // The database goes on after the backup; a client follows its events to their end.
    let feed = "query($after: ID) { events(after: $after, limit: 500) { data { eventType identifiers { patientId } } cursor } }";
    post(
        &client,
        &url,
        &token,
        "mutation { createPatient(patientData: { first: \"After\", last: \"Backup\" }) { data { id } } }",
        serde_json::json!({}),
    )
    .await;
    let followed = post(&client, &url, &token, feed, serde_json::json!({})).await;
    let cursor = followed["data"]["events"]["cursor"].clone();
    assert!(cursor.is_string(), "{followed}");
    server.kill().expect("kill");
    let _ = server.wait();
    match engine {
        Engine::Postgres => {
            assert!(!output.status.success());
            assert!(stderr(&output).contains("pg_dump"), "{}", stderr(&output));
            // So too with a file already there.
            std::fs::write(&copy, b"").expect("a file");
            let again = cli.run(&["backup", "--to", &copy_arg]);
            assert!(!again.status.success());
            assert!(stderr(&again).contains("pg_dump"), "{}", stderr(&again));
            return;
        }
        Engine::Sqlite => assert!(output.status.success(), "{}", stderr(&output)),
    }
    // The copy is a database of its own, with the patient in it; a second backup to the
    // same file is refused.
    let again = cli.run(&["backup", "--to", &copy_arg]);
    assert!(!again.status.success());
    assert!(stderr(&again).contains("exists"), "{}", stderr(&again));
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(&format!("sqlite://{copy_arg}"))
        .await
        .expect("open the copy");
    let found: Option<(String,)> = sqlx::query_as("SELECT id FROM patients WHERE id = $1")
        .bind(id.as_str().unwrap_or(""))
        .fetch_optional(&pool)
        .await
        .expect("read the copy");
    assert!(found.is_some());
    pool.close().await;

    // Restored as README says: the journals of reads moved into the old database by a
    // command, the old files set aside, the backup copied in its place.
    assert!(cli.run(&["token", "list"]).status.success());
    let aside = cli.dir.path().join("aside");
    std::fs::create_dir(&aside).expect("aside");
    for entry in std::fs::read_dir(cli.dir.path()).expect("list") {
        let path = entry.expect("entry").path();
        let name = path.file_name().map(|n| n.to_string_lossy().to_string());
        if name.is_some_and(|n| n.starts_with("practice.db")) {
            std::fs::rename(&path, aside.join(path.file_name().expect("name"))).expect("move");
        }
    }
    std::fs::copy(&copy, cli.dir.path().join("practice.db")).expect("restore");
    let (mut server, url) = start_server(&cli);
    // The client's cursor names an event the restored log lost: past its end, expired.
    let lost = post(
        &client,
        &url,
        &token,
        feed,
        serde_json::json!({ "after": cursor }),
    )
    .await;
    assert_eq!(
        lost["errors"][0]["extensions"]["code"], "CURSOR_EXPIRED",
        "{lost}"
    );
    // The restored database's new events come after every cursor the old one handed out:
    // the client that goes on with its cursor gets them, where it passed over them.
    let made = post(
        &client,
        &url,
        &token,
        "mutation { createPatient(patientData: { first: \"After\", last: \"Restore\" }) { data { id } } }",
        serde_json::json!({}),
    )
    .await;
    let restored = made["data"]["createPatient"]["data"]["id"].clone();
    let read_on = post(
        &client,
        &url,
        &token,
        feed,
        serde_json::json!({ "after": cursor }),
    )
    .await;
    assert_eq!(
        read_on["data"]["events"]["data"],
        serde_json::json!([{ "eventType": "patient.created", "identifiers": { "patientId": restored } }]),
        "{read_on}"
    );
    server.kill().expect("kill");
    let _ = server.wait();
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn json_logs_carry_the_request_id_and_no_secret(#[case] engine: Engine) {
    use std::io::{BufRead, BufReader};
    let cli = cli!(engine);
    let token = last_line(&cli.run(&["token", "create", "--name", "t", "--permission", "*"]));
    let mut child = cli
        .command(&["serve", "--listen", "127.0.0.1:0"])
        .env("PRACTICE_LOG", "debug,sqlx=warn,hyper=warn")
        .env("PRACTICE_LOG_FORMAT", "json")
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn server");
    let stderr = child.stderr.take().expect("stderr");
    let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let (url_tx, url_rx) = std::sync::mpsc::channel();
    let kept = lines.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(at) = line.find("http://") {
                let url: String = line[at..]
                    .chars()
                    .take_while(|c| !c.is_whitespace() && *c != '"')
                    .collect();
                let _ = url_tx.send(url);
            }
            kept.lock().expect("lines").push(line);
        }
    });
    let url = url_rx
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("listening");
    let client = reqwest::Client::new();
    let patient = "query { patient(id: \"x\") { email } }";
    let answer = client
        .post(&url)
        .header("x-token", &token)
        .json(&serde_json::json!({ "query": "mutation { createPatient(patientData: { first: \"Secret\", last: \"Surname\", email: \"hidden@example.com\" }) { data { id } } }" }))
        .send()
        .await
        .expect("send");
    let request_id = answer
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .expect("request id")
        .to_string();
    let _ = client
        .post(&url)
        .json(&serde_json::json!({ "query": "mutation { signIn(email: \"ada@example.com\", password: \"hunter2-password\") { token } }" }))
        .send()
        .await;
    let _ = client
        .post(&url)
        .header("x-token", &token)
        .json(&serde_json::json!({ "query": patient }))
        .send()
        .await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    child.kill().expect("kill");
    let _ = child.wait();
    let lines = lines.lock().expect("lines").clone();
    assert!(!lines.is_empty());
    for line in &lines {
        let parsed: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|_| panic!("not JSON: {line}"));
        assert!(parsed.is_object(), "{line}");
        for secret in [
            token.as_str(),
            "hunter2-password",
            "Surname",
            "hidden@example.com",
        ] {
            assert!(!line.contains(secret), "a secret in the log: {line}");
        }
    }
    // The request's lines carry its id.
    let of_request: Vec<&String> = lines.iter().filter(|l| l.contains(&request_id)).collect();
    assert!(
        !of_request.is_empty(),
        "no line names {request_id}: {lines:#?}"
    );
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn staff_are_listed_disabled_enabled_and_reset_on_the_command_line(#[case] engine: Engine) {
    let cli = cli!(engine);
    cli.make_staff();
    let listed = stdout(&cli.run(&["user", "list"]));
    let rita = listed
        .lines()
        .find(|l| l.contains("rita@example.com"))
        .expect("listed");
    assert!(rita.contains("\treceptionist\tTest receptionist"), "{rita}");
    assert!(!rita.ends_with("disabled"), "{rita}");

    let disabled = cli.run(&["user", "disable", "RITA@example.com"]);
    assert!(disabled.status.success(), "{}", stderr(&disabled));
    let listed = stdout(&cli.run(&["user", "list"]));
    assert!(
        listed
            .lines()
            .any(|l| l.contains("rita@example.com") && l.ends_with("\tdisabled")),
        "{listed}"
    );
    // The last admin stays.
    let refused = cli.run(&["user", "disable", "ada@example.com"]);
    assert!(!refused.status.success());
    assert!(
        stderr(&refused).contains("last enabled admin"),
        "{}",
        stderr(&refused)
    );
    let unknown = cli.run(&["user", "disable", "nobody@example.com"]);
    assert!(!unknown.status.success());
    assert!(stderr(&unknown).contains("no staff user with email nobody@example.com"));

    let enabled = cli.run(&["user", "enable", "rita@example.com"]);
    assert!(enabled.status.success(), "{}", stderr(&enabled));
    let listed = stdout(&cli.run(&["user", "list"]));
    assert!(!listed.contains("disabled"), "{listed}");

    let reset = cli.run(&["user", "reset-password", "rita@example.com"]);
    assert!(reset.status.success(), "{}", stderr(&reset));
    let token = last_line(&reset);
    assert!(token.starts_with("pa_"), "{token}");
    assert!(
        !stderr(&reset).contains(&token),
        "the token is printed once, on stdout"
    );

    // The token sets a new password through the API of a running server.
    let (mut server, url) = start_server(&cli);
    let client = reqwest::Client::new();
    let body: serde_json::Value = client
        .post(&url)
        .json(&serde_json::json!({
            "query": "mutation($t: String!) { setPassword(setPasswordToken: $t, password: \"the new password\") { token error } }",
            "variables": { "t": token },
        }))
        .send()
        .await
        .expect("send")
        .json()
        .await
        .expect("json");
    assert!(body["data"]["setPassword"]["token"].is_string(), "{body}");

    // An account that may have been taken over: reset with --revoke-tokens, the API tokens
    // its holder made stop working too.
    let post = |token: Option<String>, query: &str, variables: serde_json::Value| {
        let mut request = client.post(&url);
        if let Some(token) = token {
            request = request.header("x-token", token);
        }
        let sent = request.json(&serde_json::json!({ "query": query, "variables": variables }));
        async move {
            sent.send()
                .await
                .expect("send")
                .json::<serde_json::Value>()
                .await
                .expect("json")
        }
    };
    let signed_in = post(
        None,
        "mutation { signIn(email: \"ada@example.com\", password: \"a long password\") { token } }",
        serde_json::json!({}),
    )
    .await;
    let session = signed_in["data"]["signIn"]["token"]
        .as_str()
        .map(str::to_string);
    let made = post(
        session,
        "mutation { createApiToken(name: \"Ada's\", permissions: [\"*\"]) { token } }",
        serde_json::json!({}),
    )
    .await;
    let minted = made["data"]["createApiToken"]["token"]
        .as_str()
        .unwrap_or_else(|| panic!("{made}"))
        .to_string();
    let reset = cli.run(&[
        "user",
        "reset-password",
        "ada@example.com",
        "--revoke-tokens",
    ]);
    assert!(reset.status.success(), "{}", stderr(&reset));
    assert!(
        stderr(&reset).contains("every API token they made that worked is revoked"),
        "{}",
        stderr(&reset)
    );
    let refused = post(Some(minted), "{ apiTokens { id } }", serde_json::json!({})).await;
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(
        refused["errors"][0]["extensions"]["code"], "UNAUTHENTICATED",
        "{refused}"
    );
}

/// An email is unique across practices, so the commands that act on one staff user find them
/// in their own practice without `--practice`; with it, only in the practice it names.
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_staff_user_of_any_practice_is_found_by_their_email(#[case] engine: Engine) {
    let cli = cli!(engine);
    cli.make_staff();
    let north = last_line(&cli.run(&["practice", "create", "--name", "North Clinic"]));
    let made = cli.run_with_stdin(
        &[
            "user",
            "create",
            "--email",
            "nora@north.example",
            "--first-name",
            "Nora",
            "--last-name",
            "North",
            "--role",
            "practitioner",
            "--practice",
            &north,
            "--password-stdin",
        ],
        "a long password",
    );
    assert!(made.status.success(), "{}", stderr(&made));
    let listed = |practice: &str| stdout(&cli.run(&["user", "list", "--practice", practice]));

    let disabled = cli.run(&["user", "disable", "Nora@North.example"]);
    assert!(disabled.status.success(), "{}", stderr(&disabled));
    assert!(
        listed(&north)
            .lines()
            .any(|l| l.contains("nora@north.example") && l.ends_with("\tdisabled")),
        "{}",
        listed(&north)
    );
    let enabled = cli.run(&["user", "enable", "nora@north.example"]);
    assert!(enabled.status.success(), "{}", stderr(&enabled));
    assert!(!listed(&north).contains("disabled"), "{}", listed(&north));
    let reset = cli.run(&["user", "reset-password", "nora@north.example"]);
    assert!(reset.status.success(), "{}", stderr(&reset));
    assert!(last_line(&reset).starts_with("pa_"), "{}", stdout(&reset));

    // Named with another practice, the user is not there; the default practice's users are
    // still found as before.
    let elsewhere = cli.run(&["user", "list"]);
    let default = stdout(&elsewhere);
    assert!(!default.contains("nora@"), "{default}");
    let rita = default
        .lines()
        .find(|l| l.contains("rita@example.com"))
        .expect("rita listed");
    let default_practice = cli.run(&["user", "disable", "rita@example.com"]);
    assert!(default_practice.status.success(), "{rita}");
    let wrong = cli.run(&["user", "disable", "rita@example.com", "--practice", &north]);
    assert!(!wrong.status.success());
    assert!(
        stderr(&wrong).contains("no staff user with email rita@example.com"),
        "{}",
        stderr(&wrong)
    );
    let nobody = cli.run(&["user", "reset-password", "nobody@north.example"]);
    assert!(!nobody.status.success());
    assert!(
        stderr(&nobody).contains("no staff user with email nobody@north.example"),
        "{}",
        stderr(&nobody)
    );
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn serve_prints_a_first_admin_link_while_the_practice_has_no_staff(#[case] engine: Engine) {
    use std::io::{BufRead, BufReader};
    let cli = cli!(engine);
    let mut child = cli
        .command(&["serve", "--listen", "127.0.0.1:0"])
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn server");
    let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let mut seen = Vec::new();
    let link = loop {
        let line = lines.next().expect("server exited").expect("read");
        if let Some(at) = line.find("http://") {
            let url = line[at..]
                .split_whitespace()
                .next()
                .unwrap_or("")
                .to_string();
            if url.contains("/settings/#/setup?token=") {
                break url;
            }
        }
        seen.push(line);
        assert!(seen.len() < 10, "no first-admin link in {seen:#?}");
    };
    std::thread::spawn(move || for _ in lines {});
    let (base, token) = link.split_once("/settings/#/setup?token=").expect("link");
    let client = reqwest::Client::new();
    let body: serde_json::Value = client
        .post(format!("{base}/graphql"))
        .json(&serde_json::json!({
            "query": "mutation($t: String!) { createFirstAdmin(setupToken: $t, email: \"ada@example.com\", firstName: \"Ada\", lastName: \"Lovelace\", password: \"a long password\") { token user { role } error } }",
            "variables": { "t": token },
        }))
        .send()
        .await
        .expect("send")
        .json()
        .await
        .expect("json");
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(
        body["data"]["createFirstAdmin"]["user"]["role"], "admin",
        "{body}"
    );

    // With staff, the next start prints no link.
    let mut child = cli
        .command(&["serve", "--listen", "127.0.0.1:0"])
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn server");
    let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let listening = lines.next().expect("a line").expect("read");
    assert!(listening.contains("listening"), "{listening}");
    let _ = child.kill();
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let _ = child.wait();
    assert!(
        !rest.iter().any(|l| l.contains("/settings/#/setup")),
        "{rest:#?}"
    );
}

/// A server keeps the tokens it has found in memory; a token revoked, or a staff user
/// disabled, by the command line (another process, which tells the server nothing itself) is
/// refused from the next request on. On SQLite the very next one: the command moves the file
/// of changes beside the database before it commits, and the server looks at it on every
/// request. On PostgreSQL the change's NOTIFY reaches the server within milliseconds of the
/// command's return (the window of README's "Tokens and permissions"; two seconds allowed
/// here for a loaded machine).
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn the_command_line_revokes_what_a_running_server_holds(#[case] engine: Engine) {
    let cli = cli!(engine);
    cli.make_staff();
    let secret = last_line(&cli.run(&[
        "token",
        "create",
        "--name",
        "CRM",
        "--permission",
        "patients:read",
    ]));
    let listed = stdout(&cli.run(&["token", "list"]));
    let id = listed
        .lines()
        .find(|l| l.contains("CRM"))
        .and_then(|l| l.split('\t').next())
        .expect("listed")
        .to_string();
    let (server, url) = start_server(&cli);
    let _server = Stopped(server);
    let client = reqwest::Client::new();
    let signed_in = client
        .post(&url)
        .json(&serde_json::json!({
            "query": "mutation { signIn(email: \"rita@example.com\", password: \"a long password\") { token error } }",
        }))
        .send()
        .await
        .expect("send")
        .json::<serde_json::Value>()
        .await
        .expect("json");
    let session = signed_in["data"]["signIn"]["token"]
        .as_str()
        .unwrap_or_else(|| panic!("signed in: {signed_in}"))
        .to_string();
    let query = "{ patients { data { id } } }";
    // Each used a few times: found once, then served from memory.
    for token in [&secret, &session] {
        for _ in 0..3 {
            let body = post(&client, &url, token, query, serde_json::json!({})).await;
            assert!(body.get("errors").is_none(), "{body}");
        }
    }
    let refused = |token: String| {
        let (client, url) = (client.clone(), url.clone());
        async move {
            let until = std::time::Instant::now() + std::time::Duration::from_secs(2);
            loop {
                let body = post(&client, &url, &token, query, serde_json::json!({})).await;
                let code = body["errors"][0]["extensions"]["code"].clone();
                if code == "UNAUTHENTICATED" {
                    return;
                }
                assert!(
                    engine == Engine::Postgres && std::time::Instant::now() < until,
                    "still served after the command returned: {body}"
                );
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
        }
    };

    if engine == Engine::Sqlite {
        // The control: the token revoked straight in the file, by a program that does not
        // move the file of changes, is still served, from the server's memory (for up to
        // five seconds since it was read).
        sqlx::any::install_default_drivers();
        let mut db = <sqlx::AnyConnection as sqlx::Connection>::connect(&cli.database_url())
            .await
            .expect("connect");
        sqlx::query("UPDATE tokens SET revoked_at = 1 WHERE id = $1")
            .bind(&id)
            .execute(&mut db)
            .await
            .expect("revoked by hand");
        let body = post(&client, &url, &secret, query, serde_json::json!({})).await;
        assert!(body.get("errors").is_none(), "kept in memory: {body}");
    }
    let revoked = cli.run(&["token", "revoke", &id]);
    assert!(revoked.status.success(), "{}", stderr(&revoked));
    refused(secret).await;
    let disabled = cli.run(&["user", "disable", "rita@example.com"]);
    assert!(disabled.status.success(), "{}", stderr(&disabled));
    refused(session).await;
}

/// A server child process, stopped when the test ends, failed or not.
struct Stopped(std::process::Child);

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

//! The `practice-api` command line: parse, then call the library.

use std::io::Read;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use practice_api::admin::{self, NewStaff};
use practice_api::config::{DatabaseConfig, ServeConfig};
use practice_api::http::{self, AppState};
use practice_api::store::{Store, redact_url};
use practice_api::{graphql, store};
use tracing_subscriber::EnvFilter;

/// practice-api: a GraphQL API for clinic practice management.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(flatten)]
    database: DatabaseConfig,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs the API server.
    Serve(ServeConfig),
    /// Manages practices (clinics).
    #[command(subcommand)]
    Practice(PracticeCommand),
    /// Manages staff users.
    #[command(subcommand)]
    User(UserCommand),
    /// Manages API tokens.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Fills the database with realistic demo data.
    Demo {
        /// How many patients to make.
        #[arg(long, default_value_t = 200)]
        patients: usize,
        /// The practice to fill; the default practice if omitted.
        #[arg(long)]
        practice: Option<String>,
    },
    /// Writes a consistent copy of a live SQLite database to a new file (on PostgreSQL, use
    /// pg_dump).
    Backup {
        /// The file to write; it must not exist.
        #[arg(long)]
        to: std::path::PathBuf,
    },
    /// Prints the GraphQL schema in SDL.
    Schema,
    /// Applies pending database migrations and exits.
    Migrate,
}

#[derive(Subcommand)]
enum PracticeCommand {
    /// Adds a practice; prints its id on the last line.
    Create {
        #[arg(long)]
        name: String,
    },
}

#[derive(Subcommand)]
enum UserCommand {
    /// Adds a staff user. The password is read from stdin (--password-stdin) or from
    /// PRACTICE_PASSWORD, never from an argument.
    Create {
        #[arg(long)]
        email: String,
        #[arg(long)]
        first_name: String,
        #[arg(long)]
        last_name: String,
        /// Form of address, e.g. "Dr".
        #[arg(long)]
        title: Option<String>,
        /// admin, practitioner or receptionist.
        #[arg(long)]
        role: String,
        /// The user is a doctor who can be booked.
        #[arg(long)]
        doctor: bool,
        /// Read the password from standard input.
        #[arg(long)]
        password_stdin: bool,
        /// The practice (its id); the default practice if omitted.
        #[arg(long)]
        practice: Option<String>,
    },
    /// Lists the practice's staff users, one per line: id, email, role, name, and
    /// "disabled" for those who are.
    List {
        /// The practice (its id); the default practice if omitted.
        #[arg(long)]
        practice: Option<String>,
    },
    /// Disables a staff user: their sessions end at once and they can no longer sign in.
    Disable {
        /// The user's email.
        email: String,
        /// The practice (its id) the user must be in; without it, the user's own practice,
        /// found by the email (unique across practices).
        #[arg(long)]
        practice: Option<String>,
        /// Also revoke the API tokens the user made (signed in, or through tokens they made):
        /// for an account that may have been taken over.
        #[arg(long)]
        revoke_tokens: bool,
    },
    /// Enables a disabled staff user again.
    Enable {
        /// The user's email.
        email: String,
        /// The practice (its id) the user must be in; without it, the user's own practice,
        /// found by the email (unique across practices).
        #[arg(long)]
        practice: Option<String>,
    },
    /// Resets a staff user's password: the old one stops working, their sessions end, and a
    /// one-time set-password token (valid 72 hours) is printed alone on the last line.
    ResetPassword {
        /// The user's email.
        email: String,
        /// The practice (its id) the user must be in; without it, the user's own practice,
        /// found by the email (unique across practices).
        #[arg(long)]
        practice: Option<String>,
        /// Also revoke the API tokens the user made (signed in, or through tokens they made):
        /// for an account that may have been taken over.
        #[arg(long)]
        revoke_tokens: bool,
    },
}

#[derive(Subcommand)]
enum TokenCommand {
    /// Makes an API token; prints its secret alone on the last line.
    Create {
        #[arg(long)]
        name: String,
        /// A permission: *, settings, patients:read, bookings:write, query:patient, ...
        /// Repeat for more.
        #[arg(long = "permission", required = true)]
        permissions: Vec<String>,
        /// When the token stops working (RFC 3339, e.g. 2027-01-31T00:00:00Z).
        #[arg(long)]
        expires_at: Option<String>,
        /// The practice (its id); the default practice if omitted.
        #[arg(long)]
        practice: Option<String>,
    },
    /// Lists API tokens, one a line: id, name, permissions, created, last used, expiry, and
    /// "revoked", "expired" or "active".
    List {
        /// The practice (its id); the default practice if omitted.
        #[arg(long)]
        practice: Option<String>,
    },
    /// Revokes a token at once.
    Revoke {
        /// The token's id (not its secret).
        id: String,
    },
}

/// True when logs are JSON lines (PRACTICE_LOG_FORMAT=json).
static JSON_LOGS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

/// Tells the operator something on stderr, in one write, so that a script reading the log
/// never sees half a line: a line of text, or a JSON object like the log's own when logs are
/// JSON. Not filtered by PRACTICE_LOG: it is what the command has to say.
macro_rules! say {
    ($($arg:tt)*) => {
        say_line("INFO", &format!($($arg)*))
    };
}

fn say_line(level: &str, message: &str) {
    let line = if *JSON_LOGS.get().unwrap_or(&false) {
        serde_json::json!({
            // As the log's own lines write it.
            "timestamp": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            "level": level,
            "fields": { "message": message },
            "target": "practice_api",
        })
        .to_string()
    } else {
        message.to_string()
    };
    to_stderr(&line);
}

/// A line on stderr. A stderr that cannot be written (its reader gone) loses the line, rather
/// than stopping the command with a panic, as `eprintln!` would.
fn to_stderr(line: &str) {
    use std::io::Write;
    let _ = std::io::stderr()
        .lock()
        .write_all(format!("{line}\n").as_bytes());
}

/// `println!` for what scripts read (ids, secrets, lists, the schema), returning from the
/// command on a failure to write. A reader that has gone (`| head`, `| grep -q`) wanted no
/// more: the output ends there, and the command does not fail, where `println!` would stop it
/// with a panic.
macro_rules! out {
    ($($arg:tt)*) => {
        write_out(&format!("{}\n", format_args!($($arg)*)))?
    };
}

fn write_out(text: &str) -> Result<(), String> {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(format!("cannot write to stdout: {e}")),
    }
}

/// mimalloc rather than the system's allocator: a GraphQL request makes thousands of small
/// allocations, which mimalloc serves in fewer instructions, and it hands memory freed by one
/// thread back sooner, so that the server's resident memory stays close to what it uses
/// (figures in BENCHMARKS.md). Its `override` feature makes it C's `malloc` too, so that the
/// embedded SQLite's allocations (thousands per page of results) go to it rather than to
/// glibc's allocator, which took 9 % of a page's instructions.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// How long mimalloc keeps memory that was freed before it gives it back to the kernel, in
/// milliseconds. mimalloc 3 keeps it for a second (mimalloc 2, 100 ms: 10 times its 10 ms
/// delay, for its arenas): under pages of 100 rows a second of freed rows, responses and SQLite
/// pages stayed resident, and the server's peak RSS in `bench/run`'s `bookings` at 100,000
/// patients was 116 to 174 MB over a round of A/B runs, past the 150 MB target one run in two.
/// At 100 ms it was 102 to 138 MB, for about 8 % more CPU a page of bookings (memory given
/// back is faulted in again); at 10 ms, 89 to 112 MB for about 14 % more (BENCHMARKS.md,
/// twenty-ninth round). `MIMALLOC_PURGE_DELAY` in the environment, which mimalloc reads as it
/// starts, still decides when it is set.
const PURGE_DELAY_MS: std::ffi::c_long = 100;

/// mimalloc's `mi_option_purge_delay`: its place in `mi_option_t` (mimalloc.h), the same in
/// mimalloc 2 and 3. libmimalloc-sys does not name it, "for stability reasons"; the test
/// below checks that the option at this place is the purge delay of the mimalloc we build.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Sets the allocator's options, unless mimalloc took them from its environment as it started
/// (`MIMALLOC_PURGE_DELAY`, or its older name `MIMALLOC_RESET_DELAY`, in any case).
///
/// # Safety
///
/// No other thread may be running: mimalloc's options are plain fields, read without
/// synchronisation by every thread that allocates.
unsafe fn tune_allocator() {
    // SAFETY: `mi_option_set_default` writes one of mimalloc's option slots, only if mimalloc
    // did not take the option from the environment; the caller guarantees no other thread
    // reads it meanwhile. The option's place is checked by a test against this mimalloc.
    unsafe { libmimalloc_sys::mi_option_set_default(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS) }
}

/// Forgets every `PRACTICE_*` variable set to blanks only, so that it counts as unset and its
/// default holds, as a deployment's template that leaves a variable empty means: clap would
/// take the empty text as the value, and refuse it (`PRACTICE_METRICS_LISTEN=` would stop
/// `serve`, though unset it means "not served"). Not the database's URL nor the password:
/// blank, they are a secret that did not come (a template's missing value), and the command
/// says so rather than going on with a new `practice.db` of its own.
///
/// # Safety
///
/// No other thread may be running: the environment is read without a lock elsewhere (by C
/// code such as getaddrinfo), which a change beside it could meet half-made.
unsafe fn forget_blank_settings() {
    const KEPT_WHEN_BLANK: &[&str] = &["PRACTICE_DATABASE_URL", "PRACTICE_PASSWORD"];
    let blank: Vec<std::ffi::OsString> = std::env::vars_os()
        .filter(|(key, value)| {
            key.to_str()
                .is_some_and(|k| k.starts_with("PRACTICE_") && !KEPT_WHEN_BLANK.contains(&k))
                && value.to_str().is_some_and(|v| v.trim().is_empty())
        })
        .map(|(key, _)| key)
        .collect();
    for key in blank {
        // SAFETY: the caller guarantees that no other thread runs.
        unsafe { std::env::remove_var(key) };
    }
}

fn main() -> ExitCode {
    // SAFETY: the first things `main` does, before the runtime or anything else of ours starts
    // a thread.
    unsafe {
        tune_allocator();
        forget_blank_settings();
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help and --version.
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            to_stderr(&format!("{} (see --help)", one_line(&e)));
            return ExitCode::from(2);
        }
    };
    if let Err(message) = init_logging() {
        to_stderr(&format!("error: {message}"));
        return ExitCode::from(2);
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            to_stderr(&format!("error: cannot start the async runtime: {e}"));
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) if *JSON_LOGS.get().unwrap_or(&false) => {
            say_line("ERROR", &message);
            ExitCode::FAILURE
        }
        Err(message) => {
            to_stderr(&format!("error: {message}"));
            ExitCode::FAILURE
        }
    }
}

/// What is wrong with the arguments, in one line: clap's first paragraph (which names, on the
/// lines after its first, the arguments it is about), or, for a command given without the
/// subcommand it needs (which clap answers with the command's help), that one is missing,
/// with the help's usage line.
fn one_line(error: &clap::Error) -> String {
    let text = error.render().to_string();
    if error.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        let usage = text.lines().find_map(|l| l.trim().strip_prefix("Usage: "));
        return match usage {
            Some(usage) => format!("error: a subcommand is missing: {usage}"),
            None => "error: a subcommand is missing".into(),
        };
    }
    let paragraph: Vec<&str> = text
        .lines()
        .skip_while(|l| l.trim().is_empty())
        .take_while(|l| !l.trim().is_empty())
        .map(str::trim)
        .collect();
    if paragraph.is_empty() {
        "error: bad arguments".into()
    } else {
        paragraph.join(" ")
    }
}

async fn run(cli: Cli) -> Result<(), String> {
    if let Command::Schema = cli.command {
        // Needs no database.
        return print_schema();
    }
    let url = &cli.database.url;
    if let Command::Backup { .. } = cli.command {
        // Of a database that is there: opening a mistyped file would make it, empty.
        store::backup_source(url).map_err(|e| e.to_string())?;
    }
    let store = Store::open(url, &cli.database.pool()).await.map_err(|e| {
        // The URL named once: some errors name it already.
        let (message, shown) = (e.to_string(), redact_url(url));
        if message.contains(&shown) {
            message
        } else {
            format!("{message} ({shown})")
        }
    })?;
    let result = command(cli.command, &store).await;
    store.close().await;
    result
}

async fn command(command: Command, store: &Store) -> Result<(), String> {
    let fail = |e: admin::AdminError| e.to_string();
    match command {
        Command::Schema => print_schema(),
        Command::Migrate => {
            say!("migrations applied");
            Ok(())
        }
        Command::Serve(config) => serve(store.clone(), config).await,
        Command::Backup { to } => {
            let bytes = admin::backup(store, &to).await.map_err(fail)?;
            say!("backed up to {} ({bytes} bytes)", to.display());
            Ok(())
        }
        Command::Practice(PracticeCommand::Create { name }) => {
            let practice = admin::create_practice(store, &name).await.map_err(fail)?;
            say!("created practice {:?}", practice.name);
            out!("{}", practice.id);
            Ok(())
        }
        Command::User(UserCommand::Create {
            email,
            first_name,
            last_name,
            title,
            role,
            doctor,
            password_stdin,
            practice,
        }) => {
            let password = read_password(password_stdin)?;
            let practice = admin::practice(store, practice.as_deref())
                .await
                .map_err(fail)?;
            let user = admin::create_user(
                store,
                &practice.id,
                NewStaff {
                    email: &email,
                    title: title.as_deref(),
                    first_name: &first_name,
                    last_name: &last_name,
                    role: &role,
                    is_doctor: doctor,
                    password: &password,
                },
            )
            .await
            .map_err(fail)?;
            say!(
                "created {} {} in practice {:?}",
                user.role,
                user.email,
                practice.name
            );
            out!("{}", user.id);
            Ok(())
        }
        Command::User(UserCommand::List { practice }) => {
            let practice = admin::practice(store, practice.as_deref())
                .await
                .map_err(fail)?;
            let users = admin::list_users(store, &practice.id).await.map_err(fail)?;
            say!(
                "{} staff users in practice {:?}",
                users.len(),
                practice.name
            );
            for user in users {
                let state = if user.is_disabled() { "\tdisabled" } else { "" };
                out!(
                    "{}\t{}\t{}\t{}{state}",
                    user.id,
                    user.email,
                    user.role,
                    user.full_name()
                );
            }
            Ok(())
        }
        Command::User(UserCommand::Disable {
            email,
            practice,
            revoke_tokens,
        }) => {
            let user = admin::disable_user(store, practice.as_deref(), &email, revoke_tokens)
                .await
                .map_err(fail)?;
            say!(
                "disabled {}: their sessions have ended{}",
                user.email,
                tokens_revoked(revoke_tokens)
            );
            Ok(())
        }
        Command::User(UserCommand::Enable { email, practice }) => {
            let user = admin::enable_user(store, practice.as_deref(), &email)
                .await
                .map_err(fail)?;
            say!("enabled {}", user.email);
            Ok(())
        }
        Command::User(UserCommand::ResetPassword {
            email,
            practice,
            revoke_tokens,
        }) => {
            let (user, token) =
                admin::reset_password(store, practice.as_deref(), &email, revoke_tokens)
                    .await
                    .map_err(fail)?;
            say!(
                "reset the password of {}: their sessions have ended{}. They set a new one by \
                 opening /settings/#/set-password?token=<the token below> on the server, \
                 within 72 hours",
                user.email,
                tokens_revoked(revoke_tokens)
            );
            out!("{token}");
            Ok(())
        }
        Command::Token(TokenCommand::Create {
            name,
            permissions,
            expires_at,
            practice,
        }) => {
            let practice = admin::practice(store, practice.as_deref())
                .await
                .map_err(fail)?;
            let (token, secret) = admin::create_token(
                store,
                &practice.id,
                &name,
                &permissions,
                expires_at.as_deref(),
            )
            .await
            .map_err(fail)?;
            say!(
                "created token {} ({}) in practice {:?}; the secret below is shown once",
                token.id,
                token.name,
                practice.name
            );
            out!("{secret}");
            Ok(())
        }
        Command::Token(TokenCommand::List { practice }) => {
            let practice = admin::practice(store, practice.as_deref())
                .await
                .map_err(fail)?;
            let tokens = admin::list_tokens(store, &practice.id)
                .await
                .map_err(fail)?;
            let time = |ms: Option<i64>| {
                ms.and_then(chrono::DateTime::from_timestamp_millis)
                    .map_or_else(|| "-".into(), |t| t.to_rfc3339())
            };
            let now = chrono::Utc::now().timestamp_millis();
            for t in tokens {
                out!(
                    "{}\t{}\t{}\tcreated {}\tlast used {}\texpires {}\t{}",
                    t.id,
                    t.name,
                    t.permission_list().join(","),
                    time(Some(t.created_at)),
                    time(t.last_used_at),
                    time(t.expires_at),
                    if t.revoked_at.is_some() {
                        "revoked"
                    } else if t.has_expired(now) {
                        "expired"
                    } else {
                        "active"
                    },
                );
            }
            Ok(())
        }
        Command::Token(TokenCommand::Revoke { id }) => {
            let token = admin::revoke_token(store, &id).await.map_err(fail)?;
            say!("revoked token {} ({})", token.id, token.name);
            Ok(())
        }
        Command::Demo { patients, practice } => {
            let practice = admin::practice(store, practice.as_deref())
                .await
                .map_err(fail)?;
            let starting = || {
                say!(
                    "making {patients} demo patients in practice {:?}…",
                    practice.name
                )
            };
            let summary = admin::demo(store, &practice.id, patients, starting)
                .await
                .map_err(fail)?;
            say!(
                "made {} patients, {} labels and {} bookings; staff, whose password is on the \
                 last line below (shown this once):",
                summary.patients,
                summary.labels,
                summary.bookings
            );
            for (email, role) in &summary.staff {
                say!("  {email} ({role})");
            }
            // A password is nobody's without staff (their emails taken, once in millions).
            if !summary.staff.is_empty() {
                out!("{}", summary.password);
            }
            Ok(())
        }
    }
}

/// What `user disable` and `user reset-password` add when asked to revoke the user's tokens.
fn tokens_revoked(revoked: bool) -> &'static str {
    match revoked {
        true => ", and every API token they made that worked is revoked",
        false => "",
    }
}

/// The crates this binary is built from, comma-separated (see build.rs): where its logs come
/// from.
const LOG_CRATES: &str = env!("PRACTICE_LOG_CRATES");

/// The first target of a `PRACTICE_LOG` filter (that parsed) where no log can come from: not
/// a level, and no crate of `crates` starts with it, nor does it name a module of one. A word
/// that is no level is a target to tracing (`inof` means "everything of target inof, at every
/// level"), so a misspelt level or crate would switch the logs off, errors and all, without a
/// word. None when `crates` is empty (not known) or every target can match.
fn unknown_log_target<'d>(directives: &'d str, crates: &[&str]) -> Option<&'d str> {
    if crates.is_empty() {
        return None;
    }
    directives
        .split(',')
        .map(|directive| {
            let end = directive.find(['[', '=']).unwrap_or(directive.len());
            directive[..end].trim()
        })
        .filter(|target| !target.is_empty())
        .filter(|target| {
            target
                .parse::<tracing_subscriber::filter::LevelFilter>()
                .is_err()
        })
        .find(|target| {
            !crates.iter().any(|known| {
                known.starts_with(target)
                    || target
                        .strip_prefix(known)
                        .is_some_and(|rest| rest.starts_with("::"))
            })
        })
}

/// Logs go to stderr, filtered by PRACTICE_LOG, as text or (PRACTICE_LOG_FORMAT=json) one JSON
/// object a line. A request's lines carry its request id (the span's field); no line holds a
/// token, a password or a patient's data.
fn init_logging() -> Result<(), String> {
    let filter = match std::env::var("PRACTICE_LOG") {
        Ok(directives) if !directives.trim().is_empty() => {
            let filter = EnvFilter::try_new(&directives).map_err(|e| {
                format!(
                    "PRACTICE_LOG is a log filter such as info or practice_api=debug,warn, not \
                     {directives:?}: {e}"
                )
            })?;
            let crates: Vec<&str> = LOG_CRATES.split(',').filter(|c| !c.is_empty()).collect();
            if let Some(target) = unknown_log_target(&directives, &crates) {
                return Err(format!(
                    "PRACTICE_LOG names {target:?}, which is neither a level (error, warn, info, \
                     debug, trace, off) nor where any log comes from (a crate such as \
                     practice_api, tower_http or sqlx, or a module of one)"
                ));
            }
            filter
        }
        _ => EnvFilter::new("info,sqlx::postgres::notice=warn"),
    };
    // Colours for a person at a terminal only: in a file or a pipe, escape codes are noise.
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(filter);
    match std::env::var("PRACTICE_LOG_FORMAT").as_deref() {
        Err(_) | Ok("text") | Ok("") => builder.init(),
        Ok("json") => {
            let _ = JSON_LOGS.set(true);
            builder
                .json()
                .with_current_span(true)
                .with_span_list(false)
                .init()
        }
        Ok(other) => {
            return Err(format!(
                "PRACTICE_LOG_FORMAT is text or json, not {other:?}"
            ));
        }
    }
    Ok(())
}

fn print_schema() -> Result<(), String> {
    write_out(&graphql::sdl())
}

/// The password for `user create`: from stdin with --password-stdin, else PRACTICE_PASSWORD.
fn read_password(from_stdin: bool) -> Result<String, String> {
    if from_stdin {
        let mut text = String::new();
        std::io::stdin()
            .take(4096)
            .read_to_string(&mut text)
            .map_err(|e| format!("cannot read the password from stdin: {e}"))?;
        let password = text.strip_suffix('\n').unwrap_or(&text);
        let password = password.strip_suffix('\r').unwrap_or(password);
        return Ok(password.to_string());
    }
    std::env::var("PRACTICE_PASSWORD").map_err(|_| {
        "give the password on stdin with --password-stdin, or in PRACTICE_PASSWORD".into()
    })
}

async fn serve(store: store::Store, config: ServeConfig) -> Result<(), String> {
    let listener = tokio::net::TcpListener::bind(&config.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", config.listen))?;
    let metrics = http::bind_metrics(&config).await?;
    let address = listener
        .local_addr()
        .map_err(|e| format!("cannot read the listening address: {e}"))?;
    say!("practice-api listening on http://{address}/graphql");
    match admin::first_admin_link(&store).await {
        Ok(Some(token)) => say!(
            "the practice has no staff yet: open http://{address}/settings/#/setup?token={token} \
             within 24 hours to create its first admin (the link works once)"
        ),
        Ok(None) => {}
        Err(e) => say!("could not make the first-admin link: {e}"),
    }
    let state = AppState::new(store, &config);
    let served = http::serve(listener, metrics, state, shutdown_signal()).await;
    if let Some(watch) = SECOND_SIGNAL.get() {
        watch.abort();
    }
    served.map_err(|e| format!("server error: {e}"))?;
    say!("practice-api stopped");
    Ok(())
}

/// The first SIGTERM or Ctrl-C: the server stops taking connections and answers the requests
/// in flight before it exits (cli.md). A second one while it does stops it at once, with exit
/// status 130, for an operator who will not wait out those requests (up to
/// PRACTICE_REQUEST_TIMEOUT): as after a crash, what was not committed is not there.
async fn shutdown_signal() {
    signalled().await;
    let watch = tokio::spawn(async {
        signalled().await;
        say!("stopped at once: a second signal, with requests or webhook attempts in flight");
        std::process::exit(130);
    });
    let _ = SECOND_SIGNAL.set(watch.abort_handle());
}

/// The watch for a second signal, armed by the first, and let go once the server has stopped.
static SECOND_SIGNAL: std::sync::OnceLock<tokio::task::AbortHandle> = std::sync::OnceLock::new();

/// SIGTERM or SIGINT (Ctrl-C).
async fn signalled() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// clap checks the whole command line's definition: no two arguments share an id, every
    /// default parses. A clash would otherwise show only when that command runs.
    #[test]
    fn the_command_line_is_well_formed() {
        super::Cli::command().debug_assert();
    }

    /// A `PRACTICE_LOG` target must be somewhere logs come from: a level, a crate (or the
    /// start of one's name, as tracing matches them), or a module of one.
    #[test]
    fn a_log_filter_names_where_logs_come_from() {
        let crates = ["practice_api", "tower_http", "sqlx"];
        for fine in [
            "info",
            "INFO",
            "3",
            "off",
            "practice_api=debug,tower_http=warn",
            "info,sqlx::postgres::notice=warn",
            "practice_api::http::server=trace",
            "tower=debug",
            "[request]=debug",
            "warn,practice_api[request{id}]=trace",
            "info,",
        ] {
            assert_eq!(super::unknown_log_target(fine, &crates), None, "{fine}");
        }
        for (typo, target) in [
            ("inof", "inof"),
            ("warning", "warning"),
            ("practice-api=debug", "practice-api"),
            ("info,practise_api=debug", "practise_api"),
            ("practice_apix=debug", "practice_apix"),
        ] {
            assert_eq!(
                super::unknown_log_target(typo, &crates),
                Some(target),
                "{typo}"
            );
        }
        // Without the list of crates (a build without a lock file), nothing is refused.
        assert_eq!(super::unknown_log_target("inof", &[]), None);
        // The build's own list holds this crate and those it logs through.
        let built: Vec<&str> = super::LOG_CRATES.split(',').collect();
        for known in [
            "practice_api",
            "tower_http",
            "sqlx",
            "hyper",
            "async_graphql",
        ] {
            assert!(built.contains(&known), "{known} in {built:?}");
        }
    }

    /// `MI_OPTION_PURGE_DELAY` is the option mimalloc reads from `MIMALLOC_PURGE_DELAY` (or
    /// its older name, `MIMALLOC_RESET_DELAY`) as it starts; `tune_allocator` leaves what it
    /// read, and sets `PURGE_DELAY_MS` when neither is set. The test runs itself again, alone,
    /// once with each variable set and once with neither, as mimalloc reads them before any
    /// code of ours runs.
    #[test]
    fn the_purge_delay_is_set_at_start_unless_the_environment_sets_it() {
        let name = "tests::the_purge_delay_is_set_at_start_unless_the_environment_sets_it";
        if let Some(expected) = std::env::var_os("PRACTICE_TEST_MIMALLOC_PURGE_DELAY") {
            let expected = expected.to_string_lossy().into_owned();
            // SAFETY: run alone (`--test-threads 1`), by the run below: no other test's
            // thread allocates meanwhile. `mi_option_get` reads an option's slot.
            let delay = || unsafe { libmimalloc_sys::mi_option_get(super::MI_OPTION_PURGE_DELAY) };
            unsafe { super::tune_allocator() };
            assert_eq!(delay().to_string(), expected);
            return;
        }
        let variables = ["MIMALLOC_PURGE_DELAY", "MIMALLOC_RESET_DELAY"];
        let delay = super::PURGE_DELAY_MS.to_string();
        for (set, expected) in [
            (Some(("MIMALLOC_PURGE_DELAY", "77")), "77"),
            (Some(("MIMALLOC_RESET_DELAY", "55")), "55"),
            (None, delay.as_str()),
        ] {
            let mut run =
                std::process::Command::new(std::env::current_exe().expect("the test binary"));
            run.args(["--exact", name, "--test-threads", "1"])
                .env("PRACTICE_TEST_MIMALLOC_PURGE_DELAY", expected);
            // mimalloc reads the names in any case.
            for variable in variables {
                run.env_remove(variable).env_remove(variable.to_lowercase());
            }
            if let Some((variable, value)) = set {
                run.env(variable, value);
            }
            let run = run.output().expect("the test binary runs");
            let said = String::from_utf8_lossy(&run.stdout);
            assert!(run.status.success(), "{set:?}: {said}");
            assert!(
                said.contains("1 passed"),
                "the test ran in the child: {said}"
            );
        }
    }
}

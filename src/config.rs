//! One configuration, from command-line flags and `PRACTICE_*` environment variables.

use std::net::IpAddr;
use std::str::FromStr;
use std::time::Duration;

use clap::{Args, FromArgMatches};
use ipnet::IpNet;

use crate::graphql::pipeline::Limits;
use crate::store::PoolSettings;

/// Where the database is; every command takes it.
#[derive(Args, Clone, Debug)]
pub struct DatabaseConfig {
    /// Database URL: sqlite://FILE (created if missing) or postgres://USER@HOST/DB.
    // Its value in the environment is not shown by --help: it may hold a password.
    #[arg(
        long = "database",
        env = "PRACTICE_DATABASE_URL",
        hide_env_values = true,
        default_value = "sqlite://practice.db",
        global = true
    )]
    pub url: String,

    /// Most database connections the server keeps open.
    #[arg(
        long = "db-max-connections",
        env = "PRACTICE_DB_MAX_CONNECTIONS",
        default_value_t = 8,
        value_parser = clap::value_parser!(u32).range(1..),
        global = true
    )]
    pub max_connections: u32,

    /// How long a request waits for a free database connection before it fails with
    /// SERVICE_UNAVAILABLE (e.g. 5s, 500ms).
    #[arg(
        long = "db-acquire-timeout",
        env = "PRACTICE_DB_ACQUIRE_TIMEOUT",
        default_value = "5s",
        value_parser = parse_duration,
        global = true
    )]
    pub acquire_timeout: Duration,
}

impl Default for DatabaseConfig {
    /// The database settings with no flag and no variable given.
    fn default() -> Self {
        defaults("database")
    }
}

impl Default for PoolSettings {
    fn default() -> Self {
        DatabaseConfig::default().pool()
    }
}

impl DatabaseConfig {
    pub fn pool(&self) -> PoolSettings {
        PoolSettings {
            max_connections: self.max_connections.max(1),
            acquire_timeout: self.acquire_timeout,
        }
    }
}

/// How the server runs.
#[derive(Args, Clone, Debug)]
pub struct ServeConfig {
    /// Address to listen on.
    #[arg(long, env = "PRACTICE_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: String,

    /// How long a token from signIn is valid (e.g. 12h, 15m, 30s).
    #[arg(
        long,
        env = "PRACTICE_USER_TOKEN_TTL",
        default_value = "12h",
        value_parser = parse_duration
    )]
    pub user_token_ttl: Duration,

    /// Largest request body accepted, in bytes; larger requests get 413.
    #[arg(
        long,
        env = "PRACTICE_MAX_BODY_BYTES",
        default_value_t = 1_048_576,
        value_parser = at_least_one
    )]
    pub max_body_bytes: usize,

    /// Longest a GraphQL request may take, reading its body included, before it is stopped
    /// with SERVICE_UNAVAILABLE (e.g. 30s).
    #[arg(
        long,
        env = "PRACTICE_REQUEST_TIMEOUT",
        default_value = "30s",
        value_parser = parse_duration
    )]
    pub request_timeout: Duration,

    /// Longest a client may take to send a request's headers, and longest an idle connection
    /// is kept open, before it is closed (e.g. 10s).
    #[arg(
        long,
        env = "PRACTICE_HEADER_TIMEOUT",
        default_value = "10s",
        value_parser = parse_duration
    )]
    pub header_timeout: Duration,

    /// Most client connections open at once; further clients wait in the listen queue.
    #[arg(
        long = "max-connections",
        env = "PRACTICE_MAX_CONNECTIONS",
        default_value_t = 1000,
        value_parser = at_least_one
    )]
    pub max_client_connections: usize,

    /// Longest a response may wait for the client to take any of its bytes before the
    /// connection is closed (e.g. 10s).
    #[arg(
        long,
        env = "PRACTICE_WRITE_TIMEOUT",
        default_value = "10s",
        value_parser = parse_duration
    )]
    pub write_timeout: Duration,

    /// Longest a client connection lives; then it is closed between requests (e.g. 10m).
    #[arg(
        long,
        env = "PRACTICE_MAX_CONNECTION_AGE",
        default_value = "10m",
        value_parser = parse_duration
    )]
    pub max_connection_age: Duration,

    /// Most client connections open at once from one address (an IPv6 /64 counts as one;
    /// trusted proxies are not capped).
    #[arg(
        long,
        env = "PRACTICE_MAX_CONNECTIONS_PER_ADDRESS",
        default_value_t = 100,
        value_parser = at_least_one
    )]
    pub max_connections_per_address: usize,

    /// Addresses or CIDR ranges of the proxies in front of the server, comma-separated: only
    /// their X-Forwarded-For and Forwarded headers are believed.
    #[arg(
        long,
        env = "PRACTICE_TRUSTED_PROXIES",
        default_value = "",
        value_parser = parse_proxies
    )]
    pub trusted_proxies: TrustedProxies,

    /// The forwarding header the trusted proxies write: x-forwarded-for (the default) or
    /// forwarded (RFC 7239). Only that one is read: a client can send the other, and a proxy
    /// that does not write it passes it on unread.
    #[arg(
        long,
        env = "PRACTICE_FORWARDED_HEADER",
        value_enum,
        default_value = "x-forwarded-for"
    )]
    pub forwarded_header: ForwardedHeader,

    /// Origins whose browsers may call the API (CORS), comma-separated, such as
    /// https://clinic.example; none by default.
    #[arg(
        long,
        env = "PRACTICE_CORS_ORIGINS",
        default_value = "",
        value_parser = parse_origins
    )]
    pub cors_origins: Origins,

    /// Where to serve /metrics (Prometheus text format), e.g. 127.0.0.1:9090; not served
    /// unless set. It needs no token: keep it off the public network.
    #[arg(long, env = "PRACTICE_METRICS_LISTEN")]
    pub metrics_listen: Option<String>,

    /// How long events are kept for the feed, resumed subscriptions and webhook deliveries
    /// (e.g. 7d, 12h).
    #[arg(
        long,
        env = "PRACTICE_EVENT_RETENTION",
        default_value = "7d",
        value_parser = parse_duration
    )]
    pub event_retention: Duration,

    /// Time a websocket client has to send `connection_init` before it is closed with 4408.
    #[arg(
        long,
        env = "PRACTICE_WS_INIT_TIMEOUT",
        default_value = "10s",
        value_parser = parse_duration
    )]
    pub ws_init_timeout: Duration,

    /// How often a websocket is pinged (graphql-transport-ws's `ping`, and a websocket ping
    /// beside it); a client that sends nothing back for two of them in a row is gone, and its
    /// connection is dropped.
    #[arg(
        long,
        env = "PRACTICE_WS_KEEP_ALIVE",
        default_value = "30s",
        value_parser = at_least_a_second
    )]
    pub ws_keep_alive: Duration,

    /// Most subscriptions one websocket connection may run at once.
    #[arg(
        long,
        env = "PRACTICE_MAX_SUBSCRIPTIONS_PER_CONNECTION",
        default_value_t = 50,
        value_parser = at_least_one
    )]
    pub max_subscriptions_per_connection: usize,

    /// Most connections one token may hold open at once, on each server: websockets and
    /// subscriptions' event streams, together.
    #[arg(
        long,
        env = "PRACTICE_MAX_WEBSOCKETS_PER_TOKEN",
        default_value_t = 20,
        value_parser = at_least_one
    )]
    pub max_websockets_per_token: usize,

    /// Events a subscription may fall behind the live ones before it catches up from the log
    /// (falling behind more than three times a minute closes its connection: too slow).
    #[arg(
        long,
        env = "PRACTICE_MAX_SUBSCRIBER_LAG",
        default_value_t = crate::events::hub::DEFAULT_CAPACITY,
        value_parser = at_least_one
    )]
    pub max_subscriber_lag: usize,

    /// Let webhooks go to plain http and to private, loopback and link-local addresses (a
    /// clinic's own network, tests).
    #[arg(
        long,
        env = "PRACTICE_WEBHOOK_ALLOW_PRIVATE",
        default_value = "false",
        value_parser = clap::builder::BoolishValueParser::new(),
        action = clap::ArgAction::Set
    )]
    pub webhook_allow_private: bool,

    /// The delays before each attempt of a webhook delivery, comma-separated: the first
    /// attempt, then each retry.
    #[arg(
        long,
        env = "PRACTICE_WEBHOOK_RETRY_SCHEDULE",
        default_value = crate::events::webhooks::DEFAULT_SCHEDULE,
        value_parser = parse_retry_schedule
    )]
    pub webhook_retry_schedule: RetrySchedule,

    /// Requests a minute each token may make (requests without a token: each client address).
    #[arg(
        long,
        env = "PRACTICE_RATE_LIMIT",
        default_value_t = 240,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub rate_limit: u32,

    /// Requests a minute each client address may make, whatever its tokens, counted before
    /// any token is looked at.
    #[arg(
        long,
        env = "PRACTICE_ADDRESS_RATE_LIMIT",
        default_value_t = 1200,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub address_rate_limit: u32,

    /// Deepest nesting of selections a query may have.
    #[arg(
        long,
        env = "PRACTICE_MAX_DEPTH",
        default_value_t = Limits::default().max_depth,
        value_parser = at_least_one
    )]
    pub max_depth: usize,

    /// Highest cost a query may have: 1 a field, times the page size under a list.
    #[arg(
        long,
        env = "PRACTICE_MAX_COST",
        default_value_t = Limits::default().max_cost,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub max_cost: u64,

    /// Most aliases a query may use.
    #[arg(long, env = "PRACTICE_MAX_ALIASES", default_value_t = Limits::default().max_aliases)]
    pub max_aliases: usize,

    /// Most directives a query may use.
    #[arg(
        long,
        env = "PRACTICE_MAX_DIRECTIVES",
        default_value_t = Limits::default().max_directives
    )]
    pub max_directives: usize,

    /// Longest query document, in bytes.
    #[arg(
        long,
        env = "PRACTICE_MAX_DOCUMENT_BYTES",
        default_value_t = Limits::default().max_document_bytes,
        value_parser = at_least_one
    )]
    pub max_document_bytes: usize,
}

impl ServeConfig {
    /// What the background work of events needs.
    pub fn events(&self) -> crate::events::EventSettings {
        crate::events::EventSettings {
            retention: self.event_retention,
            delivery: crate::events::webhooks::DeliverySettings {
                allow_private: self.webhook_allow_private,
                schedule: self.webhook_retry_schedule.0.clone(),
            },
        }
    }

    /// The query limits these settings give.
    pub fn limits(&self) -> Limits {
        Limits {
            max_depth: self.max_depth,
            max_cost: self.max_cost,
            max_aliases: self.max_aliases,
            max_directives: self.max_directives,
            max_document_bytes: self.max_document_bytes,
        }
    }
}

impl Default for ServeConfig {
    /// The settings of a server started with no flag and no variable.
    fn default() -> Self {
        defaults("serve")
    }
}

/// Settings as the command line gives them when nothing is set, whatever the environment
/// holds: the defaults are written once, in the attributes above.
fn defaults<T: Args + FromArgMatches>(name: &'static str) -> T {
    let command =
        T::augment_args(clap::Command::new(name)).mut_args(|arg| arg.env(None::<&'static str>));
    command
        .try_get_matches_from([name])
        .and_then(|matches| T::from_arg_matches(&matches))
        .unwrap_or_else(|e| panic!("the defaults of `{name}` do not parse: {e}"))
}

/// The delays before each attempt of a webhook delivery.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetrySchedule(pub Vec<Duration>);

fn parse_retry_schedule(text: &str) -> Result<RetrySchedule, String> {
    crate::events::webhooks::parse_schedule(text).map(RetrySchedule)
}

/// The proxies whose forwarding headers are believed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrustedProxies(pub Vec<IpNet>);

/// The forwarding header the trusted proxies write, and the only one read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ForwardedHeader {
    /// `X-Forwarded-For: client, proxy1`: what nginx, HAProxy and most load balancers write.
    #[default]
    XForwardedFor,
    /// `Forwarded: for=client, for=proxy1` (RFC 7239).
    Forwarded,
}

/// Parses addresses or CIDR ranges, comma-separated (`10.0.0.0/8, 192.0.2.1`).
pub fn parse_proxies(list: &str) -> Result<TrustedProxies, String> {
    list.split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(|item| {
            IpNet::from_str(item)
                .or_else(|_| IpAddr::from_str(item).map(IpNet::from))
                .map_err(|_| {
                    format!("{item:?} is not an address or a CIDR range such as 10.0.0.0/8")
                })
        })
        .collect::<Result<_, _>>()
        .map(TrustedProxies)
}

/// Origins a browser's CORS request may come from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Origins(pub Vec<String>);

/// Parses origins, comma-separated: `scheme://host[:port]`, with no path.
pub fn parse_origins(list: &str) -> Result<Origins, String> {
    list.split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(|item| {
            let origin = item.trim_end_matches('/');
            let host = origin
                .strip_prefix("https://")
                .or_else(|| origin.strip_prefix("http://"));
            let valid = host.is_some_and(|host| {
                !host.is_empty() && !host.contains(['/', '?', '#', '@', ' ']) && host.is_ascii()
            });
            if valid {
                Ok(origin.to_ascii_lowercase())
            } else {
                Err(format!(
                    "{item:?} is not an origin such as https://clinic.example or \
                     http://localhost:3000"
                ))
            }
        })
        .collect::<Result<_, _>>()
        .map(Origins)
}

/// A count of at least 1: a limit of none would refuse everything (a body of 0 bytes, a
/// depth of 0), or be taken as 1 without a word.
fn at_least_one(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(count) => Ok(count),
        Err(error) => Err(error.to_string()),
    }
}

/// Parses a duration such as `12h`, `15m`, `30s`, `500ms`.
/// A duration of a second or more: shorter, a ping would go before a client far away could
/// answer the last.
fn at_least_a_second(text: &str) -> Result<Duration, String> {
    let duration = parse_duration(text)?;
    if duration < Duration::from_secs(1) {
        return Err(format!("{text:?} is shorter than a second"));
    }
    Ok(duration)
}

pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let duration = humantime::parse_duration(text.trim())
        .map_err(|e| format!("{text:?} is not a duration such as 12h, 15m or 30s: {e}"))?;
    if duration.is_zero() {
        return Err(format!("{text:?} must be longer than zero"));
    }
    Ok(duration)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_flags_defaults_whatever_the_environment() {
        let config = ServeConfig::default();
        assert_eq!(config.listen, "127.0.0.1:8080");
        assert_eq!(config.user_token_ttl, Duration::from_secs(12 * 3600));
        assert_eq!(config.request_timeout, Duration::from_secs(30));
        assert_eq!(config.rate_limit, 240);
        assert_eq!(config.limits(), Limits::default());
        let pool = PoolSettings::default();
        assert_eq!(pool.max_connections, 8);
        assert_eq!(pool.acquire_timeout, Duration::from_secs(5));
        assert_eq!(config.event_retention, Duration::from_secs(7 * 24 * 3600));
        assert_eq!(config.ws_init_timeout, Duration::from_secs(10));
        assert_eq!(config.ws_keep_alive, Duration::from_secs(30));
        assert!(!config.webhook_allow_private);
        assert_eq!(
            config.webhook_retry_schedule,
            parse_retry_schedule("0s,5s,5m,30m,2h,5h,10h,10h").expect("parses")
        );
        assert_eq!(config.metrics_listen, None);
    }

    /// Each setting of cli.md's table is read from the variable it names (clap reads the
    /// environment; what is checked here is that each is wired to its name).
    #[test]
    fn the_settings_cli_md_names_are_read_from_their_variables() {
        let serve = ServeConfig::augment_args(clap::Command::new("serve"));
        let read: Vec<String> = serve
            .get_arguments()
            .filter_map(|arg| arg.get_env())
            .map(|name| name.to_string_lossy().into_owned())
            .collect();
        for name in [
            "PRACTICE_LISTEN",
            "PRACTICE_USER_TOKEN_TTL",
            "PRACTICE_RATE_LIMIT",
            "PRACTICE_EVENT_RETENTION",
            "PRACTICE_WS_INIT_TIMEOUT",
            "PRACTICE_WEBHOOK_ALLOW_PRIVATE",
            "PRACTICE_WEBHOOK_RETRY_SCHEDULE",
            "PRACTICE_TRUSTED_PROXIES",
            "PRACTICE_FORWARDED_HEADER",
            "PRACTICE_CORS_ORIGINS",
            "PRACTICE_METRICS_LISTEN",
        ] {
            assert!(read.iter().any(|r| r == name), "{name} is not read");
        }
    }

    #[test]
    fn parses_origins() {
        assert_eq!(
            parse_origins("https://Clinic.example, http://localhost:3000/").expect("parses"),
            Origins(vec![
                "https://clinic.example".into(),
                "http://localhost:3000".into()
            ])
        );
        for bad in ["clinic.example", "https://", "https://a/b", "ftp://a"] {
            assert!(parse_origins(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn parses_trusted_proxies() {
        let proxies = parse_proxies("10.0.0.0/8, 192.0.2.1,").expect("parses");
        assert_eq!(proxies.0.len(), 2);
        assert!(parse_proxies("10.0.0.0/33").is_err());
        assert_eq!(parse_proxies("").expect("none"), TrustedProxies::default());
    }

    #[test]
    fn parses_durations() {
        assert_eq!(parse_duration("12h"), Ok(Duration::from_secs(43_200)));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("15m"), Ok(Duration::from_secs(900)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("0s").is_err());
    }
}

//! Webhook delivery: a worker on every instance claims the deliveries that are due from the
//! outbox (`store::webhooks`), for a lease, signs each as Standard Webhooks says ([`sign`]),
//! and posts it with a client that follows no redirect, reads at most [`MAX_RESPONSE_BYTES`]
//! of the answer, gives up after [`TIMEOUT`] and connects only to public addresses unless
//! the operator allows private ones ([`address`]). Then it records the attempt and what comes
//! next: done, another attempt on the schedule, or a pause.

pub mod address;
pub mod sign;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{Semaphore, watch};

use super::hub::Hub;
use crate::store::webhooks::{Claimed, Header, Outcome, old_secrets_at};
use crate::store::{Store, now_ms};

/// Longest a receiver may take to answer.
pub const TIMEOUT: Duration = Duration::from_secs(15);
/// Most of an answer read: a receiver's answer is not used, only its status.
pub const MAX_RESPONSE_BYTES: usize = 4096;
/// How long a claim holds: longer than an attempt can take, so that while the instance lives
/// no other claims the delivery; after it, another instance may, if this one died.
const LEASE: Duration = Duration::from_secs(60);
/// Attempts in flight at once, per instance.
const CONCURRENCY: usize = 16;
/// Attempts in flight at once to one subscription, counted from every instance's leases
/// (instances claiming at the same moment may each take up to this many): a receiver that
/// takes connections and never answers holds this many places for 15 s each, and every
/// other subscription's deliveries go out beside them.
const PER_SUBSCRIPTION: u32 = 8;
/// A subscription that has failed every attempt for this long is paused.
pub const GIVE_UP_AFTER: Duration = Duration::from_secs(5 * 24 * 3600);
/// How long past a receiver's [`TIMEOUT`] a server that stops waits for its attempts in
/// flight to be recorded.
const FINISH_MARGIN: Duration = Duration::from_secs(5);
/// Shortest time between two looks for deliveries due.
const LOOK_EVERY: Duration = Duration::from_millis(50);
/// Webhook attempts made, by outcome (`delivered`, `failed`, `gone`), for `/metrics`.
pub const ATTEMPTS: &str = "practice_webhook_attempts_total";
/// The longest `Retry-After` honoured.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(24 * 3600);

/// How webhooks are delivered.
#[derive(Clone, Debug)]
pub struct DeliverySettings {
    /// Plain `http` and private, loopback and link-local addresses are allowed.
    pub allow_private: bool,
    /// The delay before each attempt: the first, then each retry.
    pub schedule: Vec<Duration>,
}

impl Default for DeliverySettings {
    fn default() -> Self {
        DeliverySettings {
            allow_private: false,
            schedule: parse_schedule(DEFAULT_SCHEDULE).unwrap_or_default(),
        }
    }
}

/// The schedule of the contract: immediately, then 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h.
pub const DEFAULT_SCHEDULE: &str = "0s,5s,5m,30m,2h,5h,10h,10h";

/// Parses a schedule: delays, comma-separated (`0s,5s,5m`); at most 20 of them, each at most
/// a day.
pub fn parse_schedule(text: &str) -> Result<Vec<Duration>, String> {
    let delays = text
        .split(',')
        .map(str::trim)
        .map(|item| {
            let delay = humantime::parse_duration(item).map_err(|e| {
                format!("{item:?} in the retry schedule is not a delay such as 0s, 5m or 2h: {e}")
            })?;
            if delay > Duration::from_secs(24 * 3600) {
                return Err(format!(
                    "{item:?} in the retry schedule is longer than a day"
                ));
            }
            Ok(delay)
        })
        .collect::<Result<Vec<_>, _>>()?;
    if delays.is_empty() || delays.len() > 20 {
        return Err("the retry schedule has 1 to 20 delays".into());
    }
    Ok(delays)
}

/// Starts the delivery worker; it runs until [`Deliveries::finish`], or as long as the runtime.
pub fn start(store: Store, hub: Hub, settings: DeliverySettings) -> Deliveries {
    let slots = Arc::new(Semaphore::new(CONCURRENCY));
    let (stop, stopped) = watch::channel(false);
    let deliveries = Deliveries {
        stop,
        slots: slots.clone(),
    };
    let client = match client(settings.allow_private) {
        Ok(client) => client,
        Err(error) => {
            tracing::error!(%error, "webhooks are not delivered: no HTTP client");
            return deliveries;
        }
    };
    let worker = Worker {
        store,
        hub,
        client,
        settings: Arc::new(settings),
        slots,
    };
    tokio::spawn(worker.run(stopped));
    deliveries
}

/// The delivery worker, to be stopped with the server.
pub struct Deliveries {
    stop: watch::Sender<bool>,
    slots: Arc<Semaphore>,
}

impl Deliveries {
    /// Claims no more deliveries, and waits for the attempts in flight to end and be recorded,
    /// for at most a receiver's [`TIMEOUT`] and a little: a server that stops does not cut an
    /// attempt half-way, which would leave its delivery claimed until its lease ran out (a
    /// minute before another instance, or this one started again, may send it) and its
    /// receiver, perhaps, with an event it will be sent again.
    pub async fn finish(self) {
        let _ = self.stop.send(true);
        let all = u32::try_from(CONCURRENCY).unwrap_or(u32::MAX);
        let ended = tokio::time::timeout(TIMEOUT + FINISH_MARGIN, self.slots.acquire_many(all));
        if ended.await.is_err() {
            tracing::warn!("webhook attempts still under way as the server stops: cut off");
        }
    }
}

/// The client that delivers: no redirect, no proxy, a time limit, public addresses only
/// (see [`address`]).
fn client(allow_private: bool) -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .timeout(TIMEOUT)
        .connect_timeout(TIMEOUT)
        .user_agent(concat!("practice-api-webhooks/", env!("CARGO_PKG_VERSION")))
        .dns_resolver(Arc::new(address::PublicOnly { allow_private }))
        .build()
}

struct Worker {
    store: Store,
    hub: Hub,
    client: reqwest::Client,
    settings: Arc<DeliverySettings>,
    /// Free places for attempts in flight.
    slots: Arc<Semaphore>,
}

impl Worker {
    async fn run(self, mut stopped: watch::Receiver<bool>) {
        let woken = self.hub.wake_up();
        loop {
            if *stopped.borrow() {
                return;
            }
            // Woken when the log has new events (and so, perhaps, deliveries), when an attempt
            // ends, or when the next delivery is due. A look at when the next one is due is a
            // read; only a delivery due now is worth a write to claim it.
            let notified = woken.notified();
            let wait = self.until_next_due().await;
            if wait.is_zero() && self.claim().await > 0 {
                continue;
            }
            tokio::select! {
                () = notified => {}
                () = tokio::time::sleep(wait.max(LOOK_EVERY)) => {}
                _ = stopped.changed() => return,
            }
            // A busy instance wakes the worker at every commit: one look serves them all.
            tokio::time::sleep(LOOK_EVERY).await;
        }
    }

    /// Claims as many due deliveries as there are free places and starts their attempts;
    /// returns how many.
    async fn claim(&self) -> usize {
        let free = self.slots.available_permits();
        if free == 0 {
            return 0;
        }
        let now = now_ms();
        let lease_until = now + millis(LEASE);
        let claimed = match self
            .store
            .claim_deliveries(
                now,
                lease_until,
                free as u32,
                PER_SUBSCRIPTION,
                self.first_delay(),
            )
            .await
        {
            Ok(claimed) => claimed,
            Err(error) => {
                tracing::warn!(%error, "could not claim webhook deliveries");
                return 0;
            }
        };
        let count = claimed.len();
        for delivery in claimed {
            let Ok(slot) = self.slots.clone().try_acquire_owned() else {
                break;
            };
            let (store, client, settings) = (
                self.store.clone(),
                self.client.clone(),
                self.settings.clone(),
            );
            let woken = self.hub.wake_up();
            tokio::spawn(async move {
                let outcome = attempt(&client, &settings, &delivery).await;
                let result = match (&outcome.error, outcome.gone) {
                    (None, _) => "delivered",
                    (Some(_), true) => "gone",
                    (Some(_), false) => "failed",
                };
                metrics::counter!(ATTEMPTS, "outcome" => result).increment(1);
                if let Err(error) = store
                    .finish_attempt(&delivery, &outcome, millis(GIVE_UP_AFTER))
                    .await
                {
                    // The lease runs out and the delivery is attempted again: at least once.
                    tracing::warn!(%error, "could not record a webhook attempt");
                }
                drop(slot);
                woken.notify_waiters();
            });
        }
        count
    }

    /// The schedule's delay before a delivery's first attempt, in milliseconds.
    fn first_delay(&self) -> i64 {
        self.settings.schedule.first().map_or(0, |d| millis(*d))
    }

    /// How long until the next delivery is due (zero: one is due now), at most a few seconds,
    /// so that a delivery written by another process is found soon.
    async fn until_next_due(&self) -> Duration {
        let most = Duration::from_secs(5);
        match self
            .store
            .next_delivery_due(self.first_delay(), PER_SUBSCRIPTION)
            .await
        {
            Ok(Some(at)) => {
                let wait = u64::try_from(at - now_ms()).unwrap_or(0);
                Duration::from_millis(wait).min(most)
            }
            Ok(None) => most,
            Err(error) => {
                tracing::warn!(%error, "could not look for webhook deliveries");
                most
            }
        }
    }
}

/// One attempt: the signed POST, and what became of it.
async fn attempt(
    client: &reqwest::Client,
    settings: &DeliverySettings,
    delivery: &Claimed,
) -> Outcome {
    let sent = send(client, settings, delivery).await;
    // This attempt's place in the delivery's schedule (a redelivery starts one afresh).
    let number = usize::try_from(delivery.attempts - delivery.schedule_from).unwrap_or(0) + 1;
    let next = settings.schedule.get(number).copied();
    let (response_status, error, retry_after, gone) = match sent {
        Ok((status, _)) if (200..300).contains(&status) => {
            return Outcome {
                response_status: Some(status),
                error: None,
                retry_at: None,
                gone: false,
                hold_until: None,
            };
        }
        Ok((410, _)) => (
            Some(410),
            Some("the receiver answered 410 Gone: its subscription is paused".to_string()),
            None,
            true,
        ),
        Ok((status, retry_after)) => (
            Some(status),
            Some(format!("the receiver answered {status}")),
            retry_after,
            false,
        ),
        Err(error) => (None, Some(error), None, false),
    };
    // A Retry-After is the receiver's, not this delivery's: every delivery of the
    // subscription waits until it has passed (up to a tenth more, so that receivers asking
    // for the same time are not all called back at once), and then they go out at most
    // PER_SUBSCRIPTION at a time, as always.
    let hold = retry_after.map(|wait| later_by_up_to_a_tenth(wait.min(MAX_RETRY_AFTER)));
    let retry_at = if gone {
        None
    } else {
        next.map(|delay| now_ms() + millis(jitter(delay).max(hold.unwrap_or_default())))
    };
    Outcome {
        response_status,
        error,
        retry_at,
        gone,
        hold_until: hold.map(|wait| now_ms() + millis(wait)),
    }
}

/// Posts a delivery: its status and `Retry-After`, or why there was no answer.
async fn send(
    client: &reqwest::Client,
    settings: &DeliverySettings,
    delivery: &Claimed,
) -> Result<(u16, Option<Duration>), String> {
    // An address literal is not resolved, so the resolver's check does not see it: check the
    // URL itself again (the operator may also have changed the setting since).
    let url = address::check_url(&delivery.url, settings.allow_private)?;
    let identifiers: Value =
        serde_json::from_str(&delivery.identifiers).unwrap_or_else(|_| json!({}));
    let body = json!({
        "subscriptionId": delivery.subscription_id,
        "eventId": delivery.event_id,
        "eventType": delivery.event_type,
        "identifiers": identifiers,
    })
    .to_string();
    let now = now_ms();
    let timestamp = now / 1000;
    let old = old_secrets_at(&delivery.old_secrets, now);
    let secrets: Vec<&str> = std::iter::once(delivery.secret.as_str())
        .chain(old.iter().map(|old| old.secret.as_str()))
        .collect();
    let signature = sign::signatures(&secrets, &delivery.id, timestamp, &body);
    let mut request = client
        .post(url)
        .header("content-type", "application/json")
        .header("webhook-id", &delivery.id)
        .header("webhook-timestamp", timestamp.to_string())
        .header("webhook-signature", signature);
    let headers: Vec<Header> = serde_json::from_str(&delivery.headers).unwrap_or_default();
    for header in headers {
        request = request.header(header.key, header.value);
    }
    let mut response = request.body(body).send().await.map_err(|e| describe(&e))?;
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| retry_after(v, now_ms()));
    // Read a little of the answer, so that the connection ends cleanly; never more.
    let mut read = 0;
    while read < MAX_RESPONSE_BYTES {
        match response.chunk().await {
            Ok(Some(chunk)) => read += chunk.len(),
            _ => break,
        }
    }
    Ok((status, retry_after))
}

/// How long a `Retry-After` value asks to wait, at `now` (milliseconds): whole seconds, or an
/// HTTP date (RFC 9110: `Sun, 06 Nov 1994 08:49:37 GMT`), a date past being no wait.
fn retry_after(value: &str, now: i64) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    let wait = at.timestamp_millis().saturating_sub(now);
    Some(Duration::from_millis(u64::try_from(wait).unwrap_or(0)))
}

/// Why an attempt got no answer, without the URL (it may carry a secret of the receiver's).
fn describe(error: &reqwest::Error) -> String {
    let kind = if error.is_timeout() {
        format!("no answer within {} s", TIMEOUT.as_secs())
    } else if error.is_connect() {
        "could not connect".to_string()
    } else {
        "the request failed".to_string()
    };
    let mut source = std::error::Error::source(error);
    let mut causes = Vec::new();
    while let Some(cause) = source {
        causes.push(cause.to_string());
        source = cause.source();
    }
    match causes.last() {
        Some(cause) => format!("{kind}: {cause}"),
        None => kind,
    }
}

/// A delay made up to a tenth longer or shorter, so that retries of many deliveries spread.
fn jitter(delay: Duration) -> Duration {
    let factor = 0.9 + rand::random::<f64>() * 0.2;
    delay.mul_f64(factor)
}

/// A wait made up to a tenth longer, never shorter: what a receiver asked for, spread.
fn later_by_up_to_a_tenth(wait: Duration) -> Duration {
    wait.mul_f64(1.0 + rand::random::<f64>() * 0.1)
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedules_parse() {
        let default = parse_schedule(DEFAULT_SCHEDULE).expect("default parses");
        assert_eq!(default.len(), 8);
        assert_eq!(default[0], Duration::ZERO);
        assert_eq!(default[7], Duration::from_secs(36_000));
        assert!(parse_schedule("0s,1x").is_err());
        assert!(parse_schedule("2d").is_err());
        assert!(parse_schedule("").is_err());
    }

    #[test]
    fn retry_after_is_seconds_or_a_date() {
        // 1994-11-06T08:49:37Z, the RFC's own example.
        let now = 784_111_777_000;
        let wait = |value| retry_after(value, now);
        assert_eq!(wait("120"), Some(Duration::from_secs(120)));
        assert_eq!(wait(" 7 "), Some(Duration::from_secs(7)));
        assert_eq!(
            wait("Sun, 06 Nov 1994 08:51:37 GMT"),
            Some(Duration::from_secs(120))
        );
        assert_eq!(wait("Sun, 06 Nov 1994 08:00:00 GMT"), Some(Duration::ZERO));
        assert_eq!(wait("soon"), None);
        assert_eq!(wait("-5"), None);
    }

    #[test]
    fn jitter_stays_within_a_tenth() {
        for _ in 0..100 {
            let d = jitter(Duration::from_secs(100));
            assert!(d >= Duration::from_secs(90) && d <= Duration::from_secs(110));
            let d = later_by_up_to_a_tenth(Duration::from_secs(100));
            assert!(d >= Duration::from_secs(100) && d <= Duration::from_secs(110));
        }
    }
}

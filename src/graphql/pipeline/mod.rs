//! A GraphQL request, in stages: prepare (the document read once), authenticate, limit (the
//! caller's rate) and execute. Every transport runs the same stages; HTTP
//! (`http::graphql`) puts its own steps around them (reading the body, refusing mutations over
//! GET, idempotency keys). Each stage returns what it found or a [`Rejection`], which the
//! transport renders; none of them takes or returns an HTTP type.

mod absent;
mod documents;
mod execute;
mod introspection;
pub mod limits;
mod order;
mod params;
mod persisted;
mod prepare;
mod rate_limit;
mod reads;
mod rejection;
mod validated;

use std::net::IpAddr;
use std::sync::Arc;

pub use execute::{Executed, Ran, StopBeforeExecution};
pub use limits::{Limits, Shapes};
pub use params::Params;
pub use prepare::{Operation, Prepared};
pub use rate_limit::{RateLimits, RateStatus};

pub use rejection::{Rejection, Stop};

use self::documents::Documents;
use self::persisted::Persisted;
use self::reads::ReadAudit;
use crate::auth::{self, AuthError, Missing, Permission, Principal, TokenCache};
use crate::events::Hub;
use crate::graphql::error::{code, missing_permission};
use crate::graphql::events::Connection;
use crate::graphql::{ApiSettings, build_fast_schema, build_schema};
use crate::store::Store;
use crate::store::audit::{Read, Reads};
use crate::store::idempotency::Key;
use futures_util::stream::BoxStream;

/// Who a request comes from, as execution needs it.
#[derive(Clone, Debug, Default)]
pub struct Caller {
    /// The token's holder; None for signIn, which takes no token.
    pub principal: Option<Principal>,
    /// The client's address, for the sign-in throttle.
    pub address: Option<IpAddr>,
    /// The id the request's log lines carry, named in internal errors.
    pub request_id: Option<String>,
    /// The idempotency key the request holds, if it holds one: each of its writes marks it.
    pub key: Option<Key>,
}

/// Requests a minute a caller may make.
#[derive(Clone, Copy, Debug)]
pub struct Rates {
    /// Per token (per client address for signIn, which has none).
    pub per_token: u32,
    /// Per client address, whatever the token, counted before the token is looked at.
    pub per_address: u32,
}

/// What every request shares: the schema and the state of its stages. Cheap to clone.
#[derive(Clone)]
pub struct Pipeline {
    /// The schema, validating in full and in fast mode, and the documents known to pass.
    schemas: execute::Schemas,
    store: Store,
    /// The live view of the event log that subscriptions follow.
    hub: Hub,
    limits: Limits,
    /// The schema's fields, for the cost of a document.
    shapes: Arc<Shapes>,
    documents: Documents,
    persisted: Persisted,
    rate_limits: Arc<RateLimits>,
    address_limits: Arc<RateLimits>,
    reads: ReadAudit,
    /// Tokens found lately, while the store hears of every change to them.
    tokens: Arc<TokenCache>,
}

impl Pipeline {
    /// The stages over `store`, with the schema and limits of `settings`. Starts the writer of
    /// the audit log's reads, and the store's watch of changes to tokens (which lets a token
    /// found once be used from memory until the next change).
    pub fn new(store: Store, settings: ApiSettings, rates: Rates) -> Pipeline {
        store.watch_credentials();
        let limits = settings.limits;
        let hub = Hub::start(store.clone(), settings.subscriber_lag);
        let schema = build_schema(store.clone(), hub.clone(), settings.clone());
        let schemas = execute::Schemas {
            strict: schema.clone(),
            fast: build_fast_schema(store.clone(), hub.clone(), settings),
            validated: Default::default(),
        };
        Pipeline {
            schemas,
            shapes: Arc::new(Shapes::of_sdl(&schema.sdl())),
            hub,
            reads: ReadAudit::start(store.clone()),
            tokens: Arc::default(),
            store,
            limits,
            documents: Documents::default(),
            persisted: Persisted::default(),
            rate_limits: Arc::new(RateLimits::new(rates.per_token, "token")),
            address_limits: Arc::new(RateLimits::new(rates.per_address, "address")),
        }
    }

    /// Counts a request against its client address, before anything else is done for it: a
    /// flood of requests with bad tokens or broken documents is refused as cheaply as possible.
    pub fn limit_address(&self, address: Option<IpAddr>) -> Result<RateStatus, Rejection> {
        let key = address.map_or_else(|| "unknown".to_string(), |a| a.to_string());
        refuse_over(self.address_limits.check(&key))
    }

    /// The live view of the event log.
    pub fn hub(&self) -> &Hub {
        &self.hub
    }

    /// The store the stages use.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// How many requests wait for their reads of patient data to be recorded.
    pub fn audit_queue_depth(&self) -> usize {
        self.reads.queued()
    }

    /// The request with its document, when it sent a persisted query's hash instead (see
    /// [`persisted`]); refused when it has neither.
    pub fn resolve(&self, params: Params) -> Result<Params, Rejection> {
        self.persisted
            .resolve(params, self.limits.max_document_bytes)
    }

    /// Reads the document: see [`prepare::prepare`].
    pub fn prepare(&self, params: Params) -> Result<Prepared, Rejection> {
        prepare::prepare(params, &self.documents, &self.limits, &self.shapes)
    }

    /// Finds the caller behind `token`. Every operation but signIn, setPassword and
    /// createFirstAdmin needs one, introspection included; those are run without.
    pub async fn authenticate(
        &self,
        prepared: &Prepared,
        token: Option<&str>,
    ) -> Result<Option<Principal>, Rejection> {
        if prepared.operation.public_only {
            return Ok(None);
        }
        self.authenticate_token(token).await.map(Some)
    }

    /// Finds the caller behind `token`, whatever it will run (a websocket connection's token,
    /// before any operation).
    pub async fn authenticate_token(&self, token: Option<&str>) -> Result<Principal, Rejection> {
        let token = token.map(str::trim).filter(|t| !t.is_empty());
        let found = match token {
            None => Err(AuthError::Missing),
            Some(token) => auth::authenticate(&self.store, Some(&self.tokens), token).await,
        };
        match found {
            Ok(principal) => Ok(principal),
            Err(AuthError::Store(error)) => {
                tracing::warn!(%error, "could not check a token");
                Err(Rejection::database_unavailable())
            }
            Err(refused) => Err(Rejection::new(
                Stop::Unauthenticated,
                code::UNAUTHENTICATED,
                refused.to_string(),
            )),
        }
    }

    /// Counts the request against its caller's rate: per token, or per client address for
    /// signIn, which has none.
    pub fn limit(
        &self,
        principal: Option<&Principal>,
        address: Option<IpAddr>,
    ) -> Result<RateStatus, Rejection> {
        let key = match (principal, address) {
            (Some(principal), _) => principal.token_id.clone(),
            (None, Some(address)) => format!("ip:{address}"),
            (None, None) => "ip:unknown".to_string(),
        };
        refuse_over(self.rate_limits.check(&key))
    }

    /// Runs the operation and hands over its response once its reads are recorded.
    pub async fn execute(&self, prepared: Prepared, caller: Caller) -> Result<Executed, Rejection> {
        let ran = self.run(prepared, caller).await?;
        self.deliver(ran).await
    }

    /// Runs the operation: see [`execute::run`]. Nothing of it may leave before
    /// [`Pipeline::deliver`].
    pub async fn run(&self, prepared: Prepared, caller: Caller) -> Result<Ran, Rejection> {
        let running = self.reads.running();
        execute::run(&self.schemas, &self.store, prepared, caller, running).await
    }

    /// Runs a subscription on `connection`: see [`execute::subscribe`].
    pub fn subscribe(
        &self,
        prepared: Prepared,
        caller: Caller,
        connection: Arc<Connection>,
    ) -> Result<BoxStream<'static, Result<Executed, Rejection>>, Rejection> {
        execute::subscribe(
            &self.schemas,
            &self.store,
            self.reads.clone(),
            prepared,
            caller,
            connection,
        )
    }

    /// Checks that `principal` may run every root field of `prepared`, before it runs: a
    /// subscription's refusal is an `error` message rather than an event, and a response kept
    /// for an idempotent retry is sent whole or not at all. (A query or mutation that runs
    /// is refused field by field, by each field's guard, and returns what it may.)
    pub fn permit(&self, prepared: &Prepared, principal: &Principal) -> Result<(), Rejection> {
        let kind = prepared.kind();
        for field in prepared.operation.roots.values() {
            if let Err(Missing::Permission(permission)) =
                auth::may_call(&principal.permissions, kind, field)
            {
                // As the field's own guard says it (`error::forbidden`).
                let mut rejection = Rejection::new(
                    Stop::Forbidden,
                    code::FORBIDDEN,
                    missing_permission(&permission),
                );
                let alternative = Permission::Operation(kind, field.clone());
                rejection.details = vec![
                    ("permission", serde_json::json!(permission.to_string())),
                    ("alternatives", serde_json::json!([alternative.to_string()])),
                ];
                return Err(rejection);
            }
        }
        Ok(())
    }

    /// Records the reads of an operation that ran; then its response may leave.
    pub async fn deliver(&self, ran: Ran) -> Result<Executed, Rejection> {
        execute::deliver(&self.reads, ran).await
    }

    /// Before a response kept for an idempotent retry is sent again: the caller must still be
    /// allowed every root field of the operation, and the reads of patient data the response
    /// carries are recorded again, under the caller, now.
    pub async fn deliver_again(
        &self,
        prepared: &Prepared,
        principal: &Principal,
        reads: Vec<Read>,
    ) -> Result<(), Rejection> {
        self.permit(prepared, principal)?;
        let reads = Reads {
            practice_id: principal.practice_id.clone(),
            actor: principal.actor.clone(),
            reads,
        };
        if self.reads.record(reads).await {
            Ok(())
        } else {
            Err(Rejection::new(
                Stop::Unavailable,
                code::SERVICE_UNAVAILABLE,
                "The audit log could not be written, so the data read is withheld; try again \
                 shortly",
            ))
        }
    }

    /// Forgets the rate-limit buckets of idle callers every minute, for as long as the
    /// pipeline lives.
    pub fn forget_idle_callers(&self) {
        for limits in [&self.rate_limits, &self.address_limits] {
            let limits = Arc::downgrade(limits);
            tokio::spawn(async move {
                let mut every = tokio::time::interval(RateLimits::FORGET_EVERY);
                while let Some(limits) = limits.upgrade() {
                    limits.forget_idle();
                    drop(limits);
                    every.tick().await;
                }
            });
        }
    }
}

/// A caller's standing, or its refusal when it is over the limit.
fn refuse_over(status: RateStatus) -> Result<RateStatus, Rejection> {
    match status.retry_after {
        None => Ok(status),
        Some(retry_after) => Err({
            metrics::counter!("practice_rate_limited_total", "policy" => status.policy)
                .increment(1);
            Rejection::new(
                Stop::RateLimited(status),
                code::RATE_LIMITED,
                format!(
                    "Too many requests: the limit is {} a minute per {}; try again in {retry_after} s",
                    status.limit, status.policy
                ),
            )
        }),
    }
}

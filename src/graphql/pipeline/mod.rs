//! A GraphQL request, in stages: prepare (the document read once), authenticate, limit (the
//! caller's rate) and execute. Every transport runs the same stages; HTTP
//! (`http::graphql`) puts its own steps around them (reading the body, refusing mutations over
//! GET, idempotency keys). Each stage returns what it found or a [`Rejection`], which the
//! transport renders; none of them takes or returns an HTTP type.

mod documents;
mod execute;
pub mod limits;
mod order;
mod params;
mod prepare;
mod rate_limit;
mod reads;
mod rejection;

use std::net::IpAddr;
use std::sync::Arc;

pub use execute::Executed;
pub use limits::Limits;
pub use params::Params;
pub use prepare::{Operation, Prepared};
pub use rate_limit::{RateLimits, RateStatus};
pub use rejection::{Rejection, Stop};

use self::documents::Documents;
use self::reads::ReadAudit;
use crate::auth::{self, AuthError, Principal};
use crate::graphql::error::code;
use crate::graphql::{ApiSchema, ApiSettings, build_schema};
use crate::store::Store;

/// Who a request comes from, as execution needs it.
#[derive(Clone, Debug, Default)]
pub struct Caller {
    /// The token's holder; None for signIn, which takes no token.
    pub principal: Option<Principal>,
    /// The client's address, for the sign-in throttle.
    pub address: Option<IpAddr>,
    /// The id the request's log lines carry, named in internal errors.
    pub request_id: Option<String>,
}

/// What every request shares: the schema and the state of its stages. Cheap to clone.
#[derive(Clone)]
pub struct Pipeline {
    schema: ApiSchema,
    store: Store,
    limits: Limits,
    documents: Documents,
    rate_limits: Arc<RateLimits>,
    reads: ReadAudit,
}

impl Pipeline {
    /// The stages over `store`, with the schema and limits of `settings` and `rate_limit`
    /// requests a minute per caller. Starts the writer of the audit log's reads.
    pub fn new(store: Store, settings: ApiSettings, rate_limit: u32) -> Pipeline {
        let limits = settings.limits;
        Pipeline {
            schema: build_schema(store.clone(), settings),
            reads: ReadAudit::start(store.clone()),
            store,
            limits,
            documents: Documents::default(),
            rate_limits: Arc::new(RateLimits::new(rate_limit)),
        }
    }

    /// The store the stages use.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Reads the document: see [`prepare::prepare`].
    pub fn prepare(&self, params: Params) -> Result<Prepared, Rejection> {
        prepare::prepare(params, &self.documents, &self.limits)
    }

    /// Finds the caller behind `token`. Every operation but signIn needs one, introspection
    /// included; signIn is run without.
    pub async fn authenticate(
        &self,
        prepared: &Prepared,
        token: Option<&str>,
    ) -> Result<Option<Principal>, Rejection> {
        if prepared.operation.sign_in_only {
            return Ok(None);
        }
        let token = token.map(str::trim).filter(|t| !t.is_empty());
        let found = match token {
            None => Err(AuthError::Missing),
            Some(token) => auth::authenticate(&self.store, token).await,
        };
        match found {
            Ok(principal) => Ok(Some(principal)),
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
        let status = self.rate_limits.check(&key);
        match status.retry_after {
            None => Ok(status),
            Some(retry_after) => Err(Rejection::new(
                Stop::RateLimited(status),
                code::RATE_LIMITED,
                format!(
                    "Too many requests: the limit is {} a minute; try again in {retry_after} s",
                    status.limit
                ),
            )),
        }
    }

    /// Runs the operation: see [`execute::execute`].
    pub async fn execute(&self, prepared: Prepared, caller: Caller) -> Result<Executed, Rejection> {
        execute::execute(&self.schema, &self.store, &self.reads, prepared, caller).await
    }

    /// Forgets the rate-limit buckets of idle callers every minute, for as long as the
    /// pipeline lives.
    pub fn forget_idle_callers(&self) -> tokio::task::JoinHandle<()> {
        let rate_limits = Arc::downgrade(&self.rate_limits);
        tokio::spawn(async move {
            let mut every = tokio::time::interval(RateLimits::FORGET_EVERY);
            while let Some(limits) = rate_limits.upgrade() {
                limits.forget_idle();
                drop(limits);
                every.tick().await;
            }
        })
    }
}

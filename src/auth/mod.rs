//! Who is calling, and what they may do: tokens, passwords and permissions. Plain Rust over the
//! store, with no HTTP and no GraphQL in here.

mod cache;
mod operations;
pub mod password;
pub mod permissions;
pub mod secret;
pub mod staff;
pub mod throttle;

use std::time::Duration;

use thiserror::Error;

use crate::domain::{Denied, Refusal};
use crate::store::audit::{Actor, ActorKind, Author, Event};
use crate::store::tokens::{NewToken, Token, TokenKind};
use crate::store::users::User;
use crate::store::{PracticeStore, Store, StoreError, now_ms};
pub use cache::TokenCache;
pub use operations::{Guard, Missing, OPERATIONS, guard_of, may_call, parse_permissions};
pub use permissions::{Access, OperationKind, Permission, Permissions, Resource, Role};

/// How often a token's `last_used_at` is written at most: once a minute is precise enough to
/// tell a live token from a forgotten one, and spares a write on every request.
const LAST_USED_PRECISION_MS: i64 = 60_000;

/// An authenticated caller: its practice, who it is and what it may do.
#[derive(Clone, Debug)]
pub struct Principal {
    pub practice_id: String,
    /// Who is calling, as the audit log records it: the staff user of a sign-in token, or the
    /// API token itself.
    pub actor: Actor,
    pub permissions: Permissions,
    /// The token the request came with.
    pub token_id: String,
    /// When that token expires (milliseconds), if it does.
    pub expires_at: Option<i64>,
    /// The access groups of a staff user who sees only the patients of their groups (and
    /// those in none), sorted, each once: the same groups are the same list, however the user
    /// was given them. None for who sees every patient: admins and API tokens.
    pub patient_groups: Option<Vec<String>>,
}

impl Principal {
    /// The staff user behind a sign-in token; None for an API token.
    pub fn user_id(&self) -> Option<&str> {
        (self.actor.kind == ActorKind::User).then_some(self.actor.id.as_str())
    }
}

/// Why a token was refused. The messages are for the caller.
#[derive(Debug, Error)]
pub enum AuthError {
    #[error("This operation needs a token: send it in the x-token header")]
    Missing,
    #[error("The token in the x-token header is not valid")]
    Invalid,
    #[error("The token in the x-token header has expired: sign in again or make a new token")]
    Expired,
    #[error("The token in the x-token header has been revoked")]
    Revoked,
    #[error("The staff account of the token in the x-token header is disabled")]
    Disabled,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Finds the caller behind a token secret, refusing unknown, expired and revoked tokens. The
/// token comes from `cache` while the store hears of every change to tokens and users, else
/// from the database (see [`TokenCache`]), so a token revoked through any instance is refused
/// on its next request. Without a cache, from the database.
pub async fn authenticate(
    store: &Store,
    cache: Option<&TokenCache>,
    secret: &str,
) -> Result<Principal, AuthError> {
    let practice_id = secret::practice_of(secret).ok_or(AuthError::Invalid)?;
    let hash = secret::hash_secret(secret);
    // The cache, while the store hears of every change: good for the count of changes now.
    let cached = cache.and_then(|cache| cache.get(&hash, store.credentials_epoch()?));
    let grant = match cached {
        Some(grant) => grant,
        None => {
            // Kept as of the count of changes taken before it is read.
            let epoch = cache.and_then(|_| store.credentials_before_reading());
            let grant = store
                .practice(practice_id)
                .find_token_by_secret(&hash)
                .await?
                .ok_or(AuthError::Invalid)?;
            if let Some((cache, epoch)) = cache.zip(epoch) {
                cache.put(hash.clone(), grant.clone(), epoch);
            }
            grant
        }
    };
    let token = grant.token;
    let now = now_ms();
    if token.revoked_at.is_some() {
        return Err(AuthError::Revoked);
    }
    if token.has_expired(now) {
        return Err(AuthError::Expired);
    }
    let mut patient_groups = None;
    let (actor, permissions) = if token.is_user_token() {
        if grant.user_disabled_at.is_some() {
            return Err(AuthError::Disabled);
        }
        // The user's role decides, as it is now: a changed role applies at once.
        let role: Role = grant
            .user_role
            .as_deref()
            .and_then(|r| r.parse().ok())
            .ok_or(AuthError::Invalid)?;
        let id = token.user_id.clone().ok_or(AuthError::Invalid)?;
        if role != Role::Admin {
            let mut groups: Vec<String> = grant
                .user_access_groups
                .as_deref()
                .and_then(|json| serde_json::from_str(json).ok())
                .unwrap_or_default();
            groups.sort_unstable();
            groups.dedup();
            patient_groups = Some(groups);
        }
        let actor = Actor {
            kind: ActorKind::User,
            id,
            name: grant.user_name,
        };
        (actor, role.permissions())
    } else {
        // Stored lists were checked when the token was made; anything unreadable grants nothing.
        let permissions = Permissions::new(
            token
                .permission_list()
                .iter()
                .filter_map(|p| p.parse().ok())
                .collect(),
        );
        (
            Actor {
                kind: ActorKind::Token,
                id: token.id.clone(),
                name: Some(token.name.clone()),
            },
            permissions,
        )
    };
    if token
        .last_used_at
        .is_none_or(|at| now - at >= LAST_USED_PRECISION_MS)
    {
        if let Some(cache) = cache {
            cache.used(&hash, now);
        }
        let store = store.clone();
        let (practice_id, token_id) = (practice_id.to_string(), token.id.clone());
        tokio::spawn(async move {
            if let Err(e) = store
                .practice(&practice_id)
                .touch_token(&token_id, now)
                .await
            {
                tracing::warn!(error = %e, "could not record a token's last use");
            }
        });
    }
    Ok(Principal {
        practice_id: practice_id.to_string(),
        actor,
        permissions,
        token_id: token.id,
        expires_at: token.expires_at,
        patient_groups,
    })
}

/// Password checks running at once: [`password::checks_at_once`].
static HASHING: std::sync::LazyLock<tokio::sync::Semaphore> =
    std::sync::LazyLock::new(|| tokio::sync::Semaphore::new(password::checks_at_once()));

/// A successful sign-in.
#[derive(Debug)]
pub struct SignedIn {
    /// The secret to send in `x-token`; shown once.
    pub secret: String,
    pub expires_at: i64,
    pub user: User,
}

/// Longest email a sign-in looks up: the longest an address can be (RFC 5321).
pub const MAX_EMAIL_CHARS: usize = 254;

/// Why a sign-in failed.
#[derive(Debug, Error)]
pub enum SignInError {
    /// Deliberately the same for an unknown email and a wrong password.
    #[error("The email or password is incorrect")]
    Incorrect,
    /// Too many failures for this email or from this address: try again after the wait.
    #[error("Too many failed sign-ins: try again in {} s", seconds(.0))]
    Throttled(Duration),
    /// The email cannot be one: it is refused before anything is looked up or counted.
    #[error("email must have at most {MAX_EMAIL_CHARS} characters")]
    EmailTooLong,
    /// The password is right, but an admin disabled the account.
    #[error("This account is disabled: ask an admin of the practice to enable it")]
    Disabled,
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("sign-in failed: {0}")]
    Internal(String),
}

/// Whole seconds of a wait, rounded up.
pub fn seconds(wait: &Duration) -> u64 {
    wait.as_secs() + u64::from(wait.subsec_nanos() > 0)
}

/// Checks a staff user's email and password, from a client at `address`, and hands out a
/// token valid for `ttl`. The attempt is throttled (see [`throttle`]): counted before the
/// password is checked, refused while its email or address waits.
pub async fn sign_in(
    store: &Store,
    email: &str,
    password: &str,
    address: Option<std::net::IpAddr>,
    ttl: Duration,
) -> Result<SignedIn, SignInError> {
    if email.chars().count() > MAX_EMAIL_CHARS {
        return Err(SignInError::EmailTooLong);
    }
    let attempt = throttle::admit(store, email, address, now_ms())
        .await?
        .map_err(SignInError::Throttled)?;
    let signed_in = check_password(store, email, password, ttl).await?;
    if let Err(error) = throttle::succeeded(store, &attempt).await {
        // The sign-in stands; its count is forgotten within the hour anyway.
        tracing::warn!(%error, "could not clear a successful sign-in's count");
    }
    Ok(signed_in)
}

/// The password check of [`sign_in`], after the throttle let the attempt through.
async fn check_password(
    store: &Store,
    email: &str,
    password: &str,
    ttl: Duration,
) -> Result<SignedIn, SignInError> {
    let credentials = store.find_credentials(email.trim()).await?;
    let password = password.to_string();
    // Argon2id takes 19 MiB and tens of milliseconds a check: a few checks at a time (see
    // HASHING), so a flood of sign-ins queues here instead of taking memory, threads and the
    // cores that other requests need.
    let _permit = HASHING
        .acquire()
        .await
        .map_err(|e| SignInError::Internal(e.to_string()))?;
    let (credentials, matches) = tokio::task::spawn_blocking(move || {
        let stored = credentials.as_ref().map(|c| c.password_hash.as_str());
        let matches = password::check_sign_in(&password, stored);
        (credentials, matches)
    })
    .await
    .map_err(|e| SignInError::Internal(e.to_string()))?;
    let credentials = match credentials {
        Some(c) if matches => c,
        Some(c) => {
            // A failed attempt on a real account is worth knowing about. It is recorded in
            // the background, so that the answer takes as long as for an unknown email (for
            // which there is no practice to record it in) and tells nothing.
            let store = store.clone();
            tokio::spawn(async move {
                let actor = user_actor(&c.user);
                let author = Author {
                    actor: &actor,
                    operation: Some("signIn"),
                    key: None,
                };
                let recorded = store
                    .practice(&c.practice_id)
                    .by(author)
                    .record(Event::of("sign_in_failed", "user", &c.user.id))
                    .await;
                if let Err(error) = recorded {
                    tracing::warn!(%error, "could not record a failed sign-in");
                }
            });
            return Err(SignInError::Incorrect);
        }
        None => return Err(SignInError::Incorrect),
    };
    if credentials.user.is_disabled() {
        return Err(SignInError::Disabled);
    }
    let expires_at = now_ms().saturating_add(i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX));
    let made = secret::new_secret(&credentials.practice_id);
    let actor = user_actor(&credentials.user);
    store
        .practice(&credentials.practice_id)
        .by(Author {
            actor: &actor,
            operation: Some("signIn"),
            key: None,
        })
        .create_token(NewToken {
            kind: TokenKind::User,
            name: &format!("sign-in of {}", credentials.user.email),
            secret_hash: &made.hash,
            permissions: &[],
            user_id: Some(&credentials.user.id),
            expires_at: Some(expires_at),
            made_with: None,
        })
        .await?
        .map_err(|denied| SignInError::Internal(format!("{denied:?}")))?;
    let recorded = store
        .practice(&credentials.practice_id)
        .signed_in(&credentials.user.id, now_ms())
        .await;
    if let Err(error) = recorded {
        tracing::warn!(%error, "could not record a sign-in's time");
    }
    Ok(SignedIn {
        secret: made.secret,
        expires_at,
        user: credentials.user,
    })
}

/// A staff user as the audit log records them.
fn user_actor(user: &User) -> Actor {
    Actor {
        kind: ActorKind::User,
        id: user.id.clone(),
        name: Some(user.full_name()),
    }
}

/// Longest name of an API token.
pub const MAX_TOKEN_NAME_CHARS: usize = 100;

/// Why an API token was not made.
#[derive(Debug, Error)]
pub enum IssueError {
    /// The request is wrong (a blank name, an expiry in the past): the caller's to fix.
    #[error("{0}")]
    Invalid(String),
    /// The practice refused it.
    #[error("{0:?}")]
    Refused(Refusal),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Makes an API token in `practice`, as its author, and returns it with its secret, which is
/// shown this once. `name` must be 1 to 100 characters; `expires_at` (milliseconds) must be in
/// the future. `made_with` is the token of the request that makes it (its maker; see
/// `Token::created_by_user_id`), None on the command line.
pub async fn issue_api_token(
    practice: PracticeStore<'_>,
    name: &str,
    permissions: &Permissions,
    expires_at: Option<i64>,
    made_with: Option<&str>,
) -> Result<(Token, String), IssueError> {
    let name = name.trim();
    let chars = name.chars().count();
    let invalid = |message: String| Err(IssueError::Invalid(message));
    if chars == 0 || chars > MAX_TOKEN_NAME_CHARS {
        return invalid(format!(
            "a token name must have 1 to {MAX_TOKEN_NAME_CHARS} characters, got {chars}"
        ));
    }
    if name.chars().any(char::is_control) {
        return invalid(
            "a token name must not contain control characters (tabs, line breaks)".into(),
        );
    }
    if permissions.iter().next().is_none() {
        return invalid("a token needs at least one permission".into());
    }
    if expires_at.is_some_and(|at| at <= now_ms()) {
        return invalid("expiresAt must be in the future".into());
    }
    let made = secret::new_secret(practice.practice_id());
    let list: Vec<String> = permissions.iter().map(ToString::to_string).collect();
    let token = practice
        .create_token(NewToken {
            kind: TokenKind::Api,
            name,
            secret_hash: &made.hash,
            permissions: &list,
            user_id: None,
            expires_at,
            made_with,
        })
        .await?
        .map_err(|denied| match denied {
            Denied::Refused(refusal) => IssueError::Refused(refusal),
            Denied::Invalid(invalid) => IssueError::Invalid(format!("{invalid:?}")),
        })?;
    Ok((token, made.secret))
}

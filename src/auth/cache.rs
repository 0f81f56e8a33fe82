//! A cache of tokens found by their secret, so that a request need not ask the database who
//! it comes from. An entry is used only while the store hears of every change to tokens and
//! staff users, made anywhere, and only until the next one (see `store::tokens::CredentialWatch`):
//!
//! - a change made through this instance (a token revoked, a user changed) moves the store's
//!   count on as it commits, before its response leaves;
//! - on PostgreSQL, a change made through another instance reaches this one by NOTIFY (the
//!   triggers of migration 0012), sent at its commit; while the notifications' connection is
//!   down, nothing is cached: every request asks the database;
//! - on SQLite, a change made by another process (the command line, say) moves a file beside
//!   the database before its commit, which every request looks at (`store::sidecar`); while
//!   a change is under way, nothing read is kept.
//!
//! So a revoked or expired token is refused on its next request, on every instance. An entry
//! is stored with the count read before its token was read from the database, so that a change
//! heard of meanwhile leaves it unused; and it serves for five seconds at most, so that a
//! change nobody was told of (written into SQLite's file by hand) holds within them.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::store::tokens::TokenGrant;

/// Tokens held at most; the cache starts over when it is full.
const MAX_ENTRIES: usize = 10_000;

/// Longest an entry serves: past it, the token is read again, so that a change nobody was
/// told of (written into SQLite's file by another program, by hand) holds within it.
const MAX_AGE: std::time::Duration = std::time::Duration::from_secs(5);

/// Tokens by the hash of their secret. Cheap to share behind an `Arc`.
#[derive(Debug, Default)]
pub struct TokenCache {
    entries: Mutex<HashMap<String, Cached>>,
}

#[derive(Debug)]
struct Cached {
    grant: TokenGrant,
    /// The store's count of changes when the token was read.
    epoch: u64,
    /// When it was read.
    read_at: std::time::Instant,
}

impl TokenCache {
    /// The token whose secret hashes to `hash`, if it was read at `epoch`, the count now.
    pub fn get(&self, hash: &str, epoch: u64) -> Option<TokenGrant> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .get(hash)
            .filter(|cached| cached.epoch == epoch && cached.read_at.elapsed() < MAX_AGE)
            .map(|cached| cached.grant.clone())
    }

    /// Keeps a token read from the database when the count was `epoch`.
    pub fn put(&self, hash: String, grant: TokenGrant, epoch: u64) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= MAX_ENTRIES {
            entries.retain(|_, cached| cached.epoch == epoch);
            if entries.len() >= MAX_ENTRIES {
                entries.clear();
            }
        }
        entries.insert(
            hash,
            Cached {
                grant,
                epoch,
                read_at: std::time::Instant::now(),
            },
        );
    }

    /// Notes that the token was used at `at`, as its row now says.
    pub fn used(&self, hash: &str, at: i64) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(cached) = entries.get_mut(hash) {
            cached.grant.token.last_used_at = Some(at);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::tokens::Token;

    fn grant(id: &str) -> TokenGrant {
        TokenGrant {
            token: Token {
                id: id.into(),
                kind: "api".into(),
                name: "n".into(),
                permissions: "*".into(),
                user_id: None,
                created_at: 0,
                last_used_at: None,
                expires_at: None,
                revoked_at: None,
                created_by_user_id: None,
                created_by_token_id: None,
            },
            user_role: None,
            user_name: None,
            user_disabled_at: None,
            user_access_groups: None,
        }
    }

    #[test]
    fn an_entry_serves_only_the_count_it_was_read_at() {
        let cache = TokenCache::default();
        cache.put("h".into(), grant("t"), 7);
        assert_eq!(cache.get("h", 7).map(|g| g.token.id), Some("t".into()));
        assert!(cache.get("h", 8).is_none(), "a change since makes it stale");
        assert!(cache.get("other", 7).is_none());
        cache.used("h", 42);
        assert_eq!(
            cache.get("h", 7).and_then(|g| g.token.last_used_at),
            Some(42)
        );
    }

    #[test]
    fn an_entry_serves_for_a_few_seconds_at_most() {
        let cache = TokenCache::default();
        cache.put("h".into(), grant("t"), 7);
        if let Some(cached) = cache
            .entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut("h")
        {
            cached.read_at = std::time::Instant::now()
                .checked_sub(MAX_AGE)
                .expect("a clock older than MAX_AGE");
        }
        assert!(cache.get("h", 7).is_none(), "read again once old");
    }

    #[test]
    fn a_full_cache_keeps_what_is_current() {
        let cache = TokenCache::default();
        for i in 0..MAX_ENTRIES {
            cache.put(format!("old{i}"), grant("t"), 1);
        }
        cache.put("new".into(), grant("t"), 2);
        let entries = cache.entries.lock().unwrap_or_else(|e| e.into_inner());
        assert_eq!(entries.len(), 1, "stale entries go first");
    }
}

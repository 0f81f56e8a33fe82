//! API tokens and sign-in tokens. Only a SHA-256 hash of each secret is stored.

use std::sync::LazyLock;

use sqlx::FromRow;

use super::audit::Event;
use super::sidecar::{Sidecar, Stamp};
use super::{Change, PracticeStore, StoreResult, new_id, now_ms};
use crate::domain::limits::MAX_API_TOKENS;
use crate::domain::{Bound, Refusal};

pub(super) const TOKEN_COLUMNS: &str = "id, kind, name, permissions, user_id, created_at, last_used_at, \
                             expires_at, revoked_at, created_by_user_id, created_by_token_id";

/// Whether a token was made as an API token or handed out by signIn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenKind {
    Api,
    User,
}

impl TokenKind {
    fn as_str(self) -> &'static str {
        match self {
            TokenKind::Api => "api",
            TokenKind::User => "user",
        }
    }
}

/// A token as stored, without its secret.
#[derive(Clone, Debug, FromRow)]
pub struct Token {
    pub id: String,
    pub kind: String,
    pub name: String,
    /// Space-separated permission strings; empty for sign-in tokens, whose user's role decides.
    pub permissions: String,
    pub user_id: Option<String>,
    pub created_at: i64,
    pub last_used_at: Option<i64>,
    pub expires_at: Option<i64>,
    pub revoked_at: Option<i64>,
    /// Of an API token: the staff user who made it, signed in, or who made the API token that
    /// made it (down the chain); None for one made on the command line, or by a token made
    /// there.
    pub created_by_user_id: Option<String>,
    /// Of an API token: the API token that made it, when one did.
    pub created_by_token_id: Option<String>,
}

impl Token {
    /// The permission strings of an API token.
    pub fn permission_list(&self) -> Vec<String> {
        self.permissions
            .split_whitespace()
            .map(str::to_string)
            .collect()
    }

    /// True once the token is past its expiry at `now` (milliseconds since the epoch).
    pub fn has_expired(&self, now: i64) -> bool {
        self.expires_at.is_some_and(|at| at <= now)
    }

    /// True for a token handed out by signIn.
    pub fn is_user_token(&self) -> bool {
        self.kind == TokenKind::User.as_str()
    }
}

/// A token found by its secret, with what authentication needs of its user.
#[derive(Clone, Debug, FromRow)]
pub struct TokenGrant {
    #[sqlx(flatten)]
    pub token: Token,
    /// The role of the token's user, for sign-in tokens.
    pub user_role: Option<String>,
    /// The name of the token's user, for sign-in tokens.
    pub user_name: Option<String>,
    /// When the token's user was disabled, for sign-in tokens: their tokens stop working.
    pub user_disabled_at: Option<i64>,
    /// The access groups of the token's user (a JSON list), for sign-in tokens.
    pub user_access_groups: Option<String>,
}

/// What it takes to make a token.
#[derive(Clone, Debug)]
pub struct NewToken<'a> {
    pub kind: TokenKind,
    pub name: &'a str,
    pub secret_hash: &'a str,
    pub permissions: &'a [String],
    pub user_id: Option<&'a str>,
    pub expires_at: Option<i64>,
    /// The token whose request makes an API token (a sign-in token, or another API token):
    /// its maker. None on the command line.
    pub made_with: Option<&'a str>,
}

/// The condition of a token that works at `now` (a placeholder, or a number of milliseconds):
/// neither revoked nor expired.
pub(super) fn works_at(now: &str) -> String {
    format!("revoked_at IS NULL AND (expires_at IS NULL OR expires_at > {now})")
}

impl PracticeStore<'_> {
    /// Stores a new token. An API token is refused when the practice has as many that are
    /// neither revoked nor expired as it may have.
    pub async fn create_token(&self, new: NewToken<'_>) -> StoreResult<Change<Token>> {
        let mut token = Token {
            id: new_id(),
            kind: new.kind.as_str().to_string(),
            name: new.name.to_string(),
            permissions: new.permissions.join(" "),
            user_id: new.user_id.map(str::to_string),
            created_at: now_ms(),
            last_used_at: None,
            expires_at: new.expires_at,
            revoked_at: None,
            created_by_user_id: None,
            created_by_token_id: None,
        };
        let mut tx = self.begin_write().await?;
        let live = format!(
            "AND kind = 'api' AND {}",
            works_at(&token.created_at.to_string())
        );
        if new.kind == TokenKind::Api
            && self
                .at_bound(&mut tx, "tokens", &live, Bound::ApiTokens)
                .await?
        {
            return Ok(Err(Refusal::TooMany(Bound::ApiTokens).into()));
        }
        if new.kind == TokenKind::Api
            && let Some(credential) = new.made_with
        {
            // Who makes it: the staff user of a sign-in token, or an API token, whose own maker
            // it inherits. Read under the practice's lock, which disableUser and
            // resetUserPassword hold as they revoke a user's tokens: a token made with a
            // credential revoked meanwhile would escape that revocation, and is not made.
            let sql =
                format!("SELECT {TOKEN_COLUMNS} FROM tokens WHERE practice_id = $1 AND id = $2");
            let maker: Option<Token> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(self.practice_id)
                .bind(credential)
                .fetch_optional(&mut *tx)
                .await?;
            let Some(maker) = maker.filter(|maker| maker.revoked_at.is_none()) else {
                return Ok(Err(Refusal::MakerRevoked.into()));
            };
            if maker.is_user_token() {
                token.created_by_user_id = maker.user_id;
            } else {
                token.created_by_user_id = maker.created_by_user_id;
                token.created_by_token_id = Some(maker.id);
            }
        }
        sqlx::query(
            "INSERT INTO tokens (practice_id, id, kind, name, secret_hash, permissions, user_id, \
             created_at, expires_at, created_by_user_id, created_by_token_id) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
        )
        .bind(self.practice_id)
        .bind(&token.id)
        .bind(&token.kind)
        .bind(&token.name)
        .bind(new.secret_hash)
        .bind(&token.permissions)
        .bind(&token.user_id)
        .bind(token.created_at)
        .bind(token.expires_at)
        .bind(&token.created_by_user_id)
        .bind(&token.created_by_token_id)
        .execute(&mut *tx)
        .await?;
        let action = match new.kind {
            TokenKind::Api => "create",
            TokenKind::User => "sign_in",
        };
        self.commit(tx, Event::of(action, "token", &token.id))
            .await?;
        Ok(Ok(token))
    }

    /// The token whose secret hashes to `secret_hash`, revoked and expired ones included: the
    /// caller decides.
    pub async fn find_token_by_secret(&self, secret_hash: &str) -> StoreResult<Option<TokenGrant>> {
        // The token's columns are the one list every read of a token takes.
        static SQL: LazyLock<String> = LazyLock::new(|| {
            format!(
                "SELECT t.*, u.role AS user_role, \
                 u.first_name || ' ' || u.last_name AS user_name, \
                 u.disabled_at AS user_disabled_at, u.access_groups AS user_access_groups \
                 FROM (SELECT practice_id, {TOKEN_COLUMNS} FROM tokens \
                 WHERE practice_id = $1 AND secret_hash = $2) AS t \
                 LEFT JOIN users u ON u.practice_id = t.practice_id AND u.id = t.user_id"
            )
        });
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(SQL.as_str()))
            .bind(self.practice_id)
            .bind(secret_hash)
            .fetch_optional(self.read())
            .await?)
    }

    /// The practice's API tokens, as many as it may have live (sign-in tokens are not
    /// listed): those that work first, then those revoked or expired, each the newest first.
    /// Every token that works is listed, however many were revoked since it was made (by
    /// newest alone, 200 made and revoked hid one that still works).
    pub async fn list_api_tokens(&self) -> StoreResult<Vec<Token>> {
        self.api_tokens(Some(MAX_API_TOKENS)).await
    }

    /// Every API token of the practice, in the order of [`PracticeStore::list_api_tokens`],
    /// revoked and expired ones however many: for the command line's `token list`.
    pub async fn all_api_tokens(&self) -> StoreResult<Vec<Token>> {
        self.api_tokens(None).await
    }

    /// The practice's API tokens in that order, at most `most` when given.
    async fn api_tokens(&self, most: Option<usize>) -> StoreResult<Vec<Token>> {
        let limit = most.map_or_else(String::new, |most| format!(" LIMIT {most}"));
        let sql = format!(
            "SELECT {TOKEN_COLUMNS} FROM tokens WHERE practice_id = $1 AND kind = 'api' \
             ORDER BY CASE WHEN {} THEN 0 ELSE 1 END, created_at DESC, id DESC{limit}",
            works_at("$2")
        );
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(self.practice_id)
            .bind(now_ms())
            .fetch_all(self.read())
            .await?)
    }

    /// Revokes a token of this kind. Revoking twice keeps the first time. Returns the token,
    /// or None when the practice has no such token.
    pub async fn revoke_token(&self, id: &str, kind: TokenKind) -> StoreResult<Option<Token>> {
        let mut tx = self.begin_write().await?;
        let sql = format!(
            "UPDATE tokens SET revoked_at = COALESCE(revoked_at, $3) \
             WHERE practice_id = $1 AND id = $2 AND kind = $4 RETURNING {TOKEN_COLUMNS}"
        );
        let token: Option<Token> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(self.practice_id)
            .bind(id)
            .bind(now_ms())
            .bind(kind.as_str())
            .fetch_optional(&mut *tx)
            .await?;
        if let Some(token) = &token {
            let action = match kind {
                TokenKind::Api => "revoke",
                TokenKind::User => "sign_out",
            };
            self.commit(tx, Event::of(action, "token", &token.id))
                .await?;
        }
        Ok(token)
    }

    /// Revokes, in `tx`, the API tokens that still work and that the staff user `user_id`
    /// made (see [`Token::created_by_user_id`]: through tokens they made too); returns their
    /// ids, for the caller to record each revocation. The caller holds the practice's lock,
    /// which [`PracticeStore::create_token`] takes before it reads who makes a token.
    pub(super) async fn revoke_api_tokens_made_by(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        user_id: &str,
    ) -> StoreResult<Vec<String>> {
        let sql = format!(
            "UPDATE tokens SET revoked_at = $3 WHERE practice_id = $1 AND kind = 'api' \
             AND created_by_user_id = $2 AND {} RETURNING id",
            works_at("$3")
        );
        Ok(sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .bind(self.practice_id)
            .bind(user_id)
            .bind(now_ms())
            .fetch_all(&mut **tx)
            .await?)
    }

    /// Records that a token was used at `at`.
    pub async fn touch_token(&self, id: &str, at: i64) -> StoreResult<()> {
        sqlx::query("UPDATE tokens SET last_used_at = $3 WHERE practice_id = $1 AND id = $2")
            .bind(self.practice_id)
            .bind(id)
            .bind(at)
            .execute(self.write())
            .await?;
        Ok(())
    }
}

impl super::Store {
    /// Deletes the sign-in tokens (sessions) that expired or were signed out before `before`,
    /// in every practice, but for any an idempotency key still names; returns how many.
    pub async fn forget_ended_sessions(&self, before: i64) -> StoreResult<u64> {
        let done = sqlx::query(
            "DELETE FROM tokens WHERE kind = 'user' \
             AND (expires_at < $1 OR revoked_at < $1) \
             AND NOT EXISTS (SELECT 1 FROM idempotency_keys k \
             WHERE k.practice_id = tokens.practice_id AND k.token_id = tokens.id)",
        )
        .bind(before)
        .execute(&self.write)
        .await?;
        Ok(done.rows_affected())
    }

    /// The practice that owns the token with this id, in any practice: for the operator's
    /// `token revoke ID`, which names no practice.
    pub async fn find_token_practice(&self, id: &str) -> StoreResult<Option<String>> {
        let row: Option<(String,)> = sqlx::query_as("SELECT practice_id FROM tokens WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.reader)
            .await?;
        Ok(row.map(|(practice_id,)| practice_id))
    }
}

/// The channel PostgreSQL's `credentials_notify` trigger (migration 0012) notifies when a
/// token's validity or a staff user changes.
const CREDENTIALS_CHANNEL: &str = "practice_credentials";

/// What this instance knows of changes to tokens and staff users, for a cache of who may call
/// (`auth::TokenCache`): a number that moves on at every such change, and whether this
/// instance hears of every change made anywhere. It hears of its own changes as it commits
/// them (see [`Event::changes_credentials`]); of other instances' through PostgreSQL's
/// NOTIFY, from the moment it listens (while the notifications' connection is down it hears
/// of nothing, and a cache must ask the database); on SQLite, of other processes' through
/// the file beside the database that each change moves (see [`super::sidecar`]).
#[derive(Debug, Default)]
pub struct CredentialWatch {
    epoch: std::sync::atomic::AtomicU64,
    heard: std::sync::atomic::AtomicBool,
    /// SQLite's file of changes.
    sidecar: Option<Sidecar>,
    /// Set when a change through this instance was not heard back: the watch listens anew.
    suspect: std::sync::atomic::AtomicBool,
    /// The changes through this instance whose own notification it waits to hear, by the
    /// notification's payload (see [`Echo`]).
    echoes: std::sync::Mutex<std::collections::HashMap<String, tokio::sync::oneshot::Sender<()>>>,
}

/// How a change to tokens or users told the other processes, to finish after its commit.
pub(super) enum Announcement {
    Nothing,
    /// PostgreSQL: its notification, to hear back.
    Echo(Echo),
    /// SQLite: the exclusive lock of the file of changes, to let go of.
    Held(std::fs::File),
}

impl Announcement {
    /// Once the change has committed (or failed to): waits to hear PostgreSQL's notification
    /// back, or lets go of SQLite's lock.
    pub(super) async fn committed(self) {
        match self {
            Announcement::Echo(echo) => echo.wait().await,
            Announcement::Held(lock) => drop(lock),
            Announcement::Nothing => {}
        }
    }
}

/// Longest a change to tokens or users waits to hear its own notification come back.
const ECHO_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// A change to tokens or users, made through this instance, that waits to hear its own
/// notification come back before its answer leaves: PostgreSQL hands a notification to every
/// listening instance at once, so once this instance has heard it, the others have been
/// handed it too, and the client's next request, wherever it goes, finds their caches
/// forgotten.
pub(super) struct Echo {
    watch: std::sync::Arc<CredentialWatch>,
    mark: String,
    heard: tokio::sync::oneshot::Receiver<()>,
}

impl Echo {
    /// Waits from now for the notification whose payload is `mark`.
    fn expect(watch: &std::sync::Arc<CredentialWatch>, mark: String) -> Echo {
        let (told, heard) = tokio::sync::oneshot::channel();
        watch
            .echoes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(mark.clone(), told);
        Echo {
            watch: watch.clone(),
            mark,
            heard,
        }
    }

    /// The statement that sends the notification.
    fn notify(&self) -> sqlx::query::Query<'_, sqlx::Any, sqlx::any::AnyArguments> {
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(CREDENTIALS_CHANNEL)
            .bind(&self.mark)
    }

    /// Waits for the notification, at most [`ECHO_WAIT`]. Not heard by then, the watch stops
    /// trusting its notifications (every request asks the database) and listens again.
    async fn wait(mut self) {
        if tokio::time::timeout(ECHO_WAIT, &mut self.heard)
            .await
            .is_err()
        {
            tracing::warn!("a change to tokens was not heard back within a second");
            self.watch.hears(false);
            self.watch
                .suspect
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// Completes when the notification is heard.
    async fn heard_back(mut self) {
        let _ = (&mut self.heard).await;
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        self.watch
            .echoes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.mark);
    }
}

impl CredentialWatch {
    /// The watch of an SQLite database at `database` (None: in memory, where no other process
    /// can reach it, but neither is it served).
    pub(super) fn sqlite(database: Option<&std::path::Path>) -> CredentialWatch {
        CredentialWatch {
            sidecar: database.map(Sidecar::beside),
            ..Default::default()
        }
    }

    /// SQLite: the count of changes as of the file of changes as `look` sees it now, moved on
    /// when the file has moved since it was last seen; None without the file, or when `look`
    /// sees nothing.
    fn as_of(&self, look: impl FnOnce(&Sidecar) -> Option<Stamp>) -> Option<u64> {
        let sidecar = self.sidecar.as_ref()?;
        if sidecar.moved(look(sidecar)?) {
            self.changed();
        }
        Some(self.epoch.load(std::sync::atomic::Ordering::SeqCst))
    }

    fn changed(&self) {
        self.epoch.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    fn hears(&self, heard: bool) {
        self.heard.store(heard, std::sync::atomic::Ordering::SeqCst);
        // Whatever was cached before is suspect either way.
        self.changed();
    }
}

impl super::Store {
    /// The number of the changes to tokens and staff users so far, while this instance hears
    /// of every one of them (see [`CredentialWatch`]); None when it may not.
    pub fn credentials_epoch(&self) -> Option<u64> {
        use std::sync::atomic::Ordering::SeqCst;
        let watch = &self.credentials;
        if self.engine == super::Engine::Sqlite {
            return watch.as_of(Sidecar::stamp);
        }
        // The number first: a change heard of between the two reads only makes it older.
        let epoch = watch.epoch.load(SeqCst);
        watch.heard.load(SeqCst).then_some(epoch)
    }

    /// The count of changes that a token about to be read from the database will be good
    /// for, if it may be kept: on SQLite, as the file of changes says under its shared lock
    /// (see [`super::sidecar`]). None when nothing read now may be kept.
    pub fn credentials_before_reading(&self) -> Option<u64> {
        if self.engine == super::Engine::Sqlite {
            return self.credentials.as_of(Sidecar::share);
        }
        self.credentials_epoch()
    }

    /// Counts a change to tokens or staff users made through this instance, once committed.
    pub(super) fn credentials_changed(&self) {
        self.credentials.changed();
    }

    /// Before a change to tokens or users commits in `tx`, what tells other processes of it:
    /// on PostgreSQL, while this instance hears its notifications, a notification of its own
    /// in the transaction, to wait for once it has committed (see [`Echo`]); on SQLite, the
    /// file of changes moved under its exclusive lock, to hold until the commit (see
    /// [`super::sidecar`]). A change that cannot tell them is not made.
    pub(super) async fn announce_credentials(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    ) -> super::StoreResult<Announcement> {
        match self.engine {
            super::Engine::Sqlite => match &self.credentials.sidecar {
                Some(sidecar) => match sidecar.announce().await {
                    Ok(lock) => Ok(Announcement::Held(lock)),
                    Err(error) => Err(super::StoreError::Unavailable(format!(
                        "could not tell other processes of a change to tokens through {}: {error}",
                        sidecar.path().display()
                    ))),
                },
                None => Ok(Announcement::Nothing),
            },
            super::Engine::Postgres => {
                if self.credentials_epoch().is_none() {
                    return Ok(Announcement::Nothing);
                }
                let echo = Echo::expect(&self.credentials, super::new_id());
                echo.notify().execute(&mut **tx).await?;
                Ok(Announcement::Echo(echo))
            }
        }
    }

    /// Starts listening for other instances' changes to tokens and staff users (PostgreSQL),
    /// for as long as a clone of this store lives; nothing on SQLite. A lost connection is
    /// noticed at once, one that dies silently within a heartbeat (13 s at most), and either is
    /// listened again a second later; meanwhile every request asks the database.
    pub fn watch_credentials(&self) {
        if self.engine != super::Engine::Postgres {
            return;
        }
        let url = self.url.clone();
        let pool = self.write.clone();
        let watch = std::sync::Arc::downgrade(&self.credentials);
        tokio::spawn(async move {
            loop {
                // It does not reconnect by itself: the watch does, after it has stopped
                // trusting what it heard.
                match super::listen(&url, CREDENTIALS_CHANNEL, false).await {
                    Ok(listener) => {
                        if !supervise(listener, &pool, &watch).await {
                            return;
                        }
                    }
                    Err(error) => tracing::warn!(%error, "could not listen for changes to tokens"),
                }
                if watch.strong_count() == 0 {
                    return;
                }
                tokio::time::sleep(super::RELISTEN_AFTER).await;
            }
        });
    }
}

/// How often the watch checks that its notifications still arrive: it sends one of its own
/// (a heartbeat) and must hear it within [`HEARTBEAT_WAIT`].
const HEARTBEAT_EVERY: std::time::Duration = std::time::Duration::from_secs(10);
const HEARTBEAT_WAIT: std::time::Duration = std::time::Duration::from_secs(3);
/// What a heartbeat's payload starts with: it changes nothing, and no cache forgets for it.
const HEARTBEAT: &str = "heartbeat:";

/// Hears changes on `listener` for as long as its notifications are known to arrive: until
/// the connection ends, a heartbeat is not heard back in time (a connection that died
/// silently), or a change through this instance was not (see [`Echo`]). Then nothing is
/// trusted until the watch listens again. False when the store is gone.
async fn supervise(
    listener: sqlx::postgres::PgListener,
    pool: &sqlx::AnyPool,
    watch: &std::sync::Weak<CredentialWatch>,
) -> bool {
    match watch.upgrade() {
        Some(watch) => watch.hears(true),
        None => return false,
    }
    let mut hearing = tokio::spawn(hear_changes(listener, watch.clone()));
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
    let mut ticks = 0u32;
    let why = loop {
        tokio::select! {
            _ = &mut hearing => break "the connection ended",
            _ = tick.tick() => {}
        }
        let Some(strong) = watch.upgrade() else {
            hearing.abort();
            return false;
        };
        if strong
            .suspect
            .swap(false, std::sync::atomic::Ordering::SeqCst)
        {
            break "a change was not heard back";
        }
        ticks += 1;
        if ticks.is_multiple_of(HEARTBEAT_EVERY.as_secs() as u32) && !heartbeat(pool, &strong).await
        {
            break "a heartbeat was not heard back";
        }
    };
    hearing.abort();
    if let Some(watch) = watch.upgrade() {
        watch.hears(false);
    }
    tracing::warn!(
        why,
        "lost the notifications of changes to tokens; asking the database"
    );
    true
}

/// Sends a heartbeat through `pool` and waits to hear it on the channel.
async fn heartbeat(pool: &sqlx::AnyPool, watch: &std::sync::Arc<CredentialWatch>) -> bool {
    let echo = Echo::expect(watch, format!("{HEARTBEAT}{}", super::new_id()));
    let sent = echo.notify().execute(pool).await;
    // Not sent (the database is away): nothing can be heard either.
    sent.is_ok()
        && tokio::time::timeout(HEARTBEAT_WAIT, echo.heard_back())
            .await
            .is_ok()
}

/// Counts each notification (but heartbeats) until the connection is lost.
async fn hear_changes(
    mut listener: sqlx::postgres::PgListener,
    watch: std::sync::Weak<CredentialWatch>,
) {
    loop {
        let next = listener.try_recv().await;
        let Some(watch) = watch.upgrade() else {
            return;
        };
        match next {
            Ok(Some(notification)) => {
                let payload = notification.payload();
                if !payload.starts_with(HEARTBEAT) {
                    watch.changed();
                }
                let echo = watch
                    .echoes
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(payload);
                if let Some(echo) = echo {
                    let _ = echo.send(());
                }
            }
            Ok(None) | Err(_) => return,
        }
    }
}

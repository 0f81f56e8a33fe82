//! API tokens and sign-in tokens. Only a SHA-256 hash of each secret is stored.

use sqlx::FromRow;

use super::audit::Event;
use super::{Change, PracticeStore, StoreResult, new_id, now_ms};
use crate::domain::limits::MAX_API_TOKENS;
use crate::domain::{Bound, Refusal};

const TOKEN_COLUMNS: &str = "id, kind, name, permissions, user_id, created_at, last_used_at, \
                             expires_at, revoked_at";

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
}

impl Token {
    /// The permission strings of an API token.
    pub fn permission_list(&self) -> Vec<String> {
        self.permissions
            .split_whitespace()
            .map(str::to_string)
            .collect()
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
}

impl PracticeStore<'_> {
    /// Stores a new token. An API token is refused when the practice has as many that are
    /// neither revoked nor expired as it may have.
    pub async fn create_token(&self, new: NewToken<'_>) -> StoreResult<Change<Token>> {
        let token = Token {
            id: new_id(),
            kind: new.kind.as_str().to_string(),
            name: new.name.to_string(),
            permissions: new.permissions.join(" "),
            user_id: new.user_id.map(str::to_string),
            created_at: now_ms(),
            last_used_at: None,
            expires_at: new.expires_at,
            revoked_at: None,
        };
        let mut tx = self.begin_write().await?;
        let live = format!(
            "AND kind = 'api' AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > {})",
            token.created_at
        );
        if new.kind == TokenKind::Api
            && self
                .at_bound(&mut tx, "tokens", &live, Bound::ApiTokens)
                .await?
        {
            return Ok(Err(Refusal::TooMany(Bound::ApiTokens).into()));
        }
        sqlx::query(
            "INSERT INTO tokens (practice_id, id, kind, name, secret_hash, permissions, user_id, \
             created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
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
        Ok(sqlx::query_as(
            "SELECT t.id, t.kind, t.name, t.permissions, t.user_id, t.created_at, t.last_used_at, \
             t.expires_at, t.revoked_at, u.role AS user_role, \
             u.first_name || ' ' || u.last_name AS user_name \
             FROM tokens t LEFT JOIN users u ON u.practice_id = t.practice_id AND u.id = t.user_id \
             WHERE t.practice_id = $1 AND t.secret_hash = $2",
        )
        .bind(self.practice_id)
        .bind(secret_hash)
        .fetch_optional(self.read())
        .await?)
    }

    /// The practice's API tokens, the newest first, as many as it may have live (sign-in
    /// tokens are not listed).
    pub async fn list_api_tokens(&self) -> StoreResult<Vec<Token>> {
        let sql = format!(
            "SELECT {TOKEN_COLUMNS} FROM tokens WHERE practice_id = $1 AND kind = 'api' \
             ORDER BY created_at DESC, id DESC LIMIT {MAX_API_TOKENS}"
        );
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(self.practice_id)
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
            .fetch_optional(&self.read)
            .await?;
        Ok(row.map(|(practice_id,)| practice_id))
    }
}

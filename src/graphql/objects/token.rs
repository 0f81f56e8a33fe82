//! `ApiToken`, and what the token mutations return.

use async_graphql::{Context, ID, Object, Result, SimpleObject};

use super::user::staff_user;
use super::{ApiToken, User};
use crate::graphql::scalars::DateTime;

/// An API token, for integrations where no one signs in. Its secret is shown once, when it
/// is made; only a hash is kept.
#[Object]
impl ApiToken {
    /// The token's id (not its secret): what revokeApiToken takes.
    async fn id(&self) -> ID {
        ID(self.0.id.clone())
    }
    /// A name saying what the token is for, e.g. "Booking widget".
    async fn name(&self) -> &str {
        &self.0.name
    }
    /// What the token may do, e.g. ["patients:read", "query:patient"].
    async fn permissions(&self) -> Vec<String> {
        self.0.permission_list()
    }
    /// When the token was made.
    async fn created_at(&self) -> Option<DateTime> {
        Some(DateTime::from_ms(self.0.created_at))
    }
    /// When the token was last used, to the minute; null if never.
    async fn last_used_at(&self) -> Option<DateTime> {
        DateTime::from_opt(self.0.last_used_at)
    }
    /// When the token stops working; null if never.
    async fn expires_at(&self) -> Option<DateTime> {
        DateTime::from_opt(self.0.expires_at)
    }
    /// True once the token has been revoked: it is refused from then on.
    async fn revoked(&self) -> Option<bool> {
        Some(self.0.revoked_at.is_some())
    }
    /// The staff user who made the token, signed in, or who made the API token that made it
    /// (however deep: a token made by a token Ada made is Ada's); null for a token made on
    /// the command line, or by a token made there. Needs `users:read`. disableUser and
    /// resetUserPassword revoke a user's tokens with `revokeApiTokens: true`.
    async fn created_by(&self, ctx: &Context<'_>) -> Result<Option<User>> {
        staff_user(ctx, self.0.created_by_user_id.as_deref()).await
    }
    /// The API token that made this one (createApiToken called with it), when one did.
    async fn created_by_token_id(&self) -> Option<ID> {
        self.0.created_by_token_id.clone().map(ID)
    }
}

/// What createApiToken and revokeApiToken return.
#[derive(SimpleObject, Default)]
pub struct ApiTokenPayload {
    /// The token.
    pub data: Option<ApiToken>,
    /// The secret to send in the x-token header. Given once, by createApiToken; it cannot be
    /// read again.
    pub token: Option<String>,
    /// Why the mutation was refused; null on success.
    pub error: Option<String>,
}

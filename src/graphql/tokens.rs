//! Settings: API tokens.

use async_graphql::{Context, ID, Object, Result, SimpleObject};

use super::access::{authorize, authorize_write, check_operation_exists, writer};
use super::error::{OrFail, bad_input};
use super::pagination::items;
use super::scalars::DateTime;
use super::store;
use crate::auth::{self, OperationKind, Permission, Permissions};
use crate::store::tokens::{self as stored, TokenKind};

pub struct ApiToken(pub stored::Token);

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

/// Parses permission strings and checks that every operation they name exists.
pub fn parse_permissions(list: &[String]) -> Result<Permissions, String> {
    let permissions = Permissions::parse(list)?;
    for p in permissions.iter() {
        if let Permission::Operation(kind, name) = p {
            check_operation_exists(*kind, name)?;
        }
    }
    Ok(permissions)
}

#[derive(Default)]
pub struct TokenQueries;

#[Object]
impl TokenQueries {
    /// The practice's API tokens, newest first, revoked ones included. Needs `settings`.
    async fn api_tokens(&self, ctx: &Context<'_>) -> Result<Option<Vec<Option<ApiToken>>>> {
        let principal = authorize(ctx, OperationKind::Query)?;
        let tokens = store(ctx)
            .practice(&principal.practice_id)
            .list_api_tokens()
            .await
            .or_fail()?;
        Ok(items(tokens, ApiToken))
    }
}

#[derive(Default)]
pub struct TokenMutations;

#[Object]
impl TokenMutations {
    /// Makes an API token and returns its secret, once, in `token`. A caller can grant only
    /// permissions it holds itself. Needs `settings`.
    async fn create_api_token(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "What the token is for, 1 to 100 characters.")] name: String,
        #[graphql(
            desc = "What the token may do: \"*\", \"settings\", \"patients:read\", \
                          \"bookings:write\", \"query:patient\", ..."
        )]
        permissions: Vec<String>,
        #[graphql(desc = "When the token stops working; never if omitted.")] expires_at: Option<
            DateTime,
        >,
    ) -> Result<Option<ApiTokenPayload>> {
        let principal = authorize(ctx, OperationKind::Mutation)?;
        let permissions = parse_permissions(&permissions).map_err(bad_input)?;
        if let Some(p) = permissions
            .iter()
            .find(|p| !principal.permissions.covers(p))
        {
            return Err(super::error::forbidden(p, &[]));
        }
        // An API token cannot outlive itself through the tokens it makes. (A signed-in admin
        // makes tokens for integrations that outlast the session: that is their purpose.)
        let expires_at = expires_at.map(DateTime::ms);
        if principal.user_id().is_none()
            && let Some(limit) = principal.expires_at
            && expires_at.is_none_or(|at| at > limit)
        {
            return Err(bad_input(format!(
                "expiresAt must be no later than the expiry of the token that makes it, {}",
                DateTime::from_ms(limit).0.to_rfc3339()
            )));
        }
        let issued = auth::issue_api_token(writer(ctx, principal), &name, &permissions, expires_at)
            .await
            .or_fail()?;
        match issued {
            Ok((token, secret)) => Ok(Some(ApiTokenPayload {
                data: Some(ApiToken(token)),
                token: Some(secret),
                error: None,
            })),
            Err(reason) => Err(bad_input(reason)),
        }
    }

    /// Revokes an API token: it is refused from its very next request, on every server.
    /// Revoking a revoked token changes nothing. Needs `settings`.
    async fn revoke_api_token(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The token's id (ApiToken.id), not its secret.")] id: ID,
    ) -> Result<Option<ApiTokenPayload>> {
        let revoked = authorize_write(ctx)?
            .revoke_token(&id, TokenKind::Api)
            .await
            .or_fail()?;
        Ok(Some(match revoked {
            Some(token) => ApiTokenPayload {
                data: Some(ApiToken(token)),
                ..Default::default()
            },
            None => ApiTokenPayload {
                error: Some(format!("No API token with id {}", id.as_str())),
                ..Default::default()
            },
        }))
    }
}

//! Settings: API tokens, the `apiTokens` query and the token mutations.

use async_graphql::{Context, ID, Object, Result};

use super::access::{authorize, authorize_write, writer};
use super::error::{OrFail, bad_input, store_failed};
use super::objects::{ApiToken, ApiTokenPayload, items, refusal};
use super::scalars::DateTime;
use super::store;
use crate::auth::{self, IssueError, OperationKind, parse_permissions};
use crate::domain::{Record, Refusal};
use crate::store::tokens::TokenKind;

#[derive(Default)]
pub struct TokenQueries;

#[Object]
impl TokenQueries {
    /// The practice's API tokens, at most 200: every one that works, newest first, then the
    /// newest of those revoked or expired. Needs `settings`.
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
        let issued = auth::issue_api_token(
            writer(ctx, principal),
            &name,
            &permissions,
            expires_at,
            Some(&principal.token_id),
        )
        .await;
        match issued {
            Ok((token, secret)) => Ok(Some(ApiTokenPayload {
                data: Some(ApiToken(token)),
                token: Some(secret),
                error: None,
            })),
            Err(IssueError::Refused(refused)) => Ok(Some(ApiTokenPayload {
                error: Some(refusal(ctx, &refused)),
                ..Default::default()
            })),
            Err(IssueError::Invalid(reason)) => Err(bad_input(reason)),
            Err(IssueError::Store(error)) => Err(store_failed(error)),
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
                error: Some(refusal(
                    ctx,
                    &Refusal::NotFound(Record::ApiToken, id.to_string()),
                )),
                ..Default::default()
            },
        }))
    }
}

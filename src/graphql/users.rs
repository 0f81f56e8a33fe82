//! Staff users, sign-in and the caller's own identity: the `user`, `users`, `currentUser` and
//! `currentPractice` queries, `signIn` and `signOut`.

use async_graphql::{Context, ID, Object, Result};

use super::access::{authorize, authorize_write, writer};
use super::error::{OrFail, bad_input, code, guesses_throttled, internal, store_failed};
use super::objects::{
    PageInfo, Practice, ResponsePayload, SignInPayload, User, UserData, envelope, items, unselected,
};
use super::pagination::Pagination;
use super::scalars::DateTime;
use super::{ApiSettings, ClientAddress, store};
use crate::auth::{self, OperationKind, SignInError};
use crate::store::tokens::TokenKind;
use crate::text::{self, MAX_LINE_CHARS};

#[derive(Default)]
pub struct UserQueries;

#[Object]
impl UserQueries {
    /// One staff user, by id; null if the practice has none with this id. Needs `users:read`.
    async fn user(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The user's id.")] id: ID,
    ) -> Result<Option<User>> {
        let principal = authorize(ctx, OperationKind::Query)?;
        let found = store(ctx)
            .practice(&principal.practice_id)
            .find_user(&id)
            .await
            .or_fail()?;
        Ok(found.map(User))
    }

    /// A page of the practice's staff users. Needs `users:read`.
    async fn users(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "Which page; default page 1 of 25.")] pagination: Option<Pagination>,
    ) -> Result<Option<UserData>> {
        let principal = authorize(ctx, OperationKind::Query)?;
        let page = Pagination::request(pagination)?;
        let result = store(ctx)
            .practice(&principal.practice_id)
            .list_users(page)
            .await
            .or_fail()?;
        Ok(Some(UserData {
            page_info: Some(PageInfo::of(page, &result)),
            data: items(result.items, User),
        }))
    }

    /// The staff user behind a signIn token; null for an API token. Needs only a valid token.
    async fn current_user(&self, ctx: &Context<'_>) -> Result<Option<User>> {
        let principal = authorize(ctx, OperationKind::Query)?;
        let Some(user_id) = principal.user_id() else {
            return Ok(None);
        };
        let found = store(ctx)
            .practice(&principal.practice_id)
            .find_user(user_id)
            .await
            .or_fail()?;
        Ok(found.map(User))
    }

    /// The caller's practice. Needs only a valid token.
    async fn current_practice(&self, ctx: &Context<'_>) -> Result<Option<Practice>> {
        authorize(ctx, OperationKind::Query)?;
        Practice::of_caller(ctx).await.map(Some)
    }
}

#[derive(Default)]
pub struct PracticeMutations;

#[Object]
impl PracticeMutations {
    /// Renames the caller's practice or sets its time zone; the arguments given change, the
    /// others are kept. Needs `settings`.
    async fn update_practice(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The practice's name: 1 to 200 characters.")] name: Option<String>,
        #[graphql(desc = "An IANA time zone, e.g. \"Europe/London\".")] timezone: Option<String>,
    ) -> Result<Option<ResponsePayload<Practice>>> {
        // The permission first, as everywhere: a caller without it learns nothing of its input.
        let writer = authorize_write(ctx)?;
        let name = name
            .map(|n| text::required("name", &n, MAX_LINE_CHARS))
            .transpose()
            .map_err(bad_input)?;
        let timezone = match timezone.as_deref().map(str::trim) {
            None => None,
            Some(zone) => Some(
                zone.parse::<chrono_tz::Tz>()
                    .map_err(|_| {
                        bad_input(format!(
                            "timezone {zone:?} is not an IANA time zone such as \"Europe/London\""
                        ))
                    })?
                    .name()
                    .to_string(),
            ),
        };
        let changed = writer
            .update_practice(name.as_deref(), timezone.as_deref())
            .await
            .or_fail()?;
        envelope(ctx, changed, Practice::from)
    }
}

#[derive(Default)]
pub struct SessionMutations;

#[Object]
impl SessionMutations {
    /// Signs a staff user in with email and password, and returns a short-lived token for the
    /// x-token header. Send no x-token with this call. The user's role decides what the token
    /// may do.
    async fn sign_in(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The staff user's email.")] email: String,
        #[graphql(desc = "The staff user's password.")] password: String,
    ) -> Result<Option<SignInPayload>> {
        let ttl = ctx.data_unchecked::<ApiSettings>().user_token_ttl;
        let address = ctx.data_opt::<ClientAddress>().and_then(|a| a.0);
        match auth::sign_in(store(ctx), &email, &password, address, ttl).await {
            Ok(signed_in) => Ok(Some(SignInPayload {
                token: Some(signed_in.secret),
                expires_at: Some(DateTime::from_ms(signed_in.expires_at)),
                user: Some(User(signed_in.user)),
                error: None,
            })),
            Err(SignInError::Incorrect) => {
                let error = SignInError::Incorrect.to_string();
                unselected(ctx, code::UNAUTHENTICATED, &error);
                Ok(Some(SignInPayload {
                    error: Some(error),
                    ..Default::default()
                }))
            }
            Err(e @ SignInError::Throttled(wait)) => Err(guesses_throttled(e.to_string(), &wait)),
            Err(e @ SignInError::EmailTooLong) => Err(bad_input(e.to_string())),
            Err(e @ SignInError::Disabled) => {
                let error = e.to_string();
                unselected(ctx, code::FORBIDDEN, &error);
                Ok(Some(SignInPayload {
                    error: Some(error),
                    ..Default::default()
                }))
            }
            Err(SignInError::Store(e)) => Err(store_failed(e)),
            Err(e @ SignInError::Internal(_)) => Err(internal(e)),
        }
    }

    /// Signs out: the calling signIn token stops working at once, on every server. Returns
    /// true. An API token is revoked with revokeApiToken instead.
    async fn sign_out(&self, ctx: &Context<'_>) -> Result<Option<bool>> {
        let principal = authorize(ctx, OperationKind::Mutation)?;
        if principal.user_id().is_none() {
            return Err(bad_input(
                "signOut ends a signed-in session; an API token is revoked with revokeApiToken",
            ));
        }
        let revoked = writer(ctx, principal)
            .revoke_token(&principal.token_id, TokenKind::User)
            .await
            .or_fail()?;
        Ok(Some(revoked.is_some()))
    }
}

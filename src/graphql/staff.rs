//! Managing staff and sessions: `createUser`, `updateUser`, `disableUser`, `enableUser`,
//! `resetUserPassword`, `setPassword`, `changePassword`, `createFirstAdmin`, `sessions` and
//! `revokeSession`. The rules are `auth::staff`'s; this module words their outcomes.

use async_graphql::{Context, ID, InputObject, MaybeUndefined, Object, Result};

use super::access::{authorize, writer};
use super::error::{OrFail, bad_input, code, forbidden, guesses_throttled, internal, store_failed};
use super::objects::{
    Session, SignInPayload, User, UserResponsePayload, invalid_input, refusal, unselected,
};
use super::scalars::DateTime;
use super::{ApiSettings, ClientAddress, store};
use crate::auth::staff::{self, StaffError, StaffInput, WithLink};
use crate::auth::{Access, OperationKind, Principal, Resource, SignedIn};
use crate::domain::Denied;
use crate::store::users::Whose;

/// A new staff user. They have no password until they open the set-password link that
/// createUser returns.
#[derive(InputObject)]
pub struct CreateUserInput {
    /// The email they sign in with; unique across the server.
    pub email: String,
    /// First (given) name.
    pub first_name: String,
    /// Last (family) name.
    pub last_name: String,
    /// "admin", "practitioner" or "receptionist"; no higher than the caller's own permissions.
    pub role: String,
    /// Form of address, e.g. "Dr".
    pub title: Option<String>,
    /// True for practitioners who see patients and can be booked. Default false.
    pub is_doctor: Option<bool>,
    /// Gender, as the user gives it.
    pub gender: Option<String>,
    /// Qualifications, e.g. "MBBS, MRCGP".
    pub qualifications: Option<String>,
    /// Professional registration number.
    pub registration: Option<String>,
    /// Medical specialties, at most 20.
    pub medical_specialties: Option<Vec<String>>,
    /// Job title, e.g. "Senior physiotherapist".
    pub position_title: Option<String>,
    /// The youngest patient age they treat, in years (0 to 130).
    pub minimum_treatment_age: Option<i32>,
    /// The access groups they belong to (at most 20): unless an admin, they see only the
    /// patients of these groups and those in none.
    pub access_group_ids: Option<Vec<ID>>,
    /// Their pronouns, e.g. "she/her".
    pub pronouns: Option<String>,
    /// Metadata entries (at most 50; keys of 1 to 40 characters, values of at most 500). Past
    /// those limits the change is refused in `error`.
    pub metadata: Option<Vec<MetadataEntryInput>>,
    /// The ids of the appointment types they provide (Product.id), at most 30.
    pub services_provided: Option<Vec<ID>>,
}

/// A metadata entry: a key and its value.
#[derive(InputObject)]
pub struct MetadataEntryInput {
    /// The key: 1 to 40 characters, unique in the list.
    pub key: String,
    /// The value: at most 500 characters.
    pub value: String,
}

pub(super) fn pairs(entries: Vec<MetadataEntryInput>) -> Vec<(String, String)> {
    entries.into_iter().map(|e| (e.key, e.value)).collect()
}

/// A change to a staff user: the fields given are changed, the others kept; null clears the
/// optional ones.
#[derive(InputObject)]
pub struct UpdateUserInput {
    /// The email they sign in with.
    pub email: Option<String>,
    /// First (given) name.
    pub first_name: Option<String>,
    /// Last (family) name.
    pub last_name: Option<String>,
    /// "admin", "practitioner" or "receptionist"; no higher than the caller's own permissions.
    /// The practice's last enabled admin keeps "admin".
    pub role: Option<String>,
    /// Form of address, e.g. "Dr".
    pub title: MaybeUndefined<String>,
    /// True for practitioners who see patients and can be booked.
    pub is_doctor: Option<bool>,
    /// Gender, as the user gives it.
    pub gender: MaybeUndefined<String>,
    /// Qualifications, e.g. "MBBS, MRCGP".
    pub qualifications: MaybeUndefined<String>,
    /// Professional registration number.
    pub registration: MaybeUndefined<String>,
    /// Medical specialties, at most 20; an empty list or null clears them.
    pub medical_specialties: MaybeUndefined<Vec<String>>,
    /// Job title.
    pub position_title: MaybeUndefined<String>,
    /// The youngest patient age they treat, in years (0 to 130).
    pub minimum_treatment_age: MaybeUndefined<i32>,
    /// The access groups they belong to become exactly these; [] (or null) takes them out of
    /// every group.
    pub access_group_ids: MaybeUndefined<Vec<ID>>,
    /// Their pronouns.
    pub pronouns: MaybeUndefined<String>,
    /// Their metadata becomes exactly these entries (at most 50; keys of 1 to 40 characters,
    /// values of at most 500; past those limits the change is refused in `error`); [] (or
    /// null) clears it.
    pub metadata: MaybeUndefined<Vec<MetadataEntryInput>>,
    /// The appointment types they provide become exactly these; [] (or null) clears them.
    pub services_provided: MaybeUndefined<Vec<ID>>,
}

/// An optional field of an update: undefined keeps, null clears, a value sets.
fn patch<T>(value: MaybeUndefined<T>) -> Option<Option<T>> {
    match value {
        MaybeUndefined::Undefined => None,
        MaybeUndefined::Null => Some(None),
        MaybeUndefined::Value(v) => Some(Some(v)),
    }
}

impl From<CreateUserInput> for StaffInput {
    fn from(input: CreateUserInput) -> Self {
        StaffInput {
            email: Some(input.email),
            first_name: Some(input.first_name),
            last_name: Some(input.last_name),
            role: Some(input.role),
            title: input.title.map(Some),
            is_doctor: input.is_doctor,
            gender: input.gender.map(Some),
            qualifications: input.qualifications.map(Some),
            registration: input.registration.map(Some),
            medical_specialties: input.medical_specialties,
            position_title: input.position_title.map(Some),
            minimum_treatment_age: input.minimum_treatment_age.map(|a| Some(i64::from(a))),
            access_group_ids: input
                .access_group_ids
                .map(|ids| ids.into_iter().map(|id| id.0).collect()),
            pronouns: input.pronouns.map(Some),
            metadata: input.metadata.map(pairs),
            services_provided: input
                .services_provided
                .map(|ids| ids.into_iter().map(|id| id.0).collect()),
        }
    }
}

impl From<UpdateUserInput> for StaffInput {
    fn from(input: UpdateUserInput) -> Self {
        StaffInput {
            email: input.email,
            first_name: input.first_name,
            last_name: input.last_name,
            role: input.role,
            title: patch(input.title),
            is_doctor: input.is_doctor,
            gender: patch(input.gender),
            qualifications: patch(input.qualifications),
            registration: patch(input.registration),
            medical_specialties: patch(input.medical_specialties).map(Option::unwrap_or_default),
            position_title: patch(input.position_title),
            minimum_treatment_age: patch(input.minimum_treatment_age).map(|age| age.map(i64::from)),
            access_group_ids: patch(input.access_group_ids)
                .map(|ids| ids.unwrap_or_default().into_iter().map(|id| id.0).collect()),
            pronouns: patch(input.pronouns),
            metadata: patch(input.metadata).map(|m| pairs(m.unwrap_or_default())),
            services_provided: patch(input.services_provided)
                .map(|ids| ids.unwrap_or_default().into_iter().map(|id| id.0).collect()),
        }
    }
}

/// Whether the caller may give (or act on) a role: see [`staff::covers_role`].
fn covers(principal: &Principal) -> impl Fn(&str) -> bool + Sync + '_ {
    |role| staff::covers_role(&principal.permissions, role)
}

/// Whether a disable or a reset also revokes the user's API tokens (`revokeApiTokens`, false
/// when omitted or null); FORBIDDEN, naming `settings`, when a caller without it asks to:
/// tokens are the settings' business, and `users:write` alone does not reach them.
fn revokes_tokens(principal: &Principal, revoke_api_tokens: Option<bool>) -> Result<bool> {
    let revoke = revoke_api_tokens.unwrap_or(false);
    if revoke && !principal.permissions.allows_settings() {
        return Err(forbidden("settings", &[]));
    }
    Ok(revoke)
}

/// A staff change's outcome as a payload: a refusal in `error`, a mistake in the input or a
/// failure as a GraphQL error.
fn user_payload(
    ctx: &Context<'_>,
    outcome: Result<WithLink, StaffError>,
) -> Result<Option<UserResponsePayload>> {
    let (user, token) = match outcome {
        Ok(done) => (done.user, Some(done.set_password_token)),
        Err(error) => return refused(ctx, error).map(Some),
    };
    Ok(Some(UserResponsePayload {
        data: Some(User(user)),
        error: None,
        set_password_token: token,
    }))
}

fn refused(ctx: &Context<'_>, error: StaffError) -> Result<UserResponsePayload> {
    match error {
        StaffError::Refused(r) => Ok(UserResponsePayload {
            error: Some(refusal(ctx, &r)),
            ..Default::default()
        }),
        other => Err(staff_error(other)),
    }
}

/// A staff error that is not a refusal of the practice, as a GraphQL error.
fn staff_error(error: StaffError) -> async_graphql::Error {
    match error {
        StaffError::Invalid(message) => bad_input(message),
        StaffError::Store(e) => store_failed(e),
        other => internal(other),
    }
}

/// What setPassword, createFirstAdmin and changePassword answer: a session, or the sentence.
fn session_payload(
    ctx: &Context<'_>,
    outcome: Result<SignedIn, StaffError>,
) -> Result<Option<SignInPayload>> {
    match outcome {
        Ok(signed_in) => Ok(Some(SignInPayload {
            token: Some(signed_in.secret),
            expires_at: Some(DateTime::from_ms(signed_in.expires_at)),
            user: Some(User(signed_in.user)),
            error: None,
        })),
        Err(error) => sign_in_refused(ctx, error).map(Some),
    }
}

fn sign_in_refused(ctx: &Context<'_>, error: StaffError) -> Result<SignInPayload> {
    let (code, sentence) = match error {
        e @ (StaffError::BadLink | StaffError::WrongPassword | StaffError::SessionEnded) => {
            (code::UNAUTHENTICATED, e.to_string())
        }
        e @ StaffError::Throttled(wait) => return Err(guesses_throttled(e.to_string(), &wait)),
        StaffError::Refused(r) => {
            return Ok(SignInPayload {
                error: Some(refusal(ctx, &r)),
                ..Default::default()
            });
        }
        other => return Err(staff_error(other)),
    };
    unselected(ctx, code, &sentence);
    Ok(SignInPayload {
        error: Some(sentence),
        ..Default::default()
    })
}

#[derive(Default)]
pub struct StaffQueries;

#[Object]
impl StaffQueries {
    /// Signed-in sessions that have neither ended nor expired, the newest first (at most
    /// 200). Without `userId`, the caller's own (every user's, for an API token with
    /// `users:write`). Another user's sessions need `users:write`.
    async fn sessions(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "Whose sessions; the caller's own when omitted.")] user_id: Option<ID>,
    ) -> Result<Option<Vec<Option<Session>>>> {
        let principal = authorize(ctx, OperationKind::Query)?;
        let manages = principal.permissions.allows(Resource::Users, Access::Write);
        let own = principal.user_id();
        let whose = match (user_id.as_ref().map(|id| id.as_str()), own) {
            (Some(id), Some(own)) if id == own => Some(id),
            (Some(id), _) if manages => Some(id),
            (Some(_), _) => return Err(forbidden("users:write", &[])),
            (None, Some(own)) => Some(own),
            (None, None) if manages => None,
            (None, None) => {
                return Err(bad_input(
                    "an API token has no sessions: name a userId (needs users:write)",
                ));
            }
        };
        let sessions = store(ctx)
            .practice(&principal.practice_id)
            .list_sessions(whose)
            .await
            .or_fail()?;
        Ok(Some(
            sessions
                .into_iter()
                .map(|token| Some(Session::of(token, &principal.token_id)))
                .collect(),
        ))
    }
}

#[derive(Default)]
pub struct StaffMutations;

#[Object]
impl StaffMutations {
    /// Adds a staff user, without a password: hand them the link made of `setPasswordToken`
    /// (`/settings/#/set-password?token=...`), valid for 72 hours. Needs `users:write`, and the
    /// caller's own permissions must cover the role given.
    async fn create_user(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The new user.")] input: CreateUserInput,
    ) -> Result<Option<UserResponsePayload>> {
        let principal = authorize(ctx, OperationKind::Mutation)?;
        let outcome =
            staff::create_staff(writer(ctx, principal), &input.into(), &covers(principal)).await;
        user_payload(ctx, outcome)
    }

    /// Changes a staff user. Needs `users:write`, and the caller's permissions must cover the
    /// user's role, old and new. The practice's last enabled admin cannot be demoted. A
    /// changed role applies to the user's sessions on their next request.
    async fn update_user(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The user's id.")] id: ID,
        #[graphql(desc = "What changes.")] input: UpdateUserInput,
    ) -> Result<Option<UserResponsePayload>> {
        let principal = authorize(ctx, OperationKind::Mutation)?;
        let patch = match StaffInput::from(input).check("input") {
            Ok(patch) => patch,
            Err(error) => return refused(ctx, error).map(Some),
        };
        let changed = writer(ctx, principal)
            .update_user(&id, &patch, &covers(principal))
            .await
            .or_fail()?;
        Ok(Some(UserResponsePayload::of(ctx, changed)))
    }

    /// Disables a staff user: every session of theirs stops working on its next request, on
    /// every server, and signIn refuses them; with `revokeApiTokens: true`, so does every API
    /// token they made (ApiToken.createdBy). Refused for the caller's own account and for the
    /// practice's last enabled admin. Needs `users:write` (and `settings` to revoke tokens).
    async fn disable_user(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The user's id.")] id: ID,
        #[graphql(
            desc = "Also revoke the API tokens the user made (ApiToken.createdBy): for an \
                    account that may have been taken over, whose tokens would outlive it. \
                    Needs `settings`. False when omitted or null: a clinic's integrations \
                    keep working when the admin who set them up leaves."
        )]
        revoke_api_tokens: Option<bool>,
    ) -> Result<Option<UserResponsePayload>> {
        let principal = authorize(ctx, OperationKind::Mutation)?;
        let revoke_api_tokens = revokes_tokens(principal, revoke_api_tokens)?;
        let changed = writer(ctx, principal)
            .disable_user(
                &id,
                principal.user_id(),
                &covers(principal),
                revoke_api_tokens,
            )
            .await
            .or_fail()?;
        Ok(Some(UserResponsePayload::of(ctx, changed)))
    }

    /// Enables a disabled staff user: they sign in again with their password. Needs
    /// `users:write`.
    async fn enable_user(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The user's id.")] id: ID,
    ) -> Result<Option<UserResponsePayload>> {
        let principal = authorize(ctx, OperationKind::Mutation)?;
        let changed = writer(ctx, principal)
            .enable_user(&id, &covers(principal))
            .await
            .or_fail()?;
        Ok(Some(UserResponsePayload::of(ctx, changed)))
    }

    /// Resets a staff user's password: the old one stops working and every session of theirs
    /// ends at once (with `revokeApiTokens: true`, every API token they made too);
    /// `setPasswordToken` (valid for 72 hours, replacing any earlier one) is the way to set a
    /// new one. Needs `users:write` (and `settings` to revoke tokens).
    async fn reset_user_password(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The user's id.")] id: ID,
        #[graphql(
            desc = "Also revoke the API tokens the user made (ApiToken.createdBy). Needs \
                    `settings`. False when omitted or null."
        )]
        revoke_api_tokens: Option<bool>,
    ) -> Result<Option<UserResponsePayload>> {
        let principal = authorize(ctx, OperationKind::Mutation)?;
        let revoke_api_tokens = revokes_tokens(principal, revoke_api_tokens)?;
        let outcome = staff::reset_password(
            writer(ctx, principal),
            &id,
            &covers(principal),
            revoke_api_tokens,
        )
        .await;
        user_payload(ctx, outcome)
    }

    /// Sets a password with the one-time token of a set-password link (from createUser or
    /// resetUserPassword), and signs the user in. Send no x-token: the link's token is the
    /// credential. The token is used up; every earlier session of the user ends.
    async fn set_password(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The token of the set-password link.")] set_password_token: String,
        #[graphql(desc = "The new password: 8 to 256 characters.")] password: String,
    ) -> Result<Option<SignInPayload>> {
        let ttl = ctx.data_unchecked::<ApiSettings>().user_token_ttl;
        let outcome = staff::set_password(store(ctx), &set_password_token, &password, ttl).await;
        session_payload(ctx, outcome)
    }

    /// Makes a practice's first admin with the one-time token that `practice-api serve`
    /// prints while the practice has no staff, and signs them in. Send no x-token. Refused
    /// once the practice has any staff user.
    async fn create_first_admin(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The token of the first-start link.")] setup_token: String,
        #[graphql(desc = "The admin's email.")] email: String,
        #[graphql(desc = "The admin's first name.")] first_name: String,
        #[graphql(desc = "The admin's last name.")] last_name: String,
        #[graphql(desc = "The admin's password: 8 to 256 characters.")] password: String,
    ) -> Result<Option<SignInPayload>> {
        let ttl = ctx.data_unchecked::<ApiSettings>().user_token_ttl;
        let input = StaffInput {
            email: Some(email),
            first_name: Some(first_name),
            last_name: Some(last_name),
            ..Default::default()
        };
        let outcome =
            staff::create_first_admin(store(ctx), &setup_token, &input, &password, ttl).await;
        session_payload(ctx, outcome)
    }

    /// Changes the signed-in user's own password. Every other session of theirs ends; this
    /// one goes on (`token` is null: keep using the one you have). Needs a signIn token.
    async fn change_password(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The password now.")] current_password: String,
        #[graphql(desc = "The new password: 8 to 256 characters.")] new_password: String,
    ) -> Result<Option<SignInPayload>> {
        let principal = authorize(ctx, OperationKind::Mutation)?;
        let Some(user_id) = principal.user_id() else {
            return Err(bad_input(
                "changePassword changes a signed-in user's own password; an API token has none",
            ));
        };
        let outcome = staff::change_password(
            writer(ctx, principal),
            user_id,
            &principal.token_id,
            &current_password,
            &new_password,
            ctx.data_opt::<ClientAddress>().and_then(|a| a.0),
        )
        .await;
        match outcome {
            Ok(user) => Ok(Some(SignInPayload {
                token: None,
                expires_at: principal.expires_at.map(DateTime::from_ms),
                user: Some(User(user)),
                error: None,
            })),
            Err(error) => sign_in_refused(ctx, error).map(Some),
        }
    }

    /// Ends a signed-in session at once, on every server: one of the caller's own, or, with
    /// `users:write`, that of a user whose role the caller's permissions cover (as for
    /// disableUser; otherwise null, with an error coded REFUSED). True when the session was ended (or had ended
    /// already); false when the caller has no such session to end.
    async fn revoke_session(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The session's id (Session.id).")] id: ID,
    ) -> Result<Option<bool>> {
        let principal = authorize(ctx, OperationKind::Mutation)?;
        let manages = principal.permissions.allows(Resource::Users, Access::Write);
        let covered = covers(principal);
        let whose = match (manages, principal.user_id()) {
            (true, caller) => Whose::Covered {
                caller,
                covers: &covered,
            },
            (false, Some(own)) => Whose::Own(own),
            (false, None) => return Ok(Some(false)),
        };
        match writer(ctx, principal)
            .revoke_session(&id, whose)
            .await
            .or_fail()?
        {
            Ok(ended) => Ok(Some(ended.is_some())),
            Err(Denied::Refused(r)) => {
                // Said as a GraphQL error with the code REFUSED: there is no payload.
                refusal(ctx, &r);
                Ok(None)
            }
            Err(Denied::Invalid(invalid)) => Err(invalid_input(invalid)),
        }
    }
}

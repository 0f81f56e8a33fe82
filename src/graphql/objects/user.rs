//! `User`: a staff user, and what signIn returns.

use async_graphql::{Context, ID, Object, Result, SimpleObject};

use super::booking::MetadataEntry;
use super::envelope::refusal;
use super::page::PageInfo;
use super::{Booking, BookingData, Product, User};
use crate::auth::{Access, Resource};
use crate::domain::{Change, Denied};
use crate::graphql::access::require;
use crate::graphql::loaders::{self, load_one};
use crate::graphql::pagination::Pagination;
use crate::graphql::scalars::{Date, DateTime};
use crate::store;

/// The staff user `id` names, for a holder of `users:read` (FORBIDDEN otherwise): who archived
/// a patient, who made a token.
pub(super) async fn staff_user(ctx: &Context<'_>, id: Option<&str>) -> Result<Option<User>> {
    let Some(id) = id else {
        return Ok(None);
    };
    require(ctx, Resource::Users, Access::Read)?;
    Ok(load_one::<loaders::Users>(ctx, id).await?.map(User))
}

/// A staff user of the practice: admin, practitioner or receptionist. Doctors are users with
/// `isDoctor: true`.
#[Object]
impl User {
    /// The user's id.
    async fn id(&self) -> ID {
        ID(self.0.id.clone())
    }
    /// Form of address, e.g. "Dr".
    async fn title(&self) -> Option<&str> {
        self.0.title.as_deref()
    }
    /// First (given) name.
    async fn first_name(&self) -> &str {
        &self.0.first_name
    }
    /// Last (family) name.
    async fn last_name(&self) -> &str {
        &self.0.last_name
    }
    /// First and last name.
    async fn full_name(&self) -> String {
        self.0.full_name()
    }
    /// The email the user signs in with, lower-cased.
    async fn email(&self) -> &str {
        &self.0.email
    }
    /// True once an admin disabled the user: they cannot sign in, and their sessions have
    /// ended.
    async fn deleted(&self) -> Option<bool> {
        Some(self.0.is_disabled())
    }
    /// When the user last signed in; null if never.
    async fn last_sign_in_at(&self) -> Option<DateTime> {
        self.0.last_sign_in_at.map(DateTime::from_ms)
    }
    /// Gender, as the user gives it.
    async fn gender(&self) -> Option<&str> {
        self.0.profile.gender.as_deref()
    }
    /// Qualifications, e.g. "MBBS, MRCGP".
    async fn qualifications(&self) -> Option<&str> {
        self.0.profile.qualifications.as_deref()
    }
    /// Professional registration number.
    async fn registration(&self) -> Option<&str> {
        self.0.profile.registration.as_deref()
    }
    /// Medical specialties; empty when none.
    async fn medical_specialties(&self) -> Option<Vec<String>> {
        Some(self.0.profile.specialties())
    }
    /// Job title, e.g. "Senior physiotherapist".
    async fn position_title(&self) -> Option<&str> {
        self.0.profile.position_title.as_deref()
    }
    /// The youngest patient age they treat, in years.
    async fn minimum_treatment_age(&self) -> Option<i32> {
        self.0
            .profile
            .minimum_treatment_age
            .and_then(|age| i32::try_from(age).ok())
    }
    /// The user's pronouns, e.g. "she/her".
    async fn pronouns(&self) -> Option<&str> {
        self.0.profile.pronouns.as_deref()
    }
    /// The appointment types the user provides (at most 30), as set with createUser or
    /// updateUser. Needs `bookings:read`, as `products` does.
    async fn services_provided(&self, ctx: &Context<'_>) -> Result<Option<Vec<Option<Product>>>> {
        require(ctx, Resource::Bookings, Access::Read)?;
        let found = loaders::load_many::<loaders::Products>(ctx, self.0.service_ids()).await?;
        Ok(super::page::items(found, Product))
    }
    /// The user's metadata entries, in the order they were set.
    async fn metadata(&self) -> Option<Vec<Option<MetadataEntry>>> {
        Some(
            self.0
                .metadata()
                .into_iter()
                .map(|(key, value)| {
                    Some(MetadataEntry {
                        key,
                        value: Some(value),
                    })
                })
                .collect(),
        )
    }
    /// The ids of the access groups the user belongs to: unless an admin, the user sees only
    /// the patients of these groups and those in none.
    async fn access_group_ids(&self) -> Option<Vec<ID>> {
        Some(self.0.access_group_ids().into_iter().map(ID).collect())
    }
    /// When the user was added.
    async fn created_at(&self) -> Option<DateTime> {
        Some(DateTime::from_ms(self.0.created_at))
    }
    /// When the user last changed.
    async fn updated_at(&self) -> Option<DateTime> {
        Some(DateTime::from_ms(self.0.updated_at))
    }
    /// True for practitioners who see patients and can be booked.
    async fn is_doctor(&self) -> Option<bool> {
        Some(self.0.is_doctor != 0)
    }
    /// "admin" (everything), "practitioner" (patients, bookings and labels: read and write;
    /// users: read) or "receptionist" (bookings: read and write; patients and labels: read;
    /// users: read).
    async fn role(&self) -> Option<&str> {
        Some(&self.0.role)
    }
    /// The doctor's bookings that start or end between these dates (whole days, UTC, both
    /// included), by start time, cancelled ones and those of patients hidden from the caller
    /// left out. Needs `bookings:read`.
    async fn bookings(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The first day.")] start: Date,
        #[graphql(desc = "The last day.")] end: Date,
        #[graphql(desc = "The page number, from 1. Default 1.")] page: Option<i32>,
        #[graphql(desc = "Items per page, from 1 to 100. Default 25.")] page_size: Option<i32>,
    ) -> Result<Option<BookingData>> {
        let pagination = Pagination { page, page_size };
        Booking::of_doctor(ctx, &self.0.id, (start, end), pagination).await
    }
}

/// A page of staff users.
#[derive(SimpleObject)]
pub struct UserData {
    /// The users on this page, by last name then first name.
    pub data: Option<Vec<Option<User>>>,
    /// Where this page sits in the list.
    pub page_info: Option<PageInfo>,
}

/// What a staff change returns: the user, or a sentence saying why nothing changed.
#[derive(SimpleObject, Default)]
pub struct UserResponsePayload {
    /// The user affected; null when the change was refused.
    pub data: Option<User>,
    /// Why the change was refused, in a sentence for a person; null on success. Nothing was
    /// changed when this is set.
    pub error: Option<String>,
    /// createUser and resetUserPassword: the one-time token that sets the user's password,
    /// shown this once. Hand the user the link `/settings/#/set-password?token=` followed by
    /// it; it works for 72 hours, once.
    pub set_password_token: Option<String>,
}

impl UserResponsePayload {
    /// The payload of a change: the user, or the refusal's sentence.
    pub fn of(ctx: &Context<'_>, change: Change<store::users::User>) -> Self {
        match change {
            Ok(user) => UserResponsePayload {
                data: Some(User(user)),
                ..Default::default()
            },
            Err(Denied::Refused(r)) => UserResponsePayload {
                error: Some(refusal(ctx, &r)),
                ..Default::default()
            },
            // No staff change has an invalid input of the domain's.
            Err(Denied::Invalid(invalid)) => UserResponsePayload {
                error: Some(format!("{invalid:?}")),
                ..Default::default()
            },
        }
    }
}

/// A signed-in session of a staff user: a token from signIn, setPassword or
/// createFirstAdmin that has neither ended nor expired.
#[derive(SimpleObject)]
pub struct Session {
    /// The session's id (not its secret): revokeSession takes it.
    pub id: ID,
    /// The staff user signed in.
    pub user_id: ID,
    /// When it began.
    pub created_at: DateTime,
    /// When it was last used, to the minute; null if never.
    pub last_used_at: Option<DateTime>,
    /// When it ends by itself.
    pub expires_at: DateTime,
    /// True for the session of this very request.
    pub current: Option<bool>,
}

impl Session {
    /// A session token, as the caller whose own token is `current` sees it.
    pub fn of(token: store::tokens::Token, current: &str) -> Session {
        Session {
            current: Some(token.id == current),
            id: ID(token.id),
            user_id: ID(token.user_id.unwrap_or_default()),
            created_at: DateTime::from_ms(token.created_at),
            last_used_at: token.last_used_at.map(DateTime::from_ms),
            expires_at: DateTime::from_ms(token.expires_at.unwrap_or_default()),
        }
    }
}

/// What signIn returns: a token on success, or `error`.
#[derive(SimpleObject, Default)]
pub struct SignInPayload {
    /// The token to send in the x-token header of later requests. Valid for 12 hours unless
    /// the server is configured otherwise; see expiresAt.
    pub token: Option<String>,
    /// When the token stops working.
    pub expires_at: Option<DateTime>,
    /// The signed-in user.
    pub user: Option<User>,
    /// Why sign-in failed; the same sentence for an unknown email and a wrong password.
    pub error: Option<String>,
}

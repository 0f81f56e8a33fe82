//! Managing staff: who may grant which role, the checks on what a person types about a staff
//! user, passwords set through one-time links, and a user's own password. Plain Rust over the
//! store, shared by the API and the command line.
//!
//! A staff user is made without a password: the answer carries a one-time set-password token
//! (a link the admin hands over; practice-api sends no email). Resetting a password works the
//! same way, and ends the user's sessions at once.

use std::time::Duration;

use thiserror::Error;

use super::permissions::{Permissions, Role};
use super::{SignedIn, password, secret};
use crate::domain::limits::MAX_SERVICES_PROVIDED;
use crate::domain::{self, Denied, Record, Refusal};
use crate::store::audit::{Actor, Author};
use crate::store::tokens::{NewToken, TokenKind};
use crate::store::users::{LinkPurpose, NewLink, NewUser, PasswordKept, Profile, User, UserPatch};
use crate::store::{PracticeStore, Store, StoreError, now_ms};
use crate::text::{self, MAX_LINE_CHARS};

/// How long a set-password link works.
pub const SET_PASSWORD_TTL: Duration = Duration::from_secs(72 * 3600);
/// How long the first-admin link that `serve` prints works.
pub const FIRST_ADMIN_TTL: Duration = Duration::from_secs(24 * 3600);
/// Most medical specialties a user lists.
pub const MAX_SPECIALTIES: usize = 20;
/// Most access groups a staff user belongs to.
pub const MAX_ACCESS_GROUPS_PER_USER: usize = 20;
/// Oldest minimum treatment age that makes sense, in years.
pub const MAX_TREATMENT_AGE: i64 = 130;

/// Why a staff change was not made.
#[derive(Debug, Error)]
pub enum StaffError {
    /// What the caller typed breaks a rule of its own (a blank name, an unknown role).
    #[error("{0}")]
    Invalid(String),
    /// The practice refused it.
    #[error("{0:?}")]
    Refused(Refusal),
    /// The set-password or first-admin token is unknown, used or expired.
    #[error(
        "This link is not valid: it was used already, has expired, or was replaced by a newer one. Ask an admin of the practice for a new one"
    )]
    BadLink,
    /// changePassword's current password is wrong.
    #[error("The current password is incorrect")]
    WrongPassword,
    /// changePassword's session ended while the password was checked.
    #[error("This session has ended: sign in again")]
    SessionEnded,
    /// changePassword's current password was tried too often: wait this long.
    #[error("Too many wrong passwords: try again later")]
    Throttled(Duration),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Internal(String),
}

impl From<Denied> for StaffError {
    fn from(denied: Denied) -> Self {
        match denied {
            Denied::Refused(Refusal::NotFound(Record::Link, _)) => StaffError::BadLink,
            Denied::Refused(refusal) => StaffError::Refused(refusal),
            Denied::Invalid(invalid) => StaffError::Internal(format!("{invalid:?}")),
        }
    }
}

type StaffResult<T> = Result<T, StaffError>;

fn invalid(message: String) -> StaffError {
    StaffError::Invalid(message)
}

/// Whether the holder of `permissions` may give a staff user this role, or act on a staff user
/// who has it: only when they hold everything the role may do (a receptionist makes no
/// admin). An unknown role is covered by nobody.
pub fn covers_role(permissions: &Permissions, role: &str) -> bool {
    role.parse::<Role>()
        .is_ok_and(|role| role.permissions().iter().all(|p| permissions.covers(p)))
}

/// A staff user's fields as a person typed them, each optional: `createUser` needs email,
/// names and role; `updateUser` changes those given. Inner `None` of a nested option clears.
#[derive(Clone, Debug, Default)]
pub struct StaffInput {
    pub email: Option<String>,
    pub first_name: Option<String>,
    pub last_name: Option<String>,
    pub role: Option<String>,
    pub title: Option<Option<String>>,
    pub is_doctor: Option<bool>,
    pub gender: Option<Option<String>>,
    pub qualifications: Option<Option<String>>,
    pub registration: Option<Option<String>>,
    pub medical_specialties: Option<Vec<String>>,
    pub position_title: Option<Option<String>>,
    pub minimum_treatment_age: Option<Option<i64>>,
    /// The access groups the user belongs to: exactly these.
    pub access_group_ids: Option<Vec<String>>,
    pub pronouns: Option<Option<String>>,
    /// The user's metadata: exactly these pairs.
    pub metadata: Option<Vec<(String, String)>>,
    /// The appointment types the user provides: exactly these.
    pub services_provided: Option<Vec<String>>,
}

impl StaffInput {
    /// Checks every field given and returns them as a change; `prefix` names the argument in
    /// messages ("input"). Metadata past the contract's limits is a refusal
    /// ([`StaffError::Refused`]), answered in the payload's `error`.
    pub fn check(&self, prefix: &str) -> StaffResult<UserPatch> {
        let field = |name: &str| format!("{prefix}.{name}");
        let line = |name: &str, value: &Option<Option<String>>| -> StaffResult<_> {
            value
                .as_ref()
                .map(|v| text::optional(&field(name), v.as_deref().unwrap_or(""), MAX_LINE_CHARS))
                .transpose()
                .map_err(invalid)
        };
        let required = |name: &str, value: &Option<String>| -> StaffResult<_> {
            value
                .as_deref()
                .map(|v| text::required(&field(name), v, MAX_LINE_CHARS))
                .transpose()
                .map_err(invalid)
        };
        let email = match &self.email {
            None => None,
            Some(value) => Some(
                text::email(&field("email"), value)
                    .map_err(invalid)?
                    .ok_or_else(|| invalid(format!("{} must not be empty", field("email"))))?,
            ),
        };
        let role = match &self.role {
            None => None,
            Some(role) => Some(
                role.trim()
                    .parse::<Role>()
                    .map_err(|e| invalid(format!("{}: {e}", field("role"))))?
                    .as_str()
                    .to_string(),
            ),
        };
        let medical_specialties = match &self.medical_specialties {
            None => None,
            Some(list) if list.len() > MAX_SPECIALTIES => {
                return Err(invalid(format!(
                    "{} holds at most {MAX_SPECIALTIES} entries, got {}",
                    field("medicalSpecialties"),
                    list.len()
                )));
            }
            Some(list) => Some(
                list.iter()
                    .map(|s| text::required(&field("medicalSpecialties"), s, MAX_LINE_CHARS))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(invalid)?,
            ),
        };
        if let Some(Some(age)) = self.minimum_treatment_age
            && !(0..=MAX_TREATMENT_AGE).contains(&age)
        {
            return Err(invalid(format!(
                "{} must be from 0 to {MAX_TREATMENT_AGE} years, got {age}",
                field("minimumTreatmentAge")
            )));
        }
        let access_groups = self
            .access_group_ids
            .as_ref()
            .map(|ids| text::id_list(&field("accessGroupIds"), ids, MAX_ACCESS_GROUPS_PER_USER))
            .transpose()
            .map_err(invalid)?;
        // Past the contract's limits, metadata is refused as the practice's rule, once the
        // rest of the input has been found sound.
        if let Some(pairs) = &self.metadata {
            text::metadata_list(&field("metadata"), pairs).map_err(invalid)?;
        }
        let refusal = self
            .metadata
            .as_deref()
            .and_then(domain::metadata_list_refusal);
        let services_provided = self
            .services_provided
            .as_ref()
            .map(|ids| text::id_list(&field("servicesProvided"), ids, MAX_SERVICES_PROVIDED))
            .transpose()
            .map_err(invalid)?;
        let patch = UserPatch {
            services_provided,
            pronouns: line("pronouns", &self.pronouns)?,
            metadata: self.metadata.clone(),
            access_groups,
            email,
            title: line("title", &self.title)?,
            first_name: required("firstName", &self.first_name)?,
            last_name: required("lastName", &self.last_name)?,
            role,
            is_doctor: self.is_doctor,
            gender: line("gender", &self.gender)?,
            qualifications: line("qualifications", &self.qualifications)?,
            registration: line("registration", &self.registration)?,
            medical_specialties,
            position_title: line("positionTitle", &self.position_title)?,
            minimum_treatment_age: self.minimum_treatment_age,
        };
        match refusal {
            Some(refusal) => Err(StaffError::Refused(refusal)),
            None => Ok(patch),
        }
    }
}

/// A staff user just made or reset, with the one-time token that sets their password.
#[derive(Debug)]
pub struct WithLink {
    pub user: User,
    /// The set-password token, shown this once.
    pub set_password_token: String,
}

fn link_expiry(ttl: Duration) -> i64 {
    now_ms().saturating_add(i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX))
}

/// Adds a staff user without a password, as `practice`'s author, and returns the one-time
/// token that sets it. `covers` says whether the caller may grant a role.
pub async fn create_staff(
    practice: PracticeStore<'_>,
    input: &StaffInput,
    covers: &(dyn Fn(&str) -> bool + Sync),
) -> StaffResult<WithLink> {
    let patch = input.check("input")?;
    let (Some(email), Some(first_name), Some(last_name), Some(role)) = (
        patch.email.as_deref(),
        patch.first_name.as_deref(),
        patch.last_name.as_deref(),
        patch.role.as_deref(),
    ) else {
        return Err(invalid(
            "input needs email, firstName, lastName and role".into(),
        ));
    };
    if !covers(role) {
        return Err(StaffError::Refused(Refusal::RoleAboveCaller(role.into())));
    }
    let mut profile = Profile {
        gender: patch.gender.clone().flatten(),
        qualifications: patch.qualifications.clone().flatten(),
        registration: patch.registration.clone().flatten(),
        medical_specialties: None,
        position_title: patch.position_title.clone().flatten(),
        minimum_treatment_age: patch.minimum_treatment_age.flatten(),
        pronouns: patch.pronouns.clone().flatten(),
    };
    profile.set_specialties(patch.medical_specialties.as_deref().unwrap_or_default());
    let made = secret::new_secret(practice.practice_id());
    let user = practice
        .create_user(
            NewUser {
                email,
                password_hash: None,
                title: patch.title.clone().flatten().as_deref(),
                first_name,
                last_name,
                role,
                is_doctor: patch.is_doctor.unwrap_or(false),
                profile,
                access_groups: patch.access_groups.as_deref().unwrap_or_default(),
                metadata: patch.metadata.as_deref().unwrap_or_default(),
                services: patch.services_provided.as_deref().unwrap_or_default(),
            },
            Some(NewLink {
                secret_hash: &made.hash,
                expires_at: link_expiry(SET_PASSWORD_TTL),
            }),
        )
        .await??;
    Ok(WithLink {
        user,
        set_password_token: made.secret,
    })
}

/// Resets a staff user's password: the old one stops working, their sessions end, and the
/// returned one-time token sets a new one.
pub async fn reset_password(
    practice: PracticeStore<'_>,
    id: &str,
    covers: &(dyn Fn(&str) -> bool + Sync),
    revoke_api_tokens: bool,
) -> StaffResult<WithLink> {
    let made = secret::new_secret(practice.practice_id());
    let link = NewLink {
        secret_hash: &made.hash,
        expires_at: link_expiry(SET_PASSWORD_TTL),
    };
    let user = practice
        .reset_password(id, link, covers, revoke_api_tokens)
        .await??;
    Ok(WithLink {
        user,
        set_password_token: made.secret,
    })
}

/// Hashes a new password off the runtime's threads, after checking its length.
async fn hash_new(password: &str) -> StaffResult<String> {
    password::check_new_password(password).map_err(invalid)?;
    let owned = password.to_string();
    let _permit = super::HASHING
        .acquire()
        .await
        .map_err(|e| StaffError::Internal(e.to_string()))?;
    tokio::task::spawn_blocking(move || password::hash_password(&owned))
        .await
        .map_err(|e| StaffError::Internal(e.to_string()))?
        .map_err(StaffError::Internal)
}

/// Checks a password against a hash off the runtime's threads.
async fn verify(password: &str, hash: String) -> StaffResult<bool> {
    let owned = password.to_string();
    let _permit = super::HASHING
        .acquire()
        .await
        .map_err(|e| StaffError::Internal(e.to_string()))?;
    tokio::task::spawn_blocking(move || password::verify_password(&owned, &hash))
        .await
        .map_err(|e| StaffError::Internal(e.to_string()))
}

/// `practice` as `actor` writes to it through `operation`.
fn as_author<'a>(
    practice: PracticeStore<'a>,
    actor: &'a Actor,
    operation: &'a str,
) -> PracticeStore<'a> {
    practice.by(Author {
        actor,
        operation: Some(operation),
        key: None,
    })
}

/// The live link of `purpose` behind a one-time token, with its practice.
async fn live_link<'s>(
    store: &'s Store,
    token: &'s str,
    purpose: LinkPurpose,
) -> StaffResult<(PracticeStore<'s>, crate::store::users::Link)> {
    let token = token.trim();
    let practice_id = secret::practice_of(token).ok_or(StaffError::BadLink)?;
    let practice = store.practice(practice_id);
    let link = practice
        .find_link(&secret::hash_secret(token))
        .await?
        .filter(|link| link.is_live(purpose, now_ms()))
        .ok_or(StaffError::BadLink)?;
    Ok((practice, link))
}

/// Opens a session for `user` in `practice` (what signIn hands out), as the user.
async fn open_session(
    practice: PracticeStore<'_>,
    user: User,
    ttl: Duration,
) -> StaffResult<SignedIn> {
    let actor = super::user_actor(&user);
    let expires_at = link_expiry(ttl);
    let made = secret::new_secret(practice.practice_id());
    let store = as_author(practice, &actor, "signIn");
    store
        .create_token(NewToken {
            kind: TokenKind::User,
            name: &format!("sign-in of {}", user.email),
            secret_hash: &made.hash,
            permissions: &[],
            user_id: Some(&user.id),
            expires_at: Some(expires_at),
            made_with: None,
        })
        .await??;
    if let Err(error) = store.signed_in(&user.id, now_ms()).await {
        tracing::warn!(%error, "could not record a sign-in's time");
    }
    Ok(SignedIn {
        secret: made.secret,
        expires_at,
        user,
    })
}

/// `setPassword`: sets the password of the user of a set-password token (used up), and signs
/// them in for `ttl`. Every earlier session of theirs ends.
pub async fn set_password(
    store: &Store,
    token: &str,
    new_password: &str,
    ttl: Duration,
) -> StaffResult<SignedIn> {
    let (practice, link) = live_link(store, token, LinkPurpose::SetPassword).await?;
    let user_id = link.user_id.ok_or(StaffError::BadLink)?;
    let hash = hash_new(new_password).await?;
    let user = practice
        .find_user(&user_id)
        .await?
        .ok_or(StaffError::BadLink)?;
    let actor = super::user_actor(&user);
    let user = as_author(practice, &actor, "setPassword")
        .set_password_by_link(&link.id, &user_id, &hash)
        .await??;
    open_session(practice, user, ttl).await
}

/// `createFirstAdmin`: with the one-time token `serve` printed, makes the practice's first
/// admin with a password, and signs them in for `ttl`. Refused once the practice has staff.
pub async fn create_first_admin(
    store: &Store,
    token: &str,
    input: &StaffInput,
    new_password: &str,
    ttl: Duration,
) -> StaffResult<SignedIn> {
    let (practice, link) = live_link(store, token, LinkPurpose::FirstAdmin).await?;
    let patch = input.check("input")?;
    let (Some(email), Some(first_name), Some(last_name)) = (
        patch.email.as_deref(),
        patch.first_name.as_deref(),
        patch.last_name.as_deref(),
    ) else {
        return Err(invalid(
            "createFirstAdmin needs email, firstName and lastName".into(),
        ));
    };
    let hash = hash_new(new_password).await?;
    let operator = Actor::operator();
    let user = as_author(practice, &operator, "createFirstAdmin")
        .create_first_admin(
            &link.id,
            NewUser {
                email,
                password_hash: Some(&hash),
                title: None,
                first_name,
                last_name,
                role: Role::Admin.as_str(),
                is_doctor: false,
                profile: Profile::default(),
                access_groups: &[],
                metadata: &[],
                services: &[],
            },
        )
        .await??;
    open_session(practice, user, ttl).await
}

/// Makes the one-time link that creates a practice's first admin, when it has no staff;
/// returns its token (earlier such links end), or None when the practice has staff.
pub async fn first_admin_link(practice: PracticeStore<'_>) -> StaffResult<Option<String>> {
    if practice.count_users().await? > 0 {
        return Ok(None);
    }
    let made = secret::new_secret(practice.practice_id());
    practice
        .create_first_admin_link(NewLink {
            secret_hash: &made.hash,
            expires_at: link_expiry(FIRST_ADMIN_TTL),
        })
        .await?;
    Ok(Some(made.secret))
}

/// `changePassword`: the signed-in user `user_id` changes their own password, proving the
/// current one; every other session of theirs ends, `session` (the caller's) goes on.
///
/// Each try of the current password is counted as a sign-in to the user's email from
/// `address` is ([`super::throttle`]): a session cannot guess the password faster than
/// signIn can. The change is made only if nothing cut the session off meanwhile (see
/// [`PracticeStore::change_password`]).
pub async fn change_password(
    practice: PracticeStore<'_>,
    user_id: &str,
    session: &str,
    current: &str,
    new_password: &str,
    address: Option<std::net::IpAddr>,
) -> StaffResult<User> {
    let not_found = || StaffError::Refused(Refusal::NotFound(Record::User, user_id.into()));
    let (stored, email) = practice
        .password_hash(user_id)
        .await?
        .ok_or_else(not_found)?;
    let attempt = super::throttle::admit(practice.store(), &email, address, now_ms())
        .await?
        .map_err(StaffError::Throttled)?;
    if current.chars().count() > password::MAX_PASSWORD_CHARS
        || !verify(current, stored.clone()).await?
    {
        return Err(StaffError::WrongPassword);
    }
    if let Err(error) = super::throttle::succeeded(practice.store(), &attempt).await {
        tracing::warn!(%error, "could not clear a right password's count");
    }
    let hash = hash_new(new_password).await?;
    match practice
        .change_password(user_id, &stored, &hash, session)
        .await?
    {
        Ok(user) => Ok(user),
        Err(PasswordKept::NoUser) => Err(not_found()),
        Err(PasswordKept::Disabled) => Err(StaffError::Refused(Refusal::UserDisabled)),
        Err(PasswordKept::SessionEnded) => Err(StaffError::SessionEnded),
        Err(PasswordKept::Changed) => Err(StaffError::WrongPassword),
    }
}

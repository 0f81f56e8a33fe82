//! Staff users of a practice, their sessions (sign-in tokens), and the one-time links that set
//! a password or make a practice's first admin.

use std::collections::HashMap;

use sqlx::{Any, FromRow, Transaction};

use super::audit::{Actor, ActorKind, Author, Event};
use super::tokens::{TOKEN_COLUMNS, Token, works_at};
use super::{Change, Keyed, Page, PageRequest, PracticeStore, Store, StoreResult, new_id, now_ms};
use crate::domain::limits::MAX_SESSIONS_LISTED;
use crate::domain::{Record, Refusal};

const USER_COLUMNS: &str = "id, email, title, first_name, last_name, role, is_doctor, \
                            created_at, updated_at, disabled_at, last_sign_in_at, gender, \
                            qualifications, registration, medical_specialties, position_title, \
                            minimum_treatment_age, pronouns, access_groups, metadata, \
                            services_provided";

/// A staff user. The password hash is not part of it: only sign-in reads that.
#[derive(Clone, Debug, FromRow, PartialEq, Eq)]
pub struct User {
    pub id: String,
    pub email: String,
    pub title: Option<String>,
    pub first_name: String,
    pub last_name: String,
    pub role: String,
    pub is_doctor: i64,
    pub created_at: i64,
    pub updated_at: i64,
    /// When the user was disabled; None while they may sign in.
    pub disabled_at: Option<i64>,
    pub last_sign_in_at: Option<i64>,
    #[sqlx(flatten)]
    pub profile: Profile,
    /// The access groups the user belongs to (a JSON list of ids): a user who is not an admin
    /// sees only the patients of these groups, and those in none.
    pub access_groups: String,
    /// A JSON array of [key, value] pairs: see [`User::metadata`].
    pub metadata: String,
    /// A JSON array of the ids of the appointment types the user provides: see
    /// [`User::service_ids`].
    pub services_provided: String,
}

/// What the practice records of a staff user beyond their name and role.
#[derive(Clone, Debug, Default, FromRow, PartialEq, Eq)]
pub struct Profile {
    pub gender: Option<String>,
    pub qualifications: Option<String>,
    pub registration: Option<String>,
    /// A JSON array of strings, as stored; see [`Profile::specialties`].
    pub medical_specialties: Option<String>,
    pub position_title: Option<String>,
    pub minimum_treatment_age: Option<i64>,
    pub pronouns: Option<String>,
}

impl Profile {
    /// The user's medical specialties.
    pub fn specialties(&self) -> Vec<String> {
        self.medical_specialties
            .as_deref()
            .and_then(|json| serde_json::from_str(json).ok())
            .unwrap_or_default()
    }

    /// Stores a list of specialties; an empty list is none.
    pub fn set_specialties(&mut self, list: &[String]) {
        self.medical_specialties =
            (!list.is_empty()).then(|| serde_json::Value::from(list.to_vec()).to_string());
    }
}

impl User {
    /// "First Last".
    pub fn full_name(&self) -> String {
        format!("{} {}", self.first_name, self.last_name)
    }

    /// True once the user is disabled.
    pub fn is_disabled(&self) -> bool {
        self.disabled_at.is_some()
    }

    /// The user's metadata, as (key, value) pairs in the order they were set.
    pub fn metadata(&self) -> Vec<(String, String)> {
        serde_json::from_str(&self.metadata).unwrap_or_default()
    }

    /// The ids of the appointment types the user provides.
    pub fn service_ids(&self) -> Vec<String> {
        serde_json::from_str(&self.services_provided).unwrap_or_default()
    }

    /// The ids of the access groups the user belongs to.
    pub fn access_group_ids(&self) -> Vec<String> {
        serde_json::from_str(&self.access_groups).unwrap_or_default()
    }
}

/// What it takes to add a staff user. `email` is lower-cased by the store. A user made without
/// a password hash cannot sign in until a set-password link gives them one.
#[derive(Clone, Debug)]
pub struct NewUser<'a> {
    pub email: &'a str,
    pub password_hash: Option<&'a str>,
    pub title: Option<&'a str>,
    pub first_name: &'a str,
    pub last_name: &'a str,
    pub role: &'a str,
    pub is_doctor: bool,
    pub profile: Profile,
    /// The ids of the access groups the user belongs to; each must exist.
    pub access_groups: &'a [String],
    pub metadata: &'a [(String, String)],
    /// The ids of the appointment types the user provides; each must exist.
    pub services: &'a [String],
}

/// A change to a staff user: each field set is written, the others kept. `title` and the
/// profile's fields take `Some(None)` to clear them.
#[derive(Clone, Debug, Default)]
pub struct UserPatch {
    pub email: Option<String>,
    pub title: Option<Option<String>>,
    pub first_name: Option<String>,
    pub last_name: Option<String>,
    pub role: Option<String>,
    pub is_doctor: Option<bool>,
    pub gender: Option<Option<String>>,
    pub qualifications: Option<Option<String>>,
    pub registration: Option<Option<String>>,
    pub medical_specialties: Option<Vec<String>>,
    pub position_title: Option<Option<String>>,
    pub minimum_treatment_age: Option<Option<i64>>,
    /// The user's access groups become exactly these; each must exist.
    pub access_groups: Option<Vec<String>>,
    pub pronouns: Option<Option<String>>,
    /// The user's metadata becomes exactly these pairs.
    pub metadata: Option<Vec<(String, String)>>,
    /// The appointment types the user provides become exactly these; each must exist.
    pub services_provided: Option<Vec<String>>,
}

impl UserPatch {
    fn apply(&self, user: &mut User) {
        fn set<T: Clone>(field: &mut T, value: &Option<T>) {
            if let Some(value) = value {
                *field = value.clone();
            }
        }
        if let Some(email) = &self.email {
            user.email = email.to_lowercase();
        }
        set(&mut user.title, &self.title);
        set(&mut user.first_name, &self.first_name);
        set(&mut user.last_name, &self.last_name);
        set(&mut user.role, &self.role);
        if let Some(is_doctor) = self.is_doctor {
            user.is_doctor = i64::from(is_doctor);
        }
        let profile = &mut user.profile;
        set(&mut profile.gender, &self.gender);
        set(&mut profile.qualifications, &self.qualifications);
        set(&mut profile.registration, &self.registration);
        set(&mut profile.position_title, &self.position_title);
        set(
            &mut profile.minimum_treatment_age,
            &self.minimum_treatment_age,
        );
        if let Some(list) = &self.medical_specialties {
            profile.set_specialties(list);
        }
        if let Some(groups) = &self.access_groups {
            user.access_groups = serde_json::Value::from(groups.clone()).to_string();
        }
        set(&mut user.profile.pronouns, &self.pronouns);
        if let Some(pairs) = &self.metadata {
            user.metadata = encode_pairs(pairs);
        }
        if let Some(ids) = &self.services_provided {
            user.services_provided = serde_json::Value::from(ids.clone()).to_string();
        }
    }
}

/// Metadata as stored: a JSON array of [key, value] pairs.
pub fn encode_pairs(pairs: &[(String, String)]) -> String {
    serde_json::Value::from(
        pairs
            .iter()
            .map(|(k, v)| serde_json::json!([k, v]))
            .collect::<Vec<_>>(),
    )
    .to_string()
}

/// Whether the caller may act on a staff user of this role (and grant it): see
/// `auth::staff`, which decides by the caller's permissions.
pub type Covers<'a> = &'a (dyn Fn(&str) -> bool + Sync);

/// Whose sessions a caller may end.
#[derive(Clone, Copy)]
pub enum Whose<'a> {
    /// Only this user's, the caller's own.
    Own(&'a str),
    /// The caller's own (`caller`, a staff user's id, none for an API token), and those of
    /// the users whose role `covers` covers.
    Covered {
        caller: Option<&'a str>,
        covers: Covers<'a>,
    },
}

/// What signIn needs to check a password: the user, its practice and its hash.
#[derive(Clone, Debug)]
pub struct Credentials {
    pub practice_id: String,
    pub user: User,
    pub password_hash: String,
}

#[derive(FromRow)]
struct CredentialsRow {
    practice_id: String,
    password_hash: String,
    #[sqlx(flatten)]
    user: User,
}

/// What a one-time link is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkPurpose {
    /// Sets the password of the link's user (after createUser or resetUserPassword).
    SetPassword,
    /// Makes the practice's first admin.
    FirstAdmin,
}

impl LinkPurpose {
    fn as_str(self) -> &'static str {
        match self {
            LinkPurpose::SetPassword => "set_password",
            LinkPurpose::FirstAdmin => "first_admin",
        }
    }
}

/// A new one-time link: the hash of its secret and when it stops working.
#[derive(Clone, Copy, Debug)]
pub struct NewLink<'a> {
    pub secret_hash: &'a str,
    pub expires_at: i64,
}

/// A one-time link as stored.
#[derive(Clone, Debug, FromRow)]
pub struct Link {
    pub id: String,
    pub purpose: String,
    pub user_id: Option<String>,
    pub expires_at: i64,
    pub used_at: Option<i64>,
}

impl Link {
    /// True while the link may be used for `purpose`: not used, not expired.
    pub fn is_live(&self, purpose: LinkPurpose, now: i64) -> bool {
        self.purpose == purpose.as_str() && self.used_at.is_none() && self.expires_at > now
    }
}

impl Store {
    /// Finds a staff user by email, in any practice: signIn takes no practice.
    pub async fn find_credentials(&self, email: &str) -> StoreResult<Option<Credentials>> {
        let sql = format!(
            "SELECT practice_id, password_hash, {USER_COLUMNS} FROM users WHERE email = $1"
        );
        let row: Option<CredentialsRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(email.to_lowercase())
            .fetch_optional(&self.reader)
            .await?;
        Ok(row.map(|r| Credentials {
            practice_id: r.practice_id,
            user: r.user,
            password_hash: r.password_hash,
        }))
    }

    /// Deletes the one-time links that were used or expired before `before`, in every
    /// practice; returns how many.
    pub async fn forget_ended_links(&self, before: i64) -> StoreResult<u64> {
        let done = sqlx::query("DELETE FROM user_links WHERE expires_at < $1 OR used_at < $1")
            .bind(before)
            .execute(&self.write)
            .await?;
        Ok(done.rows_affected())
    }
}

impl Keyed for User {
    fn key(&self) -> &str {
        &self.id
    }
}

/// Why a changePassword changed nothing, found in its own transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PasswordKept {
    NoUser,
    /// The user was disabled meanwhile.
    Disabled,
    /// The session changing it ended meanwhile (signed out, revoked, expired).
    SessionEnded,
    /// The password was changed or reset meanwhile: the one checked is no longer it.
    Changed,
}

impl PracticeStore<'_> {
    /// Adds a staff user, with a set-password link when `link` is given. Refused if the email
    /// is taken: a staff email is unique across practices.
    pub async fn create_user(
        &self,
        new: NewUser<'_>,
        link: Option<NewLink<'_>>,
    ) -> StoreResult<Change<User>> {
        let mut tx = self.begin_write().await?;
        let user = match self.insert_user(&mut tx, &new).await? {
            Ok(user) => user,
            Err(refusal) => return Ok(Err(refusal.into())),
        };
        if let Some(link) = link {
            self.insert_link(&mut tx, LinkPurpose::SetPassword, Some(&user.id), link)
                .await?;
        }
        self.commit(tx, Event::of("create", "user", &user.id))
            .await?;
        Ok(Ok(user))
    }

    /// Makes the practice's first admin through the one-time link `link_id`: refused when the
    /// practice has staff already, and the link is used up either way.
    pub async fn create_first_admin(
        &self,
        link_id: &str,
        new: NewUser<'_>,
    ) -> StoreResult<Change<User>> {
        let mut tx = self.begin_write().await?;
        self.lock_practice(&mut tx).await?;
        if !self
            .use_link(&mut tx, link_id, LinkPurpose::FirstAdmin)
            .await?
        {
            return Ok(Err(Refusal::NotFound(Record::Link, link_id.into()).into()));
        }
        let (count,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM users WHERE practice_id = $1")
            .bind(self.practice_id)
            .fetch_one(&mut *tx)
            .await?;
        if count > 0 {
            return Ok(Err(Refusal::PracticeHasStaff.into()));
        }
        let user = match self.insert_user(&mut tx, &new).await? {
            Ok(user) => user,
            Err(refusal) => return Ok(Err(refusal.into())),
        };
        // Whoever holds the link becomes the admin: the log names them as the one who made
        // the account (a user, as the contract's actors are), not the operator who printed
        // the link.
        let admin = Actor {
            kind: ActorKind::User,
            id: user.id.clone(),
            name: Some(user.full_name()),
        };
        let author = self.author.map(|author| Author {
            actor: &admin,
            ..author
        });
        PracticeStore { author, ..*self }
            .commit(tx, Event::of("create", "user", &user.id))
            .await?;
        Ok(Ok(user))
    }

    async fn insert_user(
        &self,
        tx: &mut Transaction<'_, Any>,
        new: &NewUser<'_>,
    ) -> StoreResult<Result<User, Refusal>> {
        let now = now_ms();
        let user = User {
            id: new_id(),
            email: new.email.to_lowercase(),
            title: new.title.map(str::to_string),
            first_name: new.first_name.to_string(),
            last_name: new.last_name.to_string(),
            role: new.role.to_string(),
            is_doctor: i64::from(new.is_doctor),
            created_at: now,
            updated_at: now,
            disabled_at: None,
            last_sign_in_at: None,
            profile: new.profile.clone(),
            access_groups: serde_json::Value::from(new.access_groups.to_vec()).to_string(),
            metadata: encode_pairs(new.metadata),
            services_provided: serde_json::Value::from(new.services.to_vec()).to_string(),
        };
        if let Some(unknown) = self.unknown_access_group(tx, new.access_groups).await? {
            return Ok(Err(Refusal::NotFound(Record::AccessGroup, unknown)));
        }
        if let Some(refusal) = self.check_services(tx, new.services).await? {
            return Ok(Err(refusal));
        }
        let inserted = sqlx::query(
            "INSERT INTO users (practice_id, id, email, password_hash, title, first_name, \
             last_name, role, is_doctor, created_at, updated_at, gender, qualifications, \
             registration, medical_specialties, position_title, minimum_treatment_age, \
             access_groups, pronouns, metadata, services_provided) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10, $11, $12, $13, $14, $15, $16, \
             $17, $18, $19, $20)",
        )
        .bind(self.practice_id)
        .bind(&user.id)
        .bind(&user.email)
        // No hash yet: nothing verifies against an empty string.
        .bind(new.password_hash.unwrap_or(""))
        .bind(&user.title)
        .bind(&user.first_name)
        .bind(&user.last_name)
        .bind(&user.role)
        .bind(user.is_doctor)
        .bind(now)
        .bind(&user.profile.gender)
        .bind(&user.profile.qualifications)
        .bind(&user.profile.registration)
        .bind(&user.profile.medical_specialties)
        .bind(&user.profile.position_title)
        .bind(user.profile.minimum_treatment_age)
        .bind(&user.access_groups)
        .bind(&user.profile.pronouns)
        .bind(&user.metadata)
        .bind(&user.services_provided)
        .execute(&mut **tx)
        .await;
        // A taken email ends the caller's transaction, which is dropped unfinished.
        match inserted {
            Ok(_) => Ok(Ok(user)),
            Err(e) if super::StoreError::is_unique_violation(&e) => {
                Ok(Err(Refusal::Taken(Record::User, user.email)))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The staff user with this id, if the practice has one.
    pub async fn find_user(&self, id: &str) -> StoreResult<Option<User>> {
        let sql = format!("SELECT {USER_COLUMNS} FROM users WHERE practice_id = $1 AND id = $2");
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(self.practice_id)
            .bind(id)
            .fetch_optional(self.read())
            .await?)
    }

    /// The staff user with this email (any case), if the practice has one.
    pub async fn find_user_by_email(&self, email: &str) -> StoreResult<Option<User>> {
        let sql = format!("SELECT {USER_COLUMNS} FROM users WHERE practice_id = $1 AND email = $2");
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(self.practice_id)
            .bind(email.trim().to_lowercase())
            .fetch_optional(self.read())
            .await?)
    }

    /// The staff users with these ids, by id.
    pub async fn users_by_ids(&self, ids: &[String]) -> StoreResult<HashMap<String, User>> {
        self.by_ids("users", USER_COLUMNS, ids).await
    }

    /// A page of staff users, by last name then first name, disabled ones included.
    pub async fn list_users(&self, page: PageRequest) -> StoreResult<Page<User>> {
        let sql = format!(
            "SELECT {USER_COLUMNS} FROM users WHERE practice_id = $1 \
             ORDER BY last_name, first_name, id LIMIT $2 OFFSET $3"
        );
        let rows = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(self.practice_id)
            .bind(page.limit())
            .bind(page.offset())
            .fetch_all(self.read())
            .await?;
        Ok(page.finish(rows))
    }

    /// How many staff users the practice has, disabled ones included.
    pub async fn count_users(&self) -> StoreResult<i64> {
        let (count,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM users WHERE practice_id = $1")
            .bind(self.practice_id)
            .fetch_one(self.read())
            .await?;
        Ok(count)
    }

    /// Changes a staff user. Refused when the caller does not cover the user's role, old or
    /// new, or when it would demote the practice's last enabled admin.
    pub async fn update_user(
        &self,
        id: &str,
        patch: &UserPatch,
        covers: Covers<'_>,
    ) -> StoreResult<Change<User>> {
        self.modify_user(id, "update", covers, false, |user| {
            patch.apply(user);
            if !covers(&user.role) {
                return Err(Refusal::RoleAboveCaller(user.role.clone()));
            }
            Ok(Ends::Nothing)
        })
        .await
    }

    /// Disables a staff user: every session of theirs and every set-password link ends in the
    /// same transaction, and signIn refuses them; with `revoke_api_tokens`, so do the API
    /// tokens they made (see [`Token::created_by_user_id`]). `caller` is the staff user
    /// asking, if any: nobody disables their own account. Disabling twice keeps the first
    /// time.
    pub async fn disable_user(
        &self,
        id: &str,
        caller: Option<&str>,
        covers: Covers<'_>,
        revoke_api_tokens: bool,
    ) -> StoreResult<Change<User>> {
        if caller == Some(id) {
            return Ok(Err(Refusal::OwnAccount.into()));
        }
        self.modify_user(id, "disable", covers, revoke_api_tokens, |user| {
            user.disabled_at = user.disabled_at.or(Some(now_ms()));
            Ok(Ends::Everything)
        })
        .await
    }

    /// Enables a disabled staff user; they sign in again with their password.
    pub async fn enable_user(&self, id: &str, covers: Covers<'_>) -> StoreResult<Change<User>> {
        self.modify_user(id, "enable", covers, false, |user| {
            user.disabled_at = None;
            Ok(Ends::Nothing)
        })
        .await
    }

    /// Resets a staff user's password: the old one stops working, every session ends (and
    /// with `revoke_api_tokens` every API token they made), and `link` is the one way to set
    /// a new one (earlier links end too).
    pub async fn reset_password(
        &self,
        id: &str,
        link: NewLink<'_>,
        covers: Covers<'_>,
        revoke_api_tokens: bool,
    ) -> StoreResult<Change<User>> {
        self.modify_user(id, "reset_password", covers, revoke_api_tokens, |_| {
            Ok(Ends::Password(Some(link)))
        })
        .await
    }

    /// Sets the password of the user of the set-password link `link_id`, which is used up:
    /// every session of theirs ends. Refused when the link is used or expired (NotFound) or
    /// the user is disabled.
    pub async fn set_password_by_link(
        &self,
        link_id: &str,
        user_id: &str,
        password_hash: &str,
    ) -> StoreResult<Change<User>> {
        let mut tx = self.begin_write().await?;
        // The user's row first, then the link's, as a disable or a reset takes them (the
        // user, then their links): on PostgreSQL the two wait for each other rather than
        // deadlock.
        let user = self.user_held(&mut tx, user_id).await?;
        if !self
            .use_link(&mut tx, link_id, LinkPurpose::SetPassword)
            .await?
        {
            return Ok(Err(Refusal::NotFound(Record::Link, link_id.into()).into()));
        }
        let Some(user) = user else {
            return Ok(Err(Refusal::NotFound(Record::User, user_id.into()).into()));
        };
        if user.is_disabled() {
            return Ok(Err(Refusal::UserDisabled.into()));
        }
        self.write_password(&mut tx, user_id, password_hash, None)
            .await?;
        self.end_sessions(&mut tx, user_id, None).await?;
        self.commit(tx, Event::of("set_password", "user", user_id))
            .await?;
        Ok(Ok(user))
    }

    /// Changes a user's own password from `checked` (the hash the current password was
    /// checked against) to `password_hash`; every session of theirs but `keep` ends. Nothing
    /// changes if, while the password was checked and the new one hashed, the password was
    /// changed or reset, the session `keep` ended (signed out, revoked) or the user was
    /// disabled: a cut-off made meanwhile holds.
    pub async fn change_password(
        &self,
        user_id: &str,
        checked: &str,
        password_hash: &str,
        keep: &str,
    ) -> StoreResult<Result<User, PasswordKept>> {
        let mut tx = self.begin_write().await?;
        let Some(user) = self.user_in(&mut tx, user_id).await? else {
            return Ok(Err(PasswordKept::NoUser));
        };
        if user.is_disabled() {
            return Ok(Err(PasswordKept::Disabled));
        }
        // The user's row first, as a disable or a reset takes it (then the sessions'), so that
        // two of them on PostgreSQL wait for each other rather than deadlock.
        if !self
            .write_password(&mut tx, user_id, password_hash, Some(checked))
            .await?
        {
            return Ok(Err(PasswordKept::Changed));
        }
        // Then the session's row, held until the commit (PostgreSQL): one ended meanwhile (a
        // disable or a revoke that went first) is seen ended, and the change is rolled back.
        let session = format!(
            "SELECT id FROM tokens WHERE practice_id = $1 AND id = $2 AND user_id = $3 \
             AND {}{}",
            works_at("$4"),
            self.store.engine.for_update()
        );
        let live: Option<(String,)> = sqlx::query_as(sqlx::AssertSqlSafe(session))
            .bind(self.practice_id)
            .bind(keep)
            .bind(user_id)
            .bind(now_ms())
            .fetch_optional(&mut *tx)
            .await?;
        if live.is_none() {
            return Ok(Err(PasswordKept::SessionEnded));
        }
        self.end_sessions(&mut tx, user_id, Some(keep)).await?;
        self.commit(tx, Event::of("change_password", "user", user_id))
            .await?;
        Ok(Ok(user))
    }

    /// The hash of the password a user has now and their email, for changePassword to check
    /// (and throttle, as sign-ins to that email are).
    pub async fn password_hash(&self, user_id: &str) -> StoreResult<Option<(String, String)>> {
        Ok(sqlx::query_as(
            "SELECT password_hash, email FROM users WHERE practice_id = $1 AND id = $2",
        )
        .bind(self.practice_id)
        .bind(user_id)
        .fetch_optional(self.read())
        .await?)
    }

    /// Records that a user signed in at `at`. Not a change to what anyone may do: PostgreSQL's
    /// triggers leave the token caches alone for this column (migration 0014).
    pub async fn signed_in(&self, user_id: &str, at: i64) -> StoreResult<()> {
        sqlx::query("UPDATE users SET last_sign_in_at = $3 WHERE practice_id = $1 AND id = $2")
            .bind(self.practice_id)
            .bind(user_id)
            .bind(at)
            .execute(self.write())
            .await?;
        Ok(())
    }

    /// Makes a one-time link to create the practice's first admin; earlier such links end.
    pub async fn create_first_admin_link(&self, link: NewLink<'_>) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "UPDATE user_links SET used_at = $2 \
             WHERE practice_id = $1 AND purpose = 'first_admin' AND used_at IS NULL",
        )
        .bind(self.practice_id)
        .bind(now_ms())
        .execute(&mut *tx)
        .await?;
        self.insert_link(&mut tx, LinkPurpose::FirstAdmin, None, link)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The one-time link whose secret hashes to `secret_hash`, used and expired ones included:
    /// the caller decides.
    pub async fn find_link(&self, secret_hash: &str) -> StoreResult<Option<Link>> {
        Ok(sqlx::query_as(
            "SELECT id, purpose, user_id, expires_at, used_at FROM user_links \
             WHERE practice_id = $1 AND secret_hash = $2",
        )
        .bind(self.practice_id)
        .bind(secret_hash)
        .fetch_optional(self.read())
        .await?)
    }

    /// The live sessions (sign-in tokens neither signed out nor expired) of one user, or of
    /// every user, the newest first.
    pub async fn list_sessions(&self, user_id: Option<&str>) -> StoreResult<Vec<Token>> {
        let sql = format!(
            "SELECT {TOKEN_COLUMNS} FROM tokens WHERE practice_id = $1 AND kind = 'user' \
             AND {} AND ($3 IS NULL OR user_id = $3) \
             ORDER BY created_at DESC, id DESC LIMIT {MAX_SESSIONS_LISTED}",
            works_at("$2")
        );
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(self.practice_id)
            .bind(now_ms())
            .bind(user_id)
            .fetch_all(self.read())
            .await?)
    }

    /// Ends a session, of `owner` only when given. Returns it, or None when there is no such
    /// session (of that owner).
    pub async fn revoke_session(
        &self,
        id: &str,
        whose: Whose<'_>,
    ) -> StoreResult<Change<Option<Token>>> {
        let mut tx = self.begin_write().await?;
        let owner = match whose {
            Whose::Own(user) => Some(user),
            Whose::Covered { caller, covers } => {
                // Another's session ends as their account would be disabled: only by a caller
                // whose permissions cover their role.
                let held: Option<(String, String)> = sqlx::query_as(
                    "SELECT u.id, u.role FROM tokens t JOIN users u \
                     ON u.practice_id = t.practice_id AND u.id = t.user_id \
                     WHERE t.practice_id = $1 AND t.id = $2 AND t.kind = 'user'",
                )
                .bind(self.practice_id)
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?;
                if let Some((user, role)) = held
                    && caller != Some(user.as_str())
                    && !covers(&role)
                {
                    return Ok(Err(Refusal::RoleAboveCaller(role).into()));
                }
                None
            }
        };
        let sql = format!(
            "UPDATE tokens SET revoked_at = COALESCE(revoked_at, $3) \
             WHERE practice_id = $1 AND id = $2 AND kind = 'user' \
             AND ($4 IS NULL OR user_id = $4) RETURNING {TOKEN_COLUMNS}"
        );
        let token: Option<Token> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(self.practice_id)
            .bind(id)
            .bind(now_ms())
            .bind(owner)
            .fetch_optional(&mut *tx)
            .await?;
        if let Some(token) = &token {
            self.commit(tx, Event::of("revoke_session", "token", &token.id))
                .await?;
        }
        Ok(Ok(token))
    }

    /// Loads a user in `tx` after taking the practice's row (so that counts of admins are
    /// made one writer at a time), lets `change` decide, checks that the practice keeps an
    /// enabled admin, writes the user and ends what `change` says.
    async fn modify_user<'l>(
        &self,
        id: &str,
        action: &'static str,
        covers: Covers<'_>,
        revoke_api_tokens: bool,
        change: impl FnOnce(&mut User) -> Result<Ends<'l>, Refusal>,
    ) -> StoreResult<Change<User>> {
        let mut tx = self.begin_write().await?;
        self.lock_practice(&mut tx).await?;
        let Some(mut user) = self.user_in(&mut tx, id).await? else {
            return Ok(Err(Refusal::NotFound(Record::User, id.into()).into()));
        };
        if !covers(&user.role) {
            return Ok(Err(Refusal::RoleAboveCaller(user.role).into()));
        }
        let was_admin = user.role == "admin" && !user.is_disabled();
        let before = user.clone();
        let ends = match change(&mut user) {
            Ok(ends) => ends,
            Err(refusal) => return Ok(Err(refusal.into())),
        };
        let is_admin = user.role == "admin" && !user.is_disabled();
        if let Some(unknown) = self
            .unknown_access_group(&mut tx, &user.access_group_ids())
            .await?
        {
            return Ok(Err(Refusal::NotFound(Record::AccessGroup, unknown).into()));
        }
        if user.services_provided != before.services_provided
            && let Some(refusal) = self.check_services(&mut tx, &user.service_ids()).await?
        {
            return Ok(Err(refusal.into()));
        }
        if was_admin && !is_admin && self.other_admins(&mut tx, id).await? == 0 {
            return Ok(Err(Refusal::LastAdmin.into()));
        }
        if matches!(ends, Ends::Nothing) && user == before {
            // The user as they were (an update that sends back what it read, an enable of an
            // enabled user): nothing is written but the audit row. No instance is told that
            // who may call changed, which would empty every token cache.
            self.commit_unchanged(tx, Event::of(action, "user", id))
                .await?;
            return Ok(Ok(user));
        }
        user.updated_at = now_ms();
        let written = sqlx::query(
            "UPDATE users SET email = $3, title = $4, first_name = $5, last_name = $6, \
             role = $7, is_doctor = $8, updated_at = $9, disabled_at = $10, gender = $11, \
             qualifications = $12, registration = $13, medical_specialties = $14, \
             position_title = $15, minimum_treatment_age = $16, access_groups = $17, \
             pronouns = $18, metadata = $19, services_provided = $20 \
             WHERE practice_id = $1 AND id = $2",
        )
        .bind(self.practice_id)
        .bind(id)
        .bind(&user.email)
        .bind(&user.title)
        .bind(&user.first_name)
        .bind(&user.last_name)
        .bind(&user.role)
        .bind(user.is_doctor)
        .bind(user.updated_at)
        .bind(user.disabled_at)
        .bind(&user.profile.gender)
        .bind(&user.profile.qualifications)
        .bind(&user.profile.registration)
        .bind(&user.profile.medical_specialties)
        .bind(&user.profile.position_title)
        .bind(user.profile.minimum_treatment_age)
        .bind(&user.access_groups)
        .bind(&user.profile.pronouns)
        .bind(&user.metadata)
        .bind(&user.services_provided)
        .execute(&mut *tx)
        .await;
        match written {
            Err(e) if super::StoreError::is_unique_violation(&e) => {
                return Ok(Err(Refusal::Taken(Record::User, user.email).into()));
            }
            other => other?,
        };
        match ends {
            Ends::Nothing => {}
            Ends::Everything => {
                self.end_sessions(&mut tx, id, None).await?;
                self.end_links(&mut tx, id).await?;
            }
            Ends::Password(link) => {
                self.write_password(&mut tx, id, "", None).await?;
                self.end_sessions(&mut tx, id, None).await?;
                self.end_links(&mut tx, id).await?;
                if let Some(link) = link {
                    self.insert_link(&mut tx, LinkPurpose::SetPassword, Some(id), link)
                        .await?;
                }
            }
        }
        let revoked = match revoke_api_tokens {
            false => Vec::new(),
            true => self.revoke_api_tokens_made_by(&mut tx, id).await?,
        };
        let mut events = vec![Event::of(action, "user", id)];
        events.extend(
            revoked
                .iter()
                .map(|token| Event::of("revoke", "token", token)),
        );
        self.commit_all(tx, &events).await?;
        Ok(Ok(user))
    }

    async fn user_in(&self, tx: &mut Transaction<'_, Any>, id: &str) -> StoreResult<Option<User>> {
        let sql = format!("SELECT {USER_COLUMNS} FROM users WHERE practice_id = $1 AND id = $2");
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(self.practice_id)
            .bind(id)
            .fetch_optional(&mut **tx)
            .await?)
    }

    /// Like [`Self::user_in`], holding the user's row until the transaction ends.
    async fn user_held(
        &self,
        tx: &mut Transaction<'_, Any>,
        id: &str,
    ) -> StoreResult<Option<User>> {
        let sql = format!(
            "SELECT {USER_COLUMNS} FROM users WHERE practice_id = $1 AND id = $2{}",
            self.store.engine.for_update()
        );
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(self.practice_id)
            .bind(id)
            .fetch_optional(&mut **tx)
            .await?)
    }

    /// The first of these access group ids the practice does not have.
    async fn unknown_access_group(
        &self,
        tx: &mut Transaction<'_, Any>,
        ids: &[String],
    ) -> StoreResult<Option<String>> {
        self.first_unknown(tx, "access_groups", "", ids).await
    }

    /// Enabled admins of the practice other than `id`.
    async fn other_admins(&self, tx: &mut Transaction<'_, Any>, id: &str) -> StoreResult<i64> {
        let (count,): (i64,) = sqlx::query_as(
            "SELECT COUNT(*) FROM users WHERE practice_id = $1 AND role = 'admin' \
             AND disabled_at IS NULL AND id <> $2",
        )
        .bind(self.practice_id)
        .bind(id)
        .fetch_one(&mut **tx)
        .await?;
        Ok(count)
    }

    /// Writes a user's password hash, in place of `replacing` when given (and then only if
    /// it is still the user's); false when nothing was written.
    async fn write_password(
        &self,
        tx: &mut Transaction<'_, Any>,
        user_id: &str,
        hash: &str,
        replacing: Option<&str>,
    ) -> StoreResult<bool> {
        let written = sqlx::query(
            "UPDATE users SET password_hash = $3, updated_at = $4 \
             WHERE practice_id = $1 AND id = $2 AND ($5 IS NULL OR password_hash = $5)",
        )
        .bind(self.practice_id)
        .bind(user_id)
        .bind(hash)
        .bind(now_ms())
        .bind(replacing)
        .execute(&mut **tx)
        .await?;
        Ok(written.rows_affected() > 0)
    }

    /// Ends every live session of a user but `keep`.
    async fn end_sessions(
        &self,
        tx: &mut Transaction<'_, Any>,
        user_id: &str,
        keep: Option<&str>,
    ) -> StoreResult<()> {
        sqlx::query(
            "UPDATE tokens SET revoked_at = $3 WHERE practice_id = $1 AND user_id = $2 \
             AND kind = 'user' AND revoked_at IS NULL AND ($4 IS NULL OR id <> $4)",
        )
        .bind(self.practice_id)
        .bind(user_id)
        .bind(now_ms())
        .bind(keep)
        .execute(&mut **tx)
        .await?;
        Ok(())
    }

    /// Ends every unused link of a user.
    async fn end_links(&self, tx: &mut Transaction<'_, Any>, user_id: &str) -> StoreResult<()> {
        sqlx::query(
            "UPDATE user_links SET used_at = $3 \
             WHERE practice_id = $1 AND user_id = $2 AND used_at IS NULL",
        )
        .bind(self.practice_id)
        .bind(user_id)
        .bind(now_ms())
        .execute(&mut **tx)
        .await?;
        Ok(())
    }

    async fn insert_link(
        &self,
        tx: &mut Transaction<'_, Any>,
        purpose: LinkPurpose,
        user_id: Option<&str>,
        link: NewLink<'_>,
    ) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO user_links (practice_id, id, purpose, user_id, secret_hash, created_at, \
             expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(self.practice_id)
        .bind(new_id())
        .bind(purpose.as_str())
        .bind(user_id)
        .bind(link.secret_hash)
        .bind(now_ms())
        .bind(link.expires_at)
        .execute(&mut **tx)
        .await?;
        Ok(())
    }

    /// Uses up a live link of `purpose`: false when it is used, expired or not there. Two
    /// requests racing with one link: one of them wins.
    async fn use_link(
        &self,
        tx: &mut Transaction<'_, Any>,
        id: &str,
        purpose: LinkPurpose,
    ) -> StoreResult<bool> {
        let now = now_ms();
        let done = sqlx::query(
            "UPDATE user_links SET used_at = $3 WHERE practice_id = $1 AND id = $2 \
             AND purpose = $4 AND used_at IS NULL AND expires_at > $3",
        )
        .bind(self.practice_id)
        .bind(id)
        .bind(now)
        .bind(purpose.as_str())
        .execute(&mut **tx)
        .await?;
        Ok(done.rows_affected() == 1)
    }
}

/// What a change to a user ends besides.
enum Ends<'a> {
    Nothing,
    /// Every session and every set-password link (disabling).
    Everything,
    /// The password too, with a new set-password link (resetting).
    Password(Option<NewLink<'a>>),
}

//! Staff users of a practice.

use std::collections::HashMap;

use sqlx::FromRow;

use super::audit::Event;
use super::{Change, Keyed, Page, PageRequest, PracticeStore, Store, StoreResult, new_id, now_ms};
use crate::domain::{Record, Refusal};

const USER_COLUMNS: &str =
    "id, email, title, first_name, last_name, role, is_doctor, created_at, updated_at";

/// A staff user. The password hash is not part of it: only sign-in reads that.
#[derive(Clone, Debug, FromRow)]
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
}

impl User {
    /// "First Last".
    pub fn full_name(&self) -> String {
        format!("{} {}", self.first_name, self.last_name)
    }
}

/// What it takes to add a staff user. `email` is lower-cased by the store.
#[derive(Clone, Debug)]
pub struct NewUser<'a> {
    pub email: &'a str,
    pub password_hash: &'a str,
    pub title: Option<&'a str>,
    pub first_name: &'a str,
    pub last_name: &'a str,
    pub role: &'a str,
    pub is_doctor: bool,
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

impl Store {
    /// Finds a staff user by email, in any practice: signIn takes no practice.
    pub async fn find_credentials(&self, email: &str) -> StoreResult<Option<Credentials>> {
        let sql = format!(
            "SELECT practice_id, password_hash, {USER_COLUMNS} FROM users WHERE email = $1"
        );
        let row: Option<CredentialsRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(email.to_lowercase())
            .fetch_optional(&self.read)
            .await?;
        Ok(row.map(|r| Credentials {
            practice_id: r.practice_id,
            user: r.user,
            password_hash: r.password_hash,
        }))
    }
}

impl Keyed for User {
    fn key(&self) -> &str {
        &self.id
    }
}

impl PracticeStore<'_> {
    /// Adds a staff user. Refused if the email is taken: a staff email is unique across
    /// practices.
    pub async fn create_user(&self, new: NewUser<'_>) -> StoreResult<Change<User>> {
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
        };
        let mut tx = self.begin_write().await?;
        let result = sqlx::query(
            "INSERT INTO users (practice_id, id, email, password_hash, title, first_name, last_name, \
             role, is_doctor, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10)",
        )
        .bind(self.practice_id)
        .bind(&user.id)
        .bind(&user.email)
        .bind(new.password_hash)
        .bind(&user.title)
        .bind(&user.first_name)
        .bind(&user.last_name)
        .bind(&user.role)
        .bind(user.is_doctor)
        .bind(now)
        .execute(&mut *tx)
        .await;
        let email = user.email.clone();
        self.finish_unique(
            tx,
            result.map(|_| user),
            |u| Event::of("create", "user", &u.id),
            || Refusal::Taken(Record::User, email),
        )
        .await
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

    /// The staff users with these ids, by id.
    pub async fn users_by_ids(&self, ids: &[String]) -> StoreResult<HashMap<String, User>> {
        self.by_ids("users", USER_COLUMNS, ids).await
    }

    /// A page of staff users, by last name then first name.
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
}

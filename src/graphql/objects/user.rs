//! `User`: a staff user, and what signIn returns.

use async_graphql::{Context, ID, Object, Result, SimpleObject};

use super::page::PageInfo;
use super::{Booking, BookingData, User};
use crate::graphql::pagination::Pagination;
use crate::graphql::scalars::{Date, DateTime};

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
    /// included), by start time, cancelled ones left out. Needs `bookings:read`.
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

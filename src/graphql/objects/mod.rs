//! The GraphQL object graph: every output type, the relations between them, pages and the
//! `{ data, error }` envelope. The records that relate to each other are declared here and
//! their fields written in a file each, so that a patient's bookings and a booking's patient
//! reach each other without the files importing each other. The resource modules
//! (`graphql/patients.rs`, ...) hold the root fields that hand these out.

mod audit_event;
mod booking;
mod envelope;
mod event;
mod label;
mod location;
mod page;
mod patient;
mod practice;
mod product;
pub mod record;
mod token;
mod user;
mod webhook;

pub use audit_event::AuditEventData;
pub use booking::{BookingData, BookingStatus};
pub use envelope::{ResponsePayload, envelope, invalid_input, refusal, unselected};
pub use event::{Event, EventFeed, EventIdentifiers};
pub use label::{Label, LabelData};
pub use location::{Address, Appointment, Location};
pub use page::{PageInfo, items};
pub use patient::{PatientData, PatientLabel, Phone};
pub use practice::Practice;
pub use product::{PracticeAccessGroups, PracticeLocation, PracticeNumbers, Product, ProductData};
pub use token::ApiTokenPayload;
pub use user::{Session, SignInPayload, UserData, UserResponsePayload};
pub use webhook::{
    CreateWebhookPayload, DeleteWebhookPayload, UpdateWebhookPayload, WebhookDelivery,
    WebhookDeliveryData, WebhookDeliveryPayload, WebhookSubscription, WebhookSubscriptionData,
};

use crate::store;

/// A patient of the practice. Reading any of it needs `patients:read` (or the operation's own
/// permission, such as `query:patient`).
pub struct Patient(pub store::patients::Patient);

/// A booking: a patient seeing a doctor at a time. Reading it needs `bookings:read`; its
/// patient needs `patients:read` too, and its doctor `users:read`.
pub struct Booking(pub store::bookings::Booking);

/// A staff user of the practice.
pub struct User(pub store::users::User);

/// An API token, without its secret.
pub struct ApiToken(pub store::tokens::Token);

/// A record of the audit log.
pub struct AuditEvent(pub store::audit::AuditEvent);

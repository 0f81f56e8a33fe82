//! The `{ data, error }` envelope every mutation returns.

use async_graphql::{OutputType, SimpleObject};

use super::bookings::Booking;
use super::labels::Label;
use super::locations::{Appointment, Location};
use super::patients::Patient;
use crate::store::Change;

/// What a mutation returns: the record it affected, or a sentence saying why nothing changed.
#[derive(SimpleObject)]
#[graphql(concrete(name = "PatientResponsePayload", params(Patient)))]
#[graphql(concrete(name = "LabelResponsePayload", params(Label)))]
#[graphql(concrete(name = "BookingResponsePayload", params(Booking)))]
#[graphql(concrete(name = "LocationResponsePayload", params(Location)))]
#[graphql(concrete(name = "AppointmentResponsePayload", params(Appointment)))]
pub struct ResponsePayload<T: OutputType> {
    /// The record affected; null when the mutation was refused.
    pub data: Option<T>,
    /// Why the mutation was refused (e.g. "The label \"VIP\" is already on this patient"), in a
    /// sentence for a person; null on success. Nothing was changed when this is set.
    pub error: Option<String>,
}

impl<T: OutputType> ResponsePayload<T> {
    /// The envelope of a store outcome. `what` names the kind of record, for "No patient with
    /// id ID"; `wrap` makes the GraphQL object.
    pub fn of<S>(
        change: Change<S>,
        what: &str,
        id: &str,
        wrap: impl FnOnce(S) -> T,
    ) -> Option<Self> {
        Some(match change {
            Change::Done(record) => ResponsePayload::ok(wrap(record)),
            Change::NotFound => ResponsePayload::refused(format!("No {what} with id {id}")),
            Change::Refused(reason) => ResponsePayload::refused(reason),
        })
    }

    pub fn ok(data: T) -> Self {
        ResponsePayload {
            data: Some(data),
            error: None,
        }
    }

    pub fn refused(error: impl Into<String>) -> Self {
        ResponsePayload {
            data: None,
            error: Some(error.into()),
        }
    }
}

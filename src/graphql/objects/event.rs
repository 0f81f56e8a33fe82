//! `Event`: one change of the practice, as the feed, subscriptions and webhooks tell of it, and
//! the records it names, as they are now.

use async_graphql::{Context, ID, Object, Result, SimpleObject};

use super::{Booking, Label, Patient};
use crate::auth::{Access, Permissions, Resource};
use crate::graphql::access::require;
use crate::graphql::loaders::{self, load_one};
use crate::graphql::scalars::DateTime;
use crate::store::events::StoredEvent;

/// A change of the practice: a patient made, a booking moved, a label put on a patient. Its
/// type is one of the dotted names of the contract (`patient.created`, `booking.updated`,
/// `patient.label.added`, ...); it names the records it touched, and reaches them as they are
/// now. An event is shown only to callers who may read its resource: `patient.*` needs
/// `patients:read`, `booking.*` `bookings:read`, `label.*` `labels:read`, and the catalogue's
/// (ours) `product.*` and `location.*` `bookings:read`, `accessGroup.created` and
/// `practiceNumber.created` `patients:read`.
pub struct Event(pub StoredEvent);

impl Event {
    /// The resource whose read permission shows an event of `event_type`.
    pub fn resource(event_type: &str) -> Option<Resource> {
        match event_type.split('.').next() {
            Some("patient") => Some(Resource::Patients),
            Some("booking") => Some(Resource::Bookings),
            Some("label") => Some(Resource::Labels),
            // The catalogue: what booking integrations offer, and what a record refers to.
            Some("product" | "location") => Some(Resource::Bookings),
            Some("accessGroup" | "practiceNumber") => Some(Resource::Patients),
            _ => None,
        }
    }

    /// Whether a caller with `permissions` may see the event.
    pub fn visible_to(event: &StoredEvent, permissions: &Permissions) -> bool {
        event.is_public()
            && Self::resource(&event.event_type)
                .is_some_and(|resource| permissions.allows(resource, Access::Read))
    }
}

/// A change of the practice, as the feed, subscriptions and webhooks tell of it: its type (one
/// of the contract's dotted names, such as `patient.created`), when it happened, the ids of
/// the records it touched, and those records as they are now. Shown only to callers who may
/// read its resource.
#[Object]
impl Event {
    /// The event's id: opaque, increasing. Pass it as `after` to resume after this event; a
    /// webhook's body carries it as `eventId`.
    async fn id(&self) -> ID {
        ID(self.0.position().encode())
    }
    /// What happened, e.g. "patient.created", "booking.patientJourney.arrived".
    async fn event_type(&self) -> &str {
        &self.0.event_type
    }
    /// When it happened.
    async fn occurred_at(&self) -> DateTime {
        DateTime::from_ms(self.0.occurred_at)
    }
    /// The ids of the records the event touched.
    async fn identifiers(&self) -> EventIdentifiers {
        EventIdentifiers {
            patient_id: self.0.patient_id.clone().map(ID),
            booking_id: self.0.booking_id.clone().map(ID),
            label_id: self.0.label_id.clone().map(ID),
            product_id: self.0.record_of("product").map(ID),
            location_id: self.0.record_of("location").map(ID),
            access_group_id: self.0.record_of("accessGroup").map(ID),
            practice_number_id: self.0.record_of("practiceNumber").map(ID),
        }
    }
    /// The patient the event names, as it is now (deleted ones included); null if it names
    /// none. Needs `patients:read`.
    async fn patient(&self, ctx: &Context<'_>) -> Result<Option<Patient>> {
        let Some(id) = &self.0.patient_id else {
            return Ok(None);
        };
        require(ctx, Resource::Patients, Access::Read)?;
        let patient = load_one::<loaders::Patients>(ctx, id).await?;
        Ok(patient.map(|p| Patient::read(ctx, p)))
    }
    /// The booking the event names, as it is now (cancelled ones included); null if it names
    /// none, or its patient is now one hidden from the caller by access groups. Needs
    /// `bookings:read`.
    async fn booking(&self, ctx: &Context<'_>) -> Result<Option<Booking>> {
        let Some(id) = &self.0.booking_id else {
            return Ok(None);
        };
        require(ctx, Resource::Bookings, Access::Read)?;
        let booking = load_one::<loaders::Bookings>(ctx, id).await?;
        Ok(booking.map(|b| Booking::read(ctx, b)))
    }
    /// The label the event names, as it is now; null if it names none, or the label was
    /// deleted since. Needs `labels:read`.
    async fn label(&self, ctx: &Context<'_>) -> Result<Option<Label>> {
        let Some(id) = &self.0.label_id else {
            return Ok(None);
        };
        require(ctx, Resource::Labels, Access::Read)?;
        let label = load_one::<loaders::Labels>(ctx, id).await?;
        Ok(label.map(Label::from))
    }
}

/// The ids of the records an event touched; those it does not name are null.
#[derive(SimpleObject, Clone, Debug)]
pub struct EventIdentifiers {
    /// The patient: of every `patient.*` and `booking.*` event.
    pub patient_id: Option<ID>,
    /// The booking: of every `booking.*` event.
    pub booking_id: Option<ID>,
    /// The label: of `label.*`, `patient.label.added` and `patient.label.removed`.
    pub label_id: Option<ID>,
    /// The product (ours): of `product.*`.
    pub product_id: Option<ID>,
    /// The location (ours): of `location.*`.
    pub location_id: Option<ID>,
    /// The access group (ours): of `accessGroup.created`.
    pub access_group_id: Option<ID>,
    /// The number definition (ours): of `practiceNumber.created`.
    pub practice_number_id: Option<ID>,
}

/// A page of the feed of events.
#[derive(SimpleObject)]
pub struct EventFeed {
    /// The events after the cursor asked for, oldest first, those the caller may see.
    pub data: Option<Vec<Option<Event>>>,
    /// Where to resume: pass it as `after` next time. When `hasMore`, the id of the last
    /// event in `data`; otherwise where the practice's log ended as it was read, which may be
    /// past that event: the events the caller does not see (other types, other patients) are
    /// passed over too, so that a cursor polled often stays young however rare the events it
    /// waits for. Null only when the practice has had no event yet and none was asked after.
    pub cursor: Option<ID>,
    /// True when more events follow at once: ask again with `cursor` without waiting.
    pub has_more: bool,
}

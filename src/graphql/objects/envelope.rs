//! The `{ data, error }` envelope every mutation returns, and the API's sentences for the
//! practice's refusals (`crate::domain`): a refusal goes in `error`; an input that breaks a
//! rule of its own is a GraphQL error (BAD_USER_INPUT) instead.

use async_graphql::{Context, Error, OutputType, Result, SimpleObject};
use chrono::{SecondsFormat, TimeZone, Utc};

use super::{
    Appointment, Booking, Label, Location, Patient, Practice, PracticeAccessGroups,
    PracticeLocation, PracticeNumbers, Product,
};
use crate::auth::{Access, Resource};
use crate::domain::limits::{MAX_METADATA_KEY_CHARS, MAX_METADATA_VALUE_CHARS, MAX_OLD_SECRETS};
use crate::domain::{Bound, Change, Denied, Invalid, PatientState, Record, Refusal};
use crate::graphql::error::{bad_input, code, coded};

/// What a mutation returns: the record it affected, or a sentence saying why nothing changed.
#[derive(SimpleObject)]
#[graphql(concrete(name = "PatientResponsePayload", params(Patient)))]
#[graphql(concrete(name = "LabelResponsePayload", params(Label)))]
#[graphql(concrete(name = "BookingResponsePayload", params(Booking)))]
#[graphql(concrete(name = "LocationResponsePayload", params(Location)))]
#[graphql(concrete(name = "AppointmentResponsePayload", params(Appointment)))]
#[graphql(concrete(name = "PracticeResponsePayload", params(Practice)))]
#[graphql(concrete(name = "ProductResponsePayload", params(Product)))]
#[graphql(concrete(name = "PracticeLocationResponsePayload", params(PracticeLocation)))]
#[graphql(concrete(name = "AccessGroupResponsePayload", params(PracticeAccessGroups)))]
#[graphql(concrete(name = "PracticeNumberResponsePayload", params(PracticeNumbers)))]
pub struct ResponsePayload<T: OutputType> {
    /// The record affected; null when the mutation was refused.
    pub data: Option<T>,
    /// Why the mutation was refused (e.g. "The label \"VIP\" is already on this patient"), in a
    /// sentence for a person; null on success. Nothing was changed when this is set.
    pub error: Option<String>,
}

impl<T: OutputType> ResponsePayload<T> {
    pub fn ok(data: T) -> Self {
        ResponsePayload {
            data: Some(data),
            error: None,
        }
    }

    /// A refusal, in the sentence this caller may read (see [`refusal`]).
    pub fn refused(ctx: &Context<'_>, refusal: &Refusal) -> Self {
        ResponsePayload {
            data: None,
            error: Some(self::refusal(ctx, refusal)),
        }
    }
}

/// The envelope of a change: the record, made into its GraphQL object by `wrap`, or the
/// refusal's sentence; an invalid input is an error.
pub fn envelope<S, T: OutputType>(
    ctx: &Context<'_>,
    change: Change<S>,
    wrap: impl FnOnce(S) -> T,
) -> Result<Option<ResponsePayload<T>>> {
    match change {
        Ok(record) => Ok(Some(ResponsePayload::ok(wrap(record)))),
        Err(Denied::Refused(refusal)) => Ok(Some(ResponsePayload::refused(ctx, &refusal))),
        Err(Denied::Invalid(invalid)) => Err(invalid_input(invalid)),
    }
}

/// The sentence of a refusal for the caller of `ctx`, also reported as a GraphQL error when
/// the document did not select the payload's `error` (see [`unselected`]).
pub fn refusal(ctx: &Context<'_>, refusal: &Refusal) -> String {
    let may_read_users = crate::graphql::access::principal(ctx)
        .is_ok_and(|p| p.permissions.allows(Resource::Users, Access::Read));
    let sentence = match refusal {
        // A staff user's name is theirs to read who may read users.
        Refusal::NotADoctor { id, .. } if !may_read_users => {
            format!("The staff user with id {id} is not a doctor and cannot be booked")
        }
        Refusal::DoctorDisabled { id, .. } if !may_read_users => {
            format!("The staff user with id {id} is disabled and cannot be booked")
        }
        other => sentence(other),
    };
    let code = match refusal {
        Refusal::NotFound(..) => code::NOT_FOUND,
        _ => code::REFUSED,
    };
    unselected(ctx, code, &sentence);
    sentence
}

/// A payload's `error` is the only place a client that selected it learns why a mutation
/// changed nothing. One that did not select it (the specification's own `signIn { token }`)
/// would be told nothing at all: it gets the reason as a GraphQL error too, with a code, at the
/// mutation's path.
pub fn unselected(ctx: &Context<'_>, code: &'static str, message: &str) {
    if !ctx.look_ahead().field("error").exists() {
        let error = coded(code, message).into_server_error(ctx.item.pos);
        ctx.add_error(ctx.set_error_path(error));
    }
}

/// An input that breaks a rule of its own, as the API's arguments name it.
pub fn invalid_input(invalid: Invalid) -> Error {
    bad_input(match invalid {
        Invalid::BookingEndsBeforeStart => "bookingData.end must be after bookingData.start",
        Invalid::BookingTooLong => "a booking must not be longer than 24 hours",
        Invalid::AppointmentWithoutDuration => {
            "productData.duration is needed: an appointment product has a duration"
        }
        Invalid::BookableNotAppointment => {
            "productData.isBookable can be true only for productType \"appointment\""
        }
    })
}

/// A refusal, in a sentence for the person behind the client.
fn sentence(refusal: &Refusal) -> String {
    match refusal {
        Refusal::NotFound(record, id) => format!("No {} with id {id}", record.noun()),
        Refusal::LabelNotInCatalogue(id) => {
            format!("No label with id {id}: create it with createLabel first")
        }
        Refusal::PatientDeleted => {
            "This patient has been deleted and can no longer be changed".into()
        }
        Refusal::PatientAlreadyArchived => "This patient is already archived".into(),
        Refusal::PatientNotArchived => "This patient is not archived".into(),
        Refusal::PatientCannotBeBooked(PatientState::Deleted) => {
            "The patient has been deleted and cannot be booked".into()
        }
        Refusal::PatientCannotBeBooked(PatientState::Archived) => {
            "The patient is archived: unarchive them before booking".into()
        }
        Refusal::LabelAlreadyOnPatient { title } => {
            format!("The label \"{title}\" is already on this patient")
        }
        Refusal::LabelNotOnPatient(id) => format!("This patient has no label with id {id}"),
        Refusal::NotADoctor { name, .. } => {
            format!("{name} is not a doctor and cannot be booked")
        }
        Refusal::DoctorDisabled { name, .. } => {
            format!("{name}'s account is disabled: they cannot be booked")
        }
        Refusal::DoctorBusy(Some(busy)) => {
            let at = |ms: i64| Utc.timestamp_millis_opt(ms).single().unwrap_or_default();
            format!(
                "{} is already booked {}–{} on {} (UTC)",
                busy.doctor,
                at(busy.start).format("%H:%M"),
                at(busy.end).format("%H:%M"),
                at(busy.start).format("%Y-%m-%d")
            )
        }
        Refusal::DoctorBusy(None) => "The doctor is already booked at that time".into(),
        Refusal::BookingCancelled => {
            "This booking has been cancelled and can no longer be changed".into()
        }
        Refusal::BookingAlreadyCancelled => "This booking is already cancelled".into(),
        Refusal::Taken(Record::Label, title) => {
            format!("A label titled \"{title}\" already exists")
        }
        Refusal::Taken(Record::AppointmentType, title) => {
            format!("An appointment type titled \"{title}\" already exists")
        }
        Refusal::Taken(Record::Product, name) => {
            format!("A product named \"{name}\" already exists")
        }
        Refusal::Taken(Record::User, email) => {
            format!("A staff user with email {email} already exists")
        }
        Refusal::Taken(record, name) => {
            let what = record.with_article();
            let (first, rest) = what.split_at(1);
            format!(
                "{}{rest} named \"{name}\" already exists",
                first.to_uppercase()
            )
        }
        Refusal::WebhookDeleted => {
            "This webhook subscription has been deleted and can no longer be changed".into()
        }
        Refusal::WebhookTaken { url, event_type } => {
            format!("Another webhook subscription already sends {event_type} to {url}")
        }
        Refusal::DeliveryPending => "This delivery is waiting for its next attempt already".into(),
        Refusal::ContactUnnamed => "A relationship's contact needs a related patient, or a \
             first name, last name or company name: it would be left with none"
            .into(),
        Refusal::TypeNotSent(event_type) => format!(
            "This delivery's subscription no longer sends {event_type}: it cannot be sent again"
        ),
        Refusal::SecretsSigning { until } => {
            let until = Utc
                .timestamp_millis_opt(*until)
                .single()
                .unwrap_or_default();
            format!(
                "This subscription's secret was rotated {MAX_OLD_SECRETS} times within a day, \
                 and each old secret signs for 24 hours: rotate it again after {}, when the \
                 oldest stops",
                until.to_rfc3339_opts(SecondsFormat::Secs, true)
            )
        }
        Refusal::LastAdmin => {
            "This is the practice's last admin: make another admin before disabling or \
             demoting this one"
                .into()
        }
        Refusal::RoleAboveCaller(role) => {
            format!(
                "The role {role} can do more than you can: you cannot give it, nor act on a \
                 user who has it"
            )
        }
        Refusal::OwnAccount => "You cannot disable your own account".into(),
        Refusal::UserDisabled => "This staff user is disabled: enable them first".into(),
        Refusal::MakerRevoked => {
            "The token this request came with has been revoked or signed out: no token is made"
                .into()
        }
        Refusal::NoMetadataKey(key) => format!("This booking has no metadata with key \"{key}\""),
        Refusal::MetadataTooLong {
            value: false,
            chars,
        } => format!(
            "A metadata key has at most {MAX_METADATA_KEY_CHARS} characters; this one has {chars}"
        ),
        Refusal::MetadataTooLong { value: true, chars } => format!(
            "A metadata value has at most {MAX_METADATA_VALUE_CHARS} characters; this one has \
             {chars}"
        ),
        Refusal::NumberValueTooLong(chars) => format!(
            "A number's value has at most {MAX_METADATA_VALUE_CHARS} characters; this one has \
             {chars}"
        ),
        Refusal::NumberAlreadyOnPatient => {
            "The patient has this number already: change it with updatePatientNumber".into()
        }
        Refusal::AccessGroupAlreadyOnPatient => {
            "The patient is in this access group already".into()
        }
        Refusal::NoMembership => "The patient has no membership".into(),
        Refusal::RelatedToItself => "A patient cannot be related to themselves".into(),
        Refusal::PatientUnnamed => {
            "A patient keeps a first name, a last name or an email: this change would leave \
             none"
                .into()
        }
        Refusal::PatientArchived => {
            "This patient is archived: unarchive them before changing their record".into()
        }
        Refusal::PatientOnHold => {
            "The patient is on hold: take them off hold (onHold: false) before booking".into()
        }
        Refusal::ProductTypeFixed(kind) => format!(
            "A product's type cannot change: this one is of type \"{kind}\"; create a new product instead"
        ),
        Refusal::NotBookable(name) => {
            format!("\"{name}\" cannot be booked: only an active, bookable appointment type can")
        }
        Refusal::PracticeHasStaff => {
            "This practice has staff already: sign in, or ask an admin for an account".into()
        }
        Refusal::ListTooLong(bound, given) => {
            let max = bound.max();
            match bound {
                Bound::MetadataEntries => {
                    format!("Metadata holds at most {max} entries; this change gives {given}")
                }
                Bound::AttributesOnPatient => format!(
                    "A patient has at most {max} custom attributes; this change gives {given}"
                ),
                _ => format!("This list holds at most {max} entries; this change gives {given}"),
            }
        }
        Refusal::TooMany(bound) => {
            let max = bound.max();
            match bound {
                Bound::LabelsOnPatient => {
                    format!("A patient has at most {max} labels: take one off first")
                }
                Bound::Locations => format!("A practice has at most {max} locations"),
                Bound::AppointmentTypes => {
                    format!("A practice has at most {max} appointment types")
                }
                Bound::PhonesOnPatient => format!("A patient has at most {max} phones"),
                Bound::NumbersOnPatient => format!("A patient has at most {max} numbers"),
                Bound::AttributesOnPatient => {
                    format!("A patient has at most {max} custom attributes")
                }
                Bound::RelationshipsOnPatient => {
                    format!("A patient has at most {max} relationships")
                }
                Bound::AccessGroupsOnPatient => {
                    format!("A patient is in at most {max} access groups")
                }
                Bound::MetadataEntries => {
                    format!("A booking has at most {max} metadata entries: delete one first")
                }
                Bound::Products => format!("A practice has at most {max} products"),
                Bound::AccessGroups => format!("A practice has at most {max} access groups"),
                Bound::NumberDefinitions => {
                    format!("A practice has at most {max} number definitions")
                }
                Bound::ServicesProvided => {
                    format!("A location or a practitioner provides at most {max} services")
                }
                Bound::Webhooks => format!(
                    "A practice has at most {max} webhook subscriptions: delete one first, or \
                     give one subscription several event types"
                ),
                Bound::ApiTokens => format!(
                    "A practice has at most {max} API tokens that are neither revoked nor \
                     expired: revoke one first"
                ),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Busy;

    #[test]
    fn refusals_read_as_sentences() {
        assert_eq!(
            sentence(&Refusal::NotFound(Record::AppointmentType, "x".into())),
            "No appointment type with id x"
        );
        assert_eq!(
            sentence(&Refusal::Taken(Record::Location, "Main".into())),
            "A location named \"Main\" already exists"
        );
        let busy = Busy {
            doctor: "Dr Grace Hopper".into(),
            start: 1_764_580_500_000,
            end: 1_764_582_300_000,
        };
        assert_eq!(
            sentence(&Refusal::DoctorBusy(Some(busy))),
            "Dr Grace Hopper is already booked 09:15–09:45 on 2025-12-01 (UTC)"
        );
    }
}

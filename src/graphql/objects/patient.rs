//! `Patient`, and what hangs off it: phones, address, labels, bookings.

use async_graphql::{Context, ID, Object, Result, SimpleObject};

use super::page::{PageInfo, items};
use super::{Address, Booking, Patient};
use crate::graphql::loaders::{self, load_one};
use crate::graphql::read_log::note_read;
use crate::graphql::scalars::{Date, DateTime};
use crate::store::patients as stored;

/// A phone number of a patient.
#[derive(SimpleObject, Clone, Debug)]
pub struct Phone {
    /// What kind of phone it is, e.g. "mobile", "home", "work".
    pub phone_type: Option<String>,
    /// The number, as given.
    pub phone_number: Option<String>,
}

/// A label on a patient.
#[derive(SimpleObject, Clone, Debug)]
pub struct PatientLabel {
    /// The id of this label's place on the patient: what removePatientLabel takes as labelId.
    pub id: ID,
    /// The id of the label in the practice's catalogue (Label.id).
    pub reference_id: ID,
    /// The label's title.
    pub text: Option<String>,
    /// The label's colour, e.g. "#e11d48".
    pub color: Option<String>,
}

/// A page of patients.
#[derive(SimpleObject)]
pub struct PatientData {
    /// The patients on this page.
    pub data: Option<Vec<Option<Patient>>>,
    /// Where this page sits in the list.
    pub page_info: Option<PageInfo>,
}

impl Patient {
    /// A patient a query hands out, noted for the audit log.
    pub fn read(ctx: &Context<'_>, patient: stored::Patient) -> Patient {
        note_read(ctx, "patient", &patient.id, Some(&patient.id));
        Patient(patient)
    }
}

/// A patient of the practice. Reading any of it needs `patients:read` (or the operation's own
/// permission, such as `query:patient`).
#[Object]
impl Patient {
    /// The patient's id: opaque, stable.
    async fn id(&self) -> ID {
        ID(self.0.id.clone())
    }
    /// Form of address, e.g. "Mrs", "Dr".
    async fn title(&self) -> Option<&str> {
        self.0.fields.title.as_deref()
    }
    /// "active", "archived" or "deleted".
    async fn status(&self) -> Option<&str> {
        Some(if self.0.deleted_at.is_some() {
            "deleted"
        } else if self.0.archived_at.is_some() {
            "archived"
        } else {
            "active"
        })
    }
    /// First (given) name.
    async fn first_name(&self) -> Option<&str> {
        Some(&self.0.fields.first_name)
    }
    /// Last (family) name.
    async fn last_name(&self) -> Option<&str> {
        Some(&self.0.fields.last_name)
    }
    /// First and last name.
    async fn full_name(&self) -> Option<String> {
        Some(format!(
            "{} {}",
            self.0.fields.first_name, self.0.fields.last_name
        ))
    }
    /// Date of birth.
    async fn dob(&self) -> Option<Date> {
        Date::from_stored(self.0.fields.dob.as_deref())
    }
    /// Gender, as the patient describes it.
    async fn gender(&self) -> Option<&str> {
        self.0.fields.gender.as_deref()
    }
    /// Sex, as recorded for clinical purposes.
    async fn sex(&self) -> Option<&str> {
        self.0.fields.sex.as_deref()
    }
    /// Email address, lower-cased.
    async fn email(&self) -> Option<&str> {
        self.0.fields.email.as_deref()
    }
    /// Phone numbers (at most one is kept today).
    async fn phones(&self) -> Option<Vec<Option<Phone>>> {
        let f = &self.0.fields;
        if f.phone_number.is_none() && f.phone_type.is_none() {
            return Some(Vec::new());
        }
        Some(vec![Some(Phone {
            phone_type: f.phone_type.clone(),
            phone_number: f.phone_number.clone(),
        })])
    }
    /// Postal address.
    async fn address(&self) -> Option<Address> {
        let f = &self.0.fields;
        Some(Address {
            address: f.address.clone(),
            city: f.city.clone(),
            postcode: f.postcode.clone(),
            country: f.country.clone(),
        })
    }
    /// Free-text notes on the patient.
    async fn comments(&self) -> Option<&str> {
        self.0.fields.comments.as_deref()
    }
    /// The labels on the patient, in the order they were put on.
    async fn labels(&self, ctx: &Context<'_>) -> Result<Option<Vec<Option<PatientLabel>>>> {
        let labels = load_one::<loaders::PatientLabels>(ctx, &self.0.id)
            .await?
            .unwrap_or_default();
        Ok(items(labels, |l| PatientLabel {
            id: ID(l.id),
            reference_id: ID(l.label_id),
            text: Some(l.title),
            color: l.color,
        }))
    }
    /// The patient's bookings that start or end between these dates (whole days, UTC, both
    /// included; less than 366 days apart), cancelled ones left out; at most 500. Needs
    /// `bookings:read`.
    async fn bookings(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The first day.")] start: Date,
        #[graphql(desc = "The last day.")] end: Date,
    ) -> Result<Option<Vec<Option<Booking>>>> {
        Booking::of_patient(ctx, &self.0.id, start, end).await
    }
    /// True when the patient is archived: kept, but left out of lists unless asked for.
    async fn archived(&self) -> Option<bool> {
        Some(self.0.archived_at.is_some())
    }
    /// Why the patient was archived, as given to archivePatient.
    async fn archive_reason(&self) -> Option<&str> {
        self.0.archive_reason.as_deref()
    }
    /// Comments given to archivePatient.
    async fn archive_comments(&self) -> Option<&str> {
        self.0.archive_comments.as_deref()
    }
    /// True when the patient was deleted (a soft delete: the record is kept, but left out of
    /// lists unless asked for, and can no longer be changed).
    async fn deleted(&self) -> Option<bool> {
        Some(self.0.deleted_at.is_some())
    }
    /// When the patient was added.
    async fn created_at(&self) -> Option<DateTime> {
        Some(DateTime::from_ms(self.0.created_at))
    }
    /// When the patient's record last changed (labels included).
    async fn updated_at(&self) -> Option<DateTime> {
        Some(DateTime::from_ms(self.0.updated_at))
    }
}

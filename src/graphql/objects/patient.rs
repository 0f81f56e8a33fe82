//! `Patient`, and what hangs off it: phones, address, labels, bookings.

use async_graphql::{Context, ID, Object, Result, SimpleObject};

use super::booking::PatientBookingsData;
use super::page::{PageInfo, items};
use super::record::{
    CommunicationPreferences, CustomAttribute, Ins, PatientAccessGroup, PatientArchiveReason,
    PatientArchivedInfo, PatientNumber, PatientRelationship, PlaceOfBirth, SharingToken,
    enum_value,
};
use super::{Address, Booking, Patient};
use crate::graphql::loaders::{self, load_one};
use crate::graphql::options::QueryOptions;
use crate::graphql::pagination::Pagination;
use crate::graphql::read_log::note_read;
use crate::graphql::scalars::{Date, DateTime};
use crate::store::patients as stored;

/// A phone number of a patient.
#[derive(SimpleObject, Clone, Debug)]
pub struct Phone {
    /// The phone's id on this patient: what updatePatientPhoneNumber and
    /// removePatientPhoneNumber take.
    pub phone_id: Option<ID>,
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
    /// First (given) name; null when the patient has none.
    async fn first_name(&self) -> Option<&str> {
        Some(self.0.fields.first_name.as_str()).filter(|name| !name.is_empty())
    }
    /// Last (family) name; null when the patient has none.
    async fn last_name(&self) -> Option<&str> {
        Some(self.0.fields.last_name.as_str()).filter(|name| !name.is_empty())
    }
    /// First and last name, as many of them as the patient has; null when neither.
    async fn full_name(&self) -> Option<String> {
        let f = &self.0.fields;
        match (f.first_name.is_empty(), f.last_name.is_empty()) {
            (true, true) => None,
            (false, true) => Some(f.first_name.clone()),
            (true, false) => Some(f.last_name.clone()),
            (false, false) => Some(format!("{} {}", f.first_name, f.last_name)),
        }
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
    /// Phone numbers, at most 10, in the order they were added; the first is the one that
    /// createPatient and updatePatient's phoneType and phoneNumber set.
    async fn phones(&self) -> Option<Vec<Option<Phone>>> {
        Some(
            self.0
                .phones()
                .into_iter()
                .map(|p| {
                    Some(Phone {
                        phone_id: Some(ID(p.id)),
                        phone_type: p.phone_type,
                        phone_number: p.number,
                    })
                })
                .collect(),
        )
    }
    /// Surname at birth.
    async fn birth_surname(&self) -> Option<&str> {
        self.0.fields.birth_surname.as_deref()
    }
    /// First name at birth.
    async fn birth_name(&self) -> Option<&str> {
        self.0.fields.birth_name.as_deref()
    }
    /// Every given name at birth.
    async fn birth_names(&self) -> Option<&str> {
        self.0.fields.birth_names.as_deref()
    }
    /// Where the patient was born.
    async fn place_of_birth(&self) -> Option<PlaceOfBirth> {
        let f = &self.0.fields;
        (f.place_of_birth_name.is_some() || f.place_of_birth_code.is_some()).then(|| PlaceOfBirth {
            name: f.place_of_birth_name.clone(),
            code: f.place_of_birth_code.clone(),
        })
    }
    /// The patient's social security number: 5 to 30 letters and digits, spaces and hyphens
    /// allowed between them (a UK National Insurance number, a French NIR, a US SSN).
    async fn social_security_number(&self) -> Option<&str> {
        self.0.fields.social_security_number.as_deref()
    }
    /// The patient's id in Google (an integration's).
    async fn google_client_id(&self) -> Option<&str> {
        self.0.fields.google_client_id.as_deref()
    }
    /// The reference the patient's payments carry.
    async fn payment_reference(&self) -> Option<&str> {
        self.0.fields.payment_reference.as_deref()
    }
    /// The patient's occupation.
    async fn occupation(&self) -> Option<&str> {
        self.0.fields.occupation.as_deref()
    }
    /// The patient's membership (addPatientMembership); null when none.
    async fn membership_name(&self) -> Option<&str> {
        self.0.membership_name.as_deref()
    }
    /// When the membership started, as stored (YYYY-MM-DD).
    async fn membership_start_date(&self) -> Option<&str> {
        self.0.membership_start_date.as_deref()
    }
    /// When the membership started, as a date.
    async fn membership_start_date_formatted(&self) -> Option<Date> {
        Date::from_stored(self.0.membership_start_date.as_deref())
    }
    /// True while the patient is on hold: they cannot be booked (createBooking, or moving a
    /// booking to them, is refused) until taken off hold with updatePatient.
    async fn on_hold(&self) -> Option<bool> {
        Some(self.0.fields.on_hold != 0)
    }
    /// Always null: practice-api makes no tokens to share a record outside the practice.
    async fn sharing_token(&self) -> Option<SharingToken> {
        None
    }
    /// The patient's values of the practice's numbers (PracticeNumbers), one per definition.
    async fn numbers(&self, ctx: &Context<'_>) -> Result<Option<Vec<Option<PatientNumber>>>> {
        let numbers = self.0.numbers();
        let names = loaders::number_names(ctx).await?;
        Ok(Some(
            numbers
                .into_iter()
                .map(|n| {
                    Some(PatientNumber {
                        name: names.get(&n.id).cloned(),
                        id: ID(n.id),
                        value: Some(n.value),
                    })
                })
                .collect(),
        ))
    }
    /// The patient's answers to the practice's questions, at most 50.
    async fn custom_attributes(&self) -> Option<Vec<Option<CustomAttribute>>> {
        Some(
            self.0
                .attributes()
                .into_iter()
                .map(|a| {
                    Some(CustomAttribute {
                        id: Some(ID(a.id)),
                        title: Some(a.title),
                        text: Some(a.text),
                        response: Some(a.response),
                        required: Some(a.required),
                    })
                })
                .collect(),
        )
    }
    /// How the patient agreed to be contacted; null until given.
    async fn communication_preferences(&self) -> Option<CommunicationPreferences> {
        self.0.communication().map(CommunicationPreferences::from)
    }
    /// The people related to the patient, at most 20.
    async fn related_accounts(&self) -> Option<Vec<Option<PatientRelationship>>> {
        Some(
            self.0
                .relationships()
                .into_iter()
                .map(|r| Some(PatientRelationship::from(r)))
                .collect(),
        )
    }
    /// The access groups the patient is in; empty when every staff user with
    /// `patients:read` sees them.
    async fn access_groups(
        &self,
        ctx: &Context<'_>,
    ) -> Result<Option<Vec<Option<PatientAccessGroup>>>> {
        let ids = self.0.access_group_ids();
        let names = loaders::access_group_names(ctx).await?;
        Ok(Some(
            ids.into_iter()
                .filter_map(|id| {
                    let (name, label) = names.get(&id)?.clone();
                    Some(Some(PatientAccessGroup {
                        id: ID(id),
                        name,
                        label,
                    }))
                })
                .collect(),
        ))
    }
    /// The patient's INS (France); null until given.
    async fn ins(&self) -> Option<Ins> {
        self.0.ins().map(Ins::from)
    }
    /// When, why and by whom the patient was archived and brought back; null if never.
    async fn archived_info(&self) -> Option<PatientArchivedInfo> {
        let p = &self.0;
        if p.last_archived_at.is_none() && p.unarchived_at.is_none() {
            return None;
        }
        let reason = |text: &Option<String>| {
            text.as_deref().map(|t| {
                enum_value::<PatientArchiveReason>(t).unwrap_or(PatientArchiveReason::Other)
            })
        };
        Some(PatientArchivedInfo {
            archived_at: p.last_archived_at.map(DateTime::from_ms),
            archived_by: p.archived_by.clone(),
            archived_reason: reason(&p.archive_reason),
            archived_comments: p.archive_comments.clone(),
            unarchived_at: p.unarchived_at.map(DateTime::from_ms),
            unarchived_by: p.unarchived_by.clone(),
            unarchived_reason: p.unarchive_reason.as_deref().and_then(enum_value),
        })
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
    /// included; less than 366 days apart), by start time, cancelled ones left out unless
    /// `queryOptions.includeDeleted`; a page when `pagination` is given, else at most 500.
    /// Needs `bookings:read`.
    async fn bookings(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The first day.")] start: Date,
        #[graphql(desc = "The last day.")] end: Date,
        #[graphql(desc = "includeDeleted for cancelled bookings; createdAt and updatedAt.")]
        query_options: Option<QueryOptions>,
        #[graphql(desc = "Which page; without it, the first 500.")] pagination: Option<Pagination>,
    ) -> Result<Option<Vec<Option<Booking>>>> {
        Booking::of_patient(ctx, &self.0.id, (start, end), query_options, pagination).await
    }
    /// A page of the patient's bookings between these dates, as `bookings` lists them, with
    /// the list's total in `meta`. Needs `bookings:read`.
    async fn bookings_with_pagination(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The first day.")] start: Date,
        #[graphql(desc = "The last day.")] end: Date,
        #[graphql(desc = "includeDeleted for cancelled bookings; createdAt and updatedAt.")]
        query_options: Option<QueryOptions>,
        #[graphql(desc = "Which page; default page 1 of 25.")] pagination: Option<Pagination>,
    ) -> Result<Option<PatientBookingsData>> {
        Booking::page_of_patient(ctx, &self.0.id, (start, end), query_options, pagination).await
    }
    /// True when the patient is archived: kept, but left out of lists unless asked for.
    async fn archived(&self) -> Option<bool> {
        Some(self.0.archived_at.is_some())
    }
    /// Why the patient is archived, as given to archivePatient; null when not archived.
    async fn archive_reason(&self) -> Option<&str> {
        self.0.archived_at.and(self.0.archive_reason.as_deref())
    }
    /// Comments given to archivePatient; null when not archived.
    async fn archive_comments(&self) -> Option<&str> {
        self.0.archived_at.and(self.0.archive_comments.as_deref())
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

//! Patients: the `patient` and `patients` queries, the patient mutations and the `Patient` type.

use async_graphql::{Context, ID, InputObject, MaybeUndefined, Object, Result, SimpleObject};

use super::access::{authorize, authorize_write};
use super::audit::note_read;
use super::error::{OrFail, bad_input};
use super::input::{MAX_LINE_CHARS, MAX_TEXT_CHARS, email, optional_text, patch, required_text};
use super::loaders::{self, load_one};
use super::options::QueryOptions;
use super::pagination::{PageInfo, Pagination, items};
use super::payload::ResponsePayload;
use super::scalars::{Date, DateTime};
use super::store;
use crate::auth::OperationKind;
use crate::store::now_ms;
use crate::store::patients::{
    self as stored, Modification, PatientChange, PatientFields, PatientFilter,
};

/// Longest search string.
const MAX_SEARCH_CHARS: usize = 100;

/// A patient of the practice.
pub struct Patient(pub stored::Patient);

/// The patient's postal address.
#[derive(SimpleObject, Clone, Debug)]
pub struct Address {
    /// Street and number.
    pub address: Option<String>,
    /// Town or city.
    pub city: Option<String>,
    /// Postal code.
    pub postcode: Option<String>,
    /// Country.
    pub country: Option<String>,
}

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
    ) -> Result<Option<Vec<Option<super::bookings::Booking>>>> {
        super::bookings::of_patient(ctx, &self.0.id, start, end).await
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

/// A page of patients.
#[derive(SimpleObject)]
pub struct PatientData {
    /// The patients on this page.
    pub data: Option<Vec<Option<Patient>>>,
    /// Where this page sits in the list.
    pub page_info: Option<PageInfo>,
}

/// The data of a new patient.
#[derive(InputObject)]
pub struct CreatePatientDataInput {
    /// Form of address, e.g. "Mrs".
    pub title: Option<String>,
    /// First name. Required, not blank.
    pub first: String,
    /// Last name. Required, not blank.
    pub last: String,
    /// Email address.
    pub email: Option<String>,
    /// Date of birth; not in the future.
    pub dob: Option<Date>,
    /// Gender, as the patient describes it.
    pub gender: Option<String>,
    /// Sex, as recorded for clinical purposes.
    pub sex: Option<String>,
    /// Street and number.
    pub address: Option<String>,
    /// Town or city.
    pub city: Option<String>,
    /// Postal code.
    pub postcode: Option<String>,
    /// Country.
    pub country: Option<String>,
    /// What kind of phone `phoneNumber` is, e.g. "mobile".
    pub phone_type: Option<String>,
    /// Phone number.
    pub phone_number: Option<String>,
    /// Ids of labels of the catalogue (Label.id) to put on the patient.
    pub labels: Option<Vec<ID>>,
    /// Free-text notes.
    pub comments: Option<String>,
}

/// Changes to a patient. An omitted field is left as it is; null clears it (first and last
/// name cannot be cleared). `labels`, when given, replaces the patient's labels.
#[derive(InputObject)]
pub struct UpdatePatientDataInput {
    /// Form of address, e.g. "Mrs".
    pub title: MaybeUndefined<String>,
    /// First name; cannot be cleared.
    pub first: MaybeUndefined<String>,
    /// Last name; cannot be cleared.
    pub last: MaybeUndefined<String>,
    /// Email address.
    pub email: MaybeUndefined<String>,
    /// Date of birth; not in the future.
    pub dob: MaybeUndefined<Date>,
    /// Gender, as the patient describes it.
    pub gender: MaybeUndefined<String>,
    /// Sex, as recorded for clinical purposes.
    pub sex: MaybeUndefined<String>,
    /// Street and number.
    pub address: MaybeUndefined<String>,
    /// Town or city.
    pub city: MaybeUndefined<String>,
    /// Postal code.
    pub postcode: MaybeUndefined<String>,
    /// Country.
    pub country: MaybeUndefined<String>,
    /// What kind of phone `phoneNumber` is, e.g. "mobile".
    pub phone_type: MaybeUndefined<String>,
    /// Phone number.
    pub phone_number: MaybeUndefined<String>,
    /// Ids of catalogue labels (Label.id): the patient's labels become exactly these.
    pub labels: Option<Vec<ID>>,
    /// Free-text notes.
    pub comments: MaybeUndefined<String>,
}

fn line(field: &str) -> impl Fn(Option<String>) -> Result<Option<String>> + '_ {
    move |v| optional_text(&format!("patientData.{field}"), v, MAX_LINE_CHARS)
}

fn check_dob(dob: Option<Date>) -> Result<Option<String>> {
    match dob {
        Some(d) if d.0 > chrono::Utc::now().date_naive() => Err(bad_input(format!(
            "patientData.dob must not be in the future, got {}",
            d.to_stored()
        ))),
        other => Ok(other.map(Date::to_stored)),
    }
}

/// Label ids without repeats, in the order given.
fn label_ids(ids: Vec<ID>) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(ids.len());
    for id in ids {
        if !out.contains(&id.0) {
            out.push(id.0);
        }
    }
    out
}

impl CreatePatientDataInput {
    fn into_fields(self) -> Result<(PatientFields, Vec<String>)> {
        let fields = PatientFields {
            title: line("title")(self.title)?,
            first_name: required_text("patientData.first", self.first, MAX_LINE_CHARS)?,
            last_name: required_text("patientData.last", self.last, MAX_LINE_CHARS)?,
            email: email("patientData.email", self.email)?,
            dob: check_dob(self.dob)?,
            gender: line("gender")(self.gender)?,
            sex: line("sex")(self.sex)?,
            address: line("address")(self.address)?,
            city: line("city")(self.city)?,
            postcode: line("postcode")(self.postcode)?,
            country: line("country")(self.country)?,
            phone_type: line("phoneType")(self.phone_type)?,
            phone_number: line("phoneNumber")(self.phone_number)?,
            comments: optional_text("patientData.comments", self.comments, MAX_TEXT_CHARS)?,
        };
        Ok((fields, label_ids(self.labels.unwrap_or_default())))
    }
}

/// Checked changes to a patient: for each field, None leaves it, Some(v) sets it to v.
#[derive(Default)]
struct PatientPatch {
    first_name: Option<String>,
    last_name: Option<String>,
    optional: Vec<(OptionalField, Option<String>)>,
}

/// The patient fields that may be empty.
#[derive(Clone, Copy)]
enum OptionalField {
    Title,
    Email,
    Dob,
    Gender,
    Sex,
    Address,
    City,
    Postcode,
    Country,
    PhoneType,
    PhoneNumber,
    Comments,
}

impl OptionalField {
    fn slot(self, f: &mut PatientFields) -> &mut Option<String> {
        match self {
            OptionalField::Title => &mut f.title,
            OptionalField::Email => &mut f.email,
            OptionalField::Dob => &mut f.dob,
            OptionalField::Gender => &mut f.gender,
            OptionalField::Sex => &mut f.sex,
            OptionalField::Address => &mut f.address,
            OptionalField::City => &mut f.city,
            OptionalField::Postcode => &mut f.postcode,
            OptionalField::Country => &mut f.country,
            OptionalField::PhoneType => &mut f.phone_type,
            OptionalField::PhoneNumber => &mut f.phone_number,
            OptionalField::Comments => &mut f.comments,
        }
    }
}

impl PatientPatch {
    fn apply(self, f: &mut PatientFields) {
        if let Some(first) = self.first_name {
            f.first_name = first;
        }
        if let Some(last) = self.last_name {
            f.last_name = last;
        }
        for (field, value) in self.optional {
            *field.slot(f) = value;
        }
    }
}

impl UpdatePatientDataInput {
    /// Checks each change as on create.
    fn into_patch(self) -> Result<PatientPatch> {
        let mut out = PatientPatch::default();
        for (name, target, update) in [
            ("first", &mut out.first_name, self.first),
            ("last", &mut out.last_name, self.last),
        ] {
            match update {
                MaybeUndefined::Undefined => {}
                MaybeUndefined::Null => {
                    return Err(bad_input(format!("patientData.{name} cannot be cleared")));
                }
                MaybeUndefined::Value(v) => {
                    *target = Some(required_text(
                        &format!("patientData.{name}"),
                        v,
                        MAX_LINE_CHARS,
                    )?)
                }
            }
        }
        let mut set = |field,
                       update: MaybeUndefined<String>,
                       clean: &dyn Fn(Option<String>) -> Result<Option<String>>|
         -> Result<()> {
            let mut value = None;
            if !update.is_undefined() {
                patch(&mut value, update, clean)?;
                out.optional.push((field, value));
            }
            Ok(())
        };
        set(OptionalField::Email, self.email, &|v| {
            email("patientData.email", v)
        })?;
        let dob = match self.dob {
            MaybeUndefined::Undefined => MaybeUndefined::Undefined,
            MaybeUndefined::Null => MaybeUndefined::Null,
            MaybeUndefined::Value(d) => match check_dob(Some(d))? {
                Some(text) => MaybeUndefined::Value(text),
                None => MaybeUndefined::Null,
            },
        };
        set(OptionalField::Dob, dob, &|v| Ok(v))?;
        for (field, name, update) in [
            (OptionalField::Title, "title", self.title),
            (OptionalField::Gender, "gender", self.gender),
            (OptionalField::Sex, "sex", self.sex),
            (OptionalField::Address, "address", self.address),
            (OptionalField::City, "city", self.city),
            (OptionalField::Postcode, "postcode", self.postcode),
            (OptionalField::Country, "country", self.country),
            (OptionalField::PhoneType, "phoneType", self.phone_type),
            (OptionalField::PhoneNumber, "phoneNumber", self.phone_number),
        ] {
            set(field, update, &line(name))?;
        }
        set(OptionalField::Comments, self.comments, &|v| {
            optional_text("patientData.comments", v, MAX_TEXT_CHARS)
        })?;
        Ok(out)
    }
}

/// Turns a store outcome into the mutation's envelope.
fn respond(id: &str, change: PatientChange) -> Option<ResponsePayload<Patient>> {
    ResponsePayload::of(change, "patient", id, Patient)
}

fn refuse_if_deleted(p: &stored::Patient) -> Result<(), String> {
    match p.deleted_at {
        Some(_) => Err(stored::DELETED.into()),
        None => Ok(()),
    }
}

#[derive(Default)]
pub struct PatientQueries;

#[Object]
impl PatientQueries {
    /// One patient, by id; null if the practice has no patient with this id. Deleted and
    /// archived patients are returned too, with `deleted` or `archived` set. Needs
    /// `patients:read` or `query:patient`.
    async fn patient(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The patient's id.")] id: ID,
    ) -> Result<Option<Patient>> {
        let principal = authorize(ctx, OperationKind::Query)?;
        let found = store(ctx)
            .practice(&principal.practice_id)
            .find_patient(&id)
            .await
            .or_fail()?;
        Ok(found.map(|p| Patient::read(ctx, p)))
    }

    /// A page of patients, by last name then first name. Archived and deleted patients are
    /// left out unless `options` asks for them. Needs `patients:read` or `query:patients`.
    async fn patients(
        &self,
        ctx: &Context<'_>,
        #[graphql(
            desc = "Text to look for, case-insensitively, in first name, last name, \
                          full name, email and date of birth (YYYY-MM-DD). At most 100 characters."
        )]
        search: Option<String>,
        #[graphql(desc = "Which page; default page 1 of 25.")] pagination: Option<Pagination>,
        #[graphql(desc = "Which patients beyond the active ones to include, and date filters.")]
        options: Option<QueryOptions>,
    ) -> Result<Option<PatientData>> {
        let principal = authorize(ctx, OperationKind::Query)?;
        let page = Pagination::request(pagination)?;
        let search = optional_text("search", search, MAX_SEARCH_CHARS)?;
        let options = options.unwrap_or_default();
        let filter = PatientFilter {
            search,
            include_archived: options.include_archived.unwrap_or(false),
            include_deleted: options.include_deleted.unwrap_or(false),
            created: options.created_at.map(|r| r.bounds()).transpose()?,
            updated: options.updated_at.map(|r| r.bounds()).transpose()?,
        };
        let result = store(ctx)
            .practice(&principal.practice_id)
            .list_patients(&filter, page)
            .await
            .or_fail()?;
        if ctx.look_ahead().field("data").field("labels").exists() {
            let ids = result.items.iter().map(|p| p.id.clone()).collect();
            loaders::prime::<loaders::PatientLabels>(ctx, ids).await?;
        }
        Ok(Some(PatientData {
            page_info: Some(PageInfo::of(page, &result)),
            data: items(result.items, |p| Patient::read(ctx, p)),
        }))
    }
}

#[derive(Default)]
pub struct PatientMutations;

/// Changes a patient, if the caller may: refuses a deleted patient, applies `change` under
/// the patient's row lock, records `action` in the audit log, and wraps the outcome in the
/// envelope.
async fn change_patient(
    ctx: &Context<'_>,
    id: &str,
    action: &'static str,
    labels: Option<&[String]>,
    change: impl FnOnce(&mut stored::Patient) -> Modification,
) -> Result<Option<ResponsePayload<Patient>>> {
    let outcome = authorize_write(ctx)?
        .modify_patient(id, action, labels, |p| {
            refuse_if_deleted(p)?;
            change(p)
        })
        .await
        .or_fail()?;
    Ok(respond(id, outcome))
}

#[Object]
impl PatientMutations {
    /// Adds a patient. Needs `patients:write`.
    async fn create_patient(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The new patient's data.")] patient_data: CreatePatientDataInput,
    ) -> Result<Option<ResponsePayload<Patient>>> {
        let practice = authorize_write(ctx)?;
        let (fields, labels) = patient_data.into_fields()?;
        let change = practice.create_patient(fields, &labels).await.or_fail()?;
        Ok(respond("", change))
    }

    /// Changes a patient's data. Refused for a deleted patient. Needs `patients:write`.
    async fn update_patient(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The patient's id.")] id: ID,
        #[graphql(desc = "The changes; omitted fields are left as they are.")]
        patient_data: UpdatePatientDataInput,
    ) -> Result<Option<ResponsePayload<Patient>>> {
        authorize(ctx, OperationKind::Mutation)?;
        let labels = patient_data.labels.clone().map(label_ids);
        let patch = patient_data.into_patch()?;
        change_patient(ctx, &id, "update", labels.as_deref(), |p| {
            patch.apply(&mut p.fields);
            Ok(())
        })
        .await
    }

    /// Deletes a patient: a soft delete that keeps the record, marked `deleted`, out of lists
    /// unless asked for. Needs `patients:write`.
    async fn delete_patient(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The patient's id.")] id: ID,
    ) -> Result<Option<ResponsePayload<Patient>>> {
        change_patient(ctx, &id, "delete", None, |p| {
            p.deleted_at = Some(now_ms());
            Ok(())
        })
        .await
    }

    /// Archives a patient: kept, but left out of lists unless asked for. Needs
    /// `patients:write`.
    async fn archive_patient(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The patient's id.")] id: ID,
        #[graphql(desc = "Why the patient is archived.")] reason: Option<String>,
        #[graphql(desc = "Free-text comments.")] comments: Option<String>,
    ) -> Result<Option<ResponsePayload<Patient>>> {
        authorize(ctx, OperationKind::Mutation)?;
        let reason = optional_text("reason", reason, MAX_LINE_CHARS)?;
        let comments = optional_text("comments", comments, MAX_TEXT_CHARS)?;
        change_patient(ctx, &id, "archive", None, |p| {
            if p.archived_at.is_some() {
                return Err("This patient is already archived".into());
            }
            p.archived_at = Some(now_ms());
            p.archive_reason = reason;
            p.archive_comments = comments;
            Ok(())
        })
        .await
    }

    /// Brings an archived patient back. Needs `patients:write`.
    async fn unarchive_patient(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The patient's id.")] id: ID,
    ) -> Result<Option<ResponsePayload<Patient>>> {
        change_patient(ctx, &id, "unarchive", None, |p| {
            if p.archived_at.is_none() {
                return Err("This patient is not archived".into());
            }
            p.archived_at = None;
            p.archive_reason = None;
            p.archive_comments = None;
            Ok(())
        })
        .await
    }

    /// Puts a label of the catalogue on a patient, and returns the patient with it in
    /// `labels`. Refused if the label is already on the patient. Needs `patients:write` or
    /// `mutation:addPatientLabel`.
    async fn add_patient_label(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The patient's id.")] patient_id: ID,
        #[graphql(desc = "The label's id in the catalogue (Label.id).")] label_reference_id: ID,
    ) -> Result<Option<ResponsePayload<Patient>>> {
        let change = authorize_write(ctx)?
            .add_patient_label(&patient_id, &label_reference_id)
            .await
            .or_fail()?;
        Ok(respond(&patient_id, change))
    }

    /// Takes a label off a patient. Needs `patients:write`.
    async fn remove_patient_label(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The patient's id.")] patient_id: ID,
        #[graphql(
            desc = "The label's place on the patient (PatientLabel.id); the catalogue \
                          id (PatientLabel.referenceId) is accepted too."
        )]
        label_id: ID,
    ) -> Result<Option<ResponsePayload<Patient>>> {
        let change = authorize_write(ctx)?
            .remove_patient_label(&patient_id, &label_id)
            .await
            .or_fail()?;
        Ok(respond(&patient_id, change))
    }
}

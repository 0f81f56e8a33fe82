//! Patients: the `patient` and `patients` queries, the patient mutations and their inputs.

use async_graphql::{Context, ID, InputObject, MaybeUndefined, Object, Result};

use super::access::{authorize, authorize_write, reader, writer};
use super::error::{OrFail, bad_input};
use super::input::{MAX_LINE_CHARS, MAX_TEXT_CHARS, email, optional_lines, optional_text};
use super::loaders;
use super::objects::record::{PatientArchiveReason, PatientUnarchiveReason, enum_name};
use super::objects::{PageInfo, Patient, PatientData, ResponsePayload, envelope, items};
use super::options::QueryOptions;
use super::pagination::Pagination;
use super::record::{
    self, AddCustomAttributeData, InsInput, PatientCommunicationPreferencesInput, PlaceOfBirthInput,
};
use super::scalars::Date;
use crate::auth::OperationKind;
use crate::domain::limits::{
    MAX_ATTRIBUTES_PER_PATIENT, MAX_LABELS_PER_PATIENT, MAX_SEARCH_MATCHES,
};
use crate::domain::{Bound, Change, Refusal};
use crate::store::patient_record::AttributeEntry;
use crate::store::patients::{PatientFields, PatientFilter, PatientPatch};

/// A part of the record kept as JSON (INS, communication preferences).
fn store_json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

/// Longest search string.
const MAX_SEARCH_CHARS: usize = 100;

/// The data of a new patient.
#[derive(InputObject)]
pub struct CreatePatientDataInput {
    /// Form of address, e.g. "Mrs".
    pub title: Option<String>,
    /// First name; blank is none. A patient needs a first name, a last name or an email.
    pub first: Option<String>,
    /// Last name; blank is none.
    pub last: Option<String>,
    /// Email address.
    pub email: Option<String>,
    /// Date of birth; not in the future.
    pub dob: Option<Date>,
    /// Gender, as the patient describes it.
    pub gender: Option<String>,
    /// Sex, as recorded for clinical purposes.
    pub sex: Option<String>,
    /// Street and number; it may take several lines.
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
    /// Surname at birth.
    pub birth_surname: Option<String>,
    /// First name at birth.
    pub birth_name: Option<String>,
    /// Every given name at birth.
    pub birth_names: Option<String>,
    /// Where the patient was born.
    pub place_of_birth: Option<PlaceOfBirthInput>,
    /// Social security number: 5 to 30 letters and digits, spaces and hyphens allowed between
    /// them.
    pub social_security_number: Option<String>,
    /// The reference the patient's payments carry.
    pub payment_reference: Option<String>,
    /// The patient's id in Google (an integration's).
    pub google_client_id: Option<String>,
    /// The patient's occupation.
    pub occupation: Option<String>,
    /// True to put the patient on hold: they cannot be booked. Default false.
    pub on_hold: Option<bool>,
    /// How the patient agreed to be contacted.
    pub communication_preferences: Option<PatientCommunicationPreferencesInput>,
    /// Custom attributes (at most 50: past that the patient is refused in `error`); a null
    /// entry adds none.
    pub custom_attributes: Option<Vec<Option<AddCustomAttributeData>>>,
}

/// Changes to a patient. An omitted field is left as it is; null clears it (a blank name too;
/// a patient keeps a first name, a last name or an email, or the change is refused in
/// `error`). `placeOfBirth`, `communicationPreferences` and `ins` change in part: what they
/// give replaces what was kept, what they leave out stays. `labels`, when given, replaces
/// the patient's labels.
#[derive(InputObject)]
pub struct UpdatePatientDataInput {
    /// Form of address, e.g. "Mrs".
    pub title: MaybeUndefined<String>,
    /// First name; null or blank clears it.
    pub first: MaybeUndefined<String>,
    /// Last name; null or blank clears it.
    pub last: MaybeUndefined<String>,
    /// Email address.
    pub email: MaybeUndefined<String>,
    /// Date of birth; not in the future.
    pub dob: MaybeUndefined<Date>,
    /// Gender, as the patient describes it.
    pub gender: MaybeUndefined<String>,
    /// Sex, as recorded for clinical purposes.
    pub sex: MaybeUndefined<String>,
    /// Street and number; it may take several lines.
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
    /// Surname at birth.
    pub birth_surname: MaybeUndefined<String>,
    /// First name at birth.
    pub birth_name: MaybeUndefined<String>,
    /// Every given name at birth.
    pub birth_names: MaybeUndefined<String>,
    /// Where the patient was born: a name or code given replaces the one kept (null or blank
    /// clears it), one left out stays; null clears both.
    pub place_of_birth: MaybeUndefined<PlaceOfBirthInput>,
    /// Social security number.
    pub social_security_number: MaybeUndefined<String>,
    /// The reference the patient's payments carry.
    pub payment_reference: MaybeUndefined<String>,
    /// The patient's id in Google.
    pub google_client_id: MaybeUndefined<String>,
    /// The patient's occupation.
    pub occupation: MaybeUndefined<String>,
    /// True to put the patient on hold (no booking), false to take them off.
    pub on_hold: Option<bool>,
    /// How the patient agreed to be contacted: each answer given replaces the one kept (null
    /// clears it), those left out stay; null clears them all.
    pub communication_preferences: MaybeUndefined<PatientCommunicationPreferencesInput>,
    /// The patient's INS: each field given replaces the one kept (null or blank clears it),
    /// those left out stay; null clears it whole.
    pub ins: MaybeUndefined<InsInput>,
}

/// A single line of text of `patientData`, checked.
fn line(field: &'static str) -> impl Fn(Option<String>) -> Result<Option<String>> {
    move |v| optional_text(&format!("patientData.{field}"), v, MAX_LINE_CHARS)
}

/// The street address of `patientData`, checked: it may take several lines.
fn street(value: Option<String>) -> Result<Option<String>> {
    optional_lines("patientData.address", value, MAX_LINE_CHARS)
}

/// The notes of `patientData`, checked.
fn notes(value: Option<String>) -> Result<Option<String>> {
    optional_lines("patientData.comments", value, MAX_TEXT_CHARS)
}

/// A name of `patientData` (`first`, `last`), checked; blank is none, kept as empty.
fn name(field: &'static str, value: Option<String>) -> Result<String> {
    Ok(line(field)(value)?.unwrap_or_default())
}

/// The patient's email, checked and lower-cased.
fn patient_email(value: Option<String>) -> Result<Option<String>> {
    email("patientData.email", value)
}

/// A date of birth, checked: not in the future.
fn dob(dob: Option<Date>) -> Result<Option<String>> {
    match dob {
        Some(d) if d.0 > chrono::Utc::now().date_naive() => Err(bad_input(format!(
            "patientData.dob must not be in the future, got {}",
            d.to_stored()
        ))),
        other => Ok(other.map(Date::to_stored)),
    }
}

/// Label ids without repeats, in the order given; at most as many as a patient may have.
fn label_ids(ids: Vec<ID>) -> Result<Vec<String>> {
    if ids.len() > MAX_LABELS_PER_PATIENT {
        return Err(bad_input(format!(
            "patientData.labels may name at most {MAX_LABELS_PER_PATIENT} labels, got {}",
            ids.len()
        )));
    }
    let mut seen = std::collections::HashSet::with_capacity(ids.len());
    Ok(ids
        .into_iter()
        .map(|id| id.0)
        .filter(|id| seen.insert(id.clone()))
        .collect())
}

/// A new patient as createPatient's input gives it, checked.
struct NewPatient {
    fields: PatientFields,
    /// The catalogue's labels to put on them.
    labels: Vec<String>,
    attributes: Vec<AttributeEntry>,
}

impl CreatePatientDataInput {
    /// The input checked: a mistake in it is an error; more custom attributes than a patient
    /// holds, a refusal.
    fn into_fields(self, ins_data: Option<InsInput>) -> Result<Change<NewPatient>> {
        let first = name("first", self.first)?;
        let last = name("last", self.last)?;
        let email = patient_email(self.email)?;
        if first.is_empty() && last.is_empty() && email.is_none() {
            return Err(bad_input(
                "patientData needs a first name, a last name or an email",
            ));
        }
        let attributes: Vec<AddCustomAttributeData> = self
            .custom_attributes
            .unwrap_or_default()
            .into_iter()
            .flatten()
            .collect();
        // More attributes than a patient holds is refused as the practice's rule (in
        // `error`, as the 51st addPatientAttribute is), once the rest of the input, each of
        // them included, has been found sound.
        let too_many = (attributes.len() > MAX_ATTRIBUTES_PER_PATIENT).then_some(
            Refusal::ListTooLong(Bound::AttributesOnPatient, attributes.len()),
        );
        let attributes = attributes
            .into_iter()
            .map(|a| record::attribute("patientData.customAttributes", a))
            .collect::<Result<Vec<_>>>()?;
        let place = self
            .place_of_birth
            .map(record::place_of_birth)
            .transpose()?
            .unwrap_or_default();
        let fields = PatientFields {
            title: line("title")(self.title)?,
            first_name: first,
            last_name: last,
            email,
            birth_surname: line("birthSurname")(self.birth_surname)?,
            birth_name: line("birthName")(self.birth_name)?,
            birth_names: line("birthNames")(self.birth_names)?,
            place_of_birth_name: place.name.flatten(),
            place_of_birth_code: place.code.flatten(),
            social_security_number: record::social_security_number(self.social_security_number)?,
            payment_reference: line("paymentReference")(self.payment_reference)?,
            google_client_id: line("googleClientId")(self.google_client_id)?,
            occupation: line("occupation")(self.occupation)?,
            on_hold: i64::from(self.on_hold.unwrap_or(false)),
            communication: self
                .communication_preferences
                .map(record::communication)
                .transpose()?
                .map(|c| store_json(&c.value)),
            ins: ins_data
                .map(|i| record::ins("insData", i))
                .transpose()?
                .map(|i| store_json(&i.value)),
            dob: dob(self.dob)?,
            gender: line("gender")(self.gender)?,
            sex: line("sex")(self.sex)?,
            address: street(self.address)?,
            city: line("city")(self.city)?,
            postcode: line("postcode")(self.postcode)?,
            country: line("country")(self.country)?,
            phone_type: line("phoneType")(self.phone_type)?,
            phone_number: line("phoneNumber")(self.phone_number)?,
            comments: notes(self.comments)?,
        };
        let labels = label_ids(self.labels.unwrap_or_default())?;
        Ok(match too_many {
            Some(refusal) => Err(refusal.into()),
            None => Ok(NewPatient {
                fields,
                labels,
                attributes,
            }),
        })
    }
}

/// Adds to `patch` the change of one optional field: omitted leaves it, null clears it, a
/// value is checked with `check` (as on create) and set with `set`.
fn change<T, V: Send + 'static>(
    patch: &mut PatientPatch,
    update: MaybeUndefined<T>,
    check: impl FnOnce(Option<T>) -> Result<Option<V>>,
    set: fn(&mut PatientFields, Option<V>),
) -> Result<()> {
    let value = match update {
        MaybeUndefined::Undefined => return Ok(()),
        MaybeUndefined::Null => None,
        MaybeUndefined::Value(v) => check(Some(v))?,
    };
    patch.set(move |f| set(f, value));
    Ok(())
}

/// Adds to `patch` the change of a name: null or blank clears it (kept as empty).
fn rename(
    patch: &mut PatientPatch,
    field: &'static str,
    update: MaybeUndefined<String>,
    set: fn(&mut PatientFields, String),
) -> Result<()> {
    let value = match update {
        MaybeUndefined::Undefined => return Ok(()),
        MaybeUndefined::Null => None,
        MaybeUndefined::Value(v) => Some(v),
    };
    let value = name(field, value)?;
    patch.set(move |f| set(f, value));
    Ok(())
}

impl UpdatePatientDataInput {
    /// Checks each change as on create.
    fn into_patch(self) -> Result<PatientPatch> {
        let mut p = PatientPatch::default();
        rename(&mut p, "first", self.first, |f, v| f.first_name = v)?;
        rename(&mut p, "last", self.last, |f, v| f.last_name = v)?;
        change(&mut p, self.email, patient_email, |f, v| f.email = v)?;
        change(&mut p, self.dob, dob, |f, v| f.dob = v)?;
        change(&mut p, self.title, line("title"), |f, v| f.title = v)?;
        change(&mut p, self.gender, line("gender"), |f, v| f.gender = v)?;
        change(&mut p, self.sex, line("sex"), |f, v| f.sex = v)?;
        change(&mut p, self.address, street, |f, v| f.address = v)?;
        change(&mut p, self.city, line("city"), |f, v| f.city = v)?;
        change(&mut p, self.postcode, line("postcode"), |f, v| {
            f.postcode = v
        })?;
        change(&mut p, self.country, line("country"), |f, v| f.country = v)?;
        let phone_type = line("phoneType");
        change(&mut p, self.phone_type, phone_type, |f, v| f.phone_type = v)?;
        let phone_number = line("phoneNumber");
        change(&mut p, self.phone_number, phone_number, |f, v| {
            f.phone_number = v
        })?;
        change(&mut p, self.comments, notes, |f, v| f.comments = v)?;
        let birth_surname = line("birthSurname");
        change(&mut p, self.birth_surname, birth_surname, |f, v| {
            f.birth_surname = v
        })?;
        change(&mut p, self.birth_name, line("birthName"), |f, v| {
            f.birth_name = v
        })?;
        change(&mut p, self.birth_names, line("birthNames"), |f, v| {
            f.birth_names = v
        })?;
        change(
            &mut p,
            self.place_of_birth,
            |place| place.map(record::place_of_birth).transpose(),
            PatientFields::merge_place_of_birth,
        )?;
        change(
            &mut p,
            self.social_security_number,
            record::social_security_number,
            |f, v| f.social_security_number = v,
        )?;
        let payment_reference = line("paymentReference");
        change(&mut p, self.payment_reference, payment_reference, |f, v| {
            f.payment_reference = v
        })?;
        let google_client_id = line("googleClientId");
        change(&mut p, self.google_client_id, google_client_id, |f, v| {
            f.google_client_id = v
        })?;
        change(&mut p, self.occupation, line("occupation"), |f, v| {
            f.occupation = v
        })?;
        if let Some(on_hold) = self.on_hold {
            p.set(move |f| f.on_hold = i64::from(on_hold));
        }
        change(
            &mut p,
            self.communication_preferences,
            |c| c.map(record::communication).transpose(),
            PatientFields::merge_communication,
        )?;
        change(
            &mut p,
            self.ins,
            |i| i.map(|i| record::ins("patientData.ins", i)).transpose(),
            PatientFields::merge_ins,
        )?;
        Ok(p)
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
        let store = reader(ctx, principal);
        if !ctx.look_ahead().field("labels").exists() {
            let found = store.find_patient(&id).await.or_fail()?;
            return Ok(found.map(|p| Patient::read(ctx, p)));
        }
        // The labels come with the patient, in the same statement.
        let Some((patient, labels)) = store.find_patient_with_labels(&id).await.or_fail()? else {
            return Ok(None);
        };
        loaders::feed::<loaders::PatientLabels>(ctx, patient.id.clone(), labels).await?;
        Ok(Some(Patient::read(ctx, patient)))
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
        let Ok(result) = reader(ctx, principal)
            .list_patients(&filter, page)
            .await
            .or_fail()?
        else {
            return Err(bad_input(format!(
                "The search matches more than {MAX_SEARCH_MATCHES} patients: type more of a \
                 name, an email or a date of birth"
            )));
        };
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

#[Object]
impl PatientMutations {
    /// Adds a patient. Needs `patients:write`.
    async fn create_patient(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The patient's INS (France).")] ins_data: Option<InsInput>,
        #[graphql(desc = "The new patient's data.")] patient_data: CreatePatientDataInput,
    ) -> Result<Option<ResponsePayload<Patient>>> {
        let practice = authorize_write(ctx)?;
        let new = match patient_data.into_fields(ins_data)? {
            Ok(new) => new,
            Err(denied) => return envelope(ctx, Err(denied), Patient),
        };
        let change = practice
            .create_patient(new.fields, &new.labels, |p| {
                p.set_attributes(new.attributes)
            })
            .await
            .or_fail()?;
        envelope(ctx, change, Patient)
    }

    /// Changes a patient's data. Refused for a deleted patient. Needs `patients:write`.
    async fn update_patient(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The patient's id.")] id: ID,
        #[graphql(desc = "The changes; omitted fields are left as they are.")]
        patient_data: UpdatePatientDataInput,
    ) -> Result<Option<ResponsePayload<Patient>>> {
        let practice = authorize_write(ctx)?;
        let labels = patient_data.labels.clone().map(label_ids).transpose()?;
        let patch = patient_data.into_patch()?;
        let change = practice
            .update_patient(&id, patch, labels.as_deref())
            .await
            .or_fail()?;
        envelope(ctx, change, Patient)
    }

    /// Deletes a patient: a soft delete that keeps the record, marked `deleted`, out of lists
    /// unless asked for. Needs `patients:write`.
    async fn delete_patient(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The patient's id.")] id: ID,
    ) -> Result<Option<ResponsePayload<Patient>>> {
        let change = authorize_write(ctx)?.delete_patient(&id).await.or_fail()?;
        envelope(ctx, change, Patient)
    }

    /// Archives a patient: kept, but left out of lists unless asked for; who did it is
    /// recorded (Patient.archivedInfo). Needs `patients:write`.
    async fn archive_patient(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The patient's id.")] id: ID,
        #[graphql(desc = "Why, as one of the reasons.")] archive_reason: Option<
            PatientArchiveReason,
        >,
        #[graphql(desc = "Why, in free text (archiveReason is preferred).")] reason: Option<String>,
        #[graphql(desc = "Free-text comments.")] comments: Option<String>,
    ) -> Result<Option<ResponsePayload<Patient>>> {
        let principal = authorize(ctx, OperationKind::Mutation)?;
        let reason = match archive_reason {
            Some(reason) => Some(enum_name(reason).to_string()),
            None => optional_text("reason", reason, MAX_LINE_CHARS)?,
        };
        let comments = optional_lines("comments", comments, MAX_TEXT_CHARS)?;
        let change = writer(ctx, principal)
            .archive_patient(&id, reason, comments, principal.user_id())
            .await
            .or_fail()?;
        envelope(ctx, change, Patient)
    }

    /// Brings an archived patient back, with why. Needs `patients:write`.
    async fn unarchive_patient(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The patient's id.")] id: ID,
        #[graphql(desc = "Why the patient is brought back.")] unarchive_reason: Option<
            PatientUnarchiveReason,
        >,
    ) -> Result<Option<ResponsePayload<Patient>>> {
        let principal = authorize(ctx, OperationKind::Mutation)?;
        let reason = unarchive_reason.map(|r| enum_name(r).to_string());
        let change = writer(ctx, principal)
            .unarchive_patient(&id, reason, principal.user_id())
            .await
            .or_fail()?;
        envelope(ctx, change, Patient)
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
        envelope(ctx, change, Patient)
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
        envelope(ctx, change, Patient)
    }
}

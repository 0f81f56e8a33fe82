//! The rest of a patient's record: its inputs, their checks, and the mutations of its
//! sub-resources (phones, numbers, custom attributes, relationships, access groups,
//! membership). Each is `patients:write`, refused for a deleted patient, and an event
//! (`patient.phone.added`, ...).

use async_graphql::{Context, ID, InputObject, MaybeUndefined, Object, Result};

use super::access::authorize_write;
use super::error::{OrFail, bad_input};
use super::input::{
    MAX_LINE_CHARS, MAX_TEXT_CHARS, email, optional_lines, optional_text, required_lines,
    required_text,
};
use super::objects::record::{
    PatientInsIdentityAlertStatus, PatientInsStatus, PatientRelationshipType, enum_name,
};
use super::objects::{Patient, ResponsePayload, envelope};
use super::scalars::Date;
use crate::domain::{self, Refusal};
use crate::store::patient_record::{
    AttributeEntry, Communication, Contact, Ins, Part, PlaceChange,
};

/// The patient's INS (France's national health identity). In updatePatient, a field left
/// out is kept and a field given as null (or blank) is cleared.
#[derive(InputObject, Clone)]
#[graphql(name = "INSInput")]
pub struct InsInput {
    /// The INS number: 13 characters and a 2-digit key, 15 in all; digits, with 2A or 2B
    /// (Corsica) in the department's place.
    pub number: MaybeUndefined<String>,
    /// The OID of the authority that issued it (digits and dots).
    pub oid: MaybeUndefined<String>,
    /// True when the identity was checked by hand.
    pub manual_identification: MaybeUndefined<bool>,
    /// An alert on the identity.
    pub identity_alert_status: MaybeUndefined<PatientInsIdentityAlertStatus>,
    /// Why the alert was raised.
    pub identity_alert_comment: MaybeUndefined<String>,
    /// Where the INS stands.
    pub status: MaybeUndefined<PatientInsStatus>,
    /// The identity document it was checked against.
    pub identity_document: MaybeUndefined<String>,
}

/// Where the patient was born. In updatePatient, a field left out is kept and a field given
/// as null (or blank) is cleared.
#[derive(InputObject, Clone)]
pub struct PlaceOfBirthInput {
    /// The place's name.
    pub name: MaybeUndefined<String>,
    /// The place's official code.
    pub code: MaybeUndefined<String>,
}

/// How the patient agreed to be contacted. In updatePatient, a field left out is kept and a
/// field given as null (or blank) is cleared.
#[derive(InputObject, Clone)]
pub struct PatientCommunicationPreferencesInput {
    /// By email.
    pub receive_email: MaybeUndefined<bool>,
    /// By text message.
    #[graphql(name = "receiveSMS")]
    pub receive_sms: MaybeUndefined<bool>,
    /// With promotions.
    pub promotional_marketing: MaybeUndefined<bool>,
    /// The patient's answer to the privacy policy, e.g. "accepted".
    pub privacy_policy: MaybeUndefined<String>,
    /// With reminders of payments due.
    pub payment_reminders: MaybeUndefined<bool>,
}

/// A new custom attribute: a question and the patient's answer.
#[derive(InputObject, Clone)]
pub struct AddCustomAttributeData {
    /// Its title, e.g. "Allergies" (1 to 200 characters).
    pub title: String,
    /// The question (at most 5,000 characters).
    pub text: String,
    /// The patient's answer (at most 5,000 characters).
    pub response: String,
}

/// Changes to a custom attribute: the parts given.
#[derive(InputObject)]
pub struct UpdateCustomAttributeData {
    /// A new title.
    pub title: Option<String>,
    /// A new question.
    pub text: Option<String>,
    /// A new answer.
    pub response: Option<String>,
}

/// A new phone.
#[derive(InputObject)]
pub struct AddPhoneData {
    /// The number (1 to 200 characters).
    pub phone_number: String,
    /// What kind of phone, e.g. "mobile".
    pub phone_type: String,
}

/// Changes to a phone: the parts given.
#[derive(InputObject)]
pub struct UpdatePhoneData {
    /// A new number.
    pub phone_number: Option<String>,
    /// A new kind.
    pub phone_type: Option<String>,
}

/// The patient's value of one of the practice's numbers.
#[derive(InputObject)]
pub struct AddPatientNumberData {
    /// The number definition's id (PracticeNumbers.id).
    pub number_id: ID,
    /// The value: one line, of 1 to 500 characters (the contract's limit on an entry's
    /// value; a longer one is refused in `error`).
    pub value: String,
}

/// How to reach someone related to a patient. A relationship names another patient of the
/// practice (`relatedAccountId`) or is a free contact, which needs a first name, a last name
/// or a company name.
#[derive(InputObject, Clone, Default)]
pub struct PatientRelationshipContactInput {
    /// Another patient of the practice this contact is.
    pub related_account_id: MaybeUndefined<ID>,
    /// Where the contact came from (an integration's name).
    pub source: MaybeUndefined<String>,
    /// The contact's id there.
    pub source_id: MaybeUndefined<ID>,
    /// First name.
    pub first_name: MaybeUndefined<String>,
    /// Last name.
    pub last_name: MaybeUndefined<String>,
    /// Form of address.
    pub title: MaybeUndefined<String>,
    /// Company name.
    pub company_name: MaybeUndefined<String>,
    /// What kind of phone `phoneNumber` is.
    pub phone_type: MaybeUndefined<String>,
    /// Phone number.
    pub phone_number: MaybeUndefined<String>,
    /// Email address.
    pub email: MaybeUndefined<String>,
    /// Street and number; it may take several lines.
    pub address: MaybeUndefined<String>,
    /// Town or city.
    pub city: MaybeUndefined<String>,
    /// Postal code.
    pub postcode: MaybeUndefined<String>,
    /// Country.
    pub country: MaybeUndefined<String>,
    /// Notes (at most 5,000 characters).
    pub notes: MaybeUndefined<String>,
    /// An insurance policy's number.
    pub policy_number: MaybeUndefined<String>,
    /// An insurer's authorisation code.
    pub authorization_code: MaybeUndefined<String>,
}

/// A line of text of an argument, checked.
fn line(field: &str, value: Option<String>) -> Result<Option<String>> {
    optional_text(field, value, MAX_LINE_CHARS)
}

/// A number's value, checked: against the rules of its input (one line, not blank), a
/// mistake; past the contract's limit on its length, a business refusal, answered in `error`
/// ([`domain::number_value_refusal`]).
fn number_value(field: &str, value: String) -> Result<Result<String, Refusal>> {
    let value = required_text(field, value, usize::MAX)?;
    Ok(domain::number_value_refusal(&value).map_or(Ok(value), Err))
}

/// A social security number: 5 to 30 characters, letters and digits, with spaces and hyphens
/// between them. Upper-cased.
pub fn social_security_number(value: Option<String>) -> Result<Option<String>> {
    let Some(text) = line("patientData.socialSecurityNumber", value)? else {
        return Ok(None);
    };
    let significant = text.chars().filter(char::is_ascii_alphanumeric).count();
    // Each space or hyphen between two letters or digits: none at an end, none beside
    // another.
    let separator = |c: char| c == ' ' || c == '-';
    let chars: Vec<char> = text.chars().collect();
    let allowed = chars
        .iter()
        .all(|c| c.is_ascii_alphanumeric() || separator(*c))
        && chars.first().is_some_and(char::is_ascii_alphanumeric)
        && chars.last().is_some_and(char::is_ascii_alphanumeric)
        && !chars.windows(2).any(|w| separator(w[0]) && separator(w[1]));
    if !allowed || !(5..=30).contains(&significant) || text.chars().count() > 40 {
        return Err(bad_input(format!(
            "patientData.socialSecurityNumber must be 5 to 30 letters and digits (spaces and \
             hyphens allowed between them), got {text:?}"
        )));
    }
    Ok(Some(text.to_uppercase()))
}

/// An INS, checked.
pub fn ins(field: &str, input: InsInput) -> Result<Part<Ins>> {
    let f = |name: &str| format!("{field}.{name}");
    let given = given(&[
        ("number", input.number.is_undefined()),
        ("oid", input.oid.is_undefined()),
        (
            "manual_identification",
            input.manual_identification.is_undefined(),
        ),
        (
            "identity_alert_status",
            input.identity_alert_status.is_undefined(),
        ),
        (
            "identity_alert_comment",
            input.identity_alert_comment.is_undefined(),
        ),
        ("status", input.status.is_undefined()),
        ("identity_document", input.identity_document.is_undefined()),
    ]);
    let number = line(&f("number"), input.number.take())?;
    if let Some(n) = &number {
        let ok = n.len() == 15
            && n.char_indices()
                .all(|(i, c)| c.is_ascii_digit() || (i == 6 && matches!(c, 'A' | 'B' | 'a' | 'b')));
        if !ok {
            return Err(bad_input(format!(
                "{} must be 15 characters: digits, with 2A or 2B for Corsica, got {n:?}",
                f("number")
            )));
        }
    }
    let oid = line(&f("oid"), input.oid.take())?;
    if let Some(oid) = &oid
        && !oid
            .split('.')
            .all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err(bad_input(format!(
            "{} must be an OID such as 1.2.250.1.213.1.4.8, got {oid:?}",
            f("oid")
        )));
    }
    let value = Ins {
        number: number.map(|n| n.to_uppercase()),
        oid,
        manual_identification: input.manual_identification.take(),
        identity_alert_status: input
            .identity_alert_status
            .take()
            .map(|s| enum_name(s).to_string()),
        identity_alert_comment: optional_lines(
            &f("identityAlertComment"),
            input.identity_alert_comment.take(),
            MAX_TEXT_CHARS,
        )?,
        status: input.status.take().map(|s| enum_name(s).to_string()),
        identity_document: line(&f("identityDocument"), input.identity_document.take())?,
    };
    Ok(Part { value, given })
}

/// The stored names of the fields an input gives (`undefined` false): null among them.
fn given(fields: &[(&'static str, bool)]) -> Vec<&'static str> {
    fields
        .iter()
        .filter(|(_, undefined)| !undefined)
        .map(|(name, _)| *name)
        .collect()
}

/// Communication preferences, checked.
pub fn communication(input: PatientCommunicationPreferencesInput) -> Result<Part<Communication>> {
    let given = given(&[
        ("receive_email", input.receive_email.is_undefined()),
        ("receive_sms", input.receive_sms.is_undefined()),
        (
            "promotional_marketing",
            input.promotional_marketing.is_undefined(),
        ),
        ("payment_reminders", input.payment_reminders.is_undefined()),
        ("privacy_policy", input.privacy_policy.is_undefined()),
    ]);
    let value = Communication {
        receive_email: input.receive_email.take(),
        receive_sms: input.receive_sms.take(),
        promotional_marketing: input.promotional_marketing.take(),
        payment_reminders: input.payment_reminders.take(),
        privacy_policy: line(
            "patientData.communicationPreferences.privacyPolicy",
            input.privacy_policy.take(),
        )?,
    };
    Ok(Part { value, given })
}

/// A place of birth, checked: its name and code, each None when not given, Some(None) when
/// given as null or blank.
pub fn place_of_birth(input: PlaceOfBirthInput) -> Result<PlaceChange> {
    let part = |name: &str, value: MaybeUndefined<String>| -> Result<Option<Option<String>>> {
        match value.is_undefined() {
            true => Ok(None),
            false => Ok(Some(line(
                &format!("patientData.placeOfBirth.{name}"),
                value.take(),
            )?)),
        }
    };
    Ok(PlaceChange {
        name: part("name", input.name)?,
        code: part("code", input.code)?,
    })
}

/// A custom attribute, checked.
pub fn attribute(field: &str, input: AddCustomAttributeData) -> Result<AttributeEntry> {
    Ok(AttributeEntry {
        id: String::new(),
        title: required_text(&format!("{field}.title"), input.title, MAX_LINE_CHARS)?,
        text: required_lines(&format!("{field}.text"), input.text, MAX_TEXT_CHARS)?,
        response: optional_lines(
            &format!("{field}.response"),
            Some(input.response),
            MAX_TEXT_CHARS,
        )?
        .unwrap_or_default(),
        required: false,
    })
}

/// A check of an optional line of text: the field's name, its value; the value to keep.
type Check<'c> = &'c dyn Fn(&str, Option<String>) -> Result<Option<String>>;

/// Contact details, checked; `complete` when they make a new relationship, which needs a
/// related account or a name. A field given null or blank is left out of a new one, and
/// cleared from one changed (an empty text in [`Contact`], which `merge` reads so).
fn contact(input: PatientRelationshipContactInput, complete: bool) -> Result<Contact> {
    let f = |name: &str| format!("contactDetails.{name}");
    // Absent: None; null or blank: cleared; a value: checked by `check`.
    let field = |name: &str, value: MaybeUndefined<String>, check: Check| -> Result<_> {
        Ok(match value {
            MaybeUndefined::Undefined => None,
            MaybeUndefined::Null => (!complete).then(String::new),
            MaybeUndefined::Value(value) => {
                check(&f(name), Some(value))?.or_else(|| (!complete).then(String::new))
            }
        })
    };
    let id = |value: MaybeUndefined<ID>| value.map_value(|id| id.0);
    let lines = |max| move |field: &str, value| optional_lines(field, value, max);
    let contact = Contact {
        related_account_id: field("relatedAccountId", id(input.related_account_id), &|_, v| {
            Ok(v.filter(|v| !v.trim().is_empty()))
        })?,
        source: field("source", input.source, &line)?,
        source_id: field("sourceId", id(input.source_id), &line)?,
        first_name: field("firstName", input.first_name, &line)?,
        last_name: field("lastName", input.last_name, &line)?,
        title: field("title", input.title, &line)?,
        company_name: field("companyName", input.company_name, &line)?,
        phone_type: field("phoneType", input.phone_type, &line)?,
        phone_number: field("phoneNumber", input.phone_number, &line)?,
        email: field("email", input.email, &email)?,
        address: field("address", input.address, &lines(MAX_LINE_CHARS))?,
        city: field("city", input.city, &line)?,
        postcode: field("postcode", input.postcode, &line)?,
        country: field("country", input.country, &line)?,
        notes: field("notes", input.notes, &lines(MAX_TEXT_CHARS))?,
        policy_number: field("policyNumber", input.policy_number, &line)?,
        authorization_code: field("authorizationCode", input.authorization_code, &line)?,
    };
    if complete && !contact.named() {
        return Err(bad_input(
            "contactDetails needs a relatedAccountId (another patient), or a firstName, \
             lastName or companyName",
        ));
    }
    Ok(contact)
}

#[derive(Default)]
pub struct RecordMutations;

#[Object]
impl RecordMutations {
    /// Adds a phone to a patient (at most 10). Needs `patients:write`.
    async fn add_patient_phone_number(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The patient's id.")] patient_id: ID,
        #[graphql(desc = "The phone.")] phone_data: AddPhoneData,
    ) -> Result<Option<ResponsePayload<Patient>>> {
        let practice = authorize_write(ctx)?;
        let number = required_text(
            "phoneData.phoneNumber",
            phone_data.phone_number,
            MAX_LINE_CHARS,
        )?;
        let kind = required_text("phoneData.phoneType", phone_data.phone_type, MAX_LINE_CHARS)?;
        let change = practice
            .add_phone(&patient_id, kind, number)
            .await
            .or_fail()?;
        envelope(ctx, change, Patient)
    }

    /// Changes a phone of a patient. Needs `patients:write`.
    async fn update_patient_phone_number(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The patient's id.")] patient_id: ID,
        #[graphql(desc = "The phone's id (Phone.phoneId).")] phone_id: ID,
        #[graphql(desc = "The changes.")] phone_data: UpdatePhoneData,
    ) -> Result<Option<ResponsePayload<Patient>>> {
        let practice = authorize_write(ctx)?;
        let number = phone_data
            .phone_number
            .map(|n| required_text("phoneData.phoneNumber", n, MAX_LINE_CHARS))
            .transpose()?;
        let kind = line("phoneData.phoneType", phone_data.phone_type)?;
        let change = practice
            .update_phone(&patient_id, &phone_id, kind, number)
            .await
            .or_fail()?;
        envelope(ctx, change, Patient)
    }

    /// Takes a phone off a patient. Needs `patients:write`.
    async fn remove_patient_phone_number(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The patient's id.")] patient_id: ID,
        #[graphql(desc = "The phone's id (Phone.phoneId).")] phone_id: ID,
    ) -> Result<Option<ResponsePayload<Patient>>> {
        let change = authorize_write(ctx)?
            .remove_phone(&patient_id, &phone_id)
            .await
            .or_fail()?;
        envelope(ctx, change, Patient)
    }

    /// Records the patient's value of one of the practice's numbers; one value per number
    /// definition. Needs `patients:write`.
    async fn add_patient_number(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The patient's id.")] patient_id: ID,
        #[graphql(desc = "The number.")] number_data: AddPatientNumberData,
    ) -> Result<Option<ResponsePayload<Patient>>> {
        let practice = authorize_write(ctx)?;
        let value = match number_value("numberData.value", number_data.value)? {
            Ok(value) => value,
            Err(refusal) => return envelope(ctx, Err(refusal.into()), Patient),
        };
        let change = practice
            .add_number(&patient_id, &number_data.number_id, value)
            .await
            .or_fail()?;
        envelope(ctx, change, Patient)
    }

    /// Changes the patient's value of a number. Needs `patients:write`.
    async fn update_patient_number(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The patient's id.")] patient_id: ID,
        #[graphql(desc = "The number definition's id (PatientNumber.id).")] number_id: ID,
        #[graphql(desc = "The new value, as AddPatientNumberData's.")] value: String,
    ) -> Result<Option<ResponsePayload<Patient>>> {
        let practice = authorize_write(ctx)?;
        let value = match number_value("value", value)? {
            Ok(value) => value,
            Err(refusal) => return envelope(ctx, Err(refusal.into()), Patient),
        };
        let change = practice
            .update_number(&patient_id, &number_id, value)
            .await
            .or_fail()?;
        envelope(ctx, change, Patient)
    }

    /// Takes a number off a patient. Needs `patients:write`.
    async fn remove_patient_number(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The patient's id.")] patient_id: ID,
        #[graphql(desc = "The number definition's id (PatientNumber.id).")] number_id: ID,
    ) -> Result<Option<ResponsePayload<Patient>>> {
        let change = authorize_write(ctx)?
            .remove_number(&patient_id, &number_id)
            .await
            .or_fail()?;
        envelope(ctx, change, Patient)
    }

    /// Adds a custom attribute to a patient (at most 50). Needs `patients:write`.
    async fn add_patient_attribute(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The patient's id.")] patient_id: ID,
        #[graphql(desc = "The attribute.")] attribute_data: AddCustomAttributeData,
    ) -> Result<Option<ResponsePayload<Patient>>> {
        let practice = authorize_write(ctx)?;
        let entry = attribute("attributeData", attribute_data)?;
        let change = practice.add_attribute(&patient_id, entry).await.or_fail()?;
        envelope(ctx, change, Patient)
    }

    /// Changes a custom attribute of a patient. Needs `patients:write`.
    async fn update_patient_attribute(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The patient's id.")] patient_id: ID,
        #[graphql(desc = "The attribute's id (CustomAttribute.id).")] attribute_id: ID,
        #[graphql(desc = "The changes.")] attribute_data: UpdateCustomAttributeData,
    ) -> Result<Option<ResponsePayload<Patient>>> {
        let practice = authorize_write(ctx)?;
        let title = attribute_data
            .title
            .map(|t| required_text("attributeData.title", t, MAX_LINE_CHARS))
            .transpose()?;
        let text = attribute_data
            .text
            .map(|t| required_lines("attributeData.text", t, MAX_TEXT_CHARS))
            .transpose()?;
        let response = match attribute_data.response {
            Some(r) => Some(
                optional_lines("attributeData.response", Some(r), MAX_TEXT_CHARS)?
                    .unwrap_or_default(),
            ),
            None => None,
        };
        let change = practice
            .update_attribute(&patient_id, &attribute_id, title, text, response)
            .await
            .or_fail()?;
        envelope(ctx, change, Patient)
    }

    /// Takes a custom attribute off a patient. Needs `patients:write`.
    async fn remove_patient_attribute(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The patient's id.")] patient_id: ID,
        #[graphql(desc = "The attribute's id (CustomAttribute.id).")] attribute_id: ID,
    ) -> Result<Option<ResponsePayload<Patient>>> {
        let change = authorize_write(ctx)?
            .remove_attribute(&patient_id, &attribute_id)
            .await
            .or_fail()?;
        envelope(ctx, change, Patient)
    }

    /// Adds someone related to a patient (at most 20): another patient of the practice
    /// (`contactDetails.relatedAccountId`), or a contact known by name. Needs
    /// `patients:write`.
    async fn add_patient_relationship(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The patient's id.")] patient_id: ID,
        #[graphql(desc = "How they are related.")] relationship_type: PatientRelationshipType,
        #[graphql(desc = "A label for the relation, e.g. \"Mother\".")] relationship_label: Option<
            String,
        >,
        #[graphql(desc = "How to reach them.")] contact_details: PatientRelationshipContactInput,
    ) -> Result<Option<ResponsePayload<Patient>>> {
        let practice = authorize_write(ctx)?;
        let label = line("relationshipLabel", relationship_label)?;
        let contact = contact(contact_details, true)?;
        let change = practice
            .add_relationship(
                &patient_id,
                enum_name(relationship_type).to_string(),
                label,
                contact,
            )
            .await
            .or_fail()?;
        envelope(ctx, change, Patient)
    }

    /// Changes a relationship of a patient: the arguments given; contact details given replace
    /// those fields only. Needs `patients:write`.
    async fn update_patient_relationship(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The patient's id.")] patient_id: ID,
        #[graphql(desc = "The relationship's id (PatientRelationship.relationshipId).")]
        relationship_id: ID,
        #[graphql(desc = "How they are related.")] relationship_type: Option<
            PatientRelationshipType,
        >,
        #[graphql(desc = "A label for the relation.")] relationship_label: Option<String>,
        #[graphql(
            desc = "Contact details to change; what is omitted stays, and a field given null \
                    or blank is cleared. The contact keeps a related patient or a name."
        )]
        contact_details: Option<PatientRelationshipContactInput>,
    ) -> Result<Option<ResponsePayload<Patient>>> {
        let practice = authorize_write(ctx)?;
        let label = line("relationshipLabel", relationship_label)?;
        let contact = contact_details.map(|c| contact(c, false)).transpose()?;
        let change = practice
            .update_relationship(
                &patient_id,
                &relationship_id,
                relationship_type.map(|t| enum_name(t).to_string()),
                label,
                contact,
            )
            .await
            .or_fail()?;
        envelope(ctx, change, Patient)
    }

    /// Takes a relationship off a patient. Needs `patients:write`.
    async fn remove_patient_relationship(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The patient's id.")] patient_id: ID,
        #[graphql(desc = "The relationship's id.")] relationship_id: ID,
    ) -> Result<Option<ResponsePayload<Patient>>> {
        let change = authorize_write(ctx)?
            .remove_relationship(&patient_id, &relationship_id)
            .await
            .or_fail()?;
        envelope(ctx, change, Patient)
    }

    /// Puts a patient in one of the practice's access groups (at most 20): from then on only
    /// staff of one of the patient's groups, admins and API tokens see the patient. Needs
    /// `patients:write`.
    async fn add_patient_access_group(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The patient's id.")] patient_id: ID,
        #[graphql(desc = "The access group's id.")] access_group_id: ID,
    ) -> Result<Option<ResponsePayload<Patient>>> {
        let change = authorize_write(ctx)?
            .add_patient_access_group(&patient_id, &access_group_id)
            .await
            .or_fail()?;
        envelope(ctx, change, Patient)
    }

    /// Takes a patient out of an access group. Needs `patients:write`.
    async fn remove_patient_access_group(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The patient's id.")] patient_id: ID,
        #[graphql(desc = "The access group's id.")] access_group_id: ID,
    ) -> Result<Option<ResponsePayload<Patient>>> {
        let change = authorize_write(ctx)?
            .remove_patient_access_group(&patient_id, &access_group_id)
            .await
            .or_fail()?;
        envelope(ctx, change, Patient)
    }

    /// Gives a patient a membership, or changes it. Needs `patients:write`.
    async fn add_patient_membership(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The patient's id.")] patient_id: ID,
        #[graphql(desc = "The membership's name (1 to 200 characters).")] name: String,
        #[graphql(desc = "When it started.")] start_date: Option<Date>,
    ) -> Result<Option<ResponsePayload<Patient>>> {
        let practice = authorize_write(ctx)?;
        let name = required_text("name", name, MAX_LINE_CHARS)?;
        let change = practice
            .set_membership(&patient_id, name, start_date.map(Date::to_stored))
            .await
            .or_fail()?;
        envelope(ctx, change, Patient)
    }

    /// Ends a patient's membership. Needs `patients:write`.
    async fn remove_patient_membership(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The patient's id.")] patient_id: ID,
    ) -> Result<Option<ResponsePayload<Patient>>> {
        let change = authorize_write(ctx)?
            .remove_membership(&patient_id)
            .await
            .or_fail()?;
        envelope(ctx, change, Patient)
    }
}

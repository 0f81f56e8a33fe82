//! The rest of a patient's record, as the schema's section "The full record" shapes it:
//! numbers, custom attributes, relationships, access groups, INS, place of birth,
//! communication preferences and archive information, and the enums they use. `Patient`'s
//! fields (objects/patient.rs) hand these out.

use async_graphql::{ComplexObject, Context, Enum, ID, Result, SimpleObject};

use super::User;
use crate::graphql::scalars::DateTime;
use crate::store::patient_record as stored;

/// The name an enum value has in the schema (and in the store).
pub fn enum_name<E: async_graphql::resolver_utils::EnumType + PartialEq>(value: E) -> &'static str {
    E::items()
        .iter()
        .find(|item| item.value == value)
        .map_or("", |item| item.name)
}

/// The enum value with this name in the schema; None for any other text.
pub fn enum_value<E: async_graphql::resolver_utils::EnumType + Copy>(name: &str) -> Option<E> {
    E::items()
        .iter()
        .find(|item| item.name == name)
        .map(|item| item.value)
}

/// How someone is related to a patient.
#[derive(Enum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatientRelationshipType {
    /// A member of the family.
    Family,
    /// Whom to call in an emergency.
    EmergencyContact,
    /// The next of kin.
    NextOfKin,
    /// The patient's insurer.
    Insurer,
    /// Another practitioner of the patient's.
    Practitioner,
    /// Who pays the patient's bills.
    Payer,
    /// The clinician who referred the patient.
    ReferringClinician,
    /// Any other relation.
    Other,
    /// The patient's general practitioner.
    #[graphql(name = "GP")]
    Gp,
    /// A parent or guardian.
    ParentGuardian,
    /// A social worker.
    SocialWorker,
    /// A spouse or partner.
    SpousePartner,
    /// The patient's pharmacy.
    Pharmacy,
    /// An anaesthetist.
    Anaesthetist,
    /// The patient's school.
    School,
}

/// Where an INS stands (France's national health identity).
#[derive(Enum, Clone, Copy, Debug, PartialEq, Eq)]
#[graphql(name = "PatientINSStatus")]
pub enum PatientInsStatus {
    /// Qualified: retrieved and checked against an identity document.
    Qualified,
    /// Validated against an identity document.
    Validated,
    /// Retrieved from the national service, not yet validated.
    Retrieved,
    /// Provisional.
    Provisional,
}

/// An alert on a patient's identity.
#[derive(Enum, Clone, Copy, Debug, PartialEq, Eq)]
#[graphql(name = "PatientINSSIdentityAlertStatus")]
pub enum PatientInsIdentityAlertStatus {
    /// The identity may be wrong.
    Suspicious,
    /// The identity is made up (on purpose, e.g. an anonymous patient).
    Fictitious,
    /// No alert.
    None,
}

/// Why a patient was archived.
#[derive(Enum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatientArchiveReason {
    /// No longer seen.
    InactivePatient,
    /// Discharged.
    DischargedPatient,
    /// Deceased.
    DeceasedPatient,
    /// Moved away, or care transferred.
    MovedAwayOrTransferOfCare,
    /// The membership lapsed.
    LapsedMembership,
    /// At the patient's request.
    PatientRequest,
    /// Another reason (see archivedComments).
    Other,
}

/// Why a patient was brought back from the archive.
#[derive(Enum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatientUnarchiveReason {
    /// Seen again.
    ActivePatient,
    /// To process lab results.
    ProcessLabResults,
    /// To process a payment.
    ProcessPayment,
    /// To process a letter or a task.
    ProcessLetterOrTask,
    /// For an audit or administration.
    AuditAndAdministrativeReasons,
    /// Another reason.
    Other,
}

/// Where the patient was born.
#[derive(SimpleObject)]
pub struct PlaceOfBirth {
    /// The place's name, e.g. "Lyon".
    pub name: Option<String>,
    /// The place's official code (e.g. the INSEE code in France).
    pub code: Option<String>,
}

/// A token to share the patient's record outside the practice. practice-api makes none:
/// `Patient.sharingToken` is always null.
#[derive(SimpleObject)]
pub struct SharingToken {
    /// The token.
    pub token: Option<String>,
}

/// The patient's value of one of the practice's numbers ("NHS number").
#[derive(SimpleObject)]
pub struct PatientNumber {
    /// The number definition's id (PracticeNumbers.id): what updatePatientNumber and
    /// removePatientNumber take as numberId.
    pub id: ID,
    /// The number definition's name.
    pub name: Option<String>,
    /// The patient's value.
    pub value: Option<String>,
}

/// A question the practice asks, and the patient's answer.
#[derive(SimpleObject)]
pub struct CustomAttribute {
    /// The attribute's id on this patient.
    pub id: Option<ID>,
    /// Its title, e.g. "Allergies".
    pub title: Option<String>,
    /// The question.
    pub text: Option<String>,
    /// The patient's answer.
    pub response: Option<String>,
    /// Whether an answer is required.
    pub required: Option<bool>,
}

/// Whether the practice has the patient's permission to send this privacy policy's messages.
#[derive(SimpleObject)]
pub struct PrivacyPolicy {
    /// The patient's answer, e.g. "accepted".
    pub response: Option<String>,
}

/// How the patient agreed to be contacted.
#[derive(SimpleObject)]
pub struct CommunicationPreferences {
    /// By email.
    pub receive_email: Option<bool>,
    /// By text message.
    #[graphql(name = "receiveSMS")]
    pub receive_sms: Option<bool>,
    /// With promotions.
    pub promotional_marketing: Option<bool>,
    /// With reminders of payments due.
    pub payment_reminders: Option<bool>,
    /// The patient's answer to the privacy policy.
    pub privacy_policy: Option<PrivacyPolicy>,
}

impl From<stored::Communication> for CommunicationPreferences {
    fn from(c: stored::Communication) -> Self {
        CommunicationPreferences {
            receive_email: c.receive_email,
            receive_sms: c.receive_sms,
            promotional_marketing: c.promotional_marketing,
            payment_reminders: c.payment_reminders,
            privacy_policy: c.privacy_policy.map(|response| PrivacyPolicy {
                response: Some(response),
            }),
        }
    }
}

/// A phone of someone related to a patient.
#[derive(SimpleObject)]
#[graphql(name = "RelationshipPhone")]
pub struct ContactPhone {
    /// What kind of phone it is.
    pub phone_type: Option<String>,
    /// The number.
    pub phone_number: Option<String>,
}

/// How to reach someone related to a patient.
#[derive(SimpleObject)]
pub struct PatientRelationshipContact {
    /// Another patient of the practice this contact is, if it is one.
    pub related_account_id: Option<ID>,
    /// Where the contact came from (an integration's name).
    pub source: Option<String>,
    /// The contact's id there.
    pub source_id: Option<ID>,
    /// First name.
    pub first_name: Option<String>,
    /// Last name.
    pub last_name: Option<String>,
    /// Form of address.
    pub title: Option<String>,
    /// Company, for an insurer, a pharmacy or a school.
    pub company_name: Option<String>,
    /// Phones (one is kept).
    pub phones: Option<Vec<Option<super::Phone>>>,
    /// Email address.
    pub email: Option<String>,
    /// Street and number.
    pub address: Option<String>,
    /// Town or city.
    pub city: Option<String>,
    /// Postal code.
    pub postcode: Option<String>,
    /// Country.
    pub country: Option<String>,
    /// Notes.
    pub notes: Option<String>,
    /// An insurance policy's number.
    pub policy_number: Option<String>,
    /// An insurer's authorisation code.
    pub authorization_code: Option<String>,
}

/// Someone related to a patient.
#[derive(SimpleObject)]
pub struct PatientRelationship {
    /// The relationship's id on this patient.
    pub relationship_id: Option<ID>,
    /// How they are related.
    pub relationship_type: Option<PatientRelationshipType>,
    /// A label for the relation, e.g. "Mother".
    pub relationship_label: Option<String>,
    /// Always false: a removed relationship is gone.
    pub deleted: Option<bool>,
    /// How to reach them.
    pub contact_details: Option<PatientRelationshipContact>,
}

impl From<stored::RelationshipEntry> for PatientRelationship {
    fn from(r: stored::RelationshipEntry) -> Self {
        let c = r.contact;
        let phones = if c.phone_number.is_some() || c.phone_type.is_some() {
            vec![Some(super::Phone {
                phone_id: None,
                phone_type: c.phone_type,
                phone_number: c.phone_number,
            })]
        } else {
            Vec::new()
        };
        PatientRelationship {
            relationship_id: Some(ID(r.id)),
            relationship_type: enum_value(&r.relationship_type),
            relationship_label: r.label,
            deleted: Some(false),
            contact_details: Some(PatientRelationshipContact {
                related_account_id: c.related_account_id.map(ID),
                source: c.source,
                source_id: c.source_id.map(ID),
                first_name: c.first_name,
                last_name: c.last_name,
                title: c.title,
                company_name: c.company_name,
                phones: Some(phones),
                email: c.email,
                address: c.address,
                city: c.city,
                postcode: c.postcode,
                country: c.country,
                notes: c.notes,
                policy_number: c.policy_number,
                authorization_code: c.authorization_code,
            }),
        }
    }
}

/// An access group the patient is in: only staff of one of the patient's groups (and admins)
/// see the patient.
#[derive(SimpleObject)]
pub struct PatientAccessGroup {
    /// The access group's id.
    pub id: ID,
    /// Its name.
    pub name: String,
    /// Its label, as shown to staff.
    pub label: String,
}

/// The patient's INS: France's national health identity.
#[derive(SimpleObject)]
#[graphql(name = "INS")]
pub struct Ins {
    /// The INS number: 13 characters and a 2-digit key (digits; 2A or 2B for Corsica).
    pub number: Option<String>,
    /// The OID of the authority that issued it.
    pub oid: Option<String>,
    /// True when the identity was checked by hand.
    pub manual_identification: Option<bool>,
    /// An alert on the identity.
    pub identity_alert_status: Option<PatientInsIdentityAlertStatus>,
    /// Why the alert was raised.
    pub identity_alert_comment: Option<String>,
    /// Where the INS stands.
    pub status: Option<PatientInsStatus>,
    /// The identity document it was checked against.
    pub identity_document: Option<String>,
}

impl From<stored::Ins> for Ins {
    fn from(i: stored::Ins) -> Self {
        Ins {
            number: i.number,
            oid: i.oid,
            manual_identification: i.manual_identification,
            identity_alert_status: i.identity_alert_status.as_deref().and_then(enum_value),
            identity_alert_comment: i.identity_alert_comment,
            status: i.status.as_deref().and_then(enum_value),
            identity_document: i.identity_document,
        }
    }
}

/// When, why and by whom a patient was archived, and brought back.
#[derive(SimpleObject)]
#[graphql(complex)]
pub struct PatientArchivedInfo {
    /// When the patient was last archived; kept once brought back (see `unarchivedAt`), as
    /// the archive's reason, comments and author are.
    pub archived_at: Option<DateTime>,
    /// The id of the staff user who archived the patient (see `archivedBy`).
    #[graphql(skip)]
    pub archived_by: Option<String>,
    /// Why (OTHER for a reason given as free text).
    pub archived_reason: Option<PatientArchiveReason>,
    /// Comments given on archiving.
    pub archived_comments: Option<String>,
    /// When the patient was last brought back.
    pub unarchived_at: Option<DateTime>,
    /// The id of the staff user who brought the patient back (see `unarchivedBy`).
    #[graphql(skip)]
    pub unarchived_by: Option<String>,
    /// Why the patient was brought back.
    pub unarchived_reason: Option<PatientUnarchiveReason>,
}

#[ComplexObject]
impl PatientArchivedInfo {
    /// The staff user who archived the patient; null for an API token or the command line.
    /// Needs `users:read`, as every staff user reached from a record does: without it, null
    /// with a FORBIDDEN error, and the rest is still returned.
    async fn archived_by(&self, ctx: &Context<'_>) -> Result<Option<User>> {
        super::user::staff_user(ctx, self.archived_by.as_deref()).await
    }
    /// The staff user who brought the patient back. Needs `users:read`, as `archivedBy`.
    async fn unarchived_by(&self, ctx: &Context<'_>) -> Result<Option<User>> {
        super::user::staff_user(ctx, self.unarchived_by.as_deref()).await
    }
}

//! The lists a patient's record holds, kept as JSON arrays on the patient's row (so that a
//! patient is still read in one statement): phones, numbers against the practice's number
//! definitions, custom attributes, relationships, access groups; and the INS and communication
//! preferences, JSON objects. Each entry of a list has an id of its own. The changes to them go
//! through `PracticeStore::modify_patient`, which holds the patient's row, refuses a deleted
//! patient and records the change's event.

use serde::{Deserialize, Serialize};

use super::patients::{Patient, PatientFields};
use super::{Change, PracticeStore, StoreResult, new_id};
use crate::domain::limits::{
    MAX_ACCESS_GROUPS_PER_PATIENT, MAX_ATTRIBUTES_PER_PATIENT, MAX_NUMBERS_PER_PATIENT,
    MAX_PHONES_PER_PATIENT, MAX_RELATIONSHIPS_PER_PATIENT,
};
use crate::domain::{Bound, Record, Refusal};

/// A phone of a patient. The first one is also the patient's `phoneType`/`phoneNumber`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhoneEntry {
    pub id: String,
    #[serde(rename = "type", default)]
    pub phone_type: Option<String>,
    #[serde(default)]
    pub number: Option<String>,
}

/// A number the practice records of the patient, against one of its number definitions.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumberEntry {
    /// The definition's id (practice_numbers.id): a patient has one value per definition.
    pub id: String,
    pub value: String,
}

/// A custom attribute: a question the practice asks, and the patient's answer.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttributeEntry {
    pub id: String,
    pub title: String,
    pub text: String,
    pub response: String,
    #[serde(default)]
    pub required: bool,
}

/// Someone related to the patient: another patient of the practice (`related_account_id`) or a
/// contact known only by these details.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RelationshipEntry {
    pub id: String,
    /// One of the schema's PatientRelationshipType values, e.g. "EMERGENCY_CONTACT".
    pub relationship_type: String,
    #[serde(default)]
    pub label: Option<String>,
    pub contact: Contact,
}

/// How to reach someone related to a patient.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Contact {
    pub related_account_id: Option<String>,
    pub source: Option<String>,
    pub source_id: Option<String>,
    pub first_name: Option<String>,
    pub last_name: Option<String>,
    pub title: Option<String>,
    pub company_name: Option<String>,
    pub phone_type: Option<String>,
    pub phone_number: Option<String>,
    pub email: Option<String>,
    pub address: Option<String>,
    pub city: Option<String>,
    pub postcode: Option<String>,
    pub country: Option<String>,
    pub notes: Option<String>,
    pub policy_number: Option<String>,
    pub authorization_code: Option<String>,
}

impl Contact {
    /// Whether it names who the contact is: another patient, or a name.
    pub fn named(&self) -> bool {
        self.related_account_id.is_some()
            || self.first_name.is_some()
            || self.last_name.is_some()
            || self.company_name.is_some()
    }

    /// Fields given in `update` replace these, an empty text clearing one; the others stay.
    fn merge(&mut self, update: Contact) {
        fn keep(field: &mut Option<String>, new: Option<String>) {
            match new {
                Some(new) if new.is_empty() => *field = None,
                Some(new) => *field = Some(new),
                None => {}
            }
        }
        keep(&mut self.related_account_id, update.related_account_id);
        keep(&mut self.source, update.source);
        keep(&mut self.source_id, update.source_id);
        keep(&mut self.first_name, update.first_name);
        keep(&mut self.last_name, update.last_name);
        keep(&mut self.title, update.title);
        keep(&mut self.company_name, update.company_name);
        keep(&mut self.phone_type, update.phone_type);
        keep(&mut self.phone_number, update.phone_number);
        keep(&mut self.email, update.email);
        keep(&mut self.address, update.address);
        keep(&mut self.city, update.city);
        keep(&mut self.postcode, update.postcode);
        keep(&mut self.country, update.country);
        keep(&mut self.notes, update.notes);
        keep(&mut self.policy_number, update.policy_number);
        keep(&mut self.authorization_code, update.authorization_code);
    }
}

/// The patient's INS (identifiant national de santé, France).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Ins {
    pub number: Option<String>,
    pub oid: Option<String>,
    pub manual_identification: Option<bool>,
    pub identity_alert_status: Option<String>,
    pub identity_alert_comment: Option<String>,
    pub status: Option<String>,
    pub identity_document: Option<String>,
}

/// How the patient agreed to be contacted.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Communication {
    pub receive_email: Option<bool>,
    pub receive_sms: Option<bool>,
    pub promotional_marketing: Option<bool>,
    pub payment_reminders: Option<bool>,
    pub privacy_policy: Option<String>,
}

/// A change to an object kept as JSON in the patient's row (the INS, the communication
/// preferences): the fields it gives, by their stored names, each replacing the one kept (a
/// field given as None clears it); the fields it does not give stay.
#[derive(Clone, Debug, Default)]
pub struct Part<T> {
    pub value: T,
    pub given: Vec<&'static str>,
}

/// A change to the place of birth: its name and code, each None when not given, Some(None)
/// to clear it.
#[derive(Clone, Debug, Default)]
pub struct PlaceChange {
    pub name: Option<Option<String>>,
    pub code: Option<Option<String>>,
}

/// `stored` (JSON text, or none) with the fields `part` gives put in, read back through `T`
/// so that the result has `T`'s shape.
fn merge_part<T: Serialize + for<'de> Deserialize<'de> + Default>(
    stored: Option<&str>,
    part: Part<T>,
) -> String {
    use serde_json::{Map, Value};
    let mut kept = match stored.and_then(|text| serde_json::from_str(text).ok()) {
        Some(Value::Object(fields)) => fields,
        _ => Map::new(),
    };
    if let Ok(Value::Object(new)) = serde_json::to_value(&part.value) {
        for name in part.given {
            debug_assert!(
                new.contains_key(name),
                "{name} is no field of what it changes"
            );
            kept.insert(name.into(), new.get(name).cloned().unwrap_or(Value::Null));
        }
    }
    let merged: T = serde_json::from_value(Value::Object(kept)).unwrap_or_default();
    encode(&merged)
}

impl PatientFields {
    /// Changes the INS in part (see [`Part`]); None clears it whole.
    pub fn merge_ins(&mut self, update: Option<Part<Ins>>) {
        self.ins = update.map(|part| merge_part(self.ins.as_deref(), part));
    }

    /// Changes the communication preferences in part (see [`Part`]); None clears them all.
    pub fn merge_communication(&mut self, update: Option<Part<Communication>>) {
        self.communication = update.map(|part| merge_part(self.communication.as_deref(), part));
    }

    /// Changes the place of birth in part (see [`PlaceChange`]); None clears both.
    pub fn merge_place_of_birth(&mut self, update: Option<PlaceChange>) {
        let update = update.unwrap_or(PlaceChange {
            name: Some(None),
            code: Some(None),
        });
        if let Some(name) = update.name {
            self.place_of_birth_name = name;
        }
        if let Some(code) = update.code {
            self.place_of_birth_code = code;
        }
    }
}

/// Reads a JSON list or object as stored; what cannot be read is empty.
pub(super) fn decode<T: for<'de> Deserialize<'de> + Default>(json: Option<&str>) -> T {
    json.and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or_default()
}

/// Writes a JSON list or object as stored.
pub(super) fn encode<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "[]".to_string())
}

impl Patient {
    pub fn phones(&self) -> Vec<PhoneEntry> {
        decode(Some(&self.phones))
    }
    pub fn numbers(&self) -> Vec<NumberEntry> {
        decode(Some(&self.numbers))
    }
    pub fn attributes(&self) -> Vec<AttributeEntry> {
        decode(Some(&self.attributes))
    }
    pub fn relationships(&self) -> Vec<RelationshipEntry> {
        decode(Some(&self.relationships))
    }
    pub fn access_group_ids(&self) -> Vec<String> {
        decode(Some(&self.access_groups))
    }
    pub fn ins(&self) -> Option<Ins> {
        self.fields.ins.as_deref().map(|json| decode(Some(json)))
    }
    pub fn communication(&self) -> Option<Communication> {
        self.fields
            .communication
            .as_deref()
            .map(|json| decode(Some(json)))
    }

    /// Sets a new patient's custom attributes, each with an id of its own.
    pub fn set_attributes(&mut self, attributes: Vec<AttributeEntry>) {
        let list: Vec<AttributeEntry> = attributes
            .into_iter()
            .map(|a| AttributeEntry { id: new_id(), ..a })
            .collect();
        self.attributes = encode(&list);
    }

    /// Makes the phone list's first entry the patient's `phone_type`/`phone_number`, after the
    /// list changed.
    fn mirror_first_phone(&mut self) {
        let first = self.phones().into_iter().next().unwrap_or_default();
        self.fields.phone_type = first.phone_type;
        self.fields.phone_number = first.number;
    }

    /// Makes the phone list's first entry follow the patient's `phone_type`/`phone_number`,
    /// after those changed (createPatient, updatePatient).
    pub(super) fn follow_first_phone(&mut self) {
        let mut phones = self.phones();
        let (kind, number) = (&self.fields.phone_type, &self.fields.phone_number);
        match (phones.first_mut(), number) {
            (Some(first), Some(_)) => {
                first.phone_type = kind.clone();
                first.number = number.clone();
            }
            (None, Some(_)) => phones.insert(
                0,
                PhoneEntry {
                    id: new_id(),
                    phone_type: kind.clone(),
                    number: number.clone(),
                },
            ),
            (Some(_), None) => {
                phones.remove(0);
            }
            (None, None) => {}
        }
        self.phones = encode(&phones);
        self.mirror_first_phone();
    }
}

/// Finds the entry with `id` in `list`, or the refusal that names it.
fn entry<'l, T>(
    list: &'l mut [T],
    id: &str,
    id_of: fn(&T) -> &str,
    record: Record,
) -> Result<&'l mut T, Refusal> {
    list.iter_mut()
        .find(|e| id_of(e) == id)
        .ok_or_else(|| Refusal::NotFound(record, id.to_string()))
}

/// Refuses a list already at `bound`.
fn room<T>(list: &[T], max: usize, bound: Bound) -> Result<(), Refusal> {
    if list.len() >= max {
        return Err(Refusal::TooMany(bound));
    }
    Ok(())
}

/// Refuses an archived patient: its record's lists change once it is brought back.
fn not_archived(p: &Patient) -> Result<(), Refusal> {
    match p.archived_at {
        Some(_) => Err(Refusal::PatientArchived),
        None => Ok(()),
    }
}

impl PracticeStore<'_> {
    /// Adds a phone to a patient; the first one is also its phoneType/phoneNumber.
    pub async fn add_phone(
        &self,
        patient_id: &str,
        phone_type: String,
        number: String,
    ) -> StoreResult<Change<Patient>> {
        self.modify_patient(patient_id, "phone_added", None, |p| {
            not_archived(p)?;
            let mut phones = p.phones();
            room(&phones, MAX_PHONES_PER_PATIENT, Bound::PhonesOnPatient)?;
            phones.push(PhoneEntry {
                id: new_id(),
                phone_type: Some(phone_type),
                number: Some(number),
            });
            p.phones = encode(&phones);
            p.mirror_first_phone();
            Ok(())
        })
        .await
    }

    /// Changes a phone of a patient: the parts given.
    pub async fn update_phone(
        &self,
        patient_id: &str,
        phone_id: &str,
        phone_type: Option<String>,
        number: Option<String>,
    ) -> StoreResult<Change<Patient>> {
        self.modify_patient(patient_id, "phone_updated", None, |p| {
            not_archived(p)?;
            let mut phones = p.phones();
            let phone = entry(&mut phones, phone_id, |e| &e.id, Record::Phone)?;
            if phone_type.is_some() {
                phone.phone_type = phone_type;
            }
            if number.is_some() {
                phone.number = number;
            }
            p.phones = encode(&phones);
            p.mirror_first_phone();
            Ok(())
        })
        .await
    }

    /// Takes a phone off a patient.
    pub async fn remove_phone(
        &self,
        patient_id: &str,
        phone_id: &str,
    ) -> StoreResult<Change<Patient>> {
        self.modify_patient(patient_id, "phone_removed", None, |p| {
            not_archived(p)?;
            let mut phones = p.phones();
            entry(&mut phones, phone_id, |e| &e.id, Record::Phone)?;
            phones.retain(|e| e.id != phone_id);
            p.phones = encode(&phones);
            p.mirror_first_phone();
            Ok(())
        })
        .await
    }

    /// Records a patient's number for one of the practice's number definitions (`number_id`,
    /// which must exist and not be deleted). Refused when the patient has one for it already:
    /// updatePatientNumber changes it.
    pub async fn add_number(
        &self,
        patient_id: &str,
        number_id: &str,
        value: String,
    ) -> StoreResult<Change<Patient>> {
        if !self.number_definition_exists(number_id).await? {
            return Ok(Err(Refusal::NotFound(
                Record::NumberDefinition,
                number_id.into(),
            )
            .into()));
        }
        self.modify_patient(patient_id, "number_added", None, |p| {
            not_archived(p)?;
            let mut numbers = p.numbers();
            if numbers.iter().any(|n| n.id == number_id) {
                return Err(Refusal::NumberAlreadyOnPatient);
            }
            room(&numbers, MAX_NUMBERS_PER_PATIENT, Bound::NumbersOnPatient)?;
            numbers.push(NumberEntry {
                id: number_id.to_string(),
                value,
            });
            p.numbers = encode(&numbers);
            Ok(())
        })
        .await
    }

    /// Changes a patient's number.
    pub async fn update_number(
        &self,
        patient_id: &str,
        number_id: &str,
        value: String,
    ) -> StoreResult<Change<Patient>> {
        self.modify_patient(patient_id, "number_updated", None, |p| {
            not_archived(p)?;
            let mut numbers = p.numbers();
            entry(&mut numbers, number_id, |e| &e.id, Record::PatientNumber)?.value = value;
            p.numbers = encode(&numbers);
            Ok(())
        })
        .await
    }

    /// Takes a number off a patient.
    pub async fn remove_number(
        &self,
        patient_id: &str,
        number_id: &str,
    ) -> StoreResult<Change<Patient>> {
        self.modify_patient(patient_id, "number_removed", None, |p| {
            not_archived(p)?;
            let mut numbers = p.numbers();
            entry(&mut numbers, number_id, |e| &e.id, Record::PatientNumber)?;
            numbers.retain(|e| e.id != number_id);
            p.numbers = encode(&numbers);
            Ok(())
        })
        .await
    }

    /// Adds a custom attribute to a patient.
    pub async fn add_attribute(
        &self,
        patient_id: &str,
        attribute: AttributeEntry,
    ) -> StoreResult<Change<Patient>> {
        self.modify_patient(patient_id, "attribute_added", None, |p| {
            not_archived(p)?;
            let mut list = p.attributes();
            room(
                &list,
                MAX_ATTRIBUTES_PER_PATIENT,
                Bound::AttributesOnPatient,
            )?;
            list.push(AttributeEntry {
                id: new_id(),
                ..attribute
            });
            p.attributes = encode(&list);
            Ok(())
        })
        .await
    }

    /// Changes a custom attribute of a patient: the parts given.
    pub async fn update_attribute(
        &self,
        patient_id: &str,
        attribute_id: &str,
        title: Option<String>,
        text: Option<String>,
        response: Option<String>,
    ) -> StoreResult<Change<Patient>> {
        self.modify_patient(patient_id, "attribute_updated", None, |p| {
            not_archived(p)?;
            let mut list = p.attributes();
            let found = entry(&mut list, attribute_id, |e| &e.id, Record::Attribute)?;
            if let Some(title) = title {
                found.title = title;
            }
            if let Some(text) = text {
                found.text = text;
            }
            if let Some(response) = response {
                found.response = response;
            }
            p.attributes = encode(&list);
            Ok(())
        })
        .await
    }

    /// Takes a custom attribute off a patient.
    pub async fn remove_attribute(
        &self,
        patient_id: &str,
        attribute_id: &str,
    ) -> StoreResult<Change<Patient>> {
        self.modify_patient(patient_id, "attribute_removed", None, |p| {
            not_archived(p)?;
            let mut list = p.attributes();
            entry(&mut list, attribute_id, |e| &e.id, Record::Attribute)?;
            list.retain(|e| e.id != attribute_id);
            p.attributes = encode(&list);
            Ok(())
        })
        .await
    }

    /// Adds someone related to a patient. A `related_account_id` must be another patient of
    /// the practice.
    pub async fn add_relationship(
        &self,
        patient_id: &str,
        relationship_type: String,
        label: Option<String>,
        contact: Contact,
    ) -> StoreResult<Change<Patient>> {
        if let Err(refusal) = self.check_related(patient_id, &contact).await? {
            return Ok(Err(refusal.into()));
        }
        self.modify_patient(patient_id, "relationship_added", None, |p| {
            not_archived(p)?;
            let mut list = p.relationships();
            room(
                &list,
                MAX_RELATIONSHIPS_PER_PATIENT,
                Bound::RelationshipsOnPatient,
            )?;
            list.push(RelationshipEntry {
                id: new_id(),
                relationship_type,
                label,
                contact,
            });
            p.relationships = encode(&list);
            Ok(())
        })
        .await
    }

    /// Changes a relationship of a patient: the parts given; contact details given replace
    /// those fields only.
    pub async fn update_relationship(
        &self,
        patient_id: &str,
        relationship_id: &str,
        relationship_type: Option<String>,
        label: Option<String>,
        contact: Option<Contact>,
    ) -> StoreResult<Change<Patient>> {
        if let Some(contact) = &contact
            && let Err(refusal) = self.check_related(patient_id, contact).await?
        {
            return Ok(Err(refusal.into()));
        }
        self.modify_patient(patient_id, "relationship_updated", None, |p| {
            not_archived(p)?;
            let mut list = p.relationships();
            let found = entry(&mut list, relationship_id, |e| &e.id, Record::Relationship)?;
            if let Some(kind) = relationship_type {
                found.relationship_type = kind;
            }
            if label.is_some() {
                found.label = label;
            }
            if let Some(contact) = contact {
                found.contact.merge(contact);
                if !found.contact.named() {
                    return Err(Refusal::ContactUnnamed);
                }
            }
            p.relationships = encode(&list);
            Ok(())
        })
        .await
    }

    /// Takes a relationship off a patient.
    pub async fn remove_relationship(
        &self,
        patient_id: &str,
        relationship_id: &str,
    ) -> StoreResult<Change<Patient>> {
        self.modify_patient(patient_id, "relationship_removed", None, |p| {
            not_archived(p)?;
            let mut list = p.relationships();
            entry(&mut list, relationship_id, |e| &e.id, Record::Relationship)?;
            list.retain(|e| e.id != relationship_id);
            p.relationships = encode(&list);
            Ok(())
        })
        .await
    }

    /// Puts a patient in an access group of the practice: from then on only staff of one of
    /// its groups (and admins, and API tokens) see it.
    pub async fn add_patient_access_group(
        &self,
        patient_id: &str,
        group_id: &str,
    ) -> StoreResult<Change<Patient>> {
        if !self.access_group_exists(group_id).await? {
            return Ok(Err(
                Refusal::NotFound(Record::AccessGroup, group_id.into()).into()
            ));
        }
        self.modify_patient(patient_id, "access_group_added", None, |p| {
            not_archived(p)?;
            let mut groups = p.access_group_ids();
            if groups.iter().any(|g| g == group_id) {
                return Err(Refusal::AccessGroupAlreadyOnPatient);
            }
            room(
                &groups,
                MAX_ACCESS_GROUPS_PER_PATIENT,
                Bound::AccessGroupsOnPatient,
            )?;
            groups.push(group_id.to_string());
            p.access_groups = encode(&groups);
            Ok(())
        })
        .await
    }

    /// Takes a patient out of an access group.
    pub async fn remove_patient_access_group(
        &self,
        patient_id: &str,
        group_id: &str,
    ) -> StoreResult<Change<Patient>> {
        self.modify_patient(patient_id, "access_group_removed", None, |p| {
            not_archived(p)?;
            let mut groups = p.access_group_ids();
            if !groups.iter().any(|g| g == group_id) {
                return Err(Refusal::NotFound(Record::AccessGroup, group_id.into()));
            }
            groups.retain(|g| g != group_id);
            p.access_groups = encode(&groups);
            Ok(())
        })
        .await
    }

    /// Gives a patient a membership (or changes it).
    pub async fn set_membership(
        &self,
        patient_id: &str,
        name: String,
        start_date: Option<String>,
    ) -> StoreResult<Change<Patient>> {
        self.modify_patient(patient_id, "membership_updated", None, |p| {
            not_archived(p)?;
            p.membership_name = Some(name);
            p.membership_start_date = start_date;
            Ok(())
        })
        .await
    }

    /// Ends a patient's membership. Refused when it has none.
    pub async fn remove_membership(&self, patient_id: &str) -> StoreResult<Change<Patient>> {
        self.modify_patient(patient_id, "membership_removed", None, |p| {
            not_archived(p)?;
            if p.membership_name.is_none() {
                return Err(Refusal::NoMembership);
            }
            p.membership_name = None;
            p.membership_start_date = None;
            Ok(())
        })
        .await
    }

    /// A relationship's related account, when it names one, is another patient of the
    /// practice.
    async fn check_related(
        &self,
        patient_id: &str,
        contact: &Contact,
    ) -> StoreResult<Result<(), Refusal>> {
        // An empty one clears it (see `Contact::merge`).
        let Some(related) = contact
            .related_account_id
            .as_ref()
            .filter(|r| !r.is_empty())
        else {
            return Ok(Ok(()));
        };
        if related == patient_id {
            return Ok(Err(Refusal::RelatedToItself));
        }
        let found = self.find_patient(related).await?;
        Ok(match found {
            Some(_) => Ok(()),
            None => Err(Refusal::NotFound(Record::Patient, related.clone())),
        })
    }

    async fn number_definition_exists(&self, id: &str) -> StoreResult<bool> {
        let found: Option<(String,)> = sqlx::query_as(
            "SELECT id FROM practice_numbers WHERE practice_id = $1 AND id = $2 \
             AND deleted_at IS NULL",
        )
        .bind(self.practice_id)
        .bind(id)
        .fetch_optional(self.read())
        .await?;
        Ok(found.is_some())
    }

    async fn access_group_exists(&self, id: &str) -> StoreResult<bool> {
        let found: Option<(String,)> =
            sqlx::query_as("SELECT id FROM access_groups WHERE practice_id = $1 AND id = $2")
                .bind(self.practice_id)
                .bind(id)
                .fetch_optional(self.read())
                .await?;
        Ok(found.is_some())
    }
}

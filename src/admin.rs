//! The operator's commands, as `main.rs` exposes them on the command line: practices, staff,
//! tokens and demo data. Each returns what the command prints; `main.rs` does the printing.

use std::sync::LazyLock;

use chrono::{Duration as Days, NaiveDate};
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{RngExt, SeedableRng};
use thiserror::Error;

use crate::auth::{self, Role, parse_permissions, password};
use crate::domain::{Bound, Denied, Invalid, PatientState, Record, Refusal};
use crate::store::audit::{Actor, Author};
use crate::store::patients::PatientFields;
use crate::store::practices::Practice;
use crate::store::tokens::{Token, TokenKind};
use crate::store::users::{NewUser, Profile, User};
use crate::store::{PageRequest, PracticeStore, Store, StoreError, now_ms};
use crate::text::{self, MAX_LINE_CHARS};

/// Why a command failed, in one line for the operator.
#[derive(Debug, Error)]
pub enum AdminError {
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

type AdminResult<T> = Result<T, AdminError>;

fn invalid(message: impl Into<String>) -> AdminError {
    AdminError::Invalid(message.into())
}

impl From<Denied> for AdminError {
    fn from(denied: Denied) -> Self {
        invalid(match denied {
            Denied::Refused(refusal) => say(&refusal),
            Denied::Invalid(Invalid::BookingEndsBeforeStart) => {
                "a booking must end after it starts".into()
            }
            Denied::Invalid(Invalid::BookingTooLong) => {
                "a booking must not be longer than 24 hours".into()
            }
            Denied::Invalid(Invalid::AppointmentWithoutDuration) => {
                "an appointment type has a duration".into()
            }
            Denied::Invalid(Invalid::BookableNotAppointment) => {
                "only an appointment type can be bookable".into()
            }
        })
    }
}

/// A refusal, as the command line says it to the operator.
fn say(refusal: &Refusal) -> String {
    match refusal {
        Refusal::NotFound(kind, id) => format!("no {} with id {id}", kind.noun()),
        Refusal::LabelNotInCatalogue(id) => format!("no label with id {id}"),
        Refusal::PatientDeleted => "the patient is deleted".into(),
        Refusal::PatientAlreadyArchived => "the patient is archived already".into(),
        Refusal::PatientNotArchived => "the patient is not archived".into(),
        Refusal::PatientCannotBeBooked(PatientState::Archived) => {
            "the patient is archived and cannot be booked".into()
        }
        Refusal::PatientCannotBeBooked(PatientState::Deleted) => {
            "the patient is deleted and cannot be booked".into()
        }
        Refusal::LabelAlreadyOnPatient { title } => format!("the patient has the label {title:?}"),
        Refusal::LabelNotOnPatient(id) => format!("the patient has no label with id {id}"),
        Refusal::NotADoctor { name, .. } => format!("{name} is not a doctor"),
        Refusal::DoctorDisabled { name, .. } => format!("{name} is disabled"),
        Refusal::DoctorBusy(_) => "the doctor is booked at that time".into(),
        Refusal::BookingCancelled => "the booking is cancelled".into(),
        Refusal::BookingAlreadyCancelled => "the booking is cancelled already".into(),
        Refusal::Taken(Record::User, email) => {
            format!("a staff user with email {email} already exists")
        }
        Refusal::Taken(kind, name) => format!("{} {name:?} already exists", kind.with_article()),
        Refusal::WebhookDeleted => "the webhook subscription is deleted".into(),
        Refusal::WebhookTaken { url, event_type } => {
            format!("another webhook subscription sends {event_type} to {url}")
        }
        Refusal::DeliveryPending => "the delivery is pending already".into(),
        Refusal::ContactUnnamed => {
            "the contact would be left with no related patient or name".into()
        }
        Refusal::TypeNotSent(event_type) => {
            format!("the subscription no longer sends {event_type}")
        }
        Refusal::SecretsSigning { .. } => {
            "the subscription's old secrets that may sign at once still do".into()
        }
        Refusal::LastAdmin => "that is the practice's last enabled admin".into(),
        Refusal::RoleAboveCaller(role) => format!("the role {role} is above the caller's"),
        Refusal::OwnAccount => "a staff user cannot disable their own account".into(),
        Refusal::UserDisabled => "the staff user is disabled: enable them first".into(),
        Refusal::MakerRevoked => "the token making it has been revoked".into(),
        Refusal::PracticeHasStaff => "the practice has staff already".into(),
        Refusal::NoMetadataKey(key) => format!("the booking has no metadata key {key:?}"),
        Refusal::MetadataTooLong { value, chars } => format!(
            "a metadata {} of {chars} characters is too long",
            if *value { "value" } else { "key" }
        ),
        Refusal::NumberValueTooLong(chars) => {
            format!("a number's value of {chars} characters is too long")
        }
        Refusal::NumberAlreadyOnPatient => "the patient has this number already".into(),
        Refusal::AccessGroupAlreadyOnPatient => {
            "the patient is in this access group already".into()
        }
        Refusal::NoMembership => "the patient has no membership".into(),
        Refusal::RelatedToItself => "a patient cannot be related to themselves".into(),
        Refusal::PatientUnnamed => "a patient keeps a first name, a last name or an email".into(),
        Refusal::PatientOnHold => "the patient is on hold".into(),
        Refusal::PatientArchived => "the patient is archived".into(),
        Refusal::ProductTypeFixed(kind) => format!("a product keeps its type ({kind})"),
        Refusal::NotBookable(name) => format!("{name:?} is not a bookable appointment type"),
        Refusal::ListTooLong(bound, given) => format!(
            "a list of {given} entries is past the bound of {}",
            bound.max()
        ),
        Refusal::TooMany(bound) => format!(
            "the practice is at its bound of {} {}",
            bound.max(),
            match bound {
                Bound::LabelsOnPatient => "labels on a patient",
                Bound::Locations => "locations",
                Bound::AppointmentTypes => "appointment types",
                Bound::ApiTokens => "live API tokens: revoke one first",
                Bound::MetadataEntries => "metadata entries on a booking",
                Bound::PhonesOnPatient => "phones on a patient",
                Bound::NumbersOnPatient => "numbers on a patient",
                Bound::AttributesOnPatient => "custom attributes on a patient",
                Bound::RelationshipsOnPatient => "relationships on a patient",
                Bound::AccessGroupsOnPatient => "access groups on a patient",
                Bound::Products => "products",
                Bound::AccessGroups => "access groups",
                Bound::NumberDefinitions => "number definitions",
                Bound::ServicesProvided => "services of a location or a practitioner",
                Bound::Webhooks => "webhook subscriptions",
            }
        ),
    }
}

/// The operator, as the audit log records the command line.
static OPERATOR: LazyLock<Actor> = LazyLock::new(Actor::operator);

/// The practice's store as the operator writes to it with `command`: every write is recorded
/// in the audit log as the command line's.
fn as_operator<'a>(store: &'a Store, practice_id: &'a str, command: &'a str) -> PracticeStore<'a> {
    store.practice(practice_id).by(Author {
        actor: &OPERATOR,
        operation: Some(command),
        key: None,
    })
}

/// The practice named by `--practice`, or the default practice (made on first use).
pub async fn practice(store: &Store, id: Option<&str>) -> AdminResult<Practice> {
    match id {
        None => Ok(store.default_practice().await?),
        Some(id) => store
            .find_practice(id)
            .await?
            .ok_or_else(|| invalid(format!("no practice with id {id}"))),
    }
}

/// `practice create --name N`.
pub async fn create_practice(store: &Store, name: &str) -> AdminResult<Practice> {
    let name = text::required("--name", name, MAX_LINE_CHARS).map_err(invalid)?;
    Ok(store.create_practice(&name).await?)
}

/// What `user create` needs.
pub struct NewStaff<'a> {
    pub email: &'a str,
    /// Form of address, e.g. "Dr".
    pub title: Option<&'a str>,
    pub first_name: &'a str,
    pub last_name: &'a str,
    pub role: &'a str,
    pub is_doctor: bool,
    pub password: &'a str,
}

/// `user create ...`: checks the input, hashes the password with Argon2id, adds the user.
pub async fn create_user(store: &Store, practice_id: &str, new: NewStaff<'_>) -> AdminResult<User> {
    let role: Role = new.role.parse().map_err(invalid)?;
    let email = text::email("--email", new.email)
        .map_err(invalid)?
        .ok_or_else(|| invalid("--email must not be empty"))?;
    let first_name =
        text::required("--first-name", new.first_name, MAX_LINE_CHARS).map_err(invalid)?;
    let last_name =
        text::required("--last-name", new.last_name, MAX_LINE_CHARS).map_err(invalid)?;
    let title =
        text::optional("--title", new.title.unwrap_or(""), MAX_LINE_CHARS).map_err(invalid)?;
    password::check_new_password(new.password).map_err(invalid)?;
    let owned = new.password.to_string();
    let hash = tokio::task::spawn_blocking(move || password::hash_password(&owned))
        .await
        .map_err(|e| invalid(e.to_string()))?
        .map_err(invalid)?;
    let user = as_operator(store, practice_id, "user create")
        .create_user(
            NewUser {
                email: &email,
                password_hash: Some(&hash),
                title: title.as_deref(),
                first_name: &first_name,
                last_name: &last_name,
                role: role.as_str(),
                is_doctor: new.is_doctor,
                profile: Profile::default(),
                access_groups: &[],
                metadata: &[],
                services: &[],
            },
            None,
        )
        .await??;
    Ok(user)
}

/// While the default practice has no staff, the one-time link's token that `serve` prints
/// to create its first admin; None once it has staff.
pub async fn first_admin_link(store: &Store) -> AdminResult<Option<String>> {
    let practice = store.default_practice().await?;
    match auth::staff::first_admin_link(store.practice(&practice.id)).await {
        Ok(token) => Ok(token),
        Err(auth::staff::StaffError::Store(error)) => Err(error.into()),
        Err(other) => Err(invalid(other.to_string())),
    }
}

/// `user list`: every staff user of the practice, disabled ones included.
pub async fn list_users(store: &Store, practice_id: &str) -> AdminResult<Vec<User>> {
    let practice = store.practice(practice_id);
    let mut users = Vec::new();
    for page in 1.. {
        let found = practice
            .list_users(PageRequest {
                page,
                page_size: 100,
            })
            .await?;
        users.extend(found.items);
        if !found.has_more {
            break;
        }
    }
    Ok(users)
}

/// The staff user with this email, and their practice's id: in the practice given with
/// `--practice`, or, without it, wherever they are (an email is unique across practices), so
/// that an operator cuts off an account of any practice by its email alone.
async fn user_by_email(
    store: &Store,
    practice: Option<&str>,
    email: &str,
) -> AdminResult<(String, User)> {
    let missing = || invalid(format!("no staff user with email {}", email.trim()));
    let practice_id = match practice {
        Some(id) => self::practice(store, Some(id)).await?.id,
        None => {
            store
                .find_credentials(email.trim())
                .await?
                .ok_or_else(missing)?
                .practice_id
        }
    };
    let user = store
        .practice(&practice_id)
        .find_user_by_email(email)
        .await?
        .ok_or_else(missing)?;
    Ok((practice_id, user))
}

/// The operator may give and act on every role.
fn any_role(_: &str) -> bool {
    true
}

/// `user disable EMAIL [--revoke-tokens]`: their sessions end at once and signIn refuses
/// them; with `revoke_tokens`, the API tokens they made are revoked too.
pub async fn disable_user(
    store: &Store,
    practice: Option<&str>,
    email: &str,
    revoke_tokens: bool,
) -> AdminResult<User> {
    let (practice_id, user) = user_by_email(store, practice, email).await?;
    Ok(as_operator(store, &practice_id, "user disable")
        .disable_user(&user.id, None, &any_role, revoke_tokens)
        .await??)
}

/// `user enable EMAIL`.
pub async fn enable_user(store: &Store, practice: Option<&str>, email: &str) -> AdminResult<User> {
    let (practice_id, user) = user_by_email(store, practice, email).await?;
    Ok(as_operator(store, &practice_id, "user enable")
        .enable_user(&user.id, &any_role)
        .await??)
}

/// `user reset-password EMAIL [--revoke-tokens]`: the old password stops working, the user's
/// sessions end (and with `revoke_tokens` the API tokens they made); returns the one-time
/// set-password token.
pub async fn reset_password(
    store: &Store,
    practice: Option<&str>,
    email: &str,
    revoke_tokens: bool,
) -> AdminResult<(User, String)> {
    let (practice_id, user) = user_by_email(store, practice, email).await?;
    let practice = as_operator(store, &practice_id, "user reset-password");
    match auth::staff::reset_password(practice, &user.id, &any_role, revoke_tokens).await {
        Ok(done) => Ok((done.user, done.set_password_token)),
        Err(auth::staff::StaffError::Refused(refusal)) => Err(invalid(say(&refusal))),
        Err(auth::staff::StaffError::Store(error)) => Err(error.into()),
        Err(other) => Err(invalid(other.to_string())),
    }
}

/// `token create ...`: returns the token and its secret.
pub async fn create_token(
    store: &Store,
    practice_id: &str,
    name: &str,
    permissions: &[String],
    expires_at: Option<&str>,
) -> AdminResult<(Token, String)> {
    let permissions = parse_permissions(permissions).map_err(invalid)?;
    let expires_at = expires_at
        .map(|text| {
            chrono::DateTime::parse_from_rfc3339(text)
                .map(|t| t.timestamp_millis())
                .map_err(|_| {
                    invalid(format!(
                        "--expires-at {text:?} is not an RFC 3339 timestamp such as \
                         2027-01-31T00:00:00Z"
                    ))
                })
                .and_then(|at| match at > now_ms() {
                    true => Ok(at),
                    false => Err(invalid(format!("--expires-at {text} is not in the future"))),
                })
        })
        .transpose()?;
    let practice = as_operator(store, practice_id, "token create");
    auth::issue_api_token(practice, name, &permissions, expires_at, None)
        .await
        .map_err(|e| match e {
            auth::IssueError::Invalid(message) => invalid(message),
            auth::IssueError::Refused(refusal) => invalid(say(&refusal)),
            auth::IssueError::Store(error) => error.into(),
        })
}

/// `backup --to FILE`: a consistent copy of the live SQLite database in the new file `to`;
/// returns its size. On PostgreSQL the store's answer says to use `pg_dump`, whatever the
/// file.
pub async fn backup(store: &Store, to: &std::path::Path) -> AdminResult<u64> {
    if store.engine() == crate::store::Engine::Sqlite && to.exists() {
        return Err(invalid(format!(
            "{} exists: back up to a new file",
            to.display()
        )));
    }
    let path = to
        .to_str()
        .ok_or_else(|| invalid(format!("{} is not a UTF-8 path", to.display())))?;
    store.backup_to(path).await?;
    Ok(std::fs::metadata(to).map(|m| m.len()).unwrap_or(0))
}

/// `token list`: every token, revoked and expired ones too, however many.
pub async fn list_tokens(store: &Store, practice_id: &str) -> AdminResult<Vec<Token>> {
    Ok(store.practice(practice_id).all_api_tokens().await?)
}

/// `token revoke ID`.
pub async fn revoke_token(store: &Store, id: &str) -> AdminResult<Token> {
    let practice_id = store
        .find_token_practice(id)
        .await?
        .ok_or_else(|| invalid(format!("no API token with id {id}")))?;
    as_operator(store, &practice_id, "token revoke")
        .revoke_token(id, TokenKind::Api)
        .await?
        .ok_or_else(|| invalid(format!("no API token with id {id}")))
}

/// Occupations demo patients have.
const OCCUPATIONS: &[&str] = &["Teacher", "Nurse", "Engineer", "Retired", "Student", "Chef"];

/// Gives the first demo patients the rest of a record: an emergency contact (the next
/// patient, or a named contact), a custom attribute, and a membership for some, so that
/// GraphiQL shows a realistic record.
async fn demo_records(
    practice: PracticeStore<'_>,
    ids: &[String],
    rng: &mut StdRng,
) -> AdminResult<()> {
    use crate::store::patient_record::{AttributeEntry, Contact};
    // A name taken by an earlier demo run is left as it is; its definitions are then found.
    let _taken = practice
        .create_number_definition("NHS number", true)
        .await?;
    let _taken = practice
        .create_number_definition("Insurance number", false)
        .await?;
    let _taken = practice
        .create_access_group("mental-health", "Mental health team")
        .await?;
    let nhs = practice
        .list_number_definitions()
        .await?
        .into_iter()
        .find(|n| n.name == "NHS number");
    for (n, id) in ids.iter().enumerate().take(50) {
        if let Some(nhs) = &nhs {
            let value = format!("{:03} {:03} {:04}", 400 + n, rng.random_range(0..1000), n);
            practice.add_number(id, &nhs.id, value).await??;
        }
        let contact = match ids.get(n + 1) {
            Some(next) if n % 2 == 0 => Contact {
                related_account_id: Some(next.clone()),
                ..Contact::default()
            },
            _ => Contact {
                first_name: Some("Sam".into()),
                last_name: Some("Taylor".into()),
                phone_type: Some("mobile".into()),
                phone_number: Some(format!("07700 9{:05}", rng.random_range(0..100_000))),
                ..Contact::default()
            },
        };
        practice
            .add_relationship(
                id,
                "EMERGENCY_CONTACT".into(),
                Some("Partner".into()),
                contact,
            )
            .await??;
        let attribute = AttributeEntry {
            id: String::new(),
            title: "Allergies".into(),
            text: "Does the patient have any allergies?".into(),
            response: ["None", "Penicillin", "Latex", "Pollen"][n % 4].into(),
            required: false,
        };
        practice.add_attribute(id, attribute).await??;
        if n % 3 == 0 {
            practice
                .set_membership(id, "Gold plan".into(), Some("2026-01-01".into()))
                .await??;
        }
    }
    Ok(())
}

/// What `demo` made, for the operator.
pub struct DemoSummary {
    pub patients: usize,
    pub labels: usize,
    pub bookings: usize,
    /// (email, role) of each staff user made; they share `password`.
    pub staff: Vec<(String, String)>,
    /// The demo staff's password: made at random, and shown this once.
    pub password: String,
}

/// A new random password for the demo staff: 20 letters and digits (about 119 bits).
fn random_password() -> String {
    use rand::distr::{Alphanumeric, SampleString};
    Alphanumeric.sample_string(&mut rand::rng(), 20)
}

const FIRST_NAMES: &[&str] = &[
    "Olivia", "Liam", "Emma", "Noah", "Amelia", "Oliver", "Ava", "Elijah", "Sophia", "Lucas",
    "Isla", "Mateo", "Mia", "Leo", "Chloé", "Aarav", "Zoë", "Mohammed", "Freya", "Hiro", "Ingrid",
    "José", "Fatima", "Sven", "Niamh", "Kofi", "Priya", "Tomás", "Yuki", "Eva",
];
const LAST_NAMES: &[&str] = &[
    "Smith", "Jones", "Taylor", "Brown", "Williams", "Wilson", "Johnson", "Davies", "Patel",
    "Robinson", "Wright", "Thompson", "Evans", "Walker", "White", "Roberts", "Green", "Hall",
    "Müller", "García", "Nguyen", "O'Brien", "Kowalski", "Rossi", "Andersen", "Okafor", "Tanaka",
    "Silva", "Dubois", "Jansen",
];
const CITIES: &[&str] = &[
    "London",
    "Manchester",
    "Bristol",
    "Leeds",
    "Glasgow",
    "Cardiff",
    "Belfast",
    "York",
];
const LABELS: &[(&str, &str)] = &[
    ("VIP", "#f59e0b"),
    ("New patient", "#10b981"),
    ("Allergy", "#ef4444"),
    ("Wheelchair access", "#3b82f6"),
    ("Interpreter needed", "#8b5cf6"),
    ("Overdue payment", "#6b7280"),
];

/// `demo [--patients N]`: fills a practice with realistic demo data: labels, staff and
/// patients (deterministic, but for ids and the staff's password). Refused for a practice
/// that has patients, labels or staff: demo data is for a practice that is empty, never mixed
/// with a clinic's (nor with an earlier demo's, whose staff a second run would not make again,
/// and whose password it would print for nobody).
/// `starting` is called once the practice is found empty, before the work: a refusal is then
/// its one line, with no word of work before it.
pub async fn demo(
    store: &Store,
    practice_id: &str,
    patients: usize,
    starting: impl FnOnce(),
) -> AdminResult<DemoSummary> {
    let practice = as_operator(store, practice_id, "demo");
    if practice.has_patients_labels_or_staff().await? {
        return Err(invalid(
            "the practice already has patients, labels or staff: demo data goes into an empty \
             practice (make one with `practice create` and pass --practice)",
        ));
    }
    starting();
    let password = random_password();
    let mut label_ids = Vec::new();
    for (title, color) in LABELS {
        // A title taken by an earlier demo run is skipped.
        if let Ok(label) = practice.create_label(title, Some(color)).await? {
            label_ids.push(label.id);
        }
    }
    let mut staff = Vec::new();
    let suffix = &practice_id[practice_id.len().saturating_sub(6)..];
    for (first, last, role, doctor) in [
        ("Ada", "Admin", "admin", false),
        ("Grace", "Hopper", "practitioner", true),
        ("Alan", "Turing", "practitioner", true),
        ("Rosa", "Desk", "receptionist", false),
    ] {
        let email = format!(
            "{}.{}@demo-{suffix}.example",
            first.to_lowercase(),
            last.to_lowercase()
        );
        let made = create_user(
            store,
            practice_id,
            NewStaff {
                email: &email,
                title: doctor.then_some("Dr"),
                first_name: first,
                last_name: last,
                role,
                is_doctor: doctor,
                password: &password,
            },
        )
        .await;
        match made {
            Ok(user) => staff.push((user.email, role.to_string())),
            Err(AdminError::Invalid(_)) => {} // the email is taken: another practice's demo
            Err(e) => return Err(e),
        }
    }
    let mut rng = StdRng::seed_from_u64(20_261_122);
    let born_after = NaiveDate::from_ymd_opt(1935, 1, 1).unwrap_or_default();
    let mut fields = Vec::with_capacity(patients);
    for i in 0..patients {
        // One patient in five gets a label.
        let labels: Vec<String> = label_ids
            .get(i / 5 % label_ids.len().max(1))
            .filter(|_| i % 5 == 0)
            .cloned()
            .into_iter()
            .collect();
        let first = *FIRST_NAMES.choose(&mut rng).unwrap_or(&"Alex");
        let last = *LAST_NAMES.choose(&mut rng).unwrap_or(&"Doe");
        let dob = born_after + Days::days(rng.random_range(0..32_000));
        let email_name: String = format!("{first}.{last}{i}")
            .to_lowercase()
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '.')
            .collect();
        let patient = PatientFields {
            title: None,
            first_name: first.to_string(),
            last_name: last.to_string(),
            email: Some(format!("{email_name}@example.com")),
            dob: Some(dob.format("%Y-%m-%d").to_string()),
            gender: None,
            sex: Some(
                if rng.random_range(0..2) == 0 {
                    "female"
                } else {
                    "male"
                }
                .to_string(),
            ),
            address: Some(format!("{} High Street", rng.random_range(1..300))),
            city: Some(CITIES.choose(&mut rng).unwrap_or(&"London").to_string()),
            postcode: None,
            country: Some("United Kingdom".into()),
            phone_type: Some("mobile".into()),
            phone_number: Some(format!("07700 9{:05}", rng.random_range(0..100_000))),
            comments: None,
            occupation: OCCUPATIONS.choose(&mut rng).map(|o| o.to_string()),
            place_of_birth_name: CITIES.choose(&mut rng).map(|c| c.to_string()),
            payment_reference: Some(format!("PAY-{:06}", rng.random_range(0..1_000_000))),
            communication: Some(
                serde_json::json!({
                    "receive_email": true,
                    "receive_sms": rng.random_range(0..2) == 0,
                    "promotional_marketing": false,
                    "payment_reminders": true,
                    "privacy_policy": "accepted",
                })
                .to_string(),
            ),
            ..Default::default()
        };
        fields.push((patient, labels));
    }
    let ids = practice.import_patients(fields).await?;
    demo_records(practice, &ids, &mut rng).await?;
    let bookings = demo_bookings(store, practice_id, &ids, &mut rng).await?;
    store.refresh_statistics().await?;
    Ok(DemoSummary {
        patients: ids.len(),
        labels: label_ids.len(),
        bookings,
        staff,
        password,
    })
}

/// (name, site, city): two rooms of one site, and a site of its own.
const LOCATIONS: &[(&str, Option<&str>, &str)] = &[
    ("Room 1", Some("Main surgery"), "London"),
    ("Room 2", Some("Main surgery"), "London"),
    ("Riverside clinic", None, "York"),
];
/// Products that are not booked: (name, type, price, item code).
const OTHER_PRODUCTS: &[(&str, &str, f64, &str)] = &[
    ("Medical report", "service", 120.0, "SRV-REPORT"),
    ("Knee brace", "item", 35.0, "ITM-BRACE"),
];
const APPOINTMENT_TYPES: &[(&str, i64, f64)] = &[
    ("Initial consultation", 45, 80.0),
    ("Follow-up", 30, 50.0),
    ("Quick check", 15, 25.0),
];

/// Four weeks of bookings (two back, two ahead), weekdays 09:00 to 17:00 UTC, for every
/// doctor of the practice, with the demo's patients. The database refuses overlaps, so a
/// second demo run books only the slots still free.
async fn demo_bookings(
    store: &Store,
    practice_id: &str,
    patients: &[String],
    rng: &mut StdRng,
) -> AdminResult<usize> {
    use chrono::{Datelike, Utc, Weekday};

    let practice = as_operator(store, practice_id, "demo");
    // A name or title taken by an earlier demo run is left as it is.
    for (title, minutes, price) in APPOINTMENT_TYPES {
        let _taken = practice
            .create_appointment_type(title, *minutes, Some(*price))
            .await?;
    }
    let types = practice.list_appointment_types().await?;
    for (name, kind, price, code) in OTHER_PRODUCTS {
        let mut product = crate::store::products::Product::new(kind, name);
        product.price = Some(*price);
        product.item_code = Some(code.to_string());
        product.tax_name = Some("VAT".into());
        product.tax_rate = Some(20);
        let _taken = practice.create_product(product).await?;
    }
    let offered: Vec<String> = types.iter().map(|t| t.id.clone()).collect();
    for (name, site, city) in LOCATIONS {
        let mut location = crate::store::locations::Location::named(name);
        location.address = Some("1 Market Square".into());
        location.city = Some(city.to_string());
        location.country = Some("United Kingdom".into());
        location.group_name = site.map(str::to_string);
        location.services_provided = serde_json::Value::from(offered.clone()).to_string();
        let _taken = practice.create_location(location).await?;
    }
    let locations = practice.list_locations().await?;
    let mut doctors = Vec::new();
    let mut page = 1;
    loop {
        let found = practice
            .list_users(crate::store::PageRequest {
                page,
                page_size: 100,
            })
            .await?;
        doctors.extend(
            found
                .items
                .into_iter()
                .filter(|u| u.is_doctor != 0)
                .map(|u| u.id),
        );
        if !found.has_more {
            break;
        }
        page += 1;
    }
    if patients.is_empty() || types.is_empty() {
        return Ok(0);
    }
    let today = Utc::now().date_naive();
    let mut made = 0;
    for day in -14..14 {
        let date = today + Days::days(day);
        if matches!(date.weekday(), Weekday::Sat | Weekday::Sun) {
            continue;
        }
        let opening = date
            .and_hms_opt(9, 0, 0)
            .unwrap_or_default()
            .and_utc()
            .timestamp_millis();
        let closing = opening + 8 * 3_600_000;
        for (d, doctor) in doctors.iter().enumerate() {
            let mut at = opening;
            while at < closing {
                let kind = &types[rng.random_range(0..types.len())];
                let end = at + kind.duration.unwrap_or(30) * 60_000;
                if end > closing {
                    break;
                }
                if rng.random_range(0..10) < 7 {
                    let fields = crate::store::bookings::BookingFields {
                        patient_id: patients[rng.random_range(0..patients.len())].clone(),
                        doctor_id: doctor.clone(),
                        location_id: locations
                            .get(d % locations.len().max(1))
                            .map(|l| l.id.clone()),
                        appointment_type_id: Some(kind.id.clone()),
                        start_at: at,
                        end_at: end,
                        status: if rng.random_range(0..10) == 0 {
                            "pending".into()
                        } else {
                            "confirmed".into()
                        },
                        video_url: (rng.random_range(0..8) == 0)
                            .then(|| format!("https://video.example.com/{at}")),
                        send_confirmation: 1,
                        send_reminder: 1,
                        ..Default::default()
                    };
                    if practice.create_booking(fields).await?.is_ok() {
                        made += 1;
                    }
                }
                at = end
                    + if rng.random_range(0..4) == 0 {
                        15 * 60_000
                    } else {
                        0
                    };
            }
        }
    }
    Ok(made)
}

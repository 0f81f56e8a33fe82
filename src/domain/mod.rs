//! What the API and the command line share of the practice's rules: why a change can be
//! refused, as types. The store decides (each rule in one place, inside the transaction that
//! makes the change); the GraphQL layer and the command line each word the outcome in their
//! own vocabulary. Nothing here knows SQL, GraphQL or HTTP.

mod bookings;
pub mod limits;

pub use bookings::{MAX_BOOKING_MS, check_booking_times};

/// A kind of record, as a refusal names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Record {
    Patient,
    Label,
    Booking,
    Doctor,
    Location,
    AppointmentType,
    ApiToken,
    User,
    Webhook,
    WebhookDelivery,
    /// A one-time link that sets a password or makes a first admin.
    Link,
    Practice,
    Phone,
    /// A number definition of the practice ("NHS number").
    NumberDefinition,
    /// A patient's value for a number definition.
    PatientNumber,
    Attribute,
    Relationship,
    AccessGroup,
    /// A product of the practice's catalogue (an appointment type is one).
    Product,
}

impl Record {
    /// The kind in words with its article: "a location", "an access group".
    pub fn with_article(self) -> String {
        let noun = self.noun();
        let article = if noun.starts_with(['a', 'e', 'i', 'o', 'u']) {
            "an"
        } else {
            "a"
        };
        format!("{article} {noun}")
    }

    /// The record's kind in words: "patient", "appointment type", "API token".
    pub fn noun(self) -> &'static str {
        match self {
            Record::Patient => "patient",
            Record::Label => "label",
            Record::Booking => "booking",
            Record::Doctor => "doctor",
            Record::Location => "location",
            Record::AppointmentType => "appointment type",
            Record::ApiToken => "API token",
            Record::User => "staff user",
            Record::Webhook => "webhook subscription",
            Record::WebhookDelivery => "webhook delivery",
            Record::Link => "one-time link",
            Record::Practice => "practice",
            Record::Phone => "phone",
            Record::NumberDefinition => "number definition",
            Record::PatientNumber => "patient number",
            Record::Attribute => "custom attribute",
            Record::Relationship => "relationship",
            Record::AccessGroup => "access group",
            Record::Product => "product",
        }
    }
}

/// The state that keeps a patient from being booked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatientState {
    Archived,
    Deleted,
}

/// Another booking that holds the doctor at the time asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Busy {
    /// The doctor's name with title, e.g. "Dr Grace Hopper".
    pub doctor: String,
    /// When the booking in the way starts and ends (milliseconds, UTC).
    pub start: i64,
    pub end: i64,
}

/// Why the practice refused a change. Nothing was written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The record the change names does not exist in the caller's practice.
    NotFound(Record, String),
    /// A label the change puts on a patient is not in the practice's catalogue.
    LabelNotInCatalogue(String),
    /// The patient is deleted: nothing of it changes any more.
    PatientDeleted,
    PatientAlreadyArchived,
    PatientNotArchived,
    /// An archived or deleted patient cannot be booked.
    PatientCannotBeBooked(PatientState),
    /// The label is on the patient already.
    LabelAlreadyOnPatient {
        title: String,
    },
    /// The patient has no label with this id (of its place on the patient, or of the catalogue).
    LabelNotOnPatient(String),
    /// The staff user named as doctor is not one.
    NotADoctor {
        id: String,
        name: String,
    },
    /// The doctor's account is disabled: they are booked no more.
    DoctorDisabled {
        id: String,
        name: String,
    },
    /// The doctor is booked at that time; the booking in the way, if it could still be found.
    DoctorBusy(Option<Busy>),
    BookingCancelled,
    BookingAlreadyCancelled,
    /// A record of this kind already has this title, name or email, which must be unique.
    Taken(Record, String),
    /// The change would pass one of the bounds of `limits`.
    TooMany(Bound),
    /// A list given whole (a product's metadata, a new patient's custom attributes) holds
    /// more entries than the bound (this many).
    ListTooLong(Bound, usize),
    /// The webhook subscription is deleted: nothing of it changes any more.
    WebhookDeleted,
    /// A live subscription already sends this event type to this URL.
    WebhookTaken {
        url: String,
        event_type: String,
    },
    /// The delivery is waiting for its next attempt already.
    DeliveryPending,
    /// A relationship's contact would be left with neither a related patient nor a name.
    ContactUnnamed,
    /// The delivery's subscription no longer sends its event type (this one).
    TypeNotSent(String),
    /// As many old secrets as may sign at once still do: the oldest until then (ms).
    SecretsSigning {
        until: i64,
    },
    /// The change would leave the practice without an enabled admin.
    LastAdmin,
    /// The caller would grant (or act on) a role whose permissions it does not hold itself.
    RoleAboveCaller(String),
    /// A staff user cannot disable their own account.
    OwnAccount,
    /// The staff user is disabled: enable them first.
    UserDisabled,
    /// The token a request came with was revoked (or signed out) before the API token it
    /// makes was stored: that token is not made, so that none escapes a revocation of its
    /// maker's tokens.
    MakerRevoked,
    /// The practice has staff already: its first admin is made once.
    PracticeHasStaff,
    /// The booking has no metadata entry with this key.
    NoMetadataKey(String),
    /// A metadata key (`value: false`) or value (`value: true`) longer than its limit, with
    /// its length in characters.
    MetadataTooLong {
        value: bool,
        chars: usize,
    },
    /// A patient's value of a number longer than an entry's value may be, with its length in
    /// characters.
    NumberValueTooLong(usize),
    /// The patient has a value for this number definition already.
    NumberAlreadyOnPatient,
    /// The patient is in this access group already.
    AccessGroupAlreadyOnPatient,
    /// The patient has no membership to remove.
    NoMembership,
    /// A patient is not related to itself.
    RelatedToItself,
    /// The change would leave the patient with no first name, last name or email.
    PatientUnnamed,
    /// The patient is on hold: no new booking.
    PatientOnHold,
    /// The patient is archived: their record's lists change once they are brought back.
    PatientArchived,
    /// A product's type is fixed once made (this one's).
    ProductTypeFixed(String),
    /// The product named by a booking is not an active, bookable appointment type (its name).
    NotBookable(String),
}

/// A bound of [`limits`] that a change would pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    LabelsOnPatient,
    Locations,
    AppointmentTypes,
    ApiTokens,
    MetadataEntries,
    PhonesOnPatient,
    NumbersOnPatient,
    AttributesOnPatient,
    RelationshipsOnPatient,
    AccessGroupsOnPatient,
    Products,
    AccessGroups,
    NumberDefinitions,
    ServicesProvided,
    Webhooks,
}

impl Bound {
    /// The bound's value.
    pub fn max(self) -> usize {
        match self {
            Bound::LabelsOnPatient => limits::MAX_LABELS_PER_PATIENT,
            Bound::Locations => limits::MAX_LOCATIONS,
            Bound::AppointmentTypes => limits::MAX_APPOINTMENT_TYPES,
            Bound::ApiTokens => limits::MAX_API_TOKENS,
            Bound::MetadataEntries => limits::MAX_METADATA_ENTRIES,
            Bound::PhonesOnPatient => limits::MAX_PHONES_PER_PATIENT,
            Bound::NumbersOnPatient => limits::MAX_NUMBERS_PER_PATIENT,
            Bound::AttributesOnPatient => limits::MAX_ATTRIBUTES_PER_PATIENT,
            Bound::RelationshipsOnPatient => limits::MAX_RELATIONSHIPS_PER_PATIENT,
            Bound::AccessGroupsOnPatient => limits::MAX_ACCESS_GROUPS_PER_PATIENT,
            Bound::Products => limits::MAX_PRODUCTS,
            Bound::AccessGroups => limits::MAX_ACCESS_GROUPS,
            Bound::NumberDefinitions => limits::MAX_NUMBER_DEFINITIONS,
            Bound::ServicesProvided => limits::MAX_SERVICES_PROVIDED,
            Bound::Webhooks => limits::MAX_WEBHOOKS,
        }
    }
}

/// Past the contract's limits on metadata (a key of at most
/// [`MAX_METADATA_KEY_CHARS`](limits::MAX_METADATA_KEY_CHARS) characters, a value of at most
/// [`MAX_METADATA_VALUE_CHARS`](limits::MAX_METADATA_VALUE_CHARS)), why an entry is refused: a
/// business refusal, answered in `error`. The rest of an entry's rules (a key, no control
/// characters) are the input's own (`text::metadata_entry`).
pub fn metadata_entry_refusal(key: &str, value: Option<&str>) -> Option<Refusal> {
    let chars = key.chars().count();
    if chars > limits::MAX_METADATA_KEY_CHARS {
        return Some(Refusal::MetadataTooLong {
            value: false,
            chars,
        });
    }
    let chars = value.map_or(0, |v| v.chars().count());
    (chars > limits::MAX_METADATA_VALUE_CHARS)
        .then_some(Refusal::MetadataTooLong { value: true, chars })
}

/// Past the contract's limit on an entry's value (a patient's number is an entry of a list,
/// as metadata is: [`MAX_METADATA_VALUE_CHARS`](limits::MAX_METADATA_VALUE_CHARS)
/// characters), why a number's value is refused: a business refusal, answered in `error`.
pub fn number_value_refusal(value: &str) -> Option<Refusal> {
    let chars = value.chars().count();
    (chars > limits::MAX_METADATA_VALUE_CHARS).then_some(Refusal::NumberValueTooLong(chars))
}

/// Why a list of metadata given whole (a product's, a staff user's) is refused: more than
/// [`MAX_METADATA_ENTRIES`](limits::MAX_METADATA_ENTRIES) entries, or an entry past
/// [`metadata_entry_refusal`]'s limits.
pub fn metadata_list_refusal(pairs: &[(String, String)]) -> Option<Refusal> {
    if pairs.len() > limits::MAX_METADATA_ENTRIES {
        return Some(Refusal::ListTooLong(Bound::MetadataEntries, pairs.len()));
    }
    pairs
        .iter()
        .find_map(|(key, value)| metadata_entry_refusal(key, Some(value)))
}

/// A change whose input breaks a rule of its own, whatever the state of the practice: the
/// caller's mistake, not a refusal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Invalid {
    /// A booking must end after it starts.
    BookingEndsBeforeStart,
    /// A booking lasts at most [`MAX_BOOKING_MS`].
    BookingTooLong,
    /// An appointment type has a duration.
    AppointmentWithoutDuration,
    /// Only an appointment type can be bookable.
    BookableNotAppointment,
}

/// Why a change was not made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Denied {
    Refused(Refusal),
    Invalid(Invalid),
}

impl From<Refusal> for Denied {
    fn from(refusal: Refusal) -> Self {
        Denied::Refused(refusal)
    }
}

impl From<Invalid> for Denied {
    fn from(invalid: Invalid) -> Self {
        Denied::Invalid(invalid)
    }
}

/// The outcome of a change that the practice's rules can deny: the record as changed, or why
/// nothing was.
pub type Change<T> = Result<T, Denied>;

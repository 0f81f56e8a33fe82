//! A bounded fuzz test of the real HTTP stack: mutated GraphQL documents, variables and raw
//! bodies, sent over TCP to one server (SQLite) for the whole run. Whatever it is sent, the
//! server must never answer 5xx, never panic, never take seconds, always answer a JSON object
//! with `data` or `errors`, and give every error an `extensions.code` from the fixed list
//! below (never INTERNAL_SERVER_ERROR); after the run it must still serve a normal query.
//!
//! First a small corpus of requests that found bugs or sit on a limit, every run; then the
//! random cases: documents built from the schema's real fields (wild ones, and strict ones
//! that mostly validate, to reach the resolvers and the store), then edited character by
//! character; real operations with variables of right and wrong types; raw bodies; GET
//! requests; documents built to find limits (deep, wide, recursive). With and without tokens,
//! under both response media types.
//!
//! - `PRACTICE_FUZZ_CASES`: how many random requests (default 400).
//! - `PROPTEST_RNG_SEED`: another seed than the fixed default, to explore further.
//! - `RUST_LOG=practice_api=debug`: the server's log on stderr, to read an internal error.
//! - `PRACTICE_FUZZ_VERBOSE=1`: every request (before it is sent) and the start of its answer
//!   on stderr. If the run aborts (the server crashed the process, a stack overflow say), the
//!   last request printed is the one that did it.
//!
//! A failure prints the minimal request proptest found, and what the server answered; one
//! that kept the server busy is not shrunk (later answers would mean nothing). Nothing is
//! written to disk: failure persistence is off.

// The helpers serve the api suite too; this binary uses a few of them.
#[allow(dead_code)]
#[path = "api/helpers.rs"]
mod helpers;

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::io::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::sample::{Index, select};
use proptest::strategy::Union;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestRunner};
use reqwest::header::HeaderValue;
use serde_json::{Map, Value, json};

use helpers::{Engine, PASSWORD, TestApp};

/// Requests per run unless `PRACTICE_FUZZ_CASES` says otherwise.
const DEFAULT_CASES: u32 = 400;
/// The seed unless `PROPTEST_RNG_SEED` says otherwise: every run tries the same inputs.
const DEFAULT_SEED: u64 = 0x5eed_f022;
/// The only `extensions.code` values an answer to these requests may carry.
const ALLOWED_CODES: &[&str] = &[
    "UNAUTHENTICATED",
    "FORBIDDEN",
    "BAD_USER_INPUT",
    "BAD_REQUEST",
    "GRAPHQL_PARSE_FAILED",
    "GRAPHQL_VALIDATION_FAILED",
    // Added with the query limits (README, "Query limits"): a document over a limit.
    "QUERY_TOO_COMPLEX",
];
/// Largest nesting the bombs try (braces, list and object literals).
const MAX_NESTING: usize = 3000;
/// Longer than any answer should take, even in a debug build.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Slower than this is a failure too: no request here should cost the server seconds.
const SLOW_ANSWER: Duration = Duration::from_secs(5);

type S = BoxedStrategy<String>;

// ---------------------------------------------------------------------------------------
// The schema, as far as documents need it.
// ---------------------------------------------------------------------------------------

/// What an argument takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Kind {
    Id,
    Text,
    Int,
    Float,
    Bool,
    Date,
    DateTime,
    Email,
    Color,
    Permission,
    Pagination,
    Options,
    DateRange,
    PatientInput,
    BookingInput,
    Address,
    IdList,
    PermissionList,
}

type Arg = (&'static str, Kind);
/// A field: its name, its arguments and the type of its selection (None for a leaf).
type Field = (&'static str, &'static [Arg], Option<&'static str>);

const NO: &[Arg] = &[];
const BY_ID: &[Arg] = &[("id", Kind::Id)];
const PAGED: &[Arg] = &[("pagination", Kind::Pagination)];
const DAYS: &[Arg] = &[("start", Kind::Date), ("end", Kind::Date)];

const fn leaf(name: &'static str) -> Field {
    (name, NO, None)
}

const fn object(name: &'static str, ty: &'static str) -> Field {
    (name, NO, Some(ty))
}

/// The fields of an output type.
fn fields(ty: &str) -> &'static [Field] {
    use Kind::*;
    match ty {
        "Query" => {
            const {
                &[
                    ("patient", BY_ID, Some("Patient")),
                    (
                        "patients",
                        &[
                            ("search", Text),
                            ("pagination", Pagination),
                            ("options", Options),
                        ],
                        Some("PatientData"),
                    ),
                    ("booking", BY_ID, Some("Booking")),
                    (
                        "bookings",
                        &[
                            ("pagination", Pagination),
                            ("options", Options),
                            ("dateRange", DateRange),
                        ],
                        Some("BookingData"),
                    ),
                    object("locations", "Location"),
                    object("appointmentTypes", "Appointment"),
                    ("labels", PAGED, Some("LabelData")),
                    ("user", BY_ID, Some("User")),
                    ("users", PAGED, Some("UserData")),
                    object("currentUser", "User"),
                    object("currentPractice", "Practice"),
                    object("apiTokens", "ApiToken"),
                    leaf("__typename"),
                    ("__type", &[("name", Text)], Some("__Type")),
                    object("__schema", "__Schema"),
                ]
            }
        }
        "Mutation" => {
            const {
                &[
                    (
                        "signIn",
                        &[("email", Email), ("password", Text)],
                        Some("SignInPayload"),
                    ),
                    leaf("signOut"),
                    (
                        "createPatient",
                        &[("patientData", PatientInput)],
                        Some("PatientResponsePayload"),
                    ),
                    (
                        "updatePatient",
                        &[("id", Id), ("patientData", PatientInput)],
                        Some("PatientResponsePayload"),
                    ),
                    ("deletePatient", BY_ID, Some("PatientResponsePayload")),
                    (
                        "archivePatient",
                        &[("id", Id), ("reason", Text), ("comments", Text)],
                        Some("PatientResponsePayload"),
                    ),
                    ("unarchivePatient", BY_ID, Some("PatientResponsePayload")),
                    (
                        "addPatientLabel",
                        &[("patientId", Id), ("labelReferenceId", Id)],
                        Some("PatientResponsePayload"),
                    ),
                    (
                        "removePatientLabel",
                        &[("patientId", Id), ("labelId", Id)],
                        Some("PatientResponsePayload"),
                    ),
                    (
                        "createBooking",
                        &[("bookingData", BookingInput)],
                        Some("BookingResponsePayload"),
                    ),
                    (
                        "updateBooking",
                        &[("id", Id), ("bookingData", BookingInput)],
                        Some("BookingResponsePayload"),
                    ),
                    (
                        "deleteBooking",
                        &[
                            ("id", Id),
                            ("cancellationReason", Text),
                            ("sendCancellationMessages", Bool),
                            ("notifyPractice", Bool),
                        ],
                        Some("BookingResponsePayload"),
                    ),
                    (
                        "createLocation",
                        &[("name", Text), ("address", Address)],
                        Some("LocationResponsePayload"),
                    ),
                    (
                        "createAppointmentType",
                        &[("title", Text), ("duration", Int), ("price", Float)],
                        Some("AppointmentResponsePayload"),
                    ),
                    (
                        "createLabel",
                        &[("title", Text), ("color", Color)],
                        Some("LabelResponsePayload"),
                    ),
                    (
                        "updateLabel",
                        &[("id", Id), ("title", Text), ("color", Color)],
                        Some("LabelResponsePayload"),
                    ),
                    ("deleteLabel", BY_ID, Some("LabelResponsePayload")),
                    (
                        "createApiToken",
                        &[
                            ("name", Text),
                            ("permissions", PermissionList),
                            ("expiresAt", DateTime),
                        ],
                        Some("ApiTokenPayload"),
                    ),
                    ("revokeApiToken", BY_ID, Some("ApiTokenPayload")),
                    leaf("__typename"),
                ]
            }
        }
        "Patient" => {
            const {
                &[
                    leaf("id"),
                    leaf("title"),
                    leaf("status"),
                    leaf("firstName"),
                    leaf("lastName"),
                    leaf("fullName"),
                    leaf("dob"),
                    leaf("gender"),
                    leaf("sex"),
                    leaf("email"),
                    leaf("comments"),
                    leaf("archived"),
                    leaf("archiveReason"),
                    leaf("archiveComments"),
                    leaf("deleted"),
                    leaf("createdAt"),
                    leaf("updatedAt"),
                    object("phones", "Phone"),
                    object("address", "Address"),
                    object("labels", "PatientLabel"),
                    ("bookings", DAYS, Some("Booking")),
                ]
            }
        }
        "Booking" => {
            const {
                &[
                    leaf("id"),
                    leaf("start"),
                    leaf("end"),
                    leaf("comments"),
                    leaf("reference"),
                    leaf("deleted"),
                    leaf("cancellationReason"),
                    leaf("patientId"),
                    leaf("doctorName"),
                    leaf("createdAt"),
                    leaf("updatedAt"),
                    object("patient", "Patient"),
                    object("doctor", "User"),
                    object("location", "Location"),
                    object("appointment", "Appointment"),
                ]
            }
        }
        "User" => {
            const {
                &[
                    leaf("id"),
                    leaf("title"),
                    leaf("firstName"),
                    leaf("lastName"),
                    leaf("fullName"),
                    leaf("email"),
                    leaf("isDoctor"),
                    leaf("role"),
                    (
                        "bookings",
                        &[
                            ("start", Date),
                            ("end", Date),
                            ("page", Int),
                            ("pageSize", Int),
                        ],
                        Some("BookingData"),
                    ),
                ]
            }
        }
        "PatientData" => const { &[object("data", "Patient"), object("pageInfo", "PageInfo")] },
        "BookingData" => const { &[object("data", "Booking"), object("pageInfo", "PageInfo")] },
        "LabelData" => const { &[object("data", "Label"), object("pageInfo", "PageInfo")] },
        "UserData" => const { &[object("data", "User"), object("pageInfo", "PageInfo")] },
        "PageInfo" => const { &[leaf("page"), leaf("pageSize"), leaf("hasMore")] },
        "Phone" => const { &[leaf("phoneType"), leaf("phoneNumber")] },
        "Address" => {
            const {
                &[
                    leaf("address"),
                    leaf("city"),
                    leaf("postcode"),
                    leaf("country"),
                ]
            }
        }
        "PatientLabel" => const { &[leaf("id"), leaf("referenceId"), leaf("text"), leaf("color")] },
        "Location" => const { &[leaf("id"), leaf("name"), object("address", "Address")] },
        "Appointment" => const { &[leaf("id"), leaf("title"), leaf("duration"), leaf("price")] },
        "Label" => const { &[leaf("id"), leaf("title"), leaf("color")] },
        "Practice" => const { &[leaf("id"), leaf("name")] },
        "ApiToken" => {
            const {
                &[
                    leaf("id"),
                    leaf("name"),
                    leaf("permissions"),
                    leaf("createdAt"),
                    leaf("lastUsedAt"),
                    leaf("expiresAt"),
                    leaf("revoked"),
                ]
            }
        }
        "PatientResponsePayload" => const { &[object("data", "Patient"), leaf("error")] },
        "BookingResponsePayload" => const { &[object("data", "Booking"), leaf("error")] },
        "LabelResponsePayload" => const { &[object("data", "Label"), leaf("error")] },
        "LocationResponsePayload" => const { &[object("data", "Location"), leaf("error")] },
        "AppointmentResponsePayload" => const { &[object("data", "Appointment"), leaf("error")] },
        "ApiTokenPayload" => const { &[object("data", "ApiToken"), leaf("token"), leaf("error")] },
        "SignInPayload" => {
            const {
                &[
                    leaf("token"),
                    leaf("expiresAt"),
                    leaf("error"),
                    object("user", "User"),
                ]
            }
        }
        "__Schema" => {
            const {
                &[
                    object("queryType", "__Type"),
                    object("mutationType", "__Type"),
                    object("types", "__Type"),
                    object("directives", "__Directive"),
                ]
            }
        }
        "__Type" => {
            const {
                &[
                    leaf("name"),
                    leaf("kind"),
                    leaf("description"),
                    object("fields", "__Field"),
                    object("ofType", "__Type"),
                ]
            }
        }
        "__Field" => {
            const {
                &[
                    leaf("name"),
                    leaf("isDeprecated"),
                    object("type", "__Type"),
                    object("args", "__InputValue"),
                ]
            }
        }
        "__InputValue" => const { &[leaf("name"), leaf("defaultValue"), object("type", "__Type")] },
        "__Directive" => {
            const {
                &[
                    leaf("name"),
                    leaf("locations"),
                    object("args", "__InputValue"),
                ]
            }
        }
        _ => &[],
    }
}

/// The fields of an input object kind.
fn input_fields(kind: Kind) -> &'static [Arg] {
    use Kind::*;
    match kind {
        Pagination => &[("page", Int), ("pageSize", Int)],
        DateRange => &[("start", DateTime), ("end", DateTime)],
        Options => &[
            ("includeDeleted", Bool),
            ("includeArchived", Bool),
            ("createdAt", DateRange),
            ("updatedAt", DateRange),
        ],
        Address => &[
            ("address", Text),
            ("city", Text),
            ("postcode", Text),
            ("country", Text),
        ],
        PatientInput => &[
            ("title", Text),
            ("first", Text),
            ("last", Text),
            ("email", Email),
            ("dob", Date),
            ("gender", Text),
            ("sex", Text),
            ("address", Text),
            ("city", Text),
            ("postcode", Text),
            ("country", Text),
            ("phoneType", Text),
            ("phoneNumber", Text),
            ("labels", IdList),
            ("comments", Text),
        ],
        BookingInput => &[
            ("patient", Id),
            ("doctor", Id),
            ("location", Id),
            ("bookingType", Id),
            ("start", DateTime),
            ("end", DateTime),
            ("comments", Text),
        ],
        _ => &[],
    }
}

/// Real operations whose variables `$v0`, `$v1`, ... take these kinds.
const TEMPLATES: &[(&str, &[Kind])] = &[
    (
        "query($v0: ID!) { patient(id: $v0) { id fullName dob labels { id referenceId text } \
         phones { phoneNumber } bookings(start: \"2031-01-01\", end: \"2031-01-31\") { id start } } }",
        &[Kind::Id],
    ),
    (
        "query($v0: String, $v1: Pagination, $v2: QueryOptions) { patients(search: $v0, \
         pagination: $v1, options: $v2) { data { id fullName status } pageInfo { page pageSize hasMore } } }",
        &[Kind::Text, Kind::Pagination, Kind::Options],
    ),
    (
        "query($v0: Pagination, $v1: QueryOptions, $v2: DateRange) { bookings(pagination: $v0, \
         options: $v1, dateRange: $v2) { data { id start end reference patient { id } doctor { id } \
         location { name } appointment { title } } pageInfo { hasMore } } }",
        &[Kind::Pagination, Kind::Options, Kind::DateRange],
    ),
    (
        "query($v0: ID!, $v1: Date!, $v2: Date!, $v3: Int, $v4: Int) { user(id: $v0) { fullName \
         bookings(start: $v1, end: $v2, page: $v3, pageSize: $v4) { data { id } pageInfo { hasMore } } } }",
        &[Kind::Id, Kind::Date, Kind::Date, Kind::Int, Kind::Int],
    ),
    (
        "query($v0: Date!, $v1: Date!) { patients { data { bookings(start: $v0, end: $v1) { id } } } }",
        &[Kind::Date, Kind::Date],
    ),
    (
        "query($v0: ID!, $v1: ID!, $v2: Pagination) { booking(id: $v0) { id comments } user(id: $v1) { id } \
         labels(pagination: $v2) { data { id title } } users(pagination: $v2) { data { id } } }",
        &[Kind::Id, Kind::Id, Kind::Pagination],
    ),
    (
        "mutation($v0: CreatePatientDataInput!) { createPatient(patientData: $v0) { data { id \
         email dob labels { text } phones { phoneType } address { city } } error } }",
        &[Kind::PatientInput],
    ),
    (
        "mutation($v0: ID!, $v1: UpdatePatientDataInput!) { updatePatient(id: $v0, patientData: $v1) \
         { data { id updatedAt labels { text } } error } }",
        &[Kind::Id, Kind::PatientInput],
    ),
    (
        "mutation($v0: ID!, $v1: String, $v2: String) { archivePatient(id: $v0, reason: $v1, \
         comments: $v2) { data { id archived } error } u: unarchivePatient(id: $v0) { error } }",
        &[Kind::Id, Kind::Text, Kind::Text],
    ),
    (
        "mutation($v0: ID!, $v1: ID!) { addPatientLabel(patientId: $v0, labelReferenceId: $v1) \
         { data { labels { id text } } error } r: removePatientLabel(patientId: $v0, labelId: $v1) { error } }",
        &[Kind::Id, Kind::Id],
    ),
    (
        "mutation($v0: BookingDataInput!) { createBooking(bookingData: $v0) { data { id start end \
         patient { id } doctorName } error } }",
        &[Kind::BookingInput],
    ),
    (
        "mutation($v0: ID!, $v1: BookingUpdateDataInput!, $v2: String) { updateBooking(id: $v0, \
         bookingData: $v1) { data { id start end } error } d: deleteBooking(id: $v0, cancellationReason: $v2) { error } }",
        &[Kind::Id, Kind::BookingInput, Kind::Text],
    ),
    (
        "mutation($v0: String!, $v1: AddressInput, $v2: String!, $v3: Int!, $v4: Float) { \
         createLocation(name: $v0, address: $v1) { data { id address { city } } error } \
         createAppointmentType(title: $v2, duration: $v3, price: $v4) { data { id price duration } error } }",
        &[
            Kind::Text,
            Kind::Address,
            Kind::Text,
            Kind::Int,
            Kind::Float,
        ],
    ),
    (
        "mutation($v0: String!, $v1: String, $v2: ID!) { createLabel(title: $v0, color: $v1) { data { id } error } \
         updateLabel(id: $v2, title: $v0, color: $v1) { data { title color } error } }",
        &[Kind::Text, Kind::Color, Kind::Id],
    ),
    (
        "mutation($v0: String!, $v1: [String!]!, $v2: DateTime) { createApiToken(name: $v0, \
         permissions: $v1, expiresAt: $v2) { data { id permissions expiresAt } error } }",
        &[Kind::Text, Kind::PermissionList, Kind::DateTime],
    ),
    (
        "mutation($v0: String!, $v1: String!) { signIn(email: $v0, password: $v1) { token error user { id } } }",
        &[Kind::Email, Kind::Text],
    ),
];

/// Type conditions for fragments: real, wrong for the place, or unknown.
const TYPE_NAMES: &[&str] = &[
    "Patient",
    "Booking",
    "User",
    "Query",
    "Mutation",
    "PatientResponsePayload",
    "Label",
    "String",
    "Nope",
];

/// Types for variable definitions: right, wrong, output types, unknown, malformed.
const VARIABLE_TYPES: &[&str] = &[
    "ID",
    "ID!",
    "String",
    "String!",
    "Int",
    "Int!",
    "Float",
    "Boolean!",
    "Date",
    "DateTime!",
    "[ID!]",
    "[ID!]!",
    "[[Int]]",
    "Pagination",
    "QueryOptions",
    "DateRange!",
    "CreatePatientDataInput!",
    "UpdatePatientDataInput",
    "BookingDataInput!",
    "AddressInput",
    "Patient",
    "NoSuchType",
    "ID!!",
    "[String",
];

const VARIABLE_REFS: &[&str] = &["$v0", "$v1", "$v2", "$undeclared"];

/// Int literals: the first [`GOOD_INTS`] fit an Int; the rest do not, or are not GraphQL.
const INTS: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "25",
    "100",
    "101",
    "1440",
    "1441",
    "2147483647",
    "-2147483648",
    "2147483648",
    "-2147483649",
    "9223372036854775807",
    "-9223372036854775808",
    "18446744073709551616",
    "99999999999999999999999999999999999999",
    "-0",
    "007",
];

const GOOD_INTS: usize = 11;

/// Float literals: the first [`GOOD_FLOATS`] are finite floats; the rest are not.
const FLOATS: &[&str] = &[
    "0.0",
    "1.5",
    "-0.0",
    "-1.5",
    "40.5",
    "1e308",
    "1.7976931348623157e308",
    "5e-324",
    "1e-400",
    "12",
    "1e309",
    "-1e400",
    "3.",
    "-.5",
    "1e",
    "0x10",
];

const GOOD_FLOATS: usize = 10;

/// Dates: the first [`GOOD_DATES`] are well formed (if odd); the rest are not.
const DATES: &[&str] = &[
    "2031-01-06",
    "2031-01-01",
    "2031-01-31",
    "1990-04-12",
    "2000-02-29",
    "2030-12-31",
    "0000-01-01",
    "9999-12-31",
    "+262142-12-31",
    "-262143-01-01",
    "+99999-01-01",
    "1900-02-29",
    "2030-13-01",
    "2030-00-10",
    "2030-1-1",
    "2031-01-06T08:00:00Z",
    "",
    "today",
];

const GOOD_DATES: usize = 11;

/// Timestamps: the first [`GOOD_DATETIMES`] are RFC 3339 with an offset (if odd); the rest
/// are not.
const DATETIMES: &[&str] = &[
    "2031-01-06T08:00:00Z",
    "2031-01-06T08:15:00Z",
    "2031-01-06T09:00:00+01:00",
    "2031-01-06T08:00:00.123456789Z",
    "2031-01-06T23:59:60Z",
    "0000-01-01T00:00:00Z",
    "0000-01-01T00:00:00+23:59",
    "9999-12-31T23:59:59.999Z",
    "9999-12-31T23:59:59-23:59",
    "1970-01-01T00:00:00Z",
    "2031-01-06t08:00:00z",
    "2031-01-06T08:00:00",
    "2031-02-30T08:00:00Z",
    "2031-01-06 08:00:00Z",
    "",
    "now",
];

const GOOD_DATETIMES: usize = 11;

/// Arguments a strict document always gives (where the schema requires them, or a date
/// range needs both ends).
const REQUIRED: &[&str] = &[
    "id",
    "patientId",
    "labelReferenceId",
    "labelId",
    "patientData",
    "bookingData",
    "name",
    "title",
    "duration",
    "permissions",
    "email",
    "password",
    "start",
    "end",
    "first",
    "last",
    "patient",
    "doctor",
];

const COLORS: &[&str] = &[
    "#123456", "#e11d48", "#fff", "red", "#GGGGGG", "", "#1234567", "#12345",
];

const PERMISSIONS: &[&str] = &[
    "*",
    "settings",
    "patients:read",
    "patients:write",
    "bookings:read",
    "bookings:write",
    "labels:write",
    "users:read",
    "query:patient",
    "mutation:addPatientLabel",
    "patients:*",
    "nope:nope",
    "",
    "query:",
];

/// Text people might type, and text they should not.
fn texts() -> Vec<String> {
    let mut texts: Vec<String> = [
        "Ada",
        "Lovelace",
        "Grace",
        "O'Brien",
        "Anne-Marie",
        "",
        " ",
        " \t\n ",
        "Robert'); DROP TABLE patients;--",
        "' OR '1'='1",
        "%",
        "_",
        "\\",
        "%_\\",
        "😀👍🏽",
        "👨‍👩‍👧‍👦",
        "\u{202e}evil",
        "e\u{301}",
        "\u{1}",
        "\u{7f}",
        "\u{85}",
        "\u{2028}",
        "\u{feff}",
        "\u{fffd}",
        "\u{10ffff}",
        "Ünïcødé",
        "中文名字",
        "line\nbreak",
        "tab\tx",
        "nul\u{0}byte",
        "NaN",
        "null",
        "1990-04-12",
        "#e11d48",
        "ada@example.com",
        PASSWORD,
        "VIP",
        "Main",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    texts.push("a".repeat(200));
    texts.push("a".repeat(201));
    texts.push("😀".repeat(200));
    texts.push("x".repeat(5000));
    texts.push("x".repeat(5001));
    texts
}

/// Quotes text as a GraphQL string literal (JSON's escapes are GraphQL's).
fn quote(text: &str) -> String {
    serde_json::to_string(text).expect("a string serialises")
}

/// String literals that are malformed or strange in the GraphQL source itself.
const ODD_STRING_LITERALS: &[&str] = &[
    r#""\uD800""#,
    r#""\uDC00\uD800""#,
    r#""\u{1F600}""#,
    r#""\u{110000}""#,
    r#""\u{D800}""#,
    r#""\x41""#,
    r#""\u00""#,
    r#""unterminated"#,
    "\"\"\"block\n string\"\"\"",
    r#""""\"""""""#,
    r#""\u0000""#,
    "\"raw\nnewline\"",
];

// ---------------------------------------------------------------------------------------
// Documents.
// ---------------------------------------------------------------------------------------

/// Builds the strategies; memoises the ones used in many places.
struct Gen {
    /// Wild: any literal anywhere, broken items, fragments, variables. Otherwise (strict)
    /// documents that mostly validate, to reach the resolvers and the store.
    wild: bool,
    /// Ids of records the run made, and odd ones.
    real_ids: Vec<String>,
    odd_ids: Vec<String>,
    emails: Vec<String>,
    texts: Vec<String>,
    target_patient: String,
    values: RefCell<HashMap<Kind, S>>,
    json_values: RefCell<HashMap<Kind, BoxedStrategy<Value>>>,
    selections: RefCell<HashMap<(&'static str, u32), S>>,
    any_literal: S,
}

impl Gen {
    fn new(wild: bool, seeded: &Seeded) -> Gen {
        let texts = texts();
        let any_literal = any_literal(&texts);
        Gen {
            wild,
            real_ids: seeded.real_ids.clone(),
            odd_ids: seeded.odd_ids.clone(),
            emails: seeded.emails.clone(),
            texts,
            target_patient: seeded.target_patient.clone(),
            values: RefCell::new(HashMap::new()),
            json_values: RefCell::new(HashMap::new()),
            selections: RefCell::new(HashMap::new()),
            any_literal,
        }
    }

    /// Text: typed, random Unicode, or long.
    fn text(&self) -> S {
        text_strategy(&self.texts, self.wild)
    }

    fn dates(&self) -> &'static [&'static str] {
        if self.wild {
            DATES
        } else {
            &DATES[..GOOD_DATES]
        }
    }

    fn datetimes(&self) -> &'static [&'static str] {
        if self.wild {
            DATETIMES
        } else {
            &DATETIMES[..GOOD_DATETIMES]
        }
    }

    /// How likely an argument or input field is given.
    fn presence(&self, name: &str) -> f64 {
        match (self.wild, REQUIRED.contains(&name)) {
            (true, _) => 0.8,
            (false, true) => 0.97,
            (false, false) => 0.5,
        }
    }

    /// A literal for an argument of this kind: mostly well typed, sometimes anything, or a
    /// variable.
    fn value(&self, kind: Kind) -> S {
        let cached = self.values.borrow().get(&kind).cloned();
        if let Some(strategy) = cached {
            return strategy;
        }
        let strategy = if self.wild {
            prop_oneof![
                12 => self.good_value(kind),
                2 => self.any_literal.clone(),
                1 => select(VARIABLE_REFS).prop_map(str::to_string),
            ]
            .boxed()
        } else {
            self.good_value(kind)
        };
        self.values.borrow_mut().insert(kind, strategy.clone());
        strategy
    }

    fn good_value(&self, kind: Kind) -> S {
        use Kind::*;
        let quoted = |list: Vec<String>| select(list).prop_map(|s| quote(&s)).boxed();
        let words = |list: &'static [&'static str]| select(list).prop_map(quote).boxed();
        match kind {
            Id => prop_oneof![
                6 => quoted(self.real_ids.clone()),
                3 => quoted(self.odd_ids.clone()),
                1 => select(INTS).prop_map(str::to_string),
            ]
            .boxed(),
            Text => self.text().prop_map(|s| quote(&s)).boxed(),
            Int if self.wild => select(INTS).prop_map(str::to_string).boxed(),
            Int => select(&INTS[..GOOD_INTS]).prop_map(str::to_string).boxed(),
            Float if self.wild => prop_oneof![
                select(FLOATS).prop_map(str::to_string),
                any::<f64>().prop_map(|f| format!("{f:e}")),
            ]
            .boxed(),
            Float => select(&FLOATS[..GOOD_FLOATS])
                .prop_map(str::to_string)
                .boxed(),
            Bool if self.wild => select(&["true", "false", "null"][..])
                .prop_map(str::to_string)
                .boxed(),
            Bool => select(&["true", "false"][..])
                .prop_map(str::to_string)
                .boxed(),
            Date => words(self.dates()),
            DateTime => words(self.datetimes()),
            Email => quoted(self.emails.clone()),
            Color => words(COLORS),
            Permission => words(PERMISSIONS),
            PermissionList => list(self.value(Permission)),
            IdList => list(self.value(Id)),
            Pagination | DateRange | Options | Address | PatientInput | BookingInput => {
                self.input_object(input_fields(kind))
            }
        }
    }

    /// A JSON value for a variable of this kind: mostly well typed, sometimes not.
    fn json_value(&self, kind: Kind) -> BoxedStrategy<Value> {
        use Kind::*;
        let cached = self.json_values.borrow().get(&kind).cloned();
        if let Some(strategy) = cached {
            return strategy;
        }
        let strings = |list: Vec<String>| select(list).prop_map(Value::String).boxed();
        let words = |list: &'static [&'static str]| {
            select(list)
                .prop_map(|s| Value::String(s.to_string()))
                .boxed()
        };
        let typed = match kind {
            Id => prop_oneof![
                6 => strings(self.real_ids.clone()),
                3 => strings(self.odd_ids.clone()),
                1 => select(vec![json!(1), json!(0), json!(-1)]),
            ]
            .boxed(),
            Text => self.text().prop_map(Value::String).boxed(),
            Int if !self.wild => select(vec![
                json!(0),
                json!(1),
                json!(-1),
                json!(2),
                json!(25),
                json!(100),
                json!(101),
                json!(1440),
                json!(1441),
                json!(i32::MAX),
                json!(i32::MIN),
                json!(1.0),
            ])
            .boxed(),
            Int => select(vec![
                json!(0),
                json!(1),
                json!(-1),
                json!(2),
                json!(25),
                json!(100),
                json!(101),
                json!(1440),
                json!(1441),
                json!(i32::MAX),
                json!(i32::MIN),
                json!(2147483648i64),
                json!(i64::MAX),
                json!(u64::MAX),
                json!(1e308),
                json!(-0.0),
                json!(1.0),
                json!(1.5),
            ])
            .boxed(),
            Float => select(vec![
                json!(0.0),
                json!(40.5),
                json!(-0.0),
                json!(-1.5),
                json!(1e308),
                json!(f64::MAX),
                json!(5e-324),
                json!(i64::MAX),
                json!(u64::MAX),
                json!(3),
            ])
            .boxed(),
            Bool => any::<bool>().prop_map(Value::Bool).boxed(),
            Date => words(self.dates()),
            DateTime => words(self.datetimes()),
            Email => strings(self.emails.clone()),
            Color => words(COLORS),
            Permission => words(PERMISSIONS),
            PermissionList => prop::collection::vec(self.json_value(Permission), 0..4)
                .prop_map(Value::Array)
                .boxed(),
            IdList => prop::collection::vec(self.json_value(Id), 0..4)
                .prop_map(Value::Array)
                .boxed(),
            Pagination | DateRange | Options | Address | PatientInput | BookingInput => {
                let parts: Vec<BoxedStrategy<Option<(&'static str, Value)>>> = input_fields(kind)
                    .iter()
                    .map(|&(name, kind)| {
                        prop::option::weighted(self.presence(name), self.json_value(kind))
                            .prop_map(move |v| v.map(|v| (name, v)))
                            .boxed()
                    })
                    .collect();
                parts
                    .prop_map(|parts| {
                        Value::Object(
                            parts
                                .into_iter()
                                .flatten()
                                .map(|(k, v)| (k.to_string(), v))
                                .collect(),
                        )
                    })
                    .boxed()
            }
        };
        let strategy = if self.wild {
            prop_oneof![8 => typed, 1 => json_any(&self.texts), 1 => Just(Value::Null)].boxed()
        } else {
            prop_oneof![12 => typed, 1 => Just(Value::Null)].boxed()
        };
        self.json_values.borrow_mut().insert(kind, strategy.clone());
        strategy
    }

    /// A real operation with its variables, their values mostly of the right type.
    fn templated(&self) -> BoxedStrategy<(String, Value)> {
        let templates: Vec<BoxedStrategy<(String, Value)>> = TEMPLATES
            .iter()
            .map(|&(doc, kinds)| {
                let values: Vec<BoxedStrategy<Value>> =
                    kinds.iter().map(|&k| self.json_value(k)).collect();
                values
                    .prop_map(move |values| {
                        let variables: Map<String, Value> = values
                            .into_iter()
                            .enumerate()
                            .map(|(i, v)| (format!("v{i}"), v))
                            .collect();
                        (doc.to_string(), Value::Object(variables))
                    })
                    .boxed()
            })
            .collect();
        Union::new(templates).boxed()
    }

    /// `{a: 1, b: 2}` with each field there or not, and now and then a field too many.
    fn input_object(&self, fields: &'static [Arg]) -> S {
        let parts: Vec<BoxedStrategy<Option<String>>> = fields
            .iter()
            .map(|&(name, kind)| {
                prop::option::weighted(self.presence(name), self.value(kind))
                    .prop_map(move |v| v.map(|v| format!("{name}: {v}")))
                    .boxed()
            })
            .collect();
        let junk = if self.wild {
            prop::option::weighted(
                0.05,
                select(&["unknownField: 1", "first: \"twice\"", "__typename: 1"][..]),
            )
            .boxed()
        } else {
            Just(None).boxed()
        };
        (parts, junk)
            .prop_map(|(parts, junk)| {
                let mut items: Vec<String> = parts.into_iter().flatten().collect();
                items.extend(junk.map(str::to_string));
                format!("{{{}}}", items.join(", "))
            })
            .boxed()
    }

    /// `(a: 1, b: 2)`, or nothing.
    fn arguments(&self, args: &'static [Arg]) -> S {
        let parts: Vec<BoxedStrategy<Option<String>>> = args
            .iter()
            .map(|&(name, kind)| {
                prop::option::weighted(self.presence(name), self.value(kind))
                    .prop_map(move |v| v.map(|v| format!("{name}: {v}")))
                    .boxed()
            })
            .collect();
        let (junk, repeat) = if self.wild {
            (
                prop::option::weighted(
                    0.04,
                    (
                        select(&["nope", "id", "first", "pagination"][..]),
                        self.any_literal.clone(),
                    ),
                )
                .boxed(),
                prop::bool::weighted(0.03).boxed(),
            )
        } else {
            (Just(None).boxed(), Just(false).boxed())
        };
        (parts, junk, repeat)
            .prop_map(|(parts, junk, repeat)| {
                let mut items: Vec<String> = parts.into_iter().flatten().collect();
                if repeat && let Some(first) = items.first().cloned() {
                    items.push(first);
                }
                if let Some((name, value)) = junk {
                    items.push(format!("{name}: {value}"));
                }
                if items.is_empty() {
                    String::new()
                } else {
                    format!("({})", items.join(", "))
                }
            })
            .boxed()
    }

    /// ` @skip(if: ...)` and friends, or nothing.
    fn directive(&self) -> S {
        let cached = self.selections.borrow().get(&("@", 0)).cloned();
        if let Some(strategy) = cached {
            return strategy;
        }
        let one = prop_oneof![
            3 => self.value(Kind::Bool).prop_map(|b| format!(" @skip(if: {b})")),
            3 => self.value(Kind::Bool).prop_map(|b| format!(" @include(if: {b})")),
            2 => select(&[
                " @deprecated",
                " @unknown",
                " @skip",
                " @include(if: $v0)",
                " @skip(if: true) @skip(if: false)",
                " @include(if: true) @skip(if: false)",
                " @skip(if: \"yes\")",
                " @include(unless: true)",
                " @",
            ][..])
            .prop_map(str::to_string),
        ];
        let strategy = if self.wild {
            prop::option::weighted(0.1, one)
                .prop_map(Option::unwrap_or_default)
                .boxed()
        } else {
            let tame = select(
                &[
                    " @skip(if: false)",
                    " @include(if: true)",
                    " @skip(if: true)",
                    " @include(if: false)",
                ][..],
            );
            prop::option::weighted(0.05, tame)
                .prop_map(|d| d.unwrap_or_default().to_string())
                .boxed()
        };
        self.selections
            .borrow_mut()
            .insert(("@", 0), strategy.clone());
        strategy
    }

    /// A selection set on `ty`, `depth` levels deep at most: real fields with arguments,
    /// aliases, directives, fragments, and a few wrong ones.
    fn selection(&self, ty: &'static str, depth: u32) -> S {
        let cached = self.selections.borrow().get(&(ty, depth)).cloned();
        if let Some(strategy) = cached {
            return strategy;
        }
        let alias = if self.wild {
            prop::option::weighted(
                0.12,
                select(&["a", "b", "a0", "id", "first", "__typename"][..]),
            )
            .prop_map(|a| a.map(|a| format!("{a}: ")).unwrap_or_default())
            .boxed()
        } else {
            Just(String::new()).boxed()
        };
        let mut items: Vec<(u32, S)> = Vec::new();
        let leaves: Vec<&'static str> = fields(ty)
            .iter()
            .filter(|f| f.2.is_none())
            .map(|f| f.0)
            .collect();
        if !leaves.is_empty() {
            items.push((
                8,
                (alias.clone(), select(leaves), self.directive())
                    .prop_map(|(a, name, d)| format!("{a}{name}{d}"))
                    .boxed(),
            ));
        }
        for &(name, args, sub) in fields(ty) {
            let Some(sub) = sub else { continue };
            let inner = if depth == 0 {
                Just("{ __typename }".to_string()).boxed()
            } else {
                self.selection(sub, depth - 1)
            };
            items.push((
                3,
                (alias.clone(), self.arguments(args), self.directive(), inner)
                    .prop_map(move |(a, args, d, inner)| format!("{a}{name}{args}{d} {inner}"))
                    .boxed(),
            ));
        }
        items.push((1, Just("__typename".to_string()).boxed()));
        if !self.wild {
            if depth > 0 {
                items.push((
                    1,
                    (self.directive(), self.selection(ty, depth - 1))
                        .prop_map(move |(d, s)| format!("... on {ty}{d} {s}"))
                        .boxed(),
                ));
            }
            // One field of a name: the same name with other arguments would not validate.
            let strategy = prop::collection::vec(Union::new_weighted(items), 1..5)
                .prop_map(|items| {
                    let mut seen = Vec::new();
                    let mut kept = Vec::new();
                    for item in items {
                        let name: String = item
                            .chars()
                            .take_while(|c| c.is_alphanumeric() || *c == '_')
                            .collect();
                        if name.is_empty() || !seen.contains(&name) {
                            seen.push(name);
                            kept.push(item);
                        }
                    }
                    format!("{{ {} }}", kept.join(" "))
                })
                .boxed();
            self.selections
                .borrow_mut()
                .insert((ty, depth), strategy.clone());
            return strategy;
        }
        items.push((
            1,
            select(
                &[
                    "nope",
                    "id { id }",
                    "patients",
                    "firstName(x: 1)",
                    "...",
                    "... on",
                    "__schema",
                    "a: id a: firstName",
                    "$v0",
                ][..],
            )
            .prop_map(str::to_string)
            .boxed(),
        ));
        items.push((
            1,
            (select(&["F0", "F1", "F2"][..]), self.directive())
                .prop_map(|(f, d)| format!("...{f}{d}"))
                .boxed(),
        ));
        if depth > 0 {
            items.push((
                1,
                (select(TYPE_NAMES), self.selection(ty, depth - 1))
                    .prop_map(|(t, s)| format!("... on {t} {s}"))
                    .boxed(),
            ));
            items.push((
                1,
                (self.directive(), self.selection(ty, depth - 1))
                    .prop_map(|(d, s)| format!("...{d} {s}"))
                    .boxed(),
            ));
        }
        let item = Union::new_weighted(items);
        let strategy = (prop::collection::vec(item, 1..5), prop::bool::weighted(0.2))
            .prop_map(|(items, commas)| {
                format!("{{ {} }}", items.join(if commas { ", " } else { " " }))
            })
            .boxed();
        self.selections
            .borrow_mut()
            .insert((ty, depth), strategy.clone());
        strategy
    }

    /// A whole document: operations, variables, fragments.
    fn document(&self) -> S {
        let variable = (
            select(&["v0", "v1", "v2", "v0"][..]),
            select(VARIABLE_TYPES),
            prop::option::weighted(0.2, self.any_literal.clone()),
        )
            .prop_map(|(name, ty, default)| match default {
                Some(d) => format!("${name}: {ty} = {d}"),
                None => format!("${name}: {ty}"),
            });
        let variables = (
            prop::collection::vec(variable, 0..3),
            prop::bool::weighted(0.03),
        )
            .prop_map(|(vars, empty_parens)| {
                if vars.is_empty() {
                    if empty_parens {
                        "()".into()
                    } else {
                        String::new()
                    }
                } else {
                    format!("({})", vars.join(", "))
                }
            });
        let fragment = (select(TYPE_NAMES), self.selection("Patient", 1))
            .prop_map(|(t, s)| format!("on {t} {s}"));
        let query_fragment = self
            .selection("Query", 1)
            .prop_map(|s| format!("on Query {s}"));
        let fragments =
            prop::collection::vec(prop_oneof![2 => fragment, 1 => query_fragment], 0..3).prop_map(
                |fragments| {
                    fragments
                        .iter()
                        .enumerate()
                        .map(|(i, f)| format!(" fragment F{i} {f}"))
                        .collect::<String>()
                },
            );
        let name = prop::option::weighted(0.3, select(&["A", "B", "Op"][..]))
            .prop_map(|n| n.map(|n| format!(" {n}")).unwrap_or_default());
        if !self.wild {
            return (
                select(&["shorthand", "query", "mutation", "mutation"][..]),
                name,
                self.selection("Query", 3),
                self.selection("Mutation", 2),
            )
                .prop_map(|(op, name, query, mutation)| match op {
                    "shorthand" => query,
                    "query" => format!("query{name} {query}"),
                    _ => format!("mutation{name} {mutation}"),
                })
                .boxed();
        }
        (
            select(
                &[
                    "shorthand",
                    "shorthand",
                    "query",
                    "query",
                    "mutation",
                    "mutation",
                    "subscription",
                    "two",
                    "wrong root",
                ][..],
            ),
            name,
            variables,
            self.selection("Query", 3),
            self.selection("Mutation", 2),
            fragments,
            self.directive(),
        )
            .prop_map(|(op, name, vars, query, mutation, fragments, d)| {
                let operation = match op {
                    "shorthand" => query,
                    "query" => format!("query{name}{vars}{d} {query}"),
                    "mutation" => format!("mutation{name}{vars}{d} {mutation}"),
                    "subscription" => format!("subscription{name}{vars} {query}"),
                    "two" => format!("query A{vars} {query} mutation B {mutation}"),
                    _ => format!("query{name}{vars} {mutation}"),
                };
                format!("{operation}{fragments}")
            })
            .boxed()
    }

    /// A document, then edited: characters deleted, doubled, inserted, the end cut off.
    fn mutated_document(&self) -> S {
        let edit = prop_oneof![
            3 => (any::<Index>(), 1..8usize).prop_map(|(at, n)| Edit::Delete(at, n)),
            2 => (any::<Index>(), 1..16usize).prop_map(|(at, n)| Edit::Duplicate(at, n)),
            4 => (any::<Index>(), insertion()).prop_map(|(at, s)| Edit::Insert(at, s)),
            1 => any::<Index>().prop_map(Edit::Truncate),
            1 => (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Edit::Swap(a, b)),
        ];
        let edits = prop_oneof![
            5 => Just(Vec::new()),
            if self.wild { 5 } else { 1 } => prop::collection::vec(edit, 1..5),
        ];
        (self.document(), edits)
            .prop_map(|(doc, edits)| {
                let mut chars: Vec<char> = doc.chars().collect();
                for edit in edits {
                    edit.apply(&mut chars);
                }
                chars.into_iter().collect()
            })
            .boxed()
    }

    /// Documents built to find limits: deep, wide, recursive.
    fn bomb(&self) -> S {
        let target = quote(&self.target_patient);
        let n = 1..MAX_NESTING;
        prop_oneof![
            (1..40usize).prop_map(move |n| {
                let mut inner = "id".to_string();
                for _ in 0..n {
                    inner = format!(
                        "bookings(start: \"2031-01-01\", end: \"2031-01-31\") {{ id patient {{ {inner} }} }}"
                    );
                }
                format!("{{ patient(id: {target}) {{ {inner} }} }}")
            }),
            n.clone()
                .prop_map(|n| format!("{}{}", "{".repeat(n), "}".repeat(n))),
            n.clone().prop_map(|n| "{".repeat(n)),
            n.clone().prop_map(|n| format!(
                "{{ a{} }}",
                " { a".repeat(n) + &" }".repeat(n)
            )),
            n.clone().prop_map(|n| format!(
                "{{ patient(id: {}\"x\"{}) {{ id }} }}",
                "[".repeat(n),
                "]".repeat(n)
            )),
            n.clone().prop_map(|n| format!(
                "{{ patients(options: {}true{}) {{ pageInfo {{ page }} }} }}",
                "{includeDeleted: ".repeat(n),
                "}".repeat(n)
            )),
            n.clone().prop_map(|n| format!(
                "query($v: {}Int{}) {{ __typename }}",
                "[".repeat(n),
                "]".repeat(n)
            )),
            n.prop_map(|n| format!(
                "query({}) {{ __typename }}",
                (0..n).map(|i| format!("$v{i}: [[Int]]")).collect::<Vec<_>>().join(", ")
            )),
            (1..400usize).prop_map(|n| format!(
                "{{ {} }}",
                (0..n)
                    .map(|i| format!("a{i}: currentPractice {{ id }}"))
                    .collect::<String>()
            )),
            (1..400usize).prop_map(|n| format!(
                "{{ currentPractice {{ id{} }} }}",
                " @include(if: true)".repeat(n)
            )),
            (1..2000usize).prop_map(|n| format!(
                "{{ patients {{ data {{ {} }} }} }}",
                "id ".repeat(n)
            )),
            (1..80usize).prop_map(|n| {
                let mut doc = "{ ...F0 }".to_string();
                for i in 0..n {
                    doc += &format!(" fragment F{i} on Query {{ currentPractice {{ id }} ...F{} }}", i + 1);
                }
                doc + &format!(" fragment F{n} on Query {{ __typename }}")
            }),
            (1..200usize).prop_map(|n| {
                (0..n).map(|i| format!("query Q{i} {{ __typename }} ")).collect()
            }),
            (1..40usize).prop_map(|n| {
                // Each fragment spreads the next twice: 2^n fields to compare, if merged naively.
                let mut doc = "{ patients { data { ...P0 } } }".to_string();
                for i in 0..n {
                    doc += &format!(" fragment P{i} on Patient {{ id ...P{} ...P{} }}", i + 1, i + 1);
                }
                doc + &format!(" fragment P{n} on Patient {{ firstName }}")
            }),
            Just(
                "{ ...A } fragment A on Query { ...B } fragment B on Query { ...A }".to_string()
            ),
            Just(
                "mutation { ...S } fragment S on Mutation { signIn(email: \"a@b.c\", password: \"x\") { error } ...S }"
                    .to_string()
            ),
        ]
        .boxed()
    }
}

/// Text for string values: the list above, random Unicode, or long runs.
/// Text for string values: the list above, random Unicode, or long runs; with NUL
/// characters or without (the HTTP layer refuses a request with one outright).
fn text_strategy(texts: &[String], nul: bool) -> S {
    let texts: Vec<String> = texts
        .iter()
        .filter(|t| nul || !t.contains('\0'))
        .cloned()
        .collect();
    let runs: &'static [&'static str] = if nul {
        &["x", "é", "😀", " ", "\u{0}", "\\"]
    } else {
        &["x", "é", "😀", " ", "\\"]
    };
    prop_oneof![
        6 => select(texts),
        3 => prop::collection::vec(any::<char>(), 0..40).prop_map(move |chars| {
            chars.into_iter().filter(|&c| nul || c != '\0').collect()
        }),
        1 => (0..10_000usize, select(runs)).prop_map(|(n, s)| s.repeat(n)),
    ]
    .boxed()
}

/// Any GraphQL value literal: scalars, odd strings, enums, variables, lists, objects.
fn any_literal(texts: &[String]) -> S {
    let leaf = prop_oneof![
        3 => select(INTS).prop_map(str::to_string),
        2 => select(FLOATS).prop_map(str::to_string),
        2 => select(&["true", "false", "null", "RED", "NaN", "Infinity", "query", "on"][..])
            .prop_map(str::to_string),
        4 => text_strategy(texts, true).prop_map(|s| quote(&s)),
        2 => select(ODD_STRING_LITERALS).prop_map(str::to_string),
        1 => select(VARIABLE_REFS).prop_map(str::to_string),
    ];
    leaf.prop_recursive(3, 24, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5)
                .prop_map(|items| format!("[{}]", items.join(", "))),
            prop::collection::vec(
                (
                    select(&["first", "page", "pageSize", "start", "a", "__x"][..]),
                    inner
                ),
                0..5
            )
            .prop_map(|fields| {
                let fields: Vec<String> = fields
                    .into_iter()
                    .map(|(k, v)| format!("{k}: {v}"))
                    .collect();
                format!("{{{}}}", fields.join(", "))
            }),
        ]
    })
    .boxed()
}

/// `[a, b]` of one kind.
fn list(item: S) -> S {
    prop::collection::vec(item, 0..4)
        .prop_map(|items| format!("[{}]", items.join(", ")))
        .boxed()
}

/// What gets inserted into a document.
fn insertion() -> S {
    prop_oneof![
        3 => select(&[
            "{", "}", "(", ")", "[", "]", "\"", "\\", "$", "@", "...", ":", "!", "=", "|", "&",
            "#", "\n", "\r", "\t", ",", "\u{0}", "\u{1}", "\u{7f}", "\u{202e}", "\u{feff}",
            "\u{fffd}", "\u{10ffff}", "\u{2028}", "é", "\u{301}", "😀", "👨‍👩‍👧",
            "\\u0000", "\\uD800", "\\u{1F600}", "1e400", "99999999999999999999", "-0",
            "__typename", "query", "mutation", "subscription", "fragment", " on ", "null",
            "\"\"\"",
        ][..])
        .prop_map(str::to_string),
        1 => any::<char>().prop_map(String::from),
        1 => prop::collection::vec(any::<char>(), 1..8).prop_map(String::from_iter),
    ]
    .boxed()
}

/// One edit of a document's characters.
#[derive(Clone, Debug)]
enum Edit {
    Delete(Index, usize),
    Duplicate(Index, usize),
    Insert(Index, String),
    Truncate(Index),
    Swap(Index, Index),
}

impl Edit {
    fn apply(self, chars: &mut Vec<char>) {
        let len = chars.len();
        match self {
            Edit::Insert(at, text) => {
                let at = at.index(len + 1);
                chars.splice(at..at, text.chars());
            }
            _ if len == 0 => {}
            Edit::Delete(at, n) => {
                let at = at.index(len);
                chars.drain(at..(at + n).min(len));
            }
            Edit::Duplicate(at, n) => {
                let at = at.index(len);
                let copy: Vec<char> = chars[at..(at + n).min(len)].to_vec();
                chars.splice(at..at, copy);
            }
            Edit::Truncate(at) => chars.truncate(at.index(len)),
            Edit::Swap(a, b) => chars.swap(a.index(len), b.index(len)),
        }
    }
}

// ---------------------------------------------------------------------------------------
// JSON: variables and bodies.
// ---------------------------------------------------------------------------------------

fn json_leaf(texts: &[String]) -> BoxedStrategy<Value> {
    prop_oneof![
        1 => Just(Value::Null),
        1 => any::<bool>().prop_map(Value::Bool),
        3 => select(vec![
            json!(0),
            json!(1),
            json!(-1),
            json!(25),
            json!(100),
            json!(2147483647),
            json!(2147483648i64),
            json!(-2147483649i64),
            json!(i64::MAX),
            json!(i64::MIN),
            json!(u64::MAX),
            json!(1e308),
            json!(f64::MAX),
            json!(-0.0),
            json!(5e-324),
            json!(f64::MIN_POSITIVE),
            json!(0.5),
            json!(1.0),
        ]),
        1 => any::<i64>().prop_map(|i| json!(i)),
        1 => any::<f64>()
            .prop_filter("JSON has no NaN or infinity", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        4 => text_strategy(texts, true).prop_map(Value::String),
    ]
    .boxed()
}

fn json_any(texts: &[String]) -> BoxedStrategy<Value> {
    json_leaf(texts)
        .prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec(
                    (
                        select(
                            &[
                                "first", "last", "email", "dob", "labels", "patient", "doctor",
                                "start", "end", "page", "pageSize", "v0", "id", "", "\u{0}", "😀",
                            ][..]
                        ),
                        inner
                    ),
                    0..6
                )
                .prop_map(|fields| Value::Object(
                    fields
                        .into_iter()
                        .map(|(k, v)| (k.to_string(), v))
                        .collect()
                )),
            ]
        })
        .boxed()
}

/// Variable values shaped like what the schema takes, with odd values inside.
fn json_typed(ids: &[String], texts: &[String]) -> BoxedStrategy<Value> {
    let id = select(ids.to_vec()).prop_map(Value::String);
    let text = text_strategy(texts, true).prop_map(Value::String);
    let leaf = json_leaf(texts);
    let maybe = |s: BoxedStrategy<Value>| prop::option::weighted(0.6, s);
    prop_oneof![
        3 => id.clone(),
        2 => (maybe(text.clone().boxed()), maybe(text.clone().boxed()), maybe(select(DATES).prop_map(|d| json!(d)).boxed()), maybe(leaf.clone()))
            .prop_map(|(first, last, dob, labels)| {
                let mut m = Map::new();
                for (k, v) in [("first", first), ("last", last), ("dob", dob), ("labels", labels)] {
                    if let Some(v) = v {
                        m.insert(k.into(), v);
                    }
                }
                Value::Object(m)
            }),
        2 => (id.clone(), id.clone(), select(DATETIMES), maybe(leaf.clone()))
            .prop_map(|(patient, doctor, start, end)| {
                let mut m = Map::new();
                m.insert("patient".into(), patient);
                m.insert("doctor".into(), doctor);
                m.insert("start".into(), json!(start));
                if let Some(end) = end {
                    m.insert("end".into(), end);
                }
                Value::Object(m)
            }),
        2 => (leaf.clone(), leaf.clone()).prop_map(|(page, size)| json!({ "page": page, "pageSize": size })),
        1 => select(DATETIMES).prop_map(|d| json!(d)),
        1 => prop::collection::vec(id, 0..4).prop_map(Value::Array),
        2 => leaf,
    ]
    .boxed()
}

/// The `variables` of a request: none, null, a map of (mostly) the names documents declare,
/// or any JSON at all.
fn variables(ids: &[String], texts: &[String]) -> BoxedStrategy<Option<Value>> {
    let entry = (
        select(&["v0", "v1", "v2", "v0", "v1", "d", "", "v0 "][..]),
        prop_oneof![3 => json_typed(ids, texts), 2 => json_any(texts)],
    );
    prop_oneof![
        3 => Just(None),
        1 => Just(Some(Value::Null)),
        6 => prop::collection::vec(entry, 0..4).prop_map(|entries| Some(Value::Object(
            entries.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
        ))),
        1 => json_any(texts).prop_map(Some),
    ]
    .boxed()
}

fn operation_name() -> BoxedStrategy<Option<Value>> {
    prop_oneof![
        8 => Just(None),
        3 => select(&["A", "B", "Op", "", "Nope"][..]).prop_map(|s| Some(json!(s))),
        1 => Just(Some(Value::Null)),
        1 => select(vec![json!(5), json!([]), json!({}), json!(true)]).prop_map(Some),
    ]
    .boxed()
}

fn extensions(texts: &[String]) -> BoxedStrategy<Option<Value>> {
    prop_oneof![
        10 => Just(None),
        1 => Just(Some(json!({}))),
        1 => Just(Some(json!({ "persistedQuery": { "version": 1, "sha256Hash": "abc" } }))),
        1 => json_any(texts).prop_map(Some),
    ]
    .boxed()
}

const VALID_BODIES: &[&str] = &[
    r#"{"query":"{ currentPractice { id name } }"}"#,
    r#"{"query":"query($v0: Int) { patients(pagination: {pageSize: $v0}) { data { id firstName labels { text } } pageInfo { hasMore } } }","variables":{"v0":2}}"#,
    r#"{"query":"mutation($d: CreatePatientDataInput!) { createPatient(patientData: $d) { data { id } error } }","variables":{"d":{"first":"Fuzz","last":"Body"}},"operationName":null}"#,
    r#"{"query":"mutation { signIn(email: \"grace.hopper@example.com\", password: \"wrong\") { token error } }"}"#,
];

/// Bodies that are not what a client should send.
const TRICKY_BODIES: &[&str] = &[
    "",
    " ",
    "null",
    "true",
    "0",
    "1e400",
    r#""{ currentPractice { id } }""#,
    "[]",
    r#"[{"query":"{ currentPractice { id } }"}]"#,
    "{}",
    r#"{"query":null}"#,
    r#"{"query":1}"#,
    r#"{"query":["{ currentPractice { id } }"]}"#,
    r#"{"query":{}}"#,
    r#"{"query":true}"#,
    r#"{"query":""}"#,
    r#"{"query":"   "}"#,
    r##"{"query":"# only a comment"}"##,
    r#"{"query":"{ currentPractice { id } }","variables":"{}"}"#,
    r#"{"query":"{ currentPractice { id } }","variables":[]}"#,
    r#"{"query":"{ currentPractice { id } }","variables":1}"#,
    r#"{"query":"{ currentPractice { id } }","variables":{"a":1e400}}"#,
    r#"{"query":"{ currentPractice { id } }","operationName":1}"#,
    r#"{"query":"{ currentPractice { id } }","operationName":{}}"#,
    r#"{"query":"{ currentPractice { id } }","extensions":"x"}"#,
    r#"{"query":"{ currentPractice { id } }","extensions":[]}"#,
    r#"{"query":"\uD800"}"#,
    r#"{"query":"{ currentPractice { id } }","variables":{"x":"\uDC00"}}"#,
    r#"{"query":"\u0000"}"#,
    r#"{"query":"{ patient(id: \"\u0000\") { id } }"}"#,
    r#"{"query":"{ patient(id: \"\\u0000\") { id } }"}"#,
    r#"{"query":"query($v0: ID!) { patient(id: $v0) { id } }","variables":{"v0":"a\u0000b"}}"#,
    r#"{"query":"query($v0: ID!) { patient(id: $v0) { id } }","variables":{"v\u0000":"a"}}"#,
    r#"{"query":"{ currentPractice { id } }"} trailing"#,
    r#"{"query":"{ currentPractice { id } }"}{"query":"x"}"#,
    r#"{"query":"{ a }","query":"{ currentPractice { id } }"}"#,
    r#"{"query":"{ currentPractice { id } }""#,
    r#"{'query':'{ currentPractice { id } }'}"#,
    r#"{query:"{ currentPractice { id } }"}"#,
    r#"{"query":"{ currentPractice { id } }",}"#,
    r#"/* c */{"query":"{ currentPractice { id } }"}"#,
    r#"{"query":"query($v: Int) { patients(pagination: {pageSize: $v}) { pageInfo { pageSize } } }","variables":{"v":1e308}}"#,
    r#"{"query":"query($v: Int) { patients(pagination: {pageSize: $v}) { pageInfo { pageSize } } }","variables":{"v":-0.0}}"#,
    r#"{"query":"query($v: Int) { patients(pagination: {page: $v}) { pageInfo { page } } }","variables":{"v":9223372036854775807}}"#,
    r#"{"query":"query($v: Int) { patients(pagination: {page: $v}) { pageInfo { page } } }","variables":{"v":18446744073709551615}}"#,
    r#"{"query":"query($v: Int) { patients(pagination: {page: $v}) { pageInfo { page } } }","variables":{"v":2.0}}"#,
    r#"{"query":"query($v: Float) { __typename }","variables":{"v":123456789012345678901234567890}}"#,
    r#"{"query":"mutation($t: String!, $p: Float) { createAppointmentType(title: $t, duration: 10, price: $p) { data { price } error } }","variables":{"t":"Huge price","p":1.7976931348623157e308}}"#,
    r#"{"query":"mutation { signIn(email: \"a\", password: \"b\") { error } } mutation M { signOut }","operationName":"M"}"#,
    r#"{"query":"mutation { a: signIn(email: \"a\", password: \"b\") { error } b: signIn(email: \"a\", password: \"b\") { error } }"}"#,
    r#"{"query":"subscription { __typename }"}"#,
    r#"{"query":"query A { __typename } query A { __typename }","operationName":"A"}"#,
    r#"{"query":"query A { __typename } query B { __typename }"}"#,
];

/// A body for a POST: random bytes, cut-off JSON, tricky JSON, wrong types, a nest, a flood.
fn raw_body(texts: &[String]) -> BoxedStrategy<Vec<u8>> {
    let field_value = prop_oneof![
        2 => select(VALID_BODIES)
            .prop_map(|b| serde_json::from_str::<Value>(b).expect("valid")["query"].clone()),
        3 => json_any(texts),
    ];
    prop_oneof![
        3 => prop::collection::vec(any::<u8>(), 0..512),
        3 => (select(VALID_BODIES), any::<Index>())
            .prop_map(|(b, at)| b.as_bytes()[..at.index(b.len() + 1)].to_vec()),
        3 => (select(VALID_BODIES), any::<Index>(), prop::collection::vec(any::<u8>(), 1..6))
            .prop_map(|(b, at, bytes)| {
                let mut body = b.as_bytes().to_vec();
                let at = at.index(body.len() + 1);
                body.splice(at..at, bytes);
                body
            }),
        6 => select(TRICKY_BODIES).prop_map(|b| b.as_bytes().to_vec()),
        3 => prop::collection::vec(
            (select(&["query", "variables", "operationName", "extensions", "junk", "Query"][..]), field_value),
            0..5
        )
        .prop_map(|fields| {
            let object: Map<String, Value> =
                fields.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
            serde_json::to_vec(&object).expect("serialises")
        }),
        1 => select(VALID_BODIES).prop_map(|b| {
            let mut body = b"\xEF\xBB\xBF".to_vec();
            body.extend_from_slice(b.as_bytes());
            body
        }),
        1 => select(VALID_BODIES).prop_map(|b| {
            b.encode_utf16().flat_map(u16::to_le_bytes).collect()
        }),
        1 => (1..100_000usize).prop_map(|n| "[".repeat(n).into_bytes()),
        1 => (1..130usize).prop_map(|n| format!(
            r#"{{"query":"query($v0: [[Int]]) {{ __typename }}","variables":{{"v0":{}1{}}}}}"#,
            "[".repeat(n),
            "]".repeat(n)
        ).into_bytes()),
        1 => (1_048_000..1_049_200usize).prop_map(|n| {
            let head = r#"{"query":"{ currentPractice { id } }","junk":""#;
            let mut body = head.as_bytes().to_vec();
            body.resize(n.saturating_sub(2).max(head.len()), b'x');
            body.extend_from_slice(b"\"}");
            body
        }),
    ]
    .boxed()
}

/// A raw GET query string.
fn raw_query_string(doc: S) -> S {
    prop_oneof![
        4 => select(&[
            "",
            "query",
            "query=",
            "query=%",
            "query=%ZZ",
            "query=%FF%FE%00",
            "query=%7B%20currentPractice%20%7B%20id%20%7D%20%7D",
            "query=%7Bx%7D&query=%7B%20currentPractice%20%7B%20id%20%7D%20%7D",
            "variables=%7B%7D",
            "query=%7B__typename%7D&variables=%7B",
            "query=%7B__typename%7D&variables=null",
            "query=%7B__typename%7D&variables=%5B%5D",
            "query=%7B__typename%7D&variables=%22x%22",
            "query=%7B__typename%7D&extensions=1",
            "query=%7B__typename%7D&operationName=",
            "query=%7B__typename%7D&operationName=A&operationName=B",
            "query=mutation%7BsignOut%7D",
            "query=mutation%7BsignIn(email%3A%22a%22%2C%20password%3A%22b%22)%7Berror%7D%7D",
            "query=%7B__typename%7D&variables=%7B%22a%22%3A%22%5Cu0000%22%7D",
            "query=%7B__typename%7D&variables=%7B%22a%22%3A1e400%7D",
            "&&&",
            "=&=",
            "query=+",
            "query=%00",
            "query=%E2%82",
            "query=%7B%20__typename%20%7D#fragment",
        ][..])
        .prop_map(str::to_string),
        2 => prop::collection::vec(any::<char>(), 0..60).prop_map(String::from_iter),
        2 => doc.prop_map(|d| format!("query={d}")),
        2 => prop::collection::vec(any::<u8>(), 0..60).prop_map(|bytes| {
            let mut qs = "query=".to_string();
            for b in bytes {
                qs += &format!("%{b:02X}");
            }
            qs
        }),
    ]
    .boxed()
}

// ---------------------------------------------------------------------------------------
// Requests.
// ---------------------------------------------------------------------------------------

/// One HTTP request to `/graphql`.
#[derive(Clone)]
struct FuzzRequest {
    /// What the strategy meant it to be.
    kind: &'static str,
    get: bool,
    query_string: String,
    /// What the token is, and its bytes.
    token: (&'static str, Option<Vec<u8>>),
    accept: Option<&'static str>,
    content_type: Option<&'static str>,
    body: Vec<u8>,
}

impl fmt::Debug for FuzzRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "({})", self.kind)?;
        if self.get {
            writeln!(f, "GET /graphql?{:?}", self.query_string)?;
        } else {
            writeln!(f, "POST /graphql")?;
        }
        writeln!(f, "x-token: {}", self.token.0)?;
        if let Some(accept) = self.accept {
            writeln!(f, "accept: {accept:?}")?;
        }
        if let Some(content_type) = self.content_type {
            writeln!(f, "content-type: {content_type:?}")?;
        }
        if !self.get {
            match std::str::from_utf8(&self.body) {
                Ok(text) => write!(f, "body ({} bytes): {text:?}", self.body.len())?,
                Err(_) => write!(
                    f,
                    "body ({} bytes, not UTF-8): b\"{}\"",
                    self.body.len(),
                    self.body.escape_ascii()
                )?,
            }
        }
        Ok(())
    }
}

/// The tokens a request may carry.
struct Tokens {
    admin: String,
    patients_read: String,
    query_patient: String,
    receptionist: String,
    other_practice: String,
}

fn token(tokens: &Tokens) -> BoxedStrategy<(&'static str, Option<Vec<u8>>)> {
    let mut obs_text = b"tok".to_vec();
    obs_text.extend_from_slice(&[0xC3, 0xA9, 0xFF]);
    let t = |label: &'static str, value: &str| (label, Some(value.as_bytes().to_vec()));
    prop_oneof![
        10 => Just(t("<admin: every permission>", &tokens.admin)),
        3 => Just(("<none>", None)),
        4 => select(vec![
            t("<patients:read only>", &tokens.patients_read),
            t("<query:patient only>", &tokens.query_patient),
            t("<receptionist's signIn token>", &tokens.receptionist),
            t("<admin of another practice>", &tokens.other_practice),
            t("\"garbage\"", "garbage"),
            t("\"\" (empty)", ""),
            t("\"   \" (spaces)", "   "),
            t("<admin token with a character cut>", &tokens.admin[..tokens.admin.len() - 1]),
            ("<10 KB of x>", Some(vec![b'x'; 10_000])),
            ("<bytes that are not ASCII>", Some(obs_text)),
        ]),
    ]
    .boxed()
}

fn accept() -> BoxedStrategy<Option<&'static str>> {
    prop_oneof![
        4 => Just(None),
        4 => Just(Some("application/json")),
        4 => Just(Some("application/graphql-response+json")),
        2 => select(vec![
            Some("application/graphql-response+json, application/json;q=0.9"),
            Some("*/*"),
            Some("text/html"),
            Some("text/html, application/json"),
            Some("application/json;q=0"),
            Some("application/json;q=abc"),
            Some("application/graphql-response+json;q=NaN"),
            Some("application/json;q=inf, application/graphql-response+json;q=-inf"),
            Some(""),
            Some("garbage;;;,,,"),
            Some("application/*;q=0.1"),
        ]),
    ]
    .boxed()
}

fn content_type() -> BoxedStrategy<Option<&'static str>> {
    prop_oneof![
        20 => Just(Some("application/json")),
        2 => Just(Some("application/json; charset=utf-8")),
        1 => Just(None),
        2 => select(vec![
            Some("APPLICATION/JSON"),
            Some("application/json;charset=latin1"),
            Some("text/plain"),
            Some("application/graphql"),
            Some("application/x-www-form-urlencoded"),
            Some(""),
            Some("application/jsonx"),
            Some("multipart/form-data; boundary=x"),
        ]),
    ]
    .boxed()
}

/// Every request the fuzz test sends.
fn requests(wild: &Gen, strict: &Gen, tokens: &Tokens) -> BoxedStrategy<FuzzRequest> {
    let texts = &wild.texts;
    let ids: Vec<String> = wild.real_ids.iter().chain(&wild.odd_ids).cloned().collect();
    let ids = &ids[..];
    // Any headers; or, for requests meant to reach the resolvers, mostly the right ones.
    let any_headers = (token(tokens), accept(), content_type()).boxed();
    let tame_headers = (
        prop_oneof![
            8 => Just(("<admin: every permission>", Some(tokens.admin.as_bytes().to_vec()))),
            2 => token(tokens),
        ],
        select(vec![
            None,
            Some("application/json"),
            Some("application/graphql-response+json"),
        ]),
        Just(Some("application/json")),
    )
        .boxed();
    let post = |kind: &'static str, headers: &BoxedStrategy<_>, body: BoxedStrategy<Vec<u8>>| {
        (headers.clone(), body)
            .prop_map(move |((token, accept, content_type), body)| FuzzRequest {
                kind,
                get: false,
                query_string: String::new(),
                token,
                accept,
                content_type,
                body,
            })
            .boxed()
    };
    let get = |kind: &'static str, query_string: S| {
        (token(tokens), accept(), query_string)
            .prop_map(move |(token, accept, query_string)| FuzzRequest {
                kind,
                get: true,
                query_string,
                token,
                accept,
                content_type: None,
                body: Vec::new(),
            })
            .boxed()
    };
    let body = |doc: String,
                variables: Option<Value>,
                operation_name: Option<Value>,
                extensions: Option<Value>| {
        let mut body = Map::new();
        body.insert("query".into(), Value::String(doc));
        for (key, value) in [
            ("variables", variables),
            ("operationName", operation_name),
            ("extensions", extensions),
        ] {
            if let Some(value) = value {
                body.insert(key.into(), value);
            }
        }
        serde_json::to_vec(&body).expect("serialises")
    };
    let json_body = |doc: S| {
        (
            doc,
            variables(ids, texts),
            operation_name(),
            extensions(texts),
        )
            .prop_map(move |(doc, variables, operation_name, extensions)| {
                body(doc, variables, operation_name, extensions)
            })
            .boxed()
    };
    let strict_body = strict
        .mutated_document()
        .prop_map(move |doc| body(doc, None, None, None))
        .boxed();
    let templated = prop_oneof![
        4 => strict.templated().prop_map(move |(doc, variables)| body(doc, Some(variables), None, None)),
        1 => (wild.templated(), operation_name()).prop_map(move |((doc, variables), name)| {
            body(doc, Some(variables), name, None)
        }),
    ]
    .boxed();
    let get_query_string = (
        prop_oneof![wild.mutated_document(), strict.mutated_document()],
        variables(ids, texts),
        prop::option::weighted(0.2, select(&["A", "B", "Op", ""][..])),
        prop::bool::weighted(0.05),
    )
        .prop_map(|(doc, variables, operation_name, broken_variables)| {
            let mut qs = form_urlencoded::Serializer::new(String::new());
            qs.append_pair("query", &doc);
            if broken_variables {
                qs.append_pair("variables", "{\"v0\":");
            } else if let Some(variables) = variables {
                qs.append_pair("variables", &variables.to_string());
            }
            if let Some(name) = operation_name {
                qs.append_pair("operationName", name);
            }
            qs.finish()
        })
        .boxed();
    prop_oneof![
        25 => post("wild document", &any_headers, json_body(wild.mutated_document())),
        20 => post("strict document", &tame_headers, strict_body),
        20 => post("operation with variables", &tame_headers, templated),
        10 => get("GET document", get_query_string),
        15 => post("raw body", &any_headers, raw_body(texts)),
        4 => get("raw GET", raw_query_string(wild.mutated_document())),
        6 => post("bomb", &any_headers, json_body(wild.bomb())),
    ]
    .boxed()
}

/// What the server answered.
struct Answer {
    status: u16,
    content_type: String,
    body: Vec<u8>,
    /// The query string as sent (after URL parsing), empty if none.
    query_empty: bool,
}

/// Why there is no answer.
enum NoAnswer {
    /// The client cannot send this (e.g. a URI over 64 KiB): not the server's business.
    Unsendable(String),
    /// The server did not answer: it panicked, or dropped the connection.
    Failed(String),
    /// The server did not answer in time: it may still be busy.
    TimedOut(String),
}

async fn exchange(
    client: &reqwest::Client,
    url: &str,
    request: &FuzzRequest,
) -> Result<Answer, NoAnswer> {
    let mut builder = if request.get {
        if request.query_string.is_empty() {
            client.get(url)
        } else {
            client.get(format!("{url}?{}", request.query_string))
        }
    } else {
        client.post(url).body(request.body.clone())
    };
    if let Some(token) = &request.token.1 {
        let value = HeaderValue::from_bytes(token).expect("the token lists only valid headers");
        builder = builder.header("x-token", value);
    }
    if let Some(accept) = request.accept {
        builder = builder.header("accept", accept);
    }
    if let Some(content_type) = request.content_type {
        builder = builder.header("content-type", content_type);
    }
    let built = builder
        .build()
        .map_err(|e| NoAnswer::Unsendable(e.without_url().to_string()))?;
    let query_empty = built.url().query().is_none_or(str::is_empty);
    let response = client.execute(built).await.map_err(|e| {
        if e.is_builder() {
            NoAnswer::Unsendable(e.without_url().to_string())
        } else if e.is_timeout() {
            NoAnswer::TimedOut(format!(
                "no answer within {} s (is the server busy or hung?)",
                REQUEST_TIMEOUT.as_secs()
            ))
        } else {
            NoAnswer::Failed(format!(
                "no answer (did the server panic or hang?): {:?}",
                e.without_url()
            ))
        }
    })?;
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let body = response
        .bytes()
        .await
        .map_err(|e| {
            let timed_out = e.is_timeout();
            let why = format!(
                "HTTP {status}, but the body broke off: {:?}",
                e.without_url()
            );
            if timed_out {
                NoAnswer::TimedOut(why)
            } else {
                NoAnswer::Failed(why)
            }
        })?
        .to_vec();
    Ok(Answer {
        status,
        content_type,
        body,
        query_empty,
    })
}

/// At most `max` characters of a body, for a message.
fn shown(body: &[u8], max: usize) -> String {
    let text = String::from_utf8_lossy(body);
    if text.chars().count() <= max {
        text.into_owned()
    } else {
        text.chars().take(max).collect::<String>() + "…"
    }
}

/// Why an answer is wrong, if it is; otherwise the codes of its errors.
fn check(request: &FuzzRequest, answer: &Answer) -> Result<Vec<String>, String> {
    let status = answer.status;
    let what = || {
        format!(
            "HTTP {status} ({}): {}",
            answer.content_type,
            shown(&answer.body, 4000)
        )
    };
    if status >= 500 {
        return Err(format!("a 5xx answer: {}", what()));
    }
    // A browser's GET without a query gets the GraphiQL page.
    if request.get && answer.query_empty && request.accept.is_some_and(|a| a.contains("text/html"))
    {
        if status == 200 && answer.content_type.starts_with("text/html") {
            return Ok(Vec::new());
        }
        return Err(format!("expected the GraphiQL page, got {}", what()));
    }
    let body: Value = serde_json::from_slice(&answer.body)
        .map_err(|e| format!("the body is not JSON ({e}): {}", what()))?;
    let Some(object) = body.as_object() else {
        return Err(format!("the body is not a JSON object: {}", what()));
    };
    if !object.contains_key("data") && !object.contains_key("errors") {
        return Err(format!("the body has neither data nor errors: {}", what()));
    }
    let mut codes = Vec::new();
    if let Some(errors) = object.get("errors") {
        let Some(errors) = errors.as_array().filter(|e| !e.is_empty()) else {
            return Err(format!("errors is not a non-empty list: {}", what()));
        };
        for error in errors {
            if !error["message"].is_string() {
                return Err(format!("an error without a message: {}", what()));
            }
            let Some(code) = error["extensions"]["code"].as_str() else {
                return Err(format!("an error without extensions.code: {}", what()));
            };
            if code == "INTERNAL_SERVER_ERROR" {
                return Err(format!("an INTERNAL_SERVER_ERROR: {}", what()));
            }
            // The sign-in throttle (README, "Sign-in throttling and timeouts"): after 20 failed
            // sign-ins from one address, which this run makes, signIn fails with RATE_LIMITED
            // and retryAfter, at the field.
            let throttled = code == "RATE_LIMITED"
                && error["path"].as_array().is_some_and(|p| !p.is_empty())
                && error["extensions"]["retryAfter"].is_u64();
            if !ALLOWED_CODES.contains(&code) && !throttled {
                return Err(format!("extensions.code {code} is not allowed: {}", what()));
            }
            codes.push(code.to_string());
        }
    }
    Ok(codes)
}

// ---------------------------------------------------------------------------------------
// The run.
// ---------------------------------------------------------------------------------------

static PANICS: AtomicUsize = AtomicUsize::new(0);
static PANIC_MESSAGES: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Counts every panic in the process (the server's tasks run in it), then reports it as usual.
fn count_panics() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        PANICS.fetch_add(1, Ordering::SeqCst);
        if let Ok(mut messages) = PANIC_MESSAGES.lock() {
            messages.push(info.to_string());
        }
        previous(info);
    }));
}

#[derive(Default)]
struct Stats {
    requests: usize,
    server_errors: usize,
    internal_errors: usize,
    failures: usize,
    unsendable: usize,
    /// Cases not sent because an earlier request kept the server busy.
    skipped: usize,
    /// Answers with `data`: the operation ran.
    ran: usize,
    /// ... and without errors.
    clean: usize,
    statuses: BTreeMap<u16, usize>,
    codes: BTreeMap<String, usize>,
    kinds: BTreeMap<&'static str, usize>,
    slowest: Duration,
    started: Option<Instant>,
}

impl Stats {
    fn summary(&self) -> String {
        let statuses: Vec<String> = self
            .statuses
            .iter()
            .map(|(s, n)| format!("{s}×{n}"))
            .collect();
        let codes: Vec<String> = self.codes.iter().map(|(c, n)| format!("{c}×{n}")).collect();
        let kinds: Vec<String> = self.kinds.iter().map(|(k, n)| format!("{k}×{n}")).collect();
        format!(
            "fuzz: {} cases, {} 5xx, {} internal errors, {} failed checks in {:.1} s \
             (slowest answer {} ms; {} requests the client could not send, {} not sent after the server was kept busy); {} ran, {} without errors; kinds: {}; statuses: {}; codes: {}",
            self.requests,
            self.server_errors,
            self.internal_errors,
            self.failures,
            self.started.map_or(0.0, |s| s.elapsed().as_secs_f64()),
            self.slowest.as_millis(),
            self.unsendable,
            self.skipped,
            self.ran,
            self.clean,
            kinds.join(" "),
            statuses.join(" "),
            codes.join(" "),
        )
    }
}

fn cases() -> u32 {
    match std::env::var("PRACTICE_FUZZ_CASES") {
        Ok(n) => n
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("PRACTICE_FUZZ_CASES must be a number, got {n:?}")),
        Err(_) => DEFAULT_CASES,
    }
}

/// What the run sets up before it starts.
struct Seeded {
    target_patient: String,
    sentinel_patient: String,
    /// Ids of the records seeded, then odd ids.
    real_ids: Vec<String>,
    odd_ids: Vec<String>,
    emails: Vec<String>,
    tokens: Tokens,
}

async fn seed(app: &TestApp) -> Seeded {
    let target_patient = app.patient("Ada", "Lovelace").await;
    // Never among the generated ids: whatever the run deletes, this one stays.
    let sentinel_patient = app.patient("Sentinel", "Zzyzx").await;
    let label = app.label("VIP").await;
    let doctor = app.doctor("Grace", "Hopper").await;
    let receptionist = app.user("receptionist", "rita@example.com").await;
    let setup = app
        .ok(
            "mutation { l: createLocation(name: \"Main\") { data { id } error } \
             t: createAppointmentType(title: \"Consultation\", duration: 15, price: 40.5) { data { id } error } }",
            json!({}),
        )
        .await;
    let location = setup["l"]["data"]["id"]
        .as_str()
        .expect("location")
        .to_string();
    let appointment = setup["t"]["data"]["id"].as_str().expect("type").to_string();
    let labelled = app
        .ok(
            "mutation($p: ID!, $l: ID!) { addPatientLabel(patientId: $p, labelReferenceId: $l) { data { labels { id } } error } }",
            json!({ "p": target_patient, "l": label }),
        )
        .await;
    let patient_label = labelled["addPatientLabel"]["data"]["labels"][0]["id"]
        .as_str()
        .expect("patient label")
        .to_string();
    let booked = app
        .ok(
            "mutation($d: BookingDataInput!) { createBooking(bookingData: $d) { data { id } error } }",
            json!({ "d": {
                "patient": target_patient, "doctor": doctor, "location": location,
                "bookingType": appointment, "start": "2031-01-06T08:00:00Z",
            }}),
        )
        .await;
    let booking = booked["createBooking"]["data"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("createBooking failed: {booked}"))
        .to_string();
    let tokens = Tokens {
        admin: app.admin_token.clone(),
        patients_read: app.token(&["patients:read"]).await,
        query_patient: app.token(&["query:patient"]).await,
        receptionist: app.sign_in(&receptionist, PASSWORD).await,
        other_practice: app.other_practice("Elsewhere").await.1,
    };
    let real_ids = vec![
        target_patient.clone(),
        target_patient.clone(),
        label.clone(),
        doctor.clone(),
        location,
        appointment,
        booking.clone(),
        booking,
        patient_label,
        app.practice_id.clone(),
    ];
    let mut odd_ids: Vec<String> = vec![
        String::new(),
        " ".into(),
        "0".into(),
        "-1".into(),
        "00000000-0000-0000-0000-000000000000".into(),
        uuid::Uuid::now_v7().to_string(),
        "' OR '1'='1".into(),
        "%".into(),
        "\\".into(),
        "😀".into(),
        "\u{202e}".into(),
        "a\u{0}b".into(),
        "null".into(),
        format!("{target_patient} "),
        target_patient.to_uppercase(),
        target_patient[..target_patient.len() / 2].to_string(),
    ];
    odd_ids.push("x".repeat(5000));
    let emails = vec![
        "grace.hopper@example.com".into(),
        receptionist,
        "GRACE.HOPPER@EXAMPLE.COM".into(),
        " grace.hopper@example.com ".into(),
        "nobody@example.com".into(),
        "not an email".into(),
        "a@b@c".into(),
        String::new(),
        format!("{}@example.com", "x".repeat(300)),
        "😀@example.com".into(),
    ];
    Seeded {
        target_patient,
        sentinel_patient,
        real_ids,
        odd_ids,
        emails,
        tokens,
    }
}

/// What became of one request.
enum Outcome {
    Passed,
    /// Not sent: an earlier request kept the server busy.
    Skipped,
    /// The client could not send it.
    Unsendable(String),
    Failed(String),
}

/// Sends requests and checks their answers, counting as it goes.
struct Harness<'a> {
    runtime: &'a tokio::runtime::Runtime,
    client: reqwest::Client,
    url: String,
    stats: RefCell<Stats>,
    /// Once the server has been kept busy for seconds, later answers say nothing about the
    /// requests that get them: the run stops sending (and so stops shrinking) there.
    busy: RefCell<bool>,
    verbose: bool,
}

impl Harness<'_> {
    fn run(&self, request: &FuzzRequest) -> Outcome {
        if *self.busy.borrow() {
            self.stats.borrow_mut().skipped += 1;
            return Outcome::Skipped;
        }
        if self.verbose {
            let asked = shown(format!("{request:?}").as_bytes(), 600);
            let _ = writeln!(std::io::stderr(), "---- {asked}");
        }
        let panics_before = PANICS.load(Ordering::SeqCst);
        let started = Instant::now();
        let answer = self
            .runtime
            .block_on(exchange(&self.client, &self.url, request));
        let took = started.elapsed();
        let mut stats = self.stats.borrow_mut();
        stats.requests += 1;
        stats.slowest = stats.slowest.max(took);
        *stats.kinds.entry(request.kind).or_default() += 1;
        let mut verdict = match &answer {
            Ok(answer) => {
                *stats.statuses.entry(answer.status).or_default() += 1;
                if answer.status >= 500 {
                    stats.server_errors += 1;
                }
                if String::from_utf8_lossy(&answer.body).contains("INTERNAL_SERVER_ERROR") {
                    stats.internal_errors += 1;
                }
                if let Ok(body) = serde_json::from_slice::<Value>(&answer.body)
                    && body.get("data").is_some_and(|d| !d.is_null())
                {
                    stats.ran += 1;
                    stats.clean += usize::from(body.get("errors").is_none());
                }
                check(request, answer)
            }
            Err(NoAnswer::Unsendable(why)) => {
                stats.unsendable += 1;
                return Outcome::Unsendable(why.clone());
            }
            Err(NoAnswer::Failed(why)) => Err(why.clone()),
            Err(NoAnswer::TimedOut(why)) => {
                *self.busy.borrow_mut() = true;
                Err(why.clone())
            }
        };
        if verdict.is_ok() && took > SLOW_ANSWER {
            *self.busy.borrow_mut() = true;
            verdict = Err(format!(
                "the answer took {} ms, more than {} s",
                took.as_millis(),
                SLOW_ANSWER.as_secs()
            ));
        }
        if self.verbose {
            let answered = match &answer {
                Ok(a) => format!("HTTP {}: {}", a.status, shown(&a.body, 300)),
                Err(
                    NoAnswer::Failed(why) | NoAnswer::Unsendable(why) | NoAnswer::TimedOut(why),
                ) => why.clone(),
            };
            let ms = took.as_millis();
            let _ = writeln!(std::io::stderr(), "=> ({ms} ms) {answered}");
        }
        if let Ok(codes) = &verdict {
            for code in codes {
                *stats.codes.entry(code.clone()).or_default() += 1;
            }
        }
        if PANICS.load(Ordering::SeqCst) != panics_before {
            let messages = PANIC_MESSAGES
                .lock()
                .map(|m| m.join("\n"))
                .unwrap_or_default();
            verdict = Err(format!("the server panicked: {messages}"));
        }
        match verdict {
            Ok(_) => Outcome::Passed,
            Err(why) => {
                stats.failures += 1;
                Outcome::Failed(format!("{why} (after {} ms)", took.as_millis()))
            }
        }
    }
}

/// Requests that found bugs, or sit on a limit: sent first, every run, whatever the seed.
fn corpus(tokens: &Tokens) -> Vec<(&'static str, FuzzRequest)> {
    let post = |body: Vec<u8>| FuzzRequest {
        kind: "corpus",
        get: false,
        query_string: String::new(),
        token: (
            "<admin: every permission>",
            Some(tokens.admin.as_bytes().to_vec()),
        ),
        accept: None,
        content_type: Some("application/json"),
        body,
    };
    let document = |doc: String| post(serde_json::to_vec(&json!({ "query": doc })).expect("json"));
    let mut fan_out = "{ currentPractice { ...P0 } }".to_string();
    for i in 0..24 {
        fan_out += &format!(
            " fragment P{i} on Practice {{ id ...P{} ...P{} }}",
            i + 1,
            i + 1
        );
    }
    fan_out += " fragment P24 on Practice { name }";
    let body_of = |size: usize| {
        let head = br#"{"query":"{ currentPractice { id } }","padding":""#;
        let mut body = head.to_vec();
        body.resize(size - 2, b'x');
        body.extend_from_slice(b"\"}");
        body
    };
    let max_body = helpers::test_config().max_body_bytes;
    vec![
        (
            "fragments that each spread the next twice, 24 deep",
            document(fan_out),
        ),
        ("a body of exactly the size limit", post(body_of(max_body))),
        (
            "a body one byte over the size limit",
            post(body_of(max_body + 1)),
        ),
        (
            "a variable type nested 400 lists deep",
            document(format!(
                "query($v: {}Int{}) {{ __typename }}",
                "[".repeat(400),
                "]".repeat(400)
            )),
        ),
        (
            "an argument nested 400 lists deep",
            document(format!(
                "{{ patient(id: {}\"x\"{}) {{ id }} }}",
                "[".repeat(400),
                "]".repeat(400)
            )),
        ),
        (
            "an input object nested 400 deep",
            document(format!(
                "{{ patients(options: {}true{}) {{ pageInfo {{ page }} }} }}",
                "{includeDeleted: ".repeat(400),
                "}".repeat(400)
            )),
        ),
    ]
}

#[test]
fn the_server_survives_mutated_requests() {
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .try_init();
    }
    count_panics();
    // The server has a runtime of its own, the client another: a request that keeps the
    // server's workers busy cannot stop the client from timing out and reporting it.
    let server = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("server runtime");
    let client_runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("client runtime");
    let app = server
        .block_on(TestApp::spawn_with(Engine::Sqlite, helpers::test_config()))
        .expect("SQLite is always there");
    let seeded = server.block_on(seed(&app));
    let client = client_runtime.block_on(async {
        // A connection of its own for every request: after refusing an oversized body the
        // server closes the connection, which a pooled client would try to use again.
        reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .pool_max_idle_per_host(0)
            .build()
            .expect("client")
    });
    let harness = Harness {
        runtime: &client_runtime,
        client,
        url: app.url.clone(),
        stats: RefCell::new(Stats {
            started: Some(Instant::now()),
            ..Stats::default()
        }),
        busy: RefCell::new(false),
        verbose: std::env::var_os("PRACTICE_FUZZ_VERBOSE").is_some(),
    };

    // The corpus first. Each is named before it is sent: if one crashes the process, the
    // last name printed is the culprit.
    let mut failures = Vec::new();
    let mut not_sent = Vec::new();
    for (name, request) in corpus(&seeded.tokens) {
        if !*harness.busy.borrow() {
            let _ = writeln!(std::io::stderr(), "fuzz corpus: sending {name}");
        }
        match harness.run(&request) {
            Outcome::Passed => {}
            Outcome::Skipped => not_sent.push(name),
            Outcome::Unsendable(why) | Outcome::Failed(why) => {
                failures.push(format!("{name}: {why}\n{request:?}"))
            }
        }
    }

    let result = if failures.is_empty() {
        let wild = Gen::new(true, &seeded);
        let strict = Gen::new(false, &seeded);
        let strategy = requests(&wild, &strict, &seeded.tokens);
        let mut config = Config::with_cases(cases());
        config.failure_persistence = None;
        config.max_shrink_iters = 2000;
        config.max_shrink_time = 90_000;
        if std::env::var_os("PROPTEST_RNG_SEED").is_none() {
            config.rng_seed = RngSeed::Fixed(DEFAULT_SEED);
        }
        let mut runner = TestRunner::new(config);
        runner
            .run(&strategy, |request| match harness.run(&request) {
                Outcome::Passed | Outcome::Skipped => Ok(()),
                Outcome::Unsendable(why) => Err(TestCaseError::reject(why)),
                Outcome::Failed(why) => Err(TestCaseError::fail(why)),
            })
            .map_err(|failure| failure.to_string())
    } else {
        let not_sent = match not_sent.is_empty() {
            true => String::new(),
            false => format!(
                "\n\nNot sent, the server being busy with the above: {}.",
                not_sent.join("; ")
            ),
        };
        Err(format!(
            "{} of the corpus failed (the random cases did not run):\n\n{}{not_sent}",
            failures.len(),
            failures.join("\n\n")
        ))
    };
    let summary = harness.stats.borrow().summary();
    let _ = writeln!(std::io::stderr(), "{summary}");
    if let Err(failure) = result {
        if *harness.busy.borrow() {
            let _ = writeln!(
                std::io::stderr(),
                "fuzz: the server was kept busy; the input below is the first that did it, not shrunk"
            );
        }
        // The server may still be busy with the request that failed: leave it behind.
        server.shutdown_background();
        let _inside = client_runtime.enter();
        drop(app);
        panic!("{failure}");
    }

    // The server still serves, and the run did not lose the patient it could not name.
    server.block_on(async {
        app.assert_serving().await;
        let data = app
            .ok(
                "query($s: String) { patients(search: $s, options: { includeArchived: true, includeDeleted: true }) { data { id firstName lastName } } }",
                json!({ "s": "Zzyzx" }),
            )
            .await;
        let found = data["patients"]["data"]
            .as_array()
            .expect("a page of patients");
        assert!(
            found.iter().any(|p| p["id"] == json!(seeded.sentinel_patient)
                && p["firstName"] == json!("Sentinel")),
            "the seeded patient is missing: {data}"
        );
        let data = app
            .ok(
                "query($id: ID!) { patient(id: $id) { id } }",
                json!({ "id": seeded.target_patient }),
            )
            .await;
        assert_eq!(data["patient"]["id"], json!(seeded.target_patient));
        app.store.close().await;
        drop(app);
    });
}

//! The schema, as far as documents need it: its types, fields and arguments, the
//! templates of real operations, and literals of every kind, good and bad.

use super::*;

/// What an argument takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
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

pub(crate) type Arg = (&'static str, Kind);
/// A field: its name, its arguments and the type of its selection (None for a leaf).
pub(crate) type Field = (&'static str, &'static [Arg], Option<&'static str>);

pub(crate) const NO: &[Arg] = &[];
pub(crate) const BY_ID: &[Arg] = &[("id", Kind::Id)];
pub(crate) const PAGED: &[Arg] = &[("pagination", Kind::Pagination)];
pub(crate) const DAYS: &[Arg] = &[("start", Kind::Date), ("end", Kind::Date)];

pub(crate) const fn leaf(name: &'static str) -> Field {
    (name, NO, None)
}

pub(crate) const fn object(name: &'static str, ty: &'static str) -> Field {
    (name, NO, Some(ty))
}

/// The fields of an output type.
pub(crate) fn fields(ty: &str) -> &'static [Field] {
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
pub(crate) fn input_fields(kind: Kind) -> &'static [Arg] {
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
pub(crate) const TEMPLATES: &[(&str, &[Kind])] = &[
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
pub(crate) const TYPE_NAMES: &[&str] = &[
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
pub(crate) const VARIABLE_TYPES: &[&str] = &[
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

pub(crate) const VARIABLE_REFS: &[&str] = &["$v0", "$v1", "$v2", "$undeclared"];

/// Int literals: the first [`GOOD_INTS`] fit an Int; the rest do not, or are not GraphQL.
pub(crate) const INTS: &[&str] = &[
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

pub(crate) const GOOD_INTS: usize = 11;

/// Float literals: the first [`GOOD_FLOATS`] are finite floats; the rest are not.
pub(crate) const FLOATS: &[&str] = &[
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

pub(crate) const GOOD_FLOATS: usize = 10;

/// Dates: the first [`GOOD_DATES`] are well formed (if odd); the rest are not.
pub(crate) const DATES: &[&str] = &[
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

pub(crate) const GOOD_DATES: usize = 11;

/// Timestamps: the first [`GOOD_DATETIMES`] are RFC 3339 with an offset (if odd); the rest
/// are not.
pub(crate) const DATETIMES: &[&str] = &[
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

pub(crate) const GOOD_DATETIMES: usize = 11;

/// Arguments a strict document always gives (where the schema requires them, or a date
/// range needs both ends).
pub(crate) const REQUIRED: &[&str] = &[
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

pub(crate) const COLORS: &[&str] = &[
    "#123456", "#e11d48", "#fff", "red", "#GGGGGG", "", "#1234567", "#12345",
];

pub(crate) const PERMISSIONS: &[&str] = &[
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
pub(crate) fn texts() -> Vec<String> {
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
pub(crate) fn quote(text: &str) -> String {
    serde_json::to_string(text).expect("a string serialises")
}

/// String literals that are malformed or strange in the GraphQL source itself.
pub(crate) const ODD_STRING_LITERALS: &[&str] = &[
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

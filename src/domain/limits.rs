//! The bounds on what a practice keeps, each enforced where the record is written and each
//! the weight of its list in a query's cost (`graphql::pipeline::limits`): a list can never
//! return more than its bound, so a query's cost is what it can really cost.

/// Most labels on one patient.
pub const MAX_LABELS_PER_PATIENT: usize = 20;
/// Most bookings `Patient.bookings` returns.
pub const MAX_PATIENT_BOOKINGS: usize = 500;
/// Most locations a practice has.
pub const MAX_LOCATIONS: usize = 200;
/// Most appointment types a practice has, active or not.
pub const MAX_APPOINTMENT_TYPES: usize = 200;
/// Most appointment types one location or one practitioner provides: `practice { locations {
/// servicesProvided } }` then weighs 200 × 30, inside the default cost limit.
pub const MAX_SERVICES_PROVIDED: usize = 30;
/// Most labels on one product.
pub const MAX_LABELS_PER_PRODUCT: usize = 20;
/// Most products of every kind a practice has.
pub const MAX_PRODUCTS: usize = 2_000;
/// Most access groups a practice has.
pub const MAX_ACCESS_GROUPS: usize = 100;
/// Most number definitions ("NHS number") a practice has.
pub const MAX_NUMBER_DEFINITIONS: usize = 50;
/// Most API tokens a practice has that are not revoked, and most that `apiTokens` lists
/// (the newest).
pub const MAX_API_TOKENS: usize = 200;
/// Most webhook subscriptions a practice has that are not deleted: each change of a record
/// is an attempt to each subscription of its type, so the bound is one on the requests a
/// single write can make the server send.
pub const MAX_WEBHOOKS: usize = 50;
/// Most attempts `WebhookDelivery.attempts` lists: the newest. A schedule has at most 20
/// attempts, but each redelivery adds its own to the delivery's.
pub const MAX_ATTEMPTS_LISTED: usize = 20;
/// Most permissions one token carries.
pub const MAX_PERMISSIONS: usize = 100;
/// The furthest row a page may reach (page × pageSize): deeper pages of a list are read by
/// narrowing it (search, date ranges), not by paging through it.
pub const MAX_PAGE_END: u64 = 10_000;
/// Most patients a search of three characters or more may match before it is refused as too
/// broad: what one search can touch.
pub const MAX_SEARCH_MATCHES: usize = 2_000;
/// Shortest search that patients' search index can answer; a shorter one reads every
/// patient of the practice.
pub const MIN_INDEXED_SEARCH_CHARS: usize = 3;

/// Most sessions `sessions` lists: a user signs in a few times a day, for 12 hours each.
pub const MAX_SESSIONS_LISTED: usize = 200;

/// Most metadata entries a booking, a product or a staff user holds (the contract's); a key
/// has at most [`MAX_METADATA_KEY_CHARS`] characters, a value at most
/// [`MAX_METADATA_VALUE_CHARS`]. Entries are kept in their record's row, so a list of them
/// weighs less in a query's cost than a list of records (`graphql::pipeline::limits`).
pub const MAX_METADATA_ENTRIES: usize = 50;
/// The longest id a list of ids may name: the server's ids are 36 characters; an id longer
/// than this names nothing, and is refused without being repeated back.
pub const MAX_ID_CHARS: usize = 64;
pub const MAX_METADATA_KEY_CHARS: usize = 40;
pub const MAX_METADATA_VALUE_CHARS: usize = 500;

/// Most phones, custom attributes, relationships and access groups a patient holds.
pub const MAX_PHONES_PER_PATIENT: usize = 10;
pub const MAX_NUMBERS_PER_PATIENT: usize = 50;
pub const MAX_ATTRIBUTES_PER_PATIENT: usize = 50;
pub const MAX_RELATIONSHIPS_PER_PATIENT: usize = 20;
pub const MAX_ACCESS_GROUPS_PER_PATIENT: usize = 20;

/// Most old secrets of a webhook subscription that sign at once beside its current one: a
/// rotation past it, within a day of the oldest, is refused rather than cut that one short.
pub const MAX_OLD_SECRETS: usize = 5;

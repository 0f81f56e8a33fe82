//! Query limits: how deep, how costly, how many aliases and directives, how long a document
//! may be. Measured on the parsed document before it runs, so that a query bomb costs the
//! server a parse and nothing more; a rejection names the limit and the query's value.
//!
//! Cost: every field costs 1, and a field that returns a list multiplies the cost of what is
//! selected under it by how many items it can return: its `pageSize` for paged lists (default
//! 25), the bound of `domain::limits` for the others (see [`WEIGHTS`]). A search costs what
//! it can touch on top. Introspection (`__schema`, `__type`) costs what it returns, counted
//! against the schema ([`super::introspection`]). Arguments are read as the executor will read them: from the
//! variables, or from the variables' defaults.

use std::cell::Cell;
use std::collections::HashMap;

use async_graphql::parser::types::{
    BaseType, ExecutableDocument, Field, OperationDefinition, OperationType, Selection,
    SelectionSet, Type, TypeKind, TypeSystemDefinition,
};
use async_graphql::{Name, Positioned, Value as ConstValue, Variables};

use crate::domain::limits::{
    MAX_ACCESS_GROUPS, MAX_ACCESS_GROUPS_PER_PATIENT, MAX_API_TOKENS, MAX_APPOINTMENT_TYPES,
    MAX_ATTEMPTS_LISTED, MAX_ATTRIBUTES_PER_PATIENT, MAX_LABELS_PER_PATIENT,
    MAX_LABELS_PER_PRODUCT, MAX_LOCATIONS, MAX_METADATA_ENTRIES, MAX_NUMBER_DEFINITIONS,
    MAX_NUMBERS_PER_PATIENT, MAX_PATIENT_BOOKINGS, MAX_PHONES_PER_PATIENT,
    MAX_RELATIONSHIPS_PER_PATIENT, MAX_SEARCH_MATCHES, MAX_SERVICES_PROVIDED, MAX_SESSIONS_LISTED,
    MIN_INDEXED_SEARCH_CHARS,
};
use crate::graphql::events::DEFAULT_FEED_LIMIT;
use crate::graphql::pagination::DEFAULT_PAGE_SIZE;
use crate::graphql::webhooks::MAX_HEADERS;

use super::introspection::{Counter, Introspected, cost_of_values};

/// The limits a document must keep to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub max_depth: usize,
    pub max_cost: u64,
    pub max_aliases: usize,
    pub max_directives: usize,
    pub max_document_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_depth: 15,
            max_cost: 10_000,
            max_aliases: 30,
            max_directives: 20,
            max_document_bytes: 32 * 1024,
        }
    }
}

/// What a document asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Measure {
    pub depth: usize,
    pub cost: u64,
    pub aliases: usize,
    pub directives: usize,
}

/// A limit a document broke: which, its value and the limit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exceeded {
    /// `depth`, `cost`, `aliases`, `directives`, `documentBytes` or `selections`.
    pub limit: &'static str,
    pub value: u64,
    pub max: u64,
}

impl Exceeded {
    /// A sentence for the caller.
    pub fn message(&self) -> String {
        let (value, max) = (self.value, self.max);
        match self.limit {
            "depth" => {
                format!("The query is nested {value} levels deep, more than the limit of {max}")
            }
            "cost" => format!(
                "The query costs {value}, more than the limit of {max}: ask for smaller pages \
                 or fewer nested lists (extensions.cost says what it costs)"
            ),
            "aliases" => format!("The query uses {value} aliases, more than the limit of {max}"),
            "directives" => {
                format!("The query uses {value} directives, more than the limit of {max}")
            }
            "selections" => format!(
                "The document's operations expand to {value} selections through their \
                 fragments, more than the limit of {max}: spread each fragment fewer times"
            ),
            _ => format!("The query document is {value} bytes long, more than the limit of {max}"),
        }
    }
}

impl Limits {
    /// Checks a measured document against the limits (its length is checked before it is
    /// parsed).
    pub fn check(&self, m: &Measure) -> Result<(), Exceeded> {
        let checks = [
            ("depth", m.depth as u64, self.max_depth as u64),
            ("aliases", m.aliases as u64, self.max_aliases as u64),
            (
                "directives",
                m.directives as u64,
                self.max_directives as u64,
            ),
            ("cost", m.cost, self.max_cost),
        ];
        for (limit, value, max) in checks {
            if value > max {
                return Err(Exceeded { limit, value, max });
            }
        }
        Ok(())
    }
}

/// How many items a field's list can hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Weight {
    /// A page: its `pagination: { pageSize }` argument, 25 by default.
    Paged,
    /// A page when its `pagination` argument is given (as [`Weight::Paged`]), else at most
    /// this many.
    PagedOr(usize),
    /// A page chosen by its own `pageSize` argument, 25 by default.
    PageSize,
    /// At most this many.
    AtMost(usize),
    /// At most this many, kept in the parent's row (metadata): read with the parent, for no
    /// statement and no lookup of their own, so each weighs [`IN_ROW_SHARE`] of an item.
    InRow(usize),
    /// Its `limit` argument, this many by default.
    Limit(u32),
}

/// What an entry kept in its parent's row weighs against an item of a list ([`Weight::InRow`]):
/// a fifth. A booking's 50 metadata entries then weigh 10, so a page of 100 bookings with
/// theirs costs 2,301 and the practice's 200 appointment types with theirs 4,402, where they
/// would cost 10,301 and 20,402 counted as records; and the default page of 25 patients with
/// their whole record (every list of it full) fits the default limit.
const IN_ROW_SHARE: usize = 5;

/// Every field that returns a list of objects, or a page of them, and how many items it can
/// return. A test fails when the schema has a list of objects that is not here.
const WEIGHTS: &[(&str, &str, Weight)] = &[
    ("Query", "patients", Weight::Paged),
    ("Query", "bookings", Weight::Paged),
    ("Query", "labels", Weight::Paged),
    ("Query", "users", Weight::Paged),
    ("Query", "auditEvents", Weight::Paged),
    ("Query", "locations", Weight::AtMost(MAX_LOCATIONS)),
    (
        "Query",
        "appointmentTypes",
        Weight::AtMost(MAX_APPOINTMENT_TYPES),
    ),
    ("Query", "apiTokens", Weight::AtMost(MAX_API_TOKENS)),
    ("Query", "sessions", Weight::AtMost(MAX_SESSIONS_LISTED)),
    ("Patient", "labels", Weight::AtMost(MAX_LABELS_PER_PATIENT)),
    // The record's lists, kept in the patient's row and read with it (the names of the
    // practice's number definitions and access groups, once a request).
    ("Patient", "phones", Weight::InRow(MAX_PHONES_PER_PATIENT)),
    ("Patient", "numbers", Weight::InRow(MAX_NUMBERS_PER_PATIENT)),
    (
        "Patient",
        "customAttributes",
        Weight::InRow(MAX_ATTRIBUTES_PER_PATIENT),
    ),
    (
        "Patient",
        "relatedAccounts",
        Weight::InRow(MAX_RELATIONSHIPS_PER_PATIENT),
    ),
    (
        "Patient",
        "accessGroups",
        Weight::InRow(MAX_ACCESS_GROUPS_PER_PATIENT),
    ),
    // A relationship's contact keeps one phone.
    ("PatientRelationshipContact", "phones", Weight::AtMost(1)),
    ("Patient", "bookings", Weight::PagedOr(MAX_PATIENT_BOOKINGS)),
    ("Patient", "bookingsWithPagination", Weight::Paged),
    ("User", "bookings", Weight::PageSize),
    ("Booking", "metadata", Weight::InRow(MAX_METADATA_ENTRIES)),
    ("User", "metadata", Weight::InRow(MAX_METADATA_ENTRIES)),
    (
        "User",
        "servicesProvided",
        Weight::AtMost(MAX_SERVICES_PROVIDED),
    ),
    ("Query", "products", Weight::Paged),
    ("ProductData", "data", Weight::AtMost(1)),
    ("Product", "labels", Weight::AtMost(MAX_LABELS_PER_PRODUCT)),
    ("Product", "metadata", Weight::InRow(MAX_METADATA_ENTRIES)),
    ("Practice", "locations", Weight::AtMost(MAX_LOCATIONS)),
    (
        "Practice",
        "appointmentTypes",
        Weight::AtMost(MAX_APPOINTMENT_TYPES),
    ),
    (
        "Practice",
        "accessGroups",
        Weight::AtMost(MAX_ACCESS_GROUPS),
    ),
    (
        "Practice",
        "practiceNumbers",
        Weight::AtMost(MAX_NUMBER_DEFINITIONS),
    ),
    (
        "PracticeLocation",
        "servicesProvided",
        Weight::AtMost(MAX_SERVICES_PROVIDED),
    ),
    // The items of a page: the field that returned the page weighed them.
    ("PatientData", "data", Weight::AtMost(1)),
    ("PatientBookingsData", "data", Weight::AtMost(1)),
    ("BookingData", "data", Weight::AtMost(1)),
    ("LabelData", "data", Weight::AtMost(1)),
    ("UserData", "data", Weight::AtMost(1)),
    ("AuditEventData", "data", Weight::AtMost(1)),
    ("Query", "events", Weight::Limit(DEFAULT_FEED_LIMIT)),
    ("EventFeed", "data", Weight::AtMost(1)),
    ("Query", "webhooks", Weight::Paged),
    ("Query", "webhookDeliveries", Weight::Paged),
    ("WebhookSubscriptionData", "data", Weight::AtMost(1)),
    ("WebhookDeliveryData", "data", Weight::AtMost(1)),
    (
        "WebhookSubscription",
        "headers",
        Weight::AtMost(MAX_HEADERS),
    ),
    // The newest attempts only: redeliveries add to a delivery's without end.
    (
        "WebhookDelivery",
        "attempts",
        Weight::AtMost(MAX_ATTEMPTS_LISTED),
    ),
];

/// The extra cost of a search: what it can touch. One of three characters or more reads at
/// most [`MAX_SEARCH_MATCHES`] patients through the index (a hundredth of a cost unit each);
/// a shorter one reads every patient of the practice, and costs half of the default limit.
fn search_cost(search: &str) -> u64 {
    match search.trim().chars().count() {
        0 => 0,
        n if n < MIN_INDEXED_SEARCH_CHARS => 5_000,
        _ => (MAX_SEARCH_MATCHES / 20) as u64,
    }
}

/// The schema's fields as costing needs them: the type each returns.
#[derive(Clone, Debug, Default)]
pub struct Shapes {
    returns: HashMap<(String, String), String>,
    lists: Vec<(String, String)>,
    /// The schema as introspection shows it, for what `__schema` and `__type` return.
    introspected: Introspected,
}

impl Shapes {
    /// The shapes of the schema written in `sdl`.
    pub fn of_sdl(sdl: &str) -> Shapes {
        let mut shapes = Shapes {
            introspected: Introspected::of_sdl(sdl),
            ..Shapes::default()
        };
        let Ok(doc) = async_graphql::parser::parse_schema(sdl) else {
            return shapes;
        };
        let objects: Vec<String> = doc
            .definitions
            .iter()
            .filter_map(|d| match d {
                TypeSystemDefinition::Type(t) if matches!(t.node.kind, TypeKind::Object(_)) => {
                    Some(t.node.name.node.to_string())
                }
                _ => None,
            })
            .collect();
        for definition in &doc.definitions {
            let TypeSystemDefinition::Type(t) = definition else {
                continue;
            };
            let TypeKind::Object(object) = &t.node.kind else {
                continue;
            };
            for field in &object.fields {
                let key = (
                    t.node.name.node.to_string(),
                    field.node.name.node.to_string(),
                );
                let (name, list) = element(&field.node.ty.node);
                if list && objects.contains(&name) {
                    shapes.lists.push(key.clone());
                }
                shapes.returns.insert(key, name);
            }
        }
        shapes
    }

    /// The type `field` of `parent` returns (its items' type, for a list).
    fn returns(&self, parent: &str, field: &str) -> Option<&str> {
        self.returns
            .get(&(parent.to_string(), field.to_string()))
            .map(String::as_str)
    }
}

/// A type's innermost named type, and whether it is a list.
fn element(ty: &Type) -> (String, bool) {
    match &ty.base {
        BaseType::Named(name) => (name.to_string(), false),
        BaseType::List(inner) => (element(inner).0, true),
    }
}

/// Deepest nesting of brackets a document may have, counted in its text before it is parsed:
/// parsing, validating and walking a document recurse once a level, so a document of
/// thousands of nested `{` (or `... on Query {`, or `[`) would overflow a thread's stack.
/// Selections nest at most `max_depth` deep, and inline fragments and argument values add a
/// few more; 100 leaves room for any real query.
pub const MAX_BRACKET_NESTING: usize = 100;

/// The deepest nesting of `{`, `(` and `[` in a document, outside strings and comments.
pub fn bracket_nesting(document: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let bytes = document.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'#' => {
                // A comment runs to the end of the line.
                while i < bytes.len() && bytes[i] != b'\n' && bytes[i] != b'\r' {
                    i += 1;
                }
            }
            b'"' if bytes[i..].starts_with(b"\"\"\"") => {
                // A block string runs to the next """ not escaped as \""".
                i += 3;
                while i < bytes.len() && !bytes[i..].starts_with(b"\"\"\"") {
                    i += if bytes[i..].starts_with(b"\\\"\"\"") {
                        4
                    } else {
                        1
                    };
                }
                i += 2;
            }
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' && bytes[i] != b'\n' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'{' | b'(' | b'[' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b'}' | b')' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    deepest
}

/// The most selections (sets and their items) a document's operations may expand to through
/// their fragments (see [`expanded_selections`]). A query within the cost limit expands to
/// about 20,000 at most (a field costs at least 1); a document that sends a client's every
/// operation, each within it, a few times that. 200,000 is a few milliseconds of walking.
pub const MAX_EXPANDED_SELECTIONS: u64 = 200_000;

/// How deep async-graphql's check of recursion depth walks (its default, which the schema
/// keeps): past it, the check stops with an error.
const RECURSION_CHECKED: usize = 32;

/// How many selection sets, and items of them, walking every operation of `doc` (chosen or
/// not) looks at when each fragment is walked where it is spread, as async-graphql's check of
/// recursion depth walks them, without yielding, before anything else looks at the document,
/// to a depth of [`RECURSION_CHECKED`]. Fragments that each spread the next twice, 30 deep,
/// are billions of looks, minutes of a runtime thread for a request of a kilobyte; so is a
/// fragment of thousands of fields spread 2^15 times. Counted here with each fragment's count
/// at each depth taken once, saturating (a bound from above: the check stops at the first
/// level too deep). A spread of a fragment the document does not define is walked as
/// nothing, as there.
pub fn expanded_selections(doc: &ExecutableDocument) -> u64 {
    fn set<'d>(
        doc: &'d ExecutableDocument,
        selections: &'d SelectionSet,
        depth: usize,
        counted: &mut HashMap<(&'d str, usize), u64>,
    ) -> u64 {
        if depth > RECURSION_CHECKED {
            return 1;
        }
        // The set, and each of its items looked at.
        let mut visits = 1 + selections.items.len() as u64;
        for item in &selections.items {
            let inner = match &item.node {
                Selection::Field(field) if field.node.selection_set.node.items.is_empty() => 0,
                Selection::Field(field) => {
                    set(doc, &field.node.selection_set.node, depth + 1, counted)
                }
                Selection::InlineFragment(inline) => {
                    set(doc, &inline.node.selection_set.node, depth + 1, counted)
                }
                Selection::FragmentSpread(spread) => {
                    let name = &spread.node.fragment_name.node;
                    match (
                        counted.get(&(name.as_str(), depth + 1)),
                        doc.fragments.get(name),
                    ) {
                        (Some(known), _) => *known,
                        (None, None) => 0,
                        (None, Some(fragment)) => {
                            let count =
                                set(doc, &fragment.node.selection_set.node, depth + 1, counted);
                            counted.insert((name.as_str(), depth + 1), count);
                            count
                        }
                    }
                }
            };
            visits = visits.saturating_add(inner);
        }
        visits
    }
    let mut counted = HashMap::new();
    doc.operations.iter().fold(0u64, |total, (_, operation)| {
        total.saturating_add(set(
            doc,
            &operation.node.selection_set.node,
            0,
            &mut counted,
        ))
    })
}

/// Measures the operation `op` of `doc`, with `variables` as sent, and says whether the
/// measure read any of them: when it did not (no argument it weighs, page sizes, limits and
/// searches, is or holds a variable), every request that sends the document gets the same
/// measure, which may be kept with the document (see [`super::documents`]).
pub fn measure_noting(
    shapes: &Shapes,
    doc: &ExecutableDocument,
    op: &Positioned<OperationDefinition>,
    variables: &Variables,
) -> (Measure, bool) {
    // What the executor will read: the variables sent, else their defaults.
    let mut values = variables.clone();
    for definition in &op.node.variable_definitions {
        let name = &definition.node.name.node;
        if !values.contains_key(name)
            && let Some(default) = &definition.node.default_value
        {
            values.insert(name.clone(), default.node.clone());
        }
    }
    let root = match op.node.ty {
        OperationType::Query => "Query",
        OperationType::Mutation => "Mutation",
        OperationType::Subscription => "Subscription",
    };
    let mut walker = Walker {
        shapes,
        doc,
        variables: &values,
        read_variables: Cell::new(false),
        measure: Measure::default(),
        fragments: Vec::new(),
        measured: HashMap::new(),
        introspection: None,
    };
    walker.measure.directives += op.node.directives.len();
    walker.measure.cost = walker.selection(&op.node.selection_set.node, Some(root), 1);
    (walker.measure, walker.read_variables.get())
}

struct Walker<'d> {
    shapes: &'d Shapes,
    doc: &'d ExecutableDocument,
    variables: &'d Variables,
    /// Whether an argument weighed was, or held, a variable.
    read_variables: Cell<bool>,
    measure: Measure,
    /// Fragments being expanded, against a fragment that spreads itself (the document is not
    /// validated yet).
    fragments: Vec<&'d str>,
    /// Each fragment's measure (from depth 1), taken once: a fragment spread twice in a
    /// fragment spread twice ... would otherwise be walked an exponential number of times.
    measured: HashMap<&'d str, Measure>,
    /// The count of the document's introspection, once it has any: one for the document, so
    /// that its bound on the work is the document's.
    introspection: Option<Counter<'d, 'd>>,
}

impl<'d> Walker<'d> {
    /// The cost of a selection on type `on` (None when unknown: introspection, a name the
    /// document made up) at `depth`, counting aliases and directives on the way.
    fn selection(&mut self, set: &'d SelectionSet, on: Option<&'d str>, depth: usize) -> u64 {
        let mut cost: u64 = 0;
        for item in &set.items {
            let item_cost = match &item.node {
                Selection::Field(field) => {
                    let field = &field.node;
                    self.measure.depth = self.measure.depth.max(depth);
                    self.measure.aliases += usize::from(field.alias.is_some());
                    self.measure.directives += field.directives.len();
                    let name = field.name.node.as_str();
                    let returns = on.and_then(|parent| self.shapes.returns(parent, name));
                    let inner = self.selection(&field.selection_set.node, returns, depth + 1);
                    if matches!(name, "__schema" | "__type") {
                        // What it returns, counted against the schema (its depth, aliases and
                        // directives are counted above).
                        let type_name = match self.argument(field, "name") {
                            Some(ConstValue::String(name)) => Some(name),
                            _ => None,
                        };
                        let (shapes, doc) = (self.shapes, self.doc);
                        let values = self
                            .introspection
                            .get_or_insert_with(|| Counter::new(&shapes.introspected, doc))
                            .count(name, type_name.as_deref(), &field.selection_set.node);
                        cost = cost.saturating_add(values.map_or(u64::MAX, cost_of_values));
                        continue;
                    }
                    let weight = on.map_or(1, |parent| self.weight(parent, field));
                    let own = 1 + on.map_or(0, |parent| self.extra(parent, field));
                    own.saturating_add(weight.saturating_mul(inner))
                }
                Selection::InlineFragment(inline) => {
                    self.measure.directives += inline.node.directives.len();
                    let on = match &inline.node.type_condition {
                        Some(condition) => Some(condition.node.on.node.as_str()),
                        None => on,
                    };
                    self.selection(&inline.node.selection_set.node, on, depth)
                }
                Selection::FragmentSpread(spread) => {
                    self.measure.directives += spread.node.directives.len();
                    let Some(fragment) = self.fragment(&spread.node.fragment_name.node) else {
                        continue;
                    };
                    if fragment.depth > 0 {
                        let deepest = depth - 1 + fragment.depth;
                        self.measure.depth = self.measure.depth.max(deepest);
                    }
                    self.measure.aliases = self.measure.aliases.saturating_add(fragment.aliases);
                    self.measure.directives =
                        self.measure.directives.saturating_add(fragment.directives);
                    fragment.cost
                }
            };
            cost = cost.saturating_add(item_cost);
        }
        cost
    }

    /// The measure of a fragment, taken once per document.
    fn fragment(&mut self, name: &'d Name) -> Option<Measure> {
        if let Some(known) = self.measured.get(name.as_str()) {
            return Some(*known);
        }
        if self.fragments.contains(&name.as_str()) {
            return None;
        }
        let fragment = self.doc.fragments.get(name)?;
        let on = fragment.node.type_condition.node.on.node.as_str();
        let outer = std::mem::take(&mut self.measure);
        self.fragments.push(name.as_str());
        let cost = self.selection(&fragment.node.selection_set.node, Some(on), 1);
        self.fragments.pop();
        let mut own = std::mem::replace(&mut self.measure, outer);
        own.cost = cost;
        self.measured.insert(name.as_str(), own);
        Some(own)
    }

    /// An argument of `field`, as the executor will read it.
    fn argument(&self, field: &Field, name: &str) -> Option<ConstValue> {
        let (_, value) = field.arguments.iter().find(|(n, _)| n.node == name)?;
        value
            .node
            .clone()
            .into_const_with(|variable| {
                self.read_variables.set(true);
                Ok::<_, ()>(
                    self.variables
                        .get(&variable)
                        .cloned()
                        .unwrap_or(ConstValue::Null),
                )
            })
            .ok()
    }

    /// How many items `field` of `parent` can return.
    fn weight(&self, parent: &str, field: &Field) -> u64 {
        let name = field.name.node.as_str();
        let Some((_, _, weight)) = WEIGHTS.iter().find(|(p, f, _)| *p == parent && *f == name)
        else {
            return 1;
        };
        // A number that is no `Int` (past 2^31 - 1) weighs nothing here: the validation that
        // follows refuses it as what it is, not as a query too costly.
        let count = |n: &async_graphql::Number| {
            n.as_u64()
                .filter(|n| i32::try_from(*n).is_ok())
                .unwrap_or(1)
                .max(1)
        };
        let page_size = |value: Option<ConstValue>| match value {
            Some(ConstValue::Number(n)) => count(&n),
            _ => u64::from(DEFAULT_PAGE_SIZE),
        };
        // Its `pagination`'s page size, or `without` when it has none.
        let paged = |without: u64| match self.argument(field, "pagination") {
            Some(ConstValue::Object(p)) => page_size(p.get("pageSize").cloned()),
            _ => without,
        };
        match weight {
            Weight::AtMost(n) => *n as u64,
            Weight::InRow(n) => n.div_ceil(IN_ROW_SHARE) as u64,
            Weight::PageSize => page_size(self.argument(field, "pageSize")),
            Weight::Limit(default) => match self.argument(field, "limit") {
                Some(ConstValue::Number(n)) => count(&n),
                _ => u64::from(*default),
            },
            Weight::Paged => paged(u64::from(DEFAULT_PAGE_SIZE)),
            Weight::PagedOr(most) => paged(*most as u64),
        }
    }

    /// What `field` of `parent` costs beyond its 1: a search, what it can touch.
    fn extra(&self, parent: &str, field: &Field) -> u64 {
        if (parent, field.name.node.as_str()) != ("Query", "patients") {
            return 0;
        }
        match self.argument(field, "search") {
            Some(ConstValue::String(search)) => search_cost(&search),
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_graphql::parser::parse_query;

    #[test]
    fn expansions_are_counted_as_async_graphql_walks_them() {
        let count = |query: &str| expanded_selections(&parse_query(query).expect("parses"));
        assert_eq!(count("{ a b { c } }"), 5);
        assert_eq!(count("{ ...F ...F } fragment F on Query { a { b } }"), 11);
        // Each of 30 fragments spreads the next twice: each set and its two items, 2^30 times
        // over, for 5 * 2^30 - 1 looks from the operation.
        let mut doubling = String::from("{ ...F0 } ");
        for level in 0..30 {
            doubling.push_str(&format!(
                "fragment F{level} on Query {{ ...F{} ...F{} }} ",
                level + 1,
                level + 1
            ));
        }
        doubling.push_str("fragment F30 on Query { a }");
        assert_eq!(count(&doubling), 5 * (1u64 << 30) - 1);
        // In an operation not run, and through a fragment not defined, the same.
        let unrun = doubling.replace(
            "fragment F30 on Query { a }",
            "fragment F30 on Query { ...Nowhere }",
        );
        assert_eq!(
            count(&format!("query Run {{ a }} query Not {unrun}")),
            2 + 5 * (1u64 << 30) - 1
        );
        // A fragment that spreads itself is walked as deep as the check goes: once a level.
        assert_eq!(count("{ ...F } fragment F on Query { ...F }"), 67);
        // Twice a level, to the depth of 32, is 2^34 - 1.
        assert_eq!(
            count("{ ...F } fragment F on Query { ...F ...F }"),
            (1 << 34) - 1
        );
    }

    fn shapes() -> &'static Shapes {
        static SHAPES: std::sync::LazyLock<Shapes> =
            std::sync::LazyLock::new(|| Shapes::of_sdl(&crate::graphql::sdl()));
        &SHAPES
    }

    fn measure_of(query: &str, variables: serde_json::Value) -> Measure {
        noting(query, variables).0
    }

    /// The measure of the first operation of `query` with `variables`, and whether it read
    /// any variable.
    fn noting(query: &str, variables: serde_json::Value) -> (Measure, bool) {
        let doc = parse_query(query).expect("parses");
        let op = match &doc.operations {
            async_graphql::parser::types::DocumentOperations::Single(op) => op,
            async_graphql::parser::types::DocumentOperations::Multiple(ops) => {
                ops.values().next().expect("an operation")
            }
        };
        measure_noting(shapes(), &doc, op, &Variables::from_json(variables))
    }

    #[test]
    fn a_measure_says_whether_a_variable_weighed_in() {
        // Variables that weigh nothing (an id) leave it as every request would measure it.
        let query = "query($id: ID!) { patient(id: $id) { firstName labels { text } } \
                     patients(pagination: { pageSize: 40 }) { data { id } } }";
        let (alone, read) = noting(query, serde_json::json!({}));
        assert!(!read);
        assert_eq!(
            noting(query, serde_json::json!({ "id": "x" })),
            (alone, false)
        );
        // A page size, a limit or a search given by a variable, even inside an object, or
        // left to a variable's default: each request's own.
        for query in [
            "query($n: Int) { patients(pagination: { pageSize: $n }) { data { id } } }",
            "query($n: Int = 10) { patients(pagination: { pageSize: $n }) { data { id } } }",
            "query($p: Pagination) { patients(pagination: $p) { data { id } } }",
            "query($s: String) { patients(search: $s) { data { id } } }",
            "query($s: String) { ...F } fragment F on Query { patients(search: $s) { data { id } } }",
            "query($n: Int) { events(limit: $n) { id } }",
        ] {
            assert!(noting(query, serde_json::json!({})).1, "{query}");
        }
    }

    #[test]
    fn lists_weigh_their_page_size() {
        let m = measure_of("{ patients { data { id } } }", serde_json::json!({}));
        // patients(1) + 25 × (data(1) + id(1))
        assert_eq!(m.cost, 1 + 25 * 2);
        assert_eq!(m.depth, 3);
        let m = measure_of(
            "query($n: Int) { patients(pagination: { pageSize: $n }) { data { id labels { text } } } }",
            serde_json::json!({ "n": 100 }),
        );
        // patients(1) + 100 × (data(1) + id(1) + labels(1 + 20 × text(1)))
        assert_eq!(m.cost, 1 + 100 * (1 + 1 + 21));
    }

    #[test]
    fn variables_weigh_what_the_executor_will_use() {
        let query =
            "query($n: Int = 100) { bookings(pagination: { pageSize: $n }) { data { id } } }";
        assert_eq!(measure_of(query, serde_json::json!({})).cost, 1 + 100 * 2);
        assert_eq!(
            measure_of(query, serde_json::json!({ "n": 10 })).cost,
            1 + 10 * 2
        );
        let page =
            "query($p: Pagination = { pageSize: 90 }) { labels(pagination: $p) { data { id } } }";
        assert_eq!(measure_of(page, serde_json::json!({})).cost, 1 + 90 * 2);
    }

    #[test]
    fn lists_weigh_the_most_they_can_return() {
        let m = measure_of(
            "{ patient(id: \"1\") { bookings(start: \"2026-01-01\", end: \"2026-01-02\") { id } } }",
            serde_json::json!({}),
        );
        assert_eq!(m.cost, 1 + 1 + MAX_PATIENT_BOOKINGS as u64);
        // Given a page, the patient's bookings weigh its size.
        let m = measure_of(
            "query($p: Pagination) { patient(id: \"1\") { bookings(start: \"2026-01-01\", end: \"2026-01-02\", pagination: $p) { id } } }",
            serde_json::json!({ "p": { "pageSize": 10 } }),
        );
        assert_eq!(m.cost, 1 + 1 + 10);
        // README's page of 100 patients, each with a page of 10 of their bookings.
        let m = measure_of(
            "{ patients(pagination: { pageSize: 100 }) { data { id bookings(start: \"2026-01-01\", end: \"2026-01-02\", pagination: { pageSize: 10 }) { id } } } }",
            serde_json::json!({}),
        );
        assert_eq!(m.cost, 1_301);
        // Types are followed through fragments: the booking's patient's labels weigh 20.
        let m = measure_of(
            "{ booking(id: \"1\") { ...B } } fragment B on Booking { patient { labels { id } } }",
            serde_json::json!({}),
        );
        assert_eq!(m.cost, 1 + 1 + 1 + MAX_LABELS_PER_PATIENT as u64);
    }

    #[test]
    fn metadata_weighs_a_fifth_of_its_entries() {
        // bookings(1) + 100 × (data(1) + id(1) + metadata(1 + 50 / 5 × (key(1) + value(1))))
        let m = measure_of(
            "{ bookings(pagination: { pageSize: 100 }) { data { id metadata { key value } } } }",
            serde_json::json!({}),
        );
        assert_eq!(m.cost, 1 + 100 * (1 + 1 + (1 + 10 * 2)));
        assert_eq!(m.cost, 2_301);
        // The practice's 200 appointment types with their 50 entries each fit the default.
        let m = measure_of(
            "{ practice { appointmentTypes { id metadata { key value } } } }",
            serde_json::json!({}),
        );
        assert_eq!(m.cost, 4_402);
        assert!(Limits::default().check(&m).is_ok());
    }

    #[test]
    fn searches_cost_what_they_can_touch() {
        let search = |s: &str| {
            measure_of(
                "query($s: String) { patients(search: $s, pagination: { pageSize: 1 }) { data { id } } }",
                serde_json::json!({ "s": s }),
            )
            .cost
        };
        assert_eq!(search(""), 1 + 2);
        assert_eq!(search("ab"), 1 + 5_000 + 2);
        assert_eq!(search("abc"), 1 + 100 + 2);
    }

    /// Every list of objects in the schema weighs what it can return.
    #[test]
    fn every_list_has_a_weight() {
        let missing: Vec<_> = shapes()
            .lists
            .iter()
            .filter(|(parent, field)| !WEIGHTS.iter().any(|(p, f, _)| p == parent && f == field))
            .collect();
        assert!(missing.is_empty(), "lists without a weight: {missing:?}");
        assert!(!shapes().lists.is_empty());
    }

    #[test]
    fn counts_aliases_directives_and_fragments_once() {
        let m = measure_of(
            "{ a: currentPractice { id } b: currentPractice { id @skip(if: true) } ...F } \
             fragment F on Query { c: currentPractice { name } ...F }",
            serde_json::json!({}),
        );
        assert_eq!(m.aliases, 3);
        assert_eq!(m.directives, 1);
        assert_eq!(m.cost, 6);
    }

    #[test]
    fn counts_bracket_nesting_outside_strings_and_comments() {
        assert_eq!(bracket_nesting("{ a(b: [1]) { c } }"), 3);
        assert_eq!(bracket_nesting("{ a(b: \"{{{{\") # {{{{\n }"), 2);
        assert_eq!(bracket_nesting("{ a(b: \"\"\" {{ \\\"\"\" {{ \"\"\") }"), 2);
        assert_eq!(bracket_nesting("{ a(b: \"x\\\"{{\") }"), 2);
        let deep = format!("{}{}", "{ ... on Query ".repeat(5000), "}".repeat(5000));
        assert_eq!(bracket_nesting(&deep), 5000);
    }

    #[test]
    fn fragments_spread_many_times_are_measured_once() {
        // P0 spreads P1 twice, P1 spreads P2 twice, ...: 2^40 expansions if walked naively.
        let mut doc = String::from("{ currentPractice { ...P0 } }");
        for i in 0..40 {
            doc += &format!(
                " fragment P{i} on Practice {{ id ...P{n} ...P{n} }}",
                n = i + 1
            );
        }
        doc += " fragment P40 on Practice { name }";
        let started = std::time::Instant::now();
        let m = measure_of(&doc, serde_json::json!({}));
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        assert!(m.cost > 1_000_000_000, "{m:?}");
        assert_eq!(m.depth, 2);
    }

    #[test]
    fn names_the_limit_broken() {
        let limits = Limits::default();
        let deep = Measure {
            depth: 19,
            ..Default::default()
        };
        let err = limits.check(&deep).expect_err("too deep");
        assert_eq!(err.limit, "depth");
        assert_eq!(
            err.message(),
            "The query is nested 19 levels deep, more than the limit of 15"
        );
        assert!(limits.check(&Measure::default()).is_ok());
    }
}

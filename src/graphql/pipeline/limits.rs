//! Query limits: how deep, how costly, how many aliases and directives, how long a document
//! may be. Measured on the parsed document before it runs, so that a query bomb costs the
//! server a parse and nothing more; a rejection names the limit and the query's value.
//!
//! Cost: every field costs 1, and a field that returns a list multiplies the cost of what is
//! selected under it by how many items it can return: its `pageSize` for paged lists
//! (default 25), a fixed weight for the others (see [`list_weight`]).

use std::collections::HashMap;

use async_graphql::Positioned;
use async_graphql::Value as ConstValue;
use async_graphql::parser::types::{
    ExecutableDocument, Field, OperationDefinition, Selection, SelectionSet,
};

use crate::graphql::pagination::DEFAULT_PAGE_SIZE;

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
    /// `depth`, `cost`, `aliases`, `directives` or `documentBytes`.
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

/// How many items a list field can return, for the cost of what is selected under it.
/// Paged lists return their page size; the others their usual most. `nested` is true below
/// the root (where `labels` and `bookings` are a patient's).
fn list_weight(field: &Field, nested: bool, variables: &async_graphql::Variables) -> u64 {
    let argument = |arg: &str| {
        field
            .arguments
            .iter()
            .find(|(n, _)| n.node == arg)
            .and_then(|(_, v)| {
                v.node
                    .clone()
                    .into_const_with(|name| {
                        Ok::<_, ()>(variables.get(&name).cloned().unwrap_or(ConstValue::Null))
                    })
                    .ok()
            })
    };
    let page_size = |value: Option<ConstValue>| {
        match value {
            Some(ConstValue::Number(n)) => n.as_u64(),
            _ => None,
        }
        .unwrap_or(u64::from(DEFAULT_PAGE_SIZE))
        .max(1)
    };
    match (field.name.node.as_str(), nested) {
        // User.bookings(start, end, page, pageSize).
        ("bookings", true) if field.arguments.iter().any(|(n, _)| n.node == "start") => {
            if field.arguments.iter().any(|(n, _)| n.node == "pageSize") {
                page_size(argument("pageSize"))
            } else {
                // Patient.bookings returns up to 500; a patient has a few dozen at most.
                50
            }
        }
        ("labels", true) | ("phones", _) => 5,
        ("patients" | "labels" | "bookings" | "users" | "auditEvents", _) => {
            match argument("pagination") {
                Some(ConstValue::Object(p)) => page_size(p.get("pageSize").cloned()),
                _ => u64::from(DEFAULT_PAGE_SIZE),
            }
        }
        ("locations" | "appointmentTypes" | "apiTokens", _) => 20,
        _ => 1,
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

/// Measures the operation `op` of `doc`.
pub fn measure(
    doc: &ExecutableDocument,
    op: &Positioned<OperationDefinition>,
    variables: &async_graphql::Variables,
) -> Measure {
    let mut walker = Walker {
        doc,
        variables,
        measure: Measure::default(),
        fragments: Vec::new(),
        measured: HashMap::new(),
    };
    walker.measure.directives += op.node.directives.len();
    walker.measure.cost = walker.selection(&op.node.selection_set.node, 1);
    walker.measure
}

struct Walker<'d> {
    doc: &'d ExecutableDocument,
    variables: &'d async_graphql::Variables,
    measure: Measure,
    /// Fragments being expanded, against a fragment that spreads itself (the document is not
    /// validated yet).
    fragments: Vec<&'d str>,
    /// Each fragment's measure, taken once: a fragment spread twice in a fragment spread
    /// twice ... would otherwise be walked an exponential number of times. Keyed by whether
    /// it is spread at the root, where lists weigh differently.
    measured: HashMap<(&'d str, bool), Measure>,
}

impl<'d> Walker<'d> {
    /// The cost of a selection at `depth`, counting aliases and directives on the way.
    fn selection(&mut self, set: &'d SelectionSet, depth: usize) -> u64 {
        let mut cost: u64 = 0;
        for item in &set.items {
            let item_cost = match &item.node {
                Selection::Field(field) => {
                    let field = &field.node;
                    self.measure.depth = self.measure.depth.max(depth);
                    self.measure.aliases += usize::from(field.alias.is_some());
                    self.measure.directives += field.directives.len();
                    let inner = self.selection(&field.selection_set.node, depth + 1);
                    let weight = list_weight(field, depth > 1, self.variables);
                    1u64.saturating_add(weight.saturating_mul(inner))
                }
                Selection::InlineFragment(inline) => {
                    self.measure.directives += inline.node.directives.len();
                    self.selection(&inline.node.selection_set.node, depth)
                }
                Selection::FragmentSpread(spread) => {
                    self.measure.directives += spread.node.directives.len();
                    let Some(fragment) = self.fragment(&spread.node.fragment_name.node, depth)
                    else {
                        continue;
                    };
                    // The fragment's own measure was taken from depth 1 (root) or 2.
                    let base = if depth > 1 { 2 } else { 1 };
                    if fragment.depth > 0 {
                        let deepest = depth + fragment.depth - base;
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

    /// The measure of a fragment spread at `depth`, taken once per document.
    fn fragment(&mut self, name: &'d async_graphql::Name, depth: usize) -> Option<Measure> {
        let key = (name.as_str(), depth > 1);
        if let Some(known) = self.measured.get(&key) {
            return Some(*known);
        }
        if self.fragments.contains(&key.0) {
            return None;
        }
        let fragment = self.doc.fragments.get(name)?;
        let outer = std::mem::take(&mut self.measure);
        self.fragments.push(key.0);
        let cost = self.selection(&fragment.node.selection_set.node, if key.1 { 2 } else { 1 });
        self.fragments.pop();
        let mut own = std::mem::replace(&mut self.measure, outer);
        own.cost = cost;
        self.measured.insert(key, own);
        Some(own)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_graphql::parser::parse_query;

    fn measure_of(query: &str, variables: serde_json::Value) -> Measure {
        let doc = parse_query(query).expect("parses");
        let op = match &doc.operations {
            async_graphql::parser::types::DocumentOperations::Single(op) => op,
            async_graphql::parser::types::DocumentOperations::Multiple(ops) => {
                ops.values().next().expect("an operation")
            }
        };
        measure(&doc, op, &async_graphql::Variables::from_json(variables))
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
        // patients(1) + 100 × (data(1) + id(1) + labels(1 + 5 × text(1)))
        assert_eq!(m.cost, 1 + 100 * (1 + 1 + 6));
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

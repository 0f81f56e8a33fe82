//! Query limits: how deep, how costly, how many aliases and directives, how long a document
//! may be. Measured on the parsed document before it runs, so that a query bomb costs the
//! server a parse and nothing more; a rejection names the limit and the query's value.
//!
//! Cost: every field costs 1, and a field that returns a list multiplies the cost of what is
//! selected under it by how many items it can return: its `pageSize` for paged lists
//! (default 25), a fixed weight for the others (see [`list_weight`]).

use async_graphql::Value as ConstValue;
use async_graphql::parser::types::{
    DocumentOperations, ExecutableDocument, Field, Selection, SelectionSet,
};

use super::pagination::DEFAULT_PAGE_SIZE;

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
    /// Checks a measured document against the limits.
    pub fn check(&self, document_bytes: usize, m: &Measure) -> Result<(), Exceeded> {
        let checks = [
            (
                "documentBytes",
                document_bytes as u64,
                self.max_document_bytes as u64,
            ),
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

/// Measures the operation `operation` of `doc` (the only one when None).
pub fn measure(
    doc: &ExecutableDocument,
    operation: Option<&str>,
    variables: &async_graphql::Variables,
) -> Measure {
    let op = match (&doc.operations, operation) {
        (DocumentOperations::Single(op), _) => Some(op),
        (DocumentOperations::Multiple(ops), Some(name)) => ops.get(name),
        (DocumentOperations::Multiple(ops), None) => ops.values().next(),
    };
    let Some(op) = op else {
        return Measure::default();
    };
    let mut walker = Walker {
        doc,
        variables,
        measure: Measure::default(),
        fragments: Vec::new(),
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
                    let name = spread.node.fragment_name.node.as_str();
                    if self.fragments.contains(&name) {
                        continue;
                    }
                    let Some(fragment) = self.doc.fragments.get(&spread.node.fragment_name.node)
                    else {
                        continue;
                    };
                    self.fragments.push(name);
                    let inner = self.selection(&fragment.node.selection_set.node, depth);
                    self.fragments.pop();
                    inner
                }
            };
            cost = cost.saturating_add(item_cost);
        }
        cost
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_graphql::parser::parse_query;

    fn measure_of(query: &str, variables: serde_json::Value) -> Measure {
        let doc = parse_query(query).expect("parses");
        measure(&doc, None, &async_graphql::Variables::from_json(variables))
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
    fn names_the_limit_broken() {
        let limits = Limits::default();
        let deep = Measure {
            depth: 19,
            ..Default::default()
        };
        let err = limits.check(10, &deep).expect_err("too deep");
        assert_eq!(err.limit, "depth");
        assert_eq!(
            err.message(),
            "The query is nested 19 levels deep, more than the limit of 15"
        );
        assert!(limits.check(10, &Measure::default()).is_ok());
        assert_eq!(
            limits
                .check(40_000, &Measure::default())
                .expect_err("long")
                .limit,
            "documentBytes"
        );
    }
}

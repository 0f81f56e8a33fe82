//! Documents: built from the schema's real fields, wild or strict, then edited character
//! by character; and the bombs that find the limits.

use super::*;

/// Builds the strategies; memoises the ones used in many places.
pub(crate) struct Gen {
    /// Wild: any literal anywhere, broken items, fragments, variables. Otherwise (strict)
    /// documents that mostly validate, to reach the resolvers and the store.
    pub(crate) wild: bool,
    /// Ids of records the run made, and odd ones.
    pub(crate) real_ids: Vec<String>,
    pub(crate) odd_ids: Vec<String>,
    pub(crate) emails: Vec<String>,
    pub(crate) texts: Vec<String>,
    pub(crate) target_patient: String,
    pub(crate) values: RefCell<HashMap<Kind, S>>,
    pub(crate) json_values: RefCell<HashMap<Kind, BoxedStrategy<Value>>>,
    pub(crate) selections: RefCell<HashMap<(&'static str, u32), S>>,
    pub(crate) any_literal: S,
}

impl Gen {
    pub(crate) fn new(wild: bool, seeded: &Seeded) -> Gen {
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
    pub(crate) fn text(&self) -> S {
        text_strategy(&self.texts, self.wild)
    }

    pub(crate) fn dates(&self) -> &'static [&'static str] {
        if self.wild {
            DATES
        } else {
            &DATES[..GOOD_DATES]
        }
    }

    pub(crate) fn datetimes(&self) -> &'static [&'static str] {
        if self.wild {
            DATETIMES
        } else {
            &DATETIMES[..GOOD_DATETIMES]
        }
    }

    /// How likely an argument or input field is given.
    pub(crate) fn presence(&self, name: &str) -> f64 {
        match (self.wild, REQUIRED.contains(&name)) {
            (true, _) => 0.8,
            (false, true) => 0.97,
            (false, false) => 0.5,
        }
    }

    /// A literal for an argument of this kind: mostly well typed, sometimes anything, or a
    /// variable.
    pub(crate) fn value(&self, kind: Kind) -> S {
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

    pub(crate) fn good_value(&self, kind: Kind) -> S {
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
    pub(crate) fn json_value(&self, kind: Kind) -> BoxedStrategy<Value> {
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
    pub(crate) fn templated(&self) -> BoxedStrategy<(String, Value)> {
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
    pub(crate) fn input_object(&self, fields: &'static [Arg]) -> S {
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
    pub(crate) fn arguments(&self, args: &'static [Arg]) -> S {
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
    pub(crate) fn directive(&self) -> S {
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
    pub(crate) fn selection(&self, ty: &'static str, depth: u32) -> S {
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
    pub(crate) fn document(&self) -> S {
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
    pub(crate) fn mutated_document(&self) -> S {
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
    pub(crate) fn bomb(&self) -> S {
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
pub(crate) fn text_strategy(texts: &[String], nul: bool) -> S {
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
pub(crate) fn any_literal(texts: &[String]) -> S {
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
pub(crate) fn list(item: S) -> S {
    prop::collection::vec(item, 0..4)
        .prop_map(|items| format!("[{}]", items.join(", ")))
        .boxed()
}

/// What gets inserted into a document.
pub(crate) fn insertion() -> S {
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
pub(crate) enum Edit {
    Delete(Index, usize),
    Duplicate(Index, usize),
    Insert(Index, String),
    Truncate(Index),
    Swap(Index, Index),
}

impl Edit {
    pub(crate) fn apply(self, chars: &mut Vec<char>) {
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

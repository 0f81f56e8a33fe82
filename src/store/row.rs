//! A record's columns as one list. The wide tables (patients, bookings) name each column once,
//! with its value, in a `columns()` method of their record; the INSERT, the UPDATE, the
//! SELECT list and the binding all follow that list, so a new column is one line there and no
//! `$N` is ever counted by hand. Statements built at run time with other parameters use
//! [`Args`], which numbers them the same way.

use sqlx::Any;
use sqlx::any::AnyArguments;

/// A value bound to a statement.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Value {
    Text(Option<String>),
    Int(Option<i64>),
    Float(Option<f64>),
}

impl From<&str> for Value {
    fn from(text: &str) -> Self {
        Value::Text(Some(text.to_string()))
    }
}

impl From<&String> for Value {
    fn from(text: &String) -> Self {
        Value::Text(Some(text.clone()))
    }
}

impl From<&Option<String>> for Value {
    fn from(text: &Option<String>) -> Self {
        Value::Text(text.clone())
    }
}

impl From<i64> for Value {
    fn from(n: i64) -> Self {
        Value::Int(Some(n))
    }
}

impl From<Option<i64>> for Value {
    fn from(n: Option<i64>) -> Self {
        Value::Int(n)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Int(Some(i64::from(b)))
    }
}

impl From<Option<bool>> for Value {
    fn from(b: Option<bool>) -> Self {
        Value::Int(b.map(i64::from))
    }
}

impl From<Option<f64>> for Value {
    fn from(x: Option<f64>) -> Self {
        Value::Float(x)
    }
}

/// The bindings of a statement, in order.
pub(super) trait Bindable<'q>: Sized {
    fn bind_value(self, value: Value) -> Self;
}

impl<'q> Bindable<'q> for sqlx::query::Query<'q, Any, AnyArguments> {
    fn bind_value(self, value: Value) -> Self {
        match value {
            Value::Text(v) => self.bind(v),
            Value::Int(v) => self.bind(v),
            Value::Float(v) => self.bind(v),
        }
    }
}

impl<'q, O> Bindable<'q> for sqlx::query::QueryAs<'q, Any, O, AnyArguments> {
    fn bind_value(self, value: Value) -> Self {
        match value {
            Value::Text(v) => self.bind(v),
            Value::Int(v) => self.bind(v),
            Value::Float(v) => self.bind(v),
        }
    }
}

/// The columns of one row, by name, with their values; `practice_id` is not among them: it is
/// always `$1`.
#[derive(Clone, Debug, Default)]
pub(super) struct Columns(Vec<(&'static str, Value)>);

impl Columns {
    /// Adds a column.
    pub fn with(mut self, name: &'static str, value: impl Into<Value>) -> Self {
        self.0.push((name, value.into()));
        self
    }

    /// The columns' names, comma-separated: a SELECT list.
    pub fn names(&self) -> String {
        let names: Vec<&str> = self.0.iter().map(|(name, _)| *name).collect();
        names.join(", ")
    }

    /// `INSERT INTO table (practice_id, a, b, ...) VALUES ($1, $2, $3, ...), (...)` for
    /// `rows` rows of these columns; bind with [`Columns::bind`], row after row, after the
    /// practice.
    pub fn insert_sql(&self, table: &str, rows: usize) -> String {
        let width = self.0.len();
        let values: Vec<String> = (0..rows)
            .map(|row| {
                let first = 2 + row * width;
                let row: Vec<String> = (first..first + width).map(|n| format!("${n}")).collect();
                format!("($1, {})", row.join(", "))
            })
            .collect();
        format!(
            "INSERT INTO {table} (practice_id, {}) VALUES {}",
            self.names(),
            values.join(", ")
        )
    }

    /// `UPDATE table SET a = $2, ... WHERE practice_id = $1 AND id = $N`: every column but
    /// `id` is written; `id` picks the row. Bind with [`Columns::bind`] after the practice.
    pub fn update_sql(&self, table: &str) -> String {
        let mut sets = Vec::with_capacity(self.0.len());
        let mut id = None;
        for (n, (name, _)) in self.0.iter().enumerate() {
            if *name == "id" {
                id = Some(n + 2);
            } else {
                sets.push(format!("{name} = ${}", n + 2));
            }
        }
        let id = id.map_or_else(|| "NULL".into(), |n| format!("${n}"));
        format!(
            "UPDATE {table} SET {} WHERE practice_id = $1 AND id = {id}",
            sets.join(", ")
        )
    }

    /// Binds the values, in the order of the list.
    pub fn bind<'q, Q: Bindable<'q>>(self, query: Q) -> Q {
        self.0
            .into_iter()
            .fold(query, |query, (_, value)| query.bind_value(value))
    }
}

/// Parameters of SQL built at run time: each value gets the next number, from `$2` (`$1` is
/// always the practice).
#[derive(Default)]
pub(super) struct Args(Vec<Value>);

impl Args {
    /// Adds a value; returns its placeholder.
    pub fn add(&mut self, value: impl Into<Value>) -> String {
        self.0.push(value.into());
        format!("${}", self.0.len() + 1)
    }

    /// Binds the values, in order, after `$1`.
    pub fn bind<'q, Q: Bindable<'q>>(self, query: Q) -> Q {
        self.0.into_iter().fold(query, Q::bind_value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn three() -> Columns {
        Columns::default()
            .with("id", "x")
            .with("name", &Some("n".to_string()))
            .with("at", 5)
    }

    #[test]
    fn statements_follow_the_list() {
        let columns = three();
        assert_eq!(columns.names(), "id, name, at");
        assert_eq!(
            columns.insert_sql("t", 2),
            "INSERT INTO t (practice_id, id, name, at) VALUES ($1, $2, $3, $4), ($1, $5, $6, $7)"
        );
        assert_eq!(
            columns.update_sql("t"),
            "UPDATE t SET name = $3, at = $4 WHERE practice_id = $1 AND id = $2"
        );
    }

    #[test]
    fn arguments_are_numbered_after_the_practice() {
        let mut args = Args::default();
        assert_eq!(args.add("a"), "$2");
        assert_eq!(args.add(7), "$3");
    }
}

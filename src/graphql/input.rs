//! Free-text input as GraphQL arguments: the rules of [`crate::text`], refusing with
//! BAD_USER_INPUT.

use async_graphql::Result;

use super::error::bad_input;
pub use crate::text::{MAX_LINE_CHARS, MAX_TEXT_CHARS};

/// Trims `value`; blank becomes None; one line. See [`crate::text::optional`].
pub fn optional_text(field: &str, value: Option<String>, max: usize) -> Result<Option<String>> {
    match value {
        Some(value) => crate::text::optional(field, &value, max).map_err(bad_input),
        None => Ok(None),
    }
}

/// Like [`optional_text`], but blank is refused.
pub fn required_text(field: &str, value: String, max: usize) -> Result<String> {
    crate::text::required(field, &value, max).map_err(bad_input)
}

/// Like [`optional_text`], for text of several lines (notes, comments, a street address).
/// See [`crate::text::optional_lines`].
pub fn optional_lines(field: &str, value: Option<String>, max: usize) -> Result<Option<String>> {
    match value {
        Some(value) => crate::text::optional_lines(field, &value, max).map_err(bad_input),
        None => Ok(None),
    }
}

/// Like [`optional_lines`], but blank is refused.
pub fn required_lines(field: &str, value: String, max: usize) -> Result<String> {
    crate::text::required_lines(field, &value, max).map_err(bad_input)
}

/// Checks an email address's shape and lower-cases it. See [`crate::text::email`].
pub fn email(field: &str, value: Option<String>) -> Result<Option<String>> {
    match value {
        Some(value) => crate::text::email(field, &value).map_err(bad_input),
        None => Ok(None),
    }
}

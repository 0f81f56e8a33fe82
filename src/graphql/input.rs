//! Cleaning of free-text input: one place that trims, bounds and names the offending field.

use async_graphql::{MaybeUndefined, Result};

use super::error::bad_input;

/// Longest single-line text field (names, titles, addresses).
pub const MAX_LINE_CHARS: usize = 200;
/// Longest free-text field (comments).
pub const MAX_TEXT_CHARS: usize = 5000;

/// Trims `value`; blank becomes None. Refuses text over `max` characters or with control
/// characters other than line breaks and tabs.
pub fn optional_text(field: &str, value: Option<String>, max: usize) -> Result<Option<String>> {
    let Some(value) = value else { return Ok(None) };
    let value = value.trim();
    let chars = value.chars().count();
    if chars > max {
        return Err(bad_input(format!(
            "{field} must have at most {max} characters, got {chars}"
        )));
    }
    if value
        .chars()
        .any(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t'))
    {
        return Err(bad_input(format!(
            "{field} must not contain control characters"
        )));
    }
    Ok((!value.is_empty()).then(|| value.to_string()))
}

/// Like [`optional_text`], but blank is refused.
pub fn required_text(field: &str, value: String, max: usize) -> Result<String> {
    optional_text(field, Some(value), max)?
        .ok_or_else(|| bad_input(format!("{field} must not be empty")))
}

/// Checks an email address's shape (something@domain, no spaces) and lower-cases it.
pub fn email(field: &str, value: Option<String>) -> Result<Option<String>> {
    let Some(value) = optional_text(field, value, 254)? else {
        return Ok(None);
    };
    let valid = match value.split_once('@') {
        Some((local, domain)) => {
            !local.is_empty()
                && !domain.is_empty()
                && !domain.contains('@')
                && !domain.starts_with('.')
                && !domain.ends_with('.')
                && !value.chars().any(char::is_whitespace)
        }
        None => false,
    };
    if !valid {
        return Err(bad_input(format!(
            "{field} must be an email address such as name@example.com, got {value:?}"
        )));
    }
    Ok(Some(value.to_lowercase()))
}

/// An update's field: omitted leaves it, null clears it, a value sets it.
pub fn patch<T>(
    current: &mut Option<T>,
    update: MaybeUndefined<T>,
    clean: impl FnOnce(Option<T>) -> Result<Option<T>>,
) -> Result<()> {
    match update {
        MaybeUndefined::Undefined => {}
        MaybeUndefined::Null => *current = None,
        MaybeUndefined::Value(v) => *current = clean(Some(v))?,
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_and_bounds_text() {
        assert_eq!(
            optional_text("f", Some("  a ".into()), 5).expect("ok"),
            Some("a".into())
        );
        assert_eq!(optional_text("f", Some("   ".into()), 5).expect("ok"), None);
        assert!(optional_text("f", Some("abcdef".into()), 5).is_err());
        assert!(optional_text("f", Some("a\u{0}b".into()), 5).is_err());
        assert!(required_text("f", " ".into(), 5).is_err());
    }

    #[test]
    fn checks_email_shape() {
        assert_eq!(
            email("e", Some("Jo@Example.com".into())).expect("ok"),
            Some("jo@example.com".into())
        );
        for bad in ["jo", "@x", "jo@", "a b@x.com", "a@b@c", "a@.com"] {
            assert!(email("e", Some(bad.into())).is_err(), "{bad}");
        }
    }
}

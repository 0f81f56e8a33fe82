//! The rules for text that people type: names, notes, emails. One place, used by the API and
//! by the command line alike; each rule returns a sentence that names the offending field.

/// Longest single-line text field (names, titles, addresses).
pub const MAX_LINE_CHARS: usize = 200;
/// Longest free-text field (comments).
pub const MAX_TEXT_CHARS: usize = 5000;

/// Trims `value`; blank becomes None. Refuses text over `max` characters or with control
/// characters, line breaks and tabs included: a name, a title, a code or a phone number is one
/// line. Text of several lines (notes, comments, a street address) is [`optional_lines`].
pub fn optional(field: &str, value: &str, max: usize) -> Result<Option<String>, String> {
    checked(field, value, max, false)
}

/// Like [`optional`], but blank is refused.
pub fn required(field: &str, value: &str, max: usize) -> Result<String, String> {
    optional(field, value, max)?.ok_or_else(|| format!("{field} must not be empty"))
}

/// Like [`optional`], for text of several lines: line breaks and tabs are kept, other control
/// characters refused.
pub fn optional_lines(field: &str, value: &str, max: usize) -> Result<Option<String>, String> {
    checked(field, value, max, true)
}

/// Like [`optional_lines`], but blank is refused.
pub fn required_lines(field: &str, value: &str, max: usize) -> Result<String, String> {
    optional_lines(field, value, max)?.ok_or_else(|| format!("{field} must not be empty"))
}

fn checked(field: &str, value: &str, max: usize, lines: bool) -> Result<Option<String>, String> {
    let value = value.trim();
    let chars = value.chars().count();
    if chars > max {
        return Err(format!(
            "{field} must have at most {max} characters, got {chars}"
        ));
    }
    // Unicode's line and paragraph separators break a line too, though they are not control
    // characters.
    let line_break_or_tab = |c: char| matches!(c, '\n' | '\r' | '\t' | '\u{2028}' | '\u{2029}');
    if let Some(c) = value
        .chars()
        .find(|&c| (c.is_control() || line_break_or_tab(c)) && !(lines && line_break_or_tab(c)))
    {
        return Err(if line_break_or_tab(c) {
            format!("{field} is one line: it must not contain line breaks or tabs")
        } else {
            format!("{field} must not contain control characters")
        });
    }
    Ok((!value.is_empty()).then(|| value.to_string()))
}

/// Checks an email address's shape (something@domain, no spaces) and lower-cases it.
pub fn email(field: &str, value: &str) -> Result<Option<String>, String> {
    let Some(value) = optional(field, value, 254)? else {
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
        return Err(format!(
            "{field} must be an email address such as name@example.com, got {value:?}"
        ));
    }
    Ok(Some(value.to_lowercase()))
}

/// Checks a metadata entry (of a booking, a product, a staff user) against the rules of its
/// input: a key, of one line without control characters; a value, which may hold lines and
/// tabs (a note, a piece of JSON) and no other control character. Its lengths, past which a
/// change is refused rather than mistaken, are the practice's rule
/// (`domain::metadata_entry_refusal`).
pub fn metadata_entry(key: &str, value: Option<&str>) -> Result<(), String> {
    if key.trim().is_empty() {
        return Err("key must not be empty or blank".into());
    }
    if key.chars().any(char::is_control) {
        return Err("key must not contain control characters".into());
    }
    if value
        .unwrap_or("")
        .chars()
        .any(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t'))
    {
        return Err(
            "value must not contain control characters other than line breaks and tabs".into(),
        );
    }
    Ok(())
}

/// Checks a list of metadata entries against the rules of its input: each as
/// [`metadata_entry`] says, no key twice. How many it holds, and how long each is, are the
/// practice's rule (`domain::metadata_list_refusal`).
pub fn metadata_list(field: &str, pairs: &[(String, String)]) -> Result<(), String> {
    let mut seen = std::collections::HashSet::new();
    for (key, value) in pairs {
        metadata_entry(key, Some(value)).map_err(|e| format!("{field}: {e}"))?;
        if !seen.insert(key.as_str()) {
            return Err(format!("{field} names the key {key:?} twice"));
        }
    }
    Ok(())
}

/// A list of ids of at most `max`, each named once and of at most [`MAX_ID_CHARS`]
/// characters: the list without repeats, in order. A longer id is not repeated back.
///
/// [`MAX_ID_CHARS`]: crate::domain::limits::MAX_ID_CHARS
pub fn id_list(field: &str, ids: &[String], max: usize) -> Result<Vec<String>, String> {
    use crate::domain::limits::MAX_ID_CHARS;
    if ids.len() > max {
        return Err(format!(
            "{field} holds at most {max} ids, got {}",
            ids.len()
        ));
    }
    if let Some(at) = ids.iter().position(|id| id.chars().count() > MAX_ID_CHARS) {
        return Err(format!(
            "{field}[{at}] is not an id: ids have at most {MAX_ID_CHARS} characters"
        ));
    }
    let mut seen = std::collections::HashSet::new();
    Ok(ids
        .iter()
        .filter(|id| seen.insert(id.as_str()))
        .cloned()
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_and_bounds_text() {
        assert_eq!(optional("f", "  a ", 5), Ok(Some("a".into())));
        assert_eq!(optional("f", "   ", 5), Ok(None));
        assert!(optional("f", "abcdef", 5).is_err());
        assert!(optional("f", "a\u{0}b", 5).is_err());
        assert!(required("f", " ", 5).is_err());
    }

    #[test]
    fn one_line_refuses_line_breaks_and_tabs_that_several_lines_keep() {
        for inner in ["a\nb", "a\r\nb", "a\tb", "a\u{2028}b", "a\u{2029}b"] {
            assert_eq!(
                optional("f", inner, 10),
                Err("f is one line: it must not contain line breaks or tabs".into()),
                "{inner:?}"
            );
            assert_eq!(optional_lines("f", inner, 10), Ok(Some(inner.into())));
        }
        assert_eq!(optional("f", " a\n", 10), Ok(Some("a".into())));
        assert!(optional_lines("f", "a\u{7}b", 10).is_err());
        assert!(required_lines("f", "\n\t", 10).is_err());
    }

    #[test]
    fn checks_email_shape() {
        assert_eq!(
            email("e", "Jo@Example.com"),
            Ok(Some("jo@example.com".into()))
        );
        for bad in ["jo", "@x", "jo@", "a b@x.com", "a@b@c", "a@.com"] {
            assert!(email("e", bad).is_err(), "{bad}");
        }
    }
}

//! Staff passwords, hashed with Argon2id (OWASP's parameters: 19 MiB, 2 passes, 1 lane).
//!
//! Hashing is slow on purpose; callers on the async runtime run these functions on the
//! blocking pool (`tokio::task::spawn_blocking`) so that a sign-in never stalls other requests.

use std::sync::OnceLock;

use argon2::Argon2;
use argon2::password_hash::{PasswordHasher, PasswordVerifier};

/// Shortest password accepted for a staff user.
pub const MIN_PASSWORD_CHARS: usize = 8;
/// Longest password accepted: Argon2 takes any length, but a megabyte "password" is an attack.
pub const MAX_PASSWORD_CHARS: usize = 256;

/// Checks a new password's length; returns a sentence saying what is wrong.
pub fn check_new_password(password: &str) -> Result<(), String> {
    let chars = password.chars().count();
    if chars < MIN_PASSWORD_CHARS {
        return Err(format!(
            "the password must have at least {MIN_PASSWORD_CHARS} characters, it has {chars}"
        ));
    }
    if chars > MAX_PASSWORD_CHARS {
        return Err(format!(
            "the password must have at most {MAX_PASSWORD_CHARS} characters, it has {chars}"
        ));
    }
    Ok(())
}

/// Hashes a password into a PHC string (`$argon2id$v=19$...`) with a fresh random salt.
pub fn hash_password(password: &str) -> Result<String, String> {
    Argon2::default()
        .hash_password(password.as_bytes())
        .map(|hash| hash.to_string())
        .map_err(|e| format!("could not hash the password: {e}"))
}

/// True if `password` matches the PHC string `hash`.
pub fn verify_password(password: &str, hash: &str) -> bool {
    if password.chars().count() > MAX_PASSWORD_CHARS {
        return false;
    }
    Argon2::default()
        .verify_password(password.as_bytes(), hash)
        .is_ok()
}

/// Spends the time a real verification takes, for an email that has no user, so that the
/// response time does not tell whether the email exists.
pub fn verify_nothing(password: &str) {
    static DUMMY: OnceLock<String> = OnceLock::new();
    let hash = DUMMY.get_or_init(|| hash_password("not a real password").unwrap_or_default());
    let _ = verify_password(password, hash);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_with_argon2id_and_verifies() {
        let hash = hash_password("correct horse").expect("hash");
        assert!(hash.starts_with("$argon2id$"), "{hash}");
        assert!(verify_password("correct horse", &hash));
        assert!(!verify_password("wrong horse", &hash));
        assert_ne!(
            hash,
            hash_password("correct horse").expect("hash"),
            "salted"
        );
    }

    #[test]
    fn refuses_short_and_huge_passwords() {
        assert!(check_new_password("short").is_err());
        assert!(check_new_password(&"x".repeat(300)).is_err());
        assert!(check_new_password("long enough").is_ok());
    }
}

//! Staff passwords, hashed with Argon2id (OWASP's parameters: 19 MiB, 2 passes, 1 lane).
//!
//! Hashing is slow on purpose; callers on the async runtime run these functions on the
//! blocking pool (`tokio::task::spawn_blocking`) so that a sign-in never stalls other requests.
//!
//! A check's 19 MiB of Argon2 memory is taken from a few kept for the purpose ([`MEMORY`]),
//! not asked of the allocator each time: freed by one thread of the blocking pool and asked
//! for again by another, it stayed in the process twice over or more (sign-ins alone took the
//! server's memory from 23 to 69 MB; BENCHMARKS.md, nineteenth round). A new password's hash
//! is made in the same memory.

use std::sync::{LazyLock, Mutex, MutexGuard, OnceLock, PoisonError};

use zeroize::Zeroize;

use argon2::password_hash::phc::{Output, ParamsString, Salt};
use argon2::{ARGON2ID_IDENT, Algorithm, Argon2, Block, Params, PasswordHash, Version};

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

/// Hashes a password into a PHC string (`$argon2id$v=19$...`) with a fresh random salt: the
/// `argon2` crate's default hasher's steps and string (Argon2id, version 0x13, the default
/// parameters, a salt of 16 bytes), in memory from [`MEMORY`].
pub fn hash_password(password: &str) -> Result<String, String> {
    let failed = |e: &dyn std::fmt::Display| format!("could not hash the password: {e}");
    let params = Params::DEFAULT;
    let salt: [u8; Salt::RECOMMENDED_LENGTH] = rand::random();
    let mut output = [0u8; Params::DEFAULT_OUTPUT_LEN];
    let argon2 = Argon2::default();
    MEMORY
        .with(params.block_count(), |memory| {
            argon2.hash_password_into_with_memory(password.as_bytes(), &salt, &mut output, memory)
        })
        .ok_or_else(|| failed(&"not enough memory"))?
        .map_err(|e| failed(&e))?;
    let hash = PasswordHash {
        algorithm: ARGON2ID_IDENT,
        version: Some(Version::V0x13.into()),
        params: ParamsString::try_from(&params).map_err(|e| failed(&e))?,
        salt: Some(Salt::new(&salt).map_err(|e| failed(&e))?),
        hash: Some(Output::new(&output).map_err(|e| failed(&e))?),
    };
    Ok(hash.to_string())
}

/// True if `password` matches the PHC string `hash`: the hash's own algorithm, version,
/// parameters and salt applied to `password`, and the outputs compared in constant time, as
/// the `password-hash` crate's verifier does, in memory from [`MEMORY`].
pub fn verify_password(password: &str, hash: &str) -> bool {
    if password.chars().count() > MAX_PASSWORD_CHARS {
        return false;
    }
    let Ok(hash) = PasswordHash::new(hash) else {
        return false;
    };
    let (Some(salt), Some(expected)) = (&hash.salt, &hash.hash) else {
        return false;
    };
    let (Ok(algorithm), Ok(version), Ok(params)) = (
        Algorithm::try_from(hash.algorithm.as_str()),
        hash.version
            .map_or(Ok(Version::default()), Version::try_from),
        Params::try_from(&hash),
    ) else {
        return false;
    };
    let blocks = params.block_count();
    let argon2 = Argon2::new(algorithm, version, params);
    let mut computed = [0u8; Output::MAX_LENGTH];
    let Some(computed) = computed.get_mut(..expected.len()) else {
        return false;
    };
    #[cfg(test)]
    tests::ARGON2_RUNS.with(|runs| runs.set(runs.get() + 1));
    let hashed = MEMORY.with(blocks, |memory| {
        argon2.hash_password_into_with_memory(password.as_bytes(), salt, computed, memory)
    });
    hashed.is_some_and(|hashed| hashed.is_ok())
        && Output::new(computed).is_ok_and(|computed| computed == *expected)
}

/// How many password checks may run at once: half the cores (at least one), so that a flood
/// of sign-ins leaves the other half to every other request (`HASHING`, in `super`). Read
/// once: the memory kept for them is sized by it.
pub fn checks_at_once() -> usize {
    static CHECKS: LazyLock<usize> = LazyLock::new(|| {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        (cores / 2).max(1)
    });
    *CHECKS
}

/// The Argon2 memory kept for password checks.
static MEMORY: LazyLock<Memories> = LazyLock::new(|| Memories::new(checks_at_once()));

/// Argon2 memory of the default parameters' size, kept for the next check once used: at most
/// `most` of them (a check whose request went away still runs to its end, and another may
/// start beside it meanwhile).
struct Memories {
    kept: Mutex<Vec<Box<[Block]>>>,
    most: usize,
}

impl Memories {
    const fn new(most: usize) -> Memories {
        Memories {
            kept: Mutex::new(Vec::new()),
            most,
        }
    }

    fn kept(&self) -> MutexGuard<'_, Vec<Box<[Block]>>> {
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `hash` with `blocks` blocks of Argon2 memory: kept memory, if it is of the default
    /// parameters' size and some is kept, or new memory, kept afterwards if it is of that size
    /// and fewer than `most` are kept. Every memory is wiped once its check is done, kept or
    /// not, and if the check panics. None when new memory cannot be had (a hash whose
    /// parameters ask for more than the machine has is an error, not the end of the process).
    fn with<T>(&self, blocks: usize, hash: impl FnOnce(&mut [Block]) -> T) -> Option<T> {
        let keeps = blocks == Params::DEFAULT.block_count();
        let taken = if keeps { self.kept().pop() } else { None };
        let memory = match taken {
            Some(memory) => memory,
            None => {
                let mut memory = Vec::new();
                memory.try_reserve_exact(blocks).ok()?;
                memory.resize(blocks, Block::new());
                memory.into_boxed_slice()
            }
        };
        let mut lent = Lent {
            memory,
            back_to: keeps.then_some(self),
        };
        Some(hash(&mut lent.memory))
    }
}

/// A check's memory: wiped when the check is done (or panics), then handed back to the
/// memories it came from (`back_to`) if they keep fewer than their most.
struct Lent<'m> {
    memory: Box<[Block]>,
    back_to: Option<&'m Memories>,
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        wipe(&mut self.memory);
        if let Some(memories) = self.back_to {
            let mut kept = memories.kept();
            if kept.len() < memories.most {
                kept.push(std::mem::take(&mut self.memory));
            }
        }
    }
}

/// Zeroes `memory` with writes the compiler may not leave out (`zeroize`).
fn wipe(memory: &mut [Block]) {
    for block in memory {
        block.as_mut().zeroize();
    }
}

/// A sign-in's check: true if `password` matches the account's stored hash. An account
/// without one (`None`: no such email; an empty hash: a user who has not set a password yet,
/// or one just reset) is checked against a dummy hash instead, so that every answer takes an
/// Argon2 check's time: none tells which emails exist, or which accounts wait for a password.
pub fn check_sign_in(password: &str, stored: Option<&str>) -> bool {
    match stored {
        Some(hash) if PasswordHash::new(hash).is_ok() => verify_password(password, hash),
        _ => {
            verify_nothing(password);
            false
        }
    }
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
    use argon2::PasswordHasher;
    use std::cell::Cell;

    thread_local! {
        /// Argon2 computations of `verify_password` on this thread.
        pub(super) static ARGON2_RUNS: Cell<u64> = const { Cell::new(0) };
    }

    #[test]
    fn a_sign_in_without_a_stored_password_takes_an_argon2_check_too() {
        let runs = || ARGON2_RUNS.with(Cell::get);
        let hash = hash_password("the password").expect("hash");
        for stored in [Some(hash.as_str()), Some(""), None, Some("not a hash")] {
            let before = runs();
            assert!(!check_sign_in("a guess", stored), "{stored:?}");
            assert_eq!(runs() - before, 1, "{stored:?}");
        }
        assert!(check_sign_in("the password", Some(&hash)));
    }

    #[test]
    fn hashes_with_argon2id_and_verifies() {
        use argon2::PasswordVerifier;
        let hash = hash_password("correct horse").expect("hash");
        assert!(
            hash.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"),
            "{hash}"
        );
        // The crate's own verifier takes our hash as one of its own.
        let theirs = |password: &str| {
            Argon2::default()
                .verify_password(password.as_bytes(), hash.as_str())
                .is_ok()
        };
        assert!(theirs("correct horse") && !theirs("wrong horse"), "{hash}");
        assert!(verify_password("correct horse", &hash));
        assert!(!verify_password("wrong horse", &hash));
        assert_ne!(
            hash,
            hash_password("correct horse").expect("hash"),
            "salted"
        );
    }

    /// A hash of any algorithm, version and parameters is checked with its own, and the answer
    /// is the `argon2` crate's own verifier's (which allocates its memory each time).
    #[test]
    fn checks_agree_with_the_argon2_crate_for_every_kind_of_hash() {
        use argon2::PasswordVerifier;
        let kinds = [
            (Algorithm::Argon2id, Version::V0x13, Params::DEFAULT),
            (Algorithm::Argon2i, Version::V0x13, Params::DEFAULT),
            (Algorithm::Argon2d, Version::V0x10, Params::DEFAULT),
            (
                Algorithm::Argon2id,
                Version::V0x13,
                Params::new(4096, 3, 2, Some(48)).expect("params"),
            ),
            // The default memory's size with other passes: kept memory.
            (
                Algorithm::Argon2id,
                Version::V0x13,
                Params::new(Params::DEFAULT_M_COST, 3, 1, None).expect("params"),
            ),
        ];
        for (algorithm, version, params) in kinds {
            let hash = Argon2::new(algorithm, version, params)
                .hash_password_with_salt(b"correct horse", b"a salt of 16 b..")
                .expect("hash")
                .to_string();
            for (password, right) in [("correct horse", true), ("correct hors", false)] {
                let theirs = Argon2::default()
                    .verify_password(password.as_bytes(), hash.as_str())
                    .is_ok();
                assert_eq!(theirs, right, "{hash}");
                assert_eq!(verify_password(password, &hash), right, "{hash}");
            }
        }
        // A hash without its version is of the default one (0x13), to the crate as to us.
        let old = Argon2::default()
            .hash_password_with_salt(b"correct horse", b"a salt of 16 b..")
            .expect("hash")
            .to_string()
            .replace("$v=19", "");
        assert!(!old.contains("$v="), "{old}");
        let theirs = Argon2::default().verify_password(b"correct horse", old.as_str());
        assert!(theirs.is_ok(), "{old}");
        assert!(verify_password("correct horse", &old), "{old}");
    }

    #[test]
    fn a_hash_that_is_not_one_matches_nothing() {
        let hash = hash_password("correct horse").expect("hash");
        let without_output = hash.rsplit_once('$').expect("output").0;
        for broken in [
            "",
            "correct horse",
            "$argon2id$v=19$m=19456",
            without_output,
        ] {
            assert!(!verify_password("correct horse", broken), "{broken}");
        }
        for unknown in [
            hash.replace("$argon2id$", "$argon3$"),
            hash.replace("$v=19$", "$v=20$"),
        ] {
            assert!(!verify_password("correct horse", &unknown), "{unknown}");
        }
    }

    /// Memory is kept up to its bound, handed out again, and wiped.
    #[test]
    fn the_memory_kept_is_bounded_and_wiped() {
        let memories = Memories::new(2);
        let size = Params::DEFAULT.block_count();
        let dirty = |memory: &mut [Block]| memory.iter_mut().for_each(|b| b.as_mut().fill(7));
        let kept = |memories: &Memories| {
            let kept = memories.kept();
            for memory in kept.iter() {
                assert_eq!(memory.len(), size);
                assert!(memory.iter().all(|b| b.as_ref().iter().all(|&w| w == 0)));
            }
            kept.len()
        };
        // Three checks at once: two memories kept after, the third let go.
        memories.with(size, |a| {
            dirty(a);
            memories.with(size, |b| {
                dirty(b);
                memories.with(size, dirty)
            })
        });
        assert_eq!(kept(&memories), 2);
        // A check takes kept memory and gives it back.
        memories.with(size, |memory| {
            assert_eq!(memory.len(), size);
            assert_eq!(kept(&memories), 1);
            dirty(memory);
        });
        assert_eq!(kept(&memories), 2);
        // Memory of another size is its own, and not kept.
        memories.with(8, |memory| assert_eq!(memory.len(), 8));
        assert_eq!(kept(&memories), 2);
    }

    #[test]
    fn refuses_short_and_huge_passwords() {
        assert!(check_new_password("short").is_err());
        assert!(check_new_password(&"x".repeat(300)).is_err());
        assert!(check_new_password("long enough").is_ok());
    }
}

//! SQLite's word between processes on changes to tokens and staff users, so that a server may
//! keep the tokens it has found in memory (`auth::TokenCache`) although the command line, or
//! a second server, may change them in the same file without telling it.
//!
//! The word is a file beside the database, `<database>-credentials`, and its lock (`flock`):
//!
//! - a change to tokens or users (any that [`super::audit::Event::changes_credentials`]
//!   says is one, through whichever process) takes the file's exclusive lock once its
//!   transaction holds SQLite's write lock, appends a byte to it, commits, and only then lets
//!   the lock go. The file grows by a byte a change and is never rewritten, so what `stat`
//!   says of it (its inode, length and time) never comes back to an earlier value;
//! - a server about to read a token from the database, to keep it, looks at the file under
//!   its shared lock, taken without waiting and let go at once: every change that had moved
//!   the file by then had also committed, so the token it reads next is at least as new as
//!   the file says; a change that moves the file later has not been read, and moves it
//!   before it commits;
//! - every request `stat`s the file (one system call on a file the kernel has cached) and
//!   uses a kept token only while the file is as it was when the token was read. A change
//!   commits only after its byte, so the first request to start after a change's commit finds
//!   the file moved and asks the database.
//!
//! A process that dies holding the lock lets go of it with its file descriptors; one that
//! dies between its byte and its commit has moved the file for nothing. Without the file
//! (a directory the server may not write to), nothing is kept. A change written into the
//! database by another program than this one is not heard of: it holds once the server reads
//! the token again, within `auth::TokenCache`'s five seconds.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Longest a change waits for the file's exclusive lock before it gives up (and is not made).
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// What `stat` says of the file: it moves at every change, and never back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: i64,
    mtime_nsec: i64,
}

impl Stamp {
    fn of(meta: &std::fs::Metadata) -> Stamp {
        Stamp {
            dev: meta.dev(),
            ino: meta.ino(),
            len: meta.len(),
            mtime: meta.mtime(),
            mtime_nsec: meta.mtime_nsec(),
        }
    }

    fn same_file(&self, other: &Stamp) -> bool {
        (self.dev, self.ino) == (other.dev, other.ino)
    }
}

/// The file beside an SQLite database that every change to its tokens and users moves.
#[derive(Debug)]
pub(super) struct Sidecar {
    path: PathBuf,
    /// The database's file, whose owner the file takes.
    database: PathBuf,
    /// The file as it was last seen, to tell when it moved.
    seen: std::sync::Mutex<Option<Stamp>>,
    /// Whether a failure to open or lock the file was logged: once is enough, every request
    /// would meet it.
    warned: std::sync::atomic::AtomicBool,
}

impl Sidecar {
    /// The file of the database at `database`, by its canonical path: a server and a command
    /// that reach the database through different links share one file.
    pub(super) fn beside(database: &Path) -> Sidecar {
        let (database, path) = super::beside_database(database, "-credentials");
        Sidecar {
            path,
            database,
            seen: Default::default(),
            warned: Default::default(),
        }
    }

    /// Whether the file, as just seen (`stamp`), moved since it was last seen.
    pub(super) fn moved(&self, stamp: Stamp) -> bool {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.replace(stamp) != Some(stamp)
    }

    /// The file as it is now; None when it cannot be seen (no change made since it was
    /// removed, say), and then nothing may be kept. A `stat` of a small local file, which
    /// the kernel answers from its cache: cheaper than handing it to a blocking thread.
    pub(super) fn stamp(&self) -> Option<Stamp> {
        std::fs::metadata(&self.path)
            .ok()
            .map(|meta| Stamp::of(&meta))
    }

    /// The file as it is now, looked at under its shared lock: None while a change holds
    /// it (a token read now is read, but not kept). Never waits; the lock is let go at once.
    pub(super) fn share(&self) -> Option<Stamp> {
        let file = match File::open(&self.path) {
            Ok(file) => file,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                // No change made yet: the file comes now, as a change would make it.
                self.create().map_err(|error| self.warn(&error)).ok()?
            }
            Err(error) => {
                self.warn(&error);
                return None;
            }
        };
        match file.try_lock_shared() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => return None,
            Err(std::fs::TryLockError::Error(error)) => {
                self.warn(&error);
                return None;
            }
        }
        self.still(&file)
    }

    /// Takes the exclusive lock and moves the file. Called with SQLite's write lock held,
    /// which every taker of this lock holds too, so two changes never wait for each other;
    /// readers hold it shared for a `stat` each. Tries again every millisecond, for at most
    /// [`LOCK_WAIT`] (a process stopped with the lock in hand, say), without holding a thread.
    /// The lock lasts until the returned file is dropped, after the commit.
    pub(super) async fn announce(&self) -> std::io::Result<File> {
        let until = std::time::Instant::now() + LOCK_WAIT;
        let mut file = self.create()?;
        loop {
            match file.try_lock() {
                // The path must still name the file locked, not one put in its place.
                Ok(()) if self.still(&file).is_some() => {
                    file.write_all(b".")?;
                    return Ok(file);
                }
                Ok(()) => file = self.create()?,
                Err(std::fs::TryLockError::WouldBlock) => {}
                Err(std::fs::TryLockError::Error(error)) => return Err(error),
            }
            if std::time::Instant::now() >= until {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "another process holds it",
                ));
            }
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    }

    /// The file, made if there is none, for appending, owned as the database is (as SQLite
    /// does with its `-wal` file, so that a command run as root leaves one the server can
    /// still write).
    fn create(&self) -> std::io::Result<File> {
        let file = OpenOptions::new()
            .append(true)
            .create(true)
            .open(&self.path)?;
        super::owned_as(&file, &self.database)?;
        Ok(file)
    }

    /// The file as the path names it now, if it is the one open as `file`.
    fn still(&self, file: &File) -> Option<Stamp> {
        let open = Stamp::of(&file.metadata().ok()?);
        let now = self.stamp()?;
        now.same_file(&open).then_some(now)
    }

    fn warn(&self, error: &std::io::Error) {
        if !self.warned.swap(true, std::sync::atomic::Ordering::Relaxed) {
            tracing::warn!(
                %error,
                file = %self.path.display(),
                "cannot use the file of changes to tokens: every request asks the database"
            );
        }
    }

    /// Where the file is, for messages.
    pub(super) fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sidecar() -> (tempfile::TempDir, Sidecar) {
        let dir = tempfile::tempdir().expect("tempdir");
        let sidecar = Sidecar::beside(&dir.path().join("practice.db"));
        (dir, sidecar)
    }

    #[tokio::test]
    async fn every_change_moves_the_file_and_a_change_under_way_shares_nothing() {
        let (_dir, sidecar) = sidecar();
        assert!(sidecar.stamp().is_none(), "no file before the first change");
        let before = sidecar.share().expect("shared");
        assert_eq!(sidecar.stamp(), Some(before));

        let change = sidecar.announce().await.expect("announced");
        assert!(
            sidecar.share().is_none(),
            "nothing is kept while a change holds the file"
        );
        let after = sidecar.stamp().expect("stamp");
        assert_ne!(after, before, "the change moved the file");
        drop(change);
        assert_eq!(sidecar.share(), Some(after), "shared again once committed");
    }

    #[tokio::test]
    async fn a_change_waits_for_a_reader_then_goes_on() {
        let (_dir, sidecar) = sidecar();
        sidecar.share().expect("made");
        let reader = File::open(sidecar.path()).expect("open");
        reader.try_lock_shared().expect("shared");
        let sidecar = std::sync::Arc::new(sidecar);
        let waiting = tokio::spawn({
            let sidecar = sidecar.clone();
            async move { sidecar.announce().await }
        });
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "a reader holds the file");
        drop(reader);
        let change = waiting.await.expect("joined").expect("announced");
        drop(change);
    }

    #[tokio::test]
    async fn a_file_removed_is_made_anew_and_moves() {
        let (_dir, sidecar) = sidecar();
        let first = sidecar.share().expect("shared");
        std::fs::remove_file(sidecar.path()).expect("removed");
        assert!(sidecar.stamp().is_none(), "nothing kept without the file");
        drop(sidecar.announce().await.expect("announced"));
        let again = sidecar.share().expect("shared");
        assert_ne!(again, first);
    }
}

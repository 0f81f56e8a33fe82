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
//! - a server that finds a token in the database keeps it only if it could take the shared
//!   lock without waiting, and keeps it with what `stat` said of the file under that lock:
//!   no change was between its byte and its commit then, so the token as read is the
//!   token as committed, until the file moves;
//! - every request `stat`s the file (one system call on a file the kernel has cached) and
//!   uses a kept token only while the file is as it was. A change commits only after its
//!   byte, so the first request to start after a change's commit finds the file moved and
//!   asks the database.
//!
//! A process that dies holding the lock lets go of it with its file descriptors; one that
//! dies between its byte and its commit has moved the file for nothing. Without the file
//! (a directory the server may not write to), nothing is kept. A change written into the
//! database by another program than this one is not heard of: such a program must restart
//! the servers, as it would have to for any other setting.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

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
    /// Whether a failure to open or lock the file was logged: once is enough, every request
    /// would meet it.
    warned: std::sync::atomic::AtomicBool,
}

impl Sidecar {
    /// The file of the database at `database`.
    pub(super) fn beside(database: &Path) -> Sidecar {
        let mut path = database.as_os_str().to_owned();
        path.push("-credentials");
        Sidecar {
            path: path.into(),
            warned: Default::default(),
        }
    }

    /// The file as it is now; None when it cannot be seen (no change made since it was
    /// removed, say), and then nothing may be kept. A `stat` of a small local file, which
    /// the kernel answers from its cache: cheaper than handing it to a blocking thread.
    pub(super) fn stamp(&self) -> Option<Stamp> {
        std::fs::metadata(&self.path)
            .ok()
            .map(|meta| Stamp::of(&meta))
    }

    /// The shared lock, if no change holds the file now, with the file as it is under it.
    /// Held (until the returned file is dropped) while a token is read from the database to
    /// be kept. Never waits: a change under way means the token is read but not kept.
    pub(super) fn share(&self) -> Option<(File, Stamp)> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&self.path)
            .map_err(|error| self.warn(&error))
            .ok()?;
        match file.try_lock_shared() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => return None,
            Err(std::fs::TryLockError::Error(error)) => {
                self.warn(&error);
                return None;
            }
        }
        let locked = Stamp::of(&file.metadata().ok()?);
        // The path must still name the file locked (not one put in its place meanwhile).
        let now = self.stamp()?;
        now.same_file(&locked).then_some((file, now))
    }

    /// Takes the exclusive lock, waiting for the readers that hold it shared (each for one
    /// read of a token), and moves the file. Called with SQLite's write lock held, which every
    /// taker of this lock holds too, so two changes never wait for each other here. The lock
    /// lasts until the returned file is dropped, after the commit.
    pub(super) async fn announce(&self) -> std::io::Result<File> {
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || {
            let mut file = OpenOptions::new().append(true).create(true).open(&path)?;
            file.lock()?;
            file.write_all(b".")?;
            Ok(file)
        })
        .await
        .map_err(std::io::Error::other)?
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
        let (reading, before) = sidecar.share().expect("shared");
        drop(reading);
        assert_eq!(sidecar.stamp(), Some(before));

        let change = sidecar.announce().await.expect("announced");
        assert!(
            sidecar.share().is_none(),
            "nothing is kept while a change holds the file"
        );
        let after = sidecar.stamp().expect("stamp");
        assert_ne!(after, before, "the change moved the file");
        drop(change);
        let (_reading, shared) = sidecar.share().expect("shared again once committed");
        assert_eq!(shared, after);
    }

    #[tokio::test]
    async fn a_change_waits_for_the_readers_then_goes_on() {
        let (_dir, sidecar) = sidecar();
        let (reading, _) = sidecar.share().expect("shared");
        let sidecar = std::sync::Arc::new(sidecar);
        let waiting = tokio::spawn({
            let sidecar = sidecar.clone();
            async move { sidecar.announce().await }
        });
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "a reader holds the file");
        drop(reading);
        let change = waiting.await.expect("joined").expect("announced");
        drop(change);
    }
}

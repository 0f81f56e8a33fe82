//! SQLite: the record of reads, made durable in a file of the server's own before their data
//! leaves, and moved into `audit_reads` about once a second.
//!
//! A commit of SQLite is a hop to its connection's thread, every page it changed written whole
//! to the log (the reads' row and its three indexes: four pages for a few hundred bytes), an
//! `fsync`, and a page cache emptied for every reading connection of the file. Each response
//! waited for one. Appending the same rows to a file and `fdatasync`-ing it is a `write` and a
//! flush of a few hundred bytes: `patient(id)` serves a fifth to a half more requests a
//! second, at a lower p99 (BENCHMARKS.md, ninth round), with the same promise: a read is on
//! disk before its data leaves.
//!
//! The files are `<database>-reads-<id>`, beside the database's canonical path:
//!
//! - a process that records reads makes one (under another name, `-reading-`, locked, then
//!   renamed into place and the directory flushed, so that a file under the journal's name is
//!   always locked by a live process or left by one that is gone) and holds its exclusive
//!   `flock` for as long as it writes to it;
//! - each batch of reads is appended as one line of JSON per request (`[practice, id, at,
//!   actor type, actor id, actor name, reads]`, the columns of `audit_reads`) and flushed
//!   with `fdatasync` before any of its requests is answered;
//! - about once a second, and before the audit log is listed or the database backed up, the
//!   file being written is set aside (the next batch starts a new one), its lines are inserted
//!   into `audit_reads` (`INSERT OR IGNORE`, by their key: a line inserted twice is one row),
//!   and then the file is removed;
//! - files whose lock is free were left by a process that is gone (a crash, a `kill -9`):
//!   whoever takes the lock first moves them the same way. A last line cut short by a crash
//!   was never flushed, so no response waited for it, and it is left out.
//!
//! A second server on the same file lists the reads of the first once the first has moved
//! them: within about a second.

use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::{Read as _, Seek, Write};
use std::path::{Path, PathBuf};

/// A journal file, open for appending, locked by this process.
#[derive(Debug)]
pub(super) struct Open {
    pub(super) file: File,
    pub(super) path: PathBuf,
    len: u64,
}

impl Open {
    /// Everything the file holds.
    pub(super) fn contents(&mut self) -> std::io::Result<Vec<u8>> {
        let mut bytes = Vec::new();
        self.file.rewind()?;
        self.file.read_to_end(&mut bytes)?;
        Ok(bytes)
    }
}

/// The journals of reads of one SQLite database.
#[derive(Debug)]
pub(super) struct Journal {
    /// The directory of the database's canonical path.
    dir: PathBuf,
    /// The database's file name followed by `-reads-`: the names of journals.
    prefix: OsString,
    /// The database's file name followed by `-reading-`: a journal being made.
    making: OsString,
    /// The database's file, whose owner the journals take.
    database: PathBuf,
    /// The journal being written, once a batch has come.
    current: std::sync::Mutex<Option<Open>>,
    /// One mover at a time.
    pub(super) moving: tokio::sync::Mutex<()>,
}

impl Journal {
    /// The journals of the database at `database`; None when it has no directory to name.
    pub(super) fn beside(database: &Path) -> Option<Journal> {
        let database = std::fs::canonicalize(database).unwrap_or_else(|_| database.to_owned());
        let dir = database.parent()?.to_owned();
        let name = database.file_name()?;
        let with = |suffix: &str| {
            let mut s = name.to_owned();
            s.push(suffix);
            s
        };
        Some(Journal {
            dir,
            prefix: with("-reads-"),
            making: with("-reading-"),
            database,
            current: Default::default(),
            moving: Default::default(),
        })
    }

    /// Appends `lines` to the journal being written, making one if there is none, and
    /// flushes them to disk. Blocking: run it on a blocking thread. After a failure the file
    /// is let go (with its lock: it is then moved as one left by a process gone, without a
    /// line a failed write may have cut short), and the next batch starts a new one.
    pub(super) fn append(&self, lines: &[u8]) -> std::io::Result<()> {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        let mut open = match current.take() {
            Some(open) => open,
            None => self.make()?,
        };
        open.file.write_all(lines)?;
        open.file.sync_data()?;
        open.len += lines.len() as u64;
        *current = Some(open);
        Ok(())
    }

    /// Sets the journal being written aside, if it holds anything, to be moved: the next
    /// batch starts a new one.
    pub(super) fn set_aside(&self) -> Option<Open> {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if current.as_ref().is_some_and(|open| open.len > 0) {
            current.take()
        } else {
            None
        }
    }

    /// The journals that no live process holds, each locked now by this one; journals left
    /// half-made are removed (they never held a read).
    pub(super) fn orphans(&self) -> std::io::Result<Vec<Open>> {
        let mut found = Vec::new();
        for entry in std::fs::read_dir(&self.dir)? {
            let entry = entry?;
            let name = entry.file_name();
            let bytes = name.as_encoded_bytes();
            let making = bytes.starts_with(self.making.as_encoded_bytes());
            if !making && !bytes.starts_with(self.prefix.as_encoded_bytes()) {
                continue;
            }
            let path = entry.path();
            let file = match OpenOptions::new().read(true).append(true).open(&path) {
                Ok(file) => file,
                // Moved meanwhile by another process.
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => continue,
                Err(error) => return Err(error),
            };
            match file.try_lock() {
                Ok(()) => {}
                Err(std::fs::TryLockError::WouldBlock) => continue,
                Err(std::fs::TryLockError::Error(error)) => return Err(error),
            }
            if making {
                let _ = std::fs::remove_file(&path);
                continue;
            }
            let len = file.metadata()?.len();
            found.push(Open { file, path, len });
        }
        Ok(found)
    }

    /// A new journal: made under a name no mover looks at, locked, renamed into place, and
    /// the directory flushed, so that the name survives a crash before any read is answered.
    fn make(&self) -> std::io::Result<Open> {
        let id = super::new_id();
        let named = |prefix: &OsString| {
            let mut name = prefix.clone();
            name.push(&id);
            self.dir.join(name)
        };
        let (making, path) = (named(&self.making), named(&self.prefix));
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create_new(true)
            .open(&making)?;
        file.try_lock().map_err(|error| match error {
            std::fs::TryLockError::Error(error) => error,
            std::fs::TryLockError::WouldBlock => std::io::Error::new(
                std::io::ErrorKind::WouldBlock,
                "a new journal of reads is locked by another process",
            ),
        })?;
        if let Ok(owner) = std::fs::metadata(&self.database) {
            use std::os::unix::fs::MetadataExt;
            let mine = file.metadata()?;
            if (mine.uid(), mine.gid()) != (owner.uid(), owner.gid()) {
                // Allowed to root only (a server run as root on a file of another user's).
                let _ = std::os::unix::fs::fchown(&file, Some(owner.uid()), Some(owner.gid()));
            }
        }
        std::fs::rename(&making, &path)?;
        File::open(&self.dir)?.sync_all()?;
        Ok(Open { file, path, len: 0 })
    }
}

/// A line of a journal: a request's row of `audit_reads` (practice, id, at, actor type, actor
/// id, actor name, reads).
pub(super) type Line = (String, String, i64, String, String, Option<String>, String);

/// The whole lines of a journal, and how many were left out: a last line without its end
/// (cut short by a crash, never flushed, never answered), and any line that is not a
/// [`Line`] in JSON.
pub(super) fn lines(bytes: &[u8]) -> (Vec<&str>, usize) {
    let mut whole = Vec::new();
    let mut left_out = 0;
    let mut rest = bytes;
    while !rest.is_empty() {
        let Some(end) = rest.iter().position(|b| *b == b'\n') else {
            left_out += 1;
            break;
        };
        let line = &rest[..end];
        rest = &rest[end + 1..];
        match std::str::from_utf8(line) {
            Ok(text) if serde_json::from_str::<Line>(text).is_ok() => whole.push(text),
            _ => left_out += 1,
        }
    }
    (whole, left_out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn journal() -> (tempfile::TempDir, Journal) {
        let dir = tempfile::tempdir().expect("tempdir");
        let journal = Journal::beside(&dir.path().join("practice.db")).expect("journal");
        (dir, journal)
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .expect("dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_batch_is_appended_to_a_locked_file_of_its_own_until_set_aside() {
        let (dir, journal) = journal();
        assert!(
            journal.set_aside().is_none(),
            "nothing written, nothing to move"
        );
        assert!(
            names(dir.path()).is_empty(),
            "no file before the first batch"
        );
        journal.append(b"[1]\n").expect("appended");
        journal.append(b"[2]\n").expect("appended");
        let listed = names(dir.path());
        assert_eq!(listed.len(), 1, "{listed:?}");
        assert!(listed[0].starts_with("practice.db-reads-"), "{listed:?}");
        assert!(
            journal.orphans().expect("orphans").is_empty(),
            "a live journal is no orphan"
        );

        let mut aside = journal.set_aside().expect("set aside");
        assert_eq!(aside.contents().expect("read"), b"[1]\n[2]\n");
        journal.append(b"[3]\n").expect("appended to a new file");
        let mut next = journal.set_aside().expect("the new file");
        assert_ne!(next.path, aside.path);
        assert_eq!(next.contents().expect("read"), b"[3]\n");
    }

    #[test]
    fn a_journal_let_go_is_an_orphan_and_one_half_made_is_removed() {
        let (dir, journal) = journal();
        journal.append(b"[1]\n").expect("appended");
        let aside = journal.set_aside().expect("set aside");
        let path = aside.path.clone();
        drop(aside); // as a process gone lets go of its lock
        std::fs::write(dir.path().join("practice.db-reading-x"), b"").expect("half made");
        std::fs::write(dir.path().join("other.db-reads-x"), b"[9]\n").expect("another db's");

        let mut orphans = journal.orphans().expect("orphans");
        assert_eq!(orphans.len(), 1);
        assert_eq!(orphans[0].path, path);
        assert_eq!(orphans[0].contents().expect("read"), b"[1]\n");
        assert!(
            journal.orphans().expect("orphans").is_empty(),
            "one mover holds it"
        );
        assert!(!dir.path().join("practice.db-reading-x").exists());
        assert!(dir.path().join("other.db-reads-x").exists());
    }

    #[test]
    fn a_journal_that_cannot_be_written_fails_the_batch_and_the_next_starts_anew() {
        let (dir, journal) = journal();
        let moved = dir.path().with_extension("moved");
        std::fs::rename(dir.path(), &moved).expect("directory moved away");
        let error = journal
            .append(b"[1]\n")
            .expect_err("no directory to write in");
        assert_eq!(error.kind(), std::io::ErrorKind::NotFound);
        std::fs::rename(&moved, dir.path()).expect("directory back");
        journal.append(b"[2]\n").expect("appended");
        let mut aside = journal.set_aside().expect("set aside");
        assert_eq!(aside.contents().expect("read"), b"[2]\n");
    }

    #[test]
    fn a_line_cut_short_or_not_json_is_left_out() {
        let one = r#"["p","1",5,"token","t",null,"[]"]"#;
        let two = r#"["p","2",6,"user","u","Ann","[]"]"#;
        let text = format!("{one}\nnot json\n[1,2]\n{two}\n[\"p\",\"3\",7,\"tok");
        let (whole, left_out) = lines(text.as_bytes());
        assert_eq!(whole, vec![one, two]);
        assert_eq!(left_out, 3);
        assert_eq!(lines(b""), (vec![], 0));
    }
}

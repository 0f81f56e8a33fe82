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
//!   locked by the live process writing it, or is one no process writes any more: left by a
//!   process gone, or let go after a failed write or move) and holds its exclusive `flock`
//!   for as long as it writes to it, with the file readable by its own user alone;
//! - each batch of reads is appended as one line of JSON per practice and caller
//!   (`[practice, id, at, actor type, actor id, actor name, reads]`, the columns of
//!   `audit_reads`) and flushed with `fdatasync` before any of its requests is answered;
//! - a journal is made filled with zero bytes, as many as the last one's second of reads took
//!   twice over (see [`room_after`]), and batches are written over them: a flush of data
//!   written inside the file's length is the data alone, where one that makes the file longer
//!   also commits its new length to the file system's own journal (`fdatasync` of a batch on
//!   ext4: 0.12 ms at the median and 0.19 ms at p99 inside the length, against 0.18 and
//!   0.85 ms at its end; BENCHMARKS.md, eighteenth round). A journal's lines end at its first
//!   zero byte (JSON text holds none); past its room, batches make it longer, as before;
//! - about once a second, and before the audit log is listed or the database backed up, the
//!   file being written is set aside (the mover of every second first makes the next one, off
//!   the requests' path, and puts it in its place, but for a server that stops; otherwise
//!   the next batch makes one), its lines are inserted into `audit_reads` (`ON CONFLICT DO
//!   NOTHING` on their key: a line inserted twice is one row), and then the file is
//!   removed; a file the log refuses (a damaged line, a row the database will not take) is
//!   renamed `<database>-unmoved-reads-<id>` and logged as an error, for an operator;
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

/// How old a journal left half-made must be before a mover removes it.
const HALF_MADE: std::time::Duration = std::time::Duration::from_secs(60);

/// The room of a journal made on a batch's way (when none was made ahead: the first after
/// the server starts, after a failure, or after a journal was set aside for the audit log's
/// listing or a backup; see [`Journal::append`]), and the least any journal is made with.
const FIRST_ROOM: u64 = 64 * 1024;

/// The most room a journal is made with: a second of pages of 100 bookings at 400 a second
/// is about 4 MiB of lines.
const MOST_ROOM: u64 = 8 * 1024 * 1024;

/// The room a journal is made with after one that took `written` bytes (about a second of
/// reads): twice that, in whole 64 KiB, within [`FIRST_ROOM`] and [`MOST_ROOM`]. A server
/// that reads little writes little ahead, and one that reads nothing makes no journal ahead
/// at all ([`Journal::set_aside_making_the_next`]).
fn room_after(written: u64) -> u64 {
    written
        .saturating_mul(2)
        .div_ceil(FIRST_ROOM)
        .saturating_mul(FIRST_ROOM)
        .clamp(FIRST_ROOM, MOST_ROOM)
}

/// A journal file, locked by this process: open for writing when this process made it, for
/// reading only when taken up as one let go ([`Journal::orphans`]).
#[derive(Debug)]
pub(super) struct Open {
    pub(super) file: File,
    pub(super) path: PathBuf,
    /// The bytes of lines written; for a journal taken up as one let go, the file's length,
    /// its zeros included.
    len: u64,
}

impl Open {
    /// The journal's text: what the file holds up to its first zero byte, read a piece at a
    /// time (a journal let go may be megabytes of zeros, or damaged to any length), into
    /// memory asked for as it comes: too much of it is an error, not the end of the process.
    pub(super) fn contents(&mut self) -> std::io::Result<Vec<u8>> {
        let mut bytes = Vec::new();
        // Room for the text at once where its length is known (growing as it reads would
        // copy it, and take up to twice its length); for a journal let go, a piece's.
        let expected = usize::try_from(self.len).unwrap_or(usize::MAX);
        bytes
            .try_reserve_exact(expected.min(MOST_ROOM as usize))
            .map_err(std::io::Error::other)?;
        self.file.rewind()?;
        let mut file = (&self.file).take(self.len);
        let mut piece = vec![0u8; FIRST_ROOM as usize];
        loop {
            let n = match file.read(&mut piece) {
                Ok(0) => break,
                Ok(n) => n,
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(error) => return Err(error),
            };
            let read = &piece[..n];
            let end = read.iter().position(|b| *b == 0);
            let text = &read[..end.unwrap_or(n)];
            bytes
                .try_reserve(text.len())
                .map_err(std::io::Error::other)?;
            bytes.extend_from_slice(text);
            if end.is_some() {
                break;
            }
        }
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
    /// The database's file name followed by `-unmoved-reads-`: a journal the audit log
    /// refused, set aside for an operator.
    unmoved: OsString,
    /// The database's file, whose owner the journals take.
    database: PathBuf,
    /// The journal being written, once a batch has come.
    current: std::sync::Mutex<Option<Open>>,
    /// One mover at a time.
    pub(super) moving: tokio::sync::Mutex<()>,
    /// Set when the server stops: no journal is made ahead any more.
    closing: std::sync::atomic::AtomicBool,
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
            unmoved: with("-unmoved-reads-"),
            database,
            current: Default::default(),
            moving: Default::default(),
            closing: Default::default(),
        })
    }

    /// Appends `lines` to the journal being written (over its zeros, after the lines before
    /// them), making one if there is none, and flushes them to disk. Blocking: run it on a
    /// blocking thread. After a failure the file is let go (with its lock: it is then moved
    /// as one left by a process gone, its whole lines, those of the failed batch among them,
    /// without one a failed write may have cut short: reads never answered may so be
    /// recorded, never reads answered left out), and the next batch starts a new one.
    pub(super) fn append(&self, lines: &[u8]) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        let mut current = self.lock_current();
        let mut open = match current.take() {
            Some(open) => open,
            None => self.make(FIRST_ROOM)?,
        };
        // Over the zeros the journal was made with, after the lines before.
        open.file.write_all_at(lines, open.len)?;
        open.file.sync_data()?;
        open.len += lines.len() as u64;
        *current = Some(open);
        Ok(())
    }

    /// Sets the journal being written aside, if there is one, to be moved: the next batch
    /// starts a new one. (One made ahead and never written is moved as nothing, and removed.)
    pub(super) fn set_aside(&self) -> Option<Open> {
        self.lock_current().take()
    }

    /// As [`Journal::set_aside`], with the next journal made first and put in the place of the
    /// one set aside in the same step, so that no batch of reads waits for a journal to be
    /// made (its name made durable with a flush of the directory: a few milliseconds, with
    /// every response of the batch and of those queued behind it waiting). Nothing is made
    /// when nothing is written. If the next cannot be made, nothing is set aside and the
    /// error is returned: the caller sets aside as before, and the next batch makes one.
    pub(super) fn set_aside_making_the_next(&self) -> std::io::Result<Option<Open>> {
        if self.closing.load(std::sync::atomic::Ordering::SeqCst) {
            return Ok(self.set_aside());
        }
        let written = self.lock_current().as_ref().map_or(0, |open| open.len);
        if written == 0 {
            return Ok(None);
        }
        // Made while batches still go to the one being written.
        let next = self.make(room_after(written))?;
        Ok(self.lock_current().replace(next))
    }

    /// From now on, [`Journal::set_aside_making_the_next`] makes no journal ahead: for a
    /// server that stops, whose last move then leaves no file behind.
    pub(super) fn stop_making_ahead(&self) {
        self.closing
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// The journal being written, locked.
    fn lock_current(&self) -> std::sync::MutexGuard<'_, Option<Open>> {
        self.current.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Up to `most` journals that no live process holds, each locked now by this one;
    /// journals left half-made a minute ago and more are removed (they never held a read; a
    /// younger one may be a live process's, between its making and its lock). An entry that
    /// cannot be opened or locked (another user's, a directory) is logged and passed over.
    pub(super) fn orphans(&self, most: usize) -> std::io::Result<Vec<Open>> {
        let mut found = Vec::new();
        for entry in std::fs::read_dir(&self.dir)? {
            if found.len() >= most {
                break;
            }
            let entry = entry?;
            let name = entry.file_name();
            let bytes = name.as_encoded_bytes();
            let making = bytes.starts_with(self.making.as_encoded_bytes());
            if !making && !bytes.starts_with(self.prefix.as_encoded_bytes()) {
                continue;
            }
            let path = entry.path();
            match self.take(&path, making) {
                Ok(Some(open)) => found.push(open),
                Ok(None) => {}
                Err(error) => tracing::warn!(
                    %error,
                    file = %path.display(),
                    "cannot take up a journal of reads left beside the database"
                ),
            }
        }
        Ok(found)
    }

    /// The journal at `path`, locked, if no live process holds it and it is still the file
    /// the path names (another mover may have removed it meanwhile); a half-made one is
    /// removed instead.
    fn take(&self, path: &Path, making: bool) -> std::io::Result<Option<Open>> {
        use std::os::unix::fs::MetadataExt;
        // Read only: a journal let go is moved and removed, never written again.
        let file = match OpenOptions::new().read(true).open(path) {
            Ok(file) => file,
            // Moved meanwhile by another process.
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(error),
        };
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => return Ok(None),
            Err(std::fs::TryLockError::Error(error)) => return Err(error),
        }
        let open = file.metadata()?;
        let Ok(named) = std::fs::metadata(path) else {
            return Ok(None);
        };
        if (open.dev(), open.ino()) != (named.dev(), named.ino()) {
            return Ok(None);
        }
        if making {
            let old = open
                .modified()
                .ok()
                .and_then(|at| at.elapsed().ok())
                .is_some_and(|age| age >= HALF_MADE);
            if old {
                let _ = std::fs::remove_file(path);
            }
            return Ok(None);
        }
        Ok(Some(Open {
            file,
            path: path.to_owned(),
            len: open.len(),
        }))
    }

    /// Renames a journal that cannot be moved into the audit log (a line that is not one, a
    /// row the database refuses) out of the movers' way, for an operator to look at.
    pub(super) fn quarantine(&self, open: &Open) -> std::io::Result<PathBuf> {
        let mut name = self.unmoved.clone();
        name.push(super::new_id());
        let to = self.dir.join(name);
        std::fs::rename(&open.path, &to)?;
        Ok(to)
    }

    /// A new journal of `room` zero bytes (see the module's text), flushed with its length:
    /// made under a name no mover looks at, locked, renamed into place, and the directory
    /// flushed, so that the name survives a crash before any read is answered.
    fn make(&self, room: u64) -> std::io::Result<Open> {
        let id = super::new_id();
        let named = |prefix: &OsString| {
            let mut name = prefix.clone();
            name.push(&id);
            self.dir.join(name)
        };
        let (making, path) = (named(&self.making), named(&self.prefix));
        // Patient data: readable by the server's user alone.
        let mut file = std::os::unix::fs::OpenOptionsExt::mode(
            OpenOptions::new().read(true).write(true).create_new(true),
            0o600,
        )
        .open(&making)?;
        // Until it is in place, a failure removes it: its room, megabytes on a disk nearly
        // full, would otherwise stay taken until a mover found it a minute old.
        let half_made = RemovedUnlessKept(Some(making.clone()));
        file.try_lock().map_err(|error| match error {
            std::fs::TryLockError::Error(error) => error,
            std::fs::TryLockError::WouldBlock => std::io::Error::new(
                std::io::ErrorKind::WouldBlock,
                "a new journal of reads is locked by another process",
            ),
        })?;
        super::owned_as(&file, &self.database)?;
        // Zeros written (not a hole, nor space reserved and marked unwritten, whose first
        // write would change the file's map of blocks, and so its metadata, at a flush).
        let zeros = vec![0u8; FIRST_ROOM as usize];
        let mut left = room;
        while left > 0 {
            let n = left.min(FIRST_ROOM);
            file.write_all(&zeros[..n as usize])?;
            left -= n;
        }
        file.sync_all()?;
        std::fs::rename(&making, &path)?;
        half_made.keep();
        File::open(&self.dir)?.sync_all()?;
        Ok(Open { file, path, len: 0 })
    }
}

/// A file removed when this is dropped, unless [`RemovedUnlessKept::keep`] was called.
struct RemovedUnlessKept(Option<PathBuf>);

impl RemovedUnlessKept {
    fn keep(mut self) {
        self.0 = None;
    }
}

impl Drop for RemovedUnlessKept {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// A line of a journal: a row of `audit_reads` (practice, id, at, actor type, actor id, actor
/// name, reads: a batch's requests by one caller), as the insert of reads takes it too.
pub(super) type Line = (String, String, i64, String, String, Option<String>, String);

/// What a journal holds: its whole lines, whether its last line was cut short (by a crash
/// in the middle of a write: never flushed, so never answered), and how many whole lines are
/// not a [`Line`] in JSON (which nothing but damage to the file makes).
#[derive(Debug, PartialEq)]
pub(super) struct Lines<'a> {
    pub(super) whole: Vec<&'a str>,
    pub(super) cut_short: bool,
    pub(super) damaged: usize,
}

/// What [`Lines`] found, without the lines.
#[derive(Debug, PartialEq)]
pub(super) struct Counted {
    pub(super) whole: usize,
    pub(super) cut_short: bool,
    pub(super) damaged: usize,
}

impl From<&Lines<'_>> for Counted {
    fn from(lines: &Lines<'_>) -> Counted {
        Counted {
            whole: lines.whole.len(),
            cut_short: lines.cut_short,
            damaged: lines.damaged,
        }
    }
}

/// The lines of a journal.
pub(super) fn lines(bytes: &[u8]) -> Lines<'_> {
    let mut found = Lines {
        whole: Vec::new(),
        cut_short: false,
        damaged: 0,
    };
    let mut rest = bytes;
    while !rest.is_empty() {
        let Some(end) = rest.iter().position(|b| *b == b'\n') else {
            found.cut_short = true;
            break;
        };
        let line = &rest[..end];
        rest = &rest[end + 1..];
        match std::str::from_utf8(line) {
            Ok(text) if serde_json::from_str::<Line>(text).is_ok() => found.whole.push(text),
            _ => found.damaged += 1,
        }
    }
    found
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

    /// A journal's text as a mover reads it: up to its first zero byte.
    fn text_of(path: &Path) -> Vec<u8> {
        let bytes = std::fs::read(path).expect("read");
        bytes.into_iter().take_while(|b| *b != 0).collect()
    }

    #[test]
    fn a_journal_is_made_with_room_for_twice_the_last_ones_lines() {
        assert_eq!(room_after(0), FIRST_ROOM);
        assert_eq!(room_after(1), FIRST_ROOM);
        assert_eq!(room_after(FIRST_ROOM / 2), FIRST_ROOM);
        assert_eq!(room_after(FIRST_ROOM / 2 + 1), 2 * FIRST_ROOM);
        assert_eq!(room_after(1_000_000), 31 * FIRST_ROOM);
        assert_eq!(room_after(MOST_ROOM), MOST_ROOM);
        assert_eq!(room_after(u64::MAX), MOST_ROOM);
    }

    #[test]
    fn batches_are_written_over_the_zeros_and_past_them_when_they_run_out() {
        let (_dir, journal) = journal();
        journal.append(b"[1]\n").expect("appended");
        let path = journal.lock_current().as_ref().expect("made").path.clone();
        let size = || std::fs::metadata(&path).expect("journal").len();
        assert_eq!(
            size(),
            FIRST_ROOM,
            "made on the batch's way with the least room"
        );
        assert_eq!(text_of(&path), b"[1]\n");
        journal.append(b"[2]\n").expect("appended");
        assert_eq!(
            size(),
            FIRST_ROOM,
            "written inside the room: the length is the same"
        );
        assert_eq!(text_of(&path), b"[1]\n[2]\n");
        // A batch larger than the room left makes the file longer, and its text whole.
        let big = format!("[{}]\n", "7".repeat(FIRST_ROOM as usize));
        journal
            .append(big.as_bytes())
            .expect("appended past the room");
        assert_eq!(size(), 8 + big.len() as u64);
        journal.append(b"[3]\n").expect("appended at the end");
        let mut aside = journal.set_aside().expect("set aside");
        let expected = format!("[1]\n[2]\n{big}[3]\n");
        assert_eq!(aside.contents().expect("read"), expected.as_bytes());
        assert_eq!(text_of(&path), expected.as_bytes());
    }

    #[test]
    fn a_journal_left_with_zeros_after_its_lines_is_read_to_the_first_zero() {
        let (dir, journal) = journal();
        let one = r#"["p","1",5,"token","t",null,"[]"]"#;
        let mut bytes = format!("{one}\n[\"p\",\"2\",6,\"tok").into_bytes();
        bytes.resize(FIRST_ROOM as usize, 0);
        std::fs::write(dir.path().join("practice.db-reads-x"), &bytes).expect("left");
        let mut orphans = journal.orphans(16).expect("orphans");
        assert_eq!(orphans.len(), 1);
        let text = orphans[0].contents().expect("read");
        assert_eq!(
            lines(&text),
            Lines {
                whole: vec![one],
                cut_short: true,
                damaged: 0
            },
            "the batch a crash cut short, before the zeros, was never answered"
        );
    }

    #[test]
    fn a_journal_half_made_is_removed_when_making_it_fails() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("practice.db-reading-x");
        std::fs::write(&path, b"").expect("made");
        drop(RemovedUnlessKept(Some(path.clone())));
        assert!(!path.exists(), "removed on the way out of a failure");
        std::fs::write(&path, b"").expect("made");
        RemovedUnlessKept(Some(path.clone())).keep();
        assert!(path.exists(), "kept once in place");
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
            journal.orphans(16).expect("orphans").is_empty(),
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
    fn the_next_journal_is_made_before_one_is_set_aside_but_not_when_the_server_stops() {
        let (dir, journal) = journal();
        assert!(
            journal.set_aside_making_the_next().expect("made").is_none(),
            "nothing written, nothing to move"
        );
        assert!(names(dir.path()).is_empty(), "and nothing made");
        journal.append(b"[1]\n").expect("appended");
        let mut aside = journal
            .set_aside_making_the_next()
            .expect("set aside")
            .expect("one");
        assert_eq!(aside.contents().expect("read"), b"[1]\n");
        let listed = names(dir.path());
        assert_eq!(listed.len(), 2, "{listed:?}");
        let ahead = dir.path().join(
            listed
                .iter()
                .find(|n| !aside.path.ends_with(n))
                .expect("new"),
        );
        assert_eq!(text_of(&ahead), b"");
        assert_eq!(
            std::fs::metadata(&ahead).expect("ahead").len(),
            FIRST_ROOM,
            "made with room for twice the last one's lines, at least 64 KiB"
        );
        assert!(
            journal.orphans(16).expect("orphans").is_empty(),
            "the journal made ahead is locked by its process"
        );
        // The next batch goes to it: no file is made on its way.
        journal.append(b"[2]\n").expect("appended");
        assert_eq!(names(dir.path()).len(), 2);
        assert_eq!(text_of(&ahead), b"[2]\n");
        let mut next = journal
            .set_aside_making_the_next()
            .expect("set aside")
            .expect("one");
        assert_eq!(next.contents().expect("read"), b"[2]\n");
        assert_eq!(names(dir.path()).len(), 3);
        // Unused, it is not set aside every second, but it is by a plain set_aside (the
        // listing of the log, a backup, a server that stops), to be moved (nothing) and
        // removed like any other.
        assert!(
            journal
                .set_aside_making_the_next()
                .expect("nothing made")
                .is_none()
        );
        assert_eq!(names(dir.path()).len(), 3);
        let mut unused = journal.set_aside().expect("the one made ahead");
        assert_eq!(unused.contents().expect("read"), b"");
        assert!(journal.set_aside().is_none(), "nothing left to move");
        // A server that stops makes none ahead: its last move leaves none behind.
        journal.append(b"[3]\n").expect("appended");
        journal.stop_making_ahead();
        let files = names(dir.path()).len();
        let mut last = journal
            .set_aside_making_the_next()
            .expect("set aside")
            .expect("one");
        assert_eq!(last.contents().expect("read"), b"[3]\n");
        assert_eq!(names(dir.path()).len(), files, "no new journal made");
        assert!(journal.set_aside().is_none());
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

        let mut orphans = journal.orphans(16).expect("orphans");
        assert_eq!(orphans.len(), 1);
        assert_eq!(orphans[0].path, path);
        assert_eq!(orphans[0].contents().expect("read"), b"[1]\n");
        assert!(
            journal.orphans(16).expect("orphans").is_empty(),
            "one mover holds it"
        );
        assert!(
            dir.path().join("practice.db-reading-x").exists(),
            "a journal half-made a moment ago may be a live process's"
        );
        let file = File::options()
            .write(true)
            .open(dir.path().join("practice.db-reading-x"))
            .expect("open");
        file.set_modified(std::time::SystemTime::now() - HALF_MADE)
            .expect("aged");
        drop(file);
        assert!(journal.orphans(16).expect("orphans").is_empty());
        assert!(
            !dir.path().join("practice.db-reading-x").exists(),
            "an old one is removed"
        );
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
    fn a_line_cut_short_is_told_from_a_damaged_one() {
        let one = r#"["p","1",5,"token","t",null,"[]"]"#;
        let two = r#"["p","2",6,"user","u","Ann","[]"]"#;
        let text = format!("{one}\nnot json\n[1,2]\n{two}\n[\"p\",\"3\",7,\"tok");
        assert_eq!(
            lines(text.as_bytes()),
            Lines {
                whole: vec![one, two],
                cut_short: true,
                damaged: 2
            }
        );
        let empty = lines(b"");
        assert!(empty.whole.is_empty() && !empty.cut_short && empty.damaged == 0);
    }
}

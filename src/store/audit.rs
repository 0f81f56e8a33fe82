//! The audit log: who read or changed what, and when. Rows are only ever added.
//!
//! A write records its event in its own transaction ([`PracticeStore::commit`]), so that a
//! change and its record stand or fall together. Reads are recorded after the query ran and
//! before its data leaves the server ([`Store::record_reads`]); if that fails, the data is
//! withheld.

use sqlx::{Any, FromRow, Transaction};

use super::idempotency::Key;
use super::journal::Line;
use super::{
    Args, Engine, Page, PageRequest, PracticeStore, Store, StoreError, StoreResult, blocking,
    new_id, now_ms,
};

const EVENT_COLUMNS: &str = "id, at, actor_type, actor_id, actor_name, action, operation, \
                             resource_type, resource_id, patient_id";

/// Rows of `audit_events` per insert statement: more than the largest page reads; a JSON
/// parameter of a few hundred kilobytes.
const ROWS_PER_STATEMENT: usize = 1000;

/// The most text of lines of a journal one statement of its move takes (a line longer than
/// that goes alone): SQLite copies a statement's parameter and parses it whole, so that a
/// second of pages of 100 bookings in one statement (4 MB of lines at 450 pages a second)
/// took the server's memory up by 60 MB for a moment every second.
const MOVE_STATEMENT_TEXT: usize = 256 * 1024;

/// Journals of reads that no process writes any more taken up by one move, at most: each is
/// an open file while it waits its turn.
const ORPHANS_A_MOVE: usize = 16;

/// SQLite: the most text of lists of reads (`audit_reads.reads`) one transaction of the index
/// of who read each patient takes, about 45,000 entries (450 pages of 100 bookings).
const INDEX_BATCH_TEXT: i64 = 4_000_000;

/// Runs of the index of reads (SQLite) a patient's span covers: "who read this patient"
/// looks at every run of each span the patient was read in, and a span's note is written once
/// for all the reads of the patient in it (migration 0025, whose `audit_read_span_runs`
/// holds the numbers 0 to 63, a span's runs from its first).
const RUNS_A_SPAN: i64 = 64;

/// SQLite: a patient's offset in the runs (0 to [`RUNS_A_SPAN`] − 1), from the last two
/// characters of its id (`patient`, an expression), so that the spans of different patients
/// start in different runs and each run notes a share of the patients it reads. Any text
/// has one; an id's last two hexadecimal digits (random in a UUID) spread them evenly.
fn offset_of(patient: &str) -> String {
    format!(
        "((instr('0123456789abcdef', substr({patient}, -1)) \
         + 16 * instr('0123456789abcdef', substr({patient}, -2, 1))) % {RUNS_A_SPAN})"
    )
}

/// The key of the advisory lock ([`Store::index_reads`]) that one server at a time holds
/// while it moves the pending entries of the index of each read's patients (PostgreSQL): the
/// bytes of "readsgin".
pub const CLEANING_READS: i64 = 0x7265_6164_7367_696e;

/// What one transaction of [`Store::index_reads`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Indexed {
    /// Rows of reads (each a batch's requests by one caller) whose patients it indexed.
    pub rows: u64,
    /// Whether it stopped at a limit, with rows still past it.
    pub more: bool,
}

/// What kind of actor did something.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActorKind {
    /// A staff user, through a token from signIn.
    User,
    /// An API token.
    Token,
    /// The operator, on the command line.
    Operator,
}

impl ActorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ActorKind::User => "user",
            ActorKind::Token => "token",
            ActorKind::Operator => "operator",
        }
    }
}

/// Who did something, as the log keeps it: by id, and by name as it was at the time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Actor {
    pub kind: ActorKind,
    pub id: String,
    pub name: Option<String>,
}

impl Actor {
    /// The operator at the command line.
    pub fn operator() -> Actor {
        Actor {
            kind: ActorKind::Operator,
            id: "operator".into(),
            name: Some("command line".into()),
        }
    }
}

/// Who writes, and through which operation: what a [`PracticeStore`] needs before it writes.
#[derive(Clone, Copy, Debug)]
pub struct Author<'a> {
    pub actor: &'a Actor,
    /// The root field of the GraphQL operation, or the command.
    pub operation: Option<&'a str>,
    /// The idempotency key the request holds, if it holds one: each write marks it.
    pub key: Option<&'a Key>,
}

/// What one write did.
#[derive(Clone, Copy, Debug)]
pub struct Event<'e> {
    /// `create`, `update`, `delete`, `archive`, ...
    pub action: &'static str,
    pub resource_type: &'static str,
    pub resource_id: &'e str,
    /// The patient the record belongs to, if any.
    pub patient_id: Option<&'e str>,
}

impl<'e> Event<'e> {
    /// An event on a patient's own record.
    pub fn patient(action: &'static str, patient_id: &'e str) -> Self {
        Event {
            action,
            resource_type: "patient",
            resource_id: patient_id,
            patient_id: Some(patient_id),
        }
    }

    /// Whether it may change who may call, and with what permissions: any change to a token
    /// or a staff user but making one (a token or user made is cached by nobody yet). A cache
    /// of tokens forgets what it holds at each (see `tokens::CredentialWatch`).
    pub fn changes_credentials(&self) -> bool {
        matches!(self.resource_type, "token" | "user")
            && !matches!(self.action, "create" | "sign_in" | "sign_in_failed")
    }

    /// An event on a record that belongs to no patient.
    pub fn of(action: &'static str, resource_type: &'static str, resource_id: &'e str) -> Self {
        Event {
            action,
            resource_type,
            resource_id,
            patient_id: None,
        }
    }
}

/// A read of one record of patient data, to be recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Read {
    pub operation: String,
    pub resource_type: &'static str,
    pub resource_id: String,
    pub patient_id: Option<String>,
}

/// The kinds of record whose reads are recorded.
const READ_KINDS: &[&str] = &["patient", "booking"];

impl Read {
    /// Reads as JSON, to be kept with an idempotent response or in the audit log.
    pub fn to_json<'r>(reads: impl IntoIterator<Item = &'r Read>) -> String {
        let rows: Vec<serde_json::Value> = reads
            .into_iter()
            .map(|r| serde_json::json!([r.operation, r.resource_type, r.resource_id, r.patient_id]))
            .collect();
        serde_json::Value::Array(rows).to_string()
    }

    /// Reads kept as JSON by [`Read::to_json`]; what cannot be read back is left out.
    pub fn from_json(text: &str) -> Vec<Read> {
        let rows: Vec<(String, String, String, Option<String>)> =
            serde_json::from_str(text).unwrap_or_default();
        rows.into_iter()
            .filter_map(|(operation, kind, resource_id, patient_id)| {
                let resource_type = READ_KINDS.iter().find(|k| **k == kind)?;
                Some(Read {
                    operation,
                    resource_type,
                    resource_id,
                    patient_id,
                })
            })
            .collect()
    }
}

/// The reads of one request: by whom, in which practice.
#[derive(Clone, Debug)]
pub struct Reads {
    pub practice_id: String,
    pub actor: Actor,
    pub reads: Vec<Read>,
}

/// Most records read one row of `audit_reads` gathers from several requests: as many as one
/// request's page of 100 bookings and their patients made a row of alone. A row is listed
/// whole, so a page of the log reads no more than so many events of each row it reaches
/// (bar a single request that read more, as before).
const READS_A_ROW: usize = 200;

/// The reads of a batch of requests by one actor in one practice: a row of `audit_reads`.
#[derive(Debug)]
struct ReadsRow<'b> {
    practice_id: &'b str,
    actor: &'b Actor,
    reads: Vec<&'b Read>,
}

impl ReadsRow<'_> {
    /// The batch's rows: its requests' reads gathered by practice and actor, the rows in the
    /// order of their first request and each request's reads in order, a row holding at most
    /// [`READS_A_ROW`] reads (a request's reads are always in one row: alone, if they are more).
    /// A batch's requests are recorded at one time, `at`, and the log lists an event a record
    /// read, so what it shows does not depend on how they are gathered. A row a request was a
    /// row and three index entries each (on PostgreSQL, half of what recording a read cost it),
    /// and one client's many requests are most of a busy server's batches.
    fn gather(batch: &[Reads]) -> Vec<ReadsRow<'_>> {
        let mut rows: Vec<ReadsRow> = Vec::new();
        for request in batch.iter().filter(|r| !r.reads.is_empty()) {
            let fits = |row: &ReadsRow| {
                row.practice_id == request.practice_id
                    && *row.actor == request.actor
                    && row.reads.len() + request.reads.len() <= READS_A_ROW
            };
            match rows.iter_mut().rev().find(|row| fits(row)) {
                Some(row) => row.reads.extend(&request.reads),
                None => rows.push(ReadsRow {
                    practice_id: &request.practice_id,
                    actor: &request.actor,
                    reads: request.reads.iter().collect(),
                }),
            }
        }
        rows
    }

    /// The row, under a new id, as read at `at`.
    fn line(&self, at: i64) -> Line {
        (
            self.practice_id.to_owned(),
            new_id(),
            at,
            self.actor.kind.as_str().to_owned(),
            self.actor.id.clone(),
            self.actor.name.clone(),
            Read::to_json(self.reads.iter().copied()),
        )
    }
}

/// A recorded event.
#[derive(Clone, Debug, FromRow)]
pub struct AuditEvent {
    pub id: String,
    pub at: i64,
    pub actor_type: String,
    pub actor_id: String,
    pub actor_name: Option<String>,
    pub action: String,
    pub operation: Option<String>,
    pub resource_type: Option<String>,
    pub resource_id: Option<String>,
    pub patient_id: Option<String>,
}

/// Which events to list.
#[derive(Clone, Debug, Default)]
pub struct AuditFilter {
    pub patient_id: Option<String>,
    pub actor_id: Option<String>,
    /// From and to, milliseconds, both included.
    pub at: Option<(i64, i64)>,
}

/// One row to insert.
struct Row<'r> {
    actor: &'r Actor,
    operation: Option<&'r str>,
    action: &'r str,
    resource_type: &'r str,
    resource_id: &'r str,
    patient_id: Option<&'r str>,
}

impl<'a> PracticeStore<'a> {
    /// The store as `author` writes to it. Every write records an event, and a write without
    /// an author is refused.
    pub fn by(self, author: Author<'a>) -> PracticeStore<'a> {
        PracticeStore {
            author: Some(author),
            ..self
        }
    }

    /// Records an event that changed nothing else (a failed sign-in, say).
    pub async fn record(&self, event: Event<'_>) -> StoreResult<()> {
        let tx = self.begin_write().await?;
        self.commit(tx, event).await
    }

    /// Records `event` in the transaction and commits both.
    pub(super) async fn commit(
        &self,
        tx: Transaction<'static, Any>,
        event: Event<'_>,
    ) -> StoreResult<()> {
        self.commit_all(tx, &[event]).await
    }

    /// Records `events` in the transaction and commits them with it.
    pub(super) async fn commit_all(
        &self,
        mut tx: Transaction<'static, Any>,
        events: &[Event<'_>],
    ) -> StoreResult<()> {
        let announced = match events.iter().any(Event::changes_credentials) {
            true => Some(self.store.announce_credentials(&mut tx).await?),
            false => None,
        };
        self.record_in(&mut tx, events).await?;
        let Some(announced) = announced else {
            return self.store.commit_events(tx).await;
        };
        // Committed in a task of its own, which a request given up half-way (its time ran
        // out) cannot stop between the commit and the announcement's end: SQLite's lock must
        // not be let go before the commit it covers has landed. Not committed, the
        // announcement is dropped: the lock let go, nothing awaited.
        let store = self.store.clone();
        tokio::spawn(async move {
            store.commit_events(tx).await?;
            store.credentials_changed();
            announced.committed().await;
            Ok(())
        })
        .await
        .map_err(|e| StoreError::Unavailable(format!("a change to tokens did not finish: {e}")))?
    }

    /// Commits a write that changed nothing (the record as it was, given again): its audit
    /// row is recorded, who sent it and the idempotency key it holds, and no event, as an
    /// event exists exactly when its change does.
    pub(super) async fn commit_unchanged(
        &self,
        mut tx: Transaction<'static, Any>,
        event: Event<'_>,
    ) -> StoreResult<()> {
        self.record_writes(&mut tx, &[], &[event]).await?;
        self.store.commit_events(tx).await
    }

    /// Records events in a transaction that will commit them with what they record.
    pub(super) async fn record_in(
        &self,
        tx: &mut Transaction<'_, Any>,
        events: &[Event<'_>],
    ) -> StoreResult<()> {
        self.record_writes(tx, events, &[]).await
    }

    /// Records events as [`Self::record_in`] does, and beside them writes `told_by_others`
    /// in the audit log only: a call whose change the events tell (a patient's labels set
    /// through updatePatient are its label events, without a patient.updated).
    pub(super) async fn record_in_beside(
        &self,
        tx: &mut Transaction<'_, Any>,
        events: &[Event<'_>],
        told_by_others: &[Event<'_>],
    ) -> StoreResult<()> {
        self.record_writes(tx, events, told_by_others).await
    }

    /// Records writes in the audit log: `events` in the log of events too, `audit_only` not.
    async fn record_writes(
        &self,
        tx: &mut Transaction<'_, Any>,
        events: &[Event<'_>],
        audit_only: &[Event<'_>],
    ) -> StoreResult<()> {
        let Some(author) = self.author else {
            return Err(StoreError::Config(
                "a write has no author to record in the audit log".into(),
            ));
        };
        if let Some(key) = author.key {
            self.mark_key_ran(tx, key).await?;
        }
        self.record_events(tx, events).await?;
        let rows: Vec<Row> = events
            .iter()
            .chain(audit_only)
            .map(|event| Row {
                actor: author.actor,
                operation: author.operation,
                action: event.action,
                resource_type: event.resource_type,
                resource_id: event.resource_id,
                patient_id: event.patient_id,
            })
            .collect();
        insert(tx, self.store.engine, self.practice_id, &rows).await
    }

    /// The practice's events, newest first: the writes and older reads of `audit_events`,
    /// and the reads of `audit_reads`, one event per record read. Each source gives at most
    /// the rows the page reaches (every row of reads is at least one event), merged here.
    pub async fn list_audit_events(
        &self,
        filter: &AuditFilter,
        page: PageRequest,
    ) -> StoreResult<Page<AuditEvent>> {
        let reach = page.offset() + page.limit();
        // The reads this server has answered, all of them (see [`super::journal`]).
        self.store.move_reads().await?;
        let events = self.events_in_log(filter, reach).await?;
        let reads = self.reads_in_log(filter, reach).await?;
        let patient = filter.patient_id.as_deref();
        let expanded = reads.iter().flat_map(|row| row.events(patient));
        let skip = usize::try_from(page.offset()).unwrap_or(usize::MAX);
        let take = usize::try_from(page.limit()).unwrap_or(usize::MAX);
        let rows = newest_first(events.into_iter(), expanded)
            .skip(skip)
            .take(take)
            .collect();
        Ok(page.finish(rows))
    }

    /// The newest `reach` events of `audit_events` that `filter` lets through.
    async fn events_in_log(
        &self,
        filter: &AuditFilter,
        reach: i64,
    ) -> StoreResult<Vec<AuditEvent>> {
        let mut args = Args::default();
        let mut sql = format!("SELECT {EVENT_COLUMNS} FROM audit_events WHERE practice_id = $1");
        if let Some(patient_id) = &filter.patient_id {
            sql += &format!(" AND patient_id = {}", args.add(patient_id));
        }
        sql += &filter.conditions(&mut args);
        sql += &format!(" ORDER BY at DESC, id DESC LIMIT {}", args.add(reach));
        let query = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(self.practice_id);
        Ok(args.bind(query).fetch_all(self.read()).await?)
    }

    /// The newest `reach` rows of `audit_reads` that `filter` lets through.
    async fn reads_in_log(&self, filter: &AuditFilter, reach: i64) -> StoreResult<Vec<ReadRow>> {
        let mut args = Args::default();
        let mut from = String::from("audit_reads WHERE practice_id = $1");
        if let Some(patient_id) = &filter.patient_id {
            // The patient's reads: those in their index (`audit_read_patients` holds
            // PostgreSQL's from before migration 0026 and SQLite's from before 0025), and
            // (SQLite) those not yet moved there, each then read by its key. (Led by the log's
            // order of time instead, SQLite went through every read of the practice looking
            // for the patient's: 0.12 s with 800,000 reads in the log.)
            let patient = args.add(patient_id.as_str());
            let mut found = format!(
                "SELECT read_id AS found_id FROM audit_read_patients WHERE practice_id = $1 \
                 AND patient_id = {patient}"
            );
            if self.store.engine == Engine::Postgres {
                // The rows that list the patient, through the GIN index of their lists, then
                // those of the practice. Beside the list's condition, the practice's could
                // lead the planner through every read of the practice instead of the index:
                // `OFFSET 0` keeps it outside.
                found += &format!(
                    " UNION ALL SELECT g.id FROM (SELECT practice_id, id FROM audit_reads \
                     WHERE patients @> ARRAY[CAST({patient} AS TEXT)] OFFSET 0) AS g \
                     WHERE g.practice_id = $1"
                );
            } else {
                // The runs of each of the patient's spans (of a closed span, those it notes),
                // each run's entries of the patient by their key (`CROSS JOIN` keeps SQLite to
                // that order).
                found += &format!(
                    " UNION ALL SELECT f.read_id FROM audit_read_buckets b \
                     CROSS JOIN audit_read_span_runs k CROSS JOIN audit_read_runs f \
                     WHERE b.practice_id = $1 AND b.patient_id = {patient} \
                     AND k.i >= coalesce(b.low, 0) AND k.i <= coalesce(b.high, {last}) \
                     AND (b.runs IS NULL OR (b.runs >> k.i) & 1 = 1) \
                     AND f.run = b.bucket * {RUNS_A_SPAN} - {offset} + k.i \
                     AND f.practice_id = $1 AND f.patient_id = {patient}",
                    offset = offset_of(&patient),
                    last = RUNS_A_SPAN - 1,
                );
                // The reads past the mark, by row id (`+` keeps SQLite off the index of the
                // practice, which would read every read of it).
                found += &format!(
                    " UNION ALL SELECT r.id FROM audit_reads r \
                     WHERE r.rowid > (SELECT through FROM audit_reads_indexed) \
                     AND +r.practice_id = $1 AND EXISTS (SELECT 1 FROM {} \
                     WHERE e.value->>3 = {patient})",
                    self.store.engine.json_rows_of("r.reads", "e")
                );
            }
            from = format!(
                "({found}) AS f CROSS JOIN audit_reads a \
                 WHERE a.practice_id = $1 AND a.id = f.found_id"
            );
        }
        let mut sql = format!("SELECT {READ_COLUMNS} FROM {from}");
        sql += &filter.conditions(&mut args);
        sql += &format!(" ORDER BY at DESC, id DESC LIMIT {}", args.add(reach));
        let query = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(self.practice_id);
        Ok(args.bind(query).fetch_all(self.read()).await?)
    }
}

impl AuditFilter {
    /// The filter's conditions on the actor and the time, each after an AND (the patient's
    /// is each log's own: a column of events, an index of reads).
    fn conditions(&self, args: &mut Args) -> String {
        let mut sql = String::new();
        if let Some(actor_id) = &self.actor_id {
            sql += &format!(" AND actor_id = {}", args.add(actor_id));
        }
        if let Some((from, to)) = self.at {
            let (from, to) = (args.add(from), args.add(to));
            sql += &format!(" AND at >= {from} AND at <= {to}");
        }
        sql
    }
}

const READ_COLUMNS: &str = "id, at, actor_type, actor_id, actor_name, reads";

/// Reads of one practice by one caller, as a row of `audit_reads` keeps them (a batch's
/// requests by that caller; see [`ReadsRow::gather`]).
#[derive(Debug, FromRow)]
struct ReadRow {
    id: String,
    at: i64,
    actor_type: String,
    actor_id: String,
    actor_name: Option<String>,
    /// [`Read::to_json`].
    reads: String,
}

impl ReadRow {
    /// An event per record read (of `patient`'s, when given), newest first: the n-th record
    /// read is `{id}.{n}`, so that the order of ids is that of the reads.
    fn events<'r>(&'r self, patient: Option<&'r str>) -> impl Iterator<Item = AuditEvent> + 'r {
        let reads = Read::from_json(&self.reads);
        let count = reads.len();
        reads
            .into_iter()
            .enumerate()
            .rev()
            .filter(move |(_, read)| patient.is_none_or(|p| read.patient_id.as_deref() == Some(p)))
            .map(move |(n, read)| AuditEvent {
                id: format!("{}.{:0width$}", self.id, n, width = digits(count)),
                at: self.at,
                actor_type: self.actor_type.clone(),
                actor_id: self.actor_id.clone(),
                actor_name: self.actor_name.clone(),
                action: "read".into(),
                operation: Some(read.operation),
                resource_type: Some(read.resource_type.into()),
                resource_id: Some(read.resource_id),
                patient_id: read.patient_id,
            })
    }
}

/// Digits in the largest index of `count` items (at least one).
fn digits(count: usize) -> usize {
    count.saturating_sub(1).max(1).ilog10() as usize + 1
}

/// Two lists of events, each newest first, as one, newest first.
fn newest_first(
    a: impl Iterator<Item = AuditEvent>,
    b: impl Iterator<Item = AuditEvent>,
) -> impl Iterator<Item = AuditEvent> {
    let (mut a, mut b) = (a.peekable(), b.peekable());
    std::iter::from_fn(move || match (a.peek(), b.peek()) {
        (Some(x), Some(y)) if (x.at, &x.id) >= (y.at, &y.id) => a.next(),
        (Some(_), Some(_)) => b.next(),
        (Some(_), None) => a.next(),
        (None, _) => b.next(),
    })
}

impl Store {
    /// Records the reads of many requests in one transaction, one commit for all of them: a
    /// row of `audit_reads` per practice and actor (see [`ReadsRow::gather`]), and who read
    /// each patient.
    ///
    /// On PostgreSQL, the row lists the patients its reads reached, which a GIN index takes
    /// into its list of pending entries in one append (migrations 0026 and 0027;
    /// [`Store::index_reads`] moves them into the index proper behind the reads): one round
    /// trip for the batch, and no entry per patient at a random place of a b-tree. On SQLite,
    /// whose commit writes every page it changed to the log, entries landing at random places
    /// of that b-tree would cost a page each (a page of 100 patients: 100 pages), so only the
    /// row of `audit_reads` is written, at the end of its b-trees, and [`Store::index_reads`]
    /// moves many requests' patients into the index later, in its order. Either way, "who
    /// read this patient" finds the read from the moment it is recorded.
    ///
    /// SQLite in a file (the one case not in memory): the rows are appended to this server's
    /// journal of reads and flushed instead, one flush for the batch, and
    /// [`Store::move_reads`] inserts them later (see [`super::journal`]): this server lists
    /// them at once (it moves its journal first), another server on the same file once this
    /// one has moved them, within about a second.
    pub async fn record_reads(&self, batch: &[Reads]) -> StoreResult<()> {
        let at = now_ms();
        let gathered: Vec<(ReadsRow, Line)> = ReadsRow::gather(batch)
            .into_iter()
            .map(|row| {
                let line = row.line(at);
                (row, line)
            })
            .collect();
        if gathered.is_empty() {
            return Ok(());
        }
        if let Some(journal) = &self.journal {
            // SQLite in a file: appended to this server's journal and flushed, and moved
            // into `audit_reads` within a second ([`Store::move_reads`]).
            let mut lines = String::new();
            for (_, row) in &gathered {
                lines += &serde_json::to_string(row).map_err(std::io::Error::other)?;
                lines.push('\n');
            }
            let journal = journal.clone();
            return blocking(move || journal.append(lines.as_bytes())).await;
        }
        match self.engine {
            // One statement, which commits alone: a batch costs one round trip. Each row
            // lists the patients its reads reached, for the index of who read each patient
            // (migration 0026).
            Engine::Postgres => {
                let rows: Vec<_> = gathered
                    .iter()
                    .map(|(reads, line)| {
                        let mut patients: Vec<&str> = reads
                            .reads
                            .iter()
                            .filter_map(|read| read.patient_id.as_deref())
                            .collect();
                        patients.sort_unstable();
                        patients.dedup();
                        let (practice, id, at, kind, actor, name, reads) = line;
                        (practice, id, at, kind, actor, name, reads, patients)
                    })
                    .collect();
                let rows = serde_json::to_string(&rows).map_err(std::io::Error::other)?;
                // On a warm connection (PostgreSQL's pool is one for reads and writes): taken
                // from the pool and given back, each batch's connection was checked on its way
                // back with a round trip of its own.
                sqlx::query(sqlx::AssertSqlSafe(self.insert_reads()))
                    .bind(rows)
                    .execute(&self.reader)
                    .await?;
            }
            // One statement, which commits alone; the index of who read each patient takes
            // the row later (see [`Store::index_reads`]).
            Engine::Sqlite => {
                let rows: Vec<&Line> = gathered.iter().map(|(_, row)| row).collect();
                let rows = serde_json::to_string(&rows).map_err(std::io::Error::other)?;
                sqlx::query(sqlx::AssertSqlSafe(self.insert_reads()))
                    .bind(rows)
                    .execute(&self.write)
                    .await?;
            }
        }
        Ok(())
    }

    /// The insert of rows of `audit_reads` given as one JSON parameter (`$1`), an array of
    /// [`Line`]s; on PostgreSQL each with an eighth element, the patients its reads reached
    /// (their list NULL for none: migration 0026).
    fn insert_reads(&self) -> String {
        let (column, patients) = match self.engine {
            Engine::Postgres => (
                ", patients",
                ", NULLIF(ARRAY(SELECT jsonb_array_elements_text(r.value->7)), '{}')",
            ),
            Engine::Sqlite => ("", ""),
        };
        format!(
            "INSERT INTO audit_reads (practice_id, {READ_COLUMNS}{column}) \
             SELECT r.value->>0, r.value->>1, CAST(r.value->>2 AS BIGINT), r.value->>3, \
             r.value->>4, r.value->>5, r.value->>6{patients} FROM {}",
            self.engine.json_rows(1, false)
        )
    }

    /// SQLite in a file: moves the reads of this server's journal, and of up to
    /// [`ORPHANS_A_MOVE`] journals that no process writes any more, into `audit_reads` (see
    /// [`super::journal`]), and removes the files; returns how many rows of reads it moved.
    /// A line already moved (by a mover that died before it removed its file) is one row
    /// still. A file that fails for a passing reason (the database busy, a full disk) stays,
    /// to be moved by the next call (or the next server), and the others are moved all the
    /// same; the first such failure is returned. A file the log refuses is set aside for an
    /// operator ([`super::journal::Journal::quarantine`]). Elsewhere: nothing to move, 0.
    pub async fn move_reads(&self) -> StoreResult<u64> {
        self.move_reads_then(false).await
    }

    /// [`Store::move_reads`] for the mover of every second: the next journal is made before
    /// the one being written is set aside, and takes its place, so that no batch of reads
    /// waits for one to be made ([`super::journal::Journal::set_aside_making_the_next`]).
    pub async fn move_reads_making_the_next(&self) -> StoreResult<u64> {
        self.move_reads_then(true).await
    }

    async fn move_reads_then(&self, making_the_next: bool) -> StoreResult<u64> {
        let Some(journal) = &self.journal else {
            return Ok(0);
        };
        let _one_mover = journal.moving.lock().await;
        let found = {
            let journal = journal.clone();
            blocking(move || {
                let set_aside = if making_the_next {
                    journal.set_aside_making_the_next().unwrap_or_else(|error| {
                        // The next batch makes one, as it would have.
                        tracing::warn!(%error, "could not make the next journal of reads ahead");
                        journal.set_aside()
                    })
                } else {
                    journal.set_aside()
                };
                let mut files: Vec<_> = set_aside.into_iter().collect();
                files.extend(journal.orphans(ORPHANS_A_MOVE)?);
                Ok(files)
            })
            .await?
        };
        let mut moved = 0;
        let mut failed = None;
        // A file at a time (about a second of reads each), read into memory only when its
        // turn comes.
        for file in found {
            match self.move_journal(journal, file).await {
                Ok(count) => moved += count,
                Err(error) => {
                    tracing::warn!(%error, "could not move a journal of reads into the audit log: it is tried again");
                    failed.get_or_insert(error);
                }
            }
        }
        match failed {
            Some(error) => Err(error),
            None => Ok(moved),
        }
    }

    /// Moves one journal's lines into `audit_reads` and removes it; see [`Store::move_reads`].
    async fn move_journal(
        &self,
        journal: &std::sync::Arc<super::journal::Journal>,
        file: super::journal::Open,
    ) -> StoreResult<u64> {
        // Read, checked and cut into statements' parameters off the runtime's threads, the
        // file's text dropped once cut: a second of a busy server's reads is thousands of
        // lines, and of pages of bookings megabytes.
        let (lines, chunks, file) = blocking(move || {
            let mut file = file;
            let contents = file.contents()?;
            let lines = super::journal::lines(&contents);
            let chunks = json_arrays(&lines.whole, MOVE_STATEMENT_TEXT);
            let lines = super::journal::Counted::from(&lines);
            Ok((lines, chunks, file))
        })
        .await?;
        if lines.damaged > 0 {
            refused(journal, file, "lines that are not rows of reads".into()).await;
            return Ok(0);
        }
        if lines.cut_short {
            tracing::info!(
                file = %file.path.display(),
                "a journal of reads ends in a line cut short by a crash (never answered): left out"
            );
        }
        // (`WHERE true`: SQLite reads an ON CONFLICT after a bare FROM as the join's.)
        let sql = format!(
            "{} WHERE true ON CONFLICT (practice_id, id) DO NOTHING",
            self.insert_reads()
        );
        // One commit for the whole file (about a second of reads): each commit empties every
        // reading connection's cache of pages (SQLite drops all it holds once another
        // connection has changed the file), and a second of a busy server's reads was six
        // commits of a thousand.
        // (A journal made ahead and never written holds nothing: no transaction.)
        if !chunks.is_empty() {
            let mut tx = self.begin_write().await?;
            for chunk in chunks {
                let inserted = sqlx::query(sqlx::AssertSqlSafe(sql.as_str()))
                    .bind(chunk)
                    .execute(&mut *tx)
                    .await;
                match inserted {
                    Ok(_) => {}
                    Err(sqlx::Error::Database(error))
                        if matches!(
                            error.kind(),
                            sqlx::error::ErrorKind::ForeignKeyViolation
                                | sqlx::error::ErrorKind::NotNullViolation
                                | sqlx::error::ErrorKind::CheckViolation
                        ) =>
                    {
                        let why = error.message().to_string();
                        drop(tx);
                        refused(journal, file, why).await;
                        return Ok(0);
                    }
                    Err(error) => return Err(error.into()),
                }
            }
            tx.commit().await?;
        }
        let path = file.path.clone();
        blocking(move || match std::fs::remove_file(&path) {
            // Another mover that took it too (both found it let go) removed it.
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(error),
            _ => Ok(()),
        })
        .await?;
        drop(file);
        Ok(lines.whole as u64)
    }

    /// Whether recording a batch of reads is a flush of a file (SQLite in a file: its journal
    /// of reads), rather than a statement.
    pub fn flushes_reads(&self) -> bool {
        self.journal.is_some()
    }

    /// Brings the index of who read each patient up to date behind the reads, one
    /// transaction; says how much it took and whether it stopped short of the end.
    ///
    /// SQLite: indexes the patients of the next `limit` rows of `audit_reads` past the mark of
    /// `audit_reads_indexed` as a run of its own, and moves the mark past them, in one
    /// transaction. The run's entries go into `audit_read_runs` under the run's number, after
    /// every entry before them, and each patient's span of [`RUNS_A_SPAN`] runs into
    /// `audit_read_buckets` unless it is there already (migration 0025 says why), its `low`
    /// the span's first run that read the patient from the start (migration 0025 leaves it
    /// NULL until the span closes; a reader takes NULL for the span's first run). It stops
    /// before a row that would take the batch's lists of reads past [`INDEX_BATCH_TEXT`] (the
    /// first row is always taken): a page of 100 bookings is 100 entries, and a batch of
    /// thousands of them would hold SQLite's one writer, and every write, for seconds. A crash
    /// before the commit leaves the rows to do again.
    ///
    /// PostgreSQL: moves the entries pending in the GIN index of each read's patients into
    /// the index proper (`gin_clean_pending_list`, migrations 0026 and 0027), so that a
    /// request's insert need not when the list outgrows `gin_pending_list_limit` (4 MB by
    /// default: more than a second of a busy server's reads), and a patient's trail does not
    /// go through a long list; `rows` is the pages of the list it emptied, `limit` does not
    /// apply, and there is never more. One server at a time: while another one's call runs
    /// (which holds [`CLEANING_READS`], an advisory lock, until its statement ends), this one
    /// does nothing rather than wait for it on a connection of the pool. PostgreSQL lets only
    /// the index's owner do it: the role that ran the migrations.
    pub async fn index_reads(&self, limit: i64) -> StoreResult<Indexed> {
        if self.engine == Engine::Postgres {
            let (pages,): (i64,) = sqlx::query_as(
                "SELECT CASE WHEN pg_try_advisory_xact_lock($1) \
                 THEN gin_clean_pending_list('audit_reads_patients'::regclass) ELSE 0 END",
            )
            .bind(CLEANING_READS)
            .fetch_one(&self.write)
            .await?;
            return Ok(Indexed {
                rows: u64::try_from(pages).unwrap_or_default(),
                more: false,
            });
        }
        let mut tx = self.begin_write().await?;
        // The writing transaction holds the file: nothing is appended meanwhile. The rows
        // past the mark, at most `limit`, as far as their lists of reads stay within the
        // batch's text (`before`: the text of the rows ahead of each).
        let (from, run, taken, to, within): (i64, i64, i64, Option<i64>, Option<i64>) =
            sqlx::query_as(
                "SELECT (SELECT through FROM audit_reads_indexed), \
             (SELECT runs FROM audit_reads_indexed) + 1, COUNT(*), MAX(rowid), \
             MAX(within) FROM (SELECT rowid, SUM(len) OVER (ORDER BY rowid) - len AS before, \
             COUNT(*) OVER () AS within FROM (SELECT rowid, length(reads) AS len \
             FROM audit_reads WHERE rowid > (SELECT through FROM audit_reads_indexed) \
             ORDER BY rowid LIMIT $1)) WHERE before < $2",
            )
            .bind(limit)
            .bind(INDEX_BATCH_TEXT)
            .fetch_one(&mut *tx)
            .await?;
        let Some(to) = to else {
            return Ok(Indexed::default());
        };
        let sql = format!(
            "INSERT OR IGNORE INTO audit_read_runs (run, practice_id, patient_id, read_id) \
             SELECT DISTINCT $3, r.practice_id, e.value->>3, r.id FROM audit_reads r \
             CROSS JOIN {} WHERE r.rowid > $1 AND r.rowid <= $2 \
             AND e.value->>3 IS NOT NULL ORDER BY 2, 3, 4",
            self.engine.json_rows_of("r.reads", "e")
        );
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(from)
            .bind(to)
            .bind(run)
            .execute(&mut *tx)
            .await?;
        // The run's patients, each once, from the entries just written: each one's span,
        // unless it is noted already, with this run as the first of the span that read them
        // (`low`).
        for sql in [
            format!(
                "INSERT OR IGNORE INTO audit_read_buckets \
                 (practice_id, patient_id, bucket, ends, low) \
                 SELECT practice_id, patient_id, ($1 + {offset}) / {RUNS_A_SPAN}, \
                 ($1 + {offset}) / {RUNS_A_SPAN} * {RUNS_A_SPAN} - {offset} + {last}, \
                 ($1 + {offset}) % {RUNS_A_SPAN} \
                 FROM audit_read_runs WHERE run = $1 GROUP BY practice_id, patient_id \
                 ORDER BY 1, 2",
                offset = offset_of("patient_id"),
                last = RUNS_A_SPAN - 1,
            ),
            // The spans whose last run this is: which of their runs read the patient, a bit
            // each, and the first and last of them (which closes them). Found through the
            // index of open spans, named: left to itself, SQLite may walk every span there is
            // for the order of the GROUP BY. Each span's runs are looked at from the first
            // that read the patient, noted when the span was (spans noted before that have
            // none: from the span's first run): a patient read once, as a page of patients
            // reads most of them, is looked for in half the runs on average, not all 64.
            format!(
                "UPDATE audit_read_buckets AS b SET runs = c.runs, low = c.low, high = c.high \
                 FROM (SELECT o.practice_id, o.patient_id, o.bucket, SUM(1 << k.i) AS runs, \
                 MIN(k.i) AS low, MAX(k.i) AS high \
                 FROM audit_read_buckets o INDEXED BY audit_read_buckets_open \
                 CROSS JOIN audit_read_span_runs k WHERE o.runs IS NULL AND o.ends <= $1 \
                 AND k.i >= coalesce(o.low, 0) AND k.i <= {last} \
                 AND EXISTS (SELECT 1 FROM audit_read_runs f \
                 WHERE f.run = o.ends - {last} + k.i AND f.practice_id = o.practice_id \
                 AND f.patient_id = o.patient_id) \
                 GROUP BY o.practice_id, o.patient_id, o.bucket) AS c \
                 WHERE b.practice_id = c.practice_id AND b.patient_id = c.patient_id \
                 AND b.bucket = c.bucket",
                last = RUNS_A_SPAN - 1,
            ),
        ] {
            sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(run)
                .execute(&mut *tx)
                .await?;
        }
        sqlx::query("UPDATE audit_reads_indexed SET through = $1, runs = $2")
            .bind(to)
            .bind(run)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        let within = within.unwrap_or(taken);
        Ok(Indexed {
            rows: u64::try_from(taken).unwrap_or(0),
            more: taken < within || within >= limit,
        })
    }
}

/// Sets aside a journal the audit log refuses, for an operator (renamed off the runtime's
/// threads), and says so in the log.
async fn refused(
    journal: &std::sync::Arc<super::journal::Journal>,
    file: super::journal::Open,
    why: String,
) {
    let path = file.path.display().to_string();
    let journal = journal.clone();
    let to = blocking(move || Ok(journal.quarantine(&file))).await;
    let set_aside_as = match to {
        Ok(Ok(to)) => to.display().to_string(),
        Ok(Err(error)) => error.to_string(),
        Err(error) => error.to_string(),
    };
    tracing::error!(
        file = %path,
        set_aside_as = %set_aside_as,
        why = why.as_str(),
        "a journal of reads cannot be moved into the audit log: it is set aside, its reads are not listed"
    );
}

/// `items` (each a JSON value's text) as JSON arrays of at most `most` bytes of items each
/// (an item longer than that alone), in order; an array's text is its items and their
/// brackets and commas.
fn json_arrays(items: &[&str], most: usize) -> Vec<String> {
    let mut arrays = Vec::new();
    let mut array = String::new();
    for item in items {
        if !array.is_empty() && array.len() + item.len() > most {
            array.push(']');
            arrays.push(std::mem::take(&mut array));
        }
        array.push(if array.is_empty() { '[' } else { ',' });
        array.push_str(item);
    }
    if !array.is_empty() {
        array.push(']');
        arrays.push(array);
    }
    arrays
}

/// Inserts rows of one practice, up to a thousand per statement. The rows travel as one JSON
/// parameter (see [`Engine::json_rows`]), so that the statement's text is the same whatever
/// their number.
async fn insert(
    tx: &mut Transaction<'_, Any>,
    engine: Engine,
    practice_id: &str,
    rows: &[Row<'_>],
) -> StoreResult<()> {
    let at = now_ms();
    let sql = format!(
        "INSERT INTO audit_events (practice_id, {EVENT_COLUMNS}) \
         SELECT $1, r.value->>0, $2, r.value->>1, r.value->>2, r.value->>3, r.value->>4, \
         r.value->>5, r.value->>6, r.value->>7, r.value->>8 FROM {}",
        engine.json_rows(3, false)
    );
    for chunk in rows.chunks(ROWS_PER_STATEMENT) {
        let values: Vec<serde_json::Value> = chunk
            .iter()
            .map(|row| {
                serde_json::json!([
                    new_id(),
                    row.actor.kind.as_str(),
                    row.actor.id,
                    row.actor.name,
                    row.action,
                    row.operation,
                    row.resource_type,
                    row.resource_id,
                    row.patient_id,
                ])
            })
            .collect();
        sqlx::query(sqlx::AssertSqlSafe(sql.as_str()))
            .bind(practice_id)
            .bind(at)
            .bind(serde_json::Value::Array(values).to_string())
            .execute(&mut **tx)
            .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(n: usize, patient: &str) -> Read {
        Read {
            operation: "bookings".into(),
            resource_type: "booking",
            resource_id: format!("b{n}"),
            patient_id: Some(patient.into()),
        }
    }

    fn event(id: &str, at: i64) -> AuditEvent {
        AuditEvent {
            id: id.into(),
            at,
            actor_type: "token".into(),
            actor_id: "t".into(),
            actor_name: None,
            action: "create".into(),
            operation: None,
            resource_type: None,
            resource_id: None,
            patient_id: None,
        }
    }

    #[test]
    fn lines_are_moved_in_arrays_of_a_bounded_text() {
        assert!(json_arrays(&[], 10).is_empty());
        assert_eq!(
            json_arrays(&["[1]", "[2]", "[3]"], 100),
            vec!["[[1],[2],[3]]"]
        );
        assert_eq!(
            json_arrays(&["[1]", "[2]", "[3]"], 7),
            vec!["[[1],[2]]", "[[3]]"]
        );
        assert_eq!(
            json_arrays(&["[\"long\"]", "[2]"], 3),
            vec!["[[\"long\"]]", "[[2]]"]
        );
        let items: Vec<String> = (0..500).map(|n| format!("[{n}]")).collect();
        let items: Vec<&str> = items.iter().map(String::as_str).collect();
        let arrays = json_arrays(&items, 100);
        assert!(arrays.len() > 1);
        let back: Vec<serde_json::Value> = arrays
            .iter()
            .flat_map(|a| serde_json::from_str::<Vec<serde_json::Value>>(a).expect("an array"))
            .collect();
        assert_eq!(back.len(), 500, "every item once, in order");
        assert_eq!(back[499], serde_json::json!([499]));
        assert!(arrays.iter().all(|a| a.len() <= 100 + 2));
    }

    #[test]
    fn a_row_of_reads_is_an_event_a_record_newest_first() {
        let reads: Vec<Read> = (0..12)
            .map(|n| read(n, if n % 2 == 0 { "p" } else { "q" }))
            .collect();
        let row = ReadRow {
            id: "r".into(),
            at: 5,
            actor_type: "token".into(),
            actor_id: "t".into(),
            actor_name: None,
            reads: Read::to_json(&reads),
        };
        let ids: Vec<String> = row.events(None).map(|e| e.id).collect();
        assert_eq!(ids.len(), 12);
        assert_eq!(ids[0], "r.11");
        assert_eq!(ids[11], "r.00");
        let mut sorted = ids.clone();
        sorted.sort_unstable_by(|a, b| b.cmp(a));
        assert_eq!(ids, sorted, "ids in the order of the events");
        let of_q: Vec<String> = row
            .events(Some("q"))
            .map(|e| e.resource_id.unwrap_or_default())
            .collect();
        assert_eq!(of_q, ["b11", "b9", "b7", "b5", "b3", "b1"]);

        // Merged with the writes' events by time, then id, newest first.
        let writes = vec![event("w2", 9), event("w1", 5), event("w0", 1)];
        let merged: Vec<String> = newest_first(writes.into_iter(), row.events(Some("p")))
            .map(|e| e.id)
            .collect();
        assert_eq!(
            merged,
            [
                "w2", "w1", "r.10", "r.08", "r.06", "r.04", "r.02", "r.00", "w0"
            ]
        );
    }

    #[test]
    fn a_batch_is_a_row_of_reads_a_practice_and_caller() {
        let caller = |id: &str| Actor {
            kind: ActorKind::Token,
            id: id.into(),
            name: Some("reader".into()),
        };
        let request = |practice: &str, actor: &str, reads: std::ops::Range<usize>| Reads {
            practice_id: practice.into(),
            actor: caller(actor),
            reads: reads.map(|n| read(n, "p")).collect(),
        };
        let batch = [
            request("one", "a", 0..2),
            request("one", "b", 2..3),
            request("two", "a", 3..4),
            request("one", "a", 4..4),
            request("one", "a", 5..7),
            // Would take a's row in "one" past its most reads: a row of its own, which the
            // next of a's requests joins.
            request("one", "a", 10..10 + READS_A_ROW - 3),
            request("one", "a", 7..8),
            request("one", "b", 8..9),
        ];
        let rows: Vec<(&str, &str, Vec<String>)> = ReadsRow::gather(&batch)
            .iter()
            .map(|row| {
                let ids = row.reads.iter().map(|r| r.resource_id.clone());
                (row.practice_id, row.actor.id.as_str(), ids.collect())
            })
            .collect();
        let ids = |range: std::ops::Range<usize>| range.map(|n| format!("b{n}")).collect();
        let big: Vec<String> = ids(10..10 + READS_A_ROW - 3);
        assert_eq!(rows.len(), 4);
        assert_eq!(
            rows[0],
            ("one", "a", ids(0..2).into_iter().chain(ids(5..7)).collect())
        );
        assert_eq!(
            rows[1],
            ("one", "b", vec!["b2".to_owned(), "b8".to_owned()])
        );
        assert_eq!(rows[2], ("two", "a", ids(3..4)));
        assert_eq!(rows[3].2.len(), READS_A_ROW - 2);
        assert_eq!(&rows[3].2[..READS_A_ROW - 3], &big[..]);
        assert_eq!(rows[3].2[READS_A_ROW - 3], "b7");
        assert!(ReadsRow::gather(&[request("one", "a", 0..0)]).is_empty());

        // The row's line: the caller and its reads, in order, as one request's were.
        let gathered = ReadsRow::gather(&batch);
        let line = gathered[1].line(7);
        assert_eq!((line.0.as_str(), line.2, line.4.as_str()), ("one", 7, "b"));
        assert_eq!(
            Read::from_json(&line.6),
            [read(2, "p"), read(8, "p")],
            "the reads as the log lists them"
        );
    }
}

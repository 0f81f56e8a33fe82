//! Patients and the labels on them, and the rules of a patient's life: a deleted patient no
//! longer changes; archiving and unarchiving go one way each.

use std::collections::HashMap;
use std::sync::LazyLock;

use sqlx::{Any, FromRow, Transaction};

use super::audit::Event;
use super::{
    Args, Change, Columns, Engine, Keyed, Page, PageRequest, PracticeStore, StoreResult, json_list,
    like_escape, new_id, now_ms, time_filters,
};
use crate::domain::limits::{MAX_LABELS_PER_PATIENT, MAX_SEARCH_MATCHES, MIN_INDEXED_SEARCH_CHARS};
use crate::domain::{Bound, Record, Refusal};

/// A patient as stored.
#[derive(Clone, Debug, Default, PartialEq, FromRow)]
pub struct Patient {
    pub id: String,
    #[sqlx(flatten)]
    pub fields: PatientFields,
    /// When the archive in force began; None when the patient is not archived.
    pub archived_at: Option<i64>,
    /// When the last archive began, kept once the patient is brought back (with its reason,
    /// comments and who made it).
    pub last_archived_at: Option<i64>,
    pub archive_reason: Option<String>,
    pub archive_comments: Option<String>,
    /// The staff user who archived the patient, if a staff user did.
    pub archived_by: Option<String>,
    pub unarchived_at: Option<i64>,
    pub unarchived_by: Option<String>,
    pub unarchive_reason: Option<String>,
    pub deleted_at: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
    pub membership_name: Option<String>,
    /// An ISO 8601 date.
    pub membership_start_date: Option<String>,
    /// JSON lists: see `patient_record`.
    pub phones: String,
    pub numbers: String,
    pub attributes: String,
    pub relationships: String,
    pub access_groups: String,
}

/// The fields of a patient that staff edit. `dob` is an ISO 8601 date.
#[derive(Clone, Debug, Default, PartialEq, FromRow)]
pub struct PatientFields {
    pub title: Option<String>,
    pub first_name: String,
    pub last_name: String,
    pub email: Option<String>,
    pub dob: Option<String>,
    pub gender: Option<String>,
    pub sex: Option<String>,
    pub address: Option<String>,
    pub city: Option<String>,
    pub postcode: Option<String>,
    pub country: Option<String>,
    pub phone_type: Option<String>,
    pub phone_number: Option<String>,
    pub comments: Option<String>,
    pub birth_surname: Option<String>,
    pub birth_name: Option<String>,
    pub birth_names: Option<String>,
    pub place_of_birth_name: Option<String>,
    pub place_of_birth_code: Option<String>,
    pub social_security_number: Option<String>,
    pub google_client_id: Option<String>,
    pub payment_reference: Option<String>,
    pub occupation: Option<String>,
    /// A patient on hold cannot be booked.
    pub on_hold: i64,
    /// JSON objects: see `patient_record::Ins` and `patient_record::Communication`.
    pub ins: Option<String>,
    pub communication: Option<String>,
}

impl Patient {
    /// Every column of a patient's row, one line each: what is inserted, updated and read.
    fn columns(&self) -> Columns {
        let f = &self.fields;
        Columns::default()
            .with("id", &self.id)
            .with("title", &f.title)
            .with("first_name", &f.first_name)
            .with("last_name", &f.last_name)
            .with("email", &f.email)
            .with("dob", &f.dob)
            .with("gender", &f.gender)
            .with("sex", &f.sex)
            .with("address", &f.address)
            .with("city", &f.city)
            .with("postcode", &f.postcode)
            .with("country", &f.country)
            .with("phone_type", &f.phone_type)
            .with("phone_number", &f.phone_number)
            .with("comments", &f.comments)
            .with("birth_surname", &f.birth_surname)
            .with("birth_name", &f.birth_name)
            .with("birth_names", &f.birth_names)
            .with("place_of_birth_name", &f.place_of_birth_name)
            .with("place_of_birth_code", &f.place_of_birth_code)
            .with("social_security_number", &f.social_security_number)
            .with("google_client_id", &f.google_client_id)
            .with("payment_reference", &f.payment_reference)
            .with("occupation", &f.occupation)
            .with("on_hold", f.on_hold)
            .with("ins", &f.ins)
            .with("communication", &f.communication)
            .with("membership_name", &self.membership_name)
            .with("membership_start_date", &self.membership_start_date)
            .with("phones", &self.phones)
            .with("numbers", &self.numbers)
            .with("attributes", &self.attributes)
            .with("relationships", &self.relationships)
            .with("access_groups", &self.access_groups)
            .with("archived_at", self.archived_at)
            .with("last_archived_at", self.last_archived_at)
            .with("archive_reason", &self.archive_reason)
            .with("archive_comments", &self.archive_comments)
            .with("archived_by", &self.archived_by)
            .with("unarchived_at", self.unarchived_at)
            .with("unarchived_by", &self.unarchived_by)
            .with("unarchive_reason", &self.unarchive_reason)
            .with("deleted_at", self.deleted_at)
            .with("created_at", self.created_at)
            .with("updated_at", self.updated_at)
    }

    /// What is written of the patient: its columns, and the text search looks in.
    fn row(&self) -> Columns {
        self.columns()
            .with("search_text", &self.fields.search_text())
    }

    /// A new patient, made now; its phone, if it has one, the first of its list.
    fn new(fields: PatientFields, now: i64) -> Patient {
        let mut patient = Patient {
            id: new_id(),
            fields,
            created_at: now,
            updated_at: now,
            phones: "[]".into(),
            numbers: "[]".into(),
            attributes: "[]".into(),
            relationships: "[]".into(),
            access_groups: "[]".into(),
            ..Patient::default()
        };
        patient.follow_first_phone();
        patient
    }

    /// A deleted patient no longer changes.
    fn check_changeable(&self) -> Result<(), Refusal> {
        match self.deleted_at {
            Some(_) => Err(Refusal::PatientDeleted),
            None => Ok(()),
        }
    }
}

/// The columns a patient is read with.
static PATIENT_COLUMNS: LazyLock<String> = LazyLock::new(|| Patient::default().columns().names());

impl PatientFields {
    /// What patients(search:) matches: first name, last name, full name, email and date of
    /// birth, lower-cased.
    fn search_text(&self) -> String {
        let mut text = format!("{} {}", self.first_name, self.last_name);
        for part in [&self.email, &self.dob].into_iter().flatten() {
            text.push(' ');
            text.push_str(part);
        }
        text.to_lowercase()
    }
}

/// One change to a patient's fields.
type FieldChange = Box<dyn FnOnce(&mut PatientFields) + Send>;

/// Changes to a patient's fields, each a function of the fields, applied in order to the
/// patient as it is when its row is held: concurrent changes to other fields are not lost.
#[derive(Default)]
pub struct PatientPatch {
    changes: Vec<FieldChange>,
}

impl PatientPatch {
    /// Adds a change.
    pub fn set(&mut self, change: impl FnOnce(&mut PatientFields) + Send + 'static) {
        self.changes.push(Box::new(change));
    }

    fn apply(self, fields: &mut PatientFields) {
        for change in self.changes {
            change(fields);
        }
    }
}

/// A label on a patient, with the label's current title and colour.
#[derive(Clone, Debug, FromRow)]
pub struct PatientLabel {
    /// The id of the label's place on the patient (what removePatientLabel takes).
    pub id: String,
    pub patient_id: String,
    /// The id of the label in the catalogue.
    pub label_id: String,
    pub title: String,
    pub color: Option<String>,
}

/// A patient's row with the labels on it, as a JSON list of `[id, label_id, title, color]` in
/// the order they were put on (see [`Engine::labels_of_patients_row`]).
#[derive(FromRow)]
struct WithLabels {
    #[sqlx(flatten)]
    patient: Patient,
    labels_on: String,
}

/// The labels on patients (`pl`), each with its label of the catalogue (`l`) for its title and
/// colour: what [`PracticeStore::labels_of_patients`] and [`Engine::labels_of_patients_row`]
/// both read, in [`LABELS_IN_ORDER`].
const LABELS_OF_PATIENTS: &str = "FROM patient_labels pl \
     JOIN labels l ON l.practice_id = pl.practice_id AND l.id = pl.label_id";

/// The order of a patient's labels: the order they were put on.
const LABELS_IN_ORDER: &str = "pl.created_at, pl.id";

impl Engine {
    /// A scalar subquery, beside a row of `patients`: the labels on that patient as a JSON
    /// list of `[id, label_id, title, color]`, in the order
    /// [`PracticeStore::labels_of_patients`] gives them; `[]` for none.
    fn labels_of_patients_row(self) -> String {
        let label = "(pl.id, pl.label_id, l.title, l.color)";
        let list = match self {
            Engine::Sqlite => {
                format!("json_group_array(json_array{label} ORDER BY {LABELS_IN_ORDER})")
            }
            Engine::Postgres => format!(
                "COALESCE(json_agg(json_build_array{label} ORDER BY {LABELS_IN_ORDER}), '[]')::text"
            ),
        };
        format!(
            "(SELECT {list} {LABELS_OF_PATIENTS} \
             WHERE pl.practice_id = patients.practice_id AND pl.patient_id = patients.id)"
        )
    }
}

/// What became of a label put on a patient.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Inserted {
    Yes,
    /// It is on the patient already, or the label or the patient is not there.
    No,
    /// The label was deleted as it was being put on.
    LabelGone,
}

/// A search that matches more patients than one search may touch: it must say more.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooBroad;

/// Which patients a list holds.
#[derive(Clone, Debug, Default)]
pub struct PatientFilter {
    /// Matched case-insensitively, as a substring, against name, email and date of birth.
    pub search: Option<String>,
    pub include_archived: bool,
    pub include_deleted: bool,
    /// Inclusive bounds, in milliseconds.
    pub created: Option<(i64, i64)>,
    pub updated: Option<(i64, i64)>,
}

impl Keyed for Patient {
    fn key(&self) -> &str {
        &self.id
    }
}

/// The order of a list of patients, which the index by name gives as it is read.
const BY_NAME: &str = "last_name, first_name, id";
/// The same order for the few patients a search found (at most [`MAX_SEARCH_MATCHES`]), as
/// an expression, so that no index can give it: the patients are then read by their key
/// and sorted, where SQLite would otherwise walk the whole practice by name to keep its order
/// and look each patient up in the list found (13 ms at 100,000 patients, against 0.02).
const FOUND_BY_NAME: &str = "last_name || '', first_name, id";

/// A search through SQLite's full-text table: `$1` the practice, `$2` the text as an FTS5
/// phrase (and [`SEARCH_LIMIT`], `$3`, the most rows). Each practice's rows are numbered in a range of their own
/// (migrations/sqlite/0011): asked for a phrase within that range, FTS5 reads the practice's
/// part of the index only. CROSS JOIN keeps the full-text table the outer loop: with a plain
/// JOIN, SQLite may walk the practice's rows and ask the index once for each, which is seconds
/// at 100,000 patients (a test below checks the plan).
const SQLITE_SEARCH: &str = "SELECT r.patient_id FROM patients_search s \
     CROSS JOIN patients_search_rows r ON r.row_id = s.rowid \
     WHERE patients_search MATCH $2 \
     AND s.rowid >= (SELECT mark_id * 4294967296 FROM patients_search_practices \
     WHERE practice_id = $1) \
     AND s.rowid <= (SELECT mark_id * 4294967296 + 4294967295 FROM patients_search_practices \
     WHERE practice_id = $1) \
     AND r.practice_id = $1";

/// The length of the pieces of PostgreSQL's index `patients_search_keys`
/// (migrations/postgres/0028 and 0029): a term this long or longer is looked up by its pieces.
const POSTGRES_PIECE_CHARS: usize = 5;

/// A search through PostgreSQL's index of the five-character pieces of each patient's search
/// text, each keyed by a tag of its practice: `$1` the practice, `$2` the term (lower-cased,
/// [`POSTGRES_PIECE_CHARS`] characters or more), and [`SEARCH_LIMIT`]. The index gives the
/// practice's patients holding a few pieces that cover the term, which are few where the term
/// names one patient, however many patients there are (every trigram of a name or a number is
/// in thousands of patients at 1,000,000, and a search went through each one's list); `strpos`
/// then decides. It is `strpos` and not LIKE so that the planner cannot take the trigram index
/// for the check.
const POSTGRES_SEARCH_BY_PIECES: &str = "SELECT id FROM patients WHERE practice_id = $1 \
     AND patient_search_keys(practice_id, search_text) @> patient_search_cover($1, $2) \
     AND strpos(search_text, $2) > 0";

/// The end of each search's statement: `$3` the most rows it reads.
const SEARCH_LIMIT: &str = " LIMIT $3";

impl PracticeStore<'_> {
    /// The patient with this id, deleted and archived ones included.
    pub async fn find_patient(&self, id: &str) -> StoreResult<Option<Patient>> {
        self.patient_by_id(id, "").await
    }

    /// The row of the patient with this id that the viewer sees, with its columns and
    /// `more` (more columns, after a comma), read as `T`.
    async fn patient_by_id<T>(&self, id: &str, more: &str) -> StoreResult<Option<T>>
    where
        T: for<'r> FromRow<'r, sqlx::any::AnyRow> + Send + Unpin,
    {
        let mut args = Args::default();
        let id_param = args.add(id);
        let visible = self.visible_patients(&mut args, "patients");
        let sql = format!(
            "SELECT {}{more} FROM patients WHERE practice_id = $1 AND id = {id_param}{visible}",
            *PATIENT_COLUMNS
        );
        Ok(args
            .bind(sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(self.practice_id))
            .fetch_optional(self.read())
            .await?)
    }

    /// The patient with this id and the labels on it, as [`PracticeStore::find_patient`] and
    /// [`PracticeStore::labels_of_patients`] give them, in one statement: for a request that
    /// asks for both, one trip to the database instead of two (on SQLite, a hop to a
    /// connection's thread and back each).
    pub async fn find_patient_with_labels(
        &self,
        id: &str,
    ) -> StoreResult<Option<(Patient, Vec<PatientLabel>)>> {
        let labels = format!(
            ", {} AS labels_on",
            self.store.engine.labels_of_patients_row()
        );
        let Some(WithLabels { patient, labels_on }) = self.patient_by_id(id, &labels).await? else {
            return Ok(None);
        };
        let labels: Vec<(String, String, String, Option<String>)> =
            serde_json::from_str(&labels_on).map_err(|e| sqlx::Error::Decode(Box::new(e)))?;
        let labels = labels
            .into_iter()
            .map(|(id, label_id, title, color)| PatientLabel {
                id,
                patient_id: patient.id.clone(),
                label_id,
                title,
                color,
            })
            .collect();
        Ok(Some((patient, labels)))
    }

    /// True when the practice has a patient (deleted and archived ones included), a label or a
    /// staff user: what demo data would be mixed with.
    pub async fn has_patients_labels_or_staff(&self) -> StoreResult<bool> {
        let (found,): (i64,) = sqlx::query_as(
            "SELECT CASE WHEN EXISTS (SELECT 1 FROM patients WHERE practice_id = $1) \
             OR EXISTS (SELECT 1 FROM labels WHERE practice_id = $1) \
             OR EXISTS (SELECT 1 FROM users WHERE practice_id = $1) THEN 1 ELSE 0 END",
        )
        .bind(self.practice_id)
        .fetch_one(self.read())
        .await?;
        Ok(found != 0)
    }

    /// The patients with these ids that the viewer sees, by id (ids the practice does not
    /// have are left out).
    pub async fn patients_by_ids(&self, ids: &[String]) -> StoreResult<HashMap<String, Patient>> {
        self.by_ids_seen("patients", &PATIENT_COLUMNS, ids, |args| {
            self.visible_patients(args, "patients")
        })
        .await
    }

    /// A page of patients, by last name then first name. A search of three characters or
    /// more goes through the search index and may touch at most [`MAX_SEARCH_MATCHES`]
    /// patients: one that matches more is refused as [`TooBroad`].
    pub async fn list_patients(
        &self,
        filter: &PatientFilter,
        page: PageRequest,
    ) -> StoreResult<Result<Page<Patient>, TooBroad>> {
        let mut args = Args::default();
        let mut conditions = String::new();
        let mut order = BY_NAME;
        if let Some(search) = &filter.search {
            let search = search.to_lowercase();
            if search.chars().count() >= MIN_INDEXED_SEARCH_CHARS {
                order = FOUND_BY_NAME;
                let Some(ids) = self.search_index(&search).await? else {
                    return Ok(Err(TooBroad));
                };
                conditions += &format!(
                    " AND id {}",
                    self.store
                        .engine
                        .in_list_at(&args.add(json_list(&ids).as_str()))
                );
            }
            // The index finds the candidates; LIKE decides (and alone looks, under three
            // characters, where there is no trigram to look up).
            let pattern = format!("%{}%", like_escape(&search));
            conditions += &format!(
                " AND search_text LIKE {} ESCAPE '\\'",
                args.add(pattern.as_str())
            );
        }
        conditions += &self.visible_patients(&mut args, "patients");
        let mut sql = format!(
            "SELECT {} FROM patients WHERE practice_id = $1{conditions}",
            *PATIENT_COLUMNS
        );
        if !filter.include_archived {
            sql += " AND archived_at IS NULL";
        }
        if !filter.include_deleted {
            sql += " AND deleted_at IS NULL";
        }
        sql += &time_filters(&mut args, filter.created, filter.updated);
        let (limit, offset) = (args.add(page.limit()), args.add(page.offset()));
        sql += &format!(" ORDER BY {order} LIMIT {limit} OFFSET {offset}");
        let query = args.bind(sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(self.practice_id));
        let rows = query.fetch_all(self.read()).await?;
        Ok(Ok(page.finish(rows)))
    }

    /// The ids of the practice's patients whose search text holds `search` (lower-cased,
    /// three characters or more), through the engine's index; None when there are more than
    /// [`MAX_SEARCH_MATCHES`]. PostgreSQL asks its index of five-character pieces
    /// ([`POSTGRES_SEARCH_BY_PIECES`]), or for a shorter term its trigram index; SQLite its
    /// full-text table, where each practice's rows carry a mark of their own, so that a search
    /// reads its own practice's part of the index only. A viewer kept to access groups counts
    /// only the patients they see: whether a search is too broad must not tell them of
    /// patients hidden from them.
    async fn search_index(&self, search: &str) -> StoreResult<Option<Vec<String>>> {
        let most = MAX_SEARCH_MATCHES as i64 + 1;
        // Each engine's statement takes the practice, the term as it wants it, and the most.
        let (sql, term) = match self.store.engine {
            Engine::Postgres if search.chars().count() >= POSTGRES_PIECE_CHARS => {
                (POSTGRES_SEARCH_BY_PIECES, search.to_string())
            }
            Engine::Postgres => (
                "SELECT id FROM patients WHERE practice_id = $1 \
                 AND search_text LIKE $2 ESCAPE '\\'",
                format!("%{}%", like_escape(search)),
            ),
            // An FTS5 query: the text as a quoted phrase (a phrase of trigrams matches where
            // the text holds it as a substring). A practice with no patient has no range, and
            // finds nothing.
            Engine::Sqlite => (
                SQLITE_SEARCH,
                format!("\"{}\"", search.replace('"', "\"\"")),
            ),
        };
        let hidden = match (self.viewer, self.store.engine) {
            (None, _) => String::new(),
            (Some(_), Engine::Postgres) => self.visible_patients_at("patients", "$4"),
            (Some(_), Engine::Sqlite) => format!(
                " AND EXISTS (SELECT 1 FROM patients p WHERE p.practice_id = $1 \
                 AND p.id = r.patient_id{})",
                self.visible_patients_at("p", "$4")
            ),
        };
        let sql = format!("{sql}{hidden}{SEARCH_LIMIT}");
        let query = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(self.practice_id)
            .bind(term)
            .bind(most);
        let query = match self.viewer {
            Some(groups) => query.bind(json_list(groups)),
            None => query,
        };
        let ids: Vec<(String,)> = query.fetch_all(self.read()).await?;
        Ok((ids.len() <= MAX_SEARCH_MATCHES).then(|| ids.into_iter().map(|(id,)| id).collect()))
    }

    /// Adds a patient with the given labels; `complete` adds the rest of its record (see
    /// `patient_record`) before it is written. Refused, with nothing written, if a label is not
    /// in the practice's catalogue.
    pub async fn create_patient(
        &self,
        fields: PatientFields,
        label_ids: &[String],
        complete: impl FnOnce(&mut Patient),
    ) -> StoreResult<Change<Patient>> {
        let mut patient = Patient::new(fields, now_ms());
        complete(&mut patient);
        let mut tx = self.begin_write().await?;
        let row = patient.row();
        row.clone()
            .bind(
                sqlx::query(sqlx::AssertSqlSafe(row.insert_sql("patients", 1)))
                    .bind(self.practice_id),
            )
            .execute(&mut *tx)
            .await?;
        for label_id in label_ids {
            if self
                .insert_patient_label(&mut tx, &patient.id, label_id)
                .await?
                != Inserted::Yes
            {
                // The transaction is dropped, and with it the patient.
                return Ok(Err(Refusal::LabelNotInCatalogue(label_id.clone()).into()));
            }
        }
        self.commit(tx, Event::patient("create", &patient.id))
            .await?;
        Ok(Ok(patient))
    }

    /// Adds many patients at once, each with the labels given (ids of the catalogue), in one
    /// transaction of statements of a few dozen rows: for demo data and imports. Returns
    /// their ids, in order.
    pub async fn import_patients(
        &self,
        patients: Vec<(PatientFields, Vec<String>)>,
    ) -> StoreResult<Vec<String>> {
        // Few enough that sqlx's binding of SQLite parameters, whose cost grows with the
        // square of their number, stays small (see [`Engine::json_rows`]); many enough that
        // PostgreSQL gets few round trips.
        const ROWS_PER_STATEMENT: usize = 40;
        let now = now_ms();
        let mut ids = Vec::with_capacity(patients.len());
        let mut labels = Vec::new();
        let mut tx = self.begin_write().await?;
        let mut rows = patients.into_iter().peekable();
        while rows.peek().is_some() {
            let chunk: Vec<Patient> = rows
                .by_ref()
                .take(ROWS_PER_STATEMENT)
                .map(|(fields, label_ids)| {
                    let patient = Patient::new(fields, now);
                    labels.extend(label_ids.into_iter().map(|l| (patient.id.clone(), l)));
                    patient
                })
                .collect();
            let sql = Patient::default().row().insert_sql("patients", chunk.len());
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(self.practice_id);
            for patient in &chunk {
                query = patient.row().bind(query);
                ids.push(patient.id.clone());
            }
            query.execute(&mut *tx).await?;
        }
        for chunk in labels.chunks(ROWS_PER_STATEMENT) {
            let row = |patient_id: &String, label_id: &String| {
                Columns::default()
                    .with("id", new_id().as_str())
                    .with("patient_id", patient_id)
                    .with("label_id", label_id)
                    .with("created_at", now)
            };
            let sql = row(&String::new(), &String::new()).insert_sql("patient_labels", chunk.len());
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(self.practice_id);
            for (patient_id, label_id) in chunk {
                query = row(patient_id, label_id).bind(query);
            }
            query.execute(&mut *tx).await?;
        }
        let mut events: Vec<Event> = ids.iter().map(|id| Event::patient("create", id)).collect();
        events.extend(
            labels
                .iter()
                .map(|(patient_id, label_id)| label_event("add_label", patient_id, label_id)),
        );
        self.record_in(&mut tx, &events).await?;
        self.store.commit_events(tx).await?;
        Ok(ids)
    }

    /// Changes a patient's fields; with `labels`, its labels become exactly these (labels it
    /// keeps keep their ids). Refused for a deleted patient, or a label not in the catalogue.
    pub async fn update_patient(
        &self,
        id: &str,
        patch: PatientPatch,
        labels: Option<&[String]>,
    ) -> StoreResult<Change<Patient>> {
        self.modify_patient(id, "update", labels, |p| {
            let phone = (p.fields.phone_type.clone(), p.fields.phone_number.clone());
            patch.apply(&mut p.fields);
            // As on create: a patient is known by a name or an email.
            let f = &p.fields;
            if f.first_name.is_empty() && f.last_name.is_empty() && f.email.is_none() {
                return Err(Refusal::PatientUnnamed);
            }
            if phone != (p.fields.phone_type.clone(), p.fields.phone_number.clone()) {
                p.follow_first_phone();
            }
            Ok(())
        })
        .await
    }

    /// Deletes a patient: a soft delete, after which the patient no longer changes.
    pub async fn delete_patient(&self, id: &str) -> StoreResult<Change<Patient>> {
        self.modify_patient(id, "delete", None, |p| {
            p.deleted_at = Some(now_ms());
            Ok(())
        })
        .await
    }

    /// Archives a patient, with why, by the staff user `by` if a staff user asks. Refused if
    /// it is archived already.
    pub async fn archive_patient(
        &self,
        id: &str,
        reason: Option<String>,
        comments: Option<String>,
        by: Option<&str>,
    ) -> StoreResult<Change<Patient>> {
        self.modify_patient(id, "archive", None, |p| {
            if p.archived_at.is_some() {
                return Err(Refusal::PatientAlreadyArchived);
            }
            p.archived_at = Some(now_ms());
            p.last_archived_at = p.archived_at;
            p.archive_reason = reason;
            p.archive_comments = comments;
            p.archived_by = by.map(str::to_string);
            Ok(())
        })
        .await
    }

    /// Brings an archived patient back, with why, by the staff user `by` if a staff user asks;
    /// the archive's information stays, beside the unarchiving's. Refused if it is not
    /// archived.
    pub async fn unarchive_patient(
        &self,
        id: &str,
        reason: Option<String>,
        by: Option<&str>,
    ) -> StoreResult<Change<Patient>> {
        self.modify_patient(id, "unarchive", None, |p| {
            if p.archived_at.is_none() {
                return Err(Refusal::PatientNotArchived);
            }
            p.archived_at = None;
            p.unarchived_at = Some(now_ms());
            p.unarchived_by = by.map(str::to_string);
            p.unarchive_reason = reason;
            Ok(())
        })
        .await
    }

    /// Reads the patient, refuses a deleted one (and, as not found, one the viewer does not
    /// see), applies `change` and writes it back, in one transaction that holds the patient's
    /// row, so that concurrent changes to other fields are not lost. With `labels`, the
    /// patient's labels become exactly these.
    pub(super) async fn modify_patient(
        &self,
        id: &str,
        action: &'static str,
        labels: Option<&[String]>,
        change: impl FnOnce(&mut Patient) -> Result<(), Refusal>,
    ) -> StoreResult<Change<Patient>> {
        let mut tx = self.begin_write().await?;
        // A no-op update takes the row lock on PostgreSQL and returns the row as it is now; a
        // patient the viewer does not see is not found, as its access groups are now.
        let mut args = Args::default();
        let returning = format!(" RETURNING {}", *PATIENT_COLUMNS);
        let sql = self.hold_patient(&mut args, id, "updated_at = updated_at", "", &returning);
        let found: Option<Patient> = args
            .bind(sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(self.practice_id))
            .fetch_optional(&mut *tx)
            .await?;
        let Some(mut patient) = found else {
            return Ok(Err(
                Refusal::NotFound(Record::Patient, id.to_string()).into()
            ));
        };
        // Its labels, as its other lists, change once an archived patient is brought back.
        let lists_kept = match (labels, patient.archived_at) {
            (Some(_), Some(_)) => Err(Refusal::PatientArchived),
            _ => Ok(()),
        };
        let before = patient.clone();
        if let Err(refusal) = patient
            .check_changeable()
            .and(lists_kept)
            .and_then(|()| change(&mut patient))
        {
            return Ok(Err(refusal.into()));
        }
        let mut changed = Vec::new();
        if let Some(labels) = labels {
            match self.replace_patient_labels(&mut tx, id, labels).await? {
                Ok(moved) => changed = moved,
                Err(unknown) => return Ok(Err(Refusal::LabelNotInCatalogue(unknown).into())),
            }
        }
        if patient == before && changed.is_empty() {
            self.commit_unchanged(tx, Event::patient(action, id))
                .await?;
            return Ok(Ok(patient));
        }
        // Events do not overlap: a change of the labels alone is its label events, as
        // addPatientLabel's is, without a patient.updated beside them.
        let fields_changed = patient != before;
        patient.updated_at = now_ms().max(patient.updated_at);
        let row = patient.row();
        row.clone()
            .bind(
                sqlx::query(sqlx::AssertSqlSafe(row.update_sql("patients"))).bind(self.practice_id),
            )
            .execute(&mut *tx)
            .await?;
        let (mut events, mut audit_only) = (Vec::new(), Vec::new());
        let update = Event::patient(action, id);
        if fields_changed {
            events.push(update);
        } else {
            audit_only.push(update);
        }
        events.extend(
            changed
                .iter()
                .map(|(action, label_id)| label_event(action, id, label_id)),
        );
        self.record_in_beside(&mut tx, &events, &audit_only).await?;
        self.store.commit_events(tx).await?;
        Ok(Ok(patient))
    }

    /// Makes the patient's labels exactly `label_ids` (labels it keeps keep their ids), and
    /// says which labels were put on and taken off ("add_label", "remove_label"); the first id
    /// that is not in the catalogue instead, having written nothing that stays.
    async fn replace_patient_labels(
        &self,
        tx: &mut Transaction<'_, Any>,
        patient_id: &str,
        label_ids: &[String],
    ) -> StoreResult<Result<Vec<(&'static str, String)>, String>> {
        for label_id in label_ids {
            let known = sqlx::query("SELECT id FROM labels WHERE practice_id = $1 AND id = $2")
                .bind(self.practice_id)
                .bind(label_id)
                .fetch_optional(&mut **tx)
                .await?;
            if known.is_none() {
                return Ok(Err(label_id.clone()));
            }
        }
        let sql = format!(
            "DELETE FROM patient_labels WHERE practice_id = $1 AND patient_id = $2 \
             AND NOT (label_id {}) RETURNING label_id",
            self.store.engine.in_list(3)
        );
        let removed: Vec<(String,)> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(self.practice_id)
            .bind(patient_id)
            .bind(json_list(label_ids))
            .fetch_all(&mut **tx)
            .await?;
        let mut changed: Vec<(&'static str, String)> = removed
            .into_iter()
            .map(|(label_id,)| ("remove_label", label_id))
            .collect();
        for label_id in label_ids {
            // Labels already on the patient are left as they are (ON CONFLICT DO NOTHING).
            match self.insert_patient_label(tx, patient_id, label_id).await? {
                Inserted::Yes => changed.push(("add_label", label_id.clone())),
                Inserted::No => {}
                // Deleted since it was checked above: refuse rather than report a change that
                // did not happen.
                Inserted::LabelGone => return Ok(Err(label_id.clone())),
            }
        }
        Ok(Ok(changed))
    }

    /// How many labels the patient has, in `tx` (which holds the patient's row).
    async fn label_count(
        &self,
        tx: &mut Transaction<'_, Any>,
        patient_id: &str,
    ) -> StoreResult<i64> {
        let (count,): (i64,) = sqlx::query_as(
            "SELECT COUNT(*) FROM patient_labels WHERE practice_id = $1 AND patient_id = $2",
        )
        .bind(self.practice_id)
        .bind(patient_id)
        .fetch_one(&mut **tx)
        .await?;
        Ok(count)
    }

    /// Puts a label of the catalogue on a patient that is not deleted. Writes nothing when the
    /// label is not in the catalogue (or was deleted as this ran), or is on the patient
    /// already; says which.
    async fn insert_patient_label(
        &self,
        tx: &mut Transaction<'_, Any>,
        patient_id: &str,
        label_id: &str,
    ) -> StoreResult<Inserted> {
        let inserted = sqlx::query(
            "INSERT INTO patient_labels (practice_id, id, patient_id, label_id, created_at) \
             SELECT p.practice_id, $2, p.id, l.id, $5 FROM patients p \
             JOIN labels l ON l.practice_id = p.practice_id AND l.id = $4 \
             WHERE p.practice_id = $1 AND p.id = $3 AND p.deleted_at IS NULL \
             ON CONFLICT DO NOTHING",
        )
        .bind(self.practice_id)
        .bind(new_id())
        .bind(patient_id)
        .bind(label_id)
        .bind(now_ms())
        .execute(&mut **tx)
        .await;
        match inserted {
            Ok(done) if done.rows_affected() == 1 => Ok(Inserted::Yes),
            Ok(_) => Ok(Inserted::No),
            // The label was found, then deleted (deleteLabel holds it until it commits).
            Err(sqlx::Error::Database(e)) if e.is_foreign_key_violation() => {
                Ok(Inserted::LabelGone)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Puts a label on a patient. Refused if the patient is deleted or archived, the label is
    /// unknown or already on the patient, or (told after those) the patient has as many labels
    /// as it may.
    pub async fn add_patient_label(
        &self,
        patient_id: &str,
        label_id: &str,
    ) -> StoreResult<Change<Patient>> {
        let mut tx = self.begin_write().await?;
        let live = self.touch_live_patient(&mut tx, patient_id).await?;
        if live
            && self
                .insert_patient_label(&mut tx, patient_id, label_id)
                .await?
                == Inserted::Yes
        {
            // Counted with the new one, in the transaction that holds the patient's row: one
            // too many is rolled back.
            if self.label_count(&mut tx, patient_id).await? > MAX_LABELS_PER_PATIENT as i64 {
                return Ok(Err(Refusal::TooMany(Bound::LabelsOnPatient).into()));
            }
            self.commit(tx, label_event("add_label", patient_id, label_id))
                .await?;
            return self.patient_as_changed(patient_id).await;
        }
        drop(tx);
        if let Err(refusal) = self.check_live(patient_id).await? {
            return Ok(Err(refusal.into()));
        }
        let refusal = match self.find_label(label_id).await? {
            None => Refusal::LabelNotInCatalogue(label_id.to_string()),
            Some(label) => Refusal::LabelAlreadyOnPatient { title: label.title },
        };
        Ok(Err(refusal.into()))
    }

    /// Takes a label off a patient. `label_id` is the id of the label's place on the patient
    /// (PatientLabel.id); the catalogue id of the label is accepted too.
    pub async fn remove_patient_label(
        &self,
        patient_id: &str,
        label_id: &str,
    ) -> StoreResult<Change<Patient>> {
        let mut tx = self.begin_write().await?;
        if !self.touch_live_patient(&mut tx, patient_id).await? {
            drop(tx);
            let refusal = self.check_live(patient_id).await?.err().unwrap_or_else(|| {
                // Deleted or gone between the two reads: it cannot be changed either way.
                Refusal::NotFound(Record::Patient, patient_id.to_string())
            });
            return Ok(Err(refusal.into()));
        }
        // The audit log and the event name the label of the catalogue, whichever id was given.
        let deleted: Option<(String,)> = sqlx::query_as(
            "DELETE FROM patient_labels WHERE practice_id = $1 AND patient_id = $2 \
             AND (id = $3 OR label_id = $3) RETURNING label_id",
        )
        .bind(self.practice_id)
        .bind(patient_id)
        .bind(label_id)
        .fetch_optional(&mut *tx)
        .await?;
        if let Some((catalogue_id,)) = deleted {
            self.commit(tx, label_event("remove_label", patient_id, &catalogue_id))
                .await?;
            return self.patient_as_changed(patient_id).await;
        }
        Ok(Err(Refusal::LabelNotOnPatient(label_id.to_string()).into()))
    }

    /// Marks a patient whose labels may change (neither deleted nor archived) and whom the
    /// viewer sees as changed now, which also holds its row until the transaction ends (so
    /// that it cannot be deleted, archived or hidden meanwhile). False if there is no such
    /// patient.
    async fn touch_live_patient(
        &self,
        tx: &mut Transaction<'_, Any>,
        patient_id: &str,
    ) -> StoreResult<bool> {
        let mut args = Args::default();
        let now = args.add(now_ms());
        let sql = self.hold_patient(
            &mut args,
            patient_id,
            &format!("updated_at = {now}"),
            " AND deleted_at IS NULL AND archived_at IS NULL",
            "",
        );
        let touched = args
            .bind(sqlx::query(sqlx::AssertSqlSafe(sql)).bind(self.practice_id))
            .execute(&mut **tx)
            .await?;
        Ok(touched.rows_affected() == 1)
    }

    /// The statement that holds the row of patient `id` for a write, found only if the viewer
    /// sees it (as its access groups are when the row is held): `UPDATE patients SET {set}`,
    /// where `and` holds too, then `returning` (` RETURNING ...`, or nothing). Its parameters
    /// go in `args`.
    pub(super) fn hold_patient(
        &self,
        args: &mut Args,
        id: &str,
        set: &str,
        and: &str,
        returning: &str,
    ) -> String {
        let id = args.add(id);
        let visible = self.visible_patients(args, "patients");
        format!(
            "UPDATE patients SET {set} WHERE practice_id = $1 AND id = {id}{and}{visible}\
             {returning}"
        )
    }

    /// Whether a patient's labels can change: it exists, and is neither deleted nor archived
    /// (an archived patient's lists change once it is brought back).
    async fn check_live(&self, id: &str) -> StoreResult<Result<(), Refusal>> {
        Ok(match self.find_patient(id).await? {
            None => Err(Refusal::NotFound(Record::Patient, id.to_string())),
            Some(p) if p.deleted_at.is_none() && p.archived_at.is_some() => {
                Err(Refusal::PatientArchived)
            }
            Some(p) => p.check_changeable(),
        })
    }

    /// The patient as a change left it.
    async fn patient_as_changed(&self, id: &str) -> StoreResult<Change<Patient>> {
        Ok(self
            .find_patient(id)
            .await?
            .ok_or_else(|| Refusal::NotFound(Record::Patient, id.to_string()).into()))
    }

    /// The labels on each of these patients, in the order they were put on; an empty list
    /// for each that has none, so that a loader keeps that answer as it keeps the others
    /// (without it, a page's patients without labels were each asked for again).
    pub async fn labels_of_patients(
        &self,
        patient_ids: &[String],
    ) -> StoreResult<HashMap<String, Vec<PatientLabel>>> {
        let mut by_patient: HashMap<String, Vec<PatientLabel>> = patient_ids
            .iter()
            .map(|id| (id.clone(), Vec::new()))
            .collect();
        if patient_ids.is_empty() {
            return Ok(by_patient);
        }
        let sql = format!(
            "SELECT pl.id, pl.patient_id, pl.label_id, l.title, l.color {LABELS_OF_PATIENTS} \
             WHERE pl.practice_id = $1 AND pl.patient_id {} ORDER BY {LABELS_IN_ORDER}",
            self.store.engine.in_list(2)
        );
        let rows: Vec<PatientLabel> = self.read_for_ids(&sql, patient_ids).await?;
        for row in rows {
            by_patient
                .entry(row.patient_id.clone())
                .or_default()
                .push(row);
        }
        Ok(by_patient)
    }
}

/// A label put on or taken off a patient.
fn label_event<'e>(action: &'static str, patient_id: &'e str, label_id: &'e str) -> Event<'e> {
    Event {
        action,
        resource_type: "label",
        resource_id: label_id,
        patient_id: Some(patient_id),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The patients a search found are read by their key, not by walking the practice's
    /// index by name.
    #[tokio::test]
    async fn the_patients_a_search_found_are_read_by_their_key() {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = format!("sqlite://{}", dir.path().join("plan.db").display());
        let store = super::super::Store::open(&url, &super::super::PoolSettings::default())
            .await
            .expect("open");
        let sql = format!(
            "EXPLAIN QUERY PLAN SELECT id FROM patients WHERE practice_id = $1 AND id {} \
             AND archived_at IS NULL ORDER BY {FOUND_BY_NAME} LIMIT 26",
            Engine::Sqlite.in_list_at("$2")
        );
        let plan: Vec<(i64, i64, i64, String)> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind("p")
            .bind("[\"a\"]")
            .fetch_all(&store.read)
            .await
            .expect("plan");
        let steps: Vec<&str> = plan.iter().map(|(_, _, _, step)| step.as_str()).collect();
        assert!(
            steps[0].contains("sqlite_autoindex_patients_1 (practice_id=? AND id=?)"),
            "{steps:?}"
        );
    }

    /// The search reads the full-text index once, as the outer loop, within the practice's
    /// range of rows, and each match's row by its key: never the practice's rows one by one
    /// with an index lookup each.
    #[tokio::test]
    async fn a_search_reads_the_index_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = format!("sqlite://{}", dir.path().join("plan.db").display());
        let store = super::super::Store::open(&url, &super::super::PoolSettings::default())
            .await
            .expect("open");
        let plan: Vec<(i64, i64, i64, String)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "EXPLAIN QUERY PLAN {SQLITE_SEARCH}{SEARCH_LIMIT}"
        )))
        .bind("p")
        .bind("\"abc\"")
        .bind(10_i64)
        .fetch_all(&store.read)
        .await
        .expect("plan");
        let steps: Vec<&str> = plan.iter().map(|(_, _, _, step)| step.as_str()).collect();
        let outer = steps
            .iter()
            .position(|s| s.contains("VIRTUAL TABLE INDEX"))
            .unwrap_or_else(|| panic!("no full-text step: {steps:?}"));
        let rows = steps
            .iter()
            .position(|s| s.starts_with("SEARCH r ") || s.starts_with("SCAN r"))
            .unwrap_or_else(|| panic!("no row step: {steps:?}"));
        assert!(outer < rows, "the index must be the outer loop: {steps:?}");
        // FTS5 names the constraints it takes after the index number: the rowid range ('>'
        // and '<') is among them, so that it seeks to the practice's part of the index.
        let taken = steps[outer].rsplit(':').next().unwrap_or("");
        assert!(
            taken.contains('>') && taken.contains('<'),
            "the practice's range must reach the index: {steps:?}"
        );
        assert!(
            steps[rows].contains("INTEGER PRIMARY KEY"),
            "each match's row is read by its key: {steps:?}"
        );
    }

    /// PostgreSQL looks a term of five characters or more up in its index of pieces, asking
    /// for the few that cover the term, and never through the trigram index; a shorter term
    /// has no pieces (the store sends it to the trigram index).
    #[tokio::test]
    async fn postgres_looks_a_long_term_up_by_its_pieces() {
        let Some(db) = super::super::tests::postgres_database().await else {
            return;
        };
        let store = super::super::Store::open(&db.url, &super::super::PoolSettings::default())
            .await
            .expect("open");
        // Both search indexes go without a list of pending entries, which every scan reads.
        let (options,): (String,) = sqlx::query_as(
            "SELECT string_agg(c.relname || ' ' || array_to_string(c.reloptions, ','), '; ' \
             ORDER BY c.relname) FROM pg_class c \
             WHERE c.relname IN ('patients_search', 'patients_search_keys')",
        )
        .fetch_one(&store.read)
        .await
        .expect("options");
        assert_eq!(
            options,
            "patients_search fastupdate=off; patients_search_keys fastupdate=off"
        );
        // 5,000 patients and their statistics (on an empty table the planner would walk the
        // practice's rows), their index entries all still in GIN's list of pending ones, which
        // a scan reads whole (the list turned on here, as a database's administrator may):
        // the planner must still take the index.
        for statement in [
            "ALTER INDEX patients_search_keys SET (fastupdate = on)",
            "ALTER INDEX patients_search SET (fastupdate = on)",
            "INSERT INTO practices (id, name, created_at) VALUES ('p', 'P', 0)",
            "INSERT INTO patients (practice_id, id, first_name, last_name, search_text, \
             created_at, updated_at) SELECT 'p', 'id' || i, 'emma', 'kowalski', \
             'emma kowalski emma.kowalski' || i || '@example.com', 0, 0 \
             FROM generate_series(1, 5000) AS i",
            "ANALYZE patients",
        ] {
            sqlx::query(statement)
                .execute(&store.write)
                .await
                .expect("seed");
        }
        let mut tx = store.read.begin().await.expect("begin");
        sqlx::query("SET LOCAL enable_seqscan = off")
            .execute(&mut *tx)
            .await
            .expect("set");
        let term = "emma.kowalski4578";
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "EXPLAIN {POSTGRES_SEARCH_BY_PIECES}{SEARCH_LIMIT}"
        )))
        .bind("p")
        .bind(term)
        .bind(10_i64)
        .fetch_all(&mut *tx)
        .await
        .expect("plan");
        let plan: Vec<String> = rows
            .iter()
            .map(|row| sqlx::Row::get::<String, _>(row, 0))
            .collect();
        let plan = plan.join("\n");
        assert!(
            plan.contains("Index Scan on patients_search_keys"),
            "{plan}"
        );
        assert!(!plan.contains("patients_search "), "{plan}");
        // The term's pieces, one every five characters and the last, are what the index is
        // asked for.
        assert!(plan.contains("i4578") && plan.contains("emma."), "{plan}");
        // Each term's keys, sorted: the practice's tag, the first six hexadecimal characters
        // of the MD5 of its id ('p': 83878c91...), then a piece of the term.
        let keys = |practice: &'static str, term: &'static str| {
            let read = &store.read;
            async move {
                let (keys,): (Option<String>,) =
                    sqlx::query_as("SELECT CAST(to_json(patient_search_cover($1, $2)) AS TEXT)")
                        .bind(practice)
                        .bind(term)
                        .fetch_one(read)
                        .await
                        .expect("cover");
                keys.map(|keys| {
                    let mut keys: Vec<String> = serde_json::from_str(&keys).expect("keys");
                    keys.sort();
                    keys
                })
            }
        };
        assert_eq!(
            keys("p", "abcd").await,
            None,
            "too short: the trigram index's"
        );
        assert_eq!(keys("p", "abcde").await, Some(vec!["83878cabcde".into()]));
        assert_eq!(
            keys("p", "abcdefghij").await,
            Some(vec!["83878cabcde".into(), "83878cfghij".into()])
        );
        assert_eq!(
            keys("p", "émile zola 1").await,
            Some(vec![
                "83878c zola".into(),
                "83878cola 1".into(),
                "83878cémile".into()
            ])
        );
        // Another practice's keys for the same term are its own.
        assert_eq!(keys("q", "abcde").await, Some(vec!["7694f4abcde".into()]));
        // A patient's text gives every piece, each under its practice's tag, and the cover of
        // a term in the text is among them.
        let (covered,): (bool,) = sqlx::query_as(
            "SELECT patient_search_keys('p', 'emma.kowalski4578') = \
             ARRAY['83878cemma.', '83878cmma.k', '83878cma.ko', '83878ca.kow', '83878c.kowa', \
             '83878ckowal', '83878cowals', '83878cwalsk', '83878calski', '83878clski4', \
             '83878cski45', '83878cki457', '83878ci4578'] \
             AND patient_search_keys('p', 'emma.kowalski4578') @> patient_search_cover('p', \
             'kowalski45') \
             AND NOT patient_search_keys('q', 'emma.kowalski4578') @> \
             patient_search_cover('p', 'kowalski45')",
        )
        .fetch_one(&store.read)
        .await
        .expect("keys");
        assert!(covered);
        drop(tx);
        store.close().await;
    }

    #[test]
    fn search_text_covers_names_email_and_dob() {
        let fields = PatientFields {
            first_name: "Émile".into(),
            last_name: "Zola".into(),
            email: Some("EZ@example.com".into()),
            dob: Some("1840-04-02".into()),
            ..Default::default()
        };
        assert_eq!(fields.search_text(), "émile zola ez@example.com 1840-04-02");
    }

    #[test]
    fn a_patient_row_is_read_as_it_is_written() {
        let names = Patient::default().columns().names();
        assert!(names.starts_with("id, title, first_name"), "{names}");
        assert!(!names.contains("search_text"));
        assert!(Patient::default().row().names().ends_with("search_text"));
    }
}

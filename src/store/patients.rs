//! Patients and the labels on them.

use std::collections::HashMap;

use sqlx::{Any, FromRow, Transaction};

use super::audit::Event;
use super::{
    Args, Change, Engine, Keyed, Page, PageRequest, PracticeStore, StoreResult, glob_escape,
    json_list, like_escape, new_id, now_ms, time_filters, values_lists,
};

const PATIENT_COLUMNS: &str = "id, title, first_name, last_name, email, dob, gender, sex, \
     address, city, postcode, country, phone_type, phone_number, comments, archived_at, \
     archive_reason, archive_comments, deleted_at, created_at, updated_at";

/// A patient as stored.
#[derive(Clone, Debug, FromRow)]
pub struct Patient {
    pub id: String,
    #[sqlx(flatten)]
    pub fields: PatientFields,
    pub archived_at: Option<i64>,
    pub archive_reason: Option<String>,
    pub archive_comments: Option<String>,
    pub deleted_at: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// The fields of a patient that staff edit. `dob` is an ISO 8601 date.
#[derive(Clone, Debug, Default, FromRow)]
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
}

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

/// The outcome of a change to a patient.
pub type PatientChange = Change<Patient>;

/// What a change made under [`PracticeStore::modify_patient`] does with the patient.
pub type Modification = Result<(), String>;

impl Keyed for Patient {
    fn key(&self) -> &str {
        &self.id
    }
}

impl PracticeStore<'_> {
    /// The patient with this id, deleted and archived ones included.
    pub async fn find_patient(&self, id: &str) -> StoreResult<Option<Patient>> {
        let sql =
            format!("SELECT {PATIENT_COLUMNS} FROM patients WHERE practice_id = $1 AND id = $2");
        Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(self.practice_id)
            .bind(id)
            .fetch_optional(self.read())
            .await?)
    }

    /// The patients with these ids, by id (ids the practice does not have are left out).
    pub async fn patients_by_ids(&self, ids: &[String]) -> StoreResult<HashMap<String, Patient>> {
        self.by_ids("patients", PATIENT_COLUMNS, ids).await
    }

    /// A page of patients, by last name then first name.
    pub async fn list_patients(
        &self,
        filter: &PatientFilter,
        page: PageRequest,
    ) -> StoreResult<Page<Patient>> {
        let mut args = Args::default();
        let mut from = "patients";
        let mut conditions = String::new();
        if let Some(search) = &filter.search {
            let search = search.to_lowercase();
            let pattern = format!("%{}%", like_escape(&search));
            conditions += &format!(
                " AND patients.search_text LIKE {} ESCAPE '\\'",
                args.text(&pattern)
            );
            // PostgreSQL finds the rows through its trigram index by itself. SQLite is told to
            // start from its full-text table (CROSS JOIN fixes the order of the loops): it
            // finds the candidates, and LIKE above still decides. Under three characters
            // there is no trigram to look up, and the name order is quicker.
            if self.store.engine == Engine::Sqlite && search.chars().count() >= 3 {
                from = "patients_search CROSS JOIN patients \
                        ON patients.rowid = patients_search.rowid";
                let glob = format!("*{}*", glob_escape(&search));
                conditions +=
                    &format!(" AND patients_search.search_text GLOB {}", args.text(&glob));
            }
        }
        let mut sql =
            format!("SELECT {PATIENT_COLUMNS} FROM {from} WHERE practice_id = $1{conditions}");
        if !filter.include_archived {
            sql += " AND archived_at IS NULL";
        }
        if !filter.include_deleted {
            sql += " AND deleted_at IS NULL";
        }
        sql += &time_filters(&mut args, filter.created, filter.updated);
        let (limit, offset) = (args.int(page.limit()), args.int(page.offset()));
        sql += &format!(" ORDER BY last_name, first_name, id LIMIT {limit} OFFSET {offset}");
        let query = args.bind(sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(self.practice_id));
        let rows = query.fetch_all(self.read()).await?;
        Ok(page.finish(rows))
    }

    /// Adds a patient with the given labels. Refused, with nothing written, if a label is not
    /// in the practice's catalogue.
    pub async fn create_patient(
        &self,
        fields: PatientFields,
        label_ids: &[String],
    ) -> StoreResult<PatientChange> {
        let now = now_ms();
        let patient = Patient {
            id: new_id(),
            fields,
            archived_at: None,
            archive_reason: None,
            archive_comments: None,
            deleted_at: None,
            created_at: now,
            updated_at: now,
        };
        let mut tx = self.begin_write().await?;
        let sql = format!(
            "INSERT INTO patients (practice_id, search_text, {PATIENT_COLUMNS}) VALUES \
             ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, \
             $19, $20, $21, $22, $23)"
        );
        self.bind_patient(sqlx::query(sqlx::AssertSqlSafe(sql)), &patient)
            .execute(&mut *tx)
            .await?;
        for label_id in label_ids {
            if !self
                .insert_patient_label(&mut tx, &patient.id, label_id)
                .await?
            {
                // The transaction is dropped, and with it the patient.
                return Ok(Change::Refused(no_such_label(label_id)));
            }
        }
        self.commit(tx, Event::patient("create", &patient.id))
            .await?;
        Ok(Change::Done(patient))
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
            let chunk: Vec<(PatientFields, Vec<String>)> =
                rows.by_ref().take(ROWS_PER_STATEMENT).collect();
            let sql = format!(
                "INSERT INTO patients (practice_id, search_text, {PATIENT_COLUMNS}) VALUES {}",
                values_lists(chunk.len(), 23)
            );
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
            for (fields, label_ids) in chunk {
                let patient = Patient {
                    id: new_id(),
                    fields,
                    archived_at: None,
                    archive_reason: None,
                    archive_comments: None,
                    deleted_at: None,
                    created_at: now,
                    updated_at: now,
                };
                query = self.bind_patient(query, &patient);
                labels.extend(label_ids.into_iter().map(|l| (patient.id.clone(), l)));
                ids.push(patient.id);
            }
            query.execute(&mut *tx).await?;
        }
        for chunk in labels.chunks(ROWS_PER_STATEMENT) {
            let sql = format!(
                "INSERT INTO patient_labels (practice_id, id, patient_id, label_id, created_at) \
                 VALUES {}",
                values_lists(chunk.len(), 5)
            );
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
            for (patient_id, label_id) in chunk {
                query = query
                    .bind(self.practice_id)
                    .bind(new_id())
                    .bind(patient_id)
                    .bind(label_id)
                    .bind(now);
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
        tx.commit().await?;
        Ok(ids)
    }

    /// Reads the patient, applies `change` to it and writes it back, in one transaction that
    /// holds the patient's row, so that concurrent changes to other fields are not lost. With
    /// `labels`, the patient's labels become exactly these (labels kept keep their ids).
    pub async fn modify_patient(
        &self,
        id: &str,
        action: &'static str,
        labels: Option<&[String]>,
        change: impl FnOnce(&mut Patient) -> Modification,
    ) -> StoreResult<PatientChange> {
        let mut tx = self.begin_write().await?;
        // A no-op update takes the row lock on PostgreSQL and returns the row as it is now.
        let sql = format!(
            "UPDATE patients SET updated_at = updated_at WHERE practice_id = $1 AND id = $2 \
             RETURNING {PATIENT_COLUMNS}"
        );
        let found: Option<Patient> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(self.practice_id)
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(mut patient) = found else {
            return Ok(Change::NotFound);
        };
        if let Err(reason) = change(&mut patient) {
            return Ok(Change::Refused(reason));
        }
        patient.updated_at = now_ms().max(patient.updated_at);
        let sql = "UPDATE patients SET search_text = $2, title = $4, first_name = $5, \
             last_name = $6, email = $7, dob = $8, gender = $9, sex = $10, address = $11, \
             city = $12, postcode = $13, country = $14, phone_type = $15, phone_number = $16, \
             comments = $17, archived_at = $18, archive_reason = $19, archive_comments = $20, \
             deleted_at = $21, created_at = $22, updated_at = $23 \
             WHERE practice_id = $1 AND id = $3";
        self.bind_patient(sqlx::query(sql), &patient)
            .execute(&mut *tx)
            .await?;
        if let Some(labels) = labels
            && let Some(unknown) = self.replace_patient_labels(&mut tx, id, labels).await?
        {
            return Ok(Change::Refused(no_such_label(&unknown)));
        }
        self.commit(tx, Event::patient(action, id)).await?;
        Ok(Change::Done(patient))
    }

    /// Makes the patient's labels exactly `label_ids`. Returns the first id that is not in the
    /// catalogue, if any, having checked before writing.
    async fn replace_patient_labels(
        &self,
        tx: &mut Transaction<'_, Any>,
        patient_id: &str,
        label_ids: &[String],
    ) -> StoreResult<Option<String>> {
        for label_id in label_ids {
            let known = sqlx::query("SELECT id FROM labels WHERE practice_id = $1 AND id = $2")
                .bind(self.practice_id)
                .bind(label_id)
                .fetch_optional(&mut **tx)
                .await?;
            if known.is_none() {
                return Ok(Some(label_id.clone()));
            }
        }
        let sql = format!(
            "DELETE FROM patient_labels WHERE practice_id = $1 AND patient_id = $2 \
             AND NOT (label_id {})",
            self.store.engine.in_list(3)
        );
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(self.practice_id)
            .bind(patient_id)
            .bind(json_list(label_ids))
            .execute(&mut **tx)
            .await?;
        for label_id in label_ids {
            // Labels already on the patient are left as they are (ON CONFLICT DO NOTHING).
            self.insert_patient_label(tx, patient_id, label_id).await?;
        }
        // A label deleted since it was checked above is missing now: refuse rather than
        // report a change that did not happen.
        let on: Vec<(String,)> = sqlx::query_as(
            "SELECT label_id FROM patient_labels WHERE practice_id = $1 AND patient_id = $2",
        )
        .bind(self.practice_id)
        .bind(patient_id)
        .fetch_all(&mut **tx)
        .await?;
        Ok(label_ids
            .iter()
            .find(|id| !on.iter().any(|(on,)| on == *id))
            .cloned())
    }

    /// Binds `$1` practice, `$2` search text and `$3..$23` the columns of PATIENT_COLUMNS.
    fn bind_patient<'q>(
        &self,
        query: sqlx::query::Query<'q, Any, sqlx::any::AnyArguments>,
        p: &Patient,
    ) -> sqlx::query::Query<'q, Any, sqlx::any::AnyArguments> {
        let f = &p.fields;
        query
            .bind(self.practice_id.to_string())
            .bind(f.search_text())
            .bind(p.id.clone())
            .bind(f.title.clone())
            .bind(f.first_name.clone())
            .bind(f.last_name.clone())
            .bind(f.email.clone())
            .bind(f.dob.clone())
            .bind(f.gender.clone())
            .bind(f.sex.clone())
            .bind(f.address.clone())
            .bind(f.city.clone())
            .bind(f.postcode.clone())
            .bind(f.country.clone())
            .bind(f.phone_type.clone())
            .bind(f.phone_number.clone())
            .bind(f.comments.clone())
            .bind(p.archived_at)
            .bind(p.archive_reason.clone())
            .bind(p.archive_comments.clone())
            .bind(p.deleted_at)
            .bind(p.created_at)
            .bind(p.updated_at)
    }

    /// Puts a label of the catalogue on a patient that is not deleted. Returns false, having
    /// written nothing, if the label is not in the catalogue or already on the patient.
    async fn insert_patient_label(
        &self,
        tx: &mut Transaction<'_, Any>,
        patient_id: &str,
        label_id: &str,
    ) -> StoreResult<bool> {
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
        .await?;
        Ok(inserted.rows_affected() == 1)
    }

    /// Puts a label on a patient. Refused if the patient is deleted, the label is unknown or
    /// already on the patient.
    pub async fn add_patient_label(
        &self,
        patient_id: &str,
        label_id: &str,
    ) -> StoreResult<PatientChange> {
        let mut tx = self.begin_write().await?;
        if touch_live_patient(&mut tx, self.practice_id, patient_id).await?
            && self
                .insert_patient_label(&mut tx, patient_id, label_id)
                .await?
        {
            self.commit(tx, label_event("add_label", patient_id, label_id))
                .await?;
            return self.patient_change(patient_id).await;
        }
        drop(tx);
        if let Some(refusal) = self.not_live(patient_id).await? {
            return Ok(refusal);
        }
        let Some(label) = self.find_label(label_id).await? else {
            return Ok(Change::Refused(no_such_label(label_id)));
        };
        Ok(Change::Refused(format!(
            "The label \"{}\" is already on this patient",
            label.title
        )))
    }

    /// Takes a label off a patient. `label_id` is the id of the label's place on the patient
    /// (PatientLabel.id); the catalogue id of the label is accepted too.
    pub async fn remove_patient_label(
        &self,
        patient_id: &str,
        label_id: &str,
    ) -> StoreResult<PatientChange> {
        let mut tx = self.begin_write().await?;
        if !touch_live_patient(&mut tx, self.practice_id, patient_id).await? {
            drop(tx);
            return Ok(self.not_live(patient_id).await?.unwrap_or(Change::NotFound));
        }
        let deleted = sqlx::query(
            "DELETE FROM patient_labels WHERE practice_id = $1 AND patient_id = $2 \
             AND (id = $3 OR label_id = $3)",
        )
        .bind(self.practice_id)
        .bind(patient_id)
        .bind(label_id)
        .execute(&mut *tx)
        .await?;
        if deleted.rows_affected() > 0 {
            self.commit(tx, label_event("remove_label", patient_id, label_id))
                .await?;
            return self.patient_change(patient_id).await;
        }
        Ok(Change::Refused(format!(
            "This patient has no label with id {label_id}"
        )))
    }

    /// Why a patient cannot be changed: missing, or deleted. None if it can.
    async fn not_live(&self, id: &str) -> StoreResult<Option<PatientChange>> {
        Ok(match self.find_patient(id).await? {
            None => Some(Change::NotFound),
            Some(p) if p.deleted_at.is_some() => Some(Change::Refused(DELETED.into())),
            Some(_) => None,
        })
    }

    async fn patient_change(&self, id: &str) -> StoreResult<PatientChange> {
        Ok(match self.find_patient(id).await? {
            Some(patient) => Change::Done(patient),
            None => Change::NotFound,
        })
    }

    /// The labels on each of these patients, in the order they were put on.
    pub async fn labels_of_patients(
        &self,
        patient_ids: &[String],
    ) -> StoreResult<HashMap<String, Vec<PatientLabel>>> {
        let mut by_patient: HashMap<String, Vec<PatientLabel>> = HashMap::new();
        if patient_ids.is_empty() {
            return Ok(by_patient);
        }
        let sql = format!(
            "SELECT pl.id, pl.patient_id, pl.label_id, l.title, l.color FROM patient_labels pl \
             JOIN labels l ON l.practice_id = pl.practice_id AND l.id = pl.label_id \
             WHERE pl.practice_id = $1 AND pl.patient_id {} \
             ORDER BY pl.created_at, pl.id",
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

fn no_such_label(label_id: &str) -> String {
    format!("No label with id {label_id}: create it with createLabel first")
}

/// What a deleted patient's refusal says.
pub const DELETED: &str = "This patient has been deleted and can no longer be changed";

/// Marks a patient that is not deleted as changed now, which also holds its row until the
/// transaction ends (so that it cannot be deleted meanwhile). False if there is no such
/// patient, or it is deleted.
async fn touch_live_patient(
    tx: &mut Transaction<'_, Any>,
    practice_id: &str,
    patient_id: &str,
) -> StoreResult<bool> {
    let touched = sqlx::query(
        "UPDATE patients SET updated_at = $3 \
         WHERE practice_id = $1 AND id = $2 AND deleted_at IS NULL",
    )
    .bind(practice_id)
    .bind(patient_id)
    .bind(now_ms())
    .execute(&mut **tx)
    .await?;
    Ok(touched.rows_affected() == 1)
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
}

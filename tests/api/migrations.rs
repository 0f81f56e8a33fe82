//! The two sets of migrations (`migrations/sqlite`, `migrations/postgres`) make the same
//! tables, with the same columns, the same nullability and the same indexes, so that one set
//! of SQL in the store serves both engines. What exists on one engine only is listed here,
//! and checked to exist there: the list cannot go stale.

use std::collections::{BTreeMap, BTreeSet};

use practice_api::store::{PoolSettings, Store};
use sqlx::Connection;

use crate::helpers::{Engine, TestDatabase};

/// Objects of SQLite alone: the full-text table of patient search (and the tables FTS5 keeps
/// for it), the numbers of its rows and practices, its triggers, the triggers of the
/// no-overlap rule, and the reads waiting for the index of who read each patient.
const SQLITE_ONLY_TABLES: &[&str] = &[
    // How far the index of who read each patient has taken the reads (store/audit.rs
    // `index_reads`): PostgreSQL's rows of reads list their patients, in a GIN index.
    "audit_reads_indexed",
    // Who read each patient, indexed behind the reads by runs of the index and spans of runs
    // (migration 0025); PostgreSQL keeps audit_read_patients alone.
    "audit_read_buckets",
    "audit_read_span_runs",
    "audit_read_runs",
    "patients_search",
    "patients_search_config",
    "patients_search_data",
    "patients_search_docsize",
    "patients_search_idx",
    "patients_search_practices",
    "patients_search_rows",
];
const SQLITE_ONLY_TRIGGERS: &[&str] = &[
    "bookings_no_overlap_insert",
    "bookings_no_overlap_update",
    "patients_search_delete",
    "patients_search_insert",
    "patients_search_update",
];

/// Objects of PostgreSQL alone: the trigram index of patient search and its index of
/// five-character pieces keyed by practice (migrations 0028 and 0029; SQLite searches a
/// full-text table), the list of each read's patients and its GIN index (migrations 0026 and
/// 0027; SQLite indexes who read each patient in tables of its own, above), and the exclusion
/// constraint of the no-overlap rule.
const POSTGRES_ONLY_INDEXES: &[&str] = &[
    "patients_search",
    "patients_search_keys",
    "audit_reads_patients",
];
const POSTGRES_ONLY_COLUMNS: &[(&str, &str)] = &[("audit_reads", "patients")];
const POSTGRES_ONLY_CONSTRAINTS: &[&str] = &["bookings_no_overlap"];

/// A schema as far as the store relies on it: each table's columns with whether they may be
/// null, and each table's indexes (primary keys aside).
#[derive(Debug, Default, PartialEq, Eq)]
struct Schema {
    columns: BTreeMap<String, BTreeMap<String, bool>>,
    indexes: BTreeMap<String, BTreeSet<String>>,
}

async fn sqlite_schema(url: &str) -> (Schema, BTreeSet<String>) {
    let mut conn = sqlx::SqliteConnection::connect(url).await.expect("connect");
    let tables: Vec<(String,)> = sqlx::query_as(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' \
         AND name NOT LIKE '_sqlx%'",
    )
    .fetch_all(&mut conn)
    .await
    .expect("tables");
    let mut schema = Schema::default();
    for (table,) in tables {
        let columns: Vec<(String, i64, i64)> =
            sqlx::query_as("SELECT name, \"notnull\", pk FROM pragma_table_info($1)")
                .bind(&table)
                .fetch_all(&mut conn)
                .await
                .expect("columns");
        let columns = columns
            .into_iter()
            .map(|(name, not_null, pk)| (name, not_null == 0 && pk == 0))
            .collect();
        schema.columns.insert(table.clone(), columns);
        schema.indexes.insert(table, BTreeSet::new());
    }
    let indexes: Vec<(String, String)> = sqlx::query_as(
        "SELECT name, tbl_name FROM sqlite_master WHERE type = 'index' \
         AND name NOT LIKE 'sqlite_autoindex%'",
    )
    .fetch_all(&mut conn)
    .await
    .expect("indexes");
    for (name, table) in indexes {
        schema.indexes.entry(table).or_default().insert(name);
    }
    let triggers: Vec<(String,)> =
        sqlx::query_as("SELECT name FROM sqlite_master WHERE type = 'trigger'")
            .fetch_all(&mut conn)
            .await
            .expect("triggers");
    (schema, triggers.into_iter().map(|(name,)| name).collect())
}

async fn postgres_schema(url: &str) -> (Schema, BTreeSet<String>) {
    let mut conn = sqlx::PgConnection::connect(url).await.expect("connect");
    let columns: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT c.table_name::text, c.column_name::text, c.is_nullable::text \
         FROM information_schema.columns c JOIN information_schema.tables t \
         ON t.table_schema = c.table_schema AND t.table_name = c.table_name \
         WHERE c.table_schema = 'public' AND t.table_type = 'BASE TABLE' \
         AND c.table_name NOT LIKE '_sqlx%'",
    )
    .fetch_all(&mut conn)
    .await
    .expect("columns");
    let mut schema = Schema::default();
    for (table, column, nullable) in columns {
        schema
            .columns
            .entry(table.clone())
            .or_default()
            .insert(column, nullable == "YES");
        schema.indexes.entry(table).or_default();
    }
    let indexes: Vec<(String, String)> = sqlx::query_as(
        "SELECT indexname::text, tablename::text FROM pg_indexes WHERE schemaname = 'public' \
         AND indexname NOT LIKE '%_pkey' AND tablename NOT LIKE '_sqlx%'",
    )
    .fetch_all(&mut conn)
    .await
    .expect("indexes");
    for (name, table) in indexes {
        schema.indexes.entry(table).or_default().insert(name);
    }
    let constraints: Vec<(String,)> = sqlx::query_as(
        "SELECT conname::text FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace \
         WHERE n.nspname = 'public' AND c.contype = 'x'",
    )
    .fetch_all(&mut conn)
    .await
    .expect("constraints");
    let constraints = constraints.into_iter().map(|(name,)| name).collect();
    // The exclusion constraint's own index carries its name.
    for name in &constraints {
        for indexes in schema.indexes.values_mut() {
            indexes.remove(name);
        }
    }
    (schema, constraints)
}

/// Takes `names` out of `schema`'s indexes and tables, asserting that each was there.
fn take_out(schema: &mut Schema, tables: &[&str], indexes: &[&str], engine: &str) {
    for table in tables {
        assert!(
            schema.columns.remove(*table).is_some(),
            "{engine} has no table {table}, listed as its own"
        );
        schema.indexes.remove(*table);
    }
    for index in indexes {
        let found = schema
            .indexes
            .values_mut()
            .any(|names| names.remove(*index));
        assert!(found, "{engine} has no index {index}, listed as its own");
    }
}

#[tokio::test]
async fn both_engines_migrate_to_the_same_tables() {
    let Some(sqlite) = TestDatabase::new(Engine::Sqlite).await else {
        return;
    };
    let Some(postgres) = TestDatabase::new(Engine::Postgres).await else {
        return;
    };
    for db in [&sqlite, &postgres] {
        let store = Store::open(&db.url, &PoolSettings::default())
            .await
            .expect("migrate");
        store.close().await;
    }
    let (mut lite, triggers) = sqlite_schema(&sqlite.url).await;
    let (mut pg, constraints) = postgres_schema(&postgres.url).await;

    take_out(&mut lite, SQLITE_ONLY_TABLES, &[], "SQLite");
    take_out(&mut pg, &[], POSTGRES_ONLY_INDEXES, "PostgreSQL");
    for (table, column) in POSTGRES_ONLY_COLUMNS {
        let found = pg
            .columns
            .get_mut(*table)
            .and_then(|columns| columns.remove(*column));
        assert!(
            found.is_some(),
            "PostgreSQL has no column {table}.{column}, listed as its own"
        );
    }
    let expected: BTreeSet<String> = SQLITE_ONLY_TRIGGERS.iter().map(|t| t.to_string()).collect();
    assert_eq!(triggers, expected, "SQLite's triggers");
    let expected: BTreeSet<String> = POSTGRES_ONLY_CONSTRAINTS
        .iter()
        .map(|c| c.to_string())
        .collect();
    assert_eq!(constraints, expected, "PostgreSQL's exclusion constraints");

    let tables = |s: &Schema| s.columns.keys().cloned().collect::<Vec<_>>();
    assert_eq!(tables(&lite), tables(&pg), "the same tables");
    for (table, columns) in &lite.columns {
        assert_eq!(
            Some(columns),
            pg.columns.get(table),
            "table {table}: columns (name → nullable) differ"
        );
    }
    assert_eq!(lite.indexes, pg.indexes, "the same indexes");
}

/// A SQLite database made by the release before the search was numbered by practice
/// (migrations up to 0010), with patients in two practices, is upgraded in place: every
/// patient is found by search, in its own practice only, and new patients after it.
#[tokio::test]
async fn search_upgrades_in_place_with_every_patient() {
    use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
    use std::str::FromStr;
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("sqlite://{}", dir.path().join("old.db").display());
    let options = SqliteConnectOptions::from_str(&url)
        .expect("url")
        .create_if_missing(true);
    let pool = SqlitePoolOptions::new()
        .connect_with(options)
        .await
        .expect("open");
    let mut old = sqlx::migrate::Migrator::new(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/migrations/sqlite"
    )))
    .await
    .expect("migrations");
    let before: Vec<_> = old
        .migrations
        .iter()
        .filter(|m| m.version <= 10)
        .cloned()
        .collect();
    old.migrations = std::borrow::Cow::Owned(before);
    old.run(&pool).await.expect("migrate to 0010");
    for (practice, default) in [("p1", 1), ("p2", 0)] {
        sqlx::query(
            "INSERT INTO practices (id, name, is_default, created_at) VALUES ($1, $1, $2, 0)",
        )
        .bind(practice)
        .bind(default)
        .execute(&pool)
        .await
        .expect("practice");
        for i in 0..30 {
            sqlx::query(
                "INSERT INTO patients (practice_id, id, first_name, last_name, search_text, \
                 created_at, updated_at) VALUES ($1, $2, 'Ada', $3, $4, 0, 0)",
            )
            .bind(practice)
            .bind(format!("{practice}-{i}"))
            .bind(format!("Lovelace{i}"))
            .bind(format!("ada lovelace{i} {practice}"))
            .execute(&pool)
            .await
            .expect("patient");
        }
    }
    pool.close().await;

    let store = Store::open(&url, &PoolSettings::default())
        .await
        .expect("upgrade");
    for practice in ["p1", "p2"] {
        let found = store
            .practice(practice)
            .list_patients(
                &practice_api::store::patients::PatientFilter {
                    search: Some("lovelace1".into()),
                    ..Default::default()
                },
                practice_api::store::PageRequest {
                    page: 1,
                    page_size: 100,
                },
            )
            .await
            .expect("search")
            .expect("not too broad");
        let mut ids: Vec<String> = found.items.iter().map(|p| p.id.clone()).collect();
        ids.sort();
        let mut expected: Vec<String> = [1, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19]
            .iter()
            .map(|i| format!("{practice}-{i}"))
            .collect();
        expected.sort();
        assert_eq!(ids, expected, "{practice}");
    }
    // A patient added after the upgrade takes the next number of its practice's range.
    let practice = store.practice("p2").by(crate::helpers::operator());
    let added = practice
        .create_patient(
            practice_api::store::patients::PatientFields {
                first_name: "Émile".into(),
                last_name: "Zola".into(),
                ..Default::default()
            },
            &[],
            |_| {},
        )
        .await
        .expect("create")
        .expect("created");
    let search = |text: &str| practice_api::store::patients::PatientFilter {
        search: Some(text.into()),
        ..Default::default()
    };
    let page = practice_api::store::PageRequest {
        page: 1,
        page_size: 100,
    };
    let found = practice
        .list_patients(&search("zola"), page)
        .await
        .expect("search")
        .expect("not too broad");
    assert_eq!(found.items.len(), 1);
    assert_eq!(found.items[0].id, added.id);
    let elsewhere = store
        .practice("p1")
        .list_patients(&search("zola"), page)
        .await
        .expect("search")
        .expect("not too broad");
    assert!(elsewhere.items.is_empty(), "another practice's patient");
}

/// A new database of `engine` migrated up to `version`, with a pool on it; None when the
/// engine is not there to test.
async fn migrated_to(engine: Engine, version: i64) -> Option<(TestDatabase, sqlx::AnyPool)> {
    let db = TestDatabase::new(engine).await?;
    sqlx::any::install_default_drivers();
    let url = match engine {
        Engine::Sqlite => format!("{}?mode=rwc", db.url),
        Engine::Postgres => db.url.clone(),
    };
    let pool = sqlx::AnyPool::connect(&url).await.expect("open");
    crate::helpers::migrate_to(&pool, engine, version).await;
    Some((db, pool))
}

/// A database made by the previous release (migrations up to 0013, before staff management
/// and the full record), with a practice, a staff user and their session, an API token, a
/// patient with a phone and a label, and a booking, is upgraded in place: every record is
/// there as it was, the phone is the first of the patient's list, the booking confirmed, the
/// tokens still work, and nothing new hides anything.
#[rstest::rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn the_previous_release_upgrades_in_place_with_every_record(#[case] engine: Engine) {
    use practice_api::auth::{authenticate, secret};
    let Some((db, pool)) = migrated_to(engine, 13).await else {
        return;
    };

    let api = secret::new_secret("p1");
    let session = secret::new_secret("p1");
    let statements: Vec<(&str, Vec<String>)> = vec![
        (
            "INSERT INTO practices (id, name, is_default, created_at) VALUES ('p1', 'Old clinic', 1, 0)",
            vec![],
        ),
        (
            "INSERT INTO users (practice_id, id, email, password_hash, title, first_name, \
             last_name, role, is_doctor, created_at, updated_at) VALUES ('p1', 'u1', \
             'grace@example.com', 'x', 'Dr', 'Grace', 'Hopper', 'practitioner', 1, 0, 0)",
            vec![],
        ),
        (
            "INSERT INTO tokens (practice_id, id, kind, name, secret_hash, permissions, user_id, \
             created_at, expires_at) VALUES ('p1', 't1', 'api', 'crm', $1, '*', NULL, 0, NULL)",
            vec![api.hash.clone()],
        ),
        (
            "INSERT INTO tokens (practice_id, id, kind, name, secret_hash, permissions, user_id, \
             created_at, expires_at) VALUES ('p1', 't2', 'user', 'sign-in', $1, '', 'u1', 0, \
             4102444800000)",
            vec![session.hash.clone()],
        ),
        (
            "INSERT INTO patients (practice_id, id, first_name, last_name, email, phone_type, \
             phone_number, search_text, created_at, updated_at) VALUES ('p1', 'pa1', 'Jane', \
             'Doe', 'jane@example.com', 'mobile', '07700 900123', 'jane doe jane@example.com', \
             0, 0)",
            vec![],
        ),
        (
            "INSERT INTO labels (practice_id, id, title, color, created_at, updated_at) \
             VALUES ('p1', 'l1', 'VIP', '#f59e0b', 0, 0)",
            vec![],
        ),
        (
            "INSERT INTO patient_labels (practice_id, id, patient_id, label_id, created_at) \
             VALUES ('p1', 'pl1', 'pa1', 'l1', 0)",
            vec![],
        ),
        (
            "INSERT INTO locations (practice_id, id, name, city, created_at, updated_at) \
             VALUES ('p1', 'lo1', 'Main surgery', 'York', 0, 0)",
            vec![],
        ),
        (
            "INSERT INTO appointment_types (practice_id, id, title, duration, price, \
             created_at, updated_at) VALUES ('p1', 'at1', 'Consultation', 30, 50.5, 0, 0)",
            vec![],
        ),
        (
            "INSERT INTO bookings (practice_id, id, patient_id, doctor_id, location_id, \
             appointment_type_id, start_at, end_at, created_at, updated_at) \
             VALUES ('p1', 'b1', 'pa1', 'u1', 'lo1', 'at1', 1000, 2000, 0, 0)",
            vec![],
        ),
    ];
    for (sql, binds) in statements {
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for bind in binds {
            query = query.bind(bind);
        }
        query.execute(&pool).await.expect(sql);
    }
    pool.close().await;

    let store = Store::open(&db.url, &PoolSettings::default())
        .await
        .expect("upgrade");
    let practice = store.practice("p1");
    let patient = practice
        .find_patient("pa1")
        .await
        .expect("read")
        .expect("the patient is there");
    assert_eq!(patient.fields.first_name, "Jane");
    assert_eq!(patient.fields.email.as_deref(), Some("jane@example.com"));
    let phones = patient.phones();
    assert_eq!(phones.len(), 1, "{phones:?}");
    assert_eq!(phones[0].number.as_deref(), Some("07700 900123"));
    assert_eq!(phones[0].phone_type.as_deref(), Some("mobile"));
    assert!(patient.access_group_ids().is_empty());
    assert!(patient.numbers().is_empty() && patient.attributes().is_empty());
    let labels = practice
        .labels_of_patients(&["pa1".to_string()])
        .await
        .expect("labels");
    assert_eq!(labels["pa1"][0].title, "VIP");
    let booking = practice
        .find_booking("b1")
        .await
        .expect("read")
        .expect("the booking is there");
    assert_eq!(booking.fields.status, "confirmed");
    assert_eq!(
        (booking.fields.start_at, booking.fields.end_at),
        (1000, 2000)
    );
    assert!(booking.metadata().is_empty());
    // The appointment type is a product of type appointment, with its id, and the booking
    // still refers to it; the location is a site of its own that provides nothing yet.
    assert_eq!(booking.fields.appointment_type_id.as_deref(), Some("at1"));
    let products = practice
        .products_by_ids(&["at1".to_string()])
        .await
        .expect("products");
    let product = &products["at1"];
    assert_eq!(
        (
            product.name.as_str(),
            product.product_type.as_str(),
            product.status.as_str()
        ),
        ("Consultation", "appointment", "active")
    );
    assert_eq!((product.duration, product.price), (Some(30), Some(50.5)));
    assert!(product.can_be_booked());
    let locations = practice.list_locations().await.expect("locations");
    assert_eq!(locations.len(), 1);
    assert_eq!(locations[0].site(), "Main surgery");
    assert!(locations[0].service_ids().is_empty());
    let user = practice
        .find_user("u1")
        .await
        .expect("read")
        .expect("the user is there");
    assert!(!user.is_disabled());
    assert_eq!(user.title.as_deref(), Some("Dr"));
    assert!(user.access_group_ids().is_empty());
    assert!(user.service_ids().is_empty());
    let clinic = store
        .find_practice("p1")
        .await
        .expect("read")
        .expect("the practice");
    assert_eq!(
        (clinic.name.as_str(), clinic.timezone.as_str()),
        ("Old clinic", "UTC")
    );
    for secret in [&api.secret, &session.secret] {
        authenticate(&store, None, secret)
            .await
            .expect("the token still works");
    }
    // A practitioner in no access group sees the patient, who is in none.
    let seen = store
        .practice("p1")
        .seen_by(Some(&[]))
        .find_patient("pa1")
        .await
        .expect("read");
    assert!(seen.is_some());
}

/// PostgreSQL: servers starting together on a new database each migrate it, one after the
/// other under the migrator's advisory lock, and every index is whole: a migration that built
/// an index `CONCURRENTLY` waited for the snapshot of the server waiting for that lock, which
/// PostgreSQL ended as a deadlock, leaving an invalid index behind.
#[tokio::test]
async fn servers_starting_together_migrate_one_database() {
    let Some(db) = TestDatabase::new(Engine::Postgres).await else {
        return;
    };
    let settings = PoolSettings::default();
    let open = || Store::open(&db.url, &settings);
    let (a, b, c) = tokio::join!(open(), open(), open());
    for store in [a, b, c] {
        store.expect("migrate").close().await;
    }
    let mut conn = sqlx::PgConnection::connect(&db.url).await.expect("connect");
    let (invalid,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM pg_index WHERE NOT indisvalid")
        .fetch_one(&mut conn)
        .await
        .expect("indexes");
    assert_eq!(invalid, 0, "invalid indexes");
}

/// SQLite: processes starting together on a new file (servers, the command line) migrate it
/// one after the other, each under the lock of a file beside the database: sqlx's migrator
/// takes none on SQLite, and all but the first failed on a table the first had made.
#[tokio::test]
async fn sqlite_stores_opening_together_migrate_one_file() {
    for _ in 0..3 {
        let dir = tempfile::tempdir().expect("dir");
        let url = format!(
            "sqlite://{}?mode=rwc",
            dir.path().join("practice.db").display()
        );
        let settings = PoolSettings::default();
        let open = || Store::open(&url, &settings);
        let opened = futures_util::future::join_all((0..6).map(|_| open())).await;
        for store in opened {
            store.expect("migrated").close().await;
        }
    }
}

/// The text columns that lists are sorted by, on PostgreSQL: each `COLLATE "C"`, byte order,
/// as SQLite sorts, so that a list comes in the same order on both engines whatever the
/// database's locale (this machine's test database sorts in byte order anyway, so only the
/// columns' own collation tells).
const SORTED_BY: &[(&str, &str)] = &[
    ("patients", "first_name"),
    ("patients", "last_name"),
    ("labels", "title"),
    ("locations", "name"),
    ("products", "name"),
    ("access_groups", "name"),
    ("practice_numbers", "name"),
];

#[tokio::test]
async fn lists_sort_in_byte_order_on_postgres() {
    let Some(postgres) = TestDatabase::new(Engine::Postgres).await else {
        return;
    };
    let store = Store::open(&postgres.url, &PoolSettings::default())
        .await
        .expect("migrate");
    store.close().await;
    let mut conn = sqlx::PgConnection::connect(&postgres.url)
        .await
        .expect("connect");
    for (table, column) in SORTED_BY {
        let collation: Option<(Option<String>,)> = sqlx::query_as(
            "SELECT collation_name::text FROM information_schema.columns \
             WHERE table_schema = 'public' AND table_name = $1 AND column_name = $2",
        )
        .bind(table)
        .bind(column)
        .fetch_optional(&mut conn)
        .await
        .expect("collation");
        assert_eq!(
            collation,
            Some((Some("C".to_string()),)),
            "{table}.{column} is sorted by, and must be COLLATE \"C\""
        );
    }
}

/// Bookings that bookings made through the API left with an empty text as their metadata
/// (before migration 0032) read as bookings with none, and the metadata filter reads past
/// them rather than failing on them.
#[rstest::rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn bookings_stored_with_empty_metadata_are_mended(#[case] engine: Engine) {
    let Some((db, pool)) = migrated_to(engine, 31).await else {
        return;
    };
    for sql in [
        "INSERT INTO practices (id, name, is_default, created_at) VALUES ('p1', 'Clinic', 1, 0)",
        "INSERT INTO users (practice_id, id, email, password_hash, title, first_name, \
         last_name, role, is_doctor, created_at, updated_at) VALUES ('p1', 'u1', \
         'grace@example.com', 'x', 'Dr', 'Grace', 'Hopper', 'practitioner', 1, 0, 0)",
        "INSERT INTO patients (practice_id, id, first_name, last_name, search_text, \
         created_at, updated_at) VALUES ('p1', 'pa1', 'Jane', 'Doe', 'jane doe', 0, 0)",
        "INSERT INTO bookings (practice_id, id, patient_id, doctor_id, start_at, end_at, \
         created_at, updated_at, metadata) VALUES ('p1', 'b1', 'pa1', 'u1', 1000, 2000, 0, 0, '')",
        "INSERT INTO bookings (practice_id, id, patient_id, doctor_id, start_at, end_at, \
         created_at, updated_at, metadata) VALUES ('p1', 'b2', 'pa1', 'u1', 3000, 4000, 0, 0, \
         '[[\"source\",\"phone\"]]')",
    ] {
        sqlx::query(sql).execute(&pool).await.expect(sql);
    }
    pool.close().await;

    let store = Store::open(&db.url, &PoolSettings::default())
        .await
        .expect("upgrade");
    let practice = store.practice("p1");
    let filter = practice_api::store::bookings::BookingFilter {
        metadata: Some(("source".into(), None)),
        include_cancelled: true,
        ..Default::default()
    };
    let page = practice_api::store::PageRequest {
        page: 1,
        page_size: 10,
    };
    let found = practice
        .list_bookings(&filter, page)
        .await
        .expect("the filter reads every booking");
    let ids: Vec<&str> = found.items.iter().map(|b| b.id.as_str()).collect();
    assert_eq!(ids, ["b2"]);
    let mended = practice
        .find_booking("b1")
        .await
        .expect("read")
        .expect("there");
    assert_eq!(mended.metadata, "[]");
    store.close().await;
}

/// What the sweep had deleted before the floors were kept by type (migration 0034) stands for
/// every type, and the tokens made before their makers were kept (0035) get them from the
/// audit log: a token Ada's session made is Ada's, and so is one that token made, however
/// deep; one the command line made, and one it made in turn, have no user.
#[rstest::rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn floors_and_token_makers_are_carried_over(#[case] engine: Engine) {
    let Some((db, pool)) = migrated_to(engine, 33).await else {
        return;
    };
    let mut statements = vec![
        "INSERT INTO practices (id, name, is_default, created_at) VALUES ('p1', 'Clinic', 1, 0)"
            .to_string(),
        "INSERT INTO users (practice_id, id, email, password_hash, title, first_name, \
         last_name, role, is_doctor, created_at, updated_at) VALUES ('p1', 'ada', \
         'ada@example.com', 'x', NULL, 'Ada', 'Lovelace', 'admin', 0, 0, 0)"
            .to_string(),
        "INSERT INTO event_floors (practice_id, tx_id, id) VALUES ('p1', 0, 7)".to_string(),
    ];
    // A made by Ada, B by A, C by B; D by the command line, E by D.
    for (token, actor_type, actor) in [
        ("A", "user", "ada"),
        ("B", "token", "A"),
        ("C", "token", "B"),
        ("D", "operator", "operator"),
        ("E", "token", "D"),
    ] {
        statements.push(format!(
            "INSERT INTO tokens (practice_id, id, kind, name, secret_hash, permissions, \
             created_at) VALUES ('p1', '{token}', 'api', '{token}', 'hash-{token}', '*', 0)"
        ));
        statements.push(format!(
            "INSERT INTO audit_events (practice_id, id, at, actor_type, actor_id, action, \
             operation, resource_type, resource_id) VALUES ('p1', 'a-{token}', 0, \
             '{actor_type}', '{actor}', 'create', 'createApiToken', 'token', '{token}')"
        ));
    }
    for sql in &statements {
        sqlx::query(sqlx::AssertSqlSafe(sql.as_str()))
            .execute(&pool)
            .await
            .expect(sql);
    }
    pool.close().await;

    let store = Store::open(&db.url, &PoolSettings::default())
        .await
        .expect("upgrade");
    let practice = store.practice("p1");
    let floor = Some(practice_api::store::events::Position { tx: 0, id: 7 });
    for types in [
        vec!["patient.created".to_string()],
        vec!["label.deleted".to_string()],
    ] {
        let floors = practice.event_floors(&types).await.expect("floors");
        assert_eq!((floors.all, floors.of_types), (floor, floor), "{types:?}");
    }
    let mut makers: Vec<(String, Option<String>, Option<String>)> = practice
        .list_api_tokens()
        .await
        .expect("tokens")
        .into_iter()
        .map(|t| (t.id, t.created_by_user_id, t.created_by_token_id))
        .collect();
    makers.sort();
    let made = |id: &str, user: Option<&str>, token: Option<&str>| {
        (
            id.to_string(),
            user.map(str::to_string),
            token.map(str::to_string),
        )
    };
    assert_eq!(
        makers,
        [
            made("A", Some("ada"), None),
            made("B", Some("ada"), Some("A")),
            made("C", Some("ada"), Some("B")),
            made("D", None, None),
            made("E", None, Some("D")),
        ]
    );
    store.close().await;
}

/// A subscription's old secret from before each kept its own (migration 0036) goes on
/// signing until the time it had; one without stays without.
#[rstest::rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn an_old_webhook_secret_is_carried_over(#[case] engine: Engine) {
    let Some((db, pool)) = migrated_to(engine, 35).await else {
        return;
    };
    let statements = [
        "INSERT INTO practices (id, name, is_default, created_at) VALUES ('p1', 'Clinic', 1, 0)",
        "INSERT INTO webhook_subscriptions (practice_id, id, url, label, headers, secret, \
         previous_secret, previous_secret_until, created_at, updated_at) VALUES ('p1', 'w1', \
         'https://example.com/a', 'a', '[]', 'whsec_new', 'whsec_old', 4102444800000, 0, 0)",
        "INSERT INTO webhook_subscriptions (practice_id, id, url, label, headers, secret, \
         created_at, updated_at) VALUES ('p1', 'w2', 'https://example.com/b', 'b', '[]', \
         'whsec_only', 0, 0)",
    ];
    for sql in statements {
        sqlx::query(sql).execute(&pool).await.expect(sql);
    }
    pool.close().await;

    let store = Store::open(&db.url, &PoolSettings::default())
        .await
        .expect("upgrade");
    let practice = store.practice("p1");
    let old = |id: &'static str| {
        let practice = &practice;
        async move {
            let found = practice
                .find_webhook(id)
                .await
                .expect("read")
                .expect("there");
            practice_api::store::webhooks::old_secrets_at(&found.subscription.old_secrets, 0)
                .into_iter()
                .map(|s| (s.secret, s.until))
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        old("w1").await,
        [("whsec_old".to_string(), 4_102_444_800_000)]
    );
    assert_eq!(old("w2").await, []);
    store.close().await;
}

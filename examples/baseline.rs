//! The benchmark's baseline (see BENCHMARKS.md): the `patient(id)` lookup, the search, the pages
//! of patients and of bookings and the label writes as bare axum handlers making the same store
//! calls, so the same SQL, and answering JSON, with no GraphQL, no token check, no permissions
//! and no audit of reads. `bench/run` drives it
//! beside the real server, so that each figure can be read as a ratio to what the machine and
//! the database allow. Not part of the product.
//!
//! `cargo run --release --example baseline -- --database URL --practice ID`

use std::sync::LazyLock;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use clap::Parser;
use practice_api::store::audit::{Actor, Author};
use practice_api::store::bookings::BookingFilter;
use practice_api::store::patients::{Patient, PatientFilter};
use practice_api::store::{PageRequest, PoolSettings, Store};
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Parser)]
struct Args {
    /// The database, as the server's --database.
    #[arg(long)]
    database: String,
    /// The practice whose patients are looked up.
    #[arg(long)]
    practice: String,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: String,
}

#[derive(Clone)]
struct Baseline {
    store: Store,
    practice: String,
}

#[derive(Deserialize)]
struct PatientRequest {
    id: String,
    /// `patient(id) { id firstName email }`: the patient's row only, one statement (the
    /// selection of the peer's lookup, `bench/run --peer`).
    #[serde(default)]
    narrow: bool,
}

#[derive(Deserialize)]
struct SearchRequest {
    search: String,
}

#[derive(Deserialize)]
struct PageOfPatients {
    page: u32,
}

/// A page of bookings in a range of times (milliseconds).
#[derive(Deserialize)]
struct PageOfBookings {
    page: u32,
    start: i64,
    end: i64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LabelRequest {
    add: bool,
    patient_id: String,
    label_id: String,
}

static OPERATOR: LazyLock<Actor> = LazyLock::new(Actor::operator);

type Answer = Result<Json<Value>, (StatusCode, String)>;

fn failed(error: impl std::fmt::Display) -> (StatusCode, String) {
    (StatusCode::INTERNAL_SERVER_ERROR, error.to_string())
}

/// `patient(id) { firstName email labels { text } }`, bare; or, narrow, `patient(id) { id
/// firstName email }`.
async fn patient(State(app): State<Baseline>, Json(request): Json<PatientRequest>) -> Answer {
    let practice = app.store.practice(&app.practice);
    if request.narrow {
        let Some(patient) = practice.find_patient(&request.id).await.map_err(failed)? else {
            return Ok(Json(json!({ "data": { "patient": null } })));
        };
        return Ok(Json(json!({ "data": { "patient": {
            "id": patient.id,
            "firstName": patient.fields.first_name,
            "email": patient.fields.email,
        } } })));
    }
    // The patient with its labels, in one statement, as the server asks for them.
    let Some((patient, labels)) = practice
        .find_patient_with_labels(&request.id)
        .await
        .map_err(failed)?
    else {
        return Ok(Json(json!({ "data": { "patient": null } })));
    };
    let texts: Vec<Value> = labels.iter().map(|l| json!({ "text": l.title })).collect();
    Ok(Json(json!({ "data": { "patient": {
        "firstName": patient.fields.first_name,
        "email": patient.fields.email,
        "labels": texts,
    } } })))
}

/// `patients(search:, pagination: {pageSize: 25}) { data { id firstName lastName } }`, bare.
async fn search(State(app): State<Baseline>, Json(request): Json<SearchRequest>) -> Answer {
    let filter = PatientFilter {
        search: Some(request.search),
        ..PatientFilter::default()
    };
    let page = PageRequest {
        page: 1,
        page_size: 25,
    };
    let found = app
        .store
        .practice(&app.practice)
        .list_patients(&filter, page)
        .await
        .map_err(failed)?
        .map_err(|_| failed("the search matches too many patients"))?;
    let data: Vec<Value> = found
        .items
        .iter()
        .map(|p| json!({ "id": p.id, "firstName": p.fields.first_name, "lastName": p.fields.last_name }))
        .collect();
    Ok(Json(json!({ "data": { "patients": { "data": data } } })))
}

/// `patients(pagination: {page:, pageSize: 100}) { data { id firstName lastName labels { text
/// color } } }`, bare: the page, then its labels in one batch, as the API loads them.
async fn patients_page(State(app): State<Baseline>, Json(request): Json<PageOfPatients>) -> Answer {
    let practice = app.store.practice(&app.practice);
    let page = PageRequest {
        page: request.page,
        page_size: 100,
    };
    let found = practice
        .list_patients(&PatientFilter::default(), page)
        .await
        .map_err(failed)?
        .map_err(|_| failed("no search was asked for"))?;
    let ids: Vec<String> = found.items.iter().map(|p| p.id.clone()).collect();
    let labels = practice.labels_of_patients(&ids).await.map_err(failed)?;
    let data: Vec<Value> = found
        .items
        .iter()
        .map(|p: &Patient| {
            let labels: Vec<Value> = labels
                .get(&p.id)
                .into_iter()
                .flatten()
                .map(|l| json!({ "text": l.title, "color": l.color }))
                .collect();
            json!({ "id": p.id, "firstName": p.fields.first_name,
                    "lastName": p.fields.last_name, "labels": labels })
        })
        .collect();
    Ok(Json(json!({ "data": { "patients": { "data": data } } })))
}

/// `bookings(dateRange:, pagination: {page:, pageSize: 100}) { data { id start end patient {
/// firstName lastName } doctor { fullName } location { name } } }`, bare: the page, then its
/// patients, doctors and locations a batch each, as the API loads them.
async fn bookings(State(app): State<Baseline>, Json(request): Json<PageOfBookings>) -> Answer {
    let practice = app.store.practice(&app.practice);
    let filter = BookingFilter {
        range: Some((request.start, request.end)),
        ..BookingFilter::default()
    };
    let page = PageRequest {
        page: request.page,
        page_size: 100,
    };
    let found = practice
        .list_bookings(&filter, page)
        .await
        .map_err(failed)?;
    let distinct = |pick: fn(&practice_api::store::bookings::Booking) -> Option<&String>| {
        let mut ids: Vec<String> = found.items.iter().filter_map(pick).cloned().collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    };
    let patients = practice
        .patients_by_ids(&distinct(|b| Some(&b.fields.patient_id)))
        .await
        .map_err(failed)?;
    let doctors = practice
        .users_by_ids(&distinct(|b| Some(&b.fields.doctor_id)))
        .await
        .map_err(failed)?;
    let locations = practice
        .locations_by_ids(&distinct(|b| b.fields.location_id.as_ref()))
        .await
        .map_err(failed)?;
    let time = |ms: i64| {
        chrono::DateTime::from_timestamp_millis(ms)
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
    };
    let data: Vec<Value> = found
        .items
        .iter()
        .map(|b| {
            let f = &b.fields;
            json!({
                "id": b.id,
                "start": time(f.start_at),
                "end": time(f.end_at),
                "patient": patients.get(&f.patient_id).map(|p| json!({
                    "firstName": p.fields.first_name, "lastName": p.fields.last_name })),
                "doctor": doctors.get(&f.doctor_id).map(|d| json!({ "fullName": d.full_name() })),
                "location": f.location_id.as_ref().and_then(|l| locations.get(l))
                    .map(|l| json!({ "name": l.name })),
            })
        })
        .collect();
    Ok(Json(json!({ "data": { "bookings": { "data": data } } })))
}

/// `addPatientLabel` or `removePatientLabel`, bare: the same store call, so the same insert
/// (or delete) and its audit event.
async fn label(State(app): State<Baseline>, Json(request): Json<LabelRequest>) -> Answer {
    let practice = app.store.practice(&app.practice).by(Author {
        actor: &OPERATOR,
        operation: Some("baseline"),
        key: None,
    });
    let change = if request.add {
        practice
            .add_patient_label(&request.patient_id, &request.label_id)
            .await
    } else {
        practice
            .remove_patient_label(&request.patient_id, &request.label_id)
            .await
    }
    .map_err(failed)?;
    Ok(Json(match change {
        Ok(p) => json!({ "data": { "id": p.id }, "error": null }),
        Err(denied) => json!({ "data": null, "error": format!("{denied:?}") }),
    }))
}

#[tokio::main]
async fn main() -> Result<(), String> {
    let args = Args::parse();
    let store = Store::open(&args.database, &PoolSettings::default())
        .await
        .map_err(|e| e.to_string())?;
    let app = Router::new()
        .route("/patient", post(patient))
        .route("/search", post(search))
        .route("/patients", post(patients_page))
        .route("/bookings", post(bookings))
        .route("/label", post(label))
        .with_state(Baseline {
            store,
            practice: args.practice,
        });
    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .map_err(|e| e.to_string())?;
    let address = listener.local_addr().map_err(|e| e.to_string())?;
    // One write, so that a script reading the log never sees half an address.
    let line = format!("baseline listening on http://{address}");
    eprintln!("{line}");
    axum::serve(listener, app).await.map_err(|e| e.to_string())
}

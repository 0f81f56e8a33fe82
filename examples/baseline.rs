//! The benchmark's baseline (see BENCHMARKS.md): the `patient(id)` lookup and the label writes
//! as bare axum handlers making the same store calls, so the same SQL, and answering JSON, with
//! no GraphQL, no token check, no permissions and no audit of reads. `bench/run` drives it
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
use practice_api::store::{PoolSettings, Store};
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

/// `patient(id) { firstName email labels { text } }`, bare.
async fn patient(State(app): State<Baseline>, Json(request): Json<PatientRequest>) -> Answer {
    let practice = app.store.practice(&app.practice);
    let Some(patient) = practice.find_patient(&request.id).await.map_err(failed)? else {
        return Ok(Json(json!({ "data": { "patient": null } })));
    };
    let labels = practice
        .labels_of_patients(std::slice::from_ref(&patient.id))
        .await
        .map_err(failed)?;
    let texts: Vec<Value> = labels
        .get(&patient.id)
        .into_iter()
        .flatten()
        .map(|l| json!({ "text": l.title }))
        .collect();
    Ok(Json(json!({ "data": { "patient": {
        "firstName": patient.fields.first_name,
        "email": patient.fields.email,
        "labels": texts,
    } } })))
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

//! Bookings: the lifecycle, ranges, overlaps (also under concurrency), and who may see what.

use serde_json::{Value, json};

use rstest::rstest;

use crate::helpers::{Engine, PASSWORD, TestApp, error_code, error_message};

const CREATE: &str = "mutation($d: BookingDataInput!) { createBooking(bookingData: $d) { data { id start end reference deleted } error } }";
const UPDATE: &str = "mutation($id: ID!, $d: BookingUpdateDataInput!) { updateBooking(id: $id, bookingData: $d) { data { id start end } error } }";
const CANCEL: &str = "mutation($id: ID!, $r: String) { deleteBooking(id: $id, cancellationReason: $r, sendCancellationMessages: false) { data { id deleted cancellationReason } error } }";

/// A day to book on, far from today's edges.
const DAY: &str = "2031-03-04";

fn at(time: &str) -> String {
    format!("{DAY}T{time}:00Z")
}

/// A practice with a doctor, a patient, a location and an appointment type.
struct Clinic {
    app: TestApp,
    doctor: String,
    patient: String,
    location: String,
    kind: String,
}

/// `let c = clinic!(engine);`, or an early return where the engine is missing on a laptop.
macro_rules! clinic {
    ($engine:expr) => {
        match Clinic::new($engine).await {
            Some(clinic) => clinic,
            None => return,
        }
    };
}

impl Clinic {
    async fn new(engine: Engine) -> Option<Clinic> {
        let app = TestApp::spawn_with(engine, crate::helpers::test_config()).await?;
        let doctor = app.doctor("Grace", "Hopper").await;
        let patient = app.patient("Jane", "Doe").await;
        let made = app
            .ok(
                "mutation { createLocation(name: \"Main surgery\", address: { city: \"York\" }) { data { id } error } createAppointmentType(title: \"Consultation\", duration: 30, price: 50.5) { data { id } error } }",
                json!({}),
            )
            .await;
        let location = made["createLocation"]["data"]["id"]
            .as_str()
            .expect("location")
            .to_string();
        let kind = made["createAppointmentType"]["data"]["id"]
            .as_str()
            .expect("type")
            .to_string();
        Some(Clinic {
            app,
            doctor,
            patient,
            location,
            kind,
        })
    }

    /// Books `patient` with the doctor from `start` to `end` (HH:MM on DAY); returns the payload.
    async fn book(&self, patient: &str, start: &str, end: &str) -> Value {
        self.book_with(&self.app.admin_token, patient, start, end)
            .await
    }

    async fn book_with(&self, token: &str, patient: &str, start: &str, end: &str) -> Value {
        let body = self
            .app
            .gql(
                Some(token),
                CREATE,
                json!({ "d": { "patient": patient, "doctor": self.doctor, "start": at(start), "end": at(end) } }),
            )
            .await;
        assert!(body.get("errors").is_none(), "{body}");
        body["data"]["createBooking"].clone()
    }

    async fn book_ok(&self, start: &str, end: &str) -> String {
        let payload = self.book(&self.patient, start, end).await;
        payload["data"]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("booking refused: {payload}"))
            .to_string()
    }

    async fn range(&self, start: &str, end: &str, extra: &str) -> Vec<String> {
        let data = self
            .app
            .ok(
                &format!("query($s: DateTime!, $e: DateTime!) {{ bookings(dateRange: {{ start: $s, end: $e }}{extra}) {{ data {{ id }} }} }}"),
                json!({ "s": at(start), "e": at(end) }),
            )
            .await;
        data["bookings"]["data"]
            .as_array()
            .expect("list")
            .iter()
            .map(|b| b["id"].as_str().expect("id").to_string())
            .collect()
    }
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn book_read_move_cancel_and_rebook(#[case] engine: Engine) {
    let c = clinic!(engine);
    let body = c
        .app
        .gql(
            Some(&c.app.admin_token),
            CREATE,
            json!({ "d": {
                "patient": c.patient, "doctor": c.doctor, "location": c.location,
                "bookingType": c.kind, "start": format!("{DAY}T10:15:00+01:00"), "comments": "First visit"
            }}),
        )
        .await;
    let payload = &body["data"]["createBooking"];
    assert_eq!(payload["error"], Value::Null, "{body}");
    let id = payload["data"]["id"].as_str().expect("id").to_string();
    // Stored and returned in UTC; the end comes from the appointment type's 30 minutes.
    assert_eq!(
        payload["data"]["start"],
        json!(format!("{DAY}T09:15:00.000Z"))
    );
    assert_eq!(
        payload["data"]["end"],
        json!(format!("{DAY}T09:45:00.000Z"))
    );
    assert!(
        payload["data"]["reference"]
            .as_str()
            .expect("reference")
            .starts_with("BK-")
    );

    let read = c
        .app
        .ok(
            "query($id: ID!) { booking(id: $id) { id comments deleted patientId patient { firstName } doctor { fullName isDoctor } doctorName location { name address { city } } appointment { title duration price } createdAt updatedAt } }",
            json!({ "id": id }),
        )
        .await;
    assert_eq!(
        read["booking"],
        json!({
            "id": id, "comments": "First visit", "deleted": false, "patientId": c.patient,
            "patient": { "firstName": "Jane" },
            "doctor": { "fullName": "Grace Hopper", "isDoctor": true },
            "doctorName": "Dr Grace Hopper",
            "location": { "name": "Main surgery", "address": { "city": "York" } },
            "appointment": { "title": "Consultation", "duration": 30, "price": 50.5 },
            "createdAt": read["booking"]["createdAt"], "updatedAt": read["booking"]["updatedAt"]
        })
    );

    // Move it.
    let moved = c
        .app
        .ok(UPDATE, json!({ "id": id, "d": { "start": at("11:00"), "end": at("11:30"), "comments": null } }))
        .await;
    assert_eq!(
        moved["updateBooking"]["data"],
        json!({ "id": id, "start": format!("{DAY}T11:00:00.000Z"), "end": format!("{DAY}T11:30:00.000Z") })
    );

    // Cancel it: kept, marked, out of lists unless asked for; the slot is free again.
    let cancelled = c
        .app
        .ok(CANCEL, json!({ "id": id, "r": "Patient is unwell" }))
        .await;
    assert_eq!(
        cancelled["deleteBooking"]["data"],
        json!({ "id": id, "deleted": true, "cancellationReason": "Patient is unwell" })
    );
    let again = c.app.ok(CANCEL, json!({ "id": id })).await;
    assert_eq!(
        again["deleteBooking"]["error"],
        "This booking is already cancelled"
    );
    let moved_again = c
        .app
        .ok(UPDATE, json!({ "id": id, "d": { "start": at("12:00") } }))
        .await;
    assert_eq!(
        moved_again["updateBooking"]["error"],
        "This booking has been cancelled and can no longer be changed"
    );
    assert!(c.range("00:00", "23:59", "").await.is_empty());
    assert_eq!(
        c.range("00:00", "23:59", ", options: { includeDeleted: true }")
            .await,
        vec![id.clone()]
    );
    let rebooked = c.book_ok("11:00", "11:30").await;
    assert_ne!(rebooked, id);
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn ranges_include_bookings_that_start_or_end_inside(#[case] engine: Engine) {
    let c = clinic!(engine);
    let morning = c.book_ok("09:00", "10:00").await;
    let noon = c.book_ok("12:00", "13:00").await;
    let evening = c.book_ok("17:00", "18:00").await;
    // Edges are included: a booking ending exactly at the range start is in it.
    assert_eq!(
        c.range("10:00", "12:00", "").await,
        vec![morning.clone(), noon.clone()]
    );
    assert_eq!(c.range("09:30", "11:59", "").await, vec![morning.clone()]);
    assert_eq!(
        c.range("12:30", "17:00", "").await,
        vec![noon.clone(), evening.clone()]
    );
    // A booking that spans the whole range neither starts nor ends inside it.
    assert!(c.range("12:15", "12:45", "").await.is_empty());
    assert!(c.range("13:01", "16:59", "").await.is_empty());
    // Paging through by start time.
    let page = c
        .app
        .ok("{ bookings(pagination: { pageSize: 2, page: 2 }) { data { id } pageInfo { page pageSize hasMore } } }", json!({}))
        .await;
    assert_eq!(page["bookings"]["data"], json!([{ "id": evening }]));
    assert_eq!(
        page["bookings"]["pageInfo"],
        json!({ "page": 2, "pageSize": 2, "hasMore": false })
    );
    // A backwards range is a clear error.
    let body = c
        .app
        .gql(
            Some(&c.app.admin_token),
            "query($s: DateTime!, $e: DateTime!) { bookings(dateRange: { start: $s, end: $e }) { data { id } } }",
            json!({ "s": at("12:00"), "e": at("11:00") }),
        )
        .await;
    assert_eq!(error_code(&body), "BAD_USER_INPUT", "{body}");

    // Through the patient and the doctor, by day.
    let data = c
        .app
        .ok(
            "query($p: ID!, $d: ID!) { patient(id: $p) { bookings(start: \"2031-03-04\", end: \"2031-03-04\") { id } } user(id: $d) { bookings(start: \"2031-03-01\", end: \"2031-03-31\", pageSize: 2) { data { id } pageInfo { hasMore } } } }",
            json!({ "p": c.patient, "d": c.doctor }),
        )
        .await;
    assert_eq!(
        data["patient"]["bookings"].as_array().expect("list").len(),
        3
    );
    assert_eq!(
        data["user"]["bookings"]["data"],
        json!([{ "id": morning }, { "id": noon }])
    );
    assert_eq!(data["user"]["bookings"]["pageInfo"]["hasMore"], json!(true));
    let other_day = c
        .app
        .ok(
            "query($p: ID!) { patient(id: $p) { bookings(start: \"2031-03-05\", end: \"2031-03-06\") { id } } }",
            json!({ "p": c.patient }),
        )
        .await;
    assert_eq!(other_day["patient"]["bookings"], json!([]));
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_doctor_is_never_double_booked(#[case] engine: Engine) {
    let c = clinic!(engine);
    let other = c.app.patient("John", "Smith").await;
    let first = c.book_ok("09:15", "09:45").await;
    // Back to back is fine, on both sides.
    c.book_ok("08:45", "09:15").await;
    c.book_ok("09:45", "10:15").await;
    // Any overlap is refused with a sentence, and nothing is written.
    for (start, end) in [
        ("09:00", "09:30"),
        ("09:30", "10:00"),
        ("09:20", "09:40"),
        ("09:00", "10:30"),
    ] {
        let refused = c.book(&other, start, end).await;
        assert_eq!(refused["data"], Value::Null);
        let error = refused["error"].as_str().expect("error");
        assert!(
            error.starts_with("Dr Grace Hopper is already booked "),
            "{error}"
        );
        assert!(error.ends_with(&format!("on {DAY} (UTC)")), "{error}");
    }
    let refused = c.book(&other, "09:15", "09:45").await;
    assert_eq!(
        refused["error"],
        json!(format!(
            "Dr Grace Hopper is already booked 09:15–09:45 on {DAY} (UTC)"
        ))
    );
    assert_eq!(c.range("00:00", "23:59", "").await.len(), 3);

    // Another doctor is free at that time.
    let other_doctor = c.app.doctor("Alan", "Turing").await;
    let body = c
        .app
        .ok(CREATE, json!({ "d": { "patient": other, "doctor": other_doctor, "start": at("09:15"), "end": at("09:45") } }))
        .await;
    assert_eq!(body["createBooking"]["error"], Value::Null);
    let theirs = body["createBooking"]["data"]["id"]
        .as_str()
        .expect("id")
        .to_string();

    // Moving a booking into an occupied slot, or to a busy doctor, is refused and changes nothing.
    let late = c.book_ok("14:00", "14:30").await;
    let into = c
        .app
        .ok(
            UPDATE,
            json!({ "id": late, "d": { "start": at("09:30"), "end": at("10:00") } }),
        )
        .await;
    assert!(
        into["updateBooking"]["error"]
            .as_str()
            .expect("error")
            .contains("already booked")
    );
    let to_busy = c
        .app
        .ok(UPDATE, json!({ "id": theirs, "d": { "doctor": c.doctor } }))
        .await;
    assert!(
        to_busy["updateBooking"]["error"]
            .as_str()
            .expect("error")
            .contains("already booked")
    );
    let unchanged = c
        .app
        .ok(
            "query($id: ID!) { booking(id: $id) { start } }",
            json!({ "id": late }),
        )
        .await;
    assert_eq!(
        unchanged["booking"]["start"],
        json!(format!("{DAY}T14:00:00.000Z"))
    );
    // Moving within its own slot is fine.
    let shift = c
        .app
        .ok(UPDATE, json!({ "id": first, "d": { "end": at("09:40") } }))
        .await;
    assert_eq!(shift["updateBooking"]["error"], Value::Null, "{shift}");
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn concurrent_requests_for_one_slot_book_it_once(#[case] engine: Engine) {
    let c = clinic!(engine);
    let mut patients = Vec::new();
    for i in 0..25 {
        patients.push(c.app.patient("Rush", &format!("Patient{i}")).await);
    }
    let bodies: Vec<Value> = patients
        .iter()
        .map(|p| json!({ "query": CREATE, "variables": { "d": { "patient": p, "doctor": c.doctor, "start": at("09:00"), "end": at("09:30") } } }))
        .collect();
    let results = futures_util::future::join_all(
        bodies
            .iter()
            .map(|body| c.app.post_json(Some(&c.app.admin_token), body)),
    )
    .await;
    let mut booked = 0;
    for raw in &results {
        assert_eq!(raw.status, reqwest::StatusCode::OK, "{}", raw.body);
        assert!(
            raw.body.get("errors").is_none(),
            "no internal error: {}",
            raw.body
        );
        let payload = &raw.body["data"]["createBooking"];
        if payload["error"].is_null() {
            booked += 1;
        } else {
            assert!(
                payload["error"]
                    .as_str()
                    .expect("error")
                    .contains("already booked"),
                "{payload}"
            );
        }
    }
    assert_eq!(booked, 1);
    assert_eq!(c.range("00:00", "23:59", "").await.len(), 1);
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn bad_bookings_are_refused_clearly(#[case] engine: Engine) {
    let c = clinic!(engine);
    let send = |d: Value| {
        let app = &c.app;
        async move {
            app.gql(Some(&app.admin_token), CREATE, json!({ "d": d }))
                .await
        }
    };
    let base = json!({ "patient": c.patient, "doctor": c.doctor, "start": at("09:00"), "end": at("09:30") });
    let with = |key: &str, value: Value| {
        let mut d = base.clone();
        d[key] = value;
        d
    };
    // Invalid input: GraphQL errors.
    for (d, says) in [
        (
            with("end", json!(at("08:00"))),
            "bookingData.end must be after bookingData.start",
        ),
        (
            with("end", json!(at("09:00"))),
            "bookingData.end must be after bookingData.start",
        ),
        (
            with("end", json!("2031-03-06T09:00:00Z")),
            "longer than 24 hours",
        ),
        (
            with("doctor", Value::Null),
            "bookingData.doctor is required",
        ),
        (
            with("start", json!("2031-03-04T09:00:00")),
            "with an offset",
        ),
        (with("start", json!("next tuesday")), "RFC 3339"),
        // An end worked out from the type's 30 minutes past the last time a DateTime writes.
        (
            json!({ "patient": c.patient, "doctor": c.doctor, "bookingType": c.kind,
                    "start": "9999-12-31T23:50:00Z" }),
            "after 9999-12-31T23:59:59Z",
        ),
    ] {
        let body = send(d.clone()).await;
        assert_eq!(error_code(&body), "BAD_USER_INPUT", "{d}: {body}");
        assert!(error_message(&body).contains(says), "{d}: {body}");
    }
    // Refusals: the payload's error, nothing written.
    let receptionist = c.app.user("receptionist", "rosa@example.com").await;
    let users = c.app.ok("{ users { data { id email } } }", json!({})).await;
    let not_doctor = users["users"]["data"]
        .as_array()
        .expect("users")
        .iter()
        .find(|u| u["email"] == json!(receptionist))
        .and_then(|u| u["id"].as_str())
        .expect("id")
        .to_string();
    let archived = c.app.patient("Old", "Patient").await;
    c.app
        .ok(
            "mutation($id: ID!) { archivePatient(id: $id) { error } }",
            json!({ "id": archived }),
        )
        .await;
    for (d, says) in [
        (
            with("patient", json!("nobody")),
            "No patient with id nobody".to_string(),
        ),
        (
            with("doctor", json!("nobody")),
            "No doctor with id nobody".to_string(),
        ),
        (
            with("doctor", json!(not_doctor)),
            "Test receptionist is not a doctor and cannot be booked".to_string(),
        ),
        (
            with("location", json!("nowhere")),
            "No location with id nowhere".to_string(),
        ),
        (
            with("bookingType", json!("nothing")),
            "No appointment type with id nothing".to_string(),
        ),
        (
            with("patient", json!(archived)),
            "The patient is archived: unarchive them before booking".to_string(),
        ),
    ] {
        let body = send(d.clone()).await;
        assert_eq!(
            body["data"]["createBooking"],
            json!({ "data": null, "error": says }),
            "{d}"
        );
    }
    assert!(
        c.range("00:00", "23:59", ", options: { includeDeleted: true }")
            .await
            .is_empty()
    );
}

/// A booking moved to another time or doctor is booked anew: not for an archived patient,
/// nor with a doctor whose account is disabled. What else it records still changes.
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_moved_booking_is_booked_anew(#[case] engine: Engine) {
    let c = clinic!(engine);
    let booking = c.book_ok("09:00", "09:30").await;
    let update = "mutation($id: ID!, $d: BookingUpdateDataInput!) { updateBooking(id: $id, bookingData: $d) { data { start comments } error } }";
    let moved = json!({ "start": at("11:00"), "end": at("11:30") });
    let send_to = |id: String, d: Value| c.app.ok(update, json!({ "id": id, "d": d }));
    let send = |d: Value| send_to(booking.clone(), d);
    // A failed booking, which holds no slot: taking it again is booking anew.
    let failed = c.book_ok("13:00", "13:30").await;
    let done = send_to(failed.clone(), json!({ "status": "failed" })).await;
    assert!(done["updateBooking"]["error"].is_null(), "{done}");
    let patient = |state: &'static str| {
        c.app.ok(
            match state {
                "archive" => "mutation($id: ID!) { archivePatient(id: $id) { error } }",
                _ => "mutation($id: ID!) { unarchivePatient(id: $id) { error } }",
            },
            json!({ "id": c.patient }),
        )
    };
    patient("archive").await;
    let archived =
        json!({ "data": null, "error": "The patient is archived: unarchive them before booking" });
    let refused = send(moved.clone()).await;
    assert_eq!(refused["updateBooking"], archived);
    let refused = send_to(failed.clone(), json!({ "status": "confirmed" })).await;
    assert_eq!(refused["updateBooking"], archived);
    let noted = send(json!({ "comments": "came anyway" })).await;
    assert!(noted["updateBooking"]["error"].is_null(), "{noted}");
    let journey = c
        .app
        .ok(
            "mutation($id: ID!) { updateBookingJourney(id: $id, bookingJourneyInput: { journeyStage: arrived }) { error } }",
            json!({ "id": booking }),
        )
        .await;
    assert!(
        journey["updateBookingJourney"]["error"].is_null(),
        "{journey}"
    );
    patient("unarchive").await;
    let on_hold = |hold: bool| {
        c.app.ok(
            "mutation($id: ID!, $h: Boolean) { updatePatient(id: $id, patientData: { onHold: $h }) { error } }",
            json!({ "id": c.patient, "h": hold }),
        )
    };
    on_hold(true).await;
    let refused = send(moved.clone()).await;
    assert_eq!(
        refused["updateBooking"]["error"],
        "The patient is on hold: take them off hold (onHold: false) before booking"
    );
    on_hold(false).await;

    let disabled = c
        .app
        .ok(
            "mutation($id: ID!) { disableUser(id: $id) { error } }",
            json!({ "id": c.doctor }),
        )
        .await;
    assert!(disabled["disableUser"]["error"].is_null(), "{disabled}");
    let says = "Grace Hopper's account is disabled: they cannot be booked";
    let refused = send(moved.clone()).await;
    assert_eq!(refused["updateBooking"]["error"], says, "{refused}");
    // A caller that may not read staff users is not told the doctor's name.
    let booker = c.app.token(&["bookings:write"]).await;
    let refused = c
        .app
        .gql(
            Some(&booker),
            update,
            json!({ "id": booking, "d": moved.clone() }),
        )
        .await;
    assert_eq!(
        refused["data"]["updateBooking"]["error"],
        format!(
            "The staff user with id {} is disabled and cannot be booked",
            c.doctor
        ),
        "{refused}"
    );
    let new = c.book(&c.patient, "14:00", "14:30").await;
    assert_eq!(new, json!({ "data": null, "error": says }));
    let noted = send(json!({ "comments": "seen by another" })).await;
    assert!(noted["updateBooking"]["error"].is_null(), "{noted}");
    let cancelled = c
        .app
        .ok(
            "mutation($id: ID!) { deleteBooking(id: $id) { error } }",
            json!({ "id": booking }),
        )
        .await;
    assert!(cancelled["deleteBooking"]["error"].is_null(), "{cancelled}");
    // Nothing moved.
    let kept = c
        .app
        .ok(
            "query($id: ID!) { booking(id: $id) { start comments } }",
            json!({ "id": booking }),
        )
        .await;
    assert_eq!(
        kept["booking"],
        json!({ "start": format!("{DAY}T09:00:00.000Z"), "comments": "seen by another" })
    );
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_bookings_token_gets_no_patient_data_through_a_booking(#[case] engine: Engine) {
    let c = clinic!(engine);
    let id = c.book_ok("09:00", "09:30").await;
    let token = c.app.token(&["bookings:read"]).await;
    let body = c
        .app
        .gql(
            Some(&token),
            "query($id: ID!) { booking(id: $id) { id patientId start patient { email firstName } doctorName location { name } } }",
            json!({ "id": id }),
        )
        .await;
    let booking = &body["data"]["booking"];
    assert_eq!(
        booking["id"],
        json!(id),
        "the rest of the booking is returned: {body}"
    );
    assert_eq!(booking["patientId"], json!(c.patient));
    assert_eq!(booking["doctorName"], "Dr Grace Hopper");
    assert_eq!(
        booking.get("patient"),
        Some(&Value::Null),
        "present, and null: {body}"
    );
    assert_eq!(error_code(&body), "FORBIDDEN");
    assert_eq!(error_message(&body), "Missing permission patients:read");
    assert_eq!(body["errors"][0]["path"], json!(["booking", "patient"]));
    // Nor through a list, nor through the doctor.
    let list = c
        .app
        .gql(
            Some(&token),
            "{ bookings { data { patient { email } doctor { email } } } }",
            json!({}),
        )
        .await;
    let codes: Vec<&str> = list["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .filter_map(|e| e["extensions"]["code"].as_str())
        .collect();
    assert_eq!(codes, vec!["FORBIDDEN", "FORBIDDEN"], "{list}");
    assert_eq!(
        list["data"]["bookings"]["data"][0],
        json!({ "patient": null, "doctor": null }),
        "{list}"
    );
    // It cannot book either.
    let write = c
        .app
        .gql(Some(&token), CREATE, json!({ "d": { "patient": c.patient, "doctor": c.doctor, "start": at("10:00"), "end": at("10:30") } }))
        .await;
    assert_eq!(error_code(&write), "FORBIDDEN", "{write}");

    // A token for the patient query alone reads the patient but not the patient's bookings.
    let patient_only = c.app.token(&["query:patient"]).await;
    let body = c
        .app
        .gql(
            Some(&patient_only),
            "query($id: ID!) { patient(id: $id) { firstName bookings(start: \"2031-03-01\", end: \"2031-03-31\") { id } } }",
            json!({ "id": c.patient }),
        )
        .await;
    assert_eq!(body["data"]["patient"]["firstName"], "Jane");
    assert_eq!(body["data"]["patient"]["bookings"], Value::Null);
    assert_eq!(error_message(&body), "Missing permission bookings:read");
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn receptionists_and_practitioners_by_their_roles(#[case] engine: Engine) {
    let c = clinic!(engine);
    let receptionist = c
        .app
        .sign_in(
            &c.app.user("receptionist", "rosa@example.com").await,
            PASSWORD,
        )
        .await;
    let practitioner = c
        .app
        .sign_in(
            &c.app.user("practitioner", "pat@example.com").await,
            PASSWORD,
        )
        .await;

    // Both book, read and cancel bookings, and see the patient of a booking.
    for (token, start, end) in [
        (&receptionist, "09:00", "09:30"),
        (&practitioner, "10:00", "10:30"),
    ] {
        let payload = c.book_with(token, &c.patient, start, end).await;
        let id = payload["data"]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("{payload}"))
            .to_string();
        let read = c
            .app
            .gql(
                Some(token),
                "query($id: ID!) { booking(id: $id) { patient { firstName } } }",
                json!({ "id": id }),
            )
            .await;
        assert_eq!(
            read["data"]["booking"]["patient"]["firstName"], "Jane",
            "{read}"
        );
        let cancelled = c.app.gql(Some(token), CANCEL, json!({ "id": id })).await;
        assert_eq!(
            cancelled["data"]["deleteBooking"]["data"]["deleted"],
            json!(true),
            "{cancelled}"
        );
    }
    // The receptionist may not change patients; the practitioner may.
    let archive = "mutation($id: ID!) { archivePatient(id: $id) { data { archived } error } }";
    let refused = c
        .app
        .gql(Some(&receptionist), archive, json!({ "id": c.patient }))
        .await;
    assert_eq!(error_message(&refused), "Missing permission patients:write");
    let done = c
        .app
        .gql(Some(&practitioner), archive, json!({ "id": c.patient }))
        .await;
    assert_eq!(
        done["data"]["archivePatient"]["data"]["archived"],
        json!(true),
        "{done}"
    );
    // Neither may change the practice's settings.
    for token in [&receptionist, &practitioner] {
        let body = c
            .app
            .gql(
                Some(token),
                "mutation { createLocation(name: \"Annex\") { error } }",
                json!({}),
            )
            .await;
        assert_eq!(error_code(&body), "FORBIDDEN", "{body}");
        let locations = c
            .app
            .gql(
                Some(token),
                "{ locations { name } appointmentTypes { title duration } }",
                json!({}),
            )
            .await;
        assert_eq!(
            locations["data"]["locations"],
            json!([{ "name": "Main surgery" }]),
            "{locations}"
        );
    }
}

const RECORD: &str = "status metadata { key value } bookingJourney { arrived consultation departed dna } \
                      patientMessagesSent { confirmation reminder followup cancellation } videoUrl billed \
                      onlineBookingPaymentStatus";

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_bookings_status_journey_metadata_and_flags(#[case] engine: Engine) {
    let c = clinic!(engine);
    let app = &c.app;
    let create = format!(
        "mutation($d: BookingDataInput!) {{ createBooking(bookingData: $d) {{ data {{ id {RECORD} }} error }} }}"
    );
    let body = app
        .ok(
            &create,
            json!({ "d": { "patient": c.patient, "doctor": c.doctor, "start": at("09:00"), "end": at("09:30"),
                           "status": "pending", "videoUrl": "https://video.example.com/room/1", "billed": true,
                           "onlineBookingPaymentStatus": "paid",
                           "sendPatientMessages": { "confirmation": true, "reminder": true } } }),
        )
        .await;
    let booking = &body["createBooking"]["data"];
    let id = booking["id"].as_str().expect("id").to_string();
    assert_eq!(booking["status"], "pending", "{body}");
    assert_eq!(booking["videoUrl"], "https://video.example.com/room/1");
    assert_eq!(booking["billed"], true);
    assert_eq!(booking["onlineBookingPaymentStatus"], "paid");
    assert_eq!(
        booking["patientMessagesSent"],
        json!({ "confirmation": true, "reminder": true, "followup": false, "cancellation": false })
    );
    assert_eq!(booking["metadata"], json!([]));
    assert_eq!(
        booking["bookingJourney"],
        json!({ "arrived": null, "consultation": null, "departed": null, "dna": null })
    );
    // A plain booking is confirmed.
    let plain = c.book_ok("10:00", "10:30").await;
    // And one that never gets metadata, which the metadata filter reads past.
    c.book_ok("11:00", "11:30").await;
    let read = app
        .ok(
            &format!("query($id: ID!) {{ booking(id: $id) {{ {RECORD} }} }}"),
            json!({ "id": plain }),
        )
        .await;
    assert_eq!(read["booking"]["status"], "confirmed", "{read}");

    // Metadata: set, replace in place, filter, delete.
    let set = "mutation($id: ID!, $k: String!, $v: String!) { updateBookingMetadata(bookingId: $id, key: $k, value: $v) { data { metadata { key value } } error } }";
    for (k, v) in [("crm", "A-1"), ("source", "widget"), ("crm", "A-2")] {
        let body = app.ok(set, json!({ "id": id, "k": k, "v": v })).await;
        assert!(body["updateBookingMetadata"]["error"].is_null(), "{body}");
    }
    let body = app
        .ok(set, json!({ "id": plain, "k": "source", "v": "phone" }))
        .await;
    assert!(body["updateBookingMetadata"]["error"].is_null(), "{body}");
    let read = app
        .ok(
            &format!("query($id: ID!) {{ booking(id: $id) {{ {RECORD} }} }}"),
            json!({ "id": id }),
        )
        .await;
    assert_eq!(
        read["booking"]["metadata"],
        json!([{ "key": "crm", "value": "A-2" }, { "key": "source", "value": "widget" }])
    );
    let mut both = vec![id.clone(), plain.clone()];
    both.sort();
    assert_eq!(
        filtered(app, json!({ "metadata": { "key": "source" } })).await,
        both
    );
    assert_eq!(
        filtered(
            app,
            json!({ "metadata": { "key": "source", "value": "phone" } })
        )
        .await,
        vec![plain.clone()]
    );
    assert_eq!(
        filtered(app, json!({ "metadata": { "key": "crm", "value": "A-1" } })).await,
        Vec::<String>::new()
    );
    let delete = "mutation($id: ID!, $k: String!) { deleteBookingMetadata(bookingId: $id, key: $k) { data { metadata { key } } error } }";
    let body = app.ok(delete, json!({ "id": id, "k": "crm" })).await;
    assert_eq!(
        body["deleteBookingMetadata"]["data"]["metadata"],
        json!([{ "key": "source" }])
    );
    let body = app.ok(delete, json!({ "id": id, "k": "crm" })).await;
    assert_eq!(
        body["deleteBookingMetadata"]["error"],
        "This booking has no metadata with key \"crm\""
    );
    // Limits: 50 entries; a key of 40 characters, a value of 500.
    for n in 0..49 {
        let body = app
            .ok(set, json!({ "id": id, "k": format!("k{n}"), "v": "x" }))
            .await;
        assert!(
            body["updateBookingMetadata"]["error"].is_null(),
            "{n}: {body}"
        );
    }
    let body = app
        .ok(set, json!({ "id": id, "k": "one-too-many", "v": "x" }))
        .await;
    assert_eq!(
        body["updateBookingMetadata"]["error"],
        "A booking has at most 50 metadata entries: delete one first"
    );
    let body = app
        .ok(set, json!({ "id": id, "k": "k0", "v": "still fine" }))
        .await;
    assert!(body["updateBookingMetadata"]["error"].is_null(), "{body}");
    // Past the contract's limits on a key's and a value's length: refused in `error`.
    for (k, v, says) in [
        (
            "x".repeat(41),
            "v".to_string(),
            "A metadata key has at most 40 characters; this one has 41",
        ),
        (
            "k".to_string(),
            "v".repeat(501),
            "A metadata value has at most 500 characters; this one has 501",
        ),
    ] {
        let body = app.ok(set, json!({ "id": id, "k": k, "v": v })).await;
        assert_eq!(body["updateBookingMetadata"]["error"], says, "{body}");
        assert!(body["updateBookingMetadata"]["data"].is_null(), "{body}");
    }
    // A value may hold lines and tabs (a note, a piece of JSON); a key may not.
    let note = "line one\r\nline two\n\tindented";
    let body = app.ok(set, json!({ "id": id, "k": "k1", "v": note })).await;
    assert!(body["updateBookingMetadata"]["error"].is_null(), "{body}");
    let kept = app
        .ok(
            "query($id: ID!) { booking(id: $id) { metadata { key value } } }",
            json!({ "id": id }),
        )
        .await;
    let entries = kept["booking"]["metadata"].as_array().expect("metadata");
    assert!(
        entries
            .iter()
            .any(|e| e["key"] == "k1" && e["value"] == note),
        "{kept}"
    );
    for (k, v, says) in [
        (String::new(), "v".to_string(), "key must not be empty"),
        (
            "  ".to_string(),
            "v".to_string(),
            "key must not be empty or blank",
        ),
        ("k\u{7}".to_string(), "v".to_string(), "control characters"),
        ("k\nk".to_string(), "v".to_string(), "key must not contain"),
        (
            "k".to_string(),
            "a\u{1b}b".to_string(),
            "value must not contain",
        ),
    ] {
        let body = app
            .gql(
                Some(&app.admin_token),
                set,
                json!({ "id": id, "k": k, "v": v }),
            )
            .await;
        assert_eq!(error_code(&body), "BAD_USER_INPUT", "{body}");
        assert!(error_message(&body).contains(says), "{body}");
    }

    // The journey.
    let journey = format!(
        "mutation($id: ID!, $j: BookingJourneyInput!) {{ updateBookingJourney(id: $id, bookingJourneyInput: $j) {{ data {{ {RECORD} }} error }} }}"
    );
    let body = app
        .ok(
            &journey,
            json!({ "id": id, "j": { "journeyStage": "arrived", "at": "2031-03-04T08:55:00+00:00" } }),
        )
        .await;
    assert_eq!(
        body["updateBookingJourney"]["data"]["bookingJourney"]["arrived"],
        "2031-03-04T08:55:00.000Z"
    );
    // The contract's `date` is a Date, as a client declares its variable and as the schema
    // says to a client that checks its documents against it: midnight UTC.
    let typed = app
        .ok(
            "{ __type(name: \"BookingJourneyInput\") { inputFields { name type { name } } } }",
            json!({}),
        )
        .await;
    assert_eq!(
        typed["__type"]["inputFields"],
        json!([
            { "name": "journeyStage", "type": { "name": "JourneyStage" } },
            { "name": "date", "type": { "name": "Date" } },
            { "name": "at", "type": { "name": "DateTime" } },
        ]),
        "{typed}"
    );
    let body = app
        .ok(
            "mutation($id: ID!, $d: Date) { updateBookingJourney(id: $id, bookingJourneyInput: { journeyStage: departed, date: $d }) { data { bookingJourney { departed } } error } }",
            json!({ "id": id, "d": "2031-03-05" }),
        )
        .await;
    assert_eq!(
        body["updateBookingJourney"]["data"]["bookingJourney"]["departed"],
        "2031-03-05T00:00:00.000Z",
        "{body}"
    );
    let body = app
        .ok(
            &journey,
            json!({ "id": id, "j": { "journeyStage": "consultation" } }),
        )
        .await;
    assert!(
        body["updateBookingJourney"]["data"]["bookingJourney"]["consultation"].is_string(),
        "now, when no date is given: {body}"
    );
    for bad in [
        json!({ "date": "2031-03-04" }),
        json!({ "journeyStage": "arrived", "date": "yesterday" }),
        // A time is `at`'s; a day and a time at once is one too many.
        json!({ "journeyStage": "arrived", "date": "2031-03-04T08:55:00Z" }),
        json!({ "journeyStage": "arrived", "date": "2031-03-04", "at": "2031-03-04T08:55:00Z" }),
        // Years a client could not read back.
        json!({ "journeyStage": "arrived", "date": "+200000-12-31" }),
        json!({ "journeyStage": "arrived", "date": "-5000-01-01" }),
        json!({ "journeyStage": "arrived", "at": "0000-01-01T00:00:00+23:59" }),
        json!({ "journeyStage": "arrived", "date": "2031-03-04".repeat(1000) }),
    ] {
        let body = app
            .gql(
                Some(&app.admin_token),
                &journey,
                json!({ "id": id, "j": bad }),
            )
            .await;
        assert_eq!(error_code(&body), "BAD_USER_INPUT", "{body}");
    }
    let events = app
        .settled_events(
            &app.admin_token,
            "{ events(eventTypes: [\"booking.patientJourney.arrived\", \"booking.patientJourney.inConsultation\"]) { data { eventType identifiers { bookingId } } } }",
            json!({}),
            |events| events.iter().filter(|e| e["identifiers"]["bookingId"] == id.as_str()).count() >= 2,
        )
        .await;
    let kinds: Vec<&str> = events
        .iter()
        .filter(|e| e["identifiers"]["bookingId"] == id.as_str())
        .map(|e| e["eventType"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        kinds,
        [
            "booking.patientJourney.arrived",
            "booking.patientJourney.inConsultation"
        ],
        "{events:?}"
    );

    // Unknown booking; cancelled booking; the cancellation flag.
    let body = app
        .ok(
            &journey,
            json!({ "id": "nope", "j": { "journeyStage": "dna" } }),
        )
        .await;
    assert_eq!(
        body["updateBookingJourney"]["error"],
        "No booking with id nope"
    );
    let cancelled = app
        .ok(
            &format!("mutation($id: ID!) {{ deleteBooking(id: $id, sendCancellationMessages: true) {{ data {{ {RECORD} }} error }} }}"),
            json!({ "id": plain }),
        )
        .await;
    assert_eq!(
        cancelled["deleteBooking"]["data"]["patientMessagesSent"]["cancellation"],
        true
    );
    let body = app
        .ok(set, json!({ "id": plain, "k": "late", "v": "x" }))
        .await;
    assert!(
        body["updateBookingMetadata"]["error"]
            .as_str()
            .expect("refused")
            .contains("cancelled"),
        "{body}"
    );
}

/// The ids of the bookings that `bookings(filters:)` lists, sorted.
async fn filtered(app: &TestApp, filter: Value) -> Vec<String> {
    let data = app
        .ok(
            "query($f: BookingQueryFilters) { bookings(filters: $f, pagination: { pageSize: 100 }) { data { id } } }",
            json!({ "f": filter }),
        )
        .await;
    let mut ids: Vec<String> = data["bookings"]["data"]
        .as_array()
        .expect("list")
        .iter()
        .map(|b| b["id"].as_str().expect("id").to_string())
        .collect();
    ids.sort();
    ids
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_failed_booking_holds_no_slot(#[case] engine: Engine) {
    let c = clinic!(engine);
    let app = &c.app;
    let pending = app
        .ok(
            CREATE,
            json!({ "d": { "patient": c.patient, "doctor": c.doctor, "start": at("11:00"), "end": at("11:30"), "status": "pending" } }),
        )
        .await;
    let pending_id = pending["createBooking"]["data"]["id"]
        .as_str()
        .expect("pending booking")
        .to_string();
    // A pending booking holds its slot.
    let refused = c.book(&c.patient, "11:15", "11:45").await;
    assert!(refused["error"].is_string(), "{refused}");
    // Once failed, it frees it.
    let failed = app
        .ok(
            "mutation($id: ID!) { updateBooking(id: $id, bookingData: { status: failed }) { data { status } error } }",
            json!({ "id": pending_id }),
        )
        .await;
    assert_eq!(
        failed["updateBooking"]["data"]["status"], "failed",
        "{failed}"
    );
    let taken = c.book_ok("11:15", "11:45").await;
    // And cannot come back over the booking that took its place.
    let back = app
        .ok(
            "mutation($id: ID!) { updateBooking(id: $id, bookingData: { status: confirmed }) { data { status } error } }",
            json!({ "id": pending_id }),
        )
        .await;
    assert!(
        back["updateBooking"]["error"]
            .as_str()
            .expect("refused")
            .contains("already booked"),
        "{back}"
    );
    // A failed booking may be made over a taken slot.
    let body = app
        .ok(
            CREATE,
            json!({ "d": { "patient": c.patient, "doctor": c.doctor, "start": at("11:15"), "end": at("11:45"), "status": "failed" } }),
        )
        .await;
    assert!(body["createBooking"]["error"].is_null(), "{body}");
    assert_eq!(
        c.range("11:00", "12:00", "").await.len(),
        3,
        "taken {taken}"
    );
    let bad = app
        .gql(
            Some(&app.admin_token),
            CREATE,
            json!({ "d": { "patient": c.patient, "doctor": c.doctor, "start": at("12:15"), "end": at("12:45"), "videoUrl": "javascript:alert(1)" } }),
        )
        .await;
    assert_eq!(error_code(&bad), "BAD_USER_INPUT", "{bad}");
}

//! Patients and labels: the lifecycle, paging, search and labels.

use serde_json::{Value, json};

use rstest::rstest;

use crate::helpers::{Engine, TestApp, error_code, error_message};
use crate::spawn;

const ALL_FIELDS: &str = "id title status firstName lastName fullName dob gender sex email \
    phones { phoneType phoneNumber } address { address city postcode country } \
    labels { id referenceId text color } archived archiveReason deleted comments createdAt updatedAt";

async fn patient(app: &TestApp, id: &str) -> Value {
    let data = app
        .ok(
            &format!("query($id: ID!) {{ patient(id: $id) {{ {ALL_FIELDS} }} }}"),
            json!({ "id": id }),
        )
        .await;
    data["patient"].clone()
}

async fn list(app: &TestApp, args: &str) -> Value {
    let data = app
        .ok(
            &format!("{{ patients{args} {{ data {{ id firstName lastName }} pageInfo {{ page pageSize hasMore }} }} }}"),
            json!({}),
        )
        .await;
    data["patients"].clone()
}

fn ids(page: &Value) -> Vec<String> {
    page["data"]
        .as_array()
        .expect("data")
        .iter()
        .map(|p| p["id"].as_str().expect("id").to_string())
        .collect()
}

async fn mutate(app: &TestApp, query: &str, vars: Value) -> Value {
    let data = app.ok(query, vars).await;
    data.as_object()
        .expect("data")
        .values()
        .next()
        .expect("field")
        .clone()
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn create_read_update_archive_delete(#[case] engine: Engine) {
    let app = spawn!(engine);
    let vip = app.label("VIP").await;
    let created = mutate(
        &app,
        "mutation($d: CreatePatientDataInput!) { createPatient(patientData: $d) { data { id } error } }",
        json!({ "d": {
            "title": "Mrs", "first": " Jane ", "last": "Doe", "email": "Jane.Doe@Example.com",
            "dob": "1990-04-12", "gender": "woman", "sex": "female", "address": "1 High St",
            "city": "York", "postcode": "YO1 1AA", "country": "UK", "phoneType": "mobile",
            "phoneNumber": "07700 900123", "labels": [vip, vip], "comments": "Prefers mornings"
        }}),
    )
    .await;
    let id = created["data"]["id"].as_str().expect("id").to_string();
    let p = patient(&app, &id).await;
    assert_eq!(p["firstName"], "Jane", "trimmed");
    assert_eq!(p["fullName"], "Jane Doe");
    assert_eq!(p["email"], "jane.doe@example.com");
    assert_eq!(p["dob"], "1990-04-12");
    assert_eq!(p["status"], "active");
    assert_eq!(
        p["phones"],
        json!([{ "phoneType": "mobile", "phoneNumber": "07700 900123" }])
    );
    assert_eq!(
        p["address"],
        json!({ "address": "1 High St", "city": "York", "postcode": "YO1 1AA", "country": "UK" })
    );
    assert_eq!(
        p["labels"].as_array().expect("labels").len(),
        1,
        "repeated label once"
    );
    assert_eq!(p["labels"][0]["referenceId"], json!(vip));
    assert_eq!(p["comments"], "Prefers mornings");
    let created_at = p["createdAt"].as_str().expect("createdAt").to_string();
    assert!(created_at.ends_with('Z'), "{created_at}");

    // Omitted fields stay, null clears, values set.
    let updated = mutate(
        &app,
        "mutation($id: ID!) { updatePatient(id: $id, patientData: { last: \"Smith\", email: null, city: \"Leeds\" }) { data { lastName email city: address { city } title } error } }",
        json!({ "id": id }),
    )
    .await;
    assert_eq!(
        updated["data"],
        json!({ "lastName": "Smith", "email": null, "city": { "city": "Leeds" }, "title": "Mrs" })
    );
    // A name is cleared as any other field, while the patient keeps another.
    let cleared = mutate(
        &app,
        "mutation($id: ID!) { updatePatient(id: $id, patientData: { first: null }) { data { firstName lastName fullName } error } }",
        json!({ "id": id }),
    )
    .await;
    assert_eq!(
        cleared["data"],
        json!({ "firstName": null, "lastName": "Smith", "fullName": "Smith" }),
        "{cleared}"
    );
    // Archive: out of the list unless asked for.
    let archived = mutate(
        &app,
        "mutation($id: ID!) { archivePatient(id: $id, reason: \"Moved away\") { data { archived archiveReason status } error } }",
        json!({ "id": id }),
    )
    .await;
    assert_eq!(
        archived["data"],
        json!({ "archived": true, "archiveReason": "Moved away", "status": "archived" })
    );
    let again = mutate(
        &app,
        "mutation($id: ID!) { archivePatient(id: $id) { data { id } error } }",
        json!({ "id": id }),
    )
    .await;
    assert_eq!(again["error"], "This patient is already archived");
    // An archived patient's labels, as its other lists, change once it is brought back.
    let label = app.label("Archived VIP").await;
    for change in [
        "mutation($id: ID!, $l: ID!) { addPatientLabel(patientId: $id, labelReferenceId: $l) { data { id } error } }",
        "mutation($id: ID!, $l: ID!) { removePatientLabel(patientId: $id, labelId: $l) { data { id } error } }",
        "mutation($id: ID!, $l: ID!) { updatePatient(id: $id, patientData: { labels: [$l] }) { data { id } error } }",
    ] {
        let refused = mutate(&app, change, json!({ "id": id, "l": label })).await;
        assert_eq!(
            refused,
            json!({ "data": null, "error": "This patient is archived: unarchive them before changing their record" }),
            "{change}"
        );
    }
    assert!(ids(&list(&app, "").await).is_empty());
    assert_eq!(
        ids(&list(&app, "(options: { includeArchived: true })").await),
        vec![id.clone()]
    );
    let unarchived = mutate(
        &app,
        "mutation($id: ID!) { unarchivePatient(id: $id) { data { archived status } error } }",
        json!({ "id": id }),
    )
    .await;
    assert_eq!(
        unarchived["data"],
        json!({ "archived": false, "status": "active" })
    );
    assert_eq!(ids(&list(&app, "").await), vec![id.clone()]);

    // Delete: a soft delete; the record stays readable and can no longer change.
    let deleted = mutate(
        &app,
        "mutation($id: ID!) { deletePatient(id: $id) { data { deleted status } error } }",
        json!({ "id": id }),
    )
    .await;
    assert_eq!(
        deleted["data"],
        json!({ "deleted": true, "status": "deleted" })
    );
    assert!(ids(&list(&app, "").await).is_empty());
    assert_eq!(
        ids(&list(&app, "(options: { includeDeleted: true })").await),
        vec![id.clone()]
    );
    assert_eq!(patient(&app, &id).await["deleted"], json!(true));
    for mutation in [
        "mutation($id: ID!) { updatePatient(id: $id, patientData: { first: \"X\" }) { data { id } error } }",
        "mutation($id: ID!) { deletePatient(id: $id) { data { id } error } }",
        "mutation($id: ID!) { archivePatient(id: $id) { data { id } error } }",
    ] {
        let refused = mutate(&app, mutation, json!({ "id": id })).await;
        assert_eq!(
            refused,
            json!({ "data": null, "error": "This patient has been deleted and can no longer be changed" })
        );
    }
    let p = patient(&app, &id).await;
    assert_eq!(p["firstName"], Value::Null, "unchanged after refusals");
    assert_eq!(p["lastName"], "Smith", "unchanged after refusals");
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn paging_to_the_end(#[case] engine: Engine) {
    let app = spawn!(engine);
    let mut made = Vec::new();
    for i in 0..7 {
        made.push(app.patient("Pat", &format!("Page{i}")).await);
    }
    let mut seen = Vec::new();
    for (page, more) in [(1, true), (2, true), (3, false)] {
        let result = list(
            &app,
            &format!("(pagination: {{ page: {page}, pageSize: 3 }})"),
        )
        .await;
        assert_eq!(
            result["pageInfo"],
            json!({ "page": page, "pageSize": 3, "hasMore": more })
        );
        seen.extend(ids(&result));
    }
    assert_eq!(seen, made, "every patient once, by last name");
    let past = list(&app, "(pagination: { page: 4, pageSize: 3 })").await;
    assert_eq!(past["data"], json!([]));
    assert_eq!(past["pageInfo"]["hasMore"], json!(false));
    let default = list(&app, "").await;
    assert_eq!(
        default["pageInfo"],
        json!({ "page": 1, "pageSize": 25, "hasMore": false })
    );

    for (args, says) in [
        (
            "(pagination: { pageSize: 0 })",
            "pageSize must be between 1 and 100, got 0",
        ),
        (
            "(pagination: { pageSize: 101 })",
            "pageSize must be between 1 and 100, got 101",
        ),
        ("(pagination: { page: 0 })", "page must be 1 or more, got 0"),
    ] {
        let body = app
            .gql(
                Some(&app.admin_token),
                &format!("{{ patients{args} {{ data {{ id }} }} }}"),
                json!({}),
            )
            .await;
        assert_eq!(error_code(&body), "BAD_USER_INPUT", "{body}");
        assert_eq!(error_message(&body), says);
    }
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn search_matches_names_email_and_date_of_birth(#[case] engine: Engine) {
    let app = spawn!(engine);
    let jane = app
        .patient_with(
            &app.admin_token,
            json!({ "first": "Jane", "last": "Doe", "email": "jd@example.com", "dob": "1990-04-12" }),
        )
        .await;
    let emile = app
        .patient_with(
            &app.admin_token,
            json!({ "first": "Émile", "last": "Zola_100%" }),
        )
        .await;
    let john = app
        .patient_with(
            &app.admin_token,
            json!({ "first": "John", "last": "Smith", "email": "js@other.org" }),
        )
        .await;
    let search = |text: &str| {
        let text = text.to_string();
        let app = &app;
        async move {
            let data = app
                .ok(
                    "query($s: String) { patients(search: $s) { data { id } } }",
                    json!({ "s": text }),
                )
                .await;
            ids(&data["patients"])
        }
    };
    assert_eq!(search("jane").await, vec![jane.clone()]);
    assert_eq!(search("DOE").await, vec![jane.clone()]);
    assert_eq!(search("jane doe").await, vec![jane.clone()]);
    assert_eq!(search("JD@EXAMPLE").await, vec![jane.clone()]);
    assert_eq!(search("1990-04-12").await, vec![jane.clone()]);
    assert_eq!(search("émile").await, vec![emile.clone()]);
    assert_eq!(search("ÉMILE").await, vec![emile.clone()]);
    assert_eq!(search("100%").await, vec![emile.clone()], "% is literal");
    assert_eq!(search("a_1").await, vec![emile.clone()], "_ is literal");
    assert_eq!(search("other.org").await, vec![john.clone()]);
    assert!(search("nobody").await.is_empty());
    // GLOB's wildcards are literal too (SQLite asks its trigram index with GLOB).
    let star = app
        .patient_with(
            &app.admin_token,
            json!({ "first": "Star*Gaze?", "last": "[Bracket]" }),
        )
        .await;
    assert_eq!(search("r*g").await, vec![star.clone()], "* is literal");
    assert_eq!(
        search("ze? [br").await,
        vec![star.clone()],
        "? and [ are literal"
    );
    assert!(search("r?g").await.is_empty());
    // The index follows a change of name, and a search finds the patient by the new one only.
    app.ok(
        "mutation($id: ID!) { updatePatient(id: $id, patientData: { last: \"Roe\" }) { error } }",
        json!({ "id": jane }),
    )
    .await;
    assert_eq!(search("jane roe").await, vec![jane.clone()]);
    assert!(search("jane doe").await.is_empty());
    app.ok(
        "mutation($id: ID!) { deletePatient(id: $id) { error } }",
        json!({ "id": star }),
    )
    .await;
    assert_eq!(search("  ").await.len(), 3, "a blank search is no search");
    assert!(
        search("r*g").await.is_empty(),
        "deleted patients are left out"
    );
    // Quotes, backslashes, braces and commas are literal too (PostgreSQL cuts a term of five
    // characters or more into pieces to look up, and an array's text gives them meaning).
    let quoted = app
        .patient_with(
            &app.admin_token,
            json!({ "first": "Qu\"ote\\Back", "last": "{Br,ace}" }),
        )
        .await;
    assert_eq!(search("\"ote\\b").await, vec![quoted.clone()]);
    assert_eq!(search("{br,ace}").await, vec![quoted.clone()]);
    assert_eq!(search("back {br,a").await, vec![quoted.clone()]);
    assert_eq!(search("a_100").await, vec![emile.clone()]);
    // Holding every piece of a term is not enough: the term itself must be there.
    let pieces = app
        .patient_with(
            &app.admin_token,
            json!({ "first": "Abcdefghij", "last": "Kay" }),
        )
        .await;
    assert_eq!(search("bcdefghi").await, vec![pieces.clone()]);
    assert!(search("fghijabcde").await.is_empty());
    assert!(search("abcdeabcde").await.is_empty());
    let long = app
        .gql(
            Some(&app.admin_token),
            "query($s: String) { patients(search: $s) { data { id } } }",
            json!({ "s": "x".repeat(101) }),
        )
        .await;
    assert_eq!(error_code(&long), "BAD_USER_INPUT", "{long}");
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn labels_on_patients(#[case] engine: Engine) {
    let app = spawn!(engine);
    let id = app.patient("Jane", "Doe").await;
    let vip = app.label("VIP").await;
    let allergy = app.label("Allergy").await;
    let add = "mutation($p: ID!, $l: ID!) { addPatientLabel(patientId: $p, labelReferenceId: $l) { data { id labels { id referenceId text } } error } }";

    let first = mutate(&app, add, json!({ "p": id, "l": vip })).await;
    assert_eq!(first["error"], Value::Null);
    assert_eq!(first["data"]["id"], json!(id));
    let twice = mutate(&app, add, json!({ "p": id, "l": vip })).await;
    assert_eq!(
        twice,
        json!({ "data": null, "error": "The label \"VIP\" is already on this patient" })
    );
    mutate(&app, add, json!({ "p": id, "l": allergy })).await;
    let labels = patient(&app, &id).await["labels"].clone();
    assert_eq!(labels.as_array().expect("labels").len(), 2, "{labels}");
    assert_eq!(labels[0]["text"], "VIP");
    assert_eq!(labels[1]["text"], "Allergy");

    let unknown = mutate(&app, add, json!({ "p": id, "l": "no-such-label" })).await;
    assert_eq!(
        unknown["error"],
        "No label with id no-such-label: create it with createLabel first"
    );
    let no_patient = mutate(&app, add, json!({ "p": "no-such-patient", "l": vip })).await;
    assert_eq!(no_patient["error"], "No patient with id no-such-patient");

    // Remove by the PatientLabel id; removing again is refused.
    let remove = "mutation($p: ID!, $l: ID!) { removePatientLabel(patientId: $p, labelId: $l) { data { labels { text } } error } }";
    let place = labels[0]["id"].as_str().expect("id").to_string();
    let removed = mutate(&app, remove, json!({ "p": id, "l": place })).await;
    assert_eq!(removed["data"]["labels"], json!([{ "text": "Allergy" }]));
    let again = mutate(&app, remove, json!({ "p": id, "l": place })).await;
    assert_eq!(
        again["error"],
        json!(format!("This patient has no label with id {place}"))
    );

    // Renaming a label shows on the patient; deleting it takes it off.
    let renamed = mutate(
        &app,
        "mutation($l: ID!) { updateLabel(id: $l, title: \"Allergic\") { data { title color } error } }",
        json!({ "l": allergy }),
    )
    .await;
    assert_eq!(
        renamed["data"],
        json!({ "title": "Allergic", "color": "#123456" })
    );
    assert_eq!(patient(&app, &id).await["labels"][0]["text"], "Allergic");
    mutate(
        &app,
        "mutation($l: ID!) { deleteLabel(id: $l) { data { id } error } }",
        json!({ "l": allergy }),
    )
    .await;
    assert_eq!(patient(&app, &id).await["labels"], json!([]));

    // Titles are unique; colours are checked.
    let dup = mutate(
        &app,
        "mutation { createLabel(title: \"VIP\") { data { id } error } }",
        json!({}),
    )
    .await;
    assert_eq!(dup["error"], "A label titled \"VIP\" already exists");
    let bad = app
        .gql(
            Some(&app.admin_token),
            "mutation { createLabel(title: \"X\", color: \"red;\") { error } }",
            json!({}),
        )
        .await;
    assert_eq!(error_code(&bad), "BAD_USER_INPUT", "{bad}");
    let listed = app
        .ok(
            "{ labels { data { title } pageInfo { hasMore } } }",
            json!({}),
        )
        .await;
    assert_eq!(listed["labels"]["data"], json!([{ "title": "VIP" }]));
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn creating_with_an_unknown_label_writes_nothing(#[case] engine: Engine) {
    let app = spawn!(engine);
    let created = mutate(
        &app,
        "mutation { createPatient(patientData: { first: \"A\", last: \"B\", labels: [\"nope\"] }) { data { id } error } }",
        json!({}),
    )
    .await;
    assert_eq!(
        created,
        json!({ "data": null, "error": "No label with id nope: create it with createLabel first" })
    );
    assert!(
        ids(&list(
            &app,
            "(options: { includeDeleted: true, includeArchived: true })"
        )
        .await)
        .is_empty()
    );
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn invalid_patient_data_is_a_clear_error(#[case] engine: Engine) {
    let app = spawn!(engine);
    for (data, says) in [
        (
            json!({ "first": "A", "last": "B", "email": "not-an-email" }),
            "patientData.email must be an email address",
        ),
        (
            json!({ "first": "A", "last": "B", "dob": "2999-01-01" }),
            "patientData.dob must not be in the future",
        ),
        (
            json!({ "first": "A".repeat(201), "last": "B" }),
            "patientData.first must have at most 200 characters",
        ),
    ] {
        let body = app
            .gql(
                Some(&app.admin_token),
                "mutation($d: CreatePatientDataInput!) { createPatient(patientData: $d) { data { id } } }",
                json!({ "d": data }),
            )
            .await;
        assert_eq!(error_code(&body), "BAD_USER_INPUT", "{body}");
        assert!(error_message(&body).starts_with(says), "{body}");
    }
    // A patient known by an email alone keeps it: clearing it would leave a patient that
    // createPatient refuses to make.
    let only_email = mutate(
        &app,
        "mutation { createPatient(patientData: { email: \"only@example.com\" }) { data { id } error } }",
        json!({}),
    )
    .await;
    let only_email = only_email["data"]["id"].as_str().expect("id").to_string();
    let unnamed = mutate(
        &app,
        "mutation($id: ID!) { updatePatient(id: $id, patientData: { email: null }) { data { id } error } }",
        json!({ "id": only_email }),
    )
    .await;
    assert_eq!(
        unnamed,
        json!({ "data": null, "error": "A patient keeps a first name, a last name or an email: this change would leave none" })
    );
    assert_eq!(
        patient(&app, &only_email).await["email"],
        "only@example.com"
    );

    // Neither a day that is none nor one in a year of more or fewer than four digits, which
    // chrono reads but no client reads back.
    for dob in ["1990-13-01", "-5000-01-01", "+1000-01-01", "0000-12-31"] {
        let bad_date = app
            .gql(
                Some(&app.admin_token),
                "mutation($d: CreatePatientDataInput!) { createPatient(patientData: $d) { data { id } } }",
                json!({ "d": { "first": "A", "last": "B", "dob": dob } }),
            )
            .await;
        assert_eq!(error_code(&bad_date), "BAD_USER_INPUT", "{bad_date}");
        assert!(
            error_message(&bad_date).contains("YYYY-MM-DD"),
            "{bad_date}"
        );
    }
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn lists_sort_the_same_on_every_engine(#[case] engine: Engine) {
    let app = spawn!(engine);
    for last in ["zed", "Émile", "alpha", "Zed", "Alpha", "beta"] {
        app.patient("Pat", last).await;
    }
    let page = list(&app, "").await;
    let names: Vec<&str> = page["data"]
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|p| p["lastName"].as_str())
        .collect();
    // Byte order: capitals, then small letters, then accented letters.
    assert_eq!(names, ["Alpha", "Zed", "alpha", "beta", "zed", "Émile"]);
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_deleted_patient_keeps_its_labels(#[case] engine: Engine) {
    let app = spawn!(engine);
    let id = app.patient("Jane", "Doe").await;
    let vip = app.label("VIP").await;
    let add = "mutation($p: ID!, $l: ID!) { addPatientLabel(patientId: $p, labelReferenceId: $l) { data { id } error } }";
    mutate(&app, add, json!({ "p": id, "l": vip })).await;
    mutate(
        &app,
        "mutation($id: ID!) { deletePatient(id: $id) { error } }",
        json!({ "id": id }),
    )
    .await;
    let refused = json!({ "data": null, "error": "This patient has been deleted and can no longer be changed" });
    let remove = "mutation($p: ID!, $l: ID!) { removePatientLabel(patientId: $p, labelId: $l) { data { id } error } }";
    assert_eq!(
        mutate(&app, remove, json!({ "p": id, "l": vip })).await,
        refused
    );
    let other = app.label("Other").await;
    assert_eq!(
        mutate(&app, add, json!({ "p": id, "l": other })).await,
        refused
    );
    assert_eq!(patient(&app, &id).await["labels"][0]["text"], "VIP");
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_patients_labels_come_with_it_as_its_list_shows_them(#[case] engine: Engine) {
    // patient(id) fetches the labels in the patient's own statement when they are asked for
    // (src/store/patients.rs, find_patient_with_labels); the list loads them on their own.
    // Both must say the same, in the same order, whatever the titles hold.
    let app = spawn!(engine);
    let labelled = app.patient("Ada", "Labelled").await;
    let bare = app.patient("Bo", "Bare").await;
    let add = "mutation($p: ID!, $l: ID!) { addPatientLabel(patientId: $p, labelReferenceId: $l) { error } }";
    let titles = ["Zed", "Quote \"q\" \\ back", "Ünïcödé ✓", "Alpha"];
    for title in titles {
        let label = app.label(title).await;
        let added = mutate(&app, add, json!({ "p": labelled, "l": label })).await;
        assert_eq!(added["error"], Value::Null, "{added}");
    }
    let colourless = app
        .ok(
            "mutation { createLabel(title: \"No colour\") { data { id } error } }",
            json!({}),
        )
        .await["createLabel"]["data"]["id"]
        .clone();
    mutate(&app, add, json!({ "p": labelled, "l": colourless })).await;

    let fields = "id referenceId text color";
    let listed = app
        .ok(
            &format!("{{ patients {{ data {{ id labels {{ {fields} }} }} }} }}"),
            json!({}),
        )
        .await;
    let listed_labels = |id: &str| {
        listed["patients"]["data"]
            .as_array()
            .expect("page")
            .iter()
            .find(|p| p["id"] == json!(id))
            .unwrap_or_else(|| panic!("{id} not listed: {listed}"))["labels"]
            .clone()
    };
    let expected = listed_labels(&labelled);
    let texts: Vec<&str> = expected
        .as_array()
        .expect("labels")
        .iter()
        .filter_map(|l| l["text"].as_str())
        .collect();
    assert_eq!(texts, [&titles[..], &["No colour"]].concat(), "{expected}");
    assert_eq!(expected[4]["color"], Value::Null, "{expected}");
    assert_eq!(listed_labels(&bare), json!([]));

    for id in [&labelled, &bare] {
        let asked = app
            .ok(
                &format!(
                    "query($id: ID!) {{ one: patient(id: $id) {{ firstName tags: labels {{ {fields} }} }} \
                     two: patient(id: $id) {{ ... on Patient {{ labels {{ {fields} }} }} }} \
                     three: patient(id: $id) {{ firstName }} }}"
                ),
                json!({ "id": id }),
            )
            .await;
        assert_eq!(asked["one"]["tags"], listed_labels(id), "{asked}");
        assert_eq!(asked["two"]["labels"], listed_labels(id), "{asked}");
        assert!(asked["three"]["firstName"].is_string(), "{asked}");
    }
    let missing = app
        .ok(
            "{ patient(id: \"no-such-patient\") { labels { text } } }",
            json!({}),
        )
        .await;
    assert_eq!(missing["patient"], Value::Null);
}

/// A name, a title, a city or a label's title is one line: a line break or a tab inside it is
/// refused, naming the field, while notes, comments and a street address keep theirs.
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn one_line_fields_refuse_line_breaks_that_notes_and_addresses_keep(#[case] engine: Engine) {
    let app = spawn!(engine);
    let create = "mutation($d: CreatePatientDataInput!) { createPatient(patientData: $d) { \
                  data { id firstName comments address { address city } } error } }";
    for (field, value) in [
        ("first", "Jane\nDoe"),
        ("last", "Do\re"),
        ("city", "Par\tis"),
        ("occupation", "nurse\r\nmidwife"),
    ] {
        let mut data = json!({ "first": "Jane", "last": "Doe" });
        data[field] = json!(value);
        let body = app
            .gql(Some(&app.admin_token), create, json!({ "d": data }))
            .await;
        assert_eq!(error_code(&body), "BAD_USER_INPUT", "{field}: {body}");
        assert_eq!(
            error_message(&body),
            format!("patientData.{field} is one line: it must not contain line breaks or tabs"),
            "{body}"
        );
    }
    // Line breaks at either end are trimmed, as spaces are.
    let made = app
        .ok(
            create,
            json!({ "d": {
                "first": "Jane\n", "last": "Doe",
                "address": "Flat 3\n12 High Street", "city": "Leeds",
                "comments": "Allergic to latex.\n\tSee the letter of May."
            } }),
        )
        .await;
    let patient = &made["createPatient"]["data"];
    assert_eq!(patient["firstName"], "Jane", "{made}");
    assert_eq!(patient["address"]["address"], "Flat 3\n12 High Street");
    assert_eq!(
        patient["comments"],
        "Allergic to latex.\n\tSee the letter of May."
    );
    let id = patient["id"].as_str().expect("an id");

    let body = app
        .gql(
            Some(&app.admin_token),
            "mutation($id: ID!) { updatePatient(id: $id, patientData: { title: \"M\\nr\" }) \
             { data { id } error } }",
            json!({ "id": id }),
        )
        .await;
    assert_eq!(error_code(&body), "BAD_USER_INPUT", "{body}");
    let body = app
        .gql(
            Some(&app.admin_token),
            "mutation { createLabel(title: \"V\\tIP\", color: \"#f59e0b\") { data { id } error } }",
            json!({}),
        )
        .await;
    assert_eq!(error_code(&body), "BAD_USER_INPUT", "{body}");
    // A location's street address takes several lines, its city one.
    let location = "mutation($a: AddressInput) { createLocation(name: \"Room 2\", address: $a) \
                    { data { address { address city } } error } }";
    let body = app
        .gql(
            Some(&app.admin_token),
            location,
            json!({ "a": { "address": "Unit 4\nThe Mill", "city": "Le\nMans" } }),
        )
        .await;
    assert_eq!(
        error_message(&body),
        "address.city is one line: it must not contain line breaks or tabs",
        "{body}"
    );
    let made = app
        .ok(
            location,
            json!({ "a": { "address": "Unit 4\nThe Mill", "city": "Le Mans" } }),
        )
        .await;
    assert_eq!(
        made["createLocation"]["data"]["address"]["address"], "Unit 4\nThe Mill",
        "{made}"
    );
}

/// A variable the request leaves out is absent, not null, as the GraphQL specification says
/// (and as a JavaScript client that drops `undefined` from its JSON sends it): an update
/// that declares `$first` and is sent only `last` leaves the first name; sent `first: null`,
/// it clears it.
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_variable_left_out_leaves_its_field_as_it_is(#[case] engine: Engine) {
    let app = spawn!(engine);
    let id = app.patient("Jane", "Doe").await;
    let update = "mutation($id: ID!, $first: String, $last: String) { updatePatient(id: $id, patientData: { first: $first, last: $last }) { data { firstName lastName } error } }";
    let kept = app.ok(update, json!({ "id": id, "last": "Smith" })).await;
    assert_eq!(
        kept["updatePatient"],
        json!({ "data": { "firstName": "Jane", "lastName": "Smith" }, "error": null })
    );
    let cleared = app.ok(update, json!({ "id": id, "first": null })).await;
    assert_eq!(
        cleared["updatePatient"],
        json!({ "data": { "firstName": null, "lastName": "Smith" }, "error": null })
    );
    // A document is refused for what it is, whatever the request leaves out: an argument
    // the field does not have stays one when its variable is left out (its use taken out,
    // the copy would pass; the document as sent is checked first).
    let misspelt = "mutation($id: ID!, $first: String) { updatePatient(id: $id, patientData: {}, frist: $first) { error } }";
    let body = app
        .gql(Some(&app.admin_token), misspelt, json!({ "id": id }))
        .await;
    assert_eq!(error_code(&body), "GRAPHQL_VALIDATION_FAILED", "{body}");
    // Operations that share a fragment: the one run leaves its variable out, the other's
    // stays used.
    let shared = "mutation Set($id: ID!, $first: String, $last: String) { ...Change } \
                  mutation Other($id: ID!, $first: String, $last: String) { ...Change } \
                  fragment Change on Mutation { updatePatient(id: $id, patientData: { first: $first, last: $last }) { data { firstName lastName } error } }";
    let body = app
        .post_json(
            Some(&app.admin_token),
            &json!({ "query": shared, "operationName": "Set", "variables": { "id": id, "first": "Joan" } }),
        )
        .await
        .body;
    assert_eq!(
        body["data"]["updatePatient"],
        json!({ "data": { "firstName": "Joan", "lastName": "Smith" }, "error": null }),
        "{body}"
    );
}

//! The full record of a patient: its fields written and read back, its sub-resources and their
//! refusals, who archived it, on hold, and access groups hiding a patient from staff outside
//! them.

use serde_json::{Value, json};

use rstest::rstest;

use crate::helpers::{Engine, PASSWORD, TestApp, error_code, error_message};
use crate::spawn;

const RECORD: &str = "id firstName lastName phones { phoneId phoneType phoneNumber } \
    birthSurname birthName birthNames placeOfBirth { name code } socialSecurityNumber \
    googleClientId paymentReference occupation membershipName membershipStartDate \
    membershipStartDateFormatted onHold sharingToken { token } \
    numbers { id name value } customAttributes { id title text response required } \
    communicationPreferences { receiveEmail receiveSMS promotionalMarketing paymentReminders privacyPolicy { response } } \
    relatedAccounts { relationshipId relationshipType relationshipLabel deleted contactDetails { relatedAccountId firstName lastName companyName email phones { phoneType phoneNumber } notes } } \
    accessGroups { id name label } \
    ins { number oid manualIdentification identityAlertStatus identityAlertComment status identityDocument } \
    archived archivedInfo { archivedAt archivedBy { id } archivedReason archivedComments unarchivedAt unarchivedBy { id } unarchivedReason }";

/// A definition of the practice (an access group, a number definition), made with its own
/// mutation (tests/api/catalogue.rs tests them); returns its id.
pub(crate) async fn define(app: &TestApp, table: &str, name: &str) -> String {
    let (mutation, field) = match table {
        "access_groups" => (
            "mutation($n: String!) { createAccessGroup(name: $n, label: $n) { data { id } error } }",
            "createAccessGroup",
        ),
        _ => (
            "mutation($n: String!) { createPracticeNumber(name: $n) { data { id } error } }",
            "createPracticeNumber",
        ),
    };
    let body = app.ok(mutation, json!({ "n": name })).await;
    body[field]["data"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{body}"))
        .to_string()
}

async fn read(app: &TestApp, token: &str, id: &str) -> Value {
    let body = app
        .gql(
            Some(token),
            &format!("query($id: ID!) {{ patient(id: $id) {{ {RECORD} }} }}"),
            json!({ "id": id }),
        )
        .await;
    assert!(body.get("errors").is_none(), "{body}");
    body["data"]["patient"].clone()
}

/// Runs a mutation with the admin token; returns its payload.
pub(crate) async fn change(app: &TestApp, mutation: &str, variables: Value) -> Value {
    let body = app.gql(Some(&app.admin_token), mutation, variables).await;
    assert!(body.get("errors").is_none(), "{body}");
    body["data"]
        .as_object()
        .and_then(|data| data.values().next())
        .cloned()
        .expect("a payload")
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn the_records_fields_are_written_and_read_back(#[case] engine: Engine) {
    let app = spawn!(engine);
    let create = format!(
        "mutation($ins: INSInput, $d: CreatePatientDataInput!) {{ createPatient(insData: $ins, patientData: $d) {{ data {{ {RECORD} }} error }} }}"
    );
    // An INS number with spaces is refused as BAD_USER_INPUT, and nothing is made.
    let body = app
        .gql(
            Some(&app.admin_token),
            &create,
            json!({ "ins": { "number": "1850275123456 78" }, "d": { "first": "A" } }),
        )
        .await;
    assert_eq!(error_code(&body), "BAD_USER_INPUT", "{body}");
    assert!(error_message(&body).contains("insData.number"), "{body}");

    let made = change(
        &app,
        &create,
        json!({
            "ins": { "number": "185027512345678", "oid": "1.2.250.1.213.1.4.8",
                     "manualIdentification": true, "identityAlertStatus": "NONE", "status": "QUALIFIED",
                     "identityDocument": "passport" },
            "d": { "first": "Émile", "last": "Zola", "birthSurname": "Zola", "birthName": "Émile",
                   "birthNames": "Émile Édouard Charles Antoine",
                   "placeOfBirth": { "name": "Paris", "code": "75056" },
                   "socialSecurityNumber": "1 85 02 75 123 456", "paymentReference": "PAY-1",
                   "googleClientId": "g-1", "occupation": "Writer",
                   "phoneType": "mobile", "phoneNumber": "+33 6 12 34 56 78",
                   "communicationPreferences": { "receiveEmail": true, "receiveSMS": false,
                       "promotionalMarketing": false, "paymentReminders": true, "privacyPolicy": "accepted" },
                   "customAttributes": [{ "title": "Allergies", "text": "Any allergies?", "response": "None" }] }
        }),
    )
    .await;
    assert!(made["error"].is_null(), "{made}");
    let id = made["data"]["id"].as_str().expect("id").to_string();
    let p = read(&app, &app.admin_token, &id).await;
    assert_eq!(p["birthNames"], "Émile Édouard Charles Antoine");
    assert_eq!(
        p["placeOfBirth"],
        json!({ "name": "Paris", "code": "75056" })
    );
    assert_eq!(p["socialSecurityNumber"], "1 85 02 75 123 456");
    assert_eq!(p["occupation"], "Writer");
    assert_eq!(p["onHold"], false);
    assert_eq!(p["sharingToken"], Value::Null);
    assert_eq!(p["phones"].as_array().expect("phones").len(), 1);
    assert_eq!(p["phones"][0]["phoneNumber"], "+33 6 12 34 56 78");
    assert!(p["phones"][0]["phoneId"].is_string());
    assert_eq!(
        p["communicationPreferences"],
        json!({ "receiveEmail": true, "receiveSMS": false, "promotionalMarketing": false,
                "paymentReminders": true, "privacyPolicy": { "response": "accepted" } })
    );
    assert_eq!(p["customAttributes"][0]["title"], "Allergies");
    assert_eq!(p["customAttributes"][0]["response"], "None");
    assert_eq!(
        p["ins"],
        json!({ "number": "185027512345678", "oid": "1.2.250.1.213.1.4.8", "manualIdentification": true,
                "identityAlertStatus": "NONE", "identityAlertComment": null, "status": "QUALIFIED",
                "identityDocument": "passport" })
    );

    // The INS, the communication preferences and the place of birth change in part: what an
    // update gives replaces what was kept, the rest stays.
    let update = "mutation($id: ID!, $d: UpdatePatientDataInput!) { updatePatient(id: $id, patientData: $d) { error } }";
    let done = change(
        &app,
        update,
        json!({ "id": id, "d": { "ins": { "status": "VALIDATED" },
                                 "communicationPreferences": { "receiveSMS": true },
                                 "placeOfBirth": { "code": "75101" } } }),
    )
    .await;
    assert!(done["error"].is_null(), "{done}");
    let p = read(&app, &app.admin_token, &id).await;
    assert_eq!(
        p["ins"],
        json!({ "number": "185027512345678", "oid": "1.2.250.1.213.1.4.8", "manualIdentification": true,
                "identityAlertStatus": "NONE", "identityAlertComment": null, "status": "VALIDATED",
                "identityDocument": "passport" })
    );
    assert_eq!(
        p["communicationPreferences"],
        json!({ "receiveEmail": true, "receiveSMS": true, "promotionalMarketing": false,
                "paymentReminders": true, "privacyPolicy": { "response": "accepted" } })
    );
    assert_eq!(
        p["placeOfBirth"],
        json!({ "name": "Paris", "code": "75101" })
    );
    // A part given as null, or blank, is cleared; the rest still stays.
    let done = change(
        &app,
        update,
        json!({ "id": id, "d": { "ins": { "identityDocument": null },
                                 "communicationPreferences": { "privacyPolicy": null },
                                 "placeOfBirth": { "name": " " } } }),
    )
    .await;
    assert!(done["error"].is_null(), "{done}");
    let p = read(&app, &app.admin_token, &id).await;
    assert_eq!(p["ins"]["identityDocument"], Value::Null, "{p}");
    assert_eq!(p["ins"]["status"], "VALIDATED", "{p}");
    assert_eq!(p["ins"]["number"], "185027512345678", "{p}");
    assert_eq!(
        p["communicationPreferences"],
        json!({ "receiveEmail": true, "receiveSMS": true, "promotionalMarketing": false,
                "paymentReminders": true, "privacyPolicy": null })
    );
    assert_eq!(p["placeOfBirth"], json!({ "name": null, "code": "75101" }));

    // An update changes what it names, clears what is null.
    let done = change(
        &app,
        update,
        json!({ "id": id, "d": { "occupation": "Novelist", "placeOfBirth": null, "ins": null,
                                 "onHold": true, "socialSecurityNumber": "ab 12-34-56 c" } }),
    )
    .await;
    assert!(done["error"].is_null(), "{done}");
    let p = read(&app, &app.admin_token, &id).await;
    assert_eq!(p["occupation"], "Novelist");
    assert_eq!(p["placeOfBirth"], Value::Null);
    assert_eq!(p["ins"], Value::Null);
    assert_eq!(p["onHold"], true);
    assert_eq!(p["socialSecurityNumber"], "AB 12-34-56 C");
    assert_eq!(p["birthSurname"], "Zola", "kept");
    for (data, says) in [
        (
            json!({ "socialSecurityNumber": "12" }),
            "socialSecurityNumber",
        ),
        (
            json!({ "socialSecurityNumber": "12345;DROP" }),
            "socialSecurityNumber",
        ),
        // Spaces and hyphens go between letters and digits, one at a time.
        (
            json!({ "socialSecurityNumber": "-12345" }),
            "socialSecurityNumber",
        ),
        (
            json!({ "socialSecurityNumber": "12345-" }),
            "socialSecurityNumber",
        ),
        (
            json!({ "socialSecurityNumber": "12--345" }),
            "socialSecurityNumber",
        ),
        (
            json!({ "ins": { "oid": "not an oid" } }),
            "patientData.ins.oid",
        ),
        (json!({ "occupation": "x".repeat(201) }), "occupation"),
    ] {
        let body = app
            .gql(
                Some(&app.admin_token),
                update,
                json!({ "id": id, "d": data }),
            )
            .await;
        assert_eq!(error_code(&body), "BAD_USER_INPUT", "{body}");
        assert!(error_message(&body).contains(says), "{says}: {body}");
    }

    // First and last are optional, but a patient needs a name or an email.
    let body = app
        .gql(
            Some(&app.admin_token),
            "mutation { createPatient(patientData: { email: \"only@example.com\" }) { data { id firstName } error } }",
            json!({}),
        )
        .await;
    assert!(
        body["data"]["createPatient"]["data"]["id"].is_string(),
        "{body}"
    );
    let body = app
        .gql(
            Some(&app.admin_token),
            "mutation { createPatient(patientData: { occupation: \"Nobody\" }) { data { id } } }",
            json!({}),
        )
        .await;
    assert_eq!(error_code(&body), "BAD_USER_INPUT", "{body}");
    // A blank name, as forms send an untouched field, is no name: the other one is the
    // patient's full name, and the missing one is null.
    let names = "firstName lastName fullName";
    let create = format!(
        "mutation($d: CreatePatientDataInput!) {{ createPatient(patientData: $d) {{ data {{ id {names} }} error }} }}"
    );
    let made = change(
        &app,
        &create,
        json!({ "d": { "first": "", "last": "Doe" } }),
    )
    .await;
    assert_eq!(
        (
            &made["data"]["firstName"],
            &made["data"]["lastName"],
            &made["data"]["fullName"]
        ),
        (&Value::Null, &json!("Doe"), &json!("Doe")),
        "{made}"
    );
    let doe = made["data"]["id"].as_str().expect("id").to_string();
    let only_first = change(
        &app,
        &create,
        json!({ "d": { "first": "Jane", "last": "  " } }),
    )
    .await;
    assert_eq!(only_first["data"]["fullName"], "Jane", "{only_first}");
    let body = app
        .gql(
            Some(&app.admin_token),
            &create,
            json!({ "d": { "first": "", "last": "" } }),
        )
        .await;
    assert_eq!(error_code(&body), "BAD_USER_INPUT", "{body}");
    // An update clears a name with null or blank, as long as the patient keeps a name or an
    // email; the last one is refused in `error`.
    let done = change(
        &app,
        update,
        json!({ "id": doe, "d": { "first": "John", "last": null } }),
    )
    .await;
    assert!(done["error"].is_null(), "{done}");
    let p = read(&app, &app.admin_token, &doe).await;
    assert_eq!(
        (&p["firstName"], &p["lastName"]),
        (&json!("John"), &Value::Null)
    );
    let refused = change(&app, update, json!({ "id": doe, "d": { "first": "" } })).await;
    assert_eq!(
        refused["error"],
        "A patient keeps a first name, a last name or an email: this change would leave none",
        "{refused}"
    );
    assert_eq!(
        read(&app, &app.admin_token, &doe).await["firstName"],
        "John"
    );

    // A default page of patients with the whole record fits a query's cost. Per patient,
    // 204: its lists at a fifth of their bounds (phones 1 + 2 × 3, numbers 1 + 10 × 3,
    // customAttributes 1 + 10 × 5, relatedAccounts 1 + 4 × 14, accessGroups 1 + 4 × 3: 159),
    // and the rest of the record (45). Counted whole, the lists made it 820, and the page
    // 20,526. A page of 100 of them is still refused.
    let page = app
        .gql(
            Some(&app.admin_token),
            &format!("{{ patients {{ data {{ {RECORD} }} }} }}"),
            json!({}),
        )
        .await;
    assert!(page.get("errors").is_none(), "{page}");
    assert_eq!(page["extensions"]["cost"]["requested"], 1 + 25 * (1 + 204));
    assert_eq!(page["extensions"]["cost"]["requested"], 5_126);
    let hundred = app
        .gql(
            Some(&app.admin_token),
            &format!("{{ patients(pagination: {{ pageSize: 100 }}) {{ data {{ {RECORD} }} }} }}"),
            json!({}),
        )
        .await;
    assert_eq!(error_code(&hundred), "QUERY_TOO_COMPLEX", "{hundred}");
    assert!(
        page["data"]["patients"]["data"]
            .as_array()
            .is_some_and(|p| p.len() >= 4),
        "{page}"
    );
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn phones_numbers_attributes_relationships_and_membership(#[case] engine: Engine) {
    let app = spawn!(engine);
    let id = app.patient("Jane", "Doe").await;
    let other = app.patient("John", "Doe").await;
    let nhs = define(&app, "practice_numbers", "NHS number").await;

    // Phones: the first is the patient's phoneNumber too.
    let add_phone = "mutation($p: ID!, $d: AddPhoneData!) { addPatientPhoneNumber(patientId: $p, phoneData: $d) { data { phones { phoneId phoneType phoneNumber } } error } }";
    let done = change(
        &app,
        add_phone,
        json!({ "p": id, "d": { "phoneNumber": "0100", "phoneType": "home" } }),
    )
    .await;
    let first = done["data"]["phones"][0]["phoneId"]
        .as_str()
        .expect("id")
        .to_string();
    let done = change(
        &app,
        add_phone,
        json!({ "p": id, "d": { "phoneNumber": "0200", "phoneType": "work" } }),
    )
    .await;
    assert_eq!(done["data"]["phones"].as_array().expect("phones").len(), 2);
    let update_phone = "mutation($p: ID!, $ph: ID!, $d: UpdatePhoneData!) { updatePatientPhoneNumber(patientId: $p, phoneId: $ph, phoneData: $d) { data { phones { phoneNumber } } error } }";
    let done = change(
        &app,
        update_phone,
        json!({ "p": id, "ph": first, "d": { "phoneNumber": "0111" } }),
    )
    .await;
    assert_eq!(done["data"]["phones"][0]["phoneNumber"], "0111");
    let done = change(
        &app,
        update_phone,
        json!({ "p": id, "ph": "nope", "d": { "phoneNumber": "1" } }),
    )
    .await;
    assert_eq!(done["error"], "No phone with id nope");
    let remove_phone = "mutation($p: ID!, $ph: ID!) { removePatientPhoneNumber(patientId: $p, phoneId: $ph) { data { phones { phoneNumber } } error } }";
    let done = change(&app, remove_phone, json!({ "p": id, "ph": first })).await;
    assert_eq!(done["data"]["phones"], json!([{ "phoneNumber": "0200" }]));
    for n in 0..9 {
        change(
            &app,
            add_phone,
            json!({ "p": id, "d": { "phoneNumber": format!("9{n}"), "phoneType": "x" } }),
        )
        .await;
    }
    let done = change(
        &app,
        add_phone,
        json!({ "p": id, "d": { "phoneNumber": "99", "phoneType": "x" } }),
    )
    .await;
    assert_eq!(done["error"], "A patient has at most 10 phones");
    let done = change(
        &app,
        add_phone,
        json!({ "p": "nobody", "d": { "phoneNumber": "1", "phoneType": "x" } }),
    )
    .await;
    assert_eq!(done["error"], "No patient with id nobody");
    let body = app
        .gql(
            Some(&app.admin_token),
            add_phone,
            json!({ "p": id, "d": { "phoneNumber": " ", "phoneType": "x" } }),
        )
        .await;
    assert_eq!(error_code(&body), "BAD_USER_INPUT", "{body}");

    // Numbers, against the practice's definitions.
    let add_number = "mutation($p: ID!, $d: AddPatientNumberData!) { addPatientNumber(patientId: $p, numberData: $d) { data { numbers { id name value } } error } }";
    let done = change(
        &app,
        add_number,
        json!({ "p": id, "d": { "numberId": nhs, "value": "943 476 5919" } }),
    )
    .await;
    assert_eq!(
        done["data"]["numbers"],
        json!([{ "id": nhs, "name": "NHS number", "value": "943 476 5919" }])
    );
    let done = change(
        &app,
        add_number,
        json!({ "p": id, "d": { "numberId": nhs, "value": "1" } }),
    )
    .await;
    assert!(
        done["error"]
            .as_str()
            .expect("refused")
            .contains("updatePatientNumber"),
        "{done}"
    );
    let done = change(
        &app,
        add_number,
        json!({ "p": id, "d": { "numberId": "no-such", "value": "1" } }),
    )
    .await;
    assert_eq!(done["error"], "No number definition with id no-such");
    let done = change(
        &app,
        "mutation($p: ID!, $n: ID!) { updatePatientNumber(patientId: $p, numberId: $n, value: \"111\") { data { numbers { value } } error } }",
        json!({ "p": id, "n": nhs }),
    )
    .await;
    assert_eq!(done["data"]["numbers"], json!([{ "value": "111" }]));
    // A value keeps the contract's limit on an entry's (500 characters): past it, refused in
    // `error`, and the value kept; a value of lines is a mistake in the input.
    let set_number = "mutation($p: ID!, $n: ID!, $v: String!) { updatePatientNumber(patientId: $p, numberId: $n, value: $v) { data { numbers { value } } error } }";
    let long = "9".repeat(500);
    let done = change(&app, set_number, json!({ "p": id, "n": nhs, "v": long })).await;
    assert_eq!(
        done["data"]["numbers"],
        json!([{ "value": long }]),
        "{done}"
    );
    let done = change(
        &app,
        set_number,
        json!({ "p": id, "n": nhs, "v": "9".repeat(501) }),
    )
    .await;
    assert_eq!(
        done,
        json!({ "data": null, "error": "A number's value has at most 500 characters; this one has 501" })
    );
    let body = app
        .gql(
            Some(&app.admin_token),
            set_number,
            json!({ "p": id, "n": nhs, "v": "1\n2" }),
        )
        .await;
    assert_eq!(error_code(&body), "BAD_USER_INPUT", "{body}");
    let remove_number = "mutation($p: ID!, $n: ID!) { removePatientNumber(patientId: $p, numberId: $n) { data { numbers { value } } error } }";
    let done = change(&app, remove_number, json!({ "p": id, "n": nhs })).await;
    assert_eq!(done["data"]["numbers"], json!([]));
    let done = change(&app, remove_number, json!({ "p": id, "n": nhs })).await;
    assert!(done["error"].is_string(), "{done}");

    // Custom attributes.
    let add_attr = "mutation($p: ID!, $d: AddCustomAttributeData!) { addPatientAttribute(patientId: $p, attributeData: $d) { data { customAttributes { id title response } } error } }";
    let done = change(
        &app,
        add_attr,
        json!({ "p": id, "d": { "title": "Diet", "text": "Any diet?", "response": "Vegan" } }),
    )
    .await;
    let attr = done["data"]["customAttributes"][0]["id"]
        .as_str()
        .expect("id")
        .to_string();
    let done = change(
        &app,
        "mutation($p: ID!, $a: ID!) { updatePatientAttribute(patientId: $p, attributeId: $a, attributeData: { response: \"None\" }) { data { customAttributes { title response } } error } }",
        json!({ "p": id, "a": attr }),
    )
    .await;
    assert_eq!(
        done["data"]["customAttributes"],
        json!([{ "title": "Diet", "response": "None" }])
    );
    for n in 1..50 {
        change(
            &app,
            add_attr,
            json!({ "p": id, "d": { "title": format!("Q{n}"), "text": "?", "response": "" } }),
        )
        .await;
    }
    let done = change(
        &app,
        add_attr,
        json!({ "p": id, "d": { "title": "Q51", "text": "?", "response": "" } }),
    )
    .await;
    assert_eq!(done["error"], "A patient has at most 50 custom attributes");
    // A new patient given more than 50 at once is refused the same way, and not made; given
    // 50, made with them.
    let attributes = |n: usize| -> Vec<Value> {
        (0..n)
            .map(|i| json!({ "title": format!("Q{i}"), "text": "?", "response": "" }))
            .collect()
    };
    let create = "mutation($d: CreatePatientDataInput!) { createPatient(patientData: $d) { data { id customAttributes { id } } error } }";
    let done = change(
        &app,
        create,
        json!({ "d": { "first": "Many", "last": "Answers", "customAttributes": attributes(51) } }),
    )
    .await;
    assert_eq!(
        done["error"],
        "A patient has at most 50 custom attributes; this change gives 51"
    );
    assert!(done["data"].is_null(), "{done}");
    let found = app
        .ok(
            "{ patients(search: \"Answers\") { data { id } } }",
            json!({}),
        )
        .await;
    assert_eq!(found["patients"]["data"], json!([]), "not made");
    let done = change(
        &app,
        create,
        json!({ "d": { "first": "Many", "last": "Answers", "customAttributes": attributes(50) } }),
    )
    .await;
    assert_eq!(
        done["data"]["customAttributes"].as_array().map(Vec::len),
        Some(50),
        "{done}"
    );
    let done = change(
        &app,
        "mutation($p: ID!, $a: ID!) { removePatientAttribute(patientId: $p, attributeId: $a) { data { customAttributes { id } } error } }",
        json!({ "p": id, "a": attr }),
    )
    .await;
    assert_eq!(
        done["data"]["customAttributes"]
            .as_array()
            .expect("list")
            .len(),
        49
    );

    // Relationships: another patient, or a free contact with a name.
    let add_rel = "mutation($p: ID!, $t: PatientRelationshipType!, $l: String, $c: PatientRelationshipContactInput!) { addPatientRelationship(patientId: $p, relationshipType: $t, relationshipLabel: $l, contactDetails: $c) { data { relatedAccounts { relationshipId relationshipType relationshipLabel deleted contactDetails { relatedAccountId firstName phones { phoneNumber } } } } error } }";
    let done = change(&app, add_rel, json!({ "p": id, "t": "SPOUSE_PARTNER", "l": "Husband", "c": { "relatedAccountId": other } })).await;
    assert_eq!(
        done["data"]["relatedAccounts"][0]["relationshipType"],
        "SPOUSE_PARTNER"
    );
    assert_eq!(
        done["data"]["relatedAccounts"][0]["contactDetails"]["relatedAccountId"],
        other.as_str()
    );
    let done = change(
        &app,
        add_rel,
        json!({ "p": id, "t": "GP", "c": { "firstName": "Gregory", "phoneNumber": "0300" } }),
    )
    .await;
    let gp = done["data"]["relatedAccounts"][1]["relationshipId"]
        .as_str()
        .expect("id")
        .to_string();
    assert_eq!(
        done["data"]["relatedAccounts"][1]["contactDetails"]["phones"],
        json!([{ "phoneNumber": "0300" }])
    );
    let done = change(
        &app,
        add_rel,
        json!({ "p": id, "t": "FAMILY", "c": { "relatedAccountId": "nobody" } }),
    )
    .await;
    assert_eq!(done["error"], "No patient with id nobody");
    let done = change(
        &app,
        add_rel,
        json!({ "p": id, "t": "FAMILY", "c": { "relatedAccountId": id } }),
    )
    .await;
    assert_eq!(done["error"], "A patient cannot be related to themselves");
    let body = app
        .gql(
            Some(&app.admin_token),
            add_rel,
            json!({ "p": id, "t": "FAMILY", "c": { "notes": "no name" } }),
        )
        .await;
    assert_eq!(error_code(&body), "BAD_USER_INPUT", "{body}");
    let body = app
        .gql(
            Some(&app.admin_token),
            add_rel,
            json!({ "p": id, "t": "COUSIN", "c": { "firstName": "A" } }),
        )
        .await;
    assert_eq!(error_code(&body), "GRAPHQL_VALIDATION_FAILED", "{body}");
    // The contact's id in another system is a line, as long as any other.
    let body = app
        .gql(
            Some(&app.admin_token),
            add_rel,
            json!({ "p": id, "t": "GP", "c": { "firstName": "A", "sourceId": "x".repeat(201) } }),
        )
        .await;
    assert_eq!(error_code(&body), "BAD_USER_INPUT", "{body}");
    assert!(
        error_message(&body).contains("contactDetails.sourceId"),
        "{body}"
    );
    let done = change(
        &app,
        "mutation($p: ID!, $r: ID!) { updatePatientRelationship(patientId: $p, relationshipId: $r, relationshipType: PRACTITIONER, contactDetails: { lastName: \"House\" }) { data { relatedAccounts { relationshipType contactDetails { firstName } } } error } }",
        json!({ "p": id, "r": gp }),
    )
    .await;
    assert_eq!(
        done["data"]["relatedAccounts"][1]["relationshipType"],
        "PRACTITIONER"
    );
    assert_eq!(
        done["data"]["relatedAccounts"][1]["contactDetails"]["firstName"], "Gregory",
        "kept"
    );
    // A field given null or blank is cleared; the contact keeps a name.
    let update_contact = "mutation($p: ID!, $r: ID!, $c: PatientRelationshipContactInput) { updatePatientRelationship(patientId: $p, relationshipId: $r, contactDetails: $c) { data { relatedAccounts { contactDetails { firstName lastName city phones { phoneNumber } } } } error } }";
    let done = change(
        &app,
        update_contact,
        json!({ "p": id, "r": gp, "c": { "firstName": null, "phoneNumber": "  ", "city": "Paris" } }),
    )
    .await;
    assert_eq!(
        done["data"]["relatedAccounts"][1]["contactDetails"],
        json!({ "firstName": null, "lastName": "House", "city": "Paris", "phones": [] }),
        "{done}"
    );
    let done = change(
        &app,
        update_contact,
        json!({ "p": id, "r": gp, "c": { "lastName": "" } }),
    )
    .await;
    assert_eq!(
        done,
        json!({ "data": null, "error": "A relationship's contact needs a related patient, or a first name, last name or company name: it would be left with none" })
    );
    let done = change(
        &app,
        "mutation($p: ID!, $r: ID!) { removePatientRelationship(patientId: $p, relationshipId: $r) { data { relatedAccounts { relationshipId } } error } }",
        json!({ "p": id, "r": gp }),
    )
    .await;
    assert_eq!(
        done["data"]["relatedAccounts"]
            .as_array()
            .expect("list")
            .len(),
        1
    );

    // Membership.
    let done = change(
        &app,
        "mutation($p: ID!) { addPatientMembership(patientId: $p, name: \"Gold\", startDate: \"2026-01-01\") { data { membershipName membershipStartDate membershipStartDateFormatted } error } }",
        json!({ "p": id }),
    )
    .await;
    assert_eq!(
        done["data"],
        json!({ "membershipName": "Gold", "membershipStartDate": "2026-01-01", "membershipStartDateFormatted": "2026-01-01" })
    );
    let remove = "mutation($p: ID!) { removePatientMembership(patientId: $p) { data { membershipName } error } }";
    let done = change(&app, remove, json!({ "p": id })).await;
    assert_eq!(done["data"]["membershipName"], Value::Null);
    let done = change(&app, remove, json!({ "p": id })).await;
    assert_eq!(done["error"], "The patient has no membership");

    // Each change is an event (on PostgreSQL the feed shows a commit once no earlier one can
    // still land before it: a moment later).
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let events = app
            .ok(
                "{ events(limit: 500, eventTypes: [\"patient.phone.added\", \"patient.number.updated\", \"patient.customAttribute.removed\", \"patient.relationship.added\", \"patient.membership.updated\"]) { data { eventType } } }",
                json!({}),
            )
            .await;
        let kinds: std::collections::BTreeSet<String> = events["events"]["data"]
            .as_array()
            .expect("events")
            .iter()
            .map(|e| e["eventType"].as_str().unwrap_or("").to_string())
            .collect();
        if kinds.len() == 5 {
            break;
        }
        assert!(std::time::Instant::now() < until, "{kinds:?}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }

    // An archived patient's lists do not change; a deleted patient's neither.
    change(
        &app,
        "mutation($id: ID!) { archivePatient(id: $id) { error } }",
        json!({ "id": other }),
    )
    .await;
    let done = change(
        &app,
        add_phone,
        json!({ "p": other, "d": { "phoneNumber": "1", "phoneType": "x" } }),
    )
    .await;
    assert_eq!(
        done["error"],
        "This patient is archived: unarchive them before changing their record"
    );
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn archiving_records_who_and_why_and_on_hold_stops_bookings(#[case] engine: Engine) {
    let app = spawn!(engine);
    let email = app.user("practitioner", "doc@example.com").await;
    let session = app.sign_in(&email, PASSWORD).await;
    let me = app
        .gql(Some(&session), "{ currentUser { id } }", json!({}))
        .await["data"]["currentUser"]["id"]
        .as_str()
        .expect("id")
        .to_string();
    let id = app.patient("Jane", "Doe").await;
    let body = app
        .gql(
            Some(&session),
            "mutation($id: ID!) { archivePatient(id: $id, archiveReason: DECEASED_PATIENT, comments: \"RIP\") { data { archiveReason archivedInfo { archivedAt archivedBy { id } archivedReason archivedComments } } error } }",
            json!({ "id": id }),
        )
        .await;
    let data = &body["data"]["archivePatient"]["data"];
    assert_eq!(data["archiveReason"], "DECEASED_PATIENT", "{body}");
    assert_eq!(data["archivedInfo"]["archivedBy"]["id"], me.as_str());
    assert_eq!(data["archivedInfo"]["archivedReason"], "DECEASED_PATIENT");
    assert_eq!(data["archivedInfo"]["archivedComments"], "RIP");
    let archived_at = data["archivedInfo"]["archivedAt"].clone();
    assert!(archived_at.is_string(), "{body}");
    let body = app
        .gql(
            Some(&session),
            "mutation($id: ID!) { unarchivePatient(id: $id, unarchiveReason: AUDIT_AND_ADMINISTRATIVE_REASONS) { data { archived archiveReason archivedInfo { archivedAt archivedReason unarchivedAt unarchivedBy { id } unarchivedReason } } error } }",
            json!({ "id": id }),
        )
        .await;
    let data = &body["data"]["unarchivePatient"]["data"];
    assert_eq!(data["archived"], false, "{body}");
    assert_eq!(data["archiveReason"], Value::Null);
    assert_eq!(data["archivedInfo"]["archivedReason"], "DECEASED_PATIENT");
    // The archive's time stays beside its reason, once the patient is back.
    assert_eq!(data["archivedInfo"]["archivedAt"], archived_at, "{body}");
    let unarchived_at = data["archivedInfo"]["unarchivedAt"].clone();
    assert!(unarchived_at.is_string(), "{body}");
    assert_eq!(data["archivedInfo"]["unarchivedBy"]["id"], me.as_str());
    assert_eq!(
        data["archivedInfo"]["unarchivedReason"],
        "AUDIT_AND_ADMINISTRATIVE_REASONS"
    );
    // Who archived and brought back is a staff user: read with `users:read` alone, as a
    // booking's doctor is; without it, null with FORBIDDEN, and the rest still comes.
    let who = "query($id: ID!) { patient(id: $id) { archivedInfo { archivedReason archivedBy { email } unarchivedBy { email } } } }";
    let reader = app.token(&["patients:read"]).await;
    let body = app.gql(Some(&reader), who, json!({ "id": id })).await;
    let info = &body["data"]["patient"]["archivedInfo"];
    assert_eq!(info["archivedReason"], "DECEASED_PATIENT", "{body}");
    assert_eq!(info["archivedBy"], Value::Null, "{body}");
    assert_eq!(info["unarchivedBy"], Value::Null, "{body}");
    let errors = body["errors"].as_array().expect("errors");
    assert_eq!(errors.len(), 2, "{body}");
    for error in errors {
        assert_eq!(error["extensions"]["code"], "FORBIDDEN", "{body}");
    }
    let staff_reader = app.token(&["patients:read", "users:read"]).await;
    let body = app.gql(Some(&staff_reader), who, json!({ "id": id })).await;
    assert!(body.get("errors").is_none(), "{body}");
    assert!(
        body["data"]["patient"]["archivedInfo"]["unarchivedBy"]["email"].is_string(),
        "{body}"
    );
    // A free-text reason reads as OTHER among the reasons.
    let body = app
        .ok(
            "mutation($id: ID!) { archivePatient(id: $id, reason: \"Moved to Spain\") { data { archiveReason archivedInfo { archivedReason archivedBy { id } } } } }",
            json!({ "id": id }),
        )
        .await;
    let data = &body["archivePatient"]["data"];
    assert_eq!(data["archiveReason"], "Moved to Spain");
    // Archived again: the new archive's time, after the last time it was brought back.
    let again = app
        .ok(
            "query($id: ID!) { patient(id: $id) { archivedInfo { archivedAt unarchivedAt } } }",
            json!({ "id": id }),
        )
        .await;
    let info = &again["patient"]["archivedInfo"];
    assert_eq!(info["unarchivedAt"], unarchived_at, "{again}");
    let (now, then) = (info["archivedAt"].as_str(), archived_at.as_str());
    assert!(
        now.zip(then).is_some_and(|(now, then)| now > then),
        "{again}"
    );
    assert_eq!(data["archivedInfo"]["archivedReason"], "OTHER");
    assert_eq!(
        data["archivedInfo"]["archivedBy"],
        Value::Null,
        "an API token is no user"
    );

    // On hold: no booking.
    let held = app.patient("Held", "Back").await;
    let doctor = app.doctor("Grace", "Hopper").await;
    change(
        &app,
        "mutation($id: ID!) { updatePatient(id: $id, patientData: { onHold: true }) { error } }",
        json!({ "id": held }),
    )
    .await;
    let book = "mutation($p: ID!, $d: ID!) { createBooking(bookingData: { patient: $p, doctor: $d, start: \"2031-01-01T09:00:00Z\", end: \"2031-01-01T09:30:00Z\" }) { data { id } error } }";
    let done = change(&app, book, json!({ "p": held, "d": doctor })).await;
    assert_eq!(
        done["error"],
        "The patient is on hold: take them off hold (onHold: false) before booking"
    );
    change(
        &app,
        "mutation($id: ID!) { updatePatient(id: $id, patientData: { onHold: false }) { error } }",
        json!({ "id": held }),
    )
    .await;
    let done = change(&app, book, json!({ "p": held, "d": doctor })).await;
    assert!(done["data"]["id"].is_string(), "{done}");
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn access_groups_hide_a_patient_from_staff_outside_them(#[case] engine: Engine) {
    let app = spawn!(engine);
    let oncology = define(&app, "access_groups", "oncology").await;
    let psychiatry = define(&app, "access_groups", "psychiatry").await;
    let doctor = app.doctor("Grace", "Hopper").await;
    let open = app.patient("Open", "Record").await;
    let secret = app.patient("Secret", "Record").await;
    let done = change(
        &app,
        "mutation($p: ID!, $g: ID!) { addPatientAccessGroup(patientId: $p, accessGroupId: $g) { data { accessGroups { id name label } } error } }",
        json!({ "p": secret, "g": psychiatry }),
    )
    .await;
    assert_eq!(
        done["data"]["accessGroups"],
        json!([{ "id": psychiatry, "name": "psychiatry", "label": "psychiatry" }])
    );
    let done = change(
        &app,
        "mutation($p: ID!, $g: ID!) { addPatientAccessGroup(patientId: $p, accessGroupId: $g) { error } }",
        json!({ "p": secret, "g": psychiatry }),
    )
    .await;
    assert_eq!(done["error"], "The patient is in this access group already");
    let done = change(
        &app,
        "mutation($p: ID!, $g: ID!) { addPatientAccessGroup(patientId: $p, accessGroupId: $g) { error } }",
        json!({ "p": secret, "g": "no-such-group" }),
    )
    .await;
    assert_eq!(done["error"], "No access group with id no-such-group");
    let booking = change(
        &app,
        "mutation($p: ID!, $d: ID!) { createBooking(bookingData: { patient: $p, doctor: $d, start: \"2031-01-01T09:00:00Z\", end: \"2031-01-01T09:30:00Z\" }) { data { id } error } }",
        json!({ "p": secret, "d": doctor }),
    )
    .await["data"]["id"]
        .as_str()
        .expect("booking")
        .to_string();

    // A practitioner in oncology only; another in psychiatry.
    let (outsider, out) = app.staff_in_groups("out@example.com", &[&oncology]).await;
    let (_, inside) = app.staff_in_groups("in@example.com", &[&psychiatry]).await;
    let body = app
        .ok(
            "mutation($id: ID!) { updateUser(id: $id, input: { accessGroupIds: [\"nope\"] }) { error } }",
            json!({ "id": outsider }),
        )
        .await;
    assert_eq!(body["updateUser"]["error"], "No access group with id nope");

    // The outsider: the patient does not exist, in every read.
    let body = app
        .gql(
            Some(&out),
            "query($id: ID!) { patient(id: $id) { id } }",
            json!({ "id": secret }),
        )
        .await;
    assert_eq!(body["data"]["patient"], Value::Null, "{body}");
    // Asked with its labels, which come in the patient's own statement, it is hidden too.
    let body = app
        .gql(
            Some(&out),
            "query($id: ID!) { patient(id: $id) { id labels { text } } }",
            json!({ "id": secret }),
        )
        .await;
    assert_eq!(body["data"]["patient"], Value::Null, "{body}");
    let list = "query($s: String) { patients(search: $s, pagination: { pageSize: 1 }) { data { id } pageInfo { hasMore } } }";
    let body = app.gql(Some(&out), list, json!({})).await;
    assert_eq!(
        body["data"]["patients"]["data"],
        json!([{ "id": open }]),
        "{body}"
    );
    assert_eq!(
        body["data"]["patients"]["pageInfo"]["hasMore"], false,
        "{body}"
    );
    let body = app.gql(Some(&out), list, json!({ "s": "Secret" })).await;
    assert_eq!(body["data"]["patients"]["data"], json!([]), "{body}");
    let body = app.gql(Some(&out), list, json!({ "s": "Se" })).await;
    assert_eq!(body["data"]["patients"]["data"], json!([]), "{body}");
    // Nor does its booking (tested whole below).
    let body = app
        .gql(
            Some(&out),
            "query($id: ID!) { booking(id: $id) { id patient { id } } }",
            json!({ "id": booking }),
        )
        .await;
    assert_eq!(body["data"]["booking"], Value::Null, "{body}");
    let events = "{ events(limit: 500) { data { eventType identifiers { patientId } } } }";
    let done = app
        .gql(
            Some(&out),
            "mutation($id: ID!) { updatePatient(id: $id, patientData: { occupation: \"x\" }) { error } }",
            json!({ "id": secret }),
        )
        .await;
    assert_eq!(
        done["data"]["updatePatient"]["error"],
        format!("No patient with id {secret}")
    );
    let done = app
        .gql(
            Some(&out),
            "mutation($p: ID!, $d: ID!) { createBooking(bookingData: { patient: $p, doctor: $d, start: \"2031-01-02T09:00:00Z\", end: \"2031-01-02T09:30:00Z\" }) { error } }",
            json!({ "p": secret, "d": doctor }),
        )
        .await;
    assert_eq!(
        done["data"]["createBooking"]["error"],
        format!("No patient with id {secret}")
    );
    // Nor can a label be put on it or taken off, nor a booking moved to it.
    let label = app.label("VIP").await;
    let put = "mutation($p: ID!, $l: ID!) { addPatientLabel(patientId: $p, labelReferenceId: $l) { data { id } error } }";
    let done = app
        .gql(Some(&out), put, json!({ "p": secret, "l": label }))
        .await;
    assert_eq!(
        done["data"]["addPatientLabel"]["error"],
        format!("No patient with id {secret}"),
        "{done}"
    );
    let done = change(&app, put, json!({ "p": secret, "l": label })).await;
    assert_eq!(done["data"]["id"], secret.as_str(), "{done}");
    let take =
        "mutation($p: ID!, $l: ID!) { removePatientLabel(patientId: $p, labelId: $l) { error } }";
    let done = app
        .gql(Some(&out), take, json!({ "p": secret, "l": label }))
        .await;
    assert_eq!(
        done["data"]["removePatientLabel"]["error"],
        format!("No patient with id {secret}"),
        "{done}"
    );
    let theirs = change(
        &app,
        "mutation($p: ID!, $d: ID!) { createBooking(bookingData: { patient: $p, doctor: $d, start: \"2031-01-03T09:00:00Z\", end: \"2031-01-03T09:30:00Z\" }) { data { id } error } }",
        json!({ "p": open, "d": doctor }),
    )
    .await;
    let done = app
        .gql(
            Some(&out),
            "mutation($id: ID!, $p: ID) { updateBooking(id: $id, bookingData: { patient: $p }) { error } }",
            json!({ "id": theirs["data"]["id"], "p": secret }),
        )
        .await;
    assert_eq!(
        done["data"]["updateBooking"]["error"],
        format!("No patient with id {secret}"),
        "{done}"
    );
    // The insider changes it.
    let done = app
        .gql(
            Some(&inside),
            "mutation($id: ID!) { updatePatient(id: $id, patientData: { occupation: \"x\" }) { data { id } error } }",
            json!({ "id": secret }),
        )
        .await;
    assert_eq!(
        done["data"]["updatePatient"]["data"]["id"],
        secret.as_str(),
        "{done}"
    );
    let done = app
        .gql(Some(&inside), take, json!({ "p": secret, "l": label }))
        .await;
    assert_eq!(
        done["data"]["removePatientLabel"]["error"],
        Value::Null,
        "{done}"
    );

    // The insider, an admin and an API token see it.
    let body = app
        .gql(
            Some(&inside),
            "query($id: ID!) { patient(id: $id) { id labels { text } } }",
            json!({ "id": secret }),
        )
        .await;
    assert_eq!(body["data"]["patient"]["id"], secret.as_str(), "{body}");
    assert_eq!(body["data"]["patient"]["labels"], json!([]), "{body}");
    // Once the insider's feed shows the patient's events, the outsider's still does not.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !app
        .gql(Some(&inside), events, json!({}))
        .await
        .to_string()
        .contains(&secret)
    {
        assert!(
            std::time::Instant::now() < until,
            "the insider sees the events"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let body = app.gql(Some(&out), events, json!({})).await;
    assert!(
        body["data"]["events"]["data"]
            .as_array()
            .is_some_and(|e| !e.is_empty()),
        "{body}"
    );
    assert!(!body.to_string().contains(&secret), "{body}");
    let body = app
        .gql(Some(&inside), "{ patients { data { id } } }", json!({}))
        .await;
    assert_eq!(
        body["data"]["patients"]["data"]
            .as_array()
            .expect("list")
            .len(),
        2,
        "{body}"
    );
    let admin = app.user("admin", "boss@example.com").await;
    let boss = app.sign_in(&admin, PASSWORD).await;
    let body = app
        .gql(
            Some(&boss),
            "query($id: ID!) { patient(id: $id) { id } }",
            json!({ "id": secret }),
        )
        .await;
    assert_eq!(body["data"]["patient"]["id"], secret.as_str(), "{body}");
    let body = app
        .ok(
            "query($id: ID!) { patient(id: $id) { id } }",
            json!({ "id": secret }),
        )
        .await;
    assert_eq!(body["patient"]["id"], secret.as_str());

    // Out of every group, the patient is everyone's again.
    change(
        &app,
        "mutation($p: ID!, $g: ID!) { removePatientAccessGroup(patientId: $p, accessGroupId: $g) { error } }",
        json!({ "p": secret, "g": psychiatry }),
    )
    .await;
    let body = app
        .gql(
            Some(&out),
            "query($id: ID!) { patient(id: $id) { id } }",
            json!({ "id": secret }),
        )
        .await;
    assert_eq!(body["data"]["patient"]["id"], secret.as_str(), "{body}");
    // Nor do hidden patients make a search too broad (more than 2,000 matches): its refusal
    // would tell the outsider that patients matching it exist. Those who see them are told.
    let hidden: Vec<(practice_api::store::patients::PatientFields, Vec<String>)> = (0..2001)
        .map(|i| {
            let fields = practice_api::store::patients::PatientFields {
                first_name: "Zqx".into(),
                last_name: format!("Hidden{i}"),
                ..Default::default()
            };
            (fields, Vec::new())
        })
        .collect();
    let practice = app
        .store
        .practice(&app.practice_id)
        .by(crate::helpers::operator());
    let hidden = practice.import_patients(hidden).await.expect("import");
    for chunk in hidden.chunks(100) {
        let added = chunk
            .iter()
            .map(|id| practice.add_patient_access_group(id, &psychiatry));
        for added in futures_util::future::join_all(added).await {
            assert!(matches!(added, Ok(Ok(_))), "{added:?}");
        }
    }
    for search in ["zqx", "zqx hidden"] {
        let body = app.gql(Some(&out), list, json!({ "s": search })).await;
        assert_eq!(body["data"]["patients"]["data"], json!([]), "{body}");
        let body = app.gql(Some(&inside), list, json!({ "s": search })).await;
        assert_eq!(error_code(&body), "BAD_USER_INPUT", "{body}");
        assert!(error_message(&body).contains("more than 2000"), "{body}");
    }
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_booking_of_a_hidden_patient_is_hidden_too(#[case] engine: Engine) {
    let app = spawn!(engine);
    let oncology = define(&app, "access_groups", "oncology").await;
    let psychiatry = define(&app, "access_groups", "psychiatry").await;
    let doctor = app.doctor("Grace", "Hopper").await;
    let open = app.patient("Open", "Record").await;
    let secret = app.patient_in_group("Secret", "Record", &psychiatry).await;
    let book = "mutation($p: ID!, $d: ID!, $s: DateTime!, $e: DateTime!) { createBooking(bookingData: { patient: $p, doctor: $d, start: $s, end: $e }) { data { id } error } }";
    let mut booked = Vec::new();
    for (patient, hour) in [(&open, 9), (&secret, 10)] {
        let done = change(
            &app,
            book,
            json!({ "p": patient, "d": doctor, "s": format!("2031-01-01T{hour:02}:00:00Z"), "e": format!("2031-01-01T{hour:02}:30:00Z") }),
        )
        .await;
        booked.push(done["data"]["id"].as_str().expect("booking").to_string());
    }
    let (theirs, hidden) = (&booked[0], &booked[1]);
    change(
        &app,
        "mutation($id: ID!) { updateBookingMetadata(bookingId: $id, key: \"k\", value: \"v\") { error } }",
        json!({ "id": hidden }),
    )
    .await;
    let (_, out) = app.staff_in_groups("out@example.com", &[&oncology]).await;
    let (_, inside) = app.staff_in_groups("in@example.com", &[&psychiatry]).await;

    // Every read: by id, the practice's list (with metadata filter), the doctor's list.
    let reads = "query($id: ID!, $d: ID!) { booking(id: $id) { id } \
                 bookings(pagination: { pageSize: 100 }) { data { id } pageInfo { hasMore } } \
                 tagged: bookings(filters: { metadata: { key: \"k\" } }) { data { id } } \
                 user(id: $d) { bookings(start: \"2031-01-01\", end: \"2031-01-01\", pageSize: 100) { data { id } } } }";
    let body = app
        .gql(Some(&out), reads, json!({ "id": hidden, "d": doctor }))
        .await;
    assert!(body.get("errors").is_none(), "{body}");
    let data = &body["data"];
    assert_eq!(data["booking"], Value::Null, "{body}");
    assert_eq!(
        data["bookings"]["data"],
        json!([{ "id": theirs }]),
        "{body}"
    );
    assert_eq!(data["bookings"]["pageInfo"]["hasMore"], false, "{body}");
    assert_eq!(data["tagged"]["data"], json!([]), "{body}");
    assert_eq!(
        data["user"]["bookings"]["data"],
        json!([{ "id": theirs }]),
        "{body}"
    );
    let body = app
        .gql(Some(&inside), reads, json!({ "id": hidden, "d": doctor }))
        .await;
    assert!(body.get("errors").is_none(), "{body}");
    let data = &body["data"];
    assert_eq!(data["booking"]["id"], hidden.as_str(), "{body}");
    assert_eq!(
        data["bookings"]["data"],
        json!([{ "id": theirs }, { "id": hidden }]),
        "{body}"
    );
    assert_eq!(data["tagged"]["data"], json!([{ "id": hidden }]), "{body}");
    let total = "query($id: ID!) { patient(id: $id) { bookingsWithPagination(start: \"2031-01-01\", end: \"2031-01-01\") { meta { total } } } }";
    let body = app.gql(Some(&inside), total, json!({ "id": secret })).await;
    assert_eq!(
        body["data"]["patient"]["bookingsWithPagination"]["meta"]["total"], 1,
        "{body}"
    );
    // The events feed's bookings, loaded by id, are the viewer's too: the outsider's feed
    // names the booking of the patient they see, and nothing of the other.
    let feed =
        "{ events(limit: 500, eventTypes: [\"booking.created\"]) { data { booking { id } } } }";
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let body = loop {
        let body = app.gql(Some(&out), feed, json!({})).await;
        if body.to_string().contains(theirs.as_str()) {
            break body;
        }
        assert!(std::time::Instant::now() < until, "{body}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert_eq!(
        body["data"]["events"]["data"],
        json!([{ "booking": { "id": theirs } }]),
        "{body}"
    );

    // Every write by the booking's id: not found, and nothing changed.
    let writes = [
        (
            "updateBooking",
            "mutation($id: ID!) { updateBooking(id: $id, bookingData: { comments: \"x\" }) { error } }",
        ),
        (
            "updateBookingJourney",
            "mutation($id: ID!) { updateBookingJourney(id: $id, bookingJourneyInput: { journeyStage: arrived }) { error } }",
        ),
        (
            "updateBookingMetadata",
            "mutation($id: ID!) { updateBookingMetadata(bookingId: $id, key: \"k\", value: \"w\") { error } }",
        ),
        (
            "deleteBookingMetadata",
            "mutation($id: ID!) { deleteBookingMetadata(bookingId: $id, key: \"k\") { error } }",
        ),
        // Last, as a cancelled booking changes no more.
        (
            "deleteBooking",
            "mutation($id: ID!) { deleteBooking(id: $id) { error } }",
        ),
    ];
    for (field, mutation) in writes {
        let done = app.gql(Some(&out), mutation, json!({ "id": hidden })).await;
        assert_eq!(
            done["data"][field]["error"],
            format!("No booking with id {hidden}"),
            "{field}: {done}"
        );
    }
    let state = "query($id: ID!) { booking(id: $id) { comments deleted metadata { key value } bookingJourney { arrived } } }";
    let unchanged = json!({ "booking": { "comments": null, "deleted": false, "metadata": [{ "key": "k", "value": "v" }], "bookingJourney": { "arrived": null } } });
    assert_eq!(app.ok(state, json!({ "id": hidden })).await, unchanged);
    // The outsider still changes the booking of a patient they see; the insider, this one.
    let done = app
        .gql(Some(&out), writes[0].1, json!({ "id": theirs }))
        .await;
    assert_eq!(
        done["data"]["updateBooking"]["error"],
        Value::Null,
        "{done}"
    );
    for (field, mutation) in writes {
        let done = app
            .gql(Some(&inside), mutation, json!({ "id": hidden }))
            .await;
        assert_eq!(done["data"][field]["error"], Value::Null, "{field}: {done}");
    }
    let body = app.ok(state, json!({ "id": hidden })).await;
    assert_eq!(body["booking"]["deleted"], true, "{body}");
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_patients_bookings_page_with_its_total(#[case] engine: Engine) {
    let app = spawn!(engine);
    let patient = app.patient("Jane", "Doe").await;
    let doctor = app.doctor("Grace", "Hopper").await;
    let mut ids = Vec::new();
    for hour in [9, 10, 11] {
        let done = change(
            &app,
            "mutation($p: ID!, $d: ID!, $s: DateTime!, $e: DateTime!) { createBooking(bookingData: { patient: $p, doctor: $d, start: $s, end: $e }) { data { id } error } }",
            json!({ "p": patient, "d": doctor, "s": format!("2031-01-01T{hour:02}:00:00Z"), "e": format!("2031-01-01T{hour:02}:30:00Z") }),
        )
        .await;
        ids.push(done["data"]["id"].as_str().expect("booking").to_string());
    }
    change(
        &app,
        "mutation($id: ID!) { deleteBooking(id: $id) { error } }",
        json!({ "id": ids[2] }),
    )
    .await;
    let query = "query($id: ID!, $o: QueryOptions, $g: Pagination) { patient(id: $id) { \
                 bookingsWithPagination(start: \"2031-01-01\", end: \"2031-01-01\", queryOptions: $o, pagination: $g) { data { id } meta { page pageSize hasMore total } } \
                 bookings(start: \"2031-01-01\", end: \"2031-01-01\", queryOptions: $o, pagination: $g) { id } } }";
    let body = app
        .ok(query, json!({ "id": patient, "g": { "pageSize": 1 } }))
        .await;
    let page = &body["patient"]["bookingsWithPagination"];
    assert_eq!(page["data"], json!([{ "id": ids[0] }]), "{body}");
    assert_eq!(
        page["meta"],
        json!({ "page": 1, "pageSize": 1, "hasMore": true, "total": 2 })
    );
    assert_eq!(body["patient"]["bookings"], json!([{ "id": ids[0] }]));
    let body = app
        .ok(
            query,
            json!({ "id": patient, "o": { "includeDeleted": true }, "g": { "page": 2, "pageSize": 2 } }),
        )
        .await;
    let page = &body["patient"]["bookingsWithPagination"];
    assert_eq!(page["data"], json!([{ "id": ids[2] }]), "{body}");
    assert_eq!(
        page["meta"],
        json!({ "page": 2, "pageSize": 2, "hasMore": false, "total": 3 })
    );
}

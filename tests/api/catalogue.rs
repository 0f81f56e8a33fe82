//! The practice's catalogue and settings: products (of which appointment types are the
//! bookable kind), `practice` with its locations grouped by site, access groups and number
//! definitions, and the services locations and practitioners provide.

use serde_json::{Value, json};
use sqlx::Connection;

use rstest::rstest;

use crate::helpers::{
    Engine, TestApp, error_code, error_message, hold_rows, test_config, waits_on_a_lock,
};
use crate::record::change;
use crate::spawn;

const PRODUCT: &str = "id name productType status duration price cost itemCode color comments \
    isBookable isVideoConsultation requiresPayment requiresConfirmation \
    labels { id referenceId text color } tax { taxName taxRate taxCode } \
    metadata { key value } createdAt updatedAt";

/// The id of the record a mutation's payload holds.
fn id_of(payload: &Value) -> String {
    payload["data"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no id in {payload}"))
        .to_string()
}

/// Runs a mutation with the admin token; returns the id of the record it made.
async fn make(app: &TestApp, mutation: &str) -> String {
    id_of(&change(app, mutation, json!({})).await)
}

async fn create_product(app: &TestApp, data: Value) -> Value {
    change(
        app,
        &format!(
            "mutation($d: ProductDataInput!) {{ createProduct(productData: $d) {{ data {{ {PRODUCT} }} error }} }}"
        ),
        json!({ "d": data }),
    )
    .await
}

async fn update_product(app: &TestApp, id: &str, data: Value) -> Value {
    change(
        app,
        &format!(
            "mutation($id: ID!, $d: ProductDataInput!) {{ updateProduct(id: $id, productData: $d) {{ data {{ {PRODUCT} }} error }} }}"
        ),
        json!({ "id": id, "d": data }),
    )
    .await
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn products_are_written_read_back_searched_and_changed(#[case] engine: Engine) {
    let app = spawn!(engine);
    let vip = app.label("VIP").await;
    let made = create_product(
        &app,
        json!({
            "name": "Physio session", "productType": "appointment", "duration": 45,
            "price": 60.5, "cost": 20, "itemCode": "PHY-45", "color": "#0EA5E9",
            "comments": "Bring shorts", "isVideoConsultation": true, "requiresPayment": true,
            "requiresConfirmation": true, "labels": [vip, vip],
            "tax": { "taxName": "VAT", "taxRate": 20, "taxCode": "T1" },
            "metadata": [{ "key": "source", "value": "crm" }]
        }),
    )
    .await;
    assert!(made["error"].is_null(), "{made}");
    let product = &made["data"];
    let id = product["id"].as_str().expect("an id").to_string();
    assert_eq!(product["productType"], "appointment");
    assert_eq!(product["status"], "active");
    assert_eq!(product["duration"], 45);
    assert_eq!(product["price"], 60.5);
    assert_eq!(product["cost"], 20.0);
    assert_eq!(product["itemCode"], "PHY-45");
    assert_eq!(product["color"], "#0ea5e9");
    assert_eq!(product["comments"], "Bring shorts");
    assert_eq!(product["isBookable"], true);
    assert_eq!(product["isVideoConsultation"], true);
    assert_eq!(product["requiresPayment"], true);
    assert_eq!(product["requiresConfirmation"], true);
    assert_eq!(
        product["labels"],
        json!([{ "id": vip, "referenceId": vip, "text": "VIP", "color": "#123456" }])
    );
    assert_eq!(
        product["tax"],
        json!({ "taxName": "VAT", "taxRate": 20, "taxCode": "T1" })
    );
    assert_eq!(
        product["metadata"],
        json!([{ "key": "source", "value": "crm" }])
    );

    // Read back as a client would: by id, in the list, by search.
    let read = app
        .ok(
            &format!("query($id: ID!) {{ product(id: $id) {{ {PRODUCT} }} }}"),
            json!({ "id": id }),
        )
        .await;
    assert_eq!(&read["product"], product);
    let item = create_product(
        &app,
        json!({ "name": "Knee brace", "productType": "item", "price": 35, "itemCode": "ITM-1" }),
    )
    .await;
    assert_eq!(item["data"]["isBookable"], false, "{item}");
    assert!(item["data"]["duration"].is_null());
    assert!(item["data"]["tax"].is_null());
    let list = |search: Value, options: Value| {
        let app = &app;
        async move {
            app.ok(
                "query($s: String, $o: QueryOptions) { products(search: $s, options: $o, pagination: { page: 1, pageSize: 1 }) { data { name } pageInfo { page pageSize hasMore } } }",
                json!({ "s": search, "o": options }),
            )
            .await["products"]
                .clone()
        }
    };
    let first = list(Value::Null, Value::Null).await;
    assert_eq!(first["data"], json!([{ "name": "Knee brace" }]));
    assert_eq!(first["pageInfo"]["hasMore"], true);
    assert_eq!(
        list(json!("phy-4"), Value::Null).await["data"],
        json!([{ "name": "Physio session" }]),
        "the item code matches, in any case"
    );
    assert_eq!(list(json!("100%"), Value::Null).await["data"], json!([]));
    // Letters beyond ASCII match in any case too, made now and made before the search's
    // column existed (filled as the server starts).
    let echo = create_product(
        &app,
        json!({ "name": "Échographie", "productType": "service", "itemCode": "ÉCH-1" }),
    )
    .await;
    assert!(echo["error"].is_null(), "{echo}");
    for search in ["écho", "ÉCHO", "graphie", "éch-1"] {
        assert_eq!(
            list(json!(search), Value::Null).await["data"],
            json!([{ "name": "Échographie" }]),
            "{search}"
        );
    }

    // A change writes the fields given and keeps the rest; null clears.
    let changed = update_product(
        &app,
        &id,
        json!({ "price": 65, "tax": null, "comments": null, "status": "inactive", "labels": [] }),
    )
    .await;
    assert!(changed["error"].is_null(), "{changed}");
    let c = &changed["data"];
    assert_eq!(c["price"], 65.0);
    assert!(c["tax"].is_null() && c["comments"].is_null());
    assert_eq!(c["labels"], json!([]));
    assert_eq!(
        (c["status"].as_str(), c["duration"].as_i64()),
        (Some("inactive"), Some(45))
    );
    assert_eq!(c["itemCode"], "PHY-45");
    // Inactive products are listed only when asked for.
    assert_eq!(list(json!("physio"), Value::Null).await["data"], json!([]));
    assert_eq!(
        list(json!("physio"), json!({ "includeDeleted": true })).await["data"],
        json!([{ "name": "Physio session" }])
    );
    forget_search_text(&app).await;
    let mut app = app;
    app.restart().await;
    let list = |search: Value| {
        let app = &app;
        async move {
            app.ok(
                "query($s: String) { products(search: $s) { data { name } } }",
                json!({ "s": search }),
            )
            .await["products"]["data"]
                .clone()
        }
    };
    assert_eq!(
        list(json!("ÉCHO")).await,
        json!([{ "name": "Échographie" }])
    );
    assert_eq!(list(json!("phy-4")).await, json!([]));
}

/// Takes the search text off every product, as a database made before migration 0022 has.
async fn forget_search_text(app: &TestApp) {
    sqlx::any::install_default_drivers();
    let mut conn = sqlx::AnyConnection::connect(&app.database_url)
        .await
        .expect("connect");
    sqlx::query("UPDATE products SET search_text = NULL")
        .execute(&mut conn)
        .await
        .expect("forget");
    let _ = conn.close().await;
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn product_changes_are_refused_with_a_reason(#[case] engine: Engine) {
    let app = spawn!(engine);
    let made = create_product(
        &app,
        json!({ "name": "Report", "productType": "service", "price": 120 }),
    )
    .await;
    let id = id_of(&made);

    // Refusals of the practice: in `error`, nothing changed.
    let taken = create_product(&app, json!({ "name": "Report", "productType": "item" })).await;
    assert_eq!(taken["error"], "A product named \"Report\" already exists");
    let retyped = update_product(&app, &id, json!({ "productType": "item" })).await;
    assert_eq!(
        retyped["error"],
        "A product's type cannot change: this one is of type \"service\"; create a new product instead"
    );
    let unlabelled = update_product(&app, &id, json!({ "labels": ["nope"] })).await;
    assert_eq!(unlabelled["error"], "No label with id nope");
    let missing = update_product(&app, "nope", json!({ "price": 1 })).await;
    assert_eq!(missing["error"], "No product with id nope");
    let read = app
        .ok(
            "query($id: ID!) { product(id: $id) { price labels { id } } }",
            json!({ "id": id }),
        )
        .await;
    assert_eq!(read["product"], json!({ "price": 120.0, "labels": [] }));

    // Mistakes in the input: a GraphQL error with BAD_USER_INPUT.
    for (data, says) in [
        (
            json!({ "name": "Massage", "productType": "appointment" }),
            "productData.duration is needed",
        ),
        (
            json!({ "name": "Brace", "productType": "item", "isBookable": true }),
            "isBookable can be true only",
        ),
        (
            json!({ "name": "X", "productType": "voucher" }),
            "productType must be one of",
        ),
        (
            json!({ "productType": "item" }),
            "productData.name and productData.productType",
        ),
        (
            json!({ "name": "X", "productType": "item", "price": -1 }),
            "price must not be negative",
        ),
        (
            json!({ "name": "X", "productType": "item", "color": "blue" }),
            "color must be a hex colour",
        ),
        (
            json!({ "name": "X", "productType": "appointment", "duration": 2000 }),
            "duration must be between 1 and 1440",
        ),
        (
            json!({ "name": "X", "productType": "item", "tax": { "taxRate": 120 } }),
            "taxRate must be from 0 to 100",
        ),
        (
            json!({ "name": "X", "productType": "item", "metadata": [{ "key": "k", "value": "1" }, { "key": "k", "value": "2" }] }),
            "names the key \"k\" twice",
        ),
    ] {
        let body = app
            .gql(
                Some(&app.admin_token),
                "mutation($d: ProductDataInput!) { createProduct(productData: $d) { data { id } error } }",
                json!({ "d": data }),
            )
            .await;
        assert_eq!(error_code(&body), "BAD_USER_INPUT", "{data}: {body}");
        assert!(error_message(&body).contains(says), "{data}: {body}");
    }
    // The contract's limits on metadata (50 entries, keys of 40 characters, values of 500):
    // at them the change is made; past them, a refusal in `error`, and nothing changed.
    let entries = |n: usize| -> Vec<Value> {
        (0..n)
            .map(|i| json!({ "key": format!("k{i}"), "value": "v" }))
            .collect()
    };
    let longest = json!([{ "key": "k".repeat(40), "value": "v".repeat(500) }]);
    let at_limits = update_product(&app, &id, json!({ "metadata": longest })).await;
    assert!(at_limits["error"].is_null(), "{at_limits}");
    let full = update_product(&app, &id, json!({ "metadata": entries(50) })).await;
    assert!(full["error"].is_null(), "{full}");
    for (metadata, says) in [
        (
            json!(entries(51)),
            "Metadata holds at most 50 entries; this change gives 51",
        ),
        (
            json!([{ "key": "k".repeat(41), "value": "v" }]),
            "A metadata key has at most 40 characters; this one has 41",
        ),
        (
            json!([{ "key": "k", "value": "v".repeat(501) }]),
            "A metadata value has at most 500 characters; this one has 501",
        ),
    ] {
        let changed = update_product(&app, &id, json!({ "metadata": metadata })).await;
        assert_eq!(changed["error"], says, "{changed}");
        assert!(changed["data"].is_null(), "{changed}");
        let made = create_product(
            &app,
            json!({ "name": "Over", "productType": "item", "metadata": metadata }),
        )
        .await;
        assert_eq!(made["error"], says, "{made}");
    }
    let read = app
        .ok("{ products { data { name metadata { key } } } }", json!({}))
        .await;
    let products = read["products"]["data"].as_array().expect("products");
    assert_eq!(products.len(), 1, "nothing named Over was made: {read}");
    assert_eq!(products[0]["metadata"].as_array().map(Vec::len), Some(50));
    // A mistake elsewhere in the input is told first.
    let body = app
        .gql(
            Some(&app.admin_token),
            "mutation($d: ProductDataInput!) { createProduct(productData: $d) { error } }",
            json!({ "d": { "productType": "item", "metadata": entries(51) } }),
        )
        .await;
    assert_eq!(error_code(&body), "BAD_USER_INPUT", "{body}");
    // So is a mistake in the very list that is too long: a key named twice.
    let mut twice = entries(51);
    twice[50] = json!({ "key": "k0", "value": "again" });
    let body = app
        .gql(
            Some(&app.admin_token),
            "mutation($id: ID!, $d: ProductDataInput!) { updateProduct(id: $id, productData: $d) { error } }",
            json!({ "id": id, "d": { "metadata": twice } }),
        )
        .await;
    assert_eq!(error_code(&body), "BAD_USER_INPUT", "{body}");
    assert!(error_message(&body).contains("twice"), "{body}");
    // The practice's appointment types with all their metadata fit one query's cost.
    let body = app
        .gql(
            Some(&app.admin_token),
            "{ practice { appointmentTypes { id metadata { key value } } } }",
            json!({}),
        )
        .await;
    assert!(body["errors"].is_null(), "{body}");
    assert_eq!(body["extensions"]["cost"]["requested"], 4_402, "{body}");
    // An id of half a megabyte is refused, and not repeated back.
    let huge = "x".repeat(500_000);
    let body = app
        .gql(
            Some(&app.admin_token),
            "mutation($id: ID!, $d: ProductDataInput!) { updateProduct(id: $id, productData: $d) { error } }",
            json!({ "id": id, "d": { "labels": ["a", huge] } }),
        )
        .await;
    assert_eq!(error_code(&body), "BAD_USER_INPUT", "{body}");
    assert!(
        error_message(&body).contains("productData.labels[1] is not an id"),
        "{body}"
    );
    assert!(body.to_string().len() < 2_000, "the id came back");

    // Reading needs bookings:read; writing needs settings.
    let reader = app.token(&["bookings:read"]).await;
    let body = app
        .gql(Some(&reader), "{ products { data { name } } }", json!({}))
        .await;
    assert_eq!(
        body["data"]["products"]["data"],
        json!([{ "name": "Report" }]),
        "{body}"
    );
    let body = app
        .gql(
            Some(&reader),
            "mutation { createProduct(productData: { name: \"Y\", productType: \"item\" }) { error } }",
            json!({}),
        )
        .await;
    assert_eq!(error_code(&body), "FORBIDDEN", "{body}");
    let patients_only = app.token(&["patients:read"]).await;
    let body = app
        .gql(
            Some(&patients_only),
            "{ product(id: \"x\") { id } }",
            json!({}),
        )
        .await;
    assert_eq!(error_code(&body), "FORBIDDEN", "{body}");
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn only_an_active_bookable_appointment_type_is_booked(#[case] engine: Engine) {
    let app = spawn!(engine);
    let doctor = app.doctor("Grace", "Hopper").await;
    let patient = app.patient("Jane", "Doe").await;
    // The shorthand still makes an appointment type, which is a product.
    let consultation = make(&app, "mutation { createAppointmentType(title: \"Consultation\", duration: 30, price: 50) { data { id title duration price } error } }").await;
    let read = app
        .ok(
            "query($id: ID!) { product(id: $id) { name productType duration isBookable } appointmentTypes { id } }",
            json!({ "id": consultation }),
        )
        .await;
    assert_eq!(
        read["product"],
        json!({ "name": "Consultation", "productType": "appointment", "duration": 30, "isBookable": true })
    );
    assert_eq!(read["appointmentTypes"], json!([{ "id": consultation }]));
    let item = create_product(&app, json!({ "name": "Brace", "productType": "item" })).await;
    let item = id_of(&item);

    let book = |kind: String, start: &'static str| {
        let app = &app;
        let (doctor, patient) = (doctor.clone(), patient.clone());
        async move {
            change(
                app,
                "mutation($d: BookingDataInput!) { createBooking(bookingData: $d) { data { id end appointment { id title } } error } }",
                json!({ "d": { "patient": patient, "doctor": doctor, "start": start, "bookingType": kind } }),
            )
            .await
        }
    };
    let booked = book(consultation.clone(), "2030-01-07T09:00:00Z").await;
    assert!(booked["error"].is_null(), "{booked}");
    assert_eq!(booked["data"]["end"], "2030-01-07T09:30:00.000Z");
    let booking = id_of(&booked);
    let refused = book(item.clone(), "2030-01-07T10:00:00Z").await;
    assert_eq!(
        refused["error"],
        "\"Brace\" cannot be booked: only an active, bookable appointment type can"
    );

    // Once inactive, it is no longer offered nor booked; the booking made keeps it.
    update_product(&app, &consultation, json!({ "status": "inactive" })).await;
    let refused = book(consultation.clone(), "2030-01-07T11:00:00Z").await;
    assert_eq!(
        refused["error"],
        "\"Consultation\" cannot be booked: only an active, bookable appointment type can"
    );
    let read = app
        .ok(
            "query($id: ID!) { booking(id: $id) { appointment { id title } } appointmentTypes { id } practice { appointmentTypes { id status isBookable } } }",
            json!({ "id": booking }),
        )
        .await;
    assert_eq!(
        read["booking"]["appointment"],
        json!({ "id": consultation, "title": "Consultation" })
    );
    assert_eq!(read["appointmentTypes"], json!([]));
    assert_eq!(
        read["practice"]["appointmentTypes"],
        json!([{ "id": consultation, "status": "inactive", "isBookable": false }]),
        "a widget that offers what isBookable says offers no inactive type"
    );
    let moved = change(
        &app,
        "mutation($id: ID!) { updateBooking(id: $id, bookingData: { comments: \"kept\" }) { data { appointment { id } } error } }",
        json!({ "id": booking }),
    )
    .await;
    assert!(moved["error"].is_null(), "{moved}");
    // Active again, it is bookable again: its own setting was kept.
    update_product(&app, &consultation, json!({ "status": "active" })).await;
    let read = app
        .ok(
            "{ practice { appointmentTypes { id isBookable } } }",
            json!({}),
        )
        .await;
    assert_eq!(
        read["practice"]["appointmentTypes"],
        json!([{ "id": consultation, "isBookable": true }])
    );
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn the_practice_lists_its_settings_as_clients_read_them(#[case] engine: Engine) {
    let app = spawn!(engine);
    let consultation = make(&app, "mutation { a: createAppointmentType(title: \"Consultation\", duration: 30) { data { id } } }").await;
    let room = |name: &'static str, site: Value, services: Value| {
        let app = &app;
        async move {
            change(
                app,
                "mutation($n: String!, $g: String, $s: [ID!]) { createLocation(name: $n, groupName: $g, servicesProvided: $s, address: { city: \"York\" }) { data { id name } error } }",
                json!({ "n": name, "g": site, "s": services }),
            )
            .await
        }
    };
    let room2 = room("Room 2", json!("Main surgery"), json!([consultation])).await;
    let room2 = id_of(&room2);
    room("Room 1", json!("Main surgery"), json!([])).await;
    room("Annex", Value::Null, Value::Null).await;
    let unknown = room("Room 3", Value::Null, json!(["nope"])).await;
    assert_eq!(unknown["error"], "No appointment type with id nope");

    let group = change(
        &app,
        "mutation { createAccessGroup(name: \"mental-health\", label: \"Mental health team\") { data { id name label } error } }",
        json!({}),
    )
    .await;
    let group_id = id_of(&group);
    assert_eq!(group["data"]["label"], "Mental health team");
    let again = change(
        &app,
        "mutation { createAccessGroup(name: \"mental-health\", label: \"Again\") { data { id } error } }",
        json!({}),
    )
    .await;
    assert_eq!(
        again["error"],
        "An access group named \"mental-health\" already exists"
    );
    let number = |name: &'static str, primary: bool| {
        let app = &app;
        async move {
            change(
                app,
                "mutation($n: String!, $p: Boolean) { createPracticeNumber(name: $n, primary: $p) { data { id name primary deleted } error } }",
                json!({ "n": name, "p": primary }),
            )
            .await
        }
    };
    let nhs = number("NHS number", true).await;
    assert_eq!(nhs["data"]["primary"], true, "{nhs}");
    let insurance = number("Insurance number", true).await;
    assert_eq!(insurance["data"]["primary"], true);
    assert_eq!(
        number("NHS number", false).await["error"],
        "A number definition named \"NHS number\" already exists"
    );

    // The document a patient portal sends, with a token that reads patients and bookings:
    // the practice's settings are any token's, its products (their cost, their comments)
    // those of who may read bookings.
    let portal = app.token(&["query:patient", "bookings:read"]).await;
    let body = app
        .gql(
            Some(&portal),
            "{ practice { id name timezone locations { id name groupName address { city } } appointmentTypes { id name duration } accessGroups { id name label } practiceNumbers { id name primary deleted } } }",
            json!({}),
        )
        .await;
    assert!(body.get("errors").is_none(), "{body}");
    // The practice's appointment types with their metadata fit one query's cost.
    let with_metadata = app
        .gql(
            Some(&portal),
            "{ practice { appointmentTypes { id name duration metadata { key value } } } }",
            json!({}),
        )
        .await;
    assert!(with_metadata.get("errors").is_none(), "{with_metadata}");
    // A token that reads patients alone gets the practice's settings, and no product and no
    // location: those are bookings' data, as at the root.
    let patients_only = app.token(&["query:patient", "patients:read"]).await;
    let refused = app
        .gql(
            Some(&patients_only),
            "{ practice { name accessGroups { name } appointmentTypes { id cost comments } locations { name servicesProvided { id } } } }",
            json!({}),
        )
        .await;
    assert!(refused["data"]["practice"]["name"].is_string(), "{refused}");
    assert!(
        refused["data"]["practice"]["accessGroups"].is_array(),
        "{refused}"
    );
    assert_eq!(refused["data"]["practice"]["appointmentTypes"], Value::Null);
    assert_eq!(refused["data"]["practice"]["locations"], Value::Null);
    let errors = refused["errors"].as_array().expect("errors");
    assert_eq!(errors.len(), 2, "{refused}");
    for error in errors {
        assert_eq!(error["extensions"]["code"], "FORBIDDEN", "{refused}");
        let message = error["message"].as_str().unwrap_or("");
        assert!(message.contains("bookings:read"), "{refused}");
    }
    assert!(
        !refused.to_string().contains("Consultation"),
        "no product leaks: {refused}"
    );

    let practice = &body["data"]["practice"];
    assert_eq!(practice["id"], app.practice_id.as_str());
    assert_eq!(practice["timezone"], "UTC");
    let places: Vec<(String, String)> = practice["locations"]
        .as_array()
        .expect("locations")
        .iter()
        .map(|l| {
            (
                l["groupName"].as_str().unwrap_or("").to_string(),
                l["name"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    let place = |site: &str, name: &str| (site.to_string(), name.to_string());
    assert_eq!(
        places,
        vec![
            place("Annex", "Annex"),
            place("Main surgery", "Room 1"),
            place("Main surgery", "Room 2"),
        ],
        "by site, then name; a location without a group is a site of its own"
    );
    // What each location offers: 200 locations of 30 services each fit the default cost.
    let offered = app
        .gql(
            Some(&portal),
            "{ practice { locations { name servicesProvided { id } } } }",
            json!({}),
        )
        .await;
    assert!(offered.get("errors").is_none(), "{offered}");
    assert_eq!(
        offered["data"]["practice"]["locations"][2],
        json!({ "name": "Room 2", "servicesProvided": [{ "id": consultation }] })
    );
    assert_eq!(practice["locations"][2]["address"]["city"], "York");
    assert_eq!(
        practice["appointmentTypes"],
        json!([{ "id": consultation, "name": "Consultation", "duration": 30 }])
    );
    assert_eq!(
        practice["accessGroups"],
        json!([{ "id": group_id, "name": "mental-health", "label": "Mental health team" }])
    );
    assert_eq!(
        practice["practiceNumbers"],
        json!([
            { "id": insurance["data"]["id"], "name": "Insurance number", "primary": true, "deleted": false },
            { "id": nhs["data"]["id"], "name": "NHS number", "primary": false, "deleted": false },
        ]),
        "a new primary number takes the place of the old"
    );

    // A location changes: the arguments given.
    let moved = change(
        &app,
        "mutation($id: ID!) { updateLocation(id: $id, groupName: null, servicesProvided: [], address: { postcode: \"YO1 7HH\" }) { data { name groupName servicesProvided { id } address { city postcode } } error } }",
        json!({ "id": room2 }),
    )
    .await;
    assert_eq!(
        moved["data"],
        json!({ "name": "Room 2", "groupName": "Room 2", "servicesProvided": [], "address": { "city": "York", "postcode": "YO1 7HH" } })
    );
    // A line given as null is cleared; the lines left out are kept.
    let cleared = change(
        &app,
        "mutation($id: ID!) { updateLocation(id: $id, address: { city: null, country: \"UK\" }) { data { address { city postcode country } } error } }",
        json!({ "id": room2 }),
    )
    .await;
    assert_eq!(
        cleared["data"]["address"],
        json!({ "city": null, "postcode": "YO1 7HH", "country": "UK" }),
        "{cleared}"
    );
    // The address given as null is cleared whole.
    let cleared = change(
        &app,
        "mutation($id: ID!) { updateLocation(id: $id, address: null) { data { address { address city postcode country } } error } }",
        json!({ "id": room2 }),
    )
    .await;
    assert_eq!(
        cleared["data"]["address"],
        json!({ "address": null, "city": null, "postcode": null, "country": null }),
        "{cleared}"
    );
    let clash = change(
        &app,
        "mutation($id: ID!) { updateLocation(id: $id, name: \"Annex\") { error } }",
        json!({ "id": room2 }),
    )
    .await;
    assert_eq!(clash["error"], "A location named \"Annex\" already exists");

    // Settings are written with `settings` only.
    let writer = app.token(&["bookings:write", "patients:write"]).await;
    for mutation in [
        "mutation { createAccessGroup(name: \"a\", label: \"b\") { error } }",
        "mutation { createPracticeNumber(name: \"a\") { error } }",
        "mutation { updateLocation(id: \"x\", name: \"y\") { error } }",
    ] {
        let body = app.gql(Some(&writer), mutation, json!({})).await;
        assert_eq!(error_code(&body), "FORBIDDEN", "{mutation}: {body}");
    }
    let body = app
        .gql(
            Some(&app.admin_token),
            "mutation { createAccessGroup(name: \" \", label: \"b\") { error } }",
            json!({}),
        )
        .await;
    assert_eq!(error_code(&body), "BAD_USER_INPUT", "{body}");
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn practitioners_provide_appointment_types(#[case] engine: Engine) {
    let app = spawn!(engine);
    let doctor = app.doctor("Grace", "Hopper").await;
    let consultation = make(
        &app,
        "mutation { createAppointmentType(title: \"Consultation\", duration: 30) { data { id } } }",
    )
    .await;
    let item = create_product(&app, json!({ "name": "Brace", "productType": "item" })).await;
    let item = id_of(&item);
    let update = |services: Value| {
        let app = &app;
        let doctor = doctor.clone();
        async move {
            change(
                app,
                "mutation($id: ID!, $s: [ID!]) { updateUser(id: $id, input: { servicesProvided: $s }) { data { servicesProvided { id name } } error } }",
                json!({ "id": doctor, "s": services }),
            )
            .await
        }
    };
    let done = update(json!([consultation, consultation])).await;
    assert_eq!(
        done["data"]["servicesProvided"],
        json!([{ "id": consultation, "name": "Consultation" }]),
        "{done}"
    );
    assert_eq!(
        update(json!([item])).await["error"],
        format!("No appointment type with id {item}"),
        "an item is not a service a practitioner provides"
    );
    // The document an automation tool sends for staff.
    let read = app
        .ok(
            "{ users { data { id deleted medicalSpecialties registration positionTitle servicesProvided { id } } } }",
            json!({}),
        )
        .await;
    let grace = read["users"]["data"]
        .as_array()
        .expect("users")
        .iter()
        .find(|u| u["id"] == doctor.as_str())
        .cloned()
        .expect("the doctor is listed");
    assert_eq!(grace["servicesProvided"], json!([{ "id": consultation }]));
    // Nor through a user, to a token that may read users but not bookings.
    let users_only = app.token(&["users:read"]).await;
    let refused = app
        .gql(
            Some(&users_only),
            "{ users { data { id servicesProvided { id cost } } } }",
            json!({}),
        )
        .await;
    assert_eq!(error_code(&refused), "FORBIDDEN", "{refused}");
    assert!(
        refused["data"]["users"]["data"]
            .as_array()
            .expect("users")
            .iter()
            .all(|u| u["servicesProvided"].is_null() && u["id"].is_string()),
        "{refused}"
    );
    assert_eq!(
        update(Value::Null).await["data"]["servicesProvided"],
        json!([])
    );
}

/// The type names of the contract's section "The full record": clients use them in fragments
/// and variable declarations, so each must be the server's own.
const CONTRACT_TYPES: &[&str] = &[
    "Patient",
    "Phone",
    "PlaceOfBirth",
    "SharingToken",
    "PatientNumber",
    "CustomAttribute",
    "CommunicationPreferences",
    "PrivacyPolicy",
    "PatientRelationship",
    "PatientRelationshipContact",
    "PatientAccessGroup",
    "INS",
    "PatientArchivedInfo",
    "PageInfoWithTotalCount",
    "PatientRelationshipType",
    "PatientINSStatus",
    "PatientINSSIdentityAlertStatus",
    "PatientArchiveReason",
    "PatientUnarchiveReason",
    "CreatePatientDataInput",
    "UpdatePatientDataInput",
    "INSInput",
    "PlaceOfBirthInput",
    "PatientCommunicationPreferencesInput",
    "AddCustomAttributeData",
    "UpdateCustomAttributeData",
    "AddPhoneData",
    "UpdatePhoneData",
    "AddPatientNumberData",
    "PatientRelationshipContactInput",
    "Booking",
    "BookingStatus",
    "Journey",
    "SendPatientMessages",
    "MetadataEntry",
    "JourneyStage",
    "BookingJourneyInput",
    "SendPatientMessagesInput",
    "BookingQueryFilters",
    "MetadataFilter",
    "Product",
    "ProductLabel",
    "Tax",
    "ProductData",
    "Practice",
    "PracticeLocation",
    "PracticeAccessGroups",
    "PracticeNumbers",
    "User",
    "PatientBookingsData",
    "ProductResponsePayload",
    "AccessGroupResponsePayload",
    "PracticeNumberResponsePayload",
];

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[tokio::test]
async fn the_contracts_type_names_are_the_servers(#[case] engine: Engine) {
    let app = spawn!(engine);
    let mut missing = Vec::new();
    for name in CONTRACT_TYPES {
        let body = app
            .ok(
                "query($n: String!) { __type(name: $n) { name } }",
                json!({ "n": name }),
            )
            .await;
        if body["__type"]["name"] != *name {
            missing.push(*name);
        }
    }
    assert!(missing.is_empty(), "not in the schema: {missing:?}");
    // A variable declared with the contract's enum, as a client's document declares it.
    let patient = app.patient("Jane", "Doe").await;
    let body = app
        .ok(
            "mutation($id: ID!, $s: PatientINSStatus) { updatePatient(id: $id, patientData: { ins: { status: $s } }) { data { ins { status } } error } }",
            json!({ "id": patient, "s": "PROVISIONAL" }),
        )
        .await;
    assert_eq!(
        body["updatePatient"]["data"]["ins"]["status"], "PROVISIONAL",
        "{body}"
    );
}

/// The catalogue's events in the feed, as `token` sees them, once there are `n`.
async fn catalogue_events(app: &TestApp, token: &str, n: usize) -> Vec<Value> {
    let types = json!([
        "product.created",
        "product.updated",
        "location.created",
        "location.updated",
        "accessGroup.created",
        "practiceNumber.created"
    ]);
    app.settled_events(
        token,
        "query($t: [String!]) { events(eventTypes: $t, limit: 100) { data { eventType identifiers { patientId productId locationId accessGroupId practiceNumberId } } } }",
        json!({ "t": types }),
        |events| events.len() >= n,
    )
    .await
}

#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn each_change_to_the_catalogue_is_an_event(#[case] engine: Engine) {
    let app = spawn!(engine);
    let product = create_product(&app, json!({ "name": "Brace", "productType": "item" })).await;
    let product = id_of(&product);
    update_product(&app, &product, json!({ "price": 30 })).await;
    // A change that changes nothing is no event (the list below would show it).
    update_product(&app, &product, json!({ "price": 30 })).await;
    let consultation = make(
        &app,
        "mutation { createAppointmentType(title: \"Consultation\", duration: 30) { data { id } } }",
    )
    .await;
    let location = make(
        &app,
        "mutation { createLocation(name: \"Room 1\") { data { id } } }",
    )
    .await;
    for _ in 0..2 {
        change(
            &app,
            "mutation($id: ID!) { updateLocation(id: $id, groupName: \"Main surgery\") { error } }",
            json!({ "id": location }),
        )
        .await;
    }
    let group = make(
        &app,
        "mutation { createAccessGroup(name: \"g\", label: \"G\") { data { id } } }",
    )
    .await;
    let number = make(
        &app,
        "mutation { createPracticeNumber(name: \"NHS number\") { data { id } } }",
    )
    .await;
    // A refused change is no event.
    change(
        &app,
        "mutation { createAccessGroup(name: \"g\", label: \"Again\") { error } }",
        json!({}),
    )
    .await;

    let ids = |product: Option<&str>,
               location: Option<&str>,
               group: Option<&str>,
               number: Option<&str>| {
        json!({ "patientId": null, "productId": product, "locationId": location, "accessGroupId": group, "practiceNumberId": number })
    };
    let seen = catalogue_events(&app, &app.admin_token, 7).await;
    let seen: Vec<(Value, Value)> = seen
        .into_iter()
        .map(|e| (e["eventType"].clone(), e["identifiers"].clone()))
        .collect();
    assert_eq!(
        seen,
        vec![
            (
                json!("product.created"),
                ids(Some(&product), None, None, None)
            ),
            (
                json!("product.updated"),
                ids(Some(&product), None, None, None)
            ),
            (
                json!("product.created"),
                ids(Some(&consultation), None, None, None)
            ),
            (
                json!("location.created"),
                ids(None, Some(&location), None, None)
            ),
            (
                json!("location.updated"),
                ids(None, Some(&location), None, None)
            ),
            (
                json!("accessGroup.created"),
                ids(None, None, Some(&group), None)
            ),
            (
                json!("practiceNumber.created"),
                ids(None, None, None, Some(&number))
            ),
        ]
    );
    // Each shown to who may read its resource: products and locations to bookings:read, the
    // record's definitions to patients:read.
    let patients_reader = app.token(&["patients:read"]).await;
    let types: Vec<Value> = catalogue_events(&app, &patients_reader, 2)
        .await
        .into_iter()
        .map(|e| e["eventType"].clone())
        .collect();
    assert_eq!(
        types,
        vec![
            json!("accessGroup.created"),
            json!("practiceNumber.created")
        ]
    );
    let bookings_reader = app.token(&["bookings:read"]).await;
    assert_eq!(catalogue_events(&app, &bookings_reader, 5).await.len(), 5);
}

/// A label deleted is taken off the products that had it, as off the patients: each is
/// updated (its `updatedAt`, a product.updated); a product without it is left alone.
#[rstest]
#[case::sqlite(Engine::Sqlite)]
#[case::postgres(Engine::Postgres)]
#[tokio::test]
async fn a_deleted_label_leaves_its_products_updated(#[case] engine: Engine) {
    let app = spawn!(engine);
    let gone = app.label("Orthopaedic").await;
    let kept = app.label("Kept").await;
    let brace = create_product(
        &app,
        json!({ "name": "Brace", "productType": "item", "labels": [gone, kept] }),
    )
    .await;
    let sling = create_product(
        &app,
        json!({ "name": "Sling", "productType": "item", "labels": [kept] }),
    )
    .await;
    assert_eq!(catalogue_events(&app, &app.admin_token, 2).await.len(), 2);
    change(
        &app,
        "mutation($id: ID!) { deleteLabel(id: $id) { error } }",
        json!({ "id": gone }),
    )
    .await;
    let seen = catalogue_events(&app, &app.admin_token, 3).await;
    let last: Vec<(Value, Value)> = seen
        .iter()
        .skip(2)
        .map(|e| {
            (
                e["eventType"].clone(),
                e["identifiers"]["productId"].clone(),
            )
        })
        .collect();
    assert_eq!(
        last,
        vec![(json!("product.updated"), json!(id_of(&brace)))],
        "{seen:?}"
    );
    let read = app
        .ok(
            "query($b: ID!, $s: ID!) { brace: product(id: $b) { labels { referenceId } updatedAt } sling: product(id: $s) { labels { referenceId } updatedAt } }",
            json!({ "b": id_of(&brace), "s": id_of(&sling) }),
        )
        .await;
    assert_eq!(read["brace"]["labels"], json!([{ "referenceId": kept }]));
    assert_ne!(
        read["brace"]["updatedAt"], brace["data"]["updatedAt"],
        "{read}"
    );
    assert_eq!(read["sling"]["updatedAt"], sling["data"]["updatedAt"]);
}

/// On PostgreSQL, a change to a product's labels takes the labels' rows before the
/// product's, as deleteLabel takes a label's and then its products': held up at a label
/// being deleted, it holds nothing of the product, so that the two wait for each other rather
/// than deadlock, and the delete sees the product's labels as they will be.
#[tokio::test]
async fn a_products_labels_are_taken_before_the_product() {
    let Some(app) = TestApp::spawn_with(Engine::Postgres, test_config()).await else {
        return;
    };
    let label = app.label("Held").await;
    let product = create_product(&app, json!({ "name": "Brace", "productType": "item" })).await;
    let product = id_of(&product);
    // Held as deleteLabel holds it.
    let mut label_row = hold_rows(
        &app.database_url,
        "SELECT id FROM labels WHERE id = $1 FOR UPDATE",
        &label,
    )
    .await;
    let updating = update_product(&app, &product, json!({ "labels": [label] }));
    let checking = async {
        waits_on_a_lock(&app.database_url).await;
        // The product's row is free: taken at once, not waited for.
        let mut product_row = hold_rows(
            &app.database_url,
            "SELECT id FROM products WHERE id = $1 FOR UPDATE NOWAIT",
            &product,
        )
        .await;
        for held in [&mut product_row, &mut label_row] {
            sqlx::query("ROLLBACK").execute(held).await.expect("let go");
        }
    };
    let (updated, ()) = tokio::join!(updating, checking);
    assert_eq!(
        updated["data"]["labels"][0]["referenceId"],
        json!(label),
        "{updated}"
    );
}

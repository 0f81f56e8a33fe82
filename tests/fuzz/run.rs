//! The run: the server seeded, the harness that sends each request and checks its answer,
//! the corpus of requests that found bugs, and the counts printed at the end.

use super::*;

pub(crate) static PANICS: AtomicUsize = AtomicUsize::new(0);
pub(crate) static PANIC_MESSAGES: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Counts every panic in the process (the server's tasks run in it), then reports it as usual.
pub(crate) fn count_panics() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        PANICS.fetch_add(1, Ordering::SeqCst);
        if let Ok(mut messages) = PANIC_MESSAGES.lock() {
            messages.push(info.to_string());
        }
        previous(info);
    }));
}

#[derive(Default)]
pub(crate) struct Stats {
    pub(crate) requests: usize,
    pub(crate) server_errors: usize,
    pub(crate) internal_errors: usize,
    pub(crate) failures: usize,
    pub(crate) unsendable: usize,
    /// Cases not sent because an earlier request kept the server busy.
    pub(crate) skipped: usize,
    /// Answers with `data`: the operation ran.
    pub(crate) ran: usize,
    /// ... and without errors.
    pub(crate) clean: usize,
    pub(crate) statuses: BTreeMap<u16, usize>,
    pub(crate) codes: BTreeMap<String, usize>,
    pub(crate) kinds: BTreeMap<&'static str, usize>,
    pub(crate) slowest: Duration,
    pub(crate) started: Option<Instant>,
}

impl Stats {
    pub(crate) fn summary(&self) -> String {
        let statuses: Vec<String> = self
            .statuses
            .iter()
            .map(|(s, n)| format!("{s}×{n}"))
            .collect();
        let codes: Vec<String> = self.codes.iter().map(|(c, n)| format!("{c}×{n}")).collect();
        let kinds: Vec<String> = self.kinds.iter().map(|(k, n)| format!("{k}×{n}")).collect();
        format!(
            "fuzz: {} cases, {} 5xx, {} internal errors, {} failed checks in {:.1} s \
             (slowest answer {} ms; {} requests the client could not send, {} not sent after the server was kept busy); {} ran, {} without errors; kinds: {}; statuses: {}; codes: {}",
            self.requests,
            self.server_errors,
            self.internal_errors,
            self.failures,
            self.started.map_or(0.0, |s| s.elapsed().as_secs_f64()),
            self.slowest.as_millis(),
            self.unsendable,
            self.skipped,
            self.ran,
            self.clean,
            kinds.join(" "),
            statuses.join(" "),
            codes.join(" "),
        )
    }
}

pub(crate) fn cases() -> u32 {
    match std::env::var("PRACTICE_FUZZ_CASES") {
        Ok(n) => n
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("PRACTICE_FUZZ_CASES must be a number, got {n:?}")),
        Err(_) => DEFAULT_CASES,
    }
}

/// What the run sets up before it starts.
pub(crate) struct Seeded {
    pub(crate) target_patient: String,
    pub(crate) sentinel_patient: String,
    /// Ids of the records seeded, then odd ids.
    pub(crate) real_ids: Vec<String>,
    pub(crate) odd_ids: Vec<String>,
    pub(crate) emails: Vec<String>,
    pub(crate) tokens: Tokens,
}

pub(crate) async fn seed(app: &TestApp) -> Seeded {
    let target_patient = app.patient("Ada", "Lovelace").await;
    // Never among the generated ids: whatever the run deletes, this one stays.
    let sentinel_patient = app.patient("Sentinel", "Zzyzx").await;
    let label = app.label("VIP").await;
    let doctor = app.doctor("Grace", "Hopper").await;
    let receptionist = app.user("receptionist", "rita@example.com").await;
    let setup = app
        .ok(
            "mutation { l: createLocation(name: \"Main\") { data { id } error } \
             t: createAppointmentType(title: \"Consultation\", duration: 15, price: 40.5) { data { id } error } }",
            json!({}),
        )
        .await;
    let location = setup["l"]["data"]["id"]
        .as_str()
        .expect("location")
        .to_string();
    let appointment = setup["t"]["data"]["id"].as_str().expect("type").to_string();
    let labelled = app
        .ok(
            "mutation($p: ID!, $l: ID!) { addPatientLabel(patientId: $p, labelReferenceId: $l) { data { labels { id } } error } }",
            json!({ "p": target_patient, "l": label }),
        )
        .await;
    let patient_label = labelled["addPatientLabel"]["data"]["labels"][0]["id"]
        .as_str()
        .expect("patient label")
        .to_string();
    let booked = app
        .ok(
            "mutation($d: BookingDataInput!) { createBooking(bookingData: $d) { data { id } error } }",
            json!({ "d": {
                "patient": target_patient, "doctor": doctor, "location": location,
                "bookingType": appointment, "start": "2031-01-06T08:00:00Z",
            }}),
        )
        .await;
    let booking = booked["createBooking"]["data"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("createBooking failed: {booked}"))
        .to_string();
    let tokens = Tokens {
        admin: app.admin_token.clone(),
        patients_read: app.token(&["patients:read"]).await,
        query_patient: app.token(&["query:patient"]).await,
        receptionist: app.sign_in(&receptionist, PASSWORD).await,
        other_practice: app.other_practice("Elsewhere").await.1,
    };
    let real_ids = vec![
        target_patient.clone(),
        target_patient.clone(),
        label.clone(),
        doctor.clone(),
        location,
        appointment,
        booking.clone(),
        booking,
        patient_label,
        app.practice_id.clone(),
    ];
    let mut odd_ids: Vec<String> = vec![
        String::new(),
        " ".into(),
        "0".into(),
        "-1".into(),
        "00000000-0000-0000-0000-000000000000".into(),
        uuid::Uuid::now_v7().to_string(),
        "' OR '1'='1".into(),
        "%".into(),
        "\\".into(),
        "😀".into(),
        "\u{202e}".into(),
        "a\u{0}b".into(),
        "null".into(),
        format!("{target_patient} "),
        target_patient.to_uppercase(),
        target_patient[..target_patient.len() / 2].to_string(),
    ];
    odd_ids.push("x".repeat(5000));
    let emails = vec![
        "grace.hopper@example.com".into(),
        receptionist,
        "GRACE.HOPPER@EXAMPLE.COM".into(),
        " grace.hopper@example.com ".into(),
        "nobody@example.com".into(),
        "not an email".into(),
        "a@b@c".into(),
        String::new(),
        format!("{}@example.com", "x".repeat(300)),
        "😀@example.com".into(),
    ];
    Seeded {
        target_patient,
        sentinel_patient,
        real_ids,
        odd_ids,
        emails,
        tokens,
    }
}

/// What became of one request.
pub(crate) enum Outcome {
    Passed,
    /// Not sent: an earlier request kept the server busy.
    Skipped,
    /// The client could not send it.
    Unsendable(String),
    Failed(String),
}

/// Sends requests and checks their answers, counting as it goes.
pub(crate) struct Harness<'a> {
    pub(crate) runtime: &'a tokio::runtime::Runtime,
    pub(crate) client: reqwest::Client,
    pub(crate) url: String,
    pub(crate) stats: RefCell<Stats>,
    /// Once the server has been kept busy for seconds, later answers say nothing about the
    /// requests that get them: the run stops sending (and so stops shrinking) there.
    pub(crate) busy: RefCell<bool>,
    pub(crate) verbose: bool,
}

impl Harness<'_> {
    pub(crate) fn run(&self, request: &FuzzRequest) -> Outcome {
        if *self.busy.borrow() {
            self.stats.borrow_mut().skipped += 1;
            return Outcome::Skipped;
        }
        if self.verbose {
            let asked = shown(format!("{request:?}").as_bytes(), 600);
            let _ = writeln!(std::io::stderr(), "---- {asked}");
        }
        let panics_before = PANICS.load(Ordering::SeqCst);
        let started = Instant::now();
        let answer = self
            .runtime
            .block_on(exchange(&self.client, &self.url, request));
        let took = started.elapsed();
        let mut stats = self.stats.borrow_mut();
        stats.requests += 1;
        stats.slowest = stats.slowest.max(took);
        *stats.kinds.entry(request.kind).or_default() += 1;
        let mut verdict = match &answer {
            Ok(answer) => {
                *stats.statuses.entry(answer.status).or_default() += 1;
                if answer.status >= 500 {
                    stats.server_errors += 1;
                }
                if String::from_utf8_lossy(&answer.body).contains("INTERNAL_SERVER_ERROR") {
                    stats.internal_errors += 1;
                }
                if let Ok(body) = serde_json::from_slice::<Value>(&answer.body)
                    && body.get("data").is_some_and(|d| !d.is_null())
                {
                    stats.ran += 1;
                    stats.clean += usize::from(body.get("errors").is_none());
                }
                check(request, answer)
            }
            Err(NoAnswer::Unsendable(why)) => {
                stats.unsendable += 1;
                return Outcome::Unsendable(why.clone());
            }
            Err(NoAnswer::Failed(why)) => Err(why.clone()),
            Err(NoAnswer::TimedOut(why)) => {
                *self.busy.borrow_mut() = true;
                Err(why.clone())
            }
        };
        if verdict.is_ok() && took > SLOW_ANSWER {
            *self.busy.borrow_mut() = true;
            verdict = Err(format!(
                "the answer took {} ms, more than {} s",
                took.as_millis(),
                SLOW_ANSWER.as_secs()
            ));
        }
        if self.verbose {
            let answered = match &answer {
                Ok(a) => format!("HTTP {}: {}", a.status, shown(&a.body, 300)),
                Err(
                    NoAnswer::Failed(why) | NoAnswer::Unsendable(why) | NoAnswer::TimedOut(why),
                ) => why.clone(),
            };
            let ms = took.as_millis();
            let _ = writeln!(std::io::stderr(), "=> ({ms} ms) {answered}");
        }
        if let Ok(codes) = &verdict {
            for code in codes {
                *stats.codes.entry(code.clone()).or_default() += 1;
            }
        }
        if PANICS.load(Ordering::SeqCst) != panics_before {
            let messages = PANIC_MESSAGES
                .lock()
                .map(|m| m.join("\n"))
                .unwrap_or_default();
            verdict = Err(format!("the server panicked: {messages}"));
        }
        match verdict {
            Ok(_) => Outcome::Passed,
            Err(why) => {
                stats.failures += 1;
                Outcome::Failed(format!("{why} (after {} ms)", took.as_millis()))
            }
        }
    }
}

/// Requests that found bugs, or sit on a limit: sent first, every run, whatever the seed.
pub(crate) fn corpus(tokens: &Tokens) -> Vec<(&'static str, FuzzRequest)> {
    let post = |body: Vec<u8>| FuzzRequest {
        kind: "corpus",
        get: false,
        query_string: String::new(),
        token: (
            "<admin: every permission>",
            Some(tokens.admin.as_bytes().to_vec()),
        ),
        accept: None,
        content_type: Some("application/json"),
        body,
    };
    let document = |doc: String| post(serde_json::to_vec(&json!({ "query": doc })).expect("json"));
    let mut fan_out = "{ currentPractice { ...P0 } }".to_string();
    for i in 0..24 {
        fan_out += &format!(
            " fragment P{i} on Practice {{ id ...P{} ...P{} }}",
            i + 1,
            i + 1
        );
    }
    fan_out += " fragment P24 on Practice { name }";
    let body_of = |size: usize| {
        let head = br#"{"query":"{ currentPractice { id } }","padding":""#;
        let mut body = head.to_vec();
        body.resize(size - 2, b'x');
        body.extend_from_slice(b"\"}");
        body
    };
    let max_body = helpers::test_config().max_body_bytes;
    vec![
        (
            "fragments that each spread the next twice, 24 deep",
            document(fan_out),
        ),
        ("a body of exactly the size limit", post(body_of(max_body))),
        (
            "a body one byte over the size limit",
            post(body_of(max_body + 1)),
        ),
        (
            "a variable type nested 400 lists deep",
            document(format!(
                "query($v: {}Int{}) {{ __typename }}",
                "[".repeat(400),
                "]".repeat(400)
            )),
        ),
        (
            "an argument nested 400 lists deep",
            document(format!(
                "{{ patient(id: {}\"x\"{}) {{ id }} }}",
                "[".repeat(400),
                "]".repeat(400)
            )),
        ),
        (
            "an input object nested 400 deep",
            document(format!(
                "{{ patients(options: {}true{}) {{ pageInfo {{ page }} }} }}",
                "{includeDeleted: ".repeat(400),
                "}".repeat(400)
            )),
        ),
    ]
}

"""Writes the request plans of bench/run: one file a scenario, one JSON body a line, read from
the seeded database through the API itself (so the benchmark holds no SQL of its own).

    python3 bench/plan.py URL TOKEN OUT_DIR THREADS STAFF_PASSWORD [PRACTICE]

Thread t of THREADS sends lines t, t+THREADS, ... (see load.lua). A line WRITE stands for the
next label write of the scenario's .writes file: the bodies that add and remove the label,
then the patients to write to.

With PRACTICE (the token's practice; bench/run --peer), also the plans of the peer's lookup
(peer_patient: PostGraphile's, by the table's key), of the API's with the same selection
(patient_narrow) and of the bare handler's (baseline_patient_narrow).
"""

import datetime
import json
import random
import sys
import urllib.request

URL, TOKEN, OUT, THREADS = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
# The demo staff's password, which `practice-api demo` makes at random and prints once.
STAFF_PASSWORD = sys.argv[5]
# The practice of the token, which the peer (over the bare tables) must be told.
PRACTICE = sys.argv[6] if len(sys.argv) > 6 else None
random.seed(20261122)


def gql(query, variables=None, token=TOKEN):
    body = json.dumps({"query": query, "variables": variables or {}}).encode()
    request = urllib.request.Request(
        URL, body, {"Content-Type": "application/json", "x-token": token}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        answer = json.load(response)
    if answer.get("errors"):
        sys.exit(f"plan: {answer['errors']}")
    return answer["data"]


def body(query, variables):
    return json.dumps({"query": query, "variables": variables}, separators=(",", ":"))


def write(name, lines):
    with open(f"{OUT}/{name}.plan", "w") as f:
        f.write("\n".join(lines) + "\n")


# Patients: ids, emails, whether they have labels: the first 4,000 of the list.
patients = []
page = 1
while len(patients) < 4000:
    found = gql(
        "query($p: Int) { patients(pagination: {page: $p, pageSize: 100}) "
        "{ data { id email labels { id } } pageInfo { hasMore } } }",
        {"p": page},
    )["patients"]
    patients += found["data"]
    if not found["pageInfo"]["hasMore"]:
        break
    page += 1
last_page = page
unlabelled = [p for p in patients if not p["labels"]]
random.shuffle(patients)
label = gql("{ labels { data { id } } }")["labels"]["data"][0]["id"]
staff = gql("{ users(pagination: {pageSize: 100}) { data { email } } }")["users"]["data"]

PATIENT = "query($id: ID!) { patient(id: $id) { firstName email labels { text } } }"
SEARCH = (
    "query($s: String) { patients(search: $s, pagination: {pageSize: 25}) "
    "{ data { id firstName lastName } } }"
)
PAGE = (
    "query($p: Int) { patients(pagination: {page: $p, pageSize: 100}) "
    "{ data { id firstName lastName labels { text color } } } }"
)
BOOKINGS = (
    "query($r: DateRange, $p: Int) { bookings(dateRange: $r, pagination: {page: $p, pageSize: 100}) "
    "{ data { id start end patient { firstName lastName } doctor { fullName } location { name } } } }"
)
ADD = (
    "mutation($p: ID!, $l: ID!) { addPatientLabel(patientId: $p, labelReferenceId: $l) "
    "{ data { id } error } }"
)
REMOVE = (
    "mutation($p: ID!, $l: ID!) { removePatientLabel(patientId: $p, labelId: $l) "
    "{ data { id } error } }"
)
SIGN_IN = "mutation($e: String!, $p: String!) { signIn(email: $e, password: $p) { token error } }"

sample = patients[:1000]
reads = {
    "patient": [body(PATIENT, {"id": p["id"]}) for p in sample],
    # A search that picks out one patient: its cost should grow with the index, not the data.
    "search": [body(SEARCH, {"s": p["email"].split("@")[0]}) for p in sample],
    "patients_page": [body(PAGE, {"p": random.randint(1, last_page)}) for _ in range(200)],
}
today = datetime.date.today()
span = {
    "start": f"{today - datetime.timedelta(days=14)}T00:00:00Z",
    "end": f"{today + datetime.timedelta(days=14)}T23:59:59Z",
}
booking_pages = 1
while gql(
    "query($r: DateRange, $p: Int) { bookings(dateRange: $r, pagination: {page: $p, pageSize: 100}) "
    "{ pageInfo { hasMore } } }",
    {"r": span, "p": booking_pages},
)["bookings"]["pageInfo"]["hasMore"]:
    booking_pages += 1
reads["bookings"] = [body(BOOKINGS, {"r": span, "p": p}) for p in range(1, booking_pages + 1)]
reads["sign_in"] = [
    body(SIGN_IN, {"e": s["email"], "p": STAFF_PASSWORD})
    for s in staff
    if "@demo-" in s["email"]
]
for name, lines in reads.items():
    write(name, lines)
# The baselines' plans: the same lookups, searches and pages, as the bare handlers take them.
write("baseline_patient", [json.dumps({"id": p["id"]}) for p in sample])
write("baseline_search", [json.dumps({"search": p["email"].split("@")[0]}) for p in sample])
if PRACTICE:
    # The same lookups with the same selection, through the API and through PostGraphile 4
    # (which names the lookup by the primary key, (practice_id, id), of the table patients).
    NARROW = "query($id: ID!) { patient(id: $id) { id firstName email } }"
    PEER = (
        "query($p: String!, $id: String!) { patientByPracticeIdAndId(practiceId: $p, id: $id) "
        "{ id firstName email } }"
    )
    write("patient_narrow", [body(NARROW, {"id": p["id"]}) for p in sample])
    write("peer_patient", [body(PEER, {"p": PRACTICE, "id": p["id"]}) for p in sample])
    write("baseline_patient_narrow", [json.dumps({"id": p["id"], "narrow": True}) for p in sample])
write("baseline_patients_page", [
    json.dumps({"page": json.loads(line)["variables"]["p"]}) for line in reads["patients_page"]
])


def millis(text):
    return int(datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


write("baseline_bookings", [
    json.dumps({"page": p, "start": millis(span["start"]), "end": millis(span["end"])})
    for p in range(1, booking_pages + 1)
])

# Writes: patients without the label, a third each for the API's writes, the baseline's and
# the mix's (see load.lua for how each thread takes its own and keeps every write valid).
third = len(unlabelled) // 3
groups = [unlabelled[i * third:(i + 1) * third] for i in range(3)]
if third < 16 * THREADS:
    sys.exit(f"plan: {len(unlabelled)} patients without labels are too few for the writes")


def writes(name, add, remove, group):
    with open(f"{OUT}/{name}.writes", "w") as f:
        f.write("\n".join([add, remove] + [p["id"] for p in group]) + "\n")


PATIENT_ID = "@PATIENT@"
graphql_add = body(ADD, {"p": PATIENT_ID, "l": label})
graphql_remove = body(REMOVE, {"p": PATIENT_ID, "l": label})
writes("writes", graphql_add, graphql_remove, groups[0])
writes(
    "baseline_writes",
    json.dumps({"add": True, "patientId": PATIENT_ID, "labelId": label}),
    json.dumps({"add": False, "patientId": PATIENT_ID, "labelId": label}),
    groups[1],
)
writes("mix", graphql_add, graphql_remove, groups[2])
write("writes", ["WRITE"] * THREADS)
write("baseline_writes", ["WRITE"] * THREADS)

# The mix: mostly reads, a fifth writes, a few sign-ins.
slots = ["patient"] * 40 + ["search"] * 15 + ["patients_page"] * 10 + ["bookings"] * 12
slots += ["sign_in"] * 1
mix = []
for _ in range(1000):
    mix.append("WRITE")
    for _ in range(4):
        mix.append(random.choice(reads[random.choice(slots)]))
write("mix", mix)
print(f"plan: {len(patients)} patients sampled, {len(unlabelled)} without labels, "
      f"{booking_pages} pages of bookings, {len(reads['sign_in'])} staff to sign in")

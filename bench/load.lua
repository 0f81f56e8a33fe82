-- The wrk script of bench/run. Sends the JSON bodies of the plan file $PLAN (one a line;
-- thread t of $THREADS takes lines t, t+$THREADS, ..., in order, round and round) with
-- $TOKEN in x-token, and counts as an error every response that is not a 200 with "data"
-- and no "errors" (and, for a mutation, no envelope "error").
--
-- A plan line "WRITE" stands for the next label write, made from the file $WRITES: its first
-- two lines are the bodies that add and remove a label, with @PATIENT@ where the patient's
-- id goes; the other lines are patients without that label, of which thread t takes lines t,
-- t+$THREADS, ... A patient's label is taken off only once the response says it was put on,
-- and put on again only once it was taken off, so that every write is one the server must
-- accept, whatever order the connections' responses come back in.

local threads = {}
local next_id = 0

function setup(thread)
  thread:set("id", next_id)
  next_id = next_id + 1
  table.insert(threads, thread)
end

local function mine(path, total, skip)
  local lines = {}
  local line = 0
  for text in io.lines(path) do
    if line >= skip and (line - skip) % total == id then
      table.insert(lines, text)
    end
    line = line + 1
  end
  return lines
end

function init(args)
  local total = tonumber(os.getenv("THREADS"))
  local token = os.getenv("TOKEN")
  headers = { ["Content-Type"] = "application/json" }
  if token ~= nil and token ~= "" then
    headers["x-token"] = token
  end
  requests = {}
  for _, body in ipairs(mine(os.getenv("PLAN"), total, 0)) do
    if body == "WRITE" then
      table.insert(requests, false)
    else
      table.insert(requests, wrk.format("POST", nil, headers, body))
    end
  end
  local writes = os.getenv("WRITES")
  if writes ~= nil and writes ~= "" then
    local templates = {}
    for text in io.lines(writes) do
      table.insert(templates, text)
      if #templates == 2 then break end
    end
    add_body, remove_body = templates[1], templates[2]
    patients = mine(writes, total, 2)
  end
  -- Per patient: nil (free), "adding", "labelled" or "removing".
  state = {}
  -- Patients whose label is on, in the order it went on: the next to take it off.
  labelled = {}
  next_patient = 0
  sent = 0
  errors = 0
  shown = 0
end

local function write()
  local patient = table.remove(labelled, 1)
  if patient ~= nil then
    state[patient] = "removing"
    return wrk.format("POST", nil, headers, (remove_body:gsub("@PATIENT@", patient)))
  end
  for _ = 1, #patients do
    next_patient = next_patient % #patients + 1
    patient = patients[next_patient]
    if state[patient] == nil then
      state[patient] = "adding"
      return wrk.format("POST", nil, headers, (add_body:gsub("@PATIENT@", patient)))
    end
  end
  error("every patient of this thread has a write in flight: give the plan more patients")
end

function request()
  sent = sent + 1
  if sent > #requests then
    sent = 1
  end
  return requests[sent] or write()
end

function response(status, headers, body)
  local failed = status ~= 200
    or not body:find('"data"', 1, true)
    or body:find('"errors"', 1, true)
    or body:find('"error":"', 1, true)
  if failed then
    errors = errors + 1
    if shown < 2 then
      shown = shown + 1
      io.stderr:write("error response (" .. status .. "): " .. body:sub(1, 300) .. "\n")
    end
    return
  end
  -- A write's response (the API's or the baseline's) names its patient: move it on.
  local patient = body:match('^{"data":{"%a+PatientLabel":{"data":{"id":"([^"]+)"')
    or body:match('^{"data":{"id":"([^"]+)"},"error"')
  if patient ~= nil and state[patient] == "adding" then
    state[patient] = "labelled"
    table.insert(labelled, patient)
  elseif patient ~= nil and state[patient] == "removing" then
    state[patient] = nil
  end
end

function done(summary, latency, requests)
  local failed = summary.errors.connect + summary.errors.read + summary.errors.write
    + summary.errors.timeout
  for _, thread in ipairs(threads) do
    failed = failed + thread:get("errors")
  end
  local seconds = summary.duration / 1e6
  io.write(string.format(
    "RESULT requests=%d rps=%.1f p50_ms=%.2f p99_ms=%.2f errors=%d\n",
    summary.requests, summary.requests / seconds,
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, failed))
end

"""Schemathesis hooks for scripts/schemathesis.

Two jobs:

* Fresh targets for the operations that use something up or need a state
  of their own: a delete, leave, block, accept, decline or withdraw gets a
  resource made for that one request (so the shared fixtures the other
  operations read stay alive whatever order the phases run in), a job
  route gets a job whose lease it holds (or a dead letter, for retry and
  for reading one job), and
  a body that names a contact, room or lease gets real ones. Only the
  values the script configured are replaced: anything else Schemathesis
  generates (random ids, broken bodies, bad queries) is sent as generated.
* A record of every answer: one `METHOD PATH STATUS` line per response in
  $RELAYGER_ST_STATUS_LOG, which the script checks for a 2xx on every
  operation.

Fixtures are made over plain HTTP (urllib) with the tokens the script
created; their own requests are not recorded.
"""

import base64
import itertools
import json
import os
import urllib.error
import urllib.request

import schemathesis

BASE = os.environ["RELAYGER_ST_BASE"]
AGENT_TOKEN = os.environ["RELAYGER_ST_AGENT_TOKEN"]
PERSON_TOKEN = os.environ["RELAYGER_ST_PERSON_TOKEN"]
RUNTIME = os.environ["RELAYGER_ST_RUNTIME"]
# A runtime only these hooks claim on (and never configure), so a policy
# the fuzzer set on RUNTIME cannot stop a fixture claim.
LEASE_RUNTIME = os.environ["RELAYGER_ST_LEASE_RUNTIME"]
ROOM = os.environ["RELAYGER_ST_ROOM"]
JOB = os.environ["RELAYGER_ST_JOB"]
NOTE_KEY = os.environ["RELAYGER_ST_NOTE_KEY"]
MESSAGE = os.environ["RELAYGER_ST_MESSAGE"]
PERSON_NUMBER = os.environ["RELAYGER_ST_PERSON_NUMBER"]
STATUS_LOG = os.environ["RELAYGER_ST_STATUS_LOG"]
PUBLIC_KEY = base64.b64encode(bytes(range(32))).decode()

_names = itertools.count()


class FixtureError(RuntimeError):
    pass


def call(method, path, token=None, body=None):
    """The JSON answer of a fixture request; any non-2xx is an error."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(BASE + path, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            text = response.read()
    except urllib.error.HTTPError as error:
        raise FixtureError(f"{method} {path}: {error.code} {error.read()!r}") from error
    return json.loads(text) if text else None


def person():
    """A fresh person: (token, number)."""
    made = call(
        "POST",
        "/v1/register",
        body={"name": f"p{next(_names)}", "kind": "person", "publicKey": PUBLIC_KEY},
    )
    return made["token"]["secret"], made["identity"]["number"]


def requester():
    """A fresh person who has asked the agent for contact: their number."""
    token, number = person()
    agent = call("GET", "/v1/me", AGENT_TOKEN)["number"]
    call("POST", "/v1/contacts/requests", token, {"number": agent})
    return number


def contact():
    """A fresh person in contact with the agent: their number."""
    number = requester()
    call("POST", f"/v1/contacts/requests/{number}/accept", AGENT_TOKEN, {})
    return number


def requested():
    """A fresh person the agent has asked for contact: their number."""
    _, number = person()
    call("POST", "/v1/contacts/requests", AGENT_TOKEN, {"number": number})
    return number


def blocked():
    """A fresh contact the agent has blocked: their number."""
    number = contact()
    call("POST", f"/v1/contacts/{number}/block", AGENT_TOKEN, {})
    return number


def leased_job(runtime=LEASE_RUNTIME):
    """A job of `runtime` the agent holds the lease of: the claimed job."""
    call("POST", "/v1/messages", PERSON_TOKEN, {"roomId": ROOM, "text": "again?", "ask": True})
    claim = call("POST", f"/v1/runtimes/{runtime}/claim", AGENT_TOKEN, {"maxJobs": 1})
    if not claim["jobs"]:
        raise FixtureError(f"no job to claim on {runtime}: {claim}")
    return claim["jobs"][0]


# Leases the hooks took for one request, by job id: given back after it
# (unless it finished the job), so they never fill the runtime's
# concurrency.
_held = {}


def new_runtime(policy):
    """A new runtime of the agent. At the agent's runtime limit, first
    deletes every runtime but the script's (the fuzzer's, and earlier
    fresh ones)."""
    body = {"name": f"rt-{next(_names)}", "from": "now", "policy": policy}
    try:
        return call("POST", "/v1/runtimes", AGENT_TOKEN, body)["id"]
    except FixtureError as error:
        if "runtime_limit" not in str(error):
            raise
    for runtime in call("GET", "/v1/runtimes", AGENT_TOKEN)["runtimes"]:
        if runtime["id"] not in (RUNTIME, LEASE_RUNTIME, _dead_runtime.get("id")):
            call("DELETE", f"/v1/runtimes/{runtime['id']}", AGENT_TOKEN)
    return call("POST", "/v1/runtimes", AGENT_TOKEN, body)["id"]


# The runtime whose jobs die at their first failure (made on first use).
_dead_runtime = {}


def dead_letter():
    """(runtime, job) of a fresh dead letter."""
    if "id" not in _dead_runtime:
        _dead_runtime["id"] = new_runtime({"maxAttempts": 1, "maxCallsPerHour": 100000})
    runtime = _dead_runtime["id"]
    job = leased_job(runtime)
    call(
        "POST",
        f"/v1/runtimes/{runtime}/jobs/{job['jobId']}/finish",
        AGENT_TOKEN,
        {"owner": job["owner"], "version": job["version"], "result": {"error": "fixture"}},
    )
    return runtime, job["jobId"]


# One dead letter the job reads open (made on first use): it has a question,
# an attempt with an error and a state, and reading it changes nothing.
_read_job = {}


def job_to_read():
    """(runtime, job) of a job that exists, for GET …/jobs/{job}."""
    if "job" not in _read_job:
        _read_job["job"] = dead_letter()
    return _read_job["job"]


def fresh_runtime():
    return new_runtime({})


def fresh_room():
    return call("POST", "/v1/rooms", AGENT_TOKEN, {"name": f"room-{next(_names)}", "members": []})["id"]


def fresh_token():
    return call("POST", "/v1/tokens", AGENT_TOKEN, {"scopes": ["read"]})["id"]


def agent_number():
    """The agent's own number: an A2A agent its token may ask (it has no
    tasks with itself, so listing them answers 200)."""
    if not _agent_number:
        _agent_number.append(call("GET", "/v1/me", AGENT_TOKEN)["number"])
    return _agent_number[0]


_agent_number = []


# Path parameters to replace, by operation: parameter -> what makes a
# fresh value (when the generated value is the configured fixture).
FRESH_PATH = {
    # The fixture number is a person's; A2A serves agents only.
    ("GET", "/a2a/{number}/.well-known/agent-card.json"): {"number": agent_number},
    ("POST", "/a2a/{number}"): {"number": agent_number},
    ("DELETE", "/v1/runtimes/{id}"): {"id": fresh_runtime},
    # A runtime of its own: the fuzzer's claims on the shared one hold
    # leases, and configure is refused (409 runtime_busy) while one is.
    ("POST", "/v1/runtimes/{id}/configure"): {"id": fresh_runtime},
    ("DELETE", "/v1/tokens/{id}"): {"id": fresh_token},
    ("POST", "/v1/rooms/{room}/leave"): {"room": fresh_room},
    # A direct room has its two members: add to a group room.
    ("POST", "/v1/rooms/{room}/members"): {"room": fresh_room},
    # A note key of its own, so its version (0: new) can be right.
    ("PUT", "/v1/runtimes/{id}/notes/{room}/{key}"): {"key": lambda: f"note-{next(_names)}"},
    ("DELETE", "/v1/contacts/{number}"): {"number": contact},
    ("POST", "/v1/contacts/{number}/block"): {"number": contact},
    ("DELETE", "/v1/contacts/{number}/block"): {"number": blocked},
    ("POST", "/v1/contacts/requests/{number}/accept"): {"number": requester},
    ("POST", "/v1/contacts/requests/{number}/decline"): {"number": requester},
    ("DELETE", "/v1/contacts/requests/{number}"): {"number": requested},
}
FIXTURES = {"id": RUNTIME, "room": ROOM, "number": PERSON_NUMBER, "job": JOB, "key": NOTE_KEY}
LEASE_ROUTES = {
    "/v1/runtimes/{id}/jobs/{job}/heartbeat",
    "/v1/runtimes/{id}/jobs/{job}/finish",
    "/v1/runtimes/{id}/jobs/{job}/release",
}
# Bodies whose `number` must be someone new to the agent (a contact
# request) or a contact of it (a room member).
FRESH_NUMBER_BODY = {
    ("POST", "/v1/contacts/requests"): lambda: person()[1],
    ("POST", "/v1/rooms/{room}/members"): contact,
}


def is_fixture(case, name):
    return case.path_parameters is not None and case.path_parameters.get(name) == FIXTURES[name]


# How many message bodies without content the run has generated.
_contentless = [0]


@schemathesis.hook
def before_call(context, case, kwargs):
    method, path = case.operation.method.upper(), case.operation.path
    params = case.path_parameters
    for name, make in FRESH_PATH.get((method, path), {}).items():
        if is_fixture(case, name):
            params[name] = make()
    body = case.body if isinstance(case.body, dict) else None
    if path in LEASE_ROUTES and is_fixture(case, "job") and is_fixture(case, "id"):
        job = leased_job()
        params["id"], params["job"] = LEASE_RUNTIME, job["jobId"]
        _held[job["jobId"]] = job
        if body is not None:
            for field in ("owner", "version"):
                if field in body:
                    body[field] = job[field]
    if path == "/v1/runtimes/{id}/jobs/{job}/retry" and is_fixture(case, "job") and is_fixture(case, "id"):
        params["id"], params["job"] = dead_letter()
    if (method, path) == ("GET", "/v1/runtimes/{id}/jobs/{job}") and is_fixture(case, "job") and is_fixture(case, "id"):
        params["id"], params["job"] = job_to_read()
    if (method, path) == ("POST", "/v1/messages") and body is not None and "roomId" in body:
        # To the shared room, as a plain message (a generated `to`,
        # `replyTo` or `deadline` would name nothing real or be past).
        body["roomId"] = ROOM
        for field in ("to", "replyTo", "deadline", "messageId"):
            body.pop(field, None)
        # The generator mostly sends neither text nor sealed content (a 400):
        # every other such body gets a text, so the route is also seen
        # succeeding, whatever the examples drawn for this run.
        if body.get("text") is None and body.get("sealed") is None:
            _contentless[0] += 1
            if _contentless[0] % 2 == 1:
                body["text"] = "fuzzed"
    if path == "/v1/runtimes/{id}/configure" and params is not None and body is not None:
        if "version" in body and params.get("id") != FIXTURES["id"]:
            # The version the (fresh) runtime is at, so a valid policy is taken.
            runtime = params["id"]
            try:
                body["version"] = call("GET", f"/v1/runtimes/{runtime}", AGENT_TOKEN)["version"]
            except FixtureError:
                pass  # a generated id of no runtime: sent as generated
    if path == "/v1/runtimes/{id}/notes/{room}/{key}" and body is not None:
        if "version" in body:
            body["version"] = 0
        if isinstance(body.get("sourceMessageIds"), list):
            body["sourceMessageIds"] = [MESSAGE]
    make_number = FRESH_NUMBER_BODY.get((method, path))
    if make_number and body is not None and "number" in body:
        body["number"] = make_number()


@schemathesis.hook
def after_call(context, case, response):
    job = _held.pop((case.path_parameters or {}).get("job"), None)
    if job is not None:
        lease = {"owner": job["owner"], "version": job["version"]}
        try:
            call("POST", f"/v1/runtimes/{LEASE_RUNTIME}/jobs/{job['jobId']}/release", AGENT_TOKEN, lease)
        except FixtureError:
            pass  # finished or released by the request itself
    with open(STATUS_LOG, "a", encoding="utf-8") as log:
        log.write(f"{case.operation.method.upper()} {case.operation.path} {response.status_code}\n")

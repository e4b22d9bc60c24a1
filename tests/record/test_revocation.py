"""A token dies everywhere within the refresh interval (docs/record.md#revoking-a-token),
against real sandboxes of two workers each — a homework one and a graded session on the
same record — with SQLite and with PostgreSQL: a token revoked or forgotten by the
instructor's command is refused (401 token_revoked) by every route that takes a token,
compute routes included, on every worker; the mystery routes take the signed-in student;
a graded session locks its room on every worker, whatever the path's spelling; and with
PostgreSQL stopped mid-run a graded session refuses students (503 record_unavailable)
while homework goes on with the last set read, saying so in one log line per worker.

The refresh interval is short here (`REFRESH`); every wait for a refusal is
`waiting.wait_until` (no timing is asserted). Each round sends its requests on fresh
connections, which the kernel spreads over both workers."""

from __future__ import annotations

import contextlib
import http.client
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from postgres_server import running_postgres
from record_course import answers, environment, keyring
from sandbox_server import running_sandbox
from waiting import wait_until

from glassllm.course.zoo import mystery as M

pytestmark = pytest.mark.slow
WORKERS = 2
REFRESH = "0.3"                 # GLASSLLM_REVOCATION_REFRESH_S of these sandboxes
ROUND = 4                       # requests per route and round, each on a new connection
EX = "/api/v1/exercises/ce-record"
CASE = {"expression": "(x * x).sum()", "variables": {"x": [1.0, 2.0]}}
MYSTERY = "/api/v1/mysteries/mystery-mlp"


@dataclass
class Course:
    env: dict
    root: Path
    homework: str
    graded: str
    tokens: dict
    backend: str
    logs: dict
    stop_database: Callable[[], None]


def command() -> list[str]:
    return [sys.executable, "-m", "glassllm_service.sandbox_cli", "--workers", str(WORKERS)]


def cli(env: dict, *args: str) -> str:
    """The instructor's command (glassllm-sandbox ARGS) where the course's settings are."""
    done = subprocess.run([sys.executable, "-m", "glassllm_service.sandbox_cli", *args],
                          env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def roster(env: dict, root: Path, students: list[str]) -> dict[str, str]:
    """The students enrolled by the instructor's ``roster`` command: id → token."""
    (root / "roster.csv").write_text("student_id,display_name\n" + "".join(
        f"{s},{s.title()}\n" for s in students), encoding="utf-8")
    rows = cli(env, "roster", str(root / "roster.csv")).splitlines()[1:]
    return {row.split(",")[0]: row.split(",")[3] for row in rows}


def instructor(name: str) -> str:
    """An instructor's token as ``token --instructor`` issues it (never revoked: gen 0)."""
    return keyring().issue(name, "instructor", days=1)


def sandboxes(stack: contextlib.ExitStack, env: dict, **stderr) -> tuple[str, str]:
    """A homework sandbox and a graded session on the same record, both stopped with
    `stack`. `stderr`: where each one's log goes (by kind)."""
    homework = stack.enter_context(running_sandbox(env=env, command=command(),
                                                   stderr=stderr.get("homework")))
    graded = stack.enter_context(running_sandbox(
        env={**env, "GLASSLLM_GRADED_SESSION": "1"}, command=command(),
        stderr=stderr.get("graded")))
    return homework, graded


STUDENTS = ["rev", "fog", "cy", "lock", "ada", "bob"]


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def course(request, tmp_path_factory):
    """Both sandboxes on one record of the backend; their logs in files (`Course.logs`).
    PostgreSQL may be stopped by the module's last test (`Course.stop_database`)."""
    root = tmp_path_factory.mktemp(f"revocation-{request.param}")
    with contextlib.ExitStack() as stack:
        database = contextlib.ExitStack()
        stack.callback(database.close)                 # stopped last, or by a test
        env = environment(root, GLASSLLM_REVOCATION_REFRESH_S=REFRESH, GLASSLLM_ACCESS_LOG="0")
        if request.param == "postgresql":
            env["GLASSLLM_DATABASE_URL"] = database.enter_context(running_postgres())
        tokens = roster(env, root, STUDENTS)          # the record made and migrated first
        # appended to by the workers, read back by path (no file offset shared with them)
        logs = {kind: root / f"{kind}.log" for kind in ("homework", "graded")}
        files = {kind: stack.enter_context(open(path, "ab")) for kind, path in logs.items()}
        homework, graded = sandboxes(stack, env, **files)
        yield Course(env, root, homework, graded, tokens, request.param, logs, database.close)


def bearer(tok: str) -> dict:
    return {"Authorization": f"Bearer {tok}"}


def mystery_case(url: str) -> dict:
    view = httpx.get(url + MYSTERY, timeout=60).json()
    return {"expression": view["expression"], "variables": view["variables"]}


def compute_routes(c: Course, student: str) -> list[tuple[str, str, object, int]]:
    """(method, path, body, status with a good token) of every route that computes: a
    bad body where the work is long (train), refused after access."""
    return [("POST", "/api/v1/ops/neg", {"inputs": {"a": [1.0]}}, 200),
            ("POST", "/api/v1/eval", CASE, 200),
            ("POST", "/api/v1/eval", {**CASE, "check": True}, 200),
            ("POST", "/api/v1/check", {"op": "neg", "inputs": {"a": [1.0]},
                                       "claimed": {"value": [-1.0]}}, 200),
            ("POST", "/api/v1/batch", {"cases": [CASE]}, 200),
            ("POST", "/api/v1/torch", CASE, 200),
            ("POST", f"{MYSTERY}/eval", mystery_case(c.homework), 200),
            ("POST", f"{MYSTERY}/proof", {"node": 1}, 200),
            ("POST", "/api/v1/train", {"steps": 0}, 422),
            ("POST", "/api/v1/model/attention", {"prompt": "ab", "seed": 0}, 200)]


def personal_routes(c: Course, student: str, key: str) -> list[tuple[str, str, object, int]]:
    """The routes of a student's own record; `key`: the submission's idempotency key (one
    attempt however often it is sent; one per sandbox, whose feedback differs)."""
    return [("GET", EX, None, 200), ("POST", f"{EX}/hints", {"number": 1}, 200),
            ("POST", f"{EX}/submit", {"answers": answers(c.root, student),
                                      "idempotency_key": key}, 200),
            ("GET", "/api/v1/record/attempts", None, 200)]


def statuses(url: str, routes, tok: str) -> list[tuple[str, int, str | None]]:
    """(path, status, error code) of each route, `ROUND` times, each on a new connection."""
    out = []
    for method, path, body, _ in routes:
        for _ in range(ROUND):
            r = httpx.request(method, url + path, json=body, headers=bearer(tok), timeout=60)
            code = r.json().get("error", {}).get("code") if r.headers.get(
                "content-type", "").startswith("application/json") and r.status_code >= 400 \
                else None
            out.append((path, r.status_code, code))
    return out


def all_refused(url: str, routes, tok: str) -> bool:
    return all((s, code) == (401, "token_revoked") for _, s, code in statuses(url, routes, tok))


def test_a_revoked_token_dies_on_every_route_of_every_worker(course):
    student = "rev"
    old = course.tokens[student]
    compute = compute_routes(course, student)
    personal = personal_routes(course, student, "homework")
    graded = personal_routes(course, student, "graded")
    for url, routes in ((course.homework, compute + personal), (course.graded, graded)):
        got = statuses(url, routes, old)                      # both workers read the set
        assert [s for _, s, _ in got] == [want for *_, want in routes for _ in range(ROUND)]
    new = cli(course.env, "revoke", student).splitlines()[1].split(",")[3]
    wait_until(lambda: all_refused(course.homework, compute[1:2], old),
               what="eval to refuse the revoked token")
    wait_until(lambda: all_refused(course.homework, compute + personal, old),
               what="every route of the homework sandbox to refuse the revoked token")
    wait_until(lambda: all_refused(course.graded, graded, old),
               what="the graded session to refuse the revoked token")
    who = httpx.get(course.graded + "/api/v1/session", headers=bearer(old)).json()
    assert who["signed_in"] is False and who["problem"]["code"] == "token_revoked"
    assert httpx.post(course.homework + "/api/v1/eval", json=CASE, headers=bearer(new)
                      ).json()["grads"]["x"] == [2.0, 4.0]
    assert httpx.get(course.graded + EX, headers=bearer(new)).json()["student"] == student


def test_a_forgotten_students_token_dies_everywhere(course):
    student = "fog"
    tok = course.tokens[student]
    eval_route = [("POST", "/api/v1/eval", CASE, 200)]
    assert all(s == 200 for _, s, _ in statuses(course.homework, eval_route, tok))
    assert httpx.get(course.graded + EX, headers=bearer(tok)).status_code == 200
    cli(course.env, "forget", student)
    wait_until(lambda: all_refused(course.homework, eval_route, tok),
               what="the forgotten student's token to be refused by eval")
    wait_until(lambda: all_refused(course.graded, [("GET", EX, None, 200)], tok),
               what="the graded session to refuse the forgotten student's token")


def test_a_revoked_instructor_loses_the_rooms_key(course):
    prof = "prof-revoked"
    tok = instructor(prof)
    ops = [("GET", "/api/v1/ops/rms_norm", None, 200)]
    assert all(s == 200 for _, s, _ in statuses(course.graded, ops, tok))
    cli(course.env, "revoke", prof, "--instructor")

    def locked() -> bool:
        got = statuses(course.graded, ops, tok)
        return all((s, code) == (403, "off_in_graded_session") for _, s, code in got)
    wait_until(locked, what="the revoked instructor's token to reach only what students do")


def test_the_mystery_routes_take_the_signed_in_student(course):
    student = "cy"                              # bug: ce-missing-mean; ada's is another
    tok = course.tokens[student]
    case = mystery_case(course.homework)
    m = {x.id: x for x in M.load_dir()}["mystery-mlp"]
    assert M.bug_for(m, student, course.env["GLASSLLM_COURSE_SALT"]).id != M.bug_for(
        m, "ada", course.env["GLASSLLM_COURSE_SALT"]).id
    mine = httpx.post(course.homework + f"{MYSTERY}/eval", json=case, headers=bearer(tok))
    expected = M.evaluate(m, student, course.env["GLASSLLM_COURSE_SALT"], **case)
    assert mine.status_code == 200 and mine.json()["grads"] == expected["grads"]
    for path, body, headers in (
            (f"{MYSTERY}/eval", case, {"X-Student-ID": "ada"}),
            (f"{MYSTERY}/eval?student=ada", case, {}),
            (f"{MYSTERY}/proof", {"node": 1, "student": "ada"}, {}),
            (f"{MYSTERY}/proof?student=ada", {"node": 1}, {}),
            (f"{MYSTERY}/proof", {"node": 1}, {"X-Student-ID": "ada"})):
        r = httpx.post(course.homework + path, json=body, headers={**bearer(tok), **headers})
        assert r.status_code == 403, (path, r.text)
        assert r.json()["error"]["code"] == "not_your_record" and "grads" not in r.json()
    nobody = httpx.post(course.homework + f"{MYSTERY}/eval", json=case,
                        headers={"X-Student-ID": "ada"})
    assert nobody.status_code == 401 and nobody.json()["error"]["code"] == "unauthorized"


OFF = [("GET", "/api/v1/ops", None), ("GET", "/api/v1/ops/rms_norm", None),
       ("POST", "/api/v1/ops/rms_norm", {"inputs": {"x": [[1.0, 2.0]], "weight": [1.0, 1.0]}}),
       ("POST", "/api/v1/eval", CASE), ("POST", "/api/v1/check", {
           "op": "neg", "inputs": {"a": [1.0]}, "claimed": {"value": [-1.0]}}),
       ("POST", "/api/v1/batch", {"cases": [CASE]}), ("POST", "/api/v1/torch", CASE),
       ("GET", "/api/v1/lessons", None), ("GET", "/api/v1/examples", None),
       ("GET", MYSTERY, None), ("POST", f"{MYSTERY}/proof", {"node": 1}),
       ("GET", "/docs/contract/library", None), ("GET", "/dist/", None),
       ("GET", "/simple/", None)]
# spellings of a path that is off, as a raw request line sends them (no client tidies it)
SPELLINGS = ["/api/v1/ops/", "//api/v1/ops", "/api/v1/./ops", "/api//v1/ops",
             "/static/../api/v1/ops", "/API/v1/ops", "/api/v1/%6Fps", "/api/v1/ops%2Frms_norm",
             "/api/v1/ops/rms_norm/", "/api/v1/exercises/../ops",
             "/api/v1/exercises/ce-record/../../ops/rms_norm", "/docs/contract/../contract",
             "/api/v1/ops?x=/api/v1/exercises", "/api/v1/ops#/api/v1/exercises",
             "/docs/../docs/contract/library", "/static/%2e%2e/api/v1/ops"]


def raw_get(url: str, target: str, headers: dict) -> tuple[int, bytes]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    try:
        conn.putrequest("GET", target, skip_accept_encoding=True)
        for k, v in headers.items():
            conn.putheader(k, v)
        conn.endheaders()
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def test_a_graded_session_locks_the_room_on_every_worker(course):
    student, prof = course.tokens["lock"], instructor("prof")
    for method, path, body in OFF:
        for _ in range(ROUND):
            r = httpx.request(method, course.graded + path, json=body, headers=bearer(student),
                              timeout=60)
            assert r.status_code == 403, (path, r.text[:200])
            assert r.json()["error"]["code"] == "off_in_graded_session"
        r = httpx.request(method, course.graded + path, json=body, headers=bearer(prof),
                          timeout=120)
        assert r.status_code == 200, (path, r.text[:200])
    for target in SPELLINGS:
        status, body = raw_get(course.graded, target, bearer(student))
        assert status in (403, 404), (target, status)
        assert b"vjp" not in body and b"Backward" not in body, target
    status, body = raw_get(course.graded, "/api/v1/ops/rms_norm", bearer(prof))
    assert status == 200 and b"vjp" in body


# Last in the module: it stops the module's PostgreSQL.
def test_postgresql_stopped_mid_run(course):
    """A graded session refuses students' requests with 503 record_unavailable once its
    set is stale (the page's own files and the sign-in's who-am-I still answer); an
    instructor goes on; homework goes on with the last set read — a revoked token stays
    refused — and each worker says so in one log line, not one per request."""
    if course.backend != "postgresql":
        pytest.skip("SQLite is a file of this machine: no server to stop")
    homework, graded, logs = course.homework, course.graded, course.logs
    ada, bob, prof = course.tokens["ada"], course.tokens["bob"], instructor("prof")
    cli(course.env, "revoke", "bob")
    eval_route = [("POST", "/api/v1/eval", CASE, 200)]
    wait_until(lambda: all_refused(homework, eval_route, bob), what="bob refused")
    assert all(s == 200 for _, s, _ in statuses(homework, eval_route, ada))
    assert all(s == 200 for _, s, _ in statuses(graded, [("GET", EX, None, 200)], ada))

    course.stop_database()                             # PostgreSQL stops here

    def unavailable() -> bool:
        got = [httpx.request(m, graded + p, json=b, headers=bearer(ada), timeout=60)
               for m, p, b in (("GET", EX, None), ("POST", f"{EX}/hints", {"number": 1}),
                               ("POST", f"{EX}/submit", {"answers": answers(course.root,
                                                                            "ada")}))
               for _ in range(ROUND)]
        return all(r.status_code == 503 and r.json()["error"]["code"] == "record_unavailable"
                   and r.headers["retry-after"] == "5" for r in got)
    wait_until(unavailable, what="the graded session to refuse students with 503")
    who = httpx.get(graded + "/api/v1/session", headers=bearer(ada))
    assert who.status_code == 200 and who.json()["problem"]["code"] == "record_unavailable"
    assert httpx.get(graded + "/", headers=bearer(ada)).status_code == 200
    assert httpx.get(graded + "/api/v1/exercises", headers=bearer(ada)).status_code == 200
    assert httpx.post(graded + "/api/v1/eval", json=CASE, headers=bearer(prof)
                      ).json()["grads"]["x"] == [2.0, 4.0]

    said = b"the revoked tokens cannot be read"

    def homework_goes_on() -> bool:                  # its set is stale once it reads
        return all(s == 200 for _, s, _ in statuses(homework, eval_route, ada)) and \
            said in logs["homework"].read_bytes()
    wait_until(homework_goes_on, what="the homework sandbox to go on with the last set")
    for _ in range(3):                                 # many requests, past RETRY_S too
        assert all(s == 200 for _, s, _ in statuses(homework, eval_route, ada))
        assert all_refused(homework, eval_route, bob)
    for kind, path in logs.items():
        lines = [line for line in path.read_bytes().splitlines() if said in line]
        assert 1 <= len(lines) <= WORKERS, (kind, lines)           # one per worker at most
        assert b"Traceback" not in path.read_bytes()
    assert b"requests go on with the last set" in logs["homework"].read_bytes()

"""Numbers stay put and answers are kept (docs/record.md, docs/exercises.md#version), with
SQLite and a real PostgreSQL: a typo fixed keeps every student's numbers bit for bit; a
case changed under the same version stops the sandbox's start naming the file and the
field; a new version draws new numbers; every attempt keeps its version and its answers,
read back exactly; the gradebook totals the graded exercises only, under a Points
Possible row; an exercise not open yet is not listed to a student; the SQLite record's
files are the owner's only, whatever the umask."""

from __future__ import annotations

import base64
import csv
import datetime as dt
import io
import os
import stat
import subprocess
import sys

import numpy as np
import pytest
from fastapi.testclient import TestClient
from postgres_server import running_postgres
from record_course import EXERCISE, SALT, course_dir, environment, keyring
from sqlalchemy import text

from glassllm.course import build_case
from glassllm.course.attempts import Attempt
from glassllm.sandbox.wire import coerce
from glassllm_service.app import create_app
from glassllm_service.course_state import load_catalogue
from glassllm_service.record.commands import main
from glassllm_service.record.database import (
    RecordError,
    _statements,
    engine_for,
    migration_files,
    now_text,
    url_of,
)
from glassllm_service.record.setup import CaseChanged, keep_cases, open_record
from glassllm_service.settings import Settings

EX = "/api/v1/exercises/ce-record"
BACKENDS = ["sqlite", "postgresql"]


@pytest.fixture(scope="module")
def pg():
    with running_postgres() as url:
        yield url


def bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


def start(root, monkeypatch, backend, pg_url, course_id, **more) -> TestClient:
    """A course sandbox (in this process) keeping its record in SQLite under `root`, or
    in the PostgreSQL of the module as course `course_id`."""
    extra = {"GLASSLLM_COURSE_ID": course_id, **more}
    if backend == "postgresql":
        extra["GLASSLLM_DATABASE_URL"] = pg_url
    for key, value in environment(root, **extra).items():
        monkeypatch.setenv(key, value)
    client = TestClient(create_app(Settings()))
    client.root = root
    return client


def write(root, text: str, name: str = "ce-record.toml") -> str:
    path = course_dir(root) / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def case_of(client, student: str, token: str) -> dict:
    r = client.get(EX, headers=bearer(token))
    assert r.status_code == 200, r.text
    return r.json()


def bits(case_json: dict) -> dict[str, bytes]:
    """Each variable of a served case as its float64 / int64 bytes."""
    return {k: np.asarray(v).tobytes() for k, v in case_json["case"]["variables"].items()}


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_typo_keeps_the_numbers_a_changed_case_stops_the_start_a_bump_rerolls(
        backend, pg, tmp_path, monkeypatch):
    course_id = f"numbers-{backend}"
    ada = keyring(course_id).issue("ada", days=1)
    first = start(tmp_path, monkeypatch, backend, pg, course_id)
    before = case_of(first, "ada", ada)
    assert before["version"] == 1
    good = {"logits": build_case(first.app.state.course.catalogue.get("ce-record"), "ada",
                                 SALT).expected["logits"].tolist()}
    assert first.post(f"{EX}/submit", json={"answers": good},
                      headers=bearer(ada)).json()["attempt"]["number"] == 1
    first.app.state.record.close()

    # a typo fixed in the text and a hint, the points changed: the same numbers, bit for bit
    file = write(tmp_path, EXERCISE.replace("The gradient of the mean", "The gradient of"
                                            " the mean,").replace("Softmax first.",
                                                                  "Softmax, first.")
                 .replace("points = 10", "points = 12"))
    typo = start(tmp_path, monkeypatch, backend, pg, course_id)
    after = case_of(typo, "ada", ada)
    assert after["content_hash"] != before["content_hash"] and after["points"] == 12
    assert bits(after) == bits(before) and after["case"] == before["case"]
    typo.app.state.record.close()

    # the case changed under the same version: the start is refused, naming the field
    changed = EXERCISE.replace("shape = [2, 3]", "shape = [2, 4]")
    assert changed != EXERCISE
    write(tmp_path, changed)
    with pytest.raises(CaseChanged) as refused:
        start(tmp_path, monkeypatch, backend, pg, course_id)
    line = str(refused.value)
    assert "\n" not in line
    assert line.startswith(f"{file}: case.variables.logits.shape: changed since exercise"
                           f" 'ce-record' version 1 was first served to course {course_id!r}")
    assert line.endswith("Undo the change, or bump version (version = 2) to give everyone"
                         " new numbers on purpose")

    # bumped: new numbers (of the new shape) for everyone; the attempt used still counts
    write(tmp_path, "version = 2\n" + changed)
    bumped = start(tmp_path, monkeypatch, backend, pg, course_id)
    again = case_of(bumped, "ada", ada)
    assert again["version"] == 2 and np.shape(again["case"]["variables"]["logits"]) == (2, 4)
    assert again["attempts"]["used"] == 1
    record = bumped.app.state.record
    problems, new = record.case_versions([], keep=False)
    assert (problems, new) == ([], [])
    with record.engine.connect() as conn:
        kept = conn.execute(text("SELECT exercise_id, version FROM case_versions WHERE"
                                 " course = :c AND exercise_id = 'ce-record' ORDER BY"
                                 " version"), {"c": course_id}).all()
    assert [tuple(r) for r in kept] == [("ce-record", 1), ("ce-record", 2)]
    # version 1's case, back as it was, starts again (its numbers are version 1's)
    write(tmp_path, EXERCISE)
    back = start(tmp_path, monkeypatch, backend, pg, course_id)
    assert bits(case_of(back, "ada", ada)) == bits(before)
    back.app.state.record.close()
    bumped.app.state.record.close()


def test_the_real_sandbox_refuses_to_start_on_a_changed_case_with_one_line(tmp_path):
    env = {**os.environ, **environment(tmp_path, GLASSLLM_COURSE_ID="process")}
    run = [sys.executable, "-m", "glassllm_service.sandbox_cli"]
    kept = subprocess.run([*run, "check"], env=env, capture_output=True, text=True,
                          timeout=60)
    assert kept.returncode == 0, kept.stderr
    assert "ok: " in kept.stdout and "exercise ce-record version 1: new: kept at the" \
        " sandbox's next start" in kept.stdout
    settings = Settings(**{k[len("GLASSLLM_"):].lower(): v for k, v in
                           environment(tmp_path, GLASSLLM_COURSE_ID="process").items()})
    record = open_record(settings)
    keep_cases(record, load_catalogue(settings))         # as a first start would
    record.close()
    file = write(tmp_path, EXERCISE.replace('distribution = "normal"',
                                            'distribution = "normal"\nstd = 2.0'))
    for args in ([*run, "--port", "1"], [*run, "check"]):
        proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 1 and "Traceback" not in proc.stderr
        last = proc.stderr.strip().splitlines()[-1]
        assert last.startswith(f"glassllm-sandbox: {file}: case.variables.logits.std:"
                               " changed since exercise 'ce-record' version 1")
        assert "bump version (version = 2)" in last


@pytest.mark.parametrize("backend", BACKENDS)
def test_each_attempt_keeps_its_version_and_the_answers_it_gave(backend, pg, tmp_path,
                                                               monkeypatch):
    course_id = f"answers-{backend}"
    client = start(tmp_path, monkeypatch, backend, pg, course_id)
    ada = keyring(course_id).issue("ada", days=1)
    binary = np.array([[5e-324, -1.5, 2.0], [np.pi, -np.inf, 7.0]])   # a subnormal too
    given = [{"logits": [[0.1, -0.0, 1e-300], ["NaN", "Infinity", 3]]},
             {"logits": [[1, 2, 3, 4, 5]]},                        # the wrong shape
             {"logits": {"dtype": "float64", "shape": [2, 3],      # exact binary
                         "base64": base64.b64encode(binary.tobytes()).decode()}}]
    for k, answers in enumerate(given):
        r = client.post(f"{EX}/submit", json={"answers": answers, "idempotency_key": f"k{k}"},
                        headers=bearer(ada))
        assert r.status_code == 200, r.text
        assert r.json()["version"] == 1 and r.json()["attempt"]["number"] == k + 1
    repeat = client.post(f"{EX}/submit", json={"answers": given[0], "idempotency_key": "k0"},
                         headers=bearer(ada))
    assert repeat.json()["attempt"]["repeated"] is True
    record = client.app.state.record
    old = Attempt("ada", "ce-record", "h" * 64, "d" * 64, None, 0.0, False, 0,
                  dt.datetime.now(dt.UTC))                      # as before answers were kept
    record.record_attempt(old, None)
    rows = record.attempts("ada", answers=True)
    assert [(r["attempt"], r["version"], r["regradable"]) for r in rows] == [
        (1, 1, True), (2, 1, True), (3, 1, True), (4, None, False)]
    assert rows[0]["answers"] == {"logits": [[0.1, -0.0, 1e-300], ["NaN", "Infinity", 3.0]]}
    assert rows[1]["answers"] == {"logits": [[1.0, 2.0, 3.0, 4.0, 5.0]]}
    assert rows[3]["answers"] is None
    for row, sent in zip(rows[:3], given, strict=True):
        kept = coerce("tensor", "logits", row["answers"]["logits"])
        assert kept.tobytes() == coerce("tensor", "logits", sent["logits"]).tobytes()
        assert kept.shape == coerce("tensor", "logits", sent["logits"]).shape
    listed = client.get("/api/v1/record/attempts", headers=bearer(ada)).json()["attempts"]
    assert [(a["version"], a["regradable"]) for a in listed] == [
        (1, True), (1, True), (1, True), (None, False)]
    assert "answers" not in listed[0]              # the listing stays small
    record.close()


def test_the_answers_kept_are_bounded_as_the_request_body_is(tmp_path, monkeypatch):
    client = start(tmp_path, monkeypatch, "sqlite", None, "bounded",
                   GLASSLLM_MAX_BODY_BYTES="1000")
    ada = keyring("bounded").issue("ada", days=1)
    zeros = {"answers": {"logits": [0] * 400}}                 # 820-odd bytes sent
    r = client.post(f"{EX}/submit", json=zeros, headers=bearer(ada))
    assert r.status_code == 413 and r.json()["error"]["code"] == "too_large"
    assert "the record keeps at most 1000 (GLASSLLM_MAX_BODY_BYTES)" in r.json()["error"][
        "message"]
    assert client.app.state.record.attempts("ada") == []
    ok = client.post(f"{EX}/submit", json={"answers": {"logits": [0] * 100}},
                     headers=bearer(ada))
    assert ok.status_code == 200 and ok.json()["attempt"]["recorded"] is True


LESSON = '''
id = "course-lesson"
title = "Doubling"
text = "What doubling does to a gradient."
points = 3
[[notes]]
text = "Every element's gradient is 2."
claims = [{path = "grads.x", kind = "approx", expect = [2.0, 2.0]}]
[case]
expression = "(x * 2.0).sum()"
[case.variables.x]
value = [1.0, -1.0]
[answer]
kind = "grads"
grads = ["x"]
'''
SECOND = EXERCISE.replace('id = "ce-record"', 'id = "ce-two"').replace(
    "points = 10", "points = 2.5").replace("max_attempts = 3\n", "")


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_gradebook_totals_the_graded_exercises_under_their_points_possible(
        backend, pg, tmp_path, monkeypatch):
    course_id = f"book-{backend}"
    write(tmp_path, SECOND, "ce-two.toml")
    write(tmp_path, LESSON, "lesson.toml")
    client = start(tmp_path, monkeypatch, backend, pg, course_id,
                   GLASSLLM_SHIPPED_EXERCISES="1")
    catalogue = client.app.state.course.catalogue
    assert [ex.id for ex in catalogue.graded] == ["ce-record", "ce-two"]
    record = client.app.state.record
    record.enrol([("ada", "Ada"), ("bob", "=cmd|' /C calc'!A0")])
    ada = keyring(course_id).issue("ada", days=1)
    right = {ex: {k: v.tolist() for k, v in build_case(catalogue.get(ex), "ada", SALT)
                  .expected.items()}
             for ex in ("ce-record", "ce-two", "softmax-ce-logits", "neuron",
                        "course-lesson")}
    for ex, answers in right.items():                 # every one right, lessons included
        r = client.post(f"/api/v1/exercises/{ex}/submit", json={"answers": answers},
                        headers=bearer(ada))
        assert r.status_code == 200 and r.json()["passed"], (ex, r.text)
    record.record_attempt(Attempt("ada", "gone-exercise", "h" * 64, "d" * 64, None, 7.0,
                                  True, 0, dt.datetime.now(dt.UTC)), None)
    prof = keyring(course_id).issue("prof", "instructor", days=1)
    book = client.get("/api/v1/record/gradebook.json", headers=bearer(prof)).json()
    assert book["exercises"] == ["ce-record", "ce-two"]
    assert book["points_possible"] == {"ce-record": 10.0, "ce-two": 2.5}
    assert book["total_possible"] == 12.5
    # in the order served (the lessons, the shipped examples, the course's own), then
    # what is no longer served
    assert book["practice"] == ["neuron", "softmax-ce-logits", "course-lesson",
                                "gone-exercise"]
    row = {s["student"]: s for s in book["students"]}
    assert row["ada"]["total"] == 12.5                         # 10 + 2.5, no practice
    assert set(row["ada"]["exercises"]) == {"ce-record", "ce-two"}
    assert row["ada"]["practice"]["softmax-ce-logits"] == {"best": 5.0, "attempts": 1,
                                                           "passed": True}
    assert row["ada"]["practice"]["gone-exercise"]["best"] == 7.0
    assert (row["bob"]["total"], row["bob"]["exercises"]) == (0.0, {})

    r = client.get("/api/v1/record/gradebook.csv", headers=bearer(prof))
    table = list(csv.reader(io.StringIO(r.text)))
    head, possible = table[0], table[1]
    practice = book["practice"]
    assert head == ["student", "display_name", "ce-record", "ce-record attempts", "ce-two",
                    "ce-two attempts", "total",
                    *[c for ex in practice for c in (ex, f"{ex} attempts")]]
    assert possible == ["Points Possible", "", "10.0", "", "2.5", "", "12.5",
                        *[""] * (2 * len(practice))]
    cells = {line[0]: dict(zip(head, line, strict=True)) for line in table[2:]}
    assert (cells["ada"]["ce-record"], cells["ada"]["ce-two"], cells["ada"]["total"]) == (
        "10.0", "2.5", "12.5")
    assert cells["ada"]["neuron attempts"] == "1" and cells["bob"]["total"] == "0.0"
    assert cells["bob"]["display_name"] == "'=cmd|' /C calc'!A0"      # no formula
    record.close()


def test_an_exercise_not_open_yet_is_not_listed_to_a_student(tmp_path, monkeypatch):
    soon = (dt.datetime.now(dt.UTC) + dt.timedelta(days=3)).replace(microsecond=0)
    write(tmp_path, f"opens = {soon.isoformat()}\n" + SECOND, "ce-two.toml")
    client = start(tmp_path, monkeypatch, "sqlite", None, "listing")
    ada = keyring("listing").issue("ada", days=1)
    prof = keyring("listing").issue("prof", "instructor", days=1)

    def ids(**headers):
        r = client.get("/api/v1/exercises", headers=headers)
        assert r.status_code == 200
        return {e["id"]: e for e in r.json()["exercises"]}

    for shown in (ids(), ids(**bearer(ada))):
        assert "ce-record" in shown and "ce-two" not in shown
    seen = ids(**bearer(prof))
    assert seen["ce-two"]["open"] is False and seen["ce-two"]["opens"] == \
        soon.isoformat().replace("+00:00", "Z")
    r = client.get("/api/v1/exercises/ce-two", headers=bearer(ada))
    assert r.status_code == 404 and r.json()["error"]["code"] == "unknown_exercise"
    near = client.get("/api/v1/exercises/ce-tw", headers=bearer(ada)).json()["error"]
    assert near["code"] == "unknown_exercise" and "ce-two" not in near["message"]
    assert "ce-two" in client.get("/api/v1/exercises/ce-tw",
                                  headers=bearer(prof)).json()["error"]["message"]
    preview = client.get("/api/v1/exercises/ce-two", headers=bearer(prof))  # tried first
    assert preview.status_code == 200 and preview.json()["open"] is False
    revoked_gen = client.app.state.record.revoke("prof", role="instructor")
    assert revoked_gen == 1
    client.app.state.revocations.refresh(force=True)      # the worker's next read
    # a public route reads a revoked token as no token: the list as a student sees it
    assert "ce-two" not in ids(**bearer(prof))
    client.app.state.record.close()


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_the_sqlite_records_files_are_the_owners_only_whatever_the_umask(tmp_path,
                                                                        monkeypatch, caplog):
    old = os.umask(0)                         # the most permissive: 0666 files, 0777 dirs
    try:
        client = start(tmp_path, monkeypatch, "sqlite", None, "modes")
        ada = keyring("modes").issue("ada", days=1)
        assert client.post(f"{EX}/submit", json={"answers": {"logits": [[0.0] * 3] * 2}},
                           headers=bearer(ada)).status_code == 200
        data = tmp_path / "data"
        files = [data / f"record.sqlite3{end}" for end in ("", "-wal", "-shm", ".turn")]
        assert all(f.exists() for f in files)            # WAL open: every side file there
        assert _mode(data) == 0o700
        assert {f.name: _mode(f) for f in files} == {f.name: 0o600 for f in files}

        # an older record, left looser (its first worker still running: the WAL is open):
        # tightened at the next start, and said
        os.chmod(data, 0o755)
        for f in files:
            os.chmod(f, 0o644)
        caplog.clear()
        again = start(tmp_path, monkeypatch, "sqlite", None, "modes")
        assert _mode(data) == 0o700
        assert {f.name: _mode(f) for f in files} == {f.name: 0o600 for f in files}
        said = [r.getMessage() for r in caplog.records if r.name == "glassllm.record"]
        assert any(f"the record's folder {data} was mode 0755; tightened to 0700" in m
                   for m in said)
        assert any(f"the record's file {files[0]} was mode 0644; tightened to 0600" in m
                   for m in said)
        again.app.state.record.close()
        client.app.state.record.close()

        # a shared folder (the sticky bit of /tmp) is refused, not tightened
        shared = tmp_path / "shared"
        shared.mkdir()
        os.chmod(shared, 0o1777)
        monkeypatch.setenv("GLASSLLM_DATA_DIR", str(shared))
        with pytest.raises(RecordError, match=r"is a shared folder \(mode 1777, the sticky"
                                              r" bit of /tmp\)"):
            create_app(Settings())
        assert _mode(shared) == 0o1777 and not (shared / "record.sqlite3").exists()
    finally:
        os.umask(old)


def test_migrate_says_the_numbers_are_drawn_anew_once(tmp_path, monkeypatch, capsys):
    """A record made before the seed changed (migrations 1 and 2, an attempt): migrate
    applies 0003 and says plainly what it does to a running course; the old attempt is
    kept, with no version, and is not regradable."""
    for key, value in environment(tmp_path, GLASSLLM_COURSE_ID="upgrade").items():
        monkeypatch.setenv(key, value)
    engine = engine_for(url_of(None, tmp_path / "data"))
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY,"
                          " name VARCHAR(100) NOT NULL, applied_at VARCHAR(27) NOT NULL)"))
        for version, name, sql in migration_files()[:2]:
            for statement in _statements(sql):
                conn.exec_driver_sql(statement)
            conn.execute(text("INSERT INTO schema_migrations VALUES (:v, :n, :t)"),
                         {"v": version, "n": name, "t": now_text()})
        conn.execute(text("INSERT INTO attempts (course, student, exercise_id, attempt_no,"
                          " content_hash, verdict_digest, score, passed, hints_used,"
                          " created_at) VALUES ('upgrade', 'ada', 'ce-record', 1, :h, :h,"
                          " 10.0, true, 0, :t)"), {"h": "a" * 64, "t": now_text()})
    engine.dispose()
    main(["migrate"])
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "record: migrated (SQLite); applied now: 0003, 0004"
    assert out[1].startswith("record: the numbers of every student are drawn anew, once:"
                             " from this version on they come from each exercise's id and"
                             " version, not its file's bytes")
    assert "Course 'upgrade': the 1 attempt made before keep" in out[1]
    main(["migrate"])                                     # once: nothing more to say
    assert capsys.readouterr().out.splitlines() == [
        "record: migrated (SQLite); applied now: none missing"]
    record = open_record(Settings())
    assert [(a["attempt"], a["score"], a["version"], a["regradable"])
            for a in record.attempts("ada")] == [(1, 10.0, None, False)]
    record.close()


def test_a_student_is_served_only_their_own_numbers(tmp_path, monkeypatch):
    """With per-student tokens a classmate's numbers are not served, and the library
    without the course's salt rebuilds other numbers than the ones served (the ids and
    versions are public; the salt is the secret)."""
    client = start(tmp_path, monkeypatch, "sqlite", None, "own")
    ada, bob = (keyring("own").issue(s, days=1) for s in ("ada", "bob"))
    for asked in ({"params": {"student": "bob"}}, {"headers": {"X-Student-ID": "bob"}}):
        r = client.get(EX, headers={**bearer(ada), **asked.get("headers", {})},
                       params=asked.get("params"))
        assert r.status_code == 403 and r.json()["error"]["code"] == "not_your_record"
        assert "case" not in r.json()
    served = {who: case_of(client, who, token)["case"]["variables"]["logits"]
              for who, token in (("ada", ada), ("bob", bob))}
    ex = client.app.state.course.catalogue.get("ce-record")
    assert served["bob"] == build_case(ex, "bob", SALT).variables["logits"].tolist()
    assert served["bob"] != served["ada"]
    from glassllm.course import DEFAULT_SALT
    for guess in (DEFAULT_SALT, "", "course", "own"):
        assert build_case(ex, "bob", guess).variables["logits"].tolist() != served["bob"]
    client.app.state.record.close()

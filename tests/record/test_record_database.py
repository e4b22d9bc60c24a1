"""The record's database with a real PostgreSQL and SQLite: migrations applied once
however many replicas start together, the connection budget checked at startup, the
commands' refusals, key rotation, no secret in an error."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest
from postgres_server import running_postgres
from record_course import SECRET, environment, keyring
from sqlalchemy import text

from glassllm_service.record.database import (
    RecordError,
    connection_budget,
    engine_for,
    migrate,
    migration_files,
    url_of,
)
from glassllm_service.record.tokens import Keyring, TokenError
from glassllm_service.settings import Settings, SettingsError


@pytest.fixture(scope="module")
def pg():
    with running_postgres(max_connections=30) as url:
        yield url


def test_replicas_starting_together_apply_each_migration_once(pg):
    engines = [engine_for(url_of(pg, None), 1) for _ in range(6)]
    applied: list[list[int]] = []
    start = threading.Barrier(len(engines))

    def replica(engine):
        start.wait()
        applied.append(migrate(engine))

    threads = [threading.Thread(target=replica, args=(e,)) for e in engines]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    versions = [v for v, _, _ in migration_files()]
    assert sorted(v for run in applied for v in run) == versions    # once, by one of them
    with engines[0].connect() as conn:
        rows = conn.execute(text("SELECT version FROM schema_migrations")).scalars().all()
    assert sorted(rows) == versions
    for e in engines:
        e.dispose()


def test_the_connection_budget_is_checked_against_max_connections(pg):
    engine = engine_for(url_of(pg, None), 1)
    line = connection_budget(engine, replicas=2, workers=2, pool_size=4)
    assert "max_connections=30" in line and "= 16 connections" in line
    with pytest.raises(RecordError, match=r"GLASSLLM_REPLICAS=4 x GLASSLLM_WORKERS=2 x"
                                          r" GLASSLLM_DB_POOL_SIZE=4 = 32 connections"):
        connection_budget(engine, replicas=4, workers=2, pool_size=4)
    engine.dispose()


def test_a_sandbox_that_would_exhaust_postgresql_does_not_start(pg, tmp_path):
    env = {**os.environ, **environment(tmp_path), "GLASSLLM_DATABASE_URL": pg,
           "GLASSLLM_REPLICAS": "10", "GLASSLLM_DB_POOL_SIZE": "4"}
    r = subprocess.run([sys.executable, "-m", "glassllm_service.sandbox_cli", "--port", "1"],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "= 40 connections" in r.stderr and "max_connections=30" in r.stderr
    assert "Traceback" not in r.stderr


def test_sqlite_is_a_file_under_the_data_dir_in_wal_mode(tmp_path):
    engine = engine_for(url_of(None, tmp_path / "data"))
    migrate(engine)
    assert (tmp_path / "data" / "record.sqlite3").is_file()
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 10_000
    assert migrate(engine) == []                                  # nothing twice
    engine.dispose()


def test_a_rotated_secret_keeps_old_tokens_until_it_is_dropped():
    old = keyring().issue("ada", days=1)
    new_first = Keyring("course", {"k2": "n" * 40, "k1": SECRET})
    assert new_first.verify(old).sub == "ada"                     # still listed: accepted
    assert new_first.issue("ada", days=1).split(".")[1] == "k2"   # the first signs
    with pytest.raises(TokenError):
        Keyring("course", {"k2": "n" * 40}).verify(old)           # dropped: refused


def test_a_token_has_one_spelling_padding_or_spare_bits_are_refused():
    """base64 decodes a signature padded with ``=``, or whose last character's spare bits
    differ, to the same bytes; only the canonical unpadded spelling is the token."""
    import base64
    token = keyring().issue("ada", days=1)
    head, sig = token.rsplit(".", 1)
    assert keyring().verify(token).sub == "ada"
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    spare = [c for c in alphabet if c != sig[-1] and base64.urlsafe_b64decode(
        sig[:-1] + c + "=") == base64.urlsafe_b64decode(sig + "=")]
    assert spare                                   # 32 bytes in 43 characters: 2 spare bits
    for other in (f"{sig}=", f"{sig}==", sig[:-1] + spare[0]):
        with pytest.raises(TokenError) as err:
            keyring().verify(f"{head}.{other}")
        assert err.value.reason == "invalid"


def test_a_bad_secret_setting_is_named_with_its_value_hidden():
    with pytest.raises(SettingsError) as err:
        Settings(mode="course", course_secrets="k1=tooshort-but-secret")
    assert "GLASSLLM_COURSE_SECRETS=(hidden)" in str(err.value)
    assert "tooshort-but-secret" not in str(err.value)


def test_the_roster_command_names_a_bad_row(tmp_path):
    roster = tmp_path / "students.csv"
    roster.write_text("student_id,display_name\nada,Ada\nbob,Bob\nada,Again\n")
    r = subprocess.run([sys.executable, "-m", "glassllm_service.sandbox_cli", "roster",
                        str(roster)], env={**os.environ, **environment(tmp_path)},
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "students.csv:4: student id 'ada' is listed twice" in r.stderr
    assert r.stdout == ""


def test_ids_that_fold_alike_or_break_the_rule_are_never_enrolled(tmp_path, monkeypatch,
                                                                   capsys):
    """The record enrols no id the offline grader could not tell from another (trimmed,
    NFC, case-folded: docs/grading.md) and no id a token cannot carry: a roster's two
    rows are named, an enrolled spelling is named, and nothing is written first (a
    student named "Points Possible" would be read as the gradebook's points row)."""
    from glassllm_service.record.setup import open_record
    from glassllm_service.sandbox_cli import main
    for key, value in environment(tmp_path).items():
        monkeypatch.setenv(key, value)
    roster = tmp_path / "students.csv"
    roster.write_text("student_id,display_name\nzed,Zed\nbob,Bob\nZED,Again\n")
    with pytest.raises(SystemExit) as stop:
        main(["roster", str(roster)])
    assert "line 2 ('zed') and line 4 ('ZED') are the same once trimmed" in str(stop.value)
    for bad in ("Points Possible", "a/b", ".x", ""):
        with pytest.raises(SystemExit) as stop:
            main(["token", bad])
        assert "1 to 128 letters" in str(stop.value)
    main(["token", "zed"])
    capsys.readouterr()
    for spelling in ("Zed", "ZED"):
        with pytest.raises(SystemExit) as stop:
            main(["token", spelling])
        assert f"{spelling!r} and the enrolled 'zed' are the same" in str(stop.value)
    roster.write_text("student_id\nbob\nZed\n")
    with pytest.raises(SystemExit):
        main(["roster", str(roster)])
    record = open_record(Settings())
    assert [s.student for s in record.students()] == ["zed"]     # nothing else written
    record.close()


def test_revoke_and_forget_from_the_command_line(tmp_path, monkeypatch, capsys):
    from glassllm_service.sandbox_cli import main
    for key, value in environment(tmp_path).items():
        monkeypatch.setenv(key, value)

    def run(*args):
        main(list(args))
        return capsys.readouterr().out

    first = run("token", "ada", "--name", "Ada").splitlines()[1].split(",")
    revoked = run("revoke", "ada").splitlines()[1].split(",")
    assert first[3] != revoked[3]
    claims = keyring().verify(revoked[3])
    assert (claims.sub, claims.gen) == ("ada", 1) and keyring().verify(first[3]).gen == 0
    assert revoked[:3] == ["ada", "Ada", "student"]          # the stored name, kept
    assert run("token", "ada").splitlines()[1].split(",")[1] == "Ada"
    assert "ada: 0 attempts" in run("forget", "ada")
    assert run("export").splitlines()[0] == ("student,display_name,ce-record,"
                                             "ce-record attempts,total")
    # an instructor, never enrolled, is revoked with --instructor and stays off the roster
    old = run("token", "prof", "--instructor").splitlines()[1].split(",")
    new = run("revoke", "prof", "--instructor").splitlines()[1].split(",")
    assert (old[2], new[2]) == ("instructor", "instructor")
    assert (keyring().verify(old[3]).gen, keyring().verify(new[3]).gen) == (0, 1)
    assert "prof" not in run("export")
    with pytest.raises(SystemExit, match="no student 'prof'"):
        run("revoke", "prof")                              # not a student
    # a typo enrols nobody: revoke and forget stop, naming the id; the gradebook is as it was
    for command in ("revoke", "forget"):
        with pytest.raises(SystemExit, match="no student 'nobody-here' in course 'course'"):
            run(command, "nobody-here")
    assert "nobody-here" not in run("export")


def test_the_hand_out_csv_never_runs_as_a_formula_and_names_hold_no_control_chars(
        tmp_path, monkeypatch, capsys):
    import csv
    import io

    from glassllm_service.sandbox_cli import main
    for key, value in environment(tmp_path).items():
        monkeypatch.setenv(key, value)
    roster = tmp_path / "r.csv"
    roster.write_text('student_id,display_name\njo,"=HYPERLINK(""http://x"")"\n'
                      "al,@SUM(A1)\nbo,Bo\n", encoding="utf-8")
    main(["roster", str(roster)])
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [r["display_name"] for r in rows] == ["'=HYPERLINK(\"http://x\")", "'@SUM(A1)",
                                                 "Bo"]
    for name in ("Eve\x1b[31m", "Mallory\u202e", "tab\there"):
        roster.write_text(f"student_id,display_name\nev,{name}\n", encoding="utf-8")
        with pytest.raises(SystemExit, match=r"r.csv:2: the display name holds the control"
                                             r" character U\+"):
            main(["roster", str(roster)])
        with pytest.raises(SystemExit, match="--name: the display name holds"):
            main(["token", "ev", "--name", name])


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_one_transaction_checks_the_generation_and_counts_the_hints(backend, pg, tmp_path):
    import datetime as dt

    from glassllm.course.attempts import Attempt, Revoked
    from glassllm_service.record.store import DatabaseRecord

    engine = engine_for(url_of(pg if backend == "postgresql" else None, tmp_path), 2)
    migrate(engine)
    record = DatabaseRecord(engine, f"gen-{backend}")

    def attempt(key, hints=None):
        return Attempt("ada", "ex", "h" * 64, "d" * 64, None, 1.0, True, hints,
                       dt.datetime(2026, 12, 1, tzinfo=dt.UTC), key)

    record.record_hint("ada", "ex", 1)
    record.record_hint("ada", "ex", 2)
    assert record.record_attempt(attempt("k1"), None, generation=0).number == 1
    assert record.record_attempt(attempt("k2", hints=7), None).number == 2
    gen = record.revoke("ada")
    with pytest.raises(Revoked) as refused:
        record.record_attempt(attempt("k3"), None, generation=0)
    assert (refused.value.presented, refused.value.current) == (0, gen) == (0, 1)
    assert record.record_attempt(attempt("k3"), None, generation=gen).number == 3
    # the hints counted in the transaction; a given count kept as given; the refused
    # attempt left nothing behind
    assert [(a["attempt"], a["hints_used"]) for a in record.attempts("ada")] == [
        (1, 2), (2, 7), (3, 2)]
    engine.dispose()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_one_students_attempts_at_once_from_two_workers_are_numbered_once(backend, pg,
                                                                          tmp_path):
    """Two engines (two workers' pools) and 12 threads each submit for the same student
    and exercise at the same moment: max_attempts = 5 lets exactly five in, numbered 1-5;
    the threads sharing an idempotency key get one attempt between them."""
    import datetime as dt

    from glassllm.course.attempts import Attempt, AttemptsExhausted
    from glassllm_service.record.store import DatabaseRecord

    url = url_of(pg if backend == "postgresql" else None, tmp_path)
    course = f"race-{backend}"
    records = [DatabaseRecord(engine_for(url, 6), course) for _ in range(2)]
    migrate(records[0].engine)
    records[0].enrol([("ada", "Ada")])
    start = threading.Barrier(24)
    outcomes: list = []

    def submit(i: int) -> None:
        key = f"shared-{i % 3}" if i < 12 else f"own-{i}"     # 3 keys, 4 threads each
        attempt = Attempt("ada", "ex", "h" * 64, "d" * 64, None, 0.0, False, None,
                          dt.datetime.now(dt.UTC), key)
        start.wait()
        try:
            outcomes.append((key, records[i % 2].record_attempt(attempt, 5, generation=0)))
        except AttemptsExhausted:
            outcomes.append((key, None))

    threads = [threading.Thread(target=submit, args=(i,)) for i in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stored = records[0].attempts("ada")
    assert [a["attempt"] for a in stored] == [1, 2, 3, 4, 5]
    first = {}
    for key, done in outcomes:
        if done is not None:
            # every answer about a key names the one attempt stored for it
            assert first.setdefault(key, done.number) == done.number
    assert len(first) == 5 and sorted(first.values()) == [1, 2, 3, 4, 5]
    assert sum(done is not None and not done.repeated for _, done in outcomes) == 5
    for r in records:
        r.close()

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
    assert "ada: 0 attempts" in run("forget", "ada")
    assert run("export").splitlines()[0] == ("student,display_name,ce-record,"
                                             "ce-record attempts,total")

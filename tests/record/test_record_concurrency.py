"""A class at once against `glassllm-sandbox --workers 2`, with SQLite and with a real
PostgreSQL: 60 students with their own tokens (from ``glassllm-sandbox roster``) submit
concurrently, retry with the same idempotency key, and one worker is killed mid-run.
Every attempt a client was answered about is in the database exactly once, with what the
client was told; no attempt is counted twice; ``max_attempts`` holds."""

from __future__ import annotations

import csv
import io
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from postgres_server import running_postgres
from record_course import answers, environment
from sandbox_server import free_port, wait_healthy
from sqlalchemy import create_engine, text

from glassllm_service.record.database import url_of

pytestmark = pytest.mark.slow
STUDENTS = 60
EX = "/api/v1/exercises/ce-record/submit"


def worker_pids(parent: int) -> list[int]:
    """The uvicorn workers of `parent`, from /proc (multiprocessing's spawned children,
    not its resource tracker)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == parent and b"spawn_main" in cmd and b"resource_tracker" not in cmd:
            found.append(int(entry.name))
    return found


def roster_tokens(env: dict, root: Path) -> dict[str, str]:
    roster = root / "students.csv"
    roster.write_text("student_id,display_name\n" + "".join(
        f"s{i:02d},Student {i}\n" for i in range(STUDENTS)), encoding="utf-8")
    out = subprocess.run([sys.executable, "-m", "glassllm_service.sandbox_cli", "roster",
                          str(roster)], env={**os.environ, **env}, check=True,
                         capture_output=True, text=True).stdout
    return {row["student_id"]: row["token"] for row in csv.DictReader(io.StringIO(out))}


def run_class(url: str, root: Path, tokens: dict[str, str], on_progress) -> dict:
    """Each student: 3 attempts (wrong, wrong, right), each with its own key, retried on a
    dropped connection or a 5xx; every other student re-sends a key already answered; a
    4th attempt is refused. What each client was told, by key."""
    told: dict[str, dict] = {}
    lock = threading.Lock()

    def send(sid: str, key: str, right: bool) -> httpx.Response:
        body = {"answers": answers(root, sid, right), "idempotency_key": key}
        for _ in range(60):
            try:
                r = httpx.post(url + EX, json=body, timeout=30,
                               headers={"Authorization": f"Bearer {tokens[sid]}"})
                if r.status_code < 500:
                    return r
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"{sid} {key}: no answer after 60 tries")

    def student(i: int) -> None:
        sid = f"s{i:02d}"
        for n, right in enumerate((False, False, True)):
            r = send(sid, f"{sid}-{n}", right)
            assert r.status_code == 200, r.text
            with lock:
                told[f"{sid}-{n}"] = r.json()
            on_progress()
        if i % 2:
            again = send(sid, f"{sid}-1", False).json()["attempt"]
            assert again["repeated"] and again["number"] == told[f"{sid}-1"]["attempt"]["number"]
        extra = send(sid, f"{sid}-3", True)
        assert extra.status_code == 403, extra.text
        assert extra.json()["error"]["code"] == "no_attempts_left"

    with ThreadPoolExecutor(STUDENTS) as pool:
        for f in [pool.submit(student, i) for i in range(STUDENTS)]:
            f.result()
    return told


@pytest.fixture(params=["sqlite", "postgres"])
def database(request, tmp_path):
    if request.param == "sqlite":
        yield {}
    else:
        with running_postgres() as url:
            yield {"GLASSLLM_DATABASE_URL": url}


def test_sixty_students_two_workers_one_killed_every_attempt_once(database, tmp_path):
    env = environment(tmp_path, GLASSLLM_ACCESS_LOG="0", **database)
    tokens = roster_tokens(env, tmp_path)
    assert len(tokens) == STUDENTS
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "glassllm_service.sandbox_cli",
                             "--workers", "2", "--port", str(port), "--log-level", "warning"],
                            env={**os.environ, **env}, start_new_session=True,
                            stdout=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    killed: list[int] = []
    done = [0]

    def on_progress() -> None:
        done[0] += 1
        if done[0] == STUDENTS and not killed:       # a third of the way: kill a worker
            pids = worker_pids(proc.pid)
            if pids:
                killed.append(pids[0])
                os.kill(pids[0], signal.SIGKILL)

    try:
        wait_healthy(url, proc, timeout=60)
        assert len(worker_pids(proc.pid)) == 2
        told = run_class(url, tmp_path, tokens, on_progress)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert killed, "no worker was killed mid-run"
    engine = create_engine(url_of(database.get("GLASSLLM_DATABASE_URL"), tmp_path / "data"))
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT student, exercise_id, attempt_no, idempotency_key,"
                                 " passed, score, content_hash FROM attempts")).all()
    engine.dispose()
    assert len(rows) == 3 * STUDENTS
    by_key = {r[3]: r for r in rows}
    assert set(by_key) == set(told)                   # each key once, none unacknowledged
    for key, answer in told.items():
        student, exercise, number, _, passed, score, content_hash = by_key[key]
        assert (student, exercise) == (answer["student"], answer["exercise"])
        assert (number, bool(passed), score) == (answer["attempt"]["number"],
                                                 answer["passed"], answer["score"])
        assert content_hash == answer["content_hash"]
    for sid in tokens:
        numbers = sorted(r[2] for r in rows if r[0] == sid)
        assert numbers == [1, 2, 3]

"""Per-student numbers across real processes: a sandbox of two workers, a second sandbox
(another replica) and a restart all give a student the same numbers, and the offline
library rebuilds the same case; a malformed exercise file stops the real sandbox with one
line naming the file, the field and the rule."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import numpy as np
import pytest
from sandbox_server import running_sandbox

from glassllm.course import build_case, load

pytestmark = pytest.mark.slow
SHIPPED = Path(__file__).resolve().parents[2] / "glassllm" / "course" / "exercises"


@pytest.fixture(scope="module")
def course_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("course")
    text = (SHIPPED / "softmax-ce-logits.toml").read_text(encoding="utf-8")
    (folder / "ce.toml").write_text(text.replace('id = "softmax-ce-logits"', 'id = "ce"'),
                                    encoding="utf-8")
    return folder


def env(folder, salt="the course's salt"):
    return {"GLASSLLM_MODE": "course", "GLASSLLM_COURSE_SALT": salt,
            "GLASSLLM_EXERCISES_DIR": str(folder)}


def numbers(url: str, student: str, times: int = 1) -> list:
    out = []
    for _ in range(times):          # a new connection each time: any worker may answer
        with httpx.Client(base_url=url, timeout=10) as http:
            body = http.get(f"/api/v1/exercises/ce?student={student}").json()
        out.append(body["case"]["variables"]["logits"])
    return out


def test_the_same_student_gets_the_same_numbers_from_every_worker_replica_and_restart(
        course_dir):
    command = [sys.executable, "-m", "glassllm_service.sandbox_cli", "--workers", "2"]
    with running_sandbox(env=env(course_dir), command=command) as url:
        ada = numbers(url, "ada", times=12)
        alan = numbers(url, "alan")[0]
    assert all(n == ada[0] for n in ada)
    assert alan != ada[0]
    with running_sandbox(env=env(course_dir)) as url:          # another replica, a restart
        assert numbers(url, "ada")[0] == ada[0]
        right = build_case(load(course_dir / "ce.toml"), "ada", "the course's salt")
        r = httpx.post(f"{url}/api/v1/exercises/ce/submit?student=ada", timeout=10,
                       json={"answers": {"logits": right.expected["logits"].tolist()}})
        assert r.json()["passed"]                  # the grader's rebuilt case is the sandbox's
    np.testing.assert_array_equal(right.variables["logits"], ada[0])
    with running_sandbox(env=env(course_dir, salt="another course")) as url:
        assert numbers(url, "ada")[0] != ada[0]


def test_a_malformed_exercise_file_stops_the_real_sandbox(tmp_path):
    (tmp_path / "bad.toml").write_text('id = "bad"\ntitle = "x"\ntext = "x"\nfeedbak = 1\n',
                                       encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "glassllm_service.sandbox_cli", "--port", "1"],
                          env={**os.environ, **env(tmp_path)}, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == (
        f"glassllm-sandbox: {tmp_path / 'bad.toml'}: feedbak: unknown key (did you mean"
        " 'feedback'?); the keys here are: answer, atol, case, closes, digits, feedback, hide,"
        " hide_ops, hints, id, max_attempts, notes, opens, points, rtol, text, title,"
        " version")
    assert "Traceback" not in proc.stderr


def test_a_graded_session_in_practice_mode_does_not_start():
    proc = subprocess.run([sys.executable, "-m", "glassllm_service.sandbox_cli", "--port", "1"],
                          env={**os.environ, "GLASSLLM_GRADED_SESSION": "1"},
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    line = proc.stderr.strip().splitlines()[-1]
    assert "GLASSLLM_GRADED_SESSION=1 is for course mode only" in line
    assert "GLASSLLM_MODE=course" in line

"""examples/autograde.py grades a softmax backward through the client against a live
sandbox and writes Gradescope's results.json."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from sandbox_server import ROOT

WRONG = '''
import numpy as np
def softmax_backward(x, g):
    s = np.exp(x - x.max(axis=-1, keepdims=True))
    s = s / s.sum(axis=-1, keepdims=True)
    return s * g            # forgets the - sum(g * s) term
'''
RAISES = "def softmax_backward(x, g):\n    raise RuntimeError('todo')\n"


def run(url: str, submission: Path, results: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "examples" / "autograde.py"), "--url", url,
                           "--submission", str(submission), "--results", str(results)],
                          capture_output=True, text=True, cwd=ROOT)


def grade(url: str, submission: Path, results: Path) -> dict:
    done = run(url, submission, results)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(results.read_text())


def assert_complete(r: dict) -> None:
    """Gradescope's results.json whole: the total, and every test with its max_score."""
    assert r["max_score"] == 8.0 and 0.0 <= r["score"] <= 8.0
    assert [t["max_score"] for t in r["tests"]] == [1.0, 2.0, 2.0, 2.0, 1.0]
    assert all({"name", "score", "max_score", "status", "output"} <= set(t) for t in r["tests"])
    assert r["score"] == sum(t["score"] for t in r["tests"])


def test_a_correct_submission_scores_full_marks(url, tmp_path):
    r = grade(url, ROOT / "examples" / "student_softmax.py", tmp_path / "results.json")
    assert_complete(r)
    assert r["score"] == r["max_score"] == 8.0
    assert [t["status"] for t in r["tests"]] == ["passed"] * 5
    assert {"name", "score", "max_score", "status", "output"} <= set(r["tests"][0])


def test_a_wrong_submission_is_told_where_without_the_answer(url, tmp_path):
    (tmp_path / "wrong.py").write_text(WRONG)
    r = grade(url, tmp_path / "wrong.py", tmp_path / "results.json")
    by_name = {t["name"]: t for t in r["tests"]}
    # s * g is right only where sum(g * s) = 0: in none of the cases (g = 1 gives 1)
    assert r["score"] == 0.0
    first = by_name["one row, one-hot upstream"]
    assert first["status"] == "failed"
    assert first["output"] == "3 of 3 elements are wrong; the first at index [0, 0]"


def test_a_submission_that_raises_scores_zero_with_its_traceback(url, tmp_path):
    (tmp_path / "raises.py").write_text(RAISES)
    r = grade(url, tmp_path / "raises.py", tmp_path / "results.json")
    assert r["score"] == 0.0 and "RuntimeError: todo" in r["tests"][0]["output"]


@pytest.mark.parametrize(("source", "says"), [
    ("def softmax_backward(x, g)\n    return g\n", "SyntaxError"),
    ("import numpy as np\n", "defines no function softmax_backward"),
    ("import sys\nsys.exit(3)\n", "SystemExit: 3"),
    ("import no_such_module_glassllm\n", "ModuleNotFoundError"),
])
def test_a_submission_that_does_not_load_gets_complete_results(url, tmp_path, source, says):
    (tmp_path / "student.py").write_text(source)
    r = grade(url, tmp_path / "student.py", tmp_path / "results.json")
    assert_complete(r)
    assert r["score"] == 0.0 and says in r["output"]
    assert all(t["status"] == "failed" and t["output"] for t in r["tests"])
    text = json.dumps(r)
    assert str(ROOT) not in text and "autograde.py" not in text and str(tmp_path) not in text
    assert "student.py" in r["output"] or says != "SyntaxError"


def test_a_traceback_shows_the_students_frames_and_no_grader_path(url, tmp_path):
    (tmp_path / "raises.py").write_text(RAISES)
    r = grade(url, tmp_path / "raises.py", tmp_path / "results.json")
    out = r["tests"][0]["output"]
    assert 'File "raises.py", line 2, in softmax_backward' in out
    assert "autograde.py" not in json.dumps(r) and str(tmp_path) not in json.dumps(r)


def test_the_sandbox_down_still_writes_complete_results_and_says_so(tmp_path):
    with socket.socket() as s:                  # a free port: nothing listens there
        s.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{s.getsockname()[1]}"
    done = run(down, ROOT / "examples" / "student_softmax.py", tmp_path / "results.json")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"{down}/api/v1/check" in done.stderr and "unreachable" in done.stderr
    r = json.loads((tmp_path / "results.json").read_text())
    assert_complete(r)
    assert r["score"] == 0.0 and "not a problem with your code" in r["output"]
    assert down not in json.dumps(r)            # the grader's address stays in its log

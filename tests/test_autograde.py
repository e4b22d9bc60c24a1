"""examples/autograde.py grades a softmax backward through the client against a live
sandbox and writes Gradescope's results.json (issue 12)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.sandbox_server import ROOT

WRONG = '''
import numpy as np
def softmax_backward(x, g):
    s = np.exp(x - x.max(axis=-1, keepdims=True))
    s = s / s.sum(axis=-1, keepdims=True)
    return s * g            # forgets the - sum(g * s) term
'''
RAISES = "def softmax_backward(x, g):\n    raise RuntimeError('todo')\n"


def grade(url: str, submission: Path, results: Path) -> dict:
    subprocess.run([sys.executable, str(ROOT / "examples" / "autograde.py"), "--url", url,
                    "--submission", str(submission), "--results", str(results)],
                   check=True, capture_output=True, text=True, cwd=ROOT)
    return json.loads(results.read_text())


def test_a_correct_submission_scores_full_marks(url, tmp_path):
    r = grade(url, ROOT / "examples" / "student_softmax.py", tmp_path / "results.json")
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

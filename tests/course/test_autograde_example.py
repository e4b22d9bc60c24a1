"""examples/autograde.py, a thin example over `glassllm grade`: no server, Gradescope's
results.json, every test with its max_score, the expected numbers never shown."""

from __future__ import annotations

import json
import subprocess
import sys

import jsonschema
from paths import ROOT

WRONG = '''
import numpy as np
def softmax_backward(x, g):
    s = np.exp(x - x.max(axis=-1, keepdims=True))
    s = s / s.sum(axis=-1, keepdims=True)
    return s * g            # forgets the - sum(g * s) term
'''


def run(tmp_path, submission):
    out = tmp_path / "results.json"
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "autograde.py"),
                           "--submission", str(submission), "--results", str(out)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    results = json.loads(out.read_text())
    schema = json.loads((ROOT / "docs" / "schemas" / "gradescope-results.schema.json")
                        .read_text())
    jsonschema.validate(results, schema)
    assert results["max_score"] == 8.0 and len(results["tests"]) == 5
    return results


def test_the_example_grades_right_and_wrong_without_a_server(tmp_path):
    right = run(tmp_path, ROOT / "examples" / "student_softmax.py")
    assert right["score"] == 8.0
    assert [t["status"] for t in right["tests"]] == ["passed"] * 5
    (tmp_path / "wrong.py").write_text(WRONG)
    wrong = run(tmp_path, tmp_path / "wrong.py")
    assert wrong["score"] == 0.0
    assert all(t["status"] == "failed" and "dx: wrong:" in t["output"]
               for t in wrong["tests"])

"""otter-grader's autograder calling `glassllm grade`: the real `otter run` (PyPI
otter-grader, no Docker, in .tools/otter: tools/otter_grader.py) grades a sample notebook.
The otter test does not check in the student's kernel: it runs `glassllm grade` on the
submitted notebook, whose code then runs again in glassllm's limited child process
(docs/grading.md#otter-grader-and-nbgrader)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile

import pytest
from paths import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import otter_grader

EXERCISE = ROOT / "examples" / "softmax-backward.toml"
CHECK = (">>> import glob, json, subprocess\n"
         ">>> nb = sorted(glob.glob('*.ipynb'))[0]\n"
         ">>> r = subprocess.run([{python!r}, '-m', 'glassllm.apps.cli', 'grade',"
         " 'softmax-backward.toml', nb, '--format', 'json'], capture_output=True, text=True)\n"
         ">>> report = json.loads(r.stdout)\n"
         ">>> [t['name'] for t in report['tests'] if t['score'] < t['max_score']]\n"
         "[]")


def _autograder(path):
    test = {"name": "q1", "points": 8, "suites": [{
        "type": "doctest", "scored": True, "setup": "", "teardown": "",
        "cases": [{"code": CHECK.format(python=sys.executable), "hidden": False,
                   "locked": False}]}]}
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("otter_config.json", json.dumps({}))
        z.writestr("tests/q1.py", "OK_FORMAT = True\n\ntest = " + repr(test) + "\n")
        z.write(EXERCISE, "files/softmax-backward.toml")


def _notebook(path, source):
    cells = [{"cell_type": "markdown", "id": "a", "metadata": {},
              "source": "# Softmax's backward"},
             {"cell_type": "code", "id": "b", "metadata": {}, "execution_count": None,
              "outputs": [],
              "source": "!echo a shell escape, not run by glassllm grade\nimport numpy as np"},
             {"cell_type": "code", "id": "c", "metadata": {}, "execution_count": None,
              "outputs": [], "source": source}]
    path.write_text(json.dumps({"cells": cells, "nbformat": 4, "nbformat_minor": 5,
                                "metadata": {"kernelspec": {"name": "python3",
                                                            "display_name": "Python 3",
                                                            "language": "python"}}}))


@pytest.mark.skipif(not otter_grader.ready(), reason="otter-grader is not installed in"
                    " .tools/otter: python tools/otter_grader.py install")
def test_otter_run_grades_a_notebook_through_glassllm_grade(tmp_path):
    """One run (otter's start costs ~15 s here): a right notebook gets otter's 8 points
    only through glassllm's report (a failed `glassllm grade` fails the doctest); the
    wrong and failing submissions are the other grader tests' business."""
    right = True
    _autograder(tmp_path / "autograder.zip")
    source = (ROOT / "examples" / "student_softmax.py").read_text()
    _notebook(tmp_path / "hw.ipynb", source)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    done = subprocess.run([str(otter_grader.OTTER), "run", "-a", "autograder.zip", "-o",
                           str(tmp_path), "--no-logo", "hw.ipynb"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((tmp_path / "results.json").read_text())
    (q1,) = [t for t in results["tests"] if t["name"] == "q1"]
    assert (q1["score"], q1["max_score"]) == ((8.0 if right else 0.0), 8.0)

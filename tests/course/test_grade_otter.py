"""otter-grader grading outside the student's kernel: the real `otter run` (PyPI
otter-grader, no Docker, in .tools/otter: tools/otter_grader.py) with glassllm's plugin
(glassllm.course.grader.otter_plugin; docs/grading.md#otter-grader). An honest notebook
gets the question's points from `glassllm grade`; a cheating one, submitted as otter's
export zip with a poisoned `.OTTER_LOG` and a module that would shadow the kernel's own,
gets nothing, and none of its code runs in otter's kernel or process."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import zipfile

import pytest
from paths import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import otter_grader
from student_notebooks import cheat, marker_code, notebook

EXERCISE = ROOT / "examples" / "softmax-backward.toml"
RIGHT = (ROOT / "examples" / "student_softmax.py").read_text()
PLUGIN = "glassllm.course.grader.otter_plugin.GlassllmGrade"
# fails unless the plugin replaces its result: a missing plugin never gives the points
PLACEHOLDER = (">>> 'graded by glassllm outside the kernel: otter_plugin.GlassllmGrade'\n"
               "'the plugin is not configured'")

needs_otter = pytest.mark.skipif(not otter_grader.ready(), reason="otter-grader is not"
                                 " installed in .tools/otter: python tools/otter_grader.py"
                                 " install")


def _autograder(path, config):
    test = {"name": "q1", "points": 8, "suites": [{
        "type": "doctest", "scored": True, "setup": "", "teardown": "",
        "cases": [{"code": PLACEHOLDER, "hidden": False, "locked": False}]}]}
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("otter_config.json", json.dumps({"plugins": [{PLUGIN: config}]}))
        z.writestr("tests/q1.py", "OK_FORMAT = True\n\ntest = " + repr(test) + "\n")
        z.write(EXERCISE, "softmax-backward.toml")            # the zip's root, not files/
        z.writestr("salt", "an-otter-course-salt\n")
        z.writestr("roster.csv", "student_id,display_name\nAda,Ada\n")


def _otter_run(tmp_path, submission):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV",
                                                                     "GLASSLLM_"))}
    return subprocess.run([str(otter_grader.OTTER), "run", "-a", "autograder.zip", "-o",
                           str(tmp_path), "--no-logo", submission], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)


def _q1(tmp_path):
    results = json.loads((tmp_path / "results.json").read_text())
    (q1,) = [t for t in results["tests"] if t["name"] == "q1"]
    return q1


@needs_otter
def test_otter_run_gives_an_honest_notebook_its_points_from_glassllm_grade(tmp_path):
    """The question's 8 points come from glassllm's report (the placeholder test alone
    fails), with its tests' verdicts in otter's output."""
    _autograder(tmp_path / "autograder.zip", {
        "questions": {"q1": "softmax-backward.toml"}, "salt_file": "salt",
        "roster": "roster.csv", "student": " ada "})
    (tmp_path / "hw.ipynb").write_text(json.dumps(notebook(RIGHT)))
    done = _otter_run(tmp_path, "hw.ipynb")
    assert done.returncode == 0, done.stdout + done.stderr
    q1 = _q1(tmp_path)
    assert (q1["score"], q1["max_score"]) == (8.0, 8.0)
    assert "q1 - generated" in q1["output"] and "right" in q1["output"]
    assert "glassllm: q1: softmax-backward: 8 / 8, student 'Ada'" in done.stdout


@needs_otter
def test_otter_run_gives_a_cheating_submission_nothing(tmp_path):
    """The cheats, all in one submission (otter's export zip): a notebook that patches
    subprocess, json, builtins, NumPy and otter's GradingResults, and writes a fake results
    file; a `.OTTER_LOG` whose unpickling runs code (otter reads it with dill); an
    `ipykernel_launcher.py` that the kernel, started in the submission's folder with
    ``python -m``, would run instead of its own. Scores 0, and no marker says any of it
    ran in otter's kernel or process."""
    _autograder(tmp_path / "autograder.zip", {
        "questions": {"q1": "softmax-backward.toml"}, "salt_file": "salt",
        "roster": "roster.csv", "student": "Ada"})
    markers = tmp_path / "markers"
    markers.mkdir()
    os.chmod(markers, 0o777)                  # so a marker is written whoever runs it

    class Poison:
        def __reduce__(self):
            return (exec, (marker_code(markers / "otter-log"),))

    with zipfile.ZipFile(tmp_path / "hw.zip", "w") as z:
        z.writestr("hw.ipynb", json.dumps(notebook(cheat(markers))))
        z.writestr(".OTTER_LOG", pickle.dumps(Poison()))
        z.writestr("ipykernel_launcher.py", marker_code(markers / "launcher"))
        z.writestr("otter.py", marker_code(markers / "otter-module"))
    done = _otter_run(tmp_path, "hw.zip")
    assert done.returncode == 0, done.stdout + done.stderr
    q1 = _q1(tmp_path)
    assert (q1["score"], q1["max_score"]) == (0.0, 8.0)
    assert "wrong" in q1["output"]
    assert sorted(p.name for p in markers.iterdir()) == [], done.stdout

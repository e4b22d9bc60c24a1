"""nbgrader grading outside the student's kernel: nbgrader's real ``generate_assignment``
and ``autograde`` (PyPI nbgrader 0.9, in .tools/nbgrader: tools/nbgrader_grader.py) on a
course directory with its SQLite gradebook, through glassllm's preprocessor
(glassllm.course.grader.nbgrader_plugin; docs/grading.md#nbgrader). One autograde of three
students: the honest notebook gets the glassllm cell's points, the cheating one nothing
(its code never runs in nbgrader's processes), the one not on the roster no grade at all;
then, with nbgrader's kernel on, a cheat that runs in the kernel still scores nothing."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from paths import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import nbgrader_grader
from student_notebooks import cheat, marker_code, notebook

from glassllm.course.grader import nbgrader_plugin

EXERCISE = ROOT / "examples" / "softmax-backward.toml"
RIGHT = (ROOT / "examples" / "student_softmax.py").read_text()
CONFIG = """
import os
from glassllm.course.grader import nbgrader_plugin
c = get_config()
c.CourseDirectory.course_id = "glassllm-course"
c.Execute.timeout = 30
nbgrader_plugin.configure(c, exercises={"softmax-tests": "softmax-backward.toml"},
                          salt_file="salt", roster="roster.csv",
                          kernel=os.environ.get("WITH_KERNEL") == "1")
"""


def _meta(grade_id, **kw):
    return {"nbgrader": {"grade_id": grade_id, "schema_version": 3, "grade": False,
                         "solution": False, "locked": False, **kw}}


def _source_notebook():
    return notebook("", extra=[]) | {"cells": [
        {"cell_type": "markdown", "id": "t", "metadata": {}, "source": "# Softmax's backward"},
        {"cell_type": "code", "id": "answer", "execution_count": None, "outputs": [],
         "metadata": _meta("softmax-answer", solution=True),
         "source": "import numpy as np\n### BEGIN SOLUTION\n" + RIGHT + "\n### END SOLUTION"},
        {"cell_type": "code", "id": "tests", "execution_count": None, "outputs": [],
         "metadata": _meta("softmax-tests", grade=True, locked=True, points=8),
         "source": "# graded by glassllm grade outside this kernel (nbgrader_plugin)"},
        {"cell_type": "code", "id": "other", "execution_count": None, "outputs": [],
         "metadata": _meta("other-tests", grade=True, locked=True, points=2),
         "source": "assert softmax_backward is not None"}]}


def _nbgrader(course, *args, kernel=False):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV",
                                                                     "GLASSLLM_", "JUPYTER"))}
    env["WITH_KERNEL"] = "1" if kernel else "0"
    env["PATH"] = f"{nbgrader_grader.PYTHON.parent}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run([str(nbgrader_grader.NBGRADER_BIN), *args], cwd=course, env=env,
                          capture_output=True, text=True, timeout=300)


def _submit(course, student, source, files=()):
    released = json.loads((course / "release/ps1/ps1.ipynb").read_text())
    (answer,) = [c for c in released["cells"] if c["id"] == "answer"]
    answer["source"] = source
    folder = course / "submitted" / student / "ps1"
    folder.mkdir(parents=True)
    (folder / "ps1.ipynb").write_text(json.dumps(released))
    for name, text in files:
        (folder / name).write_text(text)


def _grades(course):
    """{student: {grade_id: auto_score}} from nbgrader's own gradebook."""
    code = ("import json\nfrom nbgrader.api import Gradebook\n"
            "with Gradebook('sqlite:///gradebook.db') as gb:\n"
            "    out = {s.id: {g.name: g.auto_score for g in"
            " gb.find_submission_notebook('ps1', 'ps1', s.id).grades} for s in gb.students}\n"
            "print(json.dumps(out))\n")
    done = subprocess.run([str(nbgrader_grader.PYTHON), "-c", code], cwd=course,
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


@pytest.mark.skipif(not nbgrader_grader.ready(), reason="nbgrader is not installed in"
                    " .tools/nbgrader: python tools/nbgrader_grader.py install")
def test_nbgrader_autograde_sets_the_glassllm_cell_outside_the_kernel(tmp_path):
    course = tmp_path / "course"
    (course / "source/ps1").mkdir(parents=True)
    (course / "nbgrader_config.py").write_text(CONFIG)
    (course / "softmax-backward.toml").write_text(EXERCISE.read_text())
    (course / "salt").write_text("an-nbgrader-course-salt\n")
    (course / "roster.csv").write_text("student_id,display_name\nAda,Ada\nbob,Bob\ncat,C\n")
    (course / "source/ps1/ps1.ipynb").write_text(json.dumps(_source_notebook()))
    done = _nbgrader(course, "generate_assignment", "ps1")
    assert done.returncode == 0, done.stderr
    markers = tmp_path / "markers"
    markers.mkdir()
    os.chmod(markers, 0o777)
    _submit(course, "ada", "import numpy as np\n" + RIGHT)
    # the cheat, and files the kernel (started in the student's folder) would import first
    _submit(course, "bob", cheat(markers), files=[
        ("ipykernel_launcher.py", marker_code(markers / "launcher")),
        ("sitecustomize.py", marker_code(markers / "sitecustomize")),
        ("nbgrader.py", marker_code(markers / "nbgrader-module"))])
    _submit(course, "eve", "import numpy as np\n" + RIGHT)          # not on the roster
    done = _nbgrader(course, "autograde", "ps1")
    log = done.stdout + done.stderr
    assert done.returncode != 0                       # eve's autograde failed, by name
    assert ("glassllm could not grade eve/ps1/ps1: nbgrader student 'eve': nbgrader"
            " student 'eve' is not on the course's roster (roster.csv, 3 students)") in log
    grades = _grades(course)
    assert grades["ada"] == {"softmax-tests": 8.0, "other-tests": 0.0}   # other: not run
    assert grades["bob"]["softmax-tests"] == 0.0
    assert grades["eve"]["softmax-tests"] is None     # no score: not a 0
    assert sorted(p.name for p in markers.iterdir()) == [], log
    graded = json.loads((course / "autograded/ada/ps1/ps1.ipynb").read_text())
    (cell,) = [c for c in graded["cells"] if c["id"] == "tests"]
    assert "softmax-backward: 8 / 8 points, graded by glassllm grade" in \
        "".join(cell["outputs"][0]["text"])
    (answer,) = [c for c in graded["cells"] if c["id"] == "answer"]
    assert "def softmax_backward" in "".join(answer["source"])   # for the person grading

    # nbgrader's kernel on (an assignment mixing nbgrader's own tests): the cheat runs in
    # the kernel, and the glassllm cell, set after it, still scores nothing
    _submit(course, "cat", cheat(markers))
    done = _nbgrader(course, "autograde", "ps1", "--student", "cat", kernel=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(p.name for p in markers.iterdir()) == ["kernel"]
    assert _grades(course)["cat"]["softmax-tests"] == 0.0

    # a gradebook holding two students whose ids fold alike is refused, naming both
    _submit(course, "ADA", "import numpy as np\n" + RIGHT)
    done = _nbgrader(course, "autograde", "ps1", "--student", "ADA")
    assert done.returncode != 0
    assert re.search(r"the nbgrader gradebook: student '(ADA|ada)' \(id '\1'\) and student"
                     r" '(?!\1)(ADA|ada)' \(id '\2'\) are the same once trimmed",
                     done.stdout + done.stderr), done.stderr
    assert _grades(course)["ADA"]["softmax-tests"] is None


def test_the_grade_cells_outputs_say_what_nbgrader_scores():
    """nbgrader's determine_grade reads a code cell's outputs: a stream alone is full
    marks, an execute_result a number of points (partial credit), an error 0."""
    def report(score):
        return {"exercise": "softmax-backward", "score": score, "max_score": 8.0,
                "tests": [{"name": "generated", "score": score, "max_score": 8.0,
                           "message": "dx: right", "table": "", "output": ""}]}

    full, half, none = (nbgrader_plugin.outputs(report(s), 10.0) for s in (8.0, 4.0, 0.0))
    assert [o["output_type"] for o in full] == ["stream"]
    assert "8 / 8 points" in full[0]["text"] and "dx: right" in full[0]["text"]
    assert [o["output_type"] for o in half] == ["stream", "execute_result"]
    assert half[1]["data"]["text/plain"] == "5.0"          # 4 / 8 of the cell's 10 points
    assert [o["output_type"] for o in none] == ["stream", "error"]
    assert none[1]["evalue"] == "softmax-backward: 0 / 8 points"

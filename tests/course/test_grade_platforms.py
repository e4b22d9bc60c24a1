"""`glassllm grade --platform`: PrairieLearn's /grade and Gradescope's /autograder layouts
read as their documentation gives them, the results where each platform reads them, valid
against the schemas of docs/schemas/ (the grader images run exactly this)."""

from __future__ import annotations

import json
import shutil

import jsonschema
import pytest
from paths import ROOT

from glassllm.apps.cli import main

EXERCISE = ROOT / "examples" / "softmax-backward.toml"
RIGHT = ROOT / "examples" / "student_softmax.py"


def _schema(name):
    return json.loads((ROOT / "docs" / "schemas" / f"{name}-results.schema.json").read_text())


@pytest.mark.parametrize("platform", ["prairielearn", "gradescope"])
def test_each_platform_layout_is_read_and_its_results_written(tmp_path, platform):
    if platform == "prairielearn":
        tests, student = tmp_path / "grade/tests", tmp_path / "grade/student"
        (tmp_path / "grade/data").mkdir(parents=True)
        (tmp_path / "grade/data/data.json").write_text(json.dumps(
            {"params": {"student": "ada"}, "variant_seed": 7, "submitted_answers": {}}))
        out = tmp_path / "grade/results/results.json"
    else:
        tests, student = tmp_path / "autograder/source", tmp_path / "autograder/submission"
        out = tmp_path / "autograder/results/results.json"
        tests.mkdir(parents=True)
        (tmp_path / "autograder/submission_metadata.json").write_text(json.dumps(
            {"users": [{"email": "ada@example.edu", "id": 1, "name": "Ada"}]}))
    tests.mkdir(parents=True, exist_ok=True)
    student.mkdir(parents=True)
    # the course's salt and roster where the platform's layout keeps them
    course = tests if platform == "gradescope" else tmp_path / "grade/serverFilesCourse/glassllm"
    course.mkdir(parents=True, exist_ok=True)
    (course / "salt").write_text("a-course-salt\n")
    (course / "roster.csv").write_text("student_id,display_name,email\n"
                                       "ada,Ada,ada@example.edu\n")
    shutil.copyfile(EXERCISE, tests / "softmax-backward.toml")
    shutil.copyfile(RIGHT, student / "answer.py")
    assert main(["grade", "--platform", platform, "--root", str(tmp_path)]) == 0
    results = json.loads(out.read_text())
    jsonschema.validate(results, _schema(platform))
    assert results["score"] == (1.0 if platform == "prairielearn" else 8.0)
    # no submission at all: every test 0, the results still complete
    (student / "answer.py").unlink()
    assert main(["grade", "--platform", platform, "--root", str(tmp_path)]) == 0
    results = json.loads(out.read_text())
    jsonschema.validate(results, _schema(platform))
    assert results["score"] == 0 and len(results["tests"]) == 5
    assert str(tmp_path) not in out.read_text()

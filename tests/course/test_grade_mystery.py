"""`glassllm grade` of a mystery file (kind = "mystery") and a JSON proof: the pure
function `glassllm.course.zoo.mystery.grade` behind the grader's formats, one test per
part (the node, the input), half the points each; a right proof scores full in every
format, valid against the schemas of docs/schemas/; no output names the bug."""

from __future__ import annotations

import json

import jsonschema
import pytest
from paths import ROOT

from glassllm.apps.cli import main
from glassllm.course.grader import formats, grade_submission, load_exercise
from glassllm.course.zoo import BUGS
from glassllm.course.zoo import mystery as zoo_mystery
from glassllm.sandbox import expr

MLP = zoo_mystery.MYSTERIES_DIR / "mystery-mlp.toml"
SALT = "a-course-salt"
SCHEMAS = ROOT / "docs" / "schemas"


def _student_with(m, bug_id, salt=SALT):
    """A student whose bug in `m` under `salt` is `bug_id`."""
    for k in range(500):
        if zoo_mystery.bug_for(m, f"s{k}", salt).id == bug_id:
            return f"s{k}"
    raise AssertionError(f"no student has {bug_id}")


def _node_of(m, op):
    nodes = expr.evaluate(m.expression, m.variables)["nodes"]
    return next(n["text"] for n in nodes if n["op"] == op)


def _proof(tmp_path, body, name="proof.json"):
    path = tmp_path / name
    path.write_text(body if isinstance(body, str) else json.dumps(body))
    return path


def _no_bug_id(text):
    for bug in BUGS:
        assert bug.id not in text, bug.id


@pytest.mark.parametrize("file", sorted(zoo_mystery.MYSTERIES_DIR.glob("*.toml")),
                         ids=lambda p: p.stem)
def test_a_right_proof_scores_full_in_every_format(tmp_path, file):
    m = load_exercise(file)
    assert isinstance(m, zoo_mystery.Mystery)
    bug = zoo_mystery.bug_for(m, "ada", SALT)
    proof = _proof(tmp_path, {"node": _node_of(m, bug.op), "variables": {}})
    report = grade_submission(file, proof, "ada", SALT)
    assert [t.name for t in report.tests] == ["node", "input"]
    assert (report.score, report.max_score) == (m.points, m.points)
    assert [t.max_score for t in report.tests] == [m.points / 2] * 2
    gs = json.loads(formats.render(report, "gradescope"))
    jsonschema.validate(gs, json.loads((SCHEMAS / "gradescope-results.schema.json").read_text()))
    assert gs["score"] == gs["max_score"] == m.points
    assert [t["status"] for t in gs["tests"]] == ["passed", "passed"]
    pl = json.loads(formats.render(report, "prairielearn"))
    jsonschema.validate(pl, json.loads((SCHEMAS / "prairielearn-results.schema.json")
                                       .read_text()))
    assert pl["score"] == 1.0
    own = json.loads(formats.render(report, "json"))
    assert own["score"] == m.points and all(t["passed"] for t in own["tests"])
    text = formats.render(report, "text")
    assert f"{m.points:g} / {m.points:g} points" in text
    for fmt in formats.FORMATS:
        _no_bug_id(formats.render(report, fmt))


def test_the_grade_is_the_pure_functions_and_the_salt_picks_the_bug(tmp_path):
    m = zoo_mystery.load(MLP)
    student = _student_with(m, "tanh-missing-square")
    proof = _proof(tmp_path, {"node": "tanh(x)"})
    pure = zoo_mystery.grade(m, student, "tanh(x)", None, SALT)
    report = grade_submission(MLP, proof, student, SALT)
    assert report.score == pure.score == m.points
    # the same student under another salt hunts another bug: the node is then wrong
    other = next(s for s in ("practice", "x", "y", "z", "w")
                 if zoo_mystery.bug_for(m, student, s).op != "tanh")
    assert grade_submission(MLP, proof, student, other).tests[0].score == 0.0


def test_a_wrong_node_scores_the_input_only(tmp_path):
    m = zoo_mystery.load(MLP)
    student = _student_with(m, "tanh-missing-square")
    report = grade_submission(MLP, _proof(tmp_path, {"node": "sigmoid(x @ w3)"}), student,
                              SALT)
    node, given = report.tests
    assert (node.score, given.score) == (0.0, m.points / 2)
    assert "computes its gradient correctly" in node.message
    assert given.message.startswith("the input exposes it")
    for fmt in formats.FORMATS:
        _no_bug_id(formats.render(report, fmt))


def test_an_input_that_does_not_expose_scores_the_node_only(tmp_path):
    m = zoo_mystery.load(MLP)
    student = _student_with(m, "tanh-missing-square")
    every_silu = [[True] * 4 for _ in range(3)]   # where() never takes tanh's branch
    proof = _proof(tmp_path, {"node": "tanh(x)", "variables": {"c": {"value": every_silu}}})
    report = grade_submission(MLP, proof, student, SALT)
    node, given = report.tests
    assert (node.score, given.score) == (m.points / 2, 0.0)
    assert given.message.startswith("the input does not expose it")


@pytest.mark.parametrize(("body", "field"), [
    ("{not json", "is not JSON"),
    ("[1, 2]", "the proof must be an object"),
    ({"variables": {}}, "node: missing"),
    ({"node": 3.5}, "node: a node id"),
    ({"node": "nope(x)"}, "node: the case has no node"),
    ({"node": 4, "variables": [1]}, "variables: an object"),
    ({"node": 4, "variables": {"q": {"value": 1}}}, "variables: the case has no variable 'q'"),
    ({"node": 4, "variables": {"x": {"value": [[1, 2]]}}}, "variables: "),
    ({"node": 4, "bug": "x"}, "bug: not a field of a proof"),
], ids=["json", "array", "no-node", "node-type", "node-unknown", "variables-type",
        "variables-unknown", "variables-shape", "extra-key"])
def test_a_malformed_proof_scores_nothing_and_names_the_field(tmp_path, body, field):
    report = grade_submission(MLP, _proof(tmp_path, body), "ada", SALT)
    assert report.score == 0.0 and report.max_score == 4.0 and len(report.tests) == 2
    for t in report.tests:
        assert t.message.startswith("0 points: ") and field in t.message, t.message
    jsonschema.validate(json.loads(formats.render(report, "gradescope")),
                        json.loads((SCHEMAS / "gradescope-results.schema.json").read_text()))


def test_code_is_not_a_proof(tmp_path):
    report = grade_submission(MLP, _proof(tmp_path, "print(1)\n", "proof.py"), "ada", SALT)
    assert report.score == 0.0
    assert "a mystery takes a .json proof" in report.tests[0].message


def test_the_command_grades_a_mystery_and_a_broken_one_exits_2(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("GLASSLLM_COURSE_SALT", SALT)
    m = zoo_mystery.load(MLP)
    proof = _proof(tmp_path, {"node": _node_of(m, zoo_mystery.bug_for(m, "ada", SALT).op)})
    out = tmp_path / "results.json"
    assert main(["grade", str(MLP), str(proof), "--student", "ada", "--format",
                 "prairielearn", "--results", str(out)]) == 0
    assert json.loads(out.read_text())["score"] == 1.0
    broken = tmp_path / "broken.toml"
    broken.write_text(MLP.read_text().replace('points = 4', 'points = "four"'))
    assert main(["grade", str(broken), str(proof), "--format", "json"]) == 2
    err = capsys.readouterr().err
    assert "points" in err and "a number from 0 to 1000" in err

"""`glassllm grade` of a JSON of claimed arrays: each mistake pattern named with the score
it must give, every format as its grader documents it (validated against the schemas in
docs/schemas/, written from the documentation), the expected numbers never shown when the
exercise hides them."""

from __future__ import annotations

import base64
import json
import zlib

import jsonschema
import numpy as np
import pytest
from paths import ROOT

from glassllm.course import build_case, load
from glassllm.course.exercise import SHIPPED
from glassllm.course.grader import formats, grade_submission
from glassllm.course.grader.heatmap import RIGHT, WRONG

CE = SHIPPED / "softmax-ce-logits.toml"
SCHEMAS = ROOT / "docs" / "schemas"


def _expected(path, key, student="ada"):
    return build_case(load(path), student).expected[key]


def _submit(tmp_path, answers, path=CE, student="ada", **kw):
    sub = tmp_path / "answers.json"
    sub.write_text(json.dumps({"answers": {k: np.asarray(v).tolist() if not isinstance(v, str)
                                           else v for k, v in answers.items()}}))
    return grade_submission(path, sub, student, **kw)


E = _expected(CE, "logits")                        # (4, 5): N = 4 rows
ROWS = np.array([False, True, False, False])[:, None] & np.ones((1, 5), bool)


def _with_nan(e):
    out = e.copy()
    out[1, 2] = np.nan
    return out


PATTERNS = {
    "shape": (E[:, :4], "shape"),
    "transposed": (E.T, "transpose"),
    "nan_where_finite": (_with_nan(E), "NaN"),
    "not_finite": (np.where(E > 0.1, np.inf, E), "infinit"),
    "sign_flipped": (-E, "sign"),
    "scaled": (E * 4, "N"),
    "some_rows_wrong": (np.where(ROWS, E + 0.5, E), "row"),
    "some_columns_wrong": (np.where(np.arange(5) == 3, E + 0.5, E), "column"),
    "mostly_right": (np.where(np.arange(20).reshape(4, 5) == 7, E + 0.5, E), "element"),
    "unrelated": (np.random.default_rng(1).normal(size=(4, 5)), ""),
}


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_each_mistake_pattern_scores_nothing_and_is_named(tmp_path, name):
    claimed, word = PATTERNS[name]
    report = _submit(tmp_path, {"logits": claimed})
    (test,) = report.tests
    assert (report.score, report.max_score, test.score) == (0.0, 5.0, 0.0)
    assert test.verdicts["logits"]["pattern"]["name"] == name
    assert test.message.startswith("logits: wrong: ") and word in test.message
    # the exercise hides "expected": no expected number anywhere in what is written
    for fmt in formats.FORMATS:
        text = formats.render(report, fmt)
        for value in E.ravel()[:6]:
            assert f"{value:.6f}" not in text and repr(float(value)) not in text


def test_a_right_answer_to_its_digits_scores_every_point(tmp_path):
    report = _submit(tmp_path, {"logits": [[float(f"{x:.5g}") for x in row] for row in E]})
    assert (report.score, report.max_score) == (5.0, 5.0)
    assert report.tests[0].message == "logits: right (4 significant digits)"
    assert "20 of 20 elements right" in report.tests[0].table


def test_the_scaled_mistake_names_its_factor_and_a_broadcast_not_summed_back(tmp_path):
    bias = SHIPPED / "broadcast-bias.toml"
    case = build_case(load(bias), "ada")
    g = case.grad_output                                   # (4, 2): b's gradient per row
    report = _submit(tmp_path, {"b": g, "w": case.expected["w"] / 4}, path=bias)
    b, w = report.tests
    assert (b.score, w.score, report.score) == (0.0, 0.0, 0.0)
    assert b.verdicts["b"]["pattern"]["name"] == "broadcast_not_summed"
    assert w.verdicts["w"]["pattern"]["name"] == "scaled" and "1/N" in w.message


def test_the_masked_ones_wrong(tmp_path):
    path = SHIPPED / "masked-softmax.toml"
    case = build_case(load(path), "ada")
    mask = case.masks["mask"]
    report = _submit(tmp_path, {"scores": np.where(mask, 0.25, case.expected["scores"])},
                     path=path)
    assert report.tests[0].verdicts["scores"]["pattern"]["name"] == "masked_wrong"
    assert report.score == 0.0


def test_partial_credit_per_answer_and_missing_or_malformed_answers(tmp_path):
    bias = SHIPPED / "broadcast-bias.toml"
    case = build_case(load(bias), "ada")
    report = _submit(tmp_path, {"b": case.expected["b"], "w": "not an array"}, path=bias)
    assert (report.score, report.max_score) == (1.5, 3.0)
    assert report.tests[1].message.startswith("0 points: ")
    report = _submit(tmp_path, {"b": case.expected["b"]}, path=bias)
    assert report.tests[1].message == "0 points: no answer 'w' (the answers are: b, w)"
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    report = grade_submission(bias, bad, "ada")
    assert report.score == 0 and all("is not JSON" in t.message for t in report.tests)


def test_another_student_gets_other_numbers(tmp_path):
    assert _submit(tmp_path, {"logits": E}, student="alan").score == 0.0


def _schema(name):
    return json.loads((SCHEMAS / name).read_text())


@pytest.mark.parametrize("claimed", [E, -E, E[:, :3]], ids=["right", "wrong", "shape"])
def test_gradescope_and_prairielearn_results_validate_against_their_schemas(tmp_path, claimed):
    report = _submit(tmp_path, {"logits": claimed})
    gs = json.loads(formats.render(report, "gradescope"))
    jsonschema.validate(gs, _schema("gradescope-results.schema.json"))
    assert (gs["score"], gs["max_score"]) == (report.score, 5.0)
    assert gs["tests"][0]["status"] == ("passed" if report.score else "failed")
    pl_text = formats.render(report, "prairielearn")
    pl = json.loads(pl_text)
    jsonschema.validate(pl, _schema("prairielearn-results.schema.json"))
    assert len(pl_text.encode()) < 1_000_000
    assert pl["score"] == report.score / 5.0
    assert pl["tests"][0]["max_points"] == 5.0
    for schema in SCHEMAS.glob("*.json"):
        jsonschema.Draft202012Validator.check_schema(json.loads(schema.read_text()))
        assert "https://" in json.loads(schema.read_text())["description"]


def _pixels(png: bytes) -> np.ndarray:
    """A PNG of `heatmap.png` decoded with zlib alone (filter 0 rows, RGB)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    w, h = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    pos, data = 8, b""
    while pos < len(png):
        n = int.from_bytes(png[pos:pos + 4], "big")
        if png[pos + 4:pos + 8] == b"IDAT":
            data += png[pos + 8:pos + 8 + n]
        pos += 12 + n
    rows = np.frombuffer(zlib.decompress(data), np.uint8).reshape(h, 1 + 3 * w)
    assert (rows[:, 0] == 0).all()
    return rows[:, 1:].reshape(h, w, 3)


def test_the_heatmap_shows_where_the_wrong_elements_are(tmp_path):
    report = _submit(tmp_path, {"logits": np.where(ROWS, E + 0.5, E)})
    pl = json.loads(formats.render(report, "prairielearn"))
    (image,) = pl["tests"][0]["images"]
    png = base64.b64decode(image["url"].split(",", 1)[1])
    pixels = _pixels(png)
    cell = (pixels.shape[0] - 1) // 4
    centres = pixels[cell // 2::cell, cell // 2::cell][:4, :5]
    wrong = (centres == WRONG).all(axis=-1)
    assert (wrong == ROWS).all() and ((centres == RIGHT).all(axis=-1) == ~ROWS).all()
    assert report.tests[0].heatmap == png
    # Gradescope takes no image; a right answer has no heatmap
    assert "data:image" not in formats.render(report, "gradescope")
    assert _submit(tmp_path, {"logits": E}).tests[0].heatmap is None

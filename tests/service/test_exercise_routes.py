"""The exercise routes (docs/exercises.md#http): the list, one exercise for a student,
a submission graded at the exercise's feedback level, hints one at a time; the student id
from the header, the query or the body; the record's hook (an `AttemptStore`)."""

from __future__ import annotations

import datetime as dt
import json

import numpy as np
import pytest
from fastapi.testclient import TestClient

from glassllm.course import build_case
from glassllm.course.attempts import AttemptsExhausted, KeyReused, NoRecord, Recorded
from glassllm_service.app import create_app
from glassllm_service.markdown_tree import tree
from glassllm_service.settings import Settings

SALT = "a course's salt"


@pytest.fixture(scope="module")
def practice():
    return TestClient(create_app(Settings()))


def course_dir(tmp_path, **fields) -> str:
    """A course directory holding one exercise, with the top-level `fields` added."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    head = "".join(f"{k} = {json.dumps(v) if not isinstance(v, dt.datetime) else v.isoformat()}\n"
                   for k, v in fields.items())
    (tmp_path / "ce.toml").write_text(head + '''
id = "course-ce"
title = "Cross-entropy, by hand"
text = "Work out **the gradient** of the logits. <script>alert(1)</script>"
hints = ["Softmax first.", "Then subtract the one-hot.", "Divide by N."]
[case]
expression = "cross_entropy(logits, targets)"
[case.variables.logits]
shape = [3, 4]
distribution = "normal"
decimals = 1
[case.variables.targets]
shape = [3]
distribution = "integers"
high = 4
[answer]
kind = "grads"
grads = ["logits"]
[[answer.factors]]
name = "N"
says = "the batch size"
variable = "logits"
''', encoding="utf-8")
    return str(tmp_path)


def course(tmp_path, attempts=None, **fields) -> TestClient:
    settings = Settings(mode="course", course_salt=SALT,
                        exercises_dir=course_dir(tmp_path, **fields))
    return TestClient(create_app(settings, attempts=attempts))


def expected(client, exercise_id, student):
    ex = client.app.state.course.catalogue.get(exercise_id)
    return build_case(ex, student, client.app.state.course.salt)


def test_the_list_names_every_exercise_and_the_mode(practice):
    body = practice.get("/api/v1/exercises").json()
    assert (body["mode"], body["student_required"], body["graded_session"]) == (
        "practice", False, False)
    by_id = {e["id"]: e for e in body["exercises"]}
    assert by_id["rmsnorm-backward"]["kind"] == "function" and by_id["rmsnorm-backward"]["open"]
    assert by_id["neuron"]["lesson"] and not by_id["softmax-ce-logits"]["lesson"]


def test_one_exercise_for_a_student_gives_their_numbers(practice):
    a = practice.get("/api/v1/exercises/softmax-ce-logits?student=ada").json()
    b = practice.get("/api/v1/exercises/softmax-ce-logits", headers={"X-Student-ID": "alan"}).json()
    assert a["student"] == "ada" and b["student"] == "alan"
    assert a["case"]["variables"]["logits"] != b["case"]["variables"]["logits"]
    case = expected(practice, "softmax-ce-logits", "ada")
    assert a["case"]["variables"]["logits"] == case.variables["logits"].tolist()
    assert a["answers"] == [{"key": "logits", "shape": [4, 5], "case": "case", "of": "logits"}]
    assert a["hints"] == 3 and a["rule"] == {"digits": 4} and a["hidden"] == []
    assert practice.get("/api/v1/exercises/softmax-ce-logits").json()["student"] == "practice"


def test_a_function_exercise_lists_its_cases_and_signature(practice):
    body = practice.get("/api/v1/exercises/rmsnorm-backward?student=ada").json()
    fn = body["function"]
    assert fn["signature"] == "rms_norm_backward(x, weight, g) -> (dx, dweight)"
    assert [c["name"] for c in fn["cases"]] == ["generated", "a row of zeros", "a large row"]
    assert set(fn["cases"][0]["inputs"]) == {"x", "weight", "g"}
    assert [a["key"] for a in body["answers"]][:2] == ["generated/dx", "generated/dweight"]


def test_the_text_reaches_the_page_as_a_tree_with_no_html(tmp_path):
    client = course(tmp_path)
    body = client.get("/api/v1/exercises/course-ce?student=ada").json()
    assert ["strong", {}, "the gradient"] in body["text_nodes"][0]
    flat = json.dumps(body["text_nodes"])
    assert "<script>alert(1)</script>" in flat          # a string, shown as text
    assert tree("[x](javascript:alert(1))") == [["p", {}, "[x](javascript:alert(1))"]]


def test_a_right_submission_passes_and_scores_the_points(practice):
    case = expected(practice, "softmax-ce-logits", "ada")
    right = [[float(f"{x:.4g}") for x in row] for row in case.expected["logits"]]
    body = practice.post("/api/v1/exercises/softmax-ce-logits/submit?student=ada",
                         json={"answers": {"logits": right}}).json()
    assert body["passed"] and body["score"] == 5.0 and body["missing"] == []
    verdict = body["answers"]["logits"]
    assert verdict["agreed"] == 20 and verdict["pattern"] is None
    assert body["attempt"] == {"number": None, "recorded": False, "repeated": False,
                               "max": None, "remaining": None}


def test_someone_elses_right_answer_is_wrong_for_you(practice):
    theirs = expected(practice, "softmax-ce-logits", "alan").expected["logits"].tolist()
    body = practice.post("/api/v1/exercises/softmax-ce-logits/submit",
                         headers={"X-Student-ID": "ada"}, json={"answers": {"logits": theirs}})
    assert not body.json()["passed"]


def test_a_wrong_submission_is_told_its_pattern_and_digits(practice):
    case = expected(practice, "softmax-ce-logits", "ada")
    body = practice.post("/api/v1/exercises/softmax-ce-logits/submit?student=ada",
                         json={"answers": {"logits": (case.expected["logits"] * 4).tolist()}})
    verdict = body.json()["answers"]["logits"]
    assert verdict["pattern"]["name"] == "scaled" and verdict["pattern"]["factor"] == "N"
    assert verdict["digits"] == [[0.0] * 5] * 4 and verdict["min_digits"] == 0.0
    assert "expected" not in verdict


def test_a_function_submission_grades_every_case(practice):
    case = expected(practice, "rmsnorm-backward", "ada")
    answers = {k: v.tolist() for k, v in case.expected.items()}
    answers["a row of zeros/dx"] = (case.expected["a row of zeros/dx"] * 0 + 1).tolist()
    del answers["a large row/dweight"]
    body = practice.post("/api/v1/exercises/rmsnorm-backward/submit?student=ada",
                         json={"answers": answers}).json()
    assert body["missing"] == ["a large row/dweight"]
    assert not body["passed"] and body["score"] == pytest.approx(10 * 4 / 6)
    assert not body["answers"]["a row of zeros/dx"]["passed"]


def test_submissions_are_refused_with_the_field_and_rule(practice):
    url = "/api/v1/exercises/softmax-ce-logits/submit"
    cases = [({"answers": {}}, 422, "invalid_request", "answers"),
             ({"answers": {"logit": [1]}}, 422, "invalid_input", "answers.logit"),
             ({"answers": {"logits": "x"}}, 422, "invalid_input", "answers.logits"),
             ({"answers": {"logits": [1]}, "reveal": 1}, 422, "invalid_request", "reveal"),
             ({"answers": {"logits": [1]}, "idempotency_key": ""}, 422, "invalid_request",
              "idempotency_key"),
             ({"answers": {"logits": [1]}, "extra": 1}, 422, "invalid_request", None)]
    for body, status, code, field in cases:
        r = practice.post(url, json=body)
        assert r.status_code == status, (body, r.json())
        err = r.json()["error"]
        assert err["code"] == code, (body, err)
        if field:
            assert err["input"] == field, (body, err)
    r = practice.post("/api/v1/exercises/softmax-ce-logits-2/submit", json={"answers": {}})
    assert r.status_code == 404 and "softmax-ce-logits" in r.json()["error"]["message"]


def test_the_student_id_from_header_query_and_body_must_agree(practice):
    url = "/api/v1/exercises/softmax-ce-logits"
    assert practice.get(f"{url}?student=ada", headers={"X-Student-ID": "ada"}).status_code == 200
    r = practice.get(f"{url}?student=ada", headers={"X-Student-ID": "alan"})
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_student"
    r = practice.get(f"{url}?student=a%20b")
    assert r.status_code == 422 and "1 to 128" in r.json()["error"]["message"]
    r = practice.post(f"{url}/submit?student=ada", json={"answers": {"logits": [1]},
                                                          "student": "alan"})
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_student"


def test_hints_come_one_at_a_time_by_number(practice):
    url = "/api/v1/exercises/softmax-ce-logits/hints"
    first = practice.post(url).json()
    assert (first["number"], first["of"], first["recorded"]) == (1, 3, False)
    third = practice.post(url, json={"number": 3}).json()
    assert third["text"].startswith("The loss is a mean") and third["text_nodes"]
    r = practice.post(url, json={"number": 4})
    assert r.status_code == 404 and r.json()["error"]["code"] == "no_such_hint"
    assert practice.post(url, json={"number": 0}).status_code == 422


def test_course_mode_needs_a_student_and_salts_the_numbers(tmp_path):
    client = course(tmp_path)
    r = client.get("/api/v1/exercises/course-ce")
    assert r.status_code == 422 and r.json()["error"]["code"] == "student_required"
    body = client.get("/api/v1/exercises/course-ce?student=ada").json()
    case = build_case(client.app.state.course.catalogue.get("course-ce"), "ada", SALT)
    assert body["case"]["variables"]["logits"] == case.variables["logits"].tolist()
    assert client.get("/api/v1/exercises").json()["student_required"]
    # the shipped examples are a practice sandbox's; a course serves its own
    assert client.get("/api/v1/exercises/rmsnorm-backward?student=ada").status_code == 404


def test_feedback_levels_in_course_mode(tmp_path):
    for feedback, keys in (("pattern", {"agree", "pattern"}), ("pass/fail", set())):
        client = course(tmp_path / feedback.replace("/", "-"), feedback=feedback)
        wrong = (expected(client, "course-ce", "ada").expected["logits"] * -1).tolist()
        verdict = client.post("/api/v1/exercises/course-ce/submit?student=ada",
                              json={"answers": {"logits": wrong}}).json()["answers"]["logits"]
        assert keys <= set(verdict) and "digits" not in verdict and "expected" not in verdict
        if feedback == "pass/fail":
            assert verdict == {"passed": False, "rule": {"digits": 4}}


def test_a_graded_session_defaults_to_pattern_feedback(tmp_path):
    from glassllm_service.record.tokens import Keyring
    settings = Settings(mode="course", graded_session=True, course_salt=SALT,
                        exercises_dir=course_dir(tmp_path), data_dir=tmp_path / "data",
                        course_secrets="k1=" + "s" * 32)
    client = TestClient(create_app(settings))
    token = Keyring("course", {"k1": "s" * 32}).issue("ada", days=1)
    body = client.get("/api/v1/exercises/course-ce",
                      headers={"Authorization": f"Bearer {token}"}).json()
    assert body["feedback"] == "pattern"


def test_not_open_yet_and_closed(tmp_path):
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    soon = course(tmp_path / "a", opens=now + dt.timedelta(days=1))
    # before it opens, an exercise is to a student what an id no exercise has is: the
    # same 404, word for word, so a guessed id tells nothing
    nothing = soon.get("/api/v1/exercises/no-such-exercise?student=ada").json()["error"]
    for r in (soon.get("/api/v1/exercises/course-ce?student=ada"),
              soon.post("/api/v1/exercises/course-ce/hints?student=ada"),
              soon.post("/api/v1/exercises/course-ce/submit?student=ada", json={})):
        assert r.status_code == 404 and r.json()["error"]["code"] == "unknown_exercise"
        assert r.json()["error"]["message"] == nothing["message"].replace(
            "no-such-exercise", "course-ce")
        assert "opens" not in r.text
    listed = [e["id"] for e in soon.get("/api/v1/exercises").json()["exercises"]]
    assert "course-ce" not in listed and listed      # not listed before it opens
    late = course(tmp_path / "b", opens=now - dt.timedelta(days=2),
                  closes=now - dt.timedelta(days=1))
    assert late.get("/api/v1/exercises/course-ce?student=ada").status_code == 200
    r = late.post("/api/v1/exercises/course-ce/submit?student=ada",
                  json={"answers": {"logits": [[0.0] * 4] * 3}})
    assert r.status_code == 403 and r.json()["error"]["code"] == "exercise_closed"
    # practice mode shows every exercise open: a student's own container
    folder = course_dir(tmp_path / "c", opens=now + dt.timedelta(1))
    practice = TestClient(create_app(Settings(exercises_dir=folder)))
    assert practice.get("/api/v1/exercises/course-ce").status_code == 200


class CountingStore(NoRecord):
    """A record for the hook's test: attempts and hints counted per student (a real record
    keeps them in a database shared by every worker; this only stands in for it)."""

    enforces = True

    def __init__(self):
        self.attempts, self.hints, self.keys = {}, {}, {}

    def attempts_used(self, student, exercise_id):
        return self.attempts.get((student, exercise_id), 0)

    def record_attempt(self, attempt, max_attempts, generation=None):
        key = (attempt.student, attempt.idempotency_key)
        if attempt.idempotency_key and key in self.keys:
            number, digest = self.keys[key]
            if digest != attempt.verdict_digest:
                raise KeyReused(None)
            return Recorded(number, repeated=True, digest=digest,
                            used=self.attempts_used(attempt.student, attempt.exercise_id))
        used = self.attempts_used(attempt.student, attempt.exercise_id)
        if max_attempts is not None and used >= max_attempts:
            raise AttemptsExhausted(used, max_attempts)
        self.attempts[(attempt.student, attempt.exercise_id)] = used + 1
        if attempt.idempotency_key:
            self.keys[key] = (used + 1, attempt.verdict_digest)
        return Recorded(used + 1, used=used + 1)

    def hints_used(self, student, exercise_id):
        return self.hints.get((student, exercise_id), 0)

    def record_hint(self, student, exercise_id, number):
        self.hints[(student, exercise_id)] = max(number, self.hints_used(student, exercise_id))


def test_the_record_hook_enforces_max_attempts_and_hint_order(tmp_path):
    store = CountingStore()
    client = course(tmp_path, attempts=store, max_attempts=2)
    url = "/api/v1/exercises/course-ce/submit?student=ada"
    wrong = {"answers": {"logits": [[0.0] * 4] * 3}}
    first = client.post(url, json={**wrong, "idempotency_key": "k1"}).json()["attempt"]
    again = client.post(url, json={**wrong, "idempotency_key": "k1"}).json()["attempt"]
    assert first == {"number": 1, "recorded": True, "repeated": False, "max": 2,
                     "remaining": 1}
    assert again["number"] == 1 and again["repeated"]           # never counted twice
    assert client.post(url, json=wrong).json()["attempt"]["remaining"] == 0
    r = client.post(url, json=wrong)
    assert r.status_code == 403 and r.json()["error"]["code"] == "no_attempts_left"
    assert client.get("/api/v1/exercises/course-ce?student=ada").json()["attempts"] == {
        "used": 2, "max": 2, "enforced": True}
    hints = "/api/v1/exercises/course-ce/hints?student=ada"
    r = client.post(hints, json={"number": 2})
    assert r.status_code == 409 and r.json()["error"]["code"] == "hint_out_of_order"
    assert client.post(hints).json()["number"] == 1
    assert client.post(hints).json()["number"] == 2 and store.hints_used("ada", "course-ce") == 2


def test_reveal_gives_the_expected_arrays_unless_hidden(practice, tmp_path):
    case = expected(practice, "softmax-ce-logits", "ada")
    body = practice.post("/api/v1/exercises/softmax-ce-logits/submit?student=ada",
                         json={"answers": {"logits": [[0.0] * 5] * 4}, "reveal": True}).json()
    np.testing.assert_array_equal(body["answers"]["logits"]["expected"],
                                  case.expected["logits"])
    client = course(tmp_path, hide=["expected"])
    r = client.post("/api/v1/exercises/course-ce/submit?student=ada",
                    json={"answers": {"logits": [[0.0] * 4] * 3}, "reveal": True})
    assert r.status_code == 403 and r.json()["error"]["code"] == "hidden_by_exercise"

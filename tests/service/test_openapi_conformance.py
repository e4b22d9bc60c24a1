"""/openapi.json describes what the sandbox sends, on a real server (H4): every status an
operation answers is documented with the error envelope, and nothing else is.

- **Nothing undocumented is sent**: schemathesis generates requests for every operation
  (valid and invalid ones) and runs its conformance checks on each answer: no 5xx, the
  status is documented, the body matches the documented schema for that status, the
  content type and the required headers are the documented ones.
- **Nothing documented is phantom**: for every operation and every error status it lists,
  a request here makes the server send exactly that status (a witness). FastAPI's
  automatic 422 ``HTTPValidationError`` (never sent: validation is the sandbox's own),
  a 404 on ops that exist, a 429 on attention and a 400 on ops whose plan refuses no
  shape are gone for that reason. A full training line needs a sandbox of its own (one
  slot, no line): its 503 is witnessed there.

The server has a token, so the 401 and the malformed-Authorization 400 are in the document
and witnessed; its training limits are tiny, so a generated run ends at once.
"""

from __future__ import annotations

import contextlib

import httpx
import numpy as np
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from sandbox_server import running_sandbox
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from starlette.testclient import TestClient

from glassllm.sandbox import registry as R
from glassllm_service.app import create_app
from glassllm_service.settings import Settings

pytestmark = pytest.mark.slow
TOKEN = "conformance-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
TINY_RUNS = {"GLASSLLM_API_TOKEN": TOKEN, "GLASSLLM_MAX_TRAIN_STEPS": "2",
             "GLASSLLM_MAX_TRAIN_BATCH": "2", "GLASSLLM_MAX_PARAMETERS": "20000",
             "GLASSLLM_MAX_TRAIN_SECONDS": "10", "GLASSLLM_ACCESS_LOG": "0"}
EXAMPLES = 4            # per operation: the whole run stays within about 30 s on 2 cores
CHECKS = [not_a_server_error, status_code_conformance, response_schema_conformance,
          content_type_conformance, response_headers_conformance]


@pytest.fixture(scope="module")
def server():
    with running_sandbox(env=TINY_RUNS) as url:
        yield url


@pytest.fixture(scope="module")
def live_schema(server):
    return schemathesis.openapi.from_url(f"{server}/openapi.json")


def operations() -> list[tuple[str, str]]:
    """(method, path) of every operation (the document of an app in this process; the
    server's lists the same operations)."""
    doc = create_app().openapi()
    return [(m, p) for p, item in doc["paths"].items() for m in item]


@pytest.mark.parametrize(("method", "path"), operations())
def test_every_answer_conforms_to_the_document(live_schema, server, method, path):
    """schemathesis' strategies for the operation, valid and invalid requests alike (the
    pytest loader cannot take a fixture's schema under pytest 9: its lazy loader reads a
    private attribute, so the strategies are drawn here)."""
    operation = live_schema[path][method]
    modes = [operation.as_strategy(GenerationMode.POSITIVE)]
    with contextlib.suppress(Exception):        # no invalid request can be made for some
        modes.append(operation.as_strategy(GenerationMode.NEGATIVE))

    @given(case=st.one_of(modes))
    @settings(max_examples=EXAMPLES, deadline=None, database=None,
              suppress_health_check=list(HealthCheck), phases=[Phase.generate])
    def run(case):
        case.call_and_validate(base_url=server, headers=AUTH, checks=CHECKS, timeout=60)

    run()


# --------------------------------------------------------------------------------------
# every documented status has a witness
# --------------------------------------------------------------------------------------

# a (k, n) @ (k, n) matmul, and every candidate input that may break an op's shape rule
SHAPES = [[], [7], [2, 3], [2, 3, 5], [1, 1, 1, 1, 2]]
WITNESS_ENV = {"GLASSLLM_API_TOKEN": TOKEN, "GLASSLLM_MAX_BODY_BYTES": "65536",
               "GLASSLLM_MAX_CONCURRENCY": "1", "GLASSLLM_MAX_QUEUE": "0",
               "GLASSLLM_MAX_TRAINING_RUNS": "0", "GLASSLLM_ACCESS_LOG": "0",
               "GLASSLLM_MAX_RESULT_ELEMENTS": "40000000",
               "GLASSLLM_MAX_MATMUL_MADDS": "100000000000"}


async def _new_event():
    import asyncio
    return asyncio.Event()


async def _hold(admission, release) -> None:
    async with admission.slot(cost=1, client="holder"):
        await release.wait()


async def _until(condition) -> None:
    import asyncio
    for _ in range(100_000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("the holder never took the slot")


def candidates(spec) -> list:
    if spec.kind in ("tensor", "array", "table"):
        return [np.ones(s).tolist() for s in SHAPES]
    if spec.kind in ("int", "axis"):
        return [99, -99]
    if spec.kind == "axes":
        return [[5, 0], [0, 0]]
    if spec.kind == "shape":
        return [[7, 7]]
    if spec.kind == "int_array":
        return [[99], [[0, 1]], np.zeros((2, 3, 4), int).tolist()]
    if spec.kind == "bool_mask":
        return [np.ones(s, bool).tolist() for s in SHAPES]
    if spec.kind == "index":
        return [[{"array": [99]}], 99]
    return []


def shape_refusal(c: httpx.Client, name: str) -> dict | None:
    """A body that op `name` answers with 400, found from its example by changing one
    input at a time, or None."""
    op = R.OPS[name]
    base = op.examples[0].request()
    for spec in op.inputs:
        for value in candidates(spec):
            body = {**base, "inputs": {**base["inputs"], spec.name: value}}
            if c.post(f"/api/v1/ops/{name}", json=body, headers=AUTH).status_code == 400:
                return body
    return None


# Documented statuses whose witness needs a fault this test cannot make here (a full or
# read-only disk under /dist/): (method, path, status) -> the test that makes the server
# send it. Every other documented error status is witnessed below.
ELSEWHERE: dict[tuple[str, str, int], str] = {
    (method, "/dist/{filename}", 507): "tests/service/test_disk_faults.py (a file-size limit,"
    " a full tmpfs, no writable temporary directory)" for method in ("get", "head")}
# An exercise's refusals that need course mode, a clock or a record of attempts, which this
# practice-mode server has none of: each is sent in tests/service/test_exercise_routes.py.
ELSEWHERE |= {
    ("get", "/api/v1/exercises/{exercise_id}", 403): "test_not_open_yet_and_closed",
    ("post", "/api/v1/exercises/{exercise_id}/submit", 403):
        "test_the_record_hook_enforces_max_attempts_and_hint_order (no_attempts_left)",
    ("post", "/api/v1/exercises/{exercise_id}/hints", 403):
        "test_not_open_yet_and_closed (a hint of an exercise not open yet)",
    ("post", "/api/v1/exercises/{exercise_id}/hints", 409):
        "test_the_record_hook_enforces_max_attempts_and_hint_order (hint_out_of_order)"}
# a mystery's refusal while an exercise hides an op of its case: tests/service/test_mysteries.py
ELSEWHERE |= {("post", f"/api/v1/mysteries/{{mystery_id}}/{route}", 403):
              "test_an_exercise_that_hides_an_op_of_the_case_closes_its_eval_and_its_proof"
              for route in ("eval", "proof")}
# what hiding refuses and the instructor's list of it need course mode (and its tokens):
# tests/service/test_hiding_computation.py sends each
ELSEWHERE |= {
    ("post", "/api/v1/model/attention", 403):
        "test_attention_maps_of_the_student_s_own_weights_are_refused",
    ("get", "/api/v1/hidden", 404): "test_without_course_tokens_the_list_is_the_command_s",
    **{("get", "/api/v1/hidden", status): "test_an_instructor_lists_what_is_hidden_now_and_why"
       for status in (401, 403, 422)}}
# the class record's routes answer their refusals only in course mode with course secrets
ELSEWHERE.update({(method, path, status): "tests/record/test_record_http.py (a course"
                  " sandbox with per-student tokens)"
                  for method, path, statuses in (
                      ("post", "/api/v1/session", (401, 404, 422)),
                      ("get", "/api/v1/record/attempts", (401, 403, 404)),
                      ("get", "/api/v1/record/gradebook.{fmt}", (401, 403, 404)))
                  for status in statuses})
# the record's database not answering: PostgreSQL stopped under a course sandbox
ELSEWHERE.update({(method, path, 503): "tests/record/test_record_http.py::test_a_database_that"
                  "_stops_answering_is_a_503_to_retry_and_readyz_says_so"
                  for method, path in (("post", "/api/v1/exercises/{exercise_id}/hints"),
                                       ("post", "/api/v1/session"),
                                       ("get", "/api/v1/record/attempts"),
                                       ("get", "/api/v1/record/gradebook.{fmt}"))})


def statuses(doc: dict) -> list[tuple[str, str, int]]:
    return [(method, path, int(status)) for path, item in doc["paths"].items()
            for method, operation in item.items() for status in operation["responses"]]


def test_every_documented_status_is_sent(tmp_path):
    with running_sandbox(env=WITNESS_ENV) as url, httpx.Client(base_url=url, timeout=60) as c:
        doc = c.get("/openapi.json").json()
        wheel = c.get("/dist/").json()["wheels"][0]
        sent: dict[tuple[str, str], set[int]] = {}

        def got(method: str, path: str, r: httpx.Response) -> None:
            sent.setdefault((method, path), set()).add(r.status_code)

        # a templated path is requested with a real exercise, so that what is witnessed is
        # the body's refusal, not the unknown id's 404
        exercise = c.get("/api/v1/exercises").json()["exercises"][0]["id"]
        mystery = c.get("/api/v1/mysteries").json()["mysteries"][0]["id"]

        def real(path: str) -> str:
            return path.replace("{exercise_id}", exercise).replace("{mystery_id}", mystery)

        posts = [p for p, item in doc["paths"].items() if "post" in item]
        for path in posts:
            got("post", path, c.post(real(path), json={}))                    # 401
            got("post", path, c.post(real(path), json={}, headers={"Authorization": "Bearer"}))
            got("post", path, c.post(real(path), content=b"{}", headers={
                **AUTH, "Content-Type": "text/plain"}))                          # 415
            got("post", path, c.post(real(path), content=b"", headers={
                **AUTH, "Content-Type": "application/json"}))
            got("post", path, c.post(real(path), content=b" " * 70_000, headers={  # 413
                **AUTH, "Content-Type": "application/json"}))
        for name in R.OPS:
            body = shape_refusal(c, name)
            if body is not None:
                got("post", f"/api/v1/ops/{name}", c.post(f"/api/v1/ops/{name}", json=body,
                                                          headers=AUTH))
        mismatch = {"a": [[1.0, 2.0]], "b": [[1.0, 2.0]]}
        got("post", "/api/v1/eval", c.post("/api/v1/eval", headers=AUTH, json={
            "expression": "a @ b", "variables": mismatch}))
        got("post", "/api/v1/check", c.post("/api/v1/check", headers=AUTH, json={
            "op": "matmul", "inputs": mismatch, "claimed": {"value": [1.0]}}))
        hunt, proof = "/api/v1/mysteries/{mystery_id}/eval", "/api/v1/mysteries/{mystery_id}/proof"
        got("post", hunt, c.post(real(hunt), headers=AUTH, json={                # 400
            "expression": "a @ b", "variables": mismatch}))
        got("post", hunt, c.post("/api/v1/mysteries/nope/eval", headers=AUTH, json={}))
        got("post", proof, c.post("/api/v1/mysteries/nope/proof", headers=AUTH, json={}))
        got("post", proof, c.post(real(proof), headers=AUTH, json={             # 400
            "node": 0, "variables": {"x": [1.0]}}))
        got("get", "/api/v1/mysteries/{mystery_id}", c.get("/api/v1/mysteries/nope"))
        got("post", "/api/v1/check", c.post("/api/v1/check", headers=AUTH, json={
            "op": "nope", "inputs": {}, "claimed": {"value": [1.0]}}))
        got("post", "/api/v1/torch", c.post("/api/v1/torch", headers=AUTH, json={
            "op": "nope", "inputs": {}}))                                       # 404
        got("post", "/api/v1/train", c.post("/api/v1/train", headers=AUTH, json={}))  # 403
        got("get", "/api/v1/ops/{name}", c.get("/api/v1/ops/nope"))
        one, submit = "/api/v1/exercises/{exercise_id}", "/api/v1/exercises/{exercise_id}/submit"
        hints = "/api/v1/exercises/{exercise_id}/hints"
        got("get", one, c.get("/api/v1/exercises/nope"))                       # 404
        got("get", one, c.get(f"/api/v1/exercises/{exercise}?student=-no"))    # 422
        got("post", submit, c.post("/api/v1/exercises/nope/submit", headers=AUTH, json={}))
        got("post", submit, c.post(real(submit), headers=AUTH, json={"answers": 1}))  # 422
        got("post", hints, c.post("/api/v1/exercises/nope/hints", headers=AUTH))
        got("post", hints, c.post(real(hints), headers=AUTH, json={"number": 0}))  # 422
        got("get", "/dist/{filename}", c.get("/dist/nope.whl"))
        got("get", "/dist/{filename}", c.get(f"/dist/{wheel}", headers={"Range": "bytes=0-9"}))
        got("get", "/dist/{filename}", c.get(f"/dist/{wheel}",
                                             headers={"Range": "bytes=99999999-"}))
    # 503: the one compute slot busy and no queue: refused before the body is read. The
    # slot is held by a task on the app's own loop until the test releases it (a slow
    # request could end before the others were sent on a busy machine, or after)
    app = create_app(Settings(**{k.removeprefix("GLASSLLM_").lower(): v
                                 for k, v in WITNESS_ENV.items()}))
    admission = app.state.admission
    with TestClient(app) as inproc:
        release = inproc.portal.call(_new_event)
        held = inproc.portal.start_task_soon(_hold, admission, release)
        inproc.portal.call(_until, lambda: admission.running == 1)
        for path in posts:
            got("post", path, inproc.post(real(path), json={"inputs": {}}, headers=AUTH))
        got("get", one, inproc.get(real(one)))                                 # 503
        inproc.portal.call(release.set)
        held.result()
    # 503: the training line full (one slot, held by a long run, and no line)
    full = {"GLASSLLM_API_TOKEN": TOKEN, "GLASSLLM_MAX_TRAINING_RUNS": "1",
            "GLASSLLM_MAX_TRAINING_QUEUE": "0", "GLASSLLM_ACCESS_LOG": "0"}
    long_run = {"model": {"d_model": 8, "n_layers": 1, "n_heads": 2, "n_kv_heads": 1,
                          "ffn_hidden": 8, "max_seq_len": 8}, "steps": 2000, "every": 2}
    with running_sandbox(env=full) as url, httpx.stream(
            "POST", f"{url}/api/v1/train", json=long_run, timeout=60,
            headers={**AUTH, "X-Client-ID": "holder"}) as holder:
        lines = holder.iter_lines()   # kept: a dropped iterator would close the stream
        next(lines)
        got("post", "/api/v1/train", httpx.post(f"{url}/api/v1/train", json={}, timeout=60,
                                                headers={**AUTH, "X-Client-ID": "next"}))
    missing = [f"{method.upper()} {path} {status}" for method, path, status in statuses(doc)
               if (status >= 400 or status == 206) and status not in sent.get((method, path), ())
               and (method, path, status) not in ELSEWHERE]
    assert not missing, f"documented, never sent: {missing}"

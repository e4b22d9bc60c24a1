"""What each wire kind must refuse (SPEC H3, H4), over HTTP.

For every input kind of the registry (glassllm/sandbox/wire.py: tensor, array, table, int_array,
bool_mask, number, int, bool, axis, axes, shape, index) a valid request is taken and one
input replaced by a value the kind must refuse: the answer is 422 ``invalid_input`` naming
that input, never a 200 that read the value as something else, never a 500.

Bodies are sent as raw JSON bytes so that ``true`` is in the body (the service takes
wire's exact path only when it is, ``maybe_bools``); a second pass puts the word ``true``
into an unrelated field so the same values also go through the exact path when the
offending value itself is not a boolean.
"""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from glassllm_service.app import create_app
from glassllm_service.settings import Settings


def dumps(obj) -> bytes:
    """JSON bytes; the standard library writes integers past 64 bits, orjson refuses them."""
    return json.dumps(obj).encode()


BIG = 2 ** 63             # one past int64
HUGE = 2 ** 64            # orjson reads it as a float64


@pytest.fixture(scope="module")
def client():
    with TestClient(create_app(Settings())) as c:
        yield c


# A valid request per op; each case swaps one input for a refused value.
VALID = {
    "neg": {"a": [1.0, 2.0]},
    "pow": {"a": [1.0, 2.0], "exponent": 2.0},
    "rope": {"x": [[1.0, 2.0, 3.0, 4.0]], "cos": [[0.0, 0.0]], "sin": [[1.0, 1.0]]},
    "embedding": {"weight": [[1.0], [2.0], [3.0]], "ids": [0, 2]},
    "cross_entropy": {"logits": [[0.0, 1.0]], "targets": [1]},
    "masked_fill": {"a": [1.0, 2.0], "mask": [True, False], "value": 0.0},
    "where": {"condition": [True, False], "a": [1.0, 2.0], "b": [3.0, 4.0]},
    "softmax": {"a": [[1.0, 2.0]], "axis": -1},
    "repeat_kv": {"x": [[[[1.0]], [[2.0]]]], "repeats": 2},
    "tsum": {"a": [[1.0, 2.0], [3.0, 4.0]], "axis": 0, "keepdims": False},
    "reshape": {"a": [[1.0, 2.0], [3.0, 4.0]], "shape": [4]},
    "transpose": {"a": [[1.0, 2.0], [3.0, 4.0]], "axes": [1, 0]},
    "getitem": {"a": [[1.0, 2.0], [3.0, 4.0]], "index": [0, 1]},
}

RAGGED = [[1.0, 2.0], [3.0]]
REFUSED = {
    # tensor: numbers and the non-finite tokens only, rectangular
    ("neg", "a"): [True, False, [1.0, True], [[1.0], [True]], [True, True], "abc", "1.0",
                   ["NaN", "nope"], None, {}, {"value": 1.0}, RAGGED, [[1.0], 2.0],
                   [1.0, None], [1.0, [2.0]], [[1.0, 2.0], [3.0, "x"]]],
    # array (a constant) and table: the same numeric rules
    ("pow", "exponent"): [True, [2.0, True], "two", None, [[1.0], [2.0, 3.0]]],
    ("rope", "cos"): [True, [[0.0, True]], "cos", [[0.0], [0.0, 1.0]]],
    # int_array: integers of int64 only
    ("embedding", "ids"): [1.5, [0, 1.5], [0.0, 1.0], True, [0, True], [True, False], "1",
                           ["0"], None, [[0], [1, 2]], [BIG], [-BIG - 1], [HUGE], BIG,
                           [1e30], {}],
    ("cross_entropy", "targets"): [[1.0], [True], ["1"], [BIG]],
    # bool_mask: booleans, or the integers 0 and 1 only
    ("masked_fill", "mask"): [2, -1, [1, 2], [0, -1], [True, 2], [0.0, 1.0], [0.5, 1.0],
                              "true", ["true", "false"], None, [[True], [False, True]],
                              [BIG, 0], {}],
    ("where", "condition"): [2, [1, 2], [-1, 0], [1.0, 0.0], ["yes", "no"]],
    # number: one float or a non-finite token
    ("masked_fill", "value"): [True, False, "abc", [1.0], None, {}, "Inf"],
    # int: one int64
    ("softmax", "axis"): [1.5, True, "1", None, [1], -1.0, BIG, HUGE, {}],
    ("repeat_kv", "repeats"): [1.5, True, "2", [2], None, 2.0, BIG],
    # axis: null, an int64 or a list of them
    ("tsum", "axis"): [1.5, True, "0", [0, 1.5], [True], [0, "1"], {}, BIG, HUGE, [BIG],
                       [[0]], 0.0],
    # bool
    ("tsum", "keepdims"): [1, 0, "true", None, [True], 1.0],
    # axes: null or a list of int64
    ("transpose", "axes"): [1, True, "1, 0", [1, 0.0], [1, True], [[1], [0]], [BIG, 0]],
    # shape: an int64 or a list of them
    ("reshape", "shape"): [4.0, [4.0], [2, 2.5], True, [2, True], "4", None, [BIG], HUGE],
    # index: ints, null, "...", slices, {"array"}, {"mask"}
    ("getitem", "index"): [1.5, True, "abc", "0", [0, 1.5], [True], {"start": 1.5},
                           {"stop": "1"}, {"step": 0}, {"step": True}, {"foo": 1},
                           {"start": 0, "foo": 1}, {"array": [1.5]}, {"array": [True]},
                           {"array": "0"}, {"mask": [2, 0]}, {"mask": [1.0, 0.0]},
                           {"mask": "true"}, {"array": [0], "mask": [True]}, BIG, HUGE,
                           [{"array": [[0], [0, 1]]}], [{"start": BIG}]],
}
CASES = [(op, name, bad) for (op, name), bads in REFUSED.items() for bad in bads]


def body(op: str, name: str, bad, flag: bool) -> bytes:
    """The valid request of `op` with input `name` replaced by `bad`. With `flag`, the
    request also names a (nonexistent) input "true" in requires_grad: the body then spells
    true, so the service reads every input on wire's exact path (inputs are read before
    requires_grad is checked, so the refusal still names the bad input)."""
    inputs = dict(VALID[op])
    inputs[name] = bad
    request: dict = {"inputs": inputs}
    if flag:
        request["requires_grad"] = ["true"]
    return dumps(request)


def run(client, op: str, raw: bytes):
    return client.post(f"/api/v1/ops/{op}", content=raw,
                       headers={"Content-Type": "application/json"})


def test_every_valid_request_is_answered(client):
    """The baseline: each request below differs from one that the service answers."""
    for op, inputs in VALID.items():
        r = run(client, op, dumps({"inputs": inputs}))
        assert r.status_code == 200, (op, r.text[:300])


@pytest.mark.parametrize("op,name,bad", CASES, ids=[f"{o}.{n}={json.dumps(b)[:40]}"
                                                     for o, n, b in CASES])
def test_a_value_outside_its_kind_is_422_naming_the_input(client, op, name, bad):
    r = run(client, op, body(op, name, bad, flag=False))
    assert r.status_code == 422, (r.status_code, r.text[:300])
    err = r.json()["error"]
    assert err["code"] == "invalid_input" and err["input"] == name and err["op"] == op, err
    assert f"input '{name}'" in err["message"]


@pytest.mark.parametrize("op,name,bad", CASES, ids=[f"{o}.{n}={json.dumps(b)[:40]}"
                                                     for o, n, b in CASES])
def test_the_exact_path_refuses_the_same_values(client, op, name, bad):
    """The refusal must not depend on which path (fast or exact) reads the value."""
    r = run(client, op, body(op, name, bad, flag=True))
    assert r.status_code == 422, (r.status_code, r.text[:300])
    err = r.json()["error"]
    assert err["code"] == "invalid_input" and err["input"] == name, err


def test_masks_refuse_every_integer_but_0_and_1(client):
    """Kind 2's example: a mask that turned 2 and -1 into True went unnoticed."""
    for bad in (2, -1, 3, 255, -2):
        for mask in (bad, [0, bad], [[1], [bad]]):
            a = [1.0, 2.0] if not isinstance(mask, list) or not isinstance(mask[0], list) \
                else [[1.0], [2.0]]
            r = run(client, "masked_fill", dumps(
                {"inputs": {"a": a, "mask": mask, "value": 0.0}}))
            assert r.status_code == 422 and r.json()["error"]["input"] == "mask", (mask, r.text)
    ok = run(client, "masked_fill", dumps(
        {"inputs": {"a": [1.0, 2.0], "mask": [1, 0], "value": -5.0}}))
    assert ok.status_code == 200 and ok.json()["value"] == [-5.0, 2.0]


def test_tensors_refuse_json_booleans_wherever_they_sit(client):
    for a in (True, [1.0, True], [[1.0, 2.0], [False, 3.0]], [True]):
        r = run(client, "neg", dumps({"inputs": {"a": a}}))
        assert r.status_code == 422 and r.json()["error"]["input"] == "a", (a, r.text)
        assert "boolean" in r.json()["error"]["message"] or "true" in r.json()["error"][
            "message"] or "false" in r.json()["error"]["message"]
    # 1 and 1.0 are numbers, and the non-finite tokens are accepted
    ok = run(client, "neg", b'{"inputs": {"a": [1, 1.0, "Infinity", "-inf"]}}')
    assert ok.status_code == 200
    assert ok.json()["value"] == [-1.0, -1.0, "-Infinity", "Infinity"]


def test_grad_output_is_a_tensor_and_refuses_the_same(client):
    for g in (True, [1.0, True], "x", RAGGED, [1.0]):
        r = run(client, "neg", dumps({"inputs": {"a": [1.0, 2.0]}, "grad_output": g}))
        assert r.status_code == 422 and r.json()["error"]["input"] == "grad_output", (g, r.text)


@pytest.mark.parametrize("variable", [True, [1.0, True], "abc", RAGGED, [1.0, None]])
def test_eval_variables_refuse_what_a_tensor_refuses(client, variable):
    r = client.post("/api/v1/eval", content=dumps(
        {"expression": "x * 2", "variables": {"x": variable}}),
        headers={"Content-Type": "application/json"})
    assert r.status_code == 422, r.text[:300]
    assert r.json()["error"]["input"] == "variables.x"


def test_integers_at_the_edges_of_int64_are_read_exactly(client):
    """The edges themselves are integers (ids index from the end, -2**63 is in range):
    accepted by the wire, and refused only by the op's own bounds (400, not 422)."""
    r = run(client, "embedding", dumps(
        {"inputs": {"weight": [[1.0], [2.0], [3.0]], "ids": [-1, -3, 2]}}))
    assert r.status_code == 200 and r.json()["value"] == [[3.0], [1.0], [3.0]]
    for edge in (BIG - 1, -BIG):
        r = run(client, "embedding", dumps(
            {"inputs": {"weight": [[1.0], [2.0]], "ids": [edge]}}))
        assert r.status_code == 400, (edge, r.text[:300])
        assert r.json()["error"]["code"] in ("numpy_error", "shape_error")

"""The arrays one request returns and holds are bounded before any work (SPEC H5).

Each case of a batch, each node of an expression and each opened composite can be at the
result limit; together they were not bounded: 64 batch cases of a (2000, 1) · (1, 2000)
product answered 5.1 GB of JSON with a 7 GB peak, and four rms_norm nodes opened with
``expand`` peaked at 4.8 GB (bench/answer_bounds.py). Every route that returns several
arrays plans their elements (`Prepared.answer_elements`,
`PreparedExpression.answer_elements`, the case and claims of a check, attention maps,
trained weights) and refuses past ``GLASSLLM_MAX_ANSWER_ELEMENTS`` with 413, naming the
limit and the input, before it computes anything.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import orjson
import pytest
from fastapi.testclient import TestClient

from glassllm.layers import rope_angles
from glassllm.sandbox import expr, registry
from glassllm.sandbox.expr.expand import COMPOSITIONS, EXPANSION_FACTOR
from glassllm_service.app import create_app
from glassllm_service.settings import Settings


def post(client, path, body):
    return client.post(path, content=orjson.dumps(body),
                       headers={"content-type": "application/json"})


def app_with(**settings) -> TestClient:
    return TestClient(create_app(Settings(**settings)))


# where an answer carries arrays: values, gradients, an expression's nodes and opened
# composites, a batch's results, a check's masks and finite differences
ARRAY_KEYS = {"value", "grad", "grads", "nodes", "expansion", "results", "mask", "analytic",
              "numeric", "check"}


def arrays_in(answer, key: str = "value") -> int:
    """Elements of every array (nested list of numbers or a base64 array) in an answer."""
    if isinstance(answer, dict):
        if "base64" in answer and "shape" in answer:
            return math.prod(answer["shape"])
        if key in ("grads", "check"):              # name → array, or name → report
            return sum(arrays_in(v, "value" if key == "grads" else "") for v in answer.values())
        return sum(arrays_in(v, k) for k, v in answer.items() if k in ARRAY_KEYS)
    if isinstance(answer, list):
        if key not in ARRAY_KEYS and key != "":
            return 0
        return sum(arrays_in(v, key) for v in answer)
    return 1 if isinstance(answer, int | float | str) and key in ARRAY_KEYS else 0


OUTER = {"a": np.arange(20.0).reshape(20, 1).tolist(), "b": np.arange(20.0).reshape(1, 20).tolist()}
CASE = {"op": "mul", "inputs": OUTER}          # 400 values + 20 + 20 gradient elements


def test_the_default_is_three_times_the_result_limit():
    assert Settings().answer_limit == 3 * Settings().max_result_elements == 12_000_000
    assert Settings(max_result_elements=10).answer_limit == 30
    assert Settings(max_answer_elements=7).answer_limit == 7


def test_a_batch_whose_cases_together_pass_the_limit_is_refused_whole_naming_the_case():
    with app_with(max_answer_elements=1000) as c:
        ok = post(c, "/api/v1/batch", {"cases": [CASE, CASE]})              # 880
        r = post(c, "/api/v1/batch", {"cases": [CASE, CASE, CASE, CASE]})  # 1320 at [2]
    assert ok.status_code == 200 and len(ok.json()["results"]) == 2
    assert r.status_code == 413
    err = r.json()["error"]
    assert err["code"] == "too_large" and err["input"] == "cases[2]"
    assert "GLASSLLM_MAX_ANSWER_ELEMENTS" in err["message"] and "1320" in err["message"]


def test_a_case_past_the_limit_alone_is_its_own_error():
    with app_with(max_answer_elements=300) as c:
        r = post(c, "/api/v1/batch", {"cases": [{"op": "neg", "inputs": {"a": [1.0]}}, CASE]})
    assert r.status_code == 200
    results = r.json()["results"]
    assert results[0]["value"] == [-1.0]
    assert results[1]["error"]["status"] == 413 and results[1]["error"]["case"] == 1


def test_a_base64_batch_is_held_to_the_same_bound():
    with app_with(max_answer_elements=1000) as c:
        r = post(c, "/api/v1/batch", {"cases": [CASE] * 3, "encoding": "base64"})
    assert r.status_code == 413 and r.json()["error"]["input"] == "cases[2]"


def test_an_op_call_counts_its_value_and_the_gradients_asked_for():
    with app_with(max_answer_elements=430) as c:
        both = post(c, "/api/v1/ops/mul", {"inputs": OUTER})                       # 440
        one = post(c, "/api/v1/ops/mul", {"inputs": OUTER, "requires_grad": ["a"]})  # 420
    assert both.status_code == 413 and both.json()["error"]["op"] == "mul"
    assert "440" in both.json()["error"]["message"]
    assert one.status_code == 200


def test_an_expression_counts_every_node_value_and_gradient():
    """x (20, 1) * y (1, 20): nodes x, y, x*y (values 440, gradients 440), the output
    again (400) and each variable's gradient again (40): 1320."""
    body = {"expression": "x * y", "variables": {"x": OUTER["a"], "y": OUTER["b"]}}
    prepared = expr.prepare(body["expression"], body["variables"])
    assert prepared.answer_elements == 1320
    with app_with(max_answer_elements=1319) as c:
        refused = post(c, "/api/v1/eval", body)
    with app_with(max_answer_elements=1320) as c:
        ok = post(c, "/api/v1/eval", body)
    assert refused.status_code == 413 and refused.json()["error"]["input"] == "expression"
    assert ok.status_code == 200 and arrays_in(ok.json()) == 1320


def test_an_expression_at_the_graph_limit_fits_the_default():
    """The default bound admits what one expression at the graph limit returns."""
    settings = Settings(max_result_elements=1000)
    body = {"expression": "softmax(x * y).sum()",
            "variables": {"x": np.ones((21, 1)).tolist(), "y": np.ones((1, 21)).tolist()}}
    prepared = expr.prepare(body["expression"], body["variables"], limits=settings.limits)
    graph = sum(math.prod(n.shape) for n in prepared.nodes)
    assert graph <= 1000 < prepared.answer_elements <= settings.answer_limit
    with TestClient(create_app(settings)) as c:
        assert post(c, "/api/v1/eval", body).status_code == 200


def test_opening_composites_is_planned_and_refused_before_any_work():
    x = np.ones((50, 1)).tolist()
    body = {"expression": "rms_norm(x, w) + rms_norm(x, w)", "variables": {"x": x, "w": [1.0]}}
    closed = expr.prepare(body["expression"], body["variables"])
    opened = expr.prepare(body["expression"], body["variables"], expand=True)
    assert opened.answer_elements > closed.answer_elements
    with app_with(max_answer_elements=opened.answer_elements - 1) as c:
        plain = post(c, "/api/v1/eval", body)
        refused = post(c, "/api/v1/eval", {**body, "expand": True})
    assert plain.status_code == 200
    assert refused.status_code == 413 and "opened composites" in refused.json()["error"]["message"]


def test_a_check_counts_its_case_and_the_claims():
    body = {**CASE, "claimed": {"value": np.zeros((20, 20)).tolist()}}
    with app_with(max_answer_elements=440 + 2 * 400 - 1) as c:
        refused = post(c, "/api/v1/check", body)
    with app_with(max_answer_elements=440 + 2 * 400) as c:
        ok = post(c, "/api/v1/check", body)
    assert refused.status_code == 413 and refused.json()["error"]["input"] == "claimed"
    assert ok.status_code == 200 and ok.json()["value"]["shape_match"]


def test_attention_maps_and_trained_weights_are_held_to_it():
    model = {"d_model": 8, "n_layers": 1, "n_heads": 2, "n_kv_heads": 1, "ffn_hidden": 8,
             "max_seq_len": 16}
    with app_with(max_answer_elements=500) as c:
        maps = post(c, "/api/v1/model/attention", {"prompt": "abcdefghijklmnop", "seed": 0,
                                                   "model": model})
        train = post(c, "/api/v1/train", {"model": model, "steps": 1})
    assert maps.status_code == 413 and maps.json()["error"]["input"] == "prompt"
    assert train.status_code == 413 and train.json()["error"]["input"] == "model"
    assert "GLASSLLM_MAX_ANSWER_ELEMENTS" in train.json()["error"]["message"]


@pytest.mark.parametrize("body", [
    {"op": "matmul", "inputs": {"a": np.ones((3, 4)).tolist(), "b": np.ones((4, 2)).tolist()}},
    {"op": "tsum", "inputs": {"a": np.ones((5, 6)).tolist(), "axis": 0}},
    {"op": "softmax_np", "inputs": {"x": np.ones((5, 6)).tolist()}},
    {"expression": "(x @ w).sum() * 2", "variables": {"x": np.ones((3, 4)).tolist(),
                                                      "w": np.ones((4, 2)).tolist()}},
    {"expression": "cross_entropy(z, t)", "variables": {"z": np.ones((4, 3)).tolist(),
                                                        "t": [0, 1, 2, 0]}, "expand": True},
])
def test_the_planned_answer_holds_what_is_answered(body):
    """Planned ≥ the arrays the answer carries (check and all), and within 2x of them
    for plain requests."""
    if "op" in body:
        op = registry.OPS[body["op"]]
        planned = registry.prepare(op, body["inputs"]).answer_elements
        path, sent = f"/api/v1/ops/{body['op']}", {"inputs": body["inputs"]}
    else:
        planned = expr.prepare(body["expression"], body["variables"],
                               expand=body.get("expand", False)).answer_elements
        path, sent = "/api/v1/eval", body
    with app_with() as c:
        answer = post(c, path, sent).json()
    got = arrays_in(answer)
    assert got <= planned, (got, planned)
    if not body.get("expand"):
        assert planned <= 2 * got, (got, planned)


def _own(prepared, name: str) -> int:
    n = next(n for n in prepared.nodes if n.op == name)
    sizes = [math.prod(m.shape) for m in prepared.nodes]
    return sizes[n.id] + n.built + sum(sizes[i] for arg in n.args for i in arg.node_ids())


def _opened(expression: str, variables: dict, name: str) -> tuple[int, int]:
    """(elements the node's expansion answers, the node's own arrays)."""
    closed = expr.evaluate(expression, variables)
    opened = expr.evaluate(expression, variables, expand=True)
    return arrays_in(opened) - arrays_in(closed), _own(expr.prepare(expression, variables), name)


def _composite_cases():
    rng = np.random.default_rng(0)

    def r(*shape):
        return rng.normal(size=shape).tolist()

    for n, d in itertools.product([1, 7], [1, 2, 16]):
        yield "rms_norm", "rms_norm(x, w)", {"x": r(n, d), "w": r(d)}
    for n, d, f in itertools.product([1, 9], [1, 4], [1, 12]):
        yield "swiglu", "swiglu(x, w1, w2, w3)", {"x": r(n, d), "w1": r(d, f), "w2": r(f, d),
                                                  "w3": r(d, f)}
    for n, v in itertools.product([1, 5], [1, 30]):
        yield "cross_entropy", "cross_entropy(z, t)", {"z": r(n, v), "t": [v - 1] * n}
    for b, n, (h, hkv), dk in itertools.product([1, 2], [1, 9], [(1, 1), (4, 2), (4, 1)],
                                                [2, 4]):
        d = h * dk
        cos, sin = rope_angles(n, dk)
        v = {"x": r(b, n, d), "wq": r(d, d), "wk": r(d, hkv * dk), "wv": r(d, hkv * dk),
             "wo": r(d, d), "cos": cos.tolist(), "sin": sin.tolist()}
        yield "attention", f"attention(x, wq, wk, wv, wo, {h}, {hkv}, cos, sin)", v
        for f in (1, 2 * d):
            v = {**v, "an": r(d), "fn": r(d), "w1": r(d, f), "w2": r(f, d), "w3": r(d, f)}
            yield ("transformer_block", f"transformer_block(x, an, wq, wk, wv, wo, fn, w1, w2,"
                   f" w3, {h}, {hkv}, cos, sin)", v)


def test_every_composite_has_an_expansion_factor():
    assert set(EXPANSION_FACTOR) == set(COMPOSITIONS)


def test_an_expansion_answers_at_most_half_its_planned_elements():
    """Opening a node answers each inner node's value and gradient; the plan counts twice
    that (the inner evaluation holds them as arrays while it writes them out). Over shapes
    down to widths of 1, no expansion answers more than half its planned count, and none
    less than a tenth (the plan tracks it)."""
    ratios: dict[str, list[float]] = {}
    for name, expression, variables in _composite_cases():
        answered, own = _opened(expression, variables, name)
        ratios.setdefault(name, []).append(answered / (EXPANSION_FACTOR[name] * own))
    for name, seen in ratios.items():
        assert max(seen) <= 0.5, (name, max(seen))
        assert min(seen) >= 0.1, (name, min(seen))

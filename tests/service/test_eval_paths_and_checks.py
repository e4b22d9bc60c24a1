"""POST /api/v1/eval's two opt-in answers: ``"paths": true`` (each shared node's gradient
split by the op inputs that read it: tied embeddings, a residual, repeat_kv's K/V, a
diamond, each part against NumPy written here) and ``check``'s modes (finite
differences, Taylor, adjoint, eps sweep, maybe in float32), their refusals and their
cost bounds; the default answer is unchanged.

The parts of a node add up to its gradient within 2(k - 1)·2⁻⁵³·Σ|part| elementwise: the
engine adds the same k arrays, maybe in another order (Higham §4.2)."""

from __future__ import annotations

import math

import numpy as np
import orjson
import pytest
from fastapi.testclient import TestClient

from glassllm.sandbox.expr import evaluate, prepare
from glassllm.sandbox.wire import coerce
from glassllm_service.app import create_app
from glassllm_service.settings import Settings

U = 2.0 ** -53
JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def client():
    return TestClient(create_app())


def post(client, body, status=200, **settings):
    c = client if not settings else TestClient(create_app(Settings(**settings)))
    r = c.post("/api/v1/eval", content=orjson.dumps(body), headers=JSON)
    assert r.status_code == status, r.text[:600]
    return r.json()


def arr(x):
    return np.asarray(coerce("array", "x", x), dtype=float)


def node(answer, text):
    return next(n for n in answer["nodes"] if n["text"] == text)


def edges_of(answer, text):
    """The edges of the shared node written `text`, by the text of their consumer."""
    i = node(answer, text)["id"]
    (entry,) = [p for p in answer["paths"] if p["node"] == i]
    texts = {n["id"]: n["text"] for n in answer["nodes"]}
    return {texts[e["consumer"]] + f"#{e['slot']}": e for e in entry["edges"]}


def assert_adds_up(answer, text):
    parts = [arr(e["grad"]) for e in edges_of(answer, text).values()]
    total = arr(node(answer, text)["grad"])
    bound = 2 * (len(parts) - 1) * U * sum(np.abs(p) for p in parts)
    assert np.all(np.abs(sum(parts) - total) <= bound)
    shares = [e["share"] for e in edges_of(answer, text).values()]
    assert math.isclose(sum(shares), 1.0, abs_tol=1e-12)


def softmax(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


rng = np.random.default_rng(3)
W = rng.normal(size=(4, 3))
IDS, TARGETS = [0, 2, 2], [1, 2, 0]
TIED = {"expression": "cross_entropy(embedding(w, ids) @ w.T, t)",
        "variables": {"w": W.tolist(), "ids": IDS, "t": TARGETS}}


def test_the_default_answer_is_unchanged_and_paths_is_opt_in(client):
    plain = post(client, TIED)
    assert "paths" not in plain
    assert post(client, {**TIED, "paths": False}) == plain
    with_paths = post(client, {**TIED, "paths": True})
    assert {k: v for k, v in with_paths.items() if k != "paths"} == plain
    err = post(client, {**TIED, "paths": "yes"}, status=422)["error"]
    assert err["input"] == "paths"


def test_tied_embeddings_over_http(client):
    answer = post(client, {**TIED, "paths": True})
    edges = edges_of(answer, "w")
    assert set(edges) == {"embedding(w, ids)#0", "w.T#0"}
    assert edges["embedding(w, ids)#0"]["input"] == "weight" and edges["w.T#0"]["input"] == "a"
    e = W[IDS]
    g = (softmax(e @ W.T) - np.eye(4)[TARGETS]) / 3                 # the logits' gradient
    lookup = np.zeros_like(W)
    np.add.at(lookup, IDS, g @ W)
    np.testing.assert_allclose(arr(edges["embedding(w, ids)#0"]["grad"]), lookup, rtol=1e-12,
                               atol=1e-16)
    head = g.T @ e
    np.testing.assert_allclose(arr(edges["w.T#0"]["grad"]), head, rtol=1e-12, atol=1e-16)
    total = lookup + head
    assert edges["w.T#0"]["share"] == pytest.approx(np.sum(head * total) / np.sum(total ** 2),
                                                    rel=1e-9)
    assert edges["w.T#0"]["norm"] == pytest.approx(np.linalg.norm(head), rel=1e-12)
    assert_adds_up(answer, "w")


def test_a_residual_and_a_diamond_over_http(client):
    x, w = rng.normal(size=(2, 3)), rng.normal(size=(3, 3))
    seed = rng.normal(size=(2, 3))
    answer = post(client, {"expression": "x + tanh(x @ w)", "variables": {"x": x.tolist(),
                  "w": w.tolist()}, "grad_output": seed.tolist(), "paths": True})
    edges = edges_of(answer, "x")
    np.testing.assert_array_equal(arr(edges["x + tanh(x @ w)#0"]["grad"]), seed)   # the skip
    np.testing.assert_allclose(arr(edges["x @ w#0"]["grad"]),
                               (seed * (1 - np.tanh(x @ w) ** 2)) @ w.T, rtol=1e-12)
    assert_adds_up(answer, "x")
    assert [p["node"] for p in answer["paths"]] == [node(answer, "x")["id"]]   # w: used once

    v = rng.normal(size=4)
    answer = post(client, {"expression": "tanh(v) * sigmoid(v)", "variables": {"v": v.tolist()},
                           "paths": True})
    edges = edges_of(answer, "v")
    t, s = np.tanh(v), 1 / (1 + np.exp(-v))
    np.testing.assert_allclose(arr(edges["tanh(v)#0"]["grad"]), s * (1 - t ** 2), rtol=1e-12)
    np.testing.assert_allclose(arr(edges["sigmoid(v)#0"]["grad"]), t * s * (1 - s), rtol=1e-12)
    assert_adds_up(answer, "v")

    answer = post(client, {"expression": "v * v", "variables": {"v": v.tolist()}, "paths": True})
    edges = edges_of(answer, "v")
    assert {e["input"] for e in edges.values()} == {"a", "b"}       # one op, two edges
    for e in edges.values():
        np.testing.assert_array_equal(arr(e["grad"]), v)


def test_repeat_kv_says_which_query_heads_read_each_kv_head(client):
    q, k = rng.normal(size=(1, 4, 2, 3)), rng.normal(size=(1, 2, 2, 3))
    seed = rng.normal(size=(1, 4, 2, 2))
    answer = post(client, {"expression": "q @ transpose(repeat_kv(k, 2), [0, 1, 3, 2])",
                           "variables": {"q": q.tolist(), "k": k.tolist()},
                           "grad_output": seed.tolist(), "paths": True})
    (edge,) = edges_of(answer, "k").values()
    per_head = np.einsum("bhqk,bhqd->bhkd", seed, q)          # what query head h hands back
    assert [(h["head"], h["kv_head"]) for h in edge["heads"]] == [(0, 0), (1, 0), (2, 1), (3, 1)]
    for h in edge["heads"]:
        np.testing.assert_allclose(arr(h["grad"]), per_head[:, h["head"]], rtol=1e-12)
    np.testing.assert_allclose(arr(edge["grad"]), per_head[:, 0::2] + per_head[:, 1::2],
                               rtol=1e-12)
    for j in (0, 1):                              # the heads' shares of a K/V head: 1 in all
        assert sum(h["share"] for h in edge["heads"] if h["kv_head"] == j) == pytest.approx(1.0)


def test_a_composite_block_its_opened_attention_and_the_answers_bound(client):
    """x + attention(rms_norm(x, g), ...): x's skip and its block (a composite consumer, run
    again as one op); opened, the attention shows x read by its three projections and its
    K/V heads by repeat_kv."""
    d, h, hkv, n = 4, 2, 1, 3
    theta = np.arange(n)[:, None] * 10000.0 ** (-np.arange(0, d // h, 2) / (d // h))
    variables = {"x": rng.normal(size=(1, n, d)).tolist(), "g": np.ones(d).tolist(),
                 **{name: rng.normal(size=s).tolist() for name, s in
                    [("wq", (d, d)), ("wk", (d, 2)), ("wv", (d, 2)), ("wo", (d, d))]},
                 "cos": np.cos(theta).tolist(), "sin": np.sin(theta).tolist()}
    expression = f"x + attention(rms_norm(x, g), wq, wk, wv, wo, {h}, {hkv}, cos, sin)"
    answer = post(client, {"expression": expression, "variables": variables, "paths": True,
                           "expand": True})
    edges = edges_of(answer, "x")
    assert set(edges) == {f"{expression}#0", "rms_norm(x, g)#0"}
    parts = [arr(e["grad"]) for e in edges.values()]
    np.testing.assert_allclose(sum(parts), arr(node(answer, "x")["grad"]), rtol=1e-12,
                               atol=1e-14)
    opened = next(m for m in answer["nodes"] if m["op"] == "attention")["expansion"]
    inner = edges_of(opened, "x")
    assert sorted(k.split(" @ ")[-1] for k in inner) == ["wk#0", "wq#0", "wv#0"]
    assert any("heads" in e for p in opened["paths"] for e in p["edges"])
    # the answer's bound counts the parts: refused (413) where the plain answer fits
    plain = prepare(expression, variables).answer_elements
    split = prepare(expression, variables, paths=True).answer_elements
    assert split == plain + 2 * n * d                      # x's two parts, each (1, n, d)
    err = post(client, {"expression": expression, "variables": variables, "paths": True},
               status=413, max_answer_elements=split - 1)["error"]
    assert "split of shared gradients" in err["message"]
    post(client, {"expression": expression, "variables": variables, "paths": True},
         max_answer_elements=split)


def test_paths_belong_to_eval_alone(client):
    r = client.post("/api/v1/batch", content=orjson.dumps({"cases": [{**TIED, "paths": True}]}),
                    headers=JSON)
    err = r.json()["results"][0]["error"]
    assert err["status"] == 422 and "eval's own option" in err["message"]


# --------------------------------------------------------------------------------------
# check's modes
# --------------------------------------------------------------------------------------

ALL = ["finite_differences", "taylor", "adjoint", "eps_sweep"]


def test_every_mode_of_check_on_a_smooth_expression(client):
    x = rng.normal(size=(2, 3))
    answer = post(client, {"expression": "softmax(x * x)", "variables": {"x": x.tolist()},
                           "grad_output": rng.normal(size=(2, 3)).tolist(),
                           "check": {"modes": ALL}})
    check = answer["check"]
    assert check["passed"] and check["float32"] is False and check["note"] is None
    assert check["finite_differences"]["passed"] and check["finite_differences"]["eps"] == 1e-6
    fd = check["finite_differences"]["inputs"]["x"]
    np.testing.assert_allclose(arr(fd["analytic"]), arr(answer["grads"]["x"]), rtol=1e-12)
    assert check["taylor"]["order"] == pytest.approx(2.0, abs=0.1) and not check["taylor"]["linear"]
    assert len(check["taylor"]["steps"]) == len(check["taylor"]["remainders"]) == 12
    adj = check["adjoint"]
    assert adj["passed"] and abs(adj["vjp"] - adj["jvp"]) <= adj["tolerance"]
    sweep = check["eps_sweep"]
    assert len(sweep["eps"]) == len(sweep["error"]) == 23 and 1e-7 <= sweep["best_eps"] <= 1e-4
    assert sweep["best_error"] == min(sweep["error"])


def test_check_modes_at_a_kink_in_float32_and_with_a_masked_output(client):
    kink = post(client, {"expression": "relu(x).sum()", "variables": {"x": [0.0, 0.0, 1.0]},
                         "check": {"modes": ["taylor"], "seed": 2}})["check"]
    assert kink["taylor"]["order"] <= 1.2 and not kink["passed"]
    linear = post(client, {"expression": "(x * 3.0).sum()", "variables": {"x": [0.5, 2.0]},
                           "check": {"modes": ["taylor"]}})["check"]
    assert linear["taylor"]["linear"] and linear["taylor"]["order"] is None and linear["passed"]
    body = {"expression": "tanh(x)", "variables": {"x": rng.uniform(0.5, 2, (3, 4)).tolist()},
            "grad_output": rng.normal(size=(3, 4)).tolist(),
            "check": {"modes": ["finite_differences", "taylor", "adjoint", "eps_sweep"],
                      "float32": True}}
    f32 = post(client, body)["check"]
    assert f32["float32"] and not f32["finite_differences"]["passed"]     # eps 1e-6: rounding
    assert f32["taylor"]["passed"] and f32["adjoint"]["passed"] and not f32["passed"]
    assert 1e-3 <= f32["eps_sweep"]["best_eps"] <= 1e-1
    body["check"] = {"modes": ["finite_differences"], "float32": True,
                     "eps": f32["eps_sweep"]["best_eps"]}
    assert post(client, body)["check"]["finite_differences"]["inputs"]["x"]["max_rel_err"] < 1e-2
    mask = [[False, True], [False, False]]
    masked = post(client, {"expression": "softmax(masked_fill(s, m, -inf)) * 2.0 + s",
                           "variables": {"s": [[0.1, 0.2], [0.3, 0.4]], "m": mask},
                           "check": {"modes": ["taylor", "adjoint"]}})["check"]
    assert masked["passed"] and "non-finite" not in (masked["note"] or "")
    inf_out = post(client, {"expression": "masked_fill(s, m, -inf) * 2.0",
                            "variables": {"s": [[0.1, 0.2], [0.3, 0.4]], "m": mask},
                            "check": {"modes": ["taylor", "adjoint"]}})["check"]
    assert inf_out["passed"] and inf_out["note"].startswith("1 non-finite output position")


@pytest.mark.parametrize("check, field", [
    ({"modes": []}, "check.modes"), ({"modes": ["taylor", "taylor"]}, "check.modes"),
    ({"modes": ["newton"]}, "check.modes"), ({"float32": True}, "check.modes"),
    ({"modes": ["taylor"], "float32": 1}, "check.float32"),
    ({"modes": ["adjoint"], "eps": 0}, "check.eps"),
    ({"modes": ["adjoint"], "eps": 2}, "check.eps"),
    ({"modes": ["taylor"], "seed": -1}, "check.seed"), ({"modes": ["taylor"], "h": 1}, "check.h"),
    ("yes", "check")])
def test_a_check_of_the_wrong_form_is_refused_naming_its_field(client, check, field):
    err = post(client, {**TIED, "check": check}, status=422)["error"]
    assert err["input"] == field, err


def test_the_modes_are_held_to_the_same_limits_as_finite_differences(client):
    """A (64, 64) attention head: finite differences of q, k, v (12 288 elements) are past
    max_check_elements; the Taylor and adjoint tests (a fixed number of passes) run."""
    q, k, v = (rng.normal(size=(64, 64)).tolist() for _ in range(3))
    mask = np.triu(np.ones((64, 64), bool), 1).tolist()
    body = {"expression": "softmax(masked_fill(q @ k.T / 8.0, m, -inf)) @ v",
            "variables": {"q": q, "k": k, "v": v, "m": mask}}
    err = post(client, {**body, "check": True}, status=413)["error"]
    assert err["input"] == "check" and "12288 elements" in err["message"]
    err = post(client, {**body, "check": {"modes": ["finite_differences"]}}, status=413)["error"]
    assert "12288 elements" in err["message"]
    ok = post(client, {**body, "check": {"modes": ["taylor", "adjoint"]}})["check"]
    assert ok["passed"] and ok["taylor"]["order"] >= 1.8
    err = post(client, {**body, "check": {"modes": ["taylor"]}}, status=413,
               max_check_elements=0)["error"]
    assert err["input"] == "check" and "forward passes" in err["message"]
    err = post(client, {**body, "check": {"modes": ["eps_sweep"]}}, status=413,
               max_matmul_madds=5_000_000)["error"]
    assert err["input"] == "check" and "make 49 forward passes" in err["message"]


def test_evaluate_takes_the_same_options_as_the_route():
    answer = evaluate(TIED["expression"], TIED["variables"], paths=True,
                      check={"modes": ["adjoint"]})
    assert answer["check"]["adjoint"]["passed"] and len(answer["paths"][0]["edges"]) == 2

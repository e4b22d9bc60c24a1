"""Where a gradient dies (glassllm/gradients/dead.py and the evaluator's ``dead``): each
reason reported on a case built to show it, with the dead elements counted against NumPy
written here; nothing reported when every gradient is alive; the real `.grad` untouched.
"""

from __future__ import annotations

import numpy as np
import pytest

from glassllm import autograd as A
from glassllm.gradients.dead import REASONS, dead_gradients
from glassllm.sandbox.expr import evaluate
from glassllm.tensor import Tensor, no_grad

RNG = np.random.default_rng(7)


def leaf(*shape):
    return Tensor(RNG.standard_normal(shape), requires_grad=True)


def causes(report, name):
    (entry,) = [d for d in report if d.name == name]
    return {c.reason: c for c in entry.causes}, entry


def test_nothing_is_reported_when_every_gradient_is_alive():
    x, w, b = leaf(3, 4), leaf(4, 2), leaf(2)
    out = A.tsum(A.tanh(A.add(A.matmul(x, w), b)) * Tensor(RNG.standard_normal((3, 2))))
    assert dead_gradients(out, {"x": x, "w": w, "b": b}) == []
    assert evaluate("tanh(x @ w + b).sum()", {"x": x.data.tolist(), "w": w.data.tolist(),
                                              "b": b.data.tolist()}, dead=True)["dead"] == []


def test_dead_relu_units_counted_per_feature():
    x = leaf(5, 3)
    w = leaf(3, 4)
    bias = np.array([50.0, -50.0, 50.0, 50.0])        # unit 1 is off for every row
    pre = A.add(A.matmul(x, w), Tensor(bias))
    report = dead_gradients(A.tsum(A.relu(pre)), {"x": x, "w": w})
    found, entry = causes(report, "w")
    (cause,) = found.values()
    off = pre.data <= 0
    # w[:, j] is dead exactly when unit j is off for every row
    assert entry.dead == 3 * int(np.all(off, axis=0).sum())
    assert (cause.reason, cause.op, cause.units) == ("dead_relu", "relu", 1)


def test_where_untaken_branches_and_max_non_winners():
    a, b = leaf(4), leaf(4)
    cond = np.array([True, False, True, True])
    report = dead_gradients(A.tsum(A.where(cond, A.tanh(a), b)), {"a": a, "b": b, "c": cond})
    (ca, ea), (cb, eb), (cc, ec) = (causes(report, n) for n in "abc")
    assert (ea.dead, eb.dead) == (1, 3) and set(ca) == set(cb) == {"where_untaken"}
    assert set(cc) == {"boolean_input"} and ec.missing
    x = Tensor([1.0, 5.0, 2.0, 5.0 - 1e-3], requires_grad=True)
    (c, e) = causes(dead_gradients(A.max(A.exp(x)), [x]), "0")
    assert set(c) == {"max_non_winner"} and e.dead == 3


def test_masked_positions_and_fully_masked_rows():
    s, v = leaf(3, 4), leaf(3, 4)
    mask = np.array([[False, True, True, True], [True] * 4, [False] * 4])
    report = dead_gradients(A.tsum(A.mul(A.masked_fill(s, mask, 0.0), v)), {"s": s, "v": v})
    c, e = causes(report, "s")
    assert e.dead == int(mask.sum())
    assert (c["fully_masked_row"].elements, c["fully_masked_row"].units) == (4, 1)
    assert c["masked"].elements == 3
    cv, ev = causes(report, "v")                      # v times a filled 0: its factor is 0
    assert set(cv) == {"multiplied_by_zero"} and ev.dead == int(mask.sum())


def test_sum_of_a_softmax_is_zero_by_symmetry_but_a_weighted_sum_is_not():
    x = leaf(2, 3)
    c, e = causes(dead_gradients(A.tsum(A.softmax(x)), [x]), "0")
    assert set(c) == {"softmax_symmetry"} and e.dead == 6 and not e.missing
    weights = Tensor(RNG.standard_normal((2, 3)))
    assert dead_gradients(A.tsum(A.mul(A.softmax(x), weights)), [x]) == []


def test_embedding_rows_not_in_the_batch_and_the_integer_ids():
    w = leaf(6, 2)
    ids = np.array([[0, 3], [3, 5]])
    report = dead_gradients(A.tsum(A.tanh(A.embedding(w, ids))), {"w": w, "ids": ids})
    c, e = causes(report, "w")
    unused = 6 - np.unique(ids).size
    assert set(c) == {"unused_rows"} and (e.rows, e.dead) == (unused, 2 * unused)
    ci, ei = causes(report, "ids")
    assert set(ci) == {"integer_input"} and ei.missing and ei.dead == 4


def test_inputs_cut_off_or_not_requiring_grad_and_cancelled_paths():
    x, y = leaf(3), leaf(3)
    with no_grad():
        z = A.tanh(y)
    out = A.tsum(A.add(A.sub(x, x), z))
    report = dead_gradients(out, {"x": x, "y": y, "k": Tensor([1.0])})
    assert set(causes(report, "x")[0]) == {"cancelled"}
    assert set(causes(report, "y")[0]) == {"not_connected"}
    assert set(causes(report, "k")[0]) == {"requires_grad_false"}


def test_a_zero_seed_and_the_real_grad_untouched():
    x = leaf(3)
    y = A.tanh(x)
    report = dead_gradients(y, [x], grad_output=np.array([1.0, 0.0, 2.0]))
    c, e = causes(report, "0")
    assert set(c) == {"zero_seed"} and e.dead == 1
    assert x.grad is None
    with pytest.raises(ValueError, match="rtol"):
        dead_gradients(y, [x], grad_output=np.ones(3), rtol=-1)


def test_each_reason_has_words():
    assert all(isinstance(w, str) and len(w) > 20 for w in REASONS.values())


# -- the expression evaluator: the nodes that cut a path -------------------------------

def by_variable(answer):
    return {d["variable"]: d for d in answer["dead"]}


def test_the_evaluator_names_the_detach_or_no_grad_node_that_cut_a_variable_off():
    answer = evaluate("tanh(x) * detach(y) + no_grad(z * 2)",
                      {"x": [0.5, 1.0], "y": [1.0, 0.0], "z": [3.0, 4.0],
                       "k": {"value": [1.0, 1.0], "requires_grad": False}}, dead=True)
    dead = by_variable(answer)
    texts = {n["id"]: n["text"] for n in answer["nodes"]}
    (cy,) = dead["y"]["causes"]
    assert (cy["reason"], texts[cy["node"]], dead["y"]["missing"]) == ("detached", "detach(y)",
                                                                         True)
    (cz,) = dead["z"]["causes"]
    assert (cz["reason"], texts[cz["node"]]) == ("no_grad", "no_grad(z * 2)")
    (cx,) = dead["x"]["causes"]                     # x times detach(y) = 0 at position 1
    assert (cx["reason"], cx["elements"], texts[cx["node"]]) == ("multiplied_by_zero", 1,
                                                                  "tanh(x) * detach(y)")
    assert cx["words"] == REASONS["multiplied_by_zero"]
    assert "k" not in dead                          # not in the expression
    plain = evaluate("tanh(x) * detach(y)", {"x": [0.5, 1.0], "y": [1.0, 0.0]})
    assert "dead" not in plain and plain["grads"]["x"] == answer["grads"]["x"]


def test_the_evaluator_reports_requires_grad_false_and_integer_and_boolean_inputs():
    answer = evaluate("cross_entropy(where(c, a, b) * s, t)",
                      {"a": [[1.0, 2.0]], "b": [[0.5, 0.5]], "c": [[True, False]],
                       "s": {"value": 2.0, "requires_grad": False}, "t": [1]}, dead=True)
    dead = by_variable(answer)
    assert dead["s"]["causes"][0]["reason"] == "requires_grad_false"
    assert dead["t"]["causes"][0]["reason"] == "integer_input"
    assert dead["c"]["causes"][0]["reason"] == "boolean_input"
    assert [c["reason"] for c in dead["a"]["causes"]] == ["where_untaken"]
    assert dead["a"]["dead"] == dead["b"]["dead"] == 1


# -- the tiny LM: which parameters got no gradient in a step ---------------------------

def test_a_training_step_names_the_embedding_rows_its_batch_did_not_hold():
    from glassllm.modules import GlassConfig, GlassLM
    from glassllm.tokenizer import ByteTokenizer
    from glassllm.training.loop import default_corpus
    from glassllm.training.stream import get_batch, train_events, train_steps

    config = GlassConfig(d_model=16, n_layers=1, n_heads=2, n_kv_heads=1, ffn_hidden=32,
                         max_seq_len=16, seed=5)
    data = ByteTokenizer().encode(default_corpus())
    ids, _ = get_batch(data, 4, 16, np.random.default_rng(5))     # the loop's first batch
    (info,) = train_steps(GlassLM(config), data, steps=1, batch_size=4, seed=5, every=1)
    unused = 256 - np.unique(ids).size
    assert info.dead == [{"name": "tok_emb.weight", "dead": 16 * unused, "size": 256 * 16,
                          "rows": 256, "dead_rows": unused}]
    events = list(train_events(config, default_corpus(), steps=2, batch=4, seed=5, every=2))
    (stats,) = [e for e in events if e["event"] == "stats"]
    assert [d["name"] for d in stats["dead"]] == ["tok_emb.weight"]

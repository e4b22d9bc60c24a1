"""Notebook pictures (glassllm.display): every node's gradient in a Tensor's graph equals
what backward gives that node with retain_grad (the engine itself as the oracle); the HTML
is self-contained (no script, style, CDN or style attribute: what nbconvert and GitHub's
preview keep); the text/plain forms say the numbers; the Tensor's repr lines up. The
rendering in a browser, from an executed and converted notebook, is
tests/notebooks/test_notebook_display.py."""

from __future__ import annotations

import importlib.util
import re

import numpy as np
import pytest
from paths import ROOT

from glassllm import Tensor, display  # glassllm.display: glassllm.apps.display
from glassllm import autograd as A


def _bench():
    """bench/display.py by its path (bench/ on sys.path would shadow tests' own modules)."""
    spec = importlib.util.spec_from_file_location("bench_display", ROOT / "bench" / "display.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


forty_nodes = _bench().forty_nodes        # the measured 40-node graph

FORBIDDEN = re.compile(r"<script|<style|\sstyle=|<link|<iframe|@import|javascript:|https?://"
                       r"(?!www\.w3\.org/2000/svg)", re.I)


def test_a_matrix_repr_lines_up_under_its_first_row():
    t = Tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    assert repr(t) == "Tensor([[1., 2.],\n        [3., 4.]], requires_grad=True)"
    first, second = repr(t).splitlines()
    assert first.index("[1.") == second.index("[3.")


def test_every_nodes_gradient_is_the_one_backward_computes():
    root, names = forty_nodes()
    nodes = display.tensor_nodes(root, names)
    assert len(nodes) == 40
    # the oracle: the same graph again, every tensor asked to keep its gradient
    order = []
    seen = set()

    def walk(t):
        if id(t) in seen:
            return
        seen.add(id(t))
        for p in t._parents:
            walk(p)
        order.append(t)
    root2, names2 = forty_nodes()
    walk(root2)
    for p in names2.values():
        p.grad = None
    for t in order:
        if t.requires_grad and t._parents:
            t.retain_grad()
    root2.backward()
    assert len(order) == len(nodes)
    for node, t in zip(nodes, order, strict=True):
        np.testing.assert_array_equal(node.value, t.data)
        if t.requires_grad:
            np.testing.assert_allclose(node.grad, t.grad, rtol=1e-12, atol=1e-15,
                                       err_msg=node.label)
        else:
            assert node.grad is None
    assert {n.label for n in nodes} >= set(names) | {"matmul", "tanh", "relu", "sigmoid"}


def test_the_html_is_self_contained_and_the_text_says_the_numbers():
    root, names = forty_nodes()
    bundle = display.tensor_bundle(root, names)
    html = bundle["text/html"]
    assert FORBIDDEN.findall(html) == []
    assert html.count("<svg") == 1 and 'role="img"' in html and "<title>" in html
    assert len(html.encode()) <= 200_000           # what a notebook stores per picture
    text = bundle["text/plain"]
    assert text.splitlines()[0] == repr(root)
    assert len(text.splitlines()) == 41            # the repr, then one line per node
    assert f"data {float(root.data):.4g}" in text and "grad 1" in text.splitlines()[-1]


def test_a_scalar_graph_shows_data_and_grad_on_every_node():
    """micrograd's neuron: tanh(x1*w1 + x2*w2 + b), as in its README."""
    x1, x2 = Tensor(2.0, requires_grad=True), Tensor(0.0, requires_grad=True)
    w1, w2 = Tensor(-3.0, requires_grad=True), Tensor(1.0, requires_grad=True)
    b = Tensor(6.8813735870195432, requires_grad=True)
    o = A.tanh(x1 * w1 + x2 * w2 + b)
    o.backward()
    names = {"x1": x1, "x2": x2, "w1": w1, "w2": w2, "b": b}
    text = display.tensor_bundle(o, names)["text/plain"]
    # micrograd's numbers: o = 0.7071, do/dx1 = -1.5, do/dw1 = 1.0, do/dx2 = 0.5
    assert "tanh(#8) scalar  data 0.7071  grad 1" in text
    lines = {line.split()[1]: line for line in text.splitlines()[1:]}
    assert lines["x1"].endswith("grad -1.5") and lines["w1"].endswith("grad 1")
    assert lines["x2"].endswith("grad 0.5") and lines["w2"].endswith("grad 0")
    html = display.tensor_bundle(o, names)["text/html"]
    assert html.count("data 0.7071") == 1 and "grad -1.5" in html


def test_a_leaf_shows_its_data_and_grad_as_heatmaps():
    t = Tensor(np.arange(6.0).reshape(2, 3) - 2, requires_grad=True)
    (t * t).sum().backward()
    bundle = t._repr_mimebundle_()
    assert bundle["text/plain"] == repr(t)
    assert ">data<" in bundle["text/html"] and ">grad<" in bundle["text/html"]
    assert bundle["text/html"].count("<rect") >= 12


def test_colours_are_the_pages_blue_white_orange():
    assert display.colour(0.0, 1.0) == "#ffffff"
    assert display.colour(1.0, 1.0) == "#e66101" and display.colour(-1.0, 1.0) == "#2166ac"
    assert display.colour(float("nan"), 1.0) == "#bbbbbb"
    fills = display._colours(np.array([[-2.0, 0.0, 2.0, np.inf]]), 2.0)
    assert fills == [["#2166ac", "#ffffff", "#e66101", display.colour(np.inf, 2.0)]]


def test_an_expression_answer_draws_its_nodes():
    from glassllm.sandbox.expr import evaluate

    answer = evaluate("softmax(x).sum() * 2", {"x": [[1.0, 2.0, 3.0]]})
    bundle = display.expression_bundle(answer | {"expression": "softmax(x).sum() * 2"})
    assert bundle["text/plain"].splitlines()[0].startswith("#0 x (1, 3)")
    assert "softmax(x).sum() * 2" in bundle["text/html"]
    assert FORBIDDEN.findall(bundle["text/html"]) == []


@pytest.mark.parametrize("field", ["agree", "mask"])
def test_a_verdict_marks_each_element_and_names_the_pattern(field):
    wrong = np.array([[True, False], [True, True]])
    report = {"passed": False, "pattern": {"name": "sign", "says": "the sign is flipped"}}
    report[field] = ~wrong if field == "agree" else wrong       # mask marks the mismatches
    if field == "agree":
        report["digits"] = np.array([[0.0, np.inf], [1.0, 2.0]])
    bundle = display.check_bundle({"passed": False, "value": report, "grads": {}})
    text = bundle["text/plain"]
    assert "value: wrong (1 of 4 elements agree) — the sign is flipped" in text
    html = bundle["text/html"]
    assert html.count(display.BAD) == 3 and html.count(display.GOOD) == 1
    assert "the sign is flipped" in html

"""Every picture glassllm draws in a notebook, for real: a notebook executed by nbclient
(a real IPython kernel) against a real sandbox, converted by nbconvert to HTML, opened in
Chromium — no request leaves the file, no console error, axe-core finds no serious
violation, screenshots at 1280 and 390 wide (a 40-node graph among them) under
test-artifacts/; and each output's text/plain form says the numbers."""

from __future__ import annotations

import os

import nbformat
import pytest
from browser_session import ARTIFACTS, axe_serious
from nbclient import NotebookClient
from nbconvert import HTMLExporter
from paths import ROOT

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CELLS = [
    ("setup", f"""
import sys
sys.path.insert(0, {str(ROOT / "bench")!r})
import numpy as np
from glassllm import Tensor, display as gd
from glassllm.client import Sandbox
from display import forty_nodes        # bench/display.py: the measured 40-node graph
sb = Sandbox()                         # $GLASSLLM_URL: the test's sandbox
root, names = forty_nodes()"""),
    ("sandbox", "sb"),
    ("tensor", "root"),
    ("graph40", "gd.graph(root, names)"),
    ("leaf", "names['w3']"),
    ("expression", """sb.eval("cross_entropy(x @ w, t)", {"x": [[1.0, 2.0], [0.5, -1.0]],
        "w": [[0.2, -0.1, 0.0], [0.1, 0.3, -0.2]], "t": [0, 2]})"""),
    ("op", 'sb.op("softmax", {"a": np.arange(12.0).reshape(3, 4) / 4})'),
    ("check", """x = np.array([[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]])
right = sb.op("softmax", {"a": x}, grad_output=np.eye(2, 3))
sb.check(op="softmax", inputs={"a": x}, grad_output=np.eye(2, 3), value=right.value,
         grads={"a": -right.grads["a"]}, digits=4)"""),
    ("submitted", """def rms_norm_backward(x, weight, g):
    r = 1 / np.sqrt((x ** 2).mean(axis=-1, keepdims=True) + 1e-6)
    dweight = (g * x * r).reshape(-1, x.shape[-1]).sum(axis=0)
    gw = g * weight
    dx = r * gw - x * r ** 3 * (gw * x).mean(axis=-1, keepdims=True)
    return dx, dweight * 2          # a deliberate mistake in dweight
sb.submit("rmsnorm-backward", function=rms_norm_backward, student="ada")"""),
]


@pytest.fixture(scope="module")
def notebook(url, tmp_path_factory):
    os.environ["GLASSLLM_URL"] = url          # the kernel inherits it
    try:
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell(src.strip(), metadata={"name": name})
                    for name, src in CELLS]
        NotebookClient(nb, timeout=120, kernel_name="python3",
                       resources={"metadata": {"path": str(ROOT)}}).execute()
    finally:
        del os.environ["GLASSLLM_URL"]
    folder = tmp_path_factory.mktemp("nb")
    # nbconvert's page itself loads require.js and MathJax from a CDN; an offline hub
    # points them at local copies (empty here: the pictures need neither)
    for name in ("require.js", "mathjax.js"):
        (folder / name).write_text("", encoding="utf-8")
    exporter = HTMLExporter(template_name="lab", require_js_url="require.js",
                            mathjax_url="mathjax.js")
    html, _ = exporter.from_notebook_node(nb)
    path = folder / "display.html"
    path.write_text(html, encoding="utf-8")
    return nb, path


def output(nb, name: str) -> dict:
    cell = next(c for c in nb.cells if c.metadata.get("name") == name)
    results = [o for o in cell.outputs if o.output_type == "execute_result"]
    assert len(results) == 1, (name, cell.outputs)
    return results[0]["data"]


def test_every_output_has_html_and_a_useful_text(notebook):
    nb, _ = notebook
    for name, _src in CELLS[1:]:
        data = output(nb, name)
        if name != "sandbox":
            assert "text/html" in data and "<svg" in data["text/html"], name
    assert output(nb, "sandbox")["text/plain"].startswith("Sandbox('http://127.0.0.1:")
    assert output(nb, "tensor")["text/plain"].startswith("Tensor(1.85")
    assert len(output(nb, "graph40")["text/plain"].splitlines()) == 41
    assert "value = [[" in output(nb, "op")["text/plain"]
    check = output(nb, "check")["text/plain"]
    assert check.startswith("check: not passed") and "value: right (6 of 6" in check
    assert "grad a: wrong" in check
    submitted = output(nb, "submitted")["text/plain"]
    assert submitted.startswith("not yet: ") and "wrong" in submitted


@pytest.mark.parametrize("width", [1280, 390])
def test_the_converted_notebook_renders_offline_clean_and_accessible(notebook, browser, width):
    _, path = notebook
    context = browser.new_context(viewport={"width": width, "height": 800})
    pg = context.new_page()
    errors, outside = [], []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.route("**/*", lambda route: route.continue_() if route.request.url.startswith(
        ("file://", "data:")) else (outside.append(route.request.url), route.abort()))
    pg.goto(path.as_uri())
    pg.wait_for_load_state("load")
    pictures = pg.locator(".glassllm-display svg")
    assert pictures.count() >= 8
    for i in range(pictures.count()):
        box = pictures.nth(i).bounding_box()
        assert box["width"] > 50 and box["height"] > 20, i
    # our outputs (nbconvert's own "Out[n]:" prompts fail colour-contrast: not ours to fix)
    assert axe_serious(pg, ".glassllm-display") == []
    ARTIFACTS.mkdir(exist_ok=True)
    pg.screenshot(path=str(ARTIFACTS / f"notebook-display-{width}.png"), full_page=True)
    kinds = ["tensor", "graph40", "leaf", "expression", "op", "check", "submitted"]
    shown = pg.locator(".glassllm-display")
    assert shown.count() == len(kinds)
    for i, kind in enumerate(kinds):                 # one picture per kind, to look at
        shown.nth(i).screenshot(path=str(ARTIFACTS / f"notebook-{kind}-{width}.png"))
    context.close()
    assert outside == [], outside
    assert errors == [], errors

"""Copy as PyTorch: every op this exporter knows (each registry example of it) and every
lesson, run by a real sandbox and written as a PyTorch script by the client; every script
runs under a real PyTorch (torch==2.13.0, CPU) and its table says every tensor matches
glassllm's numbers (exact / close / max diff, Karpathy's cmp). A wrong number written into
a script is caught (the table says MISMATCH, the script exits 1)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from glassllm.client import Sandbox
from glassllm.course.lesson_requests import LESSONS
from glassllm.sandbox import registry
from glassllm.sandbox.torch_script import DEFINITIONS, ExportError

pytestmark = pytest.mark.slow
pytest.importorskip("torch")

# runs each script in one interpreter (one torch import): exit code and output per script
DRIVER = """
import contextlib, io, json, runpy, sys
out = {}
for path in sys.argv[1:]:
    buf = io.StringIO()
    code = 0
    with contextlib.redirect_stdout(buf):
        try:
            runpy.run_path(path, run_name="__main__")
        except SystemExit as exc:
            code = exc.code or 0
        except Exception as exc:                  # a script that breaks: its error, kept
            code, _ = 2, print(f"{type(exc).__name__}: {exc}")
    out[path] = [code, buf.getvalue()]
print(json.dumps(out))
"""


def cases():
    for name, op in registry.OPS.items():
        if name in DEFINITIONS:
            for i, example in enumerate(op.examples):
                yield f"op {name} #{i}", {"op": name, **example.request()}
    for lesson in LESSONS:
        yield f"lesson {lesson['id']}", lesson["request"]


def run_scripts(paths):
    done = subprocess.run([sys.executable, "-c", DRIVER, *map(str, paths)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_every_exported_script_runs_and_every_tensor_matches(url, tmp_path):
    scripts, skipped = {}, {}
    with Sandbox(url) as sb:
        for label, case in cases():
            try:
                if "op" in case:
                    text = sb.torch_script(case["op"], case["inputs"],
                                           requires_grad=case.get("requires_grad"),
                                           grad_output=case.get("grad_output"))
                else:
                    text = sb.torch_script(expression=case["expression"],
                                           variables=case["variables"],
                                           grad_output=case.get("grad_output"))
            except ExportError as exc:
                skipped[label] = str(exc)
                continue
            path = tmp_path / f"case{len(scripts)}.py"
            path.write_text(text, encoding="utf-8")
            scripts[str(path)] = label
    assert len(scripts) >= 39 and len(skipped) <= 1, sorted(skipped.items())
    results = run_scripts(scripts)
    bad = {scripts[p]: out for p, (code, out) in results.items()
           if code != 0 or not out.rstrip().endswith("every tensor matches")}
    assert bad == {}
    for _path, (_code, out) in results.items():
        rows = [line for line in out.splitlines() if " | close: " in line]
        assert rows and all(" | close: True " in r for r in rows), out
    # only the ops without a PyTorch form here are skipped, and they say so
    assert all("no PyTorch form" in why for why in skipped.values()), skipped


def test_a_wrong_number_in_the_script_is_a_mismatch(url, tmp_path):
    with Sandbox(url) as sb:
        text = sb.torch_script("softmax", {"a": [[1.0, 2.0, 3.0]]})
    assert "glassllm = {" in text and '"grad a"' in text
    wrong = text.replace('"value": [[', '"value": [[0.5 + ', 1)
    path = tmp_path / "wrong.py"
    path.write_text(wrong, encoding="utf-8")
    (code, out), = run_scripts([path]).values()
    assert code == 1 and out.rstrip().endswith("MISMATCH")
    assert "value                    | exact: False | close: False" in out


def test_the_route_names_what_it_cannot_write(url):
    import httpx

    r = httpx.post(f"{url}/api/v1/torch", json={"op": "getitem", "inputs": {
        "a": [1.0, 2.0], "index": [0]}})
    assert r.status_code == 422 and r.json()["error"]["code"] == "not_exportable", r.text
    assert "index" in r.json()["error"]["message"]
    ok = httpx.post(f"{url}/api/v1/torch", json={"expression": "softmax(x).sum()",
                                                 "variables": {"x": [[1.0, 2.0]]}})
    assert ok.status_code == 200 and ok.json()["filename"] == "glassllm_expression.py"
    assert "out = tsum(softmax(x))" in ok.json()["script"]

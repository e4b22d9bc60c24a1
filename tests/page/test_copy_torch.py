"""The page's "Copy as PyTorch": for each reference example in the gallery (op calls and
expressions), the script the sandbox writes runs under a real PyTorch (torch==2.13.0,
CPU) and its table says every tensor matches glassllm's numbers; an op with no PyTorch
form here is said so in the status line, with no console error."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from browser_session import click_and_wait

pytestmark = [pytest.mark.browser, pytest.mark.slow]
pytest.importorskip("torch")

DRIVER = """
import contextlib, io, json, runpy, sys
out = []
for path in sys.argv[1:]:
    buf, code = io.StringIO(), 0
    with contextlib.redirect_stdout(buf):
        try:
            runpy.run_path(path, run_name="__main__")
        except SystemExit as exc:
            code = exc.code or 0
        except Exception as exc:
            code, _ = 2, print(f"{type(exc).__name__}: {exc}")
    out.append([code, buf.getvalue()])
print(json.dumps(out))
"""


def test_every_gallery_example_copies_as_a_matching_pytorch_script(page, tmp_path):
    count = page.locator("button.example").count()
    assert count >= 10
    paths, said = [], []
    for i in range(count):
        click_and_wait(page, f"button.example >> nth={i}")
        page.click("#copy-torch")
        page.wait_for_function("() => !document.querySelector('#status').textContent"
                               ".startsWith('Writing')")
        status = page.inner_text("#status")
        if status.startswith("No PyTorch script"):
            said.append(status)
            continue
        text = page.input_value("#copy-text")
        assert text.startswith('"""glassllm'), status
        path = tmp_path / f"example{i}.py"
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    assert len(paths) >= count - 2, said
    assert all("no PyTorch form" in s for s in said), said
    done = subprocess.run([sys.executable, "-c", DRIVER, *map(str, paths)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    for (code, out), path in zip(json.loads(done.stdout), paths, strict=True):
        assert code == 0 and out.rstrip().endswith("every tensor matches"), (path.name, out)

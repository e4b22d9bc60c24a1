"""What every browser test module shares (P1–P4): Debian's Chromium launched by Playwright
with the flags this machine needs, axe-core, and the helpers that read the page (a run,
a rendered table, a screenshot under test-artifacts/). The ``url`` and ``browser``
fixtures are in tests/conftest.py, the playground's ``page`` in tests/page/conftest.py."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from sandbox_server import ROOT

CHROMIUM = Path(os.environ.get("GLASSLLM_CHROMIUM", "/usr/bin/chromium"))
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ARTIFACTS = ROOT / "test-artifacts"
AXE = ROOT / "tests" / "vendor" / "axe-core" / "axe.min.js"

if not CHROMIUM.exists():  # `make test` installs it; a bare `pytest` on a new machine may not
    pytest.skip(f"{CHROMIUM} is missing: apt-get install -y chromium (make test does)",
                allow_module_level=True)
sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright


def inject_axe(pg) -> None:
    """axe-core into the page, as the test harness's own code (DevTools' evaluate): the
    page's Content-Security-Policy refuses inline scripts, which add_script_tag makes."""
    if not pg.evaluate("typeof axe !== 'undefined'"):
        pg.evaluate(AXE.read_text(encoding="utf-8"))


def axe_serious(pg, selector: str) -> list:
    """axe-core's serious and critical violations inside `selector`: [id, count, target]."""
    inject_axe(pg)
    return pg.evaluate(f"axe.run({json.dumps(selector)}).then(r => r.violations"
                       ".filter(v => v.impact === 'serious' || v.impact === 'critical')"
                       ".map(v => [v.id, v.nodes.length, v.nodes[0].target.join(' ')]))")


def shot(pg, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    pg.screenshot(path=str(ARTIFACTS / f"page-{name}.png"), full_page=True)


def runs(pg) -> int:
    return int(pg.evaluate("document.body.dataset.runs || '0'"))


def wait_run(pg, before: int) -> None:
    pg.wait_for_function(f"() => Number(document.body.dataset.runs || 0) > {before}")


def click_and_wait(pg, selector: str) -> None:
    before = runs(pg)
    pg.click(selector)
    wait_run(pg, before)


def table(pg, name: str) -> list[float]:
    """The numbers of a rendered heatmap, in row-major order (from each cell's full value)."""
    fig = f'figure.heatmap[data-name="{name}"]'
    cells = pg.eval_on_selector_all(f"{fig} td, {fig} .scalar-value",     # a scalar: a number
                                    "tds => tds.map(td => td.dataset.v)")
    assert cells, f"no heatmap named {name!r} on the page"
    return [float(c) for c in cells]


def flat(v) -> list[float]:
    if isinstance(v, list):
        return [x for item in v for x in flat(item)]
    return [float(v)]


def assert_numbers(got: list[float], want, what: str) -> None:
    want = flat(want)
    assert len(got) == len(want), f"{what}: {got} vs {want}"
    for g, w in zip(got, want, strict=True):
        same = g == w or math.isclose(g, w, rel_tol=1e-12, abs_tol=1e-12)
        assert same, f"{what}: {got} vs {want}"


def examples(url: str) -> list[dict]:
    """What the gallery shows: /api/v1/examples, else the op examples with reference numbers."""
    r = httpx.get(url + "/api/v1/examples")
    if r.status_code == 200:
        data = r.json()
        return data["examples"] if isinstance(data, dict) else data
    out = []
    for op in httpx.get(url + "/api/v1/ops").json()["ops"]:
        out += [{**ex, "op": op["name"]} for ex in op["examples"] if ex["expected"]]
    return out


def run_python(script: str) -> str:
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=ROOT, timeout=60, check=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout

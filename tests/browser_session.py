"""What every browser test module shares (P1–P4): Debian's Chromium launched by Playwright
with the flags this machine needs, a real sandbox for the module, one browser for the
module, and axe-core. Each module keeps its own ``page`` fixture (viewport, what to wait
for). The ``url`` and ``browser`` fixtures themselves are in conftest.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

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

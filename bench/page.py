"""The page's targets, measured in Debian's Chromium against a real sandbox on loopback:

1. the fitted layout of a 40-node graph (a transformer block written out: two causal
   heads, a residual, a gated MLP, the loss): dagre's time and the whole fitted drawing,
   on a fresh page (cold) and again with Fit pressed (warm); target ≤ 100 ms;
2. from opening the page to a lesson's result on screen: navigation start → the lesson
   drawn and in view, by its link (``/#lesson=<id>``) and by a click on the first screen
   (click → in view); target ≤ 1 s.

    .venv/bin/python bench/page.py [--repeat 10] [--width 1280 --height 800]

Prints medians and the worst of each; asserts nothing (timing belongs here, never in tests).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import urllib.parse
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))      # the tests' helpers import each other by name

from page_cases import forty_node_case  # noqa: E402  (the very case the tests check)
from sandbox_server import running_sandbox  # noqa: E402

CHROMIUM = os.environ.get("GLASSLLM_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu"]
LESSONS = ["neuron", "classifier", "attention-head", "swiglu"]


def line(name: str, xs: list[float]) -> None:
    print(f"  {name:44s} median {statistics.median(xs):7.1f} ms   worst {max(xs):7.1f} ms"
          f"   (n={len(xs)})")


def graph_layout(browser, url: str, size, repeat: int) -> None:
    frag = "#" + urllib.parse.quote(json.dumps(forty_node_case()))
    cold_dagre, cold_draw, warm_dagre, warm_draw = [], [], [], []
    for _ in range(repeat):
        pg = browser.new_context(viewport=size).new_page()
        pg.goto(url + "/" + frag)
        pg.wait_for_function("() => Number(document.body.dataset.runs || 0) > 0")
        svg = pg.locator("#graph")
        assert svg.locator(".node").count() == 40
        cold_dagre.append(float(svg.get_attribute("data-layout-ms")))
        cold_draw.append(float(svg.get_attribute("data-draw-ms")))
        for _ in range(3):
            ms = pg.evaluate("""() => { const t = performance.now();
                document.querySelector('#zoom-fit').click(); return performance.now() - t; }""")
            warm_draw.append(ms)
            warm_dagre.append(float(svg.get_attribute("data-layout-ms")))
        pg.context.close()
    print(f"40-node graph, fitted at {size['width']}×{size['height']}:")
    line("dagre, fresh page", cold_dagre)
    line("the whole fitted drawing, fresh page", cold_draw)
    line("dagre, Fit pressed", warm_dagre)
    line("the whole fitted drawing, Fit pressed", warm_draw)


def lesson_times(browser, url: str, size, repeat: int) -> None:
    by_link, by_click = {k: [] for k in LESSONS}, {k: [] for k in LESSONS}
    for _ in range(repeat):
        for lesson in LESSONS:
            pg = browser.new_context(viewport=size).new_page()
            pg.goto(f"{url}/#lesson={lesson}")
            pg.wait_for_selector(f'body[data-lesson="{lesson}"]')
            by_link[lesson].append(pg.evaluate(
                "performance.getEntriesByName('glassllm:lesson-shown')[0].startTime"))
            pg.goto(url + "/")
            pg.wait_for_selector("#lessons button")
            t0 = pg.evaluate("performance.now()")
            pg.click(f'#lessons button[data-lesson="{lesson}"]')
            pg.wait_for_selector(f'body[data-lesson="{lesson}"]')
            marks = pg.evaluate("performance.getEntriesByName('glassllm:lesson-shown')"
                                ".map(m => m.startTime)")
            by_click[lesson].append(marks[-1] - t0)
            pg.context.close()
    print(f"a lesson's result on screen, at {size['width']}×{size['height']}, loopback:")
    for lesson in LESSONS:
        line(f"{lesson}: page opened → in view (its link)", by_link[lesson])
    for lesson in LESSONS:
        line(f"{lesson}: click → in view", by_click[lesson])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=800)
    args = parser.parse_args()
    size = {"width": args.width, "height": args.height}
    # the access log off: one line per page request would bury the figures
    with running_sandbox(env={"GLASSLLM_ACCESS_LOG": "false"}) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        graph_layout(browser, url, size, args.repeat)
        lesson_times(browser, url, size, args.repeat)
        browser.close()


if __name__ == "__main__":
    main()

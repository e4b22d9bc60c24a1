"""The Train view while the training queue is busy, in headless Chromium against a real
sandbox that trains one run at a time: the page shows its place in line and the wait
("1st in line, about 9 s"), then its run once the place frees; a full line is retried
after Retry-After (the status says so) and Stop cuts the wait short. Screenshots at
1280×800 and 390×844 go to test-artifacts/train-queue-*.png; axe-core finds no violation.
"""

from __future__ import annotations

import re
import threading

import httpx
import pytest
from browser_session import ARTIFACTS, inject_axe
from sandbox_server import running_sandbox

pytestmark = [pytest.mark.browser, pytest.mark.slow]

TINY = {"d_model": 8, "n_layers": 1, "n_heads": 2, "n_kv_heads": 1, "ffn_hidden": 8,
        "max_seq_len": 8}
LONG = {"model": TINY, "steps": 2000, "every": 2}   # holds the one slot until closed
SMALL = {"#train-d-model": "8", "#train-n-layers": "1", "#train-n-heads": "2",
         "#train-n-kv-heads": "1", "#train-batch": "2", "#train-every": "10",
         "#train-steps": "20"}
REFUSED_503 = ("Failed to load resource: the server responded with a status of 503 "
               "(Service Unavailable)")


@pytest.fixture(scope="module")
def url():
    with running_sandbox(env={"GLASSLLM_MAX_TRAINING_RUNS": "1",
                              "GLASSLLM_MAX_TRAINING_QUEUE": "1"}) as u:
        yield u


class Holder:
    """Another student's run, streaming on a thread until `close()`."""

    def __init__(self, url: str, ident: str) -> None:
        self.first = threading.Event()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._read, args=(url, ident), daemon=True)
        self.thread.start()
        assert self.first.wait(30)

    def _read(self, url: str, ident: str) -> None:
        with httpx.stream("POST", f"{url}/api/v1/train", json=LONG, timeout=60,
                          headers={"X-Client-ID": ident}) as r:
            for line in r.iter_lines():
                if line.startswith("event: step") or line.startswith("event: position") \
                        or line.startswith("event: queued"):
                    self.first.set()
                if self.done.is_set():
                    return

    def close(self) -> None:
        self.done.set()
        self.thread.join(15)


def open_page(browser, url, width: int, height: int):
    context = browser.new_context(viewport={"width": width, "height": height})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    pg.goto(url + "/")
    pg.wait_for_selector("body[data-train-ready]")
    for selector, value in SMALL.items():
        pg.fill(selector, value)
    return context, pg, errors


def shot(pg, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    pg.locator("#train-queue").scroll_into_view_if_needed()
    pg.screenshot(path=str(ARTIFACTS / f"train-queue-{name}.png"))


@pytest.mark.parametrize("width,height", [(1280, 800), (390, 844)])
def test_the_page_shows_its_place_in_line_then_trains(browser, url, width, height):
    holder = Holder(url, f"holder-{width}")
    context, pg, errors = open_page(browser, url, width, height)
    try:
        pg.click("#train-start")
        pg.wait_for_selector("body[data-train-state=queued]", timeout=30_000)
        line = pg.inner_text("#train-queue")
        assert re.match(r"1st in line, (about \d+ (s|min)|under a second) until your run "
                        r"starts \(1 waiting, 1 training at once on this server\)\.", line), line
        assert pg.is_visible("#train-queue") and pg.is_enabled("#train-stop")
        inject_axe(pg)
        violations = pg.evaluate("axe.run('#train').then(r => r.violations.filter(v => "
                                 "['serious', 'critical'].includes(v.impact)).map(v => v.id))")
        assert violations == []
        assert pg.evaluate("document.documentElement.scrollWidth") <= width  # no sideways
        shot(pg, f"{width}x{height}")
        holder.close()                       # the other run ends: this one's turn
        pg.wait_for_selector("body[data-train-done]", timeout=60_000)
        pg.wait_for_function("() => document.body.dataset.trainState === 'idle'")
        assert not pg.is_visible("#train-queue")
        assert "Done: 20 steps" in pg.inner_text("#train-status")
    finally:
        holder.close()
        context.close()
    assert not errors, errors


def test_a_full_line_is_retried_and_stop_ends_the_wait(browser, url):
    holder, waiter = Holder(url, "holder"), None
    context, pg, errors = open_page(browser, url, 1280, 800)
    try:
        waiter = Holder(url, "waiter")       # the line's one place is taken
        pg.click("#train-start")
        pg.wait_for_selector("body[data-train-state=retrying]", timeout=30_000)
        status = pg.inner_text("#train-status")
        assert re.match(r"The training line is full right now; trying again in \d+ s…", status)
        pg.click("#train-stop")
        pg.wait_for_function("() => document.body.dataset.trainState === 'idle'")
        assert pg.inner_text("#train-status") == "Stopped."
        assert pg.is_enabled("#train-start")
    finally:
        holder.close()
        if waiter:
            waiter.close()
        context.close()
    assert errors == [REFUSED_503], errors   # Chromium logs every 5xx; this one is meant

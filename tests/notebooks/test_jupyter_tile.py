"""The "glassllm" tile of JupyterLab's launcher, on a real jupyter-server with
jupyter-server-proxy, started on a free port with a token and a hub's path prefix
(``/user/student/``, as JupyterHub gives each user): the tile's entry point is listed, and
the page opened through ``/user/student/glassllm/`` in Chromium runs a lesson, a training
run (its event stream through the proxy), the docs and Swagger UI — with no console error
and no request outside the prefix."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys

import httpx
import pytest
from browser_session import ARTIFACTS, axe_serious
from sandbox_server import free_port
from waiting import wait_until

pytestmark = [pytest.mark.browser, pytest.mark.slow]
pytest.importorskip("jupyter_server_proxy")

TOKEN = "tile-test-token"
PREFIX = "/user/student/"


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """A single-user Jupyter server as a hub spawns one: its own base URL, a token."""
    home = tmp_path_factory.mktemp("jupyter-home")
    port = free_port()
    env = {**os.environ, "HOME": str(home), "JUPYTER_CONFIG_DIR": str(home / "config"),
           "JUPYTER_DATA_DIR": str(home / "data"), "JUPYTER_RUNTIME_DIR": str(home / "run"),
           "GLASSLLM_MODE": "course"}          # the tile must set practice mode itself
    cmd = [sys.executable, "-m", "jupyter_server", "--no-browser", f"--port={port}",
           "--ip=127.0.0.1", f"--IdentityProvider.token={TOKEN}", f"--ServerApp.base_url={PREFIX}",
           "--allow-root",                       # CI runs as root; a hub never does
           f"--ServerApp.root_dir={home}"]    # the proxy: enabled by its own config file
    log = home / "jupyter.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}{PREFIX}"
    try:
        def up() -> bool:
            assert proc.poll() is None, log.read_text()[-3000:]
            with contextlib.suppress(httpx.HTTPError):
                return httpx.get(f"{base}api/status", params={"token": TOKEN}).status_code == 200
            return False

        wait_until(up, 120, "jupyter-server to start", every=0.2)
        yield base
    finally:
        proc.terminate()        # jupyter-server-proxy stops the sandbox it started
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_the_tile_is_listed_with_its_launcher_entry(hub):
    info = httpx.get(f"{hub}server-proxy/servers-info", params={"token": TOKEN}).json()
    tile = {s["name"]: s for s in info["server_processes"]}["glassllm"]
    assert tile["launcher_entry"]["enabled"] is True
    assert tile["launcher_entry"]["title"] == "glassllm"
    assert tile["launcher_entry"]["path_info"] == "glassllm/"
    icon = httpx.get(f"{hub}server-proxy/icon/glassllm", params={"token": TOKEN})
    assert icon.status_code == 200 and b"<svg" in icon.content


def test_the_page_runs_a_lesson_and_a_training_run_under_the_prefix(hub, browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    errors: list[str] = []
    outside: list[str] = []
    app = hub + "glassllm/"
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.on("request", lambda r: None if r.url.startswith(app) or r.url.startswith("data:")
          else outside.append(r.url))
    # the hub's login: the token once in the URL, then the cookie it sets (as a hub's)
    pg.goto(f"{hub}glassllm?token={TOKEN}")            # no slash: the proxy adds it
    assert pg.url.split("?")[0] == app
    outside.clear()                                      # the login redirect itself
    pg.wait_for_selector("body[data-ready]", timeout=90_000)   # the first click starts it
    assert httpx.get(f"{app}healthz", params={"token": TOKEN}).status_code == 200

    pg.wait_for_selector("#lessons button")
    before = int(pg.evaluate("document.body.dataset.runs || '0'"))
    pg.click('button[data-lesson="neuron"]')
    pg.wait_for_function(f"() => Number(document.body.dataset.runs || 0) > {before}")
    assert pg.inner_text("#status").startswith("Done")

    pg.wait_for_selector("body[data-train-ready]")
    for selector, value in {"#train-d-model": "16", "#train-n-layers": "1",
                            "#train-n-heads": "2", "#train-n-kv-heads": "1",
                            "#train-batch": "4", "#train-every": "10",
                            "#train-steps": "20"}.items():
        pg.fill(selector, value)
    pg.click("#train-start")
    # steps arrive one by one (streamed, not buffered until the end by the proxy)
    pg.wait_for_function("() => Number(document.body.dataset.trainSteps || 0) >= 1",
                         timeout=120_000)
    pg.wait_for_selector("body[data-train-done]", timeout=120_000)
    assert "Done: 20 steps" in pg.inner_text("#train-status")
    assert axe_serious(pg, "body") == []
    ARTIFACTS.mkdir(exist_ok=True)
    pg.screenshot(path=str(ARTIFACTS / "jupyter-tile-page.png"), full_page=False)

    # a clause link, the contract and Swagger UI stay under the prefix too
    href = pg.evaluate("document.querySelector('a[href*=\"docs\"]').href")
    assert href.startswith(app), href
    pg.goto(app + "docs/contract")
    assert pg.url == app + "docs/contract/"
    pg.click("nav >> text=HTTP (H)")
    assert pg.url == app + "docs/contract/http"
    pg.goto(app + "docs")
    pg.wait_for_selector(".opblock", timeout=30_000)
    ops = pg.locator('.opblock-get:has([data-path="/api/v1/ops"])')   # GET: "Try it out"
    ops.locator(".opblock-summary").click()
    ops.locator("button.try-out__btn").click()
    ops.locator("button.execute").click()
    status = ops.locator(".live-responses-table tbody .response-col_status").first
    status.wait_for()
    assert status.inner_text().strip().startswith("200")
    url_shown = ops.locator(".request-url pre").inner_text()
    assert url_shown == app + "api/v1/ops", url_shown     # the prefix kept (servers: ".")
    context.close()
    assert outside == [], f"requests outside {app}: {outside}"
    assert errors == [], errors

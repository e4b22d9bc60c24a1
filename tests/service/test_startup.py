"""Settings that cannot work stop `glassllm-sandbox` at start-up with one line naming them,
before any worker starts (a real CLI process each): a CORS origin that is not an origin,
a Prometheus multiprocess directory the workers cannot write or that holds someone
else's files. And what can be normalised is: an origin's trailing slash (RFC 6454 §6.1),
which used to be accepted and then never match a browser's ``Origin``."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import httpx
import pytest
from sandbox_server import ROOT, free_port, running_sandbox

from glassllm_service.settings import Settings, SettingsError, origin

pytestmark = pytest.mark.slow


def start(env: dict, *args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    """Run the CLI to its end (it must refuse to start); the port must be free after."""
    port = free_port()
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "glassllm_service.sandbox_cli",
                           "--port", str(port), *args],
                          cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=timeout)
    done.seconds = time.monotonic() - t0
    return done


def one_line(done: subprocess.CompletedProcess) -> str:
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    return lines[0]


# -- CORS origins ---------------------------------------------------------------------------

@pytest.mark.parametrize(("given", "served"), [
    ("https://b.example/", "https://b.example"), ("HTTPS://B.Example:443", "https://b.example"),
    ("http://localhost:8000/", "http://localhost:8000"), ("http://127.0.0.1:80", "http://127.0.0.1"),
    ("https://bücher.example", "https://xn--bcher-kva.example"),
    ("http://[::1]:8080/", "http://[::1]:8080"), ("*", "*")])
def test_an_origin_is_read_in_its_serialised_form(given, served):
    assert origin(given) == served
    assert Settings(cors_origins=f"https://a.example, {given}").cors_origin_list == [
        "https://a.example", served]


@pytest.mark.parametrize("given", ["https://b.example/app", "https://b.example/?x=1",
                                   "https://b.example#top", "https://u:p@b.example", "null",
                                   "b.example", "ftp://b.example", "https://", "https://b..example",
                                   "https://b.example:99999", "https://b_x.example",
                                   "file:///etc"])
def test_what_cannot_be_an_origin_is_refused_naming_the_variable(given):
    with pytest.raises(SettingsError, match=r"GLASSLLM_CORS_ORIGINS=.*RFC 6454"):
        Settings(cors_origins=f"https://a.example,{given}")


def test_a_trailing_slash_origin_matches_the_browsers_origin_on_a_real_server():
    with running_sandbox(env={"GLASSLLM_CORS_ORIGINS": "https://B.example/"}) as url:
        r = httpx.options(f"{url}/api/v1/ops/neg", headers={
            "Origin": "https://b.example", "Access-Control-Request-Method": "POST"})
        assert r.status_code == 200
        assert r.headers["access-control-allow-origin"] == "https://b.example"
        r = httpx.post(f"{url}/api/v1/ops/neg", json={"inputs": {"a": [1.0]}},
                       headers={"Origin": "https://b.example"})
        assert r.headers["access-control-allow-origin"] == "https://b.example"


def test_an_origin_with_a_path_stops_the_cli_in_one_line():
    done = start({"GLASSLLM_CORS_ORIGINS": "https://b.example/app"})
    line = one_line(done)
    assert line.startswith("glassllm-sandbox: invalid settings: GLASSLLM_CORS_ORIGINS=")
    assert "'https://b.example/app' has a path" in line

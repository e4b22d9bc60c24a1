"""The image's install and start steps, run in a fresh venv (no Docker engine on CI):
the Dockerfile and this test both call docker/install.sh, then start the console script."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from sandbox_server import ROOT, running_sandbox

pytestmark = pytest.mark.slow


def test_dockerfile_uses_the_shared_steps():
    text = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.\d+-slim", text, re.M)
    assert text.index("install.sh deps") < text.index("COPY . .") < text.index("install.sh app")
    assert re.search(r"^USER (?!root)\w+", text, re.M)
    assert re.search(r'^CMD \["glassllm-sandbox", "--host", "0\.0\.0\.0"', text, re.M)
    assert "HEALTHCHECK" in text and "/healthz" in text


def test_wheel_install_and_start_in_a_fresh_venv(tmp_path: Path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    src = tmp_path / "src"           # a clean copy, as `COPY . .` with .dockerignore gives
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".venv", ".git", "__pycache__", "dist", "build", "test-artifacts", ".*_cache"))
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path)}
    for step in ("deps", "app"):
        subprocess.run(["sh", "docker/install.sh", step], cwd=src, env=env, check=True,
                       timeout=600)
    # run from elsewhere, so only the installed wheel (with its page) can answer
    with running_sandbox(command=[str(venv / "bin" / "glassllm-sandbox")], cwd=tmp_path) as url:
        assert httpx.get(f"{url}/healthz").json() == {"status": "ok"}
        r = httpx.post(f"{url}/api/v1/ops/softmax_np", json={"inputs": {"x": [[1000.0, 1000.0]]}})
        assert r.json()["value"] == [[0.5, 0.5]]
        assert "<html" in httpx.get(f"{url}/").text.lower()
        assert httpx.get(f"{url}/docs-assets/swagger-ui.css").status_code == 200

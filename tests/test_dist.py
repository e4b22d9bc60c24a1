"""The sandbox serves its own wheel at /dist/ (issue 12): pip installs it from the live
server's URL into a fresh venv, and glassllm.client imports there."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import zipfile
from io import BytesIO

import httpx
import pytest


def test_the_wheel_is_a_valid_wheel_with_both_packages_and_the_page(url):
    name = httpx.get(f"{url}/dist/").json()["wheels"][0]
    assert name.startswith("glassllm-") and name.endswith("-py3-none-any.whl")
    data = httpx.get(f"{url}/dist/{name}").content
    files = zipfile.ZipFile(BytesIO(data)).namelist()
    version = name.split("-")[1]
    assert {"glassllm/client.py", "glassllm/wire.py", "service/app.py",
            "service/static/index.html", f"glassllm-{version}.dist-info/METADATA",
            f"glassllm-{version}.dist-info/RECORD"} <= set(files)
    assert not any("__pycache__" in f for f in files)
    assert httpx.get(f"{url}/dist/other.whl").status_code == 404


@pytest.mark.slow
def test_pip_installs_the_client_from_the_sandbox(url, tmp_path):
    name = httpx.get(f"{url}/dist/").json()["wheels"][0]
    venv = tmp_path / "venv"
    # glassllm itself comes from the sandbox's URL; numpy and httpx from pip's usual source
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    subprocess.run([py, "-m", "pip", "install", "-q", f"glassllm[client] @ {url}/dist/{name}"],
                   check=True)
    code = ("import glassllm.client, glassllm, sys; print(glassllm.client.__file__);"
            f" r = glassllm.client.Sandbox({url!r}).op('neg', {{'a': [1.0]}});"
            " print(r.value.tolist())")
    out = subprocess.run([py, "-c", code], capture_output=True, text=True, check=True,
                         cwd=tmp_path).stdout.splitlines()
    assert str(venv) in out[0] and out[1] == "[-1.0]"


def test_the_wheel_cache_is_named_by_the_code_so_other_code_never_gets_a_stale_wheel(
        tmp_path, monkeypatch):
    """Issue 12: the wheel is kept per digest of its files; a sandbox from other code
    (another checkout, a newer commit, the same version number) builds its own wheel, and
    the wheel holds this code's files (a QA run found a months-old wheel served)."""
    from service.routes import dist

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))      # where mkdtemp makes dirs
    monkeypatch.setattr(dist, "_built", {})
    dist._content_key.cache_clear()
    first = dist.wheel()
    assert first.parent.parent == tmp_path
    assert first.parent.name.startswith(f"glassllm-dist-{dist.version()}-{dist._content_key()}-")
    assert dist.wheel() == first                    # built once
    with zipfile.ZipFile(first) as zf:
        assert "glassllm/modules.py" in zf.namelist()
        assert zf.read("glassllm/modules.py") == (dist.PACKAGES[0] / "modules.py").read_bytes()
    real = dist._files
    monkeypatch.setattr(dist, "_files", lambda: [*real(), ("glassllm/extra.py", first)])
    dist._content_key.cache_clear()
    try:
        assert dist.wheel().parent != first.parent  # other code: another folder, a new build
    finally:
        dist._content_key.cache_clear()

"""The sandbox serves its own wheel at /dist/: pip installs it from the live
server's URL into a fresh venv, and glassllm.apps.client imports there."""

from __future__ import annotations

import importlib.metadata
import shlex
import subprocess
import sys
import tempfile
import zipfile
from io import BytesIO
from pathlib import Path

import httpx
import pytest
from packaging.requirements import Requirement


def test_the_wheel_is_a_valid_wheel_with_both_packages_and_the_page(url):
    name = httpx.get(f"{url}/dist/").json()["wheels"][0]
    assert name.startswith("glassllm-") and name.endswith("-py3-none-any.whl")
    data = httpx.get(f"{url}/dist/{name}").content
    files = zipfile.ZipFile(BytesIO(data)).namelist()
    version = name.split("-")[1]
    assert {"glassllm/apps/client.py", "glassllm/sandbox/wire.py", "glassllm_service/app.py",
            "glassllm_service/static/index.html", f"glassllm-{version}.dist-info/METADATA",
            f"glassllm-{version}.dist-info/RECORD"} <= set(files)
    assert not any("__pycache__" in f for f in files)
    assert httpx.get(f"{url}/dist/other.whl").status_code == 404


@pytest.mark.slow
def test_the_printed_install_command_installs_the_client_offline(url, tmp_path):
    """/dist/ prints a pip command (once `…whl[client]`: pip fetched a file of that name,
    404). Run exactly that command in a fresh venv, with --no-index: glassllm comes from
    the sandbox's URL, its dependencies (numpy, httpx and theirs) are found installed (a
    .pth to this test's own environment), so pip resolves the extra and downloads nothing
    else, on a course network with no package index as here."""
    listing = httpx.get(f"{url}/dist/").json()
    name = listing["wheels"][0]
    assert listing["urls"] == [f"{url}/dist/{name}"]
    assert httpx.head(listing["urls"][0]).status_code == 200
    command = shlex.split(listing["install"])
    assert command == ["pip", "install", f"glassllm[client] @ {url}/dist/{name}"]
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    deps = tmp_path / "deps"  # numpy, httpx and what httpx needs: nothing of glassllm
    deps.mkdir()
    for dist in _closure(["numpy", "httpx"]):
        for f in dist.files or []:
            top = f.parts[0]
            if not (deps / top).exists() and (Path(dist.locate_file(top))).exists():
                (deps / top).symlink_to(dist.locate_file(top))
    (Path(site) / "deps.pth").write_text(f"{deps}\n")
    done = subprocess.run([py, "-m", *command, "--no-index"], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "does not provide the extra" not in done.stdout + done.stderr
    code = ("import glassllm.apps.client, glassllm, sys; print(glassllm.apps.client.__file__);"
            f" r = glassllm.apps.client.Sandbox({url!r}).op('neg', {{'a': [1.0]}});"
            " print(r.value.tolist())")
    out = subprocess.run([py, "-c", code], capture_output=True, text=True, check=True,
                         cwd=tmp_path).stdout.splitlines()
    assert str(venv) in out[0] and out[1] == "[-1.0]"


def _closure(names: list[str]) -> list[importlib.metadata.Distribution]:
    """The installed distributions `names` need, theirs included (extras left out)."""
    seen: dict[str, importlib.metadata.Distribution] = {}
    todo = list(names)
    while todo:
        dist = importlib.metadata.distribution(todo.pop())
        key = dist.metadata["Name"].lower()
        if key in seen:
            continue
        seen[key] = dist
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return list(seen.values())


def test_the_wheel_cache_is_named_by_the_code_so_other_code_never_gets_a_stale_wheel(
        tmp_path, monkeypatch):
    """The wheel is kept per digest of its files; a sandbox from other code
    (another checkout, a newer commit, the same version number) builds its own wheel, and
    the wheel holds this code's files (a QA run found a months-old wheel served)."""
    from glassllm_service.routes import dist

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

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
    assert re.search(r"^ARG BASE=python:3\.\d+-slim$", text, re.M)   # a local base may replace it
    assert text.index("install.sh deps") < text.index("COPY . .") < text.index("install.sh app")
    assert re.search(r"^USER (?!root|0\b)\w+", text, re.M)
    assert re.search(r'^CMD \["glassllm-sandbox", "--host", "0\.0\.0\.0", "--port", "8000", '
                     r'"--workers", "auto"\]$', text, re.M)
    assert re.search(r'^    CMD \["python", "-c", ".*/healthz', text, re.M)  # exec form, no curl


def test_dockerfile_is_multi_stage_and_the_final_stage_downloads_nothing():
    """The builder downloads (with the build machine's CA as a BuildKit secret);
    the image is the base, /opt/venv and a user: no pip, no compiler, no machine's CA."""
    text = (ROOT / "Dockerfile").read_text()
    stages = re.split(r"^FROM ", text, flags=re.M)[1:]
    assert [s.split("\n", 1)[0] for s in stages] == ["${BASE} AS builder", "${BASE}"]
    final = stages[1]
    assert "COPY --from=builder /opt/venv /opt/venv" in final
    assert [line for line in final.splitlines() if line.startswith("RUN")] == [
        "RUN useradd --system --uid 10001 --no-create-home --home-dir /nonexistent \\"]
    assert text.count("--mount=type=secret,id=pip_ca") == 2           # only the pip steps
    assert "ca-certificates.crt" not in text and "/etc/ssl" not in text
    # every GLASSLLM_* setting reaches the sandbox from `docker run -e`: none is pinned here
    assert not re.search(r"^(ENV|ARG) .*GLASSLLM_", text, re.M)


def test_install_uses_the_lock_with_hashes():
    script = (ROOT / "docker" / "install.sh").read_text()
    assert "--require-hashes" in script and "requirements/service.lock" in script
    lock = (ROOT / "requirements" / "service.lock").read_text()
    pinned = re.findall(r"^([a-z0-9._-]+)==", lock, re.M)
    assert {"numpy", "fastapi", "uvicorn", "orjson", "pydantic", "fastapi-offline"} <= set(pinned)
    assert lock.count("==") == len(pinned) <= lock.count("--hash=sha256:")
    assert not re.search(r"^--(extra-)?index-url|^--find-links|file://", lock, re.M)  # no
    # machine's index: the image and CI use whatever index their machine is given


def test_wheel_install_and_start_in_a_fresh_venv(tmp_path: Path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    src = tmp_path / "src"           # a clean copy, as `COPY . .` with .dockerignore gives
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".venv", ".git", "__pycache__", "dist", "build", "test-artifacts", ".*_cache"))
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path)}
    for step in ("deps", "wheelhouse", "app"):
        subprocess.run(["sh", "docker/install.sh", step], cwd=src, env=env, check=True,
                       timeout=600)
    py = str(venv / "bin" / "python")
    # from elsewhere, only the installed wheel answers: its two import names, not `service`
    names = subprocess.run([py, "-c", "import glassllm, glassllm_service; print('ok')"],
                           cwd=tmp_path, env=env, capture_output=True, text=True)
    assert names.stdout == "ok\n", names.stderr
    generic = subprocess.run([py, "-c", "import service"], cwd=tmp_path, env=env,
                             capture_output=True, text=True)
    assert generic.returncode == 1 and "No module named 'service'" in generic.stderr
    with running_sandbox(command=[str(venv / "bin" / "glassllm-sandbox")], cwd=tmp_path) as url:
        assert httpx.get(f"{url}/healthz").json() == {"status": "ok"}
        r = httpx.post(f"{url}/api/v1/ops/softmax_np", json={"inputs": {"x": [[1000.0, 1000.0]]}})
        assert r.json()["value"] == [[0.5, 0.5]]
        assert "<html" in httpx.get(f"{url}/").text.lower()
        assert httpx.get(f"{url}/docs-assets/swagger-ui.css").status_code == 200
        assert "Part L" in httpx.get(f"{url}/docs/contract/").text      # the docs shipped
        # the wheelhouse in the venv, served with no setting: the built wheel among them
        index = httpx.get(f"{url}/simple/").text
        assert {"glassllm/", "numpy/", "httpx/", "anyio/"} <= set(re.findall(r'href="([^"]+)"',
                                                                             index))
        assert re.search(r'href="glassllm-0\.1\.0-py3-none-any\.whl#sha256=[0-9a-f]{64}"',
                         httpx.get(f"{url}/simple/glassllm/").text)
        # the training runner starts by its installed name and streams a run to its end
        tiny = {"model": {"d_model": 8, "n_layers": 1, "n_heads": 2, "n_kv_heads": 1,
                          "ffn_hidden": 8, "max_seq_len": 8}, "steps": 2, "every": 1}
        with httpx.stream("POST", f"{url}/api/v1/train", json=tiny, timeout=60) as stream:
            events = [line.removeprefix("event:").strip() for line in stream.iter_lines()
                      if line.startswith("event:")]
        assert events[:2] == ["queued", "start"] and events[-1] == "done", events
        # the client of the wheel, with the client extra's packages (pinned, hashed)
        pins = tmp_path / "client.lock"
        pins.write_text(_pins(("httpx", "httpcore", "certifi")))
        subprocess.run([py, "-m", "pip", "install", "--quiet", "--require-hashes", "--no-deps",
                        "-r", str(pins)], env=env, check=True, timeout=600)
        answer = subprocess.run([py, "-c", "import sys; from glassllm.client import Sandbox;"
                                 " print(Sandbox(sys.argv[1]).op('neg', {'a': [1.5]}).value)",
                                 url], cwd=tmp_path, env=env, capture_output=True, text=True)
        assert answer.stdout == "[-1.5]\n", answer.stderr


def _pins(names: tuple[str, ...]) -> str:
    """The entries of requirements/test.lock for these packages, hashes and all."""
    blocks = re.split(r"(?m)^(?=[a-z0-9._-]+==)", (ROOT / "requirements" / "test.lock").read_text())
    return "".join(b.split("    # via")[0].rstrip() + "\n" for b in blocks
                   if b.split("==", 1)[0] in names)


@pytest.mark.parametrize(("lock", "extras"), [
    ("service.lock", ("service",)),
    ("test.lock", ("service", "train", "test")),
])
def test_each_lock_pins_every_dependency_of_pyproject(lock, extras):
    """A dependency added to pyproject.toml without `make lock` fails here, named, rather
    than as an ImportError in the image or in CI (installs come from the locks)."""
    import tomllib

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = [Requirement(r) for r in project["dependencies"]]
    for extra in extras:
        wanted += [Requirement(r) for r in project["optional-dependencies"][extra]]
    text = (ROOT / "requirements" / lock).read_text()
    pinned = {canonicalize_name(n): v for n, v in re.findall(r"^([A-Za-z0-9._-]+)==(\S+)", text,
                                                           re.M)}
    for req in wanted:
        name = canonicalize_name(req.name)
        if name == "glassllm":                       # the test extra names its own extras
            continue
        assert name in pinned, f"{req.name} is not in requirements/{lock}: run make lock"
        assert req.specifier.contains(pinned[name], prereleases=True), (
            f"requirements/{lock} pins {req.name}=={pinned[name]}, pyproject.toml wants"
            f" {req}: run make lock")

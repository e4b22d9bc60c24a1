"""glassllm installs from the sandbox alone: a real sandbox serves a PEP 503 index at
/simple/ (glassllm's own wheel and the wheels of GLASSLLM_WHEELHOUSE), and a fresh venv
whose pip knows no other index (no config file, no find-links, no cache) installs
"glassllm[client]" from it, then the client runs an op against the sandbox. The course
image does the same against the image (docker/test.sh)."""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import re
import subprocess
import sys
import venv

import httpx
import pytest
from sandbox_server import running_sandbox

pytestmark = pytest.mark.slow

# what glassllm[client] needs, at the versions this venv runs (the machine's mirror has them)
CLIENT = ["numpy", "httpx", "httpcore", "anyio", "certifi", "idna", "h11", "typing_extensions"]


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory):
    folder = tmp_path_factory.mktemp("wheelhouse")
    pins = [f"{name}=={importlib.metadata.version(name)}" for name in CLIENT]
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                    "--only-binary=:all:", "--dest", str(folder), *pins], check=True)
    return folder


@pytest.fixture(scope="module")
def url(wheelhouse):
    with running_sandbox(env={"GLASSLLM_WHEELHOUSE": str(wheelhouse)}) as u:
        yield u


def test_the_index_lists_every_project_with_hashed_relative_links(url, wheelhouse):
    root = httpx.get(f"{url}/simple/")
    assert root.status_code == 200 and root.headers["content-type"].startswith("text/html")
    names = re.findall(r'<a href="([^"]+)/">', root.text)
    assert set(names) == {"glassllm", "numpy", "httpx", "httpcore", "anyio", "certifi",
                          "idna", "h11", "typing-extensions"}          # PEP 503 normalized
    page = httpx.get(f"{url}/simple/typing-extensions/").text
    (href,) = re.findall(r'<a href="([^"]+)">', page)
    filename, digest = href.split("#sha256=")
    assert "/" not in filename                                         # relative
    body = httpx.get(f"{url}/simple/typing-extensions/{filename}").content
    assert hashlib.sha256(body).hexdigest() == digest
    assert body == (wheelhouse / filename).read_bytes()
    moved = httpx.get(f"{url}/simple/Typing_Extensions/")
    assert moved.status_code == 301 and moved.headers["location"] == "../typing-extensions/"
    assert httpx.get(f"{url}/simple/glassllm").headers["location"] == "glassllm/"
    assert httpx.get(f"{url}/simple/left-pad/").status_code == 404
    assert httpx.get(f"{url}/simple/numpy/..%2F..%2Fetc%2Fpasswd").status_code == 404


def test_a_fresh_venv_installs_the_client_from_the_sandbox_alone(url, tmp_path):
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    isolated = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    isolated |= {"PIP_CONFIG_FILE": os.devnull, "PIP_NO_CACHE_DIR": "1",
                 "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    subprocess.run([py, "-m", "pip", "install", "--quiet", "--index-url", f"{url}/simple/",
                    "glassllm[client]"], env=isolated, check=True, timeout=300)
    out = subprocess.run([py, "-c", "import sys; from glassllm.client import Sandbox;"
                          " r = Sandbox(sys.argv[1]).op('mul', {'a': [1.0, 2.0], 'b': [3.0, 4.0]});"
                          " print(r.value.tolist(), r.grads['a'].tolist())", url],
                         env=isolated, capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[3.0, 8.0] [3.0, 4.0]"
    listed = subprocess.run([py, "-m", "pip", "list", "--format=freeze"], env=isolated,
                            capture_output=True, text=True, check=True).stdout
    assert "fastapi" not in listed                       # the client, not the service
